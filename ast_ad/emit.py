"""Stage 5, emit: name every outside object, then print the functions as Python (``writer``; astor, see
``printer``, for a tree the writer leaves to it).

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
from collections import Counter
from collections.abc import Callable
from typing import Any

import gast
import numpy as np

from ast_ad import ir, printer, registry, syntax, writer
from ast_ad.calls import CalleeRef
from ast_ad.fold import Inliner, filled, folded, folded_scanned, shared_factor
from ast_ad.forward import Tangent
from ast_ad.kinds import labelled
from ast_ad.naming import Namer, identifier
from ast_ad.records import record
from ast_ad.release import released
from ast_ad.reverse import Adjoint

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
    kind: int = -3  # data that is a numpy array of numbers: its ``kinds.labelled`` label, which must not change


@record
class Emitted:
    text: str
    entry: str
    namespace: dict[str, Any]
    bindings: tuple[Binding, ...]
    files: dict[str, str]  # each generated function's name -> the file of the user's function it derives from
    functions: tuple[Any, ...] = ()  # the user's functions it derives from, the entry's first (the cache keys on them)


def spelling(obj: Any, hint: str) -> tuple[str, tuple[str, ...]]:
    """The preferred global name for ``obj`` and the attributes to read from it."""
    if isinstance(obj, types.ModuleType):
        return MODULE_NAMES.get(obj.__name__, obj.__name__.rsplit(".", 1)[-1]), ()
    module, name = getattr(obj, "__module__", None), getattr(obj, "__name__", None)
    if module == "_operator":
        module = "operator"
    if module in SPELLED_THROUGH and isinstance(name, str) and getattr(sys.modules[module], name, None) is obj:
        root, *rest = module.split(".")
        return MODULE_NAMES[root], (*rest, name)
    if module == "builtins" and isinstance(name, str) and getattr(builtins, name, None) is obj:
        return name, ()
    if isinstance(obj, CalleeRef):
        return f"{obj.adjoint.function.name}_{obj.part}", ()
    return identifier(hint.rsplit(".", 1)[-1]), ()


def emit(top: Adjoint, single: bool) -> Emitted:
    """The module text: every callee's ``_fwd``/``_bwd`` pair, then the gradient function."""
    units = [(a, part, tree) for a in _callees(top) for part, tree in zip(("fwd", "bwd"), _pair(a), strict=True)]
    return _module(units + [(top, "vjp", _combined(top, single))])


def emit_pair(top: Adjoint) -> Emitted:
    """The module of a ``_fwd``/``_bwd`` pair for ``top`` (after its callees'): for ``vjp``, whose backward
    pass may run many times after one forward pass. The entry is ``top``'s ``_bwd``; its ``_fwd`` precedes it."""
    adjoints = [a for a in _callees(top) if a is not top] + [top]
    return _module([(a, part, tree) for a in adjoints for part, tree in zip(("fwd", "bwd"), _pair(a), strict=True)])


def emit_jvp(top: Tangent) -> Emitted:
    """The module text of forward mode: every callee's ``_jvp``, then the function's own."""
    units = [(t, "jvp", _jvp_tree(t)) for t in _callees(top) if t is not top]
    return _module(units + [(top, "jvp", _jvp_tree(top))])


def _jvp_tree(t: Tangent) -> gast.FunctionDef:
    """The forward-mode function of ``t``, each temporary that one later statement reads written into it
    (``fold.Inliner``), and each tangent's shared factor taken out of its sums (``fold.shared_factor``): the
    tangents of the user's own variables keep their names, as the variables do."""
    users = t.function.users
    keep = users | {t.dots[name] for name in users if name in t.dots}
    inliner = Inliner(_inliner(t).pure, keep, t.numbers)
    tree = t.tree("jvp")
    inliner.count(tree.body)
    *body, returned = shared_factor(inliner.block(tree.body), frozenset(t.dots.values()), _number_call(t))
    kept = syntax.name_ids(returned, loads=True) | set(t.params)
    tree.body = released(body, frozenset(), t.arrays - inliner.folded, kept, t.refs) + [returned]
    return tree


