"""Functions solved by scipy inside differentiated code (``test_solvers``), and the residuals and
objectives the rules' finite-difference cases pass to scipy (``rule_cases``): module-level
functions, their parameters passed by ``args=``, as scipy's documentation writes them."""

import numpy as np
import scipy.integrate as si
import scipy.linalg as sl
import scipy.optimize as so
import scipy.sparse as ss
import scipy.sparse.linalg as ssl


# ---- what is solved ------------------------------------------------------------------------------
def cubic(z, theta):
    """Increasing in ``z``: one root for every ``theta``."""
    return z ** 3 + z - theta


def pair(z, p):
    """A map near the identity: one root near ``p``."""
    return z + 0.1 * np.tanh(z[::-1]) - p


def pair_apart(z, a, b):
    return np.array([z[0] + 0.1 * np.sin(z[1]) - a, z[1] + 0.2 * z[0] * z[0] - b])


def bowl(x, c):
    """Strictly convex: one minimum, near ``c``."""
    return np.sum((x - c) ** 2) + 0.1 * np.sum(x ** 4)


def bowl_gradient(x, c):
    return 2.0 * (x - c) + 0.4 * x ** 3


def weighted_bowl(x, c, w):
    """A quadratic with a coupling term: scipy's trust-region Newton method finds its minimum to
    the last digit (the finite-difference cases of the rules need that)."""
    return np.sum(w * (x - c) ** 2) + 0.1 * np.sum(x ** 2) + 0.05 * x[0] * x[1]


def weighted_bowl_gradient(x, c, w):
    return 2.0 * w * (x - c) + 0.2 * x + 0.05 * x[::-1]


def weighted_bowl_hessian(x, c, w):
    return np.array([[2.0 * w + 0.2, 0.05], [0.05, 2.0 * w + 0.2]])


def bump(x, k, w):
    """An integrand with a number and an array among its parameters."""
    return np.exp(-k * x * x) * np.sum(w * np.array([1.0, x])) * np.cos(x)


def decay(t, y, k, c):
    """Two coupled states, a rate and a forcing."""
    return np.array([-k * y[0] + c * np.sin(y[1]), k * y[0] - 0.5 * y[1] * y[1]])


GRID = np.linspace(0.0, 2.0, 9)


def residuals(x, data, w):
    """A decay fitted to ``data``, weighted by ``w``: nonlinear in its rate."""
    return w * (x[0] * np.exp(-x[1] * GRID) - data)


def decaying(t, a, k):
    return a * np.exp(-k * t)


def scalar_bowl(x, c, w):
    return w * (x - c) ** 2 + 0.1 * x ** 4 + np.sin(x)


def long_chain(z, p):
    """Many unknowns, each tied to its neighbour: dF/dz is applied as products."""
    return z + 0.1 * np.tanh(np.roll(z, 1)) - p


def flat(z, theta):
    """A double root at ``z = theta``: not isolated, no derivative."""
    return (z - theta) ** 2


# ---- what is differentiated ---------------------------------------------------------------------
def equilibrium(theta):
    z = so.brentq(cubic, -10.0, 10.0, args=(theta,))
    return z * z + theta


def by_every_scalar_solver(theta):
    total = so.brentq(cubic, -10.0, 10.0, args=(theta,))
    total = total + so.brenth(cubic, -10.0, 10.0, args=(theta,))
    total = total + so.bisect(cubic, -10.0, 10.0, args=(theta,))
    total = total + so.ridder(cubic, -10.0, 10.0, args=(theta,))
    total = total + so.newton(cubic, 1.0, args=(theta,))
    found = so.root_scalar(cubic, args=(theta,), bracket=[-10.0, 10.0], xtol=1e-13)
    return total * found.root


def system(p):
    z = so.fsolve(pair_apart, np.ones(2), args=(p[0], p[1] * p[1]), xtol=1e-13)
    sol = so.root(pair, np.zeros(2), args=(p,), tol=1e-13)
    return np.sum(z * sol.x) + np.sum(np.sin(sol.x))


def calibrated(c):
    res = so.minimize(bowl, np.zeros(2), args=(c,), jac=bowl_gradient, tol=1e-13)
    return np.sum(res.x ** 2) + res.x[0] * c[1]


def in_its_bounds(c):
    res = so.minimize(bowl, np.zeros(2), args=(c,), jac=bowl_gradient, tol=1e-13,
                      bounds=[(-5.0, 5.0), (-5.0, 5.0)])
    return np.sum(res.x)


