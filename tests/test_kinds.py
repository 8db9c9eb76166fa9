"""What each name holds (``ast_ad/analysis/kinds.py``): one small function in, the facts out; then
what the facts change in the generated code, with the gradient checked against the tracer and finite
differences each time."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import ast_ad
from ast_ad import transform
from ast_ad.analysis.activity import callee_results
from ast_ad.analysis.kinds import RANKED, kinds_of, label_fact, labelled
from ast_ad.api.arguments import shape_labels
from ast_ad.core import registry
from tests import writes_functions as wf
from tests.oracles import assert_fd, assert_same

rng = np.random.default_rng(5)
V = rng.uniform(0.6, 1.4, 5)
M = rng.uniform(0.6, 1.4, (3, 4))


def facts(fn, *args):
    return kinds_of(transform.normalized(fn), shape_labels(args))


def indexing(x, m):
    n = x.shape[0]
    row = m[1]
    entry = m[1, 2]
    part = x[1:]
    total = np.sum(m)
    product = m @ x[:4]
    k = len(x) // 2
    return x[k] * entry + total + np.sum(row) + np.sum(part) + np.sum(product) + n


def test_ranks_follow_indexing_reductions_and_products() -> None:
    known = facts(indexing, V, M)
    assert (known.rank("x"), known.rank("m"), known.rank("row"), known.rank("entry")) == (
        1,
        2,
        1,
        0,
    )
    assert (known.rank("part"), known.rank("total"), known.rank("product")) == (1, 0, 1)
    assert known.is_int("n") and known.is_int("k")


def along_axes(x, m):
    rows = np.sum(m, axis=1)
    kept = np.mean(m, axis=(0, 1), keepdims=True)
    big = m > 1.0
    chosen = np.where(big, 1, m)
    spread = x[:, None]
    crossed = np.cross(m[:, :3], m[:, 1:])
    grid = np.stack([x, x], axis=1)
    return np.sum(rows) + np.sum(kept) + np.sum(chosen) + np.sum(spread) + np.sum(crossed) \
        + np.sum(grid) + np.sum(np.outer(x, x))


def test_ranks_follow_reductions_along_axes_comparisons_and_new_axes() -> None:
    """What the code for stacks of tangents asks (``modes.batch``), and every pass reads: an
    ``np.where`` with an integer branch is floats where the other branch is (it once raised)."""
    known = facts(along_axes, V, M)
    assert [known.rank(n) for n in ("rows", "kept", "big", "chosen", "spread", "crossed",
                                     "grid")] == [1, 2, 2, 2, 2, 2, 2]
    assert known.float_array("chosen") and not known.float_array("big")
    assert ast_ad.grad(along_axes)(V, M).shape == V.shape


def branches(x, flag):
    if flag > 0:
        y = x * 2.0
    else:
        y = np.sum(x)
    z = x[0] if flag > 1 else x
    return np.sum(y) + np.sum(z)


def reshapes(x):
    flat = np.reshape(x, (-1,))
    grid = np.reshape(flat, (2, 2, -1))
    again = np.reshape(grid, x.shape)
    by_count = np.reshape(flat, len(flat))
    scalar = np.reshape(flat[:1], ())
    return np.sum(again) + np.sum(by_count) + scalar


def test_a_reshape_has_an_axis_per_entry_of_its_shape() -> None:
    known = facts(reshapes, M)
    assert (
        known.rank("flat"),
        known.rank("grid"),
        known.rank("again"),
        known.rank("by_count"),
    ) == (1, 3, 2, 1)
    assert known.rank("scalar") is None  # an array of no axes is not a number: nothing is claimed


def arrays_written_out(x):
    start = np.array([0.0, 8.0])
    counts = np.array([1, 2, 3])
    flags = np.array([True, False])
    grid = np.array([[1.0, 2.0], [3.0, 4.0]])
    return np.sum(start * x[:2]) + np.sum(counts) + np.sum(flags) + np.sum(grid)


def test_an_array_written_out_as_a_list_of_numbers_has_one_axis() -> None:
    """``np.array([0.0, 8.0])``: one axis, of floats where an entry is a float, of integers where
    all are ints; a list of bools or of lists is not claimed."""
    known = facts(arrays_written_out, V)
    assert (known.rank("start"), known.float_array("start")) == (1, True)
    assert (known.rank("counts"), known.float_array("counts")) == (1, False)
    assert known.rank("flags") is None and known.rank("grid") is None
    x = np.linspace(0.5, 1.5, 4)
    assert ast_ad.grad(arrays_written_out)(x).tolist() == [0.0, 8.0, 0.0, 0.0]


def test_a_name_bound_to_different_kinds_is_not_known() -> None:
    known = facts(branches, V, 1.0)
    assert known.rank("y") is None and known.rank("z") is None


def rebinds_its_index(x):
    total = 0.0
    for i in range(3):
        i = i * 0.5  # noqa: PLW2901 -- a float now: x[i] would fail, and no fact may say it is an integer
        total = total + i
    return total * x[0]


def loops(x):
    total = 0.0
    for i in range(x.shape[0]):
        total = total + x[i]
    for row in np.ones((2, 2)):
        total = total + np.sum(row)
    return total


def test_a_loop_variable_is_an_integer_inside_its_range_loop_only() -> None:
    function = transform.normalized(loops)
    known = kinds_of(function, shape_labels((V,)))
    first = function.body[[type(s).__name__ for s in function.body].index("For")]
    read = next(s for s in first.body if getattr(s, "target", None) == "x_item")
    assert not known.is_int("i")  # before the loop it is None, and after an empty one
    assert known.of(ir_var("i"), read) == ("int",) and known.rank("x_item") == 0
    function = transform.normalized(rebinds_its_index)
    known = kinds_of(function, shape_labels((V,)))
    assert all(known.of(ir_var("i"), s) != ("int",) for s in walk(function.body))


def ir_var(name):
    from ast_ad.ir import nodes as ir
    return ir.Var(name)


def walk(body):
    from ast_ad.ir import nodes as ir
    return list(ir.walk(body))


@pytest.mark.parametrize(("value", "fact"), [
    (np.zeros(3), ("num", 1, True)),
    (np.zeros((2, 3), dtype=np.complex128), ("num", 2, True)),
    (np.arange(3), ("num", 1, False)),
    (np.zeros(3, dtype=bool), ("num", 1, False)),
    (np.zeros(3, dtype=object), ("?",)),
    # a subclass: its indexing may differ from numpy's
    (np.zeros((2, 2)).view(np.recarray), ("?",)),
    ([1.0, 2.0], ("?",)),
])
def test_only_plain_numpy_arrays_of_numbers_are_labelled(value, fact) -> None:
    label = labelled(3, value)
    assert label_fact(label) == fact
    assert label % RANKED == 3  # the position is kept: equal labels still mean equal shapes


chain = wf.chain  # y[i] = y[i - 1] * x[i]


def chain_of_rows(x):
    y = np.ones((x.shape[0], 2))
    for i in range(1, x.shape[0]):
        y[i] = y[i - 1] * x[i]
    return np.sum(y)


def chain_of_ints(x):
    # written with floats, which are truncated: no gradient flows
    y = np.ones(x.shape[0], dtype=int)
    for i in range(1, x.shape[0]):
        y[i] = y[i - 1] * x[i] * 10.0
    return np.sum(y) + np.sum(x)


def calls_chain(x):
    return chain(x * 2.0)


chain_twice = wf.chain_twice  # each entry written twice: the entries overwritten are taped


def rows_twice(x):
    y = np.ones((x.shape[0], 2))
    for _ in range(2):
        for i in range(1, x.shape[0]):
            y[i] = y[i - 1] * x[i]
    return np.sum(y)


def chain_in_place(x):
    y = x * 1.0
    for i in range(1, x.shape[0]):
        y[i] += y[i - 1] * x[i]
    return np.sum(y)


def scalar_params(x, a):
    y = np.zeros(x.shape[0])
    for i in range(x.shape[0]):
        y[i] = x[i] * a + a * a
    return np.sum(y * y)


class Unknown(np.ndarray):
    """An array type ast_ad knows nothing of: no facts are claimed about it."""


def reads_in_an_inner_loop(x):
    total = 0.0
    for _ in range(2):
        x = x * 1.5  # bound in the outer loop: its reads are added in place in the inner loop only
        for i in range(x.shape[0]):
            total = total + x[i] * x[i - 1] + np.sum(x) * 0.1  # entries, and the whole vector
    return total


def reads_and_writes_the_same_step(x):
    y = np.zeros(x.shape[0])
    for i in range(1, x.shape[0]):
        y[i] = x[i] * x[i - 1] + y[i - 1] * x[0]
    return np.sum(y * y)


CASES = [
    (chain, (V,), (0,)),
    (chain_of_rows, (V,), (0,)),
    (chain_twice, (V,), (0,)),
    (rows_twice, (V,), (0,)),
    (chain_of_ints, (V,), (0,)),
    (calls_chain, (V,), (0,)),
    (chain_in_place, (V,), (0,)),
    (scalar_params, (V, 0.7), (0, 1)),
    (reads_in_an_inner_loop, (V,), (0,)),
    (reads_and_writes_the_same_step, (V,), (0,)),
]


@pytest.mark.parametrize(("fun", "args", "argnums"), CASES, ids=[c[0].__name__ for c in CASES])
def test_gradients_where_facts_shorten_the_code_match_the_oracles(fun, args, argnums) -> None:
    grads = ast_ad.grad(fun, argnums)(*args)
    assert_same(grads if len(argnums) > 1 else (grads,), ast_ad.tracer.grad(fun, argnums)(*args)
                if len(argnums) > 1 else (ast_ad.tracer.grad(fun, argnums)(*args),))
    assert_fd(fun, args, argnums, grads if len(argnums) > 1 else (grads,))
    # the same function, with arrays of which nothing is known (a subclass of numpy's): the general
    # helpers
    plain = [a.view(Unknown) if isinstance(a, np.ndarray) else a for a in args]
    general = ast_ad.grad(fun, argnums)(*plain)
    for g, h in zip(
        grads if len(argnums) > 1 else (grads,),
        general if len(argnums) > 1 else (general,),
        strict=True,
    ):
        np.testing.assert_allclose(np.asarray(g), np.asarray(h), rtol=1e-12)


def test_what_the_generated_code_reads_where_facts_are_known() -> None:
    text = ast_ad.source(ast_ad.grad(chain), V)
    assert "t2_bar = y_bar[i]" in text and "y[i] = y_before[i]" in text
    assert "unbroadcast" not in text and "_tape" not in text
    # an entry overwritten that another step wrote: saved as it is, a number
    text = ast_ad.source(ast_ad.grad(chain_twice), V)
    assert "y_entries.append(y[i])" in text and "t2_bar = y_bar[i]" in text
    assert "unbroadcast" not in text and "t2_tape" not in text
    # a row is an array: copied, its adjoint summed
    text = ast_ad.source(ast_ad.grad(rows_twice), V)
    assert "entries(y, i)" in text and "assign_item_vjp_value" in text
    text = ast_ad.source(ast_ad.grad(chain_of_rows), V)
    assert "y[i] = y_before[i]" in text and "assign_item_vjp_value" in text
    text = ast_ad.source(ast_ad.grad(chain_of_ints), V)  # ints: the helper, which gives no gradient
    assert "assign_item_vjp_value" in text
    assert ast_ad.grad(chain_of_ints)(V)[1:].tolist() == [1.0] * (len(V) - 1)
    # the callee is told its argument is a float vector
    text = ast_ad.source(ast_ad.grad(calls_chain), V)
    assert "def chain_bwd" in text and "unbroadcast" not in text


def test_facts_follow_the_arguments_of_each_call() -> None:
    """The same gradient called with a vector, then a list: each gets code for what it was given."""
    gradient = ast_ad.grad(chain)
    first = gradient(V)
    assert "t2_bar = y_bar[i]" in ast_ad.source(gradient)
    with pytest.raises(AttributeError):
        gradient(list(V))  # a list has no .shape: the user's own error, raised again
    assert "assign_item_vjp_value(" in ast_ad.source(gradient, V.view(Unknown))
    np.testing.assert_array_equal(gradient(V), first)


def test_second_derivatives_through_the_shortened_code() -> None:
    hessian = ast_ad.hessian(chain)(V)
    gradient = ast_ad.grad(chain)
    eps = 1e-6
    numeric = np.array(
        [(gradient(V + eps * e) - gradient(V - eps * e)) / (2 * eps) for e in np.eye(len(V))]
    )
    np.testing.assert_allclose(hessian, numeric, rtol=1e-5, atol=1e-7)
    u = rng.standard_normal(len(V))
    out, out_dot = ast_ad.jvp(chain, (V,), (u,))
    np.testing.assert_allclose(out_dot, ast_ad.grad(chain)(V) @ u, rtol=1e-12)


# ---- rules at known numbers of axes (registry.def_vjp_by_ranks) ----------------------------------
RANKED_RULES = registry.ranked_rules()


def test_every_ranked_rule_is_checked() -> None:
    assert {(fn, ranks) for fn, ranks, _ in RANKED_RULES} >= {
        (operator.matmul, r) for r in ((2, 1), (2, 2), (1, 2))
    }


@pytest.mark.parametrize(
    ("fn", "ranks", "vjps"), RANKED_RULES, ids=[f"{fn.__name__}{r}" for fn, r, _ in RANKED_RULES]
)
def test_a_ranked_rule_is_the_general_rule_at_those_ranks(fn, ranks, vjps) -> None:
    """Each against the general rule (itself checked against finite differences in test_rules.py)
    and against finite differences directly, by the dot-product identity with a random direction."""
    shapes = {
        (2, 1): [(3, 4), (4,)],
        (2, 2): [(3, 4), (4, 5)],
        (1, 2): [(4,), (4, 5)],
        (1, 1): [(4,), (4,)],
    }
    args = [rng.standard_normal(shape) for shape in shapes[ranks]]
    ans = fn(*args)
    g = rng.standard_normal(np.shape(ans))
    general = registry.lookup(fn)
    for k, vjp in enumerate(vjps):
        if vjp is None:
            continue
        ours = vjp(g, ans, *args)
        np.testing.assert_allclose(ours, general.vjp(k)(g, ans, *args), rtol=1e-13, atol=1e-13)
        u, eps = rng.standard_normal(args[k].shape), 1e-6
        moved = [a + eps * u if j == k else a for j, a in enumerate(args)]
        back = [a - eps * u if j == k else a for j, a in enumerate(args)]
        numeric = np.sum(g * (fn(*moved) - fn(*back))) / (2 * eps)
        assert abs(numeric - np.sum(ours * u)) < 1e-6 * (1 + abs(numeric))


def rnn(W, h, xs):
    for t in range(xs.shape[0]):
        h = np.tanh(W @ h + xs[t])
    return np.sum(h ** 2)


def test_products_of_known_axes_are_inlined_but_a_loop_s_fixed_matrix_is_summed_after_it() -> None:
    W, h, xs = (
        rng.standard_normal((4, 4)) * 0.5,
        rng.standard_normal(4),
        rng.standard_normal((6, 4)),
    )
    text = ast_ad.source(ast_ad.grad(rnn, (0, 1)), W, h, xs)
    assert "h_bar = W_at_h_bar @ W" in text and "matmul_vjp_b" not in text
    # W is fixed: its outer products, one product after
    assert "summed_matmul_vjp_a_steps(stacked_steps(W_at_h_bar_steps), h_steps, W)" in text
    grads = ast_ad.grad(rnn, (0, 1))(W, h, xs)
    assert_same(grads, ast_ad.tracer.grad(rnn, (0, 1))(W, h, xs))
    assert_fd(rnn, (W, h, xs), (0, 1), grads)
    assert "matmul_vjp_b" in ast_ad.source(ast_ad.grad(rnn, (0, 1)), W.view(Unknown), h, xs)


def layer(W, x):
    return np.sum(np.tanh(x @ W) ** 2)


def test_a_straight_line_product_is_inlined_both_ways() -> None:
    W, x = rng.standard_normal((4, 3)), rng.standard_normal((5, 4))
    text = ast_ad.source(ast_ad.grad(layer, (0, 1)), W, x)
    assert "matmul_vjp" not in text and ".T" in text
    grads = ast_ad.grad(layer, (0, 1))(W, x)
    assert_same(grads, ast_ad.tracer.grad(layer, (0, 1))(W, x))
    assert_fd(layer, (W, x), (0, 1), grads)
    hessian = ast_ad.hessian(layer)(W, x)  # forward mode over the inlined rules
    eps, e = 1e-6, np.zeros_like(W)
    e[1, 2] = 1.0
    column = (ast_ad.grad(layer)(W + eps * e, x) - ast_ad.grad(layer)(W - eps * e, x)) / (2 * eps)
    np.testing.assert_allclose(hessian[:, :, 1, 2], column, rtol=1e-5, atol=1e-7)


# ---- a global array's kind -----------------------------------------------------------------------
def test_a_global_array_is_checked_before_each_call(tmp_path, monkeypatch) -> None:
    """The code may rely on a global array's axes: rebound to an array of other axes, it is
    transformed again."""
    (tmp_path / "weights_module.py").write_text(
        "import numpy as np\n\nW = np.eye(3) * 0.5\n\n\ndef f(h):\n    return np.sum(np.tanh(W @ "
        "h) ** 2)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import weights_module

    gradient = ast_ad.grad(weights_module.f)
    h = rng.standard_normal(3)
    first = gradient(h)
    assert "_bar @ W" in ast_ad.source(gradient) and "matmul_vjp_b" not in ast_ad.source(gradient)
    np.testing.assert_allclose(first, ast_ad.tracer.grad(weights_module.f)(h), rtol=1e-12)
    # a stack of matrices now
    monkeypatch.setattr(weights_module, "W", rng.standard_normal((2, 3, 3)) * 0.5)
    again = gradient(h)
    np.testing.assert_allclose(again, ast_ad.tracer.grad(weights_module.f)(h), rtol=1e-12)
    assert "matmul_vjp_b" in ast_ad.source(gradient)
    # the same kind: read again, no new code
    monkeypatch.setattr(weights_module, "W", np.eye(3) * 0.25)
    loaded = gradient.loaded()
    np.testing.assert_allclose(gradient(h), ast_ad.tracer.grad(weights_module.f)(h), rtol=1e-12)
    assert gradient.loaded() is loaded


def grid(m):
    total = 0.0
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            total = total + m[i, j] * m[i, j - 1]
    return total


def rebound_after_its_read(x):
    k = 0
    total = 0.0
    for step in range(3):
        total = total + np.sum(x[k])  # k is 0 before the loop, then the last step's integer
        k = step
    return total


def reads_what_its_block_bound(x):
    total = 0.0
    k = None
    for step in range(3):
        k = step * 2  # bound in the step, before the read: the read sees this integer
        total = total + x[k]
    return total * 1.0


def test_a_read_sees_the_binding_before_it_in_its_block() -> None:
    function = transform.normalized(reads_what_its_block_bound)
    known = kinds_of(function, shape_labels((V,)))
    loop = next(s for s in function.body if type(s).__name__ == "For")
    read = next(s for s in loop.body if getattr(s, "target", None) == "x_item")
    assert not known.is_int("k")  # None before the loop: not an integer everywhere
    assert known.of(ir_var("k"), read) == ("int",) and known.rank("x_item") == 0
    function = transform.normalized(rebound_after_its_read)
    known = kinds_of(function, shape_labels((V,)))
    assert known.is_int("k")  # 0, then integers: an integer wherever it is read
    function = transform.normalized(grid)
    known = kinds_of(function, shape_labels((M,)))
    assert known.rank("m_item") == 0  # m[i, j]: a tuple of two integers takes both axes away


@pytest.mark.parametrize("fun", [grid, reads_what_its_block_bound])
def test_gradients_through_flow_facts_match_the_oracles(fun) -> None:
    arg = M if fun is grid else V
    grads = ast_ad.grad(fun)(arg)
    assert_same((grads,), (ast_ad.tracer.grad(fun)(arg),))
    assert_fd(fun, (arg,), (0,), (grads,))


def test_what_a_tape_gives_back_is_what_was_pushed() -> None:
    """In a gradient's code, transformed again (forward over reverse), a popped value has the facts
    of all the values pushed; a list read in any other way is not followed."""
    from ast_ad.analysis.kinds import _tapes
    from ast_ad.ir import nodes as ir

    lowered = ast_ad.grad(chain_twice).lowered((V,))
    function = transform.normalized(lowered.fn)
    tapes = _tapes(function)
    assert {"y_entries", "y_item_tape"} <= tapes
    known = kinds_of(function, shape_labels(lowered.args))
    pops = [s for s in ir.walk(function.body) if isinstance(s, ir.Pop) and s.source == "y_entries"]
    assert pops and all(known.no_axes(s.target) for s in pops)  # entries of a float vector: numbers


def copies_its_list(x):
    xs = []
    ys = xs
    ys.append(x)
    return xs[0] * 2.0


def test_a_copied_list_is_no_tape() -> None:
    from ast_ad.analysis.kinds import _tapes
    assert _tapes(transform.normalized(copies_its_list)) == set()


# ---- what a helper returns, and what a join makes ------------------------------------------------
def shifted(x, y):
    rolled = np.concatenate([np.zeros(1), y[:-1]])
    return np.concatenate([x[:1], x[1:] * rolled[1:]])


def stepped(x, s):
    y = np.zeros(x.shape[0])
    for _ in range(s):
        k = shifted(x, y)
        y = y + 0.5 * k
    return y[-1]


def stacked(x):
    pair = [x, x * 2.0]
    rows = np.stack(pair)
    return np.sum(rows * rows)


def joined_then_changed(x):
    parts = [x, x * 2.0]
    both = np.concatenate(parts)
    parts.append(x)
    return np.sum(both) + len(parts)


def test_a_helper_s_result_and_a_join_have_the_facts_of_what_they_make() -> None:
    results = callee_results(transform.normalized)
    known = kinds_of(transform.normalized(shifted), shape_labels((V, V)))
    assert known.rank("rolled") == 1 and known.rank("out") == 1 and known.float_array("t1")
    known = kinds_of(transform.normalized(stepped), shape_labels((V, 3)), results)
    assert known.rank("y_1") == 1 and known.float_array("t1")  # (0.5 * k: a call's result)
    assert kinds_of(transform.normalized(stepped), shape_labels((V, 3))).rank("t1") is None
    assert facts(stacked, V).rank("rows") == 2
    # a list read again after its join: not followed
    assert facts(joined_then_changed, V).rank("parts") is None


@pytest.mark.parametrize("fun", [stepped, stacked, joined_then_changed])
def test_gradients_through_helpers_and_joins_match_the_oracles(fun) -> None:
    args = (V, 3) if fun is stepped else (V,)
    grad = ast_ad.grad(fun)(*args)
    assert_same((grad,), (ast_ad.tracer.grad(fun)(*args),))
    assert_fd(fun, args, (0,), (grad,))


def test_a_loop_keeps_the_shapes_of_a_helper_s_results_not_the_arrays() -> None:
    """``k = shifted(x, y)`` is an array of one axis: the loop's backward pass reads ``0.5 * k`` for
    its shape only, so the forward pass tapes its shape."""
    text = ast_ad.source(ast_ad.grad(stepped), V, 3)
    assert "t1_shape_tape" in text and "t1_tape" not in text


# ---- a recurrent network's state: a helper's pair, rows appended then stacked, names bound first
# in a loop ---------------------------------------------------------------------------------------
def gate(z):
    return 1.0 / (1.0 + np.exp(-z))


def cell(w, h, x):
    """A layer's step: both halves of one product read by slices (``both[:n]``, ``both[n:]``)."""
    both = np.concatenate([x, h]) * w
    n = h.shape[0]
    a = gate(both[:n])
    b = np.tanh(both[n:])
    return a * b, b


