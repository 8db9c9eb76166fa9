"""Inlining a rule: the template made by its builder is, node for node, what the reference copy makes."""

from __future__ import annotations

import gast
import pytest

from ast_ad import inline, registry, syntax

registry.load_all_rules()
RULES = [rule for record in registry.registered() for rule in (*record.vjps, *record.jvps)
         if callable(rule) and rule is not registry.zero and inline.template_of(rule) is not None]


def test_there_are_templates_to_compare() -> None:
    assert len(RULES) > 300


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: f"{rule.__module__}:{rule.__code__.co_firstlineno}")
def test_a_rules_builder_makes_what_the_copy_makes(rule) -> None:
    signature, body = inline.template_of(rule)
    positional = [p for p in signature.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for count in sorted({len([p for p in positional if p.default is p.empty]), len(positional)}):
        args = [syntax.name(f"a{k}") for k in range(count)]
        made = []
        for make in ("copy", "builder"):
            refs = syntax.RefTable()
            values = inline._bind(rule, signature, args, {})
            substitute = inline._Substitute(values, rule.__globals__, refs)
            try:
                tree = substitute.copy(body) if make == "copy" else inline._builder(rule)(values, substitute)
            except inline._NoInline:
                tree = None
            made.append((gast.dump(tree, include_attributes=True) if tree is not None else None,
                         [(ref.obj, ref.hint) for ref in refs.entries]))
        assert made[0][0] == made[1][0] and len(made[0][1]) == len(made[1][1])
        assert all(a[0] is b[0] and a[1] == b[1] for a, b in zip(made[0][1], made[1][1], strict=True))
