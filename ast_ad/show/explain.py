"""``explain``: the forward and reverse evaluation traces of your own function, as a textbook shows
them.

>>> import math
>>> def f(x1, x2):
...     return math.log(x1) + x1 * x2 - math.sin(x2)
>>> import ast_ad.tracer  # explain needs functions with a source file; see examples/explain_seed.py

How it works: the normalized function runs once, with a recorder after each
statement. Each primitive application becomes an *event* that remembers its
arguments and the events that produced them. The reverse trace then walks the
events backwards (any reverse topological order will do), applying each
primitive's registered rule to the event's adjoint: one row per edge, with the
upstream adjoint, the local derivative and their product, the contribution.

Steps are numbered v1, v2, ... by dependency depth, the order textbooks use
(all steps on the inputs alone first). A statement that runs many times, in a
loop, is one step with a count; its value is its last one.
"""

from __future__ import annotations

import operator
from typing import Any

import gast
import numpy as np

from ast_ad import transform
from ast_ad.analysis.activity import is_user_function
from ast_ad.backend.emit import emit_tree
from ast_ad.backend.load import load
from ast_ad.core import records, registry
from ast_ad.core.records import field
from ast_ad.errors import ASTADError
from ast_ad.ir import nodes as ir
from ast_ad.ir import syntax
from ast_ad.ir.naming import Namer
from ast_ad.runtime import unbroadcast
from ast_ad.testing import tracer

ARRAYS = (
    "An array is shown as array(shape) [its first entries] |.|=its norm: array(3,) [1, 2, 3] "
    "|.|=3.74166 is the vector (1, 2, 3), whose Euclidean norm is 3.74166."
)
SYMBOLS = {
    operator.add: "+",
    operator.sub: "-",
    operator.mul: "*",
    operator.truediv: "/",
    operator.pow: "**",
    operator.matmul: "@",
    operator.lt: "<",
    operator.le: "<=",
    operator.gt: ">",
    operator.ge: ">=",
    operator.eq: "==",
    operator.ne: "!=",
}
PREFIX = {operator.neg: "-", operator.pos: "+"}
# the columns of the traces, in text and in HTML
FORWARD_COLUMNS = ("v", "computation", "value", "runs")
TANGENT_COLUMNS = ("v", "computation", "value", "tangent", "runs")
REVERSE_COLUMNS = (
    "step", "operation", "input", "upstream adjoint", "local derivative", "contribution", "runs"
)
MEET_COLUMNS = ("input", "contributions", "gradient")


# ---- what explain returns ------------------------------------------------------------------------
@records.record(frozen=False)
class Step:
    """One statement of the function, as the traces show it."""

    label: str
    expression: str
    value: Any
    count: int
    line: int
    adjoint: Any = None
    tangent: Any = None
    run: str = ""  # a loop's statement shown once a run: which run ("2 of 3")

    def runs(self) -> str:
        return self.run or (f"x{self.count}" if self.count > 1 else "")


@records.record(frozen=False)
class Edge:
    """One input of one step: the reverse trace's row."""

    step: str
    operation: str
    input: str
    upstream: Any
    local: Any
    contribution: Any
    count: int
    run: str = ""

    def runs(self) -> str:
        return self.run or (f"x{self.count}" if self.count > 1 else "")


