"""Stage 4, reverse: the forward statements, then one backward block per statement in reverse order.

For ``out = t1 - sin_x2`` with ``t1`` and ``sin_x2`` active, the backward
block reads the rules of ``operator.sub`` with the program's names put in::

    # line 6: return np.log(x1) + x1 * x2 - np.sin(x2)
    t1_bar = out_bar
    sin_x2_bar = -out_bar

Only *active* values (those that depend on a differentiated argument) that are
also *useful* (the output depends on them) get adjoints. The first
contribution to an adjoint assigns it; later ones add to it, with a new value,
so no array the caller owns is ever written. Calls to the user's own functions
become calls to their generated ``_fwd``/``_bwd`` pair.

Both passes are built as IR (a rule's body put in as parts of one expression, ``pieces``) and
printed once (``syntax.pieces``), after the arrays read only for their shapes are read as shapes
(``saving.shape_only``) and the restore marks (``ir.Mark``) are turned into pops or dropped
(``saving.resolve_restores``), on the IR. A checkpointed loop's schedule is IR too, its steps run
again standing in until the forward pass is built (``checkpointing.filled``).

This module holds the adjoint rules: one backward block per statement. The rest is in parts of
``Reverser``, each an object made with what it reads (the function, the facts about it, the other
parts it asks, and the reverser's questions as callables): the forward sweep (``self.sweep``,
``sweep``); what it saves for the backward pass and how it comes back (``self.saving``,
``saving``); how contributions reach each adjoint (``self.adjoints``, ``accumulate``); checkpointed
loops (``self.checkpointing``, ``checkpointing``); which calls become calls of a callee's pair, and
its derivation (``self.calling``, ``calls``); which adjoints may still be a float zero
(``self.zeros``, ``zeros``); the adjoints of item writes in place, appends and pops
(``self.writes``, ``reverse_writes``). ``del`` statements after last reads are ``release``'s.
"""

from __future__ import annotations

import operator
from collections import Counter
from typing import Any

import gast
import numpy as np

from ast_ad import runtime
from ast_ad.analysis.activity import (
    CONTAINERS,
    SCALAR,
    InPlace,
    accumulated_reads,
    activity,
    at_line,
    atom_active,
    callee_results,
    carries_structure,
    classes_of,
    first_definitions,
    in_place_writes,
    inputs_of,
    local_names,
    loop_bound,
    missing_rule,
    owned_lists,
    shape_class,
    structured_names,
    unfollowed,
    usefulness,
)
from ast_ad.analysis.complexness import (
    check_complex,
    complex_call,
    complex_names,
    no_complex_rule,
    rule_for,
    surely_complex,
)
from ast_ad.analysis.kinds import RANGE, SET, kinds_of
from ast_ad.core import registry
from ast_ad.errors import LocatedError, MissingRuleError
from ast_ad.ir import nodes as ir
from ast_ad.ir import syntax
from ast_ad.ir.naming import Namer
from ast_ad.ir.pieces import Made, one_expression, renamed
from ast_ad.ir.syntax import RefTable
from ast_ad.modes import templates
from ast_ad.modes.accumulate import Accumulation
from ast_ad.modes.adjoint import Adjoint, Derive
from ast_ad.modes.calls import Calls
from ast_ad.modes.checkpointing import Checkpointed, Checkpointing
from ast_ad.modes.reverse_writes import WriteAdjoints, named_pops
from ast_ad.modes.saving import (
    ANS,
    Saving,
    read_metas,
    restore_mark,
    restored,
    with_metas,
    with_shapes,
)
from ast_ad.modes.sweep import ForwardSweep
from ast_ad.modes.zeros import FloatZeros
from ast_ad.optimize.batching import Term, batch_products
from ast_ad.optimize.common import shared_numbers
from ast_ad.optimize.guards import numbers_passed, without_false_guards
from ast_ad.optimize.hoist import hoisted
from ast_ad.optimize.keyed import keyed_loops
from ast_ad.optimize.packs import items_read_through

_PART, _ITEM = ir.Ref(runtime.part, "part"), ir.Ref(operator.getitem, "operator.getitem")
_UNBROADCAST = ir.Ref(runtime.unbroadcast, "unbroadcast")
# a number's adjoint from an array's: every entry's summed (``unbroadcast`` to no axes)
_SUMMED = ir.Ref(np.sum, "np.sum")
_NEGATED = ir.Ref(operator.neg, "operator.neg")
_SUMMED_PRODUCT = ir.Ref(runtime.summed_product, "summed_product")
_DENSE = ir.Ref(runtime.dense_adjoint, "dense_adjoint")
_OWNED = ir.Ref(runtime.owned_adjoint, "owned_adjoint")
_DETACHED = ir.Ref(runtime.detached, "detached")
_RANGE, _SLICE, _REVERSED = (
    ir.Ref(range, "range"),
    ir.Ref(slice, "slice"),
    ir.Ref(reversed, "reversed"),
)


def reverse(
    function: ir.Function,
    argnums: tuple[int, ...],
    shapes: tuple[int, ...],
    derive: Derive,
    shell: Adjoint | None = None,
    in_place: bool = True,
    checkpoints: int | str | None = None,
    lengths: tuple[tuple[int, ...] | None, ...] | None = None,
) -> Adjoint:
    """Build the adjoint of ``function`` with respect to the parameters at ``argnums``.

    ``shapes`` labels each parameter's shape: ``SCALAR`` for numbers, and equal
    labels for parameters known to share a shape. An elementwise rule's
    contribution needs no un-broadcasting when no other operand can have
    broadcast it up (see ``shape_classes``). ``shell``, if given, is filled in
    and returned (so a recursive call can refer to it before it is finished).
    ``in_place``: a loop's item writes change their array in place (``in_place_writes``); a callee's
    backward pass, which a caller's derivative may transform again, keeps them as new arrays.
    ``checkpoints``: the loops at the top level of the function and of its callees that can be are
    checkpointed (``ast_ad.revolve``), each keeping at most this many snapshots of its state
    (``analysis.checkpoint_state`` says which loops can be). ``lengths``: each array
    parameter's shape, where the code is made for those shapes alone (``jit="numba"``: its call
    checks them), so that arrays written out meet the parameters in one shape class
    (``activity.constant_shapes``).
    """
    # (loop-invariant arithmetic computed once, before its loop: ``optimize.hoist``; a number
    # computed again from the same operands, once: ``optimize.common``)
    function = items_read_through(without_false_guards(function, shapes))
    function = keyed_loops(numbers_passed(function, shapes), shapes)
    function = shared_numbers(hoisted(ir.functional(function), shapes), shapes)
    return Reverser(function, argnums, shapes, derive, in_place, checkpoints,
                    lengths=lengths).run(shell)


# what a missing rule's error tells the user to write
REGISTER = (
    "register a rule: ast_ad.extend.defvjp(fn, lambda g, ans, x: ...), one lambda per "
    "positional argument"
)


