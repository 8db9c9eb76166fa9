"""Which names may hold complex numbers: the fact that decides which rules a call follows.

A holomorphic function's rules hold for complex arguments as they are written, and so do a linear
function's; a function that is not holomorphic (``np.abs``, ``np.conj``, ``np.imag``) has rules of
its own there (``registry.def_complex``), and one with neither is refused where an argument may be
complex. Reverse mode takes the real part of a contribution to an argument that is real
(``runtime.real_like``) where the result may be complex, or the complex rules were used.

>>> import numpy as np
>>> from ast_ad import transform
>>> def f(x):
...     z = np.fft.rfft(x)
...     p = np.abs(z)
...     return np.sum(p * p)
>>> sorted(complex_names(transform.normalized(f), (0,)))
['z']

The facts are a may-analysis, and flow-insensitive: a name is complex-capable where any statement
binding it may give it a complex value, from a complex literal or global, a parameter labelled
complex (``kinds.label_is_complex``), a function that makes complex values from real ones
(``registry.def_makes_complex``: ``np.fft.fft``, ``complex``), a complex ``dtype=``, or any
complex-capable input, except through a function whose result is real whatever it is given
(``registry.def_real_result``: ``np.abs``, ``np.real``) or a name known to hold integers, shapes or
booleans (``kinds``). What it cannot see (a container's items given as an argument, a field of an
object, a library function's result) is taken as real; the API refuses complex values inside
arguments, and a complex gradient or tangent that reaches a real parameter or result is refused
at run time (``arguments``), so a miss is an error, never a number.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np

from ast_ad.analysis.activity import at_line
from ast_ad.analysis.kinds import (
    COMPLEX_NUMBER,
    COMPLEX_UNKNOWN,
    NARROW_NUMBER,
    RANKED,
    Kinds,
    label_is_complex,
)
from ast_ad.core import registry
from ast_ad.errors import MissingRuleError
from ast_ad.ir import nodes as ir

# kinds' facts of values that are never complex: integers, shapes, ranges, indices, None
_REAL_FACTS = ("int", "shape", "ints", "index", "range", "none")


def holds_complex(value: Any) -> bool:
    """Whether ``value`` is a complex number, a complex array or dtype, or a list, tuple or dict of
    them (one level of nesting is followed per container)."""
    if isinstance(value, (complex, np.complexfloating)):
        return True
    if isinstance(value, np.ndarray):
        return bool(value.dtype.kind == "c")
    if isinstance(value, (list, tuple)):
        return any(holds_complex(v) for v in value)
    if isinstance(value, dict):
        return any(holds_complex(v) for v in value.values())
    return is_complex_dtype(value)


def is_complex_dtype(value: Any) -> bool:
    """Whether ``value`` names a complex dtype (``complex``, ``np.complex128``, ``"c16"``)."""
    if value is complex:
        return True
    if isinstance(value, np.dtype):
        return bool(value.kind == "c")
    if isinstance(value, type) and issubclass(value, np.complexfloating):
        return True
    # a dtype's name ("complex128", "c16", "<c8"), not any string (a dict's key, einsum's spec)
    if isinstance(value, str) and re.fullmatch(r"[<>=|]?[A-Za-z]+[0-9]*", value):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return bool(np.dtype(value).kind == "c")
        except (TypeError, ValueError):
            return False
    return False


def complex_names(
    function: ir.Function, shapes: tuple[int, ...], kinds: Kinds | None = None
) -> frozenset[str]:
    """The names of ``function`` that may hold complex values, given its parameters' labels
    (``shapes``) and, where known, its kinds' facts (which clear names that hold integers)."""
    found = {p for p, label in zip(function.params, shapes, strict=True) if label_is_complex(label)}
    statements = list(ir.walk(function.body))
    if not found and not any(_source(s) for s in statements):
        return frozenset()
    changed = True
    while changed:
        changed = False
        for stmt in statements:
            for name in _made(stmt, found):
                if name not in found and not _never(name, kinds):
                    found.add(name)
                    changed = True
    return frozenset(found)


