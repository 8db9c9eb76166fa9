"""Functions that use numpy's breadth: indexing, in-place updates, methods, containers, linear algebra."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from tests.corpus import Case
from tests.strategies import arrays


def reads(x):
    m = np.reshape(x, (3, 4))
    return (np.sum(m[1, ::2] * m[-1, 1:3].sum()) + np.sum(m[..., 0] ** 2) + np.sum(m[None, :, 1])
            + np.sum(m[np.array([0, 2, 2]), 1]) + np.sum(m[m > 0.5]) + np.sum(m[1:, [0, 3]] * 2.0))


def writes(x):
    y = np.zeros(6)
    y[0] = x[1] * 2.0
    y[1:3] = x[:2] ** 2
    y[-1] += x[3]
    y[y > 1.5] = 0.0
    for i in range(3):
        y[i] *= x[i]
    return np.sum(y * y)


def writes_into_argument(x):
    x[0] = np.sin(x[1])
    x[1:3] *= 3.0
    x += 1.0
    return np.sum(x ** 2)


def methods(x):
    m = x.reshape(3, 4)
    return (m.sum(axis=0).dot(m.max(axis=0)) + m.T.ravel()[0] * m.std()
            + m.copy().clip(-0.5, 0.5).sum() + m.prod(axis=1).sum() + m.cumsum(axis=1)[:, -1].sum()
            + m.astype(np.float64).var() + m.transpose(1, 0)[0].sum() + m.flatten()[3])


def container_params(params, x):
    h = np.tanh(x @ params["w"] + params["b"])
    W2, b2 = params["out"]
    return np.mean((h @ W2 + b2) ** 2)


def layer_list(layers, x):
    for W in layers:
        x = np.tanh(W @ x)
    return np.sum(x * x)


def linear_algebra(a):
    m = np.reshape(a, (3, 3)) + 7.0 * np.eye(3)  # entries in [-2, 2]: diagonally dominant, never singular
    s = m @ m.T + np.eye(3)
    sign, logdet = np.linalg.slogdet(s)
    w, v = np.linalg.eigh(s)
    return (np.sum(np.linalg.inv(m)) + logdet + np.sum(np.linalg.solve(m, np.ones(3)))
            + np.trace(np.linalg.cholesky(s)) + np.sum(w) + np.linalg.norm(m) + np.linalg.det(m) * 0.01)


def shapes_and_joins(x):
    m = np.reshape(x, (3, 4))
    parts = np.split(m, 2, axis=1)
    joined = np.concatenate([parts[1], parts[0] * 2.0], axis=0)
    stacked = np.vstack([m[0], m[2]]) + np.hstack([m[1, :2], m[1, 2:]])
    return (np.sum(joined * np.tile(m[:, :1], (2, 2))) + np.sum(stacked) + np.sum(np.roll(m, 1, axis=1) * m)
            + np.sum(np.pad(m, 1)) + np.sum(np.repeat(m, 2, axis=0)[::3]) + np.sum(np.flip(m) * np.sort(m, axis=1))
            + np.sum(np.einsum("ij,ij->i", m, m)) + np.sum(np.triu(m) - np.tril(m, -1)) + np.sum(np.diag(m)))


def float32_chain(x):
    return np.sum(np.tanh(x * np.float32(2.0)) ** 2)


# Twelve well-separated values, away from the kinks of clip(-0.5, 0.5), in a random order.
DISTINCT = st.permutations(range(12)).map(lambda p: np.array(p, dtype=float) * 0.3 - 1.65)

CASES = [
    Case(reads, st.tuples(arrays((12,)).filter(lambda a: np.all(np.abs(a - 0.5) > 1e-3)))),
    Case(writes, st.tuples(arrays((4,))).filter(  # no entry of y at the mask's threshold, 1.5
        lambda a: np.all(np.abs(a[0][:2] ** 2 - 1.5) > 1e-3) and abs(a[0][1] * 2.0 - 1.5) > 1e-3
        and abs(a[0][3] - 1.5) > 1e-3), autograd=False),
    Case(writes_into_argument, st.tuples(arrays((5,))), autograd=False),
    Case(methods, st.tuples(DISTINCT), autograd=False),
    Case(container_params, st.tuples(st.fixed_dictionaries(
        {"w": arrays((3, 4)), "b": arrays((4,)), "out": st.tuples(arrays((4, 2)), arrays((2,)))}), arrays((5, 3)))),
    Case(layer_list, st.tuples(st.lists(arrays((3, 3)), min_size=1, max_size=3), arrays((3,)))),
    Case(linear_algebra, st.tuples(arrays((9,)))),
    Case(shapes_and_joins, st.tuples(DISTINCT)),
    Case(float32_chain, st.tuples(arrays((4,)).map(lambda a: a.astype(np.float32))), smooth=False),
]
