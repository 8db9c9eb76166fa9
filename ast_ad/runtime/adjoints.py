"""The reverse rules' helpers: an operand's adjoint of a product, a reduction, a change of layout, a
linear-algebra routine, each a small function over numpy (and the sums of them over a loop's
steps)."""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np

from ast_ad.errors import UnsupportedDerivativeError
from ast_ad.runtime.arrays import (
    T,
    add_adjoints,
    as_array,
    average_weights_shape,
    dense_adjoint,
    expand_reduced,
    from_last,
    is_array,
    lower_only,
    of_type,
    reciprocal_or_zero,
    reduced_count,
    size_of,
    to_last,
    unbroadcast,
    unstack,
    zeros_like,
    zeros_of,
)
from ast_ad.runtime.checks import check_dot_rank, refuse_unless
from ast_ad.runtime.writes import _fancy, add_at, scatter_add


def cast_vjp(g: Any, ans: Any, x: Any) -> Any:
    """Adjoint of ``x`` in a cast: ``g`` where the result is still a float, zero where it was
    truncated to integers."""
    if np.result_type(ans).kind in "biu":
        return zeros_like(x)
    return unstack(g, x)


def sequence_vjp(g: Any, x: Any) -> Any:
    """Adjoint of ``x`` in ``list(x)``, ``tuple(x)`` or ``dict(x)``: its items' adjoints, held as
    ``x`` holds its items (a list, a tuple, a dict; an array's rows, stacked). An item nothing
    flowed into (``None``) is zero."""
    if g is None or (isinstance(g, float) and g == 0.0):
        return zeros_like(x)
    if isinstance(x, (Mapping, AbstractSet)) and not isinstance(g, Mapping):
        # ``list(d)``: a dict's keys (a set's members), which carry no derivative
        return zeros_like(x)
    if isinstance(x, dict):
        return {k: zeros_like(item) if g.get(k) is None else g[k] for k, item in x.items()}
    if isinstance(x, (list, tuple)):
        parts = [
            zeros_like(item) if part is None else part for part, item in zip(g, x, strict=True)
        ]
        return (
            parts
            if isinstance(x, list)
            else type(x)(*parts)
            if hasattr(x, "_fields")
            else tuple(parts)
        )
    if is_array(x):
        return np.stack(
            [
                zeros_of(row) + (0.0 if part is None else part)
                for part, row in zip(g, x, strict=True)
            ]
        )
    refuse_unless(
        False,
        "the gradient of list() or tuple() of a ",
        type(x).__name__,
        ": build the list with a comprehension over its items instead",
    )
    return None


def extremum_vjp(g: Any, ans: Any, x: Any, axis: Any = None, keepdims: Any = False) -> Any:
    """Adjoint of ``x`` in a max or min over ``axis``: shared equally among the entries that tie."""
    if axis is None and type(x) is np.ndarray and type(g) in (float, np.float64) \
            and x.dtype.kind == "f":
        # the whole array's extremum, a float adjoint (``np.max(x)`` of a vector: logsumexp's):
        # one comparison, and the share written where it ties, into zeros the system gives lazily
        # (the general path below makes four passes over x's size); floats, as the general path's
        # share is, whatever x's floats
        ties = x == ans
        count = np.count_nonzero(ties)
        if count == 0:  # no entry is the extremum, a nan: nan, as below
            return np.full(x.shape, np.nan)
        out = np.zeros(x.shape)
        out[ties] = g / count
        return out
    hits = x == expand_reduced(ans, x, axis, keepdims)
    count = np.sum(hits, axis=axis, keepdims=True)
    # (no entry is the extremum, a nan: nan, and no warning)
    share = hits / np.where(count == 0, np.nan, count)
    return expand_reduced(g, x, axis, keepdims) * share


class OuterSum:
    """The adjoint of a sparse matrix (scipy's, in ``spsolve``): ``sum_i u_i v_i^T``,
    kept as its factors, never a dense matrix of the whole size; read at the stored entries
    (``at``) by the matrix's constructor's rule."""

    def __init__(self, pairs: list[tuple[Any, Any]]):
        self.pairs = pairs

    def __add__(self, other: Any) -> Any:
        if isinstance(other, OuterSum):
            return OuterSum(self.pairs + other.pairs)
        if other is None or (isinstance(other, float) and other == 0.0):
            return self
        return NotImplemented

    __radd__ = __add__

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        """The whole matrix, dense (where it is asked for: a comparison in a test)."""
        total = sum(np.outer(u, v) for u, v in self.pairs)
        return np.asarray(total, dtype=dtype)

    def at(self, rows: Any, cols: Any) -> Any:
        """The entries at ``rows`` and ``cols``."""
        total = np.zeros(np.shape(rows))
        for u, v in self.pairs:
            total = total + np.asarray(u)[rows] * np.asarray(v)[cols]
        return total



def matmul_vjp_a(g: Any, a: Any, b: Any) -> Any:
    """Adjoint of ``a`` in ``a @ b``, for vectors, matrices and stacks of matrices."""
    g, a, b = as_array(g), as_array(a), as_array(b)
    a_ndim, b_ndim = a.ndim, b.ndim
    if b_ndim == 2 and a_ndim <= 2:
        return g @ b.T if a_ndim == 2 else b @ g
    if b_ndim == 1:
        if a_ndim == 1:
            return g * b
        if a_ndim == 2:  # an outer product; np.dot runs it through BLAS, faster than broadcasting
            return np.dot(g[:, None], b[None, :])
        return g[..., None] * b
    if a_ndim == 1:
        return unbroadcast(np.matmul(b, g[..., None])[..., 0], a)
    return unbroadcast(np.matmul(g, np.swapaxes(b, -1, -2)), a)


def matmul_vjp_b(g: Any, a: Any, b: Any) -> Any:
    """Adjoint of ``b`` in ``a @ b``, for vectors, matrices and stacks of matrices."""
    g, a, b = as_array(g), as_array(a), as_array(b)
    a_ndim, b_ndim = a.ndim, b.ndim
    if a_ndim == 2 and b_ndim <= 2:
        return g @ a if b_ndim == 1 else a.T @ g
    if a_ndim == 1:
        if b_ndim == 1:
            return g * a
        if b_ndim == 2:
            return np.dot(a[:, None], g[None, :])
        return unbroadcast(a[:, None] * g[..., None, :], b)
    if b_ndim == 1:
        return unbroadcast(np.matmul(np.swapaxes(a, -1, -2), g[..., None])[..., 0], b)
    return unbroadcast(np.matmul(np.swapaxes(a, -1, -2), g), b)


def summed_matmul_vjp_a(terms: Any, a: Any) -> Any:
    """``sum(matmul_vjp_a(g, a, b) for g, b in terms)``: what a loop gives a fixed ``a`` in ``a @
    b``."""
    return summed_products(terms, a, matmul_vjp_a, fixed_first=True)


