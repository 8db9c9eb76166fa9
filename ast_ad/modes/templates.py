"""A rule's body as IR: lowered once from its source (``normalize``, as the user's code is), then
put where a statement needs it, the statement's atoms in place of the rule's parameters.

>>> import math
>>> from ast_ad import rules
>>> from ast_ad.core import registry
>>> from ast_ad.ir.naming import Namer
>>> line = ir.Line("f.py", 3, "y = math.fabs(x)")
>>> rule = registry.lookup(math.fabs).vjps[0]  # lambda g, ans, x: g * np.sign(x)
>>> body, out = applied(rule, [ir.Var("y_bar"), ir.Var("y"), ir.Var("x")], {}, Namer(), line)
>>> [(s.target, s.value.fn.hint, s.value.args) for s in body]  # doctest: +NORMALIZE_WHITESPACE
[('sign_x', 'np.sign', (Var(name='x'),)), ('out', 'operator.mul', (Var(name='y_bar'),
 Var(name='sign_x')))]

What substitution makes constant is folded as it is put in (``axis is None`` with ``axis`` given as
``None``, the branch it decides, ``x ** 1``), so a rule's defaults leave no dead branches behind;
constants the rule writes itself (``2.0 * np.pi``) stay as written. A rule that does not lower (its
body is not one expression, or not in ast_ad's language) gives ``None``: the caller calls it
instead.

Both modes put rules in this way, so every rule body has one lowering: forward mode keeps the
statements (its code is IR), reverse mode writes them as the one expression they compute
(``syntax.pieces``). A rule applied often gets a maker, Python written for its template that makes
the same statements directly (``_maker``).
"""

from __future__ import annotations

import functools
import inspect
import operator
from collections.abc import Callable
from typing import Any

import gast

from ast_ad import runtime
from ast_ad.core import registry
from ast_ad.errors import ASTADError
from ast_ad.frontend import parse
from ast_ad.ir import nodes as ir
from ast_ad.ir import syntax
from ast_ad.ir.naming import Namer

_FOLDABLE = {
    operator.add,
    operator.sub,
    operator.mul,
    operator.is_,
    operator.is_not,
    operator.eq,
    operator.ne,
    operator.not_,
    bool,
}


LITERALS = (type(None), bool, int, float, complex, str)


@functools.cache
def signature_of(rule: Any) -> inspect.Signature:
    return inspect.signature(rule)


def bindable(rule: Any, nargs: int, kwargs: list[str]) -> bool:
    """Whether a call with ``nargs`` positional arguments and these keywords fits the rule (after
    the adjoint or tangent and the result)."""
    return _bindable(rule, nargs, tuple(kwargs))


@functools.cache
def _bindable(rule: Any, nargs: int, kwargs: tuple[str, ...]) -> bool:
    try:
        signature_of(rule).bind(*([None] * (nargs + 2)), **dict.fromkeys(kwargs))
    except TypeError:
        return False
    except ValueError:
        return True
    return True


@functools.cache
def template_of(rule: Any) -> tuple[inspect.Signature, gast.expr] | None:
    """The rule's signature and the one expression its body is (a lambda's, or a def's one
    ``return``), or ``None`` where it is no such expression, or one that defines names of its own (a
    comprehension, a lambda)."""
    try:
        tree = parse.parse(rule).tree
        signature = signature_of(rule)
    except (ASTADError, TypeError, ValueError):
        return None
    body = [
        s
        for s in tree.body
        if not (isinstance(s, gast.Expr) and isinstance(s.value, gast.Constant))
    ]
    if len(body) != 1 or not isinstance(body[0], gast.Return) or body[0].value is None:
        return None
    scoped = (
        gast.Lambda,
        gast.ListComp,
        gast.SetComp,
        gast.DictComp,
        gast.GeneratorExp,
        gast.NamedExpr,
    )
    if any(isinstance(node, scoped) for node in gast.walk(body[0].value)):
        return None
    return signature, body[0].value


def is_literal(value: Any) -> bool:
    if isinstance(value, tuple):
        return all(is_literal(v) for v in value)
    return isinstance(value, LITERALS)


