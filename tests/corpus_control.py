"""Functions with control flow: branches, loops, jumps, recursion, closures, lists."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from tests.corpus import Case
from tests.strategies import arrays, floats, values

W = np.linspace(-0.5, 0.5, 9).reshape(3, 3)
U = np.linspace(0.3, -0.3, 6).reshape(3, 2)


def branch(x):
    if x > 0.5:
        y = x * x
    elif x > -0.5:
        y = np.sin(x) * 3.0
    else:
        y = -x
    return y * 2.0


def branch_arrays(x, y):
    if np.sum(x) > 0 and np.max(y) < 5.0:
        z = x * y
    else:
        z = x + y
    return np.sum(z ** 2)


def conditional_expression(x):
    y = x * 2.0 if x > 0 else x ** 3
    return y + (np.exp(y) if y < 1 else 1.0)


def scalar_loop(x):
    for _ in range(20):
        x = x * 0.99 + math.sin(x) * 0.1
    return x


def loop_runtime_range(x, n):
    total = 0.0
    for i in range(1, n + 1, 2):
        total = total + x ** i / i
    return total


def rows(X):
    total = 0.0
    for row in X:
        total = total + np.sum(np.tanh(row) * row)
    return total


def enumerate_zip_reversed(xs, ys):
    total = 0.0
    for i, (a, b) in enumerate(zip(xs, ys, strict=False)):
        total = total + a * b * (i + 1)
    for a in reversed(xs):
        total = total * 0.5 + a
    return total


def nested_loops(x):
    acc = x
    for i in range(3):
        for j in range(i + 1):
            acc = acc * 0.9 + np.sin(acc + j)
    return np.sum(acc)


def while_active(x):
    while x > 0.1:
        x = x * 0.5 + 0.01
    return x * 3.0


def while_count(x):
    n = 0
    y = x
    while n < 4:
        y = y * x + 1.0
        n += 1
    return y


def break_continue(x):
    total = 0.0
    for i in range(10):
        if i % 3 == 1:
            continue
        total = total + x * i
        if total > 20.0:
            break
        total = total * x
    return total


def early_returns(x):
    if x < -1.0:
        return x * x
    y = x * 3.0
    for _i in range(5):
        y = y + np.sin(y)
        if y > 4.0:
            return y * 2.0
    return y - x


def for_else(x):
    y = x
    for _i in range(4):
        y = y * 1.5
        if y > 3.0:
            break
    else:
        y = y + 100.0
    return y


def rnn(x, h0):
    h = h0
    for t in range(4):
        h = np.tanh(W @ h + U @ (x * (t + 1)))
    return np.sum(h ** 2)


def list_building(x):
    out = []
    h = x
    for _t in range(4):
        h = np.sin(h) * 1.1
        out.append(h)
    return np.sum(np.stack(out) ** 2) + sum(out) * 0.5 + out[1] * out[-1]


def comprehension(x):
    squares = [x ** k for k in range(4)]
    return sum(squares) + sum(np.cos(x * k) for k in range(3) if k != 1)


def closures(x, y):
    scale = 2.0 * y

    def helper(z):
        return z * scale + np.sin(z)
    twice = lambda v: v * 2.0  # noqa: E731
    return helper(x) + twice(helper(x * x)) + y


def power(x, n):
    if n == 0:
        return 1.0
    return x * power(x, n - 1)


def recursion(x):
    return power(x, 4) + power(np.sin(x), 2)


def is_even(x, n):
    if n == 0:
        return x
    return is_odd(x * 1.1, n - 1)


def is_odd(x, n):
    if n == 0:
        return -x
    return is_even(np.sin(x), n - 1)


def mutual_recursion(x):
    return is_even(x, 5)


def augmented_in_loop(x):
    y = 1.0
    for i in range(3):
        y *= x
        y += np.sin(x) * i
        y /= 1.5
        y -= x * 0.1
    return y


def index_list_with_loop(xs):
    parts = [xs[0] * 2.0, xs[1] + 1.0, xs[2] ** 2]
    total = 0.0
    for i in range(3):
        total = total + parts[i] * (i + 1)
    return total


def unused_loop(x):
    count = 0
    for i in range(5):
        count = count + i
    return x * count


def array_in_loop(x):
    acc = np.zeros(3)
    for i in range(3):
        acc = acc + x[i] * W[i]
    return np.sum(acc * acc)


def matmul_in_skipped_branch(A, h, n):
    y = A @ h
    for i in range(3):
        if n > i:
            h = np.tanh(y)
        y = A @ h  # the last y is never used: its adjoint stays zero, which matmul's rule must take
    return np.sum(h)


def reshape_in_skipped_branch(x, n):
    y = x.reshape(2, 2)
    total = 0.0
    for i in range(3):
        if n > i:
            total = total + np.sum(y[0] * np.cos(y[1]))
        y = (x * (i + 1.0)).reshape(2, 2)
    return total + np.sum(x)


def rotate(v):
    return v @ W


def helper_in_skipped_branch(x, n):
    y = rotate(x)
    for i in range(2):
        if n > i:
            x = np.tanh(y)
        y = rotate(x)
    return np.sum(x)


def shared_weights(A, C, h):
    # A and C are used by every step: their adjoints are summed once, after the loop (ast_ad/optimize/batching.py)
    for _ in range(4):
        h = np.tanh(A @ h) + np.dot(h, C) * 0.5 + 0.1 * (h @ A) + 0.1 * np.dot(C, h)
    return np.sum(h ** 2)


def shared_weights_while(A, h):
    n = 0
    while n < 3:
        h = np.sin(A @ h)
        n += 1
    return np.sum(h)


def decaying_weights(A, h):
    # A changes every step: its adjoint cannot wait
    for _ in range(3):
        h = np.tanh(A @ h)
        A = A * 0.9
    return np.sum(h)


CASES = [
    Case(branch, st.tuples(floats().filter(lambda v: abs(v - 0.5) > 1e-3 and abs(v + 0.5) > 1e-3))),
    Case(branch_arrays, st.tuples(arrays((3,)), arrays((3,))).filter(lambda a: abs(np.sum(a[0])) > 1e-3), (0, 1)),
    Case(conditional_expression, st.tuples(floats().filter(lambda v: abs(v) > 1e-3 and abs(2 * v - 1) > 1e-3))),
    Case(scalar_loop, st.tuples(floats()), autograd=False),
    Case(loop_runtime_range, st.tuples(floats(), st.integers(0, 6))),
    Case(rows, st.tuples(arrays((3, 2)))),
    Case(enumerate_zip_reversed, st.tuples(arrays((3,)), arrays((4,))), (0, 1)),
    Case(nested_loops, st.tuples(values())),
    Case(while_active, st.tuples(floats("pos")), smooth=False),  # the trip count jumps with x
    Case(while_count, st.tuples(floats())),
    Case(break_continue, st.tuples(floats("pos")), smooth=False),
    Case(early_returns, st.tuples(floats()), smooth=False),
    Case(for_else, st.tuples(floats()), smooth=False),
    Case(rnn, st.tuples(arrays((2,)), arrays((3,))), (0, 1)),
    Case(list_building, st.tuples(floats())),
    Case(comprehension, st.tuples(floats())),
    Case(closures, st.tuples(floats(), floats()), (0, 1)),
    Case(recursion, st.tuples(floats())),
    Case(mutual_recursion, st.tuples(floats())),
    Case(augmented_in_loop, st.tuples(floats())),
    Case(index_list_with_loop, st.tuples(arrays((3,)))),
    Case(unused_loop, st.tuples(floats())),
    Case(array_in_loop, st.tuples(arrays((3,)))),
    Case(matmul_in_skipped_branch, st.tuples(arrays((3, 3)), arrays((3,)), st.integers(0, 3)), (0, 1)),
    Case(reshape_in_skipped_branch, st.tuples(arrays((4,)), st.integers(0, 3))),
    Case(helper_in_skipped_branch, st.tuples(arrays((3,)), st.integers(0, 2))),
    Case(shared_weights, st.tuples(arrays((3, 3)), arrays((3, 3)), arrays((3,))), (0, 1, 2)),
    Case(shared_weights, st.tuples(arrays((3, 3)), arrays((3, 3)), arrays((3, 3))), (0, 1, 2)),
    Case(shared_weights_while, st.tuples(arrays((3, 3)), arrays((3,))), (0, 1)),
    Case(decaying_weights, st.tuples(arrays((3, 3)), arrays((3,))), (0, 1)),
]
