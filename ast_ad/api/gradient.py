"""The public entry points: ``grad``, ``value_and_grad`` and ``source`` (``compose`` has the
rest)."""

from __future__ import annotations

import inspect
import numbers
import re
import sys
import types
from collections.abc import Callable
from typing import (
    TYPE_CHECKING,
    Any,
    Concatenate,
    Generic,
    Literal,
    NoReturn,
    ParamSpec,
    TypeVar,
    overload,
)

import numpy as np

from ast_ad import transform
from ast_ad.api.arguments import (
    PLAIN_FLOATS,
    Checkpoints,
    _check_argnums,
    _check_differentiable,
    _distinct,
    _is_scalar,
    _like,
    _unbind,
    check_checkpoints,
    shape_labels,
)
from ast_ad.api.directional import Directional
from ast_ad.api.lowering import Lowered, forward_columns, jvp_code, lower, raw_zeros
from ast_ad.backend.load import Loaded
from ast_ad.backend.scalar_calls import NOT_SCALARS, Unshaped, array_caller, scalar_caller
from ast_ad.core import registry
from ast_ad.errors import (
    ArgnumsError,
    ASTADError,
    GradientFailedError,
    LocatedError,
    NonScalarOutputError,
)
from ast_ad.frontend import nested

if TYPE_CHECKING:
    from ast_ad.backend.load import Loaded



P = ParamSpec("P")
A = TypeVar("A")  # the type of a differentiated argument: its gradient has it
B = TypeVar("B")
A0 = TypeVar("A0")
V = TypeVar("V")  # what the function returns
R = TypeVar("R", covariant=True)  # what a gradient function returns
Jit = Literal["numba"] | None


# The types a type checker gives a gradient: the function's parameters, and each differentiated
# argument's type for its gradient, where ``argnums`` is written as a literal (0, 1, or (0, 1));
# otherwise ``Any``.
@overload
def grad(fun: Callable[Concatenate[A, P], Any], argnums: Literal[0] = 0, *, jit: Jit = None,
         checkpoints: Checkpoints = None,
         holomorphic: bool = False) -> Gradient[Concatenate[A, P], A]: ...
@overload
def grad(fun: Callable[Concatenate[A0, A, P], Any], argnums: Literal[1], *, jit: Jit = None,
         checkpoints: Checkpoints = None,
         holomorphic: bool = False) -> Gradient[Concatenate[A0, A, P], A]: ...
@overload
def grad(
    fun: Callable[Concatenate[A, B, P], Any],
    argnums: tuple[Literal[0], Literal[1]],
    *,
    jit: Jit = None,
    checkpoints: Checkpoints = None,
    holomorphic: bool = False,
) -> Gradient[Concatenate[A, B, P], tuple[A, B]]: ...
@overload
def grad(fun: Callable[P, Any], argnums: int = 0, *, jit: Jit = None,
         checkpoints: Checkpoints = None, holomorphic: bool = False) -> Gradient[P, Any]: ...
@overload
def grad(fun: Callable[P, Any], argnums: tuple[int, ...], *, jit: Jit = None,
         checkpoints: Checkpoints = None,
         holomorphic: bool = False) -> Gradient[P, tuple[Any, ...]]: ...
@overload
def grad(
    fun: None = None, argnums: Literal[0] = 0, *, jit: Jit = None, checkpoints: Checkpoints = None,
    holomorphic: bool = False,
) -> Callable[[Callable[Concatenate[A, P], Any]], Gradient[Concatenate[A, P], A]]: ...
@overload
def grad(fun: None = None, argnums: int | tuple[int, ...] = 0, *, jit: Jit = None,
         checkpoints: Checkpoints = None,
         holomorphic: bool = False) -> Callable[[Callable[P, Any]], Gradient[P, Any]]: ...


