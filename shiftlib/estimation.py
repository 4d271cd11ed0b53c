"""Accuracy of a learner on the unlabeled target batch, with an interval (docs/architecture.md "Accuracy estimates").

One stratified k-fold split of the source rows gives every learner's out-of-fold (OOF) probabilities;
one fit on all source rows gives the *served* model's probabilities on the target batch. Every method
reads only these stored predictions (plus the importance weights and, for TrCV, its fold residuals):

==================  ============================================================================
``"cv"``            source k-fold CV accuracy (the naive baseline; TrCV eq. 2)
``"iwcv"``          importance-weighted CV, ``Σ w_i·c_i / Σ w_i`` (Sugiyama, Krauledat & Müller,
                    JMLR 2007), c_i = 1[OOF prediction correct]
``"trcv"``          TrCV Fig. 3 / eq. 14, ``1 − Σ β_i r_i / Σ β_i`` (``shiftlib.selection.trcv``)
``"doc"``           difference of confidences (Guillory et al., ICCV 2021):
                    ``acc_cv − (mean conf_source − mean conf_target)``, conf = max probability
``"atc"``           average thresholded confidence (Garg et al., ICLR 2022, ATC-NE): score =
                    negative entropy; t fitted so the share of OOF source rows with score > t equals
                    the CV accuracy; estimate = share of target rows with score > t
``"cbpe"``          confidence-based performance estimation (the idea of NannyML's CBPE): isotonic
                    calibration of 1[OOF prediction correct] on the predicted class's OOF
                    probability (top-label calibration); estimate = mean calibrated probability of
                    the predicted class over the target rows
``"weighted-cbpe"`` the same calibration fitted with importance weights, so it is calibrated for the
                    target distribution under covariate shift
``"em"``            label (prior) shift: class-wise isotonic calibration of the OOF probabilities gives
                    p_s(y|x); the target prior π_t is the EM fixed point of Saerens, Latinne &
                    Decaestecker (Neural Computation 2002, eq. 2.9–2.10) on the target rows, as
                    recommended with calibrated posteriors by Alexandari et al. (ICML 2020); the
                    posteriors are re-weighted q(y|x) ∝ p_s(y|x)·π_t(y)/π_s(y) and the estimate is the
                    mean over target rows of q(ŷ|x), ŷ the served model's prediction
``"bbse"``          the same re-weighting with π_t from black-box shift estimation (Lipton, Wang &
                    Smola, ICML 2018): solve C·w = μ̂_t, C the OOF confusion matrix P_s(ŷ=i, y=j) and
                    μ̂_t the served model's predicted-class shares on the target; π_t = w·π_s
``"weighted-em"``   covariate and label shift: the calibration fitted with importance weights (as
                    ``weighted-cbpe``) and EM from the weighted source prior π_w (what the weighted
                    calibration is calibrated for), so a shift the weights explain needs no prior change
``"cbpe-nml"``      NannyML's CBPE recipe (``nannyml/calibration.py`` ``needs_calibration``,
                    ``performance_estimation/confidence_based/metrics.py`` ``estimate_accuracy``):
                    isotonic calibration of the class-1 score (one-vs-rest per class for more classes),
                    applied only when a cross-validated check on the source rows shows it lowers the
                    expected calibration error (:func:`needs_calibration`); estimate = mean over target
                    rows of the (calibrated) probability of the predicted class (:func:`checked_posteriors`)
``"pape"``          PAPE (Białek, Kivimäki, Kuberski & Perrakis, NeurIPS 2025, arXiv 2401.08348): the
                    class-1 score (one-vs-rest per class for more classes) calibrated against the label by
                    a gradient-boosted regression (LightGBM's defaults) fitted with density-ratio weights
                    capped as PAPE caps them; estimate = mean over target rows of the calibrated probability
                    of the predicted class (:func:`pape_posteriors`, :func:`pape_weights`)
``"minimax"``       the midpoint of the smallest and largest estimate of the three shift models
                    (``cbpe``: none, ``weighted-cbpe``: covariate, ``em``: label shift): when the truth is
                    one of them and which cannot be told from unlabeled rows, the midpoint (Chebyshev
                    centre) minimises the worst-case absolute error, half the range
``"median"``        the median of :data:`MEDIAN_COMPONENTS`, the ten estimators that need no fits beyond
                    the stored predictions: equal-weight combinations are hard to beat (Clemen, Int. J.
                    Forecasting 1989; Timmermann, Handbook of Economic Forecasting 2006) and the median's
                    breakdown point of 1/2 bounds one estimator failing on a shift it does not model
``"auto"``          :data:`AUTO_METHOD`, chosen by the pre-declared rule of ``reports/estimation.md``
==================  ============================================================================

**Intervals** (every method, the same recipe): ``estimate ± z·√(V_source + V_target + V_shift)``
(``interval="shift"``, the default of a named method), clipped to [0, 1], z the two-sided normal quantile at
``confidence``; ``interval="plain"`` leaves V_shift out and ``interval="model"`` adds V_model instead.
``method="auto"`` with no ``interval`` ships :data:`AUTO_INTERVAL` with its half-width multiplied by
:data:`AUTO_INFLATION` (1: rule revision 4's 2.5 is not shipped, ``reports/estimation.md``): ``estimate ±
c·z·√(V_source + V_target + V_model)``.

* ``V_source`` — the source-side estimation: variance of the method's estimate over ``n_boot``
  bootstrap resamples of the source OOF rows (with their labels, weights and, for TrCV, residuals),
  the target batch held fixed. Computed on the stored predictions; nothing is refitted. Every method
  evaluated in one call reads the same resamples, so a combination's (``minimax``, ``median``) V_source
  is the variance of the combination itself. For the label-shift methods (``em``, ``bbse``,
  ``weighted-em``, and combinations that contain them) each resample also redraws the target rows the
  prior is estimated from (the accuracy is still averaged over the whole batch), so the prior's
  estimation error is in it.
* ``V_target`` — the finite target batch: ``a(1 − a)/n_t``, the binomial variance of the realised
  accuracy of n_t rows whose accuracy is a. It bounds both the batch's Bernoulli noise given its
  rows and the spread of a batch's accuracy around its population's.
* ``V_shift`` — how far the source-side calibration may be off on the target (see
  :func:`shift_variance`).
* ``V_model`` — which shift model holds: the largest squared gap between the estimate and the estimates
  of the three shift models (``cbpe``: none, ``weighted-cbpe``: covariate, ``em``: label shift), so the
  interval holds all three (see :func:`model_variance`).

What no interval covers: refitting noise of the learner itself (the folds are fixed), error in the
importance weights beyond their row resampling, and a change of P(y|x) between source and target
(concept shift), which no label-free method can see.

Decisions where the sources are silent: k = 10 folds (``StratifiedKFold(shuffle=True)``), the same
split for every learner and method; weights default to ``DiscriminativeWeights`` (DL eq. 7, cheap and
out-of-fold) and are fitted once, only when a method needs them; the predicted class is the argmax of
``predict_proba``.
"""

from __future__ import annotations

import bisect
import heapq
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from statistics import NormalDist
from typing import Any

import numpy as np
from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

from shiftlib.selection._validation import check_X, check_y, take
from shiftlib.selection.candidates import fit_candidate, resolve_candidates
from shiftlib.selection.importance import importance_weights
from shiftlib.selection.results import SelectorScores
from shiftlib.selection.trcv import TrCVSetup, trcv_assemble, trcv_fold

__all__ = [
    "AUTO_INFLATION",
    "AUTO_INTERVAL",
    "AUTO_METHOD",
    "INTERVALS",
    "LABEL_SHIFT_METHODS",
    "METHODS",
    "N_BOOT",
    "PAPE_MIN_DENOMINATOR",
    "PAPE_MIN_WEIGHT",
    "WEIGHTED_METHODS",
    "AccuracyEstimate",
    "StoredPredictions",
    "atc_threshold",
    "COMBINATIONS",
    "MEDIAN_COMPONENTS",
    "SHIFT_MODELS",
    "bbse_prior",
    "calibrated_posteriors",
    "checked_posteriors",
    "estimate_methods",
    "expected_calibration_error",
    "needs_calibration",
    "em_prior",
    "model_variance",
    "paired_draws",
    "pape_posteriors",
    "pape_weights",
    "boosted_calibration",
    "prior_shift_posteriors",
    "estimate_accuracies",
    "estimate_accuracy",
    "estimate_each",
    "estimate_from_predictions",
    "label_shift_prior",
    "point_estimate",
    "shared_source_cv",
    "shift_variance",
    "stored_predictions",
]

METHODS: tuple[str, ...] = ("cv", "iwcv", "trcv", "doc", "atc", "cbpe", "weighted-cbpe", "em", "bbse",
                             "weighted-em", "cbpe-nml", "minimax", "median", "pape")
#: the three shift models whose estimates ``minimax`` and the ``model`` interval span
SHIFT_MODELS: tuple[str, ...] = ("cbpe", "weighted-cbpe", "em")
#: what ``median`` takes the median of: every estimator that needs no fits beyond the stored predictions
#: (not ``trcv``: two more fits per fold)
MEDIAN_COMPONENTS: tuple[str, ...] = ("cv", "iwcv", "doc", "atc", "cbpe", "weighted-cbpe", "em", "bbse",
                                      "weighted-em", "cbpe-nml")
#: methods that combine other methods' estimates (on shared bootstrap resamples)
COMBINATIONS: frozenset[str] = frozenset({"minimax", "median"})
#: methods that read the importance weights
WEIGHTED_METHODS: frozenset[str] = frozenset({"iwcv", "trcv", "weighted-cbpe", "weighted-em", "pape"})
#: methods that estimate the target's class prior from the target rows (their bootstrap redraws those rows)
LABEL_SHIFT_METHODS: frozenset[str] = frozenset({"em", "bbse", "weighted-em"})
#: the interval kinds, narrowest first: V_source + V_target, + V_shift, + V_model
INTERVALS: tuple[str, ...] = ("plain", "shift", "model")
#: what ``method="auto"`` means: the outcome of the rule (revision 3, kept by revision 4) in ``reports/estimation.md``
#: before its results — only with the ``model`` interval does any method reach 0.90 coverage in both case
#: groups, and among those ``median`` has the smallest worst-group MAE; left-one-data-set-out, the rule picks
#: the same pair for each of the ten data sets (revision 2 had chosen ``doc``)
AUTO_METHOD = "median"
#: the interval ``method="auto"`` ships (the rule chooses a method and an interval kind together)
AUTO_INTERVAL = "model"
#: the factor ``method="auto"`` multiplies its interval's half-width by, before clipping to [0, 1] (only ``"auto"``
#: with ``interval=None``). 1: rule revision 4 of ``reports/estimation.md`` picked 2.5 (the smallest c of a grid fixed
#: before its results giving ``median`` / ``model`` coverage ≥ 0.90 in every group on all cells), and it is not
#: shipped. Held out one data set at a time it lifts the group it was for, new natural, only from 0.824 to 0.833
#: (its misses are one data set, Guns, off by 0.28), while every interval is 2.5 times wider (natural mean width
#: 0.81) and the ``min_accuracy`` alert can no longer fire on a typical model (its upper end clipped at 1). A decision
#: taken after the results, against the rule's outcome; the report says so
AUTO_INFLATION = 1.0
#: PAPE's cap on the density ratio: the domain classifier's 1 − P(target | x) is floored at this value, so a
#: weight is at most (n_s/n_t)/0.05 = 20·n_s/n_t. It is the default of NannyML's Apache-2.0 importance-weighting
#: estimator (``IW``, ``density_ratio_minimum_denominator``, read in its source), which issue 28 and independent
#: re-implementations of PAPE report as PAPE's own (the authors' non-commercial code was not read)
PAPE_MIN_DENOMINATOR = 0.05
#: PAPE's floor on the density ratio (NannyML ``IW``'s ``density_ratio_minimum_value``): no source row gets
#: weight 0
PAPE_MIN_WEIGHT = 0.001
#: bootstrap resamples of V_source: the number the replication measured coverage with (reports/estimation.md)
N_BOOT = 100


