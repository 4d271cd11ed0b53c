"""Source CV corrected for a change of the class prior: a candidate prior for few-label selection.

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

``labeled_class_prior`` estimates the class shares from a label plan's rows instead (Horvitz–Thompson,
no assumption on P(x | y)), and ``with_class_prior`` re-weights a ``label_shift_cv`` result to them without
refitting. ``reports/label_budget.md`` tests both as the guard's prior under rules fixed in advance. Neither
replaced plain source CV in the deciding rule.
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

__all__ = ["bbse_class_prior", "label_shift_cv", "labeled_class_prior", "with_class_prior"]


def bbse_class_prior(confusions: Any, target_shares: Any) -> np.ndarray:
    """Target class prior π_T from stacked BBSE systems (Lipton et al. 2018, eq. 3): minimise
    ``Σ_j ‖C_j π − μ_j‖²`` over 0 ≤ π ≤ 1, then renormalise to sum 1; returns π_T (K,).

    ``confusions``: (m, K, K) with ``C_j[a, c] = P_S(ŷ_j = a | y = c)`` (columns sum to 1);
    ``target_shares``: (m, K) with ``μ_j[a]`` = share of target rows candidate j predicts as class a.

    Parameters
    ----------
    confusions : array-like
        The m confusion matrices, shape (m, K, K); a single (K, K) matrix is taken as m = 1.
    target_shares : array-like
        The m predicted-class shares on the target, shape (m, K) (or (K,) with a single matrix).

    Returns
    -------
    numpy.ndarray
        π_T, one non-negative share per class, summing to 1.

    Raises
    ------
    ValueError
        Wrong shapes, non-finite entries, or a solution that is zero for every class.
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

    Parameters
    ----------
    learners : dict, list, str, Candidate or estimator
        The candidates, in any form :func:`~shiftlib.selection.candidates.resolve_candidates` accepts.
    X_source : array-like or pandas.DataFrame
        Labeled source features.
    y_source : array-like
        Source labels, one per row of ``X_source``.
    X_target : array-like or pandas.DataFrame
        The unlabeled target batch.
    k : int, default 10
        Number of stratified folds.
    random_state : int or None, default None
        Seed for the fold split and for learners built from registry names.
    target_predictions : array-like or None, default None
        (N, ℓ) predicted class of each candidate on each target row; None fits each candidate on all source rows.
    class_prior : array-like or None, default None
        Known target class shares (sorted class order); None estimates them by BBSE.

    Returns
    -------
    SelectorScores
        Selector ``"cv_ls"``: each candidate's mean prior-weighted fold accuracy, with the per-fold recalls
        (``details["fold_recalls"]``) and the items listed above in ``details``.
    """
    X = check_X(X_source, "X_source")
    y = check_y(y_source, X, "y_source", "X_source")
    X_t = check_X(X_target, "X_target", like=X)
    _check_k(k, y, "the source set")
    cands = resolve_candidates(learners, random_state=random_state)
    classes = np.unique(y)
    K = len(classes)
    splits = list(StratifiedKFold(n_splits=k, shuffle=True, random_state=random_state).split(np.zeros(len(y)), y))
    oof = _oof_predictions(cands, X, y, splits)
    tpred = _target_class_predictions(cands, X, y, X_t, target_predictions)
    yi = np.searchsorted(classes, y)
    conf, shares = _confusions_and_shares(classes, yi, oof, tpred)
    if class_prior is None:
        pi_t = bbse_class_prior(conf, shares)
    else:
        pi_t = _given_class_prior(class_prior, classes)
    pi_s = np.bincount(yi, minlength=K) / len(y)
    folds, plain, recalls = _prior_weighted_folds(cands, oof == y[:, None], yi, K, splits, pi_t)
    scores = pd.Series({n: float(v.mean()) for n, v in folds.items()}, dtype=float)
    details = {"fold_scores": folds, "plain_fold_scores": plain, "fold_recalls": recalls,
               "target_prior": pd.Series(pi_t, index=classes), "source_prior": pd.Series(pi_s, index=classes),
               "params": {"k": k, "random_state": random_state, "prior_estimate": "bbse" if class_prior is None else "given"}}
    return SelectorScores("cv_ls", scores, len(cands) * (k + (target_predictions is None)), None, details)


def _oof_predictions(cands: list[Any], X: Any, y: np.ndarray, splits: list[tuple[np.ndarray, np.ndarray]]
                     ) -> np.ndarray:
    """(n, ℓ) out-of-fold class of each candidate on each source row, the input of its confusion matrix."""
    oof = np.empty((len(y), len(cands)), dtype=y.dtype)
    for j, c in enumerate(cands):
        for train, test in splits:
            X_test = take(X, test)
            oof[test, j] = fit_candidate(c, X, y, rows=train, X_target=X_test).predict(X_test)
    return oof


def _target_class_predictions(cands: list[Any], X: Any, y: np.ndarray, X_t: Any, target_predictions: Any
                              ) -> np.ndarray:
    """(N, ℓ) each candidate's class on each target row: given (shape checked) or fitted on all rows."""
    if target_predictions is None:
        return np.column_stack([fit_candidate(c, X, y, X_target=X_t).predict(X_t) for c in cands])
    tpred = np.asarray(target_predictions)
    if tpred.shape != (len(X_t), len(cands)):
        raise ValueError(f"target_predictions has shape {tpred.shape}; expected (rows of X_target, "
                         f"candidates) = {(len(X_t), len(cands))}")
    return tpred


