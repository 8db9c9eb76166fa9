"""Functions whose arrays are shared: names, views and container slots that see one object
(``test_memory``).

Each write is marked ``# write``: a refusal names that line.
"""

import numpy as np

from tests.data import foreign_helpers


def view_read_after_loop(x):
    y = x * 1.0
    w = y[:]
    for i in range(3):
        y[i] += 1.0  # write
    return np.sum(w * w)


def transpose_read_after_loop(x):
    y = x * 1.0
    w = y.T
    for i in range(3):
        y[i] += 1.0  # write
    return np.sum(w * w)


def tail_view_read_after_loop(x):
    y = x * 1.0
    w = y[1:]
    for i in range(3):
        y[i] += 1.0  # write
    return np.sum(w * w)


def reversed_view_read_after_loop(x):
    y = x * 1.0
    w = y[::-1]
    for i in range(3):
        y[i] += 1.0  # write
    return np.sum(w * w * x)


def reshaped_read_after_loop(x):
    y = x * 1.0
    w = y.reshape((-1, 1))
    for i in range(3):
        y[i] += 1.0  # write
    return np.sum(w * w)


def two_names_one_written_in_loop(x):
    y = x * 1.0
    z = y
    for i in range(3):
        z[i] += 1.0  # write
    return np.sum(y * y) + np.sum(z)


def loop_carried_alias(x):
    y = x * 1.0
    keep = y
    for i in range(2):
        keep[i] = keep[i] * 2.0  # write
        y = y * 1.5
    return np.sum(y) + np.sum(keep)


def write_through_list_then_append(x):
    a = x * 1.0
    L = [a]
    L[0][0] += 1.0  # write
    L.append(x)
    return np.sum(a * a)


def write_through_list(x):
    a = x * 1.0
    L = [a]
    L[0][0] += 1.0  # write
    return np.sum(a * a)


def one_array_twice_in_a_list(x):
    y = x * 1.0
    pair = [y, y]
    pair[0][1] = x[0] * 3.0  # write
    return np.sum(pair[1] * x)


def one_array_twice_added_into(x):
    y = x * 1.0
    pair = [y, y]
    pair[0][1] += x[0] * 3.0  # write
    return np.sum(pair[1] * x)


def one_array_under_two_keys(x):
    y = x * 1.0
    d = {"a": y, "b": y}
    d["a"][1] = x[0] * 3.0  # write
    return np.sum(d["b"] * x)


def swap_rows(x):
    y = np.outer(x, x) * 1.0
    y[0], y[1] = y[1], y[0]  # rows are views: both end as the old row 1, as in Python
    return np.sum(y * x)


def row_read_before_write(x):
    y = np.outer(x, x) * 1.0
    a = y[0]
    y[0] = y[1]  # write
    return np.sum(a * x)


def one_array_deep_in_another_slot(x):
    y = x * 1.0
    box = [y, [y]]
    box[0][1] = 5.0  # write
    return np.sum(box[1][0] * x)


def one_array_written_deep_held_in_another_slot(x):
    # (once silently Python's value before the write: box[0] kept the old array, 14.0 for 18.0 at
    # x = [1, 2, 3]; the check looked at the other slots of box[1] alone)
    y = x * 1.0
    box = [y, [y]]
    box[1][0][0] = 5.0  # write
    return np.sum(box[0] * x)


# ---- found by hand against the model: views made in loops, writes in branches, one object
# under two names written through a row in nested loops (once divergent), an attribute's array
def view_in_loop(x):
    y = x * 1.0
    total = 0.0
    for i in range(3):
        w = y[i:]
        y[i] = y[i] * 2.0 + 1.0
        total = total + np.sum(w * x[i:])
    return total + np.sum(w)


def branch_write(x):
    y = x * 1.0
    w = y[1:]
    if np.sum(x) > 0:
        y[1] = 5.0 * x[0]
    else:
        w[0] = -3.0 * x[2]
    return np.sum(w * w) + np.sum(y)


def nested_loops(x):
    y = np.outer(x, x) * 1.0
    z = y
    for i in range(2):
        r = z[i]
        for j in range(3):
            r[j] = r[j] * 0.5 + x[j]
    return np.sum(y * y)


def while_alias(x):
    y = x * 1.0
    k = y
    n = 0
    while n < 3:
        k[n] += x[n] * x[n]
        n += 1
    return np.sum(y * x)


def object_array(x):
    box = Box(x * 1.0)
    v = box.data
    box.scale(2.0)
    return np.sum(v * x)


class Box:
    def __init__(self, data):
        self.data = data

    def scale(self, s):
        self.data *= s


def written_in_a_nested_branch(x0, x1):
    """Found by the long profile: a branch's inner branch gave ``v0``, a name of the function's top
    level, a name of its own bound there alone (then unbound on the other path: a None adjoint in
    the sum)."""
    m = 0.5 * np.outer(np.tanh(x0), np.cos(x1))
    v0 = x1
    x0 *= np.tanh(np.log(1.0 + (x1 + 1.5) * (x1 + 1.5)))
    if np.sum(v0) > -0.4:
        x0 = x1
    elif np.sum(np.tanh(v0)) > -0.4:
        x0 *= np.tanh(x1)
    x1 -= 0.5 * np.dot(m, np.ones(3) * (x0 + v0))
    x1 -= 0.5 * (v0 - (1.5 / (1.0 + x0 * x0)))
    return np.sum(np.tanh(x0))


# ---- the same as Python, exactly: nothing else sees what changes ---------------------------------
def swap_entries(x):
    y = x * 1.0
    y[0], y[1] = y[1], y[0]
    return np.sum(y * x)


def two_arrays_in_a_list(x):
    pair = [x * 1.0, x * 2.0]
    pair[0][1] = x[0] * 3.0
    return np.sum(pair[1] * x) + np.sum(pair[0] * x)


def view_not_read_after(x):
    y = x * 1.0
    w = y[:]
    s = np.sum(w)
    for i in range(3):
        y[i] += s
    return np.sum(y * y)


def tuple_of_arrays_of_two_shapes(x):
    params = (np.outer(x, x), x * 1.0)
    params[1][0] = 0.0
    return np.sum(params[0]) + np.sum(params[1] * x)


def appends_through_two_names(x):
    xs = [x * 1.0]
    ys = xs
    ys.append(x * 2.0)
    xs.append(np.sin(x))
    return np.sum(xs[1] * ys[2]) + np.sum(ys[0]) * len(xs)


