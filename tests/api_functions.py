"""Functions the API tests differentiate (they need real source files)."""

import math
import math as m
from math import sin as msin

import numpy
import numpy as np
import numpy as xp
from numpy import log, sin

import ast_ad
from ast_ad.extend import def_nondiff, defvjp

SCALE = 2.0
BIAS = np.array([1.0, 2.0, 3.0])


def worked(x1, x2):
    return np.log(x1) + x1 * x2 - np.sin(x2)


def worked_numpy(x1, x2):
    return numpy.log(x1) + x1 * x2 - numpy.sin(x2)


def worked_from_import(x1, x2):
    return log(x1) + x1 * x2 - sin(x2)


def worked_alias(x1, x2):
    return xp.log(x1) + x1 * x2 - xp.sin(x2)


def worked_math(x1, x2):
    return math.log(x1) + x1 * x2 - math.sin(x2)


def worked_math_aliases(x1, x2):
    return m.log(x1) + x1 * x2 - msin(x2)


@ast_ad.grad
def decorated(x):
    return x * x * SCALE


@ast_ad.grad(argnums=1)
def decorated_argnums(x, y):
    return x * y * y


def uses_global(x):
    return np.sum(x * BIAS) * SCALE


def with_defaults(x, y=3.0, *, k=2.0):
    return x * y * k


def unhygienic(x, x_bar, out, t1, g, ans, np_):
    out_bar = x * x_bar
    t2 = out_bar + out * t1
    unbroadcast = t2 * g * ans
    return unbroadcast + np_ + np.sin(x)


def shadowing(np, x):
    y = x * np
    return y * x


def softplus(x):
    return np.log1p(np.exp(x))


calls = {"n": 0}


def softplus_grad(g, ans, x):
    calls["n"] += 1
    return g / (1.0 + np.exp(-x))


defvjp(softplus, softplus_grad)


def uses_softplus(x):
    return np.sum(softplus(x) * 2.0)


def step(x):
    return float(x > 0)


def_nondiff(step)


def uses_step(x):
    return step(x) * x * 3.0


def callee(a, b=2.0):
    return a * b


def caller(x):
    return callee(x) + callee(x, b=x) + callee(b=3.0, a=x)


class Model:
    def __init__(self, w):
        self.w = w

    def loss(self, x):
        return x * x * 3.0


def make_scaled(k):
    def scaled(x):
        return math.sin(x) * k
    return scaled


def mutating_looking(x):
    y = x * 1.0
    y += 1.0
    y *= 2.0
    x += 3.0
    return np.sum(y * x)


def aliasing(x):
    y = x
    y += 1.0
    return np.sum(y * x)


def aliasing_in_a_loop(x):
    y = x
    for _ in range(2):
        y += 1.0  # the first += changes x too
    return np.sum(y * x)


def raises_inside(x):
    y = np.log(x)
    return y * x


def prints(x):
    print("x is", x)
    return x * 2.0


def shared_sum(x, y):
    t = x + y
    return np.sum(t * t)


def container_model(params, x):
    return (
        np.sum(np.tanh(params["w"] @ x + params["b"]) ** 2)
        + params["scale"][0] * params["scale"][1]
    )


def scaled_sines(x, a):
    return np.sum(np.sin(x) * a)
