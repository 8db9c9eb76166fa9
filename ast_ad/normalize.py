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
"""

from __future__ import annotations

import builtins
import copy
import operator
import types
from typing import Any

import gast
import numpy as np

from ast_ad import ir
from ast_ad.check import refuse
from ast_ad.errors import LocatedError
from ast_ad.naming import Namer, identifier
from ast_ad.parse import Source

BINARY = {gast.Add: operator.add, gast.Sub: operator.sub, gast.Mult: operator.mul,
          gast.Div: operator.truediv, gast.Pow: operator.pow, gast.MatMult: operator.matmul,
          gast.FloorDiv: operator.floordiv, gast.Mod: operator.mod}
UNARY = {gast.USub: operator.neg, gast.UAdd: operator.pos, gast.Not: operator.not_}
COMPARE = {gast.Lt: operator.lt, gast.LtE: operator.le, gast.Gt: operator.gt, gast.GtE: operator.ge,
           gast.Eq: operator.eq, gast.NotEq: operator.ne}
WORDS = {operator.add: "plus", operator.sub: "minus", operator.mul: "times", operator.truediv: "over",
         operator.pow: "pow", operator.matmul: "at"}

# Attributes of array values: ``x.T`` is a primitive, the rest are read as they are (no gradient).
ATTRIBUTE_PRIMITIVES = {"T": np.transpose}
# Methods of array values, resolved to the numpy function of the same meaning.
METHODS = {"sum": np.sum, "mean": np.mean, "dot": np.dot, "transpose": np.transpose,
           "reshape": np.reshape}
VARARG_METHODS = {"reshape", "transpose"}  # x.reshape(2, 3) means np.reshape(x, (2, 3))

MAX_NAME = 16


def normalize(source: Source) -> ir.Function:
    """Lower ``source`` (already checked) to an :class:`ir.Function`."""
    return ir.check_ir(Lowerer(source).function())


class Lowerer:
    """Walks the gast tree once, appending one IR statement per primitive application."""

    def __init__(self, source: Source):
        self.source = source
        self.fn = source.fn
        self.closure = _closure(source.fn)
        self.locals = _bound_names(source.tree)
        self.namer = Namer(reserved=self.locals)
        self.env: dict[str, ir.Atom] = {}
        self.body: list[ir.Stmt] = []
        self.line = ir.Line(source.filename, source.lineno(source.tree), source.line(source.tree))

    # ---- the function ------------------------------------------------------------------------------
    def function(self) -> ir.Function:
        tree = self.source.tree
        params = [arg.id for arg in tree.args.posonlyargs + tree.args.args + tree.args.kwonlyargs]
        names = tuple(self.namer.fresh(param, user=True) for param in params)
        self.env.update((param, ir.Var(name)) for param, name in zip(params, names, strict=True))
        statements = tree.body
        if statements and isinstance(statements[0], gast.Expr) and isinstance(statements[0].value, gast.Constant):
            statements = statements[1:]  # docstring
        if not statements or not isinstance(statements[-1], gast.Return) or statements[-1].value is None:
            raise self.error(statements[-1] if statements else tree,
                             "the function must end with `return <value>`: grad needs a value to differentiate")
        for node in statements[:-1]:
            self.line = self.line_of(node)
            self.stmt(node)
        last = statements[-1]
        self.line = self.line_of(last)
        result = self.expr(last.value, "out")
        return ir.Function(tree.name, names, tuple(self.body), result, self.line, self.fn)

    # ---- statements ----------------------------------------------------------------------------------
    def stmt(self, node: gast.stmt) -> None:
        handler = getattr(self, "stmt_" + type(node).__name__, None)
        if handler is None:
            raise refuse(node, f"{type(node).__name__} statements are not supported here", self.locate)
        handler(node)

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

    def stmt_AugAssign(self, node: gast.AugAssign) -> None:
        if not isinstance(node.target, gast.Name):
            raise refuse(node, "augmented assignment to an item or attribute is not supported yet: "
                               "write `y = y + v` with a new array", self.locate)
        load = gast.Name(id=node.target.id, ctx=gast.Load(), annotation=None, type_comment=None)
        value = gast.copy_location(gast.BinOp(left=gast.copy_location(load, node.target), op=node.op,
                                              right=node.value), node)
        self.assign(node.target, value)

    def stmt_Return(self, node: gast.Return) -> None:
        raise refuse(node, "return is only supported as the last statement of the function", self.locate)

    def stmt_Expr(self, node: gast.Expr) -> None:
        if not isinstance(node.value, gast.Constant):
            self.effect(node)

    def stmt_Assert(self, node: gast.Assert) -> None:
        self.effect(node)

    def stmt_Pass(self, node: gast.Pass) -> None:
        pass

    def assign(self, target: gast.expr, value: gast.expr) -> None:
        if isinstance(target, gast.Name):
            self.env[target.id] = self.expr(value, target.id, user=True)
        elif isinstance(target, (gast.Tuple, gast.List)) and isinstance(value, (gast.Tuple, gast.List)) \
                and len(target.elts) == len(value.elts):
            atoms = [self.expr(v, t.id if isinstance(t, gast.Name) else None, isinstance(t, gast.Name))
                     for t, v in zip(target.elts, value.elts, strict=True)]
            for t, atom in zip(target.elts, atoms, strict=True):
                self.bind_target(t, atom)
        else:
            self.bind_target(target, self.expr(value))

    def bind_target(self, target: gast.expr, value: ir.Atom) -> None:
        if isinstance(target, gast.Name):
            self.env[target.id] = value
            return
        if not isinstance(target, (gast.Tuple, gast.List)):
            raise refuse(target, "assignment to an item or attribute is not supported yet: "
                                 "build a new array (np.where, np.concatenate) instead", self.locate)
        names = [self.namer.fresh(t.id if isinstance(t, gast.Name) else "t", user=isinstance(t, gast.Name))
                 for t in target.elts]
        self.body.append(ir.Unpack(tuple(names), value, self.line))
        for t, name in zip(target.elts, names, strict=True):
            self.bind_target(t, ir.Var(name)) if not isinstance(t, gast.Name) else \
                self.env.__setitem__(t.id, ir.Var(name))

    def effect(self, node: gast.stmt) -> None:
        """Keep ``node`` as it is, its names rewritten: locals to their SSA names, the rest to refs."""
        refs: list[ir.Ref] = []

        def rename(name: gast.Name) -> gast.Name:
            atom = self.name(name)
            if isinstance(atom, ir.Var):
                return gast.Name(id=atom.name, ctx=gast.Load(), annotation=None, type_comment=None)
            refs.append(atom if isinstance(atom, ir.Ref) else ir.Ref(atom.value, "const"))
            return gast.Name(id=f"§{len(refs) - 1}", ctx=gast.Load(), annotation=None, type_comment=None)

        self.body.append(ir.Effect(_rename_loads(copy.deepcopy(node), rename), tuple(refs), self.line))

    # ---- expressions ---------------------------------------------------------------------------------
    def expr(self, node: gast.expr, name: str | None = None, user: bool = False) -> ir.Atom:
        """Lower ``node`` to an atom; the last statement it adds is named ``name`` if given."""
        handler = getattr(self, "expr_" + type(node).__name__, None)
        if handler is None:
            raise refuse(node, f"{type(node).__name__} expressions are not supported here", self.locate)
        return handler(node, name, user)

    def expr_Name(self, node: gast.Name, name: str | None, user: bool) -> ir.Atom:
        return self.name(node)

    def expr_Constant(self, node: gast.Constant, name: str | None, user: bool) -> ir.Atom:
        return ir.Const(node.value)

    def expr_BinOp(self, node: gast.BinOp, name: str | None, user: bool) -> ir.Atom:
        fn = BINARY.get(type(node.op))
        if fn is None:
            raise refuse(node, f"the operator {type(node.op).__name__} is not supported", self.locate)
        left, right = self.expr(node.left), self.expr(node.right)
        hint = name or _binary_hint(left, WORDS.get(fn, "op"), right)
        return self.bind(ir.Call(self.operator(fn), (left, right)), hint, user)

    def expr_UnaryOp(self, node: gast.UnaryOp, name: str | None, user: bool) -> ir.Atom:
        operand = self.expr(node.operand)
        if isinstance(operand, ir.Const) and isinstance(operand.value, (int, float)) \
                and isinstance(node.op, (gast.USub, gast.UAdd)):
            return ir.Const(-operand.value if isinstance(node.op, gast.USub) else operand.value)
        fn = UNARY.get(type(node.op))
        if fn is None:
            raise refuse(node, "the ~ operator is not supported", self.locate)
        word = {operator.neg: "neg", operator.pos: "pos", operator.not_: "not"}[fn]
        hint = name or (f"{word}_{operand.name}" if isinstance(operand, ir.Var) else "t")
        return self.bind(ir.Call(self.operator(fn), (operand,)), hint, user)

    def expr_Compare(self, node: gast.Compare, name: str | None, user: bool) -> ir.Atom:
        fn = COMPARE.get(type(node.ops[0]))
        if fn is None:
            raise refuse(node, "only < <= > >= == != comparisons are supported", self.locate)
        left, right = self.expr(node.left), self.expr(node.comparators[0])
        return self.bind(ir.Call(self.operator(fn), (left, right)), name or "cond", user)

    def expr_Call(self, node: gast.Call, name: str | None, user: bool) -> ir.Atom:
        func = node.func
        if isinstance(func, gast.Attribute) and self.is_local(func.value):
            return self.method(node, name, user)
        fn = self.expr(func)
        if not isinstance(fn, ir.Ref):
            raise refuse(node, "calling a value computed inside the function is not supported yet: "
                               "call a module-level function", self.locate)
        args = tuple(self.expr(arg) for arg in node.args)
        kwargs = tuple((kw.arg, self.expr(kw.value)) for kw in node.keywords)
        base = fn.hint.rsplit(".", 1)[-1]
        hint = name or (f"{base}_{args[0].name}" if len(args) == 1 and isinstance(args[0], ir.Var) else base)
        return self.bind(ir.Call(fn, args, kwargs), hint, user)

    def method(self, node: gast.Call, name: str | None, user: bool) -> ir.Atom:
        attr = node.func.attr
        if attr not in METHODS:
            raise refuse(node, f"the method .{attr}() is not supported yet: call the numpy function, "
                               f"np.{attr}(x, ...), instead", self.locate)
        receiver = self.expr(node.func.value)
        args = tuple(self.expr(arg) for arg in node.args)
        if attr in VARARG_METHODS and len(args) > 1:
            args = (self.bind(ir.Pack(args), "shape"),)
        kwargs = tuple((kw.arg, self.expr(kw.value)) for kw in node.keywords)
        fn = ir.Ref(METHODS[attr], f"np.{attr}")
        hint = name or (f"{attr}_{receiver.name}" if isinstance(receiver, ir.Var) else attr)
        return self.bind(ir.Call(fn, (receiver,) + args, kwargs), hint, user)

    def expr_Attribute(self, node: gast.Attribute, name: str | None, user: bool) -> ir.Atom:
        base = self.expr(node.value)
        if isinstance(base, ir.Ref) and isinstance(base.obj, (types.ModuleType, type)):
            if not hasattr(base.obj, node.attr):
                raise self.error(node, f"{base.hint} has no attribute {node.attr!r}")
            return ir.Ref(getattr(base.obj, node.attr), f"{base.hint}.{node.attr}", base.origin, base.root)
        if node.attr in ATTRIBUTE_PRIMITIVES:
            fn = ATTRIBUTE_PRIMITIVES[node.attr]
            hint = name or (f"{base.name}_{node.attr}" if isinstance(base, ir.Var) else node.attr)
            return self.bind(ir.Call(ir.Ref(fn, f"np.{fn.__name__}"), (base,)), hint, user)
        hint = name or (f"{base.name}_{node.attr}" if isinstance(base, ir.Var) else node.attr)
        return self.bind(ir.Attr(base, node.attr), hint, user)

    def expr_Subscript(self, node: gast.Subscript, name: str | None, user: bool) -> ir.Atom:
        value = self.expr(node.value)
        index = self.index(node.slice)
        hint = name or (f"{value.name}_item" if isinstance(value, ir.Var) else "item")
        return self.bind(ir.Call(self.operator(operator.getitem), (value, index)), hint, user)

    def expr_Tuple(self, node: gast.Tuple, name: str | None, user: bool, kind: str = "tuple") -> ir.Atom:
        elts = tuple(self.expr(elt) for elt in node.elts)
        if all(isinstance(elt, ir.Const) for elt in elts):
            values = tuple(elt.value for elt in elts)
            return ir.Const(values if kind == "tuple" else list(values))
        return self.bind(ir.Pack(elts, kind), name or "pack", user)

    def expr_List(self, node: gast.List, name: str | None, user: bool) -> ir.Atom:
        return self.expr_Tuple(node, name, user, kind="list")

    def index(self, node: gast.expr) -> ir.Atom:
        if isinstance(node, gast.Slice):
            parts = [self.expr(p) if p is not None else ir.Const(None) for p in (node.lower, node.upper, node.step)]
            if all(isinstance(p, ir.Const) for p in parts):
                return ir.Const(slice(*(p.value for p in parts)))
            return self.bind(ir.Call(ir.Ref(slice, "slice"), tuple(parts)), "index", False)
        if isinstance(node, gast.Tuple):
            elts = tuple(self.index(elt) for elt in node.elts)
            if all(isinstance(elt, ir.Const) for elt in elts):
                return ir.Const(tuple(elt.value for elt in elts))
            return self.bind(ir.Pack(elts), "index", False)
        return self.expr(node)

    # ---- names and resolution ------------------------------------------------------------------------
    def name(self, node: gast.Name) -> ir.Atom:
        if node.id in self.env:
            return self.env[node.id]
        if node.id in self.locals:
            raise self.error(node, f"{node.id!r} is used before it is assigned")
        if node.id in self.closure:
            try:
                value = self.closure[node.id].cell_contents
                return ir.Ref(value, node.id, ("closure", node.id), value)
            except ValueError:
                raise self.error(node, f"the closure variable {node.id!r} is not set yet") from None
        if node.id in self.fn.__globals__:
            value = self.fn.__globals__[node.id]
            return ir.Ref(value, node.id, ("global", node.id), value)
        if hasattr(builtins, node.id):
            return ir.Ref(getattr(builtins, node.id), node.id)
        raise self.error(node, f"name {node.id!r} is not defined")

    def is_local(self, node: gast.expr) -> bool:
        return isinstance(node, gast.Name) and node.id in self.locals

    def operator(self, fn: Any) -> ir.Ref:
        return ir.Ref(fn, f"operator.{fn.__name__}")

    def bind(self, value: ir.Expr, hint: str, user: bool = False) -> ir.Var:
        if not user and len(hint) > MAX_NAME:
            hint = "t"
        if hint == "t" or not identifier(hint) == hint:
            hint = f"t{self.next_temp()}"
        target = self.namer.fresh(hint, user=user)
        self.body.append(ir.Assign(target, value, self.line))
        return ir.Var(target)

    def next_temp(self) -> int:
        k = 1
        while f"t{k}" in self.namer.used or f"t{k}" in self.locals:
            k += 1
        return k

    # ---- locations -----------------------------------------------------------------------------------
    def locate(self, node: gast.AST) -> tuple[str, int, str]:
        return self.source.filename, self.source.lineno(node), self.source.line(node)

    def line_of(self, node: gast.AST) -> ir.Line:
        return ir.Line(*self.locate(node))

    def error(self, node: gast.AST, message: str) -> LocatedError:
        return LocatedError(message, *self.locate(node))


def _binary_hint(left: ir.Atom, word: str, right: ir.Atom) -> str:
    if isinstance(left, ir.Var) and isinstance(right, ir.Var):
        return f"{left.name}_{word}_{right.name}"
    return "t"


def _rename_loads(node: gast.AST, rename: Any) -> gast.AST:
    class Renamer(gast.NodeTransformer):
        def visit_Name(self, name: gast.Name) -> gast.AST:
            return gast.copy_location(rename(name), name) if isinstance(name.ctx, gast.Load) else name
    return Renamer().visit(node)


def _closure(fn: Any) -> dict[str, Any]:
    cells = fn.__closure__ or ()
    return dict(zip(fn.__code__.co_freevars, cells, strict=True))


def _bound_names(tree: gast.FunctionDef) -> set[str]:
    """Every name the function binds: parameters and assignment targets."""
    names = {arg.id for arg in tree.args.posonlyargs + tree.args.args + tree.args.kwonlyargs}
    for node in gast.walk(tree):
        if isinstance(node, gast.Name) and isinstance(node.ctx, (gast.Store, gast.Param)):
            names.add(node.id)
    return names

