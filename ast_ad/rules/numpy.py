"""Rules for numpy: elementwise functions, reductions and structure."""

from typing import Any

import numpy as np

from ast_ad.core.registry import (
    def_casts,
    def_fresh,
    def_full_reduction,
    def_holds_items,
    def_in_place,
    def_jointly_linear,
    def_linear,
    def_method,
    def_nondiff,
    def_reads_in_order,
    def_reduction,
    def_same_kind,
    def_scaled_by_initial,
    def_sequence,
    def_shape_of,
    def_shape_read,
    def_truncates,
    def_view,
    def_view_inverse,
    defjvp,
    defvjp,
    zero,
)
from ast_ad.core.registry import defvjp_elementwise as ew
from ast_ad.rules.elementary import def_elementary
from ast_ad.runtime import (
    EinsumTerm,
    T,
    add_at,
    array_view,
    assign_item,
    assign_item_vjp_value,
    assign_item_vjp_x,
    astype,
    astype_view,
    average_vjp,
    average_weights_jvp,
    average_weights_vjp,
    balanced_eq,
    cast_jvp,
    cast_vjp,
    clip_hi_vjp,
    clip_lo_vjp,
    clip_mask,
    column_stack_vjp,
    concatenate_vjp,
    convolve_vjp,
    copied,
    copy_of,
    correlate_vjp,
    cumprod_jvp,
    cumprod_vjp,
    cumsum_vjp,
    diag_vjp,
    diagonal_vjp,
    diff_vjp,
    dot_vjp_a,
    dot_vjp_b,
    dstack_vjp,
    expand_reduced,
    extremum_vjp,
    fit,
    hstack_vjp,
    index_derivative,
    inner_vjp,
    inner_vjp_b,
    inverse_axes,
    key_tangent,
    kron_vjp,
    linspace_vjp,
    matmul_vjp_a,
    matmul_vjp_b,
    nanmean_vjp,
    outer_vjp_a,
    outer_vjp_b,
    pad_jvp,
    pad_vjp,
    polyder_vjp,
    polyval_vjp_p,
    pow_minus_one,
    prod_vjp,
    reduced_count,
    repeat_vjp,
    roll_vjp,
    rollaxis_vjp,
    safe_log,
    select_default_vjp,
    select_vjp,
    sinc_slope,
    sort_jvp,
    sort_vjp,
    split_vjp,
    std_vjp,
    take_along_axis_vjp,
    take_vjp,
    tensordot_spec,
    tile_vjp,
    trapezoid_vjp,
    unbroadcast,
    unreshaped,
    unrotated,
    unstack,
    unstack_vjp,
    untransposed,
    var_vjp,
    vecdot_vjp,
    vstack_vjp,
    zero_tangent,
    zeros_of,
)

def_elementary(np, "arc")

# ---- exponents and logarithms numpy has its own way ----------------------------------------------
ew(np.exp2,  lambda g, ans, x: g * ans * np.log(2.0))
ew(np.log,   lambda g, ans, x: g / x)
ew(np.square, lambda g, ans, x: g * 2.0 * x)
ew(
    np.power,
    lambda g, ans, x, y: g * y * pow_minus_one(x, y),
    lambda g, ans, x, y: g * ans * safe_log(x),
)

# ---- arithmetic --------------------------------------------------------------------------------
ew(np.add,        lambda g, ans, x, y: g,     lambda g, ans, x, y: g)
ew(np.subtract,   lambda g, ans, x, y: g,     lambda g, ans, x, y: -g)
ew(np.multiply,   lambda g, ans, x, y: g * y, lambda g, ans, x, y: g * x)
ew(np.divide,     lambda g, ans, x, y: g / y, lambda g, ans, x, y: -g * ans / y)
ew(np.negative,   lambda g, ans, x: -g)
ew(np.positive,   lambda g, ans, x: g)
ew(np.reciprocal, lambda g, ans, x: -g * ans * ans)
ew(np.abs,        lambda g, ans, x: g * np.sign(x))
# the larger or the smaller of two: the adjoint goes to the one chosen, half to each at a tie
for _choice in (np.maximum, np.minimum, np.fmax, np.fmin):
    ew(
        _choice,
        lambda g, ans, x, y: g * balanced_eq(x, ans, y),
        lambda g, ans, x, y: g * balanced_eq(y, ans, x),
    )
