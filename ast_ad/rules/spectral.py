"""Rules of complex numbers and of ``np.fft``.

The convention is autograd's and JAX's (``ast_ad/runtime/spectral.py``): the adjoint of ``z = x +
iy`` is ``dL/dx - i dL/dy``. A holomorphic function's rules are then its real ones, written as they
are; the functions below say so (``def_complex``) or give the rules that take their place where an
argument may be complex (those of ``abs``, ``conj``, ``imag``, ``angle``: not holomorphic). A
function with neither is refused where an argument may be complex, at the user's line.
"""

import builtins
import cmath
import math
import operator
from typing import Any

import numpy as np

from ast_ad import runtime as rt
from ast_ad.core.registry import (
    def_complex,
    def_linear,
    def_makes_complex,
    def_method,
    def_nondiff,
    def_real_result,
    def_view,
    def_view_inverse,
    defjvp,
    defvjp,
    lookup,
    zero,
)
from ast_ad.core.registry import defvjp_elementwise as ew
from ast_ad.runtime import spectral as sp  # (its np.fft helpers)

_fn: Any  # each loop below binds a function

# ---- making complex values ---------------------------------------------------------------------
defvjp(complex, lambda g, ans, real, imag=0.0: g, lambda g, ans, real, imag=0.0: 1j * g)
defjvp(complex, lambda u, ans, real, imag=0.0: u, lambda u, ans, real, imag=0.0: 1j * u)
defvjp(np.complex128, lambda g, ans, x: g)
def_linear(np.complex128, 0)
def_makes_complex(complex, np.complex128, np.complex64)
def_complex(complex)
def_complex(np.complex128)
def_view(np.complex128)  # of a complex128 array, the array itself: a write through it is refused

# ---- the parts of a complex value ----------------------------------------------------------------
# real: its real rule (g) holds, g being real
def_complex(np.real)
# a write through ``np.real(z)`` or ``np.imag(z)`` reaches ``z``: these give ``z`` after it, its
# other parts as they were (``aliasing`` asks ``registry.view_inverse``). ``unreal(z, v)``: the real
# parts ``v`` (real: its adjoint the real part of ``g``), the imaginary parts ``z``'s (``dL/dy`` of
# ``z`` is the result's: ``i Im g``); ``unimag(z, v)``: the real parts ``z``'s (``Re g``), the
# imaginary ones ``v`` (``-Im g``, the real part of ``i g``)
def_view_inverse(np.real, rt.unreal, takes_base=True)
def_view_inverse(np.imag, rt.unimag, takes_base=True)
defvjp(rt.unreal, zero, lambda g, ans, base, view: g)
defjvp(rt.unreal, zero, lambda u, ans, base, view: u)
def_complex(rt.unreal, lambda g, ans, base, view: 1j * np.imag(g),
            lambda g, ans, base, view: g,
            jvps=(lambda u, ans, base, view: 1j * np.imag(u), lambda u, ans, base, view: u))
# (``unimag`` of a real array raises, as numpy's write does: its rules are a complex array's, which
# hold where ast_ad cannot tell whether the array is complex)
defvjp(rt.unimag, lambda g, ans, base, view: np.real(g), lambda g, ans, base, view: 1j * g)
defjvp(rt.unimag, lambda u, ans, base, view: np.real(u) + 0j, lambda u, ans, base, view: 1j * u)
def_complex(rt.unimag, lambda g, ans, base, view: np.real(g), lambda g, ans, base, view: 1j * g,
            jvps=(lambda u, ans, base, view: np.real(u) + 0j, lambda u, ans, base, view: 1j * u))
