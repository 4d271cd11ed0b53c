"""Labels carried across batches: yesterday's labeled rows, importance-weighted to today's batch, as the prior of
today's few-label plan and selection.

A deployment labels rows of each nightly batch (``plan_labels`` / ``fewlabel_select``). Today's batch is a new
sample, so yesterday's labeled rows are not rows of it and ``already_labeled`` (row positions in today's batch)
cannot hold them. They still say how the candidates compare *on today's population* once each is weighted by the
density ratio between the two batches: ``E_today[c_j(x)] = E_yesterday[w(x) c_j(x)]`` with
``w(x) = p_today(x)/p_yesterday(x)`` (importance weighting under covariate shift: Shimodaira, J. Stat. Plan.
Inference 2000; Sugiyama, Krauledat & Müller, "Covariate shift adaptation by importance weighted cross
validation", JMLR 8, 2007; for label estimates drawn with unequal probabilities, the weighted estimates of
active testing, Kossen et al., ICML 2021). ``carry_labels`` returns that estimate with its covariance;
``CarriedLabels.as_prior()`` hands it to ``plan_labels`` / ``fewlabel_select`` through their ``prior`` argument,
which combines it with today's labels by inverse variance in the space of contrasts, with the learned shift term
τ² (``shiftlib.selection.fewlabel``, "Prior") standing for a change of p(y | x) between the nights that the
weights cannot see. Given a source prior (``prior=source_cv(...)``), the carried labels are first combined with
it by the same rule, so today's prior holds both.

Notation: today's batch T (N rows), yesterday's batch T' (N' rows), ℓ candidates; ``c_ij = 1[ŷ_j(x_i) = y_i]``;
D_t the rows where today's candidates disagree (of either batch), A_t = T \\ D_t; yesterday's plan drew its
labels from its disagreement rows D' (which must contain D_t ∩ T': the same candidates, or fewer disagreements);
``h_i = w_i c_i 1[i ∈ D_t]`` on T', with w the importance weights normalised to mean 1 over T'.

**Estimate.** ``θ_C = (1/N) Σ_{A_t} p̄(ŷ | x_i) + Ŝ/N'``: the common part of today's batch exactly as
``fewlabel_select`` takes it (the candidates' mean probability of their shared class; the same for every
candidate, so it sets the level, never the order), plus ``Ŝ/N'``, the estimate of ``E_today[c 1[D_t]]``.
``Ŝ`` is yesterday's plan's own estimator of the total ``Σ_{T'} h`` (``fewlabel._label_estimate``, with h in
place of c): per round r over its population R_r = D' \\ (labeled before r),
``E_r = Σ_{before r} h_i + Σ_{R_r} ĝ_i + Σ_{S_r} (h_i − ĝ_i)/π_i``, rounds averaged by size, with the surrogate
``ĝ_i = w_i p̄(ŷ_j(x_i) | x_i) 1[i ∈ D_t]`` (``estimator='difference'``, the model-assisted difference estimator of
Särndal, Swensson & Wretman 1992, §6.3) or ĝ = 0 (``'ht'``, Horvitz–Thompson); labels given without a plan are a
simple random sample of T' (``Σ_{T'} ĝ + (N'/m) Σ_{S_0} (h − ĝ)``). Requested rows left unlabeled are missing at
random within their round (its π scaled by the share answered) and stand in as ĝ where later rounds count them as
labeled before, as in ``fewlabel``. ``Ŝ`` is unbiased for ``Σ_{T'} h`` over yesterday's design, and
``Σ_{T'} h / N'`` for ``E_today[c 1[D_t]]`` when w is the true density ratio (up to the normalisation of w over
T', a ratio estimator: consistent, bias O(1/N')). With w ≡ 1, no plan (uniform labels) and candidates that
disagree on every row, ``θ_C`` is the plain mean of c over the labeled rows.

**Covariance** (the three parts are independent): ``V_C = V_design/N'² + Cov_y(h − w μ)/N' + Cov_t(c 1[D_t])/N``
with ``μ = Ŝ/N'``. V_design is the Hansen–Hurwitz form of ``fewlabel`` per round (draw probabilities π/n, with
(1 − m/N') for the simple random sample), Σ_r α_r² V_r. The second term is yesterday's batch as a sample of its
population (the linearised variance of the weight-normalised ratio), the third today's batch as a sample of its
own: θ is the accuracy on today's batch, so carried labels, however many, leave this part (about
P(disagree)/N per contrast; 0.03² for a 200-row batch whose candidates disagree on a fifth of it). Both
population moments are estimated from the labeled rows with yesterday's design weights (Horvitz–Thompson).
Not included: the error of the estimated weights themselves, and any change of p(y | x) between the nights;
τ² of the combination (learned from today's labels) stands for both.

Bad input gets one line: yesterday's batch in another schema (different columns), row keys repeated within or
across the batches, predictions that do not match the batches, or candidates that disagree where yesterday's plan
could not draw.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..weights import effective_sample_size
from ._validation import check_X
from .fewlabel import (
    DEFAULT_ESTIMATOR,
    LabelPlan,
    TargetPredictions,
    _combine,
    _labels_map,
    _prior,
)
from .importance import importance_weights
from .results import SelectorScores

__all__ = ["CarriedLabels", "carry_labels", "prior_scores"]

#: estimators of the carried total: Horvitz–Thompson, or the difference estimator with the p̄ surrogate
CARRY_ESTIMATORS = ("ht", "difference")


@dataclass(frozen=True, eq=False)
class CarriedLabels:
    """Today's accuracy of each candidate as yesterday's labels estimate it, weighted for the shift.

    ``theta`` (ℓ) and ``cov`` (ℓ × ℓ) are the estimate and its covariance (module docstring); with a source prior
    they are its combination with the prior (``details['tau2']``, ``details['prior_weight']``). ``weights``: the
    importance weights of yesterday's rows (mean 1 over yesterday's batch); ``ess``: their effective number
    (Kish) over the labeled rows; ``n_carried``: labeled rows used.

    Parameters
    ----------
    names : list of str
        The candidates, in the order of ``theta``.
    theta : numpy.ndarray
        Estimated accuracy of each candidate on today's batch (ℓ).
    cov : numpy.ndarray
        Covariance of ``theta`` (ℓ × ℓ).
    weights : numpy.ndarray
        Importance weight of each row of yesterday's batch (all ones without shift correction).
    n_carried : int
        Number of yesterday's labeled rows used.
    ess : float
        Kish effective number of the weights over the labeled rows (0 when they sum to 0).
    details : dict, default {}
        Diagnostics: the weights and estimator used, the common part, the covariance parts, row counts of
        the design (``n_missing_requested``, ``n_extra``, ``rounds_used``) and, with a prior, ``tau2``,
        ``prior_weight`` and ``prior``.
    """

    names: list[str]
    theta: np.ndarray
    cov: np.ndarray
    weights: np.ndarray
    n_carried: int
    ess: float
    details: dict[str, Any] = field(default_factory=dict)

    def as_prior(self) -> SelectorScores:
        """The estimate as the ``prior`` of ``plan_labels`` / ``fewlabel_select``: a ``SelectorScores`` (selector
        ``"carried"``) whose fold scores have exactly ``theta`` as their mean and ``cov`` as their covariance of
        the mean (``prior_scores``)."""
        return prior_scores("carried", self.names, self.theta, self.cov, {"n_carried": self.n_carried,
                                                                          "ess": self.ess})


def prior_scores(selector: str, names: list[str], theta: Any, cov: Any, params: dict[str, Any] | None = None
                 ) -> SelectorScores:
    """A mean ``theta`` and covariance ``cov`` in the form ``fewlabel``'s prior reads (``details['fold_scores']``,
    whose mean is the estimate and whose covariance / k the estimate's covariance); returns ``SelectorScores``.

    k = ℓ + 1 points ``θ + √(k(k − 1)) · U Lᵀ`` with ``cov = L Lᵀ`` and U (k × ℓ) orthonormal columns orthogonal to
    the all-ones vector: their mean is θ and ``np.cov(ddof=1)/k`` is ``U``-free: ``k(k − 1) L Lᵀ/((k − 1) k)``.

    Parameters
    ----------
    selector : str
        The name of the returned ``SelectorScores``.
    names : list of str
        The candidates, in the order of ``theta``.
    theta : array-like
        The estimate, one value per name.
    cov : array-like
        Its covariance (ℓ × ℓ); symmetrised and clipped to positive semi-definite.
    params : dict or None, default None
        Recorded as ``details["params"]``.

    Returns
    -------
    SelectorScores
        Scores ``theta`` with ℓ + 1 fold scores per candidate in ``details["fold_scores"]``.
    """
    theta = np.asarray(theta, float)
    cov = np.asarray(cov, float)
    ell = len(names)
    if theta.shape != (ell,) or cov.shape != (ell, ell):
        raise ValueError(f"theta must have one value per name and cov be {ell} × {ell}; got {theta.shape} and "
                         f"{cov.shape}")
    lam, Q = np.linalg.eigh((cov + cov.T) / 2)
    L = Q * np.sqrt(np.clip(lam, 0.0, None))
    k = ell + 1
    basis, _ = np.linalg.qr(np.column_stack([np.ones(k), np.eye(k)[:, :ell]]))
    U = basis[:, 1:]  # k × ℓ, orthonormal, orthogonal to 1
    F = theta + np.sqrt(k * (k - 1)) * U @ L.T
    return SelectorScores.from_fold_scores(selector, {n: F[:, j] for j, n in enumerate(names)}, dict(params or {}))


def _keys(keys: Any, n: int, what: str) -> np.ndarray | None:
    if keys is None:
        return None
    k = np.asarray(list(keys), dtype=object)
    if k.shape != (n,):
        raise ValueError(f"{what} has {len(k)} row keys for {n} rows: pass one key per row")
    dup = pd.Index(k)[pd.Index(k).duplicated()].unique().tolist()
    if dup:
        raise ValueError(f"{what} repeats row keys {dup[:5]}: each row needs its own key; drop the repeated rows "
                         "or fix the keys")
    return k


def _check_inputs(X_prev: Any, X_target: Any, predictions_prev: TargetPredictions, predictions: TargetPredictions,
                  keys_prev: Any, keys_target: Any) -> tuple[Any, Any]:
    Xp = check_X(X_prev, "X_prev")
    try:
        Xt = check_X(X_target, "X_target", like=Xp, like_name="X_prev")
    except ValueError as err:
        raise ValueError(f"yesterday's labels come from another schema ({err}): carry labels only between batches "
                         "with the same input columns, or plan today afresh without them") from err
    kp, kt = _keys(keys_prev, len(Xp), "yesterday's batch"), _keys(keys_target, len(Xt), "today's batch")
    if (kp is None) != (kt is None):
        raise ValueError("row keys were given for only one batch: pass keys_prev and keys_target, or neither")
    if kp is not None:
        both = pd.Index(kp).intersection(pd.Index(kt)).tolist()
        if both:
            raise ValueError(f"row keys {both[:5]} ({len(both)} in all) are in yesterday's batch and in today's: "
                             "their labels would count twice; drop those rows from one batch, or label them today "
                             "through already_labeled")
    if predictions_prev.n_target != len(Xp) or predictions.n_target != len(Xt):
        raise ValueError(f"predictions cover {predictions_prev.n_target} and {predictions.n_target} rows but the "
                         f"batches have {len(Xp)} and {len(Xt)}: predict yesterday's and today's batch with today's "
                         "candidates")
    if list(predictions_prev.names) != list(predictions.names):
        raise ValueError(f"yesterday's rows were predicted by {list(predictions_prev.names)} but today's by "
                         f"{list(predictions.names)}: predict both batches with today's candidates")
    return Xp, Xt


def _design_total(plan: LabelPlan | None, labeled: np.ndarray, N: int, D: np.ndarray, H: np.ndarray,
                  G: np.ndarray | None, stand_in: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Yesterday's plan's estimate of the total ``Σ_{T'} H`` (H: N × q, read on labeled rows only) and its
    Hansen–Hurwitz covariance (module docstring; the same rounds, π rescale and simple-random-sample form as
    ``fewlabel._label_estimate``). ``G``: the surrogate on every row (None: Horvitz–Thompson); ``stand_in``: the
    value of a requested row left unlabeled when a later round counts it as labeled before."""
    q = H.shape[1]
    Gs = np.zeros_like(H) if G is None else G
    planned = set() if plan is None else set(plan.rows[plan.rounds > 0].tolist())
    extra = np.array(sorted(set(np.flatnonzero(labeled).tolist()) - planned), int)
    estimates, sizes, variances = [], [], []
    missing = 0
    if plan is not None:
        for r_info in plan.details.get("round_info", []):
            sel = plan.rounds == r_info["round"]
            rows, pis = plan.rows[sel], plan.probabilities[sel]
            got = labeled[rows]
            missing += int((~got).sum())
            if not got.any():
                continue
            rows, pis = rows[got], pis[got] * (got.sum() / len(got))
            before = np.asarray(r_info["labeled_before"], int)
            known = sum((H[i] if labeled[i] else stand_in[i] for i in before), np.zeros(q))
            pop = D[~np.isin(D, before)]
            R = H[rows] - Gs[rows]
            cert = pis >= 1 - 1e-12
            est = known + Gs[pop].sum(axis=0) + R[cert].sum(axis=0) + (R[~cert] / pis[~cert, None]).sum(axis=0)
            U, n_u = R[~cert], int((~cert).sum())
            if n_u >= 2:
                z = U / (pis[~cert] / n_u)[:, None]
                dz = z - z.mean(axis=0)
                V = dz.T @ dz / (n_u * (n_u - 1))
            elif n_u == 1:
                z = U[0] / pis[~cert][0]
                V = np.outer(z, z)
            else:
                V = np.zeros((q, q))
            estimates.append(est)
            sizes.append(len(rows))
            variances.append(V)
    if len(extra):
        m = len(extra)
        R = H[extra] - Gs[extra]
        estimates.append(Gs.sum(axis=0) + R.mean(axis=0) * N)
        S = np.cov(R, rowvar=False, ddof=1).reshape(q, q) if m >= 2 else np.outer(R[0], R[0])
        variances.append(N * N * (1 - m / N) * S / m)
        sizes.append(m)
    if not estimates:
        raise ValueError("none of yesterday's labels can be used: no labeled row (fill in y_prev) or no round "
                         "with a label; carry nothing and plan today afresh")
    alpha = np.asarray(sizes, float) / sum(sizes)
    total = sum(a * e for a, e in zip(alpha, estimates, strict=True))
    V = sum(a * a * v for a, v in zip(alpha, variances, strict=True))
    return total, V, {"n_missing_requested": missing, "n_extra": int(len(extra)), "rounds_used": len(sizes)}


