"""GradBench's ``lse`` eval: log-sum-exp, with the max trick, and its gradient."""

import numpy as np

import ast_ad

from .wrap import timed


def logsumexp(x):
    a = np.max(x)
    return np.log(np.sum(np.exp(x - a))) + a


def _x(raw):
    return np.array(raw["x"], dtype=np.float64)


gradient_of_lse = ast_ad.grad(logsumexp)

FUNCTIONS = {
    "primal": timed(pre=_x, post=float)(logsumexp),
    "gradient": timed(pre=_x, post=lambda g: g.tolist())(gradient_of_lse),
}
