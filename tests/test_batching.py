"""A loop's contributions to a matrix it multiplies every step are summed once, after the loop.

The corpus (``shared_weights``, ``shared_weights_while``, ``decaying_weights``) checks the
gradients against the tracer and finite differences; here: the summing helpers against
the step-by-step sum, and when the rewrite applies.
"""

from __future__ import annotations

import operator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ast_ad
from ast_ad import runtime
from ast_ad.core import registry
from ast_ad.ir import nodes as ir
from ast_ad.ir.naming import Namer
from ast_ad.modes.templates import Scratch
from ast_ad.optimize.batching import Term, batch_products, term_of
from tests import corpus_control
from tests.strategies import arrays


@st.composite
def loop_terms(draw, fixed_first: bool):
    """A fixed matrix and a loop's ``(g, other operand)`` pairs: vectors, matrices or a mix."""
    n, k = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    fixed = draw(arrays((n, k) if fixed_first else (k, n)))
    terms = []
    for _ in range(draw(st.integers(0, 5))):
        if draw(st.booleans()):  # a vector step
            terms.append((draw(arrays((n,))), draw(arrays((k,)))))
        else:  # a matrix step, with its own number of columns (or rows)
            m = draw(st.integers(1, 3))
            g, other = draw(arrays((n, m))), draw(arrays((k, m)))
            terms.append((g, other) if fixed_first else (g.T, other.T))
    return fixed, terms


SIDES = [  # (fixed operand first, the per-step rule, the helpers that sum a loop's steps of it)
    (True, runtime.matmul_vjp_a, (runtime.summed_matmul_vjp_a, runtime.summed_dot_vjp_a)),
    (False, runtime.matmul_vjp_b, (runtime.summed_matmul_vjp_b, runtime.summed_dot_vjp_b)),
]


@pytest.mark.parametrize(
    "fixed_first, step, summing", SIDES, ids=["a @ b, a fixed", "a @ b, b fixed"]
)
@given(data=st.data())
def test_summed_products_are_the_sum_of_the_steps(fixed_first, step, summing, data) -> None:
    fixed, terms = data.draw(loop_terms(fixed_first))
    expected = sum(
        ((step(g, fixed, other) if fixed_first else step(g, other, fixed)) for g, other in terms),
        0.0,
    )
    for summed in summing:
        np.testing.assert_allclose(summed(terms, fixed), expected, rtol=1e-12, atol=1e-12)
    # the same kept by columns: the steps' ``g`` stacked (where they stack) and the others' list
    gs = runtime.stacked_steps([g for g, _ in terms])
    for rule in (runtime.matmul_vjp_a, runtime.dot_vjp_a) if fixed_first else \
            (runtime.matmul_vjp_b, runtime.dot_vjp_b):
        by_columns = registry.summed_by_columns(rule)
        np.testing.assert_allclose(by_columns(gs, [other for _, other in terms], fixed), expected,
                                   rtol=1e-12, atol=1e-12)


def test_summed_dot_keeps_dot_rules_for_scalars() -> None:
    fixed = np.arange(6.0).reshape(2, 3)
    # np.dot(fixed, scalar) each step
    terms = [(np.ones((2, 3)), 2.0), (np.full((2, 3), 3.0), -1.0)]
    np.testing.assert_allclose(runtime.summed_dot_vjp_a(terms, fixed), 2.0 * 1.0 + 3.0 * -1.0)


MATMUL_A, MUL = ir.Ref(runtime.matmul_vjp_a, "matmul_vjp_a"), ir.Ref(operator.mul, "operator.mul")
LINE = ir.Line("loop.py", 1, "")


def _accumulated(
    bar: str, call: ir.Call, scratch: Scratch, terms: dict[int, Term]
) -> list[ir.Stmt]:
    """``bar = bar + call``, as the accumulation builds it (the call a part), with the term it
    records (``term_of``)."""
    part = scratch.fresh("")
    stmts: list[ir.Stmt] = [ir.Assign(part, call, LINE)]
    accumulation = ir.Assign(
        bar, ir.Call(ir.Ref(operator.add, "operator.add"), (ir.Var(bar), ir.Var(part))), LINE
    )
    term = term_of(accumulation, stmts)
    if term is not None:
        terms[id(accumulation)] = term
    return [*stmts, accumulation]


