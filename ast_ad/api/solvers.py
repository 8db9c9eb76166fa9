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
``dF/dz`` is built whole for up to ``DENSE_UP_TO`` unknowns (a number, or a Jacobian by forward
mode) and ``np.linalg.solve`` solves it; beyond, it is never built: GMRES solves with its products,
one ``jvp`` (or ``vjp``, transposed) of the user's function each.

The call runs exactly as written, and the parameters reach it through ``args=``, the way scipy
passes them: the lowering moves ``args=`` to its position (``frontend.lower_calls._positional``), so
the rules below are ordinary rules of that argument. A function that reads a differentiated value
any other way (a closure, a lambda over it) is refused where it is passed, since its derivative
would be missed.

What the rules check before they use the theorem, each a clear error rather than a wrong number:
that the solver stopped at a root (the Newton step ``(dF/dz)^-1 F`` from the returned point is
within ``1e-6 (1 + |z|)``), that ``dF/dz`` there is not singular or ill-conditioned (condition
number below ``1e12``), and, for a minimum under bounds, that no bound is active (a derivative at an
active bound is the constrained one, which these rules do not compute). A Hessian through a root,
a minimum or a fit is forward mode over the gradient: the reverse rules have forward rules of their
own (``root_vjp_tangent``: the theorem applied again); ``quad``'s and ``solve_ivp``'s have none yet,
and ast_ad says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ast_ad.api.compose import jacfwd, pullback_code, vjp
from ast_ad.api.directional import jvp
from ast_ad.api.gradient import grad
from ast_ad.core.registry import def_linear, def_sequence, defjvp, defvjp, zero
from ast_ad.errors import UnsupportedDerivativeError
from ast_ad.runtime import NoTangent, zeros_like

try:
    import scipy.integrate as so_integrate
    import scipy.optimize as so
except ImportError:  # pragma: no cover - scipy is optional
    so = so_integrate = None

# the largest condition number of dF/dz at the solution the theorem is used with
WORST_CONDITION = 1e12
# how far from a root (as the Newton step, relative to 1 + |z|) the returned point may be
ROOT_TOLERANCE = 1e-6
# up to this many unknowns dF/dz is built (by forward mode) and solved densely; beyond, it is
# applied as products (one jvp or vjp of F each) and solved by GMRES to SOLVE_TOLERANCE (both may
# be set: ``ast_ad.api.solvers.DENSE_UP_TO = 500``)
DENSE_UP_TO = 100
SOLVE_TOLERANCE = 1e-12


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


def _param_tangents(u: Any, args: Any, params: tuple[Any, ...]) -> tuple[Any, ...]:
    """The tangents of ``args`` as ``jvp`` takes them: ``u``'s, held as ``args`` holds its
    parameters, ``None`` where a parameter carries no derivative."""
    moved = _params(u) if isinstance(args, tuple) else (u,)
    return tuple(t if _differentiable(p) and t is not None else None
                 for t, p in zip(moved, params, strict=True))


def _solved(a: Any, b: Any, transpose: bool, what: str) -> Any:
    """``a^-1 b`` (``a^-T b`` where ``transpose``) for ``dF/dz`` at the solution, ``a`` a number, a
    matrix or its ``Products``; a singular or ill-conditioned ``a`` is refused, naming ``what``
    solved."""
    if isinstance(a, Products):
        return a.solve(b, transpose, what)
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


class Products:
    """``dF/dz`` at the solution as products, never built: ``matvec`` one ``jvp`` of ``F`` in
    ``z``, ``rmatvec`` one ``vjp`` (for more unknowns than ``DENSE_UP_TO``); solved by GMRES."""

    def __init__(self, fun: Callable[..., Any], z: Any, params: tuple[Any, ...]):
        self.fun, self.z, self.params = fun, z, params
        self.pull = vjp(fun, z, *params)[1]

    def matvec(self, v: Any) -> Any:
        tangents = (np.reshape(v, np.shape(self.z)), *(None for _ in self.params))
        return np.ravel(jvp(self.fun, (self.z, *self.params), tangents)[1])

    def rmatvec(self, v: Any) -> Any:
        return np.ravel(self.pull(np.reshape(v, np.shape(self.z)))[0])

    def solve(self, b: Any, transpose: bool, what: str) -> Any:
        from scipy.sparse.linalg import LinearOperator, gmres

        n = int(np.size(self.z))
        operator = LinearOperator((n, n), matvec=self.rmatvec if transpose else self.matvec,
                                  dtype=float)
        right = np.ravel(np.asarray(b, dtype=float))
        if not np.any(right):
            return np.zeros(np.shape(b))
        solved, info = gmres(operator, right, rtol=SOLVE_TOLERANCE, atol=0.0, restart=min(n, 100),
                             maxiter=max(10, n))
        if info != 0:
            raise UnsupportedDerivativeError(
                f"the linear system of the function {what}'s derivative in its unknowns at the "
                f"solution did not converge ({n} unknowns, solved by GMRES with its products): it "
                "is singular or ill-conditioned there, and the solution's derivative does not "
                "exist (or would be noise)"
            )
        return np.reshape(solved, np.shape(b))


def _slope(fun: Callable[..., Any], z: Any, params: tuple[Any, ...]) -> Any:
    """``dF/dz`` at ``(z, *params)``: a number for a number ``z``, the Jacobian as a matrix
    (unknowns flattened) for at most ``DENSE_UP_TO`` unknowns, else its ``Products``."""
    if np.ndim(z) and np.size(z) > DENSE_UP_TO:
        return Products(fun, z, params)
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
    if isinstance(slope, Products):
        # (many unknowns: not a second solve, the residual over dF/dz's scale along ones, a
        # lower bound of the Newton step's size)
        ones = np.ones(np.size(z))
        scale = np.linalg.norm(slope.matvec(ones)) / np.linalg.norm(ones)
        step = np.abs(np.ravel(residual)) / (scale if scale > 0.0 else 1.0)
    else:
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
    tangents = _param_tangents(u, args, params)
    _, pushed = jvp(fun, (z, *params), (np.zeros_like(z, dtype=float)
                                       if np.ndim(z) else 0.0, *tangents))
    return -_solved(slope, pushed, False, what)


# ---- the result objects --------------------------------------------------------------------------
def _result_of(ans: Any, name: str) -> Any:
    """The solution a result object holds (``OptimizeResult.x``, ``RootResults.root``)."""
    return getattr(ans, name)


