"""Objects of the user's classes built inside the function: each attribute a variable of its own.

``m = Line(w, b)`` runs no constructor in the generated code. The object is known while the function
is lowered (``Made``), and each of its attributes is a variable that the lowering assigns:
``__init__`` and the methods are inlined with ``self`` standing for the object, a property's getter
too, a dataclass's fields are its arguments. So the derivative flows through the attributes as
through any variable::

    @dataclasses.dataclass                       def f(x):
    class Line:                                      m_w = x[0]
        w: float                                     m_b = x[1]
        b: float            f, lowered:              t = x[2]
        def __call__(self, t):                       m_w_times_t = m_w * t
            return self.w * t + self.b               out = m_w_times_t + m_b
                                                     return out
    def f(x):
        m = Line(x[0], x[1])
        return m(x[2])

The object itself is never made, so it cannot leave the function: returned, passed to a function
that is not inlined, put in a list, compared, it is refused where that happens. Python's semantics
of the object are kept: another name for it is the same object (its attributes are one set of
variables), a method that sets an attribute sets it for every name, and an array an attribute holds
is guarded as any other name's (``aliasing``). A class that takes over attribute access or
construction (``__getattr__``, ``__setattr__``, ``__new__``, ``__slots__``, a metaclass) is not
followed.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
from typing import Any

import gast

from ast_ad.core.records import field, record
from ast_ad.errors import LocatedError
from ast_ad.frontend.aliasing import Memory
from ast_ad.frontend.check import refuse
from ast_ad.frontend.frame import Frame, Lowering
from ast_ad.frontend.nested import Nesting
from ast_ad.frontend.parse import parse
from ast_ad.ir import nodes as ir
from ast_ad.ir import syntax

_serial = itertools.count()


@record(frozen=False, eq=False)
class Made:
    """An object of the user's class ``cls`` made inside the function: its attributes, each the IR
    name of a variable (mutable: a method or a branch may assign it)."""

    cls: type
    hint: str
    nesting: int  # how many branches and loops the making is in: an attribute is made at that level
    fields: dict[str, str] = field(default_factory=dict)
    serial: int = field(default_factory=lambda: next(_serial))

    def __repr__(self) -> str:
        return f"<{self.cls.__name__} object made inside the function>"


def made_of(atom: Any) -> Made | None:
    """The object an atom stands for, if it stands for one (``ir.Const(Made)``)."""
    return atom.value if isinstance(atom, ir.Const) and isinstance(atom.value, Made) else None


_TAKEN_OVER = (
    "__getattr__",
    "__getattribute__",
    "__setattr__",
    "__delattr__",
    "__new__",
    "__slots__",
    "__init_subclass__",
)


def followable(cls: Any, fn: Any) -> bool:
    """Whether objects of ``cls`` are followed (``Made``): a class of the differentiated function's
    module, made by ``type``, that leaves attribute access and construction to Python's defaults."""
    if (
        not isinstance(cls, type)
        or type(cls) is not type
        or cls.__module__ != getattr(fn, "__module__", None)
    ):
        return False
    if any(base is not object and base.__module__ in ("builtins", "numpy") for base in cls.__mro__):
        return False
    return not any(name in vars(base) for base in cls.__mro__[:-1] for name in _TAKEN_OVER)


