"""How numpy's functions run on a batch of tangents (``runtime.batched.Batch``), recorded with
``registry.def_batched``: the forms that forward-mode code and the helpers it calls meet.

Each form computes, for every one of the batch's ``B`` values at once, what the function computes
for one: an axis of a value is the axis after it in the stacked data (``item_axes``); an operand
that is not a batch, the same for every value, broadcasts over the batch axis; an index keeps the
batch axis whole (``item_key``). A function not here refuses a batch (``BatchRefused``), and the
caller runs one pass a tangent. ``tests/test_batched.py`` checks every form against the function
applied to each value alone, and every forward rule in the registry the same way.
"""

from __future__ import annotations

import builtins
import operator
import string
from typing import Any

import numpy as np

from ast_ad.core import registry
from ast_ad.core.registry import def_batched, def_pattern, def_stacked
from ast_ad.runtime.adjoints import (
    extremum_vjp,
    getitem_vjp,
    matmul_vjp_a,
    matmul_vjp_b,
    outer_vjp_a,
    outer_vjp_b,
    repeat_vjp,
    sort_vjp,
    summed_product,
)
from ast_ad.runtime.arrays import (
    T,
    add_adjoints,
    expand_reduced,
    fit,
    gradient_like,
    unbroadcast,
    unstack,
)
from ast_ad.runtime.batched import (
    Batch,
    BatchRefused,
    Pattern,
    aligned,
    dot,
    either,
    elementwise,
    is_batch,
    item_axes,
    item_axis,
    matmul,
    pattern_matmul,
    rank,
    sizes_of,
    stacked_added,
    stacked_cast,
    stacked_cross,
    stacked_cumsum,
    stacked_diag,
    stacked_diff,
    stacked_dot,
    stacked_einsum,
    stacked_expand_dims,
    stacked_expand_reduced,
    stacked_extremum_vjp,
    stacked_fit,
    stacked_getitem_vjp,
    stacked_gradient_like,
    stacked_joined,
    stacked_matmul,
    stacked_matmul_vjp_a,
    stacked_matmul_vjp_b,
    stacked_mean,
    stacked_outer,
    stacked_outer_vjp_a,
    stacked_outer_vjp_b,
    stacked_owned,
    stacked_repeat,
    stacked_repeat_vjp,
    stacked_reshape,
    stacked_solve,
    stacked_sort_jvp,
    stacked_stack,
    stacked_sum,
    stacked_summed_product,
    stacked_tile,
    stacked_trace,
    stacked_transpose,
    stacked_unbroadcast,
    stacked_unreshaped,
    stacked_unstack,
    stacked_zeros,
    united,
    zero_tangent,
)
from ast_ad.runtime.containers import chosen_vjp, list_item, sorted_by
from ast_ad.runtime.tangents import cast_jvp, chosen_jvp, sort_jvp, written_tangent
from ast_ad.runtime.writes import assign_item, detached, owned_adjoint, unreshaped


def _kind(*values: Any) -> Any:
    """The class of the batches among ``values`` (a ``Batch``, or a ``Pattern``)."""
    return next(type(v) for v in values if is_batch(v))


def _size(*values: Any) -> int:
    found = sizes_of(values)
    if len(found) != 1:
        raise BatchRefused("a batch of tangents does not take batches of different sizes together")
    return found.pop()


def _stacked(x: Any, size: int, kind: Any = Batch) -> Any:
    """The data of ``x`` with the batch axis first: a value that is not a batch, the same for every
    tangent (``kind.constant``: repeated for a ``Batch``, no inputs for a ``Pattern``)."""
    if is_batch(x):
        return x.data
    return kind.constant(x, size)


# ---- what is read of one value -------------------------------------------------------------------
def_batched(np.shape, lambda a: a.shape)
def_batched(np.ndim, lambda a: a.ndim)
def_batched(np.size, lambda a, axis=None: a.size if axis is None else a.shape[axis])
def_batched(np.iscomplexobj, lambda x: bool(np.iscomplexobj(x.data)))
def_batched(np.isrealobj, lambda x: not np.iscomplexobj(x.data))
def_batched(np.result_type, lambda *xs: np.result_type(
    *(x.dtype if is_batch(x) else x for x in xs)))
def_batched(np.may_share_memory, lambda a, b, *rest: bool(np.may_share_memory(
    a.data if is_batch(a) else a, b.data if is_batch(b) else b)))
def_batched(np.shares_memory, lambda a, b, *rest: bool(np.shares_memory(
    a.data if is_batch(a) else a, b.data if is_batch(b) else b)))


def _like(fill: float) -> Any:
    def form(a: Any, dtype: Any = None, order: str = "K", subok: bool = True,
             shape: Any = None) -> Batch:
        item = a.shape if shape is None else ((shape,) if isinstance(shape, int) else tuple(shape))
        return Batch(np.full((a.data.shape[0], *item), fill, dtype=dtype or a.dtype))
    return form


def_batched(np.zeros_like, _like(0.0))
def_batched(np.empty_like, _like(0.0))
def_batched(np.ones_like, _like(1.0))
def_batched(np.copy, lambda a, order="K", subok=False: a.copy())
def_batched(np.real, lambda val: val.real if is_batch(val) else np.real(val))
def_batched(np.imag, lambda val: val.imag if is_batch(val) else np.imag(val))


