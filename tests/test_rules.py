"""Every registered rule against central finite differences, by random projection.

For ``ans = f(*args)`` and random ``u`` (shaped like ``ans``) and ``v`` (shaped
like argument k), ``<vjp_k(u), v>`` must equal the derivative of
``<u, f(..., x_k + t v, ...)>`` at t = 0. No Jacobian is ever built. Forward
rules are checked the same way, ``<u, jvp_k(v)>`` against the same derivative,
and against their reverse twin by the dot-product identity
``<u, J v> = <J^T u, v>``.
"""

from __future__ import annotations

import ast
import collections
import importlib
import inspect
import math
import os
import pkgutil
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ast_ad import runtime
from ast_ad.core import registry
from ast_ad.runtime import absent, check_bound, check_in_place, check_kept, unbroadcast
from ast_ad.testing import tracer
from tests.rule_cases import CASES, FIRST_ONLY, STEPS
from tests.strategies import arrays

# ast_ad's own rules (tests and users may register more; those are checked where they are
# defined), those of scipy's solvers included (registered by the api layer: they need derivatives
# of the user's functions)
# (but not the forward rules of the solvers' own reverse rules, ``root_vjp``...: they hold where
# ``z`` is a solution for ``args``, so no argument moves alone; the Hessians through the solvers
# check them, ``test_solvers``)
DIFFERENTIABLE = [
    r for r in registry.registered()
    if not r.nondiff and r.origin.startswith(("ast_ad.rules", "ast_ad.api.solvers"))
    and getattr(r.fn, "__module__", None) != "ast_ad.api.solvers"
]
NONDIFF = [r for r in registry.registered() if r.nondiff]
# examples a rule: 6 in reverse and 4 in forward mode in the default run, to keep it short;
# .ci/run's long step runs these two tests again with 25 (``AST_AD_RULE_EXAMPLES``)
RULE_EXAMPLES = int(os.environ.get("AST_AD_RULE_EXAMPLES", "0"))


def _name(rule: registry.Rule) -> str:
    return f"{getattr(rule.fn, '__module__', '') or ''}.{getattr(rule.fn, '__name__', rule.fn)}"


def test_every_rule_has_a_case() -> None:
    missing = [_name(r) for r in DIFFERENTIABLE if r.fn not in CASES]
    assert not missing, f"rules with no finite-difference case in tests/rule_cases.py: {missing}"


