"""Arrays let go once the backward (or forward-mode) code has read them for the last time.

A gradient function holds every value until it returns; ``released`` writes ``del`` statements so
that the big results of later lines reuse the memory of arrays nothing will read again.
"""

from __future__ import annotations

from typing import Any

import gast
import numpy as np

from ast_ad import runtime
from ast_ad.ir import syntax
from ast_ad.ir.syntax import RefTable


def released(backward: list[gast.stmt], releasable: frozenset[str], adjoints: frozenset[str],
             keep: set[str], refs: RefTable) -> list[gast.stmt]:
    """``backward`` with ``del`` statements for the names it reads no more.

    A gradient function would hold every value until it returns; for arrays that means
    the backward pass's big results (a weight matrix's adjoint) are allocated while memory
    nothing will read again is still held. Released are the ``releasable`` forward arrays
    and those of the array ``adjoints`` that the backward pass assigns at its top level
    (once bound there, they stay bound), once read for the last time: at the end of each
    line's backward block, and before any call that may build a big new array (anything
    but a ufunc or ``unbroadcast``). Names in ``keep`` stay.
    """
    if not releasable and not adjoints:
        return backward  # (no array to let go: numbers only)
    last: dict[str, int] = {}
    bound: dict[str, int] = {name: -1 for name in releasable}
    for k, stmt in enumerate(backward):
        for name in syntax.name_ids(stmt, loads=True):
            last[name] = k
        if isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Name) \
                and stmt.targets[0].id in adjoints:
            bound.setdefault(stmt.targets[0].id, k)
    ends: dict[int, list[str]] = {}
    for name, k in last.items():
        if name in bound and bound[name] <= k and name not in keep:
            ends.setdefault(k, []).append(name)
    unread = sorted(releasable - last.keys() - keep)
    out = [_delete(unread)] if unread else []
    pending: list[str] = []
    for k, stmt in enumerate(backward):
        if pending and (syntax.comment_text(stmt) is not None or _allocates(stmt, refs)):
            out.append(_delete(sorted(pending)))
            pending = []
        out.append(stmt)
        pending += ends.get(k, [])
    return out  # the return releases what is still pending


def _allocates(stmt: gast.stmt, refs: RefTable) -> bool:
    """Whether ``stmt`` calls something that may build a new array bigger than its arguments."""
    for node in syntax.walk(stmt):
        if isinstance(node, gast.BinOp) and isinstance(node.op, gast.MatMult):
            return True  # a product: as a call of a helper would
        if isinstance(node, gast.Call):
            fn = refs.lookup(node.func.id) if isinstance(node.func, gast.Name) else None
            if not isinstance(fn, np.ufunc) and fn is not runtime.unbroadcast:
                return True
    return False


def _delete(names: list[str]) -> gast.Delete:
    return gast.Delete(targets=[syntax.name(n, gast.Del()) for n in names])


def without_dead_constants(
    body: list[gast.stmt], keep: set[str]
) -> tuple[list[gast.stmt], set[str]]:
    """``body`` without the assignments of a constant to a name that nothing reads afterwards, on
    any path: an adjoint reset to zero at the end of a branch (``y_bar = 0.0``) where no earlier
    value of ``y`` is read back. A declaration (``y = None`` before a branch or loop that binds
    ``y``) stays: a transformation of this code reads it as the name's first binding, whose kind it
    knows. The fact it relies on: a constant is computed by nothing and raises nothing, so leaving
    out an assignment nothing reads changes nothing else; a read anywhere later (in a later step of
    a loop, through ``del``) keeps it (``_pruned``). ``keep``: the names read after ``body``; also
    returned, the names read from its start on. The statements it changes are made anew (``body``'s
    own are left as they are)."""
    return _pruned(body, set(keep), None)


