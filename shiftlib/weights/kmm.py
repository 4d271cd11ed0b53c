"""Kernel mean matching (KMM eq. 12), exact, with an ensemble (chunked) variant for large sources.

``min_β ½ βᵀKβ − κᵀβ  s.t.  0 ≤ β_i ≤ B,  |Σβ_i − m| ≤ mε``, ``K_ij = k(x_i, x_j)``,
``κ_i = (m/m') Σ_j k(x_i, x'_j)`` (m source rows, m' target rows; KMM §3).

Defaults as the paper's experiments (KMM §4.2): B = 1000, ε = (√m − 1)/√m with m the number of
source rows in the problem being solved (the chunk size for ensemble KMM), Gaussian kernel
``exp(-gamma·‖z − z'‖²)``. Width: unless ``gamma`` is given, the median heuristic
``gamma = 1 / median ‖z_i − z_j‖²`` on the pooled standardized data — the shared diagnostic kernel
(:func:`shiftlib.weights.shared_kernel`), so KMM minimizes exactly the MMD every estimator reports.

Solvers (``solver=``):

* ``"auto"`` (default) — a working-set active-set method that never forms K unless it must. It keeps a
  working set W of rows (started with the 64 largest κ_i), solves eq. 12 restricted to W exactly by
  primal-dual active-set Newton steps (``K_FF β_F = κ_F − K_FU·B`` by Cholesky on the *free* rows F of W
  only, warm-started), computes the full gradient ``g = K[:, W]β_W − κ`` from the cached kernel columns
  of W, and adds the rows at 0 with ``g_i < 0`` (the most negative first, at most doubling W) until there
  are none. The sum constraint, when the box optimum violates it, is met by a safeguarded Newton search
  on its multiplier ν (each step re-solves the box problem for ``κ − ν·1``). The result is certified by
  the Frank–Wolfe duality gap ``gᵀβ − min_{β' feasible} gᵀβ'``, an upper bound on ``f(β) − f*``: it is
  accepted when that bound is ≤ 1e-7·|f(β)|; otherwise the problem goes to cvxpy. K gets a ridge of 1e-8
  on its diagonal inside this route (conditioning; see ``_RIDGE``). KMM solutions are often sparse — in
  ``benchmarks/kmm.py`` (m = 5,000, KMM §4.1's shift in 10 dimensions) 38 rows are non-zero and 128
  kernel columns are computed — so this costs κ plus m·|W| kernel entries instead of the m² of K and
  hundreds of m² matvecs; when the solution is dense, W grows to m and the cost is that of a few
  Cholesky factorizations of the free set.

  Tie-break: when K is numerically rank-deficient (few features: in 1-D ~20 of K's 1,000 eigenvalues exceed
  1e-8) the optimum of eq. 12 is not unique to any tolerance a certificate can resolve, and the solver
  returns whichever vertex of that flat set it reaches — on the 1-D Gaussian mean shift of
  ``tests/shiftlib/test_weights.py`` (m = m' = 1,000, seeds 0–9) 79–98% zero weights and Spearman 0.00–0.14
  with the true ratio; on its 1-D KMM §4.1 shift 0.33–0.99. So "auto" then re-solves with a larger ridge λ
  (``_TIE_RIDGES`` = 1e-2, 1e-3, 1e-4, 1e-5, largest first, warm-started from the same kernel columns) and
  returns the first β_λ — the unique minimizer of f + ½λ‖β − 1‖², i.e. the point closest to uniform weights
  among those with its objective (for a given Σβ: the one of largest effective sample size) — whose
  *certified* excess over the optimum, ``f(β_λ) − f(β₀) + gap(β₀) ≥ f(β_λ) − f*``, is below ``_TIE_TOL`` =
  1e-6·|f(β_λ)| (the accuracy the issue asks of KMM); β₀ itself when none is. The route then reads
  ``"active-set+ridge0.001"`` and ``gap`` is that excess bound. Measured on 1,000 rows (seeds 0–9): in 1-D
  the accepted β_λ ranks like the true ratio on "kmm41" (Spearman 0.98–1.00 instead of 0.33–0.99) but on the
  "mean" shift on 4 of 10 seeds only (Spearman ≥ 0.8; 0.06–0.54 on the others) — on those the smallest
  ridge that ranks at ≥ 0.8 costs 2e-6–4e-4 of the objective (8–61% of the optimal MMD²): eq. 12 genuinely
  prefers the sparse solution; in 5-D it changes β little (Spearman 0.1–0.3 either way). It costs one to four extra solves on
  the cached columns (m = 5,000, d = 10: 0.3 s for both stages).
* ``"lbfgsb"`` — the previous route, kept for comparison: L-BFGS-B on the box with the full K in
  float64 down to ``ftol = tol``, then a primal-dual active-set polish on the full problem; raises when
  the sum constraint binds.
* ``"cvxpy"`` — the reference: the dense QP as written, through cvxpy (CLARABEL by default, an interior
  point method; HiGHS's active-set QP did not finish in 250 s at m = 500 with B = 3 binding, and stopped
  with a duality gap of 2e-5·|f| at m = 2,000). A solver that raises or returns a non-optimal status is
  retried once with another installed solver (OSQP, else HiGHS, SCS); when both fail the error names both.

Kernels: ``κ`` is summed from kernel blocks in one reused buffer (float64 by default; ``kappa_dtype=
"float32"`` for large ensembles, see :func:`kmm_kappa`); the kernel columns the solver uses are float64. All kernel work and solves run with BLAS limited to one thread: on the shared
2-core machine here multithreaded BLAS made matvecs 10–40× and Cholesky ~3× slower, and it keeps
parallel chunk jobs from oversubscribing the cores.

Every returned β is repaired and then verified to satisfy the constraints *exactly* in floating point
(``0 ≤ β ≤ B``, ``m(1−ε) ≤ Σβ ≤ m(1+ε)``): solvers return points slightly outside (measured here:
HiGHS and OSQP up to 1e-13, SCS up to 3e-3), and at least one peer implementation ignores B.

Ensemble KMM (for the flow's fan-out): standardize once, take one ``gamma``, split the source with
:func:`chunk_indices`, solve each chunk against the full target with :func:`kmm_chunk` (pure, no state),
and put the pieces back with :func:`combine_chunks`::

    kern = shared_kernel(Xs, Xt); Zs, Zt = kern.transform(Xs), kern.transform(Xt)
    chunks = chunk_indices(len(Zs), 2000, random_state=0)
    betas = [kmm_chunk(Zs[c], Zt, gamma=kern.gamma) for c in chunks]   # independent jobs
    beta = combine_chunks(len(Zs), chunks, betas)
    beta = kmm_polish(Zs, Zt, beta, gamma=kern.gamma)                    # correction, one job

``KMM(chunk_size=...)`` runs exactly these steps in-process (``n_jobs`` processes with joblib); the last
one unless ``polish=False``. :func:`kmm_polish` re-solves eq. 12 of the *full* problem with β fixed at 0
outside the support U of the combined β (typically a few percent of the rows: κ for U and the kernel
among U, no m² work). Measured in ``benchmarks/kmm.py`` part 2 (KMM §4.1's shift, d = 20): on a
5,000-row subsample, MMD² of ensemble KMM (chunks of 2,000) is 1.11× exact KMM's without it and ≈ 1.0×
with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve
from scipy.optimize import Bounds, minimize
from sklearn.metrics.pairwise import rbf_kernel
from threadpoolctl import threadpool_limits

from shiftlib.kernels import kernel_row_sums, shared_kernel

from ._base import BaseWeighter, WeightsUnavailableError

__all__ = [
    "KMM",
    "KMMSolution",
    "bound_violation",
    "chunk_indices",
    "combine_chunks",
    "default_eps",
    "duality_gap",
    "kmm_chunk",
    "kmm_kappa",
    "kmm_objective",
    "kmm_polish",
    "solve_kmm",
]

Solver = Literal["auto", "lbfgsb", "cvxpy"]
KappaDtype = Literal["float64", "float32"]

#: above this many source rows without chunking, the m×m kernel would need > 800 MB
MAX_DENSE_ROWS = 10_000
#: relative margin by which a repaired sum is pulled inside its bound, so the check holds in floats
_SUM_MARGIN = 1e-12
#: smallest eps accepted: the band [m(1−ε), m(1+ε)] must be wide enough to land in after rounding
_MIN_EPS = 1e-10
#: "auto" accepts its point when the certified gap f(β) − f* ≤ _GAP_TOL·|f(β)| (the issue asks 1e-6)
_GAP_TOL = 1e-7
#: Tikhonov term added to K's diagonal by the first solve of "auto" (K_ii = 1 for the Gaussian kernel):
#: it bounds the condition number of every Newton system by 1e8 when K is numerically rank-deficient (few
#: features, a wide kernel). It moves the optimal objective by at most ½·1e-8·‖β*‖², which the duality-gap
#: certificate (computed without it) accounts for. It does *not* pick a well-defined point of a flat
#: optimal set (measured: 1-D "mean" shift, seed 0: 96% zero weights, Spearman 0.06) — the tie-break below
#: does.
_RIDGE = 1e-8
#: tie-break of "auto" (module docstring): ridges tried, largest first, after the certified solve of eq. 12.
#: A decade apart so that at most four extra solves are spent; 1e-2 is the largest that met _TIE_TOL on
#: any of the 1-D problems measured (1e-1 cost 4e-6..4e-4 of the objective); at 1e-5 the excess measured
#: there was ≤ 2e-7, and smaller ridges are left to the first solve
_TIE_RIDGES: tuple[float, ...] = (1e-2, 1e-3, 1e-4, 1e-5)
#: the tie-break's β_λ is kept only when its certified excess over f* is ≤ _TIE_TOL·|f(β_λ)|
_TIE_TOL = 1e-6
#: rows in the first working set
_WS_START = 64
#: cvxpy solvers tried, in this order, after the requested one fails
_CVXPY_ALTERNATES = ("CLARABEL", "OSQP", "HIGHS", "SCS")


@dataclass(frozen=True)
class KMMSolution:
    """One solve of KMM eq. 12: β, its objective ½βᵀKβ − κᵀβ, and how it was obtained."""

    beta: np.ndarray
    objective: float
    # "active-set", "active-set+ridge0.001" (tie-break), "lbfgsb+pdas", "cvxpy:CLARABEL",
    # "active-set->cvxpy:CLARABEL" (fallback), ...
    solver: str
    n_iter: int | None  # outer iterations of the route that produced β (working-set, L-BFGS-B, cvxpy's)
    B: float
    eps: float
    max_violation: float  # of the returned β; 0.0 by construction (verified)
    gap: float = float("nan")  # certified bound on f(β) − f* (Frank–Wolfe duality gap; tie-break: its excess bound)
    n_kernel_columns: int | None = None  # kernel columns the solver computed (m for a dense K)


def default_eps(m: int) -> float:
    """KMM §4.2: ε = (√m − 1)/√m for m source rows."""
    return float((np.sqrt(m) - 1.0) / np.sqrt(m))


def kmm_kappa(
    Z_source: np.ndarray, Z_target: np.ndarray, gamma: float, *, dtype: type[np.floating] = np.float64
) -> np.ndarray:
    """KMM eq. 12: κ_i = (m/m') Σ_j k(x_i, x'_j), Gaussian kernel exp(-gamma·‖·‖²).

    Kernel blocks in ``dtype``, summed in float64. ``np.float32`` is 3–5× faster with relative error
    ≤ 2e-7, which moves the optimal *objective* by about as much but β by up to cond(K)·2e-7 along
    K's flat directions (measured: weights 0.97–1.12 instead of 1 for identical 4-d sets of 150 rows) —
    so float64 is the default and float32 an option for large ensembles.
    """
    with threadpool_limits(limits=1, user_api="blas"):
        sums = kernel_row_sums(Z_source, Z_target, gamma, dtype=dtype)
    return sums * (Z_source.shape[0] / Z_target.shape[0])


def kmm_objective(K: np.ndarray, kappa: np.ndarray, beta: np.ndarray) -> float:
    """KMM eq. 12 objective ½βᵀKβ − κᵀβ."""
    return float(0.5 * beta @ (K @ beta) - kappa @ beta)


def _sum_bounds(m: int, eps: float) -> tuple[float, float]:
    return m * (1.0 - eps), m * (1.0 + eps)


def bound_violation(beta: np.ndarray, *, B: float, eps: float) -> float:
    """Largest violation of KMM eq. 12's constraints by β (0.0 when all hold exactly)."""
    lo, hi = _sum_bounds(beta.shape[0], eps)
    s = float(beta.sum())
    return float(max(0.0, -beta.min(), beta.max() - B, lo - s, s - hi))


