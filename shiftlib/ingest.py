"""Validate and encode a labeled source table and an unlabeled target table (no I/O).

``TablePreprocessor`` is the encoder: a scikit-learn transformer fitted on the source and applied to the
target (and, as the first step of every served model, to the raw rows a model scores).
``prepare_tables(source, target, label)`` fits it and turns two raw DataFrames into numeric feature matrices
with identical columns, integer-coded labels and a record of every decision (dropped id columns, one-hot
levels, imputed columns). Policies, stated once:

* **Labels** are coded 0..K-1 in sorted order of the source's label values; for two classes the
  positive class (code 1) is the larger value unless ``positive_label`` is given. NaN labels in the
  source are refused. Labels present in the target are split off (``target_y``) for evaluation only.
* **Text / categorical / boolean columns** are one-hot encoded with the source's levels (sorted);
  a target level never seen in the source encodes as all zeros (reported in ``notes``). A column
  with more than ``max_levels`` distinct source values is refused, naming it.
* **Missing values**: NaN in a numeric column is imputed with the source median and a 0/1 column
  ``<col>__missing`` is added (in both tables); NaN in a categorical column gets the indicator and
  all-zero level columns. ±inf is refused (it is almost always a upstream bug, not missingness).
  Rows scored later with a missing value where neither table had one are imputed the same way, without
  an indicator (the fitted columns do not change).
* **Id-like columns** (integer or text, every value distinct in the source and in the target, at
  least ``min_rows_for_id`` rows) are dropped with a warning: they identify rows, not behaviour.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.compose import ColumnTransformer
from sklearn.impute import MissingIndicator, SimpleImputer
from sklearn.preprocessing import OneHotEncoder
from sklearn.utils.validation import check_is_fitted

from shiftlib.errors import ShiftflowInputError

__all__ = ["IngestError", "PreparedData", "TablePreprocessor", "check_label_column", "check_labels",
           "prepare_tables"]


class IngestError(ShiftflowInputError):
    """The input tables cannot be used as given; the message names the problem and the fix."""


@dataclass
class PreparedData:
    """Encoded source/target tables. ``X`` frames are float64 with identical column order; ``preprocessor``
    is the fitted ``TablePreprocessor`` that produced them (raw feature rows → ``X``)."""

    source_X: pd.DataFrame
    source_y: np.ndarray
    target_X: pd.DataFrame
    target_y: np.ndarray | None
    classes: list[Any]
    feature_columns: list[str]
    dropped_columns: dict[str, str] = field(default_factory=dict)
    encodings: dict[str, list[str]] = field(default_factory=dict)
    imputed: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    preprocessor: TablePreprocessor | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable summary of the encoding decisions (for manifests)."""
        return {
            "classes": [_jsonable(c) for c in self.classes],
            "positive_label": _jsonable(self.classes[1]) if len(self.classes) == 2 else None,
            "feature_columns": list(self.feature_columns),
            "dropped_columns": dict(self.dropped_columns),
            "encodings": {k: list(v) for k, v in self.encodings.items()},
            "imputed_medians": {k: float(v) for k, v in self.imputed.items()},
            "notes": list(self.notes),
            "n_source": int(len(self.source_X)),
            "n_target": int(len(self.target_X)),
            "target_labels_held_out": self.target_y is not None,
        }


def _jsonable(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _is_text(s: pd.Series) -> bool:
    return not (pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s))


def _kind(s: pd.Series) -> str:
    if pd.api.types.is_bool_dtype(s):
        return "boolean"
    if pd.api.types.is_numeric_dtype(s):
        return "numeric"
    return "text"


def _object_ints_as_float(s: pd.Series) -> pd.Series:
    """Integers too large for int64 arrive as an object column of Python ints: they are numbers, not levels."""
    if s.dtype != object:
        return s
    values = s.dropna()
    if len(values) == 0 or not all(isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)
                                   for v in values):
        return s
    return pd.Series([np.nan if pd.isna(v) else _float(v) for v in s], index=s.index, dtype=float)


