"""Transformations of transformations: ``jvp``, ``vjp``, Jacobians, Hessians, and derivatives of derivatives.

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

import numbers
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from ast_ad import transform
from ast_ad.errors import ArgnumsError, ASTADError, LocatedError
from ast_ad.load import Loaded
from ast_ad.records import record
from ast_ad.runtime import as_array, is_array, of_type, size_of

Finish = Callable[[Any], Any]
FinishDot = Callable[[Any, Any], Any]


@record
class Lowered:
    """A callable's computation as a function ast_ad can transform.

    ``fn(*args)`` gives the raw result; ``finish(raw)`` is the callable's result, and
    ``finish_dot(raw, raw_dot)`` its tangent (linear in ``raw_dot``). The callable's
    argument ``k`` is ``args[positions[k]]``.
    """

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    positions: tuple[int, ...]
    finish: Finish
    finish_dot: FinishDot
    loaded: Any = None  # the generated code behind ``fn``, if any (for ``source``)
    needed: tuple[bool, ...] | None = None  # the parts of ``fn``'s returned tuple that ``finish_dot`` reads


def lower(fun: Any, args: tuple[Any, ...]) -> Lowered:
    """``fun`` at ``args`` as a function ast_ad can transform: its own lowering, or the user's function."""
    if type(fun) is types.FunctionType:  # the common case, first (parse checks that it has a source)
        return Lowered(fun, args, tuple(range(len(args))), _same, _tangent)
    own = getattr(fun, "lowered", None)
    if own is not None and getattr(fun, "composable", False):
        lowered: Lowered = own(args)
        return lowered
    from ast_ad.api import _unbind  # the same checks (a function with source) as grad

    fn, bound = _unbind(fun)
    if bound is not None:
        return Lowered(fn, (bound, *args), tuple(range(1, len(args) + 1)), _same, _tangent)
    return Lowered(fn, args, tuple(range(len(args))), _same, _tangent)


def _same(raw: Any) -> Any:
    return raw


def _tangent(raw: Any, raw_dot: Any) -> Any:
    return raw_dot


# ---- forward mode --------------------------------------------------------------------------------------------
def jvp(fun: Callable[..., Any], primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, Any]:
    """``(fun(*primals), J tangents)``: forward mode, one pass, no tape.

    ``tangents`` matches ``primals`` one for one (containers as containers); ``None``
    marks an argument that is not differentiated (integers, flags).
    """
    scalar = type(fun) is types.FunctionType and type(primals) is tuple and type(tangents) is tuple \
        and len(primals) == len(tangents) and all(type(a) is float for a in (*primals, *tangents))
    if scalar:  # floats only, as last time: the module of then, if still current (see Gradient.__call__)
        found = _SCALAR_JVPS.get((fun, len(primals)))
        if found is not None and transform.current(found[1], found[0]):
            out: tuple[Any, Any] = run(found[0], *primals, *tangents)
            return out
    primals, tangents = _pair_up(primals, tangents)
    active = tuple(k for k, t in enumerate(tangents) if t is not None)
    lowered = lower(fun, primals)
    if scalar:
        _SCALAR_JVPS[(fun, len(primals))] = jvp_code(lowered, active), transform.jvp_key(*_jvp_of(lowered, active))
    return forward_at(lowered, active, tuple(tangents[k] for k in active))


# the forward-mode module of a plain function called with floats only, and its key in the transform's cache
_SCALAR_JVPS: dict[tuple[Any, int], tuple[Loaded, tuple[Any, ...]]] = {}