# ---- broadcasting functions ----------------------------------------------------------------------
def _where(condition: Any, *branches: Any) -> Any:
    if not branches:
        raise BatchRefused("a batch of tangents does not take np.where of a condition alone")
    return elementwise(np.where, condition, *branches)


def_batched(np.where, _where)
def_batched(np.clip, lambda a, a_min=None, a_max=None, **kw: elementwise(
    np.clip, a, a_min, a_max, **kw))


def _broadcast_to(array: Any, shape: Any, subok: bool = False) -> Batch:
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return Batch(np.broadcast_to(aligned(array, len(shape)), (array.data.shape[0], *shape)))


def_batched(np.broadcast_to, _broadcast_to)


# ---- reductions and scans along axes -------------------------------------------------------------
def _along(fn: Any) -> Any:
    def form(a: Any, axis: Any = None, *args: Any, **kwargs: Any) -> Batch:
        if kwargs.get("out") is not None or kwargs.get("where", True) is not True or args:
            raise BatchRefused(f"a batch of tangents does not take np.{fn.__name__} with these "
                               "arguments")
        kwargs = {k: v for k, v in kwargs.items() if k not in ("out", "where")}
        return Batch(fn(a.data, axis=item_axes(axis, a.ndim), **kwargs))
    return form


for _fn in (np.sum, np.mean, np.prod, np.max, np.min, np.amax, np.amin, np.nansum, np.var,
            np.std, np.all, np.any):
    def_batched(_fn, _along(_fn))