ew(
    np.where,
    None,
    lambda g, ans, c, x, y: np.where(c, g, 0.0),
    lambda g, ans, c, x, y: np.where(c, 0.0, g),
)
ew(
    np.clip,
    lambda g, ans, x, a_min=None, a_max=None, *args, **kwargs: g * clip_mask(x, a_min, a_max),
    lambda g, ans, x, a_min, a_max=None, *args, **kwargs: clip_lo_vjp(g, x, a_min, a_max),
    lambda g, ans, x, a_min, a_max, *args, **kwargs: clip_hi_vjp(g, x, a_min, a_max),
)

# ---- reductions --------------------------------------------------------------------------------
defvjp(np.sum,  lambda g, ans, x, axis=None, dtype=None, out=None, keepdims=False, *args, **kwargs:
                expand_reduced(g, x, axis, keepdims))
defvjp(np.mean, lambda g, ans, x, axis=None, dtype=None, out=None, keepdims=False, *args, **kwargs:
                expand_reduced(g, x, axis, keepdims) / reduced_count(x, axis))

defvjp(np.max,  lambda g, ans, x, axis=None, out=None, keepdims=False, *args, **kwargs:
                extremum_vjp(g, ans, x, axis, keepdims))
defvjp(np.min,  lambda g, ans, x, axis=None, out=None, keepdims=False, *args, **kwargs:
                extremum_vjp(g, ans, x, axis, keepdims))

# ---- lists of arrays -----------------------------------------------------------------------------
defvjp(np.stack,   lambda g, ans, xs, axis=0, *args, **kwargs: unstack(g, xs, axis))
defvjp(np.array,   lambda g, ans, x, *args, **kwargs: cast_vjp(g, ans, x))
defvjp(np.asarray, lambda g, ans, x, *args, **kwargs: cast_vjp(g, ans, x))

# ---- products ------------------------------------------------------------------------------------
defvjp(np.dot, lambda g, ans, a, b: dot_vjp_a(g, a, b), lambda g, ans, a, b: dot_vjp_b(g, a, b))
defvjp(
    np.matmul,
    lambda g, ans, a, b: matmul_vjp_a(g, a, b),
    lambda g, ans, a, b: matmul_vjp_b(g, a, b),
)

# ---- structure -----------------------------------------------------------------------------------
defvjp(np.transpose, lambda g, ans, x, axes=None: np.transpose(g, inverse_axes(axes)))
defvjp(np.reshape,   lambda g, ans, x, *args, **kwargs: np.reshape(g, np.shape(x)))

# ---- more elementwise functions ---------------------------------------------------------------
ew(np.arcsinh,     lambda g, ans, x: g / np.sqrt(x * x + 1.0))
ew(np.arccosh,     lambda g, ans, x: g / np.sqrt(x * x - 1.0))
ew(np.arctanh,     lambda g, ans, x: g / (1.0 - x * x))
ew(np.logaddexp, lambda g, ans, x, y: g * np.exp(x - ans), lambda g, ans, x, y: g * np.exp(y - ans))
ew(
    np.logaddexp2,
    lambda g, ans, x, y: g * 2.0 ** (x - ans),
    lambda g, ans, x, y: g * 2.0 ** (y - ans),
)
ew(np.sinc,        lambda g, ans, x: g * sinc_slope(x))
ew(np.deg2rad,     lambda g, ans, x: g * (np.pi / 180.0))
ew(np.radians,     lambda g, ans, x: g * (np.pi / 180.0))
ew(np.rad2deg,     lambda g, ans, x: g * (180.0 / np.pi))
ew(np.degrees,     lambda g, ans, x: g * (180.0 / np.pi))
ew(
    np.float_power,
    lambda g, ans, x, y: g * y * pow_minus_one(x, y),
    lambda g, ans, x, y: g * ans * safe_log(x),
)
ew(np.cbrt,        lambda g, ans, x: g / (3.0 * ans * ans))
ew(np.fabs,        lambda g, ans, x: g * np.sign(x))
ew(np.copysign,    lambda g, ans, x, y: g * np.sign(x) * np.sign(ans), None)
ew(np.remainder,   lambda g, ans, x, y: g, lambda g, ans, x, y: -g * np.floor_divide(x, y))
ew(np.fmod,        lambda g, ans, x, y: g, lambda g, ans, x, y: -g * np.trunc(x / y))

