"""Reverse mode's functions, finished: the gradient as one function (``f_vjp``), or as a
``_fwd``/``_bwd`` pair for ``vjp`` and for the callers of a function of yours, each folded as a
person writes it (``fold``) and with its tape loops written as loops over the tape (``_iterated``).
``emit`` then names their outside objects and prints them, as it does forward mode's
(``forward.jvp_units``): it knows neither mode.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import gast
import numpy as np

from ast_ad.backend.emit import local_names
from ast_ad.ir import syntax
from ast_ad.ir.naming import Namer
from ast_ad.modes.adjoint import Adjoint
from ast_ad.modes.calls import callees_in_order
from ast_ad.optimize.fold import (
    Inliner,
    filled,
    folded,
    folded_scanned,
    linear_calls,
    number_calls,
    pure_calls,
    scaled_adjoints,
    shared_factor,
)
from ast_ad.optimize.release import released, sunk_zero_starts, without_dead_constants, zero_start
from ast_ad.runtime import owned_adjoint, stand_in

# (the adjoint it belongs to, "vjp", "fwd" or "bwd", the function)
Unit = tuple[Any, str, gast.FunctionDef]


def gradient_units(top: Adjoint, single: bool, typed: bool = False) -> list[Unit]:
    """Every callee's ``_fwd``/``_bwd`` pair, then the gradient function; ``typed``: each name
    of one type wherever it is bound, as Numba compiles it (``_typed``)."""
    units = [(a, part, tree) for a in callees_in_order(top)
             for part, tree in zip(("fwd", "bwd"), _pair(a, typed), strict=True)]
    return units + [(top, "vjp", _combined(top, single, typed))]


def pair_units(top: Adjoint) -> list[Unit]:
    """A ``_fwd``/``_bwd`` pair for ``top`` (after its callees'): for ``vjp``, whose backward pass
    may run many times after one forward pass. The entry is ``top``'s ``_bwd``; its ``_fwd``
    precedes it."""
    adjoints = [a for a in callees_in_order(top) if a is not top] + [top]
    return [
        (a, part, tree)
        for a in adjoints
        for part, tree in zip(("fwd", "bwd"), _pair(a), strict=True)
    ]


def _combined(a: Adjoint, single: bool, typed: bool = False) -> gast.FunctionDef:
    """The gradient as one function, ``f_vjp(*params, out_bar=1.0) -> (out, grads)``: the forward
    sweep, then the backward pass, its copies folded, its temporaries written into their readers,
    its shared factors taken out, and its arrays let go after their last reads (one gradient where
    ``single``, else a tuple)."""
    grads = [syntax.name(g) for g in a.grads]
    result = syntax.tuple_([a.result, grads[0] if single else syntax.tuple_(grads)])
    keep = {n.id for n in syntax.walk(result) if isinstance(n, gast.Name)}
    keep |= {a.seed, *a.params}
    ret = syntax.ret(result)
    inliner = _inliner(a)
    # each statement scanned once, for both folds and the count
    if inliner.listless(a.forward, a.backward):
        backward, scanned = folded_scanned(
            a.backward, keep, [inliner.scan(stmt) for stmt in a.backward]
        )
        scans: list[Any] = inliner.counted([a.forward, backward, [ret]], [None, scanned, None])
    else:
        backward, scans = folded(a.backward, keep), [None, None]
        inliner.count([*a.forward, *backward, ret])
    forward, backward = inliner.block(a.forward, scans[0]), inliner.block(backward, scans[1])
    backward = scaled_adjoints(backward, a.adjoints, a.wide, a.wide_floats, linear_calls(a.refs))
    backward = shared_factor(backward, a.adjoints, number_calls(a.refs))
    backward = sunk_zero_starts(backward)
    # an array bound once, and that assignment written into its reader, is no name to release
    releasable = a.releasable - inliner.folded
    backward, live = without_dead_constants(backward, keep | syntax.name_ids(ret, loads=True))
    forward, _ = without_dead_constants(forward, live)
    backward = _zeros_shaped(backward, a.shaped_as, a.refs)
    if typed:
        forward, backward = _typed(forward, backward, a, [ret])
    body = _iterated(
        forward + released(backward, releasable, a.array_adjoints, keep, a.refs) + [ret], a.refs
    )
    return syntax.function(f"{a.function.name}_vjp", [*a.params, a.seed], body, [syntax.const(1.0)])


def _zeros_shaped(backward: list[gast.stmt], shaped_as: dict[str, str],
                  refs: syntax.RefTable) -> list[gast.stmt]:
    """``backward`` with each start at zero of an array's adjoint that is still a statement of its
    own, before the loop or branch that adds to it (``x_bar = 0.0``), made its parameter's zeros
    (``x_bar = np.zeros_like(x)``, ``Adjoint.shaped_as``), as a person starts an array's sum: the
    adjoint is then an array of one shape wherever it is bound, as Numba needs (``jit="numba"``).

    The fact it relies on: ``zeros_like(x) + e`` is ``0.0 + e``, the adjoint of an array of reals
    of ``x``'s shape, of ``x``'s dtype, as ``0.0 + e`` keeps ``e``'s (an adjoint of ``x``'s shape
    class has ``x``'s shape, ``activity.shape_classes``), and makes a new object as it does."""
    if not shaped_as:
        return backward
    owned = _owned(backward, refs)
    out = []
    for stmt in backward:
        name = zero_start(stmt)
        if name is not None and name in shaped_as and name not in owned:
            stmt = _zeros_like(name, shaped_as[name], refs)
        out.append(stmt)
    return out


def _owned(backward: list[gast.stmt], refs: syntax.RefTable) -> set[str]:
    """The adjoints a loop writes into in place: each starts as its own array already
    (``owned_adjoint``, which makes the zeros a batch of cotangents needs)."""
    return {
        node.args[0].id
        for stmt in backward
        for node in syntax.walk(stmt)
        if type(node) is gast.Call and type(node.func) is gast.Name and node.args
        and type(node.args[0]) is gast.Name and refs.lookup(node.func.id) is owned_adjoint
    }


def _zeros_like(name: str, like: str, refs: syntax.RefTable) -> gast.stmt:
    """``name = np.zeros_like(like)``: an array adjoint's start at zero."""
    return syntax.assign(name, syntax.call(refs.marker(np.zeros_like, "np.zeros_like"),
                                           [syntax.name(like)]))


def _typed(forward: list[gast.stmt], backward: list[gast.stmt], a: Adjoint,
           rest: list[gast.stmt]) -> tuple[list[gast.stmt], list[gast.stmt]]:
    """``forward`` and ``backward`` with every start at zero of an array's adjoint, in a loop or
    branch too (``x_bar = 0.0``, in the step that has nothing to add to it, or after its value was
    passed on), made zeros of its shape, so that the adjoint is an array of one type wherever it
    is bound, as Numba needs (``jit="numba"``; the Python gradient keeps the float zero, which
    costs nothing to add).

    An adjoint of a parameter's shape class starts as that parameter's zeros (``Adjoint.shaped_as``,
    as ``_zeros_shaped`` does at the top level). One of another class of arrays of real floats
    (``Adjoint.class_of``) starts as zeros like a name of its class that the forward pass binds at
    its top level, to something other than ``None``: its stand-in, taken there (``like =
    stand_in(x)``: its shape and dtype, one entry of memory where it is large), is read when the
    backward pass runs, after the whole forward pass. The fact it relies on is the class's: every
    name of it holds, wherever it is bound, an array of one shape (``activity.shape_classes``),
    and ``zeros + e`` is ``0.0 + e`` for an adjoint ``e`` of that shape. An adjoint of a class with
    no such name keeps its float zero (Numba then names the line it cannot type)."""
    owned = _owned(backward, a.refs)
    starts = {
        name
        for stmt in backward
        for node in syntax.walk(stmt)
        if isinstance(node, gast.stmt) and (name := zero_start(node)) is not None
        and name not in owned and (name in a.shaped_as or name in a.class_of)
    }
    if not starts:
        return forward, backward
    namer = Namer(used=local_names([syntax.function("f", list(a.params),
                                                    forward + backward + rest)]))
    bound_at: dict[str, int] = {}  # a name the forward pass binds at its top level, and where
    for k, stmt in enumerate(forward):
        if type(stmt) is gast.Assign and len(stmt.targets) == 1 \
                and type(stmt.targets[0]) is gast.Name \
                and not (type(stmt.value) is gast.Constant and stmt.value.value is None):
            bound_at.setdefault(str(stmt.targets[0].id), k)
    zeros_of: dict[str, str] = {bar: param for bar, param in a.shaped_as.items() if bar in starts}
    taken: dict[int, list[gast.stmt]] = {}  # after which forward statement, the stand-ins taken
    like_of: dict[str, str] = {}
    for bar in sorted(starts - set(zeros_of)):
        found = [(bound_at[n], n) for n in a.class_of[bar] if n in bound_at]
        if not found:
            continue
        at, witness = min(found)
        if witness not in like_of:
            like_of[witness] = namer.fresh(f"{witness}_like")
            taken.setdefault(at, []).append(syntax.assign(like_of[witness], syntax.call(
                a.refs.marker(stand_in, "stand_in"), [syntax.name(witness)])))
        zeros_of[bar] = like_of[witness]
    if taken:
        forward = [s for k, stmt in enumerate(forward) for s in [stmt, *taken.get(k, [])]]

    def zeroed(stmt: gast.stmt) -> gast.stmt:
        name = zero_start(stmt)
        if name is not None and name in zeros_of:
            return _zeros_like(name, zeros_of[name], a.refs)
        blocks = {field_name: block for field_name in ("body", "orelse")
                  if isinstance(block := getattr(stmt, field_name, None), list) and block
                  and isinstance(block[0], gast.stmt)}
        if not blocks:
            return stmt
        # (a new statement: the adjoint's own may be emitted again, for Python)
        made = copy.copy(stmt)
        for field_name, block in blocks.items():
            setattr(made, field_name, [zeroed(s) for s in block])
        return made

    return forward, [zeroed(stmt) for stmt in backward]


def _iterated(body: list[gast.stmt], refs: syntax.RefTable) -> list[gast.stmt]:
    """``body`` with each backward loop that starts its step by popping a tape, and reads no index,
    written as a loop over the tape: ``for x in reversed(x_tape):`` in place of ``for t in
    reversed(r):`` and ``x = x_tape.pop()``, as a person writes it (a step costs no call).

    It applies where the tape is a list made empty once, at the top, and used for nothing but one
    push, at the top of a loop ``for t in r:`` with no ``break`` or ``continue`` (one push a step),
    and this one pop; where ``r`` is bound once; and where nothing reads the backward loop's
    variable, in it or after it. The tape then holds one value a step, and the loop visits them last
    to first, as the pops did, leaving the name bound to the first, as the last pop did.
    """
    if not any(type(stmt) is gast.For and type(stmt.iter) is gast.Call for stmt in body):
        return body  # no loop over ``reversed(...)`` to look at: nothing to walk
    made: dict[str, int] = {}
    pushes: dict[str, list[int]] = {}  # tape -> the top-level loops that push to it
    uses: Counter[str] = Counter()  # every read of a name, and how many of them are a push or a pop
    tape_uses: Counter[str] = Counter()
    bound: Counter[str] = Counter()
    for k, stmt in enumerate(body):
        if (
            type(stmt) is gast.Assign
            and len(stmt.targets) == 1
            and type(stmt.targets[0]) is gast.Name
            and type(stmt.value) is gast.List
            and not stmt.value.elts
        ):
            made[stmt.targets[0].id] = made.get(stmt.targets[0].id, 0) + 1
        if type(stmt) is gast.For and type(stmt.iter) is gast.Name and not any(
                type(n) in (gast.Break, gast.Continue) for n in syntax.walk(stmt)):
            for inner in stmt.body:
                call: Any = inner.value if type(inner) is gast.Expr else None
                if (
                    type(call) is gast.Call
                    and type(call.func) is gast.Attribute
                    and call.func.attr == "append"
                    and type(call.func.value) is gast.Name
                ):
                    pushes.setdefault(call.func.value.id, []).append(k)
        for node in syntax.walk(stmt):
            if type(node) is gast.Name:
                (uses if type(node.ctx) is gast.Load else bound)[node.id] += 1
            elif (
                type(node) is gast.Attribute
                and node.attr in ("append", "pop")
                and type(node.value) is gast.Name
            ):
                tape_uses[node.value.id] += 1
    out = list(body)
    for k, loop in enumerate(body):
        if not (
            type(loop) is gast.For
            and type(loop.target) is gast.Name
            and type(loop.iter) is gast.Call
            and refs.lookup(getattr(loop.iter.func, "id", "")) is reversed
            and len(loop.iter.args) == 1
            and type(loop.iter.args[0]) is gast.Name
            and not loop.orelse
        ):
            continue
        steps = loop.iter.args[0].id
        first = next(
            (j for j, stmt in enumerate(loop.body) if syntax.comment_text(stmt) is None), None
        )
        pop: Any = loop.body[first] if first is not None else None
        if not (
            type(pop) is gast.Assign
            and len(pop.targets) == 1
            and type(pop.targets[0]) is gast.Name
            and type(pop.value) is gast.Call
            and not pop.value.args
            and type(pop.value.func) is gast.Attribute
            and pop.value.func.attr == "pop"
            and type(pop.value.func.value) is gast.Name
        ):
            continue
        tape = pop.value.func.value.id
        forward = pushes.get(tape, [])
        index = loop.target.id
        if (
            made.get(tape) != 1
            or bound[tape] != 1
            or not uses[tape] == tape_uses[tape] == 2
            or len(forward) != 1
            or forward[0] > k
            or getattr(body[forward[0]].iter, "id", None) != steps
            or bound[steps] != 1
            or any(
                type(n) is gast.Name and n.id == index and type(n.ctx) is gast.Load
                for stmt in body[k:]
                for n in syntax.walk(stmt)
            )
        ):
            continue
        out[k] = syntax.new(
            gast.For,
            {
                **loop.__dict__,
                "target": pop.targets[0],
                "iter": syntax.new(gast.Call, {**loop.iter.__dict__, "args": [syntax.name(tape)]}),
                # (the pop the loop's one statement: the loop only binds the name, as the pops
                # did)
                "body": filled([stmt for stmt in loop.body if stmt is not pop]) or [gast.Pass()],
            },
        )
    return out


def _inlined(
    owner: Adjoint, blocks: list[list[gast.stmt]], also_read: list[gast.stmt]
) -> list[list[gast.stmt]]:
    """Each block of one function with the temporaries one later statement reads written into it
    (``fold.Inliner``)."""
    inliner = _inliner(owner)
    inliner.count([stmt for block in blocks for stmt in block] + also_read)
    return [inliner.block(block) for block in blocks]


def _inliner(a: Adjoint) -> Inliner:
    """The ``fold.Inliner`` of ``a``'s code: its calls of registered functions with no effect
    move."""
    return Inliner(pure_calls(a.refs), a.function.users, a.numbers)


def _pair(a: Adjoint, typed: bool = False) -> list[gast.FunctionDef]:
    """``f_fwd(*params) -> (out, saved)`` and ``f_bwd(saved, out_bar) -> grads``: the forward pass
    returns what the backward pass reads, which may run many times after it. The backward pass is
    made as the gradient's one function's is (``_combined``): folded, its zero starts sunk into
    their first additions and the dead ones left out, then an array adjoint's start made its
    parameter's zeros (``_zeros_shaped``), and every start zeros of its shape for Numba
    (``_typed``); what it reads then is what the forward pass saves."""
    ret = syntax.ret(syntax.tuple_([syntax.name(g) for g in a.grads]))
    (backward,) = _inlined(a, [folded(a.backward, {*a.grads, a.seed})], [ret])
    backward = scaled_adjoints(backward, a.adjoints, a.wide, a.wide_floats, linear_calls(a.refs))
    backward = shared_factor(backward, a.adjoints, number_calls(a.refs))
    backward = sunk_zero_starts(backward)
    backward, _ = without_dead_constants(backward, syntax.name_ids(ret, loads=True))
    backward = _zeros_shaped(backward, a.shaped_as, a.refs)
    forward = a.forward
    if typed:
        forward, backward = _typed(forward, backward, a, [ret])
    saved = a.saved(backward, forward)
    local = Namer(
        used=local_names([syntax.function("f", list(a.params), forward + backward)]) | {a.seed}
    )
    pack = local.fresh("saved")
    top = {n.id for s in forward if isinstance(s, gast.Assign) for n in gast.walk(s.targets[0])
           if isinstance(n, gast.Name)}
    unbound = [
        syntax.assign(s, syntax.const(None)) for s in saved if s not in top and s not in a.params
    ]
    kept = syntax.ret(syntax.tuple_([a.result, syntax.tuple_([syntax.name(s) for s in saved])]))
    (forward,) = _inlined(a, [unbound + forward], [kept])
    fwd = syntax.function(f"{a.function.name}_fwd", list(a.params), forward + [kept])
    unpack = [syntax.assign(saved, syntax.name(pack))] if saved else []
    bwd = syntax.function(f"{a.function.name}_bwd", [pack, a.seed], unpack + backward + [ret])
    return [fwd, bwd]
