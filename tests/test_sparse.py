"""Sparse Jacobians and Hessians (``api.sparse``): against the dense ones, on written cases and on
random programs; every forward rule's sparsity pattern against the nonzero entries of its Jacobian;
the colouring; the patterns kept, and those found again because the code's path moves."""

from __future__ import annotations

import copy
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import ast_ad
from ast_ad.api import lowering, sparse
from ast_ad.core import registry
from ast_ad.runtime.batched import Batch, Pattern, batched_pass, is_batch
from ast_ad.testing import tracer
from ast_ad.testing.random_programs import programs
from tests.rule_cases import CASES
from tests.strategies import half
from tests.test_batched import _value_and_square, flat
from tests.test_rules import FORWARD, _name, is_float, observed

DIRECTORY = tempfile.mkdtemp(prefix="ast_ad_sparse_")


def banded(x):
    y = x ** 2
    y[1:] = y[1:] - x[:-1] * 3.0
    y[:-1] = y[:-1] + np.sin(x[1:])
    return y


def stencil(x):
    y = np.zeros(x.size)
    for i in range(1, x.size - 1):
        y[i] = x[i - 1] * x[i + 1] - np.cos(x[i])
    return y


def rosenbrock(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def mixed(x, W):
    head = W @ x[:3]  # dense in x[:3]
    tail = np.cumsum(x[3:]) * np.diff(np.concatenate([x[:1], x[3:]]))
    return np.concatenate([head, tail, np.where(x > 0.0, x, 0.0) * x[::-1]])


def branching(x):
    if x[0] > 0.0:
        return x[1:] * x[:-1]
    return x[1:] * 2.0


def sorting(x):
    return np.sort(x) * np.arange(x.size)


def counted(x, n):
    y = x * 1.0
    for i in range(n):
        y[i + 1] = y[i + 1] + y[i] * x[i]
    return y


X = np.linspace(-0.9, 1.2, 9)
W = np.arange(12.0).reshape(4, 3) / 10


@pytest.mark.parametrize("fn, args", [
    (banded, (X,)), (stencil, (X,)), (mixed, (X, W)), (branching, (X,)), (branching, (-X,)),
    (sorting, (X,)), (counted, (X, 4)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_a_sparse_jacobian_is_the_dense_one(fn, args) -> None:
    jac = ast_ad.jacobian(fn, sparse=True)(*args)
    dense = ast_ad.jacfwd(fn)(*args)
    assert type(jac).__name__ == "csr_array" and jac.shape == dense.shape
    np.testing.assert_array_equal(jac.toarray(), dense)
    # the entries it keeps: the pattern, a superset of the nonzero ones
    assert np.all(jac.toarray()[dense != 0] != 0)


def test_a_banded_jacobian_has_three_colours_and_its_pattern() -> None:
    x = np.linspace(0.1, 1.0, 200)
    pattern = ast_ad.sparsity(banded)(x)
    assert pattern.nnz == 3 * 200 - 2
    rows, columns, _ = sparse.given_pattern(pattern)
    assert sparse.coloured(rows, columns, 200).max() + 1 == 3
    given = ast_ad.jacobian(banded, sparse=pattern)(x)
    np.testing.assert_array_equal(given.toarray(), ast_ad.jacfwd(banded)(x))


def test_a_sparse_hessian_is_the_dense_one() -> None:
    x = np.linspace(-1.0, 1.5, 30)
    hess = ast_ad.hessian(rosenbrock, sparse=True)(x)
    np.testing.assert_allclose(hess.toarray(), ast_ad.hessian(rosenbrock)(x), rtol=1e-13)
    assert hess.nnz == 3 * 30 - 2


@pytest.mark.parametrize("fn, args, holds", [
    (banded, (X,), True), (stencil, (X,), True), (counted, (X, 4), True),
    (branching, (X,), False), (sorting, (X,), False),
    (mixed, (X, W), False),  # (np.where's test reads x's values)
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_a_pattern_is_kept_only_where_it_holds_everywhere(fn, args, holds) -> None:
    assert sparse.holds_everywhere(lowering.lower(fn, args), 0) is holds


def test_a_hessian_s_pattern_is_kept_where_its_adjoint_starts_from_the_argument_s_zeros() -> None:
    """The gradient's code starts ``x``'s adjoint as zeros of ``x``'s shape (``owned_adjoint(0.0,
    x)``), which reads ``x`` only for its shape and dtype (``registry.def_meta_read``): the
    Hessian's pattern still holds everywhere, and is found once."""
    x = np.linspace(-1.0, 1.5, 30)
    gradient = ast_ad.grad(rosenbrock)
    assert sparse.holds_everywhere(lowering.lower(gradient, (x,)), 0)
    hess = ast_ad.hessian(rosenbrock, sparse=True)
    found = []
    original = sparse.pattern_of
    sparse.pattern_of = lambda *a: found.append(1) or original(*a)
    try:
        first, second = hess(x), hess(x * 0.5)
    finally:
        sparse.pattern_of = original
    assert len(found) == 1
    np.testing.assert_allclose(second.toarray(), ast_ad.hessian(rosenbrock)(x * 0.5), rtol=1e-13)
    np.testing.assert_allclose(first.toarray(), ast_ad.hessian(rosenbrock)(x), rtol=1e-13)


def test_a_pattern_found_where_the_path_moves_is_found_again() -> None:
    """``branching`` takes the other branch at ``-X``: one sparse Jacobian object, called at both
    points, gives each its own (a kept pattern would give the first's entries at the second)."""
    jac = ast_ad.jacobian(branching, sparse=True)
    for x in (X, -X, X):
        np.testing.assert_array_equal(jac(x).toarray(), ast_ad.jacfwd(branching)(x))
    counts = ast_ad.jacobian(counted, sparse=True)
    for n in (2, 5, 2):  # kept for each bound of the loop apart
        np.testing.assert_array_equal(counts(X, n).toarray(), ast_ad.jacfwd(counted)(X, n))


def test_sparse_refusals_say_what_to_write() -> None:
    with pytest.raises(ast_ad.errors.ASTADError, match="argnums an int"):
        ast_ad.jacobian(mixed, (0, 1), sparse=True)
    with pytest.raises(ast_ad.errors.ASTADError, match="array argument"):
        ast_ad.jacobian(lambda s: np.array([s, s * 2]), sparse=True)(0.5)
    with pytest.raises(ast_ad.errors.ASTADError, match="columns"):
        ast_ad.jacobian(banded, sparse=np.eye(4))(X)
    with pytest.raises(ast_ad.errors.ASTADError, match="scipy sparse matrix or a 2-d array"):
        ast_ad.jacobian(banded, sparse="banded")(X)
    with pytest.raises(ast_ad.errors.ASTADError, match="not differentiated again"):
        ast_ad.jacfwd(ast_ad.jacobian(banded, sparse=True))(X)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 40), st.data())
def test_a_colouring_never_gives_two_columns_of_a_row_one_colour(n, data) -> None:
    entries = data.draw(st.lists(st.tuples(st.integers(0, 30), st.integers(0, n - 1)),
                                 max_size=120, unique=True))
    rows = np.array([r for r, _ in entries], dtype=np.intp)
    columns = np.array([c for _, c in entries], dtype=np.intp)
    colour = sparse.coloured(rows, columns, n)
    assert colour.min() >= 0
    for r in set(rows.tolist()):
        seen = colour[columns[rows == r]]
        assert len(set(seen.tolist())) == len(seen)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 30), st.data())
def test_a_star_colouring_recovers_every_symmetric_matrix_of_its_pattern(n, data) -> None:
    """Any symmetric matrix with this pattern, compressed by the star colouring's columns, gives
    back each of its entries (from its row, or mirrored from its column)."""
    entries = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)),
                                 max_size=80))
    rows = np.array([r for r, _ in entries] + list(range(n)), dtype=np.intp)
    columns = np.array([c for _, c in entries] + list(range(n)), dtype=np.intp)
    rows, columns = sparse._symmetric(rows, columns, n)
    colour = sparse.star_coloured(rows, columns, n)
    rng = np.random.default_rng(n)
    matrix = np.zeros((n, n))
    matrix[rows, columns] = rng.standard_normal(len(rows))
    matrix = matrix + matrix.T
    seeds = np.zeros((colour.max() + 1, n))
    seeds[colour, np.arange(n)] = 1.0
    compressed = seeds @ matrix  # (row k: the sum of the columns of colour k, as a row)
    np.testing.assert_array_equal(sparse.star_entries(rows, columns, colour, compressed),
                                  matrix[rows, columns])


