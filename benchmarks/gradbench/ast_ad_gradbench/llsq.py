"""GradBench's ``llsq`` eval: a linear least-squares fit of sign(t) by a polynomial, at n points t
in [-1, 1]."""

import numpy as np

import ast_ad

from .wrap import timed


def llsq(x, n):
    """sum over i of (sign(t_i) - sum_j x_j t_i^j)^2 / 2, t_i = -1 + 2 i / (n - 1).

    The powers of ``t`` are its Vandermonde matrix (``np.vander``: one product a column, where
    ``t[:, None] ** np.arange(m)`` calls ``pow`` for each entry, 13 times slower at n = 16,392,
    m = 128); they do not depend on ``x``, so ast_ad computes them as written."""
    t = -1.0 + np.arange(n) * 2.0 / (n - 1.0)
    powers = np.vander(t, x.shape[0], increasing=True)
    residual = np.sign(t) - powers @ x
    return np.sum(residual * residual) / 2.0


def _input(raw):
    return np.array(raw["x"], dtype=np.float64), int(raw["n"])


gradient_of_llsq = ast_ad.grad(llsq)

FUNCTIONS = {
    "primal": timed(pre=_input, post=float)(lambda given: llsq(*given)),
    "gradient": timed(pre=_input, post=lambda g: g.tolist())(
        lambda given: gradient_of_llsq(*given)
    ),
}
