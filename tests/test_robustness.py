"""Hygiene, the transform cache, threads, and big or deep inputs."""

from __future__ import annotations

import math
import os
import pathlib
import sys
import threading

import numpy as np
import pytest

import ast_ad
from ast_ad.core import registry
from tests.data import hygiene
from tests.oracles import assert_same


def test_generated_looking_names_change_nothing() -> None:
    args = (0.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0)
    argnums = tuple(range(7))
    assert_same(ast_ad.grad(hygiene.looks_generated, argnums)(*args),
                ast_ad.tracer.grad(hygiene.looks_generated, argnums)(*args))
    assert ast_ad.grad(hygiene.shadows_numpy, (0, 1, 2))(2.0, 3.0, 0.5) == pytest.approx(
        (math.sin(0.5), 0.5, 2.0 * math.cos(0.5) + 3.0))
    assert ast_ad.grad(hygiene.shadows_np, (0, 1))(3.0, 2.0) == (4.0, 12.0)
    assert ast_ad.grad(hygiene.loops_with_tape_names, (0, 1))(1.0, 0.5) == pytest.approx(
        ast_ad.tracer.grad(hygiene.loops_with_tape_names, (0, 1))(1.0, 0.5))


def test_a_gradient_call_changes_no_argument_global_or_rule() -> None:
    rules = registry.registered()
    globals_before = dict(vars(hygiene))
    x = np.array([0.5, 1.5])
    kept = x.copy()
    np.testing.assert_allclose(ast_ad.grad(hygiene.reads_globals)(x), np.cos(x) * 100.0)
    np.testing.assert_array_equal(x, kept)
    assert registry.registered() == rules
    after = vars(hygiene)
    assert after.keys() == globals_before.keys()
    assert all(after[k] is v for k, v in globals_before.items())


def test_cache_is_keyed_by_argnums() -> None:
    f = hygiene.shadows_np
    assert ast_ad.grad(f, 0)(3.0, 2.0) == 4.0
    assert ast_ad.grad(f, 1)(3.0, 2.0) == 12.0
    assert ast_ad.grad(f, (1, 0))(3.0, 2.0) == (12.0, 4.0)


