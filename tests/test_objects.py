"""Objects of the user's classes made inside the function: dataclasses, ``__init__``, methods,
properties, class attributes, ``super()``, classmethods, another name for the object, attributes
written in loops and branches, an array an attribute holds written through another name: Python's
value and its gradient."""

from __future__ import annotations

import numpy as np
import pytest

import ast_ad
from ast_ad import errors
from tests import object_functions as of
from tests import trust_cases as c
from tests.oracles import assert_fd, marked_line

X = np.array([1.5, -0.7, 2.2])
EXACT = [
    of.dataclass_with_call_and_property,
    of.inheritance_super_classmethod,
    of.attribute_in_a_loop_and_branch,
    of.attribute_sees_a_write,
    of.method_writes_what_a_name_sees,
    of.passes_the_object,
    of.objects_in_a_list_passed_to_a_function,
    of.objects_functions_make,
    of.objects_in_a_list_by_position,
]


@pytest.mark.parametrize("fun", EXACT, ids=[f.__name__ for f in EXACT])
def test_objects_made_inside_are_followed(fun) -> None:
    value, grads = ast_ad.value_and_grad(fun)(X.copy())
    assert value == fun(X.copy())
    assert_fd(lambda x: fun(np.copy(x)), (X,), (0,), (grads,))
    value_f, tangent = ast_ad.jvp(fun, (X.copy(),), (np.ones(3),))
    assert value_f == value and tangent == pytest.approx(np.sum(grads), rel=1e-12)


def test_the_object_is_never_made_its_attributes_are_variables() -> None:
    text = ast_ad.source(of.dataclass_with_call_and_property, stage="normalized")
    assert "Lin(" not in text and "m_w = x_item" in text and "m_b = " in text


def test_a_dataclass_made_inside_once_refused() -> None:
    assert ast_ad.grad(c.dataclass_made_inside)(1.3) == 2.0


@pytest.mark.parametrize("fun", [of.returns_the_object])
def test_an_object_used_as_a_value_is_refused_where_it_is(fun) -> None:
    with pytest.raises(errors.LocatedError, match="object of Lin made inside") as info:
        ast_ad.grad(fun)(X)
    assert info.value.lineno == marked_line(fun, "# escapes")


def test_an_attribute_set_on_one_path_only_is_refused_where_it_is_set() -> None:
    """``if k > 1.0: self.size = _triple`` hides the method ``size`` on some objects only: refused
    at that line."""
    with pytest.raises(errors.UnsupportedSyntaxError, match="first set in a branch") as info:
        ast_ad.grad(c.method_a_class_may_hide)(1.5)
    assert info.value.lineno == marked_line(c.Rebinding.__init__, "# refused here")


def test_a_list_of_objects_used_otherwise_than_looped_over_is_refused_where_it_is() -> None:
    """A list of objects made here is followed where a loop goes over it or over its positions
    (unrolled), where it is read at a constant position and where its length is read; used as a
    value (passed to a function), it is refused at that line, saying what is followed."""
    fun = of.a_list_of_objects_used_as_a_value
    with pytest.raises(errors.LocatedError, match="list of objects made here") as info:
        ast_ad.grad(fun)(X)
    assert info.value.lineno == marked_line(fun, "# refused")


def test_objects_by_position_read_as_a_person_would_write_them() -> None:
    """``for k in range(len(layers))`` over a list of objects made here is unrolled, ``k`` a
    constant in each step; no list, loop or object is left in the lowered code."""
    text = ast_ad.source(of.objects_in_a_list_by_position, stage="normalized")
    assert "layers" not in text and "for " not in text and "Lin(" not in text


def test_objects_in_a_list_read_as_a_person_would_write_them() -> None:
    """The loop over the objects is unrolled: each step's lines name that object's attributes."""
    text = ast_ad.source(of.objects_in_a_list_passed_to_a_function, stage="normalized")
    assert "layers" not in text and "for " not in text and "Lin(" not in text
