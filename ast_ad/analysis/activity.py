"""Facts about a normalized function that the transformations read: which names carry derivatives,
which the result needs, which have equal shapes, which hold containers, how a call binds its
callee's parameters.

>>> import numpy as np
>>> from ast_ad import transform
>>> def f(x, n):
...     y = x * 2.0
...     k = n + 1
...     return np.sum(y) * k
>>> sorted(activity(transform.normalized(f), (0,)))  # n and k do not depend on x
['out', 'sum_y', 'x', 'y']

Each is a fixpoint over the statements (loops feed values back), written once here for reverse and
forward mode alike.
"""

from __future__ import annotations

import inspect
import operator
import os
import sysconfig
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeGuard, TypeVar

import gast
import numpy as np

from ast_ad import runtime
from ast_ad.analysis import lengths as axis_lengths
from ast_ad.analysis.kinds import (
    A_SET,
    ANY_CONTAINER,
    DICT,
    MAPPING,
    NARROW_NUMBER,
    SET,
    UNKNOWN,
    Fact,
    Kinds,
    checked_only,
    fact_label,
    kinds_of,
    label_axes,
)
from ast_ad.core import registry
from ast_ad.core.records import field, record
from ast_ad.errors import LocatedError, MissingRuleError
from ast_ad.ir import nodes as ir
from ast_ad.ir import syntax

SCALAR = -1
CONTAINER = -2  # a tuple or list argument: its adjoint has the same structure
# the labels of arguments whose adjoints have their structure (a dict's: ``kinds.MAPPING``)
CONTAINERS = (CONTAINER, MAPPING, ANY_CONTAINER)

E = TypeVar("E", bound=LocatedError)


def activity(function: ir.Function, argnums: tuple[int, ...], carries: Any = None) -> set[str]:
    """The names whose values depend on the differentiated parameters (a fixpoint, for loops).

    ``carries(value, active)`` says whether an assigned value depends on them (default: any of its
    inputs the gradient can flow back to, ``is_active_value``).
    """
    carries = carries or is_active_value
    active = {function.params[i] for i in argnums}
    size, once = -1, ir.loop_free(function.body)
    while size != len(active):
        size = len(active)
        for stmt in ir.walk(function.body):
            if isinstance(stmt, ir.Assign) and carries(stmt.value, active):
                active.add(stmt.target)
            elif isinstance(stmt, ir.Unpack) and atom_active(stmt.value, active):
                active.update(stmt.targets)
            elif isinstance(stmt, ir.Append) and atom_active(stmt.value, active):
                active.add(stmt.target)
            elif isinstance(stmt, ir.Pop) and stmt.source in active and stmt.target is not None:
                active.add(stmt.target)
        if once:  # no loop: one pass
            break
    return active


def usefulness(function: ir.Function, active: set[str], seeds: set[str] | None = None,
               ignored: dict[int, frozenset[str]] | None = None) -> set[str]:
    """The active names the result (or the names ``seeds``, parts of it) depends on (a fixpoint, for
    loops). ``ignored``: by statement, names it reads that its value does not depend on (a call of
    a function whose result does not: ``modes.calls``)."""
    if seeds is not None:
        useful = seeds & active
    else:
        useful = {function.result.name} & active if isinstance(function.result, ir.Var) else set()
    statements = list(ir.walk(function.body))
    once = not any(type(stmt) is ir.For or type(stmt) is ir.While for stmt in statements)
    size = -1
    while size != len(useful):
        size = len(useful)
        for stmt in reversed(statements):
            if isinstance(stmt, ir.Assign) and stmt.target in useful:
                skip = ignored.get(id(stmt), frozenset()) if ignored else frozenset()
                useful.update(v.name for v in _flowing(stmt.value)
                              if v.name in active and v.name not in skip)
            elif isinstance(stmt, ir.Unpack) and useful.intersection(stmt.targets) and \
                    atom_active(stmt.value, active):
                useful.add(stmt.value.name)
            elif (
                isinstance(stmt, ir.Append)
                and stmt.target in useful
                and atom_active(stmt.value, active)
            ):
                useful.add(stmt.value.name)
            elif isinstance(stmt, ir.Pop) and stmt.target in useful and stmt.source in active:
                useful.add(stmt.source)
        if once:  # no loop: one pass, last statement first
            break
    return useful


def shape_classes(
    function: ir.Function, shapes: tuple[int, ...], known: Kinds | None = None,
    constants: dict[str, tuple[int, ...]] | None = None,
    callees: callee_results | None = None,
) -> dict[str, int | None]:
    """Label every name with a shape class: names with equal labels are known to have equal shapes.

    Elementwise operations keep their operands' class when all non-scalar
    operands share one; anything else starts a class of its own; a name
    assigned in several places with different classes gets ``None`` (unknown).
    A name ``known`` to hold a number is ``SCALAR`` (``ast_ad.analysis.kinds``); one that holds
    arrays of one shape written in the code (``constants``: ``constant_shapes``) has the class of
    that shape.

    A class a statement inside a loop starts (``np.ones(i + 1)``, ``x[:i]``, a call whose result's
    shape nothing says) is one shape within a step, and may be another in the next: a name of such
    a class whose value outlives its step (read after the loop, read in the loop before the step
    binds it, or bound in a branch, so that a later step may read an earlier step's value:
    ``_outliving``) has no class, and the classes are found again with it so (the names that meet
    it then meet an unknown shape, and undo a broadcast).
    """
    outliving = _outliving(function)
    pinned: set[str] = set()
    while True:
        classes, varying = _shape_classes_with(function, shapes, known, constants, callees, pinned)
        found = {name for name in outliving - pinned if classes.get(name) in varying}
        if not found:
            return classes
        pinned |= found


def _shape_classes_with(
    function: ir.Function, shapes: tuple[int, ...], known: Kinds | None,
    constants: dict[str, tuple[int, ...]] | None, callees: callee_results | None,
    pinned: set[str],
) -> tuple[dict[str, int | None], set[int]]:
    """``shape_classes`` with the names ``pinned`` of no class, and the classes that may be another
    shape at each step of a loop (those its statements start, and those made of their lengths)."""
    # (a number of any width is a scalar: ``kinds.NARROW_NUMBER``; an array whose label says the
    # lengths of its axes, the class of those lengths: ``LengthClasses``)
    lengths = LengthClasses(function)
    classes: dict[str, int | None] = {
        p: SCALAR if label == NARROW_NUMBER else lengths.of_label(label)
        for p, label in zip(function.params, shapes, strict=True)
    }
    numbers = {name for name in known.facts if known.no_axes(name)} if known is not None else set()
    fresh: dict[int, int] = {}
    # ``x = None`` where ``x`` is bound to something else too (the normalizer's binding before a
    # loop that binds it): it gives ``x`` no class, since a value ``None`` cannot meet an array in
    # arithmetic (Python raises), and every other use of a class (is it a number? does a zero
    # need a shape?) holds for ``None`` as for the array
    bound = {name for stmt in ir.walk(function.body) if not ir.binds_none(stmt)
             for name in ir.defined(stmt)}
    skipped = {id(stmt) for stmt in ir.walk(function.body)
               if isinstance(stmt, ir.Assign) and ir.binds_none(stmt) and stmt.target in bound}
    # (a class for each shape written in the code, above every other label)
    written = {shape: max(shapes, default=0) + 1 + k for k, shape in
               enumerate(sorted(set((constants or {}).values())))}
    base = max(shapes, default=0) + 1 + len(written)
    changed, once = True, ir.loop_free(function.body)
    while changed:
        changed = False
        for stmt in ir.walk(function.body):
            if id(stmt) in skipped:
                continue
            labelled = (
                [(stmt.target, written[constants[stmt.target]])]
                if constants and isinstance(stmt, ir.Assign) and stmt.target in constants
                else _labels(stmt, classes, fresh, base, numbers, known, lengths, callees)
            )
            for target, label in labelled:
                if target in pinned:
                    label = None
                new = (
                    label
                    if target not in classes
                    else (classes[target] if classes[target] == label else None)
                )
                if target not in classes or new != classes[target]:
                    classes[target], changed = new, True
        if once:  # no loop: one pass
            break
    looped = {id(s) for loop in ir.walk(function.body) if isinstance(loop, (ir.For, ir.While))
              for s in ir.walk(loop.body)}
    varying = {label for at, label in fresh.items() if at in looped}
    return classes, varying | lengths.made_of(varying)


