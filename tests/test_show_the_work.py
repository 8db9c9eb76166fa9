"""explain, graph, the command line and export."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ast_ad
from tests.corpus_control import CASES as CONTROL
from tests.data import cli_model

MODEL = cli_model.__file__


# ---- explain -------------------------------------------------------------------------------------
def test_explain_reproduces_the_worked_example() -> None:
    ex = ast_ad.explain(cli_model.f, 2.0, 3.0, argnums=(0, 1))
    assert ex.forward_rows() == [
        ("x1", "input", "2.000000000000", ""), ("x2", "input", "3.000000000000", ""),
        ("v1", "log(x1)", "0.693147180560", ""), ("v2", "x1 * x2", "6.000000000000", ""),
        ("v3", "sin(x2)", "0.141120008060", ""), ("v4", "v1 + v2", "6.693147180560", ""),
        ("y", "v4 - v3", "6.552027172500", "")]
    adjoints = {s.label: round(float(s.adjoint), 12) for s in ex.steps}
    assert adjoints == {"v1": 1.0, "v2": 1.0, "v3": -1.0, "v4": 1.0, "y": 1.0}
    assert [(e.step, e.input, e.contribution) for e in ex.edges][:2] == [
        ("y", "v4", 1.0),
        ("y", "v3", -1.0),
    ]
    sine = next(e for e in ex.edges if e.step == "v3")
    assert (sine.upstream, round(sine.local, 12), round(sine.contribution, 12)) == (
        -1.0,
        -0.9899924966,
        0.9899924966,
    )
    assert [(src, round(c, 12)) for src, c in ex.contributions["x1"]] == [("v1", 0.5), ("v2", 3.0)]
    assert [(src, round(c, 12)) for src, c in ex.contributions["x2"]] == [
        ("v2", 2.0),
        ("v3", 0.9899924966),
    ]
    assert round(ex.gradient["x1"], 12) == 3.5 and round(ex.gradient["x2"], 12) == 2.9899924966
    text = str(ex)
    assert "bar(v4) = 1.000000000000" in text and "bar(v3) = -1.000000000000" in text
    assert "0.500000000000 (from v1) + 3.000000000000 (from v2)" in text
    assert "<table>" in ex._repr_html_()


def test_explain_forward_gives_the_tangent_trace_of_the_worked_example() -> None:
    """With tangents (1, 0): v1_dot = 0.5, v2_dot = 3, v3_dot = 0, y_dot = 3.5."""
    ex = ast_ad.explain(cli_model.f, 2.0, 3.0, argnums=(0, 1), mode="forward", tangents=(1.0, 0.0))
    tangents = {s.label: round(float(s.tangent), 12) for s in ex.steps}
    assert tangents == {"v1": 0.5, "v2": 3.0, "v3": 0.0, "v4": 3.5, "y": 3.5}
    assert round(float(ex.tangent), 12) == 3.5
    assert "Forward tangent trace" in str(ex) and "<table>" in ex._repr_html_()


@pytest.mark.parametrize(
    "case",
    [
        c
        for c in CONTROL
        if c.fn.__name__
        in (
            "scalar_loop",
            "branch",
            "while_count",
            "nested_loops",
            "early_returns",
            "closures",
            "augmented_in_loop",
        )
    ],
    ids=lambda c: c.fn.__name__,
)
@settings(max_examples=10)
@given(data=st.data())
def test_explain_forward_tangent_is_the_jvp(case, data) -> None:
    args = data.draw(case.args)
    tangents = tuple(0.5 + k for k in range(len(case.argnums)))
    ex = ast_ad.explain(case.fn, *args, argnums=case.argnums, mode="forward", tangents=tangents)
    full = [None] * len(args)
    for k, t in zip(case.argnums, tangents, strict=True):
        full[k] = np.full(np.shape(args[k]), t) if np.ndim(args[k]) else t
    _, dot = ast_ad.jvp(case.fn, tuple(args), tuple(full))
    np.testing.assert_allclose(ex.tangent, dot, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    "case",
    [
        c
        for c in CONTROL
        if c.fn.__name__
        in (
            "scalar_loop",
            "branch",
            "while_count",
            "nested_loops",
            "early_returns",
            "closures",
            "augmented_in_loop",
        )
    ],
    ids=lambda c: c.fn.__name__,
)
@settings(max_examples=10)
@given(data=st.data())
def test_explain_gradient_is_the_gradient(case, data) -> None:
    args = data.draw(case.args)
    ex = ast_ad.explain(case.fn, *args, argnums=case.argnums)
    ours = ast_ad.grad(case.fn, case.argnums)(*args)
    params = list(ex.gradient)
    for k, g in zip(case.argnums, ours, strict=True):
        np.testing.assert_allclose(
            ex.gradient[params[case.argnums.index(k)]], g, rtol=1e-9, atol=1e-12
        )


def test_explain_shows_each_run_of_a_short_loop() -> None:
    """Five runs of a loop: each run of each statement is a step, with its run's edges (no step
    feeds itself), its own local derivatives, and the input's edges into the first run; the
    contributions add up to the gradient."""
    ex = ast_ad.explain(cli_model.loop, 0.5)
    assert {s.count for s in ex.steps} == {1}
    assert {s.run for s in ex.steps if s.label != "y"} >= {f"{k} of 5" for k in range(1, 6)}
    assert all(e.step != e.input and e.local is not None for e in ex.edges)
    assert any(e.input == "x" for e in ex.edges)
    assert sum(c for _, c in ex.contributions["x"]) == pytest.approx(
        ast_ad.grad(cli_model.loop)(0.5), rel=1e-12
    )


def test_explain_groups_the_runs_of_a_long_loop() -> None:
    from tests import corpus_control

    ex = ast_ad.explain(corpus_control.loop_runtime_range, 0.5, 200)
    assert {s.count for s in ex.steps} == {100}
    assert "x100" in str(ex)
    assert ex.gradient["x"] == pytest.approx(
        ast_ad.grad(corpus_control.loop_runtime_range)(0.5, 200), rel=1e-12
    )


def test_a_value_no_step_shows_is_written_out() -> None:
    """The condition of ``np.where`` is no step (nothing differentiable flows through it): the steps
    that read it show what computes it, not a name no row defines; arrays' notation is explained
    once."""
    from tests import where_functions

    x = np.array([-1.0, 0.5, 2.0])
    text = str(ast_ad.explain(where_functions.sqrt_or_linear, x))
    assert "x > 0" in text and "cond" not in text
    assert "An array is shown as array(shape)" in text


def test_explain_summarises_arrays() -> None:
    ex = ast_ad.explain(cli_model.model, np.array([0.1, -0.2, 0.3]), 0.05, argnums=(0, 1))
    assert any("array(3,)" in row[2] for row in ex.forward_rows())


# ---- graph ---------------------------------------------------------------------------------------
def test_graph_of_the_worked_example() -> None:
    dot = ast_ad.graph(cli_model.f, 2.0, 3.0, argnums=(0, 1)).dot
    edges = {line.split(" [")[0].strip() for line in dot.splitlines() if "->" in line}
    assert edges == {'"x1" -> "v1"', '"x1" -> "v2"', '"x2" -> "v2"', '"x2" -> "v3"', '"v1" -> "v4"',
                     '"v2" -> "v4"', '"v4" -> "y"', '"v3" -> "y"'}
    assert '"v3" -> "y" [label="-1"];' in dot
    assert 'label="v1 = log(x1)\\n0.693147\\nadjoint 1"' in dot


def test_static_graph_of_a_loop() -> None:
    dot = ast_ad.graph(cli_model.loop).dot
    assert '"v2" [shape=box, label="v2 = sin(x)\\nline 20, in a loop"];' in dot
    assert '"x" -> "v2";' in dot and '"v3" -> "y";' in dot


@pytest.mark.skipif(
    shutil.which("dot") is None, reason="Graphviz is not installed (.ci/run installs it)"
)
def test_graph_renders_svg_and_png(tmp_path) -> None:
    picture = ast_ad.graph(cli_model.f, 2.0, 3.0, argnums=(0, 1))
    svg = picture.render(str(tmp_path / "g.svg"))
    assert open(svg).read().lstrip().startswith("<?xml") and "v4 = v1 + v2" in open(svg).read()
    png = picture.render(str(tmp_path / "g.png"))
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


# ---- command line --------------------------------------------------------------------------------
def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ast_ad", *args], capture_output=True, text=True,
                          env=dict(os.environ, NO_COLOR="1"))


def test_cli_show() -> None:
    done = cli("show", f"{MODEL}:f", "--argnums", "0,1", "2.0", "3.0")
    assert done.returncode == 0
    assert "x2_bar = -out_bar * np.cos(x2) + out_bar * x1" in done.stdout
    done = cli("show", f"{MODEL}:f", "--stage", "normalized")
    assert "    t1 = log_x1 + x1_times_x2" in done.stdout


def test_cli_explain() -> None:
    done = cli("explain", f"{MODEL}:f", "2.0", "3.0", "--argnums", "0,1")
    assert done.returncode == 0 and "v3  sin(x2)      0.141120008060" in done.stdout


def test_cli_explain_forward() -> None:
    done = cli("explain", f"{MODEL}:f", "2.0", "3.0", "--mode", "forward", "--tangents", "1,0")
    assert done.returncode == 0 and "The output's tangent: 3.500000000000" in done.stdout


def test_cli_explain_tells_every_path_by_default() -> None:
    """Without --argnums, explain differentiates every float argument: both paths of x2 meet in the
    table."""
    done = cli("explain", f"{MODEL}:f", "2.0", "3.0")
    assert done.returncode == 0
    assert (
        "x2     2.000000000000 (from v2) + 0.989992496600 (from v3)  2.989992496600" in done.stdout
    )


def test_cli_graph(tmp_path) -> None:
    done = cli("graph", f"{MODEL}:f", "2.0", "3.0")
    assert done.returncode == 0 and done.stdout.startswith('digraph "f"')
    if shutil.which("dot"):
        out = tmp_path / "graph.svg"
        assert cli("graph", f"{MODEL}:f", "2.0", "3.0", "-o", str(out)).returncode == 0
        assert out.exists()


def test_cli_errors_name_the_file_and_line() -> None:
    done = cli("show", f"{MODEL}:broken")
    assert done.returncode == 1
    line = next(n for n, text in enumerate(open(MODEL), 1) if "undefined_name" in text)
    assert f"{MODEL}:{line}:" in done.stderr and "not defined" in done.stderr
    assert cli("show", "nowhere.py:f").returncode == 1
    assert "has no function" in cli("show", f"{MODEL}:nothing").stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ("show", "{m}:f", "--argnums", "a"),
            "--argnums takes argument positions separated by commas",
        ),
        (
            ("show", "{m}:f", "--argnums", "5"),
            "takes 2 arguments, numbered from 0, so there is no argument 5",
        ),
        (("show", "{m}:f", "2.0"), "takes 2 arguments, and 1 value was given"),
        (
            ("explain", "{m}:f", "2.0", "3.0", "--html", "/nonexistent/folder/page.html"),
            "cannot write",
        ),
        (("explain", "{m}:repeated", "2.0", "3.0"), "raised TypeError"),
    ],
)
def test_cli_says_what_is_wrong_without_a_traceback(args, said) -> None:
    """A user's mistake on the command line gets one line saying what is wrong, not Python's
    traceback."""
    done = cli(*(a.format(m=MODEL) for a in args))
    assert done.returncode == 1
    assert said in done.stderr and "Traceback" not in done.stderr


def test_cli_output_into_a_pipe_that_closes_early() -> None:
    """``python -m ast_ad explain ... | head -1``: no BrokenPipeError when the reader stops."""
    done = subprocess.run(
        f"{sys.executable} -m ast_ad explain {MODEL}:f 2.0 3.0 | head -1",
        shell=True,
        capture_output=True,
        text=True,
        env=dict(os.environ, NO_COLOR="1"),
    )
    assert done.stdout.startswith("Forward evaluation trace") and "Error" not in done.stderr


def test_cli_graph_without_graphviz_leaves_no_file(tmp_path, monkeypatch) -> None:
    """Where ``dot`` is missing the picture is refused before the file is opened, saying how to
    install it."""
    import shutil as shell

    monkeypatch.setattr(shell, "which", lambda name: None)
    picture = ast_ad.graph(cli_model.f, 2.0, 3.0)
    out = tmp_path / "graph.svg"
    with pytest.raises(ast_ad.errors.ASTADError, match="install graphviz"):
        picture.render(str(out))
    assert not out.exists()


# ---- export --------------------------------------------------------------------------------------
BLOCK_AST_AD = "import sys; sys.modules['ast_ad'] = None\n"


@pytest.mark.parametrize("name, args, argnums", [("f", (2.0, 3.0), (0, 1)),
                                                 ("model", ([0.1, -0.2, 0.3], 0.05), (0, 1)),
                                                 ("loop", (0.5,), 0),
                                                 ("neighbours", ([0.5, 1.5, 2.0, 3.0],), 0)])
def test_export_runs_without_ast_ad(tmp_path, name, args, argnums) -> None:
    fn = getattr(cli_model, name)
    values = [np.array(a) if isinstance(a, list) else a for a in args]
    gradient = ast_ad.value_and_grad(fn, argnums)
    value, expected = gradient(*values)
    path = ast_ad.export(gradient, str(tmp_path / "exported.py"), *values)
    script = BLOCK_AST_AD + (
        f"import numpy as np\nsys.path.insert(0, {str(tmp_path)!r})\nimport exported\n"
        f"args = {[a if not isinstance(a, np.ndarray) else a.tolist() for a in values]!r}\n"
        "args = [np.array(a) if isinstance(a, list) else a for a in args]\n"
        f"out, grads = exported.{name}_vjp(*args)\n"
        "print(repr(float(out)))\n"
        "grads = grads if isinstance(grads, tuple) else (grads,)\n"
        "print(repr([np.asarray(g, dtype=float).tolist() for g in grads]))\n")
    done = subprocess.run(
        [sys.executable, "-I", "-c", script], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr + open(path).read()
    out_line, grads_line = done.stdout.splitlines()
    assert math.isclose(float(out_line), float(value), rel_tol=1e-12)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for got, want in zip(eval(grads_line), expected, strict=True):  # noqa: S307 -- our own repr output
        np.testing.assert_allclose(
            np.sum(got, axis=0) if np.ndim(got) > np.ndim(want) else got, want, rtol=1e-10
        )


@pytest.mark.parametrize(
    ("name", "args", "wrong", "said"),
    [
        (
            "f",
            "2.0, 3.0",
            "np.ones(3), 3.0",
            "f_vjp was exported for a scalar argument 0, not a ndarray",
        ),
        # exported for a vector of floats, the code may rely on that (an entry is a number): a
        # matrix is refused
        (
            "model",
            "np.ones(3), 0.05",
            "np.ones((3, 1)), 0.05",
            "model_vjp was exported for a 1-axis float array argument 0, not a ndarray (2-axis "
            "float array)",
        ),
        # exported for floats, the code follows the rules of real numbers: complex ones are refused
        (
            "model",
            "np.ones(3), 0.05",
            "np.ones(3) + 1j, 0.05",
            "model_vjp was exported for a 1-axis float array argument 0, not a ndarray (1-axis "
            "complex array)",
        ),
        # exported for two arrays of one shape, the code adds them with no unbroadcast: arrays of
        # two shapes are refused
        (
            "model",
            "np.ones(3), np.ones(3)",
            "np.ones(3), np.ones(1)",
            "model_vjp was exported for arguments [0, 1] of one shape, not of the shapes [(3,), "
            "(1,)]",
        ),
    ],
)
def test_an_exported_module_refuses_arguments_it_was_not_built_for(
    tmp_path, name, args, wrong, said
) -> None:
    """The module refuses arguments of another kind than it was built for, rather than return a
    gradient of the wrong shape."""
    ast_ad.export(
        ast_ad.grad(getattr(cli_model, name), (0, 1)),
        str(tmp_path / f"{name}_export.py"),
        *eval(f"({args},)"),
    )  # noqa: S307 -- the test's own literals
    script = BLOCK_AST_AD + (
        f"import numpy as np\nsys.path.insert(0, {str(tmp_path)!r})\nimport {name}_export\n"
        f"print({name}_export.{name}_vjp({args})[0])\n"
        f"try:\n    {name}_export.{name}_vjp({wrong})\nexcept TypeError as e:\n    "
        "print('refused:', e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", script], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert f"refused: {said}" in done.stdout


def test_without_graphviz_a_notebook_is_told_once(monkeypatch) -> None:
    import importlib
    import warnings

    graph_module = importlib.import_module("ast_ad.show.graph")

    monkeypatch.setattr(graph_module.shutil, "which", lambda name: None)
    monkeypatch.setattr(graph_module, "_told", [False])
    picture = ast_ad.graph(cli_model.f, 2.0, 3.0, argnums=(0, 1))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        assert picture._repr_svg_() is None and picture._repr_svg_() is None
    assert len(said) == 1 and "apt-get install graphviz" in str(said[0].message)


def test_an_exported_module_takes_axes_of_other_lengths_than_its_examples(tmp_path) -> None:
    """In a process, code is made for which axes of the arguments have one length
    (``kinds.labelled``: two products with as many rows need no ``unbroadcast``); an exported
    module is made without that, so a call whose lengths differ from the examples' (a second
    weight of one row, whose product broadcasts) gets its gradient, not a refusal."""
    import importlib.util

    rng = np.random.default_rng(3)
    w, u, x, y = rng.standard_normal((3, 2)), rng.standard_normal((3, 4)), rng.standard_normal(2), \
        rng.standard_normal(4)
    gradient = ast_ad.grad(cli_model.two_products, (0, 1))
    gradient(w, u, x, y)
    assert "unbroadcast_to" not in ast_ad.source(gradient)
    path = tmp_path / "two_products_export.py"
    ast_ad.export(gradient, str(path), w, u, x, y)
    spec = importlib.util.spec_from_file_location("two_products_export", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    row = u[:1].copy()
    _, exported = module.two_products_vjp(w, row, x, y)
    for got, want in zip(exported, gradient(w, row, x, y), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    assert exported[1].shape == (1, 4)