class Objects:
    """The objects of ``normalize.Lowerer``, a part of it: it receives the frame, the lowerer, the
    memory model and the inlining (a method's body is inlined)."""

    def __init__(self, at: Frame, lowering: Lowering, memory: Memory, nested: Nesting) -> None:
        self.at, self.lowering = at, lowering
        self.locate = lowering.locate  # (where a node is, for errors)
        self.memory, self.nested = memory, nested

    def method_tree(self, fn: Any, node: gast.AST) -> gast.FunctionDef:
        """The tree of a method (or ``__init__``, a property's getter) of a followed class, its
        lines where they are in its file, to inline: names in it resolve in the module, as the
        method's own do."""
        cells = set(fn.__code__.co_freevars) - {"__class__"}
        if cells or fn.__globals__ is not getattr(self.at.source.fn, "__globals__", None):
            raise refuse(
                node,
                f"{fn.__qualname__} reads variables of a function around its class: define the "
                "class at module level",
                self.locate,
            )
        source = parse(fn)
        self.at.inlined.append(fn)
        tree: gast.FunctionDef = syntax.clone(source.tree)
        shift = source.line_offset - self.at.source.line_offset
        for n in syntax.walk(tree):
            for attr in ("lineno", "end_lineno"):
                if getattr(n, attr, None) is not None:
                    setattr(n, attr, getattr(n, attr) + shift)
        tree.decorator_list = []
        return tree

    # ---- making one ------------------------------------------------------------------------------
    def construct(self, cls: type, node: gast.Call, name: str | None) -> ir.Atom:
        """``cls(args)``: a ``Made`` object, its ``__init__`` (or a dataclass's fields) run on
        it."""
        made = Made(cls, name or cls.__name__.lower(), self.at.nesting + len(self.at.loops))
        self.at.made.append(made)
        atom = ir.Const(made)
        if dataclasses.is_dataclass(cls) and "__init__" in vars(cls) and _generated_init(cls):
            self.dataclass_fields(made, node)
        else:
            init = inspect.getattr_static(cls, "__init__", None)
            if init is object.__init__:
                if node.args or node.keywords:
                    raise refuse(node, f"{cls.__name__}() takes no arguments", self.locate)
            elif inspect.isfunction(init):
                self.call_method(atom, init, cls, node, None, False)
            else:
                raise refuse(
                    node,
                    f"{cls.__name__}'s __init__ is not a plain function ast_ad can read",
                    self.locate,
                )
        post = inspect.getattr_static(cls, "__post_init__", None)
        if dataclasses.is_dataclass(cls) and inspect.isfunction(post):
            self.call_method(
                atom,
                post,
                cls,
                gast.copy_location(gast.Call(func=node.func, args=[], keywords=[]), node),
                None,
                False,
            )
        return atom

    def dataclass_fields(self, made: Made, node: gast.Call) -> None:
        """A dataclass's generated ``__init__``: each field its argument, or its default."""
        fields = list(dataclasses.fields(made.cls))
        given = [f for f in fields if f.init]
        if len(node.args) > len(given):
            raise refuse(
                node,
                f"{made.cls.__name__} takes {len(given)} fields, given {len(node.args)}",
                self.locate,
            )
        values = dict(zip((f.name for f in given), node.args, strict=False))
        for kw in node.keywords:
            if kw.arg is None or kw.arg not in {f.name for f in given} or kw.arg in values:
                raise refuse(
                    node, f"{made.cls.__name__} has no field {kw.arg!r} to pass once", self.locate
                )
            values[kw.arg] = kw.value
        for f in fields:
            if f.name in values:
                atom = self.lowering.expr(values[f.name])
            elif f.default is not dataclasses.MISSING:
                atom = ir.Const(f.default)
            elif f.default_factory is not dataclasses.MISSING and f.default_factory in (list, dict):
                atom = ir.Const(f.default_factory())
            else:
                raise refuse(node, f"{made.cls.__name__} needs its field {f.name!r}", self.locate)
            self.set_field(made, f.name, atom, node)

    # ---- its attributes --------------------------------------------------------------------------
    def set_field(self, made: Made, attr: str, value: ir.Atom, node: gast.AST) -> None:
        """``obj.attr = value``: the attribute's variable assigned (made, the first time)."""
        if isinstance(value, ir.Const) and isinstance(value.value, list):
            value = ir.Var(self.fresh_list(value))
        if attr not in made.fields:
            if self.at.nesting + len(self.at.loops) > made.nesting:
                raise refuse(
                    node,
                    f"the attribute {attr} of {made.hint} is first set in a branch or a loop: set "
                    "it "
                    f"where the object is made (in __init__, before any if), so that it exists on "
                    "every path",
                    self.locate,
                )
            made.fields[attr] = self.at.namer.fresh(f"{made.hint}_{attr}")
            self.at.mutable.add(made.fields[attr])
            self.at.field_labels[made.fields[attr]] = f"{made.hint}.{attr}"
        target = made.fields[attr]
        if isinstance(value, ir.Const) and isinstance(value.value, Made):
            raise refuse(
                node,
                "an object held in another object's attribute is not followed yet: keep it in a "
                "variable of its own",
                self.locate,
            )
        self.at.body.append(ir.Assign(target, value, self.at.line))
        if isinstance(value, ir.Var):
            self.memory.share(target, value.name, alias=True)

    def fresh_list(self, value: ir.Const) -> str:
        made: str = self.at.namer.fresh("items")
        self.at.body.append(ir.Assign(made, value, self.at.line))
        return made

    def attribute(self, made: Made, node: gast.Attribute, name: str | None, user: bool) -> ir.Atom:
        """``obj.attr``: its variable, a property's getter inlined, or the class's own value."""
        if node.attr in made.fields:
            return ir.Var(made.fields[node.attr])
        found = inspect.getattr_static(made.cls, node.attr, None)
        if isinstance(found, property) and inspect.isfunction(found.fget):
            call = gast.copy_location(gast.Call(func=node, args=[], keywords=[]), node)
            return self.call_method(ir.Const(made), found.fget, made.cls, call, name, user)
        if found is not None and not inspect.isfunction(found) \
                and not isinstance(found, (classmethod, staticmethod, property)):
            value = getattr(made.cls, node.attr)
            if isinstance(value, (int, float, bool, str, type(None))):
                return ir.Const(value)
            return ir.Ref(value, f"{made.cls.__name__}.{node.attr}")
        if found is None:
            raise refuse(
                node,
                f"the {made.cls.__name__} object has no attribute {node.attr!r} here (set it in "
                "__init__)",
                self.locate,
            )
        raise refuse(
            node,
            f"{made.cls.__name__}.{node.attr} read as a value is not followed yet: call it where "
            f"it is read ({made.hint}.{node.attr}(...))",
            self.locate,
        )

    # ---- its methods -----------------------------------------------------------------------------
    def method_call(self, made: Made, node: gast.Call, name: str | None, user: bool) -> ir.Atom:
        """``obj.m(args)`` (or ``obj(args)``, ``__call__``): the method inlined, ``self`` the
        object."""
        attr = node.func.attr if isinstance(node.func, gast.Attribute) else "__call__"
        # the object's own attribute, which Python calls instead of a method
        if attr in made.fields:
            raise refuse(
                node,
                f"{made.hint}.{attr} is an attribute of the object, which Python calls instead of "
                f"{made.cls.__name__}'s method: call the function it holds by its own name",
                self.locate,
            )
        found = inspect.getattr_static(made.cls, attr, None)
        if isinstance(found, staticmethod) and inspect.isfunction(found.__func__):
            return self.inline_method(
                found.__func__, self.method_tree(found.__func__, node), node, name, user
            )
        if isinstance(found, classmethod) and inspect.isfunction(found.__func__):
            return self.class_call(made.cls, found.__func__, node, name, user)
        if not inspect.isfunction(found):
            raise refuse(
                node, f"{made.cls.__name__} has no method {attr!r} ast_ad can read", self.locate
            )
        owner = next(c for c in made.cls.__mro__ if attr in vars(c))
        return self.call_method(ir.Const(made), found, owner, node, name, user)

    def call_method(
        self, receiver: ir.Atom, fn: Any, owner: type, node: gast.Call, name: str | None, user: bool
    ) -> ir.Atom:
        """``fn(receiver, *node's arguments)`` inlined: ``owner`` is the class that defines ``fn``
        (for ``super()`` inside it)."""
        held, parent = self.lowering.hidden("self"), self.lowering.hidden("super")
        self.at.env[held] = receiver
        made = made_of(receiver)
        if made is not None:
            self.at.env[parent] = ir.Const(Super(made, owner))
        call = gast.copy_location(gast.Call(func=node.func, args=[_load(held), *node.args],
                                            keywords=node.keywords), node)
        try:
            tree = _with_super(self.method_tree(fn, node), parent)
            # (Base_init: its locals named after it)
            tree.name = f"{owner.__name__}_{fn.__name__.strip('_')}"
            # ``__init__``: returns None
            if not tree.body or not isinstance(tree.body[-1], gast.Return):
                tree.body = [
                    *tree.body,
                    gast.copy_location(
                        gast.Return(value=gast.Constant(value=None, kind=None)),
                        tree.body[-1] if tree.body else tree,
                    ),
                ]
            return self.inline_method(fn, tree, call, name, user)
        finally:
            self.at.env.pop(held, None)
            self.at.env.pop(parent, None)

    def inline_method(
        self, fn: Any, tree: gast.FunctionDef, call: gast.Call, name: str | None, user: bool
    ) -> ir.Atom:
        """The method ``fn`` (``tree``, its source) inlined at ``call``: in its own scope, where the
        names its body does not bind are its module's (``Nesting.inline_in_scope``)."""
        return self.nested.inline_in_scope(fn, tree, call, name, user)

    def class_call(
        self, cls: type, fn: Any, node: gast.Call, name: str | None, user: bool
    ) -> ir.Atom:
        """``Cls.make(args)`` of a classmethod: inlined, ``cls`` the class."""
        held = self.lowering.hidden("cls")
        self.at.env[held] = ir.Ref(cls, cls.__name__)
        call = gast.copy_location(gast.Call(func=node.func, args=[_load(held), *node.args],
                                            keywords=node.keywords), node)
        try:
            return self.inline_method(fn, self.method_tree(fn, node), call, name, user)
        finally:
            self.at.env.pop(held, None)

    def super_method(self, parent: Super, node: gast.Call, name: str | None, user: bool) -> ir.Atom:
        """``super().m(args)`` in a method of ``parent.owner``: the next class's ``m`` in the
        object's order of classes, with the same object as ``self``."""
        attr = node.func.attr if isinstance(node.func, gast.Attribute) else ""
        mro = parent.made.cls.__mro__
        owner = next((c for c in mro[mro.index(parent.owner) + 1:] if attr in vars(c)), None)
        if owner is object and attr == "__init__":
            return ir.Const(None)
        found = vars(owner).get(attr) if owner is not None else None
        if owner is None or not inspect.isfunction(found):
            raise refuse(node, f"super().{attr} is not a method ast_ad can read", self.locate)
        return self.call_method(ir.Const(parent.made), found, owner, node, name, user)


