"""The analyses both modes read (``ast_ad/analysis/activity.py``), one small function in, the facts
out."""

from __future__ import annotations

import numpy as np

from ast_ad import transform
from ast_ad.analysis.activity import (
    CONTAINER,
    SCALAR,
    activity,
    callee_results,
    classes_of,
    constant_shapes,
    forward_activity,
    shape_classes,
    structured_names,
    usefulness,
)
from ast_ad.analysis.kinds import kinds_of
from ast_ad.ir import nodes as ir
from ast_ad.runtime import expand_reduced


def mixed(x, n):
    y = x * 2.0
    k = n + 1
    unused = np.cos(x)
    return np.sum(y) * k + 0.0 * unused.shape[0]


def test_activity_follows_the_differentiated_arguments_only() -> None:
    function = transform.normalized(mixed)
    active = activity(function, (0,))
    assert {"x", "y", "unused"} <= active and not {"n", "k"} & active


def test_usefulness_drops_what_the_result_does_not_read() -> None:
    function = transform.normalized(mixed)
    useful = usefulness(function, activity(function, (0,)))
    assert "y" in useful and "unused" not in useful  # only its shape reaches the result


def shapes_only(g, x):
    return expand_reduced(g, x, None, False) * 2.0


def test_activity_ignores_arguments_read_for_their_shape() -> None:
    """expand_reduced reads x for its shape alone: its rules for x are zero both ways (the reverse
    one since reverse mode runs over generated code), so nothing flows from x, and everything from
    g."""
    function = transform.normalized(shapes_only)
    assert activity(function, (1,)) == forward_activity(function, (1,)) == {"x"}
    assert "out" in forward_activity(function, (0,)) and "out" in activity(function, (0,))


def elementwise(a, b, s):
    c = a * b
    d = c + s
    return np.sum(d)


def test_shape_classes_carry_through_elementwise_operations() -> None:
    classes = shape_classes(transform.normalized(elementwise), (0, 0, SCALAR))
    assert classes["c"] == classes["d"] == 0
    assert classes["out"] != 0
    different = shape_classes(transform.normalized(elementwise), (0, 1, SCALAR))
    assert different["c"] is None  # a and b may differ: c's shape is not known


def shot(w):
    x = np.array([0.0, 8.0])
    v = np.array([0.75, 0.0])
    three = np.array([1.0, 2.0, 3.0])
    for _ in range(5):
        a = pushed(x, w)
        x = x + 0.1 * v
        v = v + 0.1 * a
    return x[0] * v[1] + np.sum(three)


def pushed(x, w):
    """Its result has the shape written in it, whatever ``x``'s."""
    return -np.array([w * x[0], x[1] - w])


def regrown(w):
    items = [w, 2.0]
    items.append(3.0)  # (a list that changes: np.array of it has three entries)
    grown = np.array(items)
    y = np.array([1.0, 2.0])
    for _ in range(3):
        y = np.array([1.0, 2.0, 3.0]) * w  # (bound to another shape in the loop)
    return np.sum(grown) + np.sum(y)


def test_arrays_written_out_have_their_shape_as_facts() -> None:
    """``np.array`` of numbers written out has their number of entries, and so have elementwise
    results of such arrays, a loop's values that every binding gives that shape, and a helper's
    result built so (``constant_shapes``): names of one such shape are one shape class, where
    each literal had a class of its own before (``x + 0.1 * v`` was of no known class)."""
    function = transform.normalized(shot)
    callees = callee_results(transform.normalized)
    kinds = kinds_of(function, (SCALAR,), callees)
    shapes = constant_shapes(
        function, kinds,
        lambda fn, call, at, passed: callees.shape(fn, [kinds.of(a, at) for a in call.args],
                                                   passed),
    )
    loop_x = ["x", "x_1", "v", "v_1"]  # (the normalizer's names of the loop's ``x`` and ``v``)
    assert {shapes[name] for name in loop_x} == {(2,)}
    assert shapes["three"] == (3,)
    assert "w" not in shapes
    classes = shape_classes(function, (SCALAR,), kinds, shapes)
    assert len({classes[name] for name in loop_x}) == 1
    assert classes["three"] not in (None, classes["v"])
    assert classes["a"] == classes["v"]  # (the helper's result: two entries)
    # without the helper's result known, its result has no shape, nor has ``v``, which adds it
    alone = constant_shapes(function, kinds)
    assert "a" not in alone and "v_1" not in alone and alone["three"] == (3,)


