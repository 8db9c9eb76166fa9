"""The generated code of two loops people write (a leapfrog simulation, an RNN written with
``np.dot`` and its weights as arguments) read as a reviewer reads it: no shape kept for every step,
no statement inside a loop that computes what it computed in the step before, and no store that
nothing reads (issue 41). The checks read the printed Python, not ast_ad's IR, and each is tried on
code that has the fault, so that none passes by reading nothing."""

from __future__ import annotations

import ast
import copy
import pathlib
import sys

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import ast_ad
from ast_ad.runtime import unbroadcast
from ast_ad.testing.random_programs import programs
from tests.oracles import assert_fd
from tests.strategies import half
from tests.test_kinds import stepped  # (GradBench's ode, in short: a helper called every step)

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def _benchmark():
    """``examples/benchmark.py``, whose workloads these are (``ordinary``)."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        import benchmark
    finally:
        sys.path.remove(str(EXAMPLES))
    return benchmark


def _reads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _own_reads(stmt: ast.stmt) -> set[str]:
    """The names a statement reads itself (a loop's iterable, a branch's test; not its body's)."""
    if isinstance(stmt, ast.For):
        return _reads(stmt.iter)
    if isinstance(stmt, (ast.If, ast.While)):
        return _reads(stmt.test)
    if isinstance(stmt, ast.Delete):
        return set()
    return _reads(stmt)


def _stored(stmt: ast.stmt) -> set[str]:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else \
        [stmt.target] if isinstance(stmt, (ast.AugAssign, ast.For)) else []
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def dead_stores(source: str) -> list[str]:
    """The assignments of one name whose value no path reads before the name is bound again or the
    function returns (liveness, by a fixpoint over loops). A declaration ``y = None`` before the
    loop that binds ``y`` is not a store: it is there for a transformation of this code, which
    reads it as ``y``'s first binding (``optimize.release``)."""
    function = ast.parse(source).body[0]
    assert isinstance(function, ast.FunctionDef)
    dead: list[str] = []

    def block(body: list[ast.stmt], live: set[str], report: bool) -> set[str]:
        for stmt in reversed(body):
            live = one(stmt, live, report)
        return live

    def one(stmt: ast.stmt, live: set[str], report: bool) -> set[str]:
        if isinstance(stmt, ast.Return):
            return _reads(stmt)
        if isinstance(stmt, ast.If):
            return block(stmt.body, live, report) | block(stmt.orelse, live, report) | \
                _reads(stmt.test)
        if isinstance(stmt, (ast.For, ast.While)):
            entry = set(live)
            while True:  # the live names at the top of a step: after it, or the next step's
                step = block(stmt.body, entry | live, False) - _stored(stmt) | _own_reads(stmt)
                if step <= entry:
                    break
                entry |= step
            block(stmt.body, entry | live, report)
            return entry | live
        stored = _stored(stmt)
        declaration = isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) and \
            stmt.value.value is None
        if report and isinstance(stmt, ast.Assign) and len(stored) == 1 and not stored & live \
                and isinstance(stmt.targets[0], ast.Name) and not declaration:
            dead.append(ast.unparse(stmt))
        if isinstance(stmt, ast.Delete):
            return live
        return (live - stored) | _own_reads(stmt)

    block(function.body, set(), True)
    return dead


def zero_starts(source: str) -> list[str]:
    """The additions ``n = n + e`` where ``n`` surely holds the ``0.0`` written to it (a forward
    pass over the function; at a loop's top, what holds on entry and at the end of its body)."""
    function = ast.parse(source).body[0]
    assert isinstance(function, ast.FunctionDef)
    found: list[str] = []

    def block(body: list[ast.stmt], zero: set[str], report: bool) -> set[str]:
        for stmt in body:
            zero = one(stmt, zero, report)
        return zero

    def one(stmt: ast.stmt, zero: set[str], report: bool) -> set[str]:
        if isinstance(stmt, ast.If):
            return block(stmt.body, set(zero), report) & block(stmt.orelse, set(zero), report)
        if isinstance(stmt, (ast.For, ast.While)):
            top = set(zero) - _stored(stmt)
            while (after := block(stmt.body, set(top), False) & top) != top:
                top = after
            block(stmt.body, set(top), report)
            return top
        stored = _stored(stmt)
        value = getattr(stmt, "value", None)
        if report and isinstance(stmt, ast.Assign) and isinstance(value, ast.BinOp) and \
                isinstance(value.op, ast.Add) and any(
                    isinstance(side, ast.Name) and side.id in zero and side.id in stored
                    for side in (value.left, value.right)):
            found.append(ast.unparse(stmt))
        zero = zero - stored
        if isinstance(stmt, ast.Assign) and isinstance(value, ast.Constant) and \
                value.value == 0.0 and len(stored) == 1:
            zero |= stored
        return zero

    block(function.body, set(), True)
    return found


