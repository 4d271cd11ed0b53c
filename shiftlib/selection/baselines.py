"""Baseline selectors of RT §3 and TrCV §5.1: SCV, repeated k-fold, LOO, WCV/IWCV, TCV, STV.

Every selector returns ``SelectorScores`` (one estimated score per learner, higher is better). The
fold splits come from ``sklearn.model_selection`` (``StratifiedKFold``, ``RepeatedStratifiedKFold``,
``LeaveOneOut``); the fold loop is ours rather than ``cross_val_predict`` because every fit must go
through ``fit_learner`` with the held-out rows as ``X_target`` (target-aware learners) and with the
candidate's own source weights restricted to the training rows.

A CV score is the mean over folds of the fold score (``cross_val_score``'s convention); for LOO
that is the plain accuracy. Decisions where the sources are silent:

* **WCV / IWCV** (Sugiyama et al. 2007; TrCV eq. 4): β from any ``shiftlib.weights`` estimator (KMM by
  default) fitted once on all source rows vs the target rows, normalised to mean 1; each fold's
  score is the importance-weighted score of its held-out rows — for accuracy
  ``1 − (1/|S_j|) Σ β·1[ŷ≠y]``. Training inside the folds uses only the candidate's own weights.
* A learner whose fit raises ``ValueError`` on some fold (e.g. SVM's inner 5-fold calibration with
  fewer than 5 rows of a class) gets score NaN, a warning and an entry in ``errors``; the others
  are still scored.
* **TCV**: k-fold on the labeled target rows (k reduced to the largest class count when that is
  smaller, noted in ``details``). **STV**: fit on all source rows, score on the labeled target rows.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import LeaveOneOut, RepeatedStratifiedKFold, StratifiedKFold

from ._validation import check_X, check_y, take
from .candidates import Candidate, fit_candidate, resolve_candidates
from .importance import importance_weights
from .results import SelectorScores
from .scoring import Scorer, get_scorer, roc_auc_scorer, score_rows, scorer_name

__all__ = [
    "cv_score",
    "leave_one_out",
    "repeated_cv",
    "source_cv",
    "source_target_validation",
    "target_cv",
    "weighted_cv",
]


def cv_score(
    candidate: Candidate,
    X: Any,
    y: np.ndarray,
    splits: Iterable[tuple[np.ndarray, np.ndarray]],
    scoring: str | Scorer = "accuracy",
    *,
    weights: np.ndarray | None = None,
) -> tuple[float, np.ndarray]:
    """Mean fold score of ``candidate`` over ``splits`` (train, test) positions; returns (mean, fold scores).

    ``weights`` (one per row of X) weight the held-out rows' score (importance-weighted CV).

    Parameters
    ----------
    candidate : Candidate
        The learner; each fold fits a fresh clone on the training rows (with its own source weights).
    X : array-like or pandas.DataFrame
        Features of the rows the splits index.
    y : numpy.ndarray
        Labels, one per row of ``X``.
    splits : iterable of (numpy.ndarray, numpy.ndarray)
        (train, test) row positions, one pair per fold.
    scoring : str or callable, default "accuracy"
        ``"accuracy"``, ``"roc_auc"``/``"auc"`` or a scorer callable
        (see :func:`~shiftlib.selection.scoring.get_scorer`).
    weights : numpy.ndarray or None, default None
        One weight per row of ``X`` used to weight the held-out rows' score; None scores unweighted.

    Returns
    -------
    tuple of (float, numpy.ndarray)
        The mean fold score and the score of each fold.
    """
    scorer = get_scorer(scoring)
    fold_scores = []
    for train, test in splits:
        X_test = take(X, test)
        model = fit_candidate(candidate, X, y, rows=train, X_target=X_test)
        w = None if weights is None else weights[test]
        fold_scores.append(score_rows(scorer, model, X_test, y[test], test, w))
    fs = np.asarray(fold_scores, dtype=float)
    return float(fs.mean()), fs


def _run(selector: str, learners: Any, X: Any, y: np.ndarray, splits: Any, scoring: str | Scorer,
         random_state: int | None, weights: np.ndarray | None = None,
         params: dict[str, Any] | None = None) -> SelectorScores:
    cands = resolve_candidates(learners, random_state=random_state)
    for c in cands:  # input errors raise here, before per-learner fit failures are caught
        c.source_weights(len(y))
    scores, folds, errors, n_fits = {}, {}, {}, 0
    splits = list(splits)  # one split for every learner: paired comparisons even when random_state is None
    for c in cands:
        try:
            scores[c.name], folds[c.name] = cv_score(c, X, y, splits, scoring, weights=weights)
        except ValueError as err:
            scores[c.name], errors[c.name] = np.nan, _learner_error(selector, c.name, err)
        n_fits += len(splits)
    details = {"fold_scores": folds,
               "params": {"scoring": scorer_name(scoring), "random_state": random_state, **(params or {})}}
    return SelectorScores(selector, pd.Series(scores, dtype=float), n_fits, None, details, errors)


def _learner_error(selector: str, name: str, err: Exception) -> str:
    """Record a learner that cannot be evaluated (score NaN) and warn, naming the cause."""
    msg = f"{selector}: learner {name!r} could not be fitted on some fold ({err}); its score is NaN"
    warnings.warn(msg, RuntimeWarning, stacklevel=3)
    return msg


def _folds(k: int, y: np.ndarray, random_state: int | None,
           max_folds: int | None) -> list[tuple[np.ndarray, np.ndarray]]:
    """The first ``max_folds`` (all when None) splits of a shuffled stratified k-fold."""
    if max_folds is not None and not (isinstance(max_folds, int | np.integer) and 1 <= max_folds):
        raise ValueError(f"max_folds must be an integer ≥ 1 (or None for all k folds); got {max_folds!r}")
    skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=random_state)
    return list(skf.split(np.zeros(len(y)), y))[: max_folds or k]


def _check_k(k: int, y: np.ndarray, what: str) -> None:
    if not isinstance(k, int | np.integer) or k < 2:
        raise ValueError(f"k must be an integer ≥ 2 folds; got {k!r}")
    if k > len(y):
        raise ValueError(f"k={k} folds but {what} has only {len(y)} rows: lower k")
    if np.unique(y, return_counts=True)[1].max() < k:
        raise ValueError(f"k={k} folds but no class in {what} has {k} rows: lower k")


def source_cv(
    learners: Any,
    X_source: Any,
    y_source: Any,
    *,
    k: int = 10,
    scoring: str | Scorer = "accuracy",
    random_state: int | None = None,
    max_folds: int | None = None,
) -> SelectorScores:
    """SCV (TrCV §5.1, eq. 2; RT §3.2 ten-fold): stratified k-fold on the source rows; returns ``SelectorScores``.

    ``max_folds`` scores only the first ``max_folds`` of the k folds (every fit still sees (k−1)/k of the
    rows, so the candidates are compared where their learning curves are, at the size they are served
    at; only the number of scored rows shrinks). ``shiftlib.budget.scored_folds`` sets it for large tables.

    Parameters
    ----------
    learners : dict, list, str, Candidate or estimator
        The candidates, in any form :func:`~shiftlib.selection.candidates.resolve_candidates` accepts.
    X_source : array-like or pandas.DataFrame
        Labeled source features, one row per example.
    y_source : array-like
        Source labels, one per row of ``X_source``.
    k : int, default 10
        Number of folds (at least 2, at most the largest class count).
    scoring : str or callable, default "accuracy"
        ``"accuracy"``, ``"roc_auc"``/``"auc"`` or a scorer callable
        (see :func:`~shiftlib.selection.scoring.get_scorer`).
    random_state : int or None, default None
        Seed for the fold shuffle and for learners built from registry names.
    max_folds : int or None, default None
        Score only the first ``max_folds`` of the k folds; None scores all.

    Returns
    -------
    SelectorScores
        Selector ``"scv"``: each learner's mean fold score, fold scores in ``details``; a learner whose fit
        raised ``ValueError`` has score NaN and an entry in ``errors``.
    """
    X = check_X(X_source, "X_source")
    y = check_y(y_source, X, "y_source", "X_source")
    _check_k(k, y, "the source set")
    return _run("scv", learners, X, y, _folds(k, y, random_state, max_folds), scoring, random_state,
                params={"k": k, "max_folds": max_folds})


def repeated_cv(
    learners: Any,
    X_source: Any,
    y_source: Any,
    *,
    k: int = 10,
    n_repeats: int = 100,
    scoring: str | Scorer = "accuracy",
    random_state: int | None = None,
) -> SelectorScores:
    """RT §3.2: k-fold CV repeated ``n_repeats`` times (RT: 10 folds × 100) on the source rows; returns ``SelectorScores``.

    Parameters
    ----------
    learners : dict, list, str, Candidate or estimator
        The candidates, in any form :func:`~shiftlib.selection.candidates.resolve_candidates` accepts.
    X_source : array-like or pandas.DataFrame
        Labeled source features, one row per example.
    y_source : array-like
        Source labels, one per row of ``X_source``.
    k : int, default 10
        Number of folds (at least 2, at most the largest class count).
    n_repeats : int, default 100
        How many times the stratified k-fold is repeated (at least 1).
    scoring : str or callable, default "accuracy"
        ``"accuracy"``, ``"roc_auc"``/``"auc"`` or a scorer callable
        (see :func:`~shiftlib.selection.scoring.get_scorer`).
    random_state : int or None, default None
        Seed for the fold shuffle and for learners built from registry names.

    Returns
    -------
    SelectorScores
        Selector ``"cv{k}x{n_repeats}"``: each learner's mean score over all k × n_repeats folds; a learner whose fit
        raised ``ValueError`` has score NaN and an entry in ``errors``.
    """
    X = check_X(X_source, "X_source")
    y = check_y(y_source, X, "y_source", "X_source")
    _check_k(k, y, "the source set")
    if n_repeats < 1:
        raise ValueError(f"n_repeats must be ≥ 1; got {n_repeats}")
    rskf = RepeatedStratifiedKFold(n_splits=k, n_repeats=n_repeats, random_state=random_state)
    return _run(f"cv{k}x{n_repeats}", learners, X, y, rskf.split(np.zeros(len(y)), y), scoring,
                random_state, params={"k": k, "n_repeats": n_repeats})


def leave_one_out(
    learners: Any,
    X_source: Any,
    y_source: Any,
    *,
    scoring: str | Scorer = "accuracy",
    random_state: int | None = None,
) -> SelectorScores:
    """RT §3.2 leave-one-out validation on the source rows (n fits per learner); returns ``SelectorScores``.

    Parameters
    ----------
    learners : dict, list, str, Candidate or estimator
        The candidates, in any form :func:`~shiftlib.selection.candidates.resolve_candidates` accepts.
    X_source : array-like or pandas.DataFrame
        Labeled source features, one row per example.
    y_source : array-like
        Source labels, one per row of ``X_source``.
    scoring : str or callable, default "accuracy"
        ``"accuracy"`` or a scorer callable (AUC is refused:
        undefined on one row; see :func:`~shiftlib.selection.scoring.get_scorer`).
    random_state : int or None, default None
        Seed for learners built from registry names.

    Returns
    -------
    SelectorScores
        Selector ``"loo"``: each learner's mean score over the n held-out rows; a learner whose fit
        raised ``ValueError`` has score NaN and an entry in ``errors``.
    """
    if scoring in ("roc_auc", "auc") or scoring is roc_auc_scorer:
        raise ValueError("AUC is undefined on one held-out row: use scoring='accuracy' with leave_one_out")
    X = check_X(X_source, "X_source")
    y = check_y(y_source, X, "y_source", "X_source")
    if len(y) < 2:
        raise ValueError("leave-one-out needs at least 2 source rows")
    loo = LeaveOneOut()
    return _run("loo", learners, X, y, loo.split(np.zeros(len(y))), scoring, random_state)


def weighted_cv(
    learners: Any,
    X_source: Any,
    y_source: Any,
    X_target: Any = None,
    *,
    weights: Any = "kmm",
    k: int = 10,
    scoring: str | Scorer = "accuracy",
    random_state: int | None = None,
    max_folds: int | None = None,
) -> SelectorScores:
    """WCV / IWCV (Sugiyama et al. 2007; TrCV eq. 4): k-fold on source, held-out scores weighted by β; returns ``SelectorScores``.

    ``weights``: a ``shiftlib.weights`` name (default KMM; needs ``X_target``), an estimator, or an
    array with one weight per source row. β is normalised to mean 1 (``details["weights"]``).
    ``max_folds``: score only the first folds, as in ``source_cv``.

    Parameters
    ----------
    learners : dict, list, str, Candidate or estimator
        The candidates, in any form :func:`~shiftlib.selection.candidates.resolve_candidates` accepts.
    X_source : array-like or pandas.DataFrame
        Labeled source features, one row per example.
    y_source : array-like
        Source labels, one per row of ``X_source``.
    X_target : array-like, pandas.DataFrame or None, default None
        Unlabeled target features; needed unless ``weights`` is an array (or None).
    weights : str, estimator, array-like or None, default "kmm"
        How to get β (see :func:`~shiftlib.selection.importance.importance_weights`); None gives all ones.
    k : int, default 10
        Number of folds (at least 2, at most the largest class count).
    scoring : str or callable, default "accuracy"
        ``"accuracy"``, ``"roc_auc"``/``"auc"`` or a scorer callable
        (see :func:`~shiftlib.selection.scoring.get_scorer`).
    random_state : int or None, default None
        Seed for the fold shuffle and for learners built from registry names.
    max_folds : int or None, default None
        Score only the first ``max_folds`` of the k folds; None scores all.

    Returns
    -------
    SelectorScores
        Selector ``"wcv"``: each learner's mean importance-weighted fold score; β in
        ``details["weights"]``; a learner whose fit
        raised ``ValueError`` has score NaN and an entry in ``errors``.
    """
    X = check_X(X_source, "X_source")
    y = check_y(y_source, X, "y_source", "X_source")
    if X_target is not None:
        X_target = check_X(X_target, "X_target", like=X)
    elif weights is not None and not isinstance(weights, np.ndarray | list | tuple | pd.Series):
        raise ValueError("weighted_cv needs X_target to estimate importance weights; or pass weights= as an array")
    _check_k(k, y, "the source set")
    beta = importance_weights(weights, X, X_target)
    res = _run("wcv", learners, X, y, _folds(k, y, random_state, max_folds), scoring, random_state,
               weights=beta, params={"k": k, "max_folds": max_folds,
                                     "weights": weights if isinstance(weights, str | None) else "given"})
    res.details["weights"] = beta
    return res


def target_cv(
    learners: Any,
    X_target_labeled: Any,
    y_target_labeled: Any,
    *,
    k: int = 10,
    scoring: str | Scorer = "accuracy",
    random_state: int | None = None,
) -> SelectorScores:
    """TCV (TrCV §5.1): stratified k-fold on the labeled target rows only; returns ``SelectorScores``.

    Parameters
    ----------
    learners : dict, list, str, Candidate or estimator
        The candidates, in any form :func:`~shiftlib.selection.candidates.resolve_candidates` accepts.
    X_target_labeled : array-like or pandas.DataFrame
        Features of the labeled target rows.
    y_target_labeled : array-like
        Their labels.
    k : int, default 10
        Number of folds; lowered to the largest class count when that is smaller
        (``details["params"]["k_used"]``).
    scoring : str or callable, default "accuracy"
        ``"accuracy"``, ``"roc_auc"``/``"auc"`` or a scorer callable
        (see :func:`~shiftlib.selection.scoring.get_scorer`).
    random_state : int or None, default None
        Seed for the fold shuffle and for learners built from registry names.

    Returns
    -------
    SelectorScores
        Selector ``"tcv"``: each learner's mean fold score on the labeled target rows; a learner whose fit
        raised ``ValueError`` has score NaN and an entry in ``errors``.
    """
    X = check_X(X_target_labeled, "X_target_labeled")
    y = check_y(y_target_labeled, X, "y_target_labeled", "X_target_labeled")
    k_used = int(min(k, np.unique(y, return_counts=True)[1].max()))
    _check_k(k_used, y, "the labeled target set")
    skf = StratifiedKFold(n_splits=k_used, shuffle=True, random_state=random_state)
    return _run("tcv", learners, X, y, skf.split(np.zeros(len(y)), y), scoring, random_state,
                params={"k": k, "k_used": k_used})


def source_target_validation(
    learners: Any,
    X_source: Any,
    y_source: Any,
    X_target_labeled: Any,
    y_target_labeled: Any,
    *,
    scoring: str | Scorer = "accuracy",
    random_state: int | None = None,
) -> SelectorScores:
    """STV (TrCV §5.1): fit on all source rows, score on the labeled target rows; returns ``SelectorScores``.

    Parameters
    ----------
    learners : dict, list, str, Candidate or estimator
        The candidates, in any form :func:`~shiftlib.selection.candidates.resolve_candidates` accepts.
    X_source : array-like or pandas.DataFrame
        Labeled source features, one row per example.
    y_source : array-like
        Source labels, one per row of ``X_source``.
    X_target_labeled : array-like or pandas.DataFrame
        Features of the labeled target rows (same kind and columns as ``X_source``).
    y_target_labeled : array-like
        Their labels.
    scoring : str or callable, default "accuracy"
        ``"accuracy"``, ``"roc_auc"``/``"auc"`` or a scorer callable
        (see :func:`~shiftlib.selection.scoring.get_scorer`).
    random_state : int or None, default None
        Seed for learners built from registry names.

    Returns
    -------
    SelectorScores
        Selector ``"stv"``: each learner's score on the labeled target rows; a learner whose fit
        raised ``ValueError`` has score NaN and an entry in ``errors``.
    """
    X = check_X(X_source, "X_source")
    y = check_y(y_source, X, "y_source", "X_source")
    X_l = check_X(X_target_labeled, "X_target_labeled", like=X)
    y_l = check_y(y_target_labeled, X_l, "y_target_labeled", "X_target_labeled")
    scorer = get_scorer(scoring)
    cands = resolve_candidates(learners, random_state=random_state)
    for c in cands:  # input errors raise here, before per-learner fit failures are caught
        c.source_weights(len(y))
    scores, errors = {}, {}
    for c in cands:
        try:
            model = fit_candidate(c, X, y, X_target=X_l)
        except ValueError as err:
            scores[c.name], errors[c.name] = np.nan, _learner_error("stv", c.name, err)
            continue
        scores[c.name] = score_rows(scorer, model, X_l, y_l, None)
    return SelectorScores("stv", pd.Series(scores, dtype=float), len(cands), None,
                          {"params": {"scoring": scorer_name(scoring), "random_state": random_state}}, errors)
