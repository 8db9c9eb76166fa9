"""Forward mode and stacked transformations: jvp, vjp, Jacobians, Hessians, derivatives of any
order.

Oracles: finite differences of the function's own run; reverse mode by the dot-product identity
<v, J u> = <J^T v, u>; autograd's hessian where autograd applies; closed forms for higher orders.
"""

from __future__ import annotations

import copy
import math
import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ast_ad
from ast_ad.errors import ASTADError, MissingRuleError
from ast_ad.modes.checkpointing import CheckpointWarning
from ast_ad.runtime import check_in_place
from ast_ad.testing.checking import directional
from ast_ad.testing.random_programs import programs
from tests import compose_functions as cf
from tests import compose_nested as nested_functions
from tests import corpus_control
from tests.compose_functions import branchy, reductions, rnn_loss, solves
from tests.corpus import CASES as STRAIGHT
from tests.corpus import Case
from tests.oracles import assert_fd, with_autograd_numpy
from tests.strategies import half

CASES = STRAIGHT + corpus_control.CASES
IDS = [f"{case.fn.__name__}-{i}" for i, case in enumerate(CASES)]


def direction(value, rng):
    return (
        rng.standard_normal(np.shape(value))
        if isinstance(value, np.ndarray)
        else float(rng.standard_normal())
    )


def tangents_for(case: Case, args: tuple, rng) -> tuple:
    return tuple(direction(a, rng) if k in case.argnums else None for k, a in enumerate(args))


@pytest.mark.parametrize("case", CASES, ids=IDS)
@settings(max_examples=20)
@given(data=st.data())
def test_jvp_matches_finite_differences_and_reverse_mode(case: Case, data: st.DataObject) -> None:
    args = data.draw(case.args)
    rng = np.random.default_rng(1)
    tangents = tangents_for(case, args, rng)
    out, out_dot = ast_ad.jvp(case.fn, args, tangents)
    assert out == case.fn(*args)  # the primal is the function's own value, bit for bit
    grads = ast_ad.grad(case.fn, case.argnums)(*args)
    # <1, J u> (a scalar output) = <grad, u>: forward and reverse mode agree
    reverse = sum(
        float(np.sum(np.asarray(g) * tangents[k])) for g, k in zip(grads, case.argnums, strict=True)
    )
    assert math.isclose(float(out_dot), reverse, rel_tol=1e-8, abs_tol=1e-10)
    if case.smooth:
        numeric = 0.0
        for k in case.argnums:
            numeric += directional(case.fn, args, k, np.asarray(tangents[k]))
        assert math.isclose(float(out_dot), numeric, rel_tol=1e-4, abs_tol=1e-5)


@pytest.mark.parametrize("case", CASES, ids=IDS)
@settings(max_examples=10)
@given(data=st.data())
def test_jvp_matches_the_forward_tracer(case: Case, data: st.DataObject) -> None:
    """The tracer's forward mode (dual numbers, the same rules, no transformation) is the oracle."""
    args = data.draw(case.args)
    tangents = tangents_for(case, args, np.random.default_rng(2))
    ours = ast_ad.jvp(case.fn, args, tangents)
    theirs = ast_ad.tracer.jvp(case.fn, args, tangents)
    # Python's own value (the tracer adds a generator's floats one by one, not with 3.12's
    # compensated sum)
    assert ours[0] == case.fn(*args)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-14)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-9, atol=1e-12)


def vector_valued(x, w):
    h = np.tanh(w @ x)
    return np.concatenate([h * x[0], np.cumsum(h)])


def looped(x):
    y = x
    for i in range(4):
        y = np.sin(y) * 1.5 + x[i % 3]
    return y


@pytest.mark.parametrize("fn", [vector_valued, looped])
def test_vjp_and_jvp_satisfy_the_dot_product_identity(fn) -> None:
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(3), rng.standard_normal((3, 3))
    args = (x, w) if fn is vector_valued else (x,)
    u = tuple(rng.standard_normal(np.shape(a)) for a in args)
    out, out_dot = ast_ad.jvp(fn, args, u)
    out2, vjp_fn = ast_ad.vjp(fn, *args)
    np.testing.assert_array_equal(out, out2)
    v = rng.standard_normal(np.shape(out))
    bars = vjp_fn(v)
    assert len(bars) == len(args)
    left = float(np.sum(v * out_dot))
    right = sum(float(np.sum(b * t)) for b, t in zip(bars, u, strict=True))
    assert math.isclose(left, right, rel_tol=1e-10)
    np.testing.assert_allclose(vjp_fn(v)[0], bars[0])  # vjp_fn can be called again


@pytest.mark.parametrize("fn", [vector_valued, looped])
def test_jacobians_by_both_modes_agree_with_finite_differences(fn) -> None:
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal(3), rng.standard_normal((3, 3))
    args = (x, w) if fn is vector_valued else (x,)
    forward, reverse, auto = (
        jac(fn)(*args) for jac in (ast_ad.jacfwd, ast_ad.jacrev, ast_ad.jacobian)
    )
    out = fn(*args)
    assert forward.shape == np.shape(out) + x.shape
    np.testing.assert_allclose(forward, reverse, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(auto, forward, rtol=1e-10, atol=1e-12)
    for j in range(x.size):
        e = np.zeros(x.size)
        e[j] = 1.0
        numeric = (fn(x + 1e-6 * e, *args[1:]) - fn(x - 1e-6 * e, *args[1:])) / 2e-6
        np.testing.assert_allclose(forward[..., j], numeric, rtol=1e-5, atol=1e-6)
    if fn is vector_valued:
        both = ast_ad.jacrev(fn, argnums=(0, 1))(*args)
        assert isinstance(both, tuple) and both[1].shape == np.shape(out) + w.shape


@pytest.mark.parametrize("fn, args", [
    (rnn_loss, (np.linspace(-0.5, 0.6, 9).reshape(3, 3), np.linspace(-1.0, 1.0, 12).reshape(4, 3))),
    (branchy, (np.array([0.4, -0.7, 1.1]),)),
    (reductions, (np.array([0.4, -0.7, 1.1, 0.2]),)),
    (solves, (np.array([0.4, -0.7, 1.1]),)),
    # lists built by append: the gradient pops their adjoints inside expressions (h_bar +
    # out_bar.pop())
    (corpus_control.list_building, (0.7,)),
    (cf.list_read_back, (np.array([0.4, -0.7, 1.1]),)),
])
def test_hessian_matches_autograd(fn, args) -> None:
    import autograd

    ours = ast_ad.hessian(fn)(*args)
    theirs = autograd.hessian(with_autograd_numpy(fn))(*args)
    assert ours.shape == np.shape(args[0]) * 2
    np.testing.assert_allclose(ours, theirs, rtol=1e-8, atol=1e-10)
    v = np.random.default_rng(0).standard_normal(np.shape(args[0]))
    hv = ast_ad.hvp(fn)(*args, v)
    np.testing.assert_allclose(hv, np.tensordot(ours, v, axes=v.ndim), rtol=1e-9, atol=1e-11)
    traced = ast_ad.tracer.jvp(ast_ad.tracer.grad(fn), args, (v,) + (None,) * (len(args) - 1))[1]
    np.testing.assert_allclose(hv, traced, rtol=1e-9, atol=1e-11)


def quartic(x):
    return math.sin(x) * x + math.exp(0.5 * x)


def test_derivatives_to_the_fourth_order_match_closed_forms() -> None:
    x = 0.7
    closed = [math.cos(x) * x + math.sin(x) + 0.5 * math.exp(0.5 * x),
              -math.sin(x) * x + 2 * math.cos(x) + 0.25 * math.exp(0.5 * x),
              -math.cos(x) * x - 3 * math.sin(x) + 0.125 * math.exp(0.5 * x),
              math.sin(x) * x - 4 * math.cos(x) + 0.0625 * math.exp(0.5 * x)]
    d = quartic
    for order, expected in enumerate(closed, start=1):
        d = ast_ad.grad(d)
        assert math.isclose(d(x), expected, rel_tol=1e-12), order
    # forward over reverse gives the same second derivative; the tracer, nesting its levels, agrees
    _, second = ast_ad.jvp(ast_ad.grad(quartic), (x,), (1.0,))
    assert math.isclose(second, closed[1], rel_tol=1e-12)
    traced = quartic
    for order, expected in enumerate(closed, start=1):
        traced = ast_ad.tracer.grad(traced)  # reverse over reverse over ...
        assert math.isclose(traced(x), expected, rel_tol=1e-12), order
    assert math.isclose(
        ast_ad.tracer.jvp(ast_ad.tracer.grad(quartic), (x,), (1.0,))[1], closed[1], rel_tol=1e-12
    )


def calls_a_helper(x):
    return helper_power(x, 3.0) + np.sin(x)


def helper_power(a, n):
    out = a
    for _ in range(int(n) - 1):
        out = out * a
    return out


def test_higher_order_through_a_helper_function() -> None:
    """The case other tools break on: a second derivative through a call to the user's own
    function."""
    x = 1.3
    second = ast_ad.grad(ast_ad.grad(calls_a_helper))(x)
    assert math.isclose(second, 6 * x - math.sin(x), rel_tol=1e-12)
    third = ast_ad.grad(ast_ad.grad(ast_ad.grad(calls_a_helper)))(x)
    assert math.isclose(third, 6 - math.cos(x), rel_tol=1e-12)


def mixed(x, y):
    return x * x * y + np.sin(x * y)


def test_mixed_partials_and_hessian_of_two_arguments() -> None:
    x, y = 0.4, 1.7
    dxy = ast_ad.grad(ast_ad.grad(mixed, 0), 1)(x, y)
    assert math.isclose(dxy, 2 * x + math.cos(x * y) - x * y * math.sin(x * y), rel_tol=1e-12)
    blocks = ast_ad.hessian(mixed, argnums=(0, 1))(x, y)
    assert math.isclose(float(blocks[0][1]), dxy, rel_tol=1e-12)
    assert math.isclose(float(blocks[1][0]), dxy, rel_tol=1e-12)


def test_vjp_of_a_gradient_is_a_hessian_vector_product() -> None:
    x = np.array([0.4, -0.7, 1.1])
    _, vjp_fn = ast_ad.vjp(ast_ad.grad(branchy), x)
    v = np.array([1.0, 2.0, -0.5])
    (hv,) = vjp_fn(v)
    np.testing.assert_allclose(hv, ast_ad.hessian(branchy)(x) @ v, rtol=1e-10)


def reverse_only(x):
    """A primitive of the tests' own, with a reverse rule and no forward rule."""
    return np.tanh(x)


ast_ad.extend.defvjp(reverse_only, lambda g, ans, x: g * (1.0 - ans * ans))


def with_reverse_only(x):
    return np.sum(reverse_only(x) ** 2)


def test_forward_mode_refuses_a_rule_it_lacks_at_the_users_line() -> None:
    with pytest.raises(MissingRuleError, match="forward-mode rule") as err:
        ast_ad.jvp(with_reverse_only, (np.eye(2) + 0.1,), (np.ones((2, 2)),))
    assert err.value.lineno == with_reverse_only.__code__.co_firstlineno + 1
    # reverse mode has what it needs
    assert ast_ad.grad(with_reverse_only)(np.eye(2)).shape == (2, 2)


def with_prod(x):
    return np.prod(x) * 2.0


def prod_of_powers(x):
    return np.prod(np.stack([x, x * x, x + 1.0]))


def test_np_prod_to_the_fourth_order() -> None:
    """The second derivative of np.prod is exact where entries are zero; its forward rule's helper
    (``prod_others_jvp``) is differentiated by its source (``forward.by_source``): x^4 + x^3 to the
    fourth order."""
    x = 0.7
    np.testing.assert_allclose(ast_ad.hessian(with_prod)(np.array([0.3, 0.4, 0.0])),
                               2.0 * np.array([[0, 0, 0.4], [0, 0, 0.3], [0.4, 0.3, 0]]))
    d = prod_of_powers
    for order, expected in enumerate(
        [4 * x**3 + 3 * x**2, 12 * x**2 + 6 * x, 24 * x + 6, 24.0], start=1
    ):
        d = ast_ad.grad(d)
        assert math.isclose(d(x), expected, rel_tol=1e-12), order


def cholesky_and_sort(v):
    m = np.reshape(v, (3, 3))
    return (
        np.sum(np.linalg.cholesky(m @ m.T + 3.0 * np.eye(3)) ** 3)
        + np.sum(np.sort(v) * np.arange(9.0)) ** 3
    )


def einsum_and_kron(v):
    m = np.reshape(v, (3, 3))
    return np.sum(np.einsum("ij,jk,ki->i", m, m, m) ** 2) + np.sum(
        np.kron(v[:3], np.sin(v[3:6])) ** 3
    )


@pytest.mark.parametrize("fn", [cholesky_and_sort, einsum_and_kron])
def test_a_third_derivative_through_the_helpers_of_rules(fn) -> None:
    """The forward rules of cholesky and sort call helpers with no rules of their own
    (``cholesky_jvp``, ``sort_jvp``): forward mode differentiates them by their source, as it does
    the user's functions (``forward.by_source``). Those of einsum's and kron's adjoints are
    multilinear (``runtime.OtherOperands``). The tensor of third derivatives, against differences of
    the Hessian."""
    # no two entries equal: sort is smooth here
    v = np.array([1.0, 0.25, 0.1, 0.3, 1.1, 0.2, 0.05, 0.4, 0.9])
    third = ast_ad.jacfwd(ast_ad.hessian(fn))(v)
    u = np.random.default_rng(0).standard_normal(9)
    h = 1e-5
    hessian = ast_ad.hessian(fn)
    differences = (hessian(v + h * u) - hessian(v - h * u)) / (2 * h)
    np.testing.assert_allclose(
        third @ u, differences, rtol=1e-6, atol=1e-6 * np.max(np.abs(differences))
    )


SECOND_ORDER_X = np.array([0.5, -1.2, 0.3, 2.0, 0.4, 0.9])
THROUGH_AUTOGRAD = [
    cf.prod_along_rows,
    cf.kron_of_parts,
    cf.sinc_weighted,
    cf.cholesky_of_gram,
    cf.eigh_of_sum,
    cf.pinv_of_tall,
    cf.svd_of_tall,
    cf.multi_dot_chain,
    cf.einsum_chain,
]
THROUGH_DIFFERENCES = [
    cf.cumprod_weighted,
    cf.weighted_average,
    cf.convolved,
    cf.matrix_cubed,
    cf.qr_of_tall,
    cf.polynomial_of_itself,
    cf.nan_skipping_mean,
]


@pytest.mark.parametrize("fn", THROUGH_AUTOGRAD + THROUGH_DIFFERENCES, ids=lambda fn: fn.__name__)
def test_second_derivatives_through_the_helpers_of_reductions_products_and_factorizations(
    fn,
) -> None:
    """Each gradient helper's forward rule, end to end: the Hessian (forward over reverse) against
    autograd's Hessian where autograd has the rules, else against central differences of ast_ad's
    gradient; and Hv against the Hessian."""
    x = SECOND_ORDER_X
    ours = ast_ad.hessian(fn)(x)
    if fn in THROUGH_AUTOGRAD:
        import autograd

        theirs = autograd.hessian(with_autograd_numpy(fn))(x)
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-11)
    else:
        assert_hessian_differences(fn, x, ours)
    np.testing.assert_allclose(ours, ours.T, rtol=1e-9, atol=1e-11)
    v = np.random.default_rng(1).standard_normal(x.size)
    np.testing.assert_allclose(ast_ad.hvp(fn)(x, v), ours @ v, rtol=1e-9, atol=1e-11)


