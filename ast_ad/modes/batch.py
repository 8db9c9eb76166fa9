"""Forward-mode code for many tangents at once: IR in, IR out. Every tangent of the code becomes one
numpy array holding ``B`` tangents on a last axis of its own (a *stack*: a tangent of shape ``s``
becomes an array of shape ``(*s, B)``), and each statement that reads one is written for the
stack, so that one pass gives ``B`` columns of a Jacobian with the primal, its branches and loops
computed once (JAX's ``vmap`` of a ``jvp``, Enzyme's vector mode, Tapenade's multidirectional
mode, which also puts the directions innermost).

With the batch axis last, most of the code for one tangent is already the code for the stack:
an index of a tangent (``x_dot[i]``, ``x_dot[1:]``, ``x_dot[:, None]``) reads the same entries of
every tangent, and stacks broadcast with each other as their tangents do. What changes is where a
tangent meets a value of the primal: the value takes an axis of one where the batch axis stands
(``z_dot * np.exp(z)[..., None]``), a reduction over all axes leaves the batch axis alone
(``np.sum(x_dot, axis=(0, 1))``), and a matrix product of a vector's tangents by a matrix is one
product of matrices (``A @ x_dot``, ``A.T @ x_dot``). The element loop
``y[i] = 0.5 * y[i - 1] * np.sin(x[i])`` keeps its tangent statements as they are::

    t2_dot = y_1_dot[t1] * 0.5
    y_1_dot[i] = t2_dot * sin_x_item_1 + x_dot[i] * np.cos(x_item_1) * t2

where each of ``y_1_dot[t1]``, ``x_dot[i]`` is now the ``B`` tangents of one entry, contiguous in
memory (with the batch axis first they would be a strided column; measured 1.7 times slower for
this loop), and ``t2_dot * sin_x_item_1`` one product of ``B`` numbers. A product of a stack by
two numbers is regrouped so the numbers are multiplied first (``_scaled_once``).

How a primitive is written for stacks is a fact of the primitive, in the registry next to its
rules (``registry.def_stacked``: broadcasting, an index, a reduction, a matrix product, or a helper
of the runtime written for stacks); the numbers of axes it needs are the facts ``analysis.kinds``
finds for the code for one tangent. The code is written for stacks throughout or not at all: where
a statement has no form (a call with no declaration, an operand whose number of axes is not
known, a tangent a loop iterates over or a test reads), ``NotStacked`` is raised and the caller
runs the code for one tangent on ``runtime.batched.Batch``es, as it did before this module.
"""

from __future__ import annotations

import operator
from collections import Counter
from typing import Any

import numpy as np

from ast_ad.analysis.kinds import INT, SLICE, UNKNOWN, Kinds, kinds_of
from ast_ad.core import registry
from ast_ad.core.records import replace
from ast_ad.ir import nodes as ir
from ast_ad.ir.naming import Namer
from ast_ad.modes.forward import Tangent
from ast_ad.runtime.batched import (
    as_batches,
    batch_size_of,
    seeded_product,
    spread_value,
    stacked_fit,
    stacked_into,
    stacked_key,
    unit_added,
    unit_seeds,
)

# a name's tree: False (no tangent in it), True (a stack, or a container of nothing but stacks), or
# a tuple of trees (a tuple or list of both)
Tree = bool | tuple[Any, ...]

# the attributes of a tangent that say what one tangent is, not its numbers (read of a ``Batch``)
_META = frozenset({"shape", "ndim", "size", "dtype"})
_ALL = slice(None)


class NotStacked(Exception):
    """A statement that forward-mode code for a stack of tangents cannot hold: the code for one
    tangent runs on ``Batch``es instead."""


def stacked_tangent(t: Tangent, made: dict[int, Tangent] | None = None,
                    units: bool = False) -> Tangent:
    """``t``'s forward-mode code with every tangent a stack (``Stacker``), and its callees' with
    it, each once (``made``: by the id of the callee's ``Tangent``; a callee that cannot be
    written so raises ``NotStacked`` for the whole). The outermost (``made`` not given) returns
    its stacks as ``runtime.batched.Batch``es, as the code for one tangent run on a batch does.
    ``units``: the outermost is given unit seeds (``Stacker._unit_rows``)."""
    top = made is None
    made = {} if made is None else made
    shell = replace(t, callees=[], code=None)
    made[id(t)] = shell
    assert t.code is not None
    stacker = Stacker(t, made, units and top)
    shell.code = stacker.run(top)
    shell.callees = stacker.callees
    shell.arrays = t.arrays | frozenset(n for n, tree in stacker.trees.items() if tree is True)
    return shell


# the ufuncs of Python's arithmetic on arrays
_UFUNCS = {operator.add: np.add, operator.sub: np.subtract, operator.mul: np.multiply,
           operator.truediv: np.true_divide, operator.neg: np.negative}


def _callee_results(fn: Any, args: list[Any]) -> Any:
    """What a call of a callee's forward-mode code gives: the fact of its returned pair, from the
    kinds of its own code (``kinds_of``'s ``results``)."""
    if not (isinstance(fn, ir.CalleeRef) and isinstance(fn.adjoint, Tangent)
            and fn.adjoint.code is not None and fn.adjoint.labels):
        return UNKNOWN
    t = fn.adjoint
    assert t.code is not None
    labels = t.labels + tuple(t.labels[k] for k in t.argnums)
    if len(labels) != len(t.code.params) or id(t) in _UNDER_WAY:
        return UNKNOWN  # (a function that calls itself: nothing known of its result on the way)
    _UNDER_WAY.add(id(t))
    try:
        return kinds_of(t.code, labels, _callee_results).of(t.code.result)
    finally:
        _UNDER_WAY.discard(id(t))


