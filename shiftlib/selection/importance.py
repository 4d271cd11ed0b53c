"""Importance weights β(x) = p_target(x)/p_source(x) on source rows, normalised to mean 1 (docs/architecture.md).

``importance_weights(weights, X_source, X_target)`` accepts a ``shiftlib.weights`` estimator name
(``"kmm"`` …, resolved lazily through ``make_weighter``), an estimator exposing
``fit(X_source, X_target)`` and ``weights_``, an array with one weight per source row, or ``None``
(all ones).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from ._validation import check_row_weights

__all__ = ["importance_weights"]


def importance_weights(weights: Any, X_source: Any, X_target: Any) -> np.ndarray:
    """β on the source rows (TrCV Fig. 3 step 1 / WCV), normalised to mean 1; returns an ndarray.

    Parameters
    ----------
    weights : str, estimator, array-like or None
        A ``shiftlib.weights`` estimator name (e.g. ``"kmm"``), an estimator with ``fit(X_source, X_target)``
        and ``weights_`` (a copy is fitted), one weight per source row, or None (all ones).
    X_source : array-like or pandas.DataFrame
        Source features.
    X_target : array-like or pandas.DataFrame
        Target features (used only when ``weights`` is an estimator or a name).

    Returns
    -------
    numpy.ndarray
        One weight per source row, with mean 1.
    """
    n = len(X_source)
    if weights is None:
        return np.ones(n)
    if isinstance(weights, str):
        try:
            from shiftlib.weights import make_weighter  # lazy: the weights package is optional here
        except ImportError as err:
            raise ImportError(
                f"weights={weights!r} needs shiftlib.weights.make_weighter, which is not importable "
                f"({err}); pass weights= as an array with one weight per source row, an estimator, or None"
            ) from err
        weights = make_weighter(weights)
    if hasattr(weights, "fit") and not isinstance(weights, np.ndarray):
        est = weights
        if hasattr(est, "get_params"):
            from sklearn.base import clone

            try:
                est = clone(est)
            except (TypeError, RuntimeError):
                est = copy.deepcopy(est)
        else:
            est = copy.deepcopy(est)
        est.fit(X_source, X_target)
        if not hasattr(est, "weights_"):
            raise TypeError(f"{type(est).__name__}.fit(X_source, X_target) must set weights_ (one per source row)")
        weights = est.weights_
    w = check_row_weights(weights, n, "importance weights", "source rows")
    return w / w.mean()
