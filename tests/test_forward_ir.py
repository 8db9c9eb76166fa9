"""Forward mode maps IR to IR: what it makes is a function of ast_ad's IR that ``check_ir`` accepts
and that forward mode, and reverse mode, read again as it is, with no printing and parsing
between."""

from __future__ import annotations

import copy
import math
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ast_ad import runtime, transform
from ast_ad.api.arguments import shape_labels
from ast_ad.backend import emit, load
from ast_ad.core import registry
from ast_ad.errors import InPlaceAliasError
from ast_ad.ir import nodes as ir
from ast_ad.ir.nodes import CalleeRef
from ast_ad.modes import forward, reverse, reverse_code
from ast_ad.testing import tracer
from ast_ad.testing.random_programs import programs

FOLDER = tempfile.mkdtemp(prefix="ast_ad-forward-ir-")


def twice(fn, args: tuple, first: tuple, second: tuple):
    """``fn``'s forward-mode IR, differentiated again along ``second`` in the primal arguments (the
    first tangents held fixed), emitted and run: ``((out, out_dot), (out_dot2, out_dot_dot))``."""
    shapes = shape_labels(args)
    argnums = tuple(range(len(args)))
    once = forward.forward(transform.normalized(fn), argnums, shapes, transform.tangent)
    ir.check_ir(once.code)
    again = forward.forward(once.code, argnums, shapes + shapes, transform.tangent)
    ir.check_ir(again.code)
    emitted = emit.emit_units(forward.jvp_units(again))
    made = load.load(
        emitted.text, emitted.entry, emitted.namespace, emitted.bindings, emitted.files
    )
    return made.fn(*copy.deepcopy(args), *first, *second)


def reverse_of_forward(fn, args: tuple, first: tuple):
    """The gradient, in the primal arguments, of ``fn``'s derivative along ``first``: reverse mode
    over forward mode's IR (the Hessian times ``first``), emitted and run."""
    shapes = shape_labels(args)
    argnums = tuple(range(len(args)))
    once = forward.forward(transform.normalized(fn), argnums, shapes, transform.tangent)
    adjoint = reverse.reverse(once.code, argnums, shapes + shapes, transform.adjoint)
    emitted = emit.emit_units(reverse_code.gradient_units(adjoint, False))
    made = load.load(
        emitted.text, emitted.entry, emitted.namespace, emitted.bindings, emitted.files
    )
    return made.fn(*copy.deepcopy(args), *first, (0.0, 1.0))[1]


def _drawn(program, data) -> tuple:
    """The random program's function, and arguments drawn for it: floats and arrays only (the others
    take no tangent)."""
    fn, args = program.load(FOLDER), program.arguments(data)
    assume(all(isinstance(a, (float, np.ndarray)) for a in args))
    return fn, args


def _direction(args: tuple, rng) -> tuple:
    return tuple(
        float(rng.standard_normal()) if type(a) is float else rng.standard_normal(np.shape(a))
        for a in args
    )


