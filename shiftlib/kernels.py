"""The one Gaussian kernel, median heuristic and MMD² that drift tests and importance weights share.

One kernel means one number: ``drift.mmd2`` (:func:`shiftlib.drift.detect_drift`) and every weighter's
``mmd2_before_`` (:class:`shiftlib.weights.BaseWeighter`) are the same statistic of the same pair of
tables, computed by the same code:

* **Standardization** — a ``StandardScaler`` fitted on the pooled source and target rows
  (:func:`shared_kernel`; pooled, so it is invariant to the permutations of a two-sample test).
* **Width** — the median heuristic ``gamma = 1 / median ‖z_i − z_j‖²`` of
  ``k(z, z') = exp(−gamma·‖z − z'‖²)`` over the pairs of (a subsample, seed 0, of at most 2,000 rows of)
  the pooled standardized rows, zero distances left out (:func:`median_heuristic_gamma`). Written as a
  bandwidth σ with ``k = exp(−‖z − z'‖²/σ²)``, σ is the median pairwise distance.
* **Estimator** — the biased (V-statistic) MMD² of Gretton et al. (2012, eq. 5),
  ``‖(1/m) Σ w_i φ(x_i) − (1/m') Σ φ(x'_j)‖²`` with weights of mean 1 (uniform for an unweighted source):
  the quantity KMM eq. 12 minimizes up to constants, and a valid statistic for an exact permutation
  test (:func:`mmd2_splits`). The unbiased U-statistic (Gretton et al. 2012, eq. 3) is
  :func:`mmd2_unbiased`, a full-kernel reference for small inputs.
* **Size** — each side is replaced by a seeded uniform subsample of at most 5,000 rows when larger
  (:func:`subsample_rows`): the statistic costs O((m + m')²) kernel evaluations.

Kernel products are computed in blocks (:func:`kernel_matmul`): K is never formed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.spatial.distance import cdist, pdist
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from shiftlib._validation import check_pair, check_row_weights

__all__ = [
    "DIAG_MAX_ROWS",
    "SharedKernel",
    "kernel_matmul",
    "kernel_row_sums",
    "median_heuristic_gamma",
    "mmd2",
    "mmd2_many",
    "mmd2_splits",
    "mmd2_unbiased",
    "shared_kernel",
    "subsample_rows",
]

#: rows of the pooled data used for the median heuristic (pairs: 2,000·1,999/2 ≈ 2 M distances)
MEDIAN_MAX_ROWS = 2000
#: fixed seed of that subsample, so every caller gets the same kernel for the same data
MEDIAN_SEED = 0
#: kernel blocks hold at most this many bytes (one reused buffer)
_BLOCK_BYTES = 2 << 20
#: MMD² uses at most this many rows of each set (a seeded subsample beyond)
DIAG_MAX_ROWS = 5000
#: seed of that subsample for the source; the target uses DIAG_SEED + 1
DIAG_SEED = 0


# --------------------------------------------------------------------------------------------------
# the kernel
# --------------------------------------------------------------------------------------------------


def median_heuristic_gamma(Z: Any, *, max_rows: int = MEDIAN_MAX_ROWS, seed: int = MEDIAN_SEED) -> float:
    """Median heuristic for ``exp(−gamma·‖z − z'‖²)``: ``gamma = 1 / median ‖z_i − z_j‖²`` over row pairs.

    Parameters
    ----------
    Z : array-like of shape (n, d)
        Rows (already standardized when the kernel is used on standardized data).
    max_rows : int, default 2000
        All rows are used when there are at most ``max_rows``, else a sorted subsample drawn with ``seed``.
    seed : int, default 0
        Seed of that subsample.

    Returns
    -------
    float
        ``gamma``. Distances of 0 (duplicate rows) are left out of the median.
    """
    Z = np.asarray(Z, dtype=float)
    if Z.shape[0] < 2:
        raise ValueError("the median heuristic needs at least 2 rows")
    if Z.shape[0] > max_rows:
        idx = np.random.default_rng(seed).choice(Z.shape[0], size=max_rows, replace=False)
        Z = Z[np.sort(idx)]
    d2 = pdist(Z, metric="sqeuclidean")
    d2 = d2[d2 > 0]
    if d2.size == 0:
        raise ValueError(
            "all rows are identical (every pairwise distance is 0), so the median heuristic cannot set the "
            "Gaussian kernel's width and there is no shift to measure; check the input"
        )
    return float(1.0 / np.median(d2))


@dataclass(frozen=True)
class SharedKernel:
    """The shared Gaussian kernel: pooled standardization plus ``gamma`` of ``exp(−gamma·‖z − z'‖²)``.

    Parameters
    ----------
    scaler : StandardScaler or None
        Fitted on the pooled rows; None when the kernel works on the raw features.
    gamma : float
        Inverse squared width.
    """

    scaler: StandardScaler | None
    gamma: float

    @property
    def bandwidth(self) -> float:
        """σ of ``exp(−‖z − z'‖²/σ²)``: the median pairwise distance when gamma is the median heuristic.

        Returns
        -------
        float
            ``1 / sqrt(gamma)``.
        """
        return float(1.0 / np.sqrt(self.gamma))

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Map raw features to the (standardized) space the kernel is defined on.

        Parameters
        ----------
        X : ndarray of shape (n, d)
            Raw feature rows.

        Returns
        -------
        ndarray of shape (n, d)
            ``X`` standardized by ``scaler``, or ``X`` as float when ``scaler`` is None.
        """
        return np.asarray(X, dtype=float) if self.scaler is None else self.scaler.transform(X)


def shared_kernel(
    X_source: np.ndarray, X_target: np.ndarray, *, standardize: bool = True, gamma: float | None = None
) -> SharedKernel:
    """The one kernel of drift and weights: pooled ``StandardScaler`` + median heuristic (module docstring).

    Parameters
    ----------
    X_source, X_target : ndarray of shape (m, d) and (m', d)
        Complete numeric rows.
    standardize : bool, default True
        Fit the scaler on the pooled rows; False keeps the raw features.
    gamma : float, optional
        A given width; None means :func:`median_heuristic_gamma` on the pooled (standardized) rows.

    Returns
    -------
    SharedKernel
    """
    Xs, Xt = np.asarray(X_source, dtype=float), np.asarray(X_target, dtype=float)
    scaler = StandardScaler().fit(np.vstack([Xs, Xt])) if standardize else None
    if gamma is None:
        kern = SharedKernel(scaler, 1.0)
        gamma = median_heuristic_gamma(np.vstack([kern.transform(Xs), kern.transform(Xt)]))
    if not (np.isfinite(gamma) and gamma > 0):
        raise ValueError(f"gamma must be a positive number; got {gamma}")
    return SharedKernel(scaler, float(gamma))


# --------------------------------------------------------------------------------------------------
# blocked kernel products
# --------------------------------------------------------------------------------------------------


def kernel_matmul(
    Z: np.ndarray,
    Z_other: np.ndarray,
    gamma: float,
    V: np.ndarray | None = None,
    *,
    dtype: type[np.floating] = np.float64,
    max_entries: int | None = None,
) -> np.ndarray:
    """``K(Z, Z_other) @ V`` for the Gaussian kernel ``exp(−gamma·‖z − z'‖²)`` without forming K.

    Parameters
    ----------
    Z, Z_other : ndarray of shape (n, d) and (n', d)
    gamma : float
    V : ndarray of shape (n',) or (n', k), optional
        None means row sums ``Σ_j k(z_i, z'_j)`` (summed in float64 whatever ``dtype``).
    dtype : numpy float type, default float64
        Precision of the kernel blocks; float32 halves the memory traffic (measurements in
        ``benchmarks/kmm.py``).
    max_entries : int, optional
        At most this many kernel entries exist at once; None means a buffer of about 2 MB.

    Returns
    -------
    ndarray of shape (n,) when ``V`` is None, else (n, k)

    Notes
    -----
    K is built in row blocks as ``exp(2γ·z·z'ᵀ − γ‖z‖² − γ‖z'‖²)`` (one GEMM, exponent clipped at 0)
    inside one reused buffer; both sets are first shifted by the mean of ``Z_other`` (distances are
    translation invariant), which keeps the norms and so the cancellation small. Hand-written because
    scikit-learn's ``rbf_kernel`` allocates the full block it returns.
    """
    Z = np.asarray(Z, dtype=float)
    Z_other = np.asarray(Z_other, dtype=float)
    n, n_other = Z.shape[0], Z_other.shape[0]
    out = np.empty(n) if V is None else np.empty((n, np.asarray(V).reshape(n_other, -1).shape[1]))
    if n == 0 or n_other == 0:
        out[...] = 0.0
        return out
    mu = Z_other.mean(axis=0)
    A, Bo = Z - mu, Z_other - mu
    a = (-gamma * np.einsum("ij,ij->i", A, A)).astype(dtype)
    b = (-gamma * np.einsum("ij,ij->i", Bo, Bo)).astype(dtype)
    A = np.ascontiguousarray(A, dtype=dtype)
    Bt = np.ascontiguousarray((2.0 * gamma * Bo).T, dtype=dtype)
    Vd = None if V is None else np.ascontiguousarray(np.asarray(V, dtype=float).reshape(n_other, -1), dtype=dtype)
    entries = _BLOCK_BYTES // np.dtype(dtype).itemsize if max_entries is None else int(max_entries)
    rows = max(1, min(n, entries // n_other))
    buf = np.empty((rows, n_other), dtype=dtype)
    for s in range(0, n, rows):
        e = min(s + rows, n)
        G = buf[: e - s]
        np.matmul(A[s:e], Bt, out=G)
        G += b
        G += a[s:e, None]
        np.minimum(G, 0.0, out=G)
        np.exp(G, out=G)
        if Vd is None:
            out[s:e] = G.sum(axis=1, dtype=np.float64)
        else:
            out[s:e] = G @ Vd
    return out


def kernel_row_sums(
    Z: np.ndarray, Z_other: np.ndarray, gamma: float, *, dtype: type[np.floating] = np.float64
) -> np.ndarray:
    """``Σ_j k(z_i, z'_j)`` for every row of Z, blocked (see :func:`kernel_matmul`).

    Parameters
    ----------
    Z : ndarray of shape (n, d)
        Rows whose sums are returned.
    Z_other : ndarray of shape (n', d)
        Rows summed over.
    gamma : float
        Of ``exp(−gamma·‖z − z'‖²)``.
    dtype : numpy float type, default float64
        Precision of the kernel blocks; the sums are taken in float64.

    Returns
    -------
    ndarray of shape (n,)
        The kernel row sums.
    """
    return kernel_matmul(Z, Z_other, gamma, None, dtype=dtype)


# --------------------------------------------------------------------------------------------------
# MMD²
# --------------------------------------------------------------------------------------------------


def subsample_rows(n: int, max_rows: int | None, seed: int = DIAG_SEED) -> np.ndarray:
    """Rows used for MMD²: all ``n`` when ``n ≤ max_rows`` (or ``max_rows`` is None), else a sorted
    uniform subsample of ``max_rows`` rows drawn with ``seed``.

    Parameters
    ----------
    n : int
        Number of rows.
    max_rows : int or None
        Most rows kept; None keeps all.
    seed : int, default DIAG_SEED
        Seed of the subsample.

    Returns
    -------
    ndarray of int
        Sorted row positions.
    """
    if max_rows is None or n <= max_rows:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=max_rows, replace=False))


def mmd2_many(Z_source: np.ndarray, Z_target: np.ndarray, gamma: float, W: np.ndarray) -> np.ndarray:
    """Biased MMD² between the ``W[:, k]``-weighted source and the target, for every column k of W.

    ``MMD² = wᵀK_ss w / m² − 2 wᵀK_st 1 / (m m') + 1ᵀK_tt 1 / m'²`` with weights of mean 1 (KMM §3, the
    expansion above eq. 12; Gretton et al. 2012 eq. 5 for uniform w). Blocked, float64, clipped at 0.

    Parameters
    ----------
    Z_source, Z_target : ndarray of shape (m, d) and (m', d)
        Rows in the kernel's space.
    gamma : float
    W : ndarray of shape (m,) or (m, k)
        Source weights of mean 1, one column per weighting.

    Returns
    -------
    ndarray of shape (k,)
    """
    m, mt = Z_source.shape[0], Z_target.shape[0]
    W = np.asarray(W, dtype=float).reshape(m, -1)
    # one BLAS thread: on shared cores this was 2× faster than the default (benchmarks/kmm.py)
    with threadpool_limits(limits=1, user_api="blas"):
        quad = np.einsum("ik,ik->k", W, kernel_matmul(Z_source, Z_source, gamma, W))
        cross = kernel_row_sums(Z_source, Z_target, gamma) @ W
        tt = kernel_row_sums(Z_target, Z_target, gamma).sum()
    return np.maximum(quad / m**2 - 2.0 * cross / (m * mt) + tt / mt**2, 0.0)


def mmd2_splits(
    Z: np.ndarray, masks: np.ndarray, gamma: float, *, max_entries: int | None = None, batch_size: int = 256
) -> np.ndarray:
    """Biased MMD² (as :func:`mmd2_many`) of every source/target split of the pooled rows in ``masks``.

    Parameters
    ----------
    Z : ndarray of shape (N, d)
        Pooled rows in the kernel's space.
    masks : bool ndarray of shape (n_splits, N)
        True marks a source row; every mask marks the same number n ≥ 2 of rows, leaving m ≥ 2.
    gamma : float
    max_entries : int, optional
        Kernel entries alive at once (:func:`kernel_matmul`).
    batch_size : int, default 256
        Masks handled per pass over the kernel.

    Returns
    -------
    ndarray of shape (n_splits,)

    Notes
    -----
    With u the 0/1 source indicator, ``A = uᵀKu``, ``c = uᵀK1`` and ``T = 1ᵀK1``:
    ``Σ_{S×S} k = A``, ``Σ_{T×T} k = T − 2c + A``, ``Σ_{S×T} k = c − A``, so
    ``MMD² = A/n² + (T − 2c + A)/m² − 2(c − A)/(nm)``; one blocked product ``K·U`` per batch.
    """
    Z = np.asarray(Z, dtype=float)
    masks = np.asarray(masks, dtype=bool)
    N = Z.shape[0]
    if masks.ndim != 2 or masks.shape[1] != N:
        raise ValueError(f"masks must have shape (n_splits, {N}); got {masks.shape}")
    n = masks.sum(axis=1)
    if np.any(n != n[0]) or n[0] < 2 or N - n[0] < 2:
        raise ValueError("every mask must mark the same number (≥ 2) of source rows, leaving ≥ 2 target rows")
    n, m = int(n[0]), N - int(n[0])
    out = np.empty(masks.shape[0])
    with threadpool_limits(limits=1, user_api="blas"):
        rowsum = kernel_row_sums(Z, Z, gamma)
        T = rowsum.sum()
        for b0 in range(0, masks.shape[0], batch_size):
            U = masks[b0:b0 + batch_size].T.astype(float)  # (N, batch)
            A = np.einsum("ip,ip->p", U, kernel_matmul(Z, Z, gamma, U, max_entries=max_entries))
            c = U.T @ rowsum
            out[b0:b0 + U.shape[1]] = A / n**2 + (T - 2.0 * c + A) / m**2 - 2.0 * (c - A) / (n * m)
    return np.maximum(out, 0.0)


def mmd2_unbiased(X: np.ndarray, Y: np.ndarray, gamma: float) -> float:
    """Unbiased MMD² (Gretton et al. 2012, eq. 3) from full kernel matrices — a reference for small inputs.

    Parameters
    ----------
    X, Y : ndarray of shape (n, d) and (m, d), n, m ≥ 2
    gamma : float
        Of ``exp(−gamma·‖x − y‖²)``.

    Returns
    -------
    float
        May be negative (it is unbiased, not a squared norm).
    """
    X, Y = np.asarray(X, dtype=float), np.asarray(Y, dtype=float)
    n, m = X.shape[0], Y.shape[0]
    if n < 2 or m < 2:
        raise ValueError(f"the unbiased MMD² needs at least 2 rows per side; got {n} and {m}")
    kxx, kyy, kxy = (np.exp(-gamma * cdist(a, b, "sqeuclidean")) for a, b in ((X, X), (Y, Y), (X, Y)))
    return float(
        (kxx.sum() - np.trace(kxx)) / (n * (n - 1)) + (kyy.sum() - np.trace(kyy)) / (m * (m - 1)) - 2.0 * kxy.mean()
    )


def mmd2(
    X_source: Any,
    X_target: Any,
    weights: Any = None,
    *,
    kernel: SharedKernel | None = None,
    max_rows: int | None = DIAG_MAX_ROWS,
) -> float:
    """Biased MMD² of the (weighted) source vs the target under the shared kernel (module docstring).

    Parameters
    ----------
    X_source, X_target : array-like or DataFrame
        Numeric, complete, same columns (:func:`shiftlib._validation.check_pair`).
    weights : array-like of shape (m,), optional
        One non-negative weight per source row, rescaled to mean 1; None means uniform.
    kernel : SharedKernel, optional
        None means :func:`shared_kernel` of this pair.
    max_rows : int or None, default 5000
        Each set larger than this is replaced by a seeded uniform subsample (source weights restricted
        to it and rescaled to mean 1); None means no limit.

    Returns
    -------
    float
    """
    pair = check_pair(X_source, X_target)
    kern = kernel if kernel is not None else shared_kernel(pair.X_source, pair.X_target)
    m = pair.X_source.shape[0]
    w = np.ones(m) if weights is None else check_row_weights(weights, m, "weights", "source rows")
    rs = subsample_rows(m, max_rows)
    rt = subsample_rows(pair.X_target.shape[0], max_rows, DIAG_SEED + 1)
    Zs, Zt = kern.transform(pair.X_source[rs]), kern.transform(pair.X_target[rt])
    ws = w[rs]
    if ws.sum() <= 0:
        raise ValueError("the subsampled source rows all have weight 0; pass max_rows=None")
    return float(mmd2_many(Zs, Zt, kern.gamma, ws * (ws.size / ws.sum()))[0])
