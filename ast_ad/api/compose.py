"""Transformations of transformations: ``jvp``, ``vjp``, Jacobians, Hessians, and derivatives of
derivatives.

>>> import numpy as np
>>> import ast_ad
>>> def f(x1, x2):
...     return np.log(x1) + x1 * x2 - np.sin(x2)
>>> out, out_dot = ast_ad.jvp(f, (2.0, 3.0), (1.0, 0.0))
>>> round(float(out_dot), 12)
3.5
>>> round(float(ast_ad.grad(ast_ad.grad(f))(2.0, 3.0)), 12)  # d2f/dx1^2 = -1/x1^2
-0.25

Every callable ast_ad makes can be *lowered*: for given arguments it names a
function ast_ad can transform (the generated code itself, which is plain
Python), the arguments to call it with, and how its raw result becomes the
callable's result. A transformation applied to such a callable transforms the
generated code: ``jvp`` of a gradient is forward mode over reverse mode, a
Hessian-vector product. ``grad`` of a scalar function of a scalar that ast_ad
made is forward mode over it, so ``grad(grad(grad(grad(f))))`` is forward mode
stacked three times over reverse mode.
"""

from __future__ import annotations

import inspect
import numbers
import types
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar

import numpy as np

from ast_ad import transform
from ast_ad.api.arguments import (
    Checkpoints,
    _check_argnums,
    _check_differentiable,
    _differentiable,
    _like,
    shape_labels,
)
from ast_ad.api.directional import (
    _ARRAY_JVPS,
    Fixed,
    _along,
    _current,
    _layout,
    _pair_up,
    jvp,
    moves_of,
    placed,
)
from ast_ad.api.gradient import Gradient, grad, made
from ast_ad.api.lowering import (
    Lowered,
    _inner,
    _leaves,
    _rebuild,
    _same,
    _seeded,
    _stack_columns,
    _tangent,
    _zero_if_none,
    columns_code,
    forward_columns,
    fresh,
    jvp_code,
    located,
    lower,
    reads_only,
    run_code,
)
from ast_ad.api.sparse import SparseJacobian
from ast_ad.backend.load import Loaded
from ast_ad.backend.scalar_calls import NOT_SCALARS, layout_caller
from ast_ad.core import logs, registry
from ast_ad.errors import (
    ArgnumsError,
    ASTADError,
    GradientFailedError,
    LocatedError,
)
from ast_ad.frontend import nested
from ast_ad.ir.naming import identifier
from ast_ad.runtime import as_array, refuse_missing_tangents, size_of
from ast_ad.runtime.batched import (
    Batch,
    BatchRefused,
    batched_backward,
    batched_pass,
    unstacked,
)

P = ParamSpec("P")  # a function's parameters, which its Jacobian and Hessian take too
V = TypeVar("V")  # what a function returns: a tangent or cotangent of its output has its type




































































# ---- reverse mode --------------------------------------------------------------------------------
def vjp(fun: Callable[..., V], *primals: Any,
        checkpoints: Checkpoints = None) -> tuple[V, Callable[[V], tuple[Any, ...]]]:
    """``(fun(*primals), vjp_fn)``, where ``vjp_fn(out_bar)`` is the tuple of every argument's
    adjoint; for a plain function, ``vjp_fn(out_bars, batched=True)`` takes many cotangents stacked
    on a first axis and gives the adjoints stacked the same way, from one backward pass.

    Works for any output: an array, a tuple or dict of them. An argument that cannot be
    differentiated (an integer, a flag) gets ``None``. ``vjp_fn`` may be called many times.
    ``checkpoints=c``: binomial checkpointing of ``fun``'s loops, as for :func:`ast_ad.grad`.
    """

    argnums = tuple(k for k, p in enumerate(primals) if _differentiable(p))
    if getattr(fun, "composable", False):
        if checkpoints is not None:
            raise ASTADError(
                "checkpoints= applies to the vjp of a plain function: the vjp of a derivative runs "
                "forward mode over it, which tapes nothing"
            )
        return _vjp_of_transformed(fun, primals, argnums)
    # (made once for a plain function: a rule of a derivative calls vjp at each step)
    gradient: Gradient[..., Any] = made(fun, argnums or (0,), True, None, checkpoints)
    if not argnums:
        return fun(*primals), lambda out_bar: (None,) * len(primals)
    args = (gradient.bound_self, *primals) if gradient.bound_self is not None else tuple(primals)
    fwd, bwd, loaded = transform.pair(
        gradient.fun, gradient.positions, shape_labels(args), gradient.checkpoints
    )
    out, saved = run_code(loaded, fwd, *args)

    def vjp_fn(out_bar: Any, batched: bool = False) -> tuple[Any, ...]:
        if batched:
            return batched_vjp(vjp_fn, out, out_bar, len(primals))
        # its tapes are popped: each call gets its own
        grads = run_code(loaded, bwd, saved if reads_only(loaded) else fresh(saved),
                         _spread_numbers(out_bar, out))
        shaped = [
            gradient.shaped(g, args[k]) for g, k in zip(grads, gradient.positions, strict=True)
        ]
        found = dict(zip(argnums, shaped, strict=True))
        return tuple(found.get(k) for k in range(len(primals)))
    return out, vjp_fn


def _spread_numbers(bar: Any, out: Any) -> Any:
    """The cotangent ``bar`` of the output ``out`` with a number given for an array of the output
    spread over its entries (``vjp_fn(1.0)`` of a vector function: every entry's cotangent 1.0),
    leaf by leaf in tuples, lists and dicts: the backward pass is made for cotangents of the
    output's shapes (an adjoint of an array is an array of its shape)."""
    if type(out) is np.ndarray and out.ndim and (
            isinstance(bar, (int, float, complex, np.number)) and not isinstance(bar, bool)
            or type(bar) is np.ndarray and bar.ndim == 0):
        return np.full(out.shape, bar, dtype=np.result_type(out, bar, 1.0))
    if isinstance(out, dict) and isinstance(bar, dict):
        return {key: _spread_numbers(bar[key], out[key]) if key in out else bar[key]
                for key in bar}
    if isinstance(out, (tuple, list)) and type(bar) is type(out) and len(bar) == len(out):
        parts = [_spread_numbers(b, o) for b, o in zip(bar, out, strict=True)]
        return type(bar)(parts) if not hasattr(bar, "_fields") else type(bar)(*parts)
    return bar


def batched_vjp(vjp_fn: Callable[..., tuple[Any, ...]], out: Any, out_bars: Any,
                count: int) -> tuple[Any, ...]:
    """``vjp_fn(out_bars, batched=True)``: cotangents stacked on a first axis (a tuple of such
    for a tuple result), the adjoints stacked the same way; one backward pass carrying them all
    as a batch (``runtime.batched``), or one pass a cotangent where the code does something a
    batch does not take (an adjoint added into entry by entry)."""
    leaves, bars = _leaves(out), _leaves(out_bars)
    if len(leaves) != len(bars):
        raise ASTADError(f"vjp_fn(..., batched=True) takes one stack of cotangents per output: "
                         f"{len(leaves)} outputs, {len(bars)} stacks")
    sizes = set()
    for leaf, bar in zip(leaves, bars, strict=True):
        if type(bar) is not np.ndarray or bar.shape[1:] != np.shape(leaf):
            raise ASTADError(
                f"vjp_fn(..., batched=True) takes cotangents shaped (B, *{np.shape(leaf)}); got "
                f"{type(bar).__name__} of shape {np.shape(bar)}")
        sizes.add(bar.shape[0])
    if len(sizes) != 1:
        raise ASTADError("vjp_fn(..., batched=True) takes the same number of cotangents for every "
                         f"output; got {sorted(sizes)}")
    size = sizes.pop()
    try:
        return _stacked_adjoints(vjp_fn, out, bars, size)
    except Exception as failure:  # noqa: BLE001 (the passes one by one say what is wrong)
        logs.info("vjp_fn(batched=True) one pass a cotangent: the batched pass stopped (%s: %s)",
                  type(failure).__name__, str(failure).splitlines()[0] if str(failure) else "")
    rows = [vjp_fn(_rebuild(out, [bar[j] if bar.ndim > 1 else float(bar[j]) for bar in bars]))
            for j in range(size)]
    return tuple(None if rows[0][k] is None else np.stack([np.asarray(r[k]) for r in rows])
                 for k in range(count))




