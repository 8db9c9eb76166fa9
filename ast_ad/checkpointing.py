"""Binomial checkpointing of a loop's backward pass (``grad(f, checkpoints=c)``).

A checkpointed loop keeps at most ``c`` snapshots of its loop-carried state and computes the steps
between them again, on the schedule ``ast_ad.revolve`` gives: the forward pass runs the first sweep
(a snapshot at the start of each segment, the steps untaped) and tapes the last step; the backward pass
is one loop over the schedule's remaining actions::

    for action, begin, end in reversal:
        if action == 'reverse':      # the backward pass of steps begin..end (taped just before)
        elif action == 'tape':       # run steps begin..end again, taped
        elif action == 'advance':    # run them untaped
        elif action == 'snapshot' / 'restore' / 'release':  # the stack of snapshots

Which loops can be, and their state, is ``analysis.checkpoint_state``'s to say; the tapes and restores
are ``saving``'s.
"""

from __future__ import annotations

import gast

from ast_ad import ir, revolve, syntax
from ast_ad.analysis import checkpoint_state
from ast_ad.batching import Term, batch_products
from ast_ad.records import record
from ast_ad.saving import Saving, restore_mark
from ast_ad.templates import Scratch


@record(frozen=False)
class Checkpointed:
    """A loop whose backward pass computes steps again from snapshots (``ast_ad.revolve``)."""

    state: tuple[str, ...]  # the loop-carried names each snapshot keeps
    sweep: str  # the names, in generated code, of the forward pass's segments,
    reversal: str  # of the backward pass's actions,
    stack: str  # and of the stack of snapshots
    tape_loop: gast.For | None = None  # the backward pass's taped and untaped steps, filled in when the
    advance_loop: gast.For | None = None  # forward pass is built (``stand_in``)
    reverse_loop: gast.For | None = None  # the backward pass of one step: its restores, as in straight-line code
    steps: tuple[ir.Stmt, ...] = ()  # that pass as IR, printed into ``reverse_loop`` once its restores are resolved
    driver: ir.Printed | None = None  # the schedule, in the backward pass (``Saving.schedule_of``)


