"""ReverseTesting (RT §4.2, Fig. 3) on the matrix M[labeler, retrainer] of docs/architecture.md.

``M[i, j]`` is the score on the labeled training set D of the model that learner j fits on the test set
T labeled by the model of learner i. Building it takes ℓ + ℓ² fits, each made once and independent of
the others, so a workflow can fan them out:

1. ``label_target(candidate, X_source, y_source, X_target)`` — fit learner i on D, label T (ℓ fits);
2. ``reverse_score(retrainer, labels_i, X_target, X_source, y_source)`` — fit learner j on
   (T, labels_i) and score it on D (ℓ² fits);
3. ``combine(labels, cells)`` — the matrix, the pairwise decisions and the ranking.

``reverse_testing(...)`` runs all three. Pairwise rules:

* ``rule="pair"`` (RT Conditions 4.1–4.3): b beats a iff ``M[b, a] > M[a, a]`` and ``M[b, b] > M[a, b]``;
  a beats b in the mirror case; otherwise tie / undetermined (4.3).
* ``rule="all"``: b beats a iff ``M[b, j] > M[a, j]`` for *every* retrainer j (mirror for a). With two
  learners it is the same as ``"pair"``.

**Ranking** (RT gives pairwise orders only): the Copeland score, wins − losses over all pairs
(undetermined pairs count 0), ranks the learners; equal Copeland scores share a rank (ties kept).

**Undetermined cells.** A labeler whose labels on T have one class gives no retrainer anything to
learn: its row of M is NaN and every pair that needs that row is undetermined, with the reason. A
retrainer whose fit raises ``ValueError`` (e.g. too few rows of a class for its inner CV) leaves that
cell NaN with the error as the reason. NaN never wins a comparison.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Literal

import numpy as np
import pandas as pd

from ._validation import check_X, check_y
from .candidates import Candidate, fit_candidate, resolve_candidates
from .results import SCORE_COLUMNS, ranking_tiers, ranks_from_scores
from .scoring import Scorer, get_scorer, score_rows, scorer_name

__all__ = [
    "ReverseCell",
    "ReverseTestingResult",
    "TargetLabels",
    "combine",
    "label_target",
    "pair_decision",
    "reverse_score",
    "reverse_testing",
    "reverse_testing_row",
]

Rule = Literal["pair", "all"]


@dataclass(frozen=True, eq=False)
class TargetLabels:
    """RT Fig. 3 steps 1–2: T labeled by the model learner ``labeler`` fitted on D (one fit).

    Parameters
    ----------
    labeler : str
        Name of the learner whose model labeled T.
    labels : numpy.ndarray
        Its predicted label for each row of T.
    """

    labeler: str
    labels: np.ndarray

    @property
    def classes(self) -> tuple[Any, ...]:
        return tuple(np.unique(self.labels).tolist())

    @property
    def counts(self) -> dict[Any, int]:
        vals, cnt = np.unique(self.labels, return_counts=True)
        return {v: int(c) for v, c in zip(vals.tolist(), cnt, strict=True)}

    @property
    def one_class_reason(self) -> str | None:
        """Why this labeling cannot be learned from (one class on T), or None."""
        if len(self.classes) >= 2:
            return None
        return (
            f"labeler {self.labeler!r} labeled all {len(self.labels)} target rows {self.classes[0]!r}; "
            "retrainers cannot learn from one class, so its pairs are undetermined"
        )


@dataclass(frozen=True, eq=False)
class ReverseCell:
    """RT Fig. 3 steps 3–4: M[labeler, retrainer], the score on D of the retrainer fitted on T_labeler.

    Parameters
    ----------
    labeler : str
        Name of the learner whose labels of T the retrainer was fitted on (row i of M).
    retrainer : str
        Name of the learner fitted on the labeled T (column j of M).
    score : float
        M[i, j], the retrainer's score on D; NaN when undetermined.
    fitted : bool
        Whether a reverse fit was attempted (False for a one-class labeling); counted in ``n_fits``.
    reason : str or None, default None
        Why the cell is NaN (one-class labeling or the fit's ``ValueError``); None for a scored cell.
    """

    labeler: str
    retrainer: str
    score: float
    fitted: bool
    reason: str | None = None


def label_target(candidate: Candidate, X_source: Any, y_source: Any, X_target: Any) -> TargetLabels:
    """RT Fig. 3 steps 1–2: fit ``candidate`` on D = (X_source, y_source) and label T; returns ``TargetLabels``.

    Parameters
    ----------
    candidate : Candidate
        The labeler i; fitted on D with its source weights, if any.
    X_source : array-like or pandas.DataFrame
        Features of the labeled source set D.
    y_source : array-like
        Labels of D, one per row of ``X_source``.
    X_target : array-like or pandas.DataFrame
        Features of the unlabeled target set T.

    Returns
    -------
    TargetLabels
        The model's predictions on T, under the candidate's name.
    """
    model = fit_candidate(candidate, X_source, y_source, X_target=X_target)
    return TargetLabels(candidate.name, np.asarray(model.predict(X_target)))


def reverse_score(
    retrainer: Candidate,
    labels: TargetLabels,
    X_target: Any,
    X_source: Any,
    y_source: Any,
    scoring: str | Scorer = "accuracy",
) -> ReverseCell:
    """RT Fig. 3 steps 3–4: fit ``retrainer`` on (T, labels of the labeler), score on D; returns M[i, j].

    The reverse fit is unweighted (candidate weights belong to source rows) and is told the rows it
    will be scored on (``X_target=X_source`` for target-aware learners). A one-class labeling is not
    fitted; a ``ValueError`` from the fit is recorded as the reason, score NaN.

    Parameters
    ----------
    retrainer : Candidate
        The learner j fitted on the labeled T.
    labels : TargetLabels
        T labeled by the labeler i (from :func:`label_target`).
    X_target : array-like or pandas.DataFrame
        Features of the unlabeled target set T.
    X_source : array-like or pandas.DataFrame
        Features of the labeled source set D.
    y_source : array-like
        Labels of D, one per row of ``X_source``.
    scoring : str or callable, default "accuracy"
        ``"accuracy"``, ``"roc_auc"`` or a scorer callable such as ``BenefitScorer`` (amounts of the rows of D).

    Returns
    -------
    ReverseCell
        The cell M[i, j]: the score on D, or NaN with the reason.
    """
    reason = labels.one_class_reason
    if reason is not None:
        return ReverseCell(labels.labeler, retrainer.name, math.nan, False, reason)
    try:
        model = fit_candidate(retrainer, X_target, labels.labels, weighted=False, X_target=X_source)
    except ValueError as err:
        return ReverseCell(
            labels.labeler, retrainer.name, math.nan, True,
            f"retrainer {retrainer.name!r} could not fit T labeled by {labels.labeler!r} "
            f"(label counts {labels.counts}): {err}",
        )
    score = score_rows(get_scorer(scoring), model, X_source, y_source, None)
    return ReverseCell(labels.labeler, retrainer.name, float(score), True, None)


def pair_decision(M: pd.DataFrame, a: str, b: str, rule: Rule = "pair",
                  reasons: dict[tuple[str, str], str] | None = None) -> tuple[str | None, str, str | None]:
    """Decide a vs b from the matrix: (winner or None, condition label, reason when undetermined).

    ``rule="pair"``: RT Condition 4.1 (b wins), 4.2 (a wins), 4.3 (tie). ``rule="all"``: every retrainer
    must score T_winner above T_loser.

    Parameters
    ----------
    M : pandas.DataFrame
        The matrix M[labeler, retrainer] (learner names as index and columns).
    a : str
        One learner of the pair.
    b : str
        The other learner.
    rule : {"pair", "all"}, default "pair"
        The pairwise rule (see the module docstring).
    reasons : dict of (str, str) to str or None, default None
        Why a cell (labeler, retrainer) is NaN, used to explain an undetermined pair.

    Returns
    -------
    tuple of (str or None, str, str or None)
        The winner (None for a tie / undetermined pair); the condition label (``"4.1"``, ``"4.2"``, ``"4.3"``,
        ``"all"``, ``"tie"`` or ``"undetermined"``); the reason when no winner, else None.

    Raises
    ------
    ValueError
        An unknown ``rule`` (when the needed cells are all finite).
    """
    reasons = reasons or {}
    cols = [a, b] if rule == "pair" else list(M.columns)
    missing = [(i, j) for i in (a, b) for j in cols if not np.isfinite(M.at[i, j])]
    if missing:
        why = sorted({reasons.get(c, f"M[{c[0]}, {c[1]}] is missing") for c in missing})
        return None, "undetermined", "; ".join(why)
    if rule == "pair":
        if M.at[b, a] > M.at[a, a] and M.at[b, b] > M.at[a, b]:
            return b, "4.1", None
        if M.at[a, a] > M.at[b, a] and M.at[a, b] > M.at[b, b]:
            return a, "4.2", None
        return None, "4.3", (
            f"Condition 4.3: retrainer {a!r} scores T_{a} {M.at[a, a]:.4g} vs T_{b} {M.at[b, a]:.4g}, "
            f"retrainer {b!r} scores T_{a} {M.at[a, b]:.4g} vs T_{b} {M.at[b, b]:.4g}"
        )
    if rule != "all":
        raise ValueError(f"unknown rule {rule!r}; use 'pair' (RT Conditions 4.1-4.3) or 'all'")
    diff = M.loc[b, cols].to_numpy(float) - M.loc[a, cols].to_numpy(float)
    if np.all(diff > 0):
        return b, "all", None
    if np.all(diff < 0):
        return a, "all", None
    return None, "tie", f"retrainers disagree (T_{b} − T_{a} per retrainer: {np.round(diff, 4).tolist()})"


@dataclass(frozen=True, eq=False)
class ReverseTestingResult:
    """RT §4 result: the matrix M[labeler, retrainer], pairwise decisions and a Copeland ranking.

    Parameters
    ----------
    matrix : pandas.DataFrame
        M[labeler, retrainer]: the score on D of retrainer j fitted on T labeled by i; NaN when undetermined.
    pairs : pandas.DataFrame
        One row per learner pair, columns ``a``, ``b``, ``winner``, ``condition``, ``reason``.
    rule : str
        The pairwise rule used (``"pair"`` or ``"all"``).
    scoring : str
        The scorer's name (see :func:`~shiftlib.selection.scoring.scorer_name`).
    n_fits : int
        Labeler fits plus reverse fits attempted.
    label_counts : dict of str to dict
        Per labeler, how many rows of T it gave each class.
    reasons : dict of (str, str) to str
        Why each NaN cell (labeler, retrainer) is missing.
    """

    matrix: pd.DataFrame
    pairs: pd.DataFrame
    rule: str
    scoring: str
    n_fits: int
    label_counts: dict[str, dict[Any, int]]
    reasons: dict[tuple[str, str], str]

    @property
    def learners(self) -> list[str]:
        return list(self.matrix.index)

    def _pair_row(self, a: str, b: str) -> pd.Series:
        for n in (a, b):
            if n not in self.matrix.index:
                raise KeyError(f"{n!r} is not one of the compared learners {self.learners}")
        if a == b:
            raise ValueError("winner(a, b) needs two different learners")
        m = self.pairs[((self.pairs.a == a) & (self.pairs.b == b)) | ((self.pairs.a == b) & (self.pairs.b == a))]
        return m.iloc[0]

    def winner(self, a: str, b: str) -> str | None:
        """The learner expected to be more accurate on T, or None (tie / undetermined)."""
        w = self._pair_row(a, b)["winner"]
        return None if w is None or (isinstance(w, float) and math.isnan(w)) else str(w)

    def reason(self, a: str, b: str) -> str | None:
        """Why the pair is undetermined (None when decided)."""
        r = self._pair_row(a, b)["reason"]
        return None if r is None or (isinstance(r, float) and math.isnan(r)) else str(r)

    @property
    def wins(self) -> pd.Series:
        return self.pairs["winner"].dropna().value_counts().reindex(self.learners, fill_value=0).astype(int)

    @property
    def losses(self) -> pd.Series:
        lost = []
        for _, p in self.pairs.iterrows():
            if p["winner"] is not None and isinstance(p["winner"], str):
                lost.append(p["b"] if p["winner"] == p["a"] else p["a"])
        return pd.Series(lost, dtype=object).value_counts().reindex(self.learners, fill_value=0).astype(int)

    @property
    def copeland(self) -> pd.Series:
        """Copeland score per learner: pairwise wins − losses (undetermined pairs count 0)."""
        return (self.wins - self.losses).rename("copeland")

    @property
    def scores(self) -> pd.Series:
        """The score used for ranking (the Copeland score), higher is better."""
        return self.copeland.astype(float)

    @property
    def ranks(self) -> pd.Series:
        """1 = best; equal Copeland scores share the smallest rank."""
        return ranks_from_scores(self.scores)

    @property
    def ranking(self) -> list[tuple[str, ...]]:
        """Learners best first, in tiers of equal Copeland score (ties kept)."""
        return ranking_tiers(self.scores)

    @property
    def best(self) -> tuple[str, ...]:
        return self.ranking[0]

    def to_frame(self) -> pd.DataFrame:
        """Long table learner, selector ('rt'), score (Copeland), rank, interval_low/high (NaN)."""
        return pd.DataFrame({
            "learner": self.learners,
            "selector": "rt",
            "score": self.scores.to_numpy(float),
            "rank": self.ranks.to_numpy(int),
            "interval_low": np.nan,
            "interval_high": np.nan,
        })[SCORE_COLUMNS]

    def matrix_frame(self) -> pd.DataFrame:
        """Long form of M: labeler, retrainer, score, reason (one row per cell) — for Parquet."""
        rows = []
        for i in self.matrix.index:
            for j in self.matrix.columns:
                rows.append({"labeler": i, "retrainer": j, "score": float(self.matrix.at[i, j]),
                             "reason": self.reasons.get((i, j))})
        return pd.DataFrame(rows, columns=["labeler", "retrainer", "score", "reason"])

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable summary: matrix, pairs, Copeland scores, ranking, n_fits, rule, scoring."""
        def num(v: float) -> float | None:
            return None if not np.isfinite(v) else float(v)

        return {
            "selector": "rt",
            "rule": self.rule,
            "scoring": self.scoring,
            "n_fits": int(self.n_fits),
            "learners": self.learners,
            "matrix": {i: {j: num(self.matrix.at[i, j]) for j in self.matrix.columns} for i in self.matrix.index},
            "pairs": [
                {"a": p.a, "b": p.b, "winner": self.winner(p.a, p.b), "condition": p.condition,
                 "reason": self.reason(p.a, p.b)}
                for p in self.pairs.itertuples()
            ],
            "copeland": {k: int(v) for k, v in self.copeland.items()},
            "ranks": {k: int(v) for k, v in self.ranks.items()},
            "ranking": [list(t) for t in self.ranking],
            "label_counts": {k: {str(c): n for c, n in v.items()} for k, v in self.label_counts.items()},
        }


def combine(
    labels: Iterable[TargetLabels],
    cells: Iterable[ReverseCell],
    *,
    rule: Rule = "pair",
    scoring: str | Scorer = "accuracy",
) -> ReverseTestingResult:
    """RT Fig. 3 steps 5–7 for every pair: assemble M from the cells and decide each pair; returns the result.

    ``n_fits`` counts the ℓ labeler fits plus every reverse fit attempted.

    Parameters
    ----------
    labels : iterable of TargetLabels
        One labeling of T per learner (each labeler once); their order is the order of M's rows and columns.
    cells : iterable of ReverseCell
        The computed cells, each (labeler, retrainer) at most once; a missing cell stays NaN.
    rule : {"pair", "all"}, default "pair"
        The pairwise rule (see the module docstring).
    scoring : str or callable, default "accuracy"
        The scoring the cells were computed with; only its name is recorded.

    Returns
    -------
    ReverseTestingResult
        The matrix, pairwise decisions and Copeland ranking.

    Raises
    ------
    ValueError
        An unknown rule, a repeated labeler, or a cell that is repeated or names a learner without labels.
    """
    if rule not in ("pair", "all"):
        raise ValueError(f"unknown rule {rule!r}; use 'pair' (RT Conditions 4.1-4.3) or 'all'")
    labels = list(labels)
    cells = list(cells)
    names = [t.labeler for t in labels]
    if len(set(names)) != len(names):
        raise ValueError("each labeler must appear once in labels")
    M = pd.DataFrame(np.nan, index=pd.Index(names, name="labeler"), columns=pd.Index(names, name="retrainer"))
    reasons: dict[tuple[str, str], str] = {}
    seen = set()
    for c in cells:
        if c.labeler not in M.index or c.retrainer not in M.columns:
            raise ValueError(f"cell ({c.labeler!r}, {c.retrainer!r}) names a learner that labeled nothing")
        if (c.labeler, c.retrainer) in seen:
            raise ValueError(f"cell ({c.labeler!r}, {c.retrainer!r}) was given twice")
        seen.add((c.labeler, c.retrainer))
        M.at[c.labeler, c.retrainer] = c.score
        if c.reason is not None:
            reasons[(c.labeler, c.retrainer)] = c.reason
    for i in names:
        for j in names:
            if (i, j) not in seen:
                reasons[(i, j)] = f"M[{i}, {j}] was not computed"
    rows = []
    for a, b in combinations(names, 2):
        w, cond, why = pair_decision(M, a, b, rule, reasons)
        rows.append({"a": a, "b": b, "winner": w, "condition": cond, "reason": why})
    pairs = pd.DataFrame(rows, columns=["a", "b", "winner", "condition", "reason"]).astype(object)
    n_fits = len(labels) + sum(c.fitted for c in cells)
    return ReverseTestingResult(M, pairs, rule, scorer_name(scoring), int(n_fits),
                                {t.labeler: t.counts for t in labels}, reasons)


def reverse_testing(
    learners: Any,
    X_source: Any,
    y_source: Any,
    X_target: Any,
    *,
    rule: Rule = "pair",
    scoring: str | Scorer = "accuracy",
    random_state: int | None = None,
) -> ReverseTestingResult:
    """RT §4.2 / Fig. 3 for all pairs of ``learners`` with ℓ + ℓ² fits; returns a ``ReverseTestingResult``.

    ``learners``: dict name -> estimator / ``Candidate`` / registry name, or a list of registry names
    and Candidates. ``scoring``: ``"accuracy"``, ``"roc_auc"`` or a callable such as
    ``BenefitScorer`` (its amounts are those of the source rows D). ``random_state`` seeds learners
    built from registry names.

    Parameters
    ----------
    learners : dict, list, str, Candidate or estimator
        The candidates, in any form :func:`~shiftlib.selection.candidates.resolve_candidates` accepts.
    X_source : array-like or pandas.DataFrame
        Features of the labeled source set D.
    y_source : array-like
        Labels of D, one per row of ``X_source``.
    X_target : array-like or pandas.DataFrame
        Features of the unlabeled target set T.
    rule : {"pair", "all"}, default "pair"
        The pairwise rule (see the module docstring).
    scoring : str or callable, default "accuracy"
        ``"accuracy"``, ``"roc_auc"`` or a scorer callable such as ``BenefitScorer`` (amounts of the rows of D).
    random_state : int or None, default None
        Seed for learners built from registry names.

    Returns
    -------
    ReverseTestingResult
        The matrix, pairwise decisions and Copeland ranking.
    """
    X_source = check_X(X_source, "X_source")
    y_source = check_y(y_source, X_source, "y_source", "X_source")
    X_target = check_X(X_target, "X_target (the unlabeled target set T)", like=X_source)
    if rule not in ("pair", "all"):
        raise ValueError(f"unknown rule {rule!r}; use 'pair' (RT Conditions 4.1-4.3) or 'all'")
    get_scorer(scoring)
    cands = resolve_candidates(learners, random_state=random_state)
    labels, cells = [], []
    for c in cands:
        t, row = _row(c, cands, X_source, y_source, X_target, scoring)
        labels.append(t)
        cells += row
    return combine(labels, cells, rule=rule, scoring=scoring)


def _row(labeler: Candidate, cands: list[Candidate], X_source: Any, y_source: Any, X_target: Any,
         scoring: str | Scorer) -> tuple[TargetLabels, list[ReverseCell]]:
    t = label_target(labeler, X_source, y_source, X_target)
    return t, [reverse_score(j, t, X_target, X_source, y_source, scoring) for j in cands]


def reverse_testing_row(
    labeler: str,
    learners: Any,
    X_source: Any,
    y_source: Any,
    X_target: Any,
    *,
    scoring: str | Scorer = "accuracy",
    random_state: int | None = None,
) -> tuple[TargetLabels, list[ReverseCell]]:
    """One row of M (RT Fig. 3 steps 1–4 for labeler i): label T with i, then every retrainer j's cell M[i, j].

    1 + ℓ fits, independent of every other row, so a pipeline can fan the rows out;
    ``combine(all labels, all cells)`` then gives exactly :func:`reverse_testing`'s result.

    Parameters
    ----------
    labeler : str
        Name of the learner i whose row is computed; one of ``learners``.
    learners : dict, list, str, Candidate or estimator
        All candidates (the retrainers), in any form :func:`~shiftlib.selection.candidates.resolve_candidates`
        accepts.
    X_source : array-like or pandas.DataFrame
        Features of the labeled source set D.
    y_source : array-like
        Labels of D, one per row of ``X_source``.
    X_target : array-like or pandas.DataFrame
        Features of the unlabeled target set T.
    scoring : str or callable, default "accuracy"
        ``"accuracy"``, ``"roc_auc"`` or a scorer callable such as ``BenefitScorer`` (amounts of the rows of D).
    random_state : int or None, default None
        Seed for learners built from registry names.

    Returns
    -------
    tuple of (TargetLabels, list of ReverseCell)
        T labeled by i, and the cells M[i, j] for every learner j in input order.
    """
    X_source = check_X(X_source, "X_source")
    y_source = check_y(y_source, X_source, "y_source", "X_source")
    X_target = check_X(X_target, "X_target (the unlabeled target set T)", like=X_source)
    get_scorer(scoring)
    cands = resolve_candidates(learners, random_state=random_state)
    by_name = {c.name: c for c in cands}
    if labeler not in by_name:
        raise ValueError(f"labeler {labeler!r} is not one of the learners {sorted(by_name)}")
    return _row(by_name[labeler], cands, X_source, y_source, X_target, scoring)