@records.record(frozen=False)
class Explanation:
    """The three artefacts of the worked example, for any function: print it, or show it in
    Jupyter."""

    inputs: list[Step]
    steps: list[Step]
    edges: list[Edge]
    output: str
    value: Any
    gradient: dict[str, Any]
    contributions: dict[str, list[tuple[str, Any]]] = field(default_factory=dict)
    mode: str = "reverse"
    tangent: Any = None  # forward mode: the output's tangent

    def tangent_rows(self) -> list[tuple[str, ...]]:
        rows: list[tuple[str, ...]] = [(s.label, "input", summary(s.value), summary(s.tangent), "")
                                       for s in self.inputs]
        return rows + [
            (s.label, s.expression, summary(s.value), summary(s.tangent), s.runs())
            for s in self.steps
        ]

    def forward_text(self) -> str:
        return "\n".join([
            "Forward tangent trace (each step's value, and its tangent)",
            table(TANGENT_COLUMNS, self.tangent_rows()),
            "",
            f"The output's tangent: {summary(self.tangent)}",
            *(["", ARRAYS] if self.has_arrays() else []),
        ])

    def forward_rows(self) -> list[tuple[str, ...]]:
        rows: list[tuple[str, ...]] = [
            (s.label, "input", summary(s.value), "") for s in self.inputs
        ]
        return rows + [(s.label, s.expression, summary(s.value), s.runs()) for s in self.steps]

    def reverse_rows(self) -> list[tuple[str, ...]]:
        return [
            (
                e.step,
                e.operation,
                e.input,
                summary(e.upstream),
                summary(e.local),
                summary(e.contribution),
                e.runs(),
            )
            for e in self.edges
        ]

    def accumulation_rows(self) -> list[tuple[str, ...]]:
        rows: list[tuple[str, ...]] = []
        for name, parts in self.contributions.items():
            terms = " + ".join(f"{summary(c)} (from {src})" for src, c in parts) or "0 (no path)"
            rows.append((name, terms, summary(self.gradient[name])))
        return rows

    def accumulation_text(self) -> str:
        return table(MEET_COLUMNS, self.accumulation_rows())

    def __str__(self) -> str:
        if self.mode == "forward":
            return self.forward_text()
        adjoints = [
            (s.label, summary(s.adjoint)) for s in reversed(self.steps) if s.adjoint is not None
        ]
        return "\n".join(
            [
                "Forward evaluation trace",
                table(FORWARD_COLUMNS, self.forward_rows()),
                "",
                "Reverse evaluation trace (from the output to the inputs)",
                table(REVERSE_COLUMNS, self.reverse_rows()),
                "",
                "Adjoints: " + ", ".join(f"bar({label}) = {value}" for label, value in adjoints),
                "",
                "Where paths meet, contributions add up",
                self.accumulation_text(),
                *(["", ARRAYS] if self.has_arrays() else []),
            ]
        )

    def has_arrays(self) -> bool:
        """Whether a value the tables show is an array (summarised: ``ARRAYS`` says how)."""
        values = [v for s in [*self.inputs, *self.steps] for v in (s.value, s.adjoint, s.tangent)]
        return any(np.ndim(v) > 0 for v in values if v is not None)

    def __repr__(self) -> str:
        # at the prompt, the trace tables (as pandas shows a DataFrame), not the fields
        return str(self)

    def _repr_html_(self) -> str:
        if self.mode == "forward":
            rows = self.tangent_rows()
            return "<h4>Forward tangent trace</h4>" + html_table(TANGENT_COLUMNS, rows)
        return "".join(
            [
                "<h4>Forward evaluation trace</h4>",
                html_table(FORWARD_COLUMNS, self.forward_rows()),
                "<h4>Reverse evaluation trace</h4>",
                html_table(REVERSE_COLUMNS, self.reverse_rows()),
                "<h4>Where paths meet, contributions add up</h4>",
                html_table(MEET_COLUMNS, self.accumulation_rows()),
                *([f"<p>{ARRAYS}</p>"] if self.has_arrays() else []),
            ]
        )


# ---- running the function with a recorder --------------------------------------------------------
@records.record(frozen=False)
class Event:
    """One execution of one statement."""

    key: int
    value: Any
    args: tuple[Any, ...]
    parents: tuple[int | None, ...]  # the event that produced each positional argument, if any
    level: int
    active: bool


class Recorder:
    """Collects events as the instrumented function runs."""

    def __init__(
        self, statements: list[ir.Assign], params: tuple[str, ...], argnums: tuple[int, ...]
    ):
        self.statements = statements
        self.events: list[Event] = []
        self.last: dict[str, int] = {}
        self.params = params
        self.argnums = argnums
        self.args: tuple[Any, ...] = ()
        self.result_event: int | None = None  # the event whose value the function returns
        self.result: Any = None

    def start(self, *values: Any) -> None:
        for k, (name, value) in enumerate(zip(self.params, values, strict=True)):
            self.last[name] = len(self.events)
            self.events.append(Event(-1 - k, value, (), (), 0, k in self.argnums))

    def enter(self, args: tuple[Any, ...]) -> None:
        """The operands of the statement about to run, read before it runs."""
        self.args = args

    def __call__(self, key: int, value: Any) -> None:
        args = self.args
        stmt = self.statements[key]
        atoms = _operands(stmt.value)
        parents = tuple(self.last.get(a.name) if isinstance(a, ir.Var) else None for a in atoms)
        known = [self.events[p] for p in parents if p is not None]
        rule = registry.lookup(stmt.value.fn.obj) if isinstance(stmt.value, ir.Call) else None
        active = any(e.active for e in known) and not (rule is not None and rule.nondiff) \
            and isinstance(stmt.value, (ir.Call, ir.Var))
        # a copy: the same value, no new step
        if isinstance(stmt.value, ir.Var) and parents[0] is not None:
            self.last[stmt.target] = parents[0]
            return
        level = 1 + max((e.level for e in known if e.active), default=0)
        self.last[stmt.target] = len(self.events)
        self.events.append(Event(key, value, args, parents, level, active))


