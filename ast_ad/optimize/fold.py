"""Generated code made to read as written by hand: copies folded away (``folded``), a temporary
written into its one reader (``Inliner``), and a shared adjoint or tangent taken out of a sum
(``shared_factor``).

Copies first: after ``t1_bar = out_bar``, the reads of ``t1_bar`` read ``out_bar``, and the copy
goes.

Reverse mode gives each rule's result a name (``t1_bar = out_bar`` for ``+``); a person writing the
gradient by hand would not. The gradient's backward pass, before and after:

>>> import gast
>>> from ast_ad.backend import printer
>>> from ast_ad.ir import syntax
>>> body = gast.parse('''
... t1_bar = out_bar
... x2_bar = -out_bar * cos(x2)
... x1_bar = t1_bar * x2
... x2_bar = x2_bar + t1_bar * x1
... ''').body
>>> for stmt in folded(body, keep={"x1_bar", "x2_bar"}):
...     print(printer.to_source(syntax.to_ast(stmt)).strip())
x2_bar = -out_bar * cos(x2)
x1_bar = out_bar * x2
x2_bar = x2_bar + out_bar * x1

A copy ``a = b`` is folded where ``a`` is bound by nothing else, every read of ``a`` follows it in
the same block, and ``b`` is not bound again before the last of them (a statement that reads ``a``
and then binds ``b``, ``b = b + a``, is fine). Then each read sees the very object the copy bound:
nothing changes but the names. A copy nothing reads is dropped.
"""

from __future__ import annotations

import bisect
import types
from collections import Counter
from collections.abc import Callable
from typing import Any

import gast

from ast_ad.core import registry
from ast_ad.ir import nodes as ir
from ast_ad.ir import syntax


class Tally(dict[str, int]):
    """A count of names: ``Counter``'s reading (0 for a name not seen) without its costly creation,
    made for each statement of a long function. Adding one tally to another is ``add``, not
    ``update`` (which replaces)."""

    def __missing__(self, key: str) -> int:
        return 0

    def add(self, other: dict[str, int]) -> None:
        for key, count in other.items():
            self[key] = self.get(key, 0) + count


def folded(body: list[gast.stmt], keep: set[str]) -> list[gast.stmt]:
    """``body`` with its copies folded; names in ``keep`` (read after ``body``) stay. ``body`` is
    not changed."""
    return folded_scanned(body, keep, None)[0]


def folded_scanned(body: list[gast.stmt], keep: set[str],
                   scans: list[_Scan] | None) -> tuple[list[gast.stmt], list[_Scan] | None]:
    """``folded``, reading what each statement reads and binds from its ``Inliner.scan`` where
    ``scans`` gives them; then also the scans of the statements it gives back (their reads renamed
    as they are), where it can say (``None`` where a nested block changed)."""
    # (a scan's binds are a set: one entry a name, which is one a binding only for a simple
    # statement; a block may bind a name again, ``t_bar = x_bar`` and then ``t_bar = t_bar + ...``,
    # which a copy must not be folded past)
    uses = (
        [
            (facts.loads, list(facts.binds)) if type(stmt) in _SIMPLE else _names(stmt)
            for stmt, facts in zip(body, scans, strict=True)
        ]
        if scans is not None
        else [_names(stmt) for stmt in body]
    )
    loads: Counter[str] = Counter()
    bound: Counter[str] = Counter()
    for reads, binds in uses:
        loads.update(reads)
        bound.update(binds)
    kept: list[int] = []
    out = _block(body, loads, bound, keep, uses, kept)
    return out, [scans[k] for k in kept] if scans is not None and len(kept) == len(out) else None


_SIMPLE = (gast.Assign, gast.AugAssign, gast.Expr, gast.Delete, gast.Pass)


def _block(
    body: list[gast.stmt],
    loads: Counter[str],
    bound: Counter[str],
    keep: set[str],
    uses: list[tuple[Tally, list[str]]] | None = None,
    kept: list[int] | None = None,
) -> list[gast.stmt]:
    """``body`` folded; ``kept``, if given, gets the positions of the statements kept, where
    ``uses`` (each statement's reads and binds) were read throughout."""
    out = [_nested(stmt, loads, bound, keep) for stmt in body]
    if uses is None or any(new is not old for new, old in zip(out, body, strict=True)):
        uses = [_names(stmt) for stmt in out]
        kept = None
    reads = [counts for counts, _ in uses]
    binds: dict[str, list[int]] = {}
    readers: dict[str, list[int]] = {}
    for j, (counts, stored) in enumerate(uses):
        for name in stored:
            binds.setdefault(name, []).append(j)
        for name in counts:
            readers.setdefault(name, []).append(j)
    dropped: set[int] = set()
    for k, stmt in enumerate(out):
        copy = _copy(stmt)
        if copy is None:
            continue
        a, b = copy
        if a in keep or bound[a] != 1 or a == b:
            continue
        later = [j for j in readers.get(a, ()) if j > k]
        if sum(reads[j][a] for j in later) != loads[a]:
            continue  # read before the copy, or in another block
        if later:
            last = later[-1]
            # ``b = a`` binds ``b`` to the object it holds: harmless, and after the fold ``b = b``,
            # dropped
            back = [
                j
                for j in binds.get(b, [])
                if j > k and j not in dropped and _copy(out[j]) == (b, a)
            ]
            rebinds = [j for j in binds.get(b, []) if j not in back]
            # the first statement after the copy that binds b
            first = bisect.bisect_right(rebinds, k)
            if first < len(rebinds) and (
                rebinds[first] < last or not _binds_after_reading(out[last], b)
            ):
                continue
            for j in later:
                out[j] = _renamed(out[j], a, b)
                reads[j][b] += reads[j].pop(a)
                readers.setdefault(b, []).append(j)
            dropped.update(back)
        dropped.add(k)
    if kept is not None:
        kept += [k for k in range(len(out)) if k not in dropped]
    return filled([stmt for k, stmt in enumerate(out) if k not in dropped])