def _never(name: str, kinds: Kinds | None) -> bool:
    if kinds is None:
        return False
    fact = kinds.facts.get(name)
    return fact is not None and (
        fact[0] in _REAL_FACTS or (fact[0] == "num" and not fact[2])
    )


def _source(stmt: ir.Stmt) -> bool:
    """Whether ``stmt`` makes a complex value of its own (not from a complex input)."""
    if not isinstance(stmt, ir.Assign):
        return False
    value = stmt.value
    if isinstance(value, ir.Call):
        return registry.makes_complex(value.fn.obj) or any(
            _complex_atom(a) for a in (*value.args, *(a for _, a in value.kwargs))
        )
    if isinstance(value, ir.Pack):
        return any(_complex_atom(a) for a in value.elts)
    return isinstance(value, (ir.Const, ir.Ref)) and _complex_atom(value)


def _complex_atom(atom: ir.Atom) -> bool:
    if isinstance(atom, ir.Const):
        return holds_complex(atom.value)
    if isinstance(atom, ir.Ref):
        return holds_complex(atom.obj)
    return False


def _made(stmt: ir.Stmt, found: set[str]) -> tuple[str, ...]:
    """The names ``stmt`` binds (or fills) with values that may be complex."""
    if isinstance(stmt, ir.Assign):
        value = stmt.value
        if isinstance(value, ir.Call):
            fn = value.fn.obj
            if registry.gives_real(fn):
                return ()
            atoms = (*value.args, *(a for _, a in value.kwargs))
            if registry.makes_complex(fn) or any(
                _complex_atom(a) or (isinstance(a, ir.Var) and a.name in found) for a in atoms
            ):
                return (stmt.target,)
            return ()
        if isinstance(value, ir.Attr) and value.attr in ("shape", "ndim", "size"):
            return ()
        if _source(stmt) or any(n in found for n in ir.reads_of(stmt)):
            return (stmt.target,)
        return ()
    if isinstance(stmt, (ir.Unpack, ir.Pop, ir.For)):
        return ir.defined(stmt) if any(n in found for n in ir.reads_of(stmt)) else ()
    if isinstance(stmt, (ir.Append, ir.SetItem)):
        complex_value = _complex_atom(stmt.value) or (
            isinstance(stmt.value, ir.Var) and stmt.value.name in found
        )
        return (stmt.target,) if complex_value else ()
    return ()


def complex_call(call: ir.Call, complexes: frozenset[str]) -> bool:
    """Whether an argument of ``call`` may be complex."""
    return any(
        (isinstance(a, ir.Var) and a.name in complexes) or _complex_atom(a)
        for a in (*call.args, *(a for _, a in call.kwargs))
    )


def rule_for(stmt: ir.Assign, rule: registry.Rule, complexes: frozenset[str]) -> registry.Rule:
    """The rules ``stmt``'s call follows: ``rule``, or where an argument may be complex, the rules
    registered for complex arguments (``registry.complex_rule``); refused at the user's line where
    there are none."""
    call = ir.call_of(stmt)
    if not complex_call(call, complexes):
        return rule
    found = registry.complex_rule(call.fn.obj)
    if found is None:
        raise at_line(
            MissingRuleError,
            stmt,
            f"{call.fn.hint} has no rule for complex arguments (its rules are those of real "
            "numbers, and it is not holomorphic or not known to be): take the real and imaginary "
            "parts apart (np.real(z), np.imag(z)) and call it on real numbers, or register its "
            "complex rules with ast_ad.extend.def_complex",
        )
    return found


def no_complex_rule(stmt: ir.Assign, k: int) -> MissingRuleError:
    """The error of a call whose complex rules refuse its argument ``k``."""
    call = ir.call_of(stmt)
    return at_line(
        MissingRuleError,
        stmt,
        f"{call.fn.hint} of a complex argument {k + 1} has no derivative that ast_ad takes (it is "
        "not holomorphic): write it from the real and imaginary parts (np.real(z), np.imag(z))",
    )


