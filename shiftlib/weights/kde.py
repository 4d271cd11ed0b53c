"""Density-ratio weights from two kernel density estimates (Shimodaira 2000, as used in DL §5).

``w(x) = p̂_target(x) / p̂_source(x)`` with ``scipy.stats.gaussian_kde`` fitted separately to each set in
the pooled-standardized space (one StandardScaler on source ∪ target, so the bandwidth rule sees
comparable scales). Bandwidth: Silverman's rule of thumb by default (DL §5 uses it), or Scott's, or a
scalar factor (``bw_method`` as in scipy).

High dimension: KDE ratio error grows exponentially with the number of features, so ``fit`` refuses
more than ``max_dim`` features (default 5) with a message naming the alternatives; raise ``max_dim``
to override.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from scipy.stats import gaussian_kde
from sklearn.preprocessing import StandardScaler

from ._base import BaseWeighter

__all__ = ["KDEWeights"]


class KDEWeights(BaseWeighter):
    """Importance weights as a ratio of Gaussian KDEs, target over source (Shimodaira 2000; DL §5).

    ``predict_weights`` evaluates both KDEs at new points.
    Learned: the attributes below plus those of :class:`~shiftlib.weights.BaseWeighter`.

    Parameters
    ----------
    bw_method : {"silverman", "scott"} or float, default "silverman"
        The bandwidth rule, or a positive factor (scipy's meaning).
    max_dim : int, default 5
        Largest number of features accepted.

    Attributes
    ----------
    scaler_ : StandardScaler
        Fitted on the pooled source and target rows.
    kde_source_, kde_target_ : scipy.stats.gaussian_kde
        The two density estimates, in the standardized space.
    log_shift_ : float
        ``raw_weights_ = exp(log p̂_t − log p̂_s − log_shift_)``, shifted so the largest raw weight is 1 and
        nothing overflows.
    """

    def __init__(self, *, bw_method: Literal["silverman", "scott"] | float = "silverman", max_dim: int = 5) -> None:
        self.bw_method = bw_method
        self.max_dim = max_dim

    def _fit_raw(self, X_source: np.ndarray, X_target: np.ndarray, **fit_params: Any) -> np.ndarray:
        if fit_params:
            raise TypeError(f"KDEWeights.fit takes no extra arguments; got {sorted(fit_params)}")
        d = X_source.shape[1]
        if d > self.max_dim:
            raise ValueError(
                f"KDEWeights: {d} features exceed max_dim={self.max_dim}; kernel density ratios degrade "
                "exponentially with dimension. Use DiscriminativeWeights or KMM, reduce the features, "
                "or raise max_dim"
            )
        if isinstance(self.bw_method, str) and self.bw_method not in ("silverman", "scott"):
            raise ValueError(f"bw_method must be 'silverman', 'scott' or a positive number; got {self.bw_method!r}")
        self.scaler_ = StandardScaler().fit(np.vstack([X_source, X_target]))
        self.kde_source_ = self._kde(self.scaler_.transform(X_source), "source")
        self.kde_target_ = self._kde(self.scaler_.transform(X_target), "target")
        log_ratio = self._log_ratio(X_source)
        self.log_shift_ = float(log_ratio.max())
        return np.exp(log_ratio - self.log_shift_)

    def _kde(self, Z: np.ndarray, label: str) -> gaussian_kde:
        n, d = Z.shape
        if n <= d:
            raise ValueError(f"{label} set has {n} rows for {d} features; a KDE needs more rows than features")
        try:
            return gaussian_kde(Z.T, bw_method=self.bw_method)
        except np.linalg.LinAlgError as exc:
            raise ValueError(
                f"the {label} set's covariance is singular (a constant or linearly dependent column?); "
                "drop such columns before KDEWeights"
            ) from exc

    def _log_ratio(self, X: np.ndarray) -> np.ndarray:
        Z = self.scaler_.transform(X).T
        return self.kde_target_.logpdf(Z) - self.kde_source_.logpdf(Z)

    def _predict_raw(self, X: np.ndarray) -> np.ndarray:
        return np.exp(self._log_ratio(X) - self.log_shift_)
