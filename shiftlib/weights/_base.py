"""Shared base and diagnostics for the importance-weight estimators (docs/architecture.md "Importance weights").

Every estimator estimates ``w(x) = p_target(x) / p_source(x)`` on the source rows and reports:

* ``weights_`` — one weight per source row, normalized to mean 1;
* ``ess_`` — the effective sample size ``(Σw)² / Σw²`` (Kish);
* ``mmd2_before_`` / ``mmd2_after_`` — the biased MMD² between the unweighted / weighted source and the
  target under the one kernel of :mod:`shiftlib.kernels` (pooled standardization, median heuristic, at
  most 5,000 rows per side), the same statistic as ``drift.mmd2`` for the same pair of tables, so
  estimators and the drift report compare.
"""

from __future__ import annotations

from typing import Any, Self

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from shiftlib._validation import (
    align_columns,
    as_2d_float,
    check_pair,
    check_probabilities,
    check_row_weights,
)
from shiftlib.kernels import (
    DIAG_MAX_ROWS,
    DIAG_SEED,
    SharedKernel,
    median_heuristic_gamma,
    mmd2,
    mmd2_many,
    shared_kernel,
    subsample_rows,
)

__all__ = [
    "BaseWeighter",
    "SharedKernel",
    "WeightsUnavailableError",
    "check_pair",
    "check_probabilities",
    "LOW_ESS_SHARE",
    "effective_sample_size",
    "weights_caution",
    "median_heuristic_gamma",
    "mmd2",
    "normalize_weights",
    "shared_kernel",
]


class WeightsUnavailableError(NotImplementedError):
    """Raised by ``predict_weights`` for a method that only weights the rows it was fitted on."""


# --------------------------------------------------------------------------------------------------
# weights
# --------------------------------------------------------------------------------------------------


def normalize_weights(w: Any) -> np.ndarray:
    """Rescale non-negative weights to mean 1 (docs/architecture.md "Importance weights"). Returns a new array."""
    w = np.asarray(w, dtype=float)
    if w.ndim != 1 or w.size == 0:
        raise ValueError("weights must be a non-empty 1-d array")
    w = check_row_weights(w, w.size)
    return w * (w.size / w.sum())


#: below this share of the source rows, an effective sample size means the weights rest on a handful of rows
LOW_ESS_SHARE = 0.01


def weights_caution(ess: float, n: int, mmd2_before: float, mmd2_after: float) -> str | None:
    """Why a set of importance weights cannot be trusted to correct the shift, or None: the weighted source is
    no closer to the target than the plain one (MMD² not lowered), or its effective sample size is under
    ``LOW_ESS_SHARE`` of the rows (source and target barely overlap: Cortes et al., NIPS 2010, bound the
    weighted estimate's error by the weights' second moment, n/ESS)."""
    why = []
    if mmd2_after >= mmd2_before:
        why.append(f"they do not bring the source closer to the target (MMD² {mmd2_before:.4g} → {mmd2_after:.4g})")
    if ess < LOW_ESS_SHARE * n:
        why.append(f"they rest on an effective {ess:.1f} of {n} source rows")
    if not why:
        return None
    return "; ".join(why) + ": source and target barely overlap, so importance weighting cannot correct this shift"


def effective_sample_size(w: Any) -> float:
    """Kish's effective sample size ``(Σw)² / Σw²`` (docs/architecture.md "Importance weights")."""
    w = np.asarray(w, dtype=float)
    sq = float(np.dot(w, w))
    if sq == 0:
        raise ValueError("all weights are zero; the effective sample size is undefined")
    return float(w.sum() ** 2 / sq)


# --------------------------------------------------------------------------------------------------
# the base estimator
# --------------------------------------------------------------------------------------------------