def _report(name: str) -> str:
    return (
        f"only the solution (.{name}) of a solver's result carries a derivative here: compute the "
        "other fields from it (the residual or the objective at the solution, by calling your "
        "function)"
    )


def _in_result(g: Any, name: str) -> Any:
    """The adjoint of the solution, read off the adjoint of the result object (``{name: g}``).
    An adjoint of another field (``sol.fun``, ``res.cost``: where differentiated code reads it)
    is refused, never dropped."""
    if g is None or isinstance(g, float):
        return None
    if not isinstance(g, dict):
        return None
    for key, part in g.items():
        if key != name and part is not None and np.any(np.asarray(part, dtype=object) != 0.0):
            raise UnsupportedDerivativeError(_report(name))
    return g.get(name)


def _result_tangent(t: Any, name: str, ans: Any = None) -> Any:
    """A result object's tangent: its solution's, under the same name; the other fields' are
    ``NoTangent`` (forward mode refuses them where they are used)."""
    fields = {key: NoTangent(_report(name)) for key in (ans or {}) if key != name}
    return so.OptimizeResult({**fields, name: t})


def result_root_vjp(g: Any, ans: Any, fun: Callable[..., Any], args: Any, name: str,
                    tol: Any = None) -> Any:
    """``root_vjp`` for a solver that returns a result object (``root``, ``root_scalar``)."""
    return root_vjp(_in_result(g, name), _result_of(ans, name), fun, args, tol)


def result_root_jvp(u: Any, ans: Any, fun: Callable[..., Any], args: Any, name: str,
                    tol: Any = None) -> Any:
    return _result_tangent(root_jvp(u, _result_of(ans, name), fun, args, tol), name, ans)


# ---- second derivatives: the reverse rule's own tangent ----------------------------------------
def _weighted(fun: Callable[..., Any], count: int) -> Callable[..., Any]:
    """``weighted(z, lam, *args) = sum(lam * fun(z, *args))`` for ``count`` parameters: the function
    whose gradient in ``z`` and ``args`` is ``(dF/dz)^T lam`` and ``(dF/dargs)^T lam``, and whose
    Hessian-vector products are the second derivatives a reverse rule's tangent needs."""
    params = "".join(f", a{k}" for k in range(count))
    source = (f"def weighted(z, lam{params}):\n"
              f"    return np.sum(lam * RESIDUAL(z{params}))\n")
    return _made_function("weighted", source, RESIDUAL=fun)


def root_vjp_tangent(moved: str, u: Any, g: Any, z: Any, fun: Callable[..., Any], args: Any,
                     tol: Any = None, what: str = "solved") -> Any:
    """The tangent of ``root_vjp(g, z, fun, args)`` along ``u``, the tangent of ``z`` (``moved``
    ``"z"``) or of ``args`` (``"args"``): with ``phi = lam . F``, ``lam = (dF/dz)^-T g`` and ``H``
    ``phi``'s Hessian-vector product along the move (forward over reverse of ``weighted``),
    ``lam_dot = -(dF/dz)^-T H_z`` and the tangent ``-(H_args + (dF/dargs)^T lam_dot)``. (In ``g``
    the rule is linear.) Forward mode over a gradient through a solver reads it: Hessians."""
    params = _params(args)
    slope = _checked_root(fun, z, params, what, tol)
    g = np.zeros_like(z, dtype=float) if g is None else g
    lam = _solved(slope, g, True, what)
    moving = [k for k, p in enumerate(params) if _differentiable(p)]
    weighted = _weighted(fun, len(params))
    if moved == "z":
        tangents: tuple[Any, ...] = (u, None, *(None for _ in params))
    else:
        shifted = _params(u) if isinstance(args, tuple) else (u,)
        tangents = (np.zeros_like(z, dtype=float) if np.ndim(z) else 0.0, None,
                    *(t if k in moving else None for k, t in enumerate(shifted)))
    second = _gradient_in(weighted, (0, *(k + 2 for k in moving)))
    _, pushed = jvp(second, (z, lam, *params), tangents)
    pushed = pushed if isinstance(pushed, tuple) else (pushed,)
    lam_dot = _solved(slope, -np.asarray(pushed[0], dtype=float), True, what)
    pulled = vjp(fun, z, *params)[1](lam_dot)[1:]
    parts: list[Any] = [zeros_like(p) for p in params]
    for j, k in enumerate(moving):
        parts[k] = -(pushed[1 + j] + (0.0 if pulled[k] is None else pulled[k]))
    return _shaped_like(tuple(parts), args)


def result_root_vjp_tangent(moved: str, u: Any, g: Any, ans: Any, fun: Callable[..., Any],
                            args: Any, name: str, tol: Any = None) -> Any:
    """``root_vjp_tangent`` for ``result_root_vjp`` (the tangent of ``ans``: its solution's)."""
    z = _result_of(ans, name)
    moving = _result_of(u, name) if moved == "z" else u
    return root_vjp_tangent(moved, moving, _in_result(g, name), z, fun, args, tol)


def result_minimum_vjp_tangent(moved: str, u: Any, g: Any, ans: Any, fun: Callable[..., Any],
                               args: Any, bounds: Any = None, tol: Any = None) -> Any:
    """The tangent of ``result_minimum_vjp``: a root's, of the objective's gradient."""
    _interior(ans.x, bounds)
    moving = u["x"] if moved == "z" else u
    return root_vjp_tangent(moved, moving, _in_result(g, "x"), ans.x, gradient_of(fun), args, tol,
                            "whose gradient is zero at a minimum")


def least_squares_vjp_tangent(moved: str, u: Any, g: Any, ans: Any, fun: Callable[..., Any],
                              args: Any, bounds: Any, loss: Any, xtol: Any) -> Any:
    """The tangent of ``least_squares_vjp``: a minimum's, of half the sum of squares."""
    held = _least_squares_checks(loss, bounds)
    _interior(ans.x, held)
    objective = _half_squares(fun, len(_params(args)))
    moving = u["x"] if moved == "z" else u
    return root_vjp_tangent(moved, moving, _in_result(g, "x"), ans.x, gradient_of(objective), args,
                            xtol, "whose gradient is zero at a minimum")


