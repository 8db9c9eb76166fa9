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


# ---- second derivatives through the helpers of reductions, products and factorizations -----------
# (each helper's forward rule, ast_ad/rules/runtime.py; autograd differentiates the first group
# twice, and for the second the oracle is central differences of ast_ad's own gradient)
def prod_along_rows(x):
    return np.sum(np.prod(np.reshape(x, (2, 3)), axis=1) ** 2) + np.prod(x[:4]) * np.sum(x)


def kron_of_parts(x):
    return np.sum(np.kron(x[:2], np.cos(x[2:4])) ** 3) + np.sum(
        np.kron(np.reshape(x[:4], (2, 2)), x[4:]) ** 2
    )


def sinc_weighted(x):
    return np.sum(np.sinc(x) * x)


def cholesky_of_gram(x):
    a = np.reshape(x, (3, 2))
    return np.sum(np.sin(np.linalg.cholesky(a.T @ a + np.eye(2))))


def eigh_of_sum(x):
    a = np.reshape(x[:4], (2, 2))
    w, v = np.linalg.eigh(a + a.T)
    return np.sum(w ** 3) + np.sum(v[0] ** 2 * w)


def pinv_of_tall(x):
    return np.sum(np.linalg.pinv(np.reshape(x, (3, 2))) ** 2)


def svd_of_tall(x):
    u, s, vt = np.linalg.svd(np.reshape(x, (3, 2)), full_matrices=False)
    return (
        np.sum(s**3)
        + np.sum(u[:, 0] * s[0]) ** 2
        + np.sum(np.linalg.svd(np.reshape(x, (2, 3)), compute_uv=False))
    )


def multi_dot_chain(x):
    a = np.reshape(x[:4], (2, 2))
    return np.sum(np.linalg.multi_dot([a, np.sin(a), a.T]))


def einsum_chain(x):
    a = np.reshape(x, (2, 3))
    return np.sum(np.einsum("ij,kj->ik", a, np.sin(a)) ** 2) + np.einsum(
        "i,i,i->", x[:2], x[2:4], x[4:]
    )


def cumprod_weighted(x):
    return np.sum(np.cumprod(x) * np.sin(x)) + np.sum(np.cumprod(np.reshape(x, (2, 3)), axis=1))


def weighted_average(x):
    return (
        np.average(np.sin(x), weights=x**2 + 1.0) * np.sum(x)
        + np.average(np.reshape(x, (2, 3)), axis=1, weights=x[3:] ** 2 + 0.5)[0]
    )


def convolved(x):
    return np.sum(np.convolve(x, np.sin(x[:3])) ** 2) + np.sum(
        np.correlate(x, np.cos(x[:2]), "same") ** 2
    )


def matrix_cubed(x):
    return np.sum(np.linalg.matrix_power(np.reshape(x[:4], (2, 2)), 3) ** 2)


def qr_of_tall(x):
    q, r = np.linalg.qr(np.reshape(x, (3, 2)))
    return np.sum(r ** 2) + np.sum(np.sin(q))


def polynomial_of_itself(x):
    return np.sum(np.polyval(x[:3], x[3:]) ** 2)


def nan_skipping_mean(x):
    return np.nanmean(np.where(x > 1.5, np.nan, x) ** 3)


def list_read_back(x):
    """A list built in a loop, then read back in reverse: its gradient pops the list's adjoint."""
    xs = []
    for _ in range(5):
        xs.append(x)
        x = x * 0.99 + np.sin(x) * 0.1
    g = 0.0
    for v in reversed(xs):
        g = g * 0.5 + np.cos(v)
    return np.sum(g)