def random_like(value, rng):
    """A random cotangent shaped like ``value`` (a tuple, list or dict of them for container
    results)."""
    if isinstance(value, dict):
        return {k: random_like(v, rng) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return (
            type(value)(random_like(v, rng) for v in value)
            if not hasattr(value, "_fields")
            else tuple(random_like(v, rng) for v in value)
        )
    if np.iscomplexobj(value):
        return rng.standard_normal(np.shape(value)) + 1j * rng.standard_normal(np.shape(value))
    return rng.standard_normal(np.shape(value))


def pairing(u, value) -> float:
    """<u, value>, summed over the parts of a sequence or dict: the real part of ``sum(u *
    value)``, the pairing of an adjoint with a change where values are complex (the adjoint of ``x +
    iy`` is ``dL/dx - i dL/dy``)."""
    if isinstance(value, dict):
        return sum(pairing(u[k], v) for k, v in value.items())
    if isinstance(value, (tuple, list)):
        return sum(pairing(a, b) for a, b in zip(u, value, strict=True))
    return float(np.real(np.sum(u * value)))


def observed(value, result=None, fn=None):
    """What differentiated code reads of a result (or of its tangent, ``result`` the result): a
    scipy solver's result object (a dict of its fields) by its solution alone (``x``, ``root``), and
    the value alone of a pair whose second part is an error estimate (``quad``'s, ``FIRST_ONLY``);
    the rest is the solver's report (counts, messages), which has no derivative."""
    if fn in FIRST_ONLY:
        return value[0]
    if hasattr(value, "toarray") and hasattr(value, "nnz"):  # a sparse matrix: its entries
        return value.toarray()
    reference = value if result is None else result
    if isinstance(reference, dict) and type(reference).__module__.startswith("scipy."):
        key = "root" if "root" in reference else "y" if "y" in reference else "x"
        return {key: value[key]}
    return value


def _tolerance(rule: registry.Rule) -> float:
    """How close a rule and central differences agree: 1e-5, or 1e-4 for a function whose own
    answer is noisy at the usual step (a fit's optimizer: ``STEPS``), where the larger step's
    truncation error shows."""
    return 1e-4 if rule.fn in STEPS else 1e-5


def canonical(fn, value, reference):
    """Eigen- and singular vectors have arbitrary signs: align them with the unperturbed ones."""
    if fn is np.linalg.eigh:
        w, v = value
        return w, v * np.sign(np.sum(v * reference[1], axis=-2, keepdims=True))
    if fn is np.linalg.svd and isinstance(value, tuple) and len(value) == 3:
        u, s, vt = value
        signs = np.sign(np.sum(u * reference[0], axis=-2, keepdims=True))
        return u * signs, s, vt * np.swapaxes(signs, -1, -2)
    if fn is np.linalg.qr:
        q, r = value
        signs = np.sign(
            np.diagonal(r, axis1=-2, axis2=-1) * np.diagonal(reference[1], axis1=-2, axis2=-1)
        )
        return q * signs[..., None, :], r * signs[..., :, None]
    return value


def projection_error(
    rule: registry.Rule, args: tuple, kwargs: dict, k: int, seed: int, imaginary: bool = False
) -> tuple[float, float]:
    """``<vjp_k(u), v>`` and the derivative of ``<u, f(..., x_k + t v, ...)>``; ``v`` along the
    imaginary axis where ``imaginary`` (a complex argument moves both ways)."""
    rng = np.random.default_rng(seed)
    ans = rule.fn(*args, **kwargs)
    u = random_like(observed(ans, fn=rule.fn), rng)
    v = rng.standard_normal(np.shape(args[k])) * (1j if imaginary else 1.0)
    vjp = unbroadcast(rule.vjp(k)(u, ans, *args, **kwargs), args[k])
    assert np.shape(vjp) == np.shape(args[k])
    analytic = float(np.real(np.sum(vjp * v)))
    scalar = complex if np.iscomplexobj(args[k]) or imaginary else float

    def along(t: float) -> float:
        moved = list(args)
        moved[k] = args[k] + t * v if np.ndim(args[k]) else scalar(args[k] + t * v)
        return pairing(u, observed(canonical(rule.fn, rule.fn(*moved, **kwargs), ans), fn=rule.fn))
    eps = STEPS.get(rule.fn, 1e-6)
    return analytic, (along(eps) - along(-eps)) / (2 * eps)


@pytest.mark.parametrize("rule", DIFFERENTIABLE, ids=_name)
@settings(max_examples=RULE_EXAMPLES or 6)
@given(data=st.data())
def test_rule_matches_finite_differences(rule: registry.Rule, data: st.DataObject) -> None:
    args, kwargs = data.draw(CASES[rule.fn])
    for k, arg in enumerate(args):
        if isinstance(arg, (list, tuple)):
            if rule.vjp(k) not in (None, registry.zero) and all(
                np.asarray(a).dtype.kind == "f" for a in arg
            ):
                check_list_rule(rule, args, kwargs, k)
            continue
        moves = isinstance(arg, (float, complex)) or (
            isinstance(arg, np.ndarray) and arg.dtype.kind in "fc"
        )
        if rule.vjp(k) is None or not moves:
            continue
        if rule.vjp(k) is registry.zero and rule.fn in STEPS:
            continue  # a fit's start: the solution moves with it by the optimizer's noise alone
        try:
            analytic, numeric = projection_error(rule, args, kwargs, k, seed=k)
        except (StopIteration, ValueError, ZeroDivisionError):
            if rule.vjp(k) is registry.zero:
                # ``ans`` moved alone: min's chosen argument is no longer among its arguments
                continue
            raise
        if rule.vjp(k) is registry.zero and not math.isfinite(numeric):
            continue  # a helper's argument tied to another (``ans`` to ``x``): it cannot move alone
        assert math.isclose(analytic, numeric, rel_tol=_tolerance(rule),
                            abs_tol=1e-6 if rule.fn not in STEPS else 1e-5), (
            k, analytic, numeric
        )


FORWARD = [r for r in DIFFERENTIABLE if any(r.jvp(k) is not None for k in range(8))]


def leaves(value):
    """The float arrays and numbers inside ``value`` (tuples, lists, dicts and namedtuples
    opened)."""
    if isinstance(value, dict):
        return [leaf for key in value for leaf in leaves(value[key])]
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in leaves(item)]
    return [value]


