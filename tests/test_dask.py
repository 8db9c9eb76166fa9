"""Gradients of dask arrays are dask arrays, built lazily, with the arguments' chunks.

A scheduler that counts its runs shows what computes: where the function itself computes nothing,
its gradient computes nothing either until ``dask.compute``. Where Python computes (a branch on a
dask value, a dask value written into a numpy array), the gradient may compute too, at most once
more for each (the backward pass writes the adjoint back the same way). dask's warning for a
function it runs eagerly (``The numpy.x function is not implemented by Dask array``) is an error
here.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ast_ad
from tests import corpus, corpus_control, corpus_numpy
from tests.strategies import few
from tests.test_rules import leaves

dask = pytest.importorskip("dask")
# a numpy function dask runs only by computing its arguments: an error here (ast_ad must not call
# one)
pytestmark = pytest.mark.filterwarnings("error:.*is not implemented by Dask array:FutureWarning")
da = pytest.importorskip("dask.array")

CORPUS = corpus.CASES + corpus_control.CASES + corpus_numpy.CASES
# dask runs these functions only by computing (np.linalg.slogdet, np.split): the tests skip them
EAGER_IN_DASK = {"linear_algebra", "shapes_and_joins"}
# dask cannot write the adjoint of a read through a mask (it does not know how many entries it read)
REFUSED = {"reads": "np.where(mask, x, 0.0)"}


class Counting:
    """A dask scheduler that runs graphs synchronously and counts how often it is asked to."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, graph, keys, **kwargs):
        self.runs += 1
        return dask.get(graph, keys, **kwargs)


def lazy(value, chunks: int = 2):
    """``value`` with each float array a dask array of chunks of ``chunks`` rows (containers item by
    item)."""
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return da.from_array(value, chunks=(chunks,) + value.shape[1:] if value.ndim else ())
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(lazy(v, chunks) for v in value)
    if isinstance(value, list):
        return [lazy(v, chunks) for v in value]
    if isinstance(value, dict):
        return {k: lazy(v, chunks) for k, v in value.items()}
    return value


@pytest.mark.parametrize("case", [c for c in CORPUS if c.fn.__name__ not in EAGER_IN_DASK],
                         ids=[c.fn.__name__ for c in CORPUS if c.fn.__name__ not in EAGER_IN_DASK])
@settings(max_examples=few(4), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_corpus_on_dask_arrays(case: corpus.Case, data: st.DataObject) -> None:
    args = data.draw(case.args)
    scheduler = Counting()
    with warnings.catch_warnings(), dask.config.set(scheduler=scheduler):
        warnings.filterwarnings(
            "error", message=".*is not implemented by Dask array", category=FutureWarning
        )
        case.fn(*lazy(args))
        allowed, scheduler.runs = scheduler.runs, 0
        if case.fn.__name__ in REFUSED:
            with pytest.raises(ast_ad.errors.ASTADError, match="dask|Array") as refusal:
                ast_ad.value_and_grad(case.fn, case.argnums)(*lazy(args))
            assert REFUSED[case.fn.__name__] in str(refusal.value)
            return
        value, grads = ast_ad.value_and_grad(case.fn, case.argnums)(*lazy(args))
        used = scheduler.runs
    assert used <= 2 * allowed, f"the gradient computed {used} times, the function {allowed}"
    expected_value, expected = ast_ad.value_and_grad(case.fn, case.argnums)(*args)
    for k, g in zip(case.argnums, grads, strict=True):
        for leaf, arg in zip(leaves(g), leaves(lazy(args[k])), strict=True):
            if isinstance(arg, da.Array):
                assert (
                    isinstance(leaf, da.Array)
                    and leaf.chunks == arg.chunks
                    and leaf.dtype == arg.dtype
                )
    computed_value, computed = dask.compute(value, grads, scheduler="sync")
    # dask sums in its own order
    single = any(np.result_type(leaf) == np.float32 for leaf in leaves(args))
    tolerance = 1e-5 if single else 1e-12
    for got, want in zip(leaves(computed), leaves(expected), strict=True):
        assert np.allclose(got, want, rtol=tolerance, atol=tolerance, equal_nan=True)
    assert np.allclose(
        computed_value, expected_value, rtol=tolerance, atol=tolerance, equal_nan=True
    )


def logistic_loss(w, X, y):
    p = 1.0 / (1.0 + np.exp(-(X @ w)))
    return -np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - p))


def data(rows: int = 60, features: int = 3):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((rows, features))
    y = (rng.random(rows) < 0.5).astype(float)
    return X, y


def test_nothing_computes_until_asked() -> None:
    """The value and the gradient of a loss over dask data are graphs; one dask.compute runs
    both."""
    X, y = data()
    Xd, yd = da.from_array(X, chunks=(20, 3)), da.from_array(y, chunks=20)
    w = da.from_array(np.array([0.1, -0.2, 0.3]), chunks=3)
    scheduler = Counting()
    with dask.config.set(scheduler=scheduler):
        value, (w_bar, X_bar) = ast_ad.value_and_grad(logistic_loss, (0, 1))(w, Xd, yd)
        assert scheduler.runs == 0
        assert (
            isinstance(value, da.Array)
            and isinstance(w_bar, da.Array)
            and X_bar.chunks == Xd.chunks
        )
        both = dask.compute(value, w_bar, X_bar)
        assert scheduler.runs == 1
    expected_value, (expected_w, expected_X) = ast_ad.value_and_grad(logistic_loss, (0, 1))(
        np.array([0.1, -0.2, 0.3]), X, y)
    assert np.allclose(both[0], expected_value) and np.allclose(both[1], expected_w)
    assert np.allclose(both[2], expected_X)