def filled(body: list[gast.stmt]) -> list[gast.stmt]:
    """``body``, with ``pass`` where folding left only comments (the printer drops comments)."""
    if body and all(syntax.comment_text(stmt) is not None for stmt in body):
        return [*body, gast.Pass()]
    return body


def _names(stmt: gast.stmt) -> tuple[Tally, list[str]]:
    """How often ``stmt`` reads each name, and the names it binds (or deletes), one entry a
    binding."""
    reads = Tally()
    binds: list[str] = []
    stack: list[Any] = [stmt]
    # a walk without a call per node (as ``syntax.name_ids``): this runs over the whole backward
    # pass
    while stack:
        node = stack.pop()
        if type(node) is gast.Name:
            if type(node.ctx) is gast.Load:
                reads[node.id] += 1
            else:
                binds.append(node.id)
            continue
        stack += syntax.children(node)
    return reads, binds


def _nested(stmt: gast.stmt, loads: Counter[str], bound: Counter[str], keep: set[str]) -> gast.stmt:
    """``stmt`` with the blocks inside it folded (a new node where any changed)."""
    fields = [f for f in ("body", "orelse") if isinstance(getattr(stmt, f, None), list)]
    if not fields or not isinstance(stmt, (gast.If, gast.For, gast.While)):
        return stmt
    blocks = {f: _block(getattr(stmt, f), loads, bound, keep) for f in fields}
    if all(blocks[f] == getattr(stmt, f) for f in fields):
        return stmt
    return syntax.new(type(stmt), {**stmt.__dict__, **blocks})  # (its location too)


def _copy(stmt: gast.stmt) -> tuple[str, str] | None:
    if type(stmt) is gast.Assign and len(stmt.targets) == 1 and type(stmt.targets[0]) is gast.Name \
            and type(stmt.value) is gast.Name:
        return stmt.targets[0].id, stmt.value.id
    return None


def _binds_after_reading(stmt: gast.stmt, name: str) -> bool:
    """Whether ``stmt`` is ``name = expression``: it reads everything before it binds ``name``."""
    return type(stmt) is gast.Assign and all(type(t) is gast.Name for t in stmt.targets) \
        and not any(type(n) is gast.Name and n.id == name and type(n.ctx) is not gast.Load
                    for n in syntax.walk(stmt.value))


def _renamed(stmt: gast.stmt, old: str, new: str) -> gast.stmt:
    """A copy of ``stmt`` that reads ``new`` where it read ``old``."""
    renamed: gast.stmt = syntax.substituted(
        stmt,
        lambda name: (
            syntax.new(gast.Name, {**name.__dict__, "id": new})
            if name.id == old and type(name.ctx) is gast.Load
            else None
        ),
    )
    return renamed


# ---- expressions folded into their one reader ----------------------------------------------------

# what an expression folded into another may be made of: each is evaluated where it stands, once,
# with no effect
_PURE_NODES = (
    gast.Name,
    gast.Constant,
    gast.BinOp,
    gast.UnaryOp,
    gast.Compare,
    gast.Attribute,
    gast.Subscript,
    gast.Slice,
    gast.Tuple,
    gast.List,
    gast.Call,
    gast.Starred,
    gast.keyword,
    gast.operator,
    gast.unaryop,
    gast.cmpop,
    gast.expr_context,
)
# a read inside one of these may run never or many times: nothing is folded into it
_GUARDED = (
    gast.Lambda,
    gast.IfExp,
    gast.BoolOp,
    gast.ListComp,
    gast.SetComp,
    gast.DictComp,
    gast.GeneratorExp,
)
_LEAVES = (gast.operator, gast.unaryop, gast.cmpop, gast.expr_context, gast.keyword, gast.Attribute)
_PRODUCTS = (gast.Mult, gast.MatMult, gast.Div, gast.FloorDiv, gast.Mod)
_LIST_METHODS = frozenset({"append", "pop"})
# a folded line stays short enough to read: names, constants, operations and calls in all
MOST_NODES = 16
WINDOW = 12  # statements an expression may move down past


