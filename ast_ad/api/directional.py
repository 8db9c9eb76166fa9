"""Forward mode (``jvp``) and ``Directional``, the primitive a gradient's rules are (a derivative
along given directions, to any order)."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import numpy as np

from ast_ad.api.arguments import _check_differentiable
from ast_ad.api.lowering import (
    Lowered,
    _all_leaves,
    forward_at,
    forward_stacked,
    jvp_code,
    located,
    lower,
    raw_zeros,
)
from ast_ad.backend.load import MISSING, Loaded
from ast_ad.backend.scalar_calls import NOT_SCALARS, jvp_caller, layout_caller
from ast_ad.core import logs, registry
from ast_ad.errors import (
    ASTADError,
    LocatedError,
)
from ast_ad.runtime import is_array, of_type, refuse_missing_tangents
from ast_ad.runtime.batched import BatchRefused, is_batch, unstacked

V = TypeVar("V")  # what a function returns: its tangent has its type


# ---- forward mode --------------------------------------------------------------------------------
def jvp(fun: Callable[..., V], primals: tuple[Any, ...], tangents: tuple[Any, ...], *,
        batched: bool = False, jit: Literal["numba"] | None = None) -> tuple[V, V]:
    """``(fun(*primals), J tangents)``: forward mode, one pass, no tape.

    ``tangents`` matches ``primals`` one for one (containers as containers); ``None``
    marks an argument that is not differentiated (integers, flags).

    ``batched=True``: each tangent holds many directions along a first axis of its own (``(B,)``
    for a float, ``(B, *x.shape)`` for an array ``x``), and the result's tangent has that axis
    first too: ``J`` along each of the ``B`` directions, from one pass that carries them all
    (``runtime.batched``), or one pass each where the code does something a batch does not take.

    ``jit="numba"``: the forward-mode code compiled by Numba, as ``grad(f, jit="numba")`` compiles
    the gradient (``ast_ad.backend.jit``: made once for each kind of argument; what it cannot
    compile is refused at the line, never run as Python silently).
    """
    if jit is not None:
        return compiled_jvp(fun, primals, tangents, jit, batched)
    if batched:
        return batched_jvp(fun, primals, tangents)
    plain = type(fun) is FUNCTION and type(primals) is tuple and type(tangents) is tuple \
        and len(primals) == len(tangents)
    if plain:  # floats only, as last time: the module of then, if still current (``scalar_calls``)
        found = _SCALAR_JVPS.get(fun)
        if found is not None and found[0] == len(primals):
            _, call, loaded = found
            try:
                out: Any = call(*primals, *tangents)
            except LocatedError as exc:
                raise located(exc, loaded) from None
            if out is not NOT_SCALARS:
                return out  # type: ignore[no-any-return]
    if plain:  # floats and numpy arrays, as last time (``_direct``)
        direct = _direct(fun, primals, tangents)
        if direct is not NOT_SCALARS:
            return direct  # type: ignore[no-any-return]
    # a gradient called as last time (``_gradient_direct``): a Hessian-vector product
    gradient: Any = fun  # (a ``Gradient``, where it has ``direct_tangents``)
    by_gradient = getattr(gradient, "direct_tangents", False) and type(primals) is tuple \
        and type(tangents) is tuple and len(primals) == len(tangents) == gradient.nparams
    if by_gradient:
        direct = _gradient_direct(gradient, primals, tangents, True)
        if direct is not NOT_SCALARS:
            return direct  # type: ignore[no-any-return]
    scalar = plain and all(type(a) is float for a in (*primals, *tangents))
    given = primals, tangents
    primals, tangents = _pair_up(primals, tangents)
    active = tuple(k for k, t in enumerate(tangents) if t is not None)
    lowered = lower(fun, primals)
    if scalar:
        loaded = jvp_code(lowered, active)
        _SCALAR_JVPS[fun] = len(primals), jvp_caller(loaded, len(primals)), loaded
    elif plain and lowered.fn is fun and lowered.args is primals:
        layout = _layout(*given)
        if layout is not None:
            loaded = jvp_code(lowered, active)
            _ARRAY_JVPS[fun] = layout_caller(layout, (loaded,), loaded.fn), loaded
    elif by_gradient:
        layout = _layout(*given)
        if layout is not None:
            loaded = jvp_code(lowered, active)
            gradient.tangent_module = (
                layout_caller(layout, (lowered.loaded, loaded), loaded.fn, seeds=1), loaded
            )
    return forward_at(lowered, active, tuple(tangents[k] for k in active))


def compiled_jvp(fun: Callable[..., V], primals: tuple[Any, ...], tangents: tuple[Any, ...],
                 jit: str, batched: bool) -> tuple[V, V]:
    """``jvp(..., jit="numba")``: the forward-mode module of ``fun`` for these arguments' kinds,
    compiled by Numba (once a module), run on the arguments and the tangents of those that move."""
    if jit != "numba":
        raise ASTADError(
            f'jit={jit!r}: the compiler ast_ad knows is jit="numba" (or leave jit out)'
        )
    if batched or type(fun) is not FUNCTION:
        raise ASTADError(
            "jvp(..., jit=\"numba\") compiles the forward mode of a function of yours, one "
            "direction a call: leave out batched=, and pass the function itself (not a derivative "
            "of it)"
        )
    plain = type(primals) is tuple and type(tangents) is tuple and len(primals) == len(tangents)
    if plain:  # floats and numpy arrays, as last time: its compiled code, directly
        done = _direct(fun, primals, tangents, _COMPILED_JVPS)
        if done is not NOT_SCALARS:
            return done  # type: ignore[no-any-return]
    given = primals, tangents
    primals, tangents = _pair_up(primals, tangents)
    active = tuple(k for k, t in enumerate(tangents) if t is not None)
    lowered = lower(fun, primals)
    loaded = jvp_code(lowered, active)
    from ast_ad.backend import jit as compiler

    run = compiler.compiled(loaded, fun)
    try:
        raw, raw_dot = run(*lowered.args, *(tangents[k] for k in active))
    except LocatedError as exc:
        raise located(exc, loaded) from None
    refuse_missing_tangents(raw_dot)
    if plain and lowered.fn is fun and lowered.args is primals:
        layout = _layout(*given)
        if layout is not None:  # (the next call like this one: checked inline, then run)
            _COMPILED_JVPS[fun] = layout_caller(layout, (loaded,), run), loaded
    return lowered.finish(raw), lowered.finish_dot(raw, raw_dot)


# the compiled forward-mode code of a function last called with floats and numpy arrays through
# ``jvp(..., jit="numba")``: its call (``layout_caller``) and its module
_COMPILED_JVPS: dict[Any, tuple[Callable[..., Any], Loaded]] = {}


def batched_jvp(fun: Callable[..., V], primals: tuple[Any, ...],
                tangents: tuple[Any, ...]) -> tuple[V, V]:
    """``jvp(..., batched=True)``: the directions stacked on a first axis, carried as one batch
    each."""
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ASTADError(f"jvp takes one tangent per argument: {len(primals)} arguments, "
                         f"{len(tangents)} tangents")
    active = tuple(k for k, t in enumerate(tangents) if t is not None)
    sizes = set()
    for k in active:
        _check_differentiable(primals[k], f"argument {k}")
        t, p = tangents[k], primals[k]
        if isinstance(p, (tuple, list, dict)) or type(t) is not np.ndarray \
                or t.shape[1:] != np.shape(p) or t.ndim != np.ndim(p) + 1:
            raise ASTADError(
                f"jvp(..., batched=True) takes, for argument {k}, an array of directions shaped "
                f"(B, *{np.shape(p)}) (B directions of a float or an array); got "
                f"{type(t).__name__} of shape {np.shape(t)}"
            )
        sizes.add(t.shape[0])
    if len(sizes) != 1:
        raise ASTADError("jvp(..., batched=True) takes the same number of directions for every "
                         f"argument; got {sorted(sizes)}")
    size = sizes.pop()
    lowered = lower(fun, primals)
    seeds = tuple(tangents[k] for k in active)
    if all(type(leaf) is np.ndarray or not is_array(leaf) for leaf in _all_leaves(lowered.args)):
        try:
            out, out_dot = forward_stacked(lowered, active, seeds)
            if not any(is_batch(leaf) for leaf in _all_leaves(out)):
                return out, unstacked(out_dot, size)
            raise BatchRefused("the value came out as a batch")
        except Exception as failure:  # noqa: BLE001 (the passes one by one say what is wrong)
            logs.info("jvp(batched=True) one pass a direction: the batched pass stopped (%s: %s)",
                      type(failure).__name__, str(failure).splitlines()[0] if str(failure) else "")
    dots = []
    for j in range(size):
        out, out_dot = forward_at(lowered, active, tuple(t[j] if t.ndim > 1 else float(t[j])
                                                         for t in seeds))
        dots.append(out_dot)
    return out, _stacked_dots(dots)


def _stacked_dots(dots: list[Any]) -> Any:
    """Tangents of one structure stacked leaf by leaf on a first axis."""
    first = dots[0]
    if isinstance(first, dict):
        return {key: _stacked_dots([d[key] for d in dots]) for key in first}
    if isinstance(first, (tuple, list)):
        return type(first)(_stacked_dots([d[i] for d in dots]) for i in range(len(first)))
    return np.stack([np.asarray(d) for d in dots])


# the forward-mode module of a plain function last called with floats and numpy arrays (and
# tangents of their kinds, shapes and dtypes, or None): its call (``layout_caller``: that layout
# checked, the module run) and the module (``_direct``)
_ARRAY_JVPS: dict[Any, tuple[Callable[..., Any], Loaded]] = {}


_FLOATS = (float, np.float64)


def _layout(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """For each argument, ``(shape, dtype, moving)`` of a numpy array (``moving``: its tangent an
    array of its shape and dtype; else ``None``) or ``(None, None, moving)`` of a float (its
    tangent a float or ``None``; numpy's float64 is a float here); ``None`` where an argument or
    tangent is anything else."""
    layout = []
    for a, t in zip(primals, tangents, strict=True):
        if type(a) is np.ndarray:
            if t is not None and not (type(t) is np.ndarray and t.shape == a.shape
                                      and t.dtype is a.dtype):
                return None
            layout.append((a.shape, a.dtype, t is not None))
        elif type(a) in _FLOATS and (t is None or type(t) in _FLOATS):
            # (a float and numpy's float64 have one label: ``shape_labels``)
            layout.append((None, None, t is not None))
        else:
            return None
    return tuple(layout)


def _direct(fun: Any, primals: tuple[Any, ...], tangents: tuple[Any, ...],
            calls: dict[Any, tuple[Callable[..., Any], Loaded]] | None = None) -> Any:
    """``jvp`` of a plain function called as last time with floats and numpy arrays (each
    argument's kind, shape and dtype, and which have tangents), by its module directly, without
    pairing, lowering and choosing the module again; ``NOT_SCALARS`` where the call is another or
    the module is no longer current (a global it reads changed: ``Loaded.refresh``).

    The fact it relies on: the module chosen for a call is fixed by its arguments' kinds, shapes
    and dtypes and which are moving (``lowering._jvp_of``), which its call (``layout_caller``)
    checks. ``calls``: where the calls are kept (``_ARRAY_JVPS``, or ``_COMPILED_JVPS`` for
    ``jit="numba"``)."""
    found = (_ARRAY_JVPS if calls is None else calls).get(fun)
    if found is None:
        return NOT_SCALARS
    call, loaded = found
    try:
        done = call(primals, tangents)
    except LocatedError as exc:
        raise located(exc, loaded) from None
    if done is not NOT_SCALARS:
        refuse_missing_tangents(done[1])
    return done


def _gradient_direct(gradient: Any, primals: tuple[Any, ...], tangents: tuple[Any, ...],
                     both: bool) -> Any:
    """``jvp`` of ``gradient`` (a ``Gradient`` whose ``direct_tangents`` is true) called as last
    time with floats and numpy arrays, by the forward-mode module of its code directly: ``(value,
    tangent)`` (``both``) or the tangent; ``NOT_SCALARS`` where the call is another or a module is
    no longer current. A Hessian-vector product inside generated code (a gradient's reverse rule,
    ``Gradient.joint_adjoints``) runs this way, without lowering, pairing and choosing modules
    again on every call.

    The facts it relies on: the gradient's module and the forward-mode module over it are fixed
    by the arguments' kinds, shapes and dtypes and which are moving (``Gradient.lowered`` chooses by
    ``shape_labels``, ``lowering._jvp_of`` by those of its arguments), which its call
    (``layout_caller``, both modules current) checks; and ``Gradient.lowered`` calls the code with
    the arguments followed by the seed ``1.0``."""
    found = gradient.tangent_module if both else gradient.tangent_alone
    if found is None:
        return NOT_SCALARS
    call, loaded = found
    try:
        done = call(primals, tangents)
    except LocatedError as exc:
        raise located(exc, loaded) from None
    if done is NOT_SCALARS:
        return NOT_SCALARS
    raw_dot = done[1] if both else done
    refuse_missing_tangents(raw_dot)
    dot = gradient.shape(raw_dot[0], raw_dot[1], primals)
    return (gradient.finish(done[0][0], done[0][1], primals), dot) if both else dot


def _arm_tangent_alone(gradient: Any, primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> None:
    """After a gradient's reverse rule ran its Hessian-vector product by ``jvp``: the module of the
    tangent alone for the next call like it (``forward.tangent_only``), which ``_gradient_direct``
    runs with ``both`` false. The fact it relies on: the rule's caller computed the gradient at
    these arguments (its value is the rule's operand), so what the module leaves out has run there
    and raised nothing."""
    layout = _layout(primals, tangents)
    if layout is None:
        return
    paired, paired_tangents = _pair_up(primals, tangents)
    active = tuple(k for k, t in enumerate(paired_tangents) if t is not None)
    lowered = lower(gradient, paired)
    loaded = jvp_code(lowered, active, tangent_alone=True)
    gradient.tangent_alone = (
        layout_caller(layout, (lowered.loaded, loaded), loaded.fn, seeds=1), loaded
    )


def _current(loaded: Loaded) -> bool:
    """Whether the generated module ``loaded`` is still the code for what it was made from: not
    replaced, the functions and modules it reads the same, its data globals read again
    (``Loaded.refresh``)."""
    if loaded.replaced or any(scope.get(name, MISSING) is not value
                              for scope, name, value in loaded.same):
        return False
    return not loaded.others or loaded.refresh()


# the forward-mode module of a plain function last called with floats only: how many, its call
# (``scalar_calls``)
_SCALAR_JVPS: dict[Any, tuple[int, Callable[..., Any], Loaded]] = {}


FUNCTION = types.FunctionType


def moves_of(call: tuple[Any, ...], m: int) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """A call laid out as the rules of rules are, ``(v_m, ans_m, ..., v_1, ans_1, *rest)``: the
    moves ``v_1 ... v_m`` (the first is the last given), and ``rest``."""
    return (call[2 * m - 2::-2] if m else ()), call[2 * m:]


class Directional:
    """A derivative of ``fun`` along given directions, as a primitive that generated code calls.

    With one direction it is ``jvp(fun, args, v)[1]``: the tangent of ``fun(*args)`` when the
    arguments ``ks`` move along ``v``. Called as rules are, ``(v, ans, *args)``. A gradient called
    in a body has two of these as its rules (``gradient.Gradient.ast_ad_rule``): forward, along the
    argument's tangent; reverse, the gradient of argument ``k`` along the adjoint placed in the
    gradient's arguments (a Hessian-vector product).

    Its own forward rules are again ``Directional``: linear in each ``v``, zero in each ``ans``, and
    in an argument ``j`` the derivative along one more direction, called ``(u, ans2, v, ans,
    *args)``. So forward mode can be stacked over code that calls it to any order, each level one
    more forward pass over the generated code of ``fun``.
    """

    __module__ = "ast_ad.api.compose"

    def __init__(
        self, fun: Any, directions: tuple[tuple[tuple[int, ...], bool], ...], nparams: int
    ):
        # each direction: (ks, single v)
        self.fun, self.directions, self.nparams = fun, directions, nparams
        self.__name__ = self.__qualname__ = f"d{len(directions)}_{getattr(fun, '__name__', 'f')}"
        self._rule: Any = None
        self._then: dict[int, Directional] = {}

    def __call__(self, *call: Any) -> Any:
        m = len(self.directions)
        vs, args = moves_of(call, m)
        fun = self.fun
        if m == 1 and getattr(fun, "direct_tangents", False) and len(args) == fun.nparams:
            # a gradient's Hessian-vector product, as last time: its module directly
            tangents = placed(self.directions[0], vs[0], len(args))
            done = _gradient_direct(fun, args, tangents, False)
            if done is not NOT_SCALARS:
                return done
            dot = jvp(fun, args, tangents)[1]
            _arm_tangent_alone(fun, args, tangents)
            return dot
        for direction, v in zip(self.directions[:-1], vs[:-1], strict=True):
            fun = Fixed(fun, direction, v)
        return jvp(fun, args, placed(self.directions[-1], vs[-1], len(args)))[1]

    def then(self, j: int) -> Directional:
        """The derivative of this one when argument ``j`` moves too."""
        if j not in self._then:
            self._then[j] = Directional(self.fun, (*self.directions, ((j,), True)), self.nparams)
        return self._then[j]

    def ast_ad_rule(self) -> Any:

        if self._rule is None:
            m = len(self.directions)
            jvps: tuple[Any, ...] = (registry.LINEAR, registry.zero) * m + \
                tuple(self.then(j) for j in range(self.nparams))
            self._rule = registry.Rule(
                self, self.adjoint_rules(), origin="ast_ad.api.compose", jvps=jvps
            )
        return self._rule

    def adjoint_rules(self) -> tuple[Any, ...]:
        """Reverse rules, where ``fun`` is a gradient ``grad_A f`` of a scalar ``f``: then this is a
        derivative of ``f`` of order m + 1, symmetric in its directions, and ``<g, D^m grad_A f [v_1
        .. v_m]>`` is ``D^(m+1) f [v_1 .. v_m, g placed in A]``. Its adjoint in argument ``j`` is
        the derivative of the partial gradient ``grad_j f`` along all of those, and in ``v_i`` that
        of ``grad_(ks_i) f`` along all but ``v_i`` (the call without ``v_i`` and its ``ans``:
        ``Dropping``). Called as rules are, ``(g, ans, v_m, ans_m, ..., v_1, ans_1, *args)``, each
        is again a ``Directional`` over a gradient: it has these rules too, to any order. Over other
        functions there are none (reverse mode refuses)."""

        gradient = self.fun
        # a ``Gradient``
        if not callable(getattr(gradient, "partial", None)) or gradient.ast_ad_rule() is None:
            return ()
        m, n, mine = len(self.directions), self.nparams, (gradient.argnums, gradient.single)
        rules: list[Any] = []
        for p in range(m):  # the call's v_m, ans_m, ..., v_1, ans_1: v_m is direction m - 1
            i = m - 1 - p
            ks, single = self.directions[i]
            others = self.directions[:i] + self.directions[i + 1:]
            inner = Directional(gradient.partial(ks[0] if single else ks), (*others, mine), n)
            # in the rule's call, after g, ans
            rules += [Dropping(inner, (2 + 2 * p, 3 + 2 * p)), registry.zero]
        return (
            *rules,
            *(Directional(gradient.partial(j), (*self.directions, mine), n) for j in range(n)),
        )

    def __repr__(self) -> str:
        name = getattr(self.fun, "__qualname__", self.fun)
        return f"<ast_ad derivative of {name!s} along {self.directions}>"


class Dropping:
    """``inner`` called without the arguments at positions ``dropped`` of this call (which it does
    not read): a rule whose call carries more than its function takes
    (``Directional.adjoint_rules``). Its own rules are ``inner``'s, each again without them (they
    come after the rule's own ``g, ans``), and zero for them."""

    __module__ = "ast_ad.api.compose"

    def __init__(self, inner: Any, dropped: tuple[int, ...]):
        self.inner, self.dropped = inner, dropped
        self.__name__ = self.__qualname__ = f"{getattr(inner, '__name__', 'f')}_without_" + \
            "_".join(map(str, dropped))
        self._rule: Any = None

    def __call__(self, *call: Any) -> Any:
        return self.inner(*(c for k, c in enumerate(call) if k not in self.dropped))

    def ast_ad_rule(self) -> Any:

        if self._rule is None:
            inner = registry.lookup(self.inner)
            if inner is None:
                return None
            count = max(len(inner.vjps), len(inner.jvps)) + len(self.dropped)
            vjps, jvps = [], []
            for k in range(count):
                if k in self.dropped:
                    vjps.append(registry.zero)
                    jvps.append(registry.zero)
                    continue
                q = k - sum(d < k for d in self.dropped)  # the position in ``inner``'s call
                vjps.append(self.moved(inner.vjp(q)))
                jvps.append(self.moved(inner.jvp(q)))
            self._rule = registry.Rule(
                self, tuple(vjps), origin="ast_ad.api.compose", jvps=tuple(jvps)
            )
        return self._rule

    def moved(self, rule: Any) -> Any:

        if rule is None or rule is registry.zero or rule is registry.LINEAR:
            return rule  # linear in a kept argument: this function, with the tangent in its place
        return Dropping(rule, tuple(d + 2 for d in self.dropped))


def placed(direction: tuple[tuple[int, ...], bool], v: Any, n: int) -> tuple[Any, ...]:
    """The tangents of ``n`` arguments: ``v`` in the arguments ``ks`` (one each if not ``single``),
    ``None`` elsewhere."""
    ks, single = direction
    tangents: list[Any] = [None] * n
    for k, vk in zip(ks, (v,) if single else tuple(v), strict=True):
        tangents[k] = vk
    return tuple(tangents)


class Fixed:
    """``args -> jvp(fun, args, v placed in the arguments ks)[1]`` with ``v`` fixed: a derivative
    that ast_ad can lower (its code is forward mode over ``fun``'s), so it can be differentiated
    again."""

    composable = True

    def __init__(self, fun: Any, direction: tuple[tuple[int, ...], bool], v: Any):
        self.fun, self.direction, self.v = fun, direction, v
        self.__name__ = f"{getattr(fun, '__name__', 'f')}_dot"

    def __call__(self, *args: Any) -> Any:
        return jvp(self.fun, args, placed(self.direction, self.v, len(args)))[1]

    def lowered(self, args: tuple[Any, ...]) -> Lowered:
        return _along(self.fun, args, placed(self.direction, self.v, len(args)))


def _along(fun: Any, args: tuple[Any, ...], tangents: tuple[Any, ...]) -> Lowered:
    """``args -> jvp(fun, args, tangents)[1]`` as code: the forward-mode code of ``fun``, called
    with the tangents after the arguments."""
    primals, tangents = _pair_up(args, tangents)
    active = tuple(k for k, t in enumerate(tangents) if t is not None)
    inner = lower(fun, primals)
    loaded = jvp_code(inner, active)

    def finish(raw: Any) -> Any:
        return inner.finish_dot(raw[0], raw[1])

    def finish_dot(raw: Any, raw_dot: Any) -> Any:
        return inner.finish_dot(raw[0], raw_dot[1])

    def finish_bar(raw: Any, g: Any) -> Any:
        return raw_zeros(raw[0]), inner.finish_bar(raw[0], g)

    return Lowered(
        loaded.fn,
        (*inner.args, *(tangents[k] for k in active)),
        inner.positions,
        finish,
        finish_dot,
        loaded,
        (False, True),
        finish_bar,
    )


def _pair_up(primals: Any, tangents: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise ASTADError("jvp takes primals and tangents as tuples, one entry per argument: jvp(f, "
                         "(x,), (x_dot,))")
    if len(primals) != len(tangents):
        raise ASTADError(
            f"jvp got {len(primals)} primals but {len(tangents)} tangents: give one tangent per "
            "argument (None for one that is not differentiated)"
        )

    out = []
    for k, (p, t) in enumerate(zip(primals, tangents, strict=True)):
        if t is not None and type(p) is not float:
            _check_differentiable(p, f"argument {k}")  # an integer has no tangent: give it None
        out.append(None if t is None else _tangent_like(t, p, k))
    return tuple(primals), tuple(out)


def _tangent_like(t: Any, p: Any, k: int) -> Any:
    """The tangent ``t`` checked against its primal ``p``: the same structure and shape, as
    floats (complex numbers for a complex primal)."""
    if type(p) is float and type(t) in (float, int):
        return float(t)
    if isinstance(p, dict):
        if not isinstance(t, dict) or set(t) != set(p):
            raise ASTADError(
                f"the tangent of argument {k} must be a dict with the keys of its primal"
            )
        return {key: _tangent_like(t[key], item, k) for key, item in p.items()}
    if isinstance(p, (tuple, list)):
        if not isinstance(t, (tuple, list)) or len(t) != len(p):
            raise ASTADError(
                f"the tangent of argument {k} must be a {type(p).__name__} of {len(p)} tangents"
            )
        parts = [_tangent_like(a, b, k) for a, b in zip(t, p, strict=True)]
        return type(p)(*parts) if hasattr(p, "_fields") else type(p)(parts)
    if np.shape(t) != np.shape(p):
        raise ASTADError(
            f"the tangent of argument {k} has shape {np.shape(t)}, but the argument has shape "
            f"{np.shape(p)}: a tangent has its primal's shape"
        )
    complex_p = np.iscomplexobj(p)
    if np.iscomplexobj(t) and not complex_p:
        raise ASTADError(
            f"the tangent of argument {k} is complex, but the argument is real: a real argument "
            "moves along real tangents (pass the argument as complex to move it off the real line)"
        )
    dtype = p.dtype if is_array(p) and p.dtype.kind in "fc" else complex if complex_p else float
    if is_array(t) and not isinstance(t, np.ndarray):  # a dask or CuPy tangent stays one
        return t.astype(dtype)
    # a tangent for a dask or CuPy primal: of its type
    if is_array(p) and not isinstance(p, np.ndarray):
        return of_type(np.asarray(t, dtype=dtype), p)
    if isinstance(p, np.ndarray):
        return np.asarray(t, dtype=dtype)
    if np.ndim(t) == 0 and not isinstance(t, np.ndarray):
        return complex(t) if complex_p else float(t)
    return np.asarray(t, dtype=dtype)