def record(
    fn: Any, args: tuple[Any, ...], argnums: tuple[int, ...]
) -> tuple[Recorder, ir.Function]:
    """Run ``fn``'s normalized form on ``args`` with a recorder after every assignment."""
    function = transform.normalized(fn)
    if any(
        isinstance(s, (ir.Append, ir.Unpack))
        or (isinstance(s, ir.Assign) and isinstance(s.value, ir.Pack))
        for s in ir.walk(function.body)
    ):
        raise ASTADError(
            "explain shows functions of numbers and arrays; it does not show tuples or lists being "
            "built yet: use ast_ad.grad and ast_ad.source for this function"
        )
    statements: list[ir.Assign] = []
    refs = syntax.RefTable()
    namer = Namer(used=function.names())
    recorder_name = namer.fresh("record")
    body = _instrument(function.body, statements, refs, recorder_name)
    body = (
        [
            gast.Expr(
                value=syntax.call(
                    gast.Attribute(value=syntax.name(recorder_name), attr="start", ctx=gast.Load()),
                    [syntax.name(p) for p in function.params],
                )
            )
        ]
        + body
        + [syntax.ret(syntax.atom(function.result, refs))]
    )
    tree = syntax.function(function.name, [*function.params, recorder_name], body)
    text, namespace = emit_tree(tree, refs)
    loaded = load(text, function.name, namespace)
    recorder = Recorder(statements, function.params, argnums)
    result = loaded.fn(*args, recorder)
    result_event = (
        recorder.last.get(function.result.name) if isinstance(function.result, ir.Var) else None
    )
    recorder.result = result
    recorder.result_event = result_event
    return recorder, function


def _instrument(body: tuple[ir.Stmt, ...], statements: list[ir.Assign], refs: syntax.RefTable,
                recorder: str) -> list[gast.stmt]:
    out: list[gast.stmt] = []
    for stmt in body:
        node = syntax.statement(stmt, refs)
        if isinstance(stmt, ir.If):
            node.body = _instrument(stmt.body, statements, refs, recorder) or [gast.Pass()]
            node.orelse = _instrument(stmt.orelse, statements, refs, recorder)
        elif isinstance(stmt, (ir.For, ir.While)):
            node.body = _instrument(stmt.body, statements, refs, recorder) or [gast.Pass()]
        if isinstance(stmt, ir.Assign):  # operands are read before the statement may overwrite one
            statements.append(stmt)
            operands = [syntax.atom(a, refs) for a in _operands(stmt.value)]
            enter = gast.Attribute(value=syntax.name(recorder), attr="enter", ctx=gast.Load())
            out.append(gast.Expr(value=syntax.call(enter, [syntax.tuple_(operands)])))
            out.append(node)
            out.append(gast.Expr(value=syntax.call(syntax.name(recorder), [
                syntax.const(len(statements) - 1), syntax.name(stmt.target)])))
        else:
            out.append(node)
    return out


def _operands(value: ir.Expr) -> tuple[ir.Atom, ...]:
    if isinstance(value, ir.Call):
        return value.args
    if isinstance(value, (ir.Var, ir.Const, ir.Ref)):
        return (value,)
    return ()


