"""Sparse Jacobians and Hessians: ``jacobian(f, sparse=True)``, ``hessian(f, sparse=True)``.

Three steps, each a pass over the code ast_ad wrote:

1. **The pattern.** Given (``sparse=P``: a scipy sparse matrix or an array whose nonzero entries
   are those the Jacobian may have, found once with ``ast_ad.sparsity``, say), or found: the
   forward-mode code runs once with a sparsity pattern for a tangent (``runtime.batched.Pattern``:
   for each entry, the set of inputs it may depend on, as bits), seeded with each input depending
   on itself. What comes out is, for each entry of the result, the inputs it may depend on: the
   Jacobian's entries outside it are zero wherever the code takes the branches it took here. It is
   kept for the next calls only where it holds at every point (``holds_everywhere``: nothing that
   steers the code is computed from the values differentiated); else it is found again at each
   call, so that it always holds at the point asked about.
2. **The colouring.** Columns that share no row get one colour (greedy, in order): a tangent that
   moves all the inputs of one colour at once gives each of their columns in its own rows. A
   Hessian's pattern is made symmetric and star-coloured (``star_coloured``), which reads the
   symmetry too: an entry comes from its row or, mirrored, from its column. The rows are coloured
   too, those that share no column alike: where they take fewer than half the columns' colours (a
   row full of entries beside a diagonal: two colours for the rows, one a column for the
   columns), the rows' colouring is used, for a plain function.
3. **The compressed matrix.** One batched forward pass (``runtime.batched.Batch``) carries one
   tangent per colour; each entry of the pattern is read back from its column's colour. By rows:
   one forward pass and one backward pass carrying one cotangent per colour (``vjp_fn(...,
   batched=True)``), each entry read back from its row's colour.

The result is a ``scipy.sparse.csr_array`` of shape ``(out.size, x.size)``; scipy is needed for it
(``pip install ast_ad[sparse]``). Where the code does something a pattern does not take, the
Jacobian is taken dense and its nonzero entries kept, and the ``ast_ad`` log says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ast_ad.api.lowering import Lowered, forward_columns, jvp_code, run, stacked_pass
from ast_ad.core import logs, registry
from ast_ad.core.records import record
from ast_ad.errors import ASTADError
from ast_ad.runtime import refuse_missing_tangents, size_of
from ast_ad.runtime.batched import Pattern, batched_pass, is_batch


def csr_class() -> Any:
    """scipy's ``csr_array``, or a clear refusal where scipy is not installed."""
    try:
        from scipy.sparse import csr_array
    except ImportError as missing:  # pragma: no cover (the test extra installs scipy)
        raise ASTADError(
            "sparse=True gives a scipy.sparse matrix: install scipy (pip install ast_ad[sparse])"
        ) from missing
    return csr_array


def pattern_of(lowered: Lowered, k: int) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """The rows and columns of the Jacobian's entries that may be nonzero (in row order), and the
    result's shape: one pass of the forward-mode code with a ``Pattern`` tangent."""
    loaded = jvp_code(lowered, (k,))
    x = lowered.args[lowered.positions[k]]
    n = size_of(x)
    seed = Pattern.seeded(n, np.shape(x))
    with batched_pass(seed.data.shape[0], Pattern):
        raw, raw_dot = run(loaded, *lowered.args, seed)
    refuse_missing_tangents(raw_dot)
    out = lowered.finish(raw)
    dot = lowered.finish_dot(raw, raw_dot)
    if isinstance(out, (tuple, list, dict)) or is_batch(out):
        raise ASTADError("sparse=True takes a function that returns one array")
    m = size_of(out)
    if not is_batch(dot):
        if not isinstance(dot, (tuple, list, dict)) and not np.any(dot):
            # zeros: the result does not depend on the argument
            empty = np.zeros(0, dtype=np.intp)
            return empty, empty, np.shape(out)
        raise ASTADError(f"sparse=True: the tangent came out as {type(dot).__name__}")
    words = np.ascontiguousarray(dot.data.reshape(dot.data.shape[0], m))
    word, row = np.nonzero(words)
    bits = np.unpackbits(words[word, row].astype("<u8").view(np.uint8).reshape(-1, 8), axis=1,
                         bitorder="little")
    which, bit = np.nonzero(bits)
    rows, columns = row[which], 64 * word[which] + bit
    keep = columns < n
    rows, columns = rows[keep], columns[keep]
    order = np.lexsort((columns, rows))
    return rows[order].astype(np.intp), columns[order].astype(np.intp), np.shape(out)