def _confusions_and_shares(classes: np.ndarray, yi: np.ndarray, oof: np.ndarray, tpred: np.ndarray
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Each candidate's BBSE system: confusion matrices P(ŷ | y) (ℓ, K, K) and target shares (ℓ, K)."""
    K = len(classes)
    conf = np.zeros((oof.shape[1], K, K))
    shares = np.zeros((oof.shape[1], K))
    for j in range(oof.shape[1]):
        pred_i = np.searchsorted(classes, oof[:, j])
        np.add.at(conf[j], (np.clip(pred_i, 0, K - 1), yi), 1.0)
        conf[j] /= conf[j].sum(axis=0, keepdims=True)
        shares[j] = np.bincount(np.clip(np.searchsorted(classes, tpred[:, j]), 0, K - 1), minlength=K) / len(tpred)
    return conf, shares


def _given_class_prior(class_prior: Any, classes: np.ndarray) -> np.ndarray:
    """The known target class shares as floats, refused unless they are K non-negative shares summing to 1."""
    K = len(classes)
    pi_t = np.asarray(class_prior, float)
    if pi_t.shape != (K,) or np.any(pi_t < 0) or not np.isclose(pi_t.sum(), 1.0):
        raise ValueError(f"class_prior must be {K} non-negative shares summing to 1 (classes "
                         f"{classes.tolist()}); got {np.asarray(class_prior).tolist()}")
    return pi_t


def _prior_weighted_folds(cands: list[Any], right: np.ndarray, yi: np.ndarray, K: int,
                          splits: list[tuple[np.ndarray, np.ndarray]], pi_t: np.ndarray
                          ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Per candidate: fold scores Σ_c π_T(c)·recall_fc, plain fold accuracies and the (k, K) fold recalls."""
    pooled = np.vstack([right[yi == c].mean(axis=0) for c in range(K)])  # (K, ℓ) recall over all folds
    folds: dict[str, np.ndarray] = {}
    plain: dict[str, np.ndarray] = {}
    recalls: dict[str, np.ndarray] = {}
    for j, c in enumerate(cands):
        rec = np.array([[right[test[yi[test] == cl], j].mean() if np.any(yi[test] == cl) else pooled[cl, j]
                         for cl in range(K)] for _, test in splits])  # (k, K)
        recalls[c.name] = rec
        folds[c.name] = rec @ pi_t
        plain[c.name] = np.array([right[test, j].mean() for _, test in splits])
    return folds, plain, recalls


def with_class_prior(res: SelectorScores, class_prior: Any) -> SelectorScores:
    """``label_shift_cv``'s result re-weighted to other target class shares, without refitting: each
    fold's score is ``Σ_c π_T(c) · recall_fc`` from the stored per-fold recalls; returns ``SelectorScores``
    (selector ``"cv_lp"``).

    Parameters
    ----------
    res : SelectorScores
        A :func:`label_shift_cv` result (it holds ``details["fold_recalls"]``).
    class_prior : array-like
        The target class shares, one per class in sorted order, non-negative and summing to 1.

    Returns
    -------
    SelectorScores
        Selector ``"cv_lp"`` with the re-weighted fold scores, ``target_prior`` set to ``class_prior`` and
        ``n_fits`` 0.
    """
    recalls = res.details.get("fold_recalls")
    if recalls is None:
        raise ValueError("res must be a label_shift_cv result (it holds details['fold_recalls'])")
    classes = res.details["source_prior"].index
    pi = np.asarray(class_prior, float)
    if pi.shape != (len(classes),) or np.any(pi < 0) or not np.isclose(pi.sum(), 1.0):
        raise ValueError(f"class_prior must be {len(classes)} non-negative shares summing to 1 (classes "
                         f"{list(classes)}); got {np.asarray(class_prior).tolist()}")
    folds = {n: r @ pi for n, r in recalls.items()}
    scores = pd.Series({n: float(v.mean()) for n, v in folds.items()}, dtype=float)
    details = {**res.details, "fold_scores": folds, "target_prior": pd.Series(pi, index=classes),
               "params": {**res.details["params"], "prior_estimate": "given"}}
    return SelectorScores("cv_lp", scores, 0, None, details)


def labeled_class_prior(tp: Any, plan: Any, labels: Any) -> np.ndarray:
    """Target class shares of the batch from a label plan's rows (Horvitz–Thompson, as
    ``fewlabel``'s label estimate: Kossen et al. 2021, Sawade et al. 2012); returns π̂_T (K,).

    Batch = agreement rows A ∪ disagreement rows D. On D, each round r gives the unbiased estimate
    ``Σ_{i labeled before r} 1[y_i = c] + Σ_{i ∈ S_r} 1[y_i = c] / π_i`` of the class count, and the
    rounds are averaged with weights proportional to their sizes (as in ``fewlabel``). Plans draw no rows
    from A, so A's count is the candidates' mean probability of each class there (model-based; on A all
    candidates agree). ``labels``: mapping row → class (as ``tp.classes``); rows requested but not
    labeled are left out of their round (the round's π scaled by the share answered), labels for rows no
    round asked for are ignored here. The shares are clipped at 0 and renormalised.

    Parameters
    ----------
    tp : TargetPredictions
        The candidates' predictions on the batch (classes, probabilities, disagreement rows).
    plan : LabelPlan
        The label plan whose rounds drew the labeled rows.
    labels : Mapping
        Row position in the batch to its label.

    Returns
    -------
    numpy.ndarray
        π̂_T, one share per class of ``tp.classes``, summing to 1.

    Raises
    ------
    ValueError
        No row of any planned round has a label.
    """
    N = tp.n_target
    classes = np.asarray(tp.classes)
    K = len(classes)
    D = tp.disagreement
    in_D = np.zeros(N, bool)
    in_D[D] = True
    A = np.flatnonzero(~in_D)
    common = tp.proba[A].sum(axis=0) if len(A) else np.zeros(K)
    onehot = {i: (classes == labels[i]).astype(float) for i in labels}
    estimates, sizes = [], []
    for r_info in plan.details.get("round_info", []):
        sel = plan.rounds == r_info["round"]
        rows, pis = plan.rows[sel], plan.probabilities[sel]
        got = np.array([i in onehot for i in rows])
        if not got.any():
            continue
        rows, pis = rows[got], pis[got] * (got.sum() / len(got))
        before = [i for i in r_info["labeled_before"] if in_D[i] and i in onehot]
        est = sum((onehot[i] for i in before), np.zeros(K))
        est = est + sum((onehot[i] / (1.0 if p >= 1 - 1e-12 else p) for i, p in zip(rows, pis, strict=True)),
                        np.zeros(K))
        estimates.append(est)
        sizes.append(len(rows))
    if not estimates:
        raise ValueError("no labeled row of any planned round: label some of the plan's rows first")
    alpha = np.asarray(sizes, float) / sum(sizes)
    count = common + sum(a * e for a, e in zip(alpha, estimates, strict=True))
    pi = np.clip(count, 0, None)
    return pi / pi.sum()