def duality_gap(grad: np.ndarray, beta: np.ndarray, *, B: float, eps: float) -> float:
    """Frank–Wolfe gap of KMM eq. 12 at a feasible β: ``gᵀβ − min_{β'} gᵀβ'`` over the feasible set.

    ``grad = Kβ − κ``. By convexity ``f* ≥ f(β) + min_{β'} gᵀ(β' − β)``, so the gap bounds ``f(β) − f*``
    from above whatever produced β. The inner minimum is a fractional knapsack: the rows with the most
    negative g_i go to B while that lowers gᵀβ' and Σβ' ≤ m(1+ε), then Σβ' is raised to m(1−ε) if short.
    """
    m = grad.shape[0]
    lo, hi = _sum_bounds(m, eps)
    order = np.argsort(grad, kind="stable")
    g = grad[order]
    fill = np.zeros(m)
    cap = hi
    neg = np.flatnonzero(g < 0)
    for_neg = np.minimum(B, np.maximum(0.0, cap - B * np.arange(neg.size)))
    fill[neg] = for_neg
    short = lo - fill.sum()
    if short > 0:  # the sum constraint forces mass onto the cheapest rows with g ≥ 0
        room = B - fill
        cum = np.cumsum(room)
        take = np.minimum(room, np.maximum(0.0, short - (cum - room)))
        fill += take
    return float(g @ (beta[order] - fill))