def write_through_an_asarray_view(x):
    y = x * 1.0
    z = np.asarray(y)
    z[1] = z[0] * 3.0
    return np.sum(y * y)


def write_into_an_unpacked_array(x):
    xs = (x * 1.0, np.cos(x))
    a, b = xs
    a[1] = b[0] * a[2]
    b += a
    return np.sum(xs[0] * xs[1]) + np.sum(a * b)


def write_into_an_unpacked_array_another_slot_holds(x):
    y = x * 1.0
    xs = [y, y]
    a, b = xs
    a[0] = 5.0  # b, y and both slots of xs are that array too: all see it
    return np.sum(xs[1] * x) + np.sum(b)


def _given_back(a):
    return a


def _scaled(a):
    return a * 2.0


def _tail(a):
    return a[1:]


def write_into_what_a_helper_gave_back(x):
    z = np.sin(x)
    y = _given_back(z)
    w = _scaled(z)
    y[0] = w[1] * 3.0
    w[2] = y[3]
    return np.sum(z * x) + np.sum(w * y)


def write_into_a_view_a_helper_made(x):
    z = np.sin(x)
    y = _tail(z)
    y[0] = 5.0  # z[1]: the helper returns that view of its argument (followed)
    return np.sum(z * x)


def bound_later_in_a_while_loop(x):
    y = x * 1.0
    kept = np.cos(x)
    k = 0
    while k < 3:
        y *= 1.5  # from the second step on, y is kept: both change
        y[k] = y[k] + kept[3 - k]
        y = kept
        k = k + 1
    return np.sum(kept * x) + np.sum(y)


def swapped_names_in_a_loop(x):
    a, b = x * 1.0, np.sin(x)
    for _ in range(3):
        a[0] = a[1] * b[2]
        a, b = b, a
    return np.sum(a * x) + np.sum(b)


def write_into_copies_of_lists_and_dicts(x):
    d = {"a": x * 2.0, "b": np.sin(x)}
    e = d.copy()
    e["b"][0] = e["a"][1] * 3.0
    zs = [d["a"], e["b"]]
    ws = list(zs)
    ws[1][2] = zs[0][0] * x[1]
    return np.sum(d["b"] * x) + np.sum(zs[1])


def a_copied_list_and_a_second_name_of_its_source(x):
    xs = [x * 1.0, np.sin(x)]
    zs = xs
    ys = list(xs)
    ys[1][0] = ys[0][2] * 2.0
    zs.append(x * 3.0)  # xs is zs: one list, after the write too
    return np.sum(xs[1] * xs[2]) + np.sum(zs[1]) * len(xs)


def one_array_in_two_slots_of_a_copy(x):
    y = np.cos(x)
    xs = [y, x * 1.0, y]
    ys = sorted(xs, key=lambda v: v[1])
    ys[0][3] = 2.0 * x[0]
    return np.sum(xs[0] * xs[2]) + np.sum(y)


def added_into_items_of_arrays_and_numbers(x):
    y = np.sin(x)
    s = x[0] * 2.0
    xs = [y, s, y, x * 1.0]
    ys = list(xs)
    ys[0] += x * 3.0  # the array y, in place: xs[0], xs[2], ys[2] and y see it
    ys[1] += x[1]  # a number: a new one, in ys[1] alone
    d = {"w": xs[3], "b": s}
    d["w"] *= 2.0
    d["b"] -= 1.0
    return np.sum(xs[0] * xs[2]) + xs[1] * ys[1] + np.sum(y * xs[3]) + d["b"] * s


def rows_rotated(x):
    y = np.outer(x, x) + np.eye(4)
    # each row read is a view: it shows the writes before its own
    y[0], y[1], y[2] = y[2], y[0], y[1]
    return np.sum(y * x)


def rows_swapped_in_a_loop(x):
    y = np.outer(x, x) + np.eye(4)
    for i in range(2):
        y[i], y[i + 1] = y[i + 1], y[i]
    return np.sum(y * x)


def a_row_and_an_entry_of_another_swapped(x):
    y = np.outer(x, x) + np.eye(4)
    a = y[3]
    y[0], a[1] = a[2], y[0][3]
    return np.sum(y * x) + np.sum(a)


def helpers_of_another_module_write_their_arguments(x):
    y = x * 1.0
    foreign_helpers.fill(y, x[2])
    total = foreign_helpers.scale_rows(np.outer(y, y), 0.5)
    return np.sum(y * x) + total


def a_helper_of_another_module_reads_its_own_global(x):
    y = x * 1.0
    foreign_helpers.clip_at_limit(y)  # LIMIT is that module's alone: read there
    return np.sum(y * x)


def one_array_in_two_slots_written_through_its_name(x):
    y = x * 1.0
    pair = [y, y]
    y[0] = 5.0 * x[1]
    for i in range(2):
        y[i + 1] = y[i] * x[2]
    return np.sum(pair[1] * x) + np.sum(pair[0])


def casts_that_may_not_copy(x):
    z = np.sin(x)
    same = z.astype(np.float64, copy=False)  # z itself
    other = z.astype(np.float64)  # a new array
    same[1] = other[2] * 2.0
    other[0] = same[0] * 3.0
    return np.sum(z * x) + np.sum(other * same)


def added_into_a_copys_items_in_a_loop(x):
    xs = [x * 1.0, x[0] * 2.0]
    ys = list(xs)
    for i in range(3):
        ys[0] += x * 0.5  # the array: xs[0] sees it
        ys[1] += x[i]  # a number: a new one in ys[1]; xs[1] keeps the old one
    return np.sum(xs[0] * x) + xs[1] * ys[1]


def written_in_branches_through_a_list_and_a_name(x):
    y = x * 1.0
    pair = [y, x * 2.0]
    if x[0] > 0:
        y[0] = 5.0
    else:
        pair[1][0] = 7.0
    return np.sum(pair[0] * x) + np.sum(pair[1])


def an_item_of_a_sorted_list_written(x):
    a, b = np.sin(x), x * 2.0
    first = sorted([a, b], key=lambda v: v[1])[0]  # a or b itself, as their entries decide
    first *= np.tanh(np.sum(x))
    first[2] = x[0]
    return np.sum(a * x) + np.sum(b)


def written_through_what_np_array_gave_back(x):
    y = x * 1.0
    z = np.array(y, copy=False)  # y itself (numpy 2 raises where a copy would be needed)
    w = np.array(y, copy=None)  # y itself too
    v = np.array(y)  # a copy
    z[0] = 3.0 * x[1]
    w[2] = w[0] * x[2]
    v[1] = 5.0
    return np.sum(y * y) + np.sum(z * x) + np.sum(v)