def given_pattern(given: Any) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    """A sparsity pattern the caller gives (``sparse=P``): a scipy sparse matrix or a 2-d array,
    whose nonzero entries are those the Jacobian may have; its rows and columns, in row order."""
    if hasattr(given, "tocoo"):
        coo = given.tocoo()
        rows, columns, shape = np.asarray(coo.row), np.asarray(coo.col), coo.shape
    elif isinstance(given, np.ndarray) and given.ndim == 2:
        rows, columns = np.nonzero(given)
        shape = given.shape
    else:
        raise ASTADError("sparse= takes True (the pattern found at each call) or the pattern: a "
                         f"scipy sparse matrix or a 2-d array of its shape; got "
                         f"{type(given).__name__}")
    order = np.lexsort((columns, rows))
    return (rows[order].astype(np.intp), columns[order].astype(np.intp),
            (int(shape[0]), int(shape[1])))


def coloured(rows: np.ndarray, columns: np.ndarray, n: int) -> np.ndarray:
    """A colour for each of ``n`` columns, no two columns that share a row alike (greedy, in order:
    each column takes the least colour none of its neighbours has)."""
    by_row: dict[int, list[int]] = {}
    by_column: dict[int, list[int]] = {}
    for r, c in zip(rows.tolist(), columns.tolist(), strict=True):
        by_row.setdefault(r, []).append(c)
        by_column.setdefault(c, []).append(r)
    colour = np.full(n, -1, dtype=np.intp)
    for c in range(n):
        taken = {int(colour[other]) for r in by_column.get(c, ()) for other in by_row[r]
                 if colour[other] >= 0}
        colour[c] = next(k for k in range(len(taken) + 1) if k not in taken)
    return colour