class Inliner:
    """Each temporary that one later statement of its block reads, once, written into that
    statement.

    A gradient's statements name every intermediate value (``t1 = x * 0.99``); where nothing else
    reads one, a person writes the expression where it is used: ``x = x * 0.99 + math.sin(x) *
    0.1``, and in the backward pass ``x_bar = x_bar * 0.1 * math.cos(x) + x_bar * 0.99`` for three
    statements that each read the last. An expression moves only where it computes the same value:
    it calls nothing but registered functions with no effect (``pure``), nothing it reads is bound
    again before its reader, and no statement between changes an object in place (an item write,
    ``+=``) unless every name it reads holds a number, and no call between may have an effect (a
    ``print``, a user's function: the expression, which may fail, is not put after it). It moves
    within its block and stays under its ``# line`` comment; the names of the user's own variables
    stay.
    """

    def __init__(
        self, pure: Any, keep: set[str] | frozenset[str], numbers: set[str] | frozenset[str]
    ):
        # gast.Call -> whether it is a call of a registered function with no effect
        self.pure = pure
        self.keep = keep  # names never folded away: the user's variables, the results
        self.numbers = numbers  # names that certainly hold numbers (no object to change in place)
        self.reads: dict[str, int] = Tally()  # reads of each name in the whole function
        self.lists: set[str] = set()
        self.folded: set[str] = set()  # names one of whose assignments was written into its reader

    def count(self, body: list[gast.stmt]) -> None:
        """Count the reads of every name in the whole function ``body`` (before its blocks are
        folded)."""
        reads: Counter[str] = Counter()
        bound_by: dict[str, set[str]] = {}
        receivers: Counter[str] = Counter()
        stack: list[Any] = list(body)
        while stack:  # one walk without a call a node: this runs over the whole function
            node = stack.pop()
            kind = type(node)
            if kind is gast.Name:
                if type(node.ctx) is gast.Load:
                    reads[node.id] += 1
                continue
            if (
                kind is gast.Attribute
                and node.attr in _LIST_METHODS
                and type(node.value) is gast.Name
            ):
                receivers[node.value.id] += 1
            elif kind is gast.Assign:
                for target in node.targets:
                    if type(target) is gast.Name:
                        empty = type(node.value) is gast.List and not node.value.elts
                        bound_by.setdefault(target.id, set()).add("list" if empty else "other")
                    else:
                        for n in syntax.walk(target):
                            if type(n) is gast.Name:
                                bound_by.setdefault(n.id, set()).add("other")
            elif kind in (gast.AugAssign, gast.For, gast.comprehension):
                for n in syntax.walk(node.target):
                    if type(n) is gast.Name:
                        bound_by.setdefault(n.id, set()).add("other")
            stack += syntax.children(node)
        self.reads = reads
        # a list only made empty here and only appended to and popped from: those calls change it
        # alone
        self.lists = {
            name
            for name, made in bound_by.items()
            if made == {"list"} and receivers[name] == reads[name]
        }

    def listless(self, *blocks: list[gast.stmt]) -> bool:
        """Whether no statement of these blocks makes a list empty: then no list is one that only
        appends and pops change (``count``), and a statement's scan is known before the whole
        function is counted (``counted``)."""
        stack: list[Any] = [stmt for body in blocks for stmt in body]
        while stack:
            stmt = stack.pop()
            kind = type(stmt)
            if kind is gast.Assign and type(stmt.value) is gast.List and not stmt.value.elts:
                return False
            if kind is gast.If or kind is gast.For or kind is gast.While:
                stack += stmt.body + stmt.orelse
        self.lists = set()
        return True

    def counted(
        self, blocks: list[list[gast.stmt]], scanned: list[list[_Scan] | None]
    ) -> list[list[_Scan]]:
        """``count`` of these blocks, where they are ``listless``, from the scans of their
        statements (a block's in ``scanned`` where made already), which ``block`` then reads: a walk
        less over the function."""
        scans = [found if found is not None else [self.scan(stmt) for stmt in body]
                 for body, found in zip(blocks, scanned, strict=True)]
        reads = Tally()
        for found in scans:
            for facts in found:
                reads.add(facts.loads)
        self.reads = reads
        return scans

    def block(self, body: list[gast.stmt], scanned: list[_Scan] | None = None) -> list[gast.stmt]:
        """``body`` with its temporaries folded into their readers; ``scanned``: its statements'
        scans, if made."""
        out: list[Any] = [self.nested(stmt) for stmt in body]  # a folded statement becomes None
        scans: list[Any] = [None] * len(out)  # each statement's ``_Scan``, made when first needed
        # (a compound statement's blocks were folded just now: scanned again if needed)
        if scanned is not None:
            scans = [
                facts if made is stmt else None
                for facts, made, stmt in zip(scanned, out, body, strict=True)
            ]
        for k in range(len(out) - 1, -1, -1):
            stmt = out[k]
            if (
                type(stmt) is not gast.Assign
                or len(stmt.targets) != 1
                or type(stmt.targets[0]) is not gast.Name
                or stmt.targets[0].id in self.keep
            ):
                continue
            mine = scans[k] = scans[k] or self.scan(stmt)
            if not mine.foldable or mine.size > MOST_NODES:
                continue
            name = stmt.targets[0].id
            j = self.reader(out, scans, k, name, mine)
            if j is not None:
                out[j] = _substituted(out[j], name, stmt.value)
                theirs = scans[j]
                theirs.loads[name] -= 1
                theirs.loads.add(mine.loads)
                theirs.size += mine.size - 1
                # (``_awkward`` looks at what moved in too)
                theirs.products = theirs.products or mine.products
                theirs.guarded = theirs.guarded or mine.guarded
                self.reads[name] -= 1
                self.folded.add(name)
                out[k] = None
        return filled([stmt for stmt in out if stmt is not None])

    def nested(self, stmt: gast.stmt) -> gast.stmt:
        if not isinstance(stmt, (gast.If, gast.For, gast.While)):
            return stmt
        state = dict(stmt.__dict__)
        for f in ("body", "orelse"):
            state[f] = self.block(getattr(stmt, f))
        return syntax.new(type(stmt), state)

    def reader(
        self, body: list[Any], scans: list[Any], k: int, name: str, mine: _Scan
    ) -> int | None:
        """The statement after ``k`` that reads the value ``body[k]`` binds to ``name``, if
        ``body[k]``'s expression can move into it unchanged (and it is near: a person folds what is
        in view); else ``None``."""
        reads = mine.loads.keys()
        numbers = reads <= self.numbers
        seen = 0
        for j in range(k + 1, len(body)):
            stmt = body[j]
            if stmt is None:
                continue
            seen += 1
            if seen > WINDOW or syntax.comment_text(stmt) is not None:
                return None
            theirs = scans[j] = scans[j] or self.scan(stmt)
            count = theirs.loads[name]
            if count:
                kind = type(stmt)
                if (
                    kind not in (gast.Assign, gast.AugAssign, gast.Expr)
                    or count != 1
                    or kind is gast.AugAssign
                    and type(stmt.target) is gast.Name
                    and stmt.target.id == name
                    or theirs.value_changes
                    or not (self.reads[name] == 1 or _rebinds(stmt, name))
                    or theirs.guarded
                    and _guarded(stmt, name)
                    or theirs.size + mine.size > MOST_NODES
                    or (
                        theirs.products
                        and isinstance(body[k].value, (gast.BinOp, gast.UnaryOp))
                        and _awkward(stmt, name, body[k].value)
                    )
                ):
                    return None
                return j
            if name in theirs.binds or not theirs.binds.isdisjoint(reads) or theirs.effects \
                    or theirs.changes and not numbers:
                return None
        return None

    def scan(self, stmt: gast.stmt) -> _Scan:
        """What ``stmt`` reads and binds, whether it may change an object in place, and of its value
        (the expression of an assignment or an expression statement): its size, whether its calls
        may, and whether it may move (``Inliner``)."""
        facts = _Scan(
            Tally(), set(), type(stmt) not in (gast.Assign, gast.Expr, gast.Delete, gast.Pass)
        )
        kind = type(stmt)
        if kind in (gast.Assign, gast.AugAssign, gast.Expr):
            targets = (
                stmt.targets
                if kind is gast.Assign
                else [stmt.target]
                if kind is gast.AugAssign
                else []
            )
            self.walk(targets, False, facts)
            self.walk([stmt.value], True, facts)
            # a new list keeps its name
            facts.foldable = facts.foldable and type(stmt.value) is not gast.List
            # ``a += b`` reads ``a`` first
            if kind is gast.AugAssign and type(stmt.target) is gast.Name:
                facts.loads[stmt.target.id] += 1
        else:
            facts.foldable = False
            self.walk([stmt], False, facts)
        return facts

    def walk(self, nodes: list[Any], value: bool, facts: _Scan) -> None:
        stack = list(nodes)
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind is gast.Name:
                if type(node.ctx) is gast.Load:
                    facts.loads[node.id] += 1
                    if value:
                        facts.size += 1
                        facts.foldable = facts.foldable and node.id not in self.lists
                else:
                    facts.binds.add(node.id)
                continue
            if value and not isinstance(node, _LEAVES):
                facts.size += 1
                if not isinstance(node, _PURE_NODES):
                    facts.foldable = False
            if kind is gast.Call and not self.pure(node):
                func = node.func
                if value:
                    facts.foldable = False
                if not (type(func) is gast.Attribute and func.attr in _LIST_METHODS
                        and type(func.value) is gast.Name and func.value.id in self.lists):
                    facts.changes = facts.effects = True
                    facts.value_changes = facts.value_changes or value
            elif kind in (gast.Subscript, gast.Attribute) and type(node.ctx) is not gast.Load:
                facts.changes = True
            elif isinstance(node, _GUARDED):
                facts.guarded = True
            elif kind is gast.BinOp and type(node.op) in _PRODUCTS:
                facts.products = True
            stack += syntax.children(node)


