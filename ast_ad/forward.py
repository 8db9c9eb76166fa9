"""Stage 4', forward mode: each statement followed by the statement of its tangent.

For ``return np.log(x1) + x1 * x2 - np.sin(x2)`` with both arguments active,
the statements read the forward rules with the program's names put in::

    log_x1 = np.log(x1)
    log_x1_dot = x1_dot / x1
    x1_times_x2 = x1 * x2
    x1_times_x2_dot = x1_dot * x2 + x2_dot * x1
    ...
    return out, out_dot

Only *active* names (those that depend on a differentiated argument) get a
tangent, named after the user's variable (``x1_dot``). Control flow is kept as
it is: forward mode needs no tape. A call to one of the user's functions
becomes a call to that function's own generated ``_jvp``. A tangent is written in place only where the loop's
array is (``y_dot[i] = v_dot``, into a copy the loop makes before it, as it does of ``y``), so tangents may
share memory with each other as the values they belong to do.

Its functions, finished (``jvp_units``), write each temporary that one later line reads into that line, as in reverse
mode: ``y = np.sin(x) * 3.0`` and ``y_dot = x_dot * np.cos(x) * 3.0``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeGuard

import gast
import numpy as np

from ast_ad import ir, registry, runtime, syntax
from ast_ad.analysis import (
    CONTAINER,
    SCALAR,
    at_line,
    bind_call,
    call_labels,
    forward_activity,
    in_place_writes,
    inputs_of,
    is_user_function,
    packed_result,
    reads_of,
    shape_class,
    shape_classes,
    structured_names,
    unfollowed,
    usefulness,
)
from ast_ad.calls import CalleeRef, callees_in_order
from ast_ad.errors import LocatedError, MissingRuleError, UnsupportedSyntaxError
from ast_ad.fold import Inliner, number_calls, pure_calls, shared_factor
from ast_ad.inline import bindable, inline
from ast_ad.kinds import kinds_of
from ast_ad.naming import Namer
from ast_ad.records import field, record
from ast_ad.release import released
from ast_ad.syntax import RefTable


@record(frozen=False, eq=False)
class Tangent:
    """A function's forward-mode code: its statements, interleaved with their tangents."""

    function: ir.Function
    argnums: tuple[int, ...]
    params: list[str]
    body: list[gast.stmt]
    refs: RefTable
    callees: list[Tangent] = field(default_factory=list)
    numbers: frozenset[str] = frozenset()  # names of the function that certainly hold numbers (``kinds``)
    dots: dict[str, str] = field(default_factory=dict)  # each active name's tangent's name (``x``: ``x_dot``)
    arrays: frozenset[str] = frozenset()  # names that may hold arrays: released after their last read

    def tree(self, name: str) -> gast.FunctionDef:
        return syntax.function(name, self.params, self.body)


Derive = Callable[[Any, tuple[int, ...], tuple[int, ...]], Tangent]


def jvp_units(top: Tangent) -> list[tuple[Tangent, str, gast.FunctionDef]]:
    """Every callee's ``_jvp``, then the function's own, finished, for ``emit`` to name and print."""
    return [(t, "jvp", _jvp_tree(t)) for t in callees_in_order(top) if t is not top] + [(top, "jvp", _jvp_tree(top))]


def _jvp_tree(t: Tangent) -> gast.FunctionDef:
    """The forward-mode function of ``t``, each temporary that one later statement reads written into it
    (``fold.Inliner``), and each tangent's shared factor taken out of its sums (``fold.shared_factor``): the
    tangents of the user's own variables keep their names, as the variables do. The arrays are let go after their
    last reads (``release.released``), which only the folded code says."""
    users = t.function.users
    keep = users | {t.dots[name] for name in users if name in t.dots}
    inliner = Inliner(pure_calls(t.refs), keep, t.numbers)
    tree = t.tree("jvp")
    inliner.count(tree.body)
    *body, returned = shared_factor(inliner.block(tree.body), frozenset(t.dots.values()), number_calls(t.refs))
    kept = syntax.name_ids(returned, loads=True) | set(t.params)
    tree.body = released(body, frozenset(), t.arrays - inliner.folded, kept, t.refs) + [returned]
    return tree


