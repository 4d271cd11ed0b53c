"""KMM eq. 12 as a quadratic program: κ, objective, constraints, the solver routes and their certificate.

Private to :mod:`shiftlib.weights.kmm` (which documents the routes). Holds the working-set active-set
solver of ``solver="auto"`` with its tie-break, the L-BFGS-B route, the cvxpy reference, the Frank–Wolfe
duality gap that certifies a β, and the repair that makes every β satisfy the constraints exactly.
Measurements behind the constants: ``reports/kmm_notes.md`` and ``benchmarks/kmm.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve
from scipy.optimize import Bounds, minimize
from threadpoolctl import threadpool_limits

from shiftlib._validation import counted
from shiftlib.kernels import kernel_row_sums

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
#: optimal set — the tie-break does (reports/kmm_notes.md).
_RIDGE = 1e-8
#: tie-break of "auto" (module docstring): ridges tried, largest first, after the certified solve of eq. 12;
#: a decade apart so that at most four extra solves are spent (how 1e-2 and 1e-5 were chosen:
#: reports/kmm_notes.md)
_TIE_RIDGES: tuple[float, ...] = (1e-2, 1e-3, 1e-4, 1e-5)
#: the tie-break's β_λ is kept only when its certified excess over f* is ≤ _TIE_TOL·|f(β_λ)|
_TIE_TOL = 1e-6
#: rows in the first working set
_WS_START = 64
#: cvxpy solvers tried, in this order, after the requested one fails
_CVXPY_ALTERNATES = ("CLARABEL", "OSQP", "HIGHS", "SCS")


class Method(Enum):
    """The first solver route of KMM eq. 12 (module docstring of :mod:`shiftlib.weights.kmm`)."""

    ACTIVE_SET = "active-set"
    LBFGSB = "lbfgsb"
    CVXPY = "cvxpy"


@dataclass(frozen=True)
class Route:
    """How a β was obtained: the first route and what followed it.

    Attributes
    ----------
    method : Method
        The route tried first (``solver="auto"`` → ACTIVE_SET).
    polished : bool
        L-BFGS-B's point was improved by the primal-dual active-set polish.
    tie_ridge : float or None
        The tie-break's λ when its β_λ was kept.
    fallback : bool
        The first route failed or was not certified and cvxpy produced β.
    cvxpy_solver : str or None
        The cvxpy solver that produced β.
    """

    method: Method
    polished: bool = False
    tie_ridge: float | None = None
    fallback: bool = False
    cvxpy_solver: str | None = None

    def __str__(self) -> str:
        """``"active-set"``, ``"active-set+ridge0.001"``, ``"lbfgsb+pdas"``, ``"cvxpy:CLARABEL"``,
        ``"active-set->cvxpy:CLARABEL"``."""
        if self.method is Method.CVXPY:
            return f"cvxpy:{self.cvxpy_solver}"
        out = self.method.value + ("+pdas" if self.polished else "")
        out += f"+ridge{self.tie_ridge:g}" if self.tie_ridge is not None else ""
        return out + (f"->cvxpy:{self.cvxpy_solver}" if self.fallback else "")


@dataclass(frozen=True)
class KMMSolution:
    """One solve of KMM eq. 12: β, its objective ½βᵀKβ − κᵀβ, and how it was obtained.

    ``solver`` is ``str(route)``, kept as text for logs and tables; ``route`` is the same as data.
    """

    beta: np.ndarray
    objective: float
    solver: str
    n_iter: int | None  # outer iterations of the route that produced β (working-set, L-BFGS-B, cvxpy's)
    B: float
    eps: float
    max_violation: float  # of the returned β; 0.0 by construction (verified)
    gap: float = float("nan")  # certified bound on f(β) − f* (Frank–Wolfe duality gap; tie-break: its excess bound)
    n_kernel_columns: int | None = None  # kernel columns the solver computed (m for a dense K)
    route: Route | None = None


def default_eps(m: int) -> float:
    """KMM §4.2: ε = (√m − 1)/√m for m source rows."""
    return float((np.sqrt(m) - 1.0) / np.sqrt(m))


def kmm_kappa(
    Z_source: np.ndarray, Z_target: np.ndarray, gamma: float, *, dtype: type[np.floating] = np.float64
) -> np.ndarray:
    """KMM eq. 12: κ_i = (m/m') Σ_j k(x_i, x'_j), Gaussian kernel exp(-gamma·‖·‖²).

    Kernel blocks in ``dtype``, summed in float64. ``np.float32`` is faster but moves β by up to
    cond(K)·2e-7 along K's flat directions (reports/kmm_notes.md) — so float64 is the default and
    float32 an option for large ensembles.
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
            f"source set has {counted(m, 'row')}; KMM needs at least 2 (with m = 1 the paper's "
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
# one solve: the first route, the certificate, the tie-break, the cvxpy fallback
# --------------------------------------------------------------------------------------------------


@dataclass
class _Attempt:
    """A β from a route (None when the route failed), with its bookkeeping."""

    beta: np.ndarray | None
    route: Route
    n_iter: int | None = None
    n_cols: int | None = None
    K: np.ndarray | None = None


