"""Every corpus function: ast_ad agrees with the tracer, with finite differences, and with
autograd."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ast_ad
from tests import corpus_control
from tests.corpus import CASES as STRAIGHT
from tests.corpus import Case
from tests.oracles import assert_fd, assert_same, with_autograd_numpy

CASES = STRAIGHT + corpus_control.CASES
IDS = [f"{case.fn.__name__}-{i}" for i, case in enumerate(CASES)]


@pytest.mark.parametrize("case", CASES, ids=IDS)
@given(data=st.data())
def test_matches_tracer_and_finite_differences(case: Case, data: st.DataObject) -> None:
    args = data.draw(case.args)
    value, ours = ast_ad.value_and_grad(case.fn, case.argnums)(*args)
    tracer_value, theirs = ast_ad.tracer.value_and_grad(case.fn, case.argnums)(*args)
    assert_same(ours, theirs)
    assert value == case.fn(*args)  # the primal is the function's own value, bit for bit
    for k, g in zip(case.argnums, ours, strict=True):
        assert type(g) is type(args[k]) or isinstance(args[k], int)
        assert np.shape(g) == np.shape(args[k])
    if case.smooth:
        assert_fd(case.fn, args, case.argnums, ours)


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if c.autograd],
    ids=[i for c, i in zip(CASES, IDS, strict=True) if c.autograd],
)
@given(data=st.data())
def test_matches_autograd(case: Case, data: st.DataObject) -> None:
    import autograd

    args = data.draw(case.args)
    ours = ast_ad.grad(case.fn, case.argnums)(*args)
    theirs = autograd.grad(with_autograd_numpy(case.fn), case.argnums)(*args)
    assert_same(ours, tuple(np.asarray(t, dtype=float) for t in theirs), rtol=1e-7, atol=1e-10)


def test_float32_stays_float32() -> None:
    x = np.linspace(0.1, 0.9, 4, dtype=np.float32)
    g = ast_ad.grad(CASES[3].fn)(x)
    assert g.dtype == np.float32 and g.shape == x.shape