def summed_matmul_vjp_b(terms: Any, b: Any) -> Any:
    """``sum(matmul_vjp_b(g, a, b) for g, a in terms)``: what a loop gives a fixed ``b`` in ``a @
    b``."""
    return summed_products(terms, b, matmul_vjp_b, fixed_first=False)


def summed_dot_vjp_a(terms: Any, a: Any) -> Any:
    """``sum(dot_vjp_a(g, a, b) for g, b in terms)``: what a loop gives a fixed ``a`` in ``np.dot(a,
    b)``."""
    return summed_products(terms, a, dot_vjp_a, fixed_first=True)


def summed_dot_vjp_b(terms: Any, b: Any) -> Any:
    """``sum(dot_vjp_b(g, a, b) for g, a in terms)``: what a loop gives a fixed ``b`` in ``np.dot(a,
    b)``."""
    return summed_products(terms, b, dot_vjp_b, fixed_first=False)


def summed_getitem_vjp(terms: Any, x: Any) -> Any:
    """``sum(getitem_vjp(g, x, index) for g, index in terms)``: what a loop's reads ``x[i]`` give
    ``x``, added into one array after the loop instead of one zero array per step."""
    if isinstance(x, (dict, tuple, list)):
        total = None
        for g, index in terms:
            total = add_adjoints(total, getitem_vjp(g, x, index))
        return zeros_like(x) if total is None else total
    # a few, where a loop gave thousands of terms
    kinds = {g.dtype if is_array(g) else type(g) for g, _ in terms}
    # zeros of ``x``'s shape, of the terms' array type where ``x`` is numpy's and they are not (a
    # batch of tangents: its zeros are a batch too)
    other = [g for g, _ in terms if is_array(g) and not isinstance(g, np.ndarray)]
    like = other[0] if other and isinstance(x, np.ndarray) else x
    out = zeros_of(like, np.shape(x), dtype=np.result_type(x, 1.0, *kinds))
    # x[i] read entry by entry in a loop
    if type(out) is np.ndarray and out.ndim == 1 and len(terms) > 8:
        parts, indices = zip(*terms, strict=True)
        at, values = np.asarray(indices), np.asarray(parts)
        if (
            at.dtype.kind in "iu"
            and at.shape == values.shape == (len(terms),)
            and values.dtype.kind in "biufc"
        ):
            np.add.at(out, at, values)  # in order, as the loop below adds: the same sums to the bit
            return out
    for g, index in terms:
        if (
            type(index) is int
            or isinstance(index, (np.integer, slice))
            or (
                isinstance(index, tuple)
                and all(
                    isinstance(i, (int, np.integer, slice)) or i is None or i is Ellipsis
                    for i in index
                )
            )
        ):
            out[index] += g  # a basic index names each entry once
        else:
            scatter_add(out, index, g)  # repeated fancy indices add up
    return out


# The batched sums above, step by step and in the language ast_ad differentiates: what reverse mode
# reads for them (``registry.def_read_as``), as it reads the other helpers by their source.
def summed_by_steps(vjp: Any, fixed_first: bool) -> Any:
    """The stand-in, in ast_ad's language, that reverse mode reads for the sum of ``vjp`` over a
    loop's steps (``summed_products``; ``registry.def_read_as``): the same sum, one step at a time.
    ``fixed_first``: the operand kept fixed is the product's first (``a`` of ``a @ b``), else its
    second."""

    def summed_by_steps(terms: Any, fixed: Any) -> Any:
        total = 0.0
        for g, other in terms:
            total = total + (vjp(g, fixed, other) if fixed_first else vjp(g, other, fixed))
        return total

    summed_by_steps.__name__ = summed_by_steps.__qualname__ = f"summed_{vjp.__name__}_by_steps"
    return summed_by_steps


def summed_steps_by_steps(vjp: Any, fixed_first: bool) -> Any:
    """The stand-in, in ast_ad's language, that reverse mode reads for ``summed_steps`` of ``vjp``
    (``registry.def_read_as``): the same sum, one step at a time."""

    def summed_steps_by_steps(gs: Any, others: Any, fixed: Any) -> Any:
        total = 0.0
        # (in the language ast_ad reads: two lists of one length, one a step)
        for g, other in zip(gs, others):  # noqa: B905
            total = total + (vjp(g, fixed, other) if fixed_first else vjp(g, other, fixed))
        return total

    summed_steps_by_steps.__name__ = summed_steps_by_steps.__qualname__ = \
        f"summed_{vjp.__name__}_steps_by_steps"
    return summed_steps_by_steps


def stacked_steps_by_steps(values: Any) -> Any:
    """The stand-in reverse mode reads for ``stacked_steps``: the steps as they are, which the sums
    read by steps take one by one."""
    return list(values)


def summed_getitem_vjp_by_steps(terms: Any, x: Any) -> Any:
    total = zeros_like(x)
    for g, index in terms:
        total = add_adjoints(total, getitem_vjp(g, x, index))
    return total


def index_terms_jvp(u: Any, terms: Any) -> Any:
    """Tangent terms of ``summed_getitem_vjp``: each step's ``(g, index)`` gives ``(g_dot,
    index)``."""
    return [(g_dot, index) for (g_dot, _), (_, index) in zip(u, terms, strict=True)]


def stacked_steps(values: Any) -> Any:
    """A loop's values kept one a step (``optimize.batching``), stacked on a first axis where they
    are numpy arrays of numbers of one shape; else the list as it is. Stacked once, a loop's
    adjoint ``g`` serves each product it is summed in (``summed_dot_vjp_a_steps``...)."""
    if not values or not is_array(values[0]):
        return values
    first = values[0]
    try:
        if type(first) is np.ndarray:
            # (numpy's own, stacked in C: a third of ``np.stack``'s time for fifty vectors)
            stacked = np.array(values)
            if stacked.shape != (len(values), *first.shape):
                return values
        else:  # (``np.stack``: a duck array's own, or a batch of tangents')
            stacked = np.stack(values)
    except (ValueError, TypeError):  # (of several shapes, or of arrays and numbers)
        return values
    return stacked if type(stacked) is not np.ndarray or stacked.dtype.kind in "biufc" else values


def rows_of(x: Any, order: Any) -> Any:
    """The reads ``x[t]`` for ``t`` in ``reversed(order)``, stacked as ``stacked_steps`` stacks a
    loop's steps: what a backward loop over ``reversed(order)`` keeps of its reads of an array
    nothing writes, one a step, for the sums after it (``optimize.batching``). Taken at once where
    ``x`` is a numpy array of numbers with rows (one copy of them, in C) and ``order`` a range."""
    if type(x) is np.ndarray and x.ndim >= 2 and x.dtype.kind in "biufc" and type(order) is range:
        return x[np.arange(order.start, order.stop, order.step)[::-1]]
    return stacked_steps([x[t] for t in reversed(order)])


