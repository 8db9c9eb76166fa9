"""Functions whose bodies call ``ast_ad.grad`` (a module of their own: autograd's copies of them see
``autograd.grad`` in its place)."""

import numpy as np

import ast_ad


def potential(x, y):
    return np.sum(np.sin(x) * y) + np.sum(x ** 3)


grad_potential = ast_ad.grad(potential)  # made once, at module level


def force_norm(x, y):
    return np.sum(grad_potential(x, y) ** 2)


def force_norm_inline(x, y):
    return np.sum(ast_ad.grad(potential)(x, y) ** 2)


def both_gradients(x, y):
    gx, gy = ast_ad.grad(potential, argnums=(0, 1))(x, y)
    return np.sum(gx * x) + gy * y


def step(w):
    """A particle-like step: move along minus the gradient, then measure the energy there."""
    z = w - 0.1 * ast_ad.grad(potential)(w, 2.0)
    return potential(z, 2.0)


def directional_energy(x, y):
    """Forward mode in the body: the derivative of the potential along the ones, scaled by the
    potential."""
    out, out_dot = ast_ad.jvp(potential, (x, y), (np.ones_like(x), None))
    return out_dot * out


def cube(a):
    return a * a * a


def cube_slope(a):
    return ast_ad.jvp(cube, (a,), (1.0,))[1]  # 3 a^2


def apply_twice(x, f):
    return f(f(x))


def halve_sin(z):
    return 0.5 * np.sin(z)


def uses_a_function_by_name(x):
    """A module function passed by name to a helper, which calls it (inlined, as a lambda would
    be)."""
    return apply_twice(x, halve_sin)


def wavy(x):
    return np.sin(x) * x * x


def scaled_slope(x):
    """A gradient in the body, of a scalar: x^3 cos x + 2 x^2 sin x (the tests check it to the
    fourth order)."""
    return ast_ad.grad(wavy)(x) * x


def scaled_slope_forward(x):
    """The same function by forward mode in the body, the tangent itself moving: wavy'(x) * x."""
    return ast_ad.jvp(wavy, (x,), (x,))[1]


def coupled(x, y):
    return np.sum(np.sin(x) * x) * y + np.sum(np.exp(x[:2] * x[1:]))


def hessian_trace(x, y):
    """A Hessian built in the body: its trace."""
    return np.trace(ast_ad.hessian(coupled)(x, y))


def weighted_jacobian(x, y):
    return np.sum(np.cos(x) * ast_ad.jacfwd(ast_ad.grad(coupled), 1)(x, y))


def cubic_sine(t):
    return np.sin(t) * t ** 3


def cubic_sine_slope(t):
    """A gradient as a module-level function, so that ``ast_ad.jvp`` can take it in a body."""
    return ast_ad.grad(cubic_sine)(t)


def cubic_sine_curvature(t):
    """Forward mode over a gradient, in a body: s''(t) (the tangent a constant)."""
    return ast_ad.jvp(cubic_sine_slope, (t,), (1.0,))[1]


def cubic_sine_curvature_scaled(t):
    """The same with the tangent ``t`` itself: s''(t) t (reverse mode takes the tangent's adjoint
    too)."""
    return ast_ad.jvp(cubic_sine_slope, (t,), (t,))[1]


def potential_slope(x):
    return ast_ad.grad(potential)(x, 2.0)


def curvature_along_x(x):
    """sum(H x), H the Hessian of the potential in x, by forward mode over its gradient in a
    body."""
    return np.sum(ast_ad.jvp(potential_slope, (x,), (x,))[1])


def wavy_slope_forward(x):
    """wavy'(x), by forward mode in the body."""
    return ast_ad.jvp(wavy, (x,), (1.0,))[1]


def wavy_curvature_forward(x):
    """wavy''(x) x: forward mode over a body that itself calls forward mode (the tangent of a
    tangent)."""
    return ast_ad.jvp(wavy_slope_forward, (x,), (x,))[1]


SCALE = 2.0  # a global a test changes between calls


def scaled_potential(x, y):
    return SCALE * np.sum(np.sin(x) * y)


def linear_potential(x, y):
    """What ``scaled_potential`` is redefined as, in a test that the code made of it follows."""
    return SCALE * np.sum(x * y)


def squared_slope(x, y):
    """Reverse mode over ``ast_ad.jvp`` of a function that reads a global (``SCALE``)."""
    return ast_ad.jvp(scaled_potential, (x, y), (np.ones_like(x), None))[1] ** 2


def squared_slope_by_name(x, y):
    """``squared_slope`` with its tangents held in a name, not written out: ``ast_ad.jvp`` stays a
    call of the primitive ``compose.JvpOf``, whose rules run ``scaled_potential``'s forward-mode
    code as a module of its own."""
    tangents = (np.ones_like(x), None)
    return ast_ad.jvp(scaled_potential, (x, y), tangents)[1] ** 2


def squared_slope_along_too_few(x, y):
    """A tangent of two entries for an argument of three: refused, as the API's ``jvp`` refuses
    it."""
    return ast_ad.jvp(scaled_potential, (x, y), (np.ones(2), None))[1] ** 2


def slope_of_a_list(xs, y):
    """``ast_ad.jvp`` of a list, its tangent a list: what the API takes, and the code lowered in
    place does not."""
    return ast_ad.jvp(scaled_potential, (xs, y), ([1.0, 1.0, 1.0], None))[1]


