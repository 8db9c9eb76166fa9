"""Rules for scipy.linalg with differentiated matrices: ``solve`` (general, or reading one triangle
of a symmetric matrix), ``solve_triangular`` and ``expm``; registered only where scipy is
installed, when code first names scipy.

The helpers are written in the language ast_ad differentiates (scipy's own calls, whose rules are
here, and numpy's), so a derivative of a derivative reads them by their source. A matrix that scipy
reads one triangle of (``assume_a="sym"``, ``solve_triangular``) gets its adjoint in that triangle
only: the other entries do not change the result.
"""

try:
    import scipy.linalg as sl
except ImportError:  # pragma: no cover - scipy is optional
    sl = None

from typing import Any

import numpy as np

from ast_ad.core.registry import def_helpers, def_linear, def_sequence, defjvp, defvjp
from ast_ad.runtime import cholesky_jvp, cholesky_vjp, dense_adjoint


def columns_product(left: Any, right: Any) -> Any:
    """``left right^T`` for the adjoint of a matrix in ``A x = b``: an outer product where ``x`` is
    a vector, a matrix product where it holds several columns."""
    if np.ndim(right) == 1:
        return np.outer(left, right)
    return left @ np.swapaxes(right, -1, -2)


def folded_triangle(full: Any, lower: Any) -> Any:
    """The adjoint of the triangle a symmetric matrix is built from, from the adjoint ``full`` of
    the whole symmetric matrix: an entry off the diagonal stands in two places."""
    both = full + np.swapaxes(full, -1, -2)
    kept = np.tril(both) if lower else np.triu(both)
    return kept - np.eye(np.shape(full)[-1]) * full


def symmetric_from_triangle(a: Any, lower: Any) -> Any:
    """The symmetric matrix scipy builds from one triangle of ``a``."""
    kept = np.tril(a) if lower else np.triu(a)
    return kept + np.swapaxes(kept, -1, -2) - np.eye(np.shape(a)[-1]) * a


def one_triangle(assume_a: Any) -> Any:
    """Whether ``scipy.linalg.solve`` reads one triangle of a symmetric matrix for ``assume_a``
    (real matrices); ``None`` (scipy picks a solver by the structure it finds, whose answer is the
    general solve's), ``"gen"`` and ``"general"`` read the whole matrix."""
    return assume_a in ("sym", "symmetric", "pos", "positive definite")


def solve_kind(assume_a: Any) -> Any:
    """``assume_a`` as every scipy version reads it (``None`` is the general solve's answer)."""
    return "gen" if assume_a is None else assume_a


def checked_assume_a(assume_a: Any) -> Any:
    if assume_a not in (None, "gen", "general") and not one_triangle(assume_a):
        raise NotImplementedError(
            f"the gradient of scipy.linalg.solve with assume_a={assume_a!r}: ast_ad follows "
            "the general solve and one triangle of a symmetric matrix ('sym', 'pos')"
        )


def solve_vjp_a(g: Any, ans: Any, a: Any, b: Any,
                lower: Any = False, assume_a: Any = None, transposed: Any = False) -> Any:
    """Adjoint of ``a`` in ``scipy.linalg.solve(a, b, ...)``: ``-A^-T g x^T`` for ``A x = b``
    (``-x (A^-1 g)^T`` for ``transposed``), folded onto the triangle a symmetric solve reads."""
    checked_assume_a(assume_a)
    b_bar = sl.solve(a, g, lower=lower, assume_a=solve_kind(assume_a), transposed=not transposed)
    if one_triangle(assume_a):
        return folded_triangle(-columns_product(b_bar, ans), lower)
    if transposed:
        return -columns_product(ans, b_bar)
    return -columns_product(b_bar, ans)


def solve_vjp_b(g: Any, ans: Any, a: Any, b: Any,
                lower: Any = False, assume_a: Any = None, transposed: Any = False) -> Any:
    """Adjoint of ``b``: ``A^-T g`` (``A^-1 g`` for ``transposed``)."""
    checked_assume_a(assume_a)
    return sl.solve(a, g, lower=lower, assume_a=solve_kind(assume_a), transposed=not transposed)


def solve_jvp_a(u: Any, ans: Any, a: Any, b: Any,
                lower: Any = False, assume_a: Any = None, transposed: Any = False) -> Any:
    """Tangent of ``x`` along ``u``, the tangent of ``a``: ``-A^-1 (u x)`` (the tangent of the
    symmetric matrix a symmetric solve builds, where it reads one triangle)."""
    checked_assume_a(assume_a)
    if one_triangle(assume_a):
        moved = symmetric_from_triangle(u, lower) @ ans
    elif transposed:
        moved = np.swapaxes(u, -1, -2) @ ans
    else:
        moved = u @ ans
    return -sl.solve(a, moved, lower=lower, assume_a=solve_kind(assume_a), transposed=transposed)


