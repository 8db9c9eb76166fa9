"""Derivatives through scipy's solvers, as mathematics: the implicit function theorem at the
solution, not the solver's iterations.

A root ``z`` of ``F(z, *args) = 0`` found by ``scipy.optimize.brentq`` (``brenth``, ``bisect``,
``ridder``, ``newton``, ``root_scalar``, ``fsolve``, ``root``) moves with the parameters ``args`` as

    dz/dargs = -(dF/dz)^-1 dF/dargs,

so reverse mode solves ``(dF/dz)^T lam = z_bar`` and gives each parameter ``-(dF/dargs)^T lam``;
forward mode solves ``dF/dz z_dot = -dF/dargs args_dot``. A minimum ``x`` of ``f(x, *args)``
found by ``minimize`` (unconstrained, or inside its bounds) is a root of the gradient,
``grad_x f(x, *args) = 0``, whose ``dF/dz`` is the Hessian. The products come from ast_ad's own
``vjp`` and ``jvp`` of the user's function (which must be in the language ast_ad differentiates);
``dF/dz`` is built whole (a number, or a Jacobian by forward mode: these are the small dense
systems of a root or a minimum in a few unknowns), and ``np.linalg.solve`` solves it.

The call runs exactly as written, and the parameters reach it through ``args=``, the way scipy
passes them: the lowering moves ``args=`` to its position (``frontend.lower_calls._positional``), so
the rules below are ordinary rules of that argument. A function that reads a differentiated value
any other way (a closure, a lambda over it) is refused where it is passed, since its derivative
would be missed.

What the rules check before they use the theorem, each a clear error rather than a wrong number:
that the solver stopped at a root (the Newton step ``(dF/dz)^-1 F`` from the returned point is
within ``1e-6 (1 + |z|)``), that ``dF/dz`` there is not singular or ill-conditioned (condition
number below ``1e12``), and, for a minimum under bounds, that no bound is active (a derivative at an
active bound is the constrained one, which these rules do not compute). Higher derivatives through
a solver (a Hessian through ``root``) are not followed yet: the rules' own helpers have no rules,
and ast_ad says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ast_ad.api.compose import jacfwd, vjp
from ast_ad.api.directional import jvp
from ast_ad.api.gradient import grad
from ast_ad.core.registry import def_sequence, defjvp, defvjp, zero
from ast_ad.errors import UnsupportedDerivativeError
from ast_ad.runtime import zeros_like

try:
    import scipy.integrate as so_integrate
    import scipy.optimize as so
except ImportError:  # pragma: no cover - scipy is optional
    so = so_integrate = None

# the largest condition number of dF/dz at the solution the theorem is used with
WORST_CONDITION = 1e12
# how far from a root (as the Newton step, relative to 1 + |z|) the returned point may be
ROOT_TOLERANCE = 1e-6


def _params(args: Any) -> tuple[Any, ...]:
    """``args=`` as scipy reads it: a tuple, or one value standing for itself."""
    return args if isinstance(args, tuple) else (args,)


def _shaped_like(parts: tuple[Any, ...], args: Any) -> Any:
    """Adjoints or tangents of the parameters, held as ``args`` holds them."""
    return parts if isinstance(args, tuple) else parts[0]


def _differentiable(value: Any) -> bool:
    """Whether a parameter carries a derivative: a float or complex number or an array of them."""
    if isinstance(value, (bool, int, np.integer, str)):
        return False
    return np.asarray(value).dtype.kind in "fc"


def _solved(a: Any, b: Any, transpose: bool, what: str) -> Any:
    """``a^-1 b`` (``a^-T b`` where ``transpose``) for ``dF/dz`` at the solution, ``a`` a number or
    a matrix; a singular or ill-conditioned ``a`` is refused, naming ``what`` solved."""
    if np.ndim(a) == 0:
        if not np.isfinite(a) or a == 0.0:
            raise UnsupportedDerivativeError(
                f"the derivative of the function {what} in its unknown is {a} at the solution: "
                "the solution is not isolated there, and has no derivative"
            )
        return b / a
    matrix = np.asarray(a)
    condition = np.linalg.cond(matrix)
    if not np.isfinite(condition) or condition > WORST_CONDITION:
        raise UnsupportedDerivativeError(
            f"the Jacobian of the function {what} in its unknowns is singular or ill-conditioned "
            f"at the solution (condition number {condition:.3g}): the solution is not isolated, "
            "and its derivative does not exist (or would be noise)"
        )
    shaped = np.shape(b)
    solved = np.linalg.solve(matrix.T if transpose else matrix, np.reshape(b, -1))
    return np.reshape(solved, shaped)


def _slope(fun: Callable[..., Any], z: Any, params: tuple[Any, ...]) -> Any:
    """``dF/dz`` at ``(z, *params)``: a number for a number ``z``, else the Jacobian as a matrix
    (unknowns flattened)."""
    if np.ndim(z) == 0:
        tangents = (1.0, *(None for _ in params))
        return jvp(fun, (z, *params), tangents)[1]
    jacobian = jacfwd(fun, 0)(z, *params)
    return np.reshape(jacobian, (np.size(z), np.size(z)))


def _checked_root(fun: Callable[..., Any], z: Any, params: tuple[Any, ...], what: str,
                  tol: Any) -> Any:
    """``dF/dz`` at ``z``, after checking that ``z`` is a root to the solver's tolerance ``tol``
    (or ``ROOT_TOLERANCE``, the larger): the Newton step from it is that small, relative to
    ``1 + |z|``. The theorem holds at a root only; at a point within the tolerance the user asked
    for, it gives the derivative to that accuracy."""
    if isinstance(z, tuple):
        raise UnsupportedDerivativeError(
            "the solver was asked for its full output (full_output=True), a tuple of the solution "
            "and a report: differentiate a call without it, which returns the solution"
        )
    slope = _slope(fun, z, params)
    residual = fun(z, *params)
    step = _solved(slope, residual, False, what)
    allowed = max(ROOT_TOLERANCE, 10.0 * float(tol or 0.0)) * (1.0 + np.max(np.abs(z)))
    if not np.all(np.isfinite(step)) or np.max(np.abs(step)) > allowed:
        raise UnsupportedDerivativeError(
            f"the solver stopped where the function {what} is not zero (a Newton step from there "
            f"moves it by {np.max(np.abs(step)):.3g}, more than its tolerance allows): the "
            "derivative of a solution holds at a solution; check that the solver converged (a "
            "tighter tolerance, a better start)"
        )
    return slope


def root_vjp(g: Any, z: Any, fun: Callable[..., Any], args: Any, tol: Any = None,
             what: str = "solved") -> Any:
    """The adjoint of ``args`` in a root ``z`` of ``fun(z, *args) = 0``: ``-(dF/dargs)^T lam``, with
    ``(dF/dz)^T lam = g`` (the one linear solve reverse mode makes); ``tol``: the solver's own
    tolerance on ``z``."""
    params = _params(args)
    slope = _checked_root(fun, z, params, what, tol)
    g = np.zeros_like(z, dtype=float) if g is None else g
    lam = _solved(slope, g, True, what)
    _, pull = vjp(fun, z, *params)
    pulled = pull(lam)[1:]
    parts = tuple(
        zeros_like(p) if bar is None or not _differentiable(p) else -bar
        for bar, p in zip(pulled, params, strict=True)
    )
    return _shaped_like(parts, args)


def root_jvp(u: Any, z: Any, fun: Callable[..., Any], args: Any, tol: Any = None,
             what: str = "solved") -> Any:
    """The tangent of a root ``z`` of ``fun(z, *args) = 0`` along the tangent ``u`` of ``args``:
    ``-(dF/dz)^-1 (dF/dargs u)``."""
    params = _params(args)
    slope = _checked_root(fun, z, params, what, tol)
    moved = _params(u) if isinstance(args, tuple) else (u,)
    tangents = tuple(
        t if _differentiable(p) and t is not None else None
        for t, p in zip(moved, params, strict=True)
    )
    _, pushed = jvp(fun, (z, *params), (np.zeros_like(z, dtype=float)
                                       if np.ndim(z) else 0.0, *tangents))
    return -_solved(slope, pushed, False, what)


# ---- the result objects --------------------------------------------------------------------------
def _result_of(ans: Any, name: str) -> Any:
    """The solution a result object holds (``OptimizeResult.x``, ``RootResults.root``)."""
    return getattr(ans, name)


def _in_result(g: Any, name: str) -> Any:
    """The adjoint of the solution, read off the adjoint of the result object (``{name: g}``; the
    other fields carry none)."""
    if g is None or isinstance(g, float):
        return None
    return g.get(name) if isinstance(g, dict) else None


def _result_tangent(t: Any, name: str) -> Any:
    """A result object's tangent: its solution's, under the same name."""
    return so.OptimizeResult({name: t})


def result_root_vjp(g: Any, ans: Any, fun: Callable[..., Any], args: Any, name: str,
                    tol: Any = None) -> Any:
    """``root_vjp`` for a solver that returns a result object (``root``, ``root_scalar``)."""
    return root_vjp(_in_result(g, name), _result_of(ans, name), fun, args, tol)


def result_root_jvp(u: Any, ans: Any, fun: Callable[..., Any], args: Any, name: str,
                    tol: Any = None) -> Any:
    return _result_tangent(root_jvp(u, _result_of(ans, name), fun, args, tol), name)


# ---- minima: roots of the gradient ---------------------------------------------------------------
def _interior(x: Any, bounds: Any) -> None:
    """Refuse a minimum at an active bound (the unconstrained theorem does not hold there)."""
    if bounds is None:
        return
    if hasattr(bounds, "lb"):
        low, high = np.broadcast_to(bounds.lb, np.shape(x)), np.broadcast_to(bounds.ub, np.shape(x))
    else:
        pairs = [bounds] if np.ndim(x) == 0 else list(bounds)
        low = np.array([-np.inf if b[0] is None else b[0] for b in pairs], dtype=float)
        high = np.array([np.inf if b[1] is None else b[1] for b in pairs], dtype=float)
    flat = np.reshape(x, -1)
    margin = 1e-8 * (1.0 + np.abs(flat))
    low, high = np.reshape(low, -1), np.reshape(high, -1)
    if np.any(flat - low <= margin) or np.any(high - flat <= margin):
        raise UnsupportedDerivativeError(
            "the minimum is at one of its bounds: its derivative there is the constrained one "
            "(the bound holds it still in some directions), which ast_ad does not compute yet; "
            "widen the bounds, or minimize without them where the minimum is inside"
        )


def minimum_vjp(g: Any, x: Any, fun: Callable[..., Any], args: Any, bounds: Any = None,
                tol: Any = None) -> Any:
    """The adjoint of ``args`` in a minimum ``x`` of ``fun(x, *args)``: that of a root of its
    gradient in ``x`` (``dF/dz`` the Hessian)."""
    _interior(x, bounds)
    return root_vjp(g, x, grad(fun, 0), args, tol, "whose gradient is zero at a minimum")


def minimum_jvp(u: Any, x: Any, fun: Callable[..., Any], args: Any, bounds: Any = None,
                tol: Any = None) -> Any:
    _interior(x, bounds)
    return root_jvp(u, x, grad(fun, 0), args, tol, "whose gradient is zero at a minimum")


def result_minimum_vjp(g: Any, ans: Any, fun: Callable[..., Any], args: Any,
                       bounds: Any = None, tol: Any = None) -> Any:
    return minimum_vjp(_in_result(g, "x"), ans.x, fun, args, bounds, tol)


def result_minimum_jvp(u: Any, ans: Any, fun: Callable[..., Any], args: Any,
                       bounds: Any = None, tol: Any = None) -> Any:
    return _result_tangent(minimum_jvp(u, ans.x, fun, args, bounds, tol), "x")


# ---- quadrature: Leibniz's rule ------------------------------------------------------------------
def _value_adjoint(g: Any) -> Any:
    """The adjoint of ``quad``'s value, from that of its ``(value, abserr)`` pair; the error
    estimate has no derivative, and a gradient through it is refused."""
    if g is None:
        return 0.0
    if not isinstance(g, (tuple, list)):  # the value's alone
        return g
    value, error = g
    if error is not None and np.any(np.asarray(error) != 0.0):
        raise UnsupportedDerivativeError(ESTIMATE)
    return 0.0 if value is None else value


ESTIMATE = (
    "the error estimate scipy.integrate.quad returns has no derivative: differentiate its value "
    "alone (quad(...)[0])"
)


class NoTangent:
    """The tangent of ``quad``'s error estimate, which has none: forward mode carries this in its
    place, and any arithmetic with it (the estimate used in what is differentiated) raises, as
    reverse mode's adjoint of it does (``_value_adjoint``)."""

    def __repr__(self) -> str:
        return "NoTangent(quad's error estimate)"

    def refuse(self, *_: Any, **__: Any) -> Any:
        raise UnsupportedDerivativeError(ESTIMATE)

    def __add__(self, other: Any) -> Any:
        # the contributions of the call's arguments, added (a zero: where one has none)
        if isinstance(other, NoTangent) or other is None or (
            isinstance(other, float) and other == 0.0
        ):
            return self
        return self.refuse()

    __radd__ = __add__
    __sub__ = __rsub__ = __mul__ = __rmul__ = refuse
    __truediv__ = __rtruediv__ = __pow__ = __rpow__ = __neg__ = __pos__ = __abs__ = refuse
    __float__ = __array__ = __array_ufunc__ = __array_function__ = refuse


