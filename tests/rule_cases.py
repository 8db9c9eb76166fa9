"""Example inputs for every registered rule, mirroring ast_ad/rules/: one table per rule module.

Each entry maps a function to a strategy of ``(args, kwargs)``. ``test_rules``
checks that every registered function has an entry here (or is declared
non-differentiable), so no rule goes unchecked.
"""

from __future__ import annotations

import builtins
import collections
import math
import operator

import numpy as np
from hypothesis import strategies as st

from ast_ad import runtime
from ast_ad.core import registry
from tests.strategies import arrays, broadcast_pair, floats, shapes, values

# the tables below mirror every rule module, scipy's (registered lazily) included
registry.load_all_rules()
# functions of which differentiated code reads the first part of the result only: the second is
# an error estimate, which has no derivative (``test_rules.observed``)
FIRST_ONLY: set = set()
# the finite differences' step for functions whose answer moves by about 1e-10 however tight their
# tolerances (a fit's optimizer), where 1e-6 would see that noise
STEPS: dict = {}


def unary(domain: str = "real", scalar_only: bool = False) -> st.SearchStrategy:
    value = floats(domain) if scalar_only else values(domain)
    return st.tuples(st.tuples(value), st.just({}))


def binary(da: str = "real", db: str = "real", scalar_only: bool = False) -> st.SearchStrategy:
    pair = st.tuples(floats(da), floats(db)) if scalar_only else broadcast_pair(da, db)
    return st.tuples(pair, st.just({}))


def _reduce_case(shape: tuple[int, ...]) -> st.SearchStrategy:
    axes = (
        st.sampled_from([None, *range(-len(shape), len(shape))])
        | st.just(tuple(range(len(shape))))
        | st.just(tuple(range(1, len(shape))))
        if shape
        else st.just(None)
    )
    return st.tuples(
        st.tuples(arrays(shape)), st.fixed_dictionaries({"axis": axes, "keepdims": st.booleans()})
    )


def reductions() -> st.SearchStrategy:
    return shapes(1, 3).flatmap(_reduce_case)


def _distinct(shape: tuple[int, ...]) -> st.SearchStrategy:
    size = int(np.prod(shape))
    return st.permutations(range(size)).map(
        lambda p: (np.array(p, dtype=float) * 0.37 - 1.0).reshape(shape)
    )


def untied_reductions() -> st.SearchStrategy:
    """Reductions of arrays with no two entries equal (max and min have kinks at ties)."""
    return reductions().flatmap(
        lambda case: _distinct(case[0][0].shape).map(lambda x: ((x,), case[1]))
    )


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
    return shapes(1, 3).flatmap(
        lambda s: st.tuples(
            st.tuples(arrays(s)),
            st.fixed_dictionaries({"axes": st.permutations(range(len(s))).map(tuple)}),
        )
    )


def reshapes() -> st.SearchStrategy:
    return shapes(1, 3).flatmap(
        lambda s: st.tuples(st.tuples(arrays(s), st.just((-1,))), st.just({}))
    )


def getitems() -> st.SearchStrategy:
    index = st.sampled_from(
        [
            0,
            -1,
            slice(1, 3),
            slice(None, None, 2),
            (0, slice(None)),
            (Ellipsis, 0),
            np.array([0, 2, 0]),
        ]
    )
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
    x = values("real", min_dims=1).filter(
        lambda x: np.all(np.abs(x + 0.5) > 1e-3) and np.all(np.abs(x - 0.7) > 1e-3)
    )
    return st.tuples(st.tuples(x, st.just(-0.5), st.just(0.7)), st.just({}))


def lists_of_arrays() -> st.SearchStrategy:
    """A list of same-shaped arrays (or floats)."""
    return (
        shapes(0, 2)
        .flatmap(lambda s: st.lists(arrays(s) if s else floats(), min_size=1, max_size=4))
        .map(lambda items: ((items,), {}))
    )


def choices() -> st.SearchStrategy:
    """min and max: two to four distinct floats, or one list of them."""
    distinct = st.lists(floats(), min_size=2, max_size=4, unique=True).filter(
        lambda xs: min(abs(a - b) for a in xs for b in xs if a is not b) > 1e-3)
    return st.tuples(distinct.map(tuple), st.just({})) | st.tuples(
        distinct.map(lambda xs: (xs,)), st.just({})
    )


Pair = collections.namedtuple("Pair", "w b")


def fields() -> st.SearchStrategy:
    return st.tuples(
        st.tuples(st.builds(Pair, arrays((2,)), floats()), st.sampled_from(["w", "b"])), st.just({})
    )


def stacks() -> st.SearchStrategy:
    return shapes(1, 2).flatmap(lambda s: st.tuples(
        st.tuples(st.lists(arrays(s), min_size=1, max_size=3)),
        st.fixed_dictionaries({"axis": st.integers(-len(s) - 1, len(s))})))


# ---- mirrors ast_ad/rules/operator.py ------------------------------------------------------------
OPERATOR = {
    operator.add: binary(),
    operator.sub: binary(),
    operator.mul: binary(),
    operator.truediv: binary("real", "away"),
    operator.pow: binary("pos", "real"),
    operator.neg: unary(),
    operator.pos: unary(),
    operator.abs: unary("away"),
    operator.matmul: products(),
    operator.getitem: getitems(),
    operator.mod: st.tuples(st.tuples(st.floats(2.2, 2.6), st.floats(1.5, 2.0)), st.just({})),
}

# ---- mirrors ast_ad/rules/math.py ----------------------------------------------------------------
MATH = {
    math.sin: unary(scalar_only=True),
    math.cos: unary(scalar_only=True),
    math.tan: unary("unit", True),
    math.asin: unary("unit", True),
    math.acos: unary("unit", True),
    math.atan: unary(scalar_only=True),
    math.atan2: binary("away", "away", True),
    math.hypot: binary("away", "real", True),
    math.sinh: unary(scalar_only=True),
    math.cosh: unary(scalar_only=True),
    math.tanh: unary(scalar_only=True),
    math.exp: unary(scalar_only=True),
    math.expm1: unary(scalar_only=True),
    math.log: unary("pos", True) | binary("pos", "away", True).filter(lambda c: c[0][1] > 1.01),
    math.log1p: unary("pos", True),
    math.log2: unary("pos", True),
    math.log10: unary("pos", True),
    math.sqrt: unary("pos", True),
    math.pow: binary("pos", "real", True),
    math.fabs: unary("away", True),
    math.fmod: st.tuples(st.tuples(st.floats(2.2, 2.6), st.floats(1.5, 2.0)), st.just({})),
    math.remainder: st.tuples(st.tuples(st.floats(2.2, 2.6), st.floats(1.5, 2.0)), st.just({})),
    math.copysign: binary("away", "away", True),
    math.fsum: st.tuples(st.tuples(st.lists(floats(), min_size=1, max_size=4)), st.just({})),
}

# ---- mirrors ast_ad/rules/builtins.py ------------------------------------------------------------
_SEQUENCES = st.tuples(
    st.tuples(
        st.lists(arrays((2,)), min_size=2, max_size=2)
        | st.lists(floats(), min_size=3, max_size=3)
        | arrays((3,))
        | arrays((2, 3))
    ),
    st.just({}),
)
BUILTINS = {
    builtins.list: _SEQUENCES,
    builtins.tuple: _SEQUENCES,
    builtins.dict: st.tuples(
        st.tuples(st.fixed_dictionaries({"a": arrays((2,)), "b": floats()})), st.just({})
    ),
    builtins.float: unary(scalar_only=True),
    builtins.abs: unary("away"),
    builtins.sum: lists_of_arrays().map(lambda case: ((list(case[0][0]),), {})),
    builtins.pow: binary("pos", "real"),
    builtins.min: choices(),
    builtins.max: choices(),
    builtins.divmod: st.tuples(st.tuples(st.floats(2.2, 2.6), st.floats(1.5, 2.0)), st.just({})),
}

# ---- mirrors ast_ad/rules/numpy.py ---------------------------------------------------------------
NUMPY = {
    np.sin: unary(),
    np.cos: unary(),
    np.tan: unary("unit"),
    np.arcsin: unary("unit"),
    np.arccos: unary("unit"),
    np.arctan: unary(),
    np.arctan2: binary("away", "away"),
    np.sinh: unary(),
    np.cosh: unary(),
    np.tanh: unary(),
    np.exp: unary(),
    np.exp2: unary(),
    np.expm1: unary(),
    np.log: unary("pos"),
    np.log2: unary("pos"),
    np.log10: unary("pos"),
    np.log1p: unary("pos"),
    np.sqrt: unary("pos"),
    np.square: unary(),
    np.power: binary("pos", "real"),
    np.add: binary(),
    np.subtract: binary(),
    np.multiply: binary(),
    np.divide: binary("real", "away"),
    np.negative: unary(),
    np.positive: unary(),
    np.reciprocal: unary("away"),
    np.abs: unary("away"),
    np.maximum: untied(),
    np.minimum: untied(),
    np.where: wheres(),
    np.clip: clips(),
    np.sum: reductions(),
    np.mean: reductions(),
    np.dot: dot_with_scalars(),
    np.matmul: products(),
    np.transpose: transposes(),
    np.reshape: reshapes(),
    np.max: untied_reductions(),
    np.min: untied_reductions(),
    np.stack: stacks(),
    np.array: lists_of_arrays(),
    np.asarray: lists_of_arrays(),
}