def written_through_one_view_read_through_another(x):
    y = x * 1.0
    z = y[::2]  # entries 0, 2, ...: z[1] is w[1]
    w = y[1:]
    z[1] = w[0] * x[2]
    return np.sum(w * x[1:]) + np.sum(y)


def a_row_written_in_a_loop_a_column_read(x):
    y = np.outer(x, x) * 1.0
    z = y[0]
    w = y[:, 1]  # w[0] is z[1]
    for i in range(3):
        z[i] = z[i] * x[i] + w[i]
    return np.sum(y * y) + np.sum(w * x)


def a_view_of_a_view_read_after_writes(x):
    y = np.outer(x, x) * 1.0
    w = y.T[1:]  # a view of a view of y, of another layout
    y[1, 0] = 7.0 * x[0]  # w[0, 1]
    for i in range(2):
        y[i + 1, 0] = w[i, 1] * x[i]
    return np.sum(w * w) + np.sum(y)


def written_through_a_view_of_a_view(x):
    y = np.outer(x, x) * 1.0
    t = y.T
    w = t[1:]  # a view of t, which is a view of y
    w[0, 2] = 5.0 * x[1]  # y[2, 1]
    for i in range(2):
        w[1, i] = w[0, i] * x[i]
    return np.sum(w * w) + np.sum(y * t)


def _part(a, k):
    return a[k:]


def a_view_a_helper_made_with_an_index(x):
    y = np.outer(x, x) * 1.0
    w = _part(y, 1)  # inlined: w is y[1:]
    w[0, 2] = 5.0 * x[0]
    for k in range(2):
        v = _part(x * 1.0, k)
        v[0] = w[k, 0] * x[k]
        y[k, k] += np.sum(v)
    return np.sum(y * y) + np.sum(w)


def a_view_made_on_two_paths(x):
    # (once refused on the first path: the recipe was the last path's, y[::-1])
    y = x * 1.0
    if x[0] > 0:
        w = y[1:]
    else:
        w = y[::-1]
    w[0] = 5.0 * x[1]
    return np.sum(y * x) + np.sum(w)


def _halved(a):
    a *= 0.5
    return a


def item_read_in_one_branch_written_in_the_other(x):
    # (found by a long run: the held index of ``w = items[-1]`` was bound on that path only, and the
    # write on the other path read it: UnboundLocalError from the generated code)
    if x[0] < -0.2:
        items = []
        for j in range(2):
            items.append(np.tanh(x) * j)
        w = items[-1]
    else:
        w = x * 1.0
        w = _halved(w)
    return np.sum(w * x)


def a_view_of_one_of_two_arrays(x):
    y = x * 1.0
    z = x * 2.0
    if x[0] > 0:
        w = y[1:]
    else:
        w = z[:2]
    w[0] = 5.0 * x[1]  # write
    return np.sum(y * z) + np.sum(w)


def _pick(y, first):
    if first:
        return y[1:]
    return y[:2]


def a_view_a_helper_makes_on_two_paths(x):
    y = np.outer(x, x) * 1.0
    w = _pick(y, x[0] > 0)  # inlined: y[1:] or y[:2], whichever path ran
    w[0, 2] = 5.0 * x[1]
    return np.sum(y * y) + np.sum(w)


def views_taken_by_turns_in_a_loop(x):
    y = x * 1.0
    w = y
    for i in range(3):
        if i % 2 == 0:
            w = y[1:]
        else:
            w = y[::2]
        w[0] = w[0] * x[2]
    return np.sum(y * x) + np.sum(w)


def _cut(k):
    def part(a):
        return a[k:]

    return part


_from_one = _cut(1)


def a_view_a_closure_made(x):
    y = np.outer(x, x) * 1.0
    w = _from_one(y)  # inlined with its cell k: w is y[1:]
    w[0, 2] = 5.0 * x[0]
    return np.sum(y * y) + np.sum(w)


def _scaler(c):
    def scale(a):
        a *= c
        return a

    return scale


_doubled = _scaler(2.0)


def a_closure_writes_its_argument(x):
    y = x * 1.0
    z = y
    y = _doubled(y)  # inlined: z sees the write
    return np.sum(z * x) + np.sum(y)


def a_closure_view_on_two_paths(x):
    if np.sum(x) < -100.0:
        return np.sum(x)  # (the rest is lowered on two paths)
    y = np.ones(4) * x
    w = _from_one(y)  # y[k:] on each path, with an index of that path's own
    v = y[::2]
    for _ in range(2):
        v[1] += np.tanh(np.sum(x))  # write
    return np.sum(w) * np.sum(y)


def written_through_a_transpose_then_summed(x):
    """``m`` keeps its C order after a write through ``m.T`` (the write's copy once made it
    Fortran-ordered, and the sum of its squares one bit off Python's)."""
    m = np.outer(x, x)
    t = m.T
    t[0, 1] = 7.0 * x[2]
    return np.sum(m * m)


# Views made by functions once not declared views (``registry.def_view``): the write was lost, the
# value and the gradient silently wrong in both modes
def written_through_a_flip(x):
    y = x * 1.0
    v = np.flip(y)
    v[0] = x[0] * 3.0
    return np.sum(y * x)


def written_through_fliplr_and_flipud(x):
    m = np.outer(x, x)
    v = np.fliplr(m)
    v[0, 0] = x[0] * 3.0
    w = np.flipud(m)
    w[1, 2] = 7.0 * x[2]
    return np.sum(m * m)


def written_through_a_rotation(x):
    m = np.outer(x, x[:3])
    v = np.rot90(m, 3)
    v[0, 1] = x[1] * 2.0
    return np.sum(m * m)


def written_through_matrix_transposes(x):
    m = np.outer(x, x)
    v = np.matrix_transpose(m)
    v[0, 1] = x[1] * 2.0
    w = np.linalg.matrix_transpose(m)
    w[2, 3] = x[3] * x[0]
    return np.sum(m * m)


def written_through_an_mT(x):
    m = np.outer(x, x)
    v = m.mT
    v[0, 1] = x[1] * 2.0
    return np.sum(m * m)


def written_through_a_float64_call(x):
    y = x * 1.0
    v = np.float64(y)  # (a float64 array: the array itself)
    v[0] = x[1] * 2.0
    return np.sum(y * y)


