"""Rules for sparse matrices whose stored entries are differentiated (their pattern fixed):
``scipy.sparse``'s CSR and CSC constructors, from ``(data, indices, indptr)`` or ``(data, (row,
col))``, and ``scipy.sparse.linalg.spsolve``; registered only where scipy is installed, when code
first names scipy.

A sparse matrix's adjoint is kept as what it is, a sum of outer products (``OuterSum``:
``spsolve``'s ``-A^-T g x^T``), or a dense array (a product's), never a dense matrix of the whole
size made for it; the constructor reads it at each stored entry's row and column, so duplicate
entries (which scipy adds) and an order scipy changes in place (``sort_indices``, which ``spsolve``
may call) give each entry its own adjoint. A second derivative through these rules is not followed
yet (``OuterSum`` has no rules of its own).
"""

from typing import Any

try:
    import scipy.sparse as ss
    import scipy.sparse.linalg as ssl
except ImportError:  # pragma: no cover - scipy is optional
    ss = ssl = None

import numpy as np

from ast_ad.core.registry import def_helpers, def_linear, defjvp, defvjp
from ast_ad.runtime import OuterSum


def _rows_cols(parts: Any, shape: Any, compressed_rows: bool) -> tuple[Any, Any]:
    """Each stored entry's row and column, from the constructor's ``(data, indices, indptr)`` (of
    rows for CSR, of columns for CSC) or ``(data, (row, col))``."""
    if isinstance(parts[1], tuple):
        return np.asarray(parts[1][0]), np.asarray(parts[1][1])
    indices, indptr = np.asarray(parts[1]), np.asarray(parts[2])
    major = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return (major, indices) if compressed_rows else (indices, major)


def sparse_data_vjp(g: Any, parts: Any, shape: Any, compressed_rows: bool) -> Any:
    """The adjoint of the constructor's parts: its data's, ``g`` read at each entry (zero for the
    integer indices)."""
    rows, cols = _rows_cols(parts, shape, compressed_rows)
    if isinstance(g, OuterSum):
        data_bar = g.at(rows, cols)
    elif g is None or (isinstance(g, float) and g == 0.0):
        data_bar = np.zeros(np.shape(parts[0]))
    else:
        dense = g.toarray() if hasattr(g, "toarray") else np.asarray(g)
        data_bar = dense[rows, cols]
    rest = (0.0, 0.0) if isinstance(parts[1], tuple) else 0.0
    return (data_bar, rest) if isinstance(parts[1], tuple) else (data_bar, 0.0, 0.0)


def sparse_tangent(kind: Any, u: Any, parts: Any, shape: Any) -> Any:
    """The tangent of a sparse matrix made from ``parts``: one of the same pattern, holding the
    data's tangent."""
    moved = (u[0], *parts[1:])
    return kind(moved, shape=shape)


def spsolve_vjp_a(g: Any, ans: Any, a: Any) -> Any:
    """Adjoint of ``A`` in ``x = spsolve(A, b)``: ``-A^-T g x^T``, as its factors."""
    b_bar = ssl.spsolve(a.T.tocsc(), g)
    return OuterSum([(-np.asarray(b_bar), np.asarray(ans))])


def spsolve_jvp_a(u: Any, ans: Any, a: Any) -> Any:
    """Tangent of ``x = spsolve(A, b)`` along ``u``, the tangent of ``A`` (a sparse matrix of its
    pattern): ``-A^-1 (u x)``."""
    return -ssl.spsolve(a, u @ ans)


def spsolve_vjp_b(g: Any, a: Any) -> Any:
    """Adjoint of ``b``: ``A^-T g``."""
    return ssl.spsolve(a.T.tocsc(), g)


def csr_vjp(g: Any, arg1: Any, shape: Any) -> Any:
    return sparse_data_vjp(g, arg1, shape, True)


def csc_vjp(g: Any, arg1: Any, shape: Any) -> Any:
    return sparse_data_vjp(g, arg1, shape, False)


if ss is not None:
    def_helpers(spsolve_vjp_a, spsolve_vjp_b, spsolve_jvp_a, csr_vjp, csc_vjp, sparse_data_vjp,
                sparse_tangent)
    defvjp(ss.csr_matrix, lambda g, ans, arg1, shape=None, dtype=None, copy=False:
           csr_vjp(g, arg1, shape))
    defvjp(ss.csr_array, lambda g, ans, arg1, shape=None, dtype=None, copy=False:
           csr_vjp(g, arg1, shape))
    defvjp(ss.csc_matrix, lambda g, ans, arg1, shape=None, dtype=None, copy=False:
           csc_vjp(g, arg1, shape))
    defvjp(ss.csc_array, lambda g, ans, arg1, shape=None, dtype=None, copy=False:
           csc_vjp(g, arg1, shape))
    defjvp(ss.csr_matrix, lambda u, ans, arg1, shape=None, dtype=None, copy=False:
           sparse_tangent(ss.csr_matrix, u, arg1, shape))
    defjvp(ss.csr_array, lambda u, ans, arg1, shape=None, dtype=None, copy=False:
           sparse_tangent(ss.csr_array, u, arg1, shape))
    defjvp(ss.csc_matrix, lambda u, ans, arg1, shape=None, dtype=None, copy=False:
           sparse_tangent(ss.csc_matrix, u, arg1, shape))
    defjvp(ss.csc_array, lambda u, ans, arg1, shape=None, dtype=None, copy=False:
           sparse_tangent(ss.csc_array, u, arg1, shape))
    defvjp(ssl.spsolve,
           lambda g, ans, A, b, permc_spec=None, use_umfpack=True: spsolve_vjp_a(g, ans, A),
           lambda g, ans, A, b, permc_spec=None, use_umfpack=True: spsolve_vjp_b(g, A))
    defjvp(ssl.spsolve,
           lambda u, ans, A, b, permc_spec=None, use_umfpack=True: spsolve_jvp_a(u, ans, A))
    def_linear(ssl.spsolve, 1)
