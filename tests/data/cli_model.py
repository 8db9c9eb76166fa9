"""A module for the command-line and export tests."""

import math

import numpy as np

SCALE = np.array([1.0, 2.0, 3.0])


def f(x1, x2):
    return np.log(x1) + x1 * x2 - np.sin(x2)


def helper(v, k=2.0):
    return np.tanh(v) * k


def loop(x):
    for _ in range(5):
        x = x * 0.9 + math.sin(x) * 0.2
    return x


def model(w, b):
    total = 0.0
    for i in range(3):
        total = total + np.sum(helper(w * SCALE[i] + b) ** 2)
    if total > 1.0:
        total = total * 0.5
    return total + np.sum(np.maximum(w, 0.0))


def broken(x):
    return x * undefined_name  # noqa: F821


def repeated(x, n):
    for _ in range(n):
        x = x * 0.5
    return x


def neighbours(x):
    """A loop that reads entries of an array argument: its adjoint starts as the float zero and is
    added into entry by entry (``owned_adjoint``)."""
    total = 0.0
    for i in range(1, 4):
        total = total + x[i] * x[i - 1]
    return total


def two_products(w, u, x, y):
    return np.sum(np.tanh(np.dot(w, x) + np.dot(u, y)))
