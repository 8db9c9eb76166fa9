"""Python as people write it: ``raise``, starred targets, f-strings, calls of a library on numbers; and what is
still refused says what to write instead, in the user's words."""

from __future__ import annotations

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
         pw.value_and_gradient_in_a_body]


@pytest.mark.parametrize("fun", EXACT, ids=[f.__name__ for f in EXACT])
def test_each_is_differentiated_in_both_modes(fun) -> None:
    value, grads = ast_ad.value_and_grad(fun)(X.copy())
    assert value == fun(X.copy())
    if fun not in (pw.local_derivative, pw.value_and_gradient_in_a_body):  # (the tracer runs no derivative)
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
    """Run as written on numbers; where the gradient must go through it, its source is outside the language."""
    with pytest.raises(errors.ASTADError) as info:
        ast_ad.grad(pw.differentiates_scipy)(X)
    assert f"python_written.py:{marked_line(pw.differentiates_scipy, '# scipy')}" in str(info.value) \
        or getattr(info.value, "lineno", None) == marked_line(pw.differentiates_scipy, "# scipy")


def test_a_class_of_the_users_is_not_told_to_register_a_rule() -> None:
    with pytest.raises(errors.MissingRuleError) as info:
        ast_ad.grad(pw.builds_an_object)(X)
    said = str(info.value)
    assert "class of yours" in said and "register" not in said


@pytest.mark.parametrize(("source", "said"), [
    ("def f(x):\n    return g(*x)\n", "star-arguments (f(*args))"),
    ("def f(x):\n    return sum([*x, 1.0])\n", "unpacking with * in a list or tuple"),
    ("def f(x):\n    h = [lambda t: t * t]\n    return h[0](x)\n", "define it with def"),
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
