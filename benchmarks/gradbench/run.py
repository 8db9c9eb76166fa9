"""ast_ad's GradBench tool: read the protocol's messages, one JSON object a line on standard input,
and answer each on standard output (``start``, ``define``, ``evaluate``; the eval's ``analysis`` and
``end`` need only an acknowledgement).

    python benchmarks/gradbench/run.py        # as GradBench's `gradbench run --tool ...` starts a
    tool
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from typing import Any, TextIO

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def respond(message: dict[str, Any]) -> dict[str, Any]:
    """The response to one message, without its id."""
    kind = message["kind"]
    if kind == "start":
        return {"tool": "ast_ad"}
    if kind == "define":
        try:
            importlib.import_module(f"ast_ad_gradbench.{message['module']}")
        except Exception as exc:  # noqa: BLE001 -- the eval is told why, and goes on
            return {"success": False, "error": "".join(traceback.format_exception(exc))}
        return {"success": True}
    if kind == "evaluate":
        module = importlib.import_module(f"ast_ad_gradbench.{message['module']}")
        function = module.FUNCTIONS.get(message["function"])
        if function is None:
            return {
                "success": False,
                "error": f"{message['module']} has no function {message['function']!r}",
            }
        try:
            return function(message["input"])
        except Exception as exc:  # noqa: BLE001 -- a failure is an answer, not the end of the session
            return {"success": False, "error": "".join(traceback.format_exception(exc))}
    return {}


def serve(lines: TextIO, out: TextIO) -> None:
    for line in lines:
        if not line.strip():
            continue
        message = json.loads(line)
        out.write(json.dumps({"id": message["id"]} | respond(message)) + "\n")
        out.flush()
        if message["kind"] == "end":
            return


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