def is_float(value) -> bool:
    """A float or complex number or array: what moves along a tangent."""
    return isinstance(value, (float, complex)) or (
        isinstance(value, np.ndarray) and value.dtype.kind in "fc"
    )


def moved(value, direction, t: float):
    """``value + t * direction``, leaf by leaf; leaves that are not floats stay."""
    if isinstance(value, dict):
        return {key: moved(value[key], direction[key], t) for key in value}
    if isinstance(value, (tuple, list)):
        parts = [moved(a, b, t) for a, b in zip(value, direction, strict=True)]
        return type(value)(*parts) if hasattr(value, "_fields") else type(value)(parts)
    if not is_float(value):
        return value
    if isinstance(value, np.ndarray):
        return value + t * direction
    return complex(value + t * direction) if isinstance(value, complex) else float(
        value + t * direction
    )


def direction_like(value, rng):
    """A random tangent shaped like ``value``; zero for leaves that are not floats."""
    if isinstance(value, dict):
        return {key: direction_like(value[key], rng) for key in value}
    if isinstance(value, (tuple, list)):
        parts = [direction_like(item, rng) for item in value]
        return type(value)(*parts) if hasattr(value, "_fields") else type(value)(parts)
    if not is_float(value):
        return 0.0
    if np.iscomplexobj(value):  # a complex leaf moves off the real line too
        return complex_direction(value, rng)
    return (
        rng.standard_normal(np.shape(value))
        if isinstance(value, np.ndarray)
        else float(rng.standard_normal())
    )


def complex_direction(value, rng):
    """A random complex tangent shaped like the complex ``value``."""
    if isinstance(value, np.ndarray):
        return rng.standard_normal(value.shape) + 1j * rng.standard_normal(value.shape)
    return complex(rng.standard_normal(), rng.standard_normal())


def paired(a, b) -> float:
    """<a, b> over every leaf (numpy broadcasting a smaller leaf of ``a``, as a tangent may be):
    the real part, where they are complex."""
    return float(
        sum(
            np.real(np.sum(np.asarray(x) * np.asarray(y)))
            for x, y in zip(leaves(a), leaves(b), strict=True)
        )
    )


@pytest.mark.parametrize("rule", FORWARD, ids=_name)
@settings(max_examples=RULE_EXAMPLES or 4)
@given(data=st.data())
def test_forward_rule_matches_finite_differences(rule: registry.Rule, data: st.DataObject) -> None:
    """<u, jvp_k(v)> against finite differences, and against <vjp_k(u), v> where there is a reverse
    rule."""
    args, kwargs = data.draw(CASES[rule.fn])
    ans = rule.fn(*args, **kwargs)
    for k, arg in enumerate(args):
        if rule.jvp(k) is None or not any(is_float(leaf) for leaf in leaves(arg)):
            continue
        if rule.jvp(k) is registry.zero and rule.fn in STEPS:
            continue  # (a fit's start, as above)
        rng = np.random.default_rng(k)
        v = direction_like(arg, rng)
        u = direction_like(observed(ans, fn=rule.fn), rng)
        dot = observed(tracer.tangent(rule, k, v, ans, args, kwargs), ans, rule.fn)

        def along(t: float, k: int = k, v=v, u=u, arg=arg) -> float:
            shifted = list(args)
            shifted[k] = moved(arg, v, t)
            return paired(
                u, observed(canonical(rule.fn, rule.fn(*shifted, **kwargs), ans), fn=rule.fn)
            )
        try:
            h = STEPS.get(rule.fn, 1e-6)
            numeric = (along(h) - along(-h)) / (2 * h)
        except (StopIteration, ValueError, ZeroDivisionError):
            numeric = math.nan
        if rule.jvp(k) is registry.zero and not math.isfinite(numeric):
            continue  # a helper's argument tied to another (``ans`` to ``x``): it cannot move alone
        analytic = paired(u, dot)
        assert math.isclose(analytic, numeric, rel_tol=_tolerance(rule),
                            abs_tol=1e-6 if rule.fn not in STEPS else 1e-5), (
            k, analytic, numeric
        )
        vjp = rule.vjp(k)
        if vjp is not None and vjp is not registry.zero:
            bar = vjp(u, ans, *args, **kwargs)
            bar = bar if isinstance(arg, (tuple, list, dict)) else unbroadcast(bar, arg)
            assert math.isclose(paired(bar, v), analytic, rel_tol=1e-6, abs_tol=1e-8), (
                k,
                "dot-product identity",
            )


