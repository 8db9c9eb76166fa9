"""Stage 6, load: compile exactly the printed text, and register it so tracebacks, pdb and inspect
show it.

Each generated module is also written to a real file (``cache_dir()``), named after its entry
function and its text's hash, and compiled with that file name: the interpreter's traceback printer,
debuggers, coverage tools and profilers read lines from disk. ``AST_AD_CACHE=0`` turns the files off
(the code is then named ``<ast_ad f_vjp #1>`` and lives in ``linecache`` alone);
``AST_AD_CACHE_DIR`` moves them.

>>> loaded = load("def double(x):\\n    return 2 * x\\n", "double", {})
>>> import inspect
>>> loaded.fn(3.0), inspect.getsource(loaded.fn).splitlines()[0]
(6.0, 'def double(x):')
"""

from __future__ import annotations

import inspect
import itertools
import linecache
import os
import pathlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ast_ad.analysis.kinds import labelled
from ast_ad.backend.emit import Binding
from ast_ad.core.records import field, record
from ast_ad.frontend.parse import generated, user_line

if TYPE_CHECKING:
    from hashlib import blake2b

_serial = itertools.count(1)
MISSING = object()


@record(frozen=False, eq=False)
class Loaded:
    fn: Callable[..., Any]
    text: str
    namespace: dict[str, Any]
    bindings: tuple[Binding, ...]
    files: dict[str, str] = field(default_factory=dict)  # generated function -> the user's file
    replaced: bool = False  # a newer module took its place in ``transform``'s cache
    # refresh()'s work, sorted once (by ``load``): the globals that must still be the same object,
    # read from their module's dict on every call, and the other bindings (closure cells, data
    # re-read into the namespace)
    same: tuple[tuple[Any, str, Any], ...] = ()  # (a dict, or a ``_CodeOf``: what has ``get``)
    others: tuple[Binding, ...] = ()

    def user_line(self, exc: BaseException) -> tuple[str, int, str] | None:
        """The user's line whose gradient was running where ``exc`` was raised in this code, if any.

        The innermost generated frame in the traceback gives a line of the generated
        text; the ``# line N: ...`` comment above it, in the same function, names the
        user's line whose adjoint that is.
        """
        filename = self.fn.__code__.co_filename
        frame = None
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == filename:
                frame = tb
            tb = tb.tb_next
        if frame is None:
            return None
        return self.line_at(frame.tb_lineno, frame.tb_frame.f_code.co_name)

    def line_at(self, lineno: int, function: str) -> tuple[str, int, str] | None:
        """The user's line whose gradient line ``lineno`` of the generated ``function`` computes:
        the ``# line N: ...`` comment above it in that function (``None`` in a forward pass, which
        has none)."""
        found = user_line(self.fn.__code__.co_filename, function, lineno)
        return found if found is not None and found[1] else None

    def refresh(self) -> bool:
        """Re-read the globals and closure values the code uses; ``False`` if a function or module
        changed."""
        for scope, name, value in self.same:  # this runs on every call
            if scope.get(name, MISSING) is not value:
                return False
        for binding in self.others:
            kind, name = binding.origin  # read(), inline for globals
            value = (
                binding.fn.__globals__.get(name, MISSING)
                if kind == "global"
                else read(binding.fn, binding.origin)
            )
            if binding.data:
                if binding.kind != -3 and labelled(0, value) != binding.kind:
                    # a numpy array of another number of axes or kind: the code relied on them
                    return False
                self.namespace[binding.alias] = value
            elif value is not binding.value:
                return False
        return True


class _CodeOf:
    """``fn``'s code, read as ``refresh`` reads a global (``get``): swapping a function's
    ``__code__`` (IPython's autoreload does) leaves the function object the same, and the code
    derived from the old one stale."""

    __slots__ = ("fn",)

    def __init__(self, fn: Any):
        self.fn = fn

    def get(self, name: str, default: Any = None) -> Any:
        return self.fn.__code__


def watch_code(loaded: Loaded, fn: Any, inlined: tuple[Any, ...] = ()) -> None:
    """Make ``loaded`` stale (``refresh`` false) once the code of ``fn``, or of a function its
    bindings read, is no longer the code it was derived from; or once a function ``inlined`` (whose
    body the derivation wrote in place, so that no binding reads it) is no longer what its module
    (its class, for a method) names."""
    for helper in inlined:
        scope, top = helper.__globals__, helper.__qualname__.split(".")[0]
        if top in scope:
            loaded.same += ((scope, top, scope[top]),)
    functions = [
        fn,
        *inlined,
        *(b.fn for b in loaded.bindings),
        *(b.value for b in loaded.bindings),
    ]
    watched = {id(f): f for f in functions if inspect.isfunction(f)
               and not (getattr(f, "__module__", None) or "").startswith("ast_ad.")}
    known = {id(scope.fn) for scope, _, _ in loaded.same if isinstance(scope, _CodeOf)}
    loaded.same += tuple(
        (_CodeOf(f), "__code__", f.__code__) for key, f in watched.items() if key not in known
    )


