"""The rule registry: which functions are primitives, and how to differentiate them.

A *rule* is a vector-Jacobian product (VJP) for one positional argument of a
function, written ``lambda g, ans, *args, **kwargs: ...``: given the adjoint
``g`` of the result ``ans`` and the call's own arguments, it returns that
argument's adjoint contribution. Its forward twin, the Jacobian-vector
product (JVP), has the same shape, ``lambda u, ans, *args, **kwargs: ...``:
given the tangent ``u`` of one argument, the result's tangent.

Most JVPs are not written out, but follow from facts beside the VJP:

- an elementwise function's Jacobian is diagonal, so its JVP is its VJP's
  expression with the tangent in place of ``g``;
- a function *linear* in an argument (``np.sum``, ``np.reshape``, ``a @ b``
  in either operand) has itself as its JVP, applied to the tangent;
- a *reduction* (``np.max(x, axis)``) has the JVP ``np.sum(u * D, axis)``,
  where ``D`` is its VJP applied to ones.

>>> import math
>>> rule = lookup(math.sin)
>>> rule.vjps[0](1.0, math.sin(0.0), 0.0)
1.0

Both the source transformer and the runtime tracer read this table, so every
rule is written exactly once. The registry imports no AST library.

Every rule receives ``g`` of exactly the shape of ``ans``. A rule of an
*elementwise* (broadcasting) function may return a contribution of the
broadcast shape; the engines sum it down to the argument's shape (the
transformer only where another operand could have broadcast it). Every other
rule returns exactly the argument's shape.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
import types
from collections.abc import Callable
from typing import Any

from ast_ad.core.records import record

VJP = Callable[..., Any]


@record
class Rule:
    """How to differentiate ``fn``: one VJP per positional argument (``None``: no gradient)."""

    fn: Any
    vjps: tuple[VJP | None, ...] = ()
    nondiff: bool = False
    elementwise: bool = False
    origin: str = ""  # the module that registered the rule (``ast_ad.rules.numpy``, or the user's)
    # forward rules written out (``defjvp``); the rest follow from facts
    jvps: tuple[VJP | None, ...] = ()
    # where the reverse rules of several arguments share their work (a gradient's: one forward pass
    # over it gives them all), ``joint(positions)``: a primitive called as a rule is, ``(g, ans,
    # *args)``, that gives the adjoints of those positional arguments, a tuple in their order;
    # and ``joint_tangent(positions)``, a primitive called as a forward rule is, ``(u, ans,
    # *args)`` with ``u`` the tuple of those arguments' tangents, that gives the result's tangent
    joint: Any = None
    joint_tangent: Any = None

    def vjp(self, argnum: int) -> VJP | None:
        """The rule for positional argument ``argnum``, or ``None``."""
        return self.vjps[argnum] if argnum < len(self.vjps) else None

    def jvp(self, argnum: int) -> Any:
        """The forward rule for positional argument ``argnum``: a function, ``zero``, ``LINEAR``,
        ``REDUCTION`` (see the module's docstring), or ``None`` (none: a tangent there is
        refused)."""
        written = self.jvps[argnum] if argnum < len(self.jvps) else None
        if written is not None:
            return written
        vjp = self.vjp(argnum)
        if vjp is zero:
            return zero
        if argnum in (_fact("linear", self.fn) or ()):
            return LINEAR
        if vjp is not None and self.elementwise:
            return vjp
        if vjp is not None and _fact("reduction", self.fn) is not None:
            return REDUCTION
        return None


LINEAR = "linear"  # the forward rule is the function itself, the tangent in place of the argument
REDUCTION = "reduction"  # the forward rule is np.sum(u * D, axis), D the VJP applied to ones


_RULES: dict[Any, Rule] = {}
# Registrations made outside ast_ad (the user's rules and facts), in order: the persistent cache
# keys on them.
USER_CHANGES: list[tuple[Any, ...]] = []


def _note(kind: str, *payload: Any, up: int = 2) -> None:
    """Record a registration made by the user's code (three frames up: the user, ``def...``,
    here)."""
    if not sys._getframe(up).f_globals.get("__name__", "").startswith("ast_ad"):
        USER_CHANGES.append((kind, *payload))


def _declare(fact: str, fns: tuple[Any, ...]) -> None:
    """Record the yes-or-no ``fact`` for each of ``fns`` (called by a ``def_...`` function)."""
    _note(fact, *fns, up=3)
    _FACTS[fact].update(dict.fromkeys(fns, True))


def zero(g: Any, ans: Any, *args: Any, **kwargs: Any) -> float:
    """The rule of an argument that the result does not depend on (a shape, an array written over
    whole).

    Unlike ``None`` (no rule: a differentiated value there is refused), it contributes nothing;
    the transformer emits no code for it.
    """
    return 0.0


def defvjp(fn: Any, *vjps: VJP | None, elementwise: bool = False) -> None:
    """Register one reverse rule per positional argument of ``fn``."""
    _note("vjp", fn, elementwise, *vjps)
    _RULES[fn] = Rule(
        fn, tuple(vjps), elementwise=elementwise, origin=_caller(), jvps=_written_jvps(fn)
    )


def defvjp_elementwise(fn: Any, *vjps: VJP | None) -> None:
    """Register rules for an elementwise (broadcasting) function."""
    _note("vjp", fn, True, *vjps)
    _RULES[fn] = Rule(fn, tuple(vjps), elementwise=True, origin=_caller(), jvps=_written_jvps(fn))


def defjvp(fn: Any, *jvps: VJP | None) -> None:
    """Register one forward rule per positional argument of ``fn``: ``lambda u, ans, *args,
    **kwargs: ...``.

    ``None`` keeps the forward rule that follows from the function's facts (see the module's
    docstring).
    """
    _note("jvp", fn, *jvps)
    old = _RULES.get(fn)
    if old is None:
        _RULES[fn] = Rule(fn, (), jvps=tuple(jvps), origin=_caller())
    else:
        _RULES[fn] = Rule(fn, old.vjps, old.nondiff, old.elementwise, old.origin, tuple(jvps))


def _written_jvps(fn: Any) -> tuple[VJP | None, ...]:
    old = _RULES.get(fn) if hashable(fn) else None
    return old.jvps if old is not None else ()


def def_nondiff(*fns: Any) -> None:
    """Declare functions whose result carries no gradient (``floor``, ``shape``, ...)."""
    for fn in fns:
        _note("nondiff", fn)
        _RULES[fn] = Rule(fn, nondiff=True, origin=_caller())


# Facts about primitives that the engine reads, beside their rules: fact -> {function: value}.
_FACTS: dict[str, dict[Any, Any]] = {
    "in_place": {},
    "sequence": {},
    "same_kind": {},
    "effect": {},
    "check": {},
    "linear": {},
    "jointly_linear": {},
    "fresh": {},
    "reduction": {},
    "method": {},
    "ranked": {},
    "summed": {},
    "summed_steps": {},
    "view": {},
    "full_reduction": {},
    "casts": {},
    "reads_in_order": {},
    "scaled_by_initial": {},
    "read_as": {},
    "holds_items": {},
    "shape_read": {},
    "meta_read": {},
    "result_axes": {},
    "shape_of": {},
    "new_list": {},
    "identity_read": {},
    "number_result": {},
    "scalar_result": {},
    "numbers_pass": {},
    "floats_pass": {},
    "passes_on_numbers": {},
    "truncates": {},
    "guard": {},
    "remakes": {},
    "container_test": {},
    "view_inverse": {},
    "helper": {},
    "complex": {},
    "makes_complex": {},
    "real_result": {},
    "batched": {},
    "stacked": {},
    "pattern": {},
    "value_pattern": {},
}


def _fact(fact: str, fn: Any) -> Any:
    """The value recorded for ``fn`` under ``fact``, or ``None`` (also for unhashable objects)."""
    try:
        return _FACTS[fact].get(fn)
    except TypeError:  # unhashable
        return None


def def_in_place(fn: Any, twin: Any) -> None:
    """Declare that ``fn(x, *rest)`` changes ``x`` in place, and that ``x = twin(x, *rest)``
    computes the same.

    ``fn`` may be a function (``np.add.at``) or a method of arrays (``np.ndarray.sort``).
    """
    _note("in_place", fn, twin)
    _FACTS["in_place"][fn] = twin


def in_place(fn: Any) -> Any:
    """The functional twin of an in-place ``fn``, or ``None``."""
    return _fact("in_place", fn)


def def_batched(fn: Any, form: Callable[..., Any], structural: bool = False) -> None:
    """Declare how ``fn`` runs on a batch of tangents (``runtime.batched.Batch``: ``B`` values of
    one shape, stacked on a leading axis): ``form`` takes ``fn``'s arguments, some of them batches,
    and returns what ``fn`` returns for each of the ``B`` values, batched (``np.sum`` of a batch
    along ``axis`` is the sum of its stacked data along ``axis + 1``). A numpy function with no
    form refuses a batch, and the batched pass gives way to one pass a tangent.

    ``structural``: the form only moves, copies or picks entries of its batches (a reshape, an
    index, a join), never computes with them, so it serves a sparsity pattern
    (``runtime.batched.Pattern``) as it serves tangents."""
    _note("batched", fn)
    _FACTS["batched"][fn] = (form, structural)


def batched_form(fn: Any) -> Callable[..., Any] | None:
    """How ``fn`` runs on a batch of tangents (``def_batched``), or ``None``."""
    found: tuple[Callable[..., Any], bool] | None = _fact("batched", fn)
    return None if found is None else found[0]


def structural_form(fn: Any) -> Callable[..., Any] | None:
    """``fn``'s batched form where it only moves entries (``def_batched(structural=True)``)."""
    found: tuple[Callable[..., Any], bool] | None = _fact("batched", fn)
    return found[0] if found is not None and found[1] else None


