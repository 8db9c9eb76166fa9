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

from ast_ad.core.registry import def_helpers, def_linear, defjvp, defvjp


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


if sl is not None:
    def_helpers(solve_vjp_a, solve_vjp_b, solve_jvp_a, triangular_vjp_a, triangular_vjp_b,
                triangular_jvp_a, expm_frechet_of, columns_product, folded_triangle,
                symmetric_from_triangle, read_triangle, solve_kind, checked_assume_a, flipped_trans,
                one_triangle)
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
    )
    def_linear(sl.solve, 1)
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
    )
    def_linear(sl.solve_triangular, 1)
    defvjp(sl.expm, lambda g, ans, a: expm_frechet_of(np.swapaxes(a, -1, -2), g))
    defjvp(sl.expm, lambda u, ans, a: expm_frechet_of(a, u))
