"""Many tangents in one pass (``runtime.batched``): every batched form and every forward rule
against the same function applied to each tangent alone, and Jacobians and Hessians of random
programs, one batched pass against one pass a column.

A batch may be refused (the Jacobian then takes one pass a column); what is computed must be each
tangent's own result.
"""

from __future__ import annotations

import copy
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import ast_ad
from ast_ad.api import lowering
from ast_ad.api.compose import _batched_rows
from ast_ad.core import registry
from ast_ad.runtime.batched import Batch, BatchRefused, batched_pass, is_batch, zero_tangent
from ast_ad.testing import tracer
from ast_ad.testing.random_programs import programs
from tests.rule_cases import CASES
from tests.strategies import half
from tests.test_rules import FORWARD, _name, direction_like, is_float, leaves, observed

B = 3  # as many tangents as a vector in the cases has entries, now and then: a misaligned batch
# axis would broadcast against it silently, where any other size raises
DIRECTORY = tempfile.mkdtemp(prefix="ast_ad_batched_")


def stacked(directions):
    """One batch (or a container of batches) of several tangents shaped alike."""
    first = directions[0]
    if isinstance(first, dict):
        return {k: stacked([d[k] for d in directions]) for k in first}
    if isinstance(first, (tuple, list)):
        parts = [stacked([d[i] for d in directions]) for i in range(len(first))]
        return type(first)(*parts) if hasattr(first, "_fields") else type(first)(parts)
    return Batch(np.stack([np.asarray(d) for d in directions]))


def flat(value):
    if isinstance(value, dict):
        return [leaf for key in value for leaf in flat(value[key])]
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in flat(item)]
    return [value]


def assert_each(batched, singles, rtol=1e-10, atol=1e-12):
    """The ``j``-th tangent in ``batched`` is ``singles[j]`` (a value the same for every tangent,
    a zero, stands for each)."""
    for j, single in enumerate(singles):
        got, want = flat(lowering._one_of(batched, j)), flat(single)
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            assert not is_batch(a)
            a, b = np.asarray(a), np.asarray(b)
            shape = np.broadcast_shapes(a.shape, b.shape)
            assert shape == b.shape or b.ndim == 0 or a.ndim == 0, (a.shape, b.shape)
            np.testing.assert_allclose(np.broadcast_to(a, shape), np.broadcast_to(b, shape),
                                       rtol=rtol, atol=atol)


