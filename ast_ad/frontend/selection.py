"""A branch of ``np.where`` computed only where it is selected: exact derivatives where the other is
not finite.

``np.where(x > 0, np.sqrt(x), 2 * x)`` at ``x = -1`` selects ``2 * x``, and its derivative is 2. But
the backward pass of ``np.sqrt`` runs on every entry: where the branch is not selected its adjoint
is zero, and zero times the derivative of ``sqrt`` at ``-1`` is ``nan``. The cure users write by
hand is the "double where": the branch computes from its inputs where it is selected, and from a
harmless value elsewhere. This pass writes it::

    cond = x > 0                                cond = x > 0
    sqrt_x = np.sqrt(x)         becomes         x_chosen = chosen(cond, x, True)
    t = 2 * x                                   sqrt_x = np.sqrt(x_chosen)
    out = np.where(cond, sqrt_x, t)             t = 2 * x
                                                out = np.where(cond, sqrt_x, t)

``chosen(c, x, True)`` is ``x`` where ``c`` holds and one elsewhere, a primitive whose derivative is
zero where the branch is not selected (``runtime.chosen``). The facts this relies on: the statements
between the inputs and the branch are elementwise (``registry``: each entry of a result reads the
same entry of each argument), and nothing else reads what they compute, so each entry ``np.where``
selects is computed from the same numbers as before, bit for bit, and the entries it does not select
are read by nothing. Where the branch reads anything else (a reduction, a value used elsewhere), it
is left as written.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ast_ad import runtime
from ast_ad.core import registry
from ast_ad.ir import nodes as ir
from ast_ad.ir.naming import Namer

_CHOSEN = ir.Ref(runtime.chosen, "chosen")


def selected(function: ir.Function) -> ir.Function:
    """``function`` with each branch of ``np.where`` that only elementwise statements compute,
    computed where it is selected."""
    if not any(_is_where(stmt) for stmt in ir.walk(function.body)):
        return function
    namer = Namer(used=function.names())
    # (a rewrite only lowers a leaf's count: kept as it was)
    reads = _reads_in(list(ir.walk(function.body)))
    if isinstance(function.result, ir.Var):
        reads[function.result.name] += 1
    body = _blocks(function.body, function, namer, reads)
    return ir.with_body(function, body)


def _blocks(body: tuple[ir.Stmt, ...], function: ir.Function, namer: Namer,
            reads: Counter[str]) -> tuple[ir.Stmt, ...]:
    stmts = [
        ir.with_blocks(s, [_blocks(b, function, namer, reads) for b in ir.blocks(s)])
        if ir.blocks(s)
        else s
        for s in body
    ]
    k = 0
    while k < len(stmts):
        stmt = stmts[k]
        if _is_where(stmt):
            added = _select(stmts, k, function, namer, reads)
            k += added
        k += 1
    return tuple(stmts)


def _is_where(stmt: ir.Stmt) -> bool:
    return (
        isinstance(stmt, ir.Assign)
        and isinstance(stmt.value, ir.Call)
        and stmt.value.fn.obj is np.where
        and len(stmt.value.args) == 3
        and not stmt.value.kwargs
        and isinstance(stmt.value.args[0], ir.Var)
    )


def _select(
    stmts: list[ir.Stmt], at: int, function: ir.Function, namer: Namer, reads: Counter[str]
) -> int:
    """Rewrite the branches of the ``np.where`` at ``stmts[at]`` in place; how many statements were
    inserted."""
    where = ir.call_of(stmts[at])  # type: ignore[arg-type]
    cond = where.args[0]
    assert isinstance(cond, ir.Var)
    added = 0
    for slot, keep in ((1, True), (2, False)):
        at_now = at + added
        defined = {s.target: k for k, s in enumerate(stmts[:at_now]) if isinstance(s, ir.Assign)}
        operand = ir.call_of(stmts[at_now]).args[slot]  # type: ignore[arg-type]
        branch = _branch(stmts, at_now, operand, defined, reads, function)
        if not branch:
            continue
        leaves = {
            a.name
            for k in branch
            for a in ir.call_of(stmts[k]).args  # type: ignore[arg-type]
            if isinstance(a, ir.Var) and a != cond and defined.get(a.name) not in branch
        }
        # the test comes after the branch: the branch, whose
        if defined.get(cond.name, -1) >= min(branch):
            # values nothing else reads, moves
            if leaves & function.mutable or defined[cond.name] in branch:
                continue  # to just before the np.where, its inputs read there as they were
            moved = [stmts[k] for k in sorted(branch)]
            rest = [st for k, st in enumerate(stmts[:at_now]) if k not in branch]
            stmts[:at_now] = rest + moved
            branch = set(range(at_now - len(moved), at_now))
        renamed: dict[str, str] = {}
        # (inserting from the end keeps the earlier positions)
        for k in sorted(branch, reverse=True):
            call = ir.call_of(stmts[k])  # type: ignore[arg-type]
            for leaf in sorted(leaves & {a.name for a in call.args if isinstance(a, ir.Var)}):
                if leaf not in renamed:
                    renamed[leaf] = namer.fresh(f"{leaf}_chosen")
        firsts = {
            leaf: min(
                k
                for k in branch
                for a in ir.call_of(stmts[k]).args  # type: ignore[arg-type]
                if a == ir.Var(leaf)
            )
            for leaf in renamed
        }
        for k in sorted(branch):
            stmt = stmts[k]
            assert isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Call)
            args = tuple(
                ir.Var(renamed[a.name]) if isinstance(a, ir.Var) and a.name in renamed else a
                for a in stmt.value.args
            )
            stmts[k] = ir.Assign(
                stmt.target,
                ir.Call(
                    stmt.value.fn, args, stmt.value.kwargs, stmt.value.moved, stmt.value.attribute
                ),
                stmt.line,
            )
        for leaf, first in sorted(firsts.items(), key=lambda item: -item[1]):
            line = stmts[first].line
            stmts.insert(
                first,
                ir.Assign(
                    renamed[leaf], ir.Call(_CHOSEN, (cond, ir.Var(leaf), ir.Const(keep))), line
                ),
            )
            added += 1
    return added


def _branch(
    stmts: list[ir.Stmt],
    at: int,
    operand: ir.Atom,
    defined: dict[str, int],
    reads: Counter[str],
    function: ir.Function,
) -> set[int]:
    """The positions of the statements that compute ``operand`` for the ``np.where`` at ``at`` and
    nothing else: elementwise, each of their results read by the ``np.where`` or by one another
    alone."""
    if not isinstance(operand, ir.Var) or operand.name not in defined:
        return set()
    start = defined[operand.name]
    if (
        not _elementwise(stmts[start], function)
        or reads[operand.name] != _reads_in([stmts[at]])[operand.name]
    ):
        return set()
    branch = {start}
    grown = True
    while grown:
        grown = False
        inside = _reads_in([stmts[k] for k in branch] + [stmts[at]])
        for k in sorted(branch):
            for arg in ir.call_of(stmts[k]).args:  # type: ignore[arg-type]
                if not isinstance(arg, ir.Var):
                    continue
                j = defined.get(arg.name)
                if j is not None and j not in branch and _elementwise(stmts[j], function) \
                        and reads[arg.name] == inside[arg.name]:
                    branch.add(j)
                    grown = True
    return branch


def _elementwise(stmt: ir.Stmt, function: ir.Function) -> bool:
    if not (isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Call)) or stmt.value.kwargs \
            or stmt.target in function.mutable:
        return False
    rule = registry.lookup(stmt.value.fn.obj)
    return rule is not None and rule.elementwise and not rule.nondiff


def _reads_in(stmts: list[ir.Stmt]) -> Counter[str]:
    return Counter(name for stmt in stmts for name in ir.reads_of(stmt))
