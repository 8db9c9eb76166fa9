"""Binomial checkpointing (``grad(f, checkpoints=c)``): revolve's counts, the same gradient to the
bit, memory of the snapshots plus one step, derivatives of checkpointed gradients, and which loops
are."""

from __future__ import annotations

import copy
import inspect
import math
import runpy
import tempfile
import tracemalloc
from functools import cache

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, note, reject, settings
from hypothesis import strategies as st

import ast_ad
from ast_ad import transform
from ast_ad.errors import ASTADError
from ast_ad.extend import defvjp
from ast_ad.modes.checkpointing import CheckpointWarning
from ast_ad.runtime import revolve
from ast_ad.testing.random_programs import programs
from tests import corpus_control
from tests.corpus import CASES as STRAIGHT
from tests.oracles import assert_fd, assert_same
from tests.strategies import few

# loops that checkpoints= cannot checkpoint say so in a warning (tested where it is the subject)
pytestmark = pytest.mark.filterwarnings("ignore::ast_ad.modes.checkpointing.CheckpointWarning")

CASES = STRAIGHT + corpus_control.CASES
DIRECTORY = tempfile.mkdtemp(prefix="ast_ad_checkpoints_")


# ---- the schedule --------------------------------------------------------------------------------
@cache
def fewest(steps: int, snapshots: int) -> int:
    """The fewest untaped steps any schedule needs: the recursion of ``ast_ad.revolve``,
    every split tried."""
    if steps <= 1:
        return 0
    if snapshots == 1:
        return steps * (steps - 1) // 2
    return min(m + fewest(steps - m, snapshots - 1) + fewest(m, snapshots) for m in range(1, steps))


def play(steps: int, snapshots: int) -> int:
    """Run the schedule on a model of the loop; check each action is possible, return the untaped
    steps."""
    state: int | None = 0
    stack: list[int] = []
    taped: int | None = None
    reversed_steps = []
    advanced = 0
    for kind, a, b in revolve.schedule(steps, snapshots):
        if kind == "advance":
            assert state == a and b > a
            state, advanced = b, advanced + b - a
        elif kind == "snapshot":
            assert state == a
            stack.append(a)
            assert len(stack) <= snapshots
        elif kind == "restore":
            state = stack[-1]
            assert state == a
        elif kind == "release":
            assert stack.pop() == a
        elif kind == "tape":
            assert state == a and taped is None
            taped, state = a, None  # the step's tape is kept, and the state moved on
        else:
            assert kind == "reverse" and taped == a
            taped = None
            reversed_steps.append(a)
    assert reversed_steps == list(range(steps - 1, -1, -1)) and not stack and taped is None
    return advanced


@pytest.mark.parametrize("snapshots", range(1, 7))
def test_the_schedule_is_possible_and_optimal(snapshots: int) -> None:
    for steps in range(0, 45):
        assert (
            play(steps, snapshots)
            == revolve.forward_steps(steps, snapshots)
            == fewest(steps, snapshots)
        )


@pytest.mark.parametrize(
    "steps, snapshots, advanced", [(1000, 10, 3636), (1000, 31, 2439), (10000, 100, 24747)]
)
def test_the_schedule_matches_the_closed_form(steps: int, snapshots: int, advanced: int) -> None:
    """t * l - C(s + t, t - 1) with C(s + t, s) >= l: 3.64 sweeps, 2.44 and 2.47 (issue 12's
    figures)."""
    t = revolve.repetitions(steps, snapshots)
    assert math.comb(snapshots + t, snapshots) >= steps > math.comb(snapshots + t - 1, snapshots)
    assert t * steps - math.comb(snapshots + t, t - 1) == advanced == play(steps, snapshots)


