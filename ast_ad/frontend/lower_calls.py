"""Lowering calls and attribute reads: what a call calls, and with what.

A call becomes one statement of a known primitive: a numpy function (``np.sum(x)``), a method of an
array (``x.sum(axis=0)`` is ``np.sum(x, axis=0)``), a method of the user's own class (its function,
with the object first), a user function (inlined later, or called as a pair of generated functions),
or a write into an array (``f(x, out=y)`` is ``y[...] = f(x)``). Keywords that may carry a gradient
move to their positions, and arguments whose meaning the rules do not follow (``where=``,
``order='F'``) are refused at the user's line. Attribute reads are primitives (``x.T``), facts read
as they are (``x.shape``), constants (``np.pi``) or fields (``p.w``). A part of
``normalize.Lowerer`` (``frame``), which lowers the rest.
"""

from __future__ import annotations

import builtins
import dis
import functools
import inspect
import types
from typing import Any

import gast
import numpy as np

from ast_ad import runtime
from ast_ad.analysis.activity import is_library
from ast_ad.core import registry
from ast_ad.errors import ASTADError, LocatedError, SourceUnavailableError, UnsupportedSyntaxError
from ast_ad.frontend.aliasing import Memory
from ast_ad.frontend.check import refuse
from ast_ad.frontend.frame import ClosureScope, Frame, Lowering, ParamWrites, ReturnView
from ast_ad.frontend.lower_control import ControlFlow, written_parameters
from ast_ad.frontend.lower_exprs import ExpressionLowering
from ast_ad.frontend.lower_writes import WriteLowering
from ast_ad.frontend.nested import Nesting
from ast_ad.frontend.objects import Objects, Super, followable, made_of
from ast_ad.frontend.parse import parse
from ast_ad.ir import nodes as ir

# Attributes of array values: ``x.T`` is a primitive; the facts in NONDIFF_ATTRIBUTES are read as
# they are (no gradient); any other attribute (a namedtuple's field, ``p.w``) is read by
# ``runtime.field``, which has a rule.
ATTRIBUTE_PRIMITIVES = {"T": np.transpose, "mT": runtime.T, "real": np.real, "imag": np.imag}
NONDIFF_ATTRIBUTES = {"shape", "ndim", "size", "dtype", "itemsize", "nbytes", "strides"}
# Methods of array values, resolved to the numpy function of the same meaning.
VARARG_METHODS = {"reshape", "transpose"}  # x.reshape(2, 3) means np.reshape(x, (2, 3))

# The parameters each user function may change in place (Python's caller would see the change), by
# function.
PARAM_WRITES: dict[Any, frozenset[str]] = {}
# the view of one of its parameters a user function returns, by (function, code): the parameter's
# position and the view's recipe (``return y[1:]``: ``y[1:]``, its other operands constants), or
# None
RETURN_VIEWS: dict[Any, tuple[int, ir.Call | None] | None] = {}
# the functions whose bodies a function's lowering wrote in place, by (function, code): what its
# derivatives hold of them is stale once one is redefined, and the transform watches them
# (``transform._built``)
INLINED: dict[Any, tuple[Any, ...]] = {}
# the globals of other modules that inlined helpers read, by (function, code): (module dict, name,
# object), which the transform watches as it watches the inlined functions (``transform._built``)
FOREIGN_READS: dict[Any, tuple[tuple[dict[str, Any], str, Any], ...]] = {}
# functions being lowered now: True once a call to one assumed it writes nothing
BEING_LOWERED: dict[Any, bool] = {}


_ABSENT = object()


def _ending_in_return(tree: gast.FunctionDef) -> gast.FunctionDef:
    """``tree``, its body ending in a ``return`` (``return None`` added where it ends without
    one)."""
    if not tree.body or not isinstance(tree.body[-1], gast.Return) or tree.body[-1].value is None:
        tree.body = [
            *tree.body,
            gast.copy_location(
                gast.Return(value=gast.Constant(value=None, kind=None)),
                tree.body[-1] if tree.body else tree,
            ),
        ]
    return tree


