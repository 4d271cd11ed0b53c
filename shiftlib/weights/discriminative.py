"""Discriminative importance weights (DL eq. 7) from a source-vs-target classifier.

``w(x) = p(σ=1)/p(σ=0) · (1/p(σ=1|x) − 1)`` where σ=1 marks a **source** (training) row and σ=0 a
target row. Since ``p(σ=1|x) = m·p_s(x) / (m·p_s(x) + m'·p_t(x))`` (DL eq. 3–6 with the row-count
priors), this equals ``p_t(x)/p_s(x)`` exactly: large where the target is dense relative to the source.

``p(σ=1|x)`` for the source rows is predicted **out of fold** (``cross_val_predict``, stratified,
shuffled with ``random_state``), so no row scores itself; the prior ratio ``p(σ=1)/p(σ=0)`` is the
row-count ratio m/m' (its ML estimate, DL Appendix A). ``predict_weights`` uses a copy of the
classifier refit on all rows, divided by the same constant as ``weights_``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from ._base import BaseWeighter

__all__ = ["DiscriminativeWeights", "default_domain_classifier", "domain_probabilities", "DomainProbabilities"]


def default_domain_classifier() -> Pipeline:
    """StandardScaler → LogisticRegression (DL §5's "two-stage LR" discriminator).

    Returns
    -------
    sklearn.pipeline.Pipeline
        An unfitted ``StandardScaler`` → ``LogisticRegression(max_iter=1000)`` pipeline.
    """
    return Pipeline([("scale", StandardScaler()), ("clf", LogisticRegression(max_iter=1000))])


@dataclass(frozen=True)
class DomainProbabilities:
    """Out-of-fold ``p(σ=1|x)`` (σ=1: source row) for both sets, plus the classifier refit on all rows.

    Parameters
    ----------
    source : numpy.ndarray
        Out-of-fold p(σ=1|x) on the source rows.
    target : numpy.ndarray
        Out-of-fold p(σ=1|x) on the target rows.
    classifier : BaseEstimator
        The classifier refit on all rows (classes ``[0, 1]``).
    auc : float
        Out-of-fold ROC AUC of source vs target.
    """

    source: np.ndarray
    target: np.ndarray
    classifier: BaseEstimator
    auc: float  # out-of-fold ROC AUC of source vs target


def _check_classifier(classifier: Any) -> BaseEstimator:
    est = default_domain_classifier() if classifier is None else clone(classifier)
    if not hasattr(est, "predict_proba"):
        raise TypeError(f"classifier {type(est).__name__} has no predict_proba; pass a probabilistic classifier")
    return est


def domain_probabilities(
    X_source: np.ndarray, X_target: np.ndarray, classifier: Any, *, cv: int, random_state: int
) -> DomainProbabilities:
    """Out-of-fold ``p(σ=1|x)`` of a source(σ=1)-vs-target(σ=0) classifier (DL eq. 7's discriminator).

    Parameters
    ----------
    X_source : numpy.ndarray of shape (m, d)
        Source rows (σ=1).
    X_target : numpy.ndarray of shape (m', d)
        Target rows (σ=0).
    classifier : estimator or None
        A classifier with ``predict_proba`` (cloned); None → :func:`default_domain_classifier`.
    cv : int
        Folds of the stratified, shuffled split (at least 2, and at most the rows of each set).
    random_state : int
        Seed of the fold shuffle.

    Returns
    -------
    DomainProbabilities
        The out-of-fold probabilities of both sets, the refit classifier and the out-of-fold AUC.

    Raises
    ------
    ValueError
        If ``cv < 2`` or a set has fewer than ``cv`` rows.
    TypeError
        If the classifier has no ``predict_proba``.
    """
    m, mt = X_source.shape[0], X_target.shape[0]
    if cv < 2:
        raise ValueError(f"cv must be at least 2 (out-of-fold probabilities); got {cv}")
    if min(m, mt) < cv:
        which = "source" if m < mt else "target"
        raise ValueError(f"{which} set has {min(m, mt)} rows; cv={cv} folds need at least {cv} rows in each set")
    est = _check_classifier(classifier)
    X = np.vstack([X_source, X_target])
    sigma = np.r_[np.ones(m, dtype=int), np.zeros(mt, dtype=int)]
    folds = StratifiedKFold(n_splits=cv, shuffle=True, random_state=random_state)
    proba = cross_val_predict(est, X, sigma, cv=folds, method="predict_proba")
    q = proba[:, 1]  # columns follow the sorted labels [0, 1]: column 1 is p(σ=1|x)
    refit = clone(est).fit(X, sigma)
    if list(refit.classes_) != [0, 1]:
        raise RuntimeError(f"domain classifier has classes {list(refit.classes_)}, expected [0, 1]")
    return DomainProbabilities(q[:m], q[m:], refit, float(roc_auc_score(sigma, q)))


#: ``clip="auto"``'s level where eq. 7 would otherwise give an infinite weight (the level the error of
#: ``clip=None`` suggests): weights are then bounded by (m/m')(1/AUTO_CLIP − 1) = 999·m/m'
AUTO_CLIP = 1e-3


def _clip(q: np.ndarray, clip: float | None) -> np.ndarray:
    if clip is None:
        return q
    return np.clip(q, clip, 1.0 - clip)


def check_clip(clip: float | str | None, *, allow_auto: bool = False) -> None:
    """Refuse a ``clip`` that is neither None nor in (0, 0.5) (nor ``"auto"``, when ``allow_auto``).

    Parameters
    ----------
    clip : float, "auto" or None
        The clipping level of p(σ=1|x) (or p(s=1|x)) to ``[clip, 1 − clip]``.
    allow_auto : bool, default False
        Whether ``"auto"`` is accepted (``DiscriminativeWeights``).

    Raises
    ------
    ValueError
        If ``clip`` is none of these.
    """
    if clip is None or (allow_auto and isinstance(clip, str) and clip == "auto"):
        return
    if isinstance(clip, str) or not 0.0 < clip < 0.5:
        allowed = "None, 'auto'" if allow_auto else "None"
        raise ValueError(f"clip must be {allowed} or in (0, 0.5); got {clip!r}")


class DiscriminativeWeights(BaseWeighter):
    """Importance weights from a source-vs-target classifier (DL eq. 7), out-of-fold.

    Learned: the attributes below plus those of :class:`~shiftlib.weights.BaseWeighter`.

    Parameters
    ----------
    classifier : estimator, optional
        Any scikit-learn classifier with ``predict_proba``; None → StandardScaler + LogisticRegression.
    cv : int, default 5
        Folds for the out-of-fold probabilities.
    clip : float, "auto" or None, default "auto"
        Clip p(σ=1|x) to [clip, 1 − clip] before eq. 7, bounding weights by (m/m')(1/clip − 1). None: never (a
        row the classifier puts at p = 0, e.g. an outlying value a linear classifier extrapolates to
        certainty, is refused: its weight would be infinite). ``"auto"``: no clipping, unless some p is 0;
        then p is clipped at :data:`AUTO_CLIP` for those probabilities, with a warning (``clip_`` says which
        level the fit used), so one outlying row does not stop a run.
    random_state : int, default 0
        Fold shuffling seed.

    Attributes
    ----------
    proba_source_ : ndarray
        Out-of-fold p(σ=1|x) on the source rows.
    prior_ratio_ : float
        m/m'.
    domain_auc_ : float
        Out-of-fold AUC of the discriminator: 0.5 means no detectable shift.
    classifier_ : estimator
        The discriminator refit on all rows.
    clip_ : float or None
        The clip level the fit's weights used (``clip="auto"``: None unless some p was 0).
    """

    _min_rows = 2

    def __init__(
        self, classifier: Any = None, *, cv: int = 5, clip: float | str | None = "auto", random_state: int = 0
    ) -> None:
        self.classifier = classifier
        self.cv = cv
        self.clip = clip
        self.random_state = random_state

    def _fit_raw(self, X_source: np.ndarray, X_target: np.ndarray, **fit_params: Any) -> np.ndarray:
        if fit_params:
            raise TypeError(f"DiscriminativeWeights.fit takes no extra arguments; got {sorted(fit_params)}")
        check_clip(self.clip, allow_auto=True)
        dp = domain_probabilities(X_source, X_target, self.classifier, cv=self.cv, random_state=self.random_state)
        self.classifier_ = dp.classifier
        self.domain_auc_ = dp.auc
        self.proba_source_ = dp.source
        self.prior_ratio_ = X_source.shape[0] / X_target.shape[0]
        w, self.clip_ = self._eq7_clipped(dp.source)
        return w

    def _eq7(self, q: np.ndarray) -> np.ndarray:
        return self._eq7_clipped(q)[0]

    def _eq7_clipped(self, q: np.ndarray) -> tuple[np.ndarray, float | None]:
        """Eq. 7's weights and the clip level used (``clip="auto"``: :data:`AUTO_CLIP` only where some p is 0)."""
        clip = self.clip
        if isinstance(clip, str):  # "auto"
            n_zero = int(np.sum(q <= 0))
            clip = AUTO_CLIP if n_zero else None
            if n_zero:
                warnings.warn(f"the domain classifier gave p(source|x) = 0 for {n_zero} rows (beyond its reach: DL "
                              f"eq. 7 would give an infinite weight); p clipped to [{AUTO_CLIP}, {1 - AUTO_CLIP}], "
                              f"so no weight exceeds {1 / AUTO_CLIP - 1:.0f}·m/m'. Source and target barely "
                              "overlap there", UserWarning, stacklevel=3)
        q = _clip(q, clip)
        if np.any(q <= 0):
            raise ValueError(
                f"the classifier gave p(source|x) = 0 for {int((q <= 0).sum())} source rows, so DL eq. 7 "
                "gives an infinite weight; set clip (e.g. clip=1e-3) or use a smoother classifier"
            )
        return self.prior_ratio_ * (1.0 / q - 1.0), clip

    def _predict_raw(self, X: np.ndarray) -> np.ndarray:
        return self._eq7(self.classifier_.predict_proba(X)[:, 1])
