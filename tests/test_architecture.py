"""The layers of docs/architecture.md, checked by import-linter ([tool.importlinter] in
pyproject.toml): each layer imports only the layers below it, function-level imports included, and
no module or package is in an import cycle. A copy of the package with one upward import added
inside a function fails the check."""

import importlib
import inspect
import pathlib
import pkgutil
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


# ---- parts, not mixins ---------------------------------------------------------------------------
# A class of ast_ad built on another of ast_ad's classes: the errors (a hierarchy users catch) and
# three that are what their base is (the reverse mode's scratch names are a Namer; the tracer's dual
# number is a Box; a sparsity pattern is a batch, of words, that moves as a batch of tangents does).
# The lowerer and the reverser are made of parts they hold, not of base classes.
_IS_A = {("ast_ad.modes.templates", "Scratch"), ("ast_ad.testing.tracer", "Dual"),
         ("ast_ad.runtime.batched", "Pattern")}


def _ast_ad_classes():
    import ast_ad

    for info in pkgutil.walk_packages(ast_ad.__path__, "ast_ad."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, cls in vars(module).items():
            if inspect.isclass(cls) and cls.__module__ == module.__name__:
                yield module.__name__, name, cls


def test_no_class_is_made_of_base_classes_of_ours():
    from ast_ad.errors import ASTADError

    built_on_ours = [
        (module, name)
        for module, name, cls in _ast_ad_classes()
        if any(base.__module__.startswith("ast_ad") for base in cls.__bases__)
        and not issubclass(cls, ASTADError)
    ]
    assert sorted(built_on_ours) == sorted(_IS_A)


def test_the_lowerer_and_the_reverser_hold_their_parts():
    from ast_ad.frontend import normalize
    from ast_ad.frontend.aliasing import Memory
    from ast_ad.frontend.lower_calls import CallLowering
    from ast_ad.frontend.parse import parse

    def f(x):
        y = x * 1.0
        return y

    lowerer = normalize.Lowerer(parse(f))
    assert type(lowerer).__bases__ == (object,)
    assert isinstance(lowerer.memory, Memory) and isinstance(lowerer.calls, CallLowering)
    # every part reads the one frame: what one binds, the others see
    parts = [lowerer.memory, lowerer.nested, lowerer.objects, lowerer.control, lowerer.exprs,
             lowerer.writing, lowerer.calls]
    assert all(part.at is lowerer.at for part in parts)
    assert all(part.lowering is lowerer for part in parts)


def test_the_memory_model_is_made_and_asked_alone():
    """``aliasing.Memory`` made with a frame and a lowering of the test's own (it binds nothing
    here): the relations it owns answer as Python's memory would."""
    from ast_ad.frontend.aliasing import Memory
    from ast_ad.frontend.frame import Frame
    from ast_ad.frontend.parse import parse

    def f(x):
        return x

    source = parse(f)
    memory = Memory(Frame(source, {}, ({"x"}, {})), lowering=None, return_view=lambda fn: None)
    memory.share("y", "x", alias=True)  # y = x
    memory.share("w", "y")  # w = y[1:]
    memory.contain("pair", "y")  # pair = [y, ...]
    assert memory.aliases("x") == {"x", "y"}  # one object: the view is another
    assert memory.reaching("x", container=False) == {"x", "y", "w", "pair"}
    # a change to the list itself (an append) leaves its items as they were
    assert memory.reaching("pair", container=True) == {"pair"}
    assert memory.reaching("pair", container=False) == {"pair", "x", "y", "w"}
