"""GradBench's ``ode`` eval: s steps of fourth-order Runge-Kutta on y' = f(y), f(y)_0 = x_0 and
f(y)_i = x_i y_{i-1}, from y = 0 to t = 2; the gradient is that of the last component."""

import numpy as np

import ast_ad

from .wrap import timed


def field(x, y):
    """f(y)_0 = x_0, f(y)_i = x_i y_(i-1): the product of two shifted views, the first entry put
    before it (written before as a join of ``y`` shifted, then sliced: one more array a call)."""
    return np.concatenate([x[:1], x[1:] * y[:-1]])


def ode(x, s):
    h = 2.0 / s
    y = np.zeros(x.shape[0])
    for _ in range(s):
        k1 = field(x, y)
        k2 = field(x, y + h / 2 * k1)
        k3 = field(x, y + h / 2 * k2)
        k4 = field(x, y + h * k3)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y


def last(x, s):
    return ode(x, s)[-1]


def _input(raw):
    return np.array(raw["x"], dtype=np.float64), int(raw["s"])


gradient_of_last = ast_ad.grad(last)

FUNCTIONS = {
    "primal": timed(pre=_input, post=lambda y: y.tolist())(lambda given: ode(*given)),
    "gradient": timed(pre=_input, post=lambda g: g.tolist())(
        lambda given: gradient_of_last(*given)
    ),
}
