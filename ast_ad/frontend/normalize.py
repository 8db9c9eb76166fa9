"""Stage 3, normalize: lower the checked source to A-normal form (see ``ir``).

Before::

    def f(x1, x2):
        return np.log(x1) + x1 * x2 - np.sin(x2)

After (as ``ast_ad.source(f, stage="normalized")`` prints it)::

    def f(x1, x2):
        log_x1 = np.log(x1)
        x1_times_x2 = x1 * x2
        t1 = log_x1 + x1_times_x2
        sin_x2 = np.sin(x2)
        out = t1 - sin_x2
        return out

Each statement applies one primitive to atoms. Names are resolved here, against
the function's real closure, globals and builtins, so ``np.sin``, ``numpy.sin``,
``from numpy import sin`` and ``xp.sin`` all become the same ``Ref``.

Seven jobs have modules of their own, parts of the ``Lowerer`` (``frame``): ``aliasing`` (which
names may reach the same object, and the checks before one changes), ``nested`` (functions the
user's code defines or names, inlined where they are called; ``ast_ad.grad`` and friends written in
the body), ``lower_control`` (``if``, ``while``, ``for`` and the iterations it unfolds, branch
conditions), ``lower_calls`` (what a call calls, its arguments checked against what the rules
follow; attribute reads), ``lower_writes`` (item writes, appends, pops and calls that change an
argument in place), ``lower_exprs`` (operators, comparisons, conditionals, comprehensions,
subscripts and literals) and ``objects`` (the user's classes: objects made inside, their fields and
methods). What is left here binds the names: the function, its statements and assignments, and where
each name resolves.
"""

from __future__ import annotations

import builtins
import functools
import inspect
import operator
import types
from typing import Any

import gast
import numpy as np

from ast_ad import runtime
from ast_ad.analysis import unbound
from ast_ad.core import registry
from ast_ad.errors import LocatedError
from ast_ad.frontend import objects, selection
from ast_ad.frontend.aliasing import Memory, live_after, loop_rebinds
from ast_ad.frontend.check import WITH_HINT, check_source, refuse
from ast_ad.frontend.frame import Frame, container_kind
from ast_ad.frontend.lower_calls import (
    BEING_LOWERED,
    FOREIGN_READS,
    INLINED,
    PARAM_WRITES,
    RETURN_VIEWS,
    CallLowering,
)
from ast_ad.frontend.lower_control import ControlFlow, bindings, written_in_place
from ast_ad.frontend.lower_exprs import SAID_WHOLE, SPELLED, ExpressionLowering
from ast_ad.frontend.lower_writes import WriteLowering
from ast_ad.frontend.nested import Nesting
from ast_ad.frontend.objects import Objects, followable, made_of
from ast_ad.frontend.parse import Source, parse, same_code
from ast_ad.frontend.structure import held_iterables, structure
from ast_ad.ir import nodes as ir
from ast_ad.ir import syntax
from ast_ad.ir.naming import Namer, identifier

MAX_NAME = 16
# the container each of these calls makes, whatever its arguments (``note_kind``)
MADE_KINDS = {list: "list", sorted: "list", tuple: "tuple", dict: "dict", set: "set",
              frozenset: "set"}
_ABSENT = object()


def normalize(source: Source) -> ir.Function:
    """Lower ``source`` (already checked) to an :class:`ir.Function`."""
    key = (source.fn, getattr(source.fn, "__code__", None))
    lowerer = Lowerer(source)
    BEING_LOWERED[key] = False
    try:
        function = lowerer.function()
        # (an object made here is never made: used as a value, it is refused)
        objects.escaped(function)
        function = ir.check_ir(bound_before_blocks(selection.selected(function)))
        if BEING_LOWERED[key] and lowerer.memory.writes:
            raise lowerer.error(
                source.tree,
                f"{source.tree.name} calls itself and changes its argument "
                f"{sorted(lowerer.memory.writes)[0]!r} in place: compute a new value instead",
            )
        PARAM_WRITES[key] = frozenset(lowerer.memory.writes)
        RETURN_VIEWS[key] = _returned_view(function, lowerer.memory)
        INLINED[key] = tuple(dict.fromkeys(lowerer.at.inlined))
        FOREIGN_READS[key] = tuple(lowerer.at.foreign_reads)
        return function
    finally:
        del BEING_LOWERED[key]
        lowerer.close()


def param_writes(fn: Any) -> frozenset[str]:
    """The parameters of the user function ``fn`` that it may change in place."""
    key = (fn, getattr(fn, "__code__", None))
    if key in BEING_LOWERED:
        BEING_LOWERED[key] = True
        return frozenset()
    if key not in PARAM_WRITES:
        source = parse(fn)
        check_source(source)
        normalize(source)
        # ``fn`` may name another
        PARAM_WRITES[key] = PARAM_WRITES[(source.fn, getattr(source.fn, "__code__", None))]
    return PARAM_WRITES[key]


def bound_before_blocks(function: ir.Function) -> ir.Function:
    """``function`` with each of ast_ad's own names (not the user's) that a branch or a loop binds
    and a later statement may read before binding it again, bound to ``None`` before that branch
    or loop where nothing bound it before: a loop that runs no step, or the branch not taken, leaves
    it unbound (a view's recipe, ``n_items1 = len(items1)`` in a loop, read by the check of a write
    after it, which then finds no view). The user's own names are bound so by the lowering
    (``Lowerer.prepare``), and their reads checked (``analysis.unbound``)."""
    added: set[str] = set()
    seen: set[str] = set(function.params)
    result = {function.result.name} if isinstance(function.result, ir.Var) else set()
    body = tuple(_bind_in(function.body, result, function.users, seen, added))
    if not added:
        return function
    return ir.with_body(function, body, function.mutable | frozenset(added))