def test_the_backward_actions_are_a_lazy_sequence() -> None:
    sweep, reversal = revolve.revolve(range(300), 5)
    actions = list(revolve.schedule(300, 5))
    first = actions.index(("tape", 299, 300))
    assert [("advance", a, b) for a, b in sweep] == [
        x for x in actions[:first] if x[0] == "advance"
    ]
    assert list(reversal) == actions[first + 1:] == list(reversal)  # read twice: each starts again
    assert len(reversal) == len(actions) - first - 1
    # forward mode reads by index
    assert [reversal[k] for k in range(len(reversal))] == actions[first + 1:]
    assert reversal[3] == actions[first + 4] and reversal[0] == actions[first + 1]
    with pytest.raises(IndexError):
        reversal[len(reversal)]


def test_a_loop_without_a_length_is_refused() -> None:
    with pytest.raises(ASTADError, match="length is not known"):
        revolve.revolve(iter(range(3)), 2)


# ---- counting the steps the gradient runs --------------------------------------------------------
STEPS_RUN = [0]


def counted(u):
    """The identity, counting its calls: one per loop step run, taped or not."""
    STEPS_RUN[0] += 1
    return u


defvjp(counted, lambda g, ans, u: g)


def simulate(u, steps):
    for _ in range(steps):
        u = counted(u)
        u = u + 0.01 * np.sin(u)
    return np.sum(u)


@pytest.mark.parametrize("steps, snapshots", [(1000, 10), (1000, 31), (200, 3), (50, 1), (7, 10)])
def test_the_gradient_runs_revolves_count_of_steps(steps: int, snapshots: int) -> None:
    u0 = np.linspace(0.0, 1.0, 5)
    plain = ast_ad.grad(simulate)
    STEPS_RUN[0] = 0
    want = plain(u0, steps)
    assert STEPS_RUN[0] == steps
    checkpointed = ast_ad.grad(simulate, checkpoints=snapshots)
    STEPS_RUN[0] = 0
    got = checkpointed(u0, steps)
    # untaped, then each step taped once
    assert STEPS_RUN[0] == revolve.forward_steps(steps, snapshots) + steps
    assert np.array_equal(got, want)


def test_peak_memory_is_the_snapshots_and_one_step() -> None:
    """1,000 floats of state (8 KB), 400 steps: un-checkpointed, the tape keeps three arrays a
    step."""
    u0 = np.linspace(0.0, 1.0, 1000)
    state = u0.nbytes

    def peak(gradient) -> int:
        gradient(u0, 3)  # transformed and compiled before measuring
        tracemalloc.start()
        try:
            gradient(u0, 400)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    plain = peak(ast_ad.grad(simulate))
    assert plain > 400 * 2 * state
    for snapshots in (4, 16):
        used = peak(ast_ad.grad(simulate, checkpoints=snapshots))
        # the snapshots, one step's tape (three arrays) and the step's own arrays and adjoints
        assert used < (snapshots + 16) * state, (snapshots, used / state)


# ---- checkpoints="auto": as many snapshots as fit, chosen when the loop starts -------------------
def test_auto_keeps_as_many_snapshots_as_fit_in_its_budget() -> None:
    state = np.zeros(1000)  # 8,000 bytes a snapshot
    assert revolve.size_of(state) == 8000 and revolve.size_of((state, 2.0, [state])) == 16008
    assert revolve.size_of({"w": state}) == 8000 and revolve.size_of(None) == 8
    assert revolve.auto_snapshots(1000, state, budget=80_000) == 10
    # never fewer than one, never more than the steps - 1 that compute each step again once
    assert revolve.auto_snapshots(1000, state, budget=100) == 1
    assert revolve.auto_snapshots(7, state, budget=10**9) == 6
    assert revolve.auto_snapshots(1, state, budget=10**9) == 1


