"""Calls with floats only, fast: a function written for the number of arguments, checks and results.

A gradient of scalars runs in a microsecond or two (a few hundred nanoseconds compiled by Numba), so
the checks around it (is every argument a float, is the generated module still current, is every
result a float) cost as much as the work. Where the last call had floats only, ``Gradient`` and
``jvp`` call a function made here for that module, which does those checks inline, without loops,
and calls it; anything else (an array, a changed global) gives ``NOT_SCALARS``, and the general path
runs. For ``grad(f, (0, 1))`` of a function of two floats, reading one global::

    def scalars(a0, a1):
        if (type(a0) is float or type(a0) is FLOAT64) \
                and (type(a1) is float or type(a1) is FLOAT64) \
                and scope0.get(name0, MISSING) is value0 and not loaded.replaced \
                and (not others or loaded.refresh()):
            last[0] = shapes
            out, grads = run(a0, a1)
            if type(out) is float or type(out) is FLOAT64:
                g0, g1 = grads
                if (type(g0) is float or type(g0) is FLOAT64) \
                        and (type(g1) is float or type(g1) is FLOAT64):
                    return (float(g0), float(g1))
            return Unshaped(out, grads)
        return NOT_SCALARS

The text is written once for each such shape of call, and compiled once (``_factory``); each
module's function is then a closure over its own objects. Calls with floats and numpy arrays get the
same: ``array_caller`` for a gradient, and ``layout_caller`` for forward mode (``jvp`` of a function
or of a gradient, a Hessian-vector product inside generated code) and for the checks of the rules of
derivatives that generated code calls, each argument's kind, shape and dtype checked inline.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ast_ad.backend.load import MISSING
from ast_ad.core.records import record

if TYPE_CHECKING:
    from ast_ad.backend.load import Loaded

NOT_SCALARS = object()  # what a scalar call gives where its checks fail: the general path runs
FLOAT64 = np.float64
ARRAY = np.ndarray


@record
class Unshaped:
    """What a gradient's scalar call gives where the generated code gave no floats: shaped by the
    general path."""

    out: Any
    grads: Any


_FACTORIES: dict[tuple[Any, ...], Callable[..., Any]] = {}


def scalar_caller(
    loaded: Loaded,
    labels: tuple[int, ...],
    last: list[Any],
    nparams: int,
    ngrads: int | None,
    with_value: bool,
    run: Callable[..., Any] | None = None,
) -> Callable[..., Any]:
    """The call of a gradient's generated code ``loaded`` on ``nparams`` floats, giving the gradient
    as ``Gradient`` does (``ngrads`` floats in a tuple, or one where ``None``; with the value first
    if ``with_value``); ``NOT_SCALARS`` where an argument is no float or ``loaded`` is no longer
    current (one of the globals it reads changed: ``Loaded.refresh``), and an ``Unshaped`` result
    where the code gave no floats. It records ``labels`` as the gradient's last call (``last``), as
    the general path does. ``run``: what runs the code, if not its Python function (the function
    Numba compiled: ``jit="numba"``)."""
    return _made(("grad", nparams, len(loaded.same), ngrads, with_value), loaded, labels, last, run)


def jvp_caller(loaded: Loaded, nparams: int) -> Callable[..., Any]:
    """The call of forward-mode code ``loaded`` on ``nparams`` Python floats and as many float
    tangents, giving ``(out, out_dot)``, or ``NOT_SCALARS`` where one is no float or ``loaded`` is
    no longer current."""
    return _made(("jvp", nparams, len(loaded.same), None, False), loaded, (), [None])


def _made(key: tuple[Any, ...], loaded: Loaded, labels: tuple[int, ...], last: list[Any],
          run: Callable[..., Any] | None = None) -> Callable[..., Any]:
    factory = _FACTORIES.get(key)
    if factory is None:
        factory = _FACTORIES[key] = _factory(*key)
    guards = [part for guard in loaded.same for part in guard]
    made: Callable[..., Any] = factory(
        loaded, run or loaded.fn, loaded.others, labels, last, *guards
    )
    return made


def _factory(
    kind: str, nparams: int, nguards: int, ngrads: int | None, with_value: bool
) -> Callable[..., Any]:
    """The function that makes a module's scalar call, for calls of this shape: its text written,
    compiled."""
    nargs = 2 * nparams if kind == "jvp" else nparams
    args = ", ".join(f"a{k}" for k in range(nargs))
    # jvp's tangents and primals are Python floats (its general path makes numpy's floats arrays of
    # no axes)
    tests = [
        f"type(a{k}) is float"
        if kind == "jvp"
        else f"(type(a{k}) is float or type(a{k}) is FLOAT64)"
        for k in range(nargs)
    ]
    tests += [f"scope{k}.get(name{k}, MISSING) is value{k}" for k in range(nguards)]
    tests += ["not loaded.replaced", "(not others or loaded.refresh())"]
    guards = "".join(f", scope{k}, name{k}, value{k}" for k in range(nguards))
    lines = [f"def factory(loaded, run, others, shapes, last{guards}):",
             f"    def scalars({args}):",
             f"        if {' and '.join(tests)}:"]
    if kind == "jvp":
        lines.append(f"            return run({args})")
    else:
        if ngrads is None:
            grads, floats, result = (
                "",
                "(type(grads) is float or type(grads) is FLOAT64)",
                "float(grads)",
            )
        else:
            names = [f"g{k}" for k in range(ngrads)]
            grads = ", ".join(names) + ("," if ngrads == 1 else "")
            floats = " and ".join(f"(type({g}) is float or type({g}) is FLOAT64)" for g in names)
            result = (
                "(" + ", ".join(f"float({g})" for g in names) + ("," if ngrads == 1 else "") + ")"
            )
        lines += ["            last[0] = shapes",
                  f"            out, grads = run({args})",
                  "            if type(out) is float or type(out) is FLOAT64:",
                  *([f"                {grads} = grads"] if grads else []),
                  f"                if {floats}:",
                  f"                    return {f'(out, {result})' if with_value else result}",
                  "            return Unshaped(out, grads)"]
    lines += ["        return NOT_SCALARS",
              "    return scalars"]
    return _compiled(lines, f"<ast_ad scalar {kind}>")


def _compiled(lines: list[str], name: str) -> Callable[..., Any]:
    """The ``factory`` the text ``lines`` defines (written here, never from input), compiled with
    the names the calls read."""
    scope: dict[str, Any] = {
        "ARRAY": ARRAY,
        "FLOAT64": FLOAT64,
        "MISSING": MISSING,
        "Unshaped": Unshaped,
        "NOT_SCALARS": NOT_SCALARS,
    }
    exec(compile("\n".join(lines) + "\n", name, "exec"), scope)  # noqa: S102 (written above)
    factory: Callable[..., Any] = scope["factory"]
    return factory



def array_caller(
    loaded: Loaded,
    labels: tuple[int, ...],
    last: list[Any],
    args: tuple[Any, ...],
    positions: tuple[int, ...],
    single: bool,
    with_value: bool,
    run: Callable[..., Any] | None = None,
) -> Callable[..., Any]:
    """The call of a gradient's generated code ``loaded`` on arguments like ``args`` (each a float,
    or a numpy array of one shape and dtype), as ``scalar_caller`` makes for floats: the checks
    inline (each argument of its kind, shape and dtype, so that the code made for ``labels`` is the
    code the general path would choose; the module still current), and the gradients given as
    ``Gradient`` gives them where each is already what its shaping would give back unchanged (a
    float for a float; for an array, a new array of its shape and dtype that no other gradient is),
    else an ``Unshaped`` result for the general path to shape; ``NOT_SCALARS`` where a check
    fails."""
    spec = "".join("a" if type(a) is ARRAY else "f" for a in args)
    key = ("arrays", spec, len(loaded.same), positions, single, with_value)
    factory = _FACTORIES.get(key)
    if factory is None:
        factory = _FACTORIES[key] = _array_factory(*key)
    guards = [part for guard in loaded.same for part in guard]
    layouts = [part for a in args if type(a) is ARRAY for part in (a.shape, a.dtype)]
    made: Callable[..., Any] = factory(
        loaded, run or loaded.fn, loaded.others, labels, last, *layouts, *guards
    )
    return made


def _array_factory(kind: str, spec: str, nguards: int, positions: tuple[int, ...], single: bool,
                   with_value: bool) -> Callable[..., Any]:
    """The function that makes a module's call on floats and arrays, for calls of this shape: its
    text written, compiled."""
    args = ", ".join(f"a{k}" for k in range(len(spec)))
    tests = [
        f"type(a{k}) is ARRAY and a{k}.shape == shape{k} and a{k}.dtype is dtype{k}"
        if s == "a" else f"(type(a{k}) is float or type(a{k}) is FLOAT64)"
        for k, s in enumerate(spec)
    ]
    tests += [f"scope{k}.get(name{k}, MISSING) is value{k}" for k in range(nguards)]
    tests += ["not loaded.replaced", "(not others or loaded.refresh())"]
    names = [f"g{j}" for j in range(len(positions))]
    done = []
    for j, (g, k) in enumerate(zip(names, positions, strict=True)):
        if spec[k] == "a":
            apart = "".join(f" and {g} is not {h}" for h in names[:j])
            done.append(f"type({g}) is ARRAY and {g}.shape == shape{k} and {g}.dtype is dtype{k}"
                        f" and {g}.base is None and {g}.flags.writeable{apart}")
        else:
            done.append(f"(type({g}) is float or type({g}) is FLOAT64)")
    shaped = [g if spec[k] == "a" else f"float({g})"
              for g, k in zip(names, positions, strict=True)]
    result = shaped[0] if single else "(" + ", ".join(shaped) + ("," if len(shaped) == 1 else "") \
        + ")"
    layouts = "".join(f", shape{k}, dtype{k}" for k, s in enumerate(spec) if s == "a")
    guards = "".join(f", scope{k}, name{k}, value{k}" for k in range(nguards))
    unpack = names[0] if single else ", ".join(names) + ("," if len(names) == 1 else "")
    lines = [f"def factory(loaded, run, others, shapes, last{layouts}{guards}):",
             f"    def arrays({args}):",
             f"        if {' and '.join(tests)}:",
             "            last[0] = shapes",
             f"            out, grads = run({args})",
             "            if type(out) is float or type(out) is FLOAT64:",
             f"                {unpack} = grads",
             f"                if {' and '.join(done)}:",
             f"                    return {f'(out, {result})' if with_value else result}",
             "            return Unshaped(out, grads)",
             "        return NOT_SCALARS",
             "    return arrays"]
    return _compiled(lines, f"<ast_ad {kind} call>")


def layout_caller(
    layout: tuple[Any, ...], modules: tuple[Loaded, ...], run: Callable[..., Any] | None,
    seeds: int = 0
) -> Callable[[tuple[Any, ...], tuple[Any, ...]], Any]:
    """A check of a call ``(primals, tangents)`` (two tuples) against ``layout`` (for each argument
    ``(shape, dtype, moving)`` of a numpy array, ``(None, None, moving)`` of a float: ``directional
    ._layout``) and of ``modules`` still current, inline (in their order: a module made from
    another's code reads its data globals from that one's namespace, which ``Loaded.refresh`` reads
    again, so the one it was made from comes first): where both hold, ``run(*primals, 1.0
    ... (seeds of them), *moving tangents)`` (``True`` where ``run`` is ``None``); else
    ``NOT_SCALARS``. Forward mode over a function, or over a gradient's code (whose seed follows
    the arguments), called as last time runs this way: for two arrays ``x`` (moving) and a float::

        def direct(primals, tangents):
            if len(primals) == 2 and len(tangents) == 2:
                a0, a1 = primals
                t0, t1 = tangents
                if type(a0) is ARRAY and a0.shape == shape0 and a0.dtype is dtype0 \\
                        and type(t0) is ARRAY and t0.shape == shape0 and t0.dtype is dtype0 \\
                        and (type(a1) is float or type(a1) is FLOAT64) and t1 is None \\
                        and (the modules current):
                    return run(a0, a1, t0)
            return NOT_SCALARS
    """
    spec = "".join(("a" if shape is not None else "f") + ("m" if moving else "s")
                   for shape, _, moving in layout)
    nguards = tuple(len(m.same) for m in modules)
    key = ("layout", spec, nguards, run is None, seeds)
    factory = _FACTORIES.get(key)
    if factory is None:
        factory = _FACTORIES[key] = _layout_factory(spec, nguards, run is None, seeds)
    shapes = [part for shape, dtype, _ in layout if shape is not None for part in (shape, dtype)]
    guards = [part for m in modules for guard in m.same for part in guard]
    made: Callable[[tuple[Any, ...], tuple[Any, ...]], Any] = factory(
        run, *[part for m in modules for part in (m, m.others)], *shapes, *guards
    )
    return made


def _layout_factory(spec: str, nguards: tuple[int, ...], check_only: bool,
                    seeds: int) -> Callable[..., Any]:
    """The function that makes ``layout_caller``'s check, for calls of this shape: its text
    written, compiled."""
    n = len(spec) // 2
    kinds = [(spec[2 * k], spec[2 * k + 1] == "m") for k in range(n)]
    args = [f"a{k}" for k in range(n)]
    dots = [f"t{k}" for k in range(n)]
    tests = []
    for k, (kind, moving) in enumerate(kinds):
        if kind == "a":
            tests.append(f"type(a{k}) is ARRAY and a{k}.shape == shape{k} and a{k}.dtype is "
                         f"dtype{k}")
            tests.append(f"type(t{k}) is ARRAY and t{k}.shape == shape{k} and t{k}.dtype is "
                         f"dtype{k}" if moving else f"t{k} is None")
        else:
            tests.append(f"(type(a{k}) is float or type(a{k}) is FLOAT64)")
            tests.append(f"(type(t{k}) is float or type(t{k}) is FLOAT64)" if moving
                         else f"t{k} is None")
    params = ["run"]
    for j, count in enumerate(nguards):
        params += [f"module{j}", f"others{j}"]
        tests += [f"scope{j}_{g}.get(name{j}_{g}, MISSING) is value{j}_{g}" for g in range(count)]
        tests += [f"not module{j}.replaced", f"(not others{j} or module{j}.refresh())"]
    params += [f"shape{k}, dtype{k}" for k, (kind, _) in enumerate(kinds) if kind == "a"]
    params += [f"scope{j}_{g}, name{j}_{g}, value{j}_{g}" for j, count in enumerate(nguards)
               for g in range(count)]
    called = [*args, *(["1.0"] * seeds), *(f"t{k}" for k, (_, moving) in enumerate(kinds)
                                           if moving)]
    unpack = (", ".join(args) + ("," if n == 1 else "")) if n else "()"
    unpack_dots = (", ".join(dots) + ("," if n == 1 else "")) if n else "()"
    lines = [f"def factory({', '.join(params)}):",
             "    def direct(primals, tangents):",
             f"        if len(primals) == {n} and len(tangents) == {n}:",
             f"            {unpack} = primals",
             f"            {unpack_dots} = tangents",
             f"            if {' and '.join(tests) or 'True'}:",
             "                return True" if check_only else
             f"                return run({', '.join(called)})",
             "        return NOT_SCALARS",
             "    return direct"]
    return _compiled(lines, "<ast_ad layout call>")
