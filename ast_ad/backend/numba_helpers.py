"""Numba's versions of the runtime helpers generated gradients call (``jit="numba"``, see
``ast_ad.backend.jit``).

Each overload gives, for the argument types Numba infers, an implementation that computes what the
Python helper in ``ast_ad.runtime`` computes for those types; for other types it gives none, and
Numba reports the helper as unsupported (``jit`` names the user's line). ``tests/test_jit.py`` runs
every one of them against its Python twin.

The overloads carry no annotations: Numba requires the typing function's signature and each
implementation's to be the same, annotations included.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ast_ad import runtime

# The helpers that have a compiled version (``register``); the tests check each against its Python
# twin.
COMPILED = (
    runtime.unbroadcast,
    runtime.unbroadcast_to,
    runtime.expand_reduced,
    runtime.reduced_count,
    runtime.getitem_vjp,
    runtime.summed_getitem_vjp,
    runtime.add_into,
    runtime.assign_item,
    runtime.augmented_value,
    runtime.assign_item_vjp_x,
    runtime.assign_item_vjp_value,
    runtime.entries,
    runtime.detached,
    runtime.owned_adjoint,
    runtime.dense_adjoint,
    runtime.zeros_like,
    runtime.zero_tangent,
    runtime.cast_jvp,
    runtime.written_tangent,
    runtime.matmul_vjp_a,
    runtime.matmul_vjp_b,
    runtime.outer_vjp_a,
    runtime.outer_vjp_b,
    runtime.fit,
    runtime.fit_adjoint,
    runtime.add_adjoints,
    runtime.cast_vjp,
    runtime.check_jvp_layout,
    runtime.check_gradient_layout,
    runtime.check_gradient_value,
    runtime.gradient_like,
    runtime.gradients_like,
    runtime.pow_minus_one,
    runtime.check_bound,
    runtime.loop_length,
    runtime.copy_of,
    runtime.stand_in,
    runtime.real_like,
    runtime.unit,
    runtime.inverse_or_zero,
    runtime.abs_vjp,
    runtime.roll_vjp,
    runtime.summed_product,
    runtime.concatenate_vjp,
    runtime.stacked_steps,
    runtime.rows_of,
    runtime.summed_dot_vjp_a_steps,
    runtime.summed_dot_vjp_b_steps,
    runtime.summed_matmul_vjp_a_steps,
    runtime.summed_matmul_vjp_b_steps,
)


def _made(text: str) -> Any:
    """The function ``impl`` that ``text`` defines (an overload whose code depends on a length
    Numba knows only when it types the call: a tuple's)."""
    namespace: dict[str, Any] = {"np": np, "runtime": runtime}
    exec(text, namespace)  # noqa: S102 -- our own code, made from a length and an index
    return namespace["impl"]


def register(numba: Any) -> None:
    from numba import typed, types
    from numba.extending import overload
    from numba.np.numpy_support import as_dtype

    # a value that may still be None (a saved value before the loop sets it)
    def plain(t: Any) -> Any:
        return t.type if isinstance(t, types.Optional) else t

    def number(t: Any) -> bool:
        return isinstance(plain(t), (types.Number, types.Boolean))

    def array(t: Any) -> bool:
        return isinstance(plain(t), types.Array)

    def none(t: Any) -> bool:
        return t is None or isinstance(t, (types.NoneType, types.Omitted))

    # an index that names each entry once: an integer, a slice, or a tuple of them
    def basic(t: Any) -> bool:
        if isinstance(t, types.BaseTuple):
            return all(basic(part) for part in t)  # a tuple type iterates over its items' types
        return isinstance(t, (types.Integer, types.SliceType))

    def one_entry(x: Any, index: Any) -> bool:  # x[index] is a number: an integer for each axis
        parts = list(index) if isinstance(index, types.BaseTuple) else [index]
        return len(parts) == plain(x).ndim and all(
            isinstance(part, types.Integer) for part in parts
        )

    # ---- reversed(range) and range[:k]: Numba has neither ----------------------------------------
    @overload(reversed)
    def _reversed(seq):
        if isinstance(seq, types.RangeType):
            def impl(seq):
                n = len(seq)
                return range(seq.start + (n - 1) * seq.step, seq.start - seq.step, -seq.step)
            return impl
        return None

    # ---- abs of an array (Python's ``abs(x)``: numpy's absolute value); Numba's takes numbers ----
    @overload(abs)
    def _abs(x):
        if array(x):
            return lambda x: np.abs(x)
        return None

    @overload(operator.getitem)
    def _range_slice(seq, index):
        if isinstance(seq, types.RangeType) and isinstance(index, types.SliceType):
            def impl(seq, index):
                start, stop, step = index.indices(len(seq))
                return range(
                    seq.start + start * seq.step, seq.start + stop * seq.step, seq.step * step
                )

            return impl
        return None

    # ---- adjoints of broadcasting and reductions -------------------------------------------------
    @overload(runtime.unbroadcast)
    def _unbroadcast(g, x):
        if number(x):  # everything that broadcast up from a number sums back into it
            return (lambda g, x: g) if number(g) else (lambda g, x: np.sum(g))
        if array(x) and number(g):
            return lambda g, x: np.full(x.shape, g)
        if array(x) and array(g) and plain(g).ndim == plain(x).ndim:
            def impl(g, x):
                if g.shape != x.shape:
                    raise ValueError(
                        "jit='numba' un-broadcasts only between equal shapes and to or from numbers"
                    )
                return g
            return impl
        return None

    @overload(runtime.unbroadcast_to)
    def _unbroadcast_to(g, shape):
        if not isinstance(plain(shape), types.BaseTuple):
            return None
        if number(g):
            return lambda g, shape: np.full(shape, g)
        if array(g) and plain(g).ndim == len(plain(shape)):
            def impl(g, shape):
                if g.shape != shape:
                    raise ValueError(
                        "jit='numba' un-broadcasts only between equal shapes and to or from numbers"
                    )
                return g
            return impl
        return None

    @overload(runtime.expand_reduced)
    def _expand_reduced(g, x, axis=None, keepdims=False):
        if not none(axis):
            return None
        if number(x):
            return lambda g, x, axis=None, keepdims=False: g
        if array(x) and number(g):
            return lambda g, x, axis=None, keepdims=False: np.full(x.shape, g)
        return None

    @overload(runtime.reduced_count)
    def _reduced_count(x, axis=None):
        if none(axis):
            return (lambda x, axis=None: 1) if number(x) else (lambda x, axis=None: x.size)
        return None

    @overload(runtime.pow_minus_one)
    def _pow_minus_one(x, y):
        if number(x) and number(y):
            def impl(x, y):
                power = y - 1
                # Python raises ZeroDivisionError; the helper gives inf (0 for y = 0)
                if x == 0 and power < 0:
                    return 0.0 if y == 0 else np.inf
                if x < 0 and power != np.floor(power):
                    raise ValueError(
                        "a negative number to a fractional power is complex in Python, and ast_ad "
                        "differentiates real code only"
                    )
                return x ** power
            return impl
        return None

    # ---- complex numbers ------------------------------------------------------------------------
    def is_complex(t: Any) -> bool:
        t = plain(t)
        return isinstance(t.dtype if isinstance(t, types.Array) else t, types.Complex)

    @overload(runtime.real_like)
    def _real_like(d, x):
        if is_complex(x):
            return lambda d, x: d
        if array(d) and (array(x) or number(x)):
            return lambda d, x: np.real(d)
        if number(d) and (array(x) or number(x)):
            return lambda d, x: d.real
        return None

    @overload(runtime.unit)
    def _unit(z):
        if array(z) and is_complex(z):
            def impl(z):
                flat = np.ascontiguousarray(z).reshape(-1)
                out = np.empty_like(flat)
                for k in range(flat.size):
                    w = flat[k]
                    re, im = w.real, w.imag
                    if np.isinf(re) or np.isinf(im):  # the infinite parts' direction
                        a = (1.0 if re > 0 else -1.0) if np.isinf(re) else 0.0
                        b = (1.0 if im > 0 else -1.0) if np.isinf(im) else 0.0
                        length = np.sqrt(a * a + b * b)
                        out[k] = complex(a / length, b / length)
                    else:
                        size = abs(w)
                        out[k] = 0.0 if size == 0 else w / size
                return out.reshape(z.shape)
            return impl
        if array(z):
            return lambda z: np.sign(z)
        if number(z) and is_complex(z):
            def impl_number(z):
                size = abs(z)
                if np.isinf(z.real) or np.isinf(z.imag):
                    return runtime.unit(np.array([z]))[0]
                return 0j if size == 0 else z / size
            return impl_number
        if number(z):
            return lambda z: np.sign(z)
        return None

    @overload(runtime.inverse_or_zero)
    def _inverse_or_zero(z):
        if array(z):
            def impl(z):
                flat = np.ascontiguousarray(z).reshape(-1)
                out = np.zeros_like(flat)
                for k in range(flat.size):
                    if flat[k] != 0 and np.isfinite(flat[k]):
                        out[k] = 1.0 / flat[k]
                return out.reshape(z.shape)
            return impl
        if number(z):
            return lambda z: 1.0 / z if z != 0 and np.isfinite(z) else 0.0 * z
        return None

    @overload(runtime.abs_vjp)
    def _abs_vjp(g, x, size):
        if (array(x) or number(x)) and (array(g) or number(g)):
            return lambda g, x, size: g * np.conj(runtime.unit(x))
        return None

    @overload(runtime.summed_product)
    def _summed_product(g, y):
        if (array(g) or number(g)) and (array(y) or number(y)):
            return lambda g, y: np.sum(g * y)
        return None

    @overload(runtime.roll_vjp)
    def _roll_vjp(g, shift, axis=None):
        # a flat array rolled back by a whole number (Numba's np.roll takes no axis)
        if array(g) and plain(g).ndim == 1 and isinstance(plain(shift), types.Integer) and (
            none(axis) or isinstance(plain(axis), types.Integer)
        ):
            def impl(g, shift, axis=None):
                if axis is not None and axis != 0 and axis != -1:
                    raise ValueError("jit='numba' rolls a flat array along its only axis")
                return np.roll(g, -shift)
            return impl
        return None

    @overload(runtime.check_bound)
    def _check_bound(bound, name, where):
        if isinstance(plain(bound), types.Boolean):
            # (Numba raises with a constant message: ``jit`` says where)
            def impl(bound, name, where):
                if not bound:
                    raise UnboundLocalError(
                        "cannot access a local variable where it is not associated with a value"
                    )
            return impl
        return None

    @overload(runtime.copy_of)
    def _copy_of(x):
        if array(x):
            return lambda x: x.copy()
        return None

    @overload(runtime.stand_in)
    def _stand_in(x):
        # zeros of its shape and dtype: one type whatever the size (the Python helper keeps a small
        # array as it is, whose layout may differ); its values are never read
        if array(x) and plain(x).layout == "C":
            # (itself: only its shape and dtype are read, which do not change, and it has the type
            # zeros of it would have)
            return lambda x: x
        if array(x):
            return lambda x: np.zeros(x.shape, x.dtype)
        if number(x):
            return lambda x: x
        # a list of arrays (a helper's pack): a list of their stand-ins (the list may grow later)
        # (a typed list, which Numba can keep in the tuples a loop's tape lists hold: a list as
        # Python's, a reflected list, cannot be held in another)
        if isinstance(plain(x), (types.List, types.ListType)) and array(plain(x).dtype):
            def impl(x):
                like = typed.List()
                for a in x:
                    like.append(np.zeros(a.shape, a.dtype))
                return like
            return impl
        # a tuple of numbers and arrays cannot change (and its arrays' shapes and dtypes do not):
        # as it is
        if isinstance(plain(x), types.BaseTuple) and all(
            number(item) or array(item) for item in plain(x)
        ):
            return lambda x: x
        return None

    @overload(runtime.concatenate_vjp)
    def _concatenate_vjp(g, arrays, axis=0):
        # along the first axis (``axis`` left out), a list of arrays: ``g``'s slices, as in Python
        if array(g) and isinstance(plain(arrays), (types.List, types.ListType, types.UniTuple)) \
                and array(plain(arrays).dtype) and isinstance(axis, (int, types.Omitted)):
            def impl(g, arrays, axis=0):
                parts = []
                start = 0
                for a in arrays:
                    stop = start + a.shape[0]
                    parts.append(g[start:stop])
                    start = stop
                return parts
            return impl
        return None

    @overload(np.concatenate)
    def _concatenate(arrays, axis=0):
        # Numba joins a tuple of arrays; Python code joins a list as often (``np.concatenate([a,
        # b])``, a helper's pack): along the first axis, arrays of one number of axes, as numpy
        if isinstance(plain(arrays), (types.List, types.ListType)) and array(plain(arrays).dtype) \
                and (axis == 0 or isinstance(axis, types.Omitted)):
            def impl(arrays, axis=0):
                if len(arrays) == 0:
                    raise ValueError("need at least one array to concatenate")
                first = arrays[0]
                rows = 0
                for a in arrays:
                    if a.shape[1:] != first.shape[1:]:
                        raise ValueError("all the input array dimensions except for the "
                                         "concatenation axis must match exactly")
                    rows += a.shape[0]
                out = np.empty((rows,) + first.shape[1:], first.dtype)
                start = 0
                for a in arrays:
                    out[start:start + a.shape[0]] = a
                    start += a.shape[0]
                return out
            return impl
        return None

    def vectors(t: Any) -> bool:  # a list of vectors of floats (a loop's steps, kept by columns)
        t = plain(t)
        return isinstance(t, (types.List, types.ListType)) and array(t.dtype) \
            and t.dtype.ndim == 1 and t.dtype.dtype == types.float64

    @overload(runtime.rows_of)
    def _rows_of(x, order):
        # the rows of a matrix at a range's entries, last first (a loop's reads of it, one a step)
        if array(x) and plain(x).ndim == 2 and isinstance(plain(order), types.RangeType):
            def impl(x, order):
                n = len(order)
                out = np.empty((n, x.shape[1]), x.dtype)
                for k in range(n):
                    out[k] = x[order.start + (n - 1 - k) * order.step]
                return out
            return impl
        return None

    @overload(runtime.stacked_steps)
    def _stacked_steps(values):
        # the steps' vectors as the rows of a matrix (of vectors of one length: another raises)
        if vectors(values):
            def impl(values):
                n = len(values)
                if n == 0:
                    return np.empty((0, 0))
                out = np.empty((n, values[0].shape[0]))
                for i in range(n):
                    out[i] = values[i]
                return out
            return impl
        return None

    def by_columns(fixed_first: bool) -> Any:
        # a loop's products of a fixed matrix and a vector a step, summed: one product of the
        # stacked ``g`` (rows) and the stacked other operands
        def typing(gs, others, fixed):
            if not (array(gs) and plain(gs).ndim == 2 and array(fixed) and plain(fixed).ndim == 2):
                return None
            if array(others) and plain(others).ndim == 2:  # (the rows taken at once: ``rows_of``)
                def taken(gs, others, fixed):
                    if others.shape[0] == 0:
                        return np.zeros(fixed.shape)
                    if fixed_first:
                        return np.ascontiguousarray(gs.T) @ np.ascontiguousarray(others)
                    return np.ascontiguousarray(others.T) @ gs
                return taken
            if not vectors(others):
                return None

            def impl(gs, others, fixed):
                n = len(others)
                if n == 0:
                    return np.zeros(fixed.shape)
                rows = np.empty((n, others[0].shape[0]))
                for i in range(n):
                    rows[i] = others[i]
                if fixed_first:
                    return np.ascontiguousarray(gs.T) @ rows
                return np.ascontiguousarray(rows.T) @ gs
            return impl
        return typing

    overload(runtime.summed_dot_vjp_a_steps)(by_columns(True))
    overload(runtime.summed_matmul_vjp_a_steps)(by_columns(True))
    overload(runtime.summed_dot_vjp_b_steps)(by_columns(False))
    overload(runtime.summed_matmul_vjp_b_steps)(by_columns(False))

    @overload(runtime.loop_length)
    def _loop_length(xs, where):
        # (Numba's typed lists, tuples and arrays: sequences, read by position)
        if isinstance(plain(xs), (types.Array, types.BaseTuple, types.List, types.ListType,
                                  types.RangeType)):
            return lambda xs, where: len(xs)
        return None

    # ---- item reads and writes -------------------------------------------------------------------
    @overload(runtime.getitem_vjp)
    def _getitem_vjp(g, x, index):
        if array(x) and basic(index):
            def impl(g, x, index):
                out = np.zeros(x.shape)
                out[index] = g
                return out
            return impl
        # an item of a tuple of numbers at an index written out (a pair a helper or a jvp
        # returned): the tuple of its items' adjoints, ``g`` at the index, zeros elsewhere
        held = plain(x)
        if (
            isinstance(held, types.BaseTuple)
            and all(number(item) for item in held)
            and number(g)
            and isinstance(index, types.IntegerLiteral)
        ):
            at = index.literal_value % len(held)
            items = ", ".join("g * 1.0" if k == at else "0.0" for k in range(len(held)))
            return _made(f"def impl(g, x, index):\n    return ({items},)\n")
        return None

    @overload(runtime.summed_getitem_vjp)
    def _summed_getitem_vjp(terms, x):
        # a list, or a typed List
        item = getattr(terms, "dtype", None) or getattr(terms, "item_type", None)
        if (
            array(x)
            and isinstance(terms, (types.List, types.ListType))
            and isinstance(item, types.BaseTuple)
            and basic(item[1])
        ):
            def impl(terms, x):
                out = np.zeros(x.shape)
                for g, index in terms:
                    out[index] += g
                return out
            return impl
        return None

    @overload(runtime.add_into)
    def _add_into(x, index, value):
        if array(x) and basic(index):
            def impl(x, index, value):
                x[index] += value
            return impl
        return None

    @overload(runtime.assign_item)
    def _assign_item(x, index, value):
        if array(x):
            def impl(x, index, value):
                out = x.copy()
                out[index] = value
                return out
            return impl
        return None

    @overload(runtime.written_tangent)
    def _written_tangent(u, x):
        # a value's tangent written into ``x``: a zero where ``x`` holds integers or booleans
        if array(x) and isinstance(plain(x).dtype, (types.Integer, types.Boolean)):
            return lambda u, x: 0.0
        if array(x) or number(x):
            return lambda u, x: u
        return None

    @overload(runtime.augmented_value)
    def _augmented_value(new, old):
        # ``y op= v``: a number is rebound to the new value; a numpy array is written into, in its
        # own dtype (numpy's ``same_kind`` cast) and shape (as many axes here: the same shape)
        if number(old) and (number(new) or array(new)):
            return lambda new, old: new
        if not (array(new) and array(old) and plain(new).ndim == plain(old).ndim
                and plain(old).mutable):
            return None
        if plain(new).dtype == plain(old).dtype:
            def impl(new, old):
                if new.shape != old.shape:
                    raise ValueError("non-broadcastable output operand")
                return new
            return impl
        if not np.can_cast(as_dtype(plain(new).dtype), as_dtype(plain(old).dtype), "same_kind"):
            def refused(new, old):
                raise TypeError("Cannot cast the new value to the array's dtype with casting "
                                "rule 'same_kind'")
            return refused

        def cast(new, old):
            if new.shape != old.shape:
                raise ValueError("non-broadcastable output operand")
            return new.astype(old.dtype)
        return cast

    @overload(runtime.assign_item_vjp_x)
    def _assign_item_vjp_x(g, x, index):
        if array(x) and array(g):
            def impl(g, x, index):
                out = g.astype(np.float64)
                out[index] = 0.0
                return out
            return impl
        return None

    @overload(runtime.assign_item_vjp_value)
    def _assign_item_vjp_value(g, ans, index, value):
        if not (array(g) and array(ans) and basic(index)):
            return None
        # written into integers: truncated, no gradient
        if isinstance(plain(ans).dtype, (types.Integer, types.Boolean)):
            return (lambda g, ans, index, value: 0.0) if number(value) else \
                (lambda g, ans, index, value: np.zeros_like(value, dtype=np.float64))
        if number(value):
            return lambda g, ans, index, value: g[index]
        return lambda g, ans, index, value: runtime.unbroadcast(g[index].copy(), value)

    @overload(runtime.entries)
    def _entries(x, index):
        if array(x) and basic(index):
            if one_entry(x, index):
                return lambda x, index: x[index]
            return lambda x, index: x[index].copy()
        return None

    @overload(runtime.detached)
    def _detached(x):
        if array(x):
            return lambda x: x.copy()
        if number(x):
            return lambda x: x
        return None

    @overload(runtime.owned_adjoint)
    def _owned_adjoint(g, x):
        if array(x) and number(g):
            return lambda g, x: np.full(x.shape, np.float64(g))
        if array(x) and array(g):
            return lambda g, x: g.astype(np.float64)
        return None

    @overload(runtime.dense_adjoint)
    def _dense_adjoint(g, x):
        # the float zero an adjoint starts as, for an array: zeros of its shape
        if array(x) and number(g):
            def impl(g, x):
                if g != 0.0:
                    raise ValueError("jit='numba': a number's adjoint for an array")
                return np.zeros(x.shape)
            return impl
        if (array(x) and array(g)) or (number(x) and number(g)):
            return lambda g, x: g
        return None

    @overload(runtime.fit)
    def _fit(dot, ans):
        # a tangent of an elementwise result: as it is where it has the result's shape
        if number(dot) and number(ans):
            return lambda dot, ans: dot
        if number(dot) and array(ans):
            return lambda dot, ans: np.full(ans.shape, dot)
        if array(dot) and array(ans) and plain(dot).ndim == plain(ans).ndim:
            def impl(dot, ans):
                if dot.shape != ans.shape:
                    raise ValueError("jit='numba' fits tangents of equal shapes and numbers")
                return dot
            return impl
        return None

    @overload(runtime.fit_adjoint)
    def _fit_adjoint(g, d):
        # ``unbroadcast``'s transpose: summed down to a number, spread up to an array, else ``fit``
        if array(g) and number(d):
            return lambda g, d: np.sum(g)
        if number(g) or array(g) and array(d) and plain(g).ndim == plain(d).ndim:
            return lambda g, d: runtime.fit(g, d)
        return None

    @overload(runtime.add_adjoints)
    def _add_adjoints(a, b):
        # two adjoints summed: numbers and arrays as ``+``, ``None`` as zero, tuples item by item
        if (number(a) or array(a)) and (number(b) or array(b)):
            return lambda a, b: a + b
        if none(a):
            return lambda a, b: b
        if none(b):
            return lambda a, b: a
        if isinstance(a, types.BaseTuple) and isinstance(b, types.BaseTuple) \
                and len(a) == len(b):
            items = ", ".join(f"runtime.add_adjoints(a[{k}], b[{k}])" for k in range(len(a)))
            return _made(f"def impl(a, b):\n    return ({items},)\n")
        return None

    @overload(runtime.cast_vjp)
    def _cast_vjp(g, ans, x):
        # np.array of a list of numbers: the list's adjoint, the entries of g
        if (
            array(g)
            and array(ans)
            and isinstance(plain(ans).dtype, types.Float)
            and isinstance(plain(x), (types.List, types.ListType))
            and number(plain(x).dtype)
        ):
            def impl(g, ans, x):
                out = [g[0] * 1.0 for _ in range(0)]
                for k in range(len(x)):
                    out.append(g[k] * 1.0)
                return out
            return impl
        held = plain(x)
        if (
            array(g)
            and isinstance(held, types.BaseTuple)
            and all(number(item) for item in held)
            and array(ans)
            and isinstance(plain(ans).dtype, types.Float)
        ):
            items = ", ".join(f"g[{k}]" for k in range(len(held)))
            return _made(f"def impl(g, ans, x):\n    return [{items}]\n")
        if array(g) and array(x) and array(ans) and isinstance(plain(ans).dtype, types.Float):
            return lambda g, ans, x: g
        return None

    @overload(runtime.check_jvp_layout)
    def _check_jvp_layout(where, primal, tangent, *more):
        # each differentiated primal a 64-bit float or an array of them, its tangent a number or
        # an array of its shape (checked as it runs); anything else has no compiled version, and
        # Numba names the line that wrote the jvp
        # (the pairs after the first: Numba hands them over as one star-argument tuple)
        pairs = (primal, tangent, *(more[0] if len(more) == 1 and isinstance(
            more[0], (types.StarArgTuple, types.StarArgUniTuple)) else more))
        checks = []
        for k in range(0, len(pairs), 2):
            p, t = plain(pairs[k]), plain(pairs[k + 1])
            if isinstance(p, types.Float) and p.bitwidth == 64 and isinstance(
                    t, (types.Float, types.Integer)) and not isinstance(t, types.Boolean):
                continue
            if not (isinstance(p, types.Array) and p.dtype == types.float64
                    and isinstance(t, types.Array) and t.dtype == types.float64
                    and t.ndim == p.ndim):
                return None
            first = "primal" if k == 0 else f"more[{k - 2}]"
            second = "tangent" if k == 0 else f"more[{k - 1}]"
            checks.append(f"    if {first}.shape != {second}.shape:\n        raise ValueError("
                          f"'ast_ad.jvp written in a differentiated function: a tangent has its "
                          f"primal\\'s shape')\n")
        return _made("def impl(where, primal, tangent, *more):\n" + "".join(checks)
                     + "    return None\n")

    # ``ast_ad.grad(f)(...)`` written in a body and lowered in place: its checks and its gradient
    # as ``grad`` returns it
    def float64(t: Any) -> bool:
        held = plain(t)
        return isinstance(held, types.Float) and held.bitwidth == 64 or isinstance(
            held, types.Array) and held.dtype == types.float64

    @overload(runtime.check_gradient_layout)
    def _check_gradient_layout(where, arg, *more):
        # each differentiated argument a 64-bit float or an array of them (decided by type); else
        # no compiled version, and Numba names the line that wrote the gradient
        # (the arguments after the first: Numba hands them over as one star-argument tuple)
        rest = more[0] if len(more) == 1 and isinstance(
            more[0], (types.StarArgTuple, types.StarArgUniTuple)) else more
        if all(float64(a) for a in (arg, *rest)):
            return lambda where, arg, *more: None
        return None

    @overload(runtime.check_gradient_value)
    def _check_gradient_value(where, out):
        if number(out) or array(out) and plain(out).ndim == 0:
            return lambda where, out: None
        if array(out):
            def impl(where, out):
                raise ValueError("ast_ad.grad(f) needs f to return a real number")
            return impl
        return None

    @overload(runtime.gradient_like)
    def _gradient_like(g, x):
        # a number for a number; for an array, an array of its own (compiled code copies: it cannot
        # ask whether an array is shared)
        if number(x) and number(g):
            return lambda g, x: float(g)
        if array(x) and array(g) and plain(g).ndim == plain(x).ndim:
            def impl(g, x):
                # (Python's broadcasts a gradient of another shape; none is made here: refused)
                if g.shape != x.shape:
                    raise ValueError("jit='numba' takes a gradient of its argument's shape")
                return np.copy(g)
            return impl
        if array(x) and number(g):
            return lambda g, x: np.full(x.shape, g)
        return None

    @overload(runtime.gradients_like)
    def _gradients_like(gs, xs):
        if isinstance(gs, types.BaseTuple) and isinstance(xs, types.BaseTuple) \
                and len(gs) == len(xs):
            items = ", ".join(f"runtime.gradient_like(gs[{k}], xs[{k}])" for k in range(len(gs)))
            return _made(f"def impl(gs, xs):\n    return ({items},)\n")
        return None

    @overload(runtime.zeros_like)
    def _zeros_like(x):
        # a zero adjoint: a float for a number, zeros of an array's shape (complex for complex)
        held = plain(x)
        if number(x) or isinstance(held, types.Array) and held.ndim == 0:
            return lambda x: 0.0
        if isinstance(held, types.Array) and isinstance(held.dtype, types.Complex):
            return lambda x: np.zeros(x.shape, np.complex128)
        if isinstance(held, types.Array):
            return lambda x: np.zeros(x.shape)
        return None

    # ---- the adjoints of ``a @ b`` for vectors and matrices --------------------------------------
    def real_arrays(*ts: Any) -> bool:
        return all(array(t) and isinstance(plain(t).dtype, types.Float) for t in ts)

    @overload(runtime.matmul_vjp_a)
    def _matmul_vjp_a(g, a, b):
        if not real_arrays(a, b):
            return None
        na, nb = plain(a).ndim, plain(b).ndim
        if nb == 2 and na == 2 and array(g):
            return lambda g, a, b: g @ np.ascontiguousarray(b.T)
        if nb == 2 and na == 1 and array(g):
            return lambda g, a, b: np.ascontiguousarray(b) @ g
        if nb == 1 and na == 1 and number(g):
            return lambda g, a, b: g * b
        if nb == 1 and na == 2 and array(g):
            return lambda g, a, b: np.outer(g, b)
        return None

    @overload(runtime.matmul_vjp_b)
    def _matmul_vjp_b(g, a, b):
        if not real_arrays(a, b):
            return None
        na, nb = plain(a).ndim, plain(b).ndim
        if na == 2 and nb == 1 and array(g):
            return lambda g, a, b: g @ np.ascontiguousarray(a)
        if na == 2 and nb == 2 and array(g):
            return lambda g, a, b: np.ascontiguousarray(a.T) @ g
        if na == 1 and nb == 1 and number(g):
            return lambda g, a, b: g * a
        if na == 1 and nb == 2 and array(g):
            return lambda g, a, b: np.outer(a, g)
        return None

    # ``np.outer(a, b)`` of two vectors: ``g`` (a matrix) times the other vector
    @overload(runtime.outer_vjp_a)
    def _outer_vjp_a(g, a, b):
        if real_arrays(g, a, b) and plain(g).ndim == 2 and plain(a).ndim == plain(b).ndim == 1:
            return lambda g, a, b: np.ascontiguousarray(g) @ np.ascontiguousarray(b)
        return None

    @overload(runtime.outer_vjp_b)
    def _outer_vjp_b(g, a, b):
        if real_arrays(g, a, b) and plain(g).ndim == 2 and plain(a).ndim == plain(b).ndim == 1:
            return lambda g, a, b: np.ascontiguousarray(a) @ np.ascontiguousarray(g)
        return None

    @overload(runtime.zero_tangent)
    def _zero_tangent(x):
        # forward mode's zero tangent: ``zeros_like``'s (compiled code runs no batched pass)
        if number(x) or array(x):
            return lambda x: runtime.zeros_like(x)
        return None

    @overload(runtime.cast_jvp)
    def _cast_jvp(u, ans):
        # ``np.array`` of a list or tuple of numbers, or of an array, into floats: the tangents
        # as an array of floats
        if not (array(ans) and isinstance(plain(ans).dtype, types.Float)):
            return None
        held = plain(u)
        if isinstance(held, (types.List, types.ListType)) and number(held.dtype):
            def impl(u, ans):
                out = np.empty(len(u))
                for k in range(len(u)):
                    out[k] = u[k]
                return out
            return impl
        if isinstance(held, types.BaseTuple) and all(number(item) for item in held):
            items = ", ".join(f"u[{k}]" for k in range(len(held)))
            return _made(f"def impl(u, ans):\n    return np.array([{items}], np.float64)\n")
        if array(u) and isinstance(held.dtype, types.Float):
            return lambda u, ans: u.astype(np.float64)
        return None