@pytest.mark.parametrize("budget, snapshots", [(400, 10), (40, 1), (10**9, 999)])
def test_auto_runs_revolves_count_of_steps_for_what_fits(budget, snapshots, monkeypatch) -> None:
    """``simulate``'s state is ``u``, five floats (40 bytes): the budget decides the snapshots, and
    the gradient runs the steps revolve's schedule with that many runs, to the same bits."""
    monkeypatch.setattr(revolve, "AUTO_BYTES", budget)
    u0 = np.linspace(0.0, 1.0, 5)
    want = ast_ad.grad(simulate)(u0, 1000)
    STEPS_RUN[0] = 0
    got = ast_ad.grad(simulate, checkpoints="auto")(u0, 1000)
    assert STEPS_RUN[0] == revolve.forward_steps(1000, snapshots) + 1000
    assert np.array_equal(got, want)


def test_auto_keeps_its_memory_within_the_budget(monkeypatch) -> None:
    u0 = np.linspace(0.0, 1.0, 1000)
    state = u0.nbytes
    monkeypatch.setattr(revolve, "AUTO_BYTES", 8 * state)
    gradient = ast_ad.grad(simulate, checkpoints="auto")
    gradient(u0, 3)
    tracemalloc.start()
    try:
        gradient(u0, 400)
        used = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert used < (8 + 16) * state, used / state


def test_auto_says_so_above_the_loop_and_stands_alone_when_exported(tmp_path) -> None:
    u0 = np.linspace(0.0, 1.0, 4)
    gradient = ast_ad.grad(loss, checkpoints="auto")
    text = ast_ad.source(gradient, u0, 30)
    assert "checkpointed, as many snapshots of" in text and "as fit in revolve.AUTO_BYTES" in text
    assert "revolve(r, 'auto', " in text
    path = ast_ad.export(gradient, str(tmp_path / "exported_auto.py"), u0, 30)
    namespace = runpy.run_path(path)
    assert np.array_equal(namespace["loss_vjp"](u0, 30)[1], ast_ad.grad(loss)(u0, 30))


# ---- the same gradient, to the bit ---------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=[f"{c.fn.__name__}-{i}" for i, c in enumerate(CASES)])
@settings(max_examples=few(3), deadline=None)
@given(data=st.data())
def test_corpus_gradients_are_bit_identical(case, data) -> None:
    args = data.draw(case.args)
    value, want = ast_ad.value_and_grad(case.fn, case.argnums)(*args)
    for snapshots in (1, 2, 3, "auto"):
        got_value, got = ast_ad.value_and_grad(case.fn, case.argnums, checkpoints=snapshots)(*args)
        assert got_value == value
        for g, w in zip(got, want, strict=True):
            assert np.array_equal(g, w)


def test_corpus_loops_are_checkpointed() -> None:
    """The corpus has checkpointed loops of every kind the analysis allows (so the test above is not
    empty)."""
    for fn in (corpus_control.scalar_loop, corpus_control.rnn, corpus_control.nested_loops,
               corpus_control.enumerate_zip_reversed, corpus_control.shared_weights):
        assert "checkpointed, at most 2 snapshots" in ast_ad.source(ast_ad.grad(fn, checkpoints=2))


@pytest.mark.parametrize(
    "family", [{}, {"mutation": True}, {"lists": True}], ids=["plain", "mutation", "lists"]
)
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much], deadline=None)
@given(data=st.data())
def test_random_programs_are_bit_identical(family, data) -> None:
    program = data.draw(programs(**family))
    note(program.source)
    fn = program.load(DIRECTORY)
    args = program.arguments(data)
    argnums = tuple(range(program.arity))
    try:
        value, want = ast_ad.value_and_grad(fn, argnums)(*copy.deepcopy(args))
    except ast_ad.errors.ASTADError:
        reject()  # refused on purpose (an alias written in place): the other tests check that
    snapshots = data.draw(st.integers(1, 4))
    checkpointed = ast_ad.value_and_grad(fn, argnums, checkpoints=snapshots)
    event(
        "checkpointed"
        if "checkpointed, at most" in ast_ad.source(checkpointed, *args)
        else "no loop checkpointed"
    )
    got_value, got = checkpointed(*copy.deepcopy(args))
    assert np.array_equal(got_value, value, equal_nan=True)
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(g, w, equal_nan=True)


