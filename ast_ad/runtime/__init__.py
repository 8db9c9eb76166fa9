"""Helpers that generated gradient code and rules call.

Each helper is a small self-contained function over numpy, so that an exported
gradient module can carry its own copy of the ones it uses.

The helpers keep their arguments' array type. They call numpy's functions, which
hand each call to the array type of its arguments (NEP 13 ``__array_ufunc__``,
NEP 18 ``__array_function__``), so a gradient of dask or CuPy arrays is built of
dask or CuPy arrays. They never call ``np.asarray`` on an array (``as_array``
leaves arrays as they are), make zeros with ``np.zeros(shape)`` (``zeros_of``
makes them of an array's type) or copy with ``np.array`` (the ``copy`` method: dask has no ``np.copy``).

>>> unbroadcast(np.ones((2, 3)), np.zeros(3))
array([2., 2., 2.])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ast_ad.errors import UnsupportedDerivativeError


def is_array(x: Any) -> bool:
    """Whether ``x`` is an array: numpy's, or one of a library that implements numpy's dispatch protocols."""
    kind = type(x)
    if kind is np.ndarray:
        return True
    if kind is float or kind is np.float64 or kind is int:  # the numbers an element loop reads, first
        return False
    if isinstance(x, np.ndarray):
        return True
    return hasattr(kind, "__array_function__") and hasattr(kind, "__array_ufunc__") and hasattr(x, "shape") \
        and hasattr(x, "dtype") and not isinstance(x, np.generic)


def as_array(x: Any) -> Any:
    """``x`` as an array: numbers and lists to numpy, an array of any library as it is."""
    return x if is_array(x) else np.asarray(x)


def of_type(g: Any, x: Any) -> Any:
    """``g`` (a number, say a float zero or a seed) as an array of ``x``'s library where ``x`` is an array of
    another library than numpy, so that broadcasting it to ``x``'s shape makes no numpy array."""
    if isinstance(x, np.ndarray) or type(g) is type(x) or not is_array(x):
        return g
    return np.asarray(g, like=x)


def copy_as(x: Any, dtype: Any) -> Any:
    """A new array with ``x``'s values in ``dtype``, to write into (dask's ``astype`` may return ``x`` itself)."""
    out = as_array(x).astype(dtype)
    return out.copy() if out is x else out


def broadcast_like(g: Any, x: Any, shape: Any) -> Any:
    """``np.broadcast_to(g, shape)``: a view for numpy; for another library's ``x``, zeros of ``x``'s type and
    layout plus ``g`` (dask would make a number broadcast to ``shape`` one chunk of that whole shape)."""
    if isinstance(x, np.ndarray) or not is_array(x):
        return np.broadcast_to(g, shape)
    return zeros_of(x, shape, dtype=np.result_type(g)) + g


def size_of(x: Any) -> int:
    """How many entries ``x`` has (``np.size`` computes a dask array)."""
    return int(x.size) if is_array(x) else int(np.size(x))


def zeros_of(like: Any, shape: Any = None, dtype: Any = float) -> Any:
    """Zeros of ``like``'s shape (or of ``shape``), of ``like``'s array type: numpy's for numbers and lists."""
    if is_array(like) and not isinstance(like, np.ndarray):
        if shape is None or tuple(shape) == tuple(like.shape):  # like's shape: its layout too (dask's chunks)
            return np.zeros_like(like, dtype=dtype)
        return np.zeros_like(like, dtype=dtype, shape=shape)
    return np.zeros(np.shape(like) if shape is None else shape, dtype=dtype)


def unbroadcast(g: Any, x: Any) -> Any:
    """Sum ``g`` down to the shape of ``x``, undoing numpy broadcasting."""
    if type(x) is np.ndarray and type(g) is np.ndarray and g.shape == x.shape:  # the common case, first
        return g
    if type(g) in (float, np.float64) and type(x) in (float, np.float64):  # two numbers, as an element loop's
        return g  # step has: nothing to do (the tuple is written out: an exported module has no globals)
    if isinstance(x, (tuple, list, dict)):
        if isinstance(g, (tuple, list, dict)) and len(g) != len(x):
            try:
                from ast_ad.errors import MissingRuleError as error
            except ImportError:  # in an exported module
                error = TypeError  # type: ignore[misc, assignment]  # exported without ast_ad
            raise error("this + or * joined or repeated lists or tuples, which ast_ad could not tell apart "
                        "from arithmetic here: build the list as a literal, with append, or with "
                        "list(...) first, so ast_ad knows it is a list")
        return g
    shape = getattr(x, "shape", None)
    if shape is not None and getattr(g, "shape", None) == shape:
        return g
    return _summed_to_shape(g, x, np.shape(x))


def fit_adjoint(g: Any, d: Any) -> Any:
    """``unbroadcast``'s transpose: ``g``, the adjoint of ``unbroadcast(d, x)``, brought to ``d``'s shape, broadcast
    up where ``unbroadcast`` summed ``d`` down (``fit``), summed down where it broadcast ``d`` up: where ``d`` is
    the float zero an adjoint starts as, which stands for zeros of any shape (reverse mode over a gradient)."""
    if is_array(g) and np.ndim(d) < np.ndim(g) and not isinstance(d, (list, tuple, dict)) and d is not None:
        return unbroadcast(g, d)
    return fit(g, d)


def unbroadcast_to(g: Any, shape: Any) -> Any:
    """``unbroadcast(g, x)`` given ``x``'s shape, not ``x``: reverse mode keeps only the shape of an array that a
    loop overwrites where the backward pass reads nothing else of it (``saving.Saving.shape_only``)."""
    if getattr(g, "shape", None) == shape:
        return g
    return _summed_to_shape(g, None, tuple(shape))


def _summed_to_shape(g: Any, x: Any, shape: Any) -> Any:
    """``g`` summed down to ``shape``, where it broadcast up to more (``x``, if given, an array of that shape)."""
    if np.shape(g) == shape:
        return g
    g = as_array(g)
    if g.ndim < len(shape):  # ``g`` broadcasts to ``x`` (a zero, say): nothing was summed up
        return broadcast_like(g, x, shape)
    if g.ndim > len(shape):
        g = g.sum(axis=tuple(range(g.ndim - len(shape))))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return np.broadcast_to(g, shape) if g.shape != shape else g


def zeros_like(x: Any) -> Any:
    """A zero adjoint for ``x``: a float for scalars, a tuple or list for tuples and lists."""
    if isinstance(x, dict):
        return {key: zeros_like(item) for key, item in x.items()}
    if isinstance(x, tuple):
        return tuple(zeros_like(item) for item in x)
    if isinstance(x, list):
        return [zeros_like(item) for item in x]
    return 0.0 if np.ndim(x) == 0 else zeros_of(x)


def dense_adjoint(g: Any, x: Any) -> Any:
    """``g``, the adjoint of ``x``, as zeros of ``x``'s shape if it is still the float zero it started as.

    Accumulating adjoints start as ``0.0``, which broadcasting rules take as any
    shape; a rule that reshapes, indexes or multiplies matrices needs the real shape.
    """
    if g is None or (type(g) in (float, np.float64) and g == 0.0 and not isinstance(x, float)):
        return zeros_like(x)  # (the float zero times a numpy number is numpy's float zero: the same zero)
    return g


def unpopped(xs_bar: Any, entry: Any, xs: Any) -> Any:
    """The adjoint of a list before ``y = xs.pop()``: ``xs``'s adjoint after it (``None``, or a float zero:
    zeros for its items) with ``y``'s adjoint, ``entry``, as the last item (reverse mode's rule of ``pop``)."""
    head = [zeros_like(item) for item in xs] if xs_bar is None or isinstance(xs_bar, float) else list(xs_bar)
    return [*head, entry]


def add_adjoints(a: Any, b: Any) -> Any:
    """Sum two adjoints, element by element for tuples and lists; ``None`` is zero."""
    if a is None or b is None:
        return b if a is None else a
    if isinstance(a, float) and a == 0.0 and isinstance(b, (tuple, list, dict)):
        return b  # the float zero an item's adjoint starts as, meeting a container's adjoint
    if isinstance(a, dict):
        return {key: add_adjoints(a[key], b[key]) for key in a}
    if isinstance(a, (tuple, list)):
        parts = [add_adjoints(p, q) for p, q in zip(a, b, strict=True)]
        return parts if isinstance(a, list) else tuple(parts)
    return a + b


def cast_vjp(g: Any, ans: Any, x: Any) -> Any:
    """Adjoint of ``x`` in a cast: ``g`` where the result is still a float, zero where it was truncated to integers."""
    if np.result_type(ans).kind in "biu":
        return zeros_like(x)
    return unstack(g, x)


def spread(g: Any, xs: Any) -> Any:
    """The adjoints of the terms of ``sum(xs)``: ``g`` for each, summed down to its term's shape."""
    return [unbroadcast(g, x) for x in xs]


def sequence_vjp(g: Any, x: Any) -> Any:
    """Adjoint of ``x`` in ``list(x)``, ``tuple(x)`` or ``dict(x)``: its items' adjoints, held as ``x`` holds its
    items (a list, a tuple, a dict; an array's rows, stacked). An item nothing flowed into (``None``) is zero."""
    if g is None or (isinstance(g, float) and g == 0.0):
        return zeros_like(x)
    if isinstance(x, dict):
        return {k: zeros_like(item) if g.get(k) is None else g[k] for k, item in x.items()}
    if isinstance(x, (list, tuple)):
        parts = [zeros_like(item) if part is None else part for part, item in zip(g, x, strict=True)]
        return parts if isinstance(x, list) else type(x)(*parts) if hasattr(x, "_fields") else tuple(parts)
    if is_array(x):
        return np.stack([zeros_of(row) + (0.0 if part is None else part) for part, row in zip(g, x, strict=True)])
    refuse_unless(False, "the gradient of list() or tuple() of a ", type(x).__name__, ": build the list with a "
                  "comprehension over its items instead")
    return None


def unstack(g: Any, x: Any) -> Any:
    """The adjoint of the list ``x`` that numpy stacked into an array with adjoint ``g``."""
    if isinstance(x, (list, tuple)):
        return [unstack(g[i], item) for i, item in enumerate(x)]
    return unbroadcast(g, x)


def extremum_vjp(g: Any, ans: Any, x: Any, axis: Any = None, keepdims: Any = False) -> Any:
    """Adjoint of ``x`` in a max or min over ``axis``: shared equally among the entries that tie."""
    hits = x == expand_reduced(ans, x, axis, keepdims)
    count = np.sum(hits, axis=axis, keepdims=True)
    share = hits / np.where(count == 0, np.nan, count)  # (no entry is the extremum, a nan: nan, and no warning)
    return expand_reduced(g, x, axis, keepdims) * share


def expand_reduced(g: Any, x: Any, axis: Any = None, keepdims: Any = False) -> Any:
    """Broadcast ``g``, the adjoint of a reduction of ``x`` over ``axis``, back to ``x``'s shape."""
    shape = np.shape(x)
    if axis is not None and not keepdims:
        axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
        g = np.expand_dims(g, tuple(a % len(shape) for a in axes))
    return broadcast_like(g, x, shape)


def summed_to(w: Any, g: Any, axis: Any = None, keepdims: Any = False) -> Any:
    """The transpose of ``expand_reduced``: ``w``, shaped as the reduced array, summed over the reduced axes
    and shaped as ``g`` (reverse mode over a gradient's code)."""
    total = np.sum(w) if axis is None else np.sum(w, axis=axis, keepdims=keepdims)
    return np.reshape(total, np.shape(g)) if np.size(total) == np.size(g) else unbroadcast(total, g)


def reduced_count(x: Any, axis: Any = None) -> Any:
    """How many entries of ``x`` a reduction over ``axis`` combines."""
    shape = np.shape(x)
    if axis is None:
        return int(np.prod(shape))
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
    return int(np.prod([shape[a] for a in axes]))


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
    """``sum(matmul_vjp_a(g, a, b) for g, b in terms)``: what a loop gives a fixed ``a`` in ``a @ b``."""
    return summed_products(terms, a, matmul_vjp_a, fixed_first=True)