def layers(w, state, xs):
    total = 0.0
    for t in range(xs.shape[0]):
        x = xs[t]
        rows = []
        for i in range(state.shape[0]):
            h, c = cell(w[i], state[i], x)
            rows.append(h)
            x = c
        state = np.stack(rows)
        total = total + np.sum(x * state[0])
    return total


def rows_counted(x):
    """Rows appended, then stacked, the list read otherwise too (``len``): it may hold anything."""
    total = 0.0
    for t in range(3):
        rows = []
        for i in range(2):
            rows.append(x * (t + i + 1.0))
        total = total + len(rows)
        state = np.stack(rows)
        total = total + np.sum(state * state)
    return total


def bound_to_none_by_the_user(x):
    y = None
    for t in range(3):
        y = x * (t + 1.0)
    return np.sum(y)


W, S = rng.uniform(0.6, 1.4, (2, 6)), rng.uniform(0.6, 1.4, (2, 3))
XS = rng.uniform(0.6, 1.4, (4, 3))


def test_a_recurrent_state_s_facts_through_a_helper_s_pair_and_a_stack() -> None:
    """A helper's ``return a * b, b`` is a pair of arrays of one axis (``("items", ...)``), which
    ``h, c = cell(...)`` unpacks; ``rows``, made empty and only appended to, then stacked, stacks
    what was appended (``kinds._grown``); ``x``, ``h``, ``c``, bound to ``None`` by the lowering
    before the loops that bind them and read only after (``ir.Function.inits``), hold what the
    loops bind; ``both[:n]`` is a slice (``slice(None, n)``'s fact). Each of these was not known."""
    results = callee_results(transform.normalized)
    known = kinds_of(transform.normalized(layers), shape_labels((W, S, XS)), results)
    assert known.facts["cell"] == ("items", (("num", 1, True), ("num", 1, True)))
    assert [known.rank(n) for n in ("state", "x", "h", "c")] == [2, 1, 1, 1]
    inner = kinds_of(transform.normalized(cell), shape_labels((W[0], S[0], XS[0])), results)
    assert inner.float_array("a") and inner.float_array("both")
    # a list read otherwise is not followed; nor a name the user binds to None
    assert facts(rows_counted, V).rank("state") is None
    assert facts(bound_to_none_by_the_user, V).rank("y") is None


