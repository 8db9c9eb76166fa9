"""Loop-invariant arithmetic on numbers, moved out of its loop: computed once before the loop
instead of once a step, so that reverse mode neither computes nor tapes it in every step, and adds
its adjoint up over the steps before passing it on once.

The leapfrog step ``p = p - 0.5 * dt * k * q`` lowers to ``t1 = 0.5 * dt`` and ``t1_times_k = t1 *
k`` inside the loop; both read only names the loop never binds, so they move before it::

    for step in r:                           t1 = 0.5 * dt
        t1 = 0.5 * dt                        t1_times_k = t1 * k
        t1_times_k = t1 * k        ->        for step in r:
        t2 = t1_times_k * q                      t2 = t1_times_k * q
        ...                                      ...

The facts this relies on, each asked of the one place that decides it: the statement is ``+``,
``-``, ``*`` or a sign of numbers (``kinds``: every name it reads holds a number, and constants are
numbers), which computes the same value wherever it runs and raises nothing, so computing it once,
or once where a loop runs no step, changes no value Python computes and raises nothing Python does
not; the names it reads are bound nowhere in the loop (``ir.defined``, every nested statement); its
own name is bound by it alone, read by nothing in the loop before it, and by nothing outside the
loop (so a loop that runs no step leaves no value Python would not have). Anything else stays where
it is.
"""

from __future__ import annotations

import operator

from ast_ad.analysis.kinds import kinds_of
from ast_ad.ir import nodes as ir

# arithmetic of numbers that raises nothing (a division by zero raises for floats: not here)
_ARITHMETIC = {operator.add, operator.sub, operator.mul, operator.neg, operator.pos}


def hoisted(function: ir.Function, shapes: tuple[int, ...]) -> ir.Function:
    """``function`` with the loop-invariant arithmetic of numbers of its ``for`` loops before them
    (``shapes``: the parameters' labels, which say which hold numbers)."""
    if ir.loop_free(function.body):
        return function
    kinds = kinds_of(function, shapes)
    numbers = kinds.numbers()
    reads_outside: dict[str, int] = {}
    for stmt in ir.walk(function.body):
        for name in ir.reads_of(stmt):
            reads_outside[name] = reads_outside.get(name, 0) + 1
    if isinstance(function.result, ir.Var):
        reads_outside[function.result.name] = reads_outside.get(function.result.name, 0) + 1
    body = _block(function.body, numbers, reads_outside)
    if body is function.body:
        return function
    return ir.Function(function.name, function.params, body, function.result,
                       function.result_line, function.fn, function.mutable, function.users)


def _block(body: tuple[ir.Stmt, ...], numbers: frozenset[str],
           reads: dict[str, int]) -> tuple[ir.Stmt, ...]:
    out: list[ir.Stmt] = []
    changed = False
    for stmt in body:
        if ir.blocks(stmt):
            inner = [_block(block, numbers, reads) for block in ir.blocks(stmt)]
            if any(a is not b for a, b in zip(inner, ir.blocks(stmt), strict=True)):
                stmt, changed = ir.with_blocks(stmt, inner), True
        if type(stmt) is ir.For:
            moved, stmt = _out_of(stmt, numbers, reads)
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


def _out_of(loop: ir.For, numbers: frozenset[str],
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
            and type(stmt.value) is ir.Call
            and stmt.value.fn.obj in _ARITHMETIC
            and not stmt.value.kwargs
            and bound.get(stmt.target) == 1
            and stmt.target in numbers
            and stmt.target not in read_before
            # read in the loop only: a loop that runs no step leaves it as Python does
            and reads.get(stmt.target, 0) == read_in_loop.get(stmt.target, 0)
            and all(_invariant(a, bound, invariant, numbers) for a in stmt.value.args)
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


def _invariant(atom: ir.Atom, bound: dict[str, int], invariant: set[str],
               numbers: frozenset[str]) -> bool:
    """Whether ``atom`` is a number the loop does not change: a constant number, or a name holding
    a number that the loop binds nowhere (or that moves before it)."""
    if type(atom) is ir.Const:
        return type(atom.value) in (int, float) and type(atom.value) is not bool
    if type(atom) is ir.Var:
        return atom.name in numbers and (atom.name not in bound or atom.name in invariant)
    return False