def invariant_in_loops(source: str) -> list[str]:
    """The assignments inside a loop that read only names the loop never binds (its own index
    among those it binds), bind a name nothing else in the loop binds, and change no list: each
    step computes the same again."""
    found: list[str] = []
    for loop in ast.walk(ast.parse(source)):
        if not isinstance(loop, (ast.For, ast.While)):
            continue
        stores = [n for stmt in ast.walk(loop) if isinstance(stmt, ast.stmt) for n in _stored(stmt)]
        bound = set(stores)
        for stmt in loop.body:
            changes = any(isinstance(n, ast.Attribute) and n.attr in ("pop", "append")
                          for n in ast.walk(stmt))
            once = all(stores.count(n) == 1 for n in _stored(stmt))  # (a reset is bound again)
            if isinstance(stmt, ast.Assign) and once and not changes and \
                    not _reads(stmt.value) & bound:
                found.append(ast.unparse(stmt))
    return found


def taped_shapes(source: str) -> list[str]:
    """Statements inside a loop that take an array's shape (``np.shape(x)``) or keep one."""
    found = []
    for loop in ast.walk(ast.parse(source)):
        if isinstance(loop, (ast.For, ast.While)):
            for stmt in ast.walk(loop):
                if isinstance(stmt, ast.stmt) and not isinstance(stmt, (ast.For, ast.While)):
                    text = ast.unparse(stmt)
                    if "np.shape(" in text or "_shape_tape" in text:
                        found.append(text)
    return found


def test_the_checks_find_what_they_look_for() -> None:
    """Each check on a function that has its fault (code as ast_ad wrote it before issue 41)."""
    wasteful = (
        "def f_vjp(x, k, out_bar=1.0):\n"
        "    a_shape_tape = []\n"
        "    a_shape = None\n"
        "    for t in range(3):\n"
        "        a_shape_tape.append(a_shape)\n"
        "        neg_k = -k\n"
        "        a = neg_k * x\n"
        "        a_shape = np.shape(a)\n"
        "    a_bar = 0.0\n"
        "    for t in reversed(range(3)):\n"
        "        a_bar = a_bar + out_bar\n"
        "        x_bar = a_bar * neg_k\n"
        "        a_bar = 0.0\n"
        "        a_shape = a_shape_tape.pop()\n"
        "    return a, x_bar\n"
    )
    assert dead_stores(wasteful) == ["a_shape = a_shape_tape.pop()"]  # the last step's
    assert zero_starts(wasteful) == ["a_bar = a_bar + out_bar"]  # a_bar is 0.0 at each step's top
    assert invariant_in_loops(wasteful) == ["neg_k = -k"]
    assert "a_shape = np.shape(a)" in taped_shapes(wasteful)
    # a store a later step reads is live; an addition to what a branch may have changed is no start
    assert dead_stores("def g(x):\n    for i in range(3):\n        y = x\n        x = y * 2.0\n"
                       "    return x\n") == []
    assert zero_starts("def g(x, c):\n    s = 0.0\n    if c:\n        s = x\n    s = s + x\n"
                       "    return s\n") == []


def test_the_leapfrog_gradient_keeps_no_shape_and_has_no_dead_store() -> None:
    """A float ``dt`` and ``k`` are numbers (the name bound to ``None`` before the loop gives no
    shape class: ``activity.shape_classes``), so nothing is unbroadcast or kept for its shape;
    ``-k`` is computed once; and ``a``'s adjoint, zero at the top of each step, is assigned by its
    first contribution with no reset at the step's end (``Reverser.step_zeros``), then moved into
    its readers."""
    leapfrog = _benchmark().leapfrog
    rng = np.random.default_rng(1)
    x, v = rng.standard_normal(20), rng.standard_normal(20)
    gradient = ast_ad.grad(leapfrog, argnums=(0, 1, 2))
    got = gradient(x, v, 0.7, 0.05, 12)
    source = ast_ad.source(gradient)
    assert taped_shapes(source) == [] and "unbroadcast" not in source
    assert invariant_in_loops(source) == []
    assert dead_stores(source) == [] and zero_starts(source) == []
    # ``a``'s adjoint is ``v``'s times ``0.5 * dt``, read by the products with ``-k``: the numbers
    # meet first, and ``v_bar`` is multiplied once (``fold.scaled_adjoints``)
    assert "a_bar" not in source and "v_bar * (t1 * neg_k)" in source
    # the numbers: finite differences in each direction
    assert_fd(lambda *a: leapfrog(*a, 0.05, 12), (x, v, 0.7), (0, 1, 2), got)


