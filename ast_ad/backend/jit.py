"""Gradients compiled by Numba: ``ast_ad.grad(f, jit="numba")``.

The generated gradient is plain numeric Python, so Numba can compile it as it is, in nopython mode:
its loops, branches and tapes (one list per saved value, so each holds one type) run at compiled
speed. What Numba needs besides is here: a compiled version of each runtime helper the generated
code calls (``numba.extending.overload``), written for the numbers and arrays Numba types, and
``reversed`` of a ``range`` (and of a slice of one), which Numba lacks. The Python helpers stay the
definition; each compiled one computes what the Python one computes, and the tests run both on the
same inputs.

Where the code is outside what Numba compiles (a container argument, a helper without a compiled
version, a variable that is a number in one place and an array in another), the first call raises
:class:`JitError` naming the user's line whose gradient Numba could not compile, and Numba's reason.
Nothing falls back to Python silently.
"""

from __future__ import annotations

import ast
import linecache
import re
import threading
from typing import Any

from ast_ad.backend.load import Loaded
from ast_ad.errors import LocatedError

_lock = threading.Lock()
_compiled: dict[int, tuple[Loaded, Any]] = {}
_installed = False


class JitError(LocatedError):
    """Numba cannot compile this gradient: the message names the user's line and Numba's reason."""


def compiled(loaded: Loaded, fun: Any) -> Any:
    """The generated entry function of ``loaded``, the gradient of the user's function ``fun``,
    compiled by Numba; made once per generated module."""
    found = _compiled.get(id(loaded))
    if found is not None and found[0] is loaded:
        return found[1]
    with _lock:
        numba = _numba()
        _install(numba)
        namespace = dict(loaded.namespace)
        # The same code, with each ``del`` (which frees memory early in Python) a ``pass``: Numba
        # refuses del, and manages the memory itself. Line numbers stay, so Numba's messages point
        # into the shown text.
        tree = _Undelete().visit(ast.parse(loaded.text))
        code = compile(tree, loaded.fn.__code__.co_filename, "exec")
        exec(code, namespace)  # noqa: S102 -- our own code
        for name in loaded.files:  # every generated function, compiled, calling the others compiled
            if name.startswith("<file "):
                continue  # (the file of a helper inlined from elsewhere, which comments name)
            namespace[name] = numba.njit(namespace[name])
        # where a failure in the forward pass (which has no line comments) is reported
        code = fun.__code__
        origin = (
            code.co_filename,
            code.co_firstlineno,
            linecache.getline(code.co_filename, code.co_firstlineno),
        )
        runner = _Compiled(namespace[loaded.fn.__name__], loaded, numba, origin)
        _compiled[id(loaded)] = (loaded, runner)
        return runner


class _Compiled:
    """Calls the compiled gradient; Numba compiles at the first call of each argument types, and a
    failure there is reported at the user's line."""

    def __init__(self, entry: Any, loaded: Loaded, numba: Any, origin: tuple[str, int, str]):
        self.entry, self.loaded, self.numba, self.origin = entry, loaded, numba, origin

    def __call__(self, *args: Any) -> Any:
        try:
            return self.entry(*args)
        except (self.numba.core.errors.TypingError, self.numba.core.errors.UnsupportedError,
                self.numba.core.errors.LoweringError) as exc:
            raise self.explain(exc) from None

    def explain(self, exc: Exception) -> JitError:
        message = str(exc)
        lines = self.loaded.text.splitlines()
        filename = self.loaded.fn.__code__.co_filename
        places = [int(n) for path, n in re.findall(r'File "([^"]+)", line (\d+)', message)
                  if path == filename or path.endswith(filename.rsplit("/", 1)[-1])]
        reason = next(
            (
                line.strip()
                for line in message.splitlines()
                if line.strip() and not line.startswith(("Failed in", "During:", "File", "<source"))
            ),
            message,
        )
        hint = (
            "Numba compiles numbers, numpy arrays, and lists and tuples of them; keep each "
            "variable one type (a number everywhere, or an array everywhere), or leave out jit= to "
            "run the gradient in Python"
        )
        if not places:
            return JitError(f"Numba could not compile the gradient ({reason}). {hint}")
        lineno = places[-1]
        function = next(
            (
                line.split("def ", 1)[1].split("(", 1)[0]
                for line in reversed(lines[:lineno])
                if line.startswith("def ")
            ),
            "",
        )
        where = self.loaded.line_at(lineno, function) or (
            self.origin[0],
            self.origin[1],
            self.origin[2].strip(),
        )
        return JitError(
            f"Numba could not compile the gradient of this line ({reason}); generated line: "
            f"{lines[lineno - 1].strip()}. {hint}",
            *where,
        )


class _Undelete(ast.NodeTransformer):
    """Each ``del`` a ``pass``; each loop over a list read backwards, ``for x in reversed(x_tape)``,
    a loop over its reversed copy, ``x_tape[::-1]`` (Numba has no ``reversed`` of a list)."""

    lists: set[str] = set()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        self.lists = {
            t.id
            for n in ast.walk(node)
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.List)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        self.generic_visit(node)
        return node

    def visit_Delete(self, node: ast.Delete) -> ast.Pass:
        return ast.copy_location(ast.Pass(), node)

    def visit_For(self, node: ast.For) -> ast.For:
        self.generic_visit(node)
        call = node.iter
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "reversed"
            and len(call.args) == 1
            and isinstance(call.args[0], ast.Name)
            and call.args[0].id in self.lists
        ):
            backwards = ast.Slice(
                lower=None, upper=None, step=ast.UnaryOp(op=ast.USub(), operand=ast.Constant(1))
            )
            node.iter = ast.copy_location(
                ast.Subscript(value=call.args[0], slice=backwards, ctx=ast.Load()), call
            )
            ast.fix_missing_locations(node)
        return node


def _numba() -> Any:
    try:
        import numba
    except ImportError:
        raise JitError('jit="numba" needs Numba: pip install numba (from a checkout of ast_ad, pip '
                       'install ".[numba]")') from None
    return numba


def _install(numba: Any) -> None:
    """The compiled versions of the runtime helpers, registered with Numba once."""
    global _installed
    if _installed:
        return
    from ast_ad.backend import numba_helpers

    numba_helpers.register(numba)
    _installed = True
