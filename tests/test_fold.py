"""Copies folded away, and intermediate values written into their one reader
(``ast_ad/optimize/fold.py``): a few lines in, the lines out; where folding would change what a read
sees, the copy or the name stays."""

from __future__ import annotations

import textwrap

import gast
import pytest

from ast_ad.backend import printer
from ast_ad.ir import syntax
from ast_ad.optimize.fold import Inliner, folded, folded_scanned, shared_factor


def fold(source: str, keep: set[str] | None = None) -> str:
    body = gast.parse(textwrap.dedent(source)).body
    before = [printer.to_source(syntax.to_ast(s)) for s in body]
    out = folded(body, keep or set())
    assert [printer.to_source(syntax.to_ast(s)) for s in body] == before  # the input is not changed
    return "".join(printer.to_source(syntax.to_ast(s)) for s in out).strip()


@pytest.mark.parametrize(
    ("source", "keep", "expected"),
    [
        # the plain case: every read of the copy reads its source
        ("a = b\nc = a * 2\nd = a + c\n", {"c", "d"}, "c = b * 2\nd = b + c"),
        # the source is bound again before the last read: the copy keeps the old value, so it stays
        ("a = b\nb = b * 2\nc = a + b\n", {"c"}, "a = b\nb = b * 2\nc = a + b"),
        # ... but a statement that reads the copy and then binds the source is fine
        ("a = b\nb = b + a\n", {"b"}, "b = b + b"),
        # read before the copy (a parameter of the same name, say): not folded
        ("c = a\na = b\nd = a\n", {"c", "d"}, "c = a\na = b\nd = a"),
        # bound twice: not folded
        ("a = b\na = a * 2\nc = a\n", {"c"}, "a = b\na = a * 2\nc = a"),
        # read after the block (kept): stays
        ("a = b\nc = a\n", {"a", "c"}, "a = b\nc = a"),
        # a copy nothing reads goes
        ("a = b\nc = b\n", {"c"}, "c = b"),
        # a loop that binds the source, after the copy and before a read inside it: stays
        (
            "a = b\nfor i in r:\n    b = b + 1\n    c = a\n",
            {"c", "b"},
            "a = b\nfor i in r:\n    b = b + 1\n    c = a",
        ),
        # a copy inside a loop's body, read there only: folded in the body
        ("for i in r:\n    a = b\n    c = a * i\n", {"c"}, "for i in r:\n    c = b * i"),
        # read in the next step, before the copy: stays
        ("for i in r:\n    c = a\n    a = b\n", {"c"}, "for i in r:\n    c = a\n    a = b"),
        # deleted later: a deletion binds (the name may not be read after it), so not folded
        ("a = b\nc = a\ndel a\n", {"c"}, "a = b\nc = a\ndel a"),
    ],
)
def test_what_is_folded(source, keep, expected) -> None:
    assert fold(source, keep) == expected


@pytest.mark.parametrize(
    ("source", "keep", "expected"),
    [
        # bound twice inside one block: not folded (the scan of the ``if`` names each name it binds
        # once)
        (
            "if c:\n    a = b\n    a = a + d\n    e = a * 2\n",
            {"e"},
            "if c:\n    a = b\n    a = a + d\n    e = a * 2",
        ),
        ("if c:\n    a = b\n    e = a * 2\n", {"e"}, "if c:\n    e = b * 2"),
    ],
)
def test_what_is_folded_with_the_statements_scanned(source, keep, expected) -> None:
    """The scans reverse mode hands ``folded_scanned`` (``Inliner.scan``) give the same answer as
    the fold's own count: a copy into a name a block binds again is not folded past the second
    binding (forward mode's IR read by reverse mode made ``t_bar = x_bar`` and then ``t_bar = t_bar
    + ...`` in one branch)."""
    body = gast.parse(textwrap.dedent(source)).body
    inliner = Inliner(pure, frozenset(), frozenset())
    out, _ = folded_scanned(body, keep, [inliner.scan(stmt) for stmt in body])
    assert "".join(printer.to_source(syntax.to_ast(s)) for s in out).strip() == expected
    assert fold(source, keep) == expected


# ---- Inliner: an intermediate value written into the one statement that reads it -----------------

PURE = {"sin", "cos", "f"}  # the functions these cases treat as registered, with no effect


def pure(call: gast.Call) -> bool:
    return type(call.func) is gast.Name and call.func.id in PURE


