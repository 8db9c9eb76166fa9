"""Functions the user's code defines or names, lowered where they are called.

A nested ``def`` or a ``lambda``, a module function passed by name (``integrate(x, force)``), a
``functools.partial``, ``map`` and ``sorted`` with a function: each call is inlined, its body
lowered in place with names of its own. And ``ast_ad.grad(f)``, ``ast_ad.jvp(f, ...)``,
``ast_ad.hessian(f)`` written in the body are made when the body is lowered, so their calls are
calls of known primitives::

    def f(x):                                  grad_g = <the gradient, made once>
        return np.sum(ast_ad.grad(g)(x))       grad_g_x = grad_g(x)
                                               out = np.sum(grad_g_x)
"""

from __future__ import annotations

import ast
import inspect
import operator
from typing import Any

import gast

from ast_ad import runtime
from ast_ad.core import registry
from ast_ad.errors import ASTADError, LocatedError
from ast_ad.frontend.aliasing import Memory
from ast_ad.frontend.check import refuse
from ast_ad.frontend.frame import ClosureScope, Frame, Lowering
from ast_ad.frontend.parse import parse, to_gast
from ast_ad.frontend.structure import held_iterables, structure
from ast_ad.ir import nodes as ir
from ast_ad.ir import syntax
from ast_ad.ir.naming import Namer

_NOT_LITERAL = object()

# The API's transformations, by name (``grad``, ``value_and_grad``, ``jvp``, ``vjp``, ``hvp``,
# ``jacfwd``, ``jacrev``, ``jacobian``, ``hessian``, ``jvp_of``), which a body may call. The API is
# the layer above: its modules hand them down here when they are imported (``provide``), so that a
# call of one is known by identity. A transformation not provided yet cannot be in a body: a body
# reaches it through ``ast_ad``, which imports it.
TRANSFORMATIONS: dict[str, Any] = {}


def provide(**transformations: Any) -> None:
    """Make the API's ``transformations`` known to the lowering (called by the modules that define
    them)."""
    TRANSFORMATIONS.update(transformations)


def _is(obj: Any, *names: str) -> bool:
    """Whether ``obj`` is one of the transformations ``names`` (by identity: ``in`` would compare
    with ==)."""
    return any(name in TRANSFORMATIONS and obj is TRANSFORMATIONS[name] for name in names)


def _literal(node: gast.expr) -> Any:
    """The value of a constant (or a tuple of them) written in the source, else ``_NOT_LITERAL``."""
    if isinstance(node, gast.Constant):
        return node.value
    if isinstance(node, gast.Tuple):
        parts = [_literal(e) for e in node.elts]
        return _NOT_LITERAL if any(p is _NOT_LITERAL for p in parts) else tuple(parts)
    return _NOT_LITERAL