def _check_params(m: int, B: float, eps: float) -> None:
    if m < 2:
        raise ValueError(
            f"source set has {m} row{'s' if m != 1 else ''}; KMM needs at least 2 (with m = 1 the paper's "
            "ε = (√m − 1)/√m is 0 and the single weight is fixed by the constraints)"
        )
    if not np.isfinite(B) or B <= 0:
        raise ValueError(f"B must be a positive number (the upper bound on each weight); got {B}")
    if not np.isfinite(eps) or eps < _MIN_EPS:
        raise ValueError(
            f"eps must be at least {_MIN_EPS:g}; got {eps} (eps = 0 demands Σβ = m exactly, which floating "
            "point cannot certify)"
        )
    if B < 1.0 - eps:
        raise ValueError(
            f"KMM is infeasible: with B={B} the weights sum to at most m·B, below the required "
            f"m(1−ε) = m·{1 - eps:.4g}; raise B or eps"
        )


def _repair(beta: np.ndarray, B: float, eps: float) -> np.ndarray:
    """Move a solver's β (possibly 1e-9 outside) to a point satisfying every constraint exactly."""
    m = beta.shape[0]
    lo, hi = _sum_bounds(m, eps)
    beta = np.clip(beta, 0.0, B)
    s = beta.sum()
    margin = min(_SUM_MARGIN, eps / 4) * m  # aim this far inside the band
    if s > hi:  # scaling down keeps 0 ≤ β ≤ B
        beta = beta * ((hi - margin) / s)
    elif s < lo:  # move towards B along the room left: keeps 0 ≤ β ≤ B for a step ≤ 1
        room = B - beta
        step = (lo + margin - s) / room.sum()
        beta = np.minimum(beta + min(step, 1.0) * room, B)
    viol = bound_violation(beta, B=B, eps=eps)
    if viol > 0:
        raise RuntimeError(f"KMM: could not restore feasibility (violation {viol:.3g}); report this input")
    return beta


# --------------------------------------------------------------------------------------------------
# kernel columns on demand
# --------------------------------------------------------------------------------------------------

Fetch = Callable[[np.ndarray], np.ndarray]  # idx -> K[:, idx], float64, shape (m, len(idx))


def _dense_fetch(K: np.ndarray) -> Fetch:
    return lambda idx: K[:, idx]


def _rbf_fetch(Z: np.ndarray, gamma: float) -> Fetch:
    """Columns of the Gaussian kernel of Z with itself, float64, computed when asked."""
    Zc = Z - Z.mean(axis=0)
    sq = np.einsum("ij,ij->i", Zc, Zc)

    def fetch(idx: np.ndarray) -> np.ndarray:
        G = Zc @ Zc[idx].T
        G *= 2.0
        G -= sq[:, None]
        G -= sq[idx][None, :]
        np.minimum(G, 0.0, out=G)
        G *= gamma
        np.exp(G, out=G)
        G[idx, np.arange(idx.size)] = 1.0  # k(x, x) = 1 exactly
        return G

    return fetch


class _Columns:
    """Cache of kernel columns K[:, W] for a growing working set W (insertion order)."""

    def __init__(self, m: int, fetch: Fetch) -> None:
        self.m = m
        self._fetch = fetch
        self.pos = np.full(m, -1)
        self.index = np.empty(0, dtype=int)
        self._buf = np.empty((m, 0))

    @property
    def C(self) -> np.ndarray:
        return self._buf[:, : self.index.size]

    def add(self, idx: np.ndarray) -> None:
        idx = idx[self.pos[idx] < 0]
        if idx.size == 0:
            return
        n, k = self.index.size, idx.size
        if n + k > self._buf.shape[1]:
            grown = np.empty((self.m, min(self.m, max(2 * (n + k), 64))))
            grown[:, :n] = self._buf[:, :n]
            self._buf = grown
        self._buf[:, n : n + k] = self._fetch(idx)
        self.pos[idx] = np.arange(n, n + k)
        self.index = np.concatenate([self.index, idx])

    def block(self) -> np.ndarray:
        """K[W, W]."""
        return self.C[self.index]


# --------------------------------------------------------------------------------------------------
# the working-set active-set solver ("auto")
# --------------------------------------------------------------------------------------------------


class _Singular(Exception):
    """A Newton system stayed singular after a small ridge."""


def _cholesky_solve(H: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray, Any]:
    """Solve H x = rhs for a PSD H; adds a tiny ridge (≤ 1e-10·max diag) only if Cholesky fails."""
    scale = float(np.max(np.diag(H))) if H.size else 1.0
    for ridge in (0.0, 1e-13, 1e-10):
        try:
            A = H if ridge == 0.0 else H + ridge * scale * np.eye(H.shape[0])
            factor = cho_factor(A, check_finite=False)
            return cho_solve(factor, rhs, check_finite=False), factor
        except LinAlgError:
            continue
    raise _Singular


def _pdas(H: np.ndarray, c: np.ndarray, B: float, x: np.ndarray, max_iter: int = 60) -> tuple[np.ndarray, Any]:
    """Primal-dual active-set (semismooth Newton) iterations for ``min ½xᵀHx − cᵀx, 0 ≤ x ≤ B``.

    Each step fixes x at 0 / B where ``x − g/H_ii`` leaves the box (g = Hx − c) and solves
    ``H_FF x_F = c_F − H_FU·B`` on the rest (Cholesky on the free rows only). A repeated partition is
    a KKT point (exact optimum of the box QP). Returns (x, Cholesky factor of the last H_FF or None);
    raises :class:`_Singular` when it does not converge. Hand-written: scipy has no box-QP active-set
    solver.
    """
    n = c.shape[0]
    theta = 1.0 / np.maximum(np.diag(H), 1e-300)
    previous: tuple[bytes, bytes] | None = None
    seen: set[tuple[bytes, bytes]] = set()
    factor: Any = None
    for _ in range(max_iter):
        z = x - theta * (H @ x - c)
        at_zero, at_b = z <= 0.0, z >= B
        key = (at_zero.tobytes(), at_b.tobytes())
        if key == previous:
            return np.clip(x, 0.0, B), factor
        if key in seen:  # a cycle (PDAS converges from any start only for M-matrices)
            raise _Singular
        seen.add(key)
        previous = key
        free = ~(at_zero | at_b)
        new = np.zeros(n)
        new[at_b] = B
        factor = None
        if free.any():
            rhs = c[free] - (H[np.ix_(free, at_b)] @ new[at_b] if at_b.any() else 0.0)
            new[free], factor = _cholesky_solve(H[np.ix_(free, free)], rhs)
        if not np.all(np.isfinite(new)):
            raise _Singular
        x = new
    raise _Singular


