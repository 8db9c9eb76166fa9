"""Python as people write it, from the memory issue's list (``test_python_written``)."""

import dataclasses

import numpy as np
import scipy.special

import ast_ad
from ast_ad import value_and_grad
from tests import memory_functions


def checks_its_argument(x):
    if x.shape[0] < 2:
        raise ValueError("need two entries")  # raises
    return np.sum(x * x)


def constant_call(x):
    d = x.shape[0]
    c = scipy.special.multigammaln(0.5 * (d + 3), d)
    return np.sum(x) * c


def starred(x):
    first, *rest = [x[0], x[1], x[2]]
    return first * sum(rest)


def starred_between(x):
    a, *b, c = [x[0], x[1], x[2], x[0] * x[1]]
    return a * c + b[0] * b[1]


def too_few_for_the_star(x):
    a, *b, c = [x[0]]  # too few
    return a * c + sum(b)


def f_string_keys(x):
    d = {}
    for i in range(2):
        d[f"w{i}"] = x[i] * 2.0
    return d["w0"] * d["w1"]


@dataclasses.dataclass
class Line:
    w: float
    b: float


def builds_an_object(x):
    line = Line(x[0], x[1])  # object
    return line.w * x[2] + line.b


class Lazy:
    """Attribute reads that Python hands to ``__getattr__``: not followed."""

    def __init__(self, w):
        self.w = w

    def __getattr__(self, name):
        return 0.0


def builds_a_lazy_object(x):
    box = Lazy(x[0])
    return box.w * x[1]


def differentiates_scipy(x):
    return scipy.special.multigammaln(x[0] + 3.0, 2)  # scipy


def dict_comprehension(x):
    d = {k: x[k] * x[k] for k in range(3)}
    return d[0] + d[2] * x[1]


def items_loop_that_writes(x):
    d = {"a": x[0], "b": x[1] * 2.0}
    total = 0.0
    for k, v in d.items():
        d[k] = v * v
        total = total + v * d[k]
    for w in d.values():
        total = total + w
    for k in d.keys():
        total = total + d[k] * x[2]
    return total


def max_by_key(x):
    m = max([x[0], x[1], x[2]], key=lambda t: abs(t))
    n = min([x[0], x[1], x[2]], key=lambda t: t * t)
    return m * 2.0 + n


def cubed(t):
    return t * t * t


def local_derivative(x):
    d = ast_ad.grad(cubed)
    return d(x[0]) * x[1]


def value_and_gradient_in_a_body(x):
    v, g = ast_ad.value_and_grad(cubed)(x[0])
    w, h = value_and_grad(cubed)(x[1])
    return v + g * x[2] + w * h