def _outliving(function: ir.Function) -> set[str]:
    """The names bound inside a loop whose value may outlive the step that bound it: read outside
    the loop (after it), read in the loop before the step binds it (the ``while`` test included),
    or bound in a branch inside the loop."""
    found: set[str] = set()
    # (each statement's reads, scanned once: the statements that read each name)
    readers: dict[str, list[int]] = {}
    for stmt in ir.walk(function.body):
        for name in ir.reads_of(stmt):
            readers.setdefault(name, []).append(id(stmt))
    for loop in ir.walk(function.body):
        if not isinstance(loop, (ir.For, ir.While)):
            continue
        inside = list(ir.walk(loop.body))
        ids = {id(s) for s in inside} | {id(loop)}
        names = {name for s in inside for name in ir.defined(s)}
        if not names:
            continue
        found |= {name for name in names - found
                  if any(at not in ids for at in readers.get(name, ()))}
        if isinstance(loop, ir.While):
            found |= set(ir.reads_of(loop)) & names
        seen: set[str] = set()
        for s in inside:
            found |= (set(ir.reads_of(s)) & names) - seen
            seen |= set(ir.defined(s))
        found |= {name for branch in inside if isinstance(branch, ir.If)
                  for s in ir.walk(branch.body + branch.orelse) for name in ir.defined(s)}
    return found


def classes_of(function: ir.Function, shapes: tuple[int, ...], known: Kinds,
               callees: callee_results | None,
               lengths: tuple[tuple[int, ...] | None, ...] | None = None
               ) -> dict[str, int | None]:
    """``shape_classes`` with the shapes written in the code (``constant_shapes``), a helper's
    result's found from its own code (``callees``: the driver's ``callee_results``, if it gives
    callees' IR), and the parameters' own where the code is made for them (``lengths``): what
    both modes read."""
    return shape_classes(function, shapes, known, constant_shapes(
        function, known,
        None if callees is None else
        lambda fn, call, at, passed: callees.shape(fn, [known.of(a, at) for a in call.args],
                                                   passed),
        lengths,
    ), callees)


# a name that holds arrays of more than one shape, or of a shape not written in the code
_VARIES = ()


def constant_shapes(function: ir.Function, known: Kinds | None,
                    results: Callable[[Any, ir.Call, ir.Stmt, Any], Any] | None = None,
                    lengths: tuple[tuple[int, ...] | None, ...] | None = None,
                    ) -> dict[str, tuple[int, ...]]:
    """The names that hold, wherever they are bound (the normalizer's ``x = None`` aside), a numpy
    array of one shape written in the code: ``np.array([0.0, 8.0])`` (a list or tuple of numbers
    written out, or a name bound once to such a list, ``pack = [a, b]``, read by nothing but
    ``np.array``, where ``known`` says each item is a number: one axis of as many entries), the
    results of elementwise functions whose operands are numbers or arrays of one such shape (the
    shape they broadcast to is theirs), copies of them, and a call of one of the user's functions
    whose result ``results`` says has one (``callee_results.shape``).

    ``lengths``, where given, are the parameters' own shapes (``None`` for a number): code made for
    those shapes alone, whose call checks them (``jit="numba"``), so a parameter meets the arrays
    written out in one class.

    A greatest fixpoint, as ``kinds.wide_numbers``: every binding is first taken to give what the
    others do, then a binding that gives another shape, or one not known, takes its name out, until
    nothing changes. Names of one such shape are of one shape class (``shape_classes``): their
    adjoints and tangents need no ``unbroadcast`` between them, and a zero of one is zeros of that
    shape (``reverse_code._typed``)."""
    if known is None:
        return {}
    numbers = {name for name in known.facts if known.no_axes(name)}
    # (a list or tuple of numbers written out, read by nothing but one ``np.array`` of it)
    packs = displays_read_by(function, lambda call: call.fn.obj is np.array
                             and len(call.args) == 1 and not call.kwargs)

    def number(atom: ir.Atom) -> bool:
        if isinstance(atom, ir.Const):
            return type(atom.value) in (int, float, bool)
        return isinstance(atom, ir.Var) and atom.name in numbers

    def written(atom: ir.Atom) -> tuple[int, ...] | None:
        """The shape ``np.array(atom)`` has where ``atom`` is numbers written out."""
        if isinstance(atom, ir.Const) and isinstance(atom.value, (list, tuple)) and atom.value \
                and all(type(v) in (int, float) for v in atom.value):
            return (len(atom.value),)
        if isinstance(atom, ir.Var) and atom.name in packs and packs[atom.name][0] == 1:
            elts = packs[atom.name][1]
            if elts and all(number(e) for e in elts):
                return (len(elts),)
        return None

    # (a parameter of a shape the code is made for, and checked at its call: ``lengths``)
    fixed = {p: tuple(shape) for p, shape in zip(function.params, lengths or (), strict=False)
             if shape is not None and len(shape) >= 1}
    shapes: dict[str, tuple[int, ...]] = dict(fixed)

    def shape_of(atom: ir.Var, sure: bool) -> tuple[int, ...] | None:
        found = shapes.get(atom.name)
        if found is None:  # (not yet bound: any shape, in the hopeful pass)
            return None if sure else _ANY
        return None if found == _VARIES else found

    def arguments(call: ir.Call, sure: bool) -> list[tuple[int, ...] | None]:
        """The shapes of ``call``'s arguments known here (``_ANY`` for a name not bound yet, in
        the hopeful pass); none for a number, or a parameter of no shape the code is made for."""
        return [shape_of(a, sure) if isinstance(a, ir.Var) and not number(a) and (
            a.name not in function.params or a.name in fixed) else None for a in call.args]

    def given(stmt: ir.Assign, sure: bool) -> tuple[int, ...] | None:
        """The shape ``stmt`` binds, ``_ANY`` where it is what names not yet seen are (the
        hopeful pass), ``None`` where it may be another."""
        value = stmt.value
        if isinstance(value, ir.Var):
            return shape_of(value, sure)
        if not isinstance(value, ir.Call) or value.kwargs:
            return None
        if value.fn.obj is np.array and len(value.args) == 1:
            return written(value.args[0])
        rule = registry.lookup(value.fn.obj)
        if rule is not None and rule.elementwise:
            operands = [a for a in value.args if not number(a)]
            if not operands:
                return None  # (a number)
            seen = set()
            for a in operands:
                found = shape_of(a, sure) if isinstance(a, ir.Var) else None
                if found is None:
                    return None
                seen.add(found)
            seen.discard(_ANY)
            return _ANY if not seen else seen.pop() if len(seen) == 1 else None
        if registry.declares_result_axes(value.fn.obj):
            # each axis of the result that of an argument of a shape known here
            # (``registry.result_axes``: ``gradient_like(g, x)`` has ``x``'s)
            held = arguments(value, sure)
            if any(h == _ANY for h in held):
                return _ANY
            ranks = tuple(0 if number(a) else None if h is None else len(h)
                          for a, h in zip(value.args, held, strict=True))
            ties = registry.result_axes(value.fn.obj, ranks)
            if not ties or any(held[k] is None or not 0 <= axis < len(held[k] or ())
                               for k, axis in ties):
                return None
            return tuple((held[k] or ())[axis] for k, axis in ties)
        if results is not None and is_user_function(value.fn.obj):
            # (its arguments' shapes known here are its parameters' at this call)
            passed = arguments(value, sure)
            if any(h == _ANY for h in passed):
                return _ANY
            made = results(value.fn.obj, value, stmt, tuple(passed))
            return made if isinstance(made, tuple) and made else None
        return None

    # (the normalizer's ``x = None`` before the loop or branch that binds ``x``: no array it meets)
    elsewhere = {name for stmt in ir.walk(function.body) if not ir.binds_none(stmt)
                 for name in ir.defined(stmt)}
    bound = [stmt for stmt in ir.walk(function.body) if ir.defined(stmt)
             and not (ir.binds_none(stmt) and ir.defined(stmt)[0] in elsewhere)]
    for sure in (False, True):
        changed = True
        while changed:
            changed = False
            for stmt in bound:
                found = given(stmt, sure) if isinstance(stmt, ir.Assign) else None
                if found == _ANY:
                    continue
                for name in ir.defined(stmt):
                    old = shapes.get(name)
                    agrees = old == found or old is None and not sure
                    new = found if found is not None and agrees else _VARIES
                    if new != old:
                        shapes[name], changed = new, True
    return {
        name: shape for name, shape in shapes.items()
        if shape != _VARIES and (name not in function.params or name in fixed)
    }


_ANY = (-1,)  # (a shape not yet known, in the hopeful pass of ``constant_shapes``)