def test_the_rnn_gradient_computes_its_products_shapes_once() -> None:
    """``np.dot(w, h)`` has ``w``'s rows whatever ``h`` is (``registry.result_axes``), and ``w``
    and ``u`` have as many rows (their labels say so: ``kinds.labelled``), so the two products have
    one shape and their sum's adjoint is each one's, with nothing to undo
    (``activity.LengthClasses``). Given a ``u`` of one row, whose product broadcasts, the code
    undoes that broadcast, from a shape computed once from ``u``'s, not kept for each of the 50
    steps (``saving.invariant_shapes``)."""
    benchmark = _benchmark()
    rng = np.random.default_rng(2)
    w, u, xs = benchmark.W_RNN, benchmark.U_RNN, rng.standard_normal((50, 32))
    gradient = ast_ad.grad(benchmark.rnn_dot, argnums=(0, 1))
    got = gradient(w, u, xs)
    source = ast_ad.source(gradient)
    assert taped_shapes(source) == [] and "unbroadcast_to" not in source
    assert invariant_in_loops(source) == []
    assert dead_stores(source) == [] and zero_starts(source) == []
    assert_fd(lambda *a: benchmark.rnn_dot(*a, xs), (w, u), (0, 1), got)
    # one row of ``u``: another call, other labels, the general code
    row = u[:1].copy()
    got = gradient(w, row, xs)
    source = ast_ad.source(gradient)
    assert "unbroadcast_to(dot_plus_dot_1_bar, dot_1_shape)" in source
    assert taped_shapes(source) == [] and invariant_in_loops(source) == []
    assert_fd(lambda *a: benchmark.rnn_dot(*a, xs), (w, row), (0, 1), got)


def test_a_state_made_like_an_argument_has_its_shape() -> None:
    """``v = np.zeros_like(x)`` has ``x``'s shape (``registry.result_axes``), so a leapfrog loop
    that makes its velocity so keeps no shape and undoes no broadcast, and, linear in ``x`` and
    ``v``, tapes nothing at all."""

    gradient = ast_ad.grad(_made_like)
    x = np.linspace(0.5, 1.5, 6)
    got = gradient(x, 0.1)
    source = ast_ad.source(gradient)
    assert taped_shapes(source) == [] and "unbroadcast" not in source and "_tape" not in source
    assert invariant_in_loops(source) == [] and dead_stores(source) == []
    assert_fd(lambda x: _made_like(x, 0.1), (x,), (0,), (got,))


def _made_like(x, dt):
    v = np.zeros_like(x)
    for _ in range(10):
        a = -x
        v = v + dt * a
        x = x + dt * v
    return np.sum(x * x)


def test_the_element_loops_memory_is_at_most_twice_the_hand_written_gradients() -> None:
    """``y[i] = y[i - 1] * x[i]``: each entry is written once, so nothing is taped
    (``saving.plan_written_once``); what a call keeps grows by at most twice the bytes an entry
    of the gradient written by hand keeps (which needs no tape: it reads ``y`` as the loop left
    it). Counted by ``tracemalloc`` (what numpy and Python allocate), at two sizes, so that what
    does not grow with the loop cancels."""
    import tracemalloc

    benchmark = _benchmark()
    gradient = ast_ad.grad(benchmark.element_loop)

    def growth(fn) -> float:
        peaks = []
        for n in (2000, 6000):
            x = np.linspace(0.999, 1.001, n)
            fn(x)  # transformed and compiled before measuring
            tracemalloc.start()
            try:
                fn(x)
                peaks.append(tracemalloc.get_traced_memory()[1])
            finally:
                tracemalloc.stop()
        return (peaks[1] - peaks[0]) / 4000

    ours, by_hand = growth(gradient), growth(benchmark.element_loop_by_hand)
    assert by_hand >= 16 and ours <= 2 * by_hand, (ours, by_hand)
    x = np.linspace(0.9, 1.1, 50)
    np.testing.assert_allclose(gradient(x), benchmark.element_loop_by_hand(x)[1], rtol=1e-13)