def summed_matmul_vjp_b(terms: Any, b: Any) -> Any:
    """``sum(matmul_vjp_b(g, a, b) for g, a in terms)``: what a loop gives a fixed ``b`` in ``a @ b``."""
    return summed_products(terms, b, matmul_vjp_b, fixed_first=False)


def summed_dot_vjp_a(terms: Any, a: Any) -> Any:
    """``sum(dot_vjp_a(g, a, b) for g, b in terms)``: what a loop gives a fixed ``a`` in ``np.dot(a, b)``."""
    return summed_products(terms, a, dot_vjp_a, fixed_first=True)


def summed_dot_vjp_b(terms: Any, b: Any) -> Any:
    """``sum(dot_vjp_b(g, a, b) for g, a in terms)``: what a loop gives a fixed ``b`` in ``np.dot(a, b)``."""
    return summed_products(terms, b, dot_vjp_b, fixed_first=False)


def summed_getitem_vjp(terms: Any, x: Any) -> Any:
    """``sum(getitem_vjp(g, x, index) for g, index in terms)``: what a loop's reads ``x[i]`` give ``x``, added
    into one array after the loop instead of one zero array per step."""
    if isinstance(x, (dict, tuple, list)):
        total = None
        for g, index in terms:
            total = add_adjoints(total, getitem_vjp(g, x, index))
        return zeros_like(x) if total is None else total
    kinds = {g.dtype if is_array(g) else type(g) for g, _ in terms}  # a few, where a loop gave thousands of terms
    out = zeros_of(x, dtype=np.result_type(x, 1.0, *kinds))
    if type(out) is np.ndarray and out.ndim == 1 and len(terms) > 8:  # x[i] read entry by entry in a loop
        parts, indices = zip(*terms, strict=True)
        at, values = np.asarray(indices), np.asarray(parts)
        if at.dtype.kind in "iu" and at.shape == values.shape == (len(terms),) and values.dtype.kind in "biufc":
            np.add.at(out, at, values)  # in order, as the loop below adds: the same sums to the bit
            return out
    for g, index in terms:
        if type(index) is int or isinstance(index, (np.integer, slice)) or (isinstance(index, tuple) and all(
                isinstance(i, (int, np.integer, slice)) or i is None or i is Ellipsis for i in index)):
            out[index] += g  # a basic index names each entry once
        else:
            scatter_add(out, index, g)  # repeated fancy indices add up
    return out


# The batched sums above, step by step and in the language ast_ad differentiates: what reverse mode reads for
# them (``registry.def_read_as``), as it reads the other helpers by their source.
def summed_matmul_vjp_a_by_steps(terms: Any, a: Any) -> Any:
    total = 0.0
    for g, b in terms:
        total = total + matmul_vjp_a(g, a, b)
    return total


def summed_matmul_vjp_b_by_steps(terms: Any, b: Any) -> Any:
    total = 0.0
    for g, a in terms:
        total = total + matmul_vjp_b(g, a, b)
    return total


def summed_dot_vjp_a_by_steps(terms: Any, a: Any) -> Any:
    total = 0.0
    for g, b in terms:
        total = total + dot_vjp_a(g, a, b)
    return total


def summed_dot_vjp_b_by_steps(terms: Any, b: Any) -> Any:
    total = 0.0
    for g, a in terms:
        total = total + dot_vjp_b(g, a, b)
    return total


def summed_getitem_vjp_by_steps(terms: Any, x: Any) -> Any:
    total = zeros_like(x)
    for g, index in terms:
        total = add_adjoints(total, getitem_vjp(g, x, index))
    return total


def index_terms_jvp(u: Any, terms: Any) -> Any:
    """Tangent terms of ``summed_getitem_vjp``: each step's ``(g, index)`` gives ``(g_dot, index)``."""
    return [(g_dot, index) for (g_dot, _), (_, index) in zip(u, terms, strict=True)]


def summed_products(terms: Any, fixed: Any, vjp: Any, fixed_first: Any) -> Any:
    """The sum of a loop's contributions ``vjp(g, ...)`` to a matrix ``fixed`` it multiplies every step.

    ``terms`` holds each step's ``(g, other operand)``. With vectors, each step's
    contribution is an outer product, and their sum is one matrix product of the
    stacked vectors: ``G.T @ B`` for ``fixed @ b``, ``A.T @ G`` for ``a @ fixed``.
    With matrices, the steps' columns (for ``fixed @ b``) or rows (for ``a @ fixed``)
    side by side do the same. Other shapes are summed step by step.
    """
    if type(fixed) is np.ndarray and fixed.ndim == 2 and terms:  # numpy vectors: np.array stacks them in C
        vectors, operands = zip(*terms, strict=True)
        g_shape: Any = getattr(vectors[0], "shape", ())
        other_shape: Any = getattr(operands[0], "shape", ())
        if all(type(v) is np.ndarray and v.shape == g_shape for v in vectors) and \
                all(type(v) is np.ndarray and v.shape == other_shape for v in operands) and \
                len(g_shape) == 1 and len(other_shape) == 1:
            # vectors of one length each: joined end to end and read as rows (np.array takes a third longer,
            # np.stack checks each in Python and takes three times as long)
            g_rows = np.concatenate(vectors).reshape(len(vectors), g_shape[0])
            other_rows = np.concatenate(operands).reshape(len(operands), other_shape[0])
            return g_rows.T @ other_rows if fixed_first else other_rows.T @ g_rows
    fixed = as_array(fixed)
    gs = [as_array(g) for g, _ in terms]
    others = [as_array(other) for _, other in terms]
    ranks = {(g.ndim, other.ndim) for g, other in zip(gs, others, strict=True)}
    if fixed.ndim == 2 and ranks == {(1, 1)}:
        return np.stack(gs).T @ np.stack(others) if fixed_first else np.stack(others).T @ np.stack(gs)
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


def check_dot_rank(a: Any, b: Any) -> Any:
    """``np.dot`` of arrays of three or more dimensions is not matmul: refuse it."""
    if np.ndim(a) > 2 or np.ndim(b) > 2:
        raise UnsupportedDerivativeError("the gradient of np.dot on arrays with more than 2 dimensions "
                                         "is not supported: use np.matmul or np.tensordot")


def scatter_add(out: Any, index: Any, g: Any) -> Any:
    """``np.add.at(out, index, g)``: ``out[index] += g`` in place, repeated indices adding up; ``out``.

    dask has no ``np.add.at``: for one integer array among slices, as ``x[idx]`` and ``x[:, idx]`` are, the
    entries are added in as many plain writes as an index repeats (``x[idx] = x[idx] + g`` with ``idx``'s
    entries distinct each time), which dask runs lazily. Other fancy indices of such an array are refused.
    """
    try:
        np.add.at(out, index, g)
        return out
    except TypeError:
        if isinstance(out, np.ndarray):
            raise
    parts = index if isinstance(index, tuple) else (index,)
    fancy = [j for j, part in enumerate(parts) if _fancy(part)]
    ints = [j for j, part in enumerate(parts) if isinstance(part, (int, np.integer))]
    run = sorted(fancy + ints)
    if len(fancy) != 1 or not all(isinstance(part, slice) for j, part in enumerate(parts) if j not in run) \
            or run != list(range(run[0], run[0] + len(run))) or not isinstance(parts[fancy[0]], (list, np.ndarray)):
        raise UnsupportedDerivativeError(
            f"the gradient of reading a {type(out).__name__} at this index: {type(out).__name__} cannot add at "
            "repeated indices (np.add.at) except for one numpy integer array among slices and integers "
            "(x[idx], x[:, idx], x[idx, 1])")
    if ints:  # x[idx, 1] is x[idx, 1:2] without that axis: the same entries, with one integer array alone
        dims = np.ndim(parts[fancy[0]])
        g = np.expand_dims(g, tuple(j if j < fancy[0] else j - 1 + dims for j in ints))
        parts = tuple(slice(part % out.shape[j], part % out.shape[j] + 1) if j in ints else part
                      for j, part in enumerate(parts))
    p = fancy[0]
    positions = np.asarray(parts[p])
    flat = np.ravel(positions % out.shape[p])
    g = np.reshape(g, np.shape(g)[:p] + (flat.size,) + np.shape(g)[p + positions.ndim:])
    order = np.argsort(flat, kind="stable")
    ranked = flat[order]
    starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])
    repeat = np.empty(flat.size, dtype=np.intp)  # how many earlier entries of the index name the same place
    repeat[order] = np.arange(flat.size) - np.repeat(starts, np.diff(np.r_[starts, flat.size]))
    for level in range(int(repeat.max()) + 1 if flat.size else 0):
        chosen = np.flatnonzero(repeat == level)
        where = parts[:p] + (flat[chosen],) + parts[p + 1:]
        out[where] = out[where] + np.take(g, chosen, axis=p)
    return out


def getitem_vjp(g: Any, x: Any, index: Any) -> Any:
    """Adjoint of ``x`` in ``x[index]``: ``g`` scattered into zeros (repeated indices add)."""
    if isinstance(x, dict):
        return {key: g if key == index else zeros_like(item) for key, item in x.items()}
    if isinstance(x, (tuple, list)):
        parts = [zeros_like(item) for item in x]
        parts[index] = g
        return parts if isinstance(x, list) else tuple(parts)
    out = zeros_of(x, dtype=np.result_type(x, g, 1.0))
    if _fancy(index):
        scatter_add(out, index, g)
    elif isinstance(out, np.ndarray):  # each entry named once: a plain write is the same sum, faster than np.add.at
        out[index] = g
    else:
        try:
            out[index] = g
        except (ValueError, NotImplementedError) as exc:  # dask, at a mask: it does not know how many entries
            raise UnsupportedDerivativeError(
                f"the gradient of reading a {type(out).__name__} through this index ({exc}): write "
                "np.where(mask, x, 0.0) instead of x[mask] where the result is summed") from exc
    return out


def clip_mask(x: Any, lo: Any, hi: Any) -> Any:
    """1 where ``np.clip(x, lo, hi)`` passes ``x`` through, 0 where it clips."""
    inside = np.ones_like(as_array(x), dtype=float)
    if lo is not None:
        inside = inside * (x >= lo)
    if hi is not None:
        inside = inside * (x <= hi)
    return inside


def balanced_eq(x: Any, ans: Any, y: Any) -> Any:
    """1 where ``x`` alone gave ``ans``, 0.5 where ``x`` and ``y`` tied (for max/min)."""
    return (x == ans) / (1.0 + (x == y))


def pow_minus_one(x: Any, y: Any) -> Any:
    """``x ** (y - 1)`` for the rule of ``x ** y``, and ``inf`` rather than ZeroDivisionError for a negative
    power of ``0.0``. Where ``y`` is 0 (the rule multiplies it by 0) and the power is not finite, 0.

    It is ``x ** (y - 1)`` itself wherever that is finite, so that its derivative in ``y`` (in a second
    derivative of ``x ** y``) is exact."""
    if np.ndim(y) or np.ndim(x):
        base = as_array(x)
        base = base.astype(float) if base.dtype.kind in "biu" else base  # integers to negative powers
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            power = base ** (y - 1)
        return np.where(np.equal(y, 0) & ~np.isfinite(power), 0.0, power)
    if isinstance(x, (np.generic, np.ndarray)):  # a numpy 0 ** -1 is inf with a warning, not an error: as above
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            power = x ** (y - 1)
        return 0.0 if y == 0 and not np.isfinite(power) else power
    try:
        power = x ** (y - 1)
    except (ZeroDivisionError, OverflowError):
        return 0.0 if y == 0 else np.power(np.float64(x), y - 1)
    if type(power) is complex:  # Python's power of a negative float: the value went complex on this line
        try:
            from ast_ad.errors import LocatedError as error
        except ImportError:  # in an exported module
            error = ValueError  # type: ignore[misc, assignment]  # exported without ast_ad
        raise error("a negative number to a fractional power is complex in Python, and ast_ad differentiates "
                    "real code only: keep the base positive, or use np.power (nan there) or np.cbrt")
    return power