def _close(a, b) -> bool:
    """Equal to rounding, entry by entry (a zero with no shape, as the tracer gives for an argument
    nothing depends on, against all the entries)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape and (a.ndim == 0 and not a or b.ndim == 0 and not b):
        a, b = np.broadcast_arrays(a, b)
    a, b = np.ravel(a), np.ravel(b)
    return a.shape == b.shape and all(not (math.isfinite(x) and math.isfinite(y)) or
                                      math.isclose(x, y, rel_tol=1e-7, abs_tol=1e-9 * (1 + abs(x)))
                                      for x, y in zip(a, b, strict=True))


def worked(x1, x2):
    return np.log(x1) + x1 * x2 - np.sin(x2)


def test_the_worked_example_twice_in_ir() -> None:
    """Second derivatives of the worked example at (2, 3) along (1, 0) then (0, 1): d2y/dx1dx2 =
    1."""
    (out, out_dot), (out_dot2, out_dot_dot) = twice(worked, (2.0, 3.0), (1.0, 0.0), (0.0, 1.0))
    assert math.isclose(out, 6.552027172500, rel_tol=1e-12) and math.isclose(
        out_dot, 3.5, rel_tol=1e-12
    )
    assert math.isclose(out_dot2, 2.989992496600, rel_tol=1e-11) and math.isclose(
        out_dot_dot, 1.0, rel_tol=1e-12
    )


def element_loop(x):
    y = np.zeros(3)
    for i in range(3):
        y[i] = x[i] * np.sin(x[i])
    return np.sum(y)


def test_reverse_mode_reads_forward_modes_in_place_writes() -> None:
    """Forward mode writes the loop's copies in place (``ir.SetItem``); reverse mode reads that IR
    (as ``assign_item``, ``ir.functional``) and gets the Hessian-vector product, 2 cos x - x sin x
    along ones."""
    x = np.array([0.1, 0.2, 0.3])
    once = forward.forward(
        transform.normalized(element_loop), (0,), shape_labels((x,)), transform.tangent
    )
    assert any(isinstance(s, ir.SetItem) for s in ir.walk(once.code.body))
    (hv,) = reverse_of_forward(element_loop, (x,), (np.ones(3),))
    np.testing.assert_allclose(hv, 2 * np.cos(x) - x * np.sin(x), rtol=1e-12)


def scaled_tanh(a, scale=0.5):
    return scale * np.tanh(a * a) + a


def calls_a_helper(x):
    y = scaled_tanh(x) * x
    return np.sum(y)


def test_a_helpers_forward_mode_is_read_again_as_ir() -> None:
    """``calls_a_helper``'s forward mode calls ``scaled_tanh``'s (``CalleeRef``); both modes read
    that call's callee as IR again (``Forwarder.derived_again``, ``Calls.derived_again``), against
    the tracer."""
    x, u, v = np.array([0.3, -0.2]), np.array([1.0, 0.5]), np.array([-0.4, 2.0])
    once = forward.forward(
        transform.normalized(calls_a_helper), (0,), shape_labels((x,)), transform.tangent
    )
    assert any(
        isinstance(s, ir.Assign)
        and isinstance(s.value, ir.Call)
        and isinstance(s.value.fn.obj, CalleeRef)
        for s in ir.walk(once.code.body)
    )
    (hv,) = reverse_of_forward(calls_a_helper, (x,), (u,))
    np.testing.assert_allclose(
        hv, tracer.grad(lambda x: tracer.jvp(calls_a_helper, (x,), (u,))[1])(x), rtol=1e-12
    )
    (_, _), (_, out_dot_dot) = twice(calls_a_helper, (x,), (u,), (v,))
    want = tracer.jvp(lambda x: tracer.jvp(calls_a_helper, (x,), (u,))[1], (x,), (v,))[1]
    assert math.isclose(out_dot_dot, want, rel_tol=1e-12)


@pytest.mark.long  # (6 s: in CI's step of its own, ``-m long``, off the five-minute run)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(lists=True), st.data())
def test_random_programs_twice_in_ir_against_the_tracer(program, data) -> None:
    """Forward mode of forward mode's IR, against the tracer's forward mode nested in itself."""
    fn, args = _drawn(program, data)
    rng = np.random.default_rng(3)
    first, second = _direction(args, rng), _direction(args, rng)
    try:
        want = tracer.jvp(lambda *xs: tracer.jvp(fn, xs, first), copy.deepcopy(args), second)
    except Exception:  # noqa: BLE001 -- what the tracer cannot run is not this test's
        assume(False)
    try:
        (out, out_dot), (out_dot2, out_dot_dot) = twice(fn, args, first, second)
    except InPlaceAliasError:
        assume(False)  # a refusal at the user's line (a write through an alias), not a number
    assert _close(want[0][0], out) and _close(want[0][1], out_dot)
    assert _close(want[1][0], out_dot2) and _close(want[1][1], out_dot_dot)


@settings(max_examples=max(10, settings.default.max_examples // 4), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(programs(lists=True), st.data())
def test_random_programs_reverse_over_forward_in_ir_against_the_tracer(program, data) -> None:
    """Reverse mode of forward mode's IR, against the tracer's gradient of its own forward mode."""
    fn, args = _drawn(program, data)
    first = _direction(args, np.random.default_rng(4))
    argnums = tuple(range(len(args)))
    try:
        want = tracer.grad(lambda *xs: tracer.jvp(fn, xs, first)[1], argnums)(*copy.deepcopy(args))
    except Exception:  # noqa: BLE001 -- what the tracer cannot run is not this test's
        assume(False)
    try:
        got = reverse_of_forward(fn, args, first)
    except InPlaceAliasError:
        assume(False)  # a refusal at the user's line (a write through an alias), not a number
    assert all(_close(w, g) for w, g in zip(want, got, strict=True))


def sum_minus(x):
    return np.sum(np.sum(x * x) - x)


def test_a_tangent_that_broadcasts_keeps_its_size_to_the_second_order() -> None:
    """``np.sum(x * x) - x``: the number's tangent is broadcast over the array. Its own tangent must
    be too, or the sum after it counts it once, not once an entry. The tracer (which adds a
    statement's tangent parts with ``add_adjoints``, whose forward rule brings its tangent to the
    sum's shape with ``fit``) and ast_ad agree with the closed form, 2 n <u, v>."""
    x, u, v = np.array([0.3, -0.2, 0.5]), np.array([1.0, 0.5, -1.0]), np.array([-0.4, 2.0, 0.3])
    closed = 2 * x.size * float(u @ v)
    traced = tracer.jvp(lambda *xs: tracer.jvp(sum_minus, xs, (u,)), (x,), (v,))[1][1]
    assert math.isclose(traced, closed, rel_tol=1e-12)
    (_, _), (_, out_dot_dot) = twice(sum_minus, (x,), (u,), (v,))
    assert math.isclose(out_dot_dot, closed, rel_tol=1e-12)
    part = tracer.tangent(
        registry.lookup(runtime.add_adjoints), 0, 1.5, np.zeros(3), (0.0, np.zeros(3)), {}
    )
    assert np.shape(part) == (3,) and np.all(part == 1.5)


def tanh_steps(x):
    for _ in range(3):
        x = np.tanh(x)
    return x


def test_a_tangent_that_reads_only_the_new_value_follows_its_statement() -> None:
    """``x = np.tanh(x)``'s tangent reads the new ``x`` alone: it comes after the statement, under
    the name, with no copy of the new value (``x_new``) to keep the old one."""
    import ast_ad

    text = ast_ad.source(tanh_steps, 0.3, stage="jvp")
    assert "x_new" not in text and "x_dot = x_dot * (1.0 - x * x)" in text
    assert text.index("x = np.tanh(x)") < text.index("x_dot = x_dot * (1.0 - x * x)")
    want, got = tracer.jvp(tanh_steps, (0.3,), (1.0,)), ast_ad.jvp(tanh_steps, (0.3,), (1.0,))
    assert all(math.isclose(a, b, rel_tol=1e-14) for a, b in zip(want, got, strict=True))


def summed_squares(x):
    total = 0.0
    for i in range(len(x)):
        total = total + x[i] ** 2
    return total


def test_a_number_written_as_a_literal_has_the_tangent_zero() -> None:
    """``total = 0.0``'s tangent is ``0.0``, which is what ``zeros_like`` of a number gives, written
    as such."""
    import ast_ad

    x, v = np.array([0.5, -1.0, 2.0]), np.array([1.0, 2.0, -0.5])
    text = ast_ad.source(summed_squares, x, stage="jvp")
    assert "total_dot = 0.0" in text and "zeros_like" not in text
    out, out_dot = ast_ad.jvp(summed_squares, (x,), (v,))
    assert out == tracer.jvp(summed_squares, (x,), (v,))[0] and math.isclose(
        out_dot, 2 * float(x @ v), rel_tol=1e-14
    )


M_LAYER = np.array([[0.5, -0.2, 0.1], [0.3, 0.8, -0.4], [-0.6, 0.2, 0.9]])
C_WIDE = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.25]])