def _labels(stmt: ir.Stmt, classes: dict[str, int | None], fresh: dict[int, int],
            base: int, numbers: set[str], known: Kinds | None,
            lengths: LengthClasses,
            callees: callee_results | None = None) -> list[tuple[str, int | None]]:
    if isinstance(stmt, ir.For):
        return [(stmt.target, SCALAR if _is_range(stmt.iter) else None)]
    if isinstance(stmt, ir.Unpack):
        return [(t, None) for t in stmt.targets]
    if not isinstance(stmt, ir.Assign):
        return []
    # (what lengths say: it notes the shapes and lengths a statement binds, numbers too)
    made = lengths.of_statement(stmt, classes, known) if known is not None else None
    if stmt.target in numbers:
        return [(stmt.target, SCALAR)]
    if made is not None:
        return [(stmt.target, made)]
    value = stmt.value
    if isinstance(value, (ir.Var, ir.Const)):
        return [(stmt.target, shape_class(value, classes))]
    if isinstance(value, ir.Call) and not value.kwargs:
        rule = registry.lookup(value.fn.obj)
        if getattr(value.fn.obj, "__module__", None) == "math" or \
                (registry.is_full_reduction(value.fn.obj) and len(value.args) == 1):
            return [(stmt.target, SCALAR)]
        if rule is not None and rule.elementwise:
            operands = {shape_class(a, classes) for a in value.args} - {SCALAR}
            if not operands:
                return [(stmt.target, SCALAR)]
            if len(operands) == 1 and None not in operands:
                return [(stmt.target, operands.pop())]
            return [(stmt.target, None)]
        owner = registry.shape_of(value.fn.obj, len(value.args))
        if owner is not None and shape_class(value.args[owner], classes) not in (SCALAR, None):
            # the shape of an array argument, whatever its rank (``registry.def_shape_of``:
            # ``getitem_vjp(g, x, i)``, in code made for any shapes)
            return [(stmt.target, shape_class(value.args[owner], classes))]
        if known is not None and registry.declares_result_axes(value.fn.obj):
            ranks = known.ranks(value.args, stmt)
            ties = registry.result_axes(value.fn.obj, ranks)
            if (like := _shaped_as(value, ties, ranks)) is not None:
                # every axis that of one argument (``registry.result_axes``: ``np.zeros_like(x)``)
                return [(stmt.target, shape_class(like, classes))]
            if (made := lengths.of_call(value, ties, classes)) is not None:
                # axes whose lengths the arguments' labels give (``np.dot(w, h)``: ``w``'s rows)
                return [(stmt.target, made)]
        if known is not None and callees is not None and is_user_function(value.fn.obj):
            passed = [shape_class(a, classes) for a in value.args]
            alike = tuple(passed.index(c) if c is not None and c != SCALAR else k
                          for k, c in enumerate(passed))
            owner = callees.shaped_as(value.fn.obj, [known.of(a, stmt) for a in value.args],
                                      alike)
            if owner is not None:  # (a helper of yours that returns its argument's shape)
                return [(stmt.target, shape_class(value.args[owner], classes))]
    return [(stmt.target, fresh.setdefault(id(stmt), base + len(fresh)))]


class LengthClasses:
    """Shape classes made of axis lengths: an array parameter whose label says which axes of the
    arguments have the length of each of its axes (``kinds.label_axes``) has the class of that
    tuple of axes, and so has a call's result whose axes the registry ties to axes of arguments of
    such classes (``registry.result_axes``: ``np.dot(w, h)`` has ``w``'s rows). Two values of one
    class have one shape: their lengths are those of the same axes of the arguments, as the labels
    are checked at every call. (The classes are negative numbers below every other label.)

    A length may also be an expression of one (``analysis.lengths``): a slice written in the code
    (``x[1:]``), arrays of such lengths joined (``np.concatenate([x[:1], x[1:] * y[:-1]])``, which
    has ``x``'s length where ``y`` has it too), an array made of a shape or a length read off an
    array (``np.zeros(x.shape[0])``, ``np.zeros(len(x))``). Any other class of a known number of
    axes gets a length for each of its axes, ``("of", class, axis, rank)``, whose tuple is that
    class itself (``lengths_of``)."""

    def __init__(self, function: ir.Function | None = None) -> None:
        self.classes: dict[tuple[Any, ...], int] = {}
        self.axes: dict[int, tuple[Any, ...]] = {}
        # names bound once to an array's shape, or to one of its lengths (``x.shape[0]``)
        self.shapes: dict[str, tuple[Any, ...] | None] = {}
        self.sizes: dict[str, Any] = {}
        bindings = Counter(name for stmt in ir.walk(function.body) for name in ir.defined(stmt)) \
            if function is not None else Counter()
        self.once = {name for name, count in bindings.items() if count == 1}
        # (a list or tuple display that only ``np.concatenate`` and the makers of arrays of a
        # shape read: what it was made of)
        self.packs = {name: elts for name, (_, elts) in displays_read_by(
            function, lambda call: call.fn.obj is np.concatenate
            or call.fn.obj in _MADE_OF_SHAPE).items()} if function is not None else {}

    def of_axes(self, axes: tuple[Any, ...]) -> int:
        found = self.classes.get(axes)
        if found is None:
            found = self.classes[axes] = _LENGTH_CLASSES - len(self.classes)
            self.axes[found] = axes
        return found

    def of_label(self, label: int) -> int:
        axes = label_axes(label)
        return label if axes is None else self.of_axes(axes)

    def lengths_of(self, found: int | None, rank: int | None) -> tuple[Any, ...] | None:
        """The lengths of the axes of the values of class ``found``, which have ``rank`` axes: those
        it is made of, or one of its own for each axis."""
        if found is None or found == SCALAR or not rank or rank < 1:
            return None
        own = self.axes.get(found)
        if own is None:
            own = tuple(("of", found, k, rank) for k in range(rank))
            self.classes[own], self.axes[found] = found, own
        return own if len(own) == rank else None

    def made_of(self, classes: set[int]) -> set[int]:
        """The classes made of lengths of ``classes`` (a slice of one, a join...), and of those."""
        found = set(classes)
        while True:
            more = {made for made, axes in self.axes.items()
                    if made not in found and any(_class_of(length) in found for length in axes)}
            if not more:
                return found - classes
            found |= more

    def of_call(self, call: ir.Call, ties: tuple[tuple[int, int], ...] | None,
                classes: dict[str, int | None]) -> int | None:
        """The class of ``call``'s result, where the registry ties each of its axes to an axis of
        an argument whose class is made of lengths (``ties``: ``registry.result_axes``); else
        ``None``."""
        if not self.axes or ties is None:
            return None
        out = []
        for k, axis in ties:
            found = shape_class(call.args[k], classes)
            own = self.axes.get(found) if found is not None else None
            if own is None or axis >= len(own):
                return None
            out.append(own[axis])
        return self.of_axes(tuple(out))

    def of_statement(self, stmt: ir.Assign, classes: dict[str, int | None],
                     known: Kinds) -> int | None:
        """The class of what ``stmt`` binds where lengths say it (the class's docstring), and the
        shapes and lengths it binds, noted; else ``None``."""
        value, target = stmt.value, stmt.target
        if isinstance(value, ir.Attr) and value.attr == "shape" and isinstance(value.value, ir.Var):
            if target in self.once:
                self.shapes[target] = self._lengths(value.value, classes, known, stmt)
            return None
        if not isinstance(value, ir.Call) or value.kwargs:
            return None
        fn, args = value.fn.obj, value.args
        if fn is len and len(args) == 1:
            own = self._lengths(args[0], classes, known, stmt)
            if target in self.once:
                self.sizes[target] = own[0] if own else None
            return None
        if fn is operator.getitem and len(args) == 2 and isinstance(args[1], ir.Const):
            array, index = args[0], args[1].value
            if isinstance(array, ir.Var) and array.name in self.shapes:
                held = self.shapes[array.name]
                if target not in self.once:
                    return None
                self.sizes[target] = held[index] if held and type(index) is int \
                    and -len(held) <= index < len(held) else None
                return None
            own = self._lengths(array, classes, known, stmt)
            cut = axis_lengths.indexed(own, index) if own else None
            return self.of_axes(cut) if cut else None
        if fn is np.concatenate and len(args) in (1, 2) and isinstance(args[0], ir.Var) \
                and args[0].name in self.packs and (len(args) == 1 or isinstance(args[1], ir.Const)
                                                    and type(args[1].value) is int
                                                    and args[1].value == 0):
            parts = [self._lengths(e, classes, known, stmt) for e in self.packs[args[0].name]]
            if not parts or any(p is None for p in parts) \
                    or len({(len(p), p[1:]) for p in parts if p is not None}) != 1:
                return None
            joined = axis_lengths.summed([p[0] for p in parts if p is not None])
            return None if joined is None else self.of_axes((joined, *(parts[0] or ())[1:]))
        if fn in _MADE_OF_SHAPE and args and isinstance(args[0], ir.Var):
            made = self._shape_given(args[0].name)
            return self.of_axes(made) if made else None
        return None

    def _lengths(self, atom: ir.Atom, classes: dict[str, int | None], known: Kinds,
                 at: ir.Stmt) -> tuple[Any, ...] | None:
        if not isinstance(atom, ir.Var):
            return None
        return self.lengths_of(classes.get(atom.name), known.rank_of(atom, at))

    def _shape_given(self, name: str) -> tuple[Any, ...] | None:
        """The lengths of a shape held by ``name``: a shape, a length, or a tuple of lengths."""
        if name in self.shapes:
            return self.shapes[name]
        if name in self.sizes:
            size = self.sizes[name]
            return None if size is None else (size,)
        if name in self.packs:
            sizes = [self.sizes.get(e.name) if isinstance(e, ir.Var) else None
                     for e in self.packs[name]]
            return None if not sizes or any(s is None for s in sizes) else tuple(sizes)
        return None


