"""A function that tests/test_errors.py gives a broken gradient rule, and a helper (in this file)
that calls it."""

import numpy as np


def doubled(x):
    return x * 2.0


def helper(x):
    y = np.sin(x)
    return np.sum(doubled(y))  # error here
