"""What reverse mode makes of one function (``Adjoint``), and what it asks the driver for
(``Derive``)."""

from __future__ import annotations

from typing import Any, Protocol

import gast

from ast_ad.core.records import field, record
from ast_ad.ir import nodes as ir
from ast_ad.ir.syntax import RefTable


@record(frozen=False, eq=False)
class Adjoint:
    """A function's forward and backward statements, ready to emit as one function or as a pair."""

    function: ir.Function
    argnums: tuple[int, ...]
    forward: list[gast.stmt]
    backward: list[gast.stmt]
    result: gast.expr
    seed: str
    grads: list[str]
    refs: RefTable
    callees: list[Adjoint] = field(default_factory=list)
    releasable: frozenset[str] = frozenset()  # arrays the forward pass binds once: see ``released``
    array_adjoints: frozenset[str] = frozenset()  # adjoint names of values that may be arrays
    # the function returns a list, tuple or dict (its adjoint adds by element)
    structured_result: bool = False
    # names of the function that certainly hold numbers (``kinds``)
    numbers: frozenset[str] = frozenset()
    # names the backward pass binds to adjoints (``fold.shared_factor``)
    adjoints: frozenset[str] = frozenset()
    # names of the function that hold real numbers of 64 bits or more, and those of them that are
    # floats (``kinds.wide_numbers``: ``fold.scaled_adjoints`` moves them)
    wide: frozenset[str] = frozenset()
    wide_floats: frozenset[str] = frozenset()
    # adjoints of arrays of real floats of a parameter's shape class, each with that parameter:
    # where one starts at zero, it starts as that parameter's zeros (``reverse_code._combined``)
    shaped_as: dict[str, str] = field(default_factory=dict)
    # the other adjoints of arrays of real floats of one shape class, each with the names of its
    # class that hold such arrays (``reverse_code._typed``)
    class_of: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # the differentiated parameters (their positions) that nothing flows back to: the backward
    # pass gives each of them zeros (``np.zeros_like(x)``), whatever the adjoint it is given
    zero_grads: frozenset[int] = frozenset()

    @property
    def params(self) -> tuple[str, ...]:
        return self.function.params

    def saved(self, backward: list[gast.stmt] | None = None,
              forward_pass: list[gast.stmt] | None = None) -> list[str]:
        """Forward names the backward statements (``backward``, else this adjoint's) read, in order
        of first use (``forward_pass``: the forward statements, else this adjoint's)."""
        statements = self.forward if forward_pass is None else forward_pass
        forward = set(self.params) | {n.id for s in statements for n in gast.walk(s)
                                      if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store)}
        seen: dict[str, None] = {}
        for s in self.backward if backward is None else backward:
            for n in gast.walk(s):
                if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load) and n.id in forward:
                    seen.setdefault(n.id)
        return list(seen)


class Derive(Protocol):
    """What reverse mode asks the driver (``transform``) for, about the functions a function calls:
    a callee's adjoint, and its IR (``analysis.activity.checkpoint_state`` reads a callee's
    body)."""

    def __call__(self, fn: Any, argnums: tuple[int, ...], shapes: tuple[int, ...], in_place: bool,
                 checkpoints: int | str | None) -> Adjoint: ...

    def normalized(self, fn: Any) -> ir.Function: ...
