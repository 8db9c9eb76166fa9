"""Complex numbers and ``np.fft``: every rule that takes complex arguments against finite
differences in both real directions of each complex input, forward against reverse by the
dot-product identity, the worked examples of docs/complex.md, autograd and JAX where they apply, and
what is refused.

The convention is autograd's and JAX's: the gradient of a real ``f`` at ``z = x + iy`` is
``df/dx - i df/dy``; the pairing of an adjoint ``g`` with a change ``dz`` is ``Re(sum(g * dz))``.
"""

from __future__ import annotations

import cmath
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ast_ad
from ast_ad import errors, runtime
from ast_ad.core import registry
from ast_ad.runtime import unbroadcast
from ast_ad.testing import tracer
from tests import complex_functions as cf
from tests.oracles import assert_fd
from tests.rule_cases import CASES, complex_arrays, complex_numbers
from tests.strategies import arrays
from tests.test_rules import canonical, paired, pairing, projection_error, random_like

# what the rules of complex arguments are checked with: each function's real case, its float
# arguments moved off the real line, or a case of its own below
COMPLEX_CASES = {
    np.imag: st.tuples(st.tuples(complex_arrays((3,))), st.just({})),
    # a written ``z.real`` or ``z.imag`` put back into a complex ``z``: the part written is real
    runtime.unreal: st.tuples(st.tuples(complex_arrays((3,)), arrays((3,))), st.just({})),
    runtime.unimag: st.tuples(st.tuples(complex_arrays((3,)), arrays((3,))), st.just({})),
    np.conj: st.tuples(st.tuples(complex_arrays((2, 3))), st.just({})),
    np.angle: st.tuples(st.tuples(complex_arrays((3,), "away")), st.just({}))
    | st.tuples(st.tuples(complex_arrays((2,), "away")), st.just({"deg": True})),
    cmath.phase: st.tuples(st.tuples(complex_numbers("away")), st.just({})),
    np.abs: st.tuples(st.tuples(complex_arrays((2, 2), "away")), st.just({})),
    abs: st.tuples(st.tuples(complex_numbers("away")), st.just({})),
}
COMPLEX_CASES[np.linalg.slogdet] = st.tuples(
    st.tuples(complex_arrays((3, 3)).map(lambda m: m + 3.0 * np.eye(3))), st.just({})
)
COMPLEX_CASES[runtime.abs_vjp] = st.tuples(
    complex_arrays((3,)), complex_arrays((3,), "away")
).map(lambda p: ((p[0], p[1], np.abs(p[1])), {}))
COMPLEX_CASES[np.absolute] = COMPLEX_CASES[np.abs]
COMPLEX_CASES[__import__("operator").abs] = COMPLEX_CASES[abs]
# their arguments are real by definition: the cases stay as they are
REAL_ARGUMENTS = {complex, np.complex128, cmath.rect, np.fft.rfft, np.fft.rfftn, np.fft.rfft2,
                  np.fft.ihfft, runtime.spectral.rfft_vjp, runtime.spectral.irfft_vjp,
                  runtime.spectral.irfftn_vjp, runtime.spectral.hfft_vjp, runtime.real_like}
COMPLEX_RULES = sorted(
    (fn for fn in registry.fact_table("complex") if registry.complex_rule(fn) is not None
     and not registry.complex_rule(fn).nondiff
     and any(v is not None for v in registry.complex_rule(fn).vjps)),
    key=lambda fn: f"{getattr(fn, '__module__', '')}.{getattr(fn, '__name__', fn)}",
)


def _name(fn) -> str:
    return f"{getattr(fn, '__module__', '') or ''}.{getattr(fn, '__name__', fn)}"