# Outputs given by position (numpy's ``out`` parameter): a write. Called as a statement, the write
# was lost (the value right, since the call ran as written, and the gradient missing its part)
_W4 = np.array([[1.0, 2.0, 0.5, 0.0], [0.3, -1.0, 2.0, 1.0], [1.5, 0.2, 0.1, -0.4],
                [0.0, 0.7, -0.3, 1.2]])


def a_ufunc_given_its_output_by_position(x):
    y = np.zeros(4)
    np.sin(x, y)
    z = x * 1.0
    np.tanh(z, z)
    return np.sum(y * x) + np.sum(z * z)


def a_ufunc_of_two_inputs_given_its_output_by_position(x):
    y = np.zeros(4)
    w = np.add(x, 1.0, y)
    return np.sum(y * x) + np.sum(w)


def dot_cumsum_and_clip_given_their_output_by_position(x):
    y, c, k = np.zeros(4), np.zeros(4), np.zeros(4)
    np.dot(_W4, x, y)
    np.cumsum(x, 0, None, c)
    np.clip(x, 0.8, 1.2, k)
    return np.sum(y * x) + np.sum(c * x) + np.sum(k * x)


# A view whose entries are a part of its base's (the real or imaginary parts of a complex array):
# the base is made again with the written part (``runtime.unreal``, ``runtime.unimag``)
def written_through_the_imaginary_parts(x):
    z = x * (1 + 2j)
    y = np.imag(z)
    y[0] = x[1] * 3.0  # write
    return np.sum(np.abs(z) ** 2)


def written_through_an_imag_attribute(x):
    z = x * (1 + 2j)
    y = z.imag
    y[0] = x[1] * 3.0  # write
    return np.sum(np.abs(z) ** 2)


def written_through_the_real_parts(x):
    z = x * (1 - 0.5j)
    r = np.real(z)
    r[1:3] = np.sin(x[:2]) * x[3]
    return np.sum(np.abs(z * z))


def written_through_a_real_attribute_in_a_loop(x):
    z = x * (0.5 + 1j)
    r = z.real
    for i in range(1, 4):
        r[i] = r[i - 1] * x[i]
    return np.sum(np.abs(z) ** 2) + np.sum(r)


def written_through_the_real_parts_of_a_real_array(x):
    y = x * 2.0
    r = np.real(y)  # ``y`` itself
    r[0] = x[2] * 7.0
    return np.sum(y * y)


# Of a real array, ``np.imag`` gives a new read-only array: the write raises, as Python's does
def written_through_the_imaginary_parts_of_a_real_array(x):
    y = x * 2.0
    v = np.imag(y)
    v[0] = 1.0
    return np.sum(y)


# Python's value and its gradient: the names, views and items that see the changed array are made
# again from it
FOLLOWED = [
    written_through_the_imaginary_parts,
    written_through_an_imag_attribute,
    written_through_the_real_parts,
    written_through_a_real_attribute_in_a_loop,
    written_through_the_real_parts_of_a_real_array,
    a_ufunc_given_its_output_by_position,
    a_ufunc_of_two_inputs_given_its_output_by_position,
    dot_cumsum_and_clip_given_their_output_by_position,
    written_through_a_flip,
    written_through_fliplr_and_flipud,
    written_through_a_rotation,
    written_through_matrix_transposes,
    written_through_a_float64_call,
    written_through_an_mT,
    written_through_a_transpose_then_summed,
    a_view_made_on_two_paths,
    item_read_in_one_branch_written_in_the_other,
    a_view_a_helper_makes_on_two_paths,
    views_taken_by_turns_in_a_loop,
    view_read_after_loop,
    transpose_read_after_loop,
    tail_view_read_after_loop,
    reversed_view_read_after_loop,
    reshaped_read_after_loop,
    two_names_one_written_in_loop,
    loop_carried_alias,
    write_through_list_then_append,
    write_through_list,
    row_read_before_write,
    one_array_twice_in_a_list,
    one_array_twice_added_into,
    one_array_under_two_keys,
    view_in_loop,
    branch_write,
    nested_loops,
    while_alias,
    object_array,
    appends_through_two_names,
    write_through_an_asarray_view,
    write_into_an_unpacked_array,
    write_into_what_a_helper_gave_back,
    bound_later_in_a_while_loop,
    swapped_names_in_a_loop,
    write_into_copies_of_lists_and_dicts,
    a_copied_list_and_a_second_name_of_its_source,
    one_array_in_two_slots_of_a_copy,
    added_into_items_of_arrays_and_numbers,
    swap_rows,
    rows_rotated,
    rows_swapped_in_a_loop,
    a_row_and_an_entry_of_another_swapped,
    helpers_of_another_module_write_their_arguments,
    an_item_of_a_sorted_list_written,
    write_into_an_unpacked_array_another_slot_holds,
    one_array_in_two_slots_written_through_its_name,
    casts_that_may_not_copy,
    added_into_a_copys_items_in_a_loop,
    written_in_branches_through_a_list_and_a_name,
    written_through_what_np_array_gave_back,
    written_through_one_view_read_through_another,
    a_row_written_in_a_loop_a_column_read,
    a_view_of_a_view_read_after_writes,
    write_into_a_view_a_helper_made,
    written_through_a_view_of_a_view,
    a_view_a_helper_made_with_an_index,
    a_view_a_closure_made,
    a_closure_writes_its_argument,
]
# refused at the write: an object another slot holds deeper
# (refused at the write until this stop; one array in a slot and deeper in another, made again from
# where its entries lie, ``runtime.shared``)
FOLLOWED += [one_array_deep_in_another_slot, one_array_written_deep_held_in_another_slot]
APART = [swap_entries, two_arrays_in_a_list, view_not_read_after, tuple_of_arrays_of_two_shapes]


# ---- an element loop, the in-place writes' own case, with an alias of each kind added ------------
def element_loop(x):
    y = x * 1.0
    for i in range(1, x.shape[0]):
        y[i] = y[i - 1] * x[i]
    return np.sum(y)


def element_loop_name(x):
    y = x * 1.0
    other = y
    for i in range(1, x.shape[0]):
        y[i] = y[i - 1] * x[i]
    return np.sum(y) + np.sum(other * x)


def element_loop_view(x):
    y = x * 1.0
    other = y[1:]
    for i in range(1, x.shape[0]):
        y[i] = y[i - 1] * x[i]
    return np.sum(y) + np.sum(other * x[1:])


def element_loop_transpose(x):
    y = x * 1.0
    other = y.T
    for i in range(1, x.shape[0]):
        y[i] = y[i - 1] * x[i]
    return np.sum(y) + np.sum(other * x)


