"""A rule's body lowered to IR (``ast_ad.templates``): every rule that is one expression lowers, and the IR it
gives, run statement by statement, computes what calling the rule computes, on each rule's own example inputs."""

from __future__ import annotations

import ast
import math
import operator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ast_ad import inline, ir, registry, syntax, templates
from ast_ad.naming import Namer
from tests.rule_cases import CASES
from tests.test_rules import DIFFERENTIABLE, _name, direction_like, leaves

LINE = ir.Line("rule.py", 1, "")


def _rules(record: registry.Rule) -> list[tuple[str, int, object]]:
    """(direction, argument, rule) for each of the record's rules that inlines."""
    found = []
    for k in range(len(record.vjps)):
        for direction, rule in (("vjp", record.vjp(k)), ("jvp", record.jvp(k))):
            if callable(rule) and rule is not registry.zero and inline.template_of(rule) is not None:
                found.append((direction, k, rule))
    return found


RECORDS = [r for r in DIFFERENTIABLE if r.fn in CASES and _rules(r)]


def test_every_one_expression_rule_lowers() -> None:
    """No rule that inlines as an expression falls back to being called in generated code."""
    rules = {rule for record in registry.registered() for _, _, rule in _rules(record)}
    assert len(rules) > 300
    unlowered = [f"{rule.__module__}:{rule.__code__.co_firstlineno}" for rule in rules
                 if templates.template(rule) is None]
    assert not unlowered


def test_what_the_defaults_decide_is_folded_away() -> None:
    """``math.log(x)``'s rule reads ``base is None``: put in as ``None``, no test and no other branch is left."""
    rule = registry.lookup(math.log).vjps[0]
    body, out = templates.applied(rule, [ir.Var("g"), ir.Var("ans"), ir.Var("x")], {}, Namer(), LINE)
    assert [type(s) for s in body] == [ir.Assign]
    assert body[0].value.fn.obj is operator.truediv and body[0].value.args == (ir.Var("g"), ir.Var("x"))
    body, out = templates.applied(rule, [ir.Var("g"), ir.Var("ans"), ir.Var("x"), ir.Const(10.0)], {}, Namer(), LINE)
    assert [s.value.fn.obj for s in body] == [math.log, operator.mul, operator.truediv]
    # a decision made only at run time stays, both branches binding one name
    rule = registry.lookup(np.hsplit).vjps[0]
    body, out = templates.applied(rule, [ir.Var("g"), ir.Var("ans"), ir.Var("x"), ir.Var("s")], {}, Namer(), LINE)
    branch = next(s for s in body if isinstance(s, ir.If))
    assert {s.target for s in branch.body} == {s.target for s in branch.orelse}


def test_names_say_whose_they_are() -> None:
    """A temporary's name has the caller's names in it (``cos_x1``), the value the caller's hint."""
    rule = registry.lookup(math.sin).vjps[0]
    body, out = templates.applied(rule, [ir.Var("y_bar"), ir.Var("y"), ir.Var("x1")], {}, Namer(), LINE, "x1_bar")
    assert [s.target for s in body] == ["cos_x1", "x1_bar"] and out == ir.Var("x1_bar")


def run(body: list[ir.Stmt], env: dict[str, object]) -> None:
    """Run IR statements of a rule's body (assignments, unpacking, decisions), binding into ``env``."""
    def value(atom: ir.Atom) -> object:
        return env[atom.name] if isinstance(atom, ir.Var) else atom.value if isinstance(atom, ir.Const) else atom.obj

    for stmt in body:
        if isinstance(stmt, ir.If):
            run(list(stmt.body if value(stmt.test) else stmt.orelse), env)
        elif isinstance(stmt, ir.Unpack):
            for target, item in zip(stmt.targets, value(stmt.value), strict=True):
                env[target] = item
        else:
            assert isinstance(stmt, ir.Assign)
            expr = stmt.value
            if isinstance(expr, ir.Call):
                env[stmt.target] = value(expr.fn)(*map(value, expr.args), **{k: value(a) for k, a in expr.kwargs})
            elif isinstance(expr, ir.Pack):
                items = [value(a) for a in expr.elts]
                env[stmt.target] = dict(zip(expr.keys, items, strict=True)) if expr.kind == "dict" else \
                    items if expr.kind == "list" else tuple(items)
            elif isinstance(expr, ir.Attr):
                env[stmt.target] = getattr(value(expr.value), expr.attr)
            elif isinstance(expr, ir.Raw):
                names = {f"ref{k}": ref.obj for k, ref in enumerate(expr.refs)}
                node = syntax.substituted(expr.node, lambda n: syntax.name(f"ref{n.id[1:]}")
                                          if n.id.startswith("§") else None)
                tree = ast.fix_missing_locations(ast.Expression(body=syntax.to_ast(node)))
                code = compile(tree, "<raw>", "eval")
                env[stmt.target] = eval(code, {**names, **env})  # noqa: S307 -- the rule's own test
            else:
                env[stmt.target] = value(expr)


def _atoms(values: tuple, prefix: str, env: dict[str, object]) -> list[ir.Atom]:
    """Literals as constants (so what they decide is folded), anything else as a name bound in ``env``."""
    atoms: list[ir.Atom] = []
    for k, v in enumerate(values):
        if inline.is_literal(v):
            atoms.append(ir.Const(v))
        else:
            env[f"{prefix}{k}"] = v
            atoms.append(ir.Var(f"{prefix}{k}"))
    return atoms


def same(a: object, b: object) -> bool:
    la, lb = leaves(a), leaves(b)
    return len(la) == len(lb) and all(np.allclose(x, y, rtol=1e-12, atol=0, equal_nan=True) and
                                      np.shape(x) == np.shape(y) for x, y in zip(la, lb, strict=True))


@pytest.mark.parametrize("record", RECORDS, ids=_name)
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_a_lowered_rule_computes_what_the_rule_computes(record: registry.Rule, data: st.DataObject) -> None:
    args, kwargs = data.draw(CASES[record.fn])
    ans = record.fn(*args, **kwargs)
    rng = np.random.default_rng(0)
    for direction, k, rule in _rules(record):
        if k >= len(args):
            continue
        g = direction_like(ans if direction == "vjp" else args[k], rng)
        try:
            expected = rule(g, ans, *args, **kwargs)
        except (ValueError, TypeError, np.linalg.LinAlgError):
            continue  # (a case this rule does not take: the rule tests say which)
        env: dict[str, object] = {"g": g, "ans": ans}
        positional = _atoms(args, "a", env)
        keywords = dict(zip(kwargs, _atoms(tuple(kwargs.values()), "k", env), strict=True))
        made = templates.applied(rule, [ir.Var("g"), ir.Var("ans"), *positional], keywords, Namer(used=set(env)),
                                 LINE)
        assert made is not None, (direction, k)
        body, out = made
        run(body, env)
        got = env[out.name] if isinstance(out, ir.Var) else out.value if isinstance(out, ir.Const) else out.obj
        assert same(got, expected), (direction, k, got, expected)
