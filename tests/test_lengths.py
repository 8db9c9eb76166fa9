"""Lengths as expressions (``ast_ad/analysis/lengths.py``): every length the algebra claims is
the length numpy gives, at every length of the axis it is a function of, and the shape classes
made of them (``activity.LengthClasses``) give a slice's join its array's class."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import ast_ad
from ast_ad import transform
from ast_ad.analysis import lengths
from ast_ad.analysis.activity import callee_results, classes_of
from ast_ad.analysis.kinds import kinds_of
from ast_ad.api.arguments import shape_labels
from ast_ad.ir import nodes as ir
from tests.oracles import assert_fd

SYMBOL = 7  # (an axis id)
bounds = st.one_of(st.none(), st.integers(-6, 6))
slices = st.builds(slice, bounds, bounds, st.sampled_from([None, 1]))
expressions = st.recursive(
    st.just(("n",)),
    lambda inner: st.one_of(
        st.tuples(st.just("slice"), inner, slices),
        st.tuples(st.just("join"), st.lists(inner, min_size=1, max_size=3)),
    ),
    max_leaves=8,
)


def _claimed(expression):
    """The algebra's length of ``expression`` (``None`` where it cannot tell)."""
    if expression[0] == "n":
        return SYMBOL
    if expression[0] == "slice":
        inner = _claimed(expression[1])
        return None if inner is None else lengths.sliced(inner, expression[2])
    parts = [_claimed(e) for e in expression[1]]
    return None if any(p is None for p in parts) else lengths.summed(parts)


def _made(expression, x):
    """The array numpy makes of ``x`` by ``expression``."""
    if expression[0] == "n":
        return x
    if expression[0] == "slice":
        return _made(expression[1], x)[expression[2]]
    return np.concatenate([_made(e, x) for e in expression[1]])


@given(expressions, st.integers(0, 400))
def test_a_claimed_length_is_numpys_at_every_length(expression, big) -> None:
    claimed = _claimed(expression)
    if claimed is None:
        return
    for n in [*range(60), big]:
        assert lengths.at(claimed, n) == len(_made(expression, np.arange(float(n)))), n


@given(expressions, expressions)
def test_equal_lengths_are_one_expression(first, second) -> None:
    """Two expressions the algebra writes alike have equal lengths everywhere; two whose lengths
    are equal at every length it tabulates and beyond are written alike (the identity as its
    symbol: ``x[:1]`` joined to ``x[1:]`` has ``x``'s length)."""
    a, b = _claimed(first), _claimed(second)
    if a is None or b is None:
        return
    same = all(len(_made(first, np.arange(float(n)))) == len(_made(second, np.arange(float(n))))
               for n in range(0, 130))
    assert (a == b) == same


def test_slices_outside_the_algebra_are_not_claimed() -> None:
    assert lengths.sliced(SYMBOL, slice(None, None, 2)) is None
    assert lengths.sliced(SYMBOL, slice(1, None, -1)) is None
    assert lengths.summed([SYMBOL, 8]) is None  # (two axes: a sum of two lengths)
    assert lengths.indexed((SYMBOL,), ([0, 1],)) is None  # (a list of indices)
    assert lengths.indexed((SYMBOL, 8), (0, slice(1, None))) == (lengths.sliced(8, slice(1, None)),)


def field(x, y):
    return np.concatenate([x[:1], x[1:] * y[:-1]])


def rolled(x):
    return np.concatenate([x[1:], x[:1]])


def appended(x):
    parts = [x[:1]]
    parts.append(x[1:] * 2.0)  # (a list that changes: what it holds is not what it was made of)
    return np.concatenate(parts) * x


def made_of_lengths(x, y):
    a = np.zeros(x.shape[0]) + x
    b = np.ones(len(x)) * y
    c = np.zeros(x.shape) - a
    d = x[2:] * y[:-2]
    e = x[1:] * 2.0
    grown = np.concatenate([x[:2], x[1:]])
    return a, b, c, d, e, grown, field(x, y), rolled(y)


def _classes(fn, *args):
    function = transform.normalized(fn)
    callees = callee_results(transform.normalized)
    labels = shape_labels(args)
    kinds = kinds_of(function, labels, callees)
    return function, classes_of(function, labels, kinds, callees)


def test_slices_joins_and_shapes_read_off_an_array_have_its_class() -> None:
    """``np.zeros(x.shape[0])``, ``np.ones(len(x))``, ``np.zeros(x.shape)``, a join of ``x[:1]``
    and ``x[1:] * y[:-1]`` (in a helper too: ``callee_results.shaped_as``), and a rotation are of
    ``x``'s class where ``y`` has ``x``'s length; ``x[2:]`` and ``y[:-2]`` are of one class, not
    ``x[1:]``'s; a join of ``x[:2]`` and ``x[1:]`` (one entry more) is of none of those."""
    x, y = np.linspace(0.1, 0.9, 6), np.linspace(-1.0, 1.0, 6)
    function, classes = _classes(made_of_lengths, x, y)
    result = next(s.value for s in function.body if isinstance(s, ir.Assign)
                  and isinstance(s.value, ir.Pack) and len(s.value.elts) == 8)
    a, b, c, d, e, grown, joined, turned = (classes[v.name] for v in result.elts)
    assert a == b == c == joined == turned == classes["x"] == classes["y"]
    assert d is not None and d != e and e is not None
    assert grown not in (classes["x"], d, e)
    # a list appended to before it is joined holds more than its display
    function, classes = _classes(appended, x)
    joined = next(st.target for st in ir.walk(function.body) if isinstance(st, ir.Assign)
                  and isinstance(st.value, ir.Call) and st.value.fn.obj is np.concatenate)
    assert classes[joined] != classes["x"]
    value, g = ast_ad.value_and_grad(lambda v: np.sum(appended(v)))(x)
    assert value == np.sum(appended(x))
    assert_fd(lambda v: np.sum(appended(v)), (x,), (0,), (g,))
    # where ``y`` has another length, the join is of no class of ``x``'s
    _, other = _classes(made_of_lengths, x, np.linspace(-1.0, 1.0, 4))
    assert other["x"] != other["y"]
    assert {other[v.name] for v in result.elts[6:7]} != {other["x"]}


def stepped(x, s):
    h = 1.0 / s
    y = np.zeros(x.shape[0])
    for _ in range(s):
        k = field(x, y)
        y = y + h * (k + field(x, y + h * k))
    return y[-1] + np.sum(y[1:] * y[:-1])


def test_a_loop_over_joins_of_slices_keeps_no_shape() -> None:
    """GradBench's ``ode`` in small: the loop's values are all of ``x``'s class, so its gradient
    keeps no shape a step and fits no adjoint to one, and it is finite differences' (and Python's
    value); a call where the lengths differ from the first call's gets code of its own."""
    x = np.linspace(0.2, 1.1, 7)
    gradient = ast_ad.value_and_grad(stepped)
    value, g = gradient(x, 5)
    assert value == stepped(x, 5)
    assert_fd(stepped, (x, 5), (0,), (g,))
    text = ast_ad.source(ast_ad.grad(stepped), x, 5)
    assert "_shape" not in text and "unbroadcast" not in text, text
    shorter = x[:3]
    assert gradient(shorter, 4)[0] == stepped(shorter, 4)
    assert_fd(stepped, (shorter, 4), (0,), (gradient(shorter, 4)[1],))
