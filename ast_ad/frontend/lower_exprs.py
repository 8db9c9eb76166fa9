"""The lowering of expressions: each operator, comparison, conditional, comprehension, subscript and
literal of the user's code to the IR statements that compute it, one primitive a statement (a part
of ``normalize.Lowerer``, which binds the names and reads the statements; ``frame``).

``np.log(x1) + x1 * x2`` is ``log_x1 = np.log(x1)``, ``x1_times_x2 = x1 * x2`` and
``t1 = log_x1 + x1_times_x2``; ``a if c else b`` is a branch that binds one name on each path.
"""

from __future__ import annotations

import operator
import types
from typing import Any

import gast
import numpy as np

from ast_ad import runtime
from ast_ad.core import registry
from ast_ad.frontend.aliasing import Memory, _var
from ast_ad.frontend.check import COMPLEX_HINT, refuse
from ast_ad.frontend.frame import Frame, Lowering, container_kind
from ast_ad.frontend.lower_control import ControlFlow
from ast_ad.frontend.nested import _load, _locate_all, _rename_all
from ast_ad.ir import nodes as ir
from ast_ad.ir import syntax

UNARY = {gast.USub: operator.neg, gast.UAdd: operator.pos, gast.Not: operator.not_}
COMPARE = {gast.Lt: operator.lt, gast.LtE: operator.le, gast.Gt: operator.gt, gast.GtE: operator.ge,
           gast.Eq: operator.eq, gast.NotEq: operator.ne}
WORDS = {
    operator.add: "plus",
    operator.sub: "minus",
    operator.mul: "times",
    operator.truediv: "over",
    operator.pow: "pow",
    operator.matmul: "at",
}

# What makes complex values that ast_ad cannot follow, refused at the line that names it: long
# doubles, and functions whose result is complex or real depending on the values
# (``np.emath.sqrt(-1.0)``), which the complex-number analysis could not see
# (``analysis.complexness``).
COMPLEX_MAKERS = {np.clongdouble}
COMPLEX_MODULES = {"numpy.lib.scimath", "numpy.emath", "scipy.fft", "scipy.fftpack"}
# What makes arrays whose operators mean something else than the rules say: np.matrix (``*`` is a
# matrix product), masked arrays (masked entries are left out of sums). Refused at the line that
# names them.
SUBCLASS_MAKERS = {np.matrix, np.asmatrix, np.bmat}
SUBCLASS_MODULES = {
    "numpy.ma",
    "numpy.ma.core",
    "numpy.ma.extras",
    "numpy.matrixlib",
    "numpy.matrixlib.defmatrix",
}
SUBCLASS_HINT = (
    "np.matrix and masked arrays are not supported: their operators mean other things than the "
    "rules of numpy arrays say (* is a matrix product, masked entries are left out): use "
    "np.asarray(...) with @, or np.where for a mask"
)



# what an expression the lowering has no handler for is called, in the words of Python's
# documentation
SPELLED = {
    "Lambda": "a lambda is followed where it is assigned to a name and called, not stored in a "
              "list or passed to another function yet: define it with def at module level, its "
              "differentiated values as parameters (to a scipy solver, pass them by args=(...))",
    "Starred": "unpacking with * in an expression is not supported",
    "NamedExpr": "an assignment expression (:=) is not supported",
}
SAID_WHOLE = {"Lambda"}


BINARY = {gast.Add: operator.add, gast.Sub: operator.sub, gast.Mult: operator.mul,
          gast.Div: operator.truediv, gast.Pow: operator.pow, gast.MatMult: operator.matmul,
          gast.FloorDiv: operator.floordiv, gast.Mod: operator.mod}

