"""Small builders of gast nodes, and the translation of IR statements into them.

Objects from outside the function appear in built trees as *markers*, names
like ``§3`` that no Python identifier can spell; the emit stage gives each
object its final name. ``RefTable`` hands markers out.

>>> table = RefTable()
>>> import math
>>> table.marker(math.sin, "math.sin").id, table.marker(math.cos, "math.cos").id
('§0', '§1')
"""

from __future__ import annotations

import ast
import functools
import inspect
import math
import operator
from collections.abc import Callable, Iterator
from typing import Any

import gast
import numpy as np

from ast_ad import runtime
from ast_ad.core import registry
from ast_ad.ir import nodes as ir

MARK = "§"
SCRATCH = "%"  # the names of parts (``templates.Scratch``): in no identifier


class RefTable:
    """The outside objects a generated function reads, by marker."""

    def __init__(self) -> None:
        self.entries: list[ir.Ref] = []
        self._index: dict[ir.Ref, int] = {}

    def marker(self, obj: Any, hint: str) -> gast.Name:
        return self.ref(ir.Ref(obj, hint))

    def lookup(self, marker: str) -> Any:
        """The object behind a marker, or None for a name that is not one."""
        if not marker.startswith(MARK) or not marker[len(MARK):].isdigit():
            return None
        return self.entries[int(marker[len(MARK):])].obj

    def ref(self, ref: ir.Ref) -> gast.Name:
        if ref not in self._index:
            self._index[ref] = len(self.entries)
            self.entries.append(ref)
        return name(f"{MARK}{self._index[ref]}")