def rows_of_by_steps(x: Any, order: Any) -> Any:
    """The stand-in reverse mode reads for ``rows_of``: the reads one a step, as the loop made
    them, stacked."""
    rows = []
    for t in reversed(order):
        rows.append(x[t])
    return stacked_steps(rows)


def summed_steps(gs: Any, others: Any, fixed: Any, vjp: Any, fixed_first: Any) -> Any:
    """``summed_products`` of the pairs ``zip(gs, others)``, where ``gs`` may be the steps' ``g``
    stacked (``stacked_steps``): with vectors, one product of that and the other operands
    stacked."""
    if type(gs) is np.ndarray and gs.ndim == 2 and type(fixed) is np.ndarray and fixed.ndim == 2:
        try:
            # (the other operands' rows, taken at once: ``rows_of``; else a list of them)
            rows: Any = others if type(others) is np.ndarray else np.array(others)
        except (ValueError, TypeError):
            rows = None
        if rows is not None and rows.ndim == 2 and rows.dtype.kind in "biufc" and \
                len(rows) == len(gs) and gs.dtype.kind in "biufc":
            return gs.T @ rows if fixed_first else rows.T @ gs
    # (stacked as another type of array: its steps read back one by one)
    steps = gs if isinstance(gs, list) else [gs[i] for i in range(len(others))]
    return summed_products(list(zip(steps, others, strict=True)), fixed, vjp, fixed_first)


def summed_matmul_vjp_a_steps(gs: Any, others: Any, a: Any) -> Any:
    """``sum(matmul_vjp_a(g, a, b) for g, b in zip(gs, others))``, ``gs`` stacked or not."""
    return summed_steps(gs, others, a, matmul_vjp_a, fixed_first=True)


def summed_matmul_vjp_b_steps(gs: Any, others: Any, b: Any) -> Any:
    """``sum(matmul_vjp_b(g, a, b) for g, a in zip(gs, others))``, ``gs`` stacked or not."""
    return summed_steps(gs, others, b, matmul_vjp_b, fixed_first=False)


def summed_dot_vjp_a_steps(gs: Any, others: Any, a: Any) -> Any:
    """``sum(dot_vjp_a(g, a, b) for g, b in zip(gs, others))``, ``gs`` stacked or not."""
    return summed_steps(gs, others, a, dot_vjp_a, fixed_first=True)


def summed_dot_vjp_b_steps(gs: Any, others: Any, b: Any) -> Any:
    """``sum(dot_vjp_b(g, a, b) for g, a in zip(gs, others))``, ``gs`` stacked or not."""
    return summed_steps(gs, others, b, dot_vjp_b, fixed_first=False)


def summed_products(terms: Any, fixed: Any, vjp: Any, fixed_first: Any) -> Any:
    """The sum of a loop's contributions ``vjp(g, ...)`` to a matrix ``fixed`` it multiplies every
    step.

    ``terms`` holds each step's ``(g, other operand)``. With vectors, each step's
    contribution is an outer product, and their sum is one matrix product of the
    stacked vectors: ``G.T @ B`` for ``fixed @ b``, ``A.T @ G`` for ``a @ fixed``.
    With matrices, the steps' columns (for ``fixed @ b``) or rows (for ``a @ fixed``)
    side by side do the same. Other shapes are summed step by step.
    """
    # vectors of one length each, stacked as rows by np.array in C, which checks them there (a
    # ragged list raises; scalars or matrices give other numbers of axes): checking each in Python
    # first took as long again
    if type(fixed) is np.ndarray and fixed.ndim == 2 and terms:
        vectors, operands = zip(*terms, strict=True)
        g_rows: Any = None
        other_rows: Any = None
        try:
            g_rows, other_rows = np.array(vectors), np.array(operands)
        # (a TypeError: arrays of another type than numpy's, a batch of tangents, stacked below)
        except (ValueError, TypeError):
            pass
        if g_rows is not None and other_rows is not None and g_rows.ndim == 2 and \
                other_rows.ndim == 2 and {g_rows.dtype.kind, other_rows.dtype.kind} <= set("biufc"):
            return g_rows.T @ other_rows if fixed_first else other_rows.T @ g_rows
    fixed = as_array(fixed)
    gs = [as_array(g) for g, _ in terms]
    others = [as_array(other) for _, other in terms]
    ranks = {(g.ndim, other.ndim) for g, other in zip(gs, others, strict=True)}
    if fixed.ndim == 2 and ranks == {(1, 1)}:
        return (
            np.stack(gs).T @ np.stack(others) if fixed_first else np.stack(others).T @ np.stack(gs)
        )
    if fixed.ndim == 2 and ranks == {(2, 2)}:
        if fixed_first:
            return np.concatenate(gs, axis=1) @ np.concatenate(others, axis=1).T
        return np.concatenate(others, axis=0).T @ np.concatenate(gs, axis=0)
    total = 0.0
    for g, other in terms:
        total = total + (vjp(g, fixed, other) if fixed_first else vjp(g, other, fixed))
    return total


def dot_vjp_a(g: Any, a: Any, b: Any) -> Any:
    """Adjoint of ``a`` in ``np.dot(a, b)`` (scalars, vectors and matrices)."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return unbroadcast(g * b, a)
    check_dot_rank(a, b)
    return matmul_vjp_a(g, a, b)


def dot_vjp_b(g: Any, a: Any, b: Any) -> Any:
    """Adjoint of ``b`` in ``np.dot(a, b)`` (scalars, vectors and matrices)."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return unbroadcast(g * a, b)
    check_dot_rank(a, b)
    return matmul_vjp_b(g, a, b)


def getitem_vjp(g: Any, x: Any, index: Any) -> Any:
    """Adjoint of ``x`` in ``x[index]``: ``g`` scattered into zeros (repeated indices add)."""
    # the most common cases first: a float entry of a vector of floats (a quarter of the time), and
    # a slice of floats (``x[1:]``): each entry named once, the write the sum
    if type(x) is np.ndarray and x.dtype.type is np.float64 and (
        type(index) is int and type(g) in (float, np.float64)
        or type(index) is slice and type(g) is np.ndarray and g.dtype.type is np.float64
    ):
        out = np.zeros(x.shape)
        out[index] = g
        return out
    if isinstance(x, dict):
        return {key: g if key == index else zeros_like(item) for key, item in x.items()}
    if isinstance(x, (tuple, list)):
        parts = [zeros_like(item) for item in x]
        parts[index] = g
        return parts if isinstance(x, list) else tuple(parts)
    # zeros of ``x``'s shape, of ``g``'s array type where ``x`` is numpy's and ``g`` is not (a
    # batch of tangents: its zeros are a batch too)
    like = g if isinstance(x, np.ndarray) and is_array(g) and not isinstance(g, np.ndarray) else x
    out = zeros_of(like, np.shape(x), dtype=np.result_type(x, g, 1.0))
    if _fancy(index):
        scatter_add(out, index, g)
    # each entry named once: a plain write is the same sum, faster than np.add.at
    elif isinstance(out, np.ndarray):
        out[index] = g
    else:
        try:
            out[index] = g
        # dask, at a mask: it does not know how many entries
        except (ValueError, NotImplementedError) as exc:
            raise UnsupportedDerivativeError(
                f"the gradient of reading a {type(out).__name__} through this index ({exc}): write "
                "np.where(mask, x, 0.0) instead of x[mask] where the result is summed") from exc
    return out


