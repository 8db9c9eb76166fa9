"""An expression as IR: the statements that compute its parts, and the atom that holds its value
(``Made``).

Both modes build what they add to a program this way, a rule's body put in (``templates.applied``)
and what is done with its value: forward mode's tangents, reverse mode's contributions and the
accumulations that add them. The printer writes each part where it is read (``syntax.function_of``'s
parts, ``syntax.pieces``). The facts here are read from the IR, the calls themselves, never from
printed code.

>>> neg, mul = ir.Ref(operator.neg, "operator.neg"), ir.Ref(operator.mul, "operator.mul")
>>> made = ([ir.Assign("%1", ir.Call(neg, (ir.Var("g"),)), ir.NOWHERE),
...          ir.Assign("%2", ir.Call(mul, (ir.Var("%1"), ir.Var("x"))), ir.NOWHERE)],
...         ir.Var("%2"))
>>> one_expression(*made)
True
>>> stmts = list(made[0])
>>> added(stmts, ir.Var("x_bar"), made[1])  # doctest: +NORMALIZE_WHITESPACE
Call(fn=Ref(obj=<built-in function sub>, hint='operator.sub', ...), args=(Var(name='x_bar'),
Var(name='%2')), ...)
>>> [(s.target, s.value.fn.hint, s.value.args) for s in stmts]
[('%2', 'operator.mul', (Var(name='g'), Var(name='x')))]
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import gast

from ast_ad.core import registry
from ast_ad.ir import nodes as ir
from ast_ad.ir import syntax

Made = tuple[list[ir.Stmt], ir.Atom]  # statements, and the atom that holds what they compute


def unsigned(out: list[ir.Stmt], atom: ir.Atom, reads: int) -> ir.Atom | None:
    """``atom`` without the minus sign that leads it, where ``out`` binds it to ``-e`` (then ``e``)
    or to a product or quotient led by one (rewritten in ``out`` without it), and ``out`` reads it
    ``reads`` times; else ``None``."""
    if not isinstance(atom, ir.Var):
        return None
    found = [
        k for k, stmt in enumerate(out) if isinstance(stmt, ir.Assign) and stmt.target == atom.name
    ]
    if len(found) != 1:
        return None
    stmt = out[found[0]]
    assert isinstance(stmt, ir.Assign)
    value = stmt.value
    if not isinstance(value, ir.Call) or value.kwargs or value.fn.obj not in _SIGNED:
        return None
    name = atom.name
    if (
        sum(
            type(a) is ir.Var and a.name == name
            for s in ir.walk(tuple(out))
            for a in ir.atoms_of(s)
        )
        != reads
    ):
        return None  # (read elsewhere too: that reader needs the sign)
    if value.fn.obj is operator.neg and len(value.args) == 1:
        del out[found[0]]
        return value.args[0]
    if value.fn.obj in (operator.mul, operator.truediv) and len(value.args) == 2:
        inner = unsigned(out, value.args[0], 1)
        if inner is not None:
            k = out.index(stmt)
            out[k] = ir.Assign(stmt.target, ir.Call(value.fn, (inner, value.args[1])), stmt.line)
            return atom
    return None


def added(out: list[ir.Stmt], total: ir.Atom, term: ir.Atom) -> ir.Call:
    """``total + term``, or ``total - e`` where ``out`` binds ``term`` to ``-e`` or to a product or
    quotient led by one (``-g * np.sin(x)``, ``unsigned``): the same number, as a sign flip is
    exact, written as a person writes it."""
    positive = unsigned(out, term, 0)
    if positive is not None:
        return ir.Call(_SUB, (total, positive))
    return ir.Call(_ADD, (total, term))


_ADD, _SUB = ir.Ref(operator.add, "operator.add"), ir.Ref(operator.sub, "operator.sub")
# the calls a leading minus sign is taken out of
_SIGNED = (operator.neg, operator.mul, operator.truediv)


def bound_by(stmts: list[ir.Stmt], atom: ir.Atom) -> ir.Assign | None:
    """The assignment of ``stmts`` that binds ``atom`` (the last, where there are several), or
    ``None``."""
    if type(atom) is ir.Var:
        for stmt in reversed(stmts):
            if type(stmt) is ir.Assign and stmt.target == atom.name:
                return stmt
    return None


def call_of(made: Made) -> ir.Call | None:
    """The call whose value ``made`` is, where it is one (``matmul_vjp_a(g, W, h)``)."""
    stmt = bound_by(*made)
    return stmt.value if stmt is not None and type(stmt.value) is ir.Call else None


def may_give_a_container(made: Made) -> bool:
    """Whether ``made``'s value comes from a function that may return a list, tuple or dict
    (``registry``: ``def_sequence``, ``def_same_kind``), which ``+`` would join to another rather
    than add to it."""
    call = call_of(made)
    if call is None:
        return False
    return registry.returns_sequence(call.fn.obj) or bool(registry.keeps_kind(call.fn.obj))


def one_expression(stmts: list[ir.Stmt] | tuple[ir.Stmt, ...], result: ir.Atom) -> bool:
    """Whether ``stmts`` and their value ``result`` are a tree of values, which one expression can
    say: each name they bind read once, after it is bound, by them or as the result (not a value
    read twice, not an unpacking). A decision made at run time, an ``ir.If`` that binds one name on
    each path, is a conditional expression."""
    waiting: set[str] = set()
    read: set[str] = set()
    if not _tree(stmts, [waiting], read):
        return False
    if type(result) is ir.Var and result.name in waiting:
        waiting.discard(result.name)
    elif type(result) is ir.Var and result.name in read:
        return False  # (read by a statement too)
    return not waiting


def _tree(
    body: list[ir.Stmt] | tuple[ir.Stmt, ...], scopes: list[set[str]], read: set[str]
) -> bool:
    waiting = scopes[-1]
    for stmt in body:
        if type(stmt) is not ir.If and type(stmt) is not ir.Assign:
            return False
        for name in ir.reads_of(stmt):
            for scope in reversed(scopes):
                if name in scope:
                    scope.discard(name)
                    read.add(name)
                    break
            else:
                if name in read:
                    return False  # a value read twice
        if type(stmt) is ir.If:
            bound = []
            for branch in (stmt.body, stmt.orelse):
                inner: set[str] = set()
                if not _tree(branch, [*scopes, inner], read) or len(inner) != 1:
                    return False
                bound.append(inner)
            if bound[0] != bound[1]:
                return False
            waiting |= bound[0]
        else:
            assert type(stmt) is ir.Assign
            waiting.add(stmt.target)
    return True


def renamed(stmts: list[ir.Stmt], old: str, new: str) -> list[ir.Stmt]:
    """``stmts`` (assignments, unpackings, a rule's decisions, and statements that do not read
    ``old``) reading ``new`` where they read ``old``; the statements that do not read it are kept as
    they are."""
    names = {old: new}.get

    def renamed(stmt: ir.Stmt) -> list[ir.Stmt]:
        if isinstance(stmt, ir.If):
            return [ir.If(with_names(stmt.test, names), stmt.body, stmt.orelse, stmt.line)]
        if old not in ir.reads_of(stmt):
            return [stmt]
        if isinstance(stmt, ir.Unpack):
            return [ir.Unpack(stmt.targets, with_names(stmt.value, names), stmt.line)]
        # (what the modes rename: nothing else reads a value by name)
        assert isinstance(stmt, ir.Assign), stmt
        return [ir.Assign(stmt.target, with_names(stmt.value, names), stmt.line)]
    return list(ir.mapped(tuple(stmts), renamed))


def with_names(value: Any, names: Callable[[str], str | None]) -> Any:
    """``value``, an IR expression, reading ``names(n)`` where it reads a local name ``n`` for which
    that gives one (a call keeps how it was written: its keywords moved, its attribute)."""
    def atom(a: ir.Atom) -> ir.Atom:
        new = names(a.name) if type(a) is ir.Var else None
        return a if new is None else ir.Var(new)
    if isinstance(value, ir.Call):
        return ir.Call(
            value.fn,
            tuple(map(atom, value.args)),
            tuple((k, atom(a)) for k, a in value.kwargs),
            value.moved,
            value.attribute,
        )
    if isinstance(value, ir.Pack):
        return ir.Pack(tuple(map(atom, value.elts)), value.kind, value.keys)
    if isinstance(value, ir.Attr):
        return ir.Attr(atom(value.value), value.attr)
    if isinstance(value, ir.Raw):
        def name(n: gast.Name) -> gast.Name | None:
            new = names(n.id) if not n.id.startswith(syntax.MARK) else None
            return None if new is None else syntax.name(new)
        return ir.Raw(syntax.substituted(value.node, name), value.refs)
    return atom(value)
