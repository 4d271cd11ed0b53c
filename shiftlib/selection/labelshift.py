"""Source CV corrected for a change of the class prior: a better prior for few-label selection.

Under a strong change of the class prior (credit: 18 % → 40 % bad; churn: 43 % → 7 %), plain source CV
ranks the candidates by their accuracy at the *source* mix of classes, while on the target each
candidate's accuracy is ``Σ_c π_T(c) · recall_c`` with the *target* mix π_T. A candidate good on the
minority class then gains or loses its place. Two steps, both from the label-shift literature:

1. **Estimate π_T without labels** by black-box shift estimation (BBSE; Lipton, Wang & Smola, "Detecting
   and Correcting for Label Shift with Black Box Predictors", ICML 2018, eq. 3 / Prop. 2): for a
   classifier f, ``μ_T(ŷ) = Σ_y P_S(ŷ | y) π_T(y)`` whenever P(x | y) is unchanged, so π_T solves
   ``C π = μ`` with C the column-conditional confusion matrix from out-of-fold source predictions and μ
   the share of each predicted class on the target batch. Every candidate gives one such system; we stack
   them (one least-squares problem over all candidates, ``scipy.optimize.lsq_linear`` with 0 ≤ π ≤ 1,
   then renormalised) so no single weak confusion matrix decides.
2. **Re-weight each CV fold by class** (Saerens, Latinne & Decaestecker, "Adjusting the Outputs of a
   Classifier to New a Priori Probabilities", Neural Computation 2002: the prior-shift correction):
   fold score ``θ_fj = Σ_c π_T(c) · recall_fjc``, i.e. importance-weighted CV with weights
   ``w(y) = π_T(y) / π_S(y)`` that depend on the label only.

The fold scores keep the paired-fold structure of ``source_cv`` (same stratified splits for the same
``random_state``), so ``fewlabel_select`` takes this result as its prior with its own fold covariance and
the learned shift term τ² (the prior's weight is still set by the data). Where P(x | y) changes too
(feature bias), BBSE is only an approximation; the shift term τ² and the guard's test are what protect
the decision then. The variance of π̂_T itself is not propagated into the fold covariance (it moves all
folds together; the τ² term absorbs what it adds to the contrasts' error).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import lsq_linear
from sklearn.model_selection import StratifiedKFold

from ._validation import check_X, check_y, take
from .baselines import _check_k
from .candidates import fit_candidate, resolve_candidates
from .results import SelectorScores

__all__ = ["bbse_class_prior", "label_shift_cv"]


def bbse_class_prior(confusions: Any, target_shares: Any) -> np.ndarray:
    """Target class prior π_T from stacked BBSE systems (Lipton et al. 2018, eq. 3): minimise
    ``Σ_j ‖C_j π − μ_j‖²`` over 0 ≤ π ≤ 1, then renormalise to sum 1; returns π_T (K,).

    ``confusions``: (m, K, K) with ``C_j[a, c] = P_S(ŷ_j = a | y = c)`` (columns sum to 1);
    ``target_shares``: (m, K) with ``μ_j[a]`` = share of target rows candidate j predicts as class a.
    """
    C = np.asarray(confusions, float)
    mu = np.asarray(target_shares, float)
    if C.ndim == 2:
        C, mu = C[None], np.atleast_2d(mu)
    if C.ndim != 3 or C.shape[1] != C.shape[2] or mu.shape != C.shape[:2]:
        raise ValueError(f"confusions must be (m, K, K) and target_shares (m, K); got {C.shape} and {mu.shape}")
    if not (np.all(np.isfinite(C)) and np.all(np.isfinite(mu))):
        raise ValueError("confusions and target_shares must be finite")
    K = C.shape[1]
    res = lsq_linear(C.reshape(-1, K), mu.reshape(-1), bounds=(0.0, 1.0))
    pi = np.clip(res.x, 0.0, None)
    if pi.sum() <= 0:
        raise ValueError("BBSE found no positive class prior: the candidates' confusion matrices cannot "
                         "explain the target's predicted classes; use plain source CV as the prior")
    return pi / pi.sum()


def label_shift_cv(
    learners: Any,
    X_source: Any,
    y_source: Any,
    X_target: Any,
    *,
    k: int = 10,
    random_state: int | None = None,
    target_predictions: Any = None,
    class_prior: Any = None,
) -> SelectorScores:
    """Stratified k-fold source CV with each fold's accuracy re-weighted to the BBSE estimate of the
    target class prior (module docstring); returns ``SelectorScores`` (selector ``"cv_ls"``).

    ``target_predictions``: (N, ℓ) each candidate's class on every target row from its fit on all source
    rows (``TargetPredictions.predictions``), to avoid refitting; otherwise they are fitted here.
    ``class_prior``: the target's class shares, one per class in sorted order, when they are known (then
    BBSE is skipped); they must be non-negative and sum to 1.
    ``details``: ``fold_scores`` (paired over the same splits as ``source_cv``), ``target_prior`` and
    ``source_prior`` per class, ``plain_fold_scores`` (unweighted fold accuracies: ``source_cv``'s).
    """
    X = check_X(X_source, "X_source")
    y = check_y(y_source, X, "y_source", "X_source")
    X_t = check_X(X_target, "X_target", like=X)
    _check_k(k, y, "the source set")
    cands = resolve_candidates(learners, random_state=random_state)
    classes = np.unique(y)
    K = len(classes)
    splits = list(StratifiedKFold(n_splits=k, shuffle=True, random_state=random_state).split(np.zeros(len(y)), y))
    oof = np.empty((len(y), len(cands)), dtype=y.dtype)
    for j, c in enumerate(cands):
        for train, test in splits:
            X_test = take(X, test)
            oof[test, j] = fit_candidate(c, X, y, rows=train, X_target=X_test).predict(X_test)
    if target_predictions is None:
        tpred = np.column_stack([fit_candidate(c, X, y, X_target=X_t).predict(X_t) for c in cands])
    else:
        tpred = np.asarray(target_predictions)
        if tpred.shape != (len(X_t), len(cands)):
            raise ValueError(f"target_predictions has shape {tpred.shape}; expected (rows of X_target, "
                             f"candidates) = {(len(X_t), len(cands))}")
    yi = np.searchsorted(classes, y)
    conf = np.zeros((len(cands), K, K))
    shares = np.zeros((len(cands), K))
    for j in range(len(cands)):
        pred_i = np.searchsorted(classes, oof[:, j])
        np.add.at(conf[j], (np.clip(pred_i, 0, K - 1), yi), 1.0)
        conf[j] /= conf[j].sum(axis=0, keepdims=True)
        shares[j] = np.bincount(np.clip(np.searchsorted(classes, tpred[:, j]), 0, K - 1), minlength=K) / len(tpred)
    if class_prior is None:
        pi_t = bbse_class_prior(conf, shares)
    else:
        pi_t = np.asarray(class_prior, float)
        if pi_t.shape != (K,) or np.any(pi_t < 0) or not np.isclose(pi_t.sum(), 1.0):
            raise ValueError(f"class_prior must be {K} non-negative shares summing to 1 (classes "
                             f"{classes.tolist()}); got {np.asarray(class_prior).tolist()}")
    pi_s = np.bincount(yi, minlength=K) / len(y)
    right = oof == y[:, None]
    pooled = np.vstack([right[yi == c].mean(axis=0) for c in range(K)])  # (K, ℓ) recall over all folds
    folds: dict[str, np.ndarray] = {}
    plain: dict[str, np.ndarray] = {}
    for j, c in enumerate(cands):
        fs, ps = [], []
        for _, test in splits:
            rec = [right[test[yi[test] == cl], j].mean() if np.any(yi[test] == cl) else pooled[cl, j]
                   for cl in range(K)]
            fs.append(float(np.dot(pi_t, rec)))
            ps.append(float(right[test, j].mean()))
        folds[c.name], plain[c.name] = np.asarray(fs), np.asarray(ps)
    scores = pd.Series({n: float(v.mean()) for n, v in folds.items()}, dtype=float)
    details = {"fold_scores": folds, "plain_fold_scores": plain,
               "target_prior": pd.Series(pi_t, index=classes), "source_prior": pd.Series(pi_s, index=classes),
               "params": {"k": k, "random_state": random_state, "prior_estimate": "bbse" if class_prior is None else "given"}}
    return SelectorScores("cv_ls", scores, len(cands) * (k + (target_predictions is None)), None, details)
