"""Stage 2, check: the fence. Refuse every construct outside the language ast_ad differentiates.

>>> import gast
>>> text = "def f(x):\\n    try:\\n        return x\\n    except ValueError:\\n        return 0.0"
>>> tree = gast.parse(text).body[0]
>>> try:
...     check(tree, lambda node: ("f.py", node.lineno, "    try:"))
... except SyntaxError as err:
...     print(err.lineno, err.msg.split(':')[0])
2 try/except is not supported

The language is Python over numbers, arrays and lists of them: assignments (plain, tuple and
augmented), calls, operators, attribute reads, subscripts, constants, ``if``/``elif``/``else``,
conditional expressions, ``for`` and ``while`` (with ``break``, ``continue``, ``else``), ``return``
anywhere, nested functions and lambdas, comprehensions, ``raise``, ``with np.errstate(...)``, and
statements that touch no gradient (``print``, ``assert``, ``pass``). Each refusal is an
:class:`UnsupportedSyntaxError` at the user's line, with a hint of what to
write instead.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import gast

from ast_ad.errors import UnsupportedSyntaxError
from ast_ad.ir import syntax

Locate = Callable[[gast.AST], tuple[str, int, str]]
COMPLEX_HINT = (
    "np.emath (scimath) and long doubles are not supported: their results are complex or real "
    "depending on the values, which ast_ad cannot follow (scipy.fft has no rules yet); write the "
    "complex computation with 1j, complex(...), cmath or np.fft"
)


WITH_HINT = ("with blocks are supported for np.errstate(...) only: open resources outside the "
             "differentiated function")
REFUSED: dict[type, str] = {
    gast.AsyncFunctionDef: "async functions cannot be differentiated: write a plain def",
    gast.ClassDef: "class definitions inside a differentiated function are not supported: "
    "define the class at module level",
    gast.Try: "try/except is not supported: handle errors outside the differentiated function",
    gast.AsyncWith: "async with is not supported: differentiate plain synchronous code",
    gast.AsyncFor: "async for is not supported: differentiate plain synchronous code",
    gast.Yield: "yield is not supported: generators cannot be differentiated; return a value",
    gast.YieldFrom: "yield from is not supported: generators cannot be differentiated; return a "
                    "value",
    gast.Await: "await is not supported: differentiate plain synchronous code",
    gast.Global: "global statements are not supported: pass the value in as an argument and return "
                 "it",
    gast.Nonlocal: "nonlocal statements are not supported: pass the value in as an argument and "
                   "return it",
    gast.NamedExpr: "assignment expressions (:=) are not supported: assign on a line of its own",
    gast.Import: "import inside a differentiated function is not supported: import at module level",
    gast.ImportFrom: "import inside a differentiated function is not supported: import at module "
                     "level",
}
if hasattr(gast, "Match"):
    REFUSED[gast.Match] = "match statements are not supported: write if/elif/else"


def check(tree: gast.FunctionDef, locate: Locate) -> gast.FunctionDef:
    """Return ``tree`` unchanged if it is inside the language; raise at the first construct that is
    not."""
    if isinstance(tree, gast.AsyncFunctionDef):
        raise refuse(tree, REFUSED[gast.AsyncFunctionDef], locate)
    _check_arguments(tree.args, locate)
    for statement in tree.body:
        for node in syntax.walk(statement):
            hint = REFUSED.get(type(node))
            if hint is not None:
                raise refuse(node, hint, locate)
            if isinstance(node, gast.Starred) and not isinstance(node.ctx, gast.Store):
                raise refuse(node, _starred(statement, node), locate)
            if isinstance(node, gast.Raise) and node.exc is None:
                raise refuse(
                    node,
                    "a bare raise re-raises an exception being handled, and try/except is not "
                    "supported: raise an exception by name (raise ValueError(...))",
                    locate,
                )
            if isinstance(node, gast.keyword) and node.arg is None:
                raise refuse(
                    node.value,
                    "**kwargs in a call is not supported: pass each keyword explicitly",
                    locate,
                )
    return tree


def _starred(statement: gast.stmt, node: gast.Starred) -> str:
    """What to write instead of ``*xs`` where it is read: in a call's arguments, or in a list or
    tuple."""
    in_call = any(
        isinstance(n, gast.Call) and any(a is node for a in n.args) for n in syntax.walk(statement)
    )
    if in_call:
        return "star-arguments (f(*args)) are not supported: pass each argument explicitly"
    return "unpacking with * in a list or tuple ([*xs, y]) is not supported: join them (xs + [y])"


def check_source(source: Any) -> None:
    """``check`` of a parsed function (a ``parse.Source``). A decorator's wrapper
    (``functools.wraps``) is checked as itself, since it is what runs; where it is outside the
    language, the error says so."""
    try:
        check(source.tree, source.where)
    except UnsupportedSyntaxError as exc:
        wrapped = getattr(source.fn, "__wrapped__", None)
        if wrapped is None or not inspect.isfunction(source.fn):
            raise
        name = getattr(wrapped, "__qualname__", "the function")
        raise UnsupportedSyntaxError(
            f"{exc.msg}. This is a decorator's wrapper of {name}: ast_ad differentiates what "
            "Python runs, the "
            "wrapper included; write the wrapper with named parameters, or differentiate "
            f"{name}.__wrapped__ "
            "where the decorator leaves the value as it is",
            exc.filename or "",
            exc.lineno or 0,
            exc.offset or 0,
            exc.text or "",
        ) from None


def _check_arguments(args: gast.arguments, locate: Locate) -> None:
    for star in (args.vararg, args.kwarg):
        if star is not None:
            raise refuse(star, "functions with *args or **kwargs cannot be differentiated: name "
                               "every parameter", locate)


def refuse(node: gast.AST, hint: str, locate: Locate) -> UnsupportedSyntaxError:
    """An :class:`UnsupportedSyntaxError` pointing at ``node``."""
    filename, lineno, text = locate(node)
    return UnsupportedSyntaxError(hint, filename, lineno, getattr(node, "col_offset", 0) + 1, text)