def _pullback(lowered: Lowered, k: int) -> Callable[[np.ndarray], Any]:
    """For a sparse Jacobian by rows (``SparseJacobian``): argument ``k``'s adjoints of the plain
    function ``lowered`` for cotangents of its flattened result stacked on a first axis, from one
    forward pass and one backward pass carrying them all (``vjp_fn(..., batched=True)``)."""
    def pullback(bars: np.ndarray) -> Any:
        out, vjp_fn_typed = vjp(lowered.fn, *lowered.args)
        vjp_fn: Any = vjp_fn_typed  # (it takes ``batched=``)
        if size_of(out) != bars.shape[1]:
            raise ASTADError(f"the sparsity pattern given has {bars.shape[1]} rows; the result "
                             f"has {size_of(out)} entries")
        return vjp_fn(bars.reshape((len(bars), *np.shape(out))), batched=True)[lowered.positions[k]]
    return pullback


def pullback_code(fun: Callable[..., Any], primals: tuple[Any, ...], argnums: tuple[int, ...]
                  ) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``fun``'s generated forward and backward functions, made for arguments of the kinds and
    shapes of ``primals`` and called directly: ``forward(*args) -> (out, saved)`` and
    ``backward(saved, out_bar)``, the adjoints of the arguments ``argnums`` (raw: a float or an
    array each, ``0.0`` where ``out`` does not depend on one), without ``vjp``'s per-call
    binding, copying and shaping.

    It relies on two facts, which its caller states: every call of ``forward`` passes arguments
    of the kinds and shapes of ``primals`` (their ``shape_labels``), so the code made for them is
    the code ``vjp`` would run; and ``backward`` is called at most once for each ``saved`` (it pops
    its tapes). A solver's rules call them at each step of a solve whose state keeps one shape
    (``ast_ad.api.solvers``). A refusal raised in the generated code names the user's line, as
    ``vjp``'s does."""
    gradient: Gradient[..., Any] = Gradient(fun, argnums, with_value=True)
    if gradient.bound_self is not None:
        raise ASTADError("pullback_code takes a plain function, not a bound method")
    fwd, bwd, loaded = transform.pair(gradient.fun, gradient.positions, shape_labels(primals))

    def forward(*args: Any) -> Any:
        try:
            return fwd(*args)
        except LocatedError as exc:
            raise located(exc, loaded) from None

    def backward(saved: Any, out_bar: Any) -> Any:
        try:
            return bwd(saved, out_bar)
        except LocatedError as exc:
            raise located(exc, loaded) from None

    return forward, backward


def _vjp_of_transformed(fun: Any, primals: tuple[Any, ...],
                        argnums: tuple[int, ...]) -> tuple[Any, Callable[[Any], tuple[Any, ...]]]:
    """The VJP of a function ast_ad made: reverse mode over its code (``lower``), the adjoint of its
    result taken back to its code's (``Lowered.finish_bar``). A gradient ``x -> grad_A f(x)`` takes
    forward mode over its code instead (``api.gradient_adjoints``: a Hessian-vector product, by the
    symmetry of second derivatives), one pass with no tape."""

    if isinstance(fun, Gradient) and not fun.transformed and not fun.with_value:
        out = fun(*primals)

        def vjp_fn(out_bar: Any) -> tuple[Any, ...]:
            found = dict(
                zip(argnums, gradient_adjoints(fun, argnums, out_bar, primals), strict=True)
            )
            return tuple(found.get(k) for k in range(len(primals)))
        return out, vjp_fn
    lowered = lower(fun, primals)
    positions = tuple(lowered.positions[k] for k in argnums)
    try:
        fwd, bwd, loaded = transform.pair(lowered.fn, positions, shape_labels(lowered.args))
    # reverse mode cannot read this code (it pops a list a caller gave it, say)
    except ASTADError as refusal:
        if any(isinstance(primals[k], (tuple, list, dict)) for k in argnums):
            raise
        logs.info(
            "vjp of %s: reverse mode over its code is refused (%s); forward mode instead, a pass "
            "an entry",
            getattr(fun, "__name__", "a derivative"),
            str(refusal).splitlines()[0],
        )
        return _vjp_by_forward_mode(lowered, primals, argnums)
    name = getattr(fun, "__name__", "this derivative")

    def instead_of(failure: Exception, part: str) -> Callable[[Any], tuple[Any, ...]]:
        """Forward mode's columns where the pass ``part`` ast_ad wrote over the code failed as it
        ran. Reverse mode over code that carries adjoints of kinds it cannot tell (a helper's pair,
        the float zero an adjoint starts as) can fail so: the failure is ast_ad's, not the user's
        (their code runs), and forward mode gives the same numbers, for arrays; for a container
        argument, an error that says what to do."""
        # forward mode takes arrays
        if any(isinstance(primals[k], (tuple, list, dict)) for k in argnums):
            raise GradientFailedError(
                f"the vjp of {name} failed in the {part} pass ast_ad wrote over its code "
                f"({type(failure).__name__}: "
                f"{failure}), and forward mode cannot stand in for an argument that is a tuple, "
                "list or dict: pass "
                "its arrays as separate arguments, or use jvp over it"
            ) from failure
        logs.info(
            "vjp of %s: its %s pass failed (%s: %s); forward mode instead, a pass an entry",
            name,
            part,
            type(failure).__name__,
            failure,
        )
        return _vjp_by_forward_mode(lowered, primals, argnums)[1]
    try:
        raw, saved = run_code(loaded, fwd, *lowered.args)
    except (TypeError, AttributeError, ValueError, IndexError) as failure:
        return fun(*primals), instead_of(failure, "forward")
    out = lowered.finish(raw)
    # forward mode, once the backward pass has failed
    instead: list[Callable[[Any], tuple[Any, ...]]] = []

    def vjp_of_code(out_bar: Any) -> tuple[Any, ...]:
        _check_like(out_bar, out)
        if not instead:
            try:
                given = saved if reads_only(loaded) else fresh(saved)
                bars = run_code(loaded, bwd, given, lowered.finish_bar(raw, out_bar))
                found = {k: _like(bar, primals[k]) for k, bar in zip(argnums, bars, strict=True)}
                return tuple(found.get(k) for k in range(len(primals)))
            except (TypeError, AttributeError, ValueError, IndexError) as failure:
                instead.append(instead_of(failure, "backward"))
        return instead[0](out_bar)
    return out, vjp_of_code


def _check_like(g: Any, out: Any) -> None:
    """Refuse an adjoint ``g`` that is not shaped as ``out``, the value it is the adjoint of."""
    if isinstance(out, (tuple, list)):
        if not isinstance(g, (tuple, list)) or len(g) != len(out):
            raise ASTADError(
                "the adjoint given to vjp_fn must be shaped as the function's value: a sequence "
                "of "
                f"{len(out)}, got {type(g).__name__}"
            )
        for item, like in zip(g, out, strict=True):
            _check_like(item, like)
    elif g is not None and np.shape(g) != np.shape(out):
        raise ASTADError(
            f"the adjoint given to vjp_fn must be shaped as the function's value, {np.shape(out)}; "
            f"got {np.shape(g)}"
        )