def curve_fit_vjp_tangent(moved: int, u: Any, which: int, g: Any, ans: Any,
                          f: Callable[..., Any], xdata: Any, ydata: Any, sigma: Any, bounds: Any,
                          full_output: Any, loss: Any = "linear") -> Any:
    """The tangent of ``curve_fit_vjp``'s adjoint of the data (``which``) along ``u``, the tangent
    of ``popt`` (``moved`` -1: of the result, a pair) or of ``xdata``, ``ydata`` or ``sigma``
    (``moved`` 0, 1, 2)."""
    popt_bar = g if not isinstance(g, (tuple, list)) else g[0]
    weighted = sigma is not None
    chi = _chi_squares(f, int(np.size(ans[0])), weighted)
    args = (xdata, ydata, sigma) if weighted else (xdata, ydata)
    held = _least_squares_checks(loss, (-np.inf, np.inf) if bounds is None else bounds)
    _interior(ans[0], held)
    if moved < 0:
        found = root_vjp_tangent("z", u[0], popt_bar, ans[0], gradient_of(chi), args)
    else:
        tangents: list[Any] = [None] * len(args)
        tangents[moved] = u
        found = root_vjp_tangent("args", tuple(tangents), popt_bar, ans[0], gradient_of(chi), args)
    return found[which]


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


_GRADIENTS: dict[Any, Any] = {}


def gradient_of(fun: Callable[..., Any]) -> Any:
    """``grad(fun, 0)``, made once per function: the function whose root a minimum is (one object,
    so that what is made of it, the weighted sums below, is made once too)."""
    if fun not in _GRADIENTS:
        _GRADIENTS[fun] = grad(fun, 0)
    return _GRADIENTS[fun]


def minimum_vjp(g: Any, x: Any, fun: Callable[..., Any], args: Any, bounds: Any = None,
                tol: Any = None) -> Any:
    """The adjoint of ``args`` in a minimum ``x`` of ``fun(x, *args)``: that of a root of its
    gradient in ``x`` (``dF/dz`` the Hessian)."""
    _interior(x, bounds)
    return root_vjp(g, x, gradient_of(fun), args, tol, "whose gradient is zero at a minimum")


def minimum_jvp(u: Any, x: Any, fun: Callable[..., Any], args: Any, bounds: Any = None,
                tol: Any = None) -> Any:
    _interior(x, bounds)
    return root_jvp(u, x, gradient_of(fun), args, tol, "whose gradient is zero at a minimum")


def result_minimum_vjp(g: Any, ans: Any, fun: Callable[..., Any], args: Any,
                       bounds: Any = None, tol: Any = None) -> Any:
    return minimum_vjp(_in_result(g, "x"), ans.x, fun, args, bounds, tol)


def result_minimum_jvp(u: Any, ans: Any, fun: Callable[..., Any], args: Any,
                       bounds: Any = None, tol: Any = None) -> Any:
    return _result_tangent(minimum_jvp(u, ans.x, fun, args, bounds, tol), "x", ans)


def scalar_tolerance(method: Any, tol: Any, options: Any) -> Any:
    """The tolerance on ``x`` that ``minimize_scalar`` stopped at: ``xatol`` of its bounded method
    (``1e-5`` unless given), else ``tol``."""
    if method == "bounded":
        return (options or {}).get("xatol", 1e-5)
    return tol


# ---- least squares: minima of half the sum of squares --------------------------------------------
_MADE: dict[tuple[Any, ...], Callable[..., Any]] = {}


def _made_function(name: str, source: str, **names: Any) -> Callable[..., Any]:
    """A function written here, in a file of its own (ast_ad reads a function's source from its
    file), its module's names ``names`` (the user's function among them): the objective a least
    squares call minimizes, which the minimum's rules differentiate. Made once per source and
    names."""
    key = (name, source, tuple(sorted((k, id(v)) for k, v in names.items())))
    if key not in _MADE:
        import importlib.util
        import os
        import tempfile

        folder = tempfile.mkdtemp(prefix="ast_ad_solvers_")
        module_name = f"ast_ad_solvers_{len(_MADE)}_{os.getpid()}"
        path = os.path.join(folder, module_name + ".py")
        with open(path, "w") as out:
            out.write("import numpy as np\n\n\n" + source)
        spec = importlib.util.spec_from_file_location(module_name, path)
        assert spec is not None and spec.loader is not None  # a .py file just written
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for k, v in names.items():
            setattr(module, k, v)
        _MADE[key] = getattr(module, name)
    return _MADE[key]


def _half_squares(fun: Callable[..., Any], count: int) -> Callable[..., Any]:
    """``half_squares(x, *args) = 0.5 * sum(fun(x, *args) ** 2)`` for ``count`` parameters."""
    params = "".join(f", a{k}" for k in range(count))
    source = (f"def half_squares(x{params}):\n"
              f"    r = RESIDUALS(x{params})\n"
              "    return 0.5 * np.sum(r * r)\n")
    return _made_function("half_squares", source, RESIDUALS=fun)


def _least_squares_checks(loss: Any, bounds: Any) -> Any:
    """The bounds as ``minimize``'s (``Bounds``); a robust loss refused."""
    if loss != "linear":
        raise UnsupportedDerivativeError(
            f"the derivative of least_squares with loss={loss!r}: ast_ad follows the plain sum of "
            "squares (loss='linear')"
        )
    if isinstance(bounds, so.Bounds):
        return bounds
    low, high = bounds
    return None if np.all(np.isneginf(low)) and np.all(np.isposinf(high)) else so.Bounds(low, high)


def least_squares_vjp(g: Any, ans: Any, fun: Callable[..., Any], args: Any, bounds: Any,
                      loss: Any, xtol: Any) -> Any:
    """The adjoint of ``args`` in ``least_squares``: that of a minimum of half the sum of squares,
    whose Hessian is the exact one (``J^T J`` and the residuals' curvature)."""
    held = _least_squares_checks(loss, bounds)
    objective = _half_squares(fun, len(_params(args)))
    return minimum_vjp(_in_result(g, "x"), ans.x, objective, args, held, xtol)


def least_squares_jvp(u: Any, ans: Any, fun: Callable[..., Any], args: Any, bounds: Any,
                      loss: Any, xtol: Any) -> Any:
    held = _least_squares_checks(loss, bounds)
    objective = _half_squares(fun, len(_params(args)))
    return _result_tangent(minimum_jvp(u, ans.x, objective, args, held, xtol), "x", ans)