class _Scan:
    """What ``Inliner.scan`` finds of one statement."""

    __slots__ = (
        "loads",
        "binds",
        "changes",
        "effects",
        "value_changes",
        "size",
        "foldable",
        "guarded",
        "products",
    )

    def __init__(self, loads: Tally, binds: set[str], changes: bool):
        self.loads, self.binds, self.changes = loads, binds, changes
        self.effects = False  # it calls something that may have an effect: nothing moves past it
        self.value_changes = False  # a call in its value may (an effect, or a change of an object)
        self.size = 0  # of its value: names, constants, operations and calls
        self.foldable = True  # its value may move into a later statement
        self.guarded = False  # it holds a lambda, a conditional expression or a comprehension
        self.products = False  # it holds a product or a quotient (``_awkward`` looks closer)


def _awkward(stmt: gast.stmt, name: str, expr: gast.expr) -> bool:
    """Whether ``expr`` in place of ``name`` would put ``@`` beside ``*`` (or ``/``...) with no
    parentheses: ``a * b @ W`` is ``(a * b) @ W`` (one precedence, from the left) but reads as if
    ``b @ W`` came first, so such a product keeps its name. As the right operand it is printed in
    parentheses (``W @ (a * b)``): clear."""
    inner = type(expr.op) if isinstance(expr, (gast.BinOp, gast.UnaryOp)) else None
    if inner is None:
        return False
    for node in syntax.walk(stmt):
        if (
            type(node) is gast.BinOp
            and type(node.op) in _PRODUCTS
            and type(node.left) is gast.Name
            and node.left.id == name
            and (
                type(node.op) is gast.MatMult
                and (inner in _PRODUCTS or isinstance(expr, gast.UnaryOp))
                or inner is gast.MatMult
            )
        ):
            return True
    return False