class Nesting:
    """Calls of the user's own functions, inlined, and transformations written in the body: a part
    of ``normalize.Lowerer`` that receives the frame, the lowerer (an inlined body is lowered by it)
    and the memory model."""

    def __init__(self, at: Frame, lowering: Lowering, memory: Memory) -> None:
        self.at, self.lowering = at, lowering
        self.locate = lowering.locate  # (where a node is, for errors)
        self.memory = memory

    def transformation(self, node: gast.Call) -> ir.Ref | None:
        """``ast_ad.grad(f, argnums)`` (or ``jacfwd``, ``jacrev``, ``jacobian``, ``hessian``)
        written in the body: made now (it only builds an object), so that the call of what it makes
        is a call of a known primitive (its rules: ``api.gradient.Gradient.ast_ad_rule``,
        ``api.compose.Jacobian.ast_ad_rule``)."""
        maker = self.lowering.static(node.func)
        instead = {
            "hvp": "write ast_ad.hessian(f)(x) @ v, or ast_ad.jvp(g, (x,), (v,))[1] with a "
            "module-level def g(x): return ast_ad.grad(f)(x)",
            "value_and_grad": "call it where it is made, ast_ad.value_and_grad(f)(x)",
            "vjp": "write ast_ad.grad(f)(x) for a scalar f, or contract ast_ad.jacrev(f)(x) with "
            "the cotangent",
        }
        for name, what in instead.items():
            if _is(maker, name):
                raise refuse(
                    node,
                    f"ast_ad.{name} inside a differentiated function is not supported yet: {what}",
                    self.locate,
                )
        if not _is(maker, "grad", "jacfwd", "jacrev", "jacobian", "hessian") or not node.args:
            return None
        target = node.args[0]
        # hessian(grad(f))
        inner = self.transformation(target) if isinstance(target, gast.Call) else None
        fn = inner.obj if inner is not None else self.lowering.static(target)
        if fn is None:
            return None
        called = f"ast_ad.{maker.__name__}"
        values = [_literal(arg) for arg in node.args[1:]] + [
            _literal(kw.value) for kw in node.keywords
        ]
        if any(v is _NOT_LITERAL for v in values):
            raise refuse(
                node,
                f"{called} inside a differentiated function needs a module-level function and "
                "constant argnums",
                self.locate,
            )
        try:
            made = maker(
                fn,
                *values[: len(node.args) - 1],
                **{
                    kw.arg: v
                    for kw, v in zip(node.keywords, values[len(node.args) - 1 :], strict=True)
                },
            )
        # (made as the function is read, whether or not the line runs: said at it)
        except ASTADError as error:
            if isinstance(error, (LocatedError, SyntaxError)):
                raise
            raise refuse(
                node, f"{called} inside a differentiated function: {error}", self.locate
            ) from error
        source = inner or self.lowering.expr(target)  # recorded: redefining ``f`` transforms again
        if not isinstance(source, ir.Ref):
            raise refuse(
                node,
                f"{called} inside a differentiated function needs a module-level function",
                self.locate,
            )
        return ir.Ref(
            made, f"{maker.__name__}_{getattr(fn, '__name__', 'f')}", source.origin, source.root
        )

    def value_and_gradient(self, node: gast.Call, name: str | None, user: bool) -> ir.Atom | None:
        """``ast_ad.value_and_grad(g, ...)(args)`` written in the body: ``(g(args), ast_ad.grad(g,
        ...)(args))``, the arguments bound once to names of their own. ``None`` for any other
        call."""
        maker = node.func
        if not (
            isinstance(maker, gast.Call)
            and _is(self.lowering.static(maker.func), "value_and_grad")
            and maker.args
        ):
            return None
        if any(isinstance(a, gast.Starred) for a in node.args) or node.keywords:
            raise refuse(
                node,
                "ast_ad.value_and_grad(g)(...) inside a differentiated function takes positional "
                "arguments: pass each by position",
                self.locate,
            )
        held, hidden = [], []
        for arg in node.args:
            hidden.append(self.lowering.hidden("argument"))
            self.at.env[hidden[-1]] = self.lowering.expr(arg)
            held.append(_load(hidden[-1]))
        gradient = gast.Call(
            func=gast.Attribute(value=maker.func.value, attr="grad", ctx=gast.Load())
            if isinstance(maker.func, gast.Attribute)
            else maker.func,
            args=maker.args,
            keywords=maker.keywords,
        )
        # ``from ast_ad import value_and_grad``: reach grad by value
        if not isinstance(maker.func, gast.Attribute):
            hidden.append(self.lowering.hidden("grad"))
            self.at.env[hidden[-1]] = ir.Ref(TRANSFORMATIONS["grad"], "ast_ad.grad")
            gradient.func = _load(hidden[-1])
        pair = gast.Tuple(
            elts=[
                gast.Call(func=maker.args[0], args=list(held), keywords=[]),
                gast.Call(func=gradient, args=list(held), keywords=[]),
            ],
            ctx=gast.Load(),
        )
        try:
            return self.lowering.expr(_locate_all(pair, node), name, user)
        finally:
            for key in hidden:
                del self.at.env[key]

    def forward_mode_inlined(self, node: gast.Call, name: str | None, user: bool) -> ir.Atom | None:
        """``ast_ad.jvp(f, (a, b), (None, t))`` written in the body, ``f`` a module-level function
        of floats and arrays: ``f``'s forward-mode code, made now for any floats and arrays
        (``compose.jvp_source``), lowered in place like a helper of the user's, so that the mode
        differentiating the body differentiates that code as it differentiates the user's: no
        derivative object is called when it runs. ``None`` (the primitive ``JvpOf``, below) where
        the primals and tangents are not tuples written out with one entry per parameter of ``f``,
        a tangent left out is not a literal ``None``, or ``f``'s code is not one function."""
        if "jvp_source" not in TRANSFORMATIONS or not _is(self.lowering.static(node.func), "jvp"):
            return None
        if len(node.args) != 3 or node.keywords:
            return None
        primals, tangents = node.args[1], node.args[2]
        if not (isinstance(primals, gast.Tuple) and isinstance(tangents, gast.Tuple)) or len(
            primals.elts
        ) != len(tangents.elts) or any(
            isinstance(e, gast.Starred) for e in (*primals.elts, *tangents.elts)
        ):
            return None
        fn = self.lowering.static(node.args[0])
        if not _plain_function(fn, len(primals.elts)):
            return None
        parameters = list(inspect.signature(fn).parameters.values())
        active = tuple(
            k for k, t in enumerate(tangents.elts)
            if not (isinstance(t, gast.Constant) and t.value is None)
        )
        if not active:
            return None
        made = TRANSFORMATIONS["jvp_source"](fn, len(parameters), active)
        if made is None:
            return None
        text, entry, namespace, watches = made
        tree = _entry_tree(text, entry, node)
        if not self.watched(node.args[0], fn, watches):
            return None
        # the arguments evaluated once, in order, as Python evaluates the call's two tuples; the
        # differentiated ones and their tangents checked to be what the code was made for
        hidden = []
        for arg in (*primals.elts, *(tangents.elts[k] for k in active)):
            hidden.append(self.lowering.hidden("argument"))
            self.at.env[hidden[-1]] = self.lowering.expr(arg)
        names = [a.id for a in tree.args.args]
        pairs = [_load(names[k if j == 0 else len(parameters) + i])
                 for i, k in enumerate(active) for j in (0, 1)]
        tree.body.insert(0, _checked("check_jvp_layout", self.at.line.where(), pairs, node))
        scope = {**namespace, "check_jvp_layout": runtime.check_jvp_layout}
        call = gast.Call(func=_load(entry), args=[_load(h) for h in hidden], keywords=[])
        try:
            return self.inline(tree, _locate_all(call, node), name, user, scope=scope)
        finally:
            for key in hidden:
                del self.at.env[key]

    def watched(self, target: gast.expr, fn: Any, watches: Any) -> bool:
        """Record ``fn``, named by ``target`` in the body, and the globals its derivative code was
        made from (``watches``), so that the body is transformed again where either changes;
        ``False`` where ``target`` is not a name of a module-level function."""
        source = self.lowering.expr(target)  # recorded: redefining ``f`` transforms again
        if not isinstance(source, ir.Ref):
            return False
        self.at.inlined.append(fn)  # (its code watched)
        self.at.foreign_reads.extend(watches)
        return True

    def gradient_inlined(self, node: gast.Call, name: str | None, user: bool) -> ir.Atom | None:
        """``ast_ad.grad(f, argnums)(a, b)`` written in the body, ``f`` a module-level function of
        plain parameters: ``f``'s reverse-mode code, made now for any floats and arrays
        (``compose.grad_source``), lowered in place as ``forward_mode_inlined`` lowers a jvp's, so
        that the mode differentiating the body differentiates that code (forward over reverse: one
        pass, the Hessian-vector product the mathematics needs) and no derivative object is
        called when it runs. The differentiated arguments are checked to be floats or arrays of
        64-bit floats, and the value a real number (``runtime.check_gradient_layout``,
        ``check_gradient_value``), as the API's ``grad`` asks; the gradient is what the API
        returns (``runtime.gradient_like``). ``None`` (the primitive ``api.gradient.Gradient``)
        where the call passes keywords or unpacks, ``grad`` is given more than ``argnums``, or
        ``f``'s code is not one function."""
        maker = node.func
        if "grad_source" not in TRANSFORMATIONS or not isinstance(maker, gast.Call) \
                or not _is(self.lowering.static(maker.func), "grad") or not maker.args:
            return None
        if node.keywords or any(isinstance(a, gast.Starred) for a in node.args) \
                or any(kw.arg != "argnums" for kw in maker.keywords) or len(maker.args) > 2:
            return None
        fn = self.lowering.static(maker.args[0])
        if not _plain_function(fn, len(node.args)):
            return None
        parameters = list(inspect.signature(fn).parameters.values())
        values = [_literal(a) for a in (*maker.args[1:], *(kw.value for kw in maker.keywords))]
        argnums = values[0] if values else 0
        positions: tuple[int, ...]
        if isinstance(argnums, int) and not isinstance(argnums, bool):
            positions, single = (argnums,), True
        elif isinstance(argnums, tuple) and argnums and all(
            isinstance(k, int) and not isinstance(k, bool) for k in argnums
        ):
            positions, single = argnums, False
        else:
            return None
        if len(set(positions)) != len(positions) or any(
            not -len(parameters) <= k < len(parameters) for k in positions
        ):
            return None
        positions = tuple(k % len(parameters) for k in positions)
        made = TRANSFORMATIONS["grad_source"](fn, len(parameters), positions, single)
        if made is None:
            return None
        text, entry, namespace, watches = made
        # (its seed ``out_bar=1.0``: the literal)
        tree = _seeded(_entry_tree(text, entry, node), len(parameters))
        if not self.watched(maker.args[0], fn, watches):
            return None
        hidden = []
        for arg in node.args:  # evaluated once, in order
            hidden.append(self.lowering.hidden("argument"))
            self.at.env[hidden[-1]] = self.lowering.expr(arg)
        where = self.at.line.where()
        names = [a.id for a in tree.args.args]
        # its arguments checked first; its value checked where it returns, and its gradients alone
        # returned (not the pair, which the body's mode would pack and take apart)
        last = tree.body[-1]
        assert isinstance(last, gast.Return) and isinstance(last.value, gast.Tuple)
        out, returned = last.value.elts
        tree.body[-1:] = [_checked("check_gradient_value", where, [out], node),
                          gast.Return(value=returned)]
        tree.body.insert(0, _checked("check_gradient_layout", where,
                                     [_load(names[k]) for k in positions], node))
        scope = {**namespace, "check_gradient_layout": runtime.check_gradient_layout,
                 "check_gradient_value": runtime.check_gradient_value}
        call = gast.Call(func=_load(entry), args=[_load(h) for h in hidden], keywords=[])
        try:
            grads = self.inline(_locate_all(tree, node), _locate_all(call, node), None, False,
                                scope=scope)
            if single:
                shaped = ir.Call(ir.Ref(runtime.gradient_like, "gradient_like"),
                                 (grads, self.at.env[hidden[positions[0]]]))
            else:
                hidden.append(self.lowering.hidden("arguments"))
                self.at.env[hidden[-1]] = self.lowering.expr(_locate_all(gast.Tuple(
                    elts=[_load(hidden[k]) for k in positions], ctx=gast.Load()), node))
                shaped = ir.Call(ir.Ref(runtime.gradients_like, "gradients_like"),
                                 (grads, self.at.env[hidden[-1]]))
            return self.lowering.bind(shaped, name or f"grad_{fn.__name__}", user)
        finally:
            for key in hidden:
                del self.at.env[key]

    def forward_mode(self, node: gast.Call) -> ir.Ref | None:
        """``ast_ad.jvp(f, primals, tangents)`` written in the body, ``f`` a module-level function:
        a call of the primitive ``compose.JvpOf(f)`` on the two tuples (its rules transform ``f``'s
        forward-mode code)."""
        if not _is(self.lowering.static(node.func), "jvp"):
            return None
        fn = self.lowering.static(node.args[0]) if node.args else None
        if (
            fn is None
            or len(node.args) != 3
            or node.keywords
            or not all(isinstance(arg, (gast.Tuple, gast.List, gast.Name)) for arg in node.args[1:])
        ):
            raise refuse(
                node,
                "ast_ad.jvp inside a differentiated function needs a module-level function and the "
                "primals and tangents as two tuples: ast_ad.jvp(f, (x,), (v,))",
                self.locate,
            )
        source = self.lowering.expr(node.args[0])  # recorded: redefining ``f`` transforms again
        if not isinstance(source, ir.Ref):
            raise refuse(
                node,
                "ast_ad.jvp inside a differentiated function needs a module-level function",
                self.locate,
            )
        return ir.Ref(
            TRANSFORMATIONS["jvp_of"](fn),
            f"jvp_{getattr(fn, '__name__', 'f')}",
            source.origin,
            source.root,
        )

    def is_function(self, node: gast.expr) -> bool:
        """Whether ``node`` is a function value ast_ad can inline: a lambda, a def of this function,
        or a plain function of the same module without a rule (passed on by name: ``integrate(x,
        force)``)."""
        return (
            isinstance(node, gast.Lambda)
            or (
                isinstance(node, gast.Name)
                and node.id in self.at.local_functions
                and node.id not in self.at.env
            )
            or self.module_function(node) is not None
        )

    def module_function(self, node: gast.expr) -> gast.Lambda | None:
        """For the name of a function of this module without a rule, a lambda that calls it by that
        name."""
        if not isinstance(node, gast.Name) or node.id in self.at.env or node.id in self.at.locals \
                or node.id in self.at.local_functions:
            return None
        fn = self.lowering.static(node)
        if (
            not inspect.isfunction(fn)
            or fn.__globals__ is not self.at.fn.__globals__
            or registry.lookup(fn) is not None
        ):
            return None
        params = list(inspect.signature(fn).parameters.values())
        if any(p.kind is not p.POSITIONAL_OR_KEYWORD or p.default is not p.empty for p in params):
            return None
        names = [gast.Name(id=f"arg_{k}", ctx=gast.Param(), annotation=None, type_comment=None)
                 for k in range(len(params))]
        call = gast.Call(
            func=gast.Name(id=node.id, ctx=gast.Load(), annotation=None, type_comment=None),
            args=[
                gast.Name(id=n.id, ctx=gast.Load(), annotation=None, type_comment=None)
                for n in names
            ],
            keywords=[],
        )
        arguments = gast.arguments(
            args=names,
            posonlyargs=[],
            vararg=None,
            kwonlyargs=[],
            kw_defaults=[],
            kwarg=None,
            defaults=[],
        )
        return gast.copy_location(
            gast.Lambda(args=arguments, body=gast.copy_location(call, node)), node
        )

    def mapped(self, node: gast.Call) -> gast.expr:
        """``map(f, xs, ys)`` is ``[f(x, y) for x, y in zip(xs, ys)]``: a list, since everything
        consumes it once."""
        items = [gast.Name(id=f"item_{k}", ctx=gast.Store(), annotation=None, type_comment=None)
                 for k in range(len(node.args) - 1)]
        target = items[0] if len(items) == 1 else gast.Tuple(elts=items, ctx=gast.Store())
        if len(items) > 1 and "zip" in self.at.locals:
            raise refuse(
                node,
                "map over several sequences is lowered with zip, which this function rebinds: "
                "rename the local variable zip",
                self.locate,
            )
        iterable = (
            node.args[1]
            if len(items) == 1
            else gast.Call(func=_load("zip"), args=node.args[1:], keywords=[])
        )
        elt = gast.Call(func=node.args[0], args=[_load(item.id) for item in items], keywords=[])
        comp = gast.ListComp(
            elt=elt,
            generators=[gast.comprehension(target=target, iter=iterable, ifs=[], is_async=0)],
        )
        return _locate_all(comp, node)

    def sorted_call(self, node: gast.Call, name: str | None, user: bool) -> ir.Atom:
        """``sorted(xs, key=f, reverse=r)``: the keys are computed (``f`` inlined), then the items
        ordered by them."""
        options = {kw.arg: kw.value for kw in node.keywords}
        items = self.memory.hold(self.lowering.expr(node.args[0]))
        if "key" in options and not self.is_function(options["key"]):
            raise refuse(
                node,
                "sorted(..., key=...) is supported with a lambda or a function defined here",
                self.locate,
            )
        held = self.lowering.hidden("sorted")
        self.at.env[held] = items
        try:
            keys = (
                self.lowering.expr(
                    self.mapped(
                        gast.copy_location(
                            gast.Call(
                                func=_load("map"), args=[options["key"], _load(held)], keywords=[]
                            ),
                            node,
                        )
                    )
                )
                if "key" in options
                else items
            )
        finally:
            del self.at.env[held]
        reverse = (
            self.lowering.expr(options["reverse"]) if "reverse" in options else ir.Const(False)
        )
        result = self.lowering.bind(
            ir.Call(ir.Ref(runtime.sorted_by, "sorted_by"), (items, keys, reverse)),
            name or "ordered",
            user,
        )
        self.at.kinds[result.name] = "list"
        return result

    def chosen_by_key(self, node: gast.Call, which: Any, name: str | None, user: bool) -> ir.Atom:
        """``max(xs, key=f)`` (or ``min``): the keys computed (``f`` inlined), then the first item
        whose key is the largest (smallest) read by its position, as Python picks it."""
        key = node.keywords[0].value
        if not self.is_function(key):
            raise refuse(
                node,
                f"{which.__name__}(..., key=...) is supported with a lambda or a function defined "
                "here",
                self.locate,
            )
        items = self.memory.hold(self.lowering.expr(node.args[0]))
        held = self.lowering.hidden("chosen")
        self.at.env[held] = items
        try:
            keys = self.lowering.expr(self.mapped(gast.copy_location(
                gast.Call(func=_load("map"), args=[key, _load(held)], keywords=[]), node)))
        finally:
            del self.at.env[held]
        position = self.lowering.bind(
            ir.Call(ir.Ref(runtime.first_best, "first_best"), (keys, ir.Const(which.__name__))),
            "position",
        )
        return self.lowering.bind(
            ir.Call(ir.Ref(operator.getitem, "operator.getitem"), (items, position)),
            name or which.__name__,
            user,
        )

    def helper_tree(self, node: gast.Call, fn: Any) -> gast.FunctionDef:
        """The tree of a module function called with a function argument (``apply(lambda z: ...,
        x)``).

        It is inlined here, so the function it receives is inlined in turn; its lines are moved to
        stand where they are in its file.
        """
        if fn.__globals__ is not self.at.fn.__globals__ or fn.__closure__:
            raise refuse(
                node,
                f"a function passed to {fn.__name__} is supported only where {fn.__name__} is a "
                "closure-free function of the same module: define it there, or pass values",
                self.locate,
            )
        source = parse(fn)
        self.at.inlined.append(fn)
        tree = syntax.clone(source.tree)
        shift = source.line_offset - self.at.source.line_offset
        for n in syntax.walk(tree):
            for attr in ("lineno", "end_lineno"):
                if getattr(n, attr, None) is not None:
                    setattr(n, attr, getattr(n, attr) + shift)
        return tree

    def call_partial(self, node: gast.Call, name: str | None, user: bool) -> ir.Atom:
        """``g(x)`` where ``g = functools.partial(f, a)``: ``f(a, x)``, with ``a`` as it was when
        ``g`` was made."""
        func, args, keywords = self.at.partials[node.func.id]
        call = gast.Call(func=func, args=[*args, *node.args], keywords=[*keywords, *node.keywords])
        return self.lowering.expr(gast.copy_location(call, node), name, user)

    def frozen_partial(
        self, value: gast.Call
    ) -> tuple[gast.expr, list[gast.expr], list[gast.keyword]]:
        """``functools.partial(f, a, k=b)``: ``a`` and ``b`` evaluated now, as Python does, under
        names of their own."""
        def frozen(node: gast.expr) -> gast.expr:
            if self.is_function(node):
                return node
            key = self.lowering.hidden("partial")
            self.at.env[key] = self.memory.hold(self.lowering.expr(node))
            return gast.copy_location(_load(key), node)
        func, *args = value.args
        return func, [frozen(a) for a in args], [gast.keyword(arg=kw.arg, value=frozen(kw.value))
                                                 for kw in value.keywords]

    def free_names_apart(
        self, fn: gast.FunctionDef | gast.Lambda, node: gast.Call
    ) -> dict[str, ir.Atom]:
        """The names the body of a function defined outside the caller reads from where it is
        defined (its closure or its module) that the caller binds too, each with what it is there
        (``Lowering.helper_global``, watched as any name read there; its scope is the innermost of
        ``scopes``). Lowered in place, the body would read the caller's variable instead (``k`` of
        ``cut(1)``'s ``a[k:]``, a module's ``scale`` where the caller has a ``scale`` of its own):
        a wrong value."""
        clash = sorted(
            n for n in _free_names(fn)
            if not n.startswith("§") and (n in self.at.env or n in self.at.locals)
        )
        return {
            n: self.lowering.helper_global(
                gast.copy_location(gast.Name(id=n, ctx=gast.Load(), annotation=None,
                                             type_comment=None), node)
            )
            for n in clash
        }

    def inline_in_scope(
        self, fn: Any, tree: gast.FunctionDef, node: gast.Call, name: str | None, user: bool
    ) -> ir.Atom:
        """``inline`` the function ``fn`` defined elsewhere (``tree``, its source) in its own scope:
        the names its body does not bind are read where it is defined, its closure's cells and its
        module's globals (``scopes``, ``Lowering.helper_global``), as Python reads them; the call's
        arguments are the caller's, read in its scope, and so is the body of a function of the
        caller's passed to it (``Frame.function_scopes``)."""
        return self.inline(
            tree, node, name, user, scope=ClosureScope(fn) if fn.__closure__ else fn.__globals__
        )

    def inline(
        self, fn: gast.FunctionDef | gast.Lambda, node: gast.Call, name: str | None, user: bool,
        scope: Any = None,
    ) -> ir.Atom:
        """A call to a function defined inside this one: its body, lowered in place with its own
        names. ``scope``: a function defined elsewhere (a module's, a closure's, a method), whose
        free names are its own scope's, not the caller's (``free_names_apart``): that scope, a
        module's dict or a closure's ``ClosureScope``, pushed on ``scopes`` while its body and its
        defaults are lowered, not the call's arguments. A function of the caller's (a lambda, a
        def) is lowered in the scopes where it was passed on (``Frame.function_scopes``), wherever
        it is called."""
        label = getattr(fn, "name", "lambda")
        caller_scopes = list(self.at.scopes)
        defined_in = self.at.function_scopes.get(id(fn), (None, None))[1]
        if label in self.at.inlining or len(self.at.inlining) > 20:
            raise refuse(
                node,
                f"the nested function {label} calls itself: define it at module level to recurse",
                self.locate,
            )
        body = [gast.Return(value=fn.body)] if isinstance(fn, gast.Lambda) else list(fn.body)
        params = [a.id for a in fn.args.posonlyargs + fn.args.args]
        if fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs or len(node.args) > len(params) \
                or any(kw.arg not in params for kw in node.keywords):
            raise refuse(
                node,
                f"this call does not fit {label}'s parameters (ast_ad inlines nested functions "
                "with plain positional and keyword parameters)",
                self.locate,
            )
        passed = dict(zip(params, node.args, strict=False))
        passed.update((kw.arg, kw.value) for kw in node.keywords)
        functions: dict[str, Any] = {}
        for p, v in passed.items():
            if not self.is_function(v):
                continue
            tree = self.module_function(v) or (
                self.at.local_functions[v.id] if isinstance(v, gast.Name) else v
            )
            functions[p] = tree
            # the caller's (a lambda, a def, a call of a function of its module by name): it reads
            # its names where it is passed (the tree is held, so that its id names it alone)
            self.at.function_scopes.setdefault(id(tree), (tree, caller_scopes))
        values = {p: self.lowering.expr(v) for p, v in passed.items() if p not in functions}
        defaults = dict(
            zip(params[len(params) - len(fn.args.defaults) :], fn.args.defaults, strict=True)
        )
        # the body, its defaults and the names it reads where it is defined: in its own scope
        if scope is not None:
            self.at.scopes.append(scope)
        elif defined_in is not None:
            self.at.scopes[:] = defined_in
        try:
            own = self.free_names_apart(fn, node) if scope is not None else {}
            for p in params:
                if p not in values and p not in functions:
                    if p not in defaults:
                        raise refuse(
                            node, f"missing argument {p!r} in the call to {label}", self.locate
                        )
                    values[p] = self.lowering.expr(defaults[p])
        except BaseException:
            self.at.scopes[:] = caller_scopes
            raise
        inner_locals = {n.id for s in body for n in gast.walk(s) if isinstance(n, gast.Name)
                        and isinstance(n.ctx, gast.Store)} | set(params)
        renames = {
            v: self.at.namer.fresh(f"{label}_{v}" if label != "lambda" else v)
            for v in sorted(inner_locals)
        }
        # the names it reads from its own scope that the caller binds too: held apart
        apart = {n: self.lowering.hidden(n) for n in own}
        body = [_rename_all(syntax.clone(s), {**renames, **apart}) for s in body]
        saved_env, saved_locals = dict(self.at.env), set(self.at.locals)
        self.at.env.update((apart[n], atom) for n, atom in own.items())
        self.at.inlining.append(label)
        self.at.carried.append({})
        try:
            for v in inner_locals:
                self.at.env.pop(renames[v], None)
            self.at.locals |= set(renames.values())
            self.at.user_locals |= set(renames.values())
            for p in params:
                if p in functions:
                    self.at.local_functions[renames[p]] = functions[p]
                else:
                    self.at.env[renames[p]] = values[p]
            namer = Namer(reserved=self.at.locals)
            body = held_iterables(structure(body, namer), namer)
            self.at.locals |= {n.id for s in body for n in gast.walk(s) if isinstance(n, gast.Name)
                            and isinstance(n.ctx, gast.Store)}
            for stmt in body[:-1]:
                self.at.line = self.lowering.line_of(stmt)
                self.lowering.stmt(stmt)
            last = body[-1] if body else None
            if not isinstance(last, gast.Return) or last.value is None:
                raise refuse(
                    last or node,
                    f"{label} must end with `return <value>` to be differentiated",
                    self.locate,
                )
            return self.lowering.expr(last.value, name, user)
        finally:
            self.at.scopes[:] = caller_scopes
            self.at.inlining.pop()
            carried = self.at.carried.pop()
            # (in place: the other parts hold these tables)
            self.at.env.clear()
            self.at.env.update(saved_env)
            self.at.locals.clear()
            self.at.locals.update(saved_locals)
            self.at.env.update((user, atom) for user, atom in carried.items() if user in saved_env)
            for p in functions:
                self.at.local_functions.pop(renames[p], None)