# the callees whose results ``_callee_results`` is finding (the transform holds the driver's lock)
_UNDER_WAY: set[int] = set()


def _written(body: tuple[ir.Stmt, ...]) -> frozenset[str]:
    """The names whose arrays a write in place may change: the targets of the writes, and what
    views them (a copy of the name, an index, a registered view; a fixpoint). Forward mode writes
    in place only into an array a loop copied for itself (``analysis.in_place_writes``), so
    nothing else shares its memory."""
    found = {s.target for s in ir.walk(body) if isinstance(s, ir.SetItem)}
    size = -1
    while size != len(found):
        size = len(found)
        for s in ir.walk(body):
            if not isinstance(s, ir.Assign):
                continue
            value = s.value
            if isinstance(value, ir.Var) and value.name in found:
                found.add(s.target)
            elif isinstance(value, ir.Call) and value.args \
                    and isinstance(value.args[0], ir.Var) and value.args[0].name in found \
                    and (value.fn.obj is operator.getitem
                         or registry.hashable(value.fn.obj)
                         and registry.returns_view(value.fn.obj)):
                found.add(s.target)
    return frozenset(found)


def _bound_between(block: list[ir.Stmt], start: int, stop: int, *atoms: ir.Atom) -> bool:
    """Whether a statement of ``block`` after ``start`` and before ``stop`` binds one of ``atoms``
    (or is a loop or branch, which may)."""
    names = {a.name for a in atoms if isinstance(a, ir.Var)}
    return any(ir.blocks(s) or names & set(ir.defined(s)) for s in block[start + 1:stop])


def _empty(value: ir.Expr) -> bool:
    return isinstance(value, ir.Pack) and not value.elts or isinstance(value, ir.Const) \
        and isinstance(value.value, (list, tuple)) and not value.value


def _join(a: Tree, b: Tree) -> Tree:
    if a == b:
        return a
    if a is False:
        return b
    if b is False:
        return a
    if a is True or b is True:
        return True
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return tuple(_join(x, y) for x, y in zip(a, b, strict=True))
    return True


def _some(tree: Tree) -> bool:
    """Whether a tree holds a stack anywhere."""
    return tree is True or isinstance(tree, tuple) and any(_some(t) for t in tree)


def _packed(trees: tuple[Tree, ...]) -> Tree:
    if all(t is False for t in trees):
        return False
    if all(t is True for t in trees):
        return True
    return trees


