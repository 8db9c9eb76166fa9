"""Guards that never run, left out: the memory model's checks under a flag that kinds prove false;
shape fittings of numbers, which do nothing; and checks of numbers that pass (``numbers_passed``).

Where ``y = x.copy()`` might copy a list (whose copy holds the same arrays), the memory model asks
at run time, ``x_container = is_container(x)``, and guards the writes into ``y`` under it (``if
x_container: check_in_place(y, (x,), ...)``). With the argument's label known, ``x`` is a number or
a numpy array, the flag is false, and the flag and the branch are dead: left out here, the write
into ``y`` is one no other name sees, which the loops that write an array in place then claim
(``analysis.in_place_writes``: an element loop over ``x.copy()`` is O(1) a step, not a copy of the
array a step).

The fact this relies on, asked of the registry and the kinds analysis: ``is_container`` (declared
``registry.def_container_test``) only says whether its argument is a list, tuple or dict, so it is
false of a number or a numpy array of numbers, which ``kinds`` proves its argument is at every
binding of the flag (``_false_flags``); a flag bound otherwise anywhere (the ``True`` that
paths skipping the test start with) keeps its branch.
"""

from __future__ import annotations

from collections import Counter

import gast

from ast_ad.analysis.complexness import complex_names
from ast_ad.analysis.kinds import Kinds, kinds_of
from ast_ad.core import registry
from ast_ad.ir import nodes as ir
from ast_ad.ir.syntax import MARK


def without_false_guards(function: ir.Function, shapes: tuple[int, ...]) -> ir.Function:
    """``function`` without the flags of ``registry.def_container_test`` that kinds prove false, and
    without the branches they test (their ``else`` blocks in their place)."""
    if not any(
        isinstance(s, ir.Assign)
        and isinstance(s.value, ir.Call)
        and registry.container_test(s.value.fn.obj)
        for s in ir.walk(function.body)
    ):
        return function  # (no such test: one scan)
    never = _false_flags(function.body, kinds_of(function, shapes))
    # (a flag read otherwise than as a branch's test stays, with its binding)
    never -= {
        name for s in ir.walk(function.body) if not isinstance(s, ir.If) for name in ir.reads_of(s)
    }
    if not never:
        return function

    def kept(stmt: ir.Stmt) -> list[ir.Stmt]:
        if isinstance(stmt, ir.Assign) and stmt.target in never:
            return []
        if isinstance(stmt, ir.If) and isinstance(stmt.test, ir.Var) and stmt.test.name in never:
            return list(stmt.orelse)
        return [stmt]

    return ir.with_body(function, ir.mapped(function.body, kept), function.mutable - never)


def _false_flags(body: tuple[ir.Stmt, ...], known: Kinds) -> frozenset[str]:
    """The names every binding of which asks ``registry.def_container_test``'s question of a number
    or a numpy array (``known``): false wherever they are read."""
    tested: set[str] = set()
    other: set[str] = set()
    for stmt in ir.walk(body):
        for name in ir.defined(stmt):
            value = stmt.value if isinstance(stmt, ir.Assign) else None
            if (
                isinstance(value, ir.Call)
                and registry.container_test(value.fn.obj)
                and len(value.args) == 1
                and known.of(value.args[0], stmt)[0] == "num"
            ):
                tested.add(name)
            else:
                other.add(name)
    return frozenset(tested - other)


