"""Rules for scipy.integrate's rules of samples, ``trapezoid`` and ``simpson``: linear in the
samples ``y``, their adjoints the samples' weights (the sample points ``x`` fixed); registered only
where scipy is installed, when code first names scipy. (``quad``, whose derivative needs the
integrand's, is ``api.solvers``'.)"""

from typing import Any

try:
    import scipy.integrate as si
except ImportError:  # pragma: no cover - scipy is optional
    si = None

import numpy as np

from ast_ad.core.registry import def_helpers, def_linear, defvjp
from ast_ad.runtime import trapezoid_vjp


def simpson_vjp(g: Any, y: Any, x: Any = None, dx: Any = 1.0, axis: Any = -1) -> Any:
    """Adjoint of ``y`` in ``scipy.integrate.simpson(y, x=x, dx=dx, axis=axis)``: each sample's
    weight, which simpson gives for the samples of a unit vector (one call, on the identity), times
    ``g``. Sample points ``x`` of more than one axis are refused."""
    if np.ndim(x) > 1:
        raise NotImplementedError(
            "the gradient of scipy.integrate.simpson at sample points x of more than one axis: "
            "pass x as one axis of points (or dx=)"
        )
    n = np.shape(y)[axis]
    weights = si.simpson(np.eye(n), x=x, dx=dx, axis=-1)
    shape = [1] * np.ndim(y)
    shape[axis] = n
    return np.expand_dims(g, axis) * np.reshape(weights, shape)


if si is not None:
    def_helpers(simpson_vjp)
    defvjp(si.simpson, lambda g, ans, y, x=None, dx=1.0, axis=-1: simpson_vjp(g, y, x, dx, axis))
    defvjp(si.trapezoid,
           lambda g, ans, y, x=None, dx=1.0, axis=-1: trapezoid_vjp(g, y, dx, axis, x))
    for _rule in (si.simpson, si.trapezoid):
        def_linear(_rule, 0)
    def_linear(simpson_vjp, 0)