def _bind_in(
    body: tuple[ir.Stmt, ...], later: set[str], users: frozenset[str], seen: set[str],
    added: set[str],
) -> list[ir.Stmt]:
    """``bound_before_blocks`` of one block, read before ``later``: the names bound so far are
    ``seen``, those given ``None`` go into ``added``."""
    # what may be read after each branch or loop before it is bound again (copied there only)
    live_after: dict[int, set[str]] = {}
    live = set(later)
    for k in reversed(range(len(body))):
        if ir.blocks(body[k]):
            live_after[k] = set(live)
        live -= set(ir.defined(body[k]))
        live |= _exposed_in(body[k])
    out: list[ir.Stmt] = []
    for k, stmt in enumerate(body):
        nested = ir.blocks(stmt)
        if nested:
            inside = {n for b in nested for s in ir.walk(b) for n in ir.defined(s)}
            need = sorted(n for n in inside - seen if n in live_after[k] and n not in users)
            for name in need:
                out.append(ir.Assign(name, ir.Const(None), stmt.line))
                added.add(name)
            seen.update(need)
            # a loop's body is read again after itself, from its top
            carried = live_after[k] | (
                _exposed(nested[0]) if isinstance(stmt, (ir.For, ir.While)) else set()
            )
            stmt = ir.with_blocks(stmt, [_bind_in(b, carried, users, seen, added) for b in nested])
        seen.update(ir.defined(stmt))
        for b in nested:
            seen.update(n for s in ir.walk(b) for n in ir.defined(s))
        out.append(stmt)
    return out


def _exposed(body: tuple[ir.Stmt, ...]) -> set[str]:
    """The names ``body`` may read before it binds them (liveness at its top)."""
    live: set[str] = set()
    for stmt in reversed(body):
        live -= set(ir.defined(stmt))
        live |= _exposed_in(stmt)
    return live


def _exposed_in(stmt: ir.Stmt) -> set[str]:
    """The names ``stmt`` reads, and those its blocks may read before binding them (a ``for``
    statement's target is bound before its body)."""
    out = set(ir.reads_of(stmt))
    for b in ir.blocks(stmt):
        out |= _exposed(b) - (set(ir.defined(stmt)) if isinstance(stmt, ir.For) else set())
    return out


def _returned_view(function: ir.Function, memory: Memory) -> tuple[int, ir.Call | None] | None:
    """The view of a parameter ``function`` returns (``return y[1:]``), where the parameter is never
    bound again: the parameter's position and the view's recipe, or ``None`` for the recipe where
    its other operands are not constants (``return y[k:]``: the call is inlined,
    ``returns_a_view``, and so is one bound on more than one path to views whose index is held,
    ``Memory.held_index``); else ``None`` (a result bound on more than one path otherwise has the
    recipe of the last one lowered, not a fact: ``None``, and the caller takes it as possibly the
    argument itself, which ``view_of`` checks)."""
    result = function.result
    if not isinstance(result, ir.Var):
        return None
    recipe = memory.recipes.get(result.name)
    if recipe is None or not recipe.args or not isinstance(recipe.args[0], ir.Var):
        return None
    base = recipe.args[0].name
    if base not in function.params or base in function.mutable:
        return None
    if result.name in function.mutable:
        # bound on more than one path: a view of the parameter on one of them, its index held
        # (``Memory.held_index``), is inlined, where ``view_of`` asks at each write which view the
        # name holds
        return (function.params.index(base), None) if result.name in memory.indices else None
    if not all(isinstance(a, ir.Const) for a in recipe.args[1:]) \
            or not all(isinstance(v, ir.Const) for _, v in recipe.kwargs):
        return function.params.index(base), None  # a view made with what the call gives it
    return function.params.index(base), recipe


def return_view(fn: Any) -> tuple[int, ir.Call | None] | None:
    """The view of a parameter the user function ``fn`` returns (``_returned_view``), where lowering
    a call of it has read it already (``param_writes``), else ``None``."""
    return RETURN_VIEWS.get((fn, getattr(fn, "__code__", None)))


_TWINS: dict[types.CodeType, bool] = {}  # a copy's code: whether it is its helper's


def helper_twin(value: Any) -> Any:
    """ast_ad's own helper where ``value`` is a copy of one (same name, same code: an exported
    gradient's module copies the helpers it calls, so that it runs without ast_ad), else ``value``.
    The copy computes what the helper computes, so it takes the helper's rules: reverse mode over
    exported code reads them."""
    if not inspect.isfunction(value) or registry.is_helper(value):
        return value
    helper = registry.helper_named(value.__name__)
    if not inspect.isfunction(helper):
        return value
    code = value.__code__
    if code not in _TWINS:
        _TWINS[code] = same_code(code, helper.__code__)
    return helper if _TWINS[code] else value




