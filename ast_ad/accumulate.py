"""The adjoint of each name in the backward pass, and how contributions reach it.

An adjoint is named after its value (``x_bar``). Its first contribution assigns it, and later ones add
to it with a new value (``x_bar = x_bar + g``), so no array a caller owns is ever written; a list,
tuple or dict adds element by element (``add_adjoints``), never with ``+``, which would join them. An
adjoint that branches and loop steps add to starts at its zero at the top of the backward pass, unless
its first contribution comes before any branch or loop there (it then starts as that contribution); one
that a statement resets (a name bound again) starts from zero at its next contribution.
"""

from __future__ import annotations

import gast

from ast_ad import ir, runtime, syntax
from ast_ad.batching import Term, term_of
from ast_ad.kinds import Kinds
from ast_ad.naming import Namer
from ast_ad.syntax import RefTable


class Accumulation:
    """The adjoints of ``reverse.Reverser`` (a base class of it: it reads the reverser's state)."""

    bars: dict[str | tuple[str, int], str]  # names' adjoints (and loops' trip counts)
    namer: Namer
    refs: RefTable
    live: set[str]  # adjoints something has flowed into since they were last reset
    local: set[str]  # names bound once, in straight-line code
    pending: set[str]  # adjoints reset to zero: the next contribution assigns
    first: set[int]  # statements that bind a name for the first time (``analysis.first_definitions``)
    opening: bool  # still in the backward pass's opening (after the function's last loop or branch)
    started: set[str]  # adjoints that start as their first contribution, not at zero
    structured: set[str]  # names that hold lists, tuples or dicts
    items: set[str]  # structured names that are items of containers
    kinds: Kinds
    function: ir.Function
    terms: dict[int, Term]  # the accumulations a loop's backward pass may sum after it (``batching``), by statement

    def flush(self) -> list[gast.stmt]:
        """Write out the zero of every adjoint reset since its last contribution."""
        out = [syntax.assign(self.bar(v), self.zero(v)) for v in sorted(self.pending)]
        self.pending.clear()
        return out

    def bound_again(self, name: str, stmt: ir.Stmt) -> None:
        """After the backward pass of ``stmt``, which binds ``name``: the adjoint of the value ``name`` held before
        starts from zero (the next contribution assigns), unless ``stmt`` bound it first."""
        self.live.discard(name)
        if name not in self.local and id(stmt) not in self.first:
            self.pending.add(name)

    def bar(self, var: str) -> str:
        if var not in self.bars:
            self.bars[var] = self.namer.fresh(f"{var}_bar")
        return self.bars[var]

    def adjoint_or_zeros(self, var: str) -> gast.expr:
        """``var``'s adjoint where something has flowed into it (or it accumulates), else its zeros."""
        if var in self.bars and (var in self.live or var not in self.local):
            return syntax.name(self.bars[var])
        return self.zeros(var)

    def accumulate(self, var: str, contribution: gast.expr) -> list[gast.stmt]:
        started = self.opening and var not in self.bars and var not in self.structured
        bar = self.bar(var)
        if (var in self.local and var not in self.live) or var in self.pending or started:
            self.live.add(var)
            self.pending.discard(var)
            if started:  # its first contribution, before any loop or branch: it starts here, not at zero
                self.started.add(var)
            return [syntax.assign(bar, contribution)]
        self.live.add(var)
        current = syntax.name(bar)
        if var in self.structured or (self.kinds.rank(var) is None and var not in self.function.params
                                      and syntax.may_give_a_container(contribution, self.refs)):
            # element by element: ``+`` would join two lists. A parameter that holds a container is known to
            # (its label says so); another value whose kind is not known may hold one where a helper's adjoint
            # is a container (in code ast_ad wrote, an adjoint unpacked from a callee's pair, say)
            total = syntax.call(self.refs.marker(runtime.add_adjoints, "add_adjoints"), [current, contribution])
            return [syntax.assign(bar, total)]
        stmt = syntax.assign(bar, syntax.plus(current, contribution))
        term = term_of(stmt, bar, contribution, self.refs)
        if term is not None:
            self.terms[id(stmt)] = term
        return [stmt]

    def summed_after(self, sums: list[tuple[str, gast.expr]], body: list[gast.stmt],
                     untouched: set[str]) -> list[gast.stmt]:
        """A loop's sums (``batch_products``), each added to its adjoint (``W_bar = W_bar + summed(...)``), or the
        adjoint's start where nothing flowed into it before the loop (``untouched``) and the loop does not read it."""
        owner = {bar: var for var, bar in self.bars.items() if isinstance(var, str) and var in untouched}
        read = set().union(*(syntax.name_ids(s, loads=True) for s in body)) if owner else set()
        out = []
        for bar, total in sums:
            var = owner.pop(bar, None)  # a second sum into it adds
            if var is not None and var not in self.structured and bar not in read and var not in self.pending:
                self.started.add(var)
                self.live.add(var)
                out.append(syntax.assign(bar, total))
            else:
                out.append(syntax.assign(bar, syntax.add(syntax.name(bar), total)))
        return out

    def initial_adjoints(self, seed: str) -> list[gast.stmt]:
        """Adjoints that accumulate across branches and iterations start at zero."""
        names = [v for v in self.bars if isinstance(v, str) and v not in self.local and self.bars[v] != seed
                 and v not in self.started]
        return [syntax.assign(self.bars[v], self.zero(v)) for v in names]

    def zero(self, var: str) -> gast.expr:
        """The adjoint before anything flows in: ``None`` for a container, ``0.0`` for a number, an array or an
        item of a container (which is most often one of those; ``add_adjoints`` takes ``0.0`` for any)."""
        return syntax.const(None) if var in self.structured and var not in self.items else syntax.const(0.0)

    def grad(self, param: str, backward: list[gast.stmt]) -> str:
        if param not in self.bars or (param in self.local and param not in self.live):
            self.bars[param] = self.bars.get(param) or self.namer.fresh(f"{param}_bar")
            backward.append(syntax.assign(self.bars[param], self.zeros(param)))
        return self.bars[param]

    def zeros(self, var: str) -> gast.expr:
        return syntax.call(self.refs.marker(runtime.zeros_like, "zeros_like"), [syntax.name(var)])