def _module(units: list[tuple[Any, str, gast.FunctionDef]]) -> Emitted:
    """Name every function and outside object of these (owner, part, tree) units, and print them.

    An owner (an ``Adjoint`` or a ``Tangent``) has the ``function`` it derives from and the ``refs``
    its trees' markers index; the last unit is the entry point.
    """
    found = [_names_in_order(tree) for _, _, tree in units]
    namer = Namer(reserved={n.id for names in found for n in names if not n.id.startswith(syntax.MARK)})
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
        """How the code spells the object behind ``marker``: a global name, then the attributes read from it."""
        ref = owner.refs.entries[int(marker[1:])]
        obj = ref.obj
        if isinstance(obj, CalleeRef):
            return names[(id(obj.adjoint), obj.part)]
        data = ref.origin is not None and not callable(obj) and not isinstance(obj, types.ModuleType)
        if data:
            return global_name(("data", id(owner.function.fn), ref.origin), identifier(ref.hint), obj)
        root, attrs = spelling(obj, ref.hint)
        base = obj if not attrs else _root_module(obj)
        return ".".join([global_name(id(base), root, base), *attrs])

    spellings: list[dict[str, str]] = []
    for (owner, _, _), found_names in zip(units, found, strict=True):
        spelled: dict[str, str] = {}  # a dotted name prints as the attribute reads it stands for: ``np.sin``
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
    text = "\n\n".join(_printed(tree, entry, spelled)
                         for (_, _, tree), entry, spelled in zip(units, entries, spellings, strict=True))
    unique = {(b.alias, id(b.fn), b.origin): b for b in bindings}
    files = {entry: owner.function.result_line.filename for (owner, _, _), entry in zip(units, entries, strict=True)}
    functions = tuple(dict.fromkeys(owner.function.fn for owner, _, _ in reversed(units)))
    return Emitted(text, entries[-1], namespace, tuple(unique.values()), files, functions)


def _names_in_order(tree: gast.FunctionDef) -> list[gast.Name]:
    """The names of ``tree`` in the order the markers are spelled (so the names chosen never depend on the
    printer): its body's, depth first in field order, each function's, lambda's and comprehension's own in
    breadth-first order after its place; parameters not among them."""
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
        for field in syntax.NODE_FIELDS[kind]:  # (not those that hold no node: a context, an operator)
            _visit_names(getattr(node, field, None), out)


def _read_names(node: gast.AST) -> list[gast.Name]:
    """The names under ``node`` other than parameters, breadth first (as ``to_ast`` met them)."""
    return [n for n in ast.walk(node) if isinstance(n, gast.Name) and type(n.ctx) is not gast.Param]


def _printed(tree: gast.FunctionDef, name: str, spelled: dict[str, str]) -> str:
    """The text of ``tree``, named ``name``, its markers spelled: printed directly (``writer``), or through
    Python's ``ast`` by astor or ``ast.unparse`` where ``AST_AD_PRINTER`` asks or the tree holds what the
    writer leaves to them."""
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
    body = [syntax.statement(s, refs) for s in function.body] + [syntax.ret(syntax.atom(function.result, refs))]
    return emit_tree(syntax.function(function.name, list(function.params), body), refs)[0]


def emit_tree(tree: gast.FunctionDef, refs: syntax.RefTable) -> tuple[str, dict[str, Any]]:
    """Print one function whose outside objects are markers of ``refs``; also the namespace it needs.

    Objects are read as they are now: this is for one-off code (the normalized form, ``explain``),
    not for gradients, which re-read changing globals on every call.
    """
    tree = syntax.clone(tree)
    namer = Namer(reserved=_locals([tree]))
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


def _root_module(obj: Any) -> types.ModuleType:
    """The top-level module a spelled-through function is read from (``numpy`` for ``np.linalg.inv``)."""
    module = obj.__module__ if obj.__module__ != "_operator" else "operator"
    return sys.modules[module.split(".")[0]]


def _callees(top: Any) -> list[Any]:
    """Every adjoint ``top`` calls, callees before callers, each once."""
    order: dict[int, Any] = {}
    _visit_callees(top, order, {id(top)})
    if any(c is top for a in [top, *order.values()] for c in a.callees):
        order[id(top)] = top  # top calls itself: it needs its own pair too
    return list(order.values())


def _visit_callees(a: Any, order: dict[int, Any], seen: set[int]) -> None:
    for callee in a.callees:
        if id(callee) not in seen:
            seen.add(id(callee))
            _visit_callees(callee, order, seen)
            order[id(callee)] = callee