class Reverser:
    def __init__(
        self,
        function: ir.Function,
        argnums: tuple[int, ...],
        shapes: tuple[int, ...],
        derive: Derive,
        in_place: bool = True,
        checkpoints: int | str | None = None,
        kept_shapes: dict[str, str] | None = None,
        kept_metas: dict[str, str] | None = None,
        lengths: tuple[tuple[int, ...] | None, ...] | None = None,
    ):
        # a pop's value, dropped: named, so that the backward pass puts it back
        function = named_pops(function)
        self.function, self.argnums, self.derive = function, argnums, derive
        # (for a second pass: ``shape_only``)
        self.labels_in, self.writes_in_place = shapes, in_place
        self.shapes = kept_shapes or {}
        self.metas = kept_metas or {}  # (for a second pass: ``meta_only``)
        self.refs = RefTable()
        self.namer = Namer(used=function.names())
        # (the names of a rule's statements, which are written as one expression)
        self.scratch = templates.Scratch()
        self.active = activity(function, argnums)
        self.useful = usefulness(function, self.active)
        # (a callee's result known from its own facts, where the driver gives callees' IR)
        callees_ir = getattr(derive, "normalized", None)
        callees = callee_results(callees_ir) if callees_ir is not None else None
        self.kinds = kinds_of(function, shapes, callees)
        self.complexes = complex_names(function, shapes, self.kinds)
        self.sure_complex = surely_complex(function, self.complexes)
        check_complex(function, self.complexes, self.active)
        self.lengths = lengths
        self.classes = classes_of(function, shapes, self.kinds, callees, lengths)
        self._products: dict[str, ir.Call] | None = None  # (``read_once_products``)
        # a list that is popped adds to its adjoint wherever it is read, from None at the top
        # (``adjoint_pop``)
        self.local = local_names(function) - {
            s.source for s in ir.walk(function.body) if isinstance(s, ir.Pop)
        }
        self.loop_bound = loop_bound(function)
        self.rebound = set(function.mutable) | self.loop_bound
        self.looped = {
            id(s)
            for loop in ir.walk(function.body)
            if isinstance(loop, (ir.For, ir.While))
            for s in ir.walk(loop.body)
        }  # statements inside loops
        self.first = first_definitions(function)
        # the lists the function may pop and undo the pops of (``private_list``), where it pops any
        self.owned = (
            owned_lists(function)
            if any(isinstance(s, ir.Pop) for s in ir.walk(function.body))
            else set()
        )
        self.structured = structured_names(function, shapes)
        # structured names that are items of containers (see ``spread_structure``)
        self.items: set[str] = set()
        self.calls: dict[int, tuple[Adjoint, str, list[ir.Atom], list[ir.Var]]] = {}
        self.callees: list[Adjoint] = []
        self.appended: set[str] = set()  # the lists the function appends to (``run``)
        # statements whose result's adjoint may be a float zero (``densify``)
        self.zero_in: set[int] = set()
        self.in_place = (
            in_place_writes(function, self.useful, self.structured, self.classes)
            if in_place
            else InPlace({}, {}, {})
        )
        # (a checkpointed loop's backward pass makes no adjoint of its own)
        if checkpoints is None:
            self.in_place = accumulated_reads(
                function, self.useful, self.structured, self.kinds, self.in_place,
                frozenset(self.complexes), loops=in_place,
            )
        # the arrays of ``in_place.straight`` whose adjoint the backward pass has made its own
        self.opened: set[str] = set()
        self.checkpoints = checkpoints
        self.checkpointed: dict[int, Checkpointed] = {}
        self.not_checkpointed: dict[int, str] = {}  # why a loop is not, said in a comment above it
        self.terms: dict[int, Term] = {}
        # an adjoint's value before a statement that reads its target (``y = y * x``)
        self.nexts: set[str] = set()
        self.exacts: dict[tuple[int, int], bool] = {}  # ``exact``'s answers, by call and argument
        # parts that receive what they read: the adjoints, the call planning, the float-zero
        # analysis
        self.adjoints = Accumulation(
            function,
            self.namer,
            self.scratch,
            self.refs,
            (self.local, self.first, self.structured, self.items, self.kinds),
            self.terms,
        )
        self.adjoints.complexes, self.adjoints.sure_complex = self.complexes, self.sure_complex
        self.saving = Saving(
            function,
            (self.namer, self.refs),
            (self.rebound, self.first, self.calls, self.in_place, self.checkpointed, self.kinds,
             self.structured, self.looped),
            set(),  # (what the backward pass reads: ``needed``, once it is built)
            self.shapes,
            self.adjoints,
            self.needs_adjoint,
        )
        self.sweep: ForwardSweep  # (made below: the two call each other)
        self.checkpointing = Checkpointing(
            function,
            (self.in_place, self.checkpointed, self.not_checkpointed, self.terms),
            checkpoints,
            derive,
            (self.namer, self.scratch),
            (self.saving, self.adjoints),
            self.needs_adjoint,
            lambda body, saving: self.sweep.forward_block(body, saving),
            self.step_backward,
        )
        self.sweep = ForwardSweep(
            self.refs,
            (self.kinds, self.calls, self.in_place, self.checkpointed, self.not_checkpointed),
            (self.saving, self.adjoints, self.checkpointing),
            self.needs_adjoint,
        )
        self.writes = WriteAdjoints(
            function,
            (self.active, self.owned, self.kinds, self.in_place),
            (self.refs, self.namer, self.scratch),
            self.adjoints,
            self.saving,
        )
        self.calling = Calls(
            function,
            (self.active, self.classes, self.structured, self.kinds),
            (self.callees, self.calls, self.rebound),
            self.refs,
            self.namer,
            derive,
            checkpoints,
            self.needs_adjoint,
            self.error,
            self.derived_again,
        )
        self.calling.complexes = self.complexes
        self.zeros = FloatZeros(
            function,
            self.active,
            self.local,
            self.first,
            self.classes,
            self.calls,
            self.needs_adjoint,
            self.exact,
        )

    # ---- the driver ------------------------------------------------------------------------------
    def derived_again(self, made: Any, active: tuple[int, ...], labels: tuple[int, ...]) -> Adjoint:
        """The adjoint of the code forward mode made for a callee (``made.code``, its IR read
        again), once per differentiated arguments and labels (``Calls.plan_calls`` asks)."""
        key = ("reverse", active, labels, self.checkpoints)
        if key not in made.again:
            made.again[key] = shell = Adjoint(made.code, active, [], [], None, "", [], RefTable())
            reverse(made.code, active, labels, self.derive, shell, False, self.checkpoints)
        again: Adjoint = made.again[key]
        return again

    def run(self, shell: Adjoint | None = None) -> Adjoint:
        """The adjoint (``_run``); then the parts go: each holds some of the reverser's own methods,
        a cycle that would leave the whole derivation to the cycle collector."""
        try:
            return self._run(shell)
        finally:
            del self.adjoints, self.calling, self.zeros, self.saving, self.writes
            del self.checkpointing, self.sweep

    def _run(self, shell: Adjoint | None = None) -> Adjoint:
        for stmt in ir.walk(self.function.body):
            if isinstance(stmt, ir.For):
                rebinding = next(
                    (s for s in ir.walk(stmt.body) if stmt.target in ir.defined(s)), None
                )
                # the backward loop would read the loop's value, not the new one
                if rebinding is not None:
                    raise self.error(
                        rebinding,
                        f"the loop variable {stmt.target} is assigned inside its loop, "
                        "which reverse mode cannot differentiate yet: assign the new "
                        f"value to another name ({stmt.target}2 = ...) and use that",
                    )
            if isinstance(stmt, ir.Pop) and not self.writes.private_list(stmt.source):
                raise self.error(
                    stmt,
                    "reverse mode differentiates list.pop() on a list the function makes itself "
                    "(xs = [], or [a, b]), which no other name holds; index this list instead "
                    "(xs[-1], xs = xs[:-1]), or pop a copy of it (xs = list(xs))",
                )
        # before the calls are planned: their container arguments are labelled so
        self.spread_structure()
        self.calling.plan_calls()
        if self.calling.ignored:
            # (names a call passes whose adjoints its callee does not give: needed no more where
            # nothing else reads them; the set is shared with the reverser's parts, so it shrinks
            # in place)
            self.useful.intersection_update(
                usefulness(self.function, self.active, ignored=self.calling.ignored))
        if self.calls:
            self.spread_structure()  # and after: what the callees return
        result = self.function.result
        self.appended = {
            stmt.target for stmt in ir.walk(self.function.body) if isinstance(stmt, ir.Append)
        }
        seed = self.namer.fresh(f"{result.name}_bar" if isinstance(result, ir.Var) else "out_bar")
        if isinstance(result, ir.Var) and result.name in self.useful:
            self.adjoints.bars[result.name] = seed
            self.adjoints.live.add(result.name)
        self.zero_in = self.zeros.float_zeros()
        self.checkpointing.plan_checkpoints()
        self.saving.plan_recomputed()
        backward_ir = self.backward_block(self.function.body)
        first = not self.shapes and not self.metas
        if kept_shapes := first and self.saving.shape_only(backward_ir):
            # a second pass, over the function with those arrays' shapes kept, or stand-ins of
            # them where the backward pass reads their dtypes too (``saving.Saving.shape_only``)
            liked = {n: kept_shapes.pop(n) for n in sorted(self.saving.liked)}
            return Reverser(
                with_metas(with_shapes(self.function, kept_shapes, self.kinds, self.namer), liked),
                self.argnums,
                self.labels_in,
                self.derive,
                self.writes_in_place,
                self.checkpoints,
                kept_shapes,
                liked,
                self.lengths,
            ).run(shell)
        if kept_metas := first and not self.writes_in_place \
                and self.saving.meta_only(backward_ir):
            # a callee's: a second pass, over the function with stand-ins of those arrays kept
            # (``saving.Saving.meta_only``)
            return Reverser(
                with_metas(self.function, kept_metas),
                self.argnums,
                self.labels_in,
                self.derive,
                self.writes_in_place,
                self.checkpoints,
                kept_metas=kept_metas,
                lengths=self.lengths,
            ).run(shell)
        backward_ir = read_metas(self.saving.read_shapes(backward_ir), self.metas)
        zero_grads = frozenset(i for i in self.argnums
                               if self.function.params[i] not in self.adjoints.bars)
        grads = [self.adjoints.grad(self.function.params[i], backward_ir) for i in self.argnums]
        backward_ir = self.adjoints.initial_adjoints(seed) + backward_ir
        if (
            isinstance(result, ir.Var)
            and result.name in self.useful
            and result.name in self.structured
            and self.appended
        ):
            # the backward pass pops the adjoints of the lists the function appended to: the
            # caller's adjoint of the result (a list of them, maybe) is copied first, so that the
            # caller keeps it as it was
            backward_ir.insert(0, ir.Assign(seed, ir.Call(_DETACHED, (ir.Var(seed),)), ir.NOWHERE))
        if any(ir.blocks(s) or restored(s) is not None for s in backward_ir):
            # of each statement (a restore reads none)
            reads = [ir.reads_in((s,)) for s in backward_ir]
            self.saving.needed = set().union(*reads)
            backward_ir = self.saving.resolve_restores(backward_ir, set(), reads=reads)
        # (else there is no restore to resolve, here or in a block: nothing to read for it)
        prologue = self.saving.prologue()
        forward_ir = self.sweep.forward_block(self.function.body, saving=True)
        # (a checkpointed loop's steps, as the forward pass's)
        backward = self.adjoints.printed(self.checkpointing.filled(backward_ir))
        forward = prologue + self.adjoints.printed(forward_ir)
        result_expr = syntax.atom(result, self.refs)
        if (
            self.in_place.loops
            and isinstance(result, ir.Var)
            and shape_class(result, self.classes) != SCALAR
        ):
            # the backward pass writes the arrays back
            kept = self.namer.fresh(f"{result.name}_result")
            forward.append(
                syntax.assign(
                    kept, syntax.call(self.refs.marker(runtime.detached, "detached"), [result_expr])
                )
            )
            result_expr = syntax.name(kept)
        elif isinstance(result, ir.Var) and any(
            name == result.name for name, _ in self.saving.kept
        ):
            # the backward pass restores older values
            kept = self.namer.fresh(f"{result.name}_result")
            forward.append(syntax.assign(kept, result_expr))
            result_expr = syntax.name(kept)
        adjoint = shell or Adjoint(
            self.function, self.argnums, [], [], syntax.const(None), seed, [], self.refs
        )
        adjoint.function, adjoint.argnums, adjoint.forward, adjoint.backward = \
            self.function, self.argnums, forward, backward
        adjoint.result, adjoint.seed, adjoint.grads = result_expr, seed, grads
        adjoint.zero_grads = zero_grads
        adjoint.refs, adjoint.callees = self.refs, self.callees
        adjoint.releasable = self.releasable()
        adjoint.structured_result = isinstance(result, ir.Var) and result.name in self.structured
        adjoint.numbers = self.kinds.numbers()
        adjoint.wide = self.kinds.wide
        adjoint.wide_floats = frozenset(n for n in self.kinds.wide if self.kinds.wide_float(n))
        adjoint.adjoints = (
            frozenset(bar for var, bar in self.adjoints.bars.items() if isinstance(var, str))
            | self.nexts
        )
        adjoint.array_adjoints = frozenset(
            bar
            for var, bar in self.adjoints.bars.items()
            if isinstance(var, str) and shape_class(ir.Var(var), self.classes) != SCALAR
        )
        adjoint.shaped_as = self.shaped_as()
        adjoint.class_of = self.class_members(adjoint.shaped_as)
        return adjoint

    def class_members(self, shaped_as: dict[str, str]) -> dict[str, tuple[str, ...]]:
        """The adjoints of names that hold arrays of real floats of a shape class no parameter
        has, each with the names of its class that hold such arrays: any of them, bound, has the
        adjoint's shape (``reverse_code._typed``: where Numba compiles the code, such an adjoint
        starts as zeros of one of them)."""
        members: dict[int, list[str]] = {}
        for name, found in self.classes.items():
            if isinstance(name, str) and found is not None \
                    and found not in (SCALAR, *CONTAINERS, SET) \
                    and self.kinds.float_array(name) and name not in self.complexes \
                    and name not in self.structured:
                members.setdefault(found, []).append(name)
        return {
            bar: tuple(members[found])
            for var, bar in self.adjoints.bars.items()
            if isinstance(var, str)
            and bar not in shaped_as
            and (found := self.classes.get(var)) in members
            and var in members[found]
        }

    def shaped_as(self) -> dict[str, str]:
        """The adjoints of names that hold arrays of real floats of a parameter's shape class (an
        array parameter of real floats, never bound to another shape), each with that parameter:
        ``np.zeros_like(x)`` is such an adjoint's zero, one array type and one shape wherever it is
        bound (``reverse_code._combined``; Numba needs the one type)."""
        of_class: dict[int, str] = {}
        for p in self.function.params:
            found = self.classes.get(p)
            if found is not None and found not in (SCALAR, *CONTAINERS, SET) \
                    and self.kinds.float_array(p) and p not in self.complexes:
                of_class.setdefault(found, p)
        return {
            bar: of_class[found]
            for var, bar in self.adjoints.bars.items()
            if isinstance(var, str)
            and (found := self.classes.get(var)) in of_class
            and self.kinds.float_array(var)
            and var not in self.complexes
            and var not in self.structured
        }

    def spread_structure(self) -> None:
        """Names that hold lists, tuples or dicts: copies of such names, and results of calls that
        return one.

        Their adjoints add element by element (``add_adjoints``), never with ``+``, which would join
        them.
        """
        size, once = -1, ir.loop_free(self.function.body)
        returned = {stmt.target for stmt in ir.walk(self.function.body)
                    if isinstance(stmt, ir.Assign) and id(stmt) in self.calls}
        holders: set[str] = set()  # lists that containers are appended to
        while size != len(self.structured):
            size = len(self.structured)
            copies: list[tuple[str, str]] = []
            for stmt in ir.walk(self.function.body):
                if (
                    isinstance(stmt, ir.Unpack)
                    and isinstance(stmt.value, ir.Var)
                    and stmt.value.name in returned
                ):
                    # the items of a tuple a call of the user's returns, and theirs, may be
                    # containers, of kinds not known here (the adjoints a gradient's pair gives its
                    # caller's list arguments, say); not those kinds knows are numbers or arrays
                    unknown = [t for t in stmt.targets if self.kinds.rank(t) is None]
                    self.structured.update(unknown)
                    self.items.update(unknown)
                    returned.update(unknown)
                elif isinstance(stmt, ir.Append) and isinstance(stmt.value, ir.Var) \
                        and stmt.value.name in self.structured:
                    # a list of containers (a tape of a callee's saved tuples, say)
                    holders.add(stmt.target)
                elif (
                    isinstance(stmt, ir.Pop) and stmt.target is not None and stmt.source in holders
                ):
                    self.structured.add(stmt.target)
                    self.items.add(stmt.target)
                if not isinstance(stmt, ir.Assign):
                    continue
                value = stmt.value
                if isinstance(value, ir.Var) and value.name in returned:
                    returned.add(stmt.target)  # (a copy of it, under the name a loop binds again)
                if isinstance(value, ir.Var) and value.name in self.structured:
                    self.structured.add(stmt.target)
                    if value.name in self.items:
                        self.items.add(stmt.target)
                elif isinstance(value, ir.Var) and value.name in self.useful:
                    copies.append((stmt.target, value.name))
                elif carries_structure(value, self.structured):
                    # a container where that argument is (``def_same_kind``)
                    self.structured.add(stmt.target)
                elif (
                    isinstance(value, ir.Call)
                    and value.fn.obj is operator.getitem
                    and isinstance(value.args[0], ir.Var)
                    and value.args[0].name in self.structured
                ):
                    # an item of a container may be a container itself
                    self.structured.add(stmt.target)
                    self.items.add(stmt.target)
                elif id(stmt) in self.calls and self.calls[id(stmt)][0].structured_result:
                    self.structured.add(stmt.target)
            for target, source in copies:
                # a copy into a name another binding makes a container or its item (``a_1 = a``,
                # then ``a_1 = L[0]``): its adjoint may be None, so the source's adds as a container
                # item's does
                if target in self.structured and source not in self.structured:
                    self.structured.add(source)
                    self.items.add(source)
                    once = False  # (what reads the source is marked in the next pass)
            if once:  # no loop: one pass
                break

    def releasable(self) -> frozenset[str]:
        """Arrays computed once, at the top level of the forward pass, by a primitive or a call.

        Once the backward pass has read them for the last time, the gradient function can let
        them go (``released``), so that big backward products reuse their memory.
        """
        names = set()
        for stmt in self.function.body:
            if isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Call) \
                    and shape_class(ir.Var(stmt.target), self.classes) != SCALAR:
                rule = registry.lookup(stmt.value.fn.obj)
                if (rule is not None and not rule.nondiff) or id(stmt) in self.calls:
                    names.add(stmt.target)
        return frozenset(
            names - (self.structured - self.items) - self.rebound - set(self.function.params)
        )

    # ---- backward --------------------------------------------------------------------------------
    def needs_adjoint(self, stmt: ir.Stmt) -> bool:
        if isinstance(stmt, ir.Assign):
            return stmt.target in self.useful
        if isinstance(stmt, ir.Unpack):
            return bool(self.useful.intersection(stmt.targets))
        if isinstance(stmt, ir.Append):
            return stmt.target in self.useful
        if isinstance(stmt, ir.Pop):
            return stmt.source in self.useful
        return any(self.needs_adjoint(s) for block in ir.blocks(stmt) for s in block)

    def backward_block(self, body: tuple[ir.Stmt, ...],
                       keep: frozenset[str] = frozenset()) -> list[ir.Stmt]:
        """The backward pass of ``body``; the adjoints of ``keep`` reset at its end are left
        pending (``step_zeros``)."""
        out: list[ir.Stmt] = []
        line = None
        for stmt in reversed(body):
            if not self.needs_adjoint(stmt):
                out += self.saving.restores(stmt)
                continue
            if ir.blocks(stmt) or isinstance(stmt, (ir.Unpack, ir.Pop)):
                self.adjoints.opening = False
                out += self.adjoints.flush()
            elif isinstance(stmt, ir.Append):
                # (an append's backward pass reads only the list's adjoint, whose pending zero it
                # takes itself, and adds to the value's, which its accumulation starts: the others
                # stay pending)
                self.adjoints.opening = False
            adjoint = self.adjoint(stmt)
            if ir.blocks(stmt):
                line = None
            elif stmt.line != line and any(restored(s) is None for s in adjoint):
                line = stmt.line
                out.append(ir.Comment(line.comment(self.function.result_line.filename)))
            out += adjoint
        return out + self.adjoints.flush(keep)

    def adjoint(self, stmt: ir.Stmt) -> list[ir.Stmt]:
        if isinstance(stmt, ir.If):
            return self.adjoint_if(stmt)
        if isinstance(stmt, (ir.For, ir.While)):
            return self.adjoint_loop(stmt)
        if isinstance(stmt, ir.Append):
            return self.writes.adjoint_append(stmt)
        if isinstance(stmt, ir.Pop):
            return self.writes.adjoint_pop(stmt)
        if id(stmt) in self.in_place.writes:
            assert isinstance(stmt, ir.Assign)
            return self.writes.adjoint_write(stmt)
        if isinstance(stmt, ir.Unpack):
            # (``backward_block`` flushed the pending)
            parts = [self.adjoints.adjoint_or_zeros(t) for t in stmt.targets]
            assert isinstance(stmt.value, ir.Var)  # an active tuple unpacked
            appended = stmt.value.name in self.appended  # a list, whose adjoint the appends pop
            whole = ir.Pack(tuple(atom for _, atom in parts), "list" if appended else "tuple")
            out = self.adjoints.accumulate(
                stmt.value.name, self.adjoints.part(whole, *(s for made, _ in parts for s in made))
            )
            for t in stmt.targets:  # (forward mode's ``x, x_dot = pair`` binds names again)
                self.adjoints.bound_again(t, stmt)
            return out + self.saving.restore(stmt.targets, stmt)
        assert isinstance(stmt, ir.Assign)  # effects, pops and breaks have no adjoint
        return self.adjoint_assign(stmt)

    def adjoint_if(self, stmt: ir.If) -> list[ir.Stmt]:
        before = set(self.adjoints.live)
        body = self.backward_block(stmt.body)
        live, self.adjoints.live = self.adjoints.live, before
        orelse = self.backward_block(stmt.orelse)
        self.adjoints.live &= live  # what something has flowed into on either path
        return [ir.If(stmt.test, tuple(body), tuple(orelse), stmt.line)]

    def adjoint_loop(self, stmt: ir.For | ir.While) -> list[ir.Stmt]:
        if id(stmt) in self.checkpointed:
            assert isinstance(stmt, ir.For)  # only for loops are
            return self.checkpointing.adjoint_checkpointed(stmt, self.checkpointed[id(stmt)])
        owned: list[ir.Stmt] = []
        for name in self.in_place.loops.get(id(stmt), ()) + self.in_place.accumulated.get(
            id(stmt), ()
        ):
            # adjoints this loop writes into: its own copies
            owned += self.owned_adjoint(name)
        # no adjoint yet: nothing flowed into them
        untouched = {v for v in self.useful if v not in self.adjoints.bars}
        live = set(self.adjoints.live)
        body = self.step_backward(stmt, {s.target for s in owned if isinstance(s, ir.Assign)})
        self.adjoints.live = live  # (the loop may run no step)
        bound = {n for s in ir.walk((stmt,)) for n in self.saving.defined(s)}
        before, body, stacked, sums = batch_products(body, bound, self.terms, self.scratch,
                                                     self.namer, self.fixed_rows(stmt))
        # a loop of the function's own body runs once: an adjoint may start from its sum
        after = stacked + self.adjoints.summed_after(
            sums, body, untouched if any(s is stmt for s in self.function.body) else set()
        )
        body[:0] = self.saving.computed_again(stmt, body)
        before = owned + before
        trips = None
        # the trip count, read back as a statement of its own (``v = xs.pop()``): the
        if self.saving.counts(stmt):
            # language ast_ad reads again, for a derivative of this code
            count = self.saving.count_name(stmt)
            before.append(ir.Pop(count, self.saving.tape(count), ir.NOWHERE))
            trips = ir.Var(count)
        if isinstance(stmt, ir.While):
            index = self.namer.fresh("_")
            assert trips is not None  # (a while loop counts its trips)
            made, steps = self.adjoints.part(ir.Call(_RANGE, (trips,)))
            return [*before, *made, ir.For(index, steps, tuple(body), ir.NOWHERE), *after]
        made, steps = [], stmt.iter
        if trips is not None:  # ``r[:trips]``
            made, bounds = self.adjoints.part(ir.Call(_SLICE, (ir.Const(None), trips)))
            made, steps = self.adjoints.part(ir.Call(_ITEM, (steps, bounds)), *made)
        made, steps = self.adjoints.part(ir.Call(_REVERSED, (steps,)), *made)
        loop = ir.For(stmt.target, steps, tuple(body), ir.NOWHERE)
        return [*before, *made, loop, *after, restore_mark(stmt.target, id(stmt))]

    def fixed_rows(self, loop: ir.For | ir.While) -> dict[str, tuple[str, ir.Atom]]:
        """The reads ``x_item = x[t]`` at the variable of ``loop``, a ``for`` loop over a range
        whose trips are not counted, of a parameter nothing rebinds or writes, that its backward
        pass computes again (``Saving.plan_recomputed``), each with ``x`` and the range: after the
        loop ``x`` holds what it held at every step, so the steps' reads are its rows in the loop's
        order (``optimize.batching``'s ``rows``)."""
        if not isinstance(loop, ir.For) or self.kinds.of(loop.iter) != RANGE \
                or self.saving.counts(loop):
            return {}
        fixed = set(self.function.params) - self.saving.rebound - set(self.function.mutable)
        return {
            read.target: (read.value.args[0].name, loop.iter)
            for read in self.saving.recomputed.get(id(loop), ())
            if isinstance(read.value, ir.Call) and read.value.fn.obj is operator.getitem
            and not read.value.kwargs and len(read.value.args) == 2
            and isinstance(read.value.args[0], ir.Var) and read.value.args[0].name in fixed
            and read.value.args[1] == ir.Var(loop.target)
        }

    def owned_adjoint(self, name: str) -> list[ir.Stmt]:
        """``name``'s adjoint made an array of its own (``runtime.owned_adjoint``), which the
        statements after write into in place: what has flowed into it, or its zero."""
        current = (
            ir.Var(self.adjoints.bar(name))
            if name in self.adjoints.live or name not in self.local
            else self.adjoints.zero(name)
        )
        self.adjoints.live.add(name)
        self.adjoints.pending.discard(name)
        return [
            ir.Assign(self.adjoints.bar(name), ir.Call(_OWNED, (current, ir.Var(name))), ir.NOWHERE)
        ]

    def step_backward(self, loop: ir.For | ir.While, owned: frozenset[str] | set[str] = frozenset()
                      ) -> list[ir.Stmt]:
        """The backward pass of a step of ``loop``, the adjoints of ``step_zeros`` pending at its
        top and end (``owned``: adjoints the loop writes into, which it has copied)."""
        zeros = self.step_zeros(loop, {v for v in self.useful if self.adjoints.zero_now(v)} -
                                set(owned))
        # an adjoint zero where the loop's backward pass starts is zero at the top of its first
        # step only, but for those each step binds first (``zeros``); after the loop, which may run
        # no step, it is zero where it was before and at the end of each step
        before, carried = set(self.adjoints.flushed), self.adjoints.carried
        self.adjoints.flushed = before & zeros
        # (and one a step adds to is not zero at the top of the next for having no name yet)
        self.adjoints.carried = carried | frozenset(
            n for s in ir.walk(loop.body) for n in (*ir.reads_of(s), *ir.defined(s))
            if n in self.useful and n not in zeros)
        self.adjoints.pending |= zeros
        try:
            body = self.backward_block(loop.body, zeros)
        finally:
            self.adjoints.carried = carried
        self.adjoints.pending |= zeros
        self.adjoints.flushed &= before
        return body

    def step_zeros(self, loop: ir.For | ir.While, zero: set[str]) -> frozenset[str]:
        """The names of ``zero`` (whose adjoints are zero where the loop's backward pass starts)
        that each step of the loop binds before anything else in it reads or binds them: their
        adjoints are zero at the top of every step's backward pass too (the binding resets them,
        and nothing in the step adds to them before it), so the step's first contribution assigns
        and no zero is written at its end (they stay pending after the loop).

        And the names a loop inside the step finds so (of those zero where it starts), which nothing
        else in the step mentions: each inner step leaves them zero, and the inner loop, if it runs
        no step, leaves them as they were, zero; so they are zero at the top of every step of this
        loop too (an LSTM's ``h`` and ``c``, bound by each layer's step: ``h_bar = x_bar``, not
        ``h_bar = h_bar + x_bar`` after a reset to ``0.0`` at the end of each step)."""
        seen: set[str] = set()
        found: set[str] = set()
        nested: list[tuple[ir.Stmt, frozenset[str]]] = []
        for stmt in loop.body:
            if ir.blocks(stmt):
                if isinstance(stmt, (ir.For, ir.While)) and id(stmt) not in self.checkpointed:
                    nested.append((stmt, self.step_zeros(stmt, zero - seen)))
                seen.update(n for s in ir.walk((stmt,)) for n in (*ir.reads_of(s), *ir.defined(s)))
                continue
            reads = set(ir.reads_of(stmt))
            for name in ir.defined(stmt):
                if (
                    name in zero
                    and name not in seen
                    and name not in reads
                    and isinstance(stmt, ir.Assign)
                    and self.needs_adjoint(stmt)
                    and name not in self.local
                    and id(stmt) not in self.first
                    and name not in self.structured
                ):
                    found.add(name)
            seen.update(reads, ir.defined(stmt))
        for inner, names in nested:
            elsewhere = {
                n for other in loop.body if other is not inner
                for s in ir.walk((other,)) for n in (*ir.reads_of(s), *ir.defined(s))
            }
            found.update(names - elsewhere)
        return frozenset(found)

    def adjoint_assign(self, stmt: ir.Assign) -> list[ir.Stmt]:
        """Contributions to the statement's inputs, then restore what it overwrote.

        For ``y = y * x`` inside a loop the rule needs both values of ``y``: the
        new one (``ans``) is kept as ``y_new`` before the old one is restored.
        """
        target = stmt.target
        prefix: list[ir.Stmt] = []
        # reset since its last use: write the zero out, the inputs still need theirs
        if target in self.adjoints.pending:
            self.adjoints.pending.discard(target)
            prefix = [ir.Assign(self.adjoints.bar(target), self.adjoints.zero(target), ir.NOWHERE)]
        g = self.adjoints.bar(target)
        zero = id(stmt) in self.zero_in
        restores = (
            []
            if id(stmt) in self.saving.recomputed_ids
            else self.saving.restore(self.saving.defined(stmt), stmt)
        )
        reset = target not in self.local and id(stmt) not in self.first
        self.adjoints.live.discard(target)
        if target not in {v.name for v in inputs_of(stmt.value)}:
            contributions = self.contributions(stmt, g, target, zero)
            if prefix and not any(g in ir.reads_of(s) for s in ir.walk(tuple(contributions))):
                prefix = []  # nothing reads the zero: it stays pending
                self.adjoints.pending.add(target)
            out = prefix + contributions
            if reset:
                # zero from here on; the next contribution assigns
                self.adjoints.pending.add(target)
            return out + restores
        g_next = self.namer.fresh(f"{g}_next")
        self.nexts.add(g_next)
        before = [*prefix, ir.Assign(g_next, ir.Var(g), ir.NOWHERE)]
        if reset:
            self.adjoints.pending.add(target)
        contributions = self.contributions(stmt, g_next, ANS, zero)
        # the new value: kept before the old
        if any(ANS in ir.reads_of(s) for s in ir.walk(tuple(contributions))):
            newer = self.namer.fresh(f"{target}_new")                           # one comes back
            contributions = renamed(contributions, ANS, newer)
            before.append(ir.Assign(newer, ir.Var(target), ir.NOWHERE))
        # the target's old value first (the rule reads it); a callee's saved values only after its
        # backward
        first = [r for r in restores if restored(r) == target]
        after = [r for r in restores if restored(r) != target]
        return before + first + contributions + after

    def contributions(self, stmt: ir.Assign, g: str, ans: str, zero: bool) -> list[ir.Stmt]:
        """The statement's contributions to its inputs' adjoints; ``zero``: ``g`` may be a float
        zero."""
        value = stmt.value
        if isinstance(value, (ir.Var, ir.Const, ir.Ref)):
            return (
                self.adjoints.accumulate(value.name, ([], ir.Var(g)))
                if atom_active(value, self.active)
                else []
            )
        if isinstance(value, ir.Pack):
            out: list[ir.Stmt] = []
            for k, elt in enumerate(value.elts):
                if atom_active(elt, self.active):
                    # ``part``: ``g`` may be the zero (rebound) or None (a path of a callee did not
                    # read it)
                    item = _PART if zero or stmt.target not in self.local else _ITEM
                    out += self.adjoints.accumulate(
                        elt.name,
                        self.adjoints.real_part(
                            stmt.target,
                            elt,
                            self.adjoints.part(
                                ir.Call(item, (ir.Var(g), ir.Const(value.slot(k))))
                            ),
                        ),
                    )
            return out
        if id(stmt) in self.calls:
            return self.callee_contributions(stmt, g, ans, zero, *self.calls[id(stmt)])
        return self.rule_contributions(stmt, g, ans, zero)

    def rule_contributions(self, stmt: ir.Assign, g: str, ans: str, zero: bool) -> list[ir.Stmt]:
        call = stmt.value
        if not isinstance(call, ir.Call) or not any(
            atom_active(a, self.active) for a in inputs_of(call)
        ):
            return []  # a value computed from constants: nothing flows back
        rule = registry.lookup(call.fn.obj)
        if rule is None:
            raise self.missing(
                stmt, f"{call.fn.hint} has no gradient rule" + unfollowed(call.fn.obj)
            )
        # where an argument may be complex, the rules for complex arguments; a real argument then
        # takes the real part of its contribution, as it does where the result may be complex
        complex_args = bool(self.complexes) and complex_call(call, self.complexes)
        rule = rule_for(stmt, rule, self.complexes) if complex_args else rule
        real_parts = complex_args or stmt.target in self.complexes
        if rule.nondiff:
            return []  # a shape, a count, a fresh array of zeros: nothing flows back
        for key, atom in call.kwargs:
            if atom_active(atom, self.active):
                raise self.missing(
                    stmt,
                    f"the differentiated value {atom.name} is passed to {call.fn.hint} "
                    f"as keyword {key}=, which has no gradient rule: compute that part "
                    "outside the call, or pass a constant",
                )
        # a number's adjoint taken for a container's (the structure analysis errs that way: an item
        # of a list, added to by a same-kind helper) starts as None, which an elementwise rule
        # cannot take (``-None``)
        unknown = (
            rule.elementwise and stmt.target in self.structured and stmt.target not in self.items
        )
        added = self.in_place.reads.get(id(stmt)) or self.in_place.adds.get(id(stmt))
        if added is not None and not atom_active(call.args[0], self.active):
            added = None
        # (a float zero adds in place as it is)
        out = self.densify(stmt, g, ans, always=unknown) if zero and added is None or unknown \
            else []
        # y[i] read, its adjoint added in place
        if added is not None:
            if id(stmt) in self.in_place.straight and added not in self.opened:
                # (the first such read at the function's own level: the adjoint made its own)
                self.opened.add(added)
                out += self.owned_adjoint(added)
            bar, entry = self.adjoints.bar(added), call.args[1]
            # one entry, a scalar's broadcast, or a basic index: each entry named once, not fancy
            if self.kinds.is_number(entry, stmt) or self.kinds.basic_index(entry, stmt):
                item = gast.Subscript(
                    value=syntax.name(bar), slice=syntax.index(entry, self.refs), ctx=gast.Store()
                )
                return out + [
                    syntax.kept(
                        gast.AugAssign(target=item, op=gast.Add(), value=syntax.name(g)), self.refs
                    )
                ]
            add = syntax.call(self.refs.marker(runtime.add_into, "add_into"),
                              [syntax.name(bar), syntax.atom(entry, self.refs), syntax.name(g)])
            return out + [syntax.kept(gast.Expr(value=add), self.refs)]
        spread = None if real_parts else self.spread_by_broadcasting(call)
        if spread is not None:
            # (the sum's adjoint, a number, is its operand's: its one reader broadcasts it)
            return out + self.adjoints.accumulate(spread, ([], ir.Var(g)))
        if rule.joint is not None and not real_parts:
            joint = self.joint_contributions(stmt, rule, g, ans)
            if joint is not None:
                return out + joint
        for k, atom in enumerate(call.args):
            if atom_active(atom, self.active):
                vjp = rule.vjp(k)
                if vjp is None and complex_args:
                    raise no_complex_rule(stmt, k)
                if vjp is None:
                    raise self.missing(
                        stmt, f"{call.fn.hint} has no gradient rule for argument {k + 1}"
                    )
                if vjp is registry.zero:
                    continue
                contribution = self.contribution(stmt, self.ranked(stmt, call, k) or vjp, g, ans)
                if rule.elementwise and not self.exact(call, k):
                    contribution = self.to_operand_shape(stmt, atom, g, contribution)
                if real_parts:
                    contribution = self.adjoints.real_of(atom, contribution)
                out += self.adjoints.accumulate(atom.name, contribution)
        return out

    def spread_by_broadcasting(self, call: ir.Call) -> str | None:
        """The operand of ``np.sum(t)`` (all entries) whose adjoint can be the sum's own, a number,
        rather than that number spread to ``t``'s shape (``expand_reduced``): where ``t = a * b`` is
        read by this sum alone, ``a`` and ``b`` are arrays of ``t``'s shape (one shape class, or
        one variable), so the product's rule takes ``g * b`` and ``g * a``, which broadcasting
        gives ``t``'s shape, as a person writes the adjoint of ``np.sum(h * h)``: ``2 * g * h``.

        The fact it relies on: ``g * b`` with ``g`` a number has the entries, shape and dtype of
        ``expand_reduced(g, t) * b`` where ``b`` has ``t``'s shape (each entry one product of the
        same two numbers), and the rule adds nothing else of ``t``'s adjoint."""
        if call.fn.obj is not np.sum or len(call.args) != 1 or call.kwargs:
            return None
        operand = call.args[0]
        if type(operand) is not ir.Var or operand.name in self.complexes:
            return None
        made = self.read_once_products().get(operand.name)
        if made is None:
            return None
        factors = made.args
        if not all(type(f) is ir.Var and (self.kinds.rank(f.name) or 0) >= 1 for f in factors) \
                or not (self.exact(made, 0) and self.exact(made, 1)):
            return None
        return operand.name

    def read_once_products(self) -> dict[str, ir.Call]:
        """The names the function binds once, to a product of two operands (``a * b``), and reads
        once (``spread_by_broadcasting``), each with that product; made once."""
        if self._products is None:
            reads: Counter[str] = Counter()
            binds: Counter[str] = Counter(self.function.params)
            products: dict[str, ir.Call] = {}
            for stmt in ir.walk(self.function.body):
                reads.update(ir.reads_of(stmt))
                binds.update(ir.defined(stmt))
                value = stmt.value if isinstance(stmt, ir.Assign) else None
                if type(value) is ir.Call and value.fn.obj is operator.mul \
                        and len(value.args) == 2 and not value.kwargs:
                    assert isinstance(stmt, ir.Assign)  # (its value is the product)
                    products[stmt.target] = value
            if isinstance(self.function.result, ir.Var):
                reads[self.function.result.name] += 1
            self._products = {name: made for name, made in products.items()
                              if binds[name] == 1 and reads[name] == 1
                              and name not in self.function.mutable}
        return self._products

    def joint_contributions(self, stmt: ir.Assign, rule: registry.Rule, g: str,
                            ans: str) -> list[ir.Stmt] | None:
        """The contributions of a call whose rule gives several arguments' adjoints at once
        (``Rule.joint``: a gradient's, one forward pass over it for all of them), where two or more
        of its arguments are differentiated: ``parts = joint(g, ans, *args)``, then each
        argument's part added to its adjoint. ``None`` where it does not apply (one argument, or
        a keyword)."""
        call = ir.call_of(stmt)
        positions = tuple(k for k, atom in enumerate(call.args) if atom_active(atom, self.active)
                          and rule.vjp(k) not in (None, registry.zero))
        if len(positions) < 2 or call.kwargs:
            return None
        joint = rule.joint(positions)
        name = f"{call.fn.hint.rsplit('.', 1)[-1]}_vjps"
        parts = self.namer.fresh(f"{stmt.target}_parts")
        out: list[ir.Stmt] = [ir.Assign(
            parts, ir.Call(ir.Ref(joint, name), (ir.Var(g), ir.Var(ans), *call.args)), ir.NOWHERE
        )]
        for i, k in enumerate(positions):
            atom = call.args[k]
            assert isinstance(atom, ir.Var)  # (active)
            part = self.adjoints.part(ir.Call(_ITEM, (ir.Var(parts), ir.Const(i))))
            out += self.adjoints.accumulate(atom.name, part)
        return out

    def to_operand_shape(self, stmt: ir.Assign, atom: ir.Atom, g: str,
                         contribution: Made) -> Made:
        """An elementwise rule's contribution to ``atom`` brought back to its shape: ``unbroadcast``
        for an array, every entry's sum for a number, written as a person writes it where the
        contribution's last statement allows (``np.sum(g * y)`` as ``summed_product(g, y)``,
        ``np.sum(-w)`` as ``-np.sum(w)``)."""
        made, value = contribution
        if not self.kinds.is_number(atom, stmt):
            return self.adjoints.part(ir.Call(_UNBROADCAST, (value, atom)), *made)
        # the call that made the contribution, where it is its last statement's
        last = made[-1] if made else None
        call = (last.value if isinstance(last, ir.Assign) and isinstance(value, ir.Var)
                and last.target == value.name and type(last.value) is ir.Call
                and not last.value.kwargs else None)
        if call is not None and call.fn.obj is operator.mul and len(call.args) == 2 \
                and stmt.target not in self.complexes:
            # ``np.vdot`` where both are real float arrays of one shape, when it runs (no array
            # of products), else that sum (``runtime.summed_product``); not where ``y`` may be
            # complex, whose rules take the other path (``complexness``)
            others = [a for a in call.args if not (isinstance(a, ir.Var) and a.name == g)]
            if len(others) == 1 and isinstance(others[0], ir.Var) \
                    and others[0].name not in self.complexes:
                return self.adjoints.part(
                    ir.Call(_SUMMED_PRODUCT, (ir.Var(g), others[0])), *made[:-1]
                )
        if call is not None and call.fn.obj is operator.neg and len(call.args) == 1 \
                and isinstance(call.args[0], ir.Var):
            assert isinstance(last, ir.Assign)  # (``call`` is its value)
            # one pass over ``w`` where there were two; the same bits: negation is exact, and
            # rounding to nearest is symmetric, so every partial sum of the negated entries is
            # the negated partial sum
            total = ir.Assign(last.target, ir.Call(_SUMMED, (call.args[0],)), last.line)
            return self.adjoints.part(
                ir.Call(_NEGATED, (ir.Var(last.target),)), *made[:-1], total
            )
        return self.adjoints.part(ir.Call(_SUMMED, (value,)), *made)

    def ranked(self, stmt: ir.Assign, call: ir.Call, k: int) -> registry.VJP | None:
        """The rule for argument ``k`` at its operands' known numbers of axes
        (``registry.def_vjp_by_ranks``), unless that argument stays fixed through the loop the
        statement is in: there the general rule's helper is kept, so that the loop's contributions
        can be summed after it (``batching``)."""
        operand = call.args[k]
        if (
            not registry.has_ranked(call.fn.obj)
            or call.kwargs
            or (
                id(stmt) in self.looped
                and not (isinstance(operand, ir.Var) and operand.name in self.loop_bound)
            )
        ):
            return None
        return registry.vjp_by_ranks(call.fn.obj, self.kinds.ranks(call.args, stmt), k)

    def densify(self, stmt: ir.Assign, g: str, ans: str, always: bool = False) -> list[ir.Stmt]:
        """``g = dense_adjoint(g, ans)`` where ``g`` may be a float zero that the statement's rule
        cannot take (``always``: where it may be ``None``, which no rule takes)."""
        if not always and not self.zeros.needs_dense(stmt):
            return []
        return [ir.Assign(g, ir.Call(_DENSE, (ir.Var(g), ir.Var(ans))), ir.NOWHERE)]

    def exact(self, call: ir.Call, k: int) -> bool:
        """Whether an elementwise rule's contribution to argument ``k`` already has that argument's
        shape.

        It does when no other operand can broadcast it up: when each is a scalar, shares its
        class, or is the very same variable known to hold numbers (``x * x``: one value has one
        shape, whatever is known of it). (Asked for each argument by ``float_zeros`` and again by
        its rule: the answer is kept.)
        """
        key = (id(call), k)
        found = self.exacts.get(key)
        if found is None:
            found = self.exacts[key] = self.exact_now(call, k)
        return found

    def exact_now(self, call: ir.Call, k: int) -> bool:
        own = call.args[k]
        mine = shape_class(own, self.classes)
        if mine in CONTAINERS:
            return False  # ``unbroadcast`` refuses lists that ``+`` joined
        # (the very variable: where it is known to hold numbers, ``+`` joining no lists)
        itself = type(own) is ir.Var and self.kinds.rank(own.name) is not None
        others = [shape_class(a, self.classes) for j, a in enumerate(call.args)
                  if j != k and not (itself and a == own)]
        return all(c == SCALAR or (c is not None and c == mine) for c in others)

    def contribution(self, stmt: ir.Assign, vjp: registry.VJP, g: str, ans_name: str) -> Made:
        """The rule ``vjp`` of ``stmt``'s call: its body put in (``templates.applied``), as the
        parts of one expression, or a call of the rule where the body is not one
        (``pieces.one_expression``)."""
        call = ir.call_of(stmt)
        if not templates.bindable(vjp, len(call.args), [key for key, _ in call.kwargs]):
            raise self.error(
                stmt,
                f"the call to {call.fn.hint} does not match the arguments of its gradient rule",
            )
        put = (ir.Var(g), ir.Var(ans_name), *call.args)
        made = templates.applied(vjp, list(put), dict(call.kwargs), self.scratch, stmt.line)
        if made is not None and id(stmt) not in self.zero_in:
            made = self.shaped_already(stmt, g, made)
        if made is not None and one_expression(*made):
            return made
        rule_name = f"{call.fn.hint.rsplit('.', 1)[-1]}_vjp"
        return self.adjoints.part(ir.Call(ir.Ref(vjp, rule_name), put, call.kwargs))

    def shaped_already(self, stmt: ir.Assign, g: str, made: Made) -> Made:
        """A rule's body ``made`` with ``unbroadcast(g, x)`` as ``g`` where ``x`` has the shape
        class of the statement's result (``gradient_like``'s rule, where the gradient has its
        argument's shape). The facts relied on: the adjoint ``g`` of an array's statement that
        is not a float zero when its rule runs (``zeros.FloatZeros``: not in ``zero_in``) has
        that array's shape, and ``unbroadcast`` of an array of ``x``'s shape gives it back."""
        mine = shape_class(ir.Var(stmt.target), self.classes)
        if mine is None or mine == SCALAR or mine in CONTAINERS:
            return made
        before, value = made
        kept = [ir.Assign(s.target, ir.Var(g), s.line)
                if isinstance(s, ir.Assign) and type(s.value) is ir.Call
                and s.value.fn.obj is runtime.unbroadcast and not s.value.kwargs
                and s.value.args[0] == ir.Var(g)
                and shape_class(s.value.args[1], self.classes) == mine else s for s in before]
        return kept, value

    def callee_contributions(
        self,
        stmt: ir.Assign,
        g: str,
        ans: str,
        zero: bool,
        callee: Adjoint,
        saved: str,
        args: list[ir.Atom],
        active: list[ir.Var],
    ) -> list[ir.Stmt]:
        names = [a.name for a in active]
        parts = [self.namer.fresh(f"{n}_bar_{stmt.target}") for n in names]
        call = ir.Call(ir.Ref(ir.CalleeRef(callee, "bwd"), "bwd"), (ir.Var(saved), ir.Var(g)))
        out = self.densify(stmt, g, ans) if zero else []
        if parts:  # ``a_bar_t, b_bar_t = bwd(saved, g)``
            made, whole = self.adjoints.part(call)
            out += [*made, ir.Unpack(tuple(parts), whole, ir.NOWHERE)]
        else:
            out.append(syntax.kept(gast.Expr(value=syntax.expr(call, self.refs)), self.refs))
        for n, part in zip(names, parts, strict=True):
            out += self.adjoints.accumulate(n, ([], ir.Var(part)))
        return out

    # ---- errors ----------------------------------------------------------------------------------
    def error(self, stmt: ir.Stmt, message: str) -> LocatedError:
        return at_line(LocatedError, stmt, message)

    def missing(self, stmt: ir.Stmt, message: str) -> MissingRuleError:
        return missing_rule(stmt, message, REGISTER)
