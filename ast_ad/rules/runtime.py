"""Rules for ast_ad's own helpers: the functions generated code calls (``unbroadcast``,
``matmul_vjp_a``, ...).

With these, generated code is in the language ast_ad differentiates, so a transformation can be
applied to another's output: ``jvp`` of a gradient is a Hessian-vector product. Most helpers are
linear in the adjoint they carry and read the other arguments only for shapes or for
piecewise-constant choices (which entries tied in a max), so their forward rule is the helper itself
or zero.

The helpers of reductions, statistics, products and factorizations are linear in the adjoint too;
their forward rules in the other arguments are the ``*_jvp`` helpers of
``ast_ad/runtime/tangents.py``.
"""

from typing import Any

import numpy as np

from ast_ad import runtime as rt
from ast_ad.core.registry import (
    def_check,
    def_container_test,
    def_effect,
    def_floats_pass,
    def_fresh,
    def_in_place,
    def_linear,
    def_meta_read,
    def_new_list,
    def_nondiff,
    def_numbers_pass,
    def_read_as,
    def_same_kind,
    def_scalar_result,
    def_sequence,
    def_shape_of,
    def_shape_read,
    def_summed,
    defjvp,
    defvjp,
    lookup,
    zero,
)
from ast_ad.runtime import revolve

# ---- helpers linear in their first argument (the adjoint), the others read only for shapes, indice
_LINEAR_IN_THE_ADJOINT = (
    rt.unbroadcast,
    rt.unbroadcast_to,
    rt.expand_reduced,
    rt.getitem_vjp,
    rt.assign_item_vjp_x,
    rt.assign_item_vjp_value,
    rt.extremum_vjp,
    rt.cast_vjp,
    rt.unstack,
    rt.clip_lo_vjp,
    rt.clip_hi_vjp,
    rt.column_stack_vjp,
    rt.concat_vjp_a,
    rt.concat_vjp_b,
    rt.concatenate_vjp,
    rt.cumsum_vjp,
    rt.diag_vjp,
    rt.diagonal_vjp,
    rt.diff_vjp,
    rt.dstack_vjp,
    rt.field_vjp,
    rt.hstack_vjp,
    rt.vstack_vjp,
    rt.list_item_vjp,
    rt.pad_vjp,
    rt.repeat_seq_vjp,
    rt.repeat_vjp,
    rt.roll_vjp,
    rt.rollaxis_vjp,
    rt.select_default_vjp,
    rt.select_vjp,
    rt.sort_vjp,
    rt.sorted_by_vjp,
    rt.split_vjp,
    rt.take_vjp,
    rt.tile_vjp,
    rt.fit,
    rt.part,
    rt.part_vjp,
    rt.polyder_vjp,
    rt.fit_adjoint,
)
for _fn in _LINEAR_IN_THE_ADJOINT:
    def_linear(_fn, 0)
    defjvp(_fn, None, *[zero] * 5)

# an entry's adjoint scattered into zeros of its array's shape: that array's axes
def_shape_of(rt.getitem_vjp, 1, positional=3)
# numbers given, numbers back: the first argument (no shape to fit a number to)
def_numbers_pass(rt.unbroadcast, rt.fit, rt.fit_adjoint, rt.written_tangent)

# ---- products: linear in the adjoint and in the other operand ------------------------------------
for _fn, _shape_only in (
    (rt.matmul_vjp_a, 1),
    (rt.matmul_vjp_b, 2),
    (rt.dot_vjp_a, 1),
    (rt.dot_vjp_b, 2),
    (rt.inner_vjp, 1),
    (rt.inner_vjp_b, 2),
    (rt.outer_vjp_a, 1),
    (rt.outer_vjp_b, 2),
):
    def_linear(_fn, 0, 3 - _shape_only)
    defjvp(_fn, *[zero if k == _shape_only else None for k in range(3)])
def_linear(rt.vecdot_vjp, 0, 1)
# a number's adjoint from its product with an array, ``np.sum(g * y)``: linear in each
defvjp(rt.summed_product, lambda g, ans, a, b: rt.unbroadcast(g * b, a),
                          lambda g, ans, a, b: rt.unbroadcast(g * a, b))