# ---- more reductions and scans -------------------------------------------------------------------
defvjp(np.amax,    lambda g, ans, x, axis=None, out=None, keepdims=False, *args, **kwargs:
                   extremum_vjp(g, ans, x, axis, keepdims))
defvjp(np.amin,    lambda g, ans, x, axis=None, out=None, keepdims=False, *args, **kwargs:
                   extremum_vjp(g, ans, x, axis, keepdims))
defvjp(
    np.prod,
    lambda g, ans, x, axis=None, dtype=None, out=None, keepdims=False, *args, **kwargs: prod_vjp(
        g, ans, x, axis, keepdims
    ),
)
defvjp(
    np.var,
    lambda g, ans, x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kwargs: var_vjp(
        g, ans, x, axis, ddof, keepdims
    ),
)
defvjp(
    np.std,
    lambda g, ans, x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kwargs: std_vjp(
        g, ans, x, axis, ddof, keepdims
    ),
)
defvjp(np.cumsum,  lambda g, ans, x, axis=None, *args, **kwargs: cumsum_vjp(g, x, axis))
defvjp(np.cumprod, lambda g, ans, x, axis=None, *args, **kwargs: cumprod_vjp(g, ans, x, axis))
defvjp(
    np.average,
    lambda g, ans, x, axis=None, weights=None, *args, **kwargs: average_vjp(g, x, axis, weights),
    None,
    lambda g, ans, x, axis, weights, *args, **kwargs: average_weights_vjp(g, ans, x, axis, weights),
)
defvjp(
    np.nansum,
    lambda g, ans, x, axis=None, dtype=None, out=None, keepdims=False, *args, **kwargs: (
        expand_reduced(g, x, axis, keepdims) * np.logical_not(np.isnan(x))
    ),
)

# ---- more products -------------------------------------------------------------------------------
defvjp(np.vdot,      lambda g, ans, a, b: g * np.reshape(b, np.shape(a)),
                     lambda g, ans, a, b: g * np.reshape(a, np.shape(b)))
defvjp(np.inner, lambda g, ans, a, b: inner_vjp(g, a, b), lambda g, ans, a, b: inner_vjp_b(g, a, b))
defvjp(
    np.outer, lambda g, ans, a, b: outer_vjp_a(g, a, b), lambda g, ans, a, b: outer_vjp_b(g, a, b)
)
# np.einsum(spec, *operands): operand k's rule is a term of einsum's derivatives, called by name in
# gradients (their operands vary in number), whose own rules are terms again (``EinsumTerm``)
EINSUM_RULES = [EinsumTerm(("g",), k) for k in range(8)]
einsum_vjp_a, einsum_vjp_b = EINSUM_RULES[:2]
defvjp(
    np.tensordot,
    lambda g, ans, a, b, axes=2: einsum_vjp_a(g, None, tensordot_spec(a, b, axes), a, b),
    lambda g, ans, a, b, axes=2: einsum_vjp_b(g, None, tensordot_spec(a, b, axes), a, b),
)
defvjp(np.einsum, None, *EINSUM_RULES)
defvjp(
    np.kron, lambda g, ans, a, b: kron_vjp(0, g, a, b), lambda g, ans, a, b: kron_vjp(1, g, a, b)
)
defvjp(np.trace,     lambda g, ans, x, offset=0, axis1=0, axis2=1, *args, **kwargs:
                     diagonal_vjp(g, x, offset, axis1, axis2))