class ExpressionLowering:
    """The expressions of ``normalize.Lowerer``, a part of it: it receives the frame, the lowerer
    (for the operands, lowered in turn), the memory model and the control flow's conditions."""

    def __init__(self, at: Frame, lowering: Lowering, memory: Memory, control: ControlFlow) -> None:
        self.at, self.lowering = at, lowering
        self.locate = lowering.locate  # (where a node is, for errors)
        self.memory, self.control = memory, control

    def expr_Name(self, node: gast.Name, name: str | None, user: bool) -> ir.Atom:
        return self.refuse_complex(node, self.lowering.name(node))

    def refuse_complex(self, node: gast.expr, atom: ir.Atom) -> ir.Atom:
        """``atom``, unless it makes complex values ast_ad cannot follow (``np.emath``, long
        doubles) or arrays whose operators mean other things (``np.matrix``)."""
        if isinstance(atom, ir.Ref):
            obj = atom.obj
            module = (
                obj.__name__
                if isinstance(obj, types.ModuleType)
                else getattr(obj, "__module__", None)
            )
            if (registry.hashable(obj) and obj in COMPLEX_MAKERS) or module in COMPLEX_MODULES:
                raise refuse(node, COMPLEX_HINT, self.locate)
            if (registry.hashable(obj) and obj in SUBCLASS_MAKERS) or module in SUBCLASS_MODULES \
                    or (isinstance(obj, np.ndarray) and array_subclass(obj)):
                raise refuse(node, SUBCLASS_HINT, self.locate)
        return atom

    def expr_JoinedStr(self, node: gast.JoinedStr, name: str | None, user: bool) -> ir.Atom:
        """An f-string (a dict key, a message): a string, kept as written; it carries no
        gradient."""
        return self.lowering.bind(self.control.raw(node), name or "text", user)

    def expr_Constant(self, node: gast.Constant, name: str | None, user: bool) -> ir.Atom:
        return ir.Const(node.value)

    def expr_BinOp(self, node: gast.BinOp, name: str | None, user: bool) -> ir.Atom:
        fn = BINARY.get(type(node.op))
        if fn is None:
            raise refuse(
                node, f"the operator {type(node.op).__name__} is not supported", self.locate
            )
        left, right = self.lowering.expr(node.left), self.lowering.expr(node.right)
        hint = name or _binary_hint(left, WORDS.get(fn, "op"), right)
        kinds = (self.kind(left), self.kind(right))
        if fn is operator.add and any(kinds):
            joined = self.lowering.bind(
                ir.Call(ir.Ref(runtime.concat, "concat"), (left, right)), hint, user
            )
            self.at.kinds[_var(joined).name] = kinds[0] or kinds[1] or ""
            return joined
        if fn is operator.mul and any(kinds):
            seq, n = (left, right) if kinds[0] else (right, left)
            repeated = self.lowering.bind(
                ir.Call(ir.Ref(runtime.repeat_seq, "repeat_seq"), (seq, n)), hint, user
            )
            self.at.kinds[_var(repeated).name] = kinds[0] or kinds[1] or ""
            return repeated
        return self.lowering.bind(ir.Call(self.lowering.operator(fn), (left, right)), hint, user)

    def kind(self, atom: ir.Atom) -> str | None:
        """``"list"`` or ``"tuple"`` where ``atom`` is known to be one (a literal, a comprehension,
        a join)."""
        found = container_kind(self.at, atom)
        return found if found in ("list", "tuple") else None

    def expr_UnaryOp(self, node: gast.UnaryOp, name: str | None, user: bool) -> ir.Atom:
        operand = self.lowering.expr(node.operand)
        if isinstance(operand, ir.Const) and isinstance(operand.value, (int, float)) \
                and isinstance(node.op, (gast.USub, gast.UAdd)):
            return ir.Const(-operand.value if isinstance(node.op, gast.USub) else operand.value)
        fn = UNARY.get(type(node.op))
        if fn is None:
            raise refuse(node, "the ~ operator is not supported", self.locate)
        word = {operator.neg: "neg", operator.pos: "pos", operator.not_: "not"}[fn]
        hint = name or (f"{word}_{operand.name}" if isinstance(operand, ir.Var) else "t")
        return self.lowering.bind(ir.Call(self.lowering.operator(fn), (operand,)), hint, user)

    def expr_IfExp(
        self, node: gast.IfExp, name: str | None, user: bool, exact: bool = False
    ) -> ir.Atom:
        target = (
            name if exact and name is not None else self.at.namer.fresh(name or "choice", user=user)
        )
        if not exact:
            self.at.body.append(ir.Assign(target, ir.Const(None), self.at.line))
        self.at.mutable.add(target)
        test = self.control.test(node.test)
        branches = []
        for value in (node.body, node.orelse):
            outer, self.at.body = self.at.body, []
            try:
                self.memory.copy(target, self.lowering.expr(value, target, exact=True))
                branches.append(tuple(self.at.body))
            finally:
                self.at.body = outer
        self.at.body.append(ir.If(test, branches[0], branches[1], self.at.line))
        return ir.Var(target)

    def expr_BoolOp(self, node: gast.BoolOp, name: str | None, user: bool) -> ir.Atom:
        """``a or b`` is ``a if a else b`` and ``a and b`` is ``b if a else a``, ``a`` evaluated
        once."""
        exact = name is not None and self.at.exact == name
        first = self.memory.hold(self.lowering.expr(node.values[0]))
        rest = node.values[1:]
        later = (
            rest[0]
            if len(rest) == 1
            else gast.copy_location(gast.BoolOp(op=node.op, values=rest), node)
        )
        # ``None or y``: decided here
        if isinstance(first, ir.Const) and not isinstance(first.value, list):
            if bool(first.value) == isinstance(node.op, gast.Or):
                return first
            return self.lowering.expr(later, name, user, exact=exact)
        held = self.lowering.hidden("value")
        self.at.env[held] = first
        try:
            seen = gast.copy_location(_load(held), node)
            body, orelse = (seen, later) if isinstance(node.op, gast.Or) else (later, seen)
            choice = gast.copy_location(gast.IfExp(test=seen, body=body, orelse=orelse), node)
            return self.lowering.expr(choice, name, user, exact=exact)
        finally:
            del self.at.env[held]

    def expr_ListComp(self, node: gast.ListComp, name: str | None, user: bool) -> ir.Atom:
        """``[elt for t in xs if c]`` becomes a loop that appends to a new list."""
        acc = self.comprehended(node, name, user, [])
        self.at.kinds[acc] = "list"
        return self.filled(
            node,
            acc,
            lambda n: gast.Expr(
                value=gast.Call(
                    func=gast.Attribute(value=_load(acc), attr="append", ctx=gast.Load()),
                    args=[n.elt],
                    keywords=[],
                )
            ),
        )

    def expr_DictComp(self, node: gast.DictComp, name: str | None, user: bool) -> ir.Atom:
        """``{k: v for t in xs if c}`` becomes a loop that writes each key of a new dict."""
        acc = self.comprehended(node, name or "entries", user, {})
        self.at.kinds[acc] = "dict"
        return self.filled(
            node,
            acc,
            lambda n: gast.Assign(
                targets=[gast.Subscript(value=_load(acc), slice=n.key, ctx=gast.Store())],
                value=n.value,
                type_comment=None,
            ),
        )

    def comprehended(self, node: gast.expr, name: str | None, user: bool, empty: Any) -> str:
        """The new list or dict a comprehension fills: a local of its own."""
        acc: str = self.at.namer.fresh(name or "items", user=user)
        self.at.locals.add(acc)
        self.at.body.append(ir.Assign(acc, ir.Const(empty), self.at.line))
        self.at.env[acc] = ir.Var(acc)
        self.at.owner[acc] = acc
        return acc

    def filled(self, node: Any, acc: str, put: Any) -> ir.Atom:
        """The loops of a comprehension ``node``, its names its own, with ``put(node)`` (an append,
        a key's write into ``acc``) innermost; ``acc`` once they ran."""
        renames = {target.id: self.at.namer.fresh(target.id) for gen in node.generators
                   for target in gast.walk(gen.target) if isinstance(target, gast.Name)}
        self.at.locals |= set(renames.values())
        node = _rename_all(syntax.clone(node), renames)
        inner: gast.stmt = put(node)
        for gen in reversed(node.generators):
            for cond in reversed(gen.ifs):
                inner = gast.If(test=cond, body=[inner], orelse=[])
            inner = gast.For(
                target=gen.target, iter=gen.iter, body=[inner], orelse=[], type_comment=None
            )
        self.lowering.stmt(_locate_all(inner, node))
        for own in renames.values():
            # (a comprehension's names are its own: after it, nothing can read them, so no check
            # of the memory model asks about them, which a loop that never ran left unbound)
            self.at.env.pop(own, None)
        return self.at.env.pop(acc)

    def expr_SetComp(self, node: gast.SetComp, name: str | None, user: bool) -> ir.Atom:
        """``{e for t in xs}``: ``set`` of the list comprehension (a set of numbers that carry no
        gradient; one of differentiated values is refused where it is made)."""
        items = self.expr_ListComp(
            gast.copy_location(gast.ListComp(elt=node.elt, generators=node.generators), node),
            None,
            False,
        )
        return self.lowering.bind(ir.Call(ir.Ref(set, "set"), (items,)), name or "members", user)

    def expr_Set(self, node: gast.Set, name: str | None, user: bool) -> ir.Atom:
        """``{a, b}``: ``set`` of the tuple of its members (numbers that carry no gradient; a set
        of differentiated values is refused where it is made)."""
        members = self.lowering.expr(
            gast.copy_location(gast.Tuple(elts=node.elts, ctx=gast.Load()), node)
        )
        return self.lowering.bind(ir.Call(ir.Ref(set, "set"), (members,)), name or "members", user)

    def expr_GeneratorExp(self, node: gast.GeneratorExp, name: str | None, user: bool) -> ir.Atom:
        return self.expr_ListComp(node, name, user)

    def expr_Compare(self, node: gast.Compare, name: str | None, user: bool) -> ir.Atom:
        if len(node.ops) > 1:
            return self.lowering.bind(self.control.raw(node), name or "cond", user)
        fn = COMPARE.get(type(node.ops[0]))
        # ``is``, ``in``: a yes or no, as written (a test is kept so too, see ``test``)
        if fn is None:
            return self.lowering.bind(self.control.raw(node), name or "cond", user)
        left, right = self.lowering.expr(node.left), self.lowering.expr(node.comparators[0])
        return self.lowering.bind(
            ir.Call(self.lowering.operator(fn), (left, right)), name or "cond", user
        )

    def expr_Subscript(self, node: gast.Subscript, name: str | None, user: bool) -> ir.Atom:
        if isinstance(node.value, gast.Name) and node.value.id in self.at.object_lists \
                and node.value.id not in self.at.env:
            # ``layers[0]`` of ``layers = [Lin(a), Lin(b)]``: that object, followed as a name of it
            made = self.at.object_lists[node.value.id]
            k = self.index(node.slice)
            if not (isinstance(k, ir.Const) and type(k.value) is int
                    and -len(made) <= k.value < len(made)):
                raise refuse(
                    node,
                    f"a list of objects made here is read at a constant position "
                    f"({node.value.id}[0]), or looped over (for layer in {node.value.id}: ...)",
                    self.locate,
                )
            return ir.Const(made[k.value])
        value = self.lowering.expr(node.value)
        index = self.index(node.slice)
        hint = name or (f"{value.name}_item" if isinstance(value, ir.Var) else "item")
        grows = isinstance(node.value, gast.Name) and (
            self.at.appends_left.get(node.value.id, 0) > 0
            or any(node.value.id in names for names in self.at.loops)
        )
        if grows and isinstance(value, ir.Var):
            # a list that grows later: its adjoint here has the length it has now
            n = self.lowering.bind(ir.Call(ir.Ref(len, "len"), (value,)), f"n_{value.name}")
            return self.lowering.bind(
                ir.Call(ir.Ref(runtime.list_item, "list_item"), (value, index, n)), hint, user
            )
        return self.lowering.bind(
            ir.Call(self.lowering.operator(operator.getitem), (value, index)), hint, user
        )

    def expr_Tuple(
        self, node: gast.Tuple, name: str | None, user: bool, kind: str = "tuple"
    ) -> ir.Atom:
        elts = tuple(self.lowering.expr(elt) for elt in node.elts)
        if all(isinstance(elt, ir.Const) for elt in elts):
            values = tuple(_constant(elt) for elt in elts)
            return ir.Const(values if kind == "tuple" else list(values))
        return self.lowering.bind(ir.Pack(elts, kind), name or "pack", user)

    def expr_Dict(self, node: gast.Dict, name: str | None, user: bool) -> ir.Atom:
        """``{"w": w, "b": b}``: keys are constants (strings, numbers), values atoms."""
        keys = [self.lowering.expr(key) if key is not None else None for key in node.keys]
        if not all(isinstance(key, ir.Const) and registry.hashable(key.value) for key in keys):
            raise refuse(node, "dict literals need constant keys ({'w': w}) and no ** unpacking: "
                               "build other dicts outside the function", self.locate)
        values = tuple(self.lowering.expr(value) for value in node.values)
        return self.lowering.bind(
            ir.Pack(values, "dict", tuple(_constant(key) for key in keys)), name or "params", user
        )

    def expr_List(self, node: gast.List, name: str | None, user: bool) -> ir.Atom:
        return self.expr_Tuple(node, name, user, kind="list")

    def index(self, node: gast.expr) -> ir.Atom:
        if isinstance(node, gast.Slice):
            parts = [
                self.lowering.expr(p) if p is not None else ir.Const(None)
                for p in (node.lower, node.upper, node.step)
            ]
            if all(isinstance(p, ir.Const) for p in parts):
                return ir.Const(slice(*(_constant(p) for p in parts)))
            return self.lowering.bind(ir.Call(ir.Ref(slice, "slice"), tuple(parts)), "index", False)
        if isinstance(node, gast.Tuple):
            elts = tuple(self.index(elt) for elt in node.elts)
            if all(isinstance(elt, ir.Const) for elt in elts):
                return ir.Const(tuple(_constant(elt) for elt in elts))
            return self.lowering.bind(ir.Pack(elts), "index", False)
        return self.lowering.expr(node)

