"""What the forward pass keeps for the backward pass, and how the backward pass gets it back.

Reverse mode runs the user's statements forward, then their adjoints backward; an adjoint reads the
values its statement saw. A value that a later statement overwrites (in a loop, every step's) is
pushed on its own tape before it is overwritten, and popped back where the backward pass has come
back to it:

    for i in r:                          for i in reversed(r):
        h_tape.append(h)                     ... the adjoint of line 3 reads h ...
        h = np.tanh(W @ h)                   h = h_tape.pop()

The adjoint rules (``reverse``) leave a ``Restore`` mark after each statement's adjoint; this module
decides which are needed (``resolve_restores``: a restore whose value nothing reads later goes, and
so does its push), which loop statements are computed again rather than taped (``plan_recomputed``),
and writes the pushes, pops and trip counts. Checkpointed loops (``checkpointing``) save snapshots
instead, built on the same tapes.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import gast
import numpy as np

from ast_ad import runtime
from ast_ad.analysis.activity import InPlace
from ast_ad.analysis.kinds import RANGE, Kinds
from ast_ad.core import registry
from ast_ad.core.records import record
from ast_ad.ir import nodes as ir
from ast_ad.ir import syntax
from ast_ad.ir.naming import Namer
from ast_ad.ir.syntax import RefTable
from ast_ad.modes.accumulate import Accumulation

ANS = "§ans"  # stands for the new value of a name its own statement also reads


@record
class Restore:
    """A mark in the backward pass where ``name`` must hold again its value from before the
    statement whose id is ``key`` (``unappend``: where the item that statement appended to the list
    ``name`` comes off it). ``resolve_restores`` turns each mark into a pop from the name's tape, or
    drops it: none reaches the code."""

    name: str
    key: int
    unappend: bool = False


def restore_mark(name: str, key: int, unappend: bool = False) -> ir.Mark:
    """A restore mark, in the backward pass's IR, until ``resolve_restores`` turns it into a pop or
    drops it."""
    return ir.Mark(Restore(name, key, unappend))


def restored(stmt: ir.Stmt) -> str | None:
    """The name a restore mark restores, or ``None`` for any other statement."""
    return stmt.data.name if type(stmt) is ir.Mark and type(stmt.data) is Restore else None

# integer arithmetic on a loop's index that the backward pass can compute again instead of taping
INDEX_ARITHMETIC = {
    operator.add,
    operator.sub,
    operator.mul,
    operator.floordiv,
    operator.mod,
    operator.neg,
}


class Saving:
    """The saving policy of ``reverse.Reverser``, a part of it: it owns what the forward pass keeps
    for the backward pass (the tapes, the old values kept and restored, what loops compute again)
    and receives what it reads: the function and its facts (names bound more than once, first
    bindings, the calls of user functions, the loops written in place and checkpointed, what each
    name holds, the statements inside loops), the names the backward pass reads and the shapes it
    keeps, the generated code's names and references, the reverser's adjoints, and its question
    whether a statement needs an adjoint."""

    def __init__(
        self,
        function: ir.Function,
        names: tuple[Namer, RefTable],
        facts: tuple[set[str], Any, dict[int, Any], InPlace, dict[int, Any], Kinds, set[str],
                     set[int]],
        needed: set[str],
        shapes: dict[str, str],
        adjoints: Accumulation,
        needs_adjoint: Callable[[ir.Stmt], bool],
    ):
        self.function = function
        self.namer, self.refs = names
        # names bound more than once (what overwrites them saves their old values); the statements
        # that bind a name first; the calls of user functions, by statement (adjoint, saved name,
        # args, active); the loops written in place; those whose backward pass computes steps
        # again (``checkpointing``); what each name holds; names holding containers; the
        # statements inside loops
        (self.rebound, self.first, self.calls, self.in_place, self.checkpointed, self.kinds,
         self.structured, self.looped) = facts
        self.needed = needed  # the names the backward pass reads
        # arrays whose shapes the forward pass keeps for the backward pass (``shape_only``)
        self.shapes = shapes
        # of those, the ones kept as stand-ins (``runtime.stand_in``): read for their dtypes too
        self.liked: set[str] = set()
        self.adjoints, self.needs_adjoint = adjoints, needs_adjoint
        # (name, statement) whose old value is saved and restored
        self.kept: set[tuple[str, int]] = set()
        # the stack of each saved value, by what it saves (``tape``)
        self.tapes: dict[tuple[str, str], str] = {}
        # by loop: what its backward pass computes again
        self.recomputed: dict[int, list[ir.Assign]] = {}
        self.recomputed_ids: set[int] = set()
        # by loop: the arrays it writes once an entry, each with the name of the array as the loop
        # found it (``plan_written_once``); by write: that name
        self.written_once: dict[int, dict[str, str]] = {}
        self.found_before: dict[int, str] = {}
        self.lowest_index: dict[int, int] = {}  # by loop: the least value of its variable
        self.write_at: dict[tuple[int, str], tuple[int, bool]] = {}

    def shape_only(self, backward: list[ir.Stmt]) -> dict[str, str]:
        """The arrays a loop overwrites whose values the backward pass reads only for their shapes
        (``unbroadcast(g, x)``, ``np.shape(x)``: ``registry.def_shape_read``), each with a new name
        for its shape.

        Taping such an array keeps a copy of it alive for every step. The forward pass can keep its
        shape instead (``with_shapes``): ``x_shape = np.shape(x)`` after each assignment of ``x``,
        taped as any name a loop rebinds, and read as ``unbroadcast_to(g, x_shape)``. This applies
        where ``x`` is a numpy array of numbers wherever it is bound but to ``None`` (``kinds``: a
        shape tells everything ``unbroadcast`` reads of it), each of its bindings an assignment, one
        of them in a loop, and not computed again by the backward pass instead.
        """
        if not self.looped:
            return {}
        shapes, others = shape_reads(backward)
        # (and those read otherwise only where their shape, dtype and type are: kept as stand-ins,
        # ``liked``)
        metas, not_metas = meta_reads(backward)
        self.liked = {n for n in metas - not_metas if n in others}
        shapes |= self.liked
        others -= self.liked
        bindings: dict[str, list[ir.Stmt]] = {}
        for stmt in ir.walk(self.function.body):
            for name in ir.defined(stmt):
                bindings.setdefault(name, []).append(stmt)
        chosen: dict[str, str] = {}
        for name in sorted(shapes - others):
            # (``None`` before a loop: never read)
            found = [s for s in bindings.get(name, []) if not ir.binds_none(s)]
            if name in self.function.params or name in self.structured or name not in self.rebound \
                    or not any(id(s) in self.looped for s in found) \
                    or not all(isinstance(s, ir.Assign) and self.kinds.array_made(s)
                               and id(s) not in self.recomputed_ids for s in found):
                continue
            kept = f"{name}_like" if name in self.liked else f"{name}_shape"
            chosen[name] = self.namer.fresh(kept)
        self.liked &= set(chosen)
        return chosen

    def meta_only(self, backward: list[ir.Stmt]) -> dict[str, str]:
        """The names a function with no loop binds once (or takes as parameters and never binds)
        whose values its backward pass reads only for their shapes, dtypes and types
        (``registry.def_meta_read``, ``registry.def_shape_read``), each with a new name for a
        stand-in of it (``runtime.stand_in``: one zero broadcast to its shape).

        For a callee: its backward pass is called later, from its caller's, with what the forward
        pass saved; an array saved for its shape alone stays alive until then (in a loop of the
        caller, every step's). Saving a stand-in (``with_metas``) lets the array go when the
        forward pass is done with it. A name bound once holds one value wherever the backward pass
        reads it, and writes into an array keep its shape and dtype: the stand-in answers every
        such read as the array would (a list that an append, a pop or an item write changes after
        its binding keeps no stand-in). The reads are turned to the stand-ins by ``read_metas``.
        """
        if self.looped:
            return {}
        metas, others = meta_reads(backward)
        bindings: dict[str, int] = {}
        for stmt in ir.walk(self.function.body):
            for name in ir.defined(stmt):
                if not ir.binds_none(stmt):
                    bindings[name] = bindings.get(name, 0) + (
                        1 if isinstance(stmt, ir.Assign) else 2
                    )
        # a view the backward pass reads keeps its base's memory: no stand-in frees the base
        viewed = {
            stmt.value.args[0].name
            for stmt in ir.walk(self.function.body)
            if isinstance(stmt, ir.Assign) and type(stmt.value) is ir.Call
            and stmt.target in others and stmt.value.args
            and isinstance(stmt.value.args[0], ir.Var) and registry.returns_view(stmt.value.fn.obj)
        }
        # a list appended to, popped from or written item by item changes its length, or its
        # items' shapes, after its binding: its stand-in is taken where it is bound, so not for it
        # (a numpy array written item by item keeps its shape and dtype)
        changed: set[str] = set()
        for stmt in ir.walk(self.function.body):
            if isinstance(stmt, ir.Append) or isinstance(stmt, ir.SetItem) \
                    and not self.kinds.rank(stmt.target):
                changed.add(stmt.target)
            elif isinstance(stmt, ir.Pop):
                changed.add(stmt.source)
        chosen: dict[str, str] = {}
        for name in sorted(metas - others - viewed - changed):
            once = bindings.get(name, 0) == 1 and name not in self.function.params
            unbound_param = name in self.function.params and name not in bindings
            if (once or unbound_param) and name not in self.function.mutable:
                chosen[name] = self.namer.fresh(f"{name}_like")
        return chosen

    def read_shapes(self, backward: list[ir.Stmt]) -> list[ir.Stmt]:
        """``backward`` reading the kept shapes (``shapes``, from ``shape_only``) in place of their
        arrays."""
        if not self.shapes:
            return backward
        return shapes_read(backward, self.shapes)

    def plan_recomputed(self) -> None:
        """Index arithmetic, index tuples and reads of arrays nothing writes, in loops: computed
        again by the backward pass, at the top of each step, rather than taped (``t1 = i - 1``,
        ``index = i, j``, ``x_item = x[i]``).

        Such a statement sits directly in the body of a ``for`` loop (whose target is an index),
        binds a name nothing else binds, and computes it from constants, the loop's index and the
        indices of the ``for`` loops around it (bound again by their own backward steps, around
        this loop's), names computed the same way before it, and (for a read) an array no statement
        rebinds or writes: so at the top of a step's backward pass it computes what it computed in
        that step.
        """
        bindings: dict[str, int] = {}
        for stmt in ir.walk(self.function.body):
            for name in self.defined(stmt):
                bindings[name] = bindings.get(name, 0) + 1
        fixed = set(self.function.params) - self.rebound - set(self.function.mutable)
        self.plan_written_once(bindings)
        self.plan_block(self.function.body, frozenset(), bindings, fixed)

    def plan_written_once(self, bindings: dict[str, int]) -> None:
        """The arrays a loop writes once an entry, ``y[i] = v`` at its variable: each write's
        backward pass puts back the entry from the array as the loop found it (``y[i] =
        y_before[i]``, where ``y_before`` is the object the loop's own copy was made from), not
        from a tape of every entry overwritten; and a read of another entry, ``y[i - 1]``, is
        computed again at the top of the step's backward pass (``plan_loop``), not taped.

        The facts this relies on: the loop runs once (a statement of the function's own body) over
        a ``range`` (``Kinds``), so that its variable takes each value once; the array is written
        in place (``InPlace``: the memory model proved that no other variable reaches it while the
        loop writes it; the loop writes its own copy, so the object it was made from is written
        by nothing after); the function binds the array once outside the loop, and the loop only
        by one write at its variable, in its own body or a branch of it (not in a loop inside), and
        reads it only entry by entry; the variable is never negative (``lowest``). Then step ``i``
        overwrites entry ``i``, which no earlier step wrote: what the array held when the loop
        started. And an entry ``i + c`` (``c`` a nonzero integer, ``i + c`` never negative) is not
        one the step writes: at the top of the step's backward pass, the later steps undone, the
        array holds what it held when the step read it.
        """
        for loop in self.function.body:
            if not isinstance(loop, ir.For) or id(loop) not in self.in_place.loops \
                    or id(loop) in self.checkpointed or self.kinds.of(loop.iter) != RANGE \
                    or (lowest := self.lowest(loop, bindings)) is None:
                continue
            self.lowest_index[id(loop)] = lowest
            inner = list(ir.walk(loop.body))
            found: dict[str, str] = {}
            for name in self.in_place.loops[id(loop)]:
                writes = [s for s in inner if name in ir.defined(s)]
                if len(writes) != 1 or bindings.get(name) != 2 \
                        or not any(s is writes[0] for s in ir.shallow(loop.body)) \
                        or id(writes[0]) not in self.in_place.writes \
                        or not isinstance(writes[0], ir.Assign):
                    continue
                write = ir.call_of(writes[0])
                if write.args[1] != ir.Var(loop.target) or write.args[2] == ir.Var(name):
                    continue
                readers = [s for s in inner if s is not writes[0] and name in ir.reads_of(s)]
                if all(_entry_read(s, name) for s in readers):
                    found[name] = self.namer.fresh(f"{name}_before")
                    self.found_before[id(writes[0])] = found[name]
                    # where in the loop's body the write is, and whether as a statement of its own
                    self.write_at[(id(loop), name)] = next(
                        (k, s is writes[0]) for k, s in enumerate(loop.body)
                        if any(t is writes[0] for t in ir.walk((s,))))
            if found:
                self.written_once[id(loop)] = found

    def lowest(self, loop: ir.For, bindings: dict[str, int]) -> int | None:
        """The least value ``loop``'s variable takes, where it is known not to be negative: the
        loop runs over ``range(stop)``, ``range(start, stop)`` or ``range(start, stop, step)``
        bound once in the function's body, with ``start`` (a rising range) or ``stop`` (a falling
        one) an integer constant. A negative index counts from the end: two steps could write one
        entry."""
        if not isinstance(loop.iter, ir.Var) or bindings.get(loop.iter.name) != 1:
            return None
        made = [s for s in self.function.body if isinstance(s, ir.Assign)
                and s.target == loop.iter.name and isinstance(s.value, ir.Call)
                and s.value.fn.obj is range and not s.value.kwargs]
        if not made:
            return None
        args = ir.call_of(made[0]).args
        ints = [a.value if isinstance(a, ir.Const) and type(a.value) is int else None
                for a in args]
        if len(args) == 1:
            lowest: int | None = 0
        elif len(args) == 2 or ints[2] is not None and ints[2] > 0:
            lowest = ints[0]
        elif ints[2] is not None and ints[2] < 0 and ints[1] is not None:
            lowest = ints[1] + 1
        else:
            lowest = None
        return lowest if lowest is not None and lowest >= 0 else None

    def plan_block(self, body: tuple[ir.Stmt, ...], outer: frozenset[str],
                   bindings: dict[str, int], fixed: set[str]) -> None:
        """``plan_recomputed`` for the loops of ``body``, inside loops whose indices are
        ``outer``."""
        for stmt in body:
            if isinstance(stmt, ir.If):
                self.plan_block(stmt.body, outer, bindings, fixed)
                self.plan_block(stmt.orelse, outer, bindings, fixed)
            elif isinstance(stmt, ir.While):
                self.plan_block(stmt.body, frozenset(), bindings, fixed)
            elif isinstance(stmt, ir.For):
                index = self.plan_loop(stmt, outer, bindings, fixed) if self.needs_adjoint(stmt) \
                    else set()
                self.plan_block(stmt.body, frozenset(index), bindings, fixed)

    def plan_loop(self, loop: ir.For, outer: frozenset[str], bindings: dict[str, int],
                  fixed: set[str]) -> set[str]:
        """The statements of ``loop``'s body computed again (``plan_recomputed``); the names that
        are indices in its body: its target, ``outer``'s, and those computed from them."""
        # the loop's index (a body that rebinds it, ``i = i * 2``, is refused in ``run``), and the
        # indices of the loops around it that its body does not bind
        bound = {name for stmt in ir.walk(loop.body) for name in self.defined(stmt)}
        index: set[str] = {loop.target} | (outer - bound)
        # names that are the loop's variable plus a constant, by that constant
        offsets: dict[str, int] = {loop.target: 0}
        chosen: list[ir.Assign] = []
        ids: list[int] = []  # (of the statements computed again, as the forward pass has them)
        for position, stmt in enumerate(loop.body):
            if (
                not isinstance(stmt, ir.Assign)
                or not isinstance(stmt.value, (ir.Call, ir.Pack))
                or id(stmt) in self.calls
                or bindings.get(stmt.target) != 1
                or id(stmt) in self.in_place.writes
            ):
                continue
            if id(stmt) in self.in_place.reads:
                # an entry of an array the loop writes once an entry (``plan_written_once``)
                if (again := self.read_again(loop, position, stmt, offsets)) is not None:
                    chosen.append(again)
                    ids.append(id(stmt))
                continue
            if isinstance(stmt.value, ir.Pack):
                if stmt.value.kind == "tuple" and stmt.value.elts \
                        and all(_index_atom(a, index) for a in stmt.value.elts):
                    chosen.append(stmt)
                    ids.append(id(stmt))
                    index.add(stmt.target)
                continue
            if stmt.value.kwargs:
                continue
            fn, args = stmt.value.fn.obj, stmt.value.args
            if fn in INDEX_ARITHMETIC and all(_index_atom(a, index) for a in args):
                chosen.append(stmt)
                index.add(stmt.target)
                if (shift := _offset(fn, args, offsets)) is not None:
                    offsets[stmt.target] = shift
            elif fn is operator.getitem and len(args) == 2 and isinstance(args[0], ir.Var) \
                    and args[0].name in fixed and _index_atom(args[1], index):
                chosen.append(stmt)
            else:
                continue
            ids.append(id(stmt))
        if chosen:
            self.recomputed[id(loop)] = chosen
            self.recomputed_ids.update(ids)
        return index

    def read_again(self, loop: ir.For, position: int, stmt: ir.Assign,
                   offsets: dict[str, int]) -> ir.Assign | None:
        """The read ``t = y[k]`` (``position`` in ``loop``'s body) of one entry of an array the
        loop writes once an entry, as the top of the step's backward pass computes it again
        (``plan_written_once``): ``y[i + c]`` as it is, where ``i + c`` is never negative (a
        negative index counts from the end, and may be the step's own entry); the step's own
        entry ``y[i]`` as ``y_before[i]`` where the step reads it before it writes it, and as it
        is where it reads it after (the write in the loop's own body, not a branch).
        ``None`` where it is not computed again."""
        array, index = ir.call_of(stmt).args
        once = self.written_once.get(id(loop), {})
        if not isinstance(array, ir.Var) or array.name not in once \
                or not isinstance(index, ir.Var) or index.name not in offsets \
                or self.kinds.indexed(array, index, stmt) != 0:  # (a number: no view)
            return None
        shift = offsets[index.name]
        if shift:
            return stmt if self.lowest_index[id(loop)] + shift >= 0 else None
        written, alone = self.write_at[(id(loop), array.name)]
        if written > position:
            return ir.Assign(stmt.target, ir.Call(_ITEM, (ir.Var(once[array.name]), index)),
                             stmt.line)
        return stmt if alone and written < position else None

    def computed_again(self, loop: ir.For | ir.While, body: list[ir.Stmt]) -> list[ir.Stmt]:
        """The step's index arithmetic and reads, as the forward pass computed them
        (``plan_recomputed``), that ``body``, the step's backward pass, reads (or that those read):
        no dead store of ``x[i]`` whose adjoint needs only ``i``."""
        chosen = self.recomputed.get(id(loop), ())
        needed = ir.reads_in(body) if chosen else set()
        kept: list[ir.Stmt] = []
        for stmt in reversed(chosen):
            if stmt.target in needed:
                kept.append(stmt)
                needed.update(ir.reads_of(stmt))
        return kept[::-1]

    def saves(self, name: str, stmt: ir.Stmt) -> bool:
        """Whether ``stmt`` overwrites a value of ``name`` that the backward pass restores (and
        reads)."""
        return (name, id(stmt)) in self.kept

    def push(self, name: str) -> ir.Append:
        """``name``'s value on its tape (``x_tape.append(x)``)."""
        return ir.Append(self.tape(name), ir.Var(name), ir.NOWHERE)

    def tape(self, key: str, kind: str = "tape") -> str:
        """The stack that keeps ``key``'s old values (``x_tape``), or an array's overwritten entries
        (``y_entries``). One stack per value, not one for all: each holds values of one type, so
        that Numba can compile the code, and a reader sees which value each push and pop is
        about."""
        if (key, kind) not in self.tapes:
            self.tapes[(key, kind)] = self.namer.fresh(f"{key}_{kind}")
        return self.tapes[(key, kind)]

    def prologue(self) -> list[gast.stmt]:
        """``tape = []``, and ``None`` for saved names that a loop binds first."""
        saved = {name for name, _ in self.kept} | {
            n for plan in self.checkpointed.values() for n in plan.state
        }
        needs = [
            n
            for n in sorted(saved)
            if n not in self.function.params and not self._bound_before_loops(n)
        ]
        out = [syntax.assign(n, syntax.const(None)) for n in needs]
        tapes = [
            syntax.assign(tape, gast.List(elts=[], ctx=gast.Load())) for tape in self.tapes.values()
        ]
        return tapes + out

    def _bound_before_loops(self, name: str) -> bool:
        for stmt in self.function.body:
            if name in ir.defined(stmt) and not ir.blocks(stmt):
                return True
            if ir.blocks(stmt):
                return False
        return False

    def counts(self, stmt: ir.For | ir.While) -> bool:
        """A while loop, or a for loop that may break, records its trip count."""
        return isinstance(stmt, ir.While) or any(
            isinstance(s, ir.Break) for s in ir.shallow(stmt.body)
        )

    def count_name(self, stmt: ir.For | ir.While) -> str:
        key = ("count", id(stmt))
        if key not in self.adjoints.bars:
            self.adjoints.bars[key] = self.namer.fresh("trips")
        return self.adjoints.bars[key]

    def defined(self, stmt: ir.Stmt) -> list[str]:
        """The names ``stmt`` binds, in the order the forward pass saves them.

        A call to a user function also binds its saved values; they are saved
        first, so that the backward pass restores the result's old value first
        (a rule may read it) and the saved values after the callee's backward.
        An array whose shape is kept (``shape_only``) binds that shape too.
        """
        names = list(ir.defined(stmt))
        if id(stmt) in self.calls:
            names.insert(0, self.calls[id(stmt)][1])
        if self.shapes and isinstance(stmt, ir.Assign):
            # an array's kept shape (``shape_only``), bound right after it: saved
            if stmt.target in self.shapes:
                # and restored with it, where the array's value would be
                names.append(self.shapes[stmt.target])
            # the shape's own statement (saved with its array's)
            elif stmt.target in self.shapes.values():
                return []
        return names

    def snapshot(self, stmt: ir.Stmt) -> list[str]:
        """The saved names an inactive compound statement overwrites: saved before it, restored
        after."""
        names = dict.fromkeys(n for s in ir.walk((stmt,)) for n in self.defined(s))
        return [n for n in names if (n, id(stmt)) in self.kept]

    def restores(self, stmt: ir.Stmt) -> list[ir.Stmt]:
        """Undo what an inactive statement overwrote (kept only where the backward pass reads
        it)."""
        if ir.blocks(stmt):
            return self.restore(self.snapshot_candidates(stmt), stmt)
        if id(stmt) in self.recomputed_ids:
            return []  # computed again at the top of the step's backward pass (``plan_recomputed``)
        # the value back on its list, then the older one
        if isinstance(stmt, ir.Pop) and stmt.target is not None:
            return [
                ir.Append(stmt.source, ir.Var(stmt.target), ir.NOWHERE),
                *self.restore(self.defined(stmt), stmt),
            ]
        return self.restore(self.defined(stmt), stmt)

    def restore(self, names: Any, stmt: ir.Stmt) -> list[ir.Stmt]:
        """Marks that restore ``names`` (last first) to what they held before ``stmt``: only those
        bound more than once (``resolve_restores`` keeps those the backward pass reads)."""
        return [restore_mark(n, id(stmt)) for n in reversed(names) if n in self.rebound]

    def snapshot_candidates(self, stmt: ir.Stmt) -> list[str]:
        names = dict.fromkeys(n for s in ir.walk((stmt,)) for n in self.defined(s))
        return [n for n in names if n in self.rebound]

    def resolve_restores(self, body: list[ir.Stmt], later: set[str],
                         reads: list[set[str]] | None = None) -> list[ir.Stmt]:
        """Turn restore marks into pops, keeping only those whose value something reads later.

        ``later`` holds the names read after ``body``. The code after a restore is what runs after
        it, so a restore whose name is not read there goes (and so does the push that saved it). In
        a loop, the next step runs the whole body again: a restore in it is kept where the loop
        reads its name anywhere.

        A checkpointed loop's schedule is a loop as any other: its steps run backward, again, or
        from a snapshot, so a restore in a step is kept where the schedule reads its name anywhere
        (the steps run again read what the stand-ins for them read, ``checkpointing.stand_in``; a
        snapshot, the loop's state).

        ``reads`` may give the names each statement of ``body`` reads, where they are known already.
        """
        out: list[ir.Stmt] = []
        for k in range(len(body) - 1, -1, -1):
            stmt = body[k]
            name = restored(stmt)
            if name is None:
                read = reads[k] if reads is not None else ir.reads_in((stmt,))
                if ir.blocks(stmt) and read:
                    # (a loop binds its variable before each step reads it: what the variable held
                    # before the loop is read only after a loop of no step, by what follows it)
                    read = _outer_reads(stmt)
                if ir.blocks(stmt):
                    inner = later | read if isinstance(stmt, (ir.For, ir.While)) else set(later)
                    stmt = ir.with_blocks(
                        stmt, [self.resolve_restores(list(b), inner) for b in ir.blocks(stmt)]
                    )
                later |= read
                out.append(stmt)
                continue
            if name not in self.needed or name not in later:
                continue
            assert isinstance(stmt, ir.Mark)  # (a restore mark: ``restored``)
            mark = stmt.data
            # the list as it was before the append, for what reads it earlier (its length)
            if mark.unappend:
                out.append(ir.Pop(None, name, ir.NOWHERE))
            elif name in self.rebound and mark.key not in self.first:
                self.kept.add((name, mark.key))
                out.append(ir.Pop(name, self.tape(name), ir.NOWHERE))
        return out[::-1]


def _outer_reads(stmt: ir.Stmt) -> set[str]:
    """The names ``stmt`` and its nested statements read as they were before it: those a ``for``
    loop (this one, or one inside it) reads of its own variable, which it binds before each step,
    left out."""
    if not ir.blocks(stmt):
        return set(ir.reads_of(stmt))
    inner = {n for block in ir.blocks(stmt) for s in block for n in _outer_reads(s)}
    if isinstance(stmt, ir.For):
        inner.discard(stmt.target)
    return inner | set(ir.reads_of(stmt))


def with_shapes(function: ir.Function, shapes: dict[str, str], kinds: Kinds,
                namer: Namer) -> ir.Function:
    """``function`` with ``x_shape = np.shape(x)`` after each assignment of an ``x`` of ``shapes``
    (``shape_only``), or with ``x_shape`` computed once at its top from its parameters' shapes,
    where they decide it (``invariant_shapes``)."""
    top, invariant = invariant_shapes(function, shapes, kinds, namer)

    def kept(stmt: ir.Stmt) -> list[ir.Stmt]:
        if isinstance(stmt, ir.Assign) and stmt.target in shapes and not ir.binds_none(stmt) \
                and stmt.target not in invariant:
            return [
                stmt,
                ir.Assign(shapes[stmt.target], ir.Call(_SHAPE, (ir.Var(stmt.target),)), stmt.line),
            ]
        return [stmt]

    return ir.with_body(
        function,
        (*top, *ir.mapped(function.body, kept)),
        function.mutable | frozenset(shapes[n] for n in shapes if n not in invariant),
    )


def invariant_shapes(function: ir.Function, shapes: dict[str, str], kinds: Kinds,
                     namer: Namer) -> tuple[list[ir.Stmt], set[str]]:
    """The names of ``shapes`` whose shape the function's parameters decide, and the statements
    that compute each such shape once, at the function's top, into its name of ``shapes``.

    A name's shape is decided where every statement that binds it (but to ``None``) calls a function
    whose result's axes the registry ties to its arguments' axes, for arguments of the numbers of
    axes ``kinds`` knows (``registry.result_axes``: ``np.dot(w, h)`` has ``w``'s rows), and every
    such axis is the same axis of the same parameter, one that no statement binds again (writes in
    place keep a shape)."""
    bound = {n for stmt in ir.walk(function.body) for n in ir.defined(stmt)}
    fixed = set(function.params) - bound
    found: dict[str, set[tuple[tuple[str, int], ...] | None]] = {}
    lines: dict[str, ir.Line] = {}
    for stmt in ir.walk(function.body):
        if isinstance(stmt, ir.Assign) and stmt.target in shapes and not ir.binds_none(stmt):
            found.setdefault(stmt.target, set()).add(_decided_axes(stmt, kinds, fixed))
            lines.setdefault(stmt.target, stmt.line)
        elif any(n in shapes for n in ir.defined(stmt)):
            for n in ir.defined(stmt):
                found.setdefault(n, set()).add(None)
    top: list[ir.Stmt] = []
    of_params: dict[str, str] = {}
    lengths: dict[tuple[str, int], str] = {}
    invariant: set[str] = set()
    for name in sorted(found):
        if len(found[name]) != 1 or None in found[name]:
            continue
        axes = next(iter(found[name]))
        assert axes is not None  # (just checked)
        for param, axis in axes:
            if param not in of_params:
                of_params[param] = namer.fresh(f"{param}_shape")
                top.append(ir.Assign(of_params[param], ir.Call(_SHAPE, (ir.Var(param),)),
                                     lines[name]))
            if (param, axis) not in lengths:
                lengths[param, axis] = namer.fresh(f"{param}_shape_{axis}")
                top.append(ir.Assign(lengths[param, axis], ir.Call(
                    _GETITEM, (ir.Var(of_params[param]), ir.Const(axis))), lines[name]))
        elts = tuple(ir.Var(lengths[key]) for key in axes)
        top.append(ir.Assign(shapes[name], ir.Pack(elts, "tuple"), lines[name]))
        invariant.add(name)
    return top, invariant


def _decided_axes(stmt: ir.Assign, kinds: Kinds,
                  fixed: set[str]) -> tuple[tuple[str, int], ...] | None:
    """The (parameter, axis) pairs whose lengths are the axes of what ``stmt`` binds
    (``invariant_shapes``), or ``None``."""
    if type(stmt.value) is not ir.Call or stmt.value.kwargs:
        return None
    call = stmt.value
    ranks = kinds.ranks(call.args, stmt)
    if any(r is None for r in ranks):
        return None
    axes = registry.result_axes(call.fn.obj, tuple(r for r in ranks if r is not None))
    if axes is None:
        return None
    out = []
    for k, axis in axes:
        arg = call.args[k]
        if not isinstance(arg, ir.Var) or arg.name not in fixed:
            return None
        out.append((arg.name, axis))
    return tuple(out)


_SHAPE = ir.Ref(np.shape, "np.shape")
_GETITEM = ir.Ref(operator.getitem, "operator.getitem")


def shape_reads(body: list[ir.Stmt]) -> tuple[set[str], set[str]]:
    """The names ``body`` reads only for their shapes (``registry.def_shape_read``), and the names
    it reads otherwise (a name may be in both)."""
    shapes: set[str] = set()
    others: set[str] = set()
    for stmt in ir.walk(tuple(body)):
        if isinstance(stmt, ir.Assign) and (read := _shape_read(stmt.value)) is not None:
            for j, atom in enumerate(ir.call_of(stmt).args):
                if isinstance(atom, ir.Var):
                    (shapes if j == read[0] else others).add(atom.name)
        else:
            others.update(ir.reads_of(stmt))
    return shapes, others


def _shape_read(value: ir.Expr) -> tuple[int, Any] | None:
    """``(the position of the argument value reads only for its shape, what takes the shape in its
    place)``, if ``value`` is such a call of a name."""
    if type(value) is not ir.Call or value.kwargs:
        return None
    fact = registry.shape_read(value.fn.obj)
    if fact is None or len(value.args) <= fact[0] or type(value.args[fact[0]]) is not ir.Var:
        return None
    return fact


def meta_reads(body: list[ir.Stmt]) -> tuple[set[str], set[str]]:
    """The names ``body`` reads only for their shapes, dtypes and types (``registry.meta_read``,
    ``registry.shape_read``), and the names it reads otherwise (a name may be in both)."""
    metas: set[str] = set()
    others: set[str] = set()
    for stmt in ir.walk(tuple(body)):
        value = stmt.value if isinstance(stmt, ir.Assign) else None
        if type(value) is ir.Call and not value.kwargs:
            positions = registry.meta_positions(value.fn.obj)
            for k, atom in enumerate(value.args):
                if isinstance(atom, ir.Var):
                    (metas if k in positions else others).add(atom.name)
        else:
            others.update(ir.reads_of(stmt))
    return metas, others


def with_metas(function: ir.Function, metas: dict[str, str]) -> ir.Function:
    """``function`` with ``x_like = stand_in(x)`` after each assignment of an ``x`` of ``metas``
    (``Saving.meta_only``, ``Saving.shape_only``'s ``liked``), and at its top for a parameter."""
    def kept(stmt: ir.Stmt) -> list[ir.Stmt]:
        if isinstance(stmt, ir.Assign) and stmt.target in metas and not ir.binds_none(stmt):
            return [stmt, _stand_in(stmt.target, metas, stmt.line)]
        return [stmt]

    line = function.body[0].line if function.body else ir.NOWHERE
    top = [_stand_in(p, metas, line) for p in function.params if p in metas]
    bound = {n for stmt in ir.walk(function.body) for n in ir.defined(stmt)}
    return ir.with_body(
        function,
        (*top, *ir.mapped(function.body, kept)),
        function.mutable | frozenset(metas[n] for n in metas if n in bound),
    )


def _stand_in(name: str, metas: dict[str, str], line: ir.Line) -> ir.Assign:
    return ir.Assign(metas[name], ir.Call(_STAND_IN, (ir.Var(name),)), line)


_STAND_IN = ir.Ref(runtime.stand_in, "stand_in")


def read_metas(body: list[ir.Stmt], metas: dict[str, str]) -> list[ir.Stmt]:
    """``body`` with each argument that a call reads only for its shape, dtype and type
    (``meta_reads``) read from the stand-in of ``metas`` kept for it."""
    def read(stmt: ir.Stmt) -> list[ir.Stmt]:
        value = stmt.value if isinstance(stmt, ir.Assign) else None
        if type(value) is not ir.Call or value.kwargs:
            return [stmt]
        assert isinstance(stmt, ir.Assign)
        positions = registry.meta_positions(value.fn.obj)
        args = tuple(
            ir.Var(metas[a.name]) if k in positions and isinstance(a, ir.Var) and a.name in metas
            else a
            for k, a in enumerate(value.args)
        )
        if args == value.args:
            return [stmt]
        return [ir.Assign(stmt.target, ir.Call(value.fn, args, value.kwargs, value.moved,
                                               value.attribute), stmt.line)]

    return list(ir.mapped(tuple(body), read))


def shapes_read(body: list[ir.Stmt] | tuple[ir.Stmt, ...], shapes: dict[str, str]) -> list[ir.Stmt]:
    """``body`` with each call that reads a name of ``shapes`` only for its shape reading the kept
    shape instead: ``unbroadcast(g, x)`` becomes ``unbroadcast_to(g, x_shape)``, ``np.shape(x)``
    becomes ``x_shape``."""
    def read(stmt: ir.Stmt) -> list[ir.Stmt]:
        found = _shape_read(stmt.value) if isinstance(stmt, ir.Assign) else None
        if found is None:
            return [stmt]
        assert isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Call)
        call, (k, by_shape) = stmt.value, found
        read = call.args[k]
        assert isinstance(read, ir.Var)  # (``_shape_read``: a name)
        if read.name not in shapes:
            return [stmt]
        kept = ir.Var(shapes[read.name])
        if by_shape is None:  # the call's value is the shape itself
            return [ir.Assign(stmt.target, kept, stmt.line)]
        args = (*call.args[:k], kept, *call.args[k + 1:])
        return [
            ir.Assign(stmt.target, ir.Call(ir.Ref(by_shape, by_shape.__name__), args), stmt.line)
        ]

    return list(ir.mapped(tuple(body), read))


_ITEM = ir.Ref(operator.getitem, "operator.getitem")


def _offset(fn: Any, args: tuple[ir.Atom, ...], offsets: dict[str, int]) -> int | None:
    """For ``t = a + c``, ``c + a`` or ``a - c`` (``c`` an integer constant, ``a`` a name of
    ``offsets``: the loop's variable plus a constant), the constant ``t`` adds to the variable."""
    if len(args) != 2 or fn not in (operator.add, operator.sub):
        return None
    a, b = args
    if fn is operator.add and isinstance(a, ir.Const):
        a, b = b, a
    if not isinstance(a, ir.Var) or a.name not in offsets \
            or not isinstance(b, ir.Const) or type(b.value) is not int:
        return None
    return offsets[a.name] + (b.value if fn is operator.add else -b.value)


def _entry_read(stmt: ir.Stmt, name: str) -> bool:
    """Whether ``stmt`` reads ``name`` only as ``t = name[k]``."""
    if not isinstance(stmt, ir.Assign) or not isinstance(stmt.value, ir.Call):
        return False
    call = stmt.value
    return call.fn.obj is operator.getitem and not call.kwargs and len(call.args) == 2 \
        and call.args[0] == ir.Var(name) and call.args[1] != ir.Var(name)


def _index_atom(atom: ir.Atom, index: set[str]) -> bool:
    """An integer constant, or a name of ``index``: the loop's index and what is computed from it
    alone."""
    return (isinstance(atom, ir.Const) and type(atom.value) is int) or (
        isinstance(atom, ir.Var) and atom.name in index
    )