def complexified(value, rng):
    """``value`` with each float array or float moved off the real line by a random imaginary
    part (lists and tuples item by item); integers, shapes and strings stay."""
    if isinstance(value, list):
        return [complexified(v, rng) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(complexified(v, rng) for v in value)
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return value + 0.3j * rng.standard_normal(value.shape)
    if isinstance(value, float):
        return complex(value, 0.3 * rng.standard_normal())
    return value


def complex_case(fn, data: st.DataObject):
    if fn in COMPLEX_CASES:
        return data.draw(COMPLEX_CASES[fn])
    args, kwargs = data.draw(CASES[fn])
    if fn in REAL_ARGUMENTS:
        return args, kwargs
    rng = np.random.default_rng(len(args))
    return complexified(args, rng), kwargs


def moves(arg) -> bool:
    return isinstance(arg, (float, complex)) or (
        isinstance(arg, np.ndarray) and arg.dtype.kind in "fc"
    )


def test_every_complex_rule_has_a_case() -> None:
    missing = [_name(fn) for fn in COMPLEX_RULES if fn not in CASES and fn not in COMPLEX_CASES]
    assert not missing, f"rules for complex arguments with no case: {missing}"


# (a cast of a complex argument to floats drops its imaginary part, as numpy warns)
@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
@pytest.mark.parametrize("fn", COMPLEX_RULES, ids=_name)
@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_complex_rule_matches_finite_differences_both_ways(fn, data: st.DataObject) -> None:
    """Each rule for complex arguments, along the real and the imaginary direction of each complex
    argument (the real direction alone for a real one): ``Re <vjp(u), v>`` against the derivative
    of ``Re <u, f(x + t v)>``."""
    rule = registry.complex_rule(fn)
    args, kwargs = complex_case(fn, data)
    for k, arg in enumerate(args):
        if not moves(arg) or rule.vjp(k) in (None, registry.zero):
            continue
        for imaginary in (False, True) if np.iscomplexobj(arg) else (False,):
            analytic, numeric = projection_error(rule, args, kwargs, k, seed=k, imaginary=imaginary)
            assert math.isclose(analytic, numeric, rel_tol=1e-5, abs_tol=1e-6), (
                k, imaginary, analytic, numeric)


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
@pytest.mark.parametrize("fn", COMPLEX_RULES, ids=_name)
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_complex_forward_rule_is_the_reverse_rule_transposed(fn, data: st.DataObject) -> None:
    """``Re <u, jvp(v)>`` against finite differences along a complex ``v``, and against
    ``Re <vjp(u), v>`` (the dot-product identity with complex tangents)."""
    rule = registry.complex_rule(fn)
    args, kwargs = complex_case(fn, data)
    ans = rule.fn(*args, **kwargs)
    for k, arg in enumerate(args):
        if not moves(arg) or rule.jvp(k) is None or rule.jvp(k) is registry.zero:
            continue
        rng = np.random.default_rng(k)
        v = (rng.standard_normal(np.shape(arg)) + 1j * rng.standard_normal(np.shape(arg))
             if np.iscomplexobj(arg) else rng.standard_normal(np.shape(arg)))
        v = v if np.ndim(arg) else complex(v) if np.iscomplexobj(arg) else float(v)
        u = random_like(ans, rng)
        dot = tracer.tangent(rule, k, v, ans, args, kwargs)
        if isinstance(ans, np.ndarray) and not np.iscomplexobj(ans):
            assert not np.iscomplexobj(dot), "a real result's tangent is real"

        def along(t: float, k: int = k, v=v, u=u) -> float:
            shifted = list(args)
            shifted[k] = args[k] + t * v
            return pairing(u, canonical(rule.fn, rule.fn(*shifted, **kwargs), ans))
        numeric = (along(1e-6) - along(-1e-6)) / 2e-6
        analytic = paired(u, dot)
        assert math.isclose(analytic, numeric, rel_tol=1e-5, abs_tol=1e-6), (k, analytic, numeric)
        vjp = rule.vjp(k)
        if vjp is not None and vjp is not registry.zero:
            bar = runtime.real_like(unbroadcast(vjp(u, ans, *args, **kwargs), arg), arg)
            assert math.isclose(paired(bar, v), analytic, rel_tol=1e-6, abs_tol=1e-8)


# ---- the worked examples (docs/complex.md) -------------------------------------------------------
def power(x):
    return np.sum(np.abs(np.fft.fft(x)) ** 2)


def half_power(x):
    return np.sum(np.abs(np.fft.rfft(x)) ** 2)


def low_pass(x, h):
    return np.sum(np.fft.irfft(np.fft.rfft(x) * h, n=len(x)) ** 2)


def plane_wave(a, k):
    grid = np.linspace(0.0, 1.0, 5)
    return np.abs(np.sum(a * np.exp(1j * k * grid))) ** 2


def spectral_dx(u):
    n = u.shape[0]
    k = np.fft.fftfreq(n, 1.0 / n)
    return np.real(np.fft.ifft2(1j * k[:, None] * np.fft.fft2(u)))


def spectral_energy(u):
    return np.sum(spectral_dx(u) ** 2)


def squared_size(z):
    return np.abs(z) ** 2


def test_parseval_the_gradient_of_the_power_spectrum() -> None:
    """sum |fft(x)|^2 = n sum x^2 (Parseval), so its gradient is 2 n x."""
    x = np.random.default_rng(0).standard_normal(8)
    value, grad = ast_ad.value_and_grad(power)(x)
    assert value == pytest.approx(len(x) * np.sum(x * x))
    assert grad == pytest.approx(2 * len(x) * x)


@pytest.mark.parametrize("n", [7, 8])
def test_the_power_of_half_a_spectrum_odd_and_even(n) -> None:
    x = np.random.default_rng(n).standard_normal(n)
    assert_fd(half_power, (x,), (0,), (ast_ad.grad(half_power)(x),))


def test_a_low_pass_filter_in_the_signal_and_the_filter() -> None:
    rng = np.random.default_rng(1)
    x, h = rng.standard_normal(9), rng.uniform(0.0, 1.0, 5)
    grads = ast_ad.grad(low_pass, (0, 1))(x, h)
    assert_fd(low_pass, (x, h), (0, 1), grads)


def test_a_plane_wave_in_its_amplitudes_and_wave_number() -> None:
    rng = np.random.default_rng(2)
    a, k = rng.standard_normal(5), 2.3
    grads = ast_ad.grad(plane_wave, (0, 1))(a, k)
    assert_fd(plane_wave, (a, k), (0, 1), grads)


def test_a_spectral_derivative_on_a_periodic_grid() -> None:
    """The spectral derivative of sin(x) cos(y) is cos(x) cos(y), to rounding; the gradient of its
    energy agrees with finite differences."""
    n = 8
    x = np.arange(n) * 2 * np.pi / n
    u = np.sin(x)[:, None] * np.cos(x)[None, :]
    assert spectral_dx(u) == pytest.approx(np.cos(x)[:, None] * np.cos(x)[None, :], abs=1e-12)
    v = np.random.default_rng(3).standard_normal((n, n))
    assert_fd(spectral_energy, (v,), (0,), (ast_ad.grad(spectral_energy)(v),))


def test_the_gradient_of_a_squared_size_is_twice_the_conjugate() -> None:
    """f(z) = |z|^2 = x^2 + y^2: df/dx - i df/dy = 2x - 2iy = 2 conj(z), a number and an array."""
    z = 1.5 - 0.5j
    assert ast_ad.grad(squared_size)(z) == pytest.approx(2 * np.conj(z))
    zs = np.array([1.0 + 2.0j, -0.5 + 0.25j])
    assert ast_ad.grad(lambda z: np.sum(squared_size(z)))(zs) == pytest.approx(2 * np.conj(zs))


def test_jvp_is_complex_linear_in_the_tangent() -> None:
    """The tangent of |z|^2 along v is 2 Re(conj(z) v), and jvp of a complex result is linear over
    the complex numbers."""
    z, v = np.array([1.0 + 2.0j, -0.5 + 1.0j]), np.array([1j, 1.0])
    _, dot = ast_ad.jvp(lambda z: np.sum(squared_size(z)), (z,), (v,))
    assert dot == pytest.approx(2 * np.sum(np.real(np.conj(z) * v)))
    _, spectrum = ast_ad.jvp(lambda z: np.fft.fft(z), (z,), (v * (2 - 1j),))
    assert spectrum == pytest.approx(np.fft.fft(v) * (2 - 1j))


def test_a_hessian_through_complex_insides() -> None:
    """Forward over reverse through the FFT, abs and the conjugate: against differences of the
    gradient."""
    x = np.random.default_rng(4).standard_normal(5)
    hessian = ast_ad.hessian(half_power)(x)
    grad = ast_ad.grad(half_power)
    step = 1e-5
    columns = [(grad(x + step * e) - grad(x - step * e)) / (2 * step) for e in np.eye(5)]
    assert hessian == pytest.approx(np.array(columns).T, rel=1e-6, abs=1e-6)


def test_vjp_takes_and_gives_complex_cotangents() -> None:
    """vjp of a complex-valued function: the cotangent's pairing with J v is the real part of
    <J^T g, v>."""
    rng = np.random.default_rng(5)
    z = rng.standard_normal(6) + 1j * rng.standard_normal(6)
    g = rng.standard_normal(6) + 1j * rng.standard_normal(6)
    v = rng.standard_normal(6) + 1j * rng.standard_normal(6)
    out, back = ast_ad.vjp(lambda z: np.fft.fft(np.conj(z) * z[::-1]), z)
    (z_bar,) = back(g)
    _, dot = ast_ad.jvp(lambda z: np.fft.fft(np.conj(z) * z[::-1]), (z,), (v,))
    assert np.real(np.sum(z_bar * v)) == pytest.approx(np.real(np.sum(g * dot)))


# ---- the tracer, autograd and JAX as oracles -----------------------------------------------------
EXAMPLES = [(power, (np.linspace(-1.0, 2.0, 6),)), (half_power, (np.linspace(-1.0, 2.0, 6),)),
            (low_pass, (np.linspace(-1.0, 2.0, 6), np.array([1.0, 0.5, 0.25, 0.1])))]


@pytest.mark.parametrize("fn, args", EXAMPLES, ids=lambda v: getattr(v, "__name__", ""))
def test_the_tracer_agrees(fn, args) -> None:
    argnums = tuple(range(len(args)))
    grads = ast_ad.grad(fn, argnums)(*args)
    traced = tracer.grad(fn, argnums)(*args)
    for a, b in zip(grads, traced, strict=True):
        assert a == pytest.approx(b, rel=1e-12, abs=1e-12)


def test_autograd_agrees_where_it_differentiates() -> None:
    import autograd
    import autograd.numpy as anp

    x = np.linspace(-1.0, 2.0, 6)
    z = x + 1j * x[::-1]
    pairs = [
        (power, lambda x: anp.sum(anp.abs(anp.fft.fft(x)) ** 2), x),
        (half_power, lambda x: anp.sum(anp.abs(anp.fft.rfft(x)) ** 2), x),
        (lambda z: np.sum(np.abs(np.exp(1j * z) + np.conj(z) * 2.0) ** 2),
         lambda z: anp.sum(anp.abs(anp.exp(1j * z) + anp.conj(z) * 2.0) ** 2), z),
        (lambda z: np.sum(np.angle(z) * np.imag(z) + np.real(z) ** 3),
         lambda z: anp.sum(anp.angle(z) * anp.imag(z) + anp.real(z) ** 3), z),
    ]
    for mine, theirs, at in pairs:
        assert ast_ad.grad(mine)(at) == pytest.approx(autograd.grad(theirs)(at), rel=1e-10)


@pytest.mark.long  # (JAX's tracing: a step of CI's own, ``-m long``)
def test_jax_agrees() -> None:
    """Against jax.grad in 64-bit floats, where JAX is installed (the test extra installs it)."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    x = np.linspace(-1.0, 2.0, 7)
    z = x + 1j * x[::-1]
    h = np.array([1.0, 0.5, 0.25, 0.1])
    pairs = [
        (power, lambda x: jnp.sum(jnp.abs(jnp.fft.fft(x)) ** 2), (x,)),
        (half_power, lambda x: jnp.sum(jnp.abs(jnp.fft.rfft(x)) ** 2), (x,)),
        (lambda x: low_pass(x, h),
         lambda x: jnp.sum(jnp.fft.irfft(jnp.fft.rfft(x) * h, n=len(x)) ** 2), (x,)),
        (lambda z: np.sum(np.abs(np.fft.ifft(z, norm="ortho") * np.conj(z)) ** 2),
         lambda z: jnp.sum(jnp.abs(jnp.fft.ifft(z, norm="ortho") * jnp.conj(z)) ** 2), (z,)),
        (lambda z: np.sum(np.fft.hfft(z, n=9) ** 2),
         lambda z: jnp.sum(jnp.fft.hfft(z, n=9) ** 2), (z,)),
        (lambda x: np.sum(np.abs(np.fft.fftn(np.reshape(x, (7, 1)), s=(9, 2), axes=(0, 1))) ** 3),
         lambda x: jnp.sum(jnp.abs(jnp.fft.fftn(jnp.reshape(x, (7, 1)), s=(9, 2), axes=(0, 1)))
                           ** 3), (x,)),
    ]
    for mine, theirs, at in pairs:
        expected = np.asarray(jax.grad(theirs)(*at))  # the same convention: df/dx - i df/dy
        assert ast_ad.grad(mine)(*at) == pytest.approx(expected, rel=1e-9, abs=1e-9)


# ---- what is refused ---------------------------------------------------------------------------
def sign_of_complex(z):
    return np.sum(np.real(np.sign(z)))


def larger_of_complex(z):
    return np.sum(np.real(np.maximum(z, 0.5j)))


def emath_root(x):
    return np.sum(np.real(np.emath.sqrt(x)))


def complex_out(z):
    return np.sum(z * z)


@pytest.mark.parametrize("fn, match", [
    (sign_of_complex, "np.sign of a complex argument 1 has no derivative"),
    (larger_of_complex, "np.maximum has no rule for complex arguments"),
])
def test_a_function_without_complex_rules_is_refused_at_its_line(fn, match) -> None:
    z = np.array([1.0 + 1.0j, -2.0 + 0.5j])
    with pytest.raises(errors.MissingRuleError, match=match) as info:
        ast_ad.grad(fn)(z)
    assert f"{__file__}:" in str(info.value)


def test_emath_is_refused() -> None:
    with pytest.raises(errors.UnsupportedSyntaxError, match="emath"):
        ast_ad.grad(emath_root)(np.array([1.0, -1.0]))


def test_grad_of_a_complex_result_says_what_to_return() -> None:
    with pytest.raises(errors.NonScalarOutputError, match="returned a complex one"):
        ast_ad.grad(complex_out)(np.array([1.0 + 1.0j]))


def test_complex_values_inside_a_container_argument_are_refused() -> None:
    with pytest.raises(errors.NonDifferentiableArgumentError, match="holding complex values"):
        ast_ad.grad(lambda zs: np.sum(np.abs(zs[0])))([np.array([1j])])


def test_a_complex_tangent_of_a_real_argument_is_refused() -> None:
    with pytest.raises(errors.ASTADError, match="tangent of argument 0 is complex"):
        ast_ad.jvp(half_power, (np.ones(4),), (np.ones(4) * 1j,))


def test_abs_and_angle_at_zero_and_abs_at_infinity() -> None:
    """At 0, |z| and angle(z) take the gradient 0 (the least subgradient, as the real abs's
    sign(0)); at an infinite z, |z| moves along the infinite parts' direction."""
    zs = np.array([0j, complex(np.inf, 0.0), complex(-np.inf, np.inf)])
    grad = ast_ad.grad(lambda z: np.sum(np.abs(z)))(zs)
    assert grad[0] == 0
    assert grad[1] == pytest.approx(1.0)
    assert grad[2] == pytest.approx(np.conj(complex(-1.0, 1.0)) / np.sqrt(2.0))
    assert ast_ad.grad(lambda z: np.sum(np.angle(z)))(np.array([0j])) == pytest.approx([0.0])


def test_sqrt_on_the_branch_cut_follows_numpy() -> None:
    """numpy's sqrt takes the upper side of its cut (the negative real axis): sqrt(-4 + 0j) = 2j,
    and the derivative is that of the branch numpy computes, 1 / (2 sqrt(z)) = -0.25j."""
    grad = ast_ad.grad(lambda z: np.real(np.sqrt(z) * 1j))(-4.0 + 0.0j)
    assert grad == pytest.approx(np.conj(1j / (2 * np.sqrt(-4.0 + 0.0j))))


# ---- the fact the analysis gives ---------------------------------------------------------------
def test_real_code_takes_no_complex_step() -> None:
    """A function without complex values is transformed as before: no real parts taken."""
    text = ast_ad.source(ast_ad.grad(lambda x: np.sum(np.sin(x) * x)))
    assert "real_like" not in text


def test_a_real_argument_takes_the_real_part_of_a_complex_contribution() -> None:
    text = ast_ad.source(ast_ad.grad(half_power))
    assert "real_like(" in text and "rfft_vjp(" in text


def test_dask_arrays_stay_lazy_through_the_fft() -> None:
    """dask.array's fft runs lazily along an axis of one chunk: the gradient is a dask array with
    numpy's values; along an axis of several chunks dask itself refuses, as it does for the
    function."""
    da = pytest.importorskip("dask.array")
    x = np.linspace(-1.0, 2.0, 8)
    grad = ast_ad.grad(power)(da.from_array(x, chunks=8))
    assert isinstance(grad, da.Array)
    assert np.allclose(grad.compute(), 2 * len(x) * x)
    with pytest.raises(ValueError, match="single chunk"):
        power(da.from_array(x, chunks=4)).compute()
    with pytest.raises(ValueError, match="single chunk"):
        ast_ad.grad(power)(da.from_array(x, chunks=4))


# ---- holomorphic=True ----------------------------------------------------------------------------
def cubic_and_exp(z):
    return z**3 + np.exp(z)


def sine_sum(z):
    return np.sum(np.sin(z) * z)


def spectrum_entry(z):
    return np.fft.fft(np.array([z, 2 * z, z * z]))[1]


def conjugate_product(z):
    return np.conj(z) * z


def test_holomorphic_derivatives_are_the_complex_derivative() -> None:
    z = 0.5 + 1.0j
    assert ast_ad.grad(cubic_and_exp, holomorphic=True)(z) == pytest.approx(3 * z**2 + np.exp(z))
    zs = np.array([0.5 + 1.0j, -1.0 + 0.2j])
    assert ast_ad.grad(sine_sum, holomorphic=True)(zs) == pytest.approx(
        np.sin(zs) + zs * np.cos(zs)
    )
    w = np.exp(-2j * np.pi / 3)
    assert ast_ad.grad(spectrum_entry, holomorphic=True)(z) == pytest.approx(
        1 + 2 * w + 2 * z * w**2
    )
    # jvp along 1 is the same derivative
    _, dot = ast_ad.jvp(cubic_and_exp, (z,), (1.0 + 0j,))
    assert dot == pytest.approx(3 * z**2 + np.exp(z))


def test_holomorphic_refuses_a_function_that_is_not() -> None:
    """|z|^2 = conj(z) z has no complex derivative away from 0: refused, not given a number."""
    with pytest.raises(errors.ASTADError, match="not holomorphic in argument 0"):
        ast_ad.grad(conjugate_product, holomorphic=True)(0.5 + 1.0j)
    with pytest.raises(errors.ASTADError, match="returns a complex number"):
        ast_ad.grad(squared_size, holomorphic=True)(0.5 + 1.0j)


def log_size_and_turn(a):
    sign, log_size = np.linalg.slogdet(a * (1.0 + 0.5j) + np.eye(2))
    return log_size + np.imag(sign) * 0.7


def test_slogdet_of_a_complex_matrix_and_its_hessian() -> None:
    """The sign turns and the log of the size moves: the gradient against finite differences, and
    the Hessian (a helper's function derived on its own, told its argument is complex) against
    differences of the gradient."""
    a = np.array([[1.0, 0.2], [0.1, 1.3]])
    grad = ast_ad.grad(log_size_and_turn)
    assert_fd(log_size_and_turn, (a,), (0,), (grad(a),))
    hessian = ast_ad.hessian(log_size_and_turn)(a)
    step = 1e-5
    for i, j in np.ndindex(2, 2):
        e = np.zeros((2, 2))
        e[i, j] = step
        column = (grad(a + e) - grad(a - e)) / (2 * step)
        assert hessian[:, :, i, j] == pytest.approx(column, rel=1e-6, abs=1e-7)


def test_an_exported_gradient_through_the_fft_runs_without_ast_ad(tmp_path) -> None:
    """The helpers of complex numbers and of np.fft are copied into the module with what they call
    (the norms' scales, the half spectrum's weights)."""
    import json
    import subprocess
    import sys

    x, h = np.linspace(0.0, 1.0, 8), np.full(5, 0.5)
    gradient = ast_ad.value_and_grad(low_pass, (0, 1))
    value, (x_bar, h_bar) = gradient(x, h)
    ast_ad.export(gradient, str(tmp_path / "spectral_export.py"), x, h)
    script = (
        "import sys, json; sys.modules['ast_ad'] = None\nimport numpy as np\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\nimport spectral_export as m\n"
        "out, (x_bar, h_bar) = m.low_pass_vjp(np.linspace(0.0, 1.0, 8), np.full(5, 0.5))\n"
        "print(json.dumps([float(out), x_bar.tolist(), h_bar.tolist()]))\n"
    )
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    out, exported_x_bar, exported_h_bar = json.loads(done.stdout)
    assert out == value
    assert np.array_equal(exported_x_bar, x_bar) and np.array_equal(exported_h_bar, h_bar)


def cubed_spectrum(x):
    return np.sum(np.abs(np.fft.fft(x * x)) ** 3)


def hessian_along(x):
    return ast_ad.hessian(cubed_spectrum)(x) @ np.array([1.0, 0.5, -0.2, 0.3])


def test_a_third_derivative_through_the_fft_and_abs() -> None:
    """Forward mode over a Hessian through the transform and the size of complex numbers: every
    helper the generated code calls has rules of its own, written in the language."""
    x, v = np.array([0.3, -0.7, 1.1, 0.4]), np.array([1.0, 0.5, -0.2, 0.3])
    _, third = ast_ad.jvp(hessian_along, (x,), (v,))
    step = 1e-5
    numeric = (hessian_along(x + step * v) - hessian_along(x - step * v)) / (2 * step)
    assert third == pytest.approx(numeric, rel=1e-6)


# ---- JAX, function by function -------------------------------------------------------------------
Z = np.array([0.7 + 0.2j, -0.4 + 0.9j, 1.1 - 0.5j, 0.3 + 0.3j, -0.8 - 0.6j, 0.5 + 1.2j])
R = np.array([0.7, -0.4, 1.1, 0.3, -0.8, 0.5, 0.9, -0.2])
MAT = np.array([[1.5 + 0.2j, 0.3 - 0.1j, 0.0], [0.2j, 1.2, 0.4 + 0.3j], [0.1, -0.3j, 0.9 + 0.1j]])


def of_fft(z):
    return np.sum(np.abs(np.fft.fft(z, n=8, norm="ortho")) ** 2)


def of_ifft(z):
    return np.sum(np.real(np.fft.ifft(z, n=4) * np.conj(z[:4])))


def of_rfft2(r):
    return np.sum(np.abs(np.fft.rfft2(np.reshape(r, (2, 4)), norm="forward")) ** 3)


def of_irfft2(z):
    return np.sum(np.fft.irfft2(np.reshape(z, (2, 3)), s=(2, 5), axes=(0, 1)) ** 2)


def of_rfftn(r):
    return np.sum(np.abs(np.fft.rfftn(np.reshape(r, (2, 2, 2)))) ** 2)


def of_irfftn(z):
    return np.sum(np.fft.irfftn(np.reshape(z, (3, 2)), s=(3, 3), axes=(0, 1)) ** 2)


def of_fft2(z):
    return np.sum(np.abs(np.fft.ifft2(np.reshape(z, (2, 3)))) ** 2)


def of_hfft(z):
    return np.sum(np.fft.hfft(z, n=7, norm="ortho") ** 2)


def of_ihfft(r):
    return np.sum(np.abs(np.fft.ihfft(r, n=7)) ** 2)


def of_shift(z):
    return np.sum(np.abs(np.fft.fftshift(z) - np.fft.ifftshift(z) * 0.5j) ** 2)


def of_parts(z):
    return np.sum(np.real(z) ** 2 * np.imag(z) + np.angle(z) + np.abs(np.conj(z) - 1.0))


def of_elementary(z):
    return np.sum(np.abs(np.exp(z) + np.log(z + 2.0) * np.sqrt(z + 3.0) - np.sin(z) * np.cosh(z)))


def of_power(z):
    return np.sum(np.abs(z ** 3 + (z + 2.0) ** 0.5 / (z + 1.5)))


def of_products(z):
    m = np.reshape(z, (2, 3))
    return np.abs(np.vdot(z, z[::-1])) + np.sum(np.abs(m @ m.T)) + np.sum(
        np.abs(np.einsum("ij,kj->ik", m, m))
    )


def of_linalg(a):
    sign, log_size = np.linalg.slogdet(a)
    return (np.abs(np.linalg.det(a)) + np.sum(np.abs(np.linalg.inv(a)))
            + np.sum(np.abs(np.linalg.solve(a, a[:, 0]))) + log_size + np.imag(sign))


JAX_CASES = [(of_fft, Z), (of_ifft, Z), (of_rfft2, R), (of_irfft2, Z), (of_rfftn, R),
             (of_irfftn, Z), (of_fft2, Z), (of_hfft, Z[:4]), (of_ihfft, R), (of_shift, Z),
             (of_parts, Z), (of_elementary, Z), (of_power, Z), (of_products, Z), (of_linalg, MAT)]


@pytest.mark.long  # (JAX's tracing: a step of CI's own, ``-m long``)
@pytest.mark.parametrize("fn, at", JAX_CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_jax_agrees_function_by_function(fn, at) -> None:
    """Each family of complex rules against jax.grad of the same source, run with jax.numpy in
    numpy's place (64-bit floats), where JAX is installed."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import types

    theirs = types.FunctionType(fn.__code__, dict(fn.__globals__, np=jax.numpy), fn.__name__)
    expected = np.asarray(jax.grad(theirs)(at))
    assert ast_ad.grad(fn)(at) == pytest.approx(expected, rel=1e-9, abs=1e-10)


# ---- complex code as users write it --------------------------------------------------------------
_RNG = np.random.default_rng(7)
USER_CASES = [
    (cf.amplitude, (np.array([0.3, 0.7]), np.array([0.6 + 0.2j, 0.1 - 0.7j]))),
    (cf.charfun, (1.3, _RNG.standard_normal(6))),
    (cf.conv, (_RNG.standard_normal(7), _RNG.standard_normal(7))),
    (cf.complex_loop, (_RNG.standard_normal(5),)),
    (cf.branchy, (np.array([0.9, 0.8]),)),
    (cf.branchy, (np.array([0.3, 0.2]),)),
    (cf.list_of_complex, (_RNG.standard_normal(3),)),
    (cf.solve_complex, (_RNG.standard_normal(3),)),
    (cf.inplace_complex, (_RNG.standard_normal(4),)),
    (cf.complex_scalar_in, (0.4 + 0.3j, np.array([0.5, -0.2]))),
    (cf.appended_mixed, (np.array([0.5, -0.7]),)),
    (cf.written_into_complex, (np.array([0.5, -0.7]),)),
]


def _moved(args, k, step):
    moved = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    moved[k] = moved[k] + step
    return moved


@pytest.mark.parametrize("fn, args", USER_CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_complex_code_as_users_write_it(fn, args) -> None:
    """Python's value; each argument's gradient against finite differences along its real and
    (for a complex one) imaginary directions; forward mode against reverse by the dot-product
    identity with complex tangents."""
    argnums = tuple(range(len(args)))
    value, grads = ast_ad.value_and_grad(fn, argnums)(*_moved(args, 0, 0.0))
    assert value == fn(*_moved(args, 0, 0.0))
    h = 1e-6
    for k, (arg, grad) in enumerate(zip(args, grads, strict=True)):
        for index in np.ndindex(np.shape(arg)):
            for direction in (1.0, 1j) if np.iscomplexobj(arg) else (1.0,):
                step = np.zeros(np.shape(arg), dtype=type(direction))
                step[index] = h * direction
                step = step if np.ndim(arg) else step[()]
                slope = (fn(*_moved(args, k, step)) - fn(*_moved(args, k, -step))) / (2 * h)
                expected = slope if direction == 1.0 else -slope  # df/dx - i df/dy
                entry = np.asarray(grad)[index]
                got = np.real(entry) if direction == 1.0 else np.imag(entry)
                assert got == pytest.approx(expected, rel=1e-6, abs=1e-7), (k, index, direction)
    rng = np.random.default_rng(1)
    tangents = tuple(
        rng.standard_normal(np.shape(a)) + (1j * rng.standard_normal(np.shape(a))
                                            if np.iscomplexobj(a) else 0.0)
        for a in args
    )
    tangents = tuple(t if np.ndim(t) else t[()] for t in tangents)
    _, dot = ast_ad.jvp(fn, tuple(_moved(args, 0, 0.0)), tangents)
    paired = sum(np.real(np.sum(np.asarray(g) * t)) for g, t in zip(grads, tangents, strict=True))
    assert dot == pytest.approx(paired, rel=1e-9, abs=1e-12)
