"""Print generated gast trees as Python source directly, with astor's layout.

Printing a long gradient through Python's ``ast`` (``syntax.to_ast``) and astor took a quarter of
its transform. The generated code uses a small part of the language, so this module prints that part
itself, in one pass over the gast tree, with the layout astor gives it (the golden files record it):
the fewest parentheses Python's precedence allows, a tuple bare where a statement holds it (``return
out, x_bar``), ``elif`` for an ``if`` alone in an ``else``, ``repr`` of each constant. A tree with
anything else (an f-string, a ``try``, a decorator) raises :class:`Unprintable`, and the caller
prints it the old way.

Markers (``syntax.MARK``) are spelled by the ``spell`` function given, comments (``syntax.comment``)
are printed as ``# text`` lines.

>>> import gast
>>> from ast_ad.ir import syntax
>>> text = "def f(x, b=1.0):\\n    y = -(x + b) ** 2 * (x, b)[0]\\n    return y, (x,)"
>>> tree = gast.parse(text).body[0]
>>> print(source(tree, str), end="")
def f(x, b=1.0):
    y = -(x + b) ** 2 * (x, b)[0]
    return y, (x,)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import gast

from ast_ad.ir import syntax


class Unprintable(Exception):
    """The tree holds a construct this printer leaves to astor."""


# precedence, lowest first (Python's grammar). A number is an atom, but astor puts it in parentheses
# where it stands for what a call, an attribute or a subscript reads, and in the few places where
# astor gives the part no precedence and so writes parentheses around anything but a name, a call, a
# subscript or a display (a comprehension's element, a dict's key, a loop's iterable, a starred
# value): those are read with ``_ATOM``.
(
    _TUPLE,
    _LAMBDA,
    _IFEXP,
    _OR,
    _AND,
    _NOT,
    _CMP,
    _BOR,
    _BXOR,
    _BAND,
    _SHIFT,
    _ARITH,
    _TERM,
    _UNARY,
    _POW,
    _NUMBER,
    _ATOM,
) = range(17)
_BINARY = {
    gast.Add: (" + ", _ARITH),
    gast.Sub: (" - ", _ARITH),
    gast.Mult: (" * ", _TERM),
    gast.Div: (" / ", _TERM),
    gast.FloorDiv: (" // ", _TERM),
    gast.Mod: (" % ", _TERM),
    gast.MatMult: (" @ ", _TERM),
    gast.Pow: (" ** ", _POW),
    gast.LShift: (" << ", _SHIFT),
    gast.RShift: (" >> ", _SHIFT),
    gast.BitOr: (" | ", _BOR),
    gast.BitXor: (" ^ ", _BXOR),
    gast.BitAnd: (" & ", _BAND),
}
_UNARY_OPS = {gast.USub: "-", gast.UAdd: "+", gast.Invert: "~", gast.Not: "not "}
_COMPARE = {
    gast.Eq: " == ",
    gast.NotEq: " != ",
    gast.Lt: " < ",
    gast.LtE: " <= ",
    gast.Gt: " > ",
    gast.GtE: " >= ",
    gast.Is: " is ",
    gast.IsNot: " is not ",
    gast.In: " in ",
    gast.NotIn: " not in ",
}
_AUGMENTED = {kind: text.strip() + "=" for kind, (text, _) in _BINARY.items()}


def source(tree: gast.FunctionDef, spell: Callable[[str], str], name: str | None = None) -> str:
    """The text of the function ``tree`` (named ``name``, where given), ending in a newline; each
    marker name ``m`` printed as ``spell(m)``."""
    lines: list[str] = []
    _Writer(spell, lines).function(tree, "", name)
    return "\n".join(lines) + "\n"


class _Writer:
    def __init__(self, spell: Callable[[str], str], lines: list[str]):
        self.spell, self.lines = spell, lines

    # ---- statements ------------------------------------------------------------------------------
    def function(self, node: gast.FunctionDef, indent: str, name: str | None = None) -> None:
        if node.decorator_list or node.returns is not None or getattr(node, "type_params", None):
            raise Unprintable("decorators, annotations or type parameters")
        self.lines.append(f"{indent}def {name or node.name}({self.arguments(node.args)}):")
        self.body(node.body, indent + "    ")

    def arguments(self, args: gast.arguments) -> str:
        if args.posonlyargs:
            raise Unprintable("positional-only parameters")
        parts: list[str] = []
        first_default = len(args.args) - len(args.defaults)
        for k, arg in enumerate(args.args):
            parts.append(
                self.param(arg)
                if k < first_default
                else f"{self.param(arg)}={self.expr(args.defaults[k - first_default], _LAMBDA + 1)}"
            )
        if args.vararg is not None:
            parts.append("*" + self.param(args.vararg))
        elif args.kwonlyargs:
            parts.append("*")
        for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
            parts.append(
                self.param(arg)
                if default is None
                else f"{self.param(arg)}={self.expr(default, _LAMBDA + 1)}"
            )
        if args.kwarg is not None:
            parts.append("**" + self.param(args.kwarg))
        return ", ".join(parts)

    def param(self, arg: Any) -> str:
        if type(arg) is not gast.Name or arg.annotation is not None:
            raise Unprintable("an annotated parameter")
        return str(arg.id)

    def body(self, stmts: list[gast.stmt], indent: str) -> None:
        for stmt in stmts:
            self.stmt(stmt, indent)

    def stmt(self, node: gast.stmt, indent: str) -> None:
        kind = type(node)
        lines = self.lines
        if kind is gast.Assign:
            targets = "".join(self.expr(t, _TUPLE) + " = " for t in node.targets)
            lines.append(f"{indent}{targets}{self.expr(node.value, _TUPLE)}")
        elif kind is gast.Expr:
            text = syntax.comment_text(node)
            if text is None and type(node.value) is gast.Constant and type(node.value.value) is str:
                # astor writes it as a docstring, in triple quotes
                raise Unprintable("a string statement")
            lines.append(
                f"{indent}# {text}"
                if text is not None
                else f"{indent}{self.expr(node.value, _TUPLE)}"
            )
        elif kind is gast.AugAssign:
            lines.append(f"{indent}{self.expr(node.target, _TUPLE)} {_AUGMENTED[type(node.op)]} "
                         f"{self.expr(node.value, _TUPLE)}")
        elif kind is gast.Return:
            lines.append(
                f"{indent}return"
                if node.value is None
                else f"{indent}return {self.expr(node.value, _TUPLE)}"
            )
        elif kind is gast.For:
            if node.type_comment is not None:
                raise Unprintable("a type comment")
            self.clause(
                f"for {self.expr(node.target, _TUPLE)} in {self.expr(node.iter, _ATOM)}",
                node.body,
                indent,
            )
            self.clause("else", node.orelse, indent)
        elif kind is gast.If:
            self.clause(f"if {self.expr(node.test, _TUPLE + 1)}", node.body, indent)
            while len(node.orelse) == 1 and type(node.orelse[0]) is gast.If:  # astor's ``elif``
                node = node.orelse[0]
                self.clause(f"elif {self.expr(node.test, _TUPLE + 1)}", node.body, indent)
            self.clause("else", node.orelse, indent)
        elif kind is gast.While:
            self.clause(f"while {self.expr(node.test, _TUPLE + 1)}", node.body, indent)
            self.clause("else", node.orelse, indent)
        elif kind is gast.Delete:
            lines.append(f"{indent}del {', '.join(self.expr(t, _TUPLE + 1) for t in node.targets)}")
        elif kind is gast.Pass:
            lines.append(f"{indent}pass")
        elif kind is gast.Break:
            lines.append(f"{indent}break")
        elif kind is gast.Continue:
            lines.append(f"{indent}continue")
        elif kind is gast.FunctionDef:
            self.function(node, indent)
        else:
            raise Unprintable(kind.__name__)

    def clause(self, header: str, stmts: list[gast.stmt], indent: str) -> None:
        """``header:`` and its block (an ``else`` only where it has one)."""
        if stmts or header != "else":
            self.lines.append(f"{indent}{header}:")
            self.body(stmts, indent + "    ")

    # ---- expressions -----------------------------------------------------------------------------
    def expr(self, node: Any, context: int) -> str:
        """``node``'s text where an expression of precedence ``context`` or above may stand bare."""
        text, precedence = self.exact(node, context)
        return f"({text})" if precedence < context else text

    def exact(self, node: Any, context: int) -> tuple[str, int]:
        """``node``'s text, without outer parentheses, and its precedence."""
        kind = type(node)
        if kind is gast.Name:
            name = node.id
            return (self.spell(name) if name.startswith(syntax.MARK) else name), _ATOM
        if kind is gast.BinOp:
            op, precedence = _BINARY[type(node.op)]
            # right-associative; its right side may be a unary operation: ``x ** -1``
            if precedence == _POW:
                left = self.expr(node.left, _POW + 1)
                right = self.expr(node.right, _UNARY)
            else:
                left = self.expr(node.left, precedence)
                right = self.expr(node.right, precedence + 1)
            return left + op + right, precedence
        if kind is gast.Call:
            return self.call(node), _ATOM
        if kind is gast.Constant:
            return self.constant(node.value)
        if kind is gast.Attribute:
            return f"{self.primary(node.value)}.{node.attr}", _ATOM
        if kind is gast.Subscript:
            return f"{self.primary(node.value)}[{self.index(node.slice)}]", _ATOM
        if kind is gast.UnaryOp:
            op = _UNARY_OPS[type(node.op)]
            if op == "not ":
                return op + self.expr(node.operand, _NOT), _NOT
            return op + self.expr(node.operand, _UNARY), _UNARY
        if kind is gast.Tuple:
            if not node.elts:
                return "()", _ATOM
            items = ", ".join(self.expr(e, _TUPLE + 1) for e in node.elts)
            if len(node.elts) == 1:
                items += ","
            if context == _TUPLE:  # a statement's whole value: bare, as astor prints it
                return items, _TUPLE
            return f"({items})", _ATOM
        if kind is gast.List:
            return "[" + ", ".join(self.expr(e, _TUPLE + 1) for e in node.elts) + "]", _ATOM
        if kind is gast.Compare:
            parts = [self.expr(node.left, _CMP + 1)]
            for op, right in zip(node.ops, node.comparators, strict=True):
                parts += [_COMPARE[type(op)], self.expr(right, _CMP + 1)]
            return "".join(parts), _CMP
        if kind is gast.BoolOp:
            precedence, word = (_AND, " and ") if type(node.op) is gast.And else (_OR, " or ")
            return word.join(self.expr(v, precedence + 1) for v in node.values), precedence
        if kind is gast.IfExp:
            return (
                f"{self.expr(node.body, _IFEXP + 1)} if {self.expr(node.test, _IFEXP + 1)} else "
                f"{self.expr(node.orelse, _IFEXP)}"
            ), _IFEXP
        if kind is gast.Starred:
            return "*" + self.expr(node.value, _ATOM), _ATOM
        if kind is gast.Dict:
            entries = [f"**{self.expr(v, _BOR)}" if k is None
                       else f"{self.expr(k, _ATOM)}: {self.expr(v, _TUPLE + 1)}"
                       for k, v in zip(node.keys, node.values, strict=True)]
            return "{" + ", ".join(entries) + "}", _ATOM
        if kind is gast.Set:
            return "{" + ", ".join(self.expr(e, _TUPLE + 1) for e in node.elts) + "}", _ATOM
        if kind is gast.Lambda:
            params = self.arguments(node.args)
            return f"lambda {params}: {self.expr(node.body, _LAMBDA)}", _LAMBDA
        if kind is gast.ListComp:
            return f"[{self.expr(node.elt, _ATOM)}{self.generators(node.generators)}]", _ATOM
        if kind is gast.SetComp:
            return f"{{{self.expr(node.elt, _ATOM)}{self.generators(node.generators)}}}", _ATOM
        if kind is gast.DictComp:
            return (f"{{{self.expr(node.key, _ATOM)}: "
                    f"{self.expr(node.value, _ATOM)}{self.generators(node.generators)}}}"), _ATOM
        if kind is gast.GeneratorExp:
            return f"({self.expr(node.elt, _TUPLE + 1)}{self.generators(node.generators)})", _ATOM
        raise Unprintable(kind.__name__)

    def primary(self, node: Any) -> str:
        """What a call, an attribute or a subscript reads from (a number in parentheses:
        ``(1).real``, as ``1.real`` would not parse)."""
        return self.expr(node, _ATOM)

    def call(self, node: gast.Call) -> str:
        args = node.args
        if len(args) == 1 and not node.keywords and type(args[0]) is gast.GeneratorExp:
            generator = args[0]  # the call's parentheses are the generator's: ``f(a for a in b)``
            inner = f"{self.expr(generator.elt, _TUPLE + 1)}{self.generators(generator.generators)}"
            return f"{self.primary(node.func)}({inner})"
        parts = [self.expr(a, _TUPLE + 1) for a in args]
        for keyword in node.keywords:
            value = self.expr(keyword.value, _TUPLE + 1)
            parts.append(f"**{value}" if keyword.arg is None else f"{keyword.arg}={value}")
        return f"{self.primary(node.func)}({', '.join(parts)})"

    def generators(self, generators: list[gast.comprehension]) -> str:
        out = []
        for generator in generators:
            if generator.is_async:
                raise Unprintable("an async comprehension")
            out.append(
                f" for {self.expr(generator.target, _TUPLE)} in {self.expr(generator.iter, _OR)}"
            )
            out += [f" if {self.expr(test, _OR)}" for test in generator.ifs]
        return "".join(out)

    def index(self, node: Any) -> str:
        """A subscript's index: a tuple bare (``x[1, :]``, ``x[1,]``), a slice as ``a:b:c``."""
        kind = type(node)
        if kind is gast.Slice:
            return self.slice(node)
        if kind is gast.Tuple and node.elts:
            items = [
                self.slice(e) if type(e) is gast.Slice else self.expr(e, _TUPLE + 1)
                for e in node.elts
            ]
            return ", ".join(items) + ("," if len(items) == 1 else "")
        return self.expr(node, _TUPLE + 1)

    def slice(self, node: gast.Slice) -> str:
        lower = "" if node.lower is None else self.expr(node.lower, _TUPLE + 1)
        upper = "" if node.upper is None else self.expr(node.upper, _TUPLE + 1)
        text = f"{lower}:{upper}"
        return text if node.step is None else f"{text}:{self.expr(node.step, _TUPLE + 1)}"

    @staticmethod
    def constant(value: Any) -> tuple[str, int]:
        kind = type(value)
        if kind is float:
            if math.isinf(value):  # astor's spelling of an infinity: a literal that overflows
                return ("1e1000", _NUMBER) if value > 0 else ("-1e1000", _UNARY)
            if math.isnan(value):
                raise Unprintable("a nan literal")
            text = repr(value)
            return text, (_UNARY if text.startswith("-") else _NUMBER)
        if kind in (int, bool):
            return repr(value), (_UNARY if value < 0 else _NUMBER)
        if kind in (str, bytes) or value is None:
            return repr(value), _ATOM
        if value is Ellipsis:
            return "...", _ATOM
        raise Unprintable(f"a {kind.__name__} literal")
