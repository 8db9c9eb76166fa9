"""Functions whose Hessians are checked against autograd's (a module of their own, so that
``with_autograd_numpy`` converts only these)."""

import numpy as np


def rnn_loss(w, x):
    h = np.zeros(3)
    for t in range(4):
        h = np.tanh(w @ h + x[t])
    return np.sum(h ** 2) + 0.1 * np.sum(w * w)


def branchy(x):
    total = 0.0
    for i in range(3):
        if x[i] > 0:
            total = total + np.exp(x[i]) * x[0]
        else:
            total = total - x[i] ** 3
    return total + np.sum(np.log1p(x * x))


def reductions(x):
    return np.max(x) * np.mean(x ** 2) + np.var(x) - np.sqrt(np.sum(x * x))


def solves(x):
    a = 3.0 * np.eye(3) + np.outer(x, x)
    return np.sum(np.linalg.solve(a, x) ** 2) + np.std(x) * np.sum(x) + np.linalg.norm(x) * x[0]
