"""Candidates for model selection: a name, an unfitted estimator and optional importance weights.

A *weighted candidate* such as ``"LR+kmm"`` is an unweighted learner fitted with importance weights on
the source rows: ``Candidate("LR+kmm", make_learner("LR"), sample_weight=w)``. The weights apply
whenever the candidate is fitted on source rows (RT's forward fit on D, CV training folds, TrCV's f_i;
a fold uses the weights of its own rows). Fits on *target* rows (RT's reverse step on T, TrCV's
reverse model f̄_i) are unweighted: the weights describe source rows only.

Every fit goes through ``shiftlib.learners.fit_learner`` on a fresh ``sklearn.base.clone`` of the
estimator, so candidates are never mutated and the fits are independent of each other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, clone

from shiftlib._validation import first_non_numeric
from shiftlib.learners import fit_learner, make_learner

from ._validation import check_row_weights, take

__all__ = ["Candidate", "CandidatesLike", "fit_candidate", "resolve_candidates"]


@dataclass(frozen=True, eq=False)
class Candidate:
    """One learner to select among: ``name``, an unfitted ``estimator`` and optional source-row weights.

    Parameters
    ----------
    name : str
        The learner's name (non-empty); it labels the learner in every result.
    estimator : sklearn.base.BaseEstimator
        An unfitted estimator with ``fit``; it is cloned for every fit, never fitted itself.
    sample_weight : numpy.ndarray or None, default None
        Importance weights, one per source row, applied whenever the candidate is fitted on source rows.
    registry : bool, default False
        True when built from a registry name (``"LR"``, …); such learners take numeric features only.
    """

    name: str
    estimator: BaseEstimator
    sample_weight: np.ndarray | None = None
    #: built from a registry name (``"LR"``, …): such learners take numeric features only
    registry: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("a Candidate needs a non-empty string name")
        if not hasattr(self.estimator, "fit"):
            raise TypeError(
                f"candidate {self.name!r}: estimator must be an unfitted scikit-learn estimator "
                f"(got {type(self.estimator).__name__})"
            )
        if self.sample_weight is not None:
            object.__setattr__(self, "sample_weight", np.asarray(self.sample_weight, dtype=float))

    def source_weights(self, n_source: int) -> np.ndarray | None:
        """The candidate's weights checked against the number of source rows (None when unweighted)."""
        if self.sample_weight is None:
            return None
        return check_row_weights(self.sample_weight, n_source, f"sample_weight of candidate {self.name!r}",
                                 "source rows")


#: What selectors accept as ``learners``.
CandidatesLike = Mapping[str, Any] | Sequence[Any]


def resolve_candidates(learners: Any, *, random_state: int | None = None) -> list[Candidate]:
    """Turn ``learners`` into a list of ``Candidate`` (input order kept, names unique).

    Accepts a dict ``name -> estimator | Candidate | registry name`` or a list of registry names
    (``"DT"``, ``"LR"``, ... see ``shiftlib.learners.LEARNERS``) and ``Candidate`` objects. Learners
    built from registry names get ``random_state``; given estimators keep their own.

    Parameters
    ----------
    learners : Mapping, sequence, str, Candidate or sklearn.base.BaseEstimator
        A dict ``name -> estimator | Candidate | registry name``, a list of registry names and ``Candidate``
        objects, or a single registry name, ``Candidate`` or estimator (named by its class).
    random_state : int or None, default None
        Seed given to learners built from registry names.

    Returns
    -------
    list of Candidate
        One candidate per learner, in input order.

    Raises
    ------
    TypeError
        ``learners`` (or a list item) is of a kind not accepted.
    ValueError
        No learners, repeated names, or a ``Candidate`` stored under a key other than its name.
    """
    out: list[Candidate] = []
    if isinstance(learners, BaseEstimator):  # one estimator, named by its class
        learners = {type(learners).__name__: learners}
    elif isinstance(learners, Candidate | str):
        learners = [learners]
    if isinstance(learners, Mapping):
        for key, value in learners.items():
            if isinstance(value, Candidate):
                if value.name != key:
                    raise ValueError(f"candidate named {value.name!r} is stored under key {key!r}: use one name")
                out.append(value)
            elif isinstance(value, str):
                out.append(Candidate(str(key), make_learner(value, random_state=random_state), registry=True))
            else:
                out.append(Candidate(str(key), value))
    elif isinstance(learners, Sequence):
        for value in learners:
            if isinstance(value, Candidate):
                out.append(value)
            elif isinstance(value, str):
                out.append(Candidate(value, make_learner(value, random_state=random_state), registry=True))
            else:
                raise TypeError(
                    "a list of learners may hold registry names or Candidate objects; pass a dict "
                    f"name -> estimator for plain estimators (got {type(value).__name__})"
                )
    else:
        raise TypeError(
            "learners must be a dict name -> estimator/Candidate/registry name, or a list of registry "
            f"names / Candidates (got {type(learners).__name__})"
        )
    if not out:
        raise ValueError("no learners given: pass at least one candidate")
    names = [c.name for c in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"candidate names must be unique; repeated: {dup}")
    return out


def fit_candidate(
    candidate: Candidate,
    X: Any,
    y: Any,
    *,
    rows: np.ndarray | None = None,
    weighted: bool = True,
    X_target: Any = None,
) -> BaseEstimator:
    """Fit a fresh clone of ``candidate.estimator`` through ``fit_learner``; returns the fitted clone.

    ``rows`` selects source rows (positions into X/y and into the candidate's weights); ``weighted``
    is False for fits on target rows. ``X_target`` is the set the model will be scored on / label.

    Parameters
    ----------
    candidate : Candidate
        The learner to fit.
    X : array-like or pandas.DataFrame
        Training features (all rows; ``rows`` picks the ones used).
    y : array-like
        Training labels, one per row of ``X``.
    rows : numpy.ndarray or None, default None
        Positions of the rows to fit on; None fits on all rows.
    weighted : bool, default True
        Whether to apply the candidate's ``sample_weight`` (restricted to ``rows``); False for target-row fits.
    X_target : array-like, pandas.DataFrame or None, default None
        Unlabeled rows passed on to learners that learn from the target (see ``shiftlib.learners.fit_learner``).

    Returns
    -------
    sklearn.base.BaseEstimator
        The fitted clone of ``candidate.estimator``.
    """
    if candidate.registry:
        _check_numeric(candidate.name, X)
    est = clone(candidate.estimator)
    w = None
    if weighted and candidate.sample_weight is not None:
        w = candidate.source_weights(len(X))
        if rows is not None:
            w = w[rows]
    if rows is not None:
        X, y = take(X, rows), np.asarray(y)[rows]
    return fit_learner(est, X, y, sample_weight=w, X_target=X_target)


def _check_numeric(name: str, X: Any) -> None:
    """A registry learner needs numeric features: a text, date or category column of a DataFrame raises a
    ``TypeError`` naming it (not caught as a per-learner fit failure: it is the input, not the learner)."""
    if isinstance(X, pd.DataFrame) and (col := first_non_numeric(X)) is not None:
        raise TypeError(
            f"column {col!r} is {X[col].dtype} (not numeric), and the registry learner {name!r} needs numbers: encode "
            "the tables first (shiftlib.preprocessor.prepare_tables(source, target, label) encodes both alike), "
            "or pass your own scikit-learn Pipeline that encodes them as the candidate")
