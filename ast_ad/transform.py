"""The driver: the pipeline in one screen, and the cache in front of it.

    parse -> check -> normalize -> reverse -> emit -> load      (gradients, ``vjp``)
    parse -> check -> normalize -> forward -> emit -> load      (``jvp``)

Each stage takes a value and returns one (``forward`` an ``ir.Function`` for an ``ir.Function``);
``ast_ad.source(f, stage="normalized")`` prints the IR, ``stage="jvp"`` forward mode's code.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Iterator
from typing import Any

from ast_ad.backend import store
from ast_ad.backend.emit import emit_forward, emit_units
from ast_ad.backend.load import Loaded, load, watch_code
from ast_ad.core import logs
from ast_ad.frontend.check import check_source
from ast_ad.frontend.lower_calls import FOREIGN_READS, INLINED
from ast_ad.frontend.normalize import normalize
from ast_ad.frontend.parse import parse
from ast_ad.ir import nodes as ir
from ast_ad.ir.syntax import RefTable
from ast_ad.modes.adjoint import Adjoint
from ast_ad.modes.batch import stacked_tangent
from ast_ad.modes.forward import Tangent, forward, jvp_units, tangent_only
from ast_ad.modes.reverse import reverse
from ast_ad.modes.reverse_code import gradient_units, pair_units

SLOW_SECONDS = 1.0  # a first transform slower than this says so, once, at the WARNING level
_lock = threading.RLock()
_adjoints: dict[tuple[Any, ...], Adjoint] = {}
_loaded: dict[tuple[Any, ...], Loaded] = {}
_tangents: dict[tuple[Any, ...], Tangent] = {}
# modules transformed, written to and read from the disk cache
counts = {"built": 0, "stored": 0, "fetched": 0}
# How many builds are under way (one inside another where a function's code calls a transformation).
# The derivations (``_adjoints``, ``_tangents``: IR and syntax trees, a hundred thousand objects for
# a function of a thousand lines) serve the builds under way, a function that calls itself among
# them; once the outermost is loaded they go, before the cycle collector runs again (its first pass
# over them was 5% of the transform).
_building = [0]


def normalized(fn: Any) -> ir.Function:
    """parse -> check -> normalize."""
    source = parse(fn)
    check_source(source)
    return normalize(source)


def adjoint(fn: Any, argnums: tuple[int, ...], shapes: tuple[int, ...], in_place: bool = True,
            checkpoints: int | str | None = None,
            lengths: tuple[tuple[int, ...] | None, ...] | None = None) -> Adjoint:
    """parse -> check -> normalize -> reverse, cached (while a build is under way: ``_building``)
    per function, argnums, parameter shapes, whether its loops write arrays in place (``reverse``'s
    ``in_place``: not for callees) and how many snapshots its checkpointed loops keep (``reverse``'s
    ``checkpoints``: its callees' too).

    A function that calls itself (directly or through others) gets the adjoint
    under construction: its generated ``_fwd``/``_bwd`` pair calls itself too.
    """
    key = (fn, argnums, shapes, in_place, checkpoints) + ((lengths,) if lengths else ())
    with _lock:
        if key in _adjoints:
            return _adjoints[key]
        function = normalized(fn)
        shell = Adjoint(function, argnums, [], [], None, "", [], RefTable())
        _adjoints[key] = shell
        try:
            return reverse(function, argnums, shapes, CALLEES, shell, in_place, checkpoints,
                           lengths)
        except BaseException:
            _adjoints.pop(key, None)
            raise


class _Callees:
    """Reverse mode's view of the driver (``modes.adjoint.Derive``): a callee's adjoint and its
    IR."""

    def __call__(self, fn: Any, argnums: tuple[int, ...], shapes: tuple[int, ...], in_place: bool,
                 checkpoints: int | str | None) -> Adjoint:
        return adjoint(fn, argnums, shapes, in_place, checkpoints)

    def normalized(self, fn: Any) -> ir.Function:
        return normalized(fn)


CALLEES = _Callees()


def gradient_key(fn: Any, argnums: tuple[int, ...], single: bool, shapes: tuple[int, ...],
                 checkpoints: int | str | None = None,
                 typed: tuple[tuple[int, ...] | None, ...] | None = None) -> tuple[Any, ...]:
    """What :func:`gradient` caches its module under (``shapes`` fourth)."""
    key = (fn, argnums, single, shapes, checkpoints)
    return (*key, "typed", typed) if typed is not None else key


def gradient(fn: Any, argnums: tuple[int, ...], single: bool, shapes: tuple[int, ...],
             checkpoints: int | str | None = None,
             typed: tuple[tuple[int, ...] | None, ...] | None = None) -> Loaded:
    """The loaded gradient function, transformed again when a function or module it reads has
    changed. ``typed``: made for Numba (``jit="numba"``), for arguments of these shapes alone
    (``None`` for a number; its call checks them), each name one type wherever it is bound
    (``reverse_code._typed``)."""
    return _built(
        gradient_key(fn, argnums, single, shapes, checkpoints, typed),
        fn,
        "gradient",
        "parse, normalize, reverse",
        lambda: adjoint(fn, argnums, shapes, checkpoints=checkpoints, lengths=typed),
        lambda derived: emit_units(gradient_units(derived, single, typed is not None)),
        _adjoints,
    )


def _built(key: Any, fn: Any, what: str, derivation: str, derive: Any, emit_: Any,
           derived_cache: dict[Any, Any]) -> Loaded:
    """The loaded module for ``key``: cached, and built again (its derivations too) when what it
    reads changed."""
    loaded = _loaded.get(key)
    if loaded is not None and loaded.refresh():
        return loaded
    with _lock:
        if loaded is not None:
            derived_cache.clear()
        stored = store.key(fn, tuple("<fn>" if part is fn else part for part in key))
        found = store.fetch(stored, fn) if stored is not None else None
        if found is not None and found.refresh():
            logs.info(
                "%s of %s: read from the cache (%s)", what, _name(fn), found.fn.__code__.co_filename
            )
            counts["fetched"] += 1
            watch_code(found, fn)
            _keep(key, found)
            return found
        clock = _Clock(fn, what)
        with _no_cycle_collection():
            _building[0] += 1
            try:
                derived = clock.stage(derivation, derive)
                emitted = clock.stage("emit", lambda: emit_(derived))
                built: Loaded = clock.stage(
                    "compile",
                    lambda: load(
                        emitted.text,
                        emitted.entry,
                        emitted.namespace,
                        emitted.bindings,
                        emitted.files,
                    ),
                )
            finally:
                _building[0] -= 1
            # the outermost build: what it derived is printed, loaded and dropped
            if not _building[0]:
                del derived
                _adjoints.clear()
                _tangents.clear()
        clock.report(emitted.text)
        built.refresh()
        counts["built"] += 1
        # a derivative that wrote a function's body in place is not stored: another process could
        # not tell that function changed (the key holds the derived function's own code alone)
        inlined = tuple(dict.fromkeys(h for f in emitted.functions
                                      for h in INLINED.get((f, getattr(f, "__code__", None)), ())))
        if stored is not None and not inlined and store.save(stored, emitted, built):
            counts["stored"] += 1
        # (and the globals of other modules that inlined helpers read: stale once one changes)
        built.same += tuple(read for f in emitted.functions
                            for read in FOREIGN_READS.get((f, getattr(f, "__code__", None)), ()))
        watch_code(built, fn, inlined)
        _keep(key, built)
        return built


def forget() -> None:
    """Empty the caches of this process: the next call reads the persistent cache or transforms
    again."""
    for loaded in _loaded.values():
        loaded.replaced = True
    _loaded.clear()
    _adjoints.clear()
    _tangents.clear()


def _keep(key: Any, loaded: Loaded) -> None:
    """Cache ``loaded`` under ``key``; the module it replaces is marked so (``current`` reads
    that)."""
    old = _loaded.get(key)
    if old is not None:
        old.replaced = True
    _loaded[key] = loaded


def pair(fn: Any, argnums: tuple[int, ...], shapes: tuple[int, ...],
         checkpoints: int | str | None = None) -> tuple[Any, Any, Loaded]:
    """The loaded ``(f_fwd, f_bwd)``: ``f_fwd(*args) -> (out, saved)``, ``f_bwd(saved, out_bar) ->
    adjoints``."""
    loaded = _built(
        ("pair", fn, argnums, shapes, checkpoints),
        fn,
        "vjp",
        "parse, normalize, reverse",
        lambda: adjoint(fn, argnums, shapes, checkpoints=checkpoints),
        lambda derived: emit_units(pair_units(derived)),
        _adjoints,
    )
    bwd = loaded.fn
    fwd = loaded.namespace[list(loaded.files)[-2]]  # the pair is printed fwd, then bwd
    return fwd, bwd, loaded


def tangent(fn: Any, argnums: tuple[int, ...], shapes: tuple[int, ...],
            needed: tuple[bool, ...] | None = None) -> Tangent:
    """parse -> check -> normalize -> forward, cached (while a build is under way) per function,
    argnums, parameter shapes and the parts of the result whose tangents are read (``forward``'s
    ``needed``)."""
    key = (fn, argnums, shapes, needed)
    with _lock:
        if key in _tangents:
            return _tangents[key]
        function = normalized(fn)
        shell = Tangent(function, argnums)
        _tangents[key] = shell
        try:
            return forward(function, argnums, shapes, TANGENTS, shell, needed)
        except BaseException:
            _tangents.pop(key, None)
            raise


class _Tangents:
    """Forward mode's view of the driver (``modes.forward.Derive``): a callee's forward-mode code,
    and its IR (what its result is, for the caller's facts: ``activity.callee_results``)."""

    def __call__(self, fn: Any, argnums: tuple[int, ...], shapes: tuple[int, ...],
                 needed: tuple[bool, ...] | None = None) -> Tangent:
        return tangent(fn, argnums, shapes, needed)

    def normalized(self, fn: Any) -> ir.Function:
        return normalized(fn)


TANGENTS = _Tangents()


def jvp_key(fn: Any, argnums: tuple[int, ...], shapes: tuple[int, ...],
            needed: tuple[bool, ...] | None = None,
            tangent_alone: bool = False) -> tuple[Any, ...]:
    """What :func:`jvp_function` caches its module under."""
    return ("jvp tangent" if tangent_alone else "jvp", fn, argnums, shapes, needed)


def jvp_function(fn: Any, argnums: tuple[int, ...], shapes: tuple[int, ...],
                 needed: tuple[bool, ...] | None = None, tangent_alone: bool = False) -> Loaded:
    """The loaded forward-mode function ``f_jvp(*args, *tangents) -> (out, out_dot)``;
    ``tangent_alone``: ``-> out_dot``, without what only ``out`` needs (``forward.tangent_only``,
    for a caller that has computed ``out`` at these arguments)."""
    return _built(
        jvp_key(fn, argnums, shapes, needed, tangent_alone),
        fn,
        "forward mode",
        "parse, normalize, forward" + (", tangent alone" if tangent_alone else ""),
        (lambda: tangent_only(tangent(fn, argnums, shapes, needed))) if tangent_alone
        else lambda: tangent(fn, argnums, shapes, needed),
        lambda derived: emit_units(jvp_units(derived)),
        _tangents,
    )


def stacked_jvp_function(fn: Any, argnums: tuple[int, ...], shapes: tuple[int, ...],
                         needed: tuple[bool, ...] | None = None, units: bool = False) -> Loaded:
    """The loaded forward-mode function for a stack of tangents (``modes.batch``): ``f_jvp(*args,
    *stacks)`` with each tangent argument ``B`` tangents on a leading axis; its result's tangents
    are ``runtime.batched.Batch``es. Raises ``modes.batch.NotStacked`` where the code cannot be
    written so. ``units``: written for seeds that are unit vectors (a dense Jacobian's columns),
    which it checks when it starts."""
    return _built(
        ("jvp stacked", fn, argnums, shapes, needed) + (("units",) if units else ()),
        fn,
        "forward mode for stacked tangents",
        "parse, normalize, forward, stack",
        lambda: stacked_tangent(tangent(fn, argnums, shapes, needed), units=units),
        lambda derived: emit_units(jvp_units(derived)),
        _tangents,
    )


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """The cycle collector paused while a transform runs (and resumed if it was on): the transform
    makes and drops many small objects, and the collector's passes over all of them were a quarter
    of a long function's transform (a 1,000-line function: 0.95 s with them, 0.68 s without). Other
    threads run without it for as long; what the transform leaves in cycles is collected after."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


class _Clock:
    """Times the stages of one transformation; logs each at INFO, and a slow whole once at
    WARNING."""

    def __init__(self, fn: Any, what: str):
        self.fn, self.what = fn, what
        self.times: dict[str, float] = {}

    def stage(self, name: str, run: Any) -> Any:
        start = time.perf_counter()
        result = run()
        self.times[name] = time.perf_counter() - start
        logs.info("%s of %s: %s took %.3f s", self.what, _name(self.fn), name, self.times[name])
        return result

    def report(self, text: str) -> None:
        total = sum(self.times.values())
        if total > SLOW_SECONDS:
            slowest = max(self.times, key=self.times.__getitem__)
            logs.warning(
                "the %s of %s took %.1f s to generate (%d lines of code, most of it in %s); this "
                "happens once per function and argument kinds, later calls reuse it",
                self.what,
                _name(self.fn),
                total,
                text.count("\n"),
                slowest,
            )


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


def forward_source(fn: Any) -> str:
    """The normalized form of ``fn``, as Python."""
    return emit_forward(normalized(fn))

