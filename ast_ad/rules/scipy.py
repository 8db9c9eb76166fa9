"""Rules for scipy.special, registered only where scipy is installed (it is never required)."""

try:
    import scipy.special as sp
except ImportError:  # pragma: no cover - scipy is optional
    sp = None

import numpy as np

from ast_ad.core.registry import def_reduction, defjvp, defvjp
from ast_ad.core.registry import defvjp_elementwise as ew
from ast_ad.runtime import expand_reduced

if sp is not None:
    ew(sp.expit,   lambda g, ans, x: g * ans * (1.0 - ans))
    ew(sp.logit,   lambda g, ans, x: g / (x * (1.0 - x)))
    ew(sp.erf,     lambda g, ans, x: g * (2.0 / np.sqrt(np.pi)) * np.exp(-x * x))
    ew(sp.erfc,    lambda g, ans, x: -g * (2.0 / np.sqrt(np.pi)) * np.exp(-x * x))
    ew(sp.gammaln, lambda g, ans, x: g * sp.digamma(x))
    # polygamma(1, x), through a ufunc: it dispatches
    ew(sp.digamma, lambda g, ans, x: g * sp.zeta(2.0, x))
    ew(sp.xlogy,   lambda g, ans, x, y: g * np.where(x == 0, 0.0, np.log(np.where(x == 0, 1.0, y))),
                   lambda g, ans, x, y: g * x / y)
    defvjp(
        sp.logsumexp,
        lambda g, ans, a, axis=None, b=None, keepdims=False, return_sign=False: (
            expand_reduced(g, a, axis, keepdims)
            * np.exp(a - expand_reduced(ans, a, axis, keepdims))
            * (1.0 if b is None else b)
        ),
    )
    defvjp(
        sp.softmax,
        lambda g, ans, x, axis=None: ans * (g - np.sum(g * ans, axis=axis, keepdims=True)),
    )
    defvjp(
        sp.log_softmax,
        lambda g, ans, x, axis=None: g - np.exp(ans) * np.sum(g, axis=axis, keepdims=True),
    )

