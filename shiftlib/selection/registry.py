"""The selectors by name: ``SELECTORS`` and ``make_selector``, beside ``LEARNERS`` and ``WEIGHTERS``.

=========  ==============================================================  ==============
name       selector                                                        uses weights
=========  ==============================================================  ==============
``"rt"``   ReverseTesting (RT §4, Conditions 4.1–4.3)                      no
``"trcv"`` transfer cross-validation (TrCV Fig. 1/3, eq. 14–16)            yes (KMM)
``"scv"``  stratified k-fold CV on the source (RT §3 / TrCV §5.1 baseline)  no
``"wcv"``  importance-weighted k-fold CV (TrCV §5.1 baseline)              yes (KMM)
=========  ==============================================================  ==============

Every selector is called the same way, ``selector(learners, X_source, y_source, X_target)``, and returns a
:class:`~shiftlib.selection.SelectorScores` result; ``make_selector`` binds the settings (folds,
weights, seed, scoring) that the individual functions take under their own names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shiftlib.errors import UnknownNameError

from .baselines import source_cv, weighted_cv
from .reverse_testing import reverse_testing
from .trcv import trcv_select

__all__ = ["SELECTORS", "Selector", "make_selector"]


@dataclass(frozen=True)
class Selector:
    """A selector with its settings bound; call it as ``selector(learners, X_source, y_source, X_target)``.

    Attributes
    ----------
    name : str
        Registry name (a key of :data:`SELECTORS`).
    k : int
        Folds (TrCV, SCV, WCV; ReverseTesting has none).
    weights : Any
        Importance weights for TrCV and WCV: a ``shiftlib.weights`` name, an estimator, or one weight per
        source row.
    scoring : Any
        ``"accuracy"``, ``"roc_auc"`` or a scorer such as ``BenefitScorer``.
    random_state : int or None
    """

    name: str
    k: int = 10
    weights: Any = "kmm"
    scoring: Any = "accuracy"
    random_state: int | None = None

    def __call__(self, learners: Any, X_source: Any, y_source: Any, X_target: Any) -> Any:
        """Score ``learners`` for the target; returns the selector's result (``SelectorScores``)."""
        return SELECTORS[self.name](self, learners, X_source, y_source, X_target)


def _rt(s: Selector, learners: Any, X_s: Any, y_s: Any, X_t: Any) -> Any:
    return reverse_testing(learners, X_s, y_s, X_t, scoring=s.scoring, random_state=s.random_state)


def _trcv(s: Selector, learners: Any, X_s: Any, y_s: Any, X_t: Any) -> Any:
    if s.scoring != "accuracy":
        raise ValueError(f"TrCV estimates accuracy (TrCV eq. 14); scoring={s.scoring!r} is not available for it")
    return trcv_select(learners, X_s, y_s, X_t, weights=s.weights, k=s.k, random_state=s.random_state)


def _scv(s: Selector, learners: Any, X_s: Any, y_s: Any, X_t: Any) -> Any:
    return source_cv(learners, X_s, y_s, k=s.k, scoring=s.scoring, random_state=s.random_state)


def _wcv(s: Selector, learners: Any, X_s: Any, y_s: Any, X_t: Any) -> Any:
    return weighted_cv(learners, X_s, y_s, X_t, weights=s.weights, k=s.k, scoring=s.scoring,
                       random_state=s.random_state)


#: registry name → runner ``(settings, learners, X_source, y_source, X_target) -> result``
SELECTORS: dict[str, Callable[[Selector, Any, Any, Any, Any], Any]] = {
    "rt": _rt,
    "trcv": _trcv,
    "scv": _scv,
    "wcv": _wcv,
}


def make_selector(name: str, **params: Any) -> Selector:
    """Build a selector by registry name (see :data:`SELECTORS`), e.g. ``make_selector("trcv", k=5)``.

    Parameters
    ----------
    name : str
    **params
        ``k``, ``weights``, ``scoring``, ``random_state`` (:class:`Selector`).

    Returns
    -------
    Selector
    """
    if name not in SELECTORS:
        raise UnknownNameError(f"unknown selector {name!r}; choose one of {sorted(SELECTORS)}")
    return Selector(name, **params)
