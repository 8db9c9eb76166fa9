"""Array types, shapes and dtypes as generated code meets them: which values are arrays, zeros of an
array's type, an adjoint summed back to its argument's shape (``unbroadcast``), casts and
transposes."""

from __future__ import annotations

from typing import Any

import numpy as np


def error_class(name: str, fallback: type[Exception]) -> type[Exception]:
    """ast_ad's exception ``name`` (of ``ast_ad.errors``), or the builtin ``fallback`` where ast_ad
    is not there: in an exported module, which runs without it."""
    try:
        from ast_ad import errors
    except ImportError:
        return fallback
    found: type[Exception] = getattr(errors, name)
    return found


def unsupported_at(message: str, where: Any = None) -> Exception:
    """ast_ad's ``UnsupportedDerivativeError`` saying ``message`` at ``where`` (the user's file's
    name and line, ``loop.py:12``), for a run-time refusal of generated code; a ``TypeError`` saying
    both in an exported module, which runs without ast_ad."""
    error = error_class("UnsupportedDerivativeError", TypeError)
    if error is TypeError or where is None:
        return error(f"{where}: {message}" if where else message)
    filename, _, lineno = str(where).rpartition(":")
    return error(message, filename, int(lineno))


def is_array(x: Any) -> bool:
    """Whether ``x`` is an array: numpy's, or one of a library that implements numpy's dispatch
    protocols."""
    kind = type(x)
    if kind is np.ndarray:
        return True
    # the numbers an element loop reads, first
    if kind is float or kind is np.float64 or kind is int:
        return False
    if isinstance(x, np.ndarray):
        return True
    return (
        hasattr(kind, "__array_function__")
        and hasattr(kind, "__array_ufunc__")
        and hasattr(x, "shape")
        and hasattr(x, "dtype")
        and not isinstance(x, np.generic)
    )


def as_array(x: Any) -> Any:
    """``x`` as an array: numbers and lists to numpy, an array of any library as it is."""
    return x if is_array(x) else np.asarray(x)


def of_type(g: Any, x: Any) -> Any:
    """``g`` (a number, say a float zero or a seed) as an array of ``x``'s library where ``x`` is an
    array of another library than numpy, so that broadcasting it to ``x``'s shape makes no numpy
    array."""
    if isinstance(x, np.ndarray) or type(g) is type(x) or not is_array(x):
        return g
    return np.asarray(g, like=x)


def copy_as(x: Any, dtype: Any) -> Any:
    """A new array with ``x``'s values in ``dtype``, to write into (dask's ``astype`` may return
    ``x`` itself)."""
    out = as_array(x).astype(dtype)
    return out.copy() if out is x else out


def broadcast_like(g: Any, x: Any, shape: Any) -> Any:
    """``np.broadcast_to(g, shape)``: a view for numpy; for another library's ``x``, zeros of
    ``x``'s type and layout plus ``g`` (dask would make a number broadcast to ``shape`` one chunk of
    that whole shape). A Python float spread to at most 4,096 entries is an array of them
    written out: the same values, of the same dtype (float64), for a tenth of ``np.broadcast_to``'s
    4.5 us (the adjoint of ``np.sum`` of a small array; it is never written in place)."""
    if isinstance(x, np.ndarray) or not is_array(x):
        if type(g) is float:
            size = 1
            for length in shape:
                size *= length
            if size <= 4096:  # (a literal: an exported module copies this function)
                out = np.empty(shape)
                out.fill(g)
                return out
        return np.broadcast_to(g, shape)
    return zeros_of(x, shape, dtype=np.result_type(g)) + g


def size_of(x: Any) -> int:
    """How many entries ``x`` has (``np.size`` computes a dask array)."""
    return int(x.size) if is_array(x) else int(np.size(x))