def _free_names(fn: gast.FunctionDef | gast.Lambda) -> set[str]:
    """The names ``fn``'s body reads that it does not bind (its parameters, its assignments, its
    loops' and comprehensions' targets): those it reads from its closure, its module or builtins."""
    bound = {n.id for n in gast.walk(fn) if isinstance(n, gast.Name)
             and isinstance(n.ctx, (gast.Store, gast.Param, gast.Del))}
    bound |= {n.name for n in gast.walk(fn) if isinstance(n, (gast.FunctionDef, gast.ClassDef))}
    return {n.id for n in gast.walk(fn) if isinstance(n, gast.Name)
            and isinstance(n.ctx, gast.Load) and n.id not in bound}


def _plain_function(fn: Any, count: int) -> bool:
    """Whether ``fn`` is a function of the user's, with no closure and no rule, of ``count`` plain
    parameters: one whose derivative code, made for it alone, a body can have lowered in place."""
    if not inspect.isfunction(fn) or fn.__closure__ or registry.lookup(fn) is not None \
            or (fn.__module__ or "").startswith("ast_ad.") or getattr(fn, "composable", False):
        return False
    parameters = list(inspect.signature(fn).parameters.values())
    return len(parameters) == count and all(
        p.kind is p.POSITIONAL_OR_KEYWORD for p in parameters)