# ---- what a helper's backward pass keeps ---------------------------------------------------------
def test_a_helper_keeps_stand_ins_for_what_its_backward_pass_reads_only_the_shape_of() -> None:
    """``shifted``'s backward pass reads ``y`` and the two lists it joins only for their shapes
    (``getitem_vjp``, ``concatenate_vjp``): it keeps stand-ins of them, one zero each, so a step of
    the caller's loop keeps one array of the helper's (``rolled``, whose view ``rolled[1:]`` the
    backward pass multiplies by), not three. Counted by ``tracemalloc`` at two lengths of the loop,
    per step and entry; before the stand-ins (and the callee's result's kind, which lets the loop
    tape shapes) it was 23 floats an entry a step."""
    import tracemalloc

    text = ast_ad.source(ast_ad.grad(stepped), np.ones(5), 3)
    assert "y_like = stand_in(y)" in text and "pack_like = stand_in(pack)" in text
    gradient = ast_ad.grad(stepped)
    x = np.linspace(0.5, 1.5, 20_000)
    peaks = []
    for steps in (10, 30):
        gradient(x, steps)  # transformed before measuring
        tracemalloc.start()
        try:
            gradient(x, steps)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    per_step = (peaks[1] - peaks[0]) / 20 / (8 * x.size)
    assert per_step <= 1.5, per_step
    small = np.linspace(0.5, 1.5, 7)
    grad = gradient(small, 4)
    assert_fd(stepped, (small, 4), (0,), (grad,))
    np.testing.assert_allclose(grad, ast_ad.tracer.grad(stepped)(small, 4), rtol=1e-12)


def test_every_helper_that_reads_only_shapes_gives_the_same_with_a_stand_in() -> None:
    """``registry.def_meta_read``: each helper so declared, called with an array and with its
    stand-in (``runtime.stand_in``: one zero broadcast to its shape, for more than 4,096 entries;
    a smaller array itself), gives the same; the stand-in has the array's shape and dtype and holds
    one entry."""
    from ast_ad import runtime
    from ast_ad.core import registry

    big = np.arange(5000.0).reshape(50, 100) * (1 + 0.5j)
    like = runtime.stand_in(big)
    assert like.shape == big.shape and like.dtype == big.dtype and like.base.size == 1
    small = np.ones(3, dtype=np.float32)
    assert runtime.stand_in(small) is small  # (zeros of it would take as much memory)
    assert type(runtime.stand_in(np.float32(2.0))) is np.float32
    pack = [big, big.real]
    pair = runtime.stand_in(pack)
    assert type(pair) is list and pair is not pack and pair[1].dtype == float
    assert pair[1].shape == big.shape and pair[1].base.size == 1
    g = np.ones((50, 100)) * 0.5
    calls = {
        runtime.unbroadcast: (lambda x: runtime.unbroadcast(g, x), big[:1]),
        runtime.expand_reduced: (lambda x: runtime.expand_reduced(np.ones(100), x, 0), big),
        runtime.getitem_vjp: (lambda x: runtime.getitem_vjp(g[1:3], x, slice(1, 3)), big),
        runtime.concatenate_vjp: (
            lambda xs: runtime.concatenate_vjp(g, xs), [big[:20].real, big[20:].real]),
        runtime.joined_adjoints: (
            lambda xs: runtime.joined_adjoints([g[:20], 0.0], xs), [big[:20].real, big[20:].real]),
        runtime.stand_in: (runtime.stand_in, big),
        runtime.owned_adjoint: (lambda x: runtime.owned_adjoint(g, x), big.real),
        runtime.zero_tangent: (runtime.zero_tangent, big),
    }
    assert set(registry.with_fact("meta_read")) == set(calls), "a declared helper untested"
    for call, x in calls.values():
        with_array, with_stand_in = call(x), call(runtime.stand_in(x))
        for a, b in zip(*(r if isinstance(r, list) else [r] for r in (with_array, with_stand_in)),
                        strict=True):
            assert np.asarray(a).dtype == np.asarray(b).dtype
            np.testing.assert_array_equal(a, b)


