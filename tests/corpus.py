"""Functions in the supported language, with strategies for their arguments.

Each entry: (function, argument strategy, flags). ``smooth=False`` marks
functions with kinks (max, clip, where), where finite differences near a kink
mean nothing; ``autograd=False`` marks functions autograd cannot run (math.*).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

from tests.strategies import arrays, broadcast_pair, floats, shapes, values

W = np.linspace(-1.0, 1.0, 12).reshape(3, 4)


def worked(x1, x2):
    return np.log(x1) + x1 * x2 - np.sin(x2)


def worked_arrays(x1, x2):
    return np.sum(np.log(x1) + x1 * x2 - np.sin(x2))


def poly(x):
    return np.sum(3.0 * x ** 3 - 2.0 * x ** 2 + x - 7.0)


def chain(x):
    y = np.sin(x)
    z = np.exp(y) * y
    return np.sum(z / (1.0 + z ** 2))


def broadcasting(a, b):
    return np.sum(a * b + np.tanh(a - b) - b / (2.0 + a * a))


def reassign(x):
    y = x * x
    y = y * x
    y += x
    y *= 0.5
    y -= np.cos(x)
    y /= 3.0
    return np.sum(y)


def scalar_math(x, y):
    return math.exp(math.sin(x)) * math.sqrt(y) + math.atan2(y, x) - math.hypot(x, y) + math.log(y, 2.0)


def divisions(x, y):
    return np.sum(x / y - y / x + np.reciprocal(y))


def layer(x):
    h = np.tanh(W @ x)
    return np.sum(h ** 2) + np.mean(h * x[:3])


def products(a, b):
    return np.sum(np.dot(a, b.T)) + np.sum(np.matmul(a.T, b) ** 2)


def literal_operands(m, v):
    # nested lists as matmul operands: the rules must not assume arrays
    return np.sum(np.matmul(m, [[1.0, 2.0], [3.0, -1.0], [0.5, 0.0], [2.0, 1.0]]) ** 2) \
        + np.sum(np.matmul([[0.5, -1.0], [2.0, 1.0]], v) * v) + np.sum(np.matmul([1.0, 2.0], np.tanh(v)))


def reductions(x):
    m = np.mean(x, axis=0)
    s = np.sum(x, axis=-1, keepdims=True)
    return np.sum(m ** 2) + np.sum(s * x) + x.sum() * x.mean()


def _pair(a, b=2.0):
    return a * b, np.sin(a)


def _scale(v, k=3.0):
    return np.sum(v) * k


def user_calls(x, y):
    p, q = _pair(x, b=y)
    return np.sum(p * q) + _scale(x) + _scale(x * y, k=y)


def tuples(x):
    a, b = x * 2.0, np.cos(x)
    (c, d), e = (a, b), a - b
    return np.sum(a * b + c * d - e)


def indexing(x):
    return x[0] * x[-1] + np.sum(x[1:3] ** 2) + np.sum(x[::2])


def kinks(x, y):
    return np.sum(np.where(x > 0.5, x ** 2, -x) + np.clip(x, 0.2, 0.8) + np.maximum(x, y) * np.minimum(x, 2.0 * y))


def make_closure(k):
    def inner(x):
        return np.sum(k * x ** 2 + np.sin(k * x))
    return inner


closure = make_closure(1.5)


def shapes_and_ints(x, n):
    y = np.reshape(x, (2, 3)).T
    return np.sum(y @ np.ones(2) * n) + n + x.shape[0] + x.ndim


def powers(x, y):
    return np.sum(x ** y + np.power(y, x) + np.sqrt(x) * np.square(y))


def signs(x):
    return np.sum(abs(-x) + np.abs(x) * +x + np.negative(x))


def effects(x):
    """Statements that touch no gradient pass through."""
    assert np.all(np.isfinite(x)), "finite input"
    n = np.shape(x)
    pass
    y = x * 2.0
    f"{n}"
    return np.sum(y * y)


def hyperbolic(x):
    return np.sum(np.sinh(x) * np.cosh(x) + np.arctan(x) + np.arcsin(x / 2.0) + np.arccos(x / 3.0)
                  + np.expm1(x) + np.log1p(x * x) + np.exp2(x) + np.tan(x / 2.0))


def logs(x):
    return np.sum(np.log2(x) + np.log10(x) + np.arctan2(x, 1.0 + x))


def dead_code(x, y):
    unused = np.sin(y) * x
    return np.sum(x * 3.0) + 0.0 * np.sum(unused * 0.0)


@dataclass(frozen=True)
class Case:
    fn: Callable[..., Any]
    args: st.SearchStrategy[tuple]
    argnums: tuple[int, ...] = (0,)
    smooth: bool = True
    autograd: bool = True


m34 = st.tuples(arrays((3, 4)), arrays((3, 4)))
CASES = [
    Case(worked, st.tuples(floats("pos"), floats()), (0, 1)),
    Case(worked_arrays, st.tuples(arrays((3,), "pos"), arrays((2, 1))), (0, 1)),
    Case(poly, st.tuples(values())),
    Case(chain, st.tuples(values())),
    Case(broadcasting, broadcast_pair(), (0, 1)),
    Case(reassign, st.tuples(values())),
    Case(scalar_math, st.tuples(floats("away"), floats("pos")), (0, 1), autograd=False),
    Case(divisions, st.tuples(arrays((2, 3), "away"), arrays((3,), "pos")), (0, 1)),
    Case(layer, st.tuples(arrays((4,)))),
    Case(products, m34, (0, 1)),
    Case(literal_operands, st.tuples(arrays((3, 4)), arrays((2,))), (0, 1)),
    Case(reductions, st.tuples(shapes(2, 3).flatmap(lambda s: arrays(s)))),
    Case(user_calls, st.tuples(arrays((3,)), floats()), (0, 1)),
    Case(tuples, st.tuples(values())),
    Case(indexing, st.tuples(arrays((5,)))),
    Case(kinks, st.tuples(arrays((4,)), arrays((4,))), (0, 1), smooth=False),
    Case(closure, st.tuples(values())),
    Case(shapes_and_ints, st.tuples(arrays((6,)), st.integers(1, 4))),
    Case(powers, st.tuples(arrays((3,), "pos"), arrays((3,), "pos")), (0, 1)),
    Case(signs, st.tuples(arrays((4,), "away")), autograd=False),  # autograd has no unary +
    Case(effects, st.tuples(values())),
    Case(hyperbolic, st.tuples(arrays((3,), "unit"))),
    Case(logs, st.tuples(values("pos"))),
    Case(dead_code, st.tuples(values(), floats()), (0, 1)),
]
