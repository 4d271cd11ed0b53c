"""Decisions safe to leave unattended: the champion gate, the overlap verdict, the majority-class baseline,
and estimates that take the target labels that have arrived.

Every function reads stored predictions (``shiftlib.estimation.StoredPredictions``) and numbers the run has
already computed; nothing here is fitted again.

* :func:`majority_baseline` — the label-free accuracy of the rule that always predicts the source's largest
  class: its share of the target batch, estimated as :data:`shiftlib.estimation.AUTO_METHOD` estimates an
  accuracy (the median of the no-shift, covariate-shift and label-shift estimates of that share).
* :func:`overlap_verdict` — ``"ok"`` or ``"poor"`` from the domain classifier's AUC, the effective sample
  size of the importance weights (Kish) and the share of target rows the source does not reach.
  Importance-weighted estimates rest on the ratio p_t(x)/p_s(x) being bounded (Cortes, Mansour & Mohri,
  NIPS 2010); where the source has no rows, no label-free method can say how the model does.
* :func:`widen_for_overlap` — the interval widened to what the source cannot rule out: on the unreached
  share s of the batch the accuracy may be anything in [0, 1] (Manski's worst-case bounds, *Partial
  Identification of Probability Distributions*, 2003, ch. 1), so [low·(1 − s), high·(1 − s) + s].
* :func:`gate` — the champion decision: P(new version more accurate than the served champion on this batch)
  from the joint resampling of both estimates (``shiftlib.estimation.paired_draws``), guards against a model
  no better than the majority rule or one that predicts one class, and ``undecided`` between the two
  confidence levels.
* :func:`with_labels` — a candidate's accuracy once target labels have arrived: the label estimate
  (the model-assisted difference estimator of ``shiftlib.selection.fewlabel``) combined with the label-free
  estimate as a prior whose variance grows by the squared disagreement the two show (the moment estimator
  of a between-study variance, DerSimonian & Laird, Controlled Clinical Trials 1986), so a label-free
  estimate the labels contradict loses its weight.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from shiftlib.estimation import StoredPredictions

# shiftlib.estimation (scikit-learn, SciPy) is imported inside the functions: flows.config reads this module's
# defaults, and a refusal at the door must not pay for those imports

__all__ = [
    "DECISIONS",
    "LABEL_PLANS",
    "LABEL_VARIANCE",
    "UNDECIDED_LABEL_PLAN",
    "UNVOUCHED",
    "UNVOUCHED_CHAMPION",
    "LOW_ESS_SHARE",
    "OVERLAP_AUC",
    "OUTSIDE_SHARE",
    "ONE_CLASS_SHARE",
    "PROMOTE_CONFIDENCE",
    "GateDecision",
    "accuracy_alert",
    "OverlapVerdict",
    "champion_predictions",
    "heldout_champion_predictions",
    "heldout_pair",
    "domain_auc",
    "ess_share",
    "gate",
    "BASELINE_PAIRS",
    "baseline_components",
    "majority_baseline",
    "majority_margin",
    "predicts_the_rule",
    "rule_class",
    "rule_placement",
    "rule_ties",
    "margin_draws",
    "p_beats_rule",
    "one_class",
    "one_class_share",
    "outside_rows",
    "overlap_shares",
    "outside_share",
    "unseen_level_rows",
    "unseen_levels",
    "overlap_verdict",
    "p_better",
    "p_better_with_labels",
    "widen_for_overlap",
    "with_labels",
    "with_labels_interval",
]

#: default confidence to promote (P ≥ it) or keep (P ≤ 1 − it); between the two the decision is ``undecided``
PROMOTE_CONFIDENCE = 0.9
#: a model that predicts one class on at least this share of the batch is never promoted
ONE_CLASS_SHARE = 0.99
#: domain-classifier AUC at or above which source and target barely overlap (the issue's no-overlap cases)
OVERLAP_AUC = 0.95
#: Kish effective sample size of the weights, as a share of the source rows, below which the weighted
#: estimates rest on too few rows (a twentieth: 7 rows of 150)
LOW_ESS_SHARE = 0.05
#: share of target rows the source does not reach (scored by the domain classifier above the source's 99th
#: percentile; about 0.01 without shift) at or above which the overlap is poor
OUTSIDE_SHARE = 0.10
#: the decisions the gate takes
DECISIONS = ("promoted", "kept", "undecided", "refused")
#: what a label plan's contenders are: ``candidates`` (every candidate and the served champion: the labels choose
#: the model and decide the gate) or ``pair`` (the label-free choice and the served champion: the labels decide
#: the gate only)
LABEL_PLANS = ("candidates", "pair")
#: what step 4 of :func:`gate` does when nothing vouches for the served champion on the batch and the new
#: version's source reaches it: ``ask`` (``undecided``: the champion stays and the pair's labels decide) or
#: ``promote`` (revision 3). ``ask`` was adopted by a rule fixed before its run on tables no replay had used
#: (``reports/decisions_fresh.md``: harmful promotions 0 against 3 in 52 decisions, missed improvements 11 against
#: 11, with the labels of the undecided nights); without labels a stale champion then stays until they come
UNVOUCHED = ("ask", "promote")
UNVOUCHED_CHAMPION = "ask"
#: what step 5 of :func:`gate` makes ``undecided`` when the new version's source does not reach the batch (domain
#: AUC ≥ :data:`OVERLAP_AUC`): ``promote`` (a promotion only; revisions 2–5) or ``both`` (a keep too: neither
#: estimate rests on rows like the batch's, so a confident keep is as unfounded as a confident promotion)
REACH = ("promote", "both")
REACH_GUARD = "promote"
#: step 2 of :func:`gate` for a first version (no champion) whose source does not reach the batch (domain AUC ≥
#: :data:`OVERLAP_AUC`) and no target labels: ``undecided`` (True, revision 7: nothing serves until labels choose,
#: as step 5 does not promote over a champion on such evidence; its margin over the majority-class rule is itself a
#: label-free estimate where the source has no rows) or ``promoted`` (False, revisions 1–6)
FIRST_REACH = True
#: step 2 of :func:`gate` for a first version whose source reaches the batch, without target labels: promote only
#: when P(it is more accurate than the majority-class rule on the batch) ≥ ``promote_confidence``, P read off the
#: resampled margin (:func:`p_beats_rule`), as step 5 reads P off the pair's joint resamples; ``refused`` when P ≤
#: 1 − it, else ``undecided`` (True, revision 8). False (revisions 1–7): promote on any positive estimated margin.
#: Adopted by a rule fixed before its run on tables no replay had used (``reports/decisions_margin.md``: harmful
#: first promotions 1 against 4, good first versions held back 3 against 3, in 48 first versions)
FIRST_MARGIN = True
#: step 1 of :func:`gate` for a new version estimated no more accurate than the majority-class rule while a
#: champion serves that is estimated more accurate than it: ``refuse`` (revisions 1–8: a margin ≤ 0 refuses) or
#: ``ask`` (revision 9): refuse only when P(it is more accurate than the rule) ≤ 1 − ``promote_confidence`` (P read
#: off the resampled margin, :func:`p_beats_rule`); otherwise ``undecided``, and labels on the rows where it and the
#: champion disagree decide, as in step 5 — a version the labels show more accurate than a champion that beats
#: the rule beats the rule too
UNSURE_MARGINS = ("refuse", "ask")
UNSURE_MARGIN = "refuse"
#: where a pair plan beside a served champion puts the majority-class rule, so that its labels can refuse a version
#: they estimate no more accurate than the rule (:func:`gate`'s ``rule_labels``; build item 1 of the decisions issue
#: on labels). Without it the labels fall only where the new version and the champion disagree: where those two
#: agree and the rule does not (a champion that predicts one class, the rule's other), nothing measures the rule,
#: and labels promoted a version 0.45 below it (helper-35, Ecdat RetSchool). ``never`` (revisions 3–9): the pair
#: alone. ``third`` (revision 10): the rule a third contender beside any champion; not adopted by the rule fixed
#: before its run (``reports/decisions_rule.md``: it stopped 2 promotions below the rule, but split the labels
#: three ways and missed 3 improvements of its own against 1). ``one_class`` (revision 11): the rule replaces a
#: champion that predicts one class on ≥ :data:`ONE_CLASS_SHARE` of the batch (such a model may not serve, and
#: it is a constant rule itself), so the labels weigh the new version against the rule alone, as for a first
#: version; beside any other champion the pair plan is unchanged. Adopted by the rule fixed before its run on
#: five tables no replay had used (``reports/decisions_rule11.md``: no more promotions below the rule, harmful
#: promotions or own misses than ``never``, 0 / 0 / 2 each in 41 decisions; the rule stood in on 3 nights). On
#: the two replay sequences that motivated it it stopped both promotions below the rule (reported only).
RULE_CONTENDERS = ("never", "third", "one_class")
RULE_CONTENDER = "one_class"
#: whether a first version's plan over every candidate (no champion serves, ``label_plan='candidates'``) has the
#: majority-class rule among its contenders (compared, never chosen), so the labels that choose the model also
#: weigh it against the rule, and :func:`gate`'s step 2 refuses a first version they estimate no more accurate
#: than the rule (build item 1 on labels). Without it step 2 promoted whatever those labels chose: helper-36 saw a
#: version its own pair labels had just refused (exactly 0.094 below the rule) promoted by the labels of a plan
#: over every candidate. Item 1 requires it, as :data:`RULE_CONTENDER` for a one-class champion; no replay covers
#: first versions with labels, so it rests on that requirement and its tests.
FIRST_RULE_LABELS = True
#: whether target labels that weigh a first version against the majority-class rule (a pair plan's, or a plan over
#: every candidate with the rule among its contenders, :data:`FIRST_RULE_LABELS`) decide in place of step 1's
#: refusal on the label-free margin (True), or that refusal stands whatever they show (False, revisions 1–11).
#: The margin is a label-free estimate, and where labels measure the same difference on the batch they are the
#: better evidence (build item 4: labels change the numbers): helper-36 saw a first version refused at an estimated
#: margin of +0.000 that was truly 0.043 above the rule (Ecdat Housing), with no labels route. A refusal for
#: predicting one class stands (item 1), and beside a champion nothing changes (the pair's labels do not measure
#: the rule: :data:`UNSURE_MARGIN`). No replay labels first versions, so this rests on item 4 and its tests
FIRST_LABELS_DECIDE = True
#: step 1 of :func:`gate` for a first version (no champion) estimated no more accurate than the majority-class rule
#: (:func:`majority_margin` ≤ 0), without target labels: ``refused`` on the margin's sign (False, revisions 1–11),
#: or weighed by step 2 as a positive margin is (True, revision 12): within reach by P = :func:`p_beats_rule`
#: (refused only when P ≤ 1 − ``promote_confidence``, else ``undecided``: labels on the rows where it and the rule
#: disagree decide, :data:`FIRST_LABELS_DECIDE`), beyond reach ``undecided``. A margin of −0.007 and one of +0.007
#: are equally unsure; only the second asked for labels (helper-36's Housing first version, refused at +0.000).
#: Needs ``first_margin``. A version that predicts one class stays refused (item 1). Adopted by the rule fixed before
#: its run on six tables no replay had used (``reports/decisions_first_unsure.md``: good first versions held back 0
#: against 1, harmful first promotions 0 against 0, in 48 first versions; 36 more labels)
FIRST_UNSURE = True
#: the variance form of the labels' estimate of a pair's difference, from which the gate reads P
#: (``shiftlib.selection.fewlabel`` ``variance``): ``hh_model``, the Hansen–Hurwitz variance floored by the anticipated
#: variance under the candidates' probabilities. The gate reads a contrast's interval, and that is what the ninth
#: label-budget rule measured (``reports/label_budget_fresh9.md``, criterion (a), fixed before its run): 95 % contrast
#: intervals at 10–50 labels held 0.920 of the time with the floor against 0.775 without. The floor failed that rule
#: on ordering candidates at 50 labels (criterion (c)), which the gate does not do, so selection keeps ``hh``. A
#: sample whose labeled rows are all alike no longer reads as ± 0 unless the candidates' probabilities are 0 or 1
LABEL_VARIANCE = "hh_model"
#: rows per side (source, batch) above which :func:`margin_draws` resamples a common fraction of each side and
#: rescales the draws (the m-out-of-n bootstrap), so the gate's cost stops growing with the table
MARGIN_ROWS = 2000
#: the share of the new version's source rows that the served champion must never have been fitted on for the gate
#: to estimate the champion on those rows (:func:`heldout_pair`; revision 5, adopted by a rule fixed before its run on
#: tables no replay had used, ``reports/decisions_heldout_champion2.md``: missed improvements 6 against 10, harmful
#: promotions 0 against 0 in 54 decisions). Below it the champion keeps the estimate of its stored evidence: a
#: paired comparison on a small part of the new version's rows would rest on less than its own estimate does
HELDOUT_MIN_SHARE = 0.5
#: the plan an undecided gate asks its labels with: the pair it could not decide. With the same budget, rows drawn
#: only where the two disagree estimate new − champion far more tightly than rows spread over every candidate's
#: disagreements (fewlabel's difference estimate rests on those rows alone; labels on all of them make it exact).
#: Chosen by a rule fixed before its run (``reports/decisions_pair.md``, issue 32 item 4)
UNDECIDED_LABEL_PLAN = "pair"


@dataclass(frozen=True)
class OverlapVerdict:
    """Whether the source covers the target batch well enough for a label-free estimate.

    Parameters
    ----------
    verdict : str
        ``"ok"`` or ``"poor"``.
    reasons : list of str
        Each criterion that made it poor, in words (empty when ``ok``).
    domain_auc, ess_share, outside_share : float
        The three numbers it rests on (NaN where not known).
    unseen_share : float, default 0.0
        The part of ``outside_share`` with levels of text columns the source never had.
    """

    verdict: str
    reasons: list[str]
    domain_auc: float
    ess_share: float
    outside_share: float
    unseen_share: float = 0.0

    def sentence(self) -> str:
        """One line for the closing report: the verdict and what to do."""
        if self.verdict == "ok":
            return (f"overlap ok (domain AUC {self.domain_auc:.3f}, weights' ESS {self.ess_share:.0%} of the "
                    f"source, {self.outside_share:.0%} of the batch beyond the source)")
        return ("overlap POOR: " + "; ".join(self.reasons) + ". The estimates cannot be trusted on the rows the "
                "source does not reach and their intervals are widened to say so; label some target rows "
                "(`shiftflow retrain --label-budget`) to know")


def unseen_level_rows(source: pd.DataFrame, target: pd.DataFrame, columns: Sequence[Any]) -> np.ndarray:
    """Target rows with a level of a text column that no source row has (build item 3's "rows with unseen
    levels"): such a level encodes as all zeros, so no weight and no candidate has seen a row like it, and the
    domain classifier, which reads the same encoding, may not tell it from the source's rare levels.

    Parameters
    ----------
    source, target : pandas.DataFrame
        The tables as the user gave them.
    columns : sequence
        The text columns (compared as text; missing values are not levels).

    Returns
    -------
    numpy.ndarray of bool
        One flag per target row.
    """
    return unseen_levels(target, {c: source[c].dropna().unique() for c in columns if c in source.columns})


def unseen_levels(target: pd.DataFrame, levels: Mapping[Any, Sequence[Any]], *,
                  max_levels: int | None = None) -> np.ndarray:
    """:func:`unseen_level_rows` from the levels each text column had in the source (e.g. a fitted encoder's
    ``EncodingPlan.encodings``), for a batch scored without the source table at hand.

    Parameters
    ----------
    target : pandas.DataFrame
        The batch as the user gave it.
    levels : mapping
        Column → the levels the source had (compared as text).
    max_levels : int, optional
        The encoder's cap: a column with that many levels or more kept only its most frequent source levels, so
        its rarer source levels would read as new (helper-38); such a column is left out.

    Returns
    -------
    numpy.ndarray of bool
        One flag per target row: a non-missing value in some column of ``levels`` that is not among them.
    """
    out = np.zeros(len(target), bool)
    for c, seen in levels.items():
        if c in target.columns and (max_levels is None or len(seen) < max_levels):
            known = {str(v) for v in seen}
            t = target[c]
            out |= (t.notna() & ~t.astype(str).isin(known)).to_numpy(bool)
    return out


def outside_share(source_scores: Any, target_scores: Any, *, quantile: float = 0.99) -> float:
    """Share of target rows the source does not reach: scored more target-like by the domain classifier
    (out-of-fold, ``shiftlib.drift.domain_classifier_test``) than ``quantile`` of the source rows. Without
    shift the scores are exchangeable and the share is about 1 − ``quantile``.

    Parameters
    ----------
    source_scores, target_scores : array-like of float
        As :func:`outside_rows`.
    quantile : float, default 0.99
        As :func:`outside_rows`.

    Returns
    -------
    float
        Share of target rows scored above that source quantile, in [0, 1].
    """
    return float(np.mean(outside_rows(source_scores, target_scores, quantile=quantile)))


def outside_rows(source_scores: Any, target_scores: Any, *, quantile: float = 0.99) -> np.ndarray:
    """The target rows :func:`outside_share` counts: scored above ``quantile`` of the source rows.

    Parameters
    ----------
    source_scores, target_scores : array-like of float
        The domain classifier's out-of-fold scores of the source rows and of the target rows.
    quantile : float, default 0.99
        Quantile of the source scores above which a target row counts as not reached.

    Returns
    -------
    numpy.ndarray of bool
        One flag per target row.
    """
    s, t = np.asarray(source_scores, float), np.asarray(target_scores, float)
    if len(s) == 0 or len(t) == 0:
        raise ValueError("outside_share needs source and target scores")
    return t > np.quantile(s, quantile)


def overlap_shares(source_scores: Any, target_scores: Any, unseen: Any = None) -> tuple[float, float]:
    """The share of the scored target rows beyond the source (:func:`outside_rows`) or with levels it never had
    (``unseen``, one flag per scored row; None: none), and the share with such levels: what
    :func:`overlap_verdict` reads as ``outside`` and ``unseen`` (build item 3).

    Parameters
    ----------
    source_scores, target_scores : array-like of float
        The domain classifier's out-of-fold scores of the source rows and of the target rows.
    unseen : array-like of bool, optional
        Per scored target row, whether it has a level of a text column the source never had.

    Returns
    -------
    tuple of float
        (share beyond the source or unseen, share unseen); (0, 0) without target rows.
    """
    if len(np.asarray(target_scores)) == 0:
        return 0.0, 0.0
    beyond = outside_rows(source_scores, target_scores)
    new = np.zeros(len(beyond), bool) if unseen is None else np.asarray(unseen, bool)
    return float(np.mean(beyond | new)), float(np.mean(new))


def overlap_verdict(domain_auc: float, ess: float | None, n_source: int, outside: float,
                    unseen: float = 0.0) -> OverlapVerdict:
    """``poor`` when the domain classifier separates the batch from the source (AUC ≥ :data:`OVERLAP_AUC`),
    when the importance weights rest on under :data:`LOW_ESS_SHARE` of the source rows, or when at least
    :data:`OUTSIDE_SHARE` of the batch lies beyond the source (:func:`outside_share`); else ``ok``. The
    thresholds were fixed before any decision replication ran (``reports/decisions.md``).

    Parameters
    ----------
    domain_auc : float
        The domain classifier's AUC of batch against source (NaN: that criterion is skipped).
    ess : float or None
        Kish effective sample size of the importance weights (None: not known, that criterion is skipped).
    n_source : int
        Number of source rows the weights are on.
    outside : float
        Share of the batch beyond the source (:func:`outside_share`, or the rows beyond it or with levels the
        source never had, :func:`unseen_level_rows`).
    unseen : float, default 0.0
        Share of the batch with levels the source never had (named in the reason when ``outside`` makes it poor).

    Returns
    -------
    OverlapVerdict
        The verdict, the reasons for a ``poor`` one, and the three numbers (``ess`` as a share of ``n_source``).
    """
    ess_share = float("nan") if ess is None or n_source <= 0 else float(ess) / n_source
    reasons = []
    if np.isfinite(domain_auc) and domain_auc >= OVERLAP_AUC:
        reasons.append(f"the domain classifier tells batch from source (AUC {domain_auc:.3f} ≥ {OVERLAP_AUC})")
    if np.isfinite(ess_share) and ess_share < LOW_ESS_SHARE:
        reasons.append(f"the estimators' importance weights rest on an effective {ess_share:.1%} of the source rows "
                       f"(< {LOW_ESS_SHARE:.0%})")
    if outside >= OUTSIDE_SHARE:
        reasons.append(f"{outside:.0%} of the batch lies beyond the source (≥ {OUTSIDE_SHARE:.0%})"
                       + (f"; {unseen:.0%} has levels of text columns the source never had" if unseen > 0 else ""))
    return OverlapVerdict("poor" if reasons else "ok", reasons, float(domain_auc), ess_share, float(outside),
                          float(unseen))


def accuracy_alert(ci_low: float, ci_high: float, min_accuracy: float | None) -> str:
    """The ``min_accuracy`` alert on an accuracy interval: ``"below"`` when its upper end is below the threshold
    (the model is surely short of it: alert), ``"straddles"`` when the threshold lies inside it (it may be:
    warn, ask for labels), ``"ok"`` when its lower end reaches it, ``""`` without a threshold.

    Parameters
    ----------
    ci_low, ci_high : float
        The accuracy interval.
    min_accuracy : float or None
        The accuracy the model must keep; None: no alert.

    Returns
    -------
    str
        ``"below"``, ``"straddles"``, ``"ok"`` or ``""``.
    """
    if min_accuracy is None:
        return ""
    if ci_high < float(min_accuracy):
        return "below"
    return "straddles" if ci_low < float(min_accuracy) else "ok"


def widen_for_overlap(ci_low: float, ci_high: float, share: float) -> tuple[float, float]:
    """The interval widened to what the source cannot rule out: on ``share`` of the batch the accuracy may
    be anything in [0, 1], on the rest it is in [ci_low, ci_high] (Manski 2003, ch. 1: worst-case bounds
    of a mixture). ``share`` 0 leaves the interval; 1 gives [0, 1].

    Parameters
    ----------
    ci_low, ci_high : float
        The label-free interval.
    share : float
        Share of the batch the source does not reach, in [0, 1].

    Returns
    -------
    tuple of float
        The widened interval (low, high).
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share must be in [0, 1]; got {share!r}")
    return float(ci_low * (1.0 - share)), float(ci_high * (1.0 - share) + share)


def one_class_share(P: StoredPredictions) -> float:
    """The largest share of the batch that the served model gives one class.

    Parameters
    ----------
    P : StoredPredictions
        The model's stored predictions on the batch (``shiftlib.estimation.StoredPredictions``).

    Returns
    -------
    float
        Share of batch rows predicted as the most often predicted class, in (0, 1].
    """
    pred = np.argmax(P.proba_target, axis=1)
    return float(np.bincount(pred, minlength=len(P.classes)).max() / len(pred))


def one_class(counts: Mapping[Any, int]) -> tuple[Any, float] | None:
    """The class a model predicts for at least :data:`ONE_CLASS_SHARE` of the rows, and its share, from the
    counts of its predicted classes (``shiftflow score``'s note; the gate's guard reads :func:`one_class_share`).

    Parameters
    ----------
    counts : mapping of class to int
        How many rows the model gives each class.

    Returns
    -------
    tuple of (class, float) or None
        The dominant class and its share; None when no class reaches :data:`ONE_CLASS_SHARE` (or no rows).
    """
    total = sum(counts.values())
    if not total:
        return None
    top, n = max(counts.items(), key=lambda kv: kv[1])
    return (top, n / total) if n / total >= ONE_CLASS_SHARE else None


#: the estimators whose estimate of the majority-class rule's accuracy :func:`baseline_components` pairs with
#: them: each under the same shift model (none, covariate or label shift)
BASELINE_PAIRS: tuple[str, ...] = ("cv", "iwcv", "cbpe", "weighted-cbpe", "em", "bbse", "weighted-em")


def baseline_components(P: StoredPredictions) -> dict[str, float]:
    """The majority-class rule's accuracy on the batch, π_t(c) for the source's largest class c, as each
    estimator of :data:`BASELINE_PAIRS` would see it, from ``P``'s stored predictions: ``cv`` π_s(c);
    ``iwcv`` the importance-weighted π_s(c); ``cbpe`` / ``weighted-cbpe`` the mean over the batch of the
    (weighted) calibrated posterior p(c|x) (covariate shift: P(y|x) as on the source); ``em`` / ``bbse`` /
    ``weighted-em`` the label-shift priors (Saerens et al. 2002; Lipton et al. 2018). The weighted ones only
    when ``P`` carries weights.

    Parameters
    ----------
    P : StoredPredictions
        The model's stored predictions on the batch (``shiftlib.estimation.StoredPredictions``).

    Returns
    -------
    dict of str to float
        Estimator name → its estimate of the majority-class rule's accuracy on the batch (the weighted
        estimators only when ``P.weights`` is set).
    """
    from shiftlib.estimation import bbse_prior, calibrated_posteriors, em_prior

    y, n_cls = P.y_source, len(P.classes)
    prior_s = np.bincount(y, minlength=n_cls) / len(y)
    c = int(np.argmax(prior_s))
    _, post_t = calibrated_posteriors(P.proba_source, y, P.proba_target)
    out = {"cv": float(prior_s[c]), "cbpe": float(post_t[:, c].mean()), "em": float(em_prior(post_t, prior_s)[c]),
           "bbse": float(bbse_prior(np.argmax(P.proba_source, axis=1), y, np.argmax(P.proba_target, axis=1),
                                    n_cls)[c])}
    if P.weights is not None:
        prior_w = np.bincount(y, weights=P.weights, minlength=n_cls) / P.weights.sum()
        _, post_w = calibrated_posteriors(P.proba_source, y, P.proba_target, P.weights)
        out |= {"iwcv": float(prior_w[c]), "weighted-cbpe": float(post_w[:, c].mean()),
                "weighted-em": float(em_prior(post_w, prior_w)[c])}
    return out


def rule_class(y_source: Any, n_classes: int) -> int:
    """The majority-class rule's class: the source's largest (the lowest code among ties).

    Parameters
    ----------
    y_source : array-like of int
        The source labels as class codes.
    n_classes : int
        How many classes there are.

    Returns
    -------
    int
        The code of the class the rule predicts on every row.
    """
    return rule_ties(y_source, n_classes)[0]


def rule_ties(y_source: Any, n_classes: int) -> list[int]:
    """The classes tied with the majority-class rule's in the source (its own first, :func:`rule_class`): the
    report names them, since which one the rule predicts is then a convention, not the data's.

    Parameters
    ----------
    y_source : array-like of int
        The source labels as class codes.
    n_classes : int
        How many classes there are.

    Returns
    -------
    list of int
        The codes of every class with the source's largest count, lowest first.
    """
    counts = np.bincount(np.asarray(y_source, int), minlength=n_classes)
    return [int(c) for c in np.flatnonzero(counts == counts.max())]


def rule_placement(mode: str, champion: Any, others: Sequence[Any]) -> str | None:
    """Where a pair plan beside a served champion puts the majority-class rule (:data:`RULE_CONTENDER`):
    ``"beside"`` (a third contender: ``third`` when some contender disagrees with another), ``"instead"`` (in the
    champion's place: ``one_class`` when the champion predicts one class on ≥ :data:`ONE_CLASS_SHARE` of the
    batch), or None.

    Parameters
    ----------
    mode : {"never", "third", "one_class"}
        The policy (:data:`RULE_CONTENDERS`).
    champion : array-like of int
        The champion's predicted class codes on the batch.
    others : sequence of array-like of int
        The other contenders' predicted class codes on the batch.

    Returns
    -------
    str or None
        ``"beside"``, ``"instead"`` or None.
    """
    if mode not in RULE_CONTENDERS:
        raise ValueError(f"mode must be one of {list(RULE_CONTENDERS)}; got {mode!r}")
    champion = np.asarray(champion, int)
    if mode == "third" and any(np.any(np.asarray(p) != champion) for p in others):
        return "beside"
    if mode == "one_class" and len(champion) and np.bincount(champion).max() >= ONE_CLASS_SHARE * len(champion):
        return "instead"
    return None


def predicts_the_rule(P: StoredPredictions) -> bool:
    """Whether ``P``'s model predicts the majority-class rule's class (the source's largest) on every batch row.

    Parameters
    ----------
    P : StoredPredictions
        The model's stored predictions on the batch (``shiftlib.estimation.StoredPredictions``).

    Returns
    -------
    bool
        True when its accuracy on the batch is the rule's, whatever the batch's labels.
    """
    c = rule_class(P.y_source, len(P.classes))
    return bool(len(P.proba_target) and np.all(np.argmax(P.proba_target, axis=1) == c))


def majority_baseline(P: StoredPredictions) -> float:
    """Label-free accuracy on the batch of the rule that always predicts the source's largest class: the
    median of :func:`baseline_components`, as :data:`shiftlib.estimation.AUTO_METHOD` takes the median of its
    estimators.

    Parameters
    ----------
    P : StoredPredictions
        The model's stored predictions on the batch (``shiftlib.estimation.StoredPredictions``).

    Returns
    -------
    float
        The estimated accuracy of the majority-class rule on the batch.
    """
    return float(np.median(list(baseline_components(P).values())))


def majority_margin(P: StoredPredictions) -> float:
    """How much more accurate than the majority-class rule ``P``'s model is estimated to be: the median over
    :data:`BASELINE_PAIRS` of (the model's estimate − the rule's estimate), each pair under the same shift
    model. Under the shift that holds both members of its pair are right, and a shift model that misreads the
    batch moves both the same way, so the paired margin is steadier than the gap between two medians.

    Parameters
    ----------
    P : StoredPredictions
        The model's stored predictions on the batch (``shiftlib.estimation.StoredPredictions``).

    Returns
    -------
    float
        The median paired margin; at most 0 when the model is estimated no better than the rule, and 0 exactly
        when the model predicts the rule's class on every batch row (then the two are equally accurate on the
        batch whatever its labels, though estimators that read the source, where the model is not constant, would
        say otherwise).
    """
    from shiftlib.estimation import point_estimate

    if predicts_the_rule(P):
        return 0.0
    base = baseline_components(P)
    return float(np.median([point_estimate(P, m) - b for m, b in base.items()]))


def margin_draws(P: StoredPredictions, *, n_boot: int | None = None, rows: int = MARGIN_ROWS,
                 random_state: int | None = None, margin: float | None = None) -> tuple[float, np.ndarray]:
    """:func:`majority_margin` and ``n_boot`` bootstrap draws of it: each draw resamples the source rows (the
    calibration) and the batch rows (what both the model and the rule are judged on), as
    ``shiftlib.estimation.paired_draws`` resamples a pair. Both members of each of the margin's pairs are
    recomputed on the same resample, so what they share cancels in the draws as it does in the margin.

    Above ``rows`` rows on either side each draw takes the same fraction f = ``rows`` / (the larger side) of both
    sides, and the draw is rescaled to the full tables, margin + √f (draw − margin): the m-out-of-n bootstrap
    (Bickel, Götze & van Zwet 1997), whose spread shrinks as 1/√n as the full tables' does.

    Parameters
    ----------
    P : StoredPredictions
        The model's stored predictions on the batch (``shiftlib.estimation.StoredPredictions``).
    n_boot : int, optional
        Resamples (None: ``shiftlib.estimation.N_BOOT``), at least 2.
    rows : int, default MARGIN_ROWS
        Rows per side above which a draw resamples a fraction of each side.
    random_state : int, optional
        Seed of the resampling.
    margin : float, optional
        :func:`majority_margin` of ``P`` when already computed (the gate's details have it).

    Returns
    -------
    tuple of (float, numpy.ndarray)
        The margin on the full tables, and its ``n_boot`` draws.
    """
    from shiftlib.estimation import N_BOOT, StoredPredictions

    n_boot = N_BOOT if n_boot is None else n_boot
    if not isinstance(n_boot, int | np.integer) or n_boot < 2:
        raise ValueError(f"n_boot must be an integer ≥ 2 bootstrap resamples; got {n_boot!r}")
    if not isinstance(rows, int | np.integer) or rows < 2:
        raise ValueError(f"rows must be an integer ≥ 2; got {rows!r}")
    margin = majority_margin(P) if margin is None else float(margin)
    n_s, n_t = len(P.y_source), len(P.proba_target)
    f = min(1.0, rows / max(n_s, n_t))
    m_s, m_t = max(2, math.ceil(f * n_s)), max(2, math.ceil(f * n_t))
    rng = np.random.default_rng(random_state)
    draws = np.empty(int(n_boot))
    for i in range(int(n_boot)):
        r, t = rng.integers(0, n_s, m_s), rng.integers(0, n_t, m_t)
        sub = StoredPredictions(P.learner, P.classes, P.y_source[r], P.proba_source[r], P.proba_target[t],
                                P.folds[r], None if P.weights is None else P.weights[r])
        draws[i] = majority_margin(sub)
    return margin, margin + math.sqrt(f) * (draws - margin)


def p_beats_rule(P: StoredPredictions, *, n_boot: int | None = None, rows: int = MARGIN_ROWS,
                 random_state: int | None = None, margin: float | None = None) -> tuple[float, float]:
    """P(``P``'s model is more accurate on the batch than the majority-class rule): the share of
    :func:`margin_draws` above 0, ties counted half, as :func:`p_better` reads a pair's joint draws.

    Parameters
    ----------
    P : StoredPredictions
        The model's stored predictions on the batch (``shiftlib.estimation.StoredPredictions``).
    n_boot : int, optional
        Resamples (None: ``shiftlib.estimation.N_BOOT``).
    rows : int, default MARGIN_ROWS
        Rows per side above which a draw resamples a fraction of each side (:func:`margin_draws`).
    random_state : int, optional
        Seed of the resampling.
    margin : float, optional
        :func:`majority_margin` of ``P`` when already computed.

    Returns
    -------
    tuple of float
        (P, the margin on the full tables).
    """
    margin, draws = margin_draws(P, n_boot=n_boot, rows=rows, random_state=random_state, margin=margin)
    return float(np.mean(draws > 0) + 0.5 * np.mean(draws == 0)), margin


def champion_predictions(stored: StoredPredictions, proba_target: Any, X_source: Any, X_target: Any, *,
                         random_state: int | None = None) -> StoredPredictions:
    """The served champion's stored predictions on today's batch: the out-of-fold source predictions it was
    chosen with (``stored``, kept with the version), its own probabilities on today's rows (``proba_target``,
    columns in ``stored.classes`` order), and importance weights of its source rows (``X_source``, encoded as
    the champion encodes) for today's rows (``X_target``, encoded the same way) from
    ``DiscriminativeWeights`` (DL eq. 7), fitted as the estimation stage fits them. So the champion is
    estimated as the model it is, on today's batch, not as its recipe refitted.

    Parameters
    ----------
    stored : StoredPredictions
        The champion's stored out-of-fold source predictions (its ``proba_target`` and ``weights`` are replaced).
    proba_target : array-like of shape (n_target, n_classes)
        The champion's probabilities on today's rows, columns in ``stored.classes`` order.
    X_source : DataFrame or array-like
        The champion's source rows, encoded as the champion encodes them (one per ``stored.y_source``).
    X_target : DataFrame or array-like
        Today's rows, encoded the same way.
    random_state : int, optional
        Seed of the weights' classifier (None: 0).

    Returns
    -------
    StoredPredictions
        ``stored``'s source predictions with today's ``proba_target`` and the importance weights of its source
        rows (TrCV residuals are not carried over).
    """
    from shiftlib.estimation import StoredPredictions
    from shiftlib.selection.importance import importance_weights
    from shiftlib.weights import DiscriminativeWeights

    proba_target = np.asarray(proba_target, float)
    if proba_target.ndim != 2 or proba_target.shape[1] != len(stored.classes):
        raise ValueError(f"proba_target needs one column per class {list(stored.classes)}; got shape "
                         f"{proba_target.shape}")
    if len(X_source) != len(stored.y_source):
        raise ValueError(f"X_source has {len(X_source)} rows; the stored predictions have {len(stored.y_source)}")
    seed = 0 if random_state is None else int(random_state)
    w = importance_weights(DiscriminativeWeights(random_state=seed), X_source, X_target)
    return StoredPredictions(stored.learner, stored.classes, stored.y_source, stored.proba_source, proba_target,
                             stored.folds, w)


def heldout_champion_predictions(reference: StoredPredictions, proba_source: Any, proba_target: Any, *,
                                 learner: str) -> StoredPredictions:
    """The served champion's stored predictions on today's batch from today's labeled source rows it was never
    fitted on: its own probabilities on those rows (``proba_source``) stand where out-of-fold predictions stand,
    on the rows, folds and importance weights of ``reference`` (the new version's stored predictions on the same
    source rows and batch). So the champion is estimated as the model it is, from the newest labels, by the same
    estimators and on the same rows as the new version (``p_better(..., shared_source=True)``), not from the
    out-of-fold predictions of the source it was chosen on (:func:`champion_predictions`), whose labels are older.

    A model's predictions on rows it was not fitted on are what cross-validation's out-of-fold predictions
    approximate for a refitted recipe (Stone, JRSS B 1974); for a fixed model on held-out rows they are exact, so
    every estimator of ``shiftlib.estimation`` applies as it does to a candidate.

    Parameters
    ----------
    reference : StoredPredictions
        The new version's stored predictions on today's source rows and batch (its labels, folds and weights are
        used).
    proba_source : array-like of shape (n_source, n_classes)
        The champion's probabilities on today's source rows, columns in ``reference.classes`` order; the
        champion must not have been fitted on any of these rows.
    proba_target : array-like of shape (n_target, n_classes)
        The champion's probabilities on today's batch, same columns.
    learner : str
        The champion's name in the result.

    Returns
    -------
    StoredPredictions
        ``reference``'s rows, labels, folds and weights with the champion's probabilities.
    """
    from shiftlib.estimation import StoredPredictions

    ps, pt = np.asarray(proba_source, float), np.asarray(proba_target, float)
    k = len(reference.classes)
    if ps.shape != (len(reference.y_source), k) or pt.shape != (len(reference.proba_target), k):
        raise ValueError(f"the champion's probabilities must cover the reference's {len(reference.y_source)} source "
                         f"rows and {len(reference.proba_target)} batch rows in {k} class columns "
                         f"{list(reference.classes)}; got {ps.shape} and {pt.shape}")
    return StoredPredictions(learner, reference.classes, reference.y_source, ps, pt, reference.folds,
                             reference.weights)


def heldout_pair(new: StoredPredictions, unseen: Any, proba_source: Any, proba_target: Any, *,
                 min_share: float = HELDOUT_MIN_SHARE) -> tuple[StoredPredictions, StoredPredictions] | None:
    """The new version and the served champion, both on today's labeled source rows the champion was never fitted
    on: (the new version's stored predictions on those rows, the champion's by :func:`heldout_champion_predictions`
    on the same rows, folds and weights), or None when those rows are fewer than ``min_share`` of the new version's
    or lack a class its source has (then the champion's stored estimate stands: :func:`champion_predictions`).

    Revision 5 of the gate: the champion's stored estimate comes from the out-of-fold predictions of an older
    source and was optimistic in every replay (``reports/decisions_heldout_champion.md``); on rows it never saw,
    the champion's accuracy is estimated as the new version's is. The weights of the kept rows are rescaled to mean
    1, as :class:`shiftlib.estimation.StoredPredictions` keeps them.

    Parameters
    ----------
    new : StoredPredictions
        The new version's stored predictions on today's source rows and batch.
    unseen : array-like of bool, shape (n_source,)
        Whether the champion was never fitted on each of ``new``'s source rows.
    proba_source : array-like of shape (n_unseen, n_classes)
        The champion's probabilities on the unseen rows, in their order, columns in ``new.classes`` order.
    proba_target : array-like of shape (n_target, n_classes)
        The champion's probabilities on today's batch.
    min_share : float, default HELDOUT_MIN_SHARE
        The least share of ``new``'s source rows that must be unseen.

    Returns
    -------
    tuple of StoredPredictions, or None
        (new on the unseen rows, the champion on them), or None.
    """
    from dataclasses import replace

    keep = np.asarray(unseen, bool)
    if keep.shape != (len(new.y_source),):
        raise ValueError(f"unseen must flag each of the new version's {len(new.y_source)} source rows; got shape "
                         f"{keep.shape}")
    if keep.sum() < min_share * len(keep) or set(new.y_source[keep]) != set(new.y_source):
        return None
    w = None if new.weights is None else new.weights[keep] / new.weights[keep].mean()
    sub = replace(new, y_source=new.y_source[keep], proba_source=new.proba_source[keep], folds=new.folds[keep],
                  weights=w, trcv_residuals=None if new.trcv_residuals is None else new.trcv_residuals[keep])
    return sub, heldout_champion_predictions(sub, proba_source, proba_target, learner="champion")


def ess_share(P: StoredPredictions) -> float:
    """Kish's effective sample size of ``P``'s importance weights as a share of its source rows (1 without
    weights): how much of its source vouches for the batch (Cortes et al. 2010 bound a weighted estimate's
    error by n/ESS).

    Parameters
    ----------
    P : StoredPredictions
        The model's stored predictions on the batch (``shiftlib.estimation.StoredPredictions``).

    Returns
    -------
    float
        Kish ESS of ``P.weights`` over the number of source rows, in (0, 1]; 1.0 without weights.
    """
    from shiftlib.weights import effective_sample_size

    return 1.0 if P.weights is None else effective_sample_size(P.weights) / len(P.weights)


def p_better(champion: StoredPredictions, new: StoredPredictions, *, shared_source: bool = False,
             n_boot: int | None = None, random_state: int | None = None) -> tuple[float, float, float]:
    """P(``new`` is more accurate than ``champion`` on this batch): the share of joint resamples
    (``shiftlib.estimation.paired_draws``, method ``auto``) in which new's estimate exceeds the champion's,
    ties counted half. Returns (P, champion's estimate, new's estimate). Two models that predict the same
    class on every batch row are equally accurate on it: P = 0.5.

    Parameters
    ----------
    champion, new : StoredPredictions
        The served champion's and the new version's stored predictions on the same batch.
    shared_source : bool, default False
        Whether the two were calibrated on the same source rows (then the source resamples are shared).
    n_boot : int, optional
        Joint resamples (None: ``shiftlib.estimation.N_BOOT``).
    random_state : int, optional
        Seed of the resampling.

    Returns
    -------
    tuple of float
        (P, the champion's estimate, the new version's estimate).
    """
    est_c, est_n, dc, dn = _paired(champion, new, shared_source, n_boot, random_state)
    if np.array_equal(np.argmax(champion.proba_target, axis=1), np.argmax(new.proba_target, axis=1)):
        return 0.5, est_c, est_n
    return float(np.mean(dn > dc) + 0.5 * np.mean(dn == dc)), est_c, est_n


def _paired(champion: StoredPredictions, new: StoredPredictions, shared_source: bool, n_boot: int | None,
            random_state: int | None) -> tuple[float, float, np.ndarray, np.ndarray]:
    from shiftlib.estimation import N_BOOT, paired_draws

    return paired_draws(champion, new, "auto", shared_source=shared_source,
                        n_boot=N_BOOT if n_boot is None else n_boot, random_state=random_state)


def p_better_with_labels(champion: StoredPredictions, new: StoredPredictions, label_difference: float,
                         label_se: float, *, shared_source: bool = False, n_boot: int | None = None,
                         random_state: int | None = None) -> tuple[float, float, float, float]:
    """P(``new`` is more accurate than ``champion`` on this batch) once target labels have arrived: returns
    (P, the pooled accuracy difference new − champion, its standard error, the label-free part's weight).

    ``label_difference`` ± ``label_se`` is the labels' estimate of the difference (the fewlabel posterior
    without a prior, ``shiftlib.selection.fewlabel``, whose plan drew rows where the two disagree). The
    label-free difference and its standard error come from the joint resamples of :func:`p_better`; the two
    are pooled as :func:`with_labels` pools an accuracy (inverse variance, the label-free variance grown by the
    squared disagreement beyond both standard errors; DerSimonian & Laird 1986), and P = Φ(difference / se).

    Parameters
    ----------
    champion, new : StoredPredictions
        The served champion's and the new version's stored predictions on the same batch.
    label_difference : float
        The labels' estimate of the accuracy difference new − champion.
    label_se : float
        Its standard error.
    shared_source : bool, default False
        Whether the two were calibrated on the same source rows (then the source resamples are shared).
    n_boot : int, optional
        Joint resamples (None: ``shiftlib.estimation.N_BOOT``).
    random_state : int, optional
        Seed of the resampling.

    Returns
    -------
    tuple of float
        (P, pooled difference new − champion, its standard error, weight of the label-free part); (0.5, 0, 0, 1)
        when the two predict the same class on every batch row.
    """
    est_c, est_n, dc, dn = _paired(champion, new, shared_source, n_boot, random_state)
    if np.array_equal(np.argmax(champion.proba_target, axis=1), np.argmax(new.proba_target, axis=1)):
        return 0.5, 0.0, 0.0, 1.0
    prior_se = float(np.std(dn - dc, ddof=1)) if len(dn) > 1 else 0.0
    d, se, w = _pool(est_n - est_c, prior_se, float(label_difference), float(label_se))
    return _p_positive(d, se), d, se, w


def _p_positive(d: float, se: float) -> float:
    """P(the difference is positive) = Φ(d / se), for a normal estimate ``d`` ± ``se`` (exact: 0 or 1; 0.5 at 0)."""
    return 0.5 if d == 0 else (float(d > 0) if se <= 0 else float(NormalDist().cdf(d / se)))


@dataclass(frozen=True)
class GateDecision:
    """What the gate decided about a new version against the served champion.

    Parameters
    ----------
    decision : str
        One of :data:`DECISIONS`: ``promoted`` (the new version becomes champion), ``kept`` (the champion
        stays and the new version is a challenger), ``undecided`` (the evidence is not enough either way: the
        champion stays and the new version is a challenger; target labels on this batch are what would settle it), ``refused`` (the new
        version may not serve: a challenger, with ``reason``).
    p_better : float
        P(new more accurate than the champion on this batch); NaN without a champion to compare.
    reason : str
        One sentence.
    details : dict
        The numbers the decision rests on.
    """

    decision: str
    p_better: float
    reason: str
    details: dict[str, Any] = field(default_factory=dict)


def domain_auc(X_source: Any, X_target: Any, *, random_state: int | None = None) -> float:
    """How well a model's source rows can be told from the batch: the out-of-fold ROC AUC (5 stratified folds)
    of a standardised logistic regression of "batch row" on the features, the discriminator of DL eq. 7. 0.5:
    the source reaches the batch as well as it reaches itself; near 1: the batch lies where the source has no
    rows (:data:`OVERLAP_AUC`).

    Parameters
    ----------
    X_source : array-like of shape (n_source, n_features)
        The model's source rows, numeric (NaN is replaced by 0).
    X_target : array-like of shape (n_target, n_features)
        The batch rows, encoded the same way.
    random_state : int, optional
        Seed of the fold split (None: 0).

    Returns
    -------
    float
        The out-of-fold ROC AUC, in [0, 1].
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    Xs, Xt = np.asarray(X_source, float), np.asarray(X_target, float)
    if Xs.shape[1] != Xt.shape[1]:
        raise ValueError(f"source and batch have {Xs.shape[1]} and {Xt.shape[1]} feature columns: encode both alike")
    X, d = np.vstack([Xs, Xt]), np.r_[np.zeros(len(Xs)), np.ones(len(Xt))]
    folds = StratifiedKFold(5, shuffle=True, random_state=0 if random_state is None else int(random_state))
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    p = cross_val_predict(clf, np.nan_to_num(X), d, cv=folds, method="predict_proba")[:, 1]
    return float(roc_auc_score(d, p))


def unvouched_reason(P: StoredPredictions, auc: float | None) -> str | None:
    """Why nothing vouches for ``P``'s model on this batch, or None: the guards :func:`gate` applies to a new
    version in step 1 and to the served champion in step 4. A model is unvouched when its source does not reach
    the batch (``auc``, its :func:`domain_auc`, ≥ :data:`OVERLAP_AUC`; None: not tested), it predicts one class
    on ≥ :data:`ONE_CLASS_SHARE` of the batch, or it is estimated no more accurate than the majority-class rule
    (:func:`majority_margin` ≤ 0).

    Parameters
    ----------
    P : StoredPredictions
        The model's stored predictions on the batch.
    auc : float or None
        Its source's domain AUC against the batch.

    Returns
    -------
    str or None
        The first guard it fails, as a clause ("its source does not reach this batch (…)"), or None.
    """
    if auc is not None and auc >= OVERLAP_AUC:
        return f"its source does not reach this batch (the gate's domain AUC {auc:.3f} ≥ {OVERLAP_AUC})"
    share = one_class_share(P)
    if share >= ONE_CLASS_SHARE:
        return f"it predicts one class for {share:.1%} of the batch (≥ {ONE_CLASS_SHARE:.0%})"
    margin = majority_margin(P)
    if margin <= 0:
        return (f"it is estimated no more accurate than the majority-class rule (margin {margin:+.3f}, the median "
                f"over the shift models of its estimate minus the rule's; the rule's accuracy "
                f"{majority_baseline(P):.3f})")
    return None


def gate(new: StoredPredictions, champion: StoredPredictions | None = None, *,
         new_estimate: float | None = None, confidence: float = PROMOTE_CONFIDENCE, shared_source: bool = False,
         new_auc: float | None = None, champion_auc: float | None = None,
         labels: tuple[float, float, int] | None = None, rule_labels: tuple[float, float, int] | None = None,
         unvouched: str = UNVOUCHED_CHAMPION, reach: str = REACH_GUARD, first_reach: bool = FIRST_REACH,
         first_margin: bool = FIRST_MARGIN, first_unsure: bool = FIRST_UNSURE,
         unsure_margin: str = UNSURE_MARGIN, target_labels: int = 0, n_boot: int | None = None,
         random_state: int | None = None) -> GateDecision:
    """Decide whether ``new`` replaces the served ``champion`` (both as stored predictions on today's batch).

    ``new_auc`` / ``champion_auc``: :func:`domain_auc` of each model's source rows against today's batch
    (None: not known, the reach test is skipped for that model).

    1. ``refused`` when new predicts one class on ≥ :data:`ONE_CLASS_SHARE` of the batch, or when it is
       estimated no more accurate than the majority-class rule (:func:`majority_margin` ≤ 0): a model that
       does not beat the constant rule must not serve. ``new_estimate`` (default the ``auto`` point
       estimate) is reported in ``details``. With ``unsure_margin='ask'`` (revision 9) and a champion that
       nothing fails to vouch for (step 4's guards pass), a margin ≤ 0 refuses only when
       P = :func:`p_beats_rule` ≤ 1 − ``confidence``; otherwise the decision is ``undecided`` (the pair's labels
       decide), and with ``labels`` they decide as in step 5 (``promoted`` when P(better) ≥ ``confidence``):
       more accurate than a champion estimated more accurate than the rule, it is estimated more accurate
       than the rule too. Without a champion, target labels that weigh new against the rule (``labels`` or
       ``rule_labels`` below) decide in place of a refusal on the margin (:data:`FIRST_LABELS_DECIDE`; the
       label-free reason is kept as ``details["label_free_refusal"]``).
    2. Without a champion: ``promoted``; but ``undecided`` (nothing serves) when the new version's source does not
       reach the batch (``new_auc`` ≥ :data:`OVERLAP_AUC`), the run has no target labels (``target_labels`` 0)
       and ``first_reach`` (:data:`FIRST_REACH`, revision 7): as in step 5, a promotion must not rest on estimates
       made where the source has no rows. With ``labels`` (then the labels' estimate of new − the
       majority-class rule, from a plan for that pair) the labels alone decide: ``promoted`` when
       P = Φ(difference / se) ≥ ``confidence``, ``refused`` when P ≤ 1 − it, else ``undecided``; with other target
       labels (``target_labels``: they chose the model) step 2 promotes, unless ``rule_labels`` (their estimate of
       new − the rule, the rule a contender of their plan over every candidate: :data:`FIRST_RULE_LABELS`) is
       ≤ 0: then ``refused``, step 1's guard on labels. Without target labels and with
       ``first_margin`` (:data:`FIRST_MARGIN`, revision 8), a version whose source reaches the batch is weighed
       against the rule as step 5 weighs it against a champion: P = :func:`p_beats_rule`, ``promoted`` when
       P ≥ ``confidence``, ``refused`` when P ≤ 1 − it, else ``undecided`` (the pair's labels decide).
    3. ``kept`` when new predicts the champion's class on every batch row (equally accurate on it).
    4. When nothing vouches for the champion on this batch and the new version's source reaches it — the
       champion's source does not reach the batch (``champion_auc`` ≥ :data:`OVERLAP_AUC`), it predicts one
       class on it, or it is estimated no better than the majority-class rule: the guards of step 1, applied to
       the model that serves (its label-free estimate cannot be trusted where its source has no rows) —
       ``undecided`` with ``unvouched='ask'`` (the default, :data:`UNVOUCHED_CHAMPION`: the pair's labels
       decide; revision 4, ``reports/decisions_fresh.md``), ``promoted`` with ``unvouched='promote'`` (revision 3).
    5. Else P = :func:`p_better`: ``promoted`` when P ≥ ``confidence``, ``kept`` when P ≤ 1 − ``confidence``,
       else ``undecided`` — and ``undecided`` instead of ``promoted`` when the new version's own source does
       not reach the batch (``new_auc`` ≥ :data:`OVERLAP_AUC`); with ``reach='both'`` instead of ``kept`` too.

    With ``labels`` = (difference, standard error, number of labels), the labels' estimate of new − champion
    accuracy on this batch (the labels path: an undecided gate asks for labels where the two disagree), step
    4 and the reach test of step 5 are skipped (the labels observe the batch itself) and P is
    :func:`p_better_with_labels`. With ``rule_labels`` too (the same labels' estimate of new − the majority-class
    rule, the rule a third contender of their plan: :data:`RULE_CONTENDER` ``third``, revision 10), a version they
    estimate no more accurate than the rule (difference ≤ 0) is ``refused`` whatever P: step 1's guard, on labels.
    With ``rule_labels`` and no ``labels`` (the rule replaced a one-class champion in the plan: ``one_class``,
    revision 11), the labels alone decide against the rule, as step 2 decides a first version: ``promoted`` when
    P = Φ(difference / se) ≥ ``confidence``, ``refused`` when P ≤ 1 − it, else ``undecided``.

    With a champion, ``details["champion_unvouched"]`` says why nothing vouches for it on this batch (step 4's
    guards, :func:`unvouched_reason`), or is None: a refused or kept new version leaves it serving, and the run
    says so.

    Revision 2 (``reports/decisions.md``): revision 1 judged reach by the weights' :func:`ess_share` < 5 %,
    which the replication found almost never fires when source and batch are separated, and guarded the new
    version only.

    Parameters
    ----------
    new : StoredPredictions
        The new version's stored predictions on today's batch.
    champion : StoredPredictions, optional
        The served champion's stored predictions on the same batch (None: no champion).
    new_estimate : float, optional
        The new version's accuracy estimate reported in ``details`` (None: its ``auto`` point estimate).
    confidence : float, default PROMOTE_CONFIDENCE
        P needed to promote (P ≥ it) or keep (P ≤ 1 − it), in (0.5, 1).
    shared_source : bool, default False
        Whether the two were calibrated on the same source rows (passed to :func:`p_better`).
    new_auc, champion_auc : float, optional
        :func:`domain_auc` of each model's source rows against the batch (None: not known).
    labels : tuple of (float, float, int), optional
        (difference, standard error, number of labels) of the labels' estimate of new − champion accuracy
        (without a champion: new − the majority-class rule's).
    rule_labels : tuple of (float, float, int), optional
        (difference, standard error, number of labels) of the labels' estimate of new − the majority-class rule's
        accuracy: with a champion, from a pair plan with the rule as a third contender or in place of a one-class
        champion; without one, from a plan over every candidate with the rule among its contenders (step 2).
    unvouched : {"ask", "promote"}, default UNVOUCHED_CHAMPION
        Step 4: ``undecided`` (ask for the pair's labels) or ``promoted``.
    reach : {"promote", "both"}, default REACH_GUARD
        Step 5 when the new version's source does not reach the batch: only a promotion becomes ``undecided``
        (``promote``), or a keep too (``both``).
    first_reach : bool, default FIRST_REACH
        Step 2: a first version whose source does not reach the batch is ``undecided`` without target labels.
    first_margin : bool, default FIRST_MARGIN
        Step 2: a first version within reach is promoted only when P(more accurate than the majority-class rule)
        ≥ ``confidence``.
    first_unsure : bool, default FIRST_UNSURE
        Step 1 without a champion or target labels: a margin ≤ 0 over the majority-class rule is weighed by step 2
        (with ``first_margin``: refused only when P ≤ 1 − ``confidence``), not refused on its sign (revision 12).
    unsure_margin : {"refuse", "ask"}, default UNSURE_MARGIN
        Step 1 with a vouched champion, for a new version estimated no better than the majority-class rule:
        refuse it (``refuse``), or refuse it only when P(more accurate than the rule) ≤ 1 − ``confidence`` and
        else let the pair's labels decide (``ask``).
    target_labels : int, default 0
        How many target labels the run's choice rests on (step 2: with any, the reach test is skipped).
    n_boot : int, optional
        Joint resamples of :func:`p_better` (None: ``shiftlib.estimation.N_BOOT``).
    random_state : int, optional
        Seed of the resampling.

    Returns
    -------
    GateDecision
        The decision, P, the reason and the numbers behind it.
    """
    if not 0.5 < float(confidence) < 1.0:
        raise ValueError(f"promote_confidence must be in (0.5, 1), e.g. {PROMOTE_CONFIDENCE}; got {confidence!r}")
    if unvouched not in UNVOUCHED:
        raise ValueError(f"unvouched must be one of {list(UNVOUCHED)}; got {unvouched!r}")
    if reach not in REACH:
        raise ValueError(f"reach must be one of {list(REACH)}; got {reach!r}")
    if unsure_margin not in UNSURE_MARGINS:
        raise ValueError(f"unsure_margin must be one of {list(UNSURE_MARGINS)}; got {unsure_margin!r}")
    details = _gate_details(new, new_estimate, confidence, new_auc, champion_auc)
    refusal = unvouched_reason(new, None)
    if champion is not None:  # whether anything vouches for the model that serves on (step 4's guards)
        details["champion_unvouched"] = unvouched_reason(champion, champion_auc)
        details["champion_one_class"] = one_class_share(champion) >= ONE_CLASS_SHARE  # RULE_CONTENDER's case
    overruled = None  # step 1's refusal on the label-free margin, when labels weigh a first version instead
    if refusal is not None and champion is None and details["one_class_share"] < ONE_CLASS_SHARE:
        labeled = labels is not None or rule_labels is not None
        if labeled and FIRST_LABELS_DECIDE:  # the labels decide in its place
            overruled = refusal
        if overruled is not None or (not labeled and first_unsure and first_margin and not target_labels):
            details["label_free_refusal"], refusal = refusal, None  # step 2 decides (revision 12 by P without labels)
    if refusal is not None and (unsure_margin == "refuse" or champion is None
                                or details["one_class_share"] >= ONE_CLASS_SHARE
                                or details["champion_unvouched"] is not None):
        return GateDecision("refused", float("nan"), refusal, details)
    if refusal is not None:
        return _unsure_margin_gate(new, champion, refusal, labels, confidence, shared_source, n_boot, random_state,
                                   details)
    if champion is None:
        g = _first_gate(new, labels, rule_labels, confidence, new_auc, first_reach, first_margin, target_labels,
                        n_boot, random_state, details, weigh=overruled is not None)
        return g if overruled is None else replace(g, reason=f"{g.reason} (without labels {overruled})")
    if np.array_equal(np.argmax(champion.proba_target, axis=1), np.argmax(new.proba_target, axis=1)):
        return GateDecision("kept", 0.5, "it predicts the champion's class on every batch row: nothing to gain",
                            details)
    if rule_labels is not None:
        details |= {"rule_label_difference": float(rule_labels[0]), "rule_label_se": float(rule_labels[1])}
        if labels is None:  # the rule stood in for a one-class champion (RULE_CONTENDER 'one_class')
            return _rule_labeled_gate(rule_labels, confidence, details, stand_in=True)
        if float(rule_labels[0]) <= 0:
            details |= {"label_difference": float(labels[0]), "label_se": float(labels[1])}
            return _rule_refusal(rule_labels, details)
    if labels is not None:
        return _labeled_gate(new, champion, labels, confidence, shared_source, n_boot, random_state, details)
    return _unlabeled_gate(new, champion, confidence, shared_source, new_auc, champion_auc, n_boot,
                           random_state, details, unvouched, reach)


def _gate_details(new: StoredPredictions, new_estimate: float | None, confidence: float,
                  new_auc: float | None, champion_auc: float | None) -> dict[str, Any]:
    """The numbers every decision reports: the new version's estimate, its guards' values, the settings."""
    from shiftlib.estimation import point_estimate

    est = float(point_estimate(new, "auto") if new_estimate is None else new_estimate)
    base, margin, share = majority_baseline(new), majority_margin(new), one_class_share(new)
    return {"new_estimate": est, "majority_baseline": base, "majority_margin": margin,
            "one_class_share": share, "confidence": float(confidence), "new_auc": new_auc,
            "champion_auc": champion_auc}


def _unlabeled_gate(new: StoredPredictions, champion: StoredPredictions, confidence: float,
                    shared_source: bool, new_auc: float | None, champion_auc: float | None,
                    n_boot: int | None, random_state: int | None, details: dict[str, Any],
                    unvouched: str = UNVOUCHED_CHAMPION, reach: str = REACH_GUARD) -> GateDecision:
    """Steps 4 and 5 without labels: ask for labels on (or replace) a champion nothing vouches for, else decide by
    P(better)."""
    new_reaches = new_auc is None or new_auc < OVERLAP_AUC
    stale = details["champion_unvouched"]
    if stale is not None and new_reaches:
        said = f"nothing vouches for the champion on this batch: {stale}"
        if unvouched == "promote":
            return GateDecision("promoted", float("nan"), said, details)
        reach = ("" if new_auc is None else
                 f" (the gate's domain AUC {new_auc:.3f} < {OVERLAP_AUC}; the overlap line counts rows beyond the "
                 "source's range, another test)")
        return GateDecision("undecided", float("nan"), f"{said}; the new version's source reaches it{reach}, but "
                            "without labels nothing says which is more accurate: the champion stays, and labels on the "
                            "rows where the two disagree decide", details)
    p, est_c, est_n = p_better(champion, new, shared_source=shared_source, n_boot=n_boot,
                               random_state=random_state)
    details |= {"champion_estimate": est_c, "new_estimate_paired": est_n}
    said = f"P(new more accurate than the champion on this batch) = {_p_words(p, confidence)} ({est_n:.3f} vs {est_c:.3f})"
    if p >= confidence and not new_reaches:
        return GateDecision("undecided", p, f"{said}, but the new version's source does not reach this batch "
                            f"either (the gate's domain AUC {new_auc:.3f}): the champion stays", details)
    if p >= confidence:
        return GateDecision("promoted", p, f"{said} ≥ {confidence}", details)
    if p <= 1.0 - confidence and not new_reaches and reach == "both":
        return GateDecision("undecided", p, f"{said}, but the new version's source does not reach this batch "
                            f"(the gate's domain AUC {new_auc:.3f}), so neither estimate rests on rows like the batch's: the "
                            "champion stays until labels decide", details)
    if p <= 1.0 - confidence:
        return GateDecision("kept", p, f"{said} ≤ {1.0 - confidence:.2g}", details)
    return GateDecision("undecided", p, f"{said}: not sure either way, the champion stays", details)


def _p_words(p: float, confidence: float) -> str:
    """P with two decimals, or four where two would round it onto a threshold it has not reached (helper-37 read
    "P = 0.90 … still not sure" for P = 0.8967 against 0.9)."""
    near = any(abs(p - t) < 0.005 and p != t for t in (confidence, 1.0 - confidence))
    return f"{p:.4f}" if near else f"{p:.2f}"


def _three_way(p: float, confidence: float, said: str, low: str, stays: str, details: dict[str, Any],
               tie: bool = False, undecided: str | None = None) -> GateDecision:
    """``promoted`` when P ≥ ``confidence``, ``low`` (kept / refused) when P ≤ 1 − it, else ``undecided``; ``low``
    too on an exact ``tie`` (the labels cover every row where the two disagree, and they are equally accurate
    there: no further label can change that, and the new version gains nothing). ``undecided``: the reason
    for an undecided gate (default: labels so far, a larger budget continues their plan)."""
    if tie:
        return GateDecision(low, p, f"{said}: every row where the two disagree is labeled and they are equally "
                            "accurate on this batch, so the new version gains nothing"
                            + (" and must not serve" if low == "refused" else ""), details)
    if p >= confidence:
        return GateDecision("promoted", p, f"{said} ≥ {confidence}", details)
    if p <= 1.0 - confidence:
        return GateDecision(low, p, f"{said} ≤ {1.0 - confidence:.2g}" + (": it must not serve" if low == "refused"
                                                                          else ""), details)
    return GateDecision("undecided", p, undecided or f"{said}: still not sure, {stays}; a larger label budget "
                        "continues the plan", details)


def refusal_stands(decision: GateDecision, unsure_margin: str = UNSURE_MARGIN) -> bool:
    """Whether step 1's decision without a champion (``gate(new, None, first_margin=False)``) is final whatever
    champion serves: a refusal for predicting one class, or any refusal with ``unsure_margin='refuse'``. With
    ``'ask'``, a refusal on the estimated margin over the majority-class rule may still be left to labels beside a
    champion (:func:`gate`, step 1).

    Parameters
    ----------
    decision : GateDecision
        Step 1's decision, taken without a champion.
    unsure_margin : {"refuse", "ask"}, default UNSURE_MARGIN
        :func:`gate`'s ``unsure_margin``.

    Returns
    -------
    bool
        True when the refusal stands whatever champion serves.
    """
    return decision.decision == "refused" and (
        unsure_margin == "refuse" or decision.details["one_class_share"] >= ONE_CLASS_SHARE)


def refused_beside(refused: GateDecision, champion_P: StoredPredictions, *, champion_auc: float | None,
                   new_auc: float | None, champion: str = "the champion",
                   labels: tuple[float, float, int] | None = None) -> GateDecision:
    """Step 1's refusal of a new version, taken before any champion was weighed, with what it leaves serving:
    ``details["champion_unvouched"]`` (:func:`unvouched_reason` of the champion, step 4's guards), so a refused
    version does not leave an unchecked champion serving in silence. A refusal on the estimated margin over the
    majority-class rule says when that estimate rests on no rows like the batch's (``new_auc`` ≥
    :data:`OVERLAP_AUC`), as step 2 says it of a first version. With ``labels`` of a plan over the pair (their
    estimate of the refused version's accuracy minus the champion's), the reason gives them: the refusal stands
    (step 1 precedes labels), and the user learns how the champion fares against it.

    Parameters
    ----------
    refused : GateDecision
        Step 1's refusal (``gate(new, None, ...)``).
    champion_P : StoredPredictions
        The served champion's stored predictions on the batch.
    champion_auc, new_auc : float or None
        :func:`domain_auc` of the champion's and of the new version's source rows against the batch.
    champion : str, default "the champion"
        How the reason names the champion (e.g. ``"v3"``).
    labels : tuple of (float, float, int), optional
        (difference, standard error, number of labels) of the labels' estimate of new − champion accuracy.

    Returns
    -------
    GateDecision
        The refusal, its reason and details completed.
    """
    details = refused.details | {"champion_unvouched": unvouched_reason(champion_P, champion_auc),
                                 "champion_one_class": one_class_share(champion_P) >= ONE_CLASS_SHARE}
    reason = refused.reason
    if details["one_class_share"] < ONE_CLASS_SHARE and new_auc is not None and new_auc >= OVERLAP_AUC:
        reason += (f" — a label-free estimate made where its source does not reach this batch (the gate's domain AUC "
                   f"{new_auc:.3f} ≥ {OVERLAP_AUC})")
    if labels is not None:
        d, se, n = labels
        details |= {"labels": int(n), "label_difference": float(d), "label_se": float(se)}
        more = "more" if d >= 0 else "less"  # helper-36 stumbled on "−0.068 ± 0.040 more accurate"
        reason += (f"; with {n} target labels it is {abs(d):.3f} ± {se:.3f} (one standard error) {more} accurate than "
                   f"{champion} on this batch")
    return replace(refused, details=details, reason=reason)


def _unsure_margin_gate(new: StoredPredictions, champion: StoredPredictions, refusal: str,
                        labels: tuple[float, float, int] | None, confidence: float, shared_source: bool,
                        n_boot: int | None, random_state: int | None, details: dict[str, Any]) -> GateDecision:
    """Step 1 with ``unsure_margin='ask'`` (revision 9): a new version estimated no better than the majority-class
    rule, beside a champion estimated better than it. Refused when P(more accurate than the rule) ≤ 1 − confidence;
    else the pair's labels decide (``undecided`` until they come)."""
    p_rule, margin = p_beats_rule(new, n_boot=n_boot, random_state=random_state, margin=details["majority_margin"])
    details["p_beats_rule"] = p_rule
    said = f"{refusal}; P(more accurate than the rule on this batch) = {_p_words(p_rule, confidence)}"
    if p_rule <= 1.0 - confidence:
        return GateDecision("refused", float("nan"), f"{said} ≤ {1.0 - confidence:.2g}", details)
    if np.array_equal(np.argmax(champion.proba_target, axis=1), np.argmax(new.proba_target, axis=1)):
        return GateDecision("kept", 0.5, "it predicts the champion's class on every batch row: nothing to gain",
                            details)
    if labels is None:
        return GateDecision("undecided", float("nan"), f"{said}: not sure, and the champion is estimated more "
                            "accurate than the rule, so the champion stays and labels on the rows where the two "
                            "disagree decide", details)
    g = _labeled_gate(new, champion, labels, confidence, shared_source, n_boot, random_state, details)
    return replace(g, reason=f"{g.reason} (without labels it was estimated no more accurate than the majority-class "
                   f"rule, margin {margin:+.3f} at P = {p_rule:.2f}; the champion is estimated more accurate than the "
                   "rule)")


def _first_gate(new: StoredPredictions, labels: tuple[float, float, int] | None,
                rule_labels: tuple[float, float, int] | None, confidence: float, new_auc: float | None,
                first_reach: bool, first_margin: bool, target_labels: int, n_boot: int | None,
                random_state: int | None, details: dict[str, Any], *, weigh: bool = False) -> GateDecision:
    """Step 2 of :func:`gate`: a first version (no champion) past step 1's guards. ``weigh``: the labels overruled
    a label-free refusal (:data:`FIRST_LABELS_DECIDE`), so those of a plan over every candidate decide three ways
    by P = Φ(d / se), as a pair plan's do, not on their sign: they must show it above the rule."""
    if labels is not None:
        return _rule_labeled_gate(labels, confidence, details)
    if rule_labels is not None:  # a plan over every candidate, the rule among its contenders
        details |= {"rule_label_difference": float(rule_labels[0]), "rule_label_se": float(rule_labels[1])}
        if float(rule_labels[0]) <= 0:
            return _rule_refusal(rule_labels, details)
        if weigh:
            return _rule_labeled_gate(rule_labels, confidence, details)
    if first_reach and not target_labels and new_auc is not None and new_auc >= OVERLAP_AUC:
        return GateDecision("undecided", float("nan"), (
            "no champion to compare with, and its source does not reach this batch (the gate's domain AUC "
            f"{new_auc:.3f} ≥ {OVERLAP_AUC}): its estimated margin over the majority-class rule "
            f"({details['majority_margin']:+.3f}) rests on no rows like the batch's, so nothing serves until "
            "target labels decide"), details)
    if first_margin and not target_labels:
        return _first_margin_gate(new, confidence, n_boot, random_state, details)
    if rule_labels is not None:
        d, se, n = float(rule_labels[0]), float(rule_labels[1]), int(rule_labels[2])
        return GateDecision("promoted", float("nan"), "no champion to compare with; with "
                            f"{n} target labels it is estimated more accurate than the majority-class rule (difference "
                            f"{d:+.3f} ± {se:.3f}, one standard error)", details)
    return GateDecision("promoted", float("nan"), "no champion to compare with", details)


def _first_margin_gate(new: StoredPredictions, confidence: float, n_boot: int | None, random_state: int | None,
                       details: dict[str, Any]) -> GateDecision:
    """Step 2 without labels (revision 8): the first version against the majority-class rule by P from the
    resampled margin (:func:`p_beats_rule`)."""
    p, margin = p_beats_rule(new, n_boot=n_boot, random_state=random_state, margin=details["majority_margin"])
    said = (f"no champion to compare with; P(more accurate than the majority-class rule on this batch) = "
            f"{_p_words(p, confidence)} "
            f"(estimated margin {margin:+.3f})")
    return _three_way(p, confidence, said, "refused", "nothing serves", details,
                      undecided=f"{said}: not sure it beats the rule, so nothing serves until target labels decide")


def _rule_labeled_gate(labels: tuple[float, float, int], confidence: float, details: dict[str, Any], *,
                       stand_in: bool = False) -> GateDecision:
    """The labels of a pair (new version, majority-class rule) decide alone, P = Φ(difference / se): step 2 for a
    first version (the label-free margin is what could not be trusted), or with ``stand_in`` step 5 for a plan in
    which the rule stood in for a champion that predicts one class (revision 11: that champion stays unless the
    new version is shown to beat the rule; ``details["rule_stood_in"]``)."""
    difference, se, n = (float(labels[0]), float(labels[1]), int(labels[2]))
    p = _p_positive(difference, se)
    details |= {"labels": n, "difference": difference, "difference_se": se, "prior_weight": 0.0}
    if stand_in:
        details["rule_stood_in"] = True
        lead, stays = ("the champion predicts one class, so the labels weigh the new version against the "
                       "majority-class rule in its stead: P(more accurate than the rule", "the champion stays")
    else:
        details |= {"label_difference": difference, "label_se": se}
        lead, stays = "no champion to compare with; P(more accurate than the majority-class rule", "nothing serves"
    said = (f"{lead} on this batch) = {_p_words(p, confidence)} with {n} target labels (difference "
            f"{difference:+.3f} ± {se:.3f}, one standard error)")
    return _three_way(p, confidence, said, "refused", stays, details, tie=se <= 0 and difference == 0)


def _rule_refusal(rule_labels: tuple[float, float, int], details: dict[str, Any]) -> GateDecision:
    """Step 5 with labels whose plan had the majority-class rule as a contender (revision 10): they estimate the new
    version no more accurate than the rule, so it must not serve (step 1's guard on the labels' estimate)."""
    d, se, n = float(rule_labels[0]), float(rule_labels[1]), int(rule_labels[2])
    details["labels"] = n
    return GateDecision("refused", float("nan"), (
        f"with {n} target labels it is estimated no more accurate than the majority-class rule on this batch "
        f"(difference {d:+.3f} ± {se:.3f}, one standard error): a model that does not beat the constant rule must "
        "not serve"), details)


def _labeled_gate(new: StoredPredictions, champion: StoredPredictions, labels: tuple[float, float, int],
                  confidence: float, shared_source: bool, n_boot: int | None, random_state: int | None,
                  details: dict[str, Any]) -> GateDecision:
    difference, se_l, n = labels
    p, d, se, w = p_better_with_labels(champion, new, difference, se_l, shared_source=shared_source, n_boot=n_boot,
                                       random_state=random_state)
    details |= {"labels": int(n), "label_difference": float(difference), "label_se": float(se_l),
                "difference": d, "difference_se": se, "prior_weight": w}
    said = (f"P(new more accurate than the champion on this batch) = {_p_words(p, confidence)} with {n} target labels "
            f"(difference {d:+.3f} ± {se:.3f}, one standard error; the label-free estimate weighs {w:.0%})")
    return _three_way(p, confidence, said, "kept", "the champion stays", details, tie=se <= 0 and d == 0)


def with_labels_interval(estimate: float, ci_low: float, ci_high: float, label: float, label_se: float, *,
                         confidence: float = 0.95) -> tuple[float, float, float, float]:
    """:func:`with_labels` with the label-free estimate given as its two-sided interval at ``confidence``: its
    standard error is the half-width over the normal quantile.

    Parameters
    ----------
    estimate : float
        The label-free estimate.
    ci_low, ci_high : float
        Its two-sided interval at ``confidence``.
    label : float
        The estimate from the target labels.
    label_se : float
        Its standard error (> 0).
    confidence : float, default 0.95
        Level of the given interval and of the returned one.

    Returns
    -------
    tuple of float
        (estimate, ci_low, ci_high, weight of the label-free estimate), as :func:`with_labels`.
    """
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    return with_labels(estimate, (ci_high - ci_low) / (2 * z), label, label_se, confidence=confidence)


def with_labels(prior: float, prior_se: float, label: float, label_se: float, *, confidence: float = 0.95
                ) -> tuple[float, float, float, float]:
    """A candidate's accuracy from its label-free estimate (``prior`` ± ``prior_se``) and the estimate from
    the target labels that arrived (``label`` ± ``label_se``, e.g. the difference estimator): returns
    (estimate, ci_low, ci_high, weight of the prior).

    The label-free estimate may be biased by a shift it does not model, so its variance is increased by
    τ² = max(0, (prior − label)² − prior_se² − label_se²), the moment estimate of the squared bias the two
    disagree by (DerSimonian & Laird 1986); the two are then combined by inverse variance. A prior the
    labels agree with narrows the interval; one they contradict loses its weight.

    Parameters
    ----------
    prior : float
        The label-free estimate.
    prior_se : float
        Its standard error.
    label : float
        The estimate from the target labels.
    label_se : float
        Its standard error (> 0).
    confidence : float, default 0.95
        Two-sided level of the returned interval.

    Returns
    -------
    tuple of float
        (estimate, ci_low, ci_high, weight of the prior), the interval clipped to [0, 1].
    """
    if label_se <= 0:
        raise ValueError(f"label_se must be > 0; got {label_se!r}")
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    est, se, w = _pool(prior, prior_se, label, label_se)
    return float(est), float(max(0.0, est - z * se)), float(min(1.0, est + z * se)), w


def _pool(prior: float, prior_se: float, label: float, label_se: float) -> tuple[float, float, float]:
    """(estimate, standard error, prior's weight): inverse-variance pooling with the prior's variance grown by
    τ² = max(0, (prior − label)² − prior_se² − label_se²) (:func:`with_labels`). Labels with no variance
    (every row that matters labeled) are the answer; so is a prior with none that they do not contradict."""
    tau2 = max(0.0, (prior - label) ** 2 - prior_se ** 2 - label_se ** 2)
    v_prior = prior_se ** 2 + tau2
    if label_se <= 0:
        return float(label), 0.0, 0.0
    if v_prior <= 0:
        return float(prior), 0.0, 1.0
    w_p, w_l = 1.0 / v_prior, 1.0 / label_se ** 2
    est = (w_p * prior + w_l * label) / (w_p + w_l)
    return float(est), math.sqrt(1.0 / (w_p + w_l)), float(w_p / (w_p + w_l))