def element_loop_list(x):
    y = x * 1.0
    other = [y]
    for i in range(1, x.shape[0]):
        y[i] = y[i - 1] * x[i]
    return np.sum(y) + np.sum(other[0] * x)


def element_loop_dict(x):
    y = x * 1.0
    other = {"y": y}
    for i in range(1, x.shape[0]):
        y[i] = y[i - 1] * x[i]
    return np.sum(y) + np.sum(other["y"] * x)


def element_loop_carried(x):
    y = x * 1.0
    other = x * 2.0
    for i in range(1, x.shape[0]):
        y[i] = y[i - 1] * x[i]
        other = y
    return np.sum(y) + np.sum(other * x)


def element_loop_written_through_alias(x):
    y = x * 1.0
    other = y
    for i in range(1, x.shape[0]):
        other[i] = y[i - 1] * x[i]
    return np.sum(y)


ALIASED_LOOPS = [element_loop_name, element_loop_view, element_loop_transpose, element_loop_list,
                 element_loop_dict, element_loop_carried, element_loop_written_through_alias]


def damp(a):
    a *= 0.5
    return a


def damps_its_parameter(x0, x1):
    """Found by the long profile: Python halves the caller's x1; the gradient must not (its helper
    runs as written where its result needs no derivative, so it is given a copy)."""
    v1 = np.ones(3) * x1
    v1[0] = np.tanh(np.sum(0.5))
    x1 = damp(x1)
    return np.sum(v1) + np.sum(x0 * 0.0)


def damps_a_local(x):
    y = x * 1.0
    z = y * y
    y = damp(y)
    return np.sum(z) + np.sum(y * x)



def fill_elsewhere(a, v):
    a[0] = v * 2.0  # returns nothing


def halve(a):
    a *= 0.5
    return a


def item_of_a_list_made_in_a_loop_that_may_not_run(x0, n):
    """``x0`` may be the list's last item, a view whose recipe (the list's length) the loop binds;
    after a loop of no steps, the write's check finds no view."""
    k = 0
    while k < n:
        k += 1
        items = []
        for j in range(2):
            items.append(x0 * j)
        x0 = items[-1]
    x0 = np.sin(x0)
    x0 = halve(x0)
    return x0


def _cut(k):
    def part(a):
        return a[k:]

    return part


_tail = _cut(1)
SCALE = 3.0


def _scaled_in_place(a):
    a *= SCALE
    return a


def binds_the_name_a_closure_reads(x):
    """``_tail`` reads its cell ``k``; this function has a ``k`` of its own."""
    k = 2
    return np.sum(_tail(x) * k)


def binds_the_name_a_helper_reads(x):
    """``_scaled_in_place`` reads the module's ``SCALE``; this function has a ``SCALE`` of its
    own."""
    SCALE = 10.0  # noqa: N806 (the clash is the point)
    y = x * 1.0
    y = _scaled_in_place(y)
    return np.sum(y) + SCALE


class _Scaler:
    def __init__(self, w):
        self.w = w

    def apply(self, a):
        return a * self.w * SCALE


    def mapped(self, a, f):
        return f(a) * SCALE

    @staticmethod
    def twice(a):
        return a * SCALE * 2.0

    @classmethod
    def unit(cls, a):
        return cls(a[0] * SCALE)


def binds_the_name_a_method_reads(x):
    """``_Scaler.apply`` reads the module's ``SCALE``; this function has a ``SCALE`` of its own."""
    SCALE = 10.0  # noqa: N806 (the clash is the point)
    s = _Scaler(2.0)
    return np.sum(s.apply(x)) + SCALE


def binds_the_name_static_and_class_methods_read(x):
    """A static method and a class method read the module's ``SCALE`` too."""
    SCALE = 10.0  # noqa: N806 (the clash is the point)
    s = _Scaler.unit(x)
    return np.sum(s.apply(x)) + np.sum(_Scaler.twice(x)) + np.sum(s.twice(x)) * SCALE


def passes_a_function_to_a_method_that_reads_its_name(x):
    """The method reads the module's ``SCALE`` (3), the lambda the caller's (10)."""
    SCALE = 10.0  # noqa: N806 (the clash is the point)
    s = _Scaler(2.0)
    return np.sum(s.mapped(x, lambda t: t * SCALE))


def _apply_scaled(a, f):
    return f(a) * SCALE


def passes_a_function_to_a_helper_that_reads_its_name(x):
    """The helper reads the module's ``SCALE`` (3), the lambda the caller's (10)."""
    SCALE = 10.0  # noqa: N806 (the clash is the point)
    return np.sum(_apply_scaled(x, lambda t: t * SCALE))


def floats_swapped_in_a_loop(x0, x1, x2):
    # (found by a long run: called with one float object for all three, the names were taken for one
    # object that ``+=`` changes, and x1's gradient went to x0)
    if 0.5 > 0.0:
        x0 = 0.5
        x0, x2 = x2, np.tanh(0.5)
    for i1 in range(2):
        x2 += 0.1 * i1 * np.sin(0.5)
        x1, x2 = x2, np.tanh(x1)
        x0 += np.sin(0.5)
    return x1


# Found by long runs of the random programs and by probing; each a test in ``test_memory.py``
def shared_through_a_third_name_across_steps(x):
    """``v3`` and ``x0`` one array before the loop; ``v2 = x0`` late in a step: the next step's
    ``v3 += c`` changes what ``v2`` holds (ast_ad read ``v2`` as it was: a value Python never
    computes), then refused at the write; now made again from where the entries lie."""
    x0 = 0.5 + np.sin(x)
    v3 = x0
    v2 = 0.5
    for _ in range(2):
        v3 += 0.479  # write
        v2, x0 = x0, np.tanh(v2)
    return np.sum(x0)


_damp = _scaler(0.5)  # (a closure that changes its argument in place)


def a_view_of_what_a_loop_made_a_number(x):
    """``v1`` a view of ``v0``'s array; a loop binds ``v0`` to a number; a helper then changes
    ``v0`` in place: the probe of ``v1``'s view of it read ``v0[1:]`` of the number (an
    IndexError from the generated code); a number has no such view (``view_probe``)."""
    v0 = np.ones(4) * x
    v1 = v0[1:]
    v1 *= np.tanh(np.sum(x))
    n = 0
    while n < 1:
        n += 1
        v0 = 0.5 * np.tanh(0.5)
    v0 = _damp(v0)
    return np.sum(v1 * v1) + v0