class Lowerer:
    """Walks the gast tree once, appending one IR statement per primitive application: it reads the
    statements and binds the names; its parts lower the rest (``frame``)."""

    def __init__(self, source: Source):
        at = self.at = Frame(source, _closure(source.fn), _bound_names(source.tree))
        # the parts, each given the frame, this lowerer and the parts below it that it calls; the
        # recursion over the user's other functions (what a helper writes, the view it returns) is
        # handed down as the functions that lower them
        self.memory = Memory(at, self, return_view)
        self.nested = Nesting(at, self, self.memory)
        self.objects = Objects(at, self, self.memory, self.nested)
        self.control = ControlFlow(at, self, self.memory, self.nested)
        self.exprs = ExpressionLowering(at, self, self.memory, self.control)
        self.writing = WriteLowering(at, self, self.memory, self.objects, self.control, self.exprs)
        self.calls = CallLowering(
            at, self, self.memory, self.nested, self.objects, self.control, self.exprs,
            self.writing, param_writes, return_view,
        )
        # each kind of statement and expression, lowered by the part that has it
        self.handlers: dict[str, Any] = {
            name: getattr(part, name)
            for part in (self, self.control, self.writing, self.exprs, self.calls)
            for name in dir(type(part))
            if name.startswith(("stmt_", "expr_"))
        }

    def close(self) -> None:
        """Let the parts go: each holds this lowerer (``lowering``), so that reference counting,
        not the cycle collector, frees what a lowering built."""
        del self.memory, self.nested, self.objects, self.control, self.exprs, self.writing
        del self.calls, self.handlers

    # ---- the function ----------------------------------------------------------------------------
    def function(self) -> ir.Function:
        tree = self.at.source.tree
        params = [arg.id for arg in tree.args.posonlyargs + tree.args.args + tree.args.kwonlyargs]
        names = tuple(self.at.namer.fresh(param, user=True) for param in params)
        self.at.env.update((param, ir.Var(name)) for param, name in zip(params, names, strict=True))
        self.at.owner.update(zip(names, params, strict=True))
        self.at.params.update(zip(names, params, strict=True))
        statements = tree.body
        if (
            statements
            and isinstance(statements[0], gast.Expr)
            and isinstance(statements[0].value, gast.Constant)
        ):
            statements = statements[1:]  # docstring
        namer = Namer(reserved=self.at.locals)
        statements = held_iterables(structure(statements, namer), namer)
        made: set[str] = set()
        # (a loop over a dict's items reads its keys, which carry no gradient)
        keys = self.at.namer.fresh("keys_of")
        # (and a dict's views read whole, as lists: judged over the whole function, whose names
        # bound to anything but a dict keep their own ``.values()``)
        not_dicts = _not_dicts(statements)
        for stmt in statements:
            _dict_views(stmt, self.at.namer, made, keys, not_dicts)
        statements = _dict_loops(statements, self.at.namer, made, keys)
        if made:
            self.at.env[keys] = ir.Ref(runtime.keys_of, "keys_of")
            self.at.locals |= made - {keys}
        self.at.liveness.update(live_after(statements))
        for s in statements:  # the names each statement binds, and those it appends to
            if id(s) in self.at.appending:  # as written: its names are among the locals already
                appended = self.at.appending[id(s)]
            else:  # a statement ``structure`` made
                stored, appended = bindings(s)
                self.at.locals |= stored
            for name in appended:
                self.at.appends_left[name] = self.at.appends_left.get(name, 0) + 1
        self.at.namer.reserved |= self.at.locals
        self.at.changing |= {
            n.id
            for s in statements
            if isinstance(s, (gast.If, gast.For, gast.While))
            for n in gast.walk(s)
            if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store)
        }
        if (
            not statements
            or not isinstance(statements[-1], gast.Return)
            or statements[-1].value is None
        ):
            written = [p for p in dict.fromkeys(written_in_place(tree)) if p in params]
            if written:  # a helper that changes its argument in place and returns nothing
                raise self.error(
                    statements[-1] if statements else tree,
                    f"{tree.name} changes its argument {written[0]} in place and returns nothing: "
                    f"ast_ad follows what a helper returns, so return it (return {written[0]}) and "
                    f"assign what it returns where it is called (y = {tree.name}(y, ...))",
                )
            raise self.error(
                statements[-1] if statements else tree,
                "the function must end with `return <value>`: grad needs a value to differentiate",
            )
        for node in statements[:-1]:
            self.at.line = self.line_of(node)
            self.stmt(node)
        last = statements[-1]
        self.at.line = self.line_of(last)
        result = self.expr(last.value, "out")
        function = ir.Function(
            tree.name,
            names,
            (*self.memory.presets, *self.at.body),
            result,
            self.at.line,
            self.at.fn,
            frozenset(self.at.mutable),
            frozenset(self.at.namer.users),
        )
        # (Python's UnboundLocalError, kept)
        function = unbound.checked(function, self.at.unbound, self.at.namer)
        return ir.Function(
            function.name, function.params, function.body, function.result, function.result_line,
            function.fn, function.mutable, function.users,
            unbound.inits(function, self.at.unbound),
        )

    # ---- statements ------------------------------------------------------------------------------
    def stmt(self, node: gast.stmt) -> None:
        handler = self.handlers.get("stmt_" + type(node).__name__)
        if handler is None:
            raise refuse(
                node, f"{type(node).__name__} statements are not supported here", self.locate
            )
        # (a statement made while lowering: not known)
        outer, self.at.live = self.at.live, self.at.liveness.get(id(node))
        rebinding, self.at.rebinding = self.at.rebinding, _rebound(node)
        # a write's follow-ups are made after its own statement: one lowered inside it (the loop
        # of a comprehension in ``y += np.array([...])``, checked before the write) makes only its
        # own, not the outer statement's ahead of its write
        pending = self.memory.follow_ups, self.memory.memory_ups
        self.memory.follow_ups, self.memory.memory_ups = [], []
        try:
            handler(node)
            if self.memory.follow_ups or self.memory.memory_ups:
                self.memory.follow()
        finally:
            self.at.live, self.at.rebinding = outer, rebinding
            self.memory.follow_ups = pending[0] + self.memory.follow_ups
            self.memory.memory_ups = pending[1] + self.memory.memory_ups

    def expr(
        self, node: gast.expr, name: str | None = None, user: bool = False, exact: bool = False
    ) -> ir.Atom:
        """Lower ``node`` to an atom; the last statement it adds is named ``name`` if given.

        With ``exact``, that statement assigns ``name`` itself (a mutable variable's one name).
        """
        handler = self.handlers.get("expr_" + type(node).__name__)
        if handler is None:
            said = SPELLED.get(type(node).__name__, "this expression is not supported here")
            raise refuse(node, f"{said}: compute it outside the function and pass it in"
                         if type(node).__name__ not in SAID_WHOLE else said, self.locate)
        if exact and isinstance(node, gast.IfExp):
            return self.exprs.expr_IfExp(node, name, user, exact=True)
        outer, self.at.exact = self.at.exact, name if exact else None
        try:
            atom: ir.Atom = handler(node, name, user)
            return atom
        finally:
            self.at.exact = outer

    def static(self, node: gast.expr) -> Any:
        """The object a name or a dotted path of modules names (``functools.partial``), or
        ``None``."""
        if isinstance(node, gast.Name) and isinstance(self.at.env.get(node.id), ir.Ref):
            # (a name the lowering bound to an object)
            return self.at.env[node.id].obj  # type: ignore[union-attr]
        if (
            isinstance(node, gast.Name)
            and node.id not in self.at.env
            and node.id not in self.at.locals
            and node.id not in self.at.local_functions
        ):
            try:
                atom = self.name(node)
            except LocatedError:
                return None  # reported where it is used
            return atom.obj if isinstance(atom, ir.Ref) else None
        if isinstance(node, gast.Attribute):
            base = self.static(node.value)
            if isinstance(base, types.ModuleType):
                return getattr(base, node.attr, None)
        return None

    def hidden(self, base: str) -> str:
        """A new name for a value ast_ad holds in ``env`` itself: not an identifier, so it meets no
        user's name."""
        self.at.serial += 1
        return f"§{base}{self.at.serial}"

    def mangled(self, attr: str) -> str:
        """``self.__k`` in a method of class ``C`` reads ``_C__k``, as Python's compiler mangles
        it."""
        parts = self.at.fn.__qualname__.split(".")
        if (
            not attr.startswith("__")
            or attr.endswith("__")
            or len(parts) < 2
            or parts[-2] == "<locals>"
        ):
            return attr
        return f"_{parts[-2].lstrip('_')}{attr}"

    def stmt_Assign(self, node: gast.Assign) -> None:
        if len(node.targets) == 1:
            self.assign(node.targets[0], node.value)
            return
        value = self.expr(node.value)
        for target in node.targets:
            self.bind_target(target, value)

    def stmt_AnnAssign(self, node: gast.AnnAssign) -> None:
        if node.value is not None:
            self.assign(node.target, node.value)

    def stmt_Return(self, node: gast.Return) -> None:
        raise refuse(
            node, "return is only supported as the last statement of the function", self.locate
        )

    def stmt_Delete(self, node: gast.Delete) -> None:
        """``del name``: the name is unbound (generated code frees arrays so), so a later read is
        refused."""
        for target in node.targets:
            if not (
                isinstance(target, gast.Name)
                and target.id in self.at.env
                and target.id in self.at.locals
            ):
                raise refuse(
                    node, "del is supported for local names only: drop the statement", self.locate
                )
            if not self.at.loops and not self.at.nesting:
                del self.at.env[target.id]

    def stmt_FunctionDef(self, node: gast.FunctionDef) -> None:
        if node.decorator_list:
            raise refuse(
                node,
                "decorated nested functions are not supported: define the function at module level",
                self.locate,
            )
        self.at.local_functions[node.name] = node

    def stmt_Assert(self, node: gast.Assert) -> None:
        self.control.effect(node)

    def stmt_With(self, node: gast.With) -> None:
        """``with np.errstate(divide="ignore"): ...``: what it changes is which warnings numpy
        gives, not a value; its body is lowered as it stands. A setting that raises (``"raise"``,
        ``"call"``) would change what runs, and any other context manager may: refused."""
        item = node.items[0] if len(node.items) == 1 else None
        call = item.context_expr if item is not None else None
        quiet = (
            isinstance(call, gast.Call)
            and self.static(call.func) is np.errstate
            and not call.args
            and item is not None
            and item.optional_vars is None
            and all(
                isinstance(kw.value, gast.Constant)
                and kw.value.value in ("ignore", "warn", "print", "log")
                for kw in call.keywords
            )
        )
        if not quiet:
            raise refuse(
                node,
                WITH_HINT + " (with settings that do not raise: ignore, warn, print, log)",
                self.locate,
            )
        jump = next(
            (n for n in gast.walk(node) if isinstance(n, (gast.Return, gast.Break, gast.Continue))),
            None,
        )
        if jump is not None:
            raise refuse(
                jump,
                "return, break and continue inside a with block are not supported: assign the "
                "value, and return or jump after the block",
                self.locate,
            )
        for stmt in node.body:
            self.at.line = self.line_of(stmt)
            self.stmt(stmt)

    def stmt_Raise(self, node: gast.Raise) -> None:
        """``raise ValueError(...)``: kept as written, so the gradient raises where Python
        raises."""
        self.control.effect(node)

    def stmt_Pass(self, node: gast.Pass) -> None:
        pass

    def assign(self, target: gast.expr, value: gast.expr) -> None:
        if (
            isinstance(value, gast.Call)
            and isinstance(value.func, gast.Attribute)
            and value.func.attr == "pop"
            and not value.args
            and not value.keywords
            and self.is_local(value.func.value)
        ):
            self.writing.pop(target, value.func.value)
            return
        if isinstance(target, gast.Name) and isinstance(value, gast.Lambda):
            self.at.local_functions[target.id] = value
            return
        if (
            isinstance(target, gast.Name)
            and isinstance(value, (gast.List, gast.Tuple))
            and value.elts
            and all(
                isinstance(e, gast.Lambda)
                or isinstance(e, gast.Name)
                and e.id in self.at.local_functions
                and e.id not in self.at.env
                for e in value.elts
            )
        ):
            self.at.function_lists[target.id] = [
                e if isinstance(e, gast.Lambda) else self.at.local_functions[e.id]
                # called by position, or looped over
                for e in value.elts
            ]
            self.at.env.pop(target.id, None)
            return
        if (
            isinstance(target, gast.Name)
            and isinstance(value, (gast.List, gast.Tuple))
            and value.elts
            and all(isinstance(e, gast.Call) and followable(self.static(e.func), self.at.fn)
                    for e in value.elts)
        ):
            made = [made_of(self.expr(e)) for e in value.elts]
            if all(m is not None for m in made):
                self.at.object_lists[target.id] = [m for m in made if m is not None]
                self.at.env.pop(target.id, None)
                return
            raise self.error(value, "a list of objects is followed where each is made in it")
        if isinstance(target, gast.Name) and isinstance(value, gast.Call) and value.args \
                and self.static(value.func) is functools.partial:
            self.at.partials[target.id] = self.nested.frozen_partial(value)
            return
        if isinstance(target, gast.Name) and self.memory.is_mutable(target.id):
            name = self.memory.local(target.id).name
            self.memory.copy(name, self.expr(value, name, exact=True))
        elif isinstance(target, gast.Name):
            atom = self.expr(value, target.id, user=True)
            # a new list each time: no alias
            if isinstance(atom, ir.Const) and isinstance(atom.value, list):
                atom = self.bind(atom, target.id, user=True)
            self.at.env[target.id] = self.memory.snapshot(atom, target.id)
            self.memory.note_views(atom)
        elif (
            isinstance(target, (gast.Tuple, gast.List))
            and isinstance(value, (gast.Tuple, gast.List))
            and len(target.elts) == len(value.elts)
        ):
            atoms = [
                self.expr(v, t.id if isinstance(t, gast.Name) else None, isinstance(t, gast.Name))
                for t, v in zip(target.elts, value.elts, strict=True)
            ]
            # every value is read before any target is bound: ``a, v = v, a`` swaps, even where a
            # name is mutable
            atoms = [self.memory.hold(atom) for atom in atoms]
            # the values not bound yet are read after each write: a view among them (``y[0], y[1] =
            # y[1], y[0]`` of rows) sees it in Python. Each is held under a name of ast_ad's own, a
            # live variable the memory model makes again after the write (``Memory.follow``), as
            # Python's view shows the new entries
            held = [self.hidden("value") for _ in atoms]
            writes = any(isinstance(t, gast.Subscript) for t in target.elts)
            for name, atom in zip(held, atoms, strict=True):
                self.at.env[name] = atom
                self.at.locals.add(name)
                if writes and (self.at.nesting or self.at.loops) and isinstance(atom, ir.Var):
                    # (in a block: a name the writes may bind again, used here alone)
                    self.memory.own_name(name, atom)
            try:
                for k, t in enumerate(target.elts):
                    atom = self.at.env.pop(held[k])  # (bound now: no longer a value waiting)
                    self.at.locals.discard(held[k])
                    outer_live = self.at.live
                    if outer_live is not None:
                        self.at.live = outer_live | set(held[k + 1:])
                    try:
                        self.bind_target(t, atom)
                        self.memory.follow()
                    finally:
                        self.at.live = outer_live
            finally:
                for name in held:
                    self.at.env.pop(name, None)
                    self.at.locals.discard(name)
        else:
            self.bind_target(target, self.expr(value))

    def bind_target(self, target: gast.expr, value: ir.Atom) -> None:
        if isinstance(target, gast.Subscript) and isinstance(target.value, gast.Subscript):
            self.writing.assign_nested(target, value)
            return
        if isinstance(target, gast.Subscript):
            self.memory.guard_in_place(target)
            self.writing.assign_item(target, value)
            return
        if isinstance(target, gast.Name) and self.memory.is_mutable(target.id):
            self.memory.copy(self.memory.local(target.id).name, value)
            return
        if isinstance(target, gast.Name):
            self.at.env[target.id] = self.memory.snapshot(value, target.id)
            return
        if isinstance(target, gast.Attribute):
            made = made_of(self.expr(target.value))
            if made is not None:  # an attribute of an object made inside the function: its variable
                self.objects.set_field(made, self.mangled(target.attr), value, target)
                return
        if not isinstance(target, (gast.Tuple, gast.List)):
            raise refuse(
                target,
                "assignment to an attribute is not supported here: use a local variable (an "
                "attribute is followed on an object the function makes)",
                self.locate,
            )
        if any(isinstance(t, gast.Starred) for t in target.elts):
            self.unpack_starred(target, value)
            return
        names = [
            self.at.namer.fresh(
                t.id if isinstance(t, gast.Name) else "t", user=isinstance(t, gast.Name)
            )
            for t in target.elts
        ]
        self.at.body.append(ir.Unpack(tuple(names), value, self.at.line))
        # ``a, b = xs``: the names hold the very objects the list or tuple holds
        if isinstance(value, ir.Var):
            for k, name in enumerate(names):
                self.memory.unpacked[name] = value.name
                # (and ``xs`` holds what each name holds: either sees the other)
                self.memory.contain(value.name, name)
                # ``a`` is ``xs[0]``: a write into it is put back in that slot
                if value.name in self.memory.holds:
                    item = ir.Ref(operator.getitem, "operator.getitem")
                    self.memory.recipes[name] = ir.Call(item, (value, ir.Const(k)))
        for t, name in zip(target.elts, names, strict=True):
            if isinstance(t, gast.Name) and not self.memory.is_mutable(t.id):
                self.at.owner[name] = t.id
                self.at.env[t.id] = ir.Var(name)
            else:
                self.bind_target(t, ir.Var(name))

    def unpack_starred(self, target: gast.Tuple | gast.List, value: ir.Atom) -> None:
        """``first, *rest, last = xs``: items read by index, the starred name a list of the ones
        between."""
        elts = target.elts
        star = next(k for k, t in enumerate(elts) if isinstance(t, gast.Starred))
        after = len(elts) - star - 1
        if not isinstance(value, ir.Var) or any(
            isinstance(t, gast.Starred) for t in elts[star + 1 :]
        ):
            raise refuse(
                target,
                "a starred target unpacks a list, tuple or array bound to a name, once per "
                "assignment: assign the value to a name first",
                self.locate,
            )
        length = self.bind(ir.Call(ir.Ref(len, "len"), (value,)), f"n_{value.name}")
        enough = self.bind(
            ir.Call(ir.Ref(operator.ge, "operator.ge"), (length, ir.Const(len(elts) - 1))), "cond"
        )
        self.at.body.append(ir.Effect(_raise_unless(enough.name, len(elts) - 1), (), self.at.line))
        getitem = ir.Ref(operator.getitem, "operator.getitem")
        for k, t in enumerate(elts):
            if isinstance(t, gast.Starred):
                part = self.bind(
                    ir.Call(getitem, (value, ir.Const(slice(star, -after if after else None)))), "t"
                )
                item = self.bind(ir.Call(ir.Ref(list, "list"), (part,)), "rest")
                self.bind_target(t.value, item)
            else:
                index = k if k < star else k - len(elts)
                self.bind_target(t, self.bind(ir.Call(getitem, (value, ir.Const(index))), "t"))

    def prepare(self, node: gast.stmt) -> None:
        """Give each user variable that ``node`` assigns one mutable name, bound before ``node``
        runs."""
        functions = {
            t.id
            for n in gast.walk(node)
            if isinstance(n, gast.Assign) and isinstance(n.value, gast.Lambda)
            # inlined where called: no variable
            for t in n.targets
            if isinstance(t, gast.Name)
        }
        # (their own scopes)
        scoped = {id(n) for c in gast.walk(node) if isinstance(c, ir.COMPREHENSIONS)
                  for g in c.generators for n in gast.walk(g.target)}
        stored = [
            n.id
            for n in gast.walk(node)
            if isinstance(n, gast.Name)
            and isinstance(n.ctx, gast.Store)
            and n.id not in functions
            and id(n) not in scoped
        ]
        stored += [_root(n).id for n in gast.walk(node) if isinstance(n, gast.Subscript)
                   and isinstance(n.ctx, gast.Store) and isinstance(_root(n), gast.Name)]
        written = _read_into(node, [name for name in written_in_place(node)])
        written = [name for name in written if name in stored or name in self.at.env]
        # (whether this block is inside another: a ``for`` statement's own loop is on ``loops``
        # already)
        nested = self.at.nesting > 0 or len(self.at.loops) > (
            1 if isinstance(node, gast.For) else 0
        )
        if (
            written
            and isinstance(node, gast.For)
            and isinstance(node.iter, gast.Name)
            and node.iter.id in self.at.env
        ):  # ``for row in y: row *= 2``: a row is a view of ``y``
            written.append(node.iter.id)
            if not nested or self.memory.is_mutable(node.iter.id):
                stored.append(node.iter.id)
        # (inside a branch or a loop, a variable of the blocks around it gets no new name here:
        # bound in this block alone, it would be unbound on the other paths; unprepared, the write
        # refuses to follow it)
        stored += [
            n for n in self.sharing(written, stored) if not nested or self.memory.is_mutable(n)
        ]
        if written and isinstance(node, (gast.For, gast.While)):
            # names the loop may bind to one object later in its body (``y += d; y = kept``): from
            # the next step on a write through one changes the other, which is then made again from
            # it (``Memory.followed``)
            later = loop_rebinds(node)
            if later & set(written):
                known = [n for n in sorted(later) if n in self.at.env]
                stored += [
                    n
                    for n in [*known, *self.sharing(known, stored)]
                    if n in self.at.user_locals
                    and n not in stored
                    and n not in self.at.local_functions
                    and (not nested or self.memory.is_mutable(n))
                ]
        for user_name in dict.fromkeys(stored):
            atom = self.at.env.get(user_name)
            if isinstance(atom, ir.Var) and self.at.owner.get(atom.name) == user_name:
                self.at.mutable.add(atom.name)
                continue
            name = self.at.namer.fresh(user_name, user=True)
            self.at.owner[name] = user_name
            self.at.mutable.add(name)
            init = ir.Assign(name, atom if atom is not None else ir.Const(None), self.at.line)
            self.at.body.append(init)
            # not bound yet: Python's read would raise
            if atom is None and user_name in self.at.user_locals:
                self.at.unbound[id(init)] = user_name
            if atom is not None:
                self.note_kind(name, atom)
            if isinstance(atom, ir.Var):  # ``v = x`` before the loop: v starts as x's very array
                self.memory.share(name, atom.name, alias=True)
            self.at.env[user_name] = ir.Var(name)

    def sharing(self, written: list[str], stored: list[str]) -> list[str]:
        """The variables that may see an object one of ``written`` holds (``w = y[1:]``, ``z = y``),
        but those the block ``stored`` already: a write in the block may change them too, and they
        are made again after it (``Memory.follow``), so each gets a name that the block may
        assign, as the names it stores do."""
        related: set[str] = set()
        for user_name in written:
            atom = self.at.env.get(user_name)
            if isinstance(atom, ir.Var):
                related |= self.memory.reaching(atom.name, False)
        return [
            user
            for user, atom in self.at.env.items()
            if isinstance(atom, ir.Var)
            and atom.name in related
            and user in self.at.user_locals
            and user not in self.at.local_functions
            and user not in stored
        ]

    def block(self, statements: list[gast.stmt]) -> tuple[ir.Stmt, ...]:
        """Lower ``statements`` into a nested block of their own."""
        outer, self.at.body = self.at.body, []
        self.at.nesting += 1
        try:
            for node in statements:
                self.at.line = self.line_of(node)
                self.stmt(node)
            return tuple(self.at.body)
        finally:
            self.at.body = outer
            self.at.nesting -= 1

    # ---- names and resolution --------------------------------------------------------------------
    def name(self, node: gast.Name) -> ir.Atom:
        if node.id in self.at.env:
            return self.at.env[node.id]
        if node.id in self.at.object_lists:
            raise self.error(
                node,
                f"{node.id} is a list of objects made here, which ast_ad follows where it is "
                f"looped over (for item in {node.id}: ...); pass their attributes instead",
            )
        if node.id in self.at.function_lists:
            raise self.error(
                node,
                f"{node.id} is a list of functions, which ast_ad follows where its items are "
                f"called by position ({node.id}[0](x)) or looped over (for g in {node.id}: ...)",
            )
        if node.id in self.at.local_functions:
            raise self.error(
                node,
                f"{node.id} is a function defined here, which ast_ad follows where it is called by "
                "name; taken as a value (passed to another function, returned) it would hide the "
                "values it reads: define it at module level, its differentiated values as "
                "parameters (to a scipy solver, pass them by args=(...))",
            )
        if node.id in self.at.locals:
            raise self.error(node, f"{node.id!r} is used before it is assigned")
        if self.at.scopes:  # inside an inlined helper of yours: its module's names, or builtins
            return self.helper_global(node)
        if node.id in self.at.closure:
            try:
                value = self.at.closure[node.id].cell_contents
            except ValueError:
                raise self.error(node, f"the closure variable {node.id!r} is not set yet") from None
            registry.load_rules_for(value)
            return ir.Ref(value, node.id, ("closure", node.id), value)
        if node.id in self.at.fn.__globals__:
            value = self.at.fn.__globals__[node.id]
            registry.load_rules_for(value)
            return ir.Ref(helper_twin(value), node.id, ("global", node.id), value)
        if hasattr(builtins, node.id):
            return ir.Ref(getattr(builtins, node.id), node.id)
        raise self.error(node, f"name {node.id!r} is not defined")

    def helper_global(self, node: gast.Name) -> ir.Atom:
        """A name an inlined helper of yours reads from its module (``scopes``), as Python reads it
        there: the caller's module's object where it is that very one (watched as the caller's
        globals are), else the object it is now in the helper's module, watched
        (``foreign_reads``); a builtin where its module has no such name."""
        scope = self.at.scopes[-1]
        if node.id in scope:
            value = scope[node.id]
            registry.load_rules_for(value)
            if value is self.at.fn.__globals__.get(node.id, _ABSENT):
                return ir.Ref(helper_twin(value), node.id, ("global", node.id), value)
            self.at.foreign_reads.append((scope, node.id, value))
            return ir.Ref(helper_twin(value), node.id)
        if hasattr(builtins, node.id):
            return ir.Ref(getattr(builtins, node.id), node.id)
        raise self.error(node, f"name {node.id!r} is not defined")

    def is_local(self, node: gast.expr) -> bool:
        return isinstance(node, gast.Name) and node.id in self.at.locals

    def operator(self, fn: Any) -> ir.Ref:
        return ir.Ref(fn, f"operator.{fn.__name__}")

    def bind(self, value: ir.Expr, hint: str, user: bool = False, holds: bool = True) -> ir.Var:
        """A new name for ``value``; ``holds=False``: a pack that only a check reads (it shares
        nothing)."""
        if self.at.exact is not None and hint == self.at.exact:
            self.at.exact = None
            self.at.body.append(ir.Assign(hint, value, self.at.line))
            self.note_kind(hint, value)
            return ir.Var(hint)
        if not user and len(hint) > MAX_NAME:
            hint = "t"
        if hint == "t" or not identifier(hint) == hint:
            hint = f"t{self.next_temp()}"
        target = self.at.namer.fresh(hint, user=user)
        if user:
            self.at.owner[target] = hint
        self.at.body.append(ir.Assign(target, value, self.at.line))
        self.note_kind(target, value)
        if holds:
            # ``[v][0]``, ``x.T[1:]``: every view and container on the way counts
            self.memory.note_views(ir.Var(target))
        return ir.Var(target)

    def note_kind(self, target: str, value: ir.Expr) -> None:
        """Record the kind of container ``target`` holds, where ``value`` makes it known (see
        ``frame.container_kind``)."""
        if isinstance(value, ir.Pack):
            self.at.kinds[target] = value.kind
        elif isinstance(value, (ir.Var, ir.Const)) and (found := container_kind(self.at, value)):
            self.at.kinds[target] = found
        elif isinstance(value, ir.Call) and isinstance(value.fn, ir.Ref) \
                and registry.hashable(value.fn.obj) and value.fn.obj in MADE_KINDS:
            self.at.kinds[target] = MADE_KINDS[value.fn.obj]

    def next_temp(self) -> int:
        k = self.at.temps + 1
        while f"t{k}" in self.at.namer.used or f"t{k}" in self.at.locals:
            k += 1
        self.at.temps = k
        return k

    # ---- locations -------------------------------------------------------------------------------
    def locate(self, node: gast.AST) -> tuple[str, int, str]:
        return self.at.source.where(node)

    def line_of(self, node: gast.AST) -> ir.Line:
        return ir.Line(*self.locate(node))

    def error(self, node: gast.AST, message: str) -> LocatedError:
        return LocatedError(message, *self.locate(node))