def _scan(fn: Any) -> Any:
    def form(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Batch:
        if out is not None:
            raise BatchRefused(f"a batch of tangents does not take np.{fn.__name__} with out=")
        if axis is None:
            return Batch(fn(a.data.reshape(a.data.shape[0], -1), axis=1, dtype=dtype))
        return Batch(fn(a.data, axis=item_axis(axis, a.ndim), dtype=dtype))
    return form


def_batched(np.cumsum, _scan(np.cumsum))
def_batched(np.cumprod, _scan(np.cumprod))


def _diff(a: Any, n: int = 1, axis: int = -1, **kwargs: Any) -> Batch:
    if kwargs:
        raise BatchRefused("a batch of tangents does not take np.diff with prepend or append")
    return Batch(np.diff(a.data, n, axis=item_axis(axis, a.ndim)))


def_batched(np.diff, _diff)


def _average(a: Any, axis: Any = None, weights: Any = None, returned: bool = False,
             keepdims: bool = False) -> Any:
    if is_batch(weights) or returned:
        raise BatchRefused("a batch of tangents does not take np.average of batched weights")
    if weights is None:
        return Batch(np.mean(a.data, axis=item_axes(axis, a.ndim), keepdims=keepdims))
    w = np.asarray(weights)
    if axis is None or w.ndim == a.ndim:
        total = np.sum(a.data * w, axis=item_axes(axis, a.ndim), keepdims=keepdims)
        return Batch(total / np.sum(w, axis=axis, keepdims=keepdims))
    raise BatchRefused("a batch of tangents does not take np.average with one-axis weights")


def_batched(np.average, _average)


# ---- shapes --------------------------------------------------------------------------------------
def_batched(np.reshape, lambda a, *shape, **kw: a.reshape(
    *(shape or (kw.pop("shape", None) or kw.pop("newshape"),)), order=kw.pop("order", "C")))
def_batched(np.ravel, lambda a, order="C": a.reshape(-1, order=order))
def_batched(np.transpose, lambda a, axes=None: a.transpose(axes))
def_batched(np.squeeze, lambda a, axis=None: a.squeeze(axis))


def _swapaxes(a: Any, axis1: int, axis2: int) -> Batch:
    r = a.ndim
    return Batch(np.swapaxes(a.data, item_axis(axis1, r), item_axis(axis2, r)))


def _moveaxis(a: Any, source: Any, destination: Any) -> Batch:
    r = a.ndim
    return Batch(np.moveaxis(a.data, item_axes(source, r), item_axes(destination, r)))


def _expand_dims(a: Any, axis: Any) -> Batch:
    axes = axis if isinstance(axis, tuple) else (axis,)
    return Batch(np.expand_dims(a.data, item_axes(tuple(axes), a.ndim + len(axes))))


def_batched(np.swapaxes, _swapaxes)
def_batched(np.moveaxis, _moveaxis)
def_batched(np.expand_dims, _expand_dims)


def _flip(m: Any, axis: Any = None) -> Batch:
    return Batch(np.flip(m.data, item_axes(axis, m.ndim)))


def_batched(np.flip, _flip)
def_batched(np.fliplr, lambda m: _flip(m, 1))
def_batched(np.flipud, lambda m: _flip(m, 0))


def _roll(a: Any, shift: Any, axis: Any = None) -> Batch:
    if axis is None:
        flat = a.data.reshape(a.data.shape[0], -1)
        return Batch(np.roll(flat, shift, axis=1).reshape(a.data.shape))
    return Batch(np.roll(a.data, shift, axis=item_axes(axis, a.ndim)))


def_batched(np.roll, _roll)


def _atleast(n: int) -> Any:
    def form(*arys: Any) -> Any:
        out = [a.reshape((1,) * (n - a.ndim) + a.shape) if is_batch(a) and a.ndim < n
               else a if is_batch(a) else getattr(np, f"atleast_{n}d")(a) for a in arys]
        return out[0] if len(out) == 1 else out
    return form


def_batched(np.atleast_1d, _atleast(1))
def_batched(np.atleast_2d, _atleast(2))


# ---- joining -------------------------------------------------------------------------------------
def _concatenate(arrays: Any, axis: Any = 0, **kwargs: Any) -> Any:
    if kwargs.get("out") is not None:
        raise BatchRefused("a batch of tangents does not take np.concatenate with out=")
    arrays = list(arrays)
    size, kind = _size(*arrays), _kind(*arrays)
    if axis is None:
        return kind(np.concatenate([_stacked(a, size, kind).reshape(size, -1) for a in arrays],
                                   axis=1))
    r = max(rank(a) for a in arrays)
    return kind(np.concatenate([_stacked(a, size, kind) for a in arrays], axis=item_axis(axis, r)))


def _stack(arrays: Any, axis: int = 0, **kwargs: Any) -> Any:
    if kwargs.get("out") is not None:
        raise BatchRefused("a batch of tangents does not take np.stack with out=")
    arrays = list(arrays)
    size, kind = _size(*arrays), _kind(*arrays)
    r = max(rank(a) for a in arrays)
    return kind(np.stack([_stacked(a, size, kind) for a in arrays], axis=item_axis(axis, r + 1)))


def _hstack(tup: Any, **kwargs: Any) -> Any:
    arrays = [_atleast(1)(a) for a in tup]
    return _concatenate(arrays, axis=0 if rank(arrays[0]) == 1 else 1)


def _vstack(tup: Any, **kwargs: Any) -> Any:
    return _concatenate([_atleast(2)(a) for a in tup], axis=0)


def_batched(np.concatenate, _concatenate)
def_batched(np.stack, _stack)
def_batched(np.hstack, _hstack)
def_batched(np.vstack, _vstack)


# ---- products ------------------------------------------------------------------------------------
def_batched(np.matmul, matmul)
def_batched(np.dot, dot)


def _outer(a: Any, b: Any, out: Any = None) -> Batch:
    size = _size(a, b)
    da = _stacked(a, size).reshape(size, -1)
    db = _stacked(b, size).reshape(size, -1)
    return Batch(da[:, :, None] * db[:, None, :])


def_batched(np.outer, _outer)


def _inner(a: Any, b: Any) -> Any:
    if rank(a) > 1 or rank(b) > 1:
        raise BatchRefused("a batch of tangents does not take np.inner of more than one axis")
    if rank(a) == 0 or rank(b) == 0:
        return elementwise(np.multiply, a, b)
    return Batch(np.sum(elementwise(np.multiply, a, b).data, axis=-1))


def _tensordot(a: Any, b: Any, axes: Any = 2) -> Batch:
    if is_batch(a) and is_batch(b):
        raise BatchRefused("a batch of tangents does not take np.tensordot of two batches")
    ra, rb = rank(a), rank(b)
    axes_a, axes_b = _contracted(axes, ra)
    if is_batch(a):
        return Batch(np.tensordot(a.data, b, axes=([item_axis(k, ra) for k in axes_a], axes_b)))
    out = np.tensordot(a, b.data, axes=(axes_a, [item_axis(k, rb) for k in axes_b]))
    return Batch(np.moveaxis(out, ra - len(axes_a), 0))


def_batched(np.tensordot, _tensordot)


def _einsum_terms(subscripts: Any, kwargs: dict[str, Any]) -> tuple[str, list[str], str]:
    """``np.einsum``'s subscripts written out: the whole spec, each operand's term, and the result's
    letters (numpy's implicit output: the letters written once, in alphabetical order); a spec
    with ``...`` or an ``out=`` is refused."""
    if not isinstance(subscripts, str) or "..." in subscripts or kwargs.get("out") is not None:
        raise BatchRefused("a batch of tangents takes np.einsum with written subscripts only")
    spec = subscripts.replace(" ", "")
    inputs, arrow, output = spec.partition("->")
    terms = inputs.split(",")
    if not arrow:
        letters = "".join(terms)
        output = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    return spec, terms, output


def _contracted(axes: Any, ra: int) -> tuple[list[int], list[int]]:
    """``np.tensordot``'s ``axes`` as two lists, the first operand's (of rank ``ra``) and the
    second's."""
    if isinstance(axes, int):
        return list(range(ra - axes, ra)), list(range(axes))
    first, second = axes
    return ([first] if isinstance(first, int) else list(first),
            [second] if isinstance(second, int) else list(second))


def _einsum(subscripts: Any, *operands: Any, **kwargs: Any) -> Batch:
    spec, terms, output = _einsum_terms(subscripts, kwargs)
    free = next(c for c in string.ascii_letters if c not in spec)
    terms = [free + t if is_batch(op) else t for t, op in zip(terms, operands, strict=True)]
    data = [op.data if is_batch(op) else op for op in operands]
    _size(*operands)
    return Batch(np.einsum(",".join(terms) + "->" + free + output, *data,
                           **{k: v for k, v in kwargs.items() if k != "out"}))


def_batched(np.einsum, _einsum)


def _trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, **kwargs: Any) -> Batch:
    r = a.ndim
    return Batch(np.trace(a.data, offset, item_axis(axis1, r), item_axis(axis2, r), **kwargs))


