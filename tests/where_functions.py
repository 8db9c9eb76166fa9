"""np.where whose unselected branch is not finite there (``test_where``)."""

import numpy as np


def sqrt_or_linear(x):
    return np.sum(np.where(x > 0, np.sqrt(x), 2 * x))


def sinc(x):
    return np.sum(np.where(x == 0, 1.0, np.sin(x) / x))


def guarded_softplus(x):
    return np.sum(np.where(x > 30, x, np.log1p(np.exp(x))))


def log_or_zero(x, w):
    y = np.log(x) * w
    return np.sum(np.where(x > 0, y, 0.0) * w)


def nested(x):
    inner = np.where(x < 4.0, np.sqrt(4.0 - x), 0.0)
    return np.sum(np.where(x > 0, np.log(x) + inner, x * x))


def read_elsewhere(x):
    s = np.sqrt(x)  # read twice: left as written
    return np.sum(np.where(x > 0, s, 0.0)) + np.sum(s * 0.0)


def through_a_reduction(x):
    # the mean reads x as it is: an input of the branch
    m = np.sqrt(x) - np.mean(np.sqrt(np.abs(x)))
    return np.sum(np.where(x > 0, m, x))