def reciprocal_or_zero(x: Any) -> Any:
    """``1 / x``, and 0 where ``x`` is 0 (a gradient taken as zero where a norm or a spread vanishes)."""
    nonzero = x != 0
    return np.where(nonzero, 1.0 / np.where(nonzero, x, 1.0), 0.0)


def safe_log(x: Any) -> Any:
    """``log(x)``, taking 0 where ``x`` is 0 (for the exponent's rule of ``x ** y``)."""
    return np.log(np.where(x == 0, 1.0, x))


def refuse_unless(ok: Any, *message: Any) -> None:
    """Raise ``UnsupportedDerivativeError`` unless ``ok``, its message the parts given, joined. Written as a call
    (an f-string is outside the language), a helper's refusal keeps the helper in the language ast_ad
    differentiates (``forward.by_source``)."""
    if not ok:
        raise UnsupportedDerivativeError("".join(str(part) for part in message))


def zip_length(*lengths: Any) -> Any:
    """The length of ``zip(*seqs, strict=True)`` over sequences of these lengths: Python's error where they differ."""
    for k, n in enumerate(lengths[1:], start=2):
        if n != lengths[0]:
            raise ValueError(f"zip() argument {k} is {'shorter' if n < lengths[0] else 'longer'} than argument 1")
    return int(lengths[0])  # a count: no gradient passes (the registry declares it so)


# ---- reductions and scans -------------------------------------------------------------------------------
def to_last(x: Any, axis: Any) -> Any:
    """``x`` with ``axis`` moved last (flattened when ``axis`` is None)."""
    if axis is None:
        return np.ravel(x)
    return np.moveaxis(as_array(x), axis, -1)


def from_last(y: Any, x: Any, axis: Any) -> Any:
    """``y``, laid out as ``to_last(x, axis)`` is, put back in ``x``'s layout."""
    if axis is None:
        return np.reshape(y, np.shape(x))
    return np.moveaxis(y, -1, axis)


def prod_vjp(g: Any, ans: Any, x: Any, axis: Any = None, keepdims: Any = False) -> Any:
    """Adjoint of ``x`` in ``np.prod``: the product of the other entries, exact where ``x`` has zeros."""
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
    left = np.cumprod(np.concatenate([np.ones_like(moved[..., :1]), moved[..., :-1]], axis=-1), axis=-1)
    right = np.flip(np.cumprod(np.concatenate([np.ones_like(moved[..., :1]), np.flip(moved, -1)[..., :-1]],
                                              axis=-1), axis=-1), -1)
    return g * from_last(left * right, x, axis)


def var_vjp(g: Any, ans: Any, x: Any, axis: Any = None, ddof: Any = 0, keepdims: Any = False) -> Any:
    """Adjoint of ``x`` in ``np.var``."""
    mean = np.mean(x, axis=axis, keepdims=True)
    return expand_reduced(g, x, axis, keepdims) * 2.0 * (x - mean) / (reduced_count(x, axis) - ddof)


def std_vjp(g: Any, ans: Any, x: Any, axis: Any = None, ddof: Any = 0, keepdims: Any = False) -> Any:
    """Adjoint of ``x`` in ``np.std``; where the deviation is zero, the gradient is taken as zero."""
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


def norm_vjp(g: Any, ans: Any, x: Any, ord: Any = None, axis: Any = None, keepdims: Any = False) -> Any:
    """Adjoint of ``x`` in ``np.linalg.norm``; at a zero vector the gradient is taken as zero."""
    matrix = (axis is None and np.ndim(x) == 2 and ord is not None) or (axis is not None and np.ndim(axis) > 0)
    g = expand_reduced(g, x, axis, keepdims)
    ans = expand_reduced(ans, x, axis, keepdims)
    if matrix and ord == "nuc":
        u, _, vt = np.linalg.svd(x, full_matrices=False)
        return g * (u @ vt)
    if matrix and ord in (2, -2) and np.ndim(x) == 2:  # the largest (smallest) singular value
        u, _, vt = np.linalg.svd(x, full_matrices=False)
        k = 0 if ord == 2 else -1
        return g * np.outer(u[:, k], vt[k])
    if matrix and ord in (1, -1, np.inf, -np.inf) and np.ndim(x) == 2:  # the largest (smallest) column or row sum
        along = 0 if ord in (1, -1) else 1
        sums = np.sum(np.abs(x), axis=along)
        chosen = np.argmax(sums) if ord in (1, np.inf) else np.argmin(sums)
        taken = zeros_of(x)
        if along == 0:
            taken[:, chosen] = 1.0
        else:
            taken[chosen, :] = 1.0
        return g * np.sign(x) * taken
    refuse_unless(not matrix or ord in (None, "fro"), "the gradient of np.linalg.norm with ord=", repr(ord),
                  " on matrices")
    safe = reciprocal_or_zero(ans)
    if ord in (None, 2, "fro"):
        return g * x * safe
    if ord == 1:
        return g * np.sign(x)
    if ord in (np.inf, -np.inf):
        hits = np.abs(x) == ans
        return g * np.sign(x) * hits / np.sum(hits, axis=axis, keepdims=True)
    return g * np.sign(x) * np.abs(x) ** (ord - 1) * safe ** (ord - 1)


# ---- products ---------------------------------------------------------------------------------------------
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
    """Adjoint of ``b`` in ``np.inner(a, b)``: ``g``'s axes of ``a`` moved behind those of ``b`` first."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return unbroadcast(g * a, b)
    lead = np.ndim(a) - 1
    g = np.moveaxis(g, list(range(lead)), list(range(np.ndim(g) - lead, np.ndim(g))))
    return inner_vjp(g, b, a)


def einsum_spec(spec: Any, *operands: Any) -> Any:
    """``spec`` with ``...`` spelt out and the output named: a list of input subscripts and the output's."""
    inputs, _, output = spec.replace(" ", "").partition("->")
    parts = inputs.split(",")
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in spec]
    widest = max((np.ndim(op) - len(p.replace("...", "")) for p, op in zip(parts, operands, strict=True) if "..." in p),
                 default=0)
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
    """Adjoint of operand ``k`` in ``np.einsum(spec, *operands)``, repeated (diagonal) indices included."""
    inputs, output = einsum_spec(spec, *operands)
    mine = inputs[k]
    unique = "".join(dict.fromkeys(mine))
    others = [(s, op) for j, (s, op) in enumerate(zip(inputs, operands, strict=True)) if j != k]
    covered = output + "".join(s for s, _ in others)
    for c in unique:  # an index summed away in operand k alone: g is constant along it
        if c not in covered:
            others.append((c, np.ones(np.shape(operands[k])[mine.index(c)])))
    subscripts = ",".join([output] + [s for s, _ in others]) + "->" + unique
    part = np.einsum(subscripts, g, *[op for _, op in others], optimize=True)  # a BLAS product where it can
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
    return of_type(np.einsum(subscripts, part, *[e for _, e in deltas]), operands[k])  # numpy eyes: like operand k


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
    """Adjoint of ``v`` in ``np.diag(v, k)``: it builds a matrix from a vector or takes a diagonal."""
    if np.ndim(v) == 1:
        return np.diag(g, k)
    return diagonal_vjp(g, v, k)


# ---- shape and layout --------------------------------------------------------------------------------------
def split_vjp(g: Any, ans: Any, x: Any, axis: Any = 0) -> Any:
    """Adjoint of ``x`` in ``np.split`` and friends: the parts' adjoints put back together."""
    parts = [bar if bar is not None else zeros_of(part) for bar, part in zip(g, ans, strict=True)]
    parts = [np.broadcast_to(p, np.shape(a)) for p, a in zip(parts, ans, strict=True)]
    return np.concatenate(parts, axis=axis)


def concatenate_vjp(g: Any, arrays: Any, axis: Any = 0) -> Any:
    """Adjoints of the arrays ``np.concatenate`` joined: ``g`` cut back into their sizes."""
    if axis is None:
        sizes = np.cumsum([size_of(a) for a in arrays])[:-1]
        return [np.reshape(part, np.shape(a)) for part, a in zip(np.split(np.ravel(g), sizes), arrays, strict=True)]
    sizes = np.cumsum([np.shape(a)[axis] for a in arrays])[:-1]
    return [part for part in np.split(g, sizes, axis=axis)]  # a list, whatever sequence split gives


def hstack_vjp(g: Any, arrays: Any) -> Any:
    parts = [np.atleast_1d(a) for a in arrays]
    axis = 0 if parts[0].ndim == 1 else 1
    return [np.reshape(p, np.shape(a)) for p, a in zip(concatenate_vjp(g, parts, axis), arrays, strict=True)]


def vstack_vjp(g: Any, arrays: Any) -> Any:
    parts = [np.atleast_2d(a) for a in arrays]
    return [np.reshape(p, np.shape(a)) for p, a in zip(concatenate_vjp(g, parts, 0), arrays, strict=True)]


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
    index = tuple(slice(int(lo), int(lo) + n) for (lo, _), n in zip(widths, np.shape(x), strict=True))
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
    """Adjoint of ``arr`` in ``np.take_along_axis``: ``g`` added back where each entry was taken from (an entry
    taken twice, or along an axis of length 1 that the indices broadcast, adds up)."""
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
    """Adjoints of the choices in ``np.select``: each gets ``g`` where it was the first true condition."""
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


def assign_item(x: Any, index: Any, value: Any) -> Any:
    """``x`` with ``x[index] = value``, as a new array (or list): ``y[i] = v`` in generated code.

    The new array keeps ``x``'s dtype, as numpy's write does: a float written into an
    integer array is truncated (and takes no gradient, see ``assign_item_vjp_value``).
    """
    if isinstance(x, tuple):  # ``params[1][0] = v`` writes the new item back into a tuple it reads: a new tuple
        items = list(x)
        items[index] = value
        return type(x)(*items) if hasattr(x, "_fields") else tuple(items)
    out: Any = type(x)(x) if isinstance(x, (list, dict)) else x.copy() if is_array(x) else np.array(x)
    out[index] = value
    return out


def owned_adjoint(g: Any, x: Any) -> Any:
    """A dense copy of ``g``, the adjoint of the array ``x``, that a loop can update in place.

    ``g`` may still be the float zero an adjoint starts as. The copy is the loop's own: nothing else
    holds it, so writing into it changes no other adjoint. A list's (or dict's) adjoint is a list (dict)
    of owned adjoints of its items; a number's is the number (nothing can write into it).
    """
    if isinstance(x, (list, dict)):
        keys = range(len(x)) if isinstance(x, list) else list(x)
        parts = {k: (0.0 if g is None or isinstance(g, float) or g[k] is None else g[k]) for k in keys}
        owned = {k: owned_adjoint(parts[k], x[k]) for k in keys}
        return [owned[k] for k in keys] if isinstance(x, list) else owned
    if not is_array(x):
        return g
    return zeros_of(x, dtype=np.result_type(x, g, 1.0)) + g


def add_into(x: Any, index: Any, value: Any) -> None:
    """``x[index] += value`` in place, repeated indices adding up (``np.add.at``): a read's adjoint."""
    if type(index) is not int and _fancy(index):
        scatter_add(x, index, value)
    else:  # an integer, a slice or a mask names each entry once
        x[index] += value


def entries(x: Any, index: Any) -> Any:
    """A copy of ``x[index]``: the entries a write is about to overwrite."""
    taken = x[index]
    return taken.copy() if is_array(taken) else taken


def detached(x: Any) -> Any:
    """``x`` with every array in it copied: a result that the backward pass, which writes the arrays of
    the forward pass back as they were, must not change."""
    if is_array(x):
        return x.copy()
    if isinstance(x, dict):
        return {key: detached(item) for key, item in x.items()}
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(detached(item) for item in x))
    if isinstance(x, (tuple, list)):
        return type(x)(detached(item) for item in x)
    return x


