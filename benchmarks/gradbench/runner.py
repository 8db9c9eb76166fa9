"""Play GradBench's protocol locally, without its command line: start an eval and the tool as
subprocesses and pipe each message of the eval to the tool and each answer back, printing a line per
evaluation (its function, whether the eval found the answer valid, and the tool's time).

    python benchmarks/gradbench/runner.py -- python -m gradbench.evals.particle.run    # GradBench's
    eval python benchmarks/gradbench/runner.py --script exchange.jsonl                      #
    scripted messages

The eval speaks first (``start``); every message it sends has an ``id`` the answer repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

TOOL = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "run.py")]


def exchange(eval_command: list[str] | None, script: list[dict[str, Any]] | None = None,
             tool: list[str] = TOOL) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Each (message, response) pair of a session between an eval (a command, or a script of
    messages) and the tool."""
    tool_process = subprocess.Popen(tool, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    eval_process = None
    if eval_command is not None:
        eval_process = subprocess.Popen(
            eval_command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
    assert tool_process.stdin is not None and tool_process.stdout is not None
    try:
        messages = iter(script) if script is not None else _lines(eval_process)
        for message in messages:
            tool_process.stdin.write(json.dumps(message) + "\n")
            tool_process.stdin.flush()
            response = json.loads(tool_process.stdout.readline())
            if eval_process is not None and message["kind"] != "end":
                assert eval_process.stdin is not None
                eval_process.stdin.write(json.dumps(response) + "\n")
                eval_process.stdin.flush()
            yield message, response
            if message["kind"] == "end":
                break
    finally:
        for process in (tool_process, eval_process):
            if process is not None:
                if process.stdin is not None:
                    process.stdin.close()
                process.wait(timeout=60)


def _lines(process: subprocess.Popen[str] | None) -> Iterator[dict[str, Any]]:
    assert process is not None and process.stdout is not None
    for line in process.stdout:
        if line.strip():
            yield json.loads(line)
    yield {"id": -1, "kind": "end"}  # the eval closed its side: tell the tool


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--script", help="a file of messages, one JSON object a line, instead of an eval"
    )
    parser.add_argument("eval", nargs="*", help="the eval's command, after --")
    options = parser.parse_args()
    script = None
    if options.script:
        with open(options.script) as lines:
            script = [json.loads(line) for line in lines if line.strip()]
    evaluations: dict[int, dict[str, Any]] = {}
    invalid = 0
    for message, response in exchange(options.eval or None, script):
        if message["kind"] == "evaluate":
            evaluations[message["id"]] = message | {"response": response}
            # the eval sends no analysis of a failed evaluation
            if not response.get("success", False):
                invalid += 1
                error = str(response.get("error", "")).strip().splitlines()
                print(
                    f"{message.get('module')} {message.get('function')} "
                    f"{message.get('description', '')}: FAILED\n  {error[-1] if error else ''}"
                )
        elif message["kind"] == "analysis":
            evaluated = evaluations.get(message["of"], {})
            seconds = (
                sum(t["nanoseconds"] for t in evaluated.get("response", {}).get("timings", []))
                / 1e9
            )
            runs = len(evaluated.get("response", {}).get("timings", [])) or 1
            valid = message["valid"]
            invalid += not valid
            print(
                f"{evaluated.get('module')} {evaluated.get('function')} "
                f"{evaluated.get('description', '')}: {'valid' if valid else 'INVALID'}, "
                f"{seconds / runs:.4g} s a run"
                + ("" if valid else f"\n  {message.get('error', '')}")
            )
    return 1 if invalid else 0


if __name__ == "__main__":
    sys.exit(main())