def prod_vjp(g: Any, ans: Any, x: Any, axis: Any = None, keepdims: Any = False) -> Any:
    """Adjoint of ``x`` in ``np.prod``: the product of the other entries, exact where ``x`` has
    zeros."""
    g = expand_reduced(g, x, axis, keepdims)
    if axis is not None and np.ndim(axis) > 0:  # several axes: bring them together, then as for one
        x = as_array(x)
        axes = tuple(a % x.ndim for a in axis)
        ends = tuple(range(x.ndim - len(axes), x.ndim))
        moved = np.moveaxis(x, axes, ends)
        flat = np.reshape(moved, moved.shape[:x.ndim - len(axes)] + (-1,))
        others = prod_vjp(np.ones(flat.shape[:-1]), None, flat, -1)
        return g * np.moveaxis(np.reshape(others, moved.shape), ends, axes)
    moved = to_last(x, axis)
    left = np.cumprod(
        np.concatenate([np.ones_like(moved[..., :1]), moved[..., :-1]], axis=-1), axis=-1
    )
    right = np.flip(
        np.cumprod(
            np.concatenate([np.ones_like(moved[..., :1]), np.flip(moved, -1)[..., :-1]], axis=-1),
            axis=-1,
        ),
        -1,
    )
    return g * from_last(left * right, x, axis)


def var_vjp(
    g: Any, ans: Any, x: Any, axis: Any = None, ddof: Any = 0, keepdims: Any = False
) -> Any:
    """Adjoint of ``x`` in ``np.var``."""
    mean = np.mean(x, axis=axis, keepdims=True)
    return expand_reduced(g, x, axis, keepdims) * 2.0 * (x - mean) / (reduced_count(x, axis) - ddof)


def std_vjp(
    g: Any, ans: Any, x: Any, axis: Any = None, ddof: Any = 0, keepdims: Any = False
) -> Any:
    """Adjoint of ``x`` in ``np.std``; where the deviation is zero, the gradient is taken as
    zero."""
    spread = expand_reduced(ans, x, axis, keepdims)
    share = reciprocal_or_zero(spread)
    return var_vjp(g, ans, x, axis, ddof, keepdims) * 0.5 * share


def cumsum_vjp(g: Any, x: Any, axis: Any = None) -> Any:
    """Adjoint of ``x`` in ``np.cumsum``: a cumulative sum from the end."""
    if axis is None:
        return np.reshape(np.flip(np.cumsum(np.flip(np.ravel(g)))), np.shape(x))
    return np.flip(np.cumsum(np.flip(g, axis), axis), axis)


def cumprod_vjp(g: Any, ans: Any, x: Any, axis: Any = None) -> Any:
    """Adjoint of ``x`` in ``np.cumprod`` (exact with zeros: each prefix product is taken apart)."""
    moved = to_last(x, axis)
    g_moved = to_last(g, axis)
    n = moved.shape[-1]
    out = zeros_of(moved)
    for i in range(n):
        others = moved.copy()
        others[..., i] = 1.0
        products = np.cumprod(others, axis=-1)
        out[..., i] = np.sum(g_moved[..., i:] * products[..., i:], axis=-1)
    return from_last(out, x, axis)


def average_vjp(g: Any, x: Any, axis: Any = None, weights: Any = None) -> Any:
    """Adjoint of ``x`` in ``np.average``."""
    if weights is None:
        return expand_reduced(g, x, axis) / reduced_count(x, axis)
    w = average_weights_shape(as_array(weights).astype(float), x, axis)
    return expand_reduced(g, x, axis) * w / np.sum(weights)


def norm_vjp(
    g: Any, ans: Any, x: Any, ord: Any = None, axis: Any = None, keepdims: Any = False
) -> Any:
    """Adjoint of ``x`` in ``np.linalg.norm``; at a zero vector the gradient is taken as zero."""
    matrix = (axis is None and np.ndim(x) == 2 and ord is not None) or (
        axis is not None and np.ndim(axis) > 0
    )
    g = expand_reduced(g, x, axis, keepdims)
    ans = expand_reduced(ans, x, axis, keepdims)
    if matrix and ord == "nuc":
        u, _, vt = np.linalg.svd(x, full_matrices=False)
        return g * (u @ vt)
    if matrix and ord in (2, -2) and np.ndim(x) == 2:  # the largest (smallest) singular value
        u, _, vt = np.linalg.svd(x, full_matrices=False)
        k = 0 if ord == 2 else -1
        return g * np.outer(u[:, k], vt[k])
    # the largest (smallest) column or row sum
    if matrix and ord in (1, -1, np.inf, -np.inf) and np.ndim(x) == 2:
        along = 0 if ord in (1, -1) else 1
        sums = np.sum(np.abs(x), axis=along)
        chosen = np.argmax(sums) if ord in (1, np.inf) else np.argmin(sums)
        taken = zeros_of(x)
        if along == 0:
            taken[:, chosen] = 1.0
        else:
            taken[chosen, :] = 1.0
        return g * np.sign(x) * taken
    refuse_unless(
        not matrix or ord in (None, "fro"),
        "the gradient of np.linalg.norm with ord=",
        repr(ord),
        " on matrices",
    )
    safe = reciprocal_or_zero(ans)
    if ord in (None, 2, "fro"):
        return g * x * safe
    if ord == 1:
        return g * np.sign(x)
    if ord in (np.inf, -np.inf):
        hits = np.abs(x) == ans
        return g * np.sign(x) * hits / np.sum(hits, axis=axis, keepdims=True)
    return g * np.sign(x) * np.abs(x) ** (ord - 1) * safe ** (ord - 1)


def outer_vjp_a(g: Any, a: Any, b: Any) -> Any:
    return np.reshape(g @ np.ravel(b), np.shape(a))


def outer_vjp_b(g: Any, a: Any, b: Any) -> Any:
    return np.reshape(np.ravel(a) @ g, np.shape(b))


def inner_vjp(g: Any, a: Any, b: Any) -> Any:
    """Adjoint of ``a`` in ``np.inner(a, b)`` (last axes contracted)."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return unbroadcast(g * b, a)
    g_axes = list(range(np.ndim(a) - 1, np.ndim(g)))
    return np.tensordot(g, b, axes=(g_axes, list(range(np.ndim(b) - 1))))


def inner_vjp_b(g: Any, a: Any, b: Any) -> Any:
    """Adjoint of ``b`` in ``np.inner(a, b)``: ``g``'s axes of ``a`` moved behind those of ``b``
    first."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return unbroadcast(g * a, b)
    lead = np.ndim(a) - 1
    g = np.moveaxis(g, list(range(lead)), list(range(np.ndim(g) - lead, np.ndim(g))))
    return inner_vjp(g, b, a)


