"""Agreement of a selector with the true ranking: TrCV's corr (§5.1), pairwise-order accuracy (RT §3.3/§5
tables), Kendall τ (``scipy.stats.kendalltau``) and regret.

``true_scores`` is a mapping / Series learner → true score on the target (higher is better).
A *selector* is a Series of estimated scores (higher is better) or any result with ``winner(a, b)``
and ``scores`` (``SelectorScores``, ``ReverseTestingResult``). Pairwise measures use ``winner``, so
ReverseTesting is judged on its own pairwise decisions, not only on its Copeland scores.

Decisions where the sources are silent:

* pairwise-order accuracy counts only pairs whose true gap is ≥ ``tie_tol`` (default 0.005); a
  counted pair the selector leaves undecided (RT Condition 4.3, equal CV scores) counts as wrong,
  as RT §5 counts its "??" entries among the errors.
* corr is TrCV's formula exactly: C(|H|, 2) minus the pairs the selector orders against the truth;
  true ties and undecided pairs are not discordant.
* a learner the selector could not score (NaN) loses no pair and wins none (undecided) and is left
  out of Kendall τ.
* regret uses the selector's top tier; when several learners tie for the top, it is the mean
  regret over them (the expected regret of a uniform tie-break).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from .results import ranking_tiers

__all__ = [
    "Agreement",
    "PairwiseAgreement",
    "agreement",
    "corr_measure",
    "kendall_tau",
    "pairwise_order_accuracy",
    "regret",
]


def _true(true_scores: Any) -> pd.Series:
    s = pd.Series(true_scores, dtype=float) if isinstance(true_scores, Mapping) else pd.Series(true_scores).astype(float)
    if s.isna().any():
        raise ValueError("true_scores contain NaN: every learner needs a true score")
    if len(s) < 2:
        raise ValueError("agreement needs at least two learners")
    return s


def _estimated(selector: Any) -> pd.Series:
    if hasattr(selector, "scores") and not isinstance(selector, pd.Series | Mapping):
        return pd.Series(selector.scores).astype(float)
    return pd.Series(selector, dtype=float) if isinstance(selector, Mapping) else pd.Series(selector).astype(float)


def _winner_fn(selector: Any) -> Any:
    if hasattr(selector, "winner"):
        return selector.winner
    est = _estimated(selector)

    def win(a: str, b: str) -> str | None:
        if est[a] > est[b]:
            return a
        if est[b] > est[a]:
            return b
        return None

    return win


def _names(true: pd.Series, selector: Any) -> list[str]:
    est = _estimated(selector)
    missing = sorted(set(true.index) - set(est.index))
    if missing:
        raise KeyError(f"the selector has no score for {missing}; score the same learners as true_scores")
    return list(true.index)


def corr_measure(true_scores: Any, selector: Any) -> int:
    """TrCV §5.1: corr = C(|H|,2) − #pairs with (ε(f) − ε(g))·(v(f) − v(g)) < 0; returns an int.

    Parameters
    ----------
    true_scores : Mapping or pandas.Series
        Learner name to its true score on the target (higher is better); at least two learners, no NaN.
    selector : pandas.Series, Mapping or result with ``scores`` and ``winner``
        Estimated scores per learner (higher is better), or a selector result (``SelectorScores``,
        ``ReverseTestingResult``) whose ``winner(a, b)`` decides each pair; it must score every learner of
        ``true_scores``.

    Returns
    -------
    int
        The number of learner pairs minus those the selector orders against the truth (true ties and
        undecided pairs are not discordant).
    """
    true = _true(true_scores)
    names = _names(true, selector)
    win = _winner_fn(selector)
    discordant = 0
    for a, b in combinations(names, 2):
        if true[a] == true[b]:
            continue
        w = win(a, b)
        if w is not None and w != (a if true[a] > true[b] else b):
            discordant += 1
    return math.comb(len(names), 2) - discordant


@dataclass(frozen=True)
class PairwiseAgreement:
    """Pairwise-order accuracy: ``correct`` of ``counted`` pairs (true gap ≥ tie_tol); undecided count as wrong.

    Parameters
    ----------
    correct : int
        Counted pairs the selector orders as the truth.
    counted : int
        Pairs whose true gap is at least ``tie_tol``.
    undecided : int
        Counted pairs the selector leaves undecided (counted as wrong).
    ties_skipped : int
        Pairs skipped because their true gap is below ``tie_tol``.
    """

    correct: int
    counted: int
    undecided: int
    ties_skipped: int

    @property
    def accuracy(self) -> float:
        return self.correct / self.counted if self.counted else math.nan


def pairwise_order_accuracy(true_scores: Any, selector: Any, *, tie_tol: float = 0.005) -> PairwiseAgreement:
    """Share of learner pairs (true gap ≥ ``tie_tol``) the selector orders as the truth; returns ``PairwiseAgreement``.

    Parameters
    ----------
    true_scores : Mapping or pandas.Series
        Learner name to its true score on the target (higher is better); at least two learners, no NaN.
    selector : pandas.Series, Mapping or result with ``scores`` and ``winner``
        Estimated scores per learner (higher is better), or a selector result (``SelectorScores``,
        ``ReverseTestingResult``) whose ``winner(a, b)`` decides each pair; it must score every learner of
        ``true_scores``.
    tie_tol : float, default 0.005
        Pairs whose true scores differ by less than this are skipped (true ties).

    Returns
    -------
    PairwiseAgreement
        The pair counts; its ``accuracy`` is ``correct / counted`` (NaN when no pair is counted).
    """
    true = _true(true_scores)
    names = _names(true, selector)
    win = _winner_fn(selector)
    correct = counted = undecided = skipped = 0
    for a, b in combinations(names, 2):
        if abs(true[a] - true[b]) < tie_tol:
            skipped += 1
            continue
        counted += 1
        w = win(a, b)
        if w is None:
            undecided += 1
        elif w == (a if true[a] > true[b] else b):
            correct += 1
    return PairwiseAgreement(correct, counted, undecided, skipped)


def kendall_tau(true_scores: Any, selector: Any) -> float:
    """Kendall τ-b (``scipy.stats.kendalltau``) between true and estimated scores; NaN if either is constant.

    Parameters
    ----------
    true_scores : Mapping or pandas.Series
        Learner name to its true score on the target (higher is better); at least two learners, no NaN.
    selector : pandas.Series, Mapping or result with ``scores``
        Estimated scores per learner (higher is better), or a selector result whose ``scores`` are used; it must
        score every learner of ``true_scores``.

    Returns
    -------
    float
        τ-b over the learners the selector scored (non-NaN); NaN when fewer than two remain or either side is
        constant.
    """
    true = _true(true_scores)
    names = _names(true, selector)
    est = _estimated(selector)[names]
    finite = est.notna().to_numpy()  # learners a selector could not score (NaN) are left out of τ
    true, est = true[names][finite], est[finite]
    if len(est) < 2 or true.nunique() < 2 or est.nunique() < 2:
        return math.nan
    from scipy.stats import kendalltau  # lazy: scipy.stats is slow to import

    return float(kendalltau(true.to_numpy(), est.to_numpy()).statistic)


def regret(true_scores: Any, selected: Any) -> float:
    """True best score − true score of the selected learner (mean over a tied top tier).

    ``selected`` is a learner name, a collection of tied names, or a selector (its top tier is used).

    Parameters
    ----------
    true_scores : Mapping or pandas.Series
        Learner name to its true score on the target (higher is better); at least two learners, no NaN.
    selected : str, collection of str, pandas.Series, Mapping or selector result
        The chosen learner, tied learners, estimated scores (their top tier), or a result with ``ranking``.

    Returns
    -------
    float
        The true best score minus the mean true score of the chosen learner(s); 0 when the best is chosen.
    """
    true = _true(true_scores)
    if isinstance(selected, str):
        chosen: list[str] = [selected]
    elif hasattr(selected, "ranking") and not isinstance(selected, pd.Series):
        chosen = list(selected.ranking[0])
    elif isinstance(selected, pd.Series | Mapping):
        chosen = list(ranking_tiers(_estimated(selected))[0])
    else:
        chosen = list(selected)
    unknown = sorted(set(chosen) - set(true.index))
    if unknown:
        raise KeyError(f"selected learner(s) {unknown} have no true score")
    return float(true.max() - np.mean([true[c] for c in chosen]))


@dataclass(frozen=True)
class Agreement:
    """All agreement measures of one selector against the truth (see module docstring).

    Parameters
    ----------
    corr : int
        TrCV §5.1 corr (see :func:`corr_measure`).
    n_pairs : int
        C(|H|, 2), the number of learner pairs (corr's maximum).
    pairwise_correct : int
        Counted pairs ordered as the truth (see :class:`PairwiseAgreement`).
    pairwise_counted : int
        Pairs whose true gap is at least ``tie_tol``.
    pairwise_undecided : int
        Counted pairs the selector leaves undecided.
    pairwise_accuracy : float
        ``pairwise_correct / pairwise_counted``; NaN when no pair is counted.
    kendall_tau : float
        Kendall τ-b (see :func:`kendall_tau`).
    regret : float
        Regret of the selector's top tier (see :func:`regret`).
    selected : tuple of str
        The selector's top tier among the judged learners.
    true_best : tuple of str
        The learners with the best true score.
    """

    corr: int
    n_pairs: int
    pairwise_correct: int
    pairwise_counted: int
    pairwise_undecided: int
    pairwise_accuracy: float
    kendall_tau: float
    regret: float
    selected: tuple[str, ...]
    true_best: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["selected"] = list(self.selected)
        d["true_best"] = list(self.true_best)
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}


def agreement(true_scores: Any, selector: Any, *, tie_tol: float = 0.005) -> Agreement:
    """corr, pairwise-order accuracy, Kendall τ and regret of ``selector`` against ``true_scores``.

    Parameters
    ----------
    true_scores : Mapping or pandas.Series
        Learner name to its true score on the target (higher is better); at least two learners, no NaN.
    selector : pandas.Series, Mapping or result with ``scores`` and ``winner``
        Estimated scores per learner (higher is better), or a selector result (``SelectorScores``,
        ``ReverseTestingResult``) whose ``winner(a, b)`` decides each pair; it must score every learner of
        ``true_scores``.
    tie_tol : float, default 0.005
        Pairs whose true scores differ by less than this are skipped (true ties).

    Returns
    -------
    Agreement
        Every measure at once; regret is that of the selector's top tier among the learners of ``true_scores``.
    """
    true = _true(true_scores)
    est = _estimated(selector)
    pw = pairwise_order_accuracy(true, selector, tie_tol=tie_tol)
    _names(true, selector)
    top = ranking_tiers(est[list(true.index)])[0]  # the selector's top tier among the judged learners
    return Agreement(
        corr=corr_measure(true, selector),
        n_pairs=math.comb(len(true), 2),
        pairwise_correct=pw.correct,
        pairwise_counted=pw.counted,
        pairwise_undecided=pw.undecided,
        pairwise_accuracy=pw.accuracy,
        kendall_tau=kendall_tau(true, selector),
        regret=regret(true, list(top)),
        selected=tuple(top),
        true_best=ranking_tiers(true)[0],
    )
