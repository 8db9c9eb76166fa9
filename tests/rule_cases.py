"""Example inputs for every registered rule, mirroring ast_ad/rules/: one table per rule module.

Each entry maps a function to a strategy of ``(args, kwargs)``. ``test_rules``
checks that every registered function has an entry here (or is declared
non-differentiable), so no rule goes unchecked.
"""

from __future__ import annotations

import builtins
import math
import operator

import numpy as np
from hypothesis import strategies as st

from tests.strategies import arrays, broadcast_pair, floats, shapes, values


def unary(domain: str = "real", scalar_only: bool = False) -> st.SearchStrategy:
    value = floats(domain) if scalar_only else values(domain)
    return st.tuples(st.tuples(value), st.just({}))


def binary(da: str = "real", db: str = "real", scalar_only: bool = False) -> st.SearchStrategy:
    pair = st.tuples(floats(da), floats(db)) if scalar_only else broadcast_pair(da, db)
    return st.tuples(pair, st.just({}))


def _reduce_case(shape: tuple[int, ...]) -> st.SearchStrategy:
    axes = st.sampled_from([None, *range(-len(shape), len(shape))]) | \
        st.just(tuple(range(len(shape)))) if shape else st.just(None)
    return st.tuples(st.tuples(arrays(shape)), st.fixed_dictionaries({"axis": axes, "keepdims": st.booleans()}))


def reductions() -> st.SearchStrategy:
    return shapes(1, 3).flatmap(_reduce_case)


def _distinct(shape: tuple[int, ...]) -> st.SearchStrategy:
    size = int(np.prod(shape))
    return st.permutations(range(size)).map(lambda p: (np.array(p, dtype=float) * 0.37 - 1.0).reshape(shape))


def untied_reductions() -> st.SearchStrategy:
    """Reductions of arrays with no two entries equal (max and min have kinks at ties)."""
    return reductions().flatmap(lambda case: _distinct(case[0][0].shape).map(lambda x: ((x,), case[1])))


def _matmul_shapes() -> st.SearchStrategy:
    n, k, m = (st.integers(1, 3) for _ in range(3))
    return st.tuples(n, k, m, st.sampled_from(["vv", "mv", "vm", "mm", "bmm"]))


def _matmul_args(spec: tuple) -> st.SearchStrategy:
    n, k, m, kind = spec
    a_shape = {"vv": (k,), "mv": (n, k), "vm": (k,), "mm": (n, k), "bmm": (2, n, k)}[kind]
    b_shape = {"vv": (k,), "mv": (k,), "vm": (k, m), "mm": (k, m), "bmm": (k, m)}[kind]
    return st.tuples(st.tuples(arrays(a_shape), arrays(b_shape)), st.just({}))


def products(allow_batch: bool = True) -> st.SearchStrategy:
    spec = _matmul_shapes().filter(lambda s: allow_batch or s[3] != "bmm")
    return spec.flatmap(_matmul_args)


def dot_with_scalars() -> st.SearchStrategy:
    return products(allow_batch=False) | st.tuples(st.tuples(floats(), arrays((3,))), st.just({}))


def transposes() -> st.SearchStrategy:
    return shapes(1, 3).flatmap(lambda s: st.tuples(
        st.tuples(arrays(s)), st.fixed_dictionaries({"axes": st.permutations(range(len(s))).map(tuple)})))


def reshapes() -> st.SearchStrategy:
    return shapes(1, 3).flatmap(lambda s: st.tuples(st.tuples(arrays(s), st.just((-1,))), st.just({})))


def getitems() -> st.SearchStrategy:
    index = st.sampled_from([0, -1, slice(1, 3), slice(None, None, 2), (0, slice(None)), (Ellipsis, 0),
                             np.array([0, 2, 0])])
    return st.tuples(st.tuples(arrays((4, 3)), index), st.just({}))


def apart(pair: tuple) -> bool:
    """No two broadcast entries tie (max, min and where have kinks at ties)."""
    a, b = np.broadcast_arrays(*pair)
    return bool(np.all(np.abs(a - b) > 1e-3))


def untied() -> st.SearchStrategy:
    return st.tuples(broadcast_pair().filter(apart), st.just({}))