def einsum_spec(spec: Any, *operands: Any) -> Any:
    """``spec`` with ``...`` spelt out and the output named: a list of input subscripts and the
    output's."""
    inputs, _, output = spec.replace(" ", "").partition("->")
    parts = inputs.split(",")
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in spec]
    widest = max(
        (
            np.ndim(op) - len(p.replace("...", ""))
            for p, op in zip(parts, operands, strict=True)
            if "..." in p
        ),
        default=0,
    )
    dots = "".join(free[:widest])
    expanded = [p.replace("...", dots[widest - (np.ndim(op) - len(p.replace("...", ""))):])
                for p, op in zip(parts, operands, strict=True)]
    if not _:
        counts = {c: "".join(expanded).count(c) for c in "".join(expanded)}
        output = dots + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in dots))
    else:
        output = output.replace("...", dots)
    return expanded, output


def einsum_vjp(k: Any, g: Any, spec: Any, *operands: Any) -> Any:
    """Adjoint of operand ``k`` in ``np.einsum(spec, *operands)``, repeated (diagonal) indices
    included."""
    inputs, output = einsum_spec(spec, *operands)
    mine = inputs[k]
    unique = "".join(dict.fromkeys(mine))
    others = [(s, op) for j, (s, op) in enumerate(zip(inputs, operands, strict=True)) if j != k]
    covered = output + "".join(s for s, _ in others)
    for c in unique:  # an index summed away in operand k alone: g is constant along it
        if c not in covered:
            others.append((c, np.ones(np.shape(operands[k])[mine.index(c)])))
    subscripts = ",".join([output] + [s for s, _ in others]) + "->" + unique
    # a BLAS product where it can
    part = np.einsum(subscripts, g, *[op for _, op in others], optimize=True)
    if unique == mine:
        return unbroadcast(part, operands[k])
    spare = iter(c for c in "abcdefghijklmnopqrstuvwxyz" if c not in spec)
    target: list[str] = []
    deltas: list[tuple[str, Any]] = []
    seen: set[str] = set()
    for c in mine:
        if c in seen:
            fresh = next(spare)
            deltas.append((c + fresh, np.eye(np.shape(operands[k])[len(target)])))
            target.append(fresh)
        else:
            seen.add(c)
            target.append(c)
    subscripts = ",".join([unique] + [d for d, _ in deltas]) + "->" + "".join(target)
    # numpy eyes: like operand k
    return of_type(np.einsum(subscripts, part, *[e for _, e in deltas]), operands[k])


def tensordot_spec(a: Any, b: Any, axes: Any = 2) -> Any:
    """The einsum subscripts of ``np.tensordot(a, b, axes)``."""
    if np.ndim(axes) == 0:
        axes = (list(range(np.ndim(a) - axes, np.ndim(a))), list(range(axes)))
    left, right = [list(np.atleast_1d(ax)) for ax in axes]
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    sa = [next(letters) for _ in range(np.ndim(a))]
    sb = [next(letters) for _ in range(np.ndim(b))]
    for i, j in zip(left, right, strict=True):
        sb[j] = sa[i]
    out = [c for i, c in enumerate(sa) if i not in [x % np.ndim(a) for x in left]] + \
          [c for j, c in enumerate(sb) if j not in [x % np.ndim(b) for x in right]]
    return "".join(sa) + "," + "".join(sb) + "->" + "".join(out)


def kron_vjp(k: Any, g: Any, a: Any, b: Any) -> Any:
    """Adjoint of ``a`` (k=0) or ``b`` (k=1) in ``np.kron(a, b)``, for vectors and matrices."""
    a2, b2 = np.atleast_2d(a), np.atleast_2d(b)
    (p, q), (m, n) = a2.shape, b2.shape
    blocks = np.reshape(g, (p, m, q, n))
    part = np.einsum("ikjl,kl->ij", blocks, b2) if k == 0 else np.einsum("ikjl,ij->kl", blocks, a2)
    return np.reshape(part, np.shape(a if k == 0 else b))


def diagonal_vjp(g: Any, x: Any, offset: Any = 0, axis1: Any = 0, axis2: Any = 1) -> Any:
    """Adjoint of ``x`` in ``np.diagonal``/``np.trace``: ``g`` laid back on that diagonal."""
    moved = np.moveaxis(zeros_of(x), (axis1, axis2), (-2, -1))
    eye = np.eye(moved.shape[-2], moved.shape[-1], k=offset)
    g = as_array(g)
    if g.ndim == moved.ndim - 2:  # trace: one number per matrix
        full = g[..., None, None] * eye
    else:  # diagonal: a vector per matrix, written onto the diagonal
        rows, cols = np.nonzero(eye)
        full = moved.copy()
        full[..., rows, cols] = g
    return np.moveaxis(full, (-2, -1), (axis1, axis2))


def diag_vjp(g: Any, v: Any, k: Any = 0) -> Any:
    """Adjoint of ``v`` in ``np.diag(v, k)``: it builds a matrix from a vector or takes a
    diagonal."""
    if np.ndim(v) == 1:
        return np.diag(g, k)
    return diagonal_vjp(g, v, k)


def split_vjp(g: Any, ans: Any, x: Any, axis: Any = 0) -> Any:
    """Adjoint of ``x`` in ``np.split`` and friends: the parts' adjoints put back together."""
    parts = [bar if bar is not None else zeros_of(part) for bar, part in zip(g, ans, strict=True)]
    parts = [np.broadcast_to(p, np.shape(a)) for p, a in zip(parts, ans, strict=True)]
    return np.concatenate(parts, axis=axis)


def unstack_vjp(g: Any, ans: Any, axis: Any = 0) -> Any:
    """Adjoint of ``x`` in ``np.unstack``: the slices' adjoints stacked back along ``axis``."""
    parts = [bar if bar is not None else zeros_of(part) for bar, part in zip(g, ans, strict=True)]
    return np.stack([np.broadcast_to(p, np.shape(a)) for p, a in zip(parts, ans, strict=True)],
                    axis=axis)


def concatenate_vjp(g: Any, arrays: Any, axis: Any = 0) -> Any:
    """Adjoints of the arrays ``np.concatenate`` joined: ``g`` cut back into their sizes."""
    if axis is None:
        sizes = np.cumsum([size_of(a) for a in arrays])[:-1]
        return [
            np.reshape(part, np.shape(a))
            for part, a in zip(np.split(np.ravel(g), sizes), arrays, strict=True)
        ]
    if type(g) is np.ndarray and axis == 0 and g.ndim >= 1:
        # along the first axis, by slicing (the views ``np.split`` makes, without its few µs)
        parts, start = [], 0
        for a in arrays:
            stop = start + (a.shape[0] if type(a) is np.ndarray else np.shape(a)[0])
            parts.append(g[start:stop])
            start = stop
        return parts
    sizes = np.cumsum([np.shape(a)[axis] for a in arrays])[:-1]
    return [part for part in np.split(g, sizes, axis=axis)]  # a list, whatever sequence split gives


