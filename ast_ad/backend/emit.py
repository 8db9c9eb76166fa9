"""Stage 5, emit: name every outside object, then print the functions as Python (``writer``; astor,
see ``printer``, for a tree the writer leaves to it).

>>> import numpy as np
>>> spelling(np.sin, "xp.sin"), spelling(np.linalg.inv, "inv")
(('np', ('sin',)), ('np', ('linalg', 'inv')))

Modules get their usual short names (``np``, ``math``), numpy and math functions
are written through them (``np.sin``), and anything else gets the name the user
reached it by. A name is never one the generated functions bind locally. The
text is deterministic: the same function always gives the same bytes.
"""

from __future__ import annotations

import ast
import builtins
import re
import sys
import types
from typing import Any

import gast
import numpy as np

from ast_ad.analysis.kinds import labelled
from ast_ad.backend import printer, writer
from ast_ad.core.records import record
from ast_ad.ir import nodes as ir
from ast_ad.ir import syntax
from ast_ad.ir.naming import Namer, identifier

MODULE_NAMES = {"numpy": "np", "math": "math", "operator": "operator"}
SPELLED_THROUGH = ("numpy", "numpy.linalg", "numpy.fft", "math", "operator")


@record(eq=False)
class Binding:
    """A global or closure value the generated code reads, re-read before every call."""

    alias: str
    fn: Any
    origin: tuple[str, str]
    value: Any  # as it was when transformed
    data: bool  # data is refreshed; a changed function or module means transforming again
    # data that is a numpy array of numbers: its ``kinds.labelled`` label, which must not change
    kind: int = -3


@record
class Emitted:
    text: str
    entry: str
    namespace: dict[str, Any]
    bindings: tuple[Binding, ...]
    # each generated function's name -> the file of the user's function it derives from, and
    files: dict[str, str]
    # ``<file NAME>`` -> the file of a helper inlined from another (comments name it: ``NAME line 4:
    # ...``)
    # the user's functions it derives from, the entry's first (the cache keys on them)
    functions: tuple[Any, ...] = ()


def spelling(obj: Any, hint: str) -> tuple[str, tuple[str, ...]]:
    """The preferred global name for ``obj`` and the attributes to read from it."""
    if isinstance(obj, types.ModuleType):
        return MODULE_NAMES.get(obj.__name__, obj.__name__.rsplit(".", 1)[-1]), ()
    module, name = getattr(obj, "__module__", None), getattr(obj, "__name__", None)
    if module == "_operator":
        module = "operator"
    if (
        module in SPELLED_THROUGH
        and isinstance(name, str)
        and getattr(sys.modules[module], name, None) is obj
    ):
        root, *rest = module.split(".")
        return MODULE_NAMES[root], (*rest, name)
    if module == "builtins" and isinstance(name, str) and getattr(builtins, name, None) is obj:
        return name, ()
    if isinstance(obj, ir.CalleeRef):
        return f"{obj.adjoint.function.name}_{obj.part}", ()
    return identifier(hint.rsplit(".", 1)[-1]), ()