def inlined(
    code: str, keep: frozenset[str] = frozenset(), numbers: frozenset[str] = frozenset()
) -> str:
    body = gast.parse(textwrap.dedent(code)).body
    inliner = Inliner(pure, keep, numbers)
    inliner.count(body)
    out = inliner.block(body)
    return "\n".join(printer.to_source(syntax.to_ast(stmt)).strip() for stmt in out)


def test_a_chain_of_temporaries_becomes_the_expression_written_out() -> None:
    assert inlined("""
        tape = []
        t1 = x * 0.99
        s = sin(x)
        t2 = s * 0.1
        tape.append(x)
        x = t1 + t2
        """) == "tape = []\ntape.append(x)\nx = x * 0.99 + sin(x) * 0.1"


def test_a_list_that_is_not_only_a_tape_may_change_what_a_value_reads() -> None:
    """``tape`` is not made empty here: its ``append`` may be anything's, so nothing moves past
    it."""
    assert inlined("t1 = x * 0.99\ntape.append(x)\nx = t1 + 1.0\n").startswith("t1 = x * 0.99")


def test_a_value_read_twice_keeps_its_name() -> None:
    assert inlined("""
        s = sin(x)
        y = s * s
        """) == "s = sin(x)\ny = s * s"


def test_three_statements_that_each_read_the_last_become_one() -> None:
    """The backward step of ``x = x * 0.99 + sin(x) * 0.1``: the old ``x_bar`` is read by the last
    statement, which binds it again, so each value is read once."""
    assert inlined("""
        tape = []
        t1_bar = x_bar
        x = tape.pop()
        s_bar = x_bar * 0.1
        x_bar = s_bar * cos(x)
        x_bar = x_bar + t1_bar * 0.99
        """) == "tape = []\nx = tape.pop()\nx_bar = x_bar * 0.1 * cos(x) + x_bar * 0.99"


@pytest.mark.parametrize("between", [
    "y[0] = 5.0",  # an item write may change what t read
    "y += 1.0",  # so may an augmented assignment
    "g(y)",  # and a call with an effect
    "y = 2.0",  # t read the old y
])
def test_nothing_moves_past_a_change_of_what_it_reads(between: str) -> None:
    code = f"t = y[0] * 2.0\n{between}\nz = t + 1.0\n"
    assert inlined(code).startswith("t = y[0] * 2.0")


def test_a_number_moves_past_an_item_write() -> None:
    """Where every name the expression reads holds a number, no object it reads can change in
    place."""
    assert inlined("t = a * 2.0\ny[0] = 5.0\nz = t + 1.0\n", numbers=frozenset({"a"})) == \
        "y[0] = 5.0\nz = a * 2.0 + 1.0"
    # but not past a call that may have an effect (a print): what may fail stays before it
    assert inlined("t = a * 2.0\ng(y)\nz = t + 1.0\n", numbers=frozenset({"a"})).startswith(
        "t = a * 2.0"
    )


def test_an_expression_with_an_effect_or_an_unknown_call_stays() -> None:
    assert inlined("t = g(x)\nz = t + 1.0\n") == "t = g(x)\nz = t + 1.0"
    assert inlined("t = xs.pop()\nz = t + 1.0\n") == "t = xs.pop()\nz = t + 1.0"


def test_nothing_moves_across_a_line_comment_or_into_a_comprehension() -> None:
    body = gast.parse("t = x * 2.0\nz = t + 1.0\n").body
    body.insert(1, syntax.comment("line 3: z = ..."))
    inliner = Inliner(pure, frozenset(), frozenset())
    inliner.count(body)
    assert len(inliner.block(body)) == 3
    assert inlined("t = x * 2.0\nzs = [t * k for k in ks]\n").startswith("t = x * 2.0")


def test_the_users_variables_keep_their_names() -> None:
    assert (
        inlined("h = sin(x)\nout = h * 2.0\n", keep=frozenset({"h"})) == "h = sin(x)\nout = h * 2.0"
    )


def test_a_product_next_to_a_matrix_product_keeps_its_name() -> None:
    """``a * b @ W`` is ``(a * b) @ W`` but reads as ``a * (b @ W)``: the product keeps its name."""
    assert inlined("g = a * b\nh = g @ W\n") == "g = a * b\nh = g @ W"
    assert inlined("g = a @ b\nh = g * c\n") == "g = a @ b\nh = g * c"
    assert inlined("g = f(a)\nh = g @ W\n") == "h = f(a) @ W"
    # as the right operand it is printed in parentheses, which say what comes first
    assert inlined("g = a * b\nh = W @ g\n") == "h = W @ (a * b)"
    assert inlined("g = a @ b\nh = c * g\n") == "h = c * (a @ b)"
    # and what moved into a statement counts: ``g @ W`` written into ``h``, ``g = a * b`` stays
    # apart
    assert inlined("g = a * b\nm = g @ W\nh = m + c\n") == "g = a * b\nh = g @ W + c"


