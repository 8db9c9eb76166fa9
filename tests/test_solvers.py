"""Derivatives through scipy's solvers (``ast_ad.api.solvers``): the call runs as written, its
derivative comes from the implicit function theorem at the solution. Oracles: the closed form where
there is one, central differences of the whole function, forward mode against reverse mode (the
dot-product identity), and the tracer; what the theorem does not cover is refused at the user's
line."""

from __future__ import annotations

import types
import warnings
from typing import Any

import numpy as np
import pytest

import ast_ad
from ast_ad import errors
from tests import solver_functions as sf
from tests.oracles import marked_line

pytest.importorskip("scipy.optimize")


def central(fun, x, h=1e-5):
    """Central differences of ``fun`` at ``x`` (a number or a vector), entry by entry."""
    return _central(fun, x, STEPS.get(fun, h))


# the step for finite differences of a fit: its optimizer's answer moves by about 1e-10 however
# tight its tolerances, so a step of 1e-5 would see that noise
STEPS = {sf.fitted: 1e-3, sf.curve: 1e-3, sf.one_minimum: 1e-3}


def _central(fun, x, h):
    x = np.asarray(x, dtype=float)
    if x.ndim == 0:
        return (fun(float(x) + h) - fun(float(x) - h)) / (2.0 * h)
    out = np.zeros_like(x)
    for i in range(x.size):
        step = np.zeros_like(x)
        step[i] = h
        out[i] = (fun(x + step) - fun(x - step)) / (2.0 * h)
    return out


def test_the_root_of_a_cubic_moves_as_the_theorem_says() -> None:
    """``z**3 + z = theta``: ``dz/dtheta = 1 / (3 z**2 + 1)``; the value is Python's, bit for
    bit."""
    theta = 1.3
    value, grads = ast_ad.value_and_grad(sf.equilibrium)(theta)
    assert value == sf.equilibrium(theta)
    import scipy.optimize as so

    z = so.brentq(sf.cubic, -10.0, 10.0, args=(theta,))
    assert np.isclose(grads, 2.0 * z / (3.0 * z * z + 1.0) + 1.0, rtol=1e-12)
    assert np.isclose(ast_ad.jvp(sf.equilibrium, (theta,), (1.0,))[1], grads, rtol=1e-12)
    assert np.isclose(ast_ad.tracer.grad(sf.equilibrium, (0,))(theta)[0], grads, rtol=1e-12)