def _symmetric(rows: np.ndarray, columns: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A pattern with each entry's mirror image in it too, in row order."""
    both = np.unique(np.concatenate([rows * n + columns, columns * n + rows]))
    return both // n, both % n


def star_coloured(rows: np.ndarray, columns: np.ndarray, n: int) -> np.ndarray:
    """A star colouring of the symmetric pattern of ``n`` columns (greedy, in order; Gebremedhin,
    Manne and Pothen's simple algorithm): neighbours differ, and every path of four columns has
    three colours at least, so each entry is read either from its own column's colour in its row
    or, by symmetry, from its row's colour in its column (``star_entries``). An arrow-shaped
    Hessian (a row and column full, and the diagonal) takes two colours where ``coloured`` takes
    ``n``."""
    neighbours: dict[int, set[int]] = {}
    for r, c in zip(rows.tolist(), columns.tolist(), strict=True):
        if r != c:
            neighbours.setdefault(r, set()).add(c)
            neighbours.setdefault(c, set()).add(r)
    colour = np.full(n, -1, dtype=np.intp)
    for v in range(n):
        taken: set[int] = set()
        for w in neighbours.get(v, ()):
            if colour[w] >= 0:
                taken.add(int(colour[w]))
            for x in neighbours.get(w, ()):
                if x == v or colour[x] < 0:
                    continue
                if colour[w] < 0:
                    taken.add(int(colour[x]))  # (two steps away, through an uncoloured one)
                elif any(colour[y] == colour[w] for y in neighbours.get(x, ()) if y != w):
                    taken.add(int(colour[x]))  # (else a path of four in two colours)
        colour[v] = next(k for k in range(len(taken) + 1) if k not in taken)
    return colour


def star_reading(rows: np.ndarray, columns: np.ndarray,
                 colour: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each entry of a symmetric matrix is read in its compressed columns (``compressed[k]``:
    the sum of its columns of colour ``k``) under a star colouring: its row's value at its column's
    colour where no other entry of its row has that colour, else (by symmetry) its column's value
    at its row's colour. The entries are ``compressed[at, within]``."""
    count = int(colour.max()) + 1
    size = (int(max(rows.max(), columns.max())) + 1) * count
    seen = np.bincount(rows * count + colour[columns], minlength=size)
    alone = seen[rows * count + colour[columns]] == 1
    swapped = seen[columns * count + colour[rows]] == 1
    if not np.all(alone | swapped):
        raise ASTADError("the colouring does not separate every entry of the Hessian (ast_ad's "
                         "error): take it dense")
    return np.where(alone, colour[columns], colour[rows]), np.where(alone, rows, columns)


def star_entries(rows: np.ndarray, columns: np.ndarray, colour: np.ndarray,
                 compressed: np.ndarray) -> np.ndarray:
    """The entries of a symmetric matrix from its compressed columns (``star_reading``)."""
    at, within = star_reading(rows, columns, colour)
    entries: np.ndarray = compressed[at, within]
    return entries


@record
class Plan:
    """What a pattern fixes, made once for it: its entries (in row order; a Hessian's made
    symmetric), a colour for each column, where each entry is read in the compressed matrix
    (``compressed[at, within]``), and the CSR rows' pointers."""

    rows: np.ndarray
    columns: np.ndarray
    shape: tuple[int, int]
    colour: np.ndarray
    at: np.ndarray
    within: np.ndarray
    indptr: np.ndarray
    # ``colour`` is the rows': the compressed matrix is ``J``'s rows of each colour summed, read by
    # reverse mode
    by_rows: bool = False


# the rows' colouring is used where it takes fewer colours than this share of the columns'
ROWS_BELOW = 0.5


def plan_for(rows: np.ndarray, columns: np.ndarray, m: int, n: int, symmetric: bool,
             rows_allowed: bool = False) -> Plan:
    """The ``Plan`` of a pattern that has entries: column-coloured, or, for a Hessian, made
    symmetric and star-coloured; or, where ``rows_allowed`` and the rows take fewer than half the
    columns' colours, row-coloured (each backward pass of a batch costs about what two or three
    forward passes do: rows pay where they are clearly fewer)."""
    symmetric = symmetric and m == n
    if symmetric:
        rows, columns = _symmetric(rows, columns, n)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=m))])
    if symmetric:
        colour = star_coloured(rows, columns, n)
        at, within = star_reading(rows, columns, colour)
        return Plan(rows, columns, (m, n), colour, at, within, indptr)
    colour = coloured(rows, columns, n)
    if rows_allowed:
        by_rows = coloured(columns, rows, m)  # (the transposed pattern's columns)
        if int(by_rows.max()) + 1 < ROWS_BELOW * (int(colour.max()) + 1):
            return Plan(rows, columns, (m, n), by_rows, by_rows[rows], columns, indptr, True)
    return Plan(rows, columns, (m, n), colour, colour[columns], rows, indptr)


def _floats(value: Any) -> bool:
    return type(value) in (float, np.float64) or (type(value) is np.ndarray
                                                  and value.dtype.kind in "fc")


def kept_under(lowered: Lowered, k: int) -> Any:
    """What a pattern that holds everywhere is kept under: the code, the argument, and each
    argument's shape and dtype if it holds floats, else its value (an integer that bounds a loop,
    an array of indices); ``None`` (not kept) for an argument of any other kind."""
    parts: list[Any] = [getattr(lowered.fn, "__code__", lowered.fn), k]
    for a in lowered.args:
        if _floats(a):
            parts.append((np.shape(a), getattr(a, "dtype", float)))
        elif type(a) in (int, bool, str, type(None)):
            parts.append((type(a), a))
        elif type(a) is np.ndarray and a.dtype.kind in "biu":
            parts.append((a.shape, a.dtype, a.tobytes()))
        else:
            return None
    return tuple(parts)


