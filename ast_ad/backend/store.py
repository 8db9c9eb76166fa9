"""The persistent cache: a generated module outlives the process that made it.

After a transformation, ``save`` writes an index beside the module's file (``load.written``): how to
find each of the module's globals again (a module, an importable name, one of the user's functions,
a global or closure variable of one), and a hash of each user function the module derives from.
Before transforming, ``fetch`` looks for an index under the same key and, when every one of those
functions still hashes the same, compiles the stored text instead of transforming again.

The key covers everything the generated text depends on: the function's code object and source text
(and its defaults), ast_ad's own source files (size and modification time), the Python, numpy and
gast versions, the printer, every rule and fact the user's code registered, and the specialization
(argnums, argument kinds, which derivative). A module that holds something ast_ad cannot find again
by name (an object made while transforming, a callable instance) is not stored: it is transformed in
each process, as before. ``AST_AD_CACHE=0`` turns the cache off with the files;
``ast_ad.cache_clear()`` empties it.
"""

from __future__ import annotations

import importlib
import importlib.util
import linecache
import marshal
import os
import pathlib
import sys
import types
from typing import Any

from ast_ad.backend import load as _load
from ast_ad.backend.emit import Binding, Emitted
from ast_ad.backend.load import hashed
from ast_ad.core import logs, registry

FORMAT = 2  # of the index files; a change of layout changes every key
_environment: str | None = None
_rules_spelled: tuple[int, str | None] = (-1, None)


def key(fn: Any, spec: tuple[Any, ...]) -> str | None:
    """The cache key of ``fn``'s derivative ``spec``, or ``None`` where it cannot be keyed
    exactly."""
    if _load.cache_dir() is None:
        return None
    own = function_hash(fn)
    rules = _user_rules()
    spelled = _stable(spec)
    if own is None or rules is None or spelled is None:
        return None
    text = repr((FORMAT, environment(), os.environ.get("AST_AD_PRINTER", ""), rules, spelled, own))
    return hashed(text.encode()).hexdigest()[:32]


def function_hash(fn: Any) -> str | None:
    """A hash of what ``fn`` is: its code object, its source text and its defaults; ``None`` if
    unreadable."""
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return None
    text = _source(code)
    if text is None:
        return None
    defaults = _stable((getattr(fn, "__defaults__", None), getattr(fn, "__kwdefaults__", None)))
    if defaults is None:
        return None
    digest = hashed(marshal.dumps(code))
    digest.update(text.encode())
    digest.update(defaults.encode())
    return digest.hexdigest()


def _source(code: types.CodeType) -> str | None:
    """The source lines of ``code`` (its decorators to its last line, nested code included), as
    Python has them in ``linecache``; ``None`` where there are none. Cheaper than
    ``inspect.getsource``, which tokenizes."""
    lines = linecache.getlines(code.co_filename)
    if not lines:
        return None
    last, stack = code.co_firstlineno, [code]
    while stack:
        inner = stack.pop()
        for _, end, _, _ in inner.co_positions():
            if end is not None and end > last:
                last = end
        stack.extend(c for c in inner.co_consts if isinstance(c, types.CodeType))
    return "".join(lines[code.co_firstlineno - 1:last])


def environment() -> str:
    """A hash of ast_ad's own sources and the versions of what the generated text depends on (once a
    process)."""
    global _environment
    if _environment is None:
        import gast
        import numpy

        astor = importlib.util.find_spec("astor")
        digest = hashed(repr((sys.version, numpy.__version__, getattr(gast, "__version__", ""),
                                      astor and astor.origin)).encode())
        package = os.path.dirname(os.path.dirname(__file__))
        # each file's size and modification time: an edit
        for folder, _, files in sorted(os.walk(package)):
            # or a new install changes it
            for name in sorted(f for f in files if f.endswith(".py")):
                info = os.stat(os.path.join(folder, name))
                where = os.path.relpath(os.path.join(folder, name), package)
                digest.update(f"{where}:{info.st_size}:{info.st_mtime_ns};".encode())
        _environment = digest.hexdigest()
    return _environment


def _user_rules() -> str | None:
    """The rules and facts registered outside ast_ad, spelled so that another process spells them
    the same (a hash, made again only when a registration was added)."""
    global _rules_spelled
    count = len(registry.USER_CHANGES)
    if _rules_spelled[0] != count:
        spelled = _stable(tuple(registry.USER_CHANGES))
        _rules_spelled = (count, None if spelled is None else hashed(spelled.encode()).hexdigest())
    return _rules_spelled[1]


