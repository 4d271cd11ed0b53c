"""Input checks shared by every shiftlib module (shiftlib._validation): the column rule (DataFrames by name, arrays
by position), 2-D finite floats, probabilities and row weights — each refusal naming the problem."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from shiftlib._validation import (
    align_columns,
    as_2d_float,
    check_pair,
    check_probabilities,
    check_row_weights,
    counted,
    first_non_numeric,
)


def test_counted_and_first_non_numeric() -> None:
    assert (counted(1, "row"), counted(0, "row"), counted(2, "column")) == ("1 row", "0 rows", "2 columns")
    df = pd.DataFrame({"n": [1.0, 2.0], "flag": [True, False], "when": pd.to_datetime(["2024-01-01", "2024-01-02"]),
                       "city": ["a", "b"]})
    assert first_non_numeric(df) == "when"  # booleans count as numbers, a date does not
    assert first_non_numeric(df[["n", "flag"]]) is None


def test_dataframes_are_matched_by_name_and_arrays_by_position() -> None:
    src = pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0]})
    tgt = pd.DataFrame({"b": [30.0, 40.0], "a": [10.0, 20.0]})
    aligned = align_columns(src, tgt)
    assert list(aligned.columns) == ["a", "b"] and aligned["a"].tolist() == [10.0, 20.0]
    same_order = tgt[["a", "b"]]
    assert align_columns(src, same_order) is same_order  # nothing to reorder: the target itself
    with pytest.raises(ValueError, match=r"only in source: \['b'\], only in target: \['c'\]"):
        align_columns(src, pd.DataFrame({"a": [1.0], "c": [2.0]}))
    with pytest.raises(ValueError, match=r"duplicate column names \['a'\]"):
        align_columns(pd.DataFrame([[1.0, 2.0]], columns=["a", "a"]), pd.DataFrame([[1.0, 2.0]], columns=["a", "a"]))
    with pytest.raises(ValueError, match="train has 2 columns but test has 1 column: different columns"):
        align_columns(np.zeros((3, 2)), np.zeros((3, 1)), names=("train", "test"))
    # an array beside a DataFrame: by position, so only the count is checked
    assert align_columns(np.zeros((3, 2)), tgt) is tgt
    # check_pair applies the rule and returns floats, names from whichever side has them
    pair = check_pair(src, tgt)
    np.testing.assert_array_equal(pair.X_target, [[10.0, 30.0], [20.0, 40.0]])
    np.testing.assert_array_equal(pair.feature_names, ["a", "b"])
    np.testing.assert_array_equal(check_pair(np.ones((2, 2)), tgt).feature_names, ["b", "a"])
    assert check_pair(np.ones((2, 2)), np.ones((3, 2))).feature_names is None


def test_as_2d_float_refuses_what_is_not_a_finite_numeric_table() -> None:
    arr, names = as_2d_float(pd.DataFrame({"x": [1, 2], "y": [True, False]}), "X")
    assert arr.dtype == float and arr.tolist() == [[1.0, 1.0], [2.0, 0.0]] and names.tolist() == ["x", "y"]
    with pytest.raises(ValueError, match=r"X is a pandas Series; pass a DataFrame \(e.g. X.to_frame\(\)\)"):
        as_2d_float(pd.Series([1.0, 2.0]), "X")
    with pytest.raises(ValueError, match="column 'city' of X is .*not numeric.*prepare_tables"):
        as_2d_float(pd.DataFrame({"city": ["a", "b"]}), "X")
    with pytest.raises(ValueError, match="X is 1-d; pass a 2-d array"):
        as_2d_float(np.arange(3.0), "X")
    with pytest.raises(ValueError, match="got 3 dimensions"):
        as_2d_float(np.zeros((2, 2, 2)), "X")
    with pytest.raises(ValueError, match="must hold numbers only"):
        as_2d_float([["a", "b"]], "X")
    bad = np.zeros((3, 3))
    bad[1, 2], bad[2, 1] = np.nan, np.inf
    with pytest.raises(ValueError, match=r"X has 2 missing or infinite values \(first in column 1\)"):
        as_2d_float(bad, "X")
    with pytest.raises(ValueError, match=r"\(first in column 'v'\)"):
        as_2d_float(pd.DataFrame({"u": [1.0, 2.0], "v": [np.nan, 1.0]}), "X")


def test_check_pair_counts_rows_and_columns() -> None:
    with pytest.raises(ValueError, match="source set has 1 row; at least 2 needed"):
        check_pair(np.ones((1, 2)), np.ones((5, 2)), min_rows=2)
    with pytest.raises(ValueError, match="target set has 0 rows; at least 1 needed"):
        check_pair(np.ones((3, 2)), np.ones((0, 2)))
    with pytest.raises(ValueError, match="X_source has 0 columns"):
        check_pair(np.ones((3, 0)), np.ones((3, 0)))


def test_probabilities_and_row_weights() -> None:
    np.testing.assert_array_equal(check_probabilities([0.0, 0.5, 1.0], "p"), [0.0, 0.5, 1.0])
    with pytest.raises(ValueError, match=r"p has shape \(2,\); pass one probability per source row \(3\)"):
        check_probabilities([0.1, 0.2], "p", n_rows=3, rows="source row")
    with pytest.raises(ValueError, match="p contains NaN"):
        check_probabilities([0.1, np.nan], "p")
    with pytest.raises(ValueError, match=r"must lie in \(0, 1\] for selected rows"):
        check_probabilities([0.0, 0.5], "p", positive=True)
    with pytest.raises(ValueError, match=r"probabilities in \[0, 1\]; got values in \[-2, 3\] .*not decision_function"):
        check_probabilities([-2.0, 3.0], "p")
    np.testing.assert_array_equal(check_row_weights([0.0, 2.0], 2), [0.0, 2.0])  # a zero weight is allowed
    with pytest.raises(ValueError, match=r"w has shape \(3,\) but there are 2 rows"):
        check_row_weights([1.0, 1.0, 1.0], 2, "w")
    with pytest.raises(ValueError, match="finite and non-negative"):
        check_row_weights([1.0, -1.0], 2)
    with pytest.raises(ValueError, match="finite and non-negative"):
        check_row_weights([1.0, np.inf], 2)
    with pytest.raises(ValueError, match="sums to 0"):
        check_row_weights([0.0, 0.0], 2)
