"""What ``optimize.release`` drops from generated code (assignments of constants nothing reads)
leaves code Python compiles: a block left with only its comments gets ``pass``."""

from __future__ import annotations

import ast

import gast
import numpy as np

import ast_ad
from ast_ad.ir import syntax
from ast_ad.optimize.release import without_dead_constants
from tests.test_robustness import write_module


def test_a_loop_left_with_only_a_comment_gets_pass() -> None:
    """``x_bar = 0.0`` in a loop, read by nothing: dropped, the loop keeps its comment and a
    ``pass``; a branch likewise, and an ``else`` left empty goes (the branch, its test a name, with
    it)."""
    body = gast.parse(
        "for i in r:\n    x_bar = 0.0\nif c:\n    y_bar = 0.0\n    z = 1.0\nelse:\n"
        "    y_bar = 1.0\nprint(z)\n"
    ).body
    body[0].body.insert(0, syntax.comment("line 8: x0 += 0.1 * i0"))
    body[1].body.insert(0, syntax.comment("line 9: y = 2.0"))
    body[1].orelse.insert(0, syntax.comment("line 11: y = 3.0"))
    pruned, _ = without_dead_constants(body, set())
    loop, branch = pruned[0], pruned[1]
    assert [type(s) for s in loop.body] == [gast.Expr, gast.Pass]  # the comment, then pass
    assert syntax.comment_text(loop.body[0]) == "line 8: x0 += 0.1 * i0"
    assert [type(s) for s in branch.body] == [gast.Expr, gast.Assign]  # z = 1.0 is read
    assert [type(s) for s in branch.orelse] == [gast.Expr, gast.Pass]


def test_reverse_mode_over_an_hvp_whose_loop_runs_no_step_compiles(tmp_path) -> None:
    """Found by a long run of the random programs: a loop of ``range(0)`` whose backward step was
    only dead resets printed as a ``for`` with nothing but a comment (an IndentationError)."""
    module = write_module(tmp_path, "empty_loop", (
        "import numpy as np\n\n\ndef f(x0, x1):\n    for i0 in range(0):\n"
        "        x0 += 0.1 * i0 * np.sin(0.5)\n        x1 = 0.5 * np.tanh(0.5)\n"
        "    x0, x1 = x1, np.tanh(x0)\n    return x0 * x1\n"))
    hvp = ast_ad.hvp(module.f)
    out, vjp_fn = ast_ad.vjp(hvp, 0.3, 0.7, 1.0)
    assert np.isclose(out, hvp(0.3, 0.7, 1.0), rtol=1e-12)
    bars = vjp_fn(1.0)
    moved = ast_ad.jvp(hvp, (0.3, 0.7, 1.0), (1.0, None, None))[1]
    assert np.isclose(moved, bars[0], rtol=1e-10)


def _sunk_source(source: str) -> str:
    from ast_ad.optimize.release import sunk_zero_starts

    body = sunk_zero_starts(gast.parse(source).body)
    module = gast.gast_to_ast(gast.Module(body=body, type_ignores=[]))
    return ast.unparse(ast.fix_missing_locations(module))


def test_a_zero_start_goes_where_the_next_mention_adds_arithmetic() -> None:
    """``x_bar = 0.0`` then (in the same block, with nothing between that mentions it) ``x_bar =
    x_bar + a * b``: the addition binds it. Where one branch adds and the other does not mention
    it, the other binds the zero at its end. Where the addition is of a name (an object something
    else may hold), or something reads it first, the start stays. Each rewrite computes what the
    code computed, run with both branches."""
    cases = {
        "x_bar = 0.0\nz = 1.0\nx_bar = x_bar + a * b\n": "z = 1.0\nx_bar = a * b",
        "x_bar = 0.0\nif c:\n    x_bar = x_bar - a * b\n": None,
        "x_bar = 0.0\nx_bar = x_bar + a\n": "x_bar = 0.0\nx_bar = x_bar + a",
        "x_bar = 0.0\nz = x_bar\nx_bar = x_bar + a * b\n": "x_bar = 0.0\nz = x_bar\n"
                                                             "x_bar = x_bar + a * b",
    }
    for source, expected in cases.items():
        got = _sunk_source(source)
        if expected is not None:
            assert got == expected, got
        else:
            assert "x_bar = 0.0" in got and "x_bar = -(a * b)" in got and "x_bar + " not in got
        for c in (True, False):
            before: dict = {"a": np.arange(3.0), "b": 2.0, "c": c}
            after = dict(before)
            exec(source, {}, before)
            exec(got, {}, after)
            assert np.array_equal(before["x_bar"], after["x_bar"])
