"""Forward-mode code written for stacks of tangents (``modes.batch``): every form the registry
declares (``registry.def_stacked``) against one pass a tangent, the code it writes for the
benchmark's loop, and random programs' Jacobians and Hessians: the code for stacks, the code for
one tangent on ``Batch``es, and one pass a column give the same numbers.

Each case checks that the code for stacks ran (``lowering.passes``): a case that gave way to the
``Batch`` path would check nothing of it.
"""

from __future__ import annotations

import copy
import tempfile

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import ast_ad
from ast_ad.api import lowering
from ast_ad.core import registry
from ast_ad.modes.batch import NotStacked
from ast_ad.runtime import batched
from ast_ad.runtime.batched import BatchRefused, batched_pass
from ast_ad.testing.random_programs import programs
from tests.strategies import half
from tests.test_batched import _columns_one_by_one

DIRECTORY = tempfile.mkdtemp(prefix="ast_ad_stacked_")
RNG = np.random.default_rng(7)
V4 = RNG.standard_normal(4)
M34 = RNG.standard_normal((3, 4))
M43 = RNG.standard_normal((4, 3))
T234 = RNG.standard_normal((2, 3, 4))
MASK = V4 > 0.0


# ---- a function for each form --------------------------------------------------------------------
def elementwise(x):
    y = x * 2.0 + np.sin(x) - x / 3.0
    z = -y + (+x) * M34  # a vector's tangents against a matrix's values: broadcast
    return np.where(z > 0.0, z, 0.5 * z)


def indexed(x):
    a = x[1] * x[1:3].sum()
    b = x[None, :] * M34
    c = x[..., 2] * 2.0
    d = x[np.array([3, 0, 3])]
    e = x[MASK]
    return np.concatenate([[a + np.sum(b) + c], d * 2.0, e])


def assigned(x):
    y = np.zeros(6)
    y[0] = x[0]
    y[2:6] = x * 2.0
    for i in range(1, 4):
        y[i] = y[i - 1] * x[i] + y[i + 1]
    return y


def _made(n):
    return np.zeros((n + 2, 2))


def written_into_made(x):
    """Writes into an array a helper makes, which the kinds analysis does not prove floats: each
    value's tangent passes through ``written_tangent`` (integers would truncate it), a twin for
    stacks."""
    y = _made(x.size)
    y[0, :] = x[:2]
    for i in range(1, 4):
        y[i, 0] = y[i - 1, 0] * x[i]
    return y[:, 0] * 2.0


def read_after_write(x):
    """An entry read, then its array written at that entry, then the entry read again: the read
    must be the old value (numpy's read of one entry is a number, a copy)."""
    y = x * 1.0
    for i in range(1, 4):
        old = y[i - 1]
        y[i - 1] = old * x[i]
        y[i] = y[i] + old * 3.0
    return y


def reduced(x):
    m = np.outer(x, x) + M43 @ M34
    return np.concatenate([np.sum(m, axis=0), np.sum(m, axis=-1), np.mean(m, axis=(0, 1),
                                                                           keepdims=True)[0],
                           [np.sum(m)], np.sum(m, axis=1, keepdims=True)[:, 0]])


def products(x):
    a = M34 @ x  # a matrix by the vector's tangents
    b = x @ M43  # the tangents by a matrix
    c = np.dot(x, x)
    m = np.outer(x, V4)  # a matrix's tangents (four by four)
    d = m @ M43  # a stack of matrices by a matrix
    e = M34 @ m  # a matrix by a stack of matrices
    f = T234 @ x  # a stack of matrices by the tangents
    return np.sum(a) + np.sum(b) + c + np.sum(d) + np.sum(e) + np.sum(f)


def shaped(x):
    m = np.reshape(x, (2, 2))
    n = m.T + np.transpose(m) * 2.0
    s = np.stack([x, x * 2.0], axis=1)
    c = np.concatenate([x, x[:2]])
    r = n.reshape(-1)
    return np.sum(n * M34[:2, :2]) + np.sum(s[:, 1]) + np.sum(c * c) + r[1]


def crossed(x):
    a = np.reshape(x[:3], (1, 3)) * np.ones((5, 1))
    return np.cross(a, M34[:, :3].sum(axis=0)) + np.cross(M43[:3, :3], x[1:])[0]


def cast(x):
    y = np.asarray(x, dtype=float) * 2.0
    return y.astype(np.float64) + x