def test_numpy_weights_over_dask_data() -> None:
    """A numpy parameter whose loss runs over dask data: its gradient is as lazy as the loss."""
    X, y = data()
    w = np.array([0.1, -0.2, 0.3])
    g = ast_ad.grad(logistic_loss)(w, da.from_array(X, chunks=(20, 3)), da.from_array(y, chunks=20))
    assert isinstance(g, da.Array) and g.shape == w.shape
    assert np.allclose(g.compute(), ast_ad.grad(logistic_loss)(w, X, y))


def test_forward_mode_jacobian_and_hessian_on_dask() -> None:
    X, y = data(40)
    Xd, yd = da.from_array(X, chunks=(10, 3)), da.from_array(y, chunks=10)
    w = np.array([0.1, -0.2, 0.3])
    wd = da.from_array(w, chunks=3)
    v = np.array([1.0, 0.5, -1.0])
    out, out_dot = ast_ad.jvp(logistic_loss, (wd, Xd, yd), (da.from_array(v, chunks=3), None, None))
    assert isinstance(out_dot, da.Array)
    assert np.allclose(out_dot.compute(), ast_ad.jvp(logistic_loss, (w, X, y), (v, None, None))[1])
    out, vjp_fn = ast_ad.vjp(logistic_loss, wd, Xd, yd)
    assert np.allclose(vjp_fn(1.0)[0].compute(), ast_ad.grad(logistic_loss)(w, X, y))
    hvp = ast_ad.hvp(logistic_loss)(wd, Xd, yd, da.from_array(v, chunks=3))
    assert np.allclose(np.asarray(dask.compute(hvp)[0]), ast_ad.hvp(logistic_loss)(w, X, y, v))
    hessian = ast_ad.hessian(logistic_loss)(wd, Xd, yd)
    assert isinstance(hessian, da.Array) and hessian.shape == (3, 3)
    assert np.allclose(hessian.compute(), ast_ad.hessian(logistic_loss)(w, X, y))
    jacobian = ast_ad.jacfwd(lambda w, X: X @ w)(wd, Xd)
    assert isinstance(jacobian, da.Array) and np.allclose(jacobian.compute(), X)
    rows = ast_ad.jacrev(lambda w, X: np.tanh(X @ w))(wd, Xd)  # one vjp a row, each lazy
    assert isinstance(rows, da.Array) and np.allclose(
        rows.compute(), (1 - np.tanh(X @ w) ** 2)[:, None] * X
    )


def sign_branch(x):
    if np.sum(x) > 0:
        return np.sum(x ** 2)
    return np.sum(-x)


def test_a_branch_on_a_dask_value_computes_once() -> None:
    """Python computes the condition to branch; the gradient computes it once too, and reads the
    decision back."""
    x = np.array([1.0, -0.5, 2.0])
    scheduler = Counting()
    with dask.config.set(scheduler=scheduler):
        g = ast_ad.grad(sign_branch)(da.from_array(x, chunks=2))
        assert scheduler.runs == 1
    assert np.allclose(g.compute(), 2 * x)


def test_distributed_local_cluster() -> None:
    """The same gradient on a dask.distributed cluster in this process (as it would run on a real
    one)."""
    distributed = pytest.importorskip("dask.distributed")
    X, y = data(80)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        Xd, yd = da.from_array(X, chunks=(20, 3)), da.from_array(y, chunks=20)
        w = np.zeros(3)
        value, g = ast_ad.value_and_grad(logistic_loss)(w, Xd, yd)
        value, g = client.compute([value, g], sync=True)
    expected_value, expected = ast_ad.value_and_grad(logistic_loss)(w, X, y)
    assert np.allclose(value, expected_value) and np.allclose(g, expected)


def repeated_reads(x):
    return (
        np.sum(x[np.array([0, 2, 2, 0, 2])] ** 2)
        + np.sum(x[:, np.array([1, 1])])
        + np.sum(x[np.array([1, 1]), 0])
    )


def test_reads_at_repeated_indices_stay_lazy() -> None:
    """dask has no np.add.at: the repeats are added in as many plain writes as an index repeats."""
    x = np.arange(12.0).reshape(4, 3) / 7.0
    scheduler = Counting()
    with dask.config.set(scheduler=scheduler):
        g = ast_ad.grad(repeated_reads)(da.from_array(x, chunks=(2, 3)))
        assert scheduler.runs == 0
    assert isinstance(g, da.Array) and np.allclose(g.compute(), ast_ad.grad(repeated_reads)(x))


def apart_reads(x):
    return np.sum(x[np.array([0, 0]), :, 1])


def test_other_repeated_reads_are_refused() -> None:
    """An integer array and an integer apart (numpy moves the array's axes first): refused, not
    computed."""
    with pytest.raises(ast_ad.errors.ASTADError, match="cannot add at repeated indices"):
        ast_ad.grad(apart_reads)(da.from_array(np.ones((2, 3, 2)), chunks=2))


def write_through_view(x):
    y = x * 1.0
    z = y[1:]
    z[0] = 3.0
    return np.sum(y * x)


def test_a_write_that_may_reach_another_array_is_refused_without_computing() -> None:
    """numpy tells whether two of its arrays share memory; of two dask arrays ast_ad cannot tell
    without computing them, so the write is refused, as it is for numpy's views."""
    scheduler = Counting()
    with dask.config.set(scheduler=scheduler), pytest.raises(ast_ad.errors.InPlaceAliasError):
        ast_ad.grad(write_through_view)(da.from_array(np.ones(4), chunks=2))
    assert scheduler.runs == 0
