"""Forward mode's helpers: tangents of the functions whose rules are not one line, and the forward
rules of the reverse rules' helpers (a derivative of a derivative through them)."""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np

from ast_ad.runtime.adjoints import (
    average_weights_vjp,
    cumprod_vjp,
    einsum_vjp,
    matrix_powers,
    multi_dot_vjp,
    norm_vjp,
    prod_vjp,
    sinc_slope,
    std_vjp,
)
from ast_ad.runtime.arrays import (
    T,
    as_array,
    average_weights_shape,
    expand_reduced,
    from_last,
    is_array,
    lower_only,
    reciprocal_or_zero,
    to_last,
    zeros_like,
    zeros_of,
)
from ast_ad.runtime.checks import refuse_unless


def cast_jvp(u: Any, ans: Any) -> Any:
    """Tangent of a cast: ``u`` in the result's dtype, zero where the result is integers
    (truncated)."""
    dtype = ans.dtype if type(ans) is np.ndarray else np.result_type(ans)
    if dtype.kind in "biu":
        return zeros_like(ans)
    return as_array(stacked_parts(u)).astype(dtype, copy=False)


def written_tangent(u: Any, x: Any) -> Any:
    """The tangent a value written into the array ``x`` carries in (``assign_item``): ``u``, or a
    zero where ``x`` holds integers or booleans, whose write truncated it (one number, which any
    entries it is written into take, as numpy takes a value of one entry)."""
    if isinstance(x, np.ndarray) and x.dtype.kind in "biu":
        return 0.0
    return u


# tangents that are numbers: nothing in a list of them to stack (``stacked_parts``)
_NUMBERS = frozenset({float, np.float64, int})


def stacked_parts(u: Any) -> Any:
    """``u``, the tangent of a list or tuple ``np.array`` reads, with the parts that are arrays of
    another type than numpy's (a batch of tangents) stacked by ``np.stack``, which hands the call to
    their type, where ``np.asarray`` would make one numpy array of them; ``u`` as it is where all
    are numpy's."""
    if not isinstance(u, (list, tuple)):
        return u
    if all(type(p) in _NUMBERS for p in u):
        return u
    parts = [stacked_parts(p) for p in u]
    if any(is_array(p) and not isinstance(p, np.ndarray) for p in parts):
        return np.stack(parts)
    return u


def sort_jvp(u: Any, x: Any, axis: Any = -1) -> Any:
    """Tangent of ``np.sort(x, axis)``: ``u`` taken in the order the sort put ``x`` in."""
    if axis is None:
        return np.ravel(u)[np.argsort(np.ravel(x), kind="stable")]
    return np.take_along_axis(as_array(u), np.argsort(x, axis=axis, kind="stable"), axis=axis)


def pad_jvp(u: Any, pad_width: Any, mode: Any = "constant") -> Any:
    """Tangent of ``np.pad``: the tangent padded the same way, constant padding with zeros."""
    return np.pad(u, pad_width, mode)


def cumprod_jvp(u: Any, ans: Any, x: Any, axis: Any = None) -> Any:
    """Tangent of ``np.cumprod``, step by step (``p[i] = p[i-1] x[i]``), so zeros in ``x`` are
    exact."""
    moved = to_last(x, axis)
    du = to_last(u, axis)
    ans_moved = to_last(ans, axis)
    out = zeros_of(moved, np.broadcast_shapes(np.shape(moved), np.shape(du)))
    out[..., 0] = du[..., 0]
    for i in range(1, moved.shape[-1]):
        out[..., i] = out[..., i - 1] * moved[..., i] + ans_moved[..., i - 1] * du[..., i]
    # over the flattened array, the result stays flat
    return out if axis is None else from_last(out, x, axis)


def average_weights_jvp(u: Any, ans: Any, x: Any, axis: Any, weights: Any) -> Any:
    """Tangent of ``np.average(x, axis, weights)`` in the weights: ``sum(u (x - average)) /
    sum(weights)``."""
    w = average_weights_shape(as_array(weights).astype(float), x, axis)
    du = average_weights_shape(as_array(u).astype(float), x, axis)
    spread = x - expand_reduced(ans, x, axis)
    return np.sum(du * spread, axis=axis) / np.sum(
        w * np.ones_like(as_array(x), dtype=float), axis=axis
    )