def _primal_active_set(H: np.ndarray, c: np.ndarray, B: float, x: np.ndarray, max_iter: int = 20_000) -> np.ndarray:
    """Primal active-set method for ``min ½xᵀHx − cᵀx, 0 ≤ x ≤ B`` from a feasible x (Nocedal & Wright
    Alg. 16.3): step towards the minimizer on the current face (Cholesky on the free rows), stop at the
    first bound in the way and fix it (all bounds that block a zero-length step at once); at a face
    optimum release every bound whose multiplier has the wrong sign — or, when the previous block release
    brought no decrease, only the worst one (Lawson–Hanson's NNLS rule, which makes it finite).
    Monotone; the fallback when PDAS cycles (rank-deficient K). Raises :class:`_Singular` when it does
    not finish.
    """
    x = np.clip(x, 0.0, B)
    n = c.shape[0]
    lower, upper = x <= 0.0, x >= B
    tol = 1e-12 * max(1.0, float(np.max(np.abs(c))))
    f_last = np.inf
    for _ in range(max_iter):
        free = ~(lower | upper)
        y = np.where(upper, B, 0.0)
        if free.any():
            rhs = c[free] - (H[np.ix_(free, upper)] @ y[upper] if upper.any() else 0.0)
            y[free], _ = _cholesky_solve(H[np.ix_(free, free)], rhs)
        d = y - x
        with np.errstate(divide="ignore", invalid="ignore"):
            to_zero = np.where(free & (d < 0), x / -d, np.inf)
            to_b = np.where(free & (d > 0), (B - x) / d, np.inf)
        alpha = min(1.0, float(to_zero.min()), float(to_b.min()))
        if alpha < 1.0:
            x = np.clip(x + alpha * d, 0.0, B)
            hit_zero = to_zero <= alpha
            hit_b = (to_b <= alpha) & ~hit_zero
            lower |= hit_zero
            upper |= hit_b
            x[hit_zero], x[hit_b] = 0.0, B
            continue
        x = np.clip(y, 0.0, B)
        g = H @ x - c
        wrong = np.where(lower, -g, 0.0) + np.where(upper, g, 0.0)
        j = int(np.argmax(wrong))
        if wrong[j] <= tol:
            return x
        f = float(0.5 * x @ (g - c))
        if f < f_last - 1e-15 * abs(f_last):  # progress since the last release: release every wrong bound
            release = wrong > tol
        else:  # a block release was undone without progress: one at a time (finite, as NNLS)
            release = np.zeros(n, dtype=bool)
            release[j] = True
        f_last = f
        lower &= ~release
        upper &= ~release
    raise _Singular


@dataclass
class _WorkingSet:
    """State of the working-set solver: kernel-column cache and β on the working set."""

    cols: _Columns
    kappa: np.ndarray
    B: float
    beta_w: np.ndarray
    ridge: float
    outer: int = 0

    def block(self) -> np.ndarray:
        """K[W, W] + ridge·I: the Hessian of the (regularized) problem on the working set."""
        H = self.cols.block()
        H[np.diag_indices_from(H)] += self.ridge
        return H

    def full_beta(self) -> np.ndarray:
        beta = np.zeros(self.cols.m)
        beta[self.cols.index] = self.beta_w
        return beta

    def solve_box(self, nu: float) -> Any:
        """Exact minimizer of ½βᵀKβ − (κ − ν1)ᵀβ on the box [0, B]^m; returns the last free-set factor."""
        c = self.kappa - nu
        tol = 1e-12 * max(1.0, float(np.max(np.abs(c))))
        factor: Any = None
        while True:
            self.outer += 1
            if self.outer > 500:
                raise _Singular
            H, cw = self.block(), c[self.cols.index]
            try:
                # PDAS needs a warm start (from x = 0 it flips between all-0 and all-B); when it cycles
                # (K far from an M-matrix, e.g. rank-deficient) the primal active set takes over
                if not self.beta_w.any():
                    raise _Singular
                self.beta_w, factor = _pdas(H, cw, self.B, self.beta_w, max_iter=25)
            except _Singular:
                self.beta_w, factor = _primal_active_set(H, cw, self.B, self.beta_w), None
            g = self.cols.C @ self.beta_w - c
            g[self.cols.index] += self.ridge * self.beta_w
            viol = np.flatnonzero((self.cols.pos < 0) & (g < -tol))
            if viol.size == 0:
                return factor
            take = max(_WS_START, self.cols.index.size)
            if viol.size > take:
                viol = viol[np.argpartition(g[viol], take)[:take]]
            self.cols.add(viol)
            self.beta_w = np.concatenate([self.beta_w, np.zeros(self.cols.index.size - self.beta_w.size)])


