"""Which shift regime the batch shows: covariate shift, label shift, or neither detectable (issue 28, item 3).

A diagnostic reported beside every accuracy estimate. It changes no estimate: the combination of
``shiftlib.estimation`` (``method="auto"``) would use it only if its pre-registered rule chose that, and the rule
does not (``reports/estimation.md``).

:func:`shift_regime` rests on numbers the run already has: the domain classifier's out-of-fold scores and its
permutation p-value (``shiftlib.drift.domain_classifier_test``), the source labels, and the EM estimate of the
target class prior (Saerens, Latinne & Decaestecker, Neural Computation 2002; ``shiftlib.estimation.em_prior``,
per candidate ``shiftlib.estimation.label_shift_prior``).

1. **Detectable?** The domain classifier's test rejects at ``alpha`` (p < ``alpha``). If not: ``"neither"``.
2. **Does label shift alone explain it?** Label shift (Lipton, Wang & Smola, ICML 2018, "Detecting and
   Correcting for Label Shift with Black Box Predictors", §2) keeps p(x|y) and changes the class prior, so
   ``p_t(x) = Σ_y w(y)·π_s(y)·p_s(x|y)`` with ``w(y) = π_t(y)/π_s(y)``. For any fixed function s of x, the
   distribution of s(x) on the source rows weighted by ``w(y_i)`` is then the target's, so the AUC of target
   rows against the *weighted* source rows is 1/2. The domain classifier's out-of-fold scores are such a
   function per fold, and the folds split source and target rows alike. ``"label"`` when that weighted AUC is
   not significantly different from 1/2 (two-sided, level ``alpha``), else ``"covariate"``: a shift class
   re-weighting cannot explain (covariate shift, alone or with label shift).

The weighted AUC's test is the normal approximation of DeLong, DeLong & Clarke-Pearson (Biometrics 1988) with
the source rows weighted (:func:`weighted_auc`); with unit weights it is DeLong's. It is deterministic: no seed.
It treats the out-of-fold scores as independent rows, which they are not quite (rows share fold models). Where
that matters — a domain classifier that learnt no direction, i.e. no shift — the naive test on pooled
out-of-fold scores rejects too often (``shiftlib.drift``'s docstring), which is why step 1 gates on the drift
stage's exact permutation test. Once the domain test detects a shift, the score direction is stable across
folds; ``tests/shiftlib/test_regime.py`` measures the rates on simulated label and covariate shift. Weighting
with the EM prior (fitted to the target) makes the test conservative: a shift EM's prior explains is ``"label"``.

Step 1 is the domain test alone, not the drift verdict (which also takes the MMD test): step 2 reads the domain
classifier's scores, so a shift only the MMD test sees has no scores to explain and is ``"neither"`` here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

__all__ = ["REGIMES", "ShiftRegime", "WeightedAUC", "shift_regime", "weighted_auc"]

#: the regimes, in the order of the test: nothing detectable, label shift explains it, it does not
REGIMES: tuple[str, ...] = ("neither", "label", "covariate")


@dataclass(frozen=True)
class WeightedAUC:
    """The AUC of target scores against weighted source scores, its standard error and two-sided p-value of AUC = ½.

    Parameters
    ----------
    auc : float
        ``Σ_i Σ_j w_i·ψ(s_i, t_j) / (Σ_i w_i · n_t)``, ψ = 1 when the target score is higher, ½ on a tie.
    se : float
        Its standard error (weighted DeLong, :func:`weighted_auc`).
    p_value : float
        Two-sided normal p-value of ``auc = 1/2``.
    """

    auc: float
    se: float
    p_value: float


@dataclass(frozen=True)
class ShiftRegime:
    """The shift regime of a batch and the numbers it rests on (:func:`shift_regime`).

    Parameters
    ----------
    regime : str
        ``"neither"`` (the domain classifier detects no shift), ``"label"`` (label shift explains what it
        detects) or ``"covariate"`` (class re-weighting does not explain it).
    domain_auc : float
        The domain classifier's AUC of target against source scores (unweighted).
    domain_pvalue : float
        The domain classifier test's p-value (the drift stage's permutation test).
    weighted_auc : float
        The same AUC with each source row weighted by ``π_t(y)/π_s(y)``.
    weighted_pvalue : float
        Two-sided p-value of ``weighted_auc = 1/2``.
    target_prior, source_prior : tuple of float
        π_t (the EM estimate) and π_s, one entry per class position.
    alpha : float
        The level of both tests.
    """

    regime: str
    domain_auc: float
    domain_pvalue: float
    weighted_auc: float
    weighted_pvalue: float
    target_prior: tuple[float, ...]
    source_prior: tuple[float, ...]
    alpha: float

    def sentence(self) -> str:
        """One line for the closing report: the regime and the numbers it rests on."""
        if self.regime == "neither":
            return (f"neither covariate nor label shift detectable (domain AUC {self.domain_auc:.3f}, "
                    f"p {self.domain_pvalue:.3g} ≥ {self.alpha:g})")
        words = ("label shift: re-weighting the source classes explains the shift" if self.regime == "label"
                 else "covariate shift: re-weighting the source classes does not explain the shift")
        return (f"{words} (domain AUC {self.domain_auc:.3f} → {self.weighted_auc:.3f} with the classes "
                f"re-weighted, p {self.weighted_pvalue:.3g}); reported only, no estimate uses it")


def _scores(x: Any, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=float).ravel()
    if a.size == 0:
        raise ValueError(f"{name} is empty: give the domain classifier's score of every {name.split('_')[0]} row")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} has NaN or infinite values; give finite domain-classifier scores")
    return a


def weighted_auc(source_scores: Any, target_scores: Any, weights: Any = None) -> WeightedAUC:
    """AUC of target against source scores with the source rows weighted, and its DeLong normal test of AUC = ½.

    ``A = Σ_i w_i·U_i / W`` with ``U_i`` the share of target rows scored above source row i (ties ½) and
    ``W = Σ w_i``. The variance is DeLong, DeLong & Clarke-Pearson (Biometrics 1988) with the source component a
    weighted mean: ``Var = S²(V)/n_t + n_s/(n_s − 1)·Σ_i (w_i/W)²·(U_i − A)²``, ``V_j`` the weighted share of
    source rows below target row j (ties ½); unit weights give DeLong's variance. The weights are taken as
    fixed. A zero variance gives p = 1 when A = ½, else 0.

    Parameters
    ----------
    source_scores : array-like of shape (n_s,)
        Scores of the source rows (higher = more target-like).
    target_scores : array-like of shape (n_t,)
        Scores of the target rows.
    weights : array-like of shape (n_s,), optional
        Non-negative weight of each source row, not all zero (None: all 1).

    Returns
    -------
    WeightedAUC
        The AUC, its standard error and the two-sided p-value of AUC = ½.
    """
    s, t = _scores(source_scores, "source_scores"), _scores(target_scores, "target_scores")
    w = np.ones(s.size) if weights is None else np.asarray(weights, dtype=float).ravel()
    if w.size != s.size:
        raise ValueError(f"weights has {w.size} entries for {s.size} source scores; give one weight per source row")
    if not np.all(np.isfinite(w)) or w.min() < 0 or w.sum() <= 0:
        raise ValueError("weights must be finite, non-negative and not all zero")
    if s.size < 2 or t.size < 2:
        raise ValueError(f"the weighted AUC needs ≥ 2 rows per side; got source {s.size}, target {t.size}")
    W, ts = w.sum(), np.sort(t)
    below, upto = np.searchsorted(ts, s, side="left"), np.searchsorted(ts, s, side="right")
    U = (t.size - upto + 0.5 * (upto - below)) / t.size
    A = float(np.sum(w * U) / W)
    order = np.argsort(s, kind="stable")
    cw = np.r_[0.0, np.cumsum(w[order])]
    lo, hi = np.searchsorted(s[order], t, side="left"), np.searchsorted(s[order], t, side="right")
    V = (cw[lo] + 0.5 * (cw[hi] - cw[lo])) / W
    var = float(np.var(V, ddof=1) / t.size + s.size / (s.size - 1) * np.sum((w / W) ** 2 * (U - A) ** 2))
    se = math.sqrt(max(var, 0.0))
    if se == 0.0:
        return WeightedAUC(A, 0.0, 1.0 if A == 0.5 else 0.0)
    return WeightedAUC(A, se, float(2.0 * stats.norm.sf(abs(A - 0.5) / se)))


def _priors(y: np.ndarray, target_prior: Any, source_prior: Any) -> tuple[np.ndarray, np.ndarray]:
    """π_t and π_s as arrays over the class positions, checked against each other and the labels."""
    pi_t = np.asarray(target_prior, dtype=float).ravel()
    k = pi_t.size
    if k < 2 or not np.all(np.isfinite(pi_t)) or pi_t.min() < 0 or abs(pi_t.sum() - 1.0) > 1e-6:
        raise ValueError(f"target_prior {pi_t.tolist()} must be ≥ 2 non-negative class shares summing to 1")
    if y.size and (y.min() < 0 or y.max() >= k or np.any(y != np.round(y))):
        raise ValueError(f"y_source must hold class positions 0..{k - 1} into target_prior; got values "
                         f"{np.unique(y)[:5].tolist()}: encode the labels as positions (np.unique(..., "
                         "return_inverse=True))")
    counts = np.bincount(y.astype(int), minlength=k)
    if np.count_nonzero(counts) < 2:
        raise ValueError(f"y_source has {np.count_nonzero(counts)} class(es); label shift needs source rows of at "
                         "least two classes")
    pi_s = counts / counts.sum() if source_prior is None else np.asarray(source_prior, dtype=float).ravel()
    if pi_s.size != k:
        raise ValueError(f"source_prior has {pi_s.size} classes and target_prior {k}; give both over the same classes")
    if not np.all(np.isfinite(pi_s)) or np.any(pi_s[counts > 0] <= 0):
        raise ValueError("source_prior must be positive for every class the source rows have")
    if pi_t[counts > 0].sum() <= 0:
        raise ValueError("target_prior gives no class of the source rows any share; no re-weighting of them can "
                         "match it: check that both use the same class positions")
    return pi_t, pi_s


def shift_regime(source_scores: Any, target_scores: Any, y_source: Any, target_prior: Any, *,
                 domain_pvalue: float, source_prior: Any = None, alpha: float = 0.05) -> ShiftRegime:
    """Covariate shift, label shift, or neither detectable: the domain test, then the class-weighted AUC (module doc).

    ``"neither"`` when ``domain_pvalue ≥ alpha``; else ``"label"`` when the AUC of the target scores against the
    source scores weighted by ``w(y) = π_t(y)/π_s(y)`` (label shift: Lipton, Wang & Smola, ICML 2018; π_t by EM,
    Saerens et al. 2002) is not significantly different from ½ (:func:`weighted_auc`, two-sided at ``alpha``),
    else ``"covariate"``.

    Parameters
    ----------
    source_scores : array-like of shape (n_s,)
        The domain classifier's out-of-fold score of each source row (higher = more target-like), e.g. the
        drift stage's ``row_scores`` of side ``"source"``.
    target_scores : array-like of shape (n_t,)
        Its out-of-fold score of each target row.
    y_source : array-like of shape (n_s,)
        Each source row's class, as a position into ``target_prior``.
    target_prior : array-like of shape (k,)
        π_t, the estimated target class prior (``shiftlib.estimation.label_shift_prior``: EM).
    domain_pvalue : float
        The domain classifier test's p-value on these scores (``shiftlib.drift.DriftReport.domain_pvalue``).
    source_prior : array-like of shape (k,), optional
        π_s; None (default) uses the class shares of ``y_source``, so the weighted source rows have the class
        shares π_t exactly.
    alpha : float, default 0.05
        Level of both tests, in (0, 1).

    Returns
    -------
    ShiftRegime
        The regime and the numbers it rests on.
    """
    if not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"alpha={alpha} must be in (0, 1)")
    if not 0.0 <= float(domain_pvalue) <= 1.0:
        raise ValueError(f"domain_pvalue={domain_pvalue} must be a p-value in [0, 1]")
    s = _scores(source_scores, "source_scores")
    y = np.asarray(y_source, dtype=float).ravel()
    if y.size != s.size:
        raise ValueError(f"y_source has {y.size} labels for {s.size} source scores; give one label per source row")
    pi_t, pi_s = _priors(y, target_prior, source_prior)
    ratio = np.divide(pi_t, pi_s, out=np.zeros_like(pi_t), where=pi_s > 0)
    plain = weighted_auc(s, target_scores)
    weighted = weighted_auc(s, target_scores, ratio[y.astype(int)])
    if float(domain_pvalue) >= alpha:
        regime = "neither"
    else:
        regime = "label" if weighted.p_value >= alpha else "covariate"
    return ShiftRegime(regime, plain.auc, float(domain_pvalue), weighted.auc, weighted.p_value,
                       tuple(map(float, pi_t)), tuple(map(float, pi_s)), float(alpha))
