"""``check_grads``: compare ast_ad's gradient with the tracer's and with central finite differences."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from ast_ad import tracer
from ast_ad.api import grad


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
        if not np.allclose(ours_k, theirs_k, rtol=1e-9, atol=1e-12):
            report.append(f"argument {k}: ast_ad {ours_k!r} != tracer {theirs_k!r}")
        direction = rng.standard_normal(np.shape(args[k]))
        numeric = directional(fun, args, k, direction, eps)
        analytic = float(np.sum(np.asarray(ours_k) * direction))
        if not np.isclose(analytic, numeric, rtol=rtol, atol=atol):
            report.append(f"argument {k}: along a random direction ast_ad gives {analytic!r}, "
                          f"finite differences give {numeric!r}")
    if report:
        raise AssertionError(f"gradients of {getattr(fun, '__qualname__', fun)} disagree:\n  " + "\n  ".join(report))


def directional(fun: Callable[..., Any], args: tuple[Any, ...], k: int, direction: Any, eps: float = 1e-6) -> float:
    """The central difference of ``fun`` along ``direction`` in argument ``k``."""
    def at(step: float) -> float:
        moved = list(args)
        moved[k] = np.asarray(args[k], dtype=float) + step * direction
        if np.ndim(args[k]) == 0:
            moved[k] = float(moved[k])
        return float(fun(*moved))
    return (at(eps) - at(-eps)) / (2 * eps)