def test_gradients_built_from_many_threads_at_once() -> None:
    results: list = []
    errors: list = []

    def work(k: int) -> None:
        try:
            results.append(ast_ad.grad(hygiene.loops_with_tape_names, 0)(1.0 + k, 0.5))
        except Exception as exc:  # noqa: BLE001 -- reported below
            errors.append(exc)
    from ast_ad import transform
    transform.forget()
    threads = [threading.Thread(target=work, args=(k % 2,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(set(results)) == [0.125]


def write_module(tmp_path, name: str, text: str):
    import importlib.util
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_function_of_two_thousand_statements(tmp_path) -> None:
    lines = ["import numpy as np", "", "def f(x):", "    y = x"]
    lines += [f"    y = y * 0.999 + np.sin(y) * {k % 7} * 0.001" for k in range(2000)]
    lines += ["    return y", ""]
    module = write_module(tmp_path, "long_function", "\n".join(lines))
    g = ast_ad.grad(module.f)(0.3)
    assert g == pytest.approx(ast_ad.tracer.grad(module.f)(0.3), rel=1e-9)


def _straight_line(lines: int) -> str:
    """The benchmark's straight-line function of ``lines`` statements (examples/benchmark.py)."""
    examples = str(pathlib.Path(__file__).parent.parent / "examples")
    sys.path.insert(0, examples)
    try:
        import benchmark
    finally:
        sys.path.remove(examples)
    source: str = benchmark.straight_line_source(lines)
    return source


def test_the_transform_does_linear_work(tmp_path, monkeypatch) -> None:
    """Python function calls while transforming, emitting and compiling a straight-line function: a
    count that does not depend on the machine's speed. Three times the lines, three times the calls
    (±10%)."""
    from ast_ad import transform

    monkeypatch.setenv("AST_AD_CACHE", "0")  # built each time, never read from the persistent cache
    def calls(lines: int) -> int:
        fn = write_module(tmp_path, f"straight_{lines}", _straight_line(lines)).f
        count = [0]

        def profile(frame, event, arg) -> None:
            if event == "call":
                count[0] += 1
        sys.setprofile(profile)
        try:
            transform.gradient(fn, (0, 1), False, (-1, -1))
        finally:
            sys.setprofile(None)
        return count[0]
    calls(20)  # the rules' templates, parsed once per process
    short, long = calls(100), calls(300)
    assert 2.7 < long / short < 3.3, (short, long)


def test_a_rule_is_read_from_its_own_statement_not_its_whole_file(monkeypatch) -> None:
    """The first gradient of a process parses, of each rule file, only the statement that holds the
    rule it inlines (a count of characters handed to ``ast.parse``, not seconds): the rule files are
    thousands of characters long, each statement a few hundred."""
    import ast

    from ast_ad import rules
    from ast_ad.frontend import parse

    parsed: list[int] = []
    real = ast.parse

    def counting(text, *args, **kwargs):
        # (the blank lines before a statement, which keep its line number, are not parsed text)
        parsed.append(len(text.lstrip("\n")))
        return real(text, *args, **kwargs)
    monkeypatch.setattr(ast, "parse", counting)
    monkeypatch.setenv("AST_AD_CACHE", "0")
    parse._lambdas_at.cache_clear()
    parse._parsed_file.cache_clear()
    from tests.compose_functions import sinc_weighted

    # np.sum, np.sinc and * : three rules of two files
    ast_ad.grad(sinc_weighted)(np.array([0.3, 1.2]))
    rule_file = min(
        len(pathlib.Path(module.__file__).read_text()) for module in (rules.numpy, rules.operator)
    )
    assert parsed and max(parsed) < rule_file / 10, (parsed, rule_file)


def test_functions_are_found_by_their_statement_decorated_nested_or_after_a_string(
    tmp_path,
) -> None:
    """The statement around a function is parsed alone when it parses; a docstring's lines at column
    0 or a decorator above it change where it starts, and the whole file is parsed where the part
    does not."""
    source = (
        'import functools\nimport numpy as np\n\nNOTE = """\nx = 1\n"""\n\n\n'
        "@functools.lru_cache(maxsize=None)\n"
        "def scale():\n    return 2.0\n\n\n"
        "def decorate(fn):\n    return fn\n\n\n"
        "@decorate\ndef decorated(x):\n    return np.sin(x) * x\n\n\n"
        "class Model:\n    def method(self, x):\n        return x ** 3\n\n\n"
        'def after_a_string(x):\n    """A docstring\nat column 0.\n"""\n    return np.exp(x)\n\n\n'
        "square = lambda x: x * x  # noqa: E731\n"
    )
    module = write_module(tmp_path, "found_by_statement", source)
    assert ast_ad.grad(module.decorated)(0.4) == pytest.approx(
        np.cos(0.4) * 0.4 + np.sin(0.4), rel=1e-14
    )
    assert ast_ad.grad(module.Model().method)(0.5) == pytest.approx(0.75, rel=1e-14)
    assert ast_ad.grad(module.after_a_string)(0.5) == pytest.approx(np.exp(0.5), rel=1e-14)
    assert ast_ad.grad(module.square)(1.5) == pytest.approx(3.0, rel=1e-14)


def test_the_transform_pauses_the_cycle_collector_and_leaves_it_as_it_was(
    tmp_path, monkeypatch
) -> None:
    """Paused while the transform runs (it costs a quarter of a long function's transform), and
    afterwards on or off as the program had it, also when the transform fails."""
    import gc

    monkeypatch.setenv("AST_AD_CACHE", "0")
    seen: list[bool] = []
    module = write_module(tmp_path, "collector", "def f(x):\n    return x * x\n\n\ndef bad(x):\n   "
                                                 " return x.nonexistent_method()\n")
    real = ast_ad.transform.adjoint

    def spying(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)
    monkeypatch.setattr(ast_ad.transform, "adjoint", spying)
    was = gc.isenabled()
    try:
        for on in (True, False):
            gc.enable() if on else gc.disable()
            assert ast_ad.grad(module.f)(3.0 if on else 4.0) == (6.0 if on else 8.0)
            assert gc.isenabled() is on
            with pytest.raises(ast_ad.errors.ASTADError):
                ast_ad.grad(module.bad)(2.0 if on else 5.0)
            assert gc.isenabled() is on
    finally:
        gc.enable() if was else gc.disable()
    assert seen and not any(seen)


LOOPED = """
import numpy as np


def g(x):
    y = np.zeros(5)
    for i in range(1, 5):
        y[i] = y[i - 1] * x[i] + 1.0
    if y[4] > 0.0:
        y = y * 2.0
    return np.sum(np.tanh(y))


def shifted(x, c):
    h = x
    for t in range(3):
        s = c * 2.0
        h = np.tanh(h + s)
    return np.sum(h)


def helper(x, y):
    return np.concatenate([x[:1], x[1:] * y[1:]])


def calls_a_helper(x):
    y = x
    for t in range(3):
        y = y + 0.5 * helper(x, y)
    return np.sum(y)
"""


def test_a_transform_leaves_nothing_to_the_cycle_collector(tmp_path, monkeypatch) -> None:
    """What a transform builds (the IR, syntax trees, facts: tens of thousands of objects) goes by
    reference counting once the gradient is loaded: no cycle keeps it for the collector to find,
    which at the next collection costs a long function's transform a twentieth again (a nested
    function that calls itself does that: it and its cell hold each other)."""
    import gc

    monkeypatch.setenv("AST_AD_CACHE", "0")

    def transforms(suffix: str) -> None:
        straight = write_module(tmp_path, f"straight_{suffix}", _straight_line(200)).f
        looped = write_module(tmp_path, f"looped_{suffix}", LOOPED)
        ast_ad.grad(straight, (0, 1))(0.3, 0.7)
        ast_ad.grad(looped.g)(np.linspace(0.1, 0.5, 5))
        # a shape kept (a 2nd pass)
        ast_ad.grad(looped.shifted, (0, 1))(np.linspace(0.1, 0.5, 5), np.array([0.2]))
        # a helper's result known from its own facts (``activity.callee_results``)
        ast_ad.grad(looped.calls_a_helper)(np.linspace(0.1, 0.5, 5))

    # once first, for what a process builds once whatever it runs first (``inspect.signature`` of
    # a builtin, parsed from its text, leaves cycles of its own): then the same code in new modules
    transforms("first")
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        transforms("cycles")
        found = gc.collect()
    finally:
        gc.enable() if was else gc.disable()
    assert found == 0, found


def test_deeply_nested_expressions(tmp_path) -> None:
    expr = "x"
    for _ in range(60):
        expr = f"np.sin({expr} * 0.9 + 0.1)"
    module = write_module(
        tmp_path, "deep_expr", f"import numpy as np\n\ndef f(x):\n    return {expr}\n"
    )
    assert ast_ad.grad(module.f)(0.2) == pytest.approx(ast_ad.tracer.grad(module.f)(0.2), rel=1e-9)


def test_too_deep_nesting_is_a_clear_error(tmp_path) -> None:
    expr = "x" + " + x" * 900
    module = write_module(tmp_path, "too_deep", f"def f(x):\n    return {expr}\n")
    try:
        g = ast_ad.grad(module.f)(1.0)
    except ast_ad.errors.ASTADError as err:
        assert "nested too deeply" in str(err)
    else:
        assert g == 901.0


def test_deep_recursion_of_user_functions(tmp_path) -> None:
    module = write_module(
        tmp_path,
        "recursive",
        "def down(x, n):\n    if n == 0:\n        return x\n    return down(x * 1.001, n - 1)\n",
    )
    assert ast_ad.grad(module.down)(1.0, 200) == pytest.approx(1.001 ** 200)
    with pytest.raises(ast_ad.errors.ASTADError, match="recursion"):
        ast_ad.grad(module.down)(1.0, sys.getrecursionlimit() + 100)



def test_a_million_iterations(tmp_path) -> None:
    module = write_module(
        tmp_path,
        "million",
        "import math\n\ndef f(x):\n    for _ in range(1_000_000):\n        x = x * 0.999999 + "
        "math.sin(x) * 1e-6\n    return x\n",
    )
    g = ast_ad.grad(module.f)(0.5)
    assert math.isfinite(g) and 0.0 < g < 10.0


def test_released_arrays_lower_the_peak_memory_of_a_gradient(tmp_path) -> None:
    """The ``del`` statements after last reads are what keep a long chain's gradient from holding
    every step."""
    import re
    import tracemalloc

    source = (
        "import numpy as np\n\ndef chain(x):\n"
        + "".join(f"    x{k + 1} = np.sin(x{k}) * 1.5\n" for k in range(8)).replace("x0", "x")
        + "    return np.sum(x8)\n"
    )
    module = write_module(tmp_path, "chain", source)
    gradient = ast_ad.grad(module.chain)
    x = np.linspace(0.0, 1.0, 100_000)
    gradient(x)
    loaded = gradient.loaded()
    assert loaded.text.count("del ") >= 4
    # the same code without the releases
    holding = re.sub(r"^\s*del .*\n", "", loaded.text, flags=re.M)
    scope = dict(loaded.namespace)
    exec(compile(holding, "<holding>", "exec"), scope)  # noqa: S102 -- the generated text, releases removed

    def peak(fn) -> int:
        tracemalloc.start()
        fn(x)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    assert_same((scope[loaded.fn.__name__](x)[1],), (loaded.fn(x)[1],))
    assert peak(loaded.fn) < 0.75 * peak(scope[loaded.fn.__name__])


def test_optional_rules_are_registered_when_the_code_names_the_library() -> None:
    """``import ast_ad`` does not import scipy; differentiating code that names scipy.special
    registers its rules."""
    import subprocess
    import sys
    script = ("import sys, numpy as np, ast_ad\nassert 'scipy' not in sys.modules, 'import ast_ad "
              "imported scipy'\nfrom tests import scipy_functions as "
              "s\nprint(ast_ad.grad(s.uses_erf)(0.5), ast_ad.grad(s.uses_module)(0.5))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert done.returncode == 0, done.stderr
    erf_slope = 2.0 / math.sqrt(math.pi) * math.exp(-0.25)
    first, second = (float(v) for v in done.stdout.split())
    assert math.isclose(first, erf_slope) and math.isclose(second, erf_slope * 2.0)


def test_import_ast_ad_leaves_for_later_what_its_first_gradient_may_not_need() -> None:
    """``import ast_ad`` imports neither hashlib (OpenSSL: a tenth of the import, needed only by the
    persistent cache) nor the tracer (an oracle and ``explain``'s); the first gradient, and
    ``ast_ad.tracer``, import them."""
    import subprocess
    import sys
    script = ("import sys, numpy as np, ast_ad\nprint('hashlib' in sys.modules, 'ast_ad.tracer' in "
              "sys.modules)\ng = ast_ad.tracer.grad(lambda x: x * x)(3.0)\nprint(g, "
              "'ast_ad.tracer' in sys.modules)\n")
    # (an ImportWarning is an error: the package's attribute is set by the import, as for any
    # submodule)
    done = subprocess.run(
        [sys.executable, "-W", "error::ImportWarning", "-c", script], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False", "6.0", "True"]


def test_forward_mode_releases_arrays_too(tmp_path) -> None:
    """Forward mode over a gradient (a Hessian-vector product) ``del``s values and tangents after
    their last reads, as reverse mode does: without the releases the same code holds every step's
    arrays."""
    import re
    import tracemalloc

    from ast_ad.api import compose

    source = (
        "import numpy as np\n\ndef chain(x):\n"
        + "".join(f"    x{k + 1} = np.sin(x{k}) * 1.5\n" for k in range(8)).replace("x0", "x")
        + "    return np.sum(x8)\n"
    )
    module = write_module(tmp_path, "chain_hvp", source)
    x, v = np.linspace(0.0, 1.0, 100_000), np.linspace(1.0, 2.0, 100_000)
    loaded = compose.jvp_code(compose.lower(ast_ad.grad(module.chain), (x,)), (0,))
    assert loaded.text.count("del ") >= 4
    holding = re.sub(r"^\s*del .*\n", "", loaded.text, flags=re.M)
    scope = dict(loaded.namespace)
    exec(compile(holding, "<holding>", "exec"), scope)  # noqa: S102 -- the generated text, releases removed

    def peak(fn) -> int:
        tracemalloc.start()
        fn(x, 1.0, v)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    np.testing.assert_array_equal(
        scope[loaded.fn.__name__](x, 1.0, v)[1][1], loaded.fn(x, 1.0, v)[1][1]
    )
    assert peak(loaded.fn) < 0.75 * peak(scope[loaded.fn.__name__])
    np.testing.assert_allclose(
        ast_ad.hvp(module.chain)(x, v), loaded.fn(x, 1.0, v)[1][1], rtol=1e-12
    )
