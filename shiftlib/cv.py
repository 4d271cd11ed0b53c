"""Source cross-validation metrics of a candidate (out-of-fold probabilities, stratified k-fold)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.metrics import accuracy_score, brier_score_loss, log_loss, roc_auc_score
from sklearn.model_selection import StratifiedKFold

from shiftlib.learners import fit_learner

__all__ = ["cv_metrics", "oof_metrics"]


def cv_metrics(
    estimator: BaseEstimator,
    X: Any,
    y: np.ndarray,
    *,
    n_splits: int = 5,
    random_state: int | None = None,
    sample_weight: np.ndarray | None = None,
    X_target: Any = None,
) -> dict[str, float]:
    """Out-of-fold accuracy, AUC (binary: positive = larger code; multi-class: one-vs-rest macro),
    log-loss and (binary) Brier on the source; weighted by ``sample_weight`` when given (IWCV-style).

    Parameters
    ----------
    estimator : BaseEstimator
        The candidate; a clone is fitted on each training fold (through :func:`~shiftlib.learners.fit_learner`).
    X : array-like or DataFrame
        Source features.
    y : numpy.ndarray
        Source labels.
    n_splits : int, default 5
        Folds of the stratified k-fold, lowered to the size of the smallest class.
    random_state : int, optional
        Seed of the fold shuffle.
    sample_weight : numpy.ndarray, optional
        Per-row weights, used both to fit each fold and to weight the metrics.
    X_target : array-like, optional
        Unlabeled target features, passed to learners that use them.

    Returns
    -------
    dict of str to float
        ``accuracy``, ``log_loss`` and ``auc``, plus ``brier`` for two classes. The multi-class AUC is not
        weighted by ``sample_weight``.

    Raises
    ------
    ValueError
        If a class has fewer than 2 source rows.
    """
    y = np.asarray(y)
    classes = np.unique(y)
    n_splits = int(min(n_splits, np.bincount(np.searchsorted(classes, y)).min()))
    if n_splits < 2:
        raise ValueError("a class has fewer than 2 source rows; cross-validation needs at least 2 per class")
    proba = np.zeros((len(y), len(classes)))
    skf = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=random_state)
    Xa = X.iloc if hasattr(X, "iloc") else X
    for tr, te in skf.split(np.zeros(len(y)), y):
        w = None if sample_weight is None else np.asarray(sample_weight)[tr]
        m = fit_learner(clone(estimator), Xa[tr], y[tr], sample_weight=w, X_target=X_target)
        p = m.predict_proba(Xa[te])
        proba[np.ix_(te, np.searchsorted(classes, m.classes_))] = p
    return oof_metrics(y, proba, classes, sample_weight)


def oof_metrics(y: np.ndarray, proba: np.ndarray, classes: np.ndarray,
                sample_weight: np.ndarray | None = None) -> dict[str, float]:
    """The metrics of :func:`cv_metrics` from out-of-fold probabilities already computed (e.g. the estimation's
    fold fits, ``shiftlib.estimation.candidate_predictions``).

    Parameters
    ----------
    y : numpy.ndarray of shape (n,)
        Source labels (values of ``classes``).
    proba : numpy.ndarray of shape (n, len(classes))
        Out-of-fold probabilities, columns in the order of ``classes``.
    classes : numpy.ndarray
        The sorted class labels.
    sample_weight : numpy.ndarray, optional
        Per-row weights of the metrics.

    Returns
    -------
    dict of str to float
        As :func:`cv_metrics`.
    """
    y, classes = np.asarray(y), np.asarray(classes)
    pred = classes[np.argmax(proba, axis=1)]
    sw = None if sample_weight is None else np.asarray(sample_weight, dtype=float)
    out = {
        "accuracy": float(accuracy_score(y, pred, sample_weight=sw)),
        "log_loss": float(log_loss(y, _rows_sum_to_one(proba), labels=classes, sample_weight=sw)),
    }
    if len(classes) == 2:
        out["auc"] = float(roc_auc_score(y, proba[:, 1], sample_weight=sw))
        out["brier"] = float(brier_score_loss(y, proba[:, 1], sample_weight=sw, pos_label=classes[1]))
    else:
        out["auc"] = float(roc_auc_score(y, proba, multi_class="ovr", labels=classes))
    return out


def _rows_sum_to_one(proba: np.ndarray) -> np.ndarray:
    """``proba`` clipped away from 0 and each row rescaled to sum to one: a learner's rounding (or a 0 clipped up)
    leaves rows a little off, and scikit-learn's ``log_loss`` warns on them since 1.5 instead of rescaling as it did
    (helper-36 saw the warning on the console, NB+kmm)."""
    p = np.clip(np.asarray(proba, dtype=float), 1e-15, 1)
    return p / p.sum(axis=1, keepdims=True)
