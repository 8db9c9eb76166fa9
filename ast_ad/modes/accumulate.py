"""The adjoint of each name in the backward pass, and how contributions reach it.

An adjoint is named after its value (``x_bar``). Its first contribution assigns it, and later ones
add to it with a new value (``x_bar = x_bar + g``), so no array a caller owns is ever written; a
list, tuple or dict adds element by element (``add_adjoints``), never with ``+``, which would join
them. An adjoint that branches and loop steps add to starts at its zero at the top of the backward
pass, unless its first contribution comes before any branch or loop there (it then starts as that
contribution); one that a statement resets (a name bound again) starts from zero at its next
contribution.

Contributions and the accumulations that add them are IR (``pieces.Made``: a rule's body put in, its
parts named by ``templates.Scratch``), as the whole backward pass is; ``printed`` writes it, each
part where it is read.
"""

from __future__ import annotations

import gast

from ast_ad import runtime
from ast_ad.analysis.kinds import Kinds
from ast_ad.ir import nodes as ir
from ast_ad.ir import syntax
from ast_ad.ir.naming import Namer
from ast_ad.ir.pieces import Made, added, may_give_a_container
from ast_ad.ir.syntax import RefTable
from ast_ad.modes import templates
from ast_ad.optimize.batching import Term, term_of

_ZEROS_LIKE = ir.Ref(runtime.zeros_like, "zeros_like")
_REAL_LIKE = ir.Ref(runtime.real_like, "real_like")