def _combined(a: Adjoint, single: bool) -> gast.FunctionDef:
    grads = [syntax.name(g) for g in a.grads]
    result = syntax.tuple_([a.result, grads[0] if single else syntax.tuple_(grads)])
    keep = {n.id for n in syntax.walk(result) if isinstance(n, gast.Name)}
    keep |= {a.seed, *a.params}
    ret = syntax.ret(result)
    inliner = _inliner(a)
    if inliner.listless(a.forward, a.backward):  # each statement scanned once, for both folds and the count
        backward, scanned = folded_scanned(a.backward, keep, [inliner.scan(stmt) for stmt in a.backward])
        scans: list[Any] = inliner.counted([a.forward, backward, [ret]], [None, scanned, None])
    else:
        backward, scans = folded(a.backward, keep), [None, None]
        inliner.count([*a.forward, *backward, ret])
    forward, backward = inliner.block(a.forward, scans[0]), inliner.block(backward, scans[1])
    backward = shared_factor(backward, a.adjoints, _number_call(a))
    # an array bound once, and that assignment written into its reader, is no name to release
    releasable = a.releasable - inliner.folded
    body = _iterated(forward + released(backward, releasable, a.array_adjoints, keep, a.refs) + [ret], a.refs)
    return syntax.function(f"{a.function.name}_vjp", [*a.params, a.seed], body, [syntax.const(1.0)])


def _iterated(body: list[gast.stmt], refs: syntax.RefTable) -> list[gast.stmt]:
    """``body`` with each backward loop that starts its step by popping a tape, and reads no index, written
    as a loop over the tape: ``for x in reversed(x_tape):`` in place of ``for t in reversed(r):`` and
    ``x = x_tape.pop()``, as a person writes it (a step costs no call).

    It applies where the tape is a list made empty once, at the top, and used for nothing but one push, at
    the top of a loop ``for t in r:`` with no ``break`` or ``continue`` (one push a step), and this one pop;
    where ``r`` is bound once; and where nothing reads the backward loop's variable, in it or after it. The
    tape then holds one value a step, and the loop visits them last to first, as the pops did, leaving the
    name bound to the first, as the last pop did.
    """
    if not any(type(stmt) is gast.For and type(stmt.iter) is gast.Call for stmt in body):
        return body  # no loop over ``reversed(...)`` to look at: nothing to walk
    made: dict[str, int] = {}
    pushes: dict[str, list[int]] = {}  # tape -> the top-level loops that push to it
    uses: Counter[str] = Counter()  # every read of a name, and how many of them are a push or a pop
    tape_uses: Counter[str] = Counter()
    bound: Counter[str] = Counter()
    for k, stmt in enumerate(body):
        if type(stmt) is gast.Assign and len(stmt.targets) == 1 and type(stmt.targets[0]) is gast.Name \
                and type(stmt.value) is gast.List and not stmt.value.elts:
            made[stmt.targets[0].id] = made.get(stmt.targets[0].id, 0) + 1
        if type(stmt) is gast.For and type(stmt.iter) is gast.Name and not any(
                type(n) in (gast.Break, gast.Continue) for n in syntax.walk(stmt)):
            for inner in stmt.body:
                call: Any = inner.value if type(inner) is gast.Expr else None
                if type(call) is gast.Call and type(call.func) is gast.Attribute and call.func.attr == "append" \
                        and type(call.func.value) is gast.Name:
                    pushes.setdefault(call.func.value.id, []).append(k)
        for node in syntax.walk(stmt):
            if type(node) is gast.Name:
                (uses if type(node.ctx) is gast.Load else bound)[node.id] += 1
            elif type(node) is gast.Attribute and node.attr in ("append", "pop") and type(node.value) is gast.Name:
                tape_uses[node.value.id] += 1
    out = list(body)
    for k, loop in enumerate(body):
        if not (type(loop) is gast.For and type(loop.target) is gast.Name and type(loop.iter) is gast.Call
                and refs.lookup(getattr(loop.iter.func, "id", "")) is reversed and len(loop.iter.args) == 1
                and type(loop.iter.args[0]) is gast.Name and not loop.orelse):
            continue
        steps = loop.iter.args[0].id
        first = next((j for j, stmt in enumerate(loop.body) if syntax.comment_text(stmt) is None), None)
        pop: Any = loop.body[first] if first is not None else None
        if not (type(pop) is gast.Assign and len(pop.targets) == 1 and type(pop.targets[0]) is gast.Name
                and type(pop.value) is gast.Call and not pop.value.args and type(pop.value.func) is gast.Attribute
                and pop.value.func.attr == "pop" and type(pop.value.func.value) is gast.Name):
            continue
        tape = pop.value.func.value.id
        forward = pushes.get(tape, [])
        index = loop.target.id
        if made.get(tape) != 1 or bound[tape] != 1 or not uses[tape] == tape_uses[tape] == 2 or len(forward) != 1 \
                or forward[0] > k or getattr(body[forward[0]].iter, "id", None) != steps or bound[steps] != 1 \
                or any(type(n) is gast.Name and n.id == index and type(n.ctx) is gast.Load
                       for stmt in body[k:] for n in syntax.walk(stmt)):
            continue
        out[k] = syntax.new(gast.For, {**loop.__dict__, "target": pop.targets[0],
                                       "iter": syntax.new(gast.Call, {**loop.iter.__dict__,
                                                                       "args": [syntax.name(tape)]}),
                                       "body": filled([stmt for stmt in loop.body if stmt is not pop])})
    return out