def stand_in(x: Any) -> Any:
    """What reverse mode keeps of an array whose backward pass reads only its shape, dtype and type
    (``registry.def_meta_read``): where ``x`` has more than 4,096 entries, a read-only view of one
    zero of its dtype broadcast to its shape (one entry of memory, where ``x`` may be large); a
    smaller array as it is (zeros of it would take as much memory as keeping it, and its shape and
    dtype do not change when its entries are written); a list or tuple of stand-ins for a list or
    tuple (a new one: the list itself may grow later); anything else as it is (a number cannot
    change; another library's array has its values never read)."""
    if type(x) is np.ndarray:
        if x.size <= 4096:  # (a literal: an exported module copies this function)
            return x
        return np.broadcast_to(np.zeros((), x.dtype), x.shape)
    if type(x) is list or type(x) is tuple:
        # (a small array kept as it is without a call: a helper's pack, each call)
        items = [
            item if type(item) is np.ndarray and item.size <= 4096 else stand_in(item)
            for item in x
        ]
        return items if type(x) is list else tuple(items)
    return x


def zeros_of(like: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Zeros of ``like``'s shape (or of ``shape``), of ``like``'s array type: numpy's for numbers
    and lists; floats (``dtype`` ``None``), complex where ``like`` is complex."""
    if dtype is None:
        kind = getattr(like, "dtype", None)
        dtype = (
            complex
            if (kind is not None and kind.kind == "c") or isinstance(like, complex)
            else float
        )
    if is_array(like) and not isinstance(like, np.ndarray):
        # like's shape: its layout too (dask's chunks)
        if shape is None or tuple(shape) == tuple(like.shape):
            return np.zeros_like(like, dtype=dtype)
        return np.zeros_like(like, dtype=dtype, shape=shape)
    return np.zeros(np.shape(like) if shape is None else shape, dtype=dtype)


def unbroadcast(g: Any, x: Any) -> Any:
    """Sum ``g`` down to the shape of ``x``, undoing numpy broadcasting."""
    # the common case, first
    if type(x) is np.ndarray and type(g) is np.ndarray and g.shape == x.shape:
        return g
    # two numbers, as an element loop's
    if type(g) in (float, np.float64) and type(x) in (float, np.float64):
        # step has: nothing to do (the tuple is written out: an exported module has no globals)
        return g
    if isinstance(x, (tuple, list, dict)):
        if isinstance(g, (tuple, list, dict)) and len(g) != len(x):
            error = error_class("MissingRuleError", TypeError)
            raise error(
                "this + or * joined or repeated lists or tuples, which ast_ad could not tell apart "
                "from arithmetic here: build the list as a literal, with append, or with list(...) "
                "first, so ast_ad knows it is a list"
            )
        return g
    shape = getattr(x, "shape", None)
    if shape is not None and getattr(g, "shape", None) == shape:
        return g
    return _summed_to_shape(g, x, np.shape(x))


def fit_adjoint(g: Any, d: Any) -> Any:
    """``unbroadcast``'s transpose: ``g``, the adjoint of ``unbroadcast(d, x)``, brought to ``d``'s
    shape, broadcast up where ``unbroadcast`` summed ``d`` down (``fit``), summed down where it
    broadcast ``d`` up: where ``d`` is the float zero an adjoint starts as, which stands for zeros
    of any shape (reverse mode over a gradient)."""
    if (
        is_array(g)
        and np.ndim(d) < np.ndim(g)
        and not isinstance(d, (list, tuple, dict))
        and d is not None
    ):
        return unbroadcast(g, d)
    return fit(g, d)


def unbroadcast_to(g: Any, shape: Any) -> Any:
    """``unbroadcast(g, x)`` given ``x``'s shape, not ``x``: reverse mode keeps only the shape of an
    array that a loop overwrites where the backward pass reads nothing else of it
    (``saving.Saving.shape_only``)."""
    if getattr(g, "shape", None) == shape:
        return g
    return _summed_to_shape(g, None, tuple(shape))


def _summed_to_shape(g: Any, x: Any, shape: Any) -> Any:
    """``g`` summed down to ``shape``, where it broadcast up to more (``x``, if given, an array of
    that shape)."""
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
    if type(x) is np.ndarray:  # (the most common, and what the general path gives it)
        if x.ndim == 0:
            return 0.0
        return np.zeros(x.shape, complex if x.dtype.kind == "c" else float)
    if type(x) is float:
        return 0.0
    if isinstance(x, dict):
        return {key: zeros_like(item) for key, item in x.items()}
    if isinstance(x, tuple):
        return tuple(zeros_like(item) for item in x)
    if isinstance(x, list):
        return [zeros_like(item) for item in x]
    return 0.0 if np.ndim(x) == 0 else zeros_of(x)


def dense_adjoint(g: Any, x: Any) -> Any:
    """``g``, the adjoint of ``x``, as zeros of ``x``'s shape if it is still the float zero it
    started as.

    Accumulating adjoints start as ``0.0``, which broadcasting rules take as any
    shape; a rule that reshapes, indexes or multiplies matrices needs the real shape.
    """
    if g is None or (type(g) in (float, np.float64) and g == 0.0 and not isinstance(x, float)):
        # (the float zero times a numpy number is numpy's float zero: the same zero)
        return zeros_like(x)
    return g


def unpopped(xs_bar: Any, entry: Any, xs: Any) -> Any:
    """The adjoint of a list before ``y = xs.pop()``: ``xs``'s adjoint after it (``None``, or a
    float zero: zeros for its items) with ``y``'s adjoint, ``entry``, as the last item (reverse
    mode's rule of ``pop``)."""
    head = (
        [zeros_like(item) for item in xs]
        if xs_bar is None or isinstance(xs_bar, float)
        else list(xs_bar)
    )
    return [*head, entry]


