"""Functions that name scipy.special, for the test that its rules are registered lazily."""

import scipy.special
from scipy.special import erf


def uses_erf(x):
    return erf(x)


def uses_module(x):
    return scipy.special.erf(x) * 2.0