def _vjp_by_forward_mode(lowered: Lowered, primals: tuple[Any, ...],
                         argnums: tuple[int, ...]) -> tuple[Any, Callable[[Any], tuple[Any, ...]]]:
    """The VJP from the Jacobian's columns (forward mode, one pass an entry of each differentiated
    argument, made at the first call): exact, where reverse mode cannot read the code."""

    raw = (
        lowered.fn(*lowered.args)
        if lowered.loaded is None
        else run_code(lowered.loaded, lowered.fn, *lowered.args)
    )
    out = lowered.finish(raw)
    columns: dict[int, Sequence[Any]] = {}

    def vjp_fn(out_bar: Any) -> tuple[Any, ...]:
        found = {}
        for k in argnums:
            if k not in columns:
                columns[k] = forward_columns(lowered, k)[1]
            entries = np.array([_inner(out_bar, column) for column in columns[k]])
            found[k] = _like(
                float(entries[0])
                if np.ndim(primals[k]) == 0
                else entries.reshape(np.shape(primals[k])),
                primals[k],
            )
        return tuple(found.get(k) for k in range(len(primals)))
    return out, vjp_fn


# ---- Jacobians and Hessians ----------------------------------------------------------------------
def jacfwd(fun: Callable[P, Any], argnums: int | tuple[int, ...] = 0,
           sparse: Any = False) -> Callable[P, Any]:
    """The Jacobian by forward mode: the unit tangents of the argument's entries, in one batched
    pass; shape ``out.shape + arg.shape``. ``sparse=True``: a ``scipy.sparse.csr_array`` of shape
    ``(out.size, arg.size)``, from its pattern, a colouring and one compressed pass
    (``api.sparse``); ``sparse=P``, the same from the pattern ``P`` (a scipy sparse matrix or an
    array: its nonzero entries), found once (``ast_ad.sparsity``) and given at every call."""
    return Jacobian(fun, argnums, "forward", sparse=sparse)


def jacrev(fun: Callable[P, Any], argnums: int | tuple[int, ...] = 0) -> Callable[P, Any]:
    """The Jacobian by reverse mode: one ``vjp`` per entry of the output; shape ``out.shape +
    arg.shape``."""
    return Jacobian(fun, argnums, "reverse")


def jacobian(fun: Callable[P, Any], argnums: int | tuple[int, ...] = 0,
             sparse: Any = False) -> Callable[P, Any]:
    """The Jacobian, by forward mode when the arguments have fewer entries than the output, else by
    reverse. ``sparse=True`` or ``sparse=P``: as ``jacfwd``'s."""
    return Jacobian(fun, argnums, "auto" if sparse is False else "forward", sparse=sparse)


def hessian(fun: Callable[P, Any], argnums: int | tuple[int, ...] = 0,
            sparse: Any = False) -> Callable[P, Any]:
    """The Hessian of scalar ``fun``: forward mode over the reverse-mode gradient (a tuple of tuples
    for tuple ``argnums``). ``sparse=True`` or ``sparse=P``: a ``scipy.sparse.csr_array``, the
    sparse Jacobian of the gradient."""

    return Jacobian(grad(fun, argnums), argnums, "forward", "hessian", sparse=sparse)