@functools.cache
def template(rule: Any) -> ir.Function | None:
    """The rule lowered to IR (its parameters the function's), or ``None`` where it is not one
    expression of ast_ad's language."""
    # (the lowering reads the registry, which the rules fill)
    from ast_ad.frontend.normalize import normalize
    if template_of(rule) is None:
        return None
    try:
        source = parse.parse(rule)
        arguments = source.tree.args
        # ``*xs``: lowered as a parameter that holds the tuple (``applied``)
        if arguments.vararg is not None:
            tree = syntax.clone(source.tree)
            tree.args.args = [*tree.args.args, tree.args.vararg]
            tree.args.vararg = None
            source = parse.Source(source.fn, tree, source.filename, source.line_offset)
        return normalize(source)
    except ASTADError:
        return None


def applied(rule: Any, args: list[ir.Atom], kwargs: dict[str, ir.Atom], namer: Namer, line: ir.Line,
            hint: str | None = None) -> tuple[list[ir.Stmt], ir.Atom] | None:
    """The statements of ``rule``'s body with ``args`` and ``kwargs`` for its parameters (the first
    two the adjoint or tangent and the result), each temporary named afresh by ``namer`` (the value
    ``hint``, if given), and the atom of its value; ``None`` where the rule does not lower, or a
    parameter its body reads has no atom (``*args``)."""
    function = template(rule)
    if function is None:
        return None
    plain = None if kwargs else _plain_defaults(rule, len(args))
    # positional atoms for plain parameters, literal defaults for the rest: no binding
    if plain is not None:
        maker = _maker(rule, len(args)) if _USES.setdefault(rule, 0) >= MADE_AFTER else None
        _USES[rule] += 1
        if maker is not None:
            return maker(args, namer, line, hint)
        put = _Put(dict(zip(function.params, args, strict=False)), function, namer, line, hint)
        put.values.update(plain)
        return put.run()
    try:
        bound = signature_of(rule).bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    values: dict[str, ir.Atom | None] = {}
    # (in the lowering's order: ``*xs`` after the positional parameters, before the keyword-only
    # ones)
    named = [p for p in signature_of(rule).parameters.values() if p.kind is not p.VAR_KEYWORD]
    put = _Put(values, function, namer, line, hint)
    for param, name in zip(named, function.params, strict=True):
        value = bound.arguments.get(param.name)
        if param.kind is param.VAR_POSITIONAL and (not value or name not in _read(rule)):
            values[name] = ir.Const(())  # (read nowhere: nothing to make)
        elif param.kind is param.VAR_POSITIONAL:  # the tuple of what it took, made first
            made = ir.Var(put.namer.fresh(name))
            values[name] = made
            put.out.append(ir.Assign(made.name, ir.Pack(tuple(value or ())), line))
        else:
            values[name] = value if isinstance(value, (ir.Var, ir.Const, ir.Ref)) else \
                ir.Const(value) if is_literal(value) else None
    return put.run()


@functools.cache
def _read(rule: Any) -> frozenset[str]:
    """The names the rule's template reads."""
    function = template(rule)
    assert function is not None
    return frozenset(name for stmt in ir.walk(function.body) for name in ir.reads_of(stmt)) | (
        {function.result.name} if isinstance(function.result, ir.Var) else set())


@functools.cache
def _plain_defaults(rule: Any, nargs: int) -> dict[str, ir.Atom] | None:
    """For ``nargs`` positional atoms to the rule's plain parameters, the constants of the defaults
    of the rest (by the lowered template's names), or ``None`` where that does not fit (``*xs``, a
    default that is no literal)."""
    function = template(rule)
    params = list(signature_of(rule).parameters.values())
    if (
        function is None
        or nargs > len(params)
        or any(p.kind is not p.POSITIONAL_OR_KEYWORD for p in params)
        or any(p.default is p.empty or not is_literal(p.default) for p in params[nargs:])
    ):
        return None
    return {
        name: ir.Const(p.default)
        for name, p in zip(function.params[nargs:], params[nargs:], strict=True)
    }


