"""Item writes in loops cost what they change: reverse mode writes the array in place, saves the
entries a write overwrites, and writes them back in the backward pass
(``analysis.in_place_writes``)."""

from __future__ import annotations

import os
import re
import tracemalloc

import numpy as np
import pytest

import ast_ad
from ast_ad import runtime
from tests import writes_functions as wf
from tests.oracles import assert_fd, assert_same

rng = np.random.default_rng(7)
X4 = rng.uniform(0.6, 1.4, 4)
X6 = rng.uniform(0.6, 1.4, 6)

CASES = [
    (wf.chain, (X4,), (0,)),
    (wf.into_parameter, (X4, rng.uniform(0.5, 1.5, 4)), (0, 1)),
    (wf.grid, (X4[:3],), (0,)),
    (wf.rows, (X4,), (0,)),
    (wf.stops_early, (X4 * 1.3,), (0,)),
    (wf.strided_slices, (X6,), (0,)),
    (wf.repeated_indices, (X6[:5],), (0,)),
    (wf.masked, (X4 + 0.3,), (0,)),
    (wf.branchy, (X6[:5],), (0,)),
    (wf.read_whole_in_loop, (X4,), (0,)),
    (wf.calls_a_writer, (X4,), (0,)),
    (wf.chain_on_a_copy, (X4,), (0,)),
    (wf.outer_grid, (X4,), (0,)),
    (wf.chain_twice, (X4,), (0,)),
    (wf.reads_ahead, (X6,), (0,)),
    (wf.two_behind, (X6,), (0,)),
    (wf.falling, (X6,), (0,)),
    (wf.wraps_around, (X4,), (0,)),
    (wf.negative_indices, (X4,), (0,)),
    (wf.one_entry, (X4,), (0,)),
    (wf.on_its_exponential, (X4,), (0,)),
    (wf.stops_at_a_break, (X6 + 0.2,), (0,)),
    (wf.reads_its_own_entry, (X4,), (0,)),
    (wf.reads_what_it_wrote, (X4,), (0,)),
]


@pytest.mark.parametrize(("fun", "args", "argnums"), CASES, ids=[c[0].__name__ for c in CASES])
def test_in_place_gradients_match_the_oracles(fun, args, argnums) -> None:
    before = [np.copy(a) for a in args]
    value, grads = ast_ad.value_and_grad(fun, argnums)(*args)
    assert value == fun(*[np.copy(a) for a in args])  # the function's own value, bit for bit
    for a, b in zip(args, before, strict=True):
        np.testing.assert_array_equal(a, b)  # the caller's arrays are never written
    assert_same(grads, ast_ad.tracer.grad(fun, argnums)(*[np.copy(a) for a in args]))
    assert_fd(lambda *a: fun(*[np.copy(v) for v in a]), args, argnums, grads)


@pytest.mark.parametrize(("fun", "args", "argnums"), CASES, ids=[c[0].__name__ for c in CASES])
def test_vjp_runs_its_backward_pass_again_on_the_same_forward_pass(fun, args, argnums) -> None:
    """Each call of ``vjp_fn`` writes back the arrays the forward pass wrote: it gets its own
    copies."""
    out, vjp_fn = ast_ad.vjp(fun, *args)
    first, second = vjp_fn(1.0), vjp_fn(1.0)
    expected = ast_ad.grad(fun, tuple(range(len(args))))(*args)
    for a, b, c in zip(first, second, expected, strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, c, rtol=1e-12)
    assert out == fun(*[np.copy(a) for a in args])


def test_the_loops_write_in_place() -> None:
    """An entry of a float vector is a number: saved as it is, its adjoint read as ``y_bar[i]``; a
    row of a matrix is saved as a copy (``entries``), its adjoint read by the helper that sums a
    broadcast value's. A loop that writes each entry once saves nothing: the backward pass reads
    the entry back from the array as the loop found it."""
    text = ast_ad.source(ast_ad.grad(wf.chain_twice), X4)
    assert "y[i] = y_item * x_item" in text and "y_entries.append(y[i])" in text
    text = ast_ad.source(ast_ad.grad(wf.chain), X4)
    assert (
        "y[i] = y_item * x_item" in text
        and "y_before = y\n" in text
        and "y[i] = y_before[i]" in text
        and "_entries" not in text
        and "assign_item(" not in text
    )
    assert (
        "t2_bar = y_bar[i]" in text
        and "assign_item_vjp_value" not in text
        and "entries(" not in text
    )
    assert "y_bar[i] = 0.0" in text and "y_bar[t1] += y_item_bar" in text
    # x is only read, entry by entry: its adjoint is an array of the loop's own, added into in place
    assert "x_bar = owned_adjoint(x_bar, x)" in text and "x_bar[i] += t2_bar * y_item" in text
    text = ast_ad.source(ast_ad.grad(wf.rows), X4)
    assert "m[i] = m_before[i]" in text and "assign_item_vjp_value(m_bar, m, i, " in text


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.complex128,
                                   np.complex64, np.bool_])
