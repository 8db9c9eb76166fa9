"""Functions outside the language. Each marks the line its error must point at with ``# error
here``."""

import numpy as np

from tests import broken_rule, helpers_without_rule


def with_match(x):
    match x:  # error here
        case _:
            return x


def with_try(x):
    try:  # error here
        return x
    except ValueError:
        return x


def with_with(x):
    with open("f") as fh:  # error here
        fh.read()
    return x


def with_global(x):
    global COUNTER  # error here
    return x


def with_walrus(x):
    return (y := x * 2.0) + y  # error here


def with_yield(x):
    yield x  # error here


def with_class(x):
    class Local:  # error here
        pass
    return x


def with_starred(x):
    return np.maximum(*x)  # error here


def with_attribute_assignment(x):
    x.flags = 1.0  # error here
    return x


def with_import(x):
    import math  # error here
    return math.sin(x)


def no_return(x):
    y = x * 2.0  # error here  # noqa: F841


def missing_rule(x):
    y = helpers_without_rule.opaque(x)  # error here
    return y * 2.0


def missing_numpy_rule(x):
    return np.sum(np.interp(x, [0.0, 1.0], [0.0, 2.0]))  # error here


def keyword_active(x):
    return np.sum(x * 2.0, initial=x)  # error here


def not_scalar(x):
    return x * 2.0  # error here


def returns_string(x):
    return "not a number"  # error here


def undefined_name(x):
    return x * not_defined_anywhere  # error here  # noqa: F821


def star_args(*xs):  # error here
    return xs[0]


def with_delete(x):
    y = x * 2.0
    del y
    return y * x  # error here  # noqa: F821


def recursive_nested(x):
    def down(y):
        return down(y * 0.5)  # error here
    return down(x)


def outer(x):
    return np.dot(x.reshape(2, 1), x.reshape(1, 2))  # error here


def rule_breaks(x):
    return np.sum(broken_rule.doubled(x))  # error here


def rule_breaks_in_helper(x):
    return broken_rule.helper(x) * 2.0


def returns_tuple(x):
    return x[0], x[1]  # error here


def pairs_of_differentiated_values(x):
    total = 0.0
    for pair in zip(x, x * 2.0, strict=True):  # error here
        total = total + pair[0] * pair[1]
    return total


def next_of_a_generator(x):
    return next(v for v in x if v > 0.3)  # error here


def writes_its_default(x, buf=np.zeros(2)):  # noqa: B008 -- the mistake this case is about
    buf[0] = buf[0] + np.sum(x)  # error here
    return np.sum(buf * x)


def appends_to_its_default(x, seen=[]):  # noqa: B006 -- the mistake this case is about
    seen.append(np.sum(x))  # error here
    return sum(seen)
