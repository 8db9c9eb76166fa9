"""Every registered rule against central finite differences, by random projection.

For ``ans = f(*args)`` and random ``u`` (shaped like ``ans``) and ``v`` (shaped
like argument k), ``<vjp_k(u), v>`` must equal the derivative of
``<u, f(..., x_k + t v, ...)>`` at t = 0. No Jacobian is ever built.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ast_ad import registry, tracer
from ast_ad.runtime import absent, check_in_place, check_kept, unbroadcast
from tests.rule_cases import CASES

# ast_ad's own rules (tests and users may register more; those are checked where they are defined)
DIFFERENTIABLE = [r for r in registry.registered() if not r.nondiff and r.origin.startswith("ast_ad.rules")]
NONDIFF = [r for r in registry.registered() if r.nondiff]


def _name(rule: registry.Rule) -> str:
    return f"{getattr(rule.fn, '__module__', '') or ''}.{getattr(rule.fn, '__name__', rule.fn)}"


def test_every_rule_has_a_case() -> None:
    missing = [_name(r) for r in DIFFERENTIABLE if r.fn not in CASES]
    assert not missing, f"rules with no finite-difference case in tests/rule_cases.py: {missing}"


def random_like(value, rng):
    """A random cotangent shaped like ``value`` (a tuple or list of them for sequence results)."""
    if isinstance(value, (tuple, list)):
        return type(value)(random_like(v, rng) for v in value) if not hasattr(value, "_fields") else \
            tuple(random_like(v, rng) for v in value)
    return rng.standard_normal(np.shape(value))


def pairing(u, value) -> float:
    """<u, value>, summed over the parts of a sequence."""
    if isinstance(value, (tuple, list)):
        return sum(pairing(a, b) for a, b in zip(u, value, strict=True))
    return float(np.sum(u * value))


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
        signs = np.sign(np.diagonal(r, axis1=-2, axis2=-1) * np.diagonal(reference[1], axis1=-2, axis2=-1))
        return q * signs[..., None, :], r * signs[..., :, None]
    return value


def projection_error(rule: registry.Rule, args: tuple, kwargs: dict, k: int, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    ans = rule.fn(*args, **kwargs)
    u = random_like(ans, rng)
    v = rng.standard_normal(np.shape(args[k]))
    vjp = unbroadcast(rule.vjp(k)(u, ans, *args, **kwargs), args[k])
    assert np.shape(vjp) == np.shape(args[k])
    analytic = float(np.sum(vjp * v))

    def along(t: float) -> float:
        moved = list(args)
        moved[k] = args[k] + t * v if np.ndim(args[k]) else float(args[k] + t * v)
        return pairing(u, canonical(rule.fn, rule.fn(*moved, **kwargs), ans))
    eps = 1e-6
    return analytic, (along(eps) - along(-eps)) / (2 * eps)


@pytest.mark.parametrize("rule", DIFFERENTIABLE, ids=_name)
@settings(max_examples=25)
@given(data=st.data())
def test_rule_matches_finite_differences(rule: registry.Rule, data: st.DataObject) -> None:
    args, kwargs = data.draw(CASES[rule.fn])
    for k, arg in enumerate(args):
        if isinstance(arg, (list, tuple)):
            if rule.vjp(k) not in (None, registry.zero) and all(np.asarray(a).dtype.kind == "f" for a in arg):
                check_list_rule(rule, args, kwargs, k)
            continue
        is_float = isinstance(arg, float) or (isinstance(arg, np.ndarray) and arg.dtype.kind == "f")
        if rule.vjp(k) is None or not is_float:
            continue
        analytic, numeric = projection_error(rule, args, kwargs, k, seed=k)
        assert math.isclose(analytic, numeric, rel_tol=1e-5, abs_tol=1e-6), (k, analytic, numeric)


@pytest.mark.parametrize("rule", NONDIFF, ids=_name)
def test_nondiff_rules_stop_the_gradient(rule: registry.Rule) -> None:
    """A non-differentiable function applied to a traced value gives back a plain, untraced value."""
    def box(value: object) -> tracer.Box:
        return tracer.Box(value, tracer.Node(value, []))
    shaped = {np.zeros: (3,), np.ones: (3,), np.empty: (3,), np.eye: (3,), np.identity: (3,),
              np.full: (3, box(0.7)), np.arange: (box(3.0),), np.linspace: (box(0.0), 1.0),
              np.unravel_index: (box(np.array([1, 2])), (2, 3)),
              np.left_shift: (box(np.array([1, 2])), 1), np.right_shift: (box(np.array([4, 2])), 1),
              np.invert: (box(np.array([1, 2])),), np.gcd: (box(np.array([4, 6])), 2),
              np.lcm: (box(np.array([4, 6])), 2), np.bitwise_and: (box(np.array([4, 6])), 2),
              np.bitwise_or: (box(np.array([4, 6])), 2), np.bitwise_xor: (box(np.array([4, 6])), 2),
              check_in_place: (box(np.ones(2)), (np.zeros(2),), "here"), check_kept: (box(0.5), "here")}
    if rule.fn is absent:  # stands for a missing attribute: it raises, as reading one does in Python
        with pytest.raises(AttributeError):
            tracer.apply(absent, "np", "missing")
        return
    if rule.fn in shaped:
        assert not isinstance(tracer.apply(rule.fn, *shaped[rule.fn]), tracer.Box)
        return
    candidates = [(box(np.array([0.5, 1.5])),), (box(0.7),), (box(np.array([0.5, 1.5])), 1.0), (box(0.7), 1.0),
                  (box(0.7), float), (box(3),)]
    for args in candidates:
        try:
            result = tracer.apply(rule.fn, *args)
        except (TypeError, ValueError):
            continue
        assert not isinstance(result, tracer.Box)
        return
    pytest.fail(f"no example arguments fit {_name(rule)}")


def check_list_rule(rule: registry.Rule, args: tuple, kwargs: dict, k: int) -> None:
    """Rules whose argument is a list of arrays: check each entry of the list by random projection."""
    rng = np.random.default_rng(k)
    items = args[k]
    ans = rule.fn(*args, **kwargs)
    u = random_like(ans, rng)
    parts = rule.vjp(k)(u, ans, *args, **kwargs)
    assert len(parts) == len(items)
    for i, item in enumerate(items):
        v = rng.standard_normal(np.shape(item))

        def along(t: float, i: int = i, v: np.ndarray = v, item: np.ndarray = item) -> float:
            moved = list(items)
            moved[i] = item + t * v
            call = list(args)
            call[k] = type(items)(*moved) if hasattr(items, "_fields") else type(items)(moved)
            return pairing(u, rule.fn(*call, **kwargs))
        numeric = (along(1e-6) - along(-1e-6)) / 2e-6
        analytic = float(np.sum(unbroadcast(parts[i], item) * v))
        assert math.isclose(analytic, numeric, rel_tol=1e-5, abs_tol=1e-6), (i, analytic, numeric)