def _rebinds(stmt: gast.stmt, name: str) -> bool:
    """Whether ``stmt`` is ``name = ...``: what it reads of ``name`` is the last read of the old
    value."""
    return type(stmt) is gast.Assign and any(
        type(t) is gast.Name and t.id == name for t in stmt.targets
    )


def _guarded(stmt: gast.stmt, name: str) -> bool:
    """Whether ``stmt`` reads ``name`` where it may be evaluated never, or many times."""
    return any(isinstance(node, _GUARDED) and name in _loads(node) for node in syntax.walk(stmt))


def _loads(node: gast.AST) -> set[str]:
    return {n.id for n in syntax.walk(node) if type(n) is gast.Name and type(n.ctx) is gast.Load}


def _substituted(stmt: gast.stmt, name: str, expr: gast.expr) -> gast.stmt:
    """A copy of ``stmt`` that evaluates ``expr`` where it read ``name`` (once): the nodes on the
    way to the read are new, the rest shared."""
    out: gast.stmt = syntax.substituted(
        stmt, lambda node: expr if node.id == name and type(node.ctx) is gast.Load else None
    )
    return out


def shared_factor(body: list[gast.stmt], adjoints: set[str] | frozenset[str],
                  number_call: Callable[[gast.Call], bool]) -> list[gast.stmt]:
    """``body`` with each sum of products that all start with one adjoint written as that adjoint
    times one sum, as a person writes it: ``x_bar = x_bar * 0.1 * math.cos(x) + x_bar * 0.99``
    becomes ``x_bar = x_bar * (0.1 * math.cos(x) + 0.99)``, a multiplication less (and so with
    ``-``). A term added with its minus sign in front is subtracted, at any depth of the expression
    (``x_bar + -g * 2.0``: ``x_bar - g * 2.0``, as ``pieces.added`` writes it where it adds a
    contribution; a sign flip is exact).

    The factor is taken out only where every other factor is a number literal or a call that gives a
    Python number (``number_call``: ``math.cos``, ``registry.def_number_result``): their products
    and sums are Python floats or ints, which neither wrap around nor lose precision as numpy's
    narrow types can, so the result has the adjoint's type and differs only in rounding. Only sums
    bound to adjoints (``adjoints``) change: no value of the user's program is computed another way.

    >>> import gast
    >>> from ast_ad.backend import printer
    >>> from ast_ad.ir import syntax
    >>> body = gast.parse("x_bar = x_bar * 0.1 * cos(x) + x_bar * 0.99").body
    >>> (stmt,) = shared_factor(body, {"x_bar"}, lambda call: call.func.id == "cos")
    >>> printer.to_source(syntax.to_ast(stmt)).strip()
    'x_bar = x_bar * (0.1 * cos(x) + 0.99)'
    """
    out = []
    for stmt in body:
        kind = type(stmt)
        if kind is gast.If or kind is gast.For or kind is gast.While:
            stmt = syntax.new(
                kind,
                {
                    **stmt.__dict__,
                    "body": shared_factor(stmt.body, adjoints, number_call),
                    "orelse": shared_factor(stmt.orelse, adjoints, number_call),
                },
            )
        elif kind is gast.Assign and len(stmt.targets) == 1 and type(stmt.targets[0]) is gast.Name \
                and stmt.targets[0].id in adjoints:
            value = stmt.value
            if type(value) is gast.BinOp and type(value.op) in (gast.Add, gast.Sub):
                value = (
                    _factored(_chain(value, (gast.Add, gast.Sub)), adjoints, number_call) or value
                )
            value = _signed(value)
            if value is not stmt.value:
                stmt = syntax.new(gast.Assign, {**stmt.__dict__, "value": value})
        out.append(stmt)
    return out


