"""An item of a tuple written in the code read through it: ``pair = (out, out_dot)`` then
``pair[1]`` is ``out_dot`` itself.

Code lowered into a body (``ast_ad.jvp(f, ...)[1]`` written there, ``frontend.nested``) packs the
pair its function returns and the body takes one item of it; read through the tuple, the modes
differentiate the pack and the item too (forward mode builds the tangents' pair to take one of
them; reverse mode scatters an adjoint into a zero pair), and whatever only the other item needed
is computed for nothing. Read as the item itself, nothing reads the pack, which is left out, and
the modes compute nothing for the other item.

The facts relied on: a tuple cannot change, and holds the very objects its display names; so
``t[k]``, for ``t = (a, b)`` bound once and a constant ``k``, is the object ``a`` or ``b`` named
when the tuple was made. Where that name is bound once too, before the tuple in the same block
(or is a parameter that no statement binds again), it names that object wherever the item is read
after the tuple in that block: the read is a copy of the name. Anything else (a name bound
again, a read in another block, an index not written out) stays as it is.
"""

from __future__ import annotations

import operator
from collections import Counter

from ast_ad.ir import nodes as ir


def items_read_through(function: ir.Function) -> ir.Function:
    """``function`` with each ``u = t[k]`` of a tuple ``t`` written in the code a copy of the name
    (or the constant) the tuple holds at ``k``, where the module docstring's facts say it is the
    same object."""
    packs = {s.target for s in ir.walk(function.body) if isinstance(s, ir.Assign)
             and isinstance(s.value, ir.Pack) and s.value.kind == "tuple"}
    if not packs:
        return function  # (no tuple written: one scan)
    bound: Counter[str] = Counter(function.params)
    for stmt in ir.walk(function.body):
        bound.update(ir.defined(stmt))
    fixed_params = {p for p in function.params if bound[p] == 1}
    replaced: dict[int, ir.Atom] = {}

    def scan(body: tuple[ir.Stmt, ...]) -> None:
        seen: set[str] = set(fixed_params)  # (names bound once, before here in this block)
        # (tuples bound once, before here in this block: each item, where it is a constant or a
        # name bound once before the tuple in this block, else None)
        made: dict[str, tuple[ir.Atom | None, ...]] = {}
        for stmt in body:
            for block in ir.blocks(stmt):
                scan(block)
            if not isinstance(stmt, ir.Assign):
                seen.update(name for name in ir.defined(stmt) if bound[name] == 1)
                continue
            value = stmt.value
            if isinstance(value, ir.Call) and value.fn.obj is operator.getitem \
                    and not value.kwargs and len(value.args) == 2 \
                    and isinstance(value.args[0], ir.Var) and value.args[0].name in made \
                    and isinstance(value.args[1], ir.Const) \
                    and type(value.args[1].value) is int:
                items = made[value.args[0].name]
                k = value.args[1].value
                if -len(items) <= k < len(items) and (item := items[k]) is not None:
                    replaced[id(stmt)] = item
            if isinstance(value, ir.Pack) and value.kind == "tuple" and bound[stmt.target] == 1:
                made[stmt.target] = tuple(
                    e if isinstance(e, ir.Const) or isinstance(e, ir.Var) and e.name in seen
                    else None for e in value.elts)
            if bound[stmt.target] == 1:
                seen.add(stmt.target)

    scan(function.body)
    if not replaced:
        return function

    def read(stmt: ir.Stmt) -> list[ir.Stmt]:
        item = replaced.get(id(stmt))
        if item is None:
            return [stmt]
        assert isinstance(stmt, ir.Assign)
        return [ir.Assign(stmt.target, item, stmt.line)]

    body = ir.mapped(function.body, read)
    # a tuple that nothing reads now: left out (a display of names computes nothing else)
    unread = packs - ir.reads_in(body) - (
        {function.result.name} if isinstance(function.result, ir.Var) else set())
    if unread:
        body = ir.mapped(body, lambda stmt: [] if isinstance(stmt, ir.Assign)
                         and stmt.target in unread and isinstance(stmt.value, ir.Pack) else [stmt])
    return ir.with_body(function, body, function.mutable - unread)