def_linear(rt.summed_product, 0, 1)
def_scalar_result(rt.summed_product)  # a number (``np.vdot``, or the sum of all products)
def_linear(rt.trapezoid_vjp, 0, 2)  # the weights are dx/2, dx, ..., dx/2: linear in dx too
defjvp(rt.trapezoid_vjp, None, zero, None, zero, None)  # (the sample points: fixed)
def_linear(rt.linspace_vjp, 1)
def_linear(rt.var_vjp, 0, 2)  # 2 (x - mean(x)) g / (n - ddof): linear in x too
defjvp(rt.var_vjp, None, zero)
defjvp(rt.chosen_vjp, None, None, zero, zero)
def_linear(rt.chosen_vjp, 1)
# min's and max's forward rules: linear in the tangent, and
defjvp(rt.chosen_jvp, None, None, zero, zero)
def_linear(rt.chosen_jvp, 1)                     # which argument is chosen does not move
defjvp(rt.cast_jvp, None, zero)  # a cast's tangent is the tangent cast: linear in it
def_linear(rt.cast_jvp, 0)
# a value's tangent written into an array: itself, or zeros where the array holds integers
defjvp(rt.written_tangent, None, zero)
def_linear(rt.written_tangent, 0)
def_floats_pass(rt.written_tangent, 1)
# a tuple's missing parts as zeros: linear in the parts, ``like`` gives shapes
defjvp(rt.filled, None, zero)
def_linear(rt.filled, 0)
defjvp(rt.spread, None, zero)  # sum's adjoint, one per term: linear in it, the terms give shapes
def_linear(rt.spread, 0)


def _summed_product_jvp(summed: Any) -> Any:
    """The tangent rule of ``summed``, one of the products summed over a loop's steps: linear in the
    terms, it is ``summed`` of their tangents."""
    return lambda u, ans, terms, other: summed(rt.product_terms_jvp(u, terms), other)


def _summed_steps_jvps(summed: Any) -> tuple[Any, Any, Any]:
    """The tangent rules of ``summed``, a sum over a loop's steps from the stacked ``g`` and the
    other operands' list: bilinear in the two, and blind to the fixed operand's values."""
    return (
        lambda u, ans, gs, others, fixed: summed(u, others, fixed),
        lambda u, ans, gs, others, fixed: summed(gs, u, fixed),
        zero,
    )


defjvp(
    rt.summed_getitem_vjp,
    lambda u, ans, terms, x: rt.summed_getitem_vjp(rt.index_terms_jvp(u, terms), x),
    zero,
)
# the tangent terms are themselves differentiated at third order: each (g_dot, b) and (g, b_dot)
# pair moves with the tangent in one part and the terms in the other (not the whole list: the lists
# add pair by pair)
defjvp(rt.product_terms_jvp,
       lambda v, ans, u, terms: rt.product_terms_jvp(v, rt.zero_tangent(terms)),
       lambda v, ans, u, terms: rt.product_terms_jvp(rt.zero_tangent(u), v))
defjvp(rt.index_terms_jvp, None, zero)  # the indices come from the terms: an index does not move
def_linear(rt.index_terms_jvp, 0)
def_sequence(rt.product_terms_jvp, rt.index_terms_jvp)
# a loop's contributions to an operand it keeps fixed, summed once after it
# (``ast_ad.optimize.batching``): from the steps' pairs, and from the steps' ``g`` stacked once and
# the other operands' list; tangents linear in the pairs (bilinear in the two lists), blind to the
# fixed operand's values; reverse mode over them reads their sums step by step
for _vjp, _fixed, _pairs, _columns in (
    (rt.matmul_vjp_a, 1, rt.summed_matmul_vjp_a, rt.summed_matmul_vjp_a_steps),
    (rt.matmul_vjp_b, 2, rt.summed_matmul_vjp_b, rt.summed_matmul_vjp_b_steps),
    (rt.dot_vjp_a, 1, rt.summed_dot_vjp_a, rt.summed_dot_vjp_a_steps),
    (rt.dot_vjp_b, 2, rt.summed_dot_vjp_b, rt.summed_dot_vjp_b_steps),
):
    def_summed(_vjp, _pairs, _fixed, steps=_columns)
    defjvp(_pairs, _summed_product_jvp(_pairs), zero)
    defjvp(_columns, *_summed_steps_jvps(_columns))
    def_read_as(_pairs, rt.summed_by_steps(_vjp, _fixed == 1))
    def_read_as(_columns, rt.summed_steps_by_steps(_vjp, _fixed == 1))
