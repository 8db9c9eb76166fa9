"""A rule's body lowered to IR (``ast_ad.modes.templates``): every rule that is one expression
lowers, and the IR it gives, run statement by statement, computes what calling the rule computes, on
each rule's own example inputs."""

from __future__ import annotations

import ast
import math
import operator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ast_ad.core import registry
from ast_ad.ir import nodes as ir
from ast_ad.ir import syntax
from ast_ad.ir.naming import Namer
from ast_ad.ir.pieces import one_expression, with_names
from ast_ad.modes import templates
from tests.rule_cases import CASES
from tests.test_rules import DIFFERENTIABLE, _name, direction_like, leaves, observed

LINE = ir.Line("rule.py", 1, "")


def written(body: list[ir.Stmt], out: ir.Atom, refs: syntax.RefTable) -> Any:
    """The one expression reverse mode writes for a rule's statements and value
    (``pieces.one_expression``, then ``syntax.pieces``, the names the statements bind as parts,
    ``%name``), or ``None`` where they are no tree and the rule is called."""
    if not one_expression(body, out):
        return None
    bound = {name for stmt in ir.walk(tuple(body)) for name in ir.defined(stmt)}

    def part_name(name: str) -> str | None:
        return syntax.SCRATCH + name if name in bound else None

    def part(stmt: ir.Stmt) -> ir.Stmt:
        if isinstance(stmt, ir.If):
            return ir.If(
                with_names(stmt.test, part_name),
                tuple(map(part, stmt.body)),
                tuple(map(part, stmt.orelse)),
                stmt.line,
            )
        assert isinstance(stmt, ir.Assign)
        return ir.Assign(syntax.SCRATCH + stmt.target, with_names(stmt.value, part_name), stmt.line)

    (stmt,) = syntax.pieces(
        [*map(part, body), ir.Assign("written", with_names(out, part_name), LINE)], refs
    )
    return stmt.value


def _rules(record: registry.Rule) -> list[tuple[str, int, object]]:
    """(direction, argument, rule) for each of the record's rules that inlines."""
    found = []
    for k in range(len(record.vjps)):
        for direction, rule in (("vjp", record.vjp(k)), ("jvp", record.jvp(k))):
            if (
                callable(rule)
                and rule is not registry.zero
                and templates.template_of(rule) is not None
            ):
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
    """``math.log(x)``'s rule reads ``base is None``: put in as ``None``, no test and no other
    branch is left."""
    rule = registry.lookup(math.log).vjps[0]
    body, out = templates.applied(
        rule, [ir.Var("g"), ir.Var("ans"), ir.Var("x")], {}, Namer(), LINE
    )
    assert [type(s) for s in body] == [ir.Assign]
    assert body[0].value.fn.obj is operator.truediv and body[0].value.args == (
        ir.Var("g"),
        ir.Var("x"),
    )
    body, out = templates.applied(
        rule, [ir.Var("g"), ir.Var("ans"), ir.Var("x"), ir.Const(10.0)], {}, Namer(), LINE
    )
    assert [s.value.fn.obj for s in body] == [math.log, operator.mul, operator.truediv]
    # a decision made only at run time stays, both branches binding one name
    rule = registry.lookup(np.hsplit).vjps[0]
    body, out = templates.applied(
        rule, [ir.Var("g"), ir.Var("ans"), ir.Var("x"), ir.Var("s")], {}, Namer(), LINE
    )
    branch = next(s for s in body if isinstance(s, ir.If))
    assert {s.target for s in branch.body} == {s.target for s in branch.orelse}


def test_names_say_whose_they_are() -> None:
    """A temporary's name has the caller's names in it (``cos_x1``), the value the caller's hint."""
    rule = registry.lookup(math.sin).vjps[0]
    body, out = templates.applied(
        rule, [ir.Var("y_bar"), ir.Var("y"), ir.Var("x1")], {}, Namer(), LINE, "x1_bar"
    )
    assert [s.target for s in body] == ["cos_x1", "x1_bar"] and out == ir.Var("x1_bar")


def run(body: list[ir.Stmt], env: dict[str, object]) -> None:
    """Run IR statements of a rule's body (assignments, unpacking, decisions), binding into
    ``env``."""
    def value(atom: ir.Atom) -> object:
        return (
            env[atom.name]
            if isinstance(atom, ir.Var)
            else atom.value
            if isinstance(atom, ir.Const)
            else atom.obj
        )

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
                env[stmt.target] = value(expr.fn)(
                    *map(value, expr.args), **{k: value(a) for k, a in expr.kwargs}
                )
            elif isinstance(expr, ir.Pack):
                items = [value(a) for a in expr.elts]
                env[stmt.target] = (
                    dict(zip(expr.keys, items, strict=True))
                    if expr.kind == "dict"
                    else items
                    if expr.kind == "list"
                    else tuple(items)
                )
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
    """Literals as constants (so what they decide is folded), anything else as a name bound in
    ``env``."""
    atoms: list[ir.Atom] = []
    for k, v in enumerate(values):
        if templates.is_literal(v):
            atoms.append(ir.Const(v))
        else:
            env[f"{prefix}{k}"] = v
            atoms.append(ir.Var(f"{prefix}{k}"))
    return atoms


