"""Loops that write arrays item by item: reverse mode writes them in place
(``analysis.in_place_writes``)."""

import numpy as np


def chain(x):
    y = np.ones(x.shape[0])
    for i in range(1, x.shape[0]):
        y[i] = y[i - 1] * x[i]
    return np.sum(y)


def into_parameter(x, y):
    for i in range(1, 4):
        y[i] = y[i - 1] * x[i] + y[i]
    return np.sum(y * y)


def grid(x):
    g = np.zeros((3, 3))
    for i in range(3):
        for j in range(3):
            g[i, j] = x[i] * x[j] + (g[i - 1, j] if i > 0 else 0.0)
    return np.sum(g ** 2)


def rows(x):
    m = np.zeros((3, 4))
    for i in range(3):
        m[i] = x * (i + 1.0) + (m[i - 1] if i > 0 else 0.0)
    return np.sum(np.sin(m))


def stops_early(x):
    y = np.ones(4)
    k = 0
    while k < 4:
        y[k] = y[k - 1] * x[k] if k > 0 else x[0]
        if y[k] > 2.0:
            break
        k = k + 1
    return np.sum(y)


def strided_slices(x):
    y = np.zeros(6)
    for i in range(0, 6, 2):
        y[i:i + 2] = x[i:i + 2] * (1.0 + np.sum(y))
    return np.sum(np.sin(y))


def repeated_indices(x):
    y = np.zeros(4)
    for k in range(3):
        y[[0, 0, k + 1]] = x[k:k + 3] * (k + 1.0)  # only the last write to entry 0 lands
        y[[1, 1]] += x[:2]  # += reads once and writes once: one of the two additions lands
    return np.sum(y * y)


def masked(x):
    y = x * 1.0
    for k in range(3):
        y[y > 1.0] = y[y > 1.0] * 0.5
        y[k] = y[k] + x[k + 1]
    return np.sum(y ** 3)


def branchy(x):
    y = np.zeros(5)
    for i in range(5):
        if x[i] > 1.0:
            y[i] = x[i] * x[i]
        else:
            y[i] = np.sin(x[i]) + (y[i - 1] if i > 0 else 0.0)
    return np.sum(y)


def read_whole_in_loop(x):
    y = np.ones(4)
    total = 0.0
    for i in range(4):
        total = total + np.sum(y * x)  # the whole array read at each step, as it then is
        y[i] = x[i] * total
    return total + np.sum(y)


def returns_the_array(x):
    y = np.zeros(4)
    for i in range(4):
        y[i] = x[i] * 2.0 + (y[i - 1] if i > 0 else 0.0)
    return y


def returns_a_tuple(x):
    y = np.zeros(3)
    for i in range(3):
        y[i] = x[i] ** 2
    return y, np.sum(y)


def _steps(x, n):
    y = np.ones(n)
    for i in range(1, n):
        y[i] = y[i - 1] * x[i]
    return y


def calls_a_writer(x):
    return np.sum(_steps(x, 4) ** 2)


def reads_its_default(x, w=np.array([1.0, 2.0])):  # noqa: B008 -- a default array, read
    return np.sum(w * x)


def writes_a_copy_of_its_default(x, buf=np.zeros(2)):  # noqa: B008 -- a default array, copied
    b = buf.copy()
    b[0] = np.sum(x)
    return np.sum(b * x)


def chain_on_a_copy(x):
    # ``x.copy()`` of an array (its label says so): a new array no other name sees
    y = x.copy()
    for i in range(1, x.shape[0]):
        y[i] = y[i - 1] * x[i]
    return np.sum(y)


def outer_grid(x):
    # 2-d writes in nested loops, each entry's index a tuple of the two loops' indices
    g = np.zeros((x.shape[0], x.shape[0]))
    for i in range(x.shape[0]):
        for j in range(x.shape[0]):
            g[i, j] = x[i] * x[j] + 1.0
    return np.sum(g * g)


# each entry written once (``saving.plan_written_once``), and the cases next to it that are not
def chain_twice(x):
    # each entry written twice (the loop runs inside another): the entries overwritten are taped
    y = np.ones(x.shape[0])
    for _ in range(2):
        for i in range(1, x.shape[0]):
            y[i] = y[i - 1] * x[i]
    return np.sum(y)


def reads_ahead(x):
    # y[i + 1] is read before a later step writes it
    y = x * 1.0
    for i in range(x.shape[0] - 1):
        y[i] = y[i + 1] * x[i] + np.sin(y[i + 1])
    return np.sum(y * y)


def two_behind(x):
    y = np.ones(x.shape[0])
    for i in range(2, x.shape[0]):
        y[i] = y[i - 2] * x[i] + y[i - 1]
    return np.sum(y)


def falling(x):
    y = x * 2.0
    for i in range(x.shape[0] - 2, -1, -1):
        y[i] = y[i + 1] * np.cos(x[i])
    return np.sum(y ** 2)


def wraps_around(x):
    # at i = 0, y[i - 1] is the last entry, which a later step writes
    y = x * 1.0
    for i in range(0, x.shape[0]):
        y[i] = y[i - 1] * x[i]
    return np.sum(y)