def grad(
    fun: Callable[P, Any] | None = None,
    argnums: int | tuple[int, ...] = 0,
    *,
    jit: Jit = None,
    checkpoints: Checkpoints = None,
    holomorphic: bool = False,
) -> Any:
    """The gradient of scalar-valued ``fun`` with respect to the argument(s) at ``argnums``.

    Works as ``grad(f)``, ``grad(f, 1)``, ``grad(f, argnums=(0, 1))`` (a tuple of gradients) and as
    a decorator, ``@grad`` or ``@grad(argnums=1)``. The gradient takes the arguments ``fun`` takes;
    it returns an array (or number) shaped like the argument at ``argnums``, or a tuple of them for
    a tuple ``argnums``. A type checker sees ``fun``'s parameters, and each gradient typed as its
    argument where ``argnums`` is written as a literal.

    ``jit="numba"`` compiles the generated gradient with Numba (``pip install numba``), in nopython
    mode: loops and branches over numbers and arrays run at compiled speed. Code Numba cannot
    compile raises :class:`ast_ad.backend.jit.JitError` at the first call, naming the line.

    ``checkpoints=c`` trades time for memory in long loops (binomial checkpointing,
    ``ast_ad.revolve``): each ``for`` loop at the top level of ``fun`` (and of your
    functions it calls) keeps at most ``c`` snapshots of the state it carries from step to step, and
    the backward pass computes the other steps again, by revolve's optimal schedule, instead of
    taping every step. The gradient is the same, to the bit. The generated code says above each loop
    whether it is checkpointed, and if not, why (a ``while`` loop, a ``break``, a ``print``, an
    in-place write, a call without a rule). ``checkpoints="auto"`` chooses the number when each
    loop starts, from its number of steps and the size of its state then: as many snapshots as fit
    in ``ast_ad.runtime.revolve.AUTO_BYTES`` (64 MiB), at most one a step
    (``ast_ad.revolve.auto_snapshots``).

    ``holomorphic=True`` takes the complex derivative ``f'(z)`` of a function that returns a complex
    number (JAX's spelling): the adjoint pass seeded with 1, and checked at the point against a
    second one seeded with ``-1j`` (the Cauchy-Riemann equations); a function that is not
    holomorphic there is refused, not given a number.
    """
    if fun is None:
        def decorate(fun: Callable[P, Any]) -> Gradient[P, Any]:
            return made(fun, argnums, False, jit, checkpoints, holomorphic)
        return decorate
    return made(fun, argnums, False, jit, checkpoints, holomorphic)


# The gradients ``grad`` and ``value_and_grad`` made of plain functions, by function and options,
# each with the code, defaults and keyword defaults it was made for (each gradient holds its
# function, as ``_LAST_SHAPES`` does: a function once differentiated stays, so a dictionary of weak
# keys would free nothing more, and it costs a weak reference a lookup)
_MADE: dict[Any, dict[Any, tuple[Any, Any, Any, Gradient[Any, Any]]]] = {}


def made(fun: Any, argnums: Any, with_value: bool, jit: Jit, checkpoints: Any,
          holomorphic: bool = False) -> Gradient[Any, Any]:
    """``Gradient(fun, ...)``: the one made before for this plain function and these options,
    where the function still has the code and defaults it had then (``grad(f)(x)`` written in a
    loop, or in a function that is itself differentiated, reads ``f``'s signature once, and each
    later call takes the direct path the first one armed). The fact it relies on: a ``Gradient``
    reads nothing of ``fun`` when it is made but its signature, code and name, which those decide;
    everything else (the generated code's currency, the globals it reads) it checks at each call."""
    if type(fun) is not types.FunctionType:
        return Gradient(fun, argnums, with_value, jit, checkpoints, holomorphic)
    # (by what each option is written as: ``checkpoints=True``, which is refused, equals 1; the
    # common options, an integer ``argnums`` and no others, by a tuple, which costs less to make)
    key: Any = (argnums, with_value, holomorphic) \
        if type(argnums) is int and jit is None and checkpoints is None \
        else repr((argnums, with_value, jit, checkpoints, holomorphic))
    kept = _MADE.get(fun)
    if kept is None:
        kept = _MADE[fun] = {}
    found = kept.get(key)
    if found is not None and found[0] is fun.__code__ and found[1] is fun.__defaults__ \
            and found[2] is fun.__kwdefaults__:
        return found[3]
    gradient: Gradient[Any, Any] = Gradient(fun, argnums, with_value, jit, checkpoints, holomorphic)
    kept[key] = (fun.__code__, fun.__defaults__, fun.__kwdefaults__, gradient)
    return gradient


