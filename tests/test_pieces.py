"""An expression as IR pieces (``pieces``), and their printing (``syntax.pieces``): what both modes
build where they add to a program, a rule's body and what is done with its value."""

from __future__ import annotations

import operator

import gast
import numpy as np
import pytest

from ast_ad import runtime
from ast_ad.backend import printer
from ast_ad.ir import nodes as ir
from ast_ad.ir import syntax
from ast_ad.ir.pieces import Made, added, may_give_a_container, one_expression, renamed
from ast_ad.modes.templates import Scratch

LINE = ir.Line("p.py", 1, "")
OPS = {
    gast.Mult: operator.mul,
    gast.Div: operator.truediv,
    gast.MatMult: operator.matmul,
    gast.Add: operator.add,
}


def made_of(source: str, scratch: Scratch) -> Made:
    """``source``, an expression of names, ``np.sin``, ``-``, ``+``, ``*``, ``/`` and ``@``, as
    pieces: each operation a part of its own (``%k``), as a rule's body put in is."""
    out: list[ir.Stmt] = []

    def lowered(node: gast.expr) -> ir.Atom:
        if isinstance(node, gast.Name):
            return ir.Var(node.id)
        if isinstance(node, gast.UnaryOp):
            call = ir.Call(ir.Ref(operator.neg, "operator.neg"), (lowered(node.operand),))
        elif isinstance(node, gast.BinOp):
            call = ir.Call(
                ir.Ref(OPS[type(node.op)], "op"), (lowered(node.left), lowered(node.right))
            )
        else:
            assert isinstance(node, gast.Call)  # np.sin(...)
            call = ir.Call(ir.Ref(np.sin, "np.sin"), (lowered(node.args[0]),))
        name = scratch.fresh("")
        out.append(ir.Assign(name, call, LINE))
        return ir.Var(name)
    atom = lowered(gast.parse(source).body[0].value)
    return out, atom


def printed(stmts: list[ir.Stmt]) -> str:
    refs = syntax.RefTable()
    body = syntax.pieces(stmts, refs)
    for stmt in body:
        for node in syntax.walk(stmt):  # (markers back to the names they stand for)
            if isinstance(node, gast.Name) and node.id.startswith(syntax.MARK):
                node.id = refs.entries[int(node.id[1:])].hint
    return "\n".join(printer.to_source(syntax.to_ast(s)).strip() for s in body)


@pytest.mark.parametrize(("term", "expected"), [
    ("-g * np.sin(x)", "total = total - g * np.sin(x)"),
    ("-g", "total = total - g"),
    ("-a / b * c", "total = total - a / b * c"),
    ("g * -x", "total = total + g * -x"),  # the sign does not lead: as it is
    ("-a @ b", "total = total + -a @ b"),  # only products and quotients
])
def test_a_contribution_led_by_a_minus_sign_is_subtracted(term: str, expected: str) -> None:
    """``pieces.added``, which adds a contribution to an adjoint (or a tangent to a tangent):
    ``total - g * np.sin(x)``, not ``total + -g * np.sin(x)``; a sign flip is exact, so the number
    is the same to the last bit."""
    stmts, value = made_of(term, Scratch())
    stmts = list(stmts)
    total = added(stmts, ir.Var("total"), value)
    assert printed([*stmts, ir.Assign("total", total, LINE)]) == expected
    rng = np.random.default_rng(0)
    scope = {name: rng.standard_normal((3, 3)) for name in ("total", "g", "x", "a", "b", "c")} | {
        "np": np
    }
    assert np.array_equal(eval(expected.split(" = ")[1], scope), eval("total + "
                                                                      f"({term})", scope))  # noqa: S307


def test_a_part_read_twice_a_part_never_read_and_an_unpacking_are_no_tree() -> None:
    mul = ir.Ref(operator.mul, "operator.mul")
    # (a name outside read twice: fine)
    t = ir.Assign("%1", ir.Call(mul, (ir.Var("x"), ir.Var("x"))), LINE)
    assert one_expression([t], ir.Var("%1"))
    assert not one_expression(
        [t, ir.Assign("%2", ir.Call(mul, (ir.Var("%1"), ir.Var("%1"))), LINE)], ir.Var("%2")
    )
    assert not one_expression([t], ir.Var("x"))  # %1 is never read
    assert not one_expression(
        [t, ir.Assign("%2", ir.Call(mul, (ir.Var("%1"), ir.Var("y"))), LINE)], ir.Var("%1")
    )
    assert not one_expression([ir.Unpack(("a", "b"), ir.Var("p"), LINE)], ir.Var("a"))
    assert one_expression([], ir.Const(0.0))


