"""Many tangents carried through one forward pass: a ``Batch`` is ``B`` values of one shape, stacked
on a leading axis, which the generated code handles as it handles one value.

The forward-mode code of a function is linear in its tangents, and it reads them only with numpy's
operations, which hand a call to the array type of its arguments (NEP 13 ``__array_ufunc__``, NEP
18 ``__array_function__``). A ``Batch`` is such an array type: to the code it looks like one
tangent (its ``shape`` is one tangent's), and every operation on it is the same operation on each
of its ``B`` values, done at once on the stacked data. So one pass over the code gives the
Jacobian's columns along ``B`` directions (``jacfwd``, ``hessian``), and the primal, Python's
branches and loops included, is computed once for all of them (JAX's ``vmap`` of a ``jvp``,
Enzyme's vector mode and Tapenade's multidirectional mode do the same).

How each numpy function runs on a batch is a fact of that function, recorded in the registry next
to its rules (``registry.def_batched``; ``ast_ad.rules.batched`` records numpy's). Elementwise
ufuncs need none: the data of each operand is aligned by its rank, then broadcast as numpy
broadcasts the values. A function with no form, a conversion to a Python number or a numpy array
(``np.asarray``, ``float``, a write of a batch into a plain array), or a test of a batch's truth,
raises ``BatchRefused``: nothing is ever computed on the stacked data as if it were one value, and
the caller runs one pass a tangent instead (``api.lowering.forward_columns``).

Zero tangents are made where the code runs (``zero_tangent``), so they are made as batches while a
batched pass runs (``batch_size``), and the loops that write a tangent entry by entry write into a
batch.

>>> b = Batch(np.array([[1.0, 2.0], [3.0, 4.0]]))
>>> b.shape
(2,)
>>> (b * np.array([10.0, 100.0])).data
array([[ 10., 200.],
       [ 30., 400.]])
>>> np.sum(b).data
array([3., 7.])
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import numbers
import string
from collections.abc import Iterator
from typing import Any

import numpy as np

from ast_ad.core import registry
from ast_ad.runtime.adjoints import getitem_vjp
from ast_ad.runtime.arrays import (
    add_adjoints,
    expand_reduced,
    fit,
    gradient_like,
    unbroadcast,
    unstack,
    zeros_like,
)
from ast_ad.runtime.tangents import cast_jvp
from ast_ad.runtime.writes import owned_adjoint

# how many tangents the forward pass running now carries, and of which kind (``Batch``, or
# ``Pattern`` for a sparsity pattern), or ``None`` for one
batch_size: contextvars.ContextVar[tuple[int, type[Batch]] | None] = contextvars.ContextVar(
    "ast_ad_batch_size", default=None
)


# how many cotangents the backward pass running now carries (``vjp_fn(..., batched=True)``), or
# ``None``: the adjoints a loop adds into entry by entry start as batches of zeros
# (``writes.owned_adjoint``). Apart from ``batch_size``: in forward mode over a gradient, the
# gradient's adjoints are its primal values, which a batch of tangents must leave as they are.
cotangent_size: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "ast_ad_cotangent_size", default=None
)


@contextlib.contextmanager
def batched_backward(size: int) -> Iterator[None]:
    """While the block runs, the adjoints that a backward pass adds into entry by entry start as
    batches of ``size`` zeros."""
    token = cotangent_size.set(size)
    try:
        yield
    finally:
        cotangent_size.reset(token)


class BatchRefused(TypeError):
    """An operation that a batch of tangents does not take (``Batch``): the batched pass gives way
    to one pass a tangent."""


@contextlib.contextmanager
def batched_pass(size: int, kind: type[Batch] | None = None) -> Iterator[None]:
    """While the block runs, the zero tangents that generated code makes are batches of ``size``
    (of ``kind``: ``Batch``, or ``Pattern``, whose ``size`` is its number of 64-bit words)."""
    token = batch_size.set((size, kind or Batch))
    try:
        yield
    finally:
        batch_size.reset(token)


def zero_tangent(x: Any) -> Any:
    """The zero tangent of ``x`` that forward-mode code starts from: ``zeros_like(x)``, and where a
    batched pass runs (``batched_pass``), a batch of such zeros for each array in ``x``."""
    found = batch_size.get()
    if found is None:
        return zeros_like(x)
    if isinstance(x, dict):
        return {key: zero_tangent(item) for key, item in x.items()}
    if isinstance(x, tuple):
        return tuple(zero_tangent(item) for item in x)
    if isinstance(x, list):
        return [zero_tangent(item) for item in x]
    if np.ndim(x) == 0:
        return 0.0
    size, kind = found
    return kind.zeros(size, np.shape(x), complex if np.iscomplexobj(x) else float)


def is_batch(x: Any) -> bool:
    return isinstance(x, Batch)


def unstacked(x: Any, size: int) -> Any:
    """The stacked data of ``x`` (a batch, or a value that is the same for every tangent, as a
    zero) as one array with the batch axis first, in containers as they are."""
    if isinstance(x, dict):
        return {key: unstacked(item, size) for key, item in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(unstacked(item, size) for item in x)
    if is_batch(x):
        return x.data
    value = np.asarray(x)
    out = np.empty((size, *value.shape), dtype=np.result_type(value, float))
    out[...] = value
    return out


def _refuse(what: str) -> BatchRefused:
    return BatchRefused(f"a batch of tangents does not take {what}")


def rank(x: Any) -> int:
    """The rank of one value of ``x``: of one tangent for a batch."""
    return x.data.ndim - 1 if is_batch(x) else int(np.ndim(x))


def aligned(x: Any, r: int) -> Any:
    """``x`` ready to broadcast with values of rank ``r``: a batch's data with ones put in after the
    batch axis up to rank ``r`` (so that numpy's broadcasting, which aligns the trailing axes, never
    pairs the batch axis with an axis of a value); anything else as it is."""
    if not is_batch(x):
        return x
    data = x.data
    missing = r - (data.ndim - 1)
    if missing <= 0:
        return data
    return data.reshape((data.shape[0],) + (1,) * missing + data.shape[1:])


def sizes_of(values: Any) -> set[int]:
    return {v.data.shape[0] for v in values if is_batch(v)}


_NUMBERS = (float, int, np.float64)


def elementwise(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn`` (a broadcasting function: a ufunc, ``np.where``, ``np.clip``) of each tangent's values
    at once: every batch aligned by rank, the others broadcast as they are."""
    if len(args) == 2 and not kwargs:
        # the common cases first: a batch and a number, or a batch and a value of no more axes
        a, b = args
        if type(a) is Batch:
            if type(b) in _NUMBERS or (type(b) is np.ndarray and b.ndim <= a.data.ndim - 1):
                return Batch(fn(a.data, b))
        elif type(b) is Batch and (type(a) in _NUMBERS or (type(a) is np.ndarray
                                                             and a.ndim <= b.data.ndim - 1)):
            return Batch(fn(a, b.data))
    found = sizes_of((*args, *kwargs.values()))
    if len(found) > 1:
        raise _refuse("batches of different sizes together")
    r = max((rank(a) for a in (*args, *kwargs.values())), default=0)
    out = fn(*(aligned(a, r) for a in args), **{k: aligned(v, r) for k, v in kwargs.items()})
    if isinstance(out, tuple):
        return tuple(Batch(part) for part in out)
    return Batch(out)


def item_axis(axis: int, r: int) -> int:
    """The axis of the stacked data for the axis ``axis`` of a value of rank ``r``."""
    if not -r <= axis < r:
        raise np.exceptions.AxisError(axis, r)
    return axis % r + 1


def item_axes(axis: Any, r: int) -> Any:
    """``axis`` of a value of rank ``r`` (``None``: all of them; an int; a tuple) as the stacked
    data's axes."""
    if axis is None:
        return tuple(range(1, r + 1))
    if isinstance(axis, tuple):
        return tuple(item_axis(int(a), r) for a in axis)
    return item_axis(int(axis), r)


