"""Derivatives through scipy's solvers, worked: the sensitivity of a chemical network's steady
state (``root``), a ridge penalty tuned by the gradient of a validation loss through ``minimize``,
the derivative of an implied volatility (``brentq``), a parametrized density's normalizing constant
(``quad``), and the Lotka-Volterra parameters fitted by gradient descent through ``solve_ivp``.

Run it: ``python examples/scipy_solvers.py``. ``tests/test_solver_examples.py`` checks each
against its closed form, finite differences, JAX, and the same problem solved by optimistix or
diffrax and differentiated by JAX.
"""

import math

import numpy as np
import scipy.integrate as si
import scipy.optimize as so
import scipy.special as sp

import ast_ad


# ---- a chemical network's steady state: A <-> B -> C -> A ----------------------------------------
def network(z, k):
    """The rates of change of A and B, and the conservation of matter (the three sum to one)."""
    a, b, c = z[0], z[1], z[2]
    return np.array([-k[0] * a + k[1] * b + k[3] * c,
                     k[0] * a - (k[1] + k[2]) * b,
                     a + b + c - 1.0])


def steady_state(k):
    sol = so.root(network, np.full(3, 1.0 / 3.0), args=(k,), tol=1e-13)
    return sol.x


# ---- ridge regression's penalty, tuned through minimize ------------------------------------------
RNG = np.random.default_rng(0)
X_TRAIN, X_VALID = RNG.standard_normal((20, 3)), RNG.standard_normal((10, 3))
W_TRUE = np.array([1.0, -2.0, 0.5])
Y_TRAIN = X_TRAIN @ W_TRUE + 0.3 * RNG.standard_normal(20)
Y_VALID = X_VALID @ W_TRUE + 0.3 * RNG.standard_normal(10)


def training_loss(w, penalty):
    return np.sum((X_TRAIN @ w - Y_TRAIN) ** 2) + penalty * np.sum(w * w)


def training_gradient(w, penalty):
    return 2.0 * X_TRAIN.T @ (X_TRAIN @ w - Y_TRAIN) + 2.0 * penalty * w


def validation_loss(penalty):
    res = so.minimize(training_loss, np.zeros(3), args=(penalty,), jac=training_gradient,
                      tol=1e-12)
    return np.sum((X_VALID @ res.x - Y_VALID) ** 2)


# ---- an implied volatility -----------------------------------------------------------------------
def black_scholes(sigma, spot, strike, years, rate):
    """A European call's price."""
    root = math.sqrt(years)
    d1 = (math.log(spot / strike) + (rate + 0.5 * sigma * sigma) * years) / (sigma * root)
    d2 = d1 - sigma * root
    return spot * sp.ndtr(d1) - strike * math.exp(-rate * years) * sp.ndtr(d2)


def mispriced(sigma, price, spot, strike, years, rate):
    return black_scholes(sigma, spot, strike, years, rate) - price


def implied_volatility(price):
    return so.brentq(mispriced, 1e-4, 5.0, args=(price, 100.0, 95.0, 0.5, 0.02))


# ---- a density's normalizing constant ------------------------------------------------------------
def unnormalized(x, width, tilt):
    return np.exp(-0.5 * (x / width) ** 2 + tilt * np.sin(x))


def normalizer(p):
    value, err = si.quad(unnormalized, -np.inf, np.inf, args=(p[0], p[1]))
    return value


# ---- Lotka-Volterra, fitted ----------------------------------------------------------------------
TIMES = np.linspace(0.5, 10.0, 20)


def predator_prey(t, y, a, b, c, d):
    return np.array([a * y[0] - b * y[0] * y[1], d * y[0] * y[1] - c * y[1]])


TRUE = (1.0, 0.1, 1.5, 0.075)
OBSERVED = si.solve_ivp(predator_prey, (0.0, 10.0), np.array([10.0, 5.0]), t_eval=TIMES,
                        args=TRUE, rtol=1e-10, atol=1e-10).y


def misfit(theta):
    sol = si.solve_ivp(predator_prey, (0.0, 10.0), np.array([10.0, 5.0]), t_eval=TIMES,
                       args=(theta[0], theta[1], theta[2], theta[3]), rtol=1e-10, atol=1e-10)
    return np.mean((sol.y - OBSERVED) ** 2)


def fitted(start, steps=30, rate=0.05):
    """Gradient descent on the misfit, the gradient by the adjoint method, each parameter's step
    scaled by its size (they differ by a factor of twenty)."""
    theta = np.array(start, dtype=float)
    gradient = ast_ad.grad(misfit)
    for _ in range(steps):
        slope = gradient(theta) * theta
        theta = theta * np.exp(-rate * slope / (np.linalg.norm(slope) + 1e-12))
    return theta


if __name__ == "__main__":
    k = np.array([1.0, 0.5, 0.8, 0.3])
    print("steady state", steady_state(k))
    print("its sensitivity to the rates\n", ast_ad.jacobian(steady_state)(k))
    print("validation loss", validation_loss(2.0), "its slope in the penalty",
          ast_ad.grad(validation_loss)(2.0))
    print("implied volatility", implied_volatility(10.0), "its slope in the price",
          ast_ad.grad(implied_volatility)(10.0))
    print("normalizer", normalizer(np.array([1.3, 0.4])), "its gradient",
          ast_ad.grad(normalizer)(np.array([1.3, 0.4])))
    start = [0.9, 0.11, 1.6, 0.07]
    print("misfit", misfit(np.array(start)), "after gradient descent",
          misfit(fitted(start)))
