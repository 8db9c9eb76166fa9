"""Rules for numpy.linalg: matrices and stacks of matrices."""

import numpy as np

from ast_ad.registry import defvjp
from ast_ad.runtime import (
    T,
    cholesky_vjp,
    eigh_vjp,
    matrix_power_vjp,
    norm_vjp,
    pinv_vjp,
    qr_vjp,
    solve_vjp_a,
    solve_vjp_b,
    svd_vjp,
)

defvjp(np.linalg.inv,          lambda g, ans, a: -T(ans) @ g @ T(ans))
defvjp(np.linalg.det,          lambda g, ans, a: np.asarray(g * ans)[..., None, None] * T(np.linalg.inv(a)))
defvjp(np.linalg.slogdet,      lambda g, ans, a: np.asarray(g[1])[..., None, None] * T(np.linalg.inv(a)))
defvjp(np.linalg.solve,        lambda g, ans, a, b: solve_vjp_a(g, ans, a, b),
                               lambda g, ans, a, b: solve_vjp_b(g, ans, a, b))
defvjp(np.linalg.cholesky,     lambda g, ans, a, *args, **kwargs: cholesky_vjp(g, ans))
defvjp(np.linalg.eigh,         lambda g, ans, a, UPLO="L": eigh_vjp(g, ans, a))
defvjp(np.linalg.svd,          lambda g, ans, a, full_matrices=True, compute_uv=True, *args, **kwargs:
                               svd_vjp(g, ans, a, full_matrices, compute_uv))
defvjp(np.linalg.qr,           lambda g, ans, a, mode="reduced": qr_vjp(g, ans, a))
defvjp(np.linalg.pinv,         lambda g, ans, a, *args, **kwargs: pinv_vjp(g, ans, a))
defvjp(np.linalg.matrix_power, lambda g, ans, a, n: matrix_power_vjp(g, a, n))
defvjp(np.linalg.norm,         lambda g, ans, x, ord=None, axis=None, keepdims=False:
                               norm_vjp(g, ans, x, ord, axis, keepdims))
