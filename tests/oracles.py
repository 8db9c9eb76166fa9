"""The oracles a gradient is compared with: finite differences, the tracer, and autograd."""

from __future__ import annotations

import inspect
import math
import re
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from ast_ad.testing.checking import directional


class NoVerdict(Exception):
    """An oracle that cannot judge at this point: central differences disagree with the gradient
    and the complex step is not finite there (complex arithmetic overflows where real arithmetic
    does not: ``(a + bi)(c + di)`` forms ``ac`` and ``bd`` apart, so a product near the largest
    float gives ``inf - inf``). The caller chooses another oracle."""


def assert_fd(
    fun: Callable[..., Any], args: tuple, argnums: tuple[int, ...], grads: tuple, seed: int = 0
) -> None:
    """Each gradient agrees with central differences along a random direction."""
    rng = np.random.default_rng(seed)
    for k, g in zip(argnums, grads, strict=True):
        direction = rng.standard_normal(np.shape(args[k]))
        numeric = directional(fun, args, k, direction)
        analytic = float(np.sum(np.asarray(g) * direction))
        assert math.isclose(analytic, numeric, rel_tol=1e-4, abs_tol=1e-5), (k, analytic, numeric)


def assert_fd_or_complex_step(
    fun: Callable[..., Any],
    args: tuple,
    argnums: tuple[int, ...],
    grads: tuple,
    seed: int = 0,
    extended: Callable[[tuple], tuple] | None = None,
) -> None:
    """``assert_fd``, and where central differences disagree, the complex step along the same
    direction as the oracle, if the function runs on complex numbers: ``f(x + i h d)``'s imaginary
    part over ``h``, exact to rounding for a function analytic in its real arguments, with no
    difference of two values to lose digits in (a program whose value is 1e29 has central
    differences off by a fifth of a percent at every step; the complex step and the gradient agree
    to the last digit). A function that does not run on complex numbers (a comparison, ``abs``)
    keeps the differences' verdict.

    ``extended``, if given, computes the same gradient from the arguments in numpy's extended
    precision (``np.longdouble``: 64 bits of mantissa on x86, 11 more than a float's). Reverse mode
    adds each value's adjoint contributions in one order; where they cancel (``0.5 * (v - v)`` of a
    ``v`` of 1e15 adds 0.5 and takes it away again from an adjoint of 1e-16) the float gradient
    is the exact one's rounding, amplified by what follows, and no oracle of the function can
    agree with it. Such a gradient is accepted only when it is shown to be that: the extended
    gradient moves away from the float one by more than the tolerance, and the extended
    gradient itself agrees with the complex step (to 1e-6). A gradient that is wrong in exact
    arithmetic is wrong in extended precision too."""
    try:
        assert_fd(fun, args, argnums, grads, seed)
        return
    except AssertionError:
        rng = np.random.default_rng(seed)
        directions, steps = [], []
        for k in argnums:
            direction = rng.standard_normal(np.shape(args[k]))
            # every float argument complex (an in-place ``x += y`` of a real ``x`` refuses a
            # complex ``y``), only the one along ``direction`` moved off the real line
            moved = [_complex(a) for a in args]
            moved[k] = np.asarray(args[k], dtype=complex) + 1e-30j * direction
            if np.ndim(args[k]) == 0:
                moved[k] = complex(moved[k])
            try:
                out = fun(*moved)
            except (TypeError, ValueError):
                raise AssertionError("differences disagree, and no complex step runs") from None
            directions.append(direction)
            steps.append(float(np.imag(out)) / 1e-30)
        if not all(math.isfinite(s) for s in steps):
            raise NoVerdict(("the complex step is not finite", steps)) from None
    analytic = [float(np.sum(np.asarray(g) * d)) for g, d in zip(grads, directions, strict=True)]
    agree = all(
        math.isclose(a, s, rel_tol=1e-9, abs_tol=1e-9) for a, s in zip(analytic, steps, strict=True)
    )
    if agree or extended is None or np.finfo(np.longdouble).nmant <= np.finfo(float).nmant:
        for a, s in zip(analytic, steps, strict=True):
            assert math.isclose(a, s, rel_tol=1e-9, abs_tol=1e-9), (a, s)
        return
    finer = extended(tuple(_longdouble(a) for a in args))
    refined = [
        float(np.sum(np.asarray(g, dtype=np.longdouble) * d))
        for g, d in zip(finer, directions, strict=True)
    ]
    rounded = any(
        not math.isclose(a, r, rel_tol=1e-9, abs_tol=1e-9)
        for a, r in zip(analytic, refined, strict=True)
    )
    assert rounded, ("the gradient disagrees with the complex step", analytic, steps)
    for r, s in zip(refined, steps, strict=True):
        assert math.isclose(r, s, rel_tol=1e-6, abs_tol=1e-9), ("extended precision", r, s)


