"""Rules for numpy.linalg: matrices and stacks of matrices."""

from typing import Any

import numpy as np

from ast_ad.core.registry import (
    def_linear,
    def_reduction,
    def_sequence,
    def_view,
    def_view_inverse,
    defjvp,
    defvjp,
)
from ast_ad.runtime import (
    T,
    cholesky_jvp,
    cholesky_vjp,
    diagonal_vjp,
    eigh_jvp,
    eigh_vjp,
    matmul_vjp_a,
    matmul_vjp_b,
    matrix_power_jvp,
    matrix_power_vjp,
    multi_dot_jvp,
    multi_dot_vjp,
    norm_vjp,
    outer_vjp_a,
    outer_vjp_b,
    pinv_jvp,
    pinv_vjp,
    qr_jvp,
    qr_vjp,
    slogdet_jvp,
    solve_vjp_a,
    solve_vjp_b,
    svd_jvp,
    svd_vjp,
    svdvals_jvp,
    vecdot_vjp,
)

defvjp(np.linalg.inv,          lambda g, ans, a: -T(ans) @ g @ T(ans))
defvjp(np.linalg.det, lambda g, ans, a: np.expand_dims(g * ans, (-2, -1)) * T(np.linalg.inv(a)))
defvjp(np.linalg.slogdet, lambda g, ans, a: np.expand_dims(g[1], (-2, -1)) * T(np.linalg.inv(a)))
defvjp(np.linalg.solve,        lambda g, ans, a, b: solve_vjp_a(g, ans, a, b),
                               lambda g, ans, a, b: solve_vjp_b(g, ans, a, b))
defvjp(np.linalg.cholesky,     lambda g, ans, a, *args, **kwargs: cholesky_vjp(g, ans))
defvjp(np.linalg.eigh,         lambda g, ans, a, UPLO="L": eigh_vjp(g, ans, a))
defvjp(
    np.linalg.svd,
    lambda g, ans, a, full_matrices=True, compute_uv=True, *args, **kwargs: svd_vjp(
        g, ans, a, full_matrices, compute_uv
    ),
)
defvjp(np.linalg.qr,           lambda g, ans, a, mode="reduced": qr_vjp(g, ans, a))
defvjp(np.linalg.pinv,         lambda g, ans, a, *args, **kwargs: pinv_vjp(g, ans, a))
defvjp(np.linalg.matrix_power, lambda g, ans, a, n: matrix_power_vjp(g, a, n))
defvjp(np.linalg.norm,         lambda g, ans, x, ord=None, axis=None, keepdims=False:
                               norm_vjp(g, ans, x, ord, axis, keepdims))

# ---- the array-API names numpy 2 added to numpy.linalg -------------------------------------------
defvjp(
    np.linalg.outer,
    lambda g, ans, a, b: outer_vjp_a(g, a, b),
    lambda g, ans, a, b: outer_vjp_b(g, a, b),
)
defvjp(np.linalg.trace, lambda g, ans, x, offset=0, dtype=None: diagonal_vjp(g, x, offset, -2, -1))
defvjp(np.linalg.diagonal,  lambda g, ans, x, offset=0: diagonal_vjp(g, x, offset, -2, -1))
defvjp(
    np.linalg.matmul,
    lambda g, ans, a, b: matmul_vjp_a(g, a, b),
    lambda g, ans, a, b: matmul_vjp_b(g, a, b),
)
defvjp(np.linalg.matrix_transpose, lambda g, ans, x: T(g))
# views of their argument (a write through the transpose reaches it; the diagonal is read-only)
def_view(np.linalg.matrix_transpose, np.linalg.diagonal)
def_view_inverse(np.linalg.matrix_transpose, np.linalg.matrix_transpose)
defvjp(np.linalg.vecdot,    lambda g, ans, a, b, axis=-1: vecdot_vjp(g, b, axis),
                            lambda g, ans, a, b, axis=-1: vecdot_vjp(g, a, axis))
defvjp(np.linalg.svdvals,   lambda g, ans, a: svd_vjp(g, ans, a, False, False))
defvjp(np.linalg.eigvalsh,  lambda g, ans, a, UPLO="L": eigh_vjp((g, None), np.linalg.eigh(a), a))
defvjp(np.linalg.multi_dot, lambda g, ans, arrays, *args, **kwargs: multi_dot_vjp(g, arrays))
defvjp(
    np.linalg.cross,
    lambda g, ans, a, b, axis=-1: np.cross(b, g),
    lambda g, ans, a, b, axis=-1: np.cross(g, a),
)
defvjp(
    np.linalg.vector_norm,
    lambda g, ans, x, axis=None, keepdims=False, ord=2: norm_vjp(
        g, ans, x if axis is not None or np.ndim(x) == 1 else np.ravel(x), ord, axis, keepdims
    ).reshape(np.shape(x)),
)
defvjp(
    np.linalg.matrix_norm,
    lambda g, ans, x, keepdims=False, ord="fro": norm_vjp(g, ans, x, ord, None, keepdims),
)

def_sequence(np.linalg.eigh, np.linalg.svd, np.linalg.qr, np.linalg.slogdet)  # they return tuples

# ---- forward mode --------------------------------------------------------------------------------
defjvp(np.linalg.inv,          lambda u, ans, a: -(ans @ u @ ans))
defjvp(np.linalg.slogdet,      lambda u, ans, a: slogdet_jvp(u, a))
defjvp(np.linalg.solve,        lambda u, ans, a, b: -np.linalg.solve(a, u @ ans))
defjvp(np.linalg.cholesky,     lambda u, ans, a, *args, **kwargs: cholesky_jvp(u, ans))
defjvp(np.linalg.eigh,         lambda u, ans, a, UPLO="L": eigh_jvp(u, ans))
defjvp(np.linalg.eigvalsh,     lambda u, ans, a, UPLO="L": eigh_jvp(u, np.linalg.eigh(a))[0])
defjvp(np.linalg.svdvals,      lambda u, ans, a: svdvals_jvp(u, a))
defjvp(
    np.linalg.svd,
    lambda u, ans, a, full_matrices=True, compute_uv=True, *args, **kwargs: svd_jvp(
        u, ans, a, full_matrices, compute_uv
    ),
)
defjvp(np.linalg.qr,           lambda u, ans, a, mode="reduced": qr_jvp(u, ans))
defjvp(np.linalg.pinv,         lambda u, ans, a, *args, **kwargs: pinv_jvp(u, ans, a))
defjvp(np.linalg.matrix_power, lambda u, ans, a, n: matrix_power_jvp(u, a, n))
defjvp(np.linalg.multi_dot,    lambda u, ans, arrays, *args, **kwargs: multi_dot_jvp(u, arrays))
def_linear(np.linalg.solve, 1)
_fn: Any  # each loop below binds a numpy function
for _fn in (np.linalg.trace, np.linalg.diagonal, np.linalg.matrix_transpose):
    def_linear(_fn, 0)
for _fn in (np.linalg.outer, np.linalg.matmul, np.linalg.vecdot, np.linalg.cross):
    def_linear(_fn, 0, 1)
def_reduction(np.linalg.norm)
def_reduction(np.linalg.vector_norm)
def_reduction(np.linalg.matrix_norm, axes=(-2, -1))
def_reduction(np.linalg.det, axes=(-2, -1))
