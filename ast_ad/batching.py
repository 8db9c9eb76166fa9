"""Sum a loop's matrix-product adjoints once, after the loop, as one matrix product (and its reads ``x[i]``
of a fixed array into one array, instead of a zero array per step).

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

from collections.abc import Iterator
from typing import Any

import gast

from ast_ad import ir, registry, syntax
from ast_ad.naming import Namer
from ast_ad.records import record


@record(eq=False)
class Term:
    """A contribution ``bar = bar + rule(g, a, b)`` whose rule can wait until after a loop (``registry.def_summed``):
    recorded by the accumulation that writes it (``term_of``), for ``batch_products`` to read, not found again by
    matching the code."""

    stmt: gast.Assign  # the accumulation
    bar: str
    helper: Any  # what sums the loop's steps at once
    fixed: str  # the operand that must stay the same through the loop
    pair: tuple[gast.expr, gast.expr]  # what each step keeps: ``g`` and the other operand


def term_of(stmt: gast.Assign, bar: str, call: ir.Call | None) -> Term | None:
    """The ``Term`` of ``stmt``, ``bar = bar + contribution``, if the contribution is ``call``, of a rule with
    ``def_summed``'s fact, on a name (which ``batch_products`` checks the loop does not bind)."""
    if call is None or call.kwargs or len(call.args) != 3:
        return None
    summed = registry.summed_over_steps(call.fn.obj)  # which rules can wait: a fact beside them
    if summed is None:
        return None
    helper, position = summed
    fixed = call.args[position]
    contribution = stmt.value.right if type(stmt.value) is gast.BinOp else None
    if type(fixed) is not ir.Var or fixed.name.startswith(syntax.SCRATCH) or not isinstance(contribution, gast.Call) \
            or len(contribution.args) != 3:
        return None
    return Term(stmt, bar, helper, fixed.name, (contribution.args[0], contribution.args[3 - position]))


def batch_products(body: list[gast.stmt], bound: set[str], terms: dict[int, Term], refs: syntax.RefTable,
                   namer: Namer) -> tuple[list[gast.stmt], list[tuple[str, gast.expr]]]:
    """Rewrite the accumulations in a backward loop's ``body`` that can wait until after the loop.

    ``bound`` holds the names the forward loop binds, ``terms`` the accumulations that may wait, by statement.
    Returns the statements to put before the loop (empty lists) and the sums for after it: ``(adjoint, sum)``,
    which the caller adds to the adjoint, or starts it from.
    """
    before: list[gast.stmt] = []
    sums: dict[tuple[str, str, str], tuple[str, gast.expr]] = {}
    for stmt, parent, index in _accumulations(body):
        term = terms.get(id(stmt))
        if term is None or term.stmt is not stmt or term.fixed in bound or not _only_accumulated(body, term.bar):
            continue
        key = (term.bar, term.helper.__name__, term.fixed)
        if key not in sums:
            kept = namer.fresh(f"{term.bar}_terms")
            before.append(syntax.assign(kept, gast.List(elts=[], ctx=gast.Load())))
            sums[key] = kept, syntax.call(refs.marker(term.helper, term.helper.__name__),
                                          [syntax.name(kept), syntax.name(term.fixed)])
        append = gast.Attribute(value=syntax.name(sums[key][0]), attr="append", ctx=gast.Load())
        parent[index] = gast.Expr(value=syntax.call(append, [gast.Tuple(elts=list(term.pair), ctx=gast.Load())]))
    return before, [(bar, total) for (bar, _, _), (_, total) in sums.items()]


def _accumulations(body: list[gast.stmt]) -> Iterator[tuple[gast.Assign, list[gast.stmt], int]]:
    """``(statement, list holding it, index)`` for each assignment in ``body`` and its ``if`` branches."""
    for index, stmt in enumerate(body):
        if isinstance(stmt, gast.Assign):
            yield stmt, body, index
        elif isinstance(stmt, gast.If):
            yield from _accumulations(stmt.body)
            yield from _accumulations(stmt.orelse)


def _only_accumulated(body: list[gast.stmt], bar: str) -> bool:
    """Whether every use of ``bar`` in ``body`` is a ``bar = bar + ...`` or ``bar = bar - ...`` that
    reads it once: then the order of the additions does not matter."""
    uses = 0
    for node in syntax.walk(gast.Module(body=body, type_ignores=[])):
        if isinstance(node, gast.Name) and node.id == bar:
            uses += 1
        elif isinstance(node, gast.Assign) and any(_is_name(t, bar) for t in node.targets):
            value = node.value
            if len(node.targets) != 1 or not isinstance(value, gast.BinOp) \
                    or not isinstance(value.op, (gast.Add, gast.Sub)) or not _is_name(value.left, bar) \
                    or any(_is_name(n, bar) for n in syntax.walk(value.right)):
                return False
            uses -= 2
    return uses == 0


def _is_name(node: gast.AST, name: str) -> bool:
    return isinstance(node, gast.Name) and node.id == name
