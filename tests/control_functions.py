"""Functions for tests/test_control_flow.py."""

import numpy as np


def running_sum(x):
    y = 0.0
    for _ in range(7):
        y = y + x
    return y


def stops_early(x):
    for _ in range(100):
        x = x * 1.1
        if x > 10.0:
            break
    return x


def power(x, n):
    if n == 0:
        return 1.0
    return x * power(x, n - 1)


def newton_sqrt(a):
    x = a
    steps = 0
    while steps < 30:
        x = 0.5 * (x + a / x)
        steps += 1
    return x


def sum_rows(x):
    total = 0.0
    for row in x:
        total = total + np.sum(row * row)
    return total


def repeated_square(x, n):
    for _ in range(n):
        x = x * x
    return x


def flag_changed_in_its_branch(x0):
    """A return in a loop that never runs, then one that does: the `returned` flag changes inside an if."""
    if 0.5 < 0.0:
        x0 = 0.5
    else:
        n = 0
        while n < 0:
            n += 1
            return x0
    m = 0
    while m < 1:
        m += 1
        if 0.5 > 0.0:
            return 0.5
        x0 = 0.5 * x0
    return 0.5


def half_tanh(a, scale=0.5):
    return scale * np.tanh(a) + a


def helper_result_overwrites_its_argument(x):
    for _ in range(2):
        x = half_tanh(x)
    x = half_tanh(x)
    return x


def strict_pairs(xs, ys):
    total = 0.0
    for a, b in zip(xs, ys, strict=True):
        total = total + a * b
    return total


def pairs_as_tuples(x, weights):
    total = 0.0
    for pair in zip(weights, [1.0, 2.0, 3.0], strict=False):  # an iterator: its items are what the loop reads
        total = total + pair[0] * pair[1] * x
    return total


def reshaped_by_pairs(g, reps, shape):
    """tile's adjoint, in short: a comprehension over zip(..., strict=True) of plain numbers."""
    blocks = np.reshape(g, [n for pair in zip(reps, shape, strict=True) for n in pair])
    return np.sum(blocks * blocks)


def first_large(x):
    return next(v for v in x if v > 0.5) * 2.0


def unpacked_comprehension(x):
    a, b = [v * 2.0 for v in x]
    return a * b


def unpacked_appends(x):
    items = []
    for v in x:
        items.append(v * 3.0)
    a, b = items
    return a * b


def written_into_zeros_like(x):
    out = np.zeros_like(x)
    for i in range(3):
        out[i] = x[i] * 2.0
    return np.sum(out * x)


ONES = np.ones(3)


def zeros_like_then_rebound_in_a_loop(x0, x1, x2):
    """Found by the long random-program run: ``np.zeros_like`` of a value (nothing flows back through it), the
    name then rebound in a loop after an early return; the backward pass read an adjoint it never made."""
    m = 0.5 * np.outer(np.tanh(x0), np.cos(x2))
    if np.sum((ONES * x2) @ m) > 0.3:
        for i0 in range(4):
            x1 += 0.1 * i0 * np.sin(x1)
            v1 = [x1] * 2
            x0 = v1[0] + v1[1]
    elif np.sum(x2) < -0.4:
        return np.sum(x0)
    v3 = np.zeros_like(np.ones(3) * x2)
    np.sin(v3, out=v3)
    n4 = 0
    while n4 < 1:
        n4 += 1
        items5 = []
        for j6 in range(2):
            items5.append(np.tanh(np.cos(x2)) * j6)
        v3 = sum(items5)
        items8 = []
        for j9, (v11, v12) in enumerate(zip([(0.5 + x1), np.sin(v3)], [x2, np.tanh(0.5)], strict=True)):
            items8.append(np.sum(np.tanh(v11) * v12) * (j9 + 1))
        x2 = np.sum(np.stack(items8), axis=0)
    if np.sum(np.cos(0.5)) < 0.3:
        x0 -= 0.5 * ((ONES * np.dot(m, ONES * x2)) @ m)
    return np.sum(x0 * x2)


def rows_as_a_list(x):
    rows = list(x)
    return np.sum(rows[0] * rows[1]) + np.sum(np.stack(rows) ** 2)


def a_tuple_of_a_list(x):
    xs = [x * 1.0, np.sin(x)]
    pair = tuple(xs)
    first, second = pair
    return np.sum(first * second) + np.sum(pair[1])


def pick_one(a, b):
    if np.sum(a[0]) > 0.0:
        return a
    return b


def pick_entry(a, b):
    if a["a"] > 0.0:
        return a
    return b


def picked_list_rebuilt_in_a_loop(x):
    total = pick_one([x * 1.0, x * 2.0], [x, x])
    for _ in range(3):
        total = [total[0] + x, total[1] * x]
    return total[0] + total[1]


