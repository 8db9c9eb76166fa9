"""The intermediate representation: A-normal form over single-assignment names.

Grammar (``check_ir`` verifies it)::

    function  ::= def NAME(param*): stmt* return atom
    stmt      ::= NAME = expr                     # Assign: one primitive application
                | NAME, NAME* = atom             # Unpack a tuple
                | NAME.append(atom)               # Append to a list
                | NAME = NAME.pop()               # Pop from a list (forward mode only)
                | NAME[atom] = atom               # SetItem: written in place (made by passes)
                | if VAR: stmt* else: stmt*       # If
                | for NAME in atom: stmt*         # For over a range (other iterables are indexed)
                | while raw: stmt*                # While
                | break                           # only last in a loop body
                | effect                          # print/assert: forward only, no gradient
                | printed                         # syntax a pass wrote itself, in its own output
                | mark                            # a pass's note to itself, resolved before print
    expr      ::= call | pack | attr | raw | atom
    call      ::= REF(atom*, NAME=atom*)          # the function is resolved at transform time
    pack      ::= (atom*) | [atom*] | {CONST: atom*}
    attr      ::= atom.NAME                       # a runtime attribute read (shape, ndim...)
    raw       ::= a Python expression kept as written, with no gradient (tests, and/or)
    atom      ::= VAR | CONST | REF

In straight-line code every name is bound once, and evaluation order is the
user's, left to right. A user variable assigned inside an ``if`` or a loop
keeps one *mutable* name for the whole function (``Function.mutable``); the
reverse pass restores such a name's old value where it needs it.
A ``Ref`` is an object the function reads from outside: a module, a function,
a global or closure value, or a builtin.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import gast

from ast_ad.core.records import record


@record
class Var:
    """A local, single-assignment name."""

    name: str


@record
class Const:
    """A literal: a number, string, None, or a tuple/slice of those."""

    value: Any


@record
class Ref:
    """An object from outside the function, with the name the user reached it by."""

    obj: Any
    hint: str
    origin: tuple[str, str] | None = None  # ("global" | "closure", name) where it was read from
    root: Any = None  # the object read at ``origin`` (``numpy`` for ``np.sin``)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ref) and other.obj is self.obj and other.hint == self.hint

    def __hash__(self) -> int:
        return hash((id(self.obj), self.hint))


@record
class CalleeRef:
    """What a ``Ref`` holds where generated code calls another function's generated code: the
    forward or backward function of a callee's ``Adjoint`` (``part`` "fwd" or "bwd"), or forward
    mode's ``Tangent`` ("jvp")."""

    adjoint: Any
    part: str


Atom = Var | Const | Ref


@record
class Call:
    fn: Ref
    args: tuple[Atom, ...]
    kwargs: tuple[tuple[str, Atom], ...] = ()
    # the last positional arguments as the user wrote them: by keyword, or (``None``) not at all,
    # the parameter's literal default filling the gap; moved to their positions for the rules
    # (``lower_calls._positional``), and printed back as written
    moved: tuple[str | None, ...] = ()
    # the user wrote the call as this attribute of its one argument (``x.T``)
    attribute: str | None = None


@record
class Pack:
    elts: tuple[Atom, ...]
    kind: str = "tuple"  # or "list", or "dict" (with ``keys``, constants, one per element)
    keys: tuple[Any, ...] = ()

    def slot(self, k: int) -> Any:
        """What indexes element ``k`` of the packed value: its key for a dict, else its position."""
        return self.keys[k] if self.kind == "dict" else k


@record
class Attr:
    value: Atom
    attr: str


@record
class Raw:
    """An expression kept as the user wrote it (names rewritten), evaluated forward only."""

    node: gast.expr
    refs: tuple[Ref, ...]


Expr = Call | Pack | Attr | Raw | Var | Const | Ref


@record
class Line:
    """A line of the user's source, for comments and error messages."""

    filename: str
    lineno: int
    text: str

    def where(self) -> str:
        """``file:line``, as the run-time checks of generated code name the user's line."""
        return f"{self.filename}:{self.lineno}"

    def comment(self, home: str) -> str:
        """The comment generated code shows above this line's statements: ``line N: text``, and the
        file's name first where it is not ``home``, the differentiated function's (a helper of
        another file, inlined)."""
        where = (
            ""
            if self.filename == home or not self.filename
            else f"{self.filename.rsplit('/', 1)[-1]} "
        )
        return f"{where}line {self.lineno}: {self.text.strip()}"


