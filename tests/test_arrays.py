"""Gradients keep their arguments' array type: a duck array that refuses conversion to numpy.

``tests.duck.Duck`` wraps numpy and is reached only through numpy's dispatch protocols; its
``__array__`` raises. Every registered rule, forward and reverse, and every corpus function is run
on duck arrays and compared with numpy: a helper that calls ``np.asarray``, makes zeros with
``np.zeros(shape)`` or writes a duck array into a numpy array fails here on every machine, as it
would move a dask or CuPy array to numpy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

import ast_ad
from ast_ad.core import registry
from ast_ad.testing import tracer
from tests import corpus, corpus_control, corpus_numpy
from tests.duck import Duck, Refused, ducks, unwrap
from tests.rule_cases import CASES as RULE_CASES
from tests.strategies import few
from tests.test_rules import DIFFERENTIABLE, _name, direction_like, leaves, random_like

CORPUS = corpus.CASES + corpus_control.CASES + corpus_numpy.CASES


def numpy_leaves(value) -> list:
    """The numpy arrays and numpy scalars inside ``value``: what a duck computation must not
    make."""
    return [leaf for leaf in leaves(value) if isinstance(leaf, (np.ndarray, np.generic))]


def assert_equal_values(got, expected) -> None:
    got, expected = leaves(unwrap(got)), leaves(expected)
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        if a is None or b is None:
            assert a is None and b is None
            continue
        assert np.shape(a) == np.shape(b) or np.size(a) == np.size(b) == 1
        assert np.allclose(a, b, rtol=1e-12, atol=1e-12, equal_nan=True), (a, b)


def runs(fn, args) -> None:
    """Keep only inputs the function itself runs on with numpy (a singular matrix, say, is the
    function's)."""
    try:
        fn(*args)
    except Exception:
        reject()


def has_duck(value) -> bool:
    return any(isinstance(leaf, Duck) for leaf in leaves(value))


# (scipy's solvers and quad run on numpy arrays, as scipy does: their rules convert)
@pytest.mark.parametrize(
    "rule", [r for r in DIFFERENTIABLE if r.origin != "ast_ad.api.solvers"], ids=_name
)
@settings(max_examples=few(4), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_rule_keeps_the_array_type(rule: registry.Rule, data: st.DataObject) -> None:
    """Each reverse and forward rule, given duck arrays, gives duck arrays with numpy's values."""
    args, kwargs = data.draw(RULE_CASES[rule.fn])
    ans = rule.fn(*args, **kwargs)
    d_args, d_kwargs = ducks(args), ducks(kwargs)
    if not has_duck(d_args):
        return  # numbers only: nothing to keep
    Duck.conversions = 0
    try:
        d_ans = rule.fn(*d_args, **d_kwargs)
    except Refused:
        return  # numpy itself cannot run this function on a duck array (math.sin of one, say)
    allowed = Duck.conversions  # what the function itself converts, its rules may convert too
    rng = np.random.default_rng(0)
    u = random_like(ans, rng)
    for k, arg in enumerate(args):
        if not any(
            isinstance(leaf, float) or (isinstance(leaf, np.ndarray) and leaf.dtype.kind == "f")
            for leaf in leaves(arg)
        ):
            continue
        vjp = rule.vjp(k)
        if vjp is not None and vjp is not registry.zero:
            expected = vjp(u, ans, *args, **kwargs)
            Duck.conversions = 0
            got = vjp(ducks(u), d_ans, *d_args, **d_kwargs)
            assert Duck.conversions <= allowed, (
                "the reverse rule converted a duck array to a number"
            )
            assert not numpy_leaves(got), (
                f"the reverse rule of argument {k} made numpy arrays: {got!r}"
            )
            assert_equal_values(got, expected)
        if rule.jvp(k) is not None:
            v = direction_like(arg, rng)
            expected = tracer.tangent(rule, k, v, ans, args, kwargs)
            Duck.conversions = 0
            got = tracer.tangent(rule, k, ducks(v), d_ans, d_args, d_kwargs)
            assert Duck.conversions <= allowed, (
                "the forward rule converted a duck array to a number"
            )
            if has_duck(ducks(v)):
                assert not numpy_leaves(got), (
                    f"the forward rule of argument {k} made numpy arrays: {got!r}"
                )
            assert_equal_values(got, expected)


@pytest.mark.parametrize("case", CORPUS, ids=[c.fn.__name__ for c in CORPUS])
@settings(max_examples=few(5), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_corpus_on_duck_arrays(case: corpus.Case, data: st.DataObject) -> None:
    """Where Python runs a corpus function on duck arrays, ast_ad's gradient does, with duck
    gradients."""
    args = data.draw(case.args)
    runs(case.fn, args)
    Duck.conversions = 0
    try:
        case.fn(*ducks(args))
    except Refused:
        # the function itself writes a duck array into a numpy one (y = np.zeros(6); y[0] = x[1])
        return
    allowed = Duck.conversions
    value, grads = ast_ad.value_and_grad(case.fn, case.argnums)(*args)
    Duck.conversions = 0
    d_value, d_grads = ast_ad.value_and_grad(case.fn, case.argnums)(*ducks(args))
    assert Duck.conversions <= allowed, (
        "the gradient converted more duck arrays to numbers than the function"
    )
    for k, g, d_g in zip(case.argnums, grads, d_grads, strict=True):
        assert not numpy_leaves(d_g)
        if isinstance(args[k], np.ndarray):
            assert (
                isinstance(d_g, Duck) and d_g.shape == args[k].shape and d_g.dtype == args[k].dtype
            )
        assert_equal_values(d_g, g)
    if math.isfinite(float(np.sum(value))):
        assert_equal_values(d_value, value)


@pytest.mark.parametrize("case", CORPUS, ids=[c.fn.__name__ for c in CORPUS])
@settings(max_examples=few(3), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_corpus_forward_mode_on_duck_arrays(case: corpus.Case, data: st.DataObject) -> None:
    """Forward mode too: duck primals and tangents give a duck tangent, with numpy's values."""
    args = data.draw(case.args)
    runs(case.fn, args)
    try:
        case.fn(*ducks(args))
    except Refused:
        return
    rng = np.random.default_rng(0)
    tangents = tuple(
        direction_like(a, rng) if k in case.argnums else None for k, a in enumerate(args)
    )
    _, expected = ast_ad.jvp(case.fn, args, tangents)
    _, got = ast_ad.jvp(case.fn, ducks(args), ducks(tangents))
    if any(isinstance(leaf, Duck) for leaf in leaves(ducks(tangents))):
        assert not numpy_leaves(got), f"forward mode made numpy arrays: {got!r}"
    assert_equal_values(got, expected)


def test_cupy_gradients_stay_on_the_device() -> None:
    """Where CuPy and a GPU are present, a gradient of CuPy arrays is a CuPy array (no GPU here:
    skipped)."""
    cupy = pytest.importorskip("cupy")
    try:
        devices = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CuPy without a driver or a device
        pytest.skip(f"no CUDA device: {exc}")
    if devices < 1:
        pytest.skip("no CUDA device")
    x = np.linspace(-1.0, 1.0, 5)
    g = ast_ad.grad(corpus.chain)(cupy.asarray(x))
    assert isinstance(g, cupy.ndarray)
    assert np.allclose(cupy.asnumpy(g), ast_ad.grad(corpus.chain)(x))