def test_a_recurrent_state_s_gradient_adds_into_arrays_of_its_own() -> None:
    """With those facts, the backward pass adds each read's adjoint into an array it owns: the
    helper's slices of one product (``both_bar[index] += ...``: one array where each slice made a
    whole one and the sum added them), the loop's rows of ``w`` and ``state`` (``state_bar[i] +=
    ...``, where each step's row was kept to be summed after the loop); and adds adjoints with
    ``+``, not ``add_adjoints``. Against the tracer and finite differences, both arguments."""
    text = ast_ad.source(ast_ad.grad(layers, argnums=(0, 1)), W, S, XS)
    # (``both`` read for its shape and dtype only: a stand-in of it kept, ``def_meta_read``)
    assert "both_bar = owned_adjoint(0.0, both_like)" in text and "both_bar[index] +=" in text
    assert "state_bar[i] +=" in text and "w_bar[i] +=" in text and "summed_getitem_vjp" not in text
    assert text.count("add_adjoints(") == 1  # (the list's: ``rows_bar``)
    # ``h`` and ``c``, which each step of the inner loop binds and nothing else mentions, are zero
    # at the top of every step of both loops (``Reverser.step_zeros``): assigned, not reset to 0.0
    # and added to
    assert "c_bar = x_bar" in text and "h_bar = rows_bar.pop()" in text
    assert "c_bar = 0.0" not in text and "h_bar = 0.0" not in text
    grads = ast_ad.grad(layers, argnums=(0, 1))(W, S, XS)
    assert_same(grads, ast_ad.tracer.grad(layers, (0, 1))(W, S, XS))
    assert_fd(layers, (W, S, XS), (0, 1), grads)
    for fun in (rows_counted, bound_to_none_by_the_user):
        grad = ast_ad.grad(fun)(V)
        assert_same((grad,), (ast_ad.tracer.grad(fun)(V),))
        assert_fd(fun, (V,), (0,), (grad,))