# a statement a transformation adds that stands for no line of the user's (no comment)
NOWHERE = Line("", 0, "")


@record
class Assign:
    target: str
    value: Expr
    line: Line


@record
class Unpack:
    targets: tuple[str, ...]
    value: Atom
    line: Line


@record
class Effect:
    """A statement kept for its effect (print, assert); names in it already rewritten."""

    node: gast.stmt
    refs: tuple[Ref, ...]
    line: Line


@record
class Append:
    target: str
    value: Atom
    line: Line


@record
class Pop:
    """``target = source.pop()`` (``target`` None: the value is dropped); a tape's read in generated
    code."""

    target: str | None
    source: str
    line: Line


@record
class SetItem:
    """``target[index] = value``, in place: made by a transformation where it has shown that no
    other name sees the change (a loop's own copy of an array, ``analysis.in_place_writes``); the
    lowering makes ``assign_item``."""

    target: str
    index: Atom
    value: Atom
    line: Line


@record
class If:
    test: Atom
    body: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...]
    line: Line


@record
class For:
    target: str
    iter: Atom
    body: tuple[Stmt, ...]
    line: Line


@record
class While:
    test: Raw
    body: tuple[Stmt, ...]
    line: Line


@record
class Break:
    line: Line


@record
class Comment:
    """``# text``, above what follows: a transformation's note to the reader of its output (reverse
    mode's line of the user's above each block, why a loop is or is not checkpointed). It computes
    and reads nothing."""

    text: str
    line: Line = NOWHERE


@record(eq=False)
class Mark:
    """A transformation's note to itself in its output, resolved before the output is printed
    (reverse mode's restore marks, ``saving.Restore``): it computes nothing, reads nothing, and no
    printer writes one."""

    data: Any
    line: Line = NOWHERE


Stmt = Assign | Unpack | Effect | Append | Pop | SetItem | If | For | While | Break | Comment | Mark


def walk(body: tuple[Stmt, ...]) -> Iterator[Stmt]:
    """Every statement in ``body``, nested ones included, in program order."""
    for stmt in body:
        yield stmt
        if type(stmt) is If:
            yield from walk(stmt.body)
            yield from walk(stmt.orelse)
        elif type(stmt) is For or type(stmt) is While:
            yield from walk(stmt.body)


def binds_none(stmt: Stmt) -> bool:
    """Whether ``stmt`` is ``x = None``: the normalizer's binding of a name before the loop or
    branch that binds it (or the user's own)."""
    return isinstance(stmt, Assign) and isinstance(stmt.value, Const) and stmt.value.value is None


def loop_free(body: tuple[Stmt, ...]) -> bool:
    """Whether ``body`` holds no loop: then a fact that flows forward (or backward) through its
    statements in order reaches its fixpoint in one pass, each name bound before anything reads
    it."""
    return not any(type(stmt) is For or type(stmt) is While for stmt in walk(body))


def with_body(function: Function, body: tuple[Stmt, ...] | list[Stmt],
              mutable: frozenset[str] | None = None) -> Function:
    """``function`` with ``body`` in place of its own (and ``mutable``, where given): what an
    IR-to-IR pass returns."""
    return Function(
        function.name,
        function.params,
        tuple(body),
        function.result,
        function.result_line,
        function.fn,
        function.mutable if mutable is None else mutable,
        function.users,
        function.inits,
    )


def mapped(body: tuple[Stmt, ...], each: Callable[[Stmt], list[Stmt]]) -> tuple[Stmt, ...]:
    """``body`` with every statement, nested ones included, replaced by what ``each`` gives for it
    (a branch or a loop is given with its blocks mapped already): an IR-to-IR pass that changes a
    few statements."""
    out: list[Stmt] = []
    for stmt in body:
        if blocks(stmt):
            stmt = with_blocks(stmt, [mapped(block, each) for block in blocks(stmt)])
        out += each(stmt)
    return tuple(out)