_REDEFINED = {
    "__add__",
    "__radd__",
    "__sub__",
    "__rsub__",
    "__mul__",
    "__rmul__",
    "__truediv__",
    "__rtruediv__",
    "__pow__",
    "__rpow__",
    "__matmul__",
    "__rmatmul__",
    "__neg__",
    "__getitem__",
    "__setitem__",
    "__array_ufunc__",
    "__array_function__",
}


def array_subclass(value: Any) -> bool:
    """Whether ``value`` is a numpy array of a subclass that ast_ad refuses: ``np.matrix``, a masked
    array, or any subclass that defines its own operators, indexing or numpy dispatch (a subclass
    that only adds attributes computes as numpy arrays do, and ``np.memmap`` is a numpy array kept
    in a file)."""
    if not isinstance(value, np.ndarray) or type(value) is np.ndarray:
        return False
    if isinstance(value, (np.matrix, np.ma.MaskedArray)):
        return True
    return any(
        not _REDEFINED.isdisjoint(vars(klass))
        for klass in type(value).__mro__
        if klass is not np.ndarray and issubclass(klass, np.ndarray) and klass is not np.memmap
    )


def _binary_hint(left: ir.Atom, word: str, right: ir.Atom) -> str:
    if isinstance(left, ir.Var) and isinstance(right, ir.Var):
        return f"{left.name}_{word}_{right.name}"
    return "t"


def _constant(atom: ir.Expr | None) -> Any:
    """The value of an atom the caller has checked to be a constant."""
    if not isinstance(atom, ir.Const):
        raise TypeError(f"expected a constant, got {atom!r}")
    return atom.value
