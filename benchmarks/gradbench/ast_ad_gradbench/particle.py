"""GradBench's ``particle`` eval (Pearlmutter and Siskind's charged particle): find the control
``w`` that makes the particle's path, integrated by Euler's method under the force of two charges,
hit the origin.

The integrator takes the gradient of the potential at every step, and the minimiser takes the
gradient of the integrator: nested derivatives, in four combinations. ``rf`` is reverse mode (outer)
over forward mode (inner); the first letter is the minimiser's.
"""

import os

import numpy as np

import ast_ad

from .solver import argmin, gradient_by_forward_mode, one_pass
from .wrap import timed

E0, E1 = np.array([1.0, 0.0]), np.array([0.0, 1.0])


def potential(x, w):
    """The potential at ``x`` of the unit charges at (10, 10 - w) and (10, 0)."""
    return 1.0 / np.sqrt((x[0] - 10.0) ** 2 + (x[1] - 10.0 + w) ** 2) + 1.0 / np.sqrt(
        (x[0] - 10.0) ** 2 + x[1] ** 2
    )


def force_r(x, w):
    """Minus the potential's gradient at ``x``, by reverse mode."""
    return -ast_ad.grad(potential)(x, w)


def force_f(x, w):
    """The same force by forward mode: one ``jvp`` per coordinate."""
    return -np.array(
        [ast_ad.jvp(potential, (x, w), (E0, None))[1], ast_ad.jvp(potential, (x, w), (E1, None))[1]]
    )


def miss(w, force):
    """The squared distance from the origin where the path, integrated by Euler's method under
    ``force``, crosses the x axis."""
    x = np.array([0.0, 8.0])
    xdot = np.array([0.75, 0.0])
    while True:
        xddot = force(x, w[0])
        x_new = x + 0.1 * xdot
        if x_new[1] > 0.0:
            x = x_new
            xdot = xdot + 0.1 * xddot
        else:
            break
    t_f = -x[1] / xdot[1]
    return (x[0] + t_f * xdot[0]) ** 2


def miss_r(w):
    return miss(w, force_r)


def miss_f(w):
    return miss(w, force_f)


def _solve(miss, outer):
    gradient = ast_ad.grad(miss) if outer == "r" else gradient_by_forward_mode(miss)
    return lambda w: float(argmin(miss, gradient, np.array([w]))[0])


def solve_compiled(w, mode="rf"):
    """A solve with the whole nested derivative compiled by Numba: the outer gradient of the path
    (``mode[0] == "r"``: one compiled function that gives the miss and its gradient,
    ``value_and_grad(..., jit="numba")``) or its outer jvp (``"f"``: ``jvp(..., jit="numba")``),
    whose steps' forces are the inner derivatives written in the bodies, each lowered into the
    code (``grad`` for ``mode[1] == "r"``, the jvps for ``"f"``). The minimiser itself is the
    eval's Python."""
    f, gradient = one_pass(_COMPILED_BOTH[mode])
    return float(argmin(f, gradient, np.array([w]))[0])


_ONE = np.array([1.0])


def _slope_of(miss):
    def both(w):
        value, slope = ast_ad.jvp(miss, (w,), (_ONE,), jit="numba")
        return value, np.array([slope])
    return both


_COMPILED_BOTH = {
    "rr": ast_ad.value_and_grad(miss_r, jit="numba"),
    "rf": ast_ad.value_and_grad(miss_f, jit="numba"),
    "fr": _slope_of(miss_r),
    "ff": _slope_of(miss_f),
}

# ``AST_AD_GRADBENCH_JIT=numba`` runs every mode compiled
_COMPILED = ("rr", "rf", "fr", "ff") if os.environ.get("AST_AD_GRADBENCH_JIT") == "numba" else ()
FUNCTIONS = {
    mode: timed(pre=lambda raw: raw["w"], post=float)(
        (lambda w, mode=mode: solve_compiled(w, mode)) if mode in _COMPILED
        else _solve(miss_r if mode[1] == "r" else miss_f, mode[0])
    )
    for mode in ("rr", "rf", "fr", "ff")
}
