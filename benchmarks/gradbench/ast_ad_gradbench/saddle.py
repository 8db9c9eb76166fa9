"""GradBench's ``saddle`` eval: min over p of max over q of (p1^2 + p2^2) - (q1^2 + q2^2), its f(x1,
y1, x2, y2) with p = (x1, y1) and q = (x2, y2), both by gradient descent from the same start.

The outer minimiser differentiates the inner maximiser's loop: nested derivatives, in four
combinations (``rf``: reverse mode outside, forward mode inside).
"""

import os

import numpy as np

import ast_ad

from .solver import argmin, one_pass
from .wrap import timed

E0, E1 = np.array([1.0, 0.0]), np.array([0.0, 1.0])


def cost(p, q):
    return (p[0] ** 2 + p[1] ** 2) - (q[0] ** 2 + q[1] ** 2)


def slope_r(x, y):
    """The gradient of ``cost(x, y)`` in ``y``, by reverse mode."""
    return ast_ad.grad(cost, argnums=1)(x, y)


def slope_f(x, y):
    """The same gradient by forward mode: one ``jvp`` per coordinate."""
    return np.array(
        [ast_ad.jvp(cost, (x, y), (None, E0))[1], ast_ad.jvp(cost, (x, y), (None, E1))[1]]
    )


def best_reply(x, start, slope):
    """max over y of cost(x, y): gradient ascent from ``start`` (descent on minus the cost), as the
    eval's minimiser does it, with the gradients ``slope`` gives."""
    y = start
    fy = -cost(x, y)
    gy = -slope(x, y)
    eta = 1e-5
    i = 0
    while np.sqrt(np.sum(gy * gy)) > 1e-5:
        if i == 10:
            eta = 2.0 * eta
            i = 0
            continue
        y_new = y - eta * gy
        if np.sqrt(np.sum((y - y_new) ** 2)) <= 1e-5:
            break
        f_new = -cost(x, y_new)
        if f_new < fy:
            y = y_new
            fy = f_new
            gy = -slope(x, y)
            i = i + 1
        else:
            eta = eta / 2.0
            i = 0
    return cost(x, y)


def best_reply_r(x, start):
    return best_reply(x, start, slope_r)


def best_reply_f(x, start):
    return best_reply(x, start, slope_f)


def _gradient_in(fun, k, mode):
    """The gradient of ``fun`` in its argument ``k``: ``grad`` (mode ``r``), or by forward mode,
    both coordinates' directions carried by one pass (a batched ``jvp``)."""
    if mode == "r":
        return ast_ad.grad(fun, argnums=k)
    directions = np.stack([E0, E1])

    def by_forward_mode(*args):
        moves = tuple(directions if j == k else None for j in range(len(args)))
        return ast_ad.jvp(fun, args, moves, batched=True)[1]
    return by_forward_mode


def _solve(mode):
    reply = best_reply_r if mode[1] == "r" else best_reply_f
    outer = _gradient_in(reply, 0, mode[0])  # differentiates the inner ascent
    final = _gradient_in(cost, 1, mode[0])

    def saddle(start):
        x = argmin(lambda p: reply(p, start), lambda p: outer(p, start), start)
        y = argmin(lambda q: -cost(x, q), lambda q: -final(x, q), start)
        return np.concatenate([x, y])
    return saddle


def _by_compiled_jvps(fun, k):
    """``fun``'s value and its gradient in argument ``k``, one compiled jvp per coordinate."""
    def both(*args):
        moves = [tuple(e if j == k else None for j in range(len(args))) for e in (E0, E1)]
        value, first = ast_ad.jvp(fun, args, moves[0], jit="numba")
        return value, np.array([first, ast_ad.jvp(fun, args, moves[1], jit="numba")[1]])
    return both


def _compiled(mode):
    """The reply and its gradient in ``x``, and the cost and its gradient in ``y``, compiled for
    ``mode``: by reverse mode outside (``mode[0] == "r"``, one compiled function each) or a
    compiled jvp per coordinate (``"f"``), the ascent's slopes by ``grad`` or the jvps inside."""
    reply = best_reply_r if mode[1] == "r" else best_reply_f
    if mode[0] == "r":
        return (ast_ad.value_and_grad(reply, argnums=0, jit="numba"),
                ast_ad.value_and_grad(cost, argnums=1, jit="numba"))
    return _by_compiled_jvps(reply, 0), _by_compiled_jvps(cost, 1)


_COMPILED_BOTH = {mode: _compiled(mode) for mode in ("rr", "rf", "fr", "ff")}


def solve_compiled(start, mode="rf"):
    """A solve with the whole nested derivative compiled by Numba: the outer derivative through
    the inner ascent, whose slopes are the inner derivatives lowered into it (``grad`` or the
    jvps), by reverse mode (one compiled function that gives the reply and its gradient) or by a
    compiled jvp per coordinate, and the last ascent's the same way."""
    reply, slope = _COMPILED_BOTH[mode]
    f, gradient = one_pass(lambda p: reply(p, start))
    x = argmin(f, gradient, start)

    def down(q):
        value, grad = slope(x, q)
        return -value, -grad
    y = argmin(*one_pass(down), start)
    return np.concatenate([x, y])


# ``AST_AD_GRADBENCH_JIT=numba`` runs every mode compiled
_COMPILED = ("rr", "rf", "fr", "ff") if os.environ.get("AST_AD_GRADBENCH_JIT") == "numba" else ()
FUNCTIONS = {
    mode: timed(pre=lambda raw: np.array(raw["start"], dtype=float), post=lambda v: v.tolist())(
        (lambda start, mode=mode: solve_compiled(start, mode)) if mode in _COMPILED
        else _solve(mode)
    )
    for mode in ("rr", "rf", "fr", "ff")
}
