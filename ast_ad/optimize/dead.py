"""Statements whose values nothing reads, left out: the IR of a function that returns less than the
code it was made from computes (forward mode asked for a tangent alone, ``modes.forward.
tangent_only``: a Hessian-vector product reads the tangent of a gradient, not the gradient).

A Hessian-vector product by forward mode over the gradient of ``cost(p, q)`` computes the gradient
too, and its tangent; where only the tangent is returned, the gradient's own statements go::

    q_item_1 = q[1]                            q_bar = owned_adjoint(0.0, q)
    q_bar = owned_adjoint(0.0, q)              t5 = t3_plus_t4_bar * 2
    t5 = t3_plus_t4_bar * 2                    t7_dot = q_item_1_dot * t5
    t7_dot = q_item_1_dot * t5           ->    q_bar_1_dot = assign_item(zero_tangent(q_bar), 1,
    q_bar[1] = q_bar[1] + t5 * q_item_1                                  t7_dot)
    q_bar_1 = q_bar                            ...
    q_bar_1_dot = assign_item(zero_tangent(q_bar), 1, t7_dot)
    ...

(``zero_tangent`` reads ``q_bar``'s shape and kind alone, so the array is made, and the write that
fills it goes.)

The facts this relies on, each asked of the one place that decides it:

- a call of a function ast_ad registered rules for, that changes nothing in place and has no other
  effect (``registry.is_pure``), a copy of a name, a constant and a tuple of names only compute
  their values, so leaving one out that nothing reads changes nothing else; a check of the memory
  model or the language (``registry.is_check``: ``check_in_place``, ``check_bound``...) is called
  to raise, and stays;
- an item write changes its array in place, which other names may hold; it is left out only where
  the array is one of ``owned``: arrays written where nothing but the write and the names it is
  copied into reaches them (``analysis.straight_writes``, which forward mode writes in place), and
  nothing reads any of those names later;
- a registered function that reads an argument for its shape, dtype and type alone
  (``registry.meta_positions``: ``zero_tangent``, the tangent of a gradient that is not returned)
  needs the statement that binds it, not the entries item writes put in it, which change none of
  those;
- anything else (a call of the user's code or of a function with an effect, an attribute, a raw
  expression, a loop, a branch, an unpacking, an append) stays, and every name in it is read (an
  append's list too, which it changes): the names found live are a superset of those that are.

What is left out may have raised: a registered function refuses arguments it cannot take, numpy
raises on shapes that do not broadcast. So the pass serves code whose left-out part has already run
on the same arguments, and would raise again: a Hessian-vector product is asked for at a point
where the gradient was computed (its value is one of the rule's operands).
"""

from __future__ import annotations

from ast_ad.core import registry
from ast_ad.ir import nodes as ir


def dead_code_dropped(body: tuple[ir.Stmt, ...], live: set[str],
                      owned: frozenset[str]) -> tuple[ir.Stmt, ...]:
    """``body`` without the statements whose values nothing reads (``live``: the names read after
    it; ``owned``: the arrays whose item writes only their names reach)."""
    out: list[ir.Stmt] = []
    # the names read for their shapes, dtypes and types alone (``registry.meta_positions``: the
    # zero tangent of a gradient that is not returned), which no item write changes
    meta: set[str] = set()
    for stmt in reversed(body):
        kind = type(stmt)
        if kind is ir.Assign:
            assert isinstance(stmt, ir.Assign)
            target, value = stmt.target, stmt.value
            if target not in live and target not in meta and _only_computes(value):
                continue
            whole = target in live
            live.discard(target)
            meta.discard(target)
            if type(value) is ir.Var:  # (a copy: read as its copy is)
                (live if whole else meta).add(value.name)
            elif type(value) is ir.Call:
                by_meta = registry.meta_positions(value.fn.obj) if registry.is_pure(
                    value.fn.obj) else frozenset()
                for k, atom in enumerate(value.args):
                    if type(atom) is ir.Var:
                        (meta if k in by_meta else live).add(atom.name)
                live.update(a.name for _, a in value.kwargs if type(a) is ir.Var)
            else:
                live.update(ir.reads_of(stmt))
        elif kind is ir.SetItem:
            assert isinstance(stmt, ir.SetItem)
            if stmt.target in owned and stmt.target not in live:
                continue  # (nothing reads the entries it writes; the shape it keeps)
            live.update(ir.reads_of(stmt))
        else:  # (kept whole: every name it reads or changes, at any depth, live)
            for inner in ir.walk((stmt,)):
                live.update(_used(inner))
        out.append(stmt)
    out.reverse()
    return tuple(out)


def _used(stmt: ir.Stmt) -> list[str]:
    """The names ``stmt`` itself reads, and the list an append changes in place (which
    ``ir.reads_of`` does not count as read: the statement that binds the list must stay)."""
    names = ir.reads_of(stmt)
    return [*names, stmt.target] if type(stmt) is ir.Append else names


def _only_computes(value: ir.Expr) -> bool:
    """Whether ``value`` only computes itself: a name, a constant, an outside object, a tuple of
    atoms, or a call of a registered function without effects (``registry.is_pure``)."""
    if isinstance(value, (ir.Var, ir.Const, ir.Ref, ir.Pack)):
        return True
    # (a call of generated code, ``ir.CalleeRef``, is the user's: no rules of ast_ad's; a check
    # raises where the code cannot go on, which is what it is there for)
    return isinstance(value, ir.Call) and registry.is_pure(value.fn.obj) \
        and not registry.is_check(value.fn.obj)