class Stacker:
    """One function's statements, written for stacks of tangents (``run``)."""

    def __init__(self, t: Tangent, made: dict[int, Tangent], units: bool = False):
        assert t.code is not None
        self.t, self.code, self.made = t, t.code, made
        params = self.code.params
        labels = t.labels + tuple(t.labels[k] for k in t.argnums)
        if len(labels) != len(params):
            raise NotStacked("the parameters' labels are not known")
        self.kinds: Kinds = kinds_of(self.code, labels, _callee_results)
        self.given = params[len(params) - len(t.argnums):]
        self.trees: dict[str, Tree] = {p: (p in self.given) for p in params}
        self.primal = set(t.function.names()) | set(t.dots)
        self.values = {dot: name for name, dot in t.dots.items()}  # each tangent's value
        # the tangents given that the code never binds again: what the caller seeded
        bound = {n for st in ir.walk(self.code.body) for n in ir.defined(st)}
        self.seeds = frozenset(self.given) - bound
        self.namer = Namer(used=self.code.names())
        self.size = self.namer.fresh("size")
        self.callees: list[Tangent] = []
        self.written = _written(self.code.body)
        self.reads = Counter(n for st in ir.walk(self.code.body) for n in ir.reads_of(st))
        if isinstance(self.code.result, ir.Var):
            self.reads[self.code.result.name] += 1
        self.rest: tuple[ir.Stmt, ...] = ()
        # the names of stacks an elementwise statement made (its own memory), and how many
        # statements bind each name (``_reused``)
        self.fresh: set[str] = set()
        self.bindings = Counter(n for st in ir.walk(self.code.body) for n in ir.defined(st))
        # each name made to spread a value over the batch axis: the value (``_value``)
        self.spread_of: dict[str, ir.Atom] = {}
        # where the seeds are unit vectors of a vector (``units``): the seeds' name and the name
        # of what ``unit_seeds`` says of them, which ``_unit_rows`` reads; whether it did
        self.unit: tuple[str, str] | None = None
        if units and len(self.given) == 1 and self.given[0] in self.seeds \
                and self.kinds.float_array(self.values.get(self.given[0], "")) \
                and self.kinds.rank(self.values[self.given[0]]) == 1:
            self.unit = (self.given[0], self.namer.fresh("units"))
        self.unit_used = False

    # ---- which names hold stacks ----------------------------------------------------------------
    def tree(self, a: ir.Expr) -> Tree:
        if isinstance(a, ir.Var):
            found: Tree = self.trees.get(a.name, False)
            return found
        return False

    def mark(self) -> None:
        """Which names hold stacks: a tangent given, and what is computed from one (a fixpoint
        over the loops)."""
        changed = True
        while changed:
            before = dict(self.trees)
            self._mark(self.code.body)
            changed = before != self.trees
        for name, tree in self.trees.items():
            if name in self.primal and _some(tree):
                raise NotStacked(f"{name}, a value, would hold tangents")

    def _bind(self, name: str, tree: Tree) -> None:
        self.trees[name] = _join(self.trees.get(name, False), tree)

    def _mark(self, body: tuple[ir.Stmt, ...]) -> None:
        for stmt in body:
            if isinstance(stmt, ir.Assign):
                self._bind(stmt.target, self._value_tree(stmt.value))
            elif isinstance(stmt, ir.Unpack):
                tree = self.tree(stmt.value)
                if isinstance(tree, tuple) and len(tree) != len(stmt.targets):
                    raise NotStacked("values and tangents unpacked into other names")
                for k, target in enumerate(stmt.targets):
                    self._bind(target, tree[k] if isinstance(tree, tuple) else tree)
            elif isinstance(stmt, ir.Append):
                self._bind(stmt.target, self.tree(stmt.value))
            elif isinstance(stmt, ir.Pop) and stmt.target is not None:
                self._bind(stmt.target, self.trees.get(stmt.source, False))
            elif isinstance(stmt, ir.SetItem) and self.tree(stmt.value) is not False:
                self._bind(stmt.target, True)
            for block in ir.blocks(stmt):
                self._mark(block)

    def _value_tree(self, value: ir.Expr) -> Tree:
        if isinstance(value, ir.Var):
            return self.tree(value)
        if isinstance(value, ir.Pack):
            return _packed(tuple(self.tree(e) for e in value.elts))
        if isinstance(value, ir.Attr):
            return self.tree(value.value) is True and value.attr not in _META
        if isinstance(value, ir.Call):
            fn = value.fn.obj
            form = registry.stacked_form(fn) if registry.hashable(fn) else None
            if form is not None and form[0] == "twin" and not form[2]:
                return True  # (``zero_tangent``: tangents made from a value)
            trees = [self.tree(a) for a in value.args] + [self.tree(a) for _, a in value.kwargs]
            if not any(_some(t) for t in trees):
                return False
            if isinstance(fn, ir.CalleeRef):
                return (False, True)
            if fn is operator.getitem and isinstance(trees[0], tuple):
                key = value.args[1]
                if isinstance(key, ir.Const) and isinstance(key.value, int) \
                        and -len(trees[0]) <= key.value < len(trees[0]):
                    part: Tree = trees[0][key.value]
                    return part
                if all(t == trees[0][0] for t in trees[0]):
                    same: Tree = trees[0][0]
                    return same
                raise NotStacked("an item of values and tangents, at an index not known here")
            return True
        return False

    # ---- the code -------------------------------------------------------------------------------
    def run(self, top: bool) -> ir.Function:
        """The function for stacks. The outermost counts its tangents from the stack it is
        given; a callee is given their number after its tangents (``size``)."""
        self.mark()
        body = self._block(self.code.body)
        result, params = self.code.result, self.code.params
        if top:
            first = next((p for p in self.given if self.trees.get(p)), None)
            if first is None:
                raise NotStacked("no tangent is given")
            count = self._call(batch_size_of, "batch_size_of", ir.Var(first))
            body.insert(0, ir.Assign(self.size, count, ir.NOWHERE))
            if self.unit is not None and self.unit_used:
                seed, units = self.unit
                body.insert(1, ir.Assign(units, self._call(unit_seeds, "unit_seeds",
                                                           ir.Var(seed)), ir.NOWHERE))
            tree = self.tree(result)
            returned = self.namer.fresh("returned")
            body.append(ir.Assign(returned, self._call(as_batches, "as_batches", result,
                                                       ir.Const(tree), ir.Var(self.size)),
                                  ir.NOWHERE))
            result = ir.Var(returned)
        else:
            params = (*params, self.size)
        return replace(self.code, params=params, body=tuple(body), result=result)

    def _block(self, body: tuple[ir.Stmt, ...]) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for k, stmt in enumerate(body):
            self.rest = body[k + 1:]
            out.extend(self._stmt(stmt))
        return self._reused(self._unit_rows(self._scaled_once(out)))

    def _unit_rows(self, block: list[ir.Stmt]) -> list[ir.Stmt]:
        """Where the seeds are unit vectors ``e_j`` to ``e_(j+B-1)`` of a vector ``x`` (the
        columns of a dense Jacobian or Hessian, ``units``): ``s + x_dot[i] * c``, a number's
        stack plus the seeds' row ``i`` times a number, as ``unit_added(s, x_dot, i, c, units,
        owned)``: ``c``
        added to the one entry of ``s`` that row holds a one in, where the product and the sum
        were each a pass over the stack (an element loop's tangent of ``x[i]``). The facts relied
        on: the code is given the unit seeds (``unit_seeds`` checks them when it starts, and the
        pass gives way to the general one where they are not), so row ``i`` of them is ``e_(i-j)``
        or zeros; and the row and its product are read by that sum alone (each read once in the
        whole code, in this block), so they go. ``s`` is added into in place where it is an array
        this block made, read there alone (as ``_reused``)."""
        if self.unit is None:
            return block
        seed, units = self.unit
        rows: dict[str, tuple[ir.Atom, ir.Atom]] = {}  # a row, or its product: (index, number)
        numbers: set[str] = set()  # names bound in this block to a product of numbers
        before = Counter(n for st in block for inner in ir.walk((st,)) for n in ir.reads_of(inner))
        owned: set[str] = set()  # what ``unit_added`` made here
        arithmetic: set[str] = set()  # stacks numpy's arithmetic made here (new arrays)
        bound: set[str] = set()
        out: list[ir.Stmt] = []
        for stmt in block:
            if isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Call) \
                    and registry.hashable(stmt.value.fn.obj) \
                    and stmt.value.fn.obj in _UFUNCS and self.tree(ir.Var(stmt.target)) is True \
                    and any(self.tree(a) is True for a in stmt.value.args):
                arithmetic.add(stmt.target)
            if isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Call) \
                    and not stmt.value.kwargs and len(stmt.value.args) == 2:
                fn, (a, b) = stmt.value.fn.obj, stmt.value.args
                if fn is operator.getitem and a == ir.Var(seed) and (
                        isinstance(b, ir.Const) and type(b.value) is int
                        or isinstance(b, ir.Var) and self.kinds.of(b, stmt) in (INT, UNKNOWN)):
                    # (an index the kinds do not know, a loop's variable bound to None before
                    # the loop, say: ``unit_added`` looks whether it is an integer)
                    rows[stmt.target] = (b, ir.Const(1.0))
                elif fn is operator.mul:
                    if self._number(a, numbers) and self._number(b, numbers):
                        numbers.add(stmt.target)
                    for row, scale in ((a, b), (b, a)):
                        if isinstance(row, ir.Var) and rows.get(row.name, (None, None))[1] \
                                == ir.Const(1.0) and self._number(scale, numbers) \
                                and self._local(row.name, before):
                            rows[stmt.target] = (rows[row.name][0], scale)
                            break
                elif fn is operator.add:
                    for row, other in ((b, a), (a, b)):
                        if isinstance(row, ir.Var) and row.name in rows \
                                and self._local(row.name, before) \
                                and isinstance(other, ir.Var) and self.tree(other) is True:
                            key, scale = rows[row.name]
                            into = (other.name in owned or other.name in self.fresh
                                    or other.name in arithmetic) \
                                and other.name in bound and self._local(other.name, before) \
                                and self.bindings.get(other.name, 1) == 1
                            stmt = ir.Assign(stmt.target, self._call(
                                unit_added, "unit_added", other, ir.Var(seed), key, scale,
                                ir.Var(units), ir.Const(into)), stmt.line)
                            owned.add(stmt.target)
                            self.unit_used = True
                            break
            out.append(stmt)
            bound.update(ir.defined(stmt))
        while True:  # (the rows and products nothing reads now)
            read = Counter(n for st in out for inner in ir.walk((st,)) for n in ir.reads_of(inner))
            dead = [st for st in out if isinstance(st, ir.Assign) and st.target in rows
                    and not read[st.target] and self._local(st.target, before)]
            if not dead:
                return out
            out = [st for st in out if not any(st is d for d in dead)]

    def _local(self, name: str, before: Counter[str]) -> bool:
        """Whether every read of ``name`` in the whole code is in this block, and there is one."""
        return before[name] == 1 and self.reads.get(name, 1) == 1

    def _number(self, a: ir.Atom, numbers: set[str]) -> bool:
        """Whether ``a`` is a number the same for every tangent."""
        if _some(self.tree(a)):
            return False
        return isinstance(a, ir.Var) and a.name in numbers or self._rank(a, None) == 0

    def _reused(self, block: list[ir.Stmt]) -> list[ir.Stmt]:
        """An elementwise statement whose operand is a stack this code made by an elementwise
        statement, bound once, earlier in the same block, and read only here, of a tangent with
        axes: written into that operand (``runtime.batched.stacked_into``, which checks its shape
        and dtype at run time). The fact relied on: an array a ufunc returned is its own memory,
        and a name bound once and read once, both in one block, is the only holder of it at that
        read each time the block runs (a view of it, a list holding it, would be reads too; a
        name bound before a loop and read in it is read at every step, which is why the binding
        must be in the block); so writing into it changes nothing any later statement reads."""
        out = []
        bound: set[str] = set()  # (by the statements before, in this block)
        # what else is an array of its own: a stack's items at an array of indices (a list or
        # tuple takes no such index, so the stack is an array, and numpy's fancy index makes a new
        # one; ``stacked_into`` still refuses one it made as a view of another), and
        # ``stacked_fit`` of such an array that it alone reads (that array, or a broadcast view,
        # which ``stacked_into`` refuses)
        own = set(self.fresh)
        for stmt in block:
            if isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Call) \
                    and self.trees.get(stmt.target) is True and len(stmt.value.args) == 2 \
                    and isinstance(stmt.value.args[0], ir.Var):
                fn, (array, key) = stmt.value.fn.obj, stmt.value.args
                assert isinstance(array, ir.Var)
                index = self.kinds.of(key, stmt)
                fancy = index[0] == "num" and index[1] >= 1 and not index[2] or isinstance(
                    key, ir.Const) and type(key.value) is list and all(
                    type(k) is int for k in key.value)
                if fn is operator.getitem and self.trees.get(array.name) is True and fancy \
                        or fn is stacked_fit and array.name in own \
                        and self.reads.get(array.name) == 1 \
                        and self.bindings.get(array.name) == 1:
                    own.add(stmt.target)
        for stmt in block:
            ufunc = self._ufunc_of(stmt)
            if ufunc is not None:
                assert isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Call)
                taken = next((k for k, a in enumerate(stmt.value.args)
                              if isinstance(a, ir.Var) and a.name in own
                              and a.name in bound and self.reads.get(a.name) == 1
                              and self.bindings.get(a.name) == 1), None)
                if taken is not None:
                    args = (ir.Ref(ufunc, f"np.{ufunc.__name__}", ("global", "np"), np),
                            ir.Const(taken), *stmt.value.args)
                    stmt = ir.Assign(stmt.target, self._call(stacked_into, "stacked_into",
                                                             *args), stmt.line)
            out.append(stmt)
            bound.update(ir.defined(stmt))
        return out

    def _ufunc_of(self, stmt: ir.Stmt) -> Any:
        """The ufunc of an elementwise statement on stacks of tangents with axes, or ``None``."""
        if not (isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Call)
                and not stmt.value.kwargs and self.trees.get(stmt.target) is True):
            return None
        fn = stmt.value.fn.obj
        ufunc = _UFUNCS.get(fn) if registry.hashable(fn) else None
        if ufunc is None and isinstance(fn, np.ufunc) and fn.nout == 1 and fn.signature is None:
            ufunc = fn
        # (a tangent whose axes the kinds do not know may have some: ``stacked_into`` looks)
        rank = self._rank(ir.Var(stmt.target), None)
        return ufunc if rank is None or rank >= 1 else None

    def _scaled_once(self, block: list[ir.Stmt]) -> list[ir.Stmt]:
        """``(s * a) * b``, a stack times two values the same for every tangent (numbers, or
        arrays spread over the batch axis), as ``s * (a * b)``: one product of the stack, not two
        (where ``s * a`` is read by that product alone). On one tangent the two cost about the
        same; on a stack each product of it is a pass over ``B`` times the entries, the values'
        product one pass over theirs. Only tangents are regrouped, which changes their last bits
        as any order of the rule's terms would."""
        made: dict[str, tuple[int, ir.Atom, ir.Atom]] = {}
        slots: list[list[ir.Stmt]] = [[stmt] for stmt in block]
        for k, stmt in enumerate(block):
            split = self._stack_times_number(stmt)
            if split is None:
                continue
            assert isinstance(stmt, ir.Assign)
            stack, number = split
            first = made.get(stack.name) if isinstance(stack, ir.Var) else None
            if first is not None and isinstance(stack, ir.Var) \
                    and self.reads.get(stack.name, 0) == 1 \
                    and not _bound_between(block, first[0], k, first[1], first[2],
                                           self._unspread(first[2])):
                k0, inner, factor = first
                # (the product goes; a value it multiplied by, made for it, stays)
                slots[k0] = [s for s in slots[k0]
                             if not (isinstance(s, ir.Assign) and s.target == stack.name)]
                slots[k], both = self._factors(factor, number, stmt.line)
                slots[k].append(ir.Assign(stmt.target, ir.Call(self._ref(operator.mul),
                                                                (inner, both)), stmt.line))
                made[stmt.target] = (k, inner, both)
                continue
            made[stmt.target] = (k, stack, number)
        out = [s for slot in slots for s in slot]
        read = Counter(n for st in out for inner in ir.walk((st,)) for n in ir.reads_of(inner))
        return [s for s in out if not (isinstance(s, ir.Assign) and s.target in self.spread_of
                                       and not read[s.target])]

    def _unspread(self, a: ir.Atom) -> ir.Atom:
        """The value a spread name spreads (``_value``), or ``a``."""
        return self.spread_of.get(a.name, a) if isinstance(a, ir.Var) else a

    def _factors(self, a: ir.Atom, b: ir.Atom,
                 line: ir.Line) -> tuple[list[ir.Stmt], ir.Atom]:
        """The statements of ``a * b``, two values the same for every tangent, as one factor of a
        stack: the values multiplied, then spread if either was."""
        mul = self._ref(operator.mul)
        va, vb = self._unspread(a), self._unspread(b)
        product = self.namer.fresh("scale")
        made: list[ir.Stmt] = [ir.Assign(product, ir.Call(mul, (va, vb)), line)]
        if va is a and vb is b:
            return made, ir.Var(product)
        spread = self.namer.fresh("spread")
        made.append(ir.Assign(spread, ir.Call(self._ref(operator.getitem), (
            ir.Var(product), ir.Const((Ellipsis, None)))), line))
        self.spread_of[spread] = ir.Var(product)
        return made, ir.Var(spread)

    def _stack_times_number(self, stmt: ir.Stmt) -> tuple[ir.Atom, ir.Atom] | None:
        """``(stack, number)`` where ``stmt`` binds their product."""
        if not (isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Call)
                and stmt.value.fn.obj is operator.mul and len(stmt.value.args) == 2
                and not stmt.value.kwargs):
            return None
        x, y = stmt.value.args
        if _some(self.tree(x)) == _some(self.tree(y)):
            return None
        stack, number = (x, y) if _some(self.tree(x)) else (y, x)
        if self.tree(stack) is not True or not (
                self._rank(number, None) == 0
                or isinstance(number, ir.Var) and number.name in self.spread_of):
            return None
        return stack, number

    def _read_before_writes(self, name: str) -> bool:
        """Whether every read of ``name`` comes, in the statements after the one that binds it,
        before anything that may write an array in place (a write, a loop or branch, a call of a
        function that is not pure)."""
        left = self.reads[name]
        for stmt in self.rest:
            if left == 0:
                return True
            if isinstance(stmt, ir.SetItem) or ir.blocks(stmt) or not isinstance(
                    stmt, ir.Assign) or isinstance(stmt.value, ir.Call) and not (
                    registry.hashable(stmt.value.fn.obj)
                    and registry.is_pure(stmt.value.fn.obj)):
                return False
            left -= ir.reads_of(stmt).count(name)
        return left == 0

    def _stmt(self, stmt: ir.Stmt) -> list[ir.Stmt]:
        if isinstance(stmt, ir.Assign):
            return self._assign(stmt)
        if isinstance(stmt, ir.SetItem):
            return self._set_item(stmt)
        if isinstance(stmt, ir.Unpack) and not _some(self.tree(stmt.value)) and any(
                _some(self.trees.get(t, False)) for t in stmt.targets):
            raise NotStacked("tangents unpacked from values")
        if isinstance(stmt, ir.Append):
            if self.tree(stmt.value) != self.trees.get(stmt.target, False):
                raise NotStacked("a list of values and tangents together")
            return [stmt]
        if isinstance(stmt, (ir.If, ir.For)):
            test = stmt.test if isinstance(stmt, ir.If) else stmt.iter
            if _some(self.tree(test)):
                raise NotStacked("a test or a loop over a tangent")
        if isinstance(stmt, (ir.While, ir.Effect)):
            node_reads = ir.reads_of(stmt) if isinstance(stmt, ir.Effect) else []
            if any(_some(self.trees.get(n, False)) for n in node_reads):
                raise NotStacked("a tangent printed or asserted")
        blocks = ir.blocks(stmt)
        if blocks:
            return [ir.with_blocks(stmt, [tuple(self._block(b)) for b in blocks])]
        return [stmt]

    # ---- assignments ----------------------------------------------------------------------------
    def _assign(self, stmt: ir.Assign) -> list[ir.Stmt]:
        value, target = stmt.value, stmt.target
        wanted = self.trees.get(target, False)
        if isinstance(value, ir.Call):
            return self._call_stmt(stmt, value)
        if isinstance(value, ir.Attr) and _some(self.tree(value.value)):
            return self._general(stmt, value)
        if isinstance(value, ir.Raw) and any(
                _some(self.trees.get(r, False)) for r in ir.reads_of(stmt)):
            raise NotStacked("a tangent read by an expression kept as written")
        if _empty(value):
            return [stmt]  # (a list that appends will fill: of stacks, or of values)
        if wanted is True and self._value_tree(value) is False:
            return self._zeros(stmt, value)
        return [stmt]

    def _zeros(self, stmt: ir.Assign, value: ir.Expr) -> list[ir.Stmt]:
        """A tangent bound to a value that is the same for every tangent: only a zero can be. A
        number's is a stack of zeros; an array's, whose shape is not known here (an adjoint that
        starts as ``0.0``), stays the number: numpy broadcasts it as it does a stack, and where a
        statement needs the array (an index, a product of matrices) the pass stops and runs on
        ``Batch``es."""
        if isinstance(value, ir.Const) and value.value is None:
            return [stmt]  # (the normalizer's binding before a loop: nothing reads it)
        if not (isinstance(value, ir.Const) and isinstance(value.value, (int, float))
                and value.value == 0):
            raise NotStacked(f"{stmt.target}, a tangent, bound to a value of no stack")
        if self.kinds.rank(stmt.target) != 0:
            return [stmt]
        zeros = ir.Call(ir.Ref(np.zeros, "np.zeros", ("global", "np"), np),
                        (ir.Var(self.size),))
        return [ir.Assign(stmt.target, zeros, stmt.line)]

    def _call_stmt(self, stmt: ir.Assign, call: ir.Call) -> list[ir.Stmt]:
        fn = call.fn.obj
        form = registry.stacked_form(fn) if registry.hashable(fn) else None
        batched = tuple(_some(self.tree(a)) for a in call.args)
        if form is not None and form[0] == "twin" and not form[2]:
            kwargs = call.kwargs + ((("size", ir.Var(self.size)),) if form[3] else ())
            return [ir.Assign(stmt.target, replace(call, fn=self._ref(form[1]), kwargs=kwargs),
                              stmt.line)]
        if not any(batched) and not any(_some(self.tree(a)) for _, a in call.kwargs):
            if _some(self.trees.get(stmt.target, False)):
                raise NotStacked(f"{stmt.target}, a tangent, bound to a call of values only")
            return [stmt]
        if isinstance(fn, ir.CalleeRef):
            return self._callee(stmt, call)
        out: list[ir.Stmt] = []
        made = None
        if form is not None and not (call.kwargs and form[0] not in ("reduce", "twin")):
            made = getattr(self, "_" + form[0])(out, stmt, call, batched, form)
        elif isinstance(fn, np.ufunc) and fn.nout == 1 and fn.signature is None \
                and not call.kwargs:
            made = self._elementwise(out, stmt, call, batched, form)
        if made is None:
            return self._general(stmt, call)
        if isinstance(made, ir.Call) and self._ufunc_of(ir.Assign(stmt.target, made,
                                                                  stmt.line)) is not None:
            self.fresh.add(stmt.target)  # (a new array: what a ufunc returns)
        return [*out, ir.Assign(stmt.target, made, stmt.line)]

    def _rank(self, a: ir.Expr, at: ir.Stmt | None) -> int | None:
        """The number of axes of one value of ``a`` (for a stack, of one tangent): what the kinds
        say, and for a tangent they say nothing of, its value's (a tangent has its value's
        shape)."""
        if isinstance(a, ir.Const):
            return 0 if isinstance(a.value, (int, float, complex)) else None
        fact = self.kinds.of(a, at)
        if fact[0] == "num":
            return int(fact[1])
        if isinstance(a, ir.Var) and a.name in self.values:
            return self.kinds.rank(self.values[a.name])
        return None

    def _value(self, out: list[ir.Stmt], a: ir.Atom, rank: int | None,
               line: ir.Line) -> ir.Atom:
        """The value ``a`` (of ``rank`` axes, the same for every tangent), ready to broadcast with
        stacks: an axis of one put in last, where the batch axis stands (a number needs none;
        where the axes are not known, ``runtime.batched.spread_value`` looks)."""
        if rank == 0:
            return a
        if rank is None:
            made: ir.Expr = self._call(spread_value, "spread_value", a)
        else:
            made = ir.Call(self._ref(operator.getitem), (a, ir.Const((Ellipsis, None))))
        spread = self._emit(out, made, "spread", line)
        self.spread_of[spread.name] = a
        return spread

    def _elementwise(self, out: list[ir.Stmt], stmt: ir.Assign, call: ir.Call,
                     batched: tuple[bool, ...], form: Any) -> ir.Expr | None:
        # (stacks broadcast with each other as their tangents do: the batch axes, last, pair up;
        # the values take an axis of one there)
        args = tuple(a if b else self._value(out, a, self._rank(a, stmt), stmt.line)
                     for a, b in zip(call.args, batched, strict=True))
        return replace(call, args=args)

    def _key(self, out: list[ir.Stmt], key: ir.Atom, at: ir.Stmt) -> ir.Atom:
        """A stack's index for the index ``key`` of one tangent: the same, the batch axis being
        last, unless it holds an ``...``, after which the batch axis is kept whole."""
        if isinstance(key, ir.Const):
            parts = key.value if isinstance(key.value, tuple) else (key.value,)
            if any(p is Ellipsis for p in parts):
                return ir.Const((*parts, _ALL))
            return key
        fact = self.kinds.of(key, at)
        if fact in (INT, SLICE) or fact[0] in ("index", "ints") \
                or fact[0] == "num" and fact[1] >= 1:
            return key  # (integers, slices, or an array of them: no ``...``)
        return self._emit(out, self._call(stacked_key, "stacked_key", key), "key", at.line)

    def _index(self, out: list[ir.Stmt], stmt: ir.Assign, call: ir.Call,
               batched: tuple[bool, ...], form: Any) -> ir.Expr | None:
        array, key, *rest = call.args
        if any(batched[1:2]):
            return None  # (an index that is a tangent)
        fact = self.kinds.of(array, stmt)
        if not (fact[0] == "num" and fact[1] >= 1):
            if not batched[0]:
                return None
            # an item of a tuple or list of stacks, or of a stack whose axes the kinds do not
            # know: an index with no ``...`` reads and writes the same either way, and one with
            # an ``...`` keeps the batch axis after it (``stacked_key`` looks at run time); but a
            # written array's entry, which a stack would read as a view, is not read so
            new_key = self._key(out, key, stmt)
            if rest:  # assign_item(x, key, value)
                value = rest[0]
                if not _some(self.tree(value)):
                    value = self._value(out, value, self._rank(value, stmt), stmt.line)
                return replace(call, args=(array, new_key, value))
            if isinstance(array, ir.Var) and array.name in self.written:
                return None
            return replace(call, args=(array, new_key))
        if not batched[0]:
            return None  # (a tangent written into a value's array)
        new_key = self._key(out, key, stmt)
        if rest:  # assign_item(x, key, value)
            value = rest[0]
            if not _some(self.tree(value)):
                rank = self._rank(value, stmt)
                if rank is None:
                    return None
                value = self._value(out, value, rank, stmt.line)
            return replace(call, args=(array, new_key, value))
        read = replace(call, args=(array, new_key))
        if isinstance(array, ir.Var) and array.name in self.written \
                and self.kinds.indexed(array, key, stmt) == 0 \
                and not self._read_before_writes(stmt.target):
            # one entry of each tangent: a view of the stack, where one tangent's is a number, a
            # copy; a later write in place must not change it
            got = self._emit(out, read, "entry", stmt.line)
            return ir.Call(ir.Ref(np.copy, "np.copy", ("global", "np"), np), (got,))
        return read

    def _reduce(self, out: list[ir.Stmt], stmt: ir.Assign, call: ir.Call,
                batched: tuple[bool, ...], form: Any) -> ir.Expr | None:
        if not batched[0] or any(batched[1:]):
            return None
        rank = self._rank(call.args[0], stmt)
        if rank is None:
            # (axes not known here: the form's helper moves the axis at run time)
            return replace(call, fn=self._ref(form[1]),
                           kwargs=call.kwargs + (("size", ir.Var(self.size)),))
        position = form[4]
        axis_at = [k for k, (name, _) in enumerate(call.kwargs) if name == "axis"]
        given = call.args[position] if len(call.args) > position else (
            call.kwargs[axis_at[0]][1] if axis_at else ir.Const(None))
        if not isinstance(given, ir.Const):
            return None
        axis = given.value
        if axis is None:
            moved: Any = tuple(range(rank))  # (every axis but the batch's, last)
        elif isinstance(axis, int) and -rank <= axis < rank:
            moved = axis % rank
        elif isinstance(axis, tuple) and all(isinstance(a, int) and -rank <= a < rank
                                             for a in axis):
            moved = tuple(a % rank for a in axis)
        else:
            return None
        if len(call.args) > position:
            args = call.args[:position] + (ir.Const(moved),) + call.args[position + 1:]
            return replace(call, args=args)
        kwargs = tuple((n, a) for n, a in call.kwargs if n != "axis") + (("axis", ir.Const(moved)),)
        return replace(call, kwargs=kwargs, moved=())

    def _product(self, out: list[ir.Stmt], stmt: ir.Assign, call: ir.Call,
                 batched: tuple[bool, ...], form: Any) -> ir.Expr | None:
        """A matrix product of a value and a stack. With the batch axis last, a stack of vectors is
        a matrix whose columns are the tangents, so ``A @ v`` is ``A @ v_stack`` and ``v @ A`` is
        ``A.T @ v_stack``; other ranks call the form's helper (``runtime.batched.stacked_matmul``),
        which moves the batch axis first."""
        if len(call.args) != 2 or call.kwargs or batched[0] == batched[1]:
            return None
        a, b = call.args
        ra, rb = self._rank(a, stmt), self._rank(b, stmt)
        kwargs = (("stacks", ir.Const(batched)), ("size", ir.Var(self.size)))
        if ra is None or rb is None:
            # (axes not known here: the form's helper looks at run time)
            return ir.Call(self._ref(form[1]), (a, b), kwargs)
        if ra is None or rb is None or ra == 0 or rb == 0:
            return None
        if call.fn.obj is np.dot and (ra > 2 or rb > 2):
            return None
        matmul = self._ref(operator.matmul)
        if batched[1] and rb == 1:  # a value times a stack of vectors
            if ra == 2 and isinstance(b, ir.Var) and b.name in self.seeds:
                # (the seeds as given: where they are unit vectors, columns of the value)
                return self._call(seeded_product, "seeded_product", a, b)
            return ir.Call(matmul, (a, b))
        if batched[0] and ra == 1 and rb <= 2:  # a stack of vectors times a value
            if rb == 2:
                b = self._emit(out, ir.Call(ir.Ref(np.transpose, "np.transpose",
                                                   ("global", "np"), np), (b,)),
                               "transposed", stmt.line)
            return ir.Call(matmul, (b, a))
        return ir.Call(self._ref(form[1]), (a, b), kwargs)

    def _twin(self, out: list[ir.Stmt], stmt: ir.Assign, call: ir.Call,
              batched: tuple[bool, ...], form: Any) -> ir.Expr | None:
        _, twin, positions, sized, _, told = form
        stacks = tuple(k for k, b in enumerate(batched) if b)
        if any(_some(self.tree(a)) for _, a in call.kwargs) \
                or not (set(stacks) <= set(positions) if told else stacks == positions):
            return None
        kwargs = call.kwargs + ((("stacks", ir.Const(batched)),) if told else ())
        kwargs += (("size", ir.Var(self.size)),) if sized else ()
        return replace(call, fn=self._ref(twin), kwargs=kwargs)

    # ---- what has no form for stacks, and callees ------------------------------------------------
    def _general(self, stmt: ir.Assign, value: ir.Call | ir.Attr) -> list[ir.Stmt]:
        """A statement on stacks with no form for them: the code is not made (it is written for
        stacks throughout, or not at all: a statement run on ``Batch``es between stacks costs
        two conversions more than the whole code run on ``Batch``es)."""
        what = (f"the attribute .{value.attr}" if isinstance(value, ir.Attr)
                else getattr(value.fn.obj, "__name__", value.fn.hint))
        atoms = (value.value,) if isinstance(value, ir.Attr) else value.args
        unknown = [a.name for a in atoms if isinstance(a, ir.Var) and self._rank(a, stmt) is None]
        raise NotStacked(f"{what} (line {stmt.line.lineno}) has no form for stacks of tangents"
                         + (f" ({', '.join(unknown)}: axes not known)" if unknown else ""))

    def _callee(self, stmt: ir.Assign, call: ir.Call) -> list[ir.Stmt]:
        """A call of a callee's forward-mode code: its code for stacks, made once."""
        callee = call.fn.obj.adjoint
        if id(callee) not in self.made:
            stacked_tangent(callee, self.made)
        mine = self.made[id(callee)]
        assert mine is not None
        self.callees.append(mine)
        ref = ir.Ref(ir.CalleeRef(mine, "jvp"), "jvp")
        args = (*call.args, ir.Var(self.size))
        return [ir.Assign(stmt.target, replace(call, fn=ref, args=args), stmt.line)]

    def _set_item(self, stmt: ir.SetItem) -> list[ir.Stmt]:
        target_tree = self.trees.get(stmt.target, False)
        value_tree = self.tree(stmt.value)
        if target_tree is False:
            if _some(value_tree):
                raise NotStacked("a tangent written into a value")
            return [stmt]
        out: list[ir.Stmt] = []
        key = self._key(out, stmt.index, stmt)
        fact = self.kinds.of(ir.Var(stmt.target), stmt)
        if not (fact[0] == "num" and fact[1] >= 1) and key is not stmt.index:
            raise NotStacked("a tangent written at an index with ... into a container")
        value = stmt.value
        if not _some(value_tree):  # (a zero: the same for every tangent)
            value = self._value(out, value, self._rank(value, stmt), stmt.line)
        return [*out, ir.SetItem(stmt.target, key, value, stmt.line)]

    # ---- small makers ---------------------------------------------------------------------------
    def _ref(self, fn: Any) -> ir.Ref:
        if fn in (operator.getitem, operator.matmul):
            return ir.Ref(fn, f"operator.{fn.__name__}")
        return ir.Ref(fn, getattr(fn, "__name__", "helper"))

    def _call(self, fn: Any, hint: str, *args: ir.Atom) -> ir.Call:
        return ir.Call(ir.Ref(fn, hint), args)

    def _emit(self, out: list[ir.Stmt], value: ir.Expr, hint: str, line: ir.Line) -> ir.Var:
        name = self.namer.fresh(hint)
        out.append(ir.Assign(name, value, line))
        return ir.Var(name)