CASES = {**OPERATOR, **MATH, **BUILTINS, **NUMPY}


# ---- more of ast_ad/rules/numpy.py ---------------------------------------------------------------
def case(*args, **kwargs) -> st.SearchStrategy:
    """A strategy of (args, kwargs) from strategies or plain values."""
    wrap = [a if isinstance(a, st.SearchStrategy) else st.just(a) for a in args]
    return st.tuples(st.tuples(*wrap), st.fixed_dictionaries(
        {k: v if isinstance(v, st.SearchStrategy) else st.just(v) for k, v in kwargs.items()}))


def of_shape(min_dims: int = 1, max_dims: int = 3, domain: str = "real") -> st.SearchStrategy:
    return shapes(min_dims, max_dims).flatmap(lambda s: arrays(s, domain))


def axis_case(x_strategy: st.SearchStrategy, none: bool = True, **extra) -> st.SearchStrategy:
    def build(x):
        axes = st.sampled_from(([None] if none else []) + list(range(-x.ndim, x.ndim)))
        return case(x, axis=axes, **extra)
    return x_strategy.flatmap(build)


def distinct(min_dims: int = 1, max_dims: int = 3) -> st.SearchStrategy:
    return shapes(min_dims, max_dims).flatmap(_distinct)


def var_like() -> st.SearchStrategy:
    def build(x):
        def fits(c):
            axis, ddof = c[1]["axis"], c[1]["ddof"]
            n = x.size if axis is None else x.shape[axis]
            return n > ddof
        return case(x, axis=st.sampled_from([None, *range(x.ndim)]), ddof=st.sampled_from([0, 1]),
                    keepdims=st.booleans()).filter(fits)
    return distinct(1, 2).flatmap(build)


def averages() -> st.SearchStrategy:
    def build(x):
        pos = arrays(x.shape, "pos")
        along = st.integers(0, x.ndim - 1).flatmap(
            lambda ax: case(x, axis=ax, weights=arrays((x.shape[ax],), "pos"))
        )
        weighted = st.integers(0, x.ndim - 1).flatmap(
            lambda ax: case(x, ax, arrays((x.shape[ax],), "pos"))
        )
        return (
            case(x, axis=None, weights=pos)
            | case(x, axis=None)
            | along
            | case(x, None, pos)
            | weighted
        )

    return of_shape(1, 2).flatmap(build)


def same_shape_pair() -> st.SearchStrategy:
    return shapes(1, 2).flatmap(lambda s: case(arrays(s), arrays(s)))


def inner_pairs() -> st.SearchStrategy:
    return st.tuples(st.integers(1, 3), shapes(0, 1), shapes(0, 1)).flatmap(
        lambda t: case(arrays(t[1] + (t[0],)), arrays(t[2] + (t[0],))))


EINSUM = [
    "ij,jk->ik",
    "ii->",
    "ij->ji",
    "i,i->",
    "...j,j->...",
    "bij,bjk->bik",
    "ij,ij",
    "ii->i",
    "i,j->ij",
]
EINSUM_SHAPES = {
    "ij,jk->ik": [(2, 3), (3, 2)],
    "ii->": [(3, 3)],
    "ij->ji": [(2, 3)],
    "i,i->": [(3,), (3,)],
    "...j,j->...": [(2, 2, 3), (3,)],
    "bij,bjk->bik": [(2, 2, 3), (2, 3, 2)],
    "ij,ij": [(2, 3), (2, 3)],
    "ii->i": [(3, 3)],
    "i,j->ij": [(2,), (3,)],
}


def einsums() -> st.SearchStrategy:
    return st.sampled_from(EINSUM).flatmap(
        lambda spec: case(spec, *[arrays(s) for s in EINSUM_SHAPES[spec]])
    )


def tensordots() -> st.SearchStrategy:
    return (
        case(arrays((2, 3, 4)), arrays((3, 4, 2)), axes=2)
        | case(arrays((2, 3)), arrays((3, 4)), axes=st.just(([1], [0])))
        | case(arrays((2, 3)), arrays((4,)), axes=0)
    )


def krons() -> st.SearchStrategy:
    return st.sampled_from([((2, 3), (2, 2)), ((3,), (2,)), ((2, 2), (3,))]).flatmap(
        lambda s: case(arrays(s[0]), arrays(s[1])))


def diagonals(kind: str) -> st.SearchStrategy:
    matrix = case(arrays((3, 4)), offset=st.integers(-1, 1))
    stack = case(arrays((2, 3, 3)), offset=0, axis1=1, axis2=2)
    return matrix | stack


def diags() -> st.SearchStrategy:
    return case(arrays((3,)), k=st.integers(-1, 1)) | case(arrays((3, 4)), k=st.integers(-1, 1))


def triangles() -> st.SearchStrategy:
    return case(arrays((3, 4)), k=st.integers(-1, 1))


def one(min_dims: int = 1) -> st.SearchStrategy:
    return case(of_shape(min_dims))


def squeezable() -> st.SearchStrategy:
    return case(arrays((2, 1, 3))) | case(arrays((1, 3)), axis=0)


def swaps() -> st.SearchStrategy:
    return of_shape(2, 3).flatmap(
        lambda x: case(x, st.integers(0, x.ndim - 1), st.integers(0, x.ndim - 1))
    )


def broadcasts() -> st.SearchStrategy:
    return shapes(0, 2).flatmap(lambda s: case(arrays(s), (2,) + s))


def flips() -> st.SearchStrategy:
    return axis_case(of_shape(1, 3))


def rolls() -> st.SearchStrategy:
    return of_shape(1, 2).flatmap(
        lambda x: case(x, st.integers(-3, 3), axis=st.sampled_from([None, 0]))
    )


def tiles() -> st.SearchStrategy:
    return of_shape(1, 2).flatmap(lambda x: case(x, st.sampled_from([2, (2, 1), (1, 2, 2)])))


def repeats() -> st.SearchStrategy:
    return of_shape(1, 2).flatmap(
        lambda x: (
            case(x, 2, axis=None)
            | case(x, 3, axis=0)
            | case(
                x, st.just(np.array([1, 0, 2][: x.shape[0]] + [1] * max(0, x.shape[0] - 3))), axis=0
            )
        )
    )


def pads() -> st.SearchStrategy:
    return of_shape(1, 2).flatmap(lambda x: case(x, st.sampled_from([1, 2, ((1, 2),) * x.ndim])))


def sorts() -> st.SearchStrategy:
    return distinct(1, 2).flatmap(lambda x: case(x, axis=st.sampled_from([None, -1, 0])))


def takes() -> st.SearchStrategy:
    return case(arrays((4, 3)), st.just(np.array([0, 2, 2])), axis=st.sampled_from([None, 0, 1]))


def concatenates() -> st.SearchStrategy:
    return case(
        st.lists(arrays((2, 3)), min_size=1, max_size=3), axis=st.sampled_from([0, 1, None])
    )


def stacks_of(shape: tuple[int, ...]) -> st.SearchStrategy:
    return case(st.lists(arrays(shape), min_size=1, max_size=3))


def _shared_plan(y: np.ndarray, which: str) -> tuple:
    """A plan of ``runtime.shared_family`` over views of ``y`` (six entries), and the old objects
    its variables held (fresh copies: the rules move entries by position, not by memory)."""
    parts = [y[:3], y[3:]]
    if which == "slot":  # a slot of a list of slices written; y the root
        plan = runtime.shared_family(parts[1], (y, parts), "rule_cases", "y, parts")
        return plan, (y.copy(), [p.copy() for p in parts])
    if which == "self":  # y itself written; a strided view of it another variable holds
        plan = runtime.shared_family(y, (y[::2],), "rule_cases", "w")
        return plan, (y[::2].copy(),)
    plan = runtime.shared_family(parts[0], (np.zeros(2),), "rule_cases", "z")  # apart
    return plan, (np.zeros(2),)


def memory_roots() -> st.SearchStrategy:
    def build(y, which):
        plan, olds = _shared_plan(y, which)
        new = y[3:] * 2.0 if which == "slot" else y * 2.0 if which == "self" else y[:3] * 2.0
        family = olds[:1]
        return case(plan, new, family)
    return st.tuples(arrays((6,)), st.sampled_from(["slot", "self"])).flatmap(
        lambda t: build(*t)
    )


def memory_views() -> st.SearchStrategy:
    def build(y, which, key):
        plan, olds = _shared_plan(y, which)
        root = 0.0 if which == "apart" else arrays((6,))
        return case(plan, key, root, olds[key])
    choices = st.sampled_from([("slot", 0), ("slot", 1), ("self", 0), ("apart", 0)])
    return st.tuples(arrays((6,)), choices).flatmap(lambda t: build(t[0], *t[1]))


