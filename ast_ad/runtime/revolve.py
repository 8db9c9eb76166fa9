"""Binomial checkpointing (Griewank's revolve): which loop steps to keep, and which to compute
again.

Reverse mode keeps what every step of a loop's backward pass reads. With ``s`` snapshots of the
loop-carried state instead, the backward pass of ``l`` steps recomputes the steps between snapshots,
``t * l - C(s + t, t - 1)`` of them in all, where ``t`` is the smallest integer with ``C(s + t, s)
>= l`` (``forward_steps``): the fewest any schedule with ``s`` snapshots needs. 1,000 steps with 10
snapshots take 3,636 steps forward, 3.64 sweeps.

The schedule is recursive. To reverse ``n`` steps from a state held in a snapshot, with ``s``
snapshots (that one included): run ``m`` steps forward, keep the state there, reverse the last ``n -
m`` steps with the other ``s - 1`` snapshots, then go back to the first snapshot and reverse the
first ``m`` steps with all ``s``. The cost is least when the first ``m`` steps can be reversed in
``t - 1`` sweeps (``m <= C(s + t - 1, s)``) and the rest are not too few for one snapshot fewer (``n
- m >= C(s + t - 2, s - 1)``): ``split`` takes the largest such ``m``. (A test checks the schedule
against the recursion's minimum, found by trying every ``m``, and against the closed form.)
Snapshots are used last in, first out, so they live on a stack.

``revolve`` writes the schedule as actions for generated code to run (see ``reverse.Reverser``):

- ``("advance", a, b)``: run steps ``a`` to ``b - 1`` without taping them;
- ``("snapshot", a, a)``: push the state (at step ``a``) onto the stack;
- ``("restore", a, a)``: set the state to the top of the stack (at step ``a``);
- ``("release", a, a)``: pop the top of the stack;
- ``("tape", a, a + 1)``: run step ``a`` and tape it;
- ``("reverse", a, a + 1)``: the backward pass of step ``a``, from its tape.

The forward pass runs the first sweep (``sweep``: the segments between the first snapshots, each
started by a snapshot) and tapes the last step; the backward pass runs the rest (``reversal``).
"""

from __future__ import annotations

from collections.abc import Iterator
from math import comb
from typing import Any

Action = tuple[str, int, int]


def repetitions(steps: int, snapshots: int) -> int:
    """``t``: the smallest integer with ``C(snapshots + t, snapshots) >= steps``."""
    t = 0
    while comb(snapshots + t, snapshots) < steps:
        t += 1
    return t


def forward_steps(steps: int, snapshots: int) -> int:
    """How many untaped steps the optimal schedule runs: ``t * l - C(s + t, t - 1)`` (0 for one
    step)."""
    if steps <= 1:
        return 0
    t = repetitions(steps, snapshots)
    return t * steps - comb(snapshots + t, t - 1)


def split(steps: int, snapshots: int) -> int:
    """How many steps to run before the next snapshot, reversing ``steps`` steps with
    ``snapshots``."""
    if snapshots == 1:
        return steps - 1
    t = repetitions(steps, snapshots)
    return min(comb(snapshots + t - 1, snapshots), steps - comb(snapshots + t - 2, snapshots - 1))


def schedule(steps: int, snapshots: int) -> Iterator[Action]:
    """Every action that reverses ``steps`` loop steps with at most ``snapshots`` snapshots, in
    order.

    A generator: its own memory is O(snapshots), however many steps the loop has.
    """
    if steps >= 2:
        yield ("snapshot", 0, 0)
    # the recursion of the module's docstring, with an explicit stack (one snapshot makes it
    # ``steps`` deep)
    todo: list[tuple[str, int, int, int]] = [("release", 0, 0, 0)] if steps >= 2 else []
    todo.append(("reverse", 0, steps, snapshots))
    while todo:
        kind, start, n, s = todo.pop()
        if kind != "reverse":
            yield (kind, start, start)
        elif n == 1:
            yield ("tape", start, start + 1)
            yield ("reverse", start, start + 1)
        elif n >= 2:
            m = split(n, s)
            yield ("advance", start, start + m)
            later = [("reverse", start + m, n - m, s - 1)]
            if n - m >= 2:
                yield ("snapshot", start + m, start + m)
                later.append(("release", start + m, 0, 0))
            later += [("restore", start, 0, 0), ("reverse", start, m, s)]
            todo += reversed(later)