def def_stacked(fn: Any, how: str, *, twin: Any = None, batched: tuple[int, ...] = (),
                sized: bool = False, axis: int | None = None, told: bool = False) -> None:
    """Declare how forward-mode code written for a batch of tangents (``modes.batch``: every
    tangent one array, ``B`` tangents stacked on a leading axis) calls ``fn`` where some of its
    arguments are such stacks. ``how`` is one of:

    - ``"elementwise"``: ``fn`` broadcasts its arguments as numpy does; a stack of fewer axes than
      the result takes ones behind its batch axis, the rest broadcast as they are (ufuncs need no
      declaration);
    - ``"index"``: ``fn(array, key, ...)`` reads or writes ``array[key]``; a stacked array's key
      keeps the batch axis whole (``(slice(None), *key)``), a value written is aligned so;
    - ``"reduce"``: ``fn(array, axis, ...)`` reduces over ``axis`` (positional ``axis`` or the
      keyword), moved one axis on, or over every axis but the batch's where it is ``None``;
    - ``"product"``: a matrix product, ``np.matmul``'s (``np.dot`` where neither operand has more
      than two axes);
    - ``"twin"``: call ``twin``, a function of the runtime written for stacks, where exactly the
      arguments at ``batched`` are stacks (``sized``: the batch's size is passed as ``size=``);
      ``batched`` empty: always, as ``zero_tangent``, whose argument is a value, makes tangents;
      ``told``: where any of the arguments at ``batched`` are stacks, which ones passed as
      ``stacks=`` (a tuple of bools, one per argument).

    A call with stacks for which nothing is declared, or that its declaration does not cover, runs
    the function on ``runtime.batched.Batch``es (as the generated code for one tangent runs in a
    batched pass), which is exact and slower."""
    _note("stacked", fn)
    _FACTS["stacked"][fn] = (how, twin, batched, sized, axis, told)


def stacked_form(fn: Any) -> tuple[str, Any, tuple[int, ...], bool, int | None, bool] | None:
    """How forward-mode code for a batch calls ``fn`` (``def_stacked``), or ``None``."""
    found: tuple[str, Any, tuple[int, ...], bool, int | None, bool] | None = _fact("stacked", fn)
    return found


def def_pattern(fn: Any, form: Callable[..., Any]) -> None:
    """Declare how ``fn`` maps sparsity patterns (``runtime.batched.Pattern``: for each entry of a
    tangent, the inputs it may depend on): ``form`` returns, for each entry of ``fn``'s result, the
    union of the patterns of the entries of the arguments it is computed from (``np.sum``: of the
    entries summed), whatever their values, so that the pattern holds wherever the code takes the
    same branches."""
    _note("pattern", fn)
    _FACTS["pattern"][fn] = form