def _solve_active_set(
    fetch: Fetch | _Columns, kappa: np.ndarray, B: float, eps: float, ridge: float = _RIDGE,
    x0: np.ndarray | None = None, sum_bounds: tuple[float, float] | None = None,
) -> tuple[np.ndarray, int, int]:
    """Working-set active-set solve of KMM eq. 12 with ``ridge``·I added to K (see the module docstring).

    ``fetch`` may be a :class:`_Columns` cache from an earlier solve of the same problem: its columns are
    reused and the new working set starts from them (at ``x0``, a full-length β, when given).
    ``sum_bounds`` replaces ``m(1 ∓ ε)`` (for a subproblem of a larger one, see :func:`kmm_polish`).
    Returns (β, outer iterations, kernel columns computed); raises :class:`_Singular` on failure.
    """
    m = kappa.shape[0]
    lo, hi = _sum_bounds(m, eps) if sum_bounds is None else sum_bounds
    cols = fetch if isinstance(fetch, _Columns) else _Columns(m, fetch)
    ws = _WorkingSet(cols, kappa, B, np.empty(0), ridge)
    # seed W with the largest κ_i (KMM §3: large κ_i are likely to get large β_i)
    first = np.argsort(-kappa, kind="stable")[: min(m, _WS_START)]
    ws.cols.add(np.sort(first))
    ws.beta_w = np.zeros(ws.cols.index.size) if x0 is None else np.clip(x0[ws.cols.index], 0.0, B)
    ws.solve_box(0.0)
    s = float(ws.beta_w.sum())
    if lo <= s <= hi:
        return ws.full_beta(), ws.outer, ws.cols.index.size
    # the sum constraint binds: find ν with Σβ(ν) = target; Σβ(ν) is continuous, non-increasing and
    # piecewise linear, so Newton steps on the current face (slope −1ᵀH_FF⁻¹1) end in finitely many
    # steps; bisection inside the bracket guards against overshooting to another face
    target = hi if s > hi else lo
    tol = 1e-10 * m
    bracket_lo, bracket_hi = (0.0, np.inf) if s > hi else (-np.inf, 0.0)  # ν ranges where s ≥ / ≤ target
    nu = 0.0
    for it in range(200):
        beta_w = ws.beta_w
        free = (beta_w > 0) & (beta_w < B)
        slope = 0.0
        if free.any():
            H = ws.block()[np.ix_(free, free)]
            try:
                y, _ = _cholesky_solve(H, np.ones(int(free.sum())))
                slope = -float(y.sum())
            except _Singular:
                slope = 0.0
        step_nu = nu + (s - target) / -slope if slope < 0 else np.nan
        if not np.isfinite(step_nu) or not bracket_lo < step_nu < bracket_hi:
            if np.isfinite(bracket_lo) and np.isfinite(bracket_hi):
                step_nu = 0.5 * (bracket_lo + bracket_hi)
            else:  # widen: the scale of κ bounds any useful ν
                span = max(1.0, float(np.max(np.abs(kappa))))
                step_nu = (bracket_lo if np.isfinite(bracket_lo) else bracket_hi) + (
                    span if s > target else -span
                ) * 2.0 ** min(it, 60)
        nu = step_nu
        ws.solve_box(nu)
        s = float(ws.beta_w.sum())
        if abs(s - target) <= tol:
            return ws.full_beta(), ws.outer, ws.cols.index.size
        if s > target:
            bracket_lo = max(bracket_lo, nu)
        else:
            bracket_hi = min(bracket_hi, nu)
    raise _Singular


def _tie_break(
    cols: _Columns, kappa: np.ndarray, B: float, eps: float, beta0: np.ndarray, f0: float, gap0: float
) -> tuple[np.ndarray, float, float, int, float] | None:
    """The tie-break stage of "auto" (see ``_TIE_RIDGES``): from a certified optimum β₀ of eq. 12
    (f(β₀) − f* ≤ gap0), minimize f(β) + ½λ‖β − 1‖² for each λ of ``_TIE_RIDGES`` in turn and return the first
    β_λ whose certified excess ``f(β_λ) − f(β₀) + gap0`` (≥ f(β_λ) − f*) is ≤ ``_TIE_TOL``·|f(β_λ)|, as
    (β, f(β), that bound, kernel columns computed, λ); None when no λ qualifies (β₀ is kept)."""
    for lam in _TIE_RIDGES:
        try:
            # ½λ‖β − 1‖² = ½λ‖β‖² − λ·1ᵀβ + const: the ridge with κ + λ
            beta, _, _ = _solve_active_set(cols, kappa + lam, B, eps, ridge=lam, x0=beta0)
        except _Singular:
            continue
        beta = _repair(beta, B, eps)
        support = np.flatnonzero(beta)
        grad = cols.C[:, cols.pos[support]] @ beta[support] - kappa
        objective = 0.5 * float(beta[support] @ grad[support] - kappa[support] @ beta[support])
        bound = min(objective - f0 + gap0, duality_gap(grad, beta, B=B, eps=eps))
        if bound < _TIE_TOL * max(abs(objective), 1e-300):
            return beta, objective, max(bound, 0.0), int(cols.index.size), lam
    return None


# --------------------------------------------------------------------------------------------------
# the previous route ("lbfgsb") and the reference (cvxpy)
# --------------------------------------------------------------------------------------------------


def _lbfgsb(K: np.ndarray, kappa: np.ndarray, B: float, tol: float, x0: np.ndarray) -> tuple[np.ndarray, int, bool]:
    m = kappa.shape[0]

    def fun(beta: np.ndarray) -> tuple[float, np.ndarray]:
        g = K @ beta
        # scaled by 1/m so gradient entries are O(1) whatever m is
        return float(0.5 * beta @ g - kappa @ beta) / m, (g - kappa) / m

    res = minimize(
        fun,
        x0,
        jac=True,
        method="L-BFGS-B",
        bounds=Bounds(0.0, B),
        options={"ftol": tol, "gtol": 1e-12, "maxiter": 100_000, "maxfun": 200_000, "maxcor": 10},
    )
    # status 0: converged; 2: the line search stalled at machine precision (also converged in f)
    return np.clip(res.x, 0.0, B), int(res.nit), res.status in (0, 2)


def _solve_lbfgsb(K: np.ndarray, kappa: np.ndarray, B: float, tol: float) -> tuple[np.ndarray, int, bool, bool]:
    """L-BFGS-B on the box, then the active-set polish on the full K. Returns (β, nit, converged, polished)."""
    m = kappa.shape[0]
    beta, nit, converged = _lbfgsb(K, kappa, B, tol, np.full(m, min(1.0, B)))
    if converged:
        try:
            polished, _ = _pdas(K, kappa, B, beta, max_iter=50)
        except _Singular:
            polished = None
        if polished is not None and kmm_objective(K, kappa, polished) <= kmm_objective(K, kappa, beta) + 1e-12 * abs(
            kmm_objective(K, kappa, beta)
        ):
            return polished, nit, True, True
    return beta, nit, converged, False


def _cvxpy() -> Any:
    """cvxpy, imported on first use (it takes seconds to import and only the fallback needs it)."""
    import cvxpy

    return cvxpy


def _default_cvxpy_solver() -> str:
    installed = _cvxpy().installed_solvers()
    return "CLARABEL" if "CLARABEL" in installed else "HIGHS"


def _alternate_solver(failed: str) -> str | None:
    installed = set(_cvxpy().installed_solvers())
    for name in _CVXPY_ALTERNATES:
        if name != failed and name in installed:
            return name
    return None


def _solve_cvxpy_once(
    K: np.ndarray, kappa: np.ndarray, B: float, eps: float, solver: str
) -> tuple[np.ndarray, int | None]:
    cp = _cvxpy()
    m = kappa.shape[0]
    lo, hi = _sum_bounds(m, eps)
    beta = cp.Variable(m)
    # same 1/m scaling as the other routes; psd_wrap skips cvxpy's eigenvalue check (K is a Gram matrix)
    objective = cp.Minimize(0.5 * cp.quad_form(beta, cp.psd_wrap(K / m)) - (kappa / m) @ beta)
    problem = cp.Problem(objective, [beta >= 0, beta <= B, cp.sum(beta) >= lo, cp.sum(beta) <= hi])
    problem.solve(solver=solver)
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or beta.value is None:
        raise RuntimeError(f"status {problem.status!r}")
    n_iter = problem.solver_stats.num_iters if problem.solver_stats is not None else None
    return np.asarray(beta.value, dtype=float), n_iter