@dataclass(frozen=True)
class AccuracyEstimate:
    """Estimated accuracy on the target batch, its two-sided interval at ``details['confidence']``,
    the method that made it (``"auto"`` resolved to the method used) and how (``details``).

    Parameters
    ----------
    accuracy : float
        The estimated accuracy.
    ci_low, ci_high : float
        The interval, clipped to [0, 1].
    method : str
        The method used (``"auto"`` resolved).
    details : dict
        How: the confidence, the interval kind, the variance terms as standard errors, row counts and
        method-specific values (:func:`estimate_methods`).
    """

    accuracy: float
    ci_low: float
    ci_high: float
    method: str
    details: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """Flat JSON-friendly summary (details' scalars only)."""
        out = {"accuracy": self.accuracy, "ci_low": self.ci_low, "ci_high": self.ci_high, "method": self.method}
        out.update({k: v for k, v in self.details.items() if isinstance(v, int | float | str | bool)})
        return out


@dataclass(frozen=True, eq=False)
class StoredPredictions:
    """One learner's predictions that every method reads (nothing is refitted after these).

    ``proba_source``: out-of-fold probabilities on the source rows (columns = ``classes``);
    ``proba_target``: the served model's (fit on all source rows) probabilities on the target batch;
    ``y_source``: source labels as column positions into ``classes``; ``folds``: fold of each source
    row; ``weights``: importance weights on the source rows (mean 1, or None when not fitted);
    ``trcv_residuals``: TrCV Fig. 1's r(x) per source row (None unless TrCV was run).

    Parameters
    ----------
    learner : str
        The learner's name.
    classes : numpy.ndarray
        The class labels, in column order.
    y_source : numpy.ndarray of shape (n_source,)
        Source labels as column positions into ``classes``.
    proba_source : numpy.ndarray of shape (n_source, n_classes)
        Out-of-fold probabilities on the source rows.
    proba_target : numpy.ndarray of shape (n_target, n_classes)
        The served model's probabilities on the target batch.
    folds : numpy.ndarray of shape (n_source,)
        Fold of each source row.
    weights : numpy.ndarray of shape (n_source,), optional
        Importance weights of the source rows (None when not fitted).
    trcv_residuals : numpy.ndarray of shape (n_source,), optional
        TrCV's residual r(x) per source row (None unless TrCV was run).
    trcv_error : str, optional
        Why TrCV failed for this learner, raised when method ``"trcv"`` is asked for (None otherwise).
    """

    learner: str
    classes: np.ndarray
    y_source: np.ndarray
    proba_source: np.ndarray
    proba_target: np.ndarray
    folds: np.ndarray
    weights: np.ndarray | None = None
    trcv_residuals: np.ndarray | None = None
    trcv_error: str | None = None

    @property
    def correct_source(self) -> np.ndarray:
        """1.0 where the OOF prediction (argmax) equals the source label."""
        return (np.argmax(self.proba_source, axis=1) == self.y_source).astype(float)

    @property
    def predicted_target(self) -> np.ndarray:
        """The served model's predicted class on each target row (labels from ``classes``)."""
        return self.classes[np.argmax(self.proba_target, axis=1)]


# ----------------------------------------------------------------------------------------------------
# point estimates (on row subsets of the source, target fixed)
# ----------------------------------------------------------------------------------------------------
def _neg_entropy(p: np.ndarray) -> np.ndarray:
    q = np.clip(p, 1e-12, 1.0)
    return np.sum(p * np.log(q), axis=1)


def atc_threshold(score_source: np.ndarray, accuracy: float) -> tuple[float, float]:
    """ATC's threshold (Garg et al. 2022) with ties split: returns (t, λ) such that
    ``mean(s > t) + λ·mean(s == t) = accuracy`` on the source scores exactly (λ ∈ [0, 1]).

    Parameters
    ----------
    score_source : numpy.ndarray of shape (n,)
        The confidence scores of the source rows (ATC-NE: negative entropy).
    accuracy : float
        The source accuracy the threshold must reproduce.

    Returns
    -------
    tuple of float
        (t, λ): the threshold and the share of rows scored exactly t counted above it (t = −inf when
        ``accuracy`` is 1 or more).
    """
    s = np.sort(np.asarray(score_source, float))[::-1]
    n = len(s)
    m = accuracy * n
    if m >= n:
        return -math.inf, 1.0
    t = float(s[int(math.floor(m))]) if m > 0 else float(s[0])
    above, tie = float(np.sum(s > t)), float(np.sum(s == t))
    lam = float(np.clip((m - above) / tie, 0.0, 1.0)) if tie else 0.0
    return t, lam


class IsotonicMap:
    """An increasing isotonic map fitted by ``scipy.optimize.isotonic_regression``, predicting by linear
    interpolation with clipping: the steps of scikit-learn's ``IsotonicRegression(increasing=True,
    out_of_bounds="clip")`` (rows of weight 0 dropped, equal scores merged into their weighted mean label,
    the pooled-adjacent-violators fit, ``y_min``/``y_max`` clipping, queries clipped to the fitted range).
    Hand-written only as a thin wrapper: the bootstrap refits thousands of 1-D maps and scikit-learn's
    per-call input validation was most of their time.

    Parameters
    ----------
    y_min, y_max : float, optional
        Bounds the fitted values are clipped to (None: no bound).
    """

    def __init__(self, y_min: float | None = None, y_max: float | None = None) -> None:
        self.y_min, self.y_max = y_min, y_max

    def fit(self, x: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None = None, *,
            presorted: bool = False) -> IsotonicMap:
        """Fit the map; ``presorted``: the rows already come sorted by (x, y) and unweighted (the caller sorted
        them once for many fits)."""
        from scipy.optimize import isotonic_regression

        x, y = np.asarray(x, float).ravel(), np.asarray(y, float).ravel()
        w = None
        if not (presorted and sample_weight is None):
            w = np.ones_like(x) if sample_weight is None else np.asarray(sample_weight, float).ravel()
            keep = w > 0
            x, y, w = x[keep], y[keep], w[keep]
            order = np.lexsort((y, x))
            x, y, w = x[order], y[order], w[order]
        first = _groups(x)
        group = np.cumsum(first) - 1
        wu = np.bincount(group, w)
        yu = np.bincount(group, y if w is None else w * y) / wu
        fitted = isotonic_regression(yu, weights=wu, increasing=True).x
        if self.y_min is not None or self.y_max is not None:
            fitted = np.clip(fitted, -np.inf if self.y_min is None else self.y_min,
                             np.inf if self.y_max is None else self.y_max)
        self.x_, self.y_ = x[first], fitted
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        x = np.clip(np.asarray(x, float).ravel(), self.x_[0], self.x_[-1])
        return np.interp(x, self.x_, self.y_) if len(self.x_) > 1 else np.full(len(x), self.y_[0])


def _groups(x: np.ndarray) -> np.ndarray:
    """Where each group of equal scores starts in sorted ``x``, grouped as scikit-learn's ``_make_unique``
    does: a group holds the scores less than ``finfo(float64).resolution`` (1e-15) above its first score."""
    eps = np.finfo(np.float64).resolution
    gaps = np.diff(x)
    if not np.any((gaps > 0) & (gaps < eps)):  # the usual case: near-equal only when equal
        first = np.empty(len(x), bool)
        first[:1] = True
        np.not_equal(gaps, 0, out=first[1:])
        return first
    # a gap ≥ eps always starts a group (x − first ≥ that gap, and float subtraction is monotone); between two
    # such gaps lies a run of crowded scores, one group when it spans less than eps (e.g. probabilities near 0)
    first = np.r_[True, gaps >= eps]
    starts = np.flatnonzero(first)
    ends = np.r_[starts[1:], len(x)]
    for a, b in zip(starts, ends, strict=True):
        if x[b - 1] - x[a] < eps:
            continue
        i = a
        while i < b:  # a wide crowded run (e.g. probabilities saturated at 1): chain as scikit-learn
            first[i] = True
            j = int(np.searchsorted(x[:b], x[i] + eps, side="left"))
            while j > i + 1 and x[j - 1] - x[i] >= eps:  # scikit-learn's test is x − first ≥ eps, in that rounding
                j -= 1
            while j < b and x[j] - x[i] < eps:
                j += 1
            i = j
    return first


def _isotonic(conf: np.ndarray, correct: np.ndarray, w: np.ndarray | None) -> IsotonicMap:
    return IsotonicMap(y_min=0.0, y_max=1.0).fit(conf, correct, sample_weight=w)