def logistic(w):
    z = M43 @ w[:3]
    return np.sum(np.logaddexp(0.0, z) - V4 * z) + 0.1 * np.sum(w * w)


def seeded(w):
    """The argument itself multiplied by a matrix: its seeds pick columns of it."""
    z = M34 @ w
    return np.sum(np.logaddexp(0.0, z) - V4[:3] * z) + 0.1 * np.sum(w * w)


def loop_hessian(x):
    y = 0.0
    for i in range(x.size):
        y = y + x[i] * np.sin(x[(i + 1) % x.size]) * y + x[i] ** 2
    return y


def summed(x):
    m = np.outer(x, x)
    return np.sum(np.sum(m, axis=0) ** 2)


def viewed(x):
    y = x * 1.0
    m = y.reshape(2, 2)
    m[0, 1] = x[0] * 3.0  # (written through a view in another shape)
    return y * 2.0


def listed_matrices(w):
    """Matrices read out of a list: their axes are not known where the code is written (the
    helpers look at run time)."""
    ws = [np.reshape(w, (2, 2)), V4]
    h = ws[0] @ ws[1][:2]
    k = ws[1][:2] @ ws[0]
    return np.sum(np.tanh(h)) + np.sum(np.sin(k))


def grown(x):
    """A list read while it still grows (``list_item``), then stacked."""
    acc = [x[0]]
    for i in range(1, x.size):
        acc.append(acc[i - 1] * np.sin(x[i]) + x[i])
    return np.stack(acc)


def stacked_up(x):
    return np.sum(np.stack([x * x, np.sin(x)]) ** 2)


def summed_up(x):
    return np.einsum("ij,j->i", M34, x) * x[:3]


A44 = RNG.standard_normal((4, 4)) + 4.0 * np.eye(4)


def linear_algebra(x):
    """A solve, a diagonal made and read, a trace, new axes, tiles, repeats, running sums and
    differences."""
    s = np.linalg.solve(A44, x * x) + np.linalg.solve(A44 + np.diag(x), V4)
    m = np.outer(x, x)
    t = np.trace(m) + np.sum(np.diag(m)) + np.sum(np.expand_dims(x, 0) * M34)
    r = np.sum(np.tile(x, 2) * np.repeat(x, 2))
    c = np.cumsum(x) + np.diff(np.concatenate([[0.0], x]))
    return s * t + r + c


def softmax_loss(x):
    z = M34 @ x
    e = np.exp(z - np.max(z))
    return np.log(np.sum(e)) - z[0]


def sorted_times(x):
    return np.sort(x) * x + np.sort(np.outer(x, V4), axis=0)[1]


def repeated(x):
    return np.sum(np.repeat(x, 2) ** 3) + np.sum(np.repeat(np.outer(x, x), 2, axis=1) ** 2)


def containers(x):
    pair = (x * 2.0, x[1] * x)
    items = [pair[0], pair[1] * 3.0]
    return np.sum(items[0] * items[1]) + np.sum(x * x)


E0, E1 = np.array([1.0, 0.0]), np.array([0.0, 1.0])


def _bowl(p, q):
    return np.sum(p * p) * q[0] - q[1] ** 2 * p[0]


def inner_derivatives(x):
    """A gradient and jvps written in the body, lowered into it: the gradient as ``grad`` gives
    it (``gradient_like`` of a stack), and an array of the jvps' values (``np.array`` of a list
    of stacks)."""
    q = x[:2] * 1.0
    for _ in range(2):
        q = q + 0.1 * ast_ad.grad(_bowl, argnums=1)(x, q)
    s = np.array([ast_ad.jvp(_bowl, (x, q), (None, E0))[1],
                  ast_ad.jvp(_bowl, (x, q), (None, E1))[1]])
    return q * s[0] + s