def slope_of_a_list_by_name(xs, y):
    tangents = ([1.0, 1.0, 1.0], None)
    return ast_ad.jvp(scaled_potential, (xs, y), tangents)[1]


def potential_through_a_helper(x, y):
    """A function that calls one of its module's: its forward-mode code is two functions."""
    return scaled_potential(x, y) * 0.5


def squared_slope_through_a_helper(x, y):
    return ast_ad.jvp(potential_through_a_helper, (x, y), (np.ones_like(x), None))[1] ** 2


def squared_force(x, y):
    """Reverse mode over ``ast_ad.grad`` of a function that reads a global (``SCALE``): its
    reverse rule a Hessian-vector product."""
    return np.sum(ast_ad.grad(scaled_potential)(x, y) ** 2)


# The classic perturbation-confusion pair (Siskind and Pearlmutter), with the inner function at
# module level and the outer variable passed in: d/dx [x * d/dy (x + y) at y = 1] = 1, and d/dx
# [x * d/dy (x * y) at y = 1] = d/dx [x * x] = 2 x. A tool that mixes up the two derivatives'
# tangents gives 2 for the first.
def plus(x, y):
    return x + y


def times(x, y):
    return x * y


def outer_plus(x):
    return x * ast_ad.grad(plus, argnums=1)(x, 1.0)


def outer_times(x):
    return x * ast_ad.grad(times, argnums=1)(x, 1.0)


def outer_plus_forward(x):
    return x * ast_ad.jvp(plus, (x, 1.0), (0.0, 1.0))[1]


def outer_times_forward(x):
    return x * ast_ad.jvp(times, (x, 1.0), (0.0, 1.0))[1]


def bowl(p, q):
    """``saddle``'s cost with a term that couples its arguments: its gradient in ``q`` moves with
    ``p`` too."""
    return (p[0] ** 2 + p[1] ** 2) - (q[0] ** 2 + q[1] ** 2) + np.sin(p[0]) * q[1] * q[0]


def bowl_slope_norm(p, q):
    """The squared gradient of ``bowl`` in ``q``, the gradient held in a name (a derivative object):
    reverse mode over it runs a Hessian-vector product of ``bowl`` in its gradient's reverse
    rule."""
    slope = ast_ad.grad(bowl, argnums=1)
    g = slope(p, q)
    return np.sum(g * g)


def bowl_slope_norm_inlined(p, q):
    """The same, the gradient called where it is written: its code lowered into this function's."""
    g = ast_ad.grad(bowl, argnums=1)(p, q)
    return np.sum(g * g)



def gradient_of_a_list(xs, y):
    """``ast_ad.grad`` of a list written in a body: what the API takes (a list of gradients), and
    the code lowered in place does not."""
    return np.sum(ast_ad.grad(scaled_potential)(xs, y))


def gradient_of_an_integer(n, y):
    return ast_ad.grad(scaled_potential)(n, y) * y


def squared_gradient_scaled(x, y):
    """The squared gradient of ``scaled_potential``, which reads the global ``SCALE``."""
    return np.sum(ast_ad.grad(scaled_potential)(x, y) ** 2)


def gradient_of_a_vector_function(x):
    """``grad`` of a function whose value is an array: refused, as the API refuses it."""
    return np.sum(ast_ad.grad(vector_valued)(x))


def vector_valued(x):
    return np.sin(x) * 2.0


def written_into(x, y):
    """The gradient written into after it is taken: it is an array of its own, as ``grad``
    returns it, so the write changes nothing else (``x``, ``y``)."""
    g = ast_ad.grad(potential)(x, y)
    g[0] = 0.5 * g[0] + y
    return np.sum(g * x) + y * x[0]


def gradient_of_a_float(x, y):
    """``grad`` in a float argument: a float, as the API gives it."""
    slope = ast_ad.grad(potential, argnums=1)(x, y)
    return slope * slope + np.sum(x) * slope


def separable(p, q):
    """``saddle``'s cost: a part in ``p`` and a part in ``q``, so that its gradient in ``q`` does
    not move with ``p``."""
    return (p[0] ** 2 + p[1] ** 2) - (q[0] ** 2 + q[1] ** 2)


def separable_slope(p, q):
    return ast_ad.grad(separable, argnums=1)(p, q)


def ascent(p, start):
    """Steps of gradient ascent in ``q``, each slope from a helper that takes a gradient written in
    it, as GradBench's ``saddle`` writes its inner solver: the helper's result does not depend on
    its argument ``p``."""
    q = start
    for _ in range(3):
        q = q + 0.25 * separable_slope(p, q)
    return separable(p, q) * p[0]


def written_through_a_dict(x0, x1):
    """An array written through a dict that holds it in a tuple (``v2["k"][1][1] = ...``): the
    gradient's backward pass calls ``replaced_vjp_container`` of the dict, a helper that steps
    through its keys, which a second derivative differentiates by its source."""
    v1 = np.ones(3) * x0
    v2 = {"k": (2.0, v1)}
    for _ in range(2):
        v2["k"][1][1] = np.tanh(np.sum(x0 + x0)) * x1[0]
    return np.sum(np.sum(v2["k"][1]) * v1)


SPREAD = np.array([0.7, -1.3, 0.4])


def slope_through_a_dict(x0, x1):
    return np.sum(ast_ad.grad(written_through_a_dict)(x0, x1) * SPREAD)