@overload
def value_and_grad(fun: Callable[Concatenate[A, P], V], argnums: Literal[0] = 0, *, jit: Jit = None,
                   checkpoints: Checkpoints = None) -> Gradient[Concatenate[A, P], tuple[V, A]]: ...
@overload
def value_and_grad(
    fun: Callable[Concatenate[A0, A, P], V],
    argnums: Literal[1],
    *,
    jit: Jit = None,
    checkpoints: Checkpoints = None,
) -> Gradient[Concatenate[A0, A, P], tuple[V, A]]: ...
@overload
def value_and_grad(
    fun: Callable[Concatenate[A, B, P], V],
    argnums: tuple[Literal[0], Literal[1]],
    *,
    jit: Jit = None,
    checkpoints: Checkpoints = None,
) -> Gradient[Concatenate[A, B, P], tuple[V, tuple[A, B]]]: ...
@overload
def value_and_grad(fun: Callable[P, V], argnums: int | tuple[int, ...] = 0, *, jit: Jit = None,
                   checkpoints: Checkpoints = None) -> Gradient[P, tuple[V, Any]]: ...
@overload
def value_and_grad(
    fun: None = None, argnums: Literal[0] = 0, *, jit: Jit = None, checkpoints: Checkpoints = None
) -> Callable[[Callable[Concatenate[A, P], V]], Gradient[Concatenate[A, P], tuple[V, A]]]: ...
@overload
def value_and_grad(
    fun: None = None,
    argnums: int | tuple[int, ...] = 0,
    *,
    jit: Jit = None,
    checkpoints: Checkpoints = None,
) -> Callable[[Callable[P, V]], Gradient[P, tuple[V, Any]]]: ...


def value_and_grad(fun: Callable[P, Any] | None = None, argnums: int | tuple[int, ...] = 0, *,
                   jit: Jit = None, checkpoints: Checkpoints = None) -> Any:
    """Like :func:`grad`, but the function returns ``(value, gradient)`` from one forward pass."""
    if fun is None:
        def decorate(fun: Callable[P, Any]) -> Gradient[P, Any]:
            return made(fun, argnums, True, jit, checkpoints)
        return decorate
    return made(fun, argnums, True, jit, checkpoints)




# The shape labels of the last call, per function, argnums and form: ``source(grad(f))`` shows that
# version. Each is a one-item list that every gradient of that key holds (a call stores into it
# without hashing a key)
_LAST_SHAPES: dict[tuple[Any, tuple[int, ...], bool, Checkpoints],
                   list[tuple[int, ...] | None]] = {}