# x_bar = x_bar + getitem_vjp(g, x, i): terms (g, i)
def_summed(rt.getitem_vjp, rt.summed_getitem_vjp, 1)
def_read_as(rt.summed_getitem_vjp, rt.summed_getitem_vjp_by_steps)
def_read_as(rt.stacked_steps, rt.stacked_steps_by_steps)
defjvp(rt.stacked_steps, lambda u, ans, values: rt.stacked_steps(u))
def_linear(rt.stacked_steps, 0)
# ``np.concatenate``'s adjoint cut into its arrays' pieces, and back: each the other's transpose
# (linear in the adjoint; the arrays read for their shapes alone), so that reverse mode over code
# that joins arrays follows rules, not the helpers' sources
defvjp(rt.concatenate_vjp,
       lambda parts, ans, g, arrays, axis=0: rt.joined_adjoints(parts, arrays, axis), zero, zero)
defvjp(rt.joined_adjoints,
       lambda g, ans, parts, arrays, axis=0: rt.concatenate_vjp(g, arrays, axis), zero, zero)
def_linear(rt.joined_adjoints, 0)
defjvp(rt.joined_adjoints, None, zero, zero)
def_meta_read(rt.joined_adjoints, 1)
# a loop's reads of an array nothing writes, taken at once after it (``optimize.batching``)
def_read_as(rt.rows_of, rt.rows_of_by_steps)
defjvp(rt.rows_of, lambda u, ans, x, order: rt.rows_of(u, order), None)
def_linear(rt.rows_of, 0)
def_nondiff(revolve.revolve)  # a checkpointed loop's schedule: indices, no gradient

# ---- linear algebra and statistics ---------------------------------------------------------------
# solve_vjp_b(g, ans, a, b) = solve(a^T, g); solve_vjp_a = -outer(that, ans): linear in g and in ans
def_linear(rt.solve_vjp_b, 0)
defjvp(
    rt.solve_vjp_b,
    None,
    zero,
    lambda u, ans2, g, ans, a, b: -np.linalg.solve(rt.T(a), rt.T(u) @ ans2),
    zero,
)
def_linear(rt.solve_vjp_a, 0, 1)
defjvp(
    rt.solve_vjp_a,
    None,
    None,
    lambda u, ans2, g, ans, a, b: rt.solve_vjp_a(
        -(rt.T(u) @ rt.solve_vjp_b(g, ans, a, b)), ans, a, b
    ),
    zero,
)
# the variance's adjoint (linear in g and in x) over the deviation ``ans``
def_linear(rt.std_vjp, 0, 2)
defjvp(rt.std_vjp, None, lambda u, ans2, g, ans, x, axis=None, ddof=0, keepdims=False:
       rt.std_vjp_jvp_ans(u, g, ans, x, axis, ddof, keepdims))

def_linear(rt.norm_vjp, 0)  # the 2-norm's adjoint g x / |x|; other orders are in norm_vjp_jvp
defjvp(
    rt.norm_vjp,
    None,
    lambda u, ans2, g, ans, x, ord=None, axis=None, keepdims=False: rt.norm_vjp_jvp(
        1, u, g, ans, x, ord, axis, keepdims
    ),
    lambda u, ans2, g, ans, x, ord=None, axis=None, keepdims=False: rt.norm_vjp_jvp(
        2, u, g, ans, x, ord, axis, keepdims
    ),
)

