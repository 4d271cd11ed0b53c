"""Input checks and row helpers of the selection modules (shiftlib.selection._validation): a pair is two DataFrames
(matched by name) or two arrays, labels one per row, rows addressed by position."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from shiftlib.selection._validation import check_X, check_y, take, vstack


def test_check_x_returns_a_2d_table_and_names_each_problem() -> None:
    X = check_X([[1.0, 2.0], [3.0, 4.0]], "X_source")
    assert isinstance(X, np.ndarray) and X.shape == (2, 2)
    with pytest.raises(ValueError, match="X_source is missing"):
        check_X(None, "X_source")
    with pytest.raises(ValueError, match=r"X_target is 1-D: pass a 2-D array \(reshape"):
        check_X(np.arange(3.0), "X_target")
    with pytest.raises(ValueError, match="X_target has 3 dimensions"):
        check_X(np.zeros((2, 2, 2)), "X_target")
    with pytest.raises(ValueError, match="X_target has 0 rows"):
        check_X(np.zeros((0, 2)), "X_target")
    src = pd.DataFrame({"a": [1.0], "b": [2.0]})
    with pytest.raises(ValueError, match=r"X_target and X_source must both be DataFrames or both be arrays \(got "
                       r"ndarray and DataFrame\)"):
        check_X(np.zeros((2, 2)), "X_target", like=src)
    # a DataFrame is matched to the source by name: the columns come back in the source's order
    tgt = check_X(pd.DataFrame({"b": [20.0, 40.0], "a": [10.0, 30.0]}), "X_target", like=src)
    assert list(tgt.columns) == ["a", "b"] and tgt["a"].tolist() == [10.0, 30.0]
    with pytest.raises(ValueError, match="X_source has 2 columns but X_target has 3 columns"):
        check_X(np.zeros((2, 3)), "X_target", like=np.zeros((2, 2)))


def test_check_y_wants_one_label_per_row() -> None:
    X = np.zeros((3, 2))
    np.testing.assert_array_equal(check_y(["a", "b", "a"], X, "y_source", "X_source"), ["a", "b", "a"])
    with pytest.raises(ValueError, match="y_source is missing: pass one label per row of X_source"):
        check_y(None, X, "y_source", "X_source")
    with pytest.raises(ValueError, match=r"must be 1-D \(one label per row\); got shape \(3, 1\)"):
        check_y(np.zeros((3, 1)), X, "y_source", "X_source")
    with pytest.raises(ValueError, match="y_source has 2 labels but X_source has 3 rows"):
        check_y([0, 1], X, "y_source", "X_source")
    with pytest.raises(ValueError, match="y_source contains missing labels"):
        check_y([0.0, np.nan, 1.0], X, "y_source", "X_source")


def test_rows_are_taken_and_stacked_by_position() -> None:
    arr = np.arange(8.0).reshape(4, 2)
    np.testing.assert_array_equal(take(arr, np.array([3, 0])), [[6.0, 7.0], [0.0, 1.0]])
    df = pd.DataFrame(arr, columns=["u", "v"], index=[10, 11, 12, 13])  # labels that are not positions
    assert take(df, np.array([3, 0]))["u"].tolist() == [6.0, 0.0]
    np.testing.assert_array_equal(vstack([arr[:1], arr[2:]]), arr[[0, 2, 3]])
    both = vstack([df.iloc[:1], df.iloc[2:]])
    assert both.index.tolist() == [0, 1, 2] and both["v"].tolist() == [1.0, 5.0, 7.0]
