"""Copies folded away (``ast_ad/fold.py``): a few lines in, the lines out; where folding would change what a
read sees, the copy stays."""

from __future__ import annotations

import textwrap

import gast
import pytest

from ast_ad import printer, syntax
from ast_ad.fold import folded


def fold(source: str, keep: set[str] | None = None) -> str:
    body = gast.parse(textwrap.dedent(source)).body
    before = [printer.to_source(syntax.to_ast(s)) for s in body]
    out = folded(body, keep or set())
    assert [printer.to_source(syntax.to_ast(s)) for s in body] == before  # the input is not changed
    return "".join(printer.to_source(syntax.to_ast(s)) for s in out).strip()


@pytest.mark.parametrize(("source", "keep", "expected"), [
    # the plain case: every read of the copy reads its source
    ("a = b\nc = a * 2\nd = a + c\n", {"c", "d"}, "c = b * 2\nd = b + c"),
    # the source is bound again before the last read: the copy keeps the old value, so it stays
    ("a = b\nb = b * 2\nc = a + b\n", {"c"}, "a = b\nb = b * 2\nc = a + b"),
    # ... but a statement that reads the copy and then binds the source is fine
    ("a = b\nb = b + a\n", {"b"}, "b = b + b"),
    # read before the copy (a parameter of the same name, say): not folded
    ("c = a\na = b\nd = a\n", {"c", "d"}, "c = a\na = b\nd = a"),
    # bound twice: not folded
    ("a = b\na = a * 2\nc = a\n", {"c"}, "a = b\na = a * 2\nc = a"),
    # read after the block (kept): stays
    ("a = b\nc = a\n", {"a", "c"}, "a = b\nc = a"),
    # a copy nothing reads goes
    ("a = b\nc = b\n", {"c"}, "c = b"),
    # a loop that binds the source, after the copy and before a read inside it: stays
    ("a = b\nfor i in r:\n    b = b + 1\n    c = a\n", {"c", "b"}, "a = b\nfor i in r:\n    b = b + 1\n    c = a"),
    # a copy inside a loop's body, read there only: folded in the body
    ("for i in r:\n    a = b\n    c = a * i\n", {"c"}, "for i in r:\n    c = b * i"),
    # read in the next step, before the copy: stays
    ("for i in r:\n    c = a\n    a = b\n", {"c"}, "for i in r:\n    c = a\n    a = b"),
    # deleted later: a deletion binds (the name may not be read after it), so not folded
    ("a = b\nc = a\ndel a\n", {"c"}, "a = b\nc = a\ndel a"),
])
def test_what_is_folded(source, keep, expected) -> None:
    assert fold(source, keep) == expected