def test_every_forward_rule_is_checked() -> None:
    """Every rule with a reverse rule has a forward rule too."""
    missing = [_name(r) for r in DIFFERENTIABLE
               if any(r.vjp(k) not in (None,) and r.jvp(k) is None for k in range(len(r.vjps)))]
    assert not missing, f"rules with a reverse rule but no forward rule: {missing}"


@pytest.mark.parametrize("rule", NONDIFF, ids=_name)
def test_nondiff_rules_stop_the_gradient(rule: registry.Rule) -> None:
    """A non-differentiable function applied to a traced value gives back a plain, untraced
    value."""
    def box(value: object) -> tracer.Box:
        return tracer.Box(value, tracer.Node(value, []), tracer.new_level())
    shaped = {
        np.zeros: (3,),
        np.ones: (3,),
        np.empty: (3,),
        np.eye: (3,),
        np.identity: (3,),
        np.full: (3, box(0.7)),
        np.arange: (box(3.0),),
        np.linspace: (box(0.0), 1.0),
        np.unravel_index: (box(np.array([1, 2])), (2, 3)),
        np.left_shift: (box(np.array([1, 2])), 1),
        np.right_shift: (box(np.array([4, 2])), 1),
        np.invert: (box(np.array([1, 2])),),
        np.gcd: (box(np.array([4, 6])), 2),
        np.lcm: (box(np.array([4, 6])), 2),
        np.bitwise_and: (box(np.array([4, 6])), 2),
        np.bitwise_or: (box(np.array([4, 6])), 2),
        np.bitwise_xor: (box(np.array([4, 6])), 2),
        check_in_place: (box(np.ones(2)), (np.zeros(2),), "here"),
        check_kept: (box(0.5), "here"),
        runtime.check_item_apart: ([box(np.ones(2)), np.zeros(2)], (0,), "here"),
        runtime.view_of: (box(np.ones(2)), np.zeros(2), None, False, "here"),
        runtime.slots_holding: ([box(np.ones(2)), np.zeros(2)], np.ones(3), "here"),
        runtime.slots_changed: ([box(np.ones(2)), np.zeros(2)], 0, 0.5, "here"),
        runtime.is_same: (box(np.ones(2)), np.ones(2)),
        runtime.shared_family: (box(np.ones(2)), (np.zeros(2),), "here"),
        runtime.view_probe: (box(np.ones(3)), __import__("operator").getitem, slice(1, None)),
        check_bound: (box(True), "y", "here"),
        runtime.check_jvp_layout: ("here", box(np.ones(2)), np.zeros(2)),
        runtime.balanced_eq: (box(np.array([1.0, 2.0])), np.array([1.0, 3.0]), 0.5),
        runtime.clip_mask: (box(np.array([1.0, -2.0])), -0.5, 0.7),
        runtime.tensordot_spec: (box(np.ones((2, 3))), np.ones((3, 2)), 1),
        np.broadcast_shapes: ((2,), (3, 2)),
        runtime.field_position: (box(collections.namedtuple("Pair", "a b")(0.5, 1.5)), "b"),
        runtime.keys_of: ({"a": box(0.5), "b": 1.5},),
        runtime.key_tangent: (box(2), {2: 0.5}),
    }
    # stands for a missing attribute: it raises, as reading one does in Python
    if rule.fn is absent:
        with pytest.raises(AttributeError):
            tracer.apply(absent, "np", "missing")
        return
    if rule.fn in shaped:
        assert not isinstance(tracer.apply(rule.fn, *shaped[rule.fn]), tracer.Box)
        return
    candidates = [
        (box(np.array([0.5, 1.5])),),
        (box(0.7),),
        (box(np.array([0.5, 1.5])), 1.0),
        (box(0.7), 1.0),
        (box(0.7), float),
        (box(3),),
    ]
    for args in candidates:
        try:
            result = tracer.apply(rule.fn, *args)
        except (TypeError, ValueError):
            continue
        assert not isinstance(result, tracer.Box)
        return
    pytest.fail(f"no example arguments fit {_name(rule)}")


