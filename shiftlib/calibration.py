"""Calibration after undersampling and under prior shift (US §III–IV, Saerens et al. 2002).

Notation (docs/architecture.md "Undersampling"): positives (``y = pos_label``) are the minority class and are all
kept; negatives are kept at the rate ``beta = p(s=1 | y=−)`` (US §III-A). A model fitted on the
undersampled rows estimates ``p_s = p(+ | x, s=1)``; eq. 9 maps it back to ``p' ≈ p(+ | x)``, and
eq. 12 maps a threshold ``tau_s`` on ``p_s`` to the threshold ``tau'`` on ``p'`` that keeps every
decision. ``beta = N+/N−`` ("balanced") is the smallest valid rate: below it the undersampled set would
have more positives than negatives.

Positive class. ``pos_label=None`` resolves as follows: labels that are a subset of {0, 1} (also
``bool`` and {−1, 1}) → positive = 1 (``True``); any other labels (strings such as ``"yes"/"no"``) →
positive = the **minority** class of the training ``y`` (ties → the larger label, scikit-learn's
``classes_[1]``). Pass ``pos_label`` explicitly to override; it must be the minority class. The
functions raise when 1 is the majority of 0/1 labels; ``UndersampledClassifier`` instead takes the
minority class for every label type (it orders its ``predict_proba`` columns itself, so any binary y
fits, as scikit-learn's estimator contract expects).

imbalanced-learn convention. ``RandomUnderSampler(sampling_strategy=alpha)`` with a float ``alpha`` asks
for ``N_minority / N_majority_after = alpha``, so ``N_s− = N+/alpha`` and
``beta = N_s−/N− = (N+/N−)/alpha``; ``alpha = 1`` (or ``"auto"``) is ``beta = N+/N−``. ``undersample``
accepts either ``beta=`` or ``sampling_strategy=`` (not both) and reports the realised ``beta``.

Public API: ``undersample`` (→ ``UndersampleResult``), ``balanced_beta``, ``beta_from_sampling_strategy``,
``undersampled_posterior`` (eq. 3), ``correct_posterior`` (eq. 9), ``corrected_threshold`` (eq. 12),
``prior_shift`` (eq. 14), ``em_target_prior`` (→ ``PriorEstimate``), ``UndersampledClassifier``,
``reliability_figure``.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy import sparse
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.calibration import calibration_curve
from sklearn.utils import check_random_state, get_tags
from sklearn.utils._indexing import _safe_indexing  # row selection for arrays, DataFrames and sparse X
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_sample_weight,
    _num_samples,
    check_is_fitted,
    column_or_1d,
    has_fit_parameter,
    validate_data,
)

from shiftlib._validation import check_probabilities

if TYPE_CHECKING:  # matplotlib is imported only when a figure is drawn
    from matplotlib.figure import Figure

__all__ = [
    "PriorEstimate",
    "UndersampleResult",
    "UndersampledClassifier",
    "balanced_beta",
    "beta_from_sampling_strategy",
    "correct_posterior",
    "corrected_threshold",
    "em_target_prior",
    "oof_undersampling",
    "prior_shift",
    "reliability_figure",
    "resolve_pos_label",
    "undersample",
    "undersampled_posterior",
    "undersampling_metrics",
]

ArrayLike = Any


# ----------------------------------------------------------------------------------------------------
# validation helpers
# ----------------------------------------------------------------------------------------------------
def _check_beta(beta: Any) -> float:
    if isinstance(beta, bool) or not isinstance(beta, Real):
        raise ValueError(
            f"beta must be a number in (0, 1] — the fraction of negatives kept (US §III-A) — or 'balanced'; "
            f"got {beta!r}"
        )
    b = float(beta)
    if not (0.0 < b <= 1.0) or not np.isfinite(b):
        raise ValueError(
            f"beta must be in (0, 1] — the fraction of negatives kept, p(s=1|y=−) (US §III-A); got {b!r}. "
            "Use beta=1 for no undersampling and beta='balanced' (= N+/N−) for a balanced training set"
        )
    return b


def _check_prior(prior: Any, name: str) -> float:
    p = float(prior)
    if not (0.0 < p < 1.0):
        raise ValueError(
            f"{name} must be a class prior strictly between 0 and 1 (the share of positives); got {prior!r}"
        )
    return p


def _as_output(a: np.ndarray, like: Any) -> np.ndarray | float:
    """Return a float for scalar input, an array otherwise."""
    return float(a) if np.ndim(like) == 0 else a


def resolve_pos_label(y: ArrayLike, pos_label: Any = None, *, minority_default: bool = False) -> Any:
    """Return the positive (minority) label of binary ``y``; raises ``ValueError`` unless y is binary.

    Explicit ``pos_label`` wins. Otherwise labels that are a subset of {0, 1} (``bool``, {−1, 1}) give 1
    (the US §III-A convention), and any other labels (strings) give the minority class (ties → the larger
    label, scikit-learn's ``classes_[1]``). With ``minority_default=True`` (``UndersampledClassifier``)
    the minority class is chosen for every label type, so 0/1 data whose 1s are the majority still fit.

    Parameters
    ----------
    y : array-like
        Binary labels.
    pos_label : object, optional
        The positive label, if given; it must be one of the labels in ``y``.
    minority_default : bool, default False
        Take the minority class for every label type (not 1 for 0/1 labels).

    Returns
    -------
    object
        The positive label, as it appears in ``y``.

    Raises
    ------
    ValueError
        If ``y`` does not have exactly two classes, or ``pos_label`` is not one of them.
    """
    y = np.asarray(y)
    labels, counts = np.unique(y, return_counts=True)
    if labels.size < 2:
        raise ValueError(
            f"y has only one class ({labels.tolist()}); undersampling needs positive and negative rows — "
            "check the filter that produced this training set"
        )
    if labels.size > 2:
        raise ValueError(
            f"Only binary classification is supported. y has {labels.size} classes {labels.tolist()[:6]}; "
            "map y to positive-vs-rest (e.g. y == 'fraud') first"
        )
    if pos_label is not None:
        if pos_label not in labels.tolist():
            raise ValueError(f"pos_label={pos_label!r} is not one of the labels in y {labels.tolist()}")
        return labels[labels.tolist().index(pos_label)]
    minority = labels[0] if counts[0] < counts[1] else labels[1]
    if minority_default or labels.dtype.kind not in "biuf":
        return minority
    as_float = set(labels.astype(float).tolist())
    if as_float <= {0.0, 1.0} or as_float == {-1.0, 1.0}:
        return labels[-1]  # the label equal to 1 (True)
    return minority


@dataclass(frozen=True)
class _ClassCounts:
    pos_label: Any
    neg_label: Any
    pos_idx: np.ndarray
    neg_idx: np.ndarray

    @property
    def n_pos(self) -> int:
        return int(self.pos_idx.size)

    @property
    def n_neg(self) -> int:
        return int(self.neg_idx.size)


def _class_counts(y: np.ndarray, pos_label: Any, minority_default: bool = False) -> _ClassCounts:
    pos = resolve_pos_label(y, pos_label, minority_default=minority_default)
    is_pos = y == pos
    neg = np.unique(y[~is_pos])[0]
    return _ClassCounts(pos, neg, np.flatnonzero(is_pos), np.flatnonzero(~is_pos))


def balanced_beta(y: ArrayLike, pos_label: Any = None) -> float:
    """US §III-A: the balancing rate beta = N+/N− (the smallest valid beta); raises if N+ > N−.

    Parameters
    ----------
    y : array-like
        Binary labels.
    pos_label : object, optional
        The positive label; None resolves as in :func:`resolve_pos_label`.

    Returns
    -------
    float
        N+/N−.

    Raises
    ------
    ValueError
        If ``y`` is not binary or has more positives than negatives.
    """
    cc = _class_counts(np.asarray(y), pos_label)
    beta = cc.n_pos / cc.n_neg
    if beta > 1.0:
        raise ValueError(
            f"y has more positives ({cc.n_pos}, label {cc.pos_label!r}) than negatives ({cc.n_neg}); "
            "undersampling negatives cannot balance it — pass pos_label= the minority class"
        )
    return beta


def beta_from_sampling_strategy(sampling_strategy: float | str, n_pos: int, n_neg: int) -> float:
    """imbalanced-learn's float ``sampling_strategy`` alpha = N+/N_s− → US beta = (N+/N−)/alpha.

    ``"auto"`` (imbalanced-learn's default) means alpha = 1, i.e. beta = N+/N−.

    Parameters
    ----------
    sampling_strategy : float or str
        alpha in (0, 1], or one of imbalanced-learn's strings ``"auto"``, ``"majority"``, ``"not minority"``,
        ``"all"`` (each read as alpha = 1).
    n_pos : int
        N+, the positive (minority) rows.
    n_neg : int
        N−, the negative rows.

    Returns
    -------
    float
        beta = (N+/N−)/alpha.

    Raises
    ------
    ValueError
        For an unknown string, alpha outside (0, 1], or alpha < N+/N− (more negatives asked than exist).
    """
    if isinstance(sampling_strategy, str):
        if sampling_strategy not in ("auto", "majority", "not minority", "all"):
            raise ValueError(
                f"sampling_strategy={sampling_strategy!r} is not understood; pass a float alpha = "
                "N_minority/N_majority_after in (0, 1] or 'auto'"
            )
        alpha = 1.0
    else:
        alpha = float(sampling_strategy)
    if not (0.0 < alpha <= 1.0):
        raise ValueError(
            f"sampling_strategy must be in (0, 1] (the ratio N_minority/N_majority after resampling); "
            f"got {sampling_strategy!r}"
        )
    if alpha < n_pos / n_neg:
        raise ValueError(
            f"sampling_strategy={alpha:g} asks for more negatives than exist: the data already has "
            f"N+/N− = {n_pos / n_neg:.4g}; pass a value ≥ {n_pos / n_neg:.4g}"
        )
    return (n_pos / n_neg) / alpha


# ----------------------------------------------------------------------------------------------------
# undersampling
# ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class UndersampleResult:
    """US §III-A undersampled training set: all positives, ``n_neg_kept = round(beta·N−)`` negatives.

    ``beta`` is the realised rate ``n_neg_kept / n_neg`` — the one to pass to ``correct_posterior`` —
    and ``beta_requested`` the rate asked for. ``indices`` are the kept rows of the input, in order.

    Parameters
    ----------
    X : array-like, DataFrame or sparse matrix
        The kept rows of the input features.
    y : array-like or Series
        Their labels.
    indices : numpy.ndarray
        Positions of the kept rows in the input, sorted.
    beta : float
        The realised rate ``n_neg_kept / n_neg``.
    beta_requested : float
        The rate asked for.
    pos_label : object
        The positive label.
    n_pos : int
        N+, positives in the input (all kept).
    n_neg : int
        N−, negatives in the input.
    n_neg_kept : int
        Negatives kept, ``round(beta_requested·N−)``.
    sample_weight : numpy.ndarray or None, default None
        The kept rows' weights, when weights were given.
    """

    X: Any
    y: Any
    indices: np.ndarray
    beta: float
    beta_requested: float
    pos_label: Any
    n_pos: int
    n_neg: int
    n_neg_kept: int
    sample_weight: np.ndarray | None = None

    @property
    def train_prior(self) -> float:
        """pi+ = N+/(N+ + N−), the positive prior before undersampling."""
        return self.n_pos / (self.n_pos + self.n_neg)

    @property
    def undersampled_prior(self) -> float:
        """pi_s+ = N+/(N+ + beta·N−), the positive prior after undersampling (US Appendix)."""
        return self.n_pos / (self.n_pos + self.n_neg_kept)


def undersample(
    X: ArrayLike, y: ArrayLike, beta: float | str | None = None,
    random_state: int | np.random.RandomState | None = None, *, sampling_strategy: float | str | None = None,
    pos_label: Any = None, sample_weight: ArrayLike | None = None,
) -> UndersampleResult:
    """US §III-A: keep every positive and a uniform random ``round(beta·N−)`` of the negatives.

    Give ``beta`` ("balanced" = N+/N−, default when neither is given) or imbalanced-learn's
    ``sampling_strategy`` (alpha = N+/N_s−; beta = (N+/N−)/alpha), not both. Negatives are drawn without
    replacement, ignoring ``sample_weight`` (so class-conditional distributions are unchanged, US's
    assumption p(s|y, x) = p(s|y)); the kept rows' weights are returned alongside.

    Parameters
    ----------
    X : array-like, DataFrame or sparse matrix
        Features, one row per label.
    y : array-like
        Binary labels.
    beta : float or "balanced", optional
        The fraction of negatives kept, in (0, 1]; ``"balanced"`` (or None with no ``sampling_strategy``)
        means N+/N−.
    random_state : int, RandomState or None, optional
        Seed of the draw of negatives.
    sampling_strategy : float or str, optional
        imbalanced-learn's alpha instead of ``beta`` (:func:`beta_from_sampling_strategy`).
    pos_label : object, optional
        The positive (minority) label; None resolves as in :func:`resolve_pos_label`.
    sample_weight : array-like, optional
        Per-row weights; only the kept rows' are returned, the draw ignores them.

    Returns
    -------
    UndersampleResult
        The kept rows, their labels and weights, the realised and requested beta, and the class counts.

    Raises
    ------
    ValueError
        If both ``beta`` and ``sampling_strategy`` are given, the sizes differ, ``y`` is not binary, there are
        more positives than negatives, or ``beta`` is invalid or keeps fewer negatives than positives.
    """
    if beta is not None and sampling_strategy is not None:
        raise ValueError(
            "pass either beta= (fraction of negatives kept) or sampling_strategy= (imbalanced-learn's "
            "N_minority/N_majority after resampling), not both"
        )
    y_arr = column_or_1d(np.asarray(y), warn=False)
    n_rows = _num_rows(X)
    if n_rows != y_arr.shape[0]:
        raise ValueError(f"X has {n_rows} rows but y has {y_arr.shape[0]}; pass one label per row")
    cc = _class_counts(y_arr, pos_label)
    if cc.n_pos > cc.n_neg:
        raise ValueError(
            f"y has more positives ({cc.n_pos}, label {cc.pos_label!r}) than negatives ({cc.n_neg}): beta "
            f"would have to be below N+/N− = {cc.n_pos / cc.n_neg:.4g}, and beta must be in (0, 1]; pass "
            "pos_label= the minority class"
        )
    b, n_keep = _requested_beta(beta, sampling_strategy, cc)
    rng = check_random_state(random_state)
    kept_neg = rng.choice(cc.neg_idx, size=n_keep, replace=False)
    idx = np.sort(np.concatenate([cc.pos_idx, kept_neg]))
    sw = _kept_weights(sample_weight, n_rows, idx)
    y_out = _safe_indexing(y, idx) if hasattr(y, "iloc") else y_arr[idx]
    return UndersampleResult(
        X=_safe_indexing(X, idx),
        y=y_out,
        indices=idx,
        beta=n_keep / cc.n_neg,
        beta_requested=b,
        pos_label=cc.pos_label,
        n_pos=cc.n_pos,
        n_neg=cc.n_neg,
        n_neg_kept=n_keep,
        sample_weight=sw,
    )


def _requested_beta(beta: float | str | None, sampling_strategy: float | str | None,
                    cc: _ClassCounts) -> tuple[float, int]:
    """The rate asked for and the negatives it keeps; refused if it keeps fewer negatives than positives."""
    if sampling_strategy is not None:
        b = beta_from_sampling_strategy(sampling_strategy, cc.n_pos, cc.n_neg)
    elif beta is None or (isinstance(beta, str) and beta == "balanced"):
        b = cc.n_pos / cc.n_neg
    elif isinstance(beta, str):
        raise ValueError(f"beta={beta!r} is not understood; pass a number in (0, 1] or 'balanced'")
    else:
        b = _check_beta(beta)
    n_keep = int(np.rint(b * cc.n_neg))
    if n_keep < cc.n_pos:
        raise ValueError(
            f"beta={b:.4g} keeps {n_keep} negatives for {cc.n_pos} positives — more positives than "
            f"negatives. The smallest beta is N+/N− = {cc.n_pos / cc.n_neg:.4g}; pass beta='balanced' or a "
            "larger beta"
        )
    return b, n_keep


def _kept_weights(sample_weight: ArrayLike | None, n_rows: int, idx: np.ndarray) -> np.ndarray | None:
    """The kept rows' weights (None without weights), so the undersampled set keeps its row weights."""
    if sample_weight is None:
        return None
    sw_all = np.asarray(sample_weight, dtype=float).ravel()
    if sw_all.shape[0] != n_rows:
        raise ValueError(f"sample_weight has {sw_all.shape[0]} rows but X has {n_rows}")
    return sw_all[idx]


def _num_rows(X: Any) -> int:
    return int(_num_samples(X))


# ----------------------------------------------------------------------------------------------------
# posterior and threshold corrections
# ----------------------------------------------------------------------------------------------------
def _eq9(p: np.ndarray, beta: float) -> np.ndarray:
    # beta·p / (1 − (1 − beta)·p): algebraically eq. 9's denominator beta·p − p + 1. Each operation is
    # monotone under IEEE rounding, so the computed map is weakly monotone in p; clipping removes the
    # 1-ulp overshoot above 1 at p = 1.
    return np.clip((beta * p) / (1.0 - (1.0 - beta) * p), 0.0, 1.0)


def undersampled_posterior(p: ArrayLike, beta: float) -> np.ndarray | float:
    """US eq. 3: p_s = p / (p + beta·(1 − p)), the posterior after keeping negatives at rate beta.

    Parameters
    ----------
    p : float or array-like
        p(+|x) before undersampling, in [0, 1].
    beta : float
        The fraction of negatives kept, in (0, 1].

    Returns
    -------
    float or numpy.ndarray
        p_s, a float for scalar ``p``.
    """
    b = _check_beta(beta)
    a = check_probabilities(p, "p")
    out = np.clip(a / (a + b * (1.0 - a)), 0.0, 1.0)
    return _as_output(out, p)


def correct_posterior(p_s: ArrayLike, beta: float) -> np.ndarray | float:
    """US eq. 9: p' = beta·p_s / (beta·p_s − p_s + 1), the undersampled posterior mapped back to p(+|x).

    Parameters
    ----------
    p_s : float or array-like
        Posterior of a model fitted on the undersampled rows, in [0, 1].
    beta : float
        The (realised) fraction of negatives kept, in (0, 1].

    Returns
    -------
    float or numpy.ndarray
        p', a float for scalar ``p_s``.
    """
    b = _check_beta(beta)
    a = check_probabilities(p_s, "p_s")
    return _as_output(_eq9(a, b), p_s)


def corrected_threshold(tau_s: ArrayLike, beta: float) -> np.ndarray | float:
    """US eq. 12: tau' = beta·tau_s / ((beta − 1)·tau_s + 1), the threshold on p' keeping p_s > tau_s.

    Computed with the same arithmetic as eq. 9, so ``p_s == tau_s`` gives ``p' == tau'`` exactly and
    ``p_s <= tau_s`` implies ``p' <= tau'`` in floating point too.

    Parameters
    ----------
    tau_s : float or array-like
        Threshold(s) on p_s, in [0, 1].
    beta : float
        The (realised) fraction of negatives kept, in (0, 1].

    Returns
    -------
    float or numpy.ndarray
        tau', a float for scalar ``tau_s``.
    """
    b = _check_beta(beta)
    t = check_probabilities(tau_s, "tau_s")
    return _as_output(_eq9(t, b), tau_s)


def prior_shift(p: ArrayLike, train_prior: float, target_prior: float) -> np.ndarray | float:
    """US eq. 14 (Saerens et al. 2002): p_t = (pi_t/pi_s)·p / ((pi_t/pi_s)·p + ((1−pi_t)/(1−pi_s))·(1−p)).

    ``p`` is p(+|x) under the training prior ``train_prior``; the result is p(+|x) under
    ``target_prior`` (class-conditional densities unchanged). ``correct_posterior(p_s, beta)`` equals
    ``prior_shift(p_s, pi_s+, pi+)`` (US Appendix).

    Parameters
    ----------
    p : float or array-like
        p(+|x) under ``train_prior``, in [0, 1].
    train_prior : float
        pi_s, the positive prior the model was calibrated to, strictly between 0 and 1.
    target_prior : float
        pi_t, the positive prior to adjust to, strictly between 0 and 1.

    Returns
    -------
    float or numpy.ndarray
        p(+|x) under ``target_prior``, a float for scalar ``p``.
    """
    a = check_probabilities(p, "p")
    ps = _check_prior(train_prior, "train_prior")
    pt = _check_prior(target_prior, "target_prior")
    num = (pt / ps) * a
    out = np.clip(num / (num + ((1.0 - pt) / (1.0 - ps)) * (1.0 - a)), 0.0, 1.0)
    return _as_output(out, p)


@dataclass(frozen=True)
class PriorEstimate:
    """Saerens, Latinne & Decaestecker (2002) EM estimate of a batch's positive prior.

    Parameters
    ----------
    prior : float
        Estimated p(+) in the batch.
    proba : numpy.ndarray
        p(+|x) re-adjusted to that prior (eq. 14).
    n_iter : int
        EM iterations run.
    converged : bool
        |Δprior| < tol reached.
    train_prior : float
        The prior the input probabilities were calibrated to.
    log_likelihood : float
        Mean log-likelihood of the batch under ``prior`` up to a constant,
        Σ log(prior·p/π_tr + (1 − prior)·(1 − p)/(1 − π_tr)) / n.
    """

    prior: float
    proba: np.ndarray
    n_iter: int
    converged: bool
    train_prior: float
    log_likelihood: float


def _em_loglik(p: np.ndarray, train_prior: float, prior: float) -> float:
    mix = prior * p / train_prior + (1.0 - prior) * (1.0 - p) / (1.0 - train_prior)
    return float(np.mean(np.log(np.maximum(mix, 1e-300))))


def em_target_prior(
    proba: ArrayLike,
    train_prior: float,
    *,
    init_prior: float | None = None,
    tol: float = 1e-6,
    max_iter: int = 1000,
) -> PriorEstimate:
    """Saerens et al. 2002 (§2.3, eq. 2.9–2.10): EM estimate of the unlabeled batch's positive prior.

    ``proba`` are p(+|x) on the batch from a model calibrated to ``train_prior`` (for an
    ``UndersampledClassifier`` that is p' and ``train_prior_``). Iterates
    ``p^(s) = prior_shift(proba, train_prior, pi^(s))``, ``pi^(s+1) = mean(p^(s))`` until
    ``|pi^(s+1) − pi^(s)| < tol``. Each step does not decrease ``log_likelihood`` (EM).

    Parameters
    ----------
    proba : array-like
        p(+|x) on the batch, in [0, 1]; at least one row.
    train_prior : float
        The positive prior ``proba`` is calibrated to, strictly between 0 and 1.
    init_prior : float, optional
        Start of the iteration; default ``train_prior``.
    tol : float, default 1e-6
        Stop when the prior moves by less than this.
    max_iter : int, default 1000
        Most EM iterations.

    Returns
    -------
    PriorEstimate
        The estimated prior, the re-adjusted probabilities and the iteration record.

    Raises
    ------
    ValueError
        For an empty ``proba``, a prior outside (0, 1), or a ``max_iter`` that is not a positive integer.
    """
    p = check_probabilities(proba, "proba").ravel()
    if p.size == 0:
        raise ValueError("proba has 0 rows; the target batch must have at least one row")
    pi_tr = _check_prior(train_prior, "train_prior")
    if not (isinstance(max_iter, Integral) and max_iter >= 1):
        raise ValueError(f"max_iter must be a positive integer; got {max_iter!r}")
    lo, hi = 1e-12, 1.0 - 1e-12  # keep the iterate inside (0, 1) where eq. 14 is defined
    pi = pi_tr if init_prior is None else _check_prior(init_prior, "init_prior")
    converged = False
    n_iter = 0
    for n_iter in range(1, max_iter + 1):  # noqa: B007 — n_iter is reported
        adj = prior_shift(p, pi_tr, pi)
        new = float(np.clip(np.mean(adj), lo, hi))
        delta = abs(new - pi)
        pi = new
        if delta < tol:
            converged = True
            break
    adj = np.asarray(prior_shift(p, pi_tr, pi), dtype=float)
    return PriorEstimate(
        prior=pi,
        proba=adj,
        n_iter=n_iter,
        converged=converged,
        train_prior=pi_tr,
        log_likelihood=_em_loglik(p, pi_tr, pi),
    )


# ----------------------------------------------------------------------------------------------------
# meta-estimator
# ----------------------------------------------------------------------------------------------------
class UndersampledClassifier(ClassifierMixin, BaseEstimator):
    """US §III–IV: fit ``estimator`` on an undersampled copy, return p' (eq. 9), decide with tau' (eq. 12).

    ``predict(X)`` is ``pos_label_ if p' > threshold_ else the other class``, where
    ``threshold_ = tau' = corrected_threshold(tau_s_, beta_)``. For ``n_estimators == 1`` this is the
    decision ``p_s > tau_s`` of the undersampled model (US §IV-B), up to floating-point rounding of
    scores within ~1e-16 of tau_s. ``beta_`` is the realised rate ``round(beta·N−)/N−``.

    ``sample_weight`` is passed to the base estimator for the kept rows (only if its ``fit`` accepts it);
    the undersampling draw itself ignores the weights.

    Parameters
    ----------
    estimator : estimator
        A scikit-learn binary classifier with ``predict_proba``.
    beta : float or "balanced", default "balanced"
        A float in (0, 1] or ``"balanced"`` (= N+/N−) — the fraction of negatives kept.
    n_estimators : int, default 1
        1 fits one model; > 1 is UnderBagging (US §III-C, [23]): each member gets an
        independent undersample and ``predict_proba`` averages the members' corrected p'.
    random_state : int, RandomState or None, default None
        Seed for the undersampling draws (the base estimator keeps its own ``random_state``).
    tau_s : float or "prior", default 0.5
        The threshold on p_s whose decisions ``predict`` keeps. The default 0.5 is the undersampled
        model's own argmax rule; ``"prior"`` uses tau_s = pi_s+ (US eq. 10 in the undersampled space,
        the paper's §VI protocol), for which tau' = pi+. With ``beta="balanced"`` the two coincide
        (pi_s+ = 0.5, so tau' = pi+).
    pos_label : object, optional
        The positive label, whose rows are all kept; it must be the minority class. ``None`` →
        the minority class of the training y (ties → ``classes_[1]``) for every label type — for the
        usual 0/1 data with rare 1s that is 1; unlike the functions, 0/1 data whose 1s are the majority
        is not an error here (the 0s are then the kept "positives"), so any binary y fits.

    Attributes
    ----------
    classes_ : ndarray
        The two labels, sorted.
    pos_label_ : object
        The positive label used.
    beta_ : float
        The realised rate.
    train_prior_ : float
        pi+.
    undersampled_prior_ : float
        pi_s+.
    tau_s_ : float
        The threshold on p_s.
    threshold_ : float
        tau'.
    estimators_ : list of estimators
        The fitted members.
    estimator_ : estimator
        The first member.
    sample_indices_ : list of ndarray
        The rows each member was fitted on.
    n_features_in_ : int
        Number of features seen in ``fit``.
    """

    def __init__(
        self,
        estimator: Any,
        beta: float | str = "balanced",
        n_estimators: int = 1,
        random_state: int | np.random.RandomState | None = None,
        *,
        tau_s: float | str = 0.5,
        pos_label: Any = None,
    ) -> None:
        self.estimator = estimator
        self.beta = beta
        self.n_estimators = n_estimators
        self.random_state = random_state
        self.tau_s = tau_s
        self.pos_label = pos_label

    def __sklearn_tags__(self):  # sklearn's Tags object
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        try:
            base = get_tags(self.estimator)
            tags.input_tags.sparse = base.input_tags.sparse
            tags.input_tags.allow_nan = base.input_tags.allow_nan
            tags.input_tags.string = base.input_tags.string
            tags.input_tags.categorical = base.input_tags.categorical
        except Exception:  # an estimator without tags keeps the defaults
            pass
        return tags

    def _validate_params_(self) -> None:
        if not (isinstance(self.n_estimators, Integral) and not isinstance(self.n_estimators, bool)) or (
            self.n_estimators < 1
        ):
            raise ValueError(f"n_estimators must be a positive integer; got {self.n_estimators!r}")
        if not (isinstance(self.beta, str) and self.beta == "balanced"):
            if isinstance(self.beta, str):
                raise ValueError(f"beta={self.beta!r} is not understood; pass a number in (0, 1] or 'balanced'")
            _check_beta(self.beta)
        if isinstance(self.tau_s, str):
            if self.tau_s != "prior":
                raise ValueError(f"tau_s={self.tau_s!r} is not understood; pass a number in (0, 1) or 'prior'")
        elif not (isinstance(self.tau_s, Real) and 0.0 < float(self.tau_s) < 1.0):
            raise ValueError(f"tau_s must be a threshold strictly between 0 and 1, or 'prior'; got {self.tau_s!r}")
        if not hasattr(self.estimator, "fit") or not hasattr(self.estimator, "predict_proba"):
            raise ValueError(
                f"estimator must be a scikit-learn classifier with predict_proba; got {type(self.estimator).__name__}"
            )

    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> UndersampledClassifier:
        """Undersample (US §III-A) and fit the base estimator(s); set beta_, threshold_ (eq. 12) and priors.

        Parameters
        ----------
        X : array-like, DataFrame or sparse matrix
            Training features.
        y : array-like
            Binary training labels.
        sample_weight : array-like, optional
            Per-row weights passed to the base estimator for the kept rows.

        Returns
        -------
        UndersampledClassifier
            The fitted estimator.
        """
        self._validate_params_()
        X = self._validate_X(X, reset=True)
        y_arr = column_or_1d(y, warn=True)
        check_classification_targets(y_arr)
        if _num_rows(X) != y_arr.shape[0]:
            raise ValueError(f"X has {_num_rows(X)} rows but y has {y_arr.shape[0]}; pass one label per row")
        if sample_weight is not None:
            if not has_fit_parameter(self.estimator, "sample_weight"):
                raise ValueError(
                    f"sample_weight was given but {type(self.estimator).__name__}.fit does not accept it; "
                    "drop sample_weight or use a weight-aware estimator"
                )
            sample_weight = _check_sample_weight(sample_weight, y_arr.reshape(-1, 1))
        cc = _class_counts(y_arr, self.pos_label, minority_default=True)
        self.classes_ = np.unique(y_arr)
        self.pos_label_ = cc.pos_label
        self._neg_label = cc.neg_label

        rs = check_random_state(self.random_state)
        seeds = rs.randint(np.iinfo(np.int32).max, size=self.n_estimators)
        self.estimators_ = []
        self.sample_indices_ = []
        self._pos_col = []
        res = None
        for seed in seeds:
            res = undersample(
                X, y_arr, beta=self.beta, random_state=int(seed), pos_label=cc.pos_label,
                sample_weight=sample_weight,
            )
            est = clone(self.estimator)
            if res.sample_weight is None:
                est.fit(res.X, res.y)
            else:
                est.fit(res.X, res.y, sample_weight=res.sample_weight)
            est_classes = list(getattr(est, "classes_", self.classes_))
            self.estimators_.append(est)
            self.sample_indices_.append(res.indices)
            self._pos_col.append(est_classes.index(cc.pos_label))
        assert res is not None
        self.estimator_ = self.estimators_[0]
        self.beta_ = res.beta
        self.train_prior_ = res.train_prior
        self.undersampled_prior_ = res.undersampled_prior
        self.tau_s_ = self.undersampled_prior_ if self.tau_s == "prior" else float(self.tau_s)
        self.threshold_ = float(corrected_threshold(self.tau_s_, self.beta_))
        return self

    def _validate_X(self, X: ArrayLike, reset: bool) -> Any:
        """Check X as the base estimator's tags allow; DataFrames pass through untouched (a
        ColumnTransformer pipeline selects columns by name), only their width and names are recorded."""
        if hasattr(X, "iloc"):
            validate_data(self, X, skip_check_array=True, reset=reset)
            return X
        tags = get_tags(self.estimator).input_tags
        if sparse.issparse(X) and not tags.sparse:
            raise ValueError(
                f"X is a sparse matrix but {type(self.estimator).__name__} does not accept sparse input; "
                "densify X (X.toarray()) or use an estimator that supports sparse data"
            )
        return validate_data(
            self,
            X,
            reset=reset,
            accept_sparse=["csr", "csc"] if tags.sparse else False,
            dtype=None if (tags.string or tags.categorical) else "numeric",
            ensure_all_finite="allow-nan" if tags.allow_nan else True,
        )

    def _member_ps(self, X: ArrayLike) -> np.ndarray:
        check_is_fitted(self, "estimators_")
        X = self._validate_X(X, reset=False)
        return np.stack(
            [np.asarray(est.predict_proba(X))[:, col] for est, col in zip(self.estimators_, self._pos_col, strict=True)]
        )

    def _two_columns(self, p_pos: np.ndarray) -> np.ndarray:
        out = np.empty((p_pos.shape[0], 2))
        pos_idx = int(np.flatnonzero(self.classes_ == self.pos_label_)[0])
        out[:, pos_idx] = p_pos
        out[:, 1 - pos_idx] = 1.0 - p_pos
        return out

    def predict_proba_undersampled(self, X: ArrayLike) -> np.ndarray:
        """US eq. 3's p_s: the uncorrected probabilities of the model(s) fitted on the undersampled rows
        (members averaged), columns ordered as ``classes_``.

        Parameters
        ----------
        X : array-like, DataFrame or sparse matrix
            Rows to score.

        Returns
        -------
        ndarray of shape (n, 2)
            p_s and 1 − p_s in the columns of the positive and the other class.
        """
        ps = np.clip(self._member_ps(X).mean(axis=0), 0.0, 1.0)
        return self._two_columns(ps)

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """US eq. 9: p' = beta·p_s/(beta·p_s − p_s + 1) per member, averaged; columns ordered as ``classes_``.

        Parameters
        ----------
        X : array-like, DataFrame or sparse matrix
            Rows to score.

        Returns
        -------
        ndarray of shape (n, 2)
            p' and 1 − p' in the columns of the positive and the other class.
        """
        ps = np.clip(self._member_ps(X), 0.0, 1.0)
        p_corr = _eq9(ps, self.beta_).mean(axis=0)
        return self._two_columns(p_corr)

    def predict(self, X: ArrayLike) -> np.ndarray:
        """US §IV-B: ``pos_label_`` where p' > tau' (``threshold_``), the other class elsewhere.

        Parameters
        ----------
        X : array-like, DataFrame or sparse matrix
            Rows to score.

        Returns
        -------
        ndarray of shape (n,)
            Predicted labels.
        """
        proba = self.predict_proba(X)
        pos_idx = int(np.flatnonzero(self.classes_ == self.pos_label_)[0])
        return np.where(proba[:, pos_idx] > self.threshold_, self.pos_label_, self._neg_label)

    def estimate_target_prior(self, X: ArrayLike, **em_params: Any) -> PriorEstimate:
        """Saerens et al. 2002 EM on an unlabeled batch: its positive prior and p' re-adjusted to it.

        Parameters
        ----------
        X : array-like, DataFrame or sparse matrix
            The unlabeled batch.
        **em_params : dict
            Passed to :func:`em_target_prior` (``init_prior``, ``tol``, ``max_iter``).

        Returns
        -------
        PriorEstimate
            The batch's estimated positive prior and the re-adjusted p'.
        """
        pos_idx = int(np.flatnonzero(self.classes_ == self.pos_label_)[0])
        return em_target_prior(self.predict_proba(X)[:, pos_idx], self.train_prior_, **em_params)


# ----------------------------------------------------------------------------------------------------
# reliability diagram
# ----------------------------------------------------------------------------------------------------
def reliability_figure(
    y: ArrayLike, probas: dict[str, ArrayLike], n_bins: int = 10, pos_label: Any = 1
) -> Figure:
    """Reliability diagram (sklearn ``calibration_curve``, uniform bins) of each named p̂ against y.

    Top panel: mean predicted probability vs. observed positive rate per bin, one line per entry of
    ``probas`` (legend shows its Brier score, US eq. 13) and the diagonal of perfect calibration.
    Bottom panel: histogram of each p̂. Built on ``matplotlib.figure.Figure`` (no display needed).

    Parameters
    ----------
    y : array-like
        True labels.
    probas : dict of str to array-like
        Name → predicted probability of ``pos_label`` per row of ``y``.
    n_bins : int, default 10
        Uniform bins of the curve and the histogram.
    pos_label : object, default 1
        The positive label.

    Returns
    -------
    matplotlib.figure.Figure
        The two-panel figure.

    Raises
    ------
    ValueError
        If ``probas`` is empty, ``y`` has one class, or an entry's length differs from ``y``'s.
    """
    from matplotlib.figure import Figure  # lazy: keeps `import shiftlib.calibration` light

    from shiftlib.metrics import brier  # local import: metrics does not import calibration

    if not probas:
        raise ValueError("probas is empty; pass at least one {name: probabilities} entry")
    y_arr = np.asarray(y)
    yb = (y_arr == pos_label).astype(int)
    if yb.min() == yb.max():
        raise ValueError(
            f"y has a single class with pos_label={pos_label!r}; a reliability diagram needs both classes"
        )
    fig = Figure(figsize=(6.0, 7.0))
    gs = fig.add_gridspec(2, 1, height_ratios=(3, 1))
    ax = fig.add_subplot(gs[0])
    ax_hist = fig.add_subplot(gs[1], sharex=ax)
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfectly calibrated")
    for name, p in probas.items():
        pa = check_probabilities(p, f"probas[{name!r}]").ravel()
        if pa.shape[0] != yb.shape[0]:
            raise ValueError(f"probas[{name!r}] has {pa.shape[0]} rows but y has {yb.shape[0]}")
        frac_pos, mean_pred = calibration_curve(yb, pa, n_bins=n_bins, strategy="uniform")
        ax.plot(mean_pred, frac_pos, marker="o", label=f"{name} (Brier {brier(yb, pa):.4f})")
        ax_hist.hist(pa, bins=n_bins, range=(0, 1), histtype="step", label=name)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel("observed fraction of positives")
    ax.set_title("Reliability diagram")
    ax.legend(loc="upper left", fontsize="small")
    ax_hist.set_xlabel("predicted probability of the positive class")
    ax_hist.set_ylabel("rows")
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------------------------------
# evaluation of an undersampled learner (the flow's recalibration stage)
# ----------------------------------------------------------------------------------------------------
def undersampling_metrics(
    y: ArrayLike, p_s: ArrayLike, p_prime: ArrayLike, p_full: ArrayLike, tau_s: float, tau_prime: Any,
    pos_label: Any = 1,
) -> dict[str, float]:
    """US §V metrics of p_s (undersampled), p′ (eq. 9) and p (all rows): Brier (eq. 13) of each, AUC(p′),
    G-mean of p_s at τ_s and of p′ at τ′ (eq. 12). ``tau_prime`` may be one threshold per row (out-of-fold
    predictions come from models with different realised β, hence different τ′).

    Parameters
    ----------
    y : array-like
        True labels.
    p_s : array-like
        Undersampled model's probability of ``pos_label`` per row.
    p_prime : array-like
        Corrected probability p′ per row.
    p_full : array-like
        Probability of the model fitted on all rows, per row.
    tau_s : float
        Threshold on p_s.
    tau_prime : float or array-like
        Threshold on p′, one value or one per row.
    pos_label : object, default 1
        The positive label.

    Returns
    -------
    dict of str to float
        ``brier_raw``, ``brier_corrected``, ``brier_full``, ``auc``, ``gmean_tau_s`` and ``gmean_tau_prime``.
    """
    from shiftlib.metrics import auc, brier, g_mean  # local import: metrics does not import calibration

    p_prime = np.asarray(p_prime, dtype=float)
    decided = (p_prime > np.asarray(tau_prime, dtype=float)).astype(float)  # decisions at τ′, row by row
    return {
        "brier_raw": brier(y, p_s, pos_label),
        "brier_corrected": brier(y, p_prime, pos_label),
        "brier_full": brier(y, p_full, pos_label),
        "auc": auc(y, p_prime, pos_label),
        "gmean_tau_s": g_mean(y, p_s, tau_s, pos_label),
        "gmean_tau_prime": g_mean(y, decided, 0.5, pos_label),
    }


def oof_undersampling(
    estimator: Any, X: ArrayLike, y: ArrayLike, *, beta: float | str = "balanced", n_splits: int = 5,
    random_state: int | None = None, sample_weight: ArrayLike | None = None, pos_label: Any = 1,
) -> pd.DataFrame:
    """Stratified out-of-fold p_s, p′ (US eq. 9) and p (``estimator`` fitted on all training rows of the
    fold) per row, with the fold's τ′ (eq. 12): columns ``y, p_s, p_prime, p_full, tau_prime``.

    Parameters
    ----------
    estimator : estimator
        A binary classifier with ``predict_proba``; cloned for every fit.
    X : array-like, DataFrame or sparse matrix
        Features.
    y : array-like
        Binary labels.
    beta : float or "balanced", default "balanced"
        The fraction of negatives kept (:class:`UndersampledClassifier`).
    n_splits : int, default 5
        Folds of the stratified split.
    random_state : int, optional
        Seed of the fold shuffle and of the undersampling draws.
    sample_weight : array-like, optional
        Per-row weights for both fits of each fold.
    pos_label : object, default 1
        The positive label, whose probability the columns hold.

    Returns
    -------
    pandas.DataFrame
        One row per input row, columns ``y, p_s, p_prime, p_full, tau_prime``.
    """
    from sklearn.model_selection import StratifiedKFold

    y = np.asarray(y)
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=float)
    out = pd.DataFrame({"y": y, "p_s": np.nan, "p_prime": np.nan, "p_full": np.nan, "tau_prime": np.nan})
    skf = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=random_state)
    for tr, te in skf.split(np.zeros(len(y)), y):
        fit_kw = {} if w is None else {"sample_weight": w[tr]}
        X_tr, X_te = _safe_indexing(X, tr), _safe_indexing(X, te)
        us = UndersampledClassifier(clone(estimator), beta=beta, random_state=random_state, pos_label=pos_label)
        us.fit(X_tr, y[tr], **fit_kw)
        full = clone(estimator).fit(X_tr, y[tr], **fit_kw)
        raw = us._member_ps(X_te)  # members' p_s, predicted once for both columns
        out.loc[te, "p_s"] = np.clip(raw.mean(axis=0), 0.0, 1.0)  # = predict_proba_undersampled
        out.loc[te, "p_prime"] = _eq9(np.clip(raw, 0.0, 1.0), us.beta_).mean(axis=0)  # = predict_proba
        out.loc[te, "tau_prime"] = float(us.threshold_)
        out.loc[te, "p_full"] = full.predict_proba(X_te)[:, list(full.classes_).index(pos_label)]
    return out
