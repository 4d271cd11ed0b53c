"""Benchmark: blocked MMD² permutation test (shiftlib.drift) vs a naive full-kernel implementation.

Problem: n = m = 5,000 rows, d = 20, 200 permutations (plus the observed split), Gaussian kernel with the
shared median-heuristic width (``shiftlib.kernels``). Both implementations get the same pooled matrix, the
same gamma and the same permutation masks, so their statistics (the biased MMD², Gretton et al. 2012 eq. 5)
must agree to rounding; the script checks that.

* blocked  — ``shiftlib.kernels.mmd2_splits``: all 201 splits as a 0/1 matrix U, ``K·U`` by the blocked
  kernel product (``kernel_matmul``) with at most block_size² = 1,048,576 kernel entries (8 MiB) alive.
* naive    — the full N × N kernel (N = 10,000: 10⁸ entries, 800 MB), then per permutation the three
  sub-matrices K_SS, K_TT, K_ST are indexed out and averaged.

Wall time (time.perf_counter) and peak traced memory (tracemalloc, which sees numpy's buffers) are
measured in this run, one BLAS thread for both (shared machine). If the naive run is projected to exceed
3 minutes (its kernel build timed alone plus 3 timed splits, projection ×2 for load) it is run at n = m = 2,500 instead, with the
blocked method re-measured at that size for a like-for-like ratio; the printout says so.

Run: ``nice .venv/bin/python benchmarks/drift.py``
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.metrics import pairwise
from threadpoolctl import threadpool_limits

from shiftlib.drift import permutation_masks
from shiftlib.kernels import median_heuristic_gamma, mmd2_splits

N_SIDE, D, N_PERM, BLOCK = 5_000, 20, 200, 1024
NAIVE_BUDGET_S = 180.0
SAFETY = 2.0  # a first run projected 170 s from the probe and took 304 s under load from other jobs


def naive_statistics(Z: np.ndarray, masks: np.ndarray, gamma: float, *, limit: int | None = None) -> np.ndarray:
    """Full kernel matrix, then per split: biased MMD² (Gretton et al. 2012 eq. 5) by sub-matrix means."""
    K = pairwise.rbf_kernel(Z, Z, gamma=gamma)
    rows = masks if limit is None else masks[:limit]
    out = np.empty(rows.shape[0])
    for b, mk in enumerate(rows):
        s, t = np.flatnonzero(mk), np.flatnonzero(~mk)
        kss, ktt, kst = K[np.ix_(s, s)], K[np.ix_(t, t)], K[np.ix_(s, t)]
        out[b] = kss.mean() + ktt.mean() - 2.0 * kst.mean()
    return out


def measure(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """(result, wall seconds, peak traced MiB)."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    t0 = time.perf_counter()
    res = fn()
    wall = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return res, wall, peak


def problem(n_side: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, float]:
    rng = np.random.default_rng(seed)
    Xs = rng.normal(size=(n_side, D))
    Xt = rng.normal(size=(n_side, D)) + np.r_[0.05, np.zeros(D - 1)]  # a small shift in one feature
    Z = np.vstack([Xs, Xt])
    Z = (Z - Z.mean(0)) / Z.std(0)
    h = median_heuristic_gamma(Z)
    masks = permutation_masks(n_side, n_side, N_PERM, random_state=seed + 1)
    return Z, masks, h


def blocked(Z: np.ndarray, masks: np.ndarray, gamma: float) -> np.ndarray:
    """The shared blocked statistics with at most BLOCK² kernel entries alive."""
    return mmd2_splits(Z, masks, gamma, max_entries=BLOCK * BLOCK)


def p_value(st: np.ndarray) -> float:
    return (1.0 + np.sum(st[1:] >= st[0])) / (st.size)


def main() -> None:
    with threadpool_limits(1):
        print(f"MMD² permutation test: n = m = {N_SIDE:,}, d = {D}, {N_PERM} permutations (+ observed), "
              f"block {BLOCK}×{BLOCK}, 1 BLAS thread")
        Z, masks, h = problem(N_SIDE)
        print(f"median-heuristic gamma = {h:.4g}")

        st_b, t_b, m_b = measure(lambda: blocked(Z, masks, h))
        print(f"blocked : {t_b:8.2f} s   peak traced memory {m_b:8.1f} MiB   "
              f"MMD² = {st_b[0]:.6g}, p = {p_value(st_b):.4f}")

        _, t_kernel, _ = measure(lambda: naive_statistics(Z, masks, h, limit=0))
        probe, t_probe, _ = measure(lambda: naive_statistics(Z, masks, h, limit=3))
        projected = t_kernel + (t_probe - t_kernel) / 3 * (N_PERM + 1)
        print(f"naive probe: kernel build {t_kernel:.2f} s, kernel + 3 splits {t_probe:.2f} s "
              f"→ projected full run {projected:.0f} s (×{SAFETY:g} safety on a shared machine: "
              f"{SAFETY * projected:.0f} s vs budget {NAIVE_BUDGET_S:.0f} s)")
        assert np.allclose(probe, st_b[:3], rtol=0, atol=1e-10)

        if SAFETY * projected <= NAIVE_BUDGET_S:
            st_n, t_n, m_n = measure(lambda: naive_statistics(Z, masks, h))
            print(f"naive   : {t_n:8.2f} s   peak traced memory {m_n:8.1f} MiB   "
                  f"MMD² = {st_n[0]:.6g}, p = {p_value(st_n):.4f}")
            print(f"max |blocked − naive| over all {N_PERM + 1} statistics: {np.max(np.abs(st_b - st_n)):.2e}")
            print(f"RATIO naive/blocked at n = m = {N_SIDE:,}: time {t_n / t_b:.1f}x, memory {m_n / m_b:.1f}x")
        else:
            small = N_SIDE // 2
            print(f"naive projected (×{SAFETY:g}) > {NAIVE_BUDGET_S:.0f} s: naive run at n = m = {small:,} instead "
                  f"(blocked re-measured at that size)")
            Zs, masks_s, hs = problem(small)
            st_bs, t_bs, m_bs = measure(lambda: blocked(Zs, masks_s, hs))
            st_ns, t_ns, m_ns = measure(lambda: naive_statistics(Zs, masks_s, hs))
            print(f"blocked : {t_bs:8.2f} s   peak traced memory {m_bs:8.1f} MiB   (n = m = {small:,})")
            print(f"naive   : {t_ns:8.2f} s   peak traced memory {m_ns:8.1f} MiB   (n = m = {small:,})")
            print(f"max |blocked − naive| over all {N_PERM + 1} statistics: {np.max(np.abs(st_bs - st_ns)):.2e}")
            print(f"RATIO naive/blocked at n = m = {small:,}: time {t_ns / t_bs:.1f}x, memory {m_ns / m_bs:.1f}x")


if __name__ == "__main__":
    main()
