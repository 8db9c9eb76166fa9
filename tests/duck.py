"""A duck array: numpy underneath, reached only through numpy's dispatch protocols (NEP 13 and NEP
18).

It refuses conversion to numpy (``__array__`` raises), so any code that calls ``np.asarray`` on it,
or builds a numpy array and writes it in, fails at that line; that is how the tests find each helper
that would move a dask or CuPy array to numpy. Python's own conversions (``float``, ``bool``,
``int``, an index) work, as they do on dask arrays (which compute), and are counted, so a test can
check that a gradient converts no more than the function itself does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin


class Refused(TypeError):
    """Something asked a duck array to become a numpy array."""


class Duck(NDArrayOperatorsMixin):
    # Python conversions (float, int, bool, index) of any duck array, since the last reset
    conversions = 0

    __slots__ = ("a",)

    def __init__(self, a: Any) -> None:
        self.a = np.asarray(a)

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise Refused(
            "a duck array was converted to numpy (np.asarray or a write into a numpy array)"
        )

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        out = kwargs.get("out")
        result = getattr(ufunc, method)(*unwrap(inputs), **unwrap(kwargs))
        if out is not None:
            return out[0] if len(out) == 1 else out
        return wrap(result)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return wrap(func(*unwrap(args), **unwrap(kwargs)))

    shape = property(lambda self: self.a.shape)
    dtype = property(lambda self: self.a.dtype)
    ndim = property(lambda self: self.a.ndim)
    size = property(lambda self: self.a.size)
    T = property(lambda self: Duck(self.a.T))
    flags = property(lambda self: self.a.flags)

    def __getattr__(self, name: str) -> Any:
        # numpy's other ways in (__array_interface__, __array_struct__) stay closed
        if name.startswith("__"):
            raise AttributeError(name)
        attr = getattr(self.a, name)
        if not callable(attr):
            return wrap(attr)
        return lambda *args, **kwargs: wrap(attr(*unwrap(args), **unwrap(kwargs)))

    def __getitem__(self, key: Any) -> Any:
        return wrap(self.a[unwrap(key)])

    def __setitem__(self, key: Any, value: Any) -> None:
        self.a[unwrap(key)] = unwrap(value)

    def __len__(self) -> int:
        return len(self.a)

    def __iter__(self) -> Any:
        return (wrap(row) for row in self.a)

    def __float__(self) -> float:
        Duck.conversions += 1
        return float(self.a)

    def __int__(self) -> int:
        Duck.conversions += 1
        return int(self.a)

    def __index__(self) -> int:
        Duck.conversions += 1
        return self.a.__index__()

    def __bool__(self) -> bool:
        Duck.conversions += 1
        return bool(self.a)

    def __repr__(self) -> str:
        return f"Duck({self.a!r})"

    def __copy__(self) -> Duck:
        return Duck(self.a.copy())

    def __deepcopy__(self, memo: Any) -> Duck:
        return Duck(self.a.copy())


def wrap(value: Any) -> Any:
    """numpy arrays and numpy scalars as duck arrays (containers item by item); anything else as it
    is."""
    if isinstance(value, (np.ndarray, np.generic)):
        return Duck(value)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(wrap(v) for v in value)
    if isinstance(value, list):
        return [wrap(v) for v in value]
    if isinstance(value, dict):
        return {k: wrap(v) for k, v in value.items()}
    return value


def unwrap(value: Any) -> Any:
    if isinstance(value, Duck):
        return value.a
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(unwrap(v) for v in value)
    if isinstance(value, list):
        return [unwrap(v) for v in value]
    if isinstance(value, dict):
        return {k: unwrap(v) for k, v in value.items()}
    if isinstance(value, slice):
        return slice(unwrap(value.start), unwrap(value.stop), unwrap(value.step))
    return value


def ducks(value: Any) -> Any:
    """``value`` with every float or complex array (containers item by item) a duck array; floats
    stay floats."""
    # data; integer indices stay numpy's
    if isinstance(value, np.ndarray) and value.dtype.kind in "fc":
        return Duck(value.copy())
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(ducks(v) for v in value)
    if isinstance(value, list):
        return [ducks(v) for v in value]
    if isinstance(value, dict):
        return {k: ducks(v) for k, v in value.items()}
    return value
