"""The surface for rule authors: register gradients for your own primitives.

>>> import numpy as np
>>> from ast_ad.extend import defvjp
>>> def softplus(x):
...     return np.log1p(np.exp(x))
>>> defvjp(softplus, lambda g, ans, x: g / (1 + np.exp(-x)))

A registered function is a primitive for both the transformer and the tracer,
even when its source is available. Forward mode (``jvp``, Hessians) needs a
forward rule too, unless one follows from the function's facts: an
elementwise function's (``defvjp_elementwise``) is its reverse rule; a linear
one's (``def_linear``) is the function itself. Otherwise register it:

>>> from ast_ad.extend import defjvp
>>> defjvp(softplus, lambda u, ans, x: u / (1 + np.exp(-x)))

A rule is written in the language ast_ad differentiates, so a derivative through
it can be differentiated again.
"""

from ast_ad.core.registry import (
    def_complex,
    def_linear,
    def_nondiff,
    def_reduction,
    defjvp,
    defvjp,
    defvjp_elementwise,
)
from ast_ad.runtime import unbroadcast

__all__ = [
    "defvjp",
    "defvjp_elementwise",
    "defjvp",
    "def_linear",
    "def_reduction",
    "def_nondiff",
    "def_complex",
    "unbroadcast",
]