# ---- the reverse trace ---------------------------------------------------------------------------
def explain(fn: Any, *args: Any, argnums: int | tuple[int, ...] = 0, mode: str = "reverse",
            tangents: tuple[Any, ...] | None = None) -> Explanation:
    """The forward trace, the reverse trace and the accumulation of ``fn`` at ``args``.

    ``mode="forward"`` gives the forward tangent trace instead: each step's value and its tangent,
    for ``tangents`` (one per argument in ``argnums``; ones by default).
    """
    if mode not in ("reverse", "forward"):
        raise ASTADError(f"unknown mode {mode!r}: choose reverse or forward")
    nums = tuple(argnums) if isinstance(argnums, (tuple, list)) else (operator.index(argnums),)
    if mode == "forward":
        return explain_forward(fn, args, nums, tangents)
    recorder, function = record(fn, args, nums)
    events = recorder.events
    if recorder.result_event is None or not events[recorder.result_event].active:
        raise ASTADError(f"the value of {function.name} does not depend on the arguments {nums}")
    order, keys, labels, label, unit = _numbering(recorder, function, lambda i, e: e.active)

    adjoint: dict[int, Any] = {recorder.result_event: 1.0}
    edges: dict[tuple[int, int], Edge] = {}
    received: dict[int, list[tuple[int, Any]]] = {}
    for i in sorted(order, key=lambda i: (events[i].level, i), reverse=True):
        event = events[i]
        if i not in adjoint:
            continue
        g = adjoint[i]
        stmt = recorder.statements[event.key]
        for position, (parent, atom) in enumerate(
            zip(event.parents, _operands(stmt.value), strict=True)
        ):
            if parent is None or not events[parent].active:
                continue
            contribution, local = _vjp(stmt, event, position, g)
            contribution = unbroadcast(contribution, events[parent].value)
            adjoint[parent] = adjoint[parent] + contribution if parent in adjoint else contribution
            received.setdefault(parent, []).append((unit(i), contribution))
            edge = edges.get((unit(i), position))
            if edge is None:
                edges[(unit(i), position)] = Edge(
                    labels[unit(i)],
                    _operation(stmt),
                    label(parent, atom),
                    g,
                    local,
                    contribution,
                    1,
                    _run(recorder, order, i, unit),
                )
            else:
                edge.count += 1
                edge.contribution = edge.contribution + contribution
                edge.upstream, edge.local = g, None
    steps = []
    for key in keys:
        runs = [i for i in order if unit(i) == key]
        first = runs[0]
        stmt = recorder.statements[events[first].key]
        shown = [
            label(p, a) for p, a in zip(events[first].parents, _operands(stmt.value), strict=True)
        ]
        steps.append(
            Step(
                labels[key],
                _expression(stmt, shown, ", ".join(shown)),
                events[runs[-1]].value,
                len(runs),
                stmt.line.lineno,
                adjoint.get(runs[-1]),
                run=_run(recorder, order, first, unit),
            )
        )
    inputs = [Step(p, "input", args[k], 1, 0) for k, p in enumerate(function.params) if k in nums]
    gradient = {}
    contributions = {}
    for k, p in enumerate(function.params):
        if k in nums:
            gradient[p] = (
                unbroadcast(adjoint.get(k, 0.0), args[k])
                if k in adjoint
                else 0.0 * np.asarray(args[k])
            )
            merged: dict[int, Any] = {}
            for key, c in received.get(k, []):
                merged[key] = merged[key] + c if key in merged else c
            ordered = sorted(merged.items(), key=lambda kc: keys.index(kc[0]))
            contributions[p] = [(labels[key], c) for key, c in ordered]
    return Explanation(
        inputs, steps, list(edges.values()), "y", recorder.result, gradient, contributions
    )


# at most this many runs of statements shown: each run its own step; more, each statement one step
UNROLLED = 60


def _run(recorder: Recorder, order: list[int], i: int, unit: Any) -> str:
    """Which run of its statement event ``i`` is ("2 of 3"), where each run is a step of its own;
    else ""."""
    if unit(i) != i:
        return ""
    runs = [j for j in order if recorder.events[j].key == recorder.events[i].key]
    return f"{sorted(runs).index(i) + 1} of {len(runs)}" if len(runs) > 1 else ""


