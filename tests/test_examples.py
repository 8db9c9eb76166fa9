"""The examples run as tests: each prints what the README says it prints."""

from __future__ import annotations

import pathlib
import subprocess
import sys

EXAMPLES = pathlib.Path(__file__).parent.parent / "examples"


def run(name: str) -> str:
    done = subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, check=True)
    return done.stdout


def test_quickstart_prints_the_worked_example() -> None:
    out = run("quickstart.py")
    assert "y      = 6.552027172500" in out
    assert "dy/dx1 = 3.500000000000" in out
    assert "dy/dx2 = 2.989992496600" in out
    assert "x2_bar = x2_bar + x1_times_x2_bar * x1" in out
    assert "The runtime tracer agrees: True" in out