def _float(v: int) -> float:
    try:
        return float(v)
    except OverflowError:  # beyond ±1.8e308: refused below with the infinite values
        return np.inf if v > 0 else -np.inf


def _levels(s: pd.Series) -> pd.Series:
    """A categorical column as plain Python text with None for missing (object dtype): a nullable pandas dtype
    (``string``, ``boolean``) would make ``== level`` return NA, i.e. NaN in the one-hot columns."""
    values = [None if pd.isna(v) else str(v) for v in s.astype(object)]
    return pd.Series(values, index=s.index, dtype=object)


def _numbers(s: pd.Series, column: Any, which: str) -> np.ndarray:
    """A numeric column as float64 with NaN for missing; ±inf refused, naming the column and the table."""
    v = s.to_numpy(dtype=float, na_value=np.nan)
    n_inf = int(np.isinf(v).sum())
    if n_inf:
        raise IngestError(
            f"column {column!r} has {n_inf} infinite value(s) in the {which} (±inf, or beyond ±1.8e308); "
            "replace them with finite numbers or leave them empty (NaN) to be imputed"
        )
    return v


def _check_duplicates(df: pd.DataFrame, which: str) -> None:
    dup = df.columns[df.columns.duplicated()].unique().tolist()
    if dup:
        raise IngestError(
            f"the {which} table has duplicate column names {dup}; rename them so each column is unique"
        )


def _check_same_columns(s_cols: list[Any], t_cols: list[Any]) -> None:
    missing, extra = [c for c in s_cols if c not in t_cols], [c for c in t_cols if c not in s_cols]
    if missing or extra:
        raise IngestError(
            "feature columns differ between source and target: "
            + (f"missing from the target {missing}" if missing else "")
            + ("; " if missing and extra else "")
            + (f"only in the target {extra}" if extra else "")
            + "; give both tables the same feature columns"
        )


def _coerce(s: pd.Series, column: Any, which: str) -> pd.Series:
    """Refuse complex numbers; read integers beyond int64 as numbers."""
    if pd.api.types.is_complex_dtype(s):
        raise IngestError(f"column {column!r} holds complex numbers in the {which}; split it into real "
                          "columns (e.g. real and imaginary parts) or drop it")
    return _object_ints_as_float(s)


def _check_kind(column: Any, source_kind: str, source_empty: bool, t: pd.Series) -> None:
    kind = _kind(t)
    if kind != source_kind and not (len(t.dropna()) == 0 or source_empty):
        raise IngestError(
            f"column {column!r} is {kind} in the target but {source_kind} in the source; convert one so both agree"
        )


def _is_id_like(s: pd.Series, t: pd.Series | None, min_rows: int) -> bool:
    if len(s) < min_rows or s.isna().any():
        return False
    integer = pd.api.types.is_integer_dtype(s)
    if not (integer or _is_text(s)):
        return False
    if not s.is_unique:
        return False
    return t is None or len(t) == 0 or bool(t.is_unique)


class _Names:
    """The encoded column names claimed so far; a second claim of a name is refused, naming both owners."""

    def __init__(self) -> None:
        self.origin: dict[str, str] = {}

    def claim(self, name: str, what: str) -> str:
        if name in self.origin:  # e.g. a column named 'a=x' and the one-hot column of level 'x' of column 'a'
            raise IngestError(
                f"the encoded column {name!r} would hold both {self.origin[name]} and {what}; rename one of the "
                "input columns"
            )
        self.origin[name] = what
        return name


def _table(X: Any, which: str) -> pd.DataFrame:
    if not isinstance(X, pd.DataFrame):
        raise IngestError("source and target must be pandas DataFrames")
    _check_duplicates(X, which)
    return X