def at_its_bound(c):
    held = [(-5.0, 0.1), (-5.0, 5.0)]
    res = so.minimize(bowl, np.zeros(2), args=(c,), jac=bowl_gradient, bounds=held)  # bound
    return np.sum(res.x)


def at_a_double_root(theta):
    return so.newton(flat, 1.0, args=(theta,))  # double


def through_a_closure(theta):
    def residual(z):
        return z ** 3 + z - theta
    return so.brentq(residual, -10.0, 10.0)  # closure


def through_a_lambda(theta):
    return so.brentq(lambda z: z ** 3 + z - theta, -10.0, 10.0)  # lambda


def with_a_loose_solve(theta):
    return so.brentq(cubic, -10.0, 10.0, args=(theta,), maxiter=3, disp=False)  # unconverged


def with_its_full_output(theta):
    z, report = so.brentq(cubic, -10.0, 10.0, args=(theta,), full_output=True)  # full
    return z


def line(z, a):
    """Zero on a whole line: a singular Jacobian, no isolated root."""
    return np.array([z[0] + z[1] - a, 2.0 * z[0] + 2.0 * z[1] - 2.0 * a])


def on_a_line(a):
    sol = so.root(line, np.zeros(2), args=(a,))  # line
    return np.sum(sol.x)


# ---- scipy.linalg with differentiated matrices ---------------------------------------------------
Y = np.array([0.3, -1.2, 0.8])
M = np.array([[0.0, 1.0, 0.2], [-0.5, 0.1, 0.0], [0.3, 0.0, -0.2]])


def linear_algebra(theta):
    k = np.exp(-theta[0] * (np.arange(3.0)[:, None] - np.arange(3.0)[None, :]) ** 2)
    k = k + theta[1] * np.eye(3)
    lower = np.linalg.cholesky(k)
    alpha = sl.solve_triangular(lower, Y, lower=True)
    weights = sl.solve(k, Y, assume_a="pos")
    general = sl.solve(k + 0.1 * M, Y, transposed=True)
    return alpha @ alpha + weights @ Y + np.sum(sl.expm(theta[0] * M)) + general @ general


# ---- integrals -----------------------------------------------------------------------------------
def integral(p):
    value, err = si.quad(bump, p[0] - 1.0, p[2], args=(p[0], p[1:]))
    samples = np.sin(p[1] * np.linspace(0.0, 1.0, 7))
    return value * p[1] + si.simpson(samples, dx=0.1) + si.trapezoid(samples, x=XS)


XS = np.array([0.0, 0.1, 0.3, 0.35, 0.6, 0.9, 1.0])


def with_its_error(p):
    value, err = si.quad(bump, 0.0, p[2], args=(p[0], p[1:]))  # error
    return value + err  # used


def weighted(p):
    return si.quad(bump, 0.0, 1.0, args=(p[0], p[1:]), weight="cos", wvar=2.0)[0]  # weight


# ---- ODEs ----------------------------------------------------------------------------------------
TIMES = np.array([0.2, 0.4, 0.6])


def trajectory(p):
    sol = si.solve_ivp(decay, (0.0, 0.8), np.array([p[0], 1.0]), t_eval=TIMES,
                       args=(p[1], p[2]), rtol=1e-11, atol=1e-12)
    return np.sum(sol.y ** 2)


def observed_when(p):
    sol = si.solve_ivp(decay, (0.0, 2.0), np.array([1.0, p[0]]), t_eval=np.array([0.5, p[2]]),
                       args=(p[1], 0.3), method="DOP853", rtol=1e-11, atol=1e-12)
    return np.sum(sol.y[:, -1] * np.array([1.0, 2.0])) + sol.t[-1]


def fast_decay(t, y, k):
    """Decays forwards at rates up to ``20 k``: solved backwards, it grows as fast."""
    return -k * np.array([20.0, 1.0]) * y + np.array([0.0, 0.1 * y[0]])


def faded(p):
    """Observed once, at the end of a span over which the state forgets its start by ``e**-16``:
    the state solved backwards beside the adjoint does not come back (``BACKSOLVE_AGREEMENT``), so
    the adjoint method solves it forward again, in pieces."""
    sol = si.solve_ivp(fast_decay, (0.0, 0.8), np.array([p[0], 1.0]), t_eval=np.array([0.8]),
                       args=(p[1],), rtol=1e-10, atol=1e-14)
    return np.sum(sol.y[:, -1])


def listed_decay(t, y, k, c):
    return [-k * y[0] + c * np.sin(y[1]), k * y[0] - 0.5 * y[1] * y[1]]


