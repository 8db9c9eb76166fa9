"""The table of functions ast_ad differentiates, from the registry: ``python -m
ast_ad.show.coverage``."""

from __future__ import annotations

from ast_ad.core import registry

# ast_ad's own helpers, by what the user writes that they stand for
HELPERS = {
    "assign_item": "y[i] = v (item assignment)",
    "astype": "x.astype(...)",
    "T": "x.mT",
    "concat": "a + b (lists, tuples)",
    "repeat_seq": "a * n (lists, tuples)",
    "field": "p.w (namedtuples)",
    "list_item": "xs[i] (a list that grows later)",
    "sorted_by": "sorted(xs, key=...)",
    "add_at": "np.add.at (rewritten)",
    "copied": "np.copyto (rewritten)",
}


def spelled(fn: object, origin: str = "") -> str:
    module = getattr(fn, "__module__", None) or ""
    name = getattr(fn, "__name__", repr(fn))
    if origin == "ast_ad.rules.scipy":
        return f"scipy.special.{name}"
    if isinstance(fn, type) and module.startswith("scipy.sparse"):
        return f"scipy.sparse.{name}"
    if isinstance(fn, type):
        return name if module == "builtins" else f"np.{name}"
    if module in ("_operator", "operator"):
        return f"operator.{name}"
    if module.startswith("numpy.linalg"):
        return f"np.linalg.{name}"
    if module.startswith("numpy.fft"):
        return f"np.fft.{name}"
    if module.startswith("numpy") or type(fn).__name__ == "ufunc":
        return f"np.{name}"
    if module.startswith("scipy.optimize"):
        return f"scipy.optimize.{name}"
    if module.startswith("scipy.linalg"):
        return f"scipy.linalg.{name}"
    if module.startswith("scipy.integrate"):
        return f"scipy.integrate.{name}"
    if module.startswith("scipy.sparse.linalg"):
        return f"scipy.sparse.linalg.{name}"
    if module.startswith("scipy"):
        return f"scipy.special.{name}"
    if registry.is_helper(fn):
        return HELPERS.get(name, name)
    return f"{module}.{name}" if module not in ("builtins",) else name


def autograd_count() -> int | None:
    """How many functions autograd 1.9.1 registers reverse rules for, if it is installed."""
    try:
        import autograd.numpy  # noqa: F401
        import autograd.numpy.fft  # noqa: F401
        import autograd.numpy.linalg  # noqa: F401
        import autograd.scipy.special  # noqa: F401
        from autograd.core import primitive_vjps
    except ImportError:
        return None
    return len(primitive_vjps)


def table() -> str:
    """Markdown: the differentiable and the non-differentiable functions, grouped by library."""
    registry.load_all_rules()
    rules = [r for r in registry.registered()
             if r.origin.startswith(("ast_ad.rules", "ast_ad.api.solvers"))
             # the helpers' own rules, for derivatives of derivatives
             and r.origin != "ast_ad.rules.runtime"
             and getattr(r.fn, "__module__", None) not in ("ast_ad.runtime.spectral",
                                                           "ast_ad.api.solvers")]
    forward = [spelled(r.fn, r.origin) for r in rules if not r.nondiff
               and all(r.jvp(k) is not None for k in range(len(r.vjps)) if r.vjp(k) is not None)]
    reverse_only = sorted({spelled(r.fn, r.origin) for r in rules if not r.nondiff} - set(forward))
    groups: dict[str, list[str]] = {}
    zero: dict[str, list[str]] = {}
    for rule in rules:
        name = spelled(rule.fn, rule.origin)
        helper = registry.is_helper(rule.fn) and not name.startswith("np.")
        library = name.split(".")[0] if "." in name and not helper else "python"
        library = (
            "np.linalg"
            if name.startswith("np.linalg")
            else "np.fft"
            if name.startswith("np.fft")
            else "scipy.optimize"
            if name.startswith("scipy.optimize")
            else "scipy.linalg"
            if name.startswith("scipy.linalg")
            else "scipy.integrate"
            if name.startswith("scipy.integrate")
            else "scipy.sparse"
            if name.startswith("scipy.sparse")
            else "scipy.special"
            if library == "scipy"
            else library
        )
        (zero if rule.nondiff else groups).setdefault(library, []).append(name)
    differentiable = sum(len(v) for v in groups.values())
    lines = [
        "# Functions ast_ad differentiates",
        "",
        "Generated from the rule registry by `ast_ad.show.coverage.table()`; "
        "`AST_AD_UPDATE_GOLDEN=1 pytest tests/test_numpy_breadth.py` rewrites it.",
        "",
        f"- {differentiable} functions with reverse rules, and "
        f"{sum(len(v) for v in zero.values())} declared "
        "without a gradient (piecewise constant, integer or boolean results).",
        (
            f"- {len(forward)} of the {differentiable} have forward rules too (`jvp`, Hessians); "
            "the others are "
            "refused in forward mode at the user's line: "
            f"{', '.join(f'`{n}`' for n in reverse_only)}."
            if reverse_only
            else f"- All {differentiable} have forward rules too (`jvp`, Hessians, derivatives "
            "of any order), but for scipy's solvers, by the implicit function theorem at the "
            "solution ([the guide](guides/solvers.md)): second derivatives (Hessians, forward over "
            "reverse) through roots, minima and fits, first derivatives through quad and "
            "solve_ivp."
        ),
        "- Array methods (`x.sum()`, `x.T`, `x.reshape(...)`, `x.astype(...)`, ...) resolve to "
        "these rules.",
    ]
    count = autograd_count()
    if count is not None:
        lines.append(
            f"- For comparison, autograd 1.9.1 registers reverse rules for {count} functions "
            "(including more of scipy.special, which ast_ad does not cover yet)."
        )
    for title, table_ in (("With gradients", groups), ("Without gradients", zero)):
        lines += ["", f"## {title}", "", "| library | functions |", "|---|---|"]
        for library in sorted(table_):
            names = ", ".join(f"`{n}`" for n in sorted(set(table_[library])))
            lines.append(f"| {library} | {names} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(table(), end="")