def test_an_adjoint_made_its_own_from_the_float_zero_has_the_general_paths_dtype(dtype) -> None:
    """``owned_adjoint(0.0, x)``, the most common start of an adjoint added into in place, takes a
    short path: zeros of ``x``'s shape in the dtype the general path gives (``zeros + 0.0``), a
    new array, and a batch of zeros in a batched backward pass."""
    from ast_ad import runtime
    from ast_ad.runtime import batched

    x = np.ones((2, 3), dtype=dtype)
    made = runtime.owned_adjoint(0.0, x)
    general = runtime.zeros_of(x, dtype=np.result_type(x, 0.0, 1.0)) + 0.0
    assert made.dtype == general.dtype and made.shape == x.shape and not made.any()
    assert made is not x and made.flags.writeable
    with batched.batched_backward(4):
        assert isinstance(runtime.owned_adjoint(0.0, x), batched.Batch)


@pytest.mark.parametrize(("fun", "written_once", "kept"), [
    (wf.chain, True, []),
    (wf.reads_ahead, True, []),  # y[i + 1], computed again: no later step is undone yet
    (wf.two_behind, True, []),
    (wf.falling, True, ["cos_x_item_tape"]),  # (np.cos(x[i]): kept, not computed again)
    (wf.on_its_exponential, True, []),
    # (what a branch binds is taped: only the loop's own body is computed again)
    (wf.stops_at_a_break, True, ["cond_tape", "t1_tape", "trips_tape", "x_item_tape",
                                 "y_item_tape"]),
    # y[i - 1] at i = 0 is the last entry: taped, not read again
    (wf.wraps_around, True, ["y_item_tape"]),
    (wf.one_entry, True, []),
    (wf.reads_its_own_entry, True, []),  # y[i] before the step writes it: y_before[i]
    (wf.reads_what_it_wrote, True, []),  # and after: y[i]
    (wf.negative_indices, False, ["y_entries", "y_item_tape"]),  # -3 and 1: one entry
    (wf.chain_twice, False, ["r_1_tape", "y_entries", "y_item_tape"]),
])
def test_a_loop_that_writes_each_entry_once_tapes_none(fun, written_once, kept) -> None:
    """``saving.plan_written_once``: a loop over a range of indices not below 0, writing ``y[i]``
    once a step, puts each entry back from the array as it found it, and reads ``y[i + c]``
    again at the top of each step's backward pass, where ``i + c`` is never negative."""
    args = (X6 if fun in (wf.reads_ahead, wf.two_behind, wf.falling) else X4,)
    text = ast_ad.source(ast_ad.grad(fun), *args)
    assert ("y[i] = y_before[i]" in text) == written_once, text
    tapes = sorted(line.split(" = ")[0].strip() for line in text.splitlines()
                   if line.endswith(" = []"))
    assert tapes == kept, text


def test_a_returned_array_is_not_written_back() -> None:
    out, vjp_fn = ast_ad.vjp(wf.returns_the_array, X4)
    np.testing.assert_array_equal(out, wf.returns_the_array(X4))
    g = np.arange(4.0)
    first, second = vjp_fn(g), vjp_fn(g)  # the backward pass runs twice on the same forward pass
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(out, wf.returns_the_array(X4))
    jac = ast_ad.jacrev(wf.returns_the_array)(X4)
    np.testing.assert_allclose(first[0], g @ jac, rtol=1e-12)
    np.testing.assert_allclose(jac, ast_ad.jacfwd(wf.returns_the_array)(X4), rtol=1e-12)
    y, total = ast_ad.vjp(wf.returns_a_tuple, X4)[0]
    np.testing.assert_array_equal(y, X4[:3] ** 2)


