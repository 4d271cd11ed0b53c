"""The registered selectors as objects: settings in ``__init__``, one call ``selector(learners, X_source,
y_source, X_target)``, and the traits the pipeline reads to plan their work.

=========  ==============================  ==============================================================
name       class                           method
=========  ==============================  ==============================================================
``"rt"``   :class:`ReverseTestingSelector`  ReverseTesting (RT §4, Conditions 4.1–4.3)
``"trcv"`` :class:`TrCVSelector`            transfer cross-validation (TrCV Fig. 1/3, eq. 14–16)
``"scv"``  :class:`SourceCVSelector`        stratified k-fold CV on the source (RT §3 / TrCV §5.1 baseline)
``"wcv"``  :class:`WeightedCVSelector`      importance-weighted k-fold CV (TrCV §5.1 baseline)
=========  ==============================  ==============================================================

A selector follows scikit-learn's estimator convention: every setting is an ``__init__`` keyword stored under
its own name, so ``get_params()`` lists what it takes. The pipeline reads that list to bind the run's settings
(``random_state`` from the run's seed, ``k``, ``weights`` β, ``max_folds``): a selector is seeded when it has
``random_state``, and is handed β when it has ``weights``, whatever its name. The names live in
``shiftlib.catalog.SELECTION_METHODS``; ``shiftlib.selection.registry.SELECTORS`` is built from it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sklearn.base import BaseEstimator

from .baselines import source_cv, weighted_cv
from .results import SelectorScores
from .reverse_testing import ReverseTestingResult, reverse_testing
from .trcv import trcv_select

__all__ = ["FAN_OUTS", "BaseSelector", "ReverseTestingSelector", "SourceCVSelector", "TrCVSelector",
           "WeightedCVSelector"]

#: how the flow may split a selector's work into tasks: one per candidate (any selector whose score of a candidate
#: does not depend on the others: the task runs the selector on that candidate alone), one per row of
#: ReverseTesting's matrix, or one per TrCV fold (tasks that run those two methods with their default scoring)
FAN_OUTS = ("candidate", "rt_row", "trcv_fold")


class BaseSelector(BaseEstimator):
    """Base of every registered selector: call it as ``selector(learners, X_source, y_source, X_target)``.

    Subclasses take their settings as ``__init__`` keywords (scikit-learn's convention, so ``get_params``
    lists them) and implement :meth:`select`. The result is a :class:`SelectorScores` (ReverseTesting's adds
    its matrix) whose ``to_frame()`` names the selector as the registry does: the scores table's key.

    Attributes
    ----------
    every_row : bool
        Class attribute. True: the selector fits on every source row and bounds its work with ``max_folds``
        (source CV); False: the pipeline hands it the selection subsample (``selection_rows``).
    fan_out : str or None
        Class attribute. One of :data:`FAN_OUTS`, or None: the selection task runs it whole, in one task.
    """

    every_row: ClassVar[bool] = False
    fan_out: ClassVar[str | None] = None

    def select(self, learners: Any, X_source: Any, y_source: Any, X_target: Any) -> Any:
        """Score each learner for the target (higher is better).

        Parameters
        ----------
        learners : list of str, dict or list of Candidate
            The candidates, as ``shiftlib.selection.resolve_candidates`` reads them.
        X_source, y_source : array-like
            The labeled source rows.
        X_target : array-like
            The unlabeled target rows.

        Returns
        -------
        SelectorScores or ReverseTestingResult
            ``scores``, ``ranks``, ``ranking``, ``best``, ``to_frame()``, ``to_dict()``.
        """
        raise NotImplementedError

    def __call__(self, learners: Any, X_source: Any, y_source: Any, X_target: Any) -> Any:
        """Same as :meth:`select`."""
        return self.select(learners, X_source, y_source, X_target)


class ReverseTestingSelector(BaseSelector):
    """ReverseTesting (RT §4): each learner's labels of the target teach every learner; Conditions 4.1–4.3.

    Parameters
    ----------
    scoring : str or scorer, default="accuracy"
        ``"accuracy"``, ``"roc_auc"`` or a scorer such as ``BenefitScorer`` (RT §6).
    random_state : int or None
    """

    fan_out = "rt_row"

    def __init__(self, *, scoring: Any = "accuracy", random_state: int | None = None) -> None:
        self.scoring = scoring
        self.random_state = random_state

    def select(self, learners: Any, X_source: Any, y_source: Any, X_target: Any) -> ReverseTestingResult:
        """``reverse_testing`` with these settings."""
        return reverse_testing(learners, X_source, y_source, X_target, scoring=self.scoring,
                               random_state=self.random_state)


class TrCVSelector(BaseSelector):
    """Transfer cross-validation (TrCV Fig. 1/3): estimated target accuracy (eq. 14) with intervals (eq. 15).

    TrCV estimates accuracy only, so it takes no ``scoring``.

    Parameters
    ----------
    k : int, default=10
    weights : str, estimator or array-like, default="kmm"
        Importance weights β: a ``shiftlib.weights`` name, an estimator, or one weight per source row.
    random_state : int or None
    """

    fan_out = "trcv_fold"

    def __init__(self, *, k: int = 10, weights: Any = "kmm", random_state: int | None = None) -> None:
        self.k = k
        self.weights = weights
        self.random_state = random_state

    def select(self, learners: Any, X_source: Any, y_source: Any, X_target: Any) -> SelectorScores:
        """``trcv_select`` with these settings."""
        return trcv_select(learners, X_source, y_source, X_target, weights=self.weights, k=self.k,
                           random_state=self.random_state)


class SourceCVSelector(BaseSelector):
    """Stratified k-fold CV on the source (RT §3 / TrCV §5.1 baseline); ignores the target.

    Parameters
    ----------
    k : int, default=10
    scoring : str or scorer, default="accuracy"
    random_state : int or None
    max_folds : int or None
        Score only the first ``max_folds`` of the k folds (each fit still uses k−1 folds of every row).
    """

    every_row = True
    fan_out = "candidate"

    def __init__(self, *, k: int = 10, scoring: Any = "accuracy", random_state: int | None = None,
                 max_folds: int | None = None) -> None:
        self.k = k
        self.scoring = scoring
        self.random_state = random_state
        self.max_folds = max_folds

    def select(self, learners: Any, X_source: Any, y_source: Any, X_target: Any) -> SelectorScores:
        """``source_cv`` with these settings (``X_target`` is not used)."""
        return source_cv(learners, X_source, y_source, k=self.k, scoring=self.scoring,
                         random_state=self.random_state, max_folds=self.max_folds)


class WeightedCVSelector(BaseSelector):
    """Importance-weighted k-fold CV (TrCV §5.1 baseline): source folds scored with weights β.

    Parameters
    ----------
    k : int, default=10
    weights : str, estimator or array-like, default="kmm"
        Importance weights β: a ``shiftlib.weights`` name, an estimator, or one weight per source row.
    scoring : str or scorer, default="accuracy"
    random_state : int or None
    max_folds : int or None
        Score only the first ``max_folds`` of the k folds.
    """

    every_row = True
    fan_out = "candidate"

    def __init__(self, *, k: int = 10, weights: Any = "kmm", scoring: Any = "accuracy",
                 random_state: int | None = None, max_folds: int | None = None) -> None:
        self.k = k
        self.weights = weights
        self.scoring = scoring
        self.random_state = random_state
        self.max_folds = max_folds

    def select(self, learners: Any, X_source: Any, y_source: Any, X_target: Any) -> SelectorScores:
        """``weighted_cv`` with these settings."""
        return weighted_cv(learners, X_source, y_source, X_target, weights=self.weights, k=self.k,
                           scoring=self.scoring, random_state=self.random_state, max_folds=self.max_folds)
