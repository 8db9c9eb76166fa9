"""The command line: ``python -m ast_ad show|explain|graph FILE.py:FUNCTION [values...]``.

    python -m ast_ad show model.py:loss --argnums 0,1 [--stage normalized|adjoint] [2.0 3.0]
    python -m ast_ad explain model.py:f 2.0 3.0 --argnums 0,1 [--mode forward --tangents 1,0]
    python -m ast_ad explain model.py:f 2.0 3.0 --html page.html
    python -m ast_ad graph model.py:f 2.0 3.0 -o graph.svg

Values are Python literals: ``2.0``, ``[1.0, 2.0]`` (an array). Errors name the file and line.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import inspect
import os
import re
import sys
from typing import Any

import numpy as np

import ast_ad
from ast_ad.errors import ASTADError

KEYWORDS = re.compile(r"\b(def|return|for|in|if|else|elif|while|break|pass|None|True|False)\b")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ast_ad", description="See how ast_ad differentiates a function."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in [
        ("show", "print the generated source"),
        ("explain", "print the evaluation traces"),
        ("graph", "write or print the computational graph"),
    ]:
        sub = commands.add_parser(name, help=text)
        sub.add_argument("target", help="FILE.py:FUNCTION")
        sub.add_argument("values", nargs="*", help="argument values, as Python literals")
        sub.add_argument(
            "--argnums",
            default=None,
            help="comma-separated argument positions (default: 0 for show; for explain and graph, "
            "every argument given as a number or an array of numbers)",
        )
        if name == "show":
            sub.add_argument("--stage", choices=("normalized", "adjoint", "jvp"), default="adjoint")
        if name == "explain":
            sub.add_argument("--mode", choices=("reverse", "forward"), default="reverse",
                             help="forward: the tangent trace (each step's value and tangent)")
            sub.add_argument(
                "--tangents",
                default=None,
                help="comma-separated tangents, one per argument in argnums (default: all 1)",
            )
            sub.add_argument(
                "--html",
                default=None,
                metavar="PAGE.html",
                help="write one self-contained page instead: the graph, both traces, where paths "
                "meet, and the generated gradient",
            )
        if name == "graph":
            sub.add_argument(
                "-o", "--output", help="a .svg, .png or .pdf file (default: print DOT)"
            )
    options, extra = parser.parse_known_args(argv)
    stray = [e for e in extra if e.startswith("-") and not _is_number(e)]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    options.values = list(options.values) + extra  # values may also follow the options
    try:
        return run(options)
    except (ASTADError, SyntaxError) as err:
        print(f"ast_ad: {err}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # (output piped into a program that stopped reading: head)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as err:  # a page or picture that cannot be written there
        print(
            f"ast_ad: cannot write {err.filename or 'the output'}: {err.strerror or err}",
            file=sys.stderr,
        )
        return 1
    # the user's function raised, called with these values: say so, without a traceback
    except Exception as err:
        if os.environ.get("AST_AD_TRACEBACK"):
            raise
        print(
            f"ast_ad: {options.target} raised {type(err).__name__}: {err} (with the values given; "
            "set "
            "AST_AD_TRACEBACK=1 to see where)",
            file=sys.stderr,
        )
        return 1


def run(options: argparse.Namespace) -> int:
    fn = load_function(options.target)
    values = [literal(v) for v in options.values]
    counts = _parameter_counts(fn)
    count = counts[1] if counts is not None else None
    if values and counts is not None and not counts[0] <= len(values) <= counts[1]:
        takes = f"{counts[0]} to {counts[1]}" if counts[0] != counts[1] else f"{counts[1]}"
        raise ASTADError(
            f"{options.target} takes {takes} argument{'s' * (counts[1] != 1)}, and {len(values)} "
            f"value{'s were' if len(values) != 1 else ' was'} given: give one value for each"
        )
    if options.argnums is not None:
        try:
            argnums = tuple(int(k) for k in options.argnums.split(","))
        except ValueError:
            raise ASTADError(
                "--argnums takes argument positions separated by commas (--argnums 0,1), not "
                f"{options.argnums!r}"
            ) from None
        bad = [k for k in argnums if count is not None and not 0 <= k < count]
        if bad:
            raise ASTADError(
                f"--argnums {options.argnums}: {options.target} takes {count} "
                f"argument{'s' * (count != 1)}, numbered from 0, so there is no argument {bad[0]}"
            )
    elif options.command == "show" or not values:
        argnums = (0,)
    else:  # the teaching commands tell the whole story: every path to every input
        argnums = tuple(k for k, v in enumerate(values) if isinstance(v, float)
                        or (isinstance(v, np.ndarray) and v.dtype.kind == "f")) or (0,)
    argnums_arg: Any = argnums[0] if len(argnums) == 1 else argnums
    if options.command == "show" and options.stage == "jvp":
        print(ast_ad.source(fn, *values, stage="jvp"))
    elif options.command == "show":
        text = ast_ad.source(ast_ad.grad(fn, argnums_arg), *values, stage=options.stage)
        print(colour(text) if sys.stdout.isatty() and not os.environ.get("NO_COLOR") else text)
    elif options.command == "explain":
        tangents = (
            None
            if options.tangents is None
            else tuple(literal(t) for t in options.tangents.split(","))
        )
        if options.html:
            from ast_ad.show.page import page
            with open(options.html, "w", encoding="utf-8") as out:
                out.write(page(fn, *values, argnums=argnums_arg))
            print(f"wrote {options.html}")
        else:
            print(
                ast_ad.explain(
                    fn, *values, argnums=argnums_arg, mode=options.mode, tangents=tangents
                )
            )
    else:
        picture = ast_ad.graph(fn, *values, argnums=argnums_arg)
        if options.output:
            picture.render(options.output)
            print(f"wrote {options.output}")
        else:
            print(picture.dot, end="")
    return 0


def load_function(target: str) -> Any:
    """The function ``FUNCTION`` of the file ``FILE.py``, for ``FILE.py:FUNCTION``."""
    path, _, name = target.rpartition(":")
    if not path or not name:
        raise ASTADError(f"name a function as FILE.py:FUNCTION, not {target!r}")
    if not os.path.exists(path):
        raise ASTADError(f"no file {path!r}")
    spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
    if spec is None or spec.loader is None:
        raise ASTADError(f"{path!r} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec.loader.exec_module(module)
    fn = module
    for part in name.split("."):
        if not hasattr(fn, part):
            raise ASTADError(f"{path} has no function {name!r}")
        fn = getattr(fn, part)
    return fn


def _parameter_counts(fn: Any) -> tuple[int, int] | None:
    """How many arguments ``fn`` needs and takes by position, where its signature says (``None`` for
    ``*args``)."""
    try:
        parameters = [
            p for p in inspect.signature(fn).parameters.values() if p.kind is not p.KEYWORD_ONLY
        ]
    except (TypeError, ValueError):
        return None
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
        return None
    return sum(1 for p in parameters if p.default is p.empty), len(parameters)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def literal(text: str) -> Any:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise ASTADError(
            f"cannot read the value {text!r}: write a number or a list of numbers"
        ) from None
    return np.asarray(value, dtype=float) if isinstance(value, (list, tuple)) else value


def colour(text: str) -> str:
    """Keywords bold, comments dim: enough to read generated code on a terminal."""
    out = []
    for line in text.splitlines():
        code, hash_, comment = line.partition("#")
        code = KEYWORDS.sub(lambda m: f"\033[1m{m.group(0)}\033[0m", code)
        out.append(code + (f"\033[2m#{comment}\033[0m" if hash_ else ""))
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