def _inlined(owner: Any, blocks: list[list[gast.stmt]], also_read: list[gast.stmt]) -> list[list[gast.stmt]]:
    """Each block of one function with the temporaries one later statement reads written into it (``fold.Inliner``)."""
    inliner = _inliner(owner)
    inliner.count([stmt for block in blocks for stmt in block] + also_read)
    return [inliner.block(block) for block in blocks]


def _inliner(owner: Any) -> Inliner:
    """The ``fold.Inliner`` of ``owner``'s code: its calls of registered functions with no effect move."""
    refs = owner.refs

    def pure(call: gast.Call) -> bool:
        obj = _called(call, refs)
        return obj is not None and registry.is_pure(obj)
    return Inliner(pure, owner.function.users, getattr(owner, "numbers", frozenset()))


def _number_call(owner: Any) -> Callable[[gast.Call], bool]:
    """Whether a call of ``owner``'s code is of a registered function with no effect that gives a Python number."""
    refs = owner.refs

    def number_call(call: gast.Call) -> bool:
        obj = _called(call, refs)
        return obj is not None and registry.is_pure(obj) and registry.gives_number(obj)
    return number_call


def _called(call: gast.Call, refs: syntax.RefTable) -> Any:
    """The function ``call`` calls, found through ``refs`` (``math.cos``: the module's attribute), or ``None``
    where it is not one of those objects, or is a user's function's generated pair."""
    func, attrs = call.func, []
    while type(func) is gast.Attribute:  # a function of a module: ``math.cos``
        attrs.append(func.attr)
        func = func.value
    obj = refs.lookup(func.id) if type(func) is gast.Name else None
    if attrs:
        if not isinstance(obj, types.ModuleType):
            return None
        for attr in reversed(attrs):
            obj = getattr(obj, attr, None)
    return None if isinstance(obj, CalleeRef) else obj


def _pair(a: Adjoint) -> list[gast.FunctionDef]:
    saved = a.saved()
    local = Namer(used=_locals([syntax.function("f", list(a.params), a.forward + a.backward)]) | {a.seed})
    pack = local.fresh("saved")
    top = {n.id for s in a.forward if isinstance(s, gast.Assign) for n in gast.walk(s.targets[0])
           if isinstance(n, gast.Name)}
    unbound = [syntax.assign(s, syntax.const(None)) for s in saved if s not in top and s not in a.params]
    ret = syntax.ret(syntax.tuple_([a.result, syntax.tuple_([syntax.name(s) for s in saved])]))
    (forward,) = _inlined(a, [unbound + a.forward], [ret])
    fwd = syntax.function(f"{a.function.name}_fwd", list(a.params), forward + [ret])
    unpack = [syntax.assign(saved, syntax.name(pack))] if saved else []
    ret = syntax.ret(syntax.tuple_([syntax.name(g) for g in a.grads]))
    (backward,) = _inlined(a, [folded(a.backward, {*a.grads, a.seed})], [*unpack, ret])
    backward = shared_factor(backward, a.adjoints, _number_call(a))
    bwd = syntax.function(f"{a.function.name}_bwd", [pack, a.seed], unpack + backward + [ret])
    return [fwd, bwd]


def _locals(trees: list[gast.FunctionDef]) -> set[str]:
    return {name for t in trees for name in syntax.name_ids(t) if not name.startswith(syntax.MARK)}


_COMMENT = re.compile(r"^(\s*)(?:'|\"|'''|\"\"\")" + syntax.MARK + r"#(\d+)(?:'|\"|'''|\"\"\")\s*$", re.M)


def _print(tree: gast.FunctionDef) -> str:
    """The text of the gast ``tree``, comment markers turned into ``#`` comments."""
    return _print_ast(syntax.to_ast(tree))


def _print_ast(tree: ast.FunctionDef) -> str:
    """The text of ``tree``, comment markers turned into ``#`` comments (``tree`` is changed)."""
    texts: list[str] = []
    for node in syntax.statements(tree):
        text = syntax.comment_text(node)
        if text is not None:  # printers drop comments: print a numbered marker, then put the text back
            texts.append(text)
            node.value.value = f"{syntax.MARK}#{len(texts) - 1}"
    text = printer.to_source(tree)
    return _COMMENT.sub(lambda m: f"{m.group(1)}# {texts[int(m.group(2))]}", text)
