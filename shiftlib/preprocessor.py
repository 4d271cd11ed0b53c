"""``TablePreprocessor``: the fitted encoder of ``shiftlib.ingest`` as a scikit-learn transformer.

Fitted on the source (``plan_encoding`` decides, scikit-learn's encoders learn), applied to the target and,
as the first step of every served model's pipeline, to the raw rows a model scores. The rules are those of
``shiftlib.ingest`` (its module docstring); this module only builds and runs the encoders.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.compose import ColumnTransformer
from sklearn.impute import MissingIndicator, SimpleImputer
from sklearn.preprocessing import OneHotEncoder
from sklearn.utils.validation import check_is_fitted

from shiftlib.ingest import (
    EncodingPlan,
    PreparedData,
    _check_same_columns,
    _table,
    canonical_column,
    check_tables,
    coerce_column,
    plan_encoding,
)

__all__ = ["TablePreprocessor", "prepare_tables"]


class TablePreprocessor(TransformerMixin, BaseEstimator):
    """Raw feature rows → float64 encoded features with the source's medians and levels.

    A ``ColumnTransformer`` with, per kept column in source order, a ``MissingIndicator`` (when the column has
    a missing value in the source or in the ``target`` given to ``fit``) followed by a median
    ``SimpleImputer`` (numbers) or a ``OneHotEncoder`` with the source's sorted levels (text, booleans;
    unseen levels → all zeros). Medians and levels are learned from the source only; ``target`` only decides
    which missing-value indicators exist, confirms id-like columns and is checked for the same columns and
    kinds (``shiftlib.ingest.plan_encoding``).

    Parameters
    ----------
    max_levels : int, default=20
        A text column with more distinct source values is refused.
    min_rows_for_id : int, default=20
        Fewest rows for a column whose every value is distinct to be dropped as an id.

    Attributes
    ----------
    plan_ : shiftlib.ingest.EncodingPlan
        Every decision (kinds, dropped columns, levels, medians, indicators, output names).
    feature_names_in_ : ndarray of object
        The source's feature columns: the raw input ``transform`` expects.
    kinds_ : dict
        Column → ``"numeric"``, ``"text"`` or ``"boolean"`` (as read in the source).
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
        plan = plan_encoding(X, target, max_levels=self.max_levels, min_rows_for_id=self.min_rows_for_id)
        return self.fit_plan(plan, X)

    def fit_plan(self, plan: EncodingPlan, X: pd.DataFrame) -> TablePreprocessor:
        """Fit the encoders ``plan`` (from ``plan_encoding`` on ``X``) calls for on the source ``X``."""
        self.plan_ = plan
        self.kinds_ = dict(plan.kinds)
        self.feature_columns_ = list(plan.feature_columns)
        steps: list[tuple[str, Any, list[int]]] = []
        for i, c in enumerate(plan.kept):
            numeric = plan.kinds[c] == "numeric"
            if c in plan.indicators:
                missing = MissingIndicator(features="all") if numeric else \
                    MissingIndicator(missing_values=None, features="all")
                steps.append((f"missing_{i}", missing, [i]))
            if numeric:
                steps.append((f"number_{i}", SimpleImputer(strategy="median"), [i]))
            elif plan.encodings[c]:
                levels = OneHotEncoder(categories=[np.array(plan.encodings[c], dtype=object)],
                                       handle_unknown="ignore", sparse_output=False, dtype=np.float64)
                steps.append((f"levels_{i}", levels, [i]))
        self.column_transformer_ = ColumnTransformer(steps).fit(self._canonical(X))
        self.feature_names_in_ = np.asarray(plan.columns, dtype=object)
        self.n_features_in_ = len(plan.columns)
        return self

    def _canonical(self, X: pd.DataFrame) -> pd.DataFrame:
        """The encoders' input: each kept column by position, float64 (numbers) or text with None."""
        plan = self.plan_
        frame = _table(X, "target")
        _check_same_columns(list(plan.columns), list(frame.columns))
        position = {c: i for i, c in enumerate(plan.kept)}
        canon: dict[int, np.ndarray] = {}
        for c in plan.columns:  # every column is checked as at fit, kept or dropped
            s = coerce_column(frame[c], c, plan.kinds[c], plan.empty_in_source[c])
            if c in position:
                canon[position[c]] = canonical_column(s, c, plan.kinds[c])
        return pd.DataFrame({i: pd.Series(v, dtype=object if v.dtype == object else np.float64)
                             for i, v in sorted(canon.items())})

    def transform(self, X: pd.DataFrame) -> pd.DataFrame:
        """Encode raw rows with the source's feature columns; refuses what ``fit`` refuses in a target."""
        check_is_fitted(self, "column_transformer_")
        canon = self._canonical(X)
        if len(canon) == 0:
            return pd.DataFrame(np.empty((0, len(self.feature_columns_))), columns=self.feature_columns_)
        out = self.column_transformer_.transform(canon)
        return pd.DataFrame(np.asarray(out, dtype=np.float64), columns=self.feature_columns_)

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """The encoded column names (``feature_columns_``)."""
        check_is_fitted(self, "column_transformer_")
        return np.asarray(self.feature_columns_, dtype=object)


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

    ``check_tables``, then a ``shiftlib.preprocessor.TablePreprocessor`` fitted on the source's features with
    the decided plan and applied to both tables. See the module docstring for the policies.

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
    PreparedData
        The encoded tables, coded labels, decisions, notes and the fitted preprocessor.

    Raises
    ------
    IngestError
        When the tables cannot be used as given.
    """
    checked = check_tables(source, target, label, positive_label=positive_label, max_levels=max_levels,
                           min_rows_for_id=min_rows_for_id)
    src, tgt = source.drop(columns=[label]), target.drop(columns=[label], errors="ignore")
    pre = TablePreprocessor(max_levels=max_levels, min_rows_for_id=min_rows_for_id).fit_plan(checked.plan, src)
    plan = checked.plan
    return PreparedData(
        source_X=pre.transform(src),
        source_y=checked.source_y,
        target_X=pre.transform(tgt),
        target_y=checked.target_y,
        classes=checked.classes,
        feature_columns=list(plan.feature_columns),
        dropped_columns=dict(plan.dropped),
        encodings=dict(plan.encodings),
        imputed=dict(plan.imputed),
        notes=list(checked.notes),
        preprocessor=pre,
    )
