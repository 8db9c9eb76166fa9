"""What a careful person leaves out of a loop's gradient (issue 41). Loop-invariant arithmetic of
numbers moves before its loop (``optimize.hoist``): reverse mode computes and tapes it once, not
once a step. What may not move (a division, which raises for a zero float; a name the loop binds; a
name read before it in the loop, or after the loop; arithmetic of arrays) stays where it is, and
every value is Python's, bit for bit. Arrays of one shape share a shape label, so arithmetic between
them needs no ``unbroadcast`` and no shape is taped."""

from __future__ import annotations

import numpy as np
import pytest

import ast_ad
from ast_ad import transform
from ast_ad.api.arguments import shape_labels
from ast_ad.ir import nodes as ir
from ast_ad.optimize.hoist import hoisted
from tests.oracles import assert_fd, assert_same


def leapfrog(q, p, k, dt):
    for _step in range(10):
        p = p - 0.5 * dt * k * q
        q = q + dt * p
        p = p - 0.5 * dt * k * q
    return np.sum(q * q) + np.sum(p * p)


def stays(x, c, n):
    total = 0.0
    for i in range(n):
        a = 1.0 / c  # a division: raises for c = 0.0, so it runs where Python runs it
        total = total + a * x[i]
        c2 = c * 2.0  # read after the loop: stays
        b = c2 + total  # reads what the loop binds
        total = total + b
    return total + c2


def read_before(x, c):
    total = 0.0
    s = 1.0
    for i in range(3):
        total = total + s * x[i]  # reads s before the loop binds it again
        s = c * 3.0
    return total


def no_step(x, c, n):
    total = x[0]
    for i in range(n):
        total = total + (c * 2.0) * x[i]
    return total


def _loops(function: ir.Function) -> list[ir.For]:
    return [s for s in ir.walk(function.body) if type(s) is ir.For]


def _calls_in(body: tuple[ir.Stmt, ...]) -> list[str]:
    return [s.value.fn.hint for s in ir.walk(body)
            if type(s) is ir.Assign and type(s.value) is ir.Call]


def test_invariant_arithmetic_of_numbers_moves_before_the_loop() -> None:
    function = transform.normalized(leapfrog)
    labels = shape_labels((np.ones(3), np.ones(3), 1.0, 0.1))
    moved = hoisted(function, labels)
    [before], [after] = _loops(function), _loops(moved)
    # 0.5 * dt and its product with k, twice (the two half steps): four statements fewer a step
    assert len(before.body) - len(after.body) == 4
    # what stays reads something the loop binds
    bound = {n for s in ir.walk(after.body) for n in ir.defined(s)} | {after.target}
    assert all(set(ir.reads_of(s)) & bound for s in after.body if type(s) is ir.Assign)


def test_a_gradient_tapes_nothing_invariant_and_is_exact() -> None:
    q, p = np.array([1.0, 2.0, 3.0]), np.array([0.5, -0.2, 0.1])
    text = ast_ad.source(ast_ad.grad(leapfrog, (0, 1, 2, 3)), q, p, 1.3, 0.1)
    loop = text.split(" in r:")[1].split("out = ")[0]
    assert "0.5 * dt" not in loop and "t1_tape" not in text and "t1_times_k_tape" not in text
    value, grads = ast_ad.value_and_grad(leapfrog, (0, 1, 2, 3))(q, p, 1.3, 0.1)
    assert value == leapfrog(q, p, 1.3, 0.1)
    assert_same(grads, ast_ad.tracer.grad(leapfrog, (0, 1, 2, 3))(q, p, 1.3, 0.1))
    # forward mode moves them too: its tangent is the gradient's along the direction
    direction = (np.array([0.3, -1.0, 0.5]), np.array([1.0, 0.2, -0.4]), 0.7, -1.1)
    value_f, tangent = ast_ad.jvp(leapfrog, (q, p, 1.3, 0.1), direction)
    assert value_f == value
    expected = sum(np.sum(g * d) for g, d in zip(grads, direction, strict=True))
    assert tangent == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("fun, args", [
    (stays, (np.array([1.0, 2.0, 3.0]), 0.7, 3)),
    (read_before, (np.array([1.0, 2.0, 3.0]), 0.7)),
])
def test_what_may_not_move_stays(fun, args) -> None:
    function = transform.normalized(fun)
    labels = shape_labels(args)
    assert hoisted(function, labels) is function
    value, grads = ast_ad.value_and_grad(fun, (0, 1))(*args)
    assert value == fun(*args)
    assert_fd(fun, args, (0, 1), grads)


def test_a_division_by_zero_in_a_loop_that_runs_no_step_raises_only_what_python_does() -> None:
    """``stays`` divides by ``c`` in its loop: with no step Python never divides, and neither does
    the gradient (no ZeroDivisionError: it raises Python's error for the name read after the loop
    it never bound)."""
    x = np.array([1.0, 2.0, 3.0])
    with pytest.raises(UnboundLocalError):
        stays(x, 0.0, 0)
    with pytest.raises(UnboundLocalError):
        ast_ad.grad(stays, (0, 1))(x, 0.0, 0)