def check_list_rule(rule: registry.Rule, args: tuple, kwargs: dict, k: int) -> None:
    """Rules whose argument is a list of arrays: check each entry of the list by random
    projection."""
    rng = np.random.default_rng(k)
    items = args[k]
    ans = rule.fn(*args, **kwargs)
    u = random_like(observed(ans, fn=rule.fn), rng)
    parts = rule.vjp(k)(u, ans, *args, **kwargs)
    assert len(parts) == len(items)
    for i, item in enumerate(items):
        v = rng.standard_normal(np.shape(item))

        def along(t: float, i: int = i, v: np.ndarray = v, item: np.ndarray = item) -> float:
            moved = list(items)
            moved[i] = item + t * v
            call = list(args)
            call[k] = type(items)(*moved) if hasattr(items, "_fields") else type(items)(moved)
            return pairing(u, observed(rule.fn(*call, **kwargs), fn=rule.fn))
        h = STEPS.get(rule.fn, 1e-6)
        numeric = (along(h) - along(-h)) / (2 * h)
        analytic = float(np.sum(unbroadcast(parts[i], item) * v))
        assert math.isclose(analytic, numeric, rel_tol=_tolerance(rule),
                            abs_tol=1e-6 if rule.fn not in STEPS else 1e-5), (
            i, analytic, numeric
        )


@pytest.mark.parametrize(
    "fn", registry.with_fact("view"), ids=lambda fn: getattr(fn, "__name__", str(fn))
)
def test_a_view_fact_is_one_python_has(fn) -> None:
    """Each function declared to return a view (``registry.def_view``; ast_ad guards writes through
    such results) does share memory with its first argument for some call: the fact is not a
    guess."""
    x = np.arange(6.0).reshape(2, 3)
    extra = {
        np.reshape: ((3, 2),),
        np.swapaxes: (0, 1),
        np.moveaxis: (0, 1),
        np.broadcast_to: ((4, 2, 3),),
        np.expand_dims: (0,),
        __import__("operator").getitem: ((0,),),
        runtime.astype_view: (np.float64,),
        runtime.augmented_value: (x - 1.0,),  # (``x`` itself, where it fits ``y``)
    }
    if fn is runtime.list_item:  # an item of a list: the very object the list holds
        xs = [x, x + 1.0]
        assert fn(xs, 1, 2) is xs[1]
        return
    if fn in (np.imag, np.complex128):  # the parts of a complex array, or the array itself
        x = x + 1j
    if fn is np.dsplit:
        x = x.reshape(1, 2, 3)
    extra.update({np.split: (2,), np.array_split: (2,), np.hsplit: (3,), np.vsplit: (2,),
                  np.dsplit: (3,)})
    out = fn(x, *extra.get(fn, ()))
    # (a list of views: each item)
    assert all(np.shares_memory(o, x) for o in (out if isinstance(out, (list, tuple)) else [out]))