def _psd(V: np.ndarray) -> np.ndarray:
    lam, Q = np.linalg.eigh((V + V.T) / 2)
    return (Q * np.clip(lam, 0.0, None)) @ Q.T


def _check_carry_args(estimator: str, predictions_prev: Any, predictions: Any, plan_prev: Any, prior: Any) -> None:
    """Refuse an unknown estimator and arguments of the wrong kind."""
    if estimator not in CARRY_ESTIMATORS:
        raise ValueError(f"estimator={estimator!r} is not known: use one of {list(CARRY_ESTIMATORS)}")
    if not isinstance(predictions_prev, TargetPredictions) or not isinstance(predictions, TargetPredictions):
        raise TypeError("predictions_prev and predictions must be TargetPredictions (target_predictions) of today's "
                        "candidates on yesterday's and today's batch")
    if plan_prev is not None and not isinstance(plan_prev, LabelPlan):
        raise TypeError(f"plan_prev must be yesterday's LabelPlan or None (got {type(plan_prev).__name__})")
    if prior is not None and not isinstance(prior, SelectorScores):
        raise TypeError("prior must be None or a k-fold SelectorScores of today's candidates (e.g. source_cv(...))")


def _yesterday_labels(plan: LabelPlan | None, y_prev: Any, Np: int, predictions_prev: TargetPredictions,
                      classes: np.ndarray) -> tuple[dict[int, Any], np.ndarray]:
    """Yesterday's labels (row → label) and the disagreement rows D' its plan drew from, refused where they cannot
    stand for today's candidates (D_t ∩ T' must lie in D')."""
    if plan is not None and plan.n_target != Np:
        raise ValueError(f"plan_prev was made for a batch of {plan.n_target} rows but X_prev has {Np}: pass "
                         "yesterday's whole batch")
    labels = _labels_map(plan, y_prev, Np, classes)
    if not labels:
        raise ValueError("y_prev holds no label: carry nothing and plan today afresh")
    Dt_prev = predictions_prev.disagreement
    if plan is None or not len(plan.rows[plan.rounds > 0]):
        return labels, Dt_prev
    D_plan = np.asarray(plan.details.get("disagreement"), int)
    outside = np.setdiff1d(Dt_prev, D_plan)
    if len(outside):
        raise ValueError(f"today's candidates disagree on {len(outside)} rows of yesterday's batch where "
                         "yesterday's plan could not draw labels: its labels cannot stand for them; carry "
                         "labels between plans of the same candidates, or plan today afresh")
    return labels, D_plan