def _complex(value: Any) -> Any:
    """``value`` with its float arrays complex (a number, a container or anything else as it is)."""
    if isinstance(value, np.ndarray) and value.dtype == float:
        return value.astype(complex)
    return value


def _longdouble(value: Any) -> Any:
    """``value`` with its floats in numpy's extended precision (containers followed)."""
    if isinstance(value, (list, tuple)):
        return type(value)(_longdouble(v) for v in value)
    if isinstance(value, dict):
        return {k: _longdouble(v) for k, v in value.items()}
    if isinstance(value, np.ndarray) and value.dtype == float:
        return value.astype(np.longdouble)
    if type(value) is float:
        return np.longdouble(value)
    return value


def fd_settled(
    fun: Callable[..., Any], args: tuple, argnums: tuple[int, ...], seed: int = 0
) -> bool:
    """Whether central differences along ``assert_fd``'s directions have settled at its step: the
    same at a step ten times smaller (where a function turns faster than the step, as a saturating
    ``tanh`` of a large value does, they have not, and are no oracle there)."""
    rng = np.random.default_rng(seed)
    for k in argnums:
        direction = rng.standard_normal(np.shape(args[k]))
        coarse = directional(fun, args, k, direction)
        fine = directional(fun, args, k, direction, eps=1e-7)
        if not math.isclose(coarse, fine, rel_tol=1e-4, abs_tol=1e-5):
            return False
    return True


def assert_same(ours: tuple, theirs: tuple, rtol: float = 1e-9, atol: float = 1e-12) -> None:
    """Each gradient of ``ours`` close to the one of ``theirs`` at its place, with its shape (two
    tuples of gradients: an array given for either is refused, as zip would compare its entries
    one by one, 100,000 calls for one gradient of that size)."""
    assert isinstance(ours, (tuple, list)) and isinstance(theirs, (tuple, list)), (
        "assert_same compares tuples of gradients", type(ours), type(theirs))
    for a, b in zip(ours, theirs, strict=True):
        assert np.shape(a) == np.shape(b), (np.shape(a), np.shape(b))
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def with_autograd_numpy(fun: Callable[..., Any]) -> Callable[..., Any]:
    """A copy of ``fun`` (and the module functions it calls) seeing autograd.numpy as ``np``."""
    import autograd.numpy as anp

    def convert(f: Any, seen: dict) -> Any:
        if f in seen:
            return seen[f]
        scope = dict(f.__globals__)
        copy = types.FunctionType(
            f.__code__, scope, f.__name__, f.__defaults__, _cells(f, seen, convert)
        )
        seen[f] = copy
        for key, value in scope.items():
            if value is np:
                scope[key] = anp
            elif isinstance(value, types.FunctionType) and value.__module__ == f.__module__:
                scope[key] = convert(value, seen)
        return copy
    return convert(fun, {})


def _cells(f: Any, seen: dict, convert: Any) -> Any:
    if not f.__closure__:
        return None
    return tuple(
        types.CellType(
            convert(c.cell_contents, seen)
            if isinstance(c.cell_contents, types.FunctionType)
            else c.cell_contents
        )
        for c in f.__closure__
    )


def marked_line(fn: Callable[..., Any], marker: str) -> int:
    """The line of ``fn``'s file that carries the comment ``marker`` (``# error here``): where an
    error must point."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if marker in line)


_COPY = re.compile(r"^\s*\w+ = \w+$", re.MULTILINE)  # ``v0 = x0``: two names of one object
_IN_PLACE = re.compile(r"^\s*\w+(\[.*\])? [-+*/]?= ", re.MULTILINE)


def shares_a_written_array(program: Any) -> bool:
    """Whether the program may write in place into an array another name holds (a name copied, and a
    write or an augmented assignment): Python's memory then changes both names, which the memory
    model follows and the tracer (a write is a new array there) does not."""
    return bool(_COPY.search(program.source)) and bool(_IN_PLACE.search(program.source))
