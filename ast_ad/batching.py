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

from ast_ad import registry, syntax
from ast_ad.naming import Namer


def batch_products(body: list[gast.stmt], bound: set[str], refs: syntax.RefTable,
                   namer: Namer) -> tuple[list[gast.stmt], list[gast.stmt]]:
    """Rewrite the accumulations in a backward loop's ``body`` that can wait until after the loop.

    ``bound`` holds the names the forward loop binds. Returns the statements to put
    before the loop (empty lists) and after it (the sums).
    """
    before: list[gast.stmt] = []
    after: list[gast.stmt] = []
    terms: dict[tuple[str, str, str], str] = {}
    for stmt, parent, index in _accumulations(body):
        found = _summable(stmt, refs, bound)
        if found is None or not _only_accumulated(body, stmt.targets[0].id):
            continue
        bar, helper, fixed, pair = found
        key = (bar, helper.__name__, fixed)
        if key not in terms:
            terms[key] = namer.fresh(f"{bar}_terms")
            before.append(syntax.assign(terms[key], gast.List(elts=[], ctx=gast.Load())))
            total = syntax.call(refs.marker(helper, helper.__name__), [syntax.name(terms[key]), syntax.name(fixed)])
            after.append(syntax.assign(bar, syntax.add(syntax.name(bar), total)))
        append = gast.Attribute(value=syntax.name(terms[key]), attr="append", ctx=gast.Load())
        parent[index] = gast.Expr(value=syntax.call(append, [gast.Tuple(elts=pair, ctx=gast.Load())]))
    return before, after


def _accumulations(body: list[gast.stmt]) -> Iterator[tuple[gast.Assign, list[gast.stmt], int]]:
    """``(statement, list holding it, index)`` for each assignment in ``body`` and its ``if`` branches."""
    for index, stmt in enumerate(body):
        if isinstance(stmt, gast.Assign):
            yield stmt, body, index
        elif isinstance(stmt, gast.If):
            yield from _accumulations(stmt.body)
            yield from _accumulations(stmt.orelse)


def _summable(stmt: gast.Assign, refs: syntax.RefTable, bound: set[str]) -> tuple[Any, ...] | None:
    """For ``X_bar = X_bar + rule(g, a, b)`` with a summable rule and a fixed operand the loop does
    not bind: ``(X_bar, summing helper, fixed operand, [g, varying operand])``; else None."""
    value = stmt.value
    if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], gast.Name) or not isinstance(value, gast.BinOp) \
            or not isinstance(value.op, gast.Add) or not _is_name(value.left, stmt.targets[0].id):
        return None
    call = value.right
    if not isinstance(call, gast.Call) or call.keywords or len(call.args) != 3 \
            or not isinstance(call.func, gast.Name):
        return None
    summed = registry.summed_over_steps(refs.lookup(call.func.id))  # which rules can wait: a fact beside them
    if summed is None:
        return None
    helper, position = summed
    fixed = call.args[position]
    if not isinstance(fixed, gast.Name) or fixed.id in bound or fixed.id.startswith(syntax.MARK):
        return None
    varying = call.args[3 - position]
    return stmt.targets[0].id, helper, fixed.id, [call.args[0], varying]


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