def _chi_squares(model: Any, count: int, weighted: bool) -> Callable[..., Any]:
    """``chi(p, xdata, ydata[, sigma]) = 0.5 * sum(((model(xdata, *p) - ydata) / sigma) ** 2)``
    for ``count`` fitted parameters."""
    unpacked = ", ".join(f"p[{k}]" for k in range(count))
    scaled = " / sigma" if weighted else ""
    source = (f"def chi(p, xdata, ydata{', sigma' if weighted else ''}):\n"
              f"    r = (MODEL(xdata, {unpacked}) - ydata){scaled}\n"
              "    return 0.5 * np.sum(r * r)\n")
    return _made_function("chi", source, MODEL=model)


PCOV = (
    "the covariance curve_fit returns (pcov) has no derivative followed: differentiate popt "
    "alone (curve_fit(...)[0])"
)
_LAST_FIT: list[Any] = []


def curve_fit_vjp(which: int, g: Any, ans: Any, f: Callable[..., Any], xdata: Any, ydata: Any,
                  sigma: Any, bounds: Any, full_output: Any, loss: Any = "linear") -> Any:
    """The adjoint of ``xdata`` (``which`` 0), ``ydata`` (1) or ``sigma`` (2) in ``curve_fit``:
    ``popt`` is a minimum of half the weighted sum of squares, in those as its parameters. The
    three rules of a call share one computation."""
    if full_output or np.ndim(sigma) > 1:
        raise UnsupportedDerivativeError(
            "the derivative of curve_fit with full_output=True or a covariance matrix as sigma: "
            "ast_ad follows popt of a fit weighted by a vector (or no) sigma"
        )
    if _LAST_FIT and _LAST_FIT[0] is g and _LAST_FIT[1] is ans:
        return _LAST_FIT[2][which]
    popt_bar, pcov_bar = (g, None) if not isinstance(g, (tuple, list)) else g
    if pcov_bar is not None and np.any(np.asarray(pcov_bar) != 0.0):
        raise UnsupportedDerivativeError(PCOV)
    weighted = sigma is not None
    chi = _chi_squares(f, int(np.size(ans[0])), weighted)
    args = (xdata, ydata, sigma) if weighted else (xdata, ydata)
    held = _least_squares_checks(loss, (-np.inf, np.inf) if bounds is None else bounds)
    found = minimum_vjp(popt_bar, ans[0], chi, args, held)
    found = (*found, None) if not weighted else found
    _LAST_FIT[:] = [g, ans, found]
    return found[which]


def curve_fit_jvp(which: int, u: Any, ans: Any, f: Callable[..., Any], xdata: Any, ydata: Any,
                  sigma: Any, bounds: Any, full_output: Any, loss: Any = "linear") -> Any:
    if full_output or np.ndim(sigma) > 1:
        raise UnsupportedDerivativeError(
            "the derivative of curve_fit with full_output=True or a covariance matrix as sigma: "
            "ast_ad follows popt of a fit weighted by a vector (or no) sigma"
        )
    weighted = sigma is not None
    chi = _chi_squares(f, int(np.size(ans[0])), weighted)
    args = (xdata, ydata, sigma) if weighted else (xdata, ydata)
    tangents: list[Any] = [None] * len(args)
    tangents[which] = u
    held = _least_squares_checks(loss, (-np.inf, np.inf) if bounds is None else bounds)
    return (minimum_jvp(tuple(tangents), ans[0], chi, args, held), NoTangent(PCOV))


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
    return (sign * func(at, *_params(args)) * u, NoTangent(ESTIMATE))


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
    tangents = _param_tangents(u, args, params)

    def along(x: float) -> Any:
        return jvp(func, (x, *params), (None, *tangents))[1]

    value, _ = so_integrate.quad(along, a, b, epsabs=epsabs, epsrel=epsrel, points=points)
    return (value, NoTangent(ESTIMATE))


# ---- ODEs: the adjoint method (reverse) and forward sensitivities --------------------------------
def _ode_options(rtol: Any, atol: Any, max_step: Any, first_step: Any) -> dict[str, Any]:
    """The options of the user's ``solve_ivp`` call that the derivative's solves use too."""
    return {"rtol": rtol, "atol": atol, "max_step": max_step,
            **({"first_step": first_step} if first_step is not None else {})}


def _plain_ivp(ans: Any, events: Any, vectorized: Any, t_span: Any) -> None:
    if events is not None or vectorized:
        raise UnsupportedDerivativeError(
            "the derivative of solve_ivp with events= or vectorized=True: ast_ad follows the "
            "solution at fixed times (t_eval=), one right-hand side call at a time"
        )
    if not ans.success:
        raise UnsupportedDerivativeError(
            f"solve_ivp did not reach the end of its interval ({ans.message}): the derivative of "
            "a solution holds where the solver found one"
        )
    if t_span[1] < t_span[0]:
        raise UnsupportedDerivativeError(
            "the derivative of solve_ivp backwards in time (t_span decreasing) is not followed yet"
        )


def _ode_g(g: Any, name: str, ans: Any) -> Any:
    """The adjoint of the field ``name`` of the result (zeros where nothing flowed into it)."""
    part = g.get(name) if isinstance(g, dict) else None
    return np.zeros_like(np.asarray(ans[name], dtype=float)) if part is None else part


_LAST_ADJOINT: list[Any] = []
CHOSEN_TIMES = "the times solve_ivp chose (sol.t without t_eval=) have no derivative: pass t_eval="


# how near the state solved backwards beside the adjoint must come back to the state the forward
# solve returned where a segment began, in units of the user's tolerance ``atol + rtol |y|``
BACKSOLVE_AGREEMENT = 10.0
# where it is not, the segment is solved forward again in pieces of about this many steps, so
# that the dense output kept at once is that of this many steps (RK45 makes six calls a step)
RESOLVE_STEPS = 64


def _widened(options: dict[str, Any], n: int, state: bool, extra: int) -> dict[str, Any]:
    """``options`` for a backward solve of ``extra`` adjoints, after the ``n`` components of the
    state where ``state``: a per-component ``atol`` keeps its values for the state, its smallest
    for the adjoints."""
    atol = options["atol"]
    if np.ndim(atol) == 0:
        return options
    atol = np.ravel(np.asarray(atol, dtype=float))
    if atol.size != n:
        return options  # (scipy says what is wrong with it)
    return {**options, "atol": np.concatenate([atol if state else atol[:0],
                                               np.full(extra, np.min(atol))])}


