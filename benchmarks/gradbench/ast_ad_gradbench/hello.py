"""GradBench's ``hello`` eval: a square and its derivative."""

import ast_ad

from .wrap import timed


def square(x):
    return x * x


@timed(pre=float, post=float, runs=False)
def double(x):
    return ast_ad.grad(square)(x)


@timed(pre=float, post=float, runs=False)
def square_(x):
    return square(x)


FUNCTIONS = {"square": square_, "double": double}
