"""The public API: grad, value_and_grad, source, extend, check_grads, and what users rely on around
them."""

from __future__ import annotations

import inspect
import linecache
import math
import os
import subprocess
import sys
import tempfile
import traceback

import numpy as np
import pytest

import ast_ad
from ast_ad import transform
from ast_ad.analysis.kinds import axis_id, labelled
from ast_ad.backend import load
from ast_ad.errors import NonDifferentiableArgumentError
from tests import api_functions as fx

Y, DX1, DX2 = 6.552027172500, 3.5, 2.989992496600
IMPORT_STYLES = [fx.worked, fx.worked_numpy, fx.worked_from_import, fx.worked_alias, fx.worked_math,
                 fx.worked_math_aliases]


@pytest.mark.parametrize("fn", IMPORT_STYLES, ids=lambda f: f.__name__)
def test_worked_example_through_every_import_style(fn) -> None:
    value, (dx1, dx2) = ast_ad.value_and_grad(fn, argnums=(0, 1))(2.0, 3.0)
    assert round(float(value), 12) == Y
    assert round(dx1, 12) == DX1 and round(dx2, 12) == DX2
    assert round(ast_ad.grad(fn)(2.0, 3.0), 12) == DX1
    assert round(ast_ad.grad(fn, 1)(2.0, 3.0), 12) == DX2


def test_worked_example_generated_source_sums_both_paths_into_x2() -> None:
    df = ast_ad.grad(fx.worked, (0, 1))
    df(2.0, 3.0)
    text = ast_ad.source(df)
    # the two paths from x2 to the value, through sin and through the product, added in one line
    assert "    x2_bar = -out_bar * np.cos(x2) + out_bar * x1\n" in text
    # the forward pass as the user wrote it
    assert "    out = np.log(x1) + x1 * x2 - np.sin(x2)\n" in text
    assert text.startswith("def worked_vjp(x1, x2, out_bar=1.0):")


def test_decorator_forms() -> None:
    assert fx.decorated(3.0) == 12.0
    assert fx.decorated_argnums(2.0, 3.0) == 12.0


def test_gradient_has_the_arguments_type_shape_and_dtype() -> None:
    assert type(ast_ad.grad(fx.worked)(2.0, 3.0)) is float
    # an integer is fine where it is not differentiated
    assert type(ast_ad.grad(fx.worked)(2.0, 3)) is float
    x = np.array([[1.0, 2.0]], dtype=np.float32)
    g = ast_ad.grad(fx.uses_global)(np.ones(3, dtype=np.float32))
    assert g.dtype == np.float32 and g.shape == (3,)
    g = ast_ad.grad(fx.mutating_looking)(x)
    assert g.dtype == np.float32 and g.shape == (1, 2)
    assert isinstance(ast_ad.grad(fx.worked)(np.float32(2.0), 3.0), np.float32)


def test_integers_are_refused_alike_as_scalars_and_arrays() -> None:
    """Their derivative is not defined: a scalar and an array of integers get the same refusal."""
    for value in (2, np.int64(2), np.array([1, 2])):
        with pytest.raises(
            NonDifferentiableArgumentError, match=r"an integer .*pass a float \(3.0, not 3\)"
        ):
            ast_ad.grad(fx.uses_global)(value)


def test_value_and_grad_value_is_the_functions_own() -> None:
    x = np.array([0.3, 0.4, 0.5])
    value, _ = ast_ad.value_and_grad(fx.uses_global)(x)
    assert value == fx.uses_global(x)


def test_keywords_and_defaults() -> None:
    assert ast_ad.grad(fx.with_defaults)(2.0) == 6.0
    assert ast_ad.grad(fx.with_defaults, 1)(2.0, y=5.0, k=1.0) == 2.0
    assert ast_ad.grad(fx.with_defaults)(x=2.0, k=4.0) == 12.0


def test_methods_lambdas_closures() -> None:
    assert ast_ad.grad(fx.Model(1.0).loss)(2.0) == 12.0
    assert ast_ad.grad(lambda x: x ** 3)(2.0) == 12.0
    square = lambda x: x * x  # noqa: E731
    assert ast_ad.grad(square)(5.0) == 10.0
    assert math.isclose(ast_ad.grad(fx.make_scaled(3.0))(0.5), 3.0 * math.cos(0.5))
    assert math.isclose(ast_ad.grad(fx.make_scaled(5.0))(0.5), 5.0 * math.cos(0.5))


