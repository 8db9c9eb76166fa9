"""Arrays let go once the backward (or forward-mode) code has read them for the last time.

A gradient function holds every value until it returns; ``released`` writes ``del`` statements so that
the big results of later lines reuse the memory of arrays nothing will read again.
"""

from __future__ import annotations

import gast
import numpy as np

from ast_ad import runtime, syntax
from ast_ad.syntax import RefTable


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
