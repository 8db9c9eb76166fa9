"""How a tool function answers an ``evaluate`` message: convert the input, run (timed, as often as
the eval asks), convert the output. GradBench's Python tools do the same with its
``gradbench.wrap``; this one is written here so the tool needs nothing of GradBench to run."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def timed(pre: Callable[[Any], Any], post: Callable[[Any], Any],
          runs: bool = True) -> Callable[[Callable[[Any], Any]], Callable[[Any], dict[str, Any]]]:
    """Decorate ``function(input) -> output`` into ``(raw input) -> {success, output, timings}``.

    With ``runs``, it runs at least ``min_runs`` times and for at least ``min_seconds`` (the input's
    own fields, as GradBench's ``Runs`` type has them), each run timed apart.
    """
    def decorate(function: Callable[[Any], Any]) -> Callable[[Any], dict[str, Any]]:
        def evaluate(raw: Any) -> dict[str, Any]:
            value = pre(raw)
            least = raw.get("min_runs", 1) if runs and isinstance(raw, dict) else 1
            seconds = raw.get("min_seconds", 0.0) if runs and isinstance(raw, dict) else 0.0
            timings: list[dict[str, Any]] = []
            elapsed = 0.0
            while len(timings) < least or elapsed < seconds:
                start = time.perf_counter_ns()
                output = function(value)
                took = time.perf_counter_ns() - start
                timings.append({"name": "evaluate", "nanoseconds": took})
                elapsed += took / 1e9
            return {"success": True, "output": post(output), "timings": timings}

        evaluate.function = function  # type: ignore[attr-defined]
        return evaluate
    return decorate
