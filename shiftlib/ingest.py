"""Validate and encode a labeled source table and an unlabeled target table (no I/O).

``check_tables(source, target, label)`` checks two raw DataFrames and decides the encoding
(``plan_encoding``: pure pandas, so a refusal never imports scikit-learn). ``shiftlib.preprocessor.prepare_tables`` then fits the
encoder, ``shiftlib.preprocessor.TablePreprocessor`` (a scikit-learn transformer fitted on the source and
applied to the target, and, as the first step of every served model, to the raw rows a model scores), and
returns numeric feature matrices with identical columns, integer-coded labels and a record of every decision
(dropped id columns, one-hot levels, imputed columns). Policies, stated once:

* **Labels** are coded 0..K-1 in sorted order of the source's label values; for two classes the
  positive class (code 1) is the larger value unless ``positive_label`` is given. NaN labels in the
  source are refused. Labels present in the target are split off (``target_y``) for evaluation only.
* **Text / categorical / boolean columns** are one-hot encoded with the source's levels (sorted);
  a target level never seen in the source encodes as all zeros (reported in ``notes``). A column
  with more than ``max_levels`` distinct source values keeps its ``max_levels`` most frequent source levels
  (ties in sorted order) with a warning; its rarer levels encode as all zeros, as an unseen level does (the
  reference group of the one-hot columns), so a neighbourhood or a product code is used without one column
  per rare value.
* **Missing values**: NaN in a numeric column is imputed with the source median and a 0/1 column
  ``<col>__missing`` is added (in both tables); NaN in a categorical column gets the indicator and
  all-zero level columns. ±inf is refused (it is almost always a upstream bug, not missingness).
  Rows scored later with a missing value where neither table had one are imputed the same way, without
  an indicator (the fitted columns do not change).
* **Id-like columns** (integer or text, every value distinct in the source and in the target, at
  least ``min_rows_for_id`` rows) are dropped with a warning: they identify rows, not behaviour. A column
  *named* like an identifier whose integer or text codes are mostly but not all distinct is kept, with a
  warning that names ``drop_columns``.
* **Date and time columns** (a datetime dtype, as Parquet and SQL sources deliver timestamps) are dropped
  with a warning: a timestamp says when a row was recorded, and a later batch lies outside the training
  table's dates by design, so no learner can extrapolate from it; the numbers a user means by it (month,
  weekday) are theirs to add as columns. A text column of dates (CSV) with more than ``max_levels`` values
  is dropped the same way.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from shiftlib.errors import ShiftflowInputError, quote, quote_list

__all__ = ["CheckedTables", "EncodingPlan", "IngestError", "PreparedData", "canonical_column", "check_label_column",
           "check_labels", "drop_unlabeled", "check_tables", "coerce_column", "feature_origins", "label_rule_columns",
           "plan_encoding", "repeated_units", "spelling_hint"]


class IngestError(ShiftflowInputError):
    """The input tables cannot be used as given; the message names the problem and the fix.

    Parameters
    ----------
    *args : object
        The exception arguments; a single string is the message (bounded as in ``ShiftflowInputError``).
    """


class LabelColumnError(IngestError):
    """The label column is not in the source table (:func:`check_label_column`); the flow adds what it knows of
    where the name came from (the default of the embedded example).

    Parameters
    ----------
    *args : object
        The exception arguments; a single string is the message.
    """


@dataclass
class PreparedData:
    """Encoded source/target tables. ``X`` frames are float64 with identical column order; ``preprocessor``
    is the fitted ``shiftlib.preprocessor.TablePreprocessor`` that produced them (raw feature rows → ``X``).

    Parameters
    ----------
    source_X : pandas.DataFrame
        Encoded source features (float64).
    source_y : numpy.ndarray
        Source labels as class codes 0 … K − 1.
    target_X : pandas.DataFrame
        Encoded target features, same columns as ``source_X``.
    target_y : numpy.ndarray or None
        Target class codes, held out for evaluation; None when the target has no complete label column.
    classes : list
        The label values in code order.
    feature_columns : list of str
        Names of the encoded columns, in order.
    dropped_columns : dict, default {}
        Dropped column → why it was dropped.
    encodings : dict, default {}
        Text/boolean column → its source levels (one-hot columns).
    imputed : dict, default {}
        Numeric column with missing values → the source median that fills them.
    notes : list of str, default []
        Warnings about the tables for the user.
    preprocessor : TablePreprocessor, optional
        The fitted encoder that produced ``source_X`` and ``target_X``.
    """

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
    preprocessor: Any = None

    @property
    def n_source(self) -> int:
        """Number of source rows."""
        return len(self.source_X)

    @property
    def n_target(self) -> int:
        """Number of target rows."""
        return len(self.target_X)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable summary of the encoding decisions (for manifests).

        Returns
        -------
        dict
            Classes, positive label (two classes), feature columns, dropped columns, encodings, imputed
            medians, notes, row counts and whether target labels were held out.
        """
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


#: why a date/time column is dropped (``EncodingPlan.dropped``)
DATETIME_REASON = "date/time: places a row in time rather than describing it"


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
            f"the {which} table has duplicate column names {quote_list(dup)}; rename them so each column is unique"
        )