def assert_hessian_differences(fn, x, hessian) -> None:
    """Each column of ``hessian`` against central differences of ast_ad's gradient."""
    grad = ast_ad.grad(fn)
    for j in range(x.size):
        e = np.zeros(x.size)
        e[j] = 1e-6
        np.testing.assert_allclose(
            hessian[:, j], (grad(x + e) - grad(x - e)) / 2e-6, rtol=1e-5, atol=1e-6
        )


def test_the_hessian_of_a_product_with_zeros_is_exact() -> None:
    """np.prod's helpers take each product apart (no division by the entries), so the Hessian is
    exact with two zeros in a row; autograd's divides by them and gives NaN. A polynomial:
    differences are an oracle."""
    x = SECOND_ORDER_X.copy()
    x[[1, 2, 4]] = 0.0
    ours = ast_ad.hessian(cf.prod_along_rows)(x)
    assert np.all(np.isfinite(ours)) and np.any(ours != 0.0)
    assert_hessian_differences(cf.prod_along_rows, x, ours)


def lambda_free_sinc(x):
    return np.sinc(x)


def test_the_second_derivative_of_sinc_near_zero_is_its_series() -> None:
    """sinc(x) = sin(pi x) / (pi x) = sum_k (-1)^k (pi x)^2k / (2k + 1)!, so sinc'' is the series
    sum_k>=1 (-1)^k pi^2k 2k (2k - 1) x^(2k - 2) / (2k + 1)!, summed here to 30 terms; near 0 the
    closed form of sinc'' divides 0 by 0, and central differences lose half the digits."""
    second = ast_ad.grad(ast_ad.grad(lambda_free_sinc))
    for x in (0.0, 1e-9, 1e-4, 9e-4, 2e-3, 0.05, 0.4):
        series = sum(
            (-1) ** k
            * np.pi ** (2 * k)
            * 2
            * k
            * (2 * k - 1)
            * x ** (2 * k - 2)
            / math.factorial(2 * k + 1)
            for k in range(1, 31)
        )
        assert math.isclose(second(x), series, rel_tol=1e-9), x


def test_jacobians_of_jacobians_of_a_lambda() -> None:
    """A lambda's Jacobian is named after it (``jacobian_<lambda>``); a Jacobian over it calls it
    from generated code under a name Python can read. Each order against autograd's, which
    differentiates the same lambda."""
    import autograd
    import autograd.numpy as anp

    m = np.array([[0.3, -1.2, 0.5], [0.8, 0.1, -0.4], [-0.6, 0.9, 0.2]])
    x = np.array([0.3, -0.5, 0.7])
    second = autograd.jacobian(autograd.jacobian(lambda v: anp.tanh(anp.dot(m, v))))
    for ours, theirs in [(ast_ad.jacrev(ast_ad.jacrev(lambda v: np.tanh(m @ v))), second),
                         (ast_ad.jacfwd(ast_ad.jacrev(lambda v: np.tanh(m @ v))), second),
                         (ast_ad.hessian(lambda v: np.sum(np.tanh(m @ v) ** 2)),
                          autograd.hessian(lambda v: anp.sum(anp.tanh(anp.dot(m, v)) ** 2)))]:
        np.testing.assert_allclose(ours(x), theirs(x), rtol=1e-10, atol=1e-12)


def _cubic_sine_derivatives(t: float) -> list[float]:
    """s(t) = t^3 sin t and its first four derivatives, by hand."""
    sin, cos = math.sin(t), math.cos(t)
    return [
        t**3 * sin,
        3 * t * t * sin + t**3 * cos,
        6 * t * sin + 6 * t * t * cos - t**3 * sin,
        6 * sin + 18 * t * cos - 9 * t * t * sin - t**3 * cos,
        24 * cos - 36 * t * sin - 12 * t * t * cos + t**3 * sin,
    ]


@pytest.mark.parametrize("t", [0.7, -1.3, 2.1])
def test_reverse_mode_over_forward_mode_over_a_gradient(t: float) -> None:
    """grad of a body that calls jvp of a gradient: reverse mode over code that calls the gradient's
    forward rule (``Directional``), whose reverse rules are derivatives of one order more, again
    ``Directional``s (and a ``Dropping`` where the tangent itself is differentiated). To the fourth
    order against closed forms."""
    from tests import compose_nested as nested

    s = _cubic_sine_derivatives(t)
    assert math.isclose(ast_ad.grad(nested.cubic_sine_curvature)(t), s[3], rel_tol=1e-12)
    assert math.isclose(
        ast_ad.grad(ast_ad.grad(nested.cubic_sine_curvature))(t), s[4], rel_tol=1e-11
    )
    assert math.isclose(
        ast_ad.vjp(ast_ad.grad(nested.cubic_sine_curvature), t)[1](1.0)[0], s[4], rel_tol=1e-11
    )
    # with the tangent t: the derivative of s2 t is s3 t + s2, and its second s4 t + 2 s3
    assert math.isclose(
        ast_ad.grad(nested.cubic_sine_curvature_scaled)(t), s[3] * t + s[2], rel_tol=1e-12
    )
    assert math.isclose(
        ast_ad.grad(ast_ad.grad(nested.cubic_sine_curvature_scaled))(t),
        s[4] * t + 2 * s[3],
        rel_tol=1e-11,
    )


def test_reverse_mode_over_forward_mode_over_a_gradient_of_arrays() -> None:
    """sum(H(x) x) for the potential: its gradient by reverse over forward over reverse, against
    autograd's gradient of the same written with its Hessian, and against ast_ad's Hessian of it."""
    import autograd
    import autograd.numpy as anp

    from tests import compose_nested as nested

    x = np.array([0.3, -0.8, 1.1])

    def theirs(v):
        return anp.sum(autograd.hessian(lambda u: anp.sum(anp.sin(u) * 2.0) + anp.sum(u**3))(v) @ v)

    ours = ast_ad.grad(nested.curvature_along_x)(x)
    np.testing.assert_allclose(ours, autograd.grad(theirs)(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        ast_ad.hessian(nested.curvature_along_x)(x),
        autograd.hessian(theirs)(x),
        rtol=1e-10,
        atol=1e-10,
    )


def _uses_hvp(x):
    return np.sum(ast_ad.hvp(np.sin)(x, x))


def _uses_value_and_grad(x):
    value, slope = ast_ad.value_and_grad(np.sin)(x)
    return value + slope


def _uses_vjp(x):
    return ast_ad.vjp(np.sin, x)[1](1.0)[0]


@pytest.mark.parametrize(
    "fn, instead", [(_uses_hvp, "ast_ad.hessian"), (_uses_vjp, "ast_ad.jacrev")]
)
def test_transformations_a_body_cannot_call_yet_are_refused_at_their_line(fn, instead) -> None:
    """hvp, value_and_grad and vjp in a differentiated body: refused where they are called, saying
    what works."""
    with pytest.raises(
        ast_ad.errors.UnsupportedSyntaxError, match=f"not supported yet: .*{instead}"
    ) as caught:
        ast_ad.grad(fn)(0.5)
    assert (
        caught.value.filename == __file__ and caught.value.lineno == fn.__code__.co_firstlineno + 1
    )


def test_value_and_grad_of_a_function_without_source_in_a_body_is_refused_at_its_line() -> None:
    """value_and_grad in a body is its value and ast_ad.grad's (tests/test_python_written.py); of
    np.sin, which has no source to transform, that is refused where it is written."""
    with pytest.raises(
        ast_ad.errors.UnsupportedSyntaxError, match="not a Python function with source"
    ) as caught:
        ast_ad.grad(_uses_value_and_grad)(0.5)
    assert caught.value.lineno == _uses_value_and_grad.__code__.co_firstlineno + 1


def _sine_loop(x):
    y = x
    for _ in range(3):
        y = np.sin(y) * x
    return np.sum(y ** 2)


# stands for the exported gradient function (the test below puts it here)
def _exported_gradient(v):
    raise AssertionError("replaced by the test")


def _through_an_exported_gradient(v):
    out, slope = _exported_gradient(v)
    return np.sum(slope * v)


def _rnn_step_loss(w):
    h = np.zeros(3)
    for t in range(4):
        h = np.tanh(w @ h + 0.1 * t)
    return np.sum(h ** 2) + 0.1 * np.sum(w * w)


_MIXING = np.arange(6.0).reshape(2, 3) / 7


def _products(x):
    return (
        np.sum(np.einsum("ij,j->i", _MIXING, np.sin(x)) ** 2)
        + np.sum(np.tensordot(np.outer(x, x), np.sin(x), axes=1) * x)
        + np.einsum("i,i,i->", x, x, np.cos(x))
    )


@pytest.mark.parametrize(
    "fn, x",
    [
        (_sine_loop, np.array([0.3, 0.5, 0.7])),
        (_rnn_step_loss, np.eye(3) * 0.5 + 0.1),
        (_products, np.array([0.3, -0.5, 0.7])),
    ],
    ids=["sine loop", "loop of matrix products", "einsum and tensordot"],
)
def test_reverse_mode_over_an_exported_gradient(fn, x, tmp_path, monkeypatch) -> None:
    """The output language is the input language: the gradient of a loop, exported as plain Python
    (its tapes are lists made empty, pushed and popped), is differentiated again by reverse mode.
    sum(grad f(x) * x) has the gradient H x + grad f(x), which forward over reverse gives.

    The module copies the helpers it calls, so that it runs without ast_ad (einsum's adjoints are
    objects, ``EinsumTerm``: their class, then each made again, under a name no copied helper has);
    a copy with the code of ast_ad's helper takes that helper's rules (``normalize.helper_twin``:
    unbroadcast's source is outside the language). A loop's matrix products are summed after it
    (``summed_matmul_vjp_a_steps``); reverse mode reads that sum step by step
    (``registry.def_read_as``).
    The module's check of the arguments' kinds (which takes *args) is read as the function it
    checks."""
    import importlib
    import sys

    name = fn.__name__.lstrip("_")
    ast_ad.export(ast_ad.grad(fn), str(tmp_path / f"exported_{name}.py"), x)
    if fn is _rnn_step_loss:
        assert "def summed_matmul_vjp_a_steps(" in (tmp_path / f"exported_{name}.py").read_text()
    monkeypatch.syspath_prepend(str(tmp_path))
    exported = importlib.import_module(f"exported_{name}")
    monkeypatch.setattr(
        sys.modules[__name__], "_exported_gradient", getattr(exported, f"{name}_vjp")
    )
    ours = ast_ad.grad(_through_an_exported_gradient)(x)
    expected = np.tensordot(ast_ad.hessian(fn)(x), x, axes=x.ndim) + ast_ad.grad(fn)(x)
    np.testing.assert_allclose(ours, expected, rtol=1e-12, atol=1e-14)

def test_an_integer_argument_takes_no_tangent() -> None:
    """As grad refuses an integer (a wrong zero otherwise: np.asarray(3) is an integer array, whose
    cast passes no tangent), so do jvp and the Jacobians; None marks it as not differentiated."""
    with pytest.raises(ast_ad.errors.NonDifferentiableArgumentError, match="an integer"):
        ast_ad.jvp(mixed, (2, 1.7), (1.0, 0.0))
    with pytest.raises(ast_ad.errors.NonDifferentiableArgumentError, match="an integer"):
        ast_ad.jacfwd(mixed)(2, 1.7)
    assert ast_ad.jvp(mixed, (2, 1.7), (None, 1.0))[1] == pytest.approx(4 + 2 * math.cos(3.4))


def test_bad_tangents_are_explained() -> None:
    with pytest.raises(ASTADError, match="has shape"):
        ast_ad.jvp(rnn_loss, (np.eye(3), np.ones((4, 3))), (np.ones(3), None))
    with pytest.raises(ASTADError, match="one tangent per argument"):
        ast_ad.jvp(rnn_loss, (np.eye(3), np.ones((4, 3))), (np.ones((3, 3)),))


def softplus(x):
    return np.log1p(np.exp(x))


ast_ad.extend.defvjp(softplus, lambda g, ans, x: g / (1.0 + np.exp(-x)))
ast_ad.extend.defjvp(softplus, lambda u, ans, x: u / (1.0 + np.exp(-x)))


def uses_softplus(x):
    return np.sum(softplus(x) * x)


def test_custom_rules_are_used_forward_and_differentiated_again() -> None:
    x = np.array([0.3, -1.2, 0.8])
    s = 1.0 / (1.0 + np.exp(-x))
    _, dot = ast_ad.jvp(uses_softplus, (x,), (np.ones(3),))
    assert math.isclose(float(dot), float(np.sum(s * x + softplus(x))), rel_tol=1e-12)
    # the reverse rule, differentiated again by forward mode: d/dx (s x + softplus) = s(1-s) x + 2 s
    np.testing.assert_allclose(
        ast_ad.hessian(uses_softplus)(x), np.diag(s * (1 - s) * x + 2 * s), rtol=1e-12
    )


def opaque(x):
    return x * 2.0


# a reverse rule only, and not declared elementwise
ast_ad.extend.defvjp(opaque, lambda g, ans, x: 2.0 * g)


def uses_opaque(x):
    return opaque(x) + x


def test_forward_rule_of_a_primitive_without_one_is_refused() -> None:
    with pytest.raises(MissingRuleError, match="defjvp"):
        ast_ad.jvp(uses_opaque, (1.0,), (1.0,))


@pytest.mark.parametrize("case", CASES, ids=IDS)
@settings(max_examples=3)
@given(data=st.data())
def test_every_helper_generated_code_calls_has_rules(case: Case, data: st.DataObject) -> None:
    """The generated language is the input language: each of ast_ad's helpers that a gradient calls
    has rules (so the gradient can be differentiated again)."""
    import types

    from ast_ad.api.arguments import shape_labels
    from ast_ad.core import registry

    args = data.draw(case.args)
    # and the checkpointed gradient's schedule (``ast_ad.revolve``)
    for checkpoints in (None, 2):
        gradient = ast_ad.grad(case.fn, case.argnums, checkpoints=checkpoints)
        # a loop checkpoints= leaves taped says so: here, asked of every case
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CheckpointWarning)
            gradient(*args)
        loaded = gradient.loaded(shape_labels(args))
        called = [v for v in loaded.namespace.values() if isinstance(v, types.FunctionType)
                  and v.__module__ in ("ast_ad.runtime", "ast_ad.revolve")]
        missing = [f.__name__ for f in called if registry.lookup(f) is None
                   # an in-place helper is differentiated through its functional twin
                   and registry.in_place(f) is None]
        assert not missing, (
            f"helpers without rules in the gradient of {case.fn.__name__}: {missing}"
        )