def add_adjoints(a: Any, b: Any) -> Any:
    """Sum two adjoints, element by element for tuples and lists; ``None`` is zero."""
    if type(a) is np.ndarray and type(b) is np.ndarray:  # (the common case, first)
        return a + b
    if a is None or b is None:
        return b if a is None else a
    if isinstance(a, float) and a == 0.0 and isinstance(b, (tuple, list, dict)):
        return b  # the float zero an item's adjoint starts as, meeting a container's adjoint
    if isinstance(b, float) and b == 0.0 and isinstance(a, (tuple, list, dict)):
        return a  # (and the other way round: a name's adjoint reset after it was passed on)
    if isinstance(a, dict):
        return {key: add_adjoints(a[key], b[key]) for key in a}
    if isinstance(a, (tuple, list)):
        parts = [add_adjoints(p, q) for p, q in zip(a, b, strict=True)]
        return parts if isinstance(a, list) else tuple(parts)
    return a + b


def gradient_like(g: Any, x: Any) -> Any:
    """A gradient lowered in place (``ast_ad.grad(f)(...)`` written in a body: its arguments checked
    by ``checks.check_gradient_layout``) as ``ast_ad.grad`` returns it for the argument ``x``, a
    float or a numpy array of 64-bit floats: a float for a float, and for an array a new array of
    its shape that nothing else holds (``api.arguments._like``)."""
    if type(x) is np.ndarray:
        if type(g) is np.ndarray and g.shape == x.shape and g.dtype == x.dtype \
                and g.flags.owndata and g.flags.writeable:
            return g
        if is_array(g) and not isinstance(g, np.ndarray) and np.shape(g) == x.shape:
            return g.copy()  # (tangents of it, a batch: a copy of their own, as numpy's is)
        return np.array(np.broadcast_to(g, x.shape), dtype=x.dtype)
    if type(x) is float or type(x) is np.float64:
        return type(x)(g) if isinstance(g, np.ndarray) or not is_array(g) else g
    if is_array(x) and np.shape(g) != np.shape(x):
        return broadcast_like(g, x, np.shape(x))  # (another library's array: of its shape too)
    return g  # (no other kind passes the check; a tangent of another library's stays as it is)


