"""Pluggable scores for selection (higher is better): accuracy, ROC AUC, and RT §6 benefit matrices.

A scorer is called as ``scorer(estimator, X, y, sample_weight=None) -> float`` on a *fitted*
estimator — scikit-learn's scorer signature plus optional per-row weights (used by weighted CV).
``get_scorer`` resolves the strings ``"accuracy"`` and ``"roc_auc"`` (alias ``"auc"``); any callable
with that signature (e.g. a ``BenefitScorer``) is used as given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score

__all__ = ["BenefitScorer", "Scorer", "accuracy_scorer", "get_scorer", "roc_auc_scorer", "scorer_name"]

Scorer = Callable[..., float]


def accuracy_scorer(estimator: Any, X: Any, y: Any, sample_weight: Any = None) -> float:
    """Accuracy; with weights the importance-weighted form ``1 − (1/n) Σ w_i·1[ŷ_i ≠ y_i]``.

    The weighted form is the IW 0-1 loss of Sugiyama et al. (2007) / TrCV eq. 4 (not renormalised by
    Σw), so with weights of mean 1 on the scored rows it equals plain accuracy when all w are 1.

    Parameters
    ----------
    estimator : fitted estimator
        The model to score; it must have ``predict``.
    X : array-like or pandas.DataFrame
        Features of the scored rows.
    y : array-like
        True labels of the scored rows.
    sample_weight : array-like or None, default None
        Per-row weights (importance weights); None scores unweighted.

    Returns
    -------
    float
        The (weighted) accuracy.
    """
    wrong = np.asarray(estimator.predict(X)) != np.asarray(y)
    if sample_weight is None:
        return float(1.0 - wrong.mean())
    return float(1.0 - np.mean(np.asarray(sample_weight, dtype=float) * wrong))


def roc_auc_scorer(estimator: Any, X: Any, y: Any, sample_weight: Any = None) -> float:
    """Binary ROC AUC of ``predict_proba[:, 1]`` (positive class = ``estimator.classes_[1]``).

    Parameters
    ----------
    estimator : fitted estimator
        The model to score; it must have ``predict_proba`` and two ``classes_``.
    X : array-like or pandas.DataFrame
        Features of the scored rows.
    y : array-like
        True labels of the scored rows.
    sample_weight : array-like or None, default None
        Per-row weights passed to ``sklearn.metrics.roc_auc_score``; None scores unweighted.

    Returns
    -------
    float
        The ROC AUC.

    Raises
    ------
    ValueError
        The model or the scored rows do not have exactly the two classes.
    """
    y = np.asarray(y)
    classes = list(getattr(estimator, "classes_", []))
    present = np.unique(y)
    if len(classes) != 2 or len(present) != 2 or set(present) - set(classes):
        raise ValueError(
            f"roc_auc scoring needs a binary problem with both classes in the scored rows and in the model "
            f"(model classes {classes}, scored labels {present.tolist()}); use scoring='accuracy' instead"
        )
    p = estimator.predict_proba(X)[:, 1]
    return float(roc_auc_score(y == classes[1], p, sample_weight=sample_weight))


@dataclass(frozen=True, eq=False)
class BenefitScorer:
    """RT §6 benefit matrix: act iff p(pos|x)·amount(x) > cost; total benefit = Σ acted (amount − cost if pos else −cost).

    ``amounts`` are per row of the set being scored (in ReverseTesting that is D, the labeled source
    rows): the donation Y(x) for KDD'98 (cost 0.68), the transaction amount y(x) for fraud (cost 90).
    ``decision_amounts`` (default ``amounts``) are the amounts used in the decision rule, e.g. a
    regression's estimate of Y(x) when the realised donation is what ``amounts`` holds. Not acting is
    worth 0. With ``sample_weight`` each row's benefit is multiplied by its weight.

    Parameters
    ----------
    amounts : numpy.ndarray
        One finite amount per row of the scored set (the realised donation / transaction amount).
    cost : float
        The cost of acting on one row (finite).
    positive_label : Any, default 1
        The label of the positive class (donor / fraud).
    decision_amounts : numpy.ndarray or None, default None
        Amounts used in the decision rule, one per row; None uses ``amounts``.
    """

    amounts: np.ndarray
    cost: float
    positive_label: Any = 1
    decision_amounts: np.ndarray | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "amounts", np.asarray(self.amounts, dtype=float))
        if self.decision_amounts is not None:
            object.__setattr__(self, "decision_amounts", np.asarray(self.decision_amounts, dtype=float))
            if self.decision_amounts.shape != self.amounts.shape:
                raise ValueError("decision_amounts must have one value per row, like amounts")
        if self.amounts.ndim != 1 or not np.all(np.isfinite(self.amounts)):
            raise ValueError("benefit amounts must be a 1-D array of finite numbers, one per scored row")
        if not np.isfinite(self.cost):
            raise ValueError("benefit cost must be a finite number")

    @classmethod
    def donation(cls, amounts: Any, *, positive_label: Any = 1, decision_amounts: Any = None) -> BenefitScorer:
        """RT §6 KDD'98 donation matrix: Y(x) − $0.68 for a solicited donor, −$0.68 for a solicited non-donor."""
        return cls(amounts, 0.68, positive_label, decision_amounts)

    @classmethod
    def fraud(cls, amounts: Any, *, positive_label: Any = 1, overhead: float = 90.0) -> BenefitScorer:
        """RT §6 credit-card fraud matrix: y(x) − $90 for a flagged fraud, −$90 for a flagged legitimate one."""
        return cls(amounts, overhead, positive_label)

    def decisions(self, estimator: Any, X: Any) -> np.ndarray:
        """True where the rule acts: p(pos|x)·decision_amount(x) > cost (RT §6)."""
        classes = list(estimator.classes_)
        if self.positive_label not in classes:
            raise ValueError(
                f"positive label {self.positive_label!r} is not among the model's classes {classes}: "
                "set BenefitScorer(positive_label=...) to the label of donors / frauds"
            )
        p = estimator.predict_proba(X)[:, classes.index(self.positive_label)]
        amt = self.amounts if self.decision_amounts is None else self.decision_amounts
        return p * amt > self.cost

    def __call__(self, estimator: Any, X: Any, y: Any, sample_weight: Any = None) -> float:
        y = np.asarray(y)
        if len(y) != len(self.amounts):
            raise ValueError(
                f"benefit amounts have {len(self.amounts)} rows but the scored set has {len(y)}: pass the "
                "amounts of the set being scored (D, the labeled source rows, in ReverseTesting)"
            )
        act = self.decisions(estimator, X)
        per_row = np.where(act, np.where(y == self.positive_label, self.amounts - self.cost, -self.cost), 0.0)
        if sample_weight is not None:
            per_row = per_row * np.asarray(sample_weight, dtype=float)
        return float(per_row.sum())

    def subset(self, rows: np.ndarray) -> BenefitScorer:
        """The same matrix restricted to ``rows`` of the scored set (used by cross-validation folds)."""
        dec = None if self.decision_amounts is None else self.decision_amounts[rows]
        return BenefitScorer(self.amounts[rows], self.cost, self.positive_label, dec)