class Scratch(Namer):
    """Names for statements that are written as one expression (``syntax.pieces``), never as
    statements: each new, and none a name of the program's (``%`` is in no identifier)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def fresh(self, base: str, user: bool = False) -> str:
        self.count += 1
        return f"{syntax.SCRATCH}{self.count}"


class _Unbound(Exception):
    pass


MADE_AFTER = 8  # applications of a rule before it gets a maker of its own (``_maker``)
_USES: dict[Any, int] = {}


Maker = Callable[[list[ir.Atom], Namer, ir.Line, "str | None"], tuple[list[ir.Stmt], ir.Atom]]


@functools.cache
def _maker(rule: Any, nargs: int) -> Maker | None:
    """A function that makes what ``_Put`` makes from ``nargs`` positional atoms (the rest of the
    parameters at their literal defaults), from Python written for this template: the statements
    made directly, each name and fold decided once here (a long function applies each of its rules
    hundreds of times). ``None`` where the template decides something (a conditional expression) or
    unpacks: ``_Put`` applies those."""
    function = template(rule)
    defaults = _plain_defaults(rule, nargs)
    if (
        function is None
        or defaults is None
        or function.mutable
        or not all(
            type(stmt) is ir.Assign and type(stmt.value) is not ir.Raw for stmt in function.body
        )
    ):
        return None
    return _MakerSource(function, nargs, defaults).compiled()


class _MakerSource:
    """The Python of a template's maker (``_maker``): its lines, and the objects it reads."""

    def __init__(self, function: ir.Function, nargs: int, defaults: dict[str, ir.Atom]):
        self.function = function
        self.objects: list[Any] = []
        self.lines = ["def make(args, namer, line, hint):", "    out = []"]
        self.put: dict[str, str] = {}  # the parameters given atoms -> the locals that hold them
        self.env: dict[str, str] = {}  # the template's names -> Python that gives their atoms
        for k, param in enumerate(function.params):
            if k < nargs:
                self.lines.append(f"    p{k} = args[{k}]")
                self.put[param] = self.env[param] = f"p{k}"
            else:
                # (a constant: no name of its own to lend)
                self.env[param] = self.object(defaults[param])

    def object(self, value: Any) -> str:
        self.objects.append(value)
        return f"K[{len(self.objects) - 1}]"

    def atom(self, atom: ir.Atom) -> str:
        if isinstance(atom, ir.Var):
            return self.env[atom.name]
        return self.object(_plain(atom) if isinstance(atom, ir.Ref) else atom)

    def name(self, name: str) -> str:
        """Python that gives the fresh name ``_Put.name`` gives ``name``."""
        words = []
        for word in name.split("_"):
            local = self.put.get(word)
            words.append(
                f"({local}.name if type({local}) is Var else {word!r})" if local else repr(word)
            )
        joined = " + '_' + ".join(words)
        fresh = f"namer.fresh({joined})"
        result = self.function.result
        if isinstance(result, ir.Var) and result.name == name:
            return f"(namer.fresh(hint) if hint is not None else {fresh})"
        return fresh

    def compiled(self) -> Maker | None:
        for k, stmt in enumerate(self.function.body):
            assert isinstance(stmt, ir.Assign)
            value, local = stmt.value, f"v{k}"
            if isinstance(value, (ir.Var, ir.Const, ir.Ref)):
                # a copy: its readers read the value itself
                self.env[stmt.target] = self.atom(value)
                continue
            if isinstance(value, ir.Call):
                args = "".join(f"{self.atom(a)}, " for a in value.args)
                kwargs = "".join(f"({k!r}, {self.atom(a)}), " for k, a in value.kwargs)
                made = (
                    f"Call({self.object(_plain(value.fn))}, ({args}), ({kwargs}), "
                    f"{self.object(value.moved)}, {value.attribute!r})"
                )
                foldable = value.fn.obj in _FOLDABLE or value.fn.obj in (
                    operator.pow,
                    runtime.pow_minus_one,
                )
                if foldable and any(isinstance(a, ir.Var) for a in value.args):
                    # (constants the rule itself writes stay as written, as ``_Put`` keeps them)
                    self.lines += [f"    c = {made}", "    folded = fold(c)",
                                   f"    if folded is not None:\n        {local} = folded",
                                   f"    else:\n        {local} = Var({self.name(stmt.target)})",
                                   f"        out.append(Assign({local}.name, power(c), line))"]
                    self.env[stmt.target] = local
                    continue
            elif isinstance(value, ir.Pack):
                elts = "".join(f"{self.atom(a)}, " for a in value.elts)
                made = f"Pack(({elts}), {value.kind!r}, {self.object(value.keys)})"
            elif isinstance(value, ir.Attr):
                made = f"Attr({self.atom(value.value)}, {value.attr!r})"
            else:
                return None
            self.lines += [f"    {local} = Var({self.name(stmt.target)})",
                           f"    out.append(Assign({local}.name, {made}, line))"]
            self.env[stmt.target] = local
        self.lines.append(f"    return out, {self.atom(self.function.result)}")
        scope: dict[str, Any] = {
            "K": self.objects,
            "Var": ir.Var,
            "Call": ir.Call,
            "Pack": ir.Pack,
            "Attr": ir.Attr,
            "Assign": ir.Assign,
            "fold": _fold,
            "power": _power,
        }
        # (code written here from the rule's own template)
        exec("\n".join(self.lines), scope)  # noqa: S102
        make: Maker = scope["make"]
        return make