def _w_bar(scratch: Scratch, terms: dict[int, Term]) -> list[ir.Stmt]:
    """``W_bar = W_bar + matmul_vjp_a(g, W, h)``: the contribution of ``W @ h`` to a matrix the loop
    keeps."""
    return _accumulated(
        "W_bar", ir.Call(MATMUL_A, (ir.Var("g"), ir.Var("W"), ir.Var("h"))), scratch, terms
    )


def test_only_a_rule_with_a_sum_over_steps_on_a_name_gives_a_term() -> None:
    scratch, terms = Scratch(), {}
    body = _w_bar(scratch, terms)
    body += _accumulated("h_bar", ir.Call(MUL, (ir.Var("g"), ir.Var("W"))), scratch, terms)
    row = scratch.fresh("")  # ``V[0]``: a part, no name the loop could keep fixed
    body += [
        ir.Assign(
            row,
            ir.Call(ir.Ref(operator.getitem, "operator.getitem"), (ir.Var("V"), ir.Const(0))),
            LINE,
        ),
        *_accumulated(
            "V_bar", ir.Call(MATMUL_A, (ir.Var("g"), ir.Var(row), ir.Var("h"))), scratch, terms
        ),
    ]
    assert list(terms) == [id(body[1])]
    term = terms[id(body[1])]
    assert (term.bar, term.helper, term.fixed, term.pair) == (
        "W_bar",
        runtime.summed_matmul_vjp_a,
        "W",
        (ir.Var("g"), ir.Var("h")),
    )


def test_an_adjoint_the_loop_reads_is_not_batched() -> None:
    scratch, terms = Scratch(), {}
    body = [
        *_w_bar(scratch, terms),
        ir.Assign("g", ir.Call(MUL, (ir.Var("g"), ir.Var("W_bar"))), LINE),
    ]
    assert terms and batch_products(body, set(), terms, scratch, Namer()) == ([], body, [], [])


def test_an_operand_the_loop_binds_is_not_batched() -> None:
    scratch, terms = Scratch(), {}
    body = _w_bar(scratch, terms)
    assert batch_products(body, {"W"}, terms, scratch, Namer()) == ([], body, [], [])
    before, rewritten, stacked, after = batch_products(body, set(), terms, scratch, Namer())
    assert len(after) == 1 and after[0][0] == "W_bar"
    # ``g`` and ``h``, which the step does not bind, kept by columns: a list each, ``g``'s stacked
    # after the loop, and the call made there
    assert [s.target for s in before] == ["g_steps", "h_steps"]
    assert rewritten == [ir.Append("g_steps", ir.Var("g"), ir.NOWHERE),
                         ir.Append("h_steps", ir.Var("h"), ir.NOWHERE)]
    assert [s.target for s in stacked] == ["g_stacked"]
    assert after[0][1].fn.obj is runtime.summed_matmul_vjp_a_steps
    assert after[0][1].args == (ir.Var("g_stacked"), ir.Var("h_steps"), ir.Var("W"))


def test_a_name_bound_twice_in_a_step_keeps_pairs() -> None:
    """Lists kept by columns stay aligned only where each is appended once a step with the value
    its term read: ``g`` bound twice in the step (before and after the term) keeps the pair."""
    scratch, terms = Scratch(), {}
    body = [
        ir.Assign("g", ir.Call(MUL, (ir.Var("g"), ir.Const(2.0))), LINE),
        *_w_bar(scratch, terms),
        ir.Assign("g", ir.Call(MUL, (ir.Var("g"), ir.Var("h"))), LINE),
    ]
    before, rewritten, stacked, after = batch_products(body, set(), terms, scratch, Namer())
    assert len(before) == 1 and stacked == [] and after[0][1].fn.obj is runtime.summed_matmul_vjp_a
    # the pair, kept: the call is made after the loop
    assert [type(s) for s in rewritten] == [ir.Assign, ir.Assign, ir.Append, ir.Assign]
    assert rewritten[1].value == ir.Pack((ir.Var("g"), ir.Var("h")))


def test_a_statement_not_recorded_is_not_batched() -> None:
    """Batching reads the terms the accumulation recorded, not the code: a statement written the
    same way but not recorded (a copy made later, say) stays as it is."""
    scratch, terms = Scratch(), {}
    body = _w_bar(scratch, terms)
    copied = [body[0], ir.Assign(body[1].target, body[1].value, body[1].line)]
    assert batch_products(copied, set(), terms, scratch, Namer()) == ([], copied, [], [])


