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
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gast
import numpy as np

from ast_ad import ir, registry, runtime, syntax
from ast_ad.errors import LocatedError, MissingRuleError
from ast_ad.inline import bindable, inline
from ast_ad.naming import Namer
from ast_ad.syntax import RefTable


@dataclass(frozen=True)
class CalleeRef:
    """A reference, in generated code, to the forward or backward function of a callee."""

    adjoint: Adjoint
    part: str  # "fwd" or "bwd"


@dataclass(eq=False)
class Adjoint:
    """A function's forward and backward statements, ready to emit as one function or as a pair."""

    function: ir.Function
    argnums: tuple[int, ...]
    forward: list[gast.stmt]
    backward: list[gast.stmt]
    result: gast.expr
    seed: str
    grads: list[str]
    refs: RefTable
    callees: list[Adjoint] = field(default_factory=list)

    @property
    def params(self) -> tuple[str, ...]:
        return self.function.params

    def saved(self) -> list[str]:
        """Forward names the backward statements read, in order of first use."""
        stored = {n.id for s in self.backward for n in gast.walk(s)
                  if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store)}
        seen: dict[str, None] = {}
        for s in self.backward:
            for n in gast.walk(s):
                if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load) and not n.id.startswith(syntax.MARK) \
                        and n.id not in stored and n.id != self.seed:
                    seen.setdefault(n.id)
        return list(seen)


Derive = Callable[[Any, tuple[int, ...], tuple[int, ...]], Adjoint]


def reverse(function: ir.Function, argnums: tuple[int, ...], shapes: tuple[int, ...], derive: Derive) -> Adjoint:
    """Build the adjoint of ``function`` with respect to the parameters at ``argnums``.

    ``shapes`` labels each parameter's shape: ``SCALAR`` for numbers, and equal
    labels for parameters known to share a shape. An elementwise rule's
    contribution needs no un-broadcasting when no other operand can have
    broadcast it up (see ``shape_classes``).
    """
    return Reverser(function, argnums, shapes, derive).run()


SCALAR = -1
FULL_REDUCTIONS = {np.sum, np.mean, float}  # called on one argument alone, these give a scalar


def shape_classes(function: ir.Function, shapes: tuple[int, ...]) -> dict[str, int]:
    """Label every name with a shape class: names with equal labels are known to have equal shapes.

    Elementwise operations keep their operands' class when all non-scalar
    operands share one; anything else starts a class of its own.
    """
    classes = dict(zip(function.params, shapes, strict=True))
    fresh = max(shapes, default=0) + 1
    for stmt in function.body:
        targets = [stmt.target] if isinstance(stmt, ir.Assign) else getattr(stmt, "targets", ())
        label = None
        if isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Call) and not stmt.value.kwargs:
            rule = registry.lookup(stmt.value.fn.obj)
            if getattr(stmt.value.fn.obj, "__module__", None) == "math" or \
                    (stmt.value.fn.obj in FULL_REDUCTIONS and len(stmt.value.args) == 1):
                label = SCALAR
            elif rule is not None and rule.elementwise:
                operands = {shape_class(a, classes) for a in stmt.value.args} - {SCALAR}
                label = operands.pop() if len(operands) == 1 and None not in operands else \
                    (SCALAR if not operands else None)
        for target in targets:
            if label is None:
                label, fresh = fresh, fresh + 1
            classes[target] = label
            label = None
    return classes


def shape_class(atom: ir.Atom, classes: dict[str, int]) -> int | None:
    """The shape class of an atom: ``SCALAR`` for numbers and None, ``None`` when unknown."""
    if isinstance(atom, ir.Var):
        return classes.get(atom.name)
    if isinstance(atom, ir.Const) and (atom.value is None or type(atom.value) in (int, float, bool)):
        return SCALAR
    return None