def read_triangle(a: Any, lower: Any, unit_diagonal: Any) -> Any:
    """The entries ``solve_triangular`` reads: one triangle, without the diagonal where it is taken
    to be ones."""
    offset = (-1 if lower else 1) if unit_diagonal else 0
    return np.tril(a, offset) if lower else np.triu(a, offset)


def flipped_trans(trans: Any) -> Any:
    """The ``trans=`` of the transposed system (real matrices: the conjugate transpose is the
    transpose)."""
    return 0 if trans in (1, 2, "T", "C") else 1


def triangular_vjp_a(g: Any, ans: Any, a: Any, b: Any,
                     trans: Any = 0, lower: Any = False, unit_diagonal: Any = False) -> Any:
    """Adjoint of ``a`` in ``solve_triangular``: that of the triangle it reads (``-T^-T g x^T``, or
    its transpose for ``trans``), zero elsewhere."""
    b_bar = sl.solve_triangular(a, g, trans=flipped_trans(trans), lower=lower,
                                unit_diagonal=unit_diagonal)
    if trans in (1, 2, "T", "C"):
        return -read_triangle(columns_product(ans, b_bar), lower, unit_diagonal)
    return -read_triangle(columns_product(b_bar, ans), lower, unit_diagonal)


def triangular_vjp_b(g: Any, ans: Any, a: Any, b: Any,
                     trans: Any = 0, lower: Any = False, unit_diagonal: Any = False) -> Any:
    """Adjoint of ``b`` in ``solve_triangular``: the transposed system solved for ``g``."""
    return sl.solve_triangular(a, g, trans=flipped_trans(trans), lower=lower,
                               unit_diagonal=unit_diagonal)


def triangular_jvp_a(u: Any, ans: Any, a: Any, b: Any,
                     trans: Any = 0, lower: Any = False, unit_diagonal: Any = False) -> Any:
    """Tangent of ``x`` along ``u``, the tangent of ``a``: ``-T^-1 (U x)`` with ``U`` the part of
    ``u`` the solve reads (transposed for ``trans``)."""
    part = read_triangle(u, lower, unit_diagonal)
    if trans in (1, 2, "T", "C"):
        part = np.swapaxes(part, -1, -2)
    return -sl.solve_triangular(a, part @ ans, trans=trans, lower=lower,
                                unit_diagonal=unit_diagonal)


def expm_frechet_of(a: Any, e: Any) -> Any:
    """The derivative of ``expm`` at ``a`` in the direction ``e``: the top right block of the
    exponential of ``[[a, e], [0, a]]`` (Mathias's identity), written with calls that have rules,
    so it is differentiable again."""
    n = np.shape(a)[-1]
    top = np.concatenate([a, e], axis=-1)
    bottom = np.concatenate([np.zeros_like(a), a], axis=-1)
    return sl.expm(np.concatenate([top, bottom], axis=-2))[..., :n, n:]


# ---- factorizations: Cholesky's and LU's, and the solves with them -------------------------------
def cho_factor_vjp(g: Any, c: Any, lower: Any) -> Any:
    """Adjoint of ``a`` in ``c, lower = cho_factor(a, lower)``: the factor's triangle by
    Cholesky's rule (in the triangle of ``a`` it reads), and the other triangle of ``c``, which
    holds ``a``'s entries as they were, passed through."""
    factor = np.tril(c) if lower else np.swapaxes(np.triu(c), -1, -2)
    g_factor = np.tril(g) if lower else np.swapaxes(np.triu(g), -1, -2)
    read = cholesky_vjp(g_factor, factor)
    kept = np.triu(g, 1) if lower else np.tril(g, -1)
    return (read if lower else np.swapaxes(read, -1, -2)) + kept


def cho_factor_jvp(u: Any, c: Any, lower: Any) -> Any:
    """Tangent of ``c`` in ``cho_factor``: the factor's (its triangle), and ``u``'s own entries in
    the other triangle."""
    if lower:
        return cholesky_jvp(u, np.tril(c)) + np.triu(u, 1)
    moved = cholesky_jvp(np.swapaxes(u, -1, -2), np.swapaxes(np.triu(c), -1, -2))
    return np.swapaxes(moved, -1, -2) + np.tril(u, -1)


def cho_solve_vjp_factor(g: Any, ans: Any, c: Any, lower: Any) -> Any:
    """Adjoint of ``c`` in ``x = cho_solve((c, lower), b)``, ``A = L L^T`` (or ``U^T U``): with
    ``b_bar = A^-1 g`` and ``A_bar = -b_bar x^T``, ``L_bar = (A_bar + A_bar^T) L`` in the triangle
    read (``U_bar = U (A_bar + A_bar^T)``)."""
    b_bar = sl.cho_solve((c, lower), g)
    a_bar = -columns_product(b_bar, ans)
    both = a_bar + np.swapaxes(a_bar, -1, -2)
    if lower:
        return np.tril(both @ np.tril(c))
    return np.triu(np.triu(c) @ both)


