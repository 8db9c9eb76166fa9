"""Stage 4', forward mode: IR in, IR out. Each statement, followed by the statements of its tangent.

For ``return np.log(x1) + x1 * x2 - np.sin(x2)`` with both arguments active,
the statements read the forward rules with the program's names put in, printed::

    log_x1 = np.log(x1)
    log_x1_dot = x1_dot / x1
    x1_times_x2 = x1 * x2
    x1_times_x2_dot = x1_dot * x2 + x2_dot * x1
    ...
    return out, out_dot

Only *active* names (those that depend on a differentiated argument) get a tangent, named after the
user's variable (``x1_dot``). Control flow is kept as it is: forward mode needs no tape. A call to
one of the user's functions becomes a call to that function's own generated ``_jvp``. A tangent is
written in place only where the loop's array is (``y_dot[i] = v_dot``, into a copy the loop makes
before it, as it does of ``y``), so tangents may share memory with each other as the values they
belong to do.

Each rule's body is lowered to IR once and put in with the statement's atoms (``templates``), so
what ``Forwarder`` makes is an ``ir.Function`` in the grammar of ``ir`` (``Tangent.code``): forward
mode can read it again as it is. Its functions, finished (``jvp_units``), are printed from that IR
(``syntax.function_of``), each temporary that one later line reads written into that line, as in
reverse mode: ``y = np.sin(x) * 3.0`` and ``y_dot = x_dot * np.cos(x) * 3.0``.
"""

from __future__ import annotations

import inspect
import operator
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeGuard

import gast
import numpy as np

from ast_ad import runtime
from ast_ad.analysis.activity import (
    CONTAINERS,
    SCALAR,
    at_line,
    bind_call,
    call_labels,
    callee_results,
    classes_of,
    forward_activity,
    in_place_writes,
    inputs_of,
    is_library,
    is_user_function,
    library_call,
    makes_fresh_array,
    missing_rule,
    packed_result,
    shape_class,
    straight_writes,
    structured_names,
    unfollowed,
    usefulness,
)
from ast_ad.analysis.complexness import (
    check_complex,
    complex_call,
    complex_labels,
    complex_names,
    no_complex_rule,
    rule_for,
)
from ast_ad.analysis.kinds import SET, kinds_of
from ast_ad.core import registry
from ast_ad.core.records import field, record, replace
from ast_ad.errors import LocatedError, MissingRuleError, UnsupportedSyntaxError
from ast_ad.ir import nodes as ir
from ast_ad.ir import syntax
from ast_ad.ir.naming import Namer
from ast_ad.ir.pieces import Made, added, may_give_a_container, renamed
from ast_ad.ir.syntax import RefTable
from ast_ad.modes import templates
from ast_ad.modes.calls import callees_in_order
from ast_ad.optimize.common import shared_numbers
from ast_ad.optimize.dead import dead_code_dropped
from ast_ad.optimize.fold import Inliner, number_calls, pure_calls, shared_factor
from ast_ad.optimize.guards import numbers_passed, without_false_guards
from ast_ad.optimize.hoist import hoisted
from ast_ad.optimize.keyed import keyed_loops
from ast_ad.optimize.packs import items_read_through
from ast_ad.optimize.release import released

# what a missing rule's error tells the user to write
REGISTER = (
    "register a forward rule: ast_ad.extend.defjvp(fn, lambda u, ans, x: ...), one lambda "
    "per positional argument"
)


@record(frozen=False, eq=False)
class Tangent:
    """A function's forward-mode code: its statements, interleaved with their tangents, as IR
    (``code``)."""

    function: ir.Function
    argnums: tuple[int, ...]
    # the forward-mode function: the parameters, then the given tangents
    code: ir.Function | None = None
    # the outside objects its printed tree reads (``jvp_units``)
    refs: RefTable = field(default_factory=RefTable)
    callees: list[Tangent] = field(default_factory=list)
    # names of the function that certainly hold numbers (``kinds``)
    numbers: frozenset[str] = frozenset()
    # each active name's tangent's name (``x``: ``x_dot``)
    dots: dict[str, str] = field(default_factory=dict)
    # names that may hold arrays: released after their last read
    arrays: frozenset[str] = frozenset()
    # the user's functions whose ``_jvp`` it calls: the code reads them again
    watched: tuple[ir.Ref, ...] = ()
    # forward mode of ``code`` itself, by arguments and labels
    again: dict[Any, Tangent] = field(default_factory=dict)
    # the pieces of tangents' expressions, printed whole (``syntax.function_of``)
    parts: frozenset[str] = frozenset()
    # the labels of the parameters it was made for (``api.arguments.shape_labels``)
    labels: tuple[int, ...] = ()
    # the arrays it writes in place at its own level that only the write and the names it copies
    # them into reach (``straight_write``): ``optimize.dead`` leaves out writes nothing reads
    owned: frozenset[str] = frozenset()


Derive = Callable[[Any, tuple[int, ...], tuple[int, ...]], Tangent]