def pattern_form(fn: Any) -> Callable[..., Any] | None:
    """How ``fn`` maps sparsity patterns: its ``def_pattern`` form, else its structural batched
    form, else ``None``."""
    found: Callable[..., Any] | None = _fact("pattern", fn)
    return found if found is not None else structural_form(fn)


def def_value_pattern(*fns: Any) -> None:
    """Declare functions whose derivative's sparsity depends on their arguments' values, not only
    on their shapes (``np.sort``: which entry of the result each entry of the argument moves is
    the order of the values): a sparsity pattern found where the code calls one holds at that
    point alone (``api.sparse.holds_everywhere``)."""
    _declare("value_pattern", fns)


def has_value_pattern(fn: Any) -> bool:
    return bool(_fact("value_pattern", fn))


def def_linear(fn: Any, *argnums: int) -> None:
    """Declare ``fn`` linear in each of these positional arguments while the others stay fixed
    (``np.sum`` in 0; ``np.matmul`` in 0 and 1): ``fn(..., a + b, ...) == fn(..., a, ...) + fn(...,
    b, ...)`` and ``fn(..., 0, ...) == 0``. Its forward rule is then ``fn`` itself, applied to the
    tangent."""
    _note("linear", fn, *argnums)
    _FACTS["linear"][fn] = frozenset(argnums) | (_fact("linear", fn) or frozenset())


def linear_in(fn: Any) -> frozenset[int]:
    return _fact("linear", fn) or frozenset()


def def_jointly_linear(fn: Any, *argnums: int) -> None:
    """Declare ``fn`` linear in these positional arguments taken together, the others fixed:
    ``fn(a + b, i, c + d) == fn(a, i, c) + fn(b, i, d)`` (``assign_item`` in the array and the value
    written: the array with one entry replaced). Where all of them move, forward mode's tangent is
    ``fn`` of their tangents, one call, rather than each argument's rule summed."""
    _note("jointly_linear", fn, *argnums)
    _FACTS["jointly_linear"][fn] = tuple(sorted(argnums))


def jointly_linear(fn: Any) -> tuple[int, ...]:
    found: tuple[int, ...] = _fact("jointly_linear", fn) or ()
    return found


def def_fresh(*fns: Any, array_at: int | None = None) -> None:
    """Declare that each of ``fns`` returns a new array that no other object holds or shares memory
    with (``assign_item`` copies before it writes), or does so where its argument ``array_at`` is
    an array (``owned_adjoint(g, x)`` makes one for an array ``x``, and gives ``g`` itself for a
    number): a name bound to its result, and read by nothing else, may be written in place
    (``analysis.straight_writes``)."""
    _note("fresh", *fns, array_at)
    _FACTS["fresh"].update(dict.fromkeys(fns, (array_at,)))


def fresh_result(fn: Any) -> tuple[int | None] | None:
    """``(array_at,)`` for a function declared by ``def_fresh`` (``array_at``: ``None`` where its
    result is always new), else ``None``."""
    found: tuple[int | None] | None = _fact("fresh", fn)
    return found


def def_reduction(fn: Any, axes: tuple[int, ...] | None = None) -> None:
    """Declare ``fn`` a reduction: each entry of its result depends only on the entries of its
    arguments that it combines, over the call's ``axis`` argument (or over the fixed ``axes``, as
    for ``np.linalg.det``)."""
    _note("reduction", fn, axes)
    _FACTS["reduction"][fn] = ("axis",) if axes is None else axes


def reduction_axes(fn: Any) -> tuple[Any, ...] | None:
    """``("axis",)`` for a reduction over its ``axis`` argument, the fixed axes, or ``None``."""
    axes: tuple[Any, ...] | None = _fact("reduction", fn)
    return axes


