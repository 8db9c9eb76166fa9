"""What each name holds, where that is certain: an integer, a number, or a numpy array of numbers
with a known number of axes. Reverse and forward mode read these facts to write what a careful
person writes by hand: no ``unbroadcast`` where both sides are numbers, ``y[i]`` saved as it is
where it is a number (numbers cannot change), and an entry's adjoint read as ``y_bar[i]``.

>>> import numpy as np
>>> from ast_ad import transform
>>> def f(x):
...     y = np.ones(x.shape[0])
...     for i in range(1, x.shape[0]):
...         y[i] = y[i - 1] * x[i]
...     return np.sum(y)
>>> facts = kinds_of(transform.normalized(f), (labelled(0, np.zeros(3)),))
>>> facts.rank("y"), facts.rank("x_item"), facts.rank("t2"), facts.is_int("t1")
(1, 0, 0, True)

A fact is claimed only where every statement that binds the name gives it (a fixpoint over the
statements, for loops), starting from the parameters' labels: ``labelled`` marks a numpy array of
numbers with its number of axes and whether its entries are floats (a global numpy array carries its
own, checked before each call: ``load.Loaded.refresh``). Where a statement reads a name that an
earlier statement of its own block bound, it sees that binding's fact: a loop's variable is an
integer inside a loop over a ``range`` (before the loop it is ``None``), and so is ``i = r[k]``
after it. A list only pushed to and popped from (a gradient's tape, when ast_ad transforms its own
code again) gives back what was pushed. Anything not understood here is simply not known, and the
code stays general there.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import gast
import numpy as np

from ast_ad import runtime
from ast_ad.core import registry
from ast_ad.core.records import record
from ast_ad.ir import nodes as ir
from ast_ad.ir import syntax

# a parameter label at or above this one names a numpy array of numbers (``labelled``)
RANKED = 1 << 24
# a numpy array's label carries, at and above this one, which of all the arguments' axes have the
# length of each of its axes (``labelled``; a multiple of ``3 * RANKED``, so that the rank and kind
# read below it stay as they are)
AXES = 3 * RANKED << 12
# each axis of such a label, in a field of this many values: the first (argument, axis) of all the
# arguments, in order, with its length (``axis_id``), 0 for none
_AXIS_FIELD = 1 << 20

# the facts, as small tuples: ("int",) an integer (not a bool); ("num", rank, inexact) a number
# (rank 0) or a numpy array of numbers with ``rank`` axes, of floats where ``inexact``; ("shape",
# rank) an array's shape; ("ints", k) a tuple of k integers; ("index", k) a tuple of integers and
# slices, k of them integers (as an index it takes k axes away); ("range",) a range; ("items",
# facts) a tuple of numbers and numpy arrays, each with its fact; ("dict",) a dict; ("sequence",)
# a list or a tuple (of which nothing more is known); ("set",) a set
Fact = tuple[Any, ...]
INT: Fact = ("int",)
RANGE: Fact = ("range",)
SLICE: Fact = ("index", 0)  # a slice, as an index: it takes no axis away
UNKNOWN: Fact = ("?",)
NONE: Fact = ("none",)
# a name normalize binds to None before the loop that binds it to numbers
MAYBE: Fact = ("number or None",)
DICT: Fact = ("dict",)
SEQUENCE: Fact = ("sequence",)
A_SET: Fact = ("set",)

_ALLOCATE = {np.ones, np.zeros, np.empty}
_COMPARISONS = {operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge}
# reductions along an ``axis`` given second
_ALONG_AXIS = {np.sum, np.mean, np.prod, np.max, np.min, np.amax, np.amin, np.var, np.std,
               np.nansum, np.nanmean}
_LIKE = {np.ones_like, np.zeros_like, np.empty_like}
_INTEGER_OPS = {
    operator.add,
    operator.sub,
    operator.mul,
    operator.floordiv,
    operator.mod,
    operator.neg,
    operator.pos,
    abs,
    operator.abs,
}
_ARITHMETIC = {
    operator.add,
    operator.sub,
    operator.mul,
    operator.truediv,
    operator.pow,
    operator.neg,
    operator.pos,
    operator.abs,
}


def labelled(position: int, value: Any, axes: tuple[int, ...] = ()) -> int:
    """The shape label of a parameter at ``position``: its position, with a numpy array of numbers'
    number of axes and kind (float or not) encoded above ``RANKED``, so that generated code can rely
    on them, and above ``AXES`` the ``axes``: for each of its axes, the first axis of all the
    arguments' with that length (``axis_id``; ``api.arguments.shape_labels``), so that generated
    code can rely on equal lengths (``np.dot(w, h) + np.dot(u, x)`` needs no ``unbroadcast`` where
    ``w`` and ``u`` have as many rows)."""
    if type(value) is np.ndarray and value.dtype.kind in "biufc":
        code = 0
        for axis in reversed(axes):
            code = code * _AXIS_FIELD + axis
        return _encoded(position, value.ndim, value.dtype.kind in "fc",
                        value.dtype.kind == "c") + AXES * code
    return position


def axis_id(position: int, axis: int) -> int:
    """The number an axis of an argument has in array labels (``labelled``): each axis of each
    argument its own, from 1."""
    return position * 64 + axis + 1  # (numpy's arrays have at most 64 axes)


def without_axes(label: int) -> int:
    """``label`` without what it says of the lengths of its axes (``labelled``)."""
    return label % AXES if label >= AXES else label


def label_axes(label: int) -> tuple[int, ...] | None:
    """The axes a parameter's label says the lengths of its axes are (``labelled``), or ``None``
    where it says nothing of them."""
    if label < AXES:
        return None
    rank = label_fact(label)[1]
    code = label // AXES
    out = []
    for _ in range(rank):
        code, axis = divmod(code, _AXIS_FIELD)
        out.append(axis)
    return tuple(out)


def _encoded(position: int, rank: int, inexact: bool, complex_: bool = False) -> int:
    return position + RANKED * (1 + 3 * rank + inexact + complex_)


# a parameter's label for a complex number (``shape_labels``)
COMPLEX_NUMBER = -4
# a parameter's label for a number that may be a narrow float (numpy's float32 or float16, or a
# callee's number its caller cannot say is wide: ``activity.call_labels``); ``-1`` is a number of
# 64 bits or more (a Python int or float, numpy's float64, int64 or int32: ``shape_labels``)
NARROW_NUMBER = -7
# a parameter's label for a dict (a container whose positions are not its keys), and for a set:
# a loop over either steps through its keys or members (``optimize.keyed``)
MAPPING = -5
SET = -6
# a callee parameter's label for a list, a tuple or a dict, where the caller cannot say which (a
# loop over it is refused at run time if it is a dict: ``runtime.loop_length``)
ANY_CONTAINER = -8
# added to a callee parameter's label of an array of which nothing more is known, where the
# caller's array may be complex (``complexness.complex_labels``)
COMPLEX_UNKNOWN = RANKED // 2


def fact_label(position: int, fact: Fact) -> int:
    """A callee parameter's label that claims ``fact`` of its argument and no more (``kinds_of``
    reads it back as ``fact``): a numpy array's axes and kind, a number, a dict, a set, or
    nothing."""
    if fact[0] == "num" and fact[1] >= 1:
        return _encoded(position, fact[1], fact[2])
    if fact == INT or fact[0] == "num" and fact[1] == 0:
        # a number, no more: read back, a number not claimed inexact (``label_fact``), which
        # withholds what only a float allows (``float_array``, ``wide_float``) and claims its
        # rank, which is what decides an ``unbroadcast``
        return NARROW_NUMBER
    if fact == DICT or fact == A_SET:
        return MAPPING if fact == DICT else SET  # (read back as the fact itself)
    return position


def label_fact(label: int) -> Fact:
    """The fact a parameter's label carries (``labelled``)."""
    if label in (-1, COMPLEX_NUMBER, NARROW_NUMBER):  # a number (``shape_labels``)
        return ("num", 0, label == COMPLEX_NUMBER)
    if label == -2:  # a list or a tuple (``shape_labels``, ``activity.call_labels``)
        return SEQUENCE
    if label == MAPPING:
        return DICT
    if label == SET:
        return A_SET
    if label < RANKED:
        return UNKNOWN
    rank, kind = divmod(label % AXES // RANKED - 1, 3)
    return ("num", rank, bool(kind))


def label_is_complex(label: int) -> bool:
    """Whether a parameter's label says it holds complex numbers (``labelled``)."""
    return (
        label == COMPLEX_NUMBER
        or COMPLEX_UNKNOWN <= label < RANKED
        or (label >= RANKED and (label // RANKED - 1) % 3 == 2)
    )


@record
class Kinds:
    """The facts of a function's names; where a statement reads a name that the statements before it
    in its block bound (a loop's integer variable inside its loop, ``i = r[k]`` in a loop's body),
    what it reads is the fact of that binding."""

    facts: dict[str, Fact]
    # statement id -> the facts of what it reads, where they differ
    inside: dict[int, dict[str, Fact]]
    made: dict[int, Fact]  # assignment id -> the fact of the value it binds
    # the names that hold real numbers of 64 bits or more wherever they are bound (``wide_numbers``)
    wide: frozenset[str] = frozenset()

    def wide_float(self, name: str) -> bool:
        """Whether ``name`` holds a Python float or numpy's float64 wherever it is bound: a real
        number of 64 bits, certainly a float (``wide_numbers``)."""
        fact = self.facts.get(name, UNKNOWN)
        return name in self.wide and fact[0] == "num" and fact[1] == 0 and bool(fact[2])

    def array_made(self, stmt: ir.Assign) -> bool:
        """Whether the assignment ``stmt`` binds a numpy array of numbers with at least one axis."""
        fact = self.made.get(id(stmt), UNKNOWN)
        return bool(fact[0] == "num" and fact[1] >= 1)

    def of(self, atom: ir.Expr, at: ir.Stmt | None = None) -> Fact:
        return _atom_fact(
            atom, self.facts, self.inside.get(id(at), _NONE) if at is not None else _NONE
        )

    def rank_of(self, atom: ir.Expr, at: ir.Stmt | None = None) -> int | None:
        """The number of axes of ``atom`` where ``at`` reads it (0 for a number), if known."""
        return _rank(self.of(atom, at))

    def rank(self, name: str) -> int | None:
        """The number of axes of what ``name`` holds (0 for a number), if known."""
        return _rank(self.facts.get(name, UNKNOWN))

    def no_axes(self, name: str) -> bool:
        """Whether ``name`` holds a number or None wherever it is bound: a value with no shape to
        undo."""
        fact = self.facts.get(name, UNKNOWN)
        return fact in (NONE, MAYBE) or _rank(fact) == 0

    def float_array(self, name: str) -> bool:
        """Whether ``name`` holds a numpy array of floats (at least one axis) wherever it is
        bound."""
        fact = self.facts.get(name, UNKNOWN)
        return fact[0] == "num" and fact[1] >= 1 and bool(fact[2])

    def holds_floats(self, atom: ir.Expr | str, at: ir.Stmt | None = None) -> bool:
        """Whether ``atom`` (or the name ``atom``, wherever it is bound) certainly holds a float or
        complex number, or a numpy array of them: a value written into it is not truncated."""
        fact = self.facts.get(atom, UNKNOWN) if isinstance(atom, str) else self.of(atom, at)
        return fact[0] == "num" and bool(fact[2])

    def may_be_array(self, name: str) -> bool:
        """Whether ``name`` may hold an array (what is not known may): not a number, range, shape or
        index."""
        fact = self.facts.get(name, UNKNOWN)
        return fact == UNKNOWN or fact[0] == "num" and fact[1] >= 1

    def ranks(self, atoms: tuple[ir.Atom, ...], at: ir.Stmt) -> tuple[int | None, ...]:
        """The numbers of axes of ``atoms`` where each is a numpy array of numbers (else
        ``None``)."""
        out: list[int | None] = []
        for atom in atoms:
            fact = self.of(atom, at)
            out.append(int(fact[1]) if fact[0] == "num" and fact[1] >= 1 else None)
        return tuple(out)

    def is_int(self, name: str) -> bool:
        return self.facts.get(name) == INT

    def numbers(self) -> frozenset[str]:
        """The names that certainly hold numbers wherever they are bound (no object to change in
        place)."""
        return frozenset(
            name for name, fact in self.facts.items() if fact == INT or _rank(fact) == 0
        )

    def label(self, atom: ir.Atom, at: ir.Stmt | None) -> int:
        """What a callee parameter's label adds for ``atom``: a numpy array's axes and kind
        (``labelled``), or 0."""
        fact = self.of(atom, at)
        return _encoded(0, fact[1], fact[2]) if fact[0] == "num" and fact[1] >= 1 else 0

    def sequence(self, atom: ir.Expr, at: ir.Stmt | None = None) -> bool:
        """Whether ``atom`` is certainly a list or a tuple (read by position in Python's order)."""
        fact = self.of(atom, at)
        return fact == SEQUENCE or fact[0] in ("ints", "items", "arrays") \
            or fact[0] == "index" and fact != SLICE

    def is_number(self, atom: ir.Expr, at: ir.Stmt | None = None) -> bool:
        """Whether ``atom`` is certainly a number (an immutable value with no axes)."""
        return _rank(self.of(atom, at)) == 0

    def basic_index(self, atom: ir.Expr, at: ir.Stmt | None = None) -> bool:
        """Whether ``atom`` is certainly an integer, a slice, or a tuple of those: an index that
        names each entry once (numpy's basic indexing)."""
        fact = self.of(atom, at)
        return fact == INT or fact[0] in ("index", "ints")

    def indexed(self, array: ir.Atom, index: ir.Atom, at: ir.Stmt) -> int | None:
        """The number of axes of ``array[index]``, where ``array`` is a numpy array of numbers (0:
        one entry, a number)."""
        return _indexed(self.of(array, at), self.of(index, at))

    def basic_read(self, array: ir.Atom, index: ir.Atom, at: ir.Stmt) -> bool:
        """Whether ``array[index]`` reads a numpy array of floats through a basic index (integers
        and slices: each entry named once): its adjoint can be added into ``array_bar[index]``."""
        fact = self.of(array, at)
        return fact[0] == "num" and fact[1] >= 1 and bool(fact[2]) \
            and _indexed(fact, self.of(index, at)) is not None

    def entry_of(self, array: ir.Atom, index: ir.Atom, at: ir.Stmt) -> bool:
        """Whether ``array[index]`` is one entry of a numpy array of floats: its adjoint is
        ``array_bar[index]``."""
        fact = self.of(array, at)
        return fact[0] == "num" and bool(fact[2]) and _indexed(fact, self.of(index, at)) == 0


# a call's result fact, given its function and its positional arguments' facts (``kinds_of``'s
# ``results``: ``activity.callee_results``), or ``UNKNOWN``
Results = Callable[[Any, list[Fact]], Fact]


def kinds_of(function: ir.Function, shapes: tuple[int, ...],
             results: Results | None = None) -> Kinds:
    """The facts every binding of each name agrees on, given the parameters' labels (a fixpoint).

    ``results``, if given, says what a call of a function with no fact here gives (the user's
    helpers: their own facts, found from the arguments' by the same analysis)."""
    facts: dict[str, Fact] = {
        p: label_fact(label) for p, label in zip(function.params, shapes, strict=True)
    }
    found = _Pass({p: f for p, f in facts.items() if f != UNKNOWN}, _tapes(function), results)
    found.joined, found.grown, found.inits = _joined(function), _grown(function), function.inits
    found.changed, once = True, ir.loop_free(function.body)
    while found.changed:
        found.changed = False
        found.visit(function.body, {})
        if once:  # no loop: one pass
            break
    return Kinds({n: f for n, f in found.facts.items() if f != UNKNOWN}, found.inside, found.made,
                 wide_numbers(function, shapes))


# what keeps a real number of 64 bits one: Python's and numpy's arithmetic on two of them gives one
# (an integer's may wrap, in numpy's int64: a float's cannot)
_WIDE_ARITHMETIC = {operator.add, operator.sub, operator.mul, operator.truediv, operator.neg,
                    operator.pos}


def wide_numbers(function: ir.Function, shapes: tuple[int, ...]) -> frozenset[str]:
    """The names that hold real numbers of 64 bits or more wherever they are bound: a parameter
    labelled ``-1`` (a Python int or float, numpy's float64, int64 or int32: ``shape_labels``), a
    Python int or float written in the code, a ``range``'s variable, and the sums, differences,
    products, quotients and negations of those (the greatest fixpoint: a loop's name is one where
    every binding gives one, given that it is one). A product of two such numbers, one a float, is
    a float64 of at least their precision: ``fold.scaled_adjoints`` moves such factors."""
    bindings: dict[str, list[ir.Stmt]] = {}
    for stmt in ir.walk(function.body):
        if ir.binds_none(stmt):
            continue  # (the normalizer's binding before the loop that binds it: no value read)
        for name in ir.defined(stmt):
            bindings.setdefault(name, []).append(stmt)
    wide = {p for p, label in zip(function.params, shapes, strict=True)
            if label == -1 and p not in bindings}
    candidates = set(bindings) - set(function.params)
    wide |= candidates

    def gives(stmt: ir.Stmt) -> bool:
        if isinstance(stmt, ir.For):
            return isinstance(stmt.iter, ir.Var) and stmt.iter.name in ranges
        if not isinstance(stmt, ir.Assign):
            return False
        value = stmt.value
        if isinstance(value, (ir.Var, ir.Const)):
            return atom(value)
        return isinstance(value, ir.Call) and value.fn.obj in _WIDE_ARITHMETIC \
            and not value.kwargs and all(atom(a) for a in value.args)

    def atom(a: ir.Expr) -> bool:
        if isinstance(a, ir.Const):
            return type(a.value) in (int, float)
        return isinstance(a, ir.Var) and a.name in wide

    ranges = {name for name, stmts in bindings.items()
              if all(isinstance(s, ir.Assign) and isinstance(s.value, ir.Call)
                     and s.value.fn.obj is range for s in stmts)}
    changed = True
    while changed:
        changed = False
        for name in sorted(candidates & wide):
            if not all(gives(stmt) for stmt in bindings[name]):
                wide.discard(name)
                changed = True
    return frozenset(wide)


class _Pass:
    """One pass of ``kinds_of`` over the statements in order, and what the passes found so far."""

    def __init__(self, facts: dict[str, Fact], tapes: set[str], results: Results | None = None):
        self.facts, self.tapes, self.results = facts, tapes, results
        self.joined: set[str] = set()  # lists and tuples only joined into one array (``_joined``)
        self.grown: set[str] = set()  # lists only appended to, then joined (``_grown``)
        self.inits: frozenset[str] = frozenset()  # (``ir.Function.inits``)
        self.inside: dict[int, dict[str, Fact]] = {}
        self.made: dict[int, Fact] = {}
        self.bound_in: dict[int, set[str]] = {}
        self.elements: dict[str, Fact] = {}  # what each tape holds: the facts of all it is pushed
        self.changed = False

    def bound(self, stmt: ir.Stmt) -> set[str]:
        """Every name the blocks of a compound statement bind."""
        if id(stmt) not in self.bound_in:
            self.bound_in[id(stmt)] = {
                n for block in ir.blocks(stmt) for s in ir.walk(block) for n in ir.defined(s)
            }
        return self.bound_in[id(stmt)]

    def visit(self, body: tuple[ir.Stmt, ...], scope: dict[str, Fact]) -> None:
        facts, elements = self.facts, self.elements
        # what the statements of this block bound so far, read where they dominate
        scope = dict(scope)
        for stmt in body:
            self.inside[id(stmt)] = {name: scope[name] for name in _reads(stmt) if name in scope}
            if ir.blocks(stmt):
                names = self.bound(stmt) | set(ir.defined(stmt))
                inner = {name: fact for name, fact in scope.items() if name not in names}
                if isinstance(stmt, ir.For):
                    if _atom_fact(
                        stmt.iter, facts, scope
                    ) == RANGE and stmt.target not in self.bound(stmt):
                        # each step binds it to an integer; nothing else does
                        inner[stmt.target] = INT
                    # before the loop it is None (and after an empty one)
                    self.bind(stmt.target, UNKNOWN)
                for block in ir.blocks(stmt):
                    self.visit(block, inner)
                for name in names:
                    scope.pop(name, None)
            elif isinstance(stmt, ir.Assign) and self.grown and _grown_join(stmt, self.grown):
                # a join of a list only appended to: of what was appended, once an append was seen
                # (a later pass binds it: the list was empty before)
                assert isinstance(stmt.value, ir.Call) and isinstance(stmt.value.args[0], ir.Var)
                pushed = elements.get(stmt.value.args[0].name)
                if pushed is not None:
                    fact = self.made[id(stmt)] = _join_fact(stmt.value.fn.obj, pushed)
                    self.bind(stmt.target, fact)
                scope[stmt.target] = self.made.get(id(stmt), UNKNOWN)
            elif isinstance(stmt, ir.Assign) and stmt.target in self.inits \
                    and ir.binds_none(stmt):
                continue  # (no value read is that None: ``ir.Function.inits``)
            elif isinstance(stmt, ir.Assign):
                fact = self.made[id(stmt)] = (
                    _arrays_fact([_atom_fact(a, facts, scope) for a in stmt.value.elts])
                    if stmt.target in self.joined and isinstance(stmt.value, ir.Pack)
                    else _value_fact(stmt.value, facts, scope, self.results)
                )
                self.bind(stmt.target, fact)
                scope[stmt.target] = fact
            elif isinstance(stmt, ir.Append) and (
                stmt.target in self.tapes or stmt.target in self.grown
            ):
                fact = _atom_fact(stmt.value, facts, scope)
                new = fact if stmt.target not in elements else _merge(elements[stmt.target], fact)
                if elements.get(stmt.target) != new:
                    elements[stmt.target], self.changed = new, True
            elif isinstance(stmt, ir.Unpack) and (
                (items := _atom_fact(stmt.value, facts, scope))[0] == "items"
                and len(items[1]) == len(stmt.targets)
            ):
                for name, fact in zip(stmt.targets, items[1], strict=True):
                    self.bind(name, fact)
                    scope[name] = fact
            elif isinstance(stmt, ir.Pop) and stmt.target is not None and stmt.source in self.tapes:
                if stmt.source in elements:  # else nothing was pushed (yet: a later pass binds it)
                    self.bind(stmt.target, elements[stmt.source])
                scope[stmt.target] = elements.get(stmt.source, UNKNOWN)
            else:
                for name in ir.defined(stmt):
                    self.bind(name, UNKNOWN)
                    scope[name] = UNKNOWN

    def bind(self, name: str, fact: Fact) -> None:
        new = fact if name not in self.facts else _merge(self.facts[name], fact)
        if self.facts.get(name) != new:
            self.facts[name] = new
            self.changed = True


_NONE: dict[str, Fact] = {}


def _empty_list(value: ir.Expr) -> bool:
    return isinstance(value, ir.Pack) and value.kind == "list" and not value.elts or \
        isinstance(value, ir.Const) and type(value.value) is list and not value.value


def _kept_names(stmt: ir.Stmt) -> set[str]:
    """The names read by an expression ``stmt`` keeps as written (a test, ``and``/``or``, a
    print)."""
    raw = (
        stmt.value.node
        if isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Raw)
        else stmt.test.node
        if isinstance(stmt, ir.While)
        else stmt.node
        if isinstance(stmt, ir.Effect)
        else None
    )
    return syntax.name_ids(raw) if raw is not None else set()


def checked_only(function: ir.Function, remade: bool = False) -> set[str]:
    """Tuples that nothing but a check reads (``runtime.check_in_place``'s second argument:
    ``def_identity_read``); with ``remade``, or the memory model's remaking of other variables
    (``def_remakes``' ``others``: ``shared_family``, ``memory_root``), which a name not bound yet
    in them does not reach."""
    packed = {
        s.target
        for s in ir.walk(function.body)
        if isinstance(s, ir.Assign) and isinstance(s.value, ir.Pack) and s.value.kind == "tuple"
    }
    for stmt in ir.walk(function.body):
        value = stmt.value if isinstance(stmt, ir.Assign) else None
        allowed: set[int] = set()
        if isinstance(value, ir.Call) and not value.kwargs:
            read = registry.identity_read(value.fn.obj)
            others = registry.remade_argument(value.fn.obj) if remade else None
            allowed = {k for k in (read, others[1] if others else None)
                       if k is not None and k < len(value.args)
                       and isinstance(value.args[k], ir.Var)}
        if isinstance(value, ir.Call) and allowed:
            packed -= {
                a.name for k, a in enumerate(value.args)
                if k not in allowed and isinstance(a, ir.Var)
            }
        else:
            packed -= set(_reads(stmt)) | _kept_names(stmt)
    if isinstance(function.result, ir.Var):
        packed.discard(function.result.name)
    return packed


# what joins a list or tuple of arrays into one: the number of axes it adds (``_joined``)
# joins of a list of arrays of one shape (or of numbers, for the two that stack them): the axes they
# add (``np.array`` of arrays of one shape stacks them, as ``np.stack`` does; of others it raises)
_JOINS = {np.concatenate: 0, np.stack: 1, np.array: 1}


def _joined(function: ir.Function) -> set[str]:
    """Lists and tuples written out (``[a, b]``), bound once, that nothing reads but one join
    (``np.concatenate(pack)``, ``np.stack(pack, axis=1)``) as its only argument: no statement can
    change them between, so their arrays' facts are what the join reads (``_arrays_fact``)."""
    packs = {
        s.target
        for s in ir.walk(function.body)
        if isinstance(s, ir.Assign) and isinstance(s.value, ir.Pack) and s.value.kind in (
            "list", "tuple")
    }
    if not packs:
        return set()
    bindings: dict[str, int] = {}
    reads: dict[str, int] = {}
    joins: set[str] = set()
    for stmt in ir.walk(function.body):
        for name in ir.defined(stmt):
            bindings[name] = bindings.get(name, 0) + 1
        value = stmt.value if isinstance(stmt, ir.Assign) else None
        # (a read of only its shapes and dtypes, a stand-in's, changes nothing and keeps nothing)
        metas: set[str] = set()
        if isinstance(value, ir.Call) and (positions := registry.meta_positions(value.fn.obj)):
            named = [(k, a.name) for k, a in enumerate(value.args) if isinstance(a, ir.Var)]
            metas = {n for _, n in named} - {n for k, n in named if k not in positions}
        for name in _reads(stmt) + list(_kept_names(stmt)):
            if name not in metas:
                reads[name] = reads.get(name, 0) + 1
        if isinstance(value, ir.Call) and value.fn.obj in _JOINS \
                and all(k == "axis" for k, _ in value.kwargs) \
                and len(value.args) == 1 and isinstance(value.args[0], ir.Var):
            joins.add(value.args[0].name)
    result = function.result.name if isinstance(function.result, ir.Var) else None
    return {
        name
        for name in packs & joins
        if bindings.get(name) == 1 and reads.get(name) == 1 and name != result
        and name not in function.params and name not in function.mutable
    }


def _grown(function: ir.Function) -> set[str]:
    """Lists made empty (``rows = []``), then only appended to, that nothing reads but a join
    (``np.stack(rows)``) as its only argument: what the join reads is what was appended (a join of
    an empty list raises). A list read in any other way (passed, copied, popped) may hold
    anything."""
    appended = {s.target for s in ir.walk(function.body) if isinstance(s, ir.Append)}
    if not appended:
        return set()
    made: set[str] = set()
    other = set(function.params)
    joins: set[str] = set()
    for stmt in ir.walk(function.body):
        if ir.binds_none(stmt):
            continue  # (the normalizer's binding before the loop that binds it: a join raises)
        value = stmt.value if isinstance(stmt, ir.Assign) else None
        if isinstance(value, ir.Call) and value.fn.obj in _JOINS and not value.kwargs \
                and len(value.args) == 1 and isinstance(value.args[0], ir.Var):
            joins.add(value.args[0].name)
            other.update(ir.defined(stmt))
            continue
        if isinstance(stmt, ir.Assign) and _empty_list(stmt.value):
            made.add(stmt.target)
            continue
        if isinstance(stmt, ir.Append):
            other.update(_reads(stmt))  # (the value appended: the list is not read)
            continue
        other.update(ir.defined(stmt))
        other.update(ir.reads_of(stmt))  # (a pop's list too, and an expression kept as written)
    if isinstance(function.result, ir.Var):
        other.add(function.result.name)
    return (made & appended & joins) - other


def _grown_join(stmt: ir.Assign, grown: set[str]) -> bool:
    """Whether ``stmt`` joins a list of ``grown`` (``np.stack(rows)``)."""
    value = stmt.value
    return isinstance(value, ir.Call) and value.fn.obj in _JOINS and len(value.args) == 1 \
        and isinstance(value.args[0], ir.Var) and value.args[0].name in grown


def _join_fact(fn: Any, item: Fact) -> Fact:
    """What the join ``fn`` of a list of arrays each of fact ``item`` gives."""
    if item[0] != "num" or item[1] < 1 - _JOINS[fn]:  # (numbers stack, but do not join)
        return UNKNOWN
    return ("num", item[1] + _JOINS[fn], item[2])


def _arrays_fact(elts: list[Fact]) -> Fact:
    """A list or tuple of numpy arrays of one number of axes, or of numbers (``_joined``):
    ("arrays", rank, inexact); a join that cannot take numbers (``np.concatenate``) claims
    nothing of them (``_call_fact``)."""
    if not elts or any(e[0] != "num" for e in elts) or len({e[1] for e in elts}) != 1:
        return UNKNOWN
    return ("arrays", elts[0][1], any(e[2] for e in elts))


def _tapes(function: ir.Function) -> set[str]:
    """Lists made empty, then only pushed to and popped from (a gradient's tapes, when transformed
    again): what a pop gives is what was pushed. A list read in any other way (copied, passed,
    looked at) may hold anything."""
    if not any(isinstance(s, ir.Append) for s in ir.walk(function.body)):
        return set()  # nothing is pushed: no tapes (most functions; this runs on every transform)
    made: set[str] = set()
    other = set(function.params)
    checked = checked_only(function)
    for stmt in ir.walk(function.body):
        if isinstance(stmt, ir.Assign) and stmt.target in checked:
            # a tuple only looked into by ``check_in_place``, which reads it and keeps nothing
            continue
        if isinstance(stmt, ir.Assign) and _empty_list(stmt.value):
            (other if stmt.target in made else made).add(stmt.target)  # made twice: not followed
        elif not isinstance(stmt, ir.Pop):
            other.update(ir.defined(stmt))
        other.update(_reads(stmt))
        other.update(_kept_names(stmt))
    if isinstance(function.result, ir.Var):
        other.add(function.result.name)
    return made - other


def _reads(stmt: ir.Stmt) -> list[str]:
    """The names ``stmt`` itself reads (not those of the statements nested in it)."""
    if isinstance(stmt, ir.Assign):
        value = stmt.value
        atoms: tuple[Any, ...] = (
            value.args + tuple([a for _, a in value.kwargs])
            if isinstance(value, ir.Call)
            else value.elts
            if isinstance(value, ir.Pack)
            else (value.value,)
            if isinstance(value, ir.Attr)
            else ()
            if isinstance(value, ir.Raw)
            else (value,)
        )
    elif isinstance(stmt, (ir.Unpack, ir.Append)):
        atoms = (stmt.value,)
    elif isinstance(stmt, ir.SetItem):
        atoms = (ir.Var(stmt.target), stmt.index, stmt.value)
    elif isinstance(stmt, ir.For):
        atoms = (stmt.iter,)
    elif isinstance(stmt, ir.If):
        atoms = (stmt.test,)
    else:
        atoms = ()
    return [a.name for a in atoms if isinstance(a, ir.Var)]


def _merge(a: Fact, b: Fact) -> Fact:
    if a == b:
        return a
    if (a in (NONE, MAYBE) or b in (NONE, MAYBE)) and all(
        f in (NONE, MAYBE) or _rank(f) == 0 for f in (a, b)
    ):
        return MAYBE
    if a[0] == "num" and b[0] == "num" and a[1] == b[1]:
        return ("num", a[1], a[2] and b[2])
    if {a, b} == {INT, ("num", 0, False)} or (INT in (a, b) and ("num", 0, True) in (a, b)):
        return ("num", 0, False)
    return UNKNOWN


def _rank(fact: Fact) -> int | None:
    if fact == INT:
        return 0
    return fact[1] if fact[0] == "num" else None


def _const_fact(value: Any) -> Fact:
    if value is None:
        return NONE
    if type(value) is int:
        return INT
    if type(value) is bool:
        return ("num", 0, False)
    if type(value) in (float, complex):
        return ("num", 0, True)
    if type(value) is tuple and value and all(type(v) is int for v in value):
        return ("ints", len(value))
    return _index_fact([_const_fact(v) if type(v) is not slice else SLICE for v in value]) \
        if type(value) is tuple else SLICE if type(value) is slice else UNKNOWN


def _index_fact(parts: list[Fact]) -> Fact:
    """A tuple of integers, slices and ``None``s (new axes of one), as an index: ("index", how
    many axes it takes away: one an integer, less one a ``None``)."""
    if parts and all(p in (INT, SLICE, NONE) for p in parts) and any(p != NONE for p in parts):
        return ("index", sum(p == INT for p in parts) - sum(p == NONE for p in parts))
    return UNKNOWN


def _atom_fact(atom: ir.Expr, facts: dict[str, Fact], scope: dict[str, Fact]) -> Fact:
    if isinstance(atom, ir.Var):
        found = scope.get(atom.name)
        return found if found is not None else facts.get(atom.name, UNKNOWN)
    if isinstance(atom, ir.Const):
        return _const_fact(atom.value)
    if isinstance(atom, ir.Ref) and (atom.origin is None or atom.obj is atom.root):
        # a value read from outside: fixed in the code, or a global the code reads again before each
        # call and is transformed again for when its label changes (``load.Loaded.refresh``)
        return label_fact(labelled(0, atom.obj)) if type(atom.obj) is np.ndarray else UNKNOWN
    return UNKNOWN


def _indexed(array: Fact, index: Fact) -> int | None:
    """The number of axes of ``array[index]``, for a numpy array and an integer or a tuple of
    them."""
    k = 1 if index == INT else index[1] if index[0] in ("ints", "index") else None
    if array[0] != "num" or array[1] < 1 or k is None or k > array[1]:
        return None
    return int(array[1]) - k


def _value_fact(value: ir.Expr, facts: dict[str, Fact], scope: dict[str, Fact],
                results: Results | None = None) -> Fact:
    if isinstance(value, (ir.Var, ir.Const)):
        return _atom_fact(value, facts, scope)
    if isinstance(value, ir.Attr):
        owner = _atom_fact(value.value, facts, scope)
        if owner[0] != "num" or owner[1] < 1:
            return UNKNOWN
        return (
            ("shape", owner[1])
            if value.attr == "shape"
            else INT
            if value.attr in ("ndim", "size")
            else UNKNOWN
        )
    if isinstance(value, ir.Pack):
        if value.kind == "dict":
            return DICT
        if value.kind == "list":
            return SEQUENCE
        if value.kind != "tuple":
            return UNKNOWN
        elts = [_atom_fact(a, facts, scope) for a in value.elts]
        if elts and all(f == INT for f in elts):
            return ("ints", len(elts))
        index = _index_fact(elts)
        if index == UNKNOWN and elts and all(f[0] == "num" for f in elts):
            # a tuple of numbers and arrays (a helper's ``return h, c``): each item's, for the
            # names an unpacking binds (a tuple cannot change, nor an array's axes)
            return ("items", tuple(elts))
        return SEQUENCE if index == UNKNOWN else index
    if isinstance(value, ir.Raw):
        return ("num", 0, False) if _decides(value.node, value.refs) else UNKNOWN
    if not isinstance(value, ir.Call):
        return UNKNOWN
    if value.kwargs:
        # ``np.sum(x, axis=1)``, ``np.mean(x, axis=(0, 1), keepdims=True)``: an axis by keyword,
        # as given second, and axes kept; any other keyword unknown
        given = dict(value.kwargs)
        if value.fn.obj in _JOINS and set(given) == {"axis"} and len(value.args) == 1:
            # ``np.stack(xs, axis=1)``: the axis moves no count of axes
            return _call_fact(value.fn.obj, [_atom_fact(value.args[0], facts, scope)])
        keep = given.pop("keepdims", ir.Const(False))
        if not (value.fn.obj in _ALONG_AXIS and len(value.args) == 1 and set(given) == {"axis"}
                and isinstance(keep, ir.Const) and type(keep.value) is bool):
            return UNKNOWN
        array = _atom_fact(value.args[0], facts, scope)
        fact = _call_fact(value.fn.obj, [array, _atom_fact(given["axis"], facts, scope)])
        if keep.value and fact[0] == "num":
            return ("num", array[1], fact[2])
        return fact
    if value.fn.obj is np.array and len(value.args) == 1 and isinstance(value.args[0], ir.Const) \
            and type(value.args[0].value) in (list, tuple) and value.args[0].value \
            and all(type(v) in (float, int) for v in value.args[0].value):
        # ``np.array([0.0, 8.0])``: a numpy array of one axis, of floats where one entry is a float
        # (of the platform's integers where all are ints; never bools: ``type(True)`` is bool)
        return ("num", 1, any(type(v) is float for v in value.args[0].value))
    args = [_atom_fact(a, facts, scope) for a in value.args]
    if value.fn.obj is operator.getitem and len(args) == 2 and args[0][0] == "items" \
            and isinstance(value.args[1], ir.Const) and type(value.args[1].value) is int \
            and -len(args[0][1]) <= value.args[1].value < len(args[0][1]):
        # an item of a tuple of numbers and arrays, at an index written out (``pack[1]``)
        return args[0][1][value.args[1].value]  # type: ignore[no-any-return]
    fact = _call_fact(value.fn.obj, args)
    if fact == UNKNOWN and results is not None:
        return results(value.fn.obj, args)
    return fact


def _decides(node: Any, refs: tuple[ir.Ref, ...]) -> bool:
    """Whether a kept expression gives a bool: ``bool(...)``, ``not ...``, and ``and``/``or`` of
    those (a branch's decision, as normalize writes it)."""
    if isinstance(node, gast.BoolOp):
        return all(_decides(v, refs) for v in node.values)
    if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.Not):
        return True
    if (
        isinstance(node, gast.Call)
        and isinstance(node.func, gast.Name)
        and node.func.id.startswith("§")
    ):
        k = node.func.id[1:]
        return k.isdigit() and int(k) < len(refs) and refs[int(k)].obj is bool
    return False


# what gives a dict (a list or a tuple) where its argument at this position is one (a new one, or
# the same: a write, a slot replaced, a copy, the variable made again after a write through memory
# it shares, which keeps its object's type)
_KEEPS_ITS_KIND = {runtime.assign_item: 0, runtime.replaced: 0, runtime.copy_of: 0,
                   runtime.detached: 0, runtime.memory_view: 3}


def _call_fact(fn: Any, args: list[Fact]) -> Fact:
    if fn is range:
        return RANGE
    if fn is len or fn is int:
        return INT
    if fn is slice:  # (``x[h:2 * h]``: its index; or indexing raises)
        return SLICE
    if fn is bool or fn is float:  # (or they raise)
        return ("num", 0, fn is float)
    if fn in _INTEGER_OPS and args and all(a == INT for a in args):
        return INT
    if fn is operator.getitem and len(args) == 2:
        if args[0][0] == "shape" and args[1] == INT or args[0] == RANGE and args[1] == INT:
            return INT
        rank = _indexed(args[0], args[1])
        return UNKNOWN if rank is None else ("num", rank, args[0][2])
    if fn is runtime.assign_item and len(args) == 3 and args[0][0] == "num" and args[0][1] >= 1:
        return args[0]  # a write into a numpy array keeps its shape and dtype
    if fn in _KEEPS_ITS_KIND and len(args) > _KEEPS_ITS_KIND[fn] \
            and args[_KEEPS_ITS_KIND[fn]] in (DICT, SEQUENCE, A_SET):
        return args[_KEEPS_ITS_KIND[fn]]  # (written into, an item replaced, copied: the same kind)
    if fn is dict and not args:
        return DICT
    if fn is set or fn is frozenset:
        return A_SET
    if fn is list or fn is tuple:
        return SEQUENCE
    if fn is runtime.augmented_value and len(args) == 2:
        old = args[1]
        if old[0] == "num" and old[1] >= 1:
            return old  # ``y += v`` writes into a numpy array: its shape and dtype
        # (a number is rebound to the new value; None would have raised)
        return args[0] if old in (INT, MAYBE) or old[0] == "num" else UNKNOWN
    if fn in (runtime.unbroadcast, runtime.fit, runtime.expand_reduced) and len(args) >= 2 \
            and args[1][0] == "num" and (args[0][0] == "num" or args[0] == INT):
        # an adjoint summed down to, or a tangent spread up to, the shape of its second argument
        return ("num", args[1][1], True)
    if fn is runtime.zero_tangent and len(args) == 1 and args[0][0] == "num":
        return ("num", args[0][1], True)  # zeros of x's shape, in floats
    if fn is runtime.detached and len(args) == 1 and args[0][0] == "num":
        return args[0]  # a copy
    if fn in (runtime.copy_of, np.copy) and len(args) == 1 and args[0][0] == "num" \
            and args[0][1] >= 1:
        return args[0]  # ``x.copy()``, ``np.copy(x)`` of a numpy array: one of its shape and dtype
    if fn is runtime.owned_adjoint and len(args) == 2 and args[1][0] == "num" and args[1][1] >= 1 \
            and _rank(args[0]) is not None and _rank(args[0]) <= args[1][1]:
        return ("num", args[1][1], True)  # zeros of x's shape, in floats at least, plus g
    if fn in _JOINS and len(args) == 1 and args[0][0] == "arrays" \
            and args[0][1] >= 1 - _JOINS[fn]:
        return ("num", args[0][1] + _JOINS[fn], args[0][2])
    if fn in _ALLOCATE and len(args) == 1:
        shape = args[0]
        rank = 1 if shape == INT else shape[1] if shape[0] in ("shape", "ints") else None
        return UNKNOWN if rank is None else ("num", rank, True)
    if fn in _LIKE and len(args) == 1 and args[0][0] == "num" and args[0][1] >= 1:
        return args[0]
    # an array with an axis per entry of the shape
    if fn is np.reshape and len(args) == 2 and args[0][0] == "num":
        rank = 1 if args[1] == INT else args[1][1] if args[1][0] in ("shape", "ints") else 0
        # (no axes: an array still, not a number)
        return ("num", rank, args[0][2]) if rank >= 1 else UNKNOWN
    if fn in _ALONG_AXIS and len(args) == 2 and args[0][0] == "num" and args[0][1] >= 1 \
            and (args[1] == INT or args[1][0] == "ints" and args[1][1] <= args[0][1]):
        # over one axis, or a tuple of them: as many axes fewer (a mean, a deviation, a
        # variance: floats)
        fewer = 1 if args[1] == INT else int(args[1][1])
        return ("num", args[0][1] - fewer, fn in (np.mean, np.std, np.var) or args[0][2])
    if fn is runtime.stand_in and len(args) == 1 and args[0][0] == "num":
        return args[0]  # (zeros of one entry broadcast to the shape, of the dtype)
    if (fn is runtime.T or fn is np.transpose) and len(args) == 1 and args[0][0] == "num" \
            and args[0][1] >= 1:
        return args[0]  # (the same axes, in another order)
    if fn is runtime.gradient_like and len(args) == 2 and args[1][0] == "num":
        return ("num", args[1][1], True)  # (a gradient lowered in place: its argument's shape)
    if fn is runtime.getitem_vjp and len(args) == 3 and args[1][0] == "num":
        return ("num", args[1][1], True)  # (an adjoint of ``x``: ``x``'s shape)
    if fn in (runtime.matmul_vjp_a, runtime.matmul_vjp_b) and len(args) == 3:
        operand = args[1] if fn is runtime.matmul_vjp_a else args[2]
        return ("num", operand[1], True) if operand[0] == "num" else UNKNOWN
    if fn is runtime.chosen and len(args) == 3 and args[1][0] == "num" \
            and _rank(args[0]) is not None:
        return ("num", max(int(_rank(args[0]) or 0), int(args[1][1])), args[1][2])
    if fn is np.outer and len(args) == 2 and all(a[0] == "num" for a in args):
        return ("num", 2, bool(args[0][2] or args[1][2]))
    if fn is np.cross and len(args) == 2 and all(a[0] == "num" and a[1] >= 1 for a in args):
        return ("num", max(int(a[1]) for a in args), bool(args[0][2] or args[1][2]))
    if fn in _COMPARISONS and len(args) == 2 and all(_rank(a) is not None for a in args):
        return ("num", max(int(_rank(a) or 0) for a in args), False)  # (booleans)
    if fn is np.where and len(args) == 3 and all(_rank(a) is not None for a in args):
        # broadcast, as arithmetic: the branches' kind, of the most axes
        return ("num", max(int(_rank(a) or 0) for a in args),
                any(a[0] == "num" and bool(a[2]) for a in args[1:]))
    if registry.is_full_reduction(fn) and len(args) == 1 and args[0][0] == "num":
        # (a mean, a deviation, a variance: floats; a sum, a product, an extremum: of its kind)
        return ("num", 0, fn in (np.mean, np.std, np.var) or args[0][2])
    # (``np.dot`` is the same product where neither operand has more than two axes)
    if (fn is operator.matmul or fn is np.matmul
            or fn is np.dot and all(a[0] == "num" and a[1] <= 2 for a in args)) \
            and len(args) == 2 and all(a[0] == "num" and a[1] >= 1 for a in args):
        ra, rb = args[0][1], args[1][1]
        rank = ra + rb - 2 if min(ra, rb) == 1 else max(ra, rb)
        return ("num", rank, args[0][2] or args[1][2])
    if registry.gives_number(fn):
        return ("num", 0, False)  # a number (math.floor's is an integer: floats not claimed)
    if (fn in _ARITHMETIC or isinstance(fn, np.ufunc)) and args:
        if isinstance(fn, np.ufunc) and fn.nout != 1:
            return UNKNOWN
        rank, inexact = 0, fn in (operator.truediv, np.divide)
        # (a loop, not generators: this runs for most statements of every transform)
        for arg in args:
            if arg == MAYBE:
                continue  # None would have raised: a number, of no axes and no known kind
            r = _rank(arg)
            if r is None:
                return UNKNOWN
            rank, inexact = max(rank, r), inexact or (arg != INT and arg[2])
        return ("num", rank, inexact)
    return UNKNOWN