def holds_everywhere(lowered: Lowered, k: int) -> bool:
    """Whether the pattern found at one point holds at every point where the arguments have the
    shapes they have here, so that it can be kept.

    The fact relied on: the pattern follows the code's path and the entries it reads, which change
    with the values of the arguments of floats only through values computed from them that steer
    the code (a branch's test, a loop's bound, an index, a count: none carries a derivative) or
    through a primitive whose derivative's pattern is an order of the values
    (``registry.def_value_pattern``: ``np.sort``). So every name whose value depends on the
    argument's values must carry its derivative (``activity``: the same fixpoint, once following
    the derivative, once every value), no primitive of the second kind is called, and nothing is
    called that is not read here (a function of the user's, read on its own, or a statement ast_ad
    runs as it is). Where that is not
    shown, the pattern is found again at each call."""
    from ast_ad import transform
    from ast_ad.analysis.activity import activity, inputs_of, is_user_function
    from ast_ad.ir import nodes as ir

    try:
        function = transform.normalized(lowered.fn)
    except ASTADError:
        return False
    # every argument of floats: the others are part of what the pattern is kept under
    # (``kept_under``)
    positions = tuple(p for p, a in enumerate(lowered.args) if _floats(a))
    carried = activity(function, positions)

    def reads_values(value: ir.Expr, names: set[str]) -> bool:
        if isinstance(value, ir.Attr) and value.attr in ("shape", "size", "ndim", "dtype"):
            return False
        if isinstance(value, ir.Call) and value.fn.obj in (np.shape, np.ndim, np.size, len):
            return False
        if isinstance(value, ir.Call) and registry.hashable(value.fn.obj):
            # (what a call reads only for its shape and dtype, ``registry.def_meta_read``: the
            # zeros an adjoint starts as, ``owned_adjoint(0.0, x)``)
            metas = registry.meta_positions(value.fn.obj)
            return any(isinstance(a, ir.Var) and a.name in names
                       for k, a in enumerate(value.args) if k not in metas) or any(
                isinstance(a, ir.Var) and a.name in names for _, a in value.kwargs)
        return any(v.name in names for v in inputs_of(value))
    depends = activity(function, positions, carries=reads_values)
    if depends - carried:
        return False
    for stmt in ir.walk(function.body):
        if isinstance(stmt, ir.Raw):
            return False
        value = getattr(stmt, "value", None)
        if isinstance(value, ir.Raw):
            return False
        if isinstance(value, ir.Call):
            fn = value.fn.obj
            if is_user_function(fn) or registry.has_value_pattern(fn) or \
                    (registry.lookup(fn) is None and not registry.is_helper(fn)):
                return False  # (a call read on its own, or not read: no rule, not ast_ad's)
    return True


