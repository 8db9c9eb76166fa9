"""What every transformation checks and does with its arguments: shape labels, argnums, which values
are differentiable, and an adjoint given its argument's type (the bottom of the API layer)."""

from __future__ import annotations

import functools
import inspect
import numbers
import types
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from ast_ad.analysis.complexness import holds_complex
from ast_ad.analysis.kinds import COMPLEX_NUMBER, MAPPING, NARROW_NUMBER, SET, axis_id, labelled
from ast_ad.errors import (
    ArgnumsError,
    ASTADError,
    NonDifferentiableArgumentError,
    SourceUnavailableError,
)
from ast_ad.frontend import parse
from ast_ad.frontend.lower_exprs import SUBCLASS_HINT, array_subclass
from ast_ad.runtime import broadcast_like, is_array, unbroadcast

# Argument types known to be scalars; the generated code is specialized on them.
SCALAR_TYPES = frozenset({float, int, np.float64, np.float32, np.float16, np.int64, np.int32})


PLAIN_FLOATS = frozenset({float, np.float64})
# numbers narrower than 64 bits, whose products round more (``kinds.NARROW_NUMBER``)
NARROW_TYPES = frozenset({np.float32, np.float16})
COMPLEX_SCALARS = frozenset({complex, np.complex128, np.complex64})


# what ``checkpoints=`` takes: a number of snapshots, "auto", or None (no checkpointing)
Checkpoints = int | Literal["auto"] | None


def check_checkpoints(checkpoints: Any) -> Checkpoints:
    """``checkpoints=``, checked: ``None``, a positive integer, or ``"auto"``."""
    if checkpoints is None:
        return None
    if isinstance(checkpoints, str) and checkpoints == "auto":
        return "auto"
    if (
        isinstance(checkpoints, bool)
        or not isinstance(checkpoints, numbers.Integral)
        or checkpoints < 1
    ):
        raise ASTADError(
            f"checkpoints={checkpoints!r}: give the number of snapshots each checkpointed loop may "
            "keep, a positive integer (checkpoints=10), \"auto\" (as many as fit in "
            "ast_ad.runtime.revolve.AUTO_BYTES, chosen when each loop starts), or leave "
            "checkpoints out"
        )
    return int(checkpoints)


CONTAINER = -2  # the shape label of a tuple or list argument (a dict's: ``kinds.MAPPING``)


def shape_labels(args: tuple[Any, ...]) -> tuple[int, ...]:
    """``-1`` for each scalar argument, ``-2`` for tuples and lists, ``kinds.MAPPING`` for dicts
    and ``kinds.SET`` for sets, the argument's position for anything else (with a numpy array's
    number of axes and kind, and which axes of the arrays have equal lengths: ``kinds.labelled``).
    Numpy arrays of one shape and kind share the label of the first of them: equal labels say equal
    shapes (``activity.shape_classes``), so that arithmetic between them needs no ``unbroadcast``;
    a call with other shapes, or other equal lengths, has other labels, and code made for them."""
    labels = []
    first: dict[tuple[Any, ...], int] = {}  # an array's shape and kind -> the first such argument
    lengths: dict[int, int] = {}  # an axis length -> the first axis of the arrays with it
    for k, a in enumerate(args):
        kind = type(a)
        # the most common arguments first: a numpy array of numbers, a 64-bit number
        if kind is np.ndarray and a.dtype.kind in "biufc":
            axes = tuple(lengths.setdefault(n, axis_id(k, i)) for i, n in enumerate(a.shape))
            labels.append(labelled(first.setdefault((a.shape, a.dtype.kind), k), a, axes))
            continue
        if kind is float or kind is np.float64 or kind is int:
            labels.append(-1)
            continue
        if kind in COMPLEX_SCALARS:
            labels.append(COMPLEX_NUMBER)
            continue
        if isinstance(a, (tuple, list, dict)) and holds_complex(a):
            raise NonDifferentiableArgumentError(
                f"argument {k} is a {type(a).__name__} holding complex values, which ast_ad does "
                "not follow into containers yet: pass each complex array as an argument of its own"
            )
        same = (
            first.setdefault((a.shape, a.dtype.kind), k)
            if type(a) is np.ndarray and a.dtype.kind in "biufc"
            else k
        )
        labels.append(
            NARROW_NUMBER
            if type(a) in NARROW_TYPES
            else -1
            if type(a) in SCALAR_TYPES
            else MAPPING
            if isinstance(a, dict)
            else CONTAINER
            if isinstance(a, (tuple, list))
            else SET
            if isinstance(a, (set, frozenset))
            else labelled(same, a)
        )
        if type(a) is not np.ndarray and array_subclass(a):
            raise NonDifferentiableArgumentError(
                f"argument {k} is a {type(a).__module__}.{type(a).__name__}: {SUBCLASS_HINT}"
            )
    return tuple(labels)