def listed(p):
    """A right-hand side that returns a list, and an ``atol`` for each component."""
    sol = si.solve_ivp(listed_decay, (0.0, 0.8), np.array([p[0], 1.0]), t_eval=TIMES,
                       args=(p[1], p[2]), rtol=1e-11, atol=np.array([1e-12, 1e-13]))
    return np.sum(sol.y ** 2)


def at_the_solvers_times(p):
    sol = si.solve_ivp(decay, (0.0, 1.0), np.array([p[0], 1.0]), args=(p[1], p[2]))  # times
    return sol.t[-2] * p[0]  # used


def minimum_value(c):
    res = so.minimize(bowl, np.zeros(2), args=(c,), jac=bowl_gradient, tol=1e-12)  # call
    return res.fun + 0.0 * c[0]  # used


def minimum_value_alone(c):
    res = so.minimize(bowl, np.zeros(2), args=(c,), jac=bowl_gradient, tol=1e-12)  # call
    return res.fun  # used


# ---- least squares -------------------------------------------------------------------------------
def fitted(p):
    data = 1.5 * np.exp(-0.7 * GRID) + 0.05 * np.sin(7.0 * GRID) * p[0]
    res = so.least_squares(residuals, np.array([1.0, 1.0]), args=(data, p[1]), xtol=1e-15,
                           ftol=1e-15, gtol=1e-15)
    return res.x[0] * res.x[1]


def curve(p):
    ydata = 1.5 * np.exp(-0.7 * GRID) + 0.05 * np.sin(7.0 * GRID) * p[0]
    sigma = 0.1 + 0.3 * GRID * p[1]
    popt, pcov = so.curve_fit(decaying, GRID, ydata, p0=[1.0, 1.0], sigma=sigma, ftol=1e-15,
                              xtol=1e-15, gtol=1e-15)
    return popt[0] + popt[1] ** 2


def with_its_covariance(p):
    ydata = 1.5 * np.exp(-0.7 * GRID) * p[0]
    popt, pcov = so.curve_fit(decaying, GRID, ydata, p0=[1.0, 1.0])  # covariance
    return popt[0] + pcov[0, 0]  # used


def one_minimum(p):
    found = so.minimize_scalar(scalar_bowl, args=(p[0], p[1]), tol=1e-12)
    bounded = so.minimize_scalar(scalar_bowl, bounds=(-3.0, 3.0), args=(p[0], 2.0),
                                 method="bounded", options={"xatol": 1e-10})
    return found.x * bounded.x


def many_unknowns(p):
    sol = so.root(long_chain, np.zeros(150), args=(p * np.linspace(0.5, 1.5, 150),), tol=1e-13)
    return np.sum(sol.x ** 2)


def factored(theta):
    k = np.exp(-theta[0] * (np.arange(3.0)[:, None] - np.arange(3.0)[None, :]) ** 2)
    k = k + theta[1] * np.eye(3)
    c, low = sl.cho_factor(k)
    x = sl.cho_solve((c, low), Y)
    lu, piv = sl.lu_factor((k + M * theta[0])[[2, 0, 1]])
    z = sl.lu_solve((lu, piv), Y)
    w = sl.lu_solve((lu, piv), Y, trans=1)
    return x @ x + z @ z + w @ Y + 0.1 * np.sum(c) + np.sum(lu * lu)


# ---- sparse matrices with differentiated entries -------------------------------------------------

SIZE = 40
_MAIN = np.arange(SIZE)
ROWS = np.concatenate([_MAIN, _MAIN[:-1], _MAIN[1:]])
COLS = np.concatenate([_MAIN, _MAIN[1:], _MAIN[:-1]])
# the same pattern, compressed by columns (each column's rows, in order)
ORDER = np.lexsort((ROWS, COLS))
INDPTR = np.concatenate([[0], np.cumsum(np.bincount(COLS, minlength=SIZE))])
RIGHT = np.linspace(1.0, 2.0, SIZE)


def tridiagonal(theta):
    return np.concatenate([4.0 + theta[0] * np.cos(_MAIN), theta[1] * np.ones(SIZE - 1),
                           -np.ones(SIZE - 1) * theta[0]])


def sparse_solve(theta):
    data = tridiagonal(theta)
    a = ss.csr_matrix((data, (ROWS, COLS)), shape=(SIZE, SIZE))
    b = ss.csc_matrix((data[ORDER], ROWS[ORDER], INDPTR), shape=(SIZE, SIZE))
    x = ssl.spsolve(a, RIGHT)
    y = ssl.spsolve(b, x)
    return np.sum(x * y) + np.sum(x)