class TablePreprocessor(TransformerMixin, BaseEstimator):
    """Raw feature rows → float64 encoded features with the source's medians and levels (module docstring).

    A ``ColumnTransformer`` with, per kept column in source order, a ``MissingIndicator`` (when the column has
    a missing value in the source or in the ``target`` given to ``fit``) followed by a median
    ``SimpleImputer`` (numbers) or a ``OneHotEncoder`` with the source's sorted levels (text, booleans;
    unseen levels → all zeros). Medians and levels are learned from the source only; ``target`` only decides
    which missing-value indicators exist, confirms id-like columns and is checked for the same columns and
    kinds. Fitted, it is the first step of every served model, so a model scores raw rows.

    Parameters
    ----------
    max_levels : int, default=20
        A text column with more distinct source values is refused.
    min_rows_for_id : int, default=20
        Fewest rows for a column whose every value is distinct to be dropped as an id.

    Attributes
    ----------
    feature_names_in_ : ndarray of object
        The source's feature columns: the raw input ``transform`` expects.
    kinds_ : dict
        Column → ``"numeric"``, ``"text"`` or ``"boolean"`` (as read in the source).
    dropped_ : dict
        Id-like column → reason.
    encodings_ : dict
        Categorical column → its source levels (sorted text).
    imputed_ : dict
        Numeric column with missing values → the source median imputed.
    feature_columns_ : list of str
        Names of the encoded columns, in output order.
    column_transformer_ : sklearn.compose.ColumnTransformer
        The fitted encoders.
    """

    def __init__(self, max_levels: int = 20, min_rows_for_id: int = 20) -> None:
        self.max_levels = max_levels
        self.min_rows_for_id = min_rows_for_id

    def fit(self, X: pd.DataFrame, y: Any = None, target: pd.DataFrame | None = None) -> TablePreprocessor:
        """Learn the encoding of the source feature table ``X`` (label excluded); raises ``IngestError``."""
        source = _table(X, "source").copy()
        cols = list(source.columns)
        tgt = None
        if target is not None:
            tgt = _table(target, "target")
            _check_same_columns(cols, list(tgt.columns))
            tgt = tgt[cols].copy()
        self.kinds_: dict[Any, str] = {}
        self.empty_in_source_: dict[Any, bool] = {}
        for c in cols:
            source[c] = _coerce(source[c], c, "source")
            if tgt is not None:
                tgt[c] = _coerce(tgt[c], c, "target")
            self.kinds_[c] = _kind(source[c])
            self.empty_in_source_[c] = bool(len(source[c].dropna()) == 0)
            if tgt is not None:
                _check_kind(c, self.kinds_[c], self.empty_in_source_[c], tgt[c])
        self.dropped_ = {c: "id-like: every value is distinct" for c in cols
                         if _is_id_like(source[c], None if tgt is None else tgt[c], self.min_rows_for_id)}
        for c in self.dropped_:
            warnings.warn(f"dropping column {c!r}: it looks like a row id (every value is distinct)",
                          UserWarning, stacklevel=3)
        self.kept_ = [c for c in cols if c not in self.dropped_]
        if not self.kept_:
            raise IngestError("no feature columns remain after dropping id-like columns; add feature columns")
        self._fit_encoders(source, tgt)
        self.feature_names_in_ = np.asarray(cols, dtype=object)
        self.n_features_in_ = len(cols)
        return self

    def _fit_encoders(self, source: pd.DataFrame, target: pd.DataFrame | None) -> None:
        names = _Names()
        self.encodings_: dict[Any, list[str]] = {}
        self.imputed_: dict[Any, float] = {}
        steps: list[tuple[str, Any, list[int]]] = []
        canon: dict[int, np.ndarray] = {}
        for i, c in enumerate(self.kept_):
            t = None if target is None else target[c]
            plan = self._plan_numeric if self.kinds_[c] == "numeric" else self._plan_levels
            canon[i], part = plan(i, c, source[c], t, names)
            steps += part
        self.feature_columns_ = list(names.origin)
        self.column_transformer_ = ColumnTransformer(steps).fit(_frame(canon))

    def _plan_numeric(self, i: int, c: Any, s: pd.Series, t: pd.Series | None,
                      names: _Names) -> tuple[np.ndarray, list[tuple[str, Any, list[int]]]]:
        sv = _numbers(s, c, "source")
        if np.isnan(sv).all():
            raise IngestError(f"column {c!r} is empty (all missing) in the source; drop it")
        tv = None if t is None else _numbers(t, c, "target")
        steps: list[tuple[str, Any, list[int]]] = []
        if np.isnan(sv).any() or (tv is not None and np.isnan(tv).any()):
            self.imputed_[c] = float(np.nanmedian(sv))
            names.claim(f"{c}__missing", f"the missing-value indicator of column {c!r}")
            steps.append((f"missing_{i}", MissingIndicator(features="all"), [i]))
        names.claim(str(c), f"column {c!r}")
        steps.append((f"number_{i}", SimpleImputer(strategy="median"), [i]))
        return sv, steps

    def _plan_levels(self, i: int, c: Any, s: pd.Series, t: pd.Series | None,
                     names: _Names) -> tuple[np.ndarray, list[tuple[str, Any, list[int]]]]:
        s_str = _levels(s)
        levels = sorted(set(s_str.dropna().tolist()))
        if len(levels) > self.max_levels:
            raise IngestError(
                f"column {c!r} is text with {len(levels)} distinct values (more than max_levels="
                f"{self.max_levels}); drop it (drop_columns), bin it, or raise max_levels"
            )
        self.encodings_[c] = levels
        steps: list[tuple[str, Any, list[int]]] = []
        if s.isna().any() or (t is not None and t.isna().any()):
            names.claim(f"{c}__missing", f"the missing-value indicator of column {c!r}")
            steps.append((f"missing_{i}", MissingIndicator(missing_values=None, features="all"), [i]))
        for lev in levels:
            names.claim(f"{c}={lev}", f"level {lev!r} of column {c!r}")
        if levels:
            steps.append((f"levels_{i}", OneHotEncoder(categories=[np.array(levels, dtype=object)],
                                                       handle_unknown="ignore", sparse_output=False,
                                                       dtype=np.float64), [i]))
        return s_str.to_numpy(dtype=object), steps

    def transform(self, X: pd.DataFrame) -> pd.DataFrame:
        """Encode raw rows with the source's feature columns; refuses what ``fit`` refuses in a target."""
        check_is_fitted(self, "column_transformer_")
        frame = _table(X, "target")
        cols = list(self.feature_names_in_)
        _check_same_columns(cols, list(frame.columns))
        canon: dict[int, np.ndarray] = {}
        position = {c: i for i, c in enumerate(self.kept_)}
        for c in cols:  # every column is checked as at fit, kept or dropped
            s = _coerce(frame[c], c, "target")
            _check_kind(c, self.kinds_[c], self.empty_in_source_[c], s)
            if c in position:
                canon[position[c]] = (_numbers(s, c, "target") if self.kinds_[c] == "numeric"
                                      else _levels(s).to_numpy(dtype=object))
        if len(frame) == 0:
            return pd.DataFrame(np.empty((0, len(self.feature_columns_))), columns=self.feature_columns_)
        out = self.column_transformer_.transform(_frame(canon))
        return pd.DataFrame(np.asarray(out, dtype=np.float64), columns=self.feature_columns_)

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """The encoded column names (``feature_columns_``)."""
        check_is_fitted(self, "column_transformer_")
        return np.asarray(self.feature_columns_, dtype=object)