def reduced_over(rule: Rule, k: int, args: Any, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """``(axis, keepdims)`` of a reduction's call: its fixed axes, or the call's own ``axis`` and
    ``keepdims`` (as the call gives them: values, or expressions standing for them), its reverse
    rule's defaults else."""
    axes = reduction_axes(rule.fn)
    if axes != ("axis",):
        return axes, False
    vjp = rule.vjps[k]
    assert vjp is not None  # a reduction's forward rule is made from its reverse rule
    bound = inspect.signature(vjp).bind(None, None, *args, **kwargs)
    bound.apply_defaults()
    return bound.arguments.get("axis"), bound.arguments.get("keepdims", False)


def def_vjp_by_ranks(fn: Any, ranks: tuple[int, ...], *vjps: VJP | None) -> None:
    """Reverse rules for ``fn`` where its arguments are numpy arrays with these numbers of axes
    (``ast_ad.analysis.kinds`` tells where that is certain): short enough to inline (``g @ a``)
    where the general rule calls a helper that looks at the axes on every call. ``None`` keeps the
    general rule for that argument."""
    _note("ranked", fn, ranks, *vjps)
    _FACTS["ranked"].setdefault(fn, {})[ranks] = tuple(vjps)


def has_ranked(fn: Any) -> bool:
    """Whether ``fn`` has rules of ``def_vjp_by_ranks``."""
    return _fact("ranked", fn) is not None


def vjp_by_ranks(fn: Any, ranks: tuple[int | None, ...], argnum: int) -> VJP | None:
    """The rule of ``def_vjp_by_ranks`` for argument ``argnum`` at these numbers of axes, or
    ``None``."""
    vjps = (_fact("ranked", fn) or {}).get(ranks, ())
    return vjps[argnum] if argnum < len(vjps) else None


def ranked_rules() -> list[tuple[Any, tuple[int, ...], tuple[VJP | None, ...]]]:
    """Every rule of ``def_vjp_by_ranks``: (function, numbers of axes, rules), for the tests."""
    return [
        (fn, ranks, vjps) for fn, table in _FACTS["ranked"].items() for ranks, vjps in table.items()
    ]


def def_summed(fn: Any, summed: Any, fixed: int, steps: Any = None) -> None:
    """Declare that a loop's contributions ``fn(g, ...)`` to an operand that stays fixed through the
    loop (argument ``fixed`` of ``fn``) can wait until after it: ``summed(terms, fixed operand)``
    adds them all at once, where ``terms`` holds each step's ``g`` and the one other argument
    (``matmul_vjp_a``: the outer products of a matrix applied to a new vector each step, as one
    product of the stacked vectors; see ``ast_ad.optimize.batching``). ``steps``, if given, adds
    the same from the steps' ``g`` stacked (``runtime.stacked_steps``) and the list of the other
    arguments, ``steps(gs, others, fixed operand)``: one stack of a ``g`` serves every product it is
    summed in."""
    _note("summed", fn, summed, fixed, steps)
    _FACTS["summed"][fn] = (summed, fixed)
    if steps is not None:
        _FACTS["summed_steps"][fn] = steps


def summed_over_steps(fn: Any) -> tuple[Any, int] | None:
    """``(the helper that sums a loop's steps, the position of the fixed operand)`` for ``fn``, or
    ``None``."""
    found: tuple[Any, int] | None = _fact("summed", fn)
    return found


def summed_by_columns(fn: Any) -> Any:
    """The helper that sums a loop's contributions ``fn(g, ...)`` from the stacked ``g`` and the
    list of the other operands (``def_summed``'s ``steps``), or ``None``."""
    return _fact("summed_steps", fn)


def def_shape_read(fn: Any, k: int, by_shape: Any = None) -> None:
    """Declare that ``fn`` reads only the shape of its positional argument ``k``, an array:
    ``by_shape``, called with that array's shape in its place, computes the same (``by_shape``
    ``None``: ``fn``'s value is the shape, as for ``np.shape``). Reverse mode then keeps only the
    shape of an array a loop overwrites, where the backward pass reads nothing else of it
    (``saving.Saving.shape_only``)."""
    _note("shape_read", fn, k, by_shape)
    _FACTS["shape_read"][fn] = (k, by_shape)


def shape_read(fn: Any) -> tuple[int, Any] | None:
    """``(the argument read for its shape, what takes the shape in its place)`` for ``fn``, or
    ``None``."""
    found: tuple[int, Any] | None = _fact("shape_read", fn)
    return found


def def_meta_read(fn: Any, *ks: int) -> None:
    """Declare that ``fn`` reads of each of its positional arguments ``ks`` (an array, or a list or
    tuple of arrays) only its shape, dtype and array type: ``runtime.stand_in`` of it may take its
    place. Reverse mode then keeps a stand-in, not the array, for a helper's backward pass that
    reads nothing else of it (``saving.Saving.meta_only``)."""
    _note("meta_read", fn, ks)
    _FACTS["meta_read"][fn] = frozenset(ks)


def meta_read(fn: Any) -> frozenset[int]:
    """The positional arguments ``fn`` reads only for their shapes, dtypes and types
    (``def_meta_read``)."""
    found: frozenset[int] = _fact("meta_read", fn) or frozenset()
    return found


def meta_positions(fn: Any) -> frozenset[int]:
    """The positional arguments ``fn`` reads only for their shapes, dtypes and types: those it
    declares so (``def_meta_read``), and the one it reads for its shape alone (``def_shape_read``).
    """
    positions = meta_read(fn)
    shape = shape_read(fn)
    return positions | {shape[0]} if shape is not None else positions


def def_result_axes(fn: Any, axes: Callable[[tuple[int | None, ...]], Any]) -> None:
    """Declare where the axes of ``fn``'s result come from: ``axes(ranks)``, given its positional
    arguments' numbers of axes, gives for each axis of the result the pair ``(argument, axis)``
    whose length it has, or ``None`` where the ranks do not decide that (``np.dot`` of a matrix and
    a vector: ``((0, 0),)``; a rank is ``None`` for an argument that is no array of known axes).
    Reverse mode then computes such a result's shape once, from the arguments' shapes, where no
    statement binds those arguments again, instead of keeping it for every step of a loop
    (``saving.invariant_shapes``); and a result so made has the shape class of those axes
    (``activity.shape_classes``: ``np.zeros_like(x)`` has ``x``'s, ``np.dot(w, h)`` and
    ``np.dot(u, x)`` one class where ``w`` and ``u`` have as many rows)."""
    _note("result_axes", fn, axes)
    _FACTS["result_axes"][fn] = axes


def def_shape_of(fn: Any, k: int, positional: int | None = None) -> None:
    """Declare that ``fn``'s result has the shape of its argument ``k``, whatever that argument's
    number of axes, in calls of at most ``positional`` positional arguments (a further one may
    give another shape: ``np.zeros_like``'s fifth). ``np.zeros_like(x)`` and an entry's adjoint
    scattered into zeros of its array's shape (``getitem_vjp(g, x, i)``) are so: the result has
    the shape class of that argument even where its rank is unknown (code made for any shapes,
    ``activity.shape_classes``), and the axes of it where the rank is known (``def_result_axes``,
    declared with it)."""
    def axes(ranks: tuple[int | None, ...]) -> tuple[tuple[int, int], ...] | None:
        rank = ranks[k] if len(ranks) > k else None
        if rank is None or positional is not None and len(ranks) > positional:
            return None
        return tuple((k, axis) for axis in range(rank))
    def_result_axes(fn, axes)
    _FACTS["shape_of"][fn] = (k, positional)


def shape_of(fn: Any, count: int) -> int | None:
    """The argument whose shape the result of ``fn`` called with ``count`` positional arguments
    has, whatever its rank (``def_shape_of``), or ``None``."""
    found = _fact("shape_of", fn)
    if found is None or count <= found[0] or found[1] is not None and count > found[1]:
        return None
    k: int = found[0]
    return k


def declares_result_axes(fn: Any) -> bool:
    """Whether ``fn`` declares where its result's axes come from (``def_result_axes``)."""
    return _fact("result_axes", fn) is not None


def result_axes(fn: Any, ranks: tuple[int | None, ...]) -> tuple[tuple[int, int], ...] | None:
    """The ``(argument, axis)`` each axis of ``fn``'s result has the length of, for arguments of
    ``ranks`` (``def_result_axes``), or ``None``."""
    axes = _fact("result_axes", fn)
    found: tuple[tuple[int, int], ...] | None = axes(ranks) if axes is not None else None
    return found


_OUT_POSITIONS: dict[Any, int | None] = {}


def out_position(fn: Any) -> int | None:
    """The position of numpy's ``fn``'s ``out`` parameter, where a call may give it by position (a
    ufunc's one output after its inputs: ``np.sin(x, y)``; ``np.dot(a, b, out)``, ``np.cumsum(x, 0,
    None, out)``): the array it writes its result into. ``None`` where it has none, or takes it
    only by keyword, or is not numpy's. (numpy's own signature is the fact; a call that gives it by
    position is a write, as ``out=`` is.)"""
    try:
        return _OUT_POSITIONS[fn]
    except KeyError:
        pass
    except TypeError:  # (unhashable)
        return None
    found: int | None = None
    if type(fn).__name__ == "ufunc":  # (numpy's, known without importing it here)
        found = fn.nin if fn.nout == 1 else None
    elif (getattr(fn, "__module__", None) or "").split(".")[0] == "numpy":
        # (numpy's meaning of ``out``; a parameter of that name in a user's primitive is an input)
        try:
            parameters = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            parameters = []
        for k, parameter in enumerate(parameters):
            if parameter.kind is not parameter.POSITIONAL_OR_KEYWORD:
                break
            if parameter.name == "out":
                found = k
                break
    _OUT_POSITIONS[fn] = found
    return found


def def_read_as(fn: Any, stand_in: Any) -> None:
    """Declare that ``stand_in``, a function in ast_ad's language, computes what ``fn`` computes
    (step by step, where ``fn`` takes a faster way outside the language): a transformation that has
    no rule of ``fn``'s to follow differentiates ``stand_in``'s source instead
    (``summed_matmul_vjp_a``, a loop's batched adjoints)."""
    _note("read_as", fn, stand_in)
    _FACTS["read_as"][fn] = stand_in


def read_as(fn: Any) -> Any:
    """The stand-in whose source is read for ``fn`` (``def_read_as``), or ``None``."""
    return _fact("read_as", fn)


def def_method(name: str, fn: Any) -> None:
    """Declare that the array method ``x.name(*args)`` computes ``fn(x, *args)``
    (``x.sum(axis=0)``)."""
    _note("method", name, fn)
    _FACTS["method"][name] = fn


def method(name: str) -> Any:
    """The function an array method computes, or ``None``."""
    return _FACTS["method"].get(name)


def def_helpers(*fns: Any) -> None:
    """Declare ast_ad's own helpers of generated code (``ast_ad.runtime`` declares all of its own):
    an exported module copies them with their source, and reverse mode reads a helper that has no
    rule for an argument by its source, as it reads the user's functions."""
    for fn in fns:
        _FACTS["helper"][fn] = True
        _HELPERS_BY_NAME[fn.__name__] = fn


_HELPERS_BY_NAME: dict[str, Any] = {}


def is_helper(fn: Any) -> bool:
    """Whether ``fn`` is one of ast_ad's own helpers of generated code (``def_helpers``)."""
    return bool(_fact("helper", fn))


def helper_named(name: str) -> Any:
    """ast_ad's own helper called ``name``, or ``None``."""
    return _HELPERS_BY_NAME.get(name)


def def_sequence(*fns: Any) -> None:
    """Declare functions that return a tuple or list (or a dict: a solver's result object): their
    results' adjoints add element by element."""
    _declare("sequence", fns)


def returns_sequence(fn: Any) -> bool:
    return bool(_fact("sequence", fn))


def def_new_list(*fns: Any, passes: tuple[int, ...] = ()) -> None:
    """Declare functions whose result, where it is a list, is a list object the call made, which no
    argument is or holds (``list(xs)``, ``spread(g, xs)``), or one of the arguments at the positions
    ``passes``, as it is (``add_adjoints(None, xs)`` is ``xs``). A name that only ever holds such
    lists owns them, as it owns one made with ``[]`` (``analysis.owned_lists``): reverse mode can
    undo its pops, as it must for the gradient code that pops its adjoints' lists, differentiated
    again."""
    _note("new_list", *fns, passes)
    _FACTS["new_list"].update(dict.fromkeys(fns, passes))


def new_list(fn: Any) -> tuple[int, ...] | None:
    """The positions of the arguments ``fn`` may return as they are (see ``def_new_list``), or
    ``None`` where it is not declared to make new lists."""
    found: tuple[int, ...] | None = _fact("new_list", fn)
    return found


def def_number_result(*fns: Any) -> None:
    """Declare functions that give a Python ``float``, ``int`` or ``bool`` whatever their arguments,
    never an array (``math.cos``, ``math.floor``). Products and sums of their results are computed
    in Python's floats, which cannot wrap around as numpy's integers do: the generated code may take
    a shared factor out of them (``fold.shared_factor``), and the kinds analysis knows their results
    hold numbers."""
    _declare("number_result", fns)


def gives_number(fn: Any) -> bool:
    return bool(_fact("number_result", fn))


def def_scalar_result(*fns: Any) -> None:
    """Declare functions whose result has no axes (a Python or numpy number, or another library's
    0-d array), never a list, tuple or dict: a number times the result is the result scaled
    (``fold.scaled_adjoints`` moves a factor out of a call linear in an argument only then: a list
    times a float is no scaling)."""
    _declare("scalar_result", fns)


def gives_scalar(fn: Any) -> bool:
    return bool(_fact("scalar_result", fn)) or gives_number(fn)


def def_numbers_pass(*fns: Any) -> None:
    """Declare functions that, given numbers alone (a Python or numpy number for each argument, no
    axes), give their first argument back (``unbroadcast(g, x)``, ``fit(dot, ans)``: there is no
    shape to bring a number to). Where the kinds analysis proves each argument a number, the call
    is a copy of its first argument (``optimize.guards.numbers_passed``): code for any shapes,
    lowered into code that knows more (a gradient or a jvp written in a body), sheds them."""
    _declare("numbers_pass", fns)


def passes_numbers(fn: Any) -> bool:
    return bool(_fact("numbers_pass", fn))


def def_truncates(fn: Any, array: int, value: int) -> None:
    """Declare that ``fn`` writes its argument ``value`` into a copy of its argument ``array``, of
    that array's dtype (``assign_item(x, index, v)``): into integers or booleans the value is
    truncated and carries no tangent. Forward mode (and the tracer) pass the value's tangent
    through ``written_tangent(u, x)`` before its forward rule, or before the call itself where the
    tangent is linear in the array and the value together (``def_jointly_linear``), where the array
    is not proven to hold floats."""
    _note("truncates", fn, array, value)
    _FACTS["truncates"][fn] = (array, value)


def truncated(fn: Any) -> tuple[int, int] | None:
    """``(array, value)`` of ``def_truncates``, or ``None``."""
    found: tuple[int, int] | None = _fact("truncates", fn)
    return found


def def_passes_on_numbers(fn: Any, k: int) -> None:
    """Declare a check (``def_check``) that raises nothing where its positional argument ``k`` is
    a real number (``check_gradient_value(where, out)``: a gradient's value must be one). Where
    the kinds analysis proves it a number and the complex analysis real, the call is left out
    (``optimize.guards.numbers_passed``)."""
    _note("passes_on_numbers", fn, k)
    _FACTS["passes_on_numbers"][fn] = k


def passes_on_numbers(fn: Any) -> int | None:
    """The argument of ``def_passes_on_numbers``, or ``None``."""
    found: int | None = _fact("passes_on_numbers", fn)
    return found


def def_floats_pass(fn: Any, k: int) -> None:
    """Declare that ``fn`` gives its first argument back where its argument ``k`` is a number or a
    numpy array of floats (``written_tangent(u, ans)``: only a write into integers truncates).
    Where the kinds analysis proves it so, the call is a copy of its first argument
    (``optimize.guards.numbers_passed``)."""
    _note("floats_pass", fn, k)
    _FACTS["floats_pass"][fn] = k


def floats_pass(fn: Any) -> int | None:
    """The argument of ``def_floats_pass``, or ``None``."""
    found: int | None = _fact("floats_pass", fn)
    return found


def def_identity_read(fn: Any, k: int) -> None:
    """Declare that ``fn`` reads its positional argument ``k``, a tuple, only to compare the objects
    in it with another by identity, and keeps nothing of it (``check_in_place(x, others, where)``).
    A tuple that nothing but such calls reads holds nothing that a change through another name could
    matter to: the aliasing checks of the code that reads this code again leave it out, and so does
    the kinds analysis."""
    _note("identity_read", fn, k)
    _FACTS["identity_read"][fn] = k


def identity_read(fn: Any) -> int | None:
    """The position of the argument ``fn`` reads only by identity (``def_identity_read``), or
    ``None``."""
    found: int | None = _fact("identity_read", fn)
    return found


def def_guard(fn: Any, k: int) -> None:
    """Declare that ``fn`` guards a write: it refuses at run time when another live variable may
    reach the object its positional argument ``k`` holds, about to change (``check_in_place(x,
    others, where)``).

    The memory model (``aliasing``) writes such a call where it cannot prove that no other name sees
    the object; every pass that would move the object (a loop's private copy written in place,
    ``analysis.in_place_writes``) reads the guarded names through ``guarded_argument`` and keeps the
    general path for them, since a copy would make the guard compare a fresh object and pass.
    """
    _note("guard", fn, k)
    _FACTS["guard"][fn] = k


def guarded_argument(fn: Any) -> int | None:
    """The position of the argument whose object ``fn`` guards before a write (``def_guard``), or
    ``None``."""
    found: int | None = _fact("guard", fn)
    return found


def def_remakes(fn: Any, k: int | None, others: int | None = None) -> None:
    """Declare that ``fn`` makes a variable again after a write in place, from its old value, its
    positional argument ``k`` (if any: ``memory_view(plan, key, root, old)``, assigned to the
    variable ``old`` is), and reads the tuple at ``others`` (if any) only to find the memory it
    shares (``shared_family``, ``memory_root``): a name not bound yet (the lowering's ``None``)
    sees nothing, and is no more bound after it (``analysis.unbound`` neither checks these reads
    nor counts the assignment as a binding)."""
    _note("remakes", fn, k, others)
    _FACTS["remakes"][fn] = (k, others)


def remade_argument(fn: Any) -> tuple[int | None, int | None] | None:
    """``(k, others)`` of ``def_remakes``, or ``None``."""
    found: tuple[int | None, int | None] | None = _fact("remakes", fn)
    return found


def def_container_test(*fns: Any) -> None:
    """Declare that ``fn(x)`` only says whether ``x`` is a list, tuple or dict: false where ``x``
    is a number or a numpy array, which the kinds analysis may know (``optimize.guards``)."""
    for fn in fns:
        _note("container_test", fn)
        _FACTS["container_test"][fn] = True


def container_test(fn: Any) -> bool:
    """Whether ``fn`` is a test of being a list, tuple or dict (``def_container_test``)."""
    return bool(_fact("container_test", fn))


def def_view(*fns: Any) -> None:
    """Declare functions whose result may share memory with their first argument (``x[1:]``,
    ``x.T``, ``np.reshape``): a write through one is seen through the other, so ast_ad guards such
    writes."""
    _declare("view", fns)


def returns_view(fn: Any) -> bool:
    return bool(_fact("view", fn))


def def_view_inverse(fn: Any, inverse: Any, takes_base: bool = False) -> None:
    """Declare how a write through a view ``fn(x, *args)`` reaches ``x``: ``x`` is ``inverse(view,
    *args)`` after it (``takes_base``: ``inverse(x, view, *args)``, where the base's shape is
    needed), a registered primitive. The memory model asks it (``aliasing``), where the view is
    proved to be that very view."""
    _note("view_inverse", fn, inverse)
    _FACTS["view_inverse"][fn] = (inverse, takes_base)


def view_inverse(fn: Any) -> tuple[Any, bool] | None:
    """``(inverse, takes_base)`` for a view ``fn`` a write through which reaches its base, or
    ``None``."""
    found: tuple[Any, bool] | None = _fact("view_inverse", fn)
    return found


def def_holds_items(*fns: Any, containers_only: bool = False) -> None:
    """Declare functions whose result may hold the very objects inside their arguments
    (``list(xs)``, ``xs + ys``, ``sorted(xs)``: a new list of the same arrays; ``list(x)`` of an
    array: views of its rows): a write into an item through one is seen through the other, so ast_ad
    guards such writes. ``containers_only``: only where the argument is a list, tuple or dict
    (``x.copy()``: an array's copy shares nothing)."""
    _note("holds_items", *fns, containers_only)
    _FACTS["holds_items"].update(dict.fromkeys(fns, "containers" if containers_only else "always"))


def holds_items(fn: Any) -> str | None:
    """``"always"``, ``"containers"`` (see ``def_holds_items``), or ``None``."""
    found: str | None = _fact("holds_items", fn)
    return found


def def_full_reduction(*fns: Any) -> None:
    """Declare functions that give one number when called with one argument alone
    (``np.sum(x)``)."""
    _declare("full_reduction", fns)


def is_full_reduction(fn: Any) -> bool:
    return bool(_fact("full_reduction", fn))


def fact_table(fact: str) -> dict[Any, Any]:
    """Every function declared with ``fact`` and what was declared of it (``"summed"``: ``(helper,
    fixed)``, ``"shape_read"``: ``(argument, by_shape)``...): for the tests, and for a reader that
    looks for each one."""
    return dict(_FACTS[fact])


def with_fact(fact: str) -> list[Any]:
    """Every function declared with ``fact`` (``"view"``, ``"full_reduction"``, ``"sequence"``...),
    for the tests."""
    return list(_FACTS[fact])


def def_complex(fn: Any, *vjps: VJP | None, jvps: tuple[VJP | None, ...] = ()) -> None:
    """Declare the rules ``fn`` follows where an argument may be complex.

    With no ``vjps``: its rules hold for complex arguments as they are written (a holomorphic
    function's rules, ``g * np.cos(x)``, and a linear function's, which transpose and never
    conjugate). Else these reverse rules (and forward rules ``jvps``) take their place there: the
    rules of a function that is not holomorphic (``np.abs``, ``np.conj``, ``np.imag``). ``None``
    in ``vjps`` refuses a differentiated complex argument there (``np.sign``).

    The convention is autograd's and JAX's: the adjoint of a complex value ``z = x + iy`` is
    ``dL/dx - i dL/dy``, so a holomorphic function's reverse rule is its real one, and a real
    argument's adjoint is the real part of what its rule gives (the engines take it).
    """
    _note("complex", fn, *vjps)
    if not vjps and not jvps:
        _FACTS["complex"][fn] = True
        return
    base = lookup(fn)
    _FACTS["complex"][fn] = Rule(
        fn,
        tuple(vjps),
        elementwise=base.elementwise if base is not None else False,
        origin=_caller(),
        jvps=tuple(jvps),
    )


def complex_rule(fn: Any) -> Rule | None:
    """The rules of ``fn`` where an argument may be complex (``def_complex``), or ``None``: not
    known to hold there. A function without a gradient (``nondiff``) keeps its rule."""
    found = _fact("complex", fn)
    rule = lookup(fn)
    if isinstance(found, Rule):
        return found
    if found or (rule is not None and rule.nondiff):
        return rule
    return None


def def_makes_complex(*fns: Any) -> None:
    """Declare functions whose result may be complex where no argument is (``np.fft.fft``,
    ``complex``)."""
    _declare("makes_complex", fns)


def makes_complex(fn: Any) -> bool:
    return bool(_fact("makes_complex", fn))


def def_real_result(*fns: Any) -> None:
    """Declare functions whose result is real whatever their arguments (``np.abs``, ``np.real``,
    ``np.fft.irfft``)."""
    _declare("real_result", fns)


def gives_real(fn: Any) -> bool:
    return bool(_fact("real_result", fn))


def def_casts(*fns: Any) -> None:
    """Declare functions whose rules follow their ``dtype=`` (``np.array``, ``np.asarray``: a cast
    to integers gives no gradient). Every other function given an integer ``dtype=`` is refused
    (``keyword_hazard``): its rules are those of the float result."""
    _declare("casts", fns)


def def_reads_in_order(*fns: Any) -> None:
    """Declare functions whose ``order=`` says in which order entries are read (``np.reshape``,
    ``np.ravel``): their rules are those of C order, and another order is refused."""
    _declare("reads_in_order", fns)


def def_scaled_by_initial(*fns: Any) -> None:
    """Declare functions whose ``initial=`` multiplies the result (``np.prod``): refused, the rules
    leave it out."""
    _declare("scaled_by_initial", fns)


UNKNOWN_VALUE = object()  # ``keyword_hazard``'s value of an argument computed at run time
# Keywords of numpy's functions that change no derivative where ``keyword_hazard`` lets them through
# (layout, copying, the sort's algorithm, einsum's plan; a float dtype=, where=True, a sum's
# initial=).
FOLLOWED_KEYWORDS = frozenset(
    {
        "out",
        "casting",
        "subok",
        "kind",
        "stable",
        "copy",
        "like",
        "device",
        "optimize",
        "order",
        "dtype",
        "where",
        "initial",
    }
)


def rule_keywords(rule: Rule) -> frozenset[str]:
    """The parameter names a rule's functions read after ``g, ans`` (or ``u, ans``): the keywords it
    follows."""
    return _rule_keywords(rule.fn, rule.vjps, rule.jvps)


@functools.cache
def _rule_keywords(fn: Any, vjps: tuple[Any, ...], jvps: tuple[Any, ...]) -> frozenset[str]:
    names: set[str] = set()
    for part in (*vjps, *jvps):
        if not callable(part) or part is zero:
            continue
        try:
            params = list(inspect.signature(part).parameters.values())[2:]
        except (TypeError, ValueError):
            continue
        names |= {p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    return frozenset(names)


def keyword_hazard(fn: Any, name: str, value: Any) -> str | None:
    """Why the argument ``name`` (given by keyword or by position) of a call of the primitive ``fn``
    makes its value differ from what its rules differentiate, or ``None``. ``value`` is the
    argument's value where it is written as a constant, else ``UNKNOWN_VALUE``.

    The rules read the arguments they name and take the rest (``*args, **kwargs``) as not changing
    the derivative; these are the arguments of numpy's functions that do: ``where=`` (entries left
    out), an integer ``dtype=`` (the result truncated to integers), ``order=`` other than C where
    entries are read in that order, a product's ``initial=``, and ``copy=`` other than True (the
    result may be the argument itself, which the aliasing checks would not know)."""
    if name == "where" and value is not True:
        return (
            "where= leaves entries out, which the rules of this function do not follow: select "
            "them first, np.where(mask, x, 0.0) (or the reduction's identity), then call it "
            "without where="
        )
    if name == "dtype" and value is not None and not _fact("casts", fn):
        import numpy as np  # already imported by whatever calls a numpy function

        try:
            kind = np.dtype(value).kind if value is not UNKNOWN_VALUE else "?"
        except TypeError:
            kind = "?"
        if kind not in "fc":
            return (
                "dtype= other than a float type (an integer result, or one not known before the "
                "call) is not followed by the rules of this function: compute in floats, then cast "
                "with .astype(...)"
            )
    if name == "order" and value not in ("C", None) and _fact("reads_in_order", fn):
        return (
            "order= other than 'C' reads the entries in another order, which the rules of this "
            "function do not follow: transpose first (np.reshape(x.T, ...)), or write order='C'"
        )
    if name == "initial" and _fact("scaled_by_initial", fn):
        return ("initial= is not followed by the rules of this function: multiply the result by it "
                "instead")
    if name == "copy" and value is not True and not _fact("view", fn):  # a view's is followed
        return (
            "copy= other than True may give back the array itself, which a later write would "
            "change through both names, where ast_ad computes a new array: leave copy= out (or "
            "write copy=True)"
        )
    return None


def def_same_kind(*fns: Any, argnums: tuple[int, ...] = (0,)) -> None:
    """Declare functions whose result is a list, tuple or dict when one of their arguments at
    ``argnums`` is (``assign_item``: its first; ``getitem_vjp(g, x, index)``: ``x``, whose adjoint
    it is)."""
    _note("same_kind", *fns, argnums)
    _FACTS["same_kind"].update(dict.fromkeys(fns, argnums))


def keeps_kind(fn: Any) -> tuple[int, ...]:
    """The positions of the arguments whose kind ``fn``'s result has (a container where one of them
    is)."""
    argnums: tuple[int, ...] = _fact("same_kind", fn) or ()
    return argnums


def def_effect(*fns: Any) -> None:
    """Declare functions called for an effect alone (``print``): they read their arguments and
    change none."""
    _declare("effect", fns)


def is_effect(fn: Any) -> bool:
    return bool(_fact("effect", fn))


def def_check(*fns: Any) -> None:
    """Declare functions the generated code calls to refuse what it cannot compute as Python does
    (an in-place write another name sees, a name not bound yet, lengths that differ): each raises
    there, and otherwise gives its argument back or nothing. A pass that leaves out what nothing
    reads keeps them (``optimize.dead``)."""
    _declare("check", fns)


def is_check(fn: Any) -> bool:
    return bool(_fact("check", fn))


def is_pure(fn: Any) -> bool:
    """Whether a call of ``fn`` only computes its value: a function ast_ad registered rules for
    (``print``, a function that changes an argument in place, and a user's own rules, which may keep
    state, are not)."""
    rule = _RULES.get(fn) if hashable(fn) else None
    return (
        rule is not None
        and rule.origin.startswith("ast_ad.")
        and not is_effect(fn)
        and in_place(fn) is None
    )


def makes_new_object(fn: Any) -> bool:
    """Whether a call of ``fn`` gives an object no other name holds, sharing no memory with its
    arguments: a pure function of ast_ad's (``is_pure``) that returns no view of an argument
    (``def_view``) and no container of its arguments' objects (``def_holds_items``). The memory
    model reads ``y = np.stack(rows)`` so in straight-line code (``aliasing.Memory.note_views``:
    only views and held items share), and a loop's names so (``aliasing.loop_shared``); that
    every registered function's result shares memory with its argument only where declared is
    tested against numpy's answer (``tests/test_rules.py``)."""
    return is_pure(fn) and not returns_view(fn) and holds_items(fn) is None


# Rules for optional libraries, registered when the user's code first names the library: importing
# scipy.special alone costs more than all the rest of ast_ad.
_LAZY: dict[str, list[str]] = {
    "scipy": ["ast_ad.rules.scipy", "ast_ad.rules.scipy_linalg", "ast_ad.rules.scipy_integrate",
              "ast_ad.rules.scipy_sparse"]
}


def def_lazy_rules(library: str, module: str) -> None:
    """Register the rules in ``module`` (by its name: nothing is imported now) when the user's code
    first names ``library``: the layer above the rules registers so those that need derivatives of
    the user's own functions (``api.solvers``)."""
    if module not in _LAZY.setdefault(library, []):
        _LAZY[library].append(module)


def load_rules_for(obj: Any) -> None:
    """Register the rules of the optional library ``obj`` belongs to (a module, or a function of
    one).

    A ufunc does not say its module: one without a rule loads every optional library that is
    installed.
    """
    if not _LAZY:
        return
    module = (
        obj.__name__
        if isinstance(obj, types.ModuleType)
        else getattr(obj, "__module__", None) or ""
    )
    unknown_ufunc = type(obj).__name__ == "ufunc" and lookup(obj) is None
    for library, modules in list(_LAZY.items()):
        if unknown_ufunc or module == library or module.startswith(library + "."):
            del _LAZY[library]
            for rules in modules:
                importlib.import_module(rules)


def load_all_rules() -> None:
    """Register the rules of every optional library that is installed (for tables and tests)."""
    for modules in list(_LAZY.values()):
        for rules in modules:
            importlib.import_module(rules)
    _LAZY.clear()


def _caller() -> str:
    """The module that called the registering function (two frames up)."""
    frame = sys._getframe(2)
    return str(frame.f_globals.get("__name__", ""))


def lookup(fn: Any) -> Rule | None:
    """The rule registered for ``fn``, or ``None`` (also for unhashable objects).

    An object that makes its own rules (a gradient ``ast_ad.grad`` returned: ``ast_ad_rule``) gives
    them.
    """
    try:
        rule = _RULES.get(fn)
    except TypeError:
        return None
    if rule is None:
        make = getattr(type(fn), "ast_ad_rule", None)
        return make(fn) if make is not None else None
    return rule


def hashable(obj: Any) -> bool:
    """Whether ``obj`` can be looked up in a table keyed by functions."""
    try:
        hash(obj)
    except TypeError:
        return False
    return True


def registered() -> tuple[Rule, ...]:
    """Every registered rule, in registration order."""
    return tuple(_RULES.values())