def rows_unpacked_then_written(x):
    """``a, b, c, d = m``: each a view of a row of ``m``; the write through ``b`` was lost."""
    m = np.outer(x, x)
    a, b, c, d = m
    b[0] = 3.0 * x[1]  # write
    return np.sum(m * m)


def written_through_a_split(x):
    """``np.split`` gives views of its argument; the write through one was lost."""
    y = np.concatenate([x, x]) * 1.0
    first, second = np.split(y, 2)
    second[0] = 3.0 * x[1]  # write
    return np.sum(y * y)


def written_through_an_unknown_functions_result(x):
    """``np.unstack`` gives views of ``m``'s rows; the write through one was lost (it had no rule
    then: it ran on values the derivative did not follow)."""
    m = np.outer(x, x)
    rows = np.unstack(m)
    rows[1][0] = 3.0 * x[1]  # write
    return np.sum(m * m)


FOLLOWED.append(a_view_of_what_a_loop_made_a_number)
# once refused at the write: a slot of a list of views (``np.split``'s, ``np.unstack``'s) written;
# the other views of the base, and the base, made again from where their entries lie
# (``runtime.shared``)
FOLLOWED += [written_through_a_split, written_through_an_unknown_functions_result]

# (refused at the write until this stop: ``v2``, which the loop binds later, made again from where
# the entries lie; on the first step it is bound to a number, which shares nothing)
FOLLOWED.append(shared_through_a_third_name_across_steps)
# (exact since: the unpacked rows of a matrix, ``m`` and its other rows made again from where
# their entries lie)
FOLLOWED.append(rows_unpacked_then_written)


def cancelling_adjoints(x0, x1, x2):
    """Found by a long random run: the value reaches 1e15, and ``0.5 * (v7 - v7)`` gives ``v7`` the
    adjoints 0.5 and -0.5 on top of one of 1e-16, so reverse mode's float sum keeps one digit of
    it. The gradient is exact in exact arithmetic (extended precision shows it: ``test_programs``'s
    oracle)."""
    for i0 in range(3):
        x2 += 0.1 * i0 * np.sin(x0)
        v1 = {
            1: ((x2 / (1.0 + x0 * x0)) - x1),
            0: np.sqrt(1.0 + x1 * x1),
            2: ((x2 / (1.0 + x0 * x0)) - x1) * np.sqrt(1.0 + x1 * x1),
        }
        x0 = 0.0
        for k in v1:
            x0 = x0 * 0.5 + (k + 1.0) * v1[k]
        v3 = np.ones(3) * x0
        v4 = v3
        v3[0], v3[1] = v3[1], v3[0]  # write
        x2 = np.sum(v4) * v3
    v5 = np.ones(3) * x2
    v6 = v5
    v5[0], v5[1] = v5[1], v5[0]  # write
    v7 = np.sum(v6) * v5
    return np.sum((0.5 * (v7 - v7)) + (np.tanh(x1) * np.log(1.0 + v7 * v7)))


# ---- what a loop binds late: a new array, or a view ----------------------------------------------
# A name bound late in a loop to what a registered function makes shares nothing with another name
# if the registry says the function makes a new object (``np.stack``: ``registry.makes_new_object``,
# asked by ``aliasing.loop_shared``), and its writes early in the next step need no guard; a view
# (``np.reshape``) sees the write, and is made again from the written array.
def scaled(row, w):
    return row * w


def stacked_each_step(x):
    state = np.stack([x, x * 2.0])
    total = 0.0
    for _ in range(3):
        rows = []
        for i in range(2):
            h = scaled(np.sin(state[i]), x)  # (a helper's result may be anything it was given)
            rows.append(h)  # append
        state = np.stack(rows)
        state[0, 1] += 0.5  # write: a new array no other name holds
        total = total + np.sum(state[1] * state[0])
    return total


def reshaped_each_step(x):
    y = x * 1.0
    v = y * 2.0
    for _ in range(3):
        y[0] += np.sum(v)  # write: from the second step on, v is a view of y and sees it
        v = np.reshape(y, (2, -1))
    return np.sum(v * v)


APART.append(stacked_each_step)
FOLLOWED.append(reshaped_each_step)


# Found by a long run (seed 10001, test_batched), wrong on main before: the write made ``x0`` a
# mutable name of its own and ``v0`` another name for that very name, so binding ``x0`` again
# changed what ``v0`` held (Python 1.438, ast_ad 0.462 at zeros).
def another_name_kept_when_the_owner_is_bound_again(x0):
    v0 = x0
    v1 = x0
    v1 += np.sin(0.5)  # write: v0, v1 and x0 see it
    v1, x0 = x0, np.tanh(0.5)
    return np.sum(v0) + np.sum(v1 * x0)


FOLLOWED.append(another_name_kept_when_the_owner_is_bound_again)


# Found this stop, a failure of the gradient before (its value was right): the list a dict holds,
# written through, put back into the dict; its adjoint summed the slots' adjoints with ``+``,
# which joined the two lists (``replaced_vjp_new``).
def written_through_a_list_a_dict_holds(x):
    y = x * 1.0
    d = {"a": [y, x]}
    d["a"][0][0] = x[1] ** 2
    return np.sum(d["a"][0] * x)


FOLLOWED.append(written_through_a_list_a_dict_holds)


# Found this stop, wrong on main before (value and gradient): a write into an array a tuple holds,
# the tuple held by a list or a dict. The tuple is the same object after the write, holding the
# changed array, but ``slots_holding`` took a tuple for an object no write changes and put the new
# tuple in no slot (Python 73.0 at x = [1, 2, 3, 4], ast_ad 60.0).
def written_through_a_tuple_a_list_holds(x):
    pairs = [(x * 1.0, x * 2.0)]
    pairs[0][1][0] = x[2] * 5.0
    return np.sum(pairs[0][1] * x)


def written_through_a_tuple_a_dict_holds(x):
    d = {"p": (x * 1.0, x * 2.0)}
    d["p"][1][0] = x[2] * 5.0
    return np.sum(d["p"][1] * x)


def written_through_a_tuple_in_a_tuple_a_list_holds(x):
    nested = [((x * 1.0,), x * 2.0)]
    nested[0][0][0][1] = x[3] * 5.0
    return np.sum(nested[0][0][0] * x)


FOLLOWED += [
    written_through_a_tuple_a_list_holds,
    written_through_a_tuple_a_dict_holds,
    written_through_a_tuple_in_a_tuple_a_list_holds,
]


