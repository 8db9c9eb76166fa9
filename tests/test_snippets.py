"""Every snippet of every page runs, and shows what ast_ad prints today.

A page's ``python`` blocks run in order, in one namespace, as a reader would type them; a line
ending in a comment that starts with a number (``ast_ad.grad(f)(2.0, 3.0)  # 3.5``) must compute
that number, to the digits shown. Every other block says what it is in an HTML comment just above
it, which the rendered page hides:

- ``<!-- file: model.py -->``: the block is that file, in the page's folder (which the page's code
  imports).
- ``<!-- prints: CODE -->``: the block is what ``CODE`` prints, run in the page's namespace (``$
  command``:
  what a shell command prints, run in the page's folder; ``{root}`` is the checkout's, ``\x20`` a
  space within an argument). A line ``...`` stands for any lines; the rest must be whole lines of
  the output, in order. The page's folder is left out of the paths printed (``'model.py:8'``).
- ``<!-- setup: CODE -->``: code a runnable block needs that the page leaves to the reader's
  imagination.
- ``<!-- not run: why -->``: a block that cannot run here (an install command, a synopsis).
"""

from __future__ import annotations

import ast
import contextlib
import io
import linecache
import os
import pathlib
import re
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MARKER = re.compile(r"<!--\s*(file|prints|setup|not run):\s*(.*?)\s*-->", re.S)


class Block:
    def __init__(self, language: str, text: str, line: int, markers: list[tuple[str, str]]):
        self.language, self.text, self.line, self.markers = language, text, line, markers

    def marked(self, kind: str) -> str | None:
        return next((value for k, value in self.markers if k == kind), None)


def blocks(path: pathlib.Path) -> list[Block]:
    """The fenced blocks of a page, each with the markers in the text between it and the block
    before."""
    out: list[Block] = []
    text = path.read_text()
    fence = re.compile(r"^```(\w*)\n(.*?)^```\s*$", re.M | re.S)
    end = 0
    for found in fence.finditer(text):
        between = text[end:found.start()]
        markers = [(m.group(1), m.group(2)) for m in MARKER.finditer(between)]
        out.append(
            Block(found.group(1), found.group(2), text.count("\n", 0, found.start()) + 1, markers)
        )
        end = found.end()
    return out


def _numbers(comment: str) -> list[float] | None:
    """The numbers a comment claims (``3.5``; ``6.55, 3.5``; ``(3.5, 2.98)``; ``... = -0.25``), or
    None."""
    claim = comment.rsplit("= ", 1)[-1].strip().strip("()")
    try:
        return [float(part) for part in claim.split(",")]
    except ValueError:
        return None


def _digits(comment: str) -> list[int]:
    claim = comment.rsplit("= ", 1)[-1].strip().strip("()")
    return [len(part.strip().partition(".")[2]) for part in claim.split(",")]


def _check(value: Any, comment: str, where: str) -> None:
    claimed = _numbers(comment)
    assert claimed is not None
    values = [float(v) for v in np.ravel(np.asarray(value, dtype=float))]
    assert len(values) == len(claimed), f"{where}: {value!r} against {comment!r}"
    for v, c, d in zip(values, claimed, _digits(comment), strict=True):
        assert abs(v - c) <= 0.5 * 10.0**-d + 1e-12, (
            f"{where}: computes {v!r}, the page says {comment!r}"
        )


def _checked_code(text: str, filename: str) -> Any:
    """``text`` compiled, with each statement whose line ends in a numeric comment followed by a
    check of it."""
    tree = ast.parse(text, filename)
    lines = text.splitlines()
    body: list[ast.stmt] = []
    for stmt in tree.body:
        body.append(stmt)
        line = lines[(stmt.end_lineno or stmt.lineno) - 1]
        comment = line.partition("  # ")[2] if "  # " in line else ""
        if not comment or _numbers(comment) is None:
            continue
        where = f"{filename}:{stmt.lineno}"
        if isinstance(stmt, ast.Expr):
            value: ast.expr = stmt.value
            body[-1] = ast.Assign(targets=[ast.Name("_snippet_value", ast.Store())], value=value)
            value = ast.Name("_snippet_value", ast.Load())
        elif isinstance(stmt, ast.Assign):
            value = ast.Tuple(
                [
                    ast.Name(t.id, ast.Load()) if isinstance(t, ast.Name) else t
                    for t in (
                        stmt.targets[0].elts
                        if isinstance(stmt.targets[0], ast.Tuple)
                        else stmt.targets
                    )
                ],
                ast.Load(),
            )
            value = _load(value)
        else:
            continue
        call = ast.Expr(ast.Call(ast.Name("_snippet_check", ast.Load()),
                                 [value, ast.Constant(comment), ast.Constant(where)], []))
        body.append(call)
    tree.body = body
    for node in ast.walk(tree):
        if not hasattr(node, "lineno") and isinstance(node, (ast.stmt, ast.expr)):
            ast.copy_location(node, tree.body[0])
    ast.fix_missing_locations(tree)
    return compile(tree, filename, "exec")


