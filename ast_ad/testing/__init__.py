"""Testing ast_ad and code that uses it: random programs in the supported language (``programs``, a
hypothesis strategy), the runtime tracer (``tracer``, the independent oracle) and ``check_grads``
(``checking``).

>>> from hypothesis import given
>>> from ast_ad.testing import programs

``programs`` and ``Program`` are imported when first asked for: hypothesis is a test dependency, not
a run-time one, and the tracer is imported without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ast_ad.testing.random_programs import Program, programs

__all__ = ["programs", "Program"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ast_ad.testing import random_programs

        return getattr(random_programs, name)
    raise AttributeError(f"module 'ast_ad.testing' has no attribute {name!r}")