def joined_adjoints(parts: Any, arrays: Any, axis: Any = 0) -> Any:
    """The adjoint of ``g`` in ``concatenate_vjp(g, arrays, axis)``, which is linear in it: the
    parts' adjoints joined as ``np.concatenate`` joined the arrays (a part's adjoint still the
    float zero it started as, zeros of its array's shape)."""
    dense = [dense_adjoint(p, a) for p, a in zip(parts, arrays, strict=True)]
    if axis is None:
        return np.concatenate([np.ravel(d) for d in dense])
    return np.concatenate(dense, axis=axis)


def hstack_vjp(g: Any, arrays: Any) -> Any:
    parts = [np.atleast_1d(a) for a in arrays]
    axis = 0 if parts[0].ndim == 1 else 1
    return [
        np.reshape(p, np.shape(a))
        for p, a in zip(concatenate_vjp(g, parts, axis), arrays, strict=True)
    ]


def vstack_vjp(g: Any, arrays: Any) -> Any:
    parts = [np.atleast_2d(a) for a in arrays]
    return [
        np.reshape(p, np.shape(a))
        for p, a in zip(concatenate_vjp(g, parts, 0), arrays, strict=True)
    ]


def tile_vjp(g: Any, x: Any, reps: Any) -> Any:
    """Adjoint of ``x`` in ``np.tile``: the copies' adjoints summed."""
    reps = (reps,) if np.ndim(reps) == 0 else tuple(reps)
    shape = np.shape(x)
    d = max(len(shape), len(reps))
    shape_d, reps_d = (1,) * (d - len(shape)) + shape, (1,) * (d - len(reps)) + reps
    blocks = np.reshape(g, [n for pair in zip(reps_d, shape_d, strict=True) for n in pair])
    return np.reshape(np.sum(blocks, axis=tuple(range(0, 2 * d, 2))), shape)


def repeat_vjp(g: Any, x: Any, repeats: Any, axis: Any = None) -> Any:
    """Adjoint of ``x`` in ``np.repeat``: each entry's copies summed."""
    if axis is None:
        flat = np.ravel(x)
        source = np.repeat(np.arange(flat.size), repeats)
        out = zeros_of(flat)
        scatter_add(out, source, np.ravel(g))
        return np.reshape(out, np.shape(x))
    x = as_array(x)
    source = np.repeat(np.arange(x.shape[axis]), repeats)
    out = zeros_of(x, np.moveaxis(x, axis, 0).shape)
    scatter_add(out, source, np.moveaxis(g, axis, 0))
    return np.moveaxis(out, 0, axis)


def pad_vjp(g: Any, x: Any, pad_width: Any, mode: Any = "constant") -> Any:
    """Adjoint of ``x`` in ``np.pad`` with constant padding: the middle of ``g``."""
    refuse_unless(mode == "constant", "the gradient of np.pad with mode=", repr(mode))
    widths = np.broadcast_to(np.asarray(pad_width), (np.ndim(x), 2))
    index = tuple(
        slice(int(lo), int(lo) + n) for (lo, _), n in zip(widths, np.shape(x), strict=True)
    )
    return g[index]


def sort_vjp(g: Any, x: Any, axis: Any = -1) -> Any:
    """Adjoint of ``x`` in ``np.sort``: ``g`` sent back to where each entry came from."""
    if axis is None:
        order = np.argsort(np.ravel(x), kind="stable")
        out = zeros_of(x, (size_of(x),))
        out[order] = np.ravel(g)
        return np.reshape(out, np.shape(x))
    order = np.argsort(x, axis=axis, kind="stable")
    out = zeros_of(x)
    np.put_along_axis(out, order, g, axis=axis)
    return out


def take_along_axis_vjp(g: Any, arr: Any, indices: Any, axis: Any = -1) -> Any:
    """Adjoint of ``arr`` in ``np.take_along_axis``: ``g`` added back where each entry was taken
    from (an entry taken twice, or along an axis of length 1 that the indices broadcast, adds
    up)."""
    if axis is None:
        out = add_at(zeros_of(arr, (size_of(arr),)), np.ravel(indices), np.ravel(g))
        return np.reshape(out, np.shape(arr))
    shape = np.shape(arr)
    axis = axis % len(shape)
    grid = np.indices(np.shape(g), sparse=True)
    index = []
    for d in range(len(shape)):
        if d == axis:
            index.append(indices)
        elif shape[d] == 1:
            index.append(0)
        else:
            index.append(grid[d])
    return add_at(zeros_of(arr), tuple(index), g)


def take_vjp(g: Any, x: Any, indices: Any, axis: Any = None) -> Any:
    """Adjoint of ``x`` in ``np.take``: ``g`` scattered back (repeated indices add)."""
    if axis is None:
        out = zeros_of(x, (size_of(x),))
        scatter_add(out, np.ravel(indices), np.ravel(g))
        return np.reshape(out, np.shape(x))
    out = zeros_of(x)
    index: list[Any] = [slice(None)] * np.ndim(x)
    index[axis] = indices
    scatter_add(out, tuple(index), g)
    return out


def select_vjp(g: Any, condlist: Any, choicelist: Any) -> Any:
    """Adjoints of the choices in ``np.select``: each gets ``g`` where it was the first true
    condition."""
    taken = zeros_of(g, dtype=bool)
    parts = []
    for cond, choice in zip(condlist, choicelist, strict=True):
        mine = np.logical_and(cond, np.logical_not(taken))
        parts.append(unbroadcast(np.where(mine, g, 0.0), choice))
        taken = np.logical_or(taken, cond)
    return parts


def select_default_vjp(g: Any, condlist: Any, default: Any) -> Any:
    taken = zeros_of(g, dtype=bool)
    for cond in condlist:
        taken = np.logical_or(taken, cond)
    return unbroadcast(np.where(taken, 0.0, g), default)


def clip_lo_vjp(g: Any, x: Any, lo: Any, hi: Any) -> Any:
    """Adjoint of the lower bound of ``np.clip``: where it is the result."""
    taken = x < lo if hi is None else np.logical_and(x < lo, lo <= hi)
    return g * taken


def clip_hi_vjp(g: Any, x: Any, lo: Any, hi: Any) -> Any:
    """Adjoint of the upper bound of ``np.clip``: where it is the result."""
    return g * ((x if lo is None else np.maximum(x, lo)) > hi)


