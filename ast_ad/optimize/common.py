"""A number computed twice from the same operands, computed once: the second statement becomes a
copy of the first's name (``t3 = 0.5 * dt`` after ``t1 = 0.5 * dt`` is ``t3 = t1``), which reverse
mode reads as a copy (its adjoint passes to the first's).

The leapfrog step's two half steps each lower to ``0.5 * dt * k``; once both move before the loop
(``hoist``), the second is the first.

The facts this relies on: the call is of a registered function that only computes its value
(``registry.is_pure``), so the same operands give the same value; its result is a number
(``kinds``), which no write changes in place, so two names of one number cannot differ later,
whatever the code does with arrays; both names and every name the call reads are numbers bound once
in the function (``ir.defined``; ``function.mutable`` is out), so the operands are the same values
where the second statement runs (a list is not: an append changes it in place); and the first
statement comes before the second in the same block, so it has run.
"""

from __future__ import annotations

from typing import Any

from ast_ad.analysis.kinds import kinds_of
from ast_ad.core import registry
from ast_ad.ir import nodes as ir


def shared_numbers(function: ir.Function, shapes: tuple[int, ...]) -> ir.Function:
    """``function`` with each number computed again from the same operands in one block a copy of
    the first (``shapes``: the parameters' labels, which say which hold numbers)."""
    if not _repeats(function.body):
        return function  # (nothing is computed twice: the kinds of the names are not asked)
    counts: dict[str, int] = {name: 1 for name in function.params}
    for stmt in ir.walk(function.body):
        for name in ir.defined(stmt):
            counts[name] = counts.get(name, 0) + 1
    once = {name for name, n in counts.items() if n == 1} - function.mutable
    numbers = kinds_of(function, shapes).numbers() & once
    body = _block(function.body, numbers)
    if body is function.body:
        return function
    return ir.with_body(function, body)


def _repeats(body: tuple[ir.Stmt, ...]) -> bool:
    """Whether a call of the same function on the same operands, as written, is made twice."""
    calls: set[Any] = set()
    for stmt in ir.walk(body):
        if type(stmt) is ir.Assign and type(stmt.value) is ir.Call and not stmt.value.kwargs:
            key = (id(stmt.value.fn.obj), *(
                a.name if type(a) is ir.Var else repr(a.value) if type(a) is ir.Const else id(a)
                for a in stmt.value.args
            ))
            if key in calls:
                return True
            calls.add(key)
    return False


def _block(body: tuple[ir.Stmt, ...], numbers: set[str] | frozenset[str]) -> tuple[ir.Stmt, ...]:
    out: list[ir.Stmt] = []
    seen: dict[Any, str] = {}
    copies: dict[str, str] = {}  # a name made a copy of another: that other (``t3`` -> ``t1``)
    changed = False
    for stmt in body:
        if ir.blocks(stmt):
            inner = [_block(block, numbers) for block in ir.blocks(stmt)]
            if any(a is not b for a, b in zip(inner, ir.blocks(stmt), strict=True)):
                stmt, changed = ir.with_blocks(stmt, inner), True
        elif type(stmt) is ir.Assign and stmt.target in numbers and type(stmt.value) is ir.Call:
            key = _key(stmt.value, numbers, copies)
            if key is not None and key in seen:
                copies[stmt.target] = seen[key]
                stmt, changed = ir.Assign(stmt.target, ir.Var(seen[key]), stmt.line), True
            elif key is not None:
                seen[key] = stmt.target
        out.append(stmt)
    return tuple(out) if changed else body


def _key(call: ir.Call, numbers: set[str] | frozenset[str], copies: dict[str, str]) -> Any:
    """What makes two calls give one value, or ``None`` where that is not known: the function, if it
    only computes its value, and operands that are numbers bound once (a copy by what it copies: a
    list, which an append changes in place, is no such operand: ``len(ys)`` before and after
    ``ys.append(v)`` differ) or plain constants (a float by its ``repr``: ``-0.0`` is not
    ``0.0``)."""
    if call.kwargs or not registry.is_pure(call.fn.obj):
        return None
    parts: list[Any] = [id(call.fn.obj)]
    for atom in call.args:
        if type(atom) is ir.Var and atom.name in numbers:
            parts.append(("name", copies.get(atom.name, atom.name)))
        elif type(atom) is ir.Const and type(atom.value) in (int, float, bool, str, type(None)):
            parts.append(("constant", type(atom.value), repr(atom.value)))
        else:
            return None
    return tuple(parts)