# imag: flat for a real number; -i g for a complex one (dL/dx - i dL/dy, with dL/dy = g)
ew(np.imag, lambda g, ans, x: 0.0 * g)
def_linear(np.imag, 0)
def_complex(np.imag, lambda g, ans, x: -1j * g, jvps=(lambda u, ans, x: np.imag(u),))
ew(np.conj, lambda g, ans, x: g)
def_linear(np.conj, 0)
def_complex(np.conj, lambda g, ans, x: np.conj(g), jvps=(lambda u, ans, x: np.conj(u),))
def_method("conj", np.conj)
def_method("conjugate", np.conj)
# the direction z / |z|: 0 at 0, the direction of the infinite parts at infinity; flat for a real
# number (its sign), turning for a complex one
# (w = unit(z) turns by i w Im(conj(w) dz) / |z|; its adjoint is -i conj(w) Re(i w g) / |z|)
ew(rt.unit,
   lambda g, ans, z: -1j * np.conj(ans) * np.real(1j * ans * g) * rt.inverse_or_zero(np.abs(z)))
defjvp(rt.unit,
       lambda u, ans, z: 1j * ans * np.imag(np.conj(ans) * u) * rt.inverse_or_zero(np.abs(z)))
def_complex(rt.unit)
# 1 / z, 0 at 0 and at infinity
ew(rt.inverse_or_zero, lambda g, ans, z: -g * ans * ans)
def_complex(rt.inverse_or_zero)
# abs: g conj(z) / |z|, 0 at 0 (the least subgradient, as the real rule's sign(0)), and along the
# infinite parts at infinity
for _fn in (np.abs, builtins.abs, operator.abs):
    def_complex(
        _fn,
        lambda g, ans, x: rt.abs_vjp(g, x, ans),
        jvps=(lambda u, ans, x: np.real(np.conj(rt.unit(x)) * u),),
    )
# g conj(x) / size, each argument moving alone (the size is abs(x) where abs's rule calls it)
defvjp(
    rt.abs_vjp,
    lambda h, ans, g, x, size: h * np.conj(rt.unit(x)),
    lambda h, ans, g, x, size: np.conj(h * g) * rt.inverse_or_zero(size),
    lambda h, ans, g, x, size: -h * ans * rt.inverse_or_zero(size),
)
defjvp(
    rt.abs_vjp,
    None,
    lambda u, ans, g, x, size: g * np.conj(u) * rt.inverse_or_zero(size),
    lambda u, ans, g, x, size: -ans * u * rt.inverse_or_zero(size),
)
def_linear(rt.abs_vjp, 0)
def_complex(rt.abs_vjp)
# angle: 0 or pi for a real number, flat; -i g / z for a complex one (0 at 0, where it jumps)
ew(np.angle, lambda g, ans, z, deg=False: 0.0 * g)
def_complex(
    np.angle,
    lambda g, ans, z, deg=False: -1j * g * rt.inverse_or_zero(z) * (180.0 / np.pi if deg else 1.0),
    jvps=(
        lambda u, ans, z, deg=False: np.imag(u * rt.inverse_or_zero(z))
        * (180.0 / np.pi if deg else 1.0),
    ),
)
# slogdet: the sign turns with the imaginary part of trace(a^-1 da), the log of the size moves
# with its real part
def_complex(
    np.linalg.slogdet,
    lambda g, ans, a: np.expand_dims(
        rt.part(g, 1) - 1j * np.real(1j * rt.part(g, 0) * ans[0]), (-2, -1)
    ) * rt.T(np.linalg.inv(a)),
    jvps=(
        lambda u, ans, a: (
            1j * ans[0] * np.imag(np.trace(np.linalg.solve(a, u), axis1=-2, axis2=-1)),
            np.real(np.trace(np.linalg.solve(a, u), axis1=-2, axis2=-1)),
        ),
    ),
)
def_complex(np.sign, None)  # z / |z| for complex z: refused, rather than taken as flat
def_real_result(np.real, np.imag, np.abs, builtins.abs, operator.abs, np.angle, math.fabs)
def_complex(
    np.vdot,
    lambda g, ans, a, b: np.conj(g * np.reshape(b, np.shape(a))),
    lambda g, ans, a, b: g * np.reshape(np.conj(a), np.shape(b)),
    jvps=(lambda u, ans, a, b: np.vdot(u, b), lambda u, ans, a, b: np.vdot(a, u)),
)