def test_the_adjoint_of_a_whole_arrays_extremum_is_the_general_paths() -> None:
    """``extremum_vjp``'s path for ``np.max(x)`` of a float array and a float adjoint (one
    comparison, the share written where it ties) gives what its general path gives: ties shared,
    nan where no entry is the extremum, the same dtype."""
    from ast_ad import runtime

    rng = np.random.default_rng(3)
    cases = [rng.random(50), np.array([1.0, 3.0, 3.0, 2.0]), np.array([np.nan, 1.0]),
             rng.random((4, 5)).astype(np.float32), np.array([2.0, 2.0])]
    for x in cases:
        for reduce in (np.max, np.min):
            ans = reduce(x)
            fast = runtime.extremum_vjp(0.7, ans, x)
            general = runtime.extremum_vjp(np.array(0.7), ans, x)  # (not a float: the general path)
            assert fast.dtype == general.dtype and fast.shape == x.shape
            np.testing.assert_array_equal(fast, general)


def logsumexp(x):
    a = np.max(x)
    return np.log(np.sum(np.exp(x - a))) + a


def test_a_numbers_adjoint_from_a_difference_is_summed_then_negated() -> None:
    """``x - a``, ``a`` a number (an extremum is one: ``registry.def_full_reduction``): ``a``'s
    adjoint is ``-np.sum(g)``, one pass over ``g``, not ``np.sum(-g)``, two; the same bits (negation
    is exact and rounding to nearest symmetric)."""
    x = np.random.default_rng(4).standard_normal(1000)
    text = ast_ad.source(ast_ad.grad(logsumexp), x)
    assert "- np.sum(x_minus_a_bar)" in text and "np.sum(-" not in text
    assert "unbroadcast" not in text
    grad = ast_ad.grad(logsumexp)(x)
    np.testing.assert_allclose(grad, ast_ad.tracer.grad(logsumexp)(x), rtol=1e-13, atol=1e-16)
    assert_fd(logsumexp, (x,), (0,), (grad,))
    w = np.random.default_rng(5).standard_normal(100_001)
    assert -np.sum(w) == np.sum(-w)  # (the fact it relies on, at a length numpy sums pairwise)


def test_a_product_has_its_matrix_rows_not_its_matrix_shape() -> None:
    """``np.dot(w, h)`` takes ``w``'s rows, a vector: its shape class is that length's, never
    ``w``'s own (whose every axis the registry does not tie to it), so a sum with ``w`` that
    broadcasts it is undone."""
    rng = np.random.default_rng(5)
    w, h = rng.standard_normal((3, 3)), rng.standard_normal(3)
    got = ast_ad.grad(_broadcast_product, (0, 1))(w, h)
    assert np.shape(got[1]) == (3,)
    assert_fd(_broadcast_product, (w, h), (0, 1), got)


def _broadcast_product(w, h):
    return np.sum((np.dot(w, h) + w) ** 2)


def test_gradbenchs_ode_computes_its_step_sizes_once() -> None:
    """GradBench's ``ode``: ``h / 2`` and ``h / 6`` of a float ``h`` (a division by a number that
    is not zero raises nothing) move before the Runge-Kutta loop with ``t3 = t1``, a copy of one of
    them, and are not kept a step; the helper's adjoint of ``x`` starts as ``x``'s zeros."""
    sys.path.insert(0, str(EXAMPLES.parent / "benchmarks" / "gradbench"))
    try:
        from ast_ad_gradbench import ode
    finally:
        sys.path.pop(0)
    x = np.linspace(0.5, 1.5, 6)
    text = ast_ad.source(ast_ad.grad(ode.last), x, 5)
    assert invariant_in_loops(text) == [], invariant_in_loops(text)
    assert "t1 = h / 2" in text and "t1_tape" not in text and "t6_tape" not in text
    assert "x_bar = np.zeros_like(x)" in text
    assert_fd(ode.last, (x, 5), (0,), (ast_ad.grad(ode.last)(x, 5),))