def scaled_adjoints(body: list[gast.stmt], adjoints: frozenset[str], wide: frozenset[str],
                    floats: frozenset[str], linear: Callable[[gast.Call], frozenset[int]]
                    ) -> list[gast.stmt]:
    """``body`` without the adjoints that are another times a number and are only passed on
    linearly: ``a_bar = v_bar * s``, read as ``a_bar * t`` and ``summed_product(a_bar, x)``,
    becomes ``v_bar * (s * t)`` and ``s * summed_product(v_bar, x)``, as a person writes it: the
    scalar factors meet first, and the array is multiplied once where it was twice.

    The facts it relies on: ``s`` and ``t`` are real numbers of 64 bits or more, at least one of
    them a float (``kinds.wide_numbers``: Python's or numpy's 64-bit, with constants), so that
    ``s * t`` is a float64 that neither wraps around nor rounds more than a float64 does; a call
    linear in the argument (``registry.linear_in``) gives ``s`` times what it gives without it;
    only an adjoint changes (``adjoints``: a value the backward pass makes, read only by the
    statements of its own block that follow it, before it is bound again there), so the result
    differs only in rounding; and ``v_bar``, ``s`` and ``t`` are not bound again before the last
    read moved.
    """
    total: Counter[str] = Counter()
    for stmt in body:
        syntax.load_counts(stmt, total)
    return _scaled_block(body, (adjoints, wide, floats, linear), total)


_Facts = tuple[frozenset[str], frozenset[str], frozenset[str],
               Callable[[gast.Call], frozenset[int]]]


def _scaled_block(body: list[gast.stmt], facts: _Facts, total: Counter[str]) -> list[gast.stmt]:
    out: list[gast.stmt] = []
    for stmt in body:
        kind = type(stmt)
        if kind is gast.If or kind is gast.For or kind is gast.While:
            # (a block left with comments alone, or none, gets ``pass``)
            stmt = syntax.new(kind, {**stmt.__dict__,
                                     "body": filled(_scaled_block(stmt.body, facts, total))
                                     or [gast.Pass()],
                                     "orelse": filled(_scaled_block(stmt.orelse, facts, total))})
        out.append(stmt)
    k = 0
    while k < len(out):
        moved = _scaled(out, k, facts, total)
        if moved is None:
            k += 1
        else:
            out = moved
    return out


def _scaled(body: list[gast.stmt], k: int, facts: _Facts, total: Counter[str]
            ) -> list[gast.stmt] | None:
    """``body`` with ``body[k]``, ``a_bar = v_bar * s``, moved into its readers
    (``scaled_adjoints``), or ``None`` where it stays."""
    adjoints, wide, floats, linear = facts
    stmt = body[k]
    if type(stmt) is not gast.Assign or len(stmt.targets) != 1 \
            or type(stmt.targets[0]) is not gast.Name or stmt.targets[0].id not in adjoints:
        return None
    name, value = stmt.targets[0].id, stmt.value
    if type(value) is not gast.BinOp or type(value.op) is not gast.Mult:
        return None
    pair = (value.left, value.right) if _wide(value.right, wide) else \
        (value.right, value.left) if _wide(value.left, wide) else None
    if pair is None or type(pair[0]) is not gast.Name or pair[0].id == name:
        return None
    array, scale = pair
    fixed = {array.id} | syntax.name_ids(scale)
    found: list[int] = []
    seen, rebound, ended = 0, False, False
    for j in range(k + 1, len(body)):
        later = body[j]
        count = syntax.load_counts(later, {}).get(name, 0)
        if count:
            if type(later) not in (gast.Assign, gast.Expr) or rebound:
                return None
            found.append(j)
            seen += count
            if seen == total[name]:
                break  # (every read of the name is found: what follows cannot read this value)
        bound = _bound(later)
        if name in bound:
            # bound again by a statement of this block: the reads after it are of another value
            if type(later) is not gast.Assign or len(later.targets) != 1 \
                    or type(later.targets[0]) is not gast.Name:
                return None
            ended = True
            break
        rebound = rebound or bool(fixed & bound)
    # every read of this value is one of these
    if not found or not ended and seen != total[name]:
        return None
    new = list(body)
    for j in found:
        rewritten = _rescaled(body[j], name, array, scale, wide, floats, linear)
        if rewritten is None:
            return None
        new[j] = rewritten
    total[name] -= seen
    total[array.id] += seen - 1
    del new[k]
    # the line's comment, where nothing of its block is left under it
    if k > 0 and syntax.comment_text(new[k - 1]) is not None \
            and (k == len(new) or syntax.comment_text(new[k]) is not None):
        del new[k - 1]
    return new


