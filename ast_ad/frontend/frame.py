"""What the parts of one function's lowering share (``normalize.Lowerer`` and the parts it is made
of): ``Frame``, the place the lowering is at and the tables it fills, and ``Lowering``, what the
parts ask of the lowerer itself.

The lowerer reads statements and binds names; its parts each do one job (``aliasing.Memory``: what
may share memory; ``nested``: functions inlined and transformations written in the body;
``objects``: the user's classes; ``lower_control``: branches and loops; ``lower_exprs``: operators,
subscripts, literals and comprehensions; ``lower_writes``: writes, appends and calls that change an
argument; ``lower_calls``: what a call calls). Each part receives, when it is made, this frame, the
lowerer as a ``Lowering`` and the parts below it that it calls; it keeps the tables it reads under
their own names, so a part can be read, and made in a test, without the others.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import gast

from ast_ad.frontend.parse import Source
from ast_ad.ir import nodes as ir
from ast_ad.ir.naming import Namer

# the questions about another user function that lowering it answers, handed down to the parts
# (``normalize.param_writes``, ``normalize.return_view``): the parameters it may change in place,
# and the view of a parameter it returns
ParamWrites = Callable[[Any], frozenset[str]]
ReturnView = Callable[[Any], tuple[int, ir.Call | None] | None]


class Frame:
    """The state of one function's lowering: where it is (the statement's line, the block being
    filled, how deep in branches and loops, what is live after the statement, the source being
    read: an inlined helper of another file is read at its own lines) and the tables every part
    reads (what each user name holds, the names bound, the loops around, the functions and objects
    known). The parts read the tables through the names they keep and never bind them again; what
    changes as the lowering moves (``line``, ``body``, ``nesting``, ``live``...) they read here."""

    def __init__(
        self, source: Source, closure: dict[str, Any], bound: tuple[set[str], dict[int, set[str]]]
    ) -> None:
        self.source = source
        self.fn = source.fn
        self.closure = closure
        self.locals, self.appending = bound
        # the names Python holds as locals (not those ``structure`` makes)
        self.user_locals = set(self.locals)
        # ``prepare``'s ``None`` for a name not bound yet, by statement id
        self.unbound: dict[int, str] = {}
        self.namer = Namer(reserved=self.locals)
        self.env: dict[str, ir.Atom] = {}
        self.body: list[ir.Stmt] = []
        self.line = ir.Line(*source.where(source.tree))
        self.owner: dict[str, str] = {}  # IR name -> the user variable it holds
        self.mutable: set[str] = set()
        self.local_functions: dict[str, gast.FunctionDef | gast.Lambda] = {}
        self.inlining: list[str] = []
        # how many blocks (branches, loop bodies) the statement being lowered is in
        self.nesting = 0
        # user names that an if or a loop assigns: their IR names get mutable
        self.changing: set[str] = set()
        self.params: dict[str, str] = {}  # IR name -> parameter, for the parameters' own values
        self.appends_left: dict[str, int] = {}  # user name -> appends to it not lowered yet
        self.loops: list[set[str]] = []  # per enclosing loop, the names it appends to
        # per enclosing ``for`` loop, the names its target binds (bound by the loop alone)
        self.loop_targets: list[set[str]] = []
        # per enclosing loop, the names it may bind to a shared object
        self.loop_shared: list[set[str]] = []
        # per enclosing loop, the names it binds to another's object
        self.loop_rebinds: list[set[str]] = []
        # helpers of other files, inlined (``CallLowering``)
        self.foreign_sources: dict[int, Source] = {}
        # the globals of the helpers of other modules being inlined, innermost last: their names
        # resolve there; what they read that the caller's module does not hold is watched
        # (``foreign_reads``: module dict, name, object), a derivative reading it is stale once it
        # changes
        self.scopes: list[Any] = []  # (a module's dict, or a closure's ``ClosureScope``)
        # id of a function of the caller's passed to another -> (it, the scopes it reads its names
        # in) (``Nesting.inline``)
        self.function_scopes: dict[int, tuple[Any, list[Any]]] = {}
        self.foreign_reads: list[tuple[dict[str, Any], str, Any]] = []
        # the functions whose bodies are lowered in place (``INLINED``)
        self.inlined: list[Any] = []
        # name -> (function, args, keywords) of a functools.partial
        self.partials: dict[str, tuple[Any, ...]] = {}
        # IR name -> the user class it was made by (``m = Model(w)``)
        self.instances: dict[str, type] = {}
        # ``fs = [lambda t: ..., g]``: the functions by name
        self.function_lists: dict[str, list[Any]] = {}
        # a list or tuple of objects made here, written as one (``layers = [Layer(a), Layer(b)]``):
        # looped over, unrolled (``for layer in layers``), its objects followed
        self.object_lists: dict[str, list[Any]] = {}
        # the objects of the user's classes made here (``objects``)
        self.made: list[Any] = []
        # an attribute's variable -> ``m.w`` (``Memory.variables_in``)
        self.field_labels: dict[str, str] = {}
        self.carried: list[dict[str, ir.Atom]] = []  # (``Memory.carry``)
        self.serial = 0  # for ``hidden`` names
        # IR name -> "list", "tuple", "dict" or "set", where that is known (``container_kind``)
        self.kinds: dict[str, str] = {}
        # what is read after each statement (``live_after``)
        self.liveness: dict[int, frozenset[str]] = {}
        self.exact: str | None = None  # the name the expression being lowered binds (``expr``)
        self.temps = 0  # temporaries named so far (``next_temp``)
        self.live: frozenset[str] | None = None  # that, for the statement being lowered, if known
        # the names the statement being lowered binds (``_rebound``)
        self.rebinding: frozenset[str] = frozenset()


class ClosureScope:
    """The names a closure of the user's reads where it is inlined (``scopes``): its cells, then its
    module's globals. Read as a module's dict is (``in``, ``[name]``, ``get``), each time as it is
    now: a watch on a name read here (``foreign_reads``) sees a cell set again (``nonlocal``)."""

    __slots__ = ("fn", "cells")

    def __init__(self, fn: Any):
        self.fn = fn
        self.cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True))

    def __contains__(self, name: str) -> bool:
        return name in self.cells or name in self.fn.__globals__

    def __getitem__(self, name: str) -> Any:
        if name in self.cells:
            return self.cells[name].cell_contents
        return self.fn.__globals__[name]

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except (KeyError, ValueError):  # (ValueError: an empty cell)
            return default


def container_kind(at: Frame, atom: ir.Atom) -> str | None:
    """``"list"``, ``"tuple"``, ``"dict"`` or ``"set"`` where ``atom`` is known to be one (made
    here: a display, a comprehension, a call of the type; ``Frame.kinds``), else ``None``."""
    if isinstance(atom, ir.Const) and isinstance(atom.value, (list, tuple, dict)):
        return type(atom.value).__name__
    if isinstance(atom, ir.Const) and isinstance(atom.value, (set, frozenset)):
        return "set"
    return (at.kinds.get(atom.name) or None) if isinstance(atom, ir.Var) else None


class Lowering(Protocol):
    """What the parts ask of the lowerer: to lower an expression or a statement (the recursion: an
    inlined call lowers its body), to bind a value to a new name, and where a node is."""

    def expr(
        self, node: gast.expr, name: str | None = None, user: bool = False, exact: bool = False
    ) -> ir.Atom: ...

    def stmt(self, node: gast.stmt) -> None: ...

    def block(self, statements: list[gast.stmt]) -> tuple[ir.Stmt, ...]: ...

    def bind(
        self, value: ir.Expr, hint: str, user: bool = False, holds: bool = True
    ) -> ir.Var: ...

    def name(self, node: gast.Name) -> ir.Atom: ...

    def assign(self, target: gast.expr, value: gast.expr) -> None: ...

    def bind_target(self, target: gast.expr, value: ir.Atom) -> None: ...

    def prepare(self, node: gast.stmt) -> None: ...

    def operator(self, fn: Any) -> ir.Ref: ...

    def is_local(self, node: gast.expr) -> bool: ...

    def static(self, node: gast.expr) -> Any: ...

    def hidden(self, base: str) -> str: ...

    def helper_global(self, node: gast.Name) -> ir.Atom: ...

    def mangled(self, attr: str) -> str: ...

    def line_of(self, node: gast.AST) -> ir.Line: ...

    def locate(self, node: gast.AST) -> tuple[str, int, str]: ...
