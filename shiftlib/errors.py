"""The one base class of every input error shiftflow reports to a user as a sentence (no traceback)."""

from __future__ import annotations

__all__ = ["MAX_MESSAGE", "MAX_QUOTE", "ShiftflowInputError", "UnknownNameError", "bounded", "quote", "quote_list"]

#: most characters of one quoted value in an error message (a column name, a cell, a path)
MAX_QUOTE = 300
#: most characters of a whole error message: twice a quoted value, plus the sentence around them
MAX_MESSAGE = 3 * MAX_QUOTE


def _escaped(text: str) -> str:
    """Unprintable characters as their Python escapes (``\\x00``, ``\\n``), once; printable text untouched."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def quote(value: object, limit: int = MAX_QUOTE) -> str:
    """``value`` as an error message quotes it: ``'…'`` with unprintable characters escaped once and at most
    ``limit`` characters, the rest counted (a column name of a million NUL bytes must not become the message).

    Parameters
    ----------
    value : object
        What to quote; ``str(value)`` is quoted.
    limit : int, default MAX_QUOTE
        Most characters of the (escaped) text kept before the count of the rest.

    Returns
    -------
    str
        The escaped, possibly cut text in single quotes.
    """
    text = _escaped(str(value))
    if len(text) > limit:
        text = f"{text[:limit]}… [{len(text) - limit:,} more characters]"
    return f"'{text}'"


def quote_list(values: object, shown: int = 8, limit: int = MAX_QUOTE // 4) -> str:
    """``['a', 'b', … (N in all)]``: the first ``shown`` values, each :func:`quote`-d to ``limit`` characters.

    Parameters
    ----------
    values : iterable
        The values to list.
    shown : int, default 8
        Most values shown; when there are more, the total count is appended.
    limit : int, default MAX_QUOTE // 4
        Most characters of each quoted value.

    Returns
    -------
    str
        The bracketed, comma-separated list of quoted values.
    """
    items = list(values)  # type: ignore[call-overload]
    more = f", … ({len(items):,} in all)" if len(items) > shown else ""
    return "[" + ", ".join(quote(v, limit) for v in items[:shown]) + more + "]"


def bounded(message: str, limit: int = MAX_MESSAGE) -> str:
    """``message`` with unprintable characters escaped and at most about ``limit`` characters: a longer one keeps
    its head and its tail (where the fix is said) and counts what was cut.

    Parameters
    ----------
    message : str
        The message to bound.
    limit : int, default MAX_MESSAGE
        About the most characters kept: two thirds from the head, one third from the tail.

    Returns
    -------
    str
        The escaped message, unchanged if it fits, else head, count of characters cut, and tail.
    """
    text = _escaped(message)
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 2 // 3], text[-(limit // 3):]
    return f"{head} … [{len(text) - len(head) - len(tail):,} characters cut] … {tail}"


class ShiftflowInputError(ValueError):
    """Input the project cannot use as given (a table, a file, a parameter); the message names the problem
    and the fix in one sentence. The CLI prints it as ``shiftflow: error: <message>`` and exits with 2;
    any other exception is a bug and keeps its traceback. The message is :func:`bounded`: a value quoted
    whole (a huge header, binary bytes) never floods the terminal or the log.

    Parameters
    ----------
    *args : object
        The exception arguments; a single string is the message and is passed through :func:`bounded`.
    """

    def __init__(self, *args: object) -> None:
        if len(args) == 1 and isinstance(args[0], str):
            args = (bounded(args[0]),)
        super().__init__(*args)


class UnknownNameError(KeyError, ValueError):
    """A name that is not in a registry (learner, selector, weighter). A ``KeyError`` for lookups, a ``ValueError``
    for argument checks, and printed as its sentence: ``str(KeyError(msg))`` would print the message in quotes."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