def _rescaled(stmt: gast.stmt, name: str, array: gast.Name, scale: gast.expr,
              wide: frozenset[str], floats: frozenset[str],
              linear: Callable[[gast.Call], frozenset[int]]) -> gast.stmt | None:
    """``stmt`` with each read of ``name`` (``array * scale``) moved: ``name * t`` as ``array *
    (scale * t)``, a linear call of ``name`` as ``scale`` times the call of ``array``; ``None``
    where a read is neither."""
    failed = False

    def moved(node: Any) -> Any:
        nonlocal failed
        kind = type(node)
        if kind is gast.Name and node.id == name and type(node.ctx) is gast.Load:
            failed = True  # a read of another form
            return node
        if kind is gast.BinOp and type(node.op) is gast.Mult:
            for mine, other in ((node.left, node.right), (node.right, node.left)):
                if type(mine) is gast.Name and mine.id == name and _wide(other, wide) \
                        and (_float(scale, floats) or _float(other, floats)):
                    factor = gast.BinOp(left=scale, op=gast.Mult(), right=other)
                    return gast.BinOp(left=syntax.name(array.id), op=gast.Mult(), right=factor)
        if kind is gast.Call:
            places = linear(node)
            spots = [i for i, a in enumerate(node.args)
                     if type(a) is gast.Name and a.id == name]
            if len(spots) == 1 and spots[0] in places and not node.keywords \
                    and not any(name in syntax.name_ids(a) for i, a in enumerate(node.args)
                                if i != spots[0]):
                args = list(node.args)
                args[spots[0]] = syntax.name(array.id)
                call = syntax.new(gast.Call, {**node.__dict__, "args": args})
                return gast.BinOp(left=scale, op=gast.Mult(), right=call)
        fields = {}
        for field, old in gast.iter_fields(node):
            if isinstance(old, list):
                new = [moved(v) if isinstance(v, gast.AST) else v for v in old]
                if any(a is not b for a, b in zip(new, old, strict=True)):
                    fields[field] = new
            elif isinstance(old, gast.AST):
                new_node = moved(old)
                if new_node is not old:
                    fields[field] = new_node
        return syntax.new(kind, {**node.__dict__, **fields}) if fields else node

    out = moved(stmt)
    moved = None  # type: ignore[assignment]  # (its cell held it: no cycle left to the collector)
    return None if failed else out


def _bound(stmt: gast.stmt) -> set[str]:
    """The names ``stmt`` binds (its targets, at any depth)."""
    return {n.id for n in syntax.walk(stmt) if type(n) is gast.Name
            and type(n.ctx) in (gast.Store, gast.Del)}


def _wide(node: gast.expr, wide: frozenset[str]) -> bool:
    """A real number of 64 bits or more: a name ``kinds.wide_numbers`` found, or a Python int or
    float written in the code."""
    if type(node) is gast.Constant:
        return type(node.value) in (int, float)
    return type(node) is gast.Name and node.id in wide


def _float(node: gast.expr, floats: frozenset[str]) -> bool:
    if type(node) is gast.Constant:
        return type(node.value) is float
    return type(node) is gast.Name and node.id in floats


def linear_calls(refs: syntax.RefTable) -> Callable[[gast.Call], frozenset[int]]:
    """The positions in which a call of generated code is linear (``registry.linear_in``), for a
    registered function with no effect whose result has no axes (``registry.gives_scalar``: a
    number times it is it scaled; ``getitem_vjp`` of a list gives a list, which a float cannot
    scale); none for any other."""
    def linear(call: gast.Call) -> frozenset[int]:
        obj = _called(call, refs)
        if obj is None or not registry.is_pure(obj) or not registry.gives_scalar(obj):
            return frozenset()
        return registry.linear_in(obj)
    return linear


_FLIPPED = {gast.Add: gast.Sub, gast.Sub: gast.Add}