@record(frozen=False, eq=False)
class Super:
    """``super()`` in a method of ``owner`` inlined for the object ``made``."""

    made: Made
    owner: type


def _generated_init(cls: type) -> bool:
    """Whether a dataclass's ``__init__`` is the one ``dataclasses`` wrote (not the class's own)."""
    init = vars(cls).get("__init__")
    try:
        return getattr(getattr(init, "__code__", None), "co_filename", "") != inspect.getfile(cls)
    except TypeError:
        return True


def _with_super(tree: gast.FunctionDef, parent: str) -> gast.FunctionDef:
    """``tree`` with each ``super()`` read as the name ``parent`` (a ``Super`` the lowering
    holds)."""
    for node in gast.walk(tree):
        for name, value in gast.iter_fields(node):
            if isinstance(value, gast.Call) and _is_super(value):
                setattr(node, name, gast.copy_location(_load(parent), value))
            elif isinstance(value, list):
                value[:] = [
                    gast.copy_location(_load(parent), v)
                    if isinstance(v, gast.Call) and _is_super(v)
                    else v
                    for v in value
                ]
    return tree


def _is_super(node: gast.Call) -> bool:
    return (
        isinstance(node.func, gast.Name)
        and node.func.id == "super"
        and not node.args
        and not node.keywords
    )


def _load(name: str) -> gast.Name:
    return gast.Name(id=name, ctx=gast.Load(), annotation=None, type_comment=None)


def escaped(function: ir.Function) -> None:
    """Refuse an object made inside the function that is used as a value: it is never made."""
    for stmt in ir.walk(function.body):
        for atom in ir.atoms_of(stmt):
            made = made_of(atom)
            if made is not None:
                raise LocatedError(
                    f"{made.hint}, an object of {made.cls.__name__} made inside the function, is "
                    "used here as a value (passed to a function ast_ad does not inline, held in a "
                    "list, compared, or printed): ast_ad follows such objects through their "
                    "attributes and methods; pass the attributes instead",
                    stmt.line.filename,
                    stmt.line.lineno,
                    stmt.line.text,
                )
    made = made_of(function.result)
    if made is not None:
        raise LocatedError(
            f"the function returns {made.hint}, an object of {made.cls.__name__} made inside it: "
            "return its attributes (a tuple or a dict of them) instead",
            function.result_line.filename,
            function.result_line.lineno,
            function.result_line.text,
        )