def with_blocks(stmt: Stmt, new: list[tuple[Stmt, ...]] | list[list[Stmt]]) -> Stmt:
    """``stmt``, a branch or a loop, with the blocks ``new`` in place of its own (in the order
    ``blocks`` gives)."""
    if type(stmt) is If:
        return If(stmt.test, tuple(new[0]), tuple(new[1]), stmt.line)
    if type(stmt) is For:
        return For(stmt.target, stmt.iter, tuple(new[0]), stmt.line)
    assert type(stmt) is While, stmt
    return While(stmt.test, tuple(new[0]), stmt.line)


def shallow(body: list[Stmt] | tuple[Stmt, ...]) -> Iterator[Stmt]:
    """The statements of ``body`` and of its branches, in order, not of its loops (a loop's body
    runs as a step of its own: a ``break`` there, or an accumulation a loop may batch, is that
    loop's)."""
    for stmt in body:
        yield stmt
        if type(stmt) is If:
            yield from shallow(stmt.body)
            yield from shallow(stmt.orelse)


def functional(function: Function) -> Function:
    """``function`` with each ``SetItem`` as the assignment it stands for, ``y = assign_item(y, i,
    v)``: the same values, as no other name sees ``y`` (``SetItem``), in the form the analyses read
    (which find the write in place again where it is one, ``analysis.in_place_writes``). A
    transformation reads IR through this."""
    if not any(type(stmt) is SetItem for stmt in walk(function.body)):
        return function
    from ast_ad.runtime import assign_item

    def written(stmt: Stmt) -> list[Stmt]:
        if type(stmt) is SetItem:
            call = Call(Ref(assign_item, "assign_item"), (Var(stmt.target), stmt.index, stmt.value))
            return [Assign(stmt.target, call, stmt.line)]
        return [stmt]
    changed = {stmt.target for stmt in walk(function.body) if type(stmt) is SetItem}
    return Function(function.name, function.params, mapped(function.body, written), function.result,
                    function.result_line, function.fn, function.mutable | changed, function.users)


def call_of(stmt: Assign) -> Call:
    """The call a statement assigns (for code that has already checked that it is one)."""
    if not isinstance(stmt.value, Call):
        raise TypeError(f"expected a call, got {stmt.value!r}")
    return stmt.value


def atoms_of(stmt: Stmt) -> tuple[Atom, ...]:
    """The atoms ``stmt`` itself reads (not those of nested statements; a raw test's names are not
    atoms)."""
    # (the most of them: first)
    if type(stmt) is Assign and type(stmt.value) is Call and not stmt.value.kwargs:
        return stmt.value.args
    if isinstance(stmt, Assign):
        value = stmt.value
        if isinstance(value, Call):
            return value.args + tuple(a for _, a in value.kwargs)
        if isinstance(value, Pack):
            return value.elts
        if isinstance(value, Attr):
            return (value.value,)
        return () if isinstance(value, Raw) else (value,)
    if isinstance(stmt, (Unpack, Append)):
        return (stmt.value,)
    if isinstance(stmt, Pop):
        return (Var(stmt.source),)
    if isinstance(stmt, SetItem):
        return (Var(stmt.target), stmt.index, stmt.value)
    if isinstance(stmt, If):
        return (stmt.test,)
    if isinstance(stmt, For):
        return (stmt.iter,)
    return ()


def reads_of(stmt: Stmt) -> list[str]:
    """The local names ``stmt`` itself reads (not its nested statements'): its atoms', and those of
    an expression kept as written (a raw value, a ``while`` test, an effect)."""
    if type(stmt) is Assign and type(stmt.value) is Call:  # (the most of them: first)
        return [a.name for a in atoms_of(stmt) if type(a) is Var]
    names = [a.name for a in atoms_of(stmt) if isinstance(a, Var)]
    node = (
        stmt.value.node
        if isinstance(stmt, Assign) and isinstance(stmt.value, Raw)
        else stmt.test.node
        if isinstance(stmt, While)
        else stmt.node
        if isinstance(stmt, Effect)
        else None
    )
    # (not the markers of outside objects: ``§0``, nor a comprehension's own names)
    if node is not None:
        own = own_loads(node)
        names += [n.id for n in gast.walk(node) if type(n) is gast.Name and not n.id.startswith("§")
                  and type(n.ctx) is not gast.Store and id(n) not in own]
    return names


COMPREHENSIONS = (gast.ListComp, gast.SetComp, gast.GeneratorExp, gast.DictComp)