def _pruned(body: list[gast.stmt], live: set[str], loop: tuple[set[str], set[str]] | None
            ) -> tuple[list[gast.stmt], set[str]]:
    """``body`` pruned, and the names live at its start, given those live at its end; ``loop``: the
    names live after the enclosing loop and at the start of its step (where a ``break`` and a
    ``continue`` go)."""
    out: list[gast.stmt] = []
    for stmt in reversed(body):
        kind = type(stmt)
        if kind is gast.Assign and len(stmt.targets) == 1 and type(stmt.targets[0]) is gast.Name:
            name = stmt.targets[0].id
            if (
                name not in live
                and type(stmt.value) is gast.Constant
                and stmt.value.value is not None
            ):
                # (dead: nothing reads it; ``x = None``, a declaration later passes read, stays)
                continue
            live = (live - {name}) | syntax.name_ids(stmt.value, loads=True)
        elif kind is gast.If:
            body_, body_live = _pruned(stmt.body, set(live), loop)
            orelse, else_live = _pruned(stmt.orelse, set(live), loop)
            test = syntax.name_ids(stmt.test, loads=True)
            if _empty(body_) and _empty(orelse) and type(stmt.test) is gast.Name:
                continue  # (nothing left in either branch, and the test a name: no branch)
            if (
                len(body_) != len(stmt.body)
                or len(orelse) != len(stmt.orelse)
                or any(
                    a is not b for a, b in zip(body_ + orelse, stmt.body + stmt.orelse, strict=True)
                )
            ):
                stmt = gast.copy_location(
                    gast.If(test=stmt.test, body=_block(body_), orelse=_block(orelse, True)), stmt
                )
            live = body_live | else_live | test
        elif kind in (gast.For, gast.While):
            stmt, live = _pruned_loop(stmt, live)
        elif kind in (gast.Break, gast.Continue) and loop is not None:
            live = set(loop[0]) | (set(loop[1]) if kind is gast.Continue else set())
        elif kind is gast.Return:
            live = syntax.name_ids(stmt, loads=True)
        # an expression, a write into an item, ``del`` (which needs its names bound): reads, kills
        # nothing
        else:
            live = live | syntax.name_ids(stmt)
        out.append(stmt)
    out.reverse()
    return out, live


def _empty(block: list[gast.stmt]) -> bool:
    """Whether ``block`` has no statement but comments (``syntax.comment``)."""
    return all(syntax.comment_text(stmt) is not None for stmt in block)


def _block(block: list[gast.stmt], orelse: bool = False) -> list[gast.stmt]:
    """``block`` as a body Python compiles: ``pass`` after it where it has nothing but comments (an
    ``else`` with nothing at all is no ``else``)."""
    if orelse and not block:
        return []
    return [*block, gast.Pass()] if _empty(block) else block


def _pruned_loop(stmt: Any, after: set[str]) -> tuple[gast.stmt, set[str]]:
    """A loop pruned, and the names live where it starts: the names live at the start of a step
    found again until they settle (a name a later step reads is live at the end of each step)."""
    is_for = type(stmt) is gast.For
    header = syntax.name_ids(stmt.iter if is_for else stmt.test, loads=True)
    target = syntax.name_ids(stmt.target) if is_for else set()
    else_live = _pruned(stmt.orelse, set(after), None)[1] if stmt.orelse else set()
    head = set(after) | header | else_live
    while True:
        _, start = _pruned(stmt.body, head | after, (after, head))
        new_head = head | (start - target) | header
        if new_head == head:
            break
        head = new_head
    body, _ = _pruned(stmt.body, head | after, (after, head))
    orelse = _pruned(stmt.orelse, set(after), None)[0] if stmt.orelse else []
    if (
        len(body) != len(stmt.body)
        or any(a is not b for a, b in zip(body, stmt.body, strict=True))
        or len(orelse) != len(stmt.orelse)
    ):
        fields = (
            {"target": stmt.target, "iter": stmt.iter, "type_comment": None}
            if is_for
            else {"test": stmt.test}
        )
        stmt = gast.copy_location(
            type(stmt)(body=_block(body), orelse=_block(orelse, True), **fields), stmt
        )
    return stmt, head | after