def _dict_loops(
    body: list[gast.stmt], namer: Namer, made: set[str], keys_of: str
) -> list[gast.stmt]:
    """``body`` with each loop over a dict's ``items()``, ``values()`` or ``keys()`` written as a
    loop over its keys that reads each value where the step starts, as Python's view does (``for k
    in list(d): v = d[k]``)."""
    out: list[gast.stmt] = []
    for stmt in body:
        if isinstance(stmt, (gast.For, gast.While, gast.If)):
            fields = {"body": _dict_loops(stmt.body, namer, made, keys_of),
                      "orelse": _dict_loops(stmt.orelse, namer, made, keys_of)}
            stmt = gast.copy_location(type(stmt)(**{**stmt.__dict__, **fields}), stmt)
        call = stmt.iter if isinstance(stmt, gast.For) else None
        if isinstance(call, gast.Call) and isinstance(call.func, gast.Attribute) and not call.args \
                and not call.keywords and call.func.attr in ("items", "values", "keys") \
                and isinstance(call.func.value, gast.Name):
            assert isinstance(stmt, gast.For)
            owner = call.func.value
            made.add(keys_of)
            keys = gast.copy_location(
                gast.Call(
                    func=gast.Name(id=keys_of, ctx=gast.Load(), annotation=None, type_comment=None),
                    args=[owner],
                    keywords=[],
                ),
                call,
            )
            target, read = stmt.target, []
            if call.func.attr != "keys":
                pair = (
                    call.func.attr == "items"
                    and isinstance(target, gast.Tuple)
                    and len(target.elts) == 2
                )
                key_target = target.elts[0] if pair else None
                if not isinstance(key_target, gast.Name):
                    hidden = namer.fresh("key")
                    made.add(hidden)
                    key_target = gast.Name(
                        id=hidden, ctx=gast.Store(), annotation=None, type_comment=None
                    )
                key = gast.Name(
                    id=key_target.id, ctx=gast.Load(), annotation=None, type_comment=None
                )
                value = gast.Subscript(value=owner, slice=key, ctx=gast.Load())
                if call.func.attr == "items" and not pair:
                    value = gast.Tuple(elts=[key, value], ctx=gast.Load())
                    read.append(gast.Assign(targets=[target], value=value, type_comment=None))
                else:
                    read.append(
                        gast.Assign(
                            targets=[target.elts[1] if pair else target],
                            value=value,
                            type_comment=None,
                        )
                    )
                target = key_target
            read = [_located_all(r, stmt) for r in read]
            stmt = gast.copy_location(
                gast.For(
                    target=target,
                    iter=keys,
                    body=read + stmt.body,
                    orelse=stmt.orelse,
                    type_comment=None,
                ),
                stmt,
            )
        out.append(stmt)
    return out