def test_user_functions_are_differentiated_with_keywords_and_defaults() -> None:
    # callee(x) = 2x, callee(x, b=x) = x^2, callee(b=3, a=x) = 3x
    assert ast_ad.grad(fx.caller)(1.5) == 2.0 + 2 * 1.5 + 3.0
    assert "callee_bwd" in ast_ad.source(ast_ad.grad(fx.caller))


def test_registered_user_primitive_is_used_by_transformer_and_tracer() -> None:
    x = np.array([-1.0, 0.0, 2.0])
    expected = 2.0 / (1.0 + np.exp(-x))
    before = fx.calls["n"]
    np.testing.assert_allclose(ast_ad.grad(fx.uses_softplus)(x), expected)
    np.testing.assert_allclose(ast_ad.tracer.grad(fx.uses_softplus)(x), expected)
    # a def rule with side effects is called, not inlined... twice
    assert fx.calls["n"] == before + 2
    text = ast_ad.source(ast_ad.grad(fx.uses_softplus))
    assert "softplus(x)" in text and "softplus_bwd" not in text


def test_def_nondiff() -> None:
    assert ast_ad.grad(fx.uses_step)(2.0) == 3.0
    assert ast_ad.grad(fx.uses_step)(-2.0) == 0.0


def test_changed_global_is_read_again() -> None:
    x = np.array([0.1, 0.2, 0.3])
    df = ast_ad.grad(fx.uses_global)
    np.testing.assert_allclose(df(x), fx.BIAS * fx.SCALE)
    old = fx.BIAS
    try:
        fx.BIAS = np.array([5.0, 6.0, 7.0])
        np.testing.assert_allclose(df(x), fx.BIAS * fx.SCALE)
    finally:
        fx.BIAS = old


