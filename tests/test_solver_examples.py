"""The worked examples of differentiating through scipy's solvers (``examples/scipy_solvers.py``),
each against its closed form where it has one, central differences, and JAX: the closed form
differentiated, the solver's iterations unrolled and differentiated, and the same problems solved by
JAX's solver libraries, optimistix (roots and minima) and diffrax (the ODE, and the integral as
one)."""

from __future__ import annotations

import importlib.util
import math
import pathlib

import numpy as np
import pytest

import ast_ad

pytest.importorskip("scipy.optimize")
_path = pathlib.Path(__file__).parent.parent / "examples" / "scipy_solvers.py"
_spec = importlib.util.spec_from_file_location("scipy_solvers_example", _path)
assert _spec is not None and _spec.loader is not None
ex = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ex)


def central(fun, x, h=1e-6):
    x = np.asarray(x, dtype=float)
    if x.ndim == 0:
        return (fun(float(x) + h) - fun(float(x) - h)) / (2.0 * h)
    columns = []
    for i in range(x.size):
        step = np.zeros_like(x)
        step[i] = h
        columns.append((np.asarray(fun(x + step)) - np.asarray(fun(x - step))) / (2.0 * h))
    return np.stack(columns, axis=-1)


def test_a_steady_states_sensitivity_is_the_linear_systems() -> None:
    """The network is linear in its concentrations: ``M(k) z = e3``, so ``dz/dk_i = -M^-1 (dM/dk_i)
    z``."""
    k = np.array([1.0, 0.5, 0.8, 0.3])
    z = ex.steady_state(k)
    jacobian = ast_ad.jacobian(ex.steady_state)(k)

    def matrix(k):
        return np.array([[-k[0], k[1], k[3]], [k[0], -(k[1] + k[2]), 0.0], [1.0, 1.0, 1.0]])
    closed = np.stack([
        -np.linalg.solve(matrix(k), (matrix(k + step) - matrix(k)) @ z)
        for step in np.eye(4)
    ], axis=1)  # (M is linear in k: a unit step's difference is dM/dk_i exactly)
    assert np.allclose(jacobian, closed, rtol=1e-9, atol=1e-12)
    assert np.allclose(jacobian, central(ex.steady_state, k), rtol=1e-6, atol=1e-9)


def _ridge(penalty, xp=np):
    x, y = xp.asarray(ex.X_TRAIN), xp.asarray(ex.Y_TRAIN)
    w = xp.linalg.solve(x.T @ x + penalty * xp.eye(3), x.T @ y)
    return xp.sum((xp.asarray(ex.X_VALID) @ w - xp.asarray(ex.Y_VALID)) ** 2)


def test_a_penalty_tuned_through_minimize_against_ridges_closed_form() -> None:
    """The validation loss's slope in the penalty, through ``minimize``, is the closed form's
    ``w = (X^T X + p I)^-1 X^T y``, ``dw/dp = -(X^T X + p I)^-1 w``."""
    value, slope = ast_ad.value_and_grad(ex.validation_loss)(2.0)
    assert math.isclose(value, _ridge(2.0), rel_tol=1e-9)
    x = ex.X_TRAIN
    gram = x.T @ x + 2.0 * np.eye(3)
    w = np.linalg.solve(gram, x.T @ ex.Y_TRAIN)
    closed = 2.0 * (ex.X_VALID @ w - ex.Y_VALID) @ ex.X_VALID @ -np.linalg.solve(gram, w)
    assert math.isclose(slope, closed, rel_tol=1e-7)
    assert math.isclose(slope, central(ex.validation_loss, 2.0, 1e-4), rel_tol=1e-5)


@pytest.mark.long  # (JAX's import and tracing, or thirty ODE solves: CI's ``-m long`` step)
def test_a_penalty_tuned_through_minimize_against_jax() -> None:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    expected = float(jax.grad(lambda p: _ridge(p, jnp))(2.0))
    assert math.isclose(ast_ad.grad(ex.validation_loss)(2.0), expected, rel_tol=1e-7)


def _vega(sigma, spot=100.0, strike=95.0, years=0.5, rate=0.02):
    root = math.sqrt(years)
    d1 = (math.log(spot / strike) + (rate + 0.5 * sigma * sigma) * years) / (sigma * root)
    return spot * math.exp(-0.5 * d1 * d1) / math.sqrt(2.0 * math.pi) * math.sqrt(years)