def memory_helpers(name: str) -> st.SearchStrategy:
    """Cases of the adjoint and tangent helpers of ``runtime.shared`` (linear in their first
    argument, shaped as the rule that calls them shapes it)."""
    def build(y, which, key):
        plan, olds = _shared_plan(y, which)
        n_new = 3 if which in ("slot", "apart") else 6
        root_like = 0.0 if which == "apart" else arrays((6,))
        old = olds[key]
        like_old = (
            st.tuples(arrays((3,)), arrays((3,))).map(list) if isinstance(old, list)
            else arrays(np.shape(old))
        )
        return {
            "memory_root_vjp_new": case(root_like, plan, arrays((n_new,))),
            "memory_root_vjp_family": case(root_like, plan, olds[:1]),
            "memory_root_jvp_new": case(arrays((n_new,)), plan, root_like),
            "memory_root_jvp_family": case(st.tuples(arrays(np.shape(olds[0]))), plan,
                                           arrays((n_new,))),
            "memory_view_vjp_root": case(like_old, plan, key, arrays((6,))),
            "memory_view_vjp_old": case(like_old, plan, key, old),
            "memory_view_jvp_root": case(root_like, plan, key, old),
        }[name]
    choices = st.sampled_from([("slot", 0), ("slot", 1), ("self", 0), ("apart", 0)])
    if name.startswith("memory_root"):
        choices = st.sampled_from([("slot", 0), ("self", 0), ("apart", 0)])
    return st.tuples(arrays((6,)), choices).flatmap(lambda t: build(t[0], *t[1]))


def splits() -> st.SearchStrategy:
    return case(arrays((4, 2)), st.sampled_from([2, [1, 3]]), axis=0) | case(
        arrays((2, 4)), 2, axis=1
    )


def array_splits() -> st.SearchStrategy:
    return case(arrays((5,)), 2) | case(arrays((3, 4)), 3, axis=1)


def selects() -> st.SearchStrategy:
    return st.tuples(arrays((4,)), arrays((4,)), arrays((4,)), arrays((4,))).filter(
        lambda t: np.all(np.abs(t[0]) > 1e-3) and np.all(np.abs(t[0] - 0.5) > 1e-3)).map(
        lambda t: (([t[0] > 0.5, t[0] < 0.0], [t[1], t[2]], t[3]), {}))


def assigns() -> st.SearchStrategy:
    def build(index):
        part = np.zeros((4, 3))[index]
        return case(arrays((4, 3)), st.just(index), arrays(np.shape(part)))
    return st.sampled_from([0, -1, (1, 2), (slice(None), 0), np.array([0, 2])]).flatmap(build)


def remainders() -> st.SearchStrategy:
    return case(st.floats(2.2, 2.6), st.floats(1.5, 2.0))


MORE_NUMPY = {
    np.arcsinh: unary(),
    np.arccosh: case(st.floats(1.2, 3.0)),
    np.arctanh: unary("unit"),
    np.logaddexp: binary(),
    np.logaddexp2: binary(),
    np.hypot: binary("away", "away"),
    np.sinc: unary(),
    np.deg2rad: unary(),
    np.radians: unary(),
    np.rad2deg: unary(),
    np.degrees: unary(),
    np.fmax: untied(),
    np.fmin: untied(),
    np.float_power: binary("pos", "real"),
    np.cbrt: unary("away"),
    np.fabs: unary("away"),
    np.copysign: binary("away", "away"),
    np.remainder: remainders(),
    np.fmod: remainders(),
    np.amax: untied_reductions(),
    np.amin: untied_reductions(),
    # (entries near one, zeros kept: a product of 27 twos makes central differences' third-order
    # error, at a double zero, larger than the tolerance)
    np.prod: reductions().map(
        lambda c: ((np.where(c[0][0] == 0.0, 0.0, np.tanh(c[0][0]) * 0.5 + 1.0),), c[1])
    ),
    np.var: var_like(),
    np.std: var_like(),
    np.cumsum: axis_case(of_shape(1, 2)),
    np.cumprod: axis_case(of_shape(1, 2)),
    np.average: averages(),
    np.nansum: reductions(),
    np.vdot: same_shape_pair(),
    np.inner: inner_pairs(),
    np.outer: case(of_shape(1, 2), of_shape(1, 2)),
    np.tensordot: tensordots(),
    np.einsum: einsums(),
    np.kron: krons(),
    np.trace: diagonals("trace"),
    np.diagonal: diagonals("diagonal"),
    np.diag: diags(),
    np.tril: triangles(),
    np.triu: triangles(),
    np.ravel: one(),
    np.squeeze: squeezable(),
    np.expand_dims: of_shape(1, 2).flatmap(lambda x: case(x, st.integers(0, x.ndim))),
    np.atleast_1d: case(of_shape(0, 2)),
    np.atleast_2d: case(of_shape(0, 2)),
    np.atleast_3d: case(of_shape(0, 3)),
    np.swapaxes: swaps(),
    np.moveaxis: swaps(),
    np.broadcast_to: broadcasts(),
    np.flip: flips(),
    np.fliplr: case(arrays((2, 3))),
    np.flipud: case(of_shape(1, 2)),
    np.roll: rolls(),
    np.tile: tiles(),
    np.repeat: repeats(),
    np.pad: pads(),
    np.sort: sorts(),
    np.take: takes(),
    np.take_along_axis: case(arrays((2, 3)), np.array([[2, 0, 0, 1], [1, 1, 2, 0]]), 1)
    | case(arrays((1, 2)), np.array([[0, 0], [0, 0], [0, 0]]), 0)
    | case(arrays((4,)), np.array([3, 0, 3]), None)
    | case(arrays((3, 2)), np.argsort(np.array([[3.0, 1.0], [0.5, 2.0], [1.5, 0.2]]), axis=0), 0),
    np.copy: one(),
    np.concatenate: concatenates(),
    np.hstack: stacks_of((2, 3)) | stacks_of((3,)),
    np.vstack: stacks_of((3,)),
    np.split: splits(),
    runtime.memory_root: memory_roots(),
    runtime.memory_view: memory_views(),
    **{getattr(runtime, name): memory_helpers(name) for name in (
        "memory_root_vjp_new", "memory_root_vjp_family", "memory_root_jvp_new",
        "memory_root_jvp_family", "memory_view_vjp_root", "memory_view_vjp_old",
        "memory_view_jvp_root",
    )},
    np.unstack: case(arrays((3, 2))) | case(arrays((2, 3)), axis=1),
    np.array_split: array_splits(),
    np.select: selects(),
    np.real: one(),
}


def _assign_item_cases():
    from ast_ad.runtime import array_view, assign_item, astype, astype_view, copy_of

    return {
        assign_item: assigns(),
        astype: case(of_shape(1, 2), np.float64),
        copy_of: case(of_shape(1, 2)),
        astype_view: case(of_shape(1, 2), np.float64),
        array_view: case(of_shape(1, 2)),  # (copy=None: the array itself, for floats)
    }


MORE_NUMPY.update(_assign_item_cases())


# ---- mirrors ast_ad/rules/linalg.py --------------------------------------------------------------
def _samples(shape, full: bool = False) -> st.SearchStrategy:
    """Increasing sample points (unevenly spaced) along the last axis: ``n`` of them, or an array of
    ``shape`` where ``full``."""
    size = shape if full else (shape,)
    return arrays(size, "pos").map(lambda w: np.cumsum(np.abs(w) + 0.1, axis=-1))


def square(n: int = 3, stack: bool = False) -> st.SearchStrategy:
    shape = (2, n, n) if stack else (n, n)
    # strictly diagonally dominant, so never singular (a + 3 I alone can be: [[2, -1, -1], [-1, 2,
    # -1], ...])
    return arrays(shape).map(
        lambda a: a + (np.sum(np.abs(a), axis=-1, keepdims=True) + 1.0) * np.eye(n)
    )


def spd(n: int = 3) -> st.SearchStrategy:
    return arrays((n, n)).map(lambda a: a @ a.T + np.eye(n))


def distinct_spectrum(n: int = 3) -> st.SearchStrategy:
    return st.permutations(range(n)).map(lambda p: np.diag(np.array(p, dtype=float) + 1.0)).flatmap(
        lambda d: arrays((n, n)).map(lambda m: _rotate(d, m)))


def _rotate(d: np.ndarray, m: np.ndarray) -> np.ndarray:
    q, _ = np.linalg.qr(m + 3.0 * np.eye(len(d)))
    return q @ d @ q.T


def tall(m: int = 4, n: int = 3) -> st.SearchStrategy:
    return arrays((m, n)).map(lambda a: a + np.vstack([3.0 * np.eye(n), np.zeros((m - n, n))]))


def svd_input() -> st.SearchStrategy:
    def spread(a: np.ndarray) -> np.ndarray:
        u, _, vt = np.linalg.svd(a, full_matrices=False)
        return u @ np.diag([3.0, 2.0, 1.0]) @ vt
    return tall().map(spread)