_NAMED: dict[str, Scorer] = {"accuracy": accuracy_scorer, "roc_auc": roc_auc_scorer, "auc": roc_auc_scorer}


def get_scorer(scoring: str | Scorer) -> Scorer:
    """Resolve ``scoring`` (``"accuracy"``, ``"roc_auc"``/``"auc"`` or a callable) to a scorer.

    Parameters
    ----------
    scoring : str or callable
        ``"accuracy"``, ``"roc_auc"``, ``"auc"``, or a callable ``scorer(estimator, X, y, sample_weight=None)``.

    Returns
    -------
    callable
        The named scorer, or ``scoring`` itself when it is callable.

    Raises
    ------
    ValueError
        An unknown scoring name.
    TypeError
        ``scoring`` is neither a string nor callable.
    """
    if isinstance(scoring, str):
        if scoring not in _NAMED:
            raise ValueError(f"unknown scoring {scoring!r}; use one of {sorted(_NAMED)} or a BenefitScorer/callable")
        return _NAMED[scoring]
    if not callable(scoring):
        raise TypeError("scoring must be 'accuracy', 'roc_auc', or a callable scorer(estimator, X, y)")
    return scoring


def scorer_name(scoring: str | Scorer) -> str:
    """A short label for reports: the string itself or the callable's class / function name.

    Parameters
    ----------
    scoring : str or callable
        A scoring name or scorer.

    Returns
    -------
    str
        The name (``"auc"`` becomes ``"roc_auc"``), ``benefit(cost=...)`` for a ``BenefitScorer``, else the
        callable's ``__name__`` or class name.
    """
    if isinstance(scoring, str):
        return "roc_auc" if scoring == "auc" else scoring
    if isinstance(scoring, BenefitScorer):
        return f"benefit(cost={scoring.cost:g})"
    return getattr(scoring, "__name__", type(scoring).__name__)


def score_rows(scorer: Scorer, estimator: Any, X: Any, y: Any, rows: np.ndarray | None,
               sample_weight: Any = None) -> float:
    """Score ``estimator`` on a subset of a scored set, restricting row-aligned scorers (benefit) too.

    Parameters
    ----------
    scorer : callable
        A scorer ``scorer(estimator, X, y, sample_weight=None)``.
    estimator : fitted estimator
        The model to score.
    X : array-like or pandas.DataFrame
        Features of the rows being scored (already restricted to ``rows``).
    y : array-like
        Labels of the rows being scored.
    rows : numpy.ndarray or None
        Positions of these rows in the full scored set, used to restrict a ``BenefitScorer``'s amounts; None
        for the full set.
    sample_weight : array-like or None, default None
        Per-row weights; passed to the scorer only when given.

    Returns
    -------
    float
        The score.
    """
    if rows is not None and isinstance(scorer, BenefitScorer):
        scorer = scorer.subset(rows)
    if sample_weight is None:
        return float(scorer(estimator, X, y))
    return float(scorer(estimator, X, y, sample_weight=sample_weight))
