"""Stage 6, load: compile exactly the printed text, and register it so tracebacks, pdb and inspect show it.

>>> loaded = load("def double(x):\\n    return 2 * x\\n", "double", {})
>>> import inspect
>>> loaded.fn(3.0), inspect.getsource(loaded.fn).splitlines()[0]
(6.0, 'def double(x):')
"""

from __future__ import annotations

import itertools
import linecache
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ast_ad.emit import Binding

_serial = itertools.count(1)
_MISSING = object()
_COMMENT = re.compile(r"\s*# line (\d+): (.*)$")


@dataclass(frozen=True)
class Loaded:
    fn: Callable[..., Any]
    text: str
    namespace: dict[str, Any]
    bindings: tuple[Binding, ...]
    files: dict[str, str] = field(default_factory=dict)  # generated function -> the user's file

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
        if frame is None or frame.tb_frame.f_code.co_name not in self.files:
            return None
        lines = self.text.splitlines()
        for text in reversed(lines[:frame.tb_lineno]):
            found = _COMMENT.match(text)
            if found:
                return self.files[frame.tb_frame.f_code.co_name], int(found.group(1)), found.group(2)
            if text.lstrip().startswith("def "):
                return None
        return None

    def refresh(self) -> bool:
        """Re-read the globals and closure values the code uses; ``False`` if a function or module changed."""
        for binding in self.bindings:
            value = read(binding.fn, binding.origin)
            if binding.data:
                self.namespace[binding.alias] = value
            elif value is not binding.value:
                return False
        return True


def load(text: str, entry: str, namespace: dict[str, Any], bindings: tuple[Binding, ...] = (),
         files: dict[str, str] | None = None) -> Loaded:
    """Compile ``text`` into a fresh namespace and return its function ``entry``."""
    filename = f"<ast_ad {entry} #{next(_serial)}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    scope = dict(namespace)
    exec(compile(text, filename, "exec"), scope)  # noqa: S102 -- compiling the code we just printed
    return Loaded(scope[entry], text, scope, bindings, files or {})


def read(fn: Any, origin: tuple[str, str]) -> Any:
    """The current value of a global or closure variable of ``fn``."""
    kind, name = origin
    if kind == "global":
        return fn.__globals__.get(name, _MISSING)
    cell = fn.__closure__[fn.__code__.co_freevars.index(name)]
    try:
        return cell.cell_contents
    except ValueError:
        return _MISSING
