"""Exceptions that ast_ad raises at its users.

Every error derives from :class:`ASTADError`. Errors about the user's source
carry the file and line they are about, so the message can point there, and
say what to write instead.
"""

from __future__ import annotations


class ASTADError(Exception):
    """Base class of every error ast_ad raises on purpose."""


class LocatedError(ASTADError):
    """An error about a place in the user's source: ``file:line: message``."""

    def __init__(self, message: str, filename: str | None = None, lineno: int | None = None,
                 line: str | None = None):
        self.filename, self.lineno, self.line = filename, lineno, line
        where = f"{filename}:{lineno}: " if filename and lineno else ""
        shown = f"\n    {line.strip()}" if line and line.strip() else ""
        super().__init__(f"{where}{message}{shown}")


class UnsupportedSyntaxError(ASTADError, SyntaxError):
    """A construct outside the language ast_ad differentiates.

    It is a :class:`SyntaxError`, so Python prints the user's line with a caret
    under the construct.
    """

    def __init__(self, message: str, filename: str, lineno: int, offset: int, text: str):
        SyntaxError.__init__(self, message, (filename, lineno, offset, text))


class MissingRuleError(LocatedError):
    """A differentiated value flows into a function with no gradient rule."""


class UnsupportedDerivativeError(LocatedError, NotImplementedError):
    """A derivative ast_ad does not compute for these arguments (``np.pad`` with ``mode="reflect"``,
    a negative matrix power): raised where it runs, at the user's line, saying what to write
    instead."""


class GradientFailedError(LocatedError):
    """The function runs, but computing its gradient failed at one of its lines (a gap in a gradient
    rule)."""


class NonScalarOutputError(LocatedError):
    """``grad`` was asked for the gradient of a function whose value is not a scalar."""


class ArgnumsError(ASTADError, ValueError):
    """``argnums`` names an argument that the call does not have."""


class NonDifferentiableArgumentError(ASTADError, TypeError):
    """A differentiated argument is not a float, an array of floats, or a container of them."""


class SourceUnavailableError(ASTADError):
    """The function's source cannot be read, so it cannot be transformed."""


class InPlaceAliasError(ASTADError):
    """An in-place update (``x += y``, ``x[i] = v``) of an array that another variable also refers
    to.

    Python would change both; ast_ad computes the update as a new array, so it refuses rather than
    return a different number.
    """
