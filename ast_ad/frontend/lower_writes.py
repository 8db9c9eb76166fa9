"""Lowering writes and statements made for their effect: ``y[i] = v``, ``y[i] += v``, ``L[0][i] =
v``, appends, pops, and calls that change an argument in place (``np.add.at(y, i, v)``,
``y.fill(v)``).

Python passes arrays and lists by reference; ast_ad's IR has values, not objects. A write becomes
what it computes, a new value bound to the name (``y[i] = v``: ``y = assign_item(y, i, v)``), after
the checks of ``aliasing`` that no other name reaches the object it changes (Python would change
that one too). An append and a pop stay what they are (``ir.Append``, ``ir.Pop``): generated code's
tapes are lists.
"""

from __future__ import annotations

import inspect
import operator
from typing import Any

import gast
import numpy as np

from ast_ad import runtime
from ast_ad.core import registry
from ast_ad.frontend.aliasing import Memory, _var
from ast_ad.frontend.check import refuse
from ast_ad.frontend.frame import Frame, Lowering, container_kind
from ast_ad.frontend.lower_control import ControlFlow, _atom_name
from ast_ad.frontend.lower_exprs import BINARY, ExpressionLowering
from ast_ad.frontend.nested import _load
from ast_ad.frontend.objects import Objects, Super, made_of
from ast_ad.ir import nodes as ir
from ast_ad.ir import syntax


