"""One model of Python's memory: where another name, a view or a container slot sees an array that changes,
ast_ad gives Python's value and its gradient, or refuses at the line of the write, naming the other variable.

Python is the first oracle: the value of every function here is compared with Python's, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

import ast_ad
from ast_ad.errors import InPlaceAliasError
from tests import memory_functions as mf
from tests.oracles import assert_fd, assert_same, marked_line

X = np.array([1.1, 0.7, 1.3, 0.9])
T = np.array([0.3, -1.2, 0.5, 2.0])


def _grad(f):
    return ast_ad.value_and_grad(f)(X.copy())


def _jvp(f):
    return ast_ad.jvp(f, (X.copy(),), (T,))


@pytest.mark.parametrize("mode", [_grad, _jvp], ids=["grad", "jvp"])
@pytest.mark.parametrize("fun", mf.SHARED, ids=[f.__name__ for f in mf.SHARED])
def test_a_write_another_name_sees_is_refused_at_its_line(fun, mode) -> None:
    """Each of these returned Python's value nowhere: a private copy hid the sharing from the guard, or no
    guard looked at the other slot of a container or at a view read before the write."""
    with pytest.raises(InPlaceAliasError) as caught:
        mode(fun)
    assert f"memory_functions.py:{marked_line(fun, '# write')}:" in str(caught.value)


def test_the_refusal_names_the_other_variable() -> None:
    with pytest.raises(InPlaceAliasError, match=r"another variable \(w\)"):
        _grad(mf.view_read_after_loop)
    with pytest.raises(InPlaceAliasError, match=r"another variable \(y\)"):
        _grad(mf.two_names_one_written_in_loop)


@pytest.mark.parametrize("fun", mf.APART, ids=[f.__name__ for f in mf.APART])
def test_writes_nothing_else_sees_are_exact(fun) -> None:
    value, grads = _grad(fun)
    assert value == fun(X.copy())
    assert_same((grads,), ast_ad.tracer.grad(fun, (0,))(X.copy()))
    assert_fd(lambda x: fun(np.copy(x)), (X,), (0,), (grads,))
    value_f, tangent = _jvp(fun)
    assert value_f == value
    assert np.isclose(tangent, np.dot(grads, T), rtol=1e-12)  # the dot-product identity, forward and reverse


@pytest.mark.parametrize("mode", [_grad, _jvp], ids=["grad", "jvp"])
@pytest.mark.parametrize("fun", [mf.element_loop, *mf.ALIASED_LOOPS],
                         ids=["no alias"] + [f.__name__ for f in mf.ALIASED_LOOPS])
def test_the_loop_written_in_place_with_an_alias_of_each_kind(fun, mode) -> None:
    """The element loop writes a private copy of its array in place (``analysis.in_place_writes``); with an
    alias of each kind added, that copy would hide the alias: the result is Python's value, or a refusal."""
    try:
        value = mode(fun)[0]
    except InPlaceAliasError:
        assert fun is not mf.element_loop and fun is not mf.element_loop_carried
        return
    assert value == fun(X.copy())
    if mode is _grad:
        grads = _grad(fun)[1]
        assert_fd(lambda x: fun(np.copy(x)), (X,), (0,), (grads,))


def test_a_loop_carried_alias_bound_after_the_writes_is_exact() -> None:
    """``other = y`` late in the step: the name sees the array the loop wrote, which is Python's value."""
    fun = mf.element_loop_carried
    value, grads = _grad(fun)
    assert value == fun(X.copy())
    assert_same((grads,), ast_ad.tracer.grad(fun, (0,))(X.copy()))


def test_a_write_into_a_tuple_of_arrays_of_two_shapes() -> None:
    """It raised numpy's "setting an array element with a sequence" from a helper."""
    fun = mf.tuple_of_arrays_of_two_shapes
    value, grads = _grad(fun)
    assert value == fun(X.copy())
    assert_fd(lambda x: fun(np.copy(x)), (X,), (0,), (grads,))