def _fold(call: ir.Call) -> ir.Atom | None:
    return _folded(call) or _folded(_power(call))


class _Put:
    """One application of a template: its statements in order, folded as they are put in."""

    def __init__(
        self,
        values: dict[str, ir.Atom | None],
        function: ir.Function,
        namer: Namer,
        line: ir.Line,
        hint: str | None,
    ):
        self.values, self.function, self.namer, self.line = values, function, namer, line
        result = function.result
        self.hint = (
            hint if isinstance(result, ir.Var) and result.name not in function.mutable else None
        )
        self.env: dict[str, ir.Atom] = {}
        self.out: list[ir.Stmt] = []
        # the template's names bound on each path of a decision, and theirs
        self.merged: dict[str, str] = {}
        # whether the template decides anything (a conditional expression)
        self.decides = bool(function.mutable)

    def run(self) -> tuple[list[ir.Stmt], ir.Atom] | None:
        try:
            self.block(self.function.body)
            result = self.atom(self.function.result)
        except _Unbound:
            return None
        if not self.decides:
            # (dead stores come only from decisions: ``choice = None`` before one)
            return self.out, result
        return _dead_stores_dropped(self.out, result), result

    def atom(self, atom: ir.Atom) -> ir.Atom:
        if isinstance(atom, ir.Var):
            if atom.name in self.env:
                return self.env[atom.name]
            if atom.name in self.values:
                value = self.values[atom.name]
                if value is None:
                    raise _Unbound
                return value
            raise _Unbound  # (a name the template binds only on a path not taken)
        if isinstance(atom, ir.Ref):
            return _plain(atom)
        return atom

    def name(self, name: str) -> str:
        """A fresh name for the template's ``name``: the ``hint`` for its value, else its own, its
        parameters' names in it replaced by theirs (``cos_x`` for ``math.cos(x)`` is ``cos_x1``
        where ``x`` is ``x1``)."""
        if self.hint is not None and name == self.function.result.name:  # type: ignore[union-attr]
            return self.namer.fresh(self.hint)
        words = [
            self.values[w].name  # type: ignore[union-attr]
            if isinstance(self.values.get(w), ir.Var)
            else w
            for w in name.split("_")
        ]
        return self.namer.fresh("_".join(words))

    def block(self, body: tuple[ir.Stmt, ...]) -> None:
        for stmt in body:
            if isinstance(stmt, ir.Assign):
                self.assign(stmt)
            elif isinstance(stmt, ir.If):
                test = self.atom(stmt.test)
                # decided by what was put in: the other branch is left out
                if isinstance(test, ir.Const):
                    self.block(stmt.body if test.value else stmt.orelse)
                    continue
                branches = []
                for branch in (stmt.body, stmt.orelse):
                    outer, self.out = self.out, []
                    self.block(branch)
                    branches.append(tuple(self.out))
                    self.out = outer
                self.out.append(ir.If(test, branches[0], branches[1], self.line))
            elif isinstance(stmt, ir.Unpack):
                value = self.atom(stmt.value)
                targets = tuple(self.bind(t) for t in stmt.targets)
                self.out.append(ir.Unpack(targets, value, self.line))
            else:
                raise _Unbound  # loops, appends, effects: not in a one-expression rule

    def raw(self, raw: ir.Raw) -> ir.Raw:
        """A test decided at run time (``bool(np.ndim(x) > 1)``), the put-in atoms' names in it."""
        refs = [_plain(ref) for ref in raw.refs]

        def put(name: gast.Name) -> gast.Name | None:
            if name.id.startswith("§") or type(name.ctx) is not gast.Load:
                return None
            value = self.atom(ir.Var(name.id))
            if isinstance(value, ir.Var):
                return syntax.name(value.name)
            if isinstance(value, ir.Const):
                return syntax.const(value.value)
            refs.append(value)
            return syntax.name(f"§{len(refs) - 1}")
        return ir.Raw(syntax.substituted(raw.node, put), tuple(refs))

    def bind(self, name: str) -> str:
        """The name the application binds for the template's ``name``: one for a name the template
        binds on each path of a decision (``choice``), a fresh one for each binding of any other."""
        if name in self.function.mutable:
            if name not in self.merged:
                self.merged[name] = self.name(name)
            self.env[name] = ir.Var(self.merged[name])
            return self.merged[name]
        new = self.name(name)
        self.env[name] = ir.Var(new)
        return new

    def assign(self, stmt: ir.Assign) -> None:
        value = stmt.value
        if (
            isinstance(value, (ir.Var, ir.Const, ir.Ref))
            and stmt.target not in self.function.mutable
        ):
            self.env[stmt.target] = self.atom(value)  # a copy: its readers read the value itself
            return
        if isinstance(value, (ir.Var, ir.Const, ir.Ref)):
            value = self.atom(value)
        if isinstance(value, ir.Raw):
            value = ir.Raw(_decided_in(value.node, value.refs, self.atom), value.refs)
            decided = _evaluated(value.node, value.refs, self.atom)
            if decided is not None:
                self.env[stmt.target] = decided
                return
            value = self.raw(value)
        if isinstance(value, ir.Call):
            call = ir.Call(
                _plain(value.fn),
                tuple(self.atom(a) for a in value.args),
                tuple((k, self.atom(a)) for k, a in value.kwargs),
                value.moved,
                value.attribute,
            )
            # (constants the rule itself writes, ``2.0 * np.pi``, stay as written)
            written = not any(type(a) is ir.Var for a in value.args)
            folded: ir.Atom | None = None if written else _fold(call)
            if folded is not None:
                self.env[stmt.target] = folded
                return
            value = _power(call)
        elif isinstance(value, ir.Pack):
            value = ir.Pack(tuple(self.atom(a) for a in value.elts), value.kind, value.keys)
        elif isinstance(value, ir.Attr):
            value = ir.Attr(self.atom(value.value), value.attr)
        self.out.append(ir.Assign(self.bind(stmt.target), value, self.line))