def average_weights_vjp(g: Any, ans: Any, x: Any, axis: Any, weights: Any) -> Any:
    """Adjoint of ``weights`` in ``np.average(x, axis, weights)``: ``(x - average) /
    sum(weights)``."""
    w = as_array(weights).astype(float)
    spread = (x - expand_reduced(ans, x, axis)) * expand_reduced(g, x, axis) / np.sum(w)
    if axis is not None and w.ndim == 1 and np.ndim(x) > 1:
        return np.sum(spread, axis=tuple(a for a in range(np.ndim(x)) if a != axis % np.ndim(x)))
    return spread


def solve_vjp_a(g: Any, ans: Any, a: Any, b: Any) -> Any:
    b_bar = np.linalg.solve(T(a), g)
    if np.ndim(b) == 1:
        return -np.outer(b_bar, ans)
    return -b_bar @ T(ans)


def solve_vjp_b(g: Any, ans: Any, a: Any, b: Any) -> Any:
    return np.linalg.solve(T(a), g)


def cholesky_vjp(g: Any, ans: Any) -> Any:
    """Adjoint of ``a`` in ``np.linalg.cholesky`` (symmetric; Murray's formula)."""
    inv_l = np.linalg.inv(ans)
    phi = T(ans) @ g
    phi = np.tril(phi) - 0.5 * np.eye(phi.shape[-1]) * phi
    s = T(inv_l) @ phi @ inv_l
    return lower_only(0.5 * (s + T(s)))


def eigh_vjp(g: Any, ans: Any, a: Any) -> Any:
    """Adjoint of ``a`` in ``np.linalg.eigh``, which reads only the lower triangle of ``a``."""
    w, v = ans
    w_bar, v_bar = g
    w_bar = zeros_of(w) if w_bar is None else w_bar
    v_bar = zeros_of(v) if v_bar is None else v_bar
    gaps = w[..., None, :] - w[..., :, None]
    f = reciprocal_or_zero(gaps)
    inner = np.eye(np.shape(w)[-1]) * w_bar[..., None, :] + f * (T(v) @ v_bar)
    s = v @ inner @ T(v)
    return lower_only(0.5 * (s + T(s)))


def svd_vjp(g: Any, ans: Any, a: Any, full_matrices: Any = True, compute_uv: Any = True) -> Any:
    """Adjoint of ``a`` in ``np.linalg.svd`` (thin factors, or singular values alone; distinct
    values)."""
    if not compute_uv:
        u, _, vt = np.linalg.svd(a, full_matrices=False)
        return u @ (np.eye(np.shape(g)[-1]) * g[..., None, :]) @ vt
    refuse_unless(
        not full_matrices or np.shape(a)[-1] == np.shape(a)[-2],
        "the gradient of np.linalg.svd with full_matrices=True on a non-square matrix: pass "
        "full_matrices=False",
    )
    u, s, vt = ans
    u_bar, s_bar, vt_bar = (zeros_of(x) if b is None else b for b, x in zip(g, ans, strict=True))
    v, v_bar = T(vt), T(vt_bar)
    k = np.shape(s)[-1]
    s2 = s[..., None, :] ** 2 - s[..., :, None] ** 2
    f = reciprocal_or_zero(s2)
    sigma = np.eye(k) * s[..., None, :]
    inv_sigma = np.eye(k) * reciprocal_or_zero(s)[..., None, :]
    j = f * (T(u) @ u_bar - T(u_bar) @ u)
    kk = f * (T(v) @ v_bar - T(v_bar) @ v)
    core = u @ (j @ sigma + np.eye(k) * s_bar[..., None, :] + sigma @ kk) @ vt
    m, n = np.shape(a)[-2:]
    if m > k:
        core = core + (np.eye(m) - u @ T(u)) @ u_bar @ inv_sigma @ vt
    if n > k:
        core = core + u @ inv_sigma @ T(v_bar) @ (np.eye(n) - v @ vt)
    return core


def qr_vjp(g: Any, ans: Any, a: Any) -> Any:
    """Adjoint of ``a`` in the reduced ``np.linalg.qr`` (square or tall ``a``)."""
    q, r = ans
    q_bar, r_bar = (zeros_of(x) if b is None else b for b, x in zip(g, ans, strict=True))
    m = r @ T(r_bar) - T(q_bar) @ q
    copyltu = np.tril(m) + T(np.tril(m, -1))
    return T(np.linalg.solve(r, T(q_bar + q @ copyltu)))


def pinv_vjp(g: Any, ans: Any, a: Any) -> Any:
    """Adjoint of ``a`` in ``np.linalg.pinv``."""
    p = ans
    m, n = np.shape(a)[-2:]
    left = np.eye(m) - a @ p
    right = np.eye(n) - p @ a
    return -T(p) @ g @ T(p) + left @ T(g) @ p @ T(p) + T(p) @ p @ T(g) @ right


def matrix_powers(a: Any, n: Any) -> list[Any]:
    """``a^0`` (the identity) to ``a^(n-1)``: the powers on either side of each factor of
    ``a^n``."""
    powers = [np.eye(np.shape(a)[-1])]
    for _ in range(max(n - 1, 0)):
        powers.append(powers[-1] @ a)
    return powers


def matrix_power_vjp(g: Any, a: Any, n: Any) -> Any:
    """Adjoint of ``a`` in ``np.linalg.matrix_power(a, n)`` for ``n >= 0``."""
    refuse_unless(
        n >= 0, "the gradient of matrix_power with a negative exponent: use inv and a power"
    )
    powers = matrix_powers(a, n)
    return sum((T(powers[k]) @ g @ T(powers[n - 1 - k]) for k in range(n)), zeros_of(a))


def sinc_slope(x: Any) -> Any:
    """The derivative of ``np.sinc(x) = sin(pi x) / (pi x)``: ``(cos(pi x) - sinc(x)) / x``; near 0,
    its series ``-pi^2 x/3 + pi^4 x^3/30 - pi^6 x^5/840`` (the closed form subtracts nearly equal
    numbers there, and lost five digits at ``x = 1e-6``)."""
    small = np.abs(x) < 1e-3
    safe = np.where(small, 1.0, x)
    far = (np.cos(np.pi * safe) - np.sinc(safe)) / safe
    x2 = x * x
    near = x * (-np.pi ** 2 / 3.0 + np.pi ** 4 * x2 / 30.0 - np.pi ** 6 * x2 * x2 / 840.0)
    return np.where(small, near, far)


def diff_vjp(g: Any, x: Any, n: Any = 1, axis: Any = -1) -> Any:
    """Adjoint of ``x`` in ``np.diff(x, n, axis)``: ``n`` times the adjoint of one difference."""
    for _ in range(n):
        g = np.moveaxis(g, axis, -1)
        edge = zeros_of(g, g.shape[:-1] + (1,))
        g = np.moveaxis(
            np.concatenate([edge, g], axis=-1) - np.concatenate([g, edge], axis=-1), -1, axis
        )
    return np.reshape(g, np.shape(x))


