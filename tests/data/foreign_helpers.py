"""Helpers of another module that change their arguments (``tests/test_memory.py``)."""

import numpy as np

LIMIT = 0.5


def fill(a, v):
    a[0] = v * np.sin(a[1])


def scale_rows(m, s):
    for i in range(m.shape[0]):
        m[i] *= s
    return np.sum(m)


def clip_at_limit(a):
    a[a > LIMIT] = LIMIT
