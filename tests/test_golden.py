"""Golden files: the normalized form and the generated gradient of a few functions, byte for byte.

Regenerate after an intended change with ``AST_AD_UPDATE_GOLDEN=1 pytest tests/test_golden.py``
and review the diff.
"""

from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest

import ast_ad
from tests import corpus, corpus_control

GOLDEN = pathlib.Path(__file__).parent / "golden"
SCALARS, ARRAYS = (2.0, 3.0), (np.ones(3), np.ones(3))
CASES = [  # (function, argnums, example arguments)
    (corpus.worked, (0, 1), SCALARS),
    (corpus.worked_arrays, (0, 1), ARRAYS),
    (corpus.user_calls, (0, 1), (np.ones(3), 2.0)),
    (corpus.layer, 0, (np.ones(4),)),
    (corpus.tuples, 0, (np.ones(3),)),
    (corpus.scalar_math, (0, 1), SCALARS),
    (corpus_control.scalar_loop, 0, (0.5,)),
    (corpus_control.branch, 0, (0.5,)),
    (corpus_control.early_returns, 0, (0.5,)),
    (corpus_control.break_continue, 0, (0.5,)),
    (corpus_control.rnn, (0, 1), (np.ones(2), np.ones(3))),
    (corpus_control.list_building, 0, (0.5,)),
    (corpus_control.shared_weights, (0, 1, 2), (np.eye(3), np.eye(3), np.ones(3))),
]


def compare(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("AST_AD_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; run with AST_AD_UPDATE_GOLDEN=1 to write it"
    assert text == path.read_text()


@pytest.mark.parametrize("fn, argnums, args", CASES, ids=[c[0].__name__ for c in CASES])
def test_generated_source(fn, argnums, args) -> None:
    compare(f"{fn.__name__}.adjoint.txt", ast_ad.source(ast_ad.grad(fn, argnums), *args))


@pytest.mark.parametrize("fn, argnums, args", CASES, ids=[c[0].__name__ for c in CASES])
def test_normalized_source(fn, argnums, args) -> None:
    compare(f"{fn.__name__}.normalized.txt", ast_ad.source(fn, stage="normalized"))


FORWARD = [
    (corpus.worked, SCALARS),
    (corpus_control.scalar_loop, (0.5,)),
    (corpus_control.branch, (0.5,)),
    (corpus_control.rnn, (np.ones(2), np.ones(3))),
]


@pytest.mark.parametrize("fn, args", FORWARD, ids=[c[0].__name__ for c in FORWARD])
def test_forward_mode_source(fn, args) -> None:
    compare(f"{fn.__name__}.jvp.txt", ast_ad.source(fn, *args, stage="jvp"))


def test_second_derivative_source() -> None:
    """grad(grad(f)): forward mode over the generated gradient, for the worked example."""
    compare("worked.second.txt", ast_ad.source(ast_ad.grad(ast_ad.grad(corpus.worked)), *SCALARS))


CHECKPOINTED = [(corpus_control.rnn, (0, 1), (np.ones(2), np.ones(3)), 2),
                (corpus_control.enumerate_zip_reversed, (0, 1), (np.ones(3), np.ones(4)), 1)]


@pytest.mark.parametrize(
    "fn, argnums, args, snapshots", CHECKPOINTED, ids=[c[0].__name__ for c in CHECKPOINTED]
)
def test_checkpointed_source(fn, argnums, args, snapshots) -> None:
    """A checkpointed loop's schedule (``grad(f, checkpoints=c)``): the RNN's, whose steps tape
    shapes, and two loops' of one snapshot each, one of them of two names."""
    compare(
        f"{fn.__name__}.checkpointed.txt",
        ast_ad.source(ast_ad.grad(fn, argnums, checkpoints=snapshots), *args),
    )


# ---- the fallback printer (Python 3.14 has no astor): the same program, comments included --------
@pytest.fixture
def unparse_printer(monkeypatch):
    from ast_ad import transform
    monkeypatch.setenv("AST_AD_PRINTER", "unparse")
    transform.forget()
    yield
    transform.forget()


def _comments(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith("#")]


def _program(text: str) -> str:
    """The program ``text`` parses to; ``del (a, b)`` (astor's way to wrap a long line) is ``del a,
    b``."""
    import ast
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Delete)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Tuple)
        ):
            node.targets = [ast.Name(id=elt.id, ctx=ast.Del()) for elt in node.targets[0].elts]
    return ast.dump(tree)