def emit_units(units: list[tuple[Any, str, gast.FunctionDef]]) -> Emitted:
    """Name every function and outside object of these (owner, part, tree) units, and print them.

    An owner is what a transformation made (reverse mode's ``Adjoint``, forward mode's ``Tangent``:
    emission knows neither, only that it has the ``function`` it derives from and the ``refs`` its
    trees' markers index); the trees come finished from the transformation (``reverse_code``,
    ``forward.jvp_units``). The last unit is the entry point.
    """
    found = [_names_in_order(tree) for _, _, tree in units]
    namer = Namer(
        reserved={n.id for names in found for n in names if not n.id.startswith(syntax.MARK)},
        spelled=True,
    )
    names: dict[Any, str] = {}
    namespace: dict[str, Any] = {}
    bindings: list[Binding] = []

    def global_name(key: Any, preferred: str, value: Any) -> str:
        if key not in names:
            names[key] = namer.fresh(preferred)
            namespace[names[key]] = value
        return names[key]

    for owner, part, _ in units:  # the functions' own names first, so they keep them
        global_name((id(owner), part), f"{owner.function.name}_{part}", None)

    def resolve(owner: Any, marker: str) -> str:
        """How the code spells the object behind ``marker``: a global name, then the attributes read
        from it."""
        ref = owner.refs.entries[int(marker[1:])]
        obj = ref.obj
        if isinstance(obj, ir.CalleeRef):
            return names[(id(obj.adjoint), obj.part)]
        data = (
            ref.origin is not None and not callable(obj) and not isinstance(obj, types.ModuleType)
        )
        if data:
            return global_name(
                ("data", id(owner.function.fn), ref.origin), identifier(ref.hint), obj
            )
        root, attrs = spelling(obj, ref.hint)
        base = obj if not attrs else _root_module(obj)
        return ".".join([global_name(id(base), root, base), *attrs])

    spellings: list[dict[str, str]] = []
    for (owner, _, _), found_names in zip(units, found, strict=True):
        # a dotted name prints as the attribute reads it stands for: ``np.sin``
        spelled: dict[str, str] = {}
        for node in found_names:
            if node.id.startswith(syntax.MARK) and node.id not in spelled:
                spelled[node.id] = resolve(owner, node.id)
        spellings.append(spelled)
    entries = [names[(id(owner), part)] for owner, part, _ in units]
    for owner in dict.fromkeys(owner for owner, _, _ in units):
        for ref in owner.refs.entries:
            if ref.origin is not None:
                data = not callable(ref.root) and not isinstance(ref.root, types.ModuleType)
                alias = names.get(("data", id(owner.function.fn), ref.origin), "")
                # a numpy array's axes and kind: the code may rely on them (``kinds.Kinds``)
                kind = labelled(0, ref.root) if data and type(ref.root) is np.ndarray else -3
                bindings.append(Binding(alias, owner.function.fn, ref.origin, ref.root, data, kind))
    for k, v in list(namespace.items()):
        if v is None:
            del namespace[k]
    text = "\n\n".join(
        _printed(tree, entry, spelled)
        for (_, _, tree), entry, spelled in zip(units, entries, spellings, strict=True)
    )
    unique = {(b.alias, id(b.fn), b.origin): b for b in bindings}
    files: dict[str, str] = {}
    # the files of helpers inlined from elsewhere, which comments name by their names
    for owner, _, _ in units:
        # (first: the functions' own entries keep their order, last)
        for stmt in ir.walk(owner.function.body):
            if stmt.line.filename and stmt.line.filename != owner.function.result_line.filename:
                files[f"<file {stmt.line.filename.rsplit('/', 1)[-1]}>"] = stmt.line.filename
    files.update({entry: owner.function.result_line.filename
                  for (owner, _, _), entry in zip(units, entries, strict=True)})
    functions = tuple(dict.fromkeys(owner.function.fn for owner, _, _ in reversed(units)))
    return Emitted(text, entries[-1], namespace, tuple(unique.values()), files, functions)


def _names_in_order(tree: gast.FunctionDef) -> list[gast.Name]:
    """The names of ``tree`` in the order the markers are spelled (so the names chosen never depend
    on the printer): its body's, depth first in field order, each function's, lambda's and
    comprehension's own in breadth-first order after its place; parameters not among them."""
    out: list[gast.Name] = []
    _visit_names(tree.body, out)
    out.extend(_read_names(tree.args))
    return out


def _visit_names(node: Any, out: list[gast.Name]) -> None:
    kind = type(node)
    if kind is list:
        for item in node:
            _visit_names(item, out)
    elif kind is gast.Name:
        out.append(node)
    elif isinstance(node, gast.AST):
        if kind is gast.FunctionDef or isinstance(node, syntax.SCOPES):
            if kind is gast.FunctionDef:
                _visit_names(node.body, out)
            out.extend(_read_names(node.args if kind is gast.FunctionDef else node))
            return
        # (not those that hold no node: a context, an operator)
        for field in syntax.NODE_FIELDS[kind]:
            _visit_names(getattr(node, field, None), out)


