"""``graph``: the computational graph of your function as Graphviz DOT, and as a picture where
Graphviz is installed.

Inputs are ellipses, operations boxes, the output a double octagon. Given
arguments, nodes carry their values and adjoints and edges their local
derivatives (the worked example's subtract has -1 on its second edge); without
them, the graph shows the structure of the normalized function alone.
"""

from __future__ import annotations

import numbers
import shutil
import subprocess
import warnings
from collections.abc import Iterator
from typing import Any

from ast_ad import transform
from ast_ad.analysis.activity import activity
from ast_ad.core.records import record
from ast_ad.errors import ASTADError
from ast_ad.ir import nodes as ir
from ast_ad.show.explain import _constant_text, _expression, _operands, explain, summary


@record
class Graph:
    """A DOT graph. ``str(graph)`` is the DOT text; ``render(path)`` writes SVG or PNG with
    Graphviz."""

    dot: str

    def __str__(self) -> str:
        return self.dot

    def render(self, path: str) -> str:
        """Write the picture to ``path`` (its suffix, ``.svg`` or ``.png``, picks the format)."""
        fmt = path.rsplit(".", 1)[-1].lower()
        if fmt not in ("svg", "png", "pdf"):
            raise ASTADError(f"graph pictures are .svg, .png or .pdf, not {path!r}")
        # (made first: no empty file where Graphviz is missing or fails)
        picture = self.picture(fmt)
        with open(path, "wb") as out:
            out.write(picture)
        return path

    def picture(self, fmt: str = "svg") -> bytes:
        dot = shutil.which("dot")
        if dot is None:
            raise ASTADError(
                "rendering needs Graphviz's `dot` program (apt-get install graphviz, brew install "
                "graphviz, or conda install graphviz); the DOT text itself is str(graph)"
            )
        done = subprocess.run(
            [dot, f"-T{fmt}"], input=self.dot.encode(), capture_output=True, check=False
        )
        if done.returncode != 0:
            raise ASTADError(f"Graphviz failed: {done.stderr.decode().strip()}")
        return done.stdout

    def _repr_svg_(self) -> str | None:
        """The picture, in Jupyter; without Graphviz, the DOT text shows instead, and the first time
        a warning says how to install it."""
        if shutil.which("dot"):
            return self.picture("svg").decode()
        if not _told[0]:
            _told[0] = True
            warnings.warn(
                "ast_ad.graph shows its DOT text: drawing the picture needs Graphviz's `dot` "
                "program (apt-get install graphviz, brew install graphviz, or conda install "
                "graphviz)",
                stacklevel=2,
            )
        return None


_told = [False]  # whether the notebook was told once that Graphviz is missing


def graph(fn: Any, *args: Any, argnums: int | tuple[int, ...] = 0) -> Graph:
    """The computational graph of ``fn``: with values, derivatives and adjoints when ``args`` are
    given."""
    if args:
        return _traced_graph(fn, args, argnums)
    return _static_graph(fn, argnums)


def _traced_graph(fn: Any, args: tuple[Any, ...], argnums: Any) -> Graph:
    ex = explain(fn, *args, argnums=argnums)
    lines = _header(getattr(fn, "__name__", "f"))
    for step in ex.inputs:
        lines.append(_node(step.label, "ellipse", [step.label, _number(step.value)]))
    for step in ex.steps:
        runs = f"  (x{step.count})" if step.count > 1 else ""
        text = [f"{step.label} = {step.expression}{runs}", _number(step.value)]
        if step.adjoint is not None:
            text.append(f"adjoint {_number(step.adjoint)}")
        lines.append(_node(step.label, "doubleoctagon" if step.label == "y" else "box", text))
    for edge in ex.edges:
        label = _number(edge.local) if edge.local is not None else edge.operation
        lines.append(f'  "{edge.input}" -> "{edge.step}" [label="{_escape(label)}"];')
    return Graph("\n".join(lines + ["}"]) + "\n")


def _static_graph(fn: Any, argnums: Any) -> Graph:
    """The structure of the normalized function: one node per primitive, numbered as ``explain``
    numbers them."""
    function = transform.normalized(fn)
    nums = (argnums,) if isinstance(argnums, numbers.Integral) else tuple(argnums)
    active = activity(function, tuple(range(len(function.params))))
    result = function.result.name if isinstance(function.result, ir.Var) else None
    producer: dict[str, int] = {}  # name -> index of the step that last assigned it
    # (statement, operands, level, in a loop)
    steps: list[tuple[ir.Assign, list[int | str], int, bool]] = []
    for stmt, looped in _statements(function.body, False):
        if not isinstance(stmt, ir.Assign) or stmt.target not in active:
            continue
        if isinstance(stmt.value, ir.Var) and (
            stmt.value.name in producer or stmt.value.name in function.params
        ):
            if stmt.value.name in producer:
                producer[stmt.target] = producer[stmt.value.name]
            continue
        if not isinstance(stmt.value, ir.Call):
            continue
        operands: list[int | str] = []
        for atom in _operands(stmt.value):
            if isinstance(atom, ir.Var) and atom.name in producer:
                operands.append(producer[atom.name])
            elif isinstance(atom, ir.Var) and atom.name in function.params:
                operands.append(atom.name)
            else:
                operands.append(_constant_text(atom))
        level = 1 + max((steps[o][2] for o in operands if isinstance(o, int)), default=0)
        producer[stmt.target] = len(steps)
        steps.append((stmt, operands, level, looped))
    final = producer.get(result) if result else None
    order = sorted(range(len(steps)), key=lambda i: (steps[i][2], i))
    numbered = [i for i in order if i != final]
    labels = {i: f"v{n + 1}" for n, i in enumerate(numbered)} | (
        {final: "y"} if final is not None else {}
    )
    lines = _header(function.name)
    for k, p in enumerate(function.params):
        lines.append(_node(p, "ellipse", [p + ("" if k in nums else " (not differentiated)")]))
    edges: list[str] = []
    for i in order:
        stmt, operands, _, looped = steps[i]
        shown = [labels[o] if isinstance(o, int) else o for o in operands]
        where = f"line {stmt.line.lineno}" + (", in a loop" if looped else "")
        text = f"{labels[i]} = {_expression(stmt, shown, ', '.join(shown))}"
        lines.append(_node(labels[i], "doubleoctagon" if i == final else "box", [text, where]))
        for o in operands:
            source = labels[o] if isinstance(o, int) else o if o in function.params else None
            edge = f'  "{source}" -> "{labels[i]}";'
            if source is not None and edge not in edges:
                edges.append(edge)
    return Graph("\n".join(lines + edges + ["}"]) + "\n")


def _statements(body: tuple[ir.Stmt, ...], looped: bool) -> Iterator[tuple[ir.Stmt, bool]]:
    for stmt in body:
        yield stmt, looped
        for block in ir.blocks(stmt):
            yield from _statements(block, looped or isinstance(stmt, (ir.For, ir.While)))


def _number(value: Any) -> str:
    """Six significant digits for a number, a short summary for an array."""
    import numpy as np
    return f"{float(value):.6g}" if np.ndim(value) == 0 else summary(value)


def _header(name: str) -> list[str]:
    return [
        f'digraph "{_escape(name)}" {{',
        "  rankdir=LR;",
        '  node [fontname="Helvetica", fontsize=11];',
        '  edge [fontname="Helvetica", fontsize=10];',
    ]


def _node(name: str, shape: str, text: list[str]) -> str:
    label = "\\n".join(_escape(t) for t in text if t)
    return f'  "{_escape(name)}" [shape={shape}, label="{label}"];'


def _escape(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace('"', '\\"')