def halves(x):
    n = x.shape[0] // 2
    return np.sin(x[:n]) * x[n:]


def through_halves(x):
    return np.sum(halves(x) ** 2) + np.sum(halves(x * x))


def test_second_derivatives_through_a_helper_s_reads_into_one_adjoint() -> None:
    """A helper's backward pass now writes its reads' adjoints into one array in place
    (``x_bar[index] += g``); a caller's derivative transforms it again: forward over reverse (the
    Hessian) and reverse over reverse (a vjp of the gradient) against differences of the
    gradient."""
    assert "x_bar[index" in ast_ad.source(ast_ad.grad(through_halves), V)
    x = np.linspace(0.3, 1.2, 6)
    gradient = ast_ad.grad(through_halves)
    hessian = ast_ad.hessian(through_halves)(x)
    differences = np.array([(gradient(x + 1e-6 * e) - gradient(x - 1e-6 * e)) / 2e-6
                            for e in np.eye(6)])
    np.testing.assert_allclose(hessian, differences, rtol=1e-6, atol=1e-8)
    v = np.linspace(-1.0, 1.0, 6)
    np.testing.assert_allclose(ast_ad.vjp(gradient, x)[1](v)[0], hessian.T @ v, rtol=1e-12,
                               atol=1e-12)


def scaled_by(v, c):
    return v * c