# ---- cmath: the holomorphic functions, with the rules of numpy's --------------------------------
ew(cmath.exp,   lambda g, ans, x: g * ans)
ew(cmath.log,   lambda g, ans, x: g / x)
ew(cmath.log10, lambda g, ans, x: g / (x * math.log(10.0)))
ew(cmath.sqrt,  lambda g, ans, x: g * 0.5 / ans)
ew(cmath.sin,   lambda g, ans, x: g * cmath.cos(x))
ew(cmath.cos,   lambda g, ans, x: -g * cmath.sin(x))
ew(cmath.tan,   lambda g, ans, x: g / cmath.cos(x) ** 2)
ew(cmath.sinh,  lambda g, ans, x: g * cmath.cosh(x))
ew(cmath.cosh,  lambda g, ans, x: g * cmath.sinh(x))
ew(cmath.tanh,  lambda g, ans, x: g * (1.0 - ans * ans))
ew(cmath.asin,  lambda g, ans, x: g / cmath.sqrt(1.0 - x * x))
ew(cmath.acos,  lambda g, ans, x: -g / cmath.sqrt(1.0 - x * x))
ew(cmath.atan,  lambda g, ans, x: g / (1.0 + x * x))
ew(cmath.asinh, lambda g, ans, x: g / cmath.sqrt(x * x + 1.0))
ew(cmath.acosh, lambda g, ans, x: g / (cmath.sqrt(x - 1.0) * cmath.sqrt(x + 1.0)))
ew(cmath.atanh, lambda g, ans, x: g / (1.0 - x * x))
ew(cmath.rect,  lambda g, ans, r, phi: g * cmath.exp(1j * phi), lambda g, ans, r, phi: g * 1j * ans)
_CMATH = (cmath.exp, cmath.log, cmath.log10, cmath.sqrt, cmath.sin, cmath.cos, cmath.tan,
          cmath.sinh, cmath.cosh, cmath.tanh, cmath.asin, cmath.acos, cmath.atan, cmath.asinh,
          cmath.acosh, cmath.atanh, cmath.rect)
def_makes_complex(*_CMATH)
for _fn in _CMATH:
    def_complex(_fn)
ew(cmath.phase, lambda g, ans, z: 0.0 * g)
def_complex(
    cmath.phase,
    lambda g, ans, z: -1j * g * rt.inverse_or_zero(z),
    jvps=(lambda u, ans, z: np.imag(u * rt.inverse_or_zero(z)),),
)
def_real_result(cmath.phase)
def_nondiff(cmath.isfinite, cmath.isinf, cmath.isnan, cmath.isclose)

