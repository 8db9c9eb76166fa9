"""Rules for Python's operators (``+ - * / ** @``, unary ``-``/``+``, ``abs``), via the operator
module."""

import operator

import numpy as np

from ast_ad.core.registry import (
    def_linear,
    def_nondiff,
    def_result_axes,
    def_view,
    def_vjp_by_ranks,
    defjvp,
    defvjp,
)
from ast_ad.core.registry import defvjp_elementwise as ew
from ast_ad.runtime import (
    getitem_vjp,
    index_derivative,
    matmul_vjp_a,
    matmul_vjp_b,
    pow_minus_one,
    safe_log,
)

# ---- arithmetic -------------------------------------------------------------------------------
ew(operator.add,     lambda g, ans, x, y: g,                   lambda g, ans, x, y: g)
ew(operator.sub,     lambda g, ans, x, y: g,                   lambda g, ans, x, y: -g)
ew(operator.mul,     lambda g, ans, x, y: g * y,               lambda g, ans, x, y: g * x)
ew(operator.truediv, lambda g, ans, x, y: g / y,               lambda g, ans, x, y: -g * ans / y)
ew(operator.pow,     lambda g, ans, x, y: g * y * pow_minus_one(x, y),
                     lambda g, ans, x, y: g * ans * safe_log(x))
ew(operator.mod,     lambda g, ans, x, y: g,                   lambda g, ans, x, y: -g * (x // y))
ew(operator.neg,     lambda g, ans, x: -g)
ew(operator.pos,     lambda g, ans, x: g)
ew(operator.abs,     lambda g, ans, x: g * np.sign(x))

# ---- products and indexing ---------------------------------------------------------------------
defvjp(
    operator.matmul,
    lambda g, ans, a, b: matmul_vjp_a(g, a, b),
    lambda g, ans, a, b: matmul_vjp_b(g, a, b),
)
# an index or key from the differentiated inputs (an item of a list of a dict's keys) is discrete:
# nothing flows into it; one that is a float is refused when it is read (``index_derivative``)
defvjp(
    operator.getitem,
    lambda g, ans, x, index: getitem_vjp(g, x, index),
    lambda g, ans, x, index: index_derivative(index),
)
def_linear(operator.matmul, 0, 1)
def_view(operator.getitem)  # x[1:] shares x's memory
def _product_axes(ranks: tuple[int | None, ...]) -> tuple[tuple[int, int], ...] | None:
    """Where the axes of a product of operands of one or two axes come from (``def_result_axes``):
    a matrix's rows, the other matrix's columns."""
    found: dict[tuple[int | None, ...], tuple[tuple[int, int], ...]] = {
        (1, 1): (), (2, 1): ((0, 0),), (1, 2): ((1, 1),), (2, 2): ((0, 0), (1, 1))}
    return found.get(ranks)


# where both operands' numbers of axes are known (a matrix and a vector...), the helpers' branches,
# inlined: for ``a @ b``, and for ``np.matmul`` and ``np.dot``, which compute the same product of
# operands of one or two axes
for _product in (operator.matmul, np.matmul, np.dot):
    def_vjp_by_ranks(
        _product, (2, 1), lambda g, ans, a, b: np.outer(g, b), lambda g, ans, a, b: g @ a
    )
    def_vjp_by_ranks(
        _product, (2, 2), lambda g, ans, a, b: g @ b.T, lambda g, ans, a, b: a.T @ g
    )
    def_vjp_by_ranks(
        _product, (1, 2), lambda g, ans, a, b: b @ g, lambda g, ans, a, b: np.outer(a, g)
    )
    def_vjp_by_ranks(_product, (1, 1), lambda g, ans, a, b: g * b, lambda g, ans, a, b: g * a)
    # its result's axes: a matrix's rows, the other's columns
    def_result_axes(_product, _product_axes)
def_linear(operator.getitem, 0)
# (likewise forward)
defjvp(operator.getitem, None, lambda u, ans, x, index: index_derivative(index))

# ---- no gradient --------------------------------------------------------------------------------
def_nondiff(operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne,
            operator.not_, operator.floordiv)