def activity(function: ir.Function, argnums: tuple[int, ...]) -> set[str]:
    """The names whose values depend on the differentiated parameters."""
    active = {function.params[i] for i in argnums}
    for stmt in function.body:
        if isinstance(stmt, ir.Assign) and _is_active(stmt.value, active):
            active.add(stmt.target)
        elif isinstance(stmt, ir.Unpack) and _atom_active(stmt.value, active):
            active.update(stmt.targets)
    return active


def usefulness(function: ir.Function, active: set[str]) -> set[str]:
    """The active names the result depends on."""
    useful = {function.result.name} & active if isinstance(function.result, ir.Var) else set()
    for stmt in reversed(function.body):
        if isinstance(stmt, ir.Assign) and stmt.target in useful:
            useful.update(v.name for v in _inputs(stmt.value) if v.name in active)
        elif isinstance(stmt, ir.Unpack) and useful.intersection(stmt.targets) and stmt.value.name in active:
            useful.add(stmt.value.name)
    return useful


def _is_active(value: ir.Expr, active: set[str]) -> bool:
    if isinstance(value, ir.Attr):
        return False
    if isinstance(value, ir.Call):
        rule = registry.lookup(value.fn.obj)
        if rule is not None and rule.nondiff:
            return False
    return any(v.name in active for v in _inputs(value))


def _atom_active(atom: ir.Atom, active: set[str]) -> bool:
    return isinstance(atom, ir.Var) and atom.name in active


def _inputs(value: ir.Expr) -> list[ir.Var]:
    if isinstance(value, ir.Call):
        atoms = list(value.args) + [a for _, a in value.kwargs]
    elif isinstance(value, ir.Pack):
        atoms = list(value.elts)
    elif isinstance(value, ir.Attr):
        atoms = [value.value]
    else:
        atoms = [value]
    return [a for a in atoms if isinstance(a, ir.Var)]


def is_user_function(fn: Any) -> bool:
    """A Python function ast_ad should differentiate through (no rule registered for it)."""
    return inspect.isfunction(fn) and registry.lookup(fn) is None