def test_each_side_of_each_product_is_summed_after_the_loop() -> None:
    source = ast_ad.source(
        ast_ad.grad(corpus_control.shared_weights, (0, 1, 2)), np.eye(3), np.eye(3), np.ones(3)
    )
    # A @ h, h @ A, np.dot(h, C), np.dot(C, h)
    for rule in registry.fact_table("summed"):
        if rule is not runtime.getitem_vjp:
            assert f"{registry.summed_by_columns(rule).__name__}(" in source


def element_reads(x, w):
    total = 0.0
    for i in range(len(x)):
        total = total + w[i] * x[i] ** 2
    return total


def test_reads_of_a_fixed_array_in_a_loop_are_added_once_after_it() -> None:
    """x[i] in a loop: its adjoint is one array after the loop, not a zero array per step (O(n), not
    O(n^2)). Of an array of unknown kind, the steps' adjoints are kept and added once after the
    loop; of a numpy vector of floats, whose x[i] is a number, each is added into an array the loop
    owns, in place."""
    x, w = np.linspace(0.1, 0.9, 5), np.linspace(1.0, 2.0, 5)

    class Unknown(np.ndarray):
        pass
    source = ast_ad.source(ast_ad.grad(element_reads, (0, 1)), x.view(Unknown), w.view(Unknown))
    assert (
        "summed_getitem_vjp(x_bar_terms, x)" in source
        and "summed_getitem_vjp(w_bar_terms, w)" in source
    )
    gx, gw = ast_ad.grad(element_reads, (0, 1))(x.view(Unknown), w.view(Unknown))
    np.testing.assert_allclose(gx, 2 * w * x, rtol=1e-14)
    np.testing.assert_allclose(gw, x ** 2, rtol=1e-14)
    source = ast_ad.source(ast_ad.grad(element_reads, (0, 1)), x, w)
    assert "x_bar = owned_adjoint(0.0, x)" in source and "_terms" not in source
    gx, gw = ast_ad.grad(element_reads, (0, 1))(x, w)
    np.testing.assert_allclose(gx, 2 * w * x, rtol=1e-14)
    np.testing.assert_allclose(gw, x ** 2, rtol=1e-14)


def test_weights_the_loop_changes_are_summed_step_by_step() -> None:
    source = ast_ad.source(
        ast_ad.grad(corpus_control.decaying_weights, (0, 1)), np.eye(3), np.ones(3)
    )
    # step by step
    assert "_terms" not in source and "A_bar = A_bar + np.outer(A_at_h_bar, h)" in source


def test_a_loop_s_vector_products_are_summed_in_one_product() -> None:
    """numpy vectors are stacked in C (``np.array``), the same matrices as ``np.stack`` gives: the
    same sum to the bit; other terms take the general path, with the same result."""
    from ast_ad import runtime

    rng = np.random.default_rng(3)
    W = rng.standard_normal((4, 3))
    terms = [(rng.standard_normal(4), rng.standard_normal(3)) for _ in range(6)]
    summed = runtime.summed_matmul_vjp_a(terms, W)
    np.testing.assert_array_equal(
        summed, np.stack([g for g, _ in terms]).T @ np.stack([h for _, h in terms])
    )
    np.testing.assert_allclose(summed, sum(np.outer(g, h) for g, h in terms), rtol=1e-12)
    as_lists = [(list(g), list(h)) for g, h in terms]  # not numpy arrays: the general path
    np.testing.assert_allclose(runtime.summed_matmul_vjp_a(as_lists, W), summed, rtol=1e-12)
    # a @ fixed: A.T @ G
    terms_b = [(rng.standard_normal(3), rng.standard_normal(4)) for _ in range(6)]
    np.testing.assert_allclose(
        runtime.summed_matmul_vjp_b(terms_b, W), sum(np.outer(a, g) for g, a in terms_b), rtol=1e-12
    )


def rnn_reads(w, u, xs):
    """An RNN that reads a row of its inputs a step (``rows_of``)."""
    h = np.zeros(w.shape[0])
    for t in range(xs.shape[0]):
        h = np.tanh(np.dot(w, h) + np.dot(u, xs[t]))
    return np.sum(h * h)


def rnn_reads_written(w, u, xs):
    """The same, its inputs written in the loop: their rows after it are not the steps'."""
    xs = xs.copy()
    h = np.zeros(w.shape[0])
    for t in range(xs.shape[0]):
        h = np.tanh(np.dot(w, h) + np.dot(u, xs[t]))
        xs[t] = xs[t] * 0.5
    return np.sum(h * h) + np.sum(xs)


