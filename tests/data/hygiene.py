"""Names that look like the ones ast_ad generates, as parameters, locals and globals."""

import numpy as np

x_bar = 100.0  # a global named like an adjoint
tape = [1.0]  # a global named like the tape


def looks_generated(x, out, t1, g, ans, _stack, tape_):
    x_bar_local = x * out
    t2 = t1 * g + ans
    out_bar = x_bar_local + t2 * _stack
    return out_bar * tape_ + x * x_bar + tape[0] * x


def shadows_numpy(numpy, np_, x):
    return numpy * np.sin(x) + np_ * x


def shadows_np(np, x):
    y = x * np
    return y * x


def loops_with_tape_names(x, tape):
    for _ in range(3):
        x = x * tape + 0.1
    return x


def reads_globals(x):
    return np.sum(np.sin(x) * x_bar) + tape[0]