@pytest.mark.parametrize("n", [0, 1, 3])
def test_moved_arithmetic_where_the_loop_runs_no_step(n) -> None:
    x = np.array([1.0, 2.0, 3.0])
    function = transform.normalized(no_step)
    labels = shape_labels((x, 0.7, n))
    assert _calls_in(_loops(hoisted(function, labels))[0].body) != _calls_in(
        _loops(function)[0].body
    )
    value, grads = ast_ad.value_and_grad(no_step, (0, 1))(x, 0.7, n)
    assert value == no_step(x, 0.7, n)
    assert_same(grads, ast_ad.tracer.grad(no_step, (0, 1))(x, 0.7, n))


def test_arrays_of_one_shape_need_no_unbroadcast_and_others_are_made_again() -> None:
    """Arguments of one shape share a shape label (``api.arguments.shape_labels``): arithmetic
    between them needs no ``unbroadcast``, and nothing is taped for a shape. Called with arrays of
    two shapes, the gradient is made again for them, and is right there too."""
    q, p = np.array([1.0, 2.0, 3.0]), np.array([0.5, -0.2, 0.1])
    assert shape_labels((q, p, 1.3))[0] == shape_labels((q, p, 1.3))[1]
    assert shape_labels((q, p[:1], 1.3))[0] != shape_labels((q, p[:1], 1.3))[1]
    text = ast_ad.source(ast_ad.grad(leapfrog, (0, 1, 2, 3)), q, p, 1.3, 0.1)
    # (and a number's adjoint from an array's is a sum: ``summed_product(t2_bar, q)``, a
    # ``np.vdot``, for ``k``'s)
    assert "_shape" not in text and "unbroadcast" not in text
    assert "summed_product(t2_bar, q)" in text
    gradient = ast_ad.value_and_grad(leapfrog, (0, 1, 2, 3))
    for p_now in (p, p[:1], p):
        value, grads = gradient(q, p_now, 1.3, 0.1)
        assert value == leapfrog(q, p_now, 1.3, 0.1)
        assert_same(grads, ast_ad.tracer.grad(leapfrog, (0, 1, 2, 3))(q, p_now, 1.3, 0.1))


def rnn_dot(w, u, xs):
    h = np.zeros(4)
    for t in range(xs.shape[0]):
        h = np.tanh(np.dot(w, h) + np.dot(u, xs[t]))
    return np.sum(h)


def test_an_rnn_written_with_np_dot_calls_no_helper_and_tapes_no_product() -> None:
    """``np.dot`` of a matrix and a vector is the product ``@`` is (``kinds``: its number of axes;
    ``def_vjp_by_ranks``: its rules), so its adjoint is ``dot_bar @ w``, and the product itself is
    not taped (the backward pass reads no more than its shape)."""
    rng = np.random.default_rng(0)
    w, u, xs = rng.random((4, 4)) * 0.3, rng.random((4, 2)), rng.random((6, 2))
    text = ast_ad.source(ast_ad.grad(rnn_dot, (0, 1)), w, u, xs)
    assert "dot_vjp_b(" not in text and "@ w" in text and "dot_tape" not in text
    value, grads = ast_ad.value_and_grad(rnn_dot, (0, 1))(w, u, xs)
    assert value == rnn_dot(w, u, xs)
    assert_same(grads, ast_ad.tracer.grad(rnn_dot, (0, 1))(w, u, xs))


def damped(x, k, w):
    for _ in range(5):
        neg_k = -k  # an invariant array: computed once
        decay = np.exp(w)
        x = x + 0.1 * neg_k * x * decay
    return np.sum(x * x)


def test_invariant_arithmetic_of_arrays_moves_too() -> None:
    """A sign, arithmetic with numbers, and a numpy function entry by entry of one invariant array
    raise nothing and move; the gradient keeps no tape of them."""
    x, k, w = np.array([1.0, -0.5, 2.0]), np.array([0.3, 0.1, 0.2]), np.array([0.1, -0.2, 0.05])
    function = transform.normalized(damped)
    [before], [after] = _loops(function), _loops(hoisted(function, shape_labels((x, k, w))))
    assert len(before.body) - len(after.body) == 3  # and 0.1 * neg_k, once neg_k has moved
    text = ast_ad.source(ast_ad.grad(damped, (0, 1, 2)), x, k, w)
    assert "neg_k_tape" not in text and "decay_tape" not in text and "t1_tape" not in text
    value, grads = ast_ad.value_and_grad(damped, (0, 1, 2))(x, k, w)
    assert value == damped(x, k, w)
    assert_same(grads, ast_ad.tracer.grad(damped, (0, 1, 2))(x, k, w))


def half_steps(x, c):
    a = 0.5 * c
    b = 0.5 * c  # the same number: a copy of a
    z = -0.0 * c
    w = 0.0 * c  # not the same: -0.0 is not 0.0
    return np.sum(x * a) + np.sum(x * b) + z + w