def test_an_arrow_shaped_hessian_takes_two_colours() -> None:
    """One variable coupled to all, the rest to themselves: a column colouring needs a colour a
    column, a star colouring two."""

    def arrow(x):
        return x[0] * np.sum(x[1:] ** 2) + np.sum(np.sin(x))

    x = np.linspace(0.1, 1.0, 40)
    hess = ast_ad.hessian(arrow, sparse=True)(x)
    np.testing.assert_allclose(hess.toarray(), ast_ad.hessian(arrow)(x), rtol=1e-13)
    rows, columns, _ = sparse.given_pattern(hess)
    assert sparse.star_coloured(rows, columns, 40).max() + 1 == 2
    assert sparse.coloured(rows, columns, 40).max() + 1 == 40


# ---- every forward rule: its pattern holds its Jacobian's nonzero entries ----------------------
def _dense_columns(rule, k, arg, ans, args, kwargs):
    """The rule's Jacobian in argument ``k`` (a float or an array of floats), column by column."""
    n = np.size(arg)
    eye = np.eye(n).reshape((n, *np.shape(arg)))
    with batched_pass(n):
        return observed(tracer.tangent(rule, k, Batch(eye), ans, args, kwargs), ans, rule.fn)


def _bits(pattern, n):
    """The pattern's words as a boolean matrix: entries by inputs."""
    data = pattern.data.reshape(pattern.data.shape[0], -1)
    bits = np.unpackbits(np.ascontiguousarray(data.T).astype("<u8").view(np.uint8).reshape(
        data.shape[1], -1), axis=1, bitorder="little")
    return bits[:, :n].astype(bool)


