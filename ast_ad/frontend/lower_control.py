"""Lowering control flow: ``if``, ``while`` and ``for`` (over ranges, sequences, ``enumerate``,
``zip``, ``reversed``), branch conditions, and the expressions and statements kept as written (a
``while`` test, a ``print``). A part of ``normalize.Lowerer`` (``frame``), which lowers the
statements and expressions inside.
"""

from __future__ import annotations

import builtins
import operator
from typing import Any

import gast

from ast_ad import runtime
from ast_ad.frontend.aliasing import Memory, loop_rebinds, loop_shared
from ast_ad.frontend.check import refuse
from ast_ad.frontend.frame import Frame, Lowering, container_kind
from ast_ad.frontend.nested import Nesting, _load
from ast_ad.frontend.structure import bound_names
from ast_ad.ir import nodes as ir
from ast_ad.ir import syntax
from ast_ad.ir.naming import identifier

# builtins whose result a loop cannot index
ITERATORS = (zip, map, filter, enumerate, reversed, iter)


class ControlFlow:
    """The control flow of ``normalize.Lowerer``, a part of it: it receives the frame, the lowerer
    (to lower the blocks), the memory model and the inlining."""

    def __init__(self, at: Frame, lowering: Lowering, memory: Memory, nested: Nesting) -> None:
        self.at, self.lowering = at, lowering
        self.locate = lowering.locate  # (where a node is, for errors)
        self.memory, self.nested = memory, nested

    def stmt_If(self, node: gast.If) -> None:
        self.lowering.prepare(node)
        test = self.test(node.test)
        # each branch starts from what is known before the ``if``; after it, a variable's container
        # kind is known where both branches leave it the same (``Frame.kinds``)
        before = dict(self.at.kinds)
        body = self.lowering.block(node.body)
        after_body = dict(self.at.kinds)
        self.at.kinds.clear()
        self.at.kinds.update(before)
        orelse = self.lowering.block(node.orelse)
        joined = {n: k for n, k in self.at.kinds.items() if after_body.get(n) == k}
        self.at.kinds.clear()
        self.at.kinds.update(joined)
        self.at.body.append(ir.If(test, body, orelse, self.lowering.line_of(node)))

    def stmt_While(self, node: gast.While) -> None:
        self.lowering.prepare(node)
        test = self.raw(node.test)
        self.at.loops.append(bindings(node)[1])
        self.at.loop_shared.append(
            loop_shared(node, self.memory.checked_only, self.lowering.static)
        )
        self.at.loop_rebinds.append(loop_rebinds(node))
        kinds = self.unknown_kinds(bound_names(node.body))
        try:
            self.at.body.append(
                ir.While(test, self.lowering.block(node.body), self.lowering.line_of(node))
            )
        finally:
            self.at.loops.pop()
            self.at.loop_shared.pop()
            self.at.loop_rebinds.pop()
            self.joined_kinds(kinds)

    def unknown_kinds(self, names: set[str]) -> dict[str, str]:
        """Forget, for a loop's body, the container kinds of the variables it binds again: from its
        second step on, a statement before the binding sees what the binding made (a dict where
        the loop began with a list), so only what the body itself binds before a read is known
        there. The kinds forgotten, by name, for ``joined_kinds``."""
        forgotten: dict[str, str] = {}
        for user in sorted(names):
            atom = self.at.env.get(user)
            if isinstance(atom, ir.Var) and atom.name in self.at.kinds:
                forgotten[atom.name] = self.at.kinds.pop(atom.name)
        return forgotten

    def joined_kinds(self, forgotten: dict[str, str]) -> None:
        """After a loop: a variable is known to hold the kind it held before the loop only where
        the body left it the same (the loop may run no step, or several)."""
        for name, kind in forgotten.items():
            if self.at.kinds.get(name) == kind:
                continue
            self.at.kinds.pop(name, None)

    def stmt_Break(self, node: gast.Break) -> None:
        self.at.body.append(ir.Break(self.lowering.line_of(node)))

    def stmt_For(self, node: gast.For) -> None:
        made = self.at.object_lists.get(node.iter.id) if isinstance(node.iter, gast.Name) else None
        if (
            made is not None
            and isinstance(node.iter, gast.Name)
            and node.iter.id not in self.at.env
        ):
            self.unrolled_objects(node, made)
            return
        positions = self.object_positions(node)
        if positions is not None:
            self.unrolled_positions(node, positions)
            return
        listed = (
            self.at.function_lists.get(node.iter.id) if isinstance(node.iter, gast.Name) else None
        )
        if (
            listed is not None
            and isinstance(node.iter, gast.Name)
            and node.iter.id not in self.at.env
        ):
            self.unrolled(node, listed)
            return
        self.at.loops.append(bindings(node)[1])
        self.at.loop_shared.append(
            loop_shared(node, self.memory.checked_only, self.lowering.static)
        )
        self.at.loop_rebinds.append(loop_rebinds(node))
        self.at.loop_targets.append(
            {n.id for n in syntax.walk(node.target) if isinstance(n, gast.Name)}
        )
        try:
            self.lower_for(node)
        finally:
            self.at.loops.pop()
            self.at.loop_shared.pop()
            self.at.loop_rebinds.pop()
            self.at.loop_targets.pop()

    def object_positions(self, node: gast.For) -> list[tuple[Any, ...]] | None:
        """The values of a loop's names, step by step, where the loop goes over the positions of a
        list of objects made here, its body reading ``layers[k]``: ``for k in range(len(layers))``
        (any ``range`` of constants), ``for k, layer in enumerate(layers)``; else ``None``."""
        target, call = node.target, node.iter
        if not isinstance(call, gast.Call) or call.keywords:
            return None
        if self.resolves_to(call.func, enumerate) and len(call.args) == 1 \
                and isinstance(call.args[0], gast.Name) \
                and call.args[0].id in self.at.object_lists and call.args[0].id not in self.at.env \
                and isinstance(target, gast.Tuple) and len(target.elts) == 2:
            return list(enumerate(self.at.object_lists[call.args[0].id]))
        if not (isinstance(target, gast.Name) and self.resolves_to(call.func, range)):
            return None
        read = any(
            isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name)
            and n.value.id in self.at.object_lists and n.value.id not in self.at.env
            and isinstance(n.slice, gast.Name) and n.slice.id == target.id
            for n in gast.walk(node)
        )
        if not read:
            return None
        bounds = [self.lowering.expr(arg) for arg in call.args]
        if not all(isinstance(b, ir.Const) and type(b.value) is int for b in bounds):
            raise refuse(
                node,
                "a loop that reads a list of objects made here by position goes over a range of "
                "constants (for k in range(len(layers)): ...)",
                self.locate,
            )
        return [(k,) for k in range(*(b.value for b in bounds))]  # type: ignore[union-attr]

    def unrolled_positions(self, node: gast.For, steps: list[tuple[Any, ...]]) -> None:
        """The loop of ``object_positions``, its body once for each step, each name standing for
        its value there (a position, an object)."""
        names = node.target.elts if isinstance(node.target, gast.Tuple) else [node.target]
        if node.orelse or not all(isinstance(n, gast.Name) for n in names) or any(
            isinstance(n, (gast.Break, gast.Continue, gast.Return)) for n in gast.walk(node)
        ):
            raise refuse(
                node,
                "a loop over the positions of a list of objects made here is supported with plain "
                "names and no break, continue or else",
                self.locate,
            )
        for values in steps:
            for target, value in zip(names, values, strict=True):
                self.at.env[target.id] = ir.Const(value)
            for stmt in node.body:
                self.at.line = self.lowering.line_of(stmt)
                self.lowering.stmt(stmt)

    def unrolled_objects(self, node: gast.For, made: list[Any]) -> None:
        """``for layer in layers: ...`` over a list of objects made here: the body once for each,
        ``layer`` standing for it."""
        self.unrolled(node, made, "objects made here", "object")

    def unrolled(self, node: gast.For, items: list[Any], what: str = "functions",
                 each: str = "function") -> None:
        """``for g in fs: ...`` over a list of functions (or of objects made here): the body once
        for each, ``g`` standing for it."""
        if (
            not isinstance(node.target, gast.Name)
            or node.orelse
            or any(isinstance(n, (gast.Break, gast.Continue, gast.Return)) for n in gast.walk(node))
        ):
            raise refuse(
                node,
                f"a loop over a list of {what} is supported with one name for the {each} and no "
                "break, continue or else",
                self.locate,
            )
        for item in items:
            if each == "object":
                self.at.env[node.target.id] = ir.Const(item)
            else:
                self.at.local_functions[node.target.id] = item
                self.at.env.pop(node.target.id, None)
            for stmt in node.body:
                self.at.line = self.lowering.line_of(stmt)
                self.lowering.stmt(stmt)

    def lower_for(self, node: gast.For) -> None:
        line = self.lowering.line_of(node)
        counted = self.range_call(node.iter)
        if counted is not None and isinstance(node.target, gast.Name):
            self.lowering.prepare(node)
            kinds = self.unknown_kinds(bound_names(node.body))
            try:
                self.at.body.append(
                    ir.For(
                        self.memory.local(node.target.id).name,
                        counted,
                        self.lowering.block(node.body),
                        line,
                    )
                )
            finally:
                self.joined_kinds(kinds)
            return
        length, pattern = self.iteration(node.iter, node.target)
        index = self.at.namer.fresh("k")
        self.at.mutable.add(index)
        self.lowering.prepare(node)
        kinds = self.unknown_kinds(bound_names([node.target, *node.body]))
        indices = self.lowering.bind(ir.Call(ir.Ref(range, "range"), (length,)), "indices")
        outer, self.at.body = self.at.body, []
        try:
            for target, seq, backwards in pattern:
                self.at.line = line
                item = (
                    ir.Var(index)
                    if seq is None
                    else self.lowering.bind(
                        ir.Call(
                            self.lowering.operator(operator.getitem),
                            (seq, self.position(backwards, index)),
                        ),
                        f"{_atom_name(seq)}_item",
                    )
                )
                self.lowering.bind_target(target, item)
            for stmt in node.body:
                self.at.line = self.lowering.line_of(stmt)
                self.lowering.stmt(stmt)
            body = tuple(self.at.body)
        finally:
            self.at.body = outer
            self.joined_kinds(kinds)
        self.at.body.append(ir.For(index, indices, body, line))

    def range_call(self, node: gast.expr) -> ir.Atom | None:
        """The lowered ``range(...)`` object if ``node`` calls the builtin range, else ``None``."""
        if isinstance(node, gast.Call) and self.resolves_to(node.func, range):
            return self.lowering.expr(node, "r")
        return None

    def iteration(self, node: gast.expr, target: gast.expr) -> tuple[ir.Atom, list[Any]]:
        """``for target in node`` over sequences: the trip count, and (target, sequence, reversed)
        triples.

        ``enumerate``, ``zip`` and ``reversed`` are unfolded, so ``for i, (a, b) in
        enumerate(zip(xs, ys))`` indexes ``xs`` and ``ys`` with the loop counter itself.
        """
        call = node if isinstance(node, gast.Call) else None
        if call and self.resolves_to(call.func, enumerate) and len(call.args) == 1 \
                and isinstance(target, gast.Tuple) and len(target.elts) == 2:
            length, pattern = self.iteration(call.args[0], target.elts[1])
            return length, [(target.elts[0], None, False)] + pattern
        strict = [
            kw.value.value
            for kw in getattr(call, "keywords", [])
            if kw.arg == "strict"
            and isinstance(kw.value, gast.Constant)
            and kw.value.value in (True, False)
        ]
        if (
            call
            and self.resolves_to(call.func, zip)
            and call.args
            and len(strict) == len(call.keywords)
            and isinstance(target, gast.Tuple)
            and len(target.elts) == len(call.args)
        ):
            parts = [self.iteration(arg, t) for arg, t in zip(call.args, target.elts, strict=True)]
            lengths = tuple(length for length, _ in parts)
            # zip(..., strict=True): Python's ValueError where the lengths differ
            if strict and strict[0]:
                length = self.lowering.bind(
                    ir.Call(ir.Ref(runtime.zip_length, "zip_length"), lengths), "n"
                )
            else:
                length = (
                    lengths[0]
                    if len(lengths) == 1
                    else self.lowering.bind(ir.Call(ir.Ref(min, "min"), lengths), "n")
                )
            return length, [item for _, pattern in parts for item in pattern]
        backwards = (
            call is not None and self.resolves_to(call.func, reversed) and len(call.args) == 1
        )
        held = ""
        mapped = (
            call is not None
            and self.resolves_to(call.func, map)
            and len(call.args) >= 2
            and self.nested.is_function(call.args[0])
            and not call.keywords
        )  # lowered to a list already (``mapped``)
        if call is not None and not backwards and not mapped \
                and any(self.resolves_to(call.func, it) for it in ITERATORS):
            # an iterator has no length and cannot be indexed: its items, as a list, are what the
            # loop reads
            held = self.lowering.hidden("list")
            self.at.env[held] = ir.Ref(list, "list")
            node = gast.copy_location(gast.Call(func=_load(held), args=[node], keywords=[]), node)
        iterated = call.args[0] if call is not None and backwards else node
        seq = self.lowering.expr(iterated)
        self.at.env.pop(held, None)
        return self.steps(seq), [(target, self.by_position(seq), backwards)]

    def by_position(self, seq: ir.Atom) -> ir.Atom:
        """What a loop over ``seq`` reads its items from by position: ``seq`` itself, or the keys of
        a dict and the members of a set made here, in Python's order (``keys_of``; they carry no
        gradient)."""
        if container_kind(self.at, seq) not in ("dict", "set"):
            return seq
        return self.lowering.bind(
            ir.Call(ir.Ref(runtime.keys_of, "keys_of"), (seq, ir.Const(self.where()))),
            f"keys_of_{_atom_name(seq)}",
        )

    def steps(self, seq: ir.Atom) -> ir.Atom:
        """The number of steps of a loop over ``seq``: its length where it is known to be a list, a
        tuple, a dict or a set made here (a string, a range: a constant); else ``loop_length``,
        which refuses at run time what is not read by position in Python's order (a dict that comes
        into the function)."""
        if container_kind(self.at, seq) or (
            isinstance(seq, ir.Const) and isinstance(seq.value, (str, bytes, range))
        ):
            return self.lowering.bind(
                ir.Call(ir.Ref(len, "len"), (seq,)), f"n_{_atom_name(seq)}"
            )
        return self.lowering.bind(
            ir.Call(ir.Ref(runtime.loop_length, "loop_length"), (seq, ir.Const(self.where()))),
            f"n_{_atom_name(seq)}",
        )

    def where(self) -> str:
        """The line being lowered, as the run-time checks of a loop name it: its file's name and
        its number (``loop.py:12``)."""
        line = self.at.line
        return f"{line.filename.rsplit('/', 1)[-1]}:{line.lineno}"

    def position(self, backwards: bool, index: str) -> ir.Atom:
        if not backwards:
            return ir.Var(index)
        return self.lowering.bind(
            ir.Call(self.lowering.operator(operator.sub), (ir.Const(-1), ir.Var(index))), "back"
        )

    def resolves_to(self, node: gast.expr, obj: Any) -> bool:
        return isinstance(node, gast.Name) and self.lowering.static(node) is obj

    def test(self, node: gast.expr) -> ir.Atom:
        """A branch condition, as a name the reverse pass can read again."""
        if isinstance(node, gast.Name):
            atom = self.lowering.name(node)
            steady = isinstance(atom, ir.Var) and atom.name not in self.at.mutable \
                and self.at.owner.get(atom.name) not in self.at.changing
            if steady:
                return atom
            # a variable that may change, inside the branch or later: the reverse pass needs the
            # decision itself
            return self.lowering.bind(atom, "cond")
        # The decision is kept as a bool: the reverse pass reads it again without asking the value a
        # second time (a dask array would compute again), and Python converts it once, as it does
        # itself.
        if (
            self.lowering.static(
                gast.Name(id="bool", ctx=gast.Load(), annotation=None, type_comment=None)
            )
            is builtins.bool
        ):
            node = _decision(node)
        return self.lowering.bind(self.raw(node), "cond")

    def raw(self, node: gast.expr) -> ir.Raw:
        """``node`` kept as written, its names rewritten (see ``effect``); it carries no
        gradient."""
        refs: list[ir.Ref] = []
        renamed = _rename_loads(syntax.clone(node), lambda name: self.rename(name, refs))
        return ir.Raw(renamed, tuple(refs))

    def rename(self, name: gast.Name, refs: list[ir.Ref]) -> gast.Name:
        atom = self.lowering.name(name)
        if isinstance(atom, ir.Var):
            return gast.Name(id=atom.name, ctx=gast.Load(), annotation=None, type_comment=None)
        refs.append(atom if isinstance(atom, ir.Ref) else ir.Ref(atom.value, "const"))
        return gast.Name(
            id=f"§{len(refs) - 1}", ctx=gast.Load(), annotation=None, type_comment=None
        )

    def effect(self, node: gast.stmt) -> None:
        """Keep ``node`` as it is, its names rewritten: locals to their SSA names, the rest to
        refs."""
        refs: list[ir.Ref] = []
        renamed = _rename_loads(syntax.clone(node), lambda name: self.rename(name, refs))
        self.at.body.append(ir.Effect(renamed, tuple(refs), self.at.line))