def _diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Batch:
    r = a.ndim
    return Batch(np.diagonal(a.data, offset, item_axis(axis1, r), item_axis(axis2, r)))


def _diag(v: Any, k: int = 0) -> Any:
    if v.ndim == 2:
        return _diagonal(v, k)
    if v.ndim != 1:
        raise ValueError("Input must be 1- or 2-d.")
    n = v.shape[0]
    out = np.zeros((v.data.shape[0], n + abs(k), n + abs(k)), dtype=v.data.dtype)
    at = np.arange(n)
    out[:, at + max(-k, 0), at + max(k, 0)] = v.data
    return type(v)(out)


def _triangle(fn: Any) -> Any:
    def form(m: Any, k: int = 0) -> Batch:
        if m.ndim < 2:
            raise BatchRefused(f"a batch of tangents does not take np.{fn.__name__} of a vector")
        return Batch(fn(m.data, k))
    return form


def_batched(np.trace, _trace)
def_batched(np.diagonal, _diagonal)
def_batched(np.diag, _diag)
def_batched(np.tril, _triangle(np.tril))
def_batched(np.triu, _triangle(np.triu))


# ---- picking entries ----------------------------------------------------------------------------
def _take(a: Any, indices: Any, axis: Any = None, out: Any = None, mode: Any = "raise") -> Batch:
    if out is not None or is_batch(indices):
        raise BatchRefused("a batch of tangents does not take np.take with out= or batched indices")
    if axis is None:
        return Batch(np.take(a.data.reshape(a.data.shape[0], -1), indices, axis=1, mode=mode))
    return Batch(np.take(a.data, indices, axis=item_axis(axis, a.ndim), mode=mode))


def _take_along_axis(arr: Any, indices: Any, axis: Any = -1) -> Batch:
    if is_batch(indices):
        raise BatchRefused("a batch of tangents does not take batched indices")
    indices = np.asarray(indices)
    if axis is None:
        flat = arr.data.reshape(arr.data.shape[0], -1)
        return Batch(np.take_along_axis(flat, indices.reshape(1, -1), axis=1))
    return Batch(np.take_along_axis(arr.data, indices[None], axis=item_axis(axis, arr.ndim)))


def_batched(np.take, _take)
def_batched(np.take_along_axis, _take_along_axis)


def _linalg_solve(a: Any, b: Any) -> Batch:
    if is_batch(a) or not is_batch(b):
        raise BatchRefused("a batch of tangents does not take np.linalg.solve of a batched matrix")
    a = np.asarray(a)
    if b.ndim == 1:
        return Batch(np.linalg.solve(a, b.data.T).T)
    if b.ndim == 2 and a.ndim == 2:
        return Batch(np.linalg.solve(a[None], b.data))
    raise BatchRefused("a batch of tangents does not take np.linalg.solve of stacked matrices")


def_batched(np.linalg.solve, _linalg_solve)


# ---- splitting, repeating, padding --------------------------------------------------------------
def _split(fn: Any, default_axis: int = 0) -> Any:
    def form(ary: Any, indices_or_sections: Any, axis: int = default_axis) -> list[Batch]:
        parts = fn(ary.data, indices_or_sections, axis=item_axis(axis, ary.ndim))
        return [Batch(part) for part in parts]
    return form


def_batched(np.split, _split(np.split))
def_batched(np.array_split, _split(np.array_split))
def_batched(np.hsplit, lambda ary, sections: _split(np.split)(
    ary, sections, axis=0 if ary.ndim == 1 else 1))
def_batched(np.vsplit, lambda ary, sections: _split(np.split)(ary, sections, axis=0))
def_batched(np.dsplit, lambda ary, sections: _split(np.split)(ary, sections, axis=2))


def _repeat(a: Any, repeats: Any, axis: Any = None) -> Batch:
    if is_batch(repeats):
        raise BatchRefused("a batch of tangents does not take batched repeats")
    if axis is None:
        return Batch(np.repeat(a.data.reshape(a.data.shape[0], -1), repeats, axis=1))
    return Batch(np.repeat(a.data, repeats, axis=item_axis(axis, a.ndim)))


def _tile(a: Any, reps: Any) -> Batch:
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    r = max(a.ndim, len(reps))
    data = aligned(a, r)
    return Batch(np.tile(data, (1,) + (1,) * (r - len(reps)) + reps))


