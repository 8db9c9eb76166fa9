"""Inline a rule's body into generated code, with the program's names substituted.

>>> import math
>>> from ast_ad import printer, registry, rules, syntax
>>> table = syntax.RefTable()
>>> body = inline(registry.lookup(math.sin).vjps[0], syntax.name("y_bar"), syntax.name("y"),
...               [syntax.name("x")], {}, table)
>>> printer.to_source(gast.gast_to_ast(body), printer="astor").strip(), table.entries[0].hint
('(y_bar * §0.cos(x))', 'math')

A rule inlines when it is a lambda, or a def whose body is one ``return``, and
every parameter its body reads gets a name, a literal or a literal default.
Otherwise ``inline`` returns ``None`` and the generator emits a call to the rule.
After substitution, ``c is None`` tests and conditional expressions on
constants are folded, so ``axis=None`` defaults leave no dead branches behind.
"""

from __future__ import annotations

import builtins
import functools
import inspect
import operator
from collections.abc import Callable
from typing import Any

import gast

from ast_ad import parse, runtime, syntax
from ast_ad.errors import ASTADError

LITERALS = (type(None), bool, int, float, complex, str)


class Hole:
    """Stands for a gast expression while ``inspect.Signature.bind`` matches arguments to parameters."""

    def __init__(self, node: gast.expr):
        self.node = node


def inline(rule: Callable[..., Any], g: gast.expr, ans: gast.expr, args: list[gast.expr],
           kwargs: dict[str, gast.expr], refs: syntax.RefTable) -> gast.expr | None:
    """The rule's body applied to these expressions, or ``None`` if it does not inline."""
    template = template_of(rule)
    if template is None:
        return None
    signature, body = template
    values = _bind(rule, signature, [g, ans, *args], kwargs)
    substitute = _Substitute(values, rule.__globals__, refs)
    uses = _USES[rule] = _USES.get(rule, 0) + 1
    try:
        # a rule inlined often gets a builder of its own; the first few times, the copy (a builder costs what
        # about ten copies cost to write and compile, and a first gradient inlines each of its rules once)
        result: gast.expr = _builder(rule)(values, substitute) if uses > BUILT_AFTER else substitute.copy(body)
    except _NoInline:
        return None
    return result


BUILT_AFTER = 8  # uses of a rule's template before it gets a builder (``_builder``)
_USES: dict[Callable[..., Any], int] = {}


@functools.cache
def _builder(rule: Callable[..., Any]) -> Callable[[dict[str, Any], Any], gast.expr]:
    """A function that makes the rule's template with the program's expressions put in, as ``_Substitute.copy``
    does, from Python written for this template: each node made directly (a fifth of a long function's
    transform was that copy). It is called with the parameters' expressions and the ``_Substitute``."""
    signature, body = template_of(rule) or (None, None)
    source = _BuilderSource(set(signature.parameters) if signature is not None else set())
    expression = source.made(body) if body is not None else "None"
    text = "\n".join(["def build(values, s):", *source.lines, f"    return {expression}"])
    scope: dict[str, Any] = {"K": source.constants, "new": syntax.new, "clone": syntax.clone, "NoInline": _NoInline,
                             "FOLDS": FOLDS}
    exec(text, scope)  # noqa: S102 -- code written here from the rule's own template
    build: Callable[[dict[str, Any], Any], gast.expr] = scope["build"]
    return build


class _BuilderSource:
    """The Python of a template's builder (``_builder``): its lines, and the constants it reads."""

    def __init__(self, params: set[str]):
        self.params = params
        self.constants: list[Any] = []
        self.lines: list[str] = []
        self.read: dict[str, str] = {}  # parameter -> the local that holds its expression

    def constant(self, value: Any) -> str:
        self.constants.append(value)
        return f"K[{len(self.constants) - 1}]"

    def made(self, node: Any) -> str:
        """Python that makes ``node`` (a template's node, a list of them, or a plain value)."""
        if type(node) is list:
            return "[" + ", ".join(self.made(item) for item in node) + "]"
        if not isinstance(node, gast.AST):
            return self.constant(node)
        if type(node) is gast.Name:
            if node.id not in self.params:
                return f"s.name({self.constant(node)})"  # a global or a builtin: a marker
            if node.id not in self.read:
                self.read[node.id] = local = f"p{len(self.read)}"
                self.lines.append(f"    {local} = values[{node.id!r}]")
                self.lines.append(f"    if {local} is None:\n        raise NoInline")  # (``*args``, say)
            return f"clone({self.read[node.id]})"
        fields = syntax.NODE_FIELDS[type(node)]
        state = ", ".join(f"{key!r}: " + (self.made(value) if key in fields and (
            type(value) is list or isinstance(value, gast.AST)) else self.constant(value))
            for key, value in node.__dict__.items())
        building = f"new({self.constant(type(node))}, {{{state}}})"
        return f"FOLDS[{self.constant(type(node))}](s, {building})" if type(node) in FOLDS else building