defvjp(
    np.diagonal,
    lambda g, ans, x, offset=0, axis1=0, axis2=1: diagonal_vjp(g, x, offset, axis1, axis2),
)
defvjp(np.diag,      lambda g, ans, v, k=0: diag_vjp(g, v, k))
defvjp(np.tril,      lambda g, ans, x, k=0: np.tril(g, k))
defvjp(np.triu,      lambda g, ans, x, k=0: np.triu(g, k))

# ---- shape and layout ----------------------------------------------------------------------------
defvjp(np.ravel,        lambda g, ans, x, *args, **kwargs: np.reshape(g, np.shape(x)))
defvjp(np.squeeze,      lambda g, ans, x, axis=None: np.reshape(g, np.shape(x)))
defvjp(np.expand_dims,  lambda g, ans, x, axis: np.reshape(g, np.shape(x)))
defvjp(np.atleast_1d,   lambda g, ans, x: np.reshape(g, np.shape(x)))
defvjp(np.atleast_2d,   lambda g, ans, x: np.reshape(g, np.shape(x)))
defvjp(np.atleast_3d,   lambda g, ans, x: np.reshape(g, np.shape(x)))
defvjp(np.swapaxes,     lambda g, ans, x, axis1, axis2: np.swapaxes(g, axis1, axis2))
defvjp(np.moveaxis,     lambda g, ans, x, source, destination: np.moveaxis(g, destination, source))
defvjp(np.broadcast_to, lambda g, ans, x, shape, *args, **kwargs: unbroadcast(g, x))
defvjp(np.flip,         lambda g, ans, x, axis=None: np.flip(g, axis))
defvjp(np.fliplr,       lambda g, ans, x: np.fliplr(g))
defvjp(np.flipud,       lambda g, ans, x: np.flipud(g))
defvjp(np.roll,         lambda g, ans, x, shift, axis=None: roll_vjp(g, shift, axis))
defvjp(np.tile,         lambda g, ans, x, reps: tile_vjp(g, x, reps))
defvjp(np.repeat,       lambda g, ans, x, repeats, axis=None: repeat_vjp(g, x, repeats, axis))
defvjp(np.pad,          lambda g, ans, x, pad_width, mode="constant", constant_values=0, **kwargs:
       pad_vjp(g, x, pad_width, mode))  # the padding's constants take no gradient from x
defvjp(np.sort,         lambda g, ans, x, axis=-1, *args, **kwargs: sort_vjp(g, x, axis))
defvjp(
    np.take, lambda g, ans, x, indices, axis=None, *args, **kwargs: take_vjp(g, x, indices, axis)
)
defvjp(
    np.take_along_axis,
    lambda g, ans, arr, indices, axis=-1: take_along_axis_vjp(g, arr, indices, axis),
    zero,
)
defvjp(np.copy,         lambda g, ans, x, *args, **kwargs: g)
defvjp(
    np.concatenate, lambda g, ans, arrays, axis=0, *args, **kwargs: concatenate_vjp(g, arrays, axis)
)
defvjp(np.hstack,       lambda g, ans, arrays, *args, **kwargs: hstack_vjp(g, arrays))
defvjp(np.vstack,       lambda g, ans, arrays, *args, **kwargs: vstack_vjp(g, arrays))
defvjp(np.split,        lambda g, ans, x, indices_or_sections, axis=0: split_vjp(g, ans, x, axis))
defvjp(np.array_split,  lambda g, ans, x, indices_or_sections, axis=0: split_vjp(g, ans, x, axis))
defvjp(
    np.select,
    None,
    lambda g, ans, condlist, choicelist, default=0: select_vjp(g, condlist, choicelist),
    lambda g, ans, condlist, choicelist, default=0: select_default_vjp(g, condlist, default),
)
defvjp(np.real,         lambda g, ans, x: g)
# (an index from the differentiated inputs is discrete: nothing flows into it; a float key is
# refused where it is written, ``key_tangent``)
defvjp(assign_item,     lambda g, ans, x, index, value: assign_item_vjp_x(g, x, index),
                        lambda g, ans, x, index, value: index_derivative(index, True),
                        lambda g, ans, x, index, value: assign_item_vjp_value(g, ans, index, value))
