"""Validate and encode a labeled source table and an unlabeled target table (no I/O).

``prepare_tables(source, target, label)`` turns two raw DataFrames into numeric feature matrices with
identical columns, integer-coded labels and a record of every decision (dropped id columns, one-hot
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
* **Id-like columns** (integer or text, every value distinct in the source and in the target, at
  least ``min_rows_for_id`` rows) are dropped with a warning: they identify rows, not behaviour.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from shiftlib.errors import ShiftflowInputError

__all__ = ["IngestError", "PreparedData", "check_label_column", "check_labels", "prepare_tables"]


class IngestError(ShiftflowInputError):
    """The input tables cannot be used as given; the message names the problem and the fix."""


@dataclass
class PreparedData:
    """Encoded source/target tables. ``X`` frames are float64 with identical column order."""

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


def _check_duplicates(df: pd.DataFrame, which: str) -> None:
    dup = df.columns[df.columns.duplicated()].unique().tolist()
    if dup:
        raise IngestError(
            f"the {which} table has duplicate column names {dup}; rename them so each column is unique"
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

    Raises ``IngestError`` for: missing label column, NaN labels, fewer than 2 source classes, a target
    with 0 rows, feature columns that differ in name or kind, duplicate column names, a categorical
    column with more than ``max_levels`` levels, ±inf in a feature. See the module docstring for the
    encoding, missing-value and id-column policies.
    """
    if not isinstance(source, pd.DataFrame) or not isinstance(target, pd.DataFrame):
        raise IngestError("source and target must be pandas DataFrames")
    _check_duplicates(source, "source")
    _check_duplicates(target, "target")
    check_label_column(source, label)
    if len(source) == 0:
        raise IngestError("source table has 0 rows; point the source at a table with labeled rows")
    if len(target) == 0:
        raise IngestError("target set has 0 rows; point the target at a non-empty deployment batch")

    y_raw = source[label]
    classes = check_labels(source, label)
    if positive_label is not None:
        if len(classes) != 2:
            raise IngestError("positive_label only applies to two-class labels")
        if positive_label not in classes:
            raise IngestError(f"positive_label {positive_label!r} is not one of the source labels {classes}")
        classes = [c for c in classes if c != positive_label] + [positive_label]
    code = {c: i for i, c in enumerate(classes)}
    source_y = y_raw.map(code).to_numpy(dtype=np.int64)

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
        target = target.drop(columns=[label])
    src = source.drop(columns=[label])

    s_cols, t_cols = list(src.columns), list(target.columns)
    missing, extra = [c for c in s_cols if c not in t_cols], [c for c in t_cols if c not in s_cols]
    if missing or extra:
        raise IngestError(
            "feature columns differ between source and target: "
            + (f"missing from the target {missing}" if missing else "")
            + ("; " if missing and extra else "")
            + (f"only in the target {extra}" if extra else "")
            + "; give both tables the same feature columns"
        )
    target = target[s_cols].copy()
    src = src.copy()
    for c in s_cols:
        for which, frame in (("source", src), ("target", target)):
            if pd.api.types.is_complex_dtype(frame[c]):
                raise IngestError(f"column {c!r} holds complex numbers in the {which}; split it into real "
                                  "columns (e.g. real and imaginary parts) or drop it")
            frame[c] = _object_ints_as_float(frame[c])
        ks, kt = _kind(src[c]), _kind(target[c])
        if ks != kt and not (len(target[c].dropna()) == 0 or len(src[c].dropna()) == 0):
            raise IngestError(
                f"column {c!r} is {kt} in the target but {ks} in the source; convert one so both agree"
            )

    dropped: dict[str, str] = {}
    for c in s_cols:
        if _is_id_like(src[c], target[c], min_rows_for_id):
            dropped[c] = "id-like: every value is distinct"
            warnings.warn(f"dropping column {c!r}: it looks like a row id (every value is distinct)",
                          UserWarning, stacklevel=2)
    feats = [c for c in s_cols if c not in dropped]
    if not feats:
        raise IngestError("no feature columns remain after dropping id-like columns; add feature columns")

    out_s: dict[str, np.ndarray] = {}
    out_t: dict[str, np.ndarray] = {}
    origin: dict[str, str] = {}
    encodings: dict[str, list[str]] = {}
    imputed: dict[str, float] = {}

    def put(name: str, sv: np.ndarray, tv: np.ndarray, what: str) -> None:
        if name in out_s:  # e.g. a column named 'a=x' and the one-hot column of level 'x' of column 'a'
            raise IngestError(
                f"the encoded column {name!r} would hold both {origin[name]} and {what}; rename one of the "
                "input columns"
            )
        out_s[name], out_t[name], origin[name] = sv, tv, what

    for c in feats:
        s, t = src[c], target[c]
        has_nan = bool(s.isna().any() or t.isna().any())
        if _kind(s) == "numeric":
            sv = s.to_numpy(dtype=float, na_value=np.nan)
            tv = t.to_numpy(dtype=float, na_value=np.nan)
            for which, v in (("source", sv), ("target", tv)):
                n_inf = int(np.isinf(v).sum())
                if n_inf:
                    raise IngestError(
                        f"column {c!r} has {n_inf} infinite value(s) in the {which} (±inf, or beyond ±1.8e308); "
                        "replace them with finite numbers or leave them empty (NaN) to be imputed"
                    )
            if has_nan:
                if np.isnan(sv).all():
                    raise IngestError(f"column {c!r} is empty (all missing) in the source; drop it")
                med = float(np.nanmedian(sv))
                imputed[c] = med
                put(f"{c}__missing", np.isnan(sv).astype(float), np.isnan(tv).astype(float),
                    f"the missing-value indicator of column {c!r}")
                sv, tv = np.where(np.isnan(sv), med, sv), np.where(np.isnan(tv), med, tv)
            put(str(c), sv, tv, f"column {c!r}")
            continue
        # categorical: text or boolean → one-hot with the source's levels
        s_str, t_str = _levels(s), _levels(t)
        levels = sorted(set(s_str.dropna().tolist()))
        if len(levels) > max_levels:
            raise IngestError(
                f"column {c!r} is text with {len(levels)} distinct values (more than max_levels="
                f"{max_levels}); drop it (drop_columns), bin it, or raise max_levels"
            )
        unseen = sorted(set(t_str.dropna().tolist()) - set(levels))
        if unseen:
            notes.append(f"column {c!r}: target levels {unseen[:5]} not in the source encode as all zeros")
        encodings[c] = levels
        if has_nan:
            put(f"{c}__missing", s_str.isna().to_numpy(dtype=float), t_str.isna().to_numpy(dtype=float),
                f"the missing-value indicator of column {c!r}")
        for lev in levels:
            put(f"{c}={lev}", (s_str == lev).to_numpy(dtype=float), (t_str == lev).to_numpy(dtype=float),
                f"level {lev!r} of column {c!r}")

    columns = list(out_s)
    source_X = pd.DataFrame(out_s, columns=columns)
    target_X = pd.DataFrame(out_t, columns=columns)
    return PreparedData(
        source_X=source_X,
        source_y=source_y,
        target_X=target_X,
        target_y=target_y,
        classes=classes,
        feature_columns=columns,
        dropped_columns=dropped,
        encodings=encodings,
        imputed=imputed,
        notes=notes,
    )