def _factored(terms: list[tuple[type, gast.expr]], adjoints: set[str] | frozenset[str],
              number_call: Callable[[gast.Call], bool]) -> gast.expr | None:
    shared: str | None = None
    rests: list[tuple[type, gast.expr]] = []
    for op, term in terms:
        factors = [factor for _, factor in _chain(term, (gast.Mult,))]
        first = factors[0]
        negated = type(first) is gast.UnaryOp and type(first.op) is gast.USub
        if negated:  # ``-g * a``: ``g * a`` subtracted, or, first, ``g * -a``
            first = first.operand
        if len(factors) < 2 or type(first) is not gast.Name or first.id not in adjoints \
                or shared not in (None, first.id) \
                or not all(_python_number(f, number_call) for f in factors[1:]):
            return None
        shared = first.id
        rest = factors[1:]
        if negated and not rests:
            rest[0] = gast.UnaryOp(op=gast.USub(), operand=rest[0])
        elif negated:
            op = _FLIPPED[op]
        rests.append((op, _joined([(gast.Mult, f) for f in rest])))
    assert shared is not None
    return gast.BinOp(left=syntax.name(shared), op=gast.Mult(), right=_joined(rests))


def _signed(node: gast.expr) -> gast.expr:
    """``node`` with each term of a sum in it that a minus sign leads subtracted without it (``a +
    -b``: ``a - b``; ``a - -b``: ``a + b``), and two minus signs taken away (``-(-a * b)``: ``a *
    b``), at any depth; ``node`` itself where there is none. A sign flip is exact."""
    kind = type(node)
    if kind is gast.BinOp:
        left, right = _signed(node.left), _signed(node.right)
        op = type(node.op)
        if op in _FLIPPED and (unsigned := syntax.unsigned(right)) is not None:
            return gast.BinOp(left=left, op=_FLIPPED[op](), right=unsigned)
        if left is node.left and right is node.right:
            return node
        return gast.BinOp(left=left, op=node.op, right=right)
    if kind is gast.UnaryOp:
        operand = _signed(node.operand)
        if type(node.op) is gast.USub and (unsigned := syntax.unsigned(operand)) is not None:
            return unsigned  # ``-(-a * b)``: ``a * b``
        return node if operand is node.operand else gast.UnaryOp(op=node.op, operand=operand)
    if kind is gast.Call:
        args = [_signed(arg) for arg in node.args]
        if all(new is old for new, old in zip(args, node.args, strict=True)):
            return node
        return syntax.new(gast.Call, {**node.__dict__, "args": args})
    return node


def _chain(node: gast.expr, ops: tuple[type, ...]) -> list[tuple[type, gast.expr]]:
    """The operands of ``a + b - c`` (for ``ops`` Add and Sub) as Python groups it, from the left,
    each with the operator before it: ``[(Add, a), (Add, b), (Sub, c)]`` (the first's is Add)."""
    out = []
    while type(node) is gast.BinOp and type(node.op) in ops:
        out.append((type(node.op), node.right))
        node = node.left
    out.append((ops[0], node))
    return out[::-1]


def _joined(operands: list[tuple[type, gast.expr]]) -> gast.expr:
    """``_chain``'s operands joined again, from the left (the first's operator is not read)."""
    out = operands[0][1]
    for op, operand in operands[1:]:
        out = gast.BinOp(left=out, op=op(), right=operand)
    return out


def _python_number(node: gast.expr, number_call: Callable[[gast.Call], bool]) -> bool:
    if type(node) is gast.UnaryOp and type(node.op) is gast.USub:
        node = node.operand
    if type(node) is gast.Constant:
        return type(node.value) in (int, float)
    return type(node) is gast.Call and number_call(node)


def pure_calls(refs: syntax.RefTable) -> Callable[[gast.Call], bool]:
    """Whether a call of generated code (its objects in ``refs``) is of a registered function with
    no effect: the ``Inliner`` moves such a call into its reader."""
    def pure(call: gast.Call) -> bool:
        obj = _called(call, refs)
        return obj is not None and registry.is_pure(obj)
    return pure


def number_calls(refs: syntax.RefTable) -> Callable[[gast.Call], bool]:
    """Whether a call of generated code is of a registered function with no effect that gives a
    Python number (``registry.def_number_result``): ``shared_factor`` takes a factor out of sums of
    those."""
    def number_call(call: gast.Call) -> bool:
        obj = _called(call, refs)
        return obj is not None and registry.is_pure(obj) and registry.gives_number(obj)
    return number_call


def _called(call: gast.Call, refs: syntax.RefTable) -> Any:
    """The function ``call`` calls, found through ``refs`` (``math.cos``: the module's attribute),
    or ``None`` where it is not one of those objects, or is a user's function's generated pair."""
    func, attrs = call.func, []
    while type(func) is gast.Attribute:  # a function of a module: ``math.cos``
        attrs.append(func.attr)
        func = func.value
    obj = refs.lookup(func.id) if type(func) is gast.Name else None
    if attrs:
        if not isinstance(obj, types.ModuleType):
            return None
        for attr in reversed(attrs):
            obj = getattr(obj, attr, None)
    return None if isinstance(obj, ir.CalleeRef) else obj