class SparseJacobian:
    """The sparse Jacobian of one argument: its pattern found at each call (or the one given, or
    kept where it holds everywhere), and what each pattern met fixes (``Plan``: the colouring,
    where each entry is read) made once for it."""

    def __init__(self, given: Any = None, symmetric: bool = False) -> None:
        # a Hessian: its pattern made symmetric, star-coloured (``star_coloured``)
        self.symmetric = symmetric
        self.given = None if given is None else given_pattern(given)
        # the plans of the patterns met, by their entries; of those that hold everywhere
        # (``holds_everywhere``), by ``kept_under``
        self.plans: dict[tuple[int, int, bytes, bytes, bool], Plan] = {}
        self.kept: dict[Any, Plan] = {}

    def __call__(self, lowered: Lowered, k: int, pullback: Any = None) -> Any:
        """The sparse Jacobian of ``lowered`` in its argument ``k``. ``pullback``, where the caller
        gives one (a plain function), makes a colouring of the rows possible: ``pullback(bars)``
        takes cotangents of the result stacked on a first axis and gives argument ``k``'s adjoints
        stacked alike (one forward pass, one backward pass carrying them all)."""
        csr = csr_class()
        x = lowered.args[lowered.positions[k]]
        n = size_of(x)
        found = None if self.given is not None else kept_under(lowered, k)
        plan = self.kept.get(found) if found is not None else None
        if plan is None:
            if self.given is not None:
                rows, columns, shape = self.given
                if shape[1] != n:
                    raise ASTADError(f"the sparsity pattern given has {shape[1]} columns; the "
                                     f"argument has {n} entries")
                m = shape[0]
            else:
                try:
                    rows, columns, out_shape = pattern_of(lowered, k)
                except ASTADError:
                    raise
                except Exception as failure:  # noqa: BLE001 (the dense Jacobian says what is wrong)
                    logs.info("sparse=True: no pattern (%s: %s); the Jacobian is taken dense",
                              type(failure).__name__,
                              str(failure).splitlines()[0] if str(failure) else "")
                    return self.dense(lowered, k, csr)
                m = int(np.prod(out_shape, dtype=np.intp))
            if not len(rows):
                return csr((np.zeros(0), (rows, columns)), shape=(m, n))
            plan = self.planned(rows, columns, m, n, pullback is not None)
            if found is not None and holds_everywhere(lowered, k):
                self.kept[found] = plan
                if len(self.kept) > 8:
                    self.kept.pop(next(iter(self.kept)))
        m = plan.shape[0]
        colours = int(plan.colour.max()) + 1
        if plan.by_rows and pullback is not None:
            bars = np.zeros((colours, m))
            bars[plan.colour, np.arange(m)] = 1.0
            adjoints = np.asarray(pullback(bars), dtype=float).reshape(colours, n)
            values = adjoints[plan.at, plan.within]
            return csr((values, plan.columns, plan.indptr), shape=plan.shape)
        seeds = np.zeros((colours, n))
        seeds[plan.colour, np.arange(n)] = 1.0
        raw, raw_dot = stacked_pass(lowered, (k,), (seeds.reshape((colours, *np.shape(x))),))
        refuse_missing_tangents(raw_dot)
        dot = lowered.finish_dot(raw, raw_dot)
        if self.given is not None and size_of(lowered.finish(raw)) != m:
            raise ASTADError(f"the sparsity pattern given has {m} rows; the result has "
                             f"{size_of(lowered.finish(raw))} entries")
        compressed = dot.data.reshape(colours, m) if is_batch(dot) else \
            np.broadcast_to(np.asarray(dot, dtype=float), (colours, m))
        values = compressed[plan.at, plan.within].astype(float, copy=False)
        return csr((values, plan.columns, plan.indptr), shape=plan.shape)

    def planned(self, rows: np.ndarray, columns: np.ndarray, m: int, n: int,
                rows_allowed: bool = False) -> Plan:
        """The plan of a pattern, made the first time it is met (patterns met at other branches:
        eight kept, the first go)."""
        key = (m, n, rows.tobytes(), columns.tobytes(), rows_allowed)
        plan = self.plans.get(key)
        if plan is None:
            plan = self.plans[key] = plan_for(rows, columns, m, n, self.symmetric, rows_allowed)
            if len(self.plans) > 8:
                self.plans.pop(next(iter(self.plans)))
        return plan

    @staticmethod
    def dense(lowered: Lowered, k: int, csr: Any) -> Any:
        """The Jacobian's nonzero entries from its columns (``forward_columns``)."""
        x = lowered.args[lowered.positions[k]]
        out, columns = forward_columns(lowered, k)
        matrix = np.stack([np.ravel(np.asarray(c, dtype=float)) *
                           np.ones(size_of(out)) for c in columns], axis=1)
        return csr(matrix.reshape(size_of(out), size_of(x)))


def sparsity(fun: Any, argnums: int = 0) -> Any:
    """``sparsity(f)(*args)``: the sparsity pattern of the Jacobian of ``f`` in argument
    ``argnums`` at ``args``, a ``scipy.sparse.csr_array`` of ones where an entry may be nonzero.

    It holds wherever ``f`` takes the branches (and reads the entries) it takes at ``args``: for
    code whose branches and indices do not depend on the argument's values, everywhere, and then
    ``jacobian(f, sparse=P)`` can take it once for all calls.
    """
    from ast_ad.api.arguments import _check_argnums
    from ast_ad.api.lowering import lower

    (k,) = _check_argnums(argnums)

    def pattern(*args: Any) -> Any:
        csr = csr_class()
        x = args[k]
        if np.ndim(x) == 0:
            raise ASTADError("sparsity takes an array argument")
        rows, columns, shape = pattern_of(lower(fun, args), k)
        m = int(np.prod(shape, dtype=np.intp))
        return csr((np.ones(len(rows)), (rows, columns)), shape=(m, size_of(x)))
    return pattern