def gradients_like(gs: Any, xs: Any) -> Any:
    """``gradient_like`` of each gradient of a tuple, each its own array where two are one."""
    done: list[Any] = []
    for g, x in zip(gs, xs, strict=True):
        g = gradient_like(g, x)
        if type(g) is np.ndarray and any(g is other for other in done):
            g = g.copy()
        done.append(g)
    return tuple(done)


def spread(g: Any, xs: Any) -> Any:
    """The adjoints of the terms of ``sum(xs)``: ``g`` for each, summed down to its term's shape."""
    return [unbroadcast(g, x) for x in xs]


def unstack(g: Any, x: Any, axis: Any = 0) -> Any:
    """The adjoint of the list ``x`` that numpy stacked along ``axis`` into an array with adjoint
    ``g``: ``g``'s slices along that axis (each has its array's shape: ``np.stack`` takes arrays of
    one shape), a list of them for each list inside."""
    if axis != 0:
        g = np.moveaxis(g, axis, 0)
    if isinstance(x, (list, tuple)):
        return [g[i] if type(item) is np.ndarray else unstack(g[i], item)
                for i, item in enumerate(x)]
    return unbroadcast(g, x)


def expand_reduced(g: Any, x: Any, axis: Any = None, keepdims: Any = False) -> Any:
    """Broadcast ``g``, the adjoint of a reduction of ``x`` over ``axis``, back to ``x``'s shape."""
    shape = np.shape(x)
    if axis is not None and not keepdims:
        axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
        g = np.expand_dims(g, tuple(a % len(shape) for a in axes))
    return broadcast_like(g, x, shape)


def summed_to(w: Any, g: Any, axis: Any = None, keepdims: Any = False) -> Any:
    """The transpose of ``expand_reduced``: ``w``, shaped as the reduced array, summed over the
    reduced axes and shaped as ``g`` (reverse mode over a gradient's code)."""
    total = np.sum(w) if axis is None else np.sum(w, axis=axis, keepdims=keepdims)
    return np.reshape(total, np.shape(g)) if np.size(total) == np.size(g) else unbroadcast(total, g)


def reduced_count(x: Any, axis: Any = None) -> Any:
    """How many entries of ``x`` a reduction over ``axis`` combines."""
    shape = np.shape(x)
    if axis is None:
        return int(np.prod(shape))
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
    return int(np.prod([shape[a] for a in axes]))


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
    """``x ** (y - 1)`` for the rule of ``x ** y``, and ``inf`` rather than ZeroDivisionError for a
    negative power of ``0.0``. Where ``y`` is 0 (the rule multiplies it by 0) and the power is not
    finite, 0.

    It is ``x ** (y - 1)`` itself wherever that is finite, so that its derivative in ``y`` (in a
    second derivative of ``x ** y``) is exact."""
    if np.ndim(y) or np.ndim(x):
        base = as_array(x)
        # integers to negative powers
        base = base.astype(float) if base.dtype.kind in "biu" else base
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            power = base ** (y - 1)
        return np.where(np.equal(y, 0) & ~np.isfinite(power), 0.0, power)
    # a numpy 0 ** -1 is inf with a warning, not an error: as above
    if isinstance(x, (np.generic, np.ndarray)):
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            power = x ** (y - 1)
        return 0.0 if y == 0 and not np.isfinite(power) else power
    try:
        power = x ** (y - 1)
    except (ZeroDivisionError, OverflowError):
        return 0.0 if y == 0 else np.power(np.float64(x), y - 1)
    # Python's power of a negative float: the value went complex on this line (not where the base
    # or the power was complex already)
    if type(power) is complex and not isinstance(x, complex) and not isinstance(y, complex):
        error = error_class("LocatedError", ValueError)
        raise error(
            "a negative number to a fractional power is complex in Python, and ast_ad "
            "differentiates real code only: keep the base positive, or use np.power (nan there) or "
            "np.cbrt"
        )
    return power


