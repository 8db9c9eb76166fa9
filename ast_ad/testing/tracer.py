"""A small runtime tracer, autograd-style: the oracle the source transformer is checked against.

>>> import math
>>> def f(x1, x2):
...     return math.log(x1) + x1 * x2 - math.sin(x2)
>>> tuple(round(g, 6) for g in grad(f, argnums=(0, 1))(2.0, 3.0))
(3.5, 2.989992)

While the function runs, each differentiated value is a ``Box`` and each
primitive applied to one records a ``Node`` with a closure for each argument's
rule. The backward pass walks the nodes in reverse topological order, summing
contributions. The function runs unchanged, on a copy whose globals and
closure see traced primitives, so it shares only the rule registry with the
transformer: a transformation bug cannot hide in both.

Python's memory is followed as Python has it: a write ``y[i] = v``, ``y += d`` or ``y.fill(v)``
changes the box itself (every name and container slot holding it sees it); a result that shares
memory with its argument (``y[1:]``, ``y.T``, ``y.reshape(...)``) is noted as a view of it, with
where each of its entries lies in the base, read off numpy's own layout (``_positions``), so that
a write through a view puts its entries back into the base, and a write into a base reads its
views again (``_wrote``); a number never changes in place. Each step is a recorded primitive
(``assign_item``, ``reshape``, the view's own call), so the derivative follows the writes.

Forward mode (``jvp``) carries a ``Dual`` instead: a value and its tangent,
each primitive applying its forward rule as it runs. Transformations nest:
each call of ``grad`` or ``jvp`` is a *level*, and a box of one level may hold a
box of an outer one (``Box(Dual(x))`` in ``jvp(grad(f))``). A primitive peels the
innermost level, runs on what is inside (recording the outer levels as it
goes), and runs its rules the same way, so rules are differentiated again.

>>> round(jvp(grad(lambda x: x * x * x), (2.0,), (1.0,))[1], 12)  # d2/dx2 x^3 = 6 x
12.0
"""

from __future__ import annotations

import builtins
import inspect
import itertools
import numbers
import operator
import types
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ast_ad import runtime
from ast_ad.core import registry
from ast_ad.errors import MissingRuleError
from ast_ad.runtime import add_adjoints, assign_item, unbroadcast


class Node:
    """A recorded primitive application: its value and, per boxed argument, (parent node, vjp)."""

    def __init__(self, value: Any, parents: list[tuple[Node, Callable[[Any], Any]]]):
        self.value, self.parents = value, parents


_levels = itertools.count(1)


def new_level() -> int:
    """A new trace level, deeper than every one before it."""
    return next(_levels)


class Box:
    """A differentiated value while the function runs (reverse mode), at one trace ``level``.

    Level 0 is a constant (an array a constructor made, so that item assignment into it is traced).
    """

    __array_ufunc__ = None  # numpy defers ``array * box`` to Box.__rmul__

    def __init__(self, value: Any, node: Node, level: int = 0):
        self.value, self.node, self.level = value, node, level

    shape = property(lambda self: np.shape(self.value))
    ndim = property(lambda self: np.ndim(self.value))
    dtype = property(lambda self: np.asarray(self.value).dtype)
    T = property(lambda self: apply(np.transpose, self))
    mT = property(lambda self: apply(runtime.T, self))
    real = property(lambda self: apply(np.real, self))
    imag = property(lambda self: apply(np.imag, self))
    size = property(lambda self: np.size(self.value))
    reshape = lambda self, *shape: apply(  # noqa: E731
        np.reshape, self, shape[0] if len(shape) == 1 else shape)
    transpose = lambda self, *axes: apply(  # noqa: E731
        np.transpose, self, *([axes[0]] if len(axes) == 1 else [axes] if axes else []))
    __len__ = lambda self: len(self.value)  # noqa: E731
    __bool__ = lambda self: bool(self.value)  # noqa: E731
    def __repr__(self) -> str:
        return f"Box({self.value!r})"

    def __getattr__(self, name: str) -> Any:
        """Array methods: ``x.max(axis=0)`` is ``np.max(x, axis=0)``; one that changes the array
        in place (``x.fill(v)``, ``x.sort()``) is its registered twin's value written into it."""
        twin = registry.in_place(getattr(np.ndarray, name, None))
        if twin is not None and isinstance(_deepest(self), np.ndarray):
            return lambda *args, **kwargs: _changed(self, twin, *args, **kwargs)
        method: Callable[..., Any] | None = registry.method(name)
        if method is not None:
            return lambda *args, **kwargs: apply(method, self, *args, **kwargs)
        if not isinstance(self.value, np.ndarray) and hasattr(self.value, name):
            # a field of a result object (scipy's ``sol.x``), as the lowering reads it
            return apply(runtime.field, self, name)
        raise AttributeError(f"the tracer does not know the array attribute {name!r}")

    def __setitem__(self, index: Any, value: Any) -> None:
        """``y[i] = v`` on a traced array: the box now holds a new array, recorded like any
        primitive; the arrays it is a view of, and their other views, take the write too
        (``_wrote``)."""
        _changed(self, assign_item, index, value)

    def __float__(self) -> float:
        raise TypeError("the tracer cannot follow a differentiated value into a plain float here")

    def __int__(self) -> int:
        # (numpy's write of a value into integers, ``int(x)``: truncated, no derivative to follow)
        return int(self.value)

    def __iter__(self) -> Iterator[Any]:
        # each row read when the loop steps to it, as numpy's iterator does: a write into the
        # array during the loop is seen by the steps after it
        for i in range(len(self.value)):
            yield operator.getitem(self, i)