def _check_same_columns(s_cols: list[Any], t_cols: list[Any]) -> None:
    missing, extra = [c for c in s_cols if c not in t_cols], [c for c in t_cols if c not in s_cols]
    if missing or extra:
        raise IngestError(
            "feature columns differ between source and target: "
            + (f"missing from the target {quote_list(missing)}" if missing else "")
            + ("; " if missing and extra else "")
            + (f"only in the target {quote_list(extra)}" if extra else "")
            + "; give both tables the same feature columns, or name the extra ones in drop_columns (--drop-columns)"
        )


#: cell values that hold several values: Parquet list, map and struct columns arrive as these
_NESTED = (list, tuple, dict, set, frozenset, np.ndarray)


def plain_numbers(s: pd.Series) -> pd.Series | None:
    """A decimal column (Parquet and SQL money columns) as floats, a duration column as its seconds (a duration is
    a quantity); None for any other column.

    Parameters
    ----------
    s : pandas.Series
        A column as read.

    Returns
    -------
    pandas.Series or None
        The column as floats (decimals) or seconds (durations); None when it is neither.
    """
    if pd.api.types.is_timedelta64_dtype(s):
        return s.dt.total_seconds()
    if s.dtype == object and pd.api.types.infer_dtype(s, skipna=True) == "decimal":
        return s.astype(float)
    if isinstance(s.dtype, pd.ArrowDtype) and (pa_type := str(s.dtype.pyarrow_dtype)).startswith(("decimal", "duration")):
        return s.dt.total_seconds() if pa_type.startswith("duration") else s.astype(float)
    return None


def _coerce(s: pd.Series, column: Any, which: str) -> pd.Series:
    """Refuse complex numbers and nested cells (lists, structs); read integers beyond int64, decimals and durations
    as numbers (``plain_numbers``)."""
    if (plain := plain_numbers(s)) is not None:
        return plain
    if pd.api.types.is_complex_dtype(s):
        raise IngestError(f"column {column!r} holds complex numbers in the {which}; split it into real "
                          "columns (e.g. real and imaginary parts) or drop it")
    # infer_dtype (C speed) says 'mixed…' for any object column holding non-scalars; only then look at the cells
    if s.dtype == object and pd.api.types.infer_dtype(s, skipna=True).startswith("mixed"):
        nested = s[s.map(lambda v: isinstance(v, _NESTED))]
        if len(nested):
            raise IngestError(f"column {column!r} holds nested values ({type(nested.iloc[0]).__name__}, e.g. "
                              f"{str(nested.iloc[0])[:40]}) in the {which}: a learner takes one number or level per "
                              f"cell; flatten it into columns, or drop it (--drop-columns {column})")
    return _object_ints_as_float(s)


def _target_numbers(column: Any, source_kind: str, source_empty: bool, t: pd.Series) -> pd.Series:
    """A target column that is text where the source's is numeric, because a few cells hold a code (Cars93's
    ``Cylinders`` = ``rotary``): its numbers written as text are read as numbers and the other values as missing,
    with a warning that names them, as a level the source never saw encodes as all zeros. A column where at least
    half the values are not numbers is returned as it is, for :func:`_check_kind` to refuse."""
    if source_empty or source_kind != "numeric" or _kind(t) != "text":
        return t
    values = t.dropna()
    numbers = pd.to_numeric(values.astype(str).str.strip(), errors="coerce")
    bad = values[numbers.isna()]
    if len(values) == 0 or 2 * len(bad) >= len(values):
        return t
    shown = sorted(map(str, pd.unique(bad)))
    warnings.warn(f"column {column!r} is numeric in the source, but {len(bad)} of the target's {len(values)} values "
                  f"are not numbers ({shown[:5]}{' …' if len(shown) > 5 else ''}): read as missing", UserWarning,
                  stacklevel=4)
    out = pd.Series(np.nan, index=t.index, dtype=float)
    out[numbers.index] = numbers.to_numpy(dtype=float)
    return out


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


#: a column name that says "identifier": id, ID, Id alone or as a word (sample_id, ID code, customerID)
_ID_NAME = re.compile(r"(?:^|[^A-Za-z])(?:id|ID|Id)(?:$|[^A-Za-z])|[a-z](?:ID|Id)$")


def _id_named_codes(name: Any, s: pd.Series) -> int | None:
    """How many distinct codes a column holds when its name says identifier and at least half its integer or
    text values are distinct (MASS biopsy's sample ``ID`` repeats for re-measured samples, so it is not id-like);
    else None. Such a column is warned of, not dropped: only the user knows whether the codes carry information."""
    if not isinstance(name, str) or not _ID_NAME.search(name) or len(s) == 0:
        return None
    if not (pd.api.types.is_integer_dtype(s) or _is_text(s)):
        return None
    n = int(s.nunique())
    return n if n >= 0.5 * len(s) else None


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


@dataclass(frozen=True)
class EncodingPlan:
    """What the encoder learns from the source (and the target's missingness): every decision, no arrays.

    ``kinds`` and ``empty_in_source`` cover every source feature column; ``kept`` are the columns encoded, in
    order; ``indicators`` the kept columns that get a ``<col>__missing`` column; ``feature_columns`` the
    encoded names in output order.

    Parameters
    ----------
    columns : list
        The source's feature columns, in order.
    kinds : dict
        Column → ``"numeric"``, ``"text"`` or ``"boolean"``.
    empty_in_source : dict
        Column → whether it is all missing in the source.
    dropped : dict
        Dropped column → why (id-like, date/time).
    kept : list
        Columns encoded, in order.
    encodings : dict
        Kept text/boolean column → its sorted source levels.
    imputed : dict
        Kept numeric column with a missing value → the source median.
    indicators : list
        Kept columns that get a ``<col>__missing`` column.
    feature_columns : list of str
        Encoded column names in output order.
    """

    columns: list[Any]
    kinds: dict[Any, str]
    empty_in_source: dict[Any, bool]
    dropped: dict[Any, str]
    kept: list[Any]
    encodings: dict[Any, list[str]]
    imputed: dict[Any, float]
    indicators: list[Any]
    feature_columns: list[str]