def forward(function: ir.Function, argnums: tuple[int, ...], shapes: tuple[int, ...], derive: Derive,
            shell: Tangent | None = None, needed: tuple[bool, ...] | None = None) -> Tangent:
    """The forward-mode code of ``function``: tangents for the parameters at ``argnums``, in that order.

    ``shapes`` labels the parameters as for ``reverse``; ``shell``, if given, is filled in and
    returned (so that a recursive call can refer to it before it is finished). ``needed`` marks the
    parts of a returned tuple whose tangents the caller reads (``grad`` of a gradient reads the
    gradient's, not the value's): the others are zeros, and nothing is computed for them.
    """
    return Forwarder(function, argnums, shapes, derive, needed).run(shell)


def by_source(fn: Any) -> bool:
    """A helper of generated code with no rule (``runtime.cholesky_jvp``): forward mode differentiates it by
    its source, as it does the user's own functions, where that source is in ast_ad's language."""
    return inspect.isfunction(fn) and fn.__module__ == "ast_ad.runtime" and registry.lookup(fn) is None


class Forwarder:
    def __init__(self, function: ir.Function, argnums: tuple[int, ...], shapes: tuple[int, ...], derive: Derive,
                 needed: tuple[bool, ...] | None = None):
        self.function, self.argnums, self.derive = function, argnums, derive
        self.refs = RefTable()
        self.namer = Namer(used=function.names())
        active = forward_activity(function, argnums)
        pack = packed_result(function) if needed is not None else None
        self.parts = pack.elts if pack is not None and needed is not None and len(pack.elts) == len(needed) \
            else None
        self.needed = needed or ()
        seeds = {a.name for a, n in zip(self.parts, self.needed, strict=True) if n and isinstance(a, ir.Var)} \
            if self.parts is not None else None
        self.active = usefulness(function, active, seeds) | {function.params[k] for k in argnums}
        self.kinds = kinds_of(function, shapes)
        self.classes = shape_classes(function, shapes, self.kinds)
        self.structured = structured_names(function, shapes)
        self.dots: dict[str, str] = {}
        self.callees: list[Tangent] = []
        self.read: set[str] = set()  # the names the statements of the block so far have read (``block``)
        # the arrays of floats a loop changes only item by item (``analysis.in_place_writes``): copied once before
        # the loop, with their tangents, and written in place (``y[i] = v``, ``y_dot[i] = v_dot``), O(what
        # changes) a step, not a copy of the array
        found = in_place_writes(function, self.active, self.structured, self.classes)
        self.loop_copies = {loop: kept for loop, names in found.loops.items()
                            if (kept := tuple(n for n in names if self.kinds.float_array(n)))}
        copied = {n for names in self.loop_copies.values() for n in names}
        self.writes_in_place = {stmt: name for stmt, name in found.writes.items() if name in copied}

    def run(self, shell: Tangent | None) -> Tangent:
        params = list(self.function.params) + [self.dot(self.function.params[k]) for k in self.argnums]
        given = {self.function.params[k] for k in self.argnums}
        # a parameter without a tangent that the function rebinds to a differentiated value starts at zero
        body = [syntax.assign(self.dot(p), self.zero_of(ir.Var(p))) for p in self.function.params
                if p in self.active and p not in given]
        body += self.block(self.function.body)
        result = self.function.result
        out = syntax.atom(result, self.refs)
        if self.parts is not None:  # only the needed parts of the returned tuple get their tangents
            dots = syntax.tuple_([self.tangent_of(a) if n else self.zero_of(a)
                                  for a, n in zip(self.parts, self.needed, strict=True)])
        else:
            dots = self.tangent_of(result)
        returned = syntax.ret(syntax.tuple_([out, dots]))
        tangent = shell or Tangent(self.function, self.argnums, [], [], self.refs)
        tangent.params, tangent.body, tangent.refs, tangent.callees = params, body + [returned], self.refs, \
            self.callees
        tangent.numbers, tangent.dots, tangent.arrays = self.kinds.numbers(), dict(self.dots), self.arrays()
        return tangent

    def arrays(self) -> frozenset[str]:
        """The names (values and tangents) that may hold arrays: ``jvp_units`` deletes each after its last read, as
        reverse mode's (``release.released``), so that a long chain of big arrays holds only what is still to be
        read."""
        arrays = {n for n in self.function.names() if n not in self.structured and self.kinds.may_be_array(n)
                  and shape_class(ir.Var(n), self.classes) not in (SCALAR, CONTAINER)}
        return frozenset(arrays | {self.dots[n] for n in arrays if n in self.dots})

    # ---- names ------------------------------------------------------------------------------------------
    def dot(self, name: str) -> str:
        if name not in self.dots:
            self.dots[name] = self.namer.fresh(f"{name}_dot")
        return self.dots[name]

    def is_active(self, atom: ir.Expr) -> TypeGuard[ir.Var]:
        return isinstance(atom, ir.Var) and atom.name in self.active

    def tangent_of(self, atom: ir.Atom) -> gast.expr:
        """The tangent of an atom: its ``_dot`` name, or a zero of its structure if it is not active."""
        if self.is_active(atom):
            return syntax.name(self.dot(atom.name))
        return self.zero_of(atom)

    def zero_of(self, atom: ir.Atom) -> gast.expr:
        return syntax.call(self.refs.marker(runtime.zeros_like, "zeros_like"), [syntax.atom(atom, self.refs)])

    # ---- statements -------------------------------------------------------------------------------------
    def block(self, body: tuple[ir.Stmt, ...]) -> list[gast.stmt]:
        out: list[gast.stmt] = []
        line = None
        outer, self.read = self.read, set()
        for stmt in body:
            if stmt.line != line and not isinstance(stmt, ir.Break):
                line = stmt.line
                out.append(syntax.comment(f"line {line.lineno}: {line.text.strip()}"))
            if id(stmt) in self.loop_copies:  # the loop's own copies, of the arrays and of their tangents
                detached, owned = (self.refs.marker(runtime.detached, "detached"),
                                   self.refs.marker(runtime.owned_adjoint, "owned_adjoint"))
                for name in self.loop_copies[id(stmt)]:
                    out += [syntax.assign(name, syntax.call(detached, [syntax.name(name)])),
                            syntax.assign(self.dot(name), syntax.call(owned, [syntax.name(self.dot(name)),
                                                                              syntax.name(name)]))]
            out += self.statement(stmt)
            self.read.update(reads_of(stmt))
        self.read = outer
        return out

    def statement(self, stmt: ir.Stmt) -> list[gast.stmt]:
        if isinstance(stmt, ir.Assign):
            return self.assign(stmt)
        if isinstance(stmt, ir.Unpack):
            return self.unpack(stmt)
        if isinstance(stmt, ir.Append):
            return self.append(stmt)
        if isinstance(stmt, ir.Pop):
            return self.pop(stmt)
        if isinstance(stmt, ir.If):
            return [gast.If(test=syntax.atom(stmt.test, self.refs), body=self.block(stmt.body) or [gast.Pass()],
                            orelse=self.block(stmt.orelse))]
        if isinstance(stmt, ir.For):
            return [gast.For(target=syntax.store(stmt.target), iter=syntax.atom(stmt.iter, self.refs),
                             body=self.block(stmt.body) or [gast.Pass()], orelse=[], type_comment=None)]
        if isinstance(stmt, ir.While):
            return [gast.While(test=syntax.raw(stmt.test, self.refs), body=self.block(stmt.body) or [gast.Pass()],
                               orelse=[])]
        return [syntax.statement(stmt, self.refs)]  # break, and effects (print, assert): no tangent

    def unpack(self, stmt: ir.Unpack) -> list[gast.stmt]:
        primal = syntax.statement(stmt, self.refs)
        targets = [t for t in stmt.targets if t in self.active]
        if not targets:
            return [primal]
        if self.is_active(stmt.value):
            dots = [self.dot(t) for t in stmt.targets]
            return [primal, syntax.assign(dots, syntax.name(self.dot(stmt.value.name)))]
        return [primal] + [syntax.assign(self.dot(t), self.zero_of(ir.Var(t))) for t in targets]

    def append(self, stmt: ir.Append) -> list[gast.stmt]:
        primal = syntax.statement(stmt, self.refs)
        if stmt.target not in self.active:
            return [primal]
        method = gast.Attribute(value=syntax.name(self.dot(stmt.target)), attr="append", ctx=gast.Load())
        return [primal, gast.Expr(value=syntax.call(method, [self.tangent_of(stmt.value)]))]

    def pop(self, stmt: ir.Pop) -> list[gast.stmt]:
        primal = syntax.statement(stmt, self.refs)
        if stmt.source not in self.active:
            return [primal]
        return [primal, syntax.statement(ir.Pop(self.dot(stmt.target) if stmt.target in self.active else None,
                                                self.dot(stmt.source), stmt.line), self.refs)]

    def assign(self, stmt: ir.Assign) -> list[gast.stmt]:
        """The primal statement and its tangent's; the old value kept where the tangent reads it."""
        primal = syntax.statement(stmt, self.refs)
        target = stmt.target
        if target not in self.active:
            return [primal]
        value = stmt.value
        if id(stmt) in self.writes_in_place:  # ``y[i] = v`` in place, into the loop's copies
            call = ir.call_of(stmt)
            index = syntax.index(call.args[1], self.refs)
            return [gast.Assign(targets=[gast.Subscript(value=syntax.name(name), slice=index, ctx=gast.Store())],
                                value=item, type_comment=None)
                    for name, item in ((target, syntax.atom(call.args[2], self.refs)),
                                       (self.dot(target), self.tangent_of(call.args[2])))]
        if isinstance(value, ir.Call) and (is_user_function(value.fn.obj) or by_source(value.fn.obj)) and \
                any(self.is_active(a) for a in value.args + tuple(a for _, a in value.kwargs)):
            return self.call_user(stmt)
        reads_itself = target in {v.name for v in inputs_of(value)}
        ans = self.namer.fresh(f"{target}_new") if reads_itself else target
        tangent = self.tangent(stmt, ans)
        if tangent is None:
            if isinstance(value, ir.Const) and value.value == [] and type(value.value) is list:
                # a new empty list (a tape, say) has a new empty list of tangents: the form reverse mode reads as
                # a list private to the function (``Reverser.private_list``), so it can differentiate this again
                return [primal, syntax.assign(self.dot(target), gast.List(elts=[], ctx=gast.Load()))]
            return [primal, syntax.assign(self.dot(target), self.zero_of(ir.Var(target)))]
        if not reads_itself:
            if target in self.read and not any(isinstance(n, gast.Name) and n.id == ans
                                               for n in syntax.walk(tangent)):
                # bound again where its block read the old value (``x = x * 0.99 + math.sin(x) * 0.1``, lowered):
                # the tangent first, so that what the tangents before it read of the old value (``x`` in
                # ``x_dot * math.cos(x)``) can be written into it where they are read (``jvp_units``' folding)
                return [syntax.assign(self.dot(target), tangent), primal]
            return [primal, syntax.assign(self.dot(target), tangent)]
        if not any(isinstance(n, gast.Name) and n.id == ans for n in syntax.walk(tangent)):
            return [syntax.assign(self.dot(target), tangent), primal]  # the tangent reads the old value first
        new = syntax.assign(ans, syntax.expr(value, self.refs))
        return [new, syntax.assign(self.dot(target), tangent), syntax.assign(target, syntax.name(ans))]

    def tangent(self, stmt: ir.Assign, ans: str) -> gast.expr | None:
        """The tangent of the statement's value, or ``None`` where it is zero."""
        value = stmt.value
        if isinstance(value, (ir.Var, ir.Const, ir.Ref)):
            return syntax.name(self.dot(value.name)) if self.is_active(value) else None
        if isinstance(value, ir.Pack):
            return self.pack(value)
        if isinstance(value, ir.Call):
            return self.rule_tangent(stmt, ans)
        return None  # attributes (shape, dtype) and raw tests carry no tangent

    def pack(self, value: ir.Pack) -> gast.expr:
        elts = [self.tangent_of(a) for a in value.elts]
        if value.kind == "dict":
            return gast.Dict(keys=[syntax.const(k) for k in value.keys], values=elts)
        return gast.List(elts=elts, ctx=gast.Load()) if value.kind == "list" else syntax.tuple_(elts)

    def rule_tangent(self, stmt: ir.Assign, ans: str) -> gast.expr | None:
        call = ir.call_of(stmt)
        if not any(self.is_active(a) for a in call.args + tuple(a for _, a in call.kwargs)):
            return None  # computed from constants (into a name that carries a tangent elsewhere): zero
        rule = registry.lookup(call.fn.obj)
        helper = getattr(call.fn.obj, "func", call.fn.obj)  # a gradient's own rules are partials of ast_ad's
        if rule is None and (getattr(helper, "__module__", None) or "").startswith("ast_ad."):
            raise at_line(MissingRuleError, stmt, f"{call.fn.hint}, a helper of ast_ad's gradient code, has no "
                          "forward-mode rule yet, so this derivative of a derivative is not supported")
        if rule is None:
            raise self.missing(stmt, f"{call.fn.hint} has no gradient rule" + unfollowed(call.fn.obj))
        if rule.nondiff:
            return None
        for key, atom in call.kwargs:
            if self.is_active(atom):
                raise self.missing(stmt, f"the differentiated value {atom.name} is passed to {call.fn.hint} as "
                                         f"keyword {key}=, which has no rule: compute that part outside the call, "
                                         "or pass a constant")
        terms: list[gast.expr] = []
        exact = True
        for k, atom in enumerate(call.args):
            if not self.is_active(atom):
                continue
            jvp = rule.jvp(k)
            if jvp is None:
                raise self.missing(stmt, f"{call.fn.hint} has no forward-mode rule for argument {k + 1}")
            if jvp is registry.zero:
                continue
            terms.append(self.term(stmt, rule, jvp, k, ans))
            exact = exact and (not rule.elementwise or self.exact(call, k, stmt.target))
        if not terms:
            return None
        total = terms[0]
        container = stmt.target in self.structured or call.fn.obj is runtime.add_adjoints or (
            self.kinds.rank(stmt.target) is None and any(syntax.may_give_a_container(t, self.refs) for t in terms))
        for term in terms[1:]:
            if container:  # element by element: ``+`` would join two lists
                total = syntax.call(self.refs.marker(runtime.add_adjoints, "add_adjoints"), [total, term])
            else:
                total = syntax.plus(total, term)
        if not exact and not registry.returns_sequence(call.fn.obj):
            total = syntax.call(self.refs.marker(runtime.fit, "fit"), [total, syntax.name(ans)])
        return total

    def term(self, stmt: ir.Assign, rule: registry.Rule, jvp: Any, k: int, ans: str) -> gast.expr:
        """The tangent the statement's value gets from its argument ``k``."""
        call = ir.call_of(stmt)
        argument = call.args[k]
        assert isinstance(argument, ir.Var)  # an active argument
        u = ir.Var(self.dot(argument.name))
        if jvp is registry.LINEAR:
            return syntax.expr(ir.Call(call.fn, call.args[:k] + (u,) + call.args[k + 1:], call.kwargs), self.refs)
        args = [syntax.atom(a, self.refs) for a in call.args]
        kwargs = {key: syntax.atom(a, self.refs) for key, a in call.kwargs}
        if jvp is registry.REDUCTION:
            return self.reduction(stmt, rule, k, u, ans, args, kwargs)
        if not bindable(jvp, len(args), list(kwargs)):
            raise self.error(stmt, f"the call to {call.fn.hint} does not match the arguments of its forward rule")
        body = inline(jvp, syntax.name(u.name), syntax.name(ans), args, kwargs, self.refs)
        if body is not None:
            return body
        rule_name = f"{call.fn.hint.rsplit('.', 1)[-1]}_jvp"
        return syntax.call(self.refs.marker(jvp, rule_name), [syntax.name(u.name), syntax.name(ans), *args], kwargs)

    def reduction(self, stmt: ir.Assign, rule: registry.Rule, k: int, u: ir.Var, ans: str,
                  args: list[gast.expr], kwargs: dict[str, gast.expr]) -> gast.expr:
        """``np.sum(u * D, axis)`` for a reduction, ``D`` its reverse rule applied to ones."""
        call = ir.call_of(stmt)
        vjp = rule.vjp(k)
        if vjp is None or not bindable(vjp, len(args), list(kwargs)):
            raise self.error(stmt, f"the call to {call.fn.hint} does not match the arguments of its gradient rule")
        ones = syntax.call(self.refs.marker(np.ones_like, "np.ones_like"), [syntax.name(ans)])
        slope = inline(vjp, ones, syntax.name(ans), args, kwargs, self.refs)
        if slope is None:
            rule_name = f"{call.fn.hint.rsplit('.', 1)[-1]}_vjp"
            slope = syntax.call(self.refs.marker(vjp, rule_name), [ones, syntax.name(ans), *args], kwargs)
        axis, keepdims = registry.reduced_over(rule, k, args, kwargs)
        keywords = {name: value if isinstance(value, gast.AST) else syntax.const(value)
                    for name, value in (("axis", axis), ("keepdims", keepdims))}
        product = gast.BinOp(left=syntax.name(u.name), op=gast.Mult(), right=slope)
        return syntax.call(self.refs.marker(np.sum, "np.sum"), [product], keywords)

    def exact(self, call: ir.Call, k: int, target: str) -> bool:
        """Whether an elementwise rule's tangent from argument ``k`` already has the result's shape."""
        mine, result = shape_class(call.args[k], self.classes), shape_class(ir.Var(target), self.classes)
        others = [shape_class(a, self.classes) for j, a in enumerate(call.args) if j != k]
        return result == SCALAR or (mine is not None and mine == result) or all(c == SCALAR for c in others)

    def call_user(self, stmt: ir.Assign) -> list[gast.stmt]:
        """``y, y_dot = helper_jvp(args..., tangents of the active ones)``."""
        args = bind_call(stmt, self.error)
        active = tuple(p for p, a in enumerate(args) if self.is_active(a))
        call = ir.call_of(stmt)
        labels = call_labels(args, self.classes, self.structured, self.kinds, stmt)
        try:
            callee = self.derive(call.fn.obj, active, labels)
        except (LocatedError, UnsupportedSyntaxError) as exc:
            if not by_source(call.fn.obj):
                raise
            raise at_line(MissingRuleError, stmt, f"{call.fn.hint}, a helper of ast_ad's gradient code, has no "
                          "forward-mode rule yet, and its source is outside the language ast_ad differentiates "
                          f"({exc.args[0] if exc.args else exc}), so this derivative of a derivative is not "
                          "supported") from None
        self.callees.append(callee)
        self.refs.ref(call.fn)  # recorded so that redefining the callee is noticed
        jvp = self.refs.marker(CalleeRef(callee, "jvp"), "jvp")
        operands = [syntax.atom(a, self.refs) for a in args]
        operands += [syntax.name(self.dot(a.name)) for a in args if self.is_active(a)]
        return [syntax.assign([stmt.target, self.dot(stmt.target)], syntax.call(jvp, operands))]

    # ---- errors -------------------------------------------------------------------------------------------
    def error(self, stmt: ir.Stmt, message: str) -> LocatedError:
        return at_line(LocatedError, stmt, message)

    def missing(self, stmt: ir.Stmt, message: str) -> MissingRuleError:
        return at_line(MissingRuleError, stmt, message + "; if it is your own primitive, register a forward rule: "
                       "ast_ad.extend.defjvp(fn, lambda u, ans, x: ...), one lambda per positional argument")
