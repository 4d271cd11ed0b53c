"""Kernel mean matching (KMM eq. 12), exact, with an ensemble (chunked) variant for large sources.

``min_β ½ βᵀKβ − κᵀβ  s.t.  0 ≤ β_i ≤ B,  |Σβ_i − m| ≤ mε``, ``K_ij = k(x_i, x_j)``,
``κ_i = (m/m') Σ_j k(x_i, x'_j)`` (m source rows, m' target rows; KMM §3).

Defaults as the paper's experiments (KMM §4.2): B = 1000, ε = (√m − 1)/√m with m the number of
source rows in the problem being solved (the chunk size for ensemble KMM), Gaussian kernel
``exp(-gamma·‖z − z'‖²)``. Width: unless ``gamma`` is given, the shared median heuristic of
:mod:`shiftlib.kernels` on the pooled standardized data, so KMM minimizes exactly the MMD² every
estimator and the drift report give.

Solvers (``solver=``; the code is in the private ``_kmm_qp``; measurements in ``reports/kmm_notes.md``):

* ``"auto"`` (default) — a working-set active-set method that never forms K unless it must. It keeps a
  working set W of rows (started with the 64 largest κ_i), solves eq. 12 restricted to W exactly by
  primal-dual active-set Newton steps (Cholesky on the *free* rows of W only, warm-started), and adds the
  rows at 0 whose gradient ``g = K[:, W]β_W − κ`` is negative until there are none (KMM solutions are
  often sparse, so few kernel columns are computed). A binding sum constraint is met by a safeguarded
  Newton search on its multiplier. The result is certified by the Frank–Wolfe duality gap, an upper bound
  on ``f(β) − f*``: accepted when ≤ 1e-7·|f(β)|, otherwise the problem goes to cvxpy.

  Tie-break: when K is numerically rank-deficient (few features) the optimum of eq. 12 is not unique to
  any tolerance a certificate can resolve, and the solver would return an arbitrary sparse vertex of that
  flat set. So "auto" then re-solves with a larger ridge λ (1e-2 … 1e-5, largest first, warm-started) and
  returns the first β_λ — the point closest to uniform weights among those with its objective — whose
  *certified* excess over the optimum is below 1e-6·|f(β_λ)|; β₀ itself when none is. The route records
  λ (``KMMSolution.route.tie_ridge``; ``solver`` reads ``"active-set+ridge0.001"``).
* ``"lbfgsb"`` — the previous route, kept for comparison: L-BFGS-B on the box with the full K, then a
  primal-dual active-set polish; raises when the sum constraint binds.
* ``"cvxpy"`` — the reference: the dense QP through cvxpy (CLARABEL by default, an interior point
  method). A solver that raises or returns a non-optimal status is retried once with another installed
  solver; when both fail the error names both.

All kernel work and solves run with BLAS limited to one thread (it keeps parallel chunk jobs from
oversubscribing the cores). Every returned β is repaired and then verified to satisfy the constraints
*exactly* in floating point: solvers return points slightly outside.

Ensemble KMM (the flow's fan-out; code in the private ``_kmm_ensemble``): standardize once, take one
``gamma``, split the source with :func:`chunk_indices`, solve each chunk against the full target with
:func:`kmm_chunk`, put the pieces back with :func:`combine_chunks` and correct with :func:`kmm_polish`.
``KMM(chunk_size=...)`` runs exactly these steps in-process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from shiftlib.kernels import shared_kernel

from ._base import BaseWeighter, WeightsUnavailableError
from ._kmm_ensemble import chunk_indices, chunk_solution, combine_chunks, kmm_chunk, kmm_polish
from ._kmm_qp import (
    MAX_DENSE_ROWS,
    KappaDtype,
    KMMSolution,
    Method,
    Route,
    Solver,
    _dense_fetch,
    bound_violation,
    default_eps,
    duality_gap,
    kmm_kappa,
    kmm_objective,
    solve_qp,
)

__all__ = [
    "KMM",
    "KMMSolution",
    "Method",
    "Route",
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
    """Solve KMM eq. 12 for a given kernel matrix K and κ.

    Parameters
    ----------
    K : ndarray of shape (m, m)
    kappa : ndarray of shape (m,)
    B : float, default 1000
    eps : float, optional
        None means the paper's (√m − 1)/√m.
    solver : {"auto", "lbfgsb", "cvxpy"}, default "auto"
        See the module docstring for the routes.
    cvxpy_solver : str, optional
    tol : float, default 1e-13
        L-BFGS-B's relative-reduction tolerance for ``solver="lbfgsb"``.

    Returns
    -------
    KMMSolution
    """
    K = np.asarray(K, dtype=float)
    kappa = np.asarray(kappa, dtype=float)
    m = kappa.shape[0]
    if kappa.ndim != 1 or K.shape != (m, m):
        raise ValueError(f"K has shape {K.shape} but kappa has {m} entries; K must be {m}×{m}")
    if not (np.all(np.isfinite(K)) and np.all(np.isfinite(kappa))):
        raise ValueError("K or kappa has missing or infinite values")
    return solve_qp(
        _dense_fetch(K), lambda: K, kappa, B=B, eps=eps, solver=solver, cvxpy_solver=cvxpy_solver, tol=tol
    )


class KMM(BaseWeighter):
    """Kernel mean matching weights (KMM eq. 12), optionally as an ensemble over source chunks.

    Parameters
    ----------
    gamma : float, optional
        Of ``exp(−gamma·‖z − z'‖²)`` on the (standardized) features; None → the shared median heuristic.
    B : float, default 1000
        Upper bound per weight.
    eps : float, optional
        None → (√m − 1)/√m per solved problem.
    solver : {"auto", "lbfgsb", "cvxpy"}, default "auto"
    cvxpy_solver : str, optional
        None → CLARABEL.
    chunk_size : int, optional
        None → one exact problem; int → ensemble KMM over random chunks of at most that many source rows,
        each matched to the full target.
    n_jobs : int, default 1
        Processes for the chunks (joblib); 1 = in-process.
    standardize : bool, default True
        Pooled standardization before the kernel.
    tol : float, default 1e-13
        L-BFGS-B's ftol for ``solver="lbfgsb"``.
    kappa_dtype : {"float64", "float32"}, default "float64"
        Precision of the kernel blocks summed into κ (:func:`kmm_kappa`).
    polish : bool, default True
        Ensemble only: re-solve the full problem on the support of the combined β (:func:`kmm_polish`),
        the last step of the fan-out recipe, which the flow runs too.
    random_state : int, default 0
        Seed of the chunk split.

    Attributes
    ----------
    beta_ : ndarray
        β as solved (= ``raw_weights_``).
    gamma_ : float
    chunks_ : list of ndarray
    solutions_ : list of KMMSolution
        One per chunk, β not duplicated; empty when ``fit`` was given ``chunk_betas``.

    Notes
    -----
    ``fit(X_source, X_target, chunk_betas=[...])`` takes the chunks' β solved elsewhere (one per chunk of
    ``chunk_indices(m, chunk_size, random_state)``, e.g. by parallel :func:`kmm_chunk` jobs) and only
    combines, polishes and diagnoses them. KMM is transductive: ``predict_weights`` raises
    :class:`WeightsUnavailableError`.
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
        self.chunks_ = self._chunks(m)
        solutions, betas = self._solve_chunks(Zs, Zt, gamma, chunk_betas)
        self.beta_ = combine_chunks(m, self.chunks_, betas)
        if self.polish and len(self.chunks_) > 1:
            self.beta_ = kmm_polish(
                Zs, Zt, self.beta_, gamma=gamma, B=self.B, eps=self.eps, kappa_dtype=self.kappa_dtype
            )
        self.solutions_ = [replace(s, beta=np.empty(0)) for s in solutions]
        return self.beta_

    def _chunks(self, m: int) -> list[np.ndarray]:
        """One chunk of all rows (exact KMM) or ``chunk_indices(m, chunk_size, random_state)``."""
        if self.chunk_size is not None and int(self.chunk_size) < 2:
            raise ValueError(f"chunk_size must be at least 2; got {self.chunk_size}")
        if self.chunk_size is not None and self.chunk_size < m:
            return chunk_indices(m, int(self.chunk_size), self.random_state)
        if m > MAX_DENSE_ROWS:
            raise ValueError(
                f"KMM without chunking may need the m×m kernel (m = {m}: {m * m * 8 / 1e9:.1f} GB); "
                "set chunk_size (e.g. 2000) for ensemble KMM"
            )
        return [np.arange(m)]

    def _solve_chunks(
        self, Zs: np.ndarray, Zt: np.ndarray, gamma: float, chunk_betas: Sequence[np.ndarray] | None
    ) -> tuple[list[KMMSolution], list[np.ndarray]]:
        """Solve each chunk (in-process or with joblib), or take the β solved elsewhere."""
        if chunk_betas is not None:  # the chunks were solved elsewhere (the flow's kmm-chunk tasks)
            if len(chunk_betas) != len(self.chunks_):
                raise ValueError(f"chunk_betas has {len(chunk_betas)} solutions but chunk_size={self.chunk_size} "
                                 f"and random_state={self.random_state} split the source into {len(self.chunks_)} "
                                 "chunks; solve each chunk of chunk_indices(m, chunk_size, random_state)")
            return [], list(chunk_betas)
        kw = dict(
            gamma=gamma, B=self.B, eps=self.eps, solver=self.solver, cvxpy_solver=self.cvxpy_solver, tol=self.tol,
            kappa_dtype=self.kappa_dtype,
        )
        if self.n_jobs == 1 or len(self.chunks_) == 1:
            solutions = [chunk_solution(Zs[idx], Zt, **kw) for idx in self.chunks_]
        else:
            from joblib import Parallel, delayed

            solutions = Parallel(n_jobs=self.n_jobs)(delayed(chunk_solution)(Zs[idx], Zt, **kw) for idx in self.chunks_)
        return solutions, [s.beta for s in solutions]

    def _predict_raw(self, X: np.ndarray) -> np.ndarray:
        raise WeightsUnavailableError(
            "KMM weights only the source rows it was fitted on (KMM eq. 12 solves for β on those "
            "points); use weights_, or DiscriminativeWeights / KDEWeights for new points"
        )