def coerce_column(s: pd.Series, column: Any, source_kind: str, source_empty: bool) -> pd.Series:
    """A target (or served) column read as the source's column was: complex refused, integers beyond int64 as
    numbers, and a kind other than the source's refused (unless either side is all missing).

    Parameters
    ----------
    s : pandas.Series
        The target (or served) column.
    column : object
        Its name, for the error messages.
    source_kind : str
        The source column's kind (``"numeric"``, ``"text"`` or ``"boolean"``).
    source_empty : bool
        Whether the source column is all missing (then any kind is accepted).

    Returns
    -------
    pandas.Series
        The column, with decimals, durations and integers beyond int64 read as numbers.

    Raises
    ------
    IngestError
        For complex numbers, nested cells, or a kind that differs from the source's.
    """
    s = _target_numbers(column, source_kind, source_empty, _coerce(s, column, "target"))
    _check_kind(column, source_kind, source_empty, s)
    return s


def canonical_column(s: pd.Series, column: Any, kind: str) -> np.ndarray:
    """The encoder's input for one kept column: float64 with NaN (numbers, ±inf refused) or text with None.

    Parameters
    ----------
    s : pandas.Series
        The column (already through :func:`coerce_column`).
    column : object
        Its name, for the error message.
    kind : str
        The source column's kind; ``"numeric"`` gives floats, anything else text.

    Returns
    -------
    numpy.ndarray
        float64 with NaN for missing, or object array of str with None for missing.

    Raises
    ------
    IngestError
        For ±inf in a numeric column.
    """
    return _numbers(s, column, "target") if kind == "numeric" else _levels(s).to_numpy(dtype=object)


def plan_encoding(source: pd.DataFrame, target: pd.DataFrame | None = None, *, max_levels: int = 20,
                  min_rows_for_id: int = 20) -> EncodingPlan:
    """Check the feature tables and decide the encoding (module docstring); raises ``IngestError``.

    Pure pandas (no scikit-learn import), so a refusal is fast. Medians and levels come from ``source``;
    ``target`` only decides the missing-value indicators, confirms id-like columns and is checked for the
    same columns and kinds.

    Parameters
    ----------
    source : pandas.DataFrame
        Source feature table (label excluded).
    target : pandas.DataFrame, optional
        Target feature table with the same columns.
    max_levels : int, default 20
        A text column with more distinct source values is refused.
    min_rows_for_id : int, default 20
        Fewest rows for a column whose every value is distinct to be dropped as an id.

    Returns
    -------
    EncodingPlan
        Every encoding decision.

    Raises
    ------
    IngestError
        When the tables cannot be encoded as given.
    """
    source, target, kinds, empty = _coerced_tables(source, target)
    cols = list(source.columns)
    dropped = _dropped_columns(source, target, cols, min_rows_for_id, max_levels)
    kept = [c for c in cols if c not in dropped]
    for c in kept:
        if (n_codes := _id_named_codes(c, source[c])) is not None:
            warnings.warn(f"column {c!r} is named like an identifier and holds {n_codes} distinct "
                          f"codes in {len(source)} source rows: it is used as a feature; if it is a key, "
                          f"pass --drop-columns {c} (drop_columns)", UserWarning, stacklevel=3)
    if not kept:
        raise IngestError("no feature columns remain after dropping id-like and date/time columns; add feature columns")
    # of any kind (a SQL column of NULLs arrives as text): it would be a constant indicator. All named at once
    # (helper-39 was refused one column per run)
    if blank := [c for c in kept if empty[c]]:
        names_ = ", ".join(repr(c) for c in blank)
        raise IngestError(f"column{'s' if len(blank) > 1 else ''} {names_} {'are' if len(blank) > 1 else 'is'} empty "
                          f"(all missing) in the source; drop {'them' if len(blank) > 1 else 'it'} (--drop-columns "
                          f"{','.join(map(str, blank))})")
    names = _Names()
    encodings: dict[Any, list[str]] = {}
    imputed: dict[Any, float] = {}
    indicators: list[Any] = []
    for c in kept:
        s, t = source[c], None if target is None else target[c]
        if kinds[c] == "numeric":
            sv = _numbers(s, c, "source")
            tv = None if t is None else _numbers(t, c, "target")
            if np.isnan(sv).any() or (tv is not None and np.isnan(tv).any()):
                imputed[c] = float(np.nanmedian(sv))
                indicators.append(c)
                names.claim(f"{c}__missing", f"the missing-value indicator of column {c!r}")
            names.claim(str(c), f"column {c!r}")
            continue
        encodings[c] = _source_levels(s, c, max_levels)
        if s.isna().any() or (t is not None and t.isna().any()):
            indicators.append(c)
            names.claim(f"{c}__missing", f"the missing-value indicator of column {c!r}")
        for lev in encodings[c]:
            names.claim(f"{c}={lev}", f"level {lev!r} of column {c!r}")
    return EncodingPlan(cols, kinds, empty, dropped, kept, encodings, imputed, indicators, list(names.origin))