class CallLowering:
    """The calls and attribute reads of ``normalize.Lowerer``, a part of it: it receives the frame,
    the lowerer, the other parts (a call may be an object's method, a write, a transformation...)
    and the two questions about a user function that lower it first (``param_writes``,
    ``return_view``)."""

    def __init__(
        self, at: Frame, lowering: Lowering, memory: Memory, nested: Nesting, objects: Objects,
        control: ControlFlow, exprs: ExpressionLowering, writing: WriteLowering,
        param_writes: ParamWrites, return_view: ReturnView,
    ) -> None:
        self.at, self.lowering = at, lowering
        self.locate = lowering.locate  # (where a node is, for errors)
        self.memory, self.nested, self.objects, self.control, self.exprs, self.writing = (
            memory,
            nested,
            objects,
            control,
            exprs,
            writing,
        )
        self.param_writes = param_writes
        self.return_view = return_view

    def expr_Call(self, node: gast.Call, name: str | None, user: bool) -> ir.Atom:
        func = node.func
        if isinstance(func, gast.Name) and made_of(self.at.env.get(func.id)) is not None:
            instance = made_of(self.at.env[func.id])
            assert instance is not None
            return self.objects.method_call(instance, node, name, user)
        if (
            isinstance(func, gast.Name)
            and func.id in self.at.partials
            and func.id not in self.at.env
        ):
            return self.nested.call_partial(node, name, user)
        if (
            isinstance(func, gast.Name)
            and func.id in self.at.local_functions
            and func.id not in self.at.env
        ):
            return self.nested.inline(self.at.local_functions[func.id], node, name, user)
        if isinstance(func, gast.Subscript) and isinstance(func.value, gast.Name) \
                and func.value.id in self.at.function_lists and func.value.id not in self.at.env:
            # ``fs[0](x)`` of ``fs = [lambda t: ..., ...]``
            listed = self.at.function_lists[func.value.id]
            index = func.slice
            k = index.value if isinstance(index, gast.Constant) else -index.operand.value \
                if isinstance(index, gast.UnaryOp) and isinstance(index.op, gast.USub) \
                and isinstance(index.operand, gast.Constant) else None
            if not isinstance(k, int) or not -len(listed) <= k < len(listed):
                raise refuse(
                    node,
                    f"a list of functions is called by a constant position ({func.value.id}[0](x)) "
                    f"or looped over (for g in {func.value.id}: ...)",
                    self.locate,
                )
            return self.nested.inline(listed[k], node, name, user)
        if isinstance(func, gast.Lambda):
            return self.nested.inline(func, node, name, user)
        if self.control.resolves_to(func, len) and len(node.args) == 1 and not node.keywords \
                and isinstance(node.args[0], gast.Name) and node.args[0].id not in self.at.env:
            # the length of a list of objects or functions made here: known
            known: list[Any] | None = self.at.object_lists.get(node.args[0].id)
            if known is None:
                known = self.at.function_lists.get(node.args[0].id)
            if known is not None:
                return ir.Const(len(known))
        if isinstance(func, gast.Subscript) and isinstance(func.value, gast.Name) \
                and func.value.id in self.at.object_lists and func.value.id not in self.at.env:
            # ``layers[0](x)``: that object's ``__call__``
            picked = made_of(self.lowering.expr(func))
            assert picked is not None
            return self.objects.method_call(picked, node, name, user)
        if (
            self.control.resolves_to(func, map)
            and len(node.args) >= 2
            and self.nested.is_function(node.args[0])
            and not node.keywords
        ):
            return self.lowering.expr(self.nested.mapped(node), name, user)
        if (
            self.control.resolves_to(func, next)
            and node.args
            and isinstance(node.args[0], gast.GeneratorExp)
        ):
            raise refuse(
                node,
                "next() of a generator expression is not supported (ast_ad makes a generator "
                "expression a list): write a for loop that assigns the item and breaks",
                self.locate,
            )
        if self.control.resolves_to(func, sorted) and len(node.args) == 1 \
                and all(kw.arg in ("key", "reverse") for kw in node.keywords):
            return self.nested.sorted_call(node, name, user)
        if (
            (self.control.resolves_to(func, max) or self.control.resolves_to(func, min))
            and len(node.args) == 1
            and [kw.arg for kw in node.keywords] == ["key"]
        ):
            return self.nested.chosen_by_key(
                node, max if self.control.resolves_to(func, max) else min, name, user
            )
        if (
            self.control.resolves_to(func, list)
            and len(node.args) == 1
            and isinstance(node.args[0], gast.Call)
            and self.control.resolves_to(node.args[0].func, map)
            and self.nested.is_function(node.args[0].args[0])
        ):
            # list(map(f, xs)): map is lowered to a list already
            return self.lowering.expr(node.args[0], name, user)
        gradient = self.nested.gradient_inlined(node, name, user)
        if gradient is not None:
            return gradient
        paired = self.nested.value_and_gradient(node, name, user)
        if paired is not None:
            return paired
        made = self.nested.transformation(node)
        if made is not None:
            return made
        inlined = self.nested.forward_mode_inlined(node, name, user)
        if inlined is not None:
            return inlined
        forward = self.nested.forward_mode(node)
        if forward is not None:
            return self.lowering.bind(
                ir.Call(
                    forward, (self.lowering.expr(node.args[1]), self.lowering.expr(node.args[2]))
                ),
                name or f"{forward.hint}_result",
                user,
            )
        if (
            isinstance(func, gast.Name)
            and func.id not in self.at.env
            and func.id not in self.at.locals
            and any(self.nested.is_function(arg) for arg in node.args)
        ):
            fn = self.lowering.name(func)
            if (
                isinstance(fn, ir.Ref)
                and inspect.isfunction(fn.obj)
                and registry.lookup(fn.obj) is None
                and not (fn.obj.__module__ or "").startswith("ast_ad.")
            ):
                return self.nested.inline_in_scope(
                    fn.obj, self.nested.helper_tree(node, fn.obj), node, name, user
                )
        if isinstance(func, gast.Attribute):
            owner = self.lowering.static(func.value)
            if isinstance(owner, types.ModuleType) and not hasattr(owner, func.attr):
                # raises AttributeError if it runs, as Python would
                return self.lowering.expr(func, name, user)
            receiver = self.lowering.expr(func.value)
            made_object = made_of(receiver)
            if made_object is not None:  # a method of an object made inside the function: inlined
                return self.objects.method_call(made_object, node, name, user)
            if isinstance(receiver, ir.Const) and isinstance(receiver.value, Super):
                return self.objects.super_method(receiver.value, node, name, user)
            if isinstance(receiver, ir.Ref) and followable(receiver.obj, self.at.fn):
                found = inspect.getattr_static(receiver.obj, func.attr, None)
                if isinstance(found, classmethod) and inspect.isfunction(found.__func__):
                    return self.objects.class_call(receiver.obj, found.__func__, node, name, user)
                if isinstance(found, staticmethod) and inspect.isfunction(found.__func__):
                    return self.objects.inline_method(
                        found.__func__, self.objects.method_tree(found.__func__, node), node, name,
                        user,
                    )
            method = self.method_of(receiver, func.attr, node)
            # a method of the user's own class: a call of its function with self
            if method is not None:
                return self.call_function(node, ir.Ref(method, func.attr), (receiver,), name, user)
            if not (
                isinstance(receiver, ir.Ref) and isinstance(receiver.obj, (types.ModuleType, type))
            ):
                return self.method(node, receiver, name, user)
        if (
            isinstance(func, gast.Name)
            and func.id in self.at.env
            and self.method_of(self.at.env[func.id], "__call__")
        ):
            method = self.method_of(self.at.env[func.id], "__call__")
            return self.call_function(
                node, ir.Ref(method, func.id), (self.at.env[func.id],), name, user
            )
        fn = self.lowering.expr(func)
        if isinstance(fn, ir.Ref) and followable(fn.obj, self.at.fn):
            # an object of the user's class: its attributes followed
            return self.objects.construct(fn.obj, node, name)
        if not isinstance(fn, ir.Ref):
            raise refuse(node, "calling a value computed inside the function is not supported yet: "
                               "call a module-level function", self.locate)
        writer = self.writing_helper(fn.obj)
        if writer is None and self.returns_a_view(fn.obj):
            # ``w = part(y, k)`` returning ``y[k:]``: inlined, so that ``w`` is that view of ``y``
            # made here, which the memory model follows
            writer = self.writing_helper(fn.obj, writes=False)
        if writer is None and self.returns_an_object(fn.obj):
            # ``m = make(w)`` returning ``Lin(w)`` made in it: inlined, so that the object is made
            # here, its attributes followed
            writer = self.writing_helper(fn.obj, writes=False)
        if writer is None and self.passes_an_object(node):
            # ``use(layer, x)`` with ``layer = Layer(w)`` made here: the function is inlined, so
            # that what it does with the object (its attributes, its methods) is followed
            writer = self.writing_helper(fn.obj, writes=False)
        if writer is not None:
            # a helper that changes its arguments: inlined, so that the caller's arrays follow its
            # writes (``aliasing``)
            return self.inline_helper(writer, node, name, user, fn.obj)
        at = registry.out_position(fn.obj)
        if at is not None and len(node.args) > at:
            node = self.positional_out(node, fn, at)
        out = next((kw for kw in node.keywords if kw.arg == "out"), None)
        if out is not None:
            return self.write_out(node, out, name, user)
        return self.call_function(node, fn, (), name, user)

    def positional_out(self, node: gast.Call, fn: ir.Ref, at: int) -> gast.Call:
        """``np.sin(x, y)``, ``np.dot(a, b, y)``: the argument at ``fn``'s ``out`` position
        (``registry.out_position``) is the array it writes, as ``out=y`` (a write the memory model
        follows); the call with ``out=``. (Read as one more argument, the write was lost where the
        call was a statement: ``y``'s gradient missed ``np.sin``'s part.)"""
        if len(node.args) != at + 1 or any(kw.arg == "out" for kw in node.keywords):
            raise refuse(
                node,
                f"{fn.hint} is given arguments past its out= position: give out= by keyword",
                self.locate,
            )
        out = gast.keyword(arg="out", value=node.args[-1])
        return gast.copy_location(
            gast.Call(func=node.func, args=node.args[:-1], keywords=[*node.keywords, out]), node
        )

    def call_function(
        self, node: gast.Call, fn: ir.Ref, first: tuple[ir.Atom, ...], name: str | None, user: bool
    ) -> ir.Atom:
        """``fn(*first, *node's arguments)``, its arguments lowered, as one statement."""
        args = first + tuple(self.lowering.expr(arg) for arg in node.args)
        kwargs = tuple((kw.arg, self.lowering.expr(kw.value)) for kw in node.keywords)
        if fn.obj is np.array and any(k == "copy" and v != ir.Const(True) for k, v in kwargs):
            fn = ir.Ref(runtime.array_view, "array_view")  # may give ``x`` itself: a view of it
        args, kwargs, moved = _positional(fn.obj, args, kwargs)
        self.check_arguments_followed(node, fn, args, kwargs)
        if (
            inspect.isfunction(fn.obj)
            and registry.lookup(fn.obj) is None
            and not (fn.obj.__module__ or "").startswith("ast_ad.")
        ):  # ast_ad's helpers change nothing
            copies = self.check_arguments_kept(node, fn, args, kwargs)
            args = tuple(copies.get(a, a) if isinstance(a, ir.Var) else a for a in args)
            kwargs = tuple((k, copies.get(a, a) if isinstance(a, ir.Var) else a) for k, a in kwargs)
        base = fn.hint.rsplit(".", 1)[-1]
        if (getattr(fn.obj, "__module__", None) or "").startswith("ast_ad."):
            # a helper keeps its name: no local of this function hides it
            self.at.namer.reserved.add(base)
        hint = name or (
            f"{base}_{args[0].name}" if len(args) == 1 and isinstance(args[0], ir.Var) else base
        )
        result = self.lowering.bind(ir.Call(fn, args, kwargs, moved), hint, user)
        if isinstance(fn.obj, type) and fn.obj.__module__ not in ("builtins", "numpy") \
                and not issubclass(fn.obj, (tuple, np.ndarray)):
            # an object of the user's class: its methods are known
            self.at.instances[result.name] = fn.obj
        return result

    def method_of(self, receiver: ir.Atom, attr: str, node: gast.AST | None = None) -> Any:
        """The plain function behind ``receiver.attr(...)`` for an object of the user's own class,
        or ``None``.

        ``attr`` is looked up as Python looks it up: an attribute of the object itself (``obj.step =
        f``) stands in front of the class's method, and so may one that the class's own code stores,
        or a class that takes attribute lookup over (``__getattribute__``). There (``node``, the
        call) it is refused."""
        cls = type(receiver.obj) if isinstance(receiver, ir.Ref) else \
            self.at.instances.get(receiver.name) if isinstance(receiver, ir.Var) else None
        if (
            cls is None
            or cls.__module__ in ("builtins", "numpy")
            or cls.__module__.startswith("ast_ad.")
            or isinstance(receiver, ir.Ref)
            and (
                isinstance(receiver.obj, (types.ModuleType, type, np.ndarray, float, int))
                or registry.lookup(receiver.obj) is not None
            )
        ):
            # (an object ast_ad made, ``d = ast_ad.grad(g)``, is called as the primitive it is)
            return None
        method = inspect.getattr_static(cls, attr, None)
        if not inspect.isfunction(method):
            return None
        if node is not None and attr != "__call__" and _may_hide(cls, attr, receiver):
            raise refuse(
                node,
                f"{attr} may be an attribute of the object itself, which Python calls instead of "
                f"the method of {cls.__name__}: ast_ad calls methods of classes only; call the "
                "function the attribute holds by its own name",
                self.locate,
            )
        return method

    def write_out(
        self, node: gast.Call, out: gast.keyword, name: str | None, user: bool
    ) -> ir.Atom:
        """``f(x, out=y)`` writes ``f(x)`` into ``y`` and returns ``y``: it is ``y[...] = f(x)``."""
        target = out.value
        if not (
            isinstance(target, gast.Name)
            and target.id in self.at.env
            and target.id in self.at.locals
        ):
            raise refuse(
                node,
                "out= is supported with a local array only (f(x, out=y)): or write y = f(x)",
                self.locate,
            )
        plain = gast.copy_location(
            gast.Call(
                func=node.func,
                args=node.args,
                keywords=[kw for kw in node.keywords if kw is not out],
            ),
            node,
        )
        store = gast.Subscript(
            value=gast.Name(id=target.id, ctx=gast.Store(), annotation=None, type_comment=None),
            slice=gast.Constant(value=Ellipsis, kind=None),
            ctx=gast.Store(),
        )
        self.lowering.assign(gast.copy_location(store, target), plain)
        return self.lowering.expr(target, name, user)

    def check_arguments_followed(self, node: gast.Call, fn: ir.Ref, args: tuple[Any, ...],
                                 kwargs: tuple[Any, ...]) -> None:
        """Refuse a call of a primitive with an argument whose meaning its rules do not follow
        (``where=``, an integer ``dtype=``, ``order='F'``...: ``registry.keyword_hazard``), by
        position or by keyword."""
        rule = registry.lookup(fn.obj)
        if (
            rule is None
            or rule.nondiff
            or not rule.origin.startswith("ast_ad.")
            or not (kwargs or len(args) > 1)
        ):
            return  # a user's own rule follows what its author says it follows
        signature = _signature(fn.obj)
        try:
            bound = (
                signature.bind_partial(*args, **dict(kwargs)).arguments
                if signature is not None
                else None
            )
        except TypeError:
            bound = None
        if signature is None or bound is None:  # a ufunc, a builtin: its keywords by name
            bound, variadic = dict(kwargs), set()
        else:
            variadic = {
                p.name
                for p in signature.parameters.values()
                if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            }
        for key, atom in bound.items():
            if key in variadic:
                continue
            value = (
                atom.value
                if isinstance(atom, ir.Const)
                else atom.obj
                if isinstance(atom, ir.Ref)
                else registry.UNKNOWN_VALUE
            )
            reason = registry.keyword_hazard(fn.obj, key, value)
            if reason is not None:
                raise refuse(node, f"{fn.hint}: {reason}", self.locate)
        # a keyword that no rule of ast_ad's names would be taken to change nothing
        for key, _ in kwargs:
            if key not in registry.rule_keywords(rule) and key not in registry.FOLLOWED_KEYWORDS:
                raise refuse(
                    node,
                    f"{fn.hint}: its rules do not read {key}=, so they cannot follow what it "
                    "changes; compute the same without it, or pass the argument by position "
                    "where its rule names it",
                    self.locate,
                )

    def check_arguments_kept(self, node: gast.Call, fn: ir.Ref, args: tuple[Any, ...],
                             kwargs: tuple[Any, ...]) -> dict[ir.Var, ir.Var]:
        """Refuse, at run time, an array or list passed to a user function that changes that
        parameter in place.

        Python's caller would see the change; ast_ad's gradient computes it as a new value. Where
        nothing reads the argument's object after the call but through other names (``x =
        damp(x)``), which are checked, the function is given a copy (the generated code may run it
        as written, which would change the caller's array, or one the backward pass reads): the
        copies to pass, by argument.
        """
        copies: dict[ir.Var, ir.Var] = {}
        unread = ""
        try:
            writes = self.param_writes(fn.obj)
        except (LocatedError, UnsupportedSyntaxError, SourceUnavailableError) as exc:
            if not is_library(fn.obj):
                raise
            # an installed library's function whose source is outside ast_ad's language (scipy's
            # raises): run as written where its arguments are numbers; where it is differentiated,
            # the modes say so
            writes = (
                frozenset(inspect.signature(fn.obj).parameters)
                if _signature(fn.obj)
                else frozenset()
            )
            unread = f" (ast_ad cannot read its source to tell: {exc.args[0] if exc.args else exc})"
        if not writes:
            return copies
        try:
            bound = inspect.signature(fn.obj).bind_partial(*args, **dict(kwargs))
        except TypeError:
            return copies  # Python raises its own error when the call runs
        where = self.at.line.where()
        for param, atom in bound.arguments.items():
            if (
                param in writes
                and isinstance(atom, ir.Var)
                and not unread
                and self.dead_after(atom)
            ):
                # ``x = damp(x)``: nothing reads the changed object after the call but through
                # another name, which the memory model checks, as at any write in place (the
                # callee's value is the new one)
                users = [name for name, held in self.at.env.items() if held == atom]
                self.memory.guard_object(atom, users[0] if users else "")
                if atom not in copies:
                    copies[atom] = self.lowering.bind(
                        ir.Call(ir.Ref(runtime.detached, "detached"), (atom,)), "copied"
                    )
            elif param in writes and isinstance(atom, ir.Var):
                message = ir.Const(
                    f"{where}: {fn.hint} may change its argument {param!r} in place{unread}; "
                    "pass it a copy"
                    if unread
                    else f"{where}: {fn.hint} changes its argument {param!r} in place (Python's "
                         "caller "
                    "would see the change); return the new value instead, or pass a copy"
                )
                self.lowering.bind(
                    ir.Call(ir.Ref(runtime.check_kept, "check_kept"), (atom, message)), "checked"
                )
        return copies

    def returns_a_view(self, fn: Any) -> bool:
        """Whether ``fn``, a function of the user's, returns a view of a parameter made with what
        the call gives it (``return y[k:]``; lowering ``fn`` says: ``param_writes`` reads it)."""
        if not (inspect.isfunction(fn) and registry.lookup(fn) is None
                and not (fn.__module__ or "").startswith("ast_ad.")) or fn is self.at.fn:
            return False
        try:
            self.param_writes(fn)
        except (ASTADError, SyntaxError):
            return False
        view = self.return_view(fn)
        return view is not None and view[1] is None

    def returns_an_object(self, fn: Any) -> bool:
        """Whether ``fn``, a function of the user's, returns an object of a class of the user's that
        it makes (``return Lin(w)``, or a name bound to one): inlined, the object is made in the
        caller, where ``objects`` follows it."""
        if not (inspect.isfunction(fn) and registry.lookup(fn) is None) or fn is self.at.fn \
                or (fn.__module__ or "").startswith("ast_ad."):
            return False
        try:
            tree = parse(fn).tree
        except ASTADError:
            return False
        last = tree.body[-1] if tree.body else None
        if not isinstance(last, gast.Return) or last.value is None:
            return False
        made = [last.value]
        if isinstance(last.value, gast.Name):  # ``m = Lin(w); return m``
            made = [
                s.value for s in tree.body
                if isinstance(s, gast.Assign) and len(s.targets) == 1
                and isinstance(s.targets[0], gast.Name) and s.targets[0].id == last.value.id
            ]
        return bool(made) and all(
            isinstance(value, gast.Call) and followable(_resolved(value.func, fn), fn)
            for value in made
        )

    def passes_an_object(self, node: gast.Call) -> bool:
        """Whether an argument of the call is an object made inside the function (a name bound to
        one, as ``objects`` follows it, or one made in the call: ``f(Lin(a, b))``)."""
        values = [*node.args, *(kw.value for kw in node.keywords)]
        return any(
            isinstance(v, gast.Name)
            and made_of(self.at.env.get(v.id)) is not None
            or isinstance(v, gast.Call)
            and followable(self.lowering.static(v.func), self.at.fn)
            for v in values
        )

    def writing_helper(self, fn: Any, writes: bool = True) -> gast.FunctionDef | None:
        """The tree of ``fn``, to inline, where it is a function of the user's (no closure, not
        ast_ad's, no rule) that changes a parameter in place (``a[0] = v``, ``a *= s``): inlined,
        its writes are the caller's, which the memory model follows; it may return nothing
        (``fill(y)``). A function of another module is inlined too, its names resolved in its own
        module (``scopes``): what it reads there that the caller's module does not hold is read as
        the object it is, and watched (``foreign_reads``)."""
        if not (inspect.isfunction(fn) and registry.lookup(fn) is None
                and fn is not self.at.fn and not (fn.__module__ or "").startswith("ast_ad.")) \
                or fn.__name__ in self.at.inlining or not _cells_set(fn):
            return None
        if fn.__globals__ is not self.at.fn.__globals__ or fn.__closure__:
            # (a closure reads its cells: lowered as a helper of its own scope)
            tree = self.foreign_tree(fn)
            if tree is None or writes and not written_parameters(tree):
                return None
            return _ending_in_return(tree)
        tree = self.nested.helper_tree(
            gast.Call(
                func=gast.Name(id=fn.__name__, ctx=gast.Load(), annotation=None, type_comment=None),
                args=[],
                keywords=[],
            ),
            fn,
        )
        if writes and not written_parameters(tree):
            return None
        return _ending_in_return(tree)

    def foreign_tree(self, fn: Any) -> gast.FunctionDef | None:
        """The tree of ``fn``, a function of another module, where each global name it reads is its
        module's or a builtin; ``None`` otherwise, or where it has no source."""
        try:
            source = parse(fn)
        except ASTADError:
            return None
        own = {
            n.id
            for n in gast.walk(source.tree)
            if isinstance(n, gast.Name) and isinstance(n.ctx, (gast.Store, gast.Param))
        } | {a.id for a in source.tree.args.args} | set(fn.__code__.co_freevars)
        for n in gast.walk(source.tree):
            if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load) and n.id not in own:
                theirs = fn.__globals__.get(n.id, _ABSENT)
                if theirs is _ABSENT and not hasattr(builtins, n.id):
                    return None
        self.at.foreign_sources[id(source.tree)] = source
        return source.tree

    def inline_helper(self, tree: gast.FunctionDef, node: gast.Call, name: str | None, user: bool,
                      fn: Any) -> ir.Atom:
        """``inline`` a helper that changes its arguments; one of another file is lowered at its own
        lines (its comments and errors name them)."""
        self.at.inlined.append(fn)
        source = self.at.foreign_sources.get(id(tree))
        outer = self.at.source
        self.at.source = source or outer
        try:
            return self.nested.inline_in_scope(fn, tree, node, name, user)
        finally:
            self.at.source = outer

    def dead_after(self, atom: ir.Var) -> bool:
        """Whether no variable that holds ``atom`` is read after the statement being lowered, but as
        the name it binds again (``x = damp(x)``): its object, changed in place, is then seen
        through other names only."""
        if self.at.live is None:
            return False
        return all(
            name not in self.at.live or name in self.at.rebinding
            for name, held in self.at.env.items()
            if held == atom
        )

    def method(self, node: gast.Call, receiver: ir.Atom, name: str | None, user: bool) -> ir.Atom:
        """``x.sum(axis=0)`` on an array value is ``np.sum(x, axis=0)``."""
        attr = node.func.attr
        if (
            attr == "pop"
            and not node.args
            and not node.keywords
            and self.lowering.is_local(node.func.value)
        ):
            return self.writing.popped(node.func.value, name or "popped", user)
        fn_obj = registry.method(attr)
        if fn_obj is None:
            twin = getattr(np, attr, None)
            hint = (
                f"call the numpy function, np.{attr}(x, ...), instead"
                if callable(twin) and registry.lookup(twin) is not None and not attr.startswith("_")
                # (a dict's view kept, or read where the dict may change as it is read)
                else f"read a dict's .{attr}() where it is taken whole at once (sum(d.{attr}()), "
                     f"list(d.{attr}()), a comprehension over it that calls no function of yours) "
                     f"or in a for loop (for ... in d.{attr}():)"
                if attr in ("items", "values", "keys") and not node.args
                else "ast_ad knows the methods of numpy arrays and of your own classes; compute it "
                     "with a function"
            )
            raise refuse(node, f"the method .{attr}() is not supported: {hint}", self.locate)
        args = tuple(self.lowering.expr(arg) for arg in node.args)
        if attr in VARARG_METHODS and len(args) > 1:
            args = (self.lowering.bind(ir.Pack(args), "shape"),)
        kwargs = tuple((kw.arg, self.lowering.expr(kw.value)) for kw in node.keywords)
        # may give the array itself: a view
        if attr == "astype" and ("copy", ir.Const(False)) in kwargs:
            fn_obj, kwargs = runtime.astype_view, tuple(kw for kw in kwargs if kw[0] != "copy")
        fn = ir.Ref(fn_obj, attr if attr == "astype" else f"np.{fn_obj.__name__}")
        self.check_arguments_followed(node, fn, (receiver,) + args, kwargs)
        hint = name or (f"{attr}_{receiver.name}" if isinstance(receiver, ir.Var) else attr)
        return self.lowering.bind(ir.Call(fn, (receiver,) + args, kwargs), hint, user)

    def expr_Attribute(self, node: gast.Attribute, name: str | None, user: bool) -> ir.Atom:
        node = gast.copy_location(
            gast.Attribute(value=node.value, attr=self.lowering.mangled(node.attr), ctx=node.ctx),
            node,
        )
        base = self.lowering.expr(node.value)
        made = made_of(base)
        if made is not None:
            return self.objects.attribute(made, node, name, user)
        if isinstance(base, ir.Ref) and isinstance(base.obj, (types.ModuleType, type, np.ufunc)):
            # ``if hasattr(np, ...)`` guards it: fail only if it runs
            if not hasattr(base.obj, node.attr):
                call = ir.Call(
                    ir.Ref(runtime.absent, "absent"), (ir.Const(base.hint), ir.Const(node.attr))
                )
                return self.lowering.bind(call, name or node.attr, user)
            value = getattr(base.obj, node.attr)
            if isinstance(value, (int, float, bool, type(None))):  # np.pi, np.newaxis: constants
                return ir.Const(value)
            return self.exprs.refuse_complex(
                node, ir.Ref(value, f"{base.hint}.{node.attr}", base.origin, base.root)
            )
        if node.attr in ATTRIBUTE_PRIMITIVES:
            fn = ATTRIBUTE_PRIMITIVES[node.attr]
            hint = name or (f"{base.name}_{node.attr}" if isinstance(base, ir.Var) else node.attr)
            return self.lowering.bind(
                ir.Call(ir.Ref(fn, f"np.{fn.__name__}"), (base,), attribute=node.attr), hint, user
            )
        hint = name or (f"{base.name}_{node.attr}" if isinstance(base, ir.Var) else node.attr)
        if node.attr == "flat":
            raise refuse(
                node, "x.flat is not supported: index x.ravel() instead (x.ravel()[i])", self.locate
            )
        if node.attr in NONDIFF_ATTRIBUTES or not isinstance(base, ir.Var):
            return self.lowering.bind(ir.Attr(base, node.attr), hint, user)
        return self.lowering.bind(
            ir.Call(ir.Ref(runtime.field, "field"), (base, ir.Const(node.attr))), hint, user
        )