class JvpOf:
    """``ast_ad.jvp(fun, primals, tangents)`` written in a differentiated function: a primitive of the two
    tuples, returning ``(out, out_dot)``.

    Its rules differentiate the forward-mode code of ``fun`` again, as any generated code can be: reverse,
    ``vjp`` of that code (reverse over forward); forward, its ``jvp`` (forward over forward).
    """

    def __init__(self, fun: Callable[..., Any]):
        self.fun = fun
        self.__name__ = self.__qualname__ = f"jvp_{getattr(fun, '__name__', 'f')}"
        self._rule: Any = None

    def __call__(self, primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, Any]:
        return jvp(self.fun, primals, tangents)

    def code(self, primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Callable[..., Any], tuple[int, ...]]:
        """The forward-mode function ``f_jvp(*primals, *active tangents) -> (out, out_dot)``, and which
        arguments have tangents."""
        primals, tangents = _pair_up(tuple(primals), tuple(tangents))
        active = tuple(k for k, t in enumerate(tangents) if t is not None)
        lowered = lower(self.fun, primals)
        if lowered.fn is not self.fun:
            raise ASTADError(f"ast_ad.jvp of {self.__qualname__[4:]} inside a differentiated function needs a "
                             "plain function of your own")
        return jvp_code(lowered, active).fn, active

    def ast_ad_rule(self) -> Any:
        """Reverse: the adjoints of the primals' and the tangents' tuples; forward: the tangent of
        ``(out, out_dot)`` along the primals' or the tangents' tangents."""
        from ast_ad import registry

        if self._rule is None:
            self._rule = registry.Rule(self, (self._primals_vjp, self._tangents_vjp), origin="ast_ad.compose",
                                       jvps=(self._primals_jvp, self._tangents_jvp))
        return self._rule

    def _adjoints(self, g: Any, ans: Any, primals: tuple[Any, ...],
                  tangents: tuple[Any, ...]) -> tuple[Any, Any]:
        code, active = self.code(primals, tangents)
        given = (*primals, *(tangents[k] for k in active))
        _, vjp_fn = vjp(code, *given)
        bars = vjp_fn(tuple(_zero_if_none(b, like) for b, like in zip(g, ans, strict=True)))
        primal_bars = tuple(_zero_if_none(b, p) for b, p in zip(bars[:len(primals)], primals, strict=True))
        tangent_bars: list[Any] = [None if t is None else 0.0 * as_array(t) for t in tangents]
        for k, bar in zip(active, bars[len(primals):], strict=True):
            tangent_bars[k] = _zero_if_none(bar, tangents[k])
        return primal_bars, tuple(tangent_bars)

    def _primals_vjp(self, g: Any, ans: Any, primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> Any:
        return self._adjoints(g, ans, primals, tangents)[0]

    def _tangents_vjp(self, g: Any, ans: Any, primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> Any:
        return self._adjoints(g, ans, primals, tangents)[1]

    def _primals_jvp(self, u: Any, ans: Any, primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> Any:
        code, active = self.code(primals, tangents)
        return jvp(code, (*primals, *(tangents[k] for k in active)), (*u, *[None] * len(active)))[1]

    def _tangents_jvp(self, u: Any, ans: Any, primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> Any:
        code, active = self.code(primals, tangents)
        return jvp(code, (*primals, *(tangents[k] for k in active)), (*[None] * len(primals),
                                                                       *(u[k] for k in active)))[1]


_JVPS: dict[Any, JvpOf] = {}


def jvp_of(fun: Callable[..., Any]) -> JvpOf:
    """The primitive ``JvpOf(fun)``, made once per function (generated code refers to it by name)."""
    if fun not in _JVPS:
        from ast_ad import registry

        _JVPS[fun] = JvpOf(fun)
        registry.def_sequence(_JVPS[fun])  # it returns a tuple: its adjoint adds element by element
    return _JVPS[fun]


def _zero_if_none(value: Any, like: Any) -> Any:
    return 0.0 * as_array(like) if value is None else value


def forward_at(lowered: Lowered, active: tuple[int, ...], tangents: tuple[Any, ...]) -> tuple[Any, Any]:
    """Run the forward-mode code of ``lowered`` with these tangents for the caller's arguments ``active``."""
    loaded = jvp_code(lowered, active)
    raw, raw_dot = run(loaded, *lowered.args, *tangents)
    return lowered.finish(raw), lowered.finish_dot(raw, raw_dot)


def jvp_code(lowered: Lowered, active: tuple[int, ...]) -> Loaded:
    return transform.jvp_function(*_jvp_of(lowered, active))


def _jvp_of(lowered: Lowered, active: tuple[int, ...]) -> tuple[Any, tuple[int, ...], tuple[int, ...], Any]:
    """What the forward-mode module of ``lowered`` is built and cached for: function, argnums, shapes, needed."""
    from ast_ad.api import shape_labels

    return lowered.fn, tuple(lowered.positions[k] for k in active), shape_labels(lowered.args), lowered.needed


def run(loaded: Any, *args: Any) -> Any:
    """Call generated code; a refusal raised in a helper gets the user's line it belongs to."""
    return run_code(loaded, loaded.fn, *args)


def run_code(loaded: Any, fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn``, a function of the generated module ``loaded``, as ``run`` does."""
    try:
        return fn(*args)
    except LocatedError as exc:
        where = loaded.user_line(exc)
        if exc.filename is None and where is not None:
            raise type(exc)(str(exc), *where) from None
        raise


def _pair_up(primals: Any, tangents: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise ASTADError("jvp takes primals and tangents as tuples, one entry per argument: "
                         "jvp(f, (x,), (x_dot,))")
    if len(primals) != len(tangents):
        raise ASTADError(f"jvp got {len(primals)} primals but {len(tangents)} tangents: give one tangent per "
                         "argument (None for one that is not differentiated)")
    from ast_ad.api import _check_differentiable

    out = []
    for k, (p, t) in enumerate(zip(primals, tangents, strict=True)):
        if t is not None and type(p) is not float:
            _check_differentiable(p, f"argument {k}")  # an integer has no tangent: give it None
        out.append(None if t is None else _tangent_like(t, p, k))
    return tuple(primals), tuple(out)


def _tangent_like(t: Any, p: Any, k: int) -> Any:
    """The tangent ``t`` checked against its primal ``p``: the same structure and shape, as floats."""
    if type(p) is float and type(t) in (float, int):
        return float(t)
    if isinstance(p, dict):
        if not isinstance(t, dict) or set(t) != set(p):
            raise ASTADError(f"the tangent of argument {k} must be a dict with the keys of its primal")
        return {key: _tangent_like(t[key], item, k) for key, item in p.items()}
    if isinstance(p, (tuple, list)):
        if not isinstance(t, (tuple, list)) or len(t) != len(p):
            raise ASTADError(f"the tangent of argument {k} must be a {type(p).__name__} of {len(p)} tangents")
        parts = [_tangent_like(a, b, k) for a, b in zip(t, p, strict=True)]
        return type(p)(*parts) if hasattr(p, "_fields") else type(p)(parts)
    if np.shape(t) != np.shape(p):
        raise ASTADError(f"the tangent of argument {k} has shape {np.shape(t)}, but the argument has shape "
                         f"{np.shape(p)}: a tangent has its primal's shape")
    if is_array(t) and not isinstance(t, np.ndarray):  # a dask or CuPy tangent stays one
        return t.astype(p.dtype if is_array(p) and p.dtype.kind == "f" else float)
    if is_array(p) and not isinstance(p, np.ndarray):  # a tangent for a dask or CuPy primal: of its type
        return of_type(np.asarray(t, dtype=p.dtype if p.dtype.kind == "f" else float), p)
    if isinstance(p, np.ndarray):
        return np.asarray(t, dtype=p.dtype if p.dtype.kind == "f" else float)
    return float(t) if np.ndim(t) == 0 and not isinstance(t, np.ndarray) else np.asarray(t, dtype=float)


# ---- reverse mode ---------------------------------------------------------------------------------------------
def vjp(fun: Callable[..., Any], *primals: Any,
        checkpoints: int | None = None) -> tuple[Any, Callable[[Any], tuple[Any, ...]]]:
    """``(fun(*primals), vjp_fn)``, where ``vjp_fn(out_bar)`` is the tuple of every argument's adjoint.

    Works for any output: an array, a tuple or dict of them. An argument that cannot be
    differentiated (an integer, a flag) gets ``None``. ``vjp_fn`` may be called many times.
    ``checkpoints=c``: binomial checkpointing of ``fun``'s loops, as for :func:`ast_ad.grad`.
    """
    from ast_ad.api import Gradient, _differentiable, shape_labels

    argnums = tuple(k for k, p in enumerate(primals) if _differentiable(p))
    if getattr(fun, "composable", False):
        if checkpoints is not None:
            raise ASTADError("checkpoints= applies to the vjp of a plain function: the vjp of a derivative "
                             "runs forward mode over it, which tapes nothing")
        return _vjp_of_transformed(fun, primals, argnums)
    gradient = Gradient(fun, argnums or (0,), with_value=True, checkpoints=checkpoints)
    if not argnums:
        return fun(*primals), lambda out_bar: (None,) * len(primals)
    args = (gradient.bound_self, *primals) if gradient.bound_self is not None else tuple(primals)
    fwd, bwd, loaded = transform.pair(gradient.fun, gradient.positions, shape_labels(args), gradient.checkpoints)
    out, saved = run_code(loaded, fwd, *args)

    def vjp_fn(out_bar: Any) -> tuple[Any, ...]:
        grads = run_code(loaded, bwd, fresh(saved), out_bar)  # its tapes are popped: each call gets its own
        shaped = [gradient.shaped(g, args[k]) for g, k in zip(grads, gradient.positions, strict=True)]
        found = dict(zip(argnums, shaped, strict=True))
        return tuple(found.get(k) for k in range(len(primals)))
    return out, vjp_fn


def fresh(saved: Any, copies: dict[int, Any] | None = None) -> Any:
    """``saved`` with every list and array in it copied, each once (what is shared stays shared): a backward
    pass pops its tapes, and writes back the arrays its loops wrote in place (``analysis.in_place_writes``)."""
    copies = {} if copies is None else copies
    if id(saved) in copies:
        return copies[id(saved)]
    if isinstance(saved, list):
        made: Any = [fresh(item, copies) for item in saved]
    elif isinstance(saved, tuple) and not hasattr(saved, "_fields"):
        made = tuple(fresh(item, copies) for item in saved)
    elif isinstance(saved, np.ndarray):
        made = saved.copy()
    else:
        return saved
    copies[id(saved)] = made
    return made


def _vjp_of_transformed(fun: Any, primals: tuple[Any, ...],
                        argnums: tuple[int, ...]) -> tuple[Any, Callable[[Any], tuple[Any, ...]]]:
    """The VJP of a gradient ``x -> grad_A f(x)`` (``api.gradient_adjoints``: a Hessian-vector product)."""
    from ast_ad.api import Gradient, gradient_adjoints

    if not isinstance(fun, Gradient) or fun.transformed or fun.with_value:
        raise ASTADError("vjp of this transformed function is not supported yet: vjp takes a plain function or "
                         "a gradient from ast_ad.grad; use jvp (forward mode) over it instead")
    out = fun(*primals)

    def vjp_fn(out_bar: Any) -> tuple[Any, ...]:
        found = dict(zip(argnums, gradient_adjoints(fun, argnums, out_bar, primals), strict=True))
        return tuple(found.get(k) for k in range(len(primals)))
    return out, vjp_fn


# ---- Jacobians and Hessians ----------------------------------------------------------------------------------
def jacfwd(fun: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    """The Jacobian by forward mode: one ``jvp`` per entry of the argument; shape ``out.shape + arg.shape``."""
    return Jacobian(fun, argnums, "forward")


def jacrev(fun: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    """The Jacobian by reverse mode: one ``vjp`` per entry of the output; shape ``out.shape + arg.shape``."""
    return Jacobian(fun, argnums, "reverse")


def jacobian(fun: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    """The Jacobian, by forward mode when the arguments have fewer entries than the output, else by reverse."""
    return Jacobian(fun, argnums, "auto")


def hessian(fun: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    """The Hessian of scalar ``fun``: forward mode over the reverse-mode gradient (a tuple of tuples for
    tuple ``argnums``)."""
    from ast_ad.api import grad

    return Jacobian(grad(fun, argnums), argnums, "forward")


def hvp(fun: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    """``hvp(f)(*args, v)``: the Hessian of scalar ``f`` times ``v``, by forward over reverse, without building H."""
    from ast_ad.api import grad

    gradient = grad(fun, argnums)
    positions = _argnums(argnums)

    def hessian_vector_product(*args: Any) -> Any:
        *primals, v = args
        vs = (v,) if isinstance(argnums, numbers.Integral) else tuple(v)
        if len(vs) != len(positions):
            raise ArgnumsError(f"hvp needs one vector per argument in argnums={argnums!r}, got {len(vs)}")
        tangents: list[Any] = [None] * len(primals)
        for k, vk in zip(positions, vs, strict=True):
            tangents[k] = vk
        return jvp(gradient, tuple(primals), tuple(tangents))[1]
    hessian_vector_product.__name__ = f"hvp_{getattr(fun, '__name__', 'f')}"
    return hessian_vector_product


def _argnums(argnums: Any) -> tuple[int, ...]:
    from ast_ad.api import _check_argnums

    return _check_argnums(argnums)


class Jacobian:
    """A Jacobian function: ``out.shape + arg.shape``, a tuple over tuple ``argnums``, a tuple over tuple outputs."""

    def __init__(self, fun: Callable[..., Any], argnums: int | tuple[int, ...], mode: str):
        self.fun, self.mode = fun, mode
        self.single = isinstance(argnums, numbers.Integral)
        self.argnums = _argnums(argnums)
        self.__name__ = f"jacobian_{getattr(fun, '__name__', 'f')}"

    def __call__(self, *args: Any) -> Any:
        from ast_ad.api import _check_differentiable

        for k in self.argnums:
            if k >= len(args):
                raise ArgnumsError(f"argnums={self.argnums!r} names argument {k}, but the call has {len(args)}")
            _check_differentiable(args[k], f"argument {k}")
            if isinstance(args[k], (tuple, list, dict)):
                raise ASTADError(f"the Jacobian with respect to a {type(args[k]).__name__} argument is not "
                                 "supported: pass its arrays as separate arguments, or one stacked array")
        sizes = sum(size_of(args[k]) for k in self.argnums)
        mode = self.mode
        if mode == "auto":
            out = self.fun(*args)
            mode = "forward" if sizes <= sum(size_of(leaf) for leaf in _leaves(out)) else "reverse"
        blocks = [self.forward(args, k) if mode == "forward" else self.reverse(args, k) for k in self.argnums]
        if self.single:
            return blocks[0]
        if isinstance(blocks[0], tuple):  # tuple outputs: out index first, then argnum
            return tuple(tuple(b[i] for b in blocks) for i in range(len(blocks[0])))
        return tuple(blocks)

    def source(self, args: tuple[Any, ...]) -> str:
        """The generated code this Jacobian runs for ``args``: forward mode over ``fun`` (or its gradient)."""
        if not args:
            raise ASTADError("source of a Jacobian or Hessian needs example arguments: source(jac, x, ...)")
        if self.mode == "reverse":
            from ast_ad.api import Gradient

            return Gradient(self.fun, self.argnums[0], with_value=False).loaded().text
        return jvp_code(lower(self.fun, args), (self.argnums[0],)).text

    def forward(self, args: tuple[Any, ...], k: int) -> Any:
        out, columns = forward_columns(lower(self.fun, args), k)
        return _stack_columns(columns, self.fun(*args) if out is None else out, np.shape(args[k]))

    def reverse(self, args: tuple[Any, ...], k: int) -> Any:
        out, vjp_fn = vjp(self.fun, *args)
        x_shape = np.shape(args[k])
        leaves = _leaves(out)
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
                rows.append(np.zeros(x_shape) if row is None else as_array(row).astype(float, copy=False))
            stacked = np.stack(rows) if rows else np.zeros((0,) + x_shape)
            blocks.append(stacked.reshape(np.shape(leaf) + x_shape))
        return tuple(blocks) if isinstance(out, tuple) else blocks[0]


def forward_columns(lowered: Lowered, k: int) -> tuple[Any, list[Any]]:
    """The callable's value, and its tangents along each unit vector of its argument ``k`` (the columns of
    its Jacobian), one forward pass each; the value is ``None`` for an empty argument."""
    loaded = jvp_code(lowered, (k,))
    x = lowered.args[lowered.positions[k]]
    out, columns = None, []
    for j in range(size_of(x)):
        e = np.zeros(size_of(x))
        e[j] = 1.0
        raw, raw_dot = run(loaded, *lowered.args, float(e[0]) if np.ndim(x) == 0 else e.reshape(np.shape(x)))
        out = lowered.finish(raw)
        columns.append(lowered.finish_dot(raw, raw_dot))
    return out, columns


def _leaves(out: Any) -> list[Any]:
    return list(out) if isinstance(out, tuple) else [out]


def _rebuild(out: Any, bars: list[Any]) -> Any:
    return tuple(bars) if isinstance(out, tuple) else bars[0]


def _stack_columns(columns: list[Any], out: Any, x_shape: tuple[int, ...]) -> Any:
    """Columns ``J e_j`` stacked into ``out.shape + x.shape`` (leaf by leaf for tuple outputs)."""
    if isinstance(out, tuple):
        return tuple(_stack_columns([c[i] for c in columns], leaf, x_shape) for i, leaf in enumerate(out))
    shape = np.shape(out)
    if not columns:
        return np.zeros(shape + x_shape)
    stacked = np.stack([np.broadcast_to(as_array(c).astype(float, copy=False), shape) for c in columns], axis=-1)
    return stacked.reshape(shape + x_shape)
