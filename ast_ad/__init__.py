"""ast_ad: automatic differentiation of plain Python and NumPy by source transformation.

Reverse and forward mode, stacked to any order.

>>> import numpy as np
>>> import ast_ad
>>> def f(x1, x2):
...     return np.log(x1) + x1 * x2 - np.sin(x2)
>>> ast_ad.grad(f)  # doctest: +ELLIPSIS
<ast_ad gradient of f argnums=(0,)>
"""

from ast_ad import errors, extend, rules, tracer  # noqa: F401  (importing rules registers them)
from ast_ad.api import grad, source, value_and_grad
from ast_ad.checking import check_grads
from ast_ad.compose import hessian, hvp, jacfwd, jacobian, jacrev, jvp, vjp
from ast_ad.explain import explain
from ast_ad.export import export
from ast_ad.graph import graph
from ast_ad.load import cache_clear

__all__ = ["grad", "value_and_grad", "jvp", "vjp", "jacfwd", "jacrev", "jacobian", "hessian", "hvp", "source",
           "check_grads", "cache_clear", "explain", "graph", "export", "tracer", "extend",
           "errors"]
__version__ = "0.1.0"