def _plain(ref: ir.Ref) -> ir.Ref:
    """The object a rule reads, as generated code reads it: not as a global of the rule's module
    (which generated code does not watch), and one of ast_ad's helpers by its own name (``fit``, not
    ``rt.fit``)."""
    obj = ref.obj
    if inspect.isfunction(obj) and registry.is_helper(obj):
        return ir.Ref(obj, obj.__name__)
    return ir.Ref(obj, ref.hint) if ref.origin is not None else ref


def _folded(call: ir.Call) -> ir.Atom | None:
    """The constant a call of constants gives (``None is None``, ``2 - 1``), or the operand of ``x
    ** 1``."""
    fn = call.fn.obj
    if (
        fn is operator.pow
        and len(call.args) == 2
        and _number(call.args[1])
        and call.args[1].value == 1  # type: ignore[union-attr]
    ):
        return call.args[0]
    if fn in _FOLDABLE and not call.kwargs and all(isinstance(a, ir.Const) for a in call.args):
        return ir.Const(fn(*(a.value for a in call.args)))  # type: ignore[union-attr]
    return None


def _power(call: ir.Call) -> ir.Call:
    """``pow_minus_one(x, 3)`` as ``x ** 2``: a literal exponent needs no helper."""
    if call.fn.obj is runtime.pow_minus_one and len(call.args) == 2 and _number(call.args[1]) \
            and call.args[1].value >= 1:  # type: ignore[union-attr]
        power = ir.Const(call.args[1].value - 1)  # type: ignore[union-attr]
        return ir.Call(ir.Ref(operator.pow, "operator.pow"), (call.args[0], power))
    return call