def _first_route(cols: _Columns, dense: Callable[[], np.ndarray], kappa: np.ndarray, B: float, eps: float,
                 solver: Solver, tol: float) -> _Attempt:
    """Run the requested route ("auto" → working-set active set; "lbfgsb"); "cvxpy" returns no β."""
    m = kappa.shape[0]
    if solver == "auto":
        try:
            beta, n_iter, n_cols = _solve_active_set(cols, kappa, B, eps)
            return _Attempt(beta, Route(Method.ACTIVE_SET), n_iter, n_cols)
        except _Singular:
            return _Attempt(None, Route(Method.ACTIVE_SET, fallback=True))
    if solver == "cvxpy":
        return _Attempt(None, Route(Method.CVXPY))
    K = dense()
    beta, n_iter, converged, polished = _solve_lbfgsb(K, kappa, B, tol)
    lo, hi = _sum_bounds(m, eps)
    s = float(beta.sum())
    if s < lo - 1e-9 * m or s > hi + 1e-9 * m:
        raise ValueError(
            f"KMM: the sum constraint binds (Σβ = {s:.6g} outside [{lo:.6g}, {hi:.6g}]), which "
            "L-BFGS-B cannot enforce; use solver='auto' or 'cvxpy'"
        )
    if not converged:
        raise RuntimeError("KMM: L-BFGS-B hit its iteration limit; use solver='auto' or 'cvxpy'")
    return _Attempt(beta, Route(Method.LBFGSB, polished=polished), n_iter, m, K)


def _certify(cols: _Columns, kappa: np.ndarray, B: float, eps: float, att: _Attempt,
             solver: Solver) -> tuple[_Attempt, float, float]:
    """Repair β, compute its objective and duality gap; "auto" hands an uncertified β to cvxpy (β = None)
    and tries the tie-break on a certified one. Returns (attempt, objective, gap)."""
    assert att.beta is not None
    beta = _repair(att.beta, B, eps)
    support = np.flatnonzero(beta)
    kcols = cols._fetch(support) if att.K is None else att.K[:, support]
    grad = kcols @ beta[support] - kappa
    objective = 0.5 * float(beta[support] @ grad[support] - kappa[support] @ beta[support])
    gap = duality_gap(grad, beta, B=B, eps=eps)
    att.beta = beta
    if solver != "auto":
        return att, objective, gap
    if gap > _GAP_TOL * max(abs(objective), 1e-300):  # not certified: hand over to the reference solver
        return _Attempt(None, Route(Method.ACTIVE_SET, fallback=True), att.n_iter), objective, gap
    tied = _tie_break(cols, kappa, B, eps, beta, objective, gap)
    if tied is not None:
        beta, objective, gap, n_cols, lam = tied
        att = _Attempt(beta, Route(Method.ACTIVE_SET, tie_ridge=lam), att.n_iter, n_cols)
    return att, objective, gap


def _reference(dense: Callable[[], np.ndarray], kappa: np.ndarray, B: float, eps: float, att: _Attempt,
               cvxpy_solver: str | None) -> tuple[_Attempt, float, float]:
    """The dense QP through cvxpy (the route asked for, or the fallback of "auto")."""
    K = dense() if att.K is None else att.K
    beta, n_iter, used = _solve_cvxpy(K, kappa, B, eps, cvxpy_solver or _default_cvxpy_solver())
    beta = _repair(beta, B, eps)
    grad = K @ beta - kappa
    route = Route(att.route.method, fallback=att.route.fallback, cvxpy_solver=used)
    return (_Attempt(beta, route, n_iter, kappa.shape[0], K), 0.5 * float(beta @ (grad - kappa)),
            duality_gap(grad, beta, B=B, eps=eps))


def solve_qp(
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
    """Solve KMM eq. 12 given kernel columns on demand (``fetch``) and the dense K (``dense()``, called only
    by the routes that need it). Shared body of ``solve_kmm`` and the ensemble's chunks."""
    m = kappa.shape[0]
    eps_ = default_eps(m) if eps is None else float(eps)
    _check_params(m, B, eps_)
    if solver not in ("auto", "lbfgsb", "cvxpy"):
        raise ValueError(f"solver must be 'auto', 'lbfgsb' or 'cvxpy'; got {solver!r}")
    objective = gap = float("nan")
    # one BLAS thread: on the shared 2-core machine multithreaded BLAS was slower (reports/kmm_notes.md)
    with threadpool_limits(limits=1, user_api="blas"):
        cols = _Columns(m, fetch)
        att = _first_route(cols, dense, kappa, B, eps_, solver, tol)
        if att.beta is not None:
            att, objective, gap = _certify(cols, kappa, B, eps_, att, solver)
        if att.beta is None:
            att, objective, gap = _reference(dense, kappa, B, eps_, att, cvxpy_solver)
    assert att.beta is not None
    return KMMSolution(
        beta=att.beta, objective=objective, solver=str(att.route), n_iter=att.n_iter, B=float(B), eps=eps_,
        max_violation=bound_violation(att.beta, B=B, eps=eps_), gap=max(gap, 0.0), n_kernel_columns=att.n_cols,
        route=att.route,
    )