# ---- accumulation --------------------------------------------------------------------------------
# reverse rules too, so that the tracer's backward pass can itself be traced (reverse over reverse)
defvjp(rt.unbroadcast,   lambda g, ans, d, x: rt.fit_adjoint(g, d), zero)
defvjp(rt.unbroadcast_to, lambda g, ans, d, shape: rt.fit_adjoint(g, d), zero)
# its own transpose, the roles swapped
defvjp(rt.fit_adjoint,   lambda g, ans, d, like: rt.fit_adjoint(g, d), zero)
def_shape_read(rt.unbroadcast, 1, rt.unbroadcast_to)  # reverse mode may keep a shape for it
# of the array (or arrays) they scatter into, spread over or cut to, these read only its shape,
# dtype and type: a helper's backward pass may keep a stand-in of it (``saving.meta_only``)
def_meta_read(rt.unbroadcast, 1)
def_meta_read(rt.expand_reduced, 1)
def_meta_read(rt.getitem_vjp, 1)
def_meta_read(rt.concatenate_vjp, 1)
def_meta_read(rt.stand_in, 0)  # (what it keeps is read for no more)
def_fresh(rt.owned_adjoint, array_at=1)  # (an array of its own for an array x; g for a number)
def_meta_read(rt.owned_adjoint, 1)  # (zeros of its shape, dtype and type, plus the adjoint)
def_meta_read(rt.zero_tangent, 0)  # (zeros of its shape and kind: an item written changes neither)
# a stand-in is read for its shape and dtype only: it carries no derivative
def_nondiff(rt.stand_in)
defvjp(rt.add_adjoints,  lambda g, ans, a, b: g, lambda g, ans, a, b: g)
defvjp(
    rt.unpopped,
    lambda g, ans, xs_bar, entry, xs: list(g[:-1]),
    lambda g, ans, xs_bar, entry, xs: g[-1],
    zero,
)
# the list's
defjvp(rt.unpopped, lambda u, ans, xs_bar, entry, xs: rt.unpopped(u, rt.zero_tangent(entry), xs),
       # two parts; xs gives the length
       lambda u, ans, xs_bar, entry, xs: rt.unpopped(None, u, xs), zero)
def_sequence(rt.unpopped)
defvjp(rt.fit,           lambda g, ans, d, like: rt.unbroadcast(g, d), zero)
# (``a + b`` broadcasts: a leaf of one may be smaller than the sum's, and its tangent is the sum's
# shape)
defjvp(rt.add_adjoints,  lambda u, ans, a, b: rt.fit(u, ans), lambda u, ans, a, b: rt.fit(u, ans))
defjvp(rt.dense_adjoint, lambda u, ans, g, x: rt.dense_adjoint(u, x), zero)

# ---- writing in place (reverse mode's item writes in loops, ``analysis.in_place_writes``) --------
defvjp(rt.owned_adjoint, lambda g, ans, a, x: rt.unbroadcast(g, a), zero)
defjvp(rt.owned_adjoint, lambda u, ans, a, x: rt.owned_adjoint(u, x), zero)
defvjp(rt.detached,      lambda g, ans, x: g)
def_linear(rt.detached, 0)
def_same_kind(rt.detached)  # a container's copy is a container
# What a helper returns, so that reverse mode adds a container's adjoints element by element (never
# with ``+``, which joins two lists): always a list or tuple, or the kind of the arguments at these
# positions
def_sequence(rt.column_stack_vjp, rt.concatenate_vjp, rt.dstack_vjp, rt.hstack_vjp, rt.vstack_vjp,
             rt.list_item_vjp, rt.select_vjp, rt.filled, rt.spread, rt.multi_dot_vjp)
def_same_kind(
    rt.unstack,
    rt.repeat_seq_vjp,
    rt.sorted_by_vjp,
    rt.sequence_vjp,
    rt.field_vjp,
    rt.getitem_vjp,
    rt.summed_getitem_vjp,
    rt.part_vjp,
    argnums=(1,),
)
def_same_kind(rt.add_adjoints, rt.dense_adjoint, rt.assign_item_vjp_x, argnums=(0, 1))
def_same_kind(rt.concat_vjp_a, rt.concat_vjp_b, argnums=(0, 1, 2))
def_same_kind(rt.zeros_like, rt.zero_tangent, rt.fit)
# where they return a list, it is one of their own making (or an argument, as it is): a function may
# pop it
def_new_list(rt.unpopped, rt.spread, rt.detached, rt.zeros_like, rt.zero_tangent, rt.fit,
             rt.unstack,
             rt.getitem_vjp, rt.list_item_vjp, rt.sorted_by_vjp, rt.concat_vjp_a, rt.concat_vjp_b,
             rt.repeat_seq_vjp, rt.sequence_vjp, rt.part_vjp)
