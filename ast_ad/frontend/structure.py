"""Put every jump in tail position, so the reverse pass sees only structured control flow.

Before::

    for x in xs:
        if x < 0:
            continue
        total = total + x
        if total > 10:
            return total
    return 0.0

After::

    returned = False
    for x in xs:
        if x < 0:
            pass
        else:
            total = total + x
            if total > 10:
                out = total
                returned = True
                break
    if returned:
        pass
    else:
        out = 0.0
    return out

The statements after a jump move into the ``else`` branch of the ``if`` that
jumps; a ``continue`` left at the end of a loop body does nothing and goes; a
``return`` becomes an assignment to one result name, and inside a loop also a
flag and a ``break``. A ``break`` stays a real ``break``, last in its loop
body, so the loop's trip count says everything the reverse pass needs.
A function whose only ``return`` is its last statement is left as it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gast

from ast_ad.ir import syntax
from ast_ad.ir.naming import Namer

JUMPS = (gast.Return, gast.Break, gast.Continue)


def structure(body: list[gast.stmt], namer: Namer) -> list[gast.stmt]:
    """The function body with jumps in tail position and at most one ``return``, at the end."""
    if not _needs_structure(body):
        return body
    result, flag = namer.fresh("out"), namer.fresh("returned")
    shaper = _Shaper(result, flag)
    out = shaper.block(body, loop=None)
    prologue = [_assign(flag, gast.Constant(value=False, kind=None))] if shaper.flag_used else []
    return prologue + out + [_located(gast.Return(value=_name(result)), body[-1])]


def _needs_structure(body: list[gast.stmt]) -> bool:
    returns = [n for s in body for n in _walk(s) if isinstance(n, gast.Return)]
    tail_only = len(returns) == 1 and body and body[-1] is returns[0]
    loops_jump = any(
        isinstance(n, (gast.Break, gast.Continue))
        or (isinstance(n, (gast.For, gast.While)) and n.orelse)
        for s in body
        for n in _walk(s)
    )
    return bool(returns) and not tail_only or loops_jump


class _Loop:
    def __init__(self, broke: str | None):
        self.broke = broke


class _Shaper:
    def __init__(self, result: str, flag: str):
        self.result, self.flag, self.flag_used = result, flag, False
        self.counter = 0

    def block(self, stmts: list[gast.stmt], loop: _Loop | None) -> list[gast.stmt]:
        out: list[gast.stmt] = []
        for i, s in enumerate(stmts):
            rest = stmts[i + 1:]
            if isinstance(s, gast.Return):
                out.append(
                    _located(
                        _assign(self.result, s.value or gast.Constant(value=None, kind=None)), s
                    )
                )
                if loop is not None:
                    self.flag_used = True
                    out += [_located(_assign(self.flag, gast.Constant(value=True, kind=None)), s),
                            _located(gast.Break(), s)]
                return out
            if isinstance(s, gast.Break):
                if loop is not None and loop.broke:
                    out.append(
                        _located(_assign(loop.broke, gast.Constant(value=True, kind=None)), s)
                    )
                return out + [s]
            if isinstance(s, gast.Continue):
                return out + [s]
            if isinstance(s, gast.If):
                out.append(self.branch(s, rest, loop))
                if rest and _may_jump(s):
                    return out
                continue
            if isinstance(s, (gast.For, gast.While)):
                out += self.loop(s)
                # a return inside ends the loops around it too
                if _returns(s) and (rest or loop is not None):
                    self.flag_used = True
                    guard = [gast.Break()] if loop is not None else []
                    out.append(_located(gast.If(test=_name(self.flag), body=guard or [gast.Pass()],
                                                orelse=self.block(rest, loop)), s))
                    return out
                continue
            out.append(s)
        return out

    def branch(self, s: gast.If, rest: list[gast.stmt], loop: _Loop | None) -> gast.If:
        body, orelse = s.body, s.orelse
        if rest and _may_jump(s):
            body = body if _always_jumps(body) else body + rest
            orelse = orelse if _always_jumps(orelse) else orelse + rest
        new = gast.If(
            test=s.test,
            body=self.block(body, loop) or [gast.Pass()],
            orelse=self.block(orelse, loop),
        )
        return _located(new, s)

    def loop(self, s: gast.For | gast.While) -> list[gast.stmt]:
        broke = None
        if s.orelse:
            self.counter += 1
            broke = f"broke_{self.counter}" if self.counter > 1 else "broke"
        body = _drop_tail_continue(self.block(s.body, _Loop(broke))) or [gast.Pass()]
        if isinstance(s, gast.For):
            new = gast.For(target=s.target, iter=s.iter, body=body, orelse=[], type_comment=None)
        else:
            new = gast.While(test=s.test, body=body, orelse=[])
        out = [_located(new, s)]
        if broke:
            out.insert(0, _located(_assign(broke, gast.Constant(value=False, kind=None)), s))
            out.append(_located(gast.If(test=_name(broke), body=[gast.Pass()],
                                        orelse=self.block(s.orelse, None)), s))
        return out


def _drop_tail_continue(body: list[gast.stmt]) -> list[gast.stmt]:
    if body and isinstance(body[-1], gast.Continue):
        return body[:-1]
    if body and isinstance(body[-1], gast.If):
        last = body[-1]
        last.body = _drop_tail_continue(last.body) or [gast.Pass()]
        last.orelse = _drop_tail_continue(last.orelse)
    return body


def _always_jumps(stmts: list[gast.stmt]) -> bool:
    """Every path through ``stmts`` ends in a jump."""
    for s in stmts:
        if isinstance(s, JUMPS):
            return True
        if isinstance(s, gast.If) and _always_jumps(s.body) and _always_jumps(s.orelse):
            return True
    return False


def _may_jump(s: gast.stmt) -> bool:
    """Some path through ``s`` jumps out of the block it stands in."""
    return any(isinstance(n, JUMPS) for n in _walk(s, into_loops=False)) or _returns(s)


def _returns(s: gast.stmt) -> bool:
    return any(isinstance(n, gast.Return) for n in _walk(s))


def _walk(node: gast.AST, into_loops: bool = True) -> Iterator[gast.AST]:
    """The statements under ``node`` (not inside nested functions; loops only if ``into_loops``)."""
    yield node
    for field in ("body", "orelse"):
        for child in getattr(node, field, None) or []:
            if isinstance(child, (gast.FunctionDef, gast.Lambda)):
                continue
            if isinstance(child, (gast.For, gast.While)) and not into_loops:
                yield from (n for n in _walk(child) if isinstance(n, gast.Return))
                continue
            yield from _walk(child, into_loops)


def _name(id_: str) -> gast.Name:
    return gast.Name(id=id_, ctx=gast.Load(), annotation=None, type_comment=None)


def _assign(target: str, value: gast.expr) -> gast.Assign:
    store = gast.Name(id=target, ctx=gast.Store(), annotation=None, type_comment=None)
    return gast.Assign(targets=[store], value=value, type_comment=None)


def _located(node: gast.AST, like: gast.AST) -> gast.AST:
    for n in syntax.walk(node):
        if not hasattr(n, "lineno") or getattr(n, "lineno", None) is None:
            gast.copy_location(n, like)
    return node


# the calls a loop unfolds into reads by position of their arguments (``lower_control.iteration``)
_UNFOLDED = ("enumerate", "zip", "reversed")


def held_iterables(body: list[gast.stmt], namer: Namer) -> list[gast.stmt]:
    """``body`` with each loop that binds the name it steps through again stepping through a name
    of its own, bound to that object where the loop starts.

    Python reads ``for v in xs:``'s ``xs`` once, when the loop starts: a loop whose body (or whose
    own target) binds ``xs`` again (``xs = [v * v] + xs``) goes on stepping through the object it
    started with. The lowering reads a loop's items by position from the name, so such a loop is
    written ``xs_held = xs`` before it and ``for v in xs_held:``, which Python runs the same. A
    write into an item (``xs[0] = v``) or ``xs += ...`` changes the object itself where it is a
    list or an array, as Python's loop sees it: no new binding, and nothing is held."""
    out: list[gast.stmt] = []
    for stmt in body:
        stmt = _with_held_blocks(stmt, namer)
        if isinstance(stmt, gast.For):
            rebound = bound_names([stmt.target, *stmt.body])
            stepped = [n for n in _stepped_names(stmt.iter) if n.id in rebound]
            if stepped:
                held: dict[str, str] = {}
                for name in stepped:
                    if name.id not in held:
                        held[name.id] = namer.fresh(f"{name.id}_held")
                        out.append(_located(_assign(held[name.id], _name(name.id)), stmt))
                iterated = syntax.substituted(stmt.iter, _renamed(held, {id(n) for n in stepped}))
                stmt = gast.copy_location(
                    gast.For(target=stmt.target, iter=iterated, body=stmt.body,
                             orelse=stmt.orelse, type_comment=stmt.type_comment),
                    stmt,
                )
        out.append(stmt)
    return out