def test_vjp_takes_checkpoints_and_its_function_can_be_called_twice() -> None:
    u0 = np.linspace(0.0, 1.0, 4)
    out, vjp_fn = ast_ad.vjp(lambda u: rnn_like(u, 40), u0, checkpoints=3)
    want = ast_ad.vjp(lambda u: rnn_like(u, 40), u0)[1](np.ones(4))
    assert np.array_equal(vjp_fn(np.ones(4))[0], want[0])
    assert np.array_equal(vjp_fn(np.ones(4))[0], want[0])
    assert np.array_equal(out, rnn_like(u0, 40))


W = np.array(
    [[0.5, -0.2, 0.1, 0.0], [0.3, 0.4, -0.1, 0.2], [0.0, 0.1, 0.6, -0.3], [0.2, 0.0, 0.1, 0.5]]
)


def rnn_like(h, steps):
    for t in range(steps):
        z = W @ h + 0.1 * t
        if t % 3 == 0:
            h = np.tanh(z)
        else:
            h = 0.5 * h + 0.5 * np.sin(z)
    return h


# ---- checkpointed gradients stay differentiable --------------------------------------------------
def loss(h, steps):
    return np.sum(rnn_like(h, steps) ** 2)


def test_forward_mode_over_a_checkpointed_gradient() -> None:
    h0, v = np.linspace(-0.5, 0.5, 4), np.array([1.0, -2.0, 0.5, 0.25])
    g_ckpt, hv_ckpt = ast_ad.jvp(ast_ad.grad(loss, checkpoints=3), (h0, 30), (v, None))
    g, hv = ast_ad.jvp(ast_ad.grad(loss), (h0, 30), (v, None))
    assert np.array_equal(g_ckpt, g)
    g_auto, hv_auto = ast_ad.jvp(ast_ad.grad(loss, checkpoints="auto"), (h0, 30), (v, None))
    assert np.array_equal(g_auto, g) and np.allclose(hv_auto, hv, rtol=1e-12)
    np.testing.assert_allclose(hv_ckpt, hv, rtol=1e-12, atol=1e-14)
    eps = 1e-6  # against finite differences of the gradient
    fd = (ast_ad.grad(loss)(h0 + eps * v, 30) - ast_ad.grad(loss)(h0 - eps * v, 30)) / (2 * eps)
    np.testing.assert_allclose(hv_ckpt, fd, rtol=1e-6, atol=1e-8)


def test_second_derivative_of_a_scalar_loop() -> None:
    def f(x, n):
        s = 0.0
        for i in range(n):
            s = s + math.sin(x * s + i)
        return s
    second = ast_ad.grad(ast_ad.grad(f, checkpoints=2))(0.7, 25)
    assert second == ast_ad.grad(ast_ad.grad(f))(0.7, 25)
    assert_fd(lambda x: ast_ad.grad(f)(x, 25), (0.7,), (0,), (second,))


# ---- which loops are checkpointed ----------------------------------------------------------------
def with_print(x, n):
    s = x
    for i in range(n):
        print(i)
        s = s * 1.01
    return s


def with_noise(x, n):
    s = x
    for _ in range(n):
        s = s * np.random.rand()
    return s


def in_place(x):
    y = np.ones(len(x))
    for i in range(1, len(x)):
        y[i] = y[i - 1] * x[i]
    return np.sum(y)


def calls_a_printer(x, n):
    s = x
    for _ in range(n):
        s = with_print(s, 1)
    return s


def in_a_branch(x, n):
    s = x
    if n > 0:
        for _ in range(n):
            s = s * 1.5
    return s


