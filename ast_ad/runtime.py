"""Helpers that generated gradient code and rules call.

Each helper is a small self-contained function over numpy, so that an exported
gradient module can carry its own copy of the ones it uses.

>>> unbroadcast(np.ones((2, 3)), np.zeros(3))
array([2., 2., 2.])
"""

from __future__ import annotations

import numpy as np


def unbroadcast(g, x):
    """Sum ``g`` down to the shape of ``x``, undoing numpy broadcasting."""
    shape = getattr(x, "shape", None)
    if shape is not None and getattr(g, "shape", None) == shape:
        return g
    shape = np.shape(x)
    if np.shape(g) == shape:
        return g
    g = np.asarray(g)
    if g.ndim > len(shape):
        g = g.sum(axis=tuple(range(g.ndim - len(shape))))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return np.broadcast_to(g, shape) if g.shape != shape else g


def zeros_like(x):
    """A zero adjoint for ``x``: a float for scalars, a tuple or list for tuples and lists."""
    if isinstance(x, tuple):
        return tuple(zeros_like(item) for item in x)
    if isinstance(x, list):
        return [zeros_like(item) for item in x]
    return 0.0 if np.ndim(x) == 0 else np.zeros(np.shape(x))


def add_adjoints(a, b):
    """Sum two adjoints, element by element for tuples and lists; ``None`` is zero."""
    if a is None or b is None:
        return b if a is None else a
    if isinstance(a, (tuple, list)):
        return type(a)(add_adjoints(p, q) for p, q in zip(a, b, strict=True))
    return a + b


def unstack(g, x):
    """The adjoint of the list ``x`` that numpy stacked into an array with adjoint ``g``."""
    if isinstance(x, (list, tuple)):
        return [unstack(g[i], item) for i, item in enumerate(x)]
    return unbroadcast(g, x)


def extremum_vjp(g, ans, x, axis=None, keepdims=False):
    """Adjoint of ``x`` in a max or min over ``axis``: shared equally among the entries that tie."""
    hits = x == expand_reduced(ans, x, axis, keepdims)
    share = hits / np.sum(hits, axis=axis, keepdims=True)
    return expand_reduced(g, x, axis, keepdims) * share


def expand_reduced(g, x, axis=None, keepdims=False):
    """Broadcast ``g``, the adjoint of a reduction of ``x`` over ``axis``, back to ``x``'s shape."""
    shape = np.shape(x)
    if axis is not None and not keepdims:
        axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
        g = np.expand_dims(g, tuple(a % len(shape) for a in axes))
    return np.broadcast_to(g, shape)


def reduced_count(x, axis=None):
    """How many entries of ``x`` a reduction over ``axis`` combines."""
    shape = np.shape(x)
    if axis is None:
        return int(np.prod(shape))
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
    return int(np.prod([shape[a] for a in axes]))


def matmul_vjp_a(g, a, b):
    """Adjoint of ``a`` in ``a @ b``, for vectors, matrices and stacks of matrices."""
    if np.ndim(a) == 2 and np.ndim(b) == 2:
        return g @ b.T
    if np.ndim(b) == 1:
        return g * b if np.ndim(a) == 1 else np.expand_dims(g, -1) * b
    if np.ndim(a) == 1:
        return unbroadcast(np.matmul(b, np.expand_dims(g, -1))[..., 0], a)
    return unbroadcast(np.matmul(g, np.swapaxes(b, -1, -2)), a)


def matmul_vjp_b(g, a, b):
    """Adjoint of ``b`` in ``a @ b``, for vectors, matrices and stacks of matrices."""
    if np.ndim(a) == 2 and np.ndim(b) <= 2:
        return g @ a if np.ndim(b) == 1 else a.T @ g
    if np.ndim(a) == 1:
        return g * a if np.ndim(b) == 1 else unbroadcast(np.expand_dims(a, -1) * np.expand_dims(g, -2), b)
    if np.ndim(b) == 1:
        return unbroadcast(np.matmul(np.swapaxes(a, -1, -2), np.expand_dims(g, -1))[..., 0], b)
    return unbroadcast(np.matmul(np.swapaxes(a, -1, -2), g), b)


def dot_vjp_a(g, a, b):
    """Adjoint of ``a`` in ``np.dot(a, b)`` (scalars, vectors and matrices)."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return unbroadcast(g * b, a)
    check_dot_rank(a, b)
    return matmul_vjp_a(g, a, b)


def dot_vjp_b(g, a, b):
    """Adjoint of ``b`` in ``np.dot(a, b)`` (scalars, vectors and matrices)."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return unbroadcast(g * a, b)
    check_dot_rank(a, b)
    return matmul_vjp_b(g, a, b)


def check_dot_rank(a, b):
    """``np.dot`` of arrays of three or more dimensions is not matmul: refuse it."""
    if np.ndim(a) > 2 or np.ndim(b) > 2:
        raise NotImplementedError("the gradient of np.dot on arrays with more than 2 dimensions "
                                  "is not supported: use np.matmul or np.tensordot")


def getitem_vjp(g, x, index):
    """Adjoint of ``x`` in ``x[index]``: ``g`` scattered into zeros (repeated indices add)."""
    if isinstance(x, (tuple, list)):
        parts = [zeros_like(item) for item in x]
        parts[index] = g
        return type(x)(parts)
    out = np.zeros(np.shape(x), dtype=np.result_type(x, g, 1.0))
    np.add.at(out, index, g)
    return out


def clip_mask(x, lo, hi):
    """1 where ``np.clip(x, lo, hi)`` passes ``x`` through, 0 where it clips."""
    inside = np.ones(np.shape(x))
    if lo is not None:
        inside = inside * (x >= lo)
    if hi is not None:
        inside = inside * (x <= hi)
    return inside


def balanced_eq(x, ans, y):
    """1 where ``x`` alone gave ``ans``, 0.5 where ``x`` and ``y`` tied (for max/min)."""
    return (x == ans) / (1.0 + (x == y))


def pow_minus_one(x, y):
    """``x ** (y - 1)`` for the rule of ``x ** y``: finite where ``y`` is 0 (the rule multiplies it by 0),
    and ``inf`` rather than ZeroDivisionError for a negative power of ``0.0``."""
    e = np.where(np.equal(y, 0), 1, y - 1) if np.ndim(y) else (1 if y == 0 else y - 1)
    try:
        return x ** e
    except ZeroDivisionError:
        return np.power(np.float64(x), e)


def safe_log(x):
    """``log(x)``, taking 0 where ``x`` is 0 (for the exponent's rule of ``x ** y``)."""
    return np.log(np.where(x == 0, 1.0, x))
