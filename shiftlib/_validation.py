"""Input checks shared by every shiftlib module (private): the source/target pair, probabilities, row weights.

**The column rule.** Source and target must carry the same features. Two DataFrames are matched *by
column name*: the same names in a different order are reordered to the source's order (a table's column
order carries no meaning; drift and the weighters did this already), different names are refused with
the names on each side. Arrays (or an array with a DataFrame) are matched by position and must have the
same number of columns. Hand-written because scikit-learn's ``check_array`` checks one array, not that
two agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "CheckedPair",
    "align_columns",
    "as_2d_float",
    "check_pair",
    "check_probabilities",
    "check_row_weights",
    "counted",
    "first_non_numeric",
]


def counted(n: int, noun: str) -> str:
    """``'1 row'``, ``'2 rows'``: a count with its noun in the right number, for messages."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _cols(k: int) -> str:
    return counted(k, "column")


def first_non_numeric(X: pd.DataFrame) -> Any:
    """The first column of ``X`` that is neither numeric nor boolean (text, dates, categories), or None."""
    return next((c for c in X.columns
                 if not (pd.api.types.is_numeric_dtype(X[c]) or pd.api.types.is_bool_dtype(X[c]))), None)


def align_columns(X_source: Any, X_target: Any, *, names: tuple[str, str] = ("X_source", "X_target")) -> Any:
    """Apply the module's column rule to a (source, target) pair; returns the target, aligned.

    Parameters
    ----------
    X_source, X_target : 2-D array-like or DataFrame
    names : (str, str)
        How the two sets are called in the messages.

    Returns
    -------
    X_target
        Unchanged, or (two DataFrames) its columns in the source's order.

    Raises
    ------
    ValueError
        Different column counts, different column names (listing those only on one side), or duplicated
        names.
    """
    ns, nt = names
    ks, kt = np.shape(X_source)[1], np.shape(X_target)[1]
    if isinstance(X_source, pd.DataFrame) and isinstance(X_target, pd.DataFrame):
        cs, ct = [str(c) for c in X_source.columns], [str(c) for c in X_target.columns]
        only_s = [c for c in cs if c not in set(ct)]
        only_t = [c for c in ct if c not in set(cs)]
        if only_s or only_t:
            raise ValueError(
                f"{ns} and {nt} have different columns ({ks} vs {kt}); only in source: {only_s[:10]}, "
                f"only in target: {only_t[:10]} — select the same columns on both sides"
            )
        dup = sorted({c for c in cs if cs.count(c) > 1} | {c for c in ct if ct.count(c) > 1})
        if dup:
            raise ValueError(f"duplicate column names {dup}; rename them")
        if cs != ct:
            return X_target.iloc[:, [ct.index(c) for c in cs]]
    if ks != kt:
        raise ValueError(
            f"{ns} has {_cols(ks)} but {nt} has {_cols(kt)}: different columns; pass the same features"
        )
    return X_target


@dataclass(frozen=True)
class CheckedPair:
    """Source and target as float arrays with the same columns (names kept when given)."""

    X_source: np.ndarray
    X_target: np.ndarray
    feature_names: np.ndarray | None


def as_2d_float(X: Any, what: str) -> tuple[np.ndarray, np.ndarray | None]:
    """``X`` as a finite 2-D float array plus its column names (DataFrames) or None.

    Raises
    ------
    ValueError
        A Series, a text column, a 1-D or 3-D array, or a missing / infinite value — each message
        names the fix.
    """
    names: np.ndarray | None = None
    if isinstance(X, pd.Series):
        raise ValueError(f"{what} is a pandas Series; pass a DataFrame (e.g. {what}.to_frame())")
    if isinstance(X, pd.DataFrame):
        if (col := first_non_numeric(X)) is not None:
            raise ValueError(
                f"column {col!r} of {what} is {X[col].dtype} (not numeric); encode it as numbers first "
                "(shiftlib.preprocessor.prepare_tables(source, target, label) encodes both alike)"
            )
        names = np.asarray([str(c) for c in X.columns], dtype=object)
        arr = X.to_numpy(dtype=float, na_value=np.nan)
    else:
        try:
            arr = np.asarray(X, dtype=float)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{what} must hold numbers only; could not convert it to float ({exc})") from exc
    if arr.ndim == 1:
        raise ValueError(f"{what} is 1-d; pass a 2-d array (rows × features), e.g. X.reshape(-1, 1)")
    if arr.ndim != 2:
        raise ValueError(f"{what} must be 2-d (rows × features); got {arr.ndim} dimensions")
    bad = ~np.isfinite(arr)
    if bad.any():
        col = int(np.flatnonzero(bad.any(axis=0))[0])
        label = repr(names[col]) if names is not None else str(col)
        raise ValueError(
            f"{what} has {int(bad.sum())} missing or infinite values (first in column {label}); "
            "impute or drop them first"
        )
    return arr, names


