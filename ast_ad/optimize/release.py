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
    """``body`` without the assignments of a constant, or the copies of a name, to a name that
    nothing reads afterwards, on any path: an adjoint reset to zero at the end of a branch (``y_bar
    = 0.0``) where no earlier value of ``y`` is read back; a copy whose reads were folded away (``t3
    = t1``). A declaration (``y = None`` before a branch or loop that binds ``y``) stays: a
    transformation of this code reads it as the name's first binding, whose kind it knows. The fact
    it relies on: a constant, or a name bound where it is read, is computed by nothing and raises
    nothing, so leaving out an assignment nothing reads changes nothing else; a read anywhere later
    (in a later step of a loop, through ``del``) keeps it (``_pruned``). ``keep``: the names read
    after ``body``; also returned, the names read from its start on. The statements it changes are
    made anew (``body``'s own are left as they are)."""
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
            if name not in live and (
                (type(stmt.value) is gast.Constant and stmt.value.value is not None)
                or type(stmt.value) is gast.Name
            ):
                # (dead: nothing reads it; ``x = None``, a declaration later passes read, stays)
                continue
            # (in place: each caller passes a set of its own)
            live.discard(name)
            live |= syntax.name_ids(stmt.value, loads=True)
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
            live |= syntax.name_ids(stmt)
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


def sunk_zero_starts(body: list[gast.stmt]) -> list[gast.stmt]:
    """``body`` with an adjoint's start at zero (``x_bar = 0.0``) moved into the branches of the
    ``if`` that next reads or binds it, where each branch first adds arithmetic to it (``x_bar =
    x_bar + y_bar * x``): each then binds it (``x_bar = y_bar * x``), as a person writes the two
    branches' adjoints; a branch that does not mention it binds it to the zero at its end. Where
    the next statement that mentions it is such an addition, in the same block, that addition binds
    it, and the start goes.

    The facts it relies on: ``0.0 + e`` is ``e``'s value (an adjoint: a float, an array of floats
    or of complex numbers, the same entries, shape and kind; ``0.0 - e`` is ``-e`` but for the
    sign of a zero), so only which object the name holds changes; and ``e`` is arithmetic (``+``,
    ``*``, a sign...), which makes a new object, as ``0.0 + e`` did, so no other name holds it and
    no change in place elsewhere reaches it. Where a branch does not start so (it reads or binds
    the name otherwise, adds a name or a call's result, which may be an object held elsewhere, or
    does not mention it), the start stays where it is."""
    return _sunk(body)


def _sunk(body: list[gast.stmt]) -> list[gast.stmt]:
    out: list[gast.stmt] = []
    body = [_sunk_within(stmt) for stmt in body]
    for k, stmt in enumerate(body):
        name = zero_start(stmt)
        if name is not None:
            later = next(
                (j for j in range(k + 1, len(body)) if name in syntax.name_ids(body[j])), None
            )
            if later is not None and type(body[later]) is gast.If:
                moved = _started(body[later], name)
                if moved is not None:
                    body[later] = moved
                    continue
            elif later is not None:  # the next statement that mentions it, in this block
                bound = _bound_at_first_add(body[later], name)
                if bound is not None:
                    body[later] = bound
                    continue
        out.append(stmt)
    return out


def _sunk_within(stmt: gast.stmt) -> gast.stmt:
    """``stmt`` with the blocks inside it (a branch's, a loop's) sunk too."""
    kind = type(stmt)
    if kind not in (gast.If, gast.For, gast.While):
        return stmt
    body, orelse = _sunk(stmt.body), _sunk(stmt.orelse)
    if len(body) == len(stmt.body) and len(orelse) == len(stmt.orelse) and all(
        a is b for a, b in zip(body + orelse, stmt.body + stmt.orelse, strict=True)
    ):
        return stmt
    fields = {key: getattr(stmt, key) for key in stmt._fields}
    return gast.copy_location(kind(**{**fields, "body": body, "orelse": orelse}), stmt)


def zero_start(stmt: gast.stmt) -> str | None:
    """The name ``stmt`` starts at the float zero (``x_bar = 0.0``), if it does."""
    if (
        type(stmt) is gast.Assign
        and len(stmt.targets) == 1
        and type(stmt.targets[0]) is gast.Name
        and type(stmt.value) is gast.Constant
        and type(stmt.value.value) is float
        and stmt.value.value == 0.0
    ):
        return str(stmt.targets[0].id)
    return None


def _started(branch: gast.If, name: str) -> gast.If | None:
    """``branch`` with the first statement of each of its blocks that mentions ``name``, an
    addition to it, made its first binding, and the zero start put at the end of a block that does
    not mention it; ``None`` where a block does not start so (an ``elif`` is a block whose one
    statement is an ``if``), or neither mentions it."""
    blocks = []
    silent = 0
    for block in (branch.body, branch.orelse):
        first = next((j for j, s in enumerate(block) if name in syntax.name_ids(s)), None)
        if first is None:  # the zero start, at the end of a block that does not mention it
            kept = [s for s in block if type(s) is not gast.Pass]
            # (before a last statement that leaves the block: a break, a return)
            end = len(kept) - (bool(kept) and type(kept[-1]) in (gast.Break, gast.Continue,
                                                                   gast.Return, gast.Raise))
            zero = gast.Assign(targets=[syntax.name(name, gast.Store())],
                               value=syntax.const(0.0), type_comment=None)
            blocks.append([*kept[:end], zero, *kept[end:]])
            silent += 1
            continue
        stmt = block[first]
        found = _started(stmt, name) if type(stmt) is gast.If else _bound_at_first_add(stmt, name)
        if found is None:
            return None
        blocks.append([*block[:first], found, *block[first + 1:]])
    if silent == 2:
        return None  # (neither block mentions it)
    return gast.copy_location(
        gast.If(test=branch.test, body=blocks[0], orelse=blocks[1]), branch
    )


def _bound_at_first_add(stmt: gast.stmt, name: str) -> gast.stmt | None:
    """``name = e`` for ``stmt``, ``name = name + e`` (or a sum or difference that starts with
    ``name``: ``name + a - b``, ``name - a``, made ``a - b``, ``-a``) where the rest is arithmetic
    that does not read ``name``; else ``None``."""
    if not (
        type(stmt) is gast.Assign
        and len(stmt.targets) == 1
        and type(stmt.targets[0]) is gast.Name
        and stmt.targets[0].id == name
    ):
        return None
    rest = _without_start(stmt.value, name)
    if type(rest) not in (gast.BinOp, gast.UnaryOp) or name in syntax.name_ids(rest):
        return None
    return gast.copy_location(
        gast.Assign(targets=stmt.targets, value=rest, type_comment=None), stmt
    )


def _without_start(value: gast.expr, name: str) -> gast.expr | None:
    """``value``, a sum or difference whose leftmost term is ``name``, without that term: what it
    computes where ``name`` is the float zero. ``None`` where it is not so."""
    if type(value) is not gast.BinOp or type(value.op) not in (gast.Add, gast.Sub):
        return None
    if type(value.left) is gast.Name and value.left.id == name:
        if type(value.op) is gast.Add:
            return value.right
        return gast.copy_location(gast.UnaryOp(op=gast.USub(), operand=value.right), value)
    left = _without_start(value.left, name)
    if left is None:
        return None
    return gast.copy_location(gast.BinOp(left=left, op=value.op, right=value.right), value)