def test_every_function_that_returns_a_view_is_declared_one() -> None:
    """The converse: each registered function (not ast_ad's own) called on arrays of one and two
    axes, real and complex, whose result shares memory with the argument (numpy asked) is declared
    a view (``def_view``; a list of them: ``def_sequence``). A write through an undeclared one was
    lost: ``v = np.flip(y); v[0] = a`` left ``y`` as it was in ast_ad's code and in its
    gradient."""
    from ast_ad.frontend.lower_calls import ATTRIBUTE_PRIMITIVES

    undeclared = set()
    arrays = [np.arange(12.0).reshape(3, 4), np.arange(6.0)]
    arrays += [a + 1j for a in arrays]
    # (and what an attribute read is: ``x.mT`` is ast_ad's ``T``)
    for fn in [*registry._RULES, *ATTRIBUTE_PRIMITIVES.values()]:
        module = getattr(fn, "__module__", "") or ""
        # (numpy's and the standard library's: not ast_ad's, nor a test's own registrations)
        if not callable(fn) or module.split(".")[0] not in ("numpy", "math", "builtins",
                                                             "operator", "cmath", "scipy") \
                and fn not in ATTRIBUTE_PRIMITIVES.values():
            continue
        for x in arrays:
            try:
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    out = fn(x)
            except Exception:  # (a function of other arguments)
                continue
            outs = out if isinstance(out, (list, tuple)) else [out]
            if any(isinstance(o, np.ndarray) and np.shares_memory(o, x) for o in outs) and not (
                registry.returns_view(fn) or registry.returns_sequence(fn)
            ):
                undeclared.add(getattr(fn, "__qualname__", repr(fn)))
    assert not undeclared, sorted(undeclared)


@pytest.mark.parametrize(
    "fn", registry.with_fact("full_reduction"), ids=lambda fn: getattr(fn, "__name__", str(fn))
)
def test_a_full_reduction_of_one_argument_is_a_number(fn) -> None:
    assert np.ndim(fn(np.arange(6.0).reshape(2, 3) if fn is not float else np.float64(2.5))) == 0


@pytest.mark.parametrize("fn", list(registry.fact_table("shape_read")), ids=lambda fn: fn.__name__)
@settings(max_examples=15)
@given(data=st.data())
def test_a_shape_read_fact_holds(fn, data: st.DataObject) -> None:
    """Each function declared to read only the shape of an argument (``registry.def_shape_read``;
    reverse mode then keeps a shape in place of an array a loop overwrites) computes the same from
    that shape."""
    k, by_shape = registry.shape_read(fn)
    args = (
        list(data.draw(CASES[fn])[0]) if fn in CASES else [data.draw(arrays((2, 3)) | arrays((3,)))]
    )
    given_shape = [*args[:k], np.shape(args[k]), *args[k + 1:]]
    if by_shape is None:
        assert fn(*args) == np.shape(args[k])
    else:
        np.testing.assert_array_equal(by_shape(*given_shape), fn(*args))
        assert np.shape(by_shape(*given_shape)) == np.shape(fn(*args))


@pytest.mark.parametrize("fn", list(registry.fact_table("result_axes")),
                         ids=lambda fn: getattr(fn, "__name__", str(fn)))
@settings(max_examples=15)
@given(data=st.data())
def test_a_result_axes_fact_holds(fn, data: st.DataObject) -> None:
    """Each function declared to have its result's axes from its arguments' (``registry.
    def_result_axes``; shape classes and shapes computed once rest on it) gives a result of those
    lengths, and one declared to have an argument's shape whatever its rank (``def_shape_of``) has
    that argument's shape."""
    args, kwargs = data.draw(CASES[fn]) if fn in CASES else \
        ((data.draw(arrays((2, 3)) | arrays((3,)) | arrays((2, 1, 2)))[()],), {})
    args = list(args)
    result = fn(*args, **kwargs)
    ranks = tuple(a.ndim if isinstance(a, np.ndarray) and a.ndim >= 1 else None for a in args)
    axes = registry.result_axes(fn, ranks)
    if not kwargs and axes is not None:
        assert np.shape(result) == tuple(np.shape(args[a])[axis] for a, axis in axes)
    owner = registry.shape_of(fn, len(args))
    if not kwargs and owner is not None:
        assert np.shape(result) == np.shape(args[owner])