def _numbering(recorder: Recorder, function: ir.Function,
               shown: Any) -> tuple[list[int], list[int], dict[int | None, str], Any, Any]:
    """The events shown (``shown(i, event)``) in textbook order (by dependency depth), the steps
    they make, the labels v1, v2, ..., y, a function naming an operand by its label, parameter or
    constant, and one giving the step of an event (``unit``). Each run of a statement is a step of
    its own where at most ``UNROLLED`` runs are shown, so that a loop's picture has each run's
    edges, and its input's; else each statement is one step, with its number of runs."""
    events = recorder.events
    order = sorted((i for i, e in enumerate(events) if e.key >= 0 and shown(i, e)),
                   key=lambda i: (events[i].level, i))
    looped = len({events[i].key for i in order}) < len(order)

    def unit(i: int) -> int:
        return i if not looped or len(order) <= UNROLLED else events[i].key
    keys = list(dict.fromkeys(unit(i) for i in order))
    out_key = unit(recorder.result_event) if recorder.result_event is not None else None
    labels: dict[int | None, str] = {
        k: f"v{n + 1}" for n, k in enumerate(k for k in keys if k != out_key)
    }
    labels[out_key] = "y"
    names = {-1 - k: p for k, p in enumerate(function.params)}

    def label(event: int | None, atom: ir.Atom, depth: int = 0) -> str:
        if event is None:
            return _constant_text(atom)
        key = events[event].key
        if key < 0:
            return names[key]
        if unit(event) in labels:
            return labels[unit(event)]
        # a value no step shows (a condition, a number from the inputs' shapes): what computes it,
        # written out
        stmt = recorder.statements[key]
        if depth > 2 or not isinstance(stmt.value, ir.Call):
            return _constant_text(atom)
        parts = [
            label(p, a, depth + 1)
            for p, a in zip(events[event].parents, _operands(stmt.value), strict=True)
        ]
        return _expression(stmt, parts, ", ".join(parts))
    return order, keys, labels, label, unit


def explain_forward(fn: Any, args: tuple[Any, ...], nums: tuple[int, ...],
                    tangents: tuple[Any, ...] | None) -> Explanation:
    """The forward tangent trace: the events in the order they ran, each one's tangent from its
    inputs'."""
    if tangents is None:
        tangents = tuple(
            np.ones_like(args[k], dtype=float) if np.ndim(args[k]) else 1.0 for k in nums
        )
    # one per argument, as jvp takes them (None: not differentiated)
    if len(tangents) == len(args) != len(nums):
        nums = tuple(k for k, t in enumerate(tangents) if t is not None)
        tangents = tuple(t for t in tangents if t is not None)
    if len(tangents) != len(nums):
        raise ASTADError(
            f"explain needs one tangent per argument in argnums={nums!r}, got {len(tangents)}"
        )
    recorder, function = record(fn, args, nums)
    events = recorder.events
    given = dict(zip(nums, tangents, strict=True))
    dots: dict[int, Any] = {}
    for i, event in enumerate(events):
        if event.key < 0:
            if -1 - event.key in given:
                dots[i] = given[-1 - event.key]
            continue
        stmt = recorder.statements[event.key]
        for position, parent in enumerate(event.parents):
            if parent is not None and parent in dots:
                part = _jvp(stmt, event, position, dots[parent])
                dots[i] = dots[i] + part if i in dots else part
    order, keys, labels, label, unit = _numbering(recorder, function, lambda i, e: i in dots)
    steps = []
    for key in keys:
        runs = [i for i in order if unit(i) == key]
        stmt = recorder.statements[events[runs[0]].key]
        operands = [
            label(p, a) for p, a in zip(events[runs[0]].parents, _operands(stmt.value), strict=True)
        ]
        steps.append(
            Step(
                labels[key],
                _expression(stmt, operands, ", ".join(operands)),
                events[runs[-1]].value,
                len(runs),
                stmt.line.lineno,
                tangent=dots[runs[-1]],
                run=_run(recorder, order, runs[0], unit),
            )
        )
    inputs = [
        Step(p, "input", args[k], 1, 0, tangent=given[k])
        for k, p in enumerate(function.params)
        if k in nums
    ]
    out = dots.get(recorder.result_event, 0.0) if recorder.result_event is not None else 0.0
    return Explanation(inputs, steps, [], "y", recorder.result, {}, {}, mode="forward", tangent=out)


def _jvp(stmt: ir.Assign, event: Event, position: int, u: Any) -> Any:
    """The tangent the event's value gets from its argument ``position`` moving along ``u``."""
    value = stmt.value
    if isinstance(value, ir.Var):
        return u
    value = ir.call_of(stmt)
    kwargs = {k: _const_value(a) for k, a in value.kwargs}
    fn = value.fn.obj
    rule = registry.lookup(fn)
    if rule is None and is_user_function(fn):
        from ast_ad.api.directional import jvp

        tangents = [None] * len(event.args)
        tangents[position] = u
        return jvp(fn, tuple(event.args), tuple(tangents))[1]
    if rule is None or rule.jvp(position) is None:
        raise ASTADError(f"{value.fn.hint} has no forward-mode rule for argument {position + 1}")
    return tracer.tangent(rule, position, u, event.value, tuple(event.args), kwargs)