def norms() -> st.SearchStrategy:
    vector = distinct(1, 1).flatmap(lambda x: case(x, ord=st.sampled_from([None, 1, 2, np.inf, 3])))
    # entries away from zero: |a_ij| has a kink there, which the 1- and inf-norms of a matrix feel
    matrix = arrays((3, 3), "away").map(lambda a: a + np.diag([3.0, 1.5, 0.5])).flatmap(
        lambda x: case(x, ord=st.sampled_from([None, "fro", "nuc", 1, -1, np.inf, -np.inf, 2, -2])))
    along = arrays((2, 3), "away").flatmap(
        lambda x: case(x, axis=st.sampled_from([0, 1]), keepdims=st.booleans())
    )
    return vector | matrix | along


LINALG = {
    np.linalg.inv: case(square() | square(stack=True)),
    np.linalg.det: case(square() | square(stack=True)),
    np.linalg.slogdet: case(square()),
    np.linalg.solve: case(square(), arrays((3,))) | case(square(), arrays((3, 2))),
    np.linalg.cholesky: case(spd()),
    np.linalg.eigh: case(distinct_spectrum()),
    np.linalg.svd: case(svd_input(), full_matrices=False) | case(svd_input(), compute_uv=False),
    np.linalg.qr: case(tall() | square()),
    np.linalg.pinv: case(tall()),
    np.linalg.matrix_power: case(square(), st.integers(0, 3)),
    np.linalg.norm: norms(),
}


# ---- mirrors ast_ad/rules/scipy.py ---------------------------------------------------------------
def _scipy_cases() -> dict:
    try:
        import scipy.special as sp
    except ImportError:  # pragma: no cover
        return {}
    return {sp.expit: unary(), sp.logit: unary("unit").map(lambda c: ((c[0][0] * 0.5 + 0.5,), {})),
            sp.erf: unary(), sp.erfc: unary(), sp.gammaln: unary("pos"), sp.digamma: unary("pos"),
            sp.xlogy: binary("pos", "pos"), sp.logsumexp: reductions(),
            sp.softmax: axis_case(of_shape(1, 2)), sp.log_softmax: axis_case(of_shape(1, 2))}


# ---- mirrors ast_ad/api/solvers.py (scipy's solvers, by the implicit function theorem) ----------
def _solver_cases() -> dict:
    """Each solver on a problem with one well-conditioned solution, solved to a tolerance far
    below the finite differences' step (a solve to 1e-8 would move by as much as the step)."""
    try:
        import scipy.optimize as so
    except ImportError:  # pragma: no cover
        return {}
    from tests import solver_functions as sf

    theta = st.floats(-3.0, 3.0)
    bracketed = case(st.just(sf.cubic), st.just(-10.0), st.just(10.0), st.tuples(theta))
    vector = arrays((2,), "real")
    import scipy.integrate as si

    FIRST_ONLY.add(si.quad)
    FIRST_ONLY.add(so.curve_fit)  # (popt, pcov): the covariance has no derivative followed
    STEPS.update({so.least_squares: 1e-3, so.curve_fit: 1e-3, so.minimize_scalar: 1e-3})
    fit = dict(ftol=st.just(1e-15), xtol=st.just(1e-15), gtol=st.just(1e-15))
    integrated = case(st.just(sf.bump), st.floats(-1.0, 0.5), st.floats(0.6, 2.0),
                      st.tuples(st.floats(0.1, 2.0), arrays((2,), "real")))
    ode = case(st.just(sf.decay), st.just((0.0, 0.8)), arrays((2,), "pos").map(lambda y: y * 0.2),
               st.just("RK45"), st.just(sf.TIMES), st.just(False), st.just(None), st.just(False),
               st.tuples(st.floats(0.3, 2.0), st.floats(-1.0, 1.0)), rtol=st.just(1e-11),
               atol=st.just(1e-12))
    return {
        so.least_squares: case(st.just(sf.residuals), st.just(np.array([1.0, 1.0])),
                               args=st.tuples(arrays((9,), "real").map(
                                   lambda d: 1.5 * np.exp(-0.7 * sf.GRID) + 0.02 * d),
                                   st.floats(0.5, 2.0)), **fit),
        so.curve_fit: case(st.just(sf.decaying), st.just(sf.GRID),
                           arrays((9,), "real").map(
                               lambda d: 1.5 * np.exp(-0.7 * sf.GRID) + 0.02 * d),
                           st.just([1.0, 1.0]),
                           arrays((9,), "pos").map(lambda s: 0.5 + 0.1 * s), **fit),
        so.minimize_scalar: case(st.just(sf.scalar_bowl), st.just(None), st.just(None),
                                 st.tuples(st.floats(-1.0, 1.0), st.floats(0.5, 2.0)),
                                 tol=st.just(1e-12)),
        si.quad: integrated,
        si.solve_ivp: ode,
        so.brentq: bracketed, so.brenth: bracketed, so.bisect: bracketed, so.ridder: bracketed,
        so.newton: case(st.just(sf.cubic), st.just(1.0), st.just(None), st.tuples(theta)),
        so.root_scalar: case(st.just(sf.cubic), st.tuples(theta), bracket=st.just([-10.0, 10.0]),
                             xtol=st.just(1e-14)),
        so.fsolve: case(st.just(sf.pair_apart), st.just(np.ones(2)), st.tuples(theta, theta),
                        xtol=st.just(1e-14)),
        so.root: case(st.just(sf.pair), st.just(np.zeros(2)), st.tuples(vector),
                      tol=st.just(1e-14)),
        so.minimize: case(st.just(sf.weighted_bowl), st.just(np.zeros(2)),
                          st.tuples(vector, st.floats(0.5, 2.0)),
                          jac=st.just(sf.weighted_bowl_gradient),
                          hess=st.just(sf.weighted_bowl_hessian), method=st.just("trust-exact"),
                          tol=st.just(1e-14)),
    }


# ---- mirrors ast_ad/rules/scipy_linalg.py --------------------------------------------------------
def _scipy_linalg_cases() -> dict:
    try:
        import scipy.integrate as si
        import scipy.linalg as sl
    except ImportError:  # pragma: no cover
        return {}
    rhs = arrays((3,)) | arrays((3, 2))
    general = case(square(), rhs, assume_a=st.sampled_from([None, "gen"]),
                   transposed=st.booleans())
    symmetric = case(spd(), rhs, lower=st.booleans(), assume_a=st.sampled_from(["sym", "pos"]))
    triangular = case(square(), rhs, trans=st.sampled_from([0, 1, "T"]), lower=st.booleans(),
                      unit_diagonal=st.booleans())
    return {
        sl.solve: general | symmetric | case(square(), rhs),
        sl.solve_triangular: triangular | case(square(), rhs),
        si.simpson: st.integers(2, 6).flatmap(
            lambda n: case(arrays((n,)), dx=st.floats(0.1, 2.0)) | case(arrays((n,)), _samples(n))
            | case(arrays((2, n)), x=_samples(n), axis=st.just(-1))
            | case(arrays((n, 2)), x=_samples(n), axis=st.just(0))),
        si.trapezoid: st.integers(2, 6).flatmap(
            lambda n: case(arrays((n,)), x=_samples(n))
            | case(arrays((2, n)), dx=st.floats(0.1, 2))),
        sl.cho_factor: case(spd(), lower=st.booleans()),
        sl.cho_solve: st.tuples(spd(), st.booleans(), rhs).map(
            lambda t: (((sl.cho_factor(t[0], lower=t[1])[0], t[1]), t[2]), {})),
        # (rows out of order: the factorization pivots)
        sl.lu_factor: case(square().map(lambda a: a[[2, 0, 1]])),
        sl.lu_solve: st.tuples(square().map(lambda a: a[[1, 2, 0]]), rhs,
                               st.sampled_from([0, 1])).map(
            lambda t: ((sl.lu_factor(t[0]), t[1]), {"trans": t[2]})),
        sl.expm: case(arrays((3, 3)).map(lambda a: 0.2 * a))
        | case(square(2, stack=True).map(lambda a: 0.1 * a)),
    }


# ---- mirrors ast_ad/rules/scipy_sparse.py --------------------------------------------------------
def _sparse_cases() -> dict:
    try:
        import scipy.sparse as ss
        import scipy.sparse.linalg as ssl
    except ImportError:  # pragma: no cover
        return {}
    # a tridiagonal pattern of four rows, compressed (one entry stored twice: scipy adds it) or as
    # coordinates
    indices, indptr = np.array([0, 1, 0, 1, 2, 1, 2, 3, 2, 3, 3]), np.array([0, 2, 5, 8, 11])
    rows, cols = np.array([0, 0, 1, 1, 1, 2, 2, 2, 3, 3]), np.array([0, 1, 0, 1, 2, 1, 2, 3, 2, 3])

    def compressed(kind):
        return case(st.tuples(arrays((11,)), st.just(indices), st.just(indptr)),
                    shape=st.just((4, 4)))

    coordinates = case(st.tuples(arrays((10,)), st.just((rows, cols))), shape=st.just((4, 4)))
    dominant = arrays((10,)).map(lambda d: d + np.where(rows == cols, 40.0, 0.0))
    return {
        ss.csr_matrix: compressed(ss.csr_matrix) | coordinates,
        ss.csr_array: compressed(ss.csr_array) | coordinates,
        ss.csc_matrix: compressed(ss.csc_matrix) | coordinates,
        ss.csc_array: compressed(ss.csc_array) | coordinates,
        ssl.spsolve: st.tuples(dominant, arrays((4,))).map(
            lambda t: ((ss.csc_matrix((t[0], (rows, cols)), shape=(4, 4)), t[1]), {})),
    }


