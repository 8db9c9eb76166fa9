"""Bad input gets an ast_ad exception that names the user's file and line and says what to do
instead."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ast_ad
from ast_ad import errors, transform
from tests import bad_inputs, broken_rule, oracles

U, M, N, L = (errors.UnsupportedSyntaxError, errors.MissingRuleError, errors.NonScalarOutputError,
              errors.LocatedError)
CASES = [
    (bad_inputs.with_match, U, "match"),
    (bad_inputs.with_try, U, "try/except"),
    (bad_inputs.with_with, U, "with blocks"),
    (bad_inputs.with_global, U, "global"),
    (bad_inputs.with_walrus, U, ":="),
    (bad_inputs.with_yield, U, "yield"),
    (bad_inputs.with_class, U, "class"),
    (bad_inputs.with_starred, U, "star-arguments"),
    (bad_inputs.with_attribute_assignment, U, "attribute"),
    (bad_inputs.with_import, U, "import at module level"),
    (bad_inputs.no_return, L, "must end with `return"),
    (bad_inputs.missing_rule, M, "defvjp"),
    (bad_inputs.missing_numpy_rule, M, "np.interp has no gradient rule"),
    (bad_inputs.keyword_active, M, "keyword initial="),
    (bad_inputs.not_scalar, N, "shape (2,)"),
    (bad_inputs.returns_string, N, "returned a str"),
    (bad_inputs.returns_tuple, N, "returned a tuple of 2 values"),
    (bad_inputs.undefined_name, L, "not defined"),
    (bad_inputs.star_args, U, "*args"),
    (bad_inputs.with_delete, L, "used before it is assigned"),
    (bad_inputs.recursive_nested, U, "calls itself"),
    (bad_inputs.pairs_of_differentiated_values, M, "for a, b in zip(xs, ys)"),
    (bad_inputs.next_of_a_generator, U, "assigns the item and breaks"),
    # Python keeps a change of a default for the next call, which a derivative's call would not see
    (bad_inputs.writes_its_default, L, "default value of the parameter buf"),
    (bad_inputs.appends_to_its_default, L, "default value of the parameter seen"),
]


def marked_line(fn) -> int:
    return oracles.marked_line(fn, "# error here")


@pytest.mark.parametrize("fn, kind, words", CASES, ids=[c[0].__name__ for c in CASES])
def test_error_names_the_users_line(fn, kind, words) -> None:
    with pytest.raises(kind) as info:
        ast_ad.grad(fn)(np.array([0.5, 0.25]))
    err = info.value
    assert isinstance(err, errors.ASTADError)
    assert words in str(err)
    assert err.filename == bad_inputs.__file__
    assert err.lineno == marked_line(fn)
    if isinstance(err, SyntaxError):
        assert err.text and "# error here" in err.text and err.offset >= 1
    else:
        assert f"{bad_inputs.__file__}:{err.lineno}:" in str(err)


@pytest.mark.parametrize(
    "value, words",
    [
        ("s", "str"),
        (None, "NoneType"),
        ([1.0, "s"], r"x\[1\]"),
        (np.array([1, 2]), "int64"),
        (True, "bool"),
    ],
)
def test_undifferentiable_arguments(value, words) -> None:
    with pytest.raises(errors.NonDifferentiableArgumentError, match=words) as info:
        ast_ad.grad(bad_inputs.with_try)(value)
    assert "'x" in str(info.value)


@pytest.mark.parametrize("argnums", [1, -1, (0, 0), "x", (), 1.5, True])
def test_bad_argnums(argnums) -> None:
    with pytest.raises(errors.ArgnumsError):
        ast_ad.grad(bad_inputs.with_try, argnums)


@pytest.mark.parametrize("thing, kind", [(np.sin, errors.SourceUnavailableError),
                                         (math.sin, errors.SourceUnavailableError),
                                         (3, errors.ASTADError), ("f", errors.ASTADError)])
def test_things_that_are_not_python_functions(thing, kind) -> None:
    with pytest.raises(kind):
        ast_ad.grad(thing)(1.0)


def test_function_built_by_exec() -> None:
    scope: dict = {}
    exec("def built(x):\n    return x * 2.0\n", scope)  # noqa: S102
    with pytest.raises(errors.SourceUnavailableError, match="exec"):
        ast_ad.grad(scope["built"])(1.0)


def test_unsupported_syntax_error_is_a_syntax_error() -> None:
    with pytest.raises(SyntaxError):
        ast_ad.grad(bad_inputs.with_try)(1.0)


def test_missing_rule_shows_how_to_register() -> None:
    with pytest.raises(
        errors.MissingRuleError, match=r"ast_ad\.extend\.defvjp\(fn, lambda g, ans, x"
    ):
        ast_ad.grad(bad_inputs.missing_rule)(1.0)


def test_non_scalar_output_found_even_when_the_backward_pass_breaks_on_it() -> None:
    with pytest.raises(errors.NonScalarOutputError, match=r"shape \(2, 2\)"):
        ast_ad.grad(bad_inputs.outer)(np.array([0.5, 0.25]))


@pytest.mark.parametrize("fn, module", [(bad_inputs.rule_breaks, bad_inputs),
                                        (bad_inputs.rule_breaks_in_helper, broken_rule)])
def test_a_rule_that_fails_is_reported_at_the_users_line(fn, module) -> None:
    """A function that runs but whose gradient fails names the line whose gradient failed (in its
    own file)."""
    ast_ad.extend.defvjp(broken_rule.doubled, lambda g, ans, x: np.reshape(g, (7, -1)))
    transform.forget()
    try:
        with pytest.raises(errors.GradientFailedError, match="cannot reshape") as info:
            ast_ad.grad(fn)(np.array([0.5, 0.25]))
    finally:
        del ast_ad.core.registry._RULES[broken_rule.doubled]
        transform.forget()
    err = info.value
    assert (err.filename, err.lineno) == (
        module.__file__,
        marked_line(module.helper if module is broken_rule else fn),
    )
    assert isinstance(err.__cause__, ValueError) and "your gradient rule for doubled" in str(err)


def inverse_cube(a):
    return np.sum(np.linalg.matrix_power(a, -3))


def test_a_derivative_refused_for_its_arguments_names_the_users_line() -> None:
    """A helper's refusal (``runtime.refuse_unless``) is an ``UnsupportedDerivativeError`` at the
    user's line, saying what to write instead; it is a ``NotImplementedError`` too, as it was."""
    a = np.eye(2) + 0.1
    with pytest.raises(
        ast_ad.errors.UnsupportedDerivativeError, match="negative exponent: use inv"
    ) as err:
        ast_ad.grad(inverse_cube)(a)
    assert isinstance(err.value, NotImplementedError)
    assert err.value.lineno == inverse_cube.__code__.co_firstlineno + 1
    with pytest.raises(ast_ad.errors.UnsupportedDerivativeError, match="negative exponent"):
        ast_ad.jvp(inverse_cube, (a,), (np.ones((2, 2)),))
