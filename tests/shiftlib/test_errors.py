"""shiftlib.errors: error messages bounded (issue 31): a value quoted in at most 300 characters with unprintable
characters escaped once, a whole message that keeps its head and its fix."""

from __future__ import annotations

import pytest

from shiftlib.errors import MAX_MESSAGE, MAX_QUOTE, ShiftflowInputError, bounded, quote, quote_list


def test_quote_escapes_unprintable_characters_once_and_counts_what_it_cuts():
    assert MAX_QUOTE == 300
    assert quote("a\x00b\n") == "'a\\x00b\\n'"
    assert quote("a\\x00") == "'a\\x00'"  # already escaped text (a repr) is printable: not escaped again
    assert quote("ä ö") == "'ä ö'"  # printable non-ASCII stays as it is
    assert quote("x" * 1000) == "'" + "x" * 300 + "… [700 more characters]'"
    assert quote("\x00" * 100, limit=8) == "'\\x00\\x00… [392 more characters]'"  # counted after escaping


def test_quote_list_shows_the_first_names_and_how_many():
    assert quote_list(["a", "b"]) == "['a', 'b']"
    assert quote_list([f"c{i}" for i in range(10_000)], shown=2) == "['c0', 'c1', … (10,000 in all)]"


def test_bounded_keeps_the_head_and_the_tail_where_the_fix_is():
    msg = "file " + "y" * 5000 + ": give a CSV"
    out = bounded(msg)
    assert out.startswith("file yyy") and out.endswith(": give a CSV")
    head, tail = MAX_MESSAGE * 2 // 3, MAX_MESSAGE // 3
    assert out == f"{msg[:head]} … [{len(msg) - head - tail:,} characters cut] … {msg[-tail:]}"
    assert bounded("short") == "short"


@pytest.mark.heavy
def test_an_input_error_is_bounded_whatever_it_quotes():
    err = ShiftflowInputError("label column is not in " + repr("\x00" * 10**6) + "; pass the label")
    assert len(str(err)) < MAX_MESSAGE + 40 and str(err).endswith("; pass the label")
