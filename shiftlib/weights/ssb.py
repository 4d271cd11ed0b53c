"""Sample-selection-bias weights ``p(s=1|x)⁻¹``, normalized (DL Prop. 2; DL §5 "two-stage LR for SSB").

Model (DL eq. 1): population rows x ~ p(x); a selector s keeps a row in the labeled source with
probability p(s=1|x), so ``p_source(x) ∝ p(x)·p(s=1|x)`` and weighting source rows by ``1/p(s=1|x)``
recovers the population (Prop. 2). Two ways to get ``p(s=1|x)``:

* ``fit(..., selection_proba=p)`` — given per source row (known or separately modelled).
* a classifier, fitted out of fold on the source rows (s=1) vs ``X_target`` (treated as s=0).
  What that classifier's ``q(x) = p(σ=1|x)`` means depends on which rows the user holds as target
  (``target_rows=``):

  - ``"population"`` (default; the flow's case: target = a fresh sample of the population, whose s is
    unknown, DL §2 "treated as s=0"). Then ``q = m·p_s / (m·p_s + m'·p)`` and ``1/q = 1 + (m'/m)·w(x)``
    with ``w = p/p_s`` the true ratio, so the normalized SSB weights are the mixture
    ``λ + (1 − λ)·w`` (w of mean 1 on the source), ``λ = m/(m + m')``: the DL §5 baseline, shrunk towards
    uniform when the target sample is small. The consistent estimate of ``w`` itself is
    :class:`~shiftlib.weights.DiscriminativeWeights` (eq. 7) on the same data.
  - ``"unselected"``: target = the rows of the same pool that were *not* selected (s=0 observed, e.g.
    rejected applicants). Then the classifier learns p(s=1|x) itself (its prior is the pool's selection
    rate) and ``1/q`` is Prop. 2 exactly. The rows to resemble are then the whole pool, so the MMD
    diagnostics compare the weighted source with source ∪ target.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from shiftlib._validation import check_probabilities

from ._base import BaseWeighter, WeightsUnavailableError
from .discriminative import _clip, check_clip, domain_probabilities

__all__ = ["SSBWeights"]

TargetRows = Literal["population", "unselected"]


class SSBWeights(BaseWeighter):
    """Inverse-selection-probability weights ``1/p(s=1|x)``, normalized (DL Prop. 2).

    ``fit(X_source, X_target, selection_proba=None)``.
    Learned: the attributes below plus those of :class:`~shiftlib.weights.BaseWeighter`.

    Parameters
    ----------
    classifier : estimator, optional
        None → StandardScaler + LogisticRegression; ignored when ``selection_proba`` is passed to ``fit``.
    target_rows : {"population", "unselected"}, default "population"
        What the target rows are; see the module docstring.
    cv : int, default 5
        Folds for out-of-fold probabilities.
    clip : float, optional
        None, or clip p(s=1|x) to [clip, 1 − clip].
    random_state : int, default 0
        Fold shuffling seed.

    Attributes
    ----------
    selection_proba_ : ndarray
        p(s=1|x) used, per source row.
    mode_ : {"given", "classifier"}
        Where ``selection_proba_`` came from.
    classifier_, domain_auc_ : estimator, float
        The refit classifier and its out-of-fold AUC (classifier mode).
    """

    _min_rows = 2

    def __init__(
        self,
        classifier: Any = None,
        *,
        target_rows: TargetRows = "population",
        cv: int = 5,
        clip: float | None = None,
        random_state: int = 0,
    ) -> None:
        self.classifier = classifier
        self.target_rows = target_rows
        self.cv = cv
        self.clip = clip
        self.random_state = random_state

    def _fit_raw(
        self, X_source: np.ndarray, X_target: np.ndarray, selection_proba: Any = None, **fit_params: Any
    ) -> np.ndarray:
        if fit_params:
            raise TypeError(f"SSBWeights.fit takes only selection_proba; got {sorted(fit_params)}")
        if self.target_rows not in ("population", "unselected"):
            raise ValueError(f"target_rows must be 'population' or 'unselected'; got {self.target_rows!r}")
        check_clip(self.clip)
        if selection_proba is not None:
            p = _clip(check_probabilities(selection_proba, "selection_proba", n_rows=X_source.shape[0], rows="source row", positive=True), self.clip)
            self.mode_ = "given"
            for attr in ("classifier_", "domain_auc_"):
                if hasattr(self, attr):
                    delattr(self, attr)
        else:
            dp = domain_probabilities(X_source, X_target, self.classifier, cv=self.cv, random_state=self.random_state)
            p = self._checked(_clip(dp.source, self.clip))
            self.mode_ = "classifier"
            self.classifier_ = dp.classifier
            self.domain_auc_ = dp.auc
        self.selection_proba_ = p
        return 1.0 / p

    @staticmethod
    def _checked(q: np.ndarray) -> np.ndarray:
        if np.any(q <= 0):
            raise ValueError(
                f"the classifier gave p(s=1|x) = 0 for {int((q <= 0).sum())} selected rows, so the weight "
                "1/p(s=1|x) is infinite; set clip (e.g. clip=1e-3) or use a smoother classifier"
            )
        return q

    def _predict_raw(self, X: np.ndarray) -> np.ndarray:
        if self.mode_ != "classifier":
            raise WeightsUnavailableError(
                "SSBWeights was fitted from given selection probabilities, which exist only for the "
                "source rows; fit without selection_proba (classifier mode) to weight new points"
            )
        return 1.0 / self._checked(_clip(self.classifier_.predict_proba(X)[:, 1], self.clip))

    def _diagnostic_target(self, X_source: np.ndarray, X_target: np.ndarray) -> np.ndarray:
        if self.target_rows == "unselected":
            return np.vstack([X_source, X_target])
        return X_target