def _solve_cvxpy(
    K: np.ndarray, kappa: np.ndarray, B: float, eps: float, solver: str
) -> tuple[np.ndarray, int | None, str]:
    """The dense QP through cvxpy with ``solver``; on failure retried once with another installed solver.

    Returns (β, iterations, the solver that succeeded); raises RuntimeError naming both when both fail.
    """
    cp = _cvxpy()
    try:
        beta, n_iter = _solve_cvxpy_once(K, kappa, B, eps, solver)
        return beta, n_iter, solver
    except (cp.error.SolverError, RuntimeError, ValueError, ArithmeticError) as first:
        other = _alternate_solver(solver)
        if other is None:
            raise RuntimeError(
                f"KMM: cvxpy solver {solver} failed ({first}) and no other QP solver is installed "
                f"(installed: {cp.installed_solvers()})"
            ) from first
        try:
            beta, n_iter = _solve_cvxpy_once(K, kappa, B, eps, other)
            return beta, n_iter, other
        except (cp.error.SolverError, RuntimeError, ValueError, ArithmeticError) as second:
            raise RuntimeError(
                f"KMM: cvxpy solver {solver} failed ({first}); retried with {other}, which also failed "
                f"({second}). Check the input for duplicated or extreme rows, or pass gamma/B/eps explicitly"
            ) from second


# --------------------------------------------------------------------------------------------------
# public solve
# --------------------------------------------------------------------------------------------------


def _solve(
    fetch: Fetch,
    dense: Callable[[], np.ndarray],
    kappa: np.ndarray,
    *,
    B: float,
    eps: float | None,
    solver: Solver,
    cvxpy_solver: str | None,
    tol: float,
) -> KMMSolution:
    """Shared body of :func:`solve_kmm` and :func:`kmm_chunk`: ``fetch`` gives kernel columns on demand,
    ``dense()`` the full K (only called by routes that need it)."""
    m = kappa.shape[0]
    eps_ = default_eps(m) if eps is None else float(eps)
    _check_params(m, B, eps_)
    if solver not in ("auto", "lbfgsb", "cvxpy"):
        raise ValueError(f"solver must be 'auto', 'lbfgsb' or 'cvxpy'; got {solver!r}")
    route = ""
    n_iter: int | None = None
    beta: np.ndarray | None = None
    n_cols: int | None = None
    K: np.ndarray | None = None
    with threadpool_limits(limits=1, user_api="blas"):  # see the module docstring
        cols = _Columns(m, fetch)
        if solver == "auto":
            try:
                beta, n_iter, n_cols = _solve_active_set(cols, kappa, B, eps_)
                route = "active-set"
            except _Singular:
                route = "active-set->"
        elif solver == "lbfgsb":
            K = dense()
            n_cols = m
            beta, n_iter, converged, polished = _solve_lbfgsb(K, kappa, B, tol)
            route = "lbfgsb+pdas" if polished else "lbfgsb"
            lo, hi = _sum_bounds(m, eps_)
            s = float(beta.sum())
            if s < lo - 1e-9 * m or s > hi + 1e-9 * m:
                raise ValueError(
                    f"KMM: the sum constraint binds (Σβ = {s:.6g} outside [{lo:.6g}, {hi:.6g}]), which "
                    "L-BFGS-B cannot enforce; use solver='auto' or 'cvxpy'"
                )
            if not converged:
                raise RuntimeError("KMM: L-BFGS-B hit its iteration limit; use solver='auto' or 'cvxpy'")
        if beta is not None:
            beta = _repair(beta, B, eps_)
            support = np.flatnonzero(beta)
            kcols = fetch(support) if K is None else K[:, support]
            grad = kcols @ beta[support] - kappa
            objective = 0.5 * float(beta[support] @ grad[support] - kappa[support] @ beta[support])
            gap = duality_gap(grad, beta, B=B, eps=eps_)
            if solver == "auto" and gap > _GAP_TOL * max(abs(objective), 1e-300):
                beta, route = None, route + "->"  # not certified: hand over to the reference solver
            elif solver == "auto":
                tied = _tie_break(cols, kappa, B, eps_, beta, objective, gap)
                if tied is not None:
                    beta, objective, gap, n_cols, lam = tied
                    route += f"+ridge{lam:g}"
        if beta is None:
            K = dense() if K is None else K
            n_cols = m
            beta, n_iter, used = _solve_cvxpy(K, kappa, B, eps_, cvxpy_solver or _default_cvxpy_solver())
            route += f"cvxpy:{used}"
            beta = _repair(beta, B, eps_)
            grad = K @ beta - kappa
            objective = 0.5 * float(beta @ (grad - kappa))
            gap = duality_gap(grad, beta, B=B, eps=eps_)
    return KMMSolution(
        beta=beta,
        objective=objective,
        solver=route,
        n_iter=n_iter,
        B=float(B),
        eps=eps_,
        max_violation=bound_violation(beta, B=B, eps=eps_),
        gap=max(gap, 0.0),
        n_kernel_columns=n_cols,
    )


def solve_kmm(
    K: np.ndarray,
    kappa: np.ndarray,
    *,
    B: float = 1000.0,
    eps: float | None = None,
    solver: Solver = "auto",
    cvxpy_solver: str | None = None,
    tol: float = 1e-13,
) -> KMMSolution:
    """Solve KMM eq. 12 for a given kernel matrix K (m×m) and κ (m,). Returns a :class:`KMMSolution`.

    ``eps=None`` means the paper's (√m − 1)/√m. ``tol`` is L-BFGS-B's relative-reduction tolerance
    for ``solver="lbfgsb"``. See the module docstring for the solver routes.
    """
    K = np.asarray(K, dtype=float)
    kappa = np.asarray(kappa, dtype=float)
    m = kappa.shape[0]
    if kappa.ndim != 1 or K.shape != (m, m):
        raise ValueError(f"K has shape {K.shape} but kappa has {m} entries; K must be {m}×{m}")
    if not (np.all(np.isfinite(K)) and np.all(np.isfinite(kappa))):
        raise ValueError("K or kappa has missing or infinite values")
    return _solve(
        _dense_fetch(K), lambda: K, kappa, B=B, eps=eps, solver=solver, cvxpy_solver=cvxpy_solver, tol=tol
    )