def _class_of(length: Any) -> int | None:
    """The shape class a length is of (``("of", class, axis, rank)``, or a function of one), or
    ``None`` (an argument's axis)."""
    if isinstance(length, tuple) and length[0] == "f":
        length = length[1]
    return length[1] if isinstance(length, tuple) and length[0] == "of" else None


# numpy's functions whose result's shape is their first argument (a length, or a tuple of them)
_MADE_OF_SHAPE: frozenset[Any] = frozenset({np.zeros, np.ones, np.empty, np.full})


def displays_read_by(function: ir.Function, reader: Callable[[ir.Call], bool]
                     ) -> dict[str, tuple[int, tuple[ir.Atom, ...]]]:
    """The lists and tuples written in ``function`` (``pack = [a, b]``), bound once, not a
    parameter, never changed in place (no append, item write or pop), whose every read is as the
    first argument of a call ``reader`` accepts (and not again in that call): what each holds where
    it is read is what it was made of. Each with how many such reads there are, and its items."""
    packs: dict[str, tuple[ir.Atom, ...]] = {}
    bindings: Counter[str] = Counter()
    reads: Counter[str] = Counter()
    joined: Counter[str] = Counter()
    changed: set[str] = set()
    for stmt in ir.walk(function.body):
        for name in ir.defined(stmt):
            bindings[name] += 1
        for name in ir.reads_of(stmt):
            reads[name] += 1
        if isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Pack) \
                and stmt.value.kind in ("list", "tuple"):
            packs[stmt.target] = stmt.value.elts
        value = stmt.value if isinstance(stmt, ir.Assign) else None
        if isinstance(value, ir.Call) and value.args and isinstance(value.args[0], ir.Var) \
                and value.args[0] not in value.args[1:] and reader(value):
            joined[value.args[0].name] += 1
        if isinstance(stmt, (ir.Append, ir.SetItem)):  # (a list that changes)
            changed.add(stmt.target)
        elif isinstance(stmt, ir.Pop):
            changed.add(stmt.source)
    return {name: (joined[name], elts) for name, elts in packs.items()
            if bindings[name] == 1 and name not in function.params and name not in changed
            and name not in function.mutable and reads[name] == joined[name]}


# the first class ``LengthClasses`` gives (the others count down from it)
_LENGTH_CLASSES = -(1 << 40)


def _shaped_as(call: ir.Call, axes: tuple[tuple[int, int], ...] | None,
               ranks: tuple[int | None, ...]) -> ir.Atom | None:
    """The argument whose shape ``call``'s result has, axis for axis, if the registry ties every
    axis of the result to it (``axes``: ``registry.result_axes`` for the arguments' known numbers
    of axes ``ranks``), and the result has as many axes as it (``np.dot(w, h)`` has ``w``'s rows,
    not ``w``'s shape)."""
    if not axes:
        return None
    owner = axes[0][0]
    if ranks[owner] != len(axes) or axes != tuple((owner, k) for k in range(len(axes))):
        return None
    return call.args[owner]


def _is_range(atom: ir.Atom) -> bool:
    return isinstance(atom, ir.Var)


def shape_class(atom: ir.Atom, classes: dict[str, int | None]) -> int | None:
    """The shape class of an atom: ``SCALAR`` for numbers and None, ``None`` when unknown."""
    if isinstance(atom, ir.Var):
        return classes.get(atom.name)
    if isinstance(atom, ir.Const) and (
        atom.value is None or type(atom.value) in (int, float, bool)
    ):
        return SCALAR
    return None


def local_names(function: ir.Function) -> set[str]:
    """Names whose adjoint can be assigned by its first contribution, as in straight-line code.

    Such a name is bound once, directly in one block, and every use that can
    contribute to its adjoint comes after that, directly in the same block.
    """
    defs: dict[str, list[tuple[int, int]]] = {p: [(0, -1)] for p in function.params}
    uses: dict[str, list[tuple[int, int]]] = {}
    # each block, with a number of its own
    blocks: list[tuple[tuple[ir.Stmt, ...], int]] = [(function.body, 0)]
    count = 0
    while blocks:
        body, block = blocks.pop()
        for k, stmt in enumerate(body):
            for name in ir.defined(stmt):
                defs.setdefault(name, []).append((block, k))
            for var in _stmt_inputs(stmt):
                uses.setdefault(var, []).append((block, k))
            for nested in ir.blocks(stmt):
                count += 1
                blocks.append((nested, count))
    if isinstance(function.result, ir.Var):
        uses.setdefault(function.result.name, []).append((0, len(function.body)))
    local = set()
    for name, places in defs.items():
        if len(places) == 1 and name not in function.mutable:
            block, k = places[0]
            if all(b == block and j > k for b, j in uses.get(name, [])):
                local.add(name)
    return local


def loop_bound(function: ir.Function) -> set[str]:
    """Names bound inside a loop body: each iteration overwrites them."""
    bound: set[str] = set()
    for stmt in ir.walk(function.body):
        if isinstance(stmt, (ir.For, ir.While)):
            bound.add(stmt.target) if isinstance(stmt, ir.For) else None
            for inner in ir.walk(stmt.body):
                bound.update(ir.defined(inner))
                if isinstance(inner, ir.Assign) and isinstance(inner.value, ir.Call) \
                        and is_user_function(inner.value.fn.obj):
                    bound.add(inner.target)
    return bound


def first_definitions(function: ir.Function) -> set[int]:
    """Statements that bind a name for the first time, at the top level: nothing to save before
    them."""
    seen = set(function.params)
    first = set()
    for stmt in function.body:
        names = set(ir.defined(stmt))
        if names and not names & seen and not ir.blocks(stmt):
            first.add(id(stmt))
        for inner in ir.walk((stmt,)):
            seen.update(ir.defined(inner))
    return first


def _stmt_inputs(stmt: ir.Stmt) -> list[str]:
    if isinstance(stmt, ir.Assign):
        return [v.name for v in inputs_of(stmt.value)]
    if isinstance(stmt, (ir.Unpack, ir.Append)):
        return [stmt.value.name] if isinstance(stmt.value, ir.Var) else []
    return []


def is_active_value(value: ir.Expr, active: set[str]) -> bool:
    if isinstance(value, (ir.Attr, ir.Raw)):
        return False
    if isinstance(value, ir.Call):
        rule = registry.lookup(value.fn.obj)
        if rule is not None and rule.nondiff:
            return False
    return any(v.name in active for v in _flowing(value))


def _flowing(value: ir.Expr) -> list[ir.Var]:
    """The inputs a gradient can flow back to: not those whose rule is ``registry.zero``
    (``np.full_like(x, v)``)."""
    rule = registry.lookup(value.fn.obj) if isinstance(value, ir.Call) else None
    if rule is not None and rule.nondiff:
        # a shape, a count, zeros like an array: nothing flows back (``np.zeros_like(x)``)
        return []
    if not isinstance(value, ir.Call) or rule is None or registry.zero not in rule.vjps:
        return inputs_of(value)
    flowing = [a for k, a in enumerate(value.args) if rule.vjp(k) is not registry.zero]
    return [a for a in flowing + [a for _, a in value.kwargs] if isinstance(a, ir.Var)]


def atom_active(atom: ir.Expr, active: set[str]) -> TypeGuard[ir.Var]:
    return isinstance(atom, ir.Var) and atom.name in active


def inputs_of(value: ir.Expr) -> list[ir.Var]:
    if isinstance(value, ir.Call):
        atoms = list(value.args) + [a for _, a in value.kwargs]
    elif isinstance(value, ir.Pack):
        atoms = list(value.elts)
    elif isinstance(value, ir.Attr):
        atoms = [value.value]
    elif isinstance(value, ir.Raw):
        atoms = []
    else:
        atoms = [value]
    return [a for a in atoms if isinstance(a, ir.Var)]


def structured_names(function: ir.Function, shapes: tuple[int, ...]) -> set[str]:
    """Names known to hold a list, tuple or dict: unpacked, appended to, packed, container
    parameters, and results of functions that return sequences."""
    structured = {s.value.name for s in ir.walk(function.body) if isinstance(s, ir.Unpack)
                  and isinstance(s.value, ir.Var)}
    structured |= {s.target for s in ir.walk(function.body) if isinstance(s, ir.Append)}
    structured |= {
        p for p, label in zip(function.params, shapes, strict=True) if label in CONTAINERS
    }
    structured |= {s.target for s in ir.walk(function.body) if isinstance(s, ir.Assign)
                   and isinstance(s.value, ir.Call) and registry.returns_sequence(s.value.fn.obj)}
    structured |= {
        s.target
        for s in ir.walk(function.body)
        if isinstance(s, ir.Assign)
        and (
            isinstance(s.value, ir.Pack)
            or isinstance(s.value, ir.Const)
            and isinstance(s.value.value, (list, tuple, dict))
        )
    }
    # and what holds one of those: a copy, or what a function whose result has an argument's kind
    # makes of one
    assignments = [
        s for s in ir.walk(function.body) if isinstance(s, ir.Assign) and s.target not in structured
    ]
    size = -1
    while size != len(structured):
        size = len(structured)
        structured.update(s.target for s in assignments if carries_structure(s.value, structured))
    return structured