@pytest.mark.parametrize("case", CASES, ids=IDS)
@settings(max_examples=2)
@given(data=st.data())
def test_every_helper_forward_mode_code_calls_has_rules(case: Case, data: st.DataObject) -> None:
    """The same of forward mode's code: each of ast_ad's helpers it calls (the rules' bodies put in,
    ``templates``) has rules, or is written in ast_ad's language (forward mode differentiates it by
    its source)."""
    import types

    from ast_ad import transform
    from ast_ad.api import compose
    from ast_ad.core import registry
    from ast_ad.errors import ASTADError

    args = data.draw(case.args)
    lowered = compose.lower(case.fn, args)
    active = tuple(k for k, a in enumerate(args) if isinstance(a, (float, np.ndarray)))
    loaded = compose.jvp_code(lowered, active)
    called = [v for v in loaded.namespace.values() if isinstance(v, types.FunctionType)
              and v.__module__ in ("ast_ad.runtime", "ast_ad.revolve")]
    missing = []
    for f in called:
        if registry.lookup(f) is None and registry.in_place(f) is None:
            try:
                transform.normalized(f)
            except ASTADError:
                missing.append(f.__name__)
    assert not missing, (
        f"helpers without rules in the forward mode of {case.fn.__name__}: {missing}"
    )


def straight_arrays(x, w):
    """No loop: its backward pass reads what the forward pass saved and changes none of it."""
    h = np.tanh(w @ x)
    y = x * 1.0
    y[0] = h[1]  # (an item write outside a loop: a new array, ``assign_item``)
    return h * y + np.sin(x)


def test_vjp_hands_what_it_saved_to_each_backward_pass_uncopied_where_nothing_changes_it(
        monkeypatch) -> None:
    """A module whose backward pass changes nothing it is given (``lowering.reads_only``: no loop,
    no ``pop``, writes into adjoints only) gets the forward pass's saved values themselves, each
    call; one with a loop gets fresh copies (tapes are popped), and both give the same adjoints at
    every call."""
    from ast_ad.api import compose, lowering

    copied = []
    monkeypatch.setattr(compose, "fresh", lambda saved: copied.append(1) or lowering.fresh(saved))
    x, w = np.array([0.3, -0.7, 1.1]), np.array([[0.5, 1.0, -0.2], [0.1, 0.3, 0.9],
                                                 [1.2, -0.4, 0.6]])
    out, vjp_fn = ast_ad.vjp(straight_arrays, x, w)
    cotangents = [np.array([1.0, 0.0, 0.0]), np.array([0.2, -1.0, 0.5]), np.ones(3)]
    got = [vjp_fn(g) for g in cotangents]
    assert not copied
    for g, (x_bar, w_bar) in zip(cotangents, got, strict=True):
        _, again = ast_ad.vjp(straight_arrays, x, w)
        want = again(g)
        np.testing.assert_array_equal(x_bar, want[0])
        np.testing.assert_array_equal(w_bar, want[1])
    _, vjp_fn = ast_ad.vjp(calls_a_helper, 1.3)
    vjp_fn(1.0), vjp_fn(2.0)
    assert len(copied) == 2  # (a helper's loop: its tapes are copied for each call)
    # the fact is read from the module's text: what a loop, a pop or a write into a value makes
    for code, expected in [("def f_bwd(saved, g):\n    a, b = saved\n    a_bar = g * b\n"
                            "    a_bar[0] += 1.0\n    return a_bar,\n", True),
                           ("def f_bwd(saved, g):\n    a, b = saved\n    b[0] = g\n", False),
                           ("def f_bwd(saved, g):\n    for t in saved:\n        g = g * t\n",
                            False),
                           ("def f_bwd(saved, g):\n    t = saved.pop()\n", False),
                           ("def f_bwd(saved, g):\n    add_into(saved, 0, g)\n", False),
                           ("def f_bwd(saved, g):\n    np.add.at(saved, 0, g)\n", False),
                           ("def f_bwd(saved, g):\n    np.add(g, g, out=saved)\n", False)]:
        module = type("Module", (), {"text": code})()
        assert lowering.reads_only(module) is expected, code


def test_vjp_runs_the_forward_pass_once_and_its_backward_pass_again_and_again() -> None:
    """vjp_fn reuses one forward pass: each call gets fresh copies of the tapes (here nested, in a
    helper)."""
    x = 1.3
    out, vjp_fn = ast_ad.vjp(calls_a_helper, x)
    assert out == calls_a_helper(x)
    first, second = vjp_fn(1.0), vjp_fn(2.0)
    expected = ast_ad.grad(calls_a_helper)(x)
    assert math.isclose(first[0], expected, rel_tol=1e-14) and math.isclose(
        second[0], 2 * expected, rel_tol=1e-14
    )


def scalar_math_loop(x, y):
    total = 0.0
    for k in range(3):
        total = total + math.sin(x * (k + 1)) * math.exp(0.3 * y) + x * y * k
    return total


def test_hessian_where_autograd_cannot_run_matches_finite_differences_of_the_gradient() -> None:
    """math.sin and math.exp: autograd cannot trace them, so the oracle is central differences of
    ast_ad's own gradient (itself checked against finite differences of the function elsewhere)."""
    x, y = 0.4, -0.6
    blocks = ast_ad.hessian(scalar_math_loop, argnums=(0, 1))(x, y)
    grad = ast_ad.grad(scalar_math_loop, argnums=(0, 1))
    eps = 1e-6
    for j, (dx, dy) in enumerate(((eps, 0.0), (0.0, eps))):
        column = (np.array(grad(x + dx, y + dy)) - np.array(grad(x - dx, y - dy))) / (2 * eps)
        np.testing.assert_allclose(
            [float(blocks[0][j]), float(blocks[1][j])], column, rtol=1e-6, atol=1e-8
        )


def constant_helper(a, scale=0.5):
    return scale * np.tanh(0.5) + a


def rebinds_to_a_constant(x0):
    if x0 > 0.0:
        x0 = constant_helper(0.5)
    return x0 * 2.0


def test_a_differentiated_name_rebound_to_a_constant_call_has_a_zero_tangent() -> None:
    """Found by the random programs: a call of the user's function on constants, into a name with a
    tangent."""
    assert ast_ad.jvp(rebinds_to_a_constant, (0.3,), (1.0,))[1] == 0.0
    assert ast_ad.jvp(rebinds_to_a_constant, (-0.3,), (1.0,))[1] == 2.0


