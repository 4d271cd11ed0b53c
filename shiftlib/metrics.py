"""Binary-classification metrics for imbalanced, cost-sensitive problems (US §V, RT §6).

Conventions shared by every function here:

* ``y_true`` holds two labels; ``pos_label`` (default ``1``) names the positive (minority) class and
  every other label counts as negative. Labels may be strings (``pos_label="yes"``).
* Scores / probabilities are the positive-class column, ``P(y = pos_label | x)``, a 1-D array.
* Threshold metrics predict positive when ``score > threshold`` (strict, as US §IV-A "p > tau").
* Undefined ratios (precision with no predicted positive, F1 with no TP) are 0.0, scikit-learn's
  ``zero_division=0`` convention; rank/recall metrics that need both classes raise ``ValueError``.

Most metrics wrap scikit-learn; AUC is written on ``scipy.stats.rankdata`` because US §V defines it as
the Mann–Whitney statistic (ties count 1/2) and the test suite checks it against ``roc_auc_score``.

Public API: ``auc``, ``brier``, ``log_loss``, ``g_mean``, ``precision_at``, ``recall_at``, ``f1_at``,
``accuracy_at``, ``evaluate_probabilities`` (→ ``ProbabilityMetrics``), ``total_benefit``,
``donation_benefit``, ``fraud_benefit``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.stats import rankdata
from sklearn import metrics as skm

from shiftlib._validation import check_probabilities

__all__ = [
    "ProbabilityMetrics",
    "accuracy_at",
    "auc",
    "brier",
    "check_probabilities",
    "donation_benefit",
    "evaluate_probabilities",
    "f1_at",
    "fraud_benefit",
    "g_mean",
    "log_loss",
    "precision_at",
    "recall_at",
    "total_benefit",
]

ArrayLike = Any


# ----------------------------------------------------------------------------------------------------
# input checks
# ----------------------------------------------------------------------------------------------------
def _binary_truth(y_true: ArrayLike, pos_label: Any = 1, *, need_both: bool = True) -> np.ndarray:
    """Return ``y_true`` as a 0/1 int array (1 = ``pos_label``), with clear errors on bad input."""
    y = np.asarray(y_true)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if y.ndim != 1:
        raise ValueError(f"y_true must be one label per row (1-D); got an array of shape {y.shape}")
    if y.size == 0:
        raise ValueError("y_true has 0 rows; pass at least one row of each class")
    labels = np.unique(y)
    if labels.size > 2:
        raise ValueError(
            f"y_true has {labels.size} classes {labels.tolist()[:6]}; these metrics are binary — "
            "map it to positive-vs-rest first"
        )
    if labels.size == 2 and pos_label not in labels.tolist():
        raise ValueError(
            f"pos_label={pos_label!r} is not one of the labels in y_true {labels.tolist()}; pass pos_label= the "
            "positive one"
        )
    yb = (y == pos_label).astype(int)
    if need_both and (yb.min() == yb.max()):
        which = "positive" if yb.max() == 0 else "negative"
        raise ValueError(
            f"y_true has a single class (no {which} rows with pos_label={pos_label!r}); this metric needs "
            "both classes — check pos_label or evaluate on a larger / stratified sample"
        )
    return yb


def _proba(p: ArrayLike, n: int | None = None, name: str = "y_score") -> np.ndarray:
    """Return the positive-class probabilities as a float 1-D array, checked to lie in [0, 1]."""
    a = np.asarray(p, dtype=float)
    if a.ndim == 2 and a.shape[1] == 2:
        raise ValueError(
            f"{name} has two columns; pass the positive-class column only, e.g. predict_proba(X)[:, 1]"
        )
    if a.ndim == 2 and a.shape[1] == 1:
        a = a.ravel()
    if a.ndim != 1:
        raise ValueError(f"{name} must be one score per row (1-D); got shape {a.shape}")
    if n is not None and a.shape[0] != n:
        raise ValueError(f"{name} has {a.shape[0]} rows but y_true has {n}; pass one score per row")
    return check_probabilities(a, name)


def _scores(s: ArrayLike, n: int) -> np.ndarray:
    a = np.asarray(s, dtype=float).ravel()
    if a.shape[0] != n:
        raise ValueError(f"y_score has {a.shape[0]} rows but y_true has {n}; pass one score per row")
    if not np.all(np.isfinite(a)):
        raise ValueError("y_score contains NaN or infinite values; fix or drop those rows")
    return a


def _threshold(threshold: float) -> float:
    t = float(threshold)
    if not np.isfinite(t):
        raise ValueError(f"threshold must be a finite number; got {threshold!r}")
    return t


def _confusion(y_true: ArrayLike, y_score: ArrayLike, threshold: float, pos_label: Any) -> tuple[int, ...]:
    """(tp, fp, fn, tn) for the rule ``score > threshold`` → positive."""
    y = _binary_truth(y_true, pos_label, need_both=False)
    s = _proba(y_score, y.size)
    pred = (s > _threshold(threshold)).astype(int)
    tn, fp, fn, tp = skm.confusion_matrix(y, pred, labels=[0, 1]).ravel()
    return int(tp), int(fp), int(fn), int(tn)


# ----------------------------------------------------------------------------------------------------
# ranking and calibration
# ----------------------------------------------------------------------------------------------------
def auc(y_true: ArrayLike, y_score: ArrayLike, pos_label: Any = 1) -> float:
    """US §V: AUC as the Mann–Whitney statistic, P(score+ > score−) + ½·P(tie); returns a float in [0, 1].

    Hand-written on ``scipy.stats.rankdata`` (average ranks give ties ½) so the paper's definition is
    explicit: ``AUC = (R+ − n+(n+ + 1)/2) / (n+·n−)`` with R+ the rank sum of the positives.
    ``y_score`` may be any real score (it need not be a probability).

    Parameters
    ----------
    y_true : array-like of shape (n,)
        True labels; both classes must occur.
    y_score : array-like of shape (n,)
        Finite scores, higher meaning more likely positive.
    pos_label : label, default 1
        The positive class; every other label counts as negative.

    Returns
    -------
    float
        The AUC, in [0, 1].
    """
    y = _binary_truth(y_true, pos_label)
    s = _scores(y_score, y.size)
    ranks = rankdata(s)  # average ranks: a tie between a positive and a negative counts 1/2
    n_pos = int(y.sum())
    n_neg = y.size - n_pos
    return float((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def brier(y_true: ArrayLike, y_proba: ArrayLike, pos_label: Any = 1) -> float:
    """US eq. 13: Brier score (1/N)·Σ (y_i − p̂(+|x_i))², y_i ∈ {0, 1}; lower is better calibrated.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        True labels, at most two classes.
    y_proba : array-like of shape (n,)
        Positive-class probabilities, each in [0, 1].
    pos_label : label, default 1
        The positive class; every other label counts as negative.

    Returns
    -------
    float
        The Brier score, in [0, 1].
    """
    y = _binary_truth(y_true, pos_label, need_both=False)
    p = _proba(y_proba, y.size, "y_proba")
    return float(skm.brier_score_loss(y, p, pos_label=1))


def log_loss(y_true: ArrayLike, y_proba: ArrayLike, pos_label: Any = 1, eps: float = 1e-15) -> float:
    """Mean negative log-likelihood −(1/N)·Σ [y log p + (1 − y) log(1 − p)], p clipped to [eps, 1 − eps].

    Clipping keeps a confident mistake finite (a calibrated p' can be exactly 0 or 1 when p_s is).

    Parameters
    ----------
    y_true : array-like of shape (n,)
        True labels, at most two classes.
    y_proba : array-like of shape (n,)
        Positive-class probabilities, each in [0, 1].
    pos_label : label, default 1
        The positive class; every other label counts as negative.
    eps : float, default 1e-15
        Probabilities are clipped to [eps, 1 − eps] before the logarithm.

    Returns
    -------
    float
        The mean log-loss (non-negative; lower is better).
    """
    y = _binary_truth(y_true, pos_label, need_both=False)
    p = np.clip(_proba(y_proba, y.size, "y_proba"), eps, 1.0 - eps)
    return float(skm.log_loss(y, p, labels=[0, 1]))


# ----------------------------------------------------------------------------------------------------
# threshold metrics
# ----------------------------------------------------------------------------------------------------
def g_mean(y_true: ArrayLike, y_score: ArrayLike, threshold: float = 0.5, pos_label: Any = 1) -> float:
    """US §V: G-mean = sqrt(TPR × TNR) of the rule ``score > threshold``; needs both classes in y_true.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        True labels, at most two classes.
    y_score : array-like of shape (n,)
        Positive-class probabilities, each in [0, 1].
    threshold : float, default 0.5
        A row is predicted positive when its score is above it (strict).
    pos_label : label, default 1
        The positive class; every other label counts as negative.

    Returns
    -------
    float
        The G-mean, in [0, 1].
    """
    _binary_truth(y_true, pos_label)  # raises on a single class: TPR or TNR undefined
    tp, fp, fn, tn = _confusion(y_true, y_score, threshold, pos_label)
    return float(np.sqrt((tp / (tp + fn)) * (tn / (tn + fp))))


def precision_at(y_true: ArrayLike, y_score: ArrayLike, threshold: float = 0.5, pos_label: Any = 1) -> float:
    """US §V: Precision = TP / (TP + FP) of ``score > threshold`` (0.0 when nothing is predicted positive).

    Parameters
    ----------
    y_true : array-like of shape (n,)
        True labels, at most two classes.
    y_score : array-like of shape (n,)
        Positive-class probabilities, each in [0, 1].
    threshold : float, default 0.5
        A row is predicted positive when its score is above it (strict).
    pos_label : label, default 1
        The positive class; every other label counts as negative.

    Returns
    -------
    float
        The precision, in [0, 1].
    """
    tp, fp, _, _ = _confusion(y_true, y_score, threshold, pos_label)
    return tp / (tp + fp) if tp + fp else 0.0


def recall_at(y_true: ArrayLike, y_score: ArrayLike, threshold: float = 0.5, pos_label: Any = 1) -> float:
    """US §V: Recall = TPR = TP / (TP + FN) of ``score > threshold``; needs at least one positive row.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        True labels, at most two classes.
    y_score : array-like of shape (n,)
        Positive-class probabilities, each in [0, 1].
    threshold : float, default 0.5
        A row is predicted positive when its score is above it (strict).
    pos_label : label, default 1
        The positive class; every other label counts as negative.

    Returns
    -------
    float
        The recall, in [0, 1].
    """
    y = _binary_truth(y_true, pos_label, need_both=False)
    if y.sum() == 0:
        raise ValueError(f"y_true has no positive rows (pos_label={pos_label!r}); recall is undefined")
    tp, _, fn, _ = _confusion(y_true, y_score, threshold, pos_label)
    return tp / (tp + fn)


def f1_at(y_true: ArrayLike, y_score: ArrayLike, threshold: float = 0.5, pos_label: Any = 1) -> float:
    """US §V: F-measure 2·Precision·Recall / (Precision + Recall) = 2TP / (2TP + FP + FN); 0.0 if TP = 0.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        True labels, at most two classes.
    y_score : array-like of shape (n,)
        Positive-class probabilities, each in [0, 1].
    threshold : float, default 0.5
        A row is predicted positive when its score is above it (strict).
    pos_label : label, default 1
        The positive class; every other label counts as negative.

    Returns
    -------
    float
        The F1 score, in [0, 1].
    """
    tp, fp, fn, _ = _confusion(y_true, y_score, threshold, pos_label)
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def accuracy_at(y_true: ArrayLike, y_score: ArrayLike, threshold: float = 0.5, pos_label: Any = 1) -> float:
    """US §V: accuracy (TP + TN) / N of the rule ``score > threshold``.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        True labels, at most two classes.
    y_score : array-like of shape (n,)
        Positive-class probabilities, each in [0, 1].
    threshold : float, default 0.5
        A row is predicted positive when its score is above it (strict).
    pos_label : label, default 1
        The positive class; every other label counts as negative.

    Returns
    -------
    float
        The accuracy, in [0, 1].
    """
    tp, fp, fn, tn = _confusion(y_true, y_score, threshold, pos_label)
    return (tp + tn) / (tp + fp + fn + tn)


@dataclass(frozen=True)
class ProbabilityMetrics:
    """Every metric of one probability vector at one threshold (MLflow-ready via ``as_dict``).

    Parameters
    ----------
    auc : float
        AUC of the probabilities (:func:`auc`).
    brier : float
        Brier score (:func:`brier`).
    log_loss : float
        Mean log-loss (:func:`log_loss`).
    g_mean, f1, precision, recall, accuracy : float
        The threshold metrics of the rule ``p > threshold`` (:func:`g_mean`, :func:`f1_at`, :func:`precision_at`,
        :func:`recall_at`, :func:`accuracy_at`).
    threshold : float
        The threshold the threshold metrics used.
    n : int
        Number of rows.
    n_pos : int
        Number of positive rows.
    """

    auc: float
    brier: float
    log_loss: float
    g_mean: float
    f1: float
    precision: float
    recall: float
    accuracy: float
    threshold: float
    n: int
    n_pos: int

    def as_dict(self, prefix: str = "") -> dict[str, float]:
        """Flat ``{prefix + name: value}`` dict, e.g. ``as_dict("calibration.")`` for MLflow."""
        return {f"{prefix}{k}": float(v) for k, v in asdict(self).items()}


def evaluate_probabilities(
    y_true: ArrayLike, y_proba: ArrayLike, threshold: float = 0.5, pos_label: Any = 1
) -> ProbabilityMetrics:
    """US §V: AUC, Brier (eq. 13), G-mean, F1, precision, recall, accuracy and log-loss of one p̂ at one τ.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        True labels; both classes must occur.
    y_proba : array-like of shape (n,)
        Positive-class probabilities, each in [0, 1].
    threshold : float, default 0.5
        τ of the threshold metrics: a row is predicted positive when p̂ > τ.
    pos_label : label, default 1
        The positive class; every other label counts as negative.

    Returns
    -------
    ProbabilityMetrics
        All the metrics, with the threshold and the row and positive counts.
    """
    y = _binary_truth(y_true, pos_label)
    p = _proba(y_proba, y.size, "y_proba")
    return ProbabilityMetrics(
        auc=auc(y, p),
        brier=brier(y, p),
        log_loss=log_loss(y, p),
        g_mean=g_mean(y, p, threshold),
        f1=f1_at(y, p, threshold),
        precision=precision_at(y, p, threshold),
        recall=recall_at(y, p, threshold),
        accuracy=accuracy_at(y, p, threshold),
        threshold=float(threshold),
        n=int(y.size),
        n_pos=int(y.sum()),
    )


# ----------------------------------------------------------------------------------------------------
# benefit matrices (RT §6)
# ----------------------------------------------------------------------------------------------------
BenefitCallable = Callable[[np.ndarray, np.ndarray], np.ndarray]


def total_benefit(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    benefit: ArrayLike | BenefitCallable,
    pos_label: Any = 1,
) -> float:
    """RT §6: total benefit Σ_i B(actual_i, predicted_i) of hard predictions; higher is better.

    ``benefit`` is either

    * a 2×2 matrix in scikit-learn's confusion-matrix layout — ``benefit[actual][predicted]`` with
      index 0 = negative and 1 = positive — applied to every row. RT's donation matrix with a fixed gift
      g is ``[[0, -0.68], [0, g - 0.68]]``; or
    * a callable ``benefit(y_true01, y_pred01) -> per-row amounts`` that receives 0/1 arrays
      (1 = ``pos_label``) and returns one benefit per row — the form for per-row amounts such as
      RT's ``Y(x) − 0.68`` (see ``donation_benefit``) or ``y(x) − 90`` (``fraud_benefit``).

    ``y_pred`` are hard labels in the same label space as ``y_true`` (threshold first:
    ``np.where(p > tau, pos, neg)``).

    Parameters
    ----------
    y_true : array-like of shape (n,)
        True labels, at most two classes.
    y_pred : array-like of shape (n,)
        Predicted hard labels; a row is predicted positive when its label equals ``pos_label``.
    benefit : array-like of shape (2, 2) or callable
        The benefit matrix ``[actual][predicted]`` or the per-row benefit callable described above.
    pos_label : label, default 1
        The positive class; every other label counts as negative.

    Returns
    -------
    float
        The summed benefit over all rows.
    """
    yt = _binary_truth(y_true, pos_label, need_both=False)
    yp_raw = np.asarray(y_pred).ravel()
    if yp_raw.shape[0] != yt.size:
        raise ValueError(f"y_pred has {yp_raw.shape[0]} rows but y_true has {yt.size}; pass one label per row")
    yp = (yp_raw == pos_label).astype(int)
    if callable(benefit):
        amounts = np.asarray(benefit(yt, yp), dtype=float)
        if amounts.shape != (yt.size,):
            raise ValueError(
                f"the benefit callable returned shape {amounts.shape}; it must return one amount per row "
                f"({yt.size},)"
            )
        if not np.all(np.isfinite(amounts)):
            raise ValueError("the benefit callable returned NaN or infinite amounts")
        return float(amounts.sum())
    B = np.asarray(benefit, dtype=float)
    if B.shape != (2, 2):
        raise ValueError(
            f"benefit must be a 2x2 matrix [actual][predicted] (0 = negative, 1 = positive) or a callable; "
            f"got shape {B.shape}"
        )
    return float(B[yt, yp].sum())


def donation_benefit(amount: ArrayLike, cost: float = 0.68) -> BenefitCallable:
    """RT §6 (Donate): per-row benefit Y(x) − cost for a solicited donor, −cost for a solicited non-donor,
    0 for anyone not solicited. ``amount`` is Y(x) per row (aligned with ``y_true``). Returns a callable
    for ``total_benefit``.

    Parameters
    ----------
    amount : array-like of shape (n,)
        Y(x), the donation amount of each row (aligned with ``y_true``).
    cost : float, default 0.68
        Cost of soliciting one person.

    Returns
    -------
    callable
        ``benefit(y_true01, y_pred01) -> per-row amounts`` for :func:`total_benefit`; it raises ``ValueError``
        when ``amount`` does not have one value per row.
    """
    y_amount = np.asarray(amount, dtype=float).ravel()

    def _benefit(yt: np.ndarray, yp: np.ndarray) -> np.ndarray:
        if y_amount.shape[0] != yt.shape[0]:
            raise ValueError(f"amount has {y_amount.shape[0]} rows but y_true has {yt.shape[0]}")
        return np.where(yp == 1, np.where(yt == 1, y_amount - cost, -cost), 0.0)

    return _benefit


def fraud_benefit(amount: ArrayLike, overhead: float = 90.0) -> BenefitCallable:
    """RT §6 (CCF): per-row benefit y(x) − v for a flagged fraud, −v for a flagged legitimate transaction,
    0 if not flagged (v = $90 in RT). ``amount`` is the transaction amount y(x) per row. Returns a callable
    for ``total_benefit``.

    Parameters
    ----------
    amount : array-like of shape (n,)
        y(x), the transaction amount of each row (aligned with ``y_true``).
    overhead : float, default 90.0
        v, the cost of checking one flagged transaction.

    Returns
    -------
    callable
        ``benefit(y_true01, y_pred01) -> per-row amounts`` for :func:`total_benefit`.
    """
    return donation_benefit(amount, cost=overhead)