class Reverser:
    def __init__(self, function: ir.Function, argnums: tuple[int, ...], shapes: tuple[int, ...], derive: Derive):
        self.function, self.argnums, self.derive = function, argnums, derive
        self.classes = shape_classes(function, shapes)
        self.refs = RefTable()
        self.namer = Namer(used=function.names())
        self.active = activity(function, argnums)
        self.useful = usefulness(function, self.active)
        self.bars: dict[str, str] = {}
        self.structured = {s.value.name for s in function.body if isinstance(s, ir.Unpack)}
        self.structured |= {s.target for s in function.body if isinstance(s, ir.Assign)
                            and isinstance(s.value, ir.Pack)}
        self.calls: dict[int, tuple[Adjoint, str, list[ir.Atom]]] = {}
        self.callees: list[Adjoint] = []
        self.backward: list[gast.stmt] = []

    def run(self) -> Adjoint:
        forward = [self.forward(i, s) for i, s in enumerate(self.function.body)]
        result = self.function.result
        seed = self.namer.fresh(f"{result.name}_bar" if isinstance(result, ir.Var) else "out_bar")
        if isinstance(result, ir.Var) and result.name in self.useful:
            self.bars[result.name] = seed
        line = None
        for i in reversed(range(len(self.function.body))):
            stmt = self.function.body[i]
            if not self.needs_adjoint(stmt):
                continue
            if stmt.line != line:
                line = stmt.line
                self.backward.append(syntax.comment(f"line {line.lineno}: {line.text.strip()}"))
            self.adjoint(i, stmt)
        grads = [self.grad(self.function.params[i]) for i in self.argnums]
        return Adjoint(self.function, self.argnums, forward, self.backward,
                       syntax.atom(result, self.refs), seed, grads, self.refs, self.callees)

    # ---- forward -----------------------------------------------------------------------------------
    def forward(self, i: int, stmt: ir.Stmt) -> gast.stmt:
        if isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Call) and self.needs_adjoint(stmt) \
                and is_user_function(stmt.value.fn.obj):
            args = self.bind_call(stmt)
            active = tuple(p for p, a in enumerate(args) if _atom_active(a, self.active))
            callee = self.derive(stmt.value.fn.obj, active, self.labels(args))
            self.callees.append(callee)
            self.refs.ref(stmt.value.fn)  # recorded so that redefining the callee is noticed
            saved = self.namer.fresh(f"{stmt.target}_saved")
            self.calls[i] = (callee, saved, [args[p] for p in active])
            call = syntax.call(self.refs.marker(CalleeRef(callee, "fwd"), "fwd"),
                               [syntax.atom(a, self.refs) for a in args])
            return syntax.assign([stmt.target, saved], call)
        return syntax.statement(stmt, self.refs)

    def bind_call(self, stmt: ir.Assign) -> list[ir.Atom]:
        """The call's arguments in the callee's parameter order, defaults filled in."""
        call = stmt.value
        try:
            bound = inspect.signature(call.fn.obj).bind(*call.args, **dict(call.kwargs))
        except TypeError as exc:
            raise self.error(stmt, f"the call to {call.fn.hint} does not match its parameters: {exc}") from None
        bound.apply_defaults()
        return [v if isinstance(v, (ir.Var, ir.Const, ir.Ref)) else ir.Ref(v, f"{call.fn.hint}_{k}")
                for k, v in bound.arguments.items()]

    # ---- backward ----------------------------------------------------------------------------------
    def needs_adjoint(self, stmt: ir.Stmt) -> bool:
        if isinstance(stmt, ir.Assign):
            return stmt.target in self.useful
        if isinstance(stmt, ir.Unpack):
            return bool(self.useful.intersection(stmt.targets))
        return False

    def adjoint(self, i: int, stmt: ir.Stmt) -> None:
        if isinstance(stmt, ir.Unpack):
            parts = [syntax.name(self.bars[t]) if t in self.bars else self.zeros(t) for t in stmt.targets]
            self.accumulate(stmt.value.name, syntax.tuple_(parts))
        elif isinstance(stmt.value, ir.Pack):
            g = syntax.name(self.bars[stmt.target])
            for k, elt in enumerate(stmt.value.elts):
                if _atom_active(elt, self.active):
                    item = gast.Subscript(value=g, slice=syntax.const(k), ctx=gast.Load())
                    self.accumulate(elt.name, item)
        elif i in self.calls:
            self.callee_adjoint(stmt, *self.calls[i])
        else:
            self.rule_adjoint(stmt)

    def rule_adjoint(self, stmt: ir.Assign) -> None:
        call = stmt.value
        rule = registry.lookup(call.fn.obj)
        if rule is None:
            raise self.missing(stmt, f"{call.fn.hint} has no gradient rule")
        for key, atom in call.kwargs:
            if _atom_active(atom, self.active):
                raise self.missing(stmt, f"the differentiated value {atom.name} is passed to {call.fn.hint} "
                                         f"as keyword {key}=; pass it positionally")
        for k, atom in enumerate(call.args):
            if _atom_active(atom, self.active):
                vjp = rule.vjp(k)
                if vjp is None:
                    raise self.missing(stmt, f"{call.fn.hint} has no gradient rule for argument {k + 1}")
                contribution = self.contribution(stmt, vjp, k)
                if rule.elementwise and not self.exact(call, k):
                    unbroadcast = self.refs.marker(runtime.unbroadcast, "unbroadcast")
                    contribution = syntax.call(unbroadcast, [contribution, syntax.name(atom.name)])
                self.accumulate(atom.name, contribution)

    def exact(self, call: ir.Call, k: int) -> bool:
        """Whether an elementwise rule's contribution to argument ``k`` already has that argument's shape.

        It does when no other operand can broadcast it up: when all of them are scalars.
        """
        mine = shape_class(call.args[k], self.classes)
        return all(shape_class(a, self.classes) in (SCALAR, mine) and (mine is not None or
                   shape_class(a, self.classes) == SCALAR) for j, a in enumerate(call.args) if j != k)

    def labels(self, args: list[ir.Atom]) -> tuple[int, ...]:
        """Shape labels for a callee's parameters, numbered in order of first appearance."""
        numbering: dict[Any, int] = {}
        labels = []
        for k, a in enumerate(args):
            label = shape_class(a, self.classes)
            if label == SCALAR:
                labels.append(SCALAR)
            else:
                labels.append(numbering.setdefault(label if label is not None else ("unknown", k), len(numbering)))
        return tuple(labels)

    def contribution(self, stmt: ir.Assign, vjp: registry.VJP, k: int) -> gast.expr:
        call = stmt.value
        g, ans = syntax.name(self.bars[stmt.target]), syntax.name(stmt.target)
        args = [syntax.atom(a, self.refs) for a in call.args]
        kwargs = {key: syntax.atom(a, self.refs) for key, a in call.kwargs}
        if not bindable(vjp, len(args), list(kwargs)):
            raise self.error(stmt, f"the call to {call.fn.hint} does not match the arguments of its gradient rule")
        body = inline(vjp, g, ans, args, kwargs, self.refs)
        if body is not None:
            return body
        rule_name = f"{call.fn.hint.rsplit('.', 1)[-1]}_vjp_{k}"
        return syntax.call(self.refs.marker(vjp, rule_name), [g, ans, *args], kwargs)

    def callee_adjoint(self, stmt: ir.Assign, callee: Adjoint, saved: str, args: list[ir.Atom]) -> None:
        names = [a.name for a in args]
        parts = [self.namer.fresh(f"{n}_bar_{stmt.target}") for n in names]
        bwd = self.refs.marker(CalleeRef(callee, "bwd"), "bwd")
        call = syntax.call(bwd, [syntax.name(saved), syntax.name(self.bars[stmt.target])])
        self.backward.append(syntax.assign(parts, call) if parts else gast.Expr(value=call))
        for n, part in zip(names, parts, strict=True):
            self.accumulate(n, syntax.name(part))

    def accumulate(self, var: str, contribution: gast.expr) -> None:
        if var not in self.bars:
            self.bars[var] = self.namer.fresh(f"{var}_bar")
            self.backward.append(syntax.assign(self.bars[var], contribution))
            return
        bar = syntax.name(self.bars[var])
        if var in self.structured:
            total = syntax.call(self.refs.marker(runtime.add_adjoints, "add_adjoints"), [bar, contribution])
        elif isinstance(contribution, gast.UnaryOp) and isinstance(contribution.op, gast.USub):
            total = gast.BinOp(left=bar, op=gast.Sub(), right=contribution.operand)
        else:
            total = syntax.add(bar, contribution)
        self.backward.append(syntax.assign(self.bars[var], total))

    def grad(self, param: str) -> str:
        if param not in self.bars:
            self.bars[param] = self.namer.fresh(f"{param}_bar")
            self.backward.append(syntax.assign(self.bars[param], self.zeros(param)))
        return self.bars[param]

    def zeros(self, var: str) -> gast.expr:
        return syntax.call(self.refs.marker(runtime.zeros_like, "zeros_like"), [syntax.name(var)])

    # ---- errors ------------------------------------------------------------------------------------
    def error(self, stmt: ir.Stmt, message: str) -> LocatedError:
        return LocatedError(message, stmt.line.filename, stmt.line.lineno, stmt.line.text)

    def missing(self, stmt: ir.Stmt, message: str) -> MissingRuleError:
        hint = ("; if it is your own primitive, register a rule: "
                "ast_ad.extend.defvjp(fn, lambda g, ans, x: ...), one lambda per positional argument")
        return MissingRuleError(message + hint, stmt.line.filename, stmt.line.lineno, stmt.line.text)
