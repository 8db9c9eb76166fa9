"""``jit="numba"``: the generated gradient compiled by Numba gives the gradient the Python one
gives.

Each compiled runtime helper is run against its Python twin; scalar loops, branches, while loops and
element-by-element writes are compiled and compared with the interpreted gradient (and the tracer);
code Numba cannot compile is refused at the user's line, never run in Python instead.
"""

from __future__ import annotations

import os
import pathlib
import re
import sys
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

import ast_ad
from ast_ad import runtime
from ast_ad.backend.jit import JitError
from ast_ad.testing.random_programs import programs
from tests import corpus_control, writes_functions
from tests.oracles import assert_fd

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "examples"))
try:
    # the benchmark's compiled rows
    from benchmark import branchy, element_loop, loop_math, loop_numpy
finally:
    sys.path.pop(0)

numba = pytest.importorskip("numba")
from ast_ad.backend import numba_helpers  # noqa: E402 -- after the skip: it names Numba's types when registering


def with_a_dict(params, x):
    return params["w"] * x


def phases(x):
    z = np.exp(1j * x) * (1.0 + 0.5j)
    return np.sum(np.angle(z) * np.real(z) + np.abs(z + 0.3))


def augmented_arrays(x, w):
    """``acc += v`` on an array in a loop and ``y[i] += v`` on entries: ``augmented_value``
    compiled, or dropped where the entry is a number."""
    acc = np.zeros(3)
    for i in range(4):
        acc += w * x[i]
    acc *= 2.0
    y = x.copy()
    for i in range(1, 4):
        y[i] += y[i - 1] * w[0]
    return np.sum(acc * acc) + np.sum(y)


def rnn(w, u, xs):
    """A recurrent loop: its weights' adjoints are summed after the loop from the steps kept by
    columns (``stacked_steps``, ``summed_dot_vjp_a_steps``), compiled too."""
    h = np.zeros(w.shape[0])
    for t in range(xs.shape[0]):
        h = np.tanh(np.dot(w, h) + np.dot(u, xs[t]))
    return np.sum(h * h)


def velocity_made_like(x, dt):
    """A loop whose array adjoint starts as its argument's zeros (``np.zeros_like(x)``), one type
    in every step, as Numba needs: ``0.0`` there would be a number one step, an array the next."""
    v = np.zeros_like(x)
    for _ in range(10):
        v = v - dt * x
        x = x + dt * v
    return np.sum(x * x)


def shifted_field(x, y):
    """The right-hand side of GradBench's ``ode``: a join of a list (Numba joins tuples)."""
    return np.concatenate([x[:1], x[1:] * y[:-1]])


def stepped(x, s):
    """A helper whose loop calls another and adds into its argument's adjoint: that adjoint starts
    as the argument's zeros in the helper's backward pass too (one type in every step), and the
    helper's saved pack, a list, is kept in the loop's tape."""
    y = np.zeros(x.shape[0])
    for _ in range(s):
        y = y + 0.25 * shifted_field(x, y)
    return y


def stepped_last(x):
    return stepped(x, 4)[-1]


_RNN = np.random.default_rng(4)
CASES = [
    (loop_math, (0,), (0.5,)),
    (loop_numpy, (0,), (0.5,)),
    (element_loop, (0,), (1.0 + np.linspace(-0.01, 0.01, 40),)),
    (branchy, (0, 1), (2.0, 1.5)),
    (branchy, (0, 1), (0.3, 0.7)),
    (branchy, (0, 1), (-1.2, 2.5)),
    # complex values inside (the real parts, the sizes and angles of complex numbers compiled)
    (phases, (0,), (np.linspace(0.1, 1.0, 4),)),
    # ordinary item-write loops: into a copy of an argument, and 2-d writes in nested loops
    (writes_functions.chain_on_a_copy, (0,), (1.0 + np.linspace(-0.01, 0.01, 40),)),
    (writes_functions.outer_grid, (0,), (np.linspace(0.5, 1.0, 5),)),
    (velocity_made_like, (0, 1), (np.linspace(0.5, 1.5, 5), 0.1)),
    (stepped_last, (0,), (np.linspace(0.5, 1.5, 6),)),
    (rnn, (0, 1), (_RNN.standard_normal((4, 4)) * 0.5, _RNN.standard_normal((4, 3)) * 0.5,
                   _RNN.standard_normal((6, 3)))),
    (augmented_arrays, (0, 1), (np.linspace(0.1, 1.0, 4), np.linspace(0.5, 1.5, 3))),
]
# the corpus's functions of numbers whose gradients Numba compiles
SCALAR_CORPUS = [
    "branch",
    "conditional_expression",
    "scalar_loop",
    "loop_runtime_range",
    "while_active",
    "while_count",
    "break_continue",
    "early_returns",
    "for_else",
    "augmented_in_loop",
]