def negative_indices(x):
    # i = -3 and i = 1 are one entry of a vector of 4: written twice
    y = x * 1.0
    for i in range(-3, 3):
        y[i] = np.sin(y[i]) + x[i]
    return np.sum(y * y)


def one_entry(x):
    # y[i - 1] at i = 0 of a vector of one entry is the entry the step writes
    y = x[:1] * 1.0
    for i in range(1):
        y[i] = y[i - 1] * 3.0 + x[i]
    return np.sum(y * y)


def on_its_exponential(x):
    # np.exp's adjoint reads its own result: the array as the loop found it
    y = np.exp(x)
    for i in range(1, x.shape[0]):
        y[i] = y[i - 1] * x[i]
    return np.sum(y)


def stops_at_a_break(x):
    y = x * 1.0
    for i in range(1, x.shape[0]):
        if x[i] > 1.2:
            break
        y[i] = y[i - 1] * x[i]
    return np.sum(y * y)


def reads_its_own_entry(x):
    y = x * 1.0
    for i in range(1, x.shape[0]):
        y[i] = y[i] * y[i - 1] + x[i]
    return np.sum(y)


def returns_it(x):
    y = x * 1.0
    for i in range(1, x.shape[0]):
        y[i] = y[i - 1] * x[i]
    return y


def reads_what_it_wrote(x):
    y = x * 1.0
    s = 0.0
    for i in range(1, x.shape[0]):
        y[i] = y[i - 1] * x[i]
        s = s + np.sin(y[i])
    return s + np.sum(y)


# Writes at the function's own level, each read back before the next (forward mode writes all but
# the first in place: ``analysis.straight_writes``), and the same seen by another name or through a
# view, which Python's write changes too.
def chained_writes(x):
    y = x * 2.0
    y[0] = np.sin(x[1]) + y[0]
    y[1] = y[0] * x[2]
    y[2] = y[1] + y[0] ** 2
    return np.sum(y * y)


def chained_writes_seen_by_another_name(x):
    y = x * 2.0
    y[0] = np.sin(x[1])
    z = y
    y[1] = y[0] * x[2]
    y[2] = y[1] * 3.0
    return np.sum(z * x) + y[2]


def chained_writes_seen_through_a_view(x):
    y = x * 2.0
    y[0] = np.sin(x[1])
    v = y[1:]
    y[1] = y[0] * x[2]
    y[2] = y[1] * 3.0
    return np.sum(v * x[1:])


def two_charges(x, w):
    """Item reads only: its gradient's code adds into ``x_bar``'s items, which a Hessian-vector
    product (forward mode over that code) writes in place."""
    return 1.0 / np.sqrt((x[0] - 1.0) ** 2 + (x[1] + w) ** 2) + x[0] * x[1] * w


def scaled(x, s):
    """An array and a number, for the kinds of ``analysis.makes_fresh_array``'s arguments."""
    return x * s


def into_integers(x, v):
    """A value written into an array of integers is truncated: it carries no derivative."""
    y = np.floor(x * 3.0).astype(np.int64)
    y[1] = v[0] * 2.0
    return np.sum(y * v)


def into_integers_in_a_loop(x, v):
    """The same write in a loop, where the array's tangent and the value's move together."""
    y = np.floor(x * 3.0).astype(np.int64)
    for i in range(3):
        y[i] = v[i] * 2.0 + x[i]
    return np.sum(y * v)


def into_an_argument_cast(x):
    """Integers made from the argument itself, then a value from it written in."""
    y = (x * 3.0).astype(np.int64)
    y[1] = x[0] * 2.0
    return np.sum(y * x)


def scaled_where_nothing_reads_it(x0, x1):
    """``x0 *= ...`` in a branch whose return does not read ``x0``: the older ``x0``'s adjoint is
    reset there, and nothing is added to it (``augmented_value``'s rule for the old array is
    zero), so it may still be the float zero where ``np.dot``'s rule reads it."""
    m = np.outer(x0, x1)
    x0 = np.dot(m, x1)
    if np.sum(x0) > 100.0:
        return np.sum(x0)
    x0 *= np.tanh(x0)
    return np.sum(np.sin(x1))



def _damped(a):
    a *= 0.5
    return a


def written_after_a_comprehension_that_never_ran(x0):
    """A random program's (fresh seed 93223): an array written in place by a helper after a loop
    that never runs, whose comprehension names objects that may be that array: the
    comprehension's name is its own, unbound after it, and no check of the memory model asks
    about it (it read the unbound name: an UnboundLocalError from the generated code)."""
    x0 = np.real(np.conj(x0 - 2j) * (x0 + 0.5j * x0))
    x0 -= 0.5 * (x0 + np.sqrt(1.0 + x0 * x0))
    v0 = (np.sin(np.sin(x0)), np.log(1.0 + np.sin(1.5) * np.sin(1.5)))
    v1 = v0[1] - v0[0]
    x0, v1 = v1, np.tanh(x0)
    n2 = 0
    while n2 < 2:
        n2 += 1
        n3 = 0
        while n3 < 0:
            n3 += 1
            v4 = [x0]
            v6 = v4
            v4 += (v * 0.5 for v in [x0, x0])
            x0 = v6[-1] * v4[0] + len(v6)
        v1 = _damped(v1)
    return -v1
