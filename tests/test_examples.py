"""The examples run as tests: each prints what the README says it prints."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).parent.parent / "examples"


def run(name: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def test_quickstart_prints_the_worked_example() -> None:
    out = run("quickstart.py")
    assert "y      = 6.552027172500" in out
    assert "dy/dx1 = 3.500000000000" in out
    assert "dy/dx2 = 2.989992496600" in out
    assert "x2_bar = -out_bar * np.cos(x2) + out_bar * x1" in out
    assert "The runtime tracer agrees: True" in out
    assert "Forward mode along (1, 0): y_dot = 3.500000000000" in out
    assert "[[-0.25, 1.0], [1.0, 0.14112000806]]" in out  # -1/x1^2, 1, and sin(x2)


def test_the_benchmark_times_correct_gradients() -> None:
    """Every workload the benchmark times gives the gradient the tracer gives (a fast wrong answer
    is no answer)."""
    import numpy as np

    import ast_ad

    sys.path.insert(0, str(EXAMPLES))
    try:
        import benchmark
    finally:
        sys.path.remove(str(EXAMPLES))
    for name, fn, argnums, args, _ in benchmark.workloads():
        ours = ast_ad.grad(fn, argnums)(*args)
        theirs = ast_ad.tracer.grad(fn, argnums)(*args)
        for a, b in zip(ours, theirs, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=name)
    # and the gradients written by hand that the benchmark measures against compute the same
    for fn, by_hand, args in (
        (benchmark.loop_math, benchmark.loop_math_by_hand, (0.5,)),
        (benchmark.rnn, benchmark.rnn_by_hand, (benchmark.W_RNN, np.full(64, 0.1))),
        (benchmark.mlp, benchmark.mlp_by_hand, benchmark.workloads()[4][3]),
    ):
        value, gradient = by_hand(*args)
        assert value == pytest.approx(fn(*args), rel=1e-14)
        ours = ast_ad.grad(fn, tuple(range(len(args))))(*args)
        for a, b in zip(
            ours if len(args) > 1 else (ours,),
            gradient if len(args) > 1 else (gradient,),
            strict=True,
        ):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    for by_hand in (benchmark.element_loop_by_hand, benchmark.element_loop_by_hand_taped):
        value, gradient = by_hand(benchmark.X_ELEMENTS)
        assert value == benchmark.element_loop(benchmark.X_ELEMENTS)
        np.testing.assert_allclose(
            gradient, ast_ad.grad(benchmark.element_loop)(benchmark.X_ELEMENTS), rtol=1e-12
        )
    # code as people write it (``ordinary``): against the tracer and the gradients written by hand,
    # the leapfrog's checkpointed gradient too
    rng = np.random.default_rng(5)
    for fn, by_hand, argnums, args in (
        (benchmark.rnn_dot, benchmark.rnn_dot_by_hand, (0, 1),
         (benchmark.W_RNN, benchmark.U_RNN, rng.standard_normal((50, 32)))),
        (benchmark.leapfrog, benchmark.leapfrog_by_hand, (0, 1, 2),
         (rng.standard_normal(30), rng.standard_normal(30), 0.7, 0.01, 40)),
    ):
        value, gradient = by_hand(*args)
        assert value == pytest.approx(fn(*args), rel=1e-12)
        theirs = ast_ad.tracer.grad(fn, argnums)(*args)
        for snapshots in (None, 4):
            ours = ast_ad.grad(fn, argnums, checkpoints=snapshots)(*args)
            for a, b, c in zip(ours, gradient, theirs, strict=True):
                np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
                np.testing.assert_allclose(a, c, rtol=1e-10, atol=1e-12)
    # GradBench's ``ode`` gradient by hand (``arrays``), against the tracer's of the eval's code
    sys.path.insert(0, str(EXAMPLES.parent / "benchmarks" / "gradbench"))
    try:
        from ast_ad_gradbench import ode
    finally:
        sys.path.pop(0)
    x_ode = rng.random(7)
    np.testing.assert_allclose(benchmark.ode_by_hand(x_ode, 6),
                               ast_ad.tracer.grad(ode.last)(x_ode, 6), rtol=1e-12, atol=1e-14)
    # the Jacobian and Hessian written by hand that ``batched`` measures against: the tracer's
    x, w = rng.standard_normal(12) * 0.5, rng.standard_normal(200) * 0.1
    traced = np.stack([ast_ad.tracer.jvp(benchmark.chained, (x,), (e,))[1] for e in np.eye(12)],
                      axis=1)
    np.testing.assert_allclose(benchmark.chained_jacobian_by_hand(x), traced, rtol=1e-10,
                               atol=1e-12)
    gradient = ast_ad.tracer.grad(benchmark.logistic_loss)
    differences = np.stack([(gradient(w + 1e-6 * e) - gradient(w - 1e-6 * e)) / 2e-6
                            for e in np.eye(200)[:5]])
    np.testing.assert_allclose(benchmark.logistic_hessian_by_hand(w)[:5], differences, rtol=1e-5,
                               atol=1e-7)
    # tangent-ad's element loop, written with len(x), is the same function
    assert benchmark.element_loop_len(benchmark.X_ELEMENTS) == benchmark.element_loop(
        benchmark.X_ELEMENTS
    )
    np.testing.assert_array_equal(ast_ad.grad(benchmark.element_loop_len)(benchmark.X_ELEMENTS),
                                  ast_ad.grad(benchmark.element_loop)(benchmark.X_ELEMENTS))


def test_the_benchmark_s_det_and_lstm_rows_time_correct_derivatives() -> None:
    """``benchmark.py sequences``: GradBench's ``det`` gradient is det(a) inv(a)^T, and each
    ``lstm`` gradient agrees with central differences along a random direction (the checks the
    table runs before it times)."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        import benchmark
    finally:
        sys.path.remove(str(EXAMPLES))
    cases = benchmark.det_lstm_evals()
    assert [name.split(",")[0] for name, *_ in cases] == ["det", "lstm", "lstm"]
    for name, _, derivative, args, checked, _, _ in cases:
        assert checked(derivative(*args)), name