def _read_names(node: gast.AST) -> list[gast.Name]:
    """The names under ``node`` other than parameters, breadth first (as ``to_ast`` met them)."""
    return [n for n in ast.walk(node) if isinstance(n, gast.Name) and type(n.ctx) is not gast.Param]


def _printed(tree: gast.FunctionDef, name: str, spelled: dict[str, str]) -> str:
    """The text of ``tree``, named ``name``, its markers spelled: printed directly (``writer``), or
    through Python's ``ast`` by astor or ``ast.unparse`` where ``AST_AD_PRINTER`` asks or the tree
    holds what the writer leaves to them."""
    if printer.chosen() == "own":
        try:
            return writer.source(tree, spelled.__getitem__, name)
        except writer.Unprintable:
            pass
    made = syntax.to_ast(tree)
    for node in ast.walk(made):
        if type(node) is ast.Name and node.id in spelled:
            node.id = spelled[node.id]
    made.name = name
    return _print_ast(made)


def emit_forward(function: ir.Function) -> str:
    """The normalized function as Python: its forward statements and its return."""
    refs = syntax.RefTable()
    body = [syntax.statement(s, refs) for s in function.body] + [
        syntax.ret(syntax.atom(function.result, refs))
    ]
    return emit_tree(syntax.function(function.name, list(function.params), body), refs)[0]


def emit_tree(tree: gast.FunctionDef, refs: syntax.RefTable) -> tuple[str, dict[str, Any]]:
    """Print one function whose outside objects are markers of ``refs``; also the namespace it
    needs.

    Objects are read as they are now: this is for one-off code (the normalized form, ``explain``),
    not for gradients, which re-read changing globals on every call.
    """
    tree = syntax.clone(tree)
    namer = Namer(reserved=local_names([tree]), spelled=True)
    chosen: dict[int, str] = {}
    namespace: dict[str, Any] = {}

    def resolve(marker: str) -> gast.expr:
        ref = refs.entries[int(marker[1:])]
        root, attrs = spelling(ref.obj, ref.hint)
        base = ref.obj if not attrs else _root_module(ref.obj)
        if id(base) not in chosen:
            chosen[id(base)] = namer.fresh(root)
            namespace[chosen[id(base)]] = base
        expr: gast.expr = syntax.name(chosen[id(base)])
        for attr in attrs:
            expr = gast.Attribute(value=expr, attr=attr, ctx=gast.Load())
        return expr

    syntax.replace_markers(tree, resolve)
    return _print(tree), namespace


def local_names(trees: list[gast.FunctionDef]) -> set[str]:
    """The names the functions ``trees`` bind or read, but markers of outside objects: no outside
    object may take one of them."""
    return {name for t in trees for name in syntax.name_ids(t) if not name.startswith(syntax.MARK)}


def _root_module(obj: Any) -> types.ModuleType:
    """The top-level module a spelled-through function is read from (``numpy`` for
    ``np.linalg.inv``)."""
    module = obj.__module__ if obj.__module__ != "_operator" else "operator"
    return sys.modules[module.split(".")[0]]


_COMMENT = re.compile(
    r"^(\s*)(?:'|\"|'''|\"\"\")" + syntax.MARK + r"#(\d+)(?:'|\"|'''|\"\"\")\s*$", re.M
)


def _print(tree: gast.FunctionDef) -> str:
    """The text of the gast ``tree``, comment markers turned into ``#`` comments."""
    return _print_ast(syntax.to_ast(tree))


def _print_ast(tree: ast.FunctionDef) -> str:
    """The text of ``tree``, comment markers turned into ``#`` comments (``tree`` is changed)."""
    texts: list[str] = []
    for node in syntax.statements(tree):
        text = syntax.comment_text(node)
        # printers drop comments: print a numbered marker, then put the text back
        if text is not None:
            texts.append(text)
            node.value.value = f"{syntax.MARK}#{len(texts) - 1}"
    text = printer.to_source(tree)
    return _COMMENT.sub(lambda m: f"{m.group(1)}# {texts[int(m.group(2))]}", text)