def complex_labels(
    labels: tuple[int, ...], args: list[ir.Atom], complexes: frozenset[str], stmt: ir.Stmt
) -> tuple[int, ...]:
    """A callee's parameter labels (``activity.call_labels``), saying which arguments may be
    complex; refused at the call's line where the label cannot say it (an array of which nothing
    more is known)."""
    if not complexes:
        return labels
    out = []
    for label, atom in zip(labels, args, strict=True):
        if not (isinstance(atom, ir.Var) and atom.name in complexes) or label_is_complex(label):
            out.append(label)
        elif label in (-1, NARROW_NUMBER):
            out.append(COMPLEX_NUMBER)
        elif label >= RANKED and (label // RANKED - 1) % 3 == 1:  # a float array's: complex
            out.append(label + RANKED)
        elif 0 <= label < COMPLEX_UNKNOWN:  # an array of which nothing more is known
            out.append(label + COMPLEX_UNKNOWN)
        else:
            raise at_line(
                MissingRuleError,
                stmt,
                f"{atom.name} may be complex, and is passed to a function that ast_ad "
                "differentiates on its own, which cannot be told so: compute the complex part "
                "in the calling function, or pass the real and imaginary parts apart",
            )
    return tuple(out)


def check_complex(function: ir.Function, complexes: frozenset[str], active: set[str]) -> None:
    """Refuse, at its line, a call of a differentiated argument that may be complex where the
    function has no rules for complex arguments, or its complex rules refuse that argument (those
    of ``np.sign``); before any pass reads the real rules' facts (a function without a gradient for
    real numbers may have one for complex ones)."""
    if not complexes:
        return
    for stmt in ir.walk(function.body):
        if not (isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Call)):
            continue
        call = stmt.value
        rule = registry.lookup(call.fn.obj)
        if rule is None or not complex_call(call, complexes):
            continue
        found = rule_for(stmt, rule, complexes)
        if found is rule:
            continue  # (its real rules hold: each mode asks for the rule it needs)
        for k, atom in enumerate(call.args):
            if (
                isinstance(atom, ir.Var)
                and atom.name in active
                and not found.nondiff
                and found.vjp(k) is None
                and found.jvp(k) is None
            ):
                raise no_complex_rule(stmt, k)


def surely_complex(function: ir.Function, complexes: frozenset[str]) -> frozenset[str]:
    """The names every binding of which is complex: made by a function that makes complex values
    (``np.fft.rfft``), a complex constant, a copy of such a name, or a holomorphic elementwise
    function (``registry.def_complex`` without rules of its own) of such a name, whose result keeps
    its dtype. A real argument's contribution needs no real part taken where it is one of these
    (reverse mode leaves ``real_like`` out)."""
    if not complexes:
        return frozenset()
    bindings: dict[str, list[ir.Stmt]] = {}
    for stmt in ir.walk(function.body):
        for name in ir.defined(stmt):
            if name in complexes:
                bindings.setdefault(name, []).append(stmt)
    sure = {name for name in bindings if name not in function.params}
    changed = True
    while changed:  # (a greatest fixpoint: drop the names one of whose bindings may be real)
        changed = False
        for name in list(sure):
            if not all(_gives_complex(stmt, sure) for stmt in bindings[name]):
                sure.discard(name)
                changed = True
    return frozenset(sure)


def _gives_complex(stmt: ir.Stmt, sure: set[str]) -> bool:
    if not isinstance(stmt, ir.Assign):
        return False
    value = stmt.value
    if isinstance(value, ir.Var):
        return value.name in sure
    if isinstance(value, ir.Const):
        return isinstance(value.value, (complex, np.complexfloating))
    if not isinstance(value, ir.Call):
        return False
    fn = value.fn.obj
    if registry.makes_complex(fn):
        return True
    rule = registry.lookup(fn)
    return (
        rule is not None
        and rule.elementwise
        and registry.complex_rule(fn) is rule
        and not registry.gives_real(fn)
        and any(isinstance(a, ir.Var) and a.name in sure for a in value.args)
    )