# The same put back in a loop and in branches (each wrong on main before, with the tuple taken for
# an object no write changes).
def written_through_a_tuple_in_a_loop(x):
    boxes = [(x * 1.0,)]
    for i in range(2):
        boxes[0][0][i] = boxes[0][0][i + 1] * x[i]
    return np.sum(boxes[0][0] * x)


def written_through_a_tuple_in_branches(x):
    d = {"t": (x * 1.0, 1.0)}
    if x[0] > 0:
        d["t"][0][0] = x[1] * 4.0
    else:
        d["t"][0][1] = 0.0
    return np.sum(d["t"][0] * x)


def written_through_each_tuple_of_a_list(x):
    pairs = [(x * 1.0, x * 2.0), (x * 3.0, x * 4.0)]
    for k in range(2):
        pairs[k][1][k] = x[k] * 5.0
    return np.sum(pairs[0][1] * pairs[1][1])


FOLLOWED += [
    written_through_a_tuple_in_a_loop,
    written_through_a_tuple_in_branches,
    written_through_each_tuple_of_a_list,
]


# Refused before this stop, exact now. An array a tuple in a list holds, written through the list
# while another name holds it too: the name is asked whether it is the written array (the
# containers the written tuple was read from hold it, ``aliasing.held_within``).
def written_through_a_tuple_another_name_holds(x):
    v0 = x * 1.0
    v1 = [(v0, 1.0)]
    v1[0][0][1] = x[0] * 3.0
    return np.sum(v0 * x) + np.sum(v1[0][0])


def written_through_a_list_in_a_list_another_name_holds(x):
    y = x * 1.0
    nested = [[y], [x * 2.0]]
    nested[0][0][1] = x[2] * 5.0
    return np.sum(y * x) + np.sum(nested[0][0] * nested[1][0])


# A list of views no recipe relates to the written slot: the base and every slot made again from
# where their entries lie (``runtime.shared``), so that they share memory afterwards as in Python.
def written_through_a_list_of_slices(x):
    y = x * 1.0
    parts = [y[:2], y[2:]]
    parts[1][0] = x[0] * 4.0
    parts[0][1] = parts[1][0] * x[3]  # (the slots are views of y again: y sees this write too)
    return np.sum(y * x) + np.sum(parts[0] * parts[1])


def one_view_in_two_slots(x):
    y = x * 1.0
    v = y[1:]
    pair = [v, v]
    pair[0][0] = x[3] * 2.0
    return np.sum(pair[1] * x[:3]) + np.sum(y)


def written_through_a_split_list(x):
    y = np.concatenate([x, x[::-1]]) * 1.0
    parts = np.split(y, 4)
    parts[2][1] = x[1] * 3.0
    return np.sum(y * y) + np.sum(parts[2] * parts[3])


def written_through_reversed_views(x):
    y = x * 1.0
    views = [y[::-1], y[1::2]]
    views[0][0] = x[0] * x[1]
    return np.sum(views[1] * x[:2]) + np.sum(y * x)


FOLLOWED += [
    written_through_a_tuple_another_name_holds,
    written_through_a_list_in_a_list_another_name_holds,
    written_through_a_list_of_slices,
    one_view_in_two_slots,
    written_through_a_split_list,
    written_through_reversed_views,
]


def written_into_the_base_of_a_list_of_slices(x):
    y = x * 1.0
    parts = [y[:2], y[2:]]
    y[1] = x[3] * 2.0  # write: parts[0] sees it
    return np.sum(parts[0] * x[:2]) + np.sum(y * x)


def written_into_the_base_then_through_a_split(x):
    y = x * 1.0
    parts = np.split(y, 2)
    y[3] = x[0] * x[1]
    parts[0][0] = y[3] * 2.0
    return np.sum(parts[1] * parts[0]) + np.sum(y * x)


def base_and_slot_written_in_a_loop(x):
    y = x * 1.0
    parts = [y[:2], y[2:]]
    for i in range(2):
        y[i] = y[i + 2] * 2.0
        parts[1][i] = x[i] * 3.0
    return np.sum(parts[0] * x[:2]) + np.sum(y * x)


def slots_of_a_list_another_name_holds(x):
    y = x * 1.0
    parts = [y[:2], y[2:]]
    same = parts
    parts[0][0] = x[1] * 2.0
    return np.sum(same[0] * same[1]) + np.sum(y * x)


def a_slot_read_into_a_name_before_the_write(x):
    y = x * 1.0
    parts = [y[:2], y[2:]]
    w = parts[1]
    parts[1][0] = x[0] * 3.0
    return np.sum(w * x[:2]) + np.sum(y)


def a_row_and_a_column_that_cross(x):
    m = np.outer(x, x) * 1.0
    lines = [m[0], m[:, 1]]
    lines[1][0] = x[2] * 2.0  # m[0, 1]: the row sees it
    return np.sum(lines[0] * x) + np.sum(m * m)


def overlapping_views_under_dict_keys(x):
    y = x * 1.0
    d = {"a": y[:2], "b": y[1:]}
    d["b"][0] = x[3] * 5.0
    return np.sum(d["a"] * x[:2]) + np.sum(y * y)


def split_of_a_reversed_view(x):
    y = x * 1.0
    parts = np.split(y[::-1], 2)
    parts[1][1] = x[2] * 7.0
    return np.sum(parts[0] * parts[1]) + np.sum(y * x)


def slots_written_and_appended_in_a_loop(x):
    y = x * 1.0
    parts = [y[:2], y[2:]]
    for i in range(3):
        parts[i % 2][1] = parts[(i + 1) % 2][0] * x[i]
        parts.append(y[1:3])
    return np.sum(parts[-1] * x[:2]) + np.sum(y * x) + len(parts)


def views_of_two_arrays_in_one_list(x):
    a = x * 1.0
    b = x * 2.0
    parts = [a[:2], b[2:]]
    parts[1][0] = x[0] * 9.0
    return np.sum(a * b) + np.sum(parts[0] * parts[1])


FOLLOWED += [
    written_into_the_base_of_a_list_of_slices,
    written_into_the_base_then_through_a_split,
    base_and_slot_written_in_a_loop,
    slots_of_a_list_another_name_holds,
    a_slot_read_into_a_name_before_the_write,
    a_row_and_a_column_that_cross,
    overlapping_views_under_dict_keys,
    split_of_a_reversed_view,
    slots_written_and_appended_in_a_loop,
    views_of_two_arrays_in_one_list,
]


