"""Lists, tuples and dicts in generated code: items, keys, sorting, concatenation, and their
adjoints."""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np

from ast_ad.runtime.adjoints import getitem_vjp
from ast_ad.runtime.arrays import add_adjoints, error_class, unsupported_at, zeros_like


def chosen(c: Any, x: Any, keep: Any) -> Any:
    """``x`` where ``np.where(c, ...)`` selects it (``keep``: where ``c`` holds, else where it does
    not), and ones elsewhere: what a branch of ``np.where`` computes from, so that it is finite
    where it is not selected and its derivative there is zero, not ``0 * inf`` (``selection``: the
    "double where", made automatic)."""
    one = np.ones_like(x)
    return np.where(c, x, one) if keep else np.where(c, one, x)


def first_best(keys: Any, which: Any) -> int:
    """The position of the first largest (``which="max"``) or smallest key: the item ``max(xs,
    key=f)`` or ``min(xs, key=f)`` gives, as Python compares the keys (no gradient: a position)."""
    if not len(keys):
        raise ValueError(f"{which}() iterable argument is empty")
    best = 0
    for k in range(1, len(keys)):
        if (keys[k] > keys[best]) if which == "max" else (keys[k] < keys[best]):
            best = k
    return best


def keys_of(d: Any, where: Any = None) -> Any:
    """The keys of the dict ``d`` (the members of a set), as a list: what a loop over ``d``,
    ``d.items()`` or ``d.keys()`` steps through (no gradient). Anything else is refused: a loop
    lowered over keys where the name holds a list would lose its items' gradients (``where``: the
    user's file and line, ``name.py:12``, for the message)."""
    if not isinstance(d, (Mapping, AbstractSet)):
        message = (
            f"a loop over the keys of a dict (or the members of a set) finds a {type(d).__name__} "
            "here: a name bound to a dict or set and to another kind of value is looped over; give "
            "each a name of its own"
        )
        raise unsupported_at(message, where)
    return list(d)


def list_item(xs: Any, index: Any, n: Any) -> Any:
    """``xs[index]`` of a list that grows later (``xs.append``): ``n`` is its length when it was
    read."""
    return xs[index]


def list_item_vjp(g: Any, xs: Any, index: Any, n: Any) -> Any:
    """The adjoint of the list as it was when read: ``n`` entries, the one read taking ``g``."""
    parts = [zeros_like(xs[k]) for k in range(n)]
    parts[index] = g
    return parts


def sorted_by(xs: Any, keys: Any, reverse: Any = False) -> Any:
    """``sorted(xs, key=f, reverse=r)`` given the keys ``[f(x) for x in xs]``: the same stable
    order."""
    order = sorted(range(len(keys)), key=keys.__getitem__, reverse=reverse)
    return [xs[i] for i in order]


def sorted_by_vjp(g: Any, xs: Any, keys: Any, reverse: Any = False) -> Any:
    """Each sorted item's adjoint goes back to the place it came from."""
    order = sorted(range(len(keys)), key=keys.__getitem__, reverse=reverse)
    parts: list[Any] = [None] * len(order)
    for position, i in enumerate(order):
        parts[i] = g[position]
    return (
        parts
        if isinstance(xs, list)
        else tuple(parts)
        if isinstance(xs, tuple)
        else np.stack(parts)
    )


def concat(a: Any, b: Any) -> Any:
    """``a + b`` for lists or tuples: joined end to end (a list plus an array is numpy's sum: its
    gradient is refused, in ``concat_vjp_a``)."""
    return a + b


def _refuse_sequence_arithmetic() -> Any:
    error = error_class("MissingRuleError", TypeError)
    raise error(
        "this + or * mixes a list with an array or a number, which numpy computes element by "
        "element: write np.asarray([...]) for the list, so it is arithmetic, or join lists with "
        "lists"
    )


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
    """``a * n`` (or ``n * a``) for a list or tuple: ``n`` copies end to end (a list times an array
    is numpy's product: its gradient is refused)."""
    return a * n