class Dual(Box):
    """A value and its tangent while the function runs (forward mode), at one trace ``level``."""

    def __init__(self, value: Any, tangent: Any, level: int):
        self.value, self.tangent, self.level = value, tangent, level

    def __repr__(self) -> str:
        return f"Dual({self.value!r}, {self.tangent!r})"


def _binary(fn: Callable[..., Any]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    return (lambda self, other: apply(fn, self, other)), (
        lambda self, other: apply(fn, other, self)
    )


_OPERATORS: list[tuple[str, Callable[..., Any]]] = [
    ("add", operator.add),
    ("sub", operator.sub),
    ("mul", operator.mul),
    ("truediv", operator.truediv),
    ("pow", operator.pow),
    ("matmul", operator.matmul),
    ("mod", operator.mod),
    ("divmod", builtins.divmod),
]
_UNARY: list[tuple[str, Callable[..., Any]]] = [
    ("neg", operator.neg),
    ("pos", operator.pos),
    ("abs", operator.abs),
]
_COMPARISONS: list[tuple[str, Callable[..., Any]]] = [
    ("lt", operator.lt),
    ("le", operator.le),
    ("gt", operator.gt),
    ("ge", operator.ge),
    ("eq", operator.eq),
    ("ne", operator.ne),
    ("getitem", operator.getitem),
]
for _name, _fn in _OPERATORS:
    _left, _reflected = _binary(_fn)
    setattr(Box, f"__{_name}__", _left)
    setattr(Box, f"__r{_name}__", _reflected)
for _name, _fn in _UNARY:
    setattr(Box, f"__{_name}__", lambda self, fn=_fn: apply(fn, self))
for _name, _fn in _COMPARISONS:
    setattr(Box, f"__{_name}__", lambda self, other, fn=_fn: apply(fn, self, other))
setattr(Box, "__hash__", object.__hash__)  # noqa: B010 -- after __eq__ is set, which would unset it


def _in_place(fn: Callable[..., Any], name: str) -> Callable[[Box, Any], Any]:
    """``y += v`` and the like: on an array, a write into the very object (every name for it, the
    arrays it is a view of and their views see it), its dtype kept as numpy keeps it; on a number,
    a new value for this name alone (numbers do not change in place)."""
    def operate(self: Box, other: Any) -> Any:
        mine = _deepest(self)
        if not isinstance(mine, np.ndarray):
            return apply(fn, self, other)
        _writable(self)
        trial = mine.copy()
        getattr(operator, f"__i{name}__")(trial, _deepest(other))  # numpy's own casting checks
        new = apply(fn, self, other)
        if np.shape(_deepest(new)) != mine.shape:
            raise ValueError(f"non-broadcastable output operand with shape {mine.shape}")
        _replace(self, new)
        _wrote(self)
        return self
    return operate


for _name, _fn in _OPERATORS[:7]:  # (every one but divmod, which has no in-place form)
    setattr(Box, f"__i{_name}__", _in_place(_fn, _name))


def _changed(box: Box, twin: Any, *args: Any, **kwargs: Any) -> None:
    """A call that changes ``box``'s array in place (``registry.def_in_place``): its value is
    ``twin(box, *args)``, written into the very array, as a write is."""
    _writable(box)
    _replace(box, apply(twin, box, *args, **kwargs))
    _wrote(box)


class InPlaceView:
    """A function that changes its first argument in place (``np.copyto``), or a ufunc with such
    a method (``np.add.at``), as a traced function sees it."""

    def __init__(self, fn: Any, copies: dict[Any, Any]):
        self.fn, self.copies = fn, copies

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        twin = registry.in_place(self.fn)
        if twin is not None and args and isinstance(args[0], Box):
            return _changed(args[0], twin, *args[1:], **kwargs)
        return apply(self.fn, *args, **kwargs) if registry.lookup(self.fn) is not None \
            else self.fn(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.fn, name)
        if registry.in_place(method) is not None:
            return InPlaceView(method, self.copies)
        return view(method, self.copies)


def _deepest(value: Any) -> Any:
    """The plain value inside ``value``'s boxes, at every level."""
    while isinstance(value, Box):
        value = value.value
    return value


def _writable(box: Box) -> None:
    """Raise as numpy does for a write into a read-only array (``np.broadcast_to``'s view)."""
    value = _deepest(box)
    if isinstance(value, np.ndarray) and not value.flags.writeable:
        raise ValueError("assignment destination is read-only")


def _replace(box: Box, new: Any) -> None:
    """``box`` (the object every name for it holds) now stands for ``new``'s value and node; what
    it is a view of, and its views, it keeps."""
    if not isinstance(new, (Box, Dual)):
        new = Box(new, Node(new, []))
    box.__class__ = type(new)
    box.__dict__.update({k: v for k, v in new.__dict__.items() if k not in _VIEW_FIELDS})


_VIEW_FIELDS = ("view_of", "views")


def _note_view(ans: Box, base: Box, fn: Any, rest: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Note ``ans`` (``fn(base, *rest)``) as a view of ``base`` where numpy made it one (its array
    shares memory with the base's), with the flat position in the base of each of its entries
    (``_positions``), or ``None`` where its entries are not the base's (``np.real`` of a complex
    array)."""
    mine, theirs = _deepest(ans), _deepest(base)
    if not (isinstance(mine, np.ndarray) and isinstance(theirs, np.ndarray) and mine.size
            and np.shares_memory(mine, theirs)):
        return
    where: Any = (
        _positions(mine, theirs) if mine.dtype == theirs.dtype
        # the real or imaginary parts of a complex array of 128 bits, in place
        else fn.__name__ if fn in (np.real, np.imag) and theirs.dtype == np.complex128
        and mine.shape == theirs.shape
        else None
    )
    ans.__dict__["view_of"] = (base, fn, rest, kwargs, where)
    base.__dict__.setdefault("views", []).append(weakref.ref(ans))


def _addresses(a: np.ndarray) -> Any:
    """The address in memory of each entry of ``a``, in ``a``'s shape."""
    start = a.__array_interface__["data"][0]
    return start + sum((axis * stride for axis, stride in zip(np.indices(a.shape), a.strides,
                                                              strict=True)),
                       np.zeros(a.shape, dtype=np.int64))


def _positions(view: np.ndarray, base: np.ndarray) -> Any:
    """The flat position in ``base`` of each entry of ``view`` (of its dtype), read off where each
    lies in memory, as numpy lays them out; ``None`` where an entry of the view is not an entry of
    the base."""
    mine, theirs = _addresses(view), np.ravel(_addresses(base))
    order = np.argsort(theirs, kind="stable")
    found = np.searchsorted(theirs, mine, sorter=order)
    found = np.minimum(found, theirs.size - 1)
    where = order[found]
    return where if np.array_equal(theirs[where], mine) else None


def _wrote(box: Box) -> None:
    """After a write into ``box``: each array it is a view of takes the view's entries back at
    their positions, up to the array that is no view, and then every view of that array (and of
    its views) is read again from it, as numpy's shared memory would show them."""
    root = box
    while "view_of" in root.__dict__:
        base, _, _, _, where = root.__dict__["view_of"]
        if where is None:
            raise MissingRuleError(
                "the tracer does not follow a write through a view whose entries are not its "
                "base's (a view of another dtype, but the real or imaginary parts of a complex "
                "array)"
            )
        if isinstance(where, str):  # ``np.real(z)`` written: z's real parts are its entries
            kept = apply(np.imag if where == "real" else np.real, base)
            parts = (root, kept) if where == "real" else (kept, root)
            _replace(base, apply(operator.add, parts[0], apply(operator.mul, 1j, parts[1])))
        else:
            flat = apply(np.reshape, base, -1)
            put = apply(assign_item, flat, where, apply(np.reshape, root, np.shape(where)))
            _replace(base, apply(np.reshape, put, np.shape(_deepest(base))))
        root = base
    _reread(root)


def _reread(base: Box) -> None:
    """Every live view of ``base``, and of those, read again from its base."""
    for ref in list(base.__dict__.get("views", ())):
        view = ref()
        if view is None or view.__dict__.get("view_of", (None,))[0] is not base:
            continue
        _, fn, rest, kwargs, _ = view.__dict__["view_of"]
        _replace(view, fn(base, *rest, **kwargs) if isinstance(fn, _Part)
                 else _apply(fn, base, *rest, **kwargs))
        _reread(view)
    base.__dict__["views"] = [ref for ref in base.__dict__.get("views", ()) if ref() is not None]

# Array constructors: what they make is boxed (with no parents), so item assignment into it is
# traced.
CONSTRUCTORS = {
    np.zeros,
    np.ones,
    np.empty,
    np.full,
    np.zeros_like,
    np.ones_like,
    np.empty_like,
    np.full_like,
    np.eye,
    np.arange,
    np.linspace,
}


def apply(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call primitive ``fn`` (``_apply``); a result that shares memory with its first argument is
    noted as a view of it (``_note_view``), so that writes through either are seen through the
    other, as Python sees them."""
    at = registry.out_position(fn)
    if at is not None and len(args) == at + 1:
        # ``np.sin(x, y)``, ``np.dot(a, b, y)``: the output given by position is ``out=``
        args, kwargs = args[:-1], {**kwargs, "out": args[-1]}
    out = kwargs.get("out")
    out = out[0] if isinstance(out, tuple) and len(out) == 1 else out
    if isinstance(out, Box):
        # ``np.sin(v, out=v)``: the result written into the very array ``out``, which it returns
        result = apply(fn, *args, **{k: v for k, v in kwargs.items() if k != "out"})
        _changed(out, assign_item, Ellipsis, result)
        return out
    ans = _apply(fn, *args, **kwargs)
    if args and isinstance(args[0], Box) and isinstance(ans, Box) and ans is not args[0]:
        _note_view(ans, args[0], fn, args[1:], kwargs)
    if args and isinstance(args[0], Box) and isinstance(ans, Box) \
            and isinstance(_deepest(ans), (list, tuple)) \
            and isinstance(_deepest(args[0]), np.ndarray):
        # ``np.split(y, 2)``: a list of views of ``y``; each part read from it is noted as that
        # part of ``y`` (below), read again so after a write
        ans.__dict__["parts_of"] = (args[0], fn, args[1:], kwargs)
        # (and the list itself read again after a write into ``y``; a write into the list's
        # slots is no write into ``y``: not followed, ``None``)
        ans.__dict__["view_of"] = (args[0], fn, args[1:], kwargs, None)
        args[0].__dict__.setdefault("views", []).append(weakref.ref(ans))
    elif len(args) == 2 and isinstance(args[0], Box) and "parts_of" in args[0].__dict__ \
            and isinstance(args[1], int) and isinstance(ans, Box):
        base, made, rest, options = args[0].__dict__["parts_of"]
        _note_view(ans, base, _Part(made, args[1]), rest, options)
    return ans


class _Part:
    """The ``k``-th of the arrays ``fn`` gives (``np.split``'s parts), as a view's recipe."""

    def __init__(self, fn: Callable[..., Any], k: int) -> None:
        self.fn, self.k, self.__name__ = fn, k, getattr(fn, "__name__", "part")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return apply(operator.getitem, _apply(self.fn, *args, **kwargs), self.k)


def _apply(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call primitive ``fn``; for the innermost level among its arguments (or their list items),
    record a Node (reverse mode) or carry the tangent (forward mode); outer levels are handled
    inside, recursively."""
    if any(_boxes_in(v) for v in kwargs.values()):
        args, kwargs = _by_position(fn, args, kwargs)
    if any(_boxes_in(v) for v in kwargs.values()):
        raise MissingRuleError(f"the tracer cannot differentiate a keyword argument of {fn}")
    level = max((box.level for a in args for _, box in _boxes_in(a)), default=0)
    values = [_untraced(_peel(a, level)) for a in args]
    # only constants: an array made from one stays a constant box (``y[i] += x`` writes into it)
    if level == 0:
        ans = fn(*values, **kwargs)
        boxed = any(_boxes_in(a) for a in args) and isinstance(ans, np.ndarray)
        return (
            Box(ans, Node(ans, []), 0)
            if boxed and not getattr(registry.lookup(fn), "nondiff", False)
            else ans
        )
    ans = _apply(fn, *values, **kwargs)
    rule = registry.lookup(fn)
    complex_call = any(_complex(v) for v in (*values, *kwargs.values()))
    if complex_call and rule is not None:
        # the rules for complex arguments (``registry.def_complex``), as the transformer takes them
        rule = registry.complex_rule(fn)
        if rule is None:
            name = getattr(fn, "__name__", fn)
            raise MissingRuleError(f"no rule for complex arguments of {name}")
    inputs = [
        (k, j, box) for k, a in enumerate(args) for j, box in _boxes_in(a) if box.level == level
    ]
    if rule is not None and rule.nondiff:
        return _peel(ans, level)
    if isinstance(inputs[0][2], Dual):
        return _forward(fn, rule, args, values, kwargs, ans, level)
    if rule is None or any(rule.vjp(k) is None for k, _, _ in inputs):
        raise MissingRuleError(f"no gradient rule for {getattr(fn, '__name__', fn)}")
    # the arguments as they are now, kept: an array the program writes into later (``x0 += c`` on a
    # plain array this product read) must not change what its rule reads
    kept = [_snapshot(v) for v in values]
    parents = [
        (box.node, _vjp(_written(rule.vjp(k)), ans, kept, kwargs, j)) for k, j, box in inputs
    ]
    if complex_call or _complex(ans):
        # a real argument takes the real part of its adjoint
        parents = [
            (node, _real_part(vjp, box.value)) for (node, vjp), (_, _, box) in zip(
                parents, inputs, strict=True
            )
        ]
    return Box(ans, Node(ans, parents), level)


def _snapshot(value: Any) -> Any:
    """``value`` with each numpy array in it (in a list or tuple too) a copy of its own."""
    if type(value) is np.ndarray:
        return value.copy()
    if type(value) in (list, tuple):
        return type(value)(_snapshot(v) for v in value)
    return value


def _untraced(value: Any) -> Any:
    """A function passed to a primitive (the function a scipy solver solves) as the user wrote it,
    not the tracer's copy of it: the primitive runs it, and its rules differentiate its source."""
    return getattr(value, "ast_ad_original", value) if isinstance(value, types.FunctionType) \
        else value


def _by_position(fn: Callable[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The keyword arguments that hold differentiated values moved to their positions (the gaps
    filled with the parameters' defaults), as the lowering moves them: rules are written per
    position (``args=`` of a scipy solver)."""
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return args, kwargs
    names = [p.name for p in params]
    wanted = [names.index(k) for k, v in kwargs.items() if _boxes_in(v) and k in names]
    rest, moved = dict(kwargs), list(args)
    for param in params[len(args):max(wanted, default=-1) + 1]:
        if param.name not in rest and param.default is param.empty:
            return args, kwargs
        moved.append(rest.pop(param.name) if param.name in rest else param.default)
    return tuple(moved), rest


def _complex(value: Any) -> bool:
    """Whether ``value`` (or a box's value, or an item of a list) is complex."""
    if isinstance(value, Box):
        return _complex(value.value)
    if isinstance(value, (list, tuple)):
        return any(_complex(v) for v in value)
    return isinstance(value, (complex, np.complexfloating)) or (
        isinstance(value, np.ndarray) and value.dtype.kind == "c"
    )


def _real_part(vjp: Callable[[Any], Any], value: Any) -> Callable[[Any], Any]:
    return lambda g: runtime.real_like(vjp(g), value)


def _forward(
    fn: Any,
    rule: registry.Rule | None,
    args: tuple[Any, ...],
    values: list[Any],
    kwargs: dict[str, Any],
    ans: Any,
    level: int,
) -> Any:
    """``Dual(ans, tangent)``: the tangents of the arguments of this level pushed through the
    forward rules."""
    if rule is None:
        raise MissingRuleError(f"no forward rule for {getattr(fn, '__name__', fn)}")
    total = None
    for k, arg in enumerate(args):
        u = _tangent_in(arg, level)
        if u is None:
            continue
        part = tangent(rule, k, u, ans, tuple(values), kwargs)
        total = part if total is None else apply(add_adjoints, total, part)
    return Dual(ans, total, level)


def _tangent_in(arg: Any, level: int) -> Any:
    """The tangent of an argument at ``level`` (a list of them, zeros for the rest, for a list), or
    None."""
    if isinstance(arg, Dual) and arg.level == level:
        return arg.tangent
    if isinstance(arg, (list, tuple)) and any(
        isinstance(a, Dual) and a.level == level for a in arg
    ):
        return type(arg)(_tangent_in(a, level) if isinstance(a, Dual) and a.level == level
                         else runtime.zeros_like(_peel(a, level)) for a in arg)
    return None


def _peel(arg: Any, level: int) -> Any:
    """``arg`` with the boxes of ``level`` (and constant boxes) opened, in list and tuple items
    too."""
    if isinstance(arg, Box):
        return arg.value if arg.level in (level, 0) else arg
    if isinstance(arg, (list, tuple)) and any(isinstance(item, Box) for item in arg):
        return type(arg)(_peel(item, level) for item in arg)
    return arg


def tangent(
    rule: registry.Rule, k: int, u: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """The tangent ``rule.fn(*args, **kwargs)`` gets from argument ``k`` moving along ``u`` (its
    forward rule)."""
    jvp = rule.jvp(k)
    if jvp is None:
        raise MissingRuleError(
            f"no forward rule for argument {k + 1} of {getattr(rule.fn, '__name__', rule.fn)}"
        )
    if jvp is registry.zero:
        return runtime.zeros_like(ans)
    cut = registry.truncated(rule.fn)
    if cut is not None and k == cut[1] and cut[0] < len(args):
        u = runtime.written_tangent(u, args[cut[0]])  # (written into integers: truncated)
    if jvp is registry.LINEAR:
        return apply(rule.fn, *args[:k], u, *args[k + 1:], **kwargs)
    if jvp is registry.REDUCTION:
        vjp = rule.vjps[k]
        assert vjp is not None  # a reduction's forward rule follows from its reverse rule
        slope = _rule(vjp, u, ans, args)(apply(np.ones_like, ans), ans, *args, **kwargs)
        axis, keepdims = registry.reduced_over(rule, k, args, kwargs)
        return apply(np.sum, apply(operator.mul, u, slope), axis=axis, keepdims=keepdims)
    return _rule(jvp, u, ans, args)(u, ans, *args, **kwargs)


_TRACED_RULES: dict[int, Any] = {}


def _rule(rule: Callable[..., Any], g: Any, ans: Any, args: Any) -> Callable[..., Any]:
    """``rule`` itself, or, where an outer level's boxes are among its inputs, a traced copy of
    it."""
    if not any(_holds_box(v) for v in (g, ans, *args)):
        return rule
    if id(rule) not in _TRACED_RULES:
        _TRACED_RULES[id(rule)] = (rule, traced(rule))
    copy: Callable[..., Any] = _TRACED_RULES[id(rule)][1]
    return copy


def _holds_box(value: Any) -> bool:
    if isinstance(value, Box):
        return True
    if isinstance(value, (list, tuple)):
        return any(_holds_box(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_box(v) for v in value.values())
    return False


def _boxes_in(arg: Any) -> list[tuple[int | None, Box]]:
    """The boxes an argument holds: itself, or the entries of a list or tuple of arrays."""
    if isinstance(arg, Box):
        return [(None, arg)]
    if isinstance(arg, (list, tuple)):
        return [(j, item) for j, item in enumerate(arg) if isinstance(item, Box)]
    return []


def _written(rule: Callable[..., Any] | None) -> Callable[..., Any]:
    """A rule the caller has checked is there."""
    assert rule is not None
    return rule


def _vjp(rule: Callable[..., Any], ans: Any, values: list[Any], kwargs: dict[str, Any],
         entry: int | None) -> Callable[[Any], Any]:
    if entry is None:
        return lambda g: _rule(rule, g, ans, values)(g, ans, *values, **kwargs)
    return lambda g: _rule(rule, g, ans, values)(g, ans, *values, **kwargs)[entry]


def backward(out: Box, seed: Any = 1.0) -> dict[int, Any]:
    """The adjoint of every node ``out`` depends on, keyed by ``id(node)``."""
    order: list[Node] = []  # a topological order, built without recursion (graphs can be deep)
    seen: set[int] = {id(out.node)}
    stack: list[tuple[Node, int]] = [(out.node, 0)]
    while stack:
        node, k = stack.pop()
        if k < len(node.parents):
            stack.append((node, k + 1))
            parent = node.parents[k][0]
            if id(parent) not in seen:
                seen.add(id(parent))
                stack.append((parent, 0))
        else:
            order.append(node)
    adjoints = {id(out.node): seed}
    for node in reversed(order):
        g = adjoints.get(id(node))
        for parent, vjp in node.parents if g is not None else ():
            contribution = apply(unbroadcast, vjp(g), parent.value)
            adjoints[id(parent)] = apply(add_adjoints, adjoints.get(id(parent)), contribution)
    return adjoints


def value_and_grad(
    fun: Callable[..., Any], argnums: int | tuple[int, ...] = 0
) -> Callable[..., Any]:
    """``(value, gradient)`` of ``fun``, computed by tracing."""
    nums = tuple(argnums) if isinstance(argnums, (tuple, list)) else (operator.index(argnums),)

    def run(*args: Any) -> Any:
        level = new_level()
        # (boxed value, its input nodes), containers leaf by leaf
        boxed = {k: _box(args[k], level) for k in nums}
        out = traced(fun)(*[boxed[k][0] if k in boxed else a for k, a in enumerate(args)])
        mine = isinstance(out, Box) and not isinstance(out, Dual) and out.level == level
        adjoints = backward(out) if mine else {}
        grads = [_gather(boxed[k][1], adjoints, args[k]) for k in nums]
        return _primal(out, level), grads[0] if isinstance(argnums, numbers.Integral) else tuple(
            grads
        )

    return run


def jvp(
    fun: Callable[..., Any], primals: tuple[Any, ...], tangents: tuple[Any, ...]
) -> tuple[Any, Any]:
    """``(fun(*primals), J tangents)`` by forward-mode tracing; ``None`` marks an argument not
    differentiated."""
    level = new_level()
    args = [a if t is None else _dual(a, t, level) for a, t in zip(primals, tangents, strict=True)]
    out = traced(fun)(*args)
    return _primal(out, level), _out_tangent(out, level)


def _dual(value: Any, tangent: Any, level: int) -> Any:
    if isinstance(value, dict):
        return {key: _dual(v, tangent[key], level) for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        return _rebuild(value, [_dual(v, t, level) for v, t in zip(value, tangent, strict=True)])
    return Dual(value, tangent, level)


def _primal(out: Any, level: int) -> Any:
    if isinstance(out, (list, tuple)):
        return _rebuild(out, [_primal(o, level) for o in out])
    return _peel(out, level)


def _out_tangent(out: Any, level: int) -> Any:
    if isinstance(out, (list, tuple)):
        return _rebuild(out, [_out_tangent(o, level) for o in out])
    if isinstance(out, Dual) and out.level == level:
        return out.tangent
    return runtime.zeros_like(_peel(out, level))


def _rebuild(like: Any, parts: list[Any]) -> Any:
    """A list or tuple of ``parts`` of the type of ``like`` (a namedtuple takes them as fields)."""
    return type(like)(*parts) if hasattr(like, "_fields") else type(like)(parts)


def _box(value: Any, level: int) -> tuple[Any, Any]:
    if isinstance(value, dict):
        parts = {key: _box(v, level) for key, v in value.items()}
        return {key: p[0] for key, p in parts.items()}, {key: p[1] for key, p in parts.items()}
    if isinstance(value, (list, tuple)):
        items = [_box(v, level) for v in value]
        return _rebuild(value, [p[0] for p in items]), [p[1] for p in items]
    node = Node(value, [])
    return Box(value, node, level), node


def _gather(nodes: Any, adjoints: dict[int, Any], value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _gather(nodes[key], adjoints, v) for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        return _rebuild(value, [_gather(n, adjoints, v) for n, v in zip(nodes, value, strict=True)])
    return apply(unbroadcast, adjoints.get(id(nodes), 0.0), value)


def grad(fun: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    """The gradient of ``fun``, computed by tracing."""
    run = value_and_grad(fun, argnums)
    return lambda *args: run(*args)[1]


# ---- running the user's function with traced primitives ------------------------------------------
def traced(fn: Any, copies: dict[Any, Any] | None = None) -> Any:
    """A copy of ``fn`` whose globals and closure see traced primitives, read afresh for each
    run."""
    copies = {} if copies is None else copies
    if getattr(getattr(fn, "__code__", None), "co_filename", None) == __file__:
        return fn  # a function the tracer made (grad of grad): it traces itself
    if isinstance(fn, types.MethodType):
        return types.MethodType(traced(fn.__func__, copies), fn.__self__)
    if fn in copies:
        return copies[fn]
    namespace: dict[str, Any] = {}
    closure = tuple(types.CellType() for _ in fn.__closure__ or ())
    copy = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, closure or None)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.ast_ad_original = fn  # type: ignore[attr-defined]
    copies[fn] = copy
    namespace.update({k: view(v, copies) for k, v in fn.__globals__.items()})
    namespace["__builtins__"] = _BUILTINS
    for cell, original in zip(closure, fn.__closure__ or (), strict=True):
        try:
            cell.cell_contents = view(original.cell_contents, copies)
        except ValueError:
            pass
    return copy


def view(value: Any, copies: dict[Any, Any]) -> Any:
    """What a traced function sees in place of ``value``."""
    registry.load_rules_for(value)
    if isinstance(value, types.ModuleType):
        return ModuleView(value, copies)
    if registry.hashable(value) and value in CONSTRUCTORS:
        return lambda *args, fn=value, **kwargs: _constant_box(fn(*_unboxed(args), **kwargs))
    if registry.lookup(value) is not None and isinstance(value, type):
        return TypeView(value)
    if registry.hashable(value) and (
        registry.in_place(value) is not None
        or (isinstance(value, np.ufunc) and registry.in_place(getattr(value, "at", None)))
    ):
        return InPlaceView(value, copies)
    if registry.lookup(value) is not None:
        return lambda *args, fn=value, **kwargs: apply(fn, *args, **kwargs)
    if isinstance(value, types.FunctionType) and not (value.__module__ or "").startswith("ast_ad."):
        return traced(value, copies)
    return value


class TypeView:
    """A scalar type with a rule (``np.float64``): traced when called, still a dtype when passed as
    one."""

    def __init__(self, cls: type):
        self.cls, self.dtype = cls, np.dtype(cls)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return apply(self.cls, *args, **kwargs)


def _constant_box(value: Any) -> Any:
    return Box(value, Node(value, [])) if isinstance(value, np.ndarray) else value


def _unboxed(args: tuple[Any, ...]) -> list[Any]:
    return [a.value if isinstance(a, Box) else a for a in args]


class ModuleView:
    """A module whose primitives record onto the tape."""

    def __init__(self, module: types.ModuleType, copies: dict[Any, Any]):
        self._module, self._copies = module, copies

    def __getattr__(self, name: str) -> Any:
        return view(getattr(self._module, name), self._copies)


_BUILTINS = {
    k: view(v, {}) if registry.lookup(v) is not None else v for k, v in vars(builtins).items()
}