def test_second_derivatives_through_in_place_writes() -> None:
    hessian = ast_ad.hessian(wf.grid)(X4[:3])
    gradient = ast_ad.grad(wf.grid)
    eps = 1e-6
    numeric = np.array(
        [(gradient(X4[:3] + eps * e) - gradient(X4[:3] - eps * e)) / (2 * eps) for e in np.eye(3)]
    )
    np.testing.assert_allclose(hessian, numeric, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("fun, written", [
    (wf.chained_writes, 2),
    (wf.chained_writes_seen_by_another_name, 2),
    (wf.chained_writes_seen_through_a_view, 0),
])
def test_writes_at_the_functions_level_are_made_in_place_by_forward_mode(fun, written) -> None:
    """Forward mode writes an item into an array nothing else reaches in place, with its tangent
    (``analysis.straight_writes``): the first write copies the array ``x * 2.0`` (made by a
    product, which the registry does not call fresh), the others write into that copy. Where a
    view of the array was made before the writes, the memory model guards them and each stays a
    new array. The value is Python's, bit for bit; the tangent is reverse mode's along the
    direction, and central differences'."""
    from ast_ad.api.lowering import jvp_code, lower

    x, v = np.array([0.3, -0.7, 1.1]), np.array([1.0, 0.5, -2.0])
    text = jvp_code(lower(fun, (x,)), (0,)).text
    in_place = re.findall(r"^ +y_\d+(?:_dot)?\[\d\] = ", text, re.M)
    assert len(in_place) == 2 * written, text
    assert len(re.findall(r"assign_item\(", text)) == 2 * (3 - written), text
    given = x.copy()
    out, dot = ast_ad.jvp(fun, (given,), (v,))
    assert out == fun(x.copy())
    np.testing.assert_array_equal(given, x)
    assert dot == pytest.approx(ast_ad.grad(fun)(x) @ v, rel=1e-12)
    h = 1e-6
    assert dot == pytest.approx((fun(x + h * v) - fun(x - h * v)) / (2 * h), rel=1e-7)


def test_only_a_call_that_makes_an_array_of_its_own_starts_writes_in_place() -> None:
    """``analysis.makes_fresh_array`` reads the registry's ``def_fresh``: ``assign_item`` always
    copies; ``owned_adjoint(g, x)`` makes an array for an array ``x`` but gives ``g`` itself for a
    number (writing into it would change ``g``), or where ``x``'s kind is not known; a function
    the registry says nothing of does not count."""
    from ast_ad import transform
    from ast_ad.analysis.activity import makes_fresh_array
    from ast_ad.analysis.kinds import kinds_of
    from ast_ad.api.arguments import shape_labels
    from ast_ad.ir import nodes as ir

    kinds = kinds_of(transform.normalized(wf.scaled), shape_labels((X4, 2.0)))

    def call(fn, *names):
        return ir.Call(ir.Ref(fn, fn.__name__), tuple(ir.Var(n) for n in names))

    assert makes_fresh_array(call(runtime.assign_item, "x", "s", "s"), kinds)
    assert makes_fresh_array(call(runtime.owned_adjoint, "s", "x"), kinds)
    assert not makes_fresh_array(call(runtime.owned_adjoint, "x", "s"), kinds)
    assert not makes_fresh_array(call(runtime.owned_adjoint, "x", "unknown"), kinds)
    assert not makes_fresh_array(call(np.sin, "x"), kinds)
    assert not makes_fresh_array(ir.Var("x"), kinds)


def test_a_hessian_vector_product_adds_into_the_adjoints_items_in_place() -> None:
    """Forward mode over a gradient whose code adds into ``x_bar``'s items (``x_bar[1] += ...``,
    lowered as writes into copies): each written in place, with its tangent, which starts as a copy
    of zeros (``x_bar`` has no tangent), one copy where each write made one; the Hessian against
    autograd's."""
    import autograd
    import autograd.numpy as anp

    from ast_ad.api.lowering import jvp_code, lower

    x, w = np.array([0.4, -0.3]), 0.7
    gradient = ast_ad.grad(wf.two_charges)
    text = jvp_code(lower(gradient, (x, w)), (0,)).text
    # (one: the tangent of x_bar starts as zeros with one entry written, x_bar's own tangent zero)
    assert text.split("x_bar = ")[-1].count("assign_item(") == 1, text
    assert re.search(r"^ +x_bar(_\d+)?\[1\] = ", text, re.M), text

    def theirs(a):
        return 1.0 / anp.sqrt((a[0] - 1.0) ** 2 + (a[1] + w) ** 2) + a[0] * a[1] * w

    np.testing.assert_allclose(ast_ad.hessian(wf.two_charges)(x, w), autograd.hessian(theirs)(x),
                               rtol=1e-12)


def _peak(n: int) -> int:
    x = np.full(n, 1.0001)
    gradient = ast_ad.grad(wf.chain)
    gradient(x)  # transformed and compiled before measuring
    tracemalloc.start()
    gradient(x)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_index_arithmetic_and_reads_of_unwritten_arrays_are_computed_again_not_taped() -> None:
    """``t1 = i - 1`` and ``x[i]`` (``x`` is never written): the backward pass computes them at the
    top of each step; only the read of the written array and the overwritten entries are taped (the
    product written is a number: its adjoint is ``y_bar[i]``, which needs nothing of it)."""
    text = ast_ad.source(ast_ad.grad(wf.chain_twice), np.ones(5))
    tapes = sorted(
        line.split(" = ")[0].strip() for line in text.splitlines() if line.endswith(" = []")
    )
    assert tapes == ["r_1_tape", "y_entries", "y_item_tape"], tapes
    backward = text[text.index("for i in reversed(r_1):"):]
    assert backward.splitlines()[1:3] == ["            t1 = i - 1", "            x_item = x[i]"]
    # each entry written once: the read of the written array is computed again too
    text = ast_ad.source(ast_ad.grad(wf.chain), np.ones(5))
    backward = text[text.index("for i in reversed(r):"):]
    assert backward.splitlines()[1:4] == ["        t1 = i - 1", "        y_item = y[t1]",
                                          "        x_item = x[i]"]


def test_a_read_computed_again_only_where_the_steps_backward_pass_reads_it() -> None:
    """``total = total + a * b * (i + 1)`` over ``zip(xs, ys)``: the adjoint of ``xs[k]`` needs
    ``k`` alone, and that of ``a * b`` the other factor, popped from its tape; so the backward pass
    computes no ``xs[k]`` again, a store nothing would read. ``back = -1 - k`` it does compute,
    where the adjoint of ``xs[back]`` is added. The same in a checkpointed loop's steps run
    backward."""
    from tests import corpus_control

    xs, ys = np.array([0.5, -1.0, 2.0]), np.array([1.5, 0.25, -0.5, 3.0])
    want = ast_ad.grad(corpus_control.enumerate_zip_reversed, (0, 1))(xs, ys)
    assert_fd(corpus_control.enumerate_zip_reversed, (xs, ys), (0, 1), want)
    for snapshots in (None, 1):
        gradient = ast_ad.grad(corpus_control.enumerate_zip_reversed, (0, 1), checkpoints=snapshots)
        text = ast_ad.source(gradient, xs, ys)
        steps = (
            [
                part.split("elif action")[0]
                for part in re.split(r"if action(?:_1)? == 'reverse':", text)[1:]
            ]
            if snapshots
            else [text[text.index("for k_1 in reversed(") :]]
        )
        assert len(steps) == (2 if snapshots else 1)
        assert all("_item = " not in s and "_item_1 = " not in s for s in steps), steps
        assert "back = -1 - k_1" in steps[0]
        assert_same(gradient(xs, ys), want)


def test_memory_grows_linearly_with_the_steps() -> None:
    """A copy of the array per write would make four times the steps cost sixteen times the
    memory."""
    small, large = _peak(1000), _peak(4000)
    assert large < 5 * small
    assert large < 400 * 4000  # a few hundred bytes a step: the saved entries, not the array


# ---- forward mode: the same writes in place, and their tangents ----------------------------------
@pytest.mark.parametrize(("fun", "args", "argnums"), CASES, ids=[c[0].__name__ for c in CASES])
def test_forward_mode_writes_in_place_and_agrees_with_the_tracer_and_reverse_mode(
    fun, args, argnums
) -> None:
    """jvp of each function (its loops write ``y[i] = v`` and ``y_dot[i] = v_dot`` into copies of
    their own): the value is the function's, the caller's arrays and tangents are not written, and
    the tangent is the tracer's and ⟨grad, t⟩ (the dot-product identity with reverse mode)."""
    before = [np.copy(a) for a in args]
    tangents = tuple(
        rng.standard_normal(np.shape(a)) if k in argnums else None for k, a in enumerate(args)
    )
    kept = [None if t is None else np.copy(t) for t in tangents]
    out, out_dot = ast_ad.jvp(fun, args, tangents)
    assert out == fun(*[np.copy(a) for a in args])
    for a, b in zip(args, before, strict=True):
        np.testing.assert_array_equal(a, b)
    for t, k in zip(tangents, kept, strict=True):
        if t is not None:
            np.testing.assert_array_equal(t, k)
    want = ast_ad.tracer.jvp(fun, tuple(np.copy(a) for a in args), tangents)[1]
    np.testing.assert_allclose(out_dot, want, rtol=1e-10, atol=1e-12)
    grads = ast_ad.grad(fun, argnums)(*args)
    dot = sum(float(np.sum(g * tangents[k])) for g, k in zip(grads, argnums, strict=True))
    np.testing.assert_allclose(out_dot, dot, rtol=1e-10, atol=1e-12)


def test_forward_mode_writes_the_loops_arrays_in_place() -> None:
    """The loop writes its own copies of ``y`` and of ``y``'s tangent, made once before it: no copy
    a step."""
    text = ast_ad.source(wf.chain, X4, stage="jvp")
    assert "y = detached(y)" in text and "y_dot = owned_adjoint(y_dot, y)" in text
    assert "y[i] = y_item * x_item" in text and "y_dot[i] = " in text and "assign_item(" not in text


def _jvp_work(n: int) -> tuple[int, int]:
    """The peak memory of jvp of ``chain`` over ``n`` entries (``tracemalloc``), and how many calls
    of ast_ad's helpers it makes (a helper that copies the array, ``assign_item``, would be one a
    step)."""
    import sys

    x, v = np.full(n, 1.0001), np.ones(n)
    ast_ad.jvp(wf.chain, (x,), (v,))  # transformed and compiled before measuring
    helpers = os.path.dirname(runtime.__file__)  # the package of ast_ad's helpers
    calls = [0]

    def count(frame, event, arg):  # noqa: ANN001, ANN202 -- sys.setprofile's hook
        if event == "call" and os.path.dirname(frame.f_code.co_filename) == helpers:
            calls[0] += 1

    tracemalloc.start()
    sys.setprofile(count)
    try:
        ast_ad.jvp(wf.chain, (x,), (v,))
    finally:
        sys.setprofile(None)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak, calls[0]


def test_forward_mode_memory_and_work_grow_linearly_with_the_steps() -> None:
    """In place, a write costs what it changes: the helpers run once a loop, not once a step (a copy
    of the array a step would be sixteen times the work for four times the steps), and memory is a
    few copies of the arrays."""
    (small, calls_small), (large, calls_large) = _jvp_work(1000), _jvp_work(4000)
    # (counted: the helpers are ast_ad.runtime's modules)
    assert 0 < calls_large == calls_small < 50
    assert large < 5 * small
    assert large < 8 * 8 * 4000  # a few arrays of 4000 floats, not one a step


def test_a_default_is_read_or_copied_as_python_does_and_a_change_of_it_is_refused() -> None:
    """A default array is one object for all calls: reading it, or writing into a copy, gives at
    every call what Python gives; a write into it is refused (``tests/test_errors.py``), as Python's
    next call would see it."""
    x = np.array([0.5, 1.5])
    for fun in (wf.reads_its_default, wf.writes_a_copy_of_its_default):
        gradient = ast_ad.value_and_grad(fun)
        for _ in range(3):
            value, grad = gradient(x)
            assert value == fun(x)
            assert_fd(fun, (x,), (0,), (grad,))


def test_a_copy_of_an_array_argument_is_written_in_place() -> None:
    """``y = x.copy()``: the memory model guards its writes under ``is_container(x)`` (a list's
    copy holds its arrays); with ``x`` an array (its label), the flag is false, the guard goes
    (``optimize.guards``) and the loop writes ``y`` in place, taping the entries it overwrites: not
    a copy of ``y`` a step (once O(n) a step, O(n^2) a call)."""
    text = ast_ad.source(ast_ad.grad(wf.chain_on_a_copy), X4)
    assert "is_container" not in text and "check_in_place" not in text
    assert "y[i] = " in text and "y[i] = y_before[i]" in text and "y_tape" not in text
    # a list's copy keeps the guard: its items are the caller's arrays
    listed = ast_ad.source(ast_ad.grad(wf.chain_on_a_copy), [1.0, 2.0, 3.0])
    assert "is_container" in listed


def test_the_index_of_a_nested_loops_write_is_computed_again_not_taped() -> None:
    """``g[i, j] = ...``: the index tuple ``(i, j)`` and the read ``x[i]`` of the outer loop's index
    are computed again at the top of each inner step of the backward pass, not taped; nor is the
    inner loop's variable, which its backward loop binds before reading it."""
    text = ast_ad.source(ast_ad.grad(wf.outer_grid), X4)
    tapes = {line.split(" = ")[0].strip() for line in text.splitlines() if line.endswith(" = []")}
    assert not {"index_tape", "x_item_tape", "j_tape"} & tapes, tapes
    backward = text[text.index("for j in reversed("):]
    assert "index = i, j" in backward and "x_item = x[i]" in backward


@pytest.mark.parametrize("fun", [wf.into_integers, wf.into_integers_in_a_loop,
                                 wf.into_an_argument_cast], ids=lambda f: f.__name__)
def test_a_value_written_into_integers_carries_no_tangent(fun) -> None:
    """numpy truncates a value written into integers: forward mode once carried its tangent into
    the array all the same (the array's tangent, of floats, took it), so that ``jvp`` disagreed
    with ``grad`` (a silent wrong number). The value's tangent is now passed through
    ``written_tangent``, a zero for integers (``registry.def_truncates``): forward mode agrees with
    reverse mode, which agrees with the tracer."""
    x, v = np.array([1.1, 2.3, 3.7]), np.array([0.4, 0.7, 0.3])
    args = (x, v)[:fun.__code__.co_argcount]
    argnums = tuple(range(len(args)))
    value, grads = ast_ad.value_and_grad(fun, argnums)(*args)
    assert value == fun(*[a.copy() for a in args])
    assert_same(grads, ast_ad.tracer.grad(fun, argnums)(*args))
    rng = np.random.default_rng(3)
    directions = tuple(rng.standard_normal(3) for _ in args)
    _, tangent = ast_ad.jvp(fun, args, directions)
    expected = sum(float(np.dot(g, d)) for g, d in zip(grads, directions, strict=True))
    assert tangent == pytest.approx(expected, rel=1e-12, abs=1e-12)
    _, traced = ast_ad.tracer.jvp(fun, args, directions)
    assert traced == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_an_augmented_write_nothing_reads_leaves_its_old_adjoint_a_float_zero() -> None:
    """The float-zero analysis (``modes.zeros``) took every active argument of a statement for one
    its rule writes an array into, so after ``x = augmented_value(x_1, x)`` (whose rule for the old
    ``x`` is zero, and whose backward pass resets that adjoint to ``0.0``) it took ``x``'s adjoint
    for an array, and ``np.dot``'s rule read the float (a ValueError from the generated code, on
    main since ``y op= v`` became ``augmented_value``; found by a fresh seed of the float32
    programs). Both branches, against the tracer, and forward mode."""
    fun = wf.scaled_where_nothing_reads_it
    x1 = np.array([0.1, 0.4, -0.6])
    for x0 in (np.array([0.3, -0.2, 0.5]), np.array([300.0, 200.0, 500.0])):
        grads = ast_ad.grad(fun, (0, 1))(x0, x1)
        assert_same(grads, ast_ad.tracer.grad(fun, (0, 1))(x0, x1))
        u = (np.array([0.5, -1.0, 0.2]), np.array([1.0, 0.3, -0.4]))
        _, along = ast_ad.jvp(fun, (x0, x1), u)
        assert np.isclose(along, grads[0] @ u[0] + grads[1] @ u[1], rtol=1e-10)


def test_a_comprehensions_names_are_not_asked_about_after_it() -> None:
    """A comprehension's names are its own: a write after it, in place, checks the names that may
    see it, and a comprehension of a loop that never ran left its name unbound (found by a fresh
    seed of the mutating programs). Python's value, the tracer's gradient."""
    fun = wf.written_after_a_comprehension_that_never_ran
    value, grad = ast_ad.value_and_grad(fun)(0.3)
    assert value == fun(0.3)
    assert_same((grad,), ast_ad.tracer.grad(fun, (0,))(0.3))