CASES.update(MORE_NUMPY)
CASES.update(LINALG)
CASES.update(_sparse_cases())
CASES.update(_scipy_cases())
CASES.update(_solver_cases())
CASES.update(_scipy_linalg_cases())


# ---- the last additions to ast_ad/rules/numpy.py, linalg.py and scipy.py -------------------------
def _more() -> dict:
    ranks = of_shape(2, 3)
    extra = {
        np.diff: axis_case(of_shape(1, 2), none=False, n=st.integers(1, 2)).filter(
            lambda c: c[0][0].shape[c[1]["axis"]] > c[1]["n"]
        ),
        np.cross: case(arrays((3,)), arrays((3,))) | case(arrays((2, 3)), arrays((3,))),
        np.rot90: case(arrays((2, 3)), k=st.integers(-2, 3)),
        np.rollaxis: ranks.flatmap(
            lambda x: case(x, st.integers(0, x.ndim - 1), start=st.integers(0, x.ndim))
        ),
        np.hsplit: case(arrays((2, 4)), 2) | case(arrays((4,)), 2),
        np.vsplit: case(arrays((4, 2)), 2),
        np.dsplit: case(arrays((1, 2, 4)), 2),
        np.dstack: stacks_of((2, 3)) | stacks_of((3,)),
        np.column_stack: stacks_of((3,)) | stacks_of((3, 2)),
        np.nan_to_num: one(),
        np.nanmean: reductions(),
        np.nanmax: untied_reductions(),
        np.nanmin: untied_reductions(),
        np.nancumsum: axis_case(of_shape(1, 2)),
        np.ptp: distinct(1, 2).flatmap(
            lambda x: case(x, axis=st.sampled_from([None, *range(x.ndim)]))
        ),
        np.trapezoid: of_shape(1, 2)
        .filter(lambda x: x.shape[-1] > 1)
        .flatmap(lambda x: case(x, dx=st.floats(0.1, 2)) | case(x, x=_samples(x.shape[-1]))
                 | case(x, _samples(x.shape[-1])) | case(x, x=_samples(x.shape, full=True))),
        np.convolve: case(
            arrays((4,)), arrays((3,)), mode=st.sampled_from(["full", "same", "valid"])
        )
        | case(arrays((2,)), arrays((5,)), mode=st.sampled_from(["full", "same", "valid"])),
        np.correlate: case(
            arrays((5,)), arrays((3,)), mode=st.sampled_from(["full", "same", "valid"])
        ),
        np.polyval: case(arrays((4,)), of_shape(0, 1)),
        np.linspace: case(floats(), floats(), num=st.integers(2, 5)),
        np.full: case((2, 3), floats()),
        np.matrix_transpose: case(of_shape(2, 3)),
        np.full_like: case(arrays((2, 3)), floats()),
        np.float64: case(floats()),
        runtime.field: fields(),
        runtime.T: case(of_shape(2, 3)),
        runtime.concat: case(
            st.lists(floats(), min_size=1, max_size=3), st.lists(floats(), min_size=1, max_size=3)
        ),
        runtime.repeat_seq: case(st.lists(floats(), min_size=1, max_size=3), st.integers(1, 3)),
        runtime.add_at: case(arrays((4,)), st.just(np.array([0, 2, 0])), arrays((3,))),
        runtime.copied: case(arrays((2, 3)), arrays((3,))),
        runtime.sorted_by: st.permutations([0.3, -1.1, 0.8, 1.7]).flatmap(
            lambda xs: case(list(xs), [-x for x in xs], st.booleans())
        ),
        runtime.list_item: case(
            st.lists(floats(), min_size=3, max_size=3), st.sampled_from([0, 1, -1]), 3
        ),
        runtime.unreshaped: case(arrays((2, 3)), arrays((6,))) | case(arrays((3,)), arrays((3, 1))),
        runtime.untransposed: case(arrays((3, 2))) | case(arrays((2, 3, 4)), (2, 0, 1)),
        runtime.unrotated: case(arrays((3, 2))) | case(arrays((2, 3, 4)), 3, (1, 2)),
        runtime.replaced: case(
            st.lists(arrays((2,)), min_size=3, max_size=3), st.just((0, 2)), arrays((2,))
        )
        | case(st.lists(floats(), min_size=2, max_size=2), st.just((1,)), floats()),
        # (a gradient lowered in place, as ``grad`` returns it: of a float or a float64 array)
        runtime.gradient_like: case(arrays((3,)), arrays((3,))) | case(floats(), floats())
        | case(floats(), arrays((2,))),
        runtime.gradients_like: case(st.tuples(arrays((2,)), floats()),
                                     st.tuples(arrays((2,)), floats())),
        # (``xs[k] += v``: the new value has the array's shape, or numpy raises)
        runtime.augmented: case(arrays((3,)), arrays((3,)))
        | case(arrays((2, 3)), arrays((2, 3)))
        | case(floats(), floats()),
        # (``y op= v``: the new value in the array's shape; a number rebound)
        runtime.augmented_value: case(arrays((3,)), arrays((3,)))
        | case(arrays((2, 3)), floats())
        | case(floats(), floats()),
        runtime.augmented_vjp: case(arrays((2, 3)), arrays((2, 3)), arrays((2, 3)), arrays((2, 3)))
        | case(floats(), floats(), floats(), floats()),
        # (a value's tangent written into floats, and into integers, which truncate it)
        runtime.written_tangent: case(arrays((3,)), arrays((3,)))
        | case(floats(), arrays((2,)))
        | case(arrays((2,)), st.just(np.array([1, 2, 3]))),
        runtime.chosen: case(st.just(np.array([True, False, True])), arrays((3,)), st.booleans())
        | case(st.just(np.array([[True], [False]])), arrays((3,)), st.booleans()),
        np.vecdot: same_shape_pair(),
        np.cumulative_sum: axis_case(of_shape(1, 1)),
        np.linalg.outer: case(arrays((3,)), arrays((2,))),
        np.linalg.trace: case(arrays((2, 3, 3))),
        np.linalg.diagonal: case(arrays((2, 3, 3)), offset=st.integers(-1, 1)),
        np.linalg.matmul: products(),
        np.linalg.matrix_transpose: case(of_shape(2, 3)),
        np.linalg.vecdot: same_shape_pair(),
        np.linalg.svdvals: case(svd_input()),
        np.linalg.eigvalsh: case(distinct_spectrum()),
        np.linalg.multi_dot: case(st.tuples(arrays((3,)), arrays((3, 2)), arrays((2, 4))).map(list))
        | case(st.tuples(arrays((2, 3)), arrays((3, 3)), arrays((3, 2)), arrays((2,))).map(list)),
        np.linalg.cross: case(arrays((3,)), arrays((3,))),
        np.linalg.vector_norm: distinct(1, 2).flatmap(
            lambda x: case(x, ord=st.sampled_from([2, 1, 3]))
        ),
        np.linalg.matrix_norm: case(
            arrays((3, 3)).map(lambda a: a + np.diag([3.0, 1.5, 0.5])),
            ord=st.sampled_from(["fro", "nuc"]),
        ),
    }
    try:
        import scipy.special as sp
    except ImportError:  # pragma: no cover
        return extra
    orders = st.sampled_from([0, 1, 2])
    extra.update(
        {
            sp.gamma: unary("pos"),
            sp.rgamma: unary("pos"),
            sp.beta: binary("pos", "pos"),
            sp.betaln: binary("pos", "pos"),
            sp.polygamma: case(orders, floats("pos")),
            sp.zeta: case(st.sampled_from([2.0, 3.0, 4.5]), floats("pos")),
            sp.erfinv: unary("unit"),
            sp.erfcinv: case(st.floats(0.2, 1.8)),
            sp.erfcx: unary(),
            sp.ndtr: unary(),
            sp.log_ndtr: unary(),
            sp.ndtri: case(st.floats(0.05, 0.95)),
            sp.dawsn: unary(),
            sp.i0: unary(),
            sp.i1: unary(),
            sp.j0: unary(),
            sp.j1: unary(),
            sp.y0: unary("pos"),
            sp.y1: unary("pos"),
            sp.iv: case(orders, floats("away")),
            sp.ive: case(orders, floats("away")),
            sp.jv: case(orders, floats()),
            sp.yv: case(orders, floats("pos")),
            sp.kv: case(orders, floats("pos")),
            sp.yn: case(orders, floats("pos")),
            sp.ivp: case(orders, floats("away")),
            sp.jvp: case(orders, floats()),
            sp.yvp: case(orders, floats("pos")),
            sp.kvp: case(orders, floats("pos")),
            sp.entr: unary("pos"),
            sp.rel_entr: binary("pos", "pos"),
            sp.xlog1py: binary("pos", "pos"),
            sp.expm1: unary(),
            sp.log1p: unary("pos"),
            sp.sindg: unary(),
            sp.cosdg: unary(),
        }
    )
    return extra


