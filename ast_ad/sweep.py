"""The forward sweep of reverse mode: the user's statements as written, with what the backward pass needs kept.

Before a statement overwrites a value the backward pass reads, the value goes on its tape (``saving``
decides which); a loop's write ``y[i] = v`` in place tapes the entries it overwrites; a loop that may stop
early counts its trips; a call of the user's function calls its forward function, which returns what its
backward function reads; a checkpointed loop runs its first sweep (``checkpointing``)::

    for t in r:                                  for t in r:
        h = np.tanh(W @ h + xs[t])      ->           h_tape.append(h)
                                                     h = np.tanh(W @ h + xs[t])
"""

from __future__ import annotations

from typing import Any

import gast

from ast_ad import ir, runtime, syntax
from ast_ad.calls import CalleeRef
from ast_ad.checkpointing import Checkpointing


class ForwardSweep(Checkpointing):
    """The forward sweep of ``reverse.Reverser`` (a base class of it: it reads the reverser's state)."""

    def forward_block(self, body: tuple[ir.Stmt, ...], saving: bool) -> list[gast.stmt]:
        out: list[gast.stmt] = []
        for stmt in body:
            opaque = ir.blocks(stmt) and not self.needs_adjoint(stmt)
            if opaque and saving:
                out += [self.push(n) for n in self.snapshot(stmt)]
            elif saving and id(stmt) in self.in_place.writes:
                assert isinstance(stmt, ir.Assign)
                out += self.write_in_place(stmt)
                continue
            elif saving:
                out += [self.push(n) for n in self.defined(stmt) if self.saves(n, stmt)]
            if id(stmt) in self.in_place.loops:  # the loop's own copy of each array it writes in place
                copy = self.refs.marker(runtime.detached, "detached")  # x.copy(): np.copy moves dask to numpy
                out += [syntax.assign(n, syntax.call(copy, [syntax.name(n)])) for n in self.in_place.loops[id(stmt)]]
            out += self.forward(stmt, saving and not opaque)
        return out

    def write_in_place(self, stmt: ir.Assign) -> list[gast.stmt]:
        """``y[i] = v``, after saving the entries it overwrites: ``tape.append(entries(y, i))``, or
        ``tape.append(y[i])`` where that is one number (a number cannot change: it needs no copy)."""
        call = ir.call_of(stmt)
        if self.kinds.indexed(call.args[0], call.args[1], stmt) == 0:
            old = self.item(stmt.target, call.args[1], gast.Load())
        else:
            old = syntax.call(self.refs.marker(runtime.entries, "entries"), [syntax.name(stmt.target),
                                                                             syntax.atom(call.args[1], self.refs)])
        append = gast.Attribute(value=syntax.name(self.tape(stmt.target, "entries")), attr="append",
                               ctx=gast.Load())
        write = gast.Assign(targets=[self.item(stmt.target, call.args[1], gast.Store())],
                            value=syntax.atom(call.args[2], self.refs), type_comment=None)
        return [gast.Expr(value=syntax.call(append, [old])), write]

    def item(self, name: str, index: ir.Atom, ctx: Any) -> gast.expr:
        return gast.Subscript(value=syntax.name(name), slice=syntax.index(index, self.refs), ctx=ctx)

    def forward(self, stmt: ir.Stmt, saving: bool) -> list[gast.stmt]:
        if id(stmt) in self.calls:
            callee, saved, args, _ = self.calls[id(stmt)]
            assert isinstance(stmt, ir.Assign)  # only assignments call functions
            call = syntax.call(self.refs.marker(CalleeRef(callee, "fwd"), "fwd"),
                               [syntax.atom(a, self.refs) for a in args])
            return [syntax.assign([stmt.target, saved], call)]
        if isinstance(stmt, ir.If):
            body = self.forward_block(stmt.body, saving) or [gast.Pass()]
            return [gast.If(test=syntax.atom(stmt.test, self.refs), body=body,
                            orelse=self.forward_block(stmt.orelse, saving))]
        if isinstance(stmt, (ir.For, ir.While)):
            return self.forward_loop(stmt, saving)
        if isinstance(stmt, ir.Break):
            return [gast.Break()]
        if isinstance(stmt, ir.Append):
            append = gast.Attribute(value=syntax.name(stmt.target), attr="append", ctx=gast.Load())
            return [gast.Expr(value=syntax.call(append, [syntax.atom(stmt.value, self.refs)]))]
        if isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Raw):
            return [syntax.assign(stmt.target, syntax.raw(stmt.value, self.refs))]
        return [syntax.statement(stmt, self.refs)]

    def forward_loop(self, stmt: ir.For | ir.While, saving: bool) -> list[gast.stmt]:
        if saving and id(stmt) in self.checkpointed:
            assert isinstance(stmt, ir.For)  # only for loops are
            return self.forward_checkpointed(stmt, self.checkpointed[id(stmt)])
        if saving and id(stmt) in self.not_checkpointed:
            why = self.not_checkpointed.pop(id(stmt))  # said once, above the loop
            return [syntax.comment(f"line {stmt.line.lineno}: not checkpointed: {why}"),
                    *self.forward_loop(stmt, saving)]
        counted = saving and self.needs_adjoint(stmt) and self.counts(stmt)
        count = self.count_name(stmt) if counted else None
        body = self.forward_block(stmt.body, saving)
        if count:
            body.insert(0, gast.AugAssign(target=syntax.store(count), op=gast.Add(), value=syntax.const(1)))
        if isinstance(stmt, ir.For):
            loop = gast.For(target=syntax.store(stmt.target), iter=syntax.atom(stmt.iter, self.refs),
                            body=body or [gast.Pass()], orelse=[], type_comment=None)
        else:
            loop = gast.While(test=syntax.raw(stmt.test, self.refs), body=body or [gast.Pass()], orelse=[])
        if not count:
            return [loop]
        return [syntax.assign(count, syntax.const(0)), loop, self.push(count)]