def _vjp(stmt: ir.Assign, event: Event, position: int, g: Any) -> tuple[Any, Any]:
    """The contribution of ``g`` to argument ``position``, and the local derivative if it is a
    number."""
    value = stmt.value
    if isinstance(value, ir.Var):
        return g, 1.0
    value = ir.call_of(stmt)
    kwargs = {k: _const_value(a) for k, a in value.kwargs}
    fn = value.fn.obj
    rule = registry.lookup(fn)
    if rule is None and is_user_function(fn):
        def call(seed: Any) -> Any:
            boxes = list(event.args)
            start = event.args[position]
            boxes[position] = tracer.Box(start, tracer.Node(start, []), tracer.new_level())
            out = tracer.traced(fn)(*boxes, **kwargs)
            return tracer.backward(out, seed).get(id(boxes[position].node), 0.0)
    elif rule is not None and rule.vjp(position) is not None:
        vjp: Any = rule.vjp(position)

        def call(seed: Any) -> Any:
            return vjp(seed, event.value, *event.args, **kwargs)
    else:
        raise ASTADError(f"{value.fn.hint} has no gradient rule for argument {position + 1}")
    contribution = call(g)
    scalar = np.ndim(event.value) == 0 and np.ndim(event.args[position]) == 0
    local = call(1.0) if scalar else None
    return contribution, local


def _const_value(atom: ir.Atom) -> Any:
    if isinstance(atom, ir.Const):
        return atom.value
    if isinstance(atom, ir.Ref):
        return atom.obj
    raise ASTADError("explain needs keyword arguments that are constants")


def _operation(stmt: ir.Assign) -> str:
    value = stmt.value
    if isinstance(value, ir.Var):
        return "copy"
    value = ir.call_of(stmt)
    fn = value.fn.obj
    return SYMBOLS.get(fn) or PREFIX.get(fn) or _short(value.fn)


def _short(ref: ir.Ref) -> str:
    name = getattr(ref.obj, "__name__", None) or ref.hint.rsplit(".", 1)[-1]
    return name


def _expression(stmt: ir.Assign, operands: list[str], joined: str) -> str:
    value = stmt.value
    if isinstance(value, ir.Var):
        return operands[0]
    value = ir.call_of(stmt)
    fn = value.fn.obj
    if fn in SYMBOLS and len(operands) == 2:
        return f"{operands[0]} {SYMBOLS[fn]} {operands[1]}"
    if fn in PREFIX:
        return f"{PREFIX[fn]}{operands[0]}"
    if fn is operator.getitem:
        return f"{operands[0]}[{operands[1]}]"
    extra = "".join(f", {k}={_constant_text(a)}" for k, a in value.kwargs)
    return f"{_short(value.fn)}({joined}{extra})"


def _constant_text(atom: ir.Atom) -> str:
    if isinstance(atom, ir.Const):
        return repr(atom.value)
    if isinstance(atom, ir.Ref):
        return atom.hint
    return atom.name


# ---- formatting ----------------------------------------------------------------------------------
def summary(value: Any) -> str:
    """A number to 12 decimals; an array as its shape, a few entries and its norm."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if np.ndim(value) == 0:
        number = float(np.real(value)) + 0.0  # -0.0 (0 times a negative slope) prints as 0
        return f"{number:.12f}"
    array = np.asarray(value, dtype=float)
    entries = ", ".join(f"{v:.4g}" for v in array.ravel()[:3]) + (", ..." if array.size > 3 else "")
    return f"array{array.shape} [{entries}] |.|={np.linalg.norm(array):.6g}"


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in [header, tuple("-" * w for w in widths), *rows]]
    return "\n".join(lines)


def html_table(
    header: tuple[str, ...], rows: list[tuple[str, ...]], name: str | None = None
) -> str:
    import html
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    named = f' id="{name}"' if name else ""
    return f"<table{named}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


__all__ = ["explain", "Explanation", "Step", "Edge"]