def _adjoint_pieces(fun: Callable[..., Any], t: float, y: Any, params: tuple[Any, ...],
                    moving: list[int]) -> Callable[[float, Any, Any], Any]:
    """``pieces(t, lam, y)``: ``[f, lam^T df/dy, lam^T df/dargs...]`` at ``(t, y)`` (the right-hand
    sides of the state and, but for their sign, of its adjoints), one flat array, from one forward
    and one backward pass of ``fun``'s generated code (``pullback_code``), which give ``f`` on the
    way. Every call passes a float time, an array of the state's shape for ``y`` and for ``lam``,
    and the parameters ``params`` themselves, the facts ``pullback_code`` relies on. Where ``fun``
    returns something other than a flat float array of the state's size (a list, say), the same
    from the gradient of ``sum(lam * f)``, whose gradient in ``lam`` is ``f``."""
    n = np.size(y)
    shapes = [np.shape(params[k]) for k in moving]
    forward, backward = pullback_code(fun, (t, y, *params), (1, *(k + 2 for k in moving)))
    out = forward(t, y, *params)[0]

    def flat(bars: Any, shapes: list[Any]) -> list[Any]:
        return [b.ravel() if type(b) is np.ndarray and b.shape == s
                else np.broadcast_to(np.asarray(b, dtype=float), s).ravel()
                for b, s in zip(bars, shapes, strict=True)]

    if type(out) is np.ndarray and out.shape == (n,) and out.dtype.kind == "f":
        along = [(n,), *shapes]

        def pieces(t: float, lam: Any, y: Any) -> Any:
            out, saved = forward(float(t), y, *params)
            bars = backward(saved, lam)  # (read, not written: as ``vjp``'s pullback reads it)
            return np.concatenate([out, *flat(bars, along)])

        return pieces
    weighted = _weighted_rhs(fun, len(params))
    lam = np.zeros(n)
    forward, backward = pullback_code(weighted, (t, lam, y, *params),
                                      (1, 2, *(k + 3 for k in moving)))
    every = [(n,), (n,), *shapes]

    def summed(t: float, lam: Any, y: Any) -> Any:
        saved = forward(float(t), lam, y, *params)[1]
        return np.concatenate(flat(backward(saved, 1.0), every))

    return summed


class _Abandoned(Exception):
    """A segment solved backwards beside its adjoint that costs more than solving it again."""


def _solved_ivp(sol: Any, what: str) -> Any:
    """``sol``, a solve the adjoint method made, where it reached the end of its interval; else a
    clear error (its ``y`` would hold no state at the end)."""
    if not sol.success:
        raise UnsupportedDerivativeError(
            f"{what} for the derivative of solve_ivp did not reach the end of its interval "
            f"({sol.message}): loosen rtol/atol or give max_step, as the solve itself may need"
        )
    return sol


def _pieces(fun: Callable[..., Any], start: float, end: float, state: Any, method: Any,
            args: Any, options: dict[str, Any], calls: float) -> tuple[Any, list[Any]]:
    """``(cuts, starts)``: the segment ``[start, end]`` cut into pieces of about
    ``RESOLVE_STEPS`` steps of the solver (``calls`` its guessed count of calls; RK45 makes six a
    step), and the state where each piece begins, from one solve over the segment, made again with
    more pieces where that solve's own count of calls says the guess was short by half."""
    count = max(1, math.ceil(calls / 6 / RESOLVE_STEPS))
    while True:
        cuts = np.linspace(start, end, count + 1)
        first = _solved_ivp(so_integrate.solve_ivp(fun, (start, end), state, method=method,
                                                   t_eval=cuts[:-1], args=args, **options),
                            "the state, solved again over a segment")
        needed = math.ceil(first.nfev / 6 / RESOLVE_STEPS)
        if needed <= 2 * count:
            return cuts, list(first.y.T)
        count = needed