def jvp_units(top: Tangent) -> list[tuple[Tangent, str, gast.FunctionDef]]:
    """Every callee's ``_jvp``, then the function's own, finished, for ``emit`` to name and
    print."""
    return [(t, "jvp", _jvp_tree(t)) for t in callees_in_order(top) if t is not top] + [
        (top, "jvp", _jvp_tree(top))
    ]


def _jvp_tree(t: Tangent) -> gast.FunctionDef:
    """The forward-mode function of ``t`` as syntax (``syntax.function_of``), each temporary that
    one later statement reads written into it (``fold.Inliner``), and each tangent's shared factor
    taken out of its sums (``fold.shared_factor``): the tangents of the user's own variables keep
    their names, as the variables do. The arrays are let go after their last reads
    (``release.released``), which only the folded code says."""
    assert t.code is not None
    users = t.function.users
    keep = users | {t.dots[name] for name in users if name in t.dots}
    t.refs = RefTable()
    for ref in t.watched:
        t.refs.ref(ref)
    tree = syntax.function_of(t.code, "jvp", t.refs, t.parts)
    inliner = Inliner(pure_calls(t.refs), keep, t.numbers)
    inliner.count(tree.body)
    *body, returned = shared_factor(
        inliner.block(tree.body), frozenset(t.dots.values()), number_calls(t.refs)
    )
    kept = syntax.name_ids(returned, loads=True) | set(t.code.params)
    tree.body = released(body, frozenset(), t.arrays - inliner.folded, kept, t.refs) + [returned]
    return tree


def tangent_only(t: Tangent) -> Tangent:
    """``t``'s forward-mode code returning its result's tangent alone, without what only the
    result's value needed (``optimize.dead``): a Hessian-vector product reads the tangent of a
    gradient, not the gradient. A number's zero tangent is the float zero (``zero_tangent`` of any
    number gives it), so a value read only for its zero tangent is not computed either. The facts
    the pass relies on are its own docstring's; its callers run it where the code's value was
    computed at the same arguments (``api.directional``: a gradient's reverse rule, at the point
    where the gradient ran)."""
    code = t.code
    assert code is not None and isinstance(code.result, ir.Var)
    *body, returned = code.body
    assert isinstance(returned, ir.Assign) and returned.target == code.result.name \
        and isinstance(returned.value, ir.Pack) and len(returned.value.elts) == 2
    dots = returned.value.elts[1]
    body = [
        ir.Assign(stmt.target, ir.Const(0.0), stmt.line)
        if type(stmt) is ir.Assign and type(stmt.value) is ir.Call
        and stmt.value.fn.obj is runtime.zero_tangent and len(stmt.value.args) == 1
        and type(arg := stmt.value.args[0]) is ir.Var and arg.name in t.numbers
        else stmt
        for stmt in body
    ]
    live = {dots.name} if isinstance(dots, ir.Var) else set()
    kept = dead_code_dropped(tuple(body), live, t.owned)
    return replace(t, code=replace(code, body=kept, result=dots), refs=RefTable(), again={})


def forward(
    function: ir.Function,
    argnums: tuple[int, ...],
    shapes: tuple[int, ...],
    derive: Derive,
    shell: Tangent | None = None,
    needed: tuple[bool, ...] | None = None,
) -> Tangent:
    """The forward-mode code of ``function``: tangents for the parameters at ``argnums``, in that
    order.

    ``shapes`` labels the parameters as for ``reverse``; ``shell``, if given, is filled in and
    returned (so that a recursive call can refer to it before it is finished). ``needed`` marks the
    parts of a returned tuple whose tangents the caller reads (``grad`` of a gradient reads the
    gradient's, not the value's): the others are zeros, and nothing is computed for them.
    """
    # (loop-invariant arithmetic computed once, before its loop: ``optimize.hoist``; a number
    # computed again from the same operands, once: ``optimize.common``)
    function = items_read_through(without_false_guards(function, shapes))
    function = keyed_loops(numbers_passed(function, shapes), shapes)
    function = shared_numbers(hoisted(ir.functional(function), shapes), shapes)
    made = Forwarder(function, argnums, shapes, derive, needed).run(shell)
    made.labels = shapes
    return made


def by_source(fn: Any) -> bool:
    """A helper of generated code with no rule (``runtime.cholesky_jvp``): forward mode
    differentiates it by its source, as it does the user's own functions, where that source is in
    ast_ad's language."""
    return inspect.isfunction(fn) and registry.is_helper(fn) and registry.lookup(fn) is None