def _distinct(grad: Any, others: list[Any]) -> Any:
    """``grad``, copied if it is the very array given for another argument: each gets its own."""
    if type(grad) is np.ndarray:
        for other in others:
            if other is grad:
                return grad.copy()
    return grad


def _unbind(fun: Any) -> tuple[Callable[..., Any], Any]:
    if getattr(fun, "composable", False):
        return fun, None
    if isinstance(fun, types.MethodType):
        return fun.__func__, fun.__self__
    if not callable(fun):
        raise ASTADError(f"grad needs a function, got {type(fun).__name__} {fun!r}")
    # its function with the bound arguments, as a def with source
    if isinstance(fun, functools.partial):
        return parse.partial_function(fun), None
    if inspect.isfunction(fun) or parse.wrapped_function(fun) is not None:
        return fun, None
    call = inspect.getattr_static(type(fun), "__call__", None)
    # an instance of the user's own class (a class-based decorator among them):
    if inspect.isfunction(call):
        return call, fun  # its ``__call__``, with the instance as ``self``, is what Python runs
    raise SourceUnavailableError(
        f"{fun!r} is not a Python function with source; wrap it in a def, "
        "or register a rule for it with ast_ad.extend.defvjp")


def _check_argnums(argnums: Any) -> tuple[int, ...]:
    items = (argnums,) if isinstance(argnums, numbers.Integral) else argnums
    if (
        not isinstance(items, tuple)
        or not items
        or not all(isinstance(k, numbers.Integral) for k in items)
        or isinstance(argnums, bool)
    ):
        raise ArgnumsError(f"argnums must be an int or a non-empty tuple of ints, not {argnums!r}")
    if len(set(items)) != len(items):
        raise ArgnumsError(f"argnums {argnums!r} repeats an argument")
    return tuple(int(k) for k in items)


def _check_differentiable(value: Any, name: str) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _check_differentiable(item, f"{name}[{key!r}]")
        return
    if isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            _check_differentiable(item, f"{name}[{i}]")
        return
    if isinstance(value, (bool, np.bool_)):
        kind = "a bool"
    # as an integer array is: its derivative is not defined
    elif isinstance(value, (numbers.Integral, np.integer)):
        kind = f"an integer ({type(value).__name__} {value!r})"
    elif isinstance(value, (float, np.floating, complex, np.complexfloating)):
        return
    elif is_array(value) and value.dtype.kind in "fc":
        return
    elif is_array(value) and value.dtype.kind in "iu":
        kind = f"an integer (an array of dtype {value.dtype})"
    elif is_array(value):
        kind = f"an array of dtype {value.dtype}"
    else:
        kind = f"a {type(value).__name__}"
    raise NonDifferentiableArgumentError(
        f"cannot differentiate with respect to {name!r}, which is {kind}: pass a float (3.0, not "
        "3), an array "
        "of floats, or a tuple, list or dict of them (for example np.asarray(x, dtype=float)), or "
        "leave it out "
        f"of argnums"
    )