# what reads a dict's view whole, at once: a list of its items is the same to it
_CONSUMERS = frozenset({"sum", "list", "tuple", "sorted", "max", "min", "len", "any", "all"})


def _not_dicts(body: list[gast.stmt]) -> set[str]:
    """The names ``body`` binds to anything but a dict it makes (a display, a comprehension,
    ``dict(...)``): an object of the user's class may have a ``.values()`` of its own."""
    found: set[str] = set()
    for node in (n for stmt in body for n in gast.walk(stmt)):
        if isinstance(node, gast.Assign):
            made = isinstance(node.value, (gast.Dict, gast.DictComp)) or (
                isinstance(node.value, gast.Call) and isinstance(node.value.func, gast.Name)
                and node.value.func.id == "dict"
            )
            if not made:
                found |= {name for t in node.targets for name in _target_names(t)}
        elif isinstance(node, (gast.AugAssign, gast.AnnAssign, gast.For)):
            found |= _target_names(node.target)
        elif isinstance(node, gast.withitem) and node.optional_vars is not None:
            found |= _target_names(node.optional_vars)
    return found


def _target_names(target: gast.expr) -> set[str]:
    """The names an assignment's target binds (``d["a"] = v`` binds none)."""
    if isinstance(target, gast.Name):
        return {target.id}
    if isinstance(target, (gast.Tuple, gast.List)):
        return {name for elt in target.elts for name in _target_names(elt)}
    if isinstance(target, gast.Starred):
        return _target_names(target.value)
    return set()


