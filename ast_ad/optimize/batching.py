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

Where the rule also sums from columns (``registry.def_summed``'s ``steps``) and the step's adjoint
and operand are names each step binds once, outside any branch, the loop keeps a list per name
instead of a list of pairs, and the adjoint's list is stacked once after the loop for every product
it is summed in (an RNN's ``g`` for both weights: ``np.dot(w, h) + np.dot(u, x)``)::

    g_steps = []
    h_steps = []
    x_steps = []
    for t in reversed(r):
        ...
        g_steps.append(g)
        h_steps.append(h)
        x_steps.append(x)
    g_stacked = stacked_steps(g_steps)
    w_bar = summed_dot_vjp_a_steps(g_stacked, h_steps, w)
    u_bar = summed_dot_vjp_a_steps(g_stacked, x_steps, u)

The fact this relies on: each list is appended once a step, in the same statement order, so the
lists stay aligned step by step (a name bound twice in a step, or a term in a branch, keeps pairs).
"""

from __future__ import annotations

import operator
from collections import Counter
from typing import Any

from ast_ad import runtime
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
    columns: Any = None  # what sums them from the stacked ``g`` and the other operands' list


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
        registry.summed_by_columns(call.fn.obj),
    )


def batch_products(
    body: list[ir.Stmt], bound: set[str], terms: dict[int, Term], scratch: Namer, namer: Namer,
    rows: dict[str, tuple[str, ir.Atom]] | None = None,
) -> tuple[list[ir.Stmt], list[ir.Stmt], list[ir.Stmt], list[tuple[str, ir.Call]]]:
    """Rewrite the accumulations in a backward loop's ``body`` that can wait until after the loop.

    ``bound`` holds the names the forward loop binds, ``terms`` the accumulations that may wait, by
    statement. Returns the statements to put before the loop (empty lists), the body rewritten, the
    statements to put after it (the stacks of the adjoints kept by columns), and the sums for after
    those: ``(adjoint, sum)``, which the caller adds to the adjoint, or starts it from.

    ``rows``: the names each step binds to a read ``x[t]`` of an array nothing writes, at the loop's
    variable over a range (``Saving.plan_recomputed``'s reads), with ``x`` and the range: an
    operand kept by columns that is one is not appended a step but taken after the loop at once,
    ``x_item_steps = rows_of(x, r)``, the same rows in the same order (``runtime.rows_of``).
    """
    rows = rows or {}
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
        return [], body, [], []
    calls = {id(term.call) for term, _ in kept.values()}
    # the terms kept by columns: one list a name, each appended once a step (see above)
    terms_in = Counter(pairs for _, pairs in kept.values())  # (a list of pairs kept by one term)
    # where each name is bound in a step, by the statement of ``body`` that binds it, and how often
    # (a name bound after a term reads it would give that term the last step's value, and a later
    # term this one's)
    binds: dict[str, int] = {}
    bound_times: Counter[str] = Counter()
    for k, stmt in enumerate(body):
        for inner in ir.walk((stmt,)):
            for name in ir.defined(inner):
                binds[name] = k
                bound_times[name] += 1
    # (a part of one expression, a scratch name, is printed into its reader: not kept)
    copies = {stmt.target: stmt.value.name for stmt in body
              if type(stmt) is ir.Assign and type(stmt.value) is ir.Var
              and not stmt.value.name.startswith(syntax.SCRATCH)}

    def kept_as(atom: ir.Atom, at: int) -> str | None:
        """The name whose value ``atom`` has at ``body``'s statement ``at`` in every step, through
        copies (``dot_bar = g``: ``g``), bound once, before it; ``None`` where there is none."""
        if type(atom) is not ir.Var or atom.name.startswith(syntax.SCRATCH):
            return None
        name = atom.name
        while name in binds:
            if bound_times[name] != 1 or binds[name] >= at:
                return None
            if name not in copies:
                return name
            at, name = binds[name], copies[name]
        return name  # (a name the step does not bind)

    # each term kept by columns (at the top of the step, the one term of its list, its rule summing
    # by columns), with the names its pair's values have; in the order of the steps' appends
    columns: dict[int, tuple[str, str]] = {}
    steps: dict[str, str] = {}  # a name kept by columns -> its list
    stacks: dict[str, str] = {}  # an adjoint's list -> its stack
    after: list[ir.Stmt] = []
    for k, stmt in enumerate(body):
        found = kept.get(id(stmt))
        if found is None or terms_in[found[1]] != 1 or found[0].columns is None:
            continue
        term = found[0]
        g, other = (kept_as(atom, k) for atom in term.pair)
        if g is None or other is None:
            continue
        columns[id(stmt)] = g, other
        for name in (g, other):
            if name not in steps:
                steps[name] = namer.fresh(f"{name}_steps")
        if steps[g] not in stacks:
            stacks[steps[g]] = namer.fresh(f"{g}_stacked")
            after.append(ir.Assign(stacks[steps[g]], ir.Call(_STACKED, (ir.Var(steps[g]),)),
                                   ir.NOWHERE))
        key = (term.bar, term.helper.__name__, term.fixed)
        sums[key] = (sums[key][0], ir.Call(
            ir.Ref(term.columns, term.columns.__name__),
            (ir.Var(stacks[steps[g]]), ir.Var(steps[other]), ir.Var(term.fixed)),
        ))
    # (the lists of pairs the columns replace: not made)
    replaced = {kept[k][1] for k in columns}
    before = [stmt for stmt in before if not (type(stmt) is ir.Assign and stmt.target in replaced)]
    # (an operand that is a read of a fixed array: its rows taken after the loop, not appended)
    adjoints = {g for g, _ in columns.values()}
    taken = sorted({other for _, other in columns.values() if other in rows} - adjoints)
    after += [ir.Assign(steps[name], ir.Call(_ROWS, (ir.Var(rows[name][0]), rows[name][1])),
                        ir.NOWHERE) for name in taken]
    before += [ir.Assign(steps[name], ir.Pack((), "list"), ir.NOWHERE) for name in steps
               if name not in taken]
    appended: set[str] = set(taken)

    def waiting(stmt: ir.Stmt) -> list[ir.Stmt]:
        if id(stmt) in calls:
            return []  # (its operands are read by the pair instead)
        if id(stmt) not in kept:
            return [stmt]
        term, pairs = kept[id(stmt)]
        if id(stmt) in columns:
            out: list[ir.Stmt] = []
            for name in columns[id(stmt)]:
                if name not in appended:
                    appended.add(name)
                    out.append(ir.Append(steps[name], ir.Var(name), ir.NOWHERE))
            return out
        pair = scratch.fresh("")
        return [
            ir.Assign(pair, ir.Pack(term.pair), ir.NOWHERE),
            ir.Append(pairs, ir.Var(pair), ir.NOWHERE),
        ]

    rewritten = list(ir.mapped(tuple(body), waiting))
    return before, rewritten, after, [(bar, total) for (bar, _, _), (_, total) in sums.items()]


_STACKED = ir.Ref(runtime.stacked_steps, "stacked_steps")
_ROWS = ir.Ref(runtime.rows_of, "rows_of")



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