def _pad(array: Any, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> Batch:
    if mode != "constant" or kwargs.get("constant_values", 0) != 0:
        # (other modes read the values near the edge: the same for each tangent, but not here yet)
        if mode not in ("reflect", "symmetric", "edge", "wrap") or kwargs:
            raise BatchRefused(f"a batch of tangents does not take np.pad in mode {mode!r}")
    widths = np.broadcast_to(np.asarray(pad_width), (array.ndim, 2))
    return Batch(np.pad(array.data, ((0, 0), *map(tuple, widths)), mode=mode, **kwargs))


def _select(condlist: Any, choicelist: Any, default: Any = 0) -> Batch:
    if any(is_batch(c) for c in condlist):
        raise BatchRefused("a batch of tangents does not take batched conditions")
    choices = list(choicelist)
    size = _size(*choices, default)
    r = max(rank(c) for c in (*condlist, *choices, default))
    result = aligned(Batch(_stacked(default, size)), r)
    for condition, choice in reversed(list(zip(condlist, choices, strict=True))):
        result = np.where(condition, aligned(Batch(_stacked(choice, size)), r), result)
    return Batch(result)


def_batched(np.repeat, _repeat)
def_batched(np.tile, _tile)
def_batched(np.pad, _pad)
def_batched(np.select, _select)


def _rollaxis(a: Any, axis: int, start: int = 0) -> Batch:
    r = a.ndim
    start = start + r if start < 0 else start
    return Batch(np.rollaxis(a.data, item_axis(axis, r), start + 1))


def _rot90(m: Any, k: int = 1, axes: Any = (0, 1)) -> Batch:
    first, second = axes
    return Batch(np.rot90(m.data, k, axes=(item_axis(first, m.ndim), item_axis(second, m.ndim))))


def _copyto(dst: Any, src: Any, casting: str = "same_kind", where: Any = True) -> None:
    if not is_batch(dst) or where is not True:
        raise BatchRefused("a batch of tangents does not take np.copyto into a plain array")
    dst[...] = src


def_batched(np.rollaxis, _rollaxis)
def_batched(np.rot90, _rot90)
def_batched(np.copyto, _copyto)
def_batched(np.full_like, lambda a, fill_value, dtype=None, **kw: Batch(np.full(
    (a.data.shape[0], *(kw.get("shape") or a.shape)), fill_value, dtype=dtype or a.dtype)))


def _cumulative_sum(x: Any, axis: Any = None, dtype: Any = None, out: Any = None,
                    include_initial: bool = False) -> Batch:
    if axis is None and x.ndim > 1:
        raise ValueError("axis must be specified for multi-dimensional arrays")
    return Batch(np.cumulative_sum(x.data, axis=item_axis(0 if axis is None else axis, x.ndim),
                                   dtype=dtype, include_initial=include_initial))


def_batched(np.cumulative_sum, _cumulative_sum)
def_batched(np.atleast_3d, lambda *arys: _refuse_many("np.atleast_3d"))


def _refuse_many(name: str) -> Any:
    raise BatchRefused(f"a batch of tangents does not take {name}")


def _column_stack(tup: Any) -> Any:
    arrays = [a.reshape(-1, 1) if rank(a) == 1 and is_batch(a) else
              (np.asarray(a).reshape(-1, 1) if rank(a) == 1 else a) for a in tup]
    return _concatenate(arrays, axis=1)


def_batched(np.column_stack, _column_stack)
def_batched(np.matrix_transpose, lambda x: _swapaxes(x, -1, -2))
def_batched(np.linalg.matrix_transpose, lambda x: _swapaxes(x, -1, -2))
def_batched(np.linalg.matmul, matmul)
def_batched(np.linalg.outer, _outer)
def_batched(np.linalg.trace, lambda x, offset=0, dtype=None: _trace(
    x, offset, -2, -1, dtype=dtype))
def_batched(np.linalg.diagonal, lambda x, offset=0: _diagonal(x, offset, -2, -1))


def _vdot(a: Any, b: Any) -> Batch:
    size = _size(a, b)
    da = _stacked(a, size).reshape(size, -1)
    db = _stacked(b, size).reshape(size, -1)
    return Batch(np.sum(np.conj(da) * db, axis=1))


def _inner_any(a: Any, b: Any) -> Any:
    if rank(a) == 0 or rank(b) == 0:
        return elementwise(np.multiply, a, b)
    if is_batch(a) and is_batch(b):
        return _inner(a, b)
    return _tensordot(a, b, axes=([-1], [-1]))


def _vecdot(x1: Any, x2: Any, axis: int = -1) -> Batch:
    r = max(rank(x1), rank(x2))
    product = elementwise(np.multiply, elementwise(np.conj, x1) if is_batch(x1)
                          else np.conj(x1), x2)
    return Batch(np.sum(product.data, axis=item_axis(axis, r)))


def _cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1,
           axis: Any = None) -> Batch:
    if axis is not None or (axisa, axisb, axisc) != (-1, -1, -1):
        raise BatchRefused("a batch of tangents takes np.cross along the last axis only")
    r = max(rank(a), rank(b))
    return Batch(np.cross(aligned(a, r), aligned(b, r)))


def_batched(np.vdot, _vdot)
def_batched(np.inner, _inner_any)
def_batched(np.vecdot, _vecdot)
def_batched(np.linalg.vecdot, _vecdot)
def_batched(np.cross, _cross)
def_batched(np.linalg.cross, lambda x1, x2, axis=-1: _cross(x1, x2) if axis == -1 else
            _refuse_many("np.linalg.cross along another axis"))


# ---- Fourier transforms along axes ---------------------------------------------------------------
def _fft_one(fn: Any) -> Any:
    def form(a: Any, n: Any = None, axis: int = -1, norm: Any = None, out: Any = None) -> Batch:
        return Batch(fn(a.data, n, axis=item_axis(axis, a.ndim), norm=norm))
    return form


