"""The trust catalogue: one function per way a gradient could silently differ from Python's semantics.

Each function is either differentiated exactly (``EXACT`` in ``tests/test_trust.py``) or refused with an
ast_ad error at the line marked ``# refused here``. Numbered as the categories of issue 10.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import warnings

import numpy as np

Params = collections.namedtuple("Params", "w b")


# ---- a value the generated code must compute as Python does -------------------------------------------------
def swap_after_loop(y, a, v):
    for _ in y:
        a = a * 0.5
    a, v = v, a
    return np.sum(a * 2.0 + v)


# ---- 1. reference semantics: containers, views, helpers ----------------------------------------------------
def augmented_through_two_names(x):
    """Found by the long hypothesis profile: ``v = x``, then ``x += d`` and ``v += d``, both in place on the one
    array (Python's sum is 6 d for x = 0). The liveness the guard reads took ``v += d`` as no read of ``v``, so
    ``x += d`` was computed as a new array unchecked, and the value and gradient were those of 3 d."""
    v = x
    x += np.sin(0.5)
    v += np.sin(0.5)
    return np.sum(x)


def write_through_list_alias(x):
    ys = [x * 1.0, x * 2.0]
    a = ys[0]
    a[0] = 5.0
    return np.sum(ys[0] * x)


def write_through_loop_row(x):
    y = x * 1.0
    for row in y:
        row *= 2.0
    return np.sum(y * x)


def write_through_a_later_copy(x):
    y = x * 1.0
    kept = y * 2.0
    for _step in range(3):
        y += 0.5  # from the second step on, y is kept's array: Python changes both, and so does ast_ad
        y = kept
    return np.sum(kept * x)


def write_through_a_later_swap(x):
    a, b = x * 1.0, x * 2.0
    c = b
    for _step in range(3):
        a += c  # in the second step, a is c's array: c changes too
        a, b = b, a * 1.0
    return np.sum(a * c)


def swap_in_a_loop(x):
    a, b = x * 1.0, x * 2.0
    for _step in range(3):
        a += b  # a and b are swapped, never shared: exact
        a, b = b, a
    return np.sum(a * b * x)


def write_through_slice(x):
    y = x * 1.0
    z = y[1:]
    z[0] = 3.0
    return np.sum(y * x)


def write_through_reshape(x):
    y = x * 1.0
    z = y.reshape(-1)
    z *= 3.0
    return np.sum(y * x)


def append_through_alias(x):
    xs = [x]
    ys = xs
    ys.append(x * 2.0)  # xs is ys: it has the item too
    return np.sum(xs[0] * x)


def doubles_in_place(a):
    a *= 2.0
    return 1.0


def helper_changes_argument(x):
    y = x * 1.0
    doubles_in_place(y)
    return np.sum(y * x)


def helper_changes_argument_used(x):
    y = x * 1.0
    s = doubles_in_place(y)
    return np.sum(y * x) + s


def helper_on_scalars(x):
    s = doubles_in_place(x)  # a float is rebound, not changed: exact
    return x * s


# shallow copies: a new container of the same arrays (``registry.def_holds_items``)
def write_into_an_item_of_a_list_copy(x):
    xs = [x * 1.0, x * 2.0]
    ys = list(xs)
    ys[0][1] = 0.0  # ys[0] is xs[0]: xs sees the write
    return np.sum(xs[0])


def write_into_an_item_of_a_tuple_copy(x):
    xs = [x * 1.0, x * 2.0]
    ys = tuple(xs)
    ys[0][1] = 0.0  # ys[0] is xs[0]: xs sees the write
    return np.sum(xs[0])


def write_into_an_item_of_a_copied_list(x):
    xs = [x * 1.0, x * 2.0]
    ys = xs.copy()
    ys[0][1] = 0.0  # ys[0] is xs[0]: xs sees the write
    return np.sum(xs[0])


def write_into_an_item_of_joined_lists(x):
    xs = [x * 1.0, x * 2.0]
    ys = xs + []
    ys[0][1] = 0.0  # ys[0] is xs[0]: xs sees the write
    return np.sum(xs[0])


def write_into_an_item_of_a_repeated_list(x):
    xs = [x * 1.0, x * 2.0]
    ys = xs * 1
    ys[0][1] = 0.0  # ys[0] is xs[0]: xs sees the write
    return np.sum(xs[0])


def write_into_an_item_of_a_dict_copy(x):
    d = {"a": x * 1.0}
    e = dict(d)
    e["a"][1] = 0.0  # e["a"] is d["a"]: d sees the write
    return np.sum(d["a"])


def write_into_an_item_of_a_copied_dict(x):
    d = {"a": x * 1.0}
    e = d.copy()
    e["a"][1] = 0.0  # e["a"] is d["a"]: d sees the write
    return np.sum(d["a"])


def write_into_an_item_of_a_sorted_list(x):
    xs = [x * 1.0, x * 2.0]
    ys = sorted(xs, key=lambda v: v[0])
    ys[0][1] = 0.0  # ys[0] is xs[0]: xs sees the write
    return np.sum(xs[0])


def write_into_an_item_of_a_copied_argument(xs):
    ys = list(xs)
    ys[0][1] = 0.0  # refused here: the caller's array
    return np.sum(xs[0])


def add_into_an_item_another_name_holds(x):
    a = x * 1.0
    xs = [a, x * 2.0]
    xs[0] += 1.0  # changes a itself
    return np.sum(a)


def add_into_an_item_of_a_list_copy(x):
    xs = [x * 1.0, x * 2.0]
    ys = list(xs)
    ys[0] += 1.0  # changes xs[0] itself
    return np.sum(xs[0])


def a_list_copy_rebinds_an_item(x):
    xs = [x * 1.0, x * 2.0]
    ys = xs.copy()
    ys[0] = ys[0] * 2.0
    return np.sum(xs[0]) + np.sum(ys[0])


def an_array_copy_written_in_a_loop(x):
    y = x.copy()
    for i in range(1, 3):
        y[i] = y[i - 1] * x[i]
    return np.sum(y)


def write_into_an_unpacked_item(x):
    xs = [x * 1.0, x * 2.0]
    a, b = xs
    a[0] = 5.0  # xs[0] is a: it changes too
    return np.sum(xs[0])


def _same(a):
    return a


def write_into_what_a_helper_returned(x):
    z = x * 1.0
    y = _same(z)
    y[0] = 5.0  # y is z: z changes too
    return np.sum(z * x)


def a_cast_that_may_not_copy(x):
    z = x * 1.0
    y = z.astype(np.float64, copy=False)  # z itself: it has that dtype
    y[0] = 5.0
    return np.sum(z * x)


# ---- 2. numpy's write semantics -----------------------------------------------------------------------------
def repeated_index_write(x):
    y = np.zeros(3)
    y[[0, 0, 2]] = x
    return np.sum(y * y)


def repeated_index_add(x):
    y = np.zeros(3)
    idx = np.array([0, 0, 2])
    y[idx] += x
    return np.sum(y * y)


def add_at(x):
    y = np.zeros(3)
    np.add.at(y, [0, 0, 2], x)
    return np.sum(y * y)


def out_argument(x):
    y = np.zeros(3)
    np.sin(x, out=y)
    return np.sum(y * x)


def fill_method(x):
    y = x * 1.0
    y.fill(2.0)
    return np.sum(y * x)


def sort_method(x):
    y = x * 1.0
    y.sort()
    return np.sum(y * np.arange(3.0))


def copyto(x):
    y = np.zeros(3)
    np.copyto(y, x * 2.0)
    return np.sum(y * x)


def float_into_int_array(x):
    y = np.zeros(3, dtype=int)
    y[0] = x[0] + 1.0  # truncated, as numpy does: no gradient through it
    return np.sum(y * x)


def negative_base_fractional_power(x):
    y = (x - 3.0) ** 0.5  # refused here
    return abs(y)


def unknown_in_place_method(x):
    xs = [x, x * 2.0]
    xs.reverse()  # refused here
    return np.sum(xs[0])


def unknown_function_for_effect(x):
    y = x * 1.0
    np.put(y, [0], 5.0)  # refused here
    return np.sum(y)


# ---- 3. containers as values --------------------------------------------------------------------------------
def layer(params, x):
    return np.tanh(params["W"] @ x + params["b"])


def dict_of_parameters(W, b, x):
    params = {"W": W, "b": b}
    return np.sum(layer(params, x) ** 2) + np.sum(layer(params, x * 2.0))


def lists_joined(x):
    a = [x, x * 2.0]
    b = a + [x * 3.0]
    return np.sum(b[2] * b[0])


def lists_repeated(x):
    a = [x] * 3
    return np.sum(a[2] * a[0])


def tuples_joined(x):
    t = (x,) + (x * 2.0, x * 3.0)
    return np.sum(t[0] * t[1] * t[2])


def lists_extended(x):
    xs = [x]
    xs.extend([x * 2.0, x * 3.0])
    return np.sum(xs[2] * xs[1])


# ---- 4. operators and attributes that turn a value into a number -------------------------------------------
def modulo(x):
    return np.sum(x % 1.5 + 2.5 % (x + 2.0))


def divmod_parts(x):
    q, r = divmod(x, 1.5)
    return r * q + divmod(x, 0.7)[1]


def copysign(x):
    return math.copysign(x, -1.0) * x


def or_value(x):
    s = None or x
    t = x > 1.0 and x
    return s * 2.0 + t * x


def real_and_transposes(x):
    return np.sum(x.real * x) + np.sum(x.mT @ x)


def namedtuple_fields(p, x):
    return np.sum(p.w * x + p.b)


def builtin_min_max_pow(x):
    return min(x, 2.0) * 3.0 + max([x, 0.5, x * x]) + pow(x, 3.0)


def fsum_and_float64(x):
    return math.fsum([x, x * 2.0]) + np.float64(x) * x


def clip_with_active_bounds(x, lo):
    return np.sum(np.clip(x, lo, lo + 2.0))


def active_keyword(x, w):
    return np.average(x, weights=w)


def flat_read(x):
    return x.flat[1] * 2.0  # refused here


# ---- 5. complex numbers -------------------------------------------------------------------------------------
def complex_literal(x):
    return np.sum(np.abs(np.exp(1j * x)) ** 2 * x)


def complex_fft(x):
    return np.sum(np.abs(np.fft.fft(x)))


# ---- 6. source read for methods and closures (the check that it is the code Python runs) -------------------
class Scaled:
    def __init__(self, k):
        self.__k = k

    def apply(self, x):
        return x * self.__k


def scaler(k):
    def scale(x):
        return x * k
    return scale


def doubled(f):
    """A decorator that changes the value, and names the function it wraps (``__wrapped__``)."""
    @functools.wraps(f)
    def wrapper(x):
        return 2.0 * f(x)
    return wrapper


@doubled
def decorated_square_sum(x):
    return np.sum(x * x)  # Python runs 2 * this: ast_ad once differentiated this alone (a gradient half the size)


def calls_a_decorated_function(x):
    return decorated_square_sum(x) + np.sum(x)


def passed_through(f):
    """A decorator that leaves the value alone, outside the language (``*args``)."""
    @functools.wraps(f)
    def wrapper(*args, **kwargs):  # refused here
        return f(*args, **kwargs)
    return wrapper


@passed_through
def decorated_by_a_star_wrapper(x):
    return np.sum(x * x)


class Halved:
    """A class-based decorator: ``functools.update_wrapper`` names the function (``__wrapped__``), and
    ``__call__`` changes the value."""

    def __init__(self, f):
        functools.update_wrapper(self, f)
        self.f = f

    def __call__(self, x):
        return 0.5 * self.f(x)  # refused here: a function held in an attribute is not called through yet


@Halved
def halved_square_sum(x):
    return np.sum(x * x)


@functools.lru_cache
def cached_cube(x):
    return x * x * x  # a cache returns what its function returns: differentiated as that function


# ---- 7. calling conventions and the user's own exceptions ---------------------------------------------------
def conventions(x, /, y, *, z=2.0):
    return x * y * z


def divides_by_zero(x):
    y = x * 0.0
    return 1.0 / y  # raises here


def fails_assert(x):
    assert x > 5.0, "x too small"  # raises here
    return x


async def coroutine(x):  # refused here
    return x


# ---- the crashes seen in ordinary code ----------------------------------------------------------------------
def build_list(x):
    out = []
    for i in range(3):
        out.append(x * i)
    return out


def returned_list(x):
    ys = build_list(x)
    return np.sum(ys[2] * ys[1])


def append_from_same_list(x):
    ys = [x]
    ys.append(ys[-1] * 2.0)
    ys.append(ys[-1] * ys[0])
    return np.sum(ys[2] * ys[1])


def unused_stacked_output(x):
    hs = []
    for i in range(3):
        hs.append(x * i)
    stacked = np.stack(hs)
    return np.sum(x * 2.0) + 0.0 * stacked.shape[0]


def list_of_parameter_dicts(params, x):
    h = x
    for p in params:
        h = np.tanh(p["W"] @ h + p["b"])
    return np.sum(h)


def def_inside_loop(x):
    s = 0.0
    for i in range(3):
        def g(z):
            return z * i  # noqa: B023  (called within the iteration that defines it)
        s = s + g(x)
    return s


# ---- refused before, written by real code -------------------------------------------------------------------
def apply(f, x):
    return f(x) + f(x * 2.0)


def lambda_passed_to_helper(x):
    return apply(lambda z: z * z, x)


def mapped_lambda(x):
    return sum(map(lambda v: v * v, [x, x * 2.0])) + sum(list(map(lambda a, b: a * b, [x], [3.0])))


def partial_of_a_primitive(x):
    g = functools.partial(math.pow, 2.0)
    h = functools.partial(np.clip, a_min=0.0, a_max=x * 2.0)
    return g(x) + h(1.5)


class Spring:
    def __init__(self, k):
        self.k = k

    def energy(self, x):
        return 0.5 * self.k * x * x

    def __call__(self, x):
        return self.k * x


STIFF = Spring(2.0)


def methods_of_user_classes(x):
    soft = Spring(3.0)
    return soft.energy(x) + STIFF.energy(x) + soft(x)


def _triple(x):
    return 3.0 * x


SHADOWED = Spring(2.0)
SHADOWED.energy = _triple  # the object's own attribute: Python calls it, not Spring.energy


def method_hidden_by_an_attribute(x):
    return SHADOWED.energy(x)  # refused here: once Spring.energy was called (half the value)


class Rebinding:
    def __init__(self, k):
        self.k = k
        if k > 1.0:
            self.size = _triple  # refused here: the method below is hidden on such objects

    def size(self, x):
        return self.k * x


def method_a_class_may_hide(x):
    box = Rebinding(2.0)
    return box.size(x)


with warnings.catch_warnings():
    warnings.simplefilter("ignore", PendingDeprecationWarning)  # np.matrix is what this case is about
    GRID = np.matrix([[1.0, 2.0], [3.0, 4.0]])


def times_a_global_matrix(x):
    return np.sum(x * GRID)  # refused here: np.matrix's * is a matrix product, not mul's rule


def makes_a_matrix(x):
    m = np.asmatrix(x)  # refused here
    return np.sum(m * m)


def sum_where(x):
    return np.sum(x * x, where=x > 0.4)  # refused here: the rule of sum once added every entry's gradient


def reshape_in_fortran_order(x):
    return np.sum(np.reshape(x, (2, 2), "F") * np.arange(4.0).reshape(2, 2))  # refused here (order, by position)


def flatten_method_in_fortran_order(x):
    return np.sum(x.reshape(2, 2).flatten(order="F") * np.arange(4.0))  # refused here


def sum_in_integers(x):
    return np.sum(x * 10.0, dtype=np.int64) * 1.0  # refused here: truncated, its derivative is zero


def prod_with_initial(x):
    return np.prod(x, initial=3.0)  # refused here


def clip_by_keyword(x):
    return np.sum(np.clip(x, a_min=0.5, a_max=2.0) * x)  # the bounds by name: the rule once missed them


def take_wrapping(x):
    return np.sum(np.take(x, [0, 4], mode="wrap"))  # refused here: no rule of take reads mode=


def keywords_the_rules_follow(x):
    counts = np.zeros(3, dtype=int)  # no gradient: its dtype is free
    y = np.reshape(x * x, (3, 1), order="C") + counts[:, None]
    z = np.sum(y, dtype=np.float64, where=True) + np.max(x, initial=-1.0)
    return z + np.sum(np.array(x * 10.0, dtype=int)) * 0.5  # a cast to integers: no gradient, as Python's


def version_check(x):
    if hasattr(np, "not_in_any_numpy"):
        y = np.not_in_any_numpy(x)
    else:
        y = x * 2.0
    return y


def nested_item_writes(x):
    rows = [x * 1.0, x * 2.0]
    rows[0][1] = 5.0
    rows[1][0] += x[2]
    for i in range(3):
        rows[1][i] = rows[0][i] * rows[1][i]
    return np.sum(rows[0] * x) + np.sum(rows[1] * rows[0])


def nested_write_through_alias(x):
    rows = [x * 1.0, x * 2.0]
    first = rows[0]
    rows[0][1] = 5.0
    return np.sum(first * x)


def casts_to_integers(x):
    return np.sum(x.astype(int) * x + np.asarray(x, dtype=np.int64) * x + x.astype(float) * x)


def unknown_method(x):
    xs = [x]
    return xs.index(x) * x  # refused here


def pop_in_an_expression(x):
    xs = [x, x * 2.0]  # a list the function makes: its pops are followed, wherever they are
    return np.sum(xs.pop() * 2.0 + xs[0] * x)


def sum_between_appends(a, b):
    xs = []
    xs.append(a * 1.5)
    s = sum(xs)  # the list as it was here: the backward pass takes the later append off it first
    xs.append(b * 2.0)
    return np.sum(s * xs[1])


def last_item_then_append(x):
    xs = [x]
    total = 0.0
    for k in range(3):
        total = total + np.sin(xs[-1])
        xs.append(x * k)  # the last step's item is read by nothing: its adjoint is zero, not a pop of None
    return np.sum(total)


def a_stack_of_lists(x):
    stacks = []
    items = [x, x * 2.0]
    stacks.append(items)
    items = [x * 3.0]
    total = np.sum(items[0])
    items = stacks.pop()  # the first list again, off a list of lists the function made: its own
    return np.sum(items.pop() * x) + total


def a_dead_alias_then_a_write(x):
    y = x * 1.0
    z = y
    total = np.sum(z * x)
    y[0] = 5.0  # z is the same array, but nothing reads z from here on: Python's change is seen by nothing
    return total + np.sum(y * x)


def zero_adjoint_into_a_product(x, m):
    out = np.sum(x)
    y = (m @ x) * np.sin(0.5)  # y's adjoint stays the float zero (the branch does not run), times a numpy number
    if out > 100.0:
        out = out + np.sum(y)
    return out


def a_dropped_pop(x):
    xs = []
    xs.append(x * 2.0)
    xs.append(np.sin(x))
    xs.pop()  # the value is dropped; the backward pass puts it back all the same
    return np.sum(xs[-1] * x)


def pop_from_a_list_argument(x, xs):
    return np.sum(xs.pop() * x)  # refused here: the caller's list; reverse mode follows pops of the function's own


def pop_from_a_list_made_in_a_loop(x):
    total = 0.0
    for k in range(3):
        xs = [x, x * (k + 1.0)]  # a new list each step, its own
        total = total + xs.pop() * np.sum(xs[0])
    return np.sum(total)


def pop_from_a_copy_of_an_argument(x, xs):
    ys = xs
    return np.sum(ys.pop() * x)  # refused here: the caller's list still, under another name


def a_stack(x):
    stack = []
    stack.append(x * x)
    stack.append(np.sin(x))
    top = stack.pop()
    below = stack.pop()
    stack.append(top * below)
    return np.sum(stack.pop() + top * 2.0)  # each pop's adjoint back on the list's, each value on the list


def a_tape_by_hand(x):
    tape = []
    y = x
    for _ in range(3):
        tape.append(y)
        y = np.sin(y) * x
    y_bar, x_bar = 2.0 * y, 0.0
    for _ in range(3):  # popped in a loop: the list's adjoint adds up over the steps (once reset each step)
        y = tape.pop()
        x_bar = x_bar + y_bar * np.sin(y)
        y_bar = y_bar * x * np.cos(y)
    return np.sum((x_bar + y_bar) * x)


def sorted_with_key(x):
    xs = [x, x * 2.0, x * 0.5]
    ys = sorted(xs, key=lambda v: -v)
    return ys[0] * 3.0 + ys[2] + sorted(xs)[1] * sorted(xs, reverse=True)[0]


def view_inside_expression(x):
    v = x * 1.0
    w = [v][0]
    w *= 2.0
    return np.sum(v)


def dict_item_writes(x):
    d = {"a": x}
    d["b"] = x * 2.0
    d["a"] = d["a"] * 3.0
    return np.sum(d["a"] * d["b"])


def matrix_norms(x):
    m = x.reshape(2, 2)
    return (np.linalg.norm(m, ord=1) + np.linalg.norm(m, ord=np.inf) + np.linalg.norm(m, ord="nuc")
            + np.linalg.norm(m, ord=-2) + np.sum(np.linalg.norm(m, ord=3, axis=0)) + np.sum(np.linalg.norm(m, axis=1)))


# ---- more of each category ----------------------------------------------------------------------------------
def write_through_transpose(x):
    m = np.outer(x, x) * 1.0
    t = m.T
    t[0, 1] = 3.0
    return np.sum(m * 2.0)


def write_through_asarray(x):
    y = x * 1.0
    z = np.asarray(y)  # the very array y
    z += 1.0  # changes y
    return np.sum(y * x)


def resize_in_place(x):
    y = x * 1.0
    y.resize(2)  # refused here
    return np.sum(y)


def place_in_place(x):
    y = x * 1.0
    np.place(y, y > 1.0, 0.0)  # refused here
    return np.sum(y)


def insert_into_list(x):
    xs = [x]
    xs.insert(0, x * 2.0)  # refused here
    return np.sum(xs[0])


def update_a_dict(x):
    d = {"a": x}
    d.update({"b": x})  # refused here
    return np.sum(d["a"])


def list_slices_and_augmented_join(x):
    xs = [x, x * 2.0, x * 3.0]
    ys = xs[1:]
    ys += [x * 4.0]
    return np.sum(ys[0] * ys[-1] * xs[::2][1])


def imag_is_zero(x):
    return np.sum(x.imag * x + x.real * x)


@dataclasses.dataclass
class Layer:
    w: float


def dataclass_made_inside(x):
    layer = Layer(x)
    return layer.w * 2.0


def closures_over_the_loop_variable(x):
    s = 0.0
    for k in range(3):
        scale = lambda z: z * k  # noqa: E731, B023
        s = s + scale(x)
    late = lambda z: z * k  # noqa: E731  (Python binds late: the last k)
    return s + late(x)


ROTATION = 1j


def complex_global(x):
    return abs(x * ROTATION)


def list_plus_array(x):
    return np.sum([1.0, 2.0, 3.0] + x)  # refused here


def sets_an_item_of_an_item(rows):
    rows[0][1] = 5.0
    return 1.0


def helper_changes_an_item_of_its_argument(x):
    rows = [x * 1.0]
    sets_an_item_of_an_item(rows)
    return np.sum(rows[0] * x)


def _chain_rows(m):
    """Appends rows of its argument (views of it) to a list of its own: the argument itself is not changed."""
    out = []
    for i in range(m.shape[0]):
        out.append(m[i] if i == 0 else out[i - 1] * m[i])
    return np.stack(out)


def list_of_argument_views(m):
    return np.sum(_chain_rows(m) ** 2)


def _zero_a_listed_row(m):
    rows = []
    for i in range(m.shape[0]):
        rows.append(m[i])
    rows[0][0] = 0.0  # the argument's own memory: Python's caller would see the change
    return rows[0]


def helper_writes_into_a_listed_view(m):
    return np.sum(_zero_a_listed_row(m) * 2.0)  # refused here