def_new_list(rt.add_adjoints, passes=(0, 1))
def_new_list(rt.dense_adjoint, passes=(0,))
def_in_place(rt.add_into, rt.add_at)  # add_into(y_bar, i, g) is y_bar = add_at(y_bar, i, g)
# the helpers that write into an argument (read by source: see below)
def_in_place(rt.scatter_add, rt.add_at)
defvjp(rt.entries,       lambda g, ans, x, index: rt.getitem_vjp(g, x, index), None)
def_linear(rt.entries, 0)
# an index is an integer: in generated code it may come off an active tape
defjvp(rt.entries,       None, zero)

# ---- pieces of rules -----------------------------------------------------------------------------
defjvp(rt.pow_minus_one, lambda u, ans, x, y: u * (y - 1) * rt.pow_minus_one(x, y - 1),
                         lambda u, ans, x, y: u * ans * rt.safe_log(x))
defvjp(rt.pow_minus_one, lambda g, ans, x, y: g * (y - 1) * rt.pow_minus_one(x, y - 1),
                         lambda g, ans, x, y: g * ans * rt.safe_log(x), elementwise=True)
defjvp(rt.safe_log,      lambda u, ans, x: np.where(x == 0, 0.0, u / np.where(x == 0, 1.0, x)))

# a helper's refusal of arguments it cannot differentiate at: no value, no gradient
def_effect(rt.refuse_unless)
# (``y = x.copy()`` shares ``x``'s items only where this says ``x`` is a list, tuple or dict)
def_container_test(rt.is_container)
def_nondiff(rt.balanced_eq, rt.clip_mask, rt.reduced_count, rt.zeros_like, rt.zero_tangent,
            rt.zeros_of,
            rt.tensordot_spec, rt.inverse_axes, rt.zip_length, rt.field_position, rt.is_container,
            rt.loop_length)
def_check(rt.zip_length, rt.loop_length)  # (lengths that differ, a loop over what has none)

# ---- reductions, statistics, products and factorizations: linear in the adjoint; the rest by their
for _adjoint in (rt.prod_vjp, rt.cumprod_vjp, rt.average_vjp, rt.average_weights_vjp,
                 rt.nanmean_vjp, rt.polyval_vjp_p, rt.matrix_power_vjp, rt.multi_dot_vjp,
                 rt.cholesky_vjp, rt.eigh_vjp, rt.svd_vjp, rt.qr_vjp, rt.pinv_vjp):
    def_linear(_adjoint, 0)
defjvp(rt.prod_vjp, None, zero, lambda u, ans2, g, ans, x, axis=None, keepdims=False:
       rt.expand_reduced(g, x, axis, keepdims) * rt.prod_others_jvp(u, x, axis), zero, zero)
defjvp(
    rt.cumprod_vjp,
    None,
    zero,
    lambda u, ans2, g, ans, x, axis=None: rt.cumprod_vjp_jvp(u, g, x, axis),
    zero,
)
defjvp(rt.average_vjp, None, zero, zero,
       lambda u, ans2, g, x, axis=None, weights=None: rt.average_vjp_jvp(u, g, x, axis, weights))
defjvp(
    rt.average_weights_vjp,
    None,
    lambda u, ans2, g, ans, x, axis, weights: rt.average_weights_vjp_jvp(
        1, u, g, ans, x, axis, weights
    ),
    lambda u, ans2, g, ans, x, axis, weights: rt.average_weights_vjp_jvp(
        2, u, g, ans, x, axis, weights
    ),
    zero,
    lambda u, ans2, g, ans, x, axis, weights: rt.average_weights_vjp_jvp(
        4, u, g, ans, x, axis, weights
    ),
)
defjvp(rt.nanmean_vjp, None, zero, zero, zero)  # the NaNs' places: piecewise constant
defjvp(rt.polyval_vjp_p, None, zero, lambda u, ans2, g, p, x: rt.polyval_vjp_p_jvp(u, g, p, x))
defjvp(rt.sinc_slope, lambda u, ans, x: u * rt.sinc_curvature(x))
defjvp(
    rt.matrix_power_vjp, None, lambda u, ans2, g, a, n: rt.matrix_power_vjp_jvp(u, g, a, n), zero
)
defjvp(rt.multi_dot_vjp, None, lambda u, ans2, g, arrays: rt.multi_dot_vjp_jvp(u, g, arrays))
defjvp(rt.cholesky_vjp, None, lambda u, ans2, g, ans: rt.cholesky_vjp_jvp(u, g, ans))
# the factorizations' adjoints and results are tuples: parts nothing flowed into are None
# (``filled``)
defjvp(rt.eigh_vjp, lambda u, ans2, g, ans, a: rt.eigh_vjp(rt.filled(u, ans), ans, a),
       lambda u, ans2, g, ans, a: rt.eigh_vjp_jvp(u, g, ans), zero)
