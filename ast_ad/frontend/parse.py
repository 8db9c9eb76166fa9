"""Stage 1, parse: read a function's real source into a gast tree that remembers where it came from.

>>> def f(x):
...     return x * 2.0
>>> source = parse(f)
>>> first_line = source.tree.body[0].lineno + source.line_offset
>>> source.tree.name, first_line == f.__code__.co_firstlineno + 1
('f', True)

Indented sources (methods, nested functions) are parsed in place under an
``if 1:`` header, so every node keeps its real column; ``line_offset`` maps a
node's line back to the user's file. A lambda becomes a one-statement ``def``.
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import linecache
import re
import types
from collections.abc import Callable, Iterator
from typing import Any

import gast
from gast import ast3 as gast_ast3

from ast_ad.core.records import record
from ast_ad.errors import SourceUnavailableError
from ast_ad.ir.naming import identifier


@record
class Source:
    """A function's gast tree, with what it takes to point at the user's lines."""

    fn: Callable[..., Any]
    tree: gast.FunctionDef
    filename: str
    line_offset: int

    def lineno(self, node: gast.AST) -> int:
        """The line in the user's file that ``node`` stands on."""
        return getattr(node, "lineno", 1) + self.line_offset

    def line(self, node: gast.AST) -> str:
        """The text of that line, as the user wrote it."""
        return linecache.getline(self.filename, self.lineno(node)).rstrip("\n")

    def where(self, node: gast.AST) -> tuple[str, int, str]:
        """The user's file, line and its text for ``node``. In code ast_ad wrote (a gradient
        differentiated again), the user's line it derives from: the ``# line N: ...`` comment above
        it, or line 0 (no line, no comment) for the statements above the first comment, which copy
        the user's function."""
        lineno = self.lineno(node)
        found = user_line(self.filename, self.tree.name, lineno)
        return found if found is not None else (self.filename, lineno, self.line(node))


# a file of code ast_ad wrote -> its functions' users' files
_generated: dict[str, dict[str, str]] = {}
# (a file's name first: another file's line)
_COMMENT = re.compile(r"\s*# (?:(\S+) )?line (\d+): (.*)$")


def generated(filename: str, files: dict[str, str]) -> None:
    """Note that the file ``filename`` (in ``linecache``) holds code ast_ad wrote; ``files``: the
    user's file that each of its functions derives from."""
    if files:
        _generated[filename] = dict(files)


def user_line(filename: str, function: str, lineno: int) -> tuple[str, int, str] | None:
    """The user's line whose derivative line ``lineno`` of ``function`` (in code ast_ad wrote, in
    ``filename``) computes: the ``# line N: ...`` comment above it in that function, else line 0 of
    the user's file (the statements before the first comment); ``None`` where that is not code
    ast_ad wrote. A comment that names a file first (``helpers.py line 4: ...``, an inlined
    helper's) names one of ``files``' ``<file NAME>`` keys."""
    files = _generated.get(filename)
    if files is None or function not in files:
        return None
    for text in reversed(linecache.getlines(filename)[:lineno]):
        found = _COMMENT.match(text)
        if found:
            path = (
                files.get(f"<file {found.group(1)}>", files[function])
                if found.group(1)
                else files[function]
            )
            return path, int(found.group(2)), found.group(3).rstrip("\n")
        if text.lstrip().startswith("def "):
            break
    return files[function], 0, ""