def _plain_quad(weight: Any, full_output: Any, complex_func: Any) -> None:
    if weight is not None or full_output or complex_func:
        raise UnsupportedDerivativeError(
            "the derivative of scipy.integrate.quad with weight=, full_output= or complex_func=: "
            "ast_ad follows a plain integral of a real function (write a weight into the "
            "integrand)"
        )


def quad_limit_vjp(g: Any, func: Callable[..., Any], at: Any, args: Any, sign: float,
                   weight: Any = None, full_output: Any = 0, complex_func: Any = False) -> Any:
    """The adjoint of a limit of ``quad``: the integrand there, times ``g`` (``sign`` -1 for the
    lower limit)."""
    _plain_quad(weight, full_output, complex_func)
    return sign * _value_adjoint(g) * func(at, *_params(args))


def quad_limit_jvp(u: Any, func: Callable[..., Any], at: Any, args: Any, sign: float,
                   weight: Any = None, full_output: Any = 0, complex_func: Any = False) -> Any:
    _plain_quad(weight, full_output, complex_func)
    return (sign * func(at, *_params(args)) * u, NoTangent())


def quad_args_vjp(g: Any, func: Callable[..., Any], a: Any, b: Any, args: Any,
                  epsabs: Any = 1.49e-08, epsrel: Any = 1.49e-08, points: Any = None,
                  weight: Any = None, full_output: Any = 0, complex_func: Any = False) -> Any:
    """The adjoint of ``args`` in ``quad(func, a, b, args)``: ``g`` times the integral of the
    integrand's gradient in them (one ``quad_vec`` of ast_ad's gradient of ``func``, flattened),
    to the tolerances of the call."""
    _plain_quad(weight, full_output, complex_func)
    params = _params(args)
    moving = [k for k, p in enumerate(params) if _differentiable(p)]
    scale = _value_adjoint(g)
    parts: list[Any] = [zeros_like(p) for p in params]
    if moving:
        gradient = grad(func, tuple(k + 1 for k in moving))

        def slopes(x: float) -> Any:
            found = gradient(x, *params)
            found = found if isinstance(found, tuple) else (found,)
            return np.concatenate([np.ravel(np.asarray(f, dtype=float)) for f in found])

        total, _ = so_integrate.quad_vec(slopes, a, b, epsabs=epsabs, epsrel=epsrel,
                                         points=points)
        start = 0
        for k in moving:
            size = int(np.size(params[k]))
            piece = total[start:start + size] * scale
            parts[k] = float(piece[0]) if np.ndim(params[k]) == 0 else np.reshape(
                piece, np.shape(params[k]))
            start += size
    return _shaped_like(tuple(parts), args)