def summed_product(g: Any, y: Any) -> Any:
    """``np.sum(g * y)``: a number's adjoint where it multiplied an array (``x * y``). For two
    arrays of real floats of one shape, ``np.vdot``: one pass over the entries and no array of
    products (the same products summed in another order: the last bits may differ, as between any
    two orders); anything else (``g`` a float zero, a broadcast, complex values) as written."""
    if type(g) is np.ndarray and type(y) is np.ndarray and g.shape == y.shape and \
            g.dtype.kind == "f" and y.dtype.kind == "f":
        return np.vdot(g, y)
    return np.sum(g * y)


def roll_vjp(g: Any, shift: Any, axis: Any = None) -> Any:
    """Adjoint of ``x`` in ``np.roll(x, shift, axis)``: ``g`` rolled back by ``shift``. A flat array
    rolled by a whole number is two slices joined (numpy's ``roll`` costs several times that copy,
    which a solver's adjoint pays at every step); anything else is ``np.roll`` itself."""
    if (type(g) is np.ndarray and g.ndim == 1 and g.size and type(shift) is int
            and (axis is None or axis in (0, -1))):
        k = shift % g.size
        return np.concatenate((g[k:], g[:k]))
    return np.roll(g, np.negative(shift), axis)


def rollaxis_vjp(g: Any, x: Any, axis: Any, start: Any = 0) -> Any:
    """Adjoint of ``x`` in ``np.rollaxis``: ``g`` with the inverse permutation."""
    ndim = np.ndim(x)
    marks = np.rollaxis(np.zeros(tuple(range(2, ndim + 2))), axis, start).shape
    return np.transpose(g, np.argsort([m - 2 for m in marks]))


def dstack_vjp(g: Any, arrays: Any) -> Any:
    parts = [np.atleast_3d(a) for a in arrays]
    return [
        np.reshape(p, np.shape(a))
        for p, a in zip(concatenate_vjp(g, parts, 2), arrays, strict=True)
    ]


def column_stack_vjp(g: Any, arrays: Any) -> Any:
    parts = [np.reshape(a, (-1, 1)) if np.ndim(a) < 2 else a for a in arrays]
    return [
        np.reshape(p, np.shape(a))
        for p, a in zip(concatenate_vjp(g, parts, 1), arrays, strict=True)
    ]


def nanmean_vjp(g: Any, x: Any, axis: Any = None, keepdims: Any = False) -> Any:
    present = np.logical_not(np.isnan(x))
    return (
        expand_reduced(g, x, axis, keepdims) * present / np.sum(present, axis=axis, keepdims=True)
    )


def trapezoid_vjp(g: Any, y: Any, dx: Any = 1.0, axis: Any = -1, x: Any = None) -> Any:
    """Adjoint of ``y`` in ``np.trapezoid(y, dx=dx)``: weights dx/2, dx, ..., dx, dx/2; at sample
    points ``x``, each point's weight is half the width of the two intervals it bounds."""
    n = np.shape(y)[axis]
    shape = [1] * np.ndim(y)
    shape[axis] = n
    if x is None:
        weights = np.full(n, float(dx))
        weights[[0, -1]] = dx / 2.0
        return np.expand_dims(of_type(g, y), axis) * np.reshape(weights, shape)
    along = axis if np.ndim(x) > 1 else -1
    widths = 0.5 * np.diff(np.moveaxis(x, along, -1), axis=-1)
    weights = np.concatenate(
        [widths[..., :1], widths[..., 1:] + widths[..., :-1], widths[..., -1:]], axis=-1
    )
    weights = np.reshape(weights, shape) if np.ndim(x) == 1 else np.moveaxis(weights, -1, along)
    return np.expand_dims(of_type(g, y), axis) * weights


def convolve_vjp(k: Any, g: Any, a: Any, v: Any, mode: Any = "full") -> Any:
    """Adjoint of ``a`` (k=0) or ``v`` (k=1) in ``np.convolve(a, v, mode)``: ``g`` placed in the
    full convolution, correlated with the other operand."""
    n, m = len(a), len(v)
    full = zeros_of(g, (n + m - 1,))
    start = {"full": 0, "same": (min(n, m) - 1) // 2, "valid": min(n, m) - 1}[mode]
    full[start:start + len(g)] = g
    return np.correlate(full, v if k == 0 else a, "valid")


def correlate_vjp(k: Any, g: Any, a: Any, v: Any, mode: Any = "valid") -> Any:
    """Adjoint of ``a`` (k=0) or ``v`` (k=1) in ``np.correlate(a, v, mode)`` (real arrays)."""
    if k == 0:
        return convolve_vjp(0, g, a, v[::-1], mode)
    return convolve_vjp(1, g, a, v[::-1], mode)[::-1]


def polyval_vjp_p(g: Any, p: Any, x: Any) -> Any:
    powers = np.arange(len(p) - 1, -1, -1)
    # numbers g, x: like p
    return of_type(np.stack([np.sum(g * as_array(x) ** k) for k in powers]), p)


def polyder_vjp(g: Any, p: Any, m: Any = 1) -> Any:
    """Adjoint of ``p`` in ``np.polyder(p, m)``: entry i of the result is ``p_i (n-1-i)! /
    (n-1-i-m)!``."""
    n = len(p)
    out = zeros_of(as_array(p))
    if n > m:
        factors = [float(np.prod([n - 1 - i - t for t in range(m)])) for i in range(n - m)]
        out[:n - m] = as_array(g)[:n - m] * np.array(factors)
    return out


def linspace_vjp(k: Any, g: Any, num: Any = 50, endpoint: Any = True) -> Any:
    """Adjoint of ``start`` (k=0) or ``stop`` (k=1) in ``np.linspace``."""
    t = np.linspace(0.0, 1.0, num, endpoint=endpoint)
    t = np.reshape(t, (-1,) + (1,) * (np.ndim(g) - 1))
    return np.sum(g * (1.0 - t if k == 0 else t), axis=0)


def multi_dot_vjp(g: Any, arrays: Any) -> Any:
    """Adjoints of the matrices ``np.linalg.multi_dot`` multiplies (a first or last vector
    included)."""
    mats = [as_array(a).astype(float) for a in arrays]
    if mats[0].ndim == 1:
        mats[0] = mats[0][None, :]
    if mats[-1].ndim == 1:
        mats[-1] = mats[-1][:, None]
    g2 = np.reshape(g, (mats[0].shape[0], mats[-1].shape[1]))
    parts = []
    for i, a in enumerate(mats):
        left = mats[0] if i == 1 else np.linalg.multi_dot(mats[:i]) if i > 1 else np.eye(a.shape[0])
        last = len(mats) - 1
        right = (
            mats[-1]
            if i == last - 1
            else np.linalg.multi_dot(mats[i + 1 :])
            if i < last - 1
            else np.eye(a.shape[1])
        )
        parts.append(np.reshape(left.T @ g2 @ right.T, np.shape(arrays[i])))
    return parts


def vecdot_vjp(g: Any, other: Any, axis: Any = -1) -> Any:
    return np.expand_dims(g, axis) * other