# (function, argument, how: "jacfwd" or "hessian"); the forms each reaches
CASES = {
    "inner_derivatives": (inner_derivatives, V4, "jacfwd"),
    "elementwise": (elementwise, V4, "jacfwd"),
    "indexed": (indexed, V4, "jacfwd"),
    "assigned": (assigned, V4, "jacfwd"),
    "written_into_made": (written_into_made, V4, "jacfwd"),
    "read_after_write": (read_after_write, V4, "jacfwd"),
    "reduced": (reduced, V4, "jacfwd"),
    "products": (products, V4, "jacfwd"),
    "shaped": (shaped, V4, "jacfwd"),
    "crossed": (crossed, V4, "jacfwd"),
    "cast": (cast, V4, "jacfwd"),
    "logistic": (logistic, V4, "hessian"),
    "seeded": (seeded, V4, "hessian"),
    "loop_hessian": (loop_hessian, V4, "hessian"),
    "containers": (containers, V4, "hessian"),
    "summed": (summed, V4, "hessian"),
    "viewed": (viewed, V4, "jacfwd"),
    "listed_matrices": (listed_matrices, V4, "hessian"),
    "grown": (grown, V4, "jacfwd"),
    "summed_up": (summed_up, V4, "jacfwd"),
    "linear_algebra": (linear_algebra, V4, "jacfwd"),
    "softmax_loss": (softmax_loss, V4, "hessian"),
    "sorted_times": (sorted_times, V4, "jacfwd"),
    "repeated": (repeated, V4, "hessian"),
    "stacked_up": (stacked_up, V4, "hessian"),
}


def _one_pass_a_column(fn, x, how):
    """The Jacobian (or Hessian) one pass a unit vector, by the code for one tangent."""
    target = ast_ad.grad(fn) if how == "hessian" else fn
    columns = []
    for j in range(x.size):
        e = np.zeros(x.size)
        e[j] = 1.0
        columns.append(np.asarray(ast_ad.jvp(target, (x,), (e,))[1]))
    return np.stack(columns, axis=-1)


def _by_batch(matrix_of, x):
    """The same matrix by the code for one tangent run on ``Batch``es (no code for stacks)."""
    saved = lowering.stacked_code
    lowering.stacked_code = lambda *_: None
    try:
        return matrix_of(x)
    finally:
        lowering.stacked_code = saved


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_code_for_stacks_gives_each_column_s_own_pass(name) -> None:
    fn, x, how = CASES[name]
    matrix_of = ast_ad.hessian(fn) if how == "hessian" else ast_ad.jacfwd(fn)
    before = lowering.passes["stacked"]
    got = np.asarray(matrix_of(x))
    assert lowering.passes["stacked"] > before, "the code for stacks did not run"
    want = _one_pass_a_column(fn, x, how)
    np.testing.assert_allclose(got, want.reshape(got.shape), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got, np.asarray(_by_batch(matrix_of, x)), rtol=1e-10, atol=1e-12)


def _stacked_source(fn, args, how="jacfwd"):
    target = ast_ad.grad(fn) if how == "hessian" else fn
    code = lowering.stacked_code(lowering.lower(target, args), (0,))
    assert code is not None
    return code.text


def test_every_form_the_registry_declares_is_reached() -> None:
    """Each function with a form for stacks (``registry.def_stacked``) is called, with a stack,
    by the code for stacks of one of the cases above (the twin a form names, or the function
    itself)."""
    sources = "\n".join(_stacked_source(fn, (x,), how) for fn, x, how in CASES.values())
    missing = []
    for fn, (how, twin, *_rest) in registry.fact_table("stacked").items():
        if how == "twin":
            name = twin.__name__
        elif how == "product":
            name = "@"
        else:
            continue  # (elementwise, index, reduce: written as numpy's own calls)
        if name not in sources:
            missing.append(getattr(fn, "__name__", repr(fn)))
    assert not missing, missing


def chained(x):
    y = np.zeros(x.size)
    y[0] = x[0]
    for i in range(1, x.size):
        y[i] = 0.5 * y[i - 1] * np.sin(x[i]) + x[i - 1] ** 2
    return y


def test_an_element_loop_keeps_its_statements_for_stacks() -> None:
    """The batch axis last: the loop's tangent statements are the code for one tangent's, each
    entry's tangents one contiguous row; the products of a stack by two numbers multiply the
    numbers first, and nothing is copied (each entry read is used before the loop writes)."""
    text = _stacked_source(chained, (np.linspace(0.1, 1.0, 6),))
    loop = text[text.index("for i in"):]
    assert "y_1_dot[i] = " in loop
    assert "y_1_dot[t1] * (0.5 * sin_x_item_1)" in loop
    loop = loop[:loop.index("returned")]
    for absent in ("np.copy", "Batch", "as_batch", "[:, ", "slice("):
        assert absent not in loop, absent


