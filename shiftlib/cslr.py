"""Logistic regression for covariate shift (DL: Bickel, Brückner & Scheffer, ICML 2007) and DL §6's baselines.

``CovariateShiftLogisticRegression`` maximises DL Optimization Problem 1 (eq. 12 with the logistic models
of eq. 13–14 and the Gaussian priors of eq. 15), i.e. the log-posterior of eq. 24::

    J(w, v) = r Σ_{i∈L} s_i (1/q_i − 1) log p(y_i|x_i; w)          (classifier term, weights of eq. 7)
              + Σ_{i∈L} log q_i + Σ_{j∈T} log(1 − q_j)               (σ-likelihood: source vs target)
              − |w|²/(2 s_w²) − |v|²/(2 s_v²)

with ``p_i = σ(w·x_i)``, ``q_i = σ(v·x_i)``, ``r = (m+α)/(n+α)`` (Appendix A's MAP prior ratio), ``m``
labeled source rows L, ``n`` unlabeled target rows T and ``s_i`` the optional ``sample_weight``.
Note ``1/q_i − 1 = exp(−v·x_i)``. The joint optimum is found by damped Newton steps over (w, v)
(Theorem 1, eq. 16, Appendix A eq. 35–39) started from i.i.d. logistic regression (DL §5.3), with a
backtracking line search that only accepts steps that raise J. The Newton iteration is hand-written
because no library optimises this joint, non-concave objective.

Decisions where the paper is silent (documented on the classes too):

* Features are standardised internally with the mean / sd of the pooled rows L ∪ T (each row once):
  the σ-model discriminates L from T and must see them on one scale; when L = T this is exactly the
  source-only scaling of ``shiftlib.learners``' LR, so CSLR and "LR" share a coordinate system.
* Both models have an intercept that is *not* penalised (s_w, s_v act on the slopes), as in
  scikit-learn's ``LogisticRegression``; with ``s_w² = C`` the i.i.d. start is sklearn's LR at ``C``.
* Start (DL §5.3): w = i.i.d. LR (scikit-learn, convex) and, by default, v = "no shift"
  (slopes 0, intercept log r, so every weight r·(1/q_i − 1) is 1 and the start *is* i.i.d. LR in the
  joint space: the final J is ≥ the i.i.d. solution's J). ``init_v="domain"`` starts v at the
  σ-discriminator alone (the two-stage solution's domain model) instead.
* Kernel version (eq. 17–22): dual coefficients ω over L (classifier) and ν over L ∪ T (σ-model),
  unpenalised intercepts; the Newton step solves eq. 21 extended by the two intercept rows
  (``Σ(ω+Δω) = 0``, ``Σ(ν+Δν) = 0``, which follow from eliminating K as in eq. 20→21). Cost: one dense
  LU of size 2m+n+2 per step (m = n = 1,000 took ≈ 18 s on the shared 2-core machine).
* Primal speed (the joint Hessian is only 2(d+1) square; its cost is the Xᵀ diag(·) X products):
  far from the optimum the Hessian is estimated from every k-th row (≈ 4,000 rows), near it the last
  Hessian is reused once the decrement is tiny, and for m+n ≥ 5,000 the products run in float32.
  Value, gradient, line search and the final convergence check are exact float64, so these only change
  the path, not the optimum; convergence is declared on an exact Newton decrement ≤ tol·(1+|J|).
* ``sample_weight`` s_i multiplies labeled row i's class log-likelihood term (its exponent in eq. 12);
  the σ-likelihood is unweighted.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy import linalg
from scipy.special import expit, log_expit
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics.pairwise import linear_kernel, rbf_kernel
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

__all__ = [
    "CovariateShiftLogisticRegression",
    "LogPosterior",
    "TwoStageLogisticRegression",
    "appendix_b_condition",
    "convexity_margin",
    "kernel_log_posterior",
    "primal_log_posterior",
]


# ----------------------------------------------------------------------------------------------------
# eq. 24 and its derivatives (eq. 32–39)
# ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogPosterior:
    """DL eq. 24 at one parameter vector: value (without the constant C), gradient, Hessian (or None).

    Parameters
    ----------
    value : float
        J at the parameter vector (−inf where it is not finite).
    gradient : numpy.ndarray
        ∂J/∂params, in the order of the parameter vector.
    hessian : numpy.ndarray or None
        ∂²J/∂params² (negative semi-definite where J is concave); None when not computed.
    """

    value: float
    gradient: np.ndarray
    hessian: np.ndarray | None


@dataclass(frozen=True)
class _Terms:
    """Per-row coefficients of DL Appendix A (eq. 32–34) and the data part of eq. 24."""

    value: float  # data part of eq. 24 (no priors); -inf when not finite
    a: np.ndarray  # eq. 32, labeled rows
    b: np.ndarray  # eq. 33, labeled rows
    c: np.ndarray  # eq. 34, labeled rows
    q_L: np.ndarray  # q_i on labeled rows
    q_T: np.ndarray  # q_j on target rows
    omega: np.ndarray  # r·s_i·(1/q_i − 1): the eq. 7 weight inside eq. 12

    @property
    def e_vL(self) -> np.ndarray:  # eq. 36, labeled block of e
        return self.b + 1.0 - self.q_L

    @property
    def e_vT(self) -> np.ndarray:  # eq. 36, target block of e
        return -self.q_T

    @property
    def lam_vL(self) -> np.ndarray:  # eq. 39, labeled diagonal
        return self.b + self.q_L * (1.0 - self.q_L)

    @property
    def lam_vT(self) -> np.ndarray:  # eq. 39, target diagonal
        return self.q_T * (1.0 - self.q_T)


def _log_sigmoid(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log σ(t), exp(−|t|)) from one exp and one log1p: log σ(t) = min(t, 0) − log1p(exp(−|t|))."""
    e = np.exp(-np.abs(t))
    return np.minimum(t, 0.0) - np.log1p(e), e