def _chunk_solution(
    X_chunk: np.ndarray,
    X_target: np.ndarray,
    *,
    gamma: float,
    B: float,
    eps: float | None,
    solver: Solver,
    cvxpy_solver: str | None,
    tol: float,
    kappa_dtype: KappaDtype = "float64",
) -> KMMSolution:
    X_chunk = np.asarray(X_chunk, dtype=float)
    X_target = np.asarray(X_target, dtype=float)
    for X, label in ((X_chunk, "X_chunk"), (X_target, "X_target")):
        if X.ndim != 2:
            raise ValueError(f"{label} must be 2-d (rows × features); got {X.ndim} dimensions")
        if not np.all(np.isfinite(X)):
            raise ValueError(f"{label} has missing or infinite values; impute or drop them first")
    if X_target.shape[0] == 0:
        raise ValueError("target set has 0 rows")
    if X_chunk.shape[1] != X_target.shape[1]:
        raise ValueError(f"X_chunk has {X_chunk.shape[1]} columns but X_target has {X_target.shape[1]}")
    if not (np.isfinite(gamma) and gamma > 0):
        raise ValueError(f"gamma must be a positive number; got {gamma}")
    if X_chunk.shape[0] < 2:
        _check_params(X_chunk.shape[0], B, 1.0)  # raises the "at least 2 rows" error
    if kappa_dtype not in ("float64", "float32"):
        raise ValueError(f"kappa_dtype must be 'float64' or 'float32'; got {kappa_dtype!r}")
    kappa = kmm_kappa(X_chunk, X_target, gamma, dtype=np.float32 if kappa_dtype == "float32" else np.float64)

    def dense() -> np.ndarray:
        if X_chunk.shape[0] > MAX_DENSE_ROWS:
            raise RuntimeError(
                f"KMM: this route needs the dense {X_chunk.shape[0]}² kernel; use chunks of at most "
                f"{MAX_DENSE_ROWS} rows"
            )
        return rbf_kernel(X_chunk, X_chunk, gamma=gamma)

    return _solve(
        _rbf_fetch(X_chunk, gamma), dense, kappa, B=B, eps=eps, solver=solver, cvxpy_solver=cvxpy_solver, tol=tol
    )


def kmm_chunk(
    X_chunk: Any,
    X_target: Any,
    *,
    gamma: float,
    B: float = 1000.0,
    eps: float | None = None,
    solver: Solver = "auto",
    cvxpy_solver: str | None = None,
    tol: float = 1e-13,
    kappa_dtype: KappaDtype = "float64",
) -> np.ndarray:
    """Ensemble-KMM piece: KMM eq. 12 for one source chunk against the whole target. Returns β.

    Pure function of its inputs (no randomness). Inputs must already be in the kernel's space
    (e.g. standardized with the pooled scaler of :func:`shared_kernel`); ``eps=None`` means
    (√m_c − 1)/√m_c for this chunk's m_c rows; ``kappa_dtype`` as in :func:`kmm_kappa`.
    β satisfies the chunk's constraints exactly.
    """
    return _chunk_solution(
        X_chunk, X_target, gamma=gamma, B=B, eps=eps, solver=solver, cvxpy_solver=cvxpy_solver, tol=tol,
        kappa_dtype=kappa_dtype,
    ).beta


def kmm_polish(
    X_source: Any,
    X_target: Any,
    beta: Any,
    *,
    gamma: float,
    B: float = 1000.0,
    eps: float | None = None,
    kappa_dtype: KappaDtype = "float64",
) -> np.ndarray:
    """Ensemble-KMM correction: re-solve KMM eq. 12 for the *whole* source on the support of β.

    ``beta`` is a combined ensemble β (:func:`combine_chunks`); U = its non-zero rows. Solves eq. 12 of
    the full problem (all m source rows, κ_i = (m/m') Σ_j k(x_i, x'_j), Σβ in [m(1−ε), m(1+ε)] with
    ``eps=None`` → (√m − 1)/√m for the full m) with β_i = 0 outside U, by the working-set solver on the
    |U| rows: κ for U only (|U|·m' kernel entries) and kernel columns among U. The combined β is feasible
    for that problem (each chunk's ε is below the full one), so the result is kept only when its
    objective is not above the combined β's — the correction never makes the full objective worse.
    Rows outside U stay at 0 (no check that adding them would help: that would cost m·|U| entries).
    Inputs in the kernel's space, as for :func:`kmm_chunk`. Returns the corrected β (full length).
    """
    Zs = np.asarray(X_source, dtype=float)
    Zt = np.asarray(X_target, dtype=float)
    beta = np.asarray(beta, dtype=float)
    m = Zs.shape[0]
    if beta.shape != (m,):
        raise ValueError(f"beta has shape {beta.shape}; expected ({m},), one weight per source row")
    eps_ = default_eps(m) if eps is None else float(eps)
    _check_params(m, B, eps_)
    U = np.flatnonzero(beta)
    if U.size < 2:
        return beta
    kappa_u = kmm_kappa(Zs[U], Zt, gamma, dtype=np.float32 if kappa_dtype == "float32" else np.float64) * (
        m / U.size
    )
    fetch = _rbf_fetch(Zs[U], gamma)
    with threadpool_limits(limits=1, user_api="blas"):
        try:
            new_u, _, _ = _solve_active_set(
                fetch, kappa_u, B, eps_, x0=beta[U], sum_bounds=_sum_bounds(m, eps_)
            )
        except _Singular:
            return beta
        new = np.zeros(m)
        new[U] = new_u
        new = _repair(new, B, eps_)

        def objective(b_u: np.ndarray) -> float:
            sup = np.flatnonzero(b_u)
            return float(0.5 * b_u[sup] @ (fetch(sup)[sup] @ b_u[sup]) - kappa_u @ b_u)

        if new[U].sum() != new.sum() or objective(new[U]) > objective(beta[U]):
            return beta
    return new