def _bind(rule: Callable[..., Any], signature: inspect.Signature, args: list[gast.expr],
          kwargs: dict[str, gast.expr]) -> dict[str, gast.expr | None]:
    """Each parameter's expression (``None``: one that cannot be substituted, such as ``*args``).

    Positional arguments to plain parameters are matched directly (``Signature.bind`` took a quarter of
    inlining's time); anything else goes through ``Signature.bind``.
    """
    plain = None if kwargs else _plain_binding(rule, len(args))
    if plain is not None:
        names, defaults = plain
        values = dict(zip(names, args, strict=True))
        values.update(defaults)
        return values
    bound = signature.bind(*map(Hole, args), **{k: Hole(v) for k, v in kwargs.items()})
    bound.apply_defaults()
    return {p: _value(signature.parameters[p], v) for p, v in bound.arguments.items()}


@functools.cache
def _plain_binding(rule: Callable[..., Any], nargs: int) -> tuple[tuple[str, ...], dict[str, Any]] | None:
    """For ``nargs`` positional arguments to the rule's plain parameters: the names they bind, and the expressions
    of the defaults of the rest (shared: substitution copies what it puts in); ``None`` where that does not fit."""
    params = list(signature_of(rule).parameters.values())
    if nargs > len(params) or any(p.kind is not p.POSITIONAL_OR_KEYWORD for p in params) \
            or any(p.default is p.empty for p in params[nargs:]):
        return None
    return tuple(p.name for p in params[:nargs]), {p.name: _value(p, p.default) for p in params[nargs:]}


def bindable(rule: Callable[..., Any], nargs: int, kwargs: list[str]) -> bool:
    """Whether a call with ``nargs`` positional arguments and these keywords fits the rule."""
    return _bindable(rule, nargs, tuple(kwargs))


@functools.cache
def _bindable(rule: Callable[..., Any], nargs: int, kwargs: tuple[str, ...]) -> bool:
    try:
        signature_of(rule).bind(*([None] * (nargs + 2)), **dict.fromkeys(kwargs))
    except TypeError:
        return False
    except ValueError:
        return True
    return True


@functools.cache
def signature_of(rule: Callable[..., Any]) -> inspect.Signature:
    return inspect.signature(rule)


@functools.cache
def template_of(rule: Callable[..., Any]) -> tuple[inspect.Signature, gast.expr] | None:
    try:
        tree = parse.parse(rule).tree
        signature = signature_of(rule)
    except (ASTADError, TypeError, ValueError):
        return None
    body = [s for s in tree.body if not (isinstance(s, gast.Expr) and isinstance(s.value, gast.Constant))]
    if len(body) != 1 or not isinstance(body[0], gast.Return) or body[0].value is None:
        return None
    scoped = (gast.Lambda, gast.ListComp, gast.SetComp, gast.DictComp, gast.GeneratorExp, gast.NamedExpr)
    if any(isinstance(node, scoped) for node in gast.walk(body[0].value)):
        return None
    return signature, body[0].value


def _value(param: inspect.Parameter, value: Any) -> gast.expr | None:
    if param.kind is param.VAR_POSITIONAL and all(isinstance(v, Hole) for v in value):
        return gast.Tuple(elts=[v.node for v in value], ctx=gast.Load())  # ``*xs``: the tuple of what it took
    if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
        return None
    if isinstance(value, Hole):
        return value.node
    if is_literal(value):
        return syntax.const(value)
    return None