def rnn_reads_stopped(w, u, xs):
    """The same, stopped early: its steps are not the range's."""
    h = np.zeros(w.shape[0])
    for t in range(xs.shape[0]):
        h = np.tanh(np.dot(w, h) + np.dot(u, xs[t]))
        if np.sum(h) > 1.5:
            break
    return np.sum(h * h)


def rnn_reads_shifted(w, u, xs):
    """The same, reading the row after the loop's variable."""
    h = np.zeros(w.shape[0])
    for t in range(xs.shape[0] - 1):
        h = np.tanh(np.dot(w, h) + np.dot(u, xs[t + 1]))
    return np.sum(h * h)


def test_a_loop_s_rows_of_a_fixed_array_are_taken_after_it() -> None:
    """Where a loop's other operand kept by columns is its read ``xs[t]`` of an argument nothing
    rebinds or writes, at its variable over a range whose steps all run, the rows are taken after
    the loop at once (``rows_of(xs, r)``: no append a step, no read again in the backward pass),
    the same rows in the same order (the sum the same to the bit), and the gradient is finite
    differences'. An array the loop writes, a loop that may stop early, a read at another
    index keep their appends; each gradient is finite differences'; compiled by Numba too."""
    from tests.oracles import assert_fd

    rng = np.random.default_rng(5)
    w, u, xs = rng.standard_normal((4, 4)) * 0.4, rng.standard_normal((4, 3)), \
        rng.standard_normal((6, 3))
    text = ast_ad.source(ast_ad.grad(rnn_reads, (0, 1, 2)), w, u, xs)
    assert "rows_of(xs, r)" in text and "xs_item_steps" not in text, text
    grads = ast_ad.grad(rnn_reads, (0, 1, 2))(w, u, xs)
    assert_fd(rnn_reads, (w, u, xs), (0, 1, 2), grads)
    # the same sum as the steps kept one by one
    kept = runtime.summed_dot_vjp_a_steps(runtime.stacked_steps([xs[0] * 0 + 1.0] * 6),
                                          list(xs[::-1]), u)
    taken = runtime.summed_dot_vjp_a_steps(runtime.stacked_steps([xs[0] * 0 + 1.0] * 6),
                                           runtime.rows_of(xs, range(6)), u)
    np.testing.assert_array_equal(kept, taken)
    for fn in (rnn_reads_written, rnn_reads_stopped, rnn_reads_shifted):
        text = ast_ad.source(ast_ad.grad(fn, (0, 1, 2)), w, u, xs)
        assert "rows_of" not in text, (fn.__name__, text)
        assert_fd(fn, (w, u, xs), (0, 1, 2), ast_ad.grad(fn, (0, 1, 2))(w, u, xs))
    pytest.importorskip("numba")
    compiled = ast_ad.grad(rnn_reads, (0, 1, 2), jit="numba")(w, u, xs)
    for a, b in zip(compiled, grads, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_rows_of_is_the_steps_reads() -> None:
    """``rows_of(x, r)`` is the reads ``x[t]`` for ``t`` in ``reversed(r)`` stacked as a loop's
    steps are (``stacked_steps``), taken at once where ``x`` is a numpy array of rows and ``r`` a
    range (negative indices and steps included); its stand-in (``rows_of_by_steps``) reads the
    same."""
    x = np.arange(12.0).reshape(4, 3)
    for r in (range(4), range(-2, 2), range(3, 0, -1), range(0, 4, 2)):
        expected = np.array([x[t] for t in reversed(r)])
        np.testing.assert_array_equal(runtime.rows_of(x, r), expected)
        np.testing.assert_array_equal(runtime.rows_of_by_steps(x, r), expected)
    assert runtime.rows_of(x, range(2, 2)).shape == (0, 3)  # (no step: no row)
    # not a numpy array of rows: the reads stacked as a loop's steps are (``stacked_steps``)
    rows = [np.array([1.0, 2.0]), np.array([3.0, 4.0])]
    np.testing.assert_array_equal(runtime.rows_of(rows, range(2)), [[3.0, 4.0], [1.0, 2.0]])
    assert runtime.rows_of(np.arange(3.0), range(3)) == [2.0, 1.0, 0.0]  # (numbers: a list)