def same(a: object, b: object) -> bool:
    la, lb = leaves(a), leaves(b)
    return len(la) == len(lb) and all(
        np.allclose(x, y, rtol=1e-12, atol=0, equal_nan=True) and np.shape(x) == np.shape(y)
        for x, y in zip(la, lb, strict=True)
    )


@pytest.mark.parametrize("record", RECORDS, ids=_name)
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_a_lowered_rule_computes_what_the_rule_computes(
    record: registry.Rule, data: st.DataObject
) -> None:
    args, kwargs = data.draw(CASES[record.fn])
    ans = record.fn(*args, **kwargs)
    rng = np.random.default_rng(0)
    for direction, k, rule in _rules(record):
        if k >= len(args):
            continue
        g = direction_like(observed(ans, fn=record.fn) if direction == "vjp" else args[k], rng)
        try:
            expected = rule(g, ans, *args, **kwargs)
        except (ValueError, TypeError, np.linalg.LinAlgError):
            continue  # (a case this rule does not take: the rule tests say which)
        env: dict[str, object] = {"g": g, "ans": ans}
        positional = _atoms(args, "a", env)
        keywords = dict(zip(kwargs, _atoms(tuple(kwargs.values()), "k", env), strict=True))
        made = templates.applied(
            rule, [ir.Var("g"), ir.Var("ans"), *positional], keywords, Namer(used=set(env)), LINE
        )
        assert made is not None, (direction, k)
        body, out = made
        run(body, env)
        got = (
            env[out.name]
            if isinstance(out, ir.Var)
            else out.value
            if isinstance(out, ir.Const)
            else out.obj
        )
        if direction == "jvp":  # (a tangent: of what differentiated code reads of the result)
            got, expected = observed(got, ans, record.fn), observed(expected, ans, record.fn)
        assert same(got, expected), (direction, k, got, expected)
        # reverse mode writes the statements as the one expression they compute: it computes the
        # same
        refs = syntax.RefTable()
        expression = written(body, out, refs)
        if expression is not None:
            names = {f"ref{j}": ref.obj for j, ref in enumerate(refs.entries)}
            node = syntax.substituted(
                expression,
                lambda n: syntax.name(f"ref{n.id[1:]}") if n.id.startswith("§") else None,
            )
            code = compile(
                ast.fix_missing_locations(ast.Expression(body=syntax.to_ast(node))),
                "<rule>",
                "eval",
            )
            got = eval(code, {**names, **env})  # noqa: S307 -- the rule's own test
            if direction == "jvp":
                got = observed(got, ans, record.fn)
            assert same(got, expected), (direction, k, "written", got, expected)


MAKERS = sorted({rule for record in registry.registered() for _, _, rule in _rules(record)},
                key=lambda rule: (rule.__module__, rule.__code__.co_firstlineno))


def test_there_are_makers_to_compare() -> None:
    made = [
        rule
        for rule in MAKERS
        for count in _counts(rule)
        if templates._maker(rule, count) is not None
    ]
    assert len(made) > 300


def _counts(rule) -> list[int]:
    params = [
        p
        for p in templates.signature_of(rule).parameters.values()
        if p.kind is p.POSITIONAL_OR_KEYWORD
    ]
    return sorted({len([p for p in params if p.default is p.empty]), len(params)})


@pytest.mark.parametrize(
    "rule", MAKERS, ids=lambda rule: f"{rule.__module__}:{rule.__code__.co_firstlineno}"
)
def test_a_rules_maker_makes_what_putting_it_in_makes(rule) -> None:
    """The Python written for a template makes, statement for statement and name for name, what
    ``_Put`` makes: with names put in, with constants (which fold what they decide), and with the
    value named by a hint."""
    for count in _counts(rule):
        maker = templates._maker(rule, count)
        if maker is None:
            continue
        for atoms in ([ir.Var(f"a{k}") for k in range(count)],
                      [ir.Var("a0"), ir.Var("a1"), *[ir.Const(k + 1.0) for k in range(count - 2)]],
                      [ir.Var("a0"), ir.Var("a1"), *[ir.Const(1) for k in range(count - 2)]]):
            for hint in (None, "t_bar"):
                function = templates.template(rule)
                put = templates._Put(dict(zip(function.params, atoms, strict=False)), function,
                                     Namer(used={"a0"}), LINE, hint)
                put.values.update(templates._plain_defaults(rule, count))
                expected = put.run()
                assert maker(atoms, Namer(used={"a0"}), LINE, hint) == expected