def owned_lists(function: ir.Function) -> set[str]:
    """Names that only ever hold ``None`` or lists the function made itself: ``[]``, ``[a, b]``,
    what a call that makes a new list gives (``registry.def_new_list``; where it may give back an
    argument as it is, that argument is an owned list too), or what a tape of such lists gives back.
    No caller holds such a list, nor does another name of the function (a copy of one counts only
    where the copy is its one use), so its pops can be undone by pushing the values back
    (``reverse.Reverser.private_list``)."""
    bindings: dict[str, list[ir.Stmt]] = {}
    uses: Counter[str] = Counter()
    pushed: dict[str, list[ir.Atom]] = {}  # what is appended to each list
    stacked: Counter[str] = Counter()  # how many appends to each list, and pops from it
    checks = checked_only(function)  # tuples that only a check reads: it keeps nothing of them
    for stmt in ir.walk(function.body):
        for name in ir.defined(stmt):
            bindings.setdefault(name, []).append(stmt)
        value = stmt.value if isinstance(stmt, ir.Assign) else None
        if not (isinstance(stmt, ir.Assign) and stmt.target in checks) and not (
                isinstance(value, ir.Call) and registry.identity_read(value.fn.obj) is not None):
            # (a check reads objects by identity: it keeps none of them)
            uses.update(ir.reads_of(stmt))
        if isinstance(stmt, ir.Append):
            uses[stmt.target] += 1
            pushed.setdefault(stmt.target, []).append(stmt.value)
            stacked[stmt.target] += 1
        elif isinstance(stmt, ir.Pop):
            stacked[stmt.source] += 1
    if isinstance(function.result, ir.Var):
        uses[function.result.name] += 1
    owned = set(bindings) - set(function.params)

    def passed(atom: ir.Atom, target: str) -> bool:  # an argument a call may give back as it is
        if isinstance(atom, ir.Const):
            return atom.value is None
        return (
            isinstance(atom, ir.Var)
            and atom.name in owned
            and (atom.name == target or uses[atom.name] == 1)
        )

    def makes(stmt: ir.Stmt) -> bool:
        # off a tape of owned lists: made empty, then only pushed to and popped from
        if isinstance(stmt, ir.Pop):
            tape = stmt.source
            return (
                tape in owned
                and uses[tape] == stacked[tape]
                and all(
                    isinstance(s, ir.Assign) and isinstance(s.value, ir.Const)
                    for s in bindings[tape]
                )
                and all(
                    (isinstance(value, ir.Const) and value.value is None)
                    or (isinstance(value, ir.Var) and value.name in owned)
                    for value in pushed.get(tape, ())
                )
            )
        if not isinstance(stmt, ir.Assign):
            return False
        value = stmt.value
        if isinstance(value, ir.Const):
            return value.value is None or value.value == []
        if isinstance(value, ir.Var):
            return passed(value, stmt.target)
        if isinstance(value, ir.Pack):
            # a list display: a new list (of items others may hold, which a pop keeps)
            return value.kind == "list"
        if not isinstance(value, ir.Call):
            return False
        passes = registry.new_list(value.fn.obj)
        return passes is not None and all(
            passed(value.args[k], stmt.target) for k in passes if k < len(value.args)
        )

    size = -1
    # the largest set that holds: a name is dropped where one binding is not owned
    while size != len(owned):
        size = len(owned)
        owned = {name for name in owned if all(makes(s) for s in bindings[name])}
    return owned


def carries_structure(value: ir.Expr, structured: set[str]) -> bool:
    """Whether an assignment of ``value`` binds a list, tuple or dict because a name of
    ``structured`` holds one: a copy of it, or a call that gives the kind of an argument it is
    passed as (``registry.def_same_kind``: ``assign_item(L, 0, v)`` on a list is a list)."""
    if isinstance(value, ir.Var):
        return value.name in structured
    if not isinstance(value, ir.Call):
        return False
    args = [value.args[k] for k in registry.keeps_kind(value.fn.obj) if k < len(value.args)]
    return any(isinstance(a, ir.Var) and a.name in structured for a in args)


def bind_call(stmt: ir.Assign, error: Callable[[ir.Stmt, str], LocatedError]) -> list[ir.Atom]:
    """A call's arguments in the callee's parameter order, defaults filled in."""
    call = ir.call_of(stmt)
    try:
        bound = inspect.signature(call.fn.obj).bind(*call.args, **dict(call.kwargs))
    except TypeError as exc:
        raise error(
            stmt, f"the call to {call.fn.hint} does not match its parameters: {exc}"
        ) from None
    bound.apply_defaults()
    return [
        v
        if isinstance(v, (ir.Var, ir.Const, ir.Ref))
        else ir.Const(v)
        if isinstance(v, (int, float, bool, str, type(None)))
        else ir.Ref(v, f"{call.fn.hint}_{k}")
        for k, v in bound.arguments.items()
    ]


def call_labels(args: list[ir.Atom], classes: dict[str, int | None], structured: set[str],
                known: Kinds | None = None, at: ir.Stmt | None = None) -> tuple[int, ...]:
    """Shape labels for a callee's parameters, numbered in order of first appearance; an array
    ``known`` to be numpy's, of so many axes, keeps that in its label (``kinds.labelled``)."""
    numbering: dict[Any, int] = {}
    labels = []
    for k, a in enumerate(args):
        label = shape_class(a, classes)
        fact = known.of(a, at) if known is not None and isinstance(a, ir.Var) else None
        if fact == DICT or fact == A_SET:
            # a dict (a set) where every binding of it makes one: its loops step through its keys
            # (members)
            labels.append(MAPPING if fact == DICT else SET)
        elif isinstance(a, ir.Var) and a.name in structured:
            # a list or a tuple where every binding makes one (read by position), else any
            # container
            labels.append(CONTAINER if known is not None and known.sequence(a, at)
                          else ANY_CONTAINER)
        elif label == SCALAR:
            # a number the caller knows is 64 bits wide (``kinds.wide_numbers``), or one that may
            # be narrower
            wide = isinstance(a, ir.Const) and type(a.value) in (int, float) or \
                known is not None and isinstance(a, ir.Var) and a.name in known.wide
            labels.append(SCALAR if wide else NARROW_NUMBER)
        else:
            # a numpy array's axes and kind, or 0
            kind = known.label(a, at) if known is not None else 0
            number = numbering.setdefault(
                (label if label is not None else ("unknown", k), kind), len(numbering)
            )
            labels.append(number + kind)
    return tuple(labels)