def layer_sum(h, b):
    return np.sum(np.tanh(M_LAYER @ h + b))


def widened(x):
    return np.sum(np.sin(x + C_WIDE))


def test_a_sum_of_every_arguments_tangent_needs_no_fit() -> None:
    """``M @ h + b``'s tangent ``M @ h_dot + b_dot`` has the sum's shape (each argument's tangent is
    in it), so it is not brought to that shape (``fit``); ``x + C``, with ``C`` a constant wider
    than ``x``, still is, and both are right."""
    import ast_ad

    h, b, u, v = (
        np.array([0.1, -0.3, 0.7]),
        np.array([0.2, 0.0, -0.5]),
        np.array([1.0, 0.5, -1.0]),
        np.ones(3),
    )
    assert "fit(" not in ast_ad.source(layer_sum, h, b, stage="jvp")
    want, got = tracer.jvp(layer_sum, (h, b), (u, v)), ast_ad.jvp(layer_sum, (h, b), (u, v))
    assert all(math.isclose(a, c, rel_tol=1e-13) for a, c in zip(want, got, strict=True))
    x, w = np.array([0.3, -0.2, 1.1]), np.array([0.5, 1.0, -2.0])
    assert "fit(" in ast_ad.source(widened, x, stage="jvp")
    want, got = tracer.jvp(widened, (x,), (w,)), ast_ad.jvp(widened, (x,), (w,))
    assert all(math.isclose(a, c, rel_tol=1e-13) for a, c in zip(want, got, strict=True))


def doubled(a):
    return a * 2.0


def rebound_by_a_helper(x0, x1):
    if x0 < 0.3:
        x0 = doubled(x1)
    return x0 * x0


def rebound_in_a_branch(x0, x1):
    if x0 < 0.3:
        x0 = np.tanh(x1) + x1
    return x0 * x0


@pytest.mark.parametrize("fn", [rebound_by_a_helper, rebound_in_a_branch])
def test_a_value_bound_again_in_a_branch_of_forward_modes_ir(fn) -> None:
    """Found by the IR hunt: a parameter bound again in a branch, where forward mode's IR unpacks a
    helper's pair into it (``x0, x0_dot = pair``: the older value's adjoint must start again at
    zero, as for an assignment) or binds a branch's own temporary that its tangent reads too
    (``tanh_x1_bar = x0_bar``, then added to: the fold must not write the copy past the second
    binding). Both gave the parameter ``x0`` a gradient it does not have."""
    args, first = (-1.7, -1.6), (-0.65, -0.17)
    want = tracer.grad(lambda *xs: tracer.jvp(fn, xs, first)[1], (0, 1))(*args)
    got = reverse_of_forward(fn, args, first)
    assert want[0] == 0.0 and all(_close(w, g) for w, g in zip(want, got, strict=True))
