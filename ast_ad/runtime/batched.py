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
import numbers
from collections.abc import Iterator
from typing import Any

import numpy as np

from ast_ad.core import registry
from ast_ad.runtime.arrays import zeros_like

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

