"""The rule registry: which functions are primitives, and how to differentiate them.

A *rule* is a vector-Jacobian product (VJP) for one positional argument of a
function, written ``lambda g, ans, *args, **kwargs: ...``: given the adjoint
``g`` of the result ``ans`` and the call's own arguments, it returns that
argument's adjoint contribution.

>>> import math
>>> rule = lookup(math.sin)
>>> rule.vjps[0](1.0, math.sin(0.0), 0.0)
1.0

Both the source transformer and the runtime tracer read this table, so every
rule is written exactly once. The registry imports no AST library.

Every rule receives ``g`` of exactly the shape of ``ans``. A rule of an
*elementwise* (broadcasting) function may return a contribution of the
broadcast shape; the engines sum it down to the argument's shape (the
transformer only where another operand could have broadcast it). Every other
rule returns exactly the argument's shape.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

VJP = Callable[..., Any]


@dataclass(frozen=True)
class Rule:
    """How to differentiate ``fn``: one VJP per positional argument (``None``: no gradient)."""

    fn: Any
    vjps: tuple[VJP | None, ...] = ()
    nondiff: bool = False
    elementwise: bool = False
    origin: str = ""  # the module that registered the rule (``ast_ad.rules.numpy``, or the user's)

    def vjp(self, argnum: int) -> VJP | None:
        """The rule for positional argument ``argnum``, or ``None``."""
        return self.vjps[argnum] if argnum < len(self.vjps) else None


_RULES: dict[Any, Rule] = {}


def zero(g: Any, ans: Any, *args: Any, **kwargs: Any) -> float:
    """The rule of an argument that the result does not depend on (a shape, an array written over whole).

    Unlike ``None`` (no rule: a differentiated value there is refused), it contributes nothing;
    the transformer emits no code for it.
    """
    return 0.0


def defvjp(fn: Any, *vjps: VJP | None, elementwise: bool = False) -> None:
    """Register one reverse rule per positional argument of ``fn``."""
    _RULES[fn] = Rule(fn, tuple(vjps), elementwise=elementwise, origin=_caller())


def defvjp_elementwise(fn: Any, *vjps: VJP | None) -> None:
    """Register rules for an elementwise (broadcasting) function."""
    _RULES[fn] = Rule(fn, tuple(vjps), elementwise=True, origin=_caller())


def def_nondiff(*fns: Any) -> None:
    """Declare functions whose result carries no gradient (``floor``, ``shape``, ...)."""
    for fn in fns:
        _RULES[fn] = Rule(fn, nondiff=True, origin=_caller())


# Facts about primitives that the engine reads, beside their rules: fact -> {function: value}.
_FACTS: dict[str, dict[Any, Any]] = {"in_place": {}, "sequence": {}, "same_kind": {}, "effect": {}}


def _fact(fact: str, fn: Any) -> Any:
    """The value recorded for ``fn`` under ``fact``, or ``None`` (also for unhashable objects)."""
    return _FACTS[fact].get(fn) if hashable(fn) else None


def def_in_place(fn: Any, twin: Any) -> None:
    """Declare that ``fn(x, *rest)`` changes ``x`` in place, and that ``x = twin(x, *rest)`` computes the same.

    ``fn`` may be a function (``np.add.at``) or a method of arrays (``np.ndarray.sort``).
    """
    _FACTS["in_place"][fn] = twin


def in_place(fn: Any) -> Any:
    """The functional twin of an in-place ``fn``, or ``None``."""
    return _fact("in_place", fn)


def def_sequence(*fns: Any) -> None:
    """Declare functions that return a tuple or list: their results' adjoints add element by element."""
    _FACTS["sequence"].update(dict.fromkeys(fns, True))


def returns_sequence(fn: Any) -> bool:
    return bool(_fact("sequence", fn))


def def_same_kind(*fns: Any) -> None:
    """Declare functions whose result is a list, tuple or dict when their first argument is (``assign_item``)."""
    _FACTS["same_kind"].update(dict.fromkeys(fns, True))


def keeps_kind(fn: Any) -> bool:
    return bool(_fact("same_kind", fn))


def def_effect(*fns: Any) -> None:
    """Declare functions called for an effect alone (``print``): they read their arguments and change none."""
    _FACTS["effect"].update(dict.fromkeys(fns, True))


def is_effect(fn: Any) -> bool:
    return bool(_fact("effect", fn))


# Rules for optional libraries, registered when the user's code first names the library: importing
# scipy.special alone costs more than all the rest of ast_ad.
_LAZY = {"scipy": "ast_ad.rules.scipy"}


def load_rules_for(obj: Any) -> None:
    """Register the rules of the optional library ``obj`` belongs to (a module, or a function of one).

    A ufunc does not say its module: one without a rule loads every optional library that is installed.
    """
    if not _LAZY:
        return
    module = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", None) or ""
    unknown_ufunc = type(obj).__name__ == "ufunc" and lookup(obj) is None
    for library, rules in list(_LAZY.items()):
        if unknown_ufunc or module == library or module.startswith(library + "."):
            del _LAZY[library]
            importlib.import_module(rules)


def load_all_rules() -> None:
    """Register the rules of every optional library that is installed (for tables and tests)."""
    for rules in list(_LAZY.values()):
        importlib.import_module(rules)
    _LAZY.clear()


def _caller() -> str:
    """The module that called the registering function (two frames up)."""
    frame = sys._getframe(2)
    return frame.f_globals.get("__name__", "")


def lookup(fn: Any) -> Rule | None:
    """The rule registered for ``fn``, or ``None`` (also for unhashable objects)."""
    try:
        return _RULES.get(fn)
    except TypeError:
        return None


def hashable(obj: Any) -> bool:
    """Whether ``obj`` can be looked up in a table keyed by functions."""
    try:
        hash(obj)
    except TypeError:
        return False
    return True


def registered() -> tuple[Rule, ...]:
    """Every registered rule, in registration order."""
    return tuple(_RULES.values())
