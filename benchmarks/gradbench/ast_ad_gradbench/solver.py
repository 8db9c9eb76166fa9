"""The minimiser that ``particle`` and ``saddle`` use, as GradBench's evals specify it: gradient
descent whose step grows after ten good steps and halves after a bad one, stopping on a small
gradient or step.

``gradient`` is a function of ``x`` (ast_ad's ``grad``, or one ``jvp`` per direction): the solver
itself is not differentiated. The inner solvers of ``saddle`` are differentiated, and are written
out in its module as plain loops.
"""

import numpy as np


def argmin(f, gradient, x):
    x = np.asarray(x, dtype=float)
    fx, gx = f(x), gradient(x)
    eta, i = 1e-5, 0
    while True:
        if np.sqrt(np.sum(gx * gx)) <= 1e-5:
            return x
        if i == 10:
            eta, i = 2.0 * eta, 0
            continue
        x_new = x - eta * gx
        if np.sqrt(np.sum((x - x_new) ** 2)) <= 1e-5:
            return x
        f_new = f(x_new)
        if f_new < fx:
            x, fx, gx, i = x_new, f_new, gradient(x_new), i + 1
        else:
            eta, i = eta / 2.0, 0


def gradient_by_forward_mode(fun):
    """The gradient of ``fun`` at a vector ``x``, one ``jvp`` per unit direction."""
    import ast_ad

    def gradient(x):
        return np.array([ast_ad.jvp(fun, (x,), (e,))[1] for e in np.eye(x.shape[0])])
    return gradient


def one_pass(both):
    """``f`` and ``gradient`` for ``argmin`` from one function ``both(x) -> (f(x), gradient)``
    (``ast_ad.value_and_grad``): the solver asks for the gradient only at a point whose value it
    asked for just before, so that call is the one ``both`` made (a compiled gradient computes the
    value on its way: ``jit="numba"``)."""
    last = []

    def f(x):
        value, gradient = both(x)
        last[:] = [x.copy(), gradient]
        return value

    def gradient(x):
        if last and np.array_equal(last[0], x):
            return last[1]
        return both(x)[1]
    return f, gradient