def _positional(
    fn: Any, args: tuple[ir.Atom, ...], kwargs: tuple[tuple[str, ir.Atom], ...]
) -> tuple[Any, ...]:
    """A primitive's keyword arguments that may carry a gradient, moved to their positions, and how
    each moved argument was written (``ir.Call.moved``).

    Rules are written per positional argument, so ``np.average(x, weights=w)`` becomes
    ``np.average(x, None, w)``, the gap filled with the parameter's literal default.
    Constant keywords (``axis=0``) stay as written.
    """
    wanted = {key for key, atom in kwargs if isinstance(atom, ir.Var)}
    if not wanted or registry.lookup(fn) is None:
        return args, kwargs, ()
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return args, kwargs, ()
    names = [p.name for p in params]
    last = max((names.index(key) for key in wanted if key in names), default=-1)
    given = dict(kwargs)
    moved = list(args)
    written: list[str | None] = []
    for param in params[len(args):last + 1]:
        if param.name in given:
            moved.append(given.pop(param.name))
            written.append(param.name)
        elif isinstance(param.default, (type(None), bool, int, float, str)) or (
            type(param.default) is tuple
            and all(isinstance(v, (type(None), bool, int, float, str)) for v in param.default)
        ):  # (``bounds=(-inf, inf)``: a tuple of literals)
            moved.append(ir.Const(param.default))
            written.append(None)
        else:
            return args, kwargs, ()
    return tuple(moved), tuple(given.items()), tuple(written)