def test_a_decision_binding_one_part_on_each_path_is_a_conditional_expression() -> None:
    neg, mul = ir.Ref(operator.neg, "operator.neg"), ir.Ref(operator.mul, "operator.mul")
    scratch = Scratch()
    first, second, third = (scratch.fresh("") for _ in range(3))
    decided = ir.If(ir.Var("t"), (ir.Assign(second, ir.Call(neg, (ir.Var(first),)), LINE),),
                    (ir.Assign(second, ir.Var("y"), LINE),), LINE)
    body = [ir.Assign(first, ir.Call(mul, (ir.Var("g"), ir.Var("x"))), LINE), decided]
    assert one_expression(body, ir.Var(second))
    assert (
        printed([*body, ir.Assign("x_bar", ir.Var(second), LINE)]) == "x_bar = -(g * x) if t else y"
    )
    other = ir.If(ir.Var("t"), decided.body, (ir.Assign(third, ir.Var("y"), LINE),), LINE)
    assert not one_expression([body[0], other], ir.Var(second))  # a different part on each path


def test_a_pop_is_written_where_it_is_read_and_other_statements_as_they_are() -> None:
    """The backward pass of ``xs.append(v)`` reads the entry popped off the list's adjoint where it
    adds it."""
    body = [
        ir.Pop("%1", "xs_bar", LINE),
        ir.Assign(
            "v_bar",
            ir.Call(ir.Ref(operator.add, "operator.add"), (ir.Var("v_bar"), ir.Var("%1"))),
            LINE,
        ),
        ir.Assign("%2", ir.Call(ir.Ref(runtime.zeros_like, "zeros_like"), (ir.Var("v"),)), LINE),
        ir.Assign("w_bar", ir.Pack((ir.Var("%2"), ir.Var("u")), "list"), LINE),
    ]
    assert printed(body) == "v_bar = v_bar + xs_bar.pop()\nw_bar = [zeros_like(v), u]"


def test_a_value_that_may_be_a_container_is_known_from_its_call() -> None:
    """``+`` would join two lists: an adjoint adds such a value element by element
    (``add_adjoints``)."""
    scratch = Scratch()
    part = scratch.fresh("")
    assert may_give_a_container(
        (
            [
                ir.Assign(
                    part,
                    ir.Call(
                        ir.Ref(runtime.add_adjoints, "add_adjoints"), (ir.Var("a"), ir.Var("b"))
                    ),
                    LINE,
                )
            ],
            ir.Var(part),
        )
    )
    assert not may_give_a_container(made_of("g * x", scratch))
    assert not may_give_a_container(([], ir.Var("g")))


def test_a_renamed_value_keeps_how_it_was_written_and_the_rest_stays_as_it_is() -> None:
    """Reverse mode's ``y = y * x`` in a loop: its rule reads the new ``y`` (``ans``), which is kept
    as ``y_new`` before the old value comes back; only the statements that read it change (the
    others keep their identity: an accumulation a loop sums after it is known by it)."""
    transpose = ir.Call(ir.Ref(np.transpose, "np.transpose"), (ir.Var("ans"),), attribute="T")
    reads = ir.Assign("%1", transpose, LINE)
    other = ir.Assign(
        "x_bar",
        ir.Call(ir.Ref(operator.add, "operator.add"), (ir.Var("x_bar"), ir.Var("%1"))),
        LINE,
    )
    unpacked = ir.Unpack(("a", "b"), ir.Var("ans"), LINE)
    out = renamed([reads, other, unpacked], "ans", "y_new")
    assert (
        out[1] is other
        and out[0].value.attribute == "T"
        and out[0].value.args == (ir.Var("y_new"),)
    )
    assert out[2].value == ir.Var("y_new")
    assert printed(out[:2]) == "x_bar = x_bar + y_new.T"