@pytest.mark.parametrize("name", ["force_norm", "force_norm_inline", "both_gradients", "step"])
def test_grad_of_a_function_whose_body_calls_grad(name) -> None:
    """Reverse over a call of ast_ad.grad: the adjoint through a gradient is a Hessian-vector
    product (forward over reverse), checked against autograd differentiating its own gradient."""
    import autograd
    import autograd.numpy as anp

    from tests import compose_nested as nested

    x, y = np.array([0.3, -0.5, 0.9]), 1.5
    args = (x,) if name == "step" else (x, y)
    fn = getattr(nested, name)
    def pot(a, b):
        return anp.sum(anp.sin(a) * b) + anp.sum(a ** 3)
    theirs = {
        "force_norm": lambda a, b: anp.sum(autograd.grad(pot)(a, b) ** 2),
        "force_norm_inline": lambda a, b: anp.sum(autograd.grad(pot)(a, b) ** 2),
        "both_gradients": lambda a, b: (
            anp.sum(autograd.grad(pot, 0)(a, b) * a) + autograd.grad(pot, 1)(a, b) * b
        ),
        "step": lambda w: pot(w - 0.1 * autograd.grad(pot)(w, 2.0), 2.0),
    }[name]
    argnums = tuple(range(len(args)))
    ours = ast_ad.grad(fn, argnums)(*args)
    expected = autograd.grad(theirs, argnums)(*args)
    for a, b in zip(ours, expected, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    tangents = tuple(np.ones_like(a) if np.ndim(a) else 1.0 for a in args)
    _, dot = ast_ad.jvp(fn, args, tangents)
    assert math.isclose(float(dot), sum(float(np.sum(a)) for a in expected), rel_tol=1e-9)


@pytest.mark.parametrize("outer", ["grad", "jvp"])
def test_jvp_in_the_body_differentiates_in_both_modes(outer) -> None:
    """Reverse over forward (``grad`` of a body that calls ``ast_ad.jvp``) and forward over forward,
    against autograd differentiating the same composition, and against closed forms for a cube."""
    import autograd
    import autograd.numpy as anp

    from tests import compose_nested as nested

    x, y = np.array([0.3, -0.5, 0.9]), 1.5

    def pot(a, b):
        return anp.sum(anp.sin(a) * b) + anp.sum(a ** 3)

    def theirs(a, b):
        slope = anp.sum(autograd.grad(pot)(a, b))  # the derivative along the ones
        return slope * pot(a, b)
    expected = autograd.grad(theirs, (0, 1))(x, y)
    if outer == "grad":
        ours = ast_ad.grad(nested.directional_energy, (0, 1))(x, y)
        for a, b in zip(ours, expected, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
        assert ast_ad.grad(nested.cube_slope)(2.0) == pytest.approx(12.0, rel=1e-14)  # 6 a
    else:
        _, dot = ast_ad.jvp(nested.directional_energy, (x, y), (np.ones(3), 1.0))
        assert math.isclose(float(dot), float(np.sum(expected[0]) + expected[1]), rel_tol=1e-10)
        assert ast_ad.jvp(nested.cube_slope, (2.0,), (1.0,)) == pytest.approx(
            (12.0, 12.0), rel=1e-14
        )


@pytest.mark.parametrize("x", [1.0, 3.0, -0.5])
def test_perturbations_of_two_levels_are_not_confused(x) -> None:
    """The classic pair: d/dx [x * d/dy (x + y)] = 1 and d/dx [x * d/dy (x * y)] = 2 x, the inner
    derivative a gradient or a jvp, the outer one reverse mode, forward mode, and reverse over
    reverse (0 and 2). Each level's names are its own (``_bar``, ``_dot`` and fresh names per
    level), so a tangent of one level cannot reach the other's."""
    from tests import compose_nested as nested

    for fn, slope, curvature in (
        (nested.outer_plus, 1.0, 0.0),
        (nested.outer_times, 2 * x, 2.0),
        (nested.outer_plus_forward, 1.0, 0.0),
        (nested.outer_times_forward, 2 * x, 2.0),
    ):
        assert ast_ad.grad(fn)(x) == slope, fn.__name__
        assert ast_ad.jvp(fn, (x,), (1.0,)) == (fn(x), slope), fn.__name__
        assert ast_ad.grad(ast_ad.grad(fn))(x) == curvature, fn.__name__
        # (and central differences of the function itself)
        assert math.isclose((fn(x + 1e-6) - fn(x - 1e-6)) / 2e-6, slope, rel_tol=1e-7)


def test_jvp_in_the_body_needs_a_module_function_and_two_tuples() -> None:
    from tests import compose_nested as nested

    def bad(a):
        return ast_ad.jvp(nested.cube, a, 1.0)  # not tuples
    def worse(a):
        return ast_ad.jvp(lambda b: b * b, (a,), (1.0,))[1]
    for fn in (bad, worse):
        with pytest.raises(
            ast_ad.errors.UnsupportedSyntaxError, match="module-level function"
        ) as err:
            ast_ad.grad(fn)(2.0)
        assert err.value.lineno == fn.__code__.co_firstlineno + 1


def test_a_transformation_in_the_body_that_cannot_be_made_is_refused_at_its_line() -> None:
    """``ast_ad.grad(np.sin)`` in the body is made as the function is read (on a branch that may
    never run, too): where it cannot be made, the refusal names the line that makes it, not ast_ad's
    own."""
    def slope_of_a_ufunc(x):
        if x > 10.0:
            return ast_ad.grad(np.sin)(x)
        return x * 2.0
    assert slope_of_a_ufunc(1.0) == 2.0  # (Python never makes it here)
    with pytest.raises(
        ast_ad.errors.UnsupportedSyntaxError,
        match="ast_ad.grad inside a differentiated function: .*wrap it in a def",
    ) as err:
        ast_ad.grad(slope_of_a_ufunc)(1.0)
    assert err.value.lineno == slope_of_a_ufunc.__code__.co_firstlineno + 2
    assert err.value.filename.endswith("test_compose.py")


def test_a_function_passed_by_name_to_a_helper() -> None:
    from tests import compose_nested as nested

    x = 0.7
    expected = 0.5 * math.cos(0.5 * math.sin(x)) * 0.5 * math.cos(x)
    assert ast_ad.grad(nested.uses_a_function_by_name)(x) == pytest.approx(expected, rel=1e-14)
    assert ast_ad.jvp(nested.uses_a_function_by_name, (x,), (1.0,))[1] == pytest.approx(
        expected, rel=1e-14
    )
    assert ast_ad.grad(nested.uses_a_function_by_name)(x) == pytest.approx(
        ast_ad.tracer.grad(nested.uses_a_function_by_name)(x), rel=1e-14)


def grad_with_computed_argnums(x, k):
    return ast_ad.grad(softplus_sum, k)(x)  # refused here


def softplus_sum(x):
    return np.sum(np.log1p(np.exp(x)))


def test_grad_in_the_body_needs_constant_arguments() -> None:
    with pytest.raises(ast_ad.errors.UnsupportedSyntaxError, match="constant argnums") as err:
        ast_ad.grad(grad_with_computed_argnums)(np.ones(2), 0)
    assert err.value.lineno == grad_with_computed_argnums.__code__.co_firstlineno + 1


def test_a_third_derivative_through_a_gradient_called_in_a_body() -> None:
    """A gradient called in a body is a primitive whose rules are derivatives along directions
    (``compose.Directional``), each with forward rules of its own: the Hessian of such a function is
    a third derivative, checked against autograd's."""
    import autograd
    import autograd.numpy as anp

    from tests import compose_nested as nested

    def pot(a, b):
        return anp.sum(anp.sin(a) * b) + anp.sum(a ** 3)

    def theirs(a, b):
        return anp.sum(autograd.grad(pot)(a, b) ** 2)
    x, y = np.array([0.3, -0.5, 0.9]), 1.5
    for argnums in (0, 1):
        np.testing.assert_allclose(ast_ad.hessian(nested.force_norm, argnums)(x, y),
                                   autograd.hessian(theirs, argnums)(x, y), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ast_ad.hessian(nested.step)(x), autograd.hessian(
        lambda w: pot(w - 0.1 * autograd.grad(pot)(w, 2.0), 2.0))(x), rtol=1e-10, atol=1e-12)


def _leibniz(order: int, x: float) -> float:
    """The derivative of x^3 cos x + 2 x^2 sin x of this order, by Leibniz's rule."""
    def power(n: int, k: int) -> float:  # d^k x^n
        return math.perm(n, k) * x ** (n - k) if k <= n else 0.0

    def trig(shift: int, k: int) -> float:  # d^k of cos (shift 0) or sin (shift 1)
        return math.cos(x + (k - shift) * math.pi / 2)

    return sum(
        math.comb(order, k)
        * (power(3, k) * trig(0, order - k) + 2 * power(2, k) * trig(1, order - k))
        for k in range(order + 1)
    )


def test_a_gradient_in_a_body_to_the_fourth_order() -> None:
    from tests import compose_nested as nested

    x = 0.7
    assert math.isclose(nested.scaled_slope(x), _leibniz(0, x), rel_tol=1e-13)
    d = nested.scaled_slope
    for order in range(1, 5):
        d = ast_ad.grad(d)
        assert math.isclose(d(x), _leibniz(order, x), rel_tol=1e-11), order


def _wavy(order: int, x: float) -> float:
    """The derivative of wavy (x^2 sin x) of this order, by Leibniz's rule."""
    return sum(
        math.comb(order, k)
        * math.perm(2, k)
        * x ** (2 - k)
        * math.sin(x + (order - k) * math.pi / 2)
        for k in range(3)
        if k <= order
    )


def test_forward_mode_in_a_body_over_forward_mode_in_a_body_to_the_fourth_order() -> None:
    """Reverse and forward mode over ``jvp`` of a function whose body calls ``jvp``: the forward
    rules of the inner ``jvp`` (``JvpTangent``) have reverse rules (``JvpCotangent``, laid out by
    ``Permuted``). d^k of wavy''(x) x is wavy^(k+2)(x) x + k wavy^(k+1)(x)."""
    from tests import compose_nested as nested

    x = 0.7
    d = nested.wavy_curvature_forward
    assert math.isclose(d(x), _wavy(2, x) * x, rel_tol=1e-13)
    for order in range(1, 5):
        d = ast_ad.grad(d)
        assert math.isclose(
            d(x), _wavy(order + 2, x) * x + order * _wavy(order + 1, x), rel_tol=1e-10
        ), order
    hessian = ast_ad.hessian(nested.wavy_curvature_forward)(x)
    assert math.isclose(hessian, _wavy(4, x) * x + 2 * _wavy(3, x), rel_tol=1e-10)
    jacobian = ast_ad.jacrev(ast_ad.grad(nested.wavy_curvature_forward))(x)
    assert math.isclose(jacobian, _wavy(4, x) * x + 2 * _wavy(3, x), rel_tol=1e-10)


@pytest.mark.parametrize(
    "wrt, path",
    [
        (None, (0,)),
        (None, (1,)),
        (None, (0, 1)),
        (None, (1, 1, 0)),
        (0, ()),
        (1, ()),
        (0, (1,)),
        (1, (0, 0)),
    ],
)
def test_the_rules_of_jvp_in_a_body_pass_the_dot_product_identity(wrt, path) -> None:
    """Each reverse rule of ``JvpTangent`` (``wrt`` None) and ``JvpCotangent`` against its forward
    rule: <vjp_k(u), v> = <u, jvp_k(v)>, for every argument: the moves, the adjoint ``g``, the
    primals and the tangents."""
    from ast_ad.api import compose
    from ast_ad.core import registry
    from tests import compose_nested as nested
    from tests.test_rules import direction_like, paired

    rng = np.random.default_rng(len(path) + 3 * (wrt or 0))
    of = compose.jvp_of(nested.potential)
    primals, tangents = (rng.standard_normal(3), 2.0), (rng.standard_normal(3), 0.5)
    slots = (primals, tangents)
    call: list = []
    for slot in reversed(path):  # the last move first, each with its (unread) result
        call += [direction_like(slots[slot], rng), None]
    if wrt is None:
        prim = compose.JvpTangent(of, path)
    else:
        prim = compose.JvpCotangent(of, wrt, path)
        call += [direction_like(of(primals, tangents), rng), None]
    call += [primals, tangents]
    rule = registry.lookup(prim)
    out = prim(*call)
    checked = 0
    for k, arg in enumerate(call):
        vjp, jvp = rule.vjp(k), rule.jvp(k)
        if arg is None:
            assert vjp is registry.zero and jvp is registry.zero
            continue
        assert callable(vjp) and vjp is not registry.zero, k
        u, v = direction_like(out, rng), direction_like(arg, rng)
        if jvp is registry.LINEAR:
            moved = prim(*call[:k], v, *call[k + 1:])
        else:
            moved = jvp(v, out, *call)
        assert math.isclose(
            paired(vjp(u, out, *call), v), paired(u, moved), rel_tol=1e-9, abs_tol=1e-11
        ), k
        checked += 1
    assert checked == len(path) + (wrt is not None) + 2


@pytest.mark.parametrize(
    "slots, wrt",
    [
        (("g",), 0),
        (("g",), 1),
        ((("swap", 0),), None),
        (("g", ("swap", 1)), 0),
        ((("swap", 0), "skip", "g"), 2),
        ((("swap", 2), ("swap", 0)), None),
    ],
)
def test_the_terms_of_einsum_pass_the_dot_product_identity(slots, wrt) -> None:
    """Each reverse rule of a term of einsum's derivatives (``runtime.EinsumTerm``), and each of its
    reverse rules' reverse rules, against the forward rule (the term itself, linear in the argument)
    by <vjp_k(u), v> = <u, jvp_k(v)>: so reverse mode runs over reverse-mode code that calls einsum,
    to any order."""
    from ast_ad.core import registry
    from ast_ad.runtime import EinsumTerm

    rng = np.random.default_rng(len(slots) + 7 * (wrt or 0))
    spec, operands = (
        "ij,jk,k->i",
        [rng.standard_normal((2, 3)), rng.standard_normal((3, 4)), rng.standard_normal(4)],
    )
    output = np.einsum(spec, *operands)

    def arguments(term):
        call = []
        for slot in term.slots:
            call += [output if slot == "g" else None if slot == "skip" else
                     rng.standard_normal(np.shape(operands[slot[1]])), None]
        return [*call, spec, *operands]

    def check(term, depth):
        call = arguments(term)
        rule, out = registry.lookup(term), term(*call)
        for k, arg in enumerate(call):
            vjp = rule.vjp(k)
            if arg is None or isinstance(arg, str) or vjp is registry.zero:
                continue
            u, v = rng.standard_normal(np.shape(out)), rng.standard_normal(np.shape(arg))
            assert rule.jvp(k) is registry.LINEAR
            moved = term(*call[:k], v, *call[k + 1:])
            assert math.isclose(
                float(np.sum(vjp(u, out, *call) * v)), float(np.sum(u * moved)), rel_tol=1e-9
            ), k
            if depth:
                check(vjp, depth - 1)
    check(EinsumTerm(slots, wrt), 1)


def test_jacobians_and_hessians_compose() -> None:
    """A Jacobian is a primitive whose forward rules are Jacobians again: the tensors of third and
    fourth derivatives, against autograd's, by either mode and for tuple argnums."""
    import autograd
    import autograd.numpy as anp

    from tests import compose_nested as nested

    def theirs(a, b):
        return anp.sum(anp.sin(a) * a) * b + anp.sum(anp.exp(a[:2] * a[1:]))
    x, y = np.array([0.3, 0.4, 0.5]), 1.3
    third = autograd.jacobian(autograd.hessian(theirs))(x, y)
    assert third.shape == (3, 3, 3)
    np.testing.assert_allclose(
        ast_ad.jacfwd(ast_ad.hessian(nested.coupled))(x, y), third, rtol=1e-12, atol=1e-14
    )
    np.testing.assert_allclose(
        ast_ad.jacrev(ast_ad.jacrev(ast_ad.grad(nested.coupled)))(x, y),
        third,
        rtol=1e-12,
        atol=1e-14,
    )
    np.testing.assert_allclose(
        ast_ad.jacobian(ast_ad.jacfwd(ast_ad.grad(nested.coupled)))(x, y),
        third,
        rtol=1e-12,
        atol=1e-14,
    )
    fourth = ast_ad.jacfwd(ast_ad.jacfwd(ast_ad.hessian(nested.coupled)))(x, y)
    np.testing.assert_allclose(
        fourth,
        autograd.jacobian(autograd.jacobian(autograd.hessian(theirs)))(x, y),
        rtol=1e-12,
        atol=1e-14,
    )
    # d/dy of each Hessian block
    blocks = ast_ad.jacfwd(ast_ad.hessian(nested.coupled, (0, 1)), 1)(x, y)
    expected = [[autograd.jacobian(autograd.hessian(theirs, i), 1), autograd.jacobian(
        autograd.jacobian(autograd.grad(theirs, i), j), 1)] for i in (0, 1) for j in (1 - i,)]
    np.testing.assert_allclose(blocks[0][0], expected[0][0](x, y), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(blocks[1][0], expected[1][1](x, y), rtol=1e-12, atol=1e-14)
    u = np.array([0.2, -1.0, 0.7])
    _, dot = ast_ad.jvp(ast_ad.hessian(nested.coupled), (x, y), (u, None))
    np.testing.assert_allclose(dot, third @ u, rtol=1e-12, atol=1e-14)
    assert "hessian_coupled_jvp(x_dot, out, x, y)" in ast_ad.source(
        ast_ad.jacfwd(ast_ad.hessian(nested.coupled)), x, y
    )
    # hvp(f) is composable as well: its code is the gradient's forward-mode code, v one more
    # argument
    hvp = ast_ad.hvp(nested.coupled)
    np.testing.assert_allclose(ast_ad.jacfwd(hvp)(x, y, u), third @ u, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(
        ast_ad.jacfwd(hvp, 2)(x, y, u), autograd.hessian(theirs)(x, y), rtol=1e-12
    )
    np.testing.assert_allclose(
        ast_ad.jvp(hvp, (x, y, u), (u, None, None))[1], (third @ u) @ u, rtol=1e-12
    )


@pytest.mark.parametrize("name", ["hessian_trace", "weighted_jacobian"])
def test_a_jacobian_built_in_a_body_differentiates_both_ways(name) -> None:
    """``grad`` of a function whose body builds a Hessian or Jacobian (reverse rules
    ``compose.JacobianVjp``), against autograd, and against forward mode by the dot-product
    identity."""
    import autograd
    import autograd.numpy as anp

    from tests import compose_nested as nested

    def pot(a, b):
        return anp.sum(anp.sin(a) * a) * b + anp.sum(anp.exp(a[:2] * a[1:]))
    theirs = {
        "hessian_trace": lambda a, b: anp.trace(autograd.hessian(pot)(a, b)),
        "weighted_jacobian": lambda a, b: anp.sum(
            anp.cos(a) * autograd.jacobian(autograd.grad(pot), 1)(a, b)
        ),
    }[name]
    fn = getattr(nested, name)
    x, y = np.array([0.3, 0.4, 0.5]), 1.3
    gx, gy = ast_ad.grad(fn, (0, 1))(x, y)
    np.testing.assert_allclose(gx, autograd.grad(theirs, 0)(x, y), rtol=1e-11, atol=1e-13)
    assert math.isclose(gy, autograd.grad(theirs, 1)(x, y), rel_tol=1e-11)
    u, w = np.array([0.2, -1.0, 0.7]), -0.4
    _, dot = ast_ad.jvp(fn, (x, y), (u, w))
    assert math.isclose(float(dot), float(gx @ u + gy * w), rel_tol=1e-11)


def test_jvp_in_a_body_to_higher_orders() -> None:
    """The rules of a ``jvp`` called in a body (``compose.JvpTangent``, ``compose.JvpCotangent``)
    have forward rules of their own: the third derivative, against autograd's, and the fourth
    against closed forms."""
    import autograd
    import autograd.numpy as anp

    from tests import compose_nested as nested

    def pot(a, b):
        return anp.sum(anp.sin(a) * b) + anp.sum(a ** 3)

    def theirs(a, b):
        return anp.sum(autograd.grad(pot)(a, b)) * pot(a, b)
    x, y = np.array([0.3, -0.5, 0.9]), 1.5
    for argnums in (0, 1):
        np.testing.assert_allclose(ast_ad.hessian(nested.directional_energy, argnums)(x, y),
                                   autograd.hessian(theirs, argnums)(x, y), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        ast_ad.jacfwd(ast_ad.hessian(nested.directional_energy))(x, y),
        autograd.jacobian(autograd.hessian(theirs))(x, y),
        rtol=1e-10,
        atol=1e-12,
    )
    assert ast_ad.grad(ast_ad.grad(nested.cube_slope))(2.0) == pytest.approx(6.0, rel=1e-14)
    z = 0.7
    d = nested.scaled_slope_forward
    assert math.isclose(d(z), _leibniz(0, z), rel_tol=1e-13)
    for order in range(1, 5):
        d = ast_ad.grad(d)
        assert math.isclose(d(z), _leibniz(order, z), rel_tol=1e-11), order
    _, dot = ast_ad.jvp(ast_ad.grad(nested.scaled_slope_forward), (z,), (1.0,))
    assert math.isclose(dot, _leibniz(2, z), rel_tol=1e-11)


def test_forward_over_reverse_of_an_element_loop_needs_no_alias_checks() -> None:
    """The gradient of ``x[i]`` reads in a loop appends each read's adjoint to a list; appending
    changes the list, not the arrays in it, so the Hessian's code checks nothing at run time (it
    did, at every append, walking every container: quadratic in the loop's length)."""
    def rosenbrock(x):
        total = 0.0
        for i in range(len(x) - 1):
            total = total + (1.0 - x[i]) ** 2 + 10.0 * (x[i + 1] - x[i] ** 2) ** 2
        return total
    x = np.linspace(-1.0, 1.0, 6)
    assert "check_in_place" not in ast_ad.source(ast_ad.hessian(rosenbrock), x)
    expected = np.zeros((6, 6))
    for i in range(5):  # the Hessian of each term, by hand
        expected[i, i] += 2.0 - 40.0 * (x[i + 1] - x[i] ** 2) + 80.0 * x[i] ** 2
        expected[i, i + 1] += -40.0 * x[i]
        expected[i + 1, i] += -40.0 * x[i]
        expected[i + 1, i + 1] += 20.0
    np.testing.assert_allclose(ast_ad.hessian(rosenbrock)(x), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "case",
    [
        c
        for c in corpus_control.CASES
        if c.fn.__name__
        in (
            "while_active",
            "while_count",
            "break_continue",
            "early_returns",
            "for_else",
            "shared_weights_while",
        )
    ],
    ids=lambda c: c.fn.__name__,
)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_second_derivatives_of_while_loops_and_breaks(case: Case, data: st.DataObject) -> None:
    """A loop whose trips are counted reads its count back as a statement of its own: forward mode
    over the gradient follows it. Its Hessian-vector product against the tracer's forward over
    reverse."""
    args = data.draw(case.args)
    k = case.argnums[0]
    v = np.ones(np.shape(args[k])) if np.ndim(args[k]) else 1.0
    ours = ast_ad.hvp(case.fn, k)(*args, v)
    tangents = tuple(v if j == k else None for j in range(len(args)))
    traced = ast_ad.tracer.jvp(ast_ad.tracer.grad(case.fn, k), args, tangents)[1]
    np.testing.assert_allclose(ours, traced, rtol=1e-9, atol=1e-11)


def first_power(x):
    return x ** 1 + 2.0 * x


def test_the_second_derivative_of_a_first_power_at_zero_is_zero_for_numpy_numbers() -> None:
    """``x ** 1``'s second derivative reads ``0 * x ** -1``: for a numpy number ``0.0 ** -1`` is
    ``inf``, not an error as for a float, and the product was NaN (``runtime.pow_minus_one``)."""
    for x in (0.0, np.float64(0.0), np.asarray(0.0)):
        assert float(ast_ad.hessian(first_power)(x)) == 0.0
        assert float(ast_ad.grad(ast_ad.grad(first_power))(x)) == 0.0


def loop_with_fixed_matrix(x):
    m = np.outer(x, x)
    for _ in range(2):
        y = np.sin(m @ x)
    return np.sum(y @ m)


def test_third_derivative_through_a_loop_summing_a_fixed_matrix_adjoint() -> None:
    """A loop's adjoints of a matrix it multiplies every step are summed after it
    (``summed_matmul_vjp_a``); their forward rule's tangent terms (``product_terms_jvp``) were
    declared without a derivative, so the third derivative silently lost their part (6.3 off here).
    Against autograd's."""
    import autograd
    import autograd.numpy as anp

    def theirs(x):
        m = anp.outer(x, x)
        y = anp.sin(m @ x)
        return anp.sum(y @ m)
    x = np.array([0.3, -0.2, 0.5])
    np.testing.assert_allclose(
        ast_ad.jacfwd(ast_ad.hessian(loop_with_fixed_matrix))(x),
        autograd.jacobian(autograd.hessian(theirs))(x),
        rtol=1e-10,
        atol=1e-12,
    )


def _along(fn, v):
    def directional(x):
        return ast_ad.jvp(fn, (x,), (v,))[1]
    return directional


def casts_and_choices(x):
    a = x.astype(np.float64) * x
    return max(a[0] * x[1], x[2]) * min(x[0], 0.8) + np.sum(np.asarray(a, dtype=float) ** 2)


@pytest.mark.parametrize(
    "fn",
    [
        reductions,
        solves,
        cholesky_and_sort,
        casts_and_choices,
        *THROUGH_AUTOGRAD,
        *THROUGH_DIFFERENCES,
    ],
    ids=lambda fn: fn.__name__,
)
def test_reverse_mode_over_forward_mode_code(fn) -> None:
    """grad of a body that calls jvp: reverse mode reads the forward-mode code, and the helpers it
    calls that have forward rules only (``cholesky_jvp``, ``sort_jvp``, ``cumprod_vjp``...) by their
    source. H v, against forward over reverse."""
    x = {cholesky_and_sort: np.array([1.0, 0.25, 0.1, 0.3, 1.1, 0.2, 0.05, 0.4, 0.9]),
         solves: SECOND_ORDER_X[:3]}.get(fn, SECOND_ORDER_X)
    v = np.random.default_rng(2).standard_normal(x.size)
    ours = ast_ad.grad(_along(fn, v))(x)
    np.testing.assert_allclose(ours, ast_ad.hessian(fn)(x) @ v, rtol=1e-8, atol=1e-10)


def returns_a_list(x):
    parts = []
    for k in range(3):
        parts.append(np.sin(x * (k + 1)))
    return parts


def test_vjp_leaves_the_adjoint_it_is_given_as_it_was() -> None:
    """The backward pass pops the adjoints of the lists the function appended to: it pops its own
    copy (before, the caller's list was emptied)."""
    x = np.array([0.3, 0.6])
    _, vjp_fn = ast_ad.vjp(returns_a_list, x)
    u = [np.ones(2), 2.0 * np.ones(2), np.zeros(2)]
    first = vjp_fn(u)[0]
    assert len(u) == 3 and all(
        np.array_equal(a, b)
        for a, b in zip(u, [np.ones(2), 2.0 * np.ones(2), np.zeros(2)], strict=True)
    )
    np.testing.assert_allclose(vjp_fn(u)[0], first)
    np.testing.assert_allclose(first, np.cos(x) + 4.0 * np.cos(2.0 * x))


# ---- reverse mode over every transformed function ------------------------------------------------
def _looped_potential(x):
    for _ in range(3):
        x = np.tanh(x) * 1.5 + 0.1 * x
    if x[0] > 0.0:
        x = x * x[1]
    return np.sum(np.sin(x) * x[0]) + np.sum(x ** 3)


def _vector_map(x):
    return np.sin(x) * x[0] + np.tanh(x[::-1])


def _cubic_sine(t):
    return t ** 3 * np.sin(t)


def _pick(a, b):
    if np.sum(a[0]) > 0.0:
        return a
    return b


def _picked(x):
    return np.sum(_pick([np.sin(x) * x[0], 0.5 * x * x], [x, np.cos(x)])[0] ** 2)


def _list_read(x):
    return np.sum([x * x[0], x][0] ** 2)


def _picked_in_a_loop(x):
    n = 0
    while n < 3:
        n += 1
        x = x * np.tanh(np.tanh(_pick([x * x, 0.5], [x, 0.5])[0]))
    return np.sum(x)


def _appended_terms(x):
    items = []
    for k in range(3):
        items.append(np.sum(np.sin(x) * x) * (k + 1))
    return sum(items) ** 2


def _transformed(name: str, rng) -> tuple:
    """A function ast_ad made, and arguments for it."""
    x = rng.uniform(0.2, 0.9, 3)
    return {
        "jacfwd": lambda: (ast_ad.jacfwd(_vector_map), (x,)),
        "jacrev": lambda: (ast_ad.jacrev(_vector_map), (x,)),
        "hessian": lambda: (ast_ad.hessian(_looped_potential), (x,)),
        "hvp": lambda: (ast_ad.hvp(_looped_potential), (x, rng.standard_normal(3))),
        "value_and_grad": lambda: (ast_ad.value_and_grad(_looped_potential), (x,)),
        "grad_of_grad": lambda: (ast_ad.grad(ast_ad.grad(_cubic_sine)), (float(x[0]),)),
        "value_and_grad_of_grad": lambda: (
            ast_ad.value_and_grad(ast_ad.grad(_cubic_sine)),
            (float(x[0]),),
        ),
        "hvp_of_appends": lambda: (ast_ad.hvp(_appended_terms), (x, rng.standard_normal(3))),
        "hvp_of_a_picked_list": lambda: (ast_ad.hvp(_picked), (x, rng.standard_normal(3))),
        "hvp_of_a_list_read": lambda: (ast_ad.hvp(_list_read), (x, rng.standard_normal(3))),
        "hvp_of_a_list_picked_in_a_loop": lambda: (
            ast_ad.hvp(_picked_in_a_loop),
            (x, rng.standard_normal(3)),
        ),
    }[name]()


TRANSFORMED = [
    "jacfwd",
    "jacrev",
    "hessian",
    "hvp",
    "value_and_grad",
    "grad_of_grad",
    "value_and_grad_of_grad",
    "hvp_of_appends",
    "hvp_of_a_picked_list",
    "hvp_of_a_list_read",
    "hvp_of_a_list_picked_in_a_loop",
]


def _like_random(value, rng):
    if isinstance(value, tuple):
        return tuple(_like_random(v, rng) for v in value)
    return (
        float(rng.standard_normal())
        if np.ndim(value) == 0
        else rng.standard_normal(np.shape(value))
    )


def _assert_close(a, b) -> None:
    assert isinstance(a, tuple) == isinstance(b, tuple)
    if isinstance(a, tuple):
        for x, y in zip(a, b, strict=True):
            _assert_close(x, y)
    else:
        np.testing.assert_allclose(a, b, rtol=1e-13)


def _inner(a, b) -> float:
    if isinstance(a, tuple):
        return sum(_inner(x, y) for x, y in zip(a, b, strict=True))
    return float(np.sum(np.asarray(a) * np.asarray(b)))


@pytest.mark.parametrize("name", TRANSFORMED)
@pytest.mark.parametrize("seed", [0, 1])
def test_the_vjp_of_a_transformed_function_is_the_transpose_of_its_jvp(
    name: str, seed: int
) -> None:
    """vjp of what ast_ad made (reverse mode over its code) against jvp (forward mode over it), by
    the dot-product identity; its value is the function's own."""
    rng = np.random.default_rng(seed)
    fun, args = _transformed(name, rng)
    u = _like_random(args, rng)
    out, out_dot = ast_ad.jvp(fun, args, u)
    value, vjp_fn = ast_ad.vjp(fun, *args)
    _assert_close(value, out)
    w = _like_random(out, rng)
    bars = vjp_fn(w)
    assert len(bars) == len(args)
    assert math.isclose(_inner(w, out_dot), _inner(bars, u), rel_tol=1e-9, abs_tol=1e-12)
    assert _inner(vjp_fn(w), u) == _inner(bars, u)  # vjp_fn can be called again


@pytest.mark.parametrize("name", ["hvp", "value_and_grad", "grad_of_grad"])
def test_the_vjp_of_a_transformed_function_matches_finite_differences(name: str) -> None:
    rng = np.random.default_rng(7)
    fun, args = _transformed(name, rng)
    w = _like_random(fun(*args), rng)
    bars = ast_ad.vjp(fun, *args)[1](w)
    for k, arg in enumerate(args):
        d = _like_random(arg, rng)
        numeric = directional(lambda *a: _inner(w, fun(*a)), args, k, d)
        assert math.isclose(_inner(bars[k], d), numeric, rel_tol=1e-6, abs_tol=1e-7), k


@pytest.mark.parametrize("name", TRANSFORMED)
def test_finish_bar_is_the_transpose_of_finish_dot(name: str) -> None:
    """What takes the adjoint of a transformed function's result back to its code's
    (``Lowered.finish_bar``) is the transpose of what takes its code's tangent to the result's."""
    from ast_ad.api import compose

    rng = np.random.default_rng(11)
    fun, args = _transformed(name, rng)
    lowered = compose.lower(fun, args)
    raw = lowered.fn(*lowered.args)
    d, g = _like_random(raw, rng), _like_random(lowered.finish(raw), rng)
    assert math.isclose(
        _inner(g, lowered.finish_dot(raw, d)),
        _inner(lowered.finish_bar(raw, g), d),
        rel_tol=1e-12,
        abs_tol=1e-12,
    )


@pytest.mark.parametrize("name", ["hessian", "hvp", "value_and_grad", "grad_of_grad"])
def test_jacrev_of_a_transformed_function_is_jacfwds(name: str, monkeypatch) -> None:
    """jacrev runs reverse mode over what ast_ad made, but over a Jacobian (whose reverse rule is a
    forward pass an entry): forward mode, the same matrix in fewer passes."""
    from ast_ad.api import compose

    fun, args = _transformed(name, np.random.default_rng(5))
    forward = ast_ad.jacfwd(fun)(*args)
    modes = []

    def counting(mode: str):
        run = getattr(compose.Jacobian, mode)

        def counted(self, *call):
            modes.append(mode)
            return run(self, *call)
        return counted
    for mode in ("forward", "reverse"):
        monkeypatch.setattr(compose.Jacobian, mode, counting(mode))
    reverse = ast_ad.jacrev(fun)(*args)
    # (the Hessian evaluates itself too)
    assert modes[0] == ("forward" if name == "hessian" else "reverse")
    for r, f in zip(reverse if isinstance(reverse, tuple) else (reverse,),
                    forward if isinstance(forward, tuple) else (forward,), strict=True):
        np.testing.assert_allclose(r, f, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("t", [0.7, -1.3])
def test_reverse_mode_over_a_second_derivative_to_the_fifth_order(t: float) -> None:
    """vjp of grad(grad(s)) is reverse over forward over reverse mode: s''' against its closed form;
    and vjp of that vjp's function again (through grad), s''''."""
    s = _cubic_sine_derivatives(t)
    (third,) = ast_ad.vjp(ast_ad.grad(ast_ad.grad(_cubic_sine)), t)[1](1.0)
    assert math.isclose(third, s[3], rel_tol=1e-12)
    value, vjp_fn = ast_ad.vjp(ast_ad.value_and_grad(ast_ad.grad(_cubic_sine)), t)
    assert value == pytest.approx((s[1], s[2]), rel=1e-13)
    assert vjp_fn((1.0, 0.0))[0] == pytest.approx(s[2], rel=1e-12)
    assert vjp_fn((0.0, 1.0))[0] == pytest.approx(s[3], rel=1e-12)
    assert ast_ad.grad(ast_ad.grad(ast_ad.grad(ast_ad.grad(_cubic_sine))))(t) == pytest.approx(
        s[4], rel=1e-10
    )


def test_source_shows_the_code_an_hvp_runs() -> None:
    """``source(hvp(f), x, v)``: the forward-mode code over the gradient's that ``hvp`` runs (it
    needs example arguments: the code depends on their kinds)."""
    x, v = np.array([0.3, -0.2, 0.5]), np.array([1.0, 0.5, -2.0])
    hvp = ast_ad.hvp(_looped_potential)
    text = ast_ad.source(hvp, x, v)
    assert text.startswith("def looped_potential_vjp_jvp(x, out_bar, x_dot):")
    # the Hessian's columns: the same code, written for the stack of its tangents (``modes.batch``)
    columns = ast_ad.source(ast_ad.hessian(_looped_potential), x)
    assert columns.startswith("def looped_potential_vjp_jvp(x, out_bar, x_dot):")
    assert "size = batch_size_of(x_dot)" in columns and "batch_size_of" not in text
    with pytest.raises(ASTADError, match="needs example arguments"):
        ast_ad.source(hvp)


def test_reverse_mode_over_forward_mode_names_each_helper_one_way() -> None:
    """The rules of forward mode's helpers read ast_ad's others through their module
    (``rt.unbroadcast``); inlined, they name the helper as the rest of the generated code does
    (``unbroadcast``), not ``runtime.unbroadcast``."""
    from ast_ad import transform
    from ast_ad.api import compose
    from ast_ad.api.arguments import shape_labels

    x, v = np.array([0.3, -0.2, 0.5]), np.array([1.0, 0.5, -2.0])
    lowered = compose.lower(ast_ad.hvp(_sine_sum), (x, v))
    _, _, loaded = transform.pair(lowered.fn, (0, 2), shape_labels(lowered.args))
    assert (
        re.search(r"\n +\w+_bar = unbroadcast\(\w+_bar, \w+\)\n", loaded.text)
        and "runtime." not in loaded.text
    )


def _sine_sum(x):
    # (a mean: its adjoint is spread by ``expand_reduced``, whose forward rule reads
    # ``unbroadcast``; a sum of this product takes the sum's adjoint as it is)
    return np.mean(np.sin(x) * x)


def test_reverse_mode_undoes_the_pops_of_the_lists_a_gradient_makes(caplog) -> None:
    """The gradient of a function that appends to a list pops the list's adjoint, a list the
    gradient makes (``spread``: ``registry.def_new_list``). Reverse mode over that code undoes those
    pops, so vjp runs reverse mode there (no fallback to forward mode's columns), and agrees with
    them."""
    import logging

    rng = np.random.default_rng(3)
    fun, args = _transformed("hvp_of_appends", rng)
    with caplog.at_level(logging.INFO, logger="ast_ad"):
        _, vjp_fn = ast_ad.vjp(fun, *args)
        w = rng.standard_normal(3)
        bars = vjp_fn(w)
    assert not any("forward mode instead" in r.getMessage() for r in caplog.records)
    jacobians = ast_ad.jacfwd(fun, (0, 1))(*args)
    for bar, jacobian in zip(bars, jacobians, strict=True):
        np.testing.assert_allclose(bar, w @ jacobian, rtol=1e-10, atol=1e-12)


def _list_of_a_branch(x):
    if np.sum(x) < 0.3:
        items = []
        for k in range(2):
            items.append(np.tanh(x) * k)
        x = np.sum(np.stack(items), axis=0)
    return np.sum((0.5 + x) ** 2)


def test_reverse_mode_undoes_the_pops_of_a_list_adjoint_made_in_a_branch(caplog) -> None:
    """A list made in a branch: the gradient's adjoint of it starts as None, is added to in the
    branch (``add_adjoints``, which may give back an argument as it is: ``def_new_list(...,
    passes=...)``), popped in the loop, and reset; its value list pops a value it drops
    (``items.pop()``: named, to be put back). Reverse mode follows all of it, over value_and_grad
    and hvp alike."""
    import logging

    x, v, w = np.array([0.1, -0.2, 0.3]), np.array([1.0, 0.5, -2.0]), np.array([0.2, -1.0, 0.4])
    with caplog.at_level(logging.INFO, logger="ast_ad"):
        out, vjp_fn = ast_ad.vjp(ast_ad.value_and_grad(_list_of_a_branch), x)
        (bar,) = vjp_fn((0.7, w))
        _, hvp_vjp = ast_ad.vjp(ast_ad.hvp(_list_of_a_branch), x, v)
        hvp_bars = hvp_vjp(w)
    assert not any("forward mode instead" in r.getMessage() for r in caplog.records)
    value_jacobian, grad_jacobian = ast_ad.jacfwd(ast_ad.value_and_grad(_list_of_a_branch))(x)
    np.testing.assert_allclose(
        bar, 0.7 * value_jacobian + w @ grad_jacobian, rtol=1e-10, atol=1e-12
    )
    for bar, jacobian in zip(
        hvp_bars, ast_ad.jacfwd(ast_ad.hvp(_list_of_a_branch), (0, 1))(x, v), strict=True
    ):
        np.testing.assert_allclose(bar, w @ jacobian, rtol=1e-10, atol=1e-12)


def _list_copied_then_written(x, y):
    items = [x, y]
    copied = items.copy() if x > 10.0 else list(items)
    copied[0] = x * y
    return copied[0] + copied[1] * 2.0


def _list_written(x, y):
    items = [x * 1.0, y * 1.0]
    items[0] = x * y
    return sum(items)


@pytest.mark.parametrize("fn", [_list_copied_then_written, _list_written])
def test_forward_mode_adds_the_tangents_of_a_written_list_element_by_element(fn) -> None:
    """``copied[0] = x * y`` on a list has two tangent terms, one a list each; added with ``+`` they
    were one list twice as long, and the tangent read its second item from the wrong half (1.0 for
    5.0). The list that ``list(items)`` makes, and what is written into it, are lists
    (``registry.def_same_kind``)."""
    args, tangents = (2.0, 3.0), (1.0, 0.5)
    out, out_dot = ast_ad.jvp(fn, args, tangents)
    assert (out, out_dot) == pytest.approx(ast_ad.tracer.jvp(fn, args, tangents), rel=1e-15)
    grads = ast_ad.grad(fn, (0, 1))(*args)
    assert out_dot == pytest.approx(
        sum(g * t for g, t in zip(grads, tangents, strict=True)), rel=1e-15
    )


def test_the_adjoints_a_callees_pair_gives_are_known_containers(caplog) -> None:
    """Reverse mode over the code of an hvp whose function calls a helper that returns one of its
    lists, in a loop: the items unpacked from the helper's pair (the adjoints of its list
    arguments), and the values a tape of such items gives back, may be containers, so their adjoints
    add element by element. Before, the backward pass added a list to a float there and vjp fell
    back to forward mode's columns."""
    import logging

    fun, args = _transformed("hvp_of_a_list_picked_in_a_loop", np.random.default_rng(4))
    w = np.array([0.5, -1.0, 2.0])
    with caplog.at_level(logging.INFO, logger="ast_ad"):
        _, vjp_fn = ast_ad.vjp(fun, *args)
        bars = vjp_fn(w)
    assert not any("forward mode instead" in r.getMessage() for r in caplog.records)
    for bar, jacobian in zip(bars, ast_ad.jacfwd(fun, (0, 1))(*args), strict=True):
        np.testing.assert_allclose(bar, w @ jacobian, rtol=1e-10, atol=1e-12)
    with pytest.raises(ASTADError, match="shaped as the function's value"):
        vjp_fn(np.ones(4))


def _swapped_in_a_loop(x):
    y = x * 1.0
    v = np.tanh(-x)
    for i in range(2):
        y += 0.1 * i * np.sin(y)
        y, v = v, np.tanh(0.5)
        y = 0.5 * np.tanh(y)
    return np.sum(np.sin(y) * v * x)


def test_the_float_zero_an_adjoint_starts_as_takes_a_summed_adjoint(caplog) -> None:
    """The gradient's ``unbroadcast(y_bar, y)`` broadcasts the float zero an adjoint starts as up to
    ``y``'s shape; reverse mode over it sums the adjoint back down (``fit_adjoint``), where it once
    refused to fit an array into a float (a ValueError, and vjp fell back to forward mode's
    columns)."""
    import logging

    x, w = np.array([0.3, -0.2, 0.5]), np.array([0.2, -1.0, 0.4])
    with caplog.at_level(logging.INFO, logger="ast_ad"):
        _, vjp_fn = ast_ad.vjp(ast_ad.value_and_grad(_swapped_in_a_loop), x)
        (bar,) = vjp_fn((0.7, w))
    assert not any("forward mode instead" in r.getMessage() for r in caplog.records)
    value_jacobian, grad_jacobian = ast_ad.jacfwd(ast_ad.value_and_grad(_swapped_in_a_loop))(x)
    np.testing.assert_allclose(
        bar, 0.7 * value_jacobian + w @ grad_jacobian, rtol=1e-10, atol=1e-12
    )


def _lists_made_in_a_loop(x):
    total = 0.0
    for k in range(2):
        items = []
        items.append(np.sin(x) * (k + 1))
        items.append(x * x)
        total = total + np.sum(items[0] * items[1])
    return total


def test_the_derivatives_of_an_hvp_of_lists_made_in_a_loop(caplog) -> None:
    """A list made in each step: the hvp's code pops its adjoint list and its tape in each step of
    its backward loop, and copies the list a tape gives back (``items = items_1``). Reverse mode
    over that code undoes the pops of lists made in a loop too, and forward mode over it no longer
    takes the dead copy for a second name of the list it pops (``aliasing.live_after``): vjp runs
    reverse mode, jacfwd runs at all, and they agree."""
    import logging

    x, v, w = np.array([0.1, -0.2, 0.3]), np.array([1.0, 0.5, -2.0]), np.array([0.2, -1.0, 0.4])
    hvp = ast_ad.hvp(_lists_made_in_a_loop)
    with caplog.at_level(logging.INFO, logger="ast_ad"):
        _, vjp_fn = ast_ad.vjp(hvp, x, v)
        bars = vjp_fn(w)
    assert not any("forward mode instead" in r.getMessage() for r in caplog.records)
    for bar, jacobian in zip(bars, ast_ad.jacfwd(hvp, (0, 1))(x, v), strict=True):
        np.testing.assert_allclose(bar, w @ jacobian, rtol=1e-10, atol=1e-12)


def _item_of_a_list_in_a_branch(x0, x1):
    m = 0.5 * np.outer(np.tanh(x0), np.cos(x1))
    items0 = []
    for j1, (v3, v4) in enumerate(zip([abs(0.5), x1], [0.5, (m @ (np.ones(3) * x1))], strict=True)):
        items0.append(np.sum(np.tanh(v3) * v4) * (j1 + 1))
    v2 = np.sum(np.stack(items0), axis=0)
    if np.sum(x1 / (1.0 + x1 * x1)) > 0.3:
        items5 = []
        for j6, (v8, v9) in enumerate(zip([(v2 * x1)], [x1], strict=True)):
            items5.append(np.sum(np.tanh(v8) * v9) * (j6 + 1))
        v2 = items5[-1]
    elif np.sum(x0 + v2) > -0.4:
        v2, x1 = x1, np.tanh(np.sin(np.tanh(v2)))
    return np.sum(x1)


def test_a_numbers_adjoint_taken_for_a_containers_starts_as_none_and_is_made_dense(caplog) -> None:
    """A random program the long test profile found: the gradient's adjoint of ``v2``, an item of a
    list, is added to by ``add_adjoints``, so reverse mode over that code takes it for a
    container's, whose adjoint starts as ``None``; an elementwise rule (``-g``) cannot take that. It
    is made dense first (``dense_adjoint``), where the backward pass failed before and vjp fell back
    to forward mode's columns."""
    import logging

    x0, x1 = (
        np.array([0.12573022, -0.13210486, 0.64042265]),
        np.array([0.10490012, -0.53566937, 0.36159505]),
    )
    w = np.array([0.2, -1.0, 0.4])
    both = ast_ad.value_and_grad(_item_of_a_list_in_a_branch, 0)
    with caplog.at_level(logging.INFO, logger="ast_ad"):
        _, vjp_fn = ast_ad.vjp(both, x0, x1)
        bar = vjp_fn((0.7, w))[0]
    assert not any("forward mode instead" in r.getMessage() for r in caplog.records)
    value_jacobian, grad_jacobian = ast_ad.jacfwd(both)(x0, x1)
    np.testing.assert_allclose(
        bar, 0.7 * value_jacobian + w @ grad_jacobian, rtol=1e-10, atol=1e-12
    )


def _checked_appends(x):
    items = []
    total = 0.0
    for k in range(3):
        others = items, total
        message = "a check, as ast_ad's generated code writes one"
        checked = check_in_place(total, others, message)  # noqa: F841
        items.append(x * (k + 1.0))
        total = total + np.sum(np.sin(items[-1]))
    return total


def test_a_tuple_only_a_check_reads_shares_nothing() -> None:
    """Generated code, read again, holds the tuples its checks compare by identity (``others =
    ...``): a tuple that nothing but such a check reads (``registry.def_identity_read``) holds its
    items for no reader, so a later change of one of them is not refused. Before, the append below
    was (an InPlaceAliasError)."""
    x = np.array([0.3, -0.2])
    np.testing.assert_allclose(
        ast_ad.grad(_checked_appends)(x), ast_ad.tracer.grad(_checked_appends)(x), rtol=1e-13
    )


def _sum_of_pair(pair):
    a, b = pair
    return np.sum(a * b)


def test_where_reverse_mode_refuses_the_code_the_vjp_is_by_forward_mode(
    monkeypatch, caplog
) -> None:
    """The other fallback, forced (the random programs no longer reach it): where reverse mode
    refuses the code of a derivative (a pop of a list its caller gives it, say), vjp takes the
    Jacobian's columns by forward mode, exact, says so at INFO, and gives what reverse mode
    gives."""
    import logging

    from ast_ad.api import compose
    from ast_ad.errors import LocatedError

    fun, args = _transformed("hvp", np.random.default_rng(7))
    w = np.array([0.5, -1.0, 2.0])
    expected = ast_ad.vjp(fun, *args)[1](w)

    def refusing(*_args, **_kwargs):
        raise LocatedError(
            "reverse mode differentiates list.pop() on a list the function makes itself"
        )

    monkeypatch.setattr(compose.transform, "pair", refusing)
    with caplog.at_level(logging.INFO, logger="ast_ad"):
        _, vjp_fn = ast_ad.vjp(fun, *args)
    assert any(
        "is refused" in r.getMessage() and "forward mode instead" in r.getMessage()
        for r in caplog.records
    )
    for bar, want in zip(vjp_fn(w), expected, strict=True):
        np.testing.assert_allclose(bar, want, rtol=1e-10, atol=1e-12)


def test_a_forward_pass_that_fails_falls_back(monkeypatch, caplog) -> None:
    """The forward pass ast_ad wrote over a derivative's code, failing as it runs (forced: its first
    run raises as a helper given an adjoint it cannot take would): vjp falls back to forward mode's
    columns, says so, and gives what reverse mode gives; no IndexError reaches the user."""
    import logging

    from ast_ad.api import compose

    fun, args = _transformed("hvp", np.random.default_rng(8))
    w = np.array([0.5, -1.0, 2.0])
    expected = ast_ad.vjp(fun, *args)[1](w)
    real, calls = compose.run_code, []

    def failing_once(loaded, fn, *arguments):
        calls.append(fn)
        if len(calls) == 1:
            raise IndexError(
                "too many indices for array: array is 0-dimensional, but 1 were indexed"
            )
        return real(loaded, fn, *arguments)
    monkeypatch.setattr(compose, "run_code", failing_once)
    with caplog.at_level(logging.INFO, logger="ast_ad"):
        out, vjp_fn = ast_ad.vjp(fun, *args)
    assert any("forward pass failed" in r.getMessage() for r in caplog.records)
    np.testing.assert_allclose(out, fun(*args), rtol=1e-12)
    for bar, want in zip(vjp_fn(w), expected, strict=True):
        np.testing.assert_allclose(bar, want, rtol=1e-10, atol=1e-12)


def test_a_backward_pass_that_fails_falls_back_or_says_why(monkeypatch) -> None:
    """The fallback's two sides, the failure forced (``fresh`` raising as a failing backward pass
    would): for array arguments, forward mode gives the same numbers as reverse mode gave before;
    for a tuple argument, which forward mode's columns cannot take, an ast_ad error says what to do,
    not the bare TypeError."""
    from ast_ad.api import compose

    fun, args = _transformed("value_and_grad", np.random.default_rng(6))
    _, vjp_fn = ast_ad.vjp(fun, *args)
    w = (0.7, np.array([1.0, -2.0, 0.5]))
    expected = vjp_fn(w)

    def failing(saved, copies=None):
        raise TypeError("unsupported operand type(s) for +: 'float' and 'list'")
    monkeypatch.setattr(compose, "fresh", failing)
    monkeypatch.setattr(compose, "reads_only", lambda loaded: False)  # (so ``fresh`` is called)
    _, vjp_fn = ast_ad.vjp(fun, *args)
    np.testing.assert_allclose(vjp_fn(w)[0], expected[0], rtol=1e-10, atol=1e-12)
    pair = (np.array([0.3, 0.5]), np.array([1.5, -0.5]))
    _, vjp_fn = ast_ad.vjp(ast_ad.value_and_grad(_sum_of_pair), pair)
    with pytest.raises(ast_ad.errors.GradientFailedError, match="separate arguments"):
        vjp_fn((1.0, (np.ones(2), np.ones(2))))


def test_a_gradient_called_in_a_body_gives_all_its_arguments_adjoints_in_one_pass() -> None:
    """Reverse mode over ``grad(potential)(x, y)`` with both ``x`` and ``y`` differentiated: the
    adjoints of both are one forward pass over the gradient in both (``Rule.joint``,
    ``Gradient.joint_adjoints``), not one pass each: the code calls it once. Against autograd, and
    the Hessian over it (a third derivative, forward mode over the joint rule) too."""
    import autograd
    import autograd.numpy as anp

    from tests import compose_nested as nested

    def pot(a, b):
        return anp.sum(anp.sin(a) * b) + anp.sum(a ** 3)

    def theirs(a, b):
        return anp.sum(autograd.grad(pot)(a, b) ** 2)

    x, y = np.array([0.3, -0.5, 0.9]), 1.5
    gradient = ast_ad.grad(nested.force_norm, (0, 1))
    got = gradient(x, y)
    source = ast_ad.source(gradient)
    assert source.count("_vjps(") == 1 and "_parts[0]" in source and "_parts[1]" in source
    for a, b in zip(got, autograd.grad(theirs, (0, 1))(x, y), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    # one argument differentiated: its own rule, no joint call
    assert "_vjps(" not in ast_ad.source(ast_ad.grad(nested.force_norm, 0), x, y)
    # (a tuple's tangents add element by element: ``+`` joined them, and the block was wrong)
    hessian = ast_ad.hessian(nested.force_norm, (0, 1))(x, y)
    for i, j in ((0, 0), (0, 1), (1, 1)):
        np.testing.assert_allclose(hessian[i][j],
                                   autograd.jacobian(autograd.grad(theirs, i), j)(x, y),
                                   rtol=1e-9, atol=1e-11)


def test_reverse_over_a_jvp_reads_a_changed_global_again(monkeypatch) -> None:
    """Reverse mode over ``ast_ad.jvp`` in a body: the adjoints of the jvp's arguments come from
    the forward-mode code's pair, made once for the arguments' layout and called directly
    (``JvpCotangent.direct``); a global the function reads, changed between calls, makes that code
    again (``Loaded.refresh``), as the general path does. Against the closed form, with a numpy
    float64 as the second argument (one layout with a float's)."""
    from tests import compose_nested as nested

    x, y = np.array([0.3, -0.5, 0.9]), np.float64(1.5)

    def expected(scale):
        slope = scale * np.sum(np.cos(x) * y)
        return 2 * slope * scale * -np.sin(x) * y, 2 * slope * scale * np.sum(np.cos(x))

    gradient = ast_ad.grad(nested.squared_slope, (0, 1))
    for scale in (2.0, 2.0, 3.0):
        monkeypatch.setattr(nested, "SCALE", scale)
        gx, gy = gradient(x, y)
        ex, ey = expected(scale)
        np.testing.assert_allclose(gx, ex, rtol=1e-12)
        assert math.isclose(gy, ey, rel_tol=1e-12)


def test_reverse_over_a_jvp_runs_the_backward_function_on_the_tape_its_forward_kept(
    monkeypatch,
) -> None:
    """Reverse mode over ``ast_ad.jvp`` in a body, once the pair of its forward-mode code is made:
    the jvp's forward runs the pair's forward function and keeps its tape on the result
    (``compose.Taped``), and the reverse rule runs the backward function on it alone (spied);
    its adjoints are the same to the bit as where the rule runs the forward function again, and
    the gradient is the closed form's; a backward pass run twice on one forward pass gives it
    twice; a copy of the result is a plain tuple."""
    import copy

    from ast_ad.api import compose
    from tests import compose_nested as nested

    seen: list[bool] = []
    real = compose.JvpCotangent.run_direct

    def spied(self, found, g, primals, tangents, ans=None):
        seen.append(type(ans) is compose.Taped and ans.pair is found[1])
        kept = real(self, found, g, primals, tangents, ans)
        again = real(self, found, g, primals, tangents, None)  # (the forward function again)
        for a, b in zip(kept, again, strict=True):
            np.testing.assert_array_equal(a, b)
        return kept

    monkeypatch.setattr(compose.JvpCotangent, "run_direct", spied)
    monkeypatch.setattr(nested, "SCALE", 2.0)
    x, y = np.array([0.3, -0.5, 0.9]), 1.5
    gradient = ast_ad.grad(nested.squared_slope_by_name, (0, 1))
    gradient(x, y)  # (the pair is made by the first such call: its forward ran again)
    again = gradient(x, y)
    assert seen[-1] is True
    slope = 2.0 * np.sum(np.cos(x) * y)
    np.testing.assert_allclose(again[0], 2 * slope * 2.0 * -np.sin(x) * y, rtol=1e-12)
    out, vjp_fn = ast_ad.vjp(nested.squared_slope_by_name, x, y)
    once, twice = vjp_fn(1.0), vjp_fn(1.0)
    np.testing.assert_array_equal(once[0], twice[0])
    np.testing.assert_array_equal(once[0], again[0])
    taped = compose.jvp_of(nested.scaled_potential)((x, y), (np.ones(3), None))
    assert type(taped) is compose.Taped
    assert type(copy.deepcopy(taped)) is tuple and copy.deepcopy(taped) == tuple(taped)


def test_reverse_over_a_gradient_runs_its_hessian_vector_product_directly(
    monkeypatch, lowerings
) -> None:
    """Reverse mode over ``ast_ad.grad`` in a body: the gradient's reverse rule, a Hessian-vector
    product, runs the forward-mode module over the gradient's code directly once a call of the same
    layout has found it (``directional._gradient_direct``: nothing lowered again, counted); a
    global the function reads, changed between calls, makes the code again; arrays of another
    length find their own. Against the closed form."""
    from tests import compose_nested as nested


    def expected(x, y, scale):
        # f = SCALE * sum(sin(x) y), grad_x f = SCALE cos(x) y, its squared sum's gradient
        force = scale * np.cos(x) * y
        return 2 * force * scale * -np.sin(x) * y, 2 * np.sum(force * scale * np.cos(x))

    gradient = ast_ad.grad(nested.squared_force, (0, 1))
    x = np.array([0.3, -0.5, 0.9])
    for scale, n, counts in ((2.0, 3, None), (2.0, 3, 0), (3.0, 3, None), (3.0, 5, None),
                             (3.0, 5, 0)):
        monkeypatch.setattr(nested, "SCALE", scale)
        x, y = np.linspace(-1.0, 1.0, n), np.float64(1.5)
        lowerings["n"] = 0
        gx, gy = gradient(x, y)
        if counts is not None:
            assert lowerings["n"] == counts
        ex, ey = expected(x, y, scale)
        np.testing.assert_allclose(gx, ex, rtol=1e-12)
        assert math.isclose(gy, ey, rel_tol=1e-12)


def test_jvp_of_a_gradient_called_like_last_time_runs_its_module_directly(
    monkeypatch, lowerings
) -> None:
    """``jvp(grad(f), ...)`` (a Hessian-vector product) called as last time with floats and
    numpy arrays runs the forward-mode module over the gradient's code directly, with the general
    path's value and tangent; a moving argument more, or another dtype, takes the general path;
    an argument of the wrong kind is refused there as before."""
    from tests import compose_nested as nested

    monkeypatch.setattr(nested, "SCALE", 2.0)
    gradient = ast_ad.grad(nested.scaled_potential)
    x, v, y = np.array([0.3, -0.5, 0.9]), np.array([1.0, 2.0, -1.0]), 1.5
    first = ast_ad.jvp(gradient, (x, y), (v, None))
    assert gradient.tangent_module is not None
    lowerings["n"] = 0
    again = ast_ad.jvp(gradient, (x, y), (v, None))
    assert lowerings["n"] == 0
    np.testing.assert_array_equal(again[0], first[0])
    np.testing.assert_array_equal(again[1], first[1])
    np.testing.assert_allclose(again[1], 2.0 * -np.sin(x) * y * v, rtol=1e-12)
    both = ast_ad.jvp(gradient, (x, y), (v, 1.0))  # y moves too: another module
    assert lowerings["n"] == 1
    np.testing.assert_allclose(both[1], 2.0 * (-np.sin(x) * y * v + np.cos(x)), rtol=1e-12)
    narrow = ast_ad.jvp(gradient, (x.astype(np.float32), y), (v.astype(np.float32), None))
    assert lowerings["n"] == 2 and narrow[1].dtype == np.float32
    with pytest.raises(ASTADError, match="tangent of argument 0 has shape"):
        ast_ad.jvp(gradient, (x, y), (v[:2], None))


def test_a_jvp_called_again_with_a_float64_takes_the_direct_path(monkeypatch) -> None:
    """``jvp`` of a function called as last time, a numpy float64 among the arguments (as
    ``w[0]`` of an array is): the module of last time, run directly, not lowered again."""
    from ast_ad.api import directional
    from tests import compose_nested as nested

    x, y = np.array([0.3, -0.5, 0.9]), np.float64(1.5)
    first = ast_ad.jvp(nested.potential, (x, y), (np.ones(3), None))
    lowered = []
    monkeypatch.setattr(directional, "lower", lambda *a: lowered.append(a) or None)
    again = ast_ad.jvp(nested.potential, (x, y), (np.ones(3), None))
    assert lowered == [] and again == first


def test_forward_mode_over_a_gradient_in_a_body_moves_all_its_arguments_in_one_pass() -> None:
    """Forward mode over ``grad(potential)(x, y)`` with both ``x`` and ``y`` moving: one forward
    pass over the gradient with both tangents (``Rule.joint_tangent``,
    ``Gradient.joint_tangent``), not one pass each. Against autograd's directional derivative, and
    reverse mode over it (a third derivative) against autograd's."""
    import autograd
    import autograd.numpy as anp

    from tests import compose_nested as nested

    def pot(a, b):
        return anp.sum(anp.sin(a) * b) + anp.sum(a ** 3)

    def theirs(a, b):
        return anp.sum(autograd.grad(pot)(a, b) ** 2)

    x, y = np.array([0.3, -0.5, 0.9]), 1.5
    u, v = np.array([0.2, 1.0, -0.7]), 0.4
    source = ast_ad.source(nested.force_norm, x, y, stage="jvp")
    assert source.count("_jvps(") == 1
    _, dot = ast_ad.jvp(nested.force_norm, (x, y), (u, v))
    gx, gy = autograd.grad(theirs, (0, 1))(x, y)
    assert math.isclose(dot, float(gx @ u + gy * v), rel_tol=1e-11)

    def along(a, b):
        return ast_ad.jvp(nested.force_norm, (a, b), (u, v))[1]

    ours = ast_ad.grad(along, (0, 1))(x, y)
    def their_along(a, b):
        return anp.sum(autograd.grad(theirs, 0)(a, b) * u) + autograd.grad(theirs, 1)(a, b) * v

    expected = autograd.grad(their_along, (0, 1))(x, y)
    for a, b in zip(ours, expected, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)


def test_forward_mode_over_a_jvp_in_a_body_runs_its_module_directly(monkeypatch) -> None:
    """Forward mode over ``ast_ad.jvp`` in a body, its tangents held in a name (a call of the
    primitive ``JvpOf``, not lowered in place): the jvp's forward rule (``JvpTangent``), called
    again with the layout of its last call, checks that layout and both modules inline and runs the
    forward-mode module over the jvp's code, without finding the code again (``JvpOf.fixed``,
    counted): the same numbers as the first call, to the bit; a global the function reads, changed
    between calls, is read again; a vector of another length finds its own. Against the closed
    form."""
    from ast_ad.api import compose
    from tests import compose_nested as nested

    found = {"n": 0}
    real = compose.JvpOf.fixed

    def fixed(self, *args):
        found["n"] += 1
        return real(self, *args)

    monkeypatch.setattr(compose.JvpOf, "fixed", fixed)

    def expected(x, y, u, scale):
        slope = scale * np.sum(np.cos(x) * y)
        return slope ** 2, 2 * slope * scale * np.sum(-np.sin(x) * y * u)

    before = None
    # (lengths no other test calls it with: its last call is this test's; the global changed, the
    # modules read it again, ``Loaded.refresh``, and the value says whether they did)
    for scale, n, finds in ((2.0, 7, 1), (2.0, 7, 0), (3.0, 7, None), (3.0, 9, 1), (3.0, 9, 0)):
        monkeypatch.setattr(nested, "SCALE", scale)
        x, y = np.linspace(-1.0, 1.0, n), 1.5
        u = np.linspace(0.5, 2.0, n)
        found["n"] = 0
        out, out_dot = ast_ad.jvp(nested.squared_slope_by_name, (x, y), (u, None))
        assert finds is None or found["n"] == finds
        value, slope = expected(x, y, u, scale)
        assert math.isclose(out, value, rel_tol=1e-12)
        assert math.isclose(out_dot, slope, rel_tol=1e-12)
        if finds == 0:
            assert out_dot == before  # (the direct call: the general path's number, to the bit)
        before = out_dot


def _squared_slope_elsewhere(x, y):
    """``compose_nested.squared_slope`` written in another module than the function it takes the
    jvp of: the global that function reads (``SCALE``) is its module's, not this one's."""
    return ast_ad.jvp(nested_functions.scaled_potential, (x, y), (np.ones_like(x), None))[1] ** 2


def test_a_jvp_written_in_a_body_is_its_forward_code_lowered_in_place(monkeypatch) -> None:
    """``ast_ad.jvp(f, (x, y), (v, None))`` written out in a body: ``f``'s forward-mode code, made
    for any floats and arrays, is lowered where the call is (``Nesting.forward_mode_inlined``), so
    the outer derivative differentiates it as it differentiates the user's code: no derivative
    object is called (``jvp_scaled_potential`` is not in the code), in reverse mode and in forward
    mode over it. Its values are those of the primitive ``JvpOf`` (tangents held in a name) and of
    the closed form; the global it reads (``SCALE``) is watched, as the outer function's own are:
    bound again, the next gradient follows it; and so is the function itself, defined again."""
    from tests import compose_nested as nested

    x, y = np.array([0.3, -0.5, 0.9]), 1.5
    for scale in (2.0, 3.0):
        monkeypatch.setattr(nested, "SCALE", scale)
        slope = scale * np.sum(np.cos(x) * y)
        closed = (2 * slope * scale * -np.sin(x) * y, 2 * slope * scale * np.sum(np.cos(x)))
        for fn in (nested.squared_slope, nested.squared_slope_by_name,
                   nested.squared_slope_through_a_helper, _squared_slope_elsewhere):
            expected = closed if fn is not nested.squared_slope_through_a_helper else tuple(
                0.25 * c for c in closed)
            got = ast_ad.grad(fn, (0, 1))(x, y)
            np.testing.assert_allclose(got[0], expected[0], rtol=1e-12)
            assert math.isclose(got[1], expected[1], rel_tol=1e-12)
            # forward mode over it: the tangent along (u, 1) is the gradient's product with it
            u = np.array([0.2, 0.1, -0.4])
            _, along = ast_ad.jvp(fn, (x, y), (u, 1.0))
            assert math.isclose(along, float(np.dot(expected[0], u)) + expected[1],
                                rel_tol=1e-12)
    text = ast_ad.source(ast_ad.grad(nested.squared_slope, (0, 1)))
    assert "jvp_scaled_potential" not in text and "scaled_potential_jvp" in text
    assert "jvp_scaled_potential" in ast_ad.source(ast_ad.grad(nested.squared_slope_by_name))
    # (a function whose forward-mode code is more than one function stays the primitive)
    assert "jvp_potential_through_a_helper" in ast_ad.source(
        ast_ad.grad(nested.squared_slope_through_a_helper))
    # the inner function defined again: the outer gradient follows it (SCALE is 3.0 here)
    monkeypatch.setattr(nested, "scaled_potential", nested.linear_potential)
    got = ast_ad.grad(nested.squared_slope, (0, 1))(x, y)
    np.testing.assert_array_equal(got[0], np.zeros(3))
    assert math.isclose(got[1], 2 * (3 * 3.0 * y) * (3 * 3.0), rel_tol=1e-12)


def test_a_jvp_lowered_in_place_refuses_what_the_api_refuses() -> None:
    """The code a ``jvp`` in a body is lowered to was made for floats and arrays of floats; its
    arguments are checked first (``check_jvp_layout``): a tangent of another shape than its
    argument is refused, as ``ast_ad.jvp`` refuses it (the function run again by Python raises the
    API's error at the user's line), where the code would have broadcast it into a number; a list,
    which the code was not made for, is refused with what to write instead."""
    import traceback

    from tests import compose_nested as nested

    x, y = np.array([0.3, -0.5, 0.9]), 1.5
    with pytest.raises(ast_ad.errors.ASTADError, match="shape"):
        ast_ad.jvp(nested.scaled_potential, (x, y), (np.ones(2), None))
    for mode in (lambda: ast_ad.grad(nested.squared_slope_along_too_few)(x, y),
                 lambda: ast_ad.jvp(nested.squared_slope_along_too_few, (x, y), (x, 0.0))):
        # the user's line: in the message, or (reverse mode runs the function again in Python where
        # its code fails, and Python raises the API's error at that line) in the traceback
        with pytest.raises(ast_ad.errors.ASTADError, match="has shape") as refused:
            mode()
        frames = traceback.extract_tb(refused.value.__traceback__)
        assert "compose_nested.py:" in str(refused.value) or any(
            frame.filename.endswith("compose_nested.py") for frame in frames)
    xs = [0.3, -0.5, 0.9]
    with pytest.raises(ast_ad.errors.ASTADError, match="hold the tangents in a name") as refused:
        ast_ad.grad(nested.slope_of_a_list, 1)(xs, y)
    assert "compose_nested.py:" in str(refused.value)
    # written so, the general path takes it
    slope = ast_ad.grad(nested.slope_of_a_list_by_name, 1)(xs, y)
    assert math.isclose(slope, nested.SCALE * float(np.sum(np.cos(xs))), rel_tol=1e-12)


@pytest.mark.parametrize("name", ["squared_slope", "force_norm_inline"])
def test_a_gradient_over_a_jvp_in_its_body_exports_as_code_alone(tmp_path, name) -> None:
    """With the jvp (or the gradient) lowered in place, the gradient of a function that takes a
    jvp (a gradient) in its body is code alone: exported, it runs in a process without ast_ad (an
    import of it fails there) and gives the function's value and the gradient ast_ad gives, to the
    bit."""
    import subprocess
    import sys

    from tests import compose_nested as nested

    fn = getattr(nested, name)
    x, y = np.array([0.3, -0.5, 0.9]), 1.5
    gradient = ast_ad.grad(fn, (0, 1))
    path = tmp_path / f"{name}_gradient.py"
    ast_ad.export(gradient, str(path), x, y)
    script = (
        "import sys, runpy, numpy as np\n"
        "sys.modules['ast_ad'] = None  # (no ast_ad: importing it raises)\n"
        f"g = runpy.run_path({str(path)!r})['{name}_vjp']\n"
        "out, (gx, gy) = g(np.array([0.3, -0.5, 0.9]), 1.5)\n"
        "print(repr(float(out)), repr(float(gy)), *map(repr, gx.tolist()))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    expected = ast_ad.value_and_grad(fn, (0, 1))(x, y)
    got = [float(v) for v in done.stdout.split()]
    assert got[0] == expected[0] and got[1] == expected[1][1]
    assert got[2:] == expected[1][0].tolist()
    if name == "squared_slope":
        assert got[0] == fn(x, y)  # (Python's value: the jvp's code is the API's, to the bit)


def test_a_gradient_written_in_a_body_is_its_reverse_code_lowered_in_place(monkeypatch) -> None:
    """``ast_ad.grad(f, argnums)(x, y)`` called where it is written: ``f``'s gradient code, made for
    any floats and arrays, is lowered where the call is (``Nesting.gradient_inlined``), so the
    outer derivative differentiates it (forward over reverse: one pass): no derivative object is
    called. Its value is Python's (which calls the API's ``grad``), its gradient that of the
    gradient held in a name (the primitive ``Gradient``) and of finite differences, forward mode
    over it agrees by the dot-product identity, and what it returns is what ``grad`` returns: a
    float for a float, an array of its own that a write changes alone."""
    from tests import compose_nested as nested

    x, y = np.array([0.3, -0.5, 0.9]), 1.5
    for fn in (nested.force_norm_inline, nested.both_gradients, nested.step,
               nested.bowl_slope_norm_inlined, nested.written_into, nested.gradient_of_a_float):
        args = (x[:2], np.array([1.1, 0.4])) if fn is nested.bowl_slope_norm_inlined else \
            (x,) if fn is nested.step else (x, y)
        argnums = tuple(range(len(args)))
        value, grads = ast_ad.value_and_grad(fn, argnums)(*args)
        assert value == fn(*args), fn.__name__
        assert_fd(fn, args, argnums, grads)
        text = ast_ad.source(ast_ad.grad(fn, argnums), *args)
        assert "check_gradient_layout" in text and "grad_potential(" not in text, fn.__name__
        tangents = tuple(np.linspace(0.5, 1.5, np.size(a)).reshape(np.shape(a))
                         if isinstance(a, np.ndarray) else 0.75 for a in args)
        _, along = ast_ad.jvp(fn, args, tangents)
        assert math.isclose(along, sum(float(np.sum(g * t)) for g, t in
                                       zip(grads, tangents, strict=True)), rel_tol=1e-12)
    # against the gradient held in a name (the primitive), the same numbers
    by_object = ast_ad.grad(nested.force_norm, (0, 1))(x, y)
    inlined = ast_ad.grad(nested.force_norm_inline, (0, 1))(x, y)
    np.testing.assert_allclose(inlined[0], by_object[0], rtol=1e-13)
    assert math.isclose(inlined[1], by_object[1], rel_tol=1e-13)
    # the global the inner function reads is watched: bound again, the next gradient follows it
    for scale in (2.0, 3.0):
        monkeypatch.setattr(nested, "SCALE", scale)
        got = ast_ad.grad(nested.squared_gradient_scaled, (0, 1))(x, y)
        np.testing.assert_allclose(got[0], scale ** 2 * y ** 2 * 2 * np.cos(x) * -np.sin(x),
                                   rtol=1e-12)
        assert math.isclose(got[1], 2 * scale ** 2 * y * float(np.sum(np.cos(x) ** 2)),
                            rel_tol=1e-12)
    # ... and so is the function itself, defined again
    monkeypatch.setattr(nested, "scaled_potential", nested.linear_potential)
    got = ast_ad.grad(nested.squared_gradient_scaled, (0, 1))(x, y)
    expected = ast_ad.grad(lambda a, b: np.sum(ast_ad.grad(nested.linear_potential)(a, b) ** 2),
                           (0, 1))(x, y)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-12)


def test_a_gradient_lowered_in_place_refuses_what_the_api_refuses() -> None:
    """The code a ``grad`` in a body is lowered to was made for floats and arrays of floats, and
    for a function whose value is a number: a list or an integer argument, and a function whose
    value is an array, are refused at the user's line, with what to write instead (an array's
    gradient would otherwise be its entries' gradients summed)."""
    from tests import compose_nested as nested

    with pytest.raises(ast_ad.errors.ASTADError, match="hold the gradient in a name") as refused:
        ast_ad.grad(nested.gradient_of_a_list, 1)([0.3, -0.5, 0.9], 1.5)
    assert "compose_nested.py:" in str(refused.value)
    with pytest.raises(ast_ad.errors.ASTADError, match="not an int") as refused:
        ast_ad.grad(nested.gradient_of_an_integer, 1)(2, 1.5)
    assert "compose_nested.py:" in str(refused.value)
    with pytest.raises(ast_ad.errors.NonScalarOutputError, match="scalar|real number") as refused:
        ast_ad.grad(nested.gradient_of_a_vector_function)(np.array([0.3, 0.5]))
    assert "compose_nested.py:" in str(refused.value)


_INLINED_DIRECTORY = None


def _with_outer(program, returned: str):
    """The random program ``f`` and a function ``outer`` of its parameters, in its module, that
    returns ``returned`` (a derivative of ``f`` written in a body)."""
    import tempfile

    from hypothesis import note

    global _INLINED_DIRECTORY  # noqa: PLW0603 (one directory for the run's programs)
    if _INLINED_DIRECTORY is None:
        _INLINED_DIRECTORY = tempfile.mkdtemp(prefix="ast_ad_inlined_")
    params = ", ".join(f"x{k}" for k in range(program.arity))
    source = program.source + (
        "\n\nimport ast_ad\n\n\n"
        f"def outer({params}):\n"
        f"    return {returned}\n"
    )
    note(source)
    f = type(program)(source, program.arity, program.arrays, program.smooth).load(
        _INLINED_DIRECTORY)
    return f, f.__globals__["outer"]


@half()
@given(programs(arrays=True, mutation=True), st.data())
def test_a_random_programs_jvp_lowered_in_place(program, data) -> None:
    """A random program ``f`` (mutation, containers and branches included) whose ``jvp`` along
    ``x0`` is written in a body, ``outer``: lowered in place, its value is Python's (``outer`` run
    by Python calls the API's ``jvp``), to the bit where ``f`` takes floats and arrays of floats,
    and its gradient is the Hessian-vector product that ``jvp`` over ``grad(f)`` gives, within the
    rounding of sums taken in another order; forward mode over it agrees with that gradient by the
    dot-product identity. Where the code it was made for does not take the arguments (a list), the
    refusal says what to write."""
    params = ", ".join(f"x{k}" for k in range(program.arity))
    nones = " None," * (program.arity - 1)
    f, outer = _with_outer(
        program, f"ast_ad.jvp(f, ({params},), (np.ones_like(x0),{nones}))[1]")
    args = program.arguments(data)
    if "jvp_f" in ast_ad.source(ast_ad.grad(outer), *copy.deepcopy(args)):
        return  # (f's forward-mode code is more than one function: the primitive, tested above)
    _against_jvp_of_grad(f, outer, args, np.ones_like(args[0]), "hold the tangents in a name",
                         exact=True)



# (a quarter of the profile's examples: each takes three derivatives of a nested program)
@settings(max_examples=max(6, settings.default.max_examples // 4))
@given(programs(arrays=True, mutation=True), st.data())
def test_a_random_programs_gradient_lowered_in_place(program, data) -> None:
    """A random program ``f`` (mutation, containers and branches included) whose gradient in
    ``x0`` is written in a body, ``outer``, which weighs its entries: lowered in place, its value is
    Python's (``outer`` run by Python calls the API's ``grad``) within rounding (the code lowered in
    place is the gradient made for any shapes, the API's the one made for the call's shapes, and
    the two may sum in another order: one ulp, seen), and its gradient is the Hessian-vector
    product that ``jvp`` over ``grad(f)`` gives, within the rounding of sums taken in another
    order; forward mode over it agrees with that gradient by the dot-product identity. Where the
    code it was made for does not take the arguments, the refusal says what to write."""
    params = ", ".join(f"x{k}" for k in range(program.arity))
    f, outer = _with_outer(program, f"np.sum(ast_ad.grad(f)({params}) * 0.75)")
    args = program.arguments(data)
    direction = np.full_like(args[0], 0.75) if isinstance(args[0], np.ndarray) else 0.75
    _against_jvp_of_grad(f, outer, args, direction, "hold the gradient in a name", exact=False)


def _against_jvp_of_grad(f, outer, args, direction, refusal: str, exact: bool) -> None:
    """``outer``, a derivative of the random program ``f`` written in a body: its value is
    Python's (to the bit where ``exact``, else within rounding), its gradient in ``x0`` the
    Hessian-vector product ``jvp`` over ``grad(f)`` gives along ``direction``, and forward mode over
    it agrees with that gradient by the dot-product identity; a refusal that says ``refusal`` is
    met only where ``x0`` is not a float or an array of floats."""
    try:
        with np.errstate(all="raise", under="ignore"):
            python = outer(*copy.deepcopy(args))
            value, grads = ast_ad.value_and_grad(outer)(*copy.deepcopy(args))
            expected = ast_ad.jvp(ast_ad.grad(f), copy.deepcopy(args),
                                  (direction, *[None] * (len(args) - 1)))[1]
    except ast_ad.errors.ASTADError as refused:
        if refusal in str(refused):
            assert not (type(args[0]) is float or type(args[0]) is np.ndarray
                        and args[0].dtype.kind == "f")
        return
    except (ValueError, TypeError, FloatingPointError, ZeroDivisionError, OverflowError):
        return  # (a value Python cannot compute here: no number to compare)
    if "grad_f(" in ast_ad.source(ast_ad.grad(outer), *copy.deepcopy(args)):
        return  # (f's gradient code is more than one function: the primitive, tested above)
    if exact:
        assert np.array_equal(value, python, equal_nan=True)
    else:
        np.testing.assert_allclose(value, python, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(grads, expected, rtol=1e-9, atol=1e-12)
    u = np.linspace(0.5, 1.5, np.size(args[0])).reshape(np.shape(args[0]))
    u = float(u) if np.ndim(args[0]) == 0 else u
    _, along = ast_ad.jvp(outer, tuple(copy.deepcopy(args)),
                          (u, *[None] * (len(args) - 1)))
    assert math.isclose(float(along), float(np.sum(np.asarray(grads) * u)), rel_tol=1e-9,
                        abs_tol=1e-9)


def test_vjp_takes_a_number_for_an_array_output_as_that_number_at_every_entry() -> None:
    """``vjp_fn(c)`` of a vector function is ``vjp_fn(np.full(shape, c))``, leaf by leaf in a tuple
    of outputs: the backward pass is made for cotangents of the output's shapes, so a number is
    spread first (a gradient lowered in a body reads its adjoint's entries, which a number has
    not). Against the array cotangent, and that against forward mode."""
    from tests import compose_nested as nested

    p, q = np.array([0.5, 0.3]), np.array([0.2, 0.7])
    out, vjp_fn = ast_ad.vjp(nested.separable_slope, p, q)
    spread = vjp_fn(np.full(out.shape, 1.5))
    for got, want in zip(vjp_fn(1.5), spread, strict=True):
        np.testing.assert_array_equal(got, want)
    _, along = ast_ad.jvp(nested.separable_slope, (p, q), (np.zeros(2), np.array([1.0, -2.0])))
    assert np.isclose(float(np.sum(along * 1.5)), float(spread[1] @ np.array([1.0, -2.0])))

    def pair(x):
        return x * 2.0, np.sum(x)
    x = np.array([1.0, 2.0, 3.0])
    _, pair_vjp = ast_ad.vjp(pair, x)
    np.testing.assert_array_equal(pair_vjp((1.0, 1.0))[0], pair_vjp((np.ones(3), 1.0))[0])


def test_a_second_derivative_through_a_write_into_a_dict_steps_through_its_keys() -> None:
    """Reverse over reverse, and forward over reverse, of a function that writes an array through
    a dict: the backward pass's ``replaced_vjp_container`` loops over the dict, and was made for
    a tuple or a list, reading it by position (a KeyError from the generated code, on main before;
    found by the random programs on a fresh seed). Both agree, and agree with finite differences
    of the gradient."""
    from tests import compose_nested as nested

    x0, x1 = np.array([0.3, -0.2, 0.5]), np.array([0.1, 0.4, -0.6])
    twice = ast_ad.grad(nested.slope_through_a_dict, (0, 1))(x0, x1)
    _, along = ast_ad.jvp(ast_ad.grad(nested.written_through_a_dict, (0, 1)), (x0, x1),
                          (nested.SPREAD, np.zeros(3)))
    np.testing.assert_allclose(twice[0], along[0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(twice[1], along[1], rtol=1e-10, atol=1e-12)
    assert_fd(nested.slope_through_a_dict, (x0, x1), (0, 1), twice)