def cho_solve_jvp_factor(u: Any, ans: Any, c: Any, lower: Any) -> Any:
    """Tangent of ``x`` along ``u``, the tangent of ``c``: ``-A^-1 (A_dot x)``, ``A_dot`` from the
    factor's triangle of ``u``."""
    if lower:
        factor, moved = np.tril(c), np.tril(u)
        a_dot = moved @ np.swapaxes(factor, -1, -2) + factor @ np.swapaxes(moved, -1, -2)
    else:
        factor, moved = np.triu(c), np.triu(u)
        a_dot = np.swapaxes(moved, -1, -2) @ factor + np.swapaxes(factor, -1, -2) @ moved
    return -sl.cho_solve((c, lower), a_dot @ ans)


def pivoted(piv: Any) -> Any:
    """The order ``lu_factor``'s row interchanges put the rows in: ``a[order] = L U``."""
    order = np.arange(np.shape(piv)[-1])
    for i in range(np.shape(piv)[-1]):
        j = int(piv[i])
        order[[i, j]] = order[[j, i]]
    return order


def lu_factor_vjp(g: Any, lu: Any, piv: Any) -> Any:
    """Adjoint of ``a`` in ``lu, piv = lu_factor(a)``, ``a[order] = L U``: with ``L_bar``, ``U_bar``
    the parts of ``g``, ``L^-T (tril(L^T L_bar, -1) + triu(U_bar U^T)) U^-T``, rows put back."""
    n = np.shape(lu)[-1]
    unit = np.tril(lu, -1) + np.eye(n)
    upper = np.triu(lu)
    inner = np.tril(unit.T @ np.tril(g, -1), -1) + np.triu(np.triu(g) @ upper.T)
    left = sl.solve_triangular(unit, inner, trans=1, lower=True, unit_diagonal=True)
    ordered = sl.solve_triangular(upper, left.T, trans=0, lower=False).T
    out = np.zeros_like(ordered)
    out[pivoted(piv)] = ordered
    return out


def lu_factor_jvp(u: Any, lu: Any, piv: Any) -> Any:
    """Tangent of ``lu``: with ``M = L^-1 u[order] U^-1``, ``L_dot = L tril(M, -1)`` below the
    diagonal and ``U_dot = triu(M) U`` on and above it."""
    n = np.shape(lu)[-1]
    unit = np.tril(lu, -1) + np.eye(n)
    upper = np.triu(lu)
    left = sl.solve_triangular(unit, u[pivoted(piv)], lower=True, unit_diagonal=True)
    inner = sl.solve_triangular(upper, left.T, trans=1, lower=False).T
    return np.tril(unit @ np.tril(inner, -1), -1) + np.triu(np.triu(inner) @ upper)


def lu_solve_vjp_factor(g: Any, ans: Any, lu: Any, piv: Any, trans: Any = 0) -> Any:
    """Adjoint of ``lu`` in ``x = lu_solve((lu, piv), b, trans)``, ``A[order] = L U``: ``A_bar``
    as for a solve, then ``L_bar = A_bar[order] U^T`` below the diagonal and ``U_bar = L^T
    A_bar[order]`` on and above it."""
    n = np.shape(lu)[-1]
    transposed = trans in (1, 2, "T", "C")
    b_bar = sl.lu_solve((lu, piv), g, trans=0 if transposed else 1)
    a_bar = -columns_product(ans, b_bar) if transposed else -columns_product(b_bar, ans)
    ordered = a_bar[pivoted(piv)]
    unit = np.tril(lu, -1) + np.eye(n)
    return np.tril(ordered @ np.triu(lu).T, -1) + np.triu(unit.T @ ordered)


def lu_solve_jvp_factor(u: Any, ans: Any, lu: Any, piv: Any, trans: Any = 0) -> Any:
    """Tangent of ``x`` along ``u``, the tangent of ``lu``: ``-A^-1 (A_dot x)`` (transposed for
    ``trans``), ``A_dot[order] = L_dot U + L U_dot``."""
    n = np.shape(lu)[-1]
    unit = np.tril(lu, -1) + np.eye(n)
    ordered = np.tril(u, -1) @ np.triu(lu) + unit @ np.triu(u)
    a_dot = np.zeros_like(ordered)
    a_dot[pivoted(piv)] = ordered
    if trans in (1, 2, "T", "C"):
        a_dot = np.swapaxes(a_dot, -1, -2)
    return -sl.lu_solve((lu, piv), a_dot @ ans, trans=trans)


