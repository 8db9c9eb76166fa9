"""Copies folded away: after ``t1_bar = out_bar``, the reads of ``t1_bar`` read ``out_bar``, and the copy goes.

Reverse mode gives each rule's result a name (``t1_bar = out_bar`` for ``+``); a person writing the
gradient by hand would not. The gradient's backward pass, before and after:

>>> import gast
>>> from ast_ad import printer, syntax
>>> body = gast.parse('''
... t1_bar = out_bar
... x2_bar = -out_bar * cos(x2)
... x1_bar = t1_bar * x2
... x2_bar = x2_bar + t1_bar * x1
... ''').body
>>> for stmt in folded(body, keep={"x1_bar", "x2_bar"}):
...     print(printer.to_source(syntax.to_ast(stmt)).strip())
x2_bar = -out_bar * cos(x2)
x1_bar = out_bar * x2
x2_bar = x2_bar + out_bar * x1

A copy ``a = b`` is folded where ``a`` is bound by nothing else, every read of ``a`` follows it in the same
block, and ``b`` is not bound again before the last of them (a statement that reads ``a`` and then binds
``b``, ``b = b + a``, is fine). Then each read sees the very object the copy bound: nothing changes but the
names. A copy nothing reads is dropped.
"""

from __future__ import annotations

import bisect
from collections import Counter
from typing import Any

import gast

from ast_ad import syntax


def folded(body: list[gast.stmt], keep: set[str]) -> list[gast.stmt]:
    """``body`` with its copies folded; names in ``keep`` (read after ``body``) stay. ``body`` is not changed."""
    uses = [_names(stmt) for stmt in body]
    loads: Counter[str] = Counter()
    bound: Counter[str] = Counter()
    for reads, binds in uses:
        loads.update(reads)
        bound.update(binds)
    return _block(body, loads, bound, keep, uses)


def _block(body: list[gast.stmt], loads: Counter[str], bound: Counter[str], keep: set[str],
           uses: list[tuple[Counter[str], list[str]]] | None = None) -> list[gast.stmt]:
    out = [_nested(stmt, loads, bound, keep) for stmt in body]
    if uses is None or any(new is not old for new, old in zip(out, body, strict=True)):
        uses = [_names(stmt) for stmt in out]
    reads = [counts for counts, _ in uses]
    binds: dict[str, list[int]] = {}
    readers: dict[str, list[int]] = {}
    for j, (counts, stored) in enumerate(uses):
        for name in stored:
            binds.setdefault(name, []).append(j)
        for name in counts:
            readers.setdefault(name, []).append(j)
    dropped: set[int] = set()
    for k, stmt in enumerate(out):
        copy = _copy(stmt)
        if copy is None:
            continue
        a, b = copy
        if a in keep or bound[a] != 1 or a == b:
            continue
        later = [j for j in readers.get(a, ()) if j > k]
        if sum(reads[j][a] for j in later) != loads[a]:
            continue  # read before the copy, or in another block
        if later:
            last = later[-1]
            rebinds = binds.get(b, [])
            first = bisect.bisect_right(rebinds, k)  # the first statement after the copy that binds b
            if first < len(rebinds) and (rebinds[first] < last or not _binds_after_reading(out[last], b)):
                continue
            for j in later:
                out[j] = _renamed(out[j], a, b)
                reads[j][b] += reads[j].pop(a)
                readers.setdefault(b, []).append(j)
        dropped.add(k)
    return [stmt for k, stmt in enumerate(out) if k not in dropped]


def _names(stmt: gast.stmt) -> tuple[Counter[str], list[str]]:
    """How often ``stmt`` reads each name, and the names it binds (or deletes), one entry a binding."""
    reads: Counter[str] = Counter()
    binds: list[str] = []
    stack: list[Any] = [stmt]
    while stack:  # a walk without a call per node (as ``syntax.name_ids``): this runs over the whole backward pass
        node = stack.pop()
        if type(node) is gast.Name:
            if type(node.ctx) is gast.Load:
                reads[node.id] += 1
            else:
                binds.append(node.id)
            continue
        for field in node._fields:
            value = getattr(node, field, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, gast.AST):
                        stack.append(item)
            elif isinstance(value, gast.AST):
                stack.append(value)
    return reads, binds


def _nested(stmt: gast.stmt, loads: Counter[str], bound: Counter[str], keep: set[str]) -> gast.stmt:
    """``stmt`` with the blocks inside it folded (a new node where any changed)."""
    fields = [f for f in ("body", "orelse") if isinstance(getattr(stmt, f, None), list)]
    if not fields or not isinstance(stmt, (gast.If, gast.For, gast.While)):
        return stmt
    blocks = {f: _block(getattr(stmt, f), loads, bound, keep) for f in fields}
    if all(blocks[f] == getattr(stmt, f) for f in fields):
        return stmt
    return syntax.new(type(stmt), {**stmt.__dict__, **blocks})  # (its location too)


def _copy(stmt: gast.stmt) -> tuple[str, str] | None:
    if type(stmt) is gast.Assign and len(stmt.targets) == 1 and type(stmt.targets[0]) is gast.Name \
            and type(stmt.value) is gast.Name:
        return stmt.targets[0].id, stmt.value.id
    return None


def _binds_after_reading(stmt: gast.stmt, name: str) -> bool:
    """Whether ``stmt`` is ``name = expression``: it reads everything before it binds ``name``."""
    return type(stmt) is gast.Assign and all(type(t) is gast.Name for t in stmt.targets) \
        and not any(type(n) is gast.Name and n.id == name and type(n.ctx) is not gast.Load
                    for n in syntax.walk(stmt.value))


def _renamed(stmt: gast.stmt, old: str, new: str) -> gast.stmt:
    """A copy of ``stmt`` that reads ``new`` where it read ``old``."""
    def child(value: Any) -> Any:
        if type(value) is list:
            return [child(item) for item in value]
        if not isinstance(value, gast.AST):
            return value
        if type(value) is gast.Name and value.id == old and type(value.ctx) is gast.Load:
            return syntax.new(gast.Name, {**value.__dict__, "id": new})
        return syntax.rebuilt(value, child)
    renamed: gast.stmt = syntax.rebuilt(stmt, child)
    return renamed
