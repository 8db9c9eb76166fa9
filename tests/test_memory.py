"""One model of Python's memory: where another name, a view or a container slot sees an array that
changes, ast_ad gives Python's value and its gradient, or refuses at the line of the write, naming
the other variable.

Python is the first oracle: the value of every function here is compared with Python's, bit for bit.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import ast_ad
from ast_ad import errors
from ast_ad.errors import InPlaceAliasError
from tests import memory_functions as mf
from tests.oracles import assert_fd, assert_fd_or_complex_step, assert_same, marked_line
from tests.strategies import few

X = np.array([1.1, 0.7, 1.3, 0.9])
T = np.array([0.3, -1.2, 0.5, 2.0])


def _grad(f, x=X):
    return ast_ad.value_and_grad(f)(x.copy())


def _jvp(f):
    return ast_ad.jvp(f, (X.copy(),), (T,))


@pytest.mark.parametrize("fun", mf.FOLLOWED, ids=[f.__name__ for f in mf.FOLLOWED])
@pytest.mark.parametrize("x", [X, -X], ids=["x", "-x"])
def test_a_write_another_name_sees_is_followed(fun, x) -> None:
    """Each of these once returned a value Python never computes (a private copy hid the sharing
    from the guard), then was refused; the names, views and items that see the written array are
    made again from it (``aliasing.Memory.follow``): Python's value, bit for bit, and its
    gradient, in both modes."""
    value, grads = ast_ad.value_and_grad(fun)(x.copy())
    assert value == fun(x.copy())
    # the tracer follows the same names, views and slots, by numpy's own memory (its oracle)
    traced_value, traced = ast_ad.tracer.value_and_grad(fun, (0,))(x.copy())
    assert np.isclose(traced_value, value, rtol=1e-13) and np.allclose(traced[0], grads, rtol=1e-9)
    assert_fd(lambda v: fun(np.copy(v)), (x,), (0,), (grads,))
    value_f, tangent = ast_ad.jvp(fun, (x.copy(),), (T,))
    assert value_f == value
    assert np.isclose(tangent, np.dot(grads, T), rtol=1e-12)


@pytest.mark.parametrize("mode", [_grad, _jvp], ids=["grad", "jvp"])
def test_a_write_into_the_imaginary_parts_of_a_real_array_raises_as_python_does(mode) -> None:
    """``np.imag`` of a real array is a new read-only array of zeros: Python's write raises, and so
    does the derivative's (``runtime.unimag``), with numpy's words. (Through a complex array's, the
    write is followed: ``FOLLOWED``.)"""
    fun = mf.written_through_the_imaginary_parts_of_a_real_array
    with pytest.raises(ValueError, match="read-only") as python:
        fun(X.copy())
    with pytest.raises(ValueError, match="read-only") as ours:
        mode(fun)
    assert str(ours.value) == str(python.value)


def test_a_write_into_a_read_only_diagonal_is_refused() -> None:
    """``np.diag`` of a matrix is a read-only view: Python raises at the write; so does ast_ad
    (refused, not a number)."""
    def f(x):
        m = np.outer(x, x)
        d = np.diag(m)
        d[0] = 2.0 * x[1]
        return np.sum(m)

    with pytest.raises(ValueError, match="read-only"):
        f(X.copy())
    with pytest.raises(InPlaceAliasError):
        ast_ad.grad(f)(X.copy())


@pytest.mark.parametrize("fun", mf.APART, ids=[f.__name__ for f in mf.APART])
def test_writes_nothing_else_sees_are_exact(fun) -> None:
    value, grads = _grad(fun)
    assert value == fun(X.copy())
    assert_same((grads,), ast_ad.tracer.grad(fun, (0,))(X.copy()))
    assert_fd(lambda x: fun(np.copy(x)), (X,), (0,), (grads,))
    value_f, tangent = _jvp(fun)
    assert value_f == value
    # the dot-product identity, forward and reverse
    assert np.isclose(tangent, np.dot(grads, T), rtol=1e-12)


@pytest.mark.parametrize("mode", [_grad, _jvp], ids=["grad", "jvp"])
@pytest.mark.parametrize("fun", [mf.element_loop, *mf.ALIASED_LOOPS],
                         ids=["no alias"] + [f.__name__ for f in mf.ALIASED_LOOPS])
def test_the_loop_written_in_place_with_an_alias_of_each_kind(fun, mode) -> None:
    """The element loop writes a private copy of its array in place (``analysis.in_place_writes``);
    with an alias of each kind added, that copy would hide the alias: the result is Python's value,
    or a refusal."""
    value = mode(fun)[0]
    assert value == fun(X.copy())
    if mode is _grad:
        grads = _grad(fun)[1]
        assert_fd(lambda x: fun(np.copy(x)), (X,), (0,), (grads,))


def test_a_loop_carried_alias_bound_after_the_writes_is_exact() -> None:
    """``other = y`` late in the step: the name sees the array the loop wrote, which is Python's
    value."""
    fun = mf.element_loop_carried
    value, grads = _grad(fun)
    assert value == fun(X.copy())
    assert_same((grads,), ast_ad.tracer.grad(fun, (0,))(X.copy()))


def test_a_list_made_each_step_and_joined_is_no_other_names() -> None:
    """``rows = []`` and ``state = np.stack(rows)`` in a loop each bind a new object (a list of
    constants; a registered function that makes one, ``registry.makes_new_object``, asked by
    ``aliasing.loop_shared``): the appends need no guard (an LSTM's two appends a step each paid
    one); a view bound late in a loop still sees the next step's write (``reshaped_each_step``,
    followed)."""
    text = ast_ad.source(ast_ad.grad(mf.stacked_each_step), X)
    append = marked_line(mf.stacked_each_step, "# append")
    assert f"memory_functions.py:{append}'" not in text
    assert "check_in_place(" in text  # (the write's: a helper's result may be what it was given)


def test_a_write_into_a_tuple_of_arrays_of_two_shapes() -> None:
    """It raised numpy's "setting an array element with a sequence" from a helper."""
    fun = mf.tuple_of_arrays_of_two_shapes
    value, grads = _grad(fun)
    assert value == fun(X.copy())
    assert_fd(lambda x: fun(np.copy(x)), (X,), (0,), (grads,))