def _number(atom: ir.Atom) -> bool:
    return isinstance(atom, ir.Const) and type(atom.value) in (int, float)


_COMPARE = {
    gast.Is: operator.is_,
    gast.IsNot: operator.is_not,
    gast.Eq: operator.eq,
    gast.NotEq: operator.ne,
}


def _evaluated(node: gast.expr, refs: tuple[ir.Ref, ...], atom: Any) -> ir.Const | None:
    """The value of a test the rule's defaults decide (``bool(axis is None)``), or ``None`` where it
    reads a value known only at run time."""
    kind = type(node)
    if kind is gast.Constant:
        return ir.Const(node.value)
    if kind is gast.Name:
        if node.id.startswith("§"):
            return None
        value = atom(ir.Var(node.id))
        return value if isinstance(value, ir.Const) else None
    if (
        kind is gast.Call
        and type(node.func) is gast.Name
        and node.func.id.startswith("§")
        and refs[int(node.func.id[1:])].obj is bool
        and len(node.args) == 1
        and not node.keywords
    ):
        inner = _evaluated(node.args[0], refs, atom)
        return ir.Const(bool(inner.value)) if inner is not None else None
    if kind is gast.UnaryOp and type(node.op) is gast.Not:
        inner = _evaluated(node.operand, refs, atom)
        return ir.Const(not inner.value) if inner is not None else None
    if kind is gast.Compare and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        left, right = _evaluated(node.left, refs, atom), _evaluated(node.comparators[0], refs, atom)
        if left is None or right is None:
            return None
        return ir.Const(bool(_COMPARE[type(node.ops[0])](left.value, right.value)))
    if kind is gast.BoolOp:
        values = [_evaluated(v, refs, atom) for v in node.values]
        if any(v is None for v in values):
            return None
        truth = all if type(node.op) is gast.And else any
        return ir.Const(truth(v.value for v in values))  # type: ignore[union-attr]
    return None


def _decided_in(node: gast.expr, refs: tuple[ir.Ref, ...], atom: Any) -> gast.expr:
    """``node`` (a test decided only at run time) without the operands of its ``and``/``or`` that
    what was put in decides: ``bool(axis is not None) or bool(np.ndim(x) == 1)`` with ``axis`` given
    as ``None`` is the second."""
    if type(node) is not gast.BoolOp:
        return node
    # (a false operand of ``or`` says nothing; so a true one of ``and``)
    keep = gast.Or if type(node.op) is gast.Or else gast.And
    values = []
    for value in node.values:
        decided = _evaluated(value, refs, atom)
        if decided is None:
            values.append(_decided_in(value, refs, atom))
        elif bool(decided.value) == (keep is gast.Or):
            # (a decision's operands are bools, ``bool(...)``, and pure: the whole is this, the rest
            # need not run)
            return gast.Constant(value=keep is gast.Or, kind=None)
    return values[0] if len(values) == 1 else gast.BoolOp(op=node.op, values=values)


def _dead_stores_dropped(body: list[ir.Stmt], result: ir.Atom) -> list[ir.Stmt]:
    """``body`` without the assignments nothing reads after them (a decided branch leaves the
    other's behind, and ``choice = None`` before it)."""
    live = {result.name} if isinstance(result, ir.Var) else set()
    return list(_live_block(tuple(body), live))


def _live_block(body: tuple[ir.Stmt, ...], live: set[str]) -> tuple[ir.Stmt, ...]:
    """``body``'s statements that bind what is read after them, ``live`` (changed to what is read
    before them)."""
    kept: list[ir.Stmt] = []
    for stmt in reversed(body):
        if isinstance(stmt, ir.If):
            after, branches = set(live), []
            live.clear()
            for original in (stmt.body, stmt.orelse):
                reads = set(after)
                branches.append(_live_block(original, reads))
                live |= reads
            stmt = ir.If(stmt.test, branches[0], branches[1], stmt.line)
        else:
            bound = ir.defined(stmt)
            if bound and not live.intersection(bound):
                continue
            live.difference_update(bound)
        live.update(ir.reads_of(stmt))  # (a run-time test's names too)
        kept.append(stmt)
    return tuple(kept[::-1])