defvjp(astype,          lambda g, ans, x, dtype, copy=True: cast_vjp(g, ans, x))
defvjp(astype_view,     lambda g, ans, x, dtype: cast_vjp(g, ans, x))
defvjp(array_view,      lambda g, ans, x, *args, **kwargs: cast_vjp(g, ans, x))
defvjp(add_at,          lambda g, ans, x, index, value: g,
                        None,
                        lambda g, ans, x, index, value: unbroadcast(g[index], value))

# they return lists of arrays
def_sequence(np.split, np.array_split, np.hsplit, np.vsplit, np.dsplit)
# ``np.unstack(x, axis=k)``: the slices along ``axis``, views of ``x``; their adjoints stacked back
defvjp(np.unstack, lambda g, ans, x, axis=0: unstack_vjp(g, ans, axis))
def_linear(np.unstack, 0)
def_sequence(np.unstack)
def_view(np.unstack)
# may share memory
def_view(np.transpose, np.reshape, np.ravel, np.squeeze, np.expand_dims, np.swapaxes, np.moveaxis,
         np.broadcast_to, np.atleast_1d, np.atleast_2d, np.atleast_3d, np.diagonal, np.real,
         np.imag, np.asarray)
# a write through such a view reaches its base as the view's entries put back (``aliasing``)
def_view(astype_view)  # ``x.astype(x.dtype, copy=False)`` is ``x`` itself
def_view(array_view)  # ``np.array(x, copy=False)`` is ``x`` itself
# (np.asarray of an array of its dtype: the array itself)
for _view in (np.reshape, np.ravel, np.squeeze, np.expand_dims, np.atleast_1d, np.atleast_2d,
              np.atleast_3d, np.asarray, astype_view, array_view):
    def_view_inverse(_view, unreshaped, takes_base=True)
def_view_inverse(np.transpose, untransposed)
def_view_inverse(np.swapaxes, np.swapaxes)  # its own inverse, with the same axes
# more that return views (each registered function called on arrays, numpy asked whether the result
# shares memory: ``tests/test_memory.py``); a write through one was lost before they were declared
def_view(np.flip, np.fliplr, np.flipud, np.rot90, np.matrix_transpose, np.float64)
# np.diag of a matrix is a read-only view of its diagonal (a write raises in Python): refused
def_view(np.diag)
# lists of views of their argument: a write through an item is refused (which entries, not known)
def_view(np.split, np.array_split, np.hsplit, np.vsplit, np.dsplit)
for _own in (np.flip, np.fliplr, np.flipud, np.matrix_transpose):
    def_view_inverse(_own, _own)  # each its own inverse, with the same arguments
def_view_inverse(np.rot90, unrotated)
def_view(T)  # ``x.mT``: a view; its own inverse
def_view_inverse(T, T)
def_view_inverse(np.float64, unreshaped, takes_base=True)  # (a float64 array: the array itself)
defvjp(unrotated, lambda g, ans, view, k=1, axes=(0, 1): np.rot90(g, k, axes))
def_linear(unrotated, 0)
defvjp(unreshaped, zero, lambda g, ans, base, view, *args: np.reshape(g, np.shape(view)))
def_linear(unreshaped, 1)
defvjp(untransposed, lambda g, ans, view, axes=None: np.transpose(g, axes))
def_linear(untransposed, 0)
# of one argument alone: a number
def_full_reduction(np.sum, np.mean, np.max, np.min, np.prod, np.std, np.var)
def_same_kind(assign_item)  # ``L[0] = v`` on a list gives a list

# ---- functions and methods that change their first argument in place, and their functional twins -
defvjp(copied,          zero, lambda g, ans, dst, src: cast_vjp(g, ans, src))
def_in_place(np.add.at, add_at)
def_in_place(np.copyto, copied)
def_in_place(np.ndarray.fill, np.full_like)
def_in_place(np.ndarray.sort, np.sort)

# ---- array methods: ``x.sum(axis=0)`` is ``np.sum(x, axis=0)`` -----------------------------------
for _method in ("sum", "mean", "prod", "max", "min", "var", "std", "cumsum", "cumprod", "dot",
                "transpose", "reshape", "ravel", "clip", "squeeze", "swapaxes", "repeat", "take",
                "trace", "diagonal", "round", "argmax", "argmin", "argsort", "any", "all",
                "nonzero"):
    def_method(_method, getattr(np, _method))