def wheres() -> st.SearchStrategy:
    pairs = broadcast_pair().filter(lambda xy: bool(np.all(np.abs(xy[0] - 0.1) > 1e-3)))
    return pairs.map(lambda xy: ((xy[0] > 0.1, xy[0], xy[1]), {}))


def clips() -> st.SearchStrategy:
    x = values("real", min_dims=1).filter(lambda x: np.all(np.abs(x + 0.5) > 1e-3) and np.all(np.abs(x - 0.7) > 1e-3))
    return st.tuples(st.tuples(x, st.just(-0.5), st.just(0.7)), st.just({}))


def lists_of_arrays() -> st.SearchStrategy:
    """A list of same-shaped arrays (or floats)."""
    return shapes(0, 2).flatmap(lambda s: st.lists(arrays(s) if s else floats(), min_size=1, max_size=4)).map(
        lambda items: ((items,), {}))


def stacks() -> st.SearchStrategy:
    return shapes(1, 2).flatmap(lambda s: st.tuples(
        st.tuples(st.lists(arrays(s), min_size=1, max_size=3)),
        st.fixed_dictionaries({"axis": st.integers(-len(s) - 1, len(s))})))


# ---- mirrors ast_ad/rules/operator.py ------------------------------------------------------------------
OPERATOR = {
    operator.add: binary(), operator.sub: binary(), operator.mul: binary(), operator.truediv: binary("real", "away"),
    operator.pow: binary("pos", "real"), operator.neg: unary(), operator.pos: unary(), operator.abs: unary("away"),
    operator.matmul: products(), operator.getitem: getitems(),
}

# ---- mirrors ast_ad/rules/math.py --------------------------------------------------------------------
MATH = {
    math.sin: unary(scalar_only=True), math.cos: unary(scalar_only=True), math.tan: unary("unit", True),
    math.asin: unary("unit", True), math.acos: unary("unit", True), math.atan: unary(scalar_only=True),
    math.atan2: binary("away", "away", True), math.hypot: binary("away", "real", True),
    math.sinh: unary(scalar_only=True), math.cosh: unary(scalar_only=True), math.tanh: unary(scalar_only=True),
    math.exp: unary(scalar_only=True), math.expm1: unary(scalar_only=True),
    math.log: unary("pos", True) | binary("pos", "away", True).filter(lambda c: c[0][1] > 1.01),
    math.log1p: unary("pos", True), math.log2: unary("pos", True), math.log10: unary("pos", True),
    math.sqrt: unary("pos", True), math.pow: binary("pos", "real", True), math.fabs: unary("away", True),
}

# ---- mirrors ast_ad/rules/builtins.py ------------------------------------------------------------------
BUILTINS = {builtins.float: unary(scalar_only=True), builtins.abs: unary("away"),
            builtins.sum: lists_of_arrays().map(lambda case: ((list(case[0][0]),), {}))}

# ---- mirrors ast_ad/rules/numpy.py ---------------------------------------------------------------------
NUMPY = {
    np.sin: unary(), np.cos: unary(), np.tan: unary("unit"), np.arcsin: unary("unit"), np.arccos: unary("unit"),
    np.arctan: unary(), np.arctan2: binary("away", "away"), np.sinh: unary(), np.cosh: unary(), np.tanh: unary(),
    np.exp: unary(), np.exp2: unary(), np.expm1: unary(), np.log: unary("pos"), np.log2: unary("pos"),
    np.log10: unary("pos"), np.log1p: unary("pos"), np.sqrt: unary("pos"), np.square: unary(),
    np.power: binary("pos", "real"), np.add: binary(), np.subtract: binary(), np.multiply: binary(),
    np.divide: binary("real", "away"), np.negative: unary(), np.positive: unary(), np.reciprocal: unary("away"),
    np.abs: unary("away"), np.maximum: untied(), np.minimum: untied(), np.where: wheres(), np.clip: clips(),
    np.sum: reductions(), np.mean: reductions(), np.dot: dot_with_scalars(), np.matmul: products(),
    np.transpose: transposes(), np.reshape: reshapes(), np.max: untied_reductions(), np.min: untied_reductions(),
    np.stack: stacks(), np.array: lists_of_arrays(), np.asarray: lists_of_arrays(),
}

CASES = {**OPERATOR, **MATH, **BUILTINS, **NUMPY}