def _coerced_tables(source: pd.DataFrame, target: pd.DataFrame | None
                    ) -> tuple[pd.DataFrame, pd.DataFrame | None, dict[Any, str], dict[Any, bool]]:
    """Copies of the tables with every column coerced and checked, each column's source kind and emptiness."""
    source = _table(source, "source").copy()
    cols = list(source.columns)
    if target is not None:
        _check_same_columns(cols, list(_table(target, "target").columns))
        target = target[cols].copy()
    kinds: dict[Any, str] = {}
    empty: dict[Any, bool] = {}
    for c in cols:
        source[c] = _coerce(source[c], c, "source")
        if target is not None:
            target[c] = _coerce(target[c], c, "target")
        kinds[c], empty[c] = _kind(source[c]), bool(len(source[c].dropna()) == 0)
        if target is not None:
            target[c] = _target_numbers(c, kinds[c], empty[c], target[c])
            _check_kind(c, kinds[c], empty[c], target[c])
    return source, target, kinds, empty


#: a column whose repeated values look like records of one case: the label is the same within at least this share
#: of its repeated values, ...
UNIT_CONSTANT = 0.95
#: ... at least this far above what independent labels would give by chance (a rare class alone makes small
#: groups agree) ...
UNIT_ABOVE_CHANCE = 0.2
#: ... and at least this share of the rows shares its value with another row
UNIT_REPEATED_ROWS = 0.2


@dataclass(frozen=True)
class RepeatedUnits:
    """A column whose values repeat over the source rows with the label the same within each value: the rows may be
    several records of one case (an event, a person), which random folds split across training and validation.

    Parameters
    ----------
    column : object
        The column.
    rows : int
        Source rows whose value of it another row shares.
    units : int
        Its distinct values over those rows.
    constant : float
        Share of those values within which the label is the same.
    chance : float
        That share expected if the labels were independent of the column (the class shares to the power of each
        value's row count, summed over classes, averaged over the values).
    """

    column: Any
    rows: int
    units: int
    constant: float
    chance: float


def repeated_units(source: pd.DataFrame, label: str, columns: Any) -> list[RepeatedUnits]:
    """The ``columns`` (e.g. those the encoder drops as ids or dates: they describe no row, so a repeated value is a
    repeated case) whose repeated values hold one label each, far beyond chance: random k-fold cross-validation
    then puts records of one case on both sides of a fold, and a learner that memorises the case looks better than
    it is on new cases (helper-39: HGB's 10-fold CV 0.934 on police records sharing an incident's timestamp, 0.658
    with the incidents kept whole, 0.518 on the next batch).

    Parameters
    ----------
    source : pandas.DataFrame
        The labeled source table.
    label : str
        Its label column.
    columns : iterable
        The columns to look at.

    Returns
    -------
    list of RepeatedUnits
        One per column found (:data:`UNIT_CONSTANT`, :data:`UNIT_ABOVE_CHANCE`, :data:`UNIT_REPEATED_ROWS`).
    """
    y = source[label]
    shares = y.value_counts(normalize=True, dropna=True).to_numpy(float)
    out = []
    for c in columns:
        if c not in source.columns or c == label:
            continue
        values = source[c].astype("string")
        sizes = values.map(values.value_counts(dropna=True))
        rep = sizes.ge(2).fillna(False).to_numpy(bool) & y.notna().to_numpy(bool)
        if rep.sum() < UNIT_REPEATED_ROWS * len(source) or rep.sum() < 2:
            continue
        groups = pd.DataFrame({"v": values[rep].to_numpy(), "y": y[rep].to_numpy()}).groupby("v")["y"]
        n = groups.size()
        n = n[n >= 2]
        if n.empty:
            continue
        constant = float((groups.nunique().loc[n.index] == 1).mean())
        chance = float(np.mean([np.sum(shares ** k) for k in n.to_numpy()]))
        if constant >= UNIT_CONSTANT and constant - chance >= UNIT_ABOVE_CHANCE:
            out.append(RepeatedUnits(c, int(n.sum()), int(len(n)), constant, chance))
    return out


def _dropped_columns(source: pd.DataFrame, target: pd.DataFrame | None, cols: list[Any],
                     min_rows_for_id: int, max_levels: int) -> dict[Any, str]:
    """Date/time and id-like columns → why they are dropped, each with a warning: they describe no row."""
    # stacklevel 4 (one frame below plan_encoding's 3): the warnings still name the same caller
    dropped = {c: DATETIME_REASON for c in cols
               if _is_datetime(source[c]) or (target is not None and _is_datetime(target[c]))}
    for c in dropped:
        warnings.warn(f"dropping column {c!r}: it holds dates/times, which place a row in time rather than "
                      "describe it (add month or weekday as number columns to use them)", UserWarning, stacklevel=4)
    ids = {c: "id-like: every value is distinct" for c in cols if c not in dropped
           and _is_id_like(source[c], None if target is None else target[c], min_rows_for_id)}
    for c in ids:
        if _is_text(source[c]) and _looks_like_dates(sorted(source[c].dropna().astype(str).unique())):
            ids[c] = DATETIME_REASON  # dates written as text, one per row: say dates, not a row id
            warnings.warn(f"dropping column {c!r}: it holds dates/times as text, which place a row in time rather "
                          "than describe it (add month or weekday as number columns to use them)", UserWarning,
                          stacklevel=4)
            continue
        warnings.warn(f"dropping column {c!r}: it looks like a row id (every value is distinct)",
                      UserWarning, stacklevel=4)
    dropped |= ids
    for c in cols:  # dates as text (a CSV) with more than max_levels values: dropped as a date/time type is
        if c not in dropped and _is_text(source[c]):
            levels = sorted(set(_levels(source[c]).dropna().tolist()))
            if len(levels) > max_levels and _looks_like_dates(levels):
                dropped[c] = DATETIME_REASON
                warnings.warn(f"dropping column {c!r}: it holds dates/times as text ({len(levels)} distinct values, "
                              f"e.g. {levels[0]!r}), which place a row in time rather than describe it (add month or "
                              "weekday as number columns to use them)", UserWarning, stacklevel=4)
    return dropped