def_method("flatten", np.ravel)
def_method("astype", astype)
# arguments whose meaning the rules follow, or that are refused at the call
# (``registry.keyword_hazard``)
# their rules follow dtype= (integers: no gradient)
def_casts(np.array, np.asarray, astype, astype_view, array_view)
def_reads_in_order(np.reshape, np.ravel)  # order='F' reads entries in another order
def_scaled_by_initial(np.prod)  # initial= multiplies the product
# the object's own copy: np.copy would compute a dask array, and make a list an array
def_method("copy", copy_of)
defvjp(copy_of,         lambda g, ans, x: g)
def_linear(copy_of, 0)
# a list's or dict's copy is shallow: the same arrays in a new one
def_holds_items(copy_of, containers_only=True)
def_same_kind(copy_of)
defvjp(T,               lambda g, ans, a: T(g))

# ---- no gradient ---------------------------------------------------------------------------------
def_nondiff(np.broadcast_shapes, np.sign, np.floor, np.ceil, np.round, np.rint, np.trunc, np.shape,
            np.ndim, np.size, np.zeros_like, np.ones_like, np.empty_like, np.isnan,
            np.isinf, np.isfinite, np.greater, np.greater_equal, np.less, np.less_equal, np.equal,
            np.not_equal, np.argmax, np.argmin, np.argsort, np.logical_and, np.logical_or,
            np.logical_not, np.logical_xor, np.floor_divide, np.any, np.all, np.nonzero,
            np.count_nonzero, np.searchsorted, np.isclose, np.allclose, np.array_equal, np.signbit,
            np.zeros, np.ones, np.empty, np.eye, np.identity, np.arange, np.bitwise_and,
            np.bitwise_or, np.bitwise_xor, np.invert, np.left_shift, np.right_shift, np.gcd,
            np.lcm, np.heaviside, np.unravel_index)
# its value is the shape (reverse mode may keep that in place of an array)
def_shape_read(np.shape, 0)


# shaped as the array they are made like, or copy (a dtype, order or subok changes no axis)
# (a further positional argument may give the shape: ``np.zeros_like``'s fifth, ``np.full_like``'s
# sixth)
for _like in (np.zeros_like, np.ones_like, np.empty_like):
    def_shape_of(_like, 0, positional=4)
def_shape_of(np.full_like, 0, positional=5)
def_shape_of(copy_of, 0, positional=1)
def_shape_of(np.copy, 0, positional=2)

# ---- more of numpy: differences, stacking, nan-aware reductions, convolution, polynomials --------
defvjp(np.diff,         lambda g, ans, x, n=1, axis=-1, *args, **kwargs: diff_vjp(g, x, n, axis))
defvjp(np.cross,        lambda g, ans, a, b: np.cross(b, g), lambda g, ans, a, b: np.cross(g, a))
defvjp(np.rot90,        lambda g, ans, x, k=1, axes=(0, 1): np.rot90(g, -k, axes))
defvjp(np.rollaxis,     lambda g, ans, x, axis, start=0: rollaxis_vjp(g, x, axis, start))
defvjp(np.hsplit, lambda g, ans, x, sections: split_vjp(g, ans, x, 1 if np.ndim(x) > 1 else 0))
defvjp(np.vsplit,       lambda g, ans, x, sections: split_vjp(g, ans, x, 0))
defvjp(np.dsplit,       lambda g, ans, x, sections: split_vjp(g, ans, x, 2))
defvjp(np.dstack,       lambda g, ans, arrays: dstack_vjp(g, arrays))
defvjp(np.column_stack, lambda g, ans, arrays: column_stack_vjp(g, arrays))
defvjp(np.nan_to_num,   lambda g, ans, x, *args, **kwargs: g * np.isfinite(x))
defvjp(
    np.nanmean,
    lambda g, ans, x, axis=None, dtype=None, out=None, keepdims=False, *args, **kwargs: nanmean_vjp(
        g, x, axis, keepdims
    ),
)
defvjp(np.nanmax,       lambda g, ans, x, axis=None, out=None, keepdims=False, *args, **kwargs:
                        extremum_vjp(g, ans, x, axis, keepdims))