def repeat_seq_vjp(g: Any, a: Any, n: Any) -> Any:
    """Every copy's adjoint, added element by element."""
    if not isinstance(a, (list, tuple)) or not isinstance(n, int):
        _refuse_sequence_arithmetic()
    width = len(a)
    # a list, item by item: in the language (reverse mode reads it)
    total = [zeros_like(item) for item in a]
    for k in range(n):
        for i in range(width):
            total[i] = add_adjoints(total[i], g[k * width + i])
    return total if isinstance(a, list) else tuple(total)


def chosen_vjp(k: Any, g: Any, ans: Any, xs: Any) -> Any:
    """Adjoint of argument ``k`` of ``min``/``max``: the argument chosen (the first, at ties) takes
    ``g``.

    ``min(a, b)`` returns one of its arguments itself, so identity finds it; ``min(xs)`` an item of
    ``xs``.
    """
    items = list(xs[0]) if len(xs) == 1 else list(xs)
    chosen = next((i for i, item in enumerate(items) if item is ans), None)
    if chosen is None:
        chosen = next(i for i, item in enumerate(items) if item == ans)
    if len(xs) == 1:
        parts = [g if i == chosen else zeros_like(item) for i, item in enumerate(items)]
        return (
            parts
            if isinstance(xs[0], list)
            else tuple(parts)
            if isinstance(xs[0], tuple)
            else np.stack(parts)
        )
    return g if k == chosen else zeros_like(xs[k])


def part(g: Any, k: Any) -> Any:
    """Item ``k`` of a tuple or list adjoint, zero where nothing flowed into it or into the whole
    (``None``, or the float zero that is its tangent in forward mode)."""
    item = None if g is None or (isinstance(g, float) and g == 0.0) else g[k]
    return 0.0 if item is None else item


def part_vjp(w: Any, g: Any, k: Any) -> Any:
    """Adjoint of ``g`` in ``part(g, k)``: ``w`` as item ``k`` of zeros like ``g``; where ``g``
    stands for a zero container (``None``, or the float zero), nothing reads ``w``, and its adjoint
    is the float zero (which adds to any adjoint, as ``None`` does not)."""
    if g is None or (isinstance(g, float) and g == 0.0):
        return 0.0
    return getitem_vjp(w, g, k)


def absent(owner: Any, name: Any) -> Any:
    """``module.name`` where the module has no such attribute: Python's AttributeError, when the
    line runs."""
    raise AttributeError(f"{owner} has no attribute {name!r}")


def field(obj: Any, name: Any) -> Any:
    """``obj.name``: a namedtuple's field, or any other attribute (which carries a gradient only in
    a namedtuple, or a dict whose keys are its attributes: scipy's result objects). A plain dict is
    such a result's tangent, its parts added (``add_adjoints``): its key."""
    if type(obj) is dict:
        return obj[name]
    return getattr(obj, name)


def field_vjp(g: Any, obj: Any, name: Any) -> Any:
    """Adjoint of ``obj`` in ``obj.name``: the field's slot of a namedtuple takes ``g``; so does the
    key of a dict whose keys are its attributes (scipy's ``OptimizeResult``: ``sol.x``)."""
    if isinstance(obj, Mapping) and not isinstance(obj, tuple) and name in obj \
            and getattr(obj, name, None) is obj[name]:
        return {key: g if key == name else None for key in obj}
    fields = getattr(type(obj), "_fields", None)
    if not isinstance(obj, tuple) or fields is None or name not in fields:
        error = error_class("MissingRuleError", TypeError)
        raise error(
            f"ast_ad cannot differentiate the attribute .{name} of a {type(obj).__name__}: only "
            "numpy "
            "arrays' attributes and namedtuples' fields carry gradients; pass the value itself as "
            "an "
            "argument (or use a namedtuple, a dict or a tuple)"
        )
    return tuple(
        g if field == name else zeros_like(item) for field, item in zip(fields, obj, strict=True)
    )


def is_container(x: Any) -> Any:
    """Whether ``x`` is a list, tuple or dict: its shallow copy holds the same objects
    (``aliasing.Memory``)."""
    return isinstance(x, (list, tuple, dict))


def field_position(obj: Any, name: Any) -> Any:
    """The position of the field ``name`` in the namedtuple ``obj``."""
    return type(obj)._fields.index(name)