def _fft_many(fn: Any, last_two: bool) -> Any:
    def form(a: Any, s: Any = None, axes: Any = None, norm: Any = None, out: Any = None) -> Batch:
        if axes is None:
            axes = (-2, -1) if last_two else (tuple(range(-len(s), 0)) if s is not None
                                              else tuple(range(a.ndim)))
        return Batch(fn(a.data, s, axes=tuple(item_axis(x, a.ndim) for x in axes), norm=norm))
    return form


for _name in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"):
    def_batched(getattr(np.fft, _name), _fft_one(getattr(np.fft, _name)))
for _name in ("fft2", "ifft2", "rfft2", "irfft2"):
    def_batched(getattr(np.fft, _name), _fft_many(getattr(np.fft, _name), True))
for _name in ("fftn", "ifftn", "rfftn", "irfftn"):
    def_batched(getattr(np.fft, _name), _fft_many(getattr(np.fft, _name), False))
def_batched(np.fft.fftshift, lambda x, axes=None: Batch(np.fft.fftshift(
    x.data, axes=item_axes(axes, x.ndim))))
def_batched(np.fft.ifftshift, lambda x, axes=None: Batch(np.fft.ifftshift(
    x.data, axes=item_axes(axes, x.ndim))))


# ---- sparsity patterns (``runtime.batched.Pattern``) ---------------------------------------------
# the forms above that only move entries serve a pattern as they are
_MOVING: tuple[Any, ...] = (
            np.shape, np.ndim, np.size, np.iscomplexobj, np.isrealobj, np.result_type,
            np.may_share_memory, np.shares_memory, np.copy, np.real, np.imag, np.broadcast_to,
            np.reshape, np.ravel, np.transpose, np.squeeze, np.swapaxes, np.moveaxis,
            np.expand_dims, np.flip, np.fliplr, np.flipud, np.roll, np.atleast_1d, np.atleast_2d,
            np.diagonal, np.linalg.diagonal, np.diag, np.pad, np.tril, np.triu, np.take,
            np.take_along_axis,
            np.split, np.array_split, np.hsplit, np.vsplit, np.dsplit, np.repeat, np.tile,
            np.rollaxis, np.rot90, np.copyto, np.matrix_transpose, np.linalg.matrix_transpose,
            np.fft.fftshift, np.fft.ifftshift, np.concatenate, np.stack, np.hstack, np.vstack,
            np.column_stack)
for _moving in _MOVING:
    _form = registry.batched_form(_moving)
    assert _form is not None
    def_batched(_moving, _form, structural=True)


def _no_inputs(a: Any, *args: Any, **kwargs: Any) -> Pattern:
    shape = kwargs.get("shape")
    item = a.shape if shape is None else ((shape,) if isinstance(shape, int) else tuple(shape))
    return Pattern.zeros(a.data.shape[0], item)


for _made in (np.zeros_like, np.empty_like, np.ones_like, np.full_like):
    def_pattern(_made, _no_inputs)


def _united(a: Any, axis: Any = None, *args: Any, **kwargs: Any) -> Pattern:
    """A reduction's pattern: the union of the entries it reduces."""
    if args or kwargs.get("out") is not None or kwargs.get("returned"):
        raise BatchRefused("a sparsity pattern takes a reduction with no out= or returned=")
    return Pattern(united(a.data, item_axes(axis, a.ndim), bool(kwargs.get("keepdims"))))


for _reducing in (np.sum, np.mean, np.prod, np.max, np.min, np.amax, np.amin, np.nansum, np.var,
                  np.std, np.average):
    def_pattern(_reducing, _united)


def _scanned(a: Any, axis: Any = None, *args: Any, **kwargs: Any) -> Pattern:
    if axis is None:
        return Pattern(np.bitwise_or.accumulate(a.data.reshape(a.data.shape[0], -1), axis=1))
    return Pattern(np.bitwise_or.accumulate(a.data, axis=item_axis(axis, a.ndim)))


def _differenced(a: Any, n: int = 1, axis: int = -1) -> Pattern:
    data, at = a.data, item_axis(axis, a.ndim)
    for _ in range(n):
        head = np.take(data, np.arange(1, data.shape[at]), axis=at)
        data = head | np.take(data, np.arange(data.shape[at] - 1), axis=at)
    return Pattern(data)


def _traced(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, **kwargs: Any) -> Pattern:
    r = a.ndim
    diagonal = np.diagonal(a.data, offset, item_axis(axis1, r), item_axis(axis2, r))
    return Pattern(np.bitwise_or.reduce(diagonal, axis=-1))


def_pattern(np.cumsum, _scanned)
def_pattern(np.cumprod, _scanned)
def_pattern(np.diff, _differenced)
def_pattern(np.trace, _traced)
# (the tests and bounds count for the result's shape alone: they carry no inputs)
def_pattern(np.where, lambda condition, *branches: either(condition, *branches))
def_pattern(np.clip, lambda a, *bounds, **kw: either(a, *bounds, *kw.values()))
def_pattern(np.select, lambda condlist, choicelist, default=0: either(*condlist, *choicelist,
                                                                      default))
