"""Python's ``UnboundLocalError``, kept: a local name read where no assignment of it may have run
yet.

The lowering binds each name a branch or a loop assigns before that statement, to ``None``
(``Lowerer.prepare``), so that every name of the IR is bound once it is read. Python binds nothing
there: where the loop runs no step, or the branch takes the other path, a later read of the name
raises ``UnboundLocalError``. The function ast_ad writes would read ``None`` instead, and go on
(``jvp`` of ``for t in range(n): y = 2 * x`` then ``return y`` would give ``(None, 0.0)`` at ``n =
0``). So, where a read may come before any assignment of its name (a may-analysis over the IR,
``maybe_unbound``), the name gets a flag, set where the name is bound, and the read a check before
it::

    y = None                               y = None
    for t in r:                            y_bound = False
        y = x * 2.0               ->       for t in r:
    return y                                   y = x * 2.0
                                               y_bound = True
                                           checked = check_bound(y_bound, 'y', 'model.py:4')
                                           return y

Most functions have no such read, and their IR is left as it is. A loop over ``range(k)``, ``k`` a
positive literal, with no ``break``, runs its body: what it binds is bound after it.
"""

from __future__ import annotations

from ast_ad import runtime
from ast_ad.analysis.kinds import checked_only
from ast_ad.core import registry
from ast_ad.ir import nodes as ir
from ast_ad.ir.naming import Namer

_CHECK = ir.Ref(runtime.check_bound, "check_bound")


def maybe_unbound(function: ir.Function, inits: dict[int, str]) -> dict[int, list[str]]:
    """For each statement (by id) that reads names that may still hold their ``inits`` (the
    lowering's ``None``, by statement id), those names; under the key ``-1``, the function's result,
    where it may."""
    if not inits:
        return {}  # (no branch or loop binds a name first: most functions)
    flow = _Flow(function, inits)
    end = flow.block(function.body, set(), True, [])
    if type(function.result) is ir.Var and function.result.name in end:
        flow.found[-1] = [function.result.name]
    return flow.found


class _Flow:
    """The names that may still hold their ``inits``, forward through a function's statements (a
    may-analysis: the paths of a branch joined, a loop's steps to its fixpoint)."""

    def __init__(self, function: ir.Function, inits: dict[int, str]):
        self.inits = inits
        self.found: dict[int, list[str]] = {}
        self.function = function
        self._ranges: dict[str, ir.Expr] | None = None
        self._checks: set[str] | None = None

    def block(
        self, body: tuple[ir.Stmt, ...], state: set[str], record: bool, breaks: list[set[str]]
    ) -> set[str]:
        """The state after ``body`` from ``state`` (``record``: noting the reads it finds;
        ``breaks`` takes the state at each ``break``)."""
        for stmt in body:
            hits = [n for n in dict.fromkeys(ir.reads_of(stmt)) if n in state]
            if hits and record and not (type(stmt) is ir.Assign and stmt.target in self.checks()) \
                    and not _guard(stmt) and not _remaking(stmt):
                self.found[id(stmt)] = hits
            if type(stmt) is ir.If:
                state = self.block(stmt.body, set(state), record, breaks) | \
                    self.block(stmt.orelse, set(state), record, breaks)
            elif type(stmt) is ir.For or type(stmt) is ir.While:
                state = self.loop(stmt, state, record)
            elif type(stmt) is ir.Break:
                breaks.append(set(state))
                return set()  # (nothing after a break runs)
            else:
                for name in ir.defined(stmt):
                    if id(stmt) in self.inits:
                        state.add(name)
                    elif name != _remade(stmt):  # (made again: bound as it was)
                        state.discard(name)
        return state

    def loop(self, stmt: ir.For | ir.While, state: set[str], record: bool) -> set[str]:
        bound = {stmt.target} if type(stmt) is ir.For else set()
        head = set(state)
        while True:  # the states at the loop's head: on arrival, and after each step
            after_step = self.block(stmt.body, head - bound, False, [])
            if state | after_step <= head:
                break
            head |= after_step
        breaks: list[set[str]] = []
        after_step = self.block(stmt.body, head - bound, record, breaks)
        return (after_step if type(stmt) is ir.For and self.runs(stmt) else head).union(*breaks)

    def checks(self) -> set[str]:
        """The tuples of an aliasing check or of the memory model's remaking of other variables
        (``kinds.checked_only``): the lowering reads them, not the user, and a name not bound yet
        in one (``None``) shares no memory."""
        if self._checks is None:
            self._checks = checked_only(self.function, remade=True)
        return self._checks

    def runs(self, loop: ir.For) -> bool:
        """Whether the loop runs at least one step to its end: ``range(k)``, ``k`` a positive
        literal, no break."""
        if self._ranges is None:
            self._ranges = {
                s.target: s.value for s in ir.walk(self.function.body) if type(s) is ir.Assign
            }
        value = self._ranges.get(loop.iter.name) if type(loop.iter) is ir.Var else None
        return (
            type(value) is ir.Call
            and value.fn.obj is range
            and len(value.args) == 1
            and type(value.args[0]) is ir.Const
            and type(value.args[0].value) is int
            and value.args[0].value > 0
            and not any(type(s) is ir.Break for s in ir.walk(loop.body))
        )