def numbers_passed(function: ir.Function, shapes: tuple[int, ...]) -> ir.Function:
    """``function`` with each call of a function declared ``registry.def_numbers_pass`` whose
    arguments the kinds analysis proves numbers (``unbroadcast(t, u)`` of two numbers) made a copy
    of its first argument, which it gives back: code for any shapes lowered into this function (a
    gradient or a jvp written in a body, ``frontend.nested``) keeps no fitting its arguments make
    needless here, nor does the mode that differentiates it (no ``fit_adjoint`` of it, no shape kept
    for it). The fact relied on: such a function, given numbers, returns its first argument
    (``registry.def_numbers_pass``); a call with any argument not proven a number stays. Likewise a
    function declared ``registry.def_floats_pass`` where the argument it names is proven to hold
    floats (``written_tangent(u, x)``). And a check declared ``registry.def_passes_on_numbers``
    whose argument kinds prove a number and the complex analysis real (``check_gradient_value``
    of a gradient written in a body, whose value is one) is left out: it raises nothing there.

    Where the argument passed on is bound by the statement just before, in the same block, and
    read nowhere else (``s_1 = s + v``, then ``s = augmented_value(s_1, s)``), the two are one
    statement, ``s = s + v``: the value is computed one statement later, where nothing between
    could change what it reads, under the one name that reads it."""
    calls = []
    checks = []  # (a check of a number's, ``registry.def_passes_on_numbers``, and its argument)
    for s in ir.walk(function.body):
        if isinstance(s, ir.Assign) and isinstance(s.value, ir.Call) and not s.value.kwargs \
                and (registry.passes_numbers(s.value.fn.obj)
                     or registry.floats_pass(s.value.fn.obj) is not None):
            calls.append((s, s.value))
        elif isinstance(s, ir.Effect) and (argument := _checked_number(s)) is not None:
            checks.append((s, argument))
    if not calls and not checks:
        return function  # (no such call: one scan)
    known = kinds_of(function, shapes)
    dropped: set[int] = set()  # (the checks left out: an effect binds nothing, so no fact moves)
    if checks:
        complexes = complex_names(function, shapes, known)
        dropped = {id(s) for s, a in checks if known.is_number(a, s) and a.name not in complexes}

    def passes(stmt: ir.Assign, call: ir.Call) -> bool:
        if not call.args:
            return False
        if registry.passes_numbers(call.fn.obj) and all(
                known.rank_of(a, stmt) == 0 for a in call.args):
            return True
        # (``written_tangent(u, ans)`` where ``ans`` holds floats: ``registry.def_floats_pass``)
        k = registry.floats_pass(call.fn.obj)
        return k is not None and k < len(call.args) and known.holds_floats(call.args[k], stmt)

    passed = {id(s) for s, call in calls if passes(s, call)}
    if not passed and not dropped:
        return function
    # (the binding the passing statement takes in, where it is the one just before it)
    reads: Counter[str] = Counter()
    bindings: Counter[str] = Counter()
    for stmt in ir.walk(function.body):
        reads.update(ir.reads_of(stmt))
        bindings.update(ir.defined(stmt))
    if isinstance(function.result, ir.Var):
        reads[function.result.name] += 1
    merged: dict[int, ir.Assign] = {}  # the passing statement's id: the binding it takes in
    blocks = [function.body]
    while blocks:
        block = blocks.pop()
        for before, stmt in zip(block, block[1:], strict=False):
            if id(stmt) in passed and isinstance(before, ir.Assign) \
                    and type(before.value) is ir.Call and isinstance(stmt, ir.Assign) \
                    and isinstance(stmt.value, ir.Call) \
                    and stmt.value.args[0] == ir.Var(before.target) \
                    and reads[before.target] == 1 and bindings[before.target] == 1 \
                    and before.target not in function.mutable:
                merged[id(stmt)] = before
        blocks += [b for s in block for b in ir.blocks(s)]
    taken = {id(before) for before in merged.values()}

    def kept(stmt: ir.Stmt) -> list[ir.Stmt]:
        if id(stmt) in taken or id(stmt) in dropped:
            return []
        if id(stmt) in passed:
            assert isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Call)
            before = merged.get(id(stmt))
            value = stmt.value.args[0] if before is None else before.value
            return [ir.Assign(stmt.target, value, stmt.line)]
        return [stmt]

    return ir.with_body(function, ir.mapped(function.body, kept), function.mutable)


def _checked_number(stmt: ir.Effect) -> ir.Var | None:
    """The name ``stmt`` checks, where it is a call of a check that passes on a real number
    (``registry.def_passes_on_numbers``: ``check_gradient_value(where, out)``), else ``None``."""
    node = stmt.node
    if not (isinstance(node, gast.Expr) and isinstance(node.value, gast.Call)
            and isinstance(node.value.func, gast.Name) and not node.value.keywords):
        return None
    marker = node.value.func.id  # (``§k``: the effect's ``k``-th outside object)
    if not marker.startswith(MARK) or not marker[len(MARK):].isdigit() \
            or int(marker[len(MARK):]) >= len(stmt.refs):
        return None
    k = registry.passes_on_numbers(stmt.refs[int(marker[len(MARK):])].obj)
    args = node.value.args
    if k is None or k >= len(args) or not isinstance(args[k], gast.Name):
        return None
    return ir.Var(args[k].id)
