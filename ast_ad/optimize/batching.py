"""Sum a loop's matrix-product adjoints once, after the loop, as one matrix product (and its reads
``x[i]`` of a fixed array into one array, instead of a zero array per step).

A loop that multiplies the same matrix by a new vector each step (an RNN's
``h = np.tanh(W @ h + ...)``) gives that matrix an outer product per step in the
backward pass::

    for t in reversed(r):
        ...
        W_bar = W_bar + matmul_vjp_a(g, W, h)

Nothing in the loop reads ``W_bar``, so instead the loop can keep each step's pair
``(g, h)`` and add them all up afterwards. Stacked, the pairs make two matrices,
and the sum of their outer products is one product of those, which BLAS does in a
fraction of the time of fifty small ones::

    W_bar_terms = []
    for t in reversed(r):
        ...
        W_bar_terms.append((g, h))
    W_bar = W_bar + summed_matmul_vjp_a(W_bar_terms, W)

The rewrite applies to an accumulation whose fixed operand the loop never binds,
into an adjoint that the loop only ever adds to.
"""

from __future__ import annotations

import operator
from typing import Any

from ast_ad.core import registry
from ast_ad.core.records import record
from ast_ad.ir import nodes as ir
from ast_ad.ir import syntax
from ast_ad.ir.naming import Namer
from ast_ad.ir.pieces import bound_by


@record(eq=False)
class Term:
    """A contribution ``bar = bar + rule(g, a, b)`` whose rule can wait until after a loop
    (``registry.def_summed``): recorded by the accumulation that writes it (``term_of``), for
    ``batch_products`` to read, not found again by matching the code."""

    stmt: ir.Assign  # the accumulation
    call: ir.Assign  # the part that calls the rule, which the accumulation adds
    bar: str
    helper: Any  # what sums the loop's steps at once
    fixed: str  # the operand that must stay the same through the loop
    pair: tuple[ir.Atom, ir.Atom]  # what each step keeps: ``g`` and the other operand


def term_of(accumulation: ir.Assign, stmts: list[ir.Stmt]) -> Term | None:
    """The ``Term`` of ``accumulation``, ``bar = bar + part``, where ``stmts`` bind the part to a
    call of a rule with ``def_summed``'s fact, on a name (which ``batch_products`` checks the loop
    does not bind)."""
    total = accumulation.value
    if (
        not isinstance(total, ir.Call)
        or total.fn.obj is not operator.add
        or type(total.args[1]) is not ir.Var
    ):
        return None
    made = bound_by(stmts, total.args[1])
    call = made.value if made is not None else None
    if not isinstance(call, ir.Call) or call.kwargs or len(call.args) != 3:
        return None
    summed = registry.summed_over_steps(call.fn.obj)  # which rules can wait: a fact beside them
    if summed is None:
        return None
    helper, position = summed
    fixed = call.args[position]
    if type(fixed) is not ir.Var or fixed.name.startswith(syntax.SCRATCH):
        return None
    assert made is not None
    return Term(
        accumulation,
        made,
        accumulation.target,
        helper,
        fixed.name,
        (call.args[0], call.args[3 - position]),
    )


def batch_products(body: list[ir.Stmt], bound: set[str], terms: dict[int, Term], scratch: Namer,
                   namer: Namer) -> tuple[list[ir.Stmt], list[ir.Stmt], list[tuple[str, ir.Call]]]:
    """Rewrite the accumulations in a backward loop's ``body`` that can wait until after the loop.

    ``bound`` holds the names the forward loop binds, ``terms`` the accumulations that may wait, by
    statement. Returns the statements to put before the loop (empty lists), the body rewritten, and
    the sums for after it: ``(adjoint, sum)``, which the caller adds to the adjoint, or starts it
    from.
    """
    # the accumulations that wait, and the list each keeps its pairs in
    kept: dict[int, tuple[Term, str]] = {}
    before: list[ir.Stmt] = []
    sums: dict[tuple[str, str, str], tuple[str, ir.Call]] = {}
    for stmt in ir.shallow(body):
        term = terms.get(id(stmt))
        if (
            term is None
            or term.stmt is not stmt
            or term.fixed in bound
            or not _only_accumulated(body, term.bar)
        ):
            continue
        key = (term.bar, term.helper.__name__, term.fixed)
        if key not in sums:
            pairs = namer.fresh(f"{term.bar}_terms")
            before.append(ir.Assign(pairs, ir.Pack((), "list"), ir.NOWHERE))
            sums[key] = (
                pairs,
                ir.Call(
                    ir.Ref(term.helper, term.helper.__name__), (ir.Var(pairs), ir.Var(term.fixed))
                ),
            )
        kept[id(stmt)] = term, sums[key][0]
    if not kept:
        return [], body, []
    calls = {id(term.call) for term, _ in kept.values()}

    def waiting(stmt: ir.Stmt) -> list[ir.Stmt]:
        if id(stmt) in calls:
            return []  # (its operands are read by the pair instead)
        if id(stmt) not in kept:
            return [stmt]
        term, pairs = kept[id(stmt)]
        pair = scratch.fresh("")
        return [
            ir.Assign(pair, ir.Pack(term.pair), ir.NOWHERE),
            ir.Append(pairs, ir.Var(pair), ir.NOWHERE),
        ]

    rewritten = list(ir.mapped(tuple(body), waiting))
    return before, rewritten, [(bar, total) for (bar, _, _), (_, total) in sums.items()]


def _only_accumulated(body: list[ir.Stmt], bar: str) -> bool:
    """Whether every use of ``bar`` in ``body`` is a ``bar = bar + ...`` or ``bar = bar - ...`` that
    reads it once: then the order of the additions does not matter."""
    uses = 0
    for stmt in ir.walk(tuple(body)):
        uses += ir.reads_of(stmt).count(bar)
        if bar in ir.defined(stmt) or (isinstance(stmt, ir.SetItem) and stmt.target == bar):
            value = stmt.value if isinstance(stmt, ir.Assign) else None
            if not isinstance(value, ir.Call) or value.fn.obj not in (operator.add, operator.sub) \
                    or value.args[0] != ir.Var(bar) or value.args[1] == ir.Var(bar):
                return False
            uses -= 1
    return uses == 0