if sp is not None:
    # ---- gamma and beta functions ----------------------------------------------------------------
    ew(sp.gamma,     lambda g, ans, x: g * ans * sp.digamma(x))
    ew(sp.rgamma,    lambda g, ans, x: -g * ans * sp.digamma(x))
    ew(sp.beta,      lambda g, ans, a, b: g * ans * (sp.digamma(a) - sp.digamma(a + b)),
                     lambda g, ans, a, b: g * ans * (sp.digamma(b) - sp.digamma(a + b)))
    ew(sp.betaln,    lambda g, ans, a, b: g * (sp.digamma(a) - sp.digamma(a + b)),
                     lambda g, ans, a, b: g * (sp.digamma(b) - sp.digamma(a + b)))
    # polygamma(n + 1, x) as scipy computes it, from ufuncs (polygamma converts its arguments to
    # numpy)
    ew(
        sp.polygamma,
        None,
        lambda g, ans, n, x: g * ((-1.0) ** (n + 2) * sp.gamma(n + 2.0) * sp.zeta(n + 2.0, x)),
    )
    # in q; the order is a constant
    ew(sp.zeta,      None, lambda g, ans, x, q: -g * x * sp.zeta(x + 1.0, q))
    # ---- error functions and the normal distribution ---------------------------------------------
    ew(sp.erfinv,    lambda g, ans, x: g * (np.sqrt(np.pi) / 2.0) * np.exp(ans * ans))
    ew(sp.erfcinv,   lambda g, ans, x: -g * (np.sqrt(np.pi) / 2.0) * np.exp(ans * ans))
    ew(sp.erfcx,     lambda g, ans, x: g * (2.0 * x * ans - 2.0 / np.sqrt(np.pi)))
    ew(sp.ndtr,      lambda g, ans, x: g * np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi))
    ew(sp.log_ndtr,  lambda g, ans, x: g * np.exp(-0.5 * x * x - ans) / np.sqrt(2.0 * np.pi))
    ew(sp.ndtri,     lambda g, ans, x: g * np.sqrt(2.0 * np.pi) * np.exp(0.5 * ans * ans))
    ew(sp.dawsn,     lambda g, ans, x: g * (1.0 - 2.0 * x * ans))
    # ---- Bessel functions (gradient in the argument; the order is an integer or a constant) ------
    ew(sp.i0,        lambda g, ans, x: g * sp.i1(x))
    ew(
        sp.i1,
        lambda g, ans, x: g * np.where(np.abs(x) < 1e-100, 0.5, 0.5 * (sp.i0(x) + sp.iv(2, x))),
    )
    ew(sp.j0,        lambda g, ans, x: -g * sp.j1(x))
    ew(
        sp.j1,
        lambda g, ans, x: g * np.where(np.abs(x) < 1e-100, 0.5, 0.5 * (sp.j0(x) - sp.jv(2, x))),
    )
    ew(sp.y0,        lambda g, ans, x: -g * sp.y1(x))
    ew(sp.y1,        lambda g, ans, x: g * 0.5 * (sp.y0(x) - sp.yv(2, x)))
    ew(sp.iv,        None, lambda g, ans, v, z: g * sp.ivp(v, z))
    ew(
        sp.ive,
        None,
        lambda g, ans, v, z: g * (sp.ivp(v, z) * np.exp(-np.abs(z)) - np.sign(z) * ans),
    )
    ew(sp.jv,        None, lambda g, ans, v, z: g * sp.jvp(v, z))
    ew(sp.yv,        None, lambda g, ans, v, z: g * sp.yvp(v, z))
    ew(sp.kv,        None, lambda g, ans, v, z: g * sp.kvp(v, z))
    ew(sp.yn,        None, lambda g, ans, n, x: g * sp.yvp(n, x))
    # their derivatives in the argument, sp.jvp(v, z, n) the n-th: the next one, so every order has
    # a rule
    ew(sp.ivp,       None, lambda g, ans, v, z, n=1: g * sp.ivp(v, z, n + 1))
    ew(sp.jvp,       None, lambda g, ans, v, z, n=1: g * sp.jvp(v, z, n + 1))
    ew(sp.yvp,       None, lambda g, ans, v, z, n=1: g * sp.yvp(v, z, n + 1))
    ew(sp.kvp,       None, lambda g, ans, v, z, n=1: g * sp.kvp(v, z, n + 1))
    # ---- information theory and friends ----------------------------------------------------------
    ew(sp.entr,      lambda g, ans, x: -g * (np.log(x) + 1.0))
    ew(sp.rel_entr, lambda g, ans, x, y: g * (np.log(x / y) + 1.0), lambda g, ans, x, y: -g * x / y)
    ew(sp.xlog1py,   lambda g, ans, x, y: g * np.log1p(y), lambda g, ans, x, y: g * x / (1.0 + y))
    ew(sp.expm1,     lambda g, ans, x: g * (ans + 1.0))
    ew(sp.log1p,     lambda g, ans, x: g / (1.0 + x))
    ew(sp.sindg,     lambda g, ans, x: g * (np.pi / 180.0) * sp.cosdg(x))
    ew(sp.cosdg,     lambda g, ans, x: -g * (np.pi / 180.0) * sp.sindg(x))

if sp is not None:
    # ---- forward mode (the elementwise functions need nothing here) ------------------------------
    def_reduction(sp.logsumexp)
    defjvp(
        sp.softmax,
        lambda u, ans, x, axis=None: ans * (u - np.sum(u * ans, axis=axis, keepdims=True)),
    )
    defjvp(
        sp.log_softmax,
        lambda u, ans, x, axis=None: u - np.sum(np.exp(ans) * u, axis=axis, keepdims=True),
    )