def _entry_tree(text: str, entry: str, node: gast.AST) -> gast.FunctionDef:
    """The function ``entry`` of the generated ``text``, each line of it at the user's line that
    wrote the derivative (``node``)."""
    tree: gast.FunctionDef = next(
        stmt for stmt in to_gast(ast.parse(text)).body
        if isinstance(stmt, gast.FunctionDef) and stmt.name == entry
    )
    for n in syntax.walk(tree):
        if "lineno" in getattr(n, "_attributes", ()):
            gast.copy_location(n, node)
    return tree


def _checked(check: str, where: str, args: list[gast.expr], like: gast.AST) -> gast.stmt:
    """The statement ``check(where, *args)``: a check of ``runtime`` that code lowered in place
    makes (its name put in the scope it is lowered in)."""
    call = gast.Call(func=_load(check), args=[gast.Constant(value=where, kind=None), *args],
                     keywords=[])
    done: gast.stmt = _locate_all(gast.Expr(value=call), like)
    return done


def _seeded(tree: gast.FunctionDef, nparams: int) -> gast.FunctionDef:
    """A gradient's entry function with its seed (the parameter after the function's own, which
    defaults to ``1.0``) read as that literal."""
    seed = tree.args.args[nparams].id
    value = tree.args.defaults[-1]
    tree.args.args, tree.args.defaults = tree.args.args[:nparams], []

    class Seed(gast.NodeTransformer):  # type: ignore[misc]
        def visit_Name(self, n: gast.Name) -> gast.expr:
            if n.id == seed and isinstance(n.ctx, gast.Load):
                return gast.copy_location(syntax.clone(value), n)
            return n

    done: gast.FunctionDef = Seed().visit(tree)
    return done


def _load(name: str) -> gast.Name:
    return gast.Name(id=name, ctx=gast.Load(), annotation=None, type_comment=None)


def _rename_all(node: gast.AST, renames: dict[str, str]) -> gast.AST:
    for n in syntax.walk(node):
        if isinstance(n, gast.Name) and n.id in renames:
            n.id = renames[n.id]
    return node


def _locate_all(node: gast.AST, like: gast.AST) -> gast.AST:
    for n in syntax.walk(node):
        if getattr(n, "lineno", None) is None and "lineno" in getattr(n, "_attributes", ()):
            gast.copy_location(n, like)
    return node
