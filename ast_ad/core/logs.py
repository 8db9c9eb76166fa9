"""ast_ad's log messages (the ``ast_ad`` logger), without importing :mod:`logging` before a program
does.

Until something imports ``logging``, nothing can have configured it, so a DEBUG or INFO message
would be dropped: it is skipped. A warning imports ``logging`` and goes through the ``ast_ad``
logger as usual.
"""

from __future__ import annotations

import sys
from typing import Any


def debug(message: str, *args: Any) -> None:
    if "logging" in sys.modules:
        sys.modules["logging"].getLogger("ast_ad").debug(message, *args)


def info(message: str, *args: Any) -> None:
    if "logging" in sys.modules:
        sys.modules["logging"].getLogger("ast_ad").info(message, *args)


def warning(message: str, *args: Any) -> None:
    import logging

    logging.getLogger("ast_ad").warning(message, *args)
