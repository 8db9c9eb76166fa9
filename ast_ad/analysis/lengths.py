"""Lengths of axes as expressions of one length the code does not know: what ``x[1:]``, ``y[:-1]``
and ``np.concatenate([x[:1], x[1:] * y[:-1]])`` have, given that ``x`` and ``y`` have ``n``
entries. Shape classes (``activity.LengthClasses``) are tuples of such lengths, so that two values
whose lengths are the same expression have one class: the product of the two slices needs no
``unbroadcast``, and the join has ``x``'s shape, whatever ``n`` is.

>>> n = 5  # (an axis id: ``kinds.axis_id``)
>>> first, rest = sliced(n, slice(None, 1)), sliced(n, slice(1, None))
>>> rest == sliced(n, slice(None, -1))  # n - 1 entries each, 0 for n = 0
True
>>> summed([first, rest]) == n  # 1 + (n - 1) for n >= 1, and 0 + 0 for n = 0
True

A length is a symbol (an axis id, or ``("of", class, axis, rank)``: the length of an axis of
the values of a shape class), or ``("f", symbol, values)``: a function of the symbol's length,
given by its values at 0, 1, ..., ``_POINTS - 1``. Every function made here is linear from
``_POINTS - 2`` on (each operation checks that it keeps it so, and gives ``None`` where it cannot
tell), so two functions equal at those points are equal for every length: the table is the
function, and equal expressions are equal tuples. The identity is written as its symbol.
"""

from __future__ import annotations

from typing import Any

# the lengths at which a function is kept: it is linear from ``_POINTS - 2`` on
_POINTS = 40
_IDENTITY = tuple(range(_POINTS))

Length = Any  # a symbol (an int, or a tuple starting with "of") or ("f", symbol, values)


def _table(length: Length) -> tuple[Any, tuple[int, ...]]:
    """The symbol of ``length`` and its values at 0 .. ``_POINTS - 1``."""
    if isinstance(length, tuple) and length[0] == "f":
        return length[1], length[2]
    return length, _IDENTITY


def _made(symbol: Any, values: tuple[int, ...]) -> Length:
    return symbol if values == _IDENTITY else ("f", symbol, values)


def at(length: Length, n: int) -> int:
    """The value of ``length`` where its symbol's axis has ``n`` entries."""
    values = _table(length)[1]
    if n < _POINTS:
        return values[n]
    return values[-1] + (n - _POINTS + 1) * (values[-1] - values[-2])


def sliced(length: Length, index: slice) -> Length | None:
    """The length of an axis of ``length`` entries taken by ``index`` (a slice of integers or
    ``None``, step 1), or ``None``. Beyond the lengths at which ``index``'s bounds clamp (at most
    twice the largest bound), the slice's length is the axis' minus a constant, or a constant: where
    the axis' length grows past that within the table, the result is linear beyond it too."""
    if index.step not in (None, 1):
        return None
    bounds = [b for b in (index.start, index.stop) if b is not None]
    if any(type(b) is not int for b in bounds):
        return None
    symbol, values = _table(length)
    slope = values[-1] - values[-2]
    if slope < 0 or slope > 0 and values[-2] < 2 * max((abs(b) for b in bounds), default=0):
        return None
    return _made(symbol, tuple(len(range(*index.indices(v))) for v in values))


def summed(lengths: list[Length]) -> Length | None:
    """The length of the axes of ``lengths`` joined (``np.concatenate``), where all are functions
    of one symbol; else ``None``."""
    tables = [_table(length) for length in lengths]
    if not tables or len({symbol for symbol, _ in tables}) != 1:
        return None
    return _made(tables[0][0], tuple(map(sum, zip(*(values for _, values in tables),
                                                 strict=True))))


def indexed(lengths: tuple[Length, ...], index: Any) -> tuple[Length, ...] | None:
    """The lengths of the axes of ``array[index]``, where ``array``'s are ``lengths`` and
    ``index`` is a basic index written in the code (integers and slices of integers, at most one
    per axis): an integer takes its axis away, a slice cuts it; else ``None``."""
    parts = index if isinstance(index, tuple) else (index,)
    if len(parts) > len(lengths):
        return None
    out: list[Length] = []
    for length, part in zip(lengths, parts, strict=False):
        if type(part) is int:
            continue
        if not isinstance(part, slice):
            return None
        cut = sliced(length, part)
        if cut is None:
            return None
        out.append(cut)
    return (*out, *lengths[len(parts):])