class WriteLowering:
    """The writes and effects of ``normalize.Lowerer``, a part of it: it receives the frame, the
    lowerer, the memory model (asked before each write), the objects, the control flow and the
    expressions."""

    def __init__(
        self, at: Frame, lowering: Lowering, memory: Memory, objects: Objects, control: ControlFlow,
        exprs: ExpressionLowering
    ) -> None:
        self.at, self.lowering = at, lowering
        self.locate = lowering.locate  # (where a node is, for errors)
        self.memory, self.objects, self.control, self.exprs = memory, objects, control, exprs

    def stmt_AugAssign(self, node: gast.AugAssign) -> None:
        self.memory.guard_in_place(node.target)
        if isinstance(node.target, gast.Subscript):
            self.augment_item(node)
            return
        if isinstance(node.target, gast.Attribute):
            made = made_of(self.lowering.expr(node.target.value))
            if made is None:
                raise refuse(
                    node,
                    "augmented assignment to an attribute is supported on an object the function "
                    "makes: use a local variable",
                    self.locate,
                )
            attr = self.lowering.mangled(node.target.attr)
            key = f"<{made.fields[attr]}>" if attr in made.fields else ""
            # ``self.w += d`` on an array changes it for every name that holds it: they follow it
            if key:
                self.memory.guard_object(
                    ir.Var(made.fields[attr]), made.fields[attr], follow=True, changed=key
                )
            load = gast.copy_location(gast.Attribute(value=node.target.value, attr=node.target.attr,
                                                     ctx=gast.Load()), node.target)
            value = gast.copy_location(gast.BinOp(left=load, op=node.op, right=node.value), node)
            # (an array field keeps its dtype and shape, as ``y += v`` on a name)
            old = self.lowering.expr(load)
            self.objects.set_field(made, attr, self.lowering.bind(
                _augmented(self.lowering.expr(value), old), node.target.attr), node)
            if key:
                self.memory.changed_objects[key] = ir.Var(made.fields[attr])
            return
        if not isinstance(node.target, gast.Name):
            raise refuse(
                node,
                "augmented assignment to this target is not supported: use a local variable",
                self.locate,
            )
        load = gast.copy_location(
            gast.Name(id=node.target.id, ctx=gast.Load(), annotation=None, type_comment=None),
            node.target,
        )
        old = self.lowering.expr(load)
        added = node.value
        if isinstance(node.op, gast.Add) and not isinstance(added, gast.List) \
                and "list" not in self.at.locals and "list" not in self.at.env \
                and container_kind(self.at, old) == "list":
            # ``ys += (a, b)`` extends a list by any iterable (``+`` joins lists alone): the
            # items as a list of their own
            added = gast.copy_location(gast.Call(
                func=gast.Name(id="list", ctx=gast.Load(), annotation=None, type_comment=None),
                args=[node.value], keywords=[]), node.value)
        value = gast.copy_location(
            gast.BinOp(left=load, op=node.op, right=added), node
        )
        # Python's ``y += v`` writes into ``y`` where it is a numpy array: the sum in ``y``'s own
        # dtype and shape (numpy's ``same_kind`` cast, or its error), which
        # ``runtime.augmented_value`` gives; a number is rebound to the sum
        # (``optimize.guards.numbers_passed`` drops the call where both are proven numbers)
        computed = self.lowering.expr(value, node.target.id, user=True)
        self.rebind(node.target.id, _augmented(computed, old))

    def assign_item(
        self, target: gast.Subscript, value: ir.Atom, index: ir.Atom | None = None
    ) -> None:
        """``y[i] = v`` becomes ``y = assign_item(y, i, v)``: a new array, so every old value stays
        intact."""
        base = target.value
        if (
            not isinstance(base, gast.Name)
            or base.id not in self.at.locals
            or base.id not in self.at.env
        ):
            raise refuse(
                target,
                "item assignment is supported on local variables only (y[i] = v, not y.a[i] = v or "
                "g()[i] = v): assign to a local array first",
                self.locate,
            )
        array = self.lowering.expr(base)
        index = self.exprs.index(target.slice) if index is None else index
        self.rebind(
            base.id, ir.Call(ir.Ref(runtime.assign_item, "assign_item"), (array, index, value))
        )

    def rebind(self, user: str, value: ir.Expr) -> None:
        """The local ``user`` bound to ``value``, the new value of its object: under its one name
        where a block may assign it, else under a new one."""
        if self.memory.is_mutable(user):
            self.at.body.append(ir.Assign(self.memory.local(user).name, value, self.at.line))
        else:
            self.at.env[user] = self.lowering.bind(value, user, user=True)

    def assign_nested(self, target: gast.Subscript, value: ir.Atom) -> None:
        """``L[0][i] = v``: the object ``L[0]`` changes in place; ast_ad writes a new one back into
        ``L``.

        Another variable that reaches ``L[0]``'s object would see Python's change: that is refused
        at run time.
        """
        outer = target.value
        root = outer
        while isinstance(root, gast.Subscript):
            root = root.value
        if not (
            isinstance(root, gast.Name) and root.id in self.at.env and root.id in self.at.locals
        ):
            raise refuse(
                target,
                "item assignment is supported on local variables only (y[i] = v, L[0][i] = v): "
                "assign to a local array first",
                self.locate,
            )
        inner = self.lowering.expr(outer)
        key = f"<{inner.name}>" if isinstance(inner, ir.Var) else ""
        # ``L[k][i] = v``: the container is a name
        in_slot = isinstance(inner, ir.Var) and outer.value is root
        if isinstance(inner, ir.Var):
            self.memory.guard_object(inner, root.id, follow=True, changed=key, item=True)
            # (where the other slots are made again from where their entries lie, no slot on the
            # way that holds it too is a refusal: ``Memory.by_memory``)
            if not in_slot and self.memory.plan_of(key) is None:
                self.guard_slot(outer)
        index = self.exprs.index(target.slice)
        new = self.lowering.bind(
            ir.Call(ir.Ref(runtime.assign_item, "assign_item"), (inner, index, value)),
            f"{_atom_name(inner)}_new" if isinstance(inner, ir.Var) else "item",
        )
        if key:
            # (the variables that see ``L[0]``'s object follow this value)
            self.memory.changed_objects[key] = new
        if not in_slot:
            self.lowering.bind_target(outer, new)
            return
        # every slot of the container that holds the changed object holds the new one (``pair = [y,
        # y]``)
        assert isinstance(root, gast.Name)
        self.memory.guard_in_place(root)
        where = ir.Const(self.at.line.where())
        container = self.lowering.expr(root)
        # (where the other slots are made again from where their entries lie, ``by_memory``, a
        # slot that shares memory with the written one is no refusal: its plan)
        plan = self.memory.plan_of(key)
        slots = self.lowering.bind(
            ir.Call(ir.Ref(runtime.slots_holding, "slots_holding"),
                    (container, inner, where, ir.Const(root.id), *([plan] if plan else []))),
            "slots",
        )
        self.rebind(root.id, ir.Call(ir.Ref(runtime.replaced, "replaced"), (container, slots, new)))

    def guard_slot(self, outer: gast.Subscript) -> None:
        """Before a write into the object ``L[k]...[j]`` (``outer``) holds: refuse at run time
        where another slot of a container on the way holds it too (``pair = [y, y]``, ``box = [y,
        [y]]``), which no name shows (``runtime.check_item_apart``)."""
        chain: list[gast.Subscript] = []
        node: gast.expr = outer
        while isinstance(node, gast.Subscript):
            chain.append(node)
            node = node.value
        assert isinstance(node, gast.Name)
        root = self.lowering.expr(node)
        indices = tuple(self.exprs.index(level.slice) for level in reversed(chain))
        constants = [k.value for k in indices if isinstance(k, ir.Const)]
        keys: ir.Atom = (
            ir.Const(tuple(constants))
            if len(constants) == len(indices)
            else self.lowering.bind(ir.Pack(indices, "tuple"), "path", holds=False)
        )
        where = ir.Const(self.at.line.where())
        self.lowering.bind(
            ir.Call(
                ir.Ref(runtime.check_item_apart, "check_item_apart"),
                (root, keys, where, ir.Const(node.id)),
            ),
            "checked",
        )

    def augment_item(self, node: gast.AugAssign) -> None:
        """``y[i] += v`` reads ``y[i]`` once, adds, and assigns the item."""
        target = node.target
        if isinstance(target.value, gast.Subscript):  # ``L[0][i] += v``
            fn = BINARY.get(type(node.op))
            if fn is None:
                raise refuse(
                    node, f"the operator {type(node.op).__name__} is not supported", self.locate
                )
            new = self.lowering.bind(
                ir.Call(
                    self.lowering.operator(fn),
                    (self.lowering.expr(target), self.lowering.expr(node.value)),
                ),
                "t",
            )
            self.assign_nested(target, new)
            return
        array = self.lowering.expr(target.value) if isinstance(target.value, gast.Name) else None
        if array is None:
            raise refuse(
                target,
                "augmented assignment is supported on items of local variables only",
                self.locate,
            )
        index = self.exprs.index(target.slice)
        old = self.lowering.bind(
            ir.Call(self.lowering.operator(operator.getitem), (array, index)),
            f"{target.value.id}_item",
        )
        fn = BINARY.get(type(node.op))
        if fn is None:
            raise refuse(
                node, f"the operator {type(node.op).__name__} is not supported", self.locate
            )
        if isinstance(array, ir.Var) and self.memory.container_like(array):
            self.augment_slot(
                target,
                array,
                index,
                old,
                ir.Call(self.lowering.operator(fn), (old, self.lowering.expr(node.value))),
            )
            return
        # Python's ``+=`` changes the item itself where it is an array (a list's): another name that
        # holds it would see the change, which ast_ad computes as a new array
        self.memory.guard_object(old, target.value.id)
        computed = self.lowering.bind(
            ir.Call(self.lowering.operator(fn), (old, self.lowering.expr(node.value))), "t"
        )
        # (``y[1:] += v`` writes into the view ``y[1:]`` first: numpy's ``same_kind`` cast, or its
        # error, as ``y += v``; an entry, a number, is rebound: ``numbers_passed``)
        self.assign_item(target, self.lowering.bind(_augmented(computed, old), "t"), index)

    def augment_slot(self, target: gast.Subscript, container: ir.Var, index: ir.Atom, old: ir.Var,
                     value: ir.Call) -> None:
        """``xs[k] += v`` on a list, tuple or dict: Python changes the item ``xs[k]`` itself where
        it is an array (every name, slot and container holding it sees the change, and is made again
        from it: ``follow``), and puts a new one in the slot where it is a number
        (``runtime.augmented``, ``slots_changed``)."""
        assert isinstance(target.value, gast.Name)
        key = f"<{old.name}>"
        self.memory.guard_object(old, target.value.id, follow=True, changed=key, item=True)
        computed = self.lowering.bind(value, "t")
        new = self.lowering.bind(
            ir.Call(ir.Ref(runtime.augmented, "augmented"), (old, computed)), f"{old.name}_new"
        )
        self.memory.changed_objects[key] = new
        self.memory.guard_in_place(target.value)
        where = ir.Const(self.at.line.where())
        slots = self.lowering.bind(
            ir.Call(ir.Ref(runtime.slots_changed, "slots_changed"),
                    (container, index, old, where, ir.Const(target.value.id))),
            "slots",
        )
        self.rebind(
            target.value.id,
            ir.Call(
                ir.Ref(runtime.replaced, "replaced"), (self.lowering.expr(target.value), slots, new)
            ),
        )

    def stmt_Expr(self, node: gast.Expr) -> None:
        """A call made for its effect: an append, an in-place write ast_ad rewrites, or a call it
        can see into.

        Python passes arrays and lists by reference, so a call that may change its arguments is
        lowered to what it computes (``np.add.at(y, i, v)`` is ``y = add_at(y, i, v)``) or refused.
        """
        call = node.value
        if not isinstance(call, gast.Call):
            if not isinstance(call, gast.Constant):
                self.control.effect(node)
            return
        func = call.func
        held = (
            self.at.env.get(func.value.id)
            if isinstance(func, gast.Attribute) and isinstance(func.value, gast.Name)
            else self.at.env.get(func.id)
            if isinstance(func, gast.Name)
            else None
        )
        if (
            made_of(held) is not None
            or isinstance(held, ir.Const)
            and isinstance(held.value, Super)
        ):
            # a method of an object made inside the function (or super()'s): inlined
            self.lowering.expr(call)
            return
        if isinstance(func, gast.Attribute) and self.lowering.is_local(func.value):
            self.method_statement(call, func)
            return
        if (
            isinstance(func, gast.Name)
            and func.id not in self.at.env
            and (func.id in self.at.local_functions or func.id in self.at.partials)
        ):
            # inlined, or a partial's function called: its writes are checked as any call's
            self.lowering.expr(call)
            return
        fn = self.lowering.expr(func)
        if not isinstance(fn, ir.Ref):
            raise refuse(node, "calling a value computed inside the function is not supported yet: "
                               "call a module-level function", self.locate)
        twin = registry.in_place(fn.obj)
        out_at = registry.out_position(fn.obj)
        if twin is not None:
            self.rewrite_in_place(call, call.args[0] if call.args else None, call.args[1:], twin)
        elif any(kw.arg == "out" for kw in call.keywords) or inspect.isfunction(fn.obj) \
                and registry.lookup(fn.obj) is None \
                or out_at is not None and len(call.args) > out_at:
            # out= is a write (and so is a ufunc's output given by position: ``np.sin(x, y)``); a
            # user function is transformed, its writes checked
            self.lowering.expr(call)
        elif (
            registry.is_effect(fn.obj)
            or registry.lookup(fn.obj) is not None
            or not self.reads_locals(call)
        ):
            self.control.effect(node)
        else:
            raise refuse(
                node,
                f"ast_ad cannot tell whether {fn.hint} changes its arguments, and its result is "
                "unused: assign what it computes to a variable, or register it as a primitive "
                "(ast_ad.extend.defvjp)",
                self.locate,
            )

    def method_statement(self, call: gast.Call, func: gast.Attribute) -> None:
        """``xs.append(v)``, ``y.fill(v)``, ``y.sort()``: a method of a local value, called for its
        effect."""
        if func.attr == "pop" and not call.args and not call.keywords:
            self.pop(None, func.value)
            return
        if func.attr == "append" and len(call.args) == 1 and not call.keywords:
            target = self.lowering.expr(func.value)
            value = self.lowering.expr(call.args[0])
            self.memory.guard_in_place(func.value, container=True)
            self.at.appends_left[func.value.id] = self.at.appends_left.get(func.value.id, 1) - 1
            self.at.body.append(ir.Append(_var(target).name, value, self.at.line))
            if isinstance(value, ir.Var):
                self.memory.contain(_var(target).name, value.name)
            return
        if (
            func.attr == "extend"
            and len(call.args) == 1
            and isinstance(call.args[0], (gast.List, gast.Tuple))
        ):
            for elt in call.args[0].elts:
                append = gast.Attribute(value=func.value, attr="append", ctx=gast.Load())
                self.method_statement(
                    gast.copy_location(gast.Call(func=append, args=[elt], keywords=[]), call),
                    append,
                )
            return
        twin = registry.in_place(getattr(np.ndarray, func.attr, None))
        if twin is not None:
            self.rewrite_in_place(call, func.value, call.args, twin)
            return
        name = func.value.id
        if any(kw.arg == "out" for kw in call.keywords) or (
            (at := registry.out_position(getattr(np, func.attr, None))) is not None
            and len(call.args) >= at  # (the method's receiver is numpy's first argument)
        ):
            raise refuse(
                call,
                f"the method .{func.attr}() writes its result into an output array (out) here, "
                f"which ast_ad follows for numpy's functions: write np.{func.attr}({name}, ..., "
                f"out=y), or y = {name}.{func.attr}(...)",
                self.locate,
            )
        raise refuse(
            call,
            f"the method .{func.attr}() is called for its effect on {name}, and ast_ad follows "
            "only the in-place methods it knows (.fill, .sort, .append, .pop, .extend...): "
            f"compute a new value instead ({name} = ...), for lists xs = xs + [v] or "
            "xs = xs[::-1]",
            self.locate,
        )

    def pop(self, target: gast.expr | None, source: gast.expr) -> None:
        """``v = xs.pop()`` (or ``xs.pop()``) on a local list: how generated code reads its tape
        back."""
        if target is None:
            self.popped(source, None, False)
            return
        user = isinstance(target, gast.Name)
        self.lowering.bind_target(
            target, self.popped(source, target.id if user else "popped", user)
        )

    def popped(self, source: gast.expr, hint: str | None, user: bool) -> ir.Var:
        """``xs.pop()`` on a local list, in a statement of its own (``hint=None``: its value unused)
        or inside an expression (``h_bar + out_bar.pop()``, as reverse mode writes a list's
        adjoint): its value's name."""
        listed = self.lowering.expr(source)
        self.memory.guard_in_place(source, container=True)
        fresh = self.at.namer.fresh(hint or "popped", user=user)
        self.at.body.append(
            ir.Pop(fresh if hint is not None else None, _var(listed).name, self.at.line)
        )
        if hint is not None:
            # the popped value is what was appended: it may be shared
            self.memory.contain(_var(listed).name, fresh)
        return ir.Var(fresh)

    def rewrite_in_place(
        self, call: gast.Call, target: gast.expr | None, rest: list[Any], twin: Any
    ) -> None:
        """``f(y, *rest)`` that changes ``y`` in place becomes ``y = twin(y, *rest)``, checked like
        ``y += ...``."""
        if not (
            isinstance(target, gast.Name)
            and target.id in self.at.env
            and target.id in self.at.locals
        ):
            raise refuse(
                call,
                "this call changes its first argument in place; ast_ad follows that only for a "
                "local variable: assign the array to a local name first",
                self.locate,
            )
        self.memory.guard_in_place(target)
        held = self.lowering.hidden("twin")
        value = gast.copy_location(
            gast.Call(func=_load(held), args=[target, *rest], keywords=call.keywords), call
        )
        self.at.env[held] = ir.Ref(twin, getattr(twin, "__name__", "twin"))
        try:
            self.lowering.assign(target, value)
        finally:
            del self.at.env[held]

    def reads_locals(self, node: gast.AST) -> bool:
        return any(isinstance(n, gast.Name) and n.id in self.at.env for n in syntax.walk(node))


def _augmented(computed: ir.Atom, old: ir.Atom) -> ir.Call:
    """``augmented_value(computed, old)``: what ``op=`` leaves where ``old`` held the value before
    it and ``computed`` is ``old op v`` (``runtime.augmented_value``)."""
    return ir.Call(ir.Ref(runtime.augmented_value, "augmented_value"), (computed, old))
