"""Calls of the user's own functions in reverse mode, and of helpers it reads by their source.

Such a call becomes a call of the callee's generated pair: ``y, y_saved = f_fwd(x)`` forward and
``x_bar = f_bwd(y_saved, y_bar)`` backward. ``Calls.plan_calls`` derives each callee's adjoint
(through the transformation's ``derive``, cached per function, differentiated arguments and their
labels) before the reverser writes either pass; the reverser's adjoint rules then read the plan
(``calls``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ast_ad.analysis.activity import (
    at_line,
    atom_active,
    bind_call,
    call_labels,
    is_library,
    is_user_function,
    library_call,
)
from ast_ad.analysis.complexness import complex_labels
from ast_ad.analysis.kinds import Kinds
from ast_ad.core import registry
from ast_ad.errors import LocatedError, MissingRuleError, UnsupportedSyntaxError
from ast_ad.ir import nodes as ir
from ast_ad.ir.naming import Namer
from ast_ad.ir.syntax import RefTable

if TYPE_CHECKING:
    from ast_ad.modes.adjoint import Adjoint, Derive


class Calls:
    """The call planning of ``reverse.Reverser``, a part of it that receives what it reads: the
    function and its facts (active names, shape classes, structured names, kinds), what it fills
    in (``callees``, ``calls``: by statement, the callee's adjoint, its saved name, the arguments,
    the active ones), the names and references of the generated code, the driver (``derive``), and
    three of the reverser's questions and answers (whether a statement needs an adjoint, an error at
    a statement, the adjoint of code forward mode made)."""

    def __init__(
        self,
        function: ir.Function,
        facts: tuple[set[str], dict[str, Any], set[str], Kinds],
        filled: tuple[list[Any], dict[int, Any], set[str]],
        refs: RefTable,
        namer: Namer,
        derive: Derive,
        checkpoints: int | str | None,
        needs_adjoint: Callable[[ir.Stmt], bool],
        error: Callable[[ir.Stmt, str], LocatedError],
        derived_again: Callable[[Any, tuple[int, ...], tuple[int, ...]], Adjoint],
    ):
        self.function = function
        self.active, self.classes, self.structured, self.kinds = facts
        self.callees, self.calls, self.rebound = filled
        self.refs, self.namer, self.derive, self.checkpoints = refs, namer, derive, checkpoints
        self.needs_adjoint, self.error, self.derived_again = needs_adjoint, error, derived_again
        # the names that may hold complex values (``complexness``), set by the reverser
        self.complexes: frozenset[str] = frozenset()
        # by statement, the names a call passes that take no adjoint from it (its callee's
        # result does not depend on them)
        self.ignored: dict[int, frozenset[str]] = {}

    def plan_calls(self) -> None:
        """Derive the adjoint of every call to a user function whose result needs an adjoint."""
        for stmt in ir.walk(self.function.body):
            made = (
                made_code(stmt.value)
                if isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Call)
                else None
            )
            if (
                isinstance(stmt, ir.Assign)
                and isinstance(stmt.value, ir.Call)
                and self.needs_adjoint(stmt)
                and (
                    made is not None or is_user_function(stmt.value.fn.obj) or self.by_source(stmt)
                )
            ):
                args = list(stmt.value.args) if made is not None else self.bind_call(stmt)
                active = tuple(p for p, a in enumerate(args) if atom_active(a, self.active))
                callee = self.derive_callee(stmt, active, args) if made is None else \
                    self.derived_again(made, active, self.labels(args, stmt))
                flowing = tuple(p for p in active if p not in callee.zero_grads)
                if flowing and flowing != active:
                    # an argument the callee's result does not depend on takes no adjoint from
                    # the call (its backward pass gives it zeros): the callee is derived in the
                    # others alone, so that nothing is saved for it, made, or added (and the
                    # reverser finds again which names the result needs adjoints of: ``ignored``)
                    taking = {a.name for p, a in enumerate(args)
                              if p in flowing and isinstance(a, ir.Var)}
                    self.ignored[id(stmt)] = frozenset(
                        a.name for p, a in enumerate(args)
                        if p in active and p not in flowing and isinstance(a, ir.Var)
                        and a.name not in taking)
                    active = flowing
                    callee = self.derive_callee(stmt, active, args) if made is None else \
                        self.derived_again(made, active, self.labels(args, stmt))
                self.callees.append(callee)
                if made is None:
                    # recorded so that redefining the callee is noticed
                    self.refs.ref(stmt.value.fn)
                saved = self.namer.fresh(f"{stmt.target}_saved")
                if stmt.target in self.rebound:
                    self.rebound.add(saved)
                self.calls[id(stmt)] = (
                    callee,
                    saved,
                    args,
                    [a for p, a in enumerate(args) if p in active],
                )

    def derive_callee(
        self, stmt: ir.Assign, active: tuple[int, ...], args: list[ir.Atom]
    ) -> Adjoint:
        call = ir.call_of(stmt)
        # a helper's stand-in in the language, if it has one
        source = registry.read_as(call.fn.obj) or call.fn.obj
        if is_library(source):
            raise library_call(stmt, call.fn.hint, source)
        try:
            return self.derive(source, active, self.labels(args, stmt), False, self.checkpoints)
        except (LocatedError, UnsupportedSyntaxError) as exc:
            if is_user_function(call.fn.obj):
                raise
            raise at_line(
                MissingRuleError,
                stmt,
                f"{call.fn.hint}, a helper of ast_ad's generated code, has no "
                "reverse rule for an argument differentiated here, and its source is outside the "
                f"language ast_ad differentiates ({exc.args[0] if exc.args else exc}), so reverse "
                "mode "
                "over this code is not supported yet",
            ) from None

    def by_source(self, stmt: ir.Assign) -> bool:
        """A helper of generated code whose rule has no reverse rule for an argument that is
        differentiated here: reverse mode differentiates it by its source, as it does the user's own
        functions."""
        call = ir.call_of(stmt)
        fn = call.fn.obj
        if not (inspect.isfunction(fn) and registry.is_helper(fn)):
            return False
        rule = registry.lookup(fn)
        if rule is None:
            return True
        if rule.nondiff:
            return False
        return any(
            atom_active(a, self.active) and rule.vjp(k) is None for k, a in enumerate(call.args)
        )

    def bind_call(self, stmt: ir.Assign) -> list[ir.Atom]:
        return bind_call(stmt, self.error)

    def labels(self, args: list[ir.Atom], stmt: ir.Stmt) -> tuple[int, ...]:
        labels = call_labels(args, self.classes, self.structured, self.kinds, stmt)
        return complex_labels(labels, args, self.complexes, stmt)


def made_code(call: ir.Call) -> Any:
    """The ``Tangent`` whose ``_jvp`` ``call`` calls, where it is forward mode's code read again as
    IR and its IR is finished (``Tangent.code``), else ``None``."""
    obj = call.fn.obj
    if (
        isinstance(obj, ir.CalleeRef)
        and obj.part == "jvp"
        and getattr(obj.adjoint, "code", None) is not None
    ):
        return obj.adjoint
    return None


def callees_in_order(top: Any) -> list[Any]:
    """Every adjoint (or tangent) ``top`` calls, callees before callers, each once: the order their
    functions are printed in."""
    order: dict[int, Any] = {}
    _visit_callees(top, order, {id(top)})
    if any(c is top for a in [top, *order.values()] for c in a.callees):
        order[id(top)] = top  # top calls itself: it needs its own pair too
    return list(order.values())


def _visit_callees(a: Any, order: dict[int, Any], seen: set[int]) -> None:
    for callee in a.callees:
        if id(callee) not in seen:
            seen.add(id(callee))
            _visit_callees(callee, order, seen)
            order[id(callee)] = callee