def _shift_weights(weights: Any, Xp: Any, Xt: Any, random_state: int) -> tuple[np.ndarray, str]:
    """The importance weights today/yesterday on yesterday's rows (all ones for ``weights=None``) and their name."""
    if weights is None:
        return np.ones(len(Xp)), "none"
    if isinstance(weights, str) and weights == "discriminative":
        from shiftlib.weights import DiscriminativeWeights

        weights = DiscriminativeWeights(random_state=random_state)
    w = importance_weights(weights, Xp.to_numpy() if isinstance(Xp, pd.DataFrame) else Xp,
                           Xt.to_numpy() if isinstance(Xt, pd.DataFrame) else Xt)
    return w, (weights if isinstance(weights, str) else type(weights).__name__)


@dataclass(frozen=True, eq=False)
class _Yesterday:
    """Yesterday's batch as the carried estimate reads it: its plan (None: uniform labels) and the disagreement rows
    D' it drew from, the labeled rows (mask), the importance weights w, today's candidates' disagreement rows D_t
    (mask), c on the labeled rows (0 elsewhere) and p̄(ŷ_j | x_i), all on yesterday's N' rows."""

    plan: LabelPlan | None
    D_plan: np.ndarray
    labeled: np.ndarray
    w: np.ndarray
    in_D: np.ndarray
    C: np.ndarray
    p_right: np.ndarray

    @classmethod
    def of(cls, plan: LabelPlan | None, D_plan: np.ndarray, labels: dict[int, Any], w: np.ndarray,
           predictions_prev: TargetPredictions) -> _Yesterday:
        """Yesterday's batch from its plan, D', labels, weights and today's candidates' predictions on it."""
        Np, ell = predictions_prev.predictions.shape
        in_D = np.zeros(Np, bool)
        in_D[predictions_prev.disagreement] = True
        labeled = np.zeros(Np, bool)
        labeled[list(labels)] = True
        Pp = predictions_prev.predictions
        C = np.zeros((Np, ell))
        for i, lab in labels.items():
            C[i] = Pp[i] == lab
        return cls(plan, D_plan, labeled, w, in_D, C, predictions_prev.right_proba())

    @property
    def H(self) -> np.ndarray:
        """h = w c 1[D_t], whose total over T' estimates N' E_today[c 1[D_t]]."""
        return self.w[:, None] * self.C * self.in_D[:, None]

    @property
    def G(self) -> np.ndarray:
        """ĝ = w p̄ 1[D_t], the surrogate of h (and its stand-in on a requested row left unlabeled)."""
        return self.w[:, None] * self.p_right * self.in_D[:, None]

    def total(self, H: np.ndarray, G: np.ndarray | None, stand_in: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        """Yesterday's design estimate of Σ_{T'} H with its covariance (``_design_total``)."""
        return _design_total(self.plan, self.labeled, len(self.w), self.D_plan, H, G, stand_in)


def _carried_estimate(y: _Yesterday, estimator: str) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """μ = Ŝ/N', the estimate of E_today[c 1[D_t]] (module docstring, "Estimate"; ĝ = 0 for 'ht'), with the design
    covariance of Ŝ and the design's row counts."""
    G_all = y.G
    total, V_design, info = y.total(y.H, None if estimator == "ht" else G_all, G_all)
    return total / len(y.w), V_design, info


def _population_covariances(y: _Yesterday, mu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The population moments behind the second and third parts of the covariance (module docstring):
    Cov_y(h − w μ) of yesterday's batch and Cov_t(c 1[D_t]) of today's, both estimated from the labeled rows with
    yesterday's design weights (Horvitz–Thompson)."""
    Np, ell = y.C.shape

    def outer(X: np.ndarray) -> np.ndarray:
        return np.einsum("ia,ib->iab", X, X).reshape(Np, -1)

    w = y.w
    M_y = y.total(outer(y.H - w[:, None] * mu), None, outer(y.G - w[:, None] * mu))[0].reshape(ell, ell) / Np
    # E_today[c cᵀ 1[D]] = E_yesterday[w c cᵀ 1[D]]; rows outside D_t hold 0 (a D' row outside D_t is not counted)
    sw = np.sqrt(w * y.in_D)[:, None]
    M_t = y.total(outer(sw * y.C), None, outer(sw * y.p_right))[0].reshape(ell, ell) / Np
    return _psd(M_y), _psd(M_t - np.outer(mu, mu))


def _common_sum(predictions: TargetPredictions) -> float:
    """Σ_{A_t} p̄(ŷ | x_i) over today's rows where the candidates agree, as ``fewlabel_select`` takes it."""
    A = np.setdiff1d(np.arange(predictions.n_target), predictions.disagreement)
    return float(predictions.right_proba(A)[:, 0].sum()) if len(A) else 0.0


def _with_prior(theta: np.ndarray, V: np.ndarray, prior: SelectorScores, names: list[str]
                ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """The carried estimate combined with a source prior as ``fewlabel`` combines labels with one (inverse variance
    in contrasts, τ²), with the combination's ``tau2``, ``prior_weight`` and ``prior``."""
    pri = _prior(prior, None, None, None, None, None, names)  # reads the fold scores only
    est = _combine((theta, V, {}), pri, len(names))
    return est.theta, est.cov, {"tau2": est.details["tau2"], "prior_weight": est.details["prior_weight"],
                                "prior": est.details.get("prior")}


def carry_labels(
    X_prev: Any,
    X_target: Any,
    *,
    y_prev: Any,
    plan_prev: LabelPlan | None,
    predictions_prev: TargetPredictions,
    predictions: TargetPredictions,
    prior: Any = None,
    weights: Any = "discriminative",
    estimator: str = DEFAULT_ESTIMATOR,
    keys_prev: Any = None,
    keys_target: Any = None,
    random_state: int = 0,
) -> CarriedLabels:
    """Today's accuracy of each candidate from yesterday's labels, importance-weighted for the shift between the
    batches (Sugiyama et al. 2007; Kossen et al. 2021), with its covariance; returns ``CarriedLabels``,
    whose ``as_prior()`` is the ``prior`` of today's ``plan_labels`` / ``fewlabel_select``.

    Parameters
    ----------
    X_prev, X_target
        Yesterday's whole batch (N' rows: the labeled rows and the others; the density ratio is fitted on it) and
        today's batch, in the same columns.
    y_prev
        Yesterday's labels: aligned with ``plan_prev.rows`` (None/NaN = never came back), or a mapping row
        position in ``X_prev`` → label.
    plan_prev
        Yesterday's ``LabelPlan`` (its rows, π and rounds), or None when the labels were not planned (a uniform
        sample of yesterday's batch).
    predictions_prev, predictions
        Today's candidates on yesterday's and on today's batch (``target_predictions``), same names and classes.
    prior
        None, or a k-fold ``SelectorScores`` of the same candidates (``source_cv``): the carried estimate is then
        combined with it as ``fewlabel`` combines labels with a prior (inverse variance in contrasts, τ²).
    weights
        The density ratio today/yesterday on yesterday's rows: a ``shiftlib.weights`` name or estimator (fitted with
        yesterday's batch as source and today's as target), one weight per row of ``X_prev``, or None (no shift
        correction). Default: discriminative weights (DL eq. 7) with ``random_state``.
    estimator
        ``'difference'`` (default, as ``fewlabel_select``'s) or ``'ht'``.
    keys_prev, keys_target
        Optional row keys of both batches (an id per row); a key in both batches is refused.
    random_state
        Seed of the discriminative weights' folds.

    Returns
    -------
    CarriedLabels
        ``theta``, ``cov`` (module docstring), the weights, their effective number over the labeled rows, and
        ``details`` (``weights``: the weights used; ``n_missing_requested``; with a prior, ``tau2`` and
        ``prior_weight``).
    """
    _check_carry_args(estimator, predictions_prev, predictions, plan_prev, prior)
    Xp, Xt = _check_inputs(X_prev, X_target, predictions_prev, predictions, keys_prev, keys_target)
    Np, N = len(Xp), len(Xt)
    labels, D_plan = _yesterday_labels(plan_prev, y_prev, Np, predictions_prev, predictions.classes)
    w, how = _shift_weights(weights, Xp, Xt, random_state)
    y = _Yesterday.of(plan_prev, D_plan, labels, w, predictions_prev)
    mu, V_design, info = _carried_estimate(y, estimator)  # mu: E_today[c 1[D_t]]
    cov_y, cov_t = _population_covariances(y, mu)
    V = _psd(V_design) / Np ** 2 + cov_y / Np + cov_t / N
    common = _common_sum(predictions)
    theta = common / N + mu
    rows = np.flatnonzero(y.labeled)
    details: dict[str, Any] = {**info, "weights": how, "estimator": estimator, "common": common / N,
                               "cov_parts": {"design": _psd(V_design) / Np ** 2, "yesterday": cov_y / Np,
                                             "today": cov_t / N}}
    if prior is not None:
        theta, V, combined = _with_prior(theta, V, prior, list(predictions.names))
        details.update(combined)
    n_eff = effective_sample_size(w[rows]) if w[rows].sum() > 0 else 0.0
    return CarriedLabels(list(predictions.names), theta, V, w, int(len(rows)), n_eff, details)