# ---- holomorphic and linear functions whose real rules hold as written ---------------------------
# (transposes, never conjugates; products and quotients by the other operand as it is)
for _fn in (
    operator.add, operator.sub, operator.mul, operator.truediv, operator.neg, operator.pos,
    operator.pow, operator.matmul, operator.getitem, builtins.pow, builtins.sum,
    np.add, np.subtract, np.multiply, np.divide, np.negative, np.positive, np.reciprocal,
    np.power, np.square, np.sqrt, np.exp, np.expm1, np.log, np.log2, np.log10, np.log1p,
    np.sin, np.cos, np.tan, np.arcsin, np.arccos, np.arctan, np.sinh, np.cosh, np.tanh,
    np.arcsinh, np.arccosh, np.arctanh,
    np.sum, np.mean, np.cumsum, np.dot, np.matmul, np.inner, np.outer, np.tensordot, np.einsum,
    np.kron, np.trace, np.diag, np.diagonal, np.transpose, np.reshape, np.ravel, np.squeeze,
    np.expand_dims, np.swapaxes, np.moveaxis, np.broadcast_to, np.atleast_1d, np.atleast_2d,
    np.atleast_3d, np.concatenate, np.stack, np.hstack, np.vstack, np.column_stack, np.flip,
    np.fliplr, np.flipud, np.roll, np.tile, np.repeat, np.take, np.copy, np.asarray, np.array,
    np.where, np.diff, np.rot90, np.tril, np.triu, np.linalg.inv, np.linalg.det,
    np.linalg.solve, np.zeros_like, np.ones_like,
    rt.T, rt.assign_item, rt.add_at, rt.astype, rt.astype_view, rt.array_view, rt.copy_of,
    rt.view_of, rt.list_item, rt.replaced, rt.field, rt.concat, rt.repeat_seq, rt.detached,
    rt.augmented, rt.augmented_value, rt.unreshaped, rt.unrotated, rt.untransposed, rt.part,
    rt.unbroadcast, rt.unbroadcast_to,
    rt.getitem_vjp, rt.assign_item_vjp_x, rt.assign_item_vjp_value, rt.cast_vjp, rt.unstack,
    rt.matmul_vjp_a, rt.matmul_vjp_b, rt.dot_vjp_a, rt.dot_vjp_b, rt.outer_vjp_a,
    rt.outer_vjp_b, rt.expand_reduced, rt.concatenate_vjp, rt.add_adjoints,
    # ast_ad's helpers that move adjoints about: linear in them, the rest read for shapes
    rt.column_stack_vjp, rt.concat_vjp_a, rt.concat_vjp_b, rt.cumsum_vjp, rt.diag_vjp,
    rt.diagonal_vjp, rt.diff_vjp, rt.dstack_vjp, rt.field_vjp, rt.hstack_vjp, rt.vstack_vjp,
    rt.list_item_vjp, rt.pad_vjp, rt.repeat_seq_vjp, rt.repeat_vjp, rt.roll_vjp, rt.rollaxis_vjp,
    rt.split_vjp, rt.take_vjp, rt.tile_vjp, rt.fit, rt.part_vjp, rt.fit_adjoint, rt.dense_adjoint,
    rt.owned_adjoint, rt.filled, rt.spread, rt.summed_to, rt.unpopped,
):
    if lookup(_fn) is not None:
        def_complex(_fn)

# a real argument's share of a complex adjoint: its real part (what it reads of ``x`` is its dtype)
defvjp(rt.real_like, lambda g, ans, d, x: rt.real_like(g, x), zero)
def_linear(rt.real_like, 0)
defjvp(rt.real_like, None, zero)
def_complex(rt.real_like)

# ---- np.fft ------------------------------------------------------------------------------------
_fft = np.fft
defvjp(_fft.fft, lambda g, ans, a, n=None, axis=-1, norm=None:
       sp.fft_vjp(g, np.shape(a), n, axis, norm, False))
defvjp(_fft.ifft, lambda g, ans, a, n=None, axis=-1, norm=None:
       sp.fft_vjp(g, np.shape(a), n, axis, norm, True))
defvjp(_fft.fftn, lambda g, ans, a, s=None, axes=None, norm=None:
       sp.fftn_vjp(g, np.shape(a), s, axes, norm, False))
defvjp(_fft.ifftn, lambda g, ans, a, s=None, axes=None, norm=None:
       sp.fftn_vjp(g, np.shape(a), s, axes, norm, True))
defvjp(_fft.fft2, lambda g, ans, a, s=None, axes=(-2, -1), norm=None:
       sp.fftn_vjp(g, np.shape(a), s, axes, norm, False))
defvjp(_fft.ifft2, lambda g, ans, a, s=None, axes=(-2, -1), norm=None:
       sp.fftn_vjp(g, np.shape(a), s, axes, norm, True))
defvjp(_fft.rfft, lambda g, ans, a, n=None, axis=-1, norm=None:
       sp.rfft_vjp(g, np.shape(a), n, axis, norm))
defvjp(_fft.irfft, lambda g, ans, a, n=None, axis=-1, norm=None:
       sp.irfft_vjp(g, np.shape(a), n, axis, norm))
defvjp(_fft.rfftn, lambda g, ans, a, s=None, axes=None, norm=None:
       sp.rfftn_vjp(g, np.shape(a), s, axes, norm))
defvjp(_fft.irfftn, lambda g, ans, a, s=None, axes=None, norm=None:
       sp.irfftn_vjp(g, np.shape(a), s, axes, norm))