def _ivp_adjoints(g: Any, ans: Any, fun: Callable[..., Any], t_span: Any, y0: Any, method: Any,
                  t_eval: Any, args: Any, options: dict[str, Any]) -> tuple[Any, Any, Any]:
    """``(y0_bar, args_bar, t_eval_bar)`` by the adjoint method: ``lam`` (the adjoint of the
    state) solved backwards from the end, ``dlam/dt = -(df/dy)^T lam``, taking the adjoint of the
    solution at each time it was returned as it passes, and ``mu``, ``dmu/dt = -(df/dargs)^T
    lam``. The products with ``df/dy`` and ``df/dargs`` are ast_ad's gradient of ``lam . f``, whose
    gradient in ``lam`` is ``f`` itself: one pass gives the adjoint system's right-hand side and
    the state's.

    ``y(t)`` on the way: each segment between two times the solve returned (checkpoints at
    ``t_eval``) is first solved backwards with the adjoints, ``y`` beside them from the state
    returned at the segment's end: no second forward solve, and no memory for the steps. That is
    kept where ``y`` comes back to the state returned at the segment's start within
    ``BACKSOLVE_AGREEMENT`` times the user's tolerance (``atol + rtol |y|``); where it does not (a
    system that forgets its state forwards grows errors backwards), that segment and those before
    it are solved forward again from their checkpoints, in pieces of about ``RESOLVE_STEPS``
    steps, each with dense output, and the adjoints backwards along it: memory for one piece's
    steps and one state per piece. The tolerances of the backward solves are the user's
    ``rtol`` and ``atol`` (a per-component ``atol``: its smallest for the adjoints). The three
    rules of a call share one computation (kept for the last call's ``g`` and ``ans``)."""
    if _LAST_ADJOINT and _LAST_ADJOINT[0] is g and _LAST_ADJOINT[1] is ans:
        return _LAST_ADJOINT[2]  # type: ignore[no-any-return]
    params = _params(args) if args is not None else ()
    moving = [k for k, p in enumerate(params) if _differentiable(p)]
    sizes = [int(np.size(params[k])) for k in moving]
    g_y = np.asarray(_ode_g(g, "y", ans), dtype=float)
    g_t = np.asarray(_ode_g(g, "t", ans), dtype=float)
    if t_eval is None and np.any(g_t != 0.0):
        raise UnsupportedDerivativeError(CHOSEN_TIMES)
    times = np.asarray(ans.t, dtype=float)
    n = np.size(y0)
    marks = [float(t_span[0]), *(float(t) for t in times)]
    states = [np.ravel(np.asarray(y0, dtype=float)), *(ans.y[:, k] for k in range(len(times)))]
    rtol, atol = options["rtol"], options["atol"]
    backsolve = _widened(options, n, True, n + sum(sizes))
    resolve = _widened(options, n, False, n + sum(sizes))
    pieces = _adjoint_pieces(fun, float(times[-1]), states[-1].copy(), params, moving)

    # (a segment solved backwards is abandoned once it has made as many calls as the whole
    # forward solve: a system whose state grows backwards can take ever smaller steps)
    calls = [0]

    def together(t: float, state: Any) -> Any:
        calls[0] += 1
        if calls[0] > ans.nfev + 50:
            raise _Abandoned
        slopes = pieces(t, state[n:2 * n], state[:n])
        slopes[n:] *= -1.0
        return slopes

    segment: list[Any] = [None]

    def along(t: float, state: Any) -> Any:
        slopes = pieces(t, state[:n], segment[0](t))[n:]
        slopes *= -1.0
        return slopes

    adjoint = np.zeros(n + sum(sizes))
    t_bar = np.zeros_like(times)
    agreeing = True
    # (after the last returned time nothing is observed: the adjoint is zero there)
    for k in range(len(times) - 1, -1, -1):
        slope = np.asarray(fun(times[k], ans.y[:, k], *params), dtype=float)
        t_bar[k] = g_t[k] + np.sum(g_y[:, k] * slope)
        adjoint = adjoint + np.concatenate([g_y[:, k], np.zeros(sum(sizes))])
        start, end = marks[k], float(times[k])  # the segment before this time
        if end <= start:
            continue
        if agreeing:
            # (``t_eval``: only the end is kept, not each step's state)
            calls[0] = 0
            try:
                back = so_integrate.solve_ivp(together, (end, start),
                                              np.concatenate([states[k + 1], adjoint]),
                                              method=method, t_eval=(start,), **backsolve)
            except _Abandoned:
                back = None
            came = None if back is None or not back.success else back.y[:n, -1]
            if came is not None and np.all(np.abs(came - states[k]) <= BACKSOLVE_AGREEMENT
                                           * (atol + rtol * np.abs(states[k]))):
                adjoint = back.y[n:, -1]
                continue
            agreeing = False
        # in pieces of about ``RESOLVE_STEPS`` steps, each from a state a first solve over the
        # segment returned; their number guessed from the whole solve's count of calls, and
        # made again from this solve's own count where the guess was short by half
        cuts, starts = _pieces(fun, start, end, states[k], method, args, options,
                               ans.nfev * (end - start) / (float(t_span[1]) - float(t_span[0])))
        for j in range(len(cuts) - 2, -1, -1):
            segment[0] = None  # (one piece's dense output held at a time)
            segment[0] = so_integrate.solve_ivp(fun, (cuts[j], cuts[j + 1]), starts[j],
                                                method=method, dense_output=True, args=args,
                                                **options).sol
            adjoint = _solved_ivp(so_integrate.solve_ivp(along, (cuts[j + 1], cuts[j]), adjoint,
                                                         method=method, t_eval=(cuts[j],),
                                                         **resolve),
                                  "the adjoint system, solved backwards").y[:, -1]
    y0_bar = np.reshape(adjoint[:n], np.shape(y0))
    parts: list[Any] = [zeros_like(p) for p in params]
    start_at = n
    for k, size in zip(moving, sizes, strict=True):
        piece = adjoint[start_at:start_at + size]
        parts[k] = float(piece[0]) if np.ndim(params[k]) == 0 else np.reshape(
            piece, np.shape(params[k]))
        start_at += size
    found = (y0_bar, _shaped_like(tuple(parts), args) if args is not None else None, t_bar)
    _LAST_ADJOINT[:] = [g, ans, found]
    return found


def _gradient_in(fun: Callable[..., Any], argnums: tuple[int, ...]) -> Any:
    """``grad(fun, argnums)``, made once."""
    key = (fun, argnums)
    if key not in _GRADIENTS:
        _GRADIENTS[key] = grad(fun, argnums)
    return _GRADIENTS[key]


def _weighted_rhs(fun: Callable[..., Any], count: int) -> Callable[..., Any]:
    """``weighted(t, lam, y, *args) = sum(lam * fun(t, y, *args))``: its gradient in ``lam`` is
    ``fun`` itself, in ``y`` and ``args`` the adjoint system's right-hand side."""
    params = "".join(f", a{k}" for k in range(count))
    source = (f"def weighted(t, lam, y{params}):\n"
              f"    return np.sum(lam * RHS(t, y{params}))\n")
    return _made_function("weighted", source, RHS=fun)


def ivp_vjp(which: int, g: Any, ans: Any, fun: Callable[..., Any], t_span: Any, y0: Any,
            method: Any, t_eval: Any, events: Any, vectorized: Any, args: Any, rtol: Any,
            atol: Any, max_step: Any, first_step: Any) -> Any:
    """The adjoint of ``y0`` (``which`` 0), ``args`` (1) or ``t_eval`` (2) in ``solve_ivp``."""
    _plain_ivp(ans, events, vectorized, t_span)
    options = _ode_options(rtol, atol, max_step, first_step)
    return _ivp_adjoints(g, ans, fun, t_span, y0, method, t_eval, args, options)[which]