def _load(node: ast.expr) -> ast.expr:
    for n in ast.walk(node):
        if hasattr(n, "ctx"):
            n.ctx = ast.Load()
    return node


def _matches(block: str, printed: str) -> bool:
    """Whether ``block``'s lines are whole lines of ``printed``, in order, a ``...`` line standing
    for any."""
    out = [line.rstrip() for line in printed.splitlines()]
    chunks: list[list[str]] = [[]]
    for line in block.splitlines():
        if line.strip().startswith("..."):  # ``...``, or ``...  # what it stands for``
            chunks.append([])
        else:
            chunks[-1].append(line.rstrip())
    at = 0
    for chunk in chunks:
        if not chunk:
            continue
        while at + len(chunk) <= len(out) and out[at:at + len(chunk)] != chunk:
            at += 1
        if at + len(chunk) > len(out):
            return False
        at += len(chunk)
    return True


def _run_page(path: pathlib.Path, folder: pathlib.Path) -> list[str]:
    """Run a page's blocks; the problems found, each naming the page's line."""
    problems: list[str] = []
    namespace: dict[str, Any] = {"__name__": f"page_{path.stem}", "_snippet_check": _check}
    for k, block in enumerate(blocks(path)):
        where = f"{path.relative_to(ROOT)}:{block.line}"
        if block.marked("not run") is not None:
            continue
        setup = block.marked("setup")
        if setup is not None:
            exec(compile(setup, f"{where} "
                                "(setup)", "exec"), namespace)  # noqa: S102 -- the docs' own code
        file = block.marked("file")
        prints = block.marked("prints")
        if file is not None:
            (folder / file).write_text(block.text)
            linecache.checkcache(str(folder / file))
            sys.modules.pop(pathlib.Path(file).stem, None)
        elif prints is not None:
            printed = _printed(prints, namespace, folder).replace(str(folder) + os.sep, "")
            if not _matches(block.text, printed):
                problems.append(f"{where}: the block is not what `{prints}` prints:\n{printed}")
        elif block.language in ("python", "py") and re.search(
            r"^def \w+_(vjp|jvp)\(", block.text, re.M
        ):
            problems.append(f"{where}: a listing of generated code that says not what prints it "
                            "(<!-- prints: ... -->)")
        elif block.language in ("python", "py"):
            script = folder / f"snippet_{path.stem.replace('-', '_')}_{k}.py"
            script.write_text(block.text)
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    exec(_checked_code(block.text, str(script)), namespace)  # noqa: S102 -- the docs' own code
            except AssertionError as exc:
                problems.append(str(exc))
        else:
            problems.append(
                f"{where}: a ```{block.language} block that says neither what prints it "
                "(<!-- prints: ... -->) nor why it is not run (<!-- not run: ... -->)"
            )
    return problems


def _printed(code: str, namespace: dict[str, Any], folder: pathlib.Path) -> str:
    if code.startswith("$ "):
        command = [
            part.replace("\\x20", " ") for part in code[2:].replace("{root}", str(ROOT)).split()
        ]
        if command[0] == "python":
            command[0] = sys.executable
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(folder)]),
            "COLUMNS": "100",
        }
        done = subprocess.run(
            command, cwd=folder, capture_output=True, text=True, timeout=300, env=env
        )
        return done.stdout + done.stderr
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<prints>", "exec"), namespace)  # noqa: S102 -- the docs' own code
    return out.getvalue()


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_snippet_runs_and_shows_what_ast_ad_prints(path: pathlib.Path, tmp_path: pathlib.Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("dask.array")
    pytest.importorskip("numba")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        problems = _run_page(path, tmp_path)
    finally:
        for name in [
            n
            for n, m in sys.modules.items()
            if str(tmp_path) in str(getattr(m, "__file__", "") or "")
        ]:
            del sys.modules[name]
    assert not problems, "\n\n".join(problems)


def test_the_harness_finds_a_wrong_number_and_a_stale_listing(tmp_path: pathlib.Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\nimport ast_ad\n\ndef f(x):\n    return x * "
                    "x\n\nast_ad.grad(f)(3.0)  # 6.5\n```\n\n<!-- prints: "
                    "print(ast_ad.source(ast_ad.grad(f), 3.0)) -->\n```python\ndef f_vjp(x, "
                    "out_bar=1.0):\n...\n    return out, x_bar + 1\n```\n\n```\nsome output\n```\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        problems = _run_page(page, tmp_path)
    finally:
        ROOT = saved
    assert len(problems) == 3, problems
    assert "computes 6.0, the page says '6.5'" in problems[0]
    assert "is not what" in problems[1] and "neither what prints it" in problems[2]