def_pattern(np.matmul, pattern_matmul)
def_pattern(np.linalg.matmul, pattern_matmul)
def_pattern(np.dot, lambda a, b: either(a, b) if rank(a) == 0 or rank(b) == 0
            else pattern_matmul(a, b))


def _pattern_outer(a: Any, b: Any, out: Any = None) -> Pattern:
    size = _size(a, b)
    da = _stacked(a, size, Pattern).reshape(size, -1)
    db = _stacked(b, size, Pattern).reshape(size, -1)
    return Pattern(da[:, :, None] | db[:, None, :])


def _whole(x: Any, *rest: Any, **kwargs: Any) -> Pattern:
    """The union of every entry of every pattern among the arguments, as one number's."""
    size = _size(x, *rest)
    out = np.zeros(size, dtype=np.uint64)
    for v in (x, *rest):
        if is_batch(v):
            out |= np.bitwise_or.reduce(v.data.reshape(size, -1), axis=1)
    return Pattern(out)


def _solved(a: Any, b: Any) -> Pattern:
    """``np.linalg.solve(a, b)`` for a pattern ``b``: each entry of a column of the solution may
    depend on every entry of that column of ``b``."""
    if is_batch(a):
        raise BatchRefused("a sparsity pattern of np.linalg.solve's matrix is not followed")
    column = np.bitwise_or.reduce(b.data, axis=1, keepdims=True)
    return Pattern(np.broadcast_to(column, b.data.shape).copy())


def_pattern(np.outer, _pattern_outer)
def_pattern(np.linalg.outer, _pattern_outer)
def_pattern(np.vdot, _whole)
def_pattern(np.inner, lambda a, b: either(a, b) if rank(a) == 0 or rank(b) == 0 else
            (_whole(a, b) if rank(a) == 1 and rank(b) == 1 else
             _refuse_many("np.inner of more than one axis (for a sparsity pattern)")))
def_pattern(np.linalg.solve, _solved)


# the derivatives whose pattern is an order of the values: found at one point, it holds there alone
registry.def_value_pattern(np.sort, np.ndarray.sort, builtins.sorted, builtins.max, builtins.min,
                           sorted_by, chosen_jvp, chosen_vjp, sort_jvp, sort_vjp)


def _pattern_einsum(subscripts: Any, *operands: Any, **kwargs: Any) -> Pattern:
    """``np.einsum``'s pattern: for each pattern among the operands, the union over the letters
    summed away, spread over the result's other letters (each letter once in its term)."""
    _, terms, output = _einsum_terms(subscripts, kwargs)
    sizes: dict[str, int] = {}
    for term, op in zip(terms, operands, strict=True):
        sizes.update(zip(term, op.shape if is_batch(op) else np.shape(op), strict=True))
    size = _size(*operands)
    out = np.zeros((size, *(sizes[c] for c in output)), dtype=np.uint64)
    for term, op in zip(terms, operands, strict=True):
        if not is_batch(op):
            continue
        if len(set(term)) != len(term):
            raise BatchRefused("a sparsity pattern takes np.einsum with each letter once a term")
        summed = tuple(1 + i for i, c in enumerate(term) if c not in output)
        data = np.bitwise_or.reduce(op.data, axis=summed) if summed else op.data
        kept = [c for c in term if c in output]
        order = sorted(range(len(kept)), key=lambda i: output.index(kept[i]))
        data = data.transpose((0, *(1 + i for i in order)))
        shape = (size, *(sizes[c] if c in kept else 1 for c in output))
        np.bitwise_or(out, data.reshape(shape), out=out)
    return Pattern(out)


def _pattern_tensordot(a: Any, b: Any, axes: Any = 2) -> Pattern:
    """``np.tensordot``'s pattern: the union over the contracted axes, spread over the other
    operand's free axes."""
    ra, rb = rank(a), rank(b)
    axes_a, axes_b = _contracted(axes, ra)
    shape_a = a.shape if is_batch(a) else np.shape(a)
    shape_b = b.shape if is_batch(b) else np.shape(b)
    free_a = [i for i in range(ra) if i % ra not in {x % ra for x in axes_a}]
    free_b = [i for i in range(rb) if i % rb not in {x % rb for x in axes_b}]
    size = _size(a, b)
    out_shape = tuple(shape_a[i] for i in free_a) + tuple(shape_b[i] for i in free_b)
    out = np.zeros((size, *out_shape), dtype=np.uint64)
    if is_batch(a):
        summed = tuple(item_axis(x, ra) for x in axes_a)
        part = np.bitwise_or.reduce(a.data, axis=summed) if summed else a.data
        np.bitwise_or(out, part.reshape((size, *part.shape[1:], *(1,) * len(free_b))), out=out)
    if is_batch(b):
        summed = tuple(item_axis(x, rb) for x in axes_b)
        part = np.bitwise_or.reduce(b.data, axis=summed) if summed else b.data
        np.bitwise_or(out, part.reshape((size, *(1,) * len(free_a), *part.shape[1:])), out=out)
    return Pattern(out)


