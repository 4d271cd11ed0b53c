"""The one base class of every input error shiftflow reports to a user as a sentence (no traceback)."""

from __future__ import annotations

__all__ = ["ShiftflowInputError"]


class ShiftflowInputError(ValueError):
    """Input the project cannot use as given (a table, a file, a parameter); the message names the problem
    and the fix in one sentence. The CLI prints it as ``shiftflow: error: <message>`` and exits with 2;
    any other exception is a bug and keeps its traceback."""
