"""Python's ``UnboundLocalError``, kept (``ast_ad.analysis.unbound``): a name that only a loop or a
branch binds, read where that loop ran no step or the other path was taken, raises in every
transformation as it does in Python; where it was bound, the derivatives are the usual ones."""

from __future__ import annotations

import importlib.util
import itertools
import math
import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

import ast_ad
from ast_ad.testing import tracer
from tests.oracles import assert_fd


def loop_only(x, n):
    for _ in range(n):
        y = x * 2.0
    return y * x


def branch_only(x):
    if x > 0.0:
        y = np.sin(x) * x
    return y + x


def index_after(x, n):
    s = x
    for i in range(n):  # noqa: B007 (read after the loop, where it may be unbound: the case under test)
        s = s * x + 1.0
    return s * i


def read_on_later_steps(x, n):
    s = x
    for i in range(n):
        if i > 0:
            s = s + y * y  # noqa: F821 (bound by the step before: Python runs this)
        y = x * (i + 1.0)  # noqa: F841 (read by the next step)
    return s


def stops_early(x, c):
    s = x
    for i in range(5):
        if i > c:
            break
        last = s * x
    return last + s


def literal_range(x):
    for i in range(3):
        y = x * i
    return y + x


TRANSFORMATIONS = {
    "grad": lambda f, args: ast_ad.grad(f)(*args),
    "value_and_grad": lambda f, args: ast_ad.value_and_grad(f)(*args),
    "jvp": lambda f, args: ast_ad.jvp(f, args, (1.0,) + (None,) * (len(args) - 1)),
    "vjp": lambda f, args: ast_ad.vjp(f, *args)[1](1.0),
    "hessian": lambda f, args: ast_ad.hessian(f)(*args),
    "grad of grad": lambda f, args: ast_ad.grad(ast_ad.grad(f))(*args),
}
UNBOUND = [
    (loop_only, (1.5, 0)),
    (branch_only, (-0.5,)),
    (index_after, (0.7, 0)),
    (stops_early, (0.3, -1)),
]


@pytest.mark.parametrize("how", TRANSFORMATIONS)
@pytest.mark.parametrize("fn, args", UNBOUND, ids=[c[0].__name__ for c in UNBOUND])
def test_a_read_python_would_refuse_raises_as_python_does(fn, args, how) -> None:
    with pytest.raises(UnboundLocalError):
        fn(*args)
    with pytest.raises(UnboundLocalError, match="cannot access local variable"):
        TRANSFORMATIONS[how](fn, args)


def test_the_generated_check_names_the_users_line() -> None:
    """Where the generated code raises (``jvp`` runs it without the function's own run first), the
    message says where, as Python's own traceback would."""
    with pytest.raises(
        UnboundLocalError, match=r"test_unbound\.py:\d+: cannot access local variable 'y'"
    ):
        ast_ad.jvp(loop_only, (1.5, 0), (1.0, None))
    text = ast_ad.source(loop_only, stage="normalized")
    assert (
        "y_bound = False" in text
        and "y_bound = True" in text
        and "check_bound(y_bound, 'y', '" in text
    )


BOUND = [
    (loop_only, (1.5, 3)),
    (branch_only, (0.5,)),
    (index_after, (0.7, 3)),
    (read_on_later_steps, (0.4, 4)),
    (stops_early, (0.3, 2)),
    (literal_range, (0.9,)),
]


@pytest.mark.parametrize("fn, args", BOUND, ids=[c[0].__name__ for c in BOUND])
def test_where_the_name_is_bound_the_derivatives_are_pythons(fn, args) -> None:
    value, slope = ast_ad.value_and_grad(fn)(*args)
    assert value == fn(*args)
    assert slope == pytest.approx(tracer.grad(fn)(*args), rel=1e-12, abs=1e-15)
    assert_fd(fn, args, (0,), (slope,))
    assert ast_ad.jvp(fn, args, (1.0,) + (None,) * (len(args) - 1))[1] == pytest.approx(
        slope, rel=1e-12
    )
    curvature = ast_ad.grad(ast_ad.grad(fn))(*args)
    h = 1e-5
    step = [(args[0] + d, *args[1:]) for d in (h, -h)]
    fd = (ast_ad.grad(fn)(*step[0]) - ast_ad.grad(fn)(*step[1])) / (2 * h)
    assert math.isclose(curvature, fd, rel_tol=1e-5, abs_tol=1e-7)


