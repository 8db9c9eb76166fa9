"""ast_ad: automatic differentiation of plain Python and NumPy by source transformation.

Reverse and forward mode, stacked to any order.

>>> import numpy as np
>>> import ast_ad
>>> def f(x1, x2):
...     return np.log(x1) + x1 * x2 - np.sin(x2)
>>> ast_ad.grad(f)  # doctest: +ELLIPSIS
<ast_ad gradient of f argnums=(0,)>
"""

from typing import TYPE_CHECKING, Any

from ast_ad import errors, extend, rules  # noqa: F401  (importing rules registers them)
from ast_ad.api.compose import source
from ast_ad.api.gradient import grad, value_and_grad

if TYPE_CHECKING:  # for type checkers and editors; at run time, __getattr__ below imports them
    from ast_ad import tracer
    from ast_ad.api.compose import hessian, hvp, jacfwd, jacobian, jacrev, vjp
    from ast_ad.api.directional import jvp
    from ast_ad.api.export import export
    from ast_ad.api.sparse import sparsity
    from ast_ad.backend.load import cache_clear
    from ast_ad.show.explain import explain
    from ast_ad.show.graph import graph
    from ast_ad.testing.checking import check_grads

# Imported when first asked for (PEP 562): ``import ast_ad`` stays small, and the transform's own
# modules load with the first gradient.
_LAZY = {
    "check_grads": "testing.checking",
    "hessian": "api.compose",
    "hvp": "api.compose",
    "jacfwd": "api.compose",
    "jacobian": "api.compose",
    "jacrev": "api.compose",
    "sparsity": "api.sparse",
    "jvp": "api.directional",
    "vjp": "api.compose",
    "explain": "show.explain",
    "export": "api.export",
    "graph": "show.graph",
    "cache_clear": "backend.load",
}
_LAZY_MODULES = {"tracer", "revolve"}  # public modules, imported when first asked for

__all__ = [
    "grad",
    "value_and_grad",
    "jvp",
    "vjp",
    "jacfwd",
    "jacrev",
    "jacobian",
    "hessian",
    "hvp",
    "sparsity",
    "source",
    "check_grads",
    "cache_clear",
    "explain",
    "graph",
    "export",
    "tracer",
    "extend",
    "errors",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    import importlib

    if name in _LAZY_MODULES:
        return importlib.import_module(f"ast_ad.{name}")
    if name not in _LAZY:
        raise AttributeError(f"module 'ast_ad' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"ast_ad.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public API and the module's own dunders: not the package's modules, which importing them
    (as ast_ad does as it works) makes attributes of the package too."""
    return sorted(set(__all__) | {name for name in globals() if name.startswith("__")})
