"""Rules for ast_ad's own helpers: the functions generated code calls (``unbroadcast``, ``matmul_vjp_a``, ...).

With these, generated code is in the language ast_ad differentiates, so a transformation can be applied
to another's output: ``jvp`` of a gradient is a Hessian-vector product. Most helpers are linear in the
adjoint they carry and read the other arguments only for shapes or for piecewise-constant choices
(which entries tied in a max), so their forward rule is the helper itself or zero.

Helpers with no forward rule yet, so that a second derivative through them is refused at the user's line:
``prod_vjp``, ``std_vjp``, ``norm_vjp``, ``cumprod_vjp``, ``solve_vjp_a``/``solve_vjp_b``, ``cholesky_vjp``,
``eigh_vjp``, ``svd_vjp``, ``qr_vjp``, ``pinv_vjp``, ``matrix_power_vjp``, ``multi_dot_vjp``, ``average_vjp``
and ``average_weights_vjp`` (in the weights), ``nanmean_vjp``, ``einsum_vjp``, ``kron_vjp``, ``convolve_vjp``,
``correlate_vjp``, ``polyval_vjp_p``, ``sinc_slope``.
"""

import numpy as np

from ast_ad import runtime as rt
from ast_ad.registry import def_linear, def_nondiff, defjvp, zero

# ---- helpers linear in their first argument (the adjoint), the others read for shapes or choices -----------
# each entry: the helper, and how many arguments after the first have zero derivative
for _fn, _others in ((rt.unbroadcast, 1), (rt.expand_reduced, 1), (rt.getitem_vjp, 1), (rt.assign_item_vjp_x, 1),
                     (rt.assign_item_vjp_value, 2), (rt.extremum_vjp, 2), (rt.cast_vjp, 2), (rt.unstack, 1),
                     (rt.clip_lo_vjp, 3), (rt.clip_hi_vjp, 3), (rt.column_stack_vjp, 1), (rt.concat_vjp_a, 2),
                     (rt.concat_vjp_b, 2), (rt.concatenate_vjp, 1), (rt.cumsum_vjp, 1), (rt.diag_vjp, 1),
                     (rt.diagonal_vjp, 1), (rt.diff_vjp, 1), (rt.dstack_vjp, 1), (rt.field_vjp, 1),
                     (rt.hstack_vjp, 1), (rt.vstack_vjp, 1), (rt.list_item_vjp, 1), (rt.pad_vjp, 1),
                     (rt.repeat_seq_vjp, 1), (rt.repeat_vjp, 1), (rt.rollaxis_vjp, 1), (rt.select_default_vjp, 1),
                     (rt.select_vjp, 1), (rt.sort_vjp, 1), (rt.sorted_by_vjp, 2), (rt.split_vjp, 2),
                     (rt.take_vjp, 1), (rt.tile_vjp, 1), (rt.trapezoid_vjp, 1), (rt.fit, 1), (rt.part, 0)):
    def_linear(_fn, 0)
    defjvp(_fn, None, *[zero] * _others)

# ---- products: linear in the adjoint and in the other operand ---------------------------------------------
for _fn, _shape_only in ((rt.matmul_vjp_a, 1), (rt.matmul_vjp_b, 2), (rt.dot_vjp_a, 1), (rt.dot_vjp_b, 2),
                         (rt.inner_vjp, 1), (rt.inner_vjp_b, 2), (rt.outer_vjp_a, 1), (rt.outer_vjp_b, 2)):
    def_linear(_fn, 0, 3 - _shape_only)
    defjvp(_fn, *[zero if k == _shape_only else None for k in range(3)])
def_linear(rt.vecdot_vjp, 0, 1)
def_linear(rt.linspace_vjp, 1)
def_linear(rt.var_vjp, 0, 2)  # 2 (x - mean(x)) g / (n - ddof): linear in x too
defjvp(rt.var_vjp, None, zero)
defjvp(rt.chosen_vjp, None, None, zero, zero)
def_linear(rt.chosen_vjp, 1)
defjvp(rt.summed_matmul_vjp_a, lambda u, ans, terms, a: rt.summed_matmul_vjp_a(rt.product_terms_jvp(u, terms), a), zero)
defjvp(rt.summed_matmul_vjp_b, lambda u, ans, terms, b: rt.summed_matmul_vjp_b(rt.product_terms_jvp(u, terms), b), zero)
defjvp(rt.summed_dot_vjp_a,    lambda u, ans, terms, a: rt.summed_dot_vjp_a(rt.product_terms_jvp(u, terms), a), zero)
defjvp(rt.summed_dot_vjp_b,    lambda u, ans, terms, b: rt.summed_dot_vjp_b(rt.product_terms_jvp(u, terms), b), zero)
def_nondiff(rt.product_terms_jvp)  # reached only through the rules above: its result is already a tangent

# ---- accumulation -----------------------------------------------------------------------------------------
defjvp(rt.add_adjoints,  lambda u, ans, a, b: u, lambda u, ans, a, b: u)
defjvp(rt.dense_adjoint, lambda u, ans, g, x: rt.dense_adjoint(u, x), zero)

# ---- pieces of rules ----------------------------------------------------------------------------------------
defjvp(rt.pow_minus_one, lambda u, ans, x, y: u * (y - 1) * rt.pow_minus_one(x, y - 1),
                         lambda u, ans, x, y: u * ans * rt.safe_log(x))
defjvp(rt.safe_log,      lambda u, ans, x: np.where(x == 0, 0.0, u / np.where(x == 0, 1.0, x)))

def_nondiff(rt.balanced_eq, rt.clip_mask, rt.reduced_count, rt.zeros_like, rt.tensordot_spec)
