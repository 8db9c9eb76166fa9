"""The documentation shows what ast_ad does: the tutorial's picture is what ast_ad draws today, and
the guides' examples compute what they say (every snippet's printed output: ``test_snippets``)."""

import os
import pathlib
import re
import runpy
import sys

import numpy as np
import pytest

import ast_ad
from ast_ad.show import page

DOCS = pathlib.Path(__file__).parent.parent / "docs"
WORKED = "import numpy as np\n\n\ndef f(x1, x2):\n    return np.log(x1) + x1 * x2 - np.sin(x2)\n"


@pytest.fixture(scope="module")
def worked(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tutorial")
    (folder / "model.py").write_text(WORKED)
    sys.path.insert(0, str(folder))
    try:
        import model
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("model", None)
    return model.f


def _blocks(path: pathlib.Path, language: str = "") -> list[str]:
    """The fenced blocks of a page in this language ("": those without one)."""
    blocks: list[str] = []
    inside, keep, lines = False, False, []
    for line in path.read_text().splitlines(keepends=True):
        if line.startswith("```"):
            if inside and keep:
                blocks.append("".join(lines))
            inside, keep, lines = not inside, line.strip() == "```" + language, []
        elif inside:
            lines.append(line)
    return blocks


def test_the_tutorial_graph_is_current(worked) -> None:
    picture = page.svg(ast_ad.explain(worked, 2.0, 3.0, argnums=(0, 1))) + "\n"
    path = DOCS / "worked-graph.svg"
    if os.environ.get("AST_AD_UPDATE_GOLDEN"):
        path.write_text(picture)
    assert path.read_text() == picture, (
        "docs/worked-graph.svg is out of date: run with AST_AD_UPDATE_GOLDEN=1"
    )


def test_the_custom_rules_guide_runs(tmp_path) -> None:
    """Its python blocks, one after another in one file, as a reader would write them."""
    script = tmp_path / "custom_rules.py"
    script.write_text("\n".join(_blocks(DOCS / "guides" / "custom-rules.md", "python")))
    namespace = runpy.run_path(str(script))
    assert namespace["H"].shape == (3, 3)


def test_the_complex_numbers_guide_runs(tmp_path) -> None:
    """Its python blocks, one after another, as a reader would run them (the asserts inside check
    the convention's worked examples)."""
    script = tmp_path / "complex_numbers.py"
    script.write_text("\n".join(_blocks(DOCS / "guides" / "complex.md", "python")))
    namespace = runpy.run_path(str(script))
    assert namespace["H"].shape == (5, 5) and namespace["u_bar"].shape == (8, 8)


def test_the_arrays_guide_runs(tmp_path) -> None:
    """Its python blocks (dask and Numba), one after another, as a reader would run them."""
    pytest.importorskip("dask.array")
    pytest.importorskip("numba")
    script = tmp_path / "arrays.py"
    script.write_text("\n".join(_blocks(DOCS / "guides" / "arrays.md", "python")))
    namespace = runpy.run_path(str(script))
    assert namespace["w_bar"].shape == (20,) and namespace["dloop"](0.5) == ast_ad.grad(
        namespace["loop"]
    )(0.5)


def test_the_checkpointing_guide_runs(tmp_path) -> None:
    """Its example, as a reader would run it: 10,000 steps; the gradient is the un-checkpointed
    one's."""
    script = tmp_path / "checkpointing.py"
    script.write_text("\n".join(_blocks(DOCS / "guides" / "checkpointing.md", "python")))
    namespace = runpy.run_path(str(script))
    u0 = np.linspace(0.0, 1.0, 1000)
    assert np.array_equal(
        namespace["g"](u0, 10_000), ast_ad.grad(namespace["simulate"])(u0, 10_000)
    )


def test_every_page_is_in_the_navigation() -> None:
    nav = (DOCS.parent / "mkdocs.yml").read_text()
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages == set(re.findall(r":\s*([\w/-]+\.md)$", nav, re.M))


def test_the_readme_links_resolve() -> None:
    readme = (DOCS.parent / "README.md").read_text()
    for link in re.findall(r"\]\(([^)#]+)\)", readme):
        assert (DOCS.parent / link).exists(), link