@functools.cache
def _signature(fn: Any) -> inspect.Signature | None:
    """``fn``'s signature, read once (a call's arguments are bound to it by name), or ``None`` where
    it has none."""
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _may_hide(cls: type, attr: str, receiver: ir.Atom) -> bool:
    """Whether something may stand in front of the method ``attr`` of ``cls`` when it is read from
    the receiver: its own attribute of that name, one that the class's code stores (``self.attr =
    ...``), or a ``__getattribute__`` of the class's own."""
    if isinstance(receiver, ir.Ref) and attr in (getattr(receiver.obj, "__dict__", None) or {}):
        return True
    if inspect.getattr_static(cls, "__getattribute__") is not object.__getattribute__:
        return True
    for klass in cls.__mro__:
        for value in vars(klass).values():
            code = getattr(getattr(value, "__func__", value), "__code__", None)
            if code is not None and any(op.opname == "STORE_ATTR" and op.argval == attr
                                        for op in dis.get_instructions(code)):
                return True
    return False


def _cells_set(fn: Any) -> bool:
    """Whether every cell of ``fn``'s closure holds a value (one not set yet is Python's NameError
    at the call, which the call as it is raises; reading it raises ``ValueError``)."""
    try:
        for cell in fn.__closure__ or ():
            cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def _resolved(node: gast.expr, fn: Any) -> Any:
    """The object a name or dotted name ``node`` is where ``fn`` reads it (its closure, its module,
    builtins), or ``None``."""
    if isinstance(node, gast.Attribute):
        base = _resolved(node.value, fn)
        return getattr(base, node.attr, None) if isinstance(base, types.ModuleType) else None
    if not isinstance(node, gast.Name):
        return None
    found = ClosureScope(fn).get(node.id, _ABSENT) if inspect.isfunction(fn) else _ABSENT
    return getattr(builtins, node.id, None) if found is _ABSENT else found