@pytest.mark.parametrize("fn, args, why", [
    (corpus_control.while_active, (0.5,), "a while loop's length is not known"),
    (corpus_control.break_continue, (0.5,), "it may break"),
    (corpus_control.list_building, (0.5,), "changes a list"),
    (with_print, (0.5, 3), "has an effect"),
    (with_noise, (0.5, 3), "which has no rule"),
    (in_place, (np.ones(4),), "writes arrays in place"),
    (calls_a_printer, (0.5, 3), "it calls with_print, where line"),
], ids=lambda p: getattr(p, "__name__", None))
def test_loops_that_are_not_checkpointed_say_why(fn, args, why, capsys) -> None:
    """In a comment of the generated code, and in a warning when the gradient is transformed, naming
    the loop's line (checkpoints= was asked for, and this loop keeps its whole tape)."""
    transform.forget()
    with pytest.warns(
        CheckpointWarning, match=f"{inspect.getsourcefile(fn)}:\\d+: checkpoints= leaves"
    ):
        text = ast_ad.source(ast_ad.grad(fn, checkpoints=2), *args)
    assert "not checkpointed: " in text and why in text
    assert "revolve(" not in text
    if fn is with_noise:
        np.random.seed(5)
        first = ast_ad.grad(fn, checkpoints=2)(*args)
        np.random.seed(5)
        assert first == ast_ad.grad(fn)(*args)
    else:
        assert np.array_equal(ast_ad.grad(fn, checkpoints=2)(*args), ast_ad.grad(fn)(*args))


def test_loops_of_the_functions_f_calls_are_checkpointed() -> None:
    text = ast_ad.source(ast_ad.grad(loss, checkpoints=3), np.ones(4), 30)
    assert "def rnn_like_fwd(" in text and "checkpointed, at most 3 snapshots of h" in text


def test_only_loops_at_the_top_level_are_checkpointed() -> None:
    text = ast_ad.source(ast_ad.grad(in_a_branch, checkpoints=2), 0.5, 3)
    assert "checkpointed" not in text
    assert ast_ad.grad(in_a_branch, checkpoints=2)(0.5, 3) == ast_ad.grad(in_a_branch)(0.5, 3)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "10", np.array(["auto"])])
def test_checkpoints_must_be_a_positive_integer(bad) -> None:
    with pytest.raises(ASTADError, match="positive integer"):
        ast_ad.grad(simulate, checkpoints=bad)


def test_checkpoints_with_jit_or_a_derivative_of_a_derivative_are_refused() -> None:
    with pytest.raises(ASTADError, match="jit= and checkpoints="):
        ast_ad.grad(simulate, jit="numba", checkpoints=3)
    with pytest.raises(ASTADError, match="plain function"):
        ast_ad.grad(ast_ad.grad(simulate), checkpoints=3)


def test_the_generated_code_of_a_checkpointed_loop_reads_as_a_schedule() -> None:
    text = ast_ad.source(ast_ad.grad(simulate, checkpoints=4), np.ones(3), 10)
    line = inspect.getsourcelines(simulate)[1] + 1
    assert f"# line {line}: checkpointed, at most 4 snapshots of u" in text
    assert "sweep, reversal = revolve(r, 4)" in text
    for kind in ("reverse", "tape", "advance", "snapshot", "restore", "release"):
        assert f"action == '{kind}'" in text
    # forward
    assert text.count("for t in r[start:stop]:") == 1 and text.count("for t in r[-1:]:") == 1
    assert (
        text.count("for t in r[begin:end]:") == 2
        and text.count("for t in reversed(r[begin:end]):") == 1
    )
    assert text.count("snapshots.append(u)") == 2  # in the first sweep, and as a backward action


def _block_after(text: str, header: str) -> str:
    """The lines of ``text``'s block under the line ``header`` (stripped), dedented to it."""
    lines = text.splitlines()
    k = next(k for k, line in enumerate(lines) if line.strip() == header)
    indent = len(lines[k]) - len(lines[k].lstrip())
    block = []
    for line in lines[k + 1:]:
        if len(line) - len(line.lstrip()) <= indent:
            break
        block.append(line[indent:])
    return "\n".join(block)


