"""How a served model does on a batch it scores, without the batch's labels.

:func:`monitor_batch` is what ``shiftflow score`` logs with every scored batch: the label-free estimate of the
served version's accuracy on the batch with its interval, the overlap verdict and the drift verdict against the
version's training source. It rests on what the registry keeps with each version (``tasks.champion.
evidence_table``): the out-of-fold source predictions it was chosen with and those source rows as its
``prepare`` step encodes them. So the served model is estimated as the model it is (DL eq. 7 importance
weights of its own source rows for this batch, ``shiftlib.decisions.champion_predictions``), by the estimator
and interval the retrain flow ships (``method="auto"``), with the same overlap rule
(``shiftlib.decisions.overlap_verdict``) and, when the overlap is poor, the same widening
(``shiftlib.decisions.widen_for_overlap``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from shiftlib.budget import MONITOR_ROWS, subsample
from shiftlib.decisions import (
    OverlapVerdict,
    accuracy_alert,
    champion_predictions,
    majority_baseline,
    overlap_shares,
    overlap_verdict,
    widen_for_overlap,
)
from shiftlib.drift import adjust_pvalues, detect_drift
from shiftlib.estimation import N_BOOT, StoredPredictions, estimate_from_predictions, label_shift_prior
from shiftlib.regime import ShiftRegime, shift_regime
from shiftlib.weights import effective_sample_size

__all__ = ["MONITOR_ROWS", "BatchMonitor", "monitor_batch", "monitor_rows"]

@dataclass(frozen=True)
class BatchMonitor:
    """The served version on one scored batch.

    Parameters
    ----------
    accuracy, ci_low, ci_high : float
        Label-free estimate of its accuracy on the batch and the interval (widened when the overlap is poor).
    confidence : float
        The interval's two-sided level.
    method : str
        The estimator ``"auto"`` resolved to.
    overlap : OverlapVerdict
        Whether its source covers the batch.
    drifted : bool
        The drift verdict (``shiftlib.drift.detect_drift``: Holm over the domain-classifier and MMD tests).
    drift_pvalue : float
        The smaller Holm-adjusted p-value of the two (the one the verdict compares with ``alpha``).
    majority_baseline : float
        The majority-class rule's estimated accuracy on the batch.
    alert : str
        ``"below"`` (the interval is wholly below ``min_accuracy``), ``"straddles"``, ``"ok"``, or ``""``
        without a ``min_accuracy`` (``shiftlib.decisions.accuracy_alert``).
    n_rows : int
        Batch rows the estimate and the drift test used.
    regime : ShiftRegime or None, default None
        The shift regime of the batch against the version's source (``shiftlib.regime.shift_regime``, as the
        retrain flow reports it beside every estimate; reported only); ``monitor_batch`` always sets it.
    """

    accuracy: float
    ci_low: float
    ci_high: float
    confidence: float
    method: str
    overlap: OverlapVerdict
    drifted: bool
    drift_pvalue: float
    majority_baseline: float
    alert: str
    n_rows: int
    regime: ShiftRegime | None = None

    def metrics(self) -> dict[str, float]:
        """The numbers as MLflow metrics (names as the retrain flow's parent run has them)."""
        return {"estimate.accuracy": self.accuracy, "estimate.ci_low": self.ci_low, "estimate.ci_high": self.ci_high,
                "estimate.majority_baseline": self.majority_baseline, "drift.drifted": float(self.drifted),
                "drift.pvalue": self.drift_pvalue, "drift.domain_auc": self.overlap.domain_auc,
                "overlap.ess_share": self.overlap.ess_share, "overlap.outside_share": self.overlap.outside_share,
                "monitor.rows": float(self.n_rows)}


def monitor_rows(n_rows: int, *, max_rows: int | None = MONITOR_ROWS, random_state: int | None = None) -> np.ndarray:
    """Sorted positions of the batch rows :func:`monitor_batch` should get (all of them up to ``max_rows``).

    Parameters
    ----------
    n_rows : int
        Number of rows in the batch.
    max_rows : int or None
        Most rows kept (a seeded uniform sample above it, ``shiftlib.budget.subsample``); ``None`` keeps every row.
    random_state : int, optional
        Seed of the sample.

    Returns
    -------
    numpy.ndarray
        Sorted row positions to score (``arange(n_rows)`` when the batch fits).
    """
    return subsample(n_rows, max_rows, random_state=random_state)


def monitor_batch(stored: StoredPredictions, proba_target: Any, X_source: Any, X_target: Any, *,
                  confidence: float = 0.95, min_accuracy: float | None = None, alpha: float = 0.05,
                  n_boot: int = N_BOOT, random_state: int | None = None, unseen: Any = None) -> BatchMonitor:
    """Estimate the served version's accuracy on a batch, and say whether the batch drifted and is covered.

    Parameters
    ----------
    stored : StoredPredictions
        The version's out-of-fold source predictions (its ``proba_target`` is ignored).
    proba_target : array of shape (n_rows, n_classes)
        The version's probabilities on the batch rows (columns in ``stored.classes`` order).
    X_source, X_target : DataFrame
        Its source rows and the batch rows, both encoded by the version's ``prepare`` step.
    confidence : float
        Two-sided level of the interval.
    min_accuracy : float, optional
        The accuracy the served model must keep; sets :attr:`BatchMonitor.alert`.
    alpha : float
        Level of the drift test.
    n_boot : int
        Bootstrap resamples of the estimate.
    random_state : int, optional
        Seed of the weights, the tests and the bootstrap.
    unseen : array of bool, optional
        Per batch row, whether it has a level of a text column the source never had
        (``shiftlib.decisions.unseen_levels``): counted beyond the source's reach, as the retrain's verdict does.

    Returns
    -------
    BatchMonitor
        The estimate and its interval, the overlap and drift verdicts, the majority baseline, the alert and the
        shift regime.
    """
    seed = 0 if random_state is None else int(random_state)
    if hasattr(X_source, "reset_index"):  # the drift test's row_scores name source rows by index: make it positions
        X_source = X_source.reset_index(drop=True)
    P = champion_predictions(stored, proba_target, X_source, X_target, random_state=seed)
    drift = detect_drift(X_source, X_target, alpha=alpha, random_state=seed)
    scores = drift.row_scores
    tgt = scores[scores["side"] == "target"]
    outside, new = overlap_shares(scores.loc[scores["side"] == "source", "target_score"], tgt["target_score"],
                                  None if unseen is None  # the drift test's rows of the batch
                                  else np.asarray(unseen, bool)[tgt["row"].to_numpy(np.int64)])
    ess = None if P.weights is None else effective_sample_size(P.weights)
    overlap = overlap_verdict(drift.domain_auc, ess, len(P.y_source), outside, unseen=new)
    est = estimate_from_predictions(P, "auto", confidence=confidence, n_boot=n_boot, random_state=seed)
    lo, hi = est.ci_low, est.ci_high
    if overlap.verdict == "poor":  # what the source cannot rule out (as the retrain flow's estimation stage)
        lo, hi = widen_for_overlap(lo, hi, overlap.outside_share)
    p_drift = float(np.min(adjust_pvalues([drift.domain_pvalue, drift.mmd_pvalue], "holm")))
    src = scores[scores["side"] == "source"]
    regime = shift_regime(src["target_score"], scores.loc[scores["side"] == "target", "target_score"],
                          P.y_source[src["row"].to_numpy(np.int64)], label_shift_prior(P, "em"),
                          domain_pvalue=float(drift.domain_pvalue), alpha=alpha)
    return BatchMonitor(accuracy=float(est.accuracy), ci_low=float(lo), ci_high=float(hi),
                        confidence=float(confidence), method=est.method, overlap=overlap,
                        drifted=bool(drift.drifted), drift_pvalue=p_drift, majority_baseline=majority_baseline(P),
                        alert=accuracy_alert(lo, hi, min_accuracy), n_rows=int(len(P.proba_target)),
                        regime=regime)
