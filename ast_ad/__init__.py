"""ast_ad: automatic differentiation of plain Python and NumPy by source transformation.

Reverse and forward mode, stacked to any order.

>>> import numpy as np
>>> import ast_ad
>>> def f(x1, x2):
...     return np.log(x1) + x1 * x2 - np.sin(x2)
>>> ast_ad.grad(f)  # doctest: +ELLIPSIS
<ast_ad gradient of f argnums=(0,)>
"""

import sys
import types
from typing import TYPE_CHECKING, Any

from ast_ad import errors, extend, rules  # noqa: F401  (importing rules registers them)
from ast_ad.api import grad, source, value_and_grad

if TYPE_CHECKING:  # for type checkers and editors; at run time, __getattr__ below imports them
    from ast_ad import tracer
    from ast_ad.checking import check_grads
    from ast_ad.compose import hessian, hvp, jacfwd, jacobian, jacrev, jvp, vjp
    from ast_ad.explain import explain
    from ast_ad.export import export
    from ast_ad.graph import graph
    from ast_ad.load import cache_clear

# Imported when first asked for (PEP 562): ``import ast_ad`` stays small, and the transform's own modules load
# with the first gradient.
_LAZY = {"check_grads": "checking", "hessian": "compose", "hvp": "compose", "jacfwd": "compose",
         "jacobian": "compose", "jacrev": "compose", "jvp": "compose", "vjp": "compose", "explain": "explain",
         "export": "export", "graph": "graph", "cache_clear": "load"}
_LAZY_MODULES = {"tracer"}  # modules of the package, imported when first asked for (importing sets the attribute)

__all__ = ["grad", "value_and_grad", "jvp", "vjp", "jacfwd", "jacrev", "jacobian", "hessian", "hvp", "source",
           "check_grads", "cache_clear", "explain", "graph", "export", "tracer", "extend",
           "errors"]
__version__ = "0.1.0"


class _Package(types.ModuleType):
    """``ast_ad``, where ``explain``, ``export`` and ``graph`` name functions, though modules have the same
    names: importing such a module (as ast_ad's own modules do) sets the package's attribute to the module, and
    here to its function instead."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and name in _LAZY and _LAZY[name] == name:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


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
    """The public API and the module's own dunders: not the package's modules, which importing them (as ast_ad
    does as it works) makes attributes of the package too."""
    return sorted(set(__all__) | {name for name in globals() if name.startswith("__")})