def chunk_indices(m: int, chunk_size: int, random_state: int) -> list[np.ndarray]:
    """Split source rows 0..m-1 into ⌈m/chunk_size⌉ random chunks of near-equal size (≤ chunk_size).

    Each chunk's indices are sorted. Same (m, chunk_size, random_state) → same chunks.
    """
    if m < 1:
        raise ValueError("source set has 0 rows")
    if chunk_size < 2:
        raise ValueError(f"chunk_size must be at least 2; got {chunk_size}")
    if not isinstance(random_state, int | np.integer):
        raise TypeError(f"random_state must be an int seed; got {random_state!r}")
    n_chunks = -(-m // chunk_size)
    perm = np.random.default_rng(int(random_state)).permutation(m)
    return [np.sort(c) for c in np.array_split(perm, n_chunks)]


def combine_chunks(m: int, chunks: Sequence[np.ndarray], betas: Sequence[np.ndarray]) -> np.ndarray:
    """Put per-chunk β back in source-row order (ensemble KMM). Chunks must partition 0..m-1."""
    if len(chunks) != len(betas):
        raise ValueError(f"{len(chunks)} chunks but {len(betas)} β vectors")
    out = np.full(m, np.nan)
    seen = np.zeros(m, dtype=int)
    for idx, beta in zip(chunks, betas, strict=True):
        idx = np.asarray(idx)
        beta = np.asarray(beta, dtype=float)
        if idx.shape != beta.shape:
            raise ValueError(f"a chunk has {idx.shape[0]} rows but its β has {beta.shape[0]} entries")
        out[idx] = beta
        np.add.at(seen, idx, 1)
    if np.any(seen != 1):
        raise ValueError(
            f"chunks must cover every source row exactly once; {int((seen == 0).sum())} rows missing, "
            f"{int((seen > 1).sum())} repeated"
        )
    return out


class KMM(BaseWeighter):
    """Kernel mean matching weights (KMM eq. 12), optionally as an ensemble over source chunks.

    Parameters: ``gamma`` (of exp(−gamma·‖z − z'‖²) on the standardized features z when
    ``standardize``; None → median heuristic on the pooled standardized data), ``B`` (upper
    bound per weight, default 1000), ``eps`` (None → (√m − 1)/√m per solved problem), ``solver``
    ("auto" | "lbfgsb" | "cvxpy"), ``cvxpy_solver`` (None → CLARABEL), ``chunk_size`` (None → one exact
    problem; int → ensemble KMM over random chunks of at most that many source rows, each matched
    to the full target), ``n_jobs`` (processes for the chunks, joblib; 1 = in-process),
    ``standardize`` (pooled standardization before the kernel), ``tol`` (L-BFGS-B's ftol for
    ``solver="lbfgsb"``), ``kappa_dtype`` ("float64" | "float32": precision of the kernel blocks summed
    into κ, see :func:`kmm_kappa`), ``polish`` (ensemble only: after combining the chunks, re-solve the
    full problem on the support of the combined β with :func:`kmm_polish`; default True — the last step
    of the fan-out recipe of the module docstring, which the flow runs too), ``random_state`` (seed of
    the chunk split).

    Learned: ``beta_`` (β as solved, = ``raw_weights_``), ``gamma_``, ``chunks_``, ``solutions_`` (one
    :class:`KMMSolution` per chunk, without β duplicated; empty when ``fit`` was given ``chunk_betas``),
    plus the base attributes. ``fit(X_source, X_target, chunk_betas=[...])`` takes the chunks' β solved
    elsewhere (one per chunk of ``chunk_indices(m, chunk_size, random_state)``, e.g. by parallel
    :func:`kmm_chunk` jobs) and only combines, polishes and diagnoses them. KMM is transductive:
    ``predict_weights`` raises :class:`WeightsUnavailableError`.
    """

    _min_rows = 2

    def __init__(
        self,
        *,
        gamma: float | None = None,
        B: float = 1000.0,
        eps: float | None = None,
        solver: Solver = "auto",
        cvxpy_solver: str | None = None,
        chunk_size: int | None = None,
        n_jobs: int = 1,
        standardize: bool = True,
        tol: float = 1e-13,
        kappa_dtype: KappaDtype = "float64",
        polish: bool = True,
        random_state: int = 0,
    ) -> None:
        self.gamma = gamma
        self.B = B
        self.eps = eps
        self.solver = solver
        self.cvxpy_solver = cvxpy_solver
        self.chunk_size = chunk_size
        self.n_jobs = n_jobs
        self.standardize = standardize
        self.tol = tol
        self.kappa_dtype = kappa_dtype
        self.polish = polish
        self.random_state = random_state

    def _fit_raw(self, X_source: np.ndarray, X_target: np.ndarray, **fit_params: Any) -> np.ndarray:
        chunk_betas = fit_params.pop("chunk_betas", None)
        if fit_params:
            raise TypeError(f"KMM.fit takes only chunk_betas as an extra argument; got {sorted(fit_params)}")
        m = X_source.shape[0]
        kern = shared_kernel(X_source, X_target, standardize=self.standardize,
                             gamma=None if self.gamma is None else float(self.gamma))
        Zs, Zt = kern.transform(X_source), kern.transform(X_target)
        gamma = self.gamma_ = kern.gamma
        if self.chunk_size is not None and int(self.chunk_size) < 2:
            raise ValueError(f"chunk_size must be at least 2; got {self.chunk_size}")
        if self.chunk_size is None or self.chunk_size >= m:
            if m > MAX_DENSE_ROWS:
                raise ValueError(
                    f"KMM without chunking may need the m×m kernel (m = {m}: {m * m * 8 / 1e9:.1f} GB); "
                    "set chunk_size (e.g. 2000) for ensemble KMM"
                )
            self.chunks_ = [np.arange(m)]
        else:
            self.chunks_ = chunk_indices(m, int(self.chunk_size), self.random_state)
        kw = dict(
            gamma=gamma, B=self.B, eps=self.eps, solver=self.solver, cvxpy_solver=self.cvxpy_solver, tol=self.tol,
            kappa_dtype=self.kappa_dtype,
        )
        if chunk_betas is not None:  # the chunks were solved elsewhere (the flow's kmm-chunk tasks)
            if len(chunk_betas) != len(self.chunks_):
                raise ValueError(f"chunk_betas has {len(chunk_betas)} solutions but chunk_size={self.chunk_size} "
                                 f"and random_state={self.random_state} split the source into {len(self.chunks_)} "
                                 "chunks; solve each chunk of chunk_indices(m, chunk_size, random_state)")
            solutions = []
            betas = list(chunk_betas)
        elif self.n_jobs == 1 or len(self.chunks_) == 1:
            solutions = [_chunk_solution(Zs[idx], Zt, **kw) for idx in self.chunks_]
            betas = [s.beta for s in solutions]
        else:
            from joblib import Parallel, delayed

            solutions = Parallel(n_jobs=self.n_jobs)(delayed(_chunk_solution)(Zs[idx], Zt, **kw) for idx in self.chunks_)
            betas = [s.beta for s in solutions]
        self.beta_ = combine_chunks(m, self.chunks_, betas)
        if self.polish and len(self.chunks_) > 1:
            self.beta_ = kmm_polish(
                Zs, Zt, self.beta_, gamma=gamma, B=self.B, eps=self.eps, kappa_dtype=self.kappa_dtype
            )
        self.solutions_ = [
            KMMSolution(
                np.empty(0), s.objective, s.solver, s.n_iter, s.B, s.eps, s.max_violation, s.gap, s.n_kernel_columns
            )
            for s in solutions
        ]
        return self.beta_

    def _predict_raw(self, X: np.ndarray) -> np.ndarray:
        raise WeightsUnavailableError(
            "KMM weights only the source rows it was fitted on (KMM eq. 12 solves for β on those "
            "points); use weights_, or DiscriminativeWeights / KDEWeights for new points"
        )