def hvp(fun: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    """``hvp(f)(*args, v)``: the Hessian of scalar ``f`` times ``v``, by forward over reverse,
    without building H."""

    return Hvp(grad(fun, argnums), argnums)


class Hvp:
    """``hvp(f)``: ``(*args, v) -> H v``, the tangent of ``grad(f)`` along ``v``. Composable: its
    code is the forward-mode code of the gradient, with ``v`` an argument like the others (the code
    is linear in it)."""

    composable = True

    def __init__(self, gradient: Any, argnums: int | tuple[int, ...]):
        self.gradient, self.given, self.positions = gradient, argnums, _argnums(argnums)
        self.__name__ = self.__qualname__ = f"hvp_{getattr(gradient, '__name__', 'f')}"
        params = list(gradient.signature.parameters.values())
        self.signature = inspect.Signature(
            [*params, inspect.Parameter("v", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        )
        self.nparams = len(params) + 1

    def split(self, args: tuple[Any, ...]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """The primals, and the tangents with ``v`` placed in the differentiated arguments."""
        *primals, v = args
        vs = (v,) if isinstance(self.given, numbers.Integral) else tuple(v)
        if len(vs) != len(self.positions):
            raise ArgnumsError(
                f"hvp needs one vector per argument in argnums={self.given!r}, got {len(vs)}"
            )
        return tuple(primals), placed((self.positions, False), vs, len(primals))

    def __call__(self, *args: Any) -> Any:
        primals, tangents = self.split(args)
        return jvp(self.gradient, primals, tangents)[1]

    def lowered(self, args: tuple[Any, ...]) -> Lowered:
        if not isinstance(self.given, numbers.Integral):
            raise ASTADError("differentiating hvp(f) again works for one argnum: hvp(f, argnums=k)")
        primals, tangents = self.split(args)
        lowered = _along(self.gradient, primals, tangents)
        return Lowered(
            lowered.fn,
            lowered.args,
            (*lowered.positions, len(lowered.args) - 1),
            lowered.finish,
            lowered.finish_dot,
            lowered.loaded,
            lowered.needed,
            lowered.finish_bar,
        )


def _argnums(argnums: Any) -> tuple[int, ...]:

    return _check_argnums(argnums)


def _bound(
    signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...]:
    """The arguments of a call by name, in their places (defaults filled in), or Python's error for
    a bad call."""
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    if bound.kwargs:
        raise ASTADError(
            "a Jacobian or Hessian takes its function's arguments one by one, not as **kwargs"
        )
    return tuple(bound.args)


class Jacobian:
    """A Jacobian function: ``out.shape + arg.shape``, a tuple over tuple ``argnums``, a tuple over
    tuple outputs.

    It is composable: its code is a call of itself as a primitive (``lowered``), whose forward rules
    are Jacobians again, of ``fun``'s derivative along the argument's tangent (``directions``: the
    Jacobian of ``Fixed(fun, ...)``, called as rules are, ``(v, ans, *args)``). So
    ``jacfwd(hessian(f))`` is the tensor of third derivatives, each level one more forward pass over
    the code of ``fun``.
    """

    composable = True

    def __init__(
        self,
        fun: Callable[..., Any],
        argnums: int | tuple[int, ...],
        mode: str,
        name: str = "jacobian",
        directions: tuple[tuple[tuple[int, ...], bool], ...] = (),
        sparse: Any = False,
    ):
        self.fun, self.mode, self.given, self.kind, self.directions = (
            fun,
            mode,
            argnums,
            name,
            directions,
        )
        self.single = isinstance(argnums, numbers.Integral)
        self.argnums = _argnums(argnums)
        self.sparse = None
        if sparse is not False and sparse is not None:
            if not self.single:
                raise ASTADError("sparse= takes one argument: argnums an int")
            self.sparse = SparseJacobian(None if sparse is True else sparse,
                                         symmetric=name == "hessian")
        self.__name__ = self.__qualname__ = (
            f"{name}_{getattr(fun, '__name__', 'f')}" + "_dot" * len(directions)
        )
        self._rule: Any = None
        self._then: dict[int, Jacobian] = {}
        self._calls: dict[int, Callable[..., Any]] = {}

    @property
    def signature(self) -> inspect.Signature:
        """The signature of ``fun``, whose arguments the Jacobian takes."""
        own = getattr(self.fun, "signature", None)
        return own if isinstance(own, inspect.Signature) else inspect.signature(self.fun)

    @property
    def nparams(self) -> int:
        return len(self.signature.parameters)

    def __call__(self, *call: Any, **kwargs: Any) -> Any:
        m = len(self.directions)
        if kwargs and not m:  # arguments by name, as ``fun`` takes them
            call = tuple(_bound(self.signature, call, kwargs))
        (vs, args), fun = moves_of(call, m), self.fun
        for direction, v in zip(self.directions, vs, strict=True):
            fun = Fixed(fun, direction, v)
        return self.at(fun, args)

    def at(self, fun: Any, args: tuple[Any, ...]) -> Any:
        """The Jacobian of ``fun`` at ``args``."""

        for k in self.argnums:
            if k >= len(args):
                raise ArgnumsError(
                    f"argnums={self.argnums!r} names argument {k}, but the call has {len(args)}"
                )
            _check_differentiable(args[k], f"argument {k}")
            if isinstance(args[k], (tuple, list, dict)):
                raise ASTADError(
                    f"the Jacobian with respect to a {type(args[k]).__name__} argument is not "
                    "supported: pass its arrays as separate arguments, or one stacked array"
                )
        if self.sparse is not None:
            if np.ndim(args[self.argnums[0]]) == 0:
                raise ASTADError("sparse=True takes an array argument")
            lowered, k = lower(fun, args), self.argnums[0]
            plain = type(fun) is types.FunctionType and not self.sparse.symmetric
            return self.sparse(lowered, k, _pullback(lowered, k) if plain else None)
        sizes = sum(size_of(args[k]) for k in self.argnums)
        mode = self.mode
        if isinstance(fun, Jacobian):
            # its reverse rule is one forward pass an entry (``JacobianVjp``): forward mode is fewer
            mode = "forward"
        if mode == "auto":
            out = fun(*args)
            mode = "forward" if sizes <= sum(size_of(leaf) for leaf in _leaves(out)) else "reverse"
        blocks = [self.forward(fun, args, k) if mode == "forward" else self.reverse(fun, args, k)
                  for k in self.argnums]
        if self.single:
            return blocks[0]
        if isinstance(blocks[0], tuple):  # tuple outputs: out index first, then argnum
            return tuple(tuple(b[i] for b in blocks) for i in range(len(blocks[0])))
        return tuple(blocks)

    def then(self, j: int) -> Jacobian:
        """This Jacobian's derivative when argument ``j`` moves: the Jacobian of the derivative
        along it."""
        if j not in self._then:
            self._then[j] = Jacobian(
                self.fun, self.given, "forward", self.kind, (*self.directions, ((j,), True))
            )
        return self._then[j]

    def ast_ad_rule(self) -> Any:
        """Forward rules: linear in each direction's ``v``, zero in each ``ans``, ``then(j)`` in
        argument ``j``; reverse rules: ``JacobianVjp``, by forward mode entry by entry."""
        from ast_ad.core import registry

        if self._rule is None:
            m = len(self.directions)
            jvps: tuple[Any, ...] = (registry.LINEAR, registry.zero) * m + \
                tuple(self.then(j) for j in range(self.nparams))
            vjps = tuple(registry.zero if p < 2 * m and p % 2 else JacobianVjp(self, p)
                         for p in range(2 * m + self.nparams))
            self._rule = registry.Rule(self, vjps, origin="ast_ad.api.compose", jvps=jvps)
        return self._rule

    def lowered(self, args: tuple[Any, ...]) -> Lowered:
        """A function that calls this Jacobian as a primitive: what a transformation over it
        transforms."""
        if self.sparse is not None:
            raise ASTADError("a sparse Jacobian (a scipy.sparse matrix) is not differentiated "
                             "again: differentiate the dense one (sparse=False)")
        n = len(args)
        if n not in self._calls:
            from ast_ad.backend.load import load

            names = list(self.signature.parameters)
            params = ", ".join(
                names if len(names) == n and not self.directions else [f"a{k}" for k in range(n)]
            )
            # ``jacobian_<lambda>`` is no name Python can read: jacobian_lambda
            name = identifier(self.__name__)
            text = f"def {name}_at({params}):\n    return {name}({params})\n"
            self._calls[n] = load(text, f"{name}_at", {name: self}).fn
        return Lowered(self._calls[n], args, tuple(range(n)), _same, _tangent)

    def source(self, args: tuple[Any, ...]) -> str:
        """The generated code this Jacobian runs for ``args``: forward mode over ``fun`` (or its
        gradient), written for the stack of its columns where it runs so (``columns_code``)."""
        if not args:
            raise ASTADError(
                "source of a Jacobian or Hessian needs example arguments: source(jac, x, ...)"
            )
        if self.mode == "reverse" and not getattr(self.fun, "composable", False):

            return Gradient(self.fun, self.argnums[0], with_value=False).loaded().text
        return columns_code(lower(self.fun, args), self.argnums[0]).text

    def forward(self, fun: Any, args: tuple[Any, ...], k: int) -> Any:
        out, columns = forward_columns(lower(fun, args), k)
        return _stack_columns(columns, fun(*args) if out is None else out, np.shape(args[k]))

    def reverse(self, fun: Any, args: tuple[Any, ...], k: int) -> Any:
        out, vjp_fn = vjp(fun, *args)
        x_shape = np.shape(args[k])
        leaves = _leaves(out)
        if not getattr(fun, "composable", False):
            batched = _batched_rows(vjp_fn, out, leaves, k, x_shape)
            if batched is not None:
                return batched
        blocks = []
        for i, leaf in enumerate(leaves):
            rows = []
            for j in range(size_of(leaf)):
                bars = [np.zeros(np.shape(other)) if np.ndim(other) else 0.0 for other in leaves]
                if np.ndim(leaf):
                    bar = np.zeros(size_of(leaf))
                    bar[j] = 1.0
                    bars[i] = bar.reshape(np.shape(leaf))
                else:
                    bars[i] = 1.0
                row = vjp_fn(_rebuild(out, bars))[k]
                rows.append(
                    np.zeros(x_shape) if row is None else as_array(row).astype(float, copy=False)
                )
            stacked = np.stack(rows) if rows else np.zeros((0,) + x_shape)
            blocks.append(stacked.reshape(np.shape(leaf) + x_shape))
        return tuple(blocks) if isinstance(out, tuple) else blocks[0]


def _stacked_adjoints(vjp_fn: Callable[..., tuple[Any, ...]], out: Any, bars: list[Any],
                      size: int) -> tuple[Any, ...]:
    """The adjoints of ``size`` cotangents (``bars``: one stack per output leaf) from one backward
    pass that carries them as batches, stacked on a first axis. The backward code is linear in
    its cotangents: an adjoint that comes out as no batch must be zero (it depends on none), else
    the pass is refused."""
    with batched_pass(size), batched_backward(size):
        found = vjp_fn(_rebuild(out, [Batch(bar) for bar in bars]))
    stacked = []
    for g in found:
        if g is not None and not isinstance(g, Batch) and \
                (isinstance(g, (tuple, list, dict)) or np.any(g)):
            raise BatchRefused("an adjoint came out as no batch")
        stacked.append(None if g is None else unstacked(g, size))
    return tuple(stacked)


def _batched_rows(vjp_fn: Any, out: Any, leaves: list[Any], k: int,
                  x_shape: tuple[int, ...]) -> Any:
    """The Jacobian's rows for argument ``k`` from one backward pass a leaf of the output, its
    unit cotangents seeded as one batch (``runtime.batched``): the backward code is linear in them,
    and its tapes and branches are the forward pass's, the same for each. ``None`` where the
    backward code does something a batch does not take (a loop's adjoint written entry by entry
    into zeros, say), or an array is not numpy's: then one pass a row."""
    if not all(type(leaf) is np.ndarray or type(leaf) in (float, np.float64) for leaf in leaves):
        return None
    blocks = []
    for i, leaf in enumerate(leaves):
        rows = size_of(leaf)
        if rows < 2 or np.iscomplexobj(leaf):
            return None
        bars = [np.zeros((rows, *np.shape(other))) for other in leaves]
        bars[i] = np.eye(rows).reshape((rows, *np.shape(leaf)))
        try:
            found = _stacked_adjoints(vjp_fn, out, bars, rows)[k]
        except Exception as failure:  # noqa: BLE001 (the passes one by one say what is wrong)
            logs.info("the Jacobian's rows one pass each: the batched pass stopped (%s: %s)",
                      type(failure).__name__, str(failure).splitlines()[0] if str(failure) else "")
            return None
        data = np.zeros((rows, *x_shape)) if found is None else found
        if data.shape != (rows, *x_shape):
            return None
        blocks.append(data.astype(float, copy=False).reshape(np.shape(leaf) + x_shape))
    return tuple(blocks) if isinstance(out, tuple) else blocks[0]


class JacobianVjp:
    """The reverse rule of a Jacobian primitive for its call's position ``p``: ``<g, dJ>`` along
    each entry of that argument, one forward derivative of the Jacobian each (``Jacobian.then``; the
    Jacobian itself where it is linear, in a direction's ``v``). Exact, and as many forward passes
    as the argument has entries: the gradient of a function whose body builds a Jacobian or Hessian
    is a third derivative."""

    __module__ = "ast_ad.api.compose"

    def __init__(self, jac: Jacobian, p: int):
        self.jac, self.p = jac, p
        self.__name__ = f"{jac.__name__}_vjp"

    def __call__(self, g: Any, ans: Any, *call: Any) -> Any:
        m, p, x = len(self.jac.directions), self.p, call[self.p]
        entries = np.zeros(size_of(x))
        for j in range(entries.size):
            e = np.zeros(entries.size)
            e[j] = 1.0
            unit = float(e[0]) if np.ndim(x) == 0 else e.reshape(np.shape(x))
            moved = self.jac(*call[:p], unit, *call[p + 1:]) if p < 2 * m else \
                self.jac.then(p - 2 * m)(unit, None, *call)
            entries[j] = _inner(g, moved)
        return float(entries[0]) if np.ndim(x) == 0 else entries.reshape(np.shape(x))













class JvpOf:
    """``ast_ad.jvp(fun, primals, tangents)`` written in a differentiated function: a primitive of
    the two tuples, returning ``(out, out_dot)``.

    Its rules differentiate the forward-mode code of ``fun`` again, as any generated code can be:
    reverse, ``vjp`` of that code (reverse over forward); forward, its ``jvp`` (forward over
    forward).
    """

    def __init__(self, fun: Callable[..., Any]):
        self.fun = fun
        self.__name__ = self.__qualname__ = f"jvp_{getattr(fun, '__name__', 'f')}"
        self._rule: Any = None
        # the forward-mode module made for a layout of floats and numpy arrays, and which
        # arguments have tangents (``code``); the last call's check and what it found
        self._codes: dict[Any, tuple[Any, tuple[int, ...]]] = {}
        self._last: tuple[Callable[..., Any], tuple[Callable[..., Any], tuple[int, ...]]] | None \
            = None

    def __call__(self, primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, Any]:
        """``jvp(fun, primals, tangents)``; where the adjoints of the primals have a pair of forward
        and backward functions made for this call's layout (``JvpCotangent.direct``) whose
        backward pass changes nothing it is given (``lowering.reads_only``), by that pair's forward
        function, its tape kept on the result (``Taped``): reverse mode over this call then runs
        the backward function alone, where it ran the forward one again.

        The fact relied on: the forward function of a pair computes the code's own value, bit for
        bit (the value every generated forward pass is checked to give: Python's)."""
        adjoints = self.ast_ad_rule().vjps[0]
        found = None
        if adjoints.has_run():
            try:
                found = adjoints.direct(primals, tangents)
            except Exception as failure:  # noqa: BLE001 (the value needs no pair: jvp gives it)
                logs.info("jvp in a body: no pair for this call's layout (%s: %s)",
                          type(failure).__name__,
                          str(failure).splitlines()[0] if str(failure) else "")
        if found is None or not found[5]:
            return jvp(self.fun, primals, tangents)
        _, pair, forward, _, active, _ = found
        try:
            out, saved = forward(*primals, *[tangents[k] for k in active])
        except LocatedError as exc:
            raise located(exc, pair) from None
        refuse_missing_tangents(out[1])
        taped = Taped(out)
        taped.saved, taped.pair = saved, pair
        return taped

    def code(
        self, primals: tuple[Any, ...], tangents: tuple[Any, ...]
    ) -> tuple[Callable[..., Any], tuple[int, ...]]:
        """The forward-mode function ``f_jvp(*primals, *active tangents) -> (out, out_dot)``, and
        which arguments have tangents: for floats and numpy arrays, the module made for their
        layout before, while it is current (``_current``; the fact relied on is ``_direct``'s:
        the module is fixed by the layout), found without pairing and lowering again."""
        last = self._last
        if last is not None and type(primals) is tuple and type(tangents) is tuple \
                and last[0](primals, tangents) is True:
            return last[1]  # (the last call's layout, its module current: ``layout_caller``)
        layout = _layout(primals, tangents) if type(primals) is tuple \
            and type(tangents) is tuple and len(primals) == len(tangents) else None
        found = self._codes.get(layout) if layout is not None else None
        if found is not None and layout is not None and _current(found[0]):
            self._last = layout_caller(layout, (found[0],), None), (found[0].fn, found[1])
            return found[0].fn, found[1]
        primals, tangents = _pair_up(tuple(primals), tuple(tangents))
        active = tuple(k for k, t in enumerate(tangents) if t is not None)
        lowered = lower(self.fun, primals)
        if lowered.fn is not self.fun:
            raise ASTADError(
                f"ast_ad.jvp of {self.__qualname__[4:]} inside a differentiated function needs a "
                "plain function of your own"
            )
        loaded = jvp_code(lowered, active)
        if layout is not None:
            self._codes[layout] = loaded, active
        return loaded.fn, active

    def ast_ad_rule(self) -> Any:
        """Reverse: the adjoints of the primals' and the tangents' tuples (``JvpCotangent``);
        forward: the tangent of ``(out, out_dot)`` along the primals' or the tangents' tangents
        (``JvpTangent``)."""

        if self._rule is None:
            vjps = (JvpCotangent(self, 0, ()), JvpCotangent(self, 1, ()))
            jvps = (JvpTangent(self, (0,)), JvpTangent(self, (1,)))
            self._rule = registry.Rule(self, vjps, origin="ast_ad.api.compose", jvps=jvps)
        return self._rule

    def fixed(self, primals: tuple[Any, ...], tangents: tuple[Any, ...], path: tuple[int, ...],
              moves: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...], tuple[Any, ...]]:
        """The forward-mode code at these tuples with the moves along ``path`` fixed (``Fixed``: a
        derivative of it), its flat arguments ``(*primals, *active tangents)``, and which tangents
        are active. A move of slot 0 moves the primals; of slot 1, the tangents."""
        code, active = self.code(primals, tangents)
        fun: Any = code
        for slot, move in zip(path, moves, strict=True):
            if slot == 0:
                fun = Fixed(fun, (tuple(range(len(primals))), False), tuple(move))
            else:
                fun = Fixed(fun, (tuple(len(primals) + i for i in range(len(active))), False),
                            tuple(move[k] for k in active))
        return fun, (*primals, *(tangents[k] for k in active)), active


class JvpTangent:
    """A forward rule of ``JvpOf``, and the rules of that rule: the tangent of ``(out, out_dot)``
    when the slots in ``path`` (0: the primals, 1: the tangents) move, called as rules are, ``(w_m,
    ans_m, ..., w_1, ans_1, primals, tangents)``. It is forward mode over ``fun``'s forward-mode
    code, once per move; its own forward rules are linear in each ``w``, zero in each ``ans``, and
    one more move in each slot."""

    __module__ = "ast_ad.api.compose"

    def __init__(self, of: JvpOf, path: tuple[int, ...]):

        self.of, self.path = of, path
        self.__name__ = f"{of.__name__}_{'_'.join('pt'[s] for s in path)}_dot"
        self._rule: Any = None
        registry.def_sequence(self)  # a pair: its tangents add element by element
        # one move, called as last time with floats and numpy arrays: which tangents were given,
        # and the call (``layout_caller``) that checks the layout and both modules and runs the
        # forward-mode module over the code of ``of`` (``_direct_once``)
        self._last: tuple[tuple[int, ...], Callable[..., Any], Loaded] | None = None

    def __call__(self, *call: Any) -> Any:
        m = len(self.path)
        moves, (primals, tangents) = moves_of(call, m)
        last = self._last
        if last is not None and type(primals) is tuple and type(tangents) is tuple:
            active = tuple(k for k, t in enumerate(tangents) if t is not None)
            if active == last[0]:
                given = (*primals, *(tangents[k] for k in active))
                try:
                    done = last[1](given, _moved(self.path[0], moves[0], primals, tangents))
                except LocatedError as exc:
                    raise located(exc, last[2]) from None
                if done is not NOT_SCALARS:
                    refuse_missing_tangents(done[1])
                    return done[1]
        fun, given, active = self.of.fixed(primals, tangents, self.path[:-1], moves[:-1])
        moved = _moved(self.path[-1], moves[-1], primals, tangents)
        out = jvp(fun, given, moved)[1]
        if m == 1:
            self._direct_once(primals, tangents, fun, given, moved, active)
        return out

    def _direct_once(self, primals: tuple[Any, ...], tangents: tuple[Any, ...], fun: Any,
                     given: tuple[Any, ...], moved: tuple[Any, ...],
                     active: tuple[int, ...]) -> None:
        """After a call with one move: the next call like it (the same layout of floats and numpy
        arrays, the same tangents given) checks that layout and both modules (the code of ``of``
        for this layout, then the forward-mode module over it, which reads its data globals from
        the first's namespace: ``layout_caller``'s order) and runs the second directly, without
        finding the code and pairing and checking the arguments again. The facts relied on are
        ``JvpOf.code``'s and ``directional._direct``'s: each module is fixed by the layout and
        which arguments move."""
        self._last = None
        layout = _layout(primals, tangents) if type(primals) is tuple \
            and type(tangents) is tuple and len(primals) == len(tangents) else None
        code = self.of._codes.get(layout) if layout is not None else None
        forward = _ARRAY_JVPS.get(fun)
        flat = _layout(given, moved)
        if code is None or forward is None or flat is None or code[0].fn is not fun:
            return
        loaded = forward[1]
        self._last = active, layout_caller(flat, (code[0], loaded), loaded.fn), loaded

    def ast_ad_rule(self) -> Any:
        """Forward: linear in each move, one more move in each slot. Reverse, called ``(g, ans,
        *call)``: for move ``w_i``, the adjoints of its slot of ``<g, D^(m-1) code[the other
        moves]>`` (``JvpCotangent``); for the primals and the tangents, their adjoints of ``<g, D^m
        code[w_1, ..., w_m]>``."""

        if self._rule is None:
            m = len(self.path)
            jvps: tuple[Any, ...] = (registry.LINEAR, registry.zero) * m + \
                (JvpTangent(self.of, (*self.path, 0)), JvpTangent(self.of, (*self.path, 1)))
            rest = (0, 1, 2 + 2 * m, 3 + 2 * m)  # g, ans, the primals, the tangents
            vjps = _moves_adjoints(self.of, self.path, (), (), rest, self.__name__)
            moves = tuple(range(2, 2 + 2 * m))
            vjps += [Permuted(JvpCotangent(self.of, wrt, self.path), (*moves, *rest), 2 * m + 4,
                              f"{self.__name__}_{'pt'[wrt]}_vjp") for wrt in (0, 1)]
            self._rule = registry.Rule(self, tuple(vjps), origin="ast_ad.api.compose", jvps=jvps)
        return self._rule


def _moves_adjoints(of: JvpOf, path: tuple[int, ...], tail: tuple[int, ...], lead: tuple[int, ...],
                    rest: tuple[int, ...], name: str) -> list[Any]:
    """The reverse rules of the moves along ``path`` of a rule of ``of``, each followed by its
    ``ans``'s (zero).

    Those reverse rules are called with the cotangent and its ``ans`` first, then the moves, the
    last first (``w_k`` at ``2 + 2 (m - k)``). The adjoint of ``w_k`` is ``JvpCotangent`` of its
    slot along the other moves and the slots in ``tail``, laid out by ``Permuted`` as its own call
    has them: the positions ``lead`` (moves of ``tail``), the other moves, then ``rest`` (its g,
    ans, the primals and the tangents)."""

    m = len(path)
    arity = len(lead) + 2 * m + len(rest)
    out: list[Any] = []
    for k in range(m, 0, -1):
        others = [j for j in range(m, 0, -1) if j != k]
        order = (*lead, *(2 + 2 * (m - j) + d for j in others for d in (0, 1)), *rest)
        along = (*(path[j - 1] for j in sorted(others)), *tail)
        out += [
            Permuted(JvpCotangent(of, path[k - 1], along), order, arity, f"{name}_w{k}_vjp"),
            registry.zero,
        ]
    return out


class Permuted:
    """``target`` called with the arguments of its own call at ``order``: one rule written for
    another rule's layout of arguments (an argument left out of ``order`` is not read, so nothing
    flows to it). Its rules are ``target``'s laid out the same way, so it is differentiated again as
    ``target`` is."""

    __module__ = "ast_ad.api.compose"

    def __init__(self, target: Any, order: tuple[int, ...], arity: int, name: str):

        self.target, self.order, self.arity = target, order, arity
        self.__name__ = self.__qualname__ = name
        self._rule: Any = None
        if registry.returns_sequence(target):
            registry.def_sequence(self)

    def __call__(self, *call: Any) -> Any:
        return self.target(*(call[j] for j in self.order))

    def ast_ad_rule(self) -> Any:

        if self._rule is None:
            rule = registry.lookup(self.target)
            # the targets are JvpTangent and JvpCotangent, rules of rules
            assert rule is not None, self.target
            # a rule's call: (g or v, ans, *this call)
            shifted = (0, 1, *(2 + j for j in self.order))

            def laid(made: Any, j: int, kind: str) -> Any:
                if j not in self.order:
                    return registry.zero
                if made is None or made is registry.zero or made is registry.LINEAR:
                    return made
                return Permuted(made, shifted, self.arity + 2, f"{self.__name__}_{kind}{j}")
            vjps = tuple(laid(rule.vjp(self.order.index(j)), j, "vjp") for j in range(self.arity))
            jvps = tuple(laid(rule.jvp(self.order.index(j)), j, "jvp") for j in range(self.arity))
            self._rule = registry.Rule(self, vjps, origin="ast_ad.api.compose", jvps=jvps)
        return self._rule


def _moved(
    slot: int, move: Any, primals: tuple[Any, ...], tangents: tuple[Any, ...]
) -> tuple[Any, ...]:
    """The tangents of the flat arguments ``(*primals, *active tangents)`` when ``slot`` moves by
    ``move``."""
    active = [k for k, t in enumerate(tangents) if t is not None]
    if slot == 0:
        return (*move, *[None] * len(active))
    return (*[None] * len(primals), *(move[k] for k in active))


class Taped(tuple):  # type: ignore[type-arg]
    """``JvpOf``'s result ``(out, out_dot)``, with the tape of the forward function that computed
    it (``saved``) and that function's pair module (``pair``): its reverse rule for the primals
    runs the backward function on it (``JvpCotangent.run_direct``)."""

    saved: Any
    pair: Any

    def __reduce__(self) -> tuple[Any, ...]:
        # copied or pickled, a plain tuple: the tape stays with the result it was made for (its
        # rule then runs the forward function again)
        return tuple, (tuple(self),)


class JvpCotangent:
    """A reverse rule of ``JvpOf`` (the adjoints of slot ``wrt``: 0, the primals; 1, the tangents),
    and the forward rules of that rule: ``(w_m, ans_m, ..., w_1, ans_1, g, ans, primals, tangents)``
    gives the adjoints of ``<g, D^m code[w_1, ..., w_m]>``, reverse mode over the forward-mode code
    of the derivative (by the symmetry of mixed partial derivatives, the tangent of an adjoint is
    the adjoint of the tangent). Linear in ``g`` and each ``w``, zero in each ``ans``, one more move
    in each slot."""

    __module__ = "ast_ad.api.compose"

    def __init__(self, of: JvpOf, wrt: int, path: tuple[int, ...]):

        self.of, self.wrt, self.path = of, wrt, path
        self.__name__ = f"{of.__name__}_{'pt'[wrt]}_vjp" + "".join(f"_{'pt'[s]}_dot" for s in path)
        self._rule: Any = None
        self._direct: dict[Any, tuple[Any, Any, Any, Any, tuple[int, ...], bool]] = {}
        # the last call's: the check of its layout (``layout_caller``), and what it found
        self._last: tuple[Callable[..., Any], Any] | None = None
        registry.def_sequence(self)  # a tuple of adjoints

    def __call__(self, *call: Any) -> Any:
        m = len(self.path)
        moves, (g, ans, primals, tangents) = moves_of(call, m)
        if not m:
            direct = self.direct(primals, tangents)
            if direct is not None:
                return self.run_direct(direct, g, primals, tangents, ans)
        fun, given, active = self.of.fixed(primals, tangents, self.path, moves)
        lowered = lower(fun, given)
        out, vjp_fn = vjp(lowered.fn, *lowered.args)
        bars = vjp_fn(_seeded(out, g, m))
        flat = [bars[lowered.positions[j]] for j in range(len(given))]
        if self.wrt == 0:
            return tuple(
                _zero_if_none(b, p) for b, p in zip(flat[: len(primals)], primals, strict=True)
            )
        adjoints: list[Any] = [None if t is None else 0.0 * as_array(t) for t in tangents]
        for k, bar in zip(active, flat[len(primals):], strict=True):
            adjoints[k] = _zero_if_none(bar, tangents[k])
        return tuple(adjoints)

    def has_run(self) -> bool:
        """Whether a call has found the pair for its layout (reverse mode has run over the jvp)."""
        return self._last is not None

    def direct(self, primals: Any, tangents: Any
               ) -> tuple[Any, Any, Any, Any, tuple[int, ...], bool] | None:
        """For a call whose primals and tangents are floats and numpy arrays of the kinds, shapes
        and dtypes of an earlier call's, what that call found, without lowering, pairing and
        copying again: the forward-mode module, and its forward and backward functions
        (``transform.pair``) with their module, made once for that layout, each called once by
        ``run_direct``, and whether its backward pass changes nothing it is given
        (``lowering.reads_only``: ``JvpOf`` may then keep the forward function's tape on its
        result). ``None`` where the call is another; made again where either module is no
        longer current (a function it reads changed: ``Loaded.refresh``, which reads data globals
        again).

        The facts it relies on: the forward-mode module, and so its pair, is fixed by the
        arguments' kinds, shapes and dtypes and by which tangents are given (``_layout``, as
        ``directional._direct`` checks for ``jvp``); a backward function called once pops a tape
        no other call reads (this rule's own call of it)."""
        if type(primals) is not tuple or type(tangents) is not tuple \
                or len(primals) != len(tangents):
            return None
        last = self._last
        if last is not None and last[0](primals, tangents) is True:
            kept: tuple[Any, Any, Any, Any, tuple[int, ...], bool] = last[1]
            return kept  # (as the last call: its layout, both modules current)
        layout = _layout(primals, tangents)
        if layout is None:
            return None
        found = self._direct.get(layout)
        # (both modules current: the forward-mode code's, and its pair's, which read the same
        # globals again)
        if found is not None and not (_current(found[0]) and _current(found[1])):
            found = None
        if found is None:
            pair_up = _pair_up(primals, tangents)
            active = tuple(k for k, t in enumerate(pair_up[1]) if t is not None)
            lowered = lower(self.of.fun, pair_up[0])
            if lowered.fn is not self.of.fun or lowered.args is not pair_up[0]:
                return None
            loaded = jvp_code(lowered, active)
            given = (*primals, *(tangents[k] for k in active))
            # the adjoints of this rule's slot alone: the primals', or the moving tangents'
            wanted = range(len(primals)) if self.wrt == 0 else range(len(primals), len(given))
            forward, backward, pair = transform.pair(loaded.fn, tuple(wanted),
                                                     shape_labels(given))
            found = self._direct[layout] = (loaded, pair, forward, backward, active,
                                            reads_only(pair))
        self._last = layout_caller(layout, (found[0], found[1]), None), found
        return found

    def run_direct(self, found: tuple[Any, Any, Any, Any, tuple[int, ...], bool], g: Any,
                   primals: tuple[Any, ...], tangents: tuple[Any, ...],
                   ans: Any = None) -> tuple[Any, ...]:
        """The adjoints of this rule's slot by the pair ``direct`` found: its forward function,
        then its backward one, seeded with ``g``; each adjoint shaped as its argument. The forward
        function's tape is the one ``ans`` keeps where ``JvpOf`` ran this pair's forward function
        for it (``Taped``: the same module, whose backward pass changes nothing it is given)."""
        _, pair, forward, backward, active, _ = found
        try:
            if type(ans) is Taped and ans.pair is pair:
                out, saved = ans, ans.saved
            else:
                out, saved = forward(*primals, *[tangents[k] for k in active])
            # (the seed: ``g``, its parts that are ``None`` zeros)
            seed = g if type(g) is tuple and len(g) == 2 and g[0] is not None \
                and g[1] is not None else _seeded(out, g, 0)
            bars = backward(saved, seed)
        except LocatedError as exc:
            raise located(exc, pair) from None
        if self.wrt == 0:
            return tuple([_like(b, p) for b, p in zip(bars, primals, strict=True)])
        adjoints: list[Any] = [None if t is None else 0.0 * as_array(t) for t in tangents]
        for k, bar in zip(active, bars, strict=True):
            adjoints[k] = _like(bar, tangents[k])
        return tuple(adjoints)

    def ast_ad_rule(self) -> Any:

        if self._rule is None:
            m = len(self.path)
            jvps: tuple[Any, ...] = (registry.LINEAR, registry.zero) * (m + 1) + (
                JvpCotangent(self.of, self.wrt, (*self.path, 0)),
                JvpCotangent(self.of, self.wrt, (*self.path, 1)),
            )
            # reverse, called (u, ans', *call): <u, this> is <g, D^(m+1) code[w_1, ..., w_m, u in
            # slot wrt]>
            rest = (2 * m + 2, 2 * m + 3, 2 * m + 4, 2 * m + 5)  # g, ans, the primals, the tangents
            # w_k: the adjoints of its slot of <g, D^m code[the other moves, u]> (u, ans' lead the
            # call)
            vjps = _moves_adjoints(self.of, self.path, (self.wrt,), (0, 1), rest, self.__name__)
            moves = tuple(range(2 * m + 2))  # u, ans', and the moves
            vjps += [
                Permuted(
                    JvpTangent(self.of, (*self.path, self.wrt)),
                    (*moves, 2 * m + 4, 2 * m + 5),
                    2 * m + 6,
                    f"{self.__name__}_g_vjp",
                ),
                registry.zero,
            ]
            vjps += [JvpCotangent(self.of, wrt, (*self.path, self.wrt)) for wrt in (0, 1)]
            self._rule = registry.Rule(self, tuple(vjps), origin="ast_ad.api.compose", jvps=jvps)
        return self._rule


_JVPS: dict[Any, JvpOf] = {}


def jvp_of(fun: Callable[..., Any]) -> JvpOf:
    """The primitive ``JvpOf(fun)``, made once per function (generated code refers to it by
    name)."""
    if fun not in _JVPS:
        from ast_ad.core import registry

        _JVPS[fun] = JvpOf(fun)
        registry.def_sequence(_JVPS[fun])  # it returns a tuple: its adjoint adds element by element
    return _JVPS[fun]


def jvp_source(fun: Callable[..., Any], nparams: int, active: tuple[int, ...]) -> Any:
    """The forward-mode code of ``fun`` for tangents of its arguments ``active``, made for any
    floats and arrays (each argument its own shape label: ``unbroadcast`` wherever shapes may
    differ), for ``ast_ad.jvp(fun, ...)`` written in a body to be lowered in place
    (``frontend.nested.Nesting.forward_mode_inlined``): ``(text, entry, namespace, watches)``,
    where ``watches`` are the user's globals the code was made from (their module's dict, the
    name, the object), each to be watched by the code the body becomes. ``None`` where the code is
    more than one function (``fun`` calls helpers, whose code would be read from a generated
    module's copy of their globals) or reads a closure's cell."""
    return _one_function(transform.jvp_function(fun, active, tuple(range(nparams)), None))


def grad_source(fun: Callable[..., Any], nparams: int, argnums: tuple[int, ...],
                single: bool) -> Any:
    """The reverse-mode gradient code of ``fun`` in its arguments ``argnums`` (``single``: one,
    its gradient alone; else a tuple of them), made for any floats and arrays (each argument its
    own shape label), for ``ast_ad.grad(fun, argnums)(...)`` written in a body to be lowered in
    place (``frontend.nested.Nesting.gradient_inlined``), as ``jvp_source`` is for ``jvp``: the
    same ``(text, entry, namespace, watches)``, or ``None`` where the code is more than one
    function or reads a closure's cell. Its entry function takes the arguments and returns
    ``(out, grads)``."""
    loaded = transform.gradient(fun, argnums, single, tuple(range(nparams)))
    return _one_function(loaded)


def _one_function(loaded: Loaded) -> Any:
    """``loaded``'s ``(text, entry, namespace, watches)`` (``jvp_source``), or ``None``."""
    if loaded.text.count("\ndef ") or not loaded.text.startswith("def "):
        return None
    watches = []
    for binding in loaded.bindings:
        kind, name = binding.origin
        if kind != "global":
            return None
        watches.append((binding.fn.__globals__, name, binding.value))
    return loaded.text, loaded.fn.__name__, loaded.namespace, tuple(watches)


STAGES = ("normalized", "adjoint", "jvp")


def source(fn: Any, *example_args: Any, stage: str = "adjoint") -> str:
    """The generated Python of a gradient function (``stage="adjoint"``), of ``fn``'s forward mode
    (``stage="jvp"``, every float argument differentiated), of a Jacobian or Hessian function, or
    ``fn``'s normalized form.

    Generated code is specialized on which arguments are scalars, and on a
    numpy array's number of axes and kind (it leaves out un-broadcasting that
    numbers cannot need: see ``ast_ad.analysis.kinds``). ``source`` shows the version
    for ``example_args`` if given, else for the gradient's last call, else the
    general version for arrays (for scalars, in forward mode).
    """

    if stage not in STAGES:
        raise ASTADError(f"unknown stage {stage!r}: choose one of {', '.join(STAGES)}")
    if isinstance(fn, Jacobian):
        return fn.source(example_args)
    if stage == "jvp":
        nparams = (
            len(inspect.signature(fn).parameters)
            if not getattr(fn, "composable", False)
            else fn.nparams
        )
        args = example_args or (1.0,) * nparams
        active = tuple(k for k, a in enumerate(args) if _differentiable(a))
        return jvp_code(lower(fn, tuple(args)), active).text
    if getattr(fn, "composable", False) and not isinstance(fn, Gradient) and stage == "adjoint":
        if not example_args:  # ``hvp(f)``: the code it runs depends on the arguments' kinds
            raise ASTADError(
                f"source of {getattr(fn, '__name__', 'this derivative')} needs example arguments: "
                "source(fn, x, ...)"
            )
        lowered = lower(fn, tuple(example_args))
        if lowered.loaded is None:
            raise ASTADError(
                f"{getattr(fn, '__name__', 'this derivative')} runs no generated code of its own"
            )
        return str(lowered.loaded.text)
    gradient = fn if isinstance(fn, Gradient) else Gradient(fn, 0, with_value=False)
    if stage == "normalized":
        return transform.forward_source(gradient.fun)
    # a derivative of a derivative: the forward-mode code over the inner one
    if gradient.transformed:
        args = example_args or gradient.last_args or (1.0,) * gradient.nparams
        text: str = gradient.lowered(tuple(args)).loaded.text
        return text
    if example_args:
        args = (
            (gradient.bound_self, *example_args)
            if gradient.bound_self is not None
            else example_args
        )
        # defaults filled in, as a call does
        if len(args) != gradient.nparams or not gradient.plain:
            args = gradient.bind(args, {})
        return gradient.loaded(shape_labels(args)).text
    return gradient.loaded().text


def gradient_adjoints(gradient: Gradient[Any, Any], positions: int | tuple[int, ...], g: Any,
                      args: tuple[Any, ...]) -> Any:
    """The adjoints of the arguments at ``positions`` through ``gradient(*args)`` = grad_A f, given
    its adjoint ``g``: d/dx <grad_A f, g>, which by the symmetry of second derivatives is the
    forward-mode tangent of grad_positions f along ``g`` placed in the arguments A (a Hessian-vector
    product)."""

    bars = (g,) if gradient.single else tuple(g)
    tangents: list[Any] = [None] * len(args)
    for a, bar in zip(gradient.argnums, bars, strict=True):
        tangents[a] = bar
    return jvp(gradient.partial(positions), args, tuple(tangents))[1]


nested.provide(
    jvp=jvp,
    vjp=vjp,
    hvp=hvp,
    jacfwd=jacfwd,
    jacrev=jacrev,
    jacobian=jacobian,
    hessian=hessian,
    jvp_of=jvp_of,
    grad_source=grad_source,
    jvp_source=jvp_source,
)  # a body that calls one is lowered to a call of what it makes