def assign_item_vjp_x(g: Any, x: Any, index: Any) -> Any:
    """The overwritten entries take no gradient."""
    if isinstance(x, dict):
        return {key: item for key, item in g.items() if key in x and key != index} | \
            ({index: zeros_like(x[index])} if index in x else {})
    if isinstance(x, (list, tuple)):
        parts = list(g)
        parts[index] = zeros_like(x[index])
        return parts if isinstance(g, list) else tuple(parts)
    out = copy_as(g, float)
    out[index] = 0.0
    return out


def assign_item_vjp_value(g: Any, ans: Any, index: Any, value: Any) -> Any:
    """The written entries' adjoint; where an index repeats, only the last write landed (numpy's rule).

    Written into an integer array, the value was truncated: it takes no gradient.
    """
    if is_array(ans) and ans.dtype.kind in "biu":
        return zeros_like(value)
    taken = g[index]
    if type(value) in (float, np.float64) and not is_array(taken):
        return taken  # one entry, written once: its adjoint (a copy, as numbers are)
    if isinstance(taken, np.ndarray) and isinstance(g, np.ndarray):
        if np.may_share_memory(taken, g):
            taken = taken.copy()  # a view of the adjoint, which a loop may then zero in place
    elif is_array(taken):
        taken = taken.copy()  # another library's array: it may be a view too
    if is_array(g) and _fancy(index):
        order = np.arange(size_of(taken)).reshape(np.shape(taken))
        stamp = np.full(np.shape(g), -1)
        stamp[index] = order
        taken = np.where(stamp[index] == order, taken, 0.0)
    return unbroadcast(taken, value)


def _fancy(index: Any) -> Any:
    """Whether ``index`` holds an integer array or list, which may repeat entries."""
    if isinstance(index, (int, np.integer, slice)):  # the common cases, first
        return False
    if isinstance(index, tuple):
        return any(_fancy(part) for part in index)
    return (isinstance(index, list) or is_array(index)) and as_array(index).dtype.kind in "iu"


def copied(dst: Any, src: Any) -> Any:
    """``np.copyto(dst, src)`` as a new array: ``src`` broadcast to ``dst``'s shape, in ``dst``'s dtype."""
    out = dst.copy()
    np.copyto(out, src)  # numpy's own casting rules and errors
    return out


def add_at(x: Any, index: Any, value: Any) -> Any:
    """``np.add.at(x, index, value)`` as a new array: repeated indices add up."""
    out = copy_as(x, np.result_type(x, value))
    scatter_add(out, index, value)
    return out


def chosen(c: Any, x: Any, keep: Any) -> Any:
    """``x`` where ``np.where(c, ...)`` selects it (``keep``: where ``c`` holds, else where it does not), and ones
    elsewhere: what a branch of ``np.where`` computes from, so that it is finite where it is not selected and
    its derivative there is zero, not ``0 * inf`` (``selection``: the "double where", made automatic)."""
    one = np.ones_like(x)
    return np.where(c, x, one) if keep else np.where(c, one, x)


def first_best(keys: Any, which: Any) -> int:
    """The position of the first largest (``which="max"``) or smallest key: the item ``max(xs, key=f)`` or
    ``min(xs, key=f)`` gives, as Python compares the keys (no gradient: a position)."""
    if not len(keys):
        raise ValueError(f"{which}() iterable argument is empty")
    best = 0
    for k in range(1, len(keys)):
        if (keys[k] > keys[best]) if which == "max" else (keys[k] < keys[best]):
            best = k
    return best


def keys_of(d: Any) -> Any:
    """The keys of the dict ``d``, as a list: what a loop over ``d.items()`` steps through (no gradient)."""
    return list(d)


def list_item(xs: Any, index: Any, n: Any) -> Any:
    """``xs[index]`` of a list that grows later (``xs.append``): ``n`` is its length when it was read."""
    return xs[index]


def list_item_vjp(g: Any, xs: Any, index: Any, n: Any) -> Any:
    """The adjoint of the list as it was when read: ``n`` entries, the one read taking ``g``."""
    parts = [zeros_like(xs[k]) for k in range(n)]
    parts[index] = g
    return parts


def sorted_by(xs: Any, keys: Any, reverse: Any = False) -> Any:
    """``sorted(xs, key=f, reverse=r)`` given the keys ``[f(x) for x in xs]``: the same stable order."""
    order = sorted(range(len(keys)), key=keys.__getitem__, reverse=reverse)
    return [xs[i] for i in order]


def sorted_by_vjp(g: Any, xs: Any, keys: Any, reverse: Any = False) -> Any:
    """Each sorted item's adjoint goes back to the place it came from."""
    order = sorted(range(len(keys)), key=keys.__getitem__, reverse=reverse)
    parts: list[Any] = [None] * len(order)
    for position, i in enumerate(order):
        parts[i] = g[position]
    return parts if isinstance(xs, list) else tuple(parts) if isinstance(xs, tuple) else np.stack(parts)


def concat(a: Any, b: Any) -> Any:
    """``a + b`` for lists or tuples: joined end to end (a list plus an array is numpy's sum: its gradient is
    refused, in ``concat_vjp_a``)."""
    return a + b


def _refuse_sequence_arithmetic() -> Any:
    try:
        from ast_ad.errors import MissingRuleError as error
    except ImportError:  # in an exported module
        error = TypeError  # type: ignore[misc, assignment]  # exported without ast_ad
    raise error("this + or * mixes a list with an array or a number, which numpy computes element by element: "
                "write np.asarray([...]) for the list, so it is arithmetic, or join lists with lists")


def concat_vjp_a(g: Any, a: Any, b: Any) -> Any:
    _check_joined(a, b)
    return g[:len(a)]


def concat_vjp_b(g: Any, a: Any, b: Any) -> Any:
    _check_joined(a, b)
    return g[len(a):]


def _check_joined(a: Any, b: Any) -> Any:
    if not (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple))):
        _refuse_sequence_arithmetic()


def repeat_seq(a: Any, n: Any) -> Any:
    """``a * n`` (or ``n * a``) for a list or tuple: ``n`` copies end to end (a list times an array is numpy's
    product: its gradient is refused)."""
    return a * n


def repeat_seq_vjp(g: Any, a: Any, n: Any) -> Any:
    """Every copy's adjoint, added element by element."""
    if not isinstance(a, (list, tuple)) or not isinstance(n, int):
        _refuse_sequence_arithmetic()
    width = len(a)
    total = [zeros_like(item) for item in a]  # a list, item by item: in the language (reverse mode reads it)
    for k in range(n):
        for i in range(width):
            total[i] = add_adjoints(total[i], g[k * width + i])
    return total if isinstance(a, list) else tuple(total)


def chosen_vjp(k: Any, g: Any, ans: Any, xs: Any) -> Any:
    """Adjoint of argument ``k`` of ``min``/``max``: the argument chosen (the first, at ties) takes ``g``.

    ``min(a, b)`` returns one of its arguments itself, so identity finds it; ``min(xs)`` an item of ``xs``.
    """
    items = list(xs[0]) if len(xs) == 1 else list(xs)
    chosen = next((i for i, item in enumerate(items) if item is ans), None)
    if chosen is None:
        chosen = next(i for i, item in enumerate(items) if item == ans)
    if len(xs) == 1:
        parts = [g if i == chosen else zeros_like(item) for i, item in enumerate(items)]
        return parts if isinstance(xs[0], list) else tuple(parts) if isinstance(xs[0], tuple) else np.stack(parts)
    return g if k == chosen else zeros_like(xs[k])


def part(g: Any, k: Any) -> Any:
    """Item ``k`` of a tuple or list adjoint, zero where nothing flowed into it or into the whole (``None``,
    or the float zero that is its tangent in forward mode)."""
    item = None if g is None or (isinstance(g, float) and g == 0.0) else g[k]
    return 0.0 if item is None else item


def part_vjp(w: Any, g: Any, k: Any) -> Any:
    """Adjoint of ``g`` in ``part(g, k)``: ``w`` as item ``k`` of zeros like ``g``; where ``g`` stands for a zero
    container (``None``, or the float zero), nothing reads ``w``, and its adjoint is the float zero (which adds
    to any adjoint, as ``None`` does not)."""
    if g is None or (isinstance(g, float) and g == 0.0):
        return 0.0
    return getitem_vjp(w, g, k)


def clip_lo_vjp(g: Any, x: Any, lo: Any, hi: Any) -> Any:
    """Adjoint of the lower bound of ``np.clip``: where it is the result."""
    taken = x < lo if hi is None else np.logical_and(x < lo, lo <= hi)
    return g * taken


def clip_hi_vjp(g: Any, x: Any, lo: Any, hi: Any) -> Any:
    """Adjoint of the upper bound of ``np.clip``: where it is the result."""
    return g * ((x if lo is None else np.maximum(x, lo)) > hi)


def average_weights_vjp(g: Any, ans: Any, x: Any, axis: Any, weights: Any) -> Any:
    """Adjoint of ``weights`` in ``np.average(x, axis, weights)``: ``(x - average) / sum(weights)``."""
    w = as_array(weights).astype(float)
    spread = (x - expand_reduced(ans, x, axis)) * expand_reduced(g, x, axis) / np.sum(w)
    if axis is not None and w.ndim == 1 and np.ndim(x) > 1:
        return np.sum(spread, axis=tuple(a for a in range(np.ndim(x)) if a != axis % np.ndim(x)))
    return spread


def absent(owner: Any, name: Any) -> Any:
    """``module.name`` where the module has no such attribute: Python's AttributeError, when the line runs."""
    raise AttributeError(f"{owner} has no attribute {name!r}")


def field(obj: Any, name: Any) -> Any:
    """``obj.name``: a namedtuple's field, or any other attribute (which carries a gradient only in a namedtuple)."""
    return getattr(obj, name)


def field_vjp(g: Any, obj: Any, name: Any) -> Any:
    """Adjoint of ``obj`` in ``obj.name``: the field's slot of a namedtuple takes ``g``."""
    fields = getattr(type(obj), "_fields", None)
    if not isinstance(obj, tuple) or fields is None or name not in fields:
        try:
            from ast_ad.errors import MissingRuleError as error
        except ImportError:  # in an exported module
            error = TypeError  # type: ignore[misc, assignment]  # exported without ast_ad
        raise error(f"ast_ad cannot differentiate the attribute .{name} of a {type(obj).__name__}: only numpy "
                    "arrays' attributes and namedtuples' fields carry gradients; pass the value itself as an "
                    "argument (or use a namedtuple, a dict or a tuple)")
    return tuple(g if field == name else zeros_like(item) for field, item in zip(fields, obj, strict=True))


def is_container(x: Any) -> Any:
    """Whether ``x`` is a list, tuple or dict: its shallow copy holds the same objects (``Aliasing``)."""
    return isinstance(x, (list, tuple, dict))


def field_position(obj: Any, name: Any) -> Any:
    """The position of the field ``name`` in the namedtuple ``obj``."""
    return type(obj)._fields.index(name)


def inverse_axes(axes: Any) -> Any:
    """The axes that undo ``np.transpose(x, axes)``, as a tuple of ints (dask refuses an array of them)."""
    return None if axes is None else tuple(int(a) for a in np.argsort(axes))


def copy_of(x: Any) -> Any:
    """``x.copy()`` as a function: the object's own copy (a dask array stays lazy, a list stays a list)."""
    return x.copy()


def astype(x: Any, dtype: Any, copy: Any = True) -> Any:
    """``x.astype(dtype)`` as a function: a new array (``copy=False`` is ``astype_view``)."""
    return as_array(x).astype(dtype)


def astype_view(x: Any, dtype: Any) -> Any:
    """``x.astype(dtype, copy=False)`` as a function: ``x`` itself where it has that dtype already, else a new
    array; a registered view, so that a write through either is seen by the other where they are one."""
    return as_array(x).astype(dtype, copy=False)