def chosen_jvp(k: Any, u: Any, ans: Any, xs: Any) -> Any:
    """Tangent of ``min``/``max`` from argument ``k``: ``u`` if that argument is the one chosen,
    else zero."""
    items = list(xs[0]) if len(xs) == 1 else list(xs)
    chosen = next((i for i, item in enumerate(items) if item is ans), None)
    if chosen is None:
        chosen = next(i for i, item in enumerate(items) if item == ans)
    if len(xs) == 1:
        return u[chosen]
    return u if k == chosen else 0.0 * u


def slogdet_jvp(u: Any, a: Any) -> Any:
    """Tangent of ``np.linalg.slogdet(a)``: the sign does not change; the log gains ``trace(a^-1
    u)``."""
    return 0.0, np.trace(np.linalg.solve(a, u), axis1=-2, axis2=-1)


def cholesky_jvp(u: Any, ans: Any) -> Any:
    """Tangent of ``L = cholesky(a)``: ``L Phi(L^-1 u L^-T)``, Phi the lower triangle with half the
    diagonal."""
    inv_l = np.linalg.inv(ans)
    inner = inv_l @ lower_only_sym(u) @ T(inv_l)
    return ans @ (np.tril(inner) - 0.5 * np.eye(np.shape(ans)[-1]) * inner)


def lower_only_sym(u: Any) -> Any:
    """The symmetric matrix whose lower triangle is ``u``'s (what numpy's cholesky and eigh
    read)."""
    low = np.tril(u)
    return low + T(np.tril(u, -1))


