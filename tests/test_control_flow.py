"""What the tape records, and control flow that the corpus does not reach on its own."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ast_ad
from tests import control_functions as cf
from tests import corpus_control as cc


def forward_of(fn, *args) -> str:
    text = ast_ad.source(ast_ad.grad(fn), *args)
    return text.split("\n\n\n")[-1]


def test_a_loop_that_touches_no_active_value_records_nothing() -> None:
    assert "tape" not in forward_of(cc.unused_loop, 0.5)
    assert ast_ad.grad(cc.unused_loop)(0.5) == 10.0


def test_a_value_the_backward_pass_never_reads_is_not_saved() -> None:
    # y = y + x: the rule of + reads neither operand, so overwriting y saves nothing.
    assert "tape" not in forward_of(cf.running_sum, 0.5)
    assert ast_ad.grad(cf.running_sum)(0.5) == 7.0


def test_the_scalar_loop_saves_one_value_per_iteration() -> None:
    text = forward_of(cc.scalar_loop, 0.5)
    assert text.count("tape.append(") == 1
    # the backward loop reads the tape back itself: its step begins with the pop, and reads no index
    assert "for x in reversed(x_tape):" in text and ".pop()" not in text


def test_trip_counts_only_where_a_loop_can_stop_early() -> None:
    assert "trips" not in forward_of(cc.scalar_loop, 0.5)
    assert "trips += 1" in forward_of(cf.stops_early, 0.5)


def test_deep_recursion() -> None:
    assert math.isclose(ast_ad.grad(cf.power)(1.01, 200), 200 * 1.01 ** 199)


def test_while_with_an_inactive_condition() -> None:
    assert math.isclose(ast_ad.grad(cf.newton_sqrt)(2.0), 1 / (2 * math.sqrt(2.0)), rel_tol=1e-9)


def test_loop_over_an_array_given_as_list_of_rows() -> None:
    x = np.arange(6.0).reshape(3, 2)
    np.testing.assert_allclose(ast_ad.grad(cf.sum_rows)(x), 2 * x)


@pytest.mark.parametrize("n", [0, 1, 5])
def test_loops_that_run_zero_times(n: int) -> None:
    assert ast_ad.grad(cf.repeated_square)(1.1, n) == pytest.approx(2 ** n * 1.1 ** (2 ** n - 1))


def test_a_branch_whose_condition_changes_inside_it_replays_the_decision() -> None:
    # found by the long random-program run: the backward pass must take the branch forward took
    assert ast_ad.grad(cf.flag_changed_in_its_branch)(1.0) == 0.0


def test_x_equals_helper_of_x() -> None:
    # found by the long random-program run: the helper's saved values must outlive its backward call
    g = ast_ad.grad(cf.helper_result_overwrites_its_argument)(0.3)
    assert g == pytest.approx(ast_ad.tracer.grad(cf.helper_result_overwrites_its_argument)(0.3), rel=1e-12)