def _stable(value: Any) -> str | None:
    """``value`` spelled the same in every process, or ``None`` (an object known only by its
    address)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if isinstance(value, (tuple, list, frozenset)):
        parts = [
            _stable(v) for v in (sorted(value, key=repr) if isinstance(value, frozenset) else value)
        ]
        if None in parts:
            return None
        return f"{type(value).__name__}({', '.join(parts)})"  # type: ignore[arg-type]
    if isinstance(value, dict):
        return _stable(tuple(sorted(value.items(), key=repr)))
    if type(value).__module__ == "numpy" and hasattr(value, "tobytes"):
        return f"array({value.dtype.str}, {value.shape}, {hashed(value.tobytes()).hexdigest()})"
    code = getattr(value, "__code__", None)
    if isinstance(code, types.CodeType):  # a rule: its code, and what its closure holds
        try:
            cells = tuple(c.cell_contents for c in (value.__closure__ or ()))
        except ValueError:  # a closure variable not bound yet: nothing to spell it by
            return None
        inner = _stable((value.__module__, value.__qualname__, value.__defaults__, cells))
        return None if inner is None else f"fn({hashed(marshal.dumps(code)).hexdigest()}, {inner})"
    name = _importable(value)
    return None if name is None else f"import({name[0]}:{name[1]})"


def _importable(value: Any) -> tuple[str, str] | None:
    """``(module, qualname)`` that import back to this very object, or ``None``."""
    if isinstance(value, types.ModuleType):
        return (value.__name__, "") if sys.modules.get(value.__name__) is value else None
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    try:
        return (module, qualname) if _imported(module, qualname) is value else None
    except Exception:  # noqa: BLE001 -- whatever a lookup raises, the object is not found by name
        return None


def _imported(module: str, qualname: str) -> Any:
    obj: Any = importlib.import_module(module)
    for part in filter(None, qualname.split(".")):
        obj = getattr(obj, part)
    return obj


# ---- writing and reading an index ----------------------------------------------------------------


def save(cache_key: str, emitted: Emitted, loaded: _load.Loaded) -> bool:
    """Write the index of this module under ``cache_key``; ``False`` (and nothing written) where it
    cannot be."""
    path = pathlib.Path(loaded.fn.__code__.co_filename)
    if not path.is_file():
        return False
    functions = list(emitted.functions)
    paths = _function_paths(functions, emitted.bindings)
    hashes = [function_hash(f) for f in functions]
    # read again before every call (``Loaded.refresh``)
    data = {b.alias for b in emitted.bindings if b.data}
    namespace = {name: ["data"] if name in data else _recipe(value, functions)
                 for name, value in emitted.namespace.items()}
    bindings = []
    for b in emitted.bindings:
        value = None if b.data else _recipe(b.value, functions)
        if b.fn not in functions or (not b.data and value is None):
            return False
        bindings.append(
            [b.alias, functions.index(b.fn), b.origin[0], b.origin[1], b.data, value, b.kind]
        )
    if paths is None or None in hashes or None in namespace.values():
        return False
    record = {
        "format": FORMAT,
        "text": path.name,
        "entry": emitted.entry,
        "files": emitted.files,
        "functions": [[p, h] for p, h in zip(paths, hashes, strict=True)],
        "namespace": namespace,
        "bindings": bindings,
    }
    import json  # (here, not at the top: ``import ast_ad`` does without it)

    return (
        _load.write_atomic(path.parent / "index", f"{cache_key}.json", json.dumps(record))
        is not None
    )


def fetch(cache_key: str, fn: Any) -> _load.Loaded | None:
    """The stored module under ``cache_key``, compiled, if each function it derives from is
    unchanged."""
    for place in _load.places():
        index = place / "index" / f"{cache_key}.json"
        if not index.is_file():
            continue
        import json

        try:
            return _restore(json.loads(index.read_text(encoding="utf-8")), place, fn)
        except Exception as exc:  # noqa: BLE001 -- a damaged or stale entry: transform instead
            logs.debug("the cached module %s was not used: %s: %s", index, type(exc).__name__, exc)
    return None


def _restore(record: dict[str, Any], place: pathlib.Path, fn: Any) -> _load.Loaded | None:
    if record.get("format") != FORMAT:
        return None
    functions: list[Any] = []
    for path, digest in record["functions"]:
        f = fn if not functions else _find(path, functions)
        if function_hash(f) != digest:
            return None
        functions.append(f)
    text_path = place / record["text"]
    text = text_path.read_text(encoding="utf-8")
    if _load.text_name(text, record["entry"]) != record["text"]:
        return None  # a damaged file
    namespace = {name: _find(recipe, functions) for name, recipe in record["namespace"].items()
                 if recipe != ["data"]}
    bindings = tuple(
        Binding(
            alias,
            functions[k],
            (kind, name),
            None if data else _find(value, functions),
            data,
            label,
        )
        for alias, k, kind, name, data, value, label in record["bindings"]
    )
    return _load.load(text, record["entry"], namespace, bindings, record["files"])


def _recipe(value: Any, functions: list[Any]) -> list[Any] | None:
    """How another process finds ``value`` again: ``["function", k]`` or ``["import", module,
    qualname]``."""
    for k, f in enumerate(functions):
        if value is f:
            return ["function", k]
    name = _importable(value)
    return None if name is None else ["import", *name]


def _function_paths(functions: list[Any], bindings: tuple[Binding, ...]) -> list[list[Any]] | None:
    """How to find each of ``functions`` from the first: by import, or as a variable of one found
    before."""
    paths: list[list[Any] | None] = [["entry"]] + [None] * (len(functions) - 1)
    changed = True
    while changed:
        changed = False
        for k, f in enumerate(functions):
            if paths[k] is not None:
                continue
            name = _importable(f)
            if name is not None:
                paths[k] = ["import", *name]
            else:
                for b in bindings:
                    if (
                        b.value is f
                        and b.fn in functions
                        and paths[functions.index(b.fn)] is not None
                    ):
                        paths[k] = ["read", functions.index(b.fn), *b.origin]
                        break
            changed = changed or paths[k] is not None
    return None if None in paths else paths  # type: ignore[return-value]


def _find(recipe: list[Any], functions: list[Any]) -> Any:
    kind = recipe[0]
    if kind == "function":
        return functions[recipe[1]]
    if kind == "import":
        return _imported(recipe[1], recipe[2])
    if kind == "read":
        value = _load.read(functions[recipe[1]], (recipe[2], recipe[3]))
        if value is _load.MISSING:
            raise LookupError(f"{recipe[3]} is not bound")
        return value
    raise ValueError(f"unknown recipe {recipe!r}")