def _is_datetime(s: pd.Series) -> bool:
    """A column of timestamps or dates as types (datetime64, or Python ``date``/``datetime`` objects, as
    Parquet date columns and SQL DATE columns arrive), not text that reads as dates."""
    if pd.api.types.is_datetime64_any_dtype(s):
        return True
    return s.dtype == object and pd.api.types.infer_dtype(s, skipna=True) in ("date", "datetime", "datetime64")


#: a date or time written as text: a year 1800–2099 or a clock time hh:mm (not fractions, ratios or bands)
_DATE_TEXT = re.compile(r"(?<!\d)(1[89]\d\d|20\d\d)(?!\d)|(?<!\d)\d{1,2}:\d{2}(?!\d)")


def _looks_like_dates(levels: list[str]) -> bool:
    """Nine in ten of (up to 50 of) the values hold a year or a clock time and parse as dates."""
    sample = levels[:: max(1, len(levels) // 50)][:50]
    if sum(bool(_DATE_TEXT.search(v)) for v in sample) < 0.9 * len(sample):
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parsed = pd.to_datetime(pd.Series(sample), errors="coerce", format="mixed")
    return bool(parsed.notna().mean() >= 0.9)


def _source_levels(s: pd.Series, column: Any, max_levels: int) -> list[str]:
    levels = sorted(set(_levels(s).dropna().tolist()))  # (dates as text over max_levels: dropped before)
    if len(levels) > max_levels:
        counts = _levels(s).dropna().value_counts().sort_index()
        top = counts.sort_values(ascending=False, kind="stable").index[:max_levels]  # ties: sorted order
        covered = counts[top].sum() / counts.sum()
        warnings.warn(
            f"column {column!r} is text with {len(levels)} distinct values (more than max_levels={max_levels}): "
            f"its {max_levels} most frequent source levels are encoded ({covered:.0%} of the source rows) and the "
            f"other {len(levels) - max_levels} encode as all zeros, as an unseen level does; raise max_levels to "
            f"keep more, or drop it (--drop-columns {column})", UserWarning, stacklevel=4)
        return sorted(top.tolist())
    return levels


def check_label_column(source: pd.DataFrame, label: str) -> None:
    """Raise ``IngestError`` naming the columns when ``label`` is not a column of the source table.

    Parameters
    ----------
    source : pandas.DataFrame
        The source table.
    label : str
        Name of the label column.

    Raises
    ------
    IngestError
        When ``label`` is not a column of ``source``.
    """
    if label not in source.columns:
        import difflib

        names = [str(c) for c in source.columns]
        near = ([c for c in names if c.lower() == str(label).lower()]
                or difflib.get_close_matches(str(label), names, n=1))
        hint = f"; did you mean {quote(near[0])}?" if near else ""
        raise LabelColumnError(
            f"label column {quote(label)} is not in the source table (columns: {quote_list(source.columns)}); "
            f"pass the name of the column that holds the labels{hint}"
        )


def drop_unlabeled(source: pd.DataFrame, label: str) -> tuple[pd.DataFrame, str | None]:
    """The source rows that carry a label, and a note saying how many were left out (None when none were).
    A row without a label can neither train nor validate a classifier; a source whose labels are all missing
    is kept whole, for :func:`check_labels` to refuse.

    Parameters
    ----------
    source : pandas.DataFrame
        The source table (with the label column: :func:`check_label_column`).
    label : str
        Name of the label column.

    Returns
    -------
    (pandas.DataFrame, str or None)
        The labeled rows (index reset) and the note.
    """
    check_label_column(source, label)
    missing = source[label].isna()
    n = int(missing.sum())
    if n == 0 or n == len(source):
        return source, None
    return source[~missing].reset_index(drop=True), (
        f"label column {label!r} is empty in {n} of {len(source)} source rows; those rows are left out (a row "
        "without a label can neither train nor validate a model)")


def check_labels(source: pd.DataFrame, label: str) -> list[Any]:
    """The source's classes in code order (sorted); raise ``IngestError`` for a missing label column, missing
    labels or fewer than 2 classes — checked before anything (a simulated bias, a stage) needs the labels.

    Parameters
    ----------
    source : pandas.DataFrame
        The source table.
    label : str
        Name of the label column.

    Returns
    -------
    list
        The distinct label values, sorted (by type name, then value).

    Raises
    ------
    IngestError
        For a missing label column, missing, infinite or fractional labels, an empty source, one class
        spelled several ways, or fewer than 2 classes.
    """
    check_label_column(source, label)
    y_raw = source[label]
    n_nan = int(y_raw.isna().sum())
    if n_nan:
        raise IngestError(
            f"label column {label!r} has {n_nan} missing value(s) in the source; drop or label those rows"
        )
    if len(y_raw) == 0:
        raise IngestError("source table has 0 rows; point the source at a table with labeled rows")
    if pd.api.types.is_float_dtype(y_raw) and not np.isfinite(y_raw.to_numpy(dtype=np.float64)).all():
        raise IngestError(f"label column {label!r} holds infinite values in the source; a label is a class: "
                          "correct or drop those rows")
    if pd.api.types.is_float_dtype(y_raw) and not np.all(np.mod(y_raw.to_numpy(dtype=np.float64), 1) == 0):
        example = next(v for v in y_raw.tolist() if v % 1)
        raise IngestError(
            f"label column {label!r} holds fractional numbers (e.g. {example!r}, {y_raw.nunique()} distinct "
            "values): it looks like a quantity, and shiftflow trains classifiers; bin it into classes (for "
            "example with pandas.cut) and pass that column as the label"
        )
    classes = sorted(pd.unique(y_raw).tolist(), key=lambda v: (str(type(v)), v))
    _one_spelling(classes, label)
    if len(classes) < 2:
        raise IngestError(
            f"the source has only one class ({classes[0]!r}) in {label!r}; a classifier needs at least "
            "2 classes — add rows of the other class"
        )
    return classes


def _spelled(v: Any) -> Any:
    """A text label as spelling-blind comparison sees it: without surrounding spaces, case folded."""
    return v.strip().casefold() if isinstance(v, str) else v


def _spelling(groups: list[list[str]]) -> str:
    """How the spellings within each group (one label each) differ: 'case', 'surrounding spaces', both, or ''."""
    case = any(len({w.strip() for w in g}) > 1 for g in groups)
    spaces = any(w != w.strip() for g in groups for w in g)
    return " and ".join(["case"] * case + ["surrounding spaces"] * spaces)


def _one_spelling(classes: list[Any], label: str) -> None:
    """Refuse text labels that spell one class several ways ('yes' and 'yes ', 'Yes' and 'yes'): each spelling
    would become a class of its own, and the models would be trained and scored on the split classes."""
    groups: dict[str, list[str]] = {}
    for c in classes:
        if isinstance(c, str):
            groups.setdefault(_spelled(c), []).append(c)
    split = [g for g in groups.values() if len(g) > 1]
    if split:
        shown = "; ".join(" and ".join(repr(v) for v in g) for g in split[:3])
        what = _spelling(split)
        raise IngestError(f"label column {label!r} spells a class in several ways in the source ({shown}: they differ "
                          f"only in {what}); give each class one spelling in the table")


def _code_labels(source: pd.DataFrame, target: pd.DataFrame, label: str, positive_label: Any
                 ) -> tuple[list[Any], np.ndarray, np.ndarray | None, list[str]]:
    """Classes in code order, the source codes, the target codes (None when absent or incomplete), notes."""
    classes = check_labels(source, label)
    if positive_label is not None:
        if len(classes) != 2:
            raise IngestError("positive_label only applies to two-class labels")
        if positive_label not in classes:
            yaml = (" (YAML reads an unquoted yes, no, on, off, true or false as a boolean: quote the label, e.g. "
                    "positive_label: \"Yes\")" if isinstance(positive_label, bool) else "")
            raise IngestError(f"positive_label {positive_label!r} is not one of the source labels {classes}{yaml}")
        classes = [c for c in classes if c != positive_label] + [positive_label]
    code = {c: i for i, c in enumerate(classes)}
    source_y = source[label].map(code).to_numpy(dtype=np.int64)
    target_y: np.ndarray | None = None
    notes: list[str] = []
    if label in target.columns:
        t_lab = target[label]
        if t_lab.isna().all():
            notes.append(f"the target's label column {label!r} is empty: the candidates are not evaluated on the "
                         "target (a batch without labels; remove the column from the target table to silence this)")
        elif t_lab.isna().any():
            notes.append(f"the target's label column {label!r} is empty in {int(t_lab.isna().sum())} of {len(t_lab)} "
                         "rows, so its labels are not used to evaluate the candidates (the labeled rows may not be "
                         "a random part of the batch); to evaluate, pass a target whose rows all carry a label")
        else:
            unseen = sorted(set(pd.unique(t_lab).tolist()) - set(classes), key=str)
            if unseen and spelling_hint(unseen, classes):  # the same classes spelt another way: a coding error
                raise IngestError(
                    f"the target's label column {label!r} has values {unseen} never seen in the source "
                    f"({classes}){spelling_hint(unseen, classes)}; check that both tables use the same label coding"
                )
            if unseen:  # a class the batch has and the source lacks (e.g. a species only on one island)
                n_new = int(t_lab.isin(unseen).sum())
                notes.append(f"the target's label column {label!r} has values {unseen} never seen in the source "
                             f"({classes}) in {n_new} of {len(t_lab)} rows: no candidate can predict them, so the "
                             "candidates are not evaluated on the target (if they are source classes coded another "
                             "way, recode one table)")
            else:
                target_y = t_lab.map(code).to_numpy(dtype=np.int64)
    return classes, source_y, target_y, notes


def spelling_hint(values: list[Any], classes: list[Any]) -> str:
    """': they differ from the source's only in case' (or surrounding spaces, or both) when that is all that
    tells label ``values`` from the source's ``classes``; '' otherwise. For refusals: labels are not respelled.

    Parameters
    ----------
    values : list
        Label values not found in the source.
    classes : list
        The source's classes.

    Returns
    -------
    str
        The hint, or ``''``.
    """
    source = {_spelled(c): c for c in classes}
    if not values or any(_spelled(v) not in source for v in values):
        return ""
    pairs = [[v, source[_spelled(v)]] for v in values]
    what = _spelling([p for p in pairs if all(isinstance(w, str) for w in p)])
    return f": they differ from the source's only in {what}" if what else ""


@dataclass(frozen=True)
class CheckedTables:
    """``check_tables``' answer: the labels coded and the encoding decided, nothing encoded yet.

    Parameters
    ----------
    classes : list
        The label values in code order.
    source_y : numpy.ndarray
        Source class codes.
    target_y : numpy.ndarray or None
        Target class codes; None when the target has no complete label column.
    plan : EncodingPlan
        The encoding decided.
    notes : list of str
        Warnings about the tables for the user.
    n_source : int
        Source rows.
    n_target : int
        Target rows.
    """

    classes: list[Any]
    source_y: np.ndarray
    target_y: np.ndarray | None
    plan: EncodingPlan
    notes: list[str]
    n_source: int
    n_target: int

    @property
    def feature_columns(self) -> list[str]:
        """The encoded column names (``plan.feature_columns``)."""
        return self.plan.feature_columns


#: a column is said to separate the classes only when every class has at least this many rows with a value
LEAK_MIN_ROWS = 5


#: the deepest tree :func:`label_rule_columns` fits: a label it reproduces on every held-out row follows from a few
#: columns by a handful of thresholds, as a label computed from them does (a real outcome rarely does)
LEAK_DEPTH = 3
#: share of out-of-fold rows :func:`label_rule_columns` allows wrong: a rule learnt without a fold's rows may put its
#: threshold beyond one of them (MASS birthwt: ``low`` is ``bwt`` < 2500; a fold without bwt = 2523 cut at 2523)
LEAK_OOF_ERRORS = 0.01
#: rows :func:`label_rule_columns` looks at (a stratified sample beyond it: a rule exact on all rows is exact on these)
LEAK_ROWS = 20_000


def feature_origins(plan: EncodingPlan) -> dict[str, Any]:
    """Each encoded column's source column (``c``, ``c=level`` and ``c__missing`` all come from ``c``).

    Parameters
    ----------
    plan : EncodingPlan
        The encoder's plan.

    Returns
    -------
    dict
        Encoded column name → the source column it encodes.
    """
    out: dict[str, Any] = {}
    for c in plan.kept:
        if c in plan.indicators:
            out[f"{c}__missing"] = c
        if plan.kinds[c] == "numeric":
            out[str(c)] = c
        else:
            out |= {f"{c}={lev}": c for lev in plan.encodings[c]}
    return out


def label_rule_columns(X: pd.DataFrame, y: np.ndarray, origins: dict[str, Any], *, max_depth: int = LEAK_DEPTH,
                       folds: int = 5, max_rows: int = LEAK_ROWS, random_state: int = 0) -> list[Any]:
    """The source columns the label follows from exactly, or [] when it does not: a decision tree of depth at most
    ``max_depth`` fitted on every row is right on every row, and in a stratified ``folds``-fold cross-validation
    wrong on at most :data:`LEAK_OOF_ERRORS` of them (a few rows at the thresholds, not noise); the columns are those
    the tree splits on. Each class needs ``LEAK_MIN_ROWS`` rows (and ``folds``). It extends
    the single-column check of :func:`check_tables` (a threshold on one column) to a few columns, which a label
    computed from them (or recorded after the outcome with them) satisfies and a real outcome rarely does. A tree,
    because a rule of a few thresholds is what such labels are; scikit-learn's tree and folds do the work.

    Parameters
    ----------
    X : pandas.DataFrame
        Encoded source features (``PreparedData.source_X``).
    y : numpy.ndarray
        Source class codes.
    origins : dict
        Encoded column → source column (:func:`feature_origins`).
    max_depth : int, default LEAK_DEPTH
        Depth of the tree.
    folds : int, default 5
        Cross-validation folds.
    max_rows : int, default LEAK_ROWS
        Rows looked at; a stratified sample beyond it.
    random_state : int, default 0
        Seed of the folds and the sample.

    Returns
    -------
    list
        Source columns, in the order of the tree's first use; [] when the label does not follow from them.
    """
    from sklearn.model_selection import StratifiedKFold, cross_val_predict, train_test_split
    from sklearn.tree import DecisionTreeClassifier

    y = np.asarray(y)
    counts = np.bincount(y) if len(y) else np.array([], int)
    counts = counts[counts > 0]
    if len(counts) < 2 or counts.min() < max(LEAK_MIN_ROWS, folds):
        return []
    if len(y) > max_rows:
        X, _, y, _ = train_test_split(X, y, train_size=max_rows, stratify=y, random_state=random_state)
    tree = DecisionTreeClassifier(max_depth=max_depth, random_state=random_state)
    if not np.array_equal(tree.fit(X, y).predict(X), y):
        return []
    cv = StratifiedKFold(folds, shuffle=True, random_state=random_state)
    if np.mean(cross_val_predict(tree, X, y, cv=cv) != y) > LEAK_OOF_ERRORS:  # fits clones: `tree` stays fitted
        return []
    used = tree.tree_.feature
    out: list[Any] = []
    for j in used[used >= 0]:
        c = origins.get(str(X.columns[j]), X.columns[j])
        if c not in out:
            out.append(c)
    return out


def _missing_note(src: pd.DataFrame, tgt: pd.DataFrame, plan: EncodingPlan, shown: int = 5) -> str:
    """The note that says which columns had missing values, how many in each table, and what filled them."""
    def n_missing(s: pd.Series, c: Any) -> int:  # as the encoder reads it: text codes among numbers are missing
        return int(pd.to_numeric(s, errors="coerce").isna().sum()) if c in plan.imputed else int(s.isna().sum())

    parts = []
    for c in plan.indicators:
        fill = f"the source median {plan.imputed[c]:g}" if c in plan.imputed else "no level (all level columns 0)"
        parts.append(f"{c!r}: {n_missing(src[c], c)} of {len(src)} source rows and {n_missing(tgt[c], c)} of "
                     f"{len(tgt)} target rows, filled with {fill}")
    more = f"; and {len(parts) - shown} more columns" if len(parts) > shown else ""
    return (f"missing values in {len(parts)} column{'s' * (len(parts) > 1)}, each with a 0/1 column "
            f"<column>__missing beside it so that the models can tell a filled value from a real one ("
            + "; ".join(parts[:shown]) + more + "); if a column is missing for reasons the batch does not share, "
            "drop it (--drop-columns)")


def _separating_columns(src: pd.DataFrame, y: np.ndarray, plan: EncodingPlan) -> list[Any]:
    """Numeric feature columns whose values put every source class in a range of its own (no two classes'
    [min, max] overlap), each class with at least ``LEAK_MIN_ROWS`` values: a threshold on the column alone
    predicts the label perfectly, which in real data usually means it was recorded after the outcome."""
    out = []
    for c in plan.kept:
        if plan.kinds[c] != "numeric":
            continue
        v = _numbers(_coerce(src[c], c, "source"), c, "source")
        ok = ~np.isnan(v)
        ranges = []
        for k in np.unique(y):
            vk = v[ok & (y == k)]
            if len(vk) < LEAK_MIN_ROWS:
                break
            ranges.append((vk.min(), vk.max()))
        else:
            ranges.sort()
            if len(ranges) > 1 and all(hi < lo for (_, hi), (lo, _) in zip(ranges, ranges[1:], strict=False)):
                out.append(c)
    return out


def check_tables(
    source: pd.DataFrame,
    target: pd.DataFrame,
    label: str,
    *,
    positive_label: Any = None,
    max_levels: int = 20,
    min_rows_for_id: int = 20,
) -> CheckedTables:
    """Every check ``prepare_tables`` makes, and its decisions, without encoding; raises ``IngestError``.

    Raises for: missing label column, NaN labels, fewer than 2 source classes, a target with 0 rows, feature
    columns that differ in name or kind, duplicate column names, a categorical column with more than
    ``max_levels`` levels, ±inf in a feature. Pure pandas: a refusal never imports scikit-learn.

    Parameters
    ----------
    source : pandas.DataFrame
        Labeled source table.
    target : pandas.DataFrame
        Target table; its label column, if present, is split off for evaluation.
    label : str
        Name of the label column.
    positive_label : object, optional
        For two classes, the label value coded 1; default the larger value.
    max_levels : int, default 20
        A text column with more distinct source values is refused.
    min_rows_for_id : int, default 20
        Fewest rows for a column whose every value is distinct to be dropped as an id.

    Returns
    -------
    CheckedTables
        The coded labels, the encoding plan and the notes.

    Raises
    ------
    IngestError
        When the tables cannot be used as given.
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
    plan = plan_encoding(src, tgt, max_levels=max_levels, min_rows_for_id=min_rows_for_id)
    for c, levels in plan.encodings.items():
        if levels and _looks_like_dates([str(v) for v in levels]):  # SQLite, CSV: dates arrive as text
            notes.append(f"column {c!r} holds dates or times as text ({len(levels)} values, e.g. {levels[0]!r}), "
                         "encoded as levels: a later batch's dates will be levels the source never had; drop it "
                         f"(--drop-columns {c}) or add the numbers you mean (month, weekday) as columns")
        in_source = set(_levels(_coerce(src[c], c, "source")).dropna().tolist())  # a rare source level left out is in the warning
        unseen = sorted(set(_levels(_coerce(tgt[c], c, "target")).dropna().tolist()) - set(levels) - in_source)
        if unseen:
            more = f" ({len(unseen)} levels)" if len(unseen) > 5 else ""
            notes.append(f"column {c!r}: target levels {unseen[:5]}{more} not in the source encode as all zeros")
    for c in plan.kept:
        if tgt[c].isna().all():  # (the target has rows and the source's columns: checked above)
            notes.append(f"column {c!r} is empty (all missing) in the target: every target row gets the source's "
                         f"fill-in value, and the drift stage will find this column changed; if that is a fault of "
                         f"the batch, fix it, or drop the column (--drop-columns {c})")
    if plan.indicators:
        notes.append(_missing_note(src, tgt, plan))
    for c in _separating_columns(src, source_y, plan):
        notes.append(f"column {c!r} alone separates the source classes (each class in a range of values of its own): "
                     "if it is recorded after the outcome, it leaks the label and every estimate will look perfect; "
                     f"then drop it (--drop-columns {c})")
    return CheckedTables(classes, source_y, target_y, plan, notes, len(source), len(target))