# the programs whose compile takes Numba 5 to 14 s: in the long step (.ci/run), to keep the default
# run within its five minutes
_SLOW_TO_COMPILE = {"stepped_last", "rnn", "phases"}
PROGRAMS = tempfile.mkdtemp(prefix="ast_ad_jit_programs_")


@pytest.mark.parametrize(
    ("fn", "argnums", "args"),
    [pytest.param(*c, marks=[pytest.mark.long] if c[0].__name__ in _SLOW_TO_COMPILE else [])
     for c in CASES],
    ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)],
)
def test_compiled_gradient_is_the_interpreted_one(fn, argnums, args) -> None:
    value, grads = ast_ad.value_and_grad(fn, argnums, jit="numba")(*args)
    expected_value, expected = ast_ad.value_and_grad(fn, argnums)(*args)
    traced = ast_ad.tracer.grad(fn, argnums)(*args)
    assert value == pytest.approx(expected_value, rel=1e-13)
    for ours, theirs, tracer in zip(grads, expected, traced, strict=True):
        assert np.allclose(ours, theirs, rtol=1e-13, atol=1e-15) and np.allclose(
            ours, tracer, rtol=1e-9
        )
        assert type(ours) is type(theirs) and np.shape(ours) == np.shape(theirs)


@pytest.mark.parametrize(
    "case",
    [c for c in corpus_control.CASES if c.fn.__name__ in SCALAR_CORPUS],
    ids=lambda c: c.fn.__name__,
)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_corpus_scalar_functions_compile(case, data: st.DataObject) -> None:
    args = data.draw(case.args)
    compiled = ast_ad.grad(case.fn, case.argnums, jit="numba")(*args)
    interpreted = ast_ad.grad(case.fn, case.argnums)(*args)
    assert np.allclose(compiled, interpreted, rtol=1e-12, atol=1e-15)


