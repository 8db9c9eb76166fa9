"""The intermediate representation: A-normal form over single-assignment names.

Grammar (``check_ir`` verifies it)::

    function  ::= def NAME(param*): stmt* return atom
    stmt      ::= NAME = expr                     # Assign: one primitive application
                | NAME, NAME* = atom             # Unpack a tuple
                | effect                          # print/assert: forward only, no gradient
    expr      ::= call | pack | attr | atom
    call      ::= REF(atom*, NAME=atom*)          # the function is resolved at transform time
    pack      ::= (atom*) | [atom*]
    attr      ::= atom.NAME                       # a runtime attribute read (shape, ndim...)
    atom      ::= VAR | CONST | REF

Every name is bound once; evaluation order is the user's, left to right.
A ``Ref`` is an object the function reads from outside: a module, a function,
a global or closure value, or a builtin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gast


@dataclass(frozen=True)
class Var:
    """A local, single-assignment name."""

    name: str


@dataclass(frozen=True)
class Const:
    """A literal: a number, string, None, or a tuple/slice of those."""

    value: Any


@dataclass(frozen=True)
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


Atom = Var | Const | Ref


@dataclass(frozen=True)
class Call:
    fn: Ref
    args: tuple[Atom, ...]
    kwargs: tuple[tuple[str, Atom], ...] = ()


@dataclass(frozen=True)
class Pack:
    elts: tuple[Atom, ...]
    kind: str = "tuple"  # or "list"


@dataclass(frozen=True)
class Attr:
    value: Atom
    attr: str


Expr = Call | Pack | Attr | Var | Const | Ref


@dataclass(frozen=True)
class Line:
    """A line of the user's source, for comments and error messages."""

    filename: str
    lineno: int
    text: str


@dataclass(frozen=True)
class Assign:
    target: str
    value: Expr
    line: Line


@dataclass(frozen=True)
class Unpack:
    targets: tuple[str, ...]
    value: Atom
    line: Line


@dataclass(frozen=True)
class Effect:
    """A statement kept for its effect (print, assert); names in it already rewritten."""

    node: gast.stmt
    refs: tuple[Ref, ...]
    line: Line


Stmt = Assign | Unpack | Effect


@dataclass(frozen=True)
class Function:
    name: str
    params: tuple[str, ...]
    body: tuple[Stmt, ...]
    result: Atom
    result_line: Line
    fn: Any

    def names(self) -> set[str]:
        """Every local name the function binds."""
        names = set(self.params)
        for stmt in self.body:
            if isinstance(stmt, Assign):
                names.add(stmt.target)
            elif isinstance(stmt, Unpack):
                names.update(stmt.targets)
        return names


def check_ir(fn: Function) -> Function:
    """Verify the grammar above: atoms as operands, every name bound once and before use."""
    bound = set(fn.params)

    def use(atom: Any) -> None:
        assert isinstance(atom, (Var, Const, Ref)), f"not an atom: {atom!r}"
        assert not isinstance(atom, Var) or atom.name in bound, f"{atom.name} used before it is bound"

    def bind(name: str) -> None:
        assert name not in bound, f"{name} bound twice"
        bound.add(name)

    for stmt in fn.body:
        if isinstance(stmt, Assign):
            value = stmt.value
            if isinstance(value, Call):
                assert isinstance(value.fn, Ref)
                for atom in value.args + tuple(a for _, a in value.kwargs):
                    use(atom)
            elif isinstance(value, Pack):
                for atom in value.elts:
                    use(atom)
            elif isinstance(value, Attr):
                use(value.value)
            else:
                use(value)
            bind(stmt.target)
        elif isinstance(stmt, Unpack):
            use(stmt.value)
            for name in stmt.targets:
                bind(name)
    use(fn.result)
    return fn