class BaseWeighter(BaseEstimator):
    """Base of every importance-weight estimator: fit(X_source, X_target) -> self.

    Subclasses implement ``_fit_raw(Xs, Xt, **fit_params) -> raw weights (one per source row)`` and,
    when the method can weight new points, ``_predict_raw(X) -> raw weights`` on the same scale.

    Learned attributes: ``weights_`` (mean 1), ``raw_weights_`` (as estimated), ``norm_`` (the mean of
    ``raw_weights_``, so ``weights_ = raw_weights_ / norm_``), ``ess_``, ``mmd2_before_``,
    ``mmd2_after_`` (on at most ``DIAG_MAX_ROWS`` rows of each set), ``kernel_`` (the shared diagnostic kernel), ``n_features_in_`` and, for
    DataFrames, ``feature_names_in_``.
    """

    #: minimum rows per set this method needs (one source row has weight 1 whatever the target)
    _min_rows: int = 2

    def fit(self, X_source: Any, X_target: Any, **fit_params: Any) -> Self:
        """Estimate weights for the source rows so the weighted source resembles the target."""
        pair = check_pair(X_source, X_target, min_rows=self._min_rows)
        pooled = np.vstack([pair.X_source, pair.X_target])
        if np.all(pooled == pooled[0]):
            raise ValueError(
                "all rows are identical in the source and target (every pairwise distance is 0): there is no "
                "shift to correct and no kernel width or density to estimate; check the input"
            )
        self.n_features_in_ = pair.X_source.shape[1]
        if pair.feature_names is not None:
            self.feature_names_in_ = pair.feature_names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        raw = np.asarray(self._fit_raw(pair.X_source, pair.X_target, **fit_params), dtype=float)
        if raw.shape != (pair.X_source.shape[0],):
            raise RuntimeError(
                f"{type(self).__name__} produced weights of shape {raw.shape} for {pair.X_source.shape[0]} source rows"
            )
        self.raw_weights_ = raw
        self.weights_ = normalize_weights(raw)
        self.norm_ = float(raw.mean())
        self.ess_ = effective_sample_size(self.weights_)
        X_diag = self._diagnostic_target(pair.X_source, pair.X_target)
        self.kernel_ = shared_kernel(pair.X_source, X_diag)
        rs = subsample_rows(len(raw), DIAG_MAX_ROWS)
        rt = subsample_rows(len(X_diag), DIAG_MAX_ROWS, DIAG_SEED + 1)
        Zs, Zt = self.kernel_.transform(pair.X_source[rs]), self.kernel_.transform(X_diag[rt])
        W = np.column_stack([np.ones(len(rs)), normalize_weights(self.weights_[rs])])
        before, after = mmd2_many(Zs, Zt, self.kernel_.gamma, W)
        self.mmd2_before_, self.mmd2_after_ = float(before), float(after)
        return self

    def predict_weights(self, X: Any) -> np.ndarray:
        """Importance weights for new rows, on the scale of ``weights_`` (divided by ``norm_``)."""
        check_is_fitted(self, "weights_")
        Xc, names = as_2d_float(X, "X")
        if names is not None and hasattr(self, "feature_names_in_"):
            fitted = pd.DataFrame(columns=list(self.feature_names_in_))
            Xc, _ = as_2d_float(align_columns(fitted, X, names=("the fitted features", "X")), "X")
        if Xc.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {Xc.shape[1]} columns but the weighter was fitted on {self.n_features_in_}")
        return np.asarray(self._predict_raw(Xc), dtype=float) / self.norm_

    # -- hooks ---------------------------------------------------------------------------------------

    def _fit_raw(self, X_source: np.ndarray, X_target: np.ndarray, **fit_params: Any) -> np.ndarray:
        raise NotImplementedError

    def _predict_raw(self, X: np.ndarray) -> np.ndarray:
        raise WeightsUnavailableError(
            f"{type(self).__name__} weights only the source rows it was fitted on (use weights_); "
            "for weights at new points use DiscriminativeWeights or KDEWeights"
        )

    def _diagnostic_target(self, X_source: np.ndarray, X_target: np.ndarray) -> np.ndarray:
        """Rows the weighted source should resemble (the target, unless a subclass says otherwise)."""
        return X_target