def _dict_views(node: gast.AST, namer: Namer, made: set[str], keys_of: str,
                others: set[str]) -> None:
    """``d.values()``, ``d.items()`` and ``d.keys()`` of a name, in ``node``, where what reads them
    takes them whole at once (an argument of ``sum``, ``list``, ``max``..., a comprehension's
    iterable), rewritten in place as a list of the values (``[d[k] for k in keys_of(d)]``), of
    ``(k, d[k])`` pairs, or the keys, in Python's order. (Where the view is kept and read later,
    after the dict changed, a list made now would differ: not rewritten, and refused where it is
    read.) A function or lambda defined here is lowered on its own."""
    for child in gast.iter_child_nodes(node):
        if not isinstance(child, (gast.FunctionDef, gast.Lambda, gast.ClassDef)):
            _dict_views(child, namer, made, keys_of, others)
    if isinstance(node, gast.Call) and isinstance(node.func, gast.Name) \
            and node.func.id in _CONSUMERS:
        node.args = [_listed(arg, namer, made, keys_of, others) for arg in node.args]
    elif isinstance(node, (gast.ListComp, gast.SetComp, gast.GeneratorExp, gast.DictComp)):
        # (only where nothing the comprehension computes may change the dict as it steps: it
        # names no dict it reads a view of, and calls no function of the user's)
        calls = [n for n in gast.walk(node) if isinstance(n, gast.Call)]
        for generator in node.generators:
            view = generator.iter
            owner = (view.func.value.id if isinstance(view, gast.Call)
                     and isinstance(view.func, gast.Attribute)
                     and isinstance(view.func.value, gast.Name) else None)
            mentions = [n for n in gast.walk(node) if isinstance(n, gast.Name) and n.id == owner
                        and n is not getattr(getattr(view, "func", None), "value", None)]
            if owner is not None and not mentions and all(
                not isinstance(c.func, gast.Name) or c.func.id in _CONSUMERS
                or c.func.id == keys_of for c in calls if c is not view
            ):
                generator.iter = _listed(view, namer, made, keys_of, others)