def _writes_into_a_parameter(fn: ast.FunctionDef) -> bool:
    """Whether ``fn`` writes into an argument: ``x[i] = ...``, ``x[i] += ...``, ``np.add.at(x,
    ...)``, ``x.sort()``, ``xs.append(...)`` and the like, on a parameter's name (conservatively:
    even if rebound)."""
    params = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
    writers = (
        "add.at",
        "put_along_axis",
        "copyto",
        "put",
        "place",
        "fill_diagonal",
        "scatter_add",
        "add_into",
    )
    methods = {
        "sort",
        "fill",
        "resize",
        "append",
        "extend",
        "pop",
        "insert",
        "remove",
        "clear",
        "update",
    }
    for node in ast.walk(fn):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AugAssign) else []
        if any(
            isinstance(sub, ast.Subscript)
            and isinstance(sub.value, ast.Name)
            and sub.value.id in params
            for target in targets
            for sub in ast.walk(target)
        ):
            return True
        if isinstance(node, ast.Call):
            called = ast.unparse(node.func)
            if any(called == w or called.endswith("." + w) for w in writers) and node.args \
                    and isinstance(node.args[0], ast.Name) \
                    and node.args[0].id in params:
                return True
            if isinstance(node.func, ast.Attribute) and node.func.attr in methods \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in params:
                return True
    return False


def test_a_helper_that_writes_into_its_argument_is_declared_in_place() -> None:
    """The normalizer takes ast_ad's own helpers to change none of their arguments unless the
    registry says so (``def_in_place``): reverse mode, reading a helper by its source, must see the
    write as one (an undeclared ``scatter_add(out, ...)`` once gave a zero gradient). Every helper
    that writes into a parameter is declared."""
    modules = [
        importlib.import_module(f"{runtime.__name__}.{m.name}")
        for m in pkgutil.iter_modules(runtime.__path__)
    ]
    writers = [fn.name for module in modules for fn in ast.parse(inspect.getsource(module)).body
               if isinstance(fn, ast.FunctionDef) and _writes_into_a_parameter(fn)]
    assert "scatter_add" in writers  # the scan finds what it looks for
    undeclared = [name for name in writers if registry.in_place(getattr(runtime, name)) is None]
    assert not undeclared, f"helpers that write into an argument without def_in_place: {undeclared}"


def _container(value) -> bool:
    return isinstance(value, (list, tuple, dict))


# (a function's result is a container or not whatever the case's numbers: four cases a rule)
@pytest.mark.parametrize("rule", [r for r in DIFFERENTIABLE if r.fn in CASES], ids=_name)
@settings(max_examples=4)
@given(data=st.data())
def test_a_result_that_is_a_container_is_declared_so(
    rule: registry.Rule, data: st.DataObject
) -> None:
    """Reverse mode adds a container's adjoints element by element (``add_adjoints``), where it
    knows the name holds one; with ``+`` it would join two lists into one, a wrong gradient and no
    error. What a call returns it knows from the registry: a function that returns a sequence
    (``def_sequence``), or one whose result has the kind of one of its arguments (``def_same_kind``,
    its positions). Every registered function whose result is a list, tuple or dict on its cases is
    declared one way or the other."""
    args, kwargs = data.draw(CASES[rule.fn])
    try:
        ans = rule.fn(*args, **kwargs)
    except Exception:  # noqa: BLE001 -- a case a function refuses says nothing of its kind
        return
    if _container(ans) and not registry.returns_sequence(rule.fn):
        same = registry.keeps_kind(rule.fn)
        assert any(k < len(args) and _container(args[k]) for k in same), (
            f"{_name(rule)} returned a {type(ans).__name__}: declare def_sequence or "
            "def_same_kind(argnums=...)"
        )


