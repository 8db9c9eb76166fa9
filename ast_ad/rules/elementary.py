"""The elementary functions' rules, written once for the two libraries that have them: ``math`` for
floats and numpy for arrays. The mathematics is the same; each library's rules are written with its
own functions, so that a float's derivative stays in ``math`` (fast on floats) and an array's in
numpy."""

from types import ModuleType

from ast_ad.core.registry import defvjp_elementwise as ew


def def_elementary(m: ModuleType, arc: str) -> None:
    """Rules for the trigonometric functions of ``m`` and their inverses, its hyperbolic functions,
    ``hypot``, ``exp``, ``expm1``, ``log1p``, ``log2``, ``log10`` and ``sqrt``. ``arc`` is how ``m``
    names an inverse: ``"a"`` for math (``asin``), ``"arc"`` for numpy (``arcsin``)."""
    # ---- trigonometric -------------------------------------------------------------------------
    ew(m.sin, lambda g, ans, x: g * m.cos(x))
    ew(m.cos, lambda g, ans, x: -g * m.sin(x))
    ew(m.tan, lambda g, ans, x: g / m.cos(x) ** 2)
    ew(getattr(m, arc + "sin"), lambda g, ans, x: g / m.sqrt(1.0 - x * x))
    ew(getattr(m, arc + "cos"), lambda g, ans, x: -g / m.sqrt(1.0 - x * x))
    ew(getattr(m, arc + "tan"), lambda g, ans, x: g / (1.0 + x * x))
    ew(
        getattr(m, arc + "tan2"),
        lambda g, ans, y, x: g * x / (x * x + y * y),
        lambda g, ans, y, x: -g * y / (x * x + y * y),
    )
    ew(m.hypot, lambda g, ans, x, y: g * x / ans, lambda g, ans, x, y: g * y / ans)

    # ---- hyperbolic ----------------------------------------------------------------------------
    ew(m.sinh, lambda g, ans, x: g * m.cosh(x))
    ew(m.cosh, lambda g, ans, x: g * m.sinh(x))
    ew(m.tanh, lambda g, ans, x: g * (1.0 - ans * ans))

    # ---- exponents and logarithms (``log`` is each library's own: math's takes a base) ---------
    ew(m.exp, lambda g, ans, x: g * ans)
    ew(m.expm1, lambda g, ans, x: g * (ans + 1.0))
    ew(m.log1p, lambda g, ans, x: g / (1.0 + x))
    ew(m.log2, lambda g, ans, x: g / (x * m.log(2.0)))
    ew(m.log10, lambda g, ans, x: g / (x * m.log(10.0)))
    ew(m.sqrt, lambda g, ans, x: g * 0.5 / ans)