def test_the_unit_seeds_of_an_element_loop_are_added_as_numbers() -> None:
    """A dense Jacobian's seeds are unit vectors: ``s + x_dot[i] * c``, the seeds' row ``i``
    times a number, is ``c`` added at one entry of ``s`` (``unit_added``), checked when the code
    starts (``unit_seeds``); the same matrix as one pass a column, and with other seeds the pass
    gives way to the general code, with the same numbers."""
    x = np.linspace(0.1, 1.0, 6)
    text = ast_ad.source(ast_ad.jacfwd(chained), x)
    loop = text[text.index("for i in"):text.index("returned")]
    assert "units = unit_seeds(x_dot)" in text and loop.count("unit_added(") == 2
    # (the second adds into the first's result, and the first into the product it alone reads)
    assert loop.count("units, True)") == 2
    assert "x_dot[" not in loop  # (the rows are not read: nothing is multiplied by them)
    np.testing.assert_allclose(ast_ad.jacfwd(chained)(x), _one_pass_a_column(chained, x, "jacfwd"),
                               rtol=1e-13)
    lowered = lowering.lower(chained, (x,))
    seeds = RNG.standard_normal((4, 6))
    stopped = lowering.passes["stopped"]
    with_units = lowering.stacked_pass(lowered, (0,), (seeds,), units=True)
    assert lowering.passes["stopped"] == stopped + 1  # (``NotUnitSeeds``: the general pass)
    general = lowering.stacked_pass(lowered, (0,), (seeds,))
    assert np.array_equal(with_units[1].data, general[1].data)


@pytest.mark.parametrize("owned", [False, True])
def test_a_unit_row_times_a_number_added_is_the_product_and_the_sum(owned) -> None:
    """``unit_added`` against what it stands for, ``s + seeds[index] * scale``: every index of a
    block of unit vectors that holds some of them, numbers of each kind, and what it leaves to the
    expression (a slice, a scale that is not finite or not real, a zero standing for a stack)."""
    seeds = np.eye(7)[:, 2:6]
    units = batched.unit_seeds(seeds)
    assert units == (2, 7, 4)
    with pytest.raises(batched.NotUnitSeeds):
        batched.unit_seeds(seeds * 2.0)
    for index in [*range(-7, 7), np.int64(3), slice(1, 4), [0, 3]]:
        for scale in (2.5, np.float64(-1.5), 3, np.inf, 1j, np.float32(0.5)):
            s = np.linspace(-1.0, 1.0, 4)
            with np.errstate(invalid="ignore"):  # (inf times the zeros: nan, as numpy says)
                want = s + seeds[index] * scale
                got = batched.unit_added(s, seeds, index, scale, units, owned)
            assert np.array_equal(got, want, equal_nan=True) and got.dtype == want.dtype, \
                (index, scale)
    assert np.array_equal(batched.unit_added(0.0, seeds, 4, 2.0, units), seeds[4] * 2.0)
    with pytest.raises(IndexError):
        batched.unit_added(np.zeros(4), seeds, 7, 1.0, units)


def test_the_seeds_of_a_jacobian_pick_columns_of_a_matrix() -> None:
    """``A @ x_dot`` where ``x_dot`` is the identity's columns: ``A``'s columns, not a product;
    with other directions (``jvp(..., batched=True)``), the product."""
    text = _stacked_source(seeded, (V4,), "hessian")
    assert "seeded_product(" in text
    directions = RNG.standard_normal((5, 4))
    g = ast_ad.grad(seeded)
    _, batched = ast_ad.jvp(g, (V4,), (directions,), batched=True)
    for j in range(5):
        np.testing.assert_allclose(batched[j], ast_ad.jvp(g, (V4,), (directions[j],))[1],
                                   rtol=1e-12, atol=1e-14)


def test_a_statement_with_no_form_gives_way_to_batches() -> None:
    """``np.kron`` has no form for stacks: the code for stacks is not made (``NotStacked``, named
    in the log), and the Jacobian is the same as one pass a column."""
    def f(x):
        return np.kron(x, np.sin(x))

    x = np.linspace(0.2, 0.8, 3)
    with pytest.raises(NotStacked, match="kron"):
        from ast_ad import transform
        transform.stacked_jvp_function(*lowering._jvp_of(lowering.lower(f, (x,)), (0,)))
    np.testing.assert_allclose(ast_ad.jacfwd(f)(x), _one_pass_a_column(f, x, "jacfwd"))