defvjp(np.nanmin,       lambda g, ans, x, axis=None, out=None, keepdims=False, *args, **kwargs:
                        extremum_vjp(g, ans, x, axis, keepdims))
defvjp(
    np.nancumsum,
    lambda g, ans, x, axis=None, *args, **kwargs: cumsum_vjp(g, x, axis) * np.isfinite(x),
)
defvjp(np.ptp,          lambda g, ans, x, axis=None, out=None, keepdims=False:
                        extremum_vjp(g, np.max(x, axis, keepdims=keepdims), x, axis, keepdims)
                        - extremum_vjp(g, np.min(x, axis, keepdims=keepdims), x, axis, keepdims))
defvjp(np.trapezoid,    lambda g, ans, y, x=None, dx=1.0, axis=-1: trapezoid_vjp(g, y, dx, axis, x))
defvjp(np.convolve,     lambda g, ans, a, v, mode="full": convolve_vjp(0, g, a, v, mode),
                        lambda g, ans, a, v, mode="full": convolve_vjp(1, g, a, v, mode))
defvjp(np.correlate,    lambda g, ans, a, v, mode="valid": correlate_vjp(0, g, a, v, mode),
                        lambda g, ans, a, v, mode="valid": correlate_vjp(1, g, a, v, mode))
defvjp(np.polyder,      lambda g, ans, p, m=1: polyder_vjp(g, p, m))
defvjp(np.polyval,      lambda g, ans, p, x: polyval_vjp_p(g, p, x),
                        lambda g, ans, p, x: g * np.polyval(np.polyder(p), x))
defvjp(np.linspace,     lambda g, ans, start, stop, num=50, endpoint=True, *args, **kwargs:
                        linspace_vjp(0, g, num, endpoint),
                        lambda g, ans, start, stop, num=50, endpoint=True, *args, **kwargs:
                        linspace_vjp(1, g, num, endpoint))
defvjp(
    np.full_like, zero, lambda g, ans, a, fill_value, *args, **kwargs: unbroadcast(g, fill_value)
)
# numpy's float type called as a function: a cast, like float(x)
ew(np.float64, lambda g, ans, x: g)
defvjp(np.full, None, lambda g, ans, shape, fill_value, *args, **kwargs: unbroadcast(g, fill_value))
defvjp(np.matrix_transpose, lambda g, ans, x: T(g))
defvjp(np.vecdot,       lambda g, ans, a, b, axis=-1: vecdot_vjp(g, b, axis),
                        lambda g, ans, a, b, axis=-1: vecdot_vjp(g, a, axis))
defvjp(np.cumulative_sum, lambda g, ans, x, axis=None, dtype=None, out=None, include_initial=False:
                          cumsum_vjp(g[1:] if include_initial else g, x, axis))

# ---- forward mode --------------------------------------------------------------------------------
# Elementwise functions need nothing here: their forward rule is their reverse rule's expression.
# Linear functions are their own forward rule; reductions take np.sum(u * D, axis) with D their
# reverse rule on ones.
_fn: Any  # each loop below binds a numpy function
for _fn in (np.sum, np.mean, np.stack, np.transpose, np.reshape, np.trace, np.diagonal, np.diag,
            np.tril, np.triu, np.ravel, np.squeeze, np.expand_dims, np.atleast_1d, np.atleast_2d,
            np.atleast_3d, np.swapaxes, np.moveaxis, np.broadcast_to, np.flip, np.fliplr,
            np.flipud, np.roll, np.tile, np.repeat, np.take, np.take_along_axis, np.copy,
            np.concatenate, np.hstack, np.vstack, np.split, np.array_split, np.hsplit, np.vsplit,
            np.dsplit, np.dstack, np.column_stack, np.diff, np.rot90, np.rollaxis, np.real, T,
            np.matrix_transpose, np.cumsum, np.cumulative_sum, np.trapezoid, np.polyval,
            np.polyder):
    def_linear(_fn, 0)