def _renamed(names: dict[str, str], reads: set[int]) -> Any:
    """A ``syntax.substituted`` replacement: the names read at ``reads`` (node ids) renamed."""
    return lambda n: gast.copy_location(_name(names[n.id]), n) if id(n) in reads else None


def _with_held_blocks(stmt: gast.stmt, namer: Namer) -> gast.stmt:
    """``stmt`` with the blocks it holds rewritten by ``held_iterables`` (new nodes where one
    changed; a nested function's body is its own)."""
    if isinstance(stmt, (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef)):
        return stmt
    fields: dict[str, object] = {}
    for field in ("body", "orelse", "finalbody"):
        block = getattr(stmt, field, None)
        if isinstance(block, list) and block:
            new = held_iterables(block, namer)
            if len(new) != len(block) or any(a is not b for a, b in zip(new, block, strict=True)):
                fields[field] = new
    handlers = getattr(stmt, "handlers", None)
    if handlers:
        made = []
        for handler in handlers:
            new = held_iterables(handler.body, namer)
            if len(new) != len(handler.body) \
                    or any(a is not b for a, b in zip(new, handler.body, strict=True)):
                handler = gast.copy_location(
                    gast.ExceptHandler(type=handler.type, name=handler.name, body=new), handler
                )
            made.append(handler)
        if any(a is not b for a, b in zip(made, handlers, strict=True)):
            fields["handlers"] = made
    if not fields:
        return stmt
    return gast.copy_location(type(stmt)(**{**stmt.__dict__, **fields}), stmt)


def _stepped_names(node: gast.expr) -> list[gast.Name]:
    """The names a loop over ``node`` reads its items from by position: ``node`` itself, or the
    arguments of the ``enumerate``, ``zip`` and ``reversed`` it unfolds."""
    if isinstance(node, gast.Name):
        return [node]
    if isinstance(node, gast.Call) and isinstance(node.func, gast.Name) \
            and node.func.id in _UNFOLDED:
        return [n for arg in node.args for n in _stepped_names(arg)]
    return []


def bound_names(nodes: list[gast.AST]) -> set[str]:
    """The names ``nodes`` bind (a loop's target and body): not an augmented assignment's target,
    which changes a list or an array itself, nor the names of nested functions' and comprehensions'
    own scopes."""
    names: set[str] = set()
    augmented: set[int] = set()
    stack: list[gast.AST] = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda,
                             gast.ClassDef, gast.ListComp, gast.SetComp, gast.DictComp,
                             gast.GeneratorExp)):
            if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef)):
                names.add(node.name)
            continue
        if isinstance(node, gast.AugAssign):
            augmented.add(id(node.target))
        if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Store) \
                and id(node) not in augmented:
            names.add(node.id)
        stack.extend(gast.iter_child_nodes(node))
    return names
