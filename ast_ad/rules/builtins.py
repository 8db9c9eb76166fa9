"""Rules for Python builtins that numeric code calls on differentiated values."""

import builtins

import numpy as np

from ast_ad.registry import def_nondiff, defvjp
from ast_ad.registry import defvjp_elementwise as ew
from ast_ad.runtime import check_in_place, unbroadcast

ew(builtins.float, lambda g, ans, x: g)
ew(builtins.abs,   lambda g, ans, x: g * np.sign(x))
defvjp(builtins.sum, lambda g, ans, xs, start=0: [unbroadcast(g, x) for x in xs], lambda g, ans, xs, start: g)

def_nondiff(check_in_place)  # the guard before an in-place update: no value, no gradient
def_nondiff(builtins.len, builtins.int, builtins.bool, builtins.round, builtins.range,
            builtins.isinstance, builtins.type)
