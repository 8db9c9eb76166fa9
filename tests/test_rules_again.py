"""Every registered rule differentiated twice: forward mode over the forward-mode code of a call of
it.

``test_rules`` checks each rule; this checks that the code a rule writes can itself be
differentiated (the output language is the input language): for ``probe(x) = f(..., x, ...)`` and a
direction ``v``, the generated second-order code's ``d/dt jvp(probe, x + t v, v)`` is compared with
finite differences of the first-order ``jvp``. Helpers that forward rules call are differentiated by
their rules, or by their source where it is in ast_ad's language (``forward.by_source``). A
``MissingRuleError`` (a helper with neither) fails the test; an ``UnsupportedDerivativeError`` (a
derivative refused for the arguments drawn, as np.linalg.norm's with ``ord='nuc'``) passes it.
"""

from __future__ import annotations

import importlib
import itertools
import math
import sys
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ast_ad
from ast_ad.api import compose
from ast_ad.core import registry
from ast_ad.errors import UnsupportedDerivativeError
from tests.rule_cases import CASES
from tests.test_rules import DIFFERENTIABLE, _name, direction_like, leaves, paired

# the part of a factorization that has no sign to choose
SIGNS = {np.linalg.eigh: 0, np.linalg.svd: 1}
_serial = itertools.count()


@pytest.fixture(scope="module")
def probes(tmp_path_factory):
    """Modules of one-line functions ``probe(x)``, written once per rule, argument and keywords."""
    place = tmp_path_factory.mktemp("probes")
    sys.path.insert(0, str(place))
    made: dict[tuple, object] = {}

    def probe(fn, k: int, args: tuple, kwargs: dict):
        """The module of ``probe(x) = fn(*args, **kwargs)`` with ``x`` in place of argument
        ``k``."""
        key = (fn, k, len(args), tuple(kwargs))
        if key not in made:
            name = f"probe_{next(_serial)}"
            params = ", ".join("x" if j == k else f"A{j}" for j in range(len(args)))
            keywords = "".join(f", {key}=K_{key}" for key in kwargs)
            (place / f"{name}.py").write_text(f"def probe(x):\n    return FN({params}{keywords})\n")
            module = importlib.import_module(name)
            module.FN = fn
            made[key] = module
        module = made[key]
        for j, a in enumerate(args):
            setattr(module, f"A{j}", a)
        for name, value in kwargs.items():
            setattr(module, f"K_{name}", value)
        return module
    yield probe
    sys.path.remove(str(place))


def _positive_r(tangent, value):
    """A tangent of ``q, r = qr(a)`` in the convention where ``r``'s diagonal is positive."""
    signs = np.sign(np.diagonal(value[1], axis1=-2, axis2=-1))
    return tangent[0] * signs[..., None, :], tangent[1] * signs[..., :, None]


def _floats(arg) -> bool:
    return isinstance(arg, float) or (isinstance(arg, np.ndarray) and arg.dtype.kind == "f")


# scipy's solvers and ``quad`` take their derivatives from ast_ad's derivatives of the user's
# function, at run time: a derivative of a derivative through one is refused, by design for now
# (``test_solvers.test_a_second_derivative_through_a_solver_is_refused``)
AGAIN = [r for r in DIFFERENTIABLE if r.origin != "ast_ad.api.solvers"]


@pytest.mark.parametrize("rule", AGAIN, ids=_name)
@settings(
    max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_forward_rule_differentiates_again(
    rule: registry.Rule, probes, data: st.DataObject
) -> None:
    args, kwargs = data.draw(CASES[rule.fn])
    for k, x in enumerate(args):
        if rule.jvp(k) in (None, registry.zero) or not _floats(x):
            continue
        module = probes(rule.fn, k, args, kwargs)
        rng = np.random.default_rng(k)
        v = direction_like(x, rng)

        def first(at, v=v, module=module):
            return ast_ad.jvp(module.probe, (at,), (v,))[1]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            try:
                second = ast_ad.jvp(compose.Fixed(module.probe, ((0,), True), v), (x,), (v,))[1]
            except UnsupportedDerivativeError:
                # a refusal for these arguments, saying what to write instead (np.linalg.norm's
                # 'nuc')
                continue
            h = 1e-6
            ahead, behind = first(x + h * v), first(x - h * v)
        part = SIGNS.get(rule.fn)
        if part is not None:
            second, ahead, behind = second[part], ahead[part], behind[part]
        # LAPACK flips a column's sign where the entries below it are exactly zero
        if rule.fn is np.linalg.qr:
            second, ahead, behind = (_positive_r(t, module.probe(at)) for t, at in
                                     ((second, x), (ahead, x + h * v), (behind, x - h * v)))
        u = [direction_like(leaf, np.random.default_rng(7)) for leaf in leaves(second)]
        numeric = (paired(u, ahead) - paired(u, behind)) / (2 * h)
        analytic = paired(u, second)
        assert math.isclose(analytic, numeric, rel_tol=1e-5, abs_tol=1e-6), (k, analytic, numeric)


# ---- reverse mode over a helper that has forward rules only: read by its source ------------------
# A helper of ast_ad's generated code with a forward rule for an argument but no reverse rule there
# is differentiated by reverse mode as a user's function is, by its source (``Reverser.by_source``):
# every one of them, so a refusal fails the test (a helper outside the language needs a transpose
# written beside its forward rule).
FORWARD_ONLY = [
    r
    for r in DIFFERENTIABLE
    if any(r.jvp(k) not in (None, registry.zero) and r.vjp(k) is None for k in range(12))
]


@pytest.mark.parametrize("rule", FORWARD_ONLY, ids=_name)
@settings(
    max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_reverse_mode_reads_a_helper_without_a_reverse_rule_by_its_source(
    rule: registry.Rule, probes, data: st.DataObject
) -> None:
    """<vjp(probe)(u), v> against <u, jvp_k(v)>, the forward rule (itself checked against finite
    differences in ``test_rules``); and the adjoint ``u`` the caller passes is not changed (the
    backward pass pops lists)."""
    import copy

    from ast_ad.testing import tracer
    from tests.test_rules import is_float

    args, kwargs = data.draw(CASES[rule.fn])
    ans = rule.fn(*args, **kwargs)
    for k, x in enumerate(args):
        if (
            rule.jvp(k) in (None, registry.zero)
            or rule.vjp(k) is not None
            or not any(is_float(a) for a in leaves(x))
        ):
            continue
        module = probes(rule.fn, k, args, kwargs)
        rng = np.random.default_rng(k)
        v, u = direction_like(x, rng), direction_like(ans, rng)
        dot = tracer.tangent(rule, k, v, ans, args, kwargs)
        # a MissingRuleError fails: reverse mode refused the helper
        _, vjp_fn = ast_ad.vjp(module.probe, x)
        kept = copy.deepcopy(u)
        bar = vjp_fn(u)[0]
        assert math.isclose(paired(bar, v), paired(u, dot), rel_tol=1e-6, abs_tol=1e-8), (
            k,
            "dot-product identity",
        )
        assert all(np.array_equal(a, b) for a, b in zip(leaves(kept), leaves(u), strict=True))