def _listed(node: gast.expr, namer: Namer, made: set[str], keys_of: str,
            others: set[str]) -> gast.expr:
    """``node`` as a list where it is a view of a named dict (``_dict_views``: a name the function
    binds to dicts only, or a parameter, which ``keys_of`` checks is one), else ``node``."""
    if not (isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute)
            and not node.args and not node.keywords
            and node.func.attr in ("items", "values", "keys")
            and isinstance(node.func.value, gast.Name)
            and node.func.value.id not in others):
        return node
    owner = node.func.value.id
    made.add(keys_of)

    def name(id_: str, ctx: gast.expr_context) -> gast.Name:
        return gast.Name(id=id_, ctx=ctx, annotation=None, type_comment=None)

    keys = gast.Call(func=name(keys_of, gast.Load()), args=[name(owner, gast.Load())],
                     keywords=[])
    if node.func.attr == "keys":
        listed: gast.expr = keys
    else:
        key = namer.fresh("key")
        made.add(key)
        value = gast.Subscript(value=name(owner, gast.Load()), slice=name(key, gast.Load()),
                               ctx=gast.Load())
        element = value if node.func.attr == "values" else gast.Tuple(
            elts=[name(key, gast.Load()), value], ctx=gast.Load())
        listed = gast.ListComp(
            elt=element,
            generators=[gast.comprehension(target=name(key, gast.Store()), iter=keys, ifs=[],
                                           is_async=0)],
        )
    _located_all(listed, node)
    return listed