def test_tangent_ad_in_the_benchmark_computes_the_gradients_ast_ad_computes() -> None:
    """Where tangent-ad is installed (not a dependency: ``pip install tangent-ad`` to time it), each
    gradient of its that the first table times is ast_ad's; the rows it cannot differentiate are the
    ones the table says."""
    import numpy as np

    import ast_ad

    pytest.importorskip("tangent")
    sys.path.insert(0, str(EXAMPLES))
    try:
        import benchmark
    finally:
        sys.path.remove(str(EXAMPLES))
    missing = []
    for name, fn, argnums, args, _ in benchmark.workloads():
        theirs = benchmark.tangent_grad(fn, argnums)
        if theirs is None:
            missing.append(fn)
            continue
        ours = ast_ad.grad(fn, argnums)(*args)  # (a tuple: argnums is one)
        given = theirs(*args)
        for a, b in zip(ours, given if len(argnums) > 1 else (given,), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=name)
    assert missing == [benchmark.loop_math]  # no rule for math.sin


def test_the_benchmark_times_correct_second_order_derivatives() -> None:
    """The forward-mode and second-order rows compute what autograd computes (or, for math.sin and
    the element loop, the tracer's gradient along the tangent)."""
    import autograd
    import numpy as np

    import ast_ad

    sys.path.insert(0, str(EXAMPLES))
    try:
        import benchmark
    finally:
        sys.path.remove(str(EXAMPLES))
    for name, fn, args, ours_of, autograd_of, _ in benchmark.second_order_workloads():
        # autograd's Hessian of the element loop takes seconds: check it at a smaller size
        if "Hessian" in name:
            args = (args[0][:12],)
        ours = ours_of(fn)(*args)
        # (its jvp rows move every entry by one: the tangent is the gradient's sum)
        if autograd_of is None:
            expected = (fn(*args), np.sum(ast_ad.tracer.grad(fn)(*args)))
        else:
            expected = autograd_of(autograd, benchmark.with_autograd_numpy(fn))(*args)
        ours = ours[1] if "jvp" in name else ours
        expected = expected[1] if "jvp" in name else expected
        np.testing.assert_allclose(ours, expected, rtol=1e-9, atol=1e-11, err_msg=name)


@pytest.mark.parametrize("where", [[], ["--cluster"]], ids=["threads", "local-cluster"])
def test_dask_regression_small(where: list[str]) -> None:
    """A small version of the dask example, on threads and on a dask.distributed LocalCluster: the
    lazy gradient equals the one on numpy arrays, and gradient descent lowers the loss."""
    pytest.importorskip("dask.array")
    pytest.importorskip("dask.distributed")
    out = run("dask_regression.py", "--rows", "20000", "--chunk", "5000", "--check", *where)
    assert "gradient on dask = gradient on numpy: True" in out
    losses = [float(v) for v in re.findall(r"loss (\d+\.\d+)", out)]
    assert len(losses) == 3 and losses[0] > losses[1] > losses[2]
    assert ("LocalCluster" in out) == bool(where)
    assert float(re.search(r"peak resident memory: (\d+) MB", out).group(1)) < 1000


def test_the_benchmark_checkpoints_the_same_gradient() -> None:
    """The checkpointing table's workload: the same gradient with and without snapshots, and
    autograd's."""
    import autograd
    import numpy as np

    import ast_ad

    sys.path.insert(0, str(EXAMPLES))
    try:
        import benchmark
    finally:
        sys.path.remove(str(EXAMPLES))
    u0 = np.linspace(0.0, 1.0, 7)
    want = ast_ad.grad(benchmark.simulation)(u0, 60)
    for snapshots in (2, 10):
        assert np.array_equal(
            ast_ad.grad(benchmark.simulation, checkpoints=snapshots)(u0, 60), want
        )
    theirs = autograd.grad(benchmark.with_autograd_numpy(benchmark.simulation))(u0, 60)
    np.testing.assert_allclose(want, theirs, rtol=1e-12)
    np.testing.assert_allclose(ast_ad.grad(benchmark.simulation_10000)(u0),
                               ast_ad.grad(benchmark.simulation)(u0, 10_000), rtol=1e-12)


def test_every_example_says_its_options_and_their_defaults() -> None:
    """``--help`` of each example with options names every option with its default."""
    text = run("dask_regression.py", "--help")
    entries = text.split("options:")[1].split("\n  -")  # each option's entry, wrapped over lines
    for option in ("-rows", "-features", "-chunk", "-steps", "-rate"):
        entry = next(e for e in entries if e.startswith(option + " "))
        assert "(default:" in entry, (option, text)
