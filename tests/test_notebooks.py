"""Where people work: a notebook's cell that imports numpy and defines a function is differentiated,
in a real kernel (ipykernel, run by nbclient), as IPython compiles it: one top-level statement at a
time."""

from __future__ import annotations

import json

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

WORKED = '''import numpy as np
import ast_ad

def f(x1, x2):
    return np.log(x1) + x1 * x2 - np.sin(x2)

print(ast_ad.grad(f, argnums=(0, 1))(2.0, 3.0))'''

REDEFINED = '''def f(x1, x2):
    return x1 * x2 * x2

print(ast_ad.grad(f, argnums=1)(2.0, 3.0))'''

IN_PLACE = '''def g(x):
    y = x * 1.0
    w = y[1:]
    for i in range(2):
        y[i] += 1.0
    return np.sum(w * w)

print(ast_ad.grad(g)(np.array([1.0, 2.0, 3.0])).tolist())'''


def _run(cells: list[str]) -> list[str]:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3")
    client.execute()
    texts = []
    for cell in notebook.cells:
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert not errors, json.dumps([e.get("evalue") for e in errors])
        texts.append("".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream"))
    return texts


def test_the_worked_example_in_a_notebook() -> None:
    """The first cell of almost every notebook: once refused as 'edited after it was imported'. A
    function defined again in a later cell is differentiated as it is now, and the memory model
    works there too."""
    worked, redefined, in_place = _run([WORKED, REDEFINED, IN_PLACE])
    assert worked.strip() == "(3.5, 2.989992496600445)"
    assert redefined.strip() == "12.0"
    assert in_place.strip() == "[0.0, 6.0, 6.0]"
