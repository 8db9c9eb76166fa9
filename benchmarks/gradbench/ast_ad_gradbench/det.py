"""GradBench's ``det`` eval: the determinant by expansion by minors, and its gradient.

The expansion runs along the rows from the bottom up; a minor that several expansions share is
computed once (all minors of the bottom k rows at once, one array of them per k), so the work is 2^l
l products instead of l!, and the expansion itself is the same sum.
"""

import itertools

import numpy as np

import ast_ad

from .wrap import timed


def minors(ell):
    """For each k, the column sets of size k (as rows of indices), and for each set and each of its
    columns, the position of the set without it among the sets of size k - 1, and the sign of the
    term."""
    tables = []
    previous = {(): 0}
    for k in range(1, ell + 1):
        sets = list(itertools.combinations(range(ell), k))
        position = {s: i for i, s in enumerate(sets)}
        columns = np.array(sets)
        without = np.array([[previous[s[:j] + s[j + 1:]] for j in range(k)] for s in sets])
        signs = np.array([(-1.0) ** j for j in range(k)])
        tables.append((columns, without, signs))
        previous = position
    return tables


def det(a, tables):
    """The determinant of the square matrix ``a``: the minors of its bottom k rows from those of k -
    1."""
    ell = a.shape[0]
    below = np.ones(1)
    for k in range(1, ell + 1):
        columns, without, signs = tables[k - 1]
        row = a[ell - k][columns]  # each set's entries of the row being expanded
        below = np.sum(signs * row * below[without], axis=1)
    return below[0]


_TABLES = {}


def _input(raw):
    ell = int(raw["ell"])
    if ell not in _TABLES:
        _TABLES[ell] = minors(ell)
    return np.array(raw["A"], dtype=np.float64).reshape(ell, ell), _TABLES[ell]


gradient_of_det = ast_ad.grad(det)

FUNCTIONS = {
    "primal": timed(pre=_input, post=float)(lambda given: det(*given)),
    "gradient": timed(pre=_input, post=lambda g: g.ravel().tolist())(
        lambda given: gradient_of_det(*given)
    ),
}