@pytest.mark.parametrize("rule", FORWARD, ids=_name)
@settings(max_examples=2, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_forward_rule_runs_on_a_batch_as_on_each_tangent(rule: registry.Rule, data) -> None:
    """Every forward rule in the registry: its tangent along a batch of three directions is, for
    each, its tangent along that direction alone (or the batch is refused)."""
    args, kwargs = data.draw(CASES[rule.fn])
    ans = rule.fn(*args, **kwargs)
    for k, arg in enumerate(args):
        if rule.jvp(k) is None or not any(is_float(leaf) for leaf in leaves(arg)):
            continue
        rng = np.random.default_rng(k)
        directions = [direction_like(arg, rng) for _ in range(B)]
        singles = [observed(tracer.tangent(rule, k, d, ans, args, kwargs), ans, rule.fn)
                   for d in directions]
        try:
            with batched_pass(B):
                both = observed(tracer.tangent(rule, k, stacked(directions), ans, args, kwargs),
                                ans, rule.fn)
        except (BatchRefused, ValueError, TypeError):
            # refused: (numpy turns a refused conversion into a ValueError in places)
            continue
        assert_each(both, singles, rtol=1e-9, atol=1e-10)


# ---- the forms, one by one, where the rules above may not reach every case --------------------
def _each(fn, *args):
    """``fn`` of the batches in ``args`` (``Batch``) against ``fn`` of each tangent."""
    out = fn(*args)
    singles = [fn(*(a.data[j] if is_batch(a) else a for a in args)) for j in range(B)]
    assert_each(out, singles)


SHAPES = [(), (3,), (2, 3), (3, 3), (2, 2, 3)]


@pytest.mark.parametrize("sa", SHAPES, ids=str)
@pytest.mark.parametrize("sb", SHAPES, ids=str)
def test_products_of_a_batch(sa, sb) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    ba, bb = Batch(rng.standard_normal((B, *sa))), Batch(rng.standard_normal((B, *sb)))
    for x, y in ((ba, b), (a, bb), (ba, bb)):
        try:
            np.broadcast_shapes(sa, sb)
        except ValueError:
            pass
        else:
            _each(np.multiply, x, y)
            _each(np.add, x, y)
        if len(sa) and len(sb) and sa[-1] == (sb[-2] if len(sb) > 1 else sb[0]):
            try:
                np.matmul(a, b)
            except ValueError:
                continue
            _each(np.matmul, x, y)
            _each(lambda p, q: p @ q, x, y)
            if len(sa) <= 2 and len(sb) <= 2:
                _each(np.dot, x, y)
        if is_batch(x) != is_batch(y) and len(sa) and len(sb) and sa[-1] == sb[-1]:
            _each(np.inner, x, y)
        if len(sa) and len(sb) and is_batch(x) != is_batch(y):
            _each(lambda p, q: np.tensordot(p, q, axes=0), x, y)
    _each(np.outer, ba, b)
    _each(lambda p, q: np.einsum("i,j->ij", p.ravel(), q.ravel()) if is_batch(p) else
          np.einsum("i,j->ij", np.ravel(p), np.ravel(q)), ba, b)


INDICES = [0, -1, slice(1, None), (Ellipsis, 0), ([0, 2],), (slice(None), None),
           (np.array([True, False, True]),), (1, [0, 1])]


@pytest.mark.parametrize("key", INDICES, ids=repr)
def test_an_index_of_a_batch_keeps_the_batch_axis(key) -> None:
    rng = np.random.default_rng(1)
    shape = (3, 3)
    batch = Batch(rng.standard_normal((B, *shape)))
    _each(lambda x: x[key], batch)
    written = batch.copy()
    value = Batch(rng.standard_normal((B, *np.empty(shape)[key].shape)))
    written[key] = value
    for j in range(B):
        one = batch.data[j].copy()
        one[key] = value.data[j]
        np.testing.assert_array_equal(written.data[j], one)
    # a value the same for every tangent, and one of fewer axes, broadcast as numpy broadcasts
    written[key] = 2.0
    assert np.all(written.data[(slice(None), *(key if isinstance(key, tuple) else (key,)))] == 2.0)


def test_advanced_indices_apart_are_refused() -> None:
    batch = Batch(np.zeros((B, 3, 3, 3)))
    with pytest.raises(BatchRefused):
        batch[[0, 1], :, [0, 1]]


@pytest.mark.parametrize("call", [
    lambda x: np.sum(x), lambda x: np.sum(x, axis=0), lambda x: np.sum(x, axis=-1, keepdims=True),
    lambda x: np.mean(x, axis=(0, 1)), lambda x: np.cumsum(x), lambda x: np.cumsum(x, axis=1),
    lambda x: np.transpose(x), lambda x: x.T, lambda x: np.swapaxes(x, 0, 1),
    lambda x: np.reshape(x, (3, -1)), lambda x: x.reshape(-1), lambda x: np.expand_dims(x, -1),
    lambda x: np.squeeze(x[:, :1]), lambda x: np.flip(x), lambda x: np.roll(x, 1),
    lambda x: np.roll(x, 1, axis=1), lambda x: np.diff(x, axis=0), lambda x: np.trace(x[:3]),
    lambda x: np.diagonal(x[:3]), lambda x: np.diag(x[0]), lambda x: np.diag(x[:3], 1),
    lambda x: np.tril(x), lambda x: np.concatenate([x, np.ones((2, 3))]),
    lambda x: np.concatenate([x, x], axis=None), lambda x: np.stack([x[0], x[1]], axis=1),
    lambda x: np.hstack([x[0], x[1]]), lambda x: np.vstack([x[0], np.zeros(3)]),
    lambda x: np.where(np.array([True, False, True]), x, 0.0),
    lambda x: np.broadcast_to(x[0], (4, 3)), lambda x: np.take(x, [0, 2], axis=1),
    lambda x: np.take_along_axis(x, np.array([[0], [2], [1]]), axis=1),
    lambda x: np.linalg.solve(np.eye(3) * 2.0, x[0]), lambda x: np.linalg.solve(np.eye(3) * 2, x),
    lambda x: np.split(x, 3, axis=1), lambda x: np.repeat(x, 2, axis=0), lambda x: np.tile(x, 2),
    lambda x: np.pad(x, 1), lambda x: np.zeros_like(x), lambda x: np.shape(x),
    lambda x: np.einsum("ij,jk->ik", x, np.ones((3, 2))), lambda x: np.einsum("ii", x),
    lambda x: np.real(x), lambda x: np.fft.fft(x, axis=0).real, lambda x: np.vdot(x, x.T * 0 + 1),
    lambda x: np.rollaxis(x, 1), lambda x: np.rollaxis(x, 0, -1), lambda x: np.atleast_2d(x[0]),
    lambda x: np.atleast_1d(x[0, 0]), lambda x: np.cumulative_sum(x, axis=1),
    lambda x: np.select([np.eye(3) > 0, np.ones((3, 3)) > 0], [x, 2.0 * x], 0.0),
    lambda x: np.column_stack([x[0], x[1]]), lambda x: np.rot90(x),
    lambda x: np.tensordot(x, np.arange(6.0).reshape(3, 2), axes=1),
    lambda x: np.inner(x, np.arange(3.0)), lambda x: np.cross(x, np.arange(3.0)),
    lambda x: np.average(x, weights=np.arange(9.0).reshape(3, 3)),
    lambda x: np.clip(x, -0.5, 0.5), lambda x: np.add.reduce(x, axis=1),
    lambda x: np.linalg.matrix_transpose(x), lambda x: np.diff(x, 2, axis=1),
], ids=lambda c: c.__code__.co_firstlineno)
def test_a_form_computes_each_tangent_s_own_result(call) -> None:
    rng = np.random.default_rng(2)
    _each(call, Batch(rng.standard_normal((B, 3, 3))))


def test_a_batch_refuses_becoming_one_number_or_one_array() -> None:
    batch = Batch(np.ones((B, 3)))
    for convert in (float, bool, np.asarray):
        with pytest.raises(BatchRefused):
            convert(batch)
    # a write into a plain array: numpy says it with its own words
    with pytest.raises((BatchRefused, ValueError)):
        np.zeros(3)[0] = batch[0]
    with pytest.raises(BatchRefused, match="np.kron"):
        np.kron(batch, np.ones(2))


def test_zero_tangents_are_batches_only_while_a_batched_pass_runs() -> None:
    x = np.ones(3)
    assert type(zero_tangent(x)) is np.ndarray
    with batched_pass(5):
        zero = zero_tangent([x, 2.0])
        assert is_batch(zero[0]) and zero[0].data.shape == (5, 3) and zero[1] == 0.0
    assert type(zero_tangent(x)) is np.ndarray


# ---- whole programs ------------------------------------------------------------------------------
def _columns_one_by_one(fn, args, k):
    x = args[k]
    columns = []
    for j in range(x.size):
        e = np.zeros(x.size)
        e[j] = 1.0
        tangents = tuple(e.reshape(x.shape) if i == k else np.zeros_like(a) if np.ndim(a)
                         else 0.0 for i, a in enumerate(args))
        columns.append(ast_ad.jvp(fn, copy.deepcopy(tuple(args)), tangents)[1])
    return columns


@half()
@given(programs(arrays=True), st.data())
def test_a_batched_pass_over_a_program_gives_each_column_s_own_pass(program, data) -> None:
    """The Jacobian's columns of a random program from one batched pass: the value Python's own,
    bit for bit, and each column the tangent of its own pass."""
    _batched_against_one_by_one(program, data)


@half()
@given(programs(arrays=True, mutation=True), st.data())
def test_a_batched_pass_over_a_mutating_program_gives_each_column_s_own_pass(program,
                                                                            data) -> None:
    """The same for programs that write into arrays, through views, aliases and containers: the
    zero tangents a loop writes into entry by entry are batches (``zero_tangent``)."""
    _batched_against_one_by_one(program, data)


def _batched_against_one_by_one(program, data) -> None:
    note(program.source)
    fn = program.load(DIRECTORY)
    args = tuple(program.arguments(data))
    for k, x in enumerate(args):
        if np.ndim(x) == 0 or np.size(x) < 2:
            continue
        lowered = lowering.lower(fn, copy.deepcopy(args))
        try:
            out, columns = lowering.batched_columns(lowered, x, x.size, k)
        except ast_ad.errors.ASTADError:
            return  # refused in forward mode (one pass a column refuses the same)
        except (BatchRefused, ValueError, TypeError):
            continue  # a batch refused: one pass a column
        assert np.array_equal(out, fn(*copy.deepcopy(args)), equal_nan=True)  # (nan is nan)
        for got, want in zip(columns, _columns_one_by_one(fn, args, k), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@half()
@given(programs(arrays=True, branches=False), st.data())
def test_the_hessian_of_a_program_in_one_pass_is_symmetric_and_matches_its_rows(program,
                                                                                data) -> None:
    """``hessian`` (one batched forward pass over the gradient's code) against the rows of
    Hessian-vector products, one pass each."""
    note(program.source)
    fn = program.load(DIRECTORY)
    args = tuple(program.arguments(data))
    try:
        hessian = ast_ad.hessian(fn)(*copy.deepcopy(args))
    except (ast_ad.errors.ASTADError, ValueError, TypeError, FloatingPointError):
        return
    x = args[0]
    if np.ndim(x) == 0 or not np.all(np.isfinite(hessian)):
        return
    hvp = ast_ad.hvp(fn)
    for j in range(x.size):
        e = np.zeros(x.size)
        e[j] = 1.0
        row = hvp(*copy.deepcopy(args), e.reshape(x.shape))
        np.testing.assert_allclose(hessian.reshape(x.size, x.size)[:, j], np.ravel(row),
                                   rtol=1e-8, atol=1e-10)


def test_a_jacobian_of_a_loop_of_item_writes_takes_one_pass(caplog) -> None:
    """``jacfwd`` of a loop that writes a new array entry by entry: one batched pass, not a pass an
    entry (no log of giving way), and the same numbers as reverse mode's rows."""

    def f(x):
        y = np.zeros(x.size)
        y[0] = x[0]
        for i in range(1, x.size):
            y[i] = y[i - 1] * np.sin(x[i]) + x[i - 1] ** 2
        return y

    x = np.linspace(0.1, 1.0, 7)
    with caplog.at_level("INFO", logger="ast_ad"):
        jac = ast_ad.jacfwd(f)(x)
    assert "one pass each" not in caplog.text
    np.testing.assert_allclose(jac, ast_ad.jacrev(f)(x), rtol=1e-12, atol=1e-14)


def test_jvp_takes_a_batch_of_directions() -> None:
    """``jvp(..., batched=True)``: directions stacked on a first axis, one tangent each, as many
    single calls give; a float argument's directions a vector."""

    def f(x, s, W):
        y = np.tanh(W @ x) * s
        for i in range(1, x.size):
            y[i] = y[i] + y[i - 1] * s
        return y, np.sum(y) * s

    rng = np.random.default_rng(4)
    x, s, W = rng.standard_normal(4), 0.7, rng.standard_normal((4, 4))
    xs, ss = rng.standard_normal((5, 4)), rng.standard_normal(5)
    out, dots = ast_ad.jvp(f, (x, s, W), (xs, ss, None), batched=True)
    assert dots[0].shape == (5, 4) and dots[1].shape == (5,)
    for j in range(5):
        one_out, one = ast_ad.jvp(f, (x, s, W), (xs[j], float(ss[j]), None))
        np.testing.assert_allclose(dots[0][j], one[0], rtol=1e-12)
        np.testing.assert_allclose(dots[1][j], one[1], rtol=1e-12)
    assert np.array_equal(out[0], one_out[0])
    with pytest.raises(ast_ad.errors.ASTADError, match=r"\(B, \*\(4,\)\)"):
        ast_ad.jvp(f, (x, s, W), (x, ss, None), batched=True)
    with pytest.raises(ast_ad.errors.ASTADError, match="same number of directions"):
        ast_ad.jvp(f, (x, s, W), (xs, ss[:2], None), batched=True)


def test_a_batched_jvp_gives_way_to_one_pass_a_direction(caplog) -> None:
    """Code a batch does not take (``np.kron`` of a tangent) runs one pass a direction, with the
    same numbers, and says so in the log."""

    def f(x):
        return np.kron(x, np.arange(1.0, 3.0)) * x[0]

    x, vs = np.array([0.5, 2.0]), np.eye(2)
    with caplog.at_level("INFO", logger="ast_ad"):
        _, dots = ast_ad.jvp(f, (x,), (vs,), batched=True)
    assert "one pass a direction" in caplog.text
    np.testing.assert_allclose(dots, ast_ad.jacfwd(f)(x).T)


def element_loop(x):
    y = x * 1.0
    for i in range(1, x.size):
        y[i] = y[i] * y[i - 1]
    return y


def test_jacrev_takes_its_rows_from_one_batched_backward_pass(caplog) -> None:
    """``jacrev`` of vectorized code, and of a loop whose backward pass adds into an adjoint entry
    by entry (its zeros a batch, ``writes.owned_adjoint``): one backward pass for every row (no log
    of giving way), the rows of ``jacfwd``."""

    def vectorized(x, W):
        return np.tanh(W @ x) * np.sum(x ** 2)

    rng = np.random.default_rng(5)
    x, W = rng.standard_normal(4), rng.standard_normal((3, 4))
    with caplog.at_level("INFO", logger="ast_ad"):
        rows = ast_ad.jacrev(vectorized)(x, W)
        by_w = ast_ad.jacrev(vectorized, 1)(x, W)
        loop_rows = ast_ad.jacrev(element_loop)(x)
    assert "one pass each" not in caplog.text
    np.testing.assert_allclose(rows, ast_ad.jacfwd(vectorized)(x, W), rtol=1e-12)
    np.testing.assert_allclose(by_w, ast_ad.jacfwd(vectorized, 1)(x, W), rtol=1e-12)
    np.testing.assert_allclose(loop_rows, ast_ad.jacfwd(element_loop)(x), rtol=1e-12)


def _value_and_square(fn, arity):
    """A function of ``fn``'s arguments with two outputs, ``fn``'s value and its square."""

    def one(x0):
        value = fn(x0)
        return np.array([value, value * value])

    def two(x0, x1):
        value = fn(x0, x1)
        return np.array([value, value * value])

    def three(x0, x1, x2):
        value = fn(x0, x1, x2)
        return np.array([value, value * value])
    return (one, two, three)[arity - 1]


def _rows_one_by_one(fn, args, k):
    out, vjp_fn = ast_ad.vjp(fn, *copy.deepcopy(args))
    return np.stack([np.asarray(vjp_fn(row)[k], dtype=float) for row in np.eye(out.size)])


@half()
@given(programs(arrays=True, mutation=True), st.data())
def test_a_batched_backward_pass_over_a_program_gives_each_row_s_own_pass(program, data) -> None:
    """The rows of a two-output function of a random program (its value and the value's square)
    from one batched backward pass, against one backward pass a row: the backward code reads and
    writes its adjoints entry by entry, as Python reads numbers and arrays."""
    note(program.source)
    args = tuple(program.arguments(data))
    fn = _value_and_square(program.load(DIRECTORY), len(args))
    for k, x in enumerate(args):
        if np.ndim(x) == 0:
            continue
        try:
            out, vjp_fn = ast_ad.vjp(fn, *copy.deepcopy(args))
            expected = _rows_one_by_one(fn, args, k)
        except (ast_ad.errors.ASTADError, ValueError, TypeError, FloatingPointError):
            return
        rows = _batched_rows(vjp_fn, out, [out], k, np.shape(x))
        if rows is None:
            continue  # a batch refused: one pass a row
        np.testing.assert_allclose(rows.reshape(expected.shape), expected, rtol=1e-9, atol=1e-12)


def test_vjp_takes_a_batch_of_cotangents() -> None:
    """``vjp_fn(out_bars, batched=True)``: cotangents stacked on a first axis (a stack per output of
    a tuple result), the adjoints stacked the same way, as many single calls give (a loop's
    backward pass that adds into an adjoint entry by entry too)."""

    def f(x, W):
        return np.tanh(W @ x), np.sum(x ** 3)

    rng = np.random.default_rng(6)
    x, W = rng.standard_normal(4), rng.standard_normal((3, 4))
    bars = (rng.standard_normal((5, 3)), rng.standard_normal(5))
    out, vjp_fn = ast_ad.vjp(f, x, W)
    x_bars, W_bars = vjp_fn(bars, batched=True)
    assert x_bars.shape == (5, 4) and W_bars.shape == (5, 3, 4)
    for j in range(5):
        one = vjp_fn((bars[0][j], float(bars[1][j])))
        np.testing.assert_allclose(x_bars[j], one[0], rtol=1e-12)
        np.testing.assert_allclose(W_bars[j], one[1], rtol=1e-12)
    out, vjp_fn = ast_ad.vjp(element_loop, x)
    rows = rng.standard_normal((3, 4))
    (stacked,) = vjp_fn(rows, batched=True)
    for j in range(3):
        np.testing.assert_allclose(stacked[j], vjp_fn(rows[j])[0], rtol=1e-12)
    with pytest.raises(ast_ad.errors.ASTADError, match=r"shaped \(B, \*\(4,\)\)"):
        vjp_fn(rows[0], batched=True)