def _data_terms(f_L: np.ndarray, z_L: np.ndarray, z_T: np.ndarray, y01: np.ndarray, ratio: float,
                sw: np.ndarray, full: bool = True) -> _Terms:
    """Coefficients a, b, c (DL eq. 32–34) and the data part of eq. 24 from the linear predictors.

    ``full=False`` computes the value only (line search); a, b, c, q are then left empty.
    """
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        sign = 2.0 * y01 - 1.0
        ell, ef = _log_sigmoid(sign * f_L)  # y log p + (1−y) log(1−p), stably
        log_qL, ezL = _log_sigmoid(z_L)
        log_1mqT, ezT = _log_sigmoid(-z_T)
        omega = ratio * sw * np.where(z_L >= 0, ezL, 1.0 / ezL)  # r (1/q − 1) = r exp(−v·x)
        value = float(omega @ ell + log_qL.sum() + log_1mqT.sum())
        if not np.isfinite(value):
            value = -np.inf
        if not full:
            empty = np.empty(0)
            return _Terms(value, empty, empty, empty, empty, empty, omega)
        p = np.where(f_L >= 0, 1.0, ef) / (1.0 + ef)
        q_L = np.where(z_L >= 0, 1.0, ezL) / (1.0 + ezL)
        q_T = np.where(z_T >= 0, 1.0, ezT) / (1.0 + ezT)
        a = omega * (y01 - p)
        b = -omega * ell
        c = omega * p * (1.0 - p)
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        value = -np.inf
    return _Terms(value, a, b, c, q_L, q_T, omega)


def _as_01(y: Any) -> np.ndarray:
    y01 = np.asarray(y, dtype=float).ravel()
    if not np.all((y01 == 0) | (y01 == 1)):
        raise ValueError("y must be coded 0/1 here (the estimators accept any two label values)")
    return y01


def primal_log_posterior(
    params: np.ndarray,
    X_source: np.ndarray,
    y: np.ndarray,
    X_target: np.ndarray,
    *,
    s_w: float = 1.0,
    s_v: float = 1.0,
    prior_ratio: float | None = None,
    sample_weight: np.ndarray | None = None,
    hessian: bool = True,
) -> LogPosterior:
    """DL eq. 24 with gradient (eq. 35–36) and Hessian (eq. 37–39) in the primal; returns a LogPosterior.

    ``params = [w_0, w_1..w_d, v_0, v_1..v_d]``: intercepts first and unpenalised, slopes with the
    Gaussian priors of eq. 15. ``y`` is 0/1. ``prior_ratio`` defaults to m/n (Appendix A's ML estimate).
    ``sample_weight`` multiplies the labeled rows' class log-likelihood terms.

    Parameters
    ----------
    params : numpy.ndarray of shape (2·(d+1),)
        ``[w_0, w_1..w_d, v_0, v_1..v_d]``.
    X_source : numpy.ndarray of shape (m, d)
        Labeled rows L (no intercept column; it is added here).
    y : numpy.ndarray of shape (m,)
        Labels coded 0/1.
    X_target : numpy.ndarray of shape (n, d)
        Unlabeled target rows T.
    s_w : float, default 1.0
        Prior standard deviation of the slopes of w (eq. 15).
    s_v : float, default 1.0
        Prior standard deviation of the slopes of v (eq. 15).
    prior_ratio : float, optional
        r of eq. 24; None means m/n.
    sample_weight : numpy.ndarray of shape (m,), optional
        s_i; None means all 1.
    hessian : bool, default True
        Compute the Hessian; False leaves it None.

    Returns
    -------
    LogPosterior
        Value, gradient and (if asked) Hessian of J at ``params``.

    Raises
    ------
    ValueError
        If ``params`` has the wrong length or ``y`` is not 0/1.
    """
    Ls = np.asarray(X_source, dtype=float)
    Ts = np.asarray(X_target, dtype=float)
    m, d = Ls.shape
    n = Ts.shape[0]
    y01 = _as_01(y)
    ratio = m / n if prior_ratio is None else float(prior_ratio)
    sw = np.ones(m) if sample_weight is None else np.asarray(sample_weight, dtype=float)
    theta = np.asarray(params, dtype=float)
    if theta.shape != (2 * (d + 1),):
        raise ValueError(f"params must have 2·(d+1) = {2 * (d + 1)} entries [w0, w, v0, v], got {theta.shape}")
    L1 = np.hstack([np.ones((m, 1)), Ls])
    T1 = np.hstack([np.ones((n, 1)), Ts])
    return _primal_eval(theta, _Design(L1, T1), y01, ratio, sw, 1.0 / s_w**2, 1.0 / s_v**2, hessian)


def _prior_diag(d1: int, pw: float, pv: float) -> np.ndarray:
    """Diagonal of S (Appendix A) with zeros at the two unpenalised intercepts."""
    P = np.empty(2 * d1)
    P[:d1], P[d1:] = pw, pv
    P[0] = P[d1] = 0.0
    return P