def test_a_list_that_changes_or_a_name_bound_to_two_shapes_has_no_shape() -> None:
    function = transform.normalized(regrown)
    shapes = constant_shapes(function, kinds_of(function, (SCALAR,)))
    assert "grown" not in shapes and "y_1" not in shapes  # (the loop's ``y``)
    assert shapes["y"] == (2,)  # (the first ``y``, bound once)


def containers(xs, y):
    pair = (y, y)
    first, second = pair
    return xs[0] + first * second


def test_structured_names_are_the_containers() -> None:
    names = structured_names(transform.normalized(containers), (CONTAINER, SCALAR))
    assert {"xs", "pair"} <= names and "first" not in names


def reshaped_in_a_branch(x, flag):
    y = np.reshape(x, (2, 2))
    z = 0.0
    if flag > 0:
        z = np.sum(y * y)
    return z + x[0]


def reshaped_straight(x):
    y = np.reshape(x, (2, 2))
    return np.sum(y * y) + x[0]


def test_float_zeros_are_made_dense_only_where_a_branch_may_leave_one() -> None:
    """``zeros.FloatZeros``: y's adjoint is the float 0.0 where the branch does not run, and
    np.reshape's rule needs its shape, so that rule reads ``dense_adjoint`` of it; in straight-line
    code it cannot be a float."""
    import ast_ad
    from ast_ad.modes.reverse import Reverser

    def zero_in(fn, shapes):
        function = transform.normalized(fn)
        reverser = Reverser(function, (0,), shapes, transform.CALLEES)
        reverser.run()
        return {
            stmt.target
            for stmt in function.body
            if isinstance(stmt, ir.Assign) and id(stmt) in reverser.zero_in
        }

    assert "y" in zero_in(reshaped_in_a_branch, (0, -1))
    assert "y" not in zero_in(reshaped_straight, (0,))
    x = np.array([1.0, 2.0, 3.0, 4.0])
    assert "dense_adjoint(y_bar, y)" in ast_ad.source(ast_ad.grad(reshaped_in_a_branch), x, 1.0)
    assert "dense_adjoint" not in ast_ad.source(ast_ad.grad(reshaped_straight), x)
    np.testing.assert_allclose(ast_ad.grad(reshaped_in_a_branch)(x, -1.0), [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(
        ast_ad.grad(reshaped_in_a_branch)(x, 1.0), 2 * x + [1.0, 0.0, 0.0, 0.0]
    )


def _stepped(x, v):
    """Its result has ``x``'s shape, whatever it is."""
    return x + 0.1 * v * np.tanh(x)


def _cut(x):
    return x[1:] * 2.0


def _rebinding(x):
    x = np.concatenate([x, x])
    return x * 2.0


def _walked(x, v):
    y = x
    for _ in range(4):
        y = _stepped(y, v)
        z = _cut(y)
        w = _rebinding(y)
    return np.sum(y) + np.sum(z) + np.sum(w)


def test_a_helper_that_returns_its_arguments_shape_gives_its_class() -> None:
    """A call of a helper of the user's whose own shape classes give its result a parameter's class
    (``callee_results.shaped_as``) has its argument's class in the caller: ``y = _stepped(y, v)``
    keeps ``y`` one class through the loop where ``v`` has ``x``'s shape (``v`` of another shape
    could broadcast the result past it), where its result had a class of its own; a helper
    whose result is a slice, or that binds its parameter again, gives none. The gradient of the
    loop keeps no shape a step, and is finite differences'."""
    from ast_ad.api.arguments import shape_labels
    from tests.oracles import assert_fd

    x, v = np.array([0.3, -0.2, 0.5]), np.array([1.0, 2.0, -1.0])
    function = transform.normalized(_walked)
    callees = callee_results(transform.normalized)
    shapes = shape_labels((x, v))  # (of one shape: ``v`` broadcasts into ``x``, not past it)
    kinds = kinds_of(function, shapes, callees)
    classes = classes_of(function, shapes, kinds, callees)
    stepped = [s.target for s in ir.walk(function.body) if isinstance(s, ir.Assign)
               and isinstance(s.value, ir.Call) and s.value.fn.obj is _stepped]
    assert stepped and all(classes[name] == classes["x"] for name in stepped)
    for fn in (_cut, _rebinding):
        made = [s.target for s in ir.walk(function.body) if isinstance(s, ir.Assign)
                and isinstance(s.value, ir.Call) and s.value.fn.obj is fn]
        assert made and all(classes[name] != classes["x"] for name in made)
    array = ("num", 1, True)
    assert callees.shaped_as(_stepped, [array, array], (0, 0)) == 0
    assert callees.shaped_as(_stepped, [array, array], (0, 1)) is None  # (v may broadcast x)
    assert callees.shaped_as(_cut, [array]) is None
    assert callees.shaped_as(_rebinding, [array]) is None
    import ast_ad

    text = ast_ad.source(ast_ad.grad(_walked), x, v)
    assert "y_1_shape" not in text and "stepped_shape" not in text, text
    assert_fd(_walked, (x, v), (0, 1), ast_ad.grad(_walked, (0, 1))(x, v))


def _kept_from_the_first_step(x):
    keep = None
    for i in range(3):
        z = x[:i + 1] * 2.0
        if i == 0:
            keep = z  # (the first step's, of one entry)
    c = keep + z  # (one entry broadcast against three)
    return np.sum(c * c)


def _the_step_before(x):
    prev = x[:1]
    z = x[:1]
    for i in range(1, 2):
        prev = z  # (the step before's, one entry shorter: broadcast)
        z = np.sin(x[:i + 1])
    return np.sum(prev * z)


def _while_carried(x):
    z = x[:1] * 1.0
    i = 1
    while z.shape[0] < 3:
        i = i + 1
        z = np.concatenate([z, x[:1]]) * np.cos(x[:i])
    return np.sum(z * x[:1])


def _within_a_step(x):
    total = 0.0
    for i in range(3):
        z = np.ones(i + 1) * x[0]
        w = z * z + z
        total = total + np.sum(w)
    return total


def test_a_class_a_loop_starts_is_one_shape_within_a_step_only() -> None:
    """``z = x[:i + 1] * 2.0`` in a loop is one shape within a step and another at the next: a value
    kept from an earlier step (in a branch, or the step before, or carried to a ``while`` test) or
    read after the loop meets the last step's with an unknown shape, and undoes the broadcast (the
    first one's gradient failed in numpy before: an adjoint of three entries for one entry); within
    a step the class stays."""
    from ast_ad.analysis.activity import _outliving
    from tests.oracles import assert_fd

    x = np.array([0.3, 0.5, 0.9])
    for fn in (_kept_from_the_first_step, _the_step_before, _while_carried, _within_a_step):
        import ast_ad

        value, g = ast_ad.value_and_grad(fn)(x)
        assert value == fn(x)
        assert_fd(fn, (x,), (0,), (g,))
    from ast_ad.api.arguments import shape_labels

    labels = shape_labels((x,))
    function = transform.normalized(_kept_from_the_first_step)
    assert {"keep", "z"} <= _outliving(function)
    classes = shape_classes(function, labels, kinds_of(function, labels))
    assert classes["keep"] is None and classes["z"] is None
    function = transform.normalized(_within_a_step)
    assert "w" not in _outliving(function)
    classes = shape_classes(function, labels, kinds_of(function, labels))
    assert classes["w"] is not None and classes["w"] == classes["z"]
