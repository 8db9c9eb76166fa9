"""Binomial checkpointing of a loop's backward pass (``grad(f, checkpoints=c)``).

A checkpointed loop keeps at most ``c`` snapshots of its loop-carried state and computes the steps
between them again, on the schedule ``ast_ad.revolve`` gives: the forward pass runs the
first sweep (a snapshot at the start of each segment, the steps untaped) and tapes the last step;
the backward pass is one loop over the schedule's remaining actions::

    for action, begin, end in reversal:
        if action == 'reverse':      # the backward pass of steps begin..end (taped just before)
        elif action == 'tape':       # run steps begin..end again, taped
        elif action == 'advance':    # run them untaped
        elif action == 'snapshot' / 'restore' / 'release':  # the stack of snapshots

Which loops can be, and their state, is ``analysis.checkpoint_state``'s to say; the tapes and
restores are ``saving``'s.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable

from ast_ad.analysis.activity import InPlace, checkpoint_state
from ast_ad.core.records import record
from ast_ad.ir import nodes as ir
from ast_ad.ir.naming import Namer
from ast_ad.ir.pieces import Made
from ast_ad.modes.accumulate import Accumulation
from ast_ad.modes.adjoint import Derive
from ast_ad.modes.saving import Saving, restore_mark
from ast_ad.modes.templates import Scratch
from ast_ad.optimize.batching import Term, batch_products
from ast_ad.runtime import revolve

_REVOLVE, _SLICE = ir.Ref(revolve.revolve, "revolve"), ir.Ref(slice, "slice")
_ITEM, _REVERSED = ir.Ref(operator.getitem, "operator.getitem"), ir.Ref(reversed, "reversed")
_EQ = ir.Ref(operator.eq, "operator.eq")


class CheckpointWarning(UserWarning):
    """``checkpoints=`` was asked for, and a loop keeps its whole tape: which loop, and why (said
    once for each gradient, when it is transformed)."""


@record(frozen=False)
class Checkpointed:
    """A loop whose backward pass computes steps again from snapshots
    (``ast_ad.revolve``)."""

    state: tuple[str, ...]  # the loop-carried names each snapshot keeps
    sweep: str  # the names, in generated code, of the forward pass's segments,
    reversal: str  # of the backward pass's actions,
    stack: str  # and of the stack of snapshots
    # in the backward pass's schedule, what stands for a step run again taped
    tape_in: ir.Assign | None = None
    # and untaped, until the forward pass is built (``stand_in``, ``filled``)
    advance_in: ir.Assign | None = None
    taped: tuple[ir.Stmt, ...] | None = None  # a step of the forward pass, taped
    untaped: tuple[ir.Stmt, ...] | None = None  # and untaped (``forward_checkpointed``)


class Checkpointing:
    """The checkpointed loops of ``reverse.Reverser``, a part of it that receives what it reads:
    the function and its facts (the loops written in place; which loops are checkpointed and why
    not, which it fills in), the number of snapshots, the driver (a callee's IR says whether a loop
    that calls it can be computed again), the generated code's names, the loops' sums, the
    reverser's saving and adjoints, and its three questions (whether a statement needs an adjoint,
    a block's forward sweep, a block's backward pass)."""

    def __init__(
        self,
        function: ir.Function,
        facts: tuple[InPlace, dict[int, Checkpointed], dict[int, str], dict[int, Term]],
        checkpoints: int | str | None,
        derive: Derive,
        names: tuple[Namer, Scratch],
        parts: tuple[Saving, Accumulation],
        needs_adjoint: Callable[[ir.Stmt], bool],
        forward_block: Callable[[tuple[ir.Stmt, ...], bool], list[ir.Stmt]],
        step_backward: Callable[[ir.For], list[ir.Stmt]],
    ):
        self.function, self.checkpoints, self.derive = function, checkpoints, derive
        # the loops written in place; the loops checkpointed, and how (``plan_checkpoints``); why
        # a loop is not, said in a comment above it; the accumulations a loop's steps may sum after
        # it (``batching``)
        self.in_place, self.checkpointed, self.not_checkpointed, self.terms = facts
        self.namer, self.scratch = names  # (the scratch: names of parts of one expression)
        self.saving, self.adjoints = parts
        self.needs_adjoint, self.forward_block, self.step_backward = (
            needs_adjoint, forward_block, step_backward
        )

    def plan_checkpoints(self) -> None:
        """Which top-level loops are checkpointed, and with which state
        (``analysis.checkpoint_state``)."""
        if self.checkpoints is None:
            return
        for position, stmt in enumerate(self.function.body):
            if not isinstance(stmt, (ir.For, ir.While)) or not self.needs_adjoint(stmt):
                continue
            state, why = checkpoint_state(
                self.function, position, self.in_place, self.derive.normalized
            )
            if why is not None:
                self.not_checkpointed[id(stmt)] = why
                warnings.warn(
                    f"{stmt.line.filename}:{stmt.line.lineno}: checkpoints= leaves this loop taped "
                    "in "
                    f"full: {why}",
                    CheckpointWarning,
                    stacklevel=2,
                )
                continue
            self.checkpointed[id(stmt)] = Checkpointed(
                state,
                self.namer.fresh("sweep"),
                self.namer.fresh("reversal"),
                self.namer.fresh("snapshots"),
            )

    def forward_checkpointed(self, stmt: ir.For, plan: Checkpointed) -> list[ir.Stmt]:
        """The first sweep of a checkpointed loop: each segment starts with a snapshot, and runs
        untaped; then the last step, taped. ``revolve`` picks the segments."""
        if self.checkpoints == "auto":
            # (the number of snapshots chosen when the loop starts, from its length and the size
            # of its state then: ``revolve.auto_snapshots``)
            packed, carried = self.adjoints.part(ir.Pack(tuple(ir.Var(n) for n in plan.state)))
            made, schedule = self.adjoints.part(
                ir.Call(_REVOLVE, (stmt.iter, ir.Const("auto"), carried)), *packed
            )
        else:
            made, schedule = self.adjoints.part(
                ir.Call(_REVOLVE, (stmt.iter, ir.Const(self.checkpoints)))
            )
        start, stop = self.namer.fresh("start"), self.namer.fresh("stop")
        plan.untaped = tuple(self.forward_block(stmt.body, False))
        segment = self.over(
            (start, stop),
            ir.Var(plan.sweep),
            [*self.snapshot_state(plan), *self.steps(stmt, start, stop, plan.untaped)],
        )
        plan.taped = tuple(self.forward_block(stmt.body, True))
        last, steps = self.adjoints.part(ir.Call(_ITEM, (stmt.iter, ir.Const(slice(-1, None)))))
        state = ", ".join(plan.state) or "nothing"
        if self.checkpoints == "auto":
            # (the budget is read when the loop starts: ``revolve.AUTO_BYTES``)
            kept = f"as many snapshots of {state} as fit in revolve.AUTO_BYTES"
        else:
            kept = (f"at most {self.checkpoints} snapshot" + ("s" if self.checkpoints != 1 else "")
                    + f" of {state}")
        comment = ir.Comment(f"line {stmt.line.lineno}: checkpointed, {kept}")
        return [comment, *made, ir.Unpack((plan.sweep, plan.reversal), schedule, ir.NOWHERE),
                ir.Assign(plan.stack, ir.Pack((), "list"), ir.NOWHERE), segment,
                *last, ir.For(stmt.target, steps, plan.taped, ir.NOWHERE)]

    def stand_in(self, stmt: ir.For) -> ir.Assign:
        """What a step of the loop reads from outside it, as one expression: a step run again in the
        backward pass reads these, so what overwrites them later is restored before it
        (``resolve_restores``). What the step computes itself, or takes from a snapshot, it needs no
        tape for. The forward pass's step takes its place once it is built (``filled``): a part
        nothing reads, which the printer refuses, were it left."""
        bound = {n for s in ir.walk(stmt.body) for n in ir.defined(s)} | {stmt.target}
        outside = dict.fromkeys(
            n for s in ir.walk(stmt.body) for n in ir.reads_of(s) if n not in bound
        )
        return ir.Assign(
            self.scratch.fresh(""), ir.Pack(tuple(ir.Var(n) for n in outside)), ir.NOWHERE
        )

    def snapshot_state(self, plan: Checkpointed) -> list[ir.Stmt]:
        """``snapshots.append((h, c))``."""
        if len(plan.state) == 1:
            return [ir.Append(plan.stack, ir.Var(plan.state[0]), ir.NOWHERE)]
        made, kept = self.adjoints.part(ir.Pack(tuple(ir.Var(n) for n in plan.state)))
        return [*made, ir.Append(plan.stack, kept, ir.NOWHERE)]

    def restore_state(self, plan: Checkpointed) -> list[ir.Stmt]:
        """``h, c = snapshots[-1]``."""
        top = ir.Call(_ITEM, (ir.Var(plan.stack), ir.Const(-1)))
        if len(plan.state) <= 1:
            return [ir.Assign(n, top, ir.NOWHERE) for n in plan.state]
        made, kept = self.adjoints.part(top)
        return [*made, ir.Unpack(plan.state, kept, ir.NOWHERE)]

    def adjoint_checkpointed(self, stmt: ir.For, plan: Checkpointed) -> list[ir.Stmt]:
        """The backward pass of a checkpointed loop: ``revolve``'s actions, from the last step's on,
        one loop over them whose branches run its steps backward, again (taped or not: stand-ins
        until the forward pass is built), or keep, restore or drop a snapshot."""
        steps = self.step_backward(stmt)
        bound = {n for s in ir.walk((stmt,)) for n in self.saving.defined(s)}
        before, steps, stacked, sums = batch_products(steps, bound, self.terms, self.scratch,
                                                      self.namer)
        after = stacked + self.adjoints.summed_after(sums, steps, set())
        steps = [*self.saving.computed_again(stmt, steps), *steps]
        action, start, stop = (
            self.namer.fresh("action"),
            self.namer.fresh("begin"),
            self.namer.fresh("end"),
        )
        plan.tape_in, plan.advance_in = self.stand_in(stmt), self.stand_in(stmt)
        made, segment = self.segment(stmt, start, stop)
        made, backwards = self.adjoints.part(ir.Call(_REVERSED, (segment,)), *made)
        actions: list[tuple[str, list[ir.Stmt]]] = [
            ("reverse", [*made, ir.For(stmt.target, backwards, tuple(steps), ir.NOWHERE)]),
            ("tape", self.steps(stmt, start, stop, (plan.tape_in,))),
            ("advance", self.steps(stmt, start, stop, (plan.advance_in,))),
            ("snapshot", self.snapshot_state(plan)),
            ("restore", self.restore_state(plan)),
            ("release", [ir.Pop(None, plan.stack, ir.NOWHERE)])]
        chain: tuple[ir.Stmt, ...] = ()
        for kind, inner in reversed(actions):
            tested, test = self.adjoints.part(ir.Call(_EQ, (ir.Var(action), ir.Const(kind))))
            chain = (*tested, ir.If(test, tuple(inner), chain, ir.NOWHERE))
        driver = self.over((action, start, stop), ir.Var(plan.reversal), list(chain))
        return [*before, driver, *after, restore_mark(stmt.target, id(stmt))]

    def segment(self, stmt: ir.For, start: str, stop: str) -> Made:
        """``steps[start:stop]``, of the loop's steps."""
        made, bounds = self.adjoints.part(ir.Call(_SLICE, (ir.Var(start), ir.Var(stop))))
        return self.adjoints.part(ir.Call(_ITEM, (stmt.iter, bounds)), *made)

    def steps(
        self, stmt: ir.For, start: str, stop: str, body: tuple[ir.Stmt, ...]
    ) -> list[ir.Stmt]:
        """``for t in steps[start:stop]:`` and ``body``."""
        made, segment = self.segment(stmt, start, stop)
        return [*made, ir.For(stmt.target, segment, body, ir.NOWHERE)]

    def over(self, targets: tuple[str, ...], items: ir.Atom, body: list[ir.Stmt]) -> ir.For:
        """``for a, b in items:`` and ``body``: a loop over a part that is unpacked at once
        (``syntax.pieces``)."""
        each = self.scratch.fresh("")
        return ir.For(
            each, items, (ir.Unpack(targets, ir.Var(each), ir.NOWHERE), *body), ir.NOWHERE
        )

    def filled(self, backward: list[ir.Stmt]) -> list[ir.Stmt]:
        """``backward`` with each checkpointed loop's steps run again, taped or not, as the forward
        pass runs them (known once it is built, when its tapes are)."""
        steps: dict[int, tuple[ir.Stmt, ...]] = {}
        for plan in self.checkpointed.values():
            if plan.tape_in is not None:
                # (the forward pass is built)
                assert plan.taped is not None and plan.untaped is not None
                steps[id(plan.tape_in)], steps[id(plan.advance_in)] = plan.taped, plan.untaped
        if not steps:
            return backward
        return list(ir.mapped(tuple(backward), lambda s: list(steps.get(id(s), (s,)))))