def test_a_block_left_with_comments_alone_gets_pass() -> None:
    body = [syntax.comment("line 2: y = y"), *gast.parse("t = x\n").body]
    assert folded(body, keep=set())[-1].__class__ is gast.Pass


# ---- shared_factor: an adjoint taken out of a sum of products that all start with it -------------

# the calls these cases treat as giving a Python number (``math.cos``)
NUMBER_CALLS = {"cos", "sin"}


def factored(code: str, adjoints: frozenset[str] = frozenset({"x_bar", "g"})) -> str:
    """``code`` through ``shared_factor``, with ``x_bar`` and ``g`` the adjoints (``x`` and ``y``
    are not)."""
    body = gast.parse(textwrap.dedent(code)).body
    out = shared_factor(
        body, adjoints, lambda call: type(call.func) is gast.Name and call.func.id in NUMBER_CALLS
    )
    return "\n".join(printer.to_source(syntax.to_ast(stmt)).strip() for stmt in out)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("x_bar = x_bar * 0.1 * cos(x) + x_bar * 0.99", "x_bar = x_bar * (0.1 * cos(x) + 0.99)"),
        ("x_bar = g * 2.0 - g * sin(x) + g * -3", "x_bar = g * (2.0 - sin(x) - 3)"),
        # a minus-led term is subtracted at any depth: in parentheses, and in a call's arguments
        ("x_bar = g + (a + -b * c)", "x_bar = g + (a - b * c)"),
        ("x_bar = f(a + -b) - -c", "x_bar = f(a - b) + c"),
        # two minus signs: none (``-(-a * b)`` is ``a * b``, to the bit)
        ("x_bar = -(-g * b) * f(c)", "x_bar = g * b * f(c)"),
        ("x_bar = a + -(-g)", "x_bar = a + g"),
        (
            "for x in xs:\n    x_bar = g * 2.0 + g * cos(x)",
            "for x in xs:\n    x_bar = g * (2.0 + cos(x))",
        ),
        # another factor is a name: it may be a numpy array of integers, whose product could wrap
        # around
        ("x_bar = x_bar * a + x_bar * 0.99", None),
        ("x_bar = x_bar * 0.5 * a + x_bar * 0.99", None),
        # a call not known to give a Python number (np.cos of a float32 array computes in float32)
        ("x_bar = x_bar * np.cos(x) + x_bar * 0.99", None),
        # two different leading factors, or one not first
        ("x_bar = g * 2.0 + x_bar * 3.0", None),
        ("x_bar = 2.0 * g + 3.0 * g", None),
        # a term that is the adjoint alone: not factored, but a term led by a minus sign is
        # subtracted
        ("x_bar = g + g * 3.0", None),
        ("x_bar = x_bar + -g * 2.0 + g * a", "x_bar = x_bar - g * 2.0 + g * a"),
        ("x_bar = x_bar - -g", "x_bar = x_bar + g"),
        # a minus sign before the adjoint: the first term's factors negated, a later term subtracted
        ("x_bar = -g * 1.5 + g * 2.5 - -g * cos(x)", "x_bar = g * (-1.5 + 2.5 + cos(x))"),
        # the value of a program's variable, not an adjoint: computed as the user wrote it
        ("y = x * 2.0 + x * 3.0", None),
        ("y = x + -x * 2.0", None),
    ],
)
def test_a_shared_adjoint_is_taken_out_where_the_other_factors_are_python_numbers(
    code: str, expected
) -> None:
    assert factored(code) == (expected or code)