def picked_list_and_its_items(x):
    xs = [x * 1.0, x * 2.0]
    ys = [x, x * x]
    total = pick_one(xs, ys)
    return total[0] * total[1] + xs[0] + ys[1]


def picked_tuple_unpacked(x):
    a, b = pick_one((x * 1.0, x * 2.0), (x, x * x))
    return a * b


def picked_dict(x):
    t = pick_entry({"a": x * 1.0, "b": x}, {"a": -x, "b": x * 3.0})
    return t["a"] * t["b"]


def picked_in_a_loop(x):
    s = 0.0
    for i in range(3):
        t = pick_one([x * 1.0 - i, x * 2.0], [x, x * x])
        s = s + t[0] * t[1]
    return s


ONES_3 = np.ones(3)


def picked_list_of_products(x0):
    """The random programs found it: the list a helper does not return holds a product of a matrix, whose rule
    cannot take the float zero its adjoint then is (``dense_adjoint``)."""
    m = 0.5 * np.outer(np.tanh(x0), np.cos(x0))
    return np.sum(pick_one([m @ (ONES_3 * -0.25), 0.5], [m @ (ONES_3 * x0), 0.5])[0])


def shifted_in_a_loop(x, c):
    """``s`` is read by the backward pass only for its shape (``unbroadcast``: ``c`` has one entry)."""
    h = x
    for t in range(4):
        s = c * (t + 1.0)
        h = np.tanh(h + s)
    return np.sum(h ** 2)


def reshaped_in_a_loop(W, h):
    """``a`` is read by the backward pass only for its shape (``np.reshape``'s rule reads ``np.shape(a)``)."""
    for _ in range(3):
        a = W @ h
        h = np.tanh(np.reshape(a, (-1,)) * 0.5)
    return np.sum(h ** 2)


def shape_and_value_in_a_loop(x, c):
    """``s`` is read for its shape and for its value (the product's rule): the array itself is kept
    (``c * h[0]``: not the same each step, so it stays in the loop)."""
    h = x
    for _ in range(3):
        s = c * h[0]
        h = np.tanh(h + s) * s
    return np.sum(h)


# an adjoint zero before a loop's backward pass is zero at the top of its first step only: a name
# bound in a loop inside it that runs no step (found by a long random run) kept the sum of every
# step's contribution but the last
def bound_in_a_loop_of_no_step(x0):
    v0 = 0.5
    n1 = 0
    while n1 < 2:
        n1 += 1
        v0 = np.sum(x0 * x0)
        for _i4 in range(0):
            x0 = 0.5 * np.tanh(0.5)
    return v0


def bound_in_a_loop_of_k_steps(x0, k):
    s = 0.0
    for _t in range(3):
        s = s + np.sum(x0 * x0)
        for _i in range(k):
            x0 = x0 * 0.0 + 1.0
    return s


def written_through_a_view_made_on_two_paths(x0):
    v0 = 0.5
    n1 = 0
    while n1 < 2:
        n1 += 1
        v2 = np.ones(3) * x0
        if np.sum(0.5) > 0.0:
            v3 = v2[:]
        else:
            v3 = v2[:]
        v3[0] = np.tanh(np.sum(0.5))
        v0 = np.sum(v3) * v2
        for i4 in range(0):
            v0 += 0.1 * i4 * np.sin(0.5)
            x0 = 0.5 * np.tanh(0.5)
    return np.sum(v0)


def bound_in_a_while_of_no_step(x0):
    v1 = np.tanh(x0)
    for _i3 in range(2):
        x0 = 0.5 * np.tanh(((0.5 + v1) + 0.5) + 0.5)
        n4 = 0
        while n4 < 0:
            n4 += 1
            v1 = 0.5 * np.tanh(0.5)
    return x0


def taped_in_a_loop_of_no_step(x0, x1):
    # the backward loop over the tape has nothing else to do: it binds the name alone
    for i0 in range(0):
        x1 += 0.1 * i0 * np.sin(0.5)
        x0 = 0.5 * np.tanh(0.5)
    x0 = 0.5
    return x0 + x1 * 0.0


def read_from_a_list_then_scaled(x0):
    # ``getitem_vjp`` of a list is linear in the adjoint but gives a list, which a float cannot
    # scale (found by a long random run): the factor stays inside
    items0 = []
    for j1, (v3, v4) in enumerate(zip([-0.25, 0.5], [np.tanh(x0), x0], strict=True)):
        items0.append(np.sum(np.tanh(v3) * v4) * (j1 + 1))
    v2 = items0[-1]
    x0, v2 = v2, np.tanh(-(v2 * x0))
    return np.tanh(np.cos(v2))
