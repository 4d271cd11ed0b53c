"""Transfer Cross-Validation (TrCV, Zhong et al. ECML'10): reverse validation (Fig. 1) per fold,
density-ratio weighting (Fig. 3), the accuracy estimate (eq. 14) with its interval (eq. 15) and the
probability that one model beats another (eq. 16).

Fig. 1 for fold i (S_i held out, S̄_i the rest, U = unlabeled target rows, L = labeled target rows):
fit f_i on S̄_i; label U with f_i; fit f̄_i on U (pseudo labels) ∪ L; predict S_i;
``r(x) = 1[y ≠ ȳ]``. Fig. 3: ``loss = Σ_x β(x)·r(x) / n`` over all n source rows (each is held out
once), β normalised to mean 1 so the loss is a weighted mean of r and lies in [0, 1].

Decisions where the paper is silent (stated once, here):

* eq. 14's nuisance α is not estimated (α = 0): ``accuracy = 1 − loss``.
* n in eq. 15–16 is the number of source rows (the validated rows), as in the paper.
* eq. 16 uses σ exactly as the paper defines it — the half-width of the eq. 15 interval — as the
  standard deviation of each accuracy; so P depends on ``confidence`` (z) as in the paper.
* folds are ``StratifiedKFold(k, shuffle=True, random_state)`` on the source labels.
* a learner's own source weights (``Candidate.sample_weight``) are used when fitting f_i; f̄_i is
  unweighted. Target-aware learners get ``X_target=U`` for f_i and ``X_target=S_i`` for f̄_i.
* if U's pseudo labels ∪ Y_L hold one class, f̄_i is the constant classifier of that class (what any
  learner learns from one class); the number of such folds is reported (``n_constant_folds``).
* β is estimated once on all of S against U ∪ L (Fig. 3 step 1), not per fold.
* a fit that raises ``ValueError`` in any fold makes ``trcv`` raise (naming learner and fold) and
  gives that learner NaN in ``trcv_select``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import StratifiedKFold

from ._validation import check_X, check_y, take, vstack
from .candidates import Candidate, fit_candidate, resolve_candidates
from .importance import importance_weights
from .results import SCORE_COLUMNS, SelectorScores

__all__ = [
    "TrCVResult",
    "TrCVSetup",
    "accuracy_distribution",
    "accuracy_interval",
    "probability_better",
    "reverse_validation_fold",
    "trcv",
    "trcv_assemble",
    "trcv_fold",
    "trcv_fold_all",
    "trcv_from_folds",
    "trcv_scores",
    "trcv_select",
    "trcv_setup",
]


def _z(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), e.g. 0.95; got {confidence}")
    return float(NormalDist().inv_cdf((1 + confidence) / 2))


def _check_acc_n(accuracy: float, n: int) -> None:
    if not 0 <= accuracy <= 1:
        raise ValueError(f"accuracy must be in [0, 1]; got {accuracy}")
    if n < 1:
        raise ValueError(f"n must be a positive number of validated rows; got {n}")


def accuracy_interval(accuracy: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """TrCV eq. 15 inverted: (2nε + z² ∓ z√(4nε + z² − 4nε²)) / (2(n + z²)), z the (1+λ)/2 normal quantile.

    Parameters
    ----------
    accuracy : float
        The accuracy estimate ε in [0, 1] (eq. 14).
    n : int
        The number of validated rows (source rows), at least 1.
    confidence : float, default 0.95
        The confidence level λ in (0, 1); z is the (1+λ)/2 normal quantile.

    Returns
    -------
    tuple of (float, float)
        The lower and upper end of the interval.
    """
    _check_acc_n(accuracy, n)
    z = _z(confidence)
    mid = 2 * n * accuracy + z * z
    half = z * math.sqrt(max(4 * n * accuracy + z * z - 4 * n * accuracy * accuracy, 0.0))
    den = 2 * (n + z * z)
    return ((mid - half) / den, (mid + half) / den)


def accuracy_distribution(accuracy: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """TrCV §4.3 (before eq. 16): μ = (2nε + z²)/(2(n + z²)), σ = z√(4nε + z² − 4nε²)/(2(n + z²)).

    Parameters
    ----------
    accuracy : float
        The accuracy estimate ε in [0, 1] (eq. 14).
    n : int
        The number of validated rows (source rows), at least 1.
    confidence : float, default 0.95
        The confidence level λ in (0, 1); z is the (1+λ)/2 normal quantile.

    Returns
    -------
    tuple of (float, float)
        μ (the interval's midpoint) and σ (its half-width).
    """
    lo, hi = accuracy_interval(accuracy, n, confidence)
    return ((lo + hi) / 2, (hi - lo) / 2)


def probability_better(f1: Any, f2: Any, *, n: int | None = None, confidence: float | None = None) -> float:
    """TrCV eq. 16: P(ε(f1) > ε(f2)) = 1 − Φ((μ2 − μ1)/√(σ1² + σ2²)).

    ``f1``/``f2`` are ``TrCVResult``s (their n and confidence are used) or accuracy estimates in
    [0, 1] with ``n`` and ``confidence`` given.

    Parameters
    ----------
    f1 : TrCVResult or float
        The first model's TrCV result or accuracy estimate.
    f2 : TrCVResult or float
        The second model's TrCV result or accuracy estimate.
    n : int or None, default None
        Number of validated rows; required when either of ``f1``/``f2`` is a plain number.
    confidence : float or None, default None
        Confidence level; required when either of ``f1``/``f2`` is a plain number.

    Returns
    -------
    float
        P(ε(f1) > ε(f2)); when both σ are 0 it is 0.5 for equal μ, else 1 or 0.
    """
    def params(f: Any) -> tuple[float, float]:
        if isinstance(f, TrCVResult):
            return f.mu, f.sigma
        if n is None or confidence is None:
            raise ValueError("pass n= and confidence= when comparing plain accuracy numbers")
        return accuracy_distribution(float(f), n, confidence)

    (m1, s1), (m2, s2) = params(f1), params(f2)
    sd = math.hypot(s1, s2)
    if sd == 0:
        return 0.5 if m1 == m2 else float(m1 > m2)
    return float(1.0 - NormalDist().cdf((m2 - m1) / sd))


@dataclass(frozen=True, eq=False)
class FoldResidual:
    """TrCV Fig. 1 output for one fold: r(x) per held-out row and the fits it took.

    Parameters
    ----------
    r : numpy.ndarray
        r(x) = 1[y ≠ ȳ] (as float) for each held-out row S_i, in the order of the fold's row positions.
    n_fits : int
        Fits made in the fold: 2, or 1 when f̄_i is constant.
    constant : bool
        Whether f̄_i was the constant classifier (U's pseudo labels ∪ Y_L held one class).
    """

    r: np.ndarray
    n_fits: int
    constant: bool


def reverse_validation_fold(
    candidate: Candidate,
    X_source: Any,
    y_source: Any,
    holdout: np.ndarray,
    X_unlabeled: Any,
    *,
    X_labeled: Any = None,
    y_labeled: Any = None,
) -> FoldResidual:
    """TrCV Fig. 1: r(x) = 1[y ≠ ȳ] on S_i = rows ``holdout`` via f_i (on S̄_i) → U → f̄_i (on U ∪ L).

    Parameters
    ----------
    candidate : Candidate
        The learner; f_i uses its source weights, f̄_i is unweighted.
    X_source : array-like or pandas.DataFrame
        Features of the source rows S.
    y_source : array-like
        Labels of S.
    holdout : numpy.ndarray
        Positions of the held-out rows S_i; the rest S̄_i trains f_i.
    X_unlabeled : array-like or pandas.DataFrame
        The unlabeled target rows U, labeled by f_i.
    X_labeled : array-like, pandas.DataFrame or None, default None
        Labeled target rows L added to U for f̄_i, if any.
    y_labeled : array-like or None, default None
        Labels of L.

    Returns
    -------
    FoldResidual
        r(x) on S_i, the number of fits and whether f̄_i was constant.
    """
    n = len(X_source)
    mask = np.ones(n, bool)
    mask[holdout] = False
    train = np.flatnonzero(mask)
    X_hold, y_hold = take(X_source, holdout), np.asarray(y_source)[holdout]
    f_i = fit_candidate(candidate, X_source, y_source, rows=train, X_target=X_unlabeled)
    pseudo = np.asarray(f_i.predict(X_unlabeled))
    if X_labeled is not None:
        X_new = vstack([X_unlabeled, X_labeled])
        y_new = np.concatenate([pseudo, np.asarray(y_labeled)])
    else:
        X_new, y_new = X_unlabeled, pseudo
    classes = np.unique(y_new)
    if len(classes) == 1:
        y_bar = np.full(len(holdout), classes[0])
        return FoldResidual((y_bar != y_hold).astype(float), 1, True)
    f_bar = fit_candidate(candidate, X_new, y_new, weighted=False, X_target=X_hold)
    y_bar = np.asarray(f_bar.predict(X_hold))
    return FoldResidual((y_bar != y_hold).astype(float), 2, False)


@dataclass(frozen=True, eq=False)
class TrCVResult:
    """TrCV Fig. 3 / eq. 14–16 for one learner: loss, accuracy = 1 − loss, eq. 15 interval, eq. 16 μ and σ.

    Parameters
    ----------
    learner : str
        The learner's name.
    loss : float
        Σ β(x)·r(x) / n over the source rows (Fig. 3).
    accuracy : float
        1 − loss (eq. 14 with α = 0).
    interval : tuple of (float, float)
        The eq. 15 interval of ``accuracy``.
    confidence : float
        The interval's confidence level.
    n : int
        The number of source rows validated.
    mu : float
        μ of eq. 16 (the interval's midpoint).
    sigma : float
        σ of eq. 16 (the interval's half-width).
    residuals : numpy.ndarray
        r(x) per source row.
    weights : numpy.ndarray
        β per source row (mean 1).
    folds : numpy.ndarray
        The fold (0-based) of each source row.
    k : int
        The number of folds.
    n_fits : int
        Fits made over all folds.
    n_constant_folds : int
        Folds where f̄_i was the constant classifier.
    n_labeled_target : int, default 0
        The number of labeled target rows L used.
    notes : list of str, default []
        Remarks about the run (e.g. constant folds).
    """

    learner: str
    loss: float
    accuracy: float
    interval: tuple[float, float]
    confidence: float
    n: int
    mu: float
    sigma: float
    residuals: np.ndarray
    weights: np.ndarray
    folds: np.ndarray
    k: int
    n_fits: int
    n_constant_folds: int
    n_labeled_target: int = 0
    notes: list[str] = field(default_factory=list)

    def probability_better_than(self, other: TrCVResult) -> float:
        """TrCV eq. 16: P(ε(self) > ε(other))."""
        return probability_better(self, other)

    def to_frame(self) -> pd.DataFrame:
        """One row in the shared score table (selector 'trcv', score = accuracy, rank 1)."""
        return pd.DataFrame([{
            "learner": self.learner, "selector": "trcv", "score": self.accuracy, "rank": 1,
            "interval_low": self.interval[0], "interval_high": self.interval[1],
        }])[SCORE_COLUMNS]

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable summary (per-row arrays omitted)."""
        return {
            "learner": self.learner, "loss": self.loss, "accuracy": self.accuracy,
            "interval": list(self.interval), "confidence": self.confidence, "n": self.n,
            "mu": self.mu, "sigma": self.sigma, "k": self.k, "n_fits": self.n_fits,
            "n_constant_folds": self.n_constant_folds, "n_labeled_target": self.n_labeled_target,
            "weights_ess": float(self.weights.sum() ** 2 / (self.weights ** 2).sum()),
            "notes": list(self.notes),
        }


def _prepare(X_source: Any, y_source: Any, X_target: Any, X_target_labeled: Any, y_target_labeled: Any,
             k: int) -> tuple[Any, np.ndarray, Any, Any, np.ndarray | None]:
    X_source = check_X(X_source, "X_source")
    y_source = check_y(y_source, X_source, "y_source", "X_source")
    X_target = check_X(X_target, "X_target (unlabeled target rows)", like=X_source)
    if (X_target_labeled is None) != (y_target_labeled is None):
        raise ValueError("pass both X_target_labeled and y_target_labeled, or neither")
    y_l = None
    if X_target_labeled is not None:
        X_target_labeled = check_X(X_target_labeled, "X_target_labeled", like=X_source)
        y_l = check_y(y_target_labeled, X_target_labeled, "y_target_labeled", "X_target_labeled")
    if not isinstance(k, int | np.integer) or k < 2:
        raise ValueError(f"k must be an integer ≥ 2 folds; got {k!r}")
    if k > len(X_source):
        raise ValueError(f"k={k} folds but only {len(X_source)} source rows: use k ≤ the number of rows")
    return X_source, y_source, X_target, X_target_labeled, y_l


def _folds(y: np.ndarray, k: int, random_state: int | None) -> np.ndarray:
    fold = np.empty(len(y), dtype=int)
    _, counts = np.unique(y, return_counts=True)
    if counts.max() < k:
        raise ValueError(f"k={k} folds but no class has {k} source rows: lower k")
    skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=random_state)
    for i, (_, hold) in enumerate(skf.split(np.zeros(len(y)), y)):
        fold[hold] = i
    return fold


@dataclass(frozen=True, eq=False)
class TrCVSetup:
    """What every TrCV fold shares (Fig. 3 step 1): checked inputs, one β on S vs U ∪ L, one fold split.

    Built once by :func:`trcv_setup`; each fold (:func:`trcv_fold`) is then an independent job, so a
    pipeline can fan the folds out and put them back with :func:`trcv_assemble` / :func:`trcv_scores`.

    Parameters
    ----------
    X_source : array-like or pandas.DataFrame
        The checked source features S.
    y_source : numpy.ndarray
        The source labels.
    X_unlabeled : array-like or pandas.DataFrame
        The unlabeled target rows U.
    X_labeled : array-like, pandas.DataFrame or None
        The labeled target rows L, or None.
    y_labeled : numpy.ndarray or None
        Labels of L, or None.
    beta : numpy.ndarray
        β per source row, mean 1.
    folds : numpy.ndarray
        The fold (0-based) of each source row.
    k : int
        The number of folds.
    confidence : float
        Confidence level of the eq. 15 interval.
    random_state : int or None
        The seed used for the fold split.
    weights : str or None
        How β was given: the weighter's name, None, or ``"given"`` for an array or estimator.
    """

    X_source: Any
    y_source: np.ndarray
    X_unlabeled: Any
    X_labeled: Any
    y_labeled: np.ndarray | None
    beta: np.ndarray
    folds: np.ndarray
    k: int
    confidence: float
    random_state: int | None
    weights: Any

    def holdout(self, i: int) -> np.ndarray:
        """Source rows S_i of fold ``i`` (0-based)."""
        if not 0 <= i < self.k:
            raise ValueError(f"fold {i} does not exist: folds are 0 … {self.k - 1}")
        return np.flatnonzero(self.folds == i)


def trcv_setup(
    learners: Any,
    X_source: Any,
    y_source: Any,
    X_target: Any,
    *,
    X_target_labeled: Any = None,
    y_target_labeled: Any = None,
    weights: Any = "kmm",
    k: int = 10,
    confidence: float = 0.95,
    random_state: int | None = None,
) -> TrCVSetup:
    """Checked inputs, β (fitted on all of S against U ∪ L) and the fold split shared by every learner.

    Input errors (including a wrong candidate weight vector) raise here, before any fit.

    Parameters
    ----------
    learners : dict, list, str, Candidate or estimator
        The candidates (checked here for their weights), in any form
        :func:`~shiftlib.selection.candidates.resolve_candidates` accepts.
    X_source : array-like or pandas.DataFrame
        Features of the labeled source rows S.
    y_source : array-like
        Labels of S, one per row of ``X_source``.
    X_target : array-like or pandas.DataFrame
        Features of the unlabeled target rows U.
    X_target_labeled : array-like, pandas.DataFrame or None, default None
        Features of labeled target rows L, if any (given together with ``y_target_labeled``).
    y_target_labeled : array-like or None, default None
        Labels of L.
    weights : str, estimator, array-like or None, default "kmm"
        How to get β on S (see :func:`~shiftlib.selection.importance.importance_weights`); fitted on S vs U ∪ L.
    k : int, default 10
        Number of stratified folds of S (at least 2; some class needs k rows).
    confidence : float, default 0.95
        Confidence level of the eq. 15 interval (and of eq. 16's σ).
    random_state : int or None, default None
        Seed for the fold split and for learners built from registry names.

    Returns
    -------
    TrCVSetup
        The checked inputs, β and the fold split.
    """
    X_s, y_s, X_u, X_l, y_l = _prepare(X_source, y_source, X_target, X_target_labeled, y_target_labeled, k)
    _z(confidence)
    for c in resolve_candidates(learners, random_state=random_state):
        c.source_weights(len(y_s))
    X_all_t = X_u if X_l is None else vstack([X_u, X_l])
    beta = importance_weights(weights, X_s, X_all_t)
    return TrCVSetup(X_s, y_s, X_u, X_l, y_l, beta, _folds(y_s, k, random_state), k, confidence, random_state,
                     weights if isinstance(weights, str | None) else "given")


def trcv_fold(candidate: Candidate, setup: TrCVSetup, i: int) -> FoldResidual:
    """TrCV Fig. 1 for fold ``i`` of ``setup``; a ``ValueError`` from a fit names the learner and the fold.

    Parameters
    ----------
    candidate : Candidate
        The learner.
    setup : TrCVSetup
        The shared inputs, β and fold split (from :func:`trcv_setup`).
    i : int
        The fold, 0-based.

    Returns
    -------
    FoldResidual
        r(x) on the fold's held-out rows.
    """
    try:
        return reverse_validation_fold(candidate, setup.X_source, setup.y_source, setup.holdout(i),
                                       setup.X_unlabeled, X_labeled=setup.X_labeled, y_labeled=setup.y_labeled)
    except ValueError as err:
        raise ValueError(
            f"TrCV: learner {candidate.name!r} could not be fitted in fold {i + 1} of {setup.k}: {err}"
        ) from err


def trcv_fold_all(candidates: list[Candidate], setup: TrCVSetup, i: int) -> dict[str, FoldResidual | str]:
    """Fold ``i`` for every candidate: name → its :class:`FoldResidual`, or the fit's error message (one
    independent job; :func:`trcv_from_folds` puts the folds together).

    Parameters
    ----------
    candidates : list of Candidate
        The learners.
    setup : TrCVSetup
        The shared inputs, β and fold split (from :func:`trcv_setup`).
    i : int
        The fold, 0-based.

    Returns
    -------
    dict of str to FoldResidual or str
        Per learner name, its fold residual or the ``ValueError`` message of its failed fit.
    """
    out: dict[str, FoldResidual | str] = {}
    for c in candidates:
        try:
            out[c.name] = trcv_fold(c, setup, i)
        except ValueError as err:
            out[c.name] = str(err)
    return out


def trcv_from_folds(names: list[str], setup: TrCVSetup, folds: list[dict[str, FoldResidual | str]]) -> SelectorScores:
    """TrCV's selector table from all k folds (``folds[i]`` = :func:`trcv_fold_all` of fold i): a learner
    that failed in any fold scores NaN with the first fold's message in ``errors`` (and a warning).

    Parameters
    ----------
    names : list of str
        The learners, in output order.
    setup : TrCVSetup
        The shared inputs, β and fold split (from :func:`trcv_setup`).
    folds : list of dict of str to FoldResidual or str
        One entry per fold, in fold order, each as returned by :func:`trcv_fold_all`.

    Returns
    -------
    SelectorScores
        As :func:`trcv_scores` returns it.
    """
    results, errors = {}, {}
    for n in names:
        parts = [f[n] for f in folds]
        failed = [p for p in parts if isinstance(p, str)]
        if failed:
            errors[n] = f"{failed[0]}; its score is NaN"
            warnings.warn(errors[n], RuntimeWarning, stacklevel=2)
        else:
            results[n] = trcv_assemble(n, setup, parts)
    return trcv_scores(names, setup, results, errors)


def trcv_assemble(learner: str, setup: TrCVSetup, folds: list[FoldResidual]) -> TrCVResult:
    """TrCV Fig. 3 / eq. 14–16 from one learner's k fold residuals (``folds[i]`` = fold i).

    Parameters
    ----------
    learner : str
        The learner's name.
    setup : TrCVSetup
        The shared inputs, β and fold split (from :func:`trcv_setup`).
    folds : list of FoldResidual
        All k fold residuals of the learner, in fold order.

    Returns
    -------
    TrCVResult
        The loss, accuracy, interval, μ and σ of the learner.
    """
    if len(folds) != setup.k:
        raise ValueError(f"TrCV needs all {setup.k} folds of {learner!r}; got {len(folds)}")
    n = len(setup.y_source)
    r = np.empty(n)
    for i, fr in enumerate(folds):
        r[setup.holdout(i)] = fr.r
    n_fits = sum(fr.n_fits for fr in folds)
    n_const = sum(fr.constant for fr in folds)
    loss = float(np.sum(setup.beta * r) / n)
    acc = 1.0 - loss
    interval = accuracy_interval(acc, n, setup.confidence)
    mu, sigma = accuracy_distribution(acc, n, setup.confidence)
    notes = []
    if n_const:
        notes.append(f"{n_const} of {setup.k} folds: f_i labeled the target with one class; f̄_i is constant")
    return TrCVResult(learner, loss, acc, interval, setup.confidence, n, mu, sigma, r, setup.beta, setup.folds,
                      setup.k, n_fits, n_const, 0 if setup.X_labeled is None else len(setup.X_labeled), notes)


def trcv_scores(names: list[str], setup: TrCVSetup, results: dict[str, TrCVResult],
                errors: dict[str, str]) -> SelectorScores:
    """The selector table over ``names`` (score = eq. 14 accuracy, interval = eq. 15); a learner in
    ``errors`` scores NaN and keeps its message.

    Parameters
    ----------
    names : list of str
        The learners, in output order.
    setup : TrCVSetup
        The shared inputs, β and fold split (from :func:`trcv_setup`).
    results : dict of str to TrCVResult
        The result of each learner that was scored.
    errors : dict of str to str
        The message of each learner that could not be scored.

    Returns
    -------
    SelectorScores
        Selector ``"trcv"``; ``details["results"]`` holds ``results`` and ``n_fits`` sums their fits.
    """
    scores = pd.Series({n: results[n].accuracy if n in results else np.nan for n in names}, dtype=float)
    intervals = pd.DataFrame({"low": {n: results[n].interval[0] if n in results else np.nan for n in names},
                              "high": {n: results[n].interval[1] if n in results else np.nan for n in names}})
    return SelectorScores(
        "trcv", scores, sum(r.n_fits for r in results.values()), intervals,
        {"results": results, "params": {"k": setup.k, "confidence": setup.confidence,
                                        "random_state": setup.random_state, "weights": setup.weights}},
        errors,
    )


def trcv(
    learner: Any,
    X_source: Any,
    y_source: Any,
    X_target: Any,
    *,
    X_target_labeled: Any = None,
    y_target_labeled: Any = None,
    weights: Any = "kmm",
    k: int = 10,
    confidence: float = 0.95,
    random_state: int | None = None,
) -> TrCVResult:
    """TrCV Fig. 3 for one learner (a registry name, estimator or Candidate); returns a ``TrCVResult``.

    ``weights``: a ``shiftlib.weights`` name (default KMM), an estimator with ``fit(X_source,
    X_target)`` / ``weights_``, an array (one per source row) or None (all 1); β is fitted on S vs
    U ∪ L and normalised to mean 1. ``random_state`` seeds the folds and registry-built learners.

    Parameters
    ----------
    learner : str, Candidate or estimator
        One learner: a registry name, a ``Candidate``, or an estimator (named by its class).
    X_source : array-like or pandas.DataFrame
        Features of the labeled source rows S.
    y_source : array-like
        Labels of S, one per row of ``X_source``.
    X_target : array-like or pandas.DataFrame
        Features of the unlabeled target rows U.
    X_target_labeled : array-like, pandas.DataFrame or None, default None
        Features of labeled target rows L, if any (given together with ``y_target_labeled``).
    y_target_labeled : array-like or None, default None
        Labels of L.
    weights : str, estimator, array-like or None, default "kmm"
        How to get β on S (see :func:`~shiftlib.selection.importance.importance_weights`); fitted on S vs U ∪ L.
    k : int, default 10
        Number of stratified folds of S (at least 2; some class needs k rows).
    confidence : float, default 0.95
        Confidence level of the eq. 15 interval (and of eq. 16's σ).
    random_state : int or None, default None
        Seed for the fold split and for learners built from registry names.

    Returns
    -------
    TrCVResult
        The learner's loss, accuracy, eq. 15 interval and eq. 16 μ and σ.

    Raises
    ------
    TypeError
        ``learner`` is a list, tuple or dict (use :func:`trcv_select`).
    ValueError
        A fit fails in some fold (the message names the learner and fold), or the inputs are invalid.
    """
    if isinstance(learner, Candidate | str):
        cand = resolve_candidates([learner], random_state=random_state)[0]
    elif isinstance(learner, list | tuple | dict):
        raise TypeError(f"trcv scores one learner, got a {type(learner).__name__} of them: to score several, call "
                        "trcv_select(learners, X_source, y_source, X_target)")
    else:
        cand = Candidate(type(learner).__name__, learner)
    setup = trcv_setup([cand], X_source, y_source, X_target, X_target_labeled=X_target_labeled,
                       y_target_labeled=y_target_labeled, weights=weights, k=k, confidence=confidence,
                       random_state=random_state)
    return trcv_assemble(cand.name, setup, [trcv_fold(cand, setup, i) for i in range(k)])


def trcv_select(
    learners: Any,
    X_source: Any,
    y_source: Any,
    X_target: Any,
    *,
    X_target_labeled: Any = None,
    y_target_labeled: Any = None,
    weights: Any = "kmm",
    k: int = 10,
    confidence: float = 0.95,
    random_state: int | None = None,
) -> SelectorScores:
    """TrCV for several learners with one β and one fold split; returns ``SelectorScores`` (score = eq. 14 accuracy).

    ``details["results"]`` maps learner → ``TrCVResult``; intervals are eq. 15. A learner that cannot
    be fitted in some fold (``ValueError``) scores NaN with a warning and an entry in ``errors``.

    Parameters
    ----------
    learners : dict, list, str, Candidate or estimator
        The candidates, in any form :func:`~shiftlib.selection.candidates.resolve_candidates` accepts.
    X_source : array-like or pandas.DataFrame
        Features of the labeled source rows S.
    y_source : array-like
        Labels of S, one per row of ``X_source``.
    X_target : array-like or pandas.DataFrame
        Features of the unlabeled target rows U.
    X_target_labeled : array-like, pandas.DataFrame or None, default None
        Features of labeled target rows L, if any (given together with ``y_target_labeled``).
    y_target_labeled : array-like or None, default None
        Labels of L.
    weights : str, estimator, array-like or None, default "kmm"
        How to get β on S (see :func:`~shiftlib.selection.importance.importance_weights`); fitted on S vs U ∪ L.
    k : int, default 10
        Number of stratified folds of S (at least 2; some class needs k rows).
    confidence : float, default 0.95
        Confidence level of the eq. 15 interval (and of eq. 16's σ).
    random_state : int or None, default None
        Seed for the fold split and for learners built from registry names.

    Returns
    -------
    SelectorScores
        Selector ``"trcv"``: each learner's eq. 14 accuracy with its eq. 15 interval.
    """
    cands = resolve_candidates(learners, random_state=random_state)
    setup = trcv_setup(cands, X_source, y_source, X_target, X_target_labeled=X_target_labeled,
                       y_target_labeled=y_target_labeled, weights=weights, k=k, confidence=confidence,
                       random_state=random_state)
    return trcv_from_folds([c.name for c in cands], setup, [trcv_fold_all(cands, setup, i) for i in range(k)])