class Reversal:
    """The backward pass's actions: ``schedule`` from the backward pass of the last step on, made as
    they are read (a list of them would be O(steps)). A sequence: a ``for`` over it starts from the
    beginning, and reading it by index, as forward mode does, costs O(1) an item when the indices go
    up one by one."""

    def __init__(self, steps: int, snapshots: int):
        self.steps, self.snapshots = steps, snapshots
        self._length: int | None = None
        # the next index, and the actions from there
        self._cursor: tuple[int, Iterator[Action]] | None = None

    def __iter__(self) -> Iterator[Action]:
        actions = schedule(self.steps, self.snapshots)
        for action in actions:
            if action[0] == "tape":
                break
        yield from actions

    def __len__(self) -> int:
        if self._length is None:
            self._length = sum(1 for _ in self)
        return self._length

    def __getitem__(self, k: int) -> Action:
        if not 0 <= k < len(self):
            raise IndexError(f"action {k} of {len(self)}")
        if self._cursor is None or self._cursor[0] > k:
            self._cursor = (0, iter(self))
        at, actions = self._cursor
        for _ in range(k - at):
            next(actions)
        action = next(actions)
        self._cursor = (k + 1, actions)
        return action

    def __repr__(self) -> str:
        return f"Reversal(steps={self.steps}, snapshots={self.snapshots})"


# ``checkpoints="auto"``: the memory a checkpointed loop's snapshots may take, in bytes
AUTO_BYTES = 64 * 2**20


def size_of(value: Any) -> int:
    """The bytes a snapshot of ``value`` keeps: an array's entries, the items of a list, tuple or
    dict, and 8 for anything else (a number, None); at least 1."""
    if hasattr(value, "nbytes") and hasattr(value, "shape"):
        return max(int(value.nbytes), 1)
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return max(sum(size_of(item) for item in value), 1)
    return 8


def auto_snapshots(steps: int, state: Any, budget: int | None = None) -> int:
    """How many snapshots ``checkpoints="auto"`` keeps for a loop of ``steps`` steps whose
    loop-carried state is ``state``, when the loop starts: as many as fit in ``budget`` bytes, the
    state's size each, so that a small state costs few steps computed again and a large one little
    memory; never more than the ``steps - 1`` with which each step is computed again once (the
    fewest any schedule allows), never fewer than one. ``budget``: ``AUTO_BYTES`` unless given."""
    budget = AUTO_BYTES if budget is None else budget
    return max(1, min(budget // size_of(state), steps - 1))


def revolve(iterable: Any, snapshots: int | str,
            state: Any = None) -> tuple[list[tuple[int, int]], Reversal]:
    """``(sweep, reversal)`` for a loop over ``iterable`` (see the module's docstring).

    ``sweep`` lists the forward pass's segments ``(start, stop)``, each begun with a snapshot (at
    most ``snapshots`` of them); ``reversal`` the backward pass's actions, from the backward pass of
    the last step on. ``snapshots="auto"``: ``auto_snapshots`` of the loop's length and its state
    at the start, ``state``.
    """
    try:
        steps = len(iterable)
    except TypeError:
        try:
            from ast_ad.errors import ASTADError as error
        except ImportError:  # in a module ast_ad.export wrote, run without ast_ad
            error = TypeError  # type: ignore[misc, assignment]
        raise error(
            f"a checkpointed loop runs over a {type(iterable).__name__}, whose length is not known "
            "when it starts: loop over a range, list, tuple or array, or leave checkpoints= out"
        ) from None
    if isinstance(snapshots, str):  # "auto" (``check_checkpoints`` takes no other word)
        snapshots = auto_snapshots(steps, state)
    sweep = []
    for kind, a, b in schedule(steps, snapshots):
        if kind == "tape":
            break
        if kind == "advance":
            sweep.append((a, b))
    return sweep, Reversal(steps, snapshots)