def test_the_scalar_fast_path_rereads_globals_and_follows_the_last_call(
    tmp_path, monkeypatch
) -> None:
    """A gradient called with floats again skips the general path, and still reads each global again
    (a number, a function), shows the code of its last call, and is rebuilt when its cache is
    emptied."""
    (tmp_path / "fast_path.py").write_text("import numpy as np\n\nRATE = 2.0\n\n\ndef step(a):\n   "
                                           " return a * a\n\n\ndef f(x, y):\n    return RATE * "
                                           "np.sum(step(x)) * y + np.sin(y)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import fast_path

    df = ast_ad.grad(fast_path.f, (0, 1))
    assert df(1.5, 0.5) == df(1.5, 0.5) == (2.0 * 2 * 1.5 * 0.5, 2.0 * 1.5 ** 2 + math.cos(0.5))
    monkeypatch.setattr(fast_path, "RATE", 3.0)
    assert df(1.5, 0.5)[0] == 3.0 * 2 * 1.5 * 0.5
    monkeypatch.setattr(fast_path, "step", lambda a: a * a * a)
    assert df(1.5, 0.5)[0] == 3.0 * 3 * 1.5 ** 2 * 0.5
    arrays = df(np.array([1.5, 2.0]), 0.5)
    np.testing.assert_allclose(arrays[0], 3.0 * 3 * np.array([1.5, 2.0]) ** 2 * 0.5)
    # ast_ad.source(df) shows this last call's code
    assert df.last_shapes == (labelled(0, np.zeros(2), (axis_id(0, 0),)), -1)
    assert df(1.5, 0.5)[0] == 3.0 * 3 * 1.5 ** 2 * 0.5  # floats again: the general path, once
    assert df.last_shapes == (-1, -1)
    assert df(1.5, 0.5)[0] == 3.0 * 3 * 1.5 ** 2 * 0.5
    built = transform.counts["built"]
    transform.forget()
    assert df(1.5, 0.5)[0] == 3.0 * 3 * 1.5 ** 2 * 0.5
    assert transform.counts["built"] + transform.counts["fetched"] > built


def test_the_scalar_fast_path_of_jvp_rereads_globals(tmp_path, monkeypatch) -> None:
    """jvp with floats only, again: the module of the last such call, while nothing it reads has
    changed."""
    (tmp_path / "fast_jvp.py").write_text("import math\n\nRATE = 2.0\n\n\ndef f(x, y):\n    return "
                                          "RATE * x * y + math.sin(y)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import fast_jvp

    expected = (
        2.0 * 1.5 * 0.5 + math.sin(0.5),
        2.0 * 0.5 * 1.0 + (2.0 * 1.5 + math.cos(0.5)) * 2.0,
    )
    assert (
        ast_ad.jvp(fast_jvp.f, (1.5, 0.5), (1.0, 2.0))
        == ast_ad.jvp(fast_jvp.f, (1.5, 0.5), (1.0, 2.0))
        == pytest.approx(expected, rel=1e-15)
    )
    monkeypatch.setattr(fast_jvp, "RATE", 3.0)
    assert ast_ad.jvp(fast_jvp.f, (1.5, 0.5), (1.0, 2.0))[1] == pytest.approx(
        3.0 * 0.5 + (3.0 * 1.5 + math.cos(0.5)) * 2.0, rel=1e-15
    )
    monkeypatch.setattr(fast_jvp, "math", np)  # a module it reads, rebound: transformed again
    assert ast_ad.jvp(fast_jvp.f, (1.5, 0.5), (1.0, 2.0))[0] == pytest.approx(
        3.0 * 0.75 + np.sin(0.5), rel=1e-15
    )
    # an int tangent, None: the general path
    assert ast_ad.jvp(fast_jvp.f, (1.5, 0.5), (1, None))[1] == 3.0 * 0.5


def test_redefined_callee_is_transformed_again(tmp_path, monkeypatch) -> None:
    (tmp_path / "calls_v1.py").write_text("def callee(a):\n    return a * 2.0\n\n\ndef "
                                          "caller(x):\n    return callee(x) * x\n")
    (tmp_path / "calls_v2.py").write_text("def callee(a):\n    return a * 20.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import calls_v1
    import calls_v2
    df = ast_ad.grad(calls_v1.caller)
    assert df(1.5) == 6.0
    calls_v1.callee = calls_v2.callee
    assert df(1.5) == 60.0


def test_hygiene_names_that_look_generated() -> None:
    args = (0.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0)
    ours = ast_ad.grad(fx.unhygienic, tuple(range(7)))(*args)
    theirs = ast_ad.tracer.grad(fx.unhygienic, tuple(range(7)))(*args)
    np.testing.assert_allclose(ours, theirs)
    assert ast_ad.grad(fx.shadowing, (0, 1))(3.0, 2.0) == (4.0, 12.0)


def test_arguments_are_not_modified() -> None:
    x = np.array([1.0, 2.0])
    keep = x.copy()
    ast_ad.grad(fx.mutating_looking)(x)
    np.testing.assert_array_equal(x, keep)


def test_source_stages_and_getsource() -> None:
    df = ast_ad.grad(fx.worked)
    df(2.0, 3.0)
    assert inspect.getsource(df) == ast_ad.source(df).split("\n\n\n")[-1]
    normalized = ast_ad.source(fx.worked, stage="normalized")
    assert normalized.splitlines()[1:] == [
        "    log_x1 = np.log(x1)",
        "    x1_times_x2 = x1 * x2",
        "    t1 = log_x1 + x1_times_x2",
        "    sin_x2 = np.sin(x2)",
        "    out = t1 - sin_x2",
        "    return out",
    ]
    with pytest.raises(ast_ad.errors.ASTADError):
        ast_ad.source(df, stage="nope")


def test_source_for_example_arguments() -> None:
    df = ast_ad.grad(fx.worked)
    # (arrays of two shapes: one may broadcast against the other; of one shape, neither does)
    general, scalar = ast_ad.source(df, np.ones(2), np.ones(1)), ast_ad.source(df, 2.0, 3.0)
    assert "unbroadcast" in general and "unbroadcast" not in scalar
    assert "unbroadcast" not in ast_ad.source(df, np.ones(2), np.ones(2))


def test_tracebacks_show_generated_lines() -> None:
    with np.errstate(all="raise"):
        try:
            ast_ad.grad(fx.raises_inside)(0.0)
        except FloatingPointError as exc:
            # the error is raised again from the user's own line; the generated code's is its cause
            assert traceback.extract_tb(exc.__traceback__)[-1].filename == fx.__file__
            frames = traceback.extract_tb(exc.__cause__.__traceback__)
        else:
            pytest.fail("log(0) should have raised")
    generated = [f for f in frames if f.filename.startswith(str(load.cache_dir()))]
    assert generated and generated[-1].line == "y = np.log(x)"
    assert (
        linecache.getline(generated[-1].filename, generated[-1].lineno).strip() == "y = np.log(x)"
    )
    # a real file: every tool can read it
    with open(generated[-1].filename, encoding="utf-8") as written:
        assert written.read().splitlines()[generated[-1].lineno - 1].strip() == "y = np.log(x)"


def test_the_default_traceback_printer_shows_generated_lines(tmp_path) -> None:
    """Python 3.11's own printer reads lines from disk: an uncaught error in generated code shows
    its line."""
    script = tmp_path / "fails.py"
    script.write_text(
        "import numpy as np\nimport ast_ad\n\ndef f(x1, x2):\n    return np.log(x1) + x1 * "
        "x2\n\nast_ad.grad(f).__wrapped__('a', 'b')\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env={**os.environ, "AST_AD_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 1
    assert str(tmp_path / "cache") in done.stderr and "log_x1 = np.log(x1)" in done.stderr


def test_generated_files_can_be_turned_off_and_cleared(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("AST_AD_CACHE_DIR", str(tmp_path))
    loaded = load.load("def double(x):\n    return 2 * x\n", "double", {})
    assert loaded.fn.__code__.co_filename.startswith(str(tmp_path)) and loaded.fn(3) == 6
    assert ast_ad.cache_clear() >= 1 and not list(tmp_path.glob("*.py"))
    assert inspect.getsource(loaded.fn).startswith("def double")  # linecache still has the text
    monkeypatch.setenv("AST_AD_CACHE", "0")
    assert load.load(
        "def triple(x):\n    return 3 * x\n", "triple", {}
    ).fn.__code__.co_filename.startswith("<ast_ad")


def test_an_unwritable_cache_falls_back_to_the_temporary_directory(tmp_path, monkeypatch) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("AST_AD_CACHE_DIR", str(blocked / "cache"))
    loaded = load.load("def quadruple(x):\n    return 4 * x\n", "quadruple", {})
    assert loaded.fn.__code__.co_filename.startswith(tempfile.gettempdir()) and loaded.fn(1) == 4


def test_deterministic_text() -> None:
    first = ast_ad.source(ast_ad.grad(fx.caller))
    transform.forget()
    assert ast_ad.source(ast_ad.grad(fx.caller)) == first


def test_print_passes_through(capsys) -> None:
    assert ast_ad.grad(fx.prints)(1.0) == 2.0
    assert "x is 1.0" in capsys.readouterr().out


def test_check_grads_passes_and_fails() -> None:
    ast_ad.check_grads(fx.worked, 2.0, 3.0, argnums=(0, 1))
    right, changes = ast_ad.core.registry.lookup(np.sin), len(ast_ad.core.registry.USER_CHANGES)
    try:
        ast_ad.extend.defvjp_elementwise(np.sin, lambda g, ans, x: g * np.sin(x))
        transform.forget()
        with pytest.raises(AssertionError, match="finite differences"):
            ast_ad.check_grads(fx.worked, 2.0, 3.0, argnums=(0, 1))
    # the rule as it was, and the registrations that key the persistent cache, so that no later
    finally:
        # test reads a module built with the wrong rule from it
        ast_ad.core.registry._RULES[np.sin] = right
        del ast_ad.core.registry.USER_CHANGES[changes:]
        transform.forget()
    ast_ad.check_grads(fx.worked, 2.0, 3.0, argnums=(0, 1))


def test_gradients_never_share_memory_with_each_other_or_the_arguments() -> None:
    x, y = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    gx, gy = ast_ad.grad(fx.shared_sum, (0, 1))(x, y)
    np.testing.assert_allclose(gx, 2 * (x + y))
    gx[0] = 100.0
    assert gy[0] != 100.0
    assert not np.shares_memory(gx, x) and not np.shares_memory(gy, y)


def test_in_place_update_of_a_shared_array_is_followed() -> None:
    # Python changes x too when y is x: the memory model makes x the changed array (once refused)
    x = np.array([1.0, 2.0])
    value, grad = ast_ad.value_and_grad(fx.aliasing)(x.copy())
    assert value == fx.aliasing(x.copy())
    np.testing.assert_allclose(grad, 2 * x + 2.0)  # sum((x + 1) ** 2)
    # floats cannot be shared: y += 1.0 binds a new one
    assert ast_ad.grad(fx.aliasing)(1.5) == 2 * 1.5 + 1.0


def test_in_place_update_in_a_loop_of_an_array_shared_before_it_is_followed() -> None:
    # found by the long random-program run: the loop's own name for y started as x's array unnoticed
    x = np.array([1.0, 2.0])
    value, grad = ast_ad.value_and_grad(fx.aliasing_in_a_loop)(x.copy())
    assert value == fx.aliasing_in_a_loop(x.copy())
    np.testing.assert_allclose(grad, 2 * x + 4.0)  # sum((x + 2) ** 2)
    assert ast_ad.grad(fx.aliasing_in_a_loop)(1.5) == pytest.approx(2 * 1.5 + 2.0)


def test_a_slow_first_transform_says_so_once(monkeypatch, caplog) -> None:
    """Silent by default; one WARNING line when the transform is slower than the threshold (set to 0
    here, so the test does not depend on the machine's speed), and each stage at INFO."""
    import logging

    monkeypatch.setattr(transform, "SLOW_SECONDS", 0.0)
    # transformed here, not read from what an earlier test stored
    monkeypatch.setenv("AST_AD_CACHE", "0")
    transform.forget()
    with caplog.at_level(logging.INFO, logger="ast_ad"):
        ast_ad.grad(fx.worked)(2.0, 3.0)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "worked" in warnings[0].getMessage() and "once per function" in \
        warnings[0].getMessage()
    assert {
        r.getMessage().split(": ")[1].split(" took")[0]
        for r in caplog.records
        if r.levelno == logging.INFO
    } == {"parse, normalize, reverse", "emit", "compile"}


def summed_worked(x1, x2):
    return np.sum(np.log(x1) + x1 * x2 - np.sin(x2))


def test_the_scalar_fast_path_runs_only_what_it_was_built_for() -> None:
    """After a call with floats, a gradient runs its scalar module directly; every other call takes
    the general path, and each gives what the general path gives."""
    def expected(x1, x2):
        return 1.0 / x1 + x2, x1 - math.cos(x2)

    both, first = ast_ad.grad(fx.worked, (0, 1)), ast_ad.value_and_grad(fx.worked)
    for x1, x2 in [(2.0, 3.0), (2.0, 3.0), (np.float64(0.5), 1.5), (1.25, np.float64(0.25))]:
        grads = both(x1, x2)
        assert grads == pytest.approx(expected(x1, x2), rel=1e-15) and all(
            type(g) is float for g in grads
        )
        value, grad = first(x1, x2)
        assert (
            value == fx.worked(x1, x2)
            and type(grad) is float
            and grad == pytest.approx(expected(x1, x2)[0])
        )
    assert both(2.0, x2=3.0) == both(2.0, 3.0)  # a keyword: the general path
    with pytest.raises(ast_ad.errors.NonScalarOutputError):
        both(np.array([2.0, 0.5]), 3.0)  # an array after floats
    summed = ast_ad.grad(summed_worked, (0, 1))
    assert summed(2.0, 3.0) == pytest.approx(expected(2.0, 3.0), rel=1e-15)
    x1s = np.array([2.0, 0.5])
    # an array after floats: not the scalar module, whose gradient would not un-broadcast
    grads = summed(x1s, 3.0)
    np.testing.assert_allclose(grads[0], 1.0 / x1s + 3.0)
    assert np.shape(grads[1]) == () and grads[1] == pytest.approx(np.sum(x1s - math.cos(3.0)))
    assert summed(2.0, 3.0) == pytest.approx(expected(2.0, 3.0), rel=1e-15)  # and floats again
    with pytest.raises(ast_ad.errors.ASTADError):
        both(2, 3.0)  # an integer is refused on either path
    # the module for arrays: the last call's kinds are those now
    ast_ad.source(both, np.ones(2), np.ones(1))
    assert "unbroadcast" in ast_ad.source(both)
    assert both(2.0, 3.0) == pytest.approx(expected(2.0, 3.0), rel=1e-15)
    assert "unbroadcast" not in ast_ad.source(both)  # a call with floats is the last again
    with pytest.raises(TypeError):
        both(2.0)


def test_the_scalar_call_is_written_for_each_shape_of_call_once() -> None:
    """``scalar_calls.scalar_caller`` writes the fast path's code for a number of arguments, guards
    and gradients, once: one gradient, a tuple of one or of three, with the value or not, each gives
    what the general path gives."""
    from ast_ad.backend import scalar_calls

    def three(a, b, c):
        return a * b + math.sin(c)

    cases = [(ast_ad.grad(three), 2.0), (ast_ad.grad(three, (0,)), (2.0,)),
             (ast_ad.grad(three, (0, 1, 2)), (2.0, 1.5, math.cos(0.5))),
             (ast_ad.value_and_grad(three, (2, 0)), (three(1.5, 2.0, 0.5), (math.cos(0.5), 2.0)))]
    for _ in range(3):  # armed by the first call, run by the next two
        for gradient, expected in cases:
            got = gradient(1.5, 2.0, 0.5)
            assert _flat(got) == pytest.approx(_flat(expected), rel=1e-15)
            assert (
                _all_floats(got)
                and type(got) is type(expected)
                and len(_flat(got)) == len(_flat(expected))
            )
    made = len(scalar_calls._FACTORIES)
    for gradient, _ in cases:  # another gradient of the same shape: no new code
        type(gradient)(three, gradient.argnums if not gradient.single else gradient.argnums[0],
                       gradient.with_value)(1.5, 2.0, 0.5)
    assert len(scalar_calls._FACTORIES) == made


def test_a_call_like_the_last_one_with_arrays_runs_the_code_directly(monkeypatch) -> None:
    """``scalar_calls.array_caller``: after a call with floats and numpy arrays, a call with
    arguments of the same kinds, shapes and dtypes runs the module without the general path
    (counted: ``shape_labels`` is not called), and gives what the general path gives: the same
    numbers, fresh arrays of the arguments' shapes, one per argument even where the code gives one
    array twice; any other call (another shape, a list) takes the general path again."""
    from ast_ad.api import gradient as gradient_module

    def model(w, x, scale):
        return scale * np.sum(np.tanh(w * x)) + np.sum(w * w)

    def twice(x, y):
        return np.sum(x + y)  # the same adjoint for both: given as two arrays

    w, x = np.linspace(-1.0, 1.0, 5), np.linspace(0.5, 1.5, 5)
    labelled = {"n": 0}
    real = gradient_module.shape_labels

    def counted(args):
        labelled["n"] += 1
        return real(args)

    monkeypatch.setattr(gradient_module, "shape_labels", counted)
    # (each gradient, its arguments, and its gradients out of what it returns)
    for gradient, args, grads_of in (
        (ast_ad.grad(model, (0, 1, 2)), (w, x, 1.5), lambda got: got),
        (ast_ad.value_and_grad(model), (w, x, 1.5), lambda got: (got[1],)),
        (ast_ad.grad(twice, (0, 1)), (w, x), lambda got: got),
    ):
        first = gradient(*args)
        labelled["n"] = 0
        again = gradient(*args)
        assert labelled["n"] == 0  # (the direct call)
        for a, b in zip(_leaves(first), _leaves(again), strict=True):
            assert type(a) is type(b) and np.array_equal(a, b)
        arrays = [g for g in grads_of(again) if isinstance(g, np.ndarray)]
        assert all(g.flags.writeable for g in arrays)
        assert len({id(g) for g in arrays}) == len(arrays)
        gradient(*(np.append(a, 0.5) if isinstance(a, np.ndarray) else a for a in args))
        assert labelled["n"] == 1  # another shape: the general path
    np.testing.assert_array_equal(ast_ad.grad(twice, (0, 1))(w, x)[0], np.ones(5))


def test_grad_written_in_a_loop_is_made_once_and_follows_a_changed_function(monkeypatch) -> None:
    """``grad(f)(x)`` written where it runs many times (a loop, a function that is differentiated)
    gives the gradient made the first time (``gradient.made``: counted, ``inspect.signature`` is
    not read again), so each later call takes the direct path. A function given other code (as
    IPython's autoreload does) or other defaults gets a new one, which differentiates what now
    runs."""
    from ast_ad.api import gradient as gradient_module

    def f(x, scale=2.0):
        return scale * np.sum(x * x)

    def g(x, scale=2.0):
        return scale * np.sum(np.sin(x))

    read = {"n": 0}
    real = gradient_module.inspect.signature

    def counted(fn):
        read["n"] += 1
        return real(fn)

    monkeypatch.setattr(gradient_module.inspect, "signature", counted)
    x = np.array([0.5, 1.5])
    np.testing.assert_allclose(ast_ad.grad(f)(x), 4.0 * x)  # (made, and transformed)
    read["n"] = 0
    for _ in range(5):
        np.testing.assert_allclose(ast_ad.grad(f)(x), 4.0 * x)
    assert read["n"] == 0
    assert ast_ad.grad(f) is ast_ad.grad(f) and ast_ad.grad(f, 0) is not ast_ad.grad(f, (0,))
    assert ast_ad.value_and_grad(f) is not ast_ad.grad(f)
    f.__defaults__ = (3.0,)
    np.testing.assert_allclose(ast_ad.grad(f)(x), 6.0 * x)
    f.__code__ = g.__code__
    np.testing.assert_allclose(ast_ad.grad(f)(x), 3.0 * np.cos(x))


SCALE = 2.0


def _scaled_model(w, x):
    return SCALE * np.sum(np.tanh(w * x))


def test_jvp_called_like_last_time_with_arrays_runs_the_module_directly(
    monkeypatch, lowerings
) -> None:
    """``jvp`` of a plain function called as last time with floats and numpy arrays (the same
    kinds, shapes, dtypes and moving arguments) runs its module without lowering again (counted),
    with the general path's result; another call lowers; a global the function reads, changed,
    is read again (the module's currency is checked)."""

    w, x, u = np.linspace(-1.0, 1.0, 5), np.linspace(0.5, 1.5, 5), np.linspace(1.0, 2.0, 5)
    first = ast_ad.jvp(_scaled_model, (w, x), (u, None))
    lowerings["n"] = 0
    again = ast_ad.jvp(_scaled_model, (w, x), (u, None))
    assert lowerings["n"] == 0 and again == first
    expected = 2.0 * np.sum((1.0 - np.tanh(w * x) ** 2) * x * u)
    assert again[1] == pytest.approx(expected, rel=1e-12)
    before = ast_ad.jvp(_scaled_model, (w, x), (None, u))[1]  # another moving argument: lowered
    assert lowerings["n"] == 1
    assert ast_ad.jvp(_scaled_model, (w, x), (None, u))[1] == before and lowerings["n"] == 1
    monkeypatch.setitem(globals(), "SCALE", 3.0)
    assert ast_ad.jvp(_scaled_model, (w, x), (None, u))[1] == pytest.approx(1.5 * before,
                                                                            rel=1e-12)


_VALUES = [np.zeros(2), np.ones(2), np.zeros(3), np.zeros((2, 1)), np.zeros(2, np.float32),
           np.zeros(2, np.int64), 1.5, np.float64(2.0), np.float32(1.0), 3, [1.0, 2.0], None]


def test_the_layout_check_agrees_with_the_layout() -> None:
    """``scalar_calls.layout_caller``'s inline check of a call (``jvp`` of a function, or of a
    gradient, called as last time) holds exactly where ``directional._layout`` of the call equals
    the layout it was made for: every pair of calls of two arguments from a pool of arrays (of
    other shapes and dtypes), floats, numpy's float64 and float32, an integer and a list, with
    tangents given, absent or of another kind; and ``run`` gets the arguments, the seeds and the
    moving tangents."""
    from itertools import product

    from ast_ad.api.directional import _layout
    from ast_ad.backend.scalar_calls import NOT_SCALARS, layout_caller

    calls = [((a, b), (s, t)) for a, b in product(_VALUES[:-1], repeat=2)
             for s in (None, a, _VALUES[0], 1.0) for t in (None, b, 2.0)]
    layouts = {}
    for primals, tangents in calls:
        layout = _layout(primals, tangents)
        if layout is not None:
            layouts.setdefault(layout, (primals, tangents))
    assert len(layouts) > 20
    for layout in layouts:
        check = layout_caller(layout, (), None)
        run = layout_caller(layout, (), lambda *a: a, seeds=1)
        for primals, tangents in calls:
            same = _layout(primals, tangents) == layout
            assert (check(primals, tangents) is True) == same, (layout, primals, tangents)
            if same:
                moving = tuple(t for t in tangents if t is not None)
                given = run(primals, tangents)
                assert given[2] == 1.0 and type(given[2]) is float
                assert all(a is b for a, b in zip(given[:2] + given[3:], (*primals, *moving),
                                                   strict=True))
            else:
                assert run(primals, tangents) is NOT_SCALARS
        assert check((np.zeros(2),), (None,)) is NOT_SCALARS  # another number of arguments


def _leaves(x) -> list:
    return [y for item in x for y in _leaves(item)] if type(x) is tuple else [x]


def _all_floats(x) -> bool:
    return all(_all_floats(item) for item in x) if type(x) is tuple else type(x) is float


def _flat(x) -> list:
    return [y for item in x for y in _flat(item)] if type(x) is tuple else [x]


def test_the_public_namespace_is_the_api() -> None:
    """``dir(ast_ad)`` lists what ``__all__`` names, not the package's modules, whatever was
    imported."""
    import ast_ad.optimize.fold  # noqa: F401  (a module of the package, imported: still not listed)
    public = {name for name in dir(ast_ad) if not name.startswith("_")}
    assert public == set(ast_ad.__all__)
    assert all(hasattr(ast_ad, name) for name in ast_ad.__all__)


def test_check_grads_takes_lists_tuples_and_dicts() -> None:
    """Each array or number inside a container parameter is checked (np.allclose of a dict raised
    TypeError)."""
    params = {"w": np.ones((2, 3)) * 0.3, "b": np.array([0.1, -0.2]), "scale": [1.5, 2.0]}
    ast_ad.check_grads(fx.container_model, params, np.array([0.5, -1.0, 2.0]))


def test_a_float32_number_gets_code_of_its_own_and_an_export_says_which_it_was_made_for(
    tmp_path,
) -> None:
    """A numpy float32 (or float16) number is labelled apart from a Python float
    (``kinds.NARROW_NUMBER``): code made for 64-bit numbers may multiply two of them first
    (``fold.scaled_adjoints``), which for float32 numbers would round to float32. An exported
    module made for a float refuses a float32; one made for a float32 takes either. The path comes
    second, and anything else is said so."""
    import importlib.util

    from ast_ad.api.arguments import shape_labels
    from ast_ad.errors import ASTADError

    assert shape_labels((1.0, np.float64(1.0), 3, np.float32(1.0), np.float16(1.0))) == \
        (-1, -1, -1, -7, -7)
    x = np.linspace(0.1, 1.0, 3)

    def loaded(path):
        spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.scaled_sines_vjp

    with pytest.raises(ASTADError, match="path second"):
        ast_ad.export(ast_ad.grad(fx.scaled_sines), x, 0.5)
    wide = loaded(ast_ad.export(ast_ad.grad(fx.scaled_sines), str(tmp_path / "wide.py"), x, 0.5))
    narrow = loaded(ast_ad.export(ast_ad.grad(fx.scaled_sines), str(tmp_path / "narrow.py"), x,
                                  np.float32(0.5)))
    expected = ast_ad.value_and_grad(fx.scaled_sines)(x, 0.5)
    for got in (wide(x, 0.5), narrow(x, 0.5), narrow(x, np.float32(0.5))):
        assert got[0] == expected[0]
        np.testing.assert_allclose(got[1], expected[1], rtol=1e-6)
    with pytest.raises(TypeError, match="float32"):
        wide(x, np.float32(0.5))