def _frame(canon: dict[int, np.ndarray]) -> pd.DataFrame:
    """Positional frame for the ColumnTransformer: float columns, and text kept as object (None = missing)."""
    return pd.DataFrame({i: pd.Series(v, dtype=object if v.dtype == object else np.float64)
                         for i, v in sorted(canon.items())})


def check_label_column(source: pd.DataFrame, label: str) -> None:
    """Raise ``IngestError`` naming the columns when ``label`` is not a column of the source table."""
    if label not in source.columns:
        raise IngestError(
            f"label column {label!r} is not in the source table (columns: {list(source.columns)}); "
            "pass the name of the column that holds the labels"
        )


def check_labels(source: pd.DataFrame, label: str) -> list[Any]:
    """The source's classes in code order (sorted); raise ``IngestError`` for a missing label column, missing
    labels or fewer than 2 classes — checked before anything (a simulated bias, a stage) needs the labels."""
    check_label_column(source, label)
    y_raw = source[label]
    n_nan = int(y_raw.isna().sum())
    if n_nan:
        raise IngestError(
            f"label column {label!r} has {n_nan} missing value(s) in the source; drop or label those rows"
        )
    if len(y_raw) == 0:
        raise IngestError("source table has 0 rows; point the source at a table with labeled rows")
    classes = sorted(pd.unique(y_raw).tolist(), key=lambda v: (str(type(v)), v))
    if len(classes) < 2:
        raise IngestError(
            f"the source has only one class ({classes[0]!r}) in {label!r}; a classifier needs at least "
            "2 classes — add rows of the other class"
        )
    return classes