class callee_results:  # noqa: N801 -- used as a function: ``kinds_of(f, labels, callee_results(..))``
    """What a call of one of the user's functions gives, for ``kinds.kinds_of``: the fact of the
    callee's result, found by ``kinds_of`` on its IR (``normalized``) with its parameters labelled
    by the arguments' facts (``kinds.fact_label``: a parameter is claimed what its argument is, no
    more). So ``k = field(x, y)`` is known to be an array of floats of one axis where ``field``'s
    result is, given arrays of one axis: its reverse pass can keep a shape where it reads only one
    (``saving.shape_only``). A call that binds keywords or defaults, a function outside the user's
    code, one that calls itself on the way, or one ast_ad cannot read gives nothing (``UNKNOWN``).

    (An object, not a closure: a closure that passes itself on is a cycle, left to the collector.)
    """

    def __init__(self, normalized: Callable[[Any], ir.Function]):
        self.normalized = normalized
        self.made: dict[tuple[Any, tuple[Fact, ...]], Fact] = {}
        self.under_way: set[Any] = set()
        self.functions: dict[Any, ir.Function | None] = {}
        self.shapes: dict[tuple[Any, tuple[Fact, ...], Any], tuple[int, ...] | None] = {}
        self.shaped: dict[tuple[Any, tuple[Fact, ...], tuple[int, ...]], int | None] = {}

    def __call__(self, fn: Any, args: list[Fact]) -> Fact:
        if not is_user_function(fn) or is_library(fn) or fn in self.under_way:
            return UNKNOWN
        key = (fn, tuple(args))
        if key in self.made:
            return self.made[key]
        if fn not in self.functions:
            try:
                self.functions[fn] = self.normalized(fn)
            except Exception:  # noqa: BLE001 -- its own transform reports it where it is derived
                self.functions[fn] = None
        function = self.functions[fn]
        if function is None or len(function.params) != len(args) \
                or not isinstance(function.result, ir.Var):
            self.made[key] = UNKNOWN
            return UNKNOWN
        self.under_way.add(fn)
        try:
            labels = tuple(fact_label(k, a) for k, a in enumerate(args))
            found = kinds_of(function, labels, self).facts.get(function.result.name, UNKNOWN)
        finally:
            self.under_way.discard(fn)
        self.made[key] = found
        return found

    def shape(self, fn: Any, args: list[Fact],
              passed: tuple[tuple[int, ...] | None, ...] = ()) -> tuple[int, ...] | None:
        """The shape written in ``fn``'s code that its result has, given arguments of facts
        ``args`` and, where the caller knows them, of shapes ``passed`` (``constant_shapes`` of its
        IR, the parameters of those shapes at this call), if it has one."""
        def found(function: ir.Function) -> tuple[int, ...] | None:
            assert isinstance(function.result, ir.Var)
            labels = tuple(fact_label(k, a) for k, a in enumerate(args))
            kinds = kinds_of(function, labels, self)
            return constant_shapes(
                function, kinds,
                lambda f, call, at, given: self.shape(
                    f, [kinds.of(a, at) for a in call.args], given),
                passed if len(passed) == len(function.params) else None,
            ).get(function.result.name)
        shape: tuple[int, ...] | None = self._of_its_code(
            self.shapes, (fn, tuple(args), passed), fn, args, found)
        return shape

    def _of_its_code(self, table: dict[Any, Any], key: Any, fn: Any, args: list[Fact],
                     compute: Callable[[ir.Function], Any]) -> Any:
        """``compute`` of ``fn``'s IR, cached in ``table`` under ``key``: ``None`` for a function
        outside the user's code, one under way (a call of itself on the way), one ast_ad cannot
        read, or one whose parameters the arguments ``args`` do not fit one for one."""
        if not is_user_function(fn) or is_library(fn) or fn in self.under_way:
            return None
        if key in table:
            return table[key]
        self(fn, args)  # (its IR read, or found unreadable)
        function = self.functions.get(fn)
        found = None
        if function is not None and len(function.params) == len(args) \
                and isinstance(function.result, ir.Var):
            self.under_way.add(fn)
            try:
                found = compute(function)
            finally:
                self.under_way.discard(fn)
        table[key] = found
        return found

    def shaped_as(self, fn: Any, args: list[Fact], alike: tuple[int, ...] = ()) -> int | None:
        """The position of the parameter whose shape ``fn``'s result has, given arguments of facts
        ``args`` where ``alike`` gives, for each, the first argument known to have its shape (the
        caller's shape classes), where its own code says so: its shape classes (``classes_of``,
        its parameters labelled by their arguments' facts, ``kinds.fact_label``, those of one
        shape alike) give its result the class of that parameter, which no statement binds
        again. ``step(x, v)`` returning ``x + 0.1 * v`` has ``x``'s shape where ``v`` has it too:
        the caller's result of it is of its argument's class. ``None`` where nothing says so."""
        alike = alike or tuple(range(len(args)))

        def found(function: ir.Function) -> int | None:
            assert isinstance(function.result, ir.Var)
            labels = tuple(fact_label(alike[k], a) for k, a in enumerate(args))
            kinds = kinds_of(function, labels, self)
            classes = classes_of(function, labels, kinds, self)
            rebound = {name for stmt in ir.walk(function.body) for name in ir.defined(stmt)}
            result = classes.get(function.result.name)
            owners = [k for k, p in enumerate(function.params)
                      if result is not None and result != SCALAR and p not in rebound
                      and classes.get(p) == result]
            return owners[0] if owners else None  # (several: of one shape at this call)
        owner: int | None = self._of_its_code(self.shaped, (fn, tuple(args), alike), fn, args,
                                              found)
        return owner


def is_user_function(fn: Any) -> bool:
    """A Python function ast_ad should differentiate through (no rule registered for it; not
    ast_ad's own)."""
    return inspect.isfunction(fn) and registry.lookup(fn) is None and \
        not (getattr(fn, "__module__", None) or "").startswith("ast_ad.")


def is_library(fn: Any) -> bool:
    """Whether ``fn`` is defined in an installed package or Python's own library, not in the user's
    code."""
    filename = os.path.realpath(getattr(getattr(fn, "__code__", None), "co_filename", "") or "")
    return any(filename.startswith(os.path.realpath(path) + os.sep) for path in _LIBRARY_PATHS)


_LIBRARY_PATHS = sorted(
    {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
)


def library_call(stmt: ir.Stmt, hint: str, fn: Any) -> MissingRuleError:
    """A call of an installed library's function that has no rule, where it is differentiated:
    ast_ad reads the user's code, not a library's, whose source may not be in its language or give
    its numbers."""
    module = getattr(fn, "__module__", None) or "an installed package"
    return at_line(
        MissingRuleError,
        stmt,
        f"{hint} comes from {module}, an installed library, and has no gradient "
        "rule: ast_ad differentiates your code, not a library's source; compute this with numpy, "
        "or "
        "register a rule for it (ast_ad.extend.defvjp, ast_ad.extend.defjvp)",
    )


def forward_activity(function: ir.Function, argnums: tuple[int, ...]) -> set[str]:
    """The names whose tangents can be nonzero: ``activity``, except that a call whose
    differentiated arguments all have zero forward rules (``unbroadcast(g, x)``, where ``x`` gives
    only a shape) is not."""
    return activity(function, argnums, _carries)


def _carries(value: ir.Expr, active: set[str]) -> bool:
    if not is_active_value(value, active):
        return False
    rule = registry.lookup(value.fn.obj) if isinstance(value, ir.Call) else None
    if (
        not isinstance(value, ir.Call)
        or rule is None
        or any(atom_active(a, active) for _, a in value.kwargs)
    ):
        return True
    return any(rule.jvp(k) is not registry.zero for k, a in enumerate(value.args)
               if isinstance(a, ir.Var) and a.name in active)


def unfollowed(fn: Any) -> str:
    """What to write instead of an iterator of differentiated values (``list(zip(...))``, as a loop
    over an iterator reads it): ast_ad follows iterators where a loop unfolds them."""
    if fn in (zip, map, filter, enumerate, reversed, iter):
        return (
            ": ast_ad follows an iterator of differentiated values where a loop unfolds it: loop "
            "over zip(xs, ys) with one name per sequence (for a, b in zip(xs, ys)), or build the "
            "list with a comprehension ([f(v) for v in xs])"
        )
    return ""


def missing_rule(stmt: ir.Stmt, message: str, register: str) -> MissingRuleError:
    """A call without a rule, at its line: what to write instead, where the callee is no primitive
    of the user's (``register``: how to register one) but a class of theirs or a derivative of
    ast_ad's bound to a name."""
    call = stmt.value if isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Call) else None
    obj = call.fn.obj if call is not None else None
    if inspect.isclass(obj) and not (obj.__module__ or "").startswith(
        ("builtins", "numpy", "ast_ad")
    ):
        said = (
            f"{call.fn.hint if call else 'this'} is a class of yours: objects built inside a "
            "differentiated "
            "function are not followed yet; build the object outside and pass its arrays in, or "
            "write its "
            "computation as functions of them"
        )
    elif obj in (set, frozenset):
        said = (
            "a set of differentiated values has no derivative ast_ad follows (a set keeps no "
            "order, and one of two equal values): use a list"
        )
    elif (
        obj is not None
        and type(obj).__module__.startswith("ast_ad.")
        and not inspect.isfunction(obj)
    ):
        said = (
            f"{call.fn.hint if call else 'this'} is a derivative made by ast_ad and bound to a "
            "local name, "
            "which is not followed yet: call it where it is made, ast_ad.grad(g)(x)"
        )
    elif obj is operator.getitem or obj is runtime.list_item:
        said = (
            "this line reads an item at an index or a key computed from the differentiated "
            "inputs, which has no derivative: compute the index or key from values that are not "
            "differentiated"
        )
    else:
        said = f"{message}; if it is your own primitive, {register}"
    return at_line(MissingRuleError, stmt, said)


def at_line(error: type[E], stmt: ir.Stmt, message: str) -> E:
    """``error(message)`` located at the user's line of ``stmt``."""
    return error(message, stmt.line.filename, stmt.line.lineno, stmt.line.text)


def packed_result(function: ir.Function) -> ir.Pack | None:
    """The tuple the function returns, where it builds it at the top level as its last binding of
    the name."""
    result = function.result
    if not isinstance(result, ir.Var) or result.name in function.mutable:
        return None
    for stmt in function.body:
        if (
            isinstance(stmt, ir.Assign)
            and stmt.target == result.name
            and isinstance(stmt.value, ir.Pack)
            and stmt.value.kind == "tuple"
        ):
            return stmt.value
    return None


