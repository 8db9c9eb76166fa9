"""Helpers of complex numbers and of ``np.fft``'s rules.

The convention is autograd's and JAX's: the adjoint of a complex value ``z = x + iy`` is
``dL/dx - i dL/dy``. A complex-linear map ``w = M z`` then has the adjoint ``M^T w_bar``
(transposed, not conjugated), and a real argument's adjoint is the real part of what its rule
gives (``real_like``).

Every transform of ``np.fft`` is a chain of one-axis steps, each a crop or zero-pad to ``n``
followed by a discrete Fourier transform, whose matrix is symmetric; so the adjoint of a step is the
same transform of the adjoint, cropped or padded back (``fit_length``). ``irfft`` reads only half of
a Hermitian spectrum: its adjoint weighs the entries that stand for two (``irfft_vjp``).

The pairing of an adjoint with a change is ``Re(sum(g * dz))``; an adjoint rule is the transpose
for it:

>>> g, x = np.array([1.0, 0.5j, -1.0]), np.array([1.0, 2.0, 0.5, -1.0])
>>> left = np.real(np.sum(g * np.fft.rfft(x)))
>>> bool(np.isclose(left, np.sum(rfft_vjp(g, x.shape, None, -1, None) * x)))
True
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ast_ad.errors import UnsupportedDerivativeError
from ast_ad.runtime.arrays import is_array


def real_like(d: Any, x: Any) -> Any:
    """The adjoint contribution ``d`` of the argument ``x``: its real part where ``x`` is real, as
    it is where ``x`` is complex (or not a number: a container's adjoint passes through)."""
    if isinstance(x, (complex, np.complexfloating)):
        return d
    dtype = getattr(x, "dtype", None)  # an array of any library: its dtype says
    if dtype is not None and not isinstance(dtype, type):
        return d if dtype.kind == "c" else np.real(d)
    if isinstance(x, (int, float, bool)):
        return d.real if isinstance(d, (complex, np.complexfloating)) else np.real(d)
    return d


def unit(z: Any) -> Any:
    """``z / |z|``, the direction of ``z``, with 0 at 0 (where every unit direction is a
    subgradient of ``|z|``, 0 is the one of least norm: the real rule's ``sign(0)``), and the
    direction of an infinite entry's infinite parts at infinity. Another library's array (dask's)
    stays its own and lazy: nothing here reads its values."""
    own = not is_array(z) or isinstance(z, np.ndarray)
    if own:
        z = np.asarray(z)
    size = np.abs(z)
    with np.errstate(divide="ignore", invalid="ignore"):  # (0 and infinity: put right below)
        out = z / size
    special = (size == 0) | np.isinf(size)
    if own and not special.any():
        return out if out.ndim else out[()]
    if not np.iscomplexobj(z):
        out = np.where(special, np.sign(z), out)  # a real number's sign: 0 at 0
    else:
        re, im = np.real(z), np.imag(z)
        direction = np.where(np.isinf(re), np.sign(re), 0.0) + 1j * np.where(
            np.isinf(im), np.sign(im), 0.0
        )
        length = np.abs(direction)
        direction = direction / np.where(length == 0, 1.0, length)
        out = np.where(special, direction, out)  # (0 at 0: no infinite part there)
    return out if not own or out.ndim else out[()]


def abs_vjp(g: Any, x: Any, size: Any) -> Any:
    """Adjoint of ``x`` in ``size = abs(x)``: ``g * conj(x) / size``, with ``unit``'s direction
    where ``size`` is 0 or infinite; two new arrays where ``g * conj(unit(x))`` makes four."""
    if type(x) is not np.ndarray or x.ndim == 0 or type(size) is not np.ndarray:
        return abs_vjp_general(g, x, size)
    out = np.conjugate(x)
    with np.errstate(divide="ignore", invalid="ignore"):  # (0 and infinity: put right below)
        scale = g / size
        if scale.shape == out.shape and np.can_cast(scale.dtype, out.dtype, "same_kind"):
            out *= scale  # (in place: the conjugate is a new array of its own)
        else:
            out = out * scale
    special = (size == 0) | np.isinf(size)
    if special.any():
        out = np.where(special, g * np.conj(unit(x)), out)
    return out


def abs_vjp_general(g: Any, x: Any, size: Any) -> Any:
    """``abs_vjp`` for numbers and other libraries' arrays, by the same formula (theirs kept lazy:
    the special entries are chosen by ``np.where``, not found by reading values)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        regular = g * np.conj(x) / size
    special = (size == 0) | np.isinf(size)
    if (not is_array(special) or isinstance(special, np.ndarray)) and not np.any(special):
        return regular
    return np.where(special, g * np.conj(unit(x)), regular)


def inverse_or_zero(z: Any) -> Any:
    """``1 / z``, and 0 where ``z`` is 0 or infinite (the slope of an angle, taken as zero where the
    angle jumps)."""
    own = not is_array(z) or isinstance(z, np.ndarray)  # (another library's array stays its own)
    if own:
        z = np.asarray(z)
    keep = (z != 0) & np.isfinite(z)
    out = np.where(keep, 1.0 / np.where(keep, z, 1.0), 0.0)
    return out if not own or out.ndim else out[()]


def swapped_norm(norm: Any) -> Any:
    """The norm of the transform the other way (``hfft`` is ``irfft`` with it): ``"backward"``
    (numpy's default, ``None``) and ``"forward"`` trade places; ``"ortho"`` stays."""
    return {"forward": "backward", "ortho": "ortho"}.get(norm, "forward")


def fit_length(a: Any, length: int, axis: int) -> Any:
    """``a`` cropped or zero-padded along ``axis`` to ``length`` entries (what an FFT does to its
    input for ``n=``: its own adjoint, the other way)."""
    have = a.shape[axis]
    if have == length:
        return a
    if have > length:
        index = [slice(None)] * a.ndim
        index[axis] = slice(0, length)
        return a[tuple(index)]
    widths = [(0, 0)] * a.ndim
    widths[axis] = (0, length - have)
    return np.pad(a, widths)


def fft_plan(shape: tuple[int, ...], s: Any, axes: Any, last_half: bool = False) -> tuple[
    list[int], list[int]
]:
    """The axes and lengths of an n-dimensional transform, as numpy reads ``s`` and ``axes``
    (``last_half``: an inverse real transform, whose last length defaults to ``2 (m - 1)``)."""
    ndim = len(shape)
    if axes is None:
        axes = list(range(ndim)) if s is None else list(range(ndim - len(s), ndim))
    axes = [int(a) % ndim for a in axes] if ndim else list(axes)
    if s is None:
        lengths = [shape[a] for a in axes]
        if last_half and lengths:
            lengths[-1] = 2 * (lengths[-1] - 1)
    else:
        lengths = list(s)
    if len(lengths) != len(axes):
        raise UnsupportedDerivativeError("the fft's s= and axes= differ in length")
    return axes, [
        int(n) if n is not None and n != -1 else shape[a]
        for n, a in zip(lengths, axes, strict=True)
    ]


def fft_steps(
    shape: tuple[int, ...], axes: list[int], s: list[int], first_axis_first: bool = False
) -> list[tuple[int, int, int]]:
    """The one-axis steps of numpy's n-dimensional complex transform, in the order it applies them
    (the last axis first; ``irfftn``'s inverse steps: the first): (axis, length before, length
    after)."""
    lengths = list(shape)
    out = []
    order = range(len(axes)) if first_axis_first else reversed(range(len(axes)))
    for k in order:
        axis = axes[k]
        out.append((axis, lengths[axis], s[k]))
        lengths[axis] = s[k]
    return out


def fft_of(a: Any, n: Any, axis: int, norm: Any, inverse: bool) -> Any:
    """``np.fft.fft(a, n, axis, norm)``, or ``ifft`` where ``inverse``: the adjoint of ``fft_vjp``
    (the transpose of a transpose)."""
    return (np.fft.ifft if inverse else np.fft.fft)(a, n, axis, norm)


def fftn_of(a: Any, s: Any, axes: Any, norm: Any, inverse: bool) -> Any:
    """``np.fft.fftn(a, s, axes, norm)``, or ``ifftn`` where ``inverse`` (``fftn_vjp``'s
    adjoint)."""
    return (np.fft.ifftn if inverse else np.fft.fftn)(a, s, axes, norm)


def fft_vjp(g: Any, shape: tuple[int, ...], n: Any, axis: int, norm: Any, inverse: bool) -> Any:
    """Adjoint of ``a`` in ``np.fft.fft(a, n, axis, norm)`` (``ifft``: ``inverse``) of an argument
    of ``shape``: the same transform of ``g``, fitted back to the argument's length."""
    transform = np.fft.ifft if inverse else np.fft.fft
    return fit_length(transform(g, axis=axis, norm=norm), shape[axis], axis)


def fftn_vjp(g: Any, shape: tuple[int, ...], s: Any, axes: Any, norm: Any, inverse: bool) -> Any:
    """Adjoint of ``a`` in ``np.fft.fftn(a, s, axes, norm)`` (``fft2``; ``ifftn`` and ``ifft2``:
    ``inverse``): each one-axis step's adjoint, the last applied first."""
    transform = np.fft.ifft if inverse else np.fft.fft
    axes, s = fft_plan(shape, s, axes)
    for axis, before, _after in reversed(fft_steps(shape, axes, s)):
        g = fit_length(transform(g, axis=axis, norm=norm), before, axis)
    return g


# the scale of each norm's forward transform
def norm_scale(norm: Any, length: int) -> float:
    """The scale of ``norm``'s forward transform of ``length`` entries."""
    if norm == "forward":
        return 1.0 / length
    return 1.0 / math.sqrt(length) if norm == "ortho" else 1.0


def hermitian_weights(length: int, axis: int, ndim: int) -> Any:
    """The weights of ``irfft``'s half spectrum along ``axis``: 2 for an entry that stands for
    itself and its conjugate, 1 for the first and (``length`` even) the last."""
    half = length // 2 + 1
    weights = np.full(half, 2.0)
    weights[0] = 1.0
    if length % 2 == 0:
        weights[-1] = 1.0
    return weights.reshape([half if k == axis else 1 for k in range(ndim)])


def rfft_vjp(g: Any, shape: tuple[int, ...], n: Any, axis: int, norm: Any) -> Any:
    """Adjoint of the real ``a`` in ``np.fft.rfft(a, n, axis, norm)``: the real part of the full
    transform of ``g`` padded with zeros to ``n`` (the rows ``rfft`` keeps), fitted back.

    That real part, ``Re(sum_k g_k e^(-2 pi i j k / n))``, is one ``irfft`` (half the work of the
    full transform): of ``conj(g)`` with the entries that ``irfft`` counts twice halved.
    """
    axis = axis % len(shape)
    length = shape[axis] if n is None else int(n)
    half = length // 2 + 1
    if np.shape(g)[axis] != half:  # (not a spectrum rfft gave: the general way)
        full = np.fft.fft(g, n=length, axis=axis, norm=norm)
        return np.real(fit_length(full, shape[axis], axis))
    halved = np.conj(g) * 0.5
    ends = [slice(None)] * halved.ndim
    ends[axis] = slice(0, half, max(half - 1, 1)) if length % 2 == 0 else slice(0, 1)
    halved[tuple(ends)] *= 2.0  # the first entry and (length even) the last stand for themselves
    out = np.fft.irfft(halved, n=length, axis=axis, norm="forward")
    scale = norm_scale(norm, length)
    return fit_length(out if scale == 1.0 else out * scale, shape[axis], axis)


def rfftn_vjp(g: Any, shape: tuple[int, ...], s: Any, axes: Any, norm: Any) -> Any:
    """Adjoint of the real ``a`` in ``np.fft.rfftn(a, s, axes, norm)`` (``rfft2``): numpy takes
    ``rfft`` along the last axis, then the complex transform along the others."""
    axes, lengths = fft_plan(shape, s, axes)
    half = tuple(lengths[-1] // 2 + 1 if k == axes[-1] else n for k, n in enumerate(shape))
    for axis, before, _after in reversed(fft_steps(half, axes[:-1], lengths[:-1])):
        g = fit_length(np.fft.fft(g, axis=axis, norm=norm), before, axis)
    return rfft_vjp(g, shape, lengths[-1], axes[-1], norm)


def irfft_vjp(g: Any, shape: tuple[int, ...], n: Any, axis: int, norm: Any) -> Any:
    """Adjoint of the complex ``a`` in ``np.fft.irfft(a, n, axis, norm)``.

    The result is ``s * (Re a_0 + 2 sum Re(a_j e^(2 pi i j t / n)) + Re a_(n/2) (-1)^t)``; entry
    ``j`` of the adjoint is ``w_j * ifft(g, norm)_j``, with ``w_j`` 2 for the entries that stand
    for themselves and their conjugates, 1 for ``a_0`` and (``n`` even) ``a_(n/2)``, whose
    imaginary parts ``irfft`` ignores (their adjoints come out real, as they should). For a real
    ``g`` (the adjoint of the real result), the first half of ``ifft(g)`` is ``conj(rfft(g))``
    scaled: half the work.
    """
    axis = axis % len(shape)
    length = 2 * (shape[axis] - 1) if n is None else int(n)
    weights = hermitian_weights(length, axis, len(shape))
    if np.iscomplexobj(g):
        full = np.fft.ifft(g, axis=axis, norm=norm)
        index = [slice(None)] * full.ndim
        index[axis] = slice(0, length // 2 + 1)
        spectrum = full[tuple(index)]
    else:  # the inverse transform's scale is the forward one's of the other direction
        spectrum = np.conj(np.fft.rfft(g, axis=axis, norm=swapped_norm(norm)))
    return fit_length(spectrum * weights, shape[axis], axis)


def irfftn_vjp(g: Any, shape: tuple[int, ...], s: Any, axes: Any, norm: Any) -> Any:
    """Adjoint of the complex ``a`` in ``np.fft.irfftn(a, s, axes, norm)`` (``irfft2``): numpy takes
    the complex inverse along every axis but the last, then ``irfft`` along the last."""
    axes, s = fft_plan(shape, s, axes, last_half=True)
    steps = fft_steps(shape, axes[:-1], s[:-1], first_axis_first=True)
    middle = list(shape)
    for axis, _before, after in steps:
        middle[axis] = after
    g = irfft_vjp(g, tuple(middle), s[-1], axes[-1], norm)
    for axis, before, _after in reversed(steps):
        g = fit_length(np.fft.ifft(g, axis=axis, norm=norm), before, axis)
    return g


def hfft_vjp(g: Any, shape: tuple[int, ...], n: Any, axis: int, norm: Any) -> Any:
    """Adjoint of ``a`` in ``np.fft.hfft(a, n, axis, norm)``, which is ``irfft(conj(a), n, axis)``
    with the norm's direction swapped."""
    return np.conj(irfft_vjp(g, shape, n, axis, swapped_norm(norm)))


def ihfft_vjp(g: Any, shape: tuple[int, ...], n: Any, axis: int, norm: Any) -> Any:
    """Adjoint of the real ``a`` in ``np.fft.ihfft(a, n, axis, norm)``, which is
    ``conj(rfft(a, n, axis))`` with the norm's direction swapped."""
    return rfft_vjp(np.conj(g), shape, n, axis, swapped_norm(norm))