def parse(fn: Callable[..., Any]) -> Source:
    """Parse ``fn``'s source; raise :class:`SourceUnavailableError` when there is none.

    A function made by a decorator is parsed as it is, not as the function it names in
    ``__wrapped__`` (``functools.wraps``): the wrapper may change the value (``return 2 * f(x)``),
    and ast_ad differentiates what Python runs. A wrapper outside the language (``*args``) is
    refused at its line. Only a wrapper that computes what its function computes
    (``wrapped_function``: a cache, a Numba dispatcher) gives its function's."""
    fn = wrapped_function(fn) or fn
    # a file edited since it was read (then ``importlib.reload``): read it anew
    if inspect.isfunction(fn):
        linecache.checkcache(fn.__code__.co_filename)
    if getattr(fn, "__name__", None) == "<lambda>" and inspect.isfunction(fn):
        lambdas = _file_lambdas(fn.__code__.co_filename, fn.__code__.co_firstlineno)
        if lambdas is not None:
            return Source(
                fn, _lambda_as_def(_find_lambda(lambdas, fn, 0), fn), fn.__code__.co_filename, 0
            )
    found = _file_def(fn) if inspect.isfunction(fn) and fn.__name__ != "<lambda>" else None
    if found is not None:
        return _checked(fn, found, 0)
    lines, start = _source_lines(fn)
    text = "".join(lines)
    indented = text[:1].isspace()
    module = _parse_text("if 1:\n" + text if indented else text, fn)
    body = module.body[0].body if indented else module.body
    offset = start - 1 - (1 if indented else 0)
    filename = fn.__code__.co_filename
    if fn.__name__ == "<lambda>":
        lambdas = [node for node in gast.walk(module) if isinstance(node, gast.Lambda)]
        return Source(fn, _lambda_as_def(_find_lambda(lambdas, fn, offset), fn), filename, offset)
    defs = [node for node in body if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef))]
    if not defs:
        raise SourceUnavailableError(
            f"could not find the definition of {fn.__qualname__} in its source"
        )
    return _checked(fn, defs[0], offset)


def wrapped_function(fn: Any) -> Any:
    """The Python function inside a wrapper that computes what it computes (a ``functools.cache`` or
    ``lru_cache``, a Numba dispatcher: ``numba.njit(f)``, the check of the arguments' kinds that an
    exported gradient's module puts around it: ``ast_ad.export``), or ``None`` for anything else."""
    if isinstance(fn, functools._lru_cache_wrapper) and inspect.isfunction(fn.__wrapped__):
        return fn.__wrapped__
    inner = getattr(fn, "__wrapped__", None)
    if (
        inspect.isfunction(fn)
        and getattr(fn, "__ast_ad_exported__", False) is True
        and inspect.isfunction(inner)
    ):
        return inner
    if type(fn).__module__.startswith("numba.") and inspect.isfunction(
        getattr(fn, "py_func", None)
    ):
        return fn.py_func
    return None


_partials = itertools.count()


