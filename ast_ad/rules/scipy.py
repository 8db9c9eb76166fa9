"""Rules for scipy.special, registered only where scipy is installed (it is never required)."""

try:
    import scipy.special as sp
except ImportError:  # pragma: no cover - scipy is optional
    sp = None

import numpy as np

from ast_ad.registry import defvjp
from ast_ad.registry import defvjp_elementwise as ew
from ast_ad.runtime import expand_reduced

if sp is not None:
    ew(sp.expit,   lambda g, ans, x: g * ans * (1.0 - ans))
    ew(sp.logit,   lambda g, ans, x: g / (x * (1.0 - x)))
    ew(sp.erf,     lambda g, ans, x: g * (2.0 / np.sqrt(np.pi)) * np.exp(-x * x))
    ew(sp.erfc,    lambda g, ans, x: -g * (2.0 / np.sqrt(np.pi)) * np.exp(-x * x))
    ew(sp.gammaln, lambda g, ans, x: g * sp.digamma(x))
    ew(sp.digamma, lambda g, ans, x: g * sp.polygamma(1, x))
    ew(sp.xlogy,   lambda g, ans, x, y: g * np.where(x == 0, 0.0, np.log(np.where(x == 0, 1.0, y))),
                   lambda g, ans, x, y: g * x / y)
    defvjp(sp.logsumexp,   lambda g, ans, a, axis=None, b=None, keepdims=False, return_sign=False:
                           expand_reduced(g, a, axis, keepdims) * np.exp(a - expand_reduced(ans, a, axis, keepdims))
                           * (1.0 if b is None else b))
    defvjp(sp.softmax,     lambda g, ans, x, axis=None: ans * (g - np.sum(g * ans, axis=axis, keepdims=True)))
    defvjp(sp.log_softmax, lambda g, ans, x, axis=None: g - np.exp(ans) * np.sum(g, axis=axis, keepdims=True))