@pytest.mark.long  # (a Numba compile of one to three seconds a program: CI's long step)
@settings(max_examples=int(os.environ.get("AST_AD_JIT_PROGRAMS", "25")), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(programs(arrays=True, written=True, lists=False, helpers=True, returns=False), st.data())
def test_random_programs_compiled_are_the_interpreted_gradient_or_refused(program, data) -> None:
    """Random programs of arrays, some written out, with loops and branches, compiled: the code made
    for Numba (zeros of an array's shape where its adjoint restarts in a step, made for the
    arguments' shapes) gives the interpreted gradient, or Numba refuses it (``JitError``), never
    another number."""
    fn = program.load(PROGRAMS)
    args = program.arguments(data)
    argnums = tuple(range(program.arity))
    try:
        expected = ast_ad.grad(fn, argnums)(*[np.copy(a) for a in args])
    except ast_ad.errors.ASTADError:
        reject()
    try:
        compiled = ast_ad.grad(fn, argnums, jit="numba")(*[np.copy(a) for a in args])
    except JitError:
        return
    for ours, theirs in zip(compiled, expected, strict=True):
        assert np.allclose(ours, theirs, rtol=1e-11, atol=1e-13, equal_nan=True)


@pytest.mark.long  # (two Numba compiles of one to five seconds a program: CI's long step)
@settings(max_examples=int(os.environ.get("AST_AD_JIT_PROGRAMS", "25")) // 2, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(programs(arrays=True, written=True, lists=False, helpers=False, returns=False), st.data())
def test_random_nested_programs_compiled_are_the_interpreted_ones_or_refused(program,
                                                                              data) -> None:
    """A random program's gradient called in a body (``ast_ad.grad(f)(x0, ...)``, lowered into
    the code), differentiated again by reverse mode and by forward mode, compiled whole: the
    interpreted numbers, or Numba's refusal (``JitError``), never another number."""
    params = ", ".join(f"x{k}" for k in range(program.arity))
    source = program.source + (
        "\n\nimport ast_ad\n\n\n"
        f"def outer({params}):\n"
        f"    return np.sum(ast_ad.grad(f)({params}) * 0.75)\n"
    )
    outer = type(program)(source, program.arity, program.arrays, program.smooth).load(
        PROGRAMS).__globals__["outer"]
    args = program.arguments(data)
    argnums = tuple(range(program.arity))
    tangents = tuple(np.full_like(a, 0.5) if isinstance(a, np.ndarray) else 0.5 for a in args)
    try:
        with np.errstate(all="raise", under="ignore"):
            expected = ast_ad.grad(outer, argnums)(*[np.copy(a) for a in args])
            slope = ast_ad.jvp(outer, tuple(np.copy(a) for a in args), tangents)[1]
    except (ast_ad.errors.ASTADError, ValueError, TypeError, FloatingPointError,
            ZeroDivisionError, OverflowError):
        reject()
    try:
        compiled = ast_ad.grad(outer, argnums, jit="numba")(*[np.copy(a) for a in args])
    except JitError:
        compiled = None
    if compiled is not None:
        for ours, theirs in zip(compiled, expected, strict=True):
            assert np.allclose(ours, theirs, rtol=1e-11, atol=1e-13, equal_nan=True)
    try:
        _, compiled_slope = ast_ad.jvp(outer, tuple(np.copy(a) for a in args), tangents,
                                       jit="numba")
    except JitError:
        return
    assert np.allclose(compiled_slope, slope, rtol=1e-11, atol=1e-13, equal_nan=True)


def test_unsupported_code_is_refused_at_the_users_line() -> None:
    with pytest.raises(JitError) as refusal:
        ast_ad.grad(with_a_dict, 1, jit="numba")({"w": 2.0}, 3.0)
    assert refusal.value.filename == __file__ and "Numba" in str(refusal.value)
    assert "leave out jit=" in str(refusal.value)


def test_without_numba_the_error_says_what_to_install(monkeypatch) -> None:
    from ast_ad.backend import jit

    monkeypatch.setitem(sys.modules, "numba", None)  # import numba raises ImportError
    monkeypatch.setattr(jit, "_compiled", {})
    with pytest.raises(JitError, match=r'pip install numba'):
        ast_ad.grad(loop_math, jit="numba")(0.25)


def test_an_unknown_compiler_is_refused() -> None:
    with pytest.raises(ast_ad.errors.ASTADError, match="numba"):
        ast_ad.grad(loop_math, jit="cython")


# ---- each compiled helper against its Python twin ------------------------------------------------
A = np.arange(1.0, 7.0)
M = np.arange(1.0, 7.0).reshape(2, 3)
HELPER_CASES = {
    runtime.unbroadcast: [(2.5, 1.0), (A, 1.0), (0.5, A), (A * 2, A), (M, M)],
    runtime.unbroadcast_to: [(0.5, (6,)), (A * 2, (6,)), (M, (2, 3)), (1.5, (2, 3))],
    runtime.expand_reduced: [(2.0, A, None, False), (2.0, 1.5, None, False), (3.0, M, None, False)],
    runtime.reduced_count: [(A, None), (M, None), (2.0, None)],
    runtime.getitem_vjp: [
        (2.0, A, 3),
        (np.ones(2), A, slice(1, 3)),
        (np.ones(3), M, 1),
        (5.0, M, (1, 2)),
    ],
    runtime.summed_getitem_vjp: [([(1.0, 2), (3.0, 2), (0.5, 0)], A)],
    runtime.add_into: [
        (A.copy(), 2, 4.0),
        (A.copy(), slice(0, 2), np.ones(2)),
        (M.copy(), (0, 1), 2.0),
    ],
    runtime.assign_item: [(A, 1, 9.0), (M, 0, np.zeros(3)), (A, slice(2, 4), np.ones(2))],
    runtime.assign_item_vjp_x: [(A, A, 2), (M, M, (1, 1)), (A, A, slice(0, 3))],
    runtime.assign_item_vjp_value: [
        (A, A, 2, 1.0),
        (A, A, slice(1, 3), np.ones(2)),
        (M, M, 0, np.ones(3)),
        (A, np.arange(6), 1, 1.0),
    ],
    runtime.entries: [(A, 2), (A, slice(1, 4)), (M, 1), (M, (1, 2))],
    runtime.detached: [(A,), (2.0,)],
    runtime.owned_adjoint: [(0.0, A), (A * 3, A), (1.5, M)],
    runtime.dense_adjoint: [(0.0, A), (A * 2.0, A), (2.5, 1.5), (0.0, M)],
    runtime.zeros_like: [(A,), (M,), (2.5,), (A * 1j,)],
    runtime.zero_tangent: [(A,), (M,), (2.5,)],
    # (``np.array`` of a list or tuple of numbers' tangent, and of an array's)
    runtime.cast_jvp: [([1.0, 2.0], A[:2]), ((1.0, 2.5, 3.0), A[:3]), (A * 2.0, A)],
    # (vectors and matrices, each way: ``g`` has the product's shape)
    runtime.matmul_vjp_a: [(np.ones((2, 2)), M, M.T), (np.ones(3), A[:2], M), (2.0, A[:3], A[3:]),
                           (np.ones(2), M, A[:3])],
    runtime.matmul_vjp_b: [(np.ones(2), M, A[:3]), (np.ones((2, 2)), M, M.T), (2.0, A[:3], A[3:]),
                           (np.ones(3), A[:2], M)],
    runtime.outer_vjp_a: [(np.ones((2, 3)) * 2.0, A[:2], A[3:]), (M, A[4:], A[:3])],
    runtime.outer_vjp_b: [(np.ones((2, 3)) * 2.0, A[:2], A[3:]), (M, A[4:], A[:3])],
    runtime.fit: [(2.0, 1.5), (A * 2.0, A), (0.5, A), (M * 3.0, M)],
    # (a value's tangent written into floats, into integers (a zero), into a number's place)
    runtime.written_tangent: [(A, M), (2.5, A), (2.5, np.arange(3)), (A, np.arange(3) > 1),
                              (1.5, 2.0)],
    # (``y op= v``: a number rebound; an array's own dtype kept, float32 and int32 included)
    runtime.augmented_value: [(2.5, 1.5), (A * 2.0, A), (A * 2.0, A.astype(np.float32)),
                              (M + 1.0, M), (A.astype(np.int64), A.astype(np.int32)), (A, 0.5)],
    # (``np.array`` of a list of numbers, of a tuple of them, and of an array)
    runtime.cast_vjp: [(A[:2], A[:2], [1.0, 2.0]), (A[:3], A[:3], (1.0, 2.0, 3.0)), (A, A, A)],
    # (a check: it gives None, and raises where a tangent has another shape)
    runtime.check_jvp_layout: [("f.py:3", A, A * 2.0), ("f.py:3", 1.5, 2.0),
                               ("f.py:3", A, A, 1.5, 1), ("f.py:3", M, M, A, A)],
    # (a gradient lowered in place: its checks, and its result as ``grad`` gives it)
    runtime.check_gradient_layout: [("f.py:3", A), ("f.py:3", 1.5, M)],
    runtime.check_gradient_value: [("f.py:3", 1.5), ("f.py:3", np.float64(2.0))],
    runtime.gradient_like: [(A * 2.0, A), (2.5, 1.5), (0.5, A), (M * 3.0, M)],
    runtime.gradients_like: [((A * 2.0, 1.5), (A, 0.5)), ((M, A), (M, A))],
    runtime.add_adjoints: [(A, A * 2.0), (1.5, 2.0), (0.5, A), ((A, 1.0), (A, 2.0))],
    runtime.fit_adjoint: [(A, 1.5), (2.0, 1.5), (A * 2.0, A), (0.5, A)],
    runtime.pow_minus_one: [(2.0, 3.0), (0.0, 0.0), (0.0, 0.5), (-2.0, 3.0), (1.5, 2)],
    # (where the flag is down, both raise: tests/test_unbound.py)
    runtime.check_bound: [(True, "y", "f.py:3")],
    runtime.copy_of: [(A,), (M,)],
    runtime.stand_in: [(A,), (M,), (2.5,), ([A, A * 2.0],), ((A, A * 2.0),),
                       ((1.5, 2.5),)],
    runtime.loop_length: [(A, "f.py:3"), (M, "f.py:3"), ((1.0, A), "f.py:3"),
                          ([1.0, 2.0], "f.py:3")],
    runtime.real_like: [(A * 1j + A, A), (A * 1j, A * 1j), (2.0 + 1j, 1.5), (M + 0j, M)],
    runtime.unit: [
        (np.array([0j, 3 + 4j, complex(np.inf, 1.0), complex(-np.inf, np.inf)]),),
        (np.array([-2.0, 0.0, 3.0]),),
        (3 - 4j,),
        (0j,),
    ],
    runtime.inverse_or_zero: [(np.array([0.0, 2.0, np.inf]),), (np.array([0j, 1 + 1j]),), (4.0,)],
    runtime.abs_vjp: [(A, A * (1 + 1j), np.abs(A * (1 + 1j))), (2.0, 3 + 4j, 5.0)],
    runtime.roll_vjp: [(A, 2), (A, -7), (A, 1, 0)],
    runtime.summed_product: [(A, A), (0.0, A), (M, M)],
    # (a list or tuple of arrays joined along the first axis: ``g``'s slices)
    runtime.concatenate_vjp: [(A, [A[:3], A[3:]]), (M, (M[:1], M[1:])),
                              (A, [A[:2], A[2:4], A[4:]])],
    # (a loop's steps kept by columns: vectors stacked, and the products of a fixed matrix summed)
    runtime.stacked_steps: [([A, A * 2.0, A - 1.0],)],
    # (a loop's reads of a matrix's rows, taken after it: last step first; none for no step)
    runtime.rows_of: [(M, range(2)), (M, range(-1, 1)), (M, range(1, 0)),
                      (np.arange(6).reshape(3, 2), range(0, 3, 2))],
    runtime.summed_dot_vjp_a_steps: [(np.array([[1.0, 2.0], [3.0, -1.0]]), [A[:3], A[3:]], M),
                                     (np.array([[1.0, 2.0], [3.0, -1.0]]), A.reshape(2, 3), M)],
    runtime.summed_matmul_vjp_a_steps: [(np.array([[1.0, 2.0]]), [A[:3]], M)],
    runtime.summed_dot_vjp_b_steps: [(np.array([[1.0, 2.0, 0.5]]), [A[:2]], M)],
    runtime.summed_matmul_vjp_b_steps: [(np.array([[1.0, 2.0, 0.5], [0.0, 1.0, 2.0]]),
                                         [A[:2], A[2:4]], M)],
}


def test_every_compiled_helper_has_cases() -> None:
    assert set(HELPER_CASES) == set(numba_helpers.COMPILED)


@pytest.mark.parametrize("helper", list(HELPER_CASES), ids=lambda h: h.__name__)
def test_compiled_helper_matches_python(helper) -> None:
    from ast_ad.backend import jit

    jit._install(numba)
    for args in HELPER_CASES[helper]:
        python_args = [
            a.copy() if isinstance(a, np.ndarray) else list(a) if isinstance(a, list) else a
            for a in args
        ]
        compiled_args = [
            a.copy()
            if isinstance(a, np.ndarray)
            else numba.typed.List(a)
            if isinstance(a, list)
            else a
            for a in args
        ]
        with np.errstate(divide="ignore"):  # 0.0 to a negative power: inf, as the helper says
            expected = helper(*python_args)
        # (a range is made in the compiled code, as generated code makes its loops' ranges:
        # Numba takes none from Python)
        params: list[str] = []
        passed: list = []
        given: list[str] = []
        for i, a in enumerate(compiled_args):
            if isinstance(a, range):
                params += [f"a{i}_start", f"a{i}_stop", f"a{i}_step"]
                passed += [a.start, a.stop, a.step]
                given.append(f"range(a{i}_start, a{i}_stop, a{i}_step)")
            else:
                params.append(f"a{i}")
                passed.append(a)
                given.append(f"a{i}")
        call = numba.njit(
            eval(  # noqa: S307
                f"lambda {', '.join(params)}: helper({', '.join(given)})", {"helper": helper},
            )
        )
        got = call(*passed)
        if expected is None:  # a helper that writes in place: compare what it wrote
            assert np.array_equal(compiled_args[0], python_args[0]), (helper.__name__, args)
        elif helper is runtime.stand_in:  # (what it gives is read for its shape and dtype only)
            assert np.shape(got) == np.shape(expected), args
            assert np.asarray(got).dtype == np.asarray(expected).dtype, args
        else:
            pairs = zip(got, expected, strict=True) if isinstance(expected, tuple) \
                else [(got, expected)]
            for g, e in pairs:  # (a tuple item by item: ``add_adjoints`` of two tuples)
                assert np.shape(g) == np.shape(e) and np.allclose(g, e), (helper.__name__, args)


def test_the_compiled_checks_of_a_gradient_in_a_body_refuse_what_python_refuses() -> None:
    """The compiled twins of a gradient lowered in place refuse where Python's do, or do not
    compile (Numba then names the user's line): a value that is an array, an argument that is not
    of 64-bit floats; and ``gradient_like`` refuses a gradient of another shape than its
    argument, which Python's would broadcast."""
    from ast_ad.backend import jit

    jit._install(numba)
    value = numba.njit(lambda where, out: runtime.check_gradient_value(where, out))
    with pytest.raises(ValueError, match="real number"):
        value("f.py:3", A)
    assert value("f.py:3", 2.5) is None
    layout = numba.njit(lambda where, x, y: runtime.check_gradient_layout(where, x, y))
    assert layout("f.py:3", A, 1.5) is None
    with pytest.raises(numba.core.errors.TypingError):
        layout("f.py:3", np.arange(3), 1.5)
    like = numba.njit(lambda g, x: runtime.gradient_like(g, x))
    with pytest.raises(ValueError, match="shape"):
        like(A[:2], A)


def test_abs_of_an_array_is_compiled_as_numpy_takes_it() -> None:
    """Python's ``abs`` of an array, which generated code writes where the user did: Numba's takes
    numbers only; the compiled one is ``np.abs``."""
    from ast_ad.backend import jit

    jit._install(numba)
    for x in (np.array([-1.5, 0.0, 2.0]), np.array([3 + 4j, -1j])):
        assert np.array_equal(numba.njit(lambda v: abs(v))(x), abs(x))


def test_compiled_jvp_check_refuses_a_tangent_of_another_shape() -> None:
    """A tangent of another shape than its primal would broadcast into a wrong number in the code a
    jvp written in a body becomes: the compiled check raises, as the Python one does."""
    from ast_ad.backend import jit

    jit._install(numba)
    check = numba.njit(lambda p, t: runtime.check_jvp_layout("f.py:3", p, t))
    check(A, A)
    with pytest.raises(ValueError, match="shape"):
        check(A, A[:2])
    with pytest.raises(ast_ad.errors.ASTADError, match="shape"):
        runtime.check_jvp_layout("f.py:3", A, A[:2])


def test_an_item_of_a_tuple_of_numbers_adjoint_is_compiled() -> None:
    """``pack[1]`` of a pair of numbers (what a jvp written in a body returns): its adjoint is the
    pair with the item's adjoint at the index written out, zero at the other, as in Python."""
    from ast_ad.backend import jit

    jit._install(numba)
    at_one = numba.njit(lambda g, pair: runtime.getitem_vjp(g, pair, 1))
    at_last = numba.njit(lambda g, pair: runtime.getitem_vjp(g, pair, -1))
    pair = (1.5, 2.5)
    for call, index in ((at_one, 1), (at_last, -1)):
        assert call(3.0, pair) == runtime.getitem_vjp(3.0, pair, index) == (0.0, 3.0)


UP, ACROSS = np.array([1.0, 0.0]), np.array([0.0, 1.0])


def _charge(x, w):
    return 1.0 / np.sqrt((x[0] - 3.0) ** 2 + (x[1] - w) ** 2)


def _pushed(x, w):
    """Minus the charge's gradient, one jvp a coordinate: written in the body, so lowered in place
    (``Nesting.forward_mode_inlined``)."""
    return -np.array([ast_ad.jvp(_charge, (x, w), (UP, None))[1],
                      ast_ad.jvp(_charge, (x, w), (ACROSS, None))[1]])


def _fall(w):
    """GradBench's ``particle`` in short: a path stepped until it crosses the axis, its arrays
    written out (two entries each), the step's force a helper that takes two jvps."""
    x = np.array([0.0, 2.0])
    v = np.array([0.5, 0.0])
    while True:
        a = _pushed(x, w[0])
        x_new = x + 0.1 * v
        if x_new[1] > 0.0:
            x = x_new
            v = v + 0.1 * a
        else:
            break
    return x[0] ** 2 + v[1]


def test_a_nested_derivative_is_compiled_whole() -> None:
    """Reverse mode over jvps written in a helper the loop calls, compiled by Numba: the gradient
    of the whole loop, its inner derivatives included, is the interpreted one's and the
    differences'. What it takes: the arrays written out have their shapes as facts
    (``activity.constant_shapes``), so an adjoint that starts at zero in a step starts as zeros of
    its shape in the code made for Numba (``reverse_code._typed``); the pair a jvp returns is a
    tuple of numbers whose item's adjoint has a compiled version; the list ``np.array`` reads, which
    the step's saved values hold, is a tuple (``jit._fixed_lists``)."""
    w = np.array([3.0])
    compiled = ast_ad.grad(_fall, jit="numba")
    assert np.allclose(compiled(w), ast_ad.grad(_fall)(w), rtol=1e-12, atol=0.0)
    assert_fd(_fall, (w,), (0,), (ast_ad.grad(_fall)(w),))
    text = compiled.loaded().text
    step = text[text.index("for t in"):]  # (the backward loop)
    assert "np.zeros_like(" in step and not re.search(r"_bar = 0\.0\n", step)
    # (the Python code keeps the float zero, which costs nothing to add)
    assert re.search(r"_bar = 0\.0\n", ast_ad.grad(_fall).loaded().text)


def test_a_jvp_compiled_is_the_interpreted_one() -> None:
    """``jvp(..., jit="numba")``: forward mode over the jvps written in a helper the loop calls,
    compiled whole, is the interpreted jvp (the lowering's ``x = None`` before the loop that binds
    ``x`` has the tangent ``None``, one type with the arrays the loop binds, as Numba takes it);
    and by the dot-product identity, the compiled reverse mode's transpose."""
    w, v = np.array([3.0]), np.array([0.7])
    value, tangent = ast_ad.jvp(_fall, (w,), (v,), jit="numba")
    expected = ast_ad.jvp(_fall, (w,), (v,))
    assert value == pytest.approx(float(expected[0]), rel=1e-15)
    assert tangent == pytest.approx(float(expected[1]), rel=1e-12)
    gradient = ast_ad.grad(_fall, jit="numba")(w)
    assert tangent == pytest.approx(float(gradient @ v), rel=1e-10)
    # called again as last time (the layout checked inline: its compiled code directly), then with
    # another layout (made again)
    assert ast_ad.jvp(_fall, (w,), (v,), jit="numba") == (value, tangent)
    longer, along = np.array([3.0, 1.0]), np.array([0.7, 5.0])
    assert ast_ad.jvp(_fall, (longer,), (along,), jit="numba")[1] == pytest.approx(
        float(ast_ad.jvp(_fall, (longer,), (along,))[1]), rel=1e-12)
    # a function of two arguments, one moving; floats
    assert ast_ad.jvp(_charge, (UP, 2.0), (ACROSS, None), jit="numba")[1] == pytest.approx(
        ast_ad.jvp(_charge, (UP, 2.0), (ACROSS, None))[1], rel=1e-14)
    assert ast_ad.jvp(loop_math, (0.3,), (1.0,), jit="numba")[1] == pytest.approx(
        ast_ad.grad(loop_math)(0.3), rel=1e-12)


def test_a_jvp_compiled_refuses_what_it_does_not_compile() -> None:
    with pytest.raises(ast_ad.errors.ASTADError, match="numba"):
        ast_ad.jvp(_fall, (np.array([3.0]),), (np.ones(1),), jit="cython")
    with pytest.raises(ast_ad.errors.ASTADError, match="batched"):
        ast_ad.jvp(_fall, (np.array([3.0]),), (np.ones((2, 1)),), jit="numba", batched=True)
    with pytest.raises(JitError) as refusal:
        ast_ad.jvp(with_a_dict, ({"w": 2.0}, 3.0), (None, 1.0), jit="numba")
    assert refusal.value.filename == __file__


def test_a_derivative_object_in_a_compiled_body_is_refused_at_its_line() -> None:
    """A gradient held in a name and called in a body is a call of a derivative object, not code
    Numba can compile: refused, naming the user's line and what compiles."""
    def tilted(x):
        slope = ast_ad.grad(_charge)
        return np.sum(slope(x, 1.0) * x)  # object

    with pytest.raises(JitError, match="derivative object") as refusal:
        ast_ad.grad(tilted, jit="numba")(np.array([0.5, 0.25]))
    assert refusal.value.filename == __file__ and "# object" in refusal.value.line
    assert "ast_ad.grad(f, argnums)(x, ...)" in str(refusal.value)


def _tilted(x):
    return np.sum(ast_ad.grad(_charge)(x, 1.0) * x)


def _slope_norm(x, y):
    gx, gy = ast_ad.grad(_charge, argnums=(0, 1))(x, y)
    return np.sum(gx * gx) + gy * x[0]


def test_a_gradient_written_in_a_body_compiles_with_it() -> None:
    """``ast_ad.grad(f, argnums)(x, ...)`` called where it is written is lowered into the code
    (``Nesting.gradient_inlined``), so reverse over reverse and forward over reverse compile whole:
    the interpreted numbers to rounding, and finite differences."""
    x = np.array([0.5, 0.25])
    for fn, args in ((_tilted, (x,)), (_slope_norm, (x, 0.75))):
        argnums = tuple(range(len(args)))
        compiled = ast_ad.value_and_grad(fn, argnums, jit="numba")(*args)
        interpreted = ast_ad.value_and_grad(fn, argnums)(*args)
        assert compiled[0] == pytest.approx(interpreted[0], rel=1e-14)
        for a, b in zip(compiled[1], interpreted[1], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-13)
        assert_fd(fn, args, argnums, interpreted[1])
        tangents = tuple(np.ones_like(a) if isinstance(a, np.ndarray) else 1.0 for a in args)
        value, slope = ast_ad.jvp(fn, args, tangents, jit="numba")
        assert slope == pytest.approx(ast_ad.jvp(fn, args, tangents)[1], rel=1e-13)
        # (the dot-product identity between the compiled modes)
        assert slope == pytest.approx(sum(float(np.sum(g * t)) for g, t in
                                          zip(compiled[1], tangents, strict=True)), rel=1e-12)
    source = ast_ad.source(ast_ad.grad(_tilted, jit="numba"))
    assert "check_gradient_layout" in source and "grad__charge(" not in source


def _settled(x):
    y = x
    for _ in range(3):
        y = y * 0.5 + np.tanh(y)
    return np.sum(y * np.array([1.0, 2.0])[0])


def test_code_made_for_the_arguments_shapes_is_made_again_for_others() -> None:
    """The code Numba compiles is made for the arguments' shapes (a parameter then meets arrays
    written out in one shape class: ``activity.constant_shapes``); a call with other shapes gets
    code of its own, not the code for the first."""
    compiled = ast_ad.grad(_settled, jit="numba")
    for x in (np.array([0.25, -0.5]), np.array([0.25, -0.5, 1.0, 2.0]), np.array([0.5, 1.5])):
        np.testing.assert_allclose(compiled(x), ast_ad.grad(_settled)(x), rtol=1e-13)
    assert compiled.last_lengths == ((2,),)


def _grown_pair(x, w):
    pair = [x[0] * w, x[1]]
    pair.append(w)  # (a list that changes stays a list: the step's saved values hold it)
    return np.array(pair)


def _grown_pairs(w):
    x = np.array([0.5, 1.0])
    s = 0.0
    for _ in range(3):
        a = _grown_pair(x, w[0])
        s = s + np.sum(a * a)
    return s


def test_numbas_own_failure_is_a_jit_error_at_the_function() -> None:
    """Where Numba fails inside its compiler (a list held in the tuples a loop's tape holds: an
    LLVM error in Numba 0.68, not a typing error), the error is still a ``JitError``, at the user's
    function, not Numba's ``RuntimeError``; where a later Numba compiles it, the interpreted
    gradient."""
    w = np.array([0.3])
    try:
        compiled = ast_ad.grad(_grown_pairs, jit="numba")(w)
    except JitError as refusal:
        assert "Numba could not compile" in str(refusal)
        assert refusal.filename == __file__ and "def _grown_pairs" in (refusal.line or "")
    else:
        np.testing.assert_allclose(compiled, ast_ad.grad(_grown_pairs)(w), rtol=1e-13)


def _sine_weighted(x):
    return np.sum(np.sin(x) * x)


def test_a_function_numba_compiled_is_differentiated_as_its_python() -> None:
    """``numba.njit(f)`` computes what ``f`` computes: its gradient is ``f``'s (read from
    ``py_func``), while other wrappers that name a function are differentiated as what they run
    (``tests/test_trust.py``)."""
    x = np.array([0.3, -0.5, 1.1])
    compiled = numba.njit(_sine_weighted)
    assert np.array_equal(ast_ad.grad(compiled)(x), ast_ad.grad(_sine_weighted)(x))


def test_a_saved_value_that_may_still_be_none_is_un_broadcast() -> None:
    """A value the forward pass saves is ``None`` before its loop binds it (Numba types it
    ``Optional``): the compiled helpers read the array type inside (it raised an AttributeError
    while Numba typed the call)."""
    from ast_ad.backend import jit

    jit._install(numba)

    @numba.njit
    def saved(g, flag):
        x = None
        if flag:
            x = np.ones(3)
        return runtime.unbroadcast(g, x)
    assert np.array_equal(saved(np.arange(3.0), True), np.arange(3.0))


def test_a_compiled_gradient_of_floats_is_called_by_the_scalar_path() -> None:
    """Called with floats as last time, a compiled gradient goes through the fast scalar call, as
    the interpreted one does (its checks inline, no binding, no shaping): the compiled code is what
    that call runs, and an array, or a changed global, takes the general path again."""
    gradient = ast_ad.grad(corpus_control.scalar_loop, jit="numba")
    first = gradient(0.5)
    fast = gradient._scalars
    assert fast is not None and fast(0.5) == first == ast_ad.grad(corpus_control.scalar_loop)(0.5)
    assert fast.__closure__ is not None
    # compiled
    assert any(getattr(cell.cell_contents, "entry", None) is not None for cell in fast.__closure__)
    assert fast(np.array([0.5])) is runtime_not_scalars()
    assert gradient(0.25) == ast_ad.grad(corpus_control.scalar_loop)(0.25)


def runtime_not_scalars() -> object:
    from ast_ad.backend.scalar_calls import NOT_SCALARS
    return NOT_SCALARS


def test_a_list_is_joined_as_numpy_joins_it() -> None:
    """Numba's ``np.concatenate`` takes a tuple; ast_ad's overload takes the list Python code
    writes, along the first axis, and raises where numpy raises."""
    from ast_ad.backend import jit

    jit._install(numba)
    join = numba.njit(lambda parts: np.concatenate(parts))
    for parts in ([A[:1], A[1:] * 2.0], [M, M[:1] + 1.0, M], [A]):
        assert np.array_equal(join(numba.typed.List(parts)), np.concatenate(parts))
    with pytest.raises(ValueError, match="dimensions"):
        join(numba.typed.List([M, np.ones((2, 2))]))
