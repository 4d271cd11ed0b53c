"""Input checks and row helpers shared by the selection modules (private).

Feature matrices may be numpy arrays or pandas DataFrames; rows are always addressed by position. The
column rule and the row-weights check are shiftlib's one rule (:mod:`shiftlib._validation`); what is
selection's own is that a pair must be two DataFrames or two arrays (rows are stacked across sets).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from shiftlib._validation import align_columns, check_row_weights

__all__ = ["check_X", "check_row_weights", "check_y", "take", "vstack"]


def check_X(X: Any, name: str, *, like: Any = None, like_name: str = "X_source") -> Any:
    """Return ``X`` as a 2-D DataFrame (kept; columns in ``like``'s order) or ndarray; a readable error otherwise."""
    if X is None:
        raise ValueError(f"{name} is missing: pass a 2-D array or DataFrame with one row per example")
    if not isinstance(X, pd.DataFrame):
        X = np.asarray(X)
        if X.ndim == 1:
            raise ValueError(f"{name} is 1-D: pass a 2-D array (reshape a single feature with X.reshape(-1, 1))")
        if X.ndim != 2:
            raise ValueError(f"{name} has {X.ndim} dimensions: pass a 2-D array (rows × features)")
    if len(X) == 0:
        raise ValueError(f"{name} has 0 rows: every set used for selection needs at least one row")
    if like is not None:
        if isinstance(like, pd.DataFrame) != isinstance(X, pd.DataFrame):
            raise ValueError(
                f"{name} and {like_name} must both be DataFrames or both be arrays (got "
                f"{type(X).__name__} and {type(like).__name__})"
            )
        X = align_columns(like, X, names=(like_name, name))
    return X


def check_y(y: Any, X: Any, name: str, x_name: str) -> np.ndarray:
    """Return ``y`` as a 1-D ndarray with one label per row of ``X``."""
    if y is None:
        raise ValueError(f"{name} is missing: pass one label per row of {x_name}")
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one label per row); got shape {y.shape}")
    if len(y) != len(X):
        raise ValueError(f"{name} has {len(y)} labels but {x_name} has {len(X)} rows: pass one label per row")
    if pd.isna(pd.Series(y)).any():
        raise ValueError(f"{name} contains missing labels: drop those rows or impute the labels first")
    return y


def take(X: Any, idx: np.ndarray) -> Any:
    """Rows ``idx`` (positions) of an array or DataFrame."""
    return X.iloc[idx] if isinstance(X, pd.DataFrame) else X[idx]


def vstack(parts: list[Any]) -> Any:
    """Stack row blocks of the same kind (arrays or DataFrames with the same columns)."""
    if isinstance(parts[0], pd.DataFrame):
        return pd.concat(parts, axis=0, ignore_index=True)
    return np.concatenate([np.asarray(p) for p in parts], axis=0)
