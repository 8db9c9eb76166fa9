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