def is_literal(value: Any) -> bool:
    if isinstance(value, tuple):
        return all(is_literal(v) for v in value)
    return isinstance(value, LITERALS)


class _NoInline(Exception):
    pass


class _Substitute:
    """A copy of a rule's body with the program's expressions for its parameters, folded as it is built.

    One pass over the template, bottom up. ``copy`` says what inlining makes; ``_builder`` makes the same from
    Python written for each template (the tests compare the two for every registered rule), and reads the
    markers and folds here.
    """

    def __init__(self, values: dict[str, gast.expr | None], namespace: dict[str, Any], refs: syntax.RefTable):
        self.values, self.namespace, self.refs = values, namespace, refs

    def copy(self, node: Any) -> Any:
        if type(node) is list:
            return [self.copy(item) for item in node]
        if not isinstance(node, gast.AST):
            return node
        if isinstance(node, gast.Name):
            return self.name(node)
        made = syntax.rebuilt_above(node, self.copy)  # (a template's contexts and operators are shared)
        fold = FOLDS.get(type(made))
        return fold(self, made) if fold is not None else made

    def name(self, node: gast.Name) -> gast.expr:
        if node.id in self.values:
            value = self.values[node.id]
            if value is None:
                raise _NoInline
            return syntax.clone(value)
        if node.id in self.namespace:
            return self.refs.marker(self.namespace[node.id], node.id)
        if hasattr(builtins, node.id):
            return self.refs.marker(getattr(builtins, node.id), node.id)
        raise _NoInline

    # Fold what substitution made constant: ``None is None``, ``a if True else b``, ``2 - 1``, ``x ** 1``;
    # ``pow_minus_one(x, 3)`` becomes ``x ** 2``: a literal exponent needs no helper.
    def fold_call(self, node: gast.Call) -> gast.expr:
        func = node.func
        if isinstance(func, gast.Name) and len(node.args) == 2 and self.refs.lookup(func.id) is runtime.pow_minus_one \
                and _number(node.args[1]) and node.args[1].value >= 1:
            power = syntax.const(node.args[1].value - 1)
            return self.fold_binop(gast.BinOp(left=node.args[0], op=gast.Pow(), right=power))
        return node

    def fold_compare(self, node: gast.Compare) -> gast.expr:
        if len(node.ops) == 1 and isinstance(node.ops[0], (gast.Is, gast.IsNot)) \
                and _constant(node.left) and _constant(node.comparators[0]):
            same = node.left.value is node.comparators[0].value
            return gast.Constant(value=same == isinstance(node.ops[0], gast.Is), kind=None)
        return node

    def fold_ifexp(self, node: gast.IfExp) -> gast.expr:
        if _constant(node.test):
            return node.body if node.test.value else node.orelse
        return node

    def fold_binop(self, node: gast.BinOp) -> gast.expr:
        fold = FOLDABLE.get(type(node.op))
        if fold and _number(node.left) and _number(node.right):
            return syntax.const(fold(node.left.value, node.right.value))
        if isinstance(node.op, gast.Pow) and _number(node.right) and node.right.value == 1:
            return node.left
        return node

    def fold_attribute(self, node: gast.Attribute) -> gast.expr:
        """``rt.fit`` (a rule's read of one of ast_ad's helpers through the module) is the helper itself, so the
        generated code names each helper one way (``fit``, as the rest of it does)."""
        value = node.value
        if type(value) is gast.Name and self.refs.lookup(value.id) is runtime:
            helper = getattr(runtime, node.attr, None)
            if callable(helper):
                return self.refs.marker(helper, node.attr)
        return node


FOLDABLE = {gast.Add: operator.add, gast.Sub: operator.sub, gast.Mult: operator.mul}
FOLDS: dict[type, Callable[[_Substitute, Any], gast.expr]] = {
    gast.Call: _Substitute.fold_call, gast.Compare: _Substitute.fold_compare,
    gast.IfExp: _Substitute.fold_ifexp, gast.BinOp: _Substitute.fold_binop,
    gast.Attribute: _Substitute.fold_attribute}


def _constant(node: gast.expr) -> bool:
    return isinstance(node, gast.Constant)


def _number(node: gast.expr) -> bool:
    return isinstance(node, gast.Constant) and type(node.value) in (int, float)