def ivp_jvp(which: int, u: Any, ans: Any, fun: Callable[..., Any], t_span: Any, y0: Any,
            method: Any, t_eval: Any, events: Any, vectorized: Any, args: Any, rtol: Any,
            atol: Any, max_step: Any, first_step: Any) -> Any:
    """The tangent of the result along ``u``, the tangent of ``y0`` (``which`` 0) or ``args`` (1):
    forward sensitivities, ``ds/dt = df/dy s + df/dargs args_dot`` solved beside ``y`` (ast_ad's
    ``jvp`` of ``fun``); of ``t_eval`` (2): the right-hand side at each time, times its tangent."""
    _plain_ivp(ans, events, vectorized, t_span)
    options = _ode_options(rtol, atol, max_step, first_step)
    times = np.asarray(ans.t, dtype=float)
    params = _params(args) if args is not None else ()
    if which == 2:
        slopes = np.stack([np.asarray(fun(t, ans.y[:, k], *params), dtype=float)
                           for k, t in enumerate(times)], axis=1)
        return so.OptimizeResult({"y": slopes * np.asarray(u, dtype=float), "t": u})
    n = np.size(y0)
    if which == 0:
        start, tangents = np.ravel(np.asarray(u, dtype=float)), tuple(None for _ in params)
    else:
        start, tangents = np.zeros(n), _param_tangents(u, args, params)

    def together(t: float, state: Any) -> Any:
        y, s = state[:n], state[n:]
        value, pushed = jvp(fun, (t, y, *params), (None, s, *tangents))
        return np.concatenate([np.ravel(value), np.ravel(pushed)])

    both = _solved_ivp(so_integrate.solve_ivp(together, t_span,
                                              np.concatenate([np.ravel(y0), start]),
                                              method=method, t_eval=times,
                                              **_widened(options, n, True, n)),
                       "the state and its tangent, solved together,")
    chosen = NoTangent(CHOSEN_TIMES) if t_eval is None else np.zeros_like(times)
    return so.OptimizeResult({"y": both.y[n:], "t": chosen})


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
    defvjp(so.minimize_scalar, None, zero, zero,
           lambda g, ans, fun, bracket=None, bounds=None, args=(), method=None, tol=None,
           options=None: result_minimum_vjp(g, ans, fun, args, bounds,
                                            scalar_tolerance(method, tol, options)))
    defjvp(so.minimize_scalar, None, zero, zero,
           lambda u, ans, fun, bracket=None, bounds=None, args=(), method=None, tol=None,
           options=None: result_minimum_jvp(u, ans, fun, args, bounds,
                                            scalar_tolerance(method, tol, options)))
    defvjp(so.minimize, None, zero,
           lambda g, ans, fun, x0, args=(), method=None, jac=None, hess=None, hessp=None,
           bounds=None, constraints=(), tol=None, callback=None, options=None:
           result_minimum_vjp(g, ans, fun, args, bounds, tol))
    defjvp(so.minimize, None, zero,
           lambda u, ans, fun, x0, args=(), method=None, jac=None, hess=None, hessp=None,
           bounds=None, constraints=(), tol=None, callback=None, options=None:
           result_minimum_jvp(u, ans, fun, args, bounds, tol))
    # a result object: its adjoint a dict of its fields' (``field_vjp``), added field by field
    def_sequence(so.root, so.root_scalar, so.minimize, so.minimize_scalar)
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
    # ``solve_ivp(fun, t_span, y0, ..., t_eval, ..., args)``: the solution's derivative in its
    # initial state, its parameters and the times it is returned at
    defvjp(
        so_integrate.solve_ivp, None, None,
        lambda g, ans, fun, t_span, y0, method="RK45", t_eval=None, dense_output=False,
        events=None, vectorized=False, args=None, rtol=1e-3, atol=1e-6, max_step=np.inf,
        first_step=None: ivp_vjp(0, g, ans, fun, t_span, y0, method, t_eval, events, vectorized,
                                 args, rtol, atol, max_step, first_step),
        zero,
        lambda g, ans, fun, t_span, y0, method="RK45", t_eval=None, dense_output=False,
        events=None, vectorized=False, args=None, rtol=1e-3, atol=1e-6, max_step=np.inf,
        first_step=None: ivp_vjp(2, g, ans, fun, t_span, y0, method, t_eval, events, vectorized,
                                 args, rtol, atol, max_step, first_step),
        zero, zero, zero,
        lambda g, ans, fun, t_span, y0, method="RK45", t_eval=None, dense_output=False,
        events=None, vectorized=False, args=None, rtol=1e-3, atol=1e-6, max_step=np.inf,
        first_step=None: ivp_vjp(1, g, ans, fun, t_span, y0, method, t_eval, events, vectorized,
                                 args, rtol, atol, max_step, first_step),
    )
    defjvp(
        so_integrate.solve_ivp, None, None,
        lambda u, ans, fun, t_span, y0, method="RK45", t_eval=None, dense_output=False,
        events=None, vectorized=False, args=None, rtol=1e-3, atol=1e-6, max_step=np.inf,
        first_step=None: ivp_jvp(0, u, ans, fun, t_span, y0, method, t_eval, events, vectorized,
                                 args, rtol, atol, max_step, first_step),
        zero,
        lambda u, ans, fun, t_span, y0, method="RK45", t_eval=None, dense_output=False,
        events=None, vectorized=False, args=None, rtol=1e-3, atol=1e-6, max_step=np.inf,
        first_step=None: ivp_jvp(2, u, ans, fun, t_span, y0, method, t_eval, events, vectorized,
                                 args, rtol, atol, max_step, first_step),
        zero, zero, zero,
        lambda u, ans, fun, t_span, y0, method="RK45", t_eval=None, dense_output=False,
        events=None, vectorized=False, args=None, rtol=1e-3, atol=1e-6, max_step=np.inf,
        first_step=None: ivp_jvp(1, u, ans, fun, t_span, y0, method, t_eval, events, vectorized,
                                 args, rtol, atol, max_step, first_step),
    )
    def_sequence(so_integrate.solve_ivp)  # a result object (``sol.y``, ``sol.t``)
    # least squares: the solution ``res.x`` of half the sum of squares, by its exact Hessian
    defvjp(
        so.least_squares, None, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero,
        zero, zero, zero, zero, zero,
        lambda g, ans, fun, x0, jac="2-point", bounds=(-np.inf, np.inf), method="trf",
        ftol=1e-08, xtol=1e-08, gtol=1e-08, x_scale=None, loss="linear", f_scale=1.0,
        diff_step=None, tr_solver=None, tr_options=None, jac_sparsity=None, max_nfev=None,
        verbose=0, args=(), kwargs=None, callback=None, workers=None:
        least_squares_vjp(g, ans, fun, args, bounds, loss, xtol),
    )
    defjvp(
        so.least_squares, None, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero,
        zero, zero, zero, zero, zero,
        lambda u, ans, fun, x0, jac="2-point", bounds=(-np.inf, np.inf), method="trf",
        ftol=1e-08, xtol=1e-08, gtol=1e-08, x_scale=None, loss="linear", f_scale=1.0,
        diff_step=None, tr_solver=None, tr_options=None, jac_sparsity=None, max_nfev=None,
        verbose=0, args=(), kwargs=None, callback=None, workers=None:
        least_squares_jvp(u, ans, fun, args, bounds, loss, xtol),
    )
    # curve_fit: ``popt`` a minimum of the weighted squares, in the data and the weights
    defvjp(
        so.curve_fit, None,
        lambda g, ans, f, xdata, ydata, p0=None, sigma=None, absolute_sigma=False,
        check_finite=None, bounds=None, method=None, jac=None, full_output=False,
        nan_policy=None, ftol=None, xtol=None, gtol=None, maxfev=None, max_nfev=None,
        loss="linear", x_scale=None, diff_step=None:
        curve_fit_vjp(0, g, ans, f, xdata, ydata, sigma, bounds, full_output, loss),
        lambda g, ans, f, xdata, ydata, p0=None, sigma=None, absolute_sigma=False,
        check_finite=None, bounds=None, method=None, jac=None, full_output=False,
        nan_policy=None, ftol=None, xtol=None, gtol=None, maxfev=None, max_nfev=None,
        loss="linear", x_scale=None, diff_step=None:
        curve_fit_vjp(1, g, ans, f, xdata, ydata, sigma, bounds, full_output, loss),
        zero,
        lambda g, ans, f, xdata, ydata, p0=None, sigma=None, absolute_sigma=False,
        check_finite=None, bounds=None, method=None, jac=None, full_output=False,
        nan_policy=None, ftol=None, xtol=None, gtol=None, maxfev=None, max_nfev=None,
        loss="linear", x_scale=None, diff_step=None:
        curve_fit_vjp(2, g, ans, f, xdata, ydata, sigma, bounds, full_output, loss),
    )
    defjvp(
        so.curve_fit, None,
        lambda u, ans, f, xdata, ydata, p0=None, sigma=None, absolute_sigma=False,
        check_finite=None, bounds=None, method=None, jac=None, full_output=False,
        nan_policy=None, ftol=None, xtol=None, gtol=None, maxfev=None, max_nfev=None,
        loss="linear", x_scale=None, diff_step=None:
        curve_fit_jvp(0, u, ans, f, xdata, ydata, sigma, bounds, full_output, loss),
        lambda u, ans, f, xdata, ydata, p0=None, sigma=None, absolute_sigma=False,
        check_finite=None, bounds=None, method=None, jac=None, full_output=False,
        nan_policy=None, ftol=None, xtol=None, gtol=None, maxfev=None, max_nfev=None,
        loss="linear", x_scale=None, diff_step=None:
        curve_fit_jvp(1, u, ans, f, xdata, ydata, sigma, bounds, full_output, loss),
        zero,
        lambda u, ans, f, xdata, ydata, p0=None, sigma=None, absolute_sigma=False,
        check_finite=None, bounds=None, method=None, jac=None, full_output=False,
        nan_policy=None, ftol=None, xtol=None, gtol=None, maxfev=None, max_nfev=None,
        loss="linear", x_scale=None, diff_step=None:
        curve_fit_jvp(2, u, ans, f, xdata, ydata, sigma, bounds, full_output, loss),
    )
    def_sequence(so.least_squares, so.curve_fit)
    # the reverse rules' own forward rules (linear in the adjoint; the rest by second
    # derivatives of the user's function): a Hessian through a solver, forward over reverse
    defjvp(root_vjp, None,
           lambda u, ans, g, z, fun, args, tol=None, what="solved":
           root_vjp_tangent("z", u, g, z, fun, args, tol, what),
           None,
           lambda u, ans, g, z, fun, args, tol=None, what="solved":
           root_vjp_tangent("args", u, g, z, fun, args, tol, what),
           zero, zero)
    def_linear(root_vjp, 0)
    defjvp(result_root_vjp, None,
           lambda u, ans, g, res, fun, args, name, tol=None:
           result_root_vjp_tangent("z", u, g, res, fun, args, name, tol),
           None,
           lambda u, ans, g, res, fun, args, name, tol=None:
           result_root_vjp_tangent("args", u, g, res, fun, args, name, tol),
           zero, zero)
    def_linear(result_root_vjp, 0)
    defjvp(result_minimum_vjp, None,
           lambda u, ans, g, res, fun, args, bounds=None, tol=None:
           result_minimum_vjp_tangent("z", u, g, res, fun, args, bounds, tol),
           None,
           lambda u, ans, g, res, fun, args, bounds=None, tol=None:
           result_minimum_vjp_tangent("args", u, g, res, fun, args, bounds, tol),
           zero, zero)
    def_linear(result_minimum_vjp, 0)
    defjvp(least_squares_vjp, None,
           lambda u, ans_, g, ans, fun, args, bounds, loss, xtol:
           least_squares_vjp_tangent("z", u, g, ans, fun, args, bounds, loss, xtol),
           None,
           lambda u, ans_, g, ans, fun, args, bounds, loss, xtol:
           least_squares_vjp_tangent("args", u, g, ans, fun, args, bounds, loss, xtol),
           zero, zero, zero)
    def_linear(least_squares_vjp, 0)
    defjvp(curve_fit_vjp, zero, None,
           lambda u, ans_, which, g, ans, f, xdata, ydata, sigma, bounds, full_output,
           loss="linear": curve_fit_vjp_tangent(-1, u, which, g, ans, f, xdata, ydata, sigma,
                                                bounds, full_output, loss),
           None,
           lambda u, ans_, which, g, ans, f, xdata, ydata, sigma, bounds, full_output,
           loss="linear": curve_fit_vjp_tangent(0, u, which, g, ans, f, xdata, ydata, sigma,
                                                bounds, full_output, loss),
           lambda u, ans_, which, g, ans, f, xdata, ydata, sigma, bounds, full_output,
           loss="linear": curve_fit_vjp_tangent(1, u, which, g, ans, f, xdata, ydata, sigma,
                                                bounds, full_output, loss),
           lambda u, ans_, which, g, ans, f, xdata, ydata, sigma, bounds, full_output,
           loss="linear": curve_fit_vjp_tangent(2, u, which, g, ans, f, xdata, ydata, sigma,
                                                bounds, full_output, loss),
           zero, zero, zero)
    def_linear(curve_fit_vjp, 1)
    # (each gives the adjoints of ``args``, a tuple: their tangents add element by element)
    def_sequence(root_vjp, result_root_vjp, result_minimum_vjp, least_squares_vjp)
