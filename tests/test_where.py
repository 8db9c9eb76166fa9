"""``np.where`` exact where its other branch is not finite: the branch's backward pass is computed
where it is selected (``ast_ad.frontend.selection``), so ``sinc`` and a guarded softplus get exact
gradients at the guard."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ast_ad
from tests import where_functions as wf
from tests.oracles import assert_fd


def _exact(fn, args, expected) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the user's own np.sqrt(-1), run by Python
        python = fn(*[np.copy(a) for a in args])
    value, grads = ast_ad.value_and_grad(fn, tuple(range(len(args))))(*args)
    assert value == python  # bit for bit: the selected entries are computed from the same numbers
    for got, want in zip(grads, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    tangents = [np.linspace(0.5, 1.5, np.size(a)).reshape(np.shape(a)) for a in args]
    value_f, tangent = ast_ad.jvp(fn, tuple(args), tuple(tangents))
    assert value_f == value
    assert tangent == pytest.approx(
        sum(np.sum(g * t) for g, t in zip(grads, tangents, strict=True)), rel=1e-12
    )


def test_the_issues_example_is_two_where_the_square_root_is_not_taken() -> None:
    x = np.array([-1.0, 4.0])
    _exact(wf.sqrt_or_linear, (x,), ([2.0, 0.25],))


def test_sinc_at_zero() -> None:
    x = np.array([0.0, 1.0, -2.0])
    expected = np.where(x == 0, 0.0, (x * np.cos(x) - np.sin(x)) / np.where(x == 0, 1.0, x * x))
    _exact(wf.sinc, (x,), (expected,))


def test_a_guarded_softplus_at_a_large_input() -> None:
    x = np.array([1000.0, 0.0, -3.0])
    _exact(wf.guarded_softplus, (x,), (np.where(x > 30, 1.0, 1 / (1 + np.exp(-x))),))


def test_a_branch_of_two_inputs_and_a_where_inside_a_branch() -> None:
    x, w = np.array([-1.0, 0.5, 2.0]), np.array([0.3, 1.2, -0.7])
    expected_x = np.where(x > 0, w * w / np.where(x > 0, x, 1.0), 0.0)
    _exact(wf.log_or_zero, (x, w), (expected_x, np.where(x > 0, 2 * w * np.log(np.abs(x)), 0.0)))
    x = np.array([-1.0, 1.0, 5.0])
    inner_slope = np.where(x < 4.0, -0.5 / np.sqrt(np.abs(4.0 - x)), 0.0)
    _exact(wf.nested, (x,), (np.where(x > 0, 1 / np.where(x > 0, x, 1.0) + inner_slope, 2 * x),))


def test_smooth_points_match_finite_differences() -> None:
    for fn, x in (
        (wf.sqrt_or_linear, np.array([-1.3, 0.7, 2.0])),
        (wf.sinc, np.array([0.4, -1.1, 2.5])),
        (wf.guarded_softplus, np.array([-2.0, 0.3, 40.0])),
    ):
        # the functions compute the branch np.where drops: sqrt(-1.3)
        with np.errstate(invalid="ignore"):
            assert_fd(fn, (x,), (0,), (ast_ad.grad(fn)(x),))


def test_a_reduction_feeding_the_branch_is_an_input_of_it() -> None:
    """The mean reads every entry of ``x`` as it is; the branch computes from it and from ``x``
    where chosen."""
    x = np.array([-1.0, 0.25, 4.0])
    grads = ast_ad.grad(wf.through_a_reduction)(x)
    mean_slope = -np.sign(x) * 0.5 / np.sqrt(np.abs(x)) / 3 * np.sum(x > 0)
    expected = np.where(x > 0, 0.5 / np.sqrt(np.where(x > 0, x, 1.0)), 1.0) + mean_slope
    _exact(wf.through_a_reduction, (x,), (expected,))
    assert np.all(np.isfinite(grads))


def test_a_branch_whose_value_is_read_elsewhere_is_left_as_written() -> None:
    """Another statement reads the branch's value at every entry: it is computed as written
    there."""
    assert "chosen" not in ast_ad.source(wf.read_elsewhere, stage="normalized")


def test_no_where_no_change() -> None:
    def plain(x):
        return np.sum(np.sqrt(x) * 2.0)
    assert "chosen" not in ast_ad.source(ast_ad.grad(plain))