def checked(function: ir.Function, inits: dict[int, str], namer: Namer) -> ir.Function:
    """``function`` with a flag for each name a read of which may come before any assignment of it,
    set where the name is bound, and a check before each such read (``runtime.check_bound``):
    Python's error, at its line."""
    found = maybe_unbound(function, inits)
    if not found:
        return function
    owners = {
        s.target: inits[id(s)]
        for s in ir.walk(function.body)
        if id(s) in inits and type(s) is ir.Assign
    }
    flags = {
        name: namer.fresh(f"{owners[name]}_bound") for names in found.values() for name in names
    }
    body = _flagged(function.body, found, inits, owners, flags, namer)
    if -1 in found:
        body += [_check(name, function.result_line, owners, flags, namer) for name in found[-1]]
    return ir.with_body(function, body, function.mutable | frozenset(flags.values()))


def inits(function: ir.Function, inits: dict[int, str]) -> frozenset[str]:
    """The names of ``function`` (after ``checked``) every binding of which to ``None`` is one of
    the lowering's ``inits``: a read that may see that ``None`` has a check before it, which raises,
    so no value these names hold where anything but a check reads them is that ``None``
    (``ir.Function.inits``, for ``kinds``)."""
    if not inits:
        return frozenset()
    made: set[str] = set()
    other: set[str] = set()
    for stmt in ir.walk(function.body):
        if ir.binds_none(stmt):
            assert isinstance(stmt, ir.Assign)
            (made if id(stmt) in inits else other).add(stmt.target)
    return frozenset(made - other - set(function.params))


def _flagged(
    body: tuple[ir.Stmt, ...],
    found: dict[int, list[str]],
    inits: dict[int, str],
    owners: dict[str, str],
    flags: dict[str, str],
    namer: Namer,
) -> list[ir.Stmt]:
    """``body`` with its checks before the reads ``found``, and its flags set after each binding of
    a flagged name."""
    out: list[ir.Stmt] = []
    for stmt in body:
        out += [_check(name, stmt.line, owners, flags, namer) for name in found.get(id(stmt), ())]
        if not ir.blocks(stmt):
            out.append(stmt)
            out += [ir.Assign(flags[n], ir.Const(id(stmt) not in inits), stmt.line)
                    for n in ir.defined(stmt) if n in flags and n != _remade(stmt)]
            continue
        blocks = [_flagged(b, found, inits, owners, flags, namer) for b in ir.blocks(stmt)]
        if type(stmt) is ir.For and stmt.target in flags:  # bound at the top of each step
            blocks[0].insert(0, ir.Assign(flags[stmt.target], ir.Const(True), stmt.line))
        out.append(ir.with_blocks(stmt, blocks))
    return out


def _check(
    name: str, line: ir.Line, owners: dict[str, str], flags: dict[str, str], namer: Namer
) -> ir.Assign:
    """``checked = check_bound(y_bound, 'y', 'model.py:4')``."""
    where = ir.Const(f"{line.filename}:{line.lineno}")
    return ir.Assign(
        namer.fresh("checked"),
        ir.Call(_CHECK, (ir.Var(flags[name]), ir.Const(owners[name]), where)),
        line,
    )


def _guard(stmt: ir.Stmt) -> bool:
    """Whether ``stmt`` is a guard of the memory model (``registry.def_guard``): it reads the other
    names only to ask whether they see an object about to change, and a name not bound yet
    (``None``) sees none."""
    return type(stmt) is ir.Assign and type(stmt.value) is ir.Call \
        and registry.guarded_argument(stmt.value.fn.obj) is not None


def _remade(stmt: ir.Stmt) -> str | None:
    """The name ``stmt`` makes again from its own old value (``registry.def_remakes``:
    ``y = memory_view(plan, k, root, y)``), which it leaves bound or not as it was; else
    ``None``."""
    if type(stmt) is not ir.Assign or type(stmt.value) is not ir.Call:
        return None
    remade = registry.remade_argument(stmt.value.fn.obj)
    k = remade[0] if remade is not None else None
    if k is None or k >= len(stmt.value.args):
        return None
    old = stmt.value.args[k]
    return stmt.target if type(old) is ir.Var and old.name == stmt.target else None


def _remaking(stmt: ir.Stmt) -> bool:
    """Whether ``stmt`` is one of the memory model's remakings (``registry.def_remakes``): it reads
    the names it makes again, or a tuple of them, only for the memory they share."""
    return type(stmt) is ir.Assign and type(stmt.value) is ir.Call \
        and registry.remade_argument(stmt.value.fn.obj) is not None