def test_the_steps_run_again_are_the_forward_passs_steps() -> None:
    """The schedule's ``tape`` and ``advance`` actions run a step as the forward pass runs its last,
    taped, step and its untaped segments (the backward pass is built first, with stand-ins for them:
    ``checkpointing.filled``)."""
    text = ast_ad.source(
        ast_ad.grad(corpus_control.rnn, (0, 1), checkpoints=2),
        np.array([0.3, -0.4]),
        np.linspace(-0.2, 0.2, 3),
    )
    taped, untaped = (
        _block_after(text, "for t in r[-1:]:"),
        _block_after(text, "for t in r[start:stop]:"),
    )
    assert "_tape.append(" in taped and "_tape" not in untaped and taped != untaped
    schedule = _block_after(text, "for action, begin, end in reversal:")
    assert (
        _block_after(_block_after(schedule, "elif action == 'tape':"), "for t in r[begin:end]:")
        == taped
    )
    assert (
        _block_after(_block_after(schedule, "elif action == 'advance':"), "for t in r[begin:end]:")
        == untaped
    )


def test_a_checkpointed_steps_arrays_read_only_for_their_shapes_are_taped_as_shapes() -> None:
    """The RNN's ``U @ (x * (t + 1))``: the backward pass reads that array only for its shape
    (``unbroadcast``), so the forward pass tapes its shape, in the checkpointed steps as in the loop
    unchecked; the steps' backward pass, in the schedule, reads the shape."""
    x, h0 = np.array([0.3, -0.4]), np.linspace(-0.2, 0.2, 3)
    text = ast_ad.source(ast_ad.grad(corpus_control.rnn, (0, 1), checkpoints=2), x, h0)
    reversed_steps = text.split("for action, begin, end in reversal:")[1].split(
        "elif action == 'tape':"
    )[0]
    assert "unbroadcast_to(" in reversed_steps and "_shape_tape.pop()" in reversed_steps
    assert "t3_tape" not in text  # (the array itself is not taped)
    got = ast_ad.grad(corpus_control.rnn, (0, 1), checkpoints=2)(x, h0)
    assert_same(got, ast_ad.grad(corpus_control.rnn, (0, 1))(x, h0))


def test_an_exported_checkpointed_gradient_stands_alone(tmp_path) -> None:
    """``ast_ad.export`` writes the schedule's module into the file: it runs without ast_ad's
    revolve."""
    u0 = np.linspace(0.0, 1.0, 4)
    gradient = ast_ad.grad(loss, checkpoints=3)
    path = ast_ad.export(gradient, str(tmp_path / "exported.py"), u0, 30)
    text = open(path).read()
    assert "\nfrom ast_ad" not in text and "\nimport ast_ad" not in text and "def revolve(" in text
    namespace = runpy.run_path(path)
    assert np.array_equal(namespace["loss_vjp"](u0, 30)[1], gradient(u0, 30))


# ---- containers as the loop's state --------------------------------------------------------------
def with_dict_parameters(params, h, c, xs):
    for x in xs:
        z = params["W"] @ h + x
        c = 0.9 * c + 0.1 * np.tanh(z)
        h = np.tanh(c) * params["b"]
    return np.sum(h * h) + np.sum(c)


def with_tuple_state(state, n):
    for _ in range(n):
        a, b = state
        state = (a * 0.9 + np.sin(b), b - 0.1 * a)
    return np.sum(state[0] * state[1])


def with_list_rebound(ws, n):
    """A list argument rebound to a new list each step (its adjoint starts as None:
    ``runtime.part``)."""
    total = 1.0
    for k in range(n):
        total = total + np.sum(ws[k % 2] * total)
        ws = [ws[1] * 0.5, ws[0] * 0.99]
    return total


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return np.array_equal(a, b)