@pytest.mark.parametrize("fn, argnums, args", CASES, ids=[c[0].__name__ for c in CASES])
def test_the_fallback_printer_prints_the_same_program(fn, argnums, args, unparse_printer) -> None:
    import ast
    text = ast_ad.source(ast_ad.grad(fn, argnums), *args)
    golden = (GOLDEN / f"{fn.__name__}.adjoint.txt").read_text()
    assert _program(text) == _program(golden)
    assert _comments(text) == _comments(golden)
    assert ast_ad.source(fn, stage="normalized") == ast.unparse(
        ast.parse((GOLDEN / f"{fn.__name__}.normalized.txt").read_text())) + "\n"


def test_gradients_printed_by_the_fallback_are_the_same(monkeypatch) -> None:
    from ast_ad import transform
    from ast_ad.backend import printer
    results = {}
    for name in ("astor", "unparse"):
        monkeypatch.setenv("AST_AD_PRINTER", name)
        transform.forget()
        assert printer.chosen() == name
        results[name] = [ast_ad.value_and_grad(fn, argnums)(*args) for fn, argnums, args in CASES]
    transform.forget()
    for (value, grads), (value_2, grads_2) in zip(
        results["astor"], results["unparse"], strict=True
    ):
        assert value == value_2  # the same program: the same bits
        np.testing.assert_array_equal(_flat(grads), _flat(grads_2))


def _flat(grads) -> np.ndarray:
    return np.hstack([np.ravel(g) for g in (grads if isinstance(grads, tuple) else (grads,))])


def test_without_astor_the_fallback_is_chosen(monkeypatch) -> None:
    """As on Python 3.14, where astor cannot be imported: generated code is printed by ast_ad's own
    writer, in the same layout (the golden file, byte for byte), and other trees by ast.unparse."""
    import ast
    import sys

    from ast_ad import transform
    from ast_ad.backend import printer
    monkeypatch.delenv("AST_AD_PRINTER", raising=False)
    monkeypatch.setitem(sys.modules, "astor", None)  # ``import astor`` raises ImportError
    printer._astor.cache_clear()
    transform.forget()
    try:
        assert printer._astor() is None and printer.chosen() == "own"
        # unparse's way: astor's is ``y = 1,``
        assert printer.to_source(ast.parse("y = 1,")) == "y = (1,)\n"
        compare("worked.adjoint.txt", ast_ad.source(ast_ad.grad(corpus.worked, (0, 1)), *SCALARS))
    finally:
        printer._astor.cache_clear()
        transform.forget()


@pytest.mark.parametrize(
    "fn, args",
    [
        (corpus_control.rnn, (np.ones(2), np.ones(3))),
        (corpus.worked_arrays, ARRAYS),
        (corpus_control.scalar_loop, (0.5,)),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_a_hessians_comments_name_the_users_lines_and_no_local_hides_a_builtin(fn, args) -> None:
    import builtins
    import inspect
    import linecache
    import re

    text = ast_ad.source(ast_ad.hessian(fn), *args)
    filename = inspect.getsourcefile(fn)
    comments = re.findall(r"# line (\d+): (.*)", text)
    assert comments, text
    for lineno, line in comments:
        assert linecache.getline(filename, int(lineno)).strip() == line, (lineno, line)
    assigned = set(re.findall(r"^\s*(\w+) = ", text, re.M))
    assert not assigned & set(dir(builtins)), text