def test_a_tangent_of_a_value_s_call_is_not_written_for_stacks() -> None:
    """A tangent that some path binds to what a call of values gives (``np.zeros_like(x)``, no
    batch axis) could not be read as a stack: refused, not guessed."""
    def f(x, flag):
        t = x * 1.0
        if flag > 0.0:
            t = np.zeros_like(x) + 1.0
        return t * x

    x = np.linspace(0.2, 0.8, 3)
    for flag in (1.0, -1.0):
        np.testing.assert_allclose(ast_ad.jacfwd(f)(x, flag),
                                   np.stack([ast_ad.jvp(f, (x, flag), (e, 0.0))[1]
                                             for e in np.eye(3)], axis=-1))


# ---- random programs -----------------------------------------------------------------------------
def _jacobians(program, data):
    """For each array argument whose code for stacks is made: that code run itself (not its
    fallback), the value Python's bit for bit and each column of the Jacobian its own pass's."""
    note(program.source)
    fn = program.load(DIRECTORY)
    args = tuple(program.arguments(data))
    for k, x in enumerate(args):
        if np.ndim(x) == 0 or np.size(x) < 2:
            continue
        # (the seeds are the unit vectors: the code for them, ``units``, and the general code)
        for units in (False, True):
            lowered = lowering.lower(fn, copy.deepcopy(args))
            code = lowering.stacked_code(lowered, (k,), units)
            if code is None:
                continue
            n = np.size(x)
            seed = np.eye(n).reshape((n, *np.shape(x)))
            try:
                with batched_pass(n):
                    raw, raw_dot = lowering.run(code, *lowered.args,
                                                np.ascontiguousarray(np.moveaxis(seed, 0, -1)))
            except BatchRefused:
                continue  # (a helper's check at run time: the caller gives way to Batches)
            except ast_ad.errors.InPlaceAliasError:
                # (the memory model's refusal at run time, at the user's line: the one-pass code
                # refuses the same program, which Python runs)
                with pytest.raises(ast_ad.errors.InPlaceAliasError):
                    ast_ad.jvp(fn, copy.deepcopy(args), tuple(
                        seed[0] if j == k else (np.zeros_like(a) if np.ndim(a) else 0.0)
                        for j, a in enumerate(args)))
                continue
            except Exception as failure:  # noqa: BLE001 (the program's error: Python raises too)
                with pytest.raises(type(failure)):
                    fn(*copy.deepcopy(args))
                continue
            assert np.array_equal(lowered.finish(raw),
                                  fn(*copy.deepcopy(args)), equal_nan=True)
            finished = lowered.finish_dot(raw, raw_dot)
            try:
                want = _columns_one_by_one(fn, args, k)
            except ast_ad.errors.ASTADError:
                return
            for j, column in enumerate(want):
                np.testing.assert_allclose(lowering._one_of(finished, j), column, rtol=1e-9,
                                           atol=1e-12)


@half()
@given(programs(arrays=True), st.data())
def test_the_code_for_stacks_of_a_program_gives_each_column_s_own_pass(program, data) -> None:
    """Random programs: the value bit for bit, each column of the Jacobian its own pass's."""
    _jacobians(program, data)


@half()
@given(programs(arrays=True, mutation=True), st.data())
def test_the_code_for_stacks_of_a_mutating_program_gives_each_column_s_own_pass(program,
                                                                                data) -> None:
    """The same for programs that write into arrays, through views, aliases and containers."""
    _jacobians(program, data)


def three_scalings(x):
    """A stack times three numbers in a row: regrouped twice (``(s * a) * b`` is ``s * (a *
    b)``), the numbers made before the products that read them."""
    y = np.zeros(x.size)
    for i in range(1, x.size):
        y[i] = x[i] * 0.5 * np.sin(x[i - 1]) * 3.0 * x[0]
    return y


def test_products_by_several_numbers_are_regrouped_in_order() -> None:
    x = np.linspace(0.1, 0.9, 5)
    text = _stacked_source(three_scalings, (x,))
    assert "x_dot[i] * (0.5 * sin_x_item_1)" in text
    before = lowering.passes["stacked"]
    got = ast_ad.jacfwd(three_scalings)(x)
    assert lowering.passes["stacked"] > before
    np.testing.assert_allclose(got, _one_pass_a_column(three_scalings, x, "jacfwd"), rtol=1e-12)


