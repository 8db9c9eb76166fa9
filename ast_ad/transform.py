"""The driver: the pipeline in one screen, and the cache in front of it.

    parse -> check -> normalize -> reverse -> emit -> load      (gradients, ``vjp``)
    parse -> check -> normalize -> forward -> emit -> load      (``jvp``)

Each stage takes a value and returns one; ``stages(fn)`` shows them all.
"""

from __future__ import annotations

import threading
from typing import Any

from ast_ad import ir
from ast_ad.check import check
from ast_ad.emit import emit, emit_forward, emit_jvp
from ast_ad.forward import Tangent, forward
from ast_ad.load import Loaded, load
from ast_ad.normalize import normalize
from ast_ad.parse import Source, parse
from ast_ad.reverse import Adjoint, reverse

_lock = threading.RLock()
_adjoints: dict[tuple[Any, tuple[int, ...], tuple[int, ...]], Adjoint] = {}
_loaded: dict[tuple[Any, ...], Loaded] = {}
_tangents: dict[tuple[Any, tuple[int, ...], tuple[int, ...]], Tangent] = {}


def normalized(fn: Any) -> ir.Function:
    """parse -> check -> normalize."""
    source = parse(fn)
    check(source.tree, _locator(source))
    return normalize(source)


def adjoint(fn: Any, argnums: tuple[int, ...], shapes: tuple[int, ...]) -> Adjoint:
    """parse -> check -> normalize -> reverse, cached per function, argnums and parameter shapes.

    A function that calls itself (directly or through others) gets the adjoint
    under construction: its generated ``_fwd``/``_bwd`` pair calls itself too.
    """
    key = (fn, argnums, shapes)
    with _lock:
        if key in _adjoints:
            return _adjoints[key]
        function = normalized(fn)
        shell = Adjoint(function, argnums, [], [], None, "", [], None)
        _adjoints[key] = shell
        try:
            return reverse(function, argnums, shapes, adjoint, shell)
        except BaseException:
            _adjoints.pop(key, None)
            raise


def gradient(fn: Any, argnums: tuple[int, ...], single: bool, shapes: tuple[int, ...]) -> Loaded:
    """The loaded gradient function, transformed again when a function or module it reads has changed."""
    key = (fn, argnums, single, shapes)
    loaded = _loaded.get(key)
    if loaded is not None and loaded.refresh():
        return loaded
    with _lock:
        if loaded is not None:
            _adjoints.clear()
        emitted = emit(adjoint(fn, argnums, shapes), single)
        loaded = load(emitted.text, emitted.entry, emitted.namespace, emitted.bindings, emitted.files)
        loaded.refresh()
        _loaded[key] = loaded
        return loaded


def tangent(fn: Any, argnums: tuple[int, ...], shapes: tuple[int, ...]) -> Tangent:
    """parse -> check -> normalize -> forward, cached per function, argnums and parameter shapes."""
    key = (fn, argnums, shapes)
    with _lock:
        if key in _tangents:
            return _tangents[key]
        function = normalized(fn)
        shell = Tangent(function, argnums, [], [], None)
        _tangents[key] = shell
        try:
            return forward(function, argnums, shapes, tangent, shell)
        except BaseException:
            _tangents.pop(key, None)
            raise


def jvp_function(fn: Any, argnums: tuple[int, ...], shapes: tuple[int, ...]) -> Loaded:
    """The loaded forward-mode function ``f_jvp(*args, *tangents) -> (out, out_dot)``."""
    key = ("jvp", fn, argnums, shapes)
    loaded = _loaded.get(key)
    if loaded is not None and loaded.refresh():
        return loaded
    with _lock:
        if loaded is not None:
            _tangents.clear()
        emitted = emit_jvp(tangent(fn, argnums, shapes))
        loaded = load(emitted.text, emitted.entry, emitted.namespace, emitted.bindings, emitted.files)
        loaded.refresh()
        _loaded[key] = loaded
        return loaded


def forward_source(fn: Any) -> str:
    """The normalized form of ``fn``, as Python."""
    return emit_forward(normalized(fn))


def _locator(source: Source) -> Any:
    return lambda node: (source.filename, source.lineno(node), source.line(node))