CASES.update(_more())


# ---- mirrors ast_ad/rules/runtime.py: the helpers generated code calls (forward rules only) ------
def _product_adjoint(fn, shape_of_g) -> st.SearchStrategy:
    """``fn(g, a, b)`` for the adjoint helpers of a product: ``g`` shaped like ``a @ b``."""
    def build(case_):
        (a, b), _ = case_
        return case(arrays(shape_of_g(a, b)), a, b)
    return products(allow_batch=False).flatmap(build)


def _terms(fixed_first: bool, rank: int) -> st.SearchStrategy:
    """A loop's ``(g, other)`` pairs and the matrix they multiply every step
    (``summed_products``)."""
    n, m = 2, 3
    if rank == 1:
        pair = (
            st.tuples(arrays((n,)), arrays((m,)))
            if fixed_first
            else st.tuples(arrays((n,)), arrays((m,)))
        )
        fixed = np.zeros((n, m)) if fixed_first else np.zeros((m, n))
    else:
        pair = (
            st.tuples(arrays((n, 2)), arrays((m, 2)))
            if fixed_first
            else st.tuples(arrays((2, n)), arrays((2, m)))
        )
        fixed = np.zeros((n, m)) if fixed_first else np.zeros((m, n))
    return case(st.lists(pair, min_size=1, max_size=3), fixed)


def _steps(fixed_first: bool, rank: int) -> st.SearchStrategy:
    """The same as ``_terms``, kept by columns: the steps' ``g`` stacked (``stacked_steps``), the
    other operands' list, the matrix (``summed_steps``)."""
    return _terms(fixed_first, rank).map(
        lambda made: (
            (
                runtime.stacked_steps([g for g, _ in made[0][0]]),
                [other for _, other in made[0][0]],
                made[0][1],
            ),
            {},
        )
    )


def _taken(fixed_first: bool) -> st.SearchStrategy:
    """``_steps`` of vectors with the other operands' rows taken at once, a matrix
    (``rows_of``)."""
    return _steps(fixed_first, 1).map(
        lambda made: ((made[0][0], np.array(made[0][1]), made[0][2]), {}))


def _helpers() -> dict:
    rt = runtime
    lists3 = st.lists(floats(), min_size=3, max_size=3)
    distinct3 = st.permutations([0.3, -1.1, 0.8]).map(np.array)
    return {
        rt.unbroadcast: case(arrays((2, 3)), arrays((3,))) | case(arrays((2, 3)), arrays((2, 1))),
        rt.unbroadcast_to: case(arrays((2, 3)), (3,))
        | case(arrays((2, 3)), (2, 1))
        | case(arrays((3,)), (3,)),
        rt.expand_reduced: case(arrays((3,)), arrays((2, 3)), 0, False)
        | case(floats(), arrays((2, 3)), None, False),
        rt.summed_to: case(arrays((2, 3)), arrays((3,)), 0, False)
        | case(arrays((2, 3)), floats(), None, False),
        rt.getitem_vjp: case(arrays((2,)), arrays((4,)), np.array([0, 2]))
        | case(arrays((3,)), arrays((2, 3)), 1),
        rt.assign_item_vjp_x: case(arrays((4,)), arrays((4,)), 1),
        rt.assign_item_vjp_value: case(arrays((4,)), arrays((4,)), slice(0, 2), arrays((2,))),
        rt.extremum_vjp: distinct3.flatmap(lambda x: case(floats(), np.max(x), x)),
        rt.cast_vjp: case(arrays((3,)), arrays((3,)), arrays((3,))),
        rt.unstack: case(arrays((2, 3)), [np.zeros(3), np.zeros(3)]),
        rt.clip_lo_vjp: case(arrays((3,)), st.just(np.array([-1.0, 0.1, 0.9])), -0.5, 0.7),
        rt.clip_hi_vjp: case(arrays((3,)), st.just(np.array([-1.0, 0.1, 0.9])), -0.5, 0.7),
        rt.column_stack_vjp: case(arrays((3, 2)), [np.zeros(3), np.zeros(3)]),
        rt.concat_vjp_a: case(lists3, [0.0, 0.0], [0.0]),
        rt.concat_vjp_b: case(lists3, [0.0, 0.0], [0.0]),
        rt.concatenate_vjp: case(arrays((5,)), [np.zeros(2), np.zeros(3)], 0)
        | case(arrays((2, 5)), [np.zeros((2, 2)), np.zeros((2, 3))], 1)
        | case(arrays((6,)), [np.zeros((2, 1)), np.zeros(4)], None),
        # (its transpose: the pieces' adjoints joined back)
        rt.joined_adjoints: case(st.tuples(arrays((2,)), arrays((3,))).map(list),
                                 [np.zeros(2), np.zeros(3)], 0)
        | case(st.tuples(arrays((2, 2)), arrays((2, 3))).map(list),
               [np.zeros((2, 2)), np.zeros((2, 3))], 1),
        rt.cumsum_vjp: case(arrays((2, 3)), arrays((2, 3)), 1)
        | case(arrays((4,)), arrays((4,)), None),
        rt.diag_vjp: case(arrays((3, 3)), arrays((3,)), 0),
        rt.diagonal_vjp: case(arrays((3,)), arrays((3, 3)), 0, 0, 1),
        rt.diff_vjp: case(arrays((3,)), arrays((4,)), 1, -1),
        rt.dstack_vjp: case(arrays((1, 3, 2)), [np.zeros(3), np.zeros(3)]),
        rt.field_vjp: case(arrays((2,)), Pair(np.zeros(2), 0.0), "w"),
        rt.hstack_vjp: case(arrays((5,)), [np.zeros(2), np.zeros(3)]),
        rt.vstack_vjp: case(arrays((2, 3)), [np.zeros(3), np.zeros(3)]),
        rt.list_item_vjp: case(floats(), [0.0, 0.0, 0.0], 1, 3),
        rt.pad_vjp: case(arrays((5,)), arrays((3,)), 1),
        rt.repeat_seq_vjp: case(st.lists(floats(), min_size=4, max_size=4), [0.0, 0.0], 2),
        rt.sequence_vjp: case(
            st.lists(arrays((2,)), min_size=2, max_size=2), [np.zeros(2), np.zeros(2)]
        )
        | case(st.lists(floats(), min_size=3, max_size=3), np.zeros(3))
        | case(st.lists(arrays((3,)), min_size=2, max_size=2), np.zeros((2, 3))),
        rt.repeat_vjp: case(arrays((6,)), arrays((3,)), 2, None),
        rt.summed_product: case(arrays((5,)), arrays((5,))) | case(floats(), arrays((3,)))
        | case(arrays((2, 3)), arrays((3,))),
        rt.roll_vjp: case(arrays((5,)), 2) | case(arrays((5,)), -7, 0) | case(arrays((2, 3)), 1, 1),
        rt.rollaxis_vjp: case(arrays((3, 2)), arrays((2, 3)), 1, 0),
        rt.select_default_vjp: case(arrays((3,)), [np.array([True, False, False])], arrays((3,))),
        rt.select_vjp: case(arrays((3,)), [np.array([True, False, True])], [np.zeros(3)]),
        rt.sort_vjp: distinct3.flatmap(lambda x: case(arrays((3,)), x, -1)),
        rt.sorted_by_vjp: case(lists3, [0.0, 0.0, 0.0], [3.0, 1.0, 2.0], False),
        rt.split_vjp: case(
            st.lists(arrays((2,)), min_size=2, max_size=2),
            [np.zeros(2), np.zeros(2)],
            np.zeros(4),
            0,
        ),
        rt.take_vjp: case(arrays((2,)), arrays((4,)), np.array([0, 3]), None),
        rt.take_along_axis_vjp: case(
            arrays((2, 4)), arrays((2, 3)), np.array([[2, 0, 0, 1], [1, 1, 2, 0]]), 1
        )
        | case(arrays((3, 2)), arrays((1, 2)), np.array([[0, 0], [0, 0], [0, 0]]), 0)
        | case(arrays((3,)), arrays((4,)), np.array([3, 0, 3]), None),
        rt.tile_vjp: case(arrays((6,)), arrays((3,)), 2),
        rt.trapezoid_vjp: case(floats(), arrays((4,)), 1.0, -1),
        rt.fit: case(arrays((3,)), arrays((2, 3))) | case(floats(), arrays((2,))),
        # up (as fit) and down (where unbroadcast broadcast a float zero up, reverse over a
        # gradient's code)
        rt.fit_adjoint: case(arrays((3,)), arrays((2, 3)))
        | case(arrays((2, 3)), floats())
        | case(arrays((3,)), arrays((3,))),
        rt.part: case(st.tuples(floats(), floats()), 1),
        rt.part_vjp: case(floats(), st.tuples(floats(), floats()), 1)
        | case(arrays((2,)), st.lists(arrays((2,)), min_size=2, max_size=2), 0),
        rt.matmul_vjp_a: _product_adjoint(rt.matmul_vjp_a, lambda a, b: np.shape(a @ b)),
        rt.matmul_vjp_b: _product_adjoint(rt.matmul_vjp_b, lambda a, b: np.shape(a @ b)),
        rt.dot_vjp_a: _product_adjoint(rt.dot_vjp_a, lambda a, b: np.shape(np.dot(a, b))),
        rt.dot_vjp_b: _product_adjoint(rt.dot_vjp_b, lambda a, b: np.shape(np.dot(a, b))),
        rt.inner_vjp: case(floats(), arrays((3,)), arrays((3,))),
        rt.inner_vjp_b: case(floats(), arrays((3,)), arrays((3,))),
        rt.outer_vjp_a: case(arrays((3, 2)), arrays((3,)), arrays((2,))),
        rt.outer_vjp_b: case(arrays((3, 2)), arrays((3,)), arrays((2,))),
        rt.vecdot_vjp: case(arrays((2,)), arrays((2, 3)), -1),
        rt.linspace_vjp: case(st.sampled_from([0, 1]), arrays((4,)), 4, True),
        rt.var_vjp: case(floats(), 0.0, arrays((4,)), None, 0, False)
        | case(arrays((3,)), 0.0, arrays((2, 3)), 0, 1, False),
        rt.chosen_vjp: case(0, floats(), 1.0, (1.0, 2.0)) | case(1, floats(), 1.0, (2.0, 1.0)),
        rt.chosen_jvp: case(0, floats(), 1.0, (1.0, 2.0))
        | case(1, st.tuples(floats(), floats()), 1.0, ((2.0, 1.0),)),
        rt.cast_jvp: case(arrays((3,)), arrays((3,))) | case(floats(), 0.5),
        rt.spread: case(arrays((3,)), st.tuples(arrays((3,)), floats()).map(list)),
        rt.product_terms_jvp: st.tuples(arrays((3,)), arrays((2,)), arrays((3,)), arrays((2,))).map(
            lambda t: (([(t[0], t[1])], [(t[2], t[3])]), {})
        ),
        rt.index_terms_jvp: st.tuples(arrays((3,)), arrays((3,))).map(
            lambda t: (([(t[0], 0.0)], [(t[1], 2)]), {})
        ),
        rt.filled: st.tuples(st.tuples(arrays((2,)), arrays((3,))), arrays((2,)), arrays((3,))).map(
            lambda t: (((t[0][0], None), (t[1], t[2])), {})
        ),
        rt.summed_matmul_vjp_a: _terms(True, 1) | _terms(True, 2),
        rt.summed_matmul_vjp_b: _terms(False, 1) | _terms(False, 2),
        rt.summed_dot_vjp_a: _terms(True, 1),
        rt.summed_dot_vjp_b: _terms(False, 1),
        rt.summed_matmul_vjp_a_steps: _steps(True, 1) | _steps(True, 2) | _taken(True),
        rt.summed_matmul_vjp_b_steps: _steps(False, 1) | _steps(False, 2) | _taken(False),
        rt.summed_dot_vjp_a_steps: _steps(True, 1) | _taken(True),
        rt.summed_dot_vjp_b_steps: _steps(False, 1) | _taken(False),
        rt.stacked_steps: case(st.lists(arrays((3,)), min_size=1, max_size=3)),
        # (a loop's reads of rows of a fixed matrix, last step first)
        rt.rows_of: case(arrays((3, 2)), st.sampled_from(
            [range(3), range(-1, 2), range(2, 0, -1), range(1, 3)])),
        rt.summed_getitem_vjp: case(
            st.lists(st.tuples(floats(), st.sampled_from([0, 2, -1])), min_size=1, max_size=4),
            np.zeros(4),
        )
        | case(
            st.lists(st.tuples(arrays((2,)), st.just(np.array([1, 1]))), min_size=1, max_size=3),
            np.zeros(3),
        ),
        rt.add_adjoints: case(arrays((3,)), arrays((3,)))
        | case(st.tuples(floats(), arrays((2,))), st.tuples(floats(), arrays((2,))))
        |
        # leaves that broadcast: a + b
        case(floats(), arrays((3,)))
        | case(arrays((3,)), arrays((2, 3))),
        rt.dense_adjoint: case(arrays((3,)), arrays((3,))),
        rt.unpopped: case(
            st.lists(arrays((2,)), min_size=2, max_size=2), arrays((2,)), [np.zeros(2), np.zeros(2)]
        ),
        rt.owned_adjoint: case(arrays((3,)), arrays((3,))) | case(arrays((1,)), arrays((3,))),
        rt.detached: case(arrays((3,))) | case(st.tuples(arrays((2,)), floats())),
        rt.entries: case(arrays((4,)), 1)
        | case(arrays((2, 3)), 0)
        | case(arrays((5,)), slice(1, 4)),
        rt.pow_minus_one: case(floats("pos"), floats()),
        rt.solve_vjp_b: square().flatmap(
            lambda a: case(arrays((3,)), arrays((3,)), a, arrays((3,)))
        ),
        rt.solve_vjp_a: square().flatmap(
            lambda a: (
                case(arrays((3,)), arrays((3,)), a, arrays((3,)))
                | case(arrays((3, 2)), arrays((3, 2)), a, arrays((3, 2)))
            )
        ),
        rt.norm_vjp: case(floats(), floats("away"), arrays((4,)), st.sampled_from([None, 2]))
        | case(arrays((3,)), arrays((3,), "away"), arrays((2, 3)), None, 0)
        | case(floats(), floats("away"), arrays((3, 3)), "fro"),
        rt.std_vjp: case(floats(), floats("away"), arrays((4,)), None, 0, False)
        | case(arrays((3,)), arrays((3,), "away"), arrays((2, 3)), 0, 1, False),
        rt.safe_log: case(floats("pos")) | case(arrays((3,), "pos")),
    }


