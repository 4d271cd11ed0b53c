"""Three published few-label model-selection peers of ``shiftlib.selection.fewlabel``, re-implemented in numpy from
their papers' descriptions (CODA's from a public summary of its paper; no code of theirs is used), for
``replications.replicate_label_peers``.

* **Active testing** (Kossen, Farquhar, Gal & Rainforth, "Active Testing: Sample-Efficient Model Evaluation",
  ICML 2021, §3–4): rows are acquired one at a time from the rows not yet labeled, with probability
  proportional to an acquisition score (the surrogate's expected loss of the candidates), and each candidate's
  loss is estimated with the unbiased LURE estimator (their eq. 4); the pick has the best estimated accuracy.
* **Model Selector** (Okanovic et al., "All models are wrong, some are useful: Model selection with limited
  labels", AISTATS 2025): a hypothesis H_k "candidate k is the best" per candidate, under which the true label
  equals k's hard prediction with probability 1 − ε_k and each other class has ε_k/(C − 1); a posterior over
  the hypotheses from the labels; each next row is the one whose label carries the largest expected information
  gain about the best candidate; the pick is the posterior's most probable candidate.
* **CODA** (Kay, Van Horn, Maji, Sheldon & Beery, "Consensus-Driven Active Model Selection", ICCV 2025),
  simplified: a Dawid–Skene confusion matrix per candidate with a Dirichlet prior built from the candidates'
  consensus, P(best) from each candidate's accuracy distribution, labels acquired by expected information gain
  about P(best); the pick is P(best)'s mode.

Both take the candidates' hard predictions on the batch (N × ℓ, class labels), a label oracle (rows → labels)
and a random seed, and return the pick after each budget of a nested sequence (a person labels 10 rows, then
15 more, ...): a prefix of a sequential acquisition is itself a valid acquisition of that size, so one pass
gives every budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "PeerPick",
    "active_testing",
    "coda",
    "coda_p_best",
    "coda_prior",
    "expected_loss_scores",
    "information_gain",
    "lure_estimate",
    "lure_weights",
    "model_selector",
    "model_selector_posterior",
    "pick_best",
]

#: active testing: share of the uniform distribution mixed into the acquisition distribution, so every row
#: keeps a positive probability and every LURE weight stays bounded (Kossen et al. 2021, §3 and App. B)
UNIFORM_MIX = 0.1


@dataclass(frozen=True)
class PeerPick:
    """One peer's state after ``budget`` labels: the picked candidate (position), its per-candidate scores (higher
    is better: estimated accuracy or posterior log-probability), the labeled rows in acquisition order."""

    budget: int
    pick: int
    scores: np.ndarray
    rows: np.ndarray
    details: dict[str, Any] = field(default_factory=dict)


def pick_best(scores: Any, rng: np.random.Generator) -> int:
    """The position of the largest score, ties (within 1e-12) broken uniformly at random with ``rng``."""
    s = np.asarray(scores, float)
    top = np.flatnonzero(s >= np.nanmax(s) - 1e-12)
    return int(top[0] if len(top) == 1 else rng.choice(top))


# ----------------------------------------------------------------------------------------------------
# active testing (Kossen et al., ICML 2021)
# ----------------------------------------------------------------------------------------------------
def lure_weights(q_picked: Any, n_pool: int) -> np.ndarray:
    """LURE weights (Kossen et al. 2021, eq. 4) of M rows acquired sequentially without replacement from a pool
    of ``n_pool`` rows; returns v_m = 1 + (N − M)/(N − m) · (1/((N − m + 1) q_m) − 1), m = 1..M.

    ``q_picked[m − 1]`` is the probability with which the m-th row was drawn from the N − m + 1 rows left at
    step m. With M = N every weight is 1 (the whole pool is labeled)."""
    q = np.asarray(q_picked, float)
    M, N = len(q), int(n_pool)
    if not 1 <= M <= N:
        raise ValueError(f"need 1 ≤ M ≤ N acquired rows; got M={M}, N={N}")
    if np.any(q <= 0) or np.any(q > 1):
        raise ValueError("acquisition probabilities must be in (0, 1]")
    m = np.arange(1, M + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(N - m > 0, (N - M) / np.maximum(N - m, 1), 0.0)
    return 1.0 + ratio * (1.0 / ((N - m + 1) * q) - 1.0)


def lure_estimate(losses: Any, q_picked: Any, n_pool: int) -> np.ndarray:
    """The LURE estimate (Kossen et al. 2021, eq. 4) of the pool's mean loss, (1/M) Σ_m v_m L_m, per column of
    ``losses`` (M acquired rows × candidates, or a vector); unbiased for (1/N) Σ_i L_i over the pool."""
    L = np.asarray(losses, float)
    v = lure_weights(q_picked, n_pool)
    return (v @ L) / len(v) if L.ndim == 2 else float(v @ L / len(v))


def expected_loss_scores(predictions: Any, proba: Any, classes: Any) -> np.ndarray:
    """Active testing's acquisition for 0/1 loss (Kossen et al. 2021, §4): the surrogate's expected loss of each
    candidate, 1 − π(ŷ_j(x_i) | x_i), averaged over the candidates; returns one score per row.

    ``proba`` (N × C, columns = ``classes``) is the surrogate π(y | x)."""
    P = np.asarray(predictions)
    pr = np.asarray(proba, float)
    idx = np.searchsorted(np.asarray(classes), P)
    right = np.take_along_axis(pr, idx, axis=1)
    return np.clip(1.0 - right, 0.0, 1.0).mean(axis=1)


def active_testing(predictions: Any, proba: Any, classes: Any, oracle: Callable[[np.ndarray], np.ndarray],
                   budgets: Sequence[int], seed: Any, *, mix: float = UNIFORM_MIX) -> list[PeerPick]:
    """Active testing (Kossen et al., ICML 2021) as a model selector: acquire rows one at a time with probability
    ∝ (1 − ``mix``)·expected loss/Σ + ``mix``·uniform over the rows left, estimate each candidate's accuracy as
    1 − LURE(0/1 loss) and pick the best; returns one ``PeerPick`` per budget in ``budgets`` (increasing).

    The surrogate is ``proba`` (the candidates' mean class probabilities), fixed: the paper refits its surrogate
    on the acquired labels, which this does not (stated in the report). ``oracle(rows)`` returns their labels."""
    P = np.asarray(predictions)
    N = P.shape[0]
    budgets = sorted(int(b) for b in budgets)
    if not budgets or budgets[0] < 1 or budgets[-1] > N:
        raise ValueError(f"budgets must be in 1..{N} (the batch's rows); got {budgets}")
    score = expected_loss_scores(P, proba, classes)
    rng = np.random.default_rng(seed)
    left = np.ones(N, bool)
    rows, qs = [], []
    for _ in range(budgets[-1]):
        avail = np.flatnonzero(left)
        s = score[avail]
        q = (1 - mix) * (s / s.sum() if s.sum() > 0 else np.full(len(avail), 1 / len(avail))) + mix / len(avail)
        k = rng.choice(len(avail), p=q / q.sum())
        rows.append(int(avail[k]))
        qs.append(float(q[k] / q.sum()))
        left[avail[k]] = False
    rows_a, qs_a = np.array(rows, int), np.array(qs)
    y = np.asarray(oracle(rows_a))
    loss = (P[rows_a] != y[:, None]).astype(float)
    tie_rng = np.random.default_rng([*np.atleast_1d(seed).tolist(), 1])
    out = []
    for b in budgets:
        acc = 1.0 - lure_estimate(loss[:b], qs_a[:b], N)
        out.append(PeerPick(b, pick_best(acc, tie_rng), acc, rows_a[:b], {"q": qs_a[:b]}))
    return out


# ----------------------------------------------------------------------------------------------------
# Model Selector (Okanovic et al., AISTATS 2025)
# ----------------------------------------------------------------------------------------------------
def _eps(eps: Any, ell: int) -> np.ndarray:
    e = np.broadcast_to(np.asarray(eps, float), (ell,)).copy()
    if np.any(e <= 0) or np.any(e >= 1):
        raise ValueError("eps must be in (0, 1): the probability that the true label differs from the best "
                         "candidate's prediction")
    return e


def model_selector_posterior(pred_labeled: Any, y: Any, eps: Any, n_classes: int,
                             log_prior: Any = None) -> np.ndarray:
    """Model Selector's posterior over "candidate k is the best" (Okanovic et al. 2025): under H_k a label equals
    k's prediction with probability 1 − ε_k, any other class with ε_k/(C − 1); returns P(H_k | labels) (sums to 1).

    ``pred_labeled``: the candidates' predictions on the labeled rows (M × ℓ); ``y``: their labels."""
    P = np.asarray(pred_labeled)
    ell = P.shape[1]
    e = _eps(eps, ell)
    right = (P == np.asarray(y)[:, None]).sum(axis=0) if len(P) else np.zeros(ell)
    wrong = len(P) - right
    logp = right * np.log1p(-e) + wrong * np.log(e / (n_classes - 1))
    if log_prior is not None:
        logp = logp + np.asarray(log_prior, float)
    logp -= logp.max()
    p = np.exp(logp)
    return p / p.sum()


def _entropy(p: np.ndarray, axis: int = -1) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.sum(np.where(p > 0, p * np.log(p), 0.0), axis=axis)


def information_gain(predictions: Any, posterior: Any, eps: Any, classes: Any) -> np.ndarray:
    """Expected information gain about the best candidate from one row's label (Okanovic et al. 2025):
    I(H; y_i) = H[Σ_k P(H_k) p(y | x_i, H_k)] − Σ_k P(H_k) H[p(y | x_i, H_k)], per row (nats, ≥ 0)."""
    P = np.asarray(predictions)
    cls = np.asarray(classes)
    C = len(cls)
    w = np.asarray(posterior, float)
    e = _eps(eps, P.shape[1])
    onehot = (P[:, :, None] == cls[None, None, :]).astype(float)  # N × ℓ × C
    lik = onehot * (1 - e)[None, :, None] + (1 - onehot) * (e / (C - 1))[None, :, None]
    mix = np.einsum("k,nkc->nc", w, lik)
    h_k = -(1 - e) * np.log1p(-e) - e * np.log(e / (C - 1))  # entropy of p(y | x, H_k): the same on every row
    return np.clip(_entropy(mix) - float(w @ h_k), 0.0, None)


def model_selector(predictions: Any, classes: Any, oracle: Callable[[np.ndarray], np.ndarray],
                   budgets: Sequence[int], seed: Any, *, eps: Any = 0.1) -> list[PeerPick]:
    """Model Selector (Okanovic et al., AISTATS 2025): uniform prior over "candidate k is the best", then per step
    label the row not yet labeled with the largest information gain (ties at random), update the posterior, and
    pick its most probable candidate; returns one ``PeerPick`` per budget (scores = log posterior).

    ``eps``: one number, or one per candidate (the paper grid-searches one ε per model collection; the
    replication fixes it without labels, see ``replicate_label_peers``)."""
    P = np.asarray(predictions)
    cls = np.asarray(classes)
    N, ell = P.shape
    budgets = sorted(int(b) for b in budgets)
    if not budgets or budgets[0] < 1 or budgets[-1] > N:
        raise ValueError(f"budgets must be in 1..{N} (the batch's rows); got {budgets}")
    rng = np.random.default_rng(seed)
    left = np.ones(N, bool)
    rows: list[int] = []
    ys: list[Any] = []
    post = np.full(ell, 1.0 / ell)
    out = []
    for step in range(1, budgets[-1] + 1):
        avail = np.flatnonzero(left)
        ig = information_gain(P[avail], post, eps, cls)
        top = avail[ig >= ig.max() - 1e-12]
        i = int(top[0] if len(top) == 1 else rng.choice(top))
        rows.append(i)
        ys.append(np.asarray(oracle(np.array([i])))[0])
        left[i] = False
        post = model_selector_posterior(P[rows], np.array(ys), eps, len(cls))
        if step in budgets:
            logp = np.log(np.clip(post, 1e-300, None))
            out.append(PeerPick(step, pick_best(logp, rng), logp, np.array(rows, int), {"posterior": post.copy()}))
    return out


# ----------------------------------------------------------------------------------------------------
# CODA (Kay, Van Horn, Maji, Sheldon & Beery, "Consensus-Driven Active Model Selection", ICCV 2025)
# ----------------------------------------------------------------------------------------------------
#: CODA's prior (fixed before any result): Dirichlet rows β + strength · (the candidate's confusion against the
#: consensus, row-normalised); the grid of the accuracy densities
CODA_BETA = 1.0
CODA_STRENGTH = 5.0
_GRID = np.linspace(0.001, 0.999, 500)


def coda_prior(predictions: Any, classes: Any, *, beta: float = CODA_BETA,
               strength: float = CODA_STRENGTH) -> tuple[np.ndarray, np.ndarray]:
    """CODA's consensus prior (Kay et al. 2025, §3): the soft consensus π̂(c | x_i) = share of candidates that
    predict c, each candidate's confusion M̂_k[c, c'] against it (rows normalised) and Dirichlet parameters
    α_k[c, ·] = β + strength · M̂_k[c, ·]; returns (α: ℓ × C × C, the class shares Σ_i π̂(c | x_i)/N)."""
    P = np.asarray(predictions)
    cls = np.asarray(classes)
    onehot = (P[:, :, None] == cls[None, None, :]).astype(float)  # N × ℓ × C
    cons = onehot.mean(axis=1)  # N × C
    M = np.einsum("nc,nkd->kcd", cons, onehot)
    M = M / np.clip(M.sum(axis=2, keepdims=True), 1e-12, None)
    return beta + strength * M, cons.mean(axis=0)


def coda_p_best(alpha: Any, class_share: Any) -> np.ndarray:
    """P(candidate k is the best) = ∫ f_k(x) Π_{l≠k} F_l(x) dx (Kay et al. 2025), with each candidate's accuracy
    Σ_c p_c θ_k[c, c] (θ_k[c, ·] ~ Dirichlet(α_k[c, ·])) approximated by the Beta of the same mean and variance;
    ``alpha`` is (…, ℓ, C, C); returns (…, ℓ), summing to 1 over ℓ."""
    a = np.asarray(alpha, float)
    p = np.asarray(class_share, float)
    diag = np.diagonal(a, axis1=-2, axis2=-1)  # (…, ℓ, C)
    tot = a.sum(axis=-1)
    m_c = diag / tot
    v_c = m_c * (1 - m_c) / (tot + 1)
    mean = np.clip((m_c * p).sum(axis=-1), 1e-4, 1 - 1e-4)
    var = np.clip((v_c * p ** 2).sum(axis=-1), 1e-10, None)
    nu = np.clip(mean * (1 - mean) / var - 1, 1e-3, None)
    A, B = (mean * nu)[..., None], ((1 - mean) * nu)[..., None]
    logf = (A - 1) * np.log(_GRID) + (B - 1) * np.log1p(-_GRID)
    f = np.exp(logf - logf.max(axis=-1, keepdims=True))
    f /= f.sum(axis=-1, keepdims=True)  # probability mass per grid cell
    F = np.cumsum(f, axis=-1) - f / 2  # CDF at the cell's centre
    logF = np.log(np.clip(F, 1e-300, None))
    others = logF.sum(axis=-2, keepdims=True) - logF  # Σ_{l≠k} log F_l
    pb = (f * np.exp(others)).sum(axis=-1)
    return pb / pb.sum(axis=-1, keepdims=True)


def _entropy_last(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.sum(np.where(p > 0, p * np.log(p), 0.0), axis=-1)


def coda(predictions: Any, classes: Any, oracle: Callable[[np.ndarray], np.ndarray], budgets: Sequence[int],
         seed: Any, *, beta: float = CODA_BETA, strength: float = CODA_STRENGTH) -> list[PeerPick]:
    """CODA (Kay et al., ICCV 2025), simplified: the consensus Dirichlet prior of ``coda_prior``; each step labels
    the row with the largest expected information gain about the best candidate,
    EIG(x_i) = H(PBest) − Σ_c π̂(c | x_i) H(PBest | y_i = c), with π̂(c | x_i) the Dawid–Skene class posterior
    ∝ p_c Π_k E[θ_k[c, ŷ_k(x_i)]]; a label c adds one count to α_k[c, ŷ_k(x_i)] of every candidate; the pick is
    PBest's mode. Returns one ``PeerPick`` per budget (scores = PBest)."""
    P = np.asarray(predictions)
    cls = np.asarray(classes)
    N, ell = P.shape
    C = len(cls)
    budgets = sorted(int(b) for b in budgets)
    if not budgets or budgets[0] < 1 or budgets[-1] > N:
        raise ValueError(f"budgets must be in 1..{N} (the batch's rows); got {budgets}")
    idx = np.searchsorted(cls, P)  # N × ℓ class positions
    patterns, inv = np.unique(idx, axis=0, return_inverse=True)
    inv = np.asarray(inv).ravel()
    alpha, share = coda_prior(P, cls, beta=beta, strength=strength)
    rng = np.random.default_rng(seed)
    left = np.ones(N, bool)
    rows: list[int] = []
    out = []
    ks = np.arange(ell)
    for step in range(1, budgets[-1] + 1):
        pb = coda_p_best(alpha, share)
        theta = alpha / alpha.sum(axis=2, keepdims=True)
        # per pattern r and class c: α with one count at [k, c, pattern_rk]
        R = len(patterns)
        hyp = np.broadcast_to(alpha, (R, C, ell, C, C)).copy()
        for c in range(C):
            hyp[np.arange(R)[:, None], c, ks[None, :], c, patterns] += 1.0
        h_after = _entropy_last(coda_p_best(hyp, share))  # R × C
        logpost = np.log(share)[None, :] + np.log(theta[ks[None, None, :], np.arange(C)[None, :, None],
                                                        patterns[:, None, :]]).sum(axis=2)
        post = np.exp(logpost - logpost.max(axis=1, keepdims=True))
        post /= post.sum(axis=1, keepdims=True)
        eig_r = _entropy_last(pb) - (post * h_after).sum(axis=1)
        eig = np.where(left, eig_r[inv], -np.inf)
        top = np.flatnonzero(eig >= eig.max() - 1e-12)
        i = int(top[0] if len(top) == 1 else rng.choice(top))
        y = np.asarray(oracle(np.array([i])))[0]
        c_y = int(np.searchsorted(cls, y))
        alpha[ks, c_y, idx[i]] += 1.0
        rows.append(i)
        left[i] = False
        if step in budgets:
            pb = coda_p_best(alpha, share)
            out.append(PeerPick(step, pick_best(pb, rng), pb, np.array(rows, int), {"alpha": alpha.copy()}))
    return out
