"""``check_grads``: compare ast_ad's gradient with the tracer's and with central finite
differences."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from ast_ad.api.gradient import grad
from ast_ad.testing import tracer


def check_grads(fun: Callable[..., Any], *args: Any, argnums: int | tuple[int, ...] = 0,
                rtol: float = 1e-5, atol: float = 1e-7, eps: float = 1e-6, seed: int = 0) -> None:
    """Raise ``AssertionError`` with a readable report unless the three gradients agree.

    Finite differences are taken along one random direction per argument
    (``<grad, v>`` against ``(f(x + eps v) - f(x - eps v)) / 2 eps``), so no
    Jacobian is ever built.
    """
    nums = tuple(argnums) if isinstance(argnums, (tuple, list)) else (operator.index(argnums),)
    ours = grad(fun, nums)(*args)
    theirs = tracer.grad(fun, nums)(*args)
    rng = np.random.default_rng(seed)
    report = []
    for k, ours_k, theirs_k in zip(nums, ours, theirs, strict=True):
        # a list, tuple or dict of parameters: each array or number in it
        for path, leaf in _leaves(args[k]):
            mine, traced, where = (
                _at(ours_k, path),
                _at(theirs_k, path),
                f"argument {k}{_spelled(path)}",
            )
            if not np.allclose(mine, traced, rtol=1e-9, atol=1e-12):
                report.append(f"{where}: ast_ad {mine!r} != tracer {traced!r}")
            direction = rng.standard_normal(np.shape(leaf))
            numeric = directional(fun, args, k, direction, eps, path)
            analytic = float(np.sum(np.asarray(mine) * direction))
            if not np.isclose(analytic, numeric, rtol=rtol, atol=atol):
                report.append(f"{where}: along a random direction ast_ad gives {analytic!r}, "
                              f"finite differences give {numeric!r}")
    if report:
        raise AssertionError(
            f"gradients of {getattr(fun, '__qualname__', fun)} disagree:\n  " + "\n  ".join(report)
        )


def directional(
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    k: int,
    direction: Any,
    eps: float = 1e-6,
    path: tuple[Any, ...] = (),
) -> float:
    """The central difference of ``fun`` along ``direction`` in argument ``k`` (at ``path`` inside
    it, where it is a list, tuple or dict)."""
    def at(step: float) -> float:
        moved = list(args)
        leaf = _at(args[k], path)
        new = np.asarray(leaf, dtype=float) + step * direction
        moved[k] = _replaced(args[k], path, float(new) if np.ndim(leaf) == 0 else new)
        return float(fun(*moved))
    return (at(eps) - at(-eps)) / (2 * eps)


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    """Each number or array in ``value`` (a list, tuple or dict of them, nested), with the keys that
    reach it."""
    if isinstance(value, dict):
        return [leaf for key in value for leaf in _leaves(value[key], (*path, key))]
    if isinstance(value, (list, tuple)):
        return [leaf for k, item in enumerate(value) for leaf in _leaves(item, (*path, k))]
    return [(path, value)]


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """``value`` with the leaf at ``path`` replaced by ``new`` (containers copied on the way, kinds
    kept)."""
    if not path:
        return new
    key, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, key: _replaced(value[key], rest, new)}
    items = list(value)
    items[key] = _replaced(items[key], rest, new)
    return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)


def _spelled(path: tuple[Any, ...]) -> str:
    return "".join(f"[{key!r}]" for key in path)