def _second_order_helpers() -> dict:
    """The helpers of reductions, products and factorizations, whose forward rules give second
    derivatives. A result (``ans``) is moved apart from the input it came from: each helper is a
    function of all its arguments."""
    rt = runtime
    # two zeros: a product's second derivative is not zero
    zeros_in = st.just(np.array([0.5, 0.0, -1.2, 0.0]))
    wide = svd_input().map(lambda a: a.T)
    thin = lambda a: tuple(np.linalg.svd(a, full_matrices=False))  # noqa: E731
    factors = st.tuples(arrays((4, 3)), arrays((3,)), arrays((3, 3)))
    eigh = distinct_spectrum().map(lambda a: tuple(np.linalg.eigh(a)))
    cases = {
        rt.prod_vjp: case(arrays((2,)), 0.0, arrays((2, 3)), 1, False)
        | case(floats(), 0.0, zeros_in, None, False)
        | case(arrays((2,)), 0.0, arrays((2, 3, 2)), (1, 2), False)
        | case(arrays((2, 1)), 0.0, arrays((2, 3)), 1, True),
        rt.cumprod_vjp: case(arrays((4,)), 0.0, arrays((4,)), None)
        | case(arrays((2, 3)), 0.0, arrays((2, 3)), 1)
        | case(arrays((4,)), 0.0, zeros_in, None),
        rt.average_vjp: case(floats(), arrays((4,)), None, arrays((4,), "pos"))
        | case(arrays((2,)), arrays((2, 3)), 1, arrays((3,), "pos")),
        rt.average_weights_vjp: case(floats(), floats(), arrays((4,)), None, arrays((4,), "pos"))
        | case(arrays((2,)), arrays((2,)), arrays((2, 3)), 1, arrays((3,), "pos")),
        rt.nanmean_vjp: case(floats(), st.just(np.array([0.3, np.nan, 1.2])), None, False),
        rt.polyval_vjp_p: case(floats(), arrays((3,)), floats())
        | case(arrays((2,)), arrays((4,)), arrays((2,))),
        rt.polyder_vjp: case(arrays((2,)), arrays((3,)), 1) | case(arrays((2,)), arrays((4,)), 2),
        np.polyder: case(arrays((4,)), st.sampled_from([1, 2])),
        # 0: test_compose
        rt.sinc_slope: case(arrays((3,), "away"))
        | case(st.just(np.array([0.05, 2e-3, -0.7, 1.5]))),
        rt.matrix_power_vjp: case(arrays((2, 2)), arrays((2, 2)), st.integers(0, 3)),
        rt.multi_dot_vjp: case(
            arrays((3, 4)), st.tuples(arrays((3, 2)), arrays((2, 2)), arrays((2, 4))).map(list)
        )
        | case(arrays((4,)), st.tuples(arrays((3,)), arrays((3, 4))).map(list)),
        rt.cholesky_vjp: case(arrays((3, 3)), spd().map(np.linalg.cholesky)),
        rt.eigh_vjp: case(st.tuples(arrays((3,)), arrays((3, 3))), eigh, arrays((3, 3)))
        | case(st.tuples(arrays((3,)), st.none()), eigh, arrays((3, 3))),
        rt.qr_vjp: case(
            st.tuples(arrays((4, 3)), arrays((3, 3))),
            tall().map(lambda a: tuple(np.linalg.qr(a))),
            arrays((4, 3)),
        )
        | case(
            st.tuples(st.none(), arrays((3, 3))),
            tall().map(lambda a: tuple(np.linalg.qr(a))),
            arrays((4, 3)),
        ),
        rt.svd_vjp: case(factors, svd_input().map(thin), arrays((4, 3)), False, True)
        | case(
            st.tuples(arrays((3, 3)), arrays((3,)), arrays((3, 4))),
            wide.map(thin),
            arrays((3, 4)),
            False,
            True,
        )
        | case(
            st.tuples(st.none(), arrays((3,)), st.none()),
            svd_input().map(thin),
            arrays((4, 3)),
            False,
            True,
        )
        | svd_input().flatmap(
            lambda a: case(arrays((3,)), np.linalg.svd(a, compute_uv=False), a, False, False)
        ),
        rt.pinv_vjp: tall().flatmap(
            lambda a: case(arrays((3, 4)), np.linalg.pinv(a) + 0.0 * a.T, a)
        ),
        rt.kron_vjp: case(st.sampled_from([0, 1]), arrays((6,)), arrays((2,)), arrays((3,)))
        | case(st.sampled_from([0, 1]), arrays((2, 6)), arrays((2, 2)), arrays((1, 3))),
    }
    # np.convolve and np.correlate of 4 and 3 numbers, each mode
    def sliding(k: int) -> st.SearchStrategy:
        return case(k, arrays((6,)), arrays((4,)), arrays((3,)), "full") | \
            case(k, arrays((4,)), arrays((4,)), arrays((3,)), "same") | \
            case(k, arrays((2,)), arrays((4,)), arrays((3,)), "valid")
    cases[rt.convolve_vjp] = cases[rt.correlate_vjp] = st.sampled_from([0, 1]).flatmap(sliding)
    from ast_ad.rules.numpy import EINSUM_RULES
    # operand k's rule of an elementwise product of k + 1 vectors
    for k, rule in enumerate(EINSUM_RULES):
        spec = ",".join(["i"] * (k + 1)) + "->i"
        cases[rule] = case(arrays((2,)), np.zeros(2), spec, *[arrays((2,))] * (k + 1))
    # and of a matrix product, a trace (a repeated index) and a product of three operands
    three = ("ij,jk,k->i", arrays((2, 3)), arrays((3, 4)), arrays((4,)))
    cases[EINSUM_RULES[0]] |= (
        case(arrays((2, 4)), None, "ij,jk->ik", arrays((2, 3)), arrays((3, 4)))
        | case(floats(), None, "ii->", arrays((3, 3)))
        | case(arrays((2,)), None, *three)
    )
    cases[EINSUM_RULES[1]] |= case(
        arrays((2, 4)), None, "ij,jk->ik", arrays((2, 3)), arrays((3, 4))
    ) | case(arrays((2,)), None, *three)
    cases[EINSUM_RULES[2]] |= case(arrays((2,)), None, *three)
    return cases


