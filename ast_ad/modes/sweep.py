"""The forward sweep of reverse mode: the user's statements as written, with what the backward pass
needs kept.

Before a statement overwrites a value the backward pass reads, the value goes on its tape
(``saving`` decides which); a loop's write ``y[i] = v`` in place tapes the entries it overwrites; a
loop that may stop early counts its trips; a call of the user's function calls its forward function,
which returns what its backward function reads; a checkpointed loop runs its first sweep
(``checkpointing``)::

    for t in r:                                  for t in r:
        h = np.tanh(W @ h + xs[t])      ->           h_tape.append(h)
                                                     h = np.tanh(W @ h + xs[t])
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import gast

from ast_ad import runtime
from ast_ad.analysis.activity import InPlace
from ast_ad.analysis.kinds import Kinds
from ast_ad.ir import nodes as ir
from ast_ad.ir import syntax
from ast_ad.ir.syntax import RefTable
from ast_ad.modes.accumulate import Accumulation
from ast_ad.modes.checkpointing import Checkpointing
from ast_ad.modes.saving import Saving

_DETACHED = ir.Ref(runtime.detached, "detached")
_ITEM, _ENTRIES = ir.Ref(operator.getitem, "operator.getitem"), ir.Ref(runtime.entries, "entries")


class ForwardSweep:
    """The forward sweep of ``reverse.Reverser``, a part of it that receives what it reads: the
    generated code's references, what each name holds, the calls of user functions (by statement:
    adjoint, saved name, args, active), the loops written in place and checkpointed, the reverser's
    saving, adjoints and checkpointing, and its question whether a statement needs an adjoint."""

    def __init__(
        self,
        refs: RefTable,
        facts: tuple[Kinds, dict[int, Any], InPlace, dict[int, Any], dict[int, str]],
        parts: tuple[Saving, Accumulation, Checkpointing],
        needs_adjoint: Callable[[ir.Stmt], bool],
    ):
        self.refs = refs
        self.kinds, self.calls, self.in_place, self.checkpointed, self.not_checkpointed = facts
        self.saving, self.adjoints, self.checkpointing = parts
        self.needs_adjoint = needs_adjoint

    def forward_block(self, body: tuple[ir.Stmt, ...], saving: bool) -> list[ir.Stmt]:
        """The forward sweep of ``body`` (``saving``: with what the backward pass reads kept on
        tapes), as IR."""
        out: list[ir.Stmt] = []
        for stmt in body:
            opaque = ir.blocks(stmt) and not self.needs_adjoint(stmt)
            if opaque and saving:
                out += [self.saving.push(n) for n in self.saving.snapshot(stmt)]
            elif saving and id(stmt) in self.in_place.writes:
                assert isinstance(stmt, ir.Assign)
                out += self.write_in_place(stmt)
                continue
            elif saving:
                out += [
                    self.saving.push(n)
                    for n in self.saving.defined(stmt)
                    if self.saving.saves(n, stmt)
                ]
            # the loop's own copy of each array it writes in place
            if id(stmt) in self.in_place.loops:
                # the array as the loop found it, where the backward pass reads its entries back
                # from it (``saving.plan_written_once``)
                found = self.saving.written_once.get(id(stmt), {}) if saving else {}
                out += [ir.Assign(before, ir.Var(n), ir.NOWHERE) for n, before in found.items()]
                # (``detached``, not ``x.copy()``: ``np.copy`` moves dask to numpy)
                out += [ir.Assign(n, ir.Call(_DETACHED, (ir.Var(n),)), ir.NOWHERE)
                        for n in self.in_place.loops[id(stmt)]]
            out += self.forward(stmt, saving and not opaque)
        return out

    def write_in_place(self, stmt: ir.Assign) -> list[ir.Stmt]:
        """``y[i] = v``, after saving the entries it overwrites: ``tape.append(entries(y, i))``, or
        ``tape.append(y[i])`` where that is one number (a number cannot change: it needs no
        copy); nothing where the loop writes each entry once (``saving.plan_written_once``)."""
        call = ir.call_of(stmt)
        target, index = ir.Var(stmt.target), call.args[1]
        if id(stmt) in self.saving.found_before:  # each entry written once: nothing to keep
            return [ir.SetItem(stmt.target, index, call.args[2], ir.NOWHERE)]
        taken = (
            ir.Call(_ITEM, (target, index))
            if self.kinds.indexed(call.args[0], index, stmt) == 0
            else ir.Call(_ENTRIES, (target, index))
        )
        made, old = self.adjoints.part(taken)
        return [*made, ir.Append(self.saving.tape(stmt.target, "entries"), old, ir.NOWHERE),
                ir.SetItem(stmt.target, index, call.args[2], ir.NOWHERE)]

    def forward(self, stmt: ir.Stmt, saving: bool) -> list[ir.Stmt]:
        """A statement of the user's as the forward sweep runs it: as written, its blocks' sweeps in
        a branch or a loop; a call of the user's own function calls its forward function, which
        returns what its backward function reads."""
        if id(stmt) in self.calls:
            callee, saved, args, _ = self.calls[id(stmt)]
            assert isinstance(stmt, ir.Assign)  # only assignments call functions
            made, pair = self.adjoints.part(
                ir.Call(ir.Ref(ir.CalleeRef(callee, "fwd"), "fwd"), tuple(args))
            )
            return [*made, ir.Unpack((stmt.target, saved), pair, ir.NOWHERE)]
        if isinstance(stmt, ir.If):
            return [ir.If(stmt.test, tuple(self.forward_block(stmt.body, saving)),
                          tuple(self.forward_block(stmt.orelse, saving)), stmt.line)]
        if isinstance(stmt, (ir.For, ir.While)):
            return self.forward_loop(stmt, saving)
        return [stmt]

    def forward_loop(self, stmt: ir.For | ir.While, saving: bool) -> list[ir.Stmt]:
        if saving and id(stmt) in self.checkpointed:
            assert isinstance(stmt, ir.For)  # only for loops are
            return self.checkpointing.forward_checkpointed(stmt, self.checkpointed[id(stmt)])
        if saving and id(stmt) in self.not_checkpointed:
            why = self.not_checkpointed.pop(id(stmt))  # said once, above the loop
            return [ir.Comment(f"line {stmt.line.lineno}: not checkpointed: {why}"),
                    *self.forward_loop(stmt, saving)]
        counted = saving and self.needs_adjoint(stmt) and self.saving.counts(stmt)
        count = self.saving.count_name(stmt) if counted else None
        body = self.forward_block(stmt.body, saving)
        if count:
            body.insert(0, syntax.kept(gast.AugAssign(target=syntax.store(count), op=gast.Add(),
                                                      value=syntax.const(1)), self.refs))
        loop: ir.Stmt = (
            ir.For(stmt.target, stmt.iter, tuple(body), stmt.line)
            if isinstance(stmt, ir.For)
            else ir.While(stmt.test, tuple(body), stmt.line)
        )
        if not count:
            return [loop]
        return [ir.Assign(count, ir.Const(0), ir.NOWHERE), loop, self.saving.push(count)]