defjvp(rt.qr_vjp, lambda u, ans2, g, ans, a: rt.qr_vjp(rt.filled(u, ans), ans, a),
       lambda u, ans2, g, ans, a: rt.qr_vjp_jvp(u, g, ans), zero)
defjvp(rt.svd_vjp,
       lambda u, ans2, g, ans, a, full_matrices=True, compute_uv=True:
       rt.svd_vjp(rt.filled(u, ans) if compute_uv else u, ans, a, full_matrices, compute_uv),
       lambda u, ans2, g, ans, a, full_matrices=True, compute_uv=True:
       rt.svd_vjp_jvp(u, g, ans, a, full_matrices, True) if compute_uv else 0.0 * ans2,
       lambda u, ans2, g, ans, a, full_matrices=True, compute_uv=True:
       0.0 * ans2 if compute_uv else rt.svd_vjp_jvp(u, g, ans, a, full_matrices, False), zero, zero)
defjvp(rt.pinv_vjp, None, lambda u, ans2, g, ans, a: rt.pinv_vjp_jvp(1, u, g, ans, a),
       lambda u, ans2, g, ans, a: rt.pinv_vjp_jvp(2, u, g, ans, a))

# operand k's adjoint of a product: linear in the adjoint and in each other operand, its own read
# for its shape einsum's operands' rules (``rules.numpy.EINSUM_RULES``) make their own rules
# (``EinsumTerm``); registered, so that the rule tests read them as they read every rule
for _term in (rt.EinsumTerm(("g",), k) for k in range(8)):
    _made = _term.ast_ad_rule()
    defvjp(_term, *_made.vjps)
    defjvp(_term, *_made.jvps)
for _operand in (rt.kron_vjp, rt.convolve_vjp, rt.correlate_vjp):
    def_linear(_operand, 1)
    defjvp(
        _operand,
        zero,
        None,
        rt.other_operand_jvp(_operand, 2, 2),
        rt.other_operand_jvp(_operand, 3, 2),
        zero,
    )

# ---- reverse rules of the adjoint helpers (reverse mode over a gradient's code) ------------------
# ``runtime.shared``'s adjoint and tangent helpers (the writes followed by where entries lie):
# linear in what they move, each the other's transpose (so that
# a Hessian through such a write is forward mode over them, and reverse mode over a jvp reverses
# them)
defvjp(rt.memory_root_vjp_new,
       lambda w, ans, g, plan, new: rt.memory_root_jvp_new(w, plan, g), zero, zero)
defvjp(rt.memory_root_jvp_new,
       lambda w, ans, u, plan, like: rt.memory_root_vjp_new(w, plan, u), zero, zero)
defvjp(rt.memory_root_vjp_family,
       lambda w, ans, g, plan, family: rt.memory_root_jvp_family(w, plan, g), zero, zero)
defvjp(rt.memory_root_jvp_family,
       lambda w, ans, u, plan, new: rt.memory_root_vjp_family(w, plan, u), zero, zero)
defvjp(rt.memory_view_vjp_root,
       lambda w, ans, g, plan, key, root: rt.memory_view_jvp_root(w, plan, key, g), zero, zero,
       zero)
defvjp(rt.memory_view_jvp_root,
       lambda w, ans, u, plan, key, old: rt.memory_view_vjp_root(w, plan, key, u), zero, zero,
       zero)
defvjp(rt.memory_view_vjp_old,  # (its own transpose)
       lambda w, ans, g, plan, key, old: rt.memory_view_vjp_old(w, plan, key, old), zero, zero,
       zero)
