"""Typed results shared by every selector: per-learner scores, ranks, ranking tiers and export.

``SelectorScores`` holds one estimated score per learner (higher is better) and optional intervals;
``to_frame()`` gives the long table ``learner, selector, score, rank, interval_low, interval_high``
that every selector (including ReverseTesting) exports, so the tables concatenate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["SCORE_COLUMNS", "SelectorScores", "ranking_tiers", "ranks_from_scores"]

SCORE_COLUMNS = ["learner", "selector", "score", "rank", "interval_low", "interval_high"]


def ranks_from_scores(scores: pd.Series) -> pd.Series:
    """Competition ranks (1 = best, equal scores share the smallest rank: 1, 2, 2, 4); NaN ranks last.

    Parameters
    ----------
    scores : pandas.Series
        One score per learner (index), higher is better; NaN allowed.

    Returns
    -------
    pandas.Series of int
        The rank of each learner, same index as ``scores``.
    """
    r = scores.rank(method="min", ascending=False, na_option="bottom")
    return r.astype(int)


def ranking_tiers(scores: pd.Series) -> list[tuple[str, ...]]:
    """Learners best first, grouped into tiers of equal score (input order inside a tier).

    Parameters
    ----------
    scores : pandas.Series
        One score per learner (index), higher is better; NaN ranks last.

    Returns
    -------
    list of tuple of str
        One tuple of learner names per distinct rank, best rank first.
    """
    ranks = ranks_from_scores(scores)
    return [tuple(ranks.index[ranks == r]) for r in sorted(ranks.unique())]


def _num(v: Any) -> Any:
    if v is None:
        return None
    v = float(v)
    return None if math.isnan(v) else v


@dataclass(frozen=True, eq=False)
class SelectorScores:
    """Estimated score per learner from one selector (SCV, LOO, WCV, TCV, STV, TrCV, ...); higher is better.

    A learner whose fit raised ``ValueError`` (e.g. too few rows of a class for its inner CV) has score
    NaN, ranks last and its message is in ``errors``; NaN never wins a comparison.

    Parameters
    ----------
    selector : str
        The selector's name (e.g. ``"scv"``, ``"trcv"``), written in the ``selector`` column of ``to_frame()``.
    scores : pandas.Series
        One estimated score per learner, indexed by learner name; higher is better.
    n_fits : int
        How many models the selector fitted to produce these scores.
    intervals : pandas.DataFrame or None, default None
        Optional per-learner interval with columns ``low`` and ``high``, indexed by learner name.
    details : dict, default {}
        Selector-specific extras (e.g. ``fold_scores``, ``params``).
    errors : dict of str to str, default {}
        Learner name to the message of the ``ValueError`` its fit raised (its score is NaN).
    """

    selector: str
    scores: pd.Series
    n_fits: int
    intervals: pd.DataFrame | None = None
    details: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_fold_scores(cls, selector: str, fold_scores: dict[str, Any], params: dict[str, Any], *,
                         n_fits: int = 0, errors: dict[str, str] | None = None) -> SelectorScores:
        """Each learner's score as the mean of its fold scores (``cross_val_score``'s convention), the fold
        scores kept in ``details["fold_scores"]``: how a k-fold selector is read from stored or partial folds."""
        folds = {name: np.asarray(f, dtype=float) for name, f in fold_scores.items()}
        scores = pd.Series({name: float(f.mean()) for name, f in folds.items()}, dtype=float)
        return cls(selector, scores, n_fits, None, {"fold_scores": folds, "params": dict(params)}, dict(errors or {}))

    @property
    def learners(self) -> list[str]:
        return list(self.scores.index)

    @property
    def ranks(self) -> pd.Series:
        """Rank per learner: 1 = best, ties share the smallest rank."""
        return ranks_from_scores(self.scores)

    @property
    def ranking(self) -> list[tuple[str, ...]]:
        """Learners best first as tiers; a tier holds learners with exactly equal scores."""
        return ranking_tiers(self.scores)

    @property
    def best(self) -> tuple[str, ...]:
        """The top tier (one name unless scores tie)."""
        return self.ranking[0]

    def winner(self, a: str, b: str) -> str | None:
        """The learner with the higher score, or None when the scores are equal."""
        for n in (a, b):
            if n not in self.scores.index:
                raise KeyError(f"{n!r} is not a scored learner; known: {self.learners}")
        sa, sb = self.scores[a], self.scores[b]
        if sa > sb:
            return a
        if sb > sa:
            return b
        return None

    def to_frame(self) -> pd.DataFrame:
        """Long table: learner, selector, score, rank, interval_low, interval_high (NaN without interval)."""
        lo = hi = pd.Series(np.nan, index=self.scores.index)
        if self.intervals is not None:
            lo = self.intervals["low"].reindex(self.scores.index)
            hi = self.intervals["high"].reindex(self.scores.index)
        return pd.DataFrame({
            "learner": self.scores.index.astype(str),
            "selector": self.selector,
            "score": self.scores.to_numpy(dtype=float),
            "rank": self.ranks.to_numpy(dtype=int),
            "interval_low": lo.to_numpy(dtype=float),
            "interval_high": hi.to_numpy(dtype=float),
        })[SCORE_COLUMNS]

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable summary (NaN becomes None)."""
        out: dict[str, Any] = {
            "selector": self.selector,
            "n_fits": int(self.n_fits),
            "scores": {k: _num(v) for k, v in self.scores.items()},
            "ranks": {k: int(v) for k, v in self.ranks.items()},
            "ranking": [list(t) for t in self.ranking],
        }
        if self.intervals is not None:
            out["intervals"] = {k: [_num(r["low"]), _num(r["high"])] for k, r in self.intervals.iterrows()}
        if self.errors:
            out["errors"] = dict(self.errors)
        params = self.details.get("params")
        if params is not None:
            out["params"] = params
        return out


def concat_scores(parts: list[SelectorScores]) -> SelectorScores:
    """One selector's scores put together from parts computed separately (e.g. one candidate per task).

    The parts must come from the same selector over disjoint learners with the same folds (same data,
    ``k`` and seed), so the joined result is the one the selector would return for all of them at once.

    Parameters
    ----------
    parts : list of SelectorScores
        Results of one selector over disjoint sets of learners; at least one.

    Returns
    -------
    SelectorScores
        Scores, errors and ``fold_scores`` of all parts joined; ``n_fits`` summed; ``params`` taken from the
        first part; intervals concatenated only when every part has them (else None).

    Raises
    ------
    ValueError
        ``parts`` is empty, mixes selectors, or names a learner more than once.
    """
    if not parts:
        raise ValueError("no selector results to put together")
    names = {p.selector for p in parts}
    if len(names) != 1:
        raise ValueError(f"cannot put together results of different selectors: {sorted(names)}")
    learners = [n for p in parts for n in p.learners]
    if len(set(learners)) != len(learners):
        raise ValueError(f"a learner appears in more than one part: {learners}")
    details: dict[str, Any] = {"params": parts[0].details.get("params")}
    if any("fold_scores" in p.details for p in parts):
        details["fold_scores"] = {k: v for p in parts for k, v in p.details.get("fold_scores", {}).items()}
    intervals = None
    if all(p.intervals is not None for p in parts):
        intervals = pd.concat([p.intervals for p in parts])
    return SelectorScores(
        parts[0].selector, pd.concat([p.scores for p in parts]).astype(float), sum(p.n_fits for p in parts),
        intervals, details, {k: v for p in parts for k, v in p.errors.items()},
    )