def pairs_and_packs(x):
    c = x[0] * 2.0  # a float number
    y = scaled_by(x, c)
    pair = (y, c)
    first = pair[0]
    last = pair[-1]
    row = [c, x[1]]
    stacked = np.array(row)
    rows = [x, y]
    grid = np.array(rows)
    joined = np.concatenate([c, c])  # (numbers do not join: it raises, and nothing is claimed)
    return np.sum(first) + last + np.sum(stacked) + np.sum(grid) + np.sum(joined)


def test_facts_through_a_helper_of_a_float_a_tuple_item_and_an_array_of_a_list() -> None:
    """A helper given a float number: its result's rank is known (a float argument is claimed a
    number, not inexact: ``fact_label``); an item of a tuple at an index written out has its
    item's fact; ``np.array`` of a list written out and read by it alone stacks its items (numbers:
    one axis; arrays of one axis: two); ``np.concatenate`` of numbers claims nothing."""
    known = kinds_of(transform.normalized(pairs_and_packs), shape_labels((V,)),
                     callee_results(transform.normalized))
    assert (known.rank("y"), known.rank("first"), known.rank("last")) == (1, 1, 0)
    assert (known.rank("stacked"), known.rank("grid")) == (1, 2)
    assert known.rank("joined") is None
    # (without the helper's facts, its result is not known)
    assert kinds_of(transform.normalized(pairs_and_packs), shape_labels((V,))).rank("y") is None