@pytest.mark.parametrize(
    ("fn", "args"),
    [
        (runtime.getitem_vjp, (1.0, [1.0, 2.0], 0)),
        (runtime.summed_getitem_vjp, ([(1.0, 0)], (1.0, 2.0))),
        (runtime.dense_adjoint, (0.0, [1.0, 2.0])),
        (runtime.assign_item_vjp_x, ([1.0, 2.0], [1.0, 2.0], 0)),
        (runtime.zeros_like, ({"w": 1.0},)),
        (runtime.part_vjp, (1.0, [1.0, 2.0], 0)),
        (runtime.add_adjoints, (None, [1.0])),
        (runtime.unstack, (np.ones((2, 3)), [np.ones(3), np.ones(3)])),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_a_helper_that_gives_a_container_for_a_container_is_declared_so(fn, args) -> None:
    """The adjoint helpers whose cases hold no container, given one: a container back, and
    declared."""
    assert _container(fn(*args))
    assert any(_container(args[k]) for k in registry.keeps_kind(fn)) or registry.returns_sequence(
        fn
    )


def _new_list_cases() -> dict:
    """A call with lists among its arguments for every function declared to make new lists
    (``def_new_list``)."""
    import builtins

    from ast_ad.runtime import concat, sorted_by

    a, b = np.ones(3), np.arange(3.0)
    return {
        runtime.unpopped: ([1.0], 2.0, [a, b]),
        runtime.spread: (1.0, [a, b]),
        runtime.detached: ([a, [1.0]],),
        runtime.zeros_like: ([a, [1.0]],),
        runtime.zero_tangent: ([a, [1.0]],),
        runtime.unstack: (np.ones((2, 3)), [a, b]),
        runtime.getitem_vjp: (1.0, [a, b], 0),
        runtime.list_item_vjp: (1.0, [a, b], 1, 2),
        runtime.sorted_by_vjp: ([a, b], [a, b], [2.0, 1.0]),
        runtime.concat_vjp_a: ([a, b, a], [a], [b, a]),
        runtime.concat_vjp_b: ([a, b, a], [a], [b, a]),
        runtime.repeat_seq_vjp: ([a, b, a, b], [a, b], 2),
        runtime.sequence_vjp: ([a, b], [a, b]),
        runtime.part_vjp: (1.0, [a, b], 0),
        runtime.add_adjoints: ([a], [b]),
        runtime.dense_adjoint: ([a], [b]),
        runtime.fit: ([a], [b]),
        builtins.list: ([a, b],),
        concat: ([a], [b]),
        sorted_by: ([a, b], [2.0, 1.0]),
    }


def _holds(container, obj) -> bool:
    items = container.values() if isinstance(container, dict) else container
    return isinstance(container, (list, tuple, dict)) and any(
        item is obj or _holds(item, obj) for item in items
    )


@pytest.mark.parametrize("fn", list(registry.fact_table("new_list")), ids=lambda fn: fn.__name__)
def test_a_function_declared_to_make_new_lists_makes_them(fn) -> None:
    """Reverse mode undoes the pops of a list a function makes (``analysis.owned_lists``), a new
    list from a function declared with ``def_new_list``: no argument may be that list or hold it,
    but one at the positions declared (``add_adjoints(None, xs)`` is ``xs``). Every declared
    function has a case here."""
    args = _new_list_cases()[fn]
    ans = fn(*args)
    assert isinstance(ans, list)
    passes = registry.new_list(fn)
    for k, arg in enumerate(args):
        assert k in passes or arg is not ans, f"{fn.__name__} returned its argument {k}"
        assert not _holds(arg, ans), f"{fn.__name__} returned a list its argument {k} holds"
    for k in passes:  # and the argument it may give back is given back where the other is None
        given = tuple(None if j != k and j in passes else arg for j, arg in enumerate(args))
        assert fn(*given) is args[k]


@pytest.mark.parametrize("fn", registry.with_fact("number_result"), ids=lambda fn: fn.__name__)
def test_a_function_declared_to_give_a_python_number_gives_one(fn) -> None:
    """``def_number_result``: the generated code takes an adjoint out of sums of such results
    (``fold.shared_factor``), which is exact only in Python's own numbers. Every declared function,
    given numpy floats and 0-d arrays as well as Python floats, gives a Python ``float``, ``int`` or
    ``bool``, or refuses the argument (``math.trunc`` of a float32), and refuses an array of more
    than one entry."""
    import math

    nargs = (
        1 if fn is math.fsum else len(registry.lookup(fn).vjps) if registry.lookup(fn).vjps else 1
    )
    given = 0
    for x in (0.5, np.float64(0.5), np.float32(0.5), np.array(0.5), np.ones(2)):
        args = ([x, x],) if fn is math.fsum else (x,) * nargs
        try:
            ans = fn(*args)
        except TypeError:
            assert type(x) is not float, fn  # a Python float it takes
            continue
        assert type(ans) in (float, int, bool) and np.ndim(x) == 0, fn
        given += 1
    assert given >= 2
