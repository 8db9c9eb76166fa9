"""Python as people write it: ``raise``, starred targets, f-strings, calls of a library on numbers;
and what is still refused says what to write instead, in the user's words."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import ast_ad
from ast_ad import errors
from tests import python_written as pw
from tests.oracles import assert_fd, assert_same, marked_line

X = np.array([1.5, -0.7, 2.2])
T = np.array([0.4, 1.0, -0.3])
EXACT = [pw.checks_its_argument, pw.constant_call, pw.starred, pw.starred_between, pw.f_string_keys,
         pw.dict_comprehension, pw.items_loop_that_writes, pw.max_by_key, pw.local_derivative,
         pw.value_and_gradient_in_a_body, pw.quiet_division, pw.assigns_what_the_filler_returns,
         pw.lambdas_in_a_list, pw.calls_a_filler, pw.set_comprehension_of_labels,
         pw.loops_over_a_dict_it_makes, pw.loops_over_a_set_it_makes,
         pw.loops_over_a_list_it_binds_again, pw.loops_over_an_array_it_binds_again,
         pw.steps_through_the_name_it_binds, pw.enumerates_a_list_it_binds_again,
         pw.writes_an_item_of_the_array_it_loops_over, pw.lists_the_keys_of_a_dict, pw.float_keys,
         pw.lists_a_dict_a_helper_returns, pw.loops_over_the_list_of_a_list_or_a_dict,
         pw.reads_a_dicts_views_whole, pw.sums_a_dicts_values,
         pw.sums_the_values_of_its_own_object, pw.sums_the_values_of_its_own_object_in_a_loop]


@pytest.mark.parametrize("fun", EXACT, ids=[f.__name__ for f in EXACT])
def test_each_is_differentiated_in_both_modes(fun) -> None:
    value, grads = ast_ad.value_and_grad(fun)(X.copy())
    assert value == fun(X.copy())
    # (the tracer runs no derivative)
    if fun not in (pw.local_derivative, pw.value_and_gradient_in_a_body):
        assert_same((grads,), ast_ad.tracer.grad(fun, (0,))(X.copy()))
    assert_fd(fun, (X,), (0,), (grads,))
    value_f, tangent = ast_ad.jvp(fun, (X.copy(),), (T,))
    assert value_f == value
    assert np.isclose(tangent, np.dot(grads, T), rtol=1e-12)


def test_the_gradient_raises_where_python_raises() -> None:
    with pytest.raises(ValueError, match="need two entries"):
        ast_ad.grad(pw.checks_its_argument)(np.array([1.0]))
    with pytest.raises(ValueError, match="need two entries"):
        ast_ad.jvp(pw.checks_its_argument, (np.array([1.0]),), (np.array([1.0]),))
    with pytest.raises(ValueError, match="not enough values to unpack"):
        ast_ad.grad(pw.too_few_for_the_star)(X)


def test_the_generated_code_keeps_the_raise() -> None:
    text = ast_ad.source(ast_ad.grad(pw.checks_its_argument))
    assert "raise ValueError('need two entries')" in text


def test_a_library_call_differentiated_is_refused_at_its_line() -> None:
    """Run as written on numbers; where the gradient must go through it, its source is outside the
    language."""
    with pytest.raises(errors.ASTADError) as info:
        ast_ad.grad(pw.differentiates_scipy)(X)
    assert f"python_written.py:{marked_line(pw.differentiates_scipy, '# scipy')}" in str(
        info.value
    ) or getattr(info.value, "lineno", None) == marked_line(pw.differentiates_scipy, "# scipy")


def test_a_class_of_the_users_is_not_told_to_register_a_rule() -> None:
    """A dataclass made inside is followed (tests/test_objects.py); one that takes attribute access
    over is not, and the refusal says what to write, not to register a rule."""
    value, grads = ast_ad.value_and_grad(pw.builds_an_object)(X)
    assert value == pw.builds_an_object(X)
    np.testing.assert_allclose(grads, [X[2], 1.0, X[0]])
    with pytest.raises(errors.MissingRuleError) as info:
        ast_ad.grad(pw.builds_a_lazy_object)(X)
    said = str(info.value)
    assert "class of yours" in said and "register" not in said


@pytest.mark.parametrize(("source", "said"), [
    ("def f(x):\n    return g(*x)\n", "star-arguments (f(*args))"),
    ("def f(x):\n    return sum([*x, 1.0])\n", "unpacking with * in a list or tuple"),
    ("def f(x):\n    h = {'a': lambda t: t * t}\n    return h['a'](x)\n", "define it with def"),
])
def test_refusals_speak_pythons_words(tmp_path, monkeypatch, source, said) -> None:
    path = tmp_path / "refused_words.py"
    path.write_text("import numpy as np\n\n\ndef g(a, b):\n    return a * b\n\n\n" + source)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    import refused_words
    importlib.reload(refused_words)
    with pytest.raises(errors.UnsupportedSyntaxError) as info:
        ast_ad.grad(refused_words.f)(X)
    assert said in str(info.value)
    assert "Starred" not in str(info.value) and "Lambda expressions" not in str(info.value)


def test_errstate_that_may_raise_is_refused_at_its_line() -> None:
    with pytest.raises(errors.UnsupportedSyntaxError, match="np.errstate") as info:
        ast_ad.grad(pw.raising_errstate)(X)
    assert info.value.lineno == marked_line(pw.raising_errstate, "# refused")


def test_a_functools_partial_is_differentiated_as_its_function() -> None:
    import functools

    x, y = np.array([1.0, 2.0]), np.array([0.5, -1.0])
    bound_keyword = functools.partial(pw.scaled, s=2.0)
    np.testing.assert_allclose(ast_ad.grad(bound_keyword)(x, y), 4 * x * y)
    np.testing.assert_allclose(ast_ad.grad(bound_keyword, 1)(x, y), 2 * x * x)
    bound_first = functools.partial(pw.scaled, x)
    value, grads = ast_ad.value_and_grad(bound_first)(y, s=3.0)
    assert value == pw.scaled(x, y, 3.0)
    np.testing.assert_allclose(grads, 3 * x * x)
    assert ast_ad.jvp(bound_keyword, (x, y), (np.ones(2), np.zeros(2))) == (
        pw.scaled(x, y, 2.0),
        np.sum(4 * x * y),
    )


def test_jvp_fills_defaults_and_says_which_argument_is_missing() -> None:
    x, y = np.array([1.0, 2.0]), np.array([0.5, -1.0])
    assert ast_ad.jvp(pw.scaled, (x, y), (np.ones(2), None))[1] == np.sum(2 * x * y)
    with pytest.raises(errors.ASTADError, match="needs an argument for 'y'"):
        ast_ad.jvp(pw.scaled, (x,), (np.ones(2),))


def test_a_helper_that_only_changes_its_argument_writes_the_callers_array() -> None:
    """A helper that changes its argument and returns nothing is inlined, of the same module
    (``calls_a_filler``) or of another (its names read in its module): the caller's array follows
    its writes."""
    value, grads = ast_ad.value_and_grad(pw.calls_a_filler_of_another_module)(X.copy())
    assert value == pw.calls_a_filler_of_another_module(X.copy())
    assert_fd(lambda v: pw.calls_a_filler_of_another_module(v.copy()), (X,), (0,), (grads,))


def test_a_set_of_differentiated_values_is_refused_where_it_is_made() -> None:
    with pytest.raises(errors.MissingRuleError, match="a set of differentiated values") as info:
        ast_ad.grad(pw.set_comprehension_of_values)(X)
    assert info.value.lineno == marked_line(pw.set_comprehension_of_values, "# a set") - 1


def test_loops_over_dict_and_set_arguments_step_through_their_keys() -> None:
    """The keys 1, 0, 2 of a dict that comes in are not its positions: read by position, ``k``
    would be the values (0, 0, 0 here: ``x[0]`` three times, a wrong number). The derivative is
    made for a dict argument (its label, ``kinds.MAPPING``) and steps through its keys
    (``optimize.keyed``): Python's value, and the gradients of both arguments, in both modes; so
    for a set, and for a dict of named layers."""
    table = {1: 0, 0: 0, 2: 0}
    value, grads = ast_ad.value_and_grad(pw.loops_over_a_dict_argument)(X, table)
    assert value == pw.loops_over_a_dict_argument(X, table)
    assert_fd(pw.loops_over_a_dict_argument, (X, table), (0,), (grads,))
    table = {1: 2.0, 0: -3.0, 2: 0.5}
    value, (gx, gt) = ast_ad.value_and_grad(pw.loops_over_a_dict_argument, (0, 1))(X, table)
    assert value == pw.loops_over_a_dict_argument(X, table)
    assert list(gt) == list(table)
    direction = {1: 0.7, 0: -0.2, 2: 1.1}
    value_f, tangent = ast_ad.jvp(pw.loops_over_a_dict_argument, (X, table), (T, direction))
    assert value_f == value
    assert tangent == pytest.approx(gx @ T + sum(gt[k] * direction[k] for k in table))
    value, grads = ast_ad.value_and_grad(pw.loops_over_a_set_argument)(X, {2, 0})
    assert value == pw.loops_over_a_set_argument(X, {2, 0})
    assert_same((grads,), ast_ad.tracer.grad(pw.loops_over_a_set_argument, (0,))(X, {2, 0}))
    params = {"b": np.array([0.5, 1.0, 2.0]), "a": np.array([1.5, -1.0, 0.3])}
    value, grads = ast_ad.value_and_grad(pw.loops_over_named_layers)(params, X)
    assert value == pw.loops_over_named_layers(params, X)
    (traced,) = ast_ad.tracer.grad(pw.loops_over_named_layers, (0,))(params, X)
    assert list(grads) == list(params)
    assert all(np.allclose(grads[k], traced[k], rtol=1e-12) for k in params)
    value_f, tangent = ast_ad.jvp(
        pw.loops_over_named_layers, (params, X), ({"b": T, "a": T}, np.zeros(3))
    )
    assert value_f == value
    assert tangent == pytest.approx(np.dot(grads["b"], T) + np.dot(grads["a"], T))


def test_a_helper_given_a_dict_the_caller_made_steps_through_its_keys() -> None:
    """A dict the function makes and passes to a helper of its own that loops over it: the helper
    was made for a tuple or a list (every container argument was labelled one), so it read the
    dict by position, and ``k`` took the values 0, 0, 1 for the keys 1, 0, 2 (a wrong number, on
    main before: 1.16 for Python's 5.0, and its gradient). A name every binding of which makes a
    dict (a display, a write into it, ``kinds.DICT``) is labelled a dict for the helper. Python's
    value to the bit, the gradient against the tracer, forward mode against it."""
    fun = pw.passes_a_dict_it_made_to_a_helper
    value, grads = ast_ad.value_and_grad(fun)(X)
    assert value == fun(X)
    assert_same((grads,), ast_ad.tracer.grad(fun, (0,))(X))
    value_f, tangent = ast_ad.jvp(fun, (X,), (T,))
    assert value_f == value and tangent == pytest.approx(grads @ T)
    for fun in (pw.passes_a_set_it_made_to_a_helper, pw.loops_over_a_dict_a_helper_wrote_into,
                pw.loops_over_a_dict_a_helper_returned):
        value, grads = ast_ad.value_and_grad(fun)(X)
        assert value == fun(X)
        assert_same((grads,), ast_ad.tracer.grad(fun, (0,))(X))
        assert ast_ad.jvp(fun, (X,), (T,))[1] == pytest.approx(grads @ T)


def test_a_helper_given_a_container_of_a_kind_not_known_refuses_a_dict_at_its_loop() -> None:
    """A dict out of a list argument, passed to a helper that loops over it: the helper is made
    for a list, a tuple or a dict, and refuses a dict at its loop's line, saying what to write
    (it was made for a list, and read the dict by position: 0.27 for Python's 4.7, on main
    before); given a list there, it is exact."""
    fun = pw.passes_a_dict_from_a_list_to_a_helper
    line = marked_line(pw._weighted_by_key, "for k in table")
    with pytest.raises(errors.UnsupportedDerivativeError, match=r"list\(\.\.\.\)") as info:
        ast_ad.grad(fun)(X, [{1: 0, 0: 0, 2: 0}])
    assert info.value.lineno == line
    value, grads = ast_ad.value_and_grad(fun)(X, [[0, 1, 2]])
    assert value == fun(X, [[0, 1, 2]])
    assert_same((grads,), ast_ad.tracer.grad(fun, (0,))(X, [[0, 1, 2]]))


def test_a_dict_arguments_keys_replace_only_the_loops_own_reads() -> None:
    """``table[i]`` with ``i`` the user's (an ``enumerate`` count, a ``range`` loop's variable) is
    a read by key: only the loop's read of its item by its own position steps through the keys (a
    ``range`` loop's reads were once taken for it: 2.5 for Python's -0.5)."""
    table = {2: 0.5, 0: -1.5, 1: 0.25}
    fun = pw.reads_a_dict_argument_by_key_and_by_loop
    value, (gx, gt) = ast_ad.value_and_grad(fun, (0, 1))(X, table)
    assert value == fun(X, table)
    assert_fd(fun, (X, table), (0,), (gx,))
    value_f, tangent = ast_ad.jvp(fun, (X, table), (T, dict.fromkeys(table, 0.0)))
    assert value_f == value and tangent == pytest.approx(gx @ T)


def test_a_loop_over_a_dict_known_only_when_it_runs_is_refused_at_its_line() -> None:
    """A dict read out of a list argument: what ``tables[0]`` holds is known only when the loop
    runs, where ``loop_length`` refuses it, at the loop's line, saying what to write; ``list(...)``
    of it is exact."""
    tables = [{1: 2.0, 0: -3.0}]
    line = marked_line(pw.loops_over_a_dict_in_a_list, "# a dict")
    for run in (lambda: ast_ad.grad(pw.loops_over_a_dict_in_a_list)(X, tables),
                lambda: ast_ad.jvp(functools.partial(pw.loops_over_a_dict_in_a_list,
                                                     tables=tables), (X,), (T,))):
        with pytest.raises(errors.UnsupportedDerivativeError, match=r"list\(\.\.\.\)") as info:
            run()
        assert info.value.lineno == line and "a dict" in str(info.value)
    table = {1: 2.0, 0: -3.0}
    value, grads = ast_ad.value_and_grad(pw.loops_over_the_keys_of_a_dict_argument)(X, table)
    assert value == pw.loops_over_the_keys_of_a_dict_argument(X, table)
    assert np.array_equal(grads, [-3.0, 2.0, 0.0])


def test_a_helper_of_another_module_reads_its_names_and_its_arguments_the_callers() -> None:
    """Both modules have a ``SCALE``: the call's argument reads this one's (7), the helper's body
    its own (3); once the argument read the helper's module's."""
    value, grads = ast_ad.value_and_grad(pw.passes_its_global_to_a_helper_of_another_module)(X)
    assert value == pw.passes_its_global_to_a_helper_of_another_module(X.copy())
    assert np.array_equal(grads, np.full(3, 21.0))


def test_a_float_key_computed_from_the_inputs_is_refused_where_it_is_read_or_written() -> None:
    """``table[k]`` with ``k`` a float computed from ``x``: a lookup at it has no derivative (zero
    would be an approximation), so both modes refuse at its line, never saying to register
    ``operator.getitem``; so is a write at such a key (forward mode once gave the key, handed back
    by ``list(table)``, no tangent: 3.0 for Python's slope 6.0). A key that is a string or an
    integer (a dict's keys, listed) carries none, and passes (``lists_the_keys_of_a_dict``)."""
    for fun in (pw.key_from_the_input, pw.key_written_from_the_input):
        for run in (lambda f=fun: ast_ad.grad(f)(X), lambda f=fun: ast_ad.jvp(f, (X,), (T,))):
            with pytest.raises(errors.UnsupportedDerivativeError) as info:
                run()
            assert "key that is a float computed from the differentiated inputs" in str(info.value)
            assert "register" not in str(info.value)
            assert info.value.lineno == marked_line(fun, "# key")


def test_a_loop_over_an_iterator_argument_is_refused_at_its_line() -> None:
    """An iterator has no length to count the loop's steps by: refused at the loop's line, saying
    what to write (it raised ``len()``'s TypeError from the generated code)."""
    with pytest.raises(errors.UnsupportedDerivativeError, match=r"an iterator") as info:
        ast_ad.grad(pw.loops_over_an_iterator)(X, (v for v in [1.0, 2.0]))
    assert info.value.lineno == marked_line(pw.loops_over_an_iterator, "# an iterator")


def test_a_loop_lowered_over_keys_that_finds_a_list_is_refused_at_its_line() -> None:
    """The lowering knew ``table`` a dict where the loop is written; the next step binds it to a
    list, whose items (differentiated) a loop over keys would read without their gradients: refused
    at the loop's line when it happens, never a gradient without them."""
    fun = pw.loops_over_a_name_bound_to_a_dict_then_a_list
    with pytest.raises(errors.UnsupportedDerivativeError, match="loop over list") as info:
        ast_ad.grad(fun)(X)
    assert info.value.lineno == marked_line(fun, "# keys, then items")


@pytest.mark.parametrize("fun, marker", [
    (pw.loops_over_a_list_then_a_dict, "# items, then keys"),
    (pw.loops_over_a_list_or_a_dict, "# a dict on one path"),
])
def test_a_name_that_is_a_list_on_one_step_or_path_is_not_read_by_position_on_another(
        fun, marker) -> None:
    """A loop's body, or one branch, binds the name to a dict: a kind of container is known only
    where every binding that reaches the read gives it (once the list's kind, from the first step
    or the last branch lowered, read the dict by position: 10.5 for Python's 5.5). Where it is a
    dict the loop is refused at its line, saying to loop over ``list(...)`` of it, which is exact
    (``loops_over_the_list_of_a_list_or_a_dict``); where it is a list, exact."""
    for mode in ("reverse", "forward"):
        with pytest.raises(errors.UnsupportedDerivativeError, match="loop over list") as info:
            if mode == "reverse":
                ast_ad.grad(fun)(X)
            else:
                ast_ad.jvp(fun, (X,), (T,))
        assert info.value.lineno == marked_line(fun, marker)
    if fun is pw.loops_over_a_list_or_a_dict:
        value, grads = ast_ad.value_and_grad(fun)(-X)
        assert value == fun(-X)
        assert_fd(fun, (-X,), (0,), (grads,))


def test_an_exported_gradient_refuses_a_dict_loop_as_ast_ad_does(tmp_path) -> None:
    """The exported module copies ``loop_length`` with what it reads (``unsupported_at``, and the
    imports of ``Mapping`` and ``AbstractSet``): it counts a list's items, and refuses a dict at the
    loop's line, as the gradient does (a ``NameError`` before the imports were copied)."""
    import runpy

    path = str(tmp_path / "dict_in_a_list_gradient.py")
    ast_ad.export(ast_ad.grad(pw.loops_over_a_dict_in_a_list), path, X, [[0, 1]])
    namespace = runpy.run_path(path)
    assert namespace["loop_length"]([1.0, 2.0], "here.py:3") == 2
    with pytest.raises((TypeError, errors.UnsupportedDerivativeError), match=r"here\.py:3.*a dict"):
        namespace["loop_length"]({1: 2.0}, "here.py:3")


@pytest.mark.parametrize("fun", [pw.keeps_a_dicts_view, pw.changes_the_dict_as_its_view_is_read])
def test_a_dicts_view_read_later_or_while_it_changes_is_refused(fun) -> None:
    """A view kept, or read while a function of the user's may change the dict, would show what a
    list made at once does not: refused at its line, saying where a view is read."""
    fun(X.copy())
    with pytest.raises(errors.UnsupportedSyntaxError, match=r"taken whole at once") as caught:
        ast_ad.grad(fun)(X.copy())
    assert f"python_written.py, line {marked_line(fun, '# refused here')}" in str(caught.value)