class _Design:
    """[1, x] rows of L and T, plus a transposed copy (float32 for large problems) for the Hessian products.

    Large problems: the Hessian's Xᵀ diag(·) X products (the O((m+n) d²) cost) run in float32; value,
    gradient and line search stay float64, so the fixed point is unchanged (an inexact Newton step).
    The last predictors are cached, so the line search's accepted point is not recomputed.
    """

    def __init__(self, L1: np.ndarray, T1: np.ndarray, low_precision: bool = False) -> None:
        self.L1, self.T1 = L1, T1
        self.d1 = L1.shape[1]
        dt = np.float32 if low_precision else np.float64
        self.Lt_h = np.ascontiguousarray(L1.T, dtype=dt)
        self.Tt_h = np.ascontiguousarray(T1.T, dtype=dt)
        # every k-th row, for the cheap Hessian far from the optimum (deterministic, no randomness)
        self.k = max(1, -(-(len(L1) + len(T1)) // _ROUGH_ROWS))
        self.Lt_sub = np.ascontiguousarray(self.Lt_h[:, :: self.k])
        self.Tt_sub = np.ascontiguousarray(self.Tt_h[:, :: self.k])
        self._cache: tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None

    def predictors(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """f_L = [1,x]·w on L, z_L, z_T = [1,x]·v on L and T (one pass over L for both w and v)."""
        if self._cache is not None and np.array_equal(self._cache[0], theta):
            return self._cache[1]
        d1 = self.d1
        FZ = self.L1 @ np.ascontiguousarray(theta.reshape(2, d1).T)
        out = (FZ[:, 0].copy(), FZ[:, 1].copy(), self.T1 @ theta[d1:])
        self._cache = (theta.copy(), out)
        return out

    def sandwich(self, which: str, dg: np.ndarray, rough: bool = False) -> np.ndarray:
        """Xᵀ diag(dg) X for X = L1 or T1; ``rough``: estimated from every k-th row (scaled up)."""
        Xt = self.Lt_h if which == "L" else self.Tt_h
        if rough and self.k > 1:
            Xt = self.Lt_sub if which == "L" else self.Tt_sub
            scale = len(dg) / Xt.shape[1]
            dg = dg[:: self.k] * scale
        return ((Xt * dg.astype(Xt.dtype, copy=False)) @ Xt.T).astype(float, copy=False)


def _primal_value(theta: np.ndarray, D: _Design, y01: np.ndarray, ratio: float, sw: np.ndarray,
                  pw: float, pv: float) -> float:
    t = _data_terms(*D.predictors(theta), y01, ratio, sw, full=False)
    return t.value - 0.5 * float(np.sum(_prior_diag(D.d1, pw, pv) * theta * theta))


def _primal_eval(theta: np.ndarray, D: _Design, y01: np.ndarray, ratio: float, sw: np.ndarray,
                 pw: float, pv: float, hessian: bool, rough: bool = False) -> LogPosterior:
    """DL eq. 24 with its gradient (eq. 35–36) and, if asked, Hessian (eq. 37–39) on a prepared design.

    ``rough``: the Hessian from every k-th row (``_Design.sandwich``), for steps far from the optimum.
    """
    d1 = D.d1
    t = _data_terms(*D.predictors(theta), y01, ratio, sw)
    P = _prior_diag(d1, pw, pv)
    value = t.value - 0.5 * float(np.sum(P * theta * theta))
    GL = D.L1.T @ np.column_stack([t.a, t.e_vL])  # eq. 35 and the L part of eq. 36, one pass over L
    grad = np.concatenate([GL[:, 0], GL[:, 1] + D.T1.T @ t.e_vT]) - P * theta
    H = None
    if hessian:
        # negative Hessian XᵀΛX + S (eq. 37–39), blockwise
        H = np.empty((2 * d1, 2 * d1))
        H[:d1, :d1] = D.sandwich("L", t.c, rough)
        H[:d1, d1:] = D.sandwich("L", t.a, rough)
        H[d1:, :d1] = H[:d1, d1:].T
        H[d1:, d1:] = D.sandwich("L", t.lam_vL, rough) + D.sandwich("T", t.lam_vT, rough)
        H = 0.5 * (H + H.T)
        H[np.diag_indices_from(H)] += P
        H = -H
    return LogPosterior(value, grad, H)


def kernel_log_posterior(
    params: np.ndarray,
    K_all: np.ndarray,
    y: np.ndarray,
    m: int,
    *,
    s_w: float = 1.0,
    s_v: float = 1.0,
    prior_ratio: float | None = None,
    sample_weight: np.ndarray | None = None,
) -> LogPosterior:
    """DL eq. 24 in the dual of §5.2 (w = Φ(L)ᵀω, v = Φ(L∪T)ᵀν, eq. 22) with its gradient; Hessian None.

    ``K_all`` is the kernel matrix over the rows [L; T] (first ``m`` rows labeled).
    ``params = [ω (m), ν (m+n), β_w, β_v]`` (β = unpenalised intercepts).

    Parameters
    ----------
    params : numpy.ndarray of shape (2m+n+2,)
        ``[ω, ν, β_w, β_v]``.
    K_all : numpy.ndarray of shape (m+n, m+n)
        Kernel matrix over [L; T].
    y : numpy.ndarray of shape (m,)
        Labels of L coded 0/1.
    m : int
        Number of labeled rows (the first ``m`` rows of ``K_all``).
    s_w : float, default 1.0
        Prior standard deviation of w (eq. 15, in the feature space of the kernel).
    s_v : float, default 1.0
        Prior standard deviation of v.
    prior_ratio : float, optional
        r of eq. 24; None means m/n.
    sample_weight : numpy.ndarray of shape (m,), optional
        s_i; None means all 1.

    Returns
    -------
    LogPosterior
        Value and gradient of J at ``params``; ``hessian`` is None.

    Raises
    ------
    ValueError
        If ``y`` is not 0/1.
    """
    K_all = np.asarray(K_all, dtype=float)
    N = K_all.shape[0]
    y01 = _as_01(y)
    ratio = m / (N - m) if prior_ratio is None else float(prior_ratio)
    sw = np.ones(m) if sample_weight is None else np.asarray(sample_weight, dtype=float)
    value, grad, _ = _kernel_eval(np.asarray(params, dtype=float), K_all, m, y01, ratio, sw,
                                  1.0 / s_w**2, 1.0 / s_v**2)
    return LogPosterior(value, grad, None)


def _kernel_eval(theta: np.ndarray, K: np.ndarray, m: int, y01: np.ndarray, ratio: float, sw: np.ndarray,
                 pw: float, pv: float) -> tuple[float, np.ndarray, _Terms]:
    N = K.shape[0]
    om, nu, bw, bv = theta[:m], theta[m:m + N], theta[m + N], theta[m + N + 1]
    Kom = K[:m, :m] @ om
    Knu = K @ nu
    t = _data_terms(Kom + bw, Knu[:m] + bv, Knu[m:] + bv, y01, ratio, sw)
    value = t.value - 0.5 * pw * float(om @ Kom) - 0.5 * pv * float(nu @ Knu)
    e_z = np.concatenate([t.e_vL, t.e_vT])
    grad = np.concatenate([
        K[:m, :m] @ (t.a - pw * om),
        K @ (e_z - pv * nu),
        [t.a.sum(), e_z.sum()],
    ])
    return value, grad, t


def convexity_margin(p: np.ndarray, q: np.ndarray, y: np.ndarray, prior_ratio: float) -> np.ndarray:
    """DL Appendix B: per labeled row the Cholesky-Crout pivot b_i + q_i(1−q_i) − a_i²/c_i of Λ (eq. 32–34).

    Λ's 2×2 block of a labeled row is PSD iff this is ≥ 0; it is what eq. 40 rewrites.

    Parameters
    ----------
    p : numpy.ndarray
        p(y=1|x_i; w) per labeled row.
    q : numpy.ndarray
        q_i = p(σ=1|x_i; v) per labeled row.
    y : numpy.ndarray
        Labels coded 0/1.
    prior_ratio : float
        r.

    Returns
    -------
    numpy.ndarray
        The pivot per labeled row.
    """
    p, q, y01 = np.asarray(p, float), np.asarray(q, float), _as_01(y)
    omega = prior_ratio * (1.0 / q - 1.0)
    ell = y01 * np.log(p) + (1 - y01) * np.log1p(-p)
    a = omega * (y01 - p)
    c = omega * p * (1 - p)
    return -omega * ell + q * (1 - q) - a * a / c


def appendix_b_condition(p: np.ndarray, q: np.ndarray, y: np.ndarray, prior_ratio: float) -> np.ndarray:
    """DL eq. 40 per labeled row: (1/r) q² ≥ (1−p)/p − ln(1/p) if y=1, ≥ p/(1−p) − ln(1/(1−p)) if y=0.

    ``r`` = prior ratio (m/n in the paper, so 1/r = n/m). Returns a boolean array.

    Parameters
    ----------
    p : numpy.ndarray
        p(y=1|x_i; w) per labeled row.
    q : numpy.ndarray
        q_i = p(σ=1|x_i; v) per labeled row.
    y : numpy.ndarray
        Labels coded 0/1.
    prior_ratio : float
        r.

    Returns
    -------
    numpy.ndarray of bool
        Whether eq. 40 holds, per labeled row.
    """
    p, q, y01 = np.asarray(p, float), np.asarray(q, float), _as_01(y)
    pc = np.where(y01 == 1, p, 1 - p)  # probability of the observed class
    rhs = (1 - pc) / pc - np.log(1 / pc)
    return q * q / prior_ratio >= rhs


# ----------------------------------------------------------------------------------------------------
# damped Newton ascent with a monotone line search
# ----------------------------------------------------------------------------------------------------


#: reuse the last Hessian once a full Newton step had decrement ≤ this fraction of |J| (quadratic regime)
_LAZY_REL = 1e-3
#: above this decrement / |J| (far from the optimum) a row-subsampled Hessian is used (lazy mode only)
_ROUGH_REL = 1e-2
#: rows (labeled + target) kept by that subsample
_ROUGH_ROWS = 4000


@dataclass
class _AscentResult:
    theta: np.ndarray
    path: list[float]
    n_iter: int
    converged: bool


def _armijo(value_only: Callable[[np.ndarray], float], theta: np.ndarray, delta: np.ndarray, J: float,
            slope: float) -> float | None:
    """Armijo backtracking along ``delta``: the first step 1, 1/2, 1/4, … (down to 1e-12) with enough increase."""
    step = 1.0
    while step > 1e-12:
        if value_only(theta + step * delta) >= J + 1e-4 * step * slope:
            return step
        step *= 0.5
    return None


def _next_level(lazy: bool, step: float, rel: float) -> int:
    """Curvature level for the next evaluation (``_ascent``'s docstring): exact unless ``lazy``."""
    if not lazy:
        return 2
    if step == 1.0 and rel <= _LAZY_REL:
        return 0
    return 1 if rel > _ROUGH_REL else 2


def _ascent(
    theta: np.ndarray,
    evaluate: Callable[[np.ndarray, int], tuple[float, np.ndarray, Any]],
    value_only: Callable[[np.ndarray], float],
    direction: Callable[[np.ndarray, np.ndarray, Any, float], np.ndarray],
    mu0: float,
    max_iter: int,
    tol: float,
    lazy: bool = False,
) -> _AscentResult:
    """Maximise by (Levenberg-damped) Newton steps; Armijo backtracking, so the value never decreases.

    ``evaluate(theta, level)`` returns (J, gradient, curvature): level 2 = exact curvature, 1 = a cheaper
    approximation (row-subsampled Hessian), 0 = none (the caller keeps the previous one). With ``lazy``:
    far from the optimum (decrement > _ROUGH_REL·|J|) the approximation is used; once a full step had
    decrement ≤ _LAZY_REL·|J| the previous curvature is reused. Convergence is only declared on exact
    curvature, and a failed direction is retried with exact curvature before damping.
    """
    level = 1 if lazy else 2
    J, g, extra = evaluate(theta, level)
    if not np.isfinite(J):
        raise FloatingPointError("the log-posterior is not finite at the starting point")
    exact = level == 2
    path, n_iter, converged = [J], 0, False
    for _ in range(max_iter):
        mu = 0.0
        accepted = False
        for _attempt in range(14):
            try:
                delta = direction(theta, g, extra, mu)
                slope = float(g @ delta)
            except (linalg.LinAlgError, ValueError):
                slope = np.nan
            if not np.isfinite(slope) or slope <= 0:
                if not exact:  # retry with exact curvature before damping
                    J, g, extra = evaluate(theta, 2)
                    exact = True
                    continue
                mu = mu0 if mu == 0 else 10.0 * mu
                continue
            if 0.5 * slope <= tol * (1.0 + abs(J)):  # Newton decrement below tolerance
                if not exact:  # confirm with exact curvature, so the last step is an exact Newton step
                    J, g, extra = evaluate(theta, 2)
                    exact = True
                    continue
                converged = True
                Jn = value_only(theta + delta)  # take the final full step only if it does not hurt
                if Jn >= J:
                    theta = theta + delta
                    path.append(Jn)
                    n_iter += 1
                break
            step = _armijo(value_only, theta, delta, J, slope)
            accepted = step is not None
            if step is not None:
                theta = theta + step * delta
                level = _next_level(lazy, step, 0.5 * slope / (1.0 + abs(J)))
                J, g, new_extra = evaluate(theta, level)
                if level > 0:
                    extra = new_extra
                exact = level == 2
                path.append(J)
                n_iter += 1
                break
            if not exact:
                J, g, extra = evaluate(theta, 2)
                exact = True
                continue
            mu = mu0 if mu == 0 else 10.0 * mu
        if converged or not accepted:
            break
    if not converged:
        warnings.warn(
            f"CSLR Newton ascent stopped after {n_iter} steps without reaching tol={tol:g}; "
            "raise max_iter, or increase s_w / s_v stabilising priors",
            ConvergenceWarning,
            stacklevel=3,
        )
    return _AscentResult(theta, path, n_iter, converged)


def _chol_direction(theta: np.ndarray, g: np.ndarray, negH: np.ndarray, mu: float) -> np.ndarray:
    A = negH + mu * np.eye(len(g))
    return linalg.cho_solve(linalg.cho_factor(A, lower=True, check_finite=True), g)


# ----------------------------------------------------------------------------------------------------
# input handling shared by both estimators
# ----------------------------------------------------------------------------------------------------


def _check_target(est: BaseEstimator, X: Any, X_target: Any) -> np.ndarray:
    name = type(est).__name__
    if X_target is None:
        raise ValueError(f"{name} learns from the unlabeled target rows: pass fit(X, y, X_target=...) "
                         "with the rows the model will be asked about")
    names_src = list(X.columns) if hasattr(X, "columns") else None
    names_tgt = list(X_target.columns) if hasattr(X_target, "columns") else None
    if names_src is not None and names_tgt is not None and names_src != names_tgt:
        raise ValueError(f"X_target's columns {names_tgt} differ from X's {names_src}; "
                         "pass the same feature columns in the same order")
    Xt = check_array(X_target, dtype=float, ensure_min_samples=0)
    if Xt.shape[0] == 0:
        raise ValueError("target set has 0 rows; pass at least one unlabeled target row as X_target")
    return Xt


def _check_source(est: BaseEstimator, X: Any, y: Any, X_target: Any, sample_weight: Any
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    Xt = _check_target(est, X, X_target)
    Xs, y = validate_data(est, X, y, reset=True, dtype=float)
    if Xt.shape[1] != Xs.shape[1]:
        raise ValueError(f"X_target has {Xt.shape[1]} columns but X has {Xs.shape[1]}; "
                         "pass the same feature columns for source and target")
    le = LabelEncoder().fit(y)
    if len(le.classes_) != 2:
        raise ValueError(f"{type(est).__name__} is a binary classifier: y has {len(le.classes_)} "
                         f"distinct labels {list(le.classes_)[:5]}; pass exactly two")
    est.classes_ = le.classes_
    y01 = le.transform(y).astype(float)
    if sample_weight is None:
        sw = np.ones(len(y01))
    else:
        sw = np.asarray(sample_weight, dtype=float).ravel()
        if sw.shape != y01.shape or np.any(sw < 0) or not np.all(np.isfinite(sw)) or sw.sum() <= 0:
            raise ValueError("sample_weight must be one finite, non-negative number per labeled row, "
                             "not all zero")
    return Xs, y01, Xt, sw


_FLOAT32_HESSIAN_ROWS = 5000


def _with_ones(X: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """[1, (x − mean)/scale] written into one new array (column 0 is the intercept's constant)."""
    out = np.empty((X.shape[0], X.shape[1] + 1))
    out[:, 0] = 1.0
    np.subtract(X, mean, out=out[:, 1:])
    out[:, 1:] /= scale
    return out


def _pooled_scaling(Xs: np.ndarray, Xt: np.ndarray, standardize: bool) -> tuple[np.ndarray, np.ndarray]:
    if not standardize:
        return np.zeros(Xs.shape[1]), np.ones(Xs.shape[1])
    m, n = len(Xs), len(Xt)
    mean_s, mean_t = Xs.mean(axis=0), Xt.mean(axis=0)
    mean = (m * mean_s + n * mean_t) / (m + n)
    var = (m * (Xs.var(axis=0) + (mean_s - mean) ** 2) + n * (Xt.var(axis=0) + (mean_t - mean) ** 2)) / (m + n)
    scale = np.sqrt(var)
    scale[scale <= 1e-12 * np.maximum(1.0, np.abs(mean))] = 1.0  # constant column: leave unscaled
    return mean, scale


def _lr(C: float, tol: float = 1e-10) -> LogisticRegression:
    return LogisticRegression(C=C, solver="newton-cholesky", tol=tol, max_iter=500)


# ----------------------------------------------------------------------------------------------------
# the estimators
# ----------------------------------------------------------------------------------------------------


class CovariateShiftLogisticRegression(ClassifierMixin, BaseEstimator):
    """DL Optimization Problem 1 (eq. 12–15): joint MAP of classifier w and source/target model v.

    ``fit(X, y, *, X_target, sample_weight=None)``: ``sample_weight`` s_i multiplies the i-th labeled
    row's class log-likelihood term of eq. 24 (its exponent in eq. 12); the σ-likelihood is unweighted.

    Parameters
    ----------
    s_w, s_v : float, default 1.0
        Prior standard deviations of the slopes of w and v (eq. 15). ``s_w² = C`` of sklearn's LR.
    alpha : float, default 0.0
        Symmetric Beta prior on p(σ=1); prior ratio r = (m+α)/(n+α) (Appendix A). 0 gives m/n.
    kernel : {None, "linear", "rbf"}, default None
        None = primal (eq. 16); "linear" or "rbf" = dual kernel version (eq. 21–22).
    gamma : float or "scale", default "scale"
        RBF width on the standardised features; "scale" = 1/(d · Var(pooled standardised X)).
    standardize : bool, default True
        Standardise features with the mean / sd of the pooled rows L ∪ T (see module doc).
    max_iter : int, default 100
        Most Newton iterations.
    tol : float, default 1e-10
        Stop when the Newton decrement gᵀΔ/2 ≤ tol·(1+|J|).
    max_dual_size : int, default 8000
        Kernel mode solves a dense (2m+n+2)-square system per step; refuse when 2m+n is above this.
    init_v : {"no_shift", "domain"}, default "no_shift"
        Start of v. "no_shift": constant q = m/(m+n)-like start with r·(1/q−1) = 1, so the start
        (w_iid, v) is exactly i.i.d. LR (DL §5.3); "domain": the σ-discriminator alone (two-stage's v).

    Attributes
    ----------
    classes_ : ndarray
        The two class labels; ``classes_[1]`` is the positive class.
    coef_, intercept_ : ndarray
        The classifier w (``coef_`` in primal mode only, original feature units).
    dual_coef_, domain_dual_coef_ : ndarray
        ω and ν (kernel mode).
    domain_coef_, domain_intercept_ : ndarray
        The source/target model v (``domain_coef_`` in primal mode only).
    weights_ : ndarray
        r·(1/q_i − 1)·s_i on the source rows, normalised to mean 1.
    raw_weights_ : ndarray
        The same, unnormalised.
    ess_ : float
        Effective sample size of the weights, (Σ w)² / Σ w².
    prior_ratio_ : float
        r.
    n_iter_ : int
        Newton steps taken.
    log_posterior_path_ : ndarray
        J at the start and after each step.
    converged_ : bool
        Whether the Newton decrement reached ``tol``.
    params_ : ndarray
        The standardised-space parameter vector.
    """

    requires_target = True

    def __init__(
        self,
        s_w: float = 1.0,
        s_v: float = 1.0,
        alpha: float = 0.0,
        kernel: Literal["linear", "rbf"] | None = None,
        gamma: float | Literal["scale"] = "scale",
        standardize: bool = True,
        max_iter: int = 100,
        tol: float = 1e-10,
        max_dual_size: int = 8000,
        init_v: Literal["no_shift", "domain"] = "no_shift",
    ) -> None:
        self.s_w = s_w
        self.s_v = s_v
        self.alpha = alpha
        self.kernel = kernel
        self.gamma = gamma
        self.standardize = standardize
        self.max_iter = max_iter
        self.tol = tol
        self.max_dual_size = max_dual_size
        self.init_v = init_v

    # -- fitting ---------------------------------------------------------------------------------------

    def fit(self, X: Any, y: Any, *, X_target: Any, sample_weight: Any = None
            ) -> CovariateShiftLogisticRegression:
        """Maximise DL eq. 24 over (w, v) given labeled (X, y) and unlabeled X_target; returns self.

        Parameters
        ----------
        X : array-like of shape (m, d)
            Labeled source rows L.
        y : array-like of shape (m,)
            Two distinct labels.
        X_target : array-like of shape (n, d)
            Unlabeled target rows T, same columns as ``X``.
        sample_weight : array-like of shape (m,), optional
            s_i: finite, non-negative, not all zero; None means all 1.

        Returns
        -------
        CovariateShiftLogisticRegression
            The fitted estimator.
        """
        if self.s_w <= 0 or self.s_v <= 0:
            raise ValueError(f"s_w and s_v must be > 0 (got s_w={self.s_w}, s_v={self.s_v})")
        if self.init_v not in ("no_shift", "domain"):
            raise ValueError(f"init_v must be 'no_shift' or 'domain', got {self.init_v!r}")
        if self.kernel not in (None, "linear", "rbf"):
            raise ValueError(f"kernel must be None (primal), 'linear' or 'rbf', got {self.kernel!r}")
        Xs, y01, Xt, sw = _check_source(self, X, y, X_target, sample_weight)
        m, n = len(Xs), len(Xt)
        self.mean_, self.scale_ = _pooled_scaling(Xs, Xt, self.standardize)
        L1 = _with_ones(Xs, self.mean_, self.scale_)
        T1 = _with_ones(Xt, self.mean_, self.scale_)
        self.prior_ratio_ = (m + self.alpha) / (n + self.alpha)
        if self.kernel is None:
            self._fit_primal(L1, y01, T1, sw)
        else:
            self._fit_kernel(L1[:, 1:], y01, T1[:, 1:], sw)
        raw = self.raw_weights_
        self.weights_ = raw / raw.mean() if raw.mean() > 0 else raw
        self.ess_ = float(raw.sum() ** 2 / np.sum(raw**2)) if np.any(raw > 0) else 0.0
        return self

    def _fit_primal(self, L1: np.ndarray, y01: np.ndarray, T1: np.ndarray, sw: np.ndarray) -> None:
        m, n = len(L1), len(T1)
        d = L1.shape[1] - 1
        Ls, Ts = L1[:, 1:], T1[:, 1:]
        pw, pv = 1.0 / self.s_w**2, 1.0 / self.s_v**2
        ratio = self.prior_ratio_
        # DL §5.3 start: w = i.i.d. LR (sklearn); v = no shift (weights 1) or the σ-discriminator
        iid = LogisticRegression(C=self.s_w**2, max_iter=1000).fit(Ls, y01, sample_weight=sw)
        if self.init_v == "domain":
            dom = LogisticRegression(C=self.s_v**2, max_iter=1000).fit(
                np.vstack([Ls, Ts]), np.r_[np.ones(m), np.zeros(n)])
            v_start = np.concatenate([dom.intercept_, dom.coef_.ravel()])
        else:
            v_start = np.zeros(d + 1)
            v_start[0] = np.log(ratio)  # r·exp(−v0) = 1: eq. 24's first term is the i.i.d. likelihood
        theta0 = np.concatenate([iid.intercept_, iid.coef_.ravel(), v_start])
        D = _Design(L1, T1, low_precision=m + n >= _FLOAT32_HESSIAN_ROWS)

        def evaluate(th: np.ndarray, level: int) -> tuple[float, np.ndarray, np.ndarray | None]:
            lp = _primal_eval(th, D, y01, ratio, sw, pw, pv, level > 0, rough=level == 1)
            return lp.value, lp.gradient, None if lp.hessian is None else -lp.hessian

        def value_only(th: np.ndarray) -> float:
            return _primal_value(th, D, y01, ratio, sw, pw, pv)

        mu0 = 1e-8 * (m + n) + 1e-8
        res = _ascent(theta0, evaluate, value_only, _chol_direction, mu0, self.max_iter, self.tol, lazy=True)
        self._store(res)
        d1 = d + 1
        th = res.theta
        w0, w, v0, v = th[0], th[1:d1], th[d1], th[d1 + 1:]
        # back to original feature units: x_std = (x − mean)/scale
        self.coef_ = (w / self.scale_)[None, :]
        self.intercept_ = np.array([w0 - np.sum(w * self.mean_ / self.scale_)])
        self.domain_coef_ = (v / self.scale_)[None, :]
        self.domain_intercept_ = np.array([v0 - np.sum(v * self.mean_ / self.scale_)])
        self.raw_weights_ = ratio * sw * np.exp(-(L1 @ th[d1:]))

    def _kernel_matrix(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        if self.kernel == "linear":
            return linear_kernel(A, B)
        return rbf_kernel(A, B, gamma=self.gamma_)

    def _fit_kernel(self, Ls: np.ndarray, y01: np.ndarray, Ts: np.ndarray, sw: np.ndarray) -> None:
        m, n = len(Ls), len(Ts)
        N = m + n
        if m + N > self.max_dual_size:
            raise ValueError(
                f"kernel CSLR solves a dense Newton system of size 2m+n = {m + N} (m={m} labeled, n={n} "
                f"target rows), above max_dual_size={self.max_dual_size}; use kernel=None (primal), "
                "subsample the rows, or raise max_dual_size if memory allows")
        A = np.vstack([Ls, Ts])
        if self.kernel == "rbf":
            if self.gamma == "scale":
                var = A.var()
                self.gamma_ = 1.0 / (A.shape[1] * var) if var > 0 else 1.0
            else:
                self.gamma_ = float(self.gamma)
        K = self._kernel_matrix(A, A)
        pw, pv = 1.0 / self.s_w**2, 1.0 / self.s_v**2
        ratio = self.prior_ratio_
        # DL §5.3 start: i.i.d. kernel LR for (ω, β_w); v as in the primal (see init_v)
        om, bw = _kernel_lr(K[:m, :m], y01, sw, pw, self.max_iter, self.tol)
        if self.init_v == "domain":
            nu, bv = _kernel_lr(K, np.r_[np.ones(m), np.zeros(n)], np.ones(N), pv, self.max_iter, self.tol)
        else:
            nu, bv = np.zeros(N), float(np.log(ratio))
        theta0 = np.concatenate([om, nu, [bw, bv]])

        def evaluate(th: np.ndarray, level: int) -> tuple[float, np.ndarray, _Terms]:
            return _kernel_eval(th, K, m, y01, ratio, sw, pw, pv)

        def value_only(th: np.ndarray) -> float:
            return _kernel_eval(th, K, m, y01, ratio, sw, pw, pv)[0]

        def direction(th: np.ndarray, g: np.ndarray, t: _Terms, mu: float) -> np.ndarray:
            return _kernel_joint_step(th, K, m, t, pw, pv, mu)

        res = _ascent(theta0, evaluate, value_only, direction, 1e-6, self.max_iter, self.tol)
        self._store(res)
        th = res.theta
        self.dual_coef_ = th[:m]
        self.domain_dual_coef_ = th[m:m + N]
        self.intercept_ = np.array([th[m + N]])
        self.domain_intercept_ = np.array([th[m + N + 1]])
        self.X_fit_ = Ls
        self.X_domain_fit_ = A
        z_L = K[:m] @ self.domain_dual_coef_ + th[m + N + 1]
        self.raw_weights_ = ratio * sw * np.exp(-z_L)

    def _store(self, res: _AscentResult) -> None:
        self.params_ = res.theta
        self.log_posterior_path_ = np.asarray(res.path)
        self.n_iter_ = res.n_iter
        self.converged_ = res.converged

    # -- prediction ------------------------------------------------------------------------------------

    def decision_function(self, X: Any) -> np.ndarray:
        """w·x + w_0 (eq. 13's logit; eq. 22's kernel sum in kernel mode) for the positive class.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Rows to score.

        Returns
        -------
        ndarray of shape (n,)
            The logit of ``classes_[1]``.
        """
        check_is_fitted(self, "params_")
        X = validate_data(self, X, reset=False, dtype=float)
        Xs = (X - self.mean_) / self.scale_
        if self.kernel is None:
            return X @ self.coef_.ravel() + self.intercept_[0]
        return self._kernel_matrix(Xs, self.X_fit_) @ self.dual_coef_ + self.intercept_[0]

    def predict_proba(self, X: Any) -> np.ndarray:
        """p(y|x; w) of eq. 13 (eq. 22 in kernel mode); columns follow ``classes_``.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Rows to score.

        Returns
        -------
        ndarray of shape (n, 2)
            Class probabilities.
        """
        p1 = expit(self.decision_function(X))
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X: Any) -> np.ndarray:
        """argmax_y p(y|x; w) (DL §5.1).

        Parameters
        ----------
        X : array-like of shape (n, d)
            Rows to score.

        Returns
        -------
        ndarray of shape (n,)
            Predicted class labels.
        """
        return self.classes_[(self.decision_function(X) > 0).astype(int)]

    def domain_proba(self, X: Any) -> np.ndarray:
        """q(x) = p(σ=1|x; v) of eq. 14: probability that x comes from the labeled source sample.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Rows to score.

        Returns
        -------
        ndarray of shape (n,)
            q(x) per row.
        """
        check_is_fitted(self, "params_")
        X = validate_data(self, X, reset=False, dtype=float)
        if self.kernel is None:
            return expit(X @ self.domain_coef_.ravel() + self.domain_intercept_[0])
        Xs = (X - self.mean_) / self.scale_
        return expit(self._kernel_matrix(Xs, self.X_domain_fit_) @ self.domain_dual_coef_
                     + self.domain_intercept_[0])


def _kernel_lr(K: np.ndarray, t01: np.ndarray, wts: np.ndarray, prec: float, max_iter: int, tol: float
               ) -> tuple[np.ndarray, float]:
    """Weighted kernel LR (the i.i.d. special case of eq. 21, one block): returns (dual coefs, intercept)."""
    n = len(t01)
    sign = 2.0 * t01 - 1.0

    def evaluate(th: np.ndarray, level: int = 2) -> tuple[float, np.ndarray, np.ndarray]:
        al, be = th[:n], th[n]
        Ka = K @ al
        F = Ka + be
        p = expit(F)
        val = float(np.sum(wts * log_expit(sign * F))) - 0.5 * prec * float(al @ Ka)
        e = wts * (t01 - p)
        return val, np.concatenate([K @ (e - prec * al), [e.sum()]]), wts * p * (1 - p)

    def value_only(th: np.ndarray) -> float:
        return evaluate(th)[0]

    def direction(th: np.ndarray, g: np.ndarray, lam: np.ndarray, mu: float) -> np.ndarray:
        al = th[:n]
        A = np.empty((n + 1, n + 1))
        A[:n, :n] = lam[:, None] * K
        A[np.arange(n), np.arange(n)] += prec + mu
        A[:n, n] = lam
        A[n, :n] = prec + mu
        A[n, n] = -mu
        e = wts * (t01 - expit(K @ al + th[n]))
        rhs = np.concatenate([e - prec * al, [-prec * al.sum()]])
        return linalg.solve(A, rhs, overwrite_a=True, check_finite=False)

    th0 = np.zeros(n + 1)
    pbar = np.clip(np.sum(wts * t01) / np.sum(wts), 1e-6, 1 - 1e-6)
    th0[n] = np.log(pbar / (1 - pbar))
    res = _ascent(th0, evaluate, value_only, direction, 1e-6, max_iter, tol)
    return res.theta[:n], float(res.theta[n])


def _kernel_joint_step(th: np.ndarray, K: np.ndarray, m: int, t: _Terms, pw: float, pv: float, mu: float
                       ) -> np.ndarray:
    """Solve DL eq. 21, (ΛK + S')Δ = e − S'θ, plus the intercept rows, Levenberg-damped by mu."""
    N = K.shape[0]
    size = m + N + 2
    om, nu = th[:m], th[m:m + N]
    A = np.zeros((size, size))
    iw = np.arange(m)
    iv = m + np.arange(N)
    bw, bv = m + N, m + N + 1
    KL, KA = K[:m, :m], K[:m, :]  # rows of L against L (ω) and against L∪T (ν)
    # rows for f (classifier predictor on L)
    A[:m, :m] = t.c[:, None] * KL
    A[:m, m:m + N] = t.a[:, None] * KA
    A[:m, bw] = t.c
    A[:m, bv] = t.a
    # rows for z on L
    A[m:2 * m, :m] = t.a[:, None] * KL
    A[m:2 * m, m:m + N] = t.lam_vL[:, None] * KA
    A[m:2 * m, bw] = t.a
    A[m:2 * m, bv] = t.lam_vL
    # rows for z on T
    A[2 * m:m + N, m:m + N] = t.lam_vT[:, None] * K[m:, :]
    A[2 * m:m + N, bv] = t.lam_vT
    # S' (+ damping) on the diagonal
    A[iw, iw] += pw + mu
    A[iv, iv] += pv + mu
    # intercept rows: Σ(S+μ)Δ − μΔβ = −Σ Sθ
    A[bw, :m] = pw + mu
    A[bv, m:m + N] = pv + mu
    A[bw, bw] = A[bv, bv] = -mu
    rhs = np.concatenate([t.a - pw * om, t.e_vL - pv * nu[:m], t.e_vT - pv * nu[m:],
                          [-pw * om.sum(), -pv * nu.sum()]])
    return linalg.solve(A, rhs, overwrite_a=True, check_finite=False)


class TwoStageLogisticRegression(ClassifierMixin, BaseEstimator):
    """DL §6 two-stage baselines: importance weights first (eq. 7, SSB's 1/p(s=1|x), or KMM), then weighted LR.

    kind="discriminative" ("two-stage LR"): w_i = (m/n)(1/q_i − 1), q_i = p(σ=1|x_i) from an L2 LR
    (``C_domain``) separating source from target rows (DL eq. 7). kind="ssb" ("two-stage LR for SSB",
    Zadrozny 2004): w_i = 1/q_i. kind="kmm" (DL §6's third baseline): KMM eq. 12 weights,
    ``shiftlib.weights.KMM(**weighter_params)``. All weights are normalised to mean 1 over the source
    rows (house convention), multiplied by ``sample_weight`` when given, then an L2 LR (``C``) is fitted.

    ``cv``: folds for out-of-fold q_i via ``shiftlib.weights`` (the house default, 5); ``cv=None`` fits
    the discriminator in-sample on all rows, DL §6's literal protocol (then ``random_state`` is unused).
    Features are standardised on the pooled rows L ∪ T, as in ``CovariateShiftLogisticRegression``.
    Learned: ``classes_``, ``weights_`` (mean 1), ``ess_``, ``weighter_`` (the shiftlib.weights estimator,
    or None in-sample), ``estimator_`` (the weighted sklearn LR on standardised features).

    Parameters
    ----------
    kind : {"discriminative", "ssb", "kmm"}, default "discriminative"
        Which importance weights stage 1 computes.
    C : float, default 1.0
        Inverse L2 strength of the stage-2 LR.
    C_domain : float, default 1.0
        Inverse L2 strength of the source-vs-target LR (not used by ``kind="kmm"``).
    cv : int or None, default 5
        Folds for out-of-fold q_i; None fits the discriminator in-sample (not used by ``kind="kmm"``).
    random_state : int, default 0
        Seed of the out-of-fold split (unused in-sample and by ``kind="kmm"``).
    weighter_params : dict, optional
        Extra parameters of the ``shiftlib.weights`` weighter (not used in-sample).
    standardize : bool, default True
        Standardise features with the mean / sd of the pooled rows L ∪ T.
    """

    requires_target = True

    def __init__(
        self,
        kind: Literal["discriminative", "ssb", "kmm"] = "discriminative",
        C: float = 1.0,
        C_domain: float = 1.0,
        cv: int | None = 5,
        random_state: int = 0,
        weighter_params: dict[str, Any] | None = None,
        standardize: bool = True,
    ) -> None:
        self.kind = kind
        self.C = C
        self.C_domain = C_domain
        self.cv = cv
        self.random_state = random_state
        self.weighter_params = weighter_params
        self.standardize = standardize

    def _weights(self, Ls: np.ndarray, Ts: np.ndarray) -> np.ndarray:
        from shiftlib.weights import make_weighter, normalize_weights

        m, n = len(Ls), len(Ts)
        extra = dict(self.weighter_params or {})
        if self.kind == "kmm":
            self.weighter_ = make_weighter("kmm", standardize=False, **extra).fit(Ls, Ts)
            return self.weighter_.weights_
        if self.cv is None:  # DL §6 literally: one in-sample discriminator on all rows
            self.weighter_ = None
            dom = _lr(self.C_domain).fit(np.vstack([Ls, Ts]), np.r_[np.ones(m), np.zeros(n)])
            q = dom.predict_proba(Ls)[:, 1]
            raw = (m / n) * (1.0 / q - 1.0) if self.kind == "discriminative" else 1.0 / q
            return normalize_weights(raw)
        clf = LogisticRegression(C=self.C_domain, max_iter=1000)  # features are already standardised
        self.weighter_ = make_weighter(self.kind, classifier=clf, cv=self.cv, random_state=self.random_state,
                                       **extra).fit(Ls, Ts)
        return self.weighter_.weights_

    def fit(self, X: Any, y: Any, *, X_target: Any, sample_weight: Any = None) -> TwoStageLogisticRegression:
        """Stage 1: importance weights from (X, X_target); stage 2: weighted LR on (X, y); returns self.

        Parameters
        ----------
        X : array-like of shape (m, d)
            Labeled source rows.
        y : array-like of shape (m,)
            Two distinct labels.
        X_target : array-like of shape (n, d)
            Unlabeled target rows, same columns as ``X``.
        sample_weight : array-like of shape (m,), optional
            Multiplies the importance weights in stage 2.

        Returns
        -------
        TwoStageLogisticRegression
            The fitted estimator.
        """
        if self.kind not in ("discriminative", "ssb", "kmm"):
            raise ValueError(f"kind must be 'discriminative' (DL eq. 7), 'ssb' (1/p(s=1|x)) or 'kmm', "
                             f"got {self.kind!r}")
        Xs, y01, Xt, sw = _check_source(self, X, y, X_target, sample_weight)
        self.mean_, self.scale_ = _pooled_scaling(Xs, Xt, self.standardize)
        Ls = (Xs - self.mean_) / self.scale_
        Ts = (Xt - self.mean_) / self.scale_
        w = self._weights(Ls, Ts)
        self.weights_ = w
        self.ess_ = float(w.sum() ** 2 / np.sum(w**2))
        self.estimator_ = _lr(self.C).fit(Ls, y01, sample_weight=w * sw)
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        """Logit of the weighted LR for the positive class ``classes_[1]``.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Rows to score.

        Returns
        -------
        ndarray of shape (n,)
            The logit per row.
        """
        check_is_fitted(self, "estimator_")
        X = validate_data(self, X, reset=False, dtype=float)
        return self.estimator_.decision_function((X - self.mean_) / self.scale_)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities of the weighted LR; columns follow ``classes_``.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Rows to score.

        Returns
        -------
        ndarray of shape (n, 2)
            Class probabilities.
        """
        p1 = expit(self.decision_function(X))
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X: Any) -> np.ndarray:
        """Most probable class label.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Rows to score.

        Returns
        -------
        ndarray of shape (n,)
            Predicted class labels.
        """
        return self.classes_[(self.decision_function(X) > 0).astype(int)]
