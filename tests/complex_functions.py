"""Complex code as users write it (quantum amplitudes, characteristic functions, convolutions,
loops, branches, lists and writes of complex values): ``tests/test_complex.py`` checks each."""

import cmath

import numpy as np


def amplitude(theta, psi):
    c, s = np.cos(theta[0]), np.sin(theta[0])
    u = np.array([[c, -s * 1j], [-s * 1j, c]])
    phi = u @ (psi * np.exp(1j * theta[1]))
    return np.abs(np.vdot(psi, phi)) ** 2

def charfun(t, x):
    return np.abs(np.mean(np.exp(1j * t * x))) ** 2

def conv(a, b):
    n = len(a)
    c = np.fft.irfft(np.fft.rfft(a) * np.fft.rfft(b), n=n)
    return np.sum(c * c)

def complex_loop(x):
    z = np.zeros(len(x), dtype=complex)
    acc = 0j
    for i in range(len(x)):
        z[i] = cmath.exp(1j * x[i]) * (i + 1)
        acc = acc + z[i] * np.conj(z[i - 1])
    return abs(acc) + np.sum(np.real(z) ** 2)

def branchy(x):
    z = x[0] + 1j * x[1]
    if abs(z) > 1.0:
        w = z * z
    else:
        w = np.conj(z) * 2.0
    return np.real(w) + np.imag(w) ** 2

def list_of_complex(x):
    zs = [np.exp(1j * x), x * (1 + 2j)]
    total = 0.0
    for z in zs:
        total = total + np.sum(np.abs(z) ** 2 * np.angle(z + 0.1))
    return total

def solve_complex(x):
    a = np.array([[2.0 + 1j * x[0], 0.5], [0.3j, 1.5 + x[1]]])
    b = np.array([1.0, 1j * x[2]])
    y = np.linalg.solve(a, b)
    return np.sum(np.abs(y) ** 2) + np.real(np.linalg.det(a) * np.conj(y[0]))

def inplace_complex(x):
    z = x * (1.0 + 0.5j)
    z[1:] += z[:-1] * 0.5j
    w = z[::-1]
    z *= 2.0
    return np.sum(np.abs(w) ** 2) + np.real(np.sum(z))

def complex_scalar_in(z, x):
    return np.abs(z * x[0] + np.conj(z) * x[1]) ** 2 + np.real(cmath.sqrt(z + 2))

def appended_mixed(x):
    items = []
    items.append(x[0] * 2.0)
    items.append(x[1] * (1.0 + 1.0j))
    v = np.array(items)
    return np.sum(np.abs(v * v))


def written_into_complex(x):
    z = np.zeros(3, dtype=complex)
    z[0] = x[0]
    z[1] = x[1] * 1j
    z[2] = z[0] * z[1]
    return np.abs(np.sum(z)) ** 2
