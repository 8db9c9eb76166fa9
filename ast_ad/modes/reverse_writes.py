"""Reverse mode's adjoints of the statements that change an object: an item write in place, an
append, a pop.

``y[i] = v`` written in place (``analysis.in_place_writes``) gives ``v`` the adjoint's entries, puts
the overwritten entries back from the tape and zeroes their adjoints; ``xs.append(v)`` pops ``v``'s
adjoint off the list's; ``y = xs.pop()`` puts ``y``'s adjoint back on the end of the list's, then
``y`` back on the list.
"""

from __future__ import annotations

import operator

from ast_ad import runtime
from ast_ad.analysis.activity import InPlace, atom_active, packed_result
from ast_ad.analysis.kinds import Kinds
from ast_ad.ir import nodes as ir
from ast_ad.ir.naming import Namer
from ast_ad.ir.syntax import RefTable
from ast_ad.modes.accumulate import Accumulation
from ast_ad.modes.saving import Saving, restore_mark
from ast_ad.modes.templates import Scratch

_ITEM = ir.Ref(operator.getitem, "operator.getitem")


class WriteAdjoints:
    """The adjoint rules of ``reverse.Reverser`` for writes, appends and pops, a part of it that
    receives what it reads: the function and its facts (active names, the lists it owns, what each
    name holds, the loops that write in place), the generated code's names and references, the
    reverser's adjoints, and its tapes and restores (``saving``'s, as callables)."""

    def __init__(
        self,
        function: ir.Function,
        facts: tuple[set[str], set[str], Kinds, InPlace],
        names: tuple[RefTable, Namer, Scratch],
        adjoints: Accumulation,
        saving: Saving,
    ):
        self.function = function
        self.active, self.owned, self.kinds, self.in_place = facts
        self.refs, self.namer, self.scratch = names
        self.adjoints = adjoints
        self.tape, self.restores, self.found_before = saving.tape, saving.restores, \
            saving.found_before

    def private_list(self, name: str) -> bool:
        """Whether ``name`` holds only lists this function made (``analysis.owned_lists``: ``xs =
        []``, say): no caller sees them, so their pops can be undone by pushing the value back, and
        the adjoint of each, one entry an item, lives until the backward pass reaches where it was
        made (``adjoint_pop``), where the next contribution starts it again, as it does any adjoint
        of a name bound again."""
        return name in self.owned

    def adjoint_write(self, stmt: ir.Assign) -> list[ir.Stmt]:
        """The backward pass of ``y[i] = v`` written in place: ``v``'s adjoint (read before anything
        changes), then the overwritten entries back from the tape, and their adjoints zeroed: they
        take no gradient."""
        call = ir.call_of(stmt)
        name, index, value = stmt.target, call.args[1], call.args[2]
        bar = self.adjoints.bar(name)
        out: list[ir.Stmt] = []
        if atom_active(value, self.active):
            if self.kinds.entry_of(call.args[0], index, stmt) and self.kinds.is_number(value, stmt):
                # one float entry, written by a number
                taken = self.adjoints.part(ir.Call(_ITEM, (ir.Var(bar), index)))
            else:
                taken = self.adjoints.part(
                    ir.Call(
                        ir.Ref(runtime.assign_item_vjp_value, "assign_item_vjp_value"),
                        (ir.Var(bar), ir.Var(name), index, value),
                    )
                )
            out += self.adjoints.accumulate(value.name, self.adjoints.real_part(name, value, taken))
        entry = self.scratch.fresh("")
        before = self.found_before.get(id(stmt))
        # the entry back (from the array as the loop found it, where it writes each entry once:
        # ``saving.plan_written_once``), its adjoint zeroed
        out += [
            ir.Assign(entry, ir.Call(_ITEM, (ir.Var(before), index)), ir.NOWHERE)
            if before is not None else ir.Pop(entry, self.tape(name, "entries"), ir.NOWHERE),
            ir.SetItem(name, index, ir.Var(entry), ir.NOWHERE),
            ir.SetItem(bar, index, ir.Const(0.0), ir.NOWHERE),
        ]
        return out

    def adjoint_append(self, stmt: ir.Append) -> list[ir.Stmt]:
        """``xs.append(v)`` backward: ``v``'s adjoint is the last entry of the list's, popped off
        it. Where nothing may have flowed into the list's adjoint yet (nothing after the append
        reads the list, on some path or in the loop's last step), it is ``None`` there: zeros for
        the list's items first (``dense_adjoint``)."""
        bar = self.adjoints.bar(stmt.target)
        out: list[ir.Stmt] = []
        # a list returned (in a tuple, maybe): its adjoint is the caller's, which may be the float
        # zero
        returned = packed_result(self.function)
        from_caller = ir.Var(stmt.target) == self.function.result \
            or returned is not None and ir.Var(stmt.target) in returned.elts
        if (
            stmt.target not in self.adjoints.live
            or stmt.target in self.adjoints.pending
            or from_caller
        ):
            # (an adjoint reset since its last use starts from its zero, not from what it held; so
            # does a local one nothing has flowed into: no zero was bound for it at the top, as
            # where the list is read before the append and not after: ``parts.append(x)`` after
            # ``np.concatenate(parts)``)
            current = (
                self.adjoints.zero(stmt.target)
                if stmt.target in self.adjoints.pending
                or stmt.target in self.adjoints.local and stmt.target not in self.adjoints.live
                and not from_caller
                else ir.Var(bar)
            )
            self.adjoints.pending.discard(stmt.target)
            dense = ir.Call(
                ir.Ref(runtime.dense_adjoint, "dense_adjoint"), (current, ir.Var(stmt.target))
            )
            out.append(ir.Assign(bar, dense, ir.NOWHERE))
            self.adjoints.live.add(stmt.target)
        if atom_active(stmt.value, self.active):
            part = self.scratch.fresh("")
            out += self.adjoints.accumulate(
                stmt.value.name,
                self.adjoints.real_part(
                    stmt.target, stmt.value, ([ir.Pop(part, bar, ir.NOWHERE)], ir.Var(part))
                ),
            )
        else:
            out.append(ir.Pop(None, bar, ir.NOWHERE))
        return [*out, restore_mark(stmt.target, id(stmt), unappend=True)]

    def adjoint_pop(self, stmt: ir.Pop) -> list[ir.Stmt]:
        """``y = xs.pop()`` backward: ``y``'s adjoint goes back on the end of the list's
        (``unpopped``), then ``y`` back on the list, then ``y``'s value before the pop. The list's
        adjoint holds one entry an item, as the rule of ``append`` (which pops it) reads it."""
        target, source = stmt.target, stmt.source
        assert target is not None  # ``run`` refuses a pop whose value is not bound
        stmts, entry = self.adjoints.adjoint_or_zeros(target)
        # the list's adjoint starts at None, at the top
        unpopped = ir.Ref(runtime.unpopped, "unpopped")
        bar = self.adjoints.bar(source)
        out = [
            *stmts,
            ir.Assign(bar, ir.Call(unpopped, (ir.Var(bar), entry, ir.Var(source))), ir.NOWHERE),
        ]
        self.adjoints.live.add(source)
        self.adjoints.bound_again(target, stmt)
        return out + self.restores(stmt)



def named_pops(function: ir.Function) -> ir.Function:
    """``function`` with a name for the value of each pop whose value it drops (``xs.pop()``:
    ``xs_popped = xs.pop()``), which the backward pass puts back on the list."""
    if not any(isinstance(s, ir.Pop) and s.target is None for s in ir.walk(function.body)):
        return function
    namer = Namer(used=function.names())

    def named(stmt: ir.Stmt) -> list[ir.Stmt]:
        if isinstance(stmt, ir.Pop) and stmt.target is None:
            return [ir.Pop(namer.fresh(f"{stmt.source}_popped"), stmt.source, stmt.line)]
        return [stmt]

    return ir.with_body(function, ir.mapped(function.body, named))