def partial_function(made: functools.partial[Any]) -> Callable[..., Any]:
    """A Python function, with source, that computes what the ``functools.partial`` ``made``
    computes: its function called with the bound arguments (closure values) and the remaining
    parameters, which it takes as the partial does (a keyword bound is a keyword-only parameter with
    that default)."""
    try:
        parameters = list(inspect.signature(made).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    if not inspect.isfunction(made.func) and not isinstance(made.func, functools.partial) \
            or any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
        raise SourceUnavailableError(
            f"{made!r} binds arguments of a function ast_ad cannot name, or leaves *args "
            "or **kwargs open: wrap it in a def"
        )
    inner = partial_function(made.func) if isinstance(made.func, functools.partial) else made.func
    name = identifier(f"{getattr(inner, '__name__', 'f')}_partial")
    cells = {"_f": inner, **{f"_a{k}": v for k, v in enumerate(made.args)}}
    spelled: list[str] = []
    passed: list[str] = [f"_a{k}" for k in range(len(made.args))]
    keywords: list[str] = []
    star = False
    for k, p in enumerate(parameters):
        default = ""
        if p.default is not p.empty:
            cells[f"_d{k}"] = p.default
            default = f"=_d{k}"
        if p.kind is p.KEYWORD_ONLY and not star:
            spelled.append("*")
            star = True
        spelled.append(f"{p.name}{default}")
        (keywords if p.kind is p.KEYWORD_ONLY else passed).append(p.name)
        if p.kind is p.POSITIONAL_ONLY and (
            k + 1 == len(parameters) or parameters[k + 1].kind is not p.kind
        ):
            spelled.append("/")
    call = ", ".join(passed + [f"{n}={n}" for n in keywords])
    text = (f"def _make({', '.join(cells)}):\n    def {name}({', '.join(spelled)}):\n        "
            f"return _f({call})\n    return {name}\n")
    filename = f"<ast_ad partial of {getattr(inner, '__qualname__', 'f')} #{next(_partials)}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    scope: dict[str, Any] = {}
    exec(compile(text, filename, "exec"), scope)  # noqa: S102 -- the text just written
    fn: Callable[..., Any] = scope["_make"](*cells.values())
    fn.__qualname__ = f"{getattr(inner, '__qualname__', name)}_partial"
    return fn


def _file_def(fn: Callable[..., Any]) -> gast.FunctionDef | None:
    """``fn``'s definition, found in the statement of its file around its first line (no tokenizing
    of its lines, as ``inspect.getsource`` does); ``None`` where the file cannot be read or parsed,
    or has no such def."""
    code = fn.__code__
    text = "".join(linecache.getlines(code.co_filename))
    around = _statements_around(code.co_filename, text, code.co_firstlineno) if text else None
    for node in _nodes_around(around or [], code.co_firstlineno):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name \
                and _first_line(node) == code.co_firstlineno:
            tree: gast.FunctionDef = to_gast(node)
            return tree
    return None


def _nodes_around(statements: list[ast.stmt], line: int) -> Iterator[ast.AST]:
    """Every node of those of ``statements`` that span ``line`` (their decorators included)."""
    for stmt in statements:
        if _first_line(stmt) <= line <= (stmt.end_lineno or stmt.lineno):
            yield from ast.walk(stmt)


def _first_line(stmt: ast.stmt) -> int:
    """Where a statement starts, its decorators included (a decorated function's code starts
    there)."""
    decorators: list[ast.expr] = getattr(stmt, "decorator_list", [])
    return min([stmt.lineno] + [d.lineno for d in decorators])


def _checked(fn: Callable[..., Any], tree: gast.FunctionDef, offset: int) -> Source:
    filename = fn.__code__.co_filename
    if not _runs(tree, fn, filename):
        raise SourceUnavailableError(
            f"the source of {fn.__qualname__} in {filename} is not the code Python runs for it: "
            "the file was "
            "edited after it was imported, the function was built under another file's name, or "
            "its __code__ "
            "was replaced; reload the module (importlib.reload) or restart, so that ast_ad "
            "differentiates "
            "what runs"
        )
    return Source(fn, tree, filename, offset)


def _runs(tree: gast.FunctionDef, fn: Callable[..., Any], filename: str) -> bool:
    """Whether the file's text, compiled as it is now, gives ``fn.__code__``: the same bytecode,
    names and constants.

    The whole file is compiled, so methods, closures and the module's imports compile as they did.
    """
    code = fn.__code__
    text = "".join(linecache.getlines(filename))
    flags = code.co_flags & _FUTURE_FLAGS
    compiled = _compiled_file(filename, text, flags)
    found = compiled is not None and _code_at(compiled, code.co_name, code.co_firstlineno)
    if found and same_code(found, code):
        return True
    # compiled one top-level statement at a time, as IPython and Jupyter run a cell: CPython
    # compiles a call of a module's function (``np.log(x)``) otherwise where the import is in the
    # same unit of compilation
    alone = _compiled_statement(filename, text, code.co_firstlineno, flags)
    found = alone is not None and _code_at(alone, code.co_name, code.co_firstlineno)
    return bool(found) and same_code(found, code)


@functools.lru_cache(maxsize=64)
def _compiled_statement(filename: str, text: str, line: int, flags: int) -> Any:
    """The top-level statement of ``text`` that spans ``line``, compiled as a module of its own."""
    for stmt in _statements_around(filename, text, line) or []:
        if _first_line(stmt) <= line <= (stmt.end_lineno or stmt.lineno):
            try:
                return compile(
                    ast.Module(body=[stmt], type_ignores=[]),
                    filename,
                    "exec",
                    flags=flags,
                    dont_inherit=True,
                )
            except (SyntaxError, ValueError):
                return None
    return None


@functools.lru_cache(maxsize=64)
def _compiled_file(filename: str, text: str, flags: int) -> Any:
    try:
        return compile(text, filename, "exec", flags=flags, dont_inherit=True)
    except (SyntaxError, ValueError):
        return None


_FUTURE_FLAGS = 0
for _feature in ("annotations", "generator_stop"):
    _FUTURE_FLAGS |= getattr(__import__("__future__"), _feature).compiler_flag


def _code_at(code: Any, name: str, line: int) -> Any:
    """The code object named ``name`` starting at ``line`` among those nested in ``code``."""
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_name == name and const.co_firstlineno == line:
                return const
            found = _code_at(const, name, line)
            if found is not None:
                return found
    return None


def same_code(a: Any, b: Any) -> bool:
    """Whether two code objects run the same instructions on the same names and constants (wherever
    they are defined: a function read again from its file, or a helper's copy in an exported
    module)."""
    if a.co_code != b.co_code or a.co_names != b.co_names or a.co_varnames != b.co_varnames \
            or len(a.co_consts) != len(b.co_consts):
        return False
    for x, y in zip(a.co_consts, b.co_consts, strict=True):
        if isinstance(x, types.CodeType) and isinstance(y, types.CodeType):
            if not same_code(x, y):
                return False
        elif type(x) is not type(y) or (x != y and not (x != x and y != y)):  # NaN equals NaN here
            return False
    return True


@functools.lru_cache(maxsize=64)
def _parsed_file(filename: str, text: str) -> ast.Module | None:
    """The file parsed by ``ast`` (in C): a rule file of a thousand lines costs a few milliseconds.
    Only the lambdas asked for are made gast (:func:`_lambdas_at`)."""
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def _statements_around(filename: str, text: str, line: int) -> list[ast.stmt] | None:
    """The top-level statements of a file around ``line``: those of the lines from the last one that
    starts at column 0 (a statement's start) up to the next, parsed alone (a rule file's thousand
    lines cost milliseconds to parse; one statement, microseconds); the whole file's where that part
    does not parse, and ``None`` where neither does."""
    lines = text.splitlines(keepends=True)
    start, end = min(line, len(lines)) - 1, min(line, len(lines))
    while start > 0 and not _starts_statement(lines[start]):
        start -= 1
    # a decorated definition starts at its decorators
    while start > 0 and lines[start - 1].startswith("@"):
        start -= 1
    while end < len(lines) and (
        not _starts_statement(lines[end]) or lines[end - 1].startswith("@")
    ):
        end += 1
    # empty lines first, so that the nodes carry the file's line numbers (no walk to shift them)
    try:
        part = ast.parse("\n" * start + "".join(lines[start:end]))
    except SyntaxError:
        module = _parsed_file(filename, text)
        return module.body if module is not None else None
    return part.body


def _starts_statement(text: str) -> bool:
    return text[:1] not in ("", " ", "\t", "\n", "\r", "#", ")", "]", "}")


@functools.lru_cache(maxsize=1024)
def _lambdas_at(filename: str, text: str, line: int) -> list[gast.Lambda] | None:
    """The lambdas starting on ``line``, found in the top-level statements that span it."""
    around = _statements_around(filename, text, line)
    if around is None:
        return None
    return [to_gast(node) for node in _nodes_around(around, line)
            if isinstance(node, ast.Lambda) and node.lineno == line]


def _file_lambdas(filename: str, line: int) -> list[gast.Lambda] | None:
    """The lambdas written on ``line`` of ``filename``, found by parsing the statement around it (a
    lambda's own lines may not parse alone); ``None`` when the file cannot be read."""
    text = "".join(linecache.getlines(filename))
    return _lambdas_at(filename, text, line) if text else None


def _source_lines(fn: Callable[..., Any]) -> tuple[list[str], int]:
    if not inspect.isfunction(fn):
        raise SourceUnavailableError(
            f"{fn!r} is not a Python function, so ast_ad cannot read its source; "
            "differentiate a def or lambda, or register a rule with ast_ad.extend.defvjp")
    try:
        return inspect.getsourcelines(fn)
    except (OSError, TypeError) as exc:
        raise SourceUnavailableError(
            f"the source of {fn.__qualname__} is not available ({exc}): ast_ad reads a function's "
            "source, "
            "which Python keeps for files, IPython and Jupyter cells and the Python 3.13 prompt, "
            "but not for "
            "exec'd strings, `python -c` or older prompts; define it in a file, or register a rule "
            "with "
            "ast_ad.extend.defvjp"
        ) from None


def _parse_text(text: str, fn: Callable[..., Any]) -> gast.Module:
    try:
        module: gast.Module = to_gast(ast.parse(text))
        return module
    except SyntaxError:
        raise SourceUnavailableError(
            f"the source lines of {fn.__qualname__} do not parse on their own; "
            "write the function as a def on lines of its own") from None


def _find_lambda(lambdas: list[gast.Lambda], fn: Callable[..., Any], offset: int) -> gast.Lambda:
    """The lambda node among ``lambdas`` whose code is ``fn``'s (matched by arguments, then
    position)."""
    code = fn.__code__
    names = code.co_varnames[: code.co_argcount]
    found = [node for node in lambdas if tuple(arg.id for arg in node.args.args) == names
             and (offset or node.lineno == code.co_firstlineno)]
    if len(found) > 1:
        positions = {(line, col) for line, _, col, _ in code.co_positions() if line is not None}
        found = [node for node in found
                 if (node.body.lineno + offset, node.body.col_offset) in positions] or found[:1]
    if not found:
        raise SourceUnavailableError("could not find the lambda's source; write it as a def")
    return found[0]


def _lambda_as_def(node: gast.Lambda, fn: Callable[..., Any]) -> gast.FunctionDef:
    ret = gast.Return(value=node.body)
    gast.copy_location(ret, node.body)
    tree = gast.FunctionDef(name="lambda_", args=node.args, body=[ret], decorator_list=[],
                            returns=None, type_comment=None, type_params=[])
    return gast.copy_location(tree, node)


# ---- Python's ast to gast ------------------------------------------------------------------------
def to_gast(node: ast.AST) -> Any:
    """``gast.ast_to_gast(node)``, the same tree made in half the time: a function for each node
    class (gast's converter visits each node through a generic transformer and gast's keyword
    constructor, which was two thirds of parsing a long function). A class gast converts in its own
    way on this Python is left to it."""
    return _CONVERTERS[type(node)](node)


_GAST = gast_ast3.Ast3ToGAst()
# gast gives them ``type_params`` before 3.12
_TYPE_PARAMS = {"FunctionDef", "AsyncFunctionDef", "ClassDef"}


class _Converters(dict[type, Callable[[Any], Any]]):
    def __missing__(self, kind: type) -> Callable[[Any], Any]:
        converter = self[kind] = _converter(kind)
        return converter


def _converter(kind: type) -> Callable[[Any], Any]:
    name = kind.__name__
    target = getattr(gast, name, None)
    fields: tuple[str, ...] = getattr(kind, "_fields", ())
    extra = tuple(f for f in getattr(target, "_fields", ()) if f not in fields)
    own = hasattr(type(_GAST), f"visit_{name}") and name not in _TYPE_PARAMS
    if target is None or own or (extra and (name not in _TYPE_PARAMS or extra != ("type_params",))):
        visit: Callable[[Any], Any] = _GAST.visit  # (a name or a parameter has its own, below)
        return visit
    def convert(node: Any) -> Any:
        state = dict(node.__dict__)  # its fields and its location
        for field in fields:
            value = state.get(field)
            if isinstance(value, ast.AST):
                state[field] = _CONVERTERS[type(value)](value)
            elif type(value) is list:
                state[field] = [
                    _CONVERTERS[type(x)](x) if isinstance(x, ast.AST) else x for x in value
                ]
        for field in extra:
            state[field] = []
        return _new(target, state)
    return convert


def _new(kind: Any, state: dict[str, Any]) -> Any:
    node = kind.__new__(kind)
    node.__dict__.update(state)
    return node


_CONTEXTS = {ast.Load: gast.Load, ast.Store: gast.Store, ast.Del: gast.Del}


def _name(node: ast.Name) -> gast.Name:
    made: gast.Name = _new(gast.Name, node.__dict__)  # its id, context and location
    made.ctx = _new(_CONTEXTS[type(made.ctx)], {})
    made.annotation = made.type_comment = None
    return made


def _arg(node: ast.arg) -> gast.Name:
    made: gast.Name = _new(gast.Name, node.__dict__)  # its annotation, type comment and location
    made.id = node.arg
    del made.arg
    made.ctx = _new(gast.Param, {})
    if node.annotation is not None:
        made.annotation = _CONVERTERS[type(node.annotation)](node.annotation)
    return made


_CONVERTERS = _Converters({ast.Name: _name, ast.arg: _arg})