def lengths(x):
    ys = [x]
    n1 = len(ys)
    ys.append(x * 2.0)
    n2 = len(ys)  # not n1: the append changed ys in place
    return np.sum(ys[-1]) * n1 * n2


def test_a_number_computed_twice_is_computed_once() -> None:
    from ast_ad.optimize.common import shared_numbers

    x = np.array([1.0, 2.0])
    function = transform.normalized(half_steps)
    shared = shared_numbers(function, shape_labels((x, 0.7)))
    copies = {s.target: s.value.name for s in shared.body
              if type(s) is ir.Assign and type(s.value) is ir.Var}
    assert copies == {"b": "a"}
    function = transform.normalized(lengths)
    assert shared_numbers(function, shape_labels((x,))) is function
    value, grads = ast_ad.value_and_grad(lengths)(x)
    assert value == lengths(x) and np.allclose(grads, 4.0)
    value, grads = ast_ad.value_and_grad(half_steps, (0, 1))(x, 0.7)
    assert value == half_steps(x, 0.7)
    assert_same(grads, ast_ad.tracer.grad(half_steps, (0, 1))(x, 0.7))
    text = ast_ad.source(ast_ad.grad(leapfrog, (0, 1, 2, 3)), x, x, 1.3, 0.1)
    assert text.count("= 0.5 * dt") == 1  # (and the user's line, in comments)


def identity_matters(x0, x1, x2):
    """Found by a long random run (seed 9903): ``np.tanh(x2)`` is loop-invariant in value, but each
    step makes a new array, and the next step's ``x1 += ...`` writes into the one made two steps
    before, through the names the swap passes it along. Computed once before the loop, the steps
    would share one array and the write would reach the name returned: 0.2877 where Python gives
    0."""
    for i0 in range(3):
        x1 += 0.1 * i0 * np.sin(0.5)
        x1, x0 = x0, np.tanh(x2)
    return np.sum(x1)


def test_an_array_stays_in_its_loop_where_a_name_s_object_is_asked_about() -> None:
    args = (np.zeros(3), np.zeros(3), np.zeros(3))
    function = transform.normalized(identity_matters)
    moved = hoisted(function, shape_labels(args))
    loop = next(s for s in moved.body if isinstance(s, ir.For))
    assert any(isinstance(s, ir.Assign) and isinstance(s.value, ir.Call)
               and s.value.fn.obj is np.tanh for s in loop.body)  # (not moved)
    value, grads = ast_ad.value_and_grad(identity_matters, (0, 1, 2))(*args)
    assert value == identity_matters(*(np.zeros(3) for _ in range(3))) == 0.0
    out, _ = ast_ad.jvp(identity_matters, args, args)
    assert out == 0.0
    x = tuple(np.random.default_rng(k).standard_normal(3) for k in range(3))
    value, grads = ast_ad.value_and_grad(identity_matters, (0, 1, 2))(*x)
    assert value == identity_matters(*(a.copy() for a in x))
    assert_same(grads, ast_ad.tracer.grad(identity_matters, (0, 1, 2))(*(a.copy() for a in x)))
    assert_fd(lambda *a: identity_matters(*(b.copy() for b in a)), x, (0, 1, 2), grads)


def asks_is(w):
    prev = None
    total = 0.0
    for _i in range(3):
        t = np.exp(w)
        if prev is t:  # never, in Python: each step makes a new array
            total = total + 100.0
        prev = t
        total = total + np.sum(t)
    return total


def test_an_array_stays_in_its_loop_where_the_code_asks_is() -> None:
    w = np.array([0.1, -0.2])
    value, grad = ast_ad.value_and_grad(asks_is)(w)
    assert value == asks_is(w)
    np.testing.assert_allclose(grad, 3 * np.exp(w), rtol=1e-14)


def halves(x, m, n):
    h = 1.0 / (n + 1)  # a float (a parameter's label says a number, not which)
    total = 0.0
    for i in range(n):
        a = h / 2  # a float divided by a number that is not zero: raises nothing, moves
        b = m / 2  # an integer divided: 10 ** 400 / 2 raises OverflowError, so it stays
        c = a  # a copy of what moves: moves too
        total = total + c * x[i] + b * x[i]
    return total


def test_a_float_divided_by_a_constant_moves_and_an_integer_divided_stays() -> None:
    x = np.array([1.0, 2.0, 3.0])
    function = transform.normalized(halves)
    moved = hoisted(function, shape_labels((x, 4, 3)))
    [before], [after] = _loops(function), _loops(moved)
    assert len(before.body) - len(after.body) == 2  # ``h / 2`` and its copy
    assert [s.value.args[0].name for s in ir.walk(after.body) if type(s) is ir.Assign
            and type(s.value) is ir.Call and s.value.fn.hint == "operator.truediv"] == ["m"]
    value, grad = ast_ad.value_and_grad(halves)(x, 4, 3)
    assert value == halves(x, 4, 3)
    assert_same((grad,), (ast_ad.tracer.grad(halves)(x, 4, 3),))
    # with no step, Python never divides the integer too large for a float: nor does the gradient
    assert ast_ad.value_and_grad(halves)(x, 10**400, 0)[0] == 0.0
