"""Deterministic, collision-free names for generated code.

>>> namer = Namer(reserved={"t1"})
>>> namer.fresh("y", user=True), namer.fresh("y", user=True), namer.fresh("t1")
('y', 'y_1', 't1_1')

User names keep their spelling where they can; a generated name never takes a
name the user's function binds (its *reserved* names), nor one already given, nor
a builtin's (a local ``slice`` would hide the builtin from the code after it).
"""

from __future__ import annotations

import builtins
import keyword
import re

_BUILTINS = frozenset(dir(builtins))


class Namer:
    def __init__(
        self,
        reserved: set[str] | frozenset[str] = frozenset(),
        used: set[str] | None = None,
        spelled: bool = False,
    ):
        """``spelled``: names that spell outside objects (a module's globals), where a builtin's
        name is the builtin's own."""
        self.reserved = set(reserved)
        self.avoided = frozenset() if spelled else _BUILTINS
        self.used = set(used or ())
        self.next: dict[str, int] = {}  # the next suffix to try for a base name
        self.users: set[str] = set()  # the names given to the user's own variables

    def fresh(self, base: str, user: bool = False) -> str:
        """A new name from ``base``: ``base`` itself if free, else ``base_1``, ``base_2``, ..."""
        base = identifier(base)
        name, k = base, self.next.get(base, 0)
        if (
            k
            or name in self.used
            or (not user and (name in self.reserved or name in self.avoided))
            or keyword.iskeyword(name)
        ):
            k = max(k, 1)
            name = f"{base}_{k}"
            while name in self.used or name in self.reserved:
                k += 1
                name = f"{base}_{k}"
        self.next[base] = k + 1
        self.used.add(name)
        if user:
            self.users.add(name)
        return name


def identifier(text: str) -> str:
    """``text`` made into a Python identifier."""
    text = re.sub(r"\W", "_", text).strip("_") or "t"
    return "t_" + text if text[0].isdigit() else text