def test_a_name_bound_before_every_read_gets_no_check() -> None:
    """A loop over ``range(3)`` without ``break`` runs its body: ``y`` is bound after it. So is a
    name a loop binds but nothing reads after it (``_``, ``i`` in the corpus), and one bound before
    the loop."""
    from tests import corpus_control

    for fn in (
        literal_range,
        corpus_control.scalar_loop,
        corpus_control.early_returns,
        corpus_control.rnn,
    ):
        assert "check_bound" not in ast_ad.source(fn, stage="normalized")
    # (range(5), but it may break first)
    assert "check_bound" in ast_ad.source(stops_early, stage="normalized")


@pytest.mark.long  # (every transformation of each draw: 30 s; .ci/run runs it as a step of its own)
@settings(max_examples=60, deadline=None)
@given(
    x=st.floats(-2.0, 2.0).filter(lambda v: abs(v) > 1e-3),
    n=st.integers(0, 3),
    c=st.integers(-2, 5),
)
def test_each_transformation_raises_exactly_where_python_does(x, n, c) -> None:
    """Random inputs: where Python's run raises, every transformation raises the same error; where
    it does not, the gradient is the tracer's."""
    for fn, args in (
        (loop_only, (x, n)),
        (branch_only, (x,)),
        (index_after, (x, n)),
        (read_on_later_steps, (x, n)),
        (stops_early, (x, c)),
    ):
        try:
            fn(*args)
        except UnboundLocalError:
            for how in ("grad", "jvp", "vjp"):
                with pytest.raises(UnboundLocalError):
                    TRANSFORMATIONS[how](fn, args)
            continue
        assert np.allclose(ast_ad.grad(fn)(*args), tracer.grad(fn)(*args), rtol=1e-12, atol=1e-15)


def test_a_compiled_gradient_raises_as_python_does() -> None:
    pytest.importorskip("numba")
    gradient = ast_ad.grad(loop_only, jit="numba")
    assert gradient(1.5, 3) == ast_ad.grad(loop_only)(1.5, 3) == 6.0
    with pytest.raises(UnboundLocalError):
        gradient(1.5, 0)


def test_an_exported_gradient_keeps_the_check(tmp_path) -> None:
    """``ast_ad.export`` copies ``check_bound`` with the other helpers: the module raises without
    ast_ad."""
    import runpy

    path = str(tmp_path / "loop_only_gradient.py")
    ast_ad.export(ast_ad.grad(loop_only), path, 1.5, 3)
    gradient = runpy.run_path(path)["loop_only_vjp"]
    assert gradient(1.5, 3) == (loop_only(1.5, 3), 6.0)
    with pytest.raises(
        UnboundLocalError, match=r"test_unbound\.py:\d+: cannot access local variable 'y'"
    ):
        gradient(1.5, 0)


# ---- random programs: names bound in loops and branches, read where they may not be --------------
DIRECTORY = tempfile.mkdtemp(prefix="ast_ad_unbound_")
_serial = itertools.count()
# (the lines, at the function's indentation, that may bind their names; each indented by 4 more)
BINDERS = [
    ["for i in range(n):", "    y = {e}"],
    ["if x > c:", "    y = {e}"],
    ["if x > c:", "    y = {e}", "else:", "    z = {e}"],
    ["for i in range(n):", "    if i > c:", "        break", "    y = {e}"],
    ["for i in range(3):", "    y = {e}"],
    ["k = 0", "while k < n:", "    k += 1", "    y = {e}"],
    ["for i in range(n):", "    if i > 0:", "        s = s + y * 0.5", "    y = {e}"],
    ["for i in range(n):", "    for j in range(n):", "        z = {e} + j"],
]
VALUES = ["np.sin(x) * s", "x * s + 1.0", "np.tanh(s * x)"]
READS = ["{v} * x", "s + {v}", "np.sin({v}) * s", "s * x"]