def reciprocal_or_zero(x: Any) -> Any:
    """``1 / x``, and 0 where ``x`` is 0 (a gradient taken as zero where a norm or a spread
    vanishes)."""
    nonzero = x != 0
    return np.where(nonzero, 1.0 / np.where(nonzero, x, 1.0), 0.0)


def safe_log(x: Any) -> Any:
    """``log(x)``, taking 0 where ``x`` is 0 (for the exponent's rule of ``x ** y``)."""
    return np.log(np.where(x == 0, 1.0, x))


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


def inverse_axes(axes: Any) -> Any:
    """The axes that undo ``np.transpose(x, axes)``, as a tuple of ints (dask refuses an array of
    them)."""
    return None if axes is None else tuple(int(a) for a in np.argsort(axes))


def copy_of(x: Any) -> Any:
    """``x.copy()`` as a function: the object's own copy (a dask array stays lazy, a list stays a
    list)."""
    return x.copy()


def astype(x: Any, dtype: Any, copy: Any = True) -> Any:
    """``x.astype(dtype, copy=copy)`` as a function: a new array (the lowering makes a literal
    ``copy=False`` ``astype_view`` and refuses any other ``copy=``; the tracer runs the call as
    written, where ``copy=False`` may give ``x`` itself)."""
    return as_array(x).astype(dtype, copy=bool(copy))


def array_view(x: Any, *args: Any, copy: Any = None, **kwargs: Any) -> Any:
    """``np.array(x, ..., copy=False)`` (or ``copy=None``) as a function: ``x`` itself where no
    copy is needed (where one is, numpy makes it for ``copy=None`` and raises for ``copy=False``,
    as here); a registered view, as ``np.asarray`` is, so that a write through either is seen by
    the other."""
    return np.array(x, *args, copy=copy, **kwargs)


def astype_view(x: Any, dtype: Any) -> Any:
    """``x.astype(dtype, copy=False)`` as a function: ``x`` itself where it has that dtype already,
    else a new array; a registered view, so that a write through either is seen by the other where
    they are one."""
    return as_array(x).astype(dtype, copy=False)


def T(a: Any) -> Any:
    """The transpose of a matrix, or of each matrix in a stack."""
    return np.swapaxes(a, -1, -2)


def lower_only(s: Any) -> Any:
    """The gradient of a function of a symmetric matrix that numpy reads from its lower triangle
    only."""
    n = np.shape(s)[-1]
    return np.tril(2.0 * s) - np.eye(n) * s


def fit(dot: Any, ans: Any) -> Any:
    """The tangent ``dot`` of an elementwise result ``ans``, broadcast up to ``ans``'s shape where
    it is smaller (leaf by leaf, where ``ans`` is a list, tuple or dict: ``add_adjoints``'
    tangent)."""
    # the common cases, first: arrays of one shape, and two numbers (forward mode over code made
    # for any shapes, ``jvp`` written in a body: a number's tangent is a number)
    if type(dot) is np.ndarray and type(ans) is np.ndarray and dot.shape == ans.shape:
        return dot
    if (type(dot) is float or type(dot) is np.float64) and (
        type(ans) is float or type(ans) is np.float64
    ):
        return dot
    # a new list (tuple, dict) of its own, as ``add_adjoints`` makes
    if isinstance(dot, (tuple, list, dict)):
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


def average_weights_shape(w: Any, x: Any, axis: Any) -> Any:
    """1-D weights along ``axis`` of ``x``, shaped to broadcast against it."""
    if axis is not None and np.ndim(w) == 1 and np.ndim(x) > 1:
        shape = [1] * np.ndim(x)
        shape[axis] = np.shape(w)[0]
        return np.reshape(w, shape)
    return w
