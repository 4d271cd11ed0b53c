"""Ensemble KMM: split the source into chunks, solve each against the whole target, combine, polish.

The recipe (for the flow's fan-out; :class:`shiftlib.weights.KMM` with ``chunk_size`` runs the same steps
in-process)::

    kern = shared_kernel(Xs, Xt); Zs, Zt = kern.transform(Xs), kern.transform(Xt)
    chunks = chunk_indices(len(Zs), 2000, random_state=0)
    betas = [kmm_chunk(Zs[c], Zt, gamma=kern.gamma) for c in chunks]   # independent jobs
    beta = combine_chunks(len(Zs), chunks, betas)
    beta = kmm_polish(Zs, Zt, beta, gamma=kern.gamma)                    # correction, one job

:func:`kmm_polish` re-solves eq. 12 of the *full* problem with β fixed at 0 outside the support of the
combined β, so the ensemble's objective approaches exact KMM's without m² kernel work (measured in
``benchmarks/kmm.py`` part 2; reports/kmm_notes.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.metrics.pairwise import rbf_kernel
from threadpoolctl import threadpool_limits

from ._kmm_qp import (
    MAX_DENSE_ROWS,
    KappaDtype,
    KMMSolution,
    Solver,
    _check_params,
    _rbf_fetch,
    _repair,
    _Singular,
    _solve_active_set,
    _sum_bounds,
    default_eps,
    kmm_kappa,
    solve_qp,
)

__all__ = ["chunk_indices", "chunk_solution", "combine_chunks", "kmm_chunk", "kmm_polish"]


def chunk_solution(
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
    """KMM eq. 12 for one source chunk against the whole target (inputs in the kernel's space).

    Returns
    -------
    KMMSolution
        β satisfies the chunk's constraints exactly; :func:`kmm_chunk` returns only β.
    """
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

    return solve_qp(
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
    """Ensemble-KMM piece: KMM eq. 12 for one source chunk against the whole target.

    Parameters
    ----------
    X_chunk, X_target : array-like of shape (m_c, d) and (m', d)
        Already in the kernel's space (e.g. standardized by :func:`shiftlib.kernels.shared_kernel`).
    gamma : float
        Width of the Gaussian kernel.
    B, eps, solver, cvxpy_solver, tol
        As for :func:`shiftlib.weights.kmm.solve_kmm`; ``eps=None`` means (√m_c − 1)/√m_c.
    kappa_dtype : {"float64", "float32"}
        As in :func:`kmm_kappa`.

    Returns
    -------
    ndarray of shape (m_c,)
        β, satisfying the chunk's constraints exactly. A pure function of its inputs (no randomness).
    """
    return chunk_solution(
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

    Parameters
    ----------
    X_source, X_target : array-like of shape (m, d) and (m', d)
        In the kernel's space, as for :func:`kmm_chunk`.
    beta : array-like of shape (m,)
        A combined ensemble β (:func:`combine_chunks`); U = its non-zero rows.
    gamma, B, eps, kappa_dtype
        As for :func:`kmm_chunk`; ``eps=None`` means (√m − 1)/√m for the full m.

    Returns
    -------
    ndarray of shape (m,)
        The corrected β.

    Notes
    -----
    Solves eq. 12 of the full problem (κ_i = (m/m') Σ_j k(x_i, x'_j), Σβ in [m(1−ε), m(1+ε)]) with β_i = 0
    outside U, by the working-set solver on the |U| rows: κ for U only and kernel columns among U. The
    combined β is feasible for that problem (each chunk's ε is below the full one), so the result is kept
    only when its objective is not above the combined β's — the correction never makes the full objective
    worse. Rows outside U stay at 0 (checking them would cost m·|U| kernel entries).
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

        # keep it only if the repair left every row outside U at 0 and it is no worse. (Compare the rows,
        # not new[U].sum() == new.sum(): two summation orders can differ in the last bit.)
        outside = np.ones(m, dtype=bool)
        outside[U] = False
        if np.any(new[outside] != 0.0) or objective(new[U]) > objective(beta[U]):
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