class Checkpointing(Saving):
    """The checkpointed loops of ``reverse.Reverser`` (a base class of it)."""

    checkpoints: int | None
    not_checkpointed: dict[int, str]  # why a loop is not, said in a comment above it
    scratch: Scratch  # the names of parts of one expression (``syntax.pieces``)
    terms: dict[int, Term]  # the accumulations a loop's steps may sum after it (``batching``)

    def forward_block(self, body: tuple[ir.Stmt, ...], saving: bool) -> list[ir.Stmt]:
        raise NotImplementedError  # the reverser's forward statements

    def backward_block(self, body: tuple[ir.Stmt, ...]) -> list[ir.Stmt]:
        raise NotImplementedError  # the adjoint rules

    def summed_after(self, sums: list[tuple[str, ir.Call]], body: list[ir.Stmt],
                     untouched: set[str]) -> list[ir.Stmt]:
        raise NotImplementedError  # the accumulation's

    def plan_checkpoints(self) -> None:
        """Which top-level loops are checkpointed, and with which state (``analysis.checkpoint_state``)."""
        if self.checkpoints is None:
            return
        for position, stmt in enumerate(self.function.body):
            if not isinstance(stmt, (ir.For, ir.While)) or not self.needs_adjoint(stmt):
                continue
            state, why = checkpoint_state(self.function, position, self.in_place)
            if why is not None:
                self.not_checkpointed[id(stmt)] = why
                continue
            self.checkpointed[id(stmt)] = Checkpointed(state, self.namer.fresh("sweep"),
                                                       self.namer.fresh("reversal"), self.namer.fresh("snapshots"))

    def forward_checkpointed(self, stmt: ir.For, plan: Checkpointed) -> list[gast.stmt]:
        """The first sweep of a checkpointed loop: each segment starts with a snapshot, and runs untaped;
        then the last step, taped. ``revolve`` picks the segments."""
        steps = syntax.atom(stmt.iter, self.refs)
        schedule = syntax.call(self.refs.marker(revolve.revolve, "revolve"), [steps, syntax.const(self.checkpoints)])
        start, stop = self.namer.fresh("start"), self.namer.fresh("stop")
        segment = gast.For(target=syntax.store(stmt.target), iter=_segment(steps, start, stop),
                           body=self.printed(self.forward_block(stmt.body, saving=False)) or [gast.Pass()], orelse=[],
                           type_comment=None)
        sweep = gast.For(target=_targets([start, stop]), iter=syntax.name(plan.sweep),
                         body=[self.snapshot_state(plan), segment], orelse=[], type_comment=None)
        taped = self.printed(self.forward_block(stmt.body, saving=True)) or [gast.Pass()]
        assert plan.tape_loop is not None and plan.advance_loop is not None  # the backward pass is built first
        plan.tape_loop.body = syntax.clone(taped)
        plan.advance_loop.body = syntax.clone(segment.body)
        last = gast.Subscript(value=steps, slice=gast.Slice(lower=syntax.const(-1), upper=None, step=None),
                              ctx=gast.Load())
        state = ", ".join(plan.state) or "nothing"
        return [syntax.comment(f"line {stmt.line.lineno}: checkpointed, at most {self.checkpoints} snapshots "
                               f"of {state}"),
                syntax.assign([plan.sweep, plan.reversal], schedule),
                syntax.assign(plan.stack, gast.List(elts=[], ctx=gast.Load())), sweep,
                gast.For(target=syntax.store(stmt.target), iter=last, body=taped, orelse=[], type_comment=None)]

    def stand_in(self, stmt: ir.For) -> gast.stmt:
        """What a step of the loop reads from outside it, as one expression: a step run again in the backward
        pass reads these, so what overwrites them later is restored before it (``resolve_restores``). What the
        step computes itself, or takes from a snapshot, it needs no tape for."""
        bound = {n for s in ir.walk(stmt.body) for n in ir.defined(s)} | {stmt.target}
        outside = dict.fromkeys(n for s in ir.walk(stmt.body) for n in ir.reads_of(s) if n not in bound)
        return gast.Expr(value=syntax.tuple_([syntax.name(n) for n in outside]))

    def snapshot_state(self, plan: Checkpointed) -> gast.stmt:
        state = [syntax.name(n) for n in plan.state]
        kept = state[0] if len(state) == 1 else syntax.tuple_(state)
        return gast.Expr(value=syntax.call(syntax.attribute(plan.stack, "append"), [kept]))

    def adjoint_checkpointed(self, stmt: ir.For, plan: Checkpointed) -> list[ir.Stmt]:
        """The backward pass of a checkpointed loop: ``revolve``'s actions, from the last step's on. (Its schedule,
        whose loops bind tuples and whose taped steps are filled in when the forward pass is built, is written as
        syntax: ``ir.Printed``.)"""
        steps_ir = self.backward_block(stmt.body)
        bound = {n for s in ir.walk((stmt,)) for n in self.defined(s)}
        before, steps_ir, sums = batch_products(steps_ir, bound, self.terms, self.scratch, self.namer)
        after = self.summed_after(sums, steps_ir, set())
        plan.steps = (*self.computed_again(stmt), *steps_ir)
        steps = syntax.atom(stmt.iter, self.refs)
        action, start, stop = self.namer.fresh("action"), self.namer.fresh("begin"), self.namer.fresh("end")
        part = _segment(steps, start, stop)

        def loop(iterable: gast.expr, inner: list[gast.stmt]) -> gast.For:
            return gast.For(target=syntax.store(stmt.target), iter=iterable, body=inner, orelse=[], type_comment=None)
        # the steps run again: stand-ins until the forward pass is built, when the tape is known
        plan.tape_loop = loop(syntax.clone(part), [self.stand_in(stmt)])
        plan.advance_loop = loop(syntax.clone(part), [self.stand_in(stmt)])
        top = gast.Subscript(value=syntax.name(plan.stack), slice=syntax.const(-1), ctx=gast.Load())
        restore: gast.stmt = gast.Pass() if not plan.state else \
            syntax.assign(list(plan.state) if len(plan.state) > 1 else plan.state[0], top)
        plan.reverse_loop = loop(syntax.call(self.refs.marker(reversed, "reversed"), [part]), [])  # (``steps``)
        actions: list[tuple[str, list[gast.stmt]]] = [
            ("reverse", [plan.reverse_loop]),
            ("tape", [plan.tape_loop]),
            ("advance", [plan.advance_loop]),
            ("snapshot", [self.snapshot_state(plan)]),
            ("restore", [restore]),
            ("release", [gast.Expr(value=syntax.call(syntax.attribute(plan.stack, "pop"), []))])]
        chain: list[gast.stmt] = []
        for kind, inner in reversed(actions):
            test = gast.Compare(left=syntax.name(action), ops=[gast.Eq()], comparators=[syntax.const(kind)])
            chain = [gast.If(test=test, body=inner, orelse=chain)]
        driver = gast.For(target=_targets([action, start, stop]), iter=syntax.name(plan.reversal), body=chain,
                          orelse=[], type_comment=None)
        plan.driver = ir.Printed(driver)
        return [*before, plan.driver, *after, restore_mark(stmt.target, id(stmt))]


def _segment(steps: gast.expr, start: str, stop: str) -> gast.Subscript:
    """``steps[start:stop]``."""
    return gast.Subscript(value=syntax.clone(steps), slice=gast.Slice(lower=syntax.name(start),
                                                                     upper=syntax.name(stop), step=None),
                          ctx=gast.Load())


def _targets(names: list[str]) -> gast.Tuple:
    return gast.Tuple(elts=[syntax.store(n) for n in names], ctx=gast.Store())