# ---- what ran wrong or crashed beside the writes -------------------------------------------------
def test_a_comprehension_in_a_test_reads_its_own_names() -> None:
    """``[v > 0 for v in x]`` binds its own ``v``: the function's was taken for read before it was
    bound, and the gradient raised UnboundLocalError as if it were the user's bug."""
    def all_positive(x):
        if all([v > 0 for v in x]):
            return np.sum(x * x)
        return np.sum(x)
    for x in (X, X - 1.0):
        value, grads = ast_ad.value_and_grad(all_positive)(x)
        assert value == all_positive(x)
        np.testing.assert_array_equal(grads, 2 * x if np.all(x > 0) else np.ones_like(x))
    assert "v = None" not in ast_ad.source(all_positive, stage="normalized")


def test_a_swapped_code_object_makes_the_gradient_stale(tmp_path, monkeypatch) -> None:
    """IPython's autoreload sets ``f.__code__``: the same function object, other code. The gradient
    made before, and a new one, follow the code that runs, with the disk cache on or off."""
    for cache in ("0", "1"):
        monkeypatch.setenv("AST_AD_CACHE", cache)
        monkeypatch.setenv("AST_AD_CACHE_DIR", str(tmp_path / "cache"))
        name = f"swapped_{cache}"
        (tmp_path / f"{name}.py").write_text(
            "import numpy as np\n\n\ndef f(x):\n    return np.sin(x) * 2.0\n\n\ndef g(x):\n    "
            "return x * x * x\n"
        )
        monkeypatch.syspath_prepend(str(tmp_path))
        module = __import__(name)
        before = ast_ad.grad(module.f)
        assert before(1.0) == 2.0 * np.cos(1.0)
        module.f.__code__ = module.g.__code__
        assert before(2.0) == 12.0
        assert ast_ad.grad(module.f)(2.0) == 12.0


