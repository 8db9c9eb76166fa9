"""Every gradient exact or refused: the catalogue of issue 10, one case per way Python's semantics
can be missed.

An exact case returns the function's own value bit for bit and a gradient that agrees with finite
differences (and with the tracer where it follows the construct). A refused case raises the named
ast_ad error at the line marked ``# refused here``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ast_ad
from ast_ad import errors
from tests import trust_cases as c
from tests.oracles import assert_fd, assert_same, marked_line

X = np.array([0.3, 1.7, 2.9])
M = np.array([[0.3, 1.1], [-0.4, 0.8]])
W, B = np.array([[0.5, -0.2], [0.1, 0.3], [-0.6, 0.4]]), np.array([0.1, -0.2, 0.3])

# (function, arguments, argnums, whether the tracer follows it too)
EXACT = [
    (c.swap_after_loop, (np.ones((2, 2)), 1.3, 2.1), (1, 2), True),
    (c.a_list_copy_rebinds_an_item, (X,), (0,), True),
    (c.an_array_copy_written_in_a_loop, (X,), (0,), False),
    (c.swap_in_a_loop, (X,), (0,), True),
    (c.helper_on_scalars, (1.3,), (0,), True),
    (c.repeated_index_write, (X,), (0,), True),
    (c.repeated_index_add, (X,), (0,), True),
    (c.add_at, (X,), (0,), False),
    (c.out_argument, (X,), (0,), False),
    (c.fill_method, (X,), (0,), False),
    (c.sort_method, (np.array([3.0, 1.0, 2.0]),), (0,), False),
    (c.copyto, (X,), (0,), False),
    (c.dict_of_parameters, (W, B, np.array([0.7, -1.2])), (0, 1), True),
    (c.lists_joined, (X,), (0,), True),
    (c.lists_repeated, (X,), (0,), True),
    (c.tuples_joined, (X,), (0,), True),
    (c.lists_extended, (X,), (0,), False),
    (c.modulo, (X,), (0,), True),
    (c.divmod_parts, (2.3,), (0,), True),
    (c.copysign, (1.3,), (0,), True),
    (c.or_value, (1.3,), (0,), True),
    (c.or_value, (0.4,), (0,), True),
    (c.real_and_transposes, (M,), (0,), True),
    (c.namedtuple_fields, (c.Params(np.array([1.0, 2.0]), 3.0), M), (0, 1), True),
    (c.builtin_min_max_pow, (1.3,), (0,), True),
    (c.builtin_min_max_pow, (2.6,), (0,), True),
    (c.fsum_and_float64, (1.3,), (0,), True),
    (c.clip_with_active_bounds, (X, 1.0), (0, 1), True),
    # the tracer takes no keywords
    (c.active_keyword, (X, np.array([1.0, 2.0, 3.0])), (0, 1), False),
    (c.returned_list, (X,), (0,), True),
    (c.append_from_same_list, (X,), (0,), True),
    (c.unused_stacked_output, (X,), (0,), True),
    (
        c.list_of_parameter_dicts,
        ([{"W": W[:2], "b": B[:2]}, {"W": M, "b": B[1:]}], np.array([0.7, -1.2])),
        (0,),
        True,
    ),
    (c.def_inside_loop, (1.3,), (0,), True),
    (c.lambda_passed_to_helper, (1.3,), (0,), True),
    (c.mapped_lambda, (1.3,), (0,), True),
    (c.partial_of_a_primitive, (1.3,), (0,), False),  # the tracer takes no keywords
    (c.methods_of_user_classes, (1.3,), (0,), True),
    (c.version_check, (1.3,), (0,), True),
    (c.nested_item_writes, (X,), (0,), True),
    (c.casts_to_integers, (X,), (0,), True),
    (c.sorted_with_key, (1.3,), (0,), True),
    (c.dict_item_writes, (X,), (0,), True),
    (c.matrix_norms, (np.array([0.3, 1.7, -2.9, 1.1]),), (0,), True),
    (c.list_slices_and_augmented_join, (X,), (0,), True),
    (c.imag_is_zero, (X,), (0,), True),
    (c.float_into_int_array, (X,), (0,), False),  # the tracer does not keep numpy's integer dtype
    (c.closures_over_the_loop_variable, (1.3,), (0,), True),
    # a list of views of an argument, appended to: not a write
    (c.list_of_argument_views, (M,), (0,), True),
    (c.keywords_the_rules_follow, (np.array([0.31, 1.77, 2.93]),), (0,), False),
    (c.clip_by_keyword, (X,), (0,), True),
    (c.a_stack, (X,), (0,), True),
    (c.pop_in_an_expression, (X,), (0,), True),
    (c.a_dropped_pop, (X,), (0,), True),
    (c.a_stack_of_lists, (X,), (0,), True),
    (c.pop_from_a_list_made_in_a_loop, (X,), (0,), True),
    (c.a_dead_alias_then_a_write, (X,), (0,), True),
    (c.zero_adjoint_into_a_product, (X, np.outer(X, X) * 0.1), (0, 1), True),
    (c.sum_between_appends, (X, X * 0.5), (0, 1), True),
    (c.last_item_then_append, (X,), (0,), True),
    (c.a_tape_by_hand, (X,), (0,), True),
    # the wrapper is what runs (the tracer runs it too, unread)
    (c.decorated_square_sum, (X,), (0,), False),
    (c.calls_a_decorated_function, (X,), (0,), True),
]

# (function, arguments, error type)
REFUSED = [
    (c.write_into_an_item_of_a_copied_argument, ([X, 2.0 * X],), errors.InPlaceAliasError),
    (c.negative_base_fractional_power, (2.0,), errors.LocatedError),
    (c.unknown_in_place_method, (X,), errors.UnsupportedSyntaxError),
    (c.unknown_function_for_effect, (X,), errors.UnsupportedSyntaxError),
    (c.flat_read, (X,), errors.UnsupportedSyntaxError),
    (c.unknown_method, (X,), errors.UnsupportedSyntaxError),
    (c.pop_from_a_list_argument, (X, [X, X * 2.0]), errors.LocatedError),
    (c.pop_from_a_copy_of_an_argument, (X, [X, X * 2.0]), errors.LocatedError),
    (c.resize_in_place, (X,), errors.UnsupportedSyntaxError),
    (c.place_in_place, (X,), errors.UnsupportedSyntaxError),
    (c.insert_into_list, (X,), errors.UnsupportedSyntaxError),
    (c.update_a_dict, (X,), errors.UnsupportedSyntaxError),
    (c.list_plus_array, (X,), errors.MissingRuleError),
    (c.helper_writes_into_a_listed_view, (M,), errors.InPlaceAliasError),
    (c.method_hidden_by_an_attribute, (1.5,), errors.UnsupportedSyntaxError),
    (c.times_a_global_matrix, (M,), errors.UnsupportedSyntaxError),
    (c.makes_a_matrix, (M,), errors.UnsupportedSyntaxError),
    (c.sum_where, (X,), errors.UnsupportedSyntaxError),
    (c.reshape_in_fortran_order, (np.array([0.3, 0.5, 0.7, 0.9]),), errors.UnsupportedSyntaxError),
    (
        c.flatten_method_in_fortran_order,
        (np.array([0.3, 0.5, 0.7, 0.9]),),
        errors.UnsupportedSyntaxError,
    ),
    (c.sum_in_integers, (X,), errors.UnsupportedSyntaxError),
    (c.prod_with_initial, (X,), errors.UnsupportedSyntaxError),
    (c.take_wrapping, (X,), errors.UnsupportedSyntaxError),
]


def test_refusal_hints_name_only_functions_that_exist() -> None:
    with pytest.raises(errors.UnsupportedSyntaxError) as info:
        ast_ad.grad(c.unknown_method)(X)
    assert "np.pop" not in str(info.value) and "your own classes" in str(info.value)


def _flatten(value):
    """The arrays of a gradient (a container's leaves), to compare with the tracer's."""
    return [np.asarray(leaf, dtype=float) for _, leaf in _leaves(value)]


def _leaves(value, path=()):
    """(path, leaf) for every number or array inside lists, tuples and dicts."""
    if isinstance(value, dict):
        return [pair for key, item in value.items() for pair in _leaves(item, (*path, key))]
    if isinstance(value, (list, tuple)):
        return [pair for i, item in enumerate(value) for pair in _leaves(item, (*path, i))]
    return [(path, value)]


def _at(value, path):
    for key in path:
        value = value[key]
    return value


def _replace(value, path, new):
    if not path:
        return new
    if isinstance(value, dict):
        return {**value, path[0]: _replace(value[path[0]], path[1:], new)}
    parts = list(value)
    parts[path[0]] = _replace(parts[path[0]], path[1:], new)
    return type(value)(*parts) if hasattr(value, "_fields") else type(value)(parts)


def _copies(args):
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


@pytest.mark.parametrize(
    "fn, args, argnums, traced", EXACT, ids=[f"{e[0].__name__}-{i}" for i, e in enumerate(EXACT)]
)
def test_exact(fn, args, argnums, traced) -> None:
    value, grads = ast_ad.value_and_grad(fn, argnums)(*_copies(args))
    assert value == fn(*_copies(args))  # bit for bit
    for k, g in zip(argnums, grads, strict=True):
        for path, leaf in _leaves(args[k]):  # a container: each leaf against finite differences
            def moved(v, k=k, path=path):
                call = list(_copies(args))
                call[k] = _replace(args[k], path, v)
                return fn(*call)
            assert_fd(moved, (leaf,), (0,), (_at(g, path),))
    if traced:
        assert_same(_flatten(grads), _flatten(ast_ad.tracer.grad(fn, argnums)(*_copies(args))))


def _marked_line(fn) -> int:
    return marked_line(fn, "# refused here")


@pytest.mark.parametrize("fn, args, kind", REFUSED, ids=[r[0].__name__ for r in REFUSED])
def test_refused_at_the_users_line(fn, args, kind) -> None:
    with pytest.raises(kind) as info:
        ast_ad.grad(fn)(*args)
    err = info.value
    line = _marked_line(fn)
    if isinstance(err, (SyntaxError, errors.LocatedError)):
        assert (err.filename, err.lineno) == (c.__file__, line)
    else:
        assert f"{c.__file__}:{line}:" in str(err)


def test_an_in_place_update_through_two_names_is_exact_in_both_modes_and_on_numbers() -> None:
    """``v = x; x += d; v += d``: on an array, both names are one object, which Python changes
    twice, and the memory model follows it (once refused, and before that the value of one update).
    On a float, ``+=`` makes a new number, which the other name does not see."""
    fn = c.augmented_through_two_names
    value, grads = ast_ad.value_and_grad(fn)(np.zeros(3))
    assert value == fn(np.zeros(3)) == 6 * np.sin(0.5)
    np.testing.assert_array_equal(grads, np.ones(3))
    assert ast_ad.jvp(fn, (np.zeros(3),), (np.ones(3),)) == (value, 3.0)
    value, slope = ast_ad.value_and_grad(fn)(0.25)
    assert value == fn(0.25) and slope == 1.0
    assert ast_ad.jvp(fn, (0.25,), (1.0,)) == (value, 1.0)


# once refused: another name, a view or a list's slot sees the write; the memory model makes it
# again from it
FOLLOWED = [
    (c.write_through_slice, X),
    (c.write_through_list_alias, X),
    (c.nested_write_through_alias, X),
    (c.view_inside_expression, X),
    (c.write_through_loop_row, M),
    (c.helper_changes_argument, X),
    (c.helper_changes_argument_used, X),
    (c.helper_changes_an_item_of_its_argument, X),
    (c.write_through_reshape, X),
    (c.write_through_transpose, X),
    (c.write_through_asarray, X),
    (c.append_through_alias, X),
    (c.write_into_an_unpacked_item, X),
    (c.write_into_what_a_helper_returned, X),
    (c.write_through_a_later_copy, X),
    (c.write_through_a_later_swap, X),
]
FOLLOWED += [
    (getattr(c, name), X)
    for name in (  # written through shallow copies of containers
        "write_into_an_item_of_a_list_copy",
        "write_into_an_item_of_a_tuple_copy",
        "write_into_an_item_of_a_copied_list",
        "write_into_an_item_of_joined_lists",
        "write_into_an_item_of_a_repeated_list",
        "write_into_an_item_of_a_dict_copy",
        "write_into_an_item_of_a_copied_dict",
        "write_into_an_item_of_a_sorted_list",
        "add_into_an_item_another_name_holds",
        "add_into_an_item_of_a_list_copy",
        "a_cast_that_may_not_copy",
    )
]


@pytest.mark.parametrize("fn, x", FOLLOWED, ids=[f.__name__ for f, _ in FOLLOWED])
def test_a_write_that_another_name_sees_is_followed(fn, x) -> None:
    value, grads = ast_ad.value_and_grad(fn)(x.copy())
    assert value == fn(x.copy())
    assert_fd(lambda v: fn(v.copy()), (x,), (0,), (grads,))
    value_f, tangent = ast_ad.jvp(fn, (x.copy(),), (np.ones_like(x),))
    assert value_f == value and tangent == pytest.approx(np.sum(grads), rel=1e-12)


def test_a_decorators_wrapper_is_what_is_differentiated() -> None:
    """A function made by a decorator is differentiated as Python runs it, wrapper included (the
    function it names in ``__wrapped__`` once stood in for it: half the gradient of
    ``decorated_square_sum``). A wrapper outside the language is refused at its own line, saying
    what to write."""
    assert ast_ad.grad(c.decorated_square_sum)(X) == pytest.approx(4.0 * X)
    with pytest.raises(
        errors.UnsupportedSyntaxError,
        match="decorator's wrapper of decorated_by_a_star_wrapper.*__wrapped__",
    ) as info:
        ast_ad.grad(c.decorated_by_a_star_wrapper)(X)
    wrapper = c.decorated_by_a_star_wrapper
    assert (info.value.filename, info.value.lineno) == (
        c.__file__,
        wrapper.__code__.co_firstlineno + 1,
    )
    assert "# refused here" in info.value.text
    # once differentiated as the function it names
    with pytest.raises(errors.UnsupportedSyntaxError) as info:
        ast_ad.grad(c.halved_square_sum)(X)
    assert (info.value.filename, info.value.lineno) == (
        c.__file__,
        marked_line(c.Halved.__call__, "# refused here"),
    )
    assert ast_ad.value_and_grad(c.cached_cube)(1.5) == (3.375, 6.75)


@pytest.mark.parametrize("kind", ["matrix", "masked"])
def test_array_subclasses_whose_operators_differ_are_refused(kind) -> None:
    """np.matrix (``*`` a matrix product) and masked arrays (masked entries left out): once
    differentiated with the rules of numpy arrays (a wrong gradient, silently); refused as
    arguments, differentiated or not."""
    with warnings.catch_warnings():
        # np.matrix is what this test is about
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        given = np.matrix([[1.0, 2.0], [3.0, 4.0]]) if kind == "matrix" else \
            np.ma.array([[1.0, 2.0], [3.0, 4.0]], mask=[[0, 1], [0, 0]])

    def product_sum(a, b):
        return np.sum(a * b)
    with pytest.raises(errors.NonDifferentiableArgumentError, match="np.matrix and masked arrays"):
        ast_ad.grad(product_sum)(given, np.asarray(given))
    with pytest.raises(errors.NonDifferentiableArgumentError, match="argument 1"):
        ast_ad.grad(product_sum)(np.asarray(given), given)
    with pytest.raises(errors.NonDifferentiableArgumentError):
        ast_ad.jvp(product_sum, (given, np.asarray(given)), (np.ones((2, 2)), None))


def test_a_memory_mapped_array_is_a_numpy_array(tmp_path) -> None:
    mapped = np.memmap(tmp_path / "x.dat", dtype=float, mode="w+", shape=(3,))
    mapped[:] = [1.0, 2.0, 3.0]
    assert np.array_equal(ast_ad.grad(lambda x: np.sum(x * x))(mapped), [2.0, 4.0, 6.0])


def _masked_total(x, where=None):
    return np.sum(x if where is None else x * where)


ast_ad.extend.defvjp(
    _masked_total, lambda g, ans, x, where=None: g * (np.ones_like(x) if where is None else where)
)


def _uses_masked_total(x):
    return _masked_total(x * x, where=np.array([1.0, 0.0, 1.0]))


def test_a_users_own_rule_follows_the_keywords_its_author_names() -> None:
    """numpy's where= is refused for numpy's functions; a user's primitive with a where= of its own
    meaning, named by its rule, is differentiated as the rule says."""
    assert ast_ad.grad(_uses_masked_total)(X) == pytest.approx(np.array([2.0, 0.0, 2.0]) * X)


def test_a_cast_to_complex_is_followed() -> None:
    """A cast to a complex dtype written in the function makes the value complex, and the rules of
    complex numbers follow it: |sqrt(x)| is sqrt(|x|) on both sides of 0."""
    def rotated(x):
        return np.sum(np.abs(x.astype("complex128") ** 0.5))
    x = np.array([-1.0, 2.0])
    assert ast_ad.grad(rotated)(x) == pytest.approx(np.sign(x) * 0.5 / np.sqrt(np.abs(x)))


def test_complex_values_it_cannot_see_made_are_refused_not_cast_to_real() -> None:
    """A complex value made where ast_ad cannot tell (a dtype passed in as an argument) is computed
    with the rules of real numbers; its gradient reaches the real argument complex, and is refused
    rather than cast to real."""
    def rotated(x, dtype):
        return np.sum(np.abs(x.astype(dtype) ** 0.5))
    with pytest.raises(errors.ASTADError, match="complex value reached the gradient of a real"):
        ast_ad.grad(rotated)(np.array([-1.0, 2.0]), np.complex128)


@pytest.mark.parametrize("fn, args", [(c.complex_literal, (X,)), (c.complex_fft, (X,)),
                                      (c.complex_global, (1.3,))])
def test_complex_intermediates_of_real_functions(fn, args) -> None:
    """Complex values inside a real function (a phase, a spectrum, a complex global): Python's
    value, and the gradient of finite differences."""
    value, grad = ast_ad.value_and_grad(fn)(*args)
    assert value == fn(*args)
    assert_fd(fn, args, (0,), (grad,))


def test_nondiff_declarations_are_piecewise_constant() -> None:
    """Audit: every function declared without a gradient has derivative zero almost everywhere.

    A function is probed at random points with finite differences; any non-zero slope is a dropped
    gradient.
    """
    rng = np.random.default_rng(0)
    for rule in ast_ad.core.registry.registered():
        # their values are whatever memory held (a stand-in's: read for its shape and dtype only)
        if not rule.nondiff or rule.fn in (np.empty, np.empty_like, ast_ad.runtime.stand_in):
            continue
        for x in rng.uniform(0.3, 2.7, 5):
            try:
                lo, hi = rule.fn(x - 1e-7), rule.fn(x + 1e-7)
                slope = (np.asarray(hi, dtype=float) - np.asarray(lo, dtype=float)) / 2e-7
            except Exception:  # noqa: BLE001  (takes no float: shapes, constructors, guards)
                break
            assert np.all((slope == 0) | (np.abs(slope) > 1e6)), (rule.fn, x, slope)


# ---- 6. source that is not the code Python runs --------------------------------------------------
def _module(path, text: str):
    import importlib.util
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_file_edited_after_import_is_refused(tmp_path) -> None:
    import linecache
    module = _module(tmp_path / "edited_model.py", "def f(x):\n    return x * 2.0\n")
    (tmp_path / "edited_model.py").write_text("def f(x):\n    return x * 3.0\n")
    linecache.checkcache()
    with pytest.raises(errors.SourceUnavailableError, match="not the code Python runs"):
        ast_ad.grad(module.f)(1.0)


def test_a_function_compiled_under_another_files_name_is_refused(tmp_path) -> None:
    _module(tmp_path / "named_model.py", "def f(x):\n    return x * 2.0\n")
    scope: dict = {}
    exec(
        compile("def q(x):\n    return x * 9.0\n", str(tmp_path / "named_model.py"), "exec"), scope
    )  # noqa: S102
    with pytest.raises(errors.SourceUnavailableError, match="not the code Python runs"):
        ast_ad.grad(scope["q"])(1.0)


def test_a_replaced_code_object_is_read_from_where_it_was_written() -> None:
    def doubled(x):
        return x * 2.0

    def tripled(x):
        return x * 3.0
    doubled.__code__ = tripled.__code__
    assert ast_ad.grad(doubled)(1.0) == 3.0


def test_unchanged_methods_and_closures_are_read() -> None:
    """The check compiles the whole file, so methods (mangled names) and closures match what
    runs."""
    assert ast_ad.grad(c.Scaled(3.0).apply)(2.0) == 3.0
    assert ast_ad.grad(c.scaler(4.0))(2.0) == 4.0


# ---- 7. calling conventions and exceptions -------------------------------------------------------
def test_parameters_bind_as_python_binds_them() -> None:
    assert ast_ad.grad(c.conventions, (0, 1))(1.0, 2.0, z=3.0) == (6.0, 3.0)
    assert ast_ad.grad(c.conventions)(1.0, y=2.0) == 4.0
    with pytest.raises(TypeError, match="positional arguments but 3 were given"):
        ast_ad.grad(c.conventions)(1.0, 2.0, 3.0)
    with pytest.raises(TypeError, match="positional-only"):
        ast_ad.grad(c.conventions)(x=1.0, y=2.0)


@pytest.mark.parametrize(
    "fn, kind", [(c.divides_by_zero, ZeroDivisionError), (c.fails_assert, AssertionError)]
)
def test_the_users_exception_comes_from_the_users_line(fn, kind) -> None:
    import traceback
    with pytest.raises(kind) as info:
        ast_ad.grad(fn)(1.0)
    frames = traceback.extract_tb(info.value.__traceback__)
    assert (frames[-1].filename, frames[-1].lineno) == (
        c.__file__,
        marked_line(fn, "# raises here"),
    )


def test_async_functions_are_refused() -> None:
    with pytest.raises(errors.UnsupportedSyntaxError, match="async") as info:
        ast_ad.grad(c.coroutine)(1.0)
    assert (info.value.filename, info.value.lineno) == (c.__file__, _marked_line(c.coroutine))


def test_a_function_typed_at_the_313_prompt_is_read() -> None:
    """Python 3.13's prompt keeps each input in linecache as ``<python-input-N>``; ast_ad reads it
    there."""
    import linecache
    text = "def typed(x):\n    return x * x * 3.0\n"
    name = "<python-input-ast-ad-test>"
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    scope: dict = {}
    exec(compile(text, name, "exec"), scope)  # noqa: S102 -- what the prompt does with an input
    assert ast_ad.grad(scope["typed"])(2.0) == 12.0


def test_a_function_named_like_a_helper_is_taken_for_it_only_with_its_code(tmp_path) -> None:
    """A copy of ast_ad's helper (an exported module's) takes the helper's rules; a function of the
    user's that only shares its name is the user's own (``normalize.helper_twin`` compares the
    code)."""
    import inspect

    from ast_ad import runtime
    from ast_ad.frontend import normalize

    own = _module(tmp_path / "own_unbroadcast.py",
                  "import numpy as np\n\n\ndef unbroadcast(g, x):\n    return 2.0 * g * x\n\n\ndef "
                  "f(x):\n    return unbroadcast(x, x)\n")
    assert normalize.helper_twin(own.unbroadcast) is own.unbroadcast
    assert ast_ad.grad(own.f)(1.5) == pytest.approx(4 * 1.5)
    copy = _module(
        tmp_path / "copied_unbroadcast.py",
        "from typing import Any\n\nimport numpy as np\n\n\n"
        + inspect.getsource(runtime.unbroadcast),
    )
    assert normalize.helper_twin(copy.unbroadcast) is runtime.unbroadcast