def walk(node: gast.AST) -> Iterator[Any]:
    """Every node under ``node``, itself included: ``gast.walk`` (in depth-first order), twice as
    fast."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current)))


class _NodeFields(dict[type, tuple[str, ...]]):
    """For each gast node class, the fields that may hold the nodes below it: not its context
    (``ctx``) nor its operator (``op``: no walker here looks at either), nor a field that holds a
    name, a number or a list of names."""

    def __missing__(self, kind: type) -> tuple[str, ...]:
        fields = self[kind] = tuple(
            field
            for field in getattr(kind, "_fields", ())
            if field not in _NOT_NODES and (kind.__name__, field) not in _NOT_NODES
        )
        return fields


_NOT_NODES = {
    "ctx",
    "id",
    "attr",
    "type_comment",
    "kind",
    "conversion",
    "is_async",
    "level",
    "module",
    "arg",
    "op",
    # an operator: a leaf no walker looks at (``node.op`` is read where it matters)
    ("Compare", "ops"),
    ("Constant", "value"),
    ("Global", "names"),
    ("Nonlocal", "names"),
    ("MatchClass", "kwd_attrs"),
    ("FunctionDef", "name"),
    ("AsyncFunctionDef", "name"),
    ("ClassDef", "name"),
    ("alias", "name"),
    ("alias", "asname"),
    ("MatchAs", "name"),
    ("MatchStar", "name"),
    ("MatchMapping", "rest"),
}
NODE_FIELDS = _NodeFields()  # ``NODE_FIELDS[type(node)]``: what ``children`` reads


class _ChildReaders(dict[type, Callable[[Any], list[Any]]]):
    """For each gast node class, a function written for it that lists the nodes under one of its
    instances (a loop over the class's fields, with a call and a test per field, was most of every
    walk's cost)."""

    def __missing__(self, kind: type) -> Callable[[Any], list[Any]]:
        lines = ["def children(node):", "    out = []"]
        for field in NODE_FIELDS[kind]:
            lines += [f"    value = getattr(node, {field!r}, None)",
                      "    if type(value) is list:",
                      "        out += value",
                      "    elif isinstance(value, AST):",
                      "        out.append(value)"]
        lines += ["    if None in out:  # a dict display's ``**`` entry has no key",
                  "        out = [child for child in out if child is not None]",
                  "    return out"]
        scope: dict[str, Any] = {"AST": gast.AST}
        # (code of ast_ad's own, from the class's field names)
        exec("\n".join(lines), scope)  # noqa: S102
        made: Callable[[Any], list[Any]] = scope["children"]
        self[kind] = made
        return made


_CHILD_READERS = _ChildReaders()


def children(node: gast.AST) -> list[Any]:
    """The nodes directly under ``node``, in field order (contexts left out)."""
    return _CHILD_READERS[type(node)](node)


def name_ids(node: gast.AST, loads: bool = False) -> set[str]:
    """The ids of the names under ``node`` (only those read, with ``loads``): ``walk`` without a
    generator, which the transform of a long function called for every node of the backward pass,
    several times."""
    found: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if type(current) is gast.Name:
            if not loads or type(current.ctx) is gast.Load:
                found.add(current.id)
            continue
        stack.extend(children(current))
    return found


def load_counts(node: gast.AST, counts: dict[str, int]) -> dict[str, int]:
    """``counts`` with each read of a name under ``node`` added (as ``name_ids`` walks)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if type(current) is gast.Name:
            if type(current.ctx) is gast.Load:
                counts[current.id] = counts.get(current.id, 0) + 1
            continue
        stack.extend(children(current))
    return counts


# Python's parser shares one instance of each context among all the names of a tree; so does
# ``to_ast``
_CONTEXTS: dict[type, ast.expr_context] = {
    gast.Load: ast.Load(),
    gast.Store: ast.Store(),
    gast.Del: ast.Del(),
}
SCOPES = (
    gast.FunctionDef,
    gast.Lambda,
    gast.ListComp,
    gast.SetComp,
    gast.DictComp,
    gast.GeneratorExp,
)


def to_ast(node: Any, names: list[ast.Name] | None = None) -> Any:
    """Python's own ``ast`` for a gast tree, without source locations (the printers need none);
    every ``ast.Name`` made is appended to ``names``, where given (the emit stage reads the locals
    and renames the markers from it, with no other walk).

    The nodes of generated code have the same names and fields in both, so each is made directly;
    functions, lambdas and comprehensions, whose parameters and scopes gast spells its own way, go
    through ``gast.gast_to_ast``, their bodies through this again. (``gast_to_ast`` over a whole
    long gradient was a fifth of its transform.)
    """
    kind = type(node)
    if kind is list:
        return [to_ast(item, names) for item in node]
    if kind is gast.Name:
        made_name = ast.Name(id=node.id, ctx=_CONTEXTS[type(node.ctx)])
        if names is not None:
            names.append(made_name)
        return made_name
    if kind is gast.Constant:
        return ast.Constant(value=node.value, kind=node.kind)
    if kind in _CONTEXTS:
        return _CONTEXTS[kind]
    if not isinstance(node, gast.AST):
        return node
    if isinstance(node, (gast.FunctionDef, *SCOPES)):
        if isinstance(node, gast.FunctionDef):
            shell = gast.FunctionDef(
                **{field: getattr(node, field, None) for field in node._fields}
            )
            shell.body = [gast.Pass()]
            made = gast.gast_to_ast(shell)
            made.body = to_ast(node.body, names)
            converted = made.args
        else:
            made = converted = gast.gast_to_ast(node)
        # parameters (and a lambda's or comprehension's inside), converted by gast
        if names is not None:
            names += [n for n in ast.walk(converted) if type(n) is ast.Name]
        return made
    made = getattr(ast, kind.__name__)
    return made(
        **{
            field: to_ast(getattr(node, field), names)
            for field in made._fields
            if hasattr(node, field)
        }
    )


def statements(node: Any) -> Iterator[Any]:
    """Every statement under ``node`` (a function or statement of gast or ast), in order, not the
    expressions in them."""
    for field in ("body", "orelse", "finalbody"):
        for stmt in getattr(node, field, None) or ():
            if isinstance(stmt, (gast.stmt, ast.stmt)):
                yield stmt
                yield from statements(stmt)


def replace_markers(node: gast.AST, resolve: Any) -> gast.AST:
    """Replace every marker name under ``node`` by ``resolve(marker)``, in source order.

    Works on gast trees and on Python's own ``ast`` trees alike.
    """
    for field in node._fields:
        value = getattr(node, field, None)
        if type(value) is list:
            for k, item in enumerate(value):
                if type(item) in NAMES:
                    if item.id.startswith(MARK):
                        value[k] = resolve(item.id)
                elif isinstance(item, gast.AST):
                    replace_markers(item, resolve)
        elif type(value) in NAMES and value is not None:
            if value.id.startswith(MARK):
                setattr(node, field, resolve(value.id))
        elif isinstance(value, gast.AST):
            replace_markers(value, resolve)
    return node


NAMES = (gast.Name, ast.Name)


def new(kind: Any, state: dict[str, Any]) -> Any:
    """``kind(**state)`` for a gast node class, without its Python ``__init__`` (which only sets the
    attributes, at three times the cost: the transform makes a hundred thousand nodes for a long
    function)."""
    node = kind.__new__(kind)
    node.__dict__.update(state)
    return node


def rebuilt(node: gast.AST, child: Any) -> Any:
    """A node of ``node``'s kind and location whose fields are ``child`` of its fields."""
    state = dict(node.__dict__)  # its fields and its location
    for field in node._fields:
        value = state.get(field)
        state[field] = child(value) if type(value) is list or isinstance(value, gast.AST) else value
    return new(type(node), state)


def rebuilt_above(node: gast.AST, child: Any) -> Any:
    """``rebuilt``, with ``child`` applied only to the fields that hold nodes below it
    (``NODE_FIELDS``): its context and operator are the same objects (no code changes one in
    place)."""
    state = dict(node.__dict__)  # its fields and its location
    for field in NODE_FIELDS[type(node)]:
        value = state.get(field)
        if type(value) is list or isinstance(value, gast.AST):
            state[field] = child(value)
    return new(type(node), state)


def substituted(node: Any, replace: Any) -> Any:
    """``node`` with ``replace(name)`` in place of each name for which it gives a node (not
    ``None``): the nodes on the way to a replaced name are new, the rest are shared, and ``node``
    itself if nothing was replaced."""
    kind = type(node)
    if kind is gast.Name:
        made = replace(node)
        return node if made is None else made
    if kind is list:
        items = None
        for k, item in enumerate(node):
            made = substituted(item, replace)
            if made is not item:
                if items is None:
                    items = list(node)
                items[k] = made
        return node if items is None else items
    state = None
    for field in NODE_FIELDS[kind]:
        old = getattr(node, field, None)
        if type(old) is list or isinstance(old, gast.AST):
            made = substituted(old, replace)
            if made is not old:
                if state is None:
                    state = dict(node.__dict__)
                state[field] = made
    return node if state is None else new(kind, state)


def clone(node: Any) -> Any:
    """A deep copy of a gast tree (much faster than ``copy.deepcopy``, which it replaces here)."""
    kind = type(node)
    # the most common node, copied directly
    if kind is gast.Name and node.__dict__.get("annotation") is None:
        state = dict(node.__dict__)
        state["ctx"] = new(type(node.ctx), {})
        return new(kind, state)
    if kind is list:
        return [clone(item) for item in node]
    if not isinstance(node, gast.AST):
        return node
    return rebuilt(node, clone)


# ---- node builders -------------------------------------------------------------------------------
def name(id_: str, ctx: gast.AST | None = None) -> gast.Name:
    made: gast.Name = new(
        gast.Name,
        {"id": id_, "ctx": ctx or new(gast.Load, {}), "annotation": None, "type_comment": None},
    )
    return made


def store(id_: str) -> gast.Name:
    return name(id_, new(gast.Store, {}))


def const(value: Any, refs: RefTable | None = None) -> gast.expr:
    """A literal; slices become ``slice(...)`` calls (through ``refs``, so a local ``slice`` is
    harmless)."""
    if isinstance(value, tuple):
        return gast.Tuple(elts=[const(v, refs) for v in value], ctx=gast.Load())
    if isinstance(value, list):
        return gast.List(elts=[const(v, refs) for v in value], ctx=gast.Load())
    if isinstance(value, slice):
        func = refs.marker(slice, "slice") if refs else name("slice")
        return call(func, [const(value.start), const(value.stop), const(value.step)])
    if value is Ellipsis:
        return gast.Constant(value=Ellipsis, kind=None)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        return gast.UnaryOp(op=gast.USub(), operand=const(-value, refs))
    # (``np.pi``, ``math.pi``: read as such)
    if type(value) is float and value == math.pi and refs is not None:
        return gast.Attribute(value=refs.marker(np, "np"), attr="pi", ctx=gast.Load())
    made: gast.Constant = new(gast.Constant, {"value": value, "kind": None})
    return made


def call(
    func: gast.expr, args: list[gast.expr], keywords: dict[str, gast.expr] | None = None
) -> gast.Call:
    kws = (
        [new(gast.keyword, {"arg": k, "value": v}) for k, v in keywords.items()] if keywords else []
    )
    made: gast.Call = new(gast.Call, {"func": func, "args": args, "keywords": kws})
    return made


def assign(targets: str | list[str], value: gast.expr) -> gast.Assign:
    target = store(targets) if isinstance(targets, str) else \
        gast.Tuple(elts=[store(t) for t in targets], ctx=gast.Store())
    made: gast.Assign = new(
        gast.Assign, {"targets": [target], "value": value, "type_comment": None}
    )
    return made


def add(left: gast.expr, right: gast.expr) -> gast.BinOp:
    return gast.BinOp(left=left, op=gast.Add(), right=right)


def unsigned(node: gast.expr) -> gast.expr | None:
    """``node`` without the minus sign that leads it (``-e`` -> ``e``, ``-a * b / c`` -> ``a * b /
    c``), or ``None``."""
    if type(node) is gast.UnaryOp and type(node.op) is gast.USub:
        return node.operand
    if type(node) is gast.BinOp and type(node.op) in (gast.Mult, gast.Div):
        left = unsigned(node.left)
        if left is not None:
            return gast.BinOp(left=left, op=node.op, right=node.right)
    return None


def attribute(name_: str, attr: str) -> gast.Attribute:
    """``name_.attr``, read: ``syntax.call(attribute("x_tape", "pop"), [])`` is ``x_tape.pop()``."""
    return gast.Attribute(value=name(name_), attr=attr, ctx=gast.Load())


def tuple_(elts: list[gast.expr]) -> gast.Tuple:
    return gast.Tuple(elts=elts, ctx=gast.Load())


def ret(value: gast.expr) -> gast.Return:
    return gast.Return(value=value)


def comment(text: str) -> gast.Expr:
    """A statement the emit stage prints as ``# text``."""
    made: gast.Expr = new(
        gast.Expr, {"value": new(gast.Constant, {"value": MARK + "#" + text, "kind": None})}
    )
    return made


def comment_text(stmt: ast.AST) -> str | None:
    """The text of a statement made by :func:`comment` (in a gast tree or a Python ``ast`` one),
    else None."""
    if (
        isinstance(stmt, (gast.Expr, ast.Expr))
        and isinstance(stmt.value, (gast.Constant, ast.Constant))
        and isinstance(stmt.value.value, str)
        and stmt.value.value.startswith(MARK + "#")
    ):
        return stmt.value.value[len(MARK) + 1:]
    return None


def function(fname: str, params: list[str], body: list[gast.stmt],
             defaults: list[gast.expr] | None = None) -> gast.FunctionDef:
    args = gast.arguments(args=[name(p, gast.Param()) for p in params], posonlyargs=[], vararg=None,
                          kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=defaults or [])
    return gast.FunctionDef(name=fname, args=args, body=body, decorator_list=[], returns=None,
                            type_comment=None, type_params=[])


# ---- IR to gast ----------------------------------------------------------------------------------
BINARY_SYNTAX = {operator.add: gast.Add, operator.sub: gast.Sub, operator.mul: gast.Mult,
                 operator.truediv: gast.Div, operator.pow: gast.Pow, operator.matmul: gast.MatMult,
                 operator.floordiv: gast.FloorDiv, operator.mod: gast.Mod}
UNARY_SYNTAX = {operator.neg: gast.USub, operator.pos: gast.UAdd, operator.not_: gast.Not}
COMPARE_SYNTAX = {
    operator.lt: gast.Lt,
    operator.le: gast.LtE,
    operator.gt: gast.Gt,
    operator.ge: gast.GtE,
    operator.eq: gast.Eq,
    operator.ne: gast.NotEq,
}


def atom(a: ir.Atom, refs: RefTable) -> gast.expr:
    kind = type(a)
    if kind is ir.Var:
        return name(a.name)  # type: ignore[union-attr]
    if kind is ir.Const:
        return const(a.value, refs)  # type: ignore[union-attr]
    return refs.ref(a)  # type: ignore[arg-type]


def index(a: ir.Atom, refs: RefTable) -> gast.expr:
    """An atom in subscript position, where ``1:3`` and ``...`` may be written as such."""
    if isinstance(a, ir.Const) and isinstance(a.value, slice):
        s = a.value
        return gast.Slice(*(None if v is None else const(v) for v in (s.start, s.stop, s.step)))
    if isinstance(a, ir.Const) and isinstance(a.value, tuple):
        return gast.Tuple(elts=[index(ir.Const(v), refs) for v in a.value], ctx=gast.Load())
    return atom(a, refs)


def expr(e: ir.Expr, refs: RefTable, fn_name: gast.expr | None = None,
         at: Callable[[ir.Atom], gast.expr | None] | None = None) -> gast.expr:
    """The gast expression for an IR right-hand side (``fn_name`` overrides the callee's name;
    ``at``, where it gives one, is the expression for an atom, in place of the atom itself)."""
    if type(e) is ir.Call:
        args = [atom(a, refs) for a in e.args] if at is None else [_at(a, refs, at) for a in e.args]
        fn = e.fn.obj
        if fn_name is None and not e.kwargs:
            if fn in BINARY_SYNTAX and len(args) == 2:
                return new(
                    gast.BinOp,
                    {"left": args[0], "op": new(BINARY_SYNTAX[fn], {}), "right": args[1]},
                )
            if fn in UNARY_SYNTAX and len(args) == 1:
                return new(gast.UnaryOp, {"op": new(UNARY_SYNTAX[fn], {}), "operand": args[0]})
            if fn in COMPARE_SYNTAX and len(args) == 2:
                return gast.Compare(left=args[0], ops=[COMPARE_SYNTAX[fn]()], comparators=[args[1]])
            if fn is operator.getitem and len(args) == 2:
                item = (
                    _sliced(args[1], refs) if type(e.args[1]) is ir.Var else index(e.args[1], refs)
                )
                return new(
                    gast.Subscript, {"value": args[0], "slice": item, "ctx": new(gast.Load, {})}
                )
            # ``[x] * n``, as written
            if fn is runtime.repeat_seq and type(args[0]) in (gast.List, gast.Tuple):
                return new(
                    gast.BinOp, {"left": args[0], "op": new(gast.Mult, {}), "right": args[1]}
                )
            # (``1.T`` would not parse)
            if e.attribute is not None and type(e.args[0]) is not ir.Const:
                return new(
                    gast.Attribute,
                    {"value": args[0], "attr": e.attribute, "ctx": new(gast.Load, {})},
                )
        if (
            not e.kwargs
            and not e.moved
            and e.args
            and type(e.args[-1]) is ir.Const
            and fn_name is None
        ):
            args = args[:_written_args(fn, e.args)]
        keywords = {}
        if e.moved:  # the arguments the user wrote by keyword, as written
            for key, arg in zip(e.moved, args[len(args) - len(e.moved):], strict=True):
                if key is not None:
                    keywords[key] = arg
            args = args[:len(args) - len(e.moved)]
        keywords.update((k, _at(v, refs, at)) for k, v in e.kwargs)
        return call(fn_name or refs.ref(e.fn), args, keywords)
    if type(e) is ir.Pack:
        elts = [_at(a, refs, at) for a in e.elts]
        if e.kind == "dict":
            return gast.Dict(keys=[const(k) for k in e.keys], values=elts)
        return gast.List(elts=elts, ctx=gast.Load()) if e.kind == "list" else tuple_(elts)
    if type(e) is ir.Attr:
        return gast.Attribute(value=_at(e.value, refs, at), attr=e.attr, ctx=gast.Load())
    if type(e) is ir.Raw:
        node = raw(e, refs)
        return (
            node
            if at is None
            else substituted(
                node,
                lambda n: (
                    at(ir.Var(n.id))
                    if type(n.ctx) is gast.Load and not n.id.startswith(MARK)
                    else None
                ),
            )
        )
    return _at(e, refs, at)  # type: ignore[arg-type]


def _sliced(item: gast.expr, refs: RefTable) -> gast.expr:
    """``a:b:c`` for a call ``slice(a, b, c)`` written into a subscript (``r[:trips]``), else
    ``item``."""
    if type(item) is not gast.Call or type(item.func) is not gast.Name or item.keywords \
            or not 1 <= len(item.args) <= 3 or refs.lookup(item.func.id) is not slice:
        return item
    bounds: list[gast.expr | None] = [
        None if type(a) is gast.Constant and a.value is None else a for a in item.args
    ]
    if len(bounds) == 1:
        bounds = [None, bounds[0]]
    bounds += [None] * (3 - len(bounds))
    return gast.Slice(lower=bounds[0], upper=bounds[1], step=bounds[2])


def _written_args(fn: Any, args: tuple[ir.Atom, ...]) -> int:
    """How many of ``args`` a call of one of ast_ad's helpers writes: not the last ones that are the
    parameters' literal defaults (``expand_reduced(g, x)``, not ``expand_reduced(g, x, None,
    False)``: a rule passes each)."""
    defaults = _helper_defaults(fn) if registry.is_helper(fn) else ()
    count = len(args)
    while (
        count
        and count - 1 < len(defaults)
        and type(args[count - 1]) is ir.Const
        and _same_literal(args[count - 1].value, defaults[count - 1])  # type: ignore[union-attr]
    ):
        count -= 1
    return count


def _same_literal(a: Any, b: Any) -> bool:
    return type(a) is type(b) and (a is b or (type(a) in (int, float, str) and a == b))


@functools.cache
def _helper_defaults(fn: Any) -> tuple[Any, ...]:
    """Each positional parameter's default (a marker where it has none), by position."""
    return tuple(p.default for p in inspect.signature(fn).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def _at(a: ir.Atom, refs: RefTable, at: Callable[[ir.Atom], gast.expr | None] | None) -> gast.expr:
    """``at``'s expression for ``a``, where it gives one, else ``a`` itself."""
    made = at(a) if at is not None else None
    return atom(a, refs) if made is None else made


def statement(
    s: ir.Stmt, refs: RefTable, at: Callable[[ir.Atom], gast.expr | None] | None = None
) -> gast.stmt:
    """The gast statement for an IR statement (compound ones with their blocks; ``at``, as for
    ``expr``, for the atoms of a simple one)."""
    if isinstance(s, ir.Assign):
        return assign(s.target, expr(s.value, refs, at=at))
    if isinstance(s, ir.Unpack):
        return assign(list(s.targets), _at(s.value, refs, at))
    if isinstance(s, ir.Append):
        method = gast.Attribute(value=name(s.target), attr="append", ctx=gast.Load())
        return gast.Expr(value=call(method, [_at(s.value, refs, at)]))
    if isinstance(s, ir.Pop):
        popped = call(gast.Attribute(value=name(s.source), attr="pop", ctx=gast.Load()), [])
        return gast.Expr(value=popped) if s.target is None else assign(s.target, popped)
    if isinstance(s, ir.SetItem):
        item = gast.Subscript(value=name(s.target), slice=index(s.index, refs), ctx=gast.Store())
        return gast.Assign(targets=[item], value=_at(s.value, refs, at), type_comment=None)
    if isinstance(s, ir.If):
        return gast.If(test=atom(s.test, refs), body=block(s.body, refs) or [gast.Pass()],
                       orelse=block(s.orelse, refs))
    if isinstance(s, ir.For):
        return gast.For(
            target=store(s.target),
            iter=atom(s.iter, refs),
            body=block(s.body, refs) or [gast.Pass()],
            orelse=[],
            type_comment=None,
        )
    if isinstance(s, ir.While):
        return gast.While(
            test=raw(s.test, refs), body=block(s.body, refs) or [gast.Pass()], orelse=[]
        )
    if isinstance(s, ir.Break):
        return gast.Break()
    if isinstance(s, ir.Comment):
        return comment(s.text)
    assert not isinstance(s, ir.Mark), f"a mark is resolved before printing: {s.data!r}"
    return _effect(s, refs)


def block(body: tuple[ir.Stmt, ...], refs: RefTable) -> list[gast.stmt]:
    return [statement(s, refs) for s in body]


def pieces(body: list[ir.Stmt], refs: RefTable) -> list[gast.stmt]:
    """The statements of ``body`` with each part (a name ``templates.Scratch`` made: a piece of one
    expression, read once, ``pieces.one_expression``) written where it is read: the expression
    printed whole. A decision made at run time, an ``ir.If`` that binds one part on each path, is
    written as a conditional expression; a part unpacked, as ``a, b = f(x)``, and a loop's, as ``for
    a, b in items:``; ``r[slice(None, n)]``, as ``r[:n]``."""
    out: list[gast.stmt] = []
    waiting: dict[str, gast.expr] = {}
    _composed(body, [waiting], refs, out)
    # (a pop among them would be lost)
    assert not waiting, f"parts no statement reads: {sorted(waiting)}"
    return out


def _composed(
    body: list[ir.Stmt] | tuple[ir.Stmt, ...],
    scopes: list[dict[str, gast.expr]],
    refs: RefTable,
    out: list[gast.stmt],
) -> None:
    """The values of ``body``'s parts, waiting in ``scopes[-1]`` until their reader takes them; the
    rest of its statements appended to ``out``. A branch's or a loop's block has its own parts
    (``pieces``): a part from outside would be computed again at each step, or on one path only."""
    waiting = scopes[-1]

    def at(a: ir.Atom) -> gast.expr | None:
        if type(a) is not ir.Var:
            return None
        for scope in reversed(scopes):
            if a.name in scope:
                return scope.pop(a.name)
        return None
    for stmt in body:
        if type(stmt) is ir.Assign:  # (the most of them: first)
            value = expr(stmt.value, refs, at=at)
            if stmt.target.startswith(SCRATCH):  # a part: it waits for its reader
                waiting[stmt.target] = value
            else:
                out.append(assign(stmt.target, value))
        elif type(stmt) is ir.Pop and stmt.target is not None and stmt.target.startswith(SCRATCH):
            waiting[stmt.target] = statement(stmt, refs).value  # (``xs.pop()``)
        elif isinstance(stmt, ir.For):
            target, steps = store(stmt.target), stmt.body
            if stmt.target.startswith(SCRATCH):  # a part unpacked at once: ``for a, b in items:``
                unpack = steps[0]
                assert type(unpack) is ir.Unpack and unpack.value == ir.Var(stmt.target), unpack
                target, steps = (
                    gast.Tuple(elts=[store(n) for n in unpack.targets], ctx=gast.Store()),
                    steps[1:],
                )
            out.append(
                gast.For(
                    target=target,
                    iter=_at(stmt.iter, refs, at),
                    body=pieces(list(steps), refs) or [gast.Pass()],
                    orelse=[],
                    type_comment=None,
                )
            )
        elif isinstance(stmt, ir.While):
            out.append(
                gast.While(
                    test=raw(stmt.test, refs),
                    body=pieces(list(stmt.body), refs) or [gast.Pass()],
                    orelse=[],
                )
            )
        elif isinstance(stmt, ir.If) and _decision(stmt):  # a rule's, binding one part on each path
            test = expr(stmt.test, refs, at=at)
            paths = []
            for branch in (stmt.body, stmt.orelse):
                inner: dict[str, gast.expr] = {}
                _composed(branch, [*scopes, inner], refs, out)
                paths.append(inner)
            (target,) = paths[0]
            waiting[target] = gast.IfExp(
                test=_truth(test, refs), body=paths[0][target], orelse=paths[1][target]
            )
        elif isinstance(stmt, ir.If):  # a branch of the program's
            out.append(
                gast.If(
                    test=_at(stmt.test, refs, at),
                    body=pieces(list(stmt.body), refs) or [gast.Pass()],
                    orelse=pieces(list(stmt.orelse), refs),
                )
            )
        else:
            out.append(statement(stmt, refs, at))


def _decision(stmt: ir.If) -> bool:
    """Whether ``stmt`` is a decision of a rule's: its paths compute parts only (one of them read
    after it)."""
    return bool(stmt.body) and all(
        (type(s) is ir.Assign and s.target.startswith(SCRATCH))
        or (type(s) is ir.If and _decision(s))
        for s in (*stmt.body, *stmt.orelse)
    )


def _truth(test: gast.expr, refs: RefTable) -> gast.expr:
    """A test as a test reads it: ``bool(a)`` as ``a``, in an ``and``, an ``or`` or a ``not`` too
    (the lowering asks each value for its truth once, with ``bool``, where a test of a statement
    needs one)."""
    kind = type(test)
    if (
        kind is gast.Call
        and type(test.func) is gast.Name
        and len(test.args) == 1
        and not test.keywords
        and test.func.id.startswith(MARK)
        and refs.lookup(test.func.id) is bool
    ):
        return _truth(test.args[0], refs)
    if kind is gast.BoolOp:
        return gast.BoolOp(op=test.op, values=[_truth(v, refs) for v in test.values])
    if kind is gast.UnaryOp and type(test.op) is gast.Not:
        return gast.UnaryOp(op=test.op, operand=_truth(test.operand, refs))
    return test


def function_of(
    fn: ir.Function, name_: str, refs: RefTable, parts: frozenset[str] = frozenset()
) -> gast.FunctionDef:
    """The gast function for a whole IR function that a transformation made: a ``# line`` comment
    above the statements of each line of the user's, ``a, b = f(x)`` for a call unpacked at once,
    and the returned tuple written in the ``return`` (its parts too, where made for it alone).
    ``parts``: names that stand for a part of one expression (the pieces of a rule's body put in as
    IR, ``templates``), each written where it is read, when that is the next statements' and nothing
    else reads it: the expression is printed whole, as written."""
    return _Printer(fn, refs, parts).function(name_)


class _Printer:
    """``function_of``'s walk: the reads of every name, and the parts waiting for their reader."""

    def __init__(self, fn: ir.Function, refs: RefTable, parts: frozenset[str]):
        self.fn, self.refs, self.parts = fn, refs, parts
        self.reads: dict[str, int] = {}
        self.reads_by: dict[int, list[str]] = {}  # what each statement reads, by its id
        for stmt in ir.walk(fn.body):
            reads = self.reads_by[id(stmt)] = ir.reads_of(stmt)
            for read in reads:
                self.reads[read] = self.reads.get(read, 0) + 1
        if isinstance(fn.result, ir.Var):
            self.reads[fn.result.name] = self.reads.get(fn.result.name, 0) + 1
        # parts made, by name, not yet written into their reader
        self.waiting: dict[str, gast.expr] = {}

    def function(self, name_: str) -> gast.FunctionDef:
        body = list(self.fn.body)
        packs: dict[str, ir.Pack] = {}
        while (
            body
            and isinstance(body[-1], ir.Assign)
            and isinstance(body[-1].value, ir.Pack)
            and self.reads.get(body[-1].target) == 1
        ):  # the returned tuple, and tuples made only for it
            last = body.pop()
            assert isinstance(last, ir.Assign) and isinstance(last.value, ir.Pack)
            packs[last.target] = last.value

        def returned(a: ir.Atom) -> gast.expr:
            if isinstance(a, ir.Var) and a.name in packs:
                pack = packs[a.name]
                elts = [returned(e) for e in pack.elts]
                if pack.kind == "dict":
                    return gast.Dict(keys=[const(k) for k in pack.keys], values=elts)
                return (
                    gast.List(elts=elts, ctx=gast.Load()) if pack.kind == "list" else tuple_(elts)
                )
            return (
                self.waiting.pop(a.name)
                if isinstance(a, ir.Var) and a.name in self.waiting
                else atom(a, self.refs)
            )

        self.top = tuple(body)
        statements = self.block(self.top)
        result = returned(self.fn.result)
        return function(name_, list(self.fn.params), statements + [ret(result)])

    def block(self, body: tuple[ir.Stmt, ...]) -> list[gast.stmt]:
        """The statements of ``body``, with a comment where the user's line changes."""
        out: list[gast.stmt] = []
        line = None
        for k, stmt in enumerate(body):
            if stmt.line is not line and stmt.line != line and type(stmt) is not ir.Break:
                line = stmt.line
                if line.lineno:
                    out.append(comment(line.comment(self.fn.result_line.filename)))
            if type(stmt) is ir.Assign:
                value = expr(stmt.value, self.refs, at=self.take if self.waiting else None)
                if stmt.target in self.parts and self.reads.get(stmt.target) == 1 \
                        and type(stmt.value) is not ir.Raw and self.read_next(body, k, stmt.target):
                    self.waiting[stmt.target] = value
                else:
                    out.append(assign(stmt.target, value))
                continue
            last = out[-1] if out else None
            if (
                type(stmt) is ir.Unpack
                and type(stmt.value) is ir.Var
                and self.reads.get(stmt.value.name) == 1
                and isinstance(last, gast.Assign)
                and type(last.targets[0]) is gast.Name
                and last.targets[0].id == stmt.value.name
            ):  # ``a, b = f(x)``: the call unpacked at once
                out[-1] = assign(list(stmt.targets), last.value)
                continue
            if isinstance(stmt, ir.If):
                out.append(
                    gast.If(
                        test=atom(stmt.test, self.refs),
                        body=self.block(stmt.body) or [gast.Pass()],
                        orelse=self.block(stmt.orelse),
                    )
                )
            elif isinstance(stmt, ir.For):
                out.append(
                    gast.For(
                        target=store(stmt.target),
                        iter=atom(stmt.iter, self.refs),
                        body=self.block(stmt.body) or [gast.Pass()],
                        orelse=[],
                        type_comment=None,
                    )
                )
            elif isinstance(stmt, ir.While):
                out.append(
                    gast.While(
                        test=raw(stmt.test, self.refs),
                        body=self.block(stmt.body) or [gast.Pass()],
                        orelse=[],
                    )
                )
            else:
                out.append(self.filled(statement(stmt, self.refs)))
        return out

    def read_next(self, body: tuple[ir.Stmt, ...], k: int, name: str) -> bool:
        """Whether the statements after ``k`` that read ``name``'s value first are of its block,
        parts waiting (or about to be) and, at the end, the one reader, a simple statement or the
        return (nothing between may change what the part reads: the statements between are other
        parts, which only compute)."""
        # (not a slice of the rest: a long function has thousands of parts)
        for j in range(k + 1, len(body)):
            stmt = body[j]
            if name in self.reads_by[id(stmt)]:
                return not ir.blocks(stmt) and not (
                    isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Raw)
                )
            if not (isinstance(stmt, ir.Assign) and stmt.target in self.parts):
                return False
        return body is self.top  # (read by the return, or by its tuple)

    def take(self, a: ir.Atom) -> gast.expr | None:
        """The part waiting for ``a``, taken: it is written where ``a`` is read."""
        return self.waiting.pop(a.name, None) if type(a) is ir.Var else None

    def filled(self, node: Any) -> Any:
        """``node`` with the parts it reads written in."""
        if not self.waiting:
            return node
        return substituted(node, lambda n: self.waiting.pop(n.id) if n.id in self.waiting
                           and type(n.ctx) is gast.Load else None)


def kept(node: gast.stmt, refs: RefTable) -> ir.Effect:
    """``node``, a statement written with the markers of ``refs``, as an IR statement kept for its
    effect (its markers its own, as an effect's are): what a transformation writes that is no value
    (``x_bar[i] += g``, ``trips += 1``)."""
    local: dict[str, int] = {}
    entries: list[ir.Ref] = []
    copy = clone(node)
    for child in walk(copy):
        if type(child) is gast.Name and child.id.startswith(MARK):
            if child.id not in local:
                local[child.id] = len(entries)
                entries.append(refs.entries[int(child.id[len(MARK):])])
            child.id = f"{MARK}{local[child.id]}"
    return ir.Effect(copy, tuple(entries), ir.NOWHERE)


def _effect(s: ir.Effect, refs: RefTable) -> gast.stmt:
    return _remark(clone(s.node), s.refs, refs)


def raw(r: ir.Raw, refs: RefTable) -> gast.expr:
    """A raw expression, its local markers turned into markers of ``refs``."""
    return _remark(clone(r.node), r.refs, refs)


def _remark(node: gast.AST, local: tuple[ir.Ref, ...], refs: RefTable) -> gast.AST:
    for child in walk(node):
        if isinstance(child, gast.Name) and child.id.startswith(MARK):
            child.id = refs.ref(local[int(child.id[1:])]).id
    return node