def spelled(x, w):
    return np.sum(np.average(x, weights=w) * x.T) * np.pi + np.sum(np.deg2rad(x))


def repeated(x):
    ys = [x] * 3
    return ys[0] * ys[2]


def spelled_positionally(x, w):  # (the tracer takes no keyword it differentiates)
    return np.sum(np.average(x, None, w) * np.transpose(x)) * 3.141592653589793 + np.sum(
        np.deg2rad(x)
    )


def test_code_reads_as_the_user_and_the_rule_wrote_it() -> None:
    """What the lowering changes for the rules' sake is printed as written: a keyword moved to its
    position (``weights=w``), an attribute that is a primitive (``x.T``), ``np.pi``; reverse mode
    writes ``np.deg2rad``'s rule as its one expression, ``np.pi`` in it, not its value, and
    ``np.sum``'s without the defaults it passes on."""
    import ast_ad

    x, w = np.arange(1.0, 7.0).reshape(2, 3), np.linspace(0.5, 1.5, 6).reshape(2, 3)
    text = ast_ad.source(ast_ad.grad(spelled, (0, 1)), x, w)
    assert "np.average(x, weights=w)" in text and "x_T = x.T" in text and "* np.pi" in text
    assert "(np.pi / 180.0)" in text and "3.14159" not in text
    # a helper's trailing arguments that are its defaults, which the rule passes, are not written
    assert "expand_reduced(out_bar, deg2rad_x)" in text and "None, False" not in text
    # (``repeat_seq``, as the user wrote it)
    assert "ys = [x] * 3" in ast_ad.source(ast_ad.grad(repeated), 1.5)
    assert ast_ad.grad(repeated)(1.5) == 3.0
    got = ast_ad.grad(spelled, (0, 1))(x, w)
    expected = ast_ad.tracer.grad(spelled_positionally, (0, 1))(x, w)
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_a_decision_at_run_time_is_written_as_a_conditional_expression() -> None:
    """``np.hsplit``'s rule decides its axis at run time: written in the one expression as ``a if
    test else b``, the truth of the test read as a test reads it (no ``bool(...)``), and what the
    defaults decide taken out of it."""
    refs = syntax.RefTable()
    rule = registry.lookup(np.hsplit).vjps[0]
    made = templates.applied(
        rule, [ir.Var("g"), ir.Var("ans"), ir.Var("x"), ir.Var("s")], {}, templates.Scratch(), LINE
    )
    text = ast.unparse(syntax.to_ast(written(*made, refs)))
    assert " if " in text and " else " in text and "bool" not in text and "%" not in text
    # ``x if axis is not None or np.ndim(x) == 1 else ...``
    rule = registry.lookup(np.linalg.vector_norm).vjps[0]
    made = templates.applied(
        rule, [ir.Var("g"), ir.Var("ans"), ir.Var("x")], {}, templates.Scratch(), LINE
    )
    text = ast.unparse(syntax.to_ast(written(*made, refs)))
    test = text.split(" if ")[1].split(" else ")[0]
    # (``axis is not None`` is decided, with ``axis`` None)
    assert " or " not in test and "None" not in test


def test_a_value_read_twice_is_not_one_expression() -> None:
    """Statements that are no tree (a value read twice) are not written as one expression: the rule
    is called."""
    mul = ir.Ref(operator.mul, "operator.mul")
    body = [ir.Assign("t", ir.Call(mul, (ir.Var("x"), ir.Var("x"))), LINE),
            ir.Assign("u", ir.Call(mul, (ir.Var("t"), ir.Var("t"))), LINE)]
    assert written(body, ir.Var("u"), syntax.RefTable()) is None
    assert written(body[:1], ir.Var("t"), syntax.RefTable()) is not None


def test_a_helpers_defaults_are_left_out_only_where_the_arguments_are_positional() -> None:
    """A helper's trailing arguments equal to its defaults are not written, except where the last
    ones were written by keyword (``ir.Call.moved``): leaving one out there would pair the keywords
    with the wrong arguments."""
    from ast_ad import runtime

    fn = ir.Ref(runtime.expand_reduced, "expand_reduced")
    args = (ir.Var("g"), ir.Var("x"), ir.Const(None), ir.Const(False))
    refs = syntax.RefTable()
    assert ast.unparse(syntax.to_ast(syntax.expr(ir.Call(fn, args), refs))) == "§0(g, x)"
    # ``expand_reduced(g, x, axis=None)``, a template's put in
    moved = ir.Call(fn, args[:3], (), ("axis",))
    assert ast.unparse(syntax.to_ast(syntax.expr(moved, refs))) == "§0(g, x, axis=None)"