@pytest.mark.parametrize("rule", FORWARD, ids=_name)
@settings(max_examples=2, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_forward_rule_s_pattern_holds_its_nonzero_entries(rule: registry.Rule, data) -> None:
    """Every forward rule in the registry, given a pattern for an array (or float) argument: each
    entry of its tangent's pattern holds every input its Jacobian's entry is nonzero for (or the
    pattern is refused)."""
    args, kwargs = data.draw(CASES[rule.fn])
    ans = rule.fn(*args, **kwargs)
    for k, arg in enumerate(args):
        if rule.jvp(k) is None or not is_float(arg) or np.iscomplexobj(arg) or np.size(arg) == 0:
            continue
        n = int(np.size(arg))
        try:
            dense = _dense_columns(rule, k, arg, ans, args, kwargs)
            seed = Pattern.seeded(n, np.shape(arg))
            with batched_pass(seed.data.shape[0], Pattern):
                found = observed(tracer.tangent(rule, k, seed, ans, args, kwargs), ans, rule.fn)
        except (TypeError, ValueError):  # a batch or a pattern refused (numpy's words, in places)
            continue
        for got, columns in zip(flat(found), flat(dense), strict=True):
            if not is_batch(columns):
                assert not np.any(np.asarray(columns)), "a tangent with no batch must be zero"
                continue
            nonzero = np.moveaxis(columns.data, 0, -1).reshape(-1, n) != 0
            if not is_batch(got):
                assert not nonzero.any(), "a nonzero Jacobian with no pattern"
                continue
            held = _bits(got, n)
            assert held.shape == nonzero.shape
            assert not np.any(nonzero & ~held), "an entry of the Jacobian outside the pattern"


# ---- random programs ----------------------------------------------------------------------------
def _sparse_against_dense(program, data, by_rows: bool) -> None:
    """A random program's value and the value's square (two rows): the sparse Jacobian in each
    array argument, at the point and at a second one (where the path may move), against the dense
    one; ``by_rows``, taken by rows whatever the colours (``ROWS_BELOW`` raised)."""
    from unittest import mock

    note(program.source)
    args = tuple(program.arguments(data))
    fn = _value_and_square(program.load(DIRECTORY), len(args))
    for k, x in enumerate(args):
        if np.ndim(x) == 0:
            continue
        jac = ast_ad.jacobian(fn, k, sparse=True)
        for scale in (1.0, -0.7):
            moved = tuple(a * scale if i == k else a for i, a in enumerate(args))
            try:
                dense = ast_ad.jacfwd(fn, k)(*copy.deepcopy(moved))
            except (ast_ad.errors.ASTADError, ValueError, TypeError, FloatingPointError):
                return
            if not by_rows:  # (forward mode against forward mode: the same numbers)
                found = jac(*copy.deepcopy(moved))
                np.testing.assert_allclose(found.toarray(), dense.reshape(found.shape),
                                           rtol=1e-12, atol=0)
                continue
            with mock.patch.object(sparse, "ROWS_BELOW", np.inf):
                found = jac(*copy.deepcopy(moved))
            if not np.all(np.isfinite(dense)):
                return  # (an overflow: inf in one mode's order of products is nan in the other's)
            # reverse mode against forward mode: sums and products taken in another order, as the
            # dot-product identity between the two modes allows them (tests/test_programs.py)
            np.testing.assert_allclose(found.toarray(), dense.reshape(found.shape), rtol=1e-8,
                                       atol=1e-9)


@half()
@given(programs(arrays=True, mutation=True), st.data())
def test_the_sparse_jacobian_of_a_program_is_its_dense_one(program, data) -> None:
    """A random program, mutation and branches included: its sparse Jacobian is the dense one
    (``_sparse_against_dense``)."""
    _sparse_against_dense(program, data, by_rows=False)


@half()
@given(programs(arrays=True, branches=False), st.data())
def test_the_sparse_hessian_of_a_program_is_its_dense_one(program, data) -> None:
    note(program.source)
    args = tuple(program.arguments(data))
    fn = program.load(DIRECTORY)
    if np.ndim(args[0]) == 0:
        return
    try:
        dense = ast_ad.hessian(fn)(*copy.deepcopy(args))
    except (ast_ad.errors.ASTADError, ValueError, TypeError, FloatingPointError):
        return
    found = ast_ad.hessian(fn, sparse=True)(*copy.deepcopy(args))
    np.testing.assert_allclose(found.toarray(), dense.reshape(found.shape), rtol=1e-12, atol=0)


def arrow(x):
    """A row of every entry beside a diagonal: its columns take one colour each, its rows two."""
    y = x * x
    y[0] = np.sum(np.sin(x))
    return y


def test_an_arrow_shaped_jacobian_is_taken_by_its_rows() -> None:
    """The rows of ``arrow``'s Jacobian take two colours where its columns take one each: one
    forward pass and one backward pass carrying two cotangents (``Plan.by_rows``) give it, equal
    to the dense one; a pattern given with too few rows is refused by name."""
    x = np.linspace(0.1, 1.0, 40)
    rows, columns, _ = sparse.given_pattern(ast_ad.sparsity(arrow)(x))
    plan = sparse.plan_for(rows, columns, 40, 40, False, rows_allowed=True)
    assert plan.by_rows and plan.colour.max() + 1 == 2
    assert not sparse.plan_for(rows, columns, 40, 40, False).by_rows  # (not for code by columns)
    jac = ast_ad.jacobian(arrow, sparse=True)
    np.testing.assert_array_equal(jac(x).toarray(), ast_ad.jacfwd(arrow)(x))
    np.testing.assert_array_equal(jac(x * 2.0).toarray(), ast_ad.jacfwd(arrow)(x * 2.0))
    fewer = np.ones((39, 40))
    with pytest.raises(ast_ad.errors.ASTADError, match="39 rows; the result has 40 entries"):
        ast_ad.jacobian(arrow, sparse=fewer)(x)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 30), st.integers(1, 30), st.data())