def quiet_division(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(x != 0, 1.0 / x, 0.0)
    return np.sum(y * x)


def raising_errstate(x):
    with np.errstate(divide="raise"):  # refused
        y = 1.0 / x
    return np.sum(y)


def scaled(x, y, s=1.0):
    return np.sum(x * x * y) * s


def fill(a, v):
    a[0] = v * 2.0  # returns nothing


def fills_and_returns(a, v):
    a[0] = v * 2.0
    return a


def calls_a_filler(x):
    y = x * 1.0
    fill(y, x[1])
    return np.sum(y * x)


def calls_a_filler_of_another_module(x):
    y = x * 1.0
    memory_functions.fill_elsewhere(y, x[1])
    return np.sum(y * x)


def assigns_what_the_filler_returns(x):
    y = x * 1.0
    y = fills_and_returns(y, x[1])
    return np.sum(y * x)


def lambdas_in_a_list(x):
    fs = [lambda t: t * t, lambda t: np.sin(t) * 3.0]
    total = fs[0](x[0]) + fs[-1](x[1])
    for g in fs:
        total = total + g(x[2])
    return total


def set_comprehension_of_labels(x):
    labels = {int(k) % 2 for k in range(5)}
    return x[0] * len(labels) + x[1]


def set_comprehension_of_values(x):
    values = {v * 2.0 for v in x}
    return sum(values)  # a set


def loops_over_a_dict_it_makes(x):
    # the keys 1, 0 are not the positions 0, 1: a loop reads each key, then its value
    weights = {1: x[0] * 2.0, 0: x[1] * 3.0, 2: x[2]}
    total, step = 0.0, 1.0
    for k in weights:
        total = total + step * k * weights[k]
        step = step + 1.0
    for k in {k: k * 2 for k in range(3)}:
        total = total + x[k] * k
    return total


def loops_over_a_set_it_makes(x):
    total, step = 0.0, 1.0
    for k in {2, 0}:
        total = total + x[k] * step
        step = step + 1.0
    for k in {j % 2 for j in range(5)}:
        total = total * x[k]
    return total


def loops_over_a_dict_argument(x, table):
    total = 0.0
    for k in table:  # a dict
        total = total + table[k] * x[k]
    for j, k in enumerate(reversed(table)):
        total = total * 0.5 + (j + 1.0) * table[k]
    return total


def loops_over_a_set_argument(x, chosen):
    total, step = 0.0, 1.0
    for k in chosen:
        total = total + x[k] * step
        step = step + 1.0
    return total


def loops_over_named_layers(params, x):
    out = x
    for name in params:  # a dict of arrays, its order the layers'
        out = np.tanh(params[name] * out)
    return np.sum(out)


def loops_over_a_dict_in_a_list(x, tables):
    total = 0.0
    for k in tables[0]:  # a dict, known only when the loop runs
        total = total + tables[0][k] * x[k]
    return total


def loops_over_the_keys_of_a_dict_argument(x, table):
    total = 0.0
    for k in list(table):
        total = total + table[k] * x[k]
    return total


# a global of this module that memory_functions has too, with another value
SCALE = 7.0


def passes_its_global_to_a_helper_of_another_module(x):
    """The argument reads this module's ``SCALE`` (7); the helper, inlined, its own module's (3)."""
    y = x * 1.0
    y = memory_functions._scaled_in_place(y * SCALE)
    return np.sum(y) + SCALE


def key_from_the_input(x):
    table = {0.0: 1.0, 1.0: 2.0}
    k = x[0] - x[0]
    return table[k] * x[1]  # key


def key_written_from_the_input(x):
    table = {}
    table[x[0] * 2.0] = 1.0  # key
    k = list(table)[0]  # the key handed back as a value: its derivative, 2, would be lost
    return k * x[0]


def loops_over_an_iterator(x, items):
    total = 0.0
    for v in items:  # an iterator
        total = total + v * x[0]
    return total


def loops_over_a_name_bound_to_a_dict_then_a_list(x):
    table = {0: 1.0}
    total = 0.0
    for _ in range(2):
        for v in table:  # keys, then items
            total = total + v * x[0]
        table = [x[0], x[1]]
    return total


def reads_a_dict_argument_by_key_and_by_loop(x, table):
    total = 0.0
    for i, k in enumerate(table):
        total = total + table[i] * x[k] + table[k]
    for i in range(2):
        total = total + table[i] * x[i]  # i is a key here
    return total


# ---- a loop reads its iterable once, where it starts ---------------------------------------------
def loops_over_a_list_it_binds_again(x):
    ys = [x[0], x[1] * 2.0]
    total = 0.0
    for v in ys:  # the loop goes on over the list it started with
        ys = [v * v] + ys
        total = total + v * ys[0]
    return total


def loops_over_an_array_it_binds_again(x):
    y = x * 1.0
    total = 0.0
    for v in y:
        y = y * 2.0
        total = total + v * y[0]
    return total


def steps_through_the_name_it_binds(x):
    y = x * 1.5
    total = 0.0
    for y in y:  # noqa: B020  (Python reads y once: the loop goes on over the array)
        total = total + y * y
    return total + y


def enumerates_a_list_it_binds_again(x):
    ws = [x[0], x[1], x[2]]
    total = 0.0
    for i, w in enumerate(ws):
        ws = ws[1:] + [w * 2.0]
        total = total + (i + 1.0) * w * ws[-1]
    return total


def writes_an_item_of_the_array_it_loops_over(x):
    y = x * 1.0
    total = 0.0
    for v in y:  # an item write changes the array the loop reads, as Python's loop sees
        y[1] = 10.0 * v
        total = total + v * v
    return total


# ---- a dict's keys carry no derivative -----------------------------------------------------------
def lists_the_keys_of_a_dict(x):
    d = {"a": x[0], "b": x[1] * x[2]}
    total = 0.0
    for k in list(d):
        total = total + d[k] * x[0]
    return total


def float_keys(x):
    d = {2.0: x[0], 0.5: x[1]}
    keys = list(d)
    pair = tuple(d)
    return keys[0] * x[0] + pair[1] * x[1] * x[2]


def _layers(x):
    return {"w": x * 2.0, "b": x[0] * 1.0}


def lists_a_dict_a_helper_returns(x):
    layers = _layers(x)
    total = 0.0
    for name in list(layers):
        total = total + np.sum(layers[name] * x)
    return total


# ---- a name's kind of container, across a loop's steps and a branch's paths ----------------------
def loops_over_a_list_then_a_dict(x):
    table = [x[0], x[1] * 2.0]
    total = 0.0
    for _ in range(2):
        for v in table:  # items, then keys
            total = total + v * 1.0
        table = {1: x[0], 0: x[2] * 3.0}
    return total


def loops_over_a_list_or_a_dict(x):
    if x[0] > 0:
        table = {1: x[0], 0: x[2] * 3.0}
    else:
        table = [x[0], x[1] * 2.0]
    total = 0.0
    for v in table:  # a dict on one path
        total = total + v * 1.0
    return total


def loops_over_the_list_of_a_list_or_a_dict(x):
    if x[0] > 0:
        table = {1: x[0], 0: x[2] * 3.0}
    else:
        table = [x[0], x[1] * 2.0]
    total = 0.0
    for v in list(table):
        total = total + v * x[1]
    return total


def reads_a_dicts_views_whole(x):
    # a dict's values, items and keys read whole, at once: lists of them, in Python's order
    d = {"a": x[0] * 2.0, "b": np.sin(x[1]), "c": x * 1.0}
    total = sum(np.sum(v) for v in d.values())
    pairs = list(d.items())
    best = max(np.sum(v) for k, v in d.items() if k != "c")
    return total + np.sum(pairs[2][1]) * best + len(d.keys()) + sum([np.sum(v) for v in d.values()])


def sums_a_dicts_values(x):
    d = {"a": x[0] * 2.0, "b": x[1] * 3.0}
    d["a"] = d["a"] * x[2]
    return sum(d.values()) * max(d.values()) + len(list(d.keys()))


def keeps_a_dicts_view(x):
    d = {"a": x[0] * 2.0, "b": x[1] * 3.0}
    values = d.values()  # refused here: the view would show later changes
    d["a"] = x[2]
    return sum(values)


def _bump(d):
    d["b"] = d["b"] * 2.0
    return 1.0


def changes_the_dict_as_its_view_is_read(x):
    d = {"a": x[0] * 2.0, "b": x[1] * 3.0}
    return sum([_bump(d) * v for v in d.values()])  # refused here: a function of yours runs


class _Scores:
    def __init__(self, a):
        self.a = a

    def values(self):
        return [self.a, self.a * 2.0]


def sums_the_values_of_its_own_object(x):
    # (an object of the user's class with a method ``values``: its own, not a dict's view)
    scores = _Scores(x * 1.0)
    return np.sum(sum(scores.values()))


def sums_the_values_of_its_own_object_in_a_loop(x):
    # (the same inside a loop: the names bound to anything but a dict are the whole function's)
    scores = _Scores(x * 1.0)
    total = 0.0
    for i in range(2):
        total = total + np.sum(sum(scores.values())) * (i + 1.0)
    return total



def _weighted_by_key(table, x):
    total = 0.0
    for k in table:
        total = total + (k + 1.0) * x[k] ** 2 + table[k] * x[0]
    return total


def passes_a_dict_it_made_to_a_helper(x):
    """A helper of yours that steps through a dict this function made: its keys are not its
    positions (``{1: 0, 0: 0, 2: 1}``: read by position, ``k`` would be the values), so the
    helper is made for a dict argument (``kinds.DICT``, labelled ``kinds.MAPPING`` for it) and
    steps through its keys."""
    table = {1: 0, 0: 0, 2: 0}
    table[2] = 1
    return _weighted_by_key(table, x)


def passes_a_dict_from_a_list_to_a_helper(x, tables):
    """The same helper given a dict out of a list argument: what ``tables[0]`` holds is known only
    when it runs, so the helper is made for a list, a tuple or a dict (``kinds.ANY_CONTAINER``),
    and its loop is refused if it is a dict (``loop_length``) where it was read by position."""
    return _weighted_by_key(tables[0], x)  # a dict


def _squares_at(members, x):
    total = 0.0
    for k in members:
        total = total + (k + 1.0) * x[k] ** 2
    return total


def passes_a_set_it_made_to_a_helper(x):
    """A set made here, given to a helper that loops over it: made for a set (``kinds.A_SET``,
    labelled ``kinds.SET``), its loop steps through its members (it was refused when it ran)."""
    return _squares_at({2, 0}, x) + _squares_at(set([1]), x)


def _adds_a_key(table, x):
    table[7] = x[2] * 3.0


def loops_over_a_dict_a_helper_wrote_into(x):
    """A dict made here, written into by a helper (a key added), then looped over: the name the
    write binds holds a dict (``kinds.DICT``), and the loop steps through its keys (it was refused
    when it ran)."""
    table = {1: x[0], 0: x[1]}
    _adds_a_key(table, x)
    total = 0.0
    for k in table:
        total = total + table[k] * (k + 1.0)
    return total


def _with_a_key(table, x):
    table[7] = x[2] * 3.0
    return table


def loops_over_a_dict_a_helper_returned(x):
    """A dict a helper of yours was given, wrote into and returned: the helper's result is a dict
    (its own kinds, given a dict: ``kinds.fact_label``), and the loop steps through its keys (it was
    refused when it ran)."""
    table = _with_a_key({1: x[0], 0: x[1]}, x)
    total = 0.0
    for k in table:
        total = total + table[k] * (k + 1.0)
    return total