defvjp(_fft.rfft2, lambda g, ans, a, s=None, axes=(-2, -1), norm=None:
       sp.rfftn_vjp(g, np.shape(a), s, axes, norm))
defvjp(_fft.irfft2, lambda g, ans, a, s=None, axes=(-2, -1), norm=None:
       sp.irfftn_vjp(g, np.shape(a), s, axes, norm))
defvjp(_fft.hfft, lambda g, ans, a, n=None, axis=-1, norm=None:
       sp.hfft_vjp(g, np.shape(a), n, axis, norm))
defvjp(_fft.ihfft, lambda g, ans, a, n=None, axis=-1, norm=None:
       sp.ihfft_vjp(g, np.shape(a), n, axis, norm))
defvjp(_fft.fftshift, lambda g, ans, x, axes=None: _fft.ifftshift(g, axes))
defvjp(_fft.ifftshift, lambda g, ans, x, axes=None: _fft.fftshift(g, axes))
_TRANSFORMS = (_fft.fft, _fft.ifft, _fft.fftn, _fft.ifftn, _fft.fft2, _fft.ifft2, _fft.rfft,
               _fft.irfft, _fft.rfftn, _fft.irfftn, _fft.rfft2, _fft.irfft2, _fft.hfft,
               _fft.ihfft, _fft.fftshift, _fft.ifftshift)
for _fn in _TRANSFORMS:
    def_linear(_fn, 0)  # each is its own forward rule (real-linear where not complex-linear)
    def_complex(_fn)
def_makes_complex(_fft.fft, _fft.ifft, _fft.fftn, _fft.ifftn, _fft.fft2, _fft.ifft2, _fft.rfft,
                  _fft.rfftn, _fft.rfft2, _fft.ihfft)
def_real_result(_fft.irfft, _fft.irfftn, _fft.irfft2, _fft.hfft, _fft.fftfreq, _fft.rfftfreq)
def_nondiff(_fft.fftfreq, _fft.rfftfreq)

# the transforms' adjoints: linear in the adjoint, the rest read for lengths and axes; the adjoint
# of each is the transform itself (the transpose of a transpose)
_F = np.fft
defvjp(sp.fft_vjp, lambda g, ans, d, shape, n, axis, norm, inverse:
       sp.fft_of(g, n, axis, norm, inverse))
defvjp(sp.fftn_vjp, lambda g, ans, d, shape, s, axes, norm, inverse:
       sp.fftn_of(g, s, axes, norm, inverse))
defvjp(sp.fft_of, lambda g, ans, a, n, axis, norm, inverse:
       sp.fft_vjp(g, np.shape(a), n, axis, norm, inverse))
defvjp(sp.fftn_of, lambda g, ans, a, s, axes, norm, inverse:
       sp.fftn_vjp(g, np.shape(a), s, axes, norm, inverse))
defvjp(sp.rfft_vjp, lambda g, ans, d, shape, n, axis, norm: _F.rfft(g, n, axis, norm))
defvjp(sp.rfftn_vjp, lambda g, ans, d, shape, s, axes, norm: _F.rfftn(g, s, axes, norm))
defvjp(sp.irfft_vjp, lambda g, ans, d, shape, n, axis, norm: _F.irfft(g, n, axis, norm))
defvjp(sp.irfftn_vjp, lambda g, ans, d, shape, s, axes, norm: _F.irfftn(g, s, axes, norm))
defvjp(sp.hfft_vjp, lambda g, ans, d, shape, n, axis, norm: _F.hfft(g, n, axis, norm))
defvjp(sp.ihfft_vjp, lambda g, ans, d, shape, n, axis, norm: _F.ihfft(g, n, axis, norm))
for _fn in (sp.fft_vjp, sp.fftn_vjp, sp.rfft_vjp, sp.rfftn_vjp, sp.irfft_vjp, sp.irfftn_vjp,
            sp.hfft_vjp, sp.ihfft_vjp, sp.fft_of, sp.fftn_of):
    def_linear(_fn, 0)
    defjvp(_fn, None, *[zero] * 5)
    def_complex(_fn)
