"""Which adjoints may still be the float zero they start as, when a statement's adjoint runs.

An accumulating adjoint starts as (and is reset to) the float ``0.0``, which broadcasting rules take
as zeros of any shape. A rule that reshapes, indexes or multiplies matrices needs the real shape, so
where its ``g`` may still be that float the generated code first calls ``dense_adjoint``. Which
adjoints may be is a small dataflow problem over the backward pass (a fixpoint at each loop, a union
at each branch), solved on the IR: ``FloatZeros.float_zeros``, a part of ``reverse.Reverser``
that receives the facts it reads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ast_ad.analysis.activity import SCALAR, atom_active, inputs_of, shape_class
from ast_ad.core import registry
from ast_ad.ir import nodes as ir


class FloatZeros:
    """The float-zero analysis of ``reverse.Reverser``: given the function and the reverser's facts
    about it (the active names, the names bound once, the first bindings, the shape classes, the
    calls of user functions) and two of its questions (whether a statement needs an adjoint, whether
    an elementwise rule's contribution needs no unbroadcast), its three steps."""

    def __init__(
        self,
        function: ir.Function,
        active: set[str],
        local: set[str],
        first: set[int],
        classes: dict[str, Any],
        calls: dict[int, Any],
        needs_adjoint: Callable[[ir.Stmt], bool],
        exact: Callable[[ir.Call, int], bool],
    ):
        self.function, self.active, self.local, self.first = function, active, local, first
        self.classes, self.calls = classes, calls
        self.needs_adjoint, self.exact = needs_adjoint, exact

    def float_zeros(self) -> set[int]:
        """The statements whose result's adjoint may be a float zero when their adjoint runs."""
        zero_in: set[int] = set()
        maybe = set(self.function.params) | {
            n for s in ir.walk(self.function.body) for n in ir.defined(s)
        }
        if isinstance(self.function.result, ir.Var):
            maybe.discard(self.function.result.name)  # the seed: a number only for a scalar result
        self.zeros_block(self.function.body, maybe, zero_in)
        return zero_in

    def zeros_block(
        self, body: tuple[ir.Stmt, ...], maybe: set[str], zero_in: set[int]
    ) -> set[str]:
        """``maybe``, the names whose adjoint may be a float zero, after the backward pass of
        ``body``."""
        for stmt in reversed(body):
            if not self.needs_adjoint(stmt):
                continue
            if isinstance(stmt, ir.If):
                maybe = self.zeros_block(stmt.body, set(maybe), zero_in) | \
                    self.zeros_block(stmt.orelse, set(maybe), zero_in)
            # iterate to a fixpoint; the loop may not run
            elif isinstance(stmt, (ir.For, ir.While)):
                head: set[str] = set()
                while not maybe <= head:
                    head |= maybe
                    maybe = self.zeros_block(stmt.body, set(head), zero_in)
                maybe = head
            elif isinstance(stmt, ir.Unpack) and isinstance(stmt.value, ir.Var):
                maybe.discard(stmt.value.name)  # a tuple of the parts' adjoints
            elif isinstance(stmt, ir.Assign):
                self.zeros_assign(stmt, maybe, zero_in)
        return maybe

    def zeros_assign(self, stmt: ir.Assign, maybe: set[str], zero_in: set[int]) -> None:
        zero = stmt.target in maybe
        if zero:
            zero_in.add(id(stmt))
        passes = zero and not self.needs_dense(stmt)  # whether a float zero can reach the inputs
        reset = stmt.target not in self.local and id(stmt) not in self.first
        if reset:
            maybe.add(stmt.target)
        if id(stmt) in self.calls:
            # a function of the user's: its backward pass gives None (zero) for what its path did
            # not read
            return
        value = stmt.value
        rule = registry.lookup(value.fn.obj) if isinstance(value, ir.Call) else None
        for k, atom in enumerate(value.args if isinstance(value, ir.Call) else inputs_of(value)):
            if not atom_active(atom, self.active):
                continue
            if rule is not None and (rule.nondiff or rule.vjp(k) is registry.zero):
                # nothing flows into it here, so its adjoint is what it was (``x = augmented_value(
                # x_1, x)`` resets the older ``x``'s adjoint, to the float zero, and adds nothing)
                continue
            broadcast = isinstance(value, ir.Call) and rule is not None and rule.elementwise and \
                not self.exact(value, k)
            if not passes or broadcast:  # unbroadcast makes an array of the argument's shape
                maybe.discard(atom.name)

    def needs_dense(self, stmt: ir.Assign) -> bool:
        """Whether a float zero adjoint of ``stmt``'s result must be made an array before its rule
        runs."""
        if shape_class(ir.Var(stmt.target), self.classes) == SCALAR or not isinstance(
            stmt.value, ir.Call
        ):
            return False
        if id(stmt) in self.calls:
            return True
        rule = registry.lookup(stmt.value.fn.obj)
        return rule is not None and not rule.elementwise