class Gradient(Generic[P, R]):
    """A gradient function: binds the call's arguments, runs the generated code, shapes the result.

    It is *composable* (see ``compose``): other transformations, and ``grad`` itself, can be applied
    to it.
    """

    composable = True
    __qualname__: str  # the function's own, as are __name__, __doc__ and __module__

    def __init__(self, fun: Callable[P, Any], argnums: int | tuple[int, ...], with_value: bool,
                 jit: Jit = None, checkpoints: Checkpoints = None, holomorphic: bool = False):
        if jit not in (None, "numba"):
            raise ASTADError(
                f'jit={jit!r}: the compiler ast_ad knows is jit="numba" (or leave jit out)'
            )
        self.jit = jit
        self.checkpoints = check_checkpoints(checkpoints)
        if jit is not None and checkpoints is not None:
            raise ASTADError(
                "jit= and checkpoints= together are not supported yet: Numba does not compile the "
                "checkpointed loop's schedule; leave one of them out"
            )
        self.fun, self.bound_self = _unbind(fun)
        # a derivative of something ast_ad made
        self.transformed = getattr(self.fun, "composable", False)
        self.holomorphic = bool(holomorphic)
        if self.holomorphic and (self.transformed or jit is not None):
            raise ASTADError(
                "holomorphic=True takes the derivative of a plain function, not compiled: leave "
                "jit= out, and differentiate the function itself, not a derivative of it"
            )
        if self.transformed and self.checkpoints is not None:
            raise ASTADError(
                "checkpoints= applies to the gradient of a plain function: a derivative of a "
                "derivative runs forward mode over the inner one, which tapes nothing"
            )
        self.single = isinstance(argnums, numbers.Integral)
        self.argnums = _check_argnums(argnums)
        self.with_value = with_value
        self.last_args: tuple[Any, ...] | None = None
        # its rules as a primitive (``ast_ad_rule``), made once
        self._rule: registry.Rule | None = None
        # the gradients its reverse rule runs (``gradient_adjoints``)
        self._partials: dict[Any, Gradient[Any, Any]] = {}
        # the joint rules made (``joint_adjoints``, ``joint_tangent``), by kind and positions
        self._joints: dict[tuple[str, tuple[int, ...]], Directional] = {}
        self.signature: inspect.Signature = getattr(self.fun, "signature") if self.transformed \
            else inspect.signature(self.fun)  # noqa: B009 -- a transformed function has one
        self.nparams = len(self.signature.parameters)
        # every parameter positional-or-keyword: a call with one positional argument each needs no
        # binding
        self.plain = all(
            p.kind is p.POSITIONAL_OR_KEYWORD for p in self.signature.parameters.values()
        )
        for k in self.argnums:
            if k >= self.nparams - (self.bound_self is not None) or k < 0:
                raise ArgnumsError(
                    f"argnums={argnums!r} names argument {k}, but {self.fun.__qualname__} takes "
                    f"{self.nparams - (self.bound_self is not None)} arguments"
                )
        self.shift = 1 if self.bound_self is not None else 0
        self.last_shapes: tuple[int, ...] | None = None
        # (with ``jit``: the array arguments' shapes its last call's code was made for)
        self.last_lengths: tuple[tuple[int, ...] | None, ...] | None = None
        self.positions = tuple(k + self.shift for k in self.argnums)
        self._last = _LAST_SHAPES.setdefault(
            (self.fun, self.positions, self.single, self.checkpoints), [None]
        )
        # the call of the module of the last call with floats only (``scalar_caller``), the module,
        # its labels
        self._scalars: Callable[..., Any] | None = None
        self.loaded_scalars: Loaded | None = None
        self.scalar_labels: tuple[int, ...] = ()
        # ``jvp`` over this gradient may run the forward-mode module of its last call with floats
        # and arrays directly (``directional._gradient_direct``): that call's check and call
        # (``layout_caller``), and the module
        self.direct_tangents = self.bound_self is None and not self.transformed \
            and not self.holomorphic and self.plain
        self.tangent_module: tuple[Callable[..., Any], Loaded] | None = None
        # and the module of the tangent alone, for a reverse rule's Hessian-vector product, where
        # the gradient ran at the same point (``directional._arm_tangent_alone``)
        self.tangent_alone: tuple[Callable[..., Any], Loaded] | None = None
        for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
            setattr(self, attr, getattr(self.fun, attr, None))

    def loaded(self, shapes: tuple[int, ...] | None = None,
               lengths: tuple[tuple[int, ...] | None, ...] | None = None) -> Loaded:
        """The generated code for arguments of these shape labels (default: those of the last
        call); with ``jit``, for arguments of these shapes (``lengths``; default: the last
        call's), which its call checks."""
        if shapes is None:  # this gradient's last call, or the last call of any gradient like it
            shapes = self.last_shapes or self._last[0] or tuple(range(self.nparams))
        if self.jit is not None:
            lengths = self.last_lengths = lengths or self.last_lengths or \
                tuple(None for _ in range(self.nparams))
        if self._scalars is not None and shapes != self.scalar_labels:
            # its last call is no longer one with floats only: the next one arms it again
            self._scalars = None
        self.last_shapes = self._last[0] = shapes
        try:
            return transform.gradient(
                self.fun, self.positions, self.single, shapes, self.checkpoints,
                typed=lengths if self.jit is not None else None,
            )
        except RecursionError:
            raise ASTADError(
                f"{self.__qualname__} is nested too deeply to transform within Python's recursion "
                "limit: split deep expressions into statements, or raise sys.setrecursionlimit"
            ) from None

    def compiled(self, loaded: Loaded) -> Callable[..., Any]:
        """``loaded``'s entry function compiled by this gradient's ``jit`` (see
        ``ast_ad.backend.jit``)."""
        from ast_ad.backend import jit

        if self.transformed:
            raise ASTADError("jit= applies to a gradient of a plain function, not of a derivative")
        if self.bound_self is not None:
            raise ASTADError(
                "jit= does not compile methods: differentiate a function of the object's arrays"
            )
        run: Callable[..., Any] = jit.compiled(loaded, self.fun)  # jit="numba": checked when made
        return run

    @property
    def __wrapped__(self) -> Callable[..., Any]:
        """The generated function, so ``inspect.getsource`` shows its text."""
        return self.loaded().fn

    def __call__(self, *given: P.args, **kwargs: P.kwargs) -> R:
        fast = self._scalars
        if fast is not None and not kwargs and len(given) == self.nparams:
            # scalar code, called as last time: every argument a float, and the module built for
            # that still current; checked, run and its result made floats in a function made for it
            # (``scalar_caller``)
            try:
                result = fast(*given)
            except Exception as exc:
                assert self.loaded_scalars is not None  # (set with ``_scalars``)
                self.failed(exc, given, self.loaded_scalars)
            if result is not NOT_SCALARS:
                done: R = (
                    self.finish(result.out, result.grads, given)
                    if type(result) is Unshaped
                    else result
                )
                return done
        args: tuple[Any, ...] = given if self.bound_self is None else (self.bound_self, *given)
        if kwargs or len(args) != self.nparams or not self.plain:
            args = self.bind(args, kwargs)
        if self.transformed:
            done = self.call_transformed(args)
            return done
        positions = self.positions
        for k in positions:
            if type(args[k]) not in PLAIN_FLOATS:
                _check_differentiable(args[k], self.parameter_name(k))
        labels = shape_labels(args)
        loaded = self.loaded(labels, None if self.jit is None else tuple(
            a.shape if type(a) is np.ndarray else None for a in args))
        run = loaded.fn if self.jit is None else self.compiled(loaded)
        if self.bound_self is None and self.plain and all(label == -1 for label in labels):
            self._scalars = scalar_caller(
                loaded,
                labels,
                self._last,
                self.nparams,
                None if self.single else len(positions),
                self.with_value,
                run,
            )
            self.loaded_scalars, self.scalar_labels = loaded, labels
        elif self.bound_self is None and self.plain and not self.holomorphic and all(
            type(a) is np.ndarray or type(a) in PLAIN_FLOATS for a in args
        ):
            # floats and numpy arrays: the next call like this one checks each argument's kind,
            # shape and dtype inline and runs this module (``array_caller``)
            self._scalars = array_caller(
                loaded, labels, self._last, args, positions, self.single, self.with_value, run
            )
            self.loaded_scalars, self.scalar_labels = loaded, labels
        done = self.run(loaded, run, args)
        return done

    def run(self, loaded: Loaded, run: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """Run the generated code ``run`` of ``loaded`` on ``args``; its failures explained, its
        result shaped."""
        try:
            out, grads = run(*args)
        except Exception as exc:
            self.failed(exc, args, loaded)
        if self.holomorphic:
            self.check_holomorphic(out, grads, run(*args, -1j)[1])
        return self.finish(out, grads, args)

    def check_holomorphic(self, out: Any, grads: Any, turned: Any) -> None:
        """Refuse ``holomorphic=True`` where the function is not: the adjoint pass seeded with
        ``-1j`` gives ``-1j`` times the one seeded with 1 exactly where the Cauchy-Riemann
        equations hold (``d Re f / dx = d Im f / dy``, ``d Re f / dy = -d Im f / dx``)."""
        if not (np.ndim(out) == 0 and np.iscomplexobj(out)):
            raise ASTADError(
                f"holomorphic=True needs a function that returns a complex number, but "
                f"{self.__qualname__} returned {type(out).__name__} {out!r}"
            )
        parts = (grads,) if self.single else grads
        turned_parts = (turned,) if self.single else turned
        for k, g, h in zip(self.positions, parts, turned_parts, strict=True):
            if not np.allclose(h, -1j * np.asarray(g), rtol=1e-9, atol=1e-12):
                raise ASTADError(
                    f"{self.__qualname__} is not holomorphic in argument {k} at this point (its "
                    "real and imaginary parts do not meet the Cauchy-Riemann equations: it reads "
                    "a conjugate, an absolute value or a real part), so it has no complex "
                    "derivative; differentiate a real function of it (np.abs(f(z)) ** 2) without "
                    "holomorphic=True"
                )

    def finish(self, out: Any, grads: Any, args: tuple[Any, ...]) -> Any:
        """The generated code's ``(out, grads)``, its value checked to be a scalar (a complex one,
        for ``holomorphic=True``), its gradient shaped."""
        if type(out) not in PLAIN_FLOATS and not _is_scalar(out) and not (
            self.holomorphic and np.ndim(out) == 0
        ):
            raise self.non_scalar(out)
        return self.shape(out, grads, args)

    def failed(self, exc: Exception, args: tuple[Any, ...], loaded: Loaded) -> NoReturn:
        """Raise the failure of the generated code of ``loaded`` on ``args`` (``exc``),
        explained."""
        failure = self.explain_failure(exc, args, loaded)
        if failure is exc:
            raise exc
        # the user's own error (raised again by the function itself) keeps the generated code's as
        # its cause
        own = type(failure) is type(exc) and not isinstance(failure, ASTADError)
        raise failure from (exc if own or isinstance(failure, GradientFailedError) else None)

    def shape(self, out: Any, grads: Any, args: tuple[Any, ...]) -> Any:
        """The generated code's ``(out, grads)`` as this gradient returns them: shaped like the
        arguments."""
        positions = self.positions
        if self.single:
            grads = _like(grads, args[positions[0]])
        # plain loops: this runs on every call, and comprehensions cost more than the work here
        else:
            shaped: list[Any] = []
            for g, k in zip(grads, positions, strict=True):
                arg = args[k]
                # what _like does for a float, inline
                if type(arg) is float and type(g) in PLAIN_FLOATS:
                    shaped.append(float(g))
                else:
                    shaped.append(_distinct(_like(g, arg), shaped))
            grads = tuple(shaped)
        return (out, grads) if self.with_value else grads

    # ---- composition (see ``compose``) -----------------------------------------------------------
    def lowered(self, args: tuple[Any, ...]) -> Lowered:
        """This gradient at ``args`` as generated code that ast_ad can transform again."""
        if self.holomorphic:
            raise ASTADError(
                "a holomorphic=True gradient cannot be differentiated again yet: take the complex "
                "derivative by jvp with the tangent 1.0, which composes"
            )

        if self.bound_self is not None:
            args = (self.bound_self, *args)
        if self.transformed:
            lowered: Lowered = self.lowered_transformed(args)
            return lowered
        loaded = self.loaded(shape_labels(args))

        def finish(raw: Any) -> Any:
            return self.finish(raw[0], raw[1], args)

        def finish_dot(raw: Any, raw_dot: Any) -> Any:
            return self.shape(raw_dot[0], raw_dot[1], args)

        # ``shape`` transposed: its casts leave adjoints as they are
        def finish_bar(raw: Any, g: Any) -> Any:
            out_bar, grads_bar = g if self.with_value else (None, g)
            return (raw_zeros(raw[0]) if out_bar is None else out_bar), grads_bar

        return Lowered(
            loaded.fn,
            (*args, 1.0),
            tuple(range(self.shift, len(args))),
            finish,
            finish_dot,
            loaded,
            (self.with_value, True),
            finish_bar,
        )

    def lowered_transformed(self, args: tuple[Any, ...]) -> Any:
        """The derivative of a scalar function of a scalar that ast_ad made: forward mode over its
        code."""

        (k,) = self.argnums if len(self.argnums) == 1 else (None,)
        if k is None or np.ndim(args[k]) != 0 or isinstance(args[k], (tuple, list, dict)):
            raise ASTADError(
                "differentiating a derivative of a derivative again works with respect to one "
                "scalar argument at a time: pass that argument as a float"
            )
        inner = lower(self.fun, args)
        loaded = jvp_code(inner, (k,))

        def finish(raw: Any) -> Any:
            out = inner.finish(raw[0])
            if not _is_scalar(out):
                raise self.non_scalar(out)
            grad = _like(inner.finish_dot(raw[0], raw[1]), args[k])
            return (out, grad) if self.with_value else (grad if self.single else (grad,))

        def finish_dot(raw: Any, raw_dot: Any) -> Any:
            out_dot = inner.finish_dot(raw[0], raw_dot[0])
            grad_dot = _like(inner.finish_dot(raw[0], raw_dot[1]), args[k])
            grad_dot = grad_dot if self.single else (grad_dot,)
            return (out_dot, grad_dot) if self.with_value else grad_dot

        def finish_bar(raw: Any, g: Any) -> Any:  # ``finish_dot`` transposed
            out_bar, grad_bar = g if self.with_value else (None, g)
            (grad_bar,) = (grad_bar,) if self.single else grad_bar
            out_part = raw_zeros(raw[0]) if out_bar is None else inner.finish_bar(raw[0], out_bar)
            return out_part, inner.finish_bar(raw[0], grad_bar)
        return Lowered(loaded.fn, (*inner.args, 1.0), inner.positions, finish, finish_dot, loaded,
                               (self.with_value, True), finish_bar)

    def call_transformed(self, args: tuple[Any, ...]) -> Any:
        """The gradient of a scalar function ast_ad made (a gradient, say): one forward pass per
        entry of each differentiated argument, over that function's generated code."""

        self.last_args = args
        inner = lower(self.fun, args)
        out, grads = None, []
        for k in self.argnums:
            _check_differentiable(args[k], self.parameter_name(k))
            if isinstance(args[k], (tuple, list, dict)):
                raise ASTADError(
                    "the derivative of a derivative with respect to a tuple, list or dict is not "
                    "supported yet: pass its arrays as separate arguments"
                )
            out, columns = forward_columns(inner, k)
            if out is not None and not _is_scalar(out):
                raise self.non_scalar(out)
            grads.append(
                _like(np.reshape(np.asarray(columns, dtype=float), np.shape(args[k])), args[k])
            )
        if out is None:
            out = self.fun(*args)
        result = grads[0] if self.single else tuple(grads)
        return (out, result) if self.with_value else result

    def ast_ad_rule(self) -> Any:
        """The rules of this gradient as a primitive, for code that calls it (``grad`` of a function
        whose body calls ``ast_ad.grad``): forward, its ``jvp``; reverse, by the symmetry of second
        derivatives, the ``jvp`` of the gradient in each argument along the adjoint (a
        Hessian-vector product)."""
        if self.with_value or self.bound_self is not None or self.transformed:
            return None
        rule = self._rule
        if rule is None:

            n, mine = self.nparams, (self.argnums, self.single)
            partials = [self.partial(j) for j in range(n)]
            rule = self._rule = registry.Rule(
                self,
                tuple(Directional(p, (mine,), n) for p in partials),
                origin="ast_ad.api.gradient",
                jvps=tuple(Directional(self, (((j,), True),), n) for j in range(n)),
                joint=self.joint_adjoints,
                joint_tangent=self.joint_tangent,
            )
        return rule

    def joint_tangent(self, positions: tuple[int, ...]) -> Directional:
        """The forward rules of arguments ``positions`` at once: one forward pass over the gradient
        with all their tangents (each rule alone is a pass with its one)."""
        key = ("tangents", positions)
        found = self._joints.get(key)
        if found is None:
            found = self._joints[key] = Directional(self, ((positions, False),), self.nparams)
        return found

    def joint_adjoints(self, positions: tuple[int, ...]) -> Directional:
        """The reverse rules of arguments ``positions`` at once: the forward pass over the gradient
        in all of them, along the adjoint placed in this gradient's arguments (each rule alone is
        that pass over the gradient in its one argument: for two arguments, twice the passes the
        mathematics needs)."""
        key = ("adjoints", positions)
        found = self._joints.get(key)
        if found is None:
            found = self._joints[key] = Directional(
                self.partial(positions), ((self.argnums, self.single),), self.nparams
            )
            # (a tuple: forward mode adds its tangents element by element, as ``+`` would not)
            registry.def_sequence(found)
        return found

    def partial(self, positions: int | tuple[int, ...]) -> Gradient[Any, Any]:
        """The gradient of the same function in ``positions``, made once (its rules run inside
        generated loops)."""
        if positions not in self._partials:
            self._partials[positions] = Gradient(self.fun, positions, with_value=False)
        return self._partials[positions]

    def shaped(self, grad: Any, arg: Any) -> Any:
        """One adjoint as the gradient of ``arg`` is returned: its type, shape and dtype."""
        return _like(grad, arg)

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError:
            # Python refuses the call before the body runs, with its own TypeError
            self.fun(*args, **kwargs)
            raise
        bound.apply_defaults()
        return tuple(bound.arguments.values())

    def parameter_name(self, k: int) -> str:
        names: list[str] = list(self.signature.parameters)
        return names[k]

    def explain_failure(self, exc: Exception, args: tuple[Any, ...], loaded: Any) -> Exception:
        """A failure in generated code, explained.

        If the function itself fails the same way, the error is the user's and stands
        as it is. Otherwise a non-scalar output explains it, or else it happened while
        the gradient of some line ran: name that line.
        """
        if isinstance(exc, RecursionError):
            return ASTADError(
                f"the gradient of {self.__qualname__} recursed deeper than Python's limit "
                f"({sys.getrecursionlimit()}): its forward and backward passes each take a frame "
                "per call of a recursive function; raise sys.setrecursionlimit or use a loop"
            )
        try:
            out = self.fun(*args)
        # the user's own error, raised at the user's line with the user's traceback
        except Exception as own:
            return own if type(own) is type(exc) else exc
        if not _is_scalar(out):
            return self.non_scalar(out)
        where = loaded.user_line(exc)
        if isinstance(exc, LocatedError) and exc.filename is None and where is not None:
            return type(exc)(str(exc), *where)  # a refusal from a helper: give it the user's line
        if isinstance(exc, ASTADError) or where is None:
            return exc
        yours = [
            rule
            for rule in registry.registered()
            if not rule.origin.startswith("ast_ad.")
            and re.search(rf"\b{re.escape(getattr(rule.fn, '__name__', '') or '?')}\s*\(", where[2])
        ]
        if yours:
            rule = yours[0]
            return GradientFailedError(
                f"{self.__qualname__} runs, but your gradient rule for {rule.fn.__name__} "
                "(registered in "
                f"{rule.origin}) failed on this line with {type(exc).__name__}: {exc}; check what "
                "the rule "
                "returns: each rule gets the result's adjoint g and returns its argument's",
                *where,
            )
        return GradientFailedError(
            f"{self.__qualname__} runs, but the gradient of this line failed with "
            f"{type(exc).__name__}: {exc}; "
            "write the line with other operations, or register a rule for the function it calls "
            "(ast_ad.extend.defvjp), and please report it if the operation is one ast_ad lists as "
            "supported",
            *where,
        )

    def non_scalar(self, out: Any) -> NonScalarOutputError:
        line = transform.normalized(self.fun).result_line
        if np.ndim(out) == 0 and np.iscomplexobj(out):
            return NonScalarOutputError(
                f"grad needs a function that returns a real number, but {self.__qualname__} "
                "returned a complex one: a gradient is of a real loss (return np.real(z), "
                "np.abs(z) ** 2...); for the complex derivative of a holomorphic function, "
                "use jvp with the tangent 1.0",
                line.filename,
                line.lineno,
                line.text,
            )
        what = (
            f"a {type(out).__name__} of {len(out)} values"
            if isinstance(out, (tuple, list, dict))
            else f"an array of shape {np.shape(out)}"
            if np.ndim(out)
            else f"a {type(out).__name__}"
        )
        return NonScalarOutputError(
            f"grad needs a function that returns a scalar, but {self.__qualname__} returned "
            f"{what}; reduce it first (np.sum, np.mean) or take one entry",
            line.filename,
            line.lineno,
            line.text,
        )

    def __repr__(self) -> str:
        return f"<ast_ad gradient of {self.__qualname__} argnums={self.argnums}>"






















# a body that calls one is lowered to a call of a gradient
nested.provide(grad=grad, value_and_grad=value_and_grad)
