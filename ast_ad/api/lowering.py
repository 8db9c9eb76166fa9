"""A derivative as generated code that ast_ad can transform again (``Lowered``), and running forward
mode over it: what every composition of transformations stands on."""

from __future__ import annotations

import ast
import bisect
import inspect
import types
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ast_ad import transform
from ast_ad.api.arguments import _unbind, shape_labels
from ast_ad.backend.load import Loaded
from ast_ad.core import logs
from ast_ad.core.records import record
from ast_ad.errors import (
    ASTADError,
    LocatedError,
)
from ast_ad.modes.batch import NotStacked
from ast_ad.runtime import as_array, is_array, refuse_missing_tangents, size_of, zeros_like
from ast_ad.runtime.batched import Batch, BatchRefused, batched_pass, is_batch


def _cotangent(raw: Any, g: Any) -> Any:
    return g


@record
class Lowered:
    """A callable's computation as a function ast_ad can transform.

    ``fn(*args)`` gives the raw result; ``finish(raw)`` is the callable's result, and
    ``finish_dot(raw, raw_dot)`` its tangent (linear in ``raw_dot``), and ``finish_bar(raw, g)`` the
    adjoint of ``raw`` that the adjoint ``g`` of the result gives (the transpose of ``finish_dot``:
    ``<g, finish_dot(raw, d)> == <finish_bar(raw, g), d>``). The callable's argument ``k`` is
    ``args[positions[k]]``.
    """

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    positions: tuple[int, ...]
    finish: Finish
    finish_dot: FinishDot
    loaded: Any = None  # the generated code behind ``fn``, if any (for ``source``)
    # the parts of ``fn``'s returned tuple that ``finish_dot`` reads
    needed: tuple[bool, ...] | None = None
    finish_bar: FinishBar = _cotangent


def lower(fun: Any, args: tuple[Any, ...]) -> Lowered:
    """``fun`` at ``args`` as a function ast_ad can transform: its own lowering, or the user's
    function."""
    # the common case, first (parse checks that it has a source)
    if type(fun) is types.FunctionType:
        return Lowered(fun, _with_defaults(fun, args), tuple(range(len(args))), _same, _tangent)
    own = getattr(fun, "lowered", None)
    if own is not None and getattr(fun, "composable", False):
        lowered: Lowered = own(args)
        return lowered

    fn, bound = _unbind(fun)
    if bound is not None:
        return Lowered(
            fn, _with_defaults(fn, (bound, *args)), tuple(range(1, len(args) + 1)), _same, _tangent
        )
    return Lowered(fn, _with_defaults(fn, args), tuple(range(len(args))), _same, _tangent)