def _code_labels(source: pd.DataFrame, target: pd.DataFrame, label: str, positive_label: Any
                 ) -> tuple[list[Any], np.ndarray, np.ndarray | None, list[str]]:
    """Classes in code order, the source codes, the target codes (None when absent or incomplete), notes."""
    classes = check_labels(source, label)
    if positive_label is not None:
        if len(classes) != 2:
            raise IngestError("positive_label only applies to two-class labels")
        if positive_label not in classes:
            raise IngestError(f"positive_label {positive_label!r} is not one of the source labels {classes}")
        classes = [c for c in classes if c != positive_label] + [positive_label]
    code = {c: i for i, c in enumerate(classes)}
    source_y = source[label].map(code).to_numpy(dtype=np.int64)
    target_y: np.ndarray | None = None
    notes: list[str] = []
    if label in target.columns:
        t_lab = target[label]
        if t_lab.isna().any():
            notes.append(f"target label column {label!r} has missing values; target labels not held out")
        else:
            unseen = sorted(set(pd.unique(t_lab).tolist()) - set(classes), key=str)
            if unseen:
                raise IngestError(
                    f"the target's label column {label!r} has values {unseen} never seen in the source "
                    f"({classes}); check that both tables use the same label coding"
                )
            target_y = t_lab.map(code).to_numpy(dtype=np.int64)
    return classes, source_y, target_y, notes


def prepare_tables(
    source: pd.DataFrame,
    target: pd.DataFrame,
    label: str,
    *,
    positive_label: Any = None,
    max_levels: int = 20,
    min_rows_for_id: int = 20,
) -> PreparedData:
    """Validate and encode a labeled source and an (optionally labeled) target; returns PreparedData.

    Fits a ``TablePreprocessor`` on the source's features (the target's only to decide the missing-value
    indicators and id-like columns) and applies it to both tables. Raises ``IngestError`` for: missing
    label column, NaN labels, fewer than 2 source classes, a target with 0 rows, feature columns that differ
    in name or kind, duplicate column names, a categorical column with more than ``max_levels`` levels,
    ±inf in a feature. See the module docstring for the encoding, missing-value and id-column policies.
    """
    _table(source, "source")
    _table(target, "target")
    check_label_column(source, label)
    if len(source) == 0:
        raise IngestError("source table has 0 rows; point the source at a table with labeled rows")
    if len(target) == 0:
        raise IngestError("target set has 0 rows; point the target at a non-empty deployment batch")
    classes, source_y, target_y, notes = _code_labels(source, target, label, positive_label)
    src, tgt = source.drop(columns=[label]), target.drop(columns=[label], errors="ignore")
    pre = TablePreprocessor(max_levels=max_levels, min_rows_for_id=min_rows_for_id).fit(src, target=tgt)
    for c, levels in pre.encodings_.items():
        seen = set(_levels(_coerce(tgt[c], c, "target")).dropna().tolist())
        unseen = sorted(seen - set(levels))
        if unseen:
            notes.append(f"column {c!r}: target levels {unseen[:5]} not in the source encode as all zeros")
    return PreparedData(
        source_X=pre.transform(src),
        source_y=source_y,
        target_X=pre.transform(tgt),
        target_y=target_y,
        classes=classes,
        feature_columns=list(pre.feature_columns_),
        dropped_columns=dict(pre.dropped_),
        encodings=dict(pre.encodings_),
        imputed=dict(pre.imputed_),
        notes=notes,
        preprocessor=pre,
    )
