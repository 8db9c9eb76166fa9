"""``record``: the dataclasses ast_ad uses itself (its IR, rules, generated modules), made cheaply.

``dataclasses.dataclass`` compiles each method of each class apart (six ``exec`` calls for a frozen
class on Python 3.11 and 3.12); at ast_ad's three dozen classes that was a third of ``import
ast_ad``. ``record`` writes the same methods (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
and for a frozen class ``__setattr__``/``__delattr__`` that refuse) and compiles them in one call
per class. It keeps dataclass semantics for what ast_ad uses: fields from the annotations in order,
defaults, ``field(default_factory=...)``, methods the class defines itself kept, equality only
between instances of the same class, and ``__hash__`` from the fields when frozen, ``None`` when
mutable with ``eq``.

>>> @record
... class Point:
...     x: float
...     y: float = 0.0
>>> Point(1.0), Point(1.0) == Point(1.0, 0.0), hash(Point(1.0)) == hash(Point(1.0, 0.0))
(Point(x=1.0, y=0.0), True, True)
>>> Point(1.0).x = 2.0
Traceback (most recent call last):
    ...
AttributeError: cannot assign to field 'x' of a frozen Point
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T", bound=type)


class _Factory:
    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]):
        self.make = make


def field(*, default_factory: Callable[[], Any]) -> Any:
    """A field whose default is made anew for each instance (``field(default_factory=list)``)."""
    return _Factory(default_factory)


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise AttributeError(f"cannot assign to field {name!r} of a frozen {type(self).__name__}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise AttributeError(f"cannot delete field {name!r} of a frozen {type(self).__name__}")


def _make(cls: T, frozen: bool, eq: bool) -> T:
    names = [name for name in cls.__dict__.get("__annotations__", {}) if not name.startswith("__")]
    scope: dict[str, Any] = {"_set": object.__setattr__, "_MISSING": _MISSING}
    params, sets = ["self"], []
    for name in names:
        default = cls.__dict__.get(name, _MISSING)
        if isinstance(default, _Factory):
            scope[f"_make_{name}"] = default.make
            params.append(f"{name}=_MISSING")
            sets.append(f"    if {name} is _MISSING:\n        {name} = _make_{name}()")
            delattr(cls, name)
        elif default is not _MISSING:
            scope[f"_default_{name}"] = default
            params.append(f"{name}=_default_{name}")
        else:
            params.append(name)
        sets.append(f"    _set(self, {name!r}, {name})" if frozen else f"    self.{name} = {name}")
    values = "".join(f"self.{name}, " for name in names)
    others = "".join(f"other.{name}, " for name in names)
    shown = ", ".join(f"{name}={{self.{name}!r}}" for name in names)
    methods = {
        "__init__": f"def __init__({', '.join(params)}):\n" + ("\n".join(sets) or "    pass"),
        "__repr__": f"def __repr__(self):\n    return f'{cls.__qualname__}({shown})'",
    }
    if eq:
        methods["__eq__"] = (
            "def __eq__(self, other):\n    if other.__class__ is self.__class__:\n        return "
            f"({values}) == ({others})\n    return NotImplemented"
        )
        if frozen:
            methods["__hash__"] = f"def __hash__(self):\n    return hash(({values}))"
    own = dict(cls.__dict__)
    if own.get("__hash__", _MISSING) is None and "__eq__" in own:
        # Python's None beside the class's own __eq__: not a hash the class chose
        del own["__hash__"]
    wanted = {name: text for name, text in methods.items() if name not in own}
    exec("\n".join(wanted.values()), scope)  # noqa: S102 -- the methods of a class of ast_ad's own
    for name in wanted:
        scope[name].__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, scope[name])
    if eq and not frozen and "__hash__" not in own:
        cls.__hash__ = None  # type: ignore[assignment]  # mutable and compared by value: unhashable
    if frozen:
        cls.__setattr__ = _frozen_setattr  # type: ignore[assignment]
        cls.__delattr__ = _frozen_delattr  # type: ignore[assignment]
    setattr(cls, "__match_args__", tuple(names))  # noqa: B010
    return cls


@overload
def record(cls: T, /) -> T: ...
@overload
def record(*, frozen: bool = True, eq: bool = True) -> Callable[[T], T]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: Any = None, /, *, frozen: bool = True, eq: bool = True) -> Any:
    """Make ``cls`` a dataclass, frozen unless ``frozen=False``; compared by its fields unless
    ``eq=False``."""
    if cls is None:
        return lambda c: _make(c, frozen, eq)
    return _make(cls, frozen, eq)


R = TypeVar("R")


def replace(obj: R, **changes: Any) -> R:
    """A record like ``obj`` with ``changes`` (a new one; ``obj`` is left as it is)."""
    names = getattr(type(obj), "__match_args__")  # noqa: B009 (a record's fields)
    made: R = type(obj)(**{n: changes.get(n, getattr(obj, n)) for n in names})
    return made