def own_loads(node: gast.AST) -> set[int]:
    """The ids of the names in ``node`` that read a binding of a comprehension or a lambda inside
    it: in ``all([v > 0 for v in x])`` the ``v`` of ``v > 0`` is the comprehension's, not the
    function's."""
    own: set[int] = set()
    _own_loads(node, frozenset(), own)
    return own


def _own_loads(node: gast.AST, bound: frozenset[str], own: set[int]) -> None:
    if isinstance(node, gast.Name):
        if isinstance(node.ctx, gast.Load) and node.id in bound:
            own.add(id(node))
        return
    if isinstance(node, COMPREHENSIONS):
        inner = bound
        for k, generator in enumerate(node.generators):
            # the first runs in the outer scope
            _own_loads(generator.iter, bound if k == 0 else inner, own)
            inner = inner | {n.id for n in gast.walk(generator.target) if isinstance(n, gast.Name)}
            for test in generator.ifs:
                _own_loads(test, inner, own)
        for part in ("elt", "key", "value"):
            if hasattr(node, part):
                _own_loads(getattr(node, part), inner, own)
        return
    if isinstance(node, gast.Lambda):
        for default in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            _own_loads(default, bound, own)
        params = {n.id for n in gast.walk(node.args) if isinstance(n, gast.Name)}
        _own_loads(node.body, bound | params, own)
        return
    for child in gast.iter_child_nodes(node):
        _own_loads(child, bound, own)


def reads_in(body: list[Stmt] | tuple[Stmt, ...]) -> set[str]:
    """The local names ``body`` reads, its nested statements included."""
    return {n for s in walk(tuple(body)) for n in reads_of(s)}


def blocks(stmt: Stmt) -> tuple[tuple[Stmt, ...], ...]:
    """The statement lists nested directly in ``stmt``."""
    if type(stmt) is If:
        return (stmt.body, stmt.orelse)
    if type(stmt) is For or type(stmt) is While:
        return (stmt.body,)
    return ()


def defined(stmt: Stmt) -> tuple[str, ...]:
    """The names ``stmt`` itself binds (not those of nested statements)."""
    if isinstance(stmt, Assign):
        return (stmt.target,)
    if isinstance(stmt, Unpack):
        return stmt.targets
    if isinstance(stmt, For):
        return (stmt.target,)
    if isinstance(stmt, Pop) and stmt.target is not None:
        return (stmt.target,)
    return ()


@record
class Function:
    name: str
    params: tuple[str, ...]
    body: tuple[Stmt, ...]
    result: Atom
    result_line: Line
    fn: Any
    mutable: frozenset[str] = frozenset()
    # the names of the user's own variables (generated code keeps them)
    users: frozenset[str] = frozenset()
    # names every binding of which to None is the lowering's, before the branch or loop that binds
    # them, which nothing but a check reads (``analysis.unbound``: a read that may come first raises
    # Python's UnboundLocalError): no value they hold is that None
    inits: frozenset[str] = frozenset()

    def names(self) -> set[str]:
        """Every local name the function binds."""
        names = set(self.params)
        for stmt in walk(self.body):
            names.update(defined(stmt))
        return names


def check_ir(fn: Function) -> Function:
    """Verify the grammar above: atoms as operands, names bound before use, once unless mutable."""
    bound = set(fn.params)

    def use(atom: Any) -> None:
        assert isinstance(atom, (Var, Const, Ref)), f"not an atom: {atom!r}"
        assert not isinstance(atom, Var) or atom.name in bound, (
            f"{atom.name} used before it is bound"
        )

    def bind(name: str) -> None:
        assert name not in bound or name in fn.mutable, f"{name} bound twice"
        bound.add(name)

    _check_block(fn.body, False, use, bind)
    use(fn.result)
    return fn


def _check_block(body: tuple[Stmt, ...], in_loop: bool, use: Any, bind: Any) -> None:
    for k, stmt in enumerate(body):
        for atom in atoms_of(stmt):
            use(atom)
        if isinstance(stmt, Break):
            assert in_loop and k == len(body) - 1, "break must be last in a loop body"
        for name in defined(stmt):
            bind(name)
        for nested in blocks(stmt):
            _check_block(nested, in_loop or isinstance(stmt, (For, While)), use, bind)