def test_an_implied_volatility_moves_with_the_price_as_one_over_vega() -> None:
    sigma, slope = ast_ad.value_and_grad(ex.implied_volatility)(10.0)
    assert math.isclose(ex.black_scholes(sigma, 100.0, 95.0, 0.5, 0.02), 10.0, rel_tol=1e-12)
    assert math.isclose(slope, 1.0 / _vega(sigma), rel_tol=1e-9)
    assert math.isclose(slope, central(ex.implied_volatility, 10.0), rel_tol=1e-6)
    assert math.isclose(ast_ad.jvp(ex.implied_volatility, (10.0,), (1.0,))[1], slope,
                        rel_tol=1e-12)


@pytest.mark.long  # (JAX's import and tracing, or thirty ODE solves: CI's ``-m long`` step)
def test_an_implied_volatility_against_jax_through_newtons_iterations() -> None:
    """JAX differentiates through twenty Newton steps on the same equation (the derivative of the
    iterations, which converge to the theorem's)."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax.scipy.special import ndtr

    def price(sigma):
        d1 = (jnp.log(100.0 / 95.0) + (0.02 + 0.5 * sigma * sigma) * 0.5) / (
            sigma * jnp.sqrt(0.5)
        )
        d2 = d1 - sigma * jnp.sqrt(0.5)
        return 100.0 * ndtr(d1) - 95.0 * jnp.exp(-0.02 * 0.5) * ndtr(d2)

    def implied(target):
        sigma = 0.3
        for _ in range(20):
            sigma = sigma - (price(sigma) - target) / jax.grad(price)(sigma)
        return sigma
    assert math.isclose(ast_ad.grad(ex.implied_volatility)(10.0), float(jax.grad(implied)(10.0)),
                        rel_tol=1e-9)


def test_a_normalizing_constant_by_leibniz() -> None:
    """Untilted, the density is a Gaussian's: ``Z = width sqrt(2 pi)``, ``dZ/dwidth = sqrt(2 pi)``
    and ``dZ/dtilt = 0`` (an odd integrand); tilted, against central differences."""
    grads = ast_ad.grad(ex.normalizer)(np.array([1.3, 0.0]))
    assert np.allclose(grads, [math.sqrt(2.0 * math.pi), 0.0], rtol=1e-7, atol=1e-9)
    p = np.array([1.3, 0.4])
    assert np.allclose(ast_ad.grad(ex.normalizer)(p), central(ex.normalizer, p, 1e-5), rtol=1e-6)


@pytest.mark.long  # (JAX's import and tracing, or thirty ODE solves: CI's ``-m long`` step)
def test_lotka_volterra_fitted_by_gradient_descent_through_solve_ivp() -> None:
    """The adjoint method's gradient of the misfit against central differences, and gradient descent
    with it bringing the misfit down by a factor of five in a few steps."""
    start = np.array([0.9, 0.11, 1.6, 0.07])
    grads = ast_ad.grad(ex.misfit)(start)
    assert np.allclose(grads, central(ex.misfit, start, 1e-6), rtol=1e-5)
    assert ex.misfit(ex.fitted(start, steps=8)) < ex.misfit(start) / 5.0


# ---- the same problems in JAX's solver libraries: optimistix (roots and minima, differentiated by
# the implicit function theorem) and diffrax (ODEs, and the integral as one) -----------------------
def _jax_libraries():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax, pytest.importorskip("optimistix"), pytest.importorskip("diffrax")


@pytest.mark.long  # (JAX's import and compilation: CI's ``-m long`` step)
def test_the_steady_states_sensitivity_against_optimistix() -> None:
    jax, optx, _ = _jax_libraries()
    import jax.numpy as jnp

    def network(z, k):
        a, b, c = z[0], z[1], z[2]
        return jnp.array([-k[0] * a + k[1] * b + k[3] * c, k[0] * a - (k[1] + k[2]) * b,
                          a + b + c - 1.0])

    def steady_state(k):
        newton = optx.Newton(rtol=1e-13, atol=1e-13)
        return optx.root_find(network, newton, jnp.full(3, 1.0 / 3.0), args=k).value

    k = np.array([1.0, 0.5, 0.8, 0.3])
    expected = np.asarray(jax.jacobian(steady_state)(jnp.asarray(k)))
    assert np.allclose(ast_ad.jacobian(ex.steady_state)(k), expected, rtol=1e-10, atol=1e-13)


@pytest.mark.long
def test_the_penalty_tuned_through_a_minimum_against_optimistix() -> None:
    jax, optx, _ = _jax_libraries()
    import jax.numpy as jnp

    def training_loss(w, penalty):
        return jnp.sum((ex.X_TRAIN @ w - ex.Y_TRAIN) ** 2) + penalty * jnp.sum(w * w)

    def validation_loss(penalty):
        bfgs = optx.BFGS(rtol=1e-12, atol=1e-12)
        w = optx.minimise(training_loss, bfgs, jnp.zeros(3), args=penalty).value
        return jnp.sum((ex.X_VALID @ w - ex.Y_VALID) ** 2)

    expected = float(jax.grad(validation_loss)(2.0))
    assert math.isclose(ast_ad.grad(ex.validation_loss)(2.0), expected, rel_tol=1e-8)


@pytest.mark.long
def test_the_implied_volatility_against_optimistix() -> None:
    jax, optx, _ = _jax_libraries()
    import jax.numpy as jnp
    from jax.scipy.special import ndtr

    def mispriced(sigma, price):
        d1 = (jnp.log(100.0 / 95.0) + (0.02 + 0.5 * sigma * sigma) * 0.5) / (
            sigma * jnp.sqrt(0.5)
        )
        d2 = d1 - sigma * jnp.sqrt(0.5)
        return 100.0 * ndtr(d1) - 95.0 * jnp.exp(-0.02 * 0.5) * ndtr(d2) - price

    def implied_volatility(price):
        newton = optx.Newton(rtol=1e-14, atol=1e-14)
        return optx.root_find(mispriced, newton, jnp.asarray(0.3), args=price).value

    expected = float(jax.grad(implied_volatility)(10.0))
    assert math.isclose(ast_ad.grad(ex.implied_volatility)(10.0), expected, rel_tol=1e-10)


@pytest.mark.long
def test_the_normalizing_constant_against_diffrax() -> None:
    """The integral over the line as diffrax's ODE ``dZ/dx = density(x)`` over ``[-15, 15]`` (the
    rest is below ``e**-50``), differentiated through the solve."""
    jax, _, diffrax = _jax_libraries()
    import jax.numpy as jnp

    def density(x, z, p):
        return jnp.exp(-0.5 * (x / p[0]) ** 2 + p[1] * jnp.sin(x))

    def normalizer(p):
        tight = diffrax.PIDController(rtol=1e-12, atol=1e-12)
        sol = diffrax.diffeqsolve(diffrax.ODETerm(density), diffrax.Dopri8(), -15.0, 15.0, 0.01,
                                  0.0, args=p, stepsize_controller=tight, max_steps=100_000)
        return sol.ys[-1]

    p = np.array([1.3, 0.4])
    expected = np.asarray(jax.grad(normalizer)(jnp.asarray(p)))
    assert np.allclose(ast_ad.grad(ex.normalizer)(p), expected, rtol=1e-8)


@pytest.mark.long
def test_the_lotka_volterra_misfit_against_diffrax() -> None:
    """diffrax's Dopri5 (RK45's pair) at the same tolerances, differentiated through its steps
    (``RecursiveCheckpointAdjoint``); ast_ad's adjoint method agrees to about the tolerance."""
    jax, _, diffrax = _jax_libraries()
    import jax.numpy as jnp

    def predator_prey(t, y, theta):
        a, b, c, d = theta[0], theta[1], theta[2], theta[3]
        return jnp.array([a * y[0] - b * y[0] * y[1], d * y[0] * y[1] - c * y[1]])

    def misfit(theta):
        tight = diffrax.PIDController(rtol=1e-10, atol=1e-10)
        sol = diffrax.diffeqsolve(diffrax.ODETerm(predator_prey), diffrax.Dopri5(), 0.0, 10.0, 0.01,
                                  jnp.array([10.0, 5.0]), args=theta, stepsize_controller=tight,
                                  saveat=diffrax.SaveAt(ts=jnp.asarray(ex.TIMES)),
                                  max_steps=100_000)
        return jnp.mean((sol.ys.T - ex.OBSERVED) ** 2)

    start = np.array([0.9, 0.11, 1.6, 0.07])
    expected = np.asarray(jax.grad(misfit)(jnp.asarray(start)))
    assert np.allclose(ast_ad.grad(ex.misfit)(start), expected, rtol=1e-6)