def test_the_adjoint_taken_out_changes_only_the_rounding() -> None:
    """``g * (a + b)`` for ``g * a + g * b``: the same number to within a few units in the last
    place of the terms' sizes (as any order of adding them is), of the adjoint's type (a float32
    array stays float32: the other factors are Python numbers)."""
    import math

    import numpy as np

    rng = np.random.default_rng(1)
    written = "g * 0.1 * cos(x) + g * 0.99 - g * sin(x) * 2.0"
    out = factored(f"x_bar = {written}").split(" = ", 1)[1]
    assert out == "g * (0.1 * cos(x) + 0.99 - sin(x) * 2.0)"
    for g in (
        float(rng.standard_normal()),
        rng.standard_normal(5),
        rng.standard_normal(5).astype(np.float32),
    ):
        for x in rng.uniform(-3, 3, 20):
            scope = {"g": g, "x": float(x), "cos": math.cos, "sin": math.sin}
            before, after = eval(written, scope), eval(out, scope)  # noqa: S307
            assert np.asarray(after).dtype == np.asarray(before).dtype
            size = np.abs(g) * (abs(0.1 * math.cos(x)) + 0.99 + abs(math.sin(x) * 2.0))
            assert np.all(
                np.abs(after - before) <= 4 * np.finfo(np.asarray(before).dtype).eps * size
            )


def test_the_users_own_sums_of_products_are_computed_as_written() -> None:
    """Only adjoints are factored: the value of ``x * 0.99 + x * 2.5 - x * 1.5`` is Python's, to the
    last bit, while its gradient's code takes ``out_bar`` out of the sum it computes."""
    import numpy as np

    import ast_ad

    def f(x):
        return x * 0.99 + x * 2.5 - x * 1.5

    vg = ast_ad.value_and_grad(f)
    differs = 0
    for x in np.random.default_rng(2).uniform(-3, 3, 200):
        x = float(x)
        value, grad = vg(x)
        assert value == f(x)
        assert abs(grad - 1.99) < 1e-15
        differs += value != x * (0.99 + 2.5 - 1.5)
    assert differs  # (the factored form would have changed some of them)
    assert "x_bar = out_bar * (-1.5 + 2.5 + 0.99)" in ast_ad.source(vg, 0.5)


def _random_sum(draw) -> str:
    """A sum of products ``g * ...`` (sometimes ``-g * ...``, or a term without ``g``), their other
    factors number literals, ``cos(x)``, ``sin(x)`` or a name ``a`` that may hold anything."""
    from hypothesis import strategies as st

    factors = st.sampled_from(["0.1", "2.0", "-3", "7", "cos(x)", "sin(x)", "a", "-0.5"])
    terms = []
    for _ in range(draw(st.integers(2, 4))):
        lead = draw(st.sampled_from(["g", "g", "-g", "a"]))
        rest = [draw(factors) for _ in range(draw(st.integers(1, 3)))]
        terms.append(" * ".join([lead, *rest]))
    ops = [draw(st.sampled_from([" + ", " - "])) for _ in terms[1:]]
    return terms[0] + "".join(op + term for op, term in zip(ops, terms[1:], strict=True))


def test_a_factored_sum_computes_the_sum_to_rounding_for_random_sums() -> None:
    """Hypothesis for breadth: for random sums of products, ``shared_factor`` either leaves the sum
    as it is or gives one equal to it within a few units in the last place of the terms' sizes, of
    the same type; a sum with a term led by ``a``, or a factor ``a``, keeps its terms (its signs may
    be tidied, which is exact)."""
    import math

    import numpy as np
    from hypothesis import given
    from hypothesis import strategies as st

    @given(st.data(), st.floats(-3, 3), st.floats(-2, 2))
    def check(data, x, g) -> None:
        written = _random_sum(data.draw)
        out = factored(f"x_bar = {written}").split(" = ", 1)[1]
        scope = {"g": g, "x": x, "a": 1.25, "cos": math.cos, "sin": math.sin}
        before, after = eval(written, scope), eval(out, scope)  # noqa: S307
        assert type(after) is type(before)
        size = eval(
            written.replace(" - ", " + ").replace("-", ""),
            {
                **scope,
                "g": abs(g),
                "x": x,  # noqa: S307
                "cos": lambda v: abs(math.cos(v)),
                "sin": lambda v: abs(math.sin(v)),
            },
        )
        assert abs(after - before) <= 8 * np.finfo(float).eps * size + 1e-300
        if out.startswith("g * ("):
            taken_out.append(written)
            # a name may hold integers: no factor is taken out past one
            assert " a" not in f" {written}"

    taken_out: list[str] = []
    check()
    assert taken_out  # (the draws reach the factored case)