def test_a_hessian_vector_product_in_a_reverse_rule_computes_the_tangent_alone(lowerings) -> None:
    """Reverse mode over ``ast_ad.grad`` in a body: the gradient's reverse rule reads the tangent of
    the gradient, not the gradient, so from its second call it runs a module of the tangent alone
    (``forward.tangent_only``, ``optimize.dead``): nothing lowered, the same numbers to the bit, no
    dead store, and none of the gradient's own item writes (only the tangents' are left). Against
    the closed form."""
    from ast_ad import transform
    from tests import compose_nested as nested

    outer = ast_ad.grad(nested.bowl_slope_norm, argnums=(0, 1))
    p, q = np.array([0.3, -0.7]), np.array([1.1, 0.4])
    first = outer(p, q)
    # (the modules over the code of ``bowl``'s gradient in both arguments, the rule's)
    made = {key[0]: loaded for key, loaded in transform._loaded.items()
            if key[0] in ("jvp", "jvp tangent") and "bowl" in getattr(key[1], "__name__", "")}
    assert set(made) == {"jvp", "jvp tangent"}, made
    lowerings["n"] = 0
    again = outer(p, q)
    assert lowerings["n"] == 0
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    # g = (-2 q0 + s q1, -2 q1 + s q0), s = sin(p0); the gradient of |g|^2
    s, c = np.sin(p[0]), np.cos(p[0])
    g = np.array([-2 * q[0] + s * q[1], -2 * q[1] + s * q[0]])
    expected_p = np.array([2 * g[0] * c * q[1] + 2 * g[1] * c * q[0], 0.0])
    expected_q = np.array([2 * g[0] * -2 + 2 * g[1] * s, 2 * g[0] * s + 2 * g[1] * -2])
    np.testing.assert_allclose(again[0], expected_p, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(again[1], expected_q, rtol=1e-12)
    alone = made["jvp tangent"].text
    entry = alone[alone.rindex("\ndef ") + 1:] if "\ndef " in alone else alone
    assert dead_stores(entry) == []
    written = [line.split("[")[0].strip() for line in entry.splitlines()
               if "] = " in line and not line.strip().startswith("#")]
    assert written and all(name.endswith("_dot") for name in written), written
    whole = made["jvp"].text
    assert any("] = " in line and not line.split("[")[0].strip().endswith("_dot")
               for line in whole.splitlines())  # (the module of both writes the gradient's too)


def test_the_dead_code_pass_leaves_out_only_what_nothing_reads() -> None:
    """``optimize.dead``: a pure call nothing reads goes, a call with an effect stays; an item write
    into an array only its names reach goes where nothing reads the array's entries after it (a
    zero tangent of it reads its shape alone: ``registry.meta_positions``), and stays where a name
    of it is read, or where the array is not known to be the write's own; a loop stays whole, and
    what it reads is computed."""
    from ast_ad import runtime
    from ast_ad.ir import nodes as ir
    from ast_ad.optimize.dead import dead_code_dropped

    here = ir.NOWHERE

    def call(fn, *args):
        return ir.Call(ir.Ref(fn, getattr(fn, "__name__", "f")),
                       tuple(ir.Var(a) if isinstance(a, str) else ir.Const(a) for a in args))

    body = (
        ir.Assign("a", call(runtime.owned_adjoint, 0.0, "x"), here),
        ir.Assign("s", call(np.sin, "x"), here),  # read by the write only
        ir.SetItem("a", ir.Const(0), ir.Var("s"), here),
        ir.Assign("b", ir.Var("a"), here),
        ir.Assign("t", call(np.cos, "x"), here),  # read by nothing
        ir.Assign("u", call(print, "x"), here),  # an effect
        ir.Assign("z", call(runtime.zero_tangent, "b"), here),
    )

    def kept(live, owned):
        return [type(s).__name__ + ":" + (s.target if hasattr(s, "target") else "")
                for s in dead_code_dropped(body, set(live), frozenset(owned))]

    assert kept({"z"}, {"a"}) == ["Assign:a", "Assign:b", "Assign:u", "Assign:z"]
    # (the array not known to be the write's own: another name may read the entry)
    assert kept({"z"}, set()) == ["Assign:a", "Assign:s", "SetItem:a", "Assign:b", "Assign:u",
                                  "Assign:z"]
    # (its entries read after the write, through its copy)
    assert kept({"b"}, {"a"}) == ["Assign:a", "Assign:s", "SetItem:a", "Assign:b", "Assign:u"]
    assert kept(set(), {"a"}) == ["Assign:u"]
    # (a check raises where the code cannot go on: it stays, whatever reads its value)
    checked = (ir.Assign("k", call(runtime.check_kept, "x", "message"), here),)
    assert [type(s).__name__ for s in dead_code_dropped(checked, set(), frozenset())] == ["Assign"]
    # (an append changes its list: the list's binding stays)
    listed = (ir.Assign("ys", ir.Pack((), "list"), here), ir.Append("ys", ir.Var("x"), here))
    assert [type(s).__name__ for s in dead_code_dropped(listed, set(), frozenset())] == [
        "Assign", "Append"]
    loop = ir.For("i", ir.Var("r"), (ir.Assign("w", call(np.sin, "t"), here),), here)
    assert [type(s).__name__ for s in dead_code_dropped(
        (ir.Assign("t", call(np.cos, "x"), here), loop), set(), frozenset())] == ["Assign", "For"]


_HVP_DIRECTORY = None


# (half the profile's examples: each transforms a program three ways, a third of a second)
@half()
@given(programs(arrays=True, mutation=True), st.data())
def test_a_random_programs_hessian_vector_product_in_a_reverse_rule(program, data) -> None:
    """A random program ``f`` (mutation, containers and branches included), its gradient in ``x0``
    taken in a body whose reverse mode runs the gradient's reverse rule (a Hessian-vector product):
    the second call, by the module of the tangent alone (``forward.tangent_only``), gives the first
    call's numbers to the bit, and both are the Hessian-vector product that ``jvp`` over the
    gradient gives (the module of both), within the rounding of sums taken in another order."""
    import tempfile

    from hypothesis import note

    global _HVP_DIRECTORY  # noqa: PLW0603 (one directory for the run's programs)
    if _HVP_DIRECTORY is None:
        _HVP_DIRECTORY = tempfile.mkdtemp(prefix="ast_ad_hvp_")
    params = ", ".join(f"x{k}" for k in range(program.arity))
    source = program.source + (
        "\n\nimport ast_ad\n\nW = np.array([0.7, -1.3, 0.4])\n\n\n"
        f"def outer({params}):\n"
        f"    g = ast_ad.grad(f)({params})\n"
        "    return np.sum(g * W)\n"
    )
    note(source)
    args = program.arguments(data)
    module = type(program)(source, program.arity, program.arrays, program.smooth)
    f = module.load(_HVP_DIRECTORY)
    outer = f.__globals__["outer"]
    direction = f.__globals__["W"]
    try:
        with np.errstate(all="raise", under="ignore"):
            first = ast_ad.grad(outer)(*copy.deepcopy(args))
            expected = ast_ad.jvp(ast_ad.grad(f), copy.deepcopy(args),
                                  (direction, *[None] * (len(args) - 1)))[1]
    except (ast_ad.errors.ASTADError, ValueError, TypeError, FloatingPointError,
            ZeroDivisionError, OverflowError):
        return  # (a refusal, or a value Python cannot compute here: no number to compare)
    again = ast_ad.grad(outer)(*copy.deepcopy(args))
    np.testing.assert_array_equal(again, first)
    np.testing.assert_allclose(first, expected, rtol=1e-9, atol=1e-12)


def test_every_check_of_the_runtime_is_declared_one() -> None:
    """``registry.def_check``: each function of ``runtime.checks`` that has rules (so a pass would
    take it for one that only computes its value) is declared a check, which ``optimize.dead``
    keeps; a new check without the declaration fails here."""
    import inspect

    from ast_ad.core import registry
    from ast_ad.runtime import checks

    ruled = [fn for _, fn in inspect.getmembers(checks, inspect.isfunction)
             if fn.__module__ == checks.__name__ and registry.lookup(fn) is not None]
    assert ruled  # (the check_in_place family: guards of the memory model)
    assert [fn.__name__ for fn in ruled if not registry.is_check(fn)
            and not registry.is_effect(fn)] == []


def _charge(x, w):
    return 1.0 / np.sqrt((x[0] - 2.0) ** 2 + (x[1] + w) ** 2)


def _pushed(w):
    x = np.array([0.5, 1.0])
    for _ in range(3):
        x = x - 0.1 * ast_ad.grad(_charge)(x, w[0])
    return x[0] * x[1]


def _fitted(a, b):
    return np.sum(unbroadcast(a * b, a))


def test_a_gradient_lowered_in_place_keeps_no_fitting_of_numbers() -> None:
    """The gradient code lowered into a body (``ast_ad.grad(f)(x, w)`` written there) is made for
    any shapes, so it fits each adjoint to its value's shape (``unbroadcast``); where the kinds
    analysis proves both numbers, the fitting is a copy (``optimize.guards.numbers_passed``,
    ``registry.def_numbers_pass``), and an entry's adjoint scattered into zeros has its array's
    shape class (``getitem_vjp``'s ``registry.def_result_axes``): reverse and forward mode over it
    keep no ``unbroadcast``, ``fit_adjoint`` or per-step stand-in of it. A fitting of an array
    stays. Against finite differences."""
    w = np.array([0.3])
    for text in (ast_ad.source(ast_ad.grad(_pushed), w),
                 ast_ad.source(_pushed, w, stage="jvp")):
        assert "unbroadcast(" not in text and "fit_adjoint(" not in text, text
        assert "stand_in(getitem_vjp" not in text and "getitem_vjp_1_like" not in text, text
        assert dead_stores(text) == [], dead_stores(text)
    assert_fd(_pushed, (w,), (0,), (ast_ad.grad(_pushed)(w),))
    a, b = np.array([0.5, -1.0]), 2.0
    assert "unbroadcast(" in ast_ad.source(ast_ad.grad(_fitted, (0, 1)), a, b)
    got = ast_ad.grad(_fitted, (0, 1))(a, b)
    np.testing.assert_allclose(got[0], [2.0, 2.0])
    assert np.isclose(got[1], np.sum(a), rtol=1e-15)


def _pair_read(x, y):
    pair = (np.sin(x) * y, np.cos(x))
    return np.sum(pair[0] * 2.0) + np.sum(pair[-1])


def test_an_item_of_a_tuple_written_in_the_code_is_read_through_it() -> None:
    """``pair[0]`` of ``pair = (a, b)`` is ``a`` itself (``optimize.packs.items_read_through``: a
    tuple cannot change and holds the objects its display names), so neither mode differentiates
    the pair: no zero pair scattered into, no tangents' pair built to take one of them; and a jvp
    written in a body, whose pair the body indexes, computes no tangent of the value it drops.
    Against finite differences and the dot-product identity."""
    from tests import compose_nested as nested

    x, y = np.array([0.3, 0.7]), 1.5
    grads = ast_ad.grad(_pair_read, (0, 1))(x, y)
    assert_fd(_pair_read, (x, y), (0, 1), grads)
    for text in (ast_ad.source(ast_ad.grad(_pair_read, (0, 1)), x, y),
                 ast_ad.source(_pair_read, x, y, stage="jvp")):
        assert "getitem_vjp(" not in text and "pair_bar" not in text and "pair_dot" not in text
    u = (np.array([0.5, -1.0]), 2.0)
    _, along = ast_ad.jvp(_pair_read, (x, y), u)
    assert np.isclose(along, float(np.sum(grads[0] * u[0])) + grads[1] * u[1], rtol=1e-13)
    x3 = np.array([0.3, -0.5, 0.9])
    text = ast_ad.source(ast_ad.grad(nested.squared_slope, (0, 1)), x3, y)
    assert "pack_bar" not in text and "getitem_vjp(" not in text, text
    assert dead_stores(text) == [], dead_stores(text)


def test_a_helper_gives_no_adjoint_to_an_argument_its_result_does_not_depend_on() -> None:
    """GradBench's ``saddle`` in short: an ascent whose slope a helper takes, by a gradient written
    in it, of a cost whose gradient in ``q`` does not move with ``p``. The helper's backward pass
    gives ``q`` its adjoint and nothing to ``p`` (``Adjoint.zero_grads``: the callee is derived in
    ``q`` alone, so no zeros are made, saved for, or added a step); the inner gradient's value is
    proven a real number, so its check goes (``registry.def_passes_on_numbers``); the gradient
    has ``q``'s shape class (``registry.def_shape_of``), so it is not fitted back, nor kept a step
    for its shape. Against finite differences, and forward mode by the dot-product identity."""
    from tests import compose_nested as nested

    p, start = np.array([0.5, -0.3]), np.array([1.0, 0.7])
    text = ast_ad.source(ast_ad.grad(nested.ascent), p, start)
    helper = text[text.index("def separable_slope_bwd"):]
    helper = helper[:helper.index("\n\n\n")]
    assert "p_bar" not in helper and "return q_bar," in helper, helper
    assert "p_bar_separable_slope" not in text, text
    assert "check_gradient_value" not in text and "unbroadcast(" not in text, text
    assert "stand_in(separable_vjp_q_bar" not in text, text
    # (the inner value, which nothing reads now, is still computed: Python computes it, and a
    # read past an array's end raises there)
    assert dead_stores(text) == [
        "separable_vjp_out_1 = p[0] ** 2 + p[1] ** 2 - separable_vjp_t3_plus_t4_1"], text
    grads = ast_ad.grad(nested.ascent, (0, 1))(p, start)
    assert_fd(nested.ascent, (p, start), (0, 1), grads)
    u = (np.array([0.2, -0.6]), np.array([0.4, 0.1]))
    _, along = ast_ad.jvp(nested.ascent, (p, start), u)
    assert np.isclose(along, float(np.dot(grads[0], u[0]) + np.dot(grads[1], u[1])), rtol=1e-12)
    # where the value is not proven a number, the check stays, and refuses as ``grad`` does
    assert "check_gradient_value" in ast_ad.source(
        ast_ad.grad(nested.gradient_of_a_vector_function), np.array([0.1, 0.2]))