for _helper in (rt.memory_root_vjp_new, rt.memory_root_jvp_new, rt.memory_root_vjp_family,
                rt.memory_root_jvp_family, rt.memory_view_vjp_root, rt.memory_view_jvp_root,
                rt.memory_view_vjp_old):
    def_linear(_helper, 0)
def_same_kind(rt.memory_view_vjp_old, argnums=(0,))
def_same_kind(rt.memory_root_vjp_family, argnums=(2,))
def_same_kind(rt.memory_view_jvp_root, argnums=(3,))
# (a list written into, as the root: its tangents and adjoints are lists)
def_same_kind(rt.memory_root_jvp_new, argnums=(0,))
def_same_kind(rt.memory_root_jvp_family, argnums=(2,))
def_same_kind(rt.memory_root_vjp_new, argnums=(0, 2))

# Their arguments other than the adjoint give shapes, indices or choices: zero. The adjoint's own
# rule is the helper's transpose, where written (the rest have forward rules only: reverse over
# reverse stops there).
defvjp(
    rt.expand_reduced,
    lambda w, ans, g, x, axis=None, keepdims=False: rt.summed_to(w, g, axis, keepdims),
    zero,
    zero,
    zero,
)
def_linear(rt.summed_to, 0)
defvjp(
    rt.summed_to,
    lambda v, ans, w, g, axis=None, keepdims=False: rt.expand_reduced(v, w, axis, keepdims),
    zero,
    zero,
    zero,
)
defjvp(rt.summed_to, None, zero, zero, zero)
# the transposes written out, for helpers whose source is outside the language (the rest are read by
# source)
# scatter's: gather
defvjp(rt.getitem_vjp, lambda w, ans, g, x, index: rt.entries(w, index), zero, zero)
# a mask
defvjp(
    rt.assign_item_vjp_x, lambda w, ans, g, x, index: rt.assign_item_vjp_x(w, x, index), zero, zero
)
# back in sorted order
defvjp(rt.sort_vjp, lambda w, ans, g, x, axis=-1: rt.sort_jvp(w, x, axis), zero, zero)
# back to the tangent's shape or list
defvjp(rt.cast_jvp, lambda w, ans2, u, ans: rt.cast_vjp(w, ans2, u), zero)
defvjp(rt.written_tangent, lambda w, ans, u, x: rt.written_tangent(w, x), zero)
# each is the other's
defvjp(rt.chosen_jvp, zero, lambda w, ans2, k, u, ans, xs: rt.chosen_vjp(k, w, ans, xs), zero, zero)
defvjp(rt.chosen_vjp, zero, lambda w, ans2, k, g, ans, xs: rt.chosen_jvp(k, w, ans, xs), zero, zero)
# a pick
defvjp(
    rt.field_vjp, lambda w, ans, g, obj, name: rt.part(w, rt.field_position(obj, name)), zero, zero
)
# an item of a container adjoint, and back
defvjp(rt.part, lambda w, ans, g, k: rt.part_vjp(w, g, k), zero)
defvjp(rt.part_vjp, lambda c, ans, w, g, k: rt.part(c, k), zero, zero)
# in order
defvjp(rt.sorted_by_vjp, lambda w, ans, g, xs, keys, reverse=False: rt.sorted_by(w, keys, reverse),
       zero, zero, zero)
def_linear(rt.sequence_vjp, 0)  # list(x)'s adjoint: its transpose gives the items back as a list
defjvp(rt.sequence_vjp, None, zero)
defvjp(
    rt.sequence_vjp,
    lambda w, ans, g, x: dict(w) if isinstance(w, dict) else [item for item in w],
    zero,
)
def_linear(rt.take_along_axis_vjp, 0)
defjvp(rt.take_along_axis_vjp, None, zero, zero, zero)
defvjp(
    rt.take_along_axis_vjp,
    lambda w, ans, g, arr, indices, axis=-1: np.take_along_axis(w, indices, axis),
    zero,
    zero,
    zero,
)
for _fn in _LINEAR_IN_THE_ADJOINT:
    # each has its forward rules, registered above
    if not lookup(_fn).vjps:  # type: ignore[union-attr]
        defvjp(_fn, None, *[zero] * 5)