def _decision(node: gast.expr) -> gast.expr:
    """``node`` as a test that gives a bool and asks each value for its truth once, as ``if node:``
    does: ``bool(a) and bool(b)`` for ``a and b`` (``bool(a and b)`` would ask ``a`` twice when it
    is false)."""
    if isinstance(node, gast.BoolOp):
        return gast.copy_location(
            gast.BoolOp(op=node.op, values=[_decision(v) for v in node.values]), node
        )
    if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.Not):
        return node
    truth = gast.Name(id="bool", ctx=gast.Load(), annotation=None, type_comment=None)
    return gast.copy_location(gast.Call(func=truth, args=[node], keywords=[]), node)


def _rename_loads(node: gast.AST, rename: Any) -> gast.AST:
    """``node`` with the function's names it reads renamed; a comprehension's or a lambda's own
    names are theirs (``[v > 0 for v in x]`` reads no ``v`` of the function's) and stay as
    written."""
    own = ir.own_loads(node)
    renamed: gast.AST = syntax.substituted(
        node,
        lambda name: (
            gast.copy_location(rename(name), name)
            if isinstance(name.ctx, gast.Load) and id(name) not in own
            else None
        ),
    )
    return renamed


def bindings(node: gast.AST) -> tuple[set[str], set[str]]:
    """The names ``node`` binds (assigns, writes an item of, takes as a parameter), and those it
    appends to (``xs.append(v)``, ``xs.extend(...)``): one walk."""
    stored: set[str] = set()
    appended: set[str] = set()
    for n in syntax.walk(node):
        kind = type(n)
        if kind is gast.Name:
            if type(n.ctx) is gast.Store or type(n.ctx) is gast.Param:
                stored.add(n.id)
        elif kind is gast.Subscript:
            root = n.value  # the variable an item path starts from: ``L`` in ``L[0][i] = v``
            while type(root) is gast.Subscript:
                root = root.value
            if type(n.ctx) is gast.Store and type(root) is gast.Name:
                stored.add(root.id)
        elif (
            kind is gast.Call
            and type(n.func) is gast.Attribute
            and n.func.attr in ("append", "extend")
            and type(n.func.value) is gast.Name
        ):
            appended.add(n.func.value.id)
    return stored, appended


