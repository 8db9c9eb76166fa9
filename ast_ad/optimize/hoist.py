"""Loop-invariant arithmetic, moved out of its loop: computed once before the loop instead of once a
step, so that reverse mode neither computes nor tapes it in every step, and adds its adjoint up over
the steps before passing it on once.

The leapfrog step ``p = p - 0.5 * dt * k * q`` lowers to ``t1 = 0.5 * dt`` and ``t1_times_k = t1 *
k`` inside the loop; both read only names the loop never binds, so they move before it::

    for step in r:                           t1 = 0.5 * dt
        t1 = 0.5 * dt                        t1_times_k = t1 * k
        t1_times_k = t1 * k        ->        for step in r:
        t2 = t1_times_k * q                      t2 = t1_times_k * q
        ...                                      ...

The facts this relies on, each asked of the one place that decides it: the statement is ``+``,
``-``, ``*`` or a sign of numbers and at most one numpy array, a division of a float or of a numpy
array by a number written in the code that is not zero (``h / 2``; an integer divided may be too
large for a float, and raise), a copy of a name (``t3 = t1``), or a numpy function of one array
applied entry by entry (``np.exp(w)``; a ufunc the registry holds rules for, so it only computes its
value), its operands' kinds known (``kinds``: numbers, and arrays of known axes). Such a statement
computes the same value wherever it runs and raises nothing (a number and an array broadcast
whatever the array's shape; numpy's float warnings are warnings, unless the caller asked numpy to
raise them), so computing it once, or once where a loop runs no step, changes no value Python
computes. The names it reads are bound nowhere in the loop (``ir.defined``, every nested statement:
an item write binds its array again in the IR, and the loops that write an array in place do so only
where no other name sees it, ``analysis.in_place_writes``); its own name is bound by it alone, read
by nothing in the loop before it, and by nothing outside the loop (so a loop that runs no step
leaves no value Python would not have). An array, unlike a number, has an identity: computed once,
every step's name holds the one array where Python made a new one a step, so it moves only where
nothing in the function asks which object a name holds (no guard of a write: ``registry.def_guard``,
``view_of``, ``check_in_place``, ``is_same``... which the memory model writes wherever an object may
be changed in place or seen through another name; with one, a step's ``x += ...`` on the array
another step made, through an alias, would reach the others). Anything else stays where it is.
"""

from __future__ import annotations

import operator

import gast
import numpy as np

from ast_ad.analysis.kinds import kinds_of
from ast_ad.core import registry
from ast_ad.ir import nodes as ir

# arithmetic that raises nothing on numbers and one array (a division by zero raises for floats)
_ARITHMETIC = {operator.add, operator.sub, operator.mul, operator.neg, operator.pos}


def hoisted(function: ir.Function, shapes: tuple[int, ...]) -> ir.Function:
    """``function`` with the loop-invariant arithmetic of its ``for`` loops before them (``shapes``:
    the parameters' labels, which say which hold numbers and which numpy arrays)."""
    if ir.loop_free(function.body):
        return function
    # (what moves may make more known: ``neg_k = -k``, declared ``None`` before the loop, holds an
    # array once it moves, and ``0.1 * neg_k`` may follow it)
    for _ in range(4):
        moved = _hoisted_once(function, shapes)
        if moved is function:
            break
        function = moved
    return function


def _hoisted_once(function: ir.Function, shapes: tuple[int, ...]) -> ir.Function:
    kinds = kinds_of(function, shapes)
    numbers = kinds.numbers()
    # (numbers of floats or complex numbers: ``("num", 0, True)``)
    inexact = frozenset(name for name, fact in kinds.facts.items()
                        if fact[0] == "num" and fact[1] == 0 and fact[2])
    # (an array moves only where no statement asks which object a name holds: see above)
    arrays = frozenset() if _asks_identity(function) else frozenset(
        name for name in kinds.facts if (kinds.rank(name) or 0) >= 1 and name not in numbers
    )
    reads: dict[str, int] = {}  # how often each name is read in the whole function
    for stmt in ir.walk(function.body):
        for name in ir.reads_of(stmt):
            reads[name] = reads.get(name, 0) + 1
    if isinstance(function.result, ir.Var):
        reads[function.result.name] = reads.get(function.result.name, 0) + 1
    body = _block(function.body, (numbers, arrays, inexact), reads)
    if body is function.body:
        return function
    return ir.with_body(function, body)


# the names holding numbers, numpy arrays, and floats or complex numbers
Known = tuple[frozenset[str], frozenset[str], frozenset[str]]


def _block(body: tuple[ir.Stmt, ...], known: Known,
           reads: dict[str, int]) -> tuple[ir.Stmt, ...]:
    out: list[ir.Stmt] = []
    changed = False
    for stmt in body:
        if ir.blocks(stmt):
            inner = [_block(block, known, reads) for block in ir.blocks(stmt)]
            if any(a is not b for a, b in zip(inner, ir.blocks(stmt), strict=True)):
                stmt, changed = ir.with_blocks(stmt, inner), True
        if type(stmt) is ir.For:
            moved, stmt = _out_of(stmt, known, reads)
            if moved:
                changed = True
                names = {m.target for m in moved if isinstance(m, ir.Assign)}
                # (a declaration ``t1 = None`` of a name now bound before the loop: gone)
                while out and _declares(out[-1], names):
                    out.pop()
                out += moved
        out.append(stmt)
    return tuple(out) if changed else body


