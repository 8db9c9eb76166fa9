"""GradBench's ``lstm`` eval (ADBench's LSTM, whose weight matrices are diagonal): the average loss
of a stacked LSTM predicting each next character of a text, and its gradient in the main and extra
parameters."""

import numpy as np

import ast_ad

from .wrap import timed


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def cell_step(weight, bias, hidden, cell, x):
    """One layer's step: its gates from the input and its own hidden state, elementwise (diagonal
    weights)."""
    gates = np.concatenate([x, hidden, x, hidden]) * weight + bias
    h = hidden.shape[0]
    forget = sigmoid(gates[:h])
    ingate = sigmoid(gates[h:2 * h])
    outgate = sigmoid(gates[2 * h:3 * h])
    change = np.tanh(gates[3 * h:])
    cell = cell * forget + ingate * change
    return outgate * np.tanh(cell), cell


def loss(main, extra, state, sequence):
    """Minus the mean log-probability of each next character; ADBench normalises with log(2 + sum
    exp), a quirk (its ``sum(exp(y), 2)``) kept for the golden answers."""
    total = 0.0
    count = 0
    given = sequence[0]
    for t in range(sequence.shape[0] - 1):
        x = given * extra[0]
        rows = []
        for i in range(0, state.shape[0], 2):
            hidden, cell = cell_step(main[i], main[i + 1], state[i], state[i + 1], x)
            rows.append(hidden)
            rows.append(cell)
            x = hidden
        state = np.stack(rows)
        predicted = x * extra[1] + extra[2]
        normalised = predicted - np.log(2.0 + np.sum(np.exp(predicted)))
        target = sequence[t + 1]
        total = total + np.sum(target * normalised)
        count = count + target.shape[0]
        given = target
    return -total / count


def _input(raw):
    return tuple(
        np.array(raw[name], dtype=np.float64)
        for name in ("main_params", "extra_params", "state", "sequence")
    )


gradient = ast_ad.grad(loss, argnums=(0, 1))

FUNCTIONS = {
    "objective": timed(pre=_input, post=float)(lambda given: loss(*given)),
    "jacobian": timed(
        pre=_input, post=lambda g: np.concatenate([g[0].ravel(), g[1].ravel()]).tolist()
    )(lambda given: gradient(*given)),
}