def _atom_name(atom: ir.Atom) -> str:
    return atom.name if isinstance(atom, ir.Var) else identifier(getattr(atom, "hint", "seq"))


def written_parameters(tree: gast.FunctionDef) -> list[str]:
    """The parameters of a def that its body may change in place (``a[0] = v``, ``a *= s``,
    ``a.sort()``)."""
    params = {a.id for a in tree.args.posonlyargs + tree.args.args + tree.args.kwonlyargs}
    return [p for p in dict.fromkeys(written_in_place(tree)) if p in params]


def written_in_place(node: gast.stmt) -> list[str]:
    """The names whose objects ``node`` may change in place: items written (``y[i] = v``), augmented
    (``y += d``), or passed to a call made for its effect (``y.sort()``, ``np.add.at(y, i, v)``)."""
    names: list[str] = []
    for n in gast.walk(node):
        if (
            isinstance(n, gast.Subscript)
            and isinstance(n.ctx, gast.Store)
            and isinstance(_item_root(n), gast.Name)
        ):
            names.append(_item_root(n).id)
        elif isinstance(n, gast.AugAssign) and isinstance(n.target, gast.Name):
            names.append(n.target.id)
        elif isinstance(n, gast.Expr) and isinstance(n.value, gast.Call):
            call = n.value
            # (a list's own change leaves the objects in it as they are)
            if isinstance(call.func, gast.Attribute):
                changed = (
                    []
                    if call.func.attr in ("append", "extend", "pop", "insert")
                    else [call.func.value]
                )
            else:
                changed = call.args[:1]
            names += [a.id for a in changed if isinstance(a, gast.Name)]
    return names


def _item_root(node: gast.expr) -> gast.expr:
    """The variable an item path starts from: ``L`` in ``L[0][i]``."""
    while isinstance(node, gast.Subscript):
        node = node.value
    return node