class Forwarder:
    """IR in, IR out: each statement of ``function``, then the statements of its tangent
    (``run``)."""

    def __init__(
        self,
        function: ir.Function,
        argnums: tuple[int, ...],
        shapes: tuple[int, ...],
        derive: Derive,
        needed: tuple[bool, ...] | None = None,
    ):
        self.function, self.argnums, self.derive = function, argnums, derive
        self.namer = Namer(used=function.names())
        active = forward_activity(function, argnums)
        pack = packed_result(function) if needed is not None else None
        self.returned = (
            pack.elts
            if pack is not None and needed is not None and len(pack.elts) == len(needed)
            else None
        )
        self.needed = needed or ()
        seeds = (
            {
                a.name
                for a, n in zip(self.returned, self.needed, strict=True)
                if n and isinstance(a, ir.Var)
            }
            if self.returned is not None
            else None
        )
        self.active = usefulness(function, active, seeds) | {function.params[k] for k in argnums}
        # (a callee's result known from its own facts, where the driver gives callees' IR)
        callees_ir = getattr(derive, "normalized", None)
        callees = callee_results(callees_ir) if callees_ir is not None else None
        self.kinds = kinds_of(function, shapes, callees)
        self.complexes = complex_names(function, shapes, self.kinds)
        check_complex(function, self.complexes, self.active)
        self.classes = classes_of(function, shapes, self.kinds, callees)
        self.structured = structured_names(function, shapes)
        self.dots: dict[str, str] = {}
        self.callees: list[Tangent] = []
        self.watched: list[ir.Ref] = []  # the user's functions it calls the ``_jvp`` of
        # the names of the pieces of tangents' expressions (``pieces``)
        self.parts: set[str] = set()
        self.line = ir.NOWHERE  # the line of the statement whose tangent is being made
        # the names the statements of the block so far have read (``block``)
        self.read: set[str] = set()
        # the arrays of floats a loop changes only item by item (``analysis.in_place_writes``):
        # copied once before the loop, with their tangents, and written in place (``y[i] = v``,
        # ``y_dot[i] = v_dot``), O(what changes) a step, not a copy of the array
        found = in_place_writes(function, self.active, self.structured, self.classes)
        self.loop_copies = {loop: kept for loop, names in found.loops.items()
                            if (kept := tuple(n for n in names if self.kinds.float_array(n)))}
        copied = {n for names in self.loop_copies.values() for n in names}
        self.writes_in_place = {stmt: name for stmt, name in found.writes.items() if name in copied}
        # the item writes at the function's own level into an array nothing else reaches
        # (``analysis.straight_writes``): made in place, and their tangents too where the old
        # tangent is an array this code made (``fresh_dots``: bound to a new ``assign_item``'s)
        self.straight = straight_writes(function, self.kinds)
        self.fresh_dots: set[str] = set()
        self.owned: set[str] = set()  # the arrays those writes change (``Tangent.owned``)

    def run(self, shell: Tangent | None) -> Tangent:
        params = self.function.params + tuple(
            self.dot(self.function.params[k]) for k in self.argnums
        )
        given = {self.function.params[k] for k in self.argnums}
        # a parameter without a tangent that the function rebinds to a differentiated value starts
        # at zero
        body: list[ir.Stmt] = []
        for p in self.function.params:
            if p in self.active and p not in given:
                body += self.bound(self.zero_of(ir.Var(p)), self.dot(p))
        body += self.block(self.function.body)
        result = self.function.result
        self.line = self.function.result_line
        # only the needed parts of the returned tuple get their tangents
        if self.returned is not None:
            made = [self.tangent_of(a) if n else self.zero_of(a)
                    for a, n in zip(self.returned, self.needed, strict=True)]
            for stmts, _ in made:
                body += self.pieces(stmts)
            dots: ir.Atom = self.emit(body, ir.Pack(tuple(a for _, a in made)), "dots")
        else:
            stmts, dots = self.tangent_of(result)
            body += self.pieces(stmts)
        returned = self.emit(body, ir.Pack((result, dots)), "returned")
        bound = Counter(params)
        for stmt in ir.walk(tuple(body)):
            bound.update(ir.defined(stmt))
        code = ir.Function(
            self.function.name,
            params,
            tuple(body),
            returned,
            self.function.result_line,
            self.function.fn,
            frozenset(n for n, count in bound.items() if count > 1),
            self.function.users,
        )
        tangent = shell or Tangent(self.function, self.argnums)
        tangent.code, tangent.callees, tangent.watched = code, self.callees, tuple(self.watched)
        tangent.parts, tangent.owned = frozenset(self.parts), frozenset(self.owned)
        tangent.numbers, tangent.dots, tangent.arrays = (
            self.kinds.numbers(),
            dict(self.dots),
            self.arrays(),
        )
        return tangent

    def arrays(self) -> frozenset[str]:
        """The names (values and tangents) that may hold arrays: ``jvp_units`` deletes each after
        its last read, as reverse mode's (``release.released``), so that a long chain of big arrays
        holds only what is still to be read."""
        arrays = {
            n
            for n in self.function.names()
            if n not in self.structured
            and self.kinds.may_be_array(n)
            and shape_class(ir.Var(n), self.classes) not in (SCALAR, *CONTAINERS, SET)
        }
        return frozenset(arrays | {self.dots[n] for n in arrays if n in self.dots})

    # ---- names and statements made ---------------------------------------------------------------
    def dot(self, name: str) -> str:
        if name not in self.dots:
            self.dots[name] = self.namer.fresh(f"{name}_dot")
        return self.dots[name]

    def emit(self, out: list[ir.Stmt], value: ir.Expr, hint: str) -> ir.Var:
        """``hint = value`` appended to ``out`` (a fresh name from ``hint``); its name."""
        name = self.namer.fresh(hint)
        out.append(ir.Assign(name, value, self.line))
        return ir.Var(name)

    def bound(self, made: Made, name: str) -> list[ir.Stmt]:
        """The statements of ``made`` with their value bound to ``name``: the last statement's own
        name where it binds the value and nothing else reads it there, else a copy."""
        stmts, atom = made
        last = stmts[-1] if stmts else None
        if isinstance(last, ir.Assign) and isinstance(atom, ir.Var) and last.target == atom.name \
                and not any(atom in ir.atoms_of(s) for s in ir.walk(tuple(stmts))):
            return [*self.pieces(stmts[:-1]), ir.Assign(name, last.value, last.line)]
        return [*self.pieces(stmts), ir.Assign(name, atom, self.line)]

    def pieces(self, stmts: list[ir.Stmt]) -> list[ir.Stmt]:
        """``stmts``, the parts of one tangent's expression: their names are printed as that
        expression, whole (``syntax.function_of``'s ``parts``), as the rule's body is written."""
        self.parts.update(s.target for s in stmts if isinstance(s, ir.Assign))
        return stmts

    def is_active(self, atom: ir.Expr) -> TypeGuard[ir.Var]:
        return isinstance(atom, ir.Var) and atom.name in self.active

    def tangent_of(self, atom: ir.Atom) -> Made:
        """The tangent of an atom: its ``_dot`` name, or a zero of its structure if it is not
        active."""
        if self.is_active(atom):
            return [], ir.Var(self.dot(atom.name))
        return self.zero_of(atom)

    def zero_of(self, atom: ir.Atom) -> Made:
        out: list[ir.Stmt] = []
        hint = f"{atom.name}_dot" if isinstance(atom, ir.Var) else "zeros"
        return out, self.emit(out, self.call(runtime.zero_tangent, "zero_tangent", atom), hint)

    @staticmethod
    def call(fn: Any, hint: str, *args: ir.Atom, **kwargs: ir.Atom) -> ir.Call:
        return ir.Call(ir.Ref(fn, hint), args, tuple(kwargs.items()))

    # ---- statements ------------------------------------------------------------------------------
    def block(self, body: tuple[ir.Stmt, ...]) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        outer, self.read = self.read, set()
        for stmt in body:
            self.line = stmt.line
            # the loop's own copies, of the arrays and of their tangents
            if id(stmt) in self.loop_copies:
                for name in self.loop_copies[id(stmt)]:
                    dot = self.dot(name)
                    out += [
                        ir.Assign(
                            name, self.call(runtime.detached, "detached", ir.Var(name)), stmt.line
                        ),
                        ir.Assign(
                            dot,
                            self.call(
                                runtime.owned_adjoint, "owned_adjoint", ir.Var(dot), ir.Var(name)
                            ),
                            stmt.line,
                        ),
                    ]
            out += self.statement(stmt)
            self.read.update(ir.reads_of(stmt))
        self.read = outer
        return out

    def statement(self, stmt: ir.Stmt) -> list[ir.Stmt]:
        if isinstance(stmt, ir.Assign):
            return self.assign(stmt)
        if isinstance(stmt, ir.Unpack):
            return self.unpack(stmt)
        if isinstance(stmt, ir.Append):
            return self.append(stmt)
        if isinstance(stmt, ir.Pop):
            return self.pop(stmt)
        if isinstance(stmt, ir.If):
            return [
                ir.If(
                    stmt.test,
                    tuple(self.block(stmt.body)),
                    tuple(self.block(stmt.orelse)),
                    stmt.line,
                )
            ]
        if isinstance(stmt, ir.For):
            return [ir.For(stmt.target, stmt.iter, tuple(self.block(stmt.body)), stmt.line)]
        if isinstance(stmt, ir.While):
            return [ir.While(stmt.test, tuple(self.block(stmt.body)), stmt.line)]
        return [stmt]  # break, and effects (print, assert): no tangent

    def unpack(self, stmt: ir.Unpack) -> list[ir.Stmt]:
        targets = [t for t in stmt.targets if t in self.active]
        if not targets:
            return [stmt]
        if self.is_active(stmt.value):
            dots = tuple(self.dot(t) for t in stmt.targets)
            return [stmt, ir.Unpack(dots, ir.Var(self.dot(stmt.value.name)), stmt.line)]
        out: list[ir.Stmt] = [stmt]
        for t in targets:
            out += self.bound(self.zero_of(ir.Var(t)), self.dot(t))
        return out

    def append(self, stmt: ir.Append) -> list[ir.Stmt]:
        if stmt.target not in self.active:
            return [stmt]
        stmts, dot = self.tangent_of(stmt.value)
        return [stmt, *self.pieces(stmts), ir.Append(self.dot(stmt.target), dot, stmt.line)]

    def pop(self, stmt: ir.Pop) -> list[ir.Stmt]:
        if stmt.source not in self.active:
            return [stmt]
        return [
            stmt,
            ir.Pop(
                self.dot(stmt.target) if stmt.target in self.active else None,
                self.dot(stmt.source),
                stmt.line,
            ),
        ]

    def assign(self, stmt: ir.Assign) -> list[ir.Stmt]:
        """The primal statement and its tangent's; the old value kept where the tangent reads it."""
        target = stmt.target
        if id(stmt) in self.straight:
            return self.straight_write(stmt)
        if target not in self.active:
            return [stmt]
        value = stmt.value
        dot = self.dot(target)
        if id(stmt) in self.writes_in_place:  # ``y[i] = v`` in place, into the loop's copies
            call = ir.call_of(stmt)
            index, item = call.args[1], call.args[2]
            stmts, item_dot = self.tangent_of(item)
            return [ir.SetItem(target, index, item, stmt.line), *self.pieces(stmts),
                    ir.SetItem(dot, index, item_dot, stmt.line)]
        if isinstance(value, ir.Call) and (is_user_function(value.fn.obj) or by_source(value.fn.obj)
                                           or isinstance(value.fn.obj, ir.CalleeRef)) and \
                any(self.is_active(a) for a in value.args + tuple(a for _, a in value.kwargs)):
            return self.call_user(stmt)
        reads_itself = target in {v.name for v in inputs_of(value)}
        ans = self.namer.fresh(f"{target}_new") if reads_itself else target
        made = self.tangent(stmt, ans)
        if made is None:
            if isinstance(value, ir.Const) and value.value == [] and type(value.value) is list:
                # a new empty list (a tape, say) has a new empty list of tangents: the form reverse
                # mode reads as a list private to the function (``Reverser.private_list``), so it
                # can differentiate this again
                return [stmt, ir.Assign(dot, ir.Const([]), stmt.line)]
            if isinstance(value, ir.Const) and type(value.value) in (int, float):
                # (``zero_tangent`` of a number: ``0.0``)
                return [stmt, ir.Assign(dot, ir.Const(0.0), stmt.line)]
            if ir.binds_none(stmt) and target in self.function.inits:
                # the lowering's ``x = None`` before the loop or branch that binds ``x``, which
                # nothing but a check reads: its tangent is declared so too, ``x_dot = None`` (a
                # name of one type, or None, as Numba takes it; ``zero_tangent`` gave the float
                # zero, where ``x`` is then an array)
                return [stmt, ir.Assign(dot, ir.Const(None), stmt.line)]
            return [stmt, *self.bound(self.zero_of(ir.Var(target)), dot)]
        tangent = self.bound(made, dot)
        self.note_fresh(tangent, dot)
        # (a run-time test's names too)
        reads_ans = any(ans in ir.reads_of(s) for s in ir.walk(tuple(tangent)))
        if not reads_itself:
            if target in self.read and not reads_ans:
                # bound again where its block read the old value (``x = x * 0.99 + math.sin(x) *
                # 0.1``, lowered): the tangent first, so that what the tangents before it read of
                # the old value (``x`` in ``x_dot * math.cos(x)``) can be written into it where they
                # are read (``jvp_units``' folding)
                return [*tangent, stmt]
            return [stmt, *tangent]
        if not reads_ans:
            return [*tangent, stmt]  # the tangent reads the old value first
        if not any(target in ir.reads_of(s) for s in ir.walk(tuple(tangent))):
            # it reads the new value alone (``x = np.tanh(x)``: ``x_dot * (1.0 - x * x)``): after
            # the statement
            return [stmt, *renamed(tangent, ans, target)]
        return [
            ir.Assign(ans, value, stmt.line),
            *tangent,
            ir.Assign(target, ir.Var(ans), stmt.line),
        ]

    def straight_write(self, stmt: ir.Assign) -> list[ir.Stmt]:
        """``new = assign_item(old, i, v)`` at the function's level, where nothing reaches ``old``
        but this write (``analysis.straight_writes``): ``old[i] = v`` then ``new = old``. Its
        tangent likewise, into ``old``'s tangent, where that is an array this code made and read
        by nothing else (``fresh_dots``: ``old``'s reads are this write and item reads before it,
        whose tangents are item reads of the tangent before it); else the tangent's rule, a new
        array. The rules read ``old`` for its shape and dtype alone (``zero_tangent(old)``), which
        the write keeps."""
        call = ir.call_of(stmt)
        old, index, item = call.args
        assert isinstance(old, ir.Var)  # (``straight_writes``' writes)
        target = stmt.target
        out: list[ir.Stmt] = [ir.SetItem(old.name, index, item, stmt.line),
                              ir.Assign(target, old, stmt.line)]
        self.owned.add(old.name)
        if target not in self.active:
            return out
        dot = self.dot(target)
        old_dot = self.dots.get(old.name)
        if self.is_active(old) and old_dot in self.fresh_dots:
            stmts, item_dot = self.tangent_of(item)
            self.fresh_dots.add(dot)
            self.owned.add(old_dot)
            return [*out, *self.pieces(stmts), ir.SetItem(old_dot, index, item_dot, stmt.line),
                    ir.Assign(dot, ir.Var(old_dot), stmt.line)]
        made = self.tangent(stmt, target)
        if made is None:
            return [*out, *self.bound(self.zero_of(ir.Var(target)), dot)]
        tangent = self.bound(made, dot)
        self.note_fresh(tangent, dot)
        return [*out, *tangent]

    def note_fresh(self, tangent: list[ir.Stmt], dot: str) -> None:
        """``dot`` among ``fresh_dots`` where its statements end binding it to a new array
        (``analysis.makes_fresh_array``: ``assign_item``'s copy), which nothing else holds."""
        last = tangent[-1] if tangent else None
        if isinstance(last, ir.Assign) and last.target == dot \
                and makes_fresh_array(last.value, self.kinds):
            self.fresh_dots.add(dot)
        else:
            self.fresh_dots.discard(dot)

    def tangent(self, stmt: ir.Assign, ans: str) -> Made | None:
        """The tangent of the statement's value, or ``None`` where it is zero."""
        value = stmt.value
        if isinstance(value, (ir.Var, ir.Const, ir.Ref)):
            return ([], ir.Var(self.dot(value.name))) if self.is_active(value) else None
        if isinstance(value, ir.Pack):
            out: list[ir.Stmt] = []
            elts = []
            for a in value.elts:
                stmts, elt = self.tangent_of(a)
                out += stmts
                elts.append(elt)
            return out, self.emit(
                out, ir.Pack(tuple(elts), value.kind, value.keys), f"{stmt.target}_dot"
            )
        if isinstance(value, ir.Call):
            return self.rule_tangent(stmt, ans)
        return None  # attributes (shape, dtype) and raw tests carry no tangent

    def rule_tangent(self, stmt: ir.Assign, ans: str) -> Made | None:
        call = ir.call_of(stmt)
        if not any(self.is_active(a) for a in call.args + tuple(a for _, a in call.kwargs)):
            # computed from constants (into a name that carries a tangent elsewhere): zero
            return None
        rule = registry.lookup(call.fn.obj)
        # a gradient's own rules are partials of ast_ad's
        helper = getattr(call.fn.obj, "func", call.fn.obj)
        if rule is None and (getattr(helper, "__module__", None) or "").startswith("ast_ad."):
            raise at_line(
                MissingRuleError,
                stmt,
                f"{call.fn.hint}, a helper of ast_ad's gradient code, has no "
                "forward-mode rule yet, so this derivative of a derivative is not supported",
            )
        if rule is None:
            raise self.missing(
                stmt, f"{call.fn.hint} has no gradient rule" + unfollowed(call.fn.obj)
            )
        # where an argument may be complex, the rules for complex arguments
        complex_args = bool(self.complexes) and complex_call(call, self.complexes)
        rule = rule_for(stmt, rule, self.complexes) if complex_args else rule
        if rule.nondiff:
            return None
        for key, atom in call.kwargs:
            if self.is_active(atom):
                raise self.missing(
                    stmt,
                    f"the differentiated value {atom.name} is passed to {call.fn.hint} as "
                    f"keyword {key}=, which has no rule: compute that part outside the call, "
                    "or pass a constant",
                )
        out: list[ir.Stmt] = []
        terms: list[ir.Atom] = []
        exact = True
        container = stmt.target in self.structured or call.fn.obj is runtime.add_adjoints
        covered: set[int] = set()  # the arguments whose tangents the terms carry
        joint = self.joint_term(stmt, rule, ans) if rule.joint_tangent is not None \
            and not complex_args else self.linear_term(stmt)
        if joint is not None:  # one forward pass for several arguments (``Rule.joint_tangent``)
            out += joint[0]
            terms.append(joint[1])
            covered.update(joint[2])
        for k, atom in enumerate(call.args):
            if k in covered:
                continue
            if not self.is_active(atom):
                continue
            jvp = rule.jvp(k)
            if jvp is None and complex_args:
                raise no_complex_rule(stmt, k)
            if jvp is None:
                raise self.missing(
                    stmt, f"{call.fn.hint} has no forward-mode rule for argument {k + 1}"
                )
            if jvp is registry.zero:
                continue
            stmts, term = self.term(stmt, rule, jvp, k, ans)
            out += stmts
            terms.append(term)
            covered.add(k)
            container = (
                container
                or self.kinds.rank(stmt.target) is None
                and may_give_a_container((stmts, term))
            )
            exact = exact and (not rule.elementwise or self.exact(call, k, stmt.target))
        if not terms:
            return None
        dot = self.dots.get(stmt.target, stmt.target)
        total = terms[0]
        for term in terms[1:]:
            if container:  # element by element: ``+`` would join two lists
                total = self.emit(
                    out, self.call(runtime.add_adjoints, "add_adjoints", total, term), dot
                )
            else:  # (``a - e`` for ``a + -e``)
                total = self.emit(out, added(out, total, term), dot)
        if (
            not exact
            and rule.elementwise
            and not container
            and all(
                k in covered or shape_class(a, self.classes) == SCALAR
                for k, a in enumerate(call.args)
            )
        ):
            # each term has at least its argument's shape (an elementwise rule takes no axis away)
            # and at most the result's: where every argument that is not a number has a term, their
            # sum has the result's shape
            exact = True
        if not exact and not registry.returns_sequence(call.fn.obj):
            total = self.emit(out, self.call(runtime.fit, "fit", total, ir.Var(ans)), dot)
        return out, total

    def joint_term(self, stmt: ir.Assign, rule: registry.Rule, ans: str
                   ) -> tuple[list[ir.Stmt], ir.Atom, tuple[int, ...]] | None:
        """The tangent a call gets from two or more of its arguments at once, where its rule says
        how (``Rule.joint_tangent``: a gradient's, one forward pass over it with all their
        tangents): ``joint((x_dot, w_dot), ans, *args)``; with the arguments it covers. ``None``
        where it does not apply (one argument, a keyword)."""
        call = ir.call_of(stmt)
        positions = tuple(k for k, atom in enumerate(call.args) if self.is_active(atom)
                          and rule.jvp(k) not in (None, registry.zero))
        if len(positions) < 2 or call.kwargs:
            return None
        out: list[ir.Stmt] = []
        moves = []
        for k in positions:
            atom = call.args[k]
            assert isinstance(atom, ir.Var)  # (active)
            moves.append(ir.Var(self.dot(atom.name)))
        packed = self.emit(out, ir.Pack(tuple(moves), "tuple"), f"{self.dot(stmt.target)}_moves")
        joint = rule.joint_tangent(positions)
        name = f"{call.fn.hint.rsplit('.', 1)[-1]}_jvps"
        term = self.emit(out, ir.Call(ir.Ref(joint, name), (packed, ir.Var(ans), *call.args)),
                         f"{self.dot(stmt.target)}_from_all")
        return out, term, positions

    def linear_term(self, stmt: ir.Assign) -> tuple[list[ir.Stmt], ir.Atom, tuple[int, ...]] | None:
        """The tangent of a call linear in several arguments taken together
        (``registry.def_jointly_linear``) where all of them move and no other does: the call
        itself with their tangents in their places (``assign_item(x_dot, i, v_dot)``, where each
        argument's rule gave ``assign_item(x_dot, i, 0.0) + assign_item(zeros, i, v_dot)``), with
        the arguments it covers; ``None`` where it does not apply."""
        call = ir.call_of(stmt)
        positions = registry.jointly_linear(call.fn.obj)
        if not positions or call.kwargs or len(call.args) <= positions[-1]:
            return None
        moving = tuple(k for k, atom in enumerate(call.args) if self.is_active(atom))
        if moving != positions:
            return None
        args = tuple(ir.Var(self.dot(a.name)) if k in positions and isinstance(a, ir.Var) else a
                     for k, a in enumerate(call.args))
        out: list[ir.Stmt] = []
        value = (registry.truncated(call.fn.obj) or (None, None))[1]
        carried = args[value] if value is not None else None
        if value is not None and isinstance(carried, ir.Var):  # (the value's tangent)
            args = (*args[:value], self.written(out, stmt, value, carried), *args[value + 1:])
        term = self.emit(out, ir.Call(call.fn, args), f"{self.dot(stmt.target)}_from_all")
        return out, term, positions

    def term(self, stmt: ir.Assign, rule: registry.Rule, jvp: Any, k: int, ans: str) -> Made:
        """The tangent the statement's value gets from its argument ``k``."""
        call = ir.call_of(stmt)
        argument = call.args[k]
        assert isinstance(argument, ir.Var)  # an active argument
        out: list[ir.Stmt] = []
        hint = f"{self.dot(stmt.target)}_from_{argument.name}"
        u = self.written(out, stmt, k, ir.Var(self.dot(argument.name)))
        if jvp is registry.LINEAR:
            return out, self.emit(
                out, ir.Call(call.fn, call.args[:k] + (u,) + call.args[k + 1 :], call.kwargs), hint
            )
        kwargs = dict(call.kwargs)
        if jvp is registry.REDUCTION:
            made, term = self.reduction(stmt, rule, k, u, ans, hint)
            return out + made, term
        if not templates.bindable(jvp, len(call.args), list(kwargs)):
            raise self.error(
                stmt, f"the call to {call.fn.hint} does not match the arguments of its forward rule"
            )
        made, term = self.applied(
            jvp,
            [u, ir.Var(ans), *call.args],
            kwargs,
            f"{call.fn.hint.rsplit('.', 1)[-1]}_jvp",
            hint,
        )
        return out + made, term

    def written(self, out: list[ir.Stmt], stmt: ir.Assign, k: int, u: ir.Var) -> ir.Var:
        """``u``, the tangent of argument ``k`` of ``stmt``'s call, as the call carries it in: where
        ``k`` is the value a write puts into an array that may hold integers
        (``registry.def_truncates``), ``written_tangent(u, array)``, a zero where the write
        truncates it, appended to ``out``; elsewhere ``u`` itself."""
        call = ir.call_of(stmt)
        cut = registry.truncated(call.fn.obj)
        if cut is None or k != cut[1] or cut[0] >= len(call.args) \
                or self.kinds.holds_floats(call.args[cut[0]], stmt):
            return u
        return self.emit(out, self.call(runtime.written_tangent, "written_tangent", u,
                                        call.args[cut[0]]), f"{u.name}_written")

    def applied(
        self, rule: Any, args: list[ir.Atom], kwargs: dict[str, ir.Atom], rule_name: str, hint: str
    ) -> Made:
        """The rule's body with these atoms for its parameters (``templates.applied``), or a call of
        the rule."""
        made = templates.applied(rule, args, kwargs, self.namer, self.line, hint)
        if made is not None:
            return made
        out: list[ir.Stmt] = []
        return out, self.emit(
            out, ir.Call(ir.Ref(rule, rule_name), tuple(args), tuple(kwargs.items())), hint
        )

    def reduction(
        self, stmt: ir.Assign, rule: registry.Rule, k: int, u: ir.Var, ans: str, hint: str
    ) -> Made:
        """``np.sum(u * D, axis)`` for a reduction, ``D`` its reverse rule applied to ones."""
        call = ir.call_of(stmt)
        vjp = rule.vjp(k)
        kwargs = dict(call.kwargs)
        if vjp is None or not templates.bindable(vjp, len(call.args), list(kwargs)):
            raise self.error(
                stmt,
                f"the call to {call.fn.hint} does not match the arguments of its gradient rule",
            )
        out: list[ir.Stmt] = []
        ones = self.emit(out, self.call(np.ones_like, "np.ones_like", ir.Var(ans)), "ones")
        stmts, slope = self.applied(vjp, [ones, ir.Var(ans), *call.args], kwargs,
                                    f"{call.fn.hint.rsplit('.', 1)[-1]}_vjp", "slope")
        out += stmts
        axis, keepdims = registry.reduced_over(rule, k, call.args, kwargs)
        product = self.emit(out, self.call(operator.mul, "operator.mul", u, slope), hint)
        keywords = {
            name: value if isinstance(value, (ir.Var, ir.Const, ir.Ref)) else ir.Const(value)
            for name, value in (("axis", axis), ("keepdims", keepdims))
        }
        return out, self.emit(out, self.call(np.sum, "np.sum", product, **keywords), hint)

    def exact(self, call: ir.Call, k: int, target: str) -> bool:
        """Whether an elementwise rule's tangent from argument ``k`` already has the result's
        shape."""
        mine, result = (
            shape_class(call.args[k], self.classes),
            shape_class(ir.Var(target), self.classes),
        )
        others = [shape_class(a, self.classes) for j, a in enumerate(call.args) if j != k]
        return (
            result == SCALAR
            or (mine is not None and mine == result)
            or all(c == SCALAR for c in others)
        )

    def call_user(self, stmt: ir.Assign) -> list[ir.Stmt]:
        """``y, y_dot = helper_jvp(args..., tangents of the active ones)``; for a call of a ``_jvp``
        that forward mode made (its IR read again), the forward mode of that ``_jvp``'s own IR
        (``derived_again``)."""
        call = ir.call_of(stmt)
        made = call.fn.obj if isinstance(call.fn.obj, ir.CalleeRef) else None
        args = list(call.args) if made is not None else bind_call(stmt, self.error)
        active = tuple(p for p, a in enumerate(args) if self.is_active(a))
        labels = complex_labels(
            call_labels(args, self.classes, self.structured, self.kinds, stmt),
            args,
            self.complexes,
            stmt,
        )
        if made is None and is_library(call.fn.obj):
            raise library_call(stmt, call.fn.hint, call.fn.obj)
        try:
            callee = (
                self.derived_again(stmt, made.adjoint, active, labels)
                if made is not None
                else self.derive(call.fn.obj, active, labels)
            )
        except (LocatedError, UnsupportedSyntaxError) as exc:
            if not by_source(call.fn.obj):
                raise
            raise at_line(
                MissingRuleError,
                stmt,
                f"{call.fn.hint}, a helper of ast_ad's gradient code, has no "
                "forward-mode rule yet, and its source is outside the language ast_ad "
                "differentiates "
                f"({exc.args[0] if exc.args else exc}), so this derivative of a derivative is not "
                "supported",
            ) from None
        self.callees.append(callee)
        operands = tuple(args) + tuple(ir.Var(self.dot(a.name)) for a in args if self.is_active(a))
        if made is None:
            self.watched.append(call.fn)  # so that redefining the callee is noticed
        out: list[ir.Stmt] = []
        pair = self.emit(
            out,
            ir.Call(ir.Ref(ir.CalleeRef(callee, "jvp"), "jvp"), operands),
            f"{stmt.target}_pair",
        )
        return [*out, ir.Unpack((stmt.target, self.dot(stmt.target)), pair, stmt.line)]

    def derived_again(
        self, stmt: ir.Assign, made: Any, active: tuple[int, ...], labels: tuple[int, ...]
    ) -> Tangent:
        """The forward mode of the code forward mode made for a callee (``made.code``), once per
        differentiated arguments and labels."""
        if not isinstance(made, Tangent) or made.code is None:
            raise self.missing(
                stmt,
                f"the call of {made.function.name}'s generated code (its reverse-mode pair, or "
                "a function that calls itself, still being made) is not read as IR again",
            )
        key = (active, labels)
        if key not in made.again:
            made.again[key] = shell = Tangent(made.code, active)
            forward(made.code, active, labels, self.derive, shell)
        return made.again[key]

    # ---- errors ----------------------------------------------------------------------------------
    def error(self, stmt: ir.Stmt, message: str) -> LocatedError:
        return at_line(LocatedError, stmt, message)

    def missing(self, stmt: ir.Stmt, message: str) -> MissingRuleError:
        return missing_rule(stmt, message, REGISTER)