def _located_all(node: gast.AST, like: gast.AST) -> gast.AST:
    for n in gast.walk(node):
        if hasattr(n, "lineno") or isinstance(n, (gast.stmt, gast.expr)):
            gast.copy_location(n, like)
    return node


def _read_into(node: gast.stmt, written: list[str]) -> list[str]:
    """``written``, and the names the block ``node`` reads into them (``r = z[i]`` then ``r[j] =
    v``: ``z`` may be written through ``r``), to a fixpoint."""
    sources: dict[str, set[str]] = {}
    for n in gast.walk(node):
        if isinstance(n, gast.Assign):
            reads = {
                m.id
                for m in gast.walk(n.value)
                if isinstance(m, gast.Name) and isinstance(m.ctx, gast.Load)
            }
            for target in n.targets:
                for t in gast.walk(target):
                    if isinstance(t, gast.Name) and isinstance(t.ctx, gast.Store):
                        sources.setdefault(t.id, set()).update(reads)
    found = list(dict.fromkeys(written))
    for name in found:  # (grows while it is walked)
        found += [m for m in sorted(sources.get(name, ())) if m not in found]
    return found


def _rebound(node: gast.stmt) -> frozenset[str]:
    """The names an assignment statement binds (``x`` of ``x = damp(x)``); none for other
    statements."""
    if not isinstance(node, gast.Assign):
        return frozenset()
    return frozenset(n.id for target in node.targets for n in gast.walk(target)
                     if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store))


def _raise_unless(flag: str, least: int) -> gast.stmt:
    """``if not flag: raise ValueError(...)``: Python's error where a starred target finds too few
    items."""
    message = gast.Constant(
        value=f"not enough values to unpack (expected at least {least})", kind=None
    )
    error = gast.Call(
        func=gast.Name(id="ValueError", ctx=gast.Load(), annotation=None, type_comment=None),
        args=[message],
        keywords=[],
    )
    test = gast.UnaryOp(op=gast.Not(), operand=gast.Name(id=flag, ctx=gast.Load(), annotation=None,
                                                          type_comment=None))
    return gast.If(test=test, body=[gast.Raise(exc=error, cause=None)], orelse=[])


def _root(node: gast.expr) -> gast.expr:
    """The variable an item path starts from: ``L`` in ``L[0][i]``."""
    while isinstance(node, gast.Subscript):
        node = node.value
    return node


def _closure(fn: Any) -> dict[str, Any]:
    cells = fn.__closure__ or ()
    return dict(zip(fn.__code__.co_freevars, cells, strict=True))


def _bound_names(tree: gast.FunctionDef) -> tuple[set[str], dict[int, set[str]]]:
    """Every name the function binds (parameters and assignment targets), and the names each
    statement of its body appends to, by the statement's id (``bindings``)."""
    names = {arg.id for arg in tree.args.posonlyargs + tree.args.args + tree.args.kwonlyargs}
    names.update(
        n.id
        for n in syntax.walk(tree.args)
        if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Param)
    )
    appending: dict[int, set[str]] = {}
    for statement in tree.body:
        stored, appending[id(statement)] = bindings(statement)
        names |= stored
    return names, appending