@record
class InPlace:
    """Where reverse mode writes arrays in place (``in_place_writes``).

    ``loops`` maps each loop that owns arrays (the outermost loop in which an array is only ever
    rebound by writes to its own items) to those arrays; ``writes`` and ``reads`` are the ids of the
    statements ``y = assign_item(y, i, v)`` and ``t = y[i]`` inside such loops, with the array's
    name.
    """

    loops: dict[int, tuple[str, ...]]
    writes: dict[int, str]
    reads: dict[int, str]
    # arrays a loop only reads entry by entry (``accumulated_reads``): loop -> arrays, read -> array
    accumulated: dict[int, tuple[str, ...]] = field(default_factory=dict)
    adds: dict[int, str] = field(default_factory=dict)
    # reads at the function's own level of arrays it reads through several indices, whose adjoints
    # add into one array (``accumulated_reads``), made where the backward pass first adds into it:
    # read -> array
    straight: dict[int, str] = field(default_factory=dict)


def _item_read(stmt: ir.Stmt) -> tuple[str, ir.Atom] | None:
    """``(y, i)`` for ``t = y[i]``: a read of an item of the local ``y``."""
    if (
        isinstance(stmt, ir.Assign)
        and isinstance(stmt.value, ir.Call)
        and stmt.value.fn.obj is operator.getitem
        and not stmt.value.kwargs
        and len(stmt.value.args) == 2
        and isinstance(stmt.value.args[0], ir.Var)
    ):
        return stmt.value.args[0].name, stmt.value.args[1]
    return None


def _self_write(stmt: ir.Stmt) -> TypeGuard[ir.Assign]:
    return isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Call) \
        and stmt.value.fn.obj is runtime.assign_item and isinstance(stmt.value.args[0], ir.Var) \
        and stmt.value.args[0].name == stmt.target


def in_place_writes(function: ir.Function, useful: set[str], structured: set[str],
                    classes: dict[str, int | None]) -> InPlace:
    """The arrays a loop only changes item by item, which reverse and forward mode can write in
    place.

    In reverse mode such a write saves the entries it overwrites (not the whole array) and the
    backward pass puts them back, in reverse order, so the array is as it was at each step when the
    backward pass reads it: O(what changes) per write instead of a copy of the array; forward mode
    writes the tangent's entries beside them. The array must have an adjoint (in forward mode, a
    tangent: ``useful`` is then the active names), hold no container, and be rebound inside the loop
    by nothing but those writes; the loop must not iterate over it. The generated code copies it
    once, when the loop starts.

    The fact this relies on: no other variable reaches the array while the loop writes it, so that
    writing a private copy changes what Python's write changes and nothing else. It is the memory
    model's (``aliasing``): an array it cannot prove unshared has a guard before its writes
    (``guarded``), and keeps the general path, a new array a write, where the guard sees the object
    Python would change.
    """
    loops: dict[int, tuple[str, ...]] = {}
    writes: dict[int, str] = {}
    reads: dict[int, str] = {}
    # another name may see these: a private copy would hide it from the guard
    shared = guarded(function.body)

    def claim(loop: ir.For | ir.While, owned: frozenset[str]) -> frozenset[str]:
        inner = list(ir.walk(loop.body))
        iterated = (
            {loop.iter.name}
            if isinstance(loop, ir.For) and isinstance(loop.iter, ir.Var)
            else set()
        )
        names = {s.target for s in inner if _self_write(s)} - owned - iterated
        ok = tuple(sorted(n for n in names if n in useful and n not in structured
                          and n not in shared and classes.get(n) != SCALAR
                          and all(_self_write(s) for s in inner if n in ir.defined(s))))
        if ok:
            loops[id(loop)] = ok
            for s in inner:
                if _self_write(s) and s.target in ok:
                    writes[id(s)] = s.target
                elif (read := _item_read(s)) is not None and read[0] in ok:
                    reads[id(s)] = read[0]
        return frozenset(ok)

    _claim_loops(function.body, claim)
    return InPlace(loops, writes, reads)


def straight_writes(function: ir.Function, kinds: Kinds) -> dict[int, str]:
    """The item writes at the function's own level (no loop or branch around them), ``new =
    assign_item(old, i, v)``, that can write into ``old`` in place rather than into a copy: by
    statement (``id``), ``old``. Forward mode writes them so (``old[i] = v``, then ``new = old``):
    a chain of writes into an array it made, or into an adjoint that code it made again writes
    item by item (``x_bar[1] += ...`` of a gradient, lowered), costs no copy a write.

    The facts this relies on: ``old`` is a numpy array of floats (``kinds``) bound once, at the
    function's level before the write, by a call the registry says returns an array nothing else
    holds (``makes_fresh_array``: ``assign_item`` copies, ``owned_adjoint`` makes one); it is
    no parameter, no name the memory model guards (``guarded``: one another name may reach) and not
    the function's result; and nothing reads it but this write (as the array written, not in its
    index or value) and, before it, reads of one item that give a number (a copy, no view). So no
    name reaches ``old``'s object after the write but ``new``, which is that object: the write
    changes nothing any other statement reads."""
    position = {id(stmt): k for k, stmt in enumerate(function.body)}
    binds: Counter[str] = Counter(function.params)
    readers: dict[str, list[ir.Stmt]] = {}
    for stmt in ir.walk(function.body):
        binds.update(ir.defined(stmt))
        for name in set(ir.reads_of(stmt)):
            readers.setdefault(name, []).append(stmt)
    made: dict[str, ir.Stmt] = {}
    for stmt in function.body:
        if isinstance(stmt, ir.Assign) and makes_fresh_array(stmt.value, kinds):
            made[stmt.target] = stmt
    result = function.result.name if isinstance(function.result, ir.Var) else None
    shared = guarded(function.body) | set(function.params) | set(function.mutable)
    found: dict[int, str] = {}
    for k, stmt in enumerate(function.body):
        value = stmt.value if isinstance(stmt, ir.Assign) else None
        if not (type(value) is ir.Call and value.fn.obj is runtime.assign_item
                and len(value.args) == 3 and not value.kwargs
                and type(value.args[0]) is ir.Var):
            continue
        assert isinstance(stmt, ir.Assign)  # (its value is the write)
        old = value.args[0].name
        maker = made.get(old)
        if (
            maker is None
            or old == stmt.target
            or old == result
            or old in shared
            or binds[old] != 1
            or position[id(maker)] >= k
            or not kinds.float_array(old)
            or any(type(a) is ir.Var and a.name == old for a in value.args[1:])
        ):
            continue
        if all(
            reader is stmt
            or (
                id(reader) in position
                and position[id(reader)] < k
                and (read := _item_read(reader)) is not None
                and read[0] == old
                and isinstance(reader, ir.Assign)
                and kinds.is_number(ir.Var(reader.target), reader)
            )
            for reader in readers.get(old, [])
        ):
            found[id(stmt)] = old
    return found


def makes_fresh_array(value: ir.Expr, kinds: Kinds) -> bool:
    """Whether ``value`` is a call the registry says returns a new array that nothing else holds
    (``registry.def_fresh``), where the argument that fact names is an array (``kinds``)."""
    if type(value) is not ir.Call:
        return False
    found = registry.fresh_result(value.fn.obj)
    if found is None:
        return False
    k = found[0]
    if k is None:
        return True
    arg = value.args[k] if k < len(value.args) else None
    return type(arg) is ir.Var and (kinds.rank(arg.name) or 0) >= 1


def _claim_loops(body: tuple[ir.Stmt, ...],
                 claim: Callable[[ir.For | ir.While, frozenset[str]], frozenset[str]]) -> None:
    """Visit every loop of ``body``, outer loops first, with the arrays the loops around it own
    (written in place, or read entry by entry); ``claim(loop, owned)`` decides what this loop owns
    for the loops inside."""
    blocks: list[tuple[tuple[ir.Stmt, ...], frozenset[str]]] = [(body, frozenset())]
    while blocks:
        block, owned = blocks.pop()
        for stmt in block:
            if isinstance(stmt, (ir.For, ir.While)):
                blocks.append((stmt.body, owned | claim(stmt, owned)))
            elif isinstance(stmt, ir.If):
                blocks += [(stmt.body, owned), (stmt.orelse, owned)]


def guarded(body: tuple[ir.Stmt, ...]) -> frozenset[str]:
    """The names whose objects the memory model guards before a write anywhere in ``body``: another
    live variable may reach them (``registry.def_guard``, ``aliasing.Memory.check_apart``). (A
    guard under a flag the argument kinds prove false is gone before: ``optimize.guards``.)"""
    names: set[str] = set()
    for stmt in ir.walk(body):
        value = stmt.value if isinstance(stmt, ir.Assign) else None
        if isinstance(value, ir.Call):
            k = registry.guarded_argument(value.fn.obj)
            guarded = value.args[k] if k is not None and k < len(value.args) else None
            if isinstance(guarded, ir.Var):
                names.add(guarded.name)
    return frozenset(names)