def test_a_stack_read_once_is_written_into_only_where_it_fits() -> None:
    """``stacked_into`` writes the result into its operand only where that operand is an array of
    its own memory of the result's shape and dtype; a view, a broadcast or another dtype gets a
    new array; the numbers are the ufunc's either way."""
    from ast_ad.runtime.batched import stacked_into
    a = RNG.standard_normal((4, 3))
    b = RNG.standard_normal(3)
    want = a * b
    got = stacked_into(np.multiply, 0, a, b)
    assert got is a and np.array_equal(got, want)
    wide = RNG.standard_normal((4, 1))
    assert stacked_into(np.add, 0, wide, a).shape == (4, 3)  # (would not fit: a new array)
    view = a[1:]
    assert stacked_into(np.negative, 0, view) is not view
    ints = np.arange(3)
    assert stacked_into(np.multiply, 0, ints, 0.5).dtype == float
    text = _stacked_source(seeded, (V4,), "hessian")
    assert "stacked_into(" in text


def recursive_power(x, n):
    if n == 0:
        return x * 0.0 + 1.0
    return x * recursive_power(x, n - 1)


def test_a_function_that_calls_itself_is_written_for_stacks_or_gives_way() -> None:
    """A callee that calls itself: its result's facts are not looked for forever; the Jacobian is
    each column's own pass."""
    x = np.linspace(0.5, 1.5, 3)
    got = ast_ad.jacfwd(recursive_power)(x, 3)
    want = np.stack([ast_ad.jvp(recursive_power, (x, 3), (e, None))[1] for e in np.eye(3)],
                    axis=-1)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def hoisted_tangent(x0, x1):
    for i0 in range(2):
        x1 += 0.1 * i0 * np.sin(x0)
    return np.sum(x1)


def items_of_the_seeds(x):
    """Items of the seeds' stack read once by a product: a slice is a view of the seeds (never
    written into), a list of indices a new array (written into)."""
    sliced = x[1:] * 2.0
    picked = x[[0, 2, 1, 3, 0]] * 3.0
    return np.concatenate([sliced, picked, x[:2] + 1.0])


def test_an_item_of_a_stack_is_written_into_only_where_it_is_an_array_of_its_own() -> None:
    """The product of the items at a list of indices (a new array, read once) is written into
    that array (``stacked_into``, which checks at run time that it is one of its own); the slice,
    a view of the seeds, which the later columns still read, is not."""
    x = np.linspace(0.5, 2.0, 4)
    text = _stacked_source(items_of_the_seeds, (x,))
    assert text.count("stacked_into(np.multiply") == 1, text
    assert "picked_dot = stacked_into(np.multiply, 0, " in text, text
    np.testing.assert_array_equal(ast_ad.jacfwd(items_of_the_seeds)(x),
                                  _one_pass_a_column(items_of_the_seeds, x, "jacfwd"))
    seeds = np.eye(4)
    # (a fancy index along the first axis is a new array; along another, numpy may give a view
    # of one it made, which is refused as any view is)
    view, own, other = seeds[1:], seeds[[0, 2]], seeds[:, [0, 2]]
    assert batched.stacked_into(np.multiply, 0, view, 2.0) is not view
    assert batched.stacked_into(np.multiply, 0, other, 2.0) is not other
    assert np.array_equal(seeds, np.eye(4))
    assert batched.stacked_into(np.multiply, 0, own, 2.0) is own


def test_the_quick_check_of_a_write_into_a_stack_agrees_with_numpys_rules() -> None:
    """``stacked_into`` first compares shapes and dtypes itself (``_fits``), then asks numpy: where
    the quick check says the result fits, numpy's broadcasting and promotion say so too, and the
    result is the ufunc's either way."""
    for target, other in [(np.ones(4), 0.5), (np.ones((3, 4)), np.ones(4)),
                          (np.ones((3, 4)), np.ones((3, 1))), (np.ones(4), np.ones((2, 4))),
                          (np.ones(4, np.float32), 0.5), (np.ones(4, np.float32), np.ones(4)),
                          (np.ones(4), 1j), (np.ones(4), np.float32(2.0)), (np.ones(4), 2),
                          (np.ones(4, complex), 0.5)]:
        want = np.multiply(target, other)
        if batched._fits(target, (target, other)):
            assert np.broadcast_shapes(target.shape, np.shape(other)) == target.shape
            assert np.result_type(target, other) == target.dtype
        got = batched.stacked_into(np.multiply, 0, target.copy(), other)
        assert got.shape == want.shape and got.dtype == want.dtype and np.array_equal(got, want)