def test_a_matrix_is_read_back_from_its_rows_compressed_by_colour(m, n, data) -> None:
    """For a random pattern and random values on it, the row colouring's plan (forced where it
    would not be chosen) reads every entry back from the sums of the rows of each colour."""
    entries = data.draw(st.lists(st.tuples(st.integers(0, m - 1), st.integers(0, n - 1)),
                                 min_size=1, max_size=120, unique=True))
    entries.sort()
    rows = np.array([r for r, _ in entries], dtype=np.intp)
    columns = np.array([c for _, c in entries], dtype=np.intp)
    colour = sparse.coloured(columns, rows, m)
    matrix = np.zeros((m, n))
    matrix[rows, columns] = data.draw(st.lists(st.floats(-10, 10).filter(lambda v: v != 0),
                                               min_size=len(rows), max_size=len(rows)))
    compressed = np.zeros((colour.max() + 1, m))
    compressed[colour, np.arange(m)] = 1.0
    compressed = compressed @ matrix
    np.testing.assert_array_equal(compressed[colour[rows], columns], matrix[rows, columns])


@half()
@given(programs(arrays=True, mutation=True), st.data())
def test_the_sparse_jacobian_of_a_program_by_rows_is_its_dense_one(program, data) -> None:
    """A random program's sparse Jacobian taken by rows whatever the colours (one forward pass,
    one backward pass carrying a cotangent a colour), against the dense one."""
    _sparse_against_dense(program, data, by_rows=True)
