"""What the tape records, and control flow that the corpus does not reach on its own."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ast_ad
from tests import control_functions as cf
from tests import corpus_control as cc
from tests.oracles import assert_fd, assert_same


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
    assert g == pytest.approx(
        ast_ad.tracer.grad(cf.helper_result_overwrites_its_argument)(0.3), rel=1e-12
    )


def test_zip_strict_is_unfolded_and_keeps_pythons_error() -> None:
    xs, ys = np.array([0.5, 1.5, -2.0]), np.array([2.0, 3.0, 0.25])
    np.testing.assert_allclose(ast_ad.grad(cf.strict_pairs, (0, 1))(xs, ys), (ys, xs))
    with pytest.raises(ValueError, match="zip\\(\\) argument 2 is longer than argument 1"):
        ast_ad.grad(cf.strict_pairs)(xs[:2], ys)
    with pytest.raises(ValueError, match="zip\\(\\) argument 2 is shorter than argument 1"):
        cf.strict_pairs(xs, ys[:2])  # the message is Python's own


def test_a_loop_over_an_iterator_reads_its_items() -> None:
    """zip(...) with one loop name, over constants, and in a comprehension: an iterator has no
    length, so the loop reads its items as a list (before, len() of the zip object failed when the
    gradient ran)."""
    assert ast_ad.grad(cf.pairs_as_tuples)(0.7, [1.0, 0.5, 2.0]) == pytest.approx(1.0 + 1.0 + 6.0)
    g = np.linspace(-1.0, 1.0, 12).reshape(2, 6)
    np.testing.assert_allclose(ast_ad.grad(cf.reshaped_by_pairs)(g, (1, 2), (2, 3)), 2 * g)


def test_next_of_a_generator_is_refused_at_its_line() -> None:
    with pytest.raises(
        ast_ad.errors.UnsupportedSyntaxError, match="for loop that assigns the item and breaks"
    ):
        ast_ad.grad(cf.first_large)(np.array([0.3, 0.7]))


@pytest.mark.parametrize("fn, k", [(cf.unpacked_comprehension, 4.0), (cf.unpacked_appends, 9.0)])
def test_a_list_made_by_appends_unpacked(fn, k) -> None:
    # the unpacked list's adjoint is a list, as the appends' adjoints pop it (it was a tuple:
    # AttributeError)
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(ast_ad.grad(fn)(x), k * x[::-1])


def test_entries_written_into_zeros_like_of_a_differentiated_array() -> None:
    # np.zeros_like(x) reads x for its shape only: nothing flows back through it
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(ast_ad.grad(cf.written_into_zeros_like)(x), 4 * x)


def test_zeros_like_of_a_value_then_rebound_in_a_loop() -> None:
    args = (np.array([0.3, -0.2, 0.5]), np.array([0.1, 0.4, -0.3]), np.array([0.2, 0.6, -0.1]))
    ours = ast_ad.grad(cf.zeros_like_then_rebound_in_a_loop, (0, 1, 2))(*args)
    # the tracer writes out= into its array as numpy does
    assert_same(ours, ast_ad.tracer.grad(cf.zeros_like_then_rebound_in_a_loop, (0, 1, 2))(*args))
    assert_fd(cf.zeros_like_then_rebound_in_a_loop, args, (0, 1, 2), ours)


@pytest.mark.parametrize("fn", [cf.picked_list_rebuilt_in_a_loop, cf.picked_list_and_its_items,
                                cf.picked_tuple_unpacked, cf.picked_dict, cf.picked_in_a_loop])
@pytest.mark.parametrize("x", [1.5, -0.7, 0.3])
def test_a_container_passed_to_a_function_that_may_not_read_it(fn, x) -> None:
    # the function's backward pass gives None for a container its path did not read; the caller's
    # items read it with part() (it failed: 'NoneType' object is not subscriptable)
    ours = ast_ad.grad(fn)(x)
    assert ours == pytest.approx(ast_ad.tracer.grad(fn)(x), rel=1e-12)
    assert_fd(fn, (x,), (0,), (ours,))


@pytest.mark.parametrize("x", [np.array([-1.0, -1.0, -1.0]), np.array([1.0, 0.5, -0.2])])
def test_a_picked_list_of_matrix_products(x) -> None:
    ours = ast_ad.grad(cf.picked_list_of_products)(x)
    np.testing.assert_allclose(
        ours, ast_ad.tracer.grad(cf.picked_list_of_products)(x), rtol=1e-12, atol=1e-14
    )
    assert_fd(cf.picked_list_of_products, (x,), (0,), (ours,))


@pytest.mark.parametrize("fn, x", [(cf.rows_as_a_list, np.array([[0.3, -0.2], [0.5, 1.1]])),
                                   (cf.a_tuple_of_a_list, np.array([0.3, -0.2, 0.5]))])
def test_list_and_tuple_of_differentiated_values(fn, x) -> None:
    """list(x) and tuple(xs) are primitives: the items' adjoints, as the argument holds its items
    (an array's rows stacked); against the tracer, which reads the same rules, and central
    differences."""
    ours = ast_ad.grad(fn)(x)
    np.testing.assert_allclose(ours, ast_ad.tracer.grad(fn)(x), rtol=1e-12, atol=1e-14)
    assert_fd(fn, (x,), (0,), (ours,))
    _, dot = ast_ad.jvp(fn, (x,), (np.ones_like(x),))
    assert dot == pytest.approx(float(np.sum(ours)), rel=1e-12)


@pytest.mark.parametrize("fn, args, kept", [
    (cf.shifted_in_a_loop, (np.array([0.3, -0.5, 0.8]), np.array([0.2])), "s"),
    (cf.reshaped_in_a_loop, (np.array([[0.5, -0.2], [0.1, 0.7]]), np.array([0.4, -0.3])), "a"),
    (cf.shape_and_value_in_a_loop, (np.array([0.3, -0.5, 0.8]), np.array([0.2])), None)])
def test_an_array_a_loop_reads_back_only_for_its_shape_is_taped_as_its_shape(
    fn, args, kept
) -> None:
    """Each step's array that the backward pass reads only for its shape (to un-broadcast, to
    reshape back) is kept as its shape, not as a copy per step; the gradient is what the tracer and
    finite differences say."""
    grad = ast_ad.grad(fn, argnums=(0, 1))
    ours = grad(*args)
    for mine, theirs in zip(ours, ast_ad.tracer.grad(fn, argnums=(0, 1))(*args), strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-14)
    assert_fd(fn, args, (0, 1), ours)
    text = ast_ad.source(grad)
    if kept is None:
        assert "_shape" not in text and "s_tape.append(s)" in text
    else:
        assert (
            f"{kept}_shape = np.shape({kept})" in text
            and f"{kept}_shape_tape.append({kept}_shape)" in text
        )
        assert f"{kept}_tape" not in text


@pytest.mark.parametrize(("fn", "args"), [
    (cf.bound_in_a_loop_of_no_step, (np.array([0.3, 0.4]),)),
    (cf.bound_in_a_loop_of_k_steps, (np.array([0.3, 0.4]), 0)),
    (cf.bound_in_a_loop_of_k_steps, (np.array([0.3, 0.4]), 2)),
    (cf.written_through_a_view_made_on_two_paths, (np.zeros(3),)),
    (cf.written_through_a_view_made_on_two_paths, (np.array([0.2, -0.4, 0.9]),)),
    (cf.bound_in_a_while_of_no_step, (1.0,)),
    (cf.taped_in_a_loop_of_no_step, (0.3, 0.7)),
    (cf.read_from_a_list_then_scaled, (0.0,)),
    (cf.read_from_a_list_then_scaled, (0.4,)),
])
def test_an_adjoint_a_loop_adds_to_is_not_zero_at_the_top_of_its_next_step(fn, args) -> None:
    """A loop's backward pass is built once for every step: an adjoint zero where it starts, or
    with no name yet where an inner loop's comes first, is zero at the top of the first step only
    (``Reverser.step_backward``); an inner loop that binds the name and runs no step does not
    reset it. Against the tracer and finite differences."""
    from tests.oracles import assert_fd

    value, grad = ast_ad.value_and_grad(fn)(*[np.copy(a) for a in args])
    assert value == fn(*[np.copy(a) for a in args])
    np.testing.assert_allclose(grad, ast_ad.tracer.grad(fn)(*[np.copy(a) for a in args]),
                               rtol=1e-12, atol=1e-14)
    assert_fd(lambda *a: fn(*[np.copy(v) for v in a]), args, (0,), (grad,))