def scaled(source: str, wide: frozenset[str] = frozenset({"s", "t", "n", "m"}),
           floats: frozenset[str] = frozenset({"s"})) -> str:
    """``fold.scaled_adjoints`` of ``source``, whose adjoints are the names ending ``_bar``;
    ``summed_product`` is the one linear call (in its first argument)."""
    from ast_ad.optimize.fold import scaled_adjoints

    body = gast.parse(textwrap.dedent(source)).body
    adjoints = frozenset(n.id for s in body for n in gast.walk(s)
                         if isinstance(n, gast.Name) and n.id.endswith("_bar"))

    def linear(call: gast.Call) -> frozenset[int]:
        named = isinstance(call.func, gast.Name) and call.func.id == "summed_product"
        return frozenset({0}) if named else frozenset()

    out = scaled_adjoints(body, adjoints, wide, floats, linear)
    return "".join(printer.to_source(syntax.to_ast(s)) for s in out).strip()


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # read as a product with a number, and by a call linear in it: the numbers meet first
        ("a_bar = v_bar * s\nk_bar = k_bar + summed_product(a_bar, x)\nx_bar = x_bar + a_bar * t\n",
         "k_bar = k_bar + s * summed_product(v_bar, x)\nx_bar = x_bar + v_bar * (s * t)"),
        # the number first, a constant as the other factor
        ("a_bar = s * v_bar\nx_bar = a_bar * 2\n", "x_bar = v_bar * (s * 2)"),
        # bound again after its reads: the reads after it are of another value
        ("a_bar = v_bar * s\nx_bar = a_bar * t\na_bar = w_bar * 2.0\ny_bar = a_bar + 1.0\n",
         "x_bar = v_bar * (s * t)\na_bar = w_bar * 2.0\ny_bar = a_bar + 1.0"),
    ],
)
def test_an_adjoint_that_is_another_times_a_number_is_moved_into_its_readers(
    source: str, expected: str
) -> None:
    assert scaled(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        # two integers, neither known a float: their product may wrap around (numpy's int64)
        "a_bar = v_bar * n\nx_bar = a_bar * m\n",
        # a number not known to be 64 bits wide (a float32 argument's, say)
        "a_bar = v_bar * s\nx_bar = a_bar * q\n",
        # read whole, not multiplied by a number
        "a_bar = v_bar * s\nx_bar = a_bar * t\ny_bar = a_bar + w_bar\n",
        # the array it scales is bound again before a read
        "a_bar = v_bar * s\nx_bar = a_bar * t\nv_bar = v_bar * 2.0\ny_bar = a_bar * t\n",
        # read after the block (nothing binds it again here)
        "a_bar = v_bar * s\nx_bar = a_bar * t\nfor i in r:\n    y_bar = a_bar * t\n",
        # read inside a branch
        "a_bar = v_bar * s\nif c:\n    x_bar = a_bar * t\n",
        # a loop's step reads the value the step before bound
        "for i in r:\n    x_bar = a_bar * t\n    a_bar = v_bar * s\n",
        # a call not linear in it
        "a_bar = v_bar * s\nx_bar = np_sin(a_bar)\n",
    ],
)
def test_an_adjoint_stays_where_moving_it_could_change_more_than_the_rounding(source: str) -> None:
    assert scaled(source) == scaled(source, frozenset(), frozenset())  # (as written)
    assert scaled(source) == "".join(
        printer.to_source(syntax.to_ast(s)) for s in gast.parse(textwrap.dedent(source)).body
    ).strip()


def test_a_narrow_number_keeps_the_adjoint_it_scales() -> None:
    """A float32 step size: ``0.5 * dt`` is a float32, whose product with ``-k`` would round to
    float32, so the leapfrog's adjoint ``a_bar`` stays; with a Python float it goes. Both give the
    same gradient to rounding, and each the function's own value."""
    import numpy as np

    import ast_ad

    def leapfrog(x, v, k, dt):
        for _ in range(5):
            a = -k * x
            v = v + 0.5 * dt * a
            x = x + dt * v
        return np.sum(x * x) + np.sum(v * v)

    x, v = np.linspace(0.1, 1.0, 4), np.linspace(-1.0, 0.5, 4)
    wide = ast_ad.grad(leapfrog, (0, 1, 2))
    narrow = ast_ad.grad(leapfrog, (0, 1, 2))
    got = wide(x, v, 0.7, 0.05)
    assert "a_bar" not in ast_ad.source(wide) and "v_bar * (t1 * neg_k)" in ast_ad.source(wide)
    low = narrow(x, v, 0.7, np.float32(0.05))
    assert "a_bar = " in ast_ad.source(narrow, x, v, 0.7, np.float32(0.05))
    for a, b in zip(got, low, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert ast_ad.value_and_grad(leapfrog)(x, v, 0.7, np.float32(0.05))[0] == \
        leapfrog(x, v, 0.7, np.float32(0.05))
