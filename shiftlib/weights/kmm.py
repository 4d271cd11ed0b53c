"""Kernel mean matching (KMM eq. 12), exact, with an ensemble (chunked) variant for large sources.

``min_β ½ βᵀKβ − κᵀβ  s.t.  0 ≤ β_i ≤ B,  |Σβ_i − m| ≤ mε``, ``K_ij = k(x_i, x_j)``,
``κ_i = (m/m') Σ_j k(x_i, x'_j)`` (m source rows, m' target rows; KMM §3).

Defaults as the paper's experiments (KMM §4.2): B = 1000, ε = (√m − 1)/√m with m the number of
source rows in the problem being solved (the chunk size for ensemble KMM), Gaussian kernel
``exp(-gamma·‖z − z'‖²)``. Width: unless ``gamma`` is given, the median heuristic
``gamma = 1 / median ‖z_i − z_j‖²`` on the pooled standardized data — the shared diagnostic kernel
(:func:`shiftlib.weights.shared_kernel`), so KMM minimizes exactly the MMD every estimator reports.

Solvers (``solver=``):

* ``"auto"`` (default) — scipy's L-BFGS-B on the box ``[0, B]`` (exact gradient ``Kβ − κ``, K-matvecs
  in float32) only to *locate* the active set, then a primal-dual active-set polish (Newton steps
  ``K_FF β_F = κ_F − K_FU·B`` by Cholesky) to a point that satisfies the KKT conditions of the box QP
  exactly. If that point also satisfies the sum constraint it is the optimum of eq. 12 (the box QP is
  a relaxation). Otherwise — the sum constraint binds, or the polish fails because K_FF is numerically
  singular (few features and a wide kernel) — it solves with cvxpy.
* ``"lbfgsb"`` — L-BFGS-B in float64 down to ``ftol = tol``, then the same polish when it succeeds;
  raises when the sum constraint binds. Accuracy without the polish depends on K's conditioning.
* ``"cvxpy"`` — the reference: the QP as written, through cvxpy (default solver HiGHS, whose
  active-set QP was 2× faster than CLARABEL at m = 5,000 here; CLARABEL when HiGHS is missing).

Kernels and solves run with BLAS limited to one thread: on the shared 2-core machine here,
multithreaded BLAS made L-BFGS-B's matvecs 10–40× slower, the polish's Cholesky factorizations ~3×
and the blocked kernel sums ~2× slower; it also keeps parallel chunk jobs from oversubscribing cores.

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

``KMM(chunk_size=...)`` runs exactly these steps in-process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import cvxpy as cp
import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.optimize import Bounds, minimize
from sklearn.metrics.pairwise import rbf_kernel
from threadpoolctl import threadpool_limits

from ._base import (
    BaseWeighter,
    WeightsUnavailableError,
    kernel_row_sums,
    median_heuristic_gamma,
    shared_kernel,
)

__all__ = [
    "KMM",
    "KMMSolution",
    "bound_violation",
    "chunk_indices",
    "combine_chunks",
    "default_eps",
    "kmm_chunk",
    "kmm_kappa",
    "kmm_objective",
    "solve_kmm",
]

Solver = Literal["auto", "lbfgsb", "cvxpy"]

#: above this many source rows without chunking, the m×m kernel would need > 800 MB
MAX_DENSE_ROWS = 10_000
#: relative margin by which a repaired sum is pulled inside its bound, so the check holds in floats
_SUM_MARGIN = 1e-12
#: smallest eps accepted: the band [m(1−ε), m(1+ε)] must be wide enough to land in after rounding
_MIN_EPS = 1e-10
#: L-BFGS-B tolerance of the first, active-set-locating pass
_LOCATE_TOL = 1e-9


@dataclass(frozen=True)
class KMMSolution:
    """One solve of KMM eq. 12: β, its objective ½βᵀKβ − κᵀβ, and how it was obtained."""

    beta: np.ndarray
    objective: float
    solver: str  # "lbfgsb", "cvxpy:HIGHS", "lbfgsb->cvxpy:HIGHS" (fallback), ...
    n_iter: int | None  # iterations of the route that produced β (L-BFGS-B, or the cvxpy solver's)
    B: float
    eps: float
    max_violation: float  # of the returned β; 0.0 by construction (verified)


def default_eps(m: int) -> float:
    """KMM §4.2: ε = (√m − 1)/√m for m source rows."""
    return float((np.sqrt(m) - 1.0) / np.sqrt(m))


def kmm_kappa(Z_source: np.ndarray, Z_target: np.ndarray, gamma: float) -> np.ndarray:
    """KMM eq. 12: κ_i = (m/m') Σ_j k(x_i, x'_j), Gaussian kernel exp(-gamma·‖·‖²)."""
    return kernel_row_sums(Z_source, Z_target, gamma) * (Z_source.shape[0] / Z_target.shape[0])


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


def _check_params(m: int, B: float, eps: float) -> None:
    if m < 1:
        raise ValueError("source set has 0 rows")
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


def _lbfgsb(K: np.ndarray, kappa: np.ndarray, B: float, tol: float, x0: np.ndarray) -> tuple[np.ndarray, int, bool]:
    m = kappa.shape[0]

    def fun(beta: np.ndarray) -> tuple[float, np.ndarray]:
        g = np.asarray(K @ beta.astype(K.dtype, copy=False), dtype=float)
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


def _pdas_polish(K: np.ndarray, kappa: np.ndarray, B: float, beta: np.ndarray, max_iter: int = 50) -> np.ndarray | None:
    """Primal-dual active-set (semismooth Newton) iterations for the box QP, from a warm start.

    Each step fixes β at 0 / B where ``β − g/m`` leaves the box (g = Kβ − κ), solves
    ``K_FF β_F = κ_F − K_FU·B`` on the rest by Cholesky, and stops when the sets repeat. A fixed point
    with β_F inside the box satisfies the KKT conditions: the exact optimum of the box QP.
    Returns None when it does not get there (Cholesky failure on a numerically singular K_FF,
    infeasible fixed point, or no convergence) — the caller keeps the L-BFGS-B point.
    Hand-written: scipy has no box-constrained QP active-set solver.
    """
    m = kappa.shape[0]
    previous: tuple[bytes, bytes] | None = None
    for _ in range(max_iter):
        step = beta - (K @ beta - kappa) / m
        at_zero, at_b = step <= 0.0, step >= B
        key = (at_zero.tobytes(), at_b.tobytes())
        if key == previous:
            free = ~(at_zero | at_b)
            ok_free = free.sum() == 0 or (beta[free].min() >= -1e-9 * B and beta[free].max() <= B * (1 + 1e-9))
            return np.clip(beta, 0.0, B) if ok_free else None
        previous = key
        free = ~(at_zero | at_b)
        new = np.zeros(m)
        new[at_b] = B
        if free.any():
            rhs = kappa[free] - K[np.ix_(free, at_b)] @ new[at_b]
            try:
                factor = cho_factor(K[np.ix_(free, free)], check_finite=False)
            except np.linalg.LinAlgError:
                return None
            new[free] = cho_solve(factor, rhs, check_finite=False)
        if not np.all(np.isfinite(new)):
            return None
        beta = new
    return None


def _solve_fast(
    K: np.ndarray, kappa: np.ndarray, B: float, ftol: float, *, locate_only: bool
) -> tuple[np.ndarray, int, bool, bool]:
    """L-BFGS-B (relative-reduction tolerance ``ftol``), then the primal-dual active-set polish to the
    exact box optimum. With ``locate_only`` L-BFGS-B only has to find the active set for the polish,
    so it runs its K-matvecs in float32 (half the memory traffic, which bounds a matvec's speed).
    Returns (β, L-BFGS-B iterations, converged, polished)."""
    m = kappa.shape[0]
    with threadpool_limits(limits=1, user_api="blas"):
        K_mv = K.astype(np.float32) if locate_only else K
        beta, nit, converged = _lbfgsb(K_mv, kappa, B, ftol, np.full(m, min(1.0, B)))
        del K_mv
        polished = _pdas_polish(K, kappa, B, beta) if converged else None
    if polished is not None:
        f_pol, f_lb = kmm_objective(K, kappa, polished), kmm_objective(K, kappa, beta)
        if f_pol <= f_lb + 1e-12 * abs(f_lb):  # the KKT point can only tie or beat L-BFGS-B's
            return polished, nit, True, True
    return beta, nit, converged, False


def _default_cvxpy_solver() -> str:
    installed = cp.installed_solvers()
    return "HIGHS" if "HIGHS" in installed else "CLARABEL"


def _solve_cvxpy(K: np.ndarray, kappa: np.ndarray, B: float, eps: float, solver: str) -> tuple[np.ndarray, int | None]:
    m = kappa.shape[0]
    lo, hi = _sum_bounds(m, eps)
    beta = cp.Variable(m)
    # same 1/m scaling as the L-BFGS-B route; psd_wrap skips cvxpy's eigenvalue check (K is a Gram matrix)
    objective = cp.Minimize(0.5 * cp.quad_form(beta, cp.psd_wrap(K / m)) - (kappa / m) @ beta)
    problem = cp.Problem(objective, [beta >= 0, beta <= B, cp.sum(beta) >= lo, cp.sum(beta) <= hi])
    problem.solve(solver=solver)
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or beta.value is None:
        raise RuntimeError(f"KMM: cvxpy/{solver} returned status {problem.status!r}")
    n_iter = problem.solver_stats.num_iters if problem.solver_stats is not None else None
    return np.asarray(beta.value, dtype=float), n_iter


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
    on the objective for ``solver="lbfgsb"`` ("auto" locates with 1e-9 and polishes to the exact
    optimum). See the module docstring for the solver routes.
    """
    K = np.asarray(K, dtype=float)
    kappa = np.asarray(kappa, dtype=float)
    m = kappa.shape[0]
    if K.shape != (m, m):
        raise ValueError(f"K has shape {K.shape} but kappa has {m} entries; K must be {m}×{m}")
    eps_ = default_eps(m) if eps is None else float(eps)
    _check_params(m, B, eps_)
    if solver not in ("auto", "lbfgsb", "cvxpy"):
        raise ValueError(f"solver must be 'auto', 'lbfgsb' or 'cvxpy'; got {solver!r}")
    cvx = cvxpy_solver or _default_cvxpy_solver()
    route = ""
    n_iter: int | None = None
    beta: np.ndarray | None = None
    if solver in ("auto", "lbfgsb"):
        # "auto" only needs L-BFGS-B to locate the active set; "lbfgsb" must stand on its own
        auto = solver == "auto"
        beta, n_iter, converged, polished = _solve_fast(
            K, kappa, B, _LOCATE_TOL if auto else tol, locate_only=auto
        )
        route = "lbfgsb+pdas" if polished else "lbfgsb"
        lo, hi = _sum_bounds(m, eps_)
        s = float(beta.sum())
        # tolerance 1e-9·m: a box optimum that lands on the sum bound up to rounding is still feasible
        binds = s < lo - 1e-9 * m or s > hi + 1e-9 * m
        if solver == "lbfgsb" and binds:
            raise ValueError(
                f"KMM: the sum constraint binds (Σβ = {s:.6g} outside [{lo:.6g}, {hi:.6g}]), which "
                "L-BFGS-B cannot enforce; use solver='auto' or 'cvxpy'"
            )
        if solver == "lbfgsb" and not converged:
            raise RuntimeError("KMM: L-BFGS-B hit its iteration limit; use solver='auto' or 'cvxpy'")
        # "auto" keeps only a polished (KKT-verified) point; anything else goes to the reference solver
        if solver == "auto" and (binds or not polished):
            beta = None
            route += "->"
    if beta is None:
        beta, n_iter = _solve_cvxpy(K, kappa, B, eps_, cvx)
        route += f"cvxpy:{cvx}"
    beta = _repair(beta, B, eps_)
    return KMMSolution(
        beta=beta,
        objective=kmm_objective(K, kappa, beta),
        solver=route,
        n_iter=n_iter,
        B=float(B),
        eps=eps_,
        max_violation=bound_violation(beta, B=B, eps=eps_),
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
) -> KMMSolution:
    X_chunk = np.asarray(X_chunk, dtype=float)
    X_target = np.asarray(X_target, dtype=float)
    if X_target.shape[0] == 0:
        raise ValueError("target set has 0 rows")
    if X_chunk.shape[1:] != X_target.shape[1:]:
        raise ValueError(f"X_chunk has {X_chunk.shape[1]} columns but X_target has {X_target.shape[1]}")
    if not gamma > 0:
        raise ValueError(f"gamma must be positive; got {gamma}")
    with threadpool_limits(limits=1, user_api="blas"):  # see the module docstring
        K = rbf_kernel(X_chunk, X_chunk, gamma=gamma)
        kappa = kmm_kappa(X_chunk, X_target, gamma)
    return solve_kmm(K, kappa, B=B, eps=eps, solver=solver, cvxpy_solver=cvxpy_solver, tol=tol)


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
) -> np.ndarray:
    """Ensemble-KMM piece: KMM eq. 12 for one source chunk against the whole target. Returns β.

    Pure function of its inputs (no randomness). Inputs must already be in the kernel's space
    (e.g. standardized with the pooled scaler of :func:`shared_kernel`); ``eps=None`` means
    (√m_c − 1)/√m_c for this chunk's m_c rows. β satisfies the chunk's constraints exactly.
    """
    return _chunk_solution(
        X_chunk, X_target, gamma=gamma, B=B, eps=eps, solver=solver, cvxpy_solver=cvxpy_solver, tol=tol
    ).beta


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
    ("auto" | "lbfgsb" | "cvxpy"), ``cvxpy_solver`` (None → HiGHS), ``chunk_size`` (None → one exact
    problem; int → ensemble KMM over random chunks of at most that many source rows, each matched
    to the full target), ``standardize`` (pooled standardization before the kernel), ``tol``
    (L-BFGS-B's ftol for ``solver="lbfgsb"``), ``random_state`` (seed of the chunk split).

    Learned: ``beta_`` (β as solved, = ``raw_weights_``), ``gamma_``, ``chunks_``, ``solutions_`` (one
    :class:`KMMSolution` per chunk, without β duplicated), plus the base attributes. KMM is
    transductive: ``predict_weights`` raises :class:`WeightsUnavailableError`.
    """

    def __init__(
        self,
        *,
        gamma: float | None = None,
        B: float = 1000.0,
        eps: float | None = None,
        solver: Solver = "auto",
        cvxpy_solver: str | None = None,
        chunk_size: int | None = None,
        standardize: bool = True,
        tol: float = 1e-13,
        random_state: int = 0,
    ) -> None:
        self.gamma = gamma
        self.B = B
        self.eps = eps
        self.solver = solver
        self.cvxpy_solver = cvxpy_solver
        self.chunk_size = chunk_size
        self.standardize = standardize
        self.tol = tol
        self.random_state = random_state

    def _fit_raw(self, X_source: np.ndarray, X_target: np.ndarray, **fit_params: Any) -> np.ndarray:
        if fit_params:
            raise TypeError(f"KMM.fit takes no extra arguments; got {sorted(fit_params)}")
        m = X_source.shape[0]
        if self.standardize:
            kern = shared_kernel(X_source, X_target)
            Zs, Zt = kern.transform(X_source), kern.transform(X_target)
            gamma = kern.gamma if self.gamma is None else float(self.gamma)
        else:
            Zs, Zt = X_source, X_target
            gamma = median_heuristic_gamma(np.vstack([Zs, Zt])) if self.gamma is None else float(self.gamma)
        self.gamma_ = gamma
        if self.chunk_size is None or self.chunk_size >= m:
            if m > MAX_DENSE_ROWS:
                raise ValueError(
                    f"KMM without chunking holds an m×m kernel (m = {m}: {m * m * 8 / 1e9:.1f} GB); "
                    "set chunk_size (e.g. 2000) for ensemble KMM"
                )
            self.chunks_ = [np.arange(m)]
        else:
            self.chunks_ = chunk_indices(m, int(self.chunk_size), self.random_state)
        solutions = [
            _chunk_solution(
                Zs[idx], Zt, gamma=gamma, B=self.B, eps=self.eps, solver=self.solver,
                cvxpy_solver=self.cvxpy_solver, tol=self.tol,
            )
            for idx in self.chunks_
        ]
        self.beta_ = combine_chunks(m, self.chunks_, [s.beta for s in solutions])
        self.solutions_ = [
            KMMSolution(np.empty(0), s.objective, s.solver, s.n_iter, s.B, s.eps, s.max_violation)
            for s in solutions
        ]
        return self.beta_

    def _predict_raw(self, X: np.ndarray) -> np.ndarray:
        raise WeightsUnavailableError(
            "KMM weights only the source rows it was fitted on (KMM eq. 12 solves for β on those "
            "points); use weights_, or DiscriminativeWeights / KDEWeights for new points"
        )