def quad_args_jvp(u: Any, func: Callable[..., Any], a: Any, b: Any, args: Any,
                  epsabs: Any = 1.49e-08, epsrel: Any = 1.49e-08, points: Any = None,
                  weight: Any = None, full_output: Any = 0, complex_func: Any = False) -> Any:
    """The tangent of ``quad``'s value along ``u``, the tangent of ``args``: the integral of the
    integrand's tangent (one ``quad`` of ast_ad's ``jvp`` of ``func``)."""
    _plain_quad(weight, full_output, complex_func)
    params = _params(args)
    moved = _params(u) if isinstance(args, tuple) else (u,)
    tangents = tuple(t if _differentiable(p) and t is not None else None
                     for t, p in zip(moved, params, strict=True))

    def along(x: float) -> Any:
        return jvp(func, (x, *params), (None, *tangents))[1]

    value, _ = so_integrate.quad(along, a, b, epsabs=epsabs, epsrel=epsrel, points=points)
    return (value, NoTangent())


# ---- the rules: each solver's arguments, in its order; only ``args`` carries a derivative ------
# (the function itself is a constant; a start, a bracket, a tolerance change where the solver
# stops, not where the solution is)
if so is not None:
    for _bracketed in (so.brentq, so.brenth, so.bisect, so.ridder):
        defvjp(_bracketed, None, zero, zero,
               lambda g, ans, f, a, b, args=(), xtol=2e-12, rtol=8.9e-16, maxiter=100,
               full_output=False, disp=True: root_vjp(g, ans, f, args, xtol))
        defjvp(_bracketed, None, zero, zero,
               lambda u, ans, f, a, b, args=(), xtol=2e-12, rtol=8.9e-16, maxiter=100,
               full_output=False, disp=True: root_jvp(u, ans, f, args, xtol))
    defvjp(so.newton, None, zero, zero,
           lambda g, ans, func, x0, fprime=None, args=(), tol=1.48e-08, maxiter=50, fprime2=None,
           x1=None, rtol=0.0, full_output=False, disp=True: root_vjp(g, ans, func, args, tol))
    defjvp(so.newton, None, zero, zero,
           lambda u, ans, func, x0, fprime=None, args=(), tol=1.48e-08, maxiter=50, fprime2=None,
           x1=None, rtol=0.0, full_output=False, disp=True: root_jvp(u, ans, func, args, tol))
    defvjp(so.fsolve, None, zero,
           lambda g, ans, func, x0, args=(), fprime=None, full_output=0, col_deriv=0,
           xtol=1.49012e-08, maxfev=0, band=None, epsfcn=None, factor=100, diag=None:
           root_vjp(g, ans, func, args, xtol))
    defjvp(so.fsolve, None, zero,
           lambda u, ans, func, x0, args=(), fprime=None, full_output=0, col_deriv=0,
           xtol=1.49012e-08, maxfev=0, band=None, epsfcn=None, factor=100, diag=None:
           root_jvp(u, ans, func, args, xtol))
    defvjp(so.root, None, zero,
           lambda g, ans, fun, x0, args=(), method="hybr", jac=None, tol=None, callback=None,
           options=None: result_root_vjp(g, ans, fun, args, "x", tol))
    defjvp(so.root, None, zero,
           lambda u, ans, fun, x0, args=(), method="hybr", jac=None, tol=None, callback=None,
           options=None: result_root_jvp(u, ans, fun, args, "x", tol))
    defvjp(so.root_scalar, None,
           lambda g, ans, f, args=(), method=None, bracket=None, fprime=None, fprime2=None,
           x0=None, x1=None, xtol=None, rtol=None, maxiter=None, options=None:
           result_root_vjp(g, ans, f, args, "root", xtol))
    defjvp(so.root_scalar, None,
           lambda u, ans, f, args=(), method=None, bracket=None, fprime=None, fprime2=None,
           x0=None, x1=None, xtol=None, rtol=None, maxiter=None, options=None:
           result_root_jvp(u, ans, f, args, "root", xtol))
    defvjp(so.minimize, None, zero,
           lambda g, ans, fun, x0, args=(), method=None, jac=None, hess=None, hessp=None,
           bounds=None, constraints=(), tol=None, callback=None, options=None:
           result_minimum_vjp(g, ans, fun, args, bounds, tol))
    defjvp(so.minimize, None, zero,
           lambda u, ans, fun, x0, args=(), method=None, jac=None, hess=None, hessp=None,
           bounds=None, constraints=(), tol=None, callback=None, options=None:
           result_minimum_jvp(u, ans, fun, args, bounds, tol))
    # a result object: its adjoint a dict of its fields' (``field_vjp``), added field by field
    def_sequence(so.root, so.root_scalar, so.minimize)
    # ``quad(func, a, b, args)``: a pair (value, abserr); the limits by the integrand's values
    # there, the parameters by the integral of its derivative
    defvjp(
        so_integrate.quad, None,
        lambda g, ans, func, a, b, args=(), full_output=0, epsabs=1.49e-08, epsrel=1.49e-08,
        limit=50, points=None, weight=None, wvar=None, wopts=None, maxp1=50, limlst=50,
        complex_func=False: quad_limit_vjp(g, func, a, args, -1.0, weight, full_output,
                                           complex_func),
        lambda g, ans, func, a, b, args=(), full_output=0, epsabs=1.49e-08, epsrel=1.49e-08,
        limit=50, points=None, weight=None, wvar=None, wopts=None, maxp1=50, limlst=50,
        complex_func=False: quad_limit_vjp(g, func, b, args, 1.0, weight, full_output,
                                           complex_func),
        lambda g, ans, func, a, b, args=(), full_output=0, epsabs=1.49e-08, epsrel=1.49e-08,
        limit=50, points=None, weight=None, wvar=None, wopts=None, maxp1=50, limlst=50,
        complex_func=False: quad_args_vjp(g, func, a, b, args, epsabs, epsrel, points, weight,
                                          full_output, complex_func),
    )
    defjvp(
        so_integrate.quad, None,
        lambda u, ans, func, a, b, args=(), full_output=0, epsabs=1.49e-08, epsrel=1.49e-08,
        limit=50, points=None, weight=None, wvar=None, wopts=None, maxp1=50, limlst=50,
        complex_func=False: quad_limit_jvp(u, func, a, args, -1.0, weight, full_output,
                                           complex_func),
        lambda u, ans, func, a, b, args=(), full_output=0, epsabs=1.49e-08, epsrel=1.49e-08,
        limit=50, points=None, weight=None, wvar=None, wopts=None, maxp1=50, limlst=50,
        complex_func=False: quad_limit_jvp(u, func, b, args, 1.0, weight, full_output,
                                           complex_func),
        lambda u, ans, func, a, b, args=(), full_output=0, epsabs=1.49e-08, epsrel=1.49e-08,
        limit=50, points=None, weight=None, wvar=None, wopts=None, maxp1=50, limlst=50,
        complex_func=False: quad_args_jvp(u, func, a, b, args, epsabs, epsrel, points, weight,
                                          full_output, complex_func),
    )
    def_sequence(so_integrate.quad)  # (value, abserr)