@pytest.mark.parametrize("fun, at", [
    (sf.by_every_scalar_solver, 0.7),
    (sf.system, np.array([0.4, 0.9])),
    (sf.calibrated, np.array([0.4, -0.3])),
    (sf.in_its_bounds, np.array([0.4, -0.3])),
    (sf.integral, np.array([0.7, 1.3, 1.9])),
    (sf.trajectory, np.array([0.7, 1.3, 0.9])),
    (sf.observed_when, np.array([0.7, 1.3, 0.9])),
    (sf.faded, np.array([0.7, 1.0])),
    (sf.listed, np.array([0.7, 1.3, 0.9])),
    (sf.fitted, np.array([0.7, 1.3])),
    (sf.curve, np.array([0.7, 1.3])),
    (sf.one_minimum, np.array([0.7, 1.3])),
    (sf.many_unknowns, 0.8),
    (sf.sparse_solve, np.array([0.5, 0.7])),
], ids=lambda v: getattr(v, "__name__", ""))
def test_each_solver_against_finite_differences_and_the_other_mode(fun, at) -> None:
    value, grads = ast_ad.value_and_grad(fun)(at)
    assert np.array_equal(value, fun(at))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (fsolve's "xtol is too small")
        loose = fun in STEPS
        assert np.allclose(grads, central(fun, at), rtol=1e-4 if loose else 1e-5,
                           atol=1e-6 if loose else 1e-8)
    rng = np.random.default_rng(3)
    direction = rng.standard_normal(np.shape(at)) if np.ndim(at) else 1.0
    _, tangent = ast_ad.jvp(fun, (at,), (direction,))
    assert np.isclose(tangent, np.sum(grads * direction), rtol=1e-10)
    assert np.allclose(ast_ad.tracer.grad(fun, (0,))(at)[0], grads, rtol=1e-10)


def test_the_adjoint_method_solves_a_forgetful_state_again_one_piece_at_a_time(monkeypatch) -> None:
    """A state that forgets where it began (``sf.faded``, ``e**-16`` over its span) does not come
    back when solved backwards beside its adjoint: the adjoint method solves it forward again, in
    pieces of about ``RESOLVE_STEPS`` steps, each piece's dense output made when the adjoint
    reaches it; the gradient is the same (against finite differences). A state that comes back
    (``sf.trajectory``) is solved backwards beside its adjoint only, with no dense output."""
    import scipy.integrate as si

    from ast_ad.api import solvers

    made: list[list[Any]] = []

    def recorded(fun, span, y0, **options):
        made.append([fun.__name__, bool(options.get("dense_output")), None])
        sol = si.solve_ivp(fun, span, y0, **options)  # (an abandoned solve raises)
        made[-1][2] = sol.nfev
        return sol

    monkeypatch.setattr(solvers, "so_integrate", types.SimpleNamespace(solve_ivp=recorded))
    monkeypatch.setattr(solvers, "RESOLVE_STEPS", 4)
    at = np.array([0.7, 1.0])
    grads = ast_ad.grad(sf.faded)(at)
    assert np.allclose(grads, central(sf.faded, at), rtol=1e-5, atol=1e-8)
    assert made[0][0] == "together"  # tried first
    dense = [calls for _, kept, calls in made if kept]
    assert len(dense) > 2 and sum(dense) / len(dense) <= 2 * 6 * 4 + 12
    made.clear()
    ast_ad.grad(sf.trajectory)(np.array([0.7, 1.3, 0.9]))
    assert made and all(name == "together" and not kept for name, kept, _ in made)


def test_a_solve_of_the_derivative_that_stops_short_is_an_error_not_a_number(monkeypatch) -> None:
    """Where a solve the derivative makes (the state and its tangent together; a segment solved
    again; the adjoint backwards) stops before the end of its interval, its last column is no state
    at the end: an error naming it, never that column."""
    import scipy.integrate as si

    from ast_ad.api import solvers

    def stopped(fun, span, y0, **options):
        sol = si.solve_ivp(fun, span, y0, **options)
        sol.success, sol.message = False, "Required step size is less than spacing between numbers."
        return sol

    monkeypatch.setattr(solvers, "so_integrate", types.SimpleNamespace(solve_ivp=stopped))
    at = np.array([0.7, 1.3, 0.9])
    with pytest.raises(errors.UnsupportedDerivativeError, match="solved together"):
        ast_ad.jvp(sf.trajectory, (at,), (np.ones(3),))
    with pytest.raises(errors.UnsupportedDerivativeError, match="did not reach the end"):
        ast_ad.grad(sf.faded)(np.array([0.7, 1.0]))


def test_the_generated_code_calls_scipy_as_written_and_names_the_solve() -> None:
    """The forward pass is the user's call, ``args=`` as written; the backward pass solves with
    ``dF/dz`` under the user's line (``root_vjp``), and forward mode along it (``root_jvp``)."""
    reverse = ast_ad.source(ast_ad.grad(sf.equilibrium))
    assert "z = brentq(cubic, -10.0, 10.0, args=pack)" in reverse
    assert "# line" in reverse and "root_vjp(z_bar, z, cubic, pack, 2e-12)" in reverse
    forward = ast_ad.source(sf.equilibrium, 1.0, stage="jvp")
    assert "root_jvp(pack_dot, z, cubic, pack, 2e-12)" in forward


@pytest.mark.parametrize("fun, at, marker, words", [
    (sf.on_a_line, 1.0, "# line", "singular or ill-conditioned"),
    (sf.at_a_double_root, 1.0, "# double", "not isolated"),
    (sf.with_a_loose_solve, 1.0, "# unconverged", "check that the solver converged"),
    (sf.with_its_full_output, 1.0, "# full", "full_output=True"),
    (sf.at_its_bound, np.array([0.5, 0.5]), "# bound", "at one of its bounds"),
    (sf.with_its_error, np.array([0.7, 1.3, 1.9]), "# error", "error estimate"),
    (sf.weighted, np.array([0.7, 1.3, 1.9]), "# weight", "weight="),
    (sf.at_the_solvers_times, np.array([0.7, 1.3, 0.9]), "# times", "t_eval="),
    (sf.with_its_covariance, np.array([0.7, 1.3]), "# covariance", "pcov"),
], ids=lambda v: getattr(v, "__name__", ""))
def test_what_the_theorem_does_not_cover_is_refused_at_the_line(fun, at, marker, words) -> None:
    """No isolated solution, no solution, a result of another shape, a minimum held by a bound:
    each a clear refusal at the call's line, in both modes, never a nan or a wrong number."""
    for mode, run in (("reverse", lambda: ast_ad.grad(fun)(at)),
                      ("forward", lambda: ast_ad.jvp(fun, (at,), (np.ones_like(at),)))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            with pytest.raises(errors.UnsupportedDerivativeError, match=words) as info:
                run()
        # (quad's error estimate, the times solve_ivp chose: reverse mode finds the adjoint at the
        # call, forward mode the tangent where the part is used)
        used = mode == "forward" and fun in (
            sf.with_its_error, sf.at_the_solvers_times, sf.with_its_covariance
        )
        assert info.value.lineno == marked_line(fun, "# used" if used else marker)


@pytest.mark.parametrize("fun, marker", [
    (sf.through_a_closure, "# closure"),
    (sf.through_a_lambda, "# lambda"),
], ids=lambda v: getattr(v, "__name__", ""))
def test_a_function_that_reads_a_differentiated_value_by_closure_is_refused(fun, marker) -> None:
    """The solver's function would hide ``theta`` from the rules (their derivative would miss it):
    refused where it is passed, saying to pass it by ``args=``."""
    with pytest.raises(errors.ASTADError, match=r"args=") as info:
        ast_ad.grad(fun)(1.0)
    assert info.value.lineno == marked_line(fun, marker)


@pytest.mark.parametrize("fun, at", [
    (sf.equilibrium, 1.3),
    (sf.by_every_scalar_solver, 0.7),
    (sf.system, np.array([0.4, 0.9])),
    (sf.calibrated, np.array([0.4, -0.3])),
    (sf.one_minimum, np.array([0.7, 1.3])),
    (sf.fitted, np.array([0.7, 1.3])),
    (sf.curve, np.array([0.7, 1.3])),
], ids=lambda v: getattr(v, "__name__", ""))
def test_a_hessian_through_a_solver_matches_differences_of_its_gradient(fun, at) -> None:
    """Forward mode over the gradient: the reverse rules' own tangents (the theorem applied again:
    second derivatives of the user's function, by forward over reverse of ``lam . F``), against
    central differences of the gradient (a fit's with a larger step: its optimizer's noise)."""
    hessian = np.atleast_2d(ast_ad.hessian(fun)(at))
    gradient = ast_ad.grad(fun)
    # (a fit's gradient carries its optimizer's noise, about 1e-9 in ``fitted``'s with scipy 1.17:
    # divided by the step, 1e-6 at a step of 1e-3, so its differences take a step of 1e-2)
    step = 1e-2 if fun is sf.fitted else STEPS.get(fun, 1e-5)
    if np.ndim(at) == 0:
        numeric = np.atleast_2d(_central(gradient, at, step))
    else:
        numeric = np.stack([_central(lambda t, j=j: gradient(t)[j], at, step)
                            for j in range(len(at))])
    scale = np.max(np.abs(numeric))
    noise = 1e-6 if fun in STEPS else 1e-7  # (what the optimizer's own noise leaves in them)
    assert np.allclose(hessian, numeric, rtol=1e-4, atol=1e-5 * scale + noise)
    # (a fit's Hessian is symmetric to its optimizer's noise too: its off-diagonal entries,
    # 1e-7 of the largest, differ by 1e-12 of it on some machines' BLAS)
    symmetric = 1e-10 if fun is sf.fitted else 1e-12
    assert np.allclose(hessian, hessian.T, rtol=1e-8, atol=symmetric * scale)


def test_a_second_derivative_through_an_integral_or_an_ode_is_refused() -> None:
    """``quad``'s and ``solve_ivp``'s rules have no rules of their own yet: a Hessian through
    one says so, naming the rule."""
    with pytest.raises(errors.MissingRuleError, match="quad_"):
        ast_ad.hessian(sf.integral)(np.array([0.7, 1.3, 1.9]))
    with pytest.raises(errors.MissingRuleError, match="ivp_vjp"):
        ast_ad.hessian(sf.trajectory)(np.array([0.7, 1.3, 0.9]))


@pytest.mark.parametrize("fun", [sf.linear_algebra, sf.factored], ids=lambda f: f.__name__)
def test_scipy_linear_algebra_in_a_function_to_second_order(fun) -> None:
    """``solve`` (general, transposed, and of a symmetric matrix by one triangle),
    ``solve_triangular`` and ``expm``; ``cho_factor`` and ``cho_solve``, ``lu_factor`` (pivoting)
    and ``lu_solve`` (and the factors read directly, the other triangle of ``cho_factor``'s
    included) in user code: the gradient against central differences and
    the tracer, and the Hessian (forward over reverse, through the rules' own helpers) against
    central differences of the gradient."""
    theta = np.array([0.7, 1.3])
    value, grads = ast_ad.value_and_grad(fun)(theta)
    assert value == fun(theta)
    assert np.allclose(grads, central(fun, theta), rtol=1e-6)
    assert np.allclose(ast_ad.tracer.grad(fun, (0,))(theta)[0], grads, rtol=1e-10)
    hessian = ast_ad.hessian(fun)(theta)
    gradient = ast_ad.grad(fun)
    numeric = np.stack([central(lambda t, j=j: gradient(t)[j], theta) for j in range(2)])
    assert np.allclose(hessian, numeric, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("fun", [sf.minimum_value, sf.minimum_value_alone],
                         ids=lambda f: f.__name__)
def test_a_field_of_a_result_other_than_the_solution_is_refused_not_dropped(fun) -> None:
    """``res.fun`` (the objective at the minimum) read in what is differentiated: its derivative
    is not followed yet, so both modes refuse (reverse mode at the call, forward mode where it is
    used, or when the tangent is returned), where dropping it would be a wrong number."""
    c = np.array([0.5, 0.2])
    with pytest.raises(errors.UnsupportedDerivativeError, match=r"only the solution") as info:
        ast_ad.grad(fun)(c)
    assert info.value.lineno == marked_line(fun, "# call")
    with pytest.raises(errors.UnsupportedDerivativeError, match=r"only the solution") as info:
        ast_ad.jvp(fun, (c,), (np.ones(2),))
    if fun is sf.minimum_value:
        assert info.value.lineno == marked_line(fun, "# used")


def test_many_unknowns_are_solved_by_products_as_the_dense_solve_does(monkeypatch) -> None:
    """150 unknowns: ``dF/dz`` is never built, GMRES solves with its products (one jvp or vjp
    each); the same gradient as the dense solve's, which the limit raised gives."""
    from ast_ad.api import solvers

    value, matrix_free = ast_ad.value_and_grad(sf.many_unknowns)(0.8)
    assert isinstance(solvers._slope(sf.long_chain, np.zeros(150), (np.ones(150),)),
                      solvers.Products)
    monkeypatch.setattr(solvers, "DENSE_UP_TO", 1000)
    dense = ast_ad.grad(sf.many_unknowns)(0.8)
    assert np.isclose(matrix_free, dense, rtol=1e-9)
    assert np.isclose(ast_ad.jvp(sf.many_unknowns, (0.8,), (1.0,))[1], dense, rtol=1e-9)


@pytest.mark.parametrize("fun", [sf.linear_algebra, sf.factored], ids=lambda f: f.__name__)
def test_an_exported_gradient_through_scipy_linalg_runs_without_ast_ad(fun, tmp_path) -> None:
    """The rules' helpers are copied with the imports they name (``sl``) and the helpers they call
    (``T``, once missed: a name with a capital); scipy's own functions are imported."""
    import runpy

    theta = np.array([0.7, 1.3])
    gradient = ast_ad.grad(fun)
    path = ast_ad.export(gradient, str(tmp_path / f"{fun.__name__}_gradient.py"), theta)
    module = runpy.run_path(path)
    value, grads = module[f"{fun.__name__}_vjp"](theta)
    assert value == fun(theta)
    assert np.allclose(grads, gradient(theta), rtol=1e-12)


def test_a_gradient_through_a_solver_is_not_exported(tmp_path) -> None:
    """Its rules take ast_ad's derivatives of the user's function as they run: refused, saying
    so (it wrote scipy's brentq's source into the module before, which failed to run)."""
    with pytest.raises(errors.ASTADError, match=r"root_vjp.*numpy alone"):
        ast_ad.export(ast_ad.grad(sf.equilibrium), str(tmp_path / "gradient.py"), 1.3)