def _advanced(part: Any) -> bool:
    return not (part is None or part is Ellipsis or isinstance(part, (slice, numbers.Integral)))


def item_key(key: Any) -> tuple[Any, ...]:
    """The index of the stacked data for the index ``key`` of one value.

    numpy places the axes of advanced indices (arrays, lists) where they stand when they are
    together, and first when a slice separates them; with the batch axis in front, the second would
    put them before it, so that is refused.
    """
    parts = key if isinstance(key, tuple) else (key,)
    if any(is_batch(p) for p in parts):
        raise _refuse("an index that is itself a batch")
    advanced = [k for k, p in enumerate(parts) if _advanced(p)]
    if advanced and advanced[-1] - advanced[0] + 1 != len(advanced):
        raise _refuse("advanced indices separated by a slice")
    if len(advanced) == 1 and np.ndim(parts[advanced[0]]) == 0 \
            and np.result_type(parts[advanced[0]]) == np.bool_:
        raise _refuse("a boolean scalar index")
    return (slice(None), *parts)


class Batch:
    """``B`` tangents of one value, stacked: ``data[b]`` is the ``b``-th. To the code that carries
    it, it is one value of ``data.shape[1:]`` (its ``shape``)."""

    __slots__ = ("data",)

    def __init__(self, data: Any):
        self.data = data

    @classmethod
    def zeros(cls, size: int, shape: tuple[int, ...], dtype: Any = float) -> Batch:
        """``size`` zero tangents of ``shape``."""
        return cls(np.zeros((size, *shape), dtype=dtype))

    @classmethod
    def constant(cls, x: Any, size: int) -> Any:
        """The stacked data of ``x``, a value the same for every tangent (a view)."""
        value = np.asarray(x)
        return np.broadcast_to(value, (size, *value.shape))

    # ---- what the code reads of one value --------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape[1:])

    @property
    def ndim(self) -> int:
        return int(self.data.ndim) - 1

    @property
    def size(self) -> int:
        size = 1
        for n in self.data.shape[1:]:
            size *= n
        return size

    @property
    def dtype(self) -> Any:
        return self.data.dtype

    @property
    def real(self) -> Batch:
        return type(self)(self.data.real)

    @property
    def imag(self) -> Batch:
        return type(self)(self.data.imag)

    @property
    def T(self) -> Batch:  # noqa: N802 (numpy's name)
        return self.transpose()

    def __len__(self) -> int:
        if self.data.ndim < 2:
            raise TypeError("len() of unsized object")
        return int(self.data.shape[1])

    def __iter__(self) -> Iterator[Batch]:
        for k in range(len(self)):
            yield self[k]

    def __repr__(self) -> str:
        return f"Batch({self.data.shape[0]} tangents of shape {self.shape})"

    # ---- what a batch refuses --------------------------------------------------------------------
    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise _refuse("a conversion to one numpy array (np.asarray, or a write into a plain array)")

    def __float__(self) -> float:
        raise _refuse("float()")

    def __complex__(self) -> complex:
        raise _refuse("complex()")

    def __int__(self) -> int:
        raise _refuse("int()")

    def __index__(self) -> int:
        raise _refuse("use as an index")

    def __bool__(self) -> bool:
        raise _refuse("a test of its truth")

    __hash__ = None  # type: ignore[assignment]

    # ---- items -----------------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> Batch:
        """Each value's ``value[key]``: a view where numpy's is one, and, where it names one entry
        (numpy gives a number, a copy), a copy, so that a later write into this batch leaves it
        as it was."""
        out = self.data[:, key] if type(key) is int else self.data[item_key(key)]
        return type(self)(out.copy() if out.ndim == 1 else out)

    def __setitem__(self, key: Any, value: Any) -> None:
        if type(key) is int and self.data.ndim == 2:
            # an element loop's ``y[i] = v``: one entry of each tangent
            if isinstance(value, Batch):
                if value.data.shape != self.data.shape[:1]:
                    raise _refuse("a batch of another size or shape written into one entry")
                self.data[:, key] = value.data
                return
            if np.ndim(value) == 0:
                self.data[:, key] = value
                return
        full = item_key(key)
        target = np.broadcast_to(np.empty((), dtype=self.data.dtype), self.shape)[full[1:]]
        if is_batch(value):
            if value.data.shape[0] != self.data.shape[0]:
                raise _refuse("batches of different sizes together")
            value = aligned(value, target.ndim)
        elif np.broadcast_shapes(np.shape(value), target.shape) != target.shape:
            # (numpy's error for one value: broadcast over the batch, it could fit by chance)
            raise ValueError(f"could not broadcast input array from shape {np.shape(value)} into "
                             f"shape {target.shape}")
        self.data[full] = value

    # ---- numpy's protocols -----------------------------------------------------------------------
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if kwargs.get("out") is not None or kwargs.get("where", True) is not True:
            raise _refuse(f"{ufunc.__name__} with out= or where=")
        kwargs = {k: v for k, v in kwargs.items() if k not in ("out", "where")}
        if method == "__call__":
            if ufunc is np.matmul:
                if kwargs:
                    raise _refuse("np.matmul with keywords")
                return matmul(*inputs)
            if ufunc.signature is not None:
                raise _refuse(f"the generalized ufunc {ufunc.__name__}")
            return elementwise(ufunc, *inputs, **kwargs)
        if method in ("reduce", "accumulate") and len(inputs) == 1 and is_batch(inputs[0]):
            x = inputs[0]
            axis = kwargs.pop("axis", 0)
            if axis is None and method == "accumulate":
                raise _refuse(f"{ufunc.__name__}.accumulate over no axis")
            return Batch(getattr(ufunc, method)(x.data, axis=item_axes(axis, x.ndim), **kwargs))
        if method == "at" and is_batch(inputs[0]) and not kwargs:
            # ``np.add.at(x, index, value)``: ``x`` a batch, written in place
            x, index, *value = inputs
            full = item_key(index)
            if value and is_batch(value[0]):
                target = np.broadcast_to(np.empty((), dtype=x.data.dtype), x.shape)[full[1:]]
                value = [aligned(value[0], target.ndim)]
            ufunc.at(x.data, full, *value)
            return None
        raise _refuse(f"{ufunc.__name__}.{method}")

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        form = registry.batched_form(func)
        if form is None:
            raise _refuse(f"np.{getattr(func, '__name__', func)}")
        return form(*args, **kwargs)

    # ---- arithmetic ------------------------------------------------------------------------------
    def __add__(self, other: Any) -> Any:
        return elementwise(np.add, self, other)

    def __radd__(self, other: Any) -> Any:
        return elementwise(np.add, other, self)

    def __sub__(self, other: Any) -> Any:
        return elementwise(np.subtract, self, other)

    def __rsub__(self, other: Any) -> Any:
        return elementwise(np.subtract, other, self)

    def __mul__(self, other: Any) -> Any:
        return elementwise(np.multiply, self, other)

    def __rmul__(self, other: Any) -> Any:
        return elementwise(np.multiply, other, self)

    def __truediv__(self, other: Any) -> Any:
        return elementwise(np.true_divide, self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return elementwise(np.true_divide, other, self)

    def __pow__(self, other: Any) -> Any:
        return np.power(self, other)

    def __rpow__(self, other: Any) -> Any:
        return np.power(other, self)

    def __matmul__(self, other: Any) -> Any:
        return matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return matmul(other, self)

    def __neg__(self) -> Batch:
        return type(self)(-self.data)

    def __pos__(self) -> Batch:
        return self

    def __abs__(self) -> Any:
        return np.absolute(self)

    def __iadd__(self, other: Any) -> Batch:
        self[...] = np.add(self, other)
        return self

    def __isub__(self, other: Any) -> Batch:
        self[...] = np.subtract(self, other)
        return self

    def __imul__(self, other: Any) -> Batch:
        self[...] = np.multiply(self, other)
        return self

    def __itruediv__(self, other: Any) -> Batch:
        self[...] = np.true_divide(self, other)
        return self

    # ---- methods ---------------------------------------------------------------------------------
    def copy(self) -> Batch:
        return type(self)(self.data.copy())

    def astype(self, dtype: Any, copy: bool = True) -> Batch:
        return type(self)(self.data.astype(dtype, copy=copy))

    def conj(self) -> Batch:
        return type(self)(self.data.conj())

    conjugate = conj

    def reshape(self, *shape: Any, order: str = "C") -> Batch:
        if order != "C":
            raise _refuse("reshape in an order but C's")
        if len(shape) == 1 and not isinstance(shape[0], numbers.Integral):
            shape = tuple(shape[0])
        return type(self)(self.data.reshape((self.data.shape[0], *shape)))

    def ravel(self) -> Batch:
        return self.reshape(-1)

    flatten = ravel

    def transpose(self, *axes: Any) -> Batch:
        if len(axes) == 1 and not isinstance(axes[0], numbers.Integral):
            axes = tuple(axes[0]) if axes[0] is not None else ()
        r = self.ndim
        order = tuple(range(r))[::-1] if not axes else tuple(item_axis(int(a), r) - 1 for a in axes)
        return type(self)(self.data.transpose((0, *(a + 1 for a in order))))

    def sum(self, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Batch:
        return type(self)(self.data.sum(axis=item_axes(axis, self.ndim), dtype=dtype,
                                   keepdims=keepdims))

    def mean(self, axis: Any = None, keepdims: bool = False) -> Batch:
        return type(self)(self.data.mean(axis=item_axes(axis, self.ndim), keepdims=keepdims))

    def squeeze(self, axis: Any = None) -> Batch:
        if axis is None:
            return self.reshape(tuple(n for n in self.shape if n != 1))
        return type(self)(self.data.squeeze(axis=item_axes(axis, self.ndim)))

    def dot(self, other: Any) -> Any:
        return dot(self, other)

    def item(self, *args: Any) -> Any:
        raise _refuse(".item()")

    def tolist(self) -> Any:
        raise _refuse(".tolist()")


def matmul(a: Any, b: Any) -> Batch:
    """``a @ b`` for each tangent: a one-axis operand is made a matrix (a row on the left, a column
    on the right) and the axis it added taken out again, and the stacks are aligned by rank, so that
    the batch axis is a stack axis of its own."""
    found = sizes_of((a, b))
    if len(found) > 1:
        raise _refuse("batches of different sizes together")
    ra, rb = rank(a), rank(b)
    if ra == 0 or rb == 0:
        raise ValueError("matmul: Input operand does not have enough dimensions")
    # one matrix product for the whole batch where one operand is a plain matrix (BLAS's, where a
    # stack of products would make ``B`` small ones)
    if not is_batch(a) and np.ndim(a) == 2 and rb in (1, 2):
        a = np.asarray(a)
        if rb == 1:
            return Batch((a @ b.data.T).T)
        n, k = b.data.shape[1:]
        flat = b.data.transpose(1, 0, 2).reshape(n, -1)
        return Batch((a @ flat).reshape(a.shape[0], -1, k).transpose(1, 0, 2))
    if not is_batch(b) and np.ndim(b) == 2 and ra in (1, 2):
        b = np.asarray(b)
        if ra == 1:
            return Batch(a.data @ b)
        size, p, n = a.data.shape
        return Batch((a.data.reshape(size * p, n) @ b).reshape(size, p, -1))
    da = a.data if is_batch(a) else np.asarray(a)
    db = b.data if is_batch(b) else np.asarray(b)
    row, column = is_batch(a) and ra == 1, is_batch(b) and rb == 1
    vector_right = rb == 1
    if row:
        da, ra = da[:, None, :], 2
    if column:
        db, rb = db[..., None], 2
    r = max(ra, rb)
    out = np.matmul(aligned(Batch(da), r) if is_batch(a) else da,
                    aligned(Batch(db), r) if is_batch(b) else db)
    if column:
        out = out[..., 0]
    if row:
        # the row's axis: the last one left where the right operand was a vector
        out = out[..., 0] if vector_right else out[..., 0, :]
    return Batch(out)


def dot(a: Any, b: Any) -> Any:
    """``np.dot(a, b)`` for each tangent: a product with a number, else ``matmul`` where neither
    has more than two axes (where ``np.dot`` and ``np.matmul`` agree)."""
    ra, rb = rank(a), rank(b)
    if ra == 0 or rb == 0:
        return elementwise(np.multiply, a, b)
    if ra > 2 or rb > 2:
        raise _refuse("np.dot of more than two axes")
    return matmul(a, b)


# ---- sparsity patterns ---------------------------------------------------------------------------
class Pattern(Batch):
    """For each entry of a tangent, which of ``n`` inputs it may depend on: bit ``j % 64`` of word
    ``j // 64`` of ``data[:, entry]`` is set where it may depend on input ``j`` (``data`` holds
    ``ceil(n / 64)`` words of 64 bits, stacked as a batch's tangents are).

    The forward-mode code is linear in its tangents: each entry of a tangent is a sum of entries of
    other tangents times numbers of the primal. Run with a pattern seeded for each input, it
    carries for each entry the union of the patterns of the entries it is a sum of, whatever those
    numbers are (``either``: a product or a sum of patterns is their union; a reduction, the union
    of what it reduces; a matrix product, of the whole contracted axis). The Jacobian's entries
    outside the pattern are zero wherever the code takes the branches it took. A numpy function's
    form is its ``registry.pattern_form`` (structural batched forms serve as they are); with none,
    the pattern is refused, as a batch is.
    """

    __slots__ = ()

    @classmethod
    def zeros(cls, size: int, shape: tuple[int, ...], dtype: Any = float) -> Pattern:
        return cls(np.zeros((size, *shape), dtype=np.uint64))

    @classmethod
    def constant(cls, x: Any, size: int) -> Any:
        """A value the same for every input depends on none: no bits."""
        return np.zeros((size, *np.shape(x)), dtype=np.uint64)

    @classmethod
    def seeded(cls, n: int, shape: tuple[int, ...]) -> Pattern:
        """Input ``j`` (of ``n``, laid out in ``shape``) depends on itself alone."""
        data = np.zeros(((n + 63) // 64, n), dtype=np.uint64)
        j = np.arange(n)
        data[j // 64, j] = np.left_shift(np.uint64(1), (j % 64).astype(np.uint64))
        return cls(data.reshape((data.shape[0], *shape)))

    @property
    def dtype(self) -> Any:
        return np.dtype(float)  # (what the code reads: a tangent of floats)

    @property
    def real(self) -> Pattern:
        return Pattern(self.data)

    @property
    def imag(self) -> Pattern:
        return Pattern(self.data)

    def __repr__(self) -> str:
        return f"Pattern(of {64 * self.data.shape[0]} inputs, shape {self.shape})"

    def __setitem__(self, key: Any, value: Any) -> None:
        # a value the same for every input (a zero written into a tangent) depends on none: its
        # number is not a pattern's words
        super().__setitem__(key, value if is_batch(value)
                            else np.zeros(np.shape(value), dtype=np.uint64))

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if kwargs.get("out") is not None or kwargs.get("where", True) is not True:
            raise _refuse(f"{ufunc.__name__} with out= or where=")
        if method == "__call__":
            if ufunc is np.matmul:
                return pattern_matmul(*inputs)
            if ufunc.signature is not None:
                raise _refuse(f"the generalized ufunc {ufunc.__name__}")
            out = either(*inputs)
            return tuple(out.copy() for _ in range(ufunc.nout)) if ufunc.nout > 1 else out
        if method in ("reduce", "accumulate") and len(inputs) == 1 and is_batch(inputs[0]):
            x = inputs[0]
            axis = kwargs.get("axis", 0)
            if method == "reduce":
                return Pattern(united(x.data, item_axes(axis, x.ndim),
                                      bool(kwargs.get("keepdims"))))
            if axis is None:
                raise _refuse(f"{ufunc.__name__}.accumulate over no axis")
            return Pattern(np.bitwise_or.accumulate(x.data, axis=item_axis(axis, x.ndim)))
        if method == "at" and is_batch(inputs[0]):
            x, index, *value = inputs
            if value and is_batch(value[0]):
                full = item_key(index)
                target = np.broadcast_to(np.empty(()), x.shape)[full[1:]]
                np.bitwise_or.at(x.data, full, aligned(value[0], target.ndim))
            return None
        raise _refuse(f"{ufunc.__name__}.{method}")

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        form = registry.pattern_form(func)
        if form is None:
            raise _refuse(f"np.{getattr(func, '__name__', func)} (for a sparsity pattern)")
        return as_patterns(form(*args, **kwargs))

    def __add__(self, other: Any) -> Any:
        return either(self, other)

    __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __add__
    __truediv__ = __rtruediv__ = __pow__ = __rpow__ = __add__

    def __matmul__(self, other: Any) -> Any:
        return pattern_matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return pattern_matmul(other, self)

    def __neg__(self) -> Pattern:
        return Pattern(self.data.copy())

    def __abs__(self) -> Pattern:
        return Pattern(self.data.copy())

    def astype(self, dtype: Any, copy: bool = True) -> Pattern:
        return Pattern(self.data.copy() if copy else self.data)

    def conj(self) -> Pattern:
        return Pattern(self.data)

    conjugate = conj

    def sum(self, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Pattern:
        return Pattern(united(self.data, item_axes(axis, self.ndim), keepdims))

    def mean(self, axis: Any = None, keepdims: bool = False) -> Pattern:
        return self.sum(axis, keepdims=keepdims)


def united(data: Any, axis: Any, keepdims: bool = False) -> Any:
    """The union (bitwise or) of the words of ``data`` along ``axis``."""
    if keepdims:
        return np.bitwise_or.reduce(data, axis=axis, keepdims=True)
    return np.bitwise_or.reduce(data, axis=axis)


def as_patterns(value: Any) -> Any:
    """``value`` with each batch in it a pattern (a structural form of a pattern moves its words:
    what it gives back is a pattern, whatever class the form wrote)."""
    if type(value) is Batch:
        return Pattern(value.data)
    if isinstance(value, (list, tuple)):
        return type(value)(as_patterns(item) for item in value)
    return value


def either(*operands: Any) -> Pattern:
    """The pattern of an elementwise function of ``operands`` (patterns, and values the same for
    every input): each entry the union of the patterns of the entries it is computed from, as
    numpy broadcasts them."""
    found = sizes_of(operands)
    if len(found) != 1:
        raise _refuse("patterns of different sizes together")
    size = found.pop()
    shape = np.broadcast_shapes(*(x.shape if is_batch(x) else np.shape(x) for x in operands))
    out = np.zeros((size, *shape), dtype=np.uint64)
    for x in operands:
        if is_batch(x):
            np.bitwise_or(out, aligned(x, len(shape)), out=out)
    return Pattern(out)


def pattern_matmul(a: Any, b: Any) -> Pattern:
    """The pattern of ``a @ b`` (one or two axes each): an entry of the product sums a row of ``a``
    by a column of ``b``, so it has the union of that row's patterns and that column's; every
    entry of a matrix of the primal counts (its zeros are not relied on)."""
    ra, rb = rank(a), rank(b)
    if not (1 <= ra <= 2 and 1 <= rb <= 2):
        raise _refuse("a matrix product of more than two axes (for a sparsity pattern)")
    rows = (1 if ra == 1 else (a.shape if is_batch(a) else np.shape(a))[0],)
    columns = (1 if rb == 1 else (b.shape if is_batch(b) else np.shape(b))[1],)
    size = sizes_of((a, b)).pop()
    out = np.zeros((size, *rows, *columns), dtype=np.uint64)
    if is_batch(a):  # a row's union, the same for every column
        row = np.bitwise_or.reduce(a.data, axis=-1)
        np.bitwise_or(out, row.reshape(size, *rows, 1), out=out)
    if is_batch(b):  # a column's union, the same for every row
        column = np.bitwise_or.reduce(b.data, axis=1)
        np.bitwise_or(out, column.reshape(size, 1, *columns), out=out)
    shape = (() if ra == 1 else rows) + (() if rb == 1 else columns)
    return Pattern(out.reshape((size, *shape)))



# ---- the helpers of forward-mode code written for stacks (``modes.batch``) -----------------------
# There every tangent is one numpy array holding ``B`` tangents on a last axis of its own (a
# tangent of shape ``s``: an array of shape ``(*s, B)``), not a ``Batch``: what the code does to one
# tangent, written for the stack. These are what it calls where the stack needs more than numpy's
# own broadcasting; each gives way to the ``Batch`` form of the helper it stands for (``as_batch``,
# then ``stacked``) where its fast case does not hold.


def batch_size_of(*tangents: Any) -> int:
    """How many tangents the stacks among ``tangents`` (in containers too) carry."""
    for t in tangents:
        if isinstance(t, np.ndarray):
            return int(t.shape[-1])
        if isinstance(t, (tuple, list)):
            found = [batch_size_of(item) for item in t if item is not None]
            if found:
                return found[0]
        if isinstance(t, dict) and t:
            return batch_size_of(*t.values())
    raise _refuse("tangents with no stacked array to count them by")


def as_batch(x: Any, size: int) -> Any:
    """The stacks ``x`` as ``Batch``es of ``size`` (the batch axis moved first: a view), in
    containers as they are: what a helper with no form for stacks takes (it runs on the batch as
    on one tangent). A zero tangent may still be the number ``0.0`` (an adjoint's start), or an
    array made from it whose batch axis is 1: it is the same for every tangent, and spread so."""
    if type(x) is np.ndarray:
        if x.shape[-1] != size:
            x = np.broadcast_to(x, (*x.shape[:-1], size))
        return Batch(np.moveaxis(x, -1, 0))
    if isinstance(x, dict):
        return {key: as_batch(item, size) for key, item in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(as_batch(item, size) for item in x)
    return x


def stacked(x: Any, size: int) -> Any:
    """The tangents ``x`` that a helper gave (``Batch``es, or zeros: a tangent that is not a batch
    is the same for every one of them, and only a zero can be) as stacks, in containers as they
    are; a number zero stays one. A tangent that is neither is refused: nothing is ever stacked as
    if it held ``size`` equal tangents that it does not."""
    if type(x) is Batch:
        return np.moveaxis(x.data, 0, -1)
    if x is None:
        return None
    if isinstance(x, dict):
        return {key: stacked(item, size) for key, item in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(stacked(item, size) for item in x)
    if isinstance(x, Batch):
        raise _refuse("a sparsity pattern where tangents are stacked")
    value = np.asarray(x)
    if value.dtype.kind not in "biufc" or np.any(value):
        raise _refuse("a tangent that is not a batch and not zero")
    if value.ndim == 0 and not isinstance(x, np.ndarray):
        return x  # (a number zero broadcasts as a stack of zeros does: kept, as the code has it)
    return np.zeros((*value.shape, size), dtype=np.result_type(value, float))


def stacked_zeros(x: Any, *, size: int) -> Any:
    """``size`` zero tangents of ``x``, stacked (``zero_tangent``'s form): an array of ``x``'s
    shape and the batch axis, each array in a container so."""
    if isinstance(x, dict):
        return {key: stacked_zeros(item, size=size) for key, item in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(stacked_zeros(item, size=size) for item in x)
    if isinstance(x, (np.ndarray, int, float, complex, np.generic)):
        value = np.asarray(x)
        return np.zeros((*value.shape, size), complex if value.dtype.kind == "c" else float)
    return 0.0  # (``None``, or another object: the zero ``zero_tangent`` gives)


def stacked_key(key: Any) -> Any:
    """The index of a stack for the index ``key`` of one tangent: the same, but where it holds an
    ``...``, which would take the batch axis in: then the batch axis is kept whole after it."""
    parts = key if isinstance(key, tuple) else (key,)
    if any(p is Ellipsis for p in parts):
        return (*parts, slice(None))
    return key


def stacked_fit(dot: Any, ans: Any, *, size: int) -> Any:
    """``fit(dot, ans)`` for the stack ``dot`` of tangents of an array ``ans``: the same where the
    shapes agree, else broadcast up to ``ans``'s shape (and the batch axis)."""
    if type(dot) is np.ndarray and type(ans) is np.ndarray and dot.shape[-1] == size:
        if dot.shape[:-1] == ans.shape:
            return dot
        return np.broadcast_to(dot, (*ans.shape, size))
    return stacked(fit(as_batch(dot, size), ans), size)


def stacked_expand_reduced(g: Any, x: Any, axis: Any = None, keepdims: Any = False, *,
                           size: int) -> Any:
    """``expand_reduced(g, x, axis, keepdims)`` for the stack ``g`` of tangents of a reduction of
    the array ``x``: the reduced axes put back, then broadcast to ``x``'s shape."""
    if type(g) is not np.ndarray or type(x) is not np.ndarray or g.shape[-1] != size:
        return stacked(expand_reduced(as_batch(g, size), x, axis, keepdims), size)
    if axis is None:
        g = g.reshape((1,) * x.ndim + (g.shape[-1],)) if g.ndim == 1 else g
    elif not keepdims:
        axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
        g = np.expand_dims(g, tuple(a % x.ndim for a in axes))
    return np.broadcast_to(g, (*x.shape, g.shape[-1]))


def stacked_owned(g: Any, x: Any, *, size: int) -> Any:
    """``owned_adjoint(g, x)`` for the stack ``g`` of ``size`` tangents of the array ``x``: a new
    stack of ``x``'s shape, in floats at least, that a loop can write into."""
    if type(x) is np.ndarray and (type(g) is np.ndarray and g.ndim - 1 <= x.ndim
                                  or type(g) is float):
        out = np.empty((*x.shape, size), dtype=np.result_type(x, g, 1.0))
        out[...] = g
        return out
    return stacked(owned_adjoint(as_batch(g, size), x), size)


def stacked_cross(a: Any, b: Any, *, stacks: tuple[bool, ...], size: int) -> Any:
    """``np.cross(a, b)`` of vectors of three (on the last axis of one tangent) where ``stacks``
    says which of ``a`` and ``b`` are stacks: their batch axes moved first and aligned with the
    other's axes (``aligned``), the product as a stack of the result's shape."""
    r = max(np.ndim(a) - stacks[0], np.ndim(b) - stacks[1])

    def front(x: Any, stack: bool) -> Any:
        if not stack:
            return x
        return aligned(Batch(np.moveaxis(np.broadcast_to(x, (*np.shape(x)[:-1], size)), -1, 0)),
                       r)

    return np.moveaxis(np.cross(front(a, stacks[0]), front(b, stacks[1])), 0, -1)


def stacked_cast(u: Any, ans: Any, *, size: int) -> Any:
    """``cast_jvp(u, ans)`` for the stack ``u``: in the result's dtype, zeros where the result is
    integers."""
    if np.result_type(ans).kind in "biu":
        return np.zeros((*np.shape(ans), size))
    if type(u) is np.ndarray:
        return u.astype(np.result_type(ans), copy=False)
    if type(u) in (list, tuple) and u and all(
            type(p) is np.ndarray and p.shape == u[0].shape for p in u) \
            and u[0].shape[-1:] == (size,) and np.shape(ans) == (len(u), *u[0].shape[:-1]):
        # (``np.array([a, b])`` of stacks of one shape: each tangent's array of its parts is
        # the stacks stacked first, the batch axis still last)
        return np.array(u, dtype=np.result_type(ans))
    return stacked(cast_jvp(as_batch(u, size), ans), size)


def stacked_reshape(x: Any, *shape: Any, size: int) -> Any:
    """``np.reshape(x, shape)`` for the stack ``x`` (in C's order, as each tangent's): the batch
    axis kept last."""
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        shape = tuple(shape[0])
    return np.reshape(x, (*shape, size))


def stacked_unreshaped(base: Any, view: Any, *args: Any, stacks: tuple[bool, ...],
                       size: int) -> Any:
    """``unreshaped(base, view)`` where ``view`` is a stack: its entries in ``base``'s shape (a
    stack's, where ``base`` is one too)."""
    if not stacks[1]:
        raise _refuse("a tangent reshaped from a value")
    return np.reshape(view, np.shape(base) if stacks[0] else (*np.shape(base), size))


def stacked_transpose(x: Any, axes: Any = None, *, size: int) -> Any:
    """``np.transpose(x, axes)`` for the stack ``x``: each tangent's axes moved, the batch axis
    kept last."""
    r = np.ndim(x) - 1
    order = tuple(range(r))[::-1] if axes is None else tuple(int(a) % r for a in axes)
    return np.transpose(x, (*order, r))


def stacked_unbroadcast(g: Any, x: Any, *, size: int) -> Any:
    """``unbroadcast(g, x)`` for the stack ``g``: summed down to ``x``'s shape over the axes that
    broadcasting added or spread, the batch axis kept."""
    shape = np.shape(x)
    if type(g) is not np.ndarray or g.shape[-1] != size or g.ndim - 1 < len(shape):
        return stacked(unbroadcast(as_batch(g, size), x), size)
    lead = g.ndim - 1 - len(shape)
    axes = tuple(range(lead)) + tuple(lead + k for k, n in enumerate(shape)
                                     if n == 1 and g.shape[lead + k] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape((*shape, size)) if lead else g


def stacked_summed_product(g: Any, y: Any, *, stacks: tuple[bool, ...], size: int) -> Any:
    """``summed_product(g, y)``, ``np.sum(g * y)``, where one of ``g`` and ``y`` is a stack: one
    number for each tangent; for a stack of ``y``'s shape, one product of a vector by a
    matrix."""
    a, v = (g, y) if stacks[0] else (y, g)
    if type(a) is np.ndarray and type(v) is np.ndarray and a.shape[:-1] == v.shape \
            and a.dtype.kind == "f" and v.dtype.kind == "f":
        return np.reshape(v, -1) @ np.reshape(a, (-1, size))
    product = a * (v[..., None] if np.ndim(v) else v)
    return np.sum(product, axis=tuple(range(np.ndim(product) - 1)))


def stacked_outer(a: Any, b: Any, *, stacks: tuple[bool, ...], size: int) -> Any:
    """``np.outer(a, b)`` where ``stacks`` says which of ``a`` and ``b`` are stacks: each
    flattened, their products for each tangent."""
    left = np.reshape(a, (-1, size)) if stacks[0] else np.ravel(a)[:, None]
    right = np.reshape(b, (-1, size)) if stacks[1] else np.ravel(b)[:, None]
    return left[:, None, :] * right[None, :, :]


def stacked_matmul(a: Any, b: Any, *, stacks: tuple[bool, ...], size: int) -> Any:
    """``a @ b`` where one of them is a stack: a value by a stack of vectors is one product of
    matrices (the stack's columns are its tangents); anything else is ``matmul``'s for a
    ``Batch`` (the batch axis moved first and aligned with the other's stack axes)."""
    if stacks[0] == stacks[1]:
        raise _refuse("a matrix product of two stacks, or none")
    if stacks[1] and np.ndim(b) == 2:
        return np.matmul(a, b)  # (a value by the columns of the stack, its tangents)
    # one product, its stack axes numpy's own, where a numpy array meets a stack of its tangents'
    # matrices (each tangent's product is the one ``matmul`` makes of it, its batch axes
    # broadcast as they would be)
    if stacks[1] and type(b) is np.ndarray and type(a) is np.ndarray and a.ndim >= 1:
        # ``a @ b_t`` for every ``t``: the tangents' columns side by side, ``(..., m, k * B)``
        *outer, m, k, _ = b.shape
        product = np.matmul(a, b.reshape(*outer, m, k * size))
        return product.reshape(*product.shape[:-1], k, size)
    if stacks[0] and type(a) is np.ndarray and type(b) is np.ndarray and b.ndim >= 1:
        if a.ndim == 2:  # (vectors: ``a_t @ b`` is ``b.T @ a_t``, each a column of the stack)
            return np.matmul(np.swapaxes(b, -1, -2), a) if b.ndim >= 2 else np.matmul(b, a)
        # ``a_t @ b``: the batch axis a row axis of each matrix, ``(..., p, B, m) @ (..., 1, m,
        # k)``, then put last again
        if b.ndim == 1:
            return np.matmul(np.swapaxes(a, -1, -2), b)
        return np.swapaxes(np.matmul(np.swapaxes(a, -1, -2), b[..., None, :, :]), -1, -2)
    left = Batch(np.moveaxis(a, -1, 0)) if stacks[0] else a
    right = Batch(np.moveaxis(b, -1, 0)) if stacks[1] else b
    return np.moveaxis(matmul(left, right).data, 0, -1)


def stacked_joined(arrays: Any, axis: Any = 0, *, size: int) -> Any:
    """``np.concatenate(arrays, axis)`` of stacks: each tangent's arrays joined, the batch axis
    kept last."""
    arrays = list(arrays)
    if axis is None:
        return np.concatenate([np.reshape(a, (-1, size)) for a in arrays], axis=0)
    r = np.ndim(arrays[0]) - 1
    return np.concatenate(arrays, axis=int(axis) % r)


def stacked_stack(arrays: Any, axis: Any = 0, *, size: int) -> Any:
    """``np.stack(arrays, axis)`` of stacks: a new axis for each tangent, the batch axis kept
    last."""
    arrays = list(arrays)
    r = np.ndim(arrays[0]) - 1
    return np.stack(arrays, axis=int(axis) % (r + 1))


def stacked_added(a: Any, b: Any, *, stacks: tuple[bool, ...], size: int) -> Any:
    """``add_adjoints(a, b)`` of two tangents, stacks or a zero that is the same for every
    tangent (spread over the batch axis), in containers as they are."""
    return add_adjoints(a if stacks[0] else _spread(a), b if stacks[1] else _spread(b))


def _spread(x: Any) -> Any:
    if type(x) is np.ndarray:
        return x[..., None]
    if isinstance(x, dict):
        return {key: _spread(item) for key, item in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(_spread(item) for item in x)
    return x


def spread_value(v: Any) -> Any:
    """A value the same for every tangent, ready to broadcast with stacks: an axis of one last,
    where the batch axis stands (a number as it is)."""
    if type(v) is np.ndarray:
        return v[..., None]
    if isinstance(v, (int, float, complex, np.generic)):
        return v
    value = np.asarray(v)
    return value[..., None] if value.ndim else value


def _unit_block(seeds: Any) -> int | None:
    """``j`` where the stack ``seeds`` of vectors (``(n, B)``, the batch axis last) is the unit
    vectors ``e_j`` to ``e_(j+B-1)`` (a block of columns of the identity, as ``jacfwd`` and
    ``hessian`` seed their argument with), else ``None``: a pass over the seeds."""
    if not (type(seeds) is np.ndarray and seeds.ndim == 2 and seeds.shape[1]
            and seeds.dtype.kind == "f"):
        return None
    size = seeds.shape[1]
    j = int(np.argmax(seeds[:, 0]))
    if j + size <= seeds.shape[0] and np.count_nonzero(seeds) == size \
            and np.all(np.diagonal(seeds[j:j + size]) == 1.0):
        return j
    return None


def seeded_product(a: Any, seeds: Any) -> Any:
    """``a @ seeds`` for the matrix ``a`` and the stack ``seeds`` of vectors that a Jacobian seeds
    its argument with: where they are unit vectors (``_unit_block``), the columns of ``a`` they
    pick, copied, which is what the product gives for a finite ``a``; else the product. Checking
    costs a pass over the seeds, the product one over ``a`` for each of them."""
    if type(a) is np.ndarray and a.ndim == 2 and a.dtype.kind == "f" \
            and type(seeds) is np.ndarray and seeds.ndim == 2 and a.shape[1] == seeds.shape[0]:
        j = _unit_block(seeds)
        if j is not None and np.isfinite(a).all():
            return a[:, j:j + seeds.shape[1]].copy()
    return a @ seeds


_FLOAT64 = np.dtype(np.float64)
_REALS = frozenset({float, np.float64})
_INTEGERS = frozenset({int, np.int64, np.intp})


class NotUnitSeeds(ValueError):
    """The code written for unit seeds was given others: the pass gives way to the general one
    (``api.lowering.stacked_pass``), which computes the same numbers."""


def unit_seeds(seeds: Any) -> tuple[int, int, int]:
    """``(j, n, B)`` for the seeds ``e_j`` to ``e_(j+B-1)`` of a vector of ``n`` entries
    (``_unit_block``), which code written for unit seeds reads (``unit_added``); raises
    ``NotUnitSeeds`` for any other seeds."""
    j = _unit_block(seeds)
    if j is None:
        raise NotUnitSeeds("the seeds are not a block of unit vectors")
    return j, int(seeds.shape[0]), int(seeds.shape[1])


def unit_added(s: Any, seeds: Any, index: Any, scale: Any, units: tuple[int, int, int],
               owned: bool = False) -> Any:
    """``s + seeds[index] * scale`` for the stack ``s`` of a number's tangents, the seeds a block
    of unit vectors (``units``: ``unit_seeds``) and ``scale`` a number: for an integer ``index``,
    ``seeds[index]`` is ``e_k`` on the batch axis, ``k = index - j``, or zeros where the block does
    not hold it, so the sum is ``s`` with ``scale`` added at ``k``: one number added, where the
    product and the sum are each a pass over the stack. The same numbers (up to the sign of a
    zero: ``-0.0 + 0.0``). Anything else (an index that is not an integer, a scale that is not a
    finite number, whose product with the zeros is nan, an ``s`` that is not a stack of numbers,
    such as a zero standing for one): the product and the sum as written. ``owned``: ``s`` is an
    array this code made that nothing reads after (``modes.batch.Stacker._unit_rows``), added into
    in place."""
    j, n, size = units
    # (the checks a few hundred nanoseconds at most: a product or a sum of the stack costs about a
    # microsecond)
    if not (type(s) is np.ndarray and s.shape == (size,) and s.dtype == _FLOAT64
            and type(scale) in _REALS and math.isfinite(scale)
            and type(index) in _INTEGERS and -n <= index < n):
        return s + seeds[index] * scale
    out = s if owned else s.copy()
    k = index % n - j
    if 0 <= k < size:
        out[k] += scale
    return out


def stacked_gradient_like(g: Any, x: Any, *, size: int) -> Any:
    """``gradient_like(g, x)`` for the stack ``g`` of tangents of a gradient in ``x`` (a float, or
    a numpy array of 64-bit floats, which its check let through): the stack itself where it is an
    array of its own of ``x``'s dtype, else a copy in that dtype."""
    dtype = x.dtype if type(x) is np.ndarray else np.dtype(float)
    if type(g) is np.ndarray and g.shape == (*np.shape(x), size):
        if g.dtype == dtype and g.flags.owndata and g.flags.writeable:
            return g
        return np.array(g, dtype=dtype)
    return stacked(gradient_like(as_batch(g, size), x), size)


def stacked_getitem_vjp(g: Any, x: Any, index: Any, *, size: int) -> Any:
    """``getitem_vjp(g, x, index)`` for the stack ``g`` of tangents of ``x[index]``, ``x`` an
    array: scattered into zeros of ``x``'s shape (and the batch axis), repeated entries added."""
    if type(x) is not np.ndarray or type(g) is not np.ndarray or g.shape[-1] != size:
        return stacked(getitem_vjp(as_batch(g, size), x, index), size)
    out = np.zeros((*x.shape, size), dtype=np.result_type(x, g, 1.0))
    key = stacked_key(index)
    parts = key if isinstance(key, tuple) else (key,)
    if any(isinstance(p, (np.ndarray, list)) for p in parts):
        np.add.at(out, key, g)
    else:
        out[key] = g
    return out


# each adjoint of ``a @ b`` for one tangent, by the numbers of axes of ``a`` and ``b``: the
# subscripts of ``np.einsum`` over (``g``, the other operand)
_MATMUL_VJPS = {
    ("a", 2, 2): "mk,nk->mn", ("a", 1, 2): "k,nk->n", ("a", 1, 1): ",n->n", ("a", 2, 1): "m,n->mn",
    ("b", 2, 1): "m,mn->n", ("b", 2, 2): "mk,mn->nk", ("b", 1, 1): ",n->n", ("b", 1, 2): "k,m->mk",
}


def _stacked_matmul_vjp(which: str, g: Any, a: Any, b: Any, stacks: tuple[bool, ...],
                        size: int) -> Any:
    """The adjoint of ``a`` (``which``) or ``b`` in ``a @ b`` where one of ``g`` and the other
    operand is a stack: the one-tangent product written with ``np.einsum``, the stack's batch
    axis a subscript of its own, kept last."""
    other, stacked_other = (b, stacks[2]) if which == "a" else (a, stacks[1])
    if stacks[0] == stacked_other:
        raise _refuse("an adjoint of a matrix product with no stack, or two")
    spec = _MATMUL_VJPS.get((which, np.ndim(a) - stacks[1], np.ndim(b) - stacks[2]))
    if spec is None:
        raise _refuse("an adjoint of a matrix product of more than two axes")
    left, out = spec.split("->")
    g_sub, o_sub = left.split(",")
    g_sub, o_sub = (g_sub + "z", o_sub) if stacks[0] else (g_sub, o_sub + "z")
    return np.einsum(f"{g_sub},{o_sub}->{out}z", g, other)


def stacked_matmul_vjp_a(g: Any, a: Any, b: Any, *, stacks: tuple[bool, ...],
                         size: int) -> Any:
    """``matmul_vjp_a(g, a, b)`` where ``g`` or ``b`` is a stack (``a`` is read for its
    axes)."""
    return _stacked_matmul_vjp("a", g, a, b, stacks, size)


def stacked_matmul_vjp_b(g: Any, a: Any, b: Any, *, stacks: tuple[bool, ...],
                         size: int) -> Any:
    """``matmul_vjp_b(g, a, b)`` where ``g`` or ``a`` is a stack (``b`` is read for its
    axes)."""
    return _stacked_matmul_vjp("b", g, a, b, stacks, size)


def _stacked_outer_vjp(which: str, g: Any, a: Any, b: Any, stacks: tuple[bool, ...],
                       size: int) -> Any:
    """The adjoint of ``a`` (``which``) or ``b`` in ``np.outer(a, b)`` where one of ``g`` and the
    other operand is a stack: ``g @ ravel(b)`` or ``ravel(a) @ g``, in the operand's shape, the
    batch axis kept last."""
    mine, other = (1, 2) if which == "a" else (2, 1)
    if stacks[0] == stacks[other]:
        raise _refuse("an adjoint of an outer product with no stack, or two")
    m = np.size(a) // (size if stacks[1] else 1)
    n = np.size(b) // (size if stacks[2] else 1)
    operand = (a, b)[mine - 1]
    shape = np.shape(operand)[:-1] if stacks[mine] else np.shape(operand)
    matrix = np.reshape(g, (m, n, size) if stacks[0] else (m, n))
    if which == "b":
        matrix = np.swapaxes(matrix, 0, 1)  # (``ravel(a) @ g`` is ``g.T @ ravel(a)``)
    if stacks[0]:
        out = np.einsum("pqz,q->pz", matrix, np.ravel((a, b)[other - 1]))
    else:
        out = matrix @ np.reshape((a, b)[other - 1], (-1, size))
    return np.reshape(out, (*shape, size))


def stacked_outer_vjp_a(g: Any, a: Any, b: Any, *, stacks: tuple[bool, ...],
                        size: int) -> Any:
    """``outer_vjp_a(g, a, b)`` where ``g`` or ``b`` is a stack (``a`` is read for its shape)."""
    return _stacked_outer_vjp("a", g, a, b, stacks, size)


def stacked_outer_vjp_b(g: Any, a: Any, b: Any, *, stacks: tuple[bool, ...],
                        size: int) -> Any:
    """``outer_vjp_b(g, a, b)`` where ``g`` or ``a`` is a stack (``b`` is read for its shape)."""
    return _stacked_outer_vjp("b", g, a, b, stacks, size)


def _stacked_reduction(fn: Any) -> Any:
    def reduced(x: Any, axis: Any = None, *args: Any, size: int, **kwargs: Any) -> Any:
        r = np.ndim(x) - 1
        if r < 0:
            return fn(x)  # (a number zero: what one tangent's reduction gives)
        if axis is None:
            axes: Any = tuple(range(r))
        elif isinstance(axis, tuple):
            axes = tuple(int(a) % r for a in axis)
        else:
            axes = int(axis) % r
        return fn(x, axes, *args, **kwargs)
    reduced.__name__ = reduced.__qualname__ = f"stacked_{fn.__name__}"
    reduced.__doc__ = (f"``np.{fn.__name__}(x, axis)`` for the stack ``x`` whose axes are known "
                       "when it runs: over each tangent's axes, never the batch axis.")
    return reduced


stacked_sum = _stacked_reduction(np.sum)
stacked_mean = _stacked_reduction(np.mean)


def stacked_dot(a: Any, b: Any, *, stacks: tuple[bool, ...], size: int) -> Any:
    """``np.dot(a, b)`` where one is a stack and the axes are known when it runs: a product with
    a number, or ``stacked_matmul`` where neither has more than two axes."""
    ra, rb = np.ndim(a) - stacks[0], np.ndim(b) - stacks[1]
    if ra <= 0 or rb <= 0:
        return (a if stacks[0] else spread_value(a)) * (b if stacks[1] else spread_value(b))
    if ra > 2 or rb > 2:
        raise _refuse("np.dot of more than two axes")
    return stacked_matmul(a, b, stacks=stacks, size=size)


def stacked_einsum(subscripts: Any, *operands: Any, stacks: tuple[bool, ...], size: int,
                   **kwargs: Any) -> Any:
    """``np.einsum(subscripts, *operands)`` where one operand is a stack: its batch axis a letter
    of its own, last in that operand's subscripts and in the result's."""
    if not isinstance(subscripts, str) or sum(stacks) != 1 or kwargs:
        raise _refuse("np.einsum with these operands for stacks")
    inputs, _, output = subscripts.replace(" ", "").partition("->")
    parts = inputs.split(",")
    if not _:
        letters = [c for c in inputs if c.isalpha()]
        output = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
        output = ("..." if "..." in inputs else "") + output
    free = next(c for c in string.ascii_letters if c not in subscripts)
    k = stacks.index(True) - 1
    parts[k] += free
    return np.einsum(",".join(parts) + "->" + output + free, *operands)


def stacked_into(ufunc: Any, k: int, *args: Any) -> Any:
    """``ufunc(*args)``, written into ``args[k]``, a stack that the code for stacks made and reads
    only here (``modes.batch``: it passes one here only then), where it is an array of its own
    memory of the result's shape and dtype; else a new array, as ``ufunc(*args)`` gives. A stack
    of a tangent with axes is large (``B`` times the value): its memory taken again, not a new
    one faulted in."""
    target = args[k]
    if not (type(target) is np.ndarray and target.base is None and target.flags.writeable):
        return ufunc(*args)
    if _fits(target, args) or np.broadcast_shapes(*(np.shape(a) for a in args)) == target.shape \
            and np.result_type(*args) == target.dtype:
        return ufunc(*args, out=target)
    return ufunc(*args)


def _fits(target: np.ndarray, args: tuple[Any, ...]) -> bool:
    """Whether ``ufunc(*args)`` surely has ``target``'s shape and dtype, by a few comparisons (the
    general check, ``np.broadcast_shapes`` and ``np.result_type``, costs microseconds, which a
    small stack in a loop pays at every step): arrays of its dtype that broadcast to its shape, and
    Python numbers of its kind, which numpy takes at the array's precision."""
    shape, dtype = target.shape, target.dtype
    for a in args:
        if a is target:
            continue
        kind = type(a)
        if kind is np.ndarray:
            if a.dtype != dtype or a.ndim > target.ndim or any(
                    m != 1 and m != n for m, n in zip(a.shape[::-1], shape[::-1], strict=False)):
                return False
        elif not (kind is float and dtype.kind in "fc" or kind is complex and dtype.kind == "c"):
            return False
    return True


def stacked_unstack(g: Any, x: Any, axis: Any = 0, *, size: int) -> Any:
    """``unstack(g, x, axis)`` for the stack ``g`` of tangents of ``np.stack(x, axis)``: its
    slices along that axis of each tangent, a list of them for each list inside."""
    r = np.ndim(g) - 1
    if r < 1 or type(g) is not np.ndarray:
        return stacked(unstack(as_batch(g, size), x, axis), size)
    if axis != 0:
        g = np.moveaxis(g, int(axis) % r, 0)
    if isinstance(x, (list, tuple)):
        return [g[i] if type(item) is np.ndarray else stacked_unstack(g[i], item, size=size)
                for i, item in enumerate(x)]
    return stacked_unbroadcast(g, x, size=size)


def stacked_cumsum(x: Any, axis: Any = None, *, size: int) -> Any:
    """``np.cumsum(x, axis)`` for the stack ``x``: along each tangent's flattened entries, or its
    axis ``axis``."""
    if axis is None:
        return np.cumsum(np.reshape(x, (-1, size)), axis=0)
    return np.cumsum(x, axis=int(axis) % (np.ndim(x) - 1))


def stacked_trace(x: Any, *, size: int) -> Any:
    """``np.trace(x)`` for the stack ``x`` of matrices: each tangent's."""
    if np.ndim(x) != 3:
        raise _refuse("np.trace of a stack of other than matrices")
    return np.trace(x, axis1=0, axis2=1)


def stacked_diag(v: Any, k: Any = 0, *, size: int) -> Any:
    """``np.diag(v)`` for the stack ``v``: each tangent's vector on a diagonal, or each tangent's
    diagonal (``k`` 0 only)."""
    if k != 0 or np.ndim(v) not in (2, 3):
        raise _refuse("np.diag of this stack")
    if np.ndim(v) == 3:
        return np.moveaxis(np.diagonal(v, axis1=0, axis2=1), -1, 0).copy()
    n = v.shape[0]
    out = np.zeros((n, n, size), dtype=v.dtype)
    out[np.arange(n), np.arange(n)] = v
    return out


def stacked_expand_dims(x: Any, axis: Any, *, size: int) -> Any:
    """``np.expand_dims(x, axis)`` for the stack ``x``: the new axes among each tangent's, the
    batch axis kept last."""
    r = np.ndim(x) - 1
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
    out_rank = r + len(axes)
    return np.expand_dims(x, tuple(int(a) % out_rank for a in axes))


def stacked_tile(x: Any, reps: Any, *, size: int) -> Any:
    """``np.tile(x, reps)`` for the stack ``x``: each tangent tiled (made of as many axes as
    ``reps`` first, as numpy does), the batch axis not."""
    reps = (int(reps),) if np.ndim(reps) == 0 else tuple(int(n) for n in reps)
    r = np.ndim(x) - 1
    d = max(r, len(reps))
    x = np.reshape(x, (1,) * (d - r) + np.shape(x))
    return np.tile(x, (1,) * (d - len(reps)) + reps + (1,))


def stacked_repeat(x: Any, repeats: Any, axis: Any = None, *, size: int) -> Any:
    """``np.repeat(x, repeats, axis)`` for the stack ``x``: each tangent's entries (flattened
    where ``axis`` is ``None``) repeated."""
    if axis is None:
        return np.repeat(np.reshape(x, (-1, size)), repeats, axis=0)
    return np.repeat(x, repeats, axis=int(axis) % (np.ndim(x) - 1))


def stacked_solve(a: Any, b: Any, *, stacks: tuple[bool, ...], size: int) -> Any:
    """``np.linalg.solve(a, b)`` of a matrix ``a`` and the stack ``b``: one solve for every
    tangent's right-hand side (each tangent's columns side by side)."""
    if stacks != (False, True) or np.ndim(a) != 2 or np.ndim(b) not in (2, 3):
        raise _refuse("np.linalg.solve with this stack")
    return np.reshape(np.linalg.solve(a, np.reshape(b, (b.shape[0], -1))), np.shape(b))


def stacked_diff(x: Any, n: Any = 1, axis: Any = -1, *, size: int) -> Any:
    """``np.diff(x, n, axis)`` for the stack ``x``: along each tangent's axis."""
    return np.diff(x, n, axis=int(axis) % (np.ndim(x) - 1))


def stacked_extremum_vjp(g: Any, ans: Any, x: Any, axis: Any = None, keepdims: Any = False, *,
                         size: int) -> Any:
    """``extremum_vjp(g, ans, x, axis, keepdims)`` for the stack ``g``: each tangent's adjoint
    shared equally among the entries of the value ``x`` that tie for the extremum ``ans``."""
    hits = x == expand_reduced(ans, x, axis, keepdims)
    count = np.sum(hits, axis=axis, keepdims=True)
    share = hits / np.where(count == 0, np.nan, count)
    return stacked_expand_reduced(g, x, axis, keepdims, size=size) * share[..., None]


def stacked_sort_jvp(u: Any, x: Any, axis: Any = -1, *, size: int) -> Any:
    """``sort_jvp(u, x, axis)`` for the stack ``u``: each tangent taken in the order the sort put
    the value ``x`` in."""
    if axis is None:
        return np.reshape(u, (-1, size))[np.argsort(np.ravel(x), kind="stable")]
    order = np.argsort(x, axis=axis, kind="stable")[..., None]
    return np.take_along_axis(u, order, axis=int(axis) % np.ndim(x))


def stacked_repeat_vjp(g: Any, x: Any, repeats: Any, axis: Any = None, *, size: int) -> Any:
    """``repeat_vjp(g, x, repeats, axis)`` for the stack ``g``: each entry's copies summed, for
    every tangent."""
    shape = np.shape(x)
    if axis is None:
        entries = int(np.prod(shape, dtype=int))
        source = np.repeat(np.arange(entries), repeats)
        out = np.zeros((entries, size))
        np.add.at(out, source, np.reshape(g, (-1, size)))
        return np.reshape(out, (*shape, size))
    a = int(axis) % len(shape)
    source = np.repeat(np.arange(shape[a]), repeats)
    moved = np.moveaxis(g, a, 0)
    out = np.zeros((shape[a], *moved.shape[1:]))
    np.add.at(out, source, moved)
    return np.moveaxis(out, 0, a)


def as_batches(value: Any, tree: Any, size: int) -> Any:
    """``value``, the result of forward-mode code for stacks, with its stacks as ``Batch``es of
    ``size``: ``tree`` says where they are (``True``: all of it, ``False``: none, a tuple: part
    by part)."""
    if tree is True:
        return as_batch(value, size)
    if tree is False or value is None:
        return value
    return type(value)(as_batches(item, part, size)
                       for item, part in zip(value, tree, strict=True))
