"""The layers of docs/architecture.md, checked by import-linter ([tool.importlinter] in
pyproject.toml): each layer imports only the layers below it, function-level imports included, and
no module or package is in an import cycle. A copy of the package with one upward import added
inside a function fails the check."""

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _lint(where: pathlib.Path) -> subprocess.CompletedProcess[str]:
    script = "import sys; from importlinter.cli import lint_imports_command; lint_imports_command()"
    return subprocess.run([sys.executable, "-c", script, "--config", str(where / "pyproject.toml")],
                          cwd=where, capture_output=True, text=True, env={"PYTHONPATH": str(where)})


def test_the_layers_hold():
    pytest.importorskip("importlinter")
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 2 kept, 0 broken." in result.stdout


def test_an_upward_import_inside_a_function_breaks_them(tmp_path):
    pytest.importorskip("importlinter")
    shutil.copytree(
        ROOT / "ast_ad", tmp_path / "ast_ad", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    logs = tmp_path / "ast_ad" / "core" / "logs.py"
    logs.write_text(logs.read_text() + "\n\ndef _upward():\n    from ast_ad.api import gradient\n\n"
                    "    return gradient\n")
    result = _lint(tmp_path)
    assert result.returncode != 0
    assert "ast_ad.core is not allowed to import ast_ad.api" in result.stdout
    assert "ast_ad.core.logs -> ast_ad.api.gradient" in result.stdout