def test_a_stack_made_before_a_loop_and_read_in_it_is_not_written_into() -> None:
    """``sin_x0_dot`` is made once, before the loop (``optimize.hoist``), and read by one statement
    in it, at every step: written into at the first step, the second would read the product
    (found by the long profile of the random programs: a wrong Jacobian, 0 for 0.1)."""
    x0, x1 = np.zeros(3), np.zeros(3)
    text = _stacked_source(hoisted_tangent, (x0, x1))
    assert "stacked_into(np.multiply, 0, sin_x0_dot" not in text
    got = ast_ad.jacfwd(hoisted_tangent)(x0.copy(), x1.copy())
    want = [ast_ad.jvp(hoisted_tangent, (x0.copy(), x1.copy()), (e, None))[1] for e in np.eye(3)]
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.long  # (a few minutes: CI's ``-m long`` step)
@settings(max_examples=300, deadline=None)
@given(programs(arrays=True, mutation=True), st.data())
def test_many_programs_written_for_stacks_give_each_column_s_own_pass(program, data) -> None:
    """More random programs, with mutation and loops, than the default run draws: the long
    profile's draws found the wrong Jacobian of ``hoisted_tangent`` above, where forty did not."""
    _jacobians(program, data)


@pytest.mark.parametrize("which", ["a", "b"])
@pytest.mark.parametrize("stacked", ["g", "other"])
def test_the_adjoints_of_products_for_stacks_are_each_tangent_s(which, stacked) -> None:
    """``stacked_outer_vjp_*`` and ``stacked_matmul_vjp_*`` with the stack in each place they take
    one: for each tangent, the helper for one tangent."""
    from ast_ad.runtime import adjoints
    from ast_ad.runtime import batched as rb
    size = 4
    a, b = RNG.standard_normal((2, 3)), RNG.standard_normal(5)
    ma, mb = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))
    for one, twin, (x, y), g_shape in [
        (getattr(adjoints, f"outer_vjp_{which}"), getattr(rb, f"stacked_outer_vjp_{which}"),
         (a, b), (6, 5)),
        (getattr(adjoints, f"matmul_vjp_{which}"), getattr(rb, f"stacked_matmul_vjp_{which}"),
         (ma, mb), (3, 2)),
    ]:
        g = RNG.standard_normal(g_shape)
        place = 1 if which == "b" else 2  # (the operand the adjoint is linear in, but for g)
        operands = [g, x, y]
        stacks = [False, False, False]
        k = 0 if stacked == "g" else place
        operands[k] = RNG.standard_normal((*np.shape(operands[k]), size))
        stacks[k] = True
        got = twin(*operands, stacks=tuple(stacks), size=size)
        for j in range(size):
            each = [o[..., j] if s else o for o, s in zip(operands, stacks, strict=True)]
            np.testing.assert_allclose(got[..., j], one(*each), rtol=1e-12, atol=1e-14)


_LEFT = [(3,), (2, 3), (4, 2, 3), (1, 2, 3)]
_RIGHT = [(3,), (3, 2), (4, 3, 2), (1, 3, 2), (2, 1, 3, 2)]


@pytest.mark.parametrize("stacks", [(True, False), (False, True)])
@pytest.mark.parametrize("left", _LEFT, ids=str)
@pytest.mark.parametrize("right", _RIGHT, ids=str)
def test_a_matrix_product_of_a_stack_is_each_columns_product(left, right, stacks) -> None:
    """``stacked_matmul`` of a numpy array and a stack of tangents (the batch axis last), one
    product numpy makes for all of them, is ``a @ b`` for each tangent on its own, whatever the
    operands' numbers of axes and broadcast batch axes; shapes ``a @ b`` refuses are refused."""
    size = 5
    a = RNG.standard_normal(left + ((size,) if stacks[0] else ()))
    b = RNG.standard_normal(right + ((size,) if stacks[1] else ()))
    try:
        want = np.stack([np.matmul(a[..., t] if stacks[0] else a, b[..., t] if stacks[1] else b)
                         for t in range(size)], axis=-1)
    except ValueError:
        with pytest.raises(ValueError):
            batched.stacked_matmul(a, b, stacks=stacks, size=size)
        return
    got = batched.stacked_matmul(a, b, stacks=stacks, size=size)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14)