if sl is not None:
    def_helpers(solve_vjp_a, solve_vjp_b, solve_jvp_a, triangular_vjp_a, triangular_vjp_b,
                triangular_jvp_a, expm_frechet_of, columns_product, folded_triangle,
                symmetric_from_triangle, read_triangle, solve_kind, checked_assume_a, flipped_trans,
                one_triangle, cho_factor_vjp, cho_factor_jvp, cho_solve_vjp_factor,
                cho_solve_jvp_factor, pivoted, lu_factor_vjp, lu_factor_jvp, lu_solve_vjp_factor,
                lu_solve_jvp_factor)
    defvjp(
        sl.solve,
        lambda g, ans, a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
        assume_a=None, transposed=False: solve_vjp_a(g, ans, a, b, lower, assume_a, transposed),
        lambda g, ans, a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
        assume_a=None, transposed=False: solve_vjp_b(g, ans, a, b, lower, assume_a, transposed),
    )
    defjvp(
        sl.solve,
        lambda u, ans, a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
        assume_a=None, transposed=False: solve_jvp_a(u, ans, a, b, lower, assume_a, transposed),
        lambda u, ans, a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
        assume_a=None, transposed=False: sl.solve(a, dense_adjoint(u, b), lower=lower,
                                                  assume_a=solve_kind(assume_a),
                                                  transposed=transposed),
    )
    def_linear(sl.solve, 1)
    # (the linear argument's tangent may be a float zero, which scipy's solves do not take)
    defvjp(
        sl.solve_triangular,
        lambda g, ans, a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
        check_finite=True: triangular_vjp_a(g, ans, a, b, trans, lower, unit_diagonal),
        lambda g, ans, a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
        check_finite=True: triangular_vjp_b(g, ans, a, b, trans, lower, unit_diagonal),
    )
    defjvp(
        sl.solve_triangular,
        lambda u, ans, a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
        check_finite=True: triangular_jvp_a(u, ans, a, b, trans, lower, unit_diagonal),
        lambda u, ans, a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
        check_finite=True: sl.solve_triangular(a, dense_adjoint(u, b), trans=trans, lower=lower,
                                               unit_diagonal=unit_diagonal),
    )
    def_linear(sl.solve_triangular, 1)
    defvjp(sl.expm, lambda g, ans, a: expm_frechet_of(np.swapaxes(a, -1, -2), g))
    defjvp(sl.expm, lambda u, ans, a: expm_frechet_of(a, u))
    # the factorizations return pairs: the factor carries the derivative, the flag and the pivots
    # none (their adjoints' second parts are zero)
    defvjp(sl.cho_factor, lambda g, ans, a, lower=False, overwrite_a=False, check_finite=True:
           cho_factor_vjp(g[0], ans[0], lower))
    defjvp(sl.cho_factor, lambda u, ans, a, lower=False, overwrite_a=False, check_finite=True:
           (cho_factor_jvp(u, ans[0], lower), 0.0))
    defvjp(sl.cho_solve,
           lambda g, ans, c_and_lower, b, overwrite_b=False, check_finite=True:
           (cho_solve_vjp_factor(g, ans, c_and_lower[0], c_and_lower[1]), 0.0),
           lambda g, ans, c_and_lower, b, overwrite_b=False, check_finite=True:
           sl.cho_solve(c_and_lower, g))
    defjvp(sl.cho_solve,
           lambda u, ans, c_and_lower, b, overwrite_b=False, check_finite=True:
           cho_solve_jvp_factor(u[0], ans, c_and_lower[0], c_and_lower[1]),
           lambda u, ans, c_and_lower, b, overwrite_b=False, check_finite=True:
           sl.cho_solve(c_and_lower, dense_adjoint(u, b)))
    def_linear(sl.cho_solve, 1)
    defvjp(sl.lu_factor, lambda g, ans, a, overwrite_a=False, check_finite=True:
           lu_factor_vjp(g[0], ans[0], ans[1]))
    defjvp(sl.lu_factor, lambda u, ans, a, overwrite_a=False, check_finite=True:
           (lu_factor_jvp(u, ans[0], ans[1]), np.zeros(np.shape(ans[1]))))
    defvjp(sl.lu_solve,
           lambda g, ans, lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True:
           (lu_solve_vjp_factor(g, ans, lu_and_piv[0], lu_and_piv[1], trans), 0.0),
           lambda g, ans, lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True:
           sl.lu_solve(lu_and_piv, g, trans=flipped_trans(trans)))
    defjvp(sl.lu_solve,
           lambda u, ans, lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True:
           lu_solve_jvp_factor(u[0], ans, lu_and_piv[0], lu_and_piv[1], trans),
           lambda u, ans, lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True:
           sl.lu_solve(lu_and_piv, dense_adjoint(u, b), trans=trans))
    def_linear(sl.lu_solve, 1)
    def_sequence(sl.cho_factor, sl.lu_factor)