# ---- linear algebra ----------------------------------------------------------------------------------------
def T(a: Any) -> Any:
    """The transpose of a matrix, or of each matrix in a stack."""
    return np.swapaxes(a, -1, -2)


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


def lower_only(s: Any) -> Any:
    """The gradient of a function of a symmetric matrix that numpy reads from its lower triangle only."""
    n = np.shape(s)[-1]
    return np.tril(2.0 * s) - np.eye(n) * s


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
    """Adjoint of ``a`` in ``np.linalg.svd`` (thin factors, or singular values alone; distinct values)."""
    if not compute_uv:
        u, _, vt = np.linalg.svd(a, full_matrices=False)
        return u @ (np.eye(np.shape(g)[-1]) * g[..., None, :]) @ vt
    refuse_unless(not full_matrices or np.shape(a)[-1] == np.shape(a)[-2], "the gradient of np.linalg.svd with "
                  "full_matrices=True on a non-square matrix: pass full_matrices=False")
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
    """``a^0`` (the identity) to ``a^(n-1)``: the powers on either side of each factor of ``a^n``."""
    powers = [np.eye(np.shape(a)[-1])]
    for _ in range(max(n - 1, 0)):
        powers.append(powers[-1] @ a)
    return powers


def matrix_power_vjp(g: Any, a: Any, n: Any) -> Any:
    """Adjoint of ``a`` in ``np.linalg.matrix_power(a, n)`` for ``n >= 0``."""
    refuse_unless(n >= 0, "the gradient of matrix_power with a negative exponent: use inv and a power")
    powers = matrix_powers(a, n)
    return sum((T(powers[k]) @ g @ T(powers[n - 1 - k]) for k in range(n)), zeros_of(a))


def sinc_slope(x: Any) -> Any:
    """The derivative of ``np.sinc(x) = sin(pi x) / (pi x)``: ``(cos(pi x) - sinc(x)) / x``; near 0, its series
    ``-pi^2 x/3 + pi^4 x^3/30 - pi^6 x^5/840`` (the closed form subtracts nearly equal numbers there, and
    lost five digits at ``x = 1e-6``)."""
    small = np.abs(x) < 1e-3
    safe = np.where(small, 1.0, x)
    far = (np.cos(np.pi * safe) - np.sinc(safe)) / safe
    x2 = x * x
    near = x * (-np.pi ** 2 / 3.0 + np.pi ** 4 * x2 / 30.0 - np.pi ** 6 * x2 * x2 / 840.0)
    return np.where(small, near, far)


# ---- more numpy -------------------------------------------------------------------------------------------
def diff_vjp(g: Any, x: Any, n: Any = 1, axis: Any = -1) -> Any:
    """Adjoint of ``x`` in ``np.diff(x, n, axis)``: ``n`` times the adjoint of one difference."""
    for _ in range(n):
        g = np.moveaxis(g, axis, -1)
        edge = zeros_of(g, g.shape[:-1] + (1,))
        g = np.moveaxis(np.concatenate([edge, g], axis=-1) - np.concatenate([g, edge], axis=-1), -1, axis)
    return np.reshape(g, np.shape(x))


def rollaxis_vjp(g: Any, x: Any, axis: Any, start: Any = 0) -> Any:
    """Adjoint of ``x`` in ``np.rollaxis``: ``g`` with the inverse permutation."""
    ndim = np.ndim(x)
    marks = np.rollaxis(np.zeros(tuple(range(2, ndim + 2))), axis, start).shape
    return np.transpose(g, np.argsort([m - 2 for m in marks]))


def dstack_vjp(g: Any, arrays: Any) -> Any:
    parts = [np.atleast_3d(a) for a in arrays]
    return [np.reshape(p, np.shape(a)) for p, a in zip(concatenate_vjp(g, parts, 2), arrays, strict=True)]


def column_stack_vjp(g: Any, arrays: Any) -> Any:
    parts = [np.reshape(a, (-1, 1)) if np.ndim(a) < 2 else a for a in arrays]
    return [np.reshape(p, np.shape(a)) for p, a in zip(concatenate_vjp(g, parts, 1), arrays, strict=True)]


def nanmean_vjp(g: Any, x: Any, axis: Any = None, keepdims: Any = False) -> Any:
    present = np.logical_not(np.isnan(x))
    return expand_reduced(g, x, axis, keepdims) * present / np.sum(present, axis=axis, keepdims=True)


def trapezoid_vjp(g: Any, y: Any, dx: Any = 1.0, axis: Any = -1) -> Any:
    """Adjoint of ``y`` in ``np.trapezoid(y, dx=dx)``: weights dx/2, dx, ..., dx, dx/2."""
    n = np.shape(y)[axis]
    weights = np.full(n, float(dx))
    weights[[0, -1]] = dx / 2.0
    shape = [1] * np.ndim(y)
    shape[axis] = n
    return np.expand_dims(of_type(g, y), axis) * np.reshape(weights, shape)


def convolve_vjp(k: Any, g: Any, a: Any, v: Any, mode: Any = "full") -> Any:
    """Adjoint of ``a`` (k=0) or ``v`` (k=1) in ``np.convolve(a, v, mode)``: ``g`` placed in the full
    convolution, correlated with the other operand."""
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
    return of_type(np.stack([np.sum(g * as_array(x) ** k) for k in powers]), p)  # numbers g, x: like p


def polyder_vjp(g: Any, p: Any, m: Any = 1) -> Any:
    """Adjoint of ``p`` in ``np.polyder(p, m)``: entry i of the result is ``p_i (n-1-i)! / (n-1-i-m)!``."""
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
    """Adjoints of the matrices ``np.linalg.multi_dot`` multiplies (a first or last vector included)."""
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
        right = mats[-1] if i == last - 1 else np.linalg.multi_dot(mats[i + 1:]) if i < last - 1 else np.eye(a.shape[1])
        parts.append(np.reshape(left.T @ g2 @ right.T, np.shape(arrays[i])))
    return parts


def vecdot_vjp(g: Any, other: Any, axis: Any = -1) -> Any:
    return np.expand_dims(g, axis) * other


def check_in_place(target: Any, others: Any, where: Any, names: Any = None) -> Any:
    """Refuse an in-place update of an object that another live variable also reaches.

    An array is changed for every array that shares its memory; a list or dict for every
    name bound to it. Containers among ``others`` are searched, so ``a = ys[0]`` counts
    as reaching ``ys[0]``'s array. ``names``: the variables ``others`` are, for the message.
    """
    if not (is_array(target) or isinstance(target, (list, dict))):
        return
    array = is_array(target)
    stack = list(others)  # a walk of ``others`` and everything inside them (a loop: a tape is long)
    found = False
    while stack and not found:
        obj = stack.pop()
        if isinstance(obj, (list, tuple)):
            stack.extend(obj)
        elif isinstance(obj, dict):
            stack.extend(obj.values())
        found = obj is target or (array and is_array(obj) and _may_share_memory(target, obj))
    if found:
        try:
            from ast_ad.errors import InPlaceAliasError as error
        except ImportError:  # in an exported module
            error = ValueError  # type: ignore[misc, assignment]  # exported without ast_ad
        who = f"another variable ({names})" if names else "another variable"
        raise error(f"{where}: this in-place update changes an object that {who} also refers to "
                    "(Python would change both; ast_ad computes a new value): copy it first, "
                    "y = x.copy(), or write x = x + ... instead of x += ...")


def view_of(target: Any, other: Any, probe: Any, inverse: Any, where: Any, name: Any = None) -> int:
    """How ``other`` sees ``target``, an object about to change in place: what it is after the change.

    1: the same object, or the same memory laid out alike (``z = y``): it is the changed object;
    2: the view ``probe`` describes, made before the change: ``other`` is ``probe``, a view of ``target``
    (``w = y[1:]``: after the change, it is that view of the changed array), or, with ``inverse``, ``target`` is
    ``probe``, a view of ``other`` (a write through ``w = y[1:]`` changes ``y[1:]``);
    0: apart (nothing of ``other`` changes). Any other overlap of memory is refused: which entries of ``other``
    the change reaches is not known here.
    """
    if not (is_array(target) or isinstance(target, (list, dict))):
        return 0  # a number, a tuple: ``x += d`` binds a new object, which no other name sees
    if other is target:
        return 1
    if inverse and probe is target and isinstance(other, (list, tuple, dict)):  # ``a = ys[0]``, ``a`` changes
        items = list(other.values()) if isinstance(other, dict) else list(other)
        rest = [item for item in items if item is not target]
        if len(items) - len(rest) == 1:
            check_in_place(target, rest, where, name)  # (no other slot may see it, deep)
            return 2
    if is_array(target) and is_array(other):
        if not _may_share_memory(target, other):
            return 0
        if _same_view(other, target):
            return 1
        if probe is not None and _same_view(target if inverse else other, probe):
            return 2
    check_in_place(target, (other,), where, name)  # (an array it overlaps otherwise: refused)
    return 0