def eigh_jvp(u: Any, ans: Any) -> Any:
    """Tangents of ``w, v = eigh(a)``: ``diag(v^T u v)`` and ``v (F * v^T u v)``. Where two
    eigenvalues are equal the eigenvectors' tangent is not defined, and is inf or nan, without
    numpy's warning: the eigenvalues' tangent is exact there, and code that reads only ``w`` must
    not warn of what it does not read."""
    w, v = ans
    inner = T(v) @ lower_only_sym(u) @ v
    gaps = w[..., None, :] - w[..., :, None]
    off = np.eye(np.shape(w)[-1], dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(off, 0.0, 1.0 / np.where(off, 1.0, gaps))
        v_dot = v @ (factor * inner)
    return np.diagonal(inner, axis1=-2, axis2=-1).copy(), v_dot


def svd_jvp(u: Any, ans: Any, a: Any, full_matrices: Any = True, compute_uv: Any = True) -> Any:
    """Tangents of the thin ``U, S, Vt = svd(a)`` (distinct singular values), or of ``S`` alone:
    with ``P = U^T u V`` and ``F_ij = 1 / (s_j^2 - s_i^2)``, ``dS = diag(P)``, ``dU = U (F * (P S +
    S P^T)) + (I - U U^T) u V S^-1`` and ``dV = V (F * (S P + P^T S)) + (I - V V^T) u^T U S^-1``."""
    if not compute_uv:
        return svdvals_jvp(u, a)
    refuse_unless(
        not full_matrices or np.shape(a)[-1] == np.shape(a)[-2],
        "the derivative of np.linalg.svd with full_matrices=True on a non-square matrix: pass "
        "full_matrices=False",
    )
    left, s, vt = ans
    v = T(vt)
    p = T(left) @ u @ v
    s_row, s_col = s[..., None, :], s[..., :, None]
    gaps = s_row ** 2 - s_col ** 2
    f = reciprocal_or_zero(gaps)
    inverse = reciprocal_or_zero(s)[..., None, :]
    m, n = np.shape(a)[-2:]
    d_left = left @ (f * (p * s_row + s_col * T(p)))
    d_v = v @ (f * (s_col * p + T(p) * s_row))
    if m > np.shape(s)[-1]:
        d_left = d_left + (u @ v - left @ (T(left) @ u @ v)) * inverse
    if n > np.shape(s)[-1]:
        d_v = d_v + (T(u) @ left - v @ (T(v) @ T(u) @ left)) * inverse
    return d_left, np.diagonal(p, axis1=-2, axis2=-1).copy(), T(d_v)


def qr_jvp(u: Any, ans: Any) -> Any:
    """Tangents of the reduced ``q, r = qr(a)`` (``a`` square or tall, of full rank): with ``x = q^T
    u r^-1`` and ``s`` the skew matrix of its strictly lower part, ``dr = (x - s) r`` and ``dq = u
    r^-1 - q (x - s)``."""
    q, r = ans
    u_r = T(np.linalg.solve(T(r), T(u)))  # u r^-1
    x = T(q) @ u_r
    low = np.tril(x, -1)
    upper = x - (low - T(low))
    return u_r - q @ upper, upper @ r


def pinv_jvp(u: Any, ans: Any, a: Any) -> Any:
    """Tangent of ``p = pinv(a)``: ``-p u p + p p^T u^T (I - a p) + (I - p a) u^T p^T p``."""
    p = ans
    m, n = np.shape(a)[-2:]
    return (
        -p @ u @ p + p @ T(p) @ T(u) @ (np.eye(m) - a @ p) + (np.eye(n) - p @ a) @ T(u) @ T(p) @ p
    )


def svdvals_jvp(u: Any, a: Any) -> Any:
    """Tangent of the singular values of ``a`` (distinct): ``diag(U^T u V)``."""
    left, _, vt = np.linalg.svd(a, full_matrices=False)
    return np.einsum("...ki,...kl,...il->...i", left, u, vt)


def matrix_power_jvp(u: Any, a: Any, n: Any) -> Any:
    """Tangent of ``matrix_power(a, n)`` for ``n >= 0``: the sum of ``a^i u a^(n-1-i)``."""
    refuse_unless(
        n >= 0, "the derivative of matrix_power with a negative exponent: use inv and a power"
    )
    powers = matrix_powers(a, n)
    return sum((powers[i] @ u @ powers[n - 1 - i] for i in range(n)), zeros_of(a))


def multi_dot_jvp(u: Any, arrays: Any) -> Any:
    """Tangent of ``np.linalg.multi_dot(arrays)``: one product per factor, that factor's tangent in
    its place."""
    total = 0.0
    for k in range(len(arrays)):
        total = total + np.linalg.multi_dot([u[k] if j == k else a for j, a in enumerate(arrays)])
    return total


def product_terms_jvp(u: Any, terms: Any) -> Any:
    """Tangent terms of ``summed_products``: each step's ``(g, b)`` gives ``(g_dot, b)`` and ``(g,
    b_dot)``."""
    out = []
    for (g, other), (g_dot, other_dot) in zip(terms, u, strict=True):
        out += [(g_dot, other), (g, other_dot)]
    return out


def std_vjp_jvp_ans(
    u: Any, g: Any, ans: Any, x: Any, axis: Any = None, ddof: Any = 0, keepdims: Any = False
) -> Any:
    """Tangent of ``std_vjp(g, ans, x, ...)`` in ``ans``: it divides by the deviation, so ``-u /
    ans`` times it."""
    spread = expand_reduced(ans, x, axis, keepdims)
    ratio = -expand_reduced(u, x, axis, keepdims) * reciprocal_or_zero(spread)
    return std_vjp(g, ans, x, axis, ddof, keepdims) * ratio


def norm_vjp_jvp(k: Any, u: Any, g: Any, ans: Any, x: Any, ord: Any = None, axis: Any = None,
                 keepdims: Any = False) -> Any:
    """Tangent of ``norm_vjp(g, ans, x, ...)`` in ``ans`` (k=1) or ``x`` (k=2), for the 2-norm and
    the Frobenius norm (``g x / ans``), the 1-norm of vectors (``g sign(x)``) and the max norm
    (piecewise constant in both); other orders are refused."""
    matrix = (axis is None and np.ndim(x) == 2 and ord is not None) or (
        axis is not None and np.ndim(axis) > 0
    )
    if ord in (None, 2, "fro") and not (matrix and ord == 2):
        if k == 2:
            return norm_vjp(g, ans, u, ord, axis, keepdims)
        spread = expand_reduced(ans, x, axis, keepdims)
        ratio = -expand_reduced(u, x, axis, keepdims) * reciprocal_or_zero(spread)
        return norm_vjp(g, ans, x, ord, axis, keepdims) * ratio
    refuse_unless(
        not matrix and ord in (1, np.inf, -np.inf),
        "the second derivative of np.linalg.norm with ord=",
        repr(ord),
        ": use the 2-norm, or write the norm with numpy (np.sum(np.abs(x) ** p) ** (1 / p))",
    )
    return zeros_like(x)


# Each is the tangent of one helper in one of its arguments, the others held;
# ``ast_ad/rules/runtime.py`` registers them. The helpers are linear in the adjoint ``g``; these are
# their derivatives in the rest.
def filled(parts: Any, like: Any) -> Any:
    """The parts of a tuple's adjoint or tangent with ``None`` (nothing flowed in) as zeros shaped
    like ``like``'s."""
    return tuple(
        zeros_of(x) if p is None else zeros_of(x) + p for p, x in zip(parts, like, strict=True)
    )


def prod_others_jvp(u: Any, x: Any, axis: Any = None) -> Any:
    """Tangent of ``prod_vjp(1, _, x, axis)`` (each entry's product of the others) along ``u``: for
    entry i, the sum over j != i of ``u_j`` times the product of the entries other than i and j.
    Each product is taken as such, so zeros in ``x`` are exact."""
    if axis is not None and np.ndim(axis) > 0:  # several axes: bring them together, then as for one
        x, u = as_array(x), np.broadcast_to(u, np.shape(x))
        axes = tuple(a % x.ndim for a in axis)
        ends = tuple(range(x.ndim - len(axes), x.ndim))
        moved = np.moveaxis(x, axes, ends)
        flat = np.reshape(moved, moved.shape[:x.ndim - len(axes)] + (-1,))
        flat_u = np.reshape(np.moveaxis(u, axes, ends), flat.shape)
        return np.moveaxis(np.reshape(prod_others_jvp(flat_u, flat, -1), moved.shape), ends, axes)
    moved = to_last(x, axis)
    du = to_last(np.broadcast_to(u, np.shape(x)), axis)
    out = zeros_of(moved)
    for i in range(moved.shape[-1]):
        others = moved.copy()
        others[..., i] = 1.0
        # j != i: the product of all but i, j
        pairs = prod_vjp(np.ones(others.shape[:-1]), None, others, -1)
        out[..., i] = np.sum(du * pairs, axis=-1) - du[..., i] * pairs[..., i]
    return from_last(out, x, axis)


def cumprod_vjp_jvp(u: Any, g: Any, x: Any, axis: Any = None) -> Any:
    """Tangent of ``cumprod_vjp(g, _, x, axis)`` in ``x``. Entry i of that adjoint is ``sum_k>=i g_k
    P_k``, with ``P_k`` the product of ``x_0 .. x_k`` without ``x_i``: the cumulative product of
    ``x`` with entry i set to 1, whose tangent (``u`` with entry i zero) paired with ``g`` masked to
    ``k >= i`` is ``cumprod_vjp``'s own. Exact with zeros; O(n^3) along the axis."""
    moved = to_last(x, axis)
    g_moved = to_last(g, axis)
    du = to_last(np.broadcast_to(u, np.shape(x)), axis)
    n = moved.shape[-1]
    out = zeros_of(moved)
    for i in range(n):
        others, u_others = moved.copy(), du.copy()
        others[..., i], u_others[..., i] = 1.0, 0.0
        masked = g_moved * (np.arange(n) >= i)
        out[..., i] = np.sum(cumprod_vjp(masked, None, others, -1) * u_others, axis=-1)
    return from_last(out, x, axis)


def average_vjp_jvp(u: Any, g: Any, x: Any, axis: Any, weights: Any) -> Any:
    """Tangent of ``average_vjp(g, x, axis, weights)`` in the weights: ``g (u - w sum(u) / sum(w)) /
    sum(w)``."""
    w, du = as_array(weights).astype(float), as_array(u).astype(float)
    total = np.sum(w)
    spread = (du - w * np.sum(du) / total) / total
    return expand_reduced(g, x, axis) * average_weights_shape(spread, x, axis)


def average_weights_vjp_jvp(
    k: Any, u: Any, g: Any, ans: Any, x: Any, axis: Any, weights: Any
) -> Any:
    """Tangent of ``average_weights_vjp(g, ans, x, axis, weights)``, a sum of ``(x - ans) g /
    sum(weights)``, in ``ans`` (k=1) or ``x`` (k=2), where it is linear (the helper itself, the
    other one zero), or in the weights (k=4), whose sum divides it."""
    if k == 1:
        return average_weights_vjp(g, u, zeros_of(as_array(x)), axis, weights)
    if k == 2:
        return average_weights_vjp(
            g, zeros_of(as_array(ans)), np.broadcast_to(u, np.shape(x)), axis, weights
        )
    return average_weights_vjp(g, ans, x, axis, weights) * (
        -np.sum(u) / np.sum(as_array(weights).astype(float))
    )


def polyval_vjp_p_jvp(u: Any, g: Any, p: Any, x: Any) -> Any:
    """Tangent of ``polyval_vjp_p(g, p, x)`` in ``x``: the coefficient of ``x^k`` gains ``sum(g k
    x^(k-1) u)``."""
    x = as_array(x)
    powers = range(len(p) - 1, -1, -1)
    return np.stack(
        [np.sum(g * k * x ** (k - 1) * u) if k > 0 else np.sum(g * 0.0 * u) for k in powers]
    )


def sinc_curvature(x: Any) -> Any:
    """The second derivative of ``np.sinc``: ``(-pi sin(pi x) - 2 sinc'(x)) / x``; near 0, its
    series ``-pi^2/3 + pi^4 x^2/10 - pi^6 x^4/168`` (the closed form loses digits there)."""
    x = as_array(x).astype(float)
    small = np.abs(x) < 1e-3
    safe = np.where(small, 1.0, x)
    far = (-np.pi * np.sin(np.pi * safe) - 2.0 * sinc_slope(safe)) / safe
    x2 = x * x
    near = -np.pi ** 2 / 3.0 + np.pi ** 4 * x2 / 10.0 - np.pi ** 6 * x2 * x2 / 168.0
    out = np.where(small, near, far)
    return out if np.ndim(out) else float(out)


def matrix_power_vjp_jvp(u: Any, g: Any, a: Any, n: Any) -> Any:
    """Tangent of ``matrix_power_vjp(g, a, n) = sum_k (a^k)^T g (a^(n-1-k))^T`` in ``a``."""
    powers = matrix_powers(a, n)
    tangents = [matrix_power_jvp(u, a, k) for k in range(max(n, 1))]
    return sum(
        (
            T(tangents[k]) @ g @ T(powers[n - 1 - k]) + T(powers[k]) @ g @ T(tangents[n - 1 - k])
            for k in range(n)
        ),
        zeros_of(a),
    )


def multi_dot_vjp_jvp(u: Any, g: Any, arrays: Any) -> Any:
    """Tangents of ``multi_dot_vjp(g, arrays)`` in the arrays: each factor's adjoint is linear in
    each other factor, so it gains that adjoint with the other factor's tangent in its place, summed
    over the others."""
    out = [zeros_of(a) for a in arrays]
    for j, tangent in enumerate(u):
        if tangent is None:
            continue
        parts = multi_dot_vjp(
            g, [zeros_of(a) + tangent if i == j else a for i, a in enumerate(arrays)]
        )
        for i, part in enumerate(parts):
            if i != j:
                out[i] = out[i] + part
    return out


def cholesky_vjp_jvp(u: Any, g: Any, ans: Any) -> Any:
    """Tangent of ``cholesky_vjp(g, ans)`` (Murray's formula) in the factor ``ans``."""
    inv_l = np.linalg.inv(ans)
    d_inv = -inv_l @ u @ inv_l
    eye = np.eye(np.shape(ans)[-1])
    phi = T(ans) @ g
    phi = np.tril(phi) - 0.5 * eye * phi
    d_phi = T(u) @ g
    d_phi = np.tril(d_phi) - 0.5 * eye * d_phi
    d_s = T(d_inv) @ phi @ inv_l + T(inv_l) @ d_phi @ inv_l + T(inv_l) @ phi @ d_inv
    return lower_only(0.5 * (d_s + T(d_s)))


def eigh_vjp_jvp(u: Any, g: Any, ans: Any) -> Any:
    """Tangent of ``eigh_vjp(g, ans, a)`` in ``ans = (w, v)``."""
    w, v = ans
    dw, dv = filled(u, ans)
    w_bar, v_bar = filled(g, ans)
    gaps = w[..., None, :] - w[..., :, None]
    f = reciprocal_or_zero(gaps)
    d_f = -f * f * (dw[..., None, :] - dw[..., :, None])
    eye = np.eye(np.shape(w)[-1])
    inner = eye * w_bar[..., None, :] + f * (T(v) @ v_bar)
    d_inner = d_f * (T(v) @ v_bar) + f * (T(dv) @ v_bar)
    d_s = dv @ inner @ T(v) + v @ d_inner @ T(v) + v @ inner @ T(dv)
    return lower_only(0.5 * (d_s + T(d_s)))


def qr_vjp_jvp(u: Any, g: Any, ans: Any) -> Any:
    """Tangent of ``qr_vjp(g, ans, a)`` in ``ans = (q, r)``."""
    q, r = ans
    dq, dr = filled(u, ans)
    q_bar, r_bar = filled(g, ans)
    m = r @ T(r_bar) - T(q_bar) @ q
    d_m = dr @ T(r_bar) - T(q_bar) @ dq
    c = np.tril(m) + T(np.tril(m, -1))
    d_c = np.tril(d_m) + T(np.tril(d_m, -1))
    x = np.linalg.solve(r, T(q_bar + q @ c))
    return T(np.linalg.solve(r, T(dq @ c + q @ d_c) - dr @ x))


def pinv_vjp_jvp(k: Any, u: Any, g: Any, p: Any, a: Any) -> Any:
    """Tangent of ``pinv_vjp(g, p, a) = -p^T g p^T + L g^T p p^T + p^T p g^T R`` (``L = I - a p``,
    ``R = I - p a``) in ``p`` (k=1) or ``a`` (k=2)."""
    m, n = np.shape(a)[-2:]
    left, right = np.eye(m) - a @ p, np.eye(n) - p @ a
    if k == 2:
        return -u @ p @ T(g) @ p @ T(p) - T(p) @ p @ T(g) @ p @ u
    d_left, d_right = -a @ u, -u @ a
    return (
        -(T(u) @ g @ T(p) + T(p) @ g @ T(u))
        + d_left @ T(g) @ p @ T(p)
        + left @ T(g) @ (u @ T(p) + p @ T(u))
        + (T(u) @ p + T(p) @ u) @ T(g) @ right
        + T(p) @ p @ T(g) @ d_right
    )


def svd_vjp_jvp(
    u: Any, g: Any, ans: Any, a: Any, full_matrices: Any = True, compute_uv: Any = True
) -> Any:
    """Tangent of ``svd_vjp(g, ans, a, ...)``: in ``ans = (U, S, Vt)`` for the factors, in ``a`` for
    the singular values alone (``compute_uv=False``, where the helper factors ``a`` again)."""
    if not compute_uv:
        factors = np.linalg.svd(a, full_matrices=False)
        d_left, _, d_vt = svd_jvp(u, factors, a, False, True)
        left, _, vt = factors
        diag = np.eye(np.shape(g)[-1]) * g[..., None, :]
        return d_left @ diag @ vt + left @ diag @ d_vt
    left, s, vt = ans
    d_left, ds, d_vt = filled(u, ans)
    u_bar, s_bar, vt_bar = filled(g, ans)
    v, v_bar, dv = T(vt), T(vt_bar), T(d_vt)
    k = np.shape(s)[-1]
    eye = np.eye(k)
    s_row, s_col, ds_row, ds_col = (
        s[..., None, :],
        s[..., :, None],
        ds[..., None, :],
        ds[..., :, None],
    )
    f = reciprocal_or_zero(s_row ** 2 - s_col ** 2)
    d_f = -f * f * (2.0 * s_row * ds_row - 2.0 * s_col * ds_col)
    sigma, d_sigma = eye * s_row, eye * ds_row
    inverse = reciprocal_or_zero(s)
    inv_sigma, d_inv_sigma = (
        eye * inverse[..., None, :],
        eye * (-inverse * inverse * ds)[..., None, :],
    )
    jl = T(left) @ u_bar - T(u_bar) @ left
    jr = T(v) @ v_bar - T(v_bar) @ v
    j, kk = f * jl, f * jr
    d_j = d_f * jl + f * (T(d_left) @ u_bar - T(u_bar) @ d_left)
    d_k = d_f * jr + f * (T(dv) @ v_bar - T(v_bar) @ dv)
    inner = j @ sigma + eye * s_bar[..., None, :] + sigma @ kk
    d_inner = d_j @ sigma + j @ d_sigma + d_sigma @ kk + sigma @ d_k
    out = d_left @ inner @ vt + left @ d_inner @ vt + left @ inner @ d_vt
    m, n = np.shape(a)[-2:]
    if m > k:
        rest = np.eye(m) - left @ T(left)
        d_rest = -(d_left @ T(left) + left @ T(d_left))
        out = (
            out
            + d_rest @ u_bar @ inv_sigma @ vt
            + rest @ u_bar @ (d_inv_sigma @ vt + inv_sigma @ d_vt)
        )
    if n > k:
        rest = np.eye(n) - v @ vt
        d_rest = -(dv @ vt + v @ d_vt)
        out = (
            out
            + (d_left @ inv_sigma + left @ d_inv_sigma) @ T(v_bar) @ rest
            + left @ inv_sigma @ T(v_bar) @ d_rest
        )
    return out


def other_operand_jvp(fn: Any, j: Any, first: Any, own: Any = None, g: Any = 1) -> Any:
    """The forward rule, at position ``j``, of a helper ``fn`` that gives one operand's adjoint of a
    product whose operand 0 stands at position ``first``: linear in each other operand, and reading
    its own only for its shape (a zero tangent there). Whose adjoint: operand ``own``, or the
    helper's first argument's. ``fn`` is linear in the adjoint at position ``g`` too."""
    return OtherOperands(fn, (j,), first, own, g)


class OtherOperands:
    """``fn(*args)`` with the arguments at ``positions`` replaced by tangents, called as rules are:
    ``(u_m, ans_m, ..., u_1, ans_1, *args)``. It is the forward rule of an operand's adjoint of a
    product (``einsum_vjp``: linear in the adjoint and in every operand but its own), and, since the
    helper is linear in each of those, the rules of that rule too: one more argument replaced. Zero
    where a position repeats or is the operand whose adjoint it is (read only for its shape)."""

    def __init__(self, fn: Any, positions: tuple[int, ...], first: int, own: Any, g: int):
        self.fn, self.positions, self.first, self.own, self.g = fn, positions, first, own, g
        self.__name__ = f"{fn.__name__}_jvp"
        self._rule: Any = None

    def __call__(self, *call: Any) -> Any:
        m = len(self.positions)
        tangents, args = call[2 * m - 2::-2], call[2 * m:]
        own = self.first + (args[0] if self.own is None else self.own)
        if own in self.positions or len(set(self.positions)) < m:
            return 0.0 * call[1]
        replaced = list(args)
        for position, u in zip(self.positions, tangents, strict=True):
            replaced[position] = u
        return self.fn(*replaced)

    def ast_ad_rule(self) -> Any:
        from ast_ad.core import registry

        if self._rule is None:
            m = len(self.positions)
            moving: list[Any] = [
                OtherOperands(self.fn, (*self.positions, p), self.first, self.own, self.g)
                if p == self.g or p >= self.first
                else registry.zero
                for p in range(self.first + 8)
            ]
            jvps: tuple[Any, ...] = (registry.LINEAR, registry.zero) * m + tuple(moving)
            self._rule = registry.Rule(self, (), origin="ast_ad.runtime", jvps=jvps)
        return self._rule


class EinsumTerm:
    """A term of the derivatives of ``np.einsum``, called as rules are: ``(v_m, ans_m, ..., v_1,
    ans_1, spec, *operands)``. Each leading pair is a slot: ``("swap", p)``, operand ``p`` replaced
    by the slot's value; ``"g"``, the adjoint; ``"skip"``, not read (a pair's second entry is never
    read). With ``wrt`` None the term is ``np.einsum`` of the operands; else operand ``wrt``'s
    adjoint of it (``einsum_vjp``) for the adjoint ``g``.

    Every term is linear in each slot's value and in each operand it reads, so its forward rules are
    itself (``LINEAR``), and its reverse rules are terms again, with one slot more: the adjoint of a
    swapped operand ``p`` of ``np.einsum`` is operand ``p``'s adjoint; the adjoint of ``g`` in
    operand ``k``'s adjoint is ``np.einsum`` with ``k`` swapped for the cotangent; and the adjoint
    of another operand ``p`` there is operand ``p``'s adjoint with ``k`` swapped for the cotangent
    (``<u, A_k(g)> = <g, einsum(k: u)>``). So the terms can be differentiated again to any order, by
    either mode. ``np.einsum``'s own rule for operand ``k`` is ``EinsumTerm(("g",), k)``, called
    ``(g, ans, spec, *operands)``."""

    def __init__(self, slots: tuple[Any, ...], wrt: int | None):
        self.slots, self.wrt = slots, wrt
        self.__name__ = self.__qualname__ = "einsum_with" if wrt is None else f"einsum_vjp_{wrt}"
        self._rule: Any = None

    def __call__(self, *call: Any, **kwargs: Any) -> Any:
        m = len(self.slots)
        spec, operands = call[2 * m], list(call[2 * m + 1:])
        g = None
        for k, slot in enumerate(self.slots):
            if slot == "g":
                g = call[2 * k]
            elif slot != "skip":
                operands[slot[1]] = call[2 * k]
        if self.wrt is None:
            return np.einsum(spec, *operands)
        return einsum_vjp(self.wrt, g, spec, *operands)

    def __repr__(self) -> str:
        return f"EinsumTerm({self.slots!r}, {self.wrt!r})"

    def __eq__(self, other: Any) -> bool:
        return type(other) is type(self) and (self.slots, self.wrt) == (other.slots, other.wrt)

    def __hash__(self) -> int:
        return hash((type(self), self.slots, self.wrt))

    def ast_ad_rule(self) -> Any:
        from ast_ad.core import registry

        if self._rule is None:
            jvps: list[Any] = []
            vjps: list[Any] = []
            zero = registry.zero
            for k, slot in enumerate(self.slots):
                if slot == "skip":
                    jvps += [zero, zero]
                    vjps += [zero, zero]
                    continue
                rest = (*self.slots[:k], "skip", *self.slots[k + 1:])
                if self.wrt is None:  # a swapped operand of einsum: its adjoint
                    vjps.append(EinsumTerm(("g", *rest), slot[1]))
                elif slot == "g":  # einsum with operand wrt swapped for the cotangent
                    vjps.append(EinsumTerm((("swap", self.wrt), *rest), None))
                else:  # swapped operand p: p's adjoint, wrt swapped for the cotangent
                    vjps.append(EinsumTerm((("swap", self.wrt), *rest), slot[1]))
                jvps += [registry.LINEAR, zero]
                vjps.append(zero)
            jvps.append(None)  # the spec
            vjps.append(None)
            swapped = {slot[1] for slot in self.slots if isinstance(slot, tuple)}
            for j in range(8):
                if j in swapped or j == self.wrt:  # not read, or read for its shape
                    jvps.append(zero)
                    vjps.append(zero)
                    continue
                jvps.append(registry.LINEAR)
                vjps.append(EinsumTerm(("g", *self.slots), j) if self.wrt is None
                            else EinsumTerm((("swap", self.wrt), *self.slots), j))
            self._rule = registry.Rule(self, tuple(vjps), origin="ast_ad.runtime", jvps=tuple(jvps))
        return self._rule


def list_jvp(u: Any, x: Any) -> Any:
    """Tangent of ``list(x)``: the items' tangents; where ``x`` is a dict or a set, the result is
    its keys or members, which carry no derivative (zeros). Written in the language ast_ad
    differentiates (a derivative of a forward-mode derivative reads it)."""
    if isinstance(x, (Mapping, AbstractSet)):
        return [0.0] * len(x)
    return list(u)


def tuple_jvp(u: Any, x: Any) -> Any:
    """Tangent of ``tuple(x)``, as ``list_jvp``."""
    if isinstance(x, (Mapping, AbstractSet)):
        return tuple([0.0] * len(x))
    return tuple(u)