def test_reload_after_an_edit_is_read_anew(tmp_path, monkeypatch) -> None:
    """The refusal for an edited file says to reload the module; after ``importlib.reload`` the new
    code is differentiated (the file's lines were read from a stale ``linecache``)."""
    import importlib
    import os

    path = tmp_path / "edited_model.py"
    path.write_text("def f(x):\n    return x * 2.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import edited_model
    assert ast_ad.grad(edited_model.f)(1.0) == 2.0
    path.write_text("def f(x):\n    return x * x * x\n")
    # a time of its own, whatever the file system's clock resolution
    os.utime(path, ns=(10**18, 10**18))
    importlib.reload(edited_model)
    assert ast_ad.grad(edited_model.f)(2.0) == 12.0


def test_a_gradient_exported_without_examples_takes_any_kind(tmp_path) -> None:
    """Exported after a call with two floats, it was the floats' code, with no check: called with an
    array ``x1`` it gave an array as ``x2``'s gradient. Without examples it is code for arguments of
    any kind."""
    import importlib.util

    def f(x1, x2):
        return np.sum(np.log(x1) + x1 * x2 - np.sin(x2))
    gradient = ast_ad.grad(f, (0, 1))
    assert gradient(2.0, 3.0) == (3.5, 2.0 - np.cos(3.0))
    path = ast_ad.export(gradient, str(tmp_path / "any_kind.py"))
    spec = importlib.util.spec_from_file_location("any_kind", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x1 = np.array([2.0, 2.5])
    _, (g1, g2) = module.f_vjp(x1, 3.0)
    expected = gradient(x1, 3.0)
    np.testing.assert_allclose(g1, expected[0], rtol=1e-14)
    assert np.ndim(g2) == 0 and np.isclose(g2, expected[1], rtol=1e-14)


def test_an_lstm_whose_states_a_helper_appends_to() -> None:
    """The helper's backward pass popped the adjoint of the list it returns, which its caller passed
    as the float zero where nothing read the states after the loop: ``'float' object has no
    attribute 'pop'``."""
    from tests import lstm_layers

    rng = np.random.default_rng(0)
    params = [(rng.standard_normal((12, 5)) * 0.3, rng.standard_normal(12) * 0.1),
              (rng.standard_normal((12, 6)) * 0.3, rng.standard_normal(12) * 0.1)]
    xs = rng.standard_normal((4, 2))
    value, (grads,) = ast_ad.value_and_grad(lstm_layers.loss, (0,))(params, xs)
    assert value == lstm_layers.loss(params, xs)
    (expected,) = ast_ad.tracer.grad(lstm_layers.loss, (0,))(params, xs)
    for (w, b), (w_t, b_t) in zip(grads, expected, strict=True):
        np.testing.assert_allclose(w, w_t, rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(b, b_t, rtol=1e-10, atol=1e-13)
    assert_fd(lambda W: lstm_layers.loss([(W, params[0][1]), params[1]], xs), (params[0][0],), (0,),
              (grads[0][0],))


@pytest.mark.parametrize("mode", [_grad, _jvp], ids=["grad", "jvp"])
def test_a_helper_that_changes_its_argument_is_given_a_copy(mode) -> None:
    """``x = damp(x)``: nothing reads the old object after the call, so the helper may change it,
    but the generated code gives it a copy: the caller's array (a parameter), or one the backward
    pass reads, stays."""
    x0, x1 = X[:3].copy(), np.ones(3)
    value, grads = ast_ad.value_and_grad(mf.damps_its_parameter, (0, 1))(x0, x1)
    np.testing.assert_array_equal(x1, np.ones(3))
    assert value == mf.damps_its_parameter(X[:3].copy(), np.ones(3))
    value, grads = _grad(mf.damps_a_local) if mode is _grad else (_jvp(mf.damps_a_local)[0], None)
    assert value == mf.damps_a_local(X.copy())
    if grads is not None:
        assert_fd(lambda x: mf.damps_a_local(np.copy(x)), (X,), (0,), (grads,))


@pytest.mark.parametrize("shift", [0.0, -2.0], ids=["first branch", "second branch"])
def test_a_name_of_the_top_level_written_in_a_nested_branch(shift) -> None:
    x0, x1 = (
        np.array([-0.34409118, 0.84022247, 0.5]),
        np.array([-0.34409118, 0.84022247, 0.5]) + shift,
    )
    fun = mf.written_in_a_nested_branch
    value, grads = ast_ad.value_and_grad(fun, (0, 1))(x0.copy(), x1.copy())
    assert value == fun(x0.copy(), x1.copy())
    assert_fd(lambda a, b: fun(a.copy(), b.copy()), (x0, x1), (0, 1), grads)


def test_a_helper_of_another_module_is_inlined_its_names_read_in_its_module(monkeypatch) -> None:
    """A helper of another file that changes its argument is lowered in place, as one of the same
    file is, its names resolved in its own module: the comments name its file; a global of its own
    (``LIMIT``) is read as the object it is, and watched: changed, the gradient is derived again
    and follows it."""
    from tests.data import foreign_helpers

    text = ast_ad.source(ast_ad.grad(mf.helpers_of_another_module_write_their_arguments), X)
    assert "# foreign_helpers.py line 14: m[i] *= s" in text
    assert not [
        line for line in text.splitlines() if "fill(" in line and not line.strip().startswith("#")
    ]
    fun = mf.a_helper_of_another_module_reads_its_own_global
    for limit in (0.5, 0.8):
        monkeypatch.setattr(foreign_helpers, "LIMIT", limit)
        value, grads = ast_ad.value_and_grad(fun)(X.copy())
        assert value == fun(X.copy())
        assert_fd(lambda x: fun(np.copy(x)), (X,), (0,), (grads,))
        assert np.array_equal(grads[X > limit], np.full(np.sum(X > limit), limit))


def test_an_inlined_helper_reads_its_own_modules_names(tmp_path, monkeypatch) -> None:
    """A helper of another module, inlined, reads a builtin its module does not shadow: the
    caller's module shadowing it (``sum``) changes nothing, as in Python (it once read the
    caller's ``sum``: a wrong value)."""
    (tmp_path / "other_fill.py").write_text("def fill(a):\n    a[0] = sum([a[1], a[2]])\n")
    (tmp_path / "shadowing.py").write_text(
        "import numpy as np\nimport other_fill\n\n\ndef sum(xs):\n    return 0.0\n\n\n"
        "def f(x):\n    y = x * 1.0\n    other_fill.fill(y)\n    return np.sum(y * x)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import shadowing

    value, grads = ast_ad.value_and_grad(shadowing.f)(X.copy())
    assert value == shadowing.f(X.copy())
    assert_fd(lambda x: shadowing.f(np.copy(x)), (X,), (0,), (grads,))


def test_a_helper_written_in_place_and_then_redefined_is_read_anew(tmp_path, monkeypatch) -> None:
    """A helper that changes its argument is lowered into the caller, so no binding of the gradient
    reads it: redefining it (a notebook cell run again) must still make the gradient follow the new
    one, in this process (``watch_code`` watches it) and in the next (such a gradient is not written
    to the disk cache)."""
    for cache in ("0", "1"):
        monkeypatch.setenv("AST_AD_CACHE", cache)
        monkeypatch.setenv("AST_AD_CACHE_DIR", str(tmp_path / "cache"))
        name = f"redefined_{cache}"
        (tmp_path / f"{name}.py").write_text(
            "import numpy as np\n\n\ndef fill(a):\n    a[0] = 5.0\n\n\ndef fill_again(a):\n    "
            "a[0] = 7.0 * a[1]\n\n\ndef f(x):\n    y = x * 1.0\n    fill(y)\n    return np.sum(y * "
            "x)\n"
        )
        monkeypatch.syspath_prepend(str(tmp_path))
        module = __import__(name)
        gradient = ast_ad.value_and_grad(module.f)
        assert gradient(X.copy())[0] == module.f(X.copy())
        module.fill = module.fill_again
        value, grads = gradient(X.copy())
        assert value == module.f(X.copy())
        assert_fd(lambda v, m=module: m.f(np.copy(v)), (X,), (0,), (grads,))


def test_a_closure_whose_cell_is_set_again_is_derived_again(tmp_path, monkeypatch) -> None:
    """A closure of yours inlined where it is called (it returns a view of its argument) reads its
    cell as it is when the derivative is made; set again (``nonlocal``), the derivative is made
    again, and gives Python's new value."""
    (tmp_path / "cells.py").write_text(
        "import numpy as np\n\n\ndef counter():\n    k = 1\n\n    def part(a):\n"
        "        return a[k:]\n\n    def move(v):\n        nonlocal k\n        k = v\n\n"
        "    return part, move\n\n\npart, move = counter()\n\n\ndef f(x):\n"
        "    y = x * 1.0\n    w = part(y)\n    w[0] = 5.0 * x[0]\n    return np.sum(y * y * x)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import cells

    gradient = ast_ad.value_and_grad(cells.f)
    for k in (1, 2, 1):
        cells.move(k)
        value, grads = gradient(X.copy())
        assert value == cells.f(X.copy())
        assert_fd(lambda v: cells.f(np.copy(v)), (X,), (0,), (grads,))


@pytest.mark.parametrize("n", [0, 1, 2])
def test_a_view_recipe_bound_in_a_loop_of_no_steps_is_bound_before_it(n) -> None:
    """Forward and reverse mode, the loop run for none, one and two steps: Python's value, and the
    derivative of finite differences (once an UnboundLocalError of forward mode where it ran
    none)."""
    fun = mf.item_of_a_list_made_in_a_loop_that_may_not_run
    value, dot = ast_ad.jvp(lambda x: fun(x, n), (0.7,), (1.0,))
    assert value == fun(0.7, n)
    assert_fd(lambda x: fun(x, n), (0.7,), (0,), (dot,))
    assert ast_ad.grad(fun)(0.7, n) == pytest.approx(dot)


@pytest.mark.parametrize(
    "fun",
    [mf.binds_the_name_a_closure_reads, mf.binds_the_name_a_helper_reads,
     mf.binds_the_name_a_method_reads, mf.binds_the_name_static_and_class_methods_read,
     mf.passes_a_function_to_a_method_that_reads_its_name,
     mf.passes_a_function_to_a_helper_that_reads_its_name],
)
def test_an_inlined_function_reads_its_own_scope_not_the_callers(fun) -> None:
    """A closure's, a helper's or a method's body, inlined in place, reads the names it does not
    bind from its own closure or module even where the caller has a variable of the same name (once
    silently the caller's: x[2:] for x[1:], 10 for 3; then refused for methods and for helpers
    passed a function), and a lambda of the caller's passed to it reads the caller's: Python's
    value, and the gradient of finite differences."""
    x = np.array([1.0, 2.0, 3.0, 4.0])
    value, grad = ast_ad.value_and_grad(fun)(x.copy())
    assert value == fun(x.copy())
    assert_fd(lambda v: fun(v.copy()), (x,), (0,), (grad,))


def test_one_float_object_passed_for_several_arguments_is_several_variables() -> None:
    """``f(a, a, a)`` with one float: ``x2 += d`` binds a new float, so no other name follows it
    (``runtime.is_same`` says no number is one object a write changes); each argument keeps its own
    gradient, in both modes."""
    fun = mf.floats_swapped_in_a_loop
    a = 0.0
    grads = ast_ad.grad(fun, (0, 1, 2))(a, a, a)
    assert grads == ast_ad.grad(fun, (0, 1, 2))(0.0, 1e-300, -1e-300)
    assert grads == (0.0, 1.0, 0.0)
    assert ast_ad.jvp(fun, (a, a, a), (0.0, 1.0, 0.0))[1] == 1.0


# ---- the tracer, the other oracle, follows Python's memory as ast_ad does ------------------------
@pytest.mark.parametrize("fun", mf.FOLLOWED, ids=[f.__name__ for f in mf.FOLLOWED])
def test_the_tracers_forward_mode_follows_the_same_writes(fun) -> None:
    """The tracer notes a result that shares memory with its argument as a view of it, with where
    each of its entries lies in the base (numpy's own layout), and after a write into either puts
    the entries back and reads every other view again; forward mode carries tangents through the
    same writes: its tangent is ast_ad's."""
    value, tangent = ast_ad.jvp(fun, (X.copy(),), (T,))
    traced_value, traced = ast_ad.tracer.jvp(fun, (X.copy(),), (T,))
    assert np.isclose(traced_value, value, rtol=1e-13)
    assert np.isclose(traced, tangent, rtol=1e-10)


def _numbers_are_not_written(x):
    a = x[0] * 1.0
    b = a
    a += 2.0  # a new number for a alone
    return a * b


def _an_array_is_written(x):
    y = x * 1.0
    z = y
    z += x * x  # the very array y holds
    w = y[1:]
    y[1] = 3.0 * x[0]  # seen through w
    return np.sum(y[1:] * w) + np.sum(z)


@pytest.mark.parametrize("fun", [_numbers_are_not_written, _an_array_is_written])
def test_the_tracer_changes_an_array_in_place_and_a_number_never(fun) -> None:
    value, grads = ast_ad.value_and_grad(fun)(X.copy())
    traced_value, traced = ast_ad.tracer.value_and_grad(fun, (0,))(X.copy())
    assert traced_value == fun(X.copy()) == value
    assert np.allclose(traced[0], grads, rtol=1e-12)


def _a_constant_written_after_a_product_read_it(x):
    c = np.array([0.5, 0.5, 0.5, 0.5])
    total = 0.0
    for k in range(2):
        c += 0.1 * k  # (a plain array: numpy writes it in place)
        total = total + np.sum(np.sin(c * x))
    return total


def test_the_tracer_keeps_what_a_rule_reads_from_a_plain_array_written_later() -> None:
    """The product read ``c`` as it was; ``c += ...`` then changes it in place. The tracer's rule
    reads the array it kept, not the changed one (it read the changed one, and its gradient was
    wrong where ast_ad's and the differences' agreed: found by the random programs with arrays
    written out)."""
    fun = _a_constant_written_after_a_product_read_it
    grads = ast_ad.grad(fun)(X.copy())
    traced = ast_ad.tracer.value_and_grad(fun, (0,))(X.copy())[1][0]
    assert np.allclose(traced, grads, rtol=1e-12)
    assert_fd(fun, (X.copy(),), (0,), (grads,))


def _writes_a_broadcast(x):
    b = np.broadcast_to(x * 1.0, (2, 4))
    b[0, 0] = 1.0
    return np.sum(b)


def _writes_a_real_part(x):
    z = x * (1.0 + 1.0j)
    r = z.real
    r[0] = 2.0 * x[1]
    return np.sum(np.abs(z))


def _writes_a_single_real_part(x):
    z = (x * (1.0 + 1.0j)).astype(np.complex64)
    r = z.real
    r[0] = 2.0 * x[1]
    return np.sum(np.abs(z))


def test_the_tracer_raises_where_numpy_does_and_refuses_what_it_cannot_follow() -> None:
    """A read-only view (``np.broadcast_to``) is not written, as numpy says; the real parts of a
    complex array written are written back into it (Python's value, and finite differences'
    gradient); a view whose entries are not its base's otherwise (the real parts of a complex64
    array) is refused by name, not approximated."""
    with pytest.raises(ValueError, match="read-only"):
        _writes_a_broadcast(X.copy())
    with pytest.raises(ValueError, match="read-only"):
        ast_ad.tracer.grad(_writes_a_broadcast, (0,))(X.copy())
    value, (grads,) = ast_ad.tracer.value_and_grad(_writes_a_real_part, (0,))(X.copy())
    assert value == _writes_a_real_part(X.copy())
    assert_fd(lambda v: _writes_a_real_part(np.copy(v)), (X,), (0,), (grads,))
    with pytest.raises(errors.MissingRuleError, match="view whose entries are not its base's"):
        ast_ad.tracer.grad(_writes_a_single_real_part, (0,))(X.copy())


def test_a_method_given_an_output_array_is_refused_with_the_function_to_write() -> None:
    """``x.clip(lo, hi, y)`` writes into ``y``, not ``x``: refused, naming the spelling ast_ad
    follows (``np.clip(x, lo, hi, out=y)``, which then gives Python's value and gradient)."""
    def by_method(x):
        y = np.zeros(4)
        x.clip(0.8, 1.2, y)
        return np.sum(y * x)

    def by_function(x):
        y = np.zeros(4)
        np.clip(x, 0.8, 1.2, out=y)
        return np.sum(y * x)

    with pytest.raises(errors.UnsupportedSyntaxError, match=r"np\.clip\(x, \.\.\., out=y\)"):
        ast_ad.grad(by_method)(X.copy())
    value, grads = ast_ad.value_and_grad(by_function)(X.copy())
    assert value == by_method(X.copy())
    assert_fd(lambda v: by_function(np.copy(v)), (X,), (0,), (grads,))


CANCELLING = (
    np.array([-0.0, -1.0, 1.27717522]),
    np.array([-3.29405826e-190, 1 / 3, -1.04391532]),
    np.array([-4.29179912e-111, 1.77074651, 3.00703579e-80]),
)


@pytest.mark.skipif(
    np.finfo(np.longdouble).nmant <= np.finfo(float).nmant, reason="no extended precision here"
)
def test_a_gradient_that_rounding_dominates_is_told_from_a_wrong_one() -> None:
    """The long run's program whose adjoints cancel: ast_ad and the tracer agree, the complex step
    does not, and extended precision shows the gap is rounding. The same oracle still fails a
    gradient whose extended run is wrong too."""
    fun, argnums = mf.cancelling_adjoints, (0, 1, 2)
    grads = ast_ad.grad(fun, argnums)(*copy.deepcopy(CANCELLING))
    traced = ast_ad.tracer.value_and_grad(fun, argnums)(*copy.deepcopy(CANCELLING))[1]
    assert_same(grads, traced)
    python = lambda *a: fun(*copy.deepcopy(a))  # noqa: E731
    with pytest.raises(AssertionError):  # without the extended run: a gap no oracle explains
        assert_fd_or_complex_step(python, CANCELLING, argnums, grads)

    def extended(args):
        return ast_ad.grad(fun, argnums)(*copy.deepcopy(args))

    assert_fd_or_complex_step(python, CANCELLING, argnums, grads, extended=extended)
    with pytest.raises(AssertionError):  # a gradient wrong in exact arithmetic is wrong there too
        assert_fd_or_complex_step(
            python, CANCELLING, argnums, grads, extended=lambda a: (grads[0] * 1.01, *grads[1:])
        )


# ---- views a container holds, followed by where their entries lie (``runtime.shared``) -----------
SLOTS = [mf.written_through_a_split_list, mf.base_and_slot_written_in_a_loop,
         mf.a_row_and_a_column_that_cross, mf.rows_unpacked_then_written]


@pytest.mark.parametrize("fun", SLOTS, ids=[f.__name__ for f in SLOTS])
def test_a_hessian_through_views_a_container_holds(fun) -> None:
    """Forward mode over the gradient: the helpers that move entries between the root and its
    views have rules of their own (each the other's transpose), so the Hessian is their
    derivative too, equal to finite differences of the gradient."""
    hessian = ast_ad.hessian(fun)(X.copy())
    gradient = ast_ad.grad(fun)
    step = 1e-6
    columns = [(gradient(X + step * e) - gradient(X - step * e)) / (2 * step) for e in np.eye(4)]
    np.testing.assert_allclose(hessian, np.array(columns), rtol=1e-6, atol=1e-6)


def test_an_exported_gradient_through_a_list_of_views_runs_without_ast_ad(tmp_path) -> None:
    """The module copies ``shared_family``, its plan's class and what they call: it runs with
    numpy alone, and gives the gradient ast_ad gives."""
    import json
    import subprocess
    import sys

    fun = mf.written_through_a_split_list
    value, grads = ast_ad.value_and_grad(fun)(X.copy())
    ast_ad.export(ast_ad.value_and_grad(fun), str(tmp_path / "slots_export.py"), X.copy())
    script = (
        "import sys, json; sys.modules['ast_ad'] = None\nimport numpy as np\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\nimport slots_export as m\n"
        f"out, x_bar = m.{fun.__name__}_vjp(np.array({X.tolist()!r}))\n"
        "print(json.dumps([float(out), x_bar.tolist()]))\n"
    )
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    out, exported = json.loads(done.stdout)
    assert out == value and np.array_equal(exported, grads)


def test_views_no_one_array_holds_are_refused_naming_the_others() -> None:
    """Views that overlap, of an array no variable holds any more: no root to make them again
    from, refused at the write."""
    fun = mf.written_through_views_of_an_array_no_name_holds
    with pytest.raises(InPlaceAliasError, match=r"another variable") as caught:
        _grad(fun)
    assert f"memory_functions.py:{marked_line(fun, '# write')}:" in str(caught.value)


@pytest.mark.parametrize("n", [0, 1, 2])
def test_a_name_made_again_is_bound_as_it_was(n) -> None:
    """Made again after a write (``memory_view``), a name the loop of no steps did not bind stays
    unbound: its read raises where Python's does; bound, it is Python's value and gradient."""
    fun = mf.a_name_bound_in_a_loop_of_no_steps_made_again
    if n == 0:
        with pytest.raises(UnboundLocalError):
            fun(X.copy(), n)
        with pytest.raises(UnboundLocalError):
            ast_ad.value_and_grad(fun)(X.copy(), n)
        return
    value, grads = ast_ad.value_and_grad(fun)(X.copy(), n)
    assert value == fun(X.copy(), n)
    assert_fd(lambda v: fun(np.copy(v), n), (X,), (0,), (grads,))


def _joined_after_appends(x):
    parts = [x[:1], x[1:2]]
    parts.append(x[2:] * 2.0)  # (the list is longer when it is joined than when it was made)
    return np.concatenate(parts) * x


def _popped_before_joined(x):
    parts = [x[:1], x[1:] * 3.0, x * 0.5]
    parts.pop()
    return np.concatenate(parts) * x


def _written_before_joined(x):
    parts = [x[:1] * 1.0, x[1:2] * 1.0]
    parts[1] = x[1:] * 2.0  # (an item of another shape)
    return np.concatenate(parts) * x


def _sum_after_appends(x):
    return np.sum(_joined_after_appends(x) ** 2)


def _sum_after_a_pop(x):
    return np.sum(_popped_before_joined(x) ** 2)


def _sum_after_a_write(x):
    return np.sum(_written_before_joined(x) ** 2)


def test_a_list_changed_after_its_binding_keeps_no_stand_in() -> None:
    """A helper's backward pass reads the list ``np.concatenate`` joined for its items' lengths
    alone; a stand-in taken where the list was bound missed what an append, a pop or an item
    write did to it before the join (the gradient split the adjoint by the list's first lengths:
    an IndexError, or pieces of the wrong lengths). Such a list keeps no stand-in: each gradient
    is finite differences', and the value Python's."""
    x = np.linspace(0.1, 0.9, 6)
    for outer in (_sum_after_appends, _sum_after_a_pop, _sum_after_a_write):
        value, g = ast_ad.value_and_grad(outer)(x)
        assert value == outer(x)
        numeric = np.array([(outer(x + 1e-6 * e) - outer(x - 1e-6 * e)) / 2e-6
                            for e in np.eye(6)])
        np.testing.assert_allclose(g, numeric, rtol=1e-6, atol=1e-8)


def _slot_written_then_item_changed(x):
    y = x * 1.0
    parts = [y, x * 3.0]
    parts[1] = x * 5.0  # (a new object in slot 1; slot 0 still holds y)
    y *= 2.0  # (seen through parts[0])
    return np.sum(parts[0] * parts[1])


def _slot_replaced_of_two_names(x):
    y = x * 1.0
    parts = [y, y]
    parts[0] = x * 5.0  # (slot 1 still holds y)
    y *= 2.0
    return np.sum(parts[0] * parts[1])


def _slot_seen_through_an_alias(x):
    parts = [x * 1.0, x * 2.0]
    alias = parts
    parts[1] = x * 3.0  # (the same list: alias[1] is the new object)
    return np.sum(alias[1] * parts[0])


def _slot_of_views_replaced(x):
    parts = [x[:1], x[1:2]]
    parts[1] = x[1:] * 2.0  # (the view of x in slot 1 is replaced, not written: x is unchanged)
    return np.concatenate(parts)


def _sum_of_slot_of_views_replaced(x):
    return np.sum(_slot_of_views_replaced(x) ** 2)


@pytest.mark.parametrize("fun", [_slot_written_then_item_changed, _slot_replaced_of_two_names,
                                 _slot_seen_through_an_alias, _sum_of_slot_of_views_replaced])
def test_a_slot_written_anew_keeps_what_the_container_holds(fun) -> None:
    """``parts[k] = v`` on a list puts a new object in one slot of the same list: the list still
    holds its other objects (a later ``y *= 2`` of one of them is seen through it: the value was
    Python's with the old ``y`` before, a wrong number), every name of the list sees the new slot,
    and the objects it held are not written (a view of the helper's argument in the replaced slot
    was refused as a write into the argument)."""
    x = np.linspace(0.1, 0.9, 4)
    value, g = ast_ad.value_and_grad(fun)(x)
    assert value == fun(x)
    assert_fd(fun, (x,), (0,), (g,))


# ---- ``y op= v`` writes into a numpy array: its dtype, its shape ---------------------------------

_DTYPES = {"float64": "(x * 3.0)", "float32": "(x * 3.0).astype(np.float32)",
           "int64": "np.floor(x * 3.0).astype(np.int64)",
           "int32": "np.floor(x * 3.0).astype(np.int32)",
           "complex128": "(x * (1.0 + 0.5j))", "bool": "(x > 1.0)"}
# the value: an array of y's shape, a Python float or int, float32 entries, an array of more
# entries (numpy raises), one whose shape has a leading one (numpy writes it in); each as it is
# written for the whole of ``y``, for ``y[1:]`` and for ``y[1]``
_VALUES = {
    "array": ("v", "v[1:]", "v[0]"),
    "float": ("float(v[0])", "float(v[0])", "float(v[0])"),
    "int": ("2", "2", "2"),
    "float32": ("v.astype(np.float32)", "v[1:].astype(np.float32)", "v.astype(np.float32)[0]"),
    "more": ("np.stack([v, v])", "np.stack([v[1:], v[1:]])", "v[:2]"),
    "leading one": ("v[np.newaxis]", "v[np.newaxis, 1:]", "v[np.newaxis, 0]"),
}
# where the write goes: a name, a slice of it, an entry, a list's slot, a field of an object
_PLACES = {
    "name": ("    y {op} {value}\n", 0),
    "slice": ("    y[1:] {op} {value}\n", 1),
    "entry": ("    y[1] {op} {value}\n", 2),
    "slot": ("    ys = [y, 1.0]\n    ys[0] {op} {value}\n    y = ys[0]\n", 0),
    "field": ("    box = Box(y)\n    box.y {op} {value}\n    y = box.y\n", 0),
}
_AUGMENTED = {}


def _augmented_module(dtype: str, value: str, place: str, op: str):
    """A module whose ``f(x, v)`` writes ``v`` into ``y`` of ``dtype`` at ``place`` and returns a
    number of it, and whose ``y_of(x, v)`` returns ``y``."""
    import importlib.util
    import tempfile

    key = (dtype, value, place, op)
    if key in _AUGMENTED:
        return _AUGMENTED[key]
    folder = _AUGMENTED.setdefault("folder", tempfile.mkdtemp(prefix="ast_ad_augmented_"))
    line, which = _PLACES[place]
    body = f"    y = {_DTYPES[dtype]}\n" + line.format(op=op, value=_VALUES[value][which])
    source = (
        "import numpy as np\n\n\nclass Box:\n    def __init__(self, y):\n        self.y = y\n\n\n"
        f"def f(x, v):\n{body}    return np.sum(np.real(y * v))\n\n\n"
        f"def y_of(x, v):\n{body}    return y\n"
    )
    name = f"ast_ad_augmented_{len(_AUGMENTED)}"
    path = f"{folder}/{name}.py"
    with open(path, "w") as out:
        out.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.source = source
    _AUGMENTED[key] = module
    return module


def _outcome(call):
    try:
        return call(), None
    except (TypeError, ValueError, ZeroDivisionError, FloatingPointError) as error:
        return None, type(error)


@settings(max_examples=few(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dtype=st.sampled_from(sorted(_DTYPES)), value=st.sampled_from(sorted(_VALUES)),
       place=st.sampled_from(sorted(_PLACES)),
       op=st.sampled_from(["+=", "-=", "*=", "/=", "**=", "//=", "%="]),
       seed=st.integers(0, 2**16))
def test_an_augmented_assignment_writes_into_the_array_as_python_does(dtype, value, place, op,
                                                                      seed) -> None:
    """Python's ``y op= v`` writes into a numpy array ``y``: the result keeps ``y``'s dtype (numpy's
    ``same_kind`` cast: a float32 ``y`` rounds to float32) and shape (a ``v`` of more entries
    raises, a leading one is written in), and an integer ``y`` given floats raises. ast_ad once
    computed ``y = y op v``: a float64 array where Python keeps float32 (a silent wrong number),
    numbers where Python raises. At each place a write goes, against Python: the same value and
    dtype, bit for bit, or the same kind of error; where it runs, the gradient is the tracer's and
    forward mode's."""
    module = _augmented_module(dtype, value, place, op)
    note(module.source)
    rng = np.random.default_rng(seed)
    x, v = rng.uniform(0.5, 2.0, 3), rng.uniform(0.5, 2.0, 3)
    expected, raised = _outcome(lambda: (module.f(x.copy(), v.copy()),
                                         module.y_of(x.copy(), v.copy())))
    try:
        got, ours = _outcome(lambda: ast_ad.value_and_grad(module.f, 1)(x, v))
    except errors.MissingRuleError:
        # (``%`` of complex numbers, which numpy does not define: refused at the user's line)
        assert raised is not None
        return
    # (numpy's own class of a failed cast is private: ours is the public class it derives from)
    assert (ours is None) == (raised is None) and (ours is None or issubclass(raised, ours)), (
        ours, raised)
    if raised is not None:
        return
    assert got[0] == expected[0]  # bit for bit: float32 rounding and all
    y, _ = ast_ad.jvp(module.y_of, (x, v), (np.zeros(3), np.ones(3)))
    assert type(y) is type(expected[1]) and np.shape(y) == np.shape(expected[1])
    assert np.result_type(y) == np.result_type(expected[1])
    np.testing.assert_array_equal(y, expected[1])
    grads = got[1]
    # (a tangent cast to float32 rounds there: forward mode's and the tracer's, not reverse mode's)
    rtol, atol = (1e-4, 1e-5) if "float32" in (dtype, value) else (1e-6, 1e-9)
    try:
        traced = ast_ad.tracer.grad(module.f, 1)(x, v)
    except (TypeError, ValueError):
        traced = None  # (the tracer follows no write of a traced number into a complex array)
    if traced is not None:
        np.testing.assert_allclose(grads, traced, rtol=rtol, atol=atol)
    elif dtype in ("float64", "complex128") and value != "float32":  # (no rounding to float32)
        assert_fd(module.f, (x, v), (1,), (grads,))
    _, tangent = ast_ad.jvp(module.f, (x, v), (np.zeros(3), np.ones(3)))
    assert math.isclose(tangent, float(np.sum(grads)), rel_tol=rtol, abs_tol=atol)


@pytest.mark.parametrize("fun", [mf.list_extended_by_a_tuple, mf.list_extended_by_a_generator,
                                 mf.list_extended_twice_under_two_names],
                         ids=lambda f: f.__name__)
def test_a_list_extended_by_any_iterable(fun) -> None:
    """``ys += v`` on a list extends it by any iterable (``+`` joins lists alone): the generated
    code once raised Python's "can only concatenate list" where Python runs; and a list extended
    twice under two names once failed in its gradient (a zero adjoint added to a list's). Python's
    value to the bit, every name of the list seeing the items, and the gradient of the tracer and
    of finite differences."""
    value, grads = _grad(fun)
    assert value == fun(X.copy())
    assert_same((grads,), (ast_ad.tracer.grad(fun)(X.copy()),))
    assert_fd(fun, (X.copy(),), (0,), (grads,))