def _declares(stmt: ir.Stmt, names: set[str]) -> bool:
    return type(stmt) is ir.Assign and stmt.target in names and stmt.value == ir.Const(None)


def _out_of(loop: ir.For, known: Known,
            reads: dict[str, int]) -> tuple[list[ir.Stmt], ir.For]:
    """The statements of ``loop``'s body that move before it, and the loop without them."""
    bound: dict[str, int] = {loop.target: 1}
    read_in_loop: dict[str, int] = {}
    for stmt in ir.walk(loop.body):
        for name in ir.defined(stmt):
            bound[name] = bound.get(name, 0) + 1
        for name in ir.reads_of(stmt):
            read_in_loop[name] = read_in_loop.get(name, 0) + 1
    moved: list[ir.Stmt] = []
    kept: list[ir.Stmt] = []
    read_before: set[str] = set()
    invariant: set[str] = set()
    for stmt in loop.body:
        if (
            type(stmt) is ir.Assign
            and bound.get(stmt.target) == 1
            and stmt.target not in read_before
            # read in the loop only: a loop that runs no step leaves it as Python does
            and reads.get(stmt.target, 0) == read_in_loop.get(stmt.target, 0)
            and (
                # a copy of what the loop does not change: the same object in every step
                type(stmt.value) is ir.Var and _invariant(stmt.value, bound, invariant)
                or type(stmt.value) is ir.Call
                and not stmt.value.kwargs
                and _raises_nothing(stmt.value, known)
                and all(_invariant(a, bound, invariant) for a in stmt.value.args)
            )
        ):
            moved.append(stmt)
            invariant.add(stmt.target)
            continue
        kept.append(stmt)
        for inner in ir.walk((stmt,)):
            read_before.update(ir.reads_of(inner))
    if not moved:
        return [], loop
    return moved, ir.For(loop.target, loop.iter, tuple(kept), loop.line)


def _asks_identity(function: ir.Function) -> bool:
    """Whether a statement of ``function`` asks which object a name holds: a guard of a write
    (``registry.guarded_argument``), written by the memory model where an object may change in place
    or be seen through another name, or the user's own ``is``, ``is not`` or ``id(...)``."""
    for stmt in ir.walk(function.body):
        value = stmt.value if isinstance(stmt, ir.Assign) else None
        if type(value) is ir.Call and (registry.guarded_argument(value.fn.obj) is not None
                                       or _identity(value.fn.obj)):
            return True
        raw = (value if isinstance(value, ir.Raw)
               else stmt.test if isinstance(stmt, ir.While)
               else stmt if isinstance(stmt, ir.Effect) else None)
        if raw is not None and (
            any(isinstance(node, (gast.Is, gast.IsNot)) for node in gast.walk(raw.node))
            or any(_identity(ref.obj) for ref in raw.refs)
        ):
            return True
    return False


def _identity(obj: object) -> bool:
    """Whether ``obj`` is a function that asks which object a name holds (``is``, ``is not``,
    ``id``); compared by identity, since a reference may be any object (an array, unhashable)."""
    return obj is operator.is_ or obj is operator.is_not or obj is id


def _raises_nothing(call: ir.Call, known: Known) -> bool:
    """Whether ``call`` is arithmetic of numbers and at most one numpy array, a division of a float
    or an array by a constant that is not zero, or a numpy function of one array entry by entry, its
    operands' kinds known (``known``)."""
    numbers, arrays, inexact = known
    if call.fn.obj is operator.truediv and len(call.args) == 2:
        top, bottom = call.args
        return (
            type(bottom) is ir.Const and type(bottom.value) in (int, float) and bottom.value != 0
            and (type(top) is ir.Const and type(top.value) is float
                 or type(top) is ir.Var and (top.name in arrays or top.name in inexact))
        )
    kinds = [
        "number" if type(a) is ir.Const and type(a.value) in (int, float)
        else "number" if type(a) is ir.Var and a.name in numbers
        else "array" if type(a) is ir.Var and a.name in arrays
        else None
        for a in call.args
    ]
    if None in kinds or kinds.count("array") > 1:
        return False
    fn = call.fn.obj
    if fn in _ARITHMETIC:
        return True
    return (isinstance(fn, np.ufunc) and fn.nin == 1 and fn.nout == 1 and kinds == ["array"]
            and registry.is_pure(fn))


def _invariant(atom: ir.Atom, bound: dict[str, int], invariant: set[str]) -> bool:
    """Whether ``atom`` is a value the loop does not change: a constant, or a name that the loop
    binds nowhere (or that moves before it)."""
    if type(atom) is ir.Const:
        return True
    if type(atom) is ir.Var:
        return atom.name not in bound or atom.name in invariant
    return False