@st.composite
def unbound_programs(draw) -> str:
    """``def f(x, n, c)``: one or two statements that may bind names, reads of those names after
    them."""
    lines = ["import numpy as np", "", "", "def f(x, n, c):", "    s = x * 0.5"]
    bound: list[str] = []
    for _ in range(draw(st.integers(1, 2))):
        binder = [
            line.format(e=draw(st.sampled_from(VALUES))) for line in draw(st.sampled_from(BINDERS))
        ]
        lines += ["    " + line for line in binder]
        bound += [
            n
            for n in ("i", "y", "z")
            if any(f"{n} = " in line or f"for {n} " in line for line in binder)
        ]
        if draw(st.booleans()):
            lines.append(
                "    s = s + " + draw(st.sampled_from(READS)).format(v=draw(st.sampled_from(bound)))
            )
    lines.append(
        "    return " + draw(st.sampled_from(READS)).format(v=draw(st.sampled_from(bound))) + " + s"
    )
    return "\n".join(lines) + "\n"


def _load(source: str):
    name = f"ast_ad_unbound_{os.getpid()}_{next(_serial)}"
    path = os.path.join(DIRECTORY, name + ".py")
    with open(path, "w") as out:
        out.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.f


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    source=unbound_programs(),
    x=st.floats(-2.0, 2.0).filter(lambda v: abs(v) > 1e-3),
    n=st.integers(0, 3),
    c=st.integers(-1, 3),
)
def test_random_programs_raise_where_python_raises_and_match_the_tracer_elsewhere(
    source, x, n, c
) -> None:
    """Programs that bind names in loops (which may run no step, or stop early) and branches, and
    read them after: each transformation raises ``UnboundLocalError`` where Python's run does, and
    gives the tracer's gradient and tangent where it does not."""
    note(source)
    fn = _load(source)
    args = (x, n, c)
    try:
        value = fn(*args)
    except UnboundLocalError:
        event("Python raises")
        for how in ("grad", "jvp", "vjp"):
            with pytest.raises(UnboundLocalError):
                TRANSFORMATIONS[how](fn, args)
        return
    event(
        "checked" if "check_bound" in ast_ad.source(fn, stage="normalized") else "no check needed"
    )
    got_value, slope = ast_ad.value_and_grad(fn)(*args)
    assert got_value == value
    assert math.isclose(slope, tracer.grad(fn)(*args), rel_tol=1e-10, abs_tol=1e-12)
    assert math.isclose(
        ast_ad.jvp(fn, args, (1.0, None, None))[1], slope, rel_tol=1e-10, abs_tol=1e-12
    )


def _given(a, b):
    return a


def names_not_bound_yet_in_a_later_step(x0, x1):
    if x1 < 0.0:
        if x1 > -1.0:
            x0 = 1.0
        elif x1 > -5.0:
            return _given([0.5, 0.5], [0.5, 0.5])[0]
    elif x1 > 0.5:
        x0 = np.sin(x1)
    for i in range(3):
        x0 += 0.1 * i  # v and w are not bound yet in the first step: nothing to make again
        x1, x0 = x0, np.tanh(x0)
        for j, (v, w) in enumerate(zip([x0, 0.5], [0.5, x1], strict=True)):
            x1 = x1 + np.tanh(v) * w * (j + 1)
    return x1


def test_a_write_where_other_names_are_not_bound_yet_follows_nothing() -> None:
    """``x0 += ...`` in a loop whose later steps may find ``v`` and ``w`` sharing its object: in the
    first step neither is bound, and two names not bound yet are not one object (a long run of the
    random programs found the derivative raising Python's UnboundLocalError here, where Python
    runs)."""
    fn = names_not_bound_yet_in_a_later_step
    value, grads = ast_ad.value_and_grad(fn, (0, 1))(0.3, 0.7)
    assert value == fn(0.3, 0.7)
    assert_fd(fn, (0.3, 0.7), (0, 1), grads)
    value_f, tangent = ast_ad.jvp(fn, (0.3, 0.7), (1.0, -0.5))
    assert value_f == value and tangent == pytest.approx(grads[0] - 0.5 * grads[1], rel=1e-12)