def view_probe(base: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(base, *args)``, the view a variable would be of ``base``, for ``view_of`` to compare; ``None`` where
    ``base`` is no array or container (a name a branch or a loop has not bound yet: it sees nothing)."""
    if base is None or not (is_array(base) or isinstance(base, (list, tuple, dict))):
        return None
    try:
        return fn(base, *args, **kwargs)
    except (IndexError, KeyError, TypeError, ValueError):
        return None  # (no such view of this value: it is not that view)


def is_same(a: Any, b: Any) -> bool:
    """``a is b``: two variables the memory model follows through one write are one object (no gradient)."""
    return a is b


def _same_view(a: Any, b: Any) -> bool:
    """Whether two numpy arrays read the same memory in the same layout (the same view)."""
    return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape \
        and a.strides == b.strides and a.dtype == b.dtype \
        and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]


def _slots(container: Any) -> list[Any]:
    return list(container) if isinstance(container, dict) else list(range(len(container)))


def unreshaped(base: Any, view: Any, *args: Any) -> Any:
    """The array ``base`` once a view of it in another shape (``np.reshape``, ``np.ravel``...) was written:
    the view's entries in ``base``'s shape, in the order both read them."""
    return np.reshape(view, np.shape(base))


def untransposed(view: Any, axes: Any = None) -> Any:
    """The array a written ``np.transpose(x, axes)`` (or ``x.T``) is a view of: the view's axes put back."""
    return np.transpose(view, inverse_axes(axes))


def slots_holding(container: Any, old: Any, where: Any) -> Any:
    """The slots of ``container`` (a list, tuple or dict) that hold the object ``old``, which a write changes:
    after ``pair[0][1] = v`` on ``pair = [y, y]`` both hold the changed array (``replaced``). Where ``old`` is
    also inside another slot (deeper, or an array sharing its memory), which entries that one sees is not known
    here: refused (no gradient: positions). A name that holds no container (yet: ``None``) holds it nowhere, and
    an object no write changes in place (a number: ``xs[0] += v`` puts a new one in one slot) is in none."""
    if not isinstance(container, (list, tuple, dict)) or not (is_array(old) or isinstance(old, (list, dict))):
        return ()
    slots = _slots(container)
    check_in_place(old, [container[k] for k in slots if container[k] is not old], where)
    return tuple(k for k in slots if container[k] is old)


def slots_changed(container: Any, key: Any, old: Any, where: Any) -> Any:
    """The slots of ``container`` that ``container[key] += v`` changes: where the item ``old`` is an array, list or
    dict (which ``+=`` changes in place), every slot holding it (``slots_holding``); for a number (which ``+=``
    replaces), the slot ``key`` alone. A tuple's item raises Python's error (after changing the item, which the
    error leaves unread)."""
    if isinstance(container, tuple):
        raise TypeError(f"{where}: 'tuple' object does not support item assignment")
    if is_array(old) or isinstance(old, (list, dict)):
        return slots_holding(container, old, where)
    return (key,)


def augmented(old: Any, new: Any) -> Any:
    """What ``xs[k] += v`` leaves in the slot (and wherever else its object is): an array changed in place, with
    ``new``'s entries in its own shape and dtype (``assign_item(old, ..., new)``); anything else (a number, a
    list extended), ``new``."""
    return assign_item(old, Ellipsis, new) if is_array(old) else new


def augmented_vjp(g: Any, ans: Any, old: Any, new: Any) -> Any:
    """The adjoint of ``new`` in ``augmented``: the written entries' (summed to its shape), or ``g`` itself."""
    return assign_item_vjp_value(g, ans, Ellipsis, new) if is_array(old) else g


def replaced(container: Any, slots: Any, new: Any) -> Any:
    """``container`` with ``new`` in each of ``slots`` (a new list, tuple or dict; with no slots, ``container``
    itself, so that a container that did not hold the changed object stays the object it was)."""
    if not slots:
        return container
    if isinstance(container, dict):
        return {k: (new if k in slots else v) for k, v in container.items()}
    values = [new if k in slots else v for k, v in enumerate(container)]
    return values if isinstance(container, list) else type(container)(*values) if hasattr(container, "_fields") \
        else tuple(values)


def replaced_vjp_container(g: Any, container: Any, slots: Any) -> Any:
    """The adjoint (or tangent) of the container in ``replaced``: the replaced slots take none."""
    if g is None or isinstance(g, float):
        return g
    if isinstance(container, dict):
        return {k: (zeros_like(container[k]) if k in slots else g[k]) for k in container}
    values = [zeros_like(container[k]) if k in slots else g[k] for k in range(len(container))]
    return values if isinstance(g, list) else tuple(values)


def replaced_vjp_new(g: Any, new: Any, slots: Any) -> Any:
    """The adjoint of the new object in ``replaced``: the sum of the adjoints of the slots it went into."""
    if g is None or isinstance(g, float):
        return zeros_like(new)
    total: Any = zeros_like(new)
    for k in slots:
        if g[k] is not None:
            total = total + g[k]
    return total


def replaced_jvp_new(u: Any, container: Any, slots: Any) -> Any:
    """The tangent of ``replaced`` along the new object's: ``u`` in the replaced slots, zeros elsewhere."""
    if not slots:
        return zeros_like(container)  # (no slot took it: the container itself)
    if isinstance(container, dict):
        return {k: (u if k in slots else zeros_like(container[k])) for k in container}
    values = [u if k in slots else zeros_like(container[k]) for k in range(len(container))]
    return values if isinstance(container, list) else tuple(values)


def check_item_apart(container: Any, key: Any, where: Any) -> Any:
    """Refuse a write into the object ``container[key]`` where another slot of ``container`` reaches it too.

    ``pair = [y, y]; pair[0][1] = v`` changes the one array both slots hold, so Python's ``pair[1]`` sees the
    write; ast_ad writes a new array back into slot 0 alone. An array's row (``A[0][i] = v``) has no
    other slot to share it with, and is left to the guards of the array itself.
    """
    if isinstance(container, dict):
        rest = [item for k, item in container.items() if k != key]
    elif isinstance(container, (list, tuple)) and isinstance(key, (int, np.integer)) and container:
        k = int(key) % len(container)
        rest = [*container[:k], *container[k + 1:]]
    elif isinstance(container, (list, tuple)):
        rest = list(container)  # a slice of slots: their objects, compared with the one the slice read
    else:
        return
    check_in_place(container[key], rest, where)


def _may_share_memory(a: Any, b: Any) -> bool:
    """Whether two arrays may share memory: numpy tells for its own arrays. For another library's arrays
    of one type, they are taken to share it (dask cannot tell without computing both): a refusal, never a
    guess that they are apart."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return bool(np.may_share_memory(a, b))
    return type(a) is type(b)


def check_kept(value: Any, message: Any) -> Any:
    """Refuse to pass an array, list or dict to a function that changes that argument in place."""
    if is_array(value) or isinstance(value, (list, dict)):
        try:
            from ast_ad.errors import InPlaceAliasError as error
        except ImportError:  # in an exported module
            error = ValueError  # type: ignore[misc, assignment]  # exported without ast_ad
        raise error(message)


def check_bound(bound: Any, name: Any, where: Any) -> None:
    """Python's error where a local name is read before any assignment of it ran (``unbound``): the loop that
    binds it ran no step, or the branch that does was not taken."""
    if not bound:
        raise UnboundLocalError(f"{where}: cannot access local variable {name!r} where it is not associated with "
                                "a value")


# ---- forward mode: tangents -------------------------------------------------------------------------------
def fit(dot: Any, ans: Any) -> Any:
    """The tangent ``dot`` of an elementwise result ``ans``, broadcast up to ``ans``'s shape where it is smaller
    (leaf by leaf, where ``ans`` is a list, tuple or dict: ``add_adjoints``' tangent)."""
    if type(dot) is np.ndarray and type(ans) is np.ndarray and dot.shape == ans.shape:  # the common case, first
        return dot
    if isinstance(dot, (tuple, list, dict)):  # a new list (tuple, dict) of its own, as ``add_adjoints`` makes
        if isinstance(dot, dict):
            return {key: fit(dot[key], ans[key]) for key in dot}
        parts = [fit(d, a) for d, a in zip(dot, ans, strict=True)]
        return parts if isinstance(dot, list) else tuple(parts)
    if isinstance(ans, (tuple, list, dict)):
        return dot  # (a zero's tangent: nothing to bring to a shape)
    shape = np.shape(ans)
    if np.shape(dot) == shape:
        return dot
    return broadcast_like(dot, ans, shape).copy()


def cast_jvp(u: Any, ans: Any) -> Any:
    """Tangent of a cast: ``u`` in the result's dtype, zero where the result is integers (truncated)."""
    if np.result_type(ans).kind in "biu":
        return zeros_like(ans)
    return as_array(u).astype(np.result_type(ans), copy=False)


def sort_jvp(u: Any, x: Any, axis: Any = -1) -> Any:
    """Tangent of ``np.sort(x, axis)``: ``u`` taken in the order the sort put ``x`` in."""
    if axis is None:
        return np.ravel(u)[np.argsort(np.ravel(x), kind="stable")]
    return np.take_along_axis(as_array(u), np.argsort(x, axis=axis, kind="stable"), axis=axis)


def pad_jvp(u: Any, pad_width: Any, mode: Any = "constant") -> Any:
    """Tangent of ``np.pad``: the tangent padded the same way, constant padding with zeros."""
    return np.pad(u, pad_width, mode)


def cumprod_jvp(u: Any, ans: Any, x: Any, axis: Any = None) -> Any:
    """Tangent of ``np.cumprod``, step by step (``p[i] = p[i-1] x[i]``), so zeros in ``x`` are exact."""
    moved = to_last(x, axis)
    du = to_last(u, axis)
    ans_moved = to_last(ans, axis)
    out = zeros_of(moved, np.broadcast_shapes(np.shape(moved), np.shape(du)))
    out[..., 0] = du[..., 0]
    for i in range(1, moved.shape[-1]):
        out[..., i] = out[..., i - 1] * moved[..., i] + ans_moved[..., i - 1] * du[..., i]
    return out if axis is None else from_last(out, x, axis)  # over the flattened array, the result stays flat


def average_weights_jvp(u: Any, ans: Any, x: Any, axis: Any, weights: Any) -> Any:
    """Tangent of ``np.average(x, axis, weights)`` in the weights: ``sum(u (x - average)) / sum(weights)``."""
    w = average_weights_shape(as_array(weights).astype(float), x, axis)
    du = average_weights_shape(as_array(u).astype(float), x, axis)
    spread = x - expand_reduced(ans, x, axis)
    return np.sum(du * spread, axis=axis) / np.sum(w * np.ones_like(as_array(x), dtype=float), axis=axis)


def chosen_jvp(k: Any, u: Any, ans: Any, xs: Any) -> Any:
    """Tangent of ``min``/``max`` from argument ``k``: ``u`` if that argument is the one chosen, else zero."""
    items = list(xs[0]) if len(xs) == 1 else list(xs)
    chosen = next((i for i, item in enumerate(items) if item is ans), None)
    if chosen is None:
        chosen = next(i for i, item in enumerate(items) if item == ans)
    if len(xs) == 1:
        return u[chosen]
    return u if k == chosen else 0.0 * u


def slogdet_jvp(u: Any, a: Any) -> Any:
    """Tangent of ``np.linalg.slogdet(a)``: the sign does not change; the log gains ``trace(a^-1 u)``."""
    return 0.0, np.trace(np.linalg.solve(a, u), axis1=-2, axis2=-1)


def cholesky_jvp(u: Any, ans: Any) -> Any:
    """Tangent of ``L = cholesky(a)``: ``L Phi(L^-1 u L^-T)``, Phi the lower triangle with half the diagonal."""
    inv_l = np.linalg.inv(ans)
    inner = inv_l @ lower_only_sym(u) @ T(inv_l)
    return ans @ (np.tril(inner) - 0.5 * np.eye(np.shape(ans)[-1]) * inner)


def lower_only_sym(u: Any) -> Any:
    """The symmetric matrix whose lower triangle is ``u``'s (what numpy's cholesky and eigh read)."""
    low = np.tril(u)
    return low + T(np.tril(u, -1))


def eigh_jvp(u: Any, ans: Any) -> Any:
    """Tangents of ``w, v = eigh(a)``: ``diag(v^T u v)`` and ``v (F * v^T u v)``. Where two eigenvalues are equal
    the eigenvectors' tangent is not defined, and is inf or nan, without numpy's warning: the eigenvalues'
    tangent is exact there, and code that reads only ``w`` must not warn of what it does not read."""
    w, v = ans
    inner = T(v) @ lower_only_sym(u) @ v
    gaps = w[..., None, :] - w[..., :, None]
    off = np.eye(np.shape(w)[-1], dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(off, 0.0, 1.0 / np.where(off, 1.0, gaps))
        v_dot = v @ (factor * inner)
    return np.diagonal(inner, axis1=-2, axis2=-1).copy(), v_dot


def svd_jvp(u: Any, ans: Any, a: Any, full_matrices: Any = True, compute_uv: Any = True) -> Any:
    """Tangents of the thin ``U, S, Vt = svd(a)`` (distinct singular values), or of ``S`` alone: with
    ``P = U^T u V`` and ``F_ij = 1 / (s_j^2 - s_i^2)``, ``dS = diag(P)``, ``dU = U (F * (P S + S P^T)) +
    (I - U U^T) u V S^-1`` and ``dV = V (F * (S P + P^T S)) + (I - V V^T) u^T U S^-1``."""
    if not compute_uv:
        return svdvals_jvp(u, a)
    refuse_unless(not full_matrices or np.shape(a)[-1] == np.shape(a)[-2], "the derivative of np.linalg.svd with "
                  "full_matrices=True on a non-square matrix: pass full_matrices=False")
    left, s, vt = ans
    v = T(vt)
    p = T(left) @ u @ v
    s_row, s_col = s[..., None, :], s[..., :, None]
    gaps = s_row ** 2 - s_col ** 2
    f = reciprocal_or_zero(gaps)
    inverse = reciprocal_or_zero(s)[..., None, :]
    m, n = np.shape(a)[-2:]
    d_left = left @ (f * (p * s_row + s_col * T(p)))
    d_v = v @ (f * (s_col * p + T(p) * s_row))
    if m > np.shape(s)[-1]:
        d_left = d_left + (u @ v - left @ (T(left) @ u @ v)) * inverse
    if n > np.shape(s)[-1]:
        d_v = d_v + (T(u) @ left - v @ (T(v) @ T(u) @ left)) * inverse
    return d_left, np.diagonal(p, axis1=-2, axis2=-1).copy(), T(d_v)


def qr_jvp(u: Any, ans: Any) -> Any:
    """Tangents of the reduced ``q, r = qr(a)`` (``a`` square or tall, of full rank): with ``x = q^T u r^-1``
    and ``s`` the skew matrix of its strictly lower part, ``dr = (x - s) r`` and ``dq = u r^-1 - q (x - s)``."""
    q, r = ans
    u_r = T(np.linalg.solve(T(r), T(u)))  # u r^-1
    x = T(q) @ u_r
    low = np.tril(x, -1)
    upper = x - (low - T(low))
    return u_r - q @ upper, upper @ r


def pinv_jvp(u: Any, ans: Any, a: Any) -> Any:
    """Tangent of ``p = pinv(a)``: ``-p u p + p p^T u^T (I - a p) + (I - p a) u^T p^T p``."""
    p = ans
    m, n = np.shape(a)[-2:]
    return -p @ u @ p + p @ T(p) @ T(u) @ (np.eye(m) - a @ p) + (np.eye(n) - p @ a) @ T(u) @ T(p) @ p


def svdvals_jvp(u: Any, a: Any) -> Any:
    """Tangent of the singular values of ``a`` (distinct): ``diag(U^T u V)``."""
    left, _, vt = np.linalg.svd(a, full_matrices=False)
    return np.einsum("...ki,...kl,...il->...i", left, u, vt)


def matrix_power_jvp(u: Any, a: Any, n: Any) -> Any:
    """Tangent of ``matrix_power(a, n)`` for ``n >= 0``: the sum of ``a^i u a^(n-1-i)``."""
    refuse_unless(n >= 0, "the derivative of matrix_power with a negative exponent: use inv and a power")
    powers = matrix_powers(a, n)
    return sum((powers[i] @ u @ powers[n - 1 - i] for i in range(n)), zeros_of(a))


def multi_dot_jvp(u: Any, arrays: Any) -> Any:
    """Tangent of ``np.linalg.multi_dot(arrays)``: one product per factor, that factor's tangent in its place."""
    total = 0.0
    for k in range(len(arrays)):
        total = total + np.linalg.multi_dot([u[k] if j == k else a for j, a in enumerate(arrays)])
    return total


def product_terms_jvp(u: Any, terms: Any) -> Any:
    """Tangent terms of ``summed_products``: each step's ``(g, b)`` gives ``(g_dot, b)`` and ``(g, b_dot)``."""
    out = []
    for (g, other), (g_dot, other_dot) in zip(terms, u, strict=True):
        out += [(g_dot, other), (g, other_dot)]
    return out


def std_vjp_jvp_ans(u: Any, g: Any, ans: Any, x: Any, axis: Any = None, ddof: Any = 0, keepdims: Any = False) -> Any:
    """Tangent of ``std_vjp(g, ans, x, ...)`` in ``ans``: it divides by the deviation, so ``-u / ans`` times it."""
    spread = expand_reduced(ans, x, axis, keepdims)
    ratio = -expand_reduced(u, x, axis, keepdims) * reciprocal_or_zero(spread)
    return std_vjp(g, ans, x, axis, ddof, keepdims) * ratio


def norm_vjp_jvp(k: Any, u: Any, g: Any, ans: Any, x: Any, ord: Any = None, axis: Any = None,
                 keepdims: Any = False) -> Any:
    """Tangent of ``norm_vjp(g, ans, x, ...)`` in ``ans`` (k=1) or ``x`` (k=2), for the 2-norm and the
    Frobenius norm (``g x / ans``), the 1-norm of vectors (``g sign(x)``) and the max norm (piecewise
    constant in both); other orders are refused."""
    matrix = (axis is None and np.ndim(x) == 2 and ord is not None) or (axis is not None and np.ndim(axis) > 0)
    if ord in (None, 2, "fro") and not (matrix and ord == 2):
        if k == 2:
            return norm_vjp(g, ans, u, ord, axis, keepdims)
        spread = expand_reduced(ans, x, axis, keepdims)
        ratio = -expand_reduced(u, x, axis, keepdims) * reciprocal_or_zero(spread)
        return norm_vjp(g, ans, x, ord, axis, keepdims) * ratio
    refuse_unless(not matrix and ord in (1, np.inf, -np.inf), "the second derivative of np.linalg.norm with ord=",
                  repr(ord), ": use the 2-norm, or write the norm with numpy (np.sum(np.abs(x) ** p) ** (1 / p))")
    return zeros_like(x)


# ---- forward rules of the gradient helpers above (a derivative of a derivative through them) -------------
# Each is the tangent of one helper in one of its arguments, the others held; ``ast_ad/rules/runtime.py``
# registers them. The helpers are linear in the adjoint ``g``; these are their derivatives in the rest.
def filled(parts: Any, like: Any) -> Any:
    """The parts of a tuple's adjoint or tangent with ``None`` (nothing flowed in) as zeros shaped like ``like``'s."""
    return tuple(zeros_of(x) if p is None else zeros_of(x) + p for p, x in zip(parts, like, strict=True))


def prod_others_jvp(u: Any, x: Any, axis: Any = None) -> Any:
    """Tangent of ``prod_vjp(1, _, x, axis)`` (each entry's product of the others) along ``u``: for entry i, the
    sum over j != i of ``u_j`` times the product of the entries other than i and j. Each product is taken as
    such, so zeros in ``x`` are exact."""
    if axis is not None and np.ndim(axis) > 0:  # several axes: bring them together, then as for one
        x, u = as_array(x), np.broadcast_to(u, np.shape(x))
        axes = tuple(a % x.ndim for a in axis)
        ends = tuple(range(x.ndim - len(axes), x.ndim))
        moved = np.moveaxis(x, axes, ends)
        flat = np.reshape(moved, moved.shape[:x.ndim - len(axes)] + (-1,))
        flat_u = np.reshape(np.moveaxis(u, axes, ends), flat.shape)
        return np.moveaxis(np.reshape(prod_others_jvp(flat_u, flat, -1), moved.shape), ends, axes)
    moved = to_last(x, axis)
    du = to_last(np.broadcast_to(u, np.shape(x)), axis)
    out = zeros_of(moved)
    for i in range(moved.shape[-1]):
        others = moved.copy()
        others[..., i] = 1.0
        pairs = prod_vjp(np.ones(others.shape[:-1]), None, others, -1)  # j != i: the product of all but i, j
        out[..., i] = np.sum(du * pairs, axis=-1) - du[..., i] * pairs[..., i]
    return from_last(out, x, axis)


def cumprod_vjp_jvp(u: Any, g: Any, x: Any, axis: Any = None) -> Any:
    """Tangent of ``cumprod_vjp(g, _, x, axis)`` in ``x``. Entry i of that adjoint is ``sum_k>=i g_k P_k``, with
    ``P_k`` the product of ``x_0 .. x_k`` without ``x_i``: the cumulative product of ``x`` with entry i set to
    1, whose tangent (``u`` with entry i zero) paired with ``g`` masked to ``k >= i`` is ``cumprod_vjp``'s
    own. Exact with zeros; O(n^3) along the axis."""
    moved = to_last(x, axis)
    g_moved = to_last(g, axis)
    du = to_last(np.broadcast_to(u, np.shape(x)), axis)
    n = moved.shape[-1]
    out = zeros_of(moved)
    for i in range(n):
        others, u_others = moved.copy(), du.copy()
        others[..., i], u_others[..., i] = 1.0, 0.0
        masked = g_moved * (np.arange(n) >= i)
        out[..., i] = np.sum(cumprod_vjp(masked, None, others, -1) * u_others, axis=-1)
    return from_last(out, x, axis)


def average_weights_shape(w: Any, x: Any, axis: Any) -> Any:
    """1-D weights along ``axis`` of ``x``, shaped to broadcast against it."""
    if axis is not None and np.ndim(w) == 1 and np.ndim(x) > 1:
        shape = [1] * np.ndim(x)
        shape[axis] = np.shape(w)[0]
        return np.reshape(w, shape)
    return w


def average_vjp_jvp(u: Any, g: Any, x: Any, axis: Any, weights: Any) -> Any:
    """Tangent of ``average_vjp(g, x, axis, weights)`` in the weights: ``g (u - w sum(u) / sum(w)) / sum(w)``."""
    w, du = as_array(weights).astype(float), as_array(u).astype(float)
    total = np.sum(w)
    spread = (du - w * np.sum(du) / total) / total
    return expand_reduced(g, x, axis) * average_weights_shape(spread, x, axis)


def average_weights_vjp_jvp(k: Any, u: Any, g: Any, ans: Any, x: Any, axis: Any, weights: Any) -> Any:
    """Tangent of ``average_weights_vjp(g, ans, x, axis, weights)``, a sum of ``(x - ans) g / sum(weights)``, in
    ``ans`` (k=1) or ``x`` (k=2), where it is linear (the helper itself, the other one zero), or in the weights
    (k=4), whose sum divides it."""
    if k == 1:
        return average_weights_vjp(g, u, zeros_of(as_array(x)), axis, weights)
    if k == 2:
        return average_weights_vjp(g, zeros_of(as_array(ans)), np.broadcast_to(u, np.shape(x)), axis, weights)
    return average_weights_vjp(g, ans, x, axis, weights) * (-np.sum(u) / np.sum(as_array(weights).astype(float)))


def polyval_vjp_p_jvp(u: Any, g: Any, p: Any, x: Any) -> Any:
    """Tangent of ``polyval_vjp_p(g, p, x)`` in ``x``: the coefficient of ``x^k`` gains ``sum(g k x^(k-1) u)``."""
    x = as_array(x)
    powers = range(len(p) - 1, -1, -1)
    return np.stack([np.sum(g * k * x ** (k - 1) * u) if k > 0 else np.sum(g * 0.0 * u) for k in powers])


def sinc_curvature(x: Any) -> Any:
    """The second derivative of ``np.sinc``: ``(-pi sin(pi x) - 2 sinc'(x)) / x``; near 0, its series
    ``-pi^2/3 + pi^4 x^2/10 - pi^6 x^4/168`` (the closed form loses digits there)."""
    x = as_array(x).astype(float)
    small = np.abs(x) < 1e-3
    safe = np.where(small, 1.0, x)
    far = (-np.pi * np.sin(np.pi * safe) - 2.0 * sinc_slope(safe)) / safe
    x2 = x * x
    near = -np.pi ** 2 / 3.0 + np.pi ** 4 * x2 / 10.0 - np.pi ** 6 * x2 * x2 / 168.0
    out = np.where(small, near, far)
    return out if np.ndim(out) else float(out)


def matrix_power_vjp_jvp(u: Any, g: Any, a: Any, n: Any) -> Any:
    """Tangent of ``matrix_power_vjp(g, a, n) = sum_k (a^k)^T g (a^(n-1-k))^T`` in ``a``."""
    powers = matrix_powers(a, n)
    tangents = [matrix_power_jvp(u, a, k) for k in range(max(n, 1))]
    return sum((T(tangents[k]) @ g @ T(powers[n - 1 - k]) + T(powers[k]) @ g @ T(tangents[n - 1 - k])
                for k in range(n)), zeros_of(a))


def multi_dot_vjp_jvp(u: Any, g: Any, arrays: Any) -> Any:
    """Tangents of ``multi_dot_vjp(g, arrays)`` in the arrays: each factor's adjoint is linear in each other
    factor, so it gains that adjoint with the other factor's tangent in its place, summed over the others."""
    out = [zeros_of(a) for a in arrays]
    for j, tangent in enumerate(u):
        if tangent is None:
            continue
        parts = multi_dot_vjp(g, [zeros_of(a) + tangent if i == j else a for i, a in enumerate(arrays)])
        for i, part in enumerate(parts):
            if i != j:
                out[i] = out[i] + part
    return out


def cholesky_vjp_jvp(u: Any, g: Any, ans: Any) -> Any:
    """Tangent of ``cholesky_vjp(g, ans)`` (Murray's formula) in the factor ``ans``."""
    inv_l = np.linalg.inv(ans)
    d_inv = -inv_l @ u @ inv_l
    eye = np.eye(np.shape(ans)[-1])
    phi = T(ans) @ g
    phi = np.tril(phi) - 0.5 * eye * phi
    d_phi = T(u) @ g
    d_phi = np.tril(d_phi) - 0.5 * eye * d_phi
    d_s = T(d_inv) @ phi @ inv_l + T(inv_l) @ d_phi @ inv_l + T(inv_l) @ phi @ d_inv
    return lower_only(0.5 * (d_s + T(d_s)))


def eigh_vjp_jvp(u: Any, g: Any, ans: Any) -> Any:
    """Tangent of ``eigh_vjp(g, ans, a)`` in ``ans = (w, v)``."""
    w, v = ans
    dw, dv = filled(u, ans)
    w_bar, v_bar = filled(g, ans)
    gaps = w[..., None, :] - w[..., :, None]
    f = reciprocal_or_zero(gaps)
    d_f = -f * f * (dw[..., None, :] - dw[..., :, None])
    eye = np.eye(np.shape(w)[-1])
    inner = eye * w_bar[..., None, :] + f * (T(v) @ v_bar)
    d_inner = d_f * (T(v) @ v_bar) + f * (T(dv) @ v_bar)
    d_s = dv @ inner @ T(v) + v @ d_inner @ T(v) + v @ inner @ T(dv)
    return lower_only(0.5 * (d_s + T(d_s)))


def qr_vjp_jvp(u: Any, g: Any, ans: Any) -> Any:
    """Tangent of ``qr_vjp(g, ans, a)`` in ``ans = (q, r)``."""
    q, r = ans
    dq, dr = filled(u, ans)
    q_bar, r_bar = filled(g, ans)
    m = r @ T(r_bar) - T(q_bar) @ q
    d_m = dr @ T(r_bar) - T(q_bar) @ dq
    c = np.tril(m) + T(np.tril(m, -1))
    d_c = np.tril(d_m) + T(np.tril(d_m, -1))
    x = np.linalg.solve(r, T(q_bar + q @ c))
    return T(np.linalg.solve(r, T(dq @ c + q @ d_c) - dr @ x))


def pinv_vjp_jvp(k: Any, u: Any, g: Any, p: Any, a: Any) -> Any:
    """Tangent of ``pinv_vjp(g, p, a) = -p^T g p^T + L g^T p p^T + p^T p g^T R`` (``L = I - a p``,
    ``R = I - p a``) in ``p`` (k=1) or ``a`` (k=2)."""
    m, n = np.shape(a)[-2:]
    left, right = np.eye(m) - a @ p, np.eye(n) - p @ a
    if k == 2:
        return -u @ p @ T(g) @ p @ T(p) - T(p) @ p @ T(g) @ p @ u
    d_left, d_right = -a @ u, -u @ a
    return (-(T(u) @ g @ T(p) + T(p) @ g @ T(u)) + d_left @ T(g) @ p @ T(p) + left @ T(g) @ (u @ T(p) + p @ T(u))
            + (T(u) @ p + T(p) @ u) @ T(g) @ right + T(p) @ p @ T(g) @ d_right)


def svd_vjp_jvp(u: Any, g: Any, ans: Any, a: Any, full_matrices: Any = True, compute_uv: Any = True) -> Any:
    """Tangent of ``svd_vjp(g, ans, a, ...)``: in ``ans = (U, S, Vt)`` for the factors, in ``a`` for the singular
    values alone (``compute_uv=False``, where the helper factors ``a`` again)."""
    if not compute_uv:
        factors = np.linalg.svd(a, full_matrices=False)
        d_left, _, d_vt = svd_jvp(u, factors, a, False, True)
        left, _, vt = factors
        diag = np.eye(np.shape(g)[-1]) * g[..., None, :]
        return d_left @ diag @ vt + left @ diag @ d_vt
    left, s, vt = ans
    d_left, ds, d_vt = filled(u, ans)
    u_bar, s_bar, vt_bar = filled(g, ans)
    v, v_bar, dv = T(vt), T(vt_bar), T(d_vt)
    k = np.shape(s)[-1]
    eye = np.eye(k)
    s_row, s_col, ds_row, ds_col = s[..., None, :], s[..., :, None], ds[..., None, :], ds[..., :, None]
    f = reciprocal_or_zero(s_row ** 2 - s_col ** 2)
    d_f = -f * f * (2.0 * s_row * ds_row - 2.0 * s_col * ds_col)
    sigma, d_sigma = eye * s_row, eye * ds_row
    inverse = reciprocal_or_zero(s)
    inv_sigma, d_inv_sigma = eye * inverse[..., None, :], eye * (-inverse * inverse * ds)[..., None, :]
    jl = T(left) @ u_bar - T(u_bar) @ left
    jr = T(v) @ v_bar - T(v_bar) @ v
    j, kk = f * jl, f * jr
    d_j = d_f * jl + f * (T(d_left) @ u_bar - T(u_bar) @ d_left)
    d_k = d_f * jr + f * (T(dv) @ v_bar - T(v_bar) @ dv)
    inner = j @ sigma + eye * s_bar[..., None, :] + sigma @ kk
    d_inner = d_j @ sigma + j @ d_sigma + d_sigma @ kk + sigma @ d_k
    out = d_left @ inner @ vt + left @ d_inner @ vt + left @ inner @ d_vt
    m, n = np.shape(a)[-2:]
    if m > k:
        rest = np.eye(m) - left @ T(left)
        d_rest = -(d_left @ T(left) + left @ T(d_left))
        out = out + d_rest @ u_bar @ inv_sigma @ vt + rest @ u_bar @ (d_inv_sigma @ vt + inv_sigma @ d_vt)
    if n > k:
        rest = np.eye(n) - v @ vt
        d_rest = -(dv @ vt + v @ d_vt)
        out = out + (d_left @ inv_sigma + left @ d_inv_sigma) @ T(v_bar) @ rest + left @ inv_sigma @ T(v_bar) @ d_rest
    return out


def other_operand_jvp(fn: Any, j: Any, first: Any, own: Any = None, g: Any = 1) -> Any:
    """The forward rule, at position ``j``, of a helper ``fn`` that gives one operand's adjoint of a product whose
    operand 0 stands at position ``first``: linear in each other operand, and reading its own only for its
    shape (a zero tangent there). Whose adjoint: operand ``own``, or the helper's first argument's. ``fn`` is
    linear in the adjoint at position ``g`` too."""
    return OtherOperands(fn, (j,), first, own, g)


class OtherOperands:
    """``fn(*args)`` with the arguments at ``positions`` replaced by tangents, called as rules are:
    ``(u_m, ans_m, ..., u_1, ans_1, *args)``. It is the forward rule of an operand's adjoint of a product
    (``einsum_vjp``: linear in the adjoint and in every operand but its own), and, since the helper is linear
    in each of those, the rules of that rule too: one more argument replaced. Zero where a position repeats or
    is the operand whose adjoint it is (read only for its shape)."""

    def __init__(self, fn: Any, positions: tuple[int, ...], first: int, own: Any, g: int):
        self.fn, self.positions, self.first, self.own, self.g = fn, positions, first, own, g
        self.__name__ = f"{fn.__name__}_jvp"
        self._rule: Any = None

    def __call__(self, *call: Any) -> Any:
        m = len(self.positions)
        tangents, args = call[2 * m - 2::-2], call[2 * m:]
        own = self.first + (args[0] if self.own is None else self.own)
        if own in self.positions or len(set(self.positions)) < m:
            return 0.0 * call[1]
        replaced = list(args)
        for position, u in zip(self.positions, tangents, strict=True):
            replaced[position] = u
        return self.fn(*replaced)

    def ast_ad_rule(self) -> Any:
        from ast_ad.core import registry

        if self._rule is None:
            m = len(self.positions)
            moving: list[Any] = [OtherOperands(self.fn, (*self.positions, p), self.first, self.own, self.g)
                                 if p == self.g or p >= self.first else registry.zero for p in range(self.first + 8)]
            jvps: tuple[Any, ...] = (registry.LINEAR, registry.zero) * m + tuple(moving)
            self._rule = registry.Rule(self, (), origin="ast_ad.runtime", jvps=jvps)
        return self._rule


class EinsumTerm:
    """A term of the derivatives of ``np.einsum``, called as rules are: ``(v_m, ans_m, ..., v_1, ans_1, spec,
    *operands)``. Each leading pair is a slot: ``("swap", p)``, operand ``p`` replaced by the slot's value;
    ``"g"``, the adjoint; ``"skip"``, not read (a pair's second entry is never read). With ``wrt`` None the term
    is ``np.einsum`` of the operands; else operand ``wrt``'s adjoint of it (``einsum_vjp``) for the adjoint ``g``.

    Every term is linear in each slot's value and in each operand it reads, so its forward rules are itself
    (``LINEAR``), and its reverse rules are terms again, with one slot more: the adjoint of a swapped operand
    ``p`` of ``np.einsum`` is operand ``p``'s adjoint; the adjoint of ``g`` in operand ``k``'s adjoint is
    ``np.einsum`` with ``k`` swapped for the cotangent; and the adjoint of another operand ``p`` there is
    operand ``p``'s adjoint with ``k`` swapped for the cotangent (``<u, A_k(g)> = <g, einsum(k: u)>``). So the
    terms can be differentiated again to any order, by either mode. ``np.einsum``'s own rule for operand ``k``
    is ``EinsumTerm(("g",), k)``, called ``(g, ans, spec, *operands)``."""

    def __init__(self, slots: tuple[Any, ...], wrt: int | None):
        self.slots, self.wrt = slots, wrt
        self.__name__ = self.__qualname__ = "einsum_with" if wrt is None else f"einsum_vjp_{wrt}"
        self._rule: Any = None

    def __call__(self, *call: Any, **kwargs: Any) -> Any:
        m = len(self.slots)
        spec, operands = call[2 * m], list(call[2 * m + 1:])
        g = None
        for k, slot in enumerate(self.slots):
            if slot == "g":
                g = call[2 * k]
            elif slot != "skip":
                operands[slot[1]] = call[2 * k]
        if self.wrt is None:
            return np.einsum(spec, *operands)
        return einsum_vjp(self.wrt, g, spec, *operands)

    def __repr__(self) -> str:
        return f"EinsumTerm({self.slots!r}, {self.wrt!r})"

    def __eq__(self, other: Any) -> bool:
        return type(other) is type(self) and (self.slots, self.wrt) == (other.slots, other.wrt)

    def __hash__(self) -> int:
        return hash((type(self), self.slots, self.wrt))

    def ast_ad_rule(self) -> Any:
        from ast_ad.core import registry

        if self._rule is None:
            jvps: list[Any] = []
            vjps: list[Any] = []
            zero = registry.zero
            for k, slot in enumerate(self.slots):
                if slot == "skip":
                    jvps += [zero, zero]
                    vjps += [zero, zero]
                    continue
                rest = (*self.slots[:k], "skip", *self.slots[k + 1:])
                if self.wrt is None:  # a swapped operand of einsum: its adjoint
                    vjps.append(EinsumTerm(("g", *rest), slot[1]))
                elif slot == "g":  # einsum with operand wrt swapped for the cotangent
                    vjps.append(EinsumTerm((("swap", self.wrt), *rest), None))
                else:  # swapped operand p: p's adjoint, wrt swapped for the cotangent
                    vjps.append(EinsumTerm((("swap", self.wrt), *rest), slot[1]))
                jvps += [registry.LINEAR, zero]
                vjps.append(zero)
            jvps.append(None)  # the spec
            vjps.append(None)
            swapped = {slot[1] for slot in self.slots if isinstance(slot, tuple)}
            for j in range(8):
                if j in swapped or j == self.wrt:  # not read, or read for its shape
                    jvps.append(zero)
                    vjps.append(zero)
                    continue
                jvps.append(registry.LINEAR)
                vjps.append(EinsumTerm(("g", *self.slots), j) if self.wrt is None
                            else EinsumTerm((("swap", self.wrt), *self.slots), j))
            self._rule = registry.Rule(self, tuple(vjps), origin="ast_ad.runtime", jvps=tuple(jvps))
        return self._rule