def _with_defaults(fn: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """``args`` and the defaults of the parameters they leave out (``jvp(f, (x,), (v,))`` of ``f(x,
    s=1.0)``): the transformed function takes every parameter by position."""
    code = getattr(fn, "__code__", None)
    if (
        type(fn) is types.FunctionType
        and code is not None
        and not code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
        and len(args) >= code.co_argcount + code.co_kwonlyargcount
        and "__wrapped__" not in fn.__dict__
        and "__signature__" not in fn.__dict__
    ):
        return args  # (a plain function given every parameter: no signature to read)
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return args
    if len(args) >= len(parameters):
        return args
    missing = [p for p in parameters[len(args):] if p.default is p.empty]
    if missing:
        raise ASTADError(
            f"{getattr(fn, '__qualname__', fn)} needs an argument for {missing[0].name!r}: give "
            "one "
            "primal (and one tangent, or None) for each parameter without a default"
        )
    return (*args, *(p.default for p in parameters[len(args):]))


def _same(raw: Any) -> Any:
    return raw


def _tangent(raw: Any, raw_dot: Any) -> Any:
    return raw_dot


def _seeded(out: Any, g: Any, depth: int) -> Any:
    """The adjoint of the raw result ``out`` of forward-mode code ``depth`` levels deep: ``g`` (its
    parts that are ``None``, zero) in the tangent of the tangent ..., zeros elsewhere."""
    if depth == 0:
        return tuple(_zero_if_none(b, like) for b, like in zip(g, out, strict=True))
    return (raw_zeros(out[0]), _seeded(out[1], g, depth - 1))


def raw_zeros(value: Any) -> Any:
    """The zero adjoint of a raw result (``None`` where it holds ``None``): zeros, not ``0 *
    value``, which is ``nan`` where the value is infinite."""
    if value is None:
        return None
    if isinstance(value, tuple):
        return tuple(raw_zeros(v) for v in value)
    return zeros_like(value)


def _zero_if_none(value: Any, like: Any) -> Any:
    return zeros_like(like) if value is None else value


def forward_at(
    lowered: Lowered, active: tuple[int, ...], tangents: tuple[Any, ...]
) -> tuple[Any, Any]:
    """Run the forward-mode code of ``lowered`` with these tangents for the caller's arguments
    ``active``."""
    loaded = jvp_code(lowered, active)
    raw, raw_dot = run(loaded, *lowered.args, *tangents)
    refuse_missing_tangents(raw_dot)
    return lowered.finish(raw), lowered.finish_dot(raw, raw_dot)


def jvp_code(lowered: Lowered, active: tuple[int, ...], tangent_alone: bool = False) -> Loaded:
    """The forward-mode module of ``lowered`` for tangents of the caller's arguments ``active``:
    its function returns ``(out, out_dot)``, or ``out_dot`` alone (``tangent_alone``: for a caller
    that has computed ``out`` at the same arguments, ``transform.jvp_function``)."""
    return transform.jvp_function(*_jvp_of(lowered, active), tangent_alone=tangent_alone)


def _jvp_of(
    lowered: Lowered, active: tuple[int, ...]
) -> tuple[Any, tuple[int, ...], tuple[int, ...], Any]:
    """What the forward-mode module of ``lowered`` is built and cached for: function, argnums,
    shapes, needed."""

    return (
        lowered.fn,
        tuple(lowered.positions[k] for k in active),
        shape_labels(lowered.args),
        lowered.needed,
    )


def run(loaded: Any, *args: Any) -> Any:
    """Call generated code; a refusal raised in a helper gets the user's line it belongs to."""
    return run_code(loaded, loaded.fn, *args)


def run_code(loaded: Any, fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn``, a function of the generated module ``loaded``, as ``run`` does."""
    try:
        return fn(*args)
    except LocatedError as exc:
        raise located(exc, loaded) from None


def located(exc: LocatedError, loaded: Any) -> LocatedError:
    """``exc``, a refusal raised in a helper of generated code, with the user's line it belongs to,
    if it has none."""
    where = loaded.user_line(exc)
    if exc.filename is None and where is not None:
        return type(exc)(str(exc), *where)
    return exc


_KEPT = frozenset({float, int, bool, complex, str, type(None), np.float64, np.int64})


# the modules whose backward passes change nothing they are given (``reads_only``), by id
_READ_ONLY: dict[int, tuple[Any, bool]] = {}


def reads_only(loaded: Any) -> bool:
    """Whether the backward passes of the generated pair module ``loaded`` leave what the forward
    pass saved as it was, so that ``vjp_fn`` may hand it to them again without copies (``fresh``).

    The fact relied on: a backward pass changes what it was given only in loops, where it pops the
    tapes and writes back the arrays a loop wrote in place (``analysis.in_place_writes``): straight
    code's item writes are new arrays (``assign_item``), and what a backward pass writes into in
    place is an adjoint it made (``owned_adjoint``). So a module with no loop, no ``pop``, and no
    write into an item of anything but an adjoint (a name with ``_bar`` in it) reads only; anything
    else is copied as before. Read once for each module, from its text."""
    found = _READ_ONLY.get(id(loaded))
    if found is not None and found[0] is loaded:
        return found[1]
    answer = True
    for node in ast.walk(ast.parse(loaded.text)):
        if isinstance(node, (ast.For, ast.While, ast.AsyncFor, ast.ListComp, ast.GeneratorExp,
                             ast.DictComp, ast.SetComp)):
            answer = False
        elif isinstance(node, ast.Attribute) and node.attr in ("pop", "append", "extend",
                                                               "insert", "remove", "clear"):
            answer = False
        elif isinstance(node, ast.Call) and (
                any(k.arg == "out" for k in node.keywords)
                or _writes_first(node.func) and not (
                    node.args and isinstance(node.args[0], ast.Name)
                    and "_bar" in node.args[0].id)):
            # (a helper that writes into its first argument: into an adjoint only)
            answer = False
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for inner in ast.walk(target):
                    if isinstance(inner, ast.Subscript) and not (
                            isinstance(inner.value, ast.Name) and "_bar" in inner.value.id):
                        answer = False
        if not answer:
            break
    if len(_READ_ONLY) > 256:
        _READ_ONLY.clear()
    _READ_ONLY[id(loaded)] = (loaded, answer)
    return answer


# the runtime helpers that write into their first argument (``x[index] += value``)
_WRITING = frozenset({"add_into", "scatter_add", "add_at"})


def _writes_first(func: ast.expr) -> bool:
    """Whether a call of ``func`` writes into its first argument: a helper that does, or a
    ufunc's ``at``."""
    return isinstance(func, ast.Name) and func.id in _WRITING or \
        isinstance(func, ast.Attribute) and func.attr == "at"


def fresh(saved: Any, copies: dict[int, Any] | None = None) -> Any:
    """``saved`` with every list and array in it copied, each once (what is shared stays shared): a
    backward pass pops its tapes, and writes back the arrays its loops wrote in place
    (``analysis.in_place_writes``)."""
    copies = {} if copies is None else copies
    if id(saved) in copies:
        return copies[id(saved)]
    if isinstance(saved, list):
        made: Any = [item if type(item) in _KEPT else fresh(item, copies) for item in saved]
    elif isinstance(saved, tuple) and not hasattr(saved, "_fields"):
        # (a number, a string or None needs no copy, and no call to say so)
        made = tuple(item if type(item) in _KEPT else fresh(item, copies) for item in saved)
    elif isinstance(saved, np.ndarray):
        made = saved.copy()
    else:
        return saved
    copies[id(saved)] = made
    return made


def _inner(a: Any, b: Any) -> float:
    """``<a, b>`` over arrays and tuples of them."""
    if isinstance(a, tuple):
        return sum((_inner(x, y) for x, y in zip(a, b, strict=True)), 0.0)
    return float(np.sum(as_array(a) * as_array(b)))


def forward_columns(lowered: Lowered, k: int) -> tuple[Any, Sequence[Any]]:
    """The callable's value, and its tangents along each unit vector of its argument ``k`` (the
    columns of its Jacobian); the value is ``None`` for an empty argument.

    The unit vectors go through the forward-mode code together, as batches (``batched_columns``:
    one pass for up to ``BATCH_ENTRIES // size`` of them, the primal computed once for all);
    where the code does something a batch does not take, or the arguments hold arrays of another
    library than numpy, one pass each."""
    x = lowered.args[lowered.positions[k]]
    n = size_of(x)
    if _in_one_pass(lowered, k):
        try:
            return batched_columns(lowered, x, n, k)
        except Exception as failure:  # noqa: BLE001 (the passes one by one say what is wrong)
            logs.info("the Jacobian's columns one pass each: the batched pass stopped (%s: %s)",
                      type(failure).__name__, str(failure).splitlines()[0] if str(failure) else "")
    out, columns, loaded = None, [], jvp_code(lowered, (k,))
    for j in range(n):
        e = np.zeros(n)
        e[j] = 1.0
        raw, raw_dot = run(
            loaded, *lowered.args, float(e[0]) if np.ndim(x) == 0 else e.reshape(np.shape(x))
        )
        out = lowered.finish(raw)
        refuse_missing_tangents(raw_dot)
        columns.append(lowered.finish_dot(raw, raw_dot))
    return out, columns


def _in_one_pass(lowered: Lowered, k: int) -> bool:
    """Whether ``forward_columns`` carries the columns together: more than one, and every array
    numpy's (a batch is of numpy's, and another library's arrays, dask's, would be made numpy's by
    it, where their Jacobian stays of their type one pass a column)."""
    return size_of(lowered.args[lowered.positions[k]]) > 1 and all(
        not is_array(leaf) or type(leaf) is np.ndarray for leaf in _all_leaves(lowered.args))


def columns_code(lowered: Lowered, k: int) -> Loaded:
    """The generated code ``forward_columns`` runs for the callable's argument ``k``: the code for
    a stack of tangents where the columns go together and it can be made, else the code for one
    tangent (what ``source`` of a Jacobian or Hessian shows)."""
    code = stacked_code(lowered, (k,), units=True) if _in_one_pass(lowered, k) else None
    return code if code is not None else jvp_code(lowered, (k,))


# how many entries the unit vectors of one batched pass hold together, at most
BATCH_ENTRIES = 1 << 21


def batched_columns(lowered: Lowered, x: Any, n: int, k: int) -> tuple[Any, Sequence[Any]]:
    """``forward_columns`` by batched passes (``runtime.batched``): the unit vectors of ``x``, as
    many as ``BATCH_ENTRIES`` allows, seeded as one ``Batch``; the primal must come out as one
    value (a batch there is refused: it would stand for as many equal values)."""
    per_pass = max(1, min(n, BATCH_ENTRIES // n))
    out, columns = None, BatchedColumns()
    for start in range(0, n, per_pass):
        stop = min(n, start + per_pass)
        seed = np.zeros((stop - start, n))
        seed[np.arange(stop - start), np.arange(start, stop)] = 1.0
        raw, raw_dot = stacked_pass(lowered, (k,), (seed.reshape((stop - start,
                                                                   *np.shape(x))),), units=True)
        if any(is_batch(leaf) for leaf in _all_leaves(raw)):
            raise BatchRefused("the value came out as a batch")
        refuse_missing_tangents(raw_dot)
        out = lowered.finish(raw)
        columns.add(lowered, raw, raw_dot, stop - start)
    return out, columns


def stacked_pass(lowered: Lowered, active: tuple[int, ...],
                 seeds: tuple[Any, ...], units: bool = False) -> tuple[Any, Any]:
    """One forward pass of ``B`` tangents of the callable's arguments ``active`` (``seeds``: for
    each, an array of its ``B`` tangents stacked on a first axis): the raw value, and its tangents
    as ``Batch``es. It runs the code written for stacks (``modes.batch``) where that can be made,
    else the code for one tangent on ``Batch``es: the same numbers, at a few microseconds more for
    each numpy call. ``units``: the seeds are unit vectors (``batched_columns``), for which the
    code for stacks is written so (``Stacker._unit_rows``)."""
    size = seeds[0].shape[0]
    code = stacked_code(lowered, active, units)
    if code is not None:
        try:
            with batched_pass(size):
                # (the code's stacks hold the batch axis last)
                made = run(code, *lowered.args,
                           *(np.ascontiguousarray(np.moveaxis(s, 0, -1)) for s in seeds))
            passes["stacked"] += 1
            return made  # type: ignore[no-any-return]
        except Exception as failure:  # noqa: BLE001 (the code for one tangent says what is wrong)
            passes["stopped"] += 1
            logs.info("the stacked pass stopped (%s: %s): the tangents as a Batch",
                      type(failure).__name__, str(failure).splitlines()[0] if str(failure) else "")
    else:
        passes["not stacked"] += 1
    with batched_pass(size):
        return run(jvp_code(lowered, active),  # type: ignore[no-any-return]
                   *lowered.args, *(Batch(s) for s in seeds))


def forward_stacked(lowered: Lowered, active: tuple[int, ...],
                    seeds: tuple[Any, ...]) -> tuple[Any, Any]:
    """The callable's value, and its tangents (``Batch``es) along the ``B`` directions ``seeds``
    of its arguments ``active`` (``stacked_pass``)."""
    raw, raw_dot = stacked_pass(lowered, active, seeds)
    refuse_missing_tangents(raw_dot)
    return lowered.finish(raw), lowered.finish_dot(raw, raw_dot)


# how the batched passes of this process ran: as code for stacks ("stacked"), or on ``Batch``es
# where that code was not made ("not stacked") or stopped ("stopped"); what tests read
passes: Counter[str] = Counter()

# what forward mode for stacks was refused for (``stacked_code``), not tried again
_not_stacked: set[Any] = set()


def stacked_code(lowered: Lowered, active: tuple[int, ...],
                 units: bool = False) -> Loaded | None:
    """The forward-mode code of ``lowered`` in its arguments ``active`` written for stacks of
    tangents (``units``: for seeds that are unit vectors), or ``None`` where it cannot be
    (``modes.batch.NotStacked``)."""
    key = _jvp_of(lowered, active)
    memo = (*key, getattr(key[0], "__code__", None))
    if memo in _not_stacked:
        return None
    try:
        return transform.stacked_jvp_function(*key, units=units)
    except NotStacked as refused:
        logs.info("forward mode for stacked tangents not made (%s)", refused)
        if len(_not_stacked) >= 256:  # (it holds the functions: not kept for ever)
            _not_stacked.clear()
        _not_stacked.add(memo)
        return None


class BatchedColumns(Sequence[Any]):
    """The columns of a Jacobian from batched passes, read one at a time or (``stacked``) all at
    once. A pass's tangents are finished (``Lowered.finish_dot``) as one batch where that runs (a
    finish is a cast or a choice of parts, the same for each tangent), else one by one."""

    def __init__(self) -> None:
        # each pass's tangents: finished as one batch (a value holding batches), or one by one (a
        # list of finished columns)
        self.chunks: list[tuple[Any, bool]] = []
        self.starts: list[int] = []  # the first column of each pass
        self.total = 0

    def add(self, lowered: Lowered, raw: Any, raw_dot: Any, count: int) -> None:
        self.starts.append(self.total)
        self.total += count
        try:
            finished = lowered.finish_dot(raw, raw_dot)
            whole = all(is_batch(leaf) or np.ndim(leaf) == 0 for leaf in _all_leaves(finished))
        except Exception:  # noqa: BLE001 (finished one by one instead)
            whole = False
        if whole:
            self.chunks.append((finished, True))
        else:
            self.chunks.append(([lowered.finish_dot(raw, _one_of(raw_dot, j))
                                 for j in range(count)], False))

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, j: Any) -> Any:
        if isinstance(j, slice):
            return [self[k] for k in range(len(self))[j]]
        j = range(len(self))[j]
        chunk = bisect.bisect_right(self.starts, j) - 1
        finished, whole = self.chunks[chunk]
        at = j - self.starts[chunk]
        return _one_of(finished, at) if whole else finished[at]

    def stacked(self) -> Any:
        """Every column at once, the column axis first, where each pass finished as one batch;
        else ``None``."""
        if not all(whole and is_batch(finished) for finished, whole in self.chunks):
            return None
        return np.concatenate([finished.data for finished, _ in self.chunks])


def _all_leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _all_leaves(item)]
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _all_leaves(item)]
    return [value]


def _one_of(value: Any, j: int) -> Any:
    """The ``j``-th tangent in ``value``: of each batch in it, its ``j``-th value; the rest, the
    same for every tangent, as it is."""
    if is_batch(value):
        return value.data[j]
    if isinstance(value, dict):
        return {key: _one_of(item, j) for key, item in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_one_of(item, j) for item in value))
    if isinstance(value, (tuple, list)):
        return type(value)(_one_of(item, j) for item in value)
    return value