def calibrated_posteriors(proba_source: np.ndarray, y_source: np.ndarray, proba_target: np.ndarray,
                          sample_weight: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Class-wise isotonic calibration (Zadrozny & Elkan, KDD 2002) of the OOF probabilities against the
    source labels: (calibrated source rows, calibrated target rows), rows summing to one.

    Binary: one isotonic map of 1[y = 1] on the class-1 probability, class 0 its complement. More classes:
    one-vs-rest maps, rows renormalised (a row all maps send to 0 keeps its uncalibrated probabilities).
    Isotonic regression keeps the (weighted) mean of each class indicator, so the source rows' mean
    calibrated posterior is the (weighted) source prior — the reference prior of :func:`em_prior`.

    Parameters
    ----------
    proba_source : numpy.ndarray of shape (n, k)
        Out-of-fold class probabilities of the source rows.
    y_source : numpy.ndarray of shape (n,)
        Source labels as column positions.
    proba_target : numpy.ndarray of shape (m, k)
        The served model's class probabilities on the target rows.
    sample_weight : numpy.ndarray of shape (n,), optional
        Weights of the source rows in the calibration (e.g. importance weights); None: unweighted.

    Returns
    -------
    tuple of numpy.ndarray
        The calibrated source rows (n, k) and target rows (m, k).
    """
    n_cls = proba_source.shape[1]
    if n_cls == 2:
        iso = _isotonic(proba_source[:, 1], (y_source == 1).astype(float), sample_weight)
        ps, pt = iso.predict(proba_source[:, 1]), iso.predict(proba_target[:, 1])
        return np.c_[1 - ps, ps], np.c_[1 - pt, pt]
    cs, ct = np.empty_like(proba_source), np.empty_like(proba_target)
    for c in range(n_cls):
        iso = _isotonic(proba_source[:, c], (y_source == c).astype(float), sample_weight)
        cs[:, c], ct[:, c] = iso.predict(proba_source[:, c]), iso.predict(proba_target[:, c])
    out = []
    for cal, raw in ((cs, proba_source), (ct, proba_target)):
        tot = cal.sum(axis=1, keepdims=True)
        out.append(np.where(tot > 0, cal / np.where(tot > 0, tot, 1.0), raw))
    return out[0], out[1]


def expected_calibration_error(y_true: np.ndarray, proba: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error of a binary score with equal-count bins, as NannyML computes it
    (``nannyml/calibration.py`` ``_calculate_expected_calibration_error``): sort by score, cut into ``bins``
    runs of ⌊n/bins⌋ rows (the last takes the rest; fewer bins when n ≤ 2·bins), and sum over runs
    (run size / n)·|mean score − mean label|. Hand-written: NannyML is not a runtime dependency and
    scikit-learn's ``calibration_curve`` bins differently.

    Parameters
    ----------
    y_true : numpy.ndarray of shape (n,)
        0/1 labels.
    proba : numpy.ndarray of shape (n,)
        The score (probability of label 1).
    bins : int, default 10
        Number of equal-count bins (lowered to n // 2 when n ≤ 2·bins; at least 4 rows are needed).

    Returns
    -------
    float
        The expected calibration error.
    """
    y_true, proba = np.asarray(y_true, float), np.asarray(proba, float)
    n = len(proba)
    if n <= 2 * bins:
        bins = n // 2
        if bins < 2:
            raise ValueError(f"expected calibration error needs at least 4 rows; got {n}")
    width = n // bins
    edges = np.asarray(range(0, n + 1, width))
    edges[-1] = n
    order = proba.argsort()  # NannyML's call, so ties fall the same way
    p, y = proba[order], y_true[order]
    return float(sum((b - a) / n * abs(p[a:b].mean() - y[a:b].mean()) for a, b in zip(edges[:-1], edges[1:], strict=True)))


def needs_calibration(y_true: np.ndarray, proba: np.ndarray, *, bins: int = 10, splits: int = 10,
                      random_state: int = 42) -> bool:
    """NannyML's test whether isotonic calibration helps a binary score (``nannyml/calibration.py``
    ``needs_calibration``): False for a single class or AUROC > 0.999; else fit isotonic regression on 90%
    of the rows in each of ``splits`` ``StratifiedShuffleSplit`` splits (NannyML's seed 42), pool the 10%
    test rows, and return whether the calibrated scores' :func:`expected_calibration_error` is below the
    raw scores'. A class with a single row (possible in a bootstrap resample, where NannyML would raise)
    → False.

    Parameters
    ----------
    y_true : numpy.ndarray of shape (n,)
        Binary labels (the larger label is the positive class of the AUROC).
    proba : numpy.ndarray of shape (n,)
        The score of the positive class.
    bins : int, default 10
        Bins of :func:`expected_calibration_error`.
    splits : int, default 10
        Number of stratified shuffle splits.
    random_state : int, default 42
        Seed of the splits (NannyML's).

    Returns
    -------
    bool
        Whether the isotonic map lowers the pooled test rows' expected calibration error.
    """
    from scipy.stats import rankdata

    y_true, proba = np.asarray(y_true), np.asarray(proba, float)
    _, counts = np.unique(y_true, return_counts=True)
    if len(counts) < 2 or counts.min() < 2:
        return False
    pos = y_true == np.unique(y_true)[-1]
    n1, n0 = int(pos.sum()), int((~pos).sum())
    auroc = (rankdata(proba)[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0)  # Mann–Whitney = ROC AUC, ties halved
    if auroc > 0.999:
        return False
    ys, raw, cal = [], [], []
    # every split's training rows in the (score, label) order of all rows: the order an IsotonicMap fit sorts
    # them into (rows tied in both are interchangeable), found by a mask instead of a sort per split
    order = np.lexsort((y_true, proba))
    in_train = np.zeros(len(proba), bool)
    for train, test in _stratified_shuffle_splits(y_true, splits, 0.1, random_state):
        in_train[:] = False
        in_train[train] = True
        rows = order[in_train[order]]
        iso = IsotonicMap().fit(proba[rows], y_true[rows], presorted=True)
        ys.append(y_true[test])
        raw.append(proba[test])
        cal.append(iso.predict(proba[test]))
    y_all, raw_all, cal_all = np.concatenate(ys), np.concatenate(raw), np.concatenate(cal)
    return expected_calibration_error(y_all, cal_all, bins) < expected_calibration_error(y_all, raw_all, bins)


def _stratified_shuffle_splits(y: np.ndarray, n_splits: int, test_size: float, random_state: int
                               ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The splits of ``StratifiedShuffleSplit(n_splits, test_size=test_size, random_state=random_state).split(y, y)``,
    the same arrays from the same random draws (tested against it), with numpy arrays where scikit-learn
    extends Python lists row by row: the bootstrap of ``cbpe-nml`` draws tens of thousands of these splits.
    Classes of a single row are not checked here (``needs_calibration`` returns before)."""
    from sklearn.utils import check_random_state
    from sklearn.utils.extmath import _approximate_mode

    n = len(y)
    n_test = math.ceil(test_size * n)
    n_train = n - n_test
    _, y_idx, counts = np.unique(y, return_inverse=True, return_counts=True)
    class_idx = np.split(np.argsort(y_idx, kind="stable"), np.cumsum(counts)[:-1])
    rng = check_random_state(random_state)
    for _ in range(n_splits):
        n_i = _approximate_mode(counts, n_train, rng)
        t_i = _approximate_mode(counts - n_i, n_test, rng)
        train, test = [], []
        for i in range(len(counts)):
            perm = class_idx[i].take(rng.permutation(counts[i]), mode="clip")
            train.append(perm[: n_i[i]])
            test.append(perm[n_i[i]: n_i[i] + t_i[i]])
        yield rng.permutation(np.concatenate(train)), rng.permutation(np.concatenate(test))


def checked_posteriors(proba_source: np.ndarray, y_source: np.ndarray, proba_target: np.ndarray) -> np.ndarray:
    """NannyML CBPE's calibrated target probabilities (``cbpe.py`` ``_fit_binary`` / ``_fit_calibrators``):
    binary, one isotonic map of the class-1 score fitted on the source rows when :func:`needs_calibration`
    says so (else the raw score), class 0 its complement; more classes, one such checked map per class
    (one-vs-rest), rows renormalised, a row summing to 0 made uniform. Returns the target rows' matrix.

    Parameters
    ----------
    proba_source : numpy.ndarray of shape (n, k)
        Out-of-fold class probabilities of the source rows.
    y_source : numpy.ndarray of shape (n,)
        Source labels as column positions.
    proba_target : numpy.ndarray of shape (m, k)
        The served model's class probabilities on the target rows.

    Returns
    -------
    numpy.ndarray of shape (m, k)
        The (checked-)calibrated target class probabilities, rows summing to one.
    """
    def col(c: int) -> np.ndarray:
        yc = (y_source == c).astype(int)
        if not needs_calibration(yc, proba_source[:, c]):
            return proba_target[:, c].astype(float)
        return IsotonicMap().fit(proba_source[:, c], yc).predict(proba_target[:, c])

    n_cls = proba_source.shape[1]
    if n_cls == 2:
        p1 = col(1)
        return np.c_[1 - p1, p1]
    cal = np.column_stack([col(c) for c in range(n_cls)])
    tot = cal.sum(axis=1, keepdims=True)
    return np.divide(cal, tot, out=np.full_like(cal, 1.0 / n_cls), where=tot != 0)


def pape_weights(domain_proba: np.ndarray, n_source: int, n_target: int, *,
                 min_denominator: float = PAPE_MIN_DENOMINATOR, min_weight: float = PAPE_MIN_WEIGHT) -> np.ndarray:
    """PAPE's density-ratio weights of the source rows from a domain classifier, with PAPE's caps.

    Białek, Kivimäki, Kuberski & Perrakis, "Estimating Model Performance Under Covariate Shift Without
    Labels", NeurIPS 2025 (arXiv 2401.08348), §3: a probabilistic classifier h(x) = P(target | x) trained
    to tell the target batch from the source rows gives the density ratio by Bayes' rule,

    .. math:: w(x) = \\frac{p_t(x)}{p_s(x)} = \\frac{n_s}{n_t}\\,\\frac{h(x)}{1 - h(x)},

    the same ratio as DL eq. 7 (``shiftlib.weights.DiscriminativeWeights``, whose classifier predicts
    P(source | x) = 1 − h). It is bounded as NannyML's importance-weighting estimator bounds it (``IW``,
    ``density_ratio_minimum_denominator`` = 0.05, ``density_ratio_minimum_value`` = 0.001; the caps PAPE's
    implementation is reported to share — :data:`PAPE_MIN_DENOMINATOR`):

    .. math:: w(x) = \\max\\Big(\\frac{n_s}{n_t}\\,\\frac{h(x)}{\\max(0.05,\\ 1 - h(x))},\\ 0.001\\Big),

    so no weight exceeds 20·n_s/n_t and none is 0.

    Parameters
    ----------
    domain_proba : ndarray of shape (n_source,)
        h(x) = P(target | x) of each source row, in [0, 1].
    n_source, n_target : int
        Rows of the source and of the target batch the classifier was trained on (the prior ratio).
    min_denominator, min_weight : float
        The caps (PAPE's defaults).

    Returns
    -------
    ndarray of shape (n_source,)
        The capped density ratios (not normalised: their scale is the density ratio's).
    """
    h = np.asarray(domain_proba, float)
    if h.ndim != 1 or np.any(~np.isfinite(h)) or np.any((h < 0) | (h > 1)):
        raise ValueError("domain_proba must be one probability P(target | x) in [0, 1] per source row")
    if n_source < 1 or n_target < 1:
        raise ValueError(f"n_source and n_target must be ≥ 1 rows; got {n_source} and {n_target}")
    if not 0 < min_denominator <= 1 or min_weight <= 0:
        raise ValueError("min_denominator must be in (0, 1] and min_weight > 0")
    w = (n_source / n_target) * h / np.maximum(min_denominator, 1.0 - h)
    return np.maximum(w, min_weight)


def _pape_capped(weights: np.ndarray, n_source: int, n_target: int) -> np.ndarray:
    """:func:`pape_weights` applied to stored density ratios ``weights`` (p_t/p_s on the source rows, as
    ``stored_predictions`` keeps them: DL eq. 7, normalised to mean 1 — the mean a true density ratio has over
    the source): the domain classifier's h = o/(1 + o) with odds o = w·n_t/n_s is recovered and capped."""
    odds = np.asarray(weights, float) * (n_target / n_source)
    return pape_weights(odds / (1.0 + odds), n_source, n_target)


def _bin_thresholds(x: np.ndarray, max_bins: int) -> np.ndarray:
    """Bin edges of a 1-D feature as scikit-learn's ``HistGradientBoosting`` finds them (``_find_binning_thresholds``,
    unweighted): midpoints between consecutive distinct values when there are at most ``max_bins`` of them,
    else the ``averaged_inverted_cdf`` percentiles at 100·i/max_bins, duplicates removed. x → bin
    ``searchsorted(edges, x, side="left")``."""
    distinct = np.unique(x)
    if len(distinct) <= max_bins:
        return (distinct[:-1] + distinct[1:]) / 2.0
    pct = np.linspace(0, 100, num=max_bins + 1)[1:-1]
    return np.unique(np.percentile(x, pct, method="averaged_inverted_cdf"))


def _tree_leaves(G: np.ndarray, H: np.ndarray, cN: list[int], max_leaves: int, min_leaf: int, min_hess: float,
                 hess_ok: bool) -> list[int]:
    """One regression tree on binned 1-D data, grown as LightGBM / scikit-learn grow it: best first (always the
    leaf whose best split has the largest gain Σ_children G²/H − G²/H, > 0), children of ≥ ``min_leaf`` rows
    and hessian ≥ ``min_hess``, at most ``max_leaves`` leaves. A tree on one feature is a partition of the bins
    into runs; returns the runs' start bins, sorted (the first is 0). ``cN``: cumulative row counts per bin
    (from 0); ``hess_ok``: every run of ``min_leaf`` rows has hessian ≥ ``min_hess`` (the check is skipped)."""
    cG, cH = np.concatenate(([0.0], np.cumsum(G))), np.concatenate(([0.0], np.cumsum(H)))
    nb = len(G)

    def best(a: int, b: int) -> tuple[float, int, int, int]:
        """(−gain, cut, a, b) of the best split of bins [a, b) (a cut at k puts bins < k on the left)."""
        n0, n1 = cN[a], cN[b]
        if n1 - n0 < 2 * min_leaf:
            return 0.0, -1, a, b
        lo = max(a + 1, bisect.bisect_left(cN, n0 + min_leaf))
        hi = min(b - 1, bisect.bisect_right(cN, n1 - min_leaf) - 1)
        if lo > hi:
            return 0.0, -1, a, b
        g0, h0 = cG[a], cH[a]
        g, h = cG[b] - g0, cH[b] - h0
        gl, hl = cG[lo:hi + 1] - g0, cH[lo:hi + 1] - h0
        hr = h - hl
        gr = g - gl
        gain = gl * gl / hl + gr * gr / hr
        if not hess_ok:
            gain[(hl < min_hess) | (hr < min_hess)] = -np.inf
        i = int(gain.argmax())
        top = float(gain[i]) - g * g / h
        return (-top, lo + i, a, b) if top > 0 else (0.0, -1, a, b)

    heap = [best(0, nb)]
    starts = [0]
    while heap and len(starts) < max_leaves:
        _, cut, a, b = heapq.heappop(heap)
        if cut < 0:
            continue
        starts.append(cut)
        heapq.heappush(heap, best(a, cut))
        heapq.heappush(heap, best(cut, b))
    starts.sort()
    return starts


def boosted_calibration(score_source: np.ndarray, label_source: np.ndarray, score_target: np.ndarray,
                        sample_weight: np.ndarray | None = None, *, learning_rate: float = 0.1, n_iter: int = 100,
                        max_leaves: int = 31, min_leaf: int = 20, max_bins: int = 255,
                        min_hessian: float = 1e-3) -> np.ndarray:
    """PAPE's calibrator: a gradient-boosted regression of the 0/1 label on the score, weighted, evaluated on
    ``score_target`` and clipped to [0, 1].

    PAPE (arXiv 2401.08348, §3) fits the calibrator as a weighted LightGBM regressor with its default
    settings, not monotone (the calibrated scores rank nothing, they are only averaged). The defaults here are
    LightGBM's (and scikit-learn ``HistGradientBoostingRegressor``'s, which follows it): squared loss, start at
    the weighted mean label, 100 trees, learning rate 0.1, ≤ 31 leaves, ≥ 20 rows and hessian ≥ 1e-3 per
    leaf, no L2 penalty, ≤ 255 bins of the feature. With one feature a tree is a partition of the bins into
    runs, so the booster works on the bins' sums Σw, Σw·y and row counts: the numbers
    ``HistGradientBoostingRegressor(early_stopping=False)`` gives (up to its float32 gradients; tested), at a
    fraction of its cost — the bootstrap refits this map hundreds of times. Not LightGBM's own binning.

    Parameters
    ----------
    score_source, label_source : ndarray of shape (n,)
        The score (e.g. the class-1 OOF probability) and the 0/1 label of the fitting rows (repeats allowed).
    score_target : ndarray of shape (m,)
        Scores to calibrate.
    sample_weight : ndarray of shape (n,), optional
        Row weights (PAPE: the capped density ratios); None → 1.
    learning_rate : float, default 0.1
        Shrinkage of each tree's leaf values.
    n_iter : int, default 100
        Most boosting rounds (fewer when a tree can no longer split).
    max_leaves : int, default 31
        Most leaves per tree.
    min_leaf : int, default 20
        Fewest rows per leaf.
    max_bins : int, default 255
        Most bins of the score.
    min_hessian : float, default 1e-3
        Smallest sum of weights (the squared loss's hessian) per leaf.

    Returns
    -------
    ndarray of shape (m,)
        The calibrated probabilities c(score) in [0, 1].
    """
    x = np.asarray(score_source, float).ravel()
    y = np.asarray(label_source, float).ravel()
    w = np.ones_like(x) if sample_weight is None else np.asarray(sample_weight, float).ravel()
    keep = w > 0
    x, y, w = x[keep], y[keep], w[keep]
    if len(x) == 0:
        raise ValueError("boosted_calibration needs at least one row of positive weight")
    edges = _bin_thresholds(x, max_bins)
    bins = np.searchsorted(edges, x, side="left")
    nb = len(edges) + 1
    W = np.bincount(bins, w, nb)
    Y = np.bincount(bins, w * y, nb)
    cN = [0, *np.cumsum(np.bincount(bins, minlength=nb)).tolist()]
    hess_ok = float(w.min()) * min_leaf >= min_hessian  # then no leaf of ≥ min_leaf rows is below min_hessian
    F = np.full(nb, Y.sum() / W.sum())
    for _ in range(int(n_iter)):
        G = W * F - Y  # Σ_rows w·(F − y) per bin: the squared loss's gradient (its hessian is w)
        starts = _tree_leaves(G, W, cN, max_leaves, min_leaf, min_hessian, hess_ok)
        if len(starts) == 1:  # a root that cannot split stays a root: its value −G/H is 0 from here on
            break
        gs, hs = np.add.reduceat(G, starts), np.add.reduceat(W, starts)
        leaf_value = -learning_rate * np.divide(gs, hs, out=np.zeros_like(gs), where=hs > 0)
        F = F + np.repeat(leaf_value, np.diff([*starts, nb]))
    q = np.searchsorted(edges, np.asarray(score_target, float).ravel(), side="left")
    return np.clip(F[q], 0.0, 1.0)


def pape_posteriors(proba_source: np.ndarray, y_source: np.ndarray, proba_target: np.ndarray,
                    sample_weight: np.ndarray | None) -> np.ndarray:
    """PAPE's calibrated target class probabilities (arXiv 2401.08348, §3): the classifier's class score,
    calibrated on the labelled source rows by :func:`boosted_calibration` with density-ratio weights, so that
    it estimates P_t(y = 1 | score) under covariate shift (P(y | x) unchanged).

    Binary (the paper's case): one calibrator of 1[y = 1] on the class-1 score, class 0 its complement. More
    classes (our extension; the paper is binary): one such calibrator per class, one-vs-rest, rows
    renormalised, a row summing to 0 made uniform (as :func:`checked_posteriors`).

    Parameters
    ----------
    proba_source : ndarray of shape (n, k)
        Out-of-fold class probabilities of the source rows.
    y_source : ndarray of shape (n,)
        Source labels as column positions.
    proba_target : ndarray of shape (m, k)
        The served model's class probabilities on the target rows.
    sample_weight : ndarray of shape (n,) or None
        The capped density ratios (:func:`pape_weights`); None → unweighted.

    Returns
    -------
    ndarray of shape (m, k)
        Calibrated target class probabilities, rows summing to one.
    """
    n_cls = proba_source.shape[1]
    if n_cls == 2:
        p1 = boosted_calibration(proba_source[:, 1], y_source == 1, proba_target[:, 1], sample_weight)
        return np.c_[1 - p1, p1]
    cal = np.column_stack([boosted_calibration(proba_source[:, c], y_source == c, proba_target[:, c], sample_weight)
                           for c in range(n_cls)])
    tot = cal.sum(axis=1, keepdims=True)
    return np.divide(cal, tot, out=np.full_like(cal, 1.0 / n_cls), where=tot != 0)


def prior_shift_posteriors(posteriors: np.ndarray, prior_source: np.ndarray, prior_target: np.ndarray) -> np.ndarray:
    """Saerens et al. (2002) eq. 2.4: p_t(y|x) ∝ p_s(y|x)·π_t(y)/π_s(y), rows renormalised — the
    posterior under a change of class prior with P(x|y) fixed (label shift). Equal priors: identity.

    Parameters
    ----------
    posteriors : numpy.ndarray of shape (m, k)
        Source posteriors p_s(y|x) of the rows.
    prior_source : numpy.ndarray of shape (k,)
        π_s, the source class prior (a class of prior 0 gets posterior 0).
    prior_target : numpy.ndarray of shape (k,)
        π_t, the target class prior.

    Returns
    -------
    numpy.ndarray of shape (m, k)
        The re-weighted posteriors, rows summing to one (a row re-weighted to all zeros keeps ``posteriors``).
    """
    src = np.asarray(prior_source, float)
    # a class absent from the (resampled) source has no posterior mass to re-weight
    ratio = np.divide(np.asarray(prior_target, float), src, out=np.zeros_like(src), where=src > 0)
    q = posteriors * ratio
    tot = q.sum(axis=1, keepdims=True)
    return np.where(tot > 0, q / np.where(tot > 0, tot, 1.0), posteriors)


def em_prior(posteriors_target: np.ndarray, prior_source: np.ndarray, *, tol: float = 1e-8,
             max_iter: int = 1000) -> np.ndarray:
    """The target class prior by EM (Saerens, Latinne & Decaestecker, Neural Computation 2002, eq. 2.9–2.10):
    start at π_s, then π ← mean over target rows of :func:`prior_shift_posteriors` (p_s(y|x), π_s, π) until
    the prior moves less than ``tol``. It is the maximum-likelihood prior of the target rows given
    calibrated source posteriors; when the mean target posterior already equals π_s, π_s is the fixed
    point (no shift → no correction).

    Parameters
    ----------
    posteriors_target : numpy.ndarray of shape (m, k)
        Calibrated source posteriors p_s(y|x) of the target rows.
    prior_source : numpy.ndarray of shape (k,)
        π_s, the source class prior the posteriors are calibrated for.
    tol : float, default 1e-8
        Stop when one EM step moves the prior less than this (largest absolute change).
    max_iter : int, default 1000
        Most EM steps.

    Returns
    -------
    numpy.ndarray of shape (k,)
        The estimated target class prior π_t.
    """
    prior_source = np.asarray(prior_source, float)
    pi = prior_source.copy()
    post = np.asarray(posteriors_target, float)
    # the same update as prior_shift_posteriors(post, π_s, π).mean(0), as two matrix–vector products:
    # with A = p_s(y|x)/π_s, π_new = π ⊙ Aᵀ(1/(Aπ))/n; rows with Aπ = 0 keep their posterior
    ratio = np.divide(1.0, prior_source, out=np.zeros_like(prior_source), where=prior_source > 0)
    A = post * ratio
    n = len(post)
    AT = np.ascontiguousarray(A.T)

    def step(p: np.ndarray) -> np.ndarray:
        s = A @ p
        if s.min() > 0:
            return p * (AT @ (1.0 / s)) / n
        pos = s > 0
        return p * (AT[:, pos] @ (1.0 / s[pos])) / n + post[~pos].sum(axis=0) / n

    def loglik(p: np.ndarray) -> float:
        s = A @ p
        return float(np.log(s[s > 0]).sum())

    # EM's steps, accelerated by SQUAREM (Varadhan & Roland, Scand. J. Stat. 2008, scheme S3): two steps, an
    # extrapolation along them, and one more step from there, kept only when it stays on the simplex and does
    # not lower the likelihood. The stopping rule is EM's own (one step moves π less than tol), so the prior is
    # the same fixed point; plain EM needs up to max_iter steps where the likelihood is flat.
    evals = 0
    while evals < max_iter:
        p1 = step(pi)
        evals += 1
        if np.max(np.abs(p1 - pi)) < tol:
            return p1
        p2 = step(p1)
        evals += 1
        if np.max(np.abs(p2 - p1)) < tol:
            return p2
        r, v = p1 - pi, p2 - 2 * p1 + pi
        vv = float(v @ v)
        nxt = p2
        if vv > 0:
            alpha = min(-1.0, -math.sqrt(float(r @ r) / vv))
            ext = pi - 2 * alpha * r + alpha * alpha * v
            if np.all(ext >= 0):
                cand = step(ext / ext.sum())
                evals += 1
                if loglik(cand) >= loglik(p2):
                    nxt = cand
        pi = nxt
    return pi


def bbse_prior(pred_source: np.ndarray, y_source: np.ndarray, pred_target: np.ndarray, n_classes: int,
               sample_weight: np.ndarray | None = None) -> np.ndarray:
    """The target class prior by black-box shift estimation (Lipton, Wang & Smola, ICML 2018, eq. 3–4):
    w = C⁻¹·μ̂_t with C[i, j] = P_s(ŷ = i, y = j) (OOF predictions) and μ̂_t[i] = share of target rows
    predicted i; π_t = w·π_s, negative entries clipped to 0 and renormalised. A singular C (a class never
    predicted) is solved by least squares. Unchanged prediction shares → w = 1, π_t = π_s.

    Parameters
    ----------
    pred_source : numpy.ndarray of shape (n,)
        Out-of-fold predicted class (column position) of each source row.
    y_source : numpy.ndarray of shape (n,)
        Source labels as column positions.
    pred_target : numpy.ndarray of shape (m,)
        The served model's predicted class (column position) of each target row.
    n_classes : int
        Number of classes k.
    sample_weight : numpy.ndarray of shape (n,), optional
        Weights of the source rows in C (None: unweighted).

    Returns
    -------
    numpy.ndarray of shape (k,)
        The estimated target class prior π_t (the source prior when every entry is clipped to 0).
    """
    w_s = np.ones(len(y_source)) if sample_weight is None else np.asarray(sample_weight, float)
    C = np.zeros((n_classes, n_classes))
    np.add.at(C, (pred_source, y_source), w_s)
    C /= w_s.sum()
    mu = np.bincount(pred_target, minlength=n_classes) / len(pred_target)
    ratio = np.linalg.lstsq(C, mu, rcond=None)[0]
    prior = np.clip(ratio * C.sum(axis=0), 0.0, None)
    tot = prior.sum()
    return prior / tot if tot > 0 else C.sum(axis=0)


#: a method's estimate from source rows r (with repeats) and, for label-shift methods, target rows t
Fn = Callable[..., float]


def _label_shift_fn(method: str, P: StoredPredictions) -> Fn:
    """f(source rows, target rows or None for all) → estimate: calibration on the source rows, prior from the target rows,
    accuracy averaged over the whole batch."""
    n_cls, y = len(P.classes), P.y_source
    pred_s, pred_t = np.argmax(P.proba_source, axis=1), np.argmax(P.proba_target, axis=1)
    weighted = method == "weighted-em"
    rows_t = np.arange(len(pred_t))

    def fn(r: np.ndarray, t: np.ndarray | None = None) -> float:
        t = rows_t if t is None else t
        w = P.weights[r] if weighted else None
        post_s, post_t = calibrated_posteriors(P.proba_source[r], y[r], P.proba_target, w)
        ww = np.ones(len(r)) if w is None else w
        prior_s = np.bincount(y[r], weights=ww, minlength=n_cls) / ww.sum()
        if method == "bbse":
            prior_t = bbse_prior(pred_s[r], y[r], pred_t[t], n_cls)
        else:
            prior_t = em_prior(post_t[t], prior_s)
        q = prior_shift_posteriors(post_t, prior_s, prior_t)
        return float(np.mean(q[rows_t, pred_t]))

    return fn


def _method_fn(method: str, P: StoredPredictions) -> Fn:
    """f(r, t=None) → a base method's estimate using source rows ``r`` (with repeats); the label-shift
    methods estimate the prior from target rows ``t`` (None → all), every method averages over the whole
    target. Combinations are formed in :func:`estimate_methods` from their components' values."""
    correct = P.correct_source
    conf_s, conf_t = P.proba_source.max(axis=1), P.proba_target.max(axis=1)
    w = P.weights
    if method in WEIGHTED_METHODS and w is None:
        raise ValueError(f"method {method!r} needs importance weights; stored_predictions(..., weights=...) "
                         "was built without them")
    if method == "cv":
        return lambda r, t=None: float(correct[r].mean())
    if method == "iwcv":
        return lambda r, t=None: float(np.sum(w[r] * correct[r]) / np.sum(w[r]))
    if method == "trcv":
        if P.trcv_residuals is None:
            raise ValueError(P.trcv_error or "method 'trcv' needs TrCV's residuals: build the predictions with trcv=True")
        res = P.trcv_residuals
        return lambda r, t=None: float(1.0 - np.sum(w[r] * res[r]) / np.sum(w[r]))
    if method == "doc":
        mt = float(conf_t.mean())
        return lambda r, t=None: float(np.clip(correct[r].mean() - (conf_s[r].mean() - mt), 0.0, 1.0))
    if method == "atc":
        ne_s, ne_t = _neg_entropy(P.proba_source), _neg_entropy(P.proba_target)

        def atc(r: np.ndarray, t: np.ndarray | None = None) -> float:
            thr, lam = atc_threshold(ne_s[r], float(correct[r].mean()))
            return float(np.mean(ne_t > thr) + lam * np.mean(ne_t == thr))

        return atc
    if method in LABEL_SHIFT_METHODS:
        return _label_shift_fn(method, P)
    if method in ("cbpe", "weighted-cbpe"):
        weighted = method == "weighted-cbpe"
        return lambda r, t=None: float(
            _isotonic(conf_s[r], correct[r], w[r] if weighted else None).predict(conf_t).mean())
    if method == "pape":
        n_s, n_t = len(P.y_source), len(P.proba_target)
        w_pape = _pape_capped(w, n_s, n_t)
        pred_t = np.argmax(P.proba_target, axis=1)
        rows_t = np.arange(len(pred_t))
        return lambda r, t=None: float(np.mean(
            pape_posteriors(P.proba_source[r], P.y_source[r], P.proba_target, w_pape[r])[rows_t, pred_t]))
    if method == "cbpe-nml":
        pred_t = np.argmax(P.proba_target, axis=1)
        rows_t = np.arange(len(pred_t))
        return lambda r, t=None: float(np.mean(
            checked_posteriors(P.proba_source[r], P.y_source[r], P.proba_target)[rows_t, pred_t]))
    raise ValueError(f"unknown method {method!r}; choose one of {list(METHODS) + ['auto']}")


def _components(method: str, P: StoredPredictions) -> tuple[str, ...]:
    """The base methods a method reads: itself, or a combination's components (the weighted ones only when
    the predictions carry weights, as :func:`model_variance` does)."""
    if method not in COMBINATIONS:
        return (method,)
    comp = SHIFT_MODELS if method == "minimax" else MEDIAN_COMPONENTS
    return tuple(c for c in comp if P.weights is not None or c not in WEIGHTED_METHODS)


def _combine(method: str, values: dict[str, float], P: StoredPredictions) -> float:
    """A method's value from its components' values (identity for a base method)."""
    v = np.array([values[c] for c in _components(method, P)])
    if method == "minimax":
        return float((v.min() + v.max()) / 2)
    if method == "median":
        return float(np.median(v))
    return float(v[0])


def label_shift_prior(P: StoredPredictions, method: str = "em") -> np.ndarray:
    """The target class prior a label-shift method estimates from one learner's stored predictions: ``"em"``
    (Saerens et al. 2002, :func:`em_prior` on the class-wise calibrated posteriors), ``"weighted-em"`` (the
    same from the importance-weighted calibration) or ``"bbse"`` (Lipton et al. 2018, :func:`bbse_prior`).

    It is the prior those methods' estimates (and ``details["prior_target_1"]``) use; ``shiftlib.regime`` reads it.

    Parameters
    ----------
    P : StoredPredictions
        One learner's stored predictions (``weighted-em`` needs its weights).
    method : {"em", "weighted-em", "bbse"}, default "em"
        The label-shift method.

    Returns
    -------
    numpy.ndarray of shape (k,)
        The estimated target class prior, one entry per column of ``P.classes``.
    """
    if method not in LABEL_SHIFT_METHODS:
        raise ValueError(f"method {method!r} estimates no target prior; choose one of {sorted(LABEL_SHIFT_METHODS)}")
    n_cls, y = len(P.classes), P.y_source
    if method == "bbse":
        return bbse_prior(np.argmax(P.proba_source, axis=1), y, np.argmax(P.proba_target, axis=1), n_cls)
    w = P.weights if method == "weighted-em" else None
    _, post_t = calibrated_posteriors(P.proba_source, y, P.proba_target, w)
    ww = np.ones(len(y)) if w is None else w
    return em_prior(post_t, np.bincount(y, weights=ww, minlength=n_cls) / ww.sum())


def _resolve_method(method: str) -> str:
    if not isinstance(method, str):
        raise TypeError(f"method must be a string, one of {list(METHODS) + ['auto']}; got {type(method).__name__}")
    m = AUTO_METHOD if method == "auto" else method
    if m not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {list(METHODS) + ['auto']}")
    return m


def point_estimate(P: StoredPredictions, method: str) -> float:
    """The method's accuracy estimate from the stored predictions (all source rows).

    Parameters
    ----------
    P : StoredPredictions
        One learner's stored predictions.
    method : str
        One of :data:`METHODS` or ``"auto"``.

    Returns
    -------
    float
        The estimated accuracy on the target batch.
    """
    m = _resolve_method(method)
    rows = np.arange(len(P.y_source))
    return _combine(m, {c: _method_fn(c, P)(rows) for c in _components(m, P)}, P)


def shift_variance(P: StoredPredictions, models: dict[str, float] | None = None) -> float:
    """V_shift: squared gap between the target accuracy predicted by the source-calibrated and the
    importance-weighted calibration (cbpe vs weighted-cbpe); 0 without weights.

    Both are consistent for the target accuracy when the weights are right and the shift is covariate
    only; their gap measures how much the target's calibration differs from the source's, which the
    bootstrap (source rows, target fixed) does not see. ``models``: their estimates when already computed.

    Parameters
    ----------
    P : StoredPredictions
        One learner's stored predictions.
    models : dict of str to float, optional
        Already computed estimates of the shift models (name → value).

    Returns
    -------
    float
        V_shift (0.0 without weights).
    """
    if P.weights is None:
        return 0.0
    est = _shift_models(P, models)
    gap = est["cbpe"] - est["weighted-cbpe"]
    return float(gap * gap)


def _shift_models(P: StoredPredictions, known: dict[str, float] | None = None) -> dict[str, float]:
    """The estimates of :data:`SHIFT_MODELS` (``weighted-cbpe`` only with weights), taken from ``known`` where
    present and computed on every source row otherwise."""
    known, rows = known or {}, np.arange(len(P.y_source))
    return {a: known[a] if a in known else _method_fn(a, P)(rows)
            for a in SHIFT_MODELS if P.weights is not None or a not in WEIGHTED_METHODS}


def model_variance(P: StoredPredictions, estimate: float, models: dict[str, float] | None = None) -> float:
    """V_model: the largest squared gap between ``estimate`` and the estimates of the three shift models —
    ``cbpe`` (calibration unchanged), ``weighted-cbpe`` (covariate shift, Shimodaira 2000's weighting) and
    ``em`` (label shift, Saerens et al. 2002). Which model holds is not identifiable from unlabeled rows, so
    an interval of ± z·√V_model (or wider) contains all three. Without weights, ``weighted-cbpe`` is left out.
    ``models``: their estimates when already computed (name → value), so they are not computed again.

    Parameters
    ----------
    P : StoredPredictions
        One learner's stored predictions.
    estimate : float
        The estimate the interval is centred on.
    models : dict of str to float, optional
        Already computed estimates of the shift models (name → value).

    Returns
    -------
    float
        V_model.
    """
    return float(max((v - estimate) ** 2 for v in _shift_models(P, models).values()))


def _z(confidence: float) -> float:
    if not isinstance(confidence, float | int) or not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), e.g. 0.95; got {confidence!r}")
    return float(NormalDist().inv_cdf((1 + confidence) / 2))


def estimate_from_predictions(
    P: StoredPredictions,
    method: str = "auto",
    *,
    confidence: float = 0.95,
    n_boot: int = N_BOOT,
    interval: str | None = None,
    random_state: int | None = None,
) -> AccuracyEstimate:
    """One method's estimate and interval from stored predictions; the bootstrap resamples stored rows only,
    so it costs no fits. ``interval`` (module docstring): ``"plain"`` V_source + V_target, ``"shift"``
    + V_shift, ``"model"`` + V_model; None → ``AUTO_INTERVAL`` for ``"auto"``, else ``"shift"``. Every
    variance is in ``details`` whichever interval is returned.

    Parameters
    ----------
    P : StoredPredictions
        One learner's stored predictions.
    method : str, default "auto"
        One of :data:`METHODS` or ``"auto"``.
    confidence : float, default 0.95
        Two-sided level of the interval, in (0, 1).
    n_boot : int, default N_BOOT
        Bootstrap resamples of V_source (at least 2).
    interval : {"plain", "shift", "model"}, optional
        The interval kind (None: ``AUTO_INTERVAL`` for ``"auto"``, its half-width × ``AUTO_INFLATION``;
        else ``"shift"``).
    random_state : int, optional
        Seed of the bootstrap.

    Returns
    -------
    AccuracyEstimate
        The estimate, its interval and ``details``.
    """
    return estimate_methods(P, [method], confidence=confidence, n_boot=n_boot, interval=interval,
                            random_state=random_state)[method]


def estimate_each(
    preds: Sequence[StoredPredictions],
    method: str = "auto",
    *,
    confidence: float = 0.95,
    n_boot: int = N_BOOT,
    interval: str | None = None,
    random_state: int | None = None,
    n_jobs: int = 1,
) -> Iterator[AccuracyEstimate]:
    """:func:`estimate_from_predictions` for each learner's stored predictions, yielded in order as they finish.
    ``n_jobs`` > 1 runs them in that many joblib (loky) worker processes: the bootstrap is many small numpy
    calls that hold the GIL, so threads would not run it in parallel; the results are the same either way.

    Parameters
    ----------
    preds : sequence of StoredPredictions
        The learners' stored predictions.
    method : str, default "auto"
        One of :data:`METHODS` or ``"auto"``.
    confidence : float, default 0.95
        Two-sided level of the interval, in (0, 1).
    n_boot : int, default N_BOOT
        Bootstrap resamples of V_source (at least 2).
    interval : {"plain", "shift", "model"}, optional
        The interval kind (None: ``AUTO_INTERVAL`` for ``"auto"``, its half-width × ``AUTO_INFLATION``;
        else ``"shift"``).
    random_state : int, optional
        Seed of the bootstrap.
    n_jobs : int, default 1
        Worker processes.

    Yields
    ------
    AccuracyEstimate
        One estimate per element of ``preds``, in order.
    """
    yield from _each(estimate_from_predictions, preds, n_jobs, method, confidence=confidence, n_boot=n_boot,
                     interval=interval, random_state=random_state)


def _each(fn: Callable[..., Any], items: Sequence[Any], n_jobs: int, *args: Any, **kw: Any) -> Iterator[Any]:
    """``fn(item, *args, **kw)`` for each item, in order: in this process, or in ``n_jobs`` joblib (loky)
    processes when there is more than one item (threads would not help: the work holds the GIL)."""
    if n_jobs <= 1 or len(items) <= 1:
        return (fn(x, *args, **kw) for x in items)
    from joblib import Parallel, delayed

    return Parallel(n_jobs=n_jobs, return_as="generator")(delayed(fn)(x, *args, **kw) for x in items)


def estimate_methods(
    P: StoredPredictions,
    methods: Sequence[str],
    *,
    confidence: float = 0.95,
    n_boot: int = N_BOOT,
    interval: str | None = None,
    random_state: int | None = None,
) -> dict[str, AccuracyEstimate]:
    """Several methods' estimates and intervals (requested name → estimate) on **shared** bootstrap
    resamples: each resample draws source rows (and target rows, when a label-shift method is among the
    components) once, every base method is evaluated on it once, and the combinations (``minimax``,
    ``median``) are formed from those values — so a combination's V_source is its own variance, and
    evaluating many methods costs what evaluating their base methods costs. ``interval`` as in
    :func:`estimate_from_predictions`.

    Parameters
    ----------
    P : StoredPredictions
        One learner's stored predictions.
    methods : sequence of str
        Names from :data:`METHODS` or ``"auto"``.
    confidence : float, default 0.95
        Two-sided level of the interval, in (0, 1).
    n_boot : int, default N_BOOT
        Bootstrap resamples of V_source (at least 2).
    interval : {"plain", "shift", "model"}, optional
        The interval kind (None: ``AUTO_INTERVAL`` for ``"auto"``, its half-width × ``AUTO_INFLATION``;
        else ``"shift"``).
    random_state : int, optional
        Seed of the bootstrap.

    Returns
    -------
    dict of str to AccuracyEstimate
        Requested name → its estimate (an ``"auto"`` key holds the resolved method's estimate).
    """
    z = _z(confidence)
    methods = list(methods)
    resolved = {m: _resolve_method(m) for m in methods}
    kinds = {m: interval if interval is not None else (AUTO_INTERVAL if m == "auto" else "shift") for m in methods}
    for kind in kinds.values():
        if kind not in INTERVALS:
            raise ValueError(f"unknown interval {interval!r}; choose one of {list(INTERVALS)}")
    if not isinstance(n_boot, int | np.integer) or n_boot < 2:
        raise ValueError(f"n_boot must be an integer ≥ 2 bootstrap resamples; got {n_boot!r}")
    bases = list(dict.fromkeys(c for m in resolved.values() for c in _components(m, P)))
    fns = {b: _method_fn(b, P) for b in bases}
    n_s, n_t = len(P.y_source), len(P.proba_target)
    full = {b: fns[b](np.arange(n_s)) for b in bases}
    boot = _shared_bootstrap(P, fns, set(resolved.values()), n_boot, random_state)
    models = _shift_models(P, full)
    v_shift = shift_variance(P, models)
    out = {}
    for req, m in resolved.items():
        acc = _combine(m, full, P)
        v_source = float(np.var(boot[m], ddof=1))
        v_target = acc * (1.0 - acc) / n_t
        v_model = model_variance(P, acc, models)
        kind = kinds[req]
        se = math.sqrt(v_source + v_target + {"plain": 0.0, "shift": v_shift, "model": v_model}[kind])
        inflation = AUTO_INFLATION if req == "auto" and interval is None else 1.0
        details: dict[str, Any] = {
            "confidence": float(confidence), "requested": req, "learner": P.learner, "n_source": n_s,
            "n_target": n_t, "k": int(P.folds.max()) + 1, "n_boot": int(n_boot), "interval": kind,
            "inflation": inflation, "se": se,
            "se_source": math.sqrt(v_source), "se_target": math.sqrt(v_target), "se_shift": math.sqrt(v_shift),
            "se_model": math.sqrt(v_model), "cv_accuracy": float(P.correct_source.mean()),
        }
        _add_method_details(details, P, m, full)
        half = inflation * z * se
        out[req] = AccuracyEstimate(float(acc), float(max(0.0, acc - half)), float(min(1.0, acc + half)), m, details)
    return out


def _shared_bootstrap(P: StoredPredictions, fns: dict[str, Fn], methods: set[str], n_boot: int,
                      random_state: int | None) -> dict[str, list[float]]:
    """Each method's value on n_boot shared resamples (source rows; target rows too for label shift)."""
    bases = list(fns)
    n_s, n_t = len(P.y_source), len(P.proba_target)
    rng = np.random.default_rng(random_state)
    redraw_target = any(b in LABEL_SHIFT_METHODS for b in bases)  # the prior comes from the target rows
    boot: dict[str, list[float]] = {m: [] for m in methods}
    for _ in range(int(n_boot)):
        r = rng.integers(0, n_s, n_s)
        t = rng.integers(0, n_t, n_t) if redraw_target else None
        vals = {b: fns[b](r, t) for b in bases}
        for m in boot:
            boot[m].append(_combine(m, vals, P))
    return boot


def _add_method_details(details: dict[str, Any], P: StoredPredictions, m: str,
                        full: dict[str, float]) -> None:
    """Add to ``details`` what method ``m`` rests on: weights' ESS, components, ATC threshold, priors."""
    if P.weights is not None:
        details["weights_ess"] = float(P.weights.sum() ** 2 / np.sum(P.weights ** 2))
    if m in COMBINATIONS:
        details["components"] = {c: full[c] for c in _components(m, P)}
    if m == "atc":
        thr, lam = atc_threshold(_neg_entropy(P.proba_source), details["cv_accuracy"])
        details.update(atc_threshold=thr, atc_tie_share=lam)
    if m in LABEL_SHIFT_METHODS and len(P.classes) == 2:
        details["prior_target_1"] = label_shift_prior(P, m)[1]
        details["prior_source_1"] = float(np.mean(P.y_source == 1))


def paired_draws(
    A: StoredPredictions,
    B: StoredPredictions,
    method: str = "auto",
    *,
    shared_source: bool = False,
    n_boot: int = N_BOOT,
    random_state: int | None = None,
) -> tuple[float, float, np.ndarray, np.ndarray]:
    """Two learners' estimates of ``method`` on the **same** target batch, resampled jointly: ``(estimate of
    A, estimate of B, A's n_boot draws, B's n_boot draws)``.

    Every resample draws the target rows once for both (so what the two share, the batch, cancels in their
    difference) and the source rows once for both when ``shared_source`` (the two were calibrated on the same
    source rows), else independently for each. Every method redraws the target rows here, not only the
    label-shift ones: the question is which learner is more accurate on rows like these, and the rows where
    the two disagree are a sample of them. This is :func:`estimate_methods`' bootstrap with the two learners'
    resamples paired; the decisions gate (``shiftlib.decisions.p_better``) reads P(B > A) off the draws.

    Parameters
    ----------
    A, B : StoredPredictions
        The two learners' stored predictions on the same target batch.
    method : str, default "auto"
        One of :data:`METHODS` or ``"auto"``.
    shared_source : bool, default False
        Draw the same source rows for both (they need the same number of source rows).
    n_boot : int, default N_BOOT
        Joint resamples (at least 2).
    random_state : int, optional
        Seed of the resampling.

    Returns
    -------
    tuple of (float, float, numpy.ndarray, numpy.ndarray)
        A's estimate, B's estimate, A's ``n_boot`` resampled estimates and B's.
    """
    if len(A.proba_target) != len(B.proba_target):
        raise ValueError(f"paired draws need the same target batch: {len(A.proba_target)} and "
                         f"{len(B.proba_target)} target rows")
    if shared_source and len(A.y_source) != len(B.y_source):
        raise ValueError("shared_source=True needs the same source rows for both learners")
    if not isinstance(n_boot, int | np.integer) or n_boot < 2:
        raise ValueError(f"n_boot must be an integer ≥ 2 bootstrap resamples; got {n_boot!r}")
    m = _resolve_method(method)
    fa = {c: _target_rows_fn(c, A) for c in _components(m, A)}
    fb = {c: _target_rows_fn(c, B) for c in _components(m, B)}
    n_a, n_b, n_t = len(A.y_source), len(B.y_source), len(A.proba_target)
    all_t = np.arange(n_t)
    est_a = _combine(m, {c: f(np.arange(n_a), all_t) for c, f in fa.items()}, A)
    est_b = _combine(m, {c: f(np.arange(n_b), all_t) for c, f in fb.items()}, B)
    rng = np.random.default_rng(random_state)
    da, db = np.empty(int(n_boot)), np.empty(int(n_boot))
    for i in range(int(n_boot)):
        t = rng.integers(0, n_t, n_t)
        ra = rng.integers(0, n_a, n_a)
        rb = ra if shared_source else rng.integers(0, n_b, n_b)
        da[i] = _combine(m, {c: f(ra, t) for c, f in fa.items()}, A)
        db[i] = _combine(m, {c: f(rb, t) for c, f in fb.items()}, B)
    return est_a, est_b, da, db


def _target_rows_fn(method: str, P: StoredPredictions) -> Fn:
    """f(source rows r, target rows t) → the method's estimate on target rows ``t``: the method of
    :func:`_method_fn` evaluated on the batch restricted (with repeats) to ``t``. The label-shift methods
    estimate their prior from ``t`` as well."""
    cache: dict[bytes, StoredPredictions] = {}

    def fn(r: np.ndarray, t: np.ndarray) -> float:
        key = t.tobytes()
        if key not in cache:
            cache.clear()
            cache[key] = StoredPredictions(P.learner, P.classes, P.y_source, P.proba_source, P.proba_target[t],
                                           P.folds, P.weights, P.trcv_residuals, P.trcv_error)
        return _method_fn(method, cache[key])(r)

    return fn


# ----------------------------------------------------------------------------------------------------
# fits: one split, OOF source probabilities, one served model per learner
# ----------------------------------------------------------------------------------------------------
def _folds(y: np.ndarray, k: int, seed: int, groups: Any = None) -> np.ndarray:
    """Each source row's fold of a shuffled stratified k-fold split; with ``groups`` (each row's case), a
    ``StratifiedGroupKFold``: a case's rows fall in one fold, so no fold is validated on a case it trained on."""
    if not isinstance(k, int | np.integer) or k < 2:
        raise ValueError(f"k must be an integer ≥ 2 folds; got {k!r}")
    _, counts = np.unique(y, return_counts=True)
    if len(counts) < 2:
        raise ValueError("y_source has a single class: accuracy estimation needs at least two classes")
    if counts.max() < k:
        raise ValueError(f"k={k} folds but the largest source class has {counts.max()} rows: lower k (≥ 2)")
    if counts.min() < 2:
        raise ValueError("a source class has a single row: every training fold needs at least one row of each class")
    fold = np.empty(len(y), dtype=int)
    if groups is not None:
        groups = np.asarray(groups)
        if groups.shape != (len(y),):
            raise ValueError(f"groups needs one case per source row; got {groups.shape} for {len(y)} rows")
        if len(np.unique(groups)) < k:
            raise ValueError(f"k={k} folds but the source rows record {len(np.unique(groups))} cases: lower k (≥ 2) "
                             "or give more cases")
    with warnings.catch_warnings():  # a class rarer than k is in some holdout folds only, as in source_cv
        warnings.filterwarnings("ignore", message="The least populated class", category=UserWarning)
        if groups is None:
            splits = list(StratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(np.zeros(len(y)), y))
        else:
            splits = list(StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed)
                          .split(np.zeros(len(y)), y, groups))
    for i, (_, hold) in enumerate(splits):
        fold[hold] = i
    if groups is not None:  # a class within few cases can fall wholly in one fold (helper-40)
        for i in range(k):
            if len(np.unique(y[fold != i])) < len(counts):
                raise ValueError("a source class lies within so few cases that a fold's training rows lack it: give "
                                 "that class more cases, or lower k")
    return fold


def fold_split_exists(y: Any, k: int, groups: Any = None) -> bool:
    """Whether :func:`stored_predictions`' k-fold split exists for labels ``y`` (two classes or more, the largest
    with k rows, every class with 2; with ``groups``, at least k cases): the conditions :func:`_folds` refuses
    otherwise.

    Parameters
    ----------
    y : array-like
        Source labels.
    k : int
        Folds.
    groups : array-like, optional
        Each source row's case.

    Returns
    -------
    bool
        True when the split can be made.
    """
    try:
        _folds(np.unique(np.asarray(y), return_inverse=True)[1], k, 0, groups)
    except ValueError:
        return False
    return True


def _proba(model: Any, X: Any, classes: np.ndarray, name: str) -> np.ndarray:
    if not hasattr(model, "predict_proba"):
        raise TypeError(f"learner {name!r} has no predict_proba: accuracy estimation needs probabilities")
    p = np.asarray(model.predict_proba(X), float)
    out = np.zeros((len(p), len(classes)))
    out[:, np.searchsorted(classes, model.classes_)] = p
    return out


def shared_source_cv(preds: Sequence[StoredPredictions], learners: Sequence[Any], n_source: int
                     ) -> SelectorScores | None:
    """:func:`source_cv_scores` when they are the numbers ``shiftlib.selection.source_cv`` would compute on
    the whole source: the predictions used all ``n_source`` rows and no learner reads ``X_target``
    (``shiftlib.learners.needs_target``: CSLR); else None, and selection must fit its own folds.

    Parameters
    ----------
    preds : sequence of StoredPredictions
        The learners' stored predictions.
    learners : sequence
        The learners (registry names or estimators) the predictions are of.
    n_source : int
        Number of rows of the whole source.

    Returns
    -------
    SelectorScores or None
        The SCV scores, or None when they would differ from ``source_cv``'s.
    """
    from shiftlib.learners import make_learner, needs_target

    if not preds or len(preds[0].y_source) != n_source:
        return None
    if any(needs_target(make_learner(lr) if isinstance(lr, str) else lr) for lr in learners):
        return None
    return source_cv_scores(preds)


def source_cv_scores(preds: Sequence[StoredPredictions]) -> SelectorScores:
    """SCV (TrCV §5.1, eq. 2) read off stored out-of-fold predictions: each learner's mean over folds of the
    fold accuracy (``cross_val_score``'s convention).

    ``stored_predictions`` fits every learner on the folds of a shuffled ``StratifiedKFold(k, random_state)``
    and predicts the argmax class, as ``shiftlib.selection.source_cv`` does with the same ``k`` and
    ``random_state``; for learners that ignore ``X_target`` (all but CSLR) the scores are the same numbers
    (tests/shiftlib/test_estimation.py), so a flow that estimates accuracy need not refit them to select.

    Parameters
    ----------
    preds : sequence of StoredPredictions
        The learners' stored predictions, on one fold split.

    Returns
    -------
    SelectorScores
        The ``"scv"`` scores with each learner's fold accuracies.
    """
    if not preds:
        raise ValueError("no stored predictions to score")
    k = int(preds[0].folds.max()) + 1
    fold_scores = {P.learner: [P.correct_source[P.folds == i].mean() for i in range(k)] for P in preds}
    return SelectorScores.from_fold_scores("scv", fold_scores, {"scoring": "accuracy", "k": k,
                                                                 "from": "stored_predictions"})


def stored_predictions(
    learners: Any,
    X_source: Any,
    y_source: Any,
    X_target: Any,
    *,
    weights: Any = None,
    need_weights: bool = True,
    trcv: bool = False,
    k: int = 10,
    random_state: int | None = None,
    n_jobs: int = 1,
    reuse: Sequence[StoredPredictions] | None = None,
    groups: Any = None,
) -> list[StoredPredictions]:
    """Every learner's OOF source and served-model target probabilities, on one shared fold split and
    one shared set of importance weights (fitted once, when ``need_weights`` or ``trcv``).

    ``learners``: a registry name, an unfitted estimator, a ``Candidate``, or what
    ``resolve_candidates`` takes. ``weights``: None → ``DiscriminativeWeights`` (DL eq. 7); else a
    ``shiftlib.weights`` name, a weighter, or one weight per source row (see ``importance_weights``).
    ``trcv=True`` also runs TrCV Fig. 1 on the same folds (2 fits per fold) for method ``"trcv"``; when
    a TrCV fit fails, ``trcv_error`` keeps its message and only method ``"trcv"`` raises it. ``n_jobs`` > 1
    fits the candidates in that many joblib (loky) processes, with the same results. ``reuse``: predictions of
    some candidates already computed on this split (:func:`candidate_predictions`, e.g. by the training stage);
    a candidate whose entry has these source labels, folds and target rows is not fitted again (unless ``trcv``).

    Parameters
    ----------
    learners : str, estimator, Candidate, mapping or sequence
        The learners (see above).
    X_source : DataFrame or array-like
        The labeled source rows.
    y_source : array-like
        Their labels.
    X_target : DataFrame or array-like
        The unlabeled target batch, with the source's columns.
    weights : str, weighter, array-like or None, optional
        None (``DiscriminativeWeights``, DL eq. 7), a ``shiftlib.weights`` name, a weighter, or one weight per
        source row (``shiftlib.selection.importance.importance_weights``).
    need_weights : bool, default True
        Fit the importance weights (also fitted when ``trcv``).
    trcv : bool, default False
        Also run TrCV on the same folds.
    k : int, default 10
        Folds of the shared stratified split.
    random_state : int, optional
        Seed of the fold split, the default weights and the learners built from registry names (None: a random
        split).
    n_jobs : int, default 1
        Worker processes fitting the candidates.
    reuse : sequence of StoredPredictions, optional
        Candidates' predictions computed before on this split (matched by name; used only when they match).
    groups : array-like, optional
        Each source row's case (a person, an event): the split is a ``StratifiedGroupKFold`` that keeps a case's
        rows in one fold, so no learner is validated on a case it was fitted on.

    Returns
    -------
    list of StoredPredictions
        One per learner, in the order of ``resolve_candidates``.
    """
    X_s, y_raw, X_t, classes, y_code = _checked(X_source, y_source, X_target)
    cands = resolve_candidates(learners, random_state=random_state)
    seed = int(np.random.default_rng(random_state).integers(2**31 - 1)) if random_state is None else int(random_state)
    folds = _folds(y_code, k, seed, groups)
    beta = None
    if need_weights or trcv:
        if weights is None:
            from shiftlib.weights import DiscriminativeWeights

            weights = DiscriminativeWeights(random_state=seed)
        beta = importance_weights(weights, X_s, X_t)
    for c in cands:
        c.source_weights(len(y_raw))  # a wrong-length weight vector is refused before any fit
    known = {} if trcv else {P.learner: P for P in reuse or ()}  # TrCV's residuals need their own fold fits
    todo = [c for c in cands if not _reusable(known.get(c.name), y_code, folds, len(X_t), len(classes))]
    fitted = {P.learner: P for P in _each(_stored, todo, n_jobs, X_s, y_raw, X_t, classes, y_code, folds, beta, k,
                                          seed, trcv)}
    return [fitted[c.name] if c.name in fitted else replace(known[c.name], classes=classes, weights=beta)
            for c in cands]


def _checked(X_source: Any, y_source: Any, X_target: Any) -> tuple[Any, np.ndarray, Any, np.ndarray, np.ndarray]:
    """The validated source rows, labels and target rows, the classes and the labels' codes into them."""
    X_s = check_X(X_source, "X_source")
    y_raw = check_y(y_source, X_s, "y_source", "X_source")
    X_t = check_X(X_target, "X_target (the unlabeled batch)", like=X_s)
    classes, y_code = np.unique(y_raw, return_inverse=True)
    return X_s, y_raw, X_t, classes, y_code


def _reusable(P: StoredPredictions | None, y_code: np.ndarray, folds: np.ndarray, n_target: int,
              n_classes: int) -> bool:
    """Whether predictions computed elsewhere are the ones :func:`_stored` would compute here: the same source
    labels on the same fold split, the same target rows and classes (their fits are then the same fits)."""
    return (P is not None and P.proba_source.shape == (len(y_code), n_classes)
            and P.proba_target.shape == (n_target, n_classes) and np.array_equal(P.y_source, y_code)
            and np.array_equal(P.folds, folds))


def candidate_predictions(
    candidate: Any,
    X_source: Any,
    y_source: Any,
    X_target: Any,
    *,
    k: int = 10,
    random_state: int = 0,
    groups: Any = None,
) -> tuple[StoredPredictions, Any]:
    """One candidate's stored predictions (without importance weights) and its served fit: the k fold fits on
    :func:`stored_predictions`' split and one fit on every source row, the fits that function makes for it.
    The training stage calls this so that its source-CV metrics and the estimation stage read the same fits
    (``stored_predictions(..., reuse=...)``) instead of fitting the candidate twice on the same folds.

    Parameters
    ----------
    candidate : Candidate
        The learner (``shiftlib.selection.Candidate``: estimator and sample weights).
    X_source : DataFrame or array-like
        The labeled source rows.
    y_source : array-like
        Their labels.
    X_target : DataFrame or array-like
        The unlabeled target batch, with the source's columns.
    k : int, default 10
        Folds of the stratified split.
    random_state : int, default 0
        Seed of the fold split (as ``stored_predictions``' ``random_state``).
    groups : array-like, optional
        Each source row's case: the split keeps a case's rows in one fold (as ``stored_predictions``' ``groups``).

    Returns
    -------
    (StoredPredictions, estimator)
        The predictions (``weights`` None) and the candidate fitted on every source row.

    Raises
    ------
    ValueError
        When the split is impossible (see ``stored_predictions``) or the candidate cannot be fitted.
    """
    X_s, y_raw, X_t, classes, y_code = _checked(X_source, y_source, X_target)
    folds = _folds(y_code, k, int(random_state), groups)
    candidate.source_weights(len(y_raw))
    return _fold_fits(candidate, X_s, y_raw, X_t, classes, y_code, folds, k)


def _fold_fits(c: Any, X_s: Any, y_raw: np.ndarray, X_t: Any, classes: np.ndarray, y_code: np.ndarray,
               folds: np.ndarray, k: int) -> tuple[StoredPredictions, Any]:
    """The k fold fits' out-of-fold probabilities and the served fit's target probabilities, and the served fit."""
    p_src = np.zeros((len(y_raw), len(classes)))
    for i in range(k):
        hold = np.flatnonzero(folds == i)
        train = np.flatnonzero(folds != i)
        model = fit_candidate(c, X_s, y_raw, rows=train, X_target=X_t)
        p_src[hold] = _proba(model, take(X_s, hold), classes, c.name)
    served = fit_candidate(c, X_s, y_raw, X_target=X_t)
    p_tgt = _proba(served, X_t, classes, c.name)
    return StoredPredictions(c.name, classes, y_code, p_src, p_tgt, folds), served


def _stored(c: Any, X_s: Any, y_raw: np.ndarray, X_t: Any, classes: np.ndarray, y_code: np.ndarray,
            folds: np.ndarray, beta: np.ndarray | None, k: int, seed: int, trcv: bool) -> StoredPredictions:
    """One candidate's stored predictions: its k fold fits, the served fit, and TrCV's residuals if asked."""
    P, _ = _fold_fits(c, X_s, y_raw, X_t, classes, y_code, folds, k)
    res, err = None, None
    if trcv:  # a learner TrCV cannot refit on a fold's pseudo labels keeps the other methods
        setup = TrCVSetup(X_s, y_raw, X_t, None, None, beta, folds, k, 0.95, seed, "given")
        try:
            res = trcv_assemble(c.name, setup, [trcv_fold(c, setup, i) for i in range(k)]).residuals
        except ValueError as e:
            err = str(e)
    return replace(P, weights=beta, trcv_residuals=res, trcv_error=err)


def estimate_accuracies(
    learners: Any,
    X_source: Any,
    y_source: Any,
    X_target: Any,
    *,
    method: str | Sequence[str] = "auto",
    weights: Any = None,
    confidence: float = 0.95,
    k: int = 10,
    n_boot: int = N_BOOT,
    random_state: int | None = None,
) -> dict[str, dict[str, AccuracyEstimate]]:
    """Estimates for many learners sharing one fold split and one weight fit: learner → method → estimate.

    ``method`` is one name (``"auto"`` included) or a list of them. See the module docstring for the
    methods and what the intervals cover.

    Parameters
    ----------
    learners : str, estimator, Candidate, mapping or sequence
        The learners, as :func:`stored_predictions` takes them.
    X_source : DataFrame or array-like
        The labeled source rows.
    y_source : array-like
        Their labels.
    X_target : DataFrame or array-like
        The unlabeled target batch, with the source's columns.
    method : str or sequence of str, default "auto"
        One name from :data:`METHODS` or ``"auto"``, or a list of them.
    weights : str, weighter, array-like or None, optional
        None (``DiscriminativeWeights``, DL eq. 7), a ``shiftlib.weights`` name, a weighter, or one weight per
        source row (``shiftlib.selection.importance.importance_weights``).
    confidence : float, default 0.95
        Two-sided level of the interval, in (0, 1).
    k : int, default 10
        Folds of the shared stratified split.
    n_boot : int, default N_BOOT
        Bootstrap resamples of V_source.
    random_state : int, optional
        Seed of the fold split, the default weights, the learners built from registry names and the bootstrap.

    Returns
    -------
    dict of str to dict of str to AccuracyEstimate
        Learner name → requested method → estimate.
    """
    methods = [method] if isinstance(method, str) else list(method)
    if not methods:
        raise ValueError(f"method is empty: pass one of {list(METHODS) + ['auto']} or a list of them")
    resolved = [_resolve_method(m) for m in methods]
    _z(confidence)
    # weights always: the weighted methods read them and every interval's V_shift does
    preds = stored_predictions(learners, X_source, y_source, X_target, weights=weights, need_weights=True,
                               trcv="trcv" in resolved, k=k, random_state=random_state)
    return {P.learner: {m: estimate_from_predictions(P, m, confidence=confidence, n_boot=n_boot,
                                                     random_state=random_state)
                        for m in methods}
            for P in preds}


def estimate_accuracy(
    learner: Any,
    X_source: Any,
    y_source: Any,
    X_target: Any,
    *,
    method: str = "auto",
    weights: Any = None,
    confidence: float = 0.95,
    k: int = 10,
    n_boot: int = N_BOOT,
    random_state: int | None = None,
) -> AccuracyEstimate:
    """Estimated accuracy of ``learner`` (fit on all source rows) on the unlabeled ``X_target``, with a
    two-sided interval at ``confidence`` (methods and intervals: module docstring).

    Parameters
    ----------
    learner : str, estimator or Candidate
        The learner: a registry name, an unfitted estimator or a ``Candidate``.
    X_source : DataFrame or array-like
        The labeled source rows.
    y_source : array-like
        Their labels.
    X_target : DataFrame or array-like
        The unlabeled target batch, with the source's columns.
    method : str, default "auto"
        One name from :data:`METHODS` or ``"auto"``.
    weights : str, weighter, array-like or None, optional
        None (``DiscriminativeWeights``, DL eq. 7), a ``shiftlib.weights`` name, a weighter, or one weight per
        source row (``shiftlib.selection.importance.importance_weights``).
    confidence : float, default 0.95
        Two-sided level of the interval, in (0, 1).
    k : int, default 10
        Folds of the shared stratified split.
    n_boot : int, default N_BOOT
        Bootstrap resamples of V_source.
    random_state : int, optional
        Seed of the fold split, the default weights, the learners built from registry names and the bootstrap.

    Returns
    -------
    AccuracyEstimate
        The estimate and its interval.
    """
    if not isinstance(method, str):
        raise TypeError("estimate_accuracy takes one method name; use estimate_accuracies for several")
    res = estimate_accuracies(learner, X_source, y_source, X_target, method=method, weights=weights,
                              confidence=confidence, k=k, n_boot=n_boot, random_state=random_state)
    return next(iter(res.values()))[method]