defjvp(np.polyval, None, lambda u, ans, p, x: u * np.polyval(np.polyder(p), x))
for _fn in (np.dot, np.matmul, np.vdot, np.inner, np.outer, np.tensordot, np.kron, np.cross,
            np.vecdot, np.convolve, np.correlate):
    def_linear(_fn, 0, 1)
def_linear(np.einsum, *range(1, 9))
for _fn in (np.max, np.min, np.amax, np.amin, np.nanmax, np.nanmin, np.ptp, np.prod, np.var,
            np.std, np.nansum, np.nanmean):
    def_reduction(_fn)
defjvp(np.array,      lambda u, ans, x, *args, **kwargs: cast_jvp(u, ans))
defjvp(np.asarray,    lambda u, ans, x, *args, **kwargs: cast_jvp(u, ans))
defjvp(astype,        lambda u, ans, x, dtype, copy=True: cast_jvp(u, ans))
defjvp(astype_view,   lambda u, ans, x, dtype: cast_jvp(u, ans))
defjvp(array_view,    lambda u, ans, x, *args, **kwargs: cast_jvp(u, ans))
defjvp(
    np.average,
    lambda u, ans, x, axis=None, weights=None, *args, **kwargs: np.average(u, axis, weights),
    None,
    lambda u, ans, x, axis, weights, *args, **kwargs: average_weights_jvp(u, ans, x, axis, weights),
)
defjvp(np.cumprod,    lambda u, ans, x, axis=None, *args, **kwargs: cumprod_jvp(u, ans, x, axis))
defjvp(
    np.nancumsum,
    lambda u, ans, x, axis=None, *args, **kwargs: np.cumsum(np.where(np.isnan(x), 0.0, u), axis),
)
defjvp(np.nan_to_num, lambda u, ans, x, *args, **kwargs: u * np.isfinite(x))
defjvp(np.sort,       lambda u, ans, x, axis=-1, *args, **kwargs: sort_jvp(u, x, axis))
defjvp(np.pad, lambda u, ans, x, pad_width, mode="constant", **kwargs: pad_jvp(u, pad_width, mode))
defjvp(
    np.select,
    None,
    lambda u, ans, condlist, choicelist, default=0: np.select(condlist, u, 0.0),
    lambda u, ans, condlist, choicelist, default=0: np.select(
        condlist, [zeros_of(ans)] * len(condlist), u
    ),
)
defjvp(np.full_like,  zero, lambda u, ans, a, fill_value, *args, **kwargs: np.full_like(ans, u))
defjvp(np.full,       None, lambda u, ans, shape, fill_value, *args, **kwargs: fit(u, ans))
defjvp(np.linspace,   lambda u, ans, start, stop, num=50, endpoint=True, *args, **kwargs:
                      np.linspace(u, 0.0 * u, num, endpoint),
                      lambda u, ans, start, stop, num=50, endpoint=True, *args, **kwargs:
                      np.linspace(0.0 * u, u, num, endpoint))
defjvp(assign_item,   lambda u, ans, x, index, value: assign_item(u, index, 0.0),
                      lambda u, ans, x, index, value: key_tangent(index, ans),
                      lambda u, ans, x, index, value: assign_item(zero_tangent(x), index, u))
# (the array with entries replaced, or added to: linear in the array and the value together; a
# value written into integers is truncated, its tangent zero: each engine passes the value's
# tangent through ``written_tangent`` first, where the array may hold integers)
def_jointly_linear(assign_item, 0, 2)
def_truncates(assign_item, 0, 2)
def_jointly_linear(add_at, 0, 2)
def_fresh(assign_item, add_at)  # (each a copy, written into)
defjvp(add_at,        lambda u, ans, x, index, value: u, zero,
                      lambda u, ans, x, index, value: add_at(zero_tangent(x), index, u))
defjvp(np.take,       None, zero)  # indices are integers (see operator.getitem)
defjvp(copied,        zero, lambda u, ans, dst, src: copied(zero_tangent(dst), u))