def_pattern(np.einsum, _pattern_einsum)
def_pattern(np.tensordot, _pattern_tensordot)
def_pattern(np.linalg.trace, lambda x, offset=0, dtype=None: _traced(x, offset, -2, -1))
def_pattern(np.cumulative_sum, lambda x, axis=None, dtype=None, out=None, include_initial=False:
            _refuse_many("np.cumulative_sum with include_initial (for a sparsity pattern)")
            if include_initial or out is not None else _scanned(x, 0 if axis is None else axis))



# ---- forward-mode code written for the stack (``modes.batch``) ------------------------------
for _op in (operator.add, operator.sub, operator.mul, operator.truediv, operator.neg,
            operator.pos, np.where):
    def_stacked(_op, "elementwise")
def_stacked(operator.getitem, "index")
def_stacked(assign_item, "index")
def_stacked(np.sum, "reduce", axis=1, twin=stacked_sum)
def_stacked(np.mean, "reduce", axis=1, twin=stacked_mean)
def_stacked(operator.matmul, "product", twin=stacked_matmul)
def_stacked(np.matmul, "product", twin=stacked_matmul)
def_stacked(np.dot, "product", twin=stacked_dot)
def_stacked(zero_tangent, "twin", twin=stacked_zeros, sized=True)
def_stacked(fit, "twin", twin=stacked_fit, batched=(0,), sized=True)
def_stacked(expand_reduced, "twin", twin=stacked_expand_reduced, batched=(0,), sized=True)
def_stacked(owned_adjoint, "twin", twin=stacked_owned, batched=(0,), sized=True)
def_stacked(np.cross, "twin", twin=stacked_cross, batched=(0, 1), sized=True, told=True)
def_stacked(np.copy, "elementwise")
def_stacked(cast_jvp, "twin", twin=stacked_cast, batched=(0,), sized=True)
# (a stack, or one zero every tangent's entries take: the function itself serves for stacks)
def_stacked(written_tangent, "twin", twin=written_tangent, batched=(0,))
def_stacked(np.reshape, "twin", twin=stacked_reshape, batched=(0,), sized=True)
def_stacked(unreshaped, "twin", twin=stacked_unreshaped, batched=(0, 1), sized=True, told=True)
def_stacked(np.transpose, "twin", twin=stacked_transpose, batched=(0,), sized=True)
def_stacked(T, "twin", twin=stacked_transpose, batched=(0,), sized=True)
def_stacked(unbroadcast, "twin", twin=stacked_unbroadcast, batched=(0,), sized=True)
def_stacked(summed_product, "twin", twin=stacked_summed_product, batched=(0, 1), sized=True,
            told=True)
def_stacked(np.outer, "twin", twin=stacked_outer, batched=(0, 1), sized=True, told=True)
def_stacked(np.concatenate, "twin", twin=stacked_joined, batched=(0,), sized=True)
def_stacked(np.stack, "twin", twin=stacked_stack, batched=(0,), sized=True)
def_stacked(add_adjoints, "twin", twin=stacked_added, batched=(0, 1), sized=True, told=True)
def_stacked(getitem_vjp, "twin", twin=stacked_getitem_vjp, batched=(0,), sized=True)
def_stacked(gradient_like, "twin", twin=stacked_gradient_like, batched=(0,), sized=True)
def_stacked(list_item, "twin", twin=list_item, batched=(0,))  # (a list's item: its stack)
def_stacked(detached, "twin", twin=detached, batched=(0,))  # (each array copied: each stack)
def_stacked(unstack, "twin", twin=stacked_unstack, batched=(0,), sized=True)
def_stacked(np.cumsum, "twin", twin=stacked_cumsum, batched=(0,), sized=True)
def_stacked(np.diff, "twin", twin=stacked_diff, batched=(0,), sized=True)
def_stacked(extremum_vjp, "twin", twin=stacked_extremum_vjp, batched=(0,), sized=True)
def_stacked(sort_jvp, "twin", twin=stacked_sort_jvp, batched=(0,), sized=True)
def_stacked(repeat_vjp, "twin", twin=stacked_repeat_vjp, batched=(0,), sized=True)
def_stacked(np.trace, "twin", twin=stacked_trace, batched=(0,), sized=True)
def_stacked(np.diag, "twin", twin=stacked_diag, batched=(0,), sized=True)
def_stacked(np.expand_dims, "twin", twin=stacked_expand_dims, batched=(0,), sized=True)
def_stacked(np.tile, "twin", twin=stacked_tile, batched=(0,), sized=True)
def_stacked(np.repeat, "twin", twin=stacked_repeat, batched=(0,), sized=True)
def_stacked(np.linalg.solve, "twin", twin=stacked_solve, batched=(0, 1), sized=True, told=True)
def_stacked(np.einsum, "twin", twin=stacked_einsum, batched=tuple(range(1, 9)), sized=True,
            told=True)
def_stacked(matmul_vjp_a, "twin", twin=stacked_matmul_vjp_a, batched=(0, 2), sized=True,
            told=True)
def_stacked(matmul_vjp_b, "twin", twin=stacked_matmul_vjp_b, batched=(0, 1), sized=True,
            told=True)
def_stacked(outer_vjp_a, "twin", twin=stacked_outer_vjp_a, batched=(0, 2), sized=True,
            told=True)
def_stacked(outer_vjp_b, "twin", twin=stacked_outer_vjp_b, batched=(0, 1), sized=True,
            told=True)