def accumulated_reads(function: ir.Function, useful: set[str], structured: set[str], known: Kinds,
                      in_place: InPlace, complexes: frozenset[str] = frozenset(),
                      loops: bool = True) -> InPlace:
    """``in_place`` with the arrays a loop only reads, entry by entry, whose adjoints it adds into
    in place; and those the function's own level reads through several indices.

    ``x[i]`` (an entry, a row, a slice: a basic index) of a numpy array of floats
    (``ast_ad.analysis.kinds``), in a loop that binds no ``x``: the backward pass adds each read's
    adjoint into those entries (``x_bar[i] += g``) of an adjoint array that the loop owns (made
    before it, as a written array's is), rather than keep the step's adjoint and index to sum after
    the loop.

    ``x[:h]``, ``x[h:2 * h]``... at the function's own level (no loop or branch around them), two
    or more reads of a real array of floats bound once (or a parameter never bound): the backward
    pass makes ``x``'s adjoint an array of its own at the first read it adds from (the last read
    whose value has an adjoint), and adds each read's adjoint into its entries (``x_bar[index] +=
    g``), where each read made a whole array of zeros and the sum added them. The facts this
    relies on: nothing binds ``x`` again, so no contribution after the first assigns its adjoint
    anew (each adds, to a new array or in place), and the array made there is held by nothing
    else. ``loops``: the loops' reads too (not in a callee's backward pass, which keeps a loop's
    arrays as new arrays).
    """
    accumulated: dict[int, tuple[str, ...]] = {}
    adds: dict[int, str] = {}
    straight: dict[int, str] = {}
    bindings: dict[str, int] = {}
    for stmt in ir.walk(function.body):
        for name in ir.defined(stmt):
            bindings[name] = bindings.get(name, 0) + 1
    level: dict[str, list[ir.Stmt]] = {}
    for stmt in function.body:
        read = _item_read(stmt)
        if read is not None and isinstance(stmt, ir.Assign) and stmt.target not in complexes:
            level.setdefault(read[0], []).append(stmt)
    for name, reads in level.items():
        fact = known.of(ir.Var(name), reads[0])
        once = bindings.get(name, 0) == (0 if name in function.params else 1)
        if (
            len(reads) >= 2
            and once
            and name in useful
            and name not in structured
            and name not in complexes
            and fact[0] == "num"
            and fact[1] >= 1
            and fact[2]
        ):
            adds.update((id(s), name) for s in reads)
            straight.update((id(s), name) for s in reads)

    def claim(loop: ir.For | ir.While, owned: frozenset[str]) -> frozenset[str]:
        inner = list(ir.walk(loop.body))
        bound = {n for s in [loop, *inner] for n in ir.defined(s)}
        reads = [(s, read) for s in inner if (read := _item_read(s)) is not None]
        mine = in_place.loops.get(id(loop), ())
        names = {name for _, (name, _) in reads} - bound - owned - set(mine) - structured
        ok = tuple(sorted(n for n in names if n in useful and n not in complexes and all(
            known.basic_read(ir.Var(name), index, s) for s, (name, index) in reads if name == n)))
        if ok:
            accumulated[id(loop)] = ok
            adds.update({id(s): name for s, (name, _) in reads if name in ok})
        return frozenset(ok) | frozenset(mine)

    if loops:
        _claim_loops(function.body, claim)
    return InPlace(in_place.loops, in_place.writes, in_place.reads, accumulated, adds, straight)


# ---- binomial checkpointing ----------------------------------------------------------------------
def checkpoint_state(function: ir.Function, position: int, in_place: InPlace,
                     body_of: Callable[[Any], ir.Function]) -> tuple[tuple[str, ...], str | None]:
    """The loop-carried state that snapshots of the loop at ``function.body[position]`` keep, or why
    that loop is not checkpointed (``grad(f, checkpoints=c)``; see ``ast_ad.revolve``).

    The state is every name the loop body rebinds that is bound before the loop (to a value: not the
    ``None`` that names bound in a loop start with) or read in a step before that step binds it:
    from those, the body computes any step again. A loop is checkpointed when computing one of its
    steps again gives what the first run gave and changes nothing else: a ``for`` loop (a ``while``
    loop's length is unknown when it starts) that does not break, prints, asserts, appends to or
    pops from a list, writes arrays in place (its tape is already O(what changes)), or calls a
    function ast_ad has no rule for (which might not give the same result twice).
    """
    loop = function.body[position]
    if not isinstance(loop, ir.For):
        return (), "a while loop's length is not known when it starts"
    why = _not_repeatable(loop.body, in_place, set(), body_of)
    if why is not None:
        return (), why
    rebound = dict.fromkeys(n for s in ir.walk(loop.body) for n in ir.defined(s))
    before = set(function.params) | {
        n
        for s in ir.walk(function.body[:position])
        for n in ir.defined(s)
        if not (isinstance(s, ir.Assign) and s.value == ir.Const(None))
    }
    exposed = _exposed(loop.body, {loop.target})
    return tuple(n for n in rebound if n != loop.target and (n in before or n in exposed)), None


def _not_repeatable(body: tuple[ir.Stmt, ...], in_place: InPlace, seen: set[int],
                    body_of: Callable[[Any], ir.Function]) -> str | None:
    for stmt in ir.walk(body):
        if isinstance(stmt, ir.Break):
            return "it may break: its length is not known when it starts"
        if isinstance(stmt, ir.Effect):
            return f"line {stmt.line.lineno} has an effect, which computing the step again " \
                   "would repeat"
        if isinstance(stmt, (ir.Append, ir.Pop)):
            return f"line {stmt.line.lineno} changes a list, which the snapshots would share"
        if id(stmt) in in_place.loops or id(stmt) in in_place.writes:
            return "it writes arrays in place, and so tapes only the entries each write changes"
        if isinstance(stmt, ir.While):  # its test runs again with the step (``while rng() > 0.5``)
            called = _raw_calls(stmt.test)
        elif isinstance(stmt, ir.Assign):
            called = _raw_calls(stmt.value) if isinstance(stmt.value, ir.Raw) else \
                [stmt.value.fn] if isinstance(stmt.value, ir.Call) else []
        else:
            continue
        for ref in called:
            if ref is None:
                return (
                    f"line {stmt.line.lineno} calls a function ast_ad cannot name, which may not "
                    "give the "
                    "same result when the step is computed again"
                )
            if isinstance(ref.obj, type) or registry.lookup(ref.obj) is not None:
                continue
            if is_user_function(ref.obj) and id(ref.obj) not in seen:
                # the callee's own body (``body_of``: the driver's), checked the same way
                seen.add(id(ref.obj))
                why = _not_repeatable(body_of(ref.obj).body, InPlace({}, {}, {}), seen, body_of)
                if why is not None:
                    return f"it calls {ref.hint}, where {why}"
            elif not is_user_function(ref.obj):
                return (
                    f"line {stmt.line.lineno} calls {ref.hint}, which has no rule and so may not "
                    "give the "
                    "same result when the step is computed again"
                )
    return None


def _raw_calls(raw: ir.Raw) -> list[ir.Ref | None]:
    """What an expression kept as written calls: each function, reached from the objects it names
    (``np.random.rand`` from ``np``); ``None`` for a call of anything else (a computed value)."""
    called: list[ir.Ref | None] = []
    for node in gast.walk(raw.node):
        if not isinstance(node, gast.Call):
            continue
        func, attrs = node.func, []
        while isinstance(func, gast.Attribute):
            attrs.append(func.attr)
            func = func.value
        if not (isinstance(func, gast.Name) and func.id.startswith(syntax.MARK)):
            called.append(None)
            continue
        ref = raw.refs[int(func.id[1:])]
        obj = ref.obj
        for attr in reversed(attrs):
            obj = getattr(obj, attr, None)
        called.append(
            ir.Ref(obj, ".".join([ref.hint, *reversed(attrs)])) if callable(obj) else None
        )
    return called


def _exposed(body: tuple[ir.Stmt, ...], written: set[str]) -> set[str]:
    """The names ``body`` reads before it has surely bound them (``written``: those bound
    already)."""
    found: set[str] = set()
    for stmt in body:
        found |= set(ir.reads_of(stmt)) - written
        if isinstance(stmt, ir.If):
            found |= _exposed(stmt.body, set(written)) | _exposed(stmt.orelse, set(written))
            written |= _bound(stmt.body) & _bound(stmt.orelse)
        elif isinstance(stmt, (ir.For, ir.While)):
            found |= _exposed(stmt.body, written | set(ir.defined(stmt)))
        else:
            written |= set(ir.defined(stmt))
    return found


def _bound(body: tuple[ir.Stmt, ...]) -> set[str]:
    """The names ``body`` surely binds (at its own level, or in both branches of an ``if``)."""
    names: set[str] = set()
    for stmt in body:
        if isinstance(stmt, ir.If):
            names |= _bound(stmt.body) & _bound(stmt.orelse)
        elif not isinstance(stmt, (ir.For, ir.While)):
            names |= set(ir.defined(stmt))
    return names