CASES.update(_helpers())
CASES.update(_second_order_helpers())


# ---- mirrors ast_ad/rules/spectral.py: complex numbers and np.fft --------------------------------
def complex_arrays(shape: tuple[int, ...], domain: str = "real") -> st.SearchStrategy:
    """Complex arrays of ``shape``: both parts drawn from ``domain``."""
    return st.tuples(arrays(shape, domain), arrays(shape, domain)).map(lambda p: p[0] + 1j * p[1])


def complex_numbers(domain: str = "real") -> st.SearchStrategy:
    return st.tuples(floats(domain), floats(domain)).map(lambda p: complex(*p))


def _spectral() -> dict:
    import cmath

    from ast_ad.runtime import spectral as sp

    norms = st.sampled_from([None, "backward", "ortho", "forward"])
    one_d = st.sampled_from([(5,), (6,), (3, 4), (2, 5)])
    lengths = st.sampled_from([None, 3, 4, 7, 8])

    def transform(x_of: object) -> st.SearchStrategy:
        return one_d.flatmap(lambda s: case(x_of(s), lengths, st.sampled_from([-1, 0]), norms))

    def transform_nd(x_of: object, axes_default: object = None) -> st.SearchStrategy:
        plans = st.sampled_from([(None, None), ((3, 4), (0, 1)), ((4, 7), (0, 1)), ((5,), (1,)),
                                 (None, (1, 0)), ((2, 3, 4), (0, 1, 1))])
        return plans.flatmap(lambda p: case(x_of((3, 5)), p[0], p[1] or axes_default, norms))

    def half(shape: tuple[int, ...]) -> st.SearchStrategy:  # an irfft's input: complex
        return complex_arrays(shape)

    cases = {
        complex: case(floats(), floats()) | case(floats()),
        np.complex128: case(floats()),
        np.imag: case(of_shape(0, 2)),
        np.conj: case(of_shape(0, 2)),
        runtime.unit: case(arrays((3,), "away")) | case(complex_arrays((3,), "away")),
        runtime.inverse_or_zero: case(arrays((3,), "away")) | case(complex_arrays((3,), "away")),
        np.angle: case(arrays((3,), "away")) | case(arrays((2,), "away"), deg=True),
        runtime.abs_vjp: st.tuples(arrays((3,)), complex_arrays((3,), "away")).flatmap(
            lambda p: case(p[0], p[1], np.abs(p[1]))
        ),
        runtime.real_like: case(complex_arrays((3,)), arrays((3,)))
        | case(complex_arrays((3,)), complex_arrays((3,))),
        # a written ``z.real`` put back into ``z``, for a real ``z`` (``z.real`` is ``z`` itself:
        # the complex ones are ``test_complex.COMPLEX_CASES``'s); ``z.imag``, for a complex one
        # (of a real one, it raises, as numpy's write does)
        runtime.unreal: case(arrays((3,)), arrays((3,))),
        runtime.unimag: case(complex_arrays((3,)), arrays((3,))),
        cmath.exp: case(complex_numbers()) | case(floats()),
        cmath.log: case(complex_numbers("pos")),
        cmath.log10: case(complex_numbers("pos")),
        cmath.sqrt: case(complex_numbers("pos")),
        cmath.sin: case(complex_numbers()),
        cmath.cos: case(complex_numbers()),
        cmath.tan: case(complex_numbers("unit")),
        cmath.sinh: case(complex_numbers()),
        cmath.cosh: case(complex_numbers()),
        cmath.tanh: case(complex_numbers("unit")),
        cmath.asin: case(complex_numbers("unit")),
        cmath.acos: case(complex_numbers("unit")),
        cmath.atan: case(complex_numbers("unit")),
        cmath.asinh: case(complex_numbers("unit")),
        cmath.acosh: case(complex_numbers("pos").map(lambda z: z + 2.0)),
        cmath.atanh: case(complex_numbers("unit").map(lambda z: z * 0.5)),
        cmath.rect: case(floats("pos"), floats()),
        cmath.phase: case(floats("away")),
        np.fft.fft: transform(arrays) | transform(complex_arrays),
        np.fft.ifft: transform(arrays) | transform(complex_arrays),
        np.fft.rfft: transform(arrays),
        np.fft.irfft: transform(half),
        np.fft.hfft: transform(half),
        np.fft.ihfft: transform(arrays),
        np.fft.fftn: transform_nd(complex_arrays),
        np.fft.ifftn: transform_nd(complex_arrays),
        np.fft.fft2: transform_nd(complex_arrays, (-2, -1)),
        np.fft.ifft2: transform_nd(complex_arrays, (-2, -1)),
        np.fft.rfftn: transform_nd(arrays),
        np.fft.rfft2: transform_nd(arrays, (-2, -1)),
        np.fft.irfftn: transform_nd(half),
        np.fft.irfft2: transform_nd(half, (-2, -1)),
        np.fft.fftshift: case(of_shape(1, 2)) | case(arrays((3, 4)), axes=st.sampled_from([0, 1])),
        np.fft.ifftshift: case(of_shape(1, 2)) | case(arrays((3, 4)), axes=1),
        # the transforms' adjoints, with what the transforms above give them
        sp.fft_vjp: case(complex_arrays((7,)), (5,), 7, -1, norms, st.booleans()),
        sp.fftn_vjp: case(complex_arrays((3, 4)), (3, 5), (3, 4), (0, 1), norms, st.booleans()),
        sp.rfft_vjp: case(complex_arrays((4,)), (5,), 7, -1, norms),
        sp.rfftn_vjp: case(complex_arrays((4, 4)), (3, 5), (4, 7), (0, 1), norms),
        sp.irfft_vjp: case(arrays((7,)), (5,), 7, -1, norms)
        | case(arrays((4,)), (3,), None, -1, norms),
        sp.irfftn_vjp: case(arrays((4, 7)), (3, 5), (4, 7), (0, 1), norms),
        sp.hfft_vjp: case(arrays((8,)), (5,), None, -1, norms),
        sp.ihfft_vjp: case(complex_arrays((4,)), (6,), None, -1, norms),
        sp.fft_of: case(complex_arrays((5,)), lengths, -1, norms, st.booleans()),
        sp.fftn_of: case(complex_arrays((3, 5)), None, None, norms, st.booleans()),
    }
    return cases


CASES.update(_spectral())