def test_a_part_unpacked_is_written_as_the_call_unpacked() -> None:
    """``a_bar_t, b_bar_t = pair_bwd(saved, g)``: the call of a callee's backward pass, unpacked
    where it is made."""
    call = ir.Call(ir.Ref(operator.truediv, "operator.truediv"), (ir.Var("saved"), ir.Var("g")))
    body = [ir.Assign("%1", call, LINE), ir.Unpack(("a_bar_t", "b_bar_t"), ir.Var("%1"), LINE),
            ir.Assign("b_bar", ir.Var("b_bar_t"), LINE)]
    assert printed(body) == "a_bar_t, b_bar_t = saved / g\nb_bar = b_bar_t"


def test_a_loop_takes_its_iterable_from_a_part_and_its_blocks_parts_stay_in_them() -> None:
    """The backward loop of a loop that may break: ``for t in reversed(r[:trips])``, its body's
    parts written in it."""
    item, neg = ir.Ref(operator.getitem, "operator.getitem"), ir.Ref(operator.neg, "operator.neg")
    body = (
        ir.Assign("%4", ir.Call(neg, (ir.Var("g"),)), LINE),
        ir.Assign("x_bar", ir.Var("%4"), LINE),
    )
    loop = [
        ir.Assign("%1", ir.Call(ir.Ref(slice, "slice"), (ir.Const(None), ir.Var("trips"))), LINE),
        ir.Assign("%2", ir.Call(item, (ir.Var("r"), ir.Var("%1"))), LINE),
        ir.Assign("%3", ir.Call(ir.Ref(reversed, "reversed"), (ir.Var("%2"),)), LINE),
        ir.For("t", ir.Var("%3"), body, LINE),
    ]
    assert printed(loop) == "for t in reversed(r[:trips]):\n    x_bar = -g"
    outside = [ir.Assign("%5", ir.Call(neg, (ir.Var("g"),)), LINE),
               ir.For("t", ir.Var("r"), (ir.Assign("x_bar", ir.Var("%5"), LINE),), LINE)]
    # (it would be computed again at each step)
    with pytest.raises(AssertionError, match="no statement reads"):
        printed(outside)


def test_a_loop_over_a_part_unpacked_at_once_binds_the_names_themselves() -> None:
    """A checkpointed loop's schedule: ``for action, begin, end in reversal:``, a loop whose target
    is a part its body unpacks first, and a chain of branches whose tests are parts, as
    ``elif``s."""
    eq = ir.Ref(operator.eq, "operator.eq")
    chain: tuple[ir.Stmt, ...] = ()
    for k, (kind, inner) in enumerate([("snapshot", ir.Append("snapshots", ir.Var("u"), LINE)),
                                       ("release", ir.Pop(None, "snapshots", LINE))][::-1]):
        chain = (ir.Assign(f"%{k + 2}", ir.Call(eq, (ir.Var("action"), ir.Const(kind))), LINE),
                 ir.If(ir.Var(f"%{k + 2}"), (inner,), chain, LINE))
    loop = ir.For(
        "%1",
        ir.Var("reversal"),
        (ir.Unpack(("action", "begin", "end"), ir.Var("%1"), LINE), *chain),
        LINE,
    )
    assert printed([ir.Comment("the schedule"), loop]) == (
        '"""§#the schedule"""\n'  # (a comment: the emit stage writes it as one)
        "for action, begin, end in reversal:\n    if action == 'snapshot':\n        "
        "snapshots.append(u)\n    elif action == 'release':\n        snapshots.pop()")
    # (a loop over a part it does not unpack at once: its target unwritten)
    with pytest.raises(AssertionError):
        printed([ir.For("%1", ir.Var("reversal"), chain, LINE)])


def test_a_mark_is_never_printed() -> None:
    """Reverse mode's restore marks are resolved into pops (or dropped) on the IR: one that reached
    the printer would be a restore lost, so printing one is an error, not a statement left out."""
    with pytest.raises(AssertionError, match="resolved before printing"):
        printed([ir.Mark("x")])


def test_a_value_read_elsewhere_keeps_its_sign() -> None:
    """The sign is taken out of ``-g * x`` only where the accumulation is its one reader: another
    reader needs the product with its sign (taking it out would give that reader ``g * x``, a wrong
    number)."""
    stmts, value = made_of("-g * x", Scratch())
    stmts = [*stmts, ir.Assign("y", value, LINE)]
    before = list(stmts)
    total = added(stmts, ir.Var("total"), value)
    assert (
        total == ir.Call(ir.Ref(operator.add, "operator.add"), (ir.Var("total"), value))
        and stmts == before
    )