def _differentiable(value: Any) -> bool:
    """Whether ``value`` can carry a derivative: floats, float arrays, and containers holding
    some."""
    if isinstance(value, dict):
        return any(_differentiable(v) for v in value.values())
    if isinstance(value, (tuple, list)):
        return any(_differentiable(v) for v in value)
    if isinstance(value, (bool, np.bool_, numbers.Integral)):
        return False
    if is_array(value):
        return bool(value.dtype.kind in "fc")
    return isinstance(value, numbers.Complex)


def _is_scalar(out: Any) -> bool:
    if is_array(out):  # a 0-d array of any library; its value is not needed (a dask one stays lazy)
        return out.ndim == 0 and out.dtype.kind in "biuf"
    return np.ndim(out) == 0 and isinstance(np.asarray(out).item(), numbers.Real)


def _like(bar: Any, x: Any) -> Any:
    """The gradient ``bar`` given the type, shape and dtype of the argument ``x`` (containers: leaf
    by leaf)."""
    if type(x) is float and type(bar) in PLAIN_FLOATS:
        return float(bar)
    if type(x) is np.ndarray and type(bar) is np.ndarray and bar.shape == x.shape \
            and bar.dtype == x.dtype and bar.flags.owndata and bar.flags.writeable:
        return bar  # (what the path for numpy arrays below gives, first: the common case)
    if type(x) is np.float64 and type(bar) in PLAIN_FLOATS:
        return np.float64(bar)  # (and for numpy's floats)
    if isinstance(x, dict):
        return {key: _like(None if bar is None else bar[key], item) for key, item in x.items()}
    if isinstance(x, (tuple, list)):
        parts = [_like(None if bar is None else bar[i], item) for i, item in enumerate(x)]
        return type(x)(parts) if not hasattr(x, "_fields") else type(x)(*parts)
    if bar is None:
        bar = 0.0
    bar = unbroadcast(bar, x)
    if np.iscomplexobj(bar) and not np.iscomplexobj(x):
        raise ASTADError(
            "a complex value reached the gradient of a real argument: ast_ad could not tell that a "
            "value was complex where it was computed (from a library function, an object's "
            "field, or a dtype not known before the call), so its rules were those of real "
            "numbers; make the complex value with 1j, complex(...), np.fft or a complex dtype "
            "written in the function, or pass it as an argument"
        )
    if isinstance(x, (complex, np.complexfloating)):
        return type(x)(bar)
    foreign_x, foreign_bar = is_array(x) and not isinstance(x, np.ndarray), is_array(bar) and \
        not isinstance(bar, np.ndarray)
    # arrays of another library (dask, CuPy): the gradient stays of that type, lazy
    if foreign_x or foreign_bar:
        # a float, a numpy array, a part
        if foreign_x and (type(bar) is not type(x) or bar.shape != x.shape):
            bar = broadcast_like(bar, x, x.shape)  # of x's type and layout (a dask array's chunks)
        elif bar.shape != np.shape(x):
            bar = np.broadcast_to(bar, np.shape(x))
        dtype = x.dtype if foreign_x or isinstance(x, np.ndarray) else np.result_type(x)
        if bar.dtype != dtype:
            bar = bar.astype(dtype)
        chunks = getattr(x, "chunks", None)  # a dask array's gradient has its chunks
        if (
            chunks is not None
            and hasattr(bar, "rechunk")
            and getattr(bar, "chunks", chunks) != chunks
        ):
            bar = bar.rechunk(chunks)
        return bar
    if isinstance(x, np.ndarray):
        if (
            type(bar) is np.ndarray
            and bar.shape == x.shape
            and bar.dtype == x.dtype
            and bar.flags.owndata
            and bar.flags.writeable
        ):
            return bar  # a new array the gradient computed: no one else holds it
        return np.array(np.broadcast_to(bar, x.shape), dtype=x.dtype)
    if isinstance(x, np.floating):
        return type(x)(bar)
    return float(bar)
