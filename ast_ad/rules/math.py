"""Rules for the math module: scalar functions, written with math so scalar loops stay fast."""

import math

import numpy as np

from ast_ad.core.registry import def_linear, def_nondiff, def_number_result, defvjp
from ast_ad.core.registry import defvjp_elementwise as ew
from ast_ad.rules.elementary import def_elementary

def_elementary(math, "a")

# ---- what only math has ----------------------------------------------------------------------
ew(math.log,   lambda g, ans, x, base=None: g / x if base is None else g / (x * math.log(base)),
               lambda g, ans, x, base: -g * ans / (base * math.log(base)))
ew(
    math.pow,
    lambda g, ans, x, y: g * y * math.pow(x, y - 1.0),
    lambda g, ans, x, y: g * ans * math.log(x),
)
ew(math.fmod,  lambda g, ans, x, y: g, lambda g, ans, x, y: -g * math.trunc(x / y))
ew(math.remainder, lambda g, ans, x, y: g, lambda g, ans, x, y: -g * round(x / y))
ew(math.copysign, lambda g, ans, x, y: g * np.sign(x) * np.sign(ans), lambda g, ans, x, y: 0.0 * g)
defvjp(math.fsum, lambda g, ans, xs: [g for _ in xs])
def_linear(math.fsum, 0)
ew(math.fabs,  lambda g, ans, x: g * np.sign(x))

# ---- no gradient ---------------------------------------------------------------------------------
def_nondiff(math.floor, math.ceil, math.trunc, math.isnan, math.isinf, math.isfinite)

# ---- facts ---------------------------------------------------------------------------------------
# each gives a Python float, int or bool whatever its arguments (an array of more than one entry is
# refused)
def_number_result(math.sin, math.cos, math.tan, math.asin, math.acos, math.atan, math.atan2,
                  math.hypot, math.sinh, math.cosh, math.tanh, math.exp, math.expm1, math.log,
                  math.log1p, math.log2, math.log10, math.sqrt, math.pow, math.fmod,
                  math.remainder, math.copysign, math.fsum, math.fabs, math.floor, math.ceil,
                  math.trunc, math.isnan, math.isinf, math.isfinite)
