"""Print a Python ``ast`` tree as source: astor where it works, the standard library's
``ast.unparse`` where not.

Generated functions are printed from their gast trees by ``writer`` ("own", the default), in astor's
layout; ``AST_AD_PRINTER=astor`` or ``unparse`` prints them through Python's ``ast`` by astor or
``ast.unparse`` instead (the tests compare the three).

astor 0.8.1 (its last release) refers to ``ast.Num`` and the other node classes that Python 3.14
removed, and warns on 3.13 when imported. ast_ad imports it lazily, with those warnings silenced,
and falls back to ``ast.unparse`` where it cannot be imported. Both print the same program; astor's
layout is the one the golden files record. Neither splits a statement across lines.

>>> import ast
>>> to_source(ast.parse("y = x*2"), printer="unparse")
'y = x * 2\\n'

``AST_AD_PRINTER=unparse`` (or ``astor``) forces one, so the fallback is tested on every Python.
"""

from __future__ import annotations

import ast
import functools
import os
import warnings
from typing import Any

PRINTERS = ("own", "astor", "unparse")


@functools.cache
def _astor() -> Any:
    """The astor module, or ``None`` where it cannot be imported (Python 3.14)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import astor
        except (ImportError, AttributeError):
            return None
    return astor


def chosen() -> str:
    """The printer of generated functions: ``AST_AD_PRINTER`` if set, else ``own`` (``writer``)."""
    forced = os.environ.get("AST_AD_PRINTER", "")
    return forced if forced in PRINTERS else "own"


def to_source(tree: ast.AST, printer: str | None = None) -> str:
    """``tree`` as Python source, ending in a newline: astor where it imports (and ``printer`` is
    not ``unparse``), else ``ast.unparse``."""
    printer = printer or chosen()
    if printer != "unparse" and _astor() is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            # astor's own line splitting leaves a lone ``)`` on a line of its own: keep each
            # statement whole
            text: str = _astor().to_source(tree, pretty_source="".join)
            return text
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"
