"""``explain --html``: the whole worked example on one self-contained page.

The page has the computational graph (inline SVG, laid out here: no Graphviz, no script, nothing
fetched), the forward and reverse evaluation traces, where paths meet, and the generated gradient.
It opens in any browser, offline.
"""

from __future__ import annotations

import html
from typing import Any

from ast_ad.show.explain import (
    ARRAYS,
    FORWARD_COLUMNS,
    MEET_COLUMNS,
    REVERSE_COLUMNS,
    Explanation,
    explain,
    html_table,
    summary,
)

NODE_W, NODE_H, GAP_X, GAP_Y, MARGIN = 200, 66, 70, 30, 20
# columns a band of a deep graph holds (1,060 px: a page's width), and the gap between
PER_BAND, BAND_GAP = 4, 50

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.6em; text-align: left; }
td { font-family: ui-monospace, monospace; } th { background: #eef; }
pre { background: #f6f6f6; padding: 1em; overflow-x: auto; font-size: 0.9em; }
.meet { background: #fff4d6; } svg text { font-family: ui-monospace, monospace; }
"""


def page(fn: Any, *args: Any, argnums: int | tuple[int, ...] = 0) -> str:
    """The HTML page of ``fn`` at ``args``: graph, traces, meeting points and generated code."""
    import ast_ad

    ex = explain(fn, *args, argnums=argnums)
    name = getattr(fn, "__qualname__", "f")
    shown = ", ".join(repr(a) for a in args)
    code = ast_ad.source(ast_ad.grad(fn, argnums=argnums), *args)
    gradient = ", ".join(f"∂y/∂{p} = {summary(g)}" for p, g in ex.gradient.items())
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>ast_ad: {html.escape(name)}({html.escape(shown)})</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(name)}({html.escape(shown)})</h1>",
        f'<p id="result">y = {summary(ex.value)}; {html.escape(gradient)}</p>',
        "<h2>The computational graph</h2>",
        "<p>Inputs on the left; each box is one primitive, with its value and its adjoint; each "
        "edge carries its local derivative.</p>",
        svg(ex),
        "<h2>Forward evaluation trace</h2>",
        html_table(FORWARD_COLUMNS, ex.forward_rows(), "forward"),
        "<h2>Reverse evaluation trace (from the output to the inputs)</h2>",
        html_table(REVERSE_COLUMNS, ex.reverse_rows(), "reverse"),
        "<h2>Where paths meet, contributions add up</h2>",
        html_table(MEET_COLUMNS, ex.accumulation_rows(), "meet"),
        meeting_text(ex),
        *([f"<p>{html.escape(ARRAYS)}</p>"] if ex.has_arrays() else []),
        "<h2>The generated gradient</h2>",
        f'<pre><code id="code">{html.escape(code)}</code></pre>',
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def meeting_text(ex: Explanation) -> str:
    """A sentence for each input that several paths reach."""
    sentences = []
    for name, parts in ex.contributions.items():
        if len(parts) > 1:
            terms = " and ".join(f"{summary(c)} (through {src})" for src, c in parts)
            sentences.append(f"{name} reaches y by {len(parts)} paths: {terms} add up to "
                             f"{summary(ex.gradient[name])}.")
    return "".join(f'<p class="meet">{html.escape(s)}</p>' for s in sentences)


def svg(ex: Explanation) -> str:
    """The graph, layered by dependency depth: inputs in the first column, each step right of its
    inputs."""
    depth = {s.label: 0 for s in ex.inputs}
    into: dict[str, list[Any]] = {}
    for edge in ex.edges:
        into.setdefault(edge.step, []).append(edge)
    for step in ex.steps:  # in textbook order: every input of a step comes before it
        depth[step.label] = 1 + max(
            (depth.get(e.input, 0) for e in into.get(step.label, [])), default=0
        )
    columns: dict[int, list[str]] = {}
    for label, d in depth.items():
        columns.setdefault(d, []).append(label)
    # a deep graph (a loop's runs, one after another) wraps into bands of PER_BAND columns, one
    # under another, so that it is drawn at its size, not shrunk to the page's width
    bands = [
        range(start, min(start + PER_BAND, max(columns) + 1))
        for start in range(0, max(columns) + 1, PER_BAND)
    ]
    band_height = [
        max(len(columns.get(d, ())) for d in band) * (NODE_H + GAP_Y) - GAP_Y for band in bands
    ]
    band_top = [MARGIN + sum(band_height[:k]) + k * BAND_GAP for k in range(len(bands))]
    place = {
        label: (
            MARGIN + (d % PER_BAND) * (NODE_W + GAP_X),
            band_top[d // PER_BAND] + row * (NODE_H + GAP_Y),
        )
        for d, labels in columns.items()
        for row, label in enumerate(labels)
    }
    width = MARGIN * 2 + min(max(columns) + 1, PER_BAND) * (NODE_W + GAP_X) - GAP_X
    height = band_top[-1] + band_height[-1] + MARGIN
    # scaled to the page's width where wider (no sideways scrolling), never larger than drawn
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" style="max-width: 100%; height: auto" role="img" '
        'aria-label="computational graph">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" '
        'fill="#555"/></marker></defs>',
    ]
    crossing: dict[int, int] = {}
    entering: dict[str, int] = {}
    for edge in ex.edges:
        if edge.input not in place or edge.step not in place:
            continue
        (x1, y1), (x2, y2) = place[edge.input], place[edge.step]
        left, top, right, bottom = x1 + NODE_W, y1 + NODE_H / 2, x2, y2 + NODE_H / 2
        label = edge.operation if edge.local is None else _short(edge.local)
        if depth[edge.input] // PER_BAND == depth[edge.step] // PER_BAND:
            points: list[tuple[float, float]] = [(left, top), (right, bottom)]
            # the label two thirds of the way to the step: the edges into one step start apart, so
            # their labels do not overlap where several edges leave one box for boxes one above the
            # other
            at_x, at_y = left + (right - left) * 2 / 3, top + (bottom - top) * 2 / 3
        # into a later band: out to the right, down to the gap above the step's band, left, and in
        else:
            band = depth[edge.step] // PER_BAND
            # each crossing on its own level of the gap
            k = crossing[band] = crossing.get(band, 0) + 1
            gap_y = band_top[band] - BAND_GAP + 8 * k
            # and its label on its own line
            k_in = entering[edge.step] = entering.get(edge.step, 0) + 1
            points = [
                (left, top),
                (left + GAP_X / 2, top),
                (left + GAP_X / 2, gap_y),
                (right - GAP_X / 2, gap_y),
                (right - GAP_X / 2, bottom),
                (right, bottom),
            ]
            at_x, at_y = right - GAP_X / 2 - 3, bottom - 4 - 13 * (k_in - 1)  # left of the way in
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        out.append(
            f'<polyline points="{path}" fill="none" stroke="#555" marker-end="url(#arrow)"/>'
        )
        anchor = "middle" if len(points) == 2 else "end"
        out.append(
            f'<text x="{at_x:.1f}" y="{at_y - 4:.1f}" font-size="11" text-anchor="{anchor}" '
            'fill="#a33" stroke="#fff" stroke-width="3" '
            f'paint-order="stroke">{html.escape(label)}</text>'
        )
    steps = {s.label: s for s in [*ex.inputs, *ex.steps]}
    for label, (x, y) in place.items():
        step = steps[label]
        is_input, is_output = step in ex.inputs, label == ex.output
        fill = "#e8f0ff" if is_input else "#fff4d6" if is_output else "#ffffff"
        rx = NODE_H / 2 if is_input else 4
        out.append(
            f'<rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="{rx}" fill="{fill}" '
            f'stroke="#333" stroke-width="{2.5 if is_output else 1}"/>'
        )
        lines = [
            label if is_input else f"{label} = {step.expression}",
            f"value {_short(step.value)}",
        ]
        if step.adjoint is not None:
            lines.append(f"adjoint {_short(step.adjoint)}")
        elif is_input and label in ex.gradient:
            lines.append(f"adjoint {_short(ex.gradient[label])}")
        for k, text in enumerate(lines):
            out.append(
                f'<text x="{x + NODE_W / 2}" y="{y + 19 + 18 * k}" font-size="12" '
                'text-anchor="middle">'
                f"{html.escape(_clip(text))}</text>"
            )
    out.append("</svg>")
    return "\n".join(out)


def _short(value: Any) -> str:
    import numpy as np
    return f"{float(value):.6g}" if np.ndim(value) == 0 else summary(value).split(" [")[0]


def _clip(text: str, width: int = 26) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"