def check_pair(X_source: Any, X_target: Any, *, min_rows: int = 1) -> CheckedPair:
    """Validate a numeric (source, target) pair: 2-d, finite, ≥ ``min_rows`` rows, same columns.

    Parameters
    ----------
    X_source, X_target : 2-D array-like or DataFrame
    min_rows : int, default 1

    Returns
    -------
    CheckedPair
        Float arrays and the column names (from whichever side is a DataFrame).
    """
    if isinstance(X_source, pd.DataFrame) and isinstance(X_target, pd.DataFrame):
        X_target = align_columns(X_source, X_target)
    Xs, names_s = as_2d_float(X_source, "X_source")
    Xt, names_t = as_2d_float(X_target, "X_target")
    for X, label in ((Xs, "source"), (Xt, "target")):
        if X.shape[0] < min_rows:
            raise ValueError(f"{label} set has {counted(X.shape[0], 'row')}; at least {min_rows} needed")
    align_columns(Xs, Xt)
    if Xs.shape[1] == 0:
        raise ValueError("X_source has 0 columns; pass at least one feature")
    return CheckedPair(Xs, Xt, names_s if names_s is not None else names_t)


def check_probabilities(
    p: Any, name: str, *, n_rows: int | None = None, rows: str = "row", positive: bool = False
) -> np.ndarray:
    """``p`` as a float array, refused unless every value is a finite probability.

    Parameters
    ----------
    p : array-like
        Any shape unless ``n_rows`` is given.
    name : str
        How ``p`` is called in the messages.
    n_rows : int, optional
        Demand a 1-D array of this many entries (one per ``rows``).
    rows : str, default "row"
        What one entry belongs to, for the shape message.
    positive : bool, default False
        Demand (0, 1] instead of [0, 1] — e.g. P(s=1|x) of a row that was selected.

    Returns
    -------
    ndarray
    """
    a = np.asarray(p, dtype=float)
    if n_rows is not None and (a.ndim != 1 or a.shape[0] != n_rows):
        raise ValueError(f"{name} has shape {np.shape(p)}; pass one probability per {rows} ({n_rows})")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or infinite values; fix or drop those rows")
    if positive and a.size and (a.min() <= 0.0 or a.max() > 1.0):
        raise ValueError(
            f"{name} must lie in (0, 1] for selected rows (a selected row has P(s=1|x) > 0); "
            f"got min {a.min():.3g}, max {a.max():.3g}"
        )
    if a.size and (a.min() < 0.0 or a.max() > 1.0):
        raise ValueError(
            f"{name} must be probabilities in [0, 1]; got values in [{a.min():.4g}, {a.max():.4g}] — pass the "
            "positive-class column of predict_proba, not decision_function scores or logits"
        )
    return a


def check_row_weights(w: Any, n: int, name: str = "weights", what: str = "rows") -> np.ndarray:
    """One finite, non-negative weight per row, not all zero.

    Parameters
    ----------
    w : array-like of shape (n,)
    n : int
        Rows the weights belong to.
    name, what : str
        How the weights and the rows are called in the messages.

    Returns
    -------
    ndarray of shape (n,)
    """
    w = np.asarray(w, dtype=float)
    if w.shape != (n,):
        raise ValueError(f"{name} has shape {w.shape} but there are {n} {what}: pass one weight per row")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"{name} must be finite and non-negative; fix or clip the weights")
    if w.sum() <= 0:
        raise ValueError(
            f"{name} sums to 0 (all weights are zero): at least one row needs a positive weight"
        )
    return w