def written_through_views_of_an_array_no_name_holds(x):
    w = x * 1.0
    parts = [w[:3], w[1:]]
    w = x[0] * 2.0
    parts[0][1] = x[2]  # write: parts[1] sees it, a view of an array no variable holds now
    return np.sum(parts[1] * x[1:]) + w


# A tuple's name written through, where a list or dict holds that tuple too; an array a tuple in
# another slot holds, among views: refused before this stop, made again from where their entries
# lie (a written list or tuple is held again by every slot that held it: ``runtime.shared``).
def written_through_a_tuple_a_list_holds_by_its_name(x):
    t = (x * 1.0, 1.0)
    held = [t]
    t[0][0] = x[1] * 3.0
    return np.sum(held[0][0] * x)


def written_through_a_tuple_a_dict_holds_by_its_name(x):
    t = (x * 1.0, 1.0)
    d = {"k": t}
    t[0][0] = x[1] * 3.0
    return np.sum(d["k"][0] * x)


def written_through_a_tuple_read_from_a_list(x):
    a = x * 1.0
    pairs = [(1.0, a)]
    t = pairs[0]
    t[1][0] = x[1] * 2.0
    return np.sum(pairs[0][1] * a) + np.sum(t[1])


def a_view_in_a_tuple_in_another_slot(x):
    y = x * 1.0
    box = [y[:2], (y[1:], 1.0)]
    box[1][0][0] = x[0] * 5.0
    return np.sum(box[0] * x[:2]) + np.sum(y * x)


FOLLOWED += [
    written_through_a_tuple_a_list_holds_by_its_name,
    written_through_a_tuple_a_dict_holds_by_its_name,
    written_through_a_tuple_read_from_a_list,
    a_view_in_a_tuple_in_another_slot,
]


# Views made otherwise on two paths: refused where the path's view was not the recipe's, until this
# stop; made again from where their entries lie, whichever array each path's view is of.
FOLLOWED += [a_closure_view_on_two_paths, a_view_of_one_of_two_arrays]


def a_name_bound_in_a_loop_of_no_steps_made_again(x, n):
    """``w`` is bound only by a loop that may run no step; the write through ``parts`` makes it
    again (``memory_view``), which binds nothing: where the loop ran no step, the read of ``w``
    raises Python's ``UnboundLocalError``, as the function itself does."""
    y = x * 1.0
    for _ in range(n):
        w = y[::-1]
    parts = [y[:2], y[2:]]
    parts[0][0] = 3.0 * x[1]
    return np.sum(w * x) + np.sum(y)


# Containers at any depth: the array six lists deep in one slot, written through another's view; a
# list written into that a list of lists holds deeper (refused before this stop).
def written_beside_an_array_six_lists_deep(x):
    y = x * 1.0
    deep = [[[[[[y]]]]], y[1:]]
    deep[1][0] = x[0] * 2.0
    return np.sum(deep[0][0][0][0][0][0] * x) + np.sum(y)


def a_list_written_that_lists_hold_deeper(x):
    y = x * 1.0
    inner = [y]
    deep = [[[[[inner]]]]]
    inner[0][1] = x[2] * 2.0
    return np.sum(deep[0][0][0][0][0][0] * x)


FOLLOWED += [written_beside_an_array_six_lists_deep, a_list_written_that_lists_hold_deeper]


# A view a tuple holds, in a list, written twice through the path: the tuple's new object, which
# holds the written array as a new one, was put in the list's slot after the view had been made
# again, so the second write saw an array of its own (Python's value 1.0, ast_ad's 0.5 before this
# stop; found by the long profile of the random programs).
def a_view_in_a_tuple_in_a_list_written_twice(x):
    y = x * 1.0
    box = [(y[1:], 1.0)]
    box[0][0][0] += x[0] * 0.5
    box[0][0][0] += x[1] * 0.5
    return np.sum(y * x) + np.sum(box[0][0])


def a_view_in_a_tuple_in_a_list_written_in_a_loop(x):
    y = x * 1.0
    box = [y[:2], (y[1:], 1.0)]
    for i in range(2):
        box[1][0][0] += x[i] * 0.5
    return np.sum(box[0]) * np.sum(y)


FOLLOWED += [a_view_in_a_tuple_in_a_list_written_twice,
             a_view_in_a_tuple_in_a_list_written_in_a_loop]


def list_extended_by_a_tuple(x):
    """``ys += (a, b)``: a list extends by any iterable, and another name of it sees the items."""
    ys = [x]
    zs = ys
    ys += (x * 2.0, np.sin(x))
    ys += [x * 3.0]
    total = 0.0
    for y in zs:
        total = total + np.sum(y * y)
    return total + len(zs)


def list_extended_by_a_generator(x):
    """``ys += (f(v) for v in xs)``: the items the generator gives, in order."""
    ys = [x]
    ys += (v * 2.0 for v in [x, np.cos(x)])
    return np.sum(ys[2] * ys[1]) + len(ys)


def list_extended_twice_under_two_names(x):
    """``ys += [a]`` twice while another name holds the list: the second's adjoint of that name, a
    zero once passed on, meets the list's adjoint."""
    ys = [x]
    zs = ys
    ys += [x * 2.0]
    ys += [x * 3.0]
    total = 0.0
    for y in zs:
        total = total + np.sum(y * y)
    return total


# Found by the review of this stop's change, wrong on main before (value and gradient): the check
# before ``y += v`` came before ``v`` was lowered, and the loop a comprehension in ``v`` is lowered
# to made the write's follow-ups inside it, ahead of the write: another name of ``y`` kept the old
# array. A statement's follow-ups are now made after it alone (``Lowerer.stmt``).
def augmented_by_a_comprehension_under_two_names(x):
    y = x * 1.0
    z = y
    y += np.array([v * 2.0 for v in [1.0, 2.0, 3.0, 4.0]]) * x
    return np.sum(z * x)


def entry_augmented_by_a_generator_under_two_names(x):
    y = x * 1.0
    z = y
    y[0] += sum(v * x[1] for v in [1.0, 2.0])
    return np.sum(z * x)


def list_extended_by_a_generator_under_two_names(x):
    ys = [x[0]]
    zs = ys
    ys += (x[1] * v for v in [0.5, 2.0])
    return zs[-1] * ys[0] + len(zs)


FOLLOWED += [augmented_by_a_comprehension_under_two_names,
             entry_augmented_by_a_generator_under_two_names,
             list_extended_by_a_generator_under_two_names]
