"""Loops over a dict or a set that comes into the function, stepped through by its keys.

The lowering writes ``for k in d:`` as a loop over positions, ``k = d[k_1]`` for ``k_1`` in
``range(n_d)``, with ``n_d = loop_length(d, where)``: right for a list, a tuple, a string or an
array, and refused at run time for a dict or a set, whose positions are not what Python's loop gives
(``runtime.loop_length``), since where ``d`` is a parameter the lowering cannot know its type. The
derivative is made for the arguments' kinds (``api.arguments.shape_labels``): where a parameter's
label says a dict (``kinds.MAPPING``) or a set (``kinds.SET``), each such loop steps through its
keys instead, ``keys_of_d = keys_of(d)`` (Python's order; no gradient) and ``k = keys_of_d[k_1]``;
where it says a tuple, a list or a numpy array, the loop counts its steps by ``len``, as a person
writes it.

A name bound once to a dict or a set that the function makes (``kinds.DICT``, ``kinds.A_SET``: a
display, a write into one, a helper's write into one, which the IR binds to a new name) steps so
too.

The facts this relies on: the parameter (the name) is bound nowhere else in the function (a write
into it binds it again in the IR, and a dict's write copies it), so its keys are what they were when
the loop began wherever it is read; and a read
``d[k_1]`` by the counter of the very loop over ``range(n_d)`` (or by ``-1 - k_1``, ``reversed``)
is the lowering's read of that loop's item, since the counter is a name of ast_ad's that the user's
code never reads (a loop of the user's over a range, ``for i in range(2): d[i]``, reads by key and
stays). A count whose loop is not found so (a ``zip``'s) stays ``loop_length``, refused at run
time.
"""

from __future__ import annotations

import operator
from collections import Counter

from ast_ad import runtime
from ast_ad.analysis.activity import CONTAINER
from ast_ad.analysis.kinds import A_SET, DICT, MAPPING, RANKED, SET, kinds_of
from ast_ad.ir import nodes as ir
from ast_ad.ir.naming import Namer


def keyed_loops(function: ir.Function, shapes: tuple[int, ...]) -> ir.Function:
    """``function`` with its loops over parameters labelled dicts or sets stepping through their
    keys (see the module)."""
    if not any(
        isinstance(s, ir.Assign) and isinstance(s.value, ir.Call)
        and s.value.fn.obj is runtime.loop_length
        for s in ir.walk(function.body)
    ):
        return function  # (no loop whose iterable the lowering could not know: one scan)
    statements = list(ir.walk(function.body))
    bindings = Counter(name for s in statements for name in ir.defined(s))
    bound = set(bindings) | set(function.mutable)
    keyed = {
        p for p, label in zip(function.params, shapes, strict=True)
        if label in (MAPPING, SET) and p not in bound
    }
    # and a name bound once to a dict or a set (``kinds.DICT``, ``kinds.A_SET``: a display, a
    # write into one, which binds a new name, a copy), whose keys nothing changes after
    looped = {s.value.args[0].name for s in statements if isinstance(s, ir.Assign)
              and isinstance(s.value, ir.Call) and s.value.fn.obj is runtime.loop_length
              and isinstance(s.value.args[0], ir.Var)}
    local = {n for n in looped if bindings[n] == 1 and n not in function.mutable
             and n not in function.params}
    if local:
        known = kinds_of(function, shapes)
        keyed |= {n for n in local if known.facts.get(n) in (DICT, A_SET)}
    # parameters that are sequences (a tuple, a list, a numpy array): their loops count by ``len``
    sequences = {
        p for p, label in zip(function.params, shapes, strict=True)
        if (label == CONTAINER or label >= RANKED) and p not in bound
    }
    # a count of a keyed parameter's loop -> the parameter (``n_d = loop_length(d, where)``)
    counts = {
        s.target: s.value.args[0].name
        for s in statements
        if isinstance(s, ir.Assign) and isinstance(s.value, ir.Call)
        and s.value.fn.obj is runtime.loop_length and isinstance(s.value.args[0], ir.Var)
        and s.value.args[0].name in keyed
    }
    # the range of positions made of such a count alone (``indices = range(n_d)``; a ``zip``'s,
    # ``range(min(n_d, n_e))``, is left as it is: ``loop_length`` refuses a dict there)
    ranges = {
        s.target: s.value.args[0].name
        for s in statements
        if isinstance(s, ir.Assign) and isinstance(s.value, ir.Call) and s.value.fn.obj is range
        and len(s.value.args) == 1 and isinstance(s.value.args[0], ir.Var)
        and s.value.args[0].name in counts
    }
    # the counter of each loop over such a range -> the count (and so the parameter) whose items
    # it reads by position; and ``back = -1 - k_1``, the position ``reversed`` reads
    counters: dict[str, str] = {}
    for loop in statements:
        if isinstance(loop, ir.For) and isinstance(loop.iter, ir.Var) and loop.iter.name in ranges:
            counters[loop.target] = ranges[loop.iter.name]
            for s in loop.body:
                if (
                    isinstance(s, ir.Assign) and isinstance(s.value, ir.Call)
                    and s.value.fn.obj is operator.sub and s.value.args[0] == ir.Const(-1)
                    and s.value.args[1] == ir.Var(loop.target)
                ):
                    counters[s.target] = ranges[loop.iter.name]
    # (a count whose loop is not found stays ``loop_length``: refused at run time, not misread)
    found = set(counters.values())
    counted_by_len = {
        s.target for s in statements
        if isinstance(s, ir.Assign) and isinstance(s.value, ir.Call)
        and s.value.fn.obj is runtime.loop_length and isinstance(s.value.args[0], ir.Var)
        and s.value.args[0].name in sequences
    }
    if not found and not counted_by_len:
        return function
    namer = Namer(used=function.names())
    keys = {p: namer.fresh(f"keys_of_{p}") for p in sorted({counts[n] for n in found})}

    def stepped(stmt: ir.Stmt) -> list[ir.Stmt]:
        call = stmt.value if isinstance(stmt, ir.Assign) else None
        if isinstance(call, ir.Call) and isinstance(stmt, ir.Assign) \
                and stmt.target in counted_by_len:
            return [ir.Assign(stmt.target, ir.Call(ir.Ref(len, "len"), call.args[:1]), stmt.line)]
        if not isinstance(call, ir.Call) or not call.args or not isinstance(call.args[0], ir.Var) \
                or call.args[0].name not in keys:
            return [stmt]
        assert isinstance(stmt, ir.Assign)
        held = keys[call.args[0].name]
        if call.fn.obj is runtime.loop_length and stmt.target in found:
            return [
                ir.Assign(held, ir.Call(ir.Ref(runtime.keys_of, "keys_of"), (call.args[0],)),
                          stmt.line),
                ir.Assign(stmt.target, ir.Call(ir.Ref(len, "len"), (ir.Var(held),)), stmt.line),
            ]
        if call.fn.obj is operator.getitem and len(call.args) == 2 \
                and isinstance(call.args[1], ir.Var) \
                and counts.get(counters.get(call.args[1].name, "")) == call.args[0].name:
            return [ir.Assign(stmt.target, ir.Call(call.fn, (ir.Var(held), call.args[1])),
                              stmt.line)]
        return [stmt]

    return ir.with_body(
        function, ir.mapped(function.body, stepped), function.mutable | frozenset(keys.values())
    )
