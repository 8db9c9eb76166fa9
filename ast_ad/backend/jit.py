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

from ast_ad.analysis.activity import is_library, is_user_function
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
        _refuse_derivative_objects(loaded, fun)
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
        # and each function of the user's that the code calls as it is (where its result carries
        # no derivative: ``cost(x, y)`` read only by a comparison), compiled as Numba compiles it
        # (its refusal names the user's line that calls it)
        for name, value in list(namespace.items()):
            if name not in loaded.files and is_user_function(value) and not is_library(value):
                namespace[name] = numba.njit(value)
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
        except Exception as exc:
            if not self.compiled_for(args):  # (Numba failed in compiling, not the code running)
                raise self.explain(exc) from None
            raise

    def compiled_for(self, args: tuple[Any, ...]) -> bool:
        """Whether Numba holds compiled code for arguments of these types (an error raised
        without it is Numba's own, while it compiled)."""
        try:
            given = tuple(self.numba.typeof(a) for a in args)
        except Exception:  # noqa: BLE001 -- a value Numba cannot type: nothing compiled for it
            return False
        return any(tuple(key[: len(given)]) == given for key in self.entry.overloads)

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
        if not places:  # (Numba's own failure, which names no line: the function's)
            return JitError(f"Numba could not compile the gradient ({reason}). {hint}",
                            self.origin[0], self.origin[1], self.origin[2].strip())
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


def _refuse_derivative_objects(loaded: Loaded, fun: Any) -> None:
    """A derivative object the generated code calls (a gradient held in a name, ``g =
    ast_ad.grad(f)``, a Jacobian, a jvp whose tangents are not written out) runs Python at each
    call, which Numba cannot compile: refused at the user's line that calls it, saying what
    compiles (``ast_ad.grad(f, argnums)(x, ...)`` called where it is written, or a jvp with its
    tangents written out, each lowered in place into the code), before Numba reports a line that
    is only where it stopped."""
    objects = {
        name
        for name, value in loaded.namespace.items()
        if not isinstance(value, type)
        and (getattr(value, "composable", False)
             or (type(value).__module__ or "").startswith("ast_ad.api."))
    }
    if not objects:
        return
    lines = loaded.text.splitlines()
    function = ""
    for lineno, line in enumerate(lines, 1):
        if line.startswith("def "):
            function = line.split("def ", 1)[1].split("(", 1)[0]
        called = {n for n in re.findall(r"\b(\w+)\(", line) if n in objects}
        if not called:
            continue
        where = loaded.line_at(lineno, function)
        if where is None:
            continue  # (a forward pass has no line comments: its backward pass calls it too)
        raise JitError(
            "Numba cannot compile this line: the derivative in it runs as a derivative object, "
            "Python at each call. To compile the whole computation, call the inner derivative "
            "where it is written, ast_ad.grad(f, argnums)(x, ...) or ast_ad.jvp(f, (x, ...), (v, "
            "None, ...)) with its tangents written out, which is lowered into the code; or leave "
            "out jit= to run the gradient in Python",
            *where,
        )
    code = fun.__code__
    raise JitError(
        "Numba cannot compile this gradient: it calls a derivative object, which runs Python at "
        "each call; call the inner derivative where it is written, ast_ad.grad(f, argnums)(x, "
        "...) or ast_ad.jvp(f, (x, ...), (v, None, ...)) with its tangents written out, or leave "
        "out jit=",
        code.co_filename, code.co_firstlineno, linecache.getline(code.co_filename,
                                                                 code.co_firstlineno).strip(),
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
        _fixed_lists(node)
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


# what may read a list that ``_fixed_lists`` makes a tuple: calls that read their arguments' items
_ITEM_READERS = frozenset({"len", "cast_vjp"})
_ARRAY_MAKERS = frozenset({"array", "asarray"})


def _fixed_lists(function: ast.FunctionDef) -> None:
    """Each list display of ``function`` that nothing changes made a tuple: a list bound once
    (``pack = [a, b]``) and read only by ``np.array`` or ``np.asarray``, ``len``, ``cast_vjp``
    (which reads its items' shapes), an item read (``pack[0]``) or as an item of a tuple (the
    values a forward pass saves for its backward pass, which reads them so). Numba cannot hold a
    list in a tuple that a list holds (a loop's tape of saved values); a tuple it can, and every
    one of those readers computes from a tuple what it computes from the list of the same items.
    A list read any other way (a method, an item written, passed to anything else) stays a
    list."""
    parents: dict[int, ast.AST] = {}
    for above in ast.walk(function):
        for child in ast.iter_child_nodes(above):
            parents[id(child)] = above
    bound: dict[str, list[ast.Assign]] = {}
    stores: dict[str, int] = {}
    fixed: dict[str, bool] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Load):
                stores[node.id] = stores.get(node.id, 0) + 1
                continue
            parent = parents.get(id(node))
            top = parent
            while isinstance(top, ast.Tuple):
                top = parents.get(id(top))
            fixed[node.id] = fixed.get(node.id, True) and (
                isinstance(parent, ast.Tuple) and isinstance(top, (ast.Return, ast.Assign))
                or isinstance(parent, ast.Subscript) and parent.value is node
                and isinstance(parent.ctx, ast.Load)
                or isinstance(parent, ast.Call) and node in parent.args and (
                    isinstance(parent.func, ast.Name) and parent.func.id in _ITEM_READERS
                    or isinstance(parent.func, ast.Attribute) and parent.func.attr in _ARRAY_MAKERS
                    and isinstance(parent.func.value, ast.Name) and parent.func.value.id == "np"
                )
            )
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.List) \
                and node.value.elts:
            bound.setdefault(node.targets[0].id, []).append(node)
        elif isinstance(node, ast.arg):
            stores[node.arg] = stores.get(node.arg, 0) + 1
    for name, assigns in bound.items():
        display = assigns[0].value
        if len(assigns) == 1 and stores.get(name) == 1 and fixed.get(name, True) \
                and isinstance(display, ast.List):
            assigns[0].value = ast.copy_location(ast.Tuple(elts=display.elts, ctx=ast.Load()),
                                                 display)


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
