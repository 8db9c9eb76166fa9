"""Stage 1, parse: Python's ``ast`` made gast by ast_ad's own converter, node for node what gast
makes."""

from __future__ import annotations

import ast
import pathlib

import gast
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ast_ad.frontend.parse import to_gast

ROOT = pathlib.Path(__file__).resolve().parent.parent
FILES = sorted([*ROOT.glob("ast_ad/**/*.py"), *ROOT.glob("tests/*.py"), *ROOT.glob("examples/*.py"),
                pathlib.Path(ast.__file__)])
# what gast converts in its own way on some Python: type parameters, ``type`` statements, named
# handlers
SPECIAL = ["def f[T: int](x: T, *args, y=1, **kw) -> T:\n    return x\n", "type Alias = int\n",
           "class C[T](B, metaclass=M):\n    x: T\n", "try:\n    pass\nexcept E as e:\n    raise\n",
           "async def g():\n    async with a as b:\n        await b\n", "lambda x, /, y=2, *, z: x"]


_ABSENT = object()


def same(tree: ast.AST) -> bool:
    """Whether ``to_gast`` makes of ``tree`` what gast makes: node for node, every field and
    every position attribute equal (what ``gast.dump(..., include_attributes=True)`` prints,
    compared without printing it, which took three quarters of this test's time)."""
    pending = [(to_gast(tree), gast.ast_to_gast(tree))]
    while pending:
        ours, theirs = pending.pop()
        if isinstance(ours, list) or isinstance(theirs, list):
            if type(ours) is not type(theirs) or len(ours) != len(theirs):
                return False
            pending.extend(zip(ours, theirs, strict=True))
        elif isinstance(ours, gast.AST) or isinstance(theirs, gast.AST):
            if type(ours) is not type(theirs):
                return False
            for field in (*ours._fields, *ours._attributes):
                pending.append((getattr(ours, field, _ABSENT), getattr(theirs, field, _ABSENT)))
        elif type(ours) is not type(theirs) or ours != theirs:
            return False
    return True


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(p.parent.parent)))
def test_the_converter_makes_what_gast_makes_of_real_files(path) -> None:
    assert same(ast.parse(path.read_text()))


@pytest.mark.parametrize("text", SPECIAL)
def test_the_converter_makes_what_gast_makes_where_gast_converts_its_own_way(text) -> None:
    try:
        tree = ast.parse(text)
    except SyntaxError:  # type parameters before Python 3.12
        pytest.skip("not Python on this version")
    assert same(tree)


@pytest.mark.long  # (slow to draw: 2 s each; .ci/run runs it as a step of its own)
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_the_converter_makes_what_gast_makes_of_random_programs(data: st.DataObject) -> None:
    import hypothesmith

    text = data.draw(hypothesmith.from_grammar(start="file_input"))
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        assume(False)
    assert same(tree)


def test_a_converted_node_is_new() -> None:
    tree = ast.parse("y = a + b[1]")
    made = to_gast(tree)
    assert isinstance(made.body[0], gast.Assign) and not isinstance(made.body[0], ast.Assign)
    assert all(isinstance(node, gast.AST) for node in gast.walk(made))