class Accumulation:
    """The adjoints of ``reverse.Reverser``, a part of it: it owns how each name's adjoint is named
    and started (``bars``, ``live``, ``pending``, ``opening``, ``started``) and receives what it
    reads of the function (its names bound once and first bindings, its structured names and the
    items among them, its kinds, the generated code's names and references, the loops' sums)."""

    def __init__(
        self,
        function: ir.Function,
        namer: Namer,
        scratch: templates.Scratch,
        refs: RefTable,
        facts: tuple[set[str], set[int], set[str], set[str], Kinds],
        terms: dict[int, Term],
    ):
        self.function, self.namer, self.scratch, self.refs = function, namer, scratch, refs
        # names bound once, in straight-line code; statements that bind a name for the first time
        # (``analysis.first_definitions``); names that hold lists, tuples or dicts, and those of
        # them that are items of containers; what each name holds
        self.local, self.first, self.structured, self.items, self.kinds = facts
        # the accumulations a loop's backward pass may sum after it (``batching``), by statement
        self.terms = terms
        # the names that may hold complex values, and those that surely do (``complexness``): a
        # real name's share of a complex container's adjoint is its real part (``real_part``)
        self.complexes: frozenset[str] = frozenset()
        self.sure_complex: frozenset[str] = frozenset()
        self.bars: dict[str | tuple[str, int], str] = {}  # names' adjoints, and loops' trip counts
        self.live: set[str] = set()  # adjoints something has flowed into since they were reset
        self.pending: set[str] = set()  # adjoints reset to zero: the next contribution assigns
        self.flushed: set[str] = set()  # the adjoints the last ``flush`` wrote the zero of
        # adjoints a loop being built may have added to in an earlier step (what follows in the
        # code built comes before in the step that runs next): not zero for having no name yet
        self.carried: frozenset[str] = frozenset()
        # The backward pass's opening: the statements after the function's last loop or branch. An
        # adjoint (of a name bound more than once) whose first contribution comes there is assigned
        # it; the others start at zero, at the top (``initial_adjoints``).
        self.opening = True
        self.started: set[str] = set()  # adjoints that start as their first contribution

    def printed(self, stmts: list[ir.Stmt]) -> list[gast.stmt]:
        """``stmts`` printed, each part written where it is read (``syntax.pieces``)."""
        return syntax.pieces(stmts, self.refs)

    def flush(self, keep: frozenset[str] = frozenset()) -> list[ir.Stmt]:
        """Write out the zero of every adjoint reset since its last contribution (but those of
        ``keep``, which stay pending)."""
        out: list[ir.Stmt] = [
            ir.Assign(self.bar(v), self.zero(v), ir.NOWHERE) for v in sorted(self.pending - keep)
        ]
        self.flushed = self.pending - keep
        self.pending &= keep
        return out

    def zero_now(self, var: str) -> bool:
        """Whether ``var``'s adjoint is its zero here: just written out by ``flush``, or nothing has
        flowed into it yet and it starts at zero (``initial_adjoints``)."""
        return var in self.flushed or var in self.pending or (
            var not in self.bars and var not in self.local and var not in self.started
            and var not in self.structured and var not in self.carried
        )

    def bound_again(self, name: str, stmt: ir.Stmt) -> None:
        """After the backward pass of ``stmt``, which binds ``name``: the adjoint of the value
        ``name`` held before starts from zero (the next contribution assigns), unless ``stmt`` bound
        it first."""
        self.live.discard(name)
        if name not in self.local and id(stmt) not in self.first:
            self.pending.add(name)

    def bar(self, var: str) -> str:
        if var not in self.bars:
            self.bars[var] = self.namer.fresh(f"{var}_bar")
        return self.bars[var]

    def adjoint_or_zeros(self, var: str) -> Made:
        """``var``'s adjoint where something has flowed into it (or it accumulates), else its
        zeros."""
        if var in self.bars and (var in self.live or var not in self.local):
            return [], ir.Var(self.bars[var])
        return self.part(ir.Call(_ZEROS_LIKE, (ir.Var(var),)))

    def part(self, value: ir.Expr, *before: ir.Stmt) -> Made:
        """``value`` as a part of one expression (``syntax.pieces``), after the statements
        ``before``."""
        name = self.scratch.fresh("")
        return [*before, ir.Assign(name, value, ir.NOWHERE)], ir.Var(name)

    def real_part(self, whole: str, atom: ir.Atom, contribution: Made) -> Made:
        """``contribution``, the share of ``atom`` in the adjoint of ``whole`` (a list or array it
        was put into), as ``real_like(contribution, atom)`` where ``whole`` may be complex and
        ``atom`` may be real: the real part of it, where ``atom`` is real when it runs."""
        if whole not in self.complexes:
            return contribution
        return self.real_of(atom, contribution)

    def real_of(self, atom: ir.Atom, contribution: Made) -> Made:
        """``real_like(contribution, atom)``: the real part of ``atom``'s contribution where
        ``atom`` is real when it runs; as it is where ``atom`` is surely complex."""
        if not isinstance(atom, ir.Var) or atom.name in self.sure_complex:
            return contribution
        stmts, value = contribution
        return self.part(ir.Call(_REAL_LIKE, (value, atom)), *stmts)

    def accumulate(self, var: str, contribution: Made) -> list[ir.Stmt]:
        """The statements that add ``contribution`` (the IR of an expression) to ``var``'s
        adjoint."""
        stmts, value = contribution
        started = self.opening and var not in self.bars and var not in self.structured
        bar = self.bar(var)
        if (var in self.local and var not in self.live) or var in self.pending or started:
            self.live.add(var)
            self.pending.discard(var)
            # its first contribution, before any loop or branch: it starts here, not at zero
            if started:
                self.started.add(var)
            return [*stmts, ir.Assign(bar, value, ir.NOWHERE)]
        self.live.add(var)
        current = ir.Var(bar)
        if var in self.structured or (
            self.kinds.rank(var) is None
            and var not in self.function.params
            and may_give_a_container(contribution)
        ):
            # element by element: ``+`` would join two lists. A parameter that holds a container is
            # known to (its label says so); another value whose kind is not known may hold one where
            # a helper's adjoint is a container (in code ast_ad wrote, an adjoint unpacked from a
            # callee's pair, say)
            total = ir.Call(ir.Ref(runtime.add_adjoints, "add_adjoints"), (current, value))
            return [*stmts, ir.Assign(bar, total, ir.NOWHERE)]
        stmts = list(stmts)
        # (``x_bar - g * y``, not ``+ -g``)
        accumulation = ir.Assign(bar, added(stmts, current, value), ir.NOWHERE)
        term = term_of(accumulation, stmts)
        if term is not None:
            self.terms[id(accumulation)] = term
        return [*stmts, accumulation]

    def summed_after(self, sums: list[tuple[str, ir.Call]], body: list[ir.Stmt],
                     untouched: set[str]) -> list[ir.Stmt]:
        """A loop's sums (``batch_products``), each added to its adjoint (``W_bar = W_bar +
        summed(...)``), or the adjoint's start where nothing flowed into it before the loop
        (``untouched``) and the loop does not read it."""
        owner = {
            bar: var for var, bar in self.bars.items() if isinstance(var, str) and var in untouched
        }
        read = ir.reads_in(body) if owner else set()
        out: list[ir.Stmt] = []
        for bar, total in sums:
            var = owner.pop(bar, None)  # a second sum into it adds
            if (
                var is not None
                and var not in self.structured
                and bar not in read
                and var not in self.pending
            ):
                self.started.add(var)
                self.live.add(var)
                out.append(ir.Assign(bar, total, ir.NOWHERE))
            else:
                made, summed = self.part(total)
                out += [*made, ir.Assign(bar, added(made, ir.Var(bar), summed), ir.NOWHERE)]
        return out

    def initial_adjoints(self, seed: str) -> list[ir.Stmt]:
        """Adjoints that accumulate across branches and iterations start at zero."""
        names = [
            v
            for v in self.bars
            if isinstance(v, str)
            and v not in self.local
            and self.bars[v] != seed
            and v not in self.started
        ]
        return [ir.Assign(self.bars[v], self.zero(v), ir.NOWHERE) for v in names]

    def zero(self, var: str) -> ir.Const:
        """The adjoint before anything flows in: ``None`` for a container, ``0.0`` for a number, an
        array or an item of a container (which is most often one of those; ``add_adjoints`` takes
        ``0.0`` for any)."""
        return ir.Const(None) if var in self.structured and var not in self.items else ir.Const(0.0)

    def grad(self, param: str, backward: list[ir.Stmt]) -> str:
        if param not in self.bars or (param in self.local and param not in self.live):
            self.bars[param] = self.bars.get(param) or self.namer.fresh(f"{param}_bar")
            backward.append(
                ir.Assign(self.bars[param], ir.Call(_ZEROS_LIKE, (ir.Var(param),)), ir.NOWHERE)
            )
        return self.bars[param]

