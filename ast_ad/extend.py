"""The surface for rule authors: register gradients for your own primitives.

>>> import numpy as np
>>> from ast_ad.extend import defvjp
>>> def softplus(x):
...     return np.log1p(np.exp(x))
>>> defvjp(softplus, lambda g, ans, x: g / (1 + np.exp(-x)))

A registered function is a primitive for both the transformer and the tracer,
even when its source is available.
"""

from ast_ad.registry import def_nondiff, defvjp, defvjp_elementwise
from ast_ad.runtime import unbroadcast

__all__ = ["defvjp", "defvjp_elementwise", "def_nondiff", "unbroadcast"]