CONTAINER_STATE = [
    (with_dict_parameters, ({"W": W[:2, :2], "b": np.array([1.0, 0.5])}, np.ones(2), np.zeros(2),
                            np.linspace(-1.0, 1.0, 14).reshape(7, 2)), (0, 1, 2), "c, h"),
    (with_tuple_state, ((np.ones(3), np.full(3, 0.5)), 9), 0, "state"),
    (with_list_rebound, ([np.ones(2), np.full(2, 0.3)], 8), 0, "total, ws"),
]


@pytest.mark.parametrize(
    "fn, args, argnums, state", CONTAINER_STATE, ids=[c[0].__name__ for c in CONTAINER_STATE]
)
def test_containers_as_the_loops_state(fn, args, argnums, state) -> None:
    want = ast_ad.grad(fn, argnums)(*args)
    assert_same(_leaves(want), _leaves(ast_ad.tracer.grad(fn, argnums)(*args)))
    for snapshots in (1, 2, 3):
        assert _same(ast_ad.grad(fn, argnums, checkpoints=snapshots)(*args), want)
    assert f"at most 2 snapshots of {state}" in ast_ad.source(
        ast_ad.grad(fn, argnums, checkpoints=2), *args
    )


def _leaves(tree):
    if isinstance(tree, dict):
        return [leaf for key in sorted(tree) for leaf in _leaves(tree[key])]
    if isinstance(tree, (tuple, list)):
        return [leaf for item in tree for leaf in _leaves(item)]
    return [tree]


def test_a_list_rebound_in_a_loop_against_finite_differences() -> None:
    """Its gradient was refused at run time before (the item of a None adjoint), and its
    Hessian-vector product."""
    ws, eps = [np.array([1.0, 0.8]), np.array([0.3, -0.2])], 1e-6
    grad = ast_ad.grad(with_list_rebound)
    g = grad(ws, 6)
    direction = [np.array([1.0, -0.5]), np.array([0.25, 0.5])]
    shifted = [[w + s * eps * d for w, d in zip(ws, direction, strict=True)] for s in (1, -1)]
    slope = (with_list_rebound(shifted[0], 6) - with_list_rebound(shifted[1], 6)) / (2 * eps)
    assert slope == pytest.approx(
        sum(np.dot(a, d) for a, d in zip(g, direction, strict=True)), rel=1e-6
    )
    _, hv = ast_ad.jvp(grad, (ws, 6), (direction, None))
    fd = [
        (a - b) / (2 * eps) for a, b in zip(grad(shifted[0], 6), grad(shifted[1], 6), strict=True)
    ]
    for a, b in zip(hv, fd, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def rebinds_its_index(x, xs, n):
    s = x
    for i in range(n):
        i = i * 2
        s = s * xs[i]
    return s


def noisy_inner_loop(x, n):
    s = x
    for _ in range(n):
        k = 0
        while np.random.rand() > 0.5:
            k = k + 1
        s = s * (1.0 + 0.01 * k)
    return s


def test_a_loop_variable_assigned_in_its_loop_is_refused_in_reverse_mode() -> None:
    """The backward loop read the loop's own value where the body had rebound it: a wrong gradient.
    Refused."""
    with pytest.raises(
        ast_ad.errors.LocatedError, match="loop variable i is assigned inside its loop"
    ):
        ast_ad.grad(rebinds_its_index, (0, 1))(1.0, np.linspace(0.5, 1.5, 8), 4)


def test_a_while_test_without_a_rule_keeps_its_loop_from_being_checkpointed() -> None:
    """Its test would run again with the step, drawing other numbers: the loop keeps its tape."""
    text = ast_ad.source(ast_ad.grad(noisy_inner_loop, checkpoints=2), 1.0, 20)
    assert "not checkpointed: " in text and "which has no rule" in text
    np.random.seed(3)
    first = ast_ad.grad(noisy_inner_loop, checkpoints=2)(1.0, 20)
    np.random.seed(3)
    assert first == ast_ad.grad(noisy_inner_loop)(1.0, 20)