def load(text: str, entry: str, namespace: dict[str, Any], bindings: tuple[Binding, ...] = (),
         files: dict[str, str] | None = None) -> Loaded:
    """Compile ``text`` into a fresh namespace and return its function ``entry``."""
    filename = written(text, entry) or f"<ast_ad {entry} #{next(_serial)}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    generated(filename, files or {})
    scope = dict(namespace)
    exec(compile(text, filename, "exec"), scope)  # noqa: S102 -- compiling the code we just printed
    same = tuple((binding.fn.__globals__, binding.origin[1], binding.value) for binding in bindings
                 if binding.origin[0] == "global" and not binding.data)
    others = tuple(binding for binding in bindings if binding.origin[0] != "global" or binding.data)
    return Loaded(scope[entry], text, scope, bindings, files or {}, False, same, others)


def cache_dir() -> pathlib.Path | None:
    """Where generated modules are written: ``AST_AD_CACHE_DIR``, else the platform's user cache
    directory (``~/.cache/ast_ad`` on Linux); ``None`` when ``AST_AD_CACHE=0``."""
    if os.environ.get("AST_AD_CACHE", "1") == "0":
        return None
    if os.environ.get("AST_AD_CACHE_DIR"):
        return pathlib.Path(os.environ["AST_AD_CACHE_DIR"])
    if sys.platform == "win32":
        base = pathlib.Path(
            os.environ.get("LOCALAPPDATA", pathlib.Path.home() / "AppData" / "Local")
        )
        return base / "ast_ad" / "Cache"
    if sys.platform == "darwin":
        return pathlib.Path.home() / "Library" / "Caches" / "ast_ad"
    return (
        pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache") / "ast_ad"
    )


def written(text: str, entry: str) -> str | None:
    """The path of a file holding ``text`` (written now, atomically, unless it is there), or
    ``None``.

    Falls back to the temporary directory where the cache directory is not writable.
    """
    name = text_name(text, entry)
    for place in places():
        if (place / name).exists():
            return str(place / name)
        path = write_atomic(place, name, text)
        if path is not None:
            return str(path)
    return None


def text_name(text: str, entry: str) -> str:
    """The file name of a generated module: its entry function and a hash of its text."""
    return f"{entry}-{hashed(text.encode()).hexdigest()[:16]}.py"


def hashed(data: bytes) -> blake2b:
    """A BLAKE2b hash of ``data``, 32 bytes, from the interpreter's built-in ``_blake2`` where it
    has one: ``import hashlib`` imports OpenSSL too, which took a tenth of ``import ast_ad`` and
    then, made lazy, tripled the first gradient of a process that reads the persistent cache (1.3
    ms)."""
    try:
        from _blake2 import blake2b as made
    except ImportError:  # (an interpreter without it)
        from hashlib import blake2b as made
    return made(data, digest_size=32)


def places() -> Iterator[pathlib.Path]:
    """The folders generated modules go to, in order: the cache directory, then a temporary one
    (found only when asked for: :mod:`tempfile` is slow to import)."""
    folder = cache_dir()
    if folder is None:
        return
    yield folder
    import tempfile

    user = os.getuid() if hasattr(os, "getuid") else 0
    yield pathlib.Path(tempfile.gettempdir()) / f"ast_ad-{user}"


_partials = itertools.count()


def write_atomic(place: pathlib.Path, name: str, text: str) -> pathlib.Path | None:
    """Write ``text`` to ``place / name`` so that a reader sees the whole file or none; ``None`` on
    failure."""
    partial = place / f".{name}.{os.getpid()}.{threading.get_ident()}.{next(_partials)}.partial"
    try:
        place.mkdir(parents=True, exist_ok=True)
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        # atomic: another process reads the whole file or none of it
        os.replace(partial, place / name)
    except OSError:
        partial.unlink(missing_ok=True)
        return None
    return place / name


def cache_clear() -> int:
    """Delete the generated modules (and the persistent cache's index) in the cache directories; the
    number of files removed."""
    removed = 0
    for folder in places():
        for path in [*folder.glob("*.py"), *folder.glob("index/*.json")]:
            try:
                path.unlink()
                removed += 1
            except OSError:
                pass
    return removed


def read(fn: Any, origin: tuple[str, str]) -> Any:
    """The current value of a global or closure variable of ``fn``."""
    kind, name = origin
    if kind == "global":
        return fn.__globals__.get(name, MISSING)
    cell = fn.__closure__[fn.__code__.co_freevars.index(name)]
    try:
        return cell.cell_contents
    except ValueError:
        return MISSING
