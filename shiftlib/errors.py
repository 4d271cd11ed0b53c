"""The one base class of every input error shiftflow reports to a user as a sentence (no traceback)."""

from __future__ import annotations

__all__ = ["ShiftflowInputError", "UnknownNameError"]


class ShiftflowInputError(ValueError):
    """Input the project cannot use as given (a table, a file, a parameter); the message names the problem
    and the fix in one sentence. The CLI prints it as ``shiftflow: error: <message>`` and exits with 2;
    any other exception is a bug and keeps its traceback."""


class UnknownNameError(KeyError, ValueError):
    """A name that is not in a registry (learner, selector, weighter). A ``KeyError`` for lookups, a ``ValueError``
    for argument checks, and printed as its sentence: ``str(KeyError(msg))`` would print the message in quotes."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
