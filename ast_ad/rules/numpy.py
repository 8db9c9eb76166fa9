"""Rules for numpy: elementwise functions, reductions and structure."""

import numpy as np

from ast_ad.registry import def_nondiff, defvjp
from ast_ad.registry import defvjp_elementwise as ew
from ast_ad.runtime import (
    balanced_eq,
    clip_mask,
    dot_vjp_a,
    dot_vjp_b,
    expand_reduced,
    extremum_vjp,
    matmul_vjp_a,
    matmul_vjp_b,
    pow_minus_one,
    reduced_count,
    safe_log,
    unstack,
)

# ---- trigonometric ---------------------------------------------------------------------------
ew(np.sin,     lambda g, ans, x: g * np.cos(x))
ew(np.cos,     lambda g, ans, x: -g * np.sin(x))
ew(np.tan,     lambda g, ans, x: g / np.cos(x) ** 2)
ew(np.arcsin,  lambda g, ans, x: g / np.sqrt(1.0 - x * x))
ew(np.arccos,  lambda g, ans, x: -g / np.sqrt(1.0 - x * x))
ew(np.arctan,  lambda g, ans, x: g / (1.0 + x * x))
ew(np.arctan2, lambda g, ans, y, x: g * x / (x * x + y * y), lambda g, ans, y, x: -g * y / (x * x + y * y))

# ---- hyperbolic ------------------------------------------------------------------------------
ew(np.sinh, lambda g, ans, x: g * np.cosh(x))
ew(np.cosh, lambda g, ans, x: g * np.sinh(x))
ew(np.tanh, lambda g, ans, x: g * (1.0 - ans * ans))

# ---- exponents and logarithms ------------------------------------------------------------------
ew(np.exp,   lambda g, ans, x: g * ans)
ew(np.exp2,  lambda g, ans, x: g * ans * np.log(2.0))
ew(np.expm1, lambda g, ans, x: g * (ans + 1.0))
ew(np.log,   lambda g, ans, x: g / x)
ew(np.log2,  lambda g, ans, x: g / (x * np.log(2.0)))
ew(np.log10, lambda g, ans, x: g / (x * np.log(10.0)))
ew(np.log1p, lambda g, ans, x: g / (1.0 + x))
ew(np.sqrt,  lambda g, ans, x: g * 0.5 / ans)
ew(np.square, lambda g, ans, x: g * 2.0 * x)
ew(np.power, lambda g, ans, x, y: g * y * pow_minus_one(x, y), lambda g, ans, x, y: g * ans * safe_log(x))

# ---- arithmetic --------------------------------------------------------------------------------
ew(np.add,        lambda g, ans, x, y: g,     lambda g, ans, x, y: g)
ew(np.subtract,   lambda g, ans, x, y: g,     lambda g, ans, x, y: -g)
ew(np.multiply,   lambda g, ans, x, y: g * y, lambda g, ans, x, y: g * x)
ew(np.divide,     lambda g, ans, x, y: g / y, lambda g, ans, x, y: -g * ans / y)
ew(np.negative,   lambda g, ans, x: -g)
ew(np.positive,   lambda g, ans, x: g)
ew(np.reciprocal, lambda g, ans, x: -g * ans * ans)
ew(np.abs,        lambda g, ans, x: g * np.sign(x))
ew(np.maximum,    lambda g, ans, x, y: g * balanced_eq(x, ans, y), lambda g, ans, x, y: g * balanced_eq(y, ans, x))
ew(np.minimum,    lambda g, ans, x, y: g * balanced_eq(x, ans, y), lambda g, ans, x, y: g * balanced_eq(y, ans, x))
ew(np.where,      None, lambda g, ans, c, x, y: np.where(c, g, 0.0), lambda g, ans, c, x, y: np.where(c, 0.0, g))
ew(np.clip,       lambda g, ans, x, lo=None, hi=None, *args, **kwargs: g * clip_mask(x, lo, hi))

# ---- reductions --------------------------------------------------------------------------------
defvjp(np.sum,  lambda g, ans, x, axis=None, dtype=None, out=None, keepdims=False, *args, **kwargs:
                expand_reduced(g, x, axis, keepdims))
defvjp(np.mean, lambda g, ans, x, axis=None, dtype=None, out=None, keepdims=False, *args, **kwargs:
                expand_reduced(g, x, axis, keepdims) / reduced_count(x, axis))

defvjp(np.max,  lambda g, ans, x, axis=None, out=None, keepdims=False, *args, **kwargs:
                extremum_vjp(g, ans, x, axis, keepdims))
defvjp(np.min,  lambda g, ans, x, axis=None, out=None, keepdims=False, *args, **kwargs:
                extremum_vjp(g, ans, x, axis, keepdims))

# ---- lists of arrays -----------------------------------------------------------------------------
defvjp(np.stack,   lambda g, ans, xs, axis=0, *args, **kwargs: unstack(np.moveaxis(g, axis, 0), xs))
defvjp(np.array,   lambda g, ans, x, *args, **kwargs: unstack(g, x))
defvjp(np.asarray, lambda g, ans, x, *args, **kwargs: unstack(g, x))

# ---- products ------------------------------------------------------------------------------------
defvjp(np.dot,    lambda g, ans, a, b: dot_vjp_a(g, a, b),    lambda g, ans, a, b: dot_vjp_b(g, a, b))
defvjp(np.matmul, lambda g, ans, a, b: matmul_vjp_a(g, a, b), lambda g, ans, a, b: matmul_vjp_b(g, a, b))

# ---- structure -----------------------------------------------------------------------------------
defvjp(np.transpose, lambda g, ans, x, axes=None: np.transpose(g, None if axes is None else np.argsort(axes)))
defvjp(np.reshape,   lambda g, ans, x, *args, **kwargs: np.reshape(g, np.shape(x)))

# ---- no gradient -----------------------------------------------------------------------------------
def_nondiff(np.sign, np.floor, np.ceil, np.round, np.rint, np.trunc, np.shape, np.ndim, np.size,
            np.zeros_like, np.ones_like, np.empty_like, np.full_like, np.isnan, np.isinf, np.isfinite,
            np.greater, np.greater_equal, np.less, np.less_equal, np.equal, np.not_equal,
            np.argmax, np.argmin, np.argsort)
