"""GradBench's ``gmm`` eval: the log posterior of a Gaussian mixture with a Wishart prior on its
precision matrices (the ADBench objective, with GradBench's three fixes), and its gradient in alpha,
mu, q and l."""

import math

import numpy as np

import ast_ad

from .wrap import timed


def logsumexp(v, axis):
    top = np.max(v, axis=axis, keepdims=True)
    return np.squeeze(top, axis=axis) + np.log(np.sum(np.exp(v - top), axis=axis))


def log_posterior(alpha, mu, q, lower, x, gamma, m, rows, cols, constant):
    """``constant`` holds the terms without parameters (the Gaussians' and the Wishart's
    normalisers)."""
    n, d = x.shape
    k = alpha.shape[0]
    tri = np.zeros((k, d, d))
    tri[:, rows, cols] = lower  # the strictly lower part (the eval's l), column by column
    tri = tri + np.exp(q)[:, :, None] * np.eye(d)
    centred = x[:, None, :] - mu[None, :, :]
    mahalanobis = np.einsum("kab,nkb->nka", tri, centred, optimize=True)
    beta = alpha[None, :] - 0.5 * np.sum(mahalanobis ** 2, axis=2) + np.sum(q, axis=1)[None, :]
    likelihood = np.sum(logsumexp(beta, 1)) - n * logsumexp(alpha, 0)
    frobenius = np.sum(np.exp(q) ** 2) + np.sum(lower ** 2)
    return likelihood - 0.5 * gamma ** 2 * frobenius + m * np.sum(q) + constant


def _input(raw):
    d, k, n, m, gamma = (
        int(raw["d"]),
        int(raw["k"]),
        int(raw["n"]),
        int(raw["m"]),
        float(raw["gamma"]),
    )
    cols, rows = (
        np.array([(j, i) for j in range(d) for i in range(j + 1, d)], dtype=int).reshape(-1, 2).T
    )
    dof = d + m + 1
    log_gamma_d = d * (d - 1) / 4 * math.log(math.pi) + sum(
        math.lgamma(dof / 2 + (1 - j) / 2) for j in range(1, d + 1)
    )
    constant = -n * d / 2 * math.log(2 * math.pi) + k * (
        dof * d * math.log(gamma / math.sqrt(2)) - log_gamma_d
    )
    parameters = tuple(np.array(raw[name], dtype=np.float64) for name in ("alpha", "mu", "q", "l"))
    return parameters + (np.array(raw["x"], dtype=np.float64), gamma, m, rows, cols, constant)


gradient = ast_ad.grad(log_posterior, argnums=(0, 1, 2, 3))


def _independent(grads):
    return {name: g.tolist() for name, g in zip(("alpha", "mu", "q", "l"), grads, strict=True)}


FUNCTIONS = {
    "objective": timed(pre=_input, post=float)(lambda given: log_posterior(*given)),
    "jacobian": timed(pre=_input, post=_independent)(lambda given: gradient(*given)),
}