def _leaves(out: Any) -> list[Any]:
    return list(out) if isinstance(out, tuple) else [out]


def _rebuild(out: Any, bars: list[Any]) -> Any:
    return tuple(bars) if isinstance(out, tuple) else bars[0]


def _stack_columns(columns: Sequence[Any], out: Any, x_shape: tuple[int, ...]) -> Any:
    """Columns ``J e_j`` stacked into ``out.shape + x.shape`` (leaf by leaf for tuple outputs)."""
    if isinstance(out, tuple):
        return tuple(
            _stack_columns([c[i] for c in columns], leaf, x_shape) for i, leaf in enumerate(out)
        )
    shape = np.shape(out)
    if not columns:
        return np.zeros(shape + x_shape)
    whole = columns.stacked() if isinstance(columns, BatchedColumns) else None
    if whole is not None and whole.shape[1:] == shape:
        return np.moveaxis(whole.astype(float, copy=False), 0, -1).reshape(shape + x_shape)
    stacked = np.stack(
        [np.broadcast_to(as_array(c).astype(float, copy=False), shape) for c in columns], axis=-1
    )
    return stacked.reshape(shape + x_shape)


Finish = Callable[[Any], Any]


FinishDot = Callable[[Any, Any], Any]


FinishBar = Callable[[Any, Any], Any]
