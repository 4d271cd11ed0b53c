"""shiftlib.kernels — the one kernel, median heuristic and MMD² of drift and weights.

Numbers checked against direct numpy computations (full kernel matrices from pairwise differences) and
against each other: drift's MMD² and a weighter's ``mmd2_before_`` are one statistic of one pair of tables.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import cdist

from shiftlib.drift import detect_drift, mmd_permutation_test, permutation_masks
from shiftlib.kernels import (
    kernel_matmul,
    kernel_row_sums,
    median_heuristic_gamma,
    mmd2,
    mmd2_many,
    mmd2_splits,
    mmd2_unbiased,
    shared_kernel,
    subsample_rows,
)
from shiftlib.weights import KMM, DiscriminativeWeights

# moved here with tests from test_drift.py, which ran them with one BLAS thread (a module autouse fixture)
pytestmark = pytest.mark.usefixtures("one_blas_thread")


def _k(a: np.ndarray, b: np.ndarray, gamma: float) -> np.ndarray:
    """Direct Gaussian kernel matrix exp(−gamma·‖a_i − b_j‖²) from pairwise differences."""
    return np.exp(-gamma * ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))


def test_median_heuristic_by_hand_and_ignores_duplicates() -> None:
    # rows 0, 0, 1, 3: squared distances 0 (dropped), 1, 9, 1, 9, 4 → median of (1, 1, 4, 9, 9) = 4
    assert median_heuristic_gamma(np.array([[0.0], [0.0], [1.0], [3.0]])) == pytest.approx(0.25, rel=1e-15)
    with pytest.raises(ValueError, match="all rows are identical"):
        median_heuristic_gamma(np.ones((5, 2)))


def test_shared_kernel_is_pooled_standardization_plus_median_heuristic() -> None:
    rng = np.random.default_rng(0)
    Xs, Xt = rng.normal(size=(30, 3)) * [1, 5, 10], rng.normal(loc=1, size=(20, 3))
    kern = shared_kernel(Xs, Xt)
    P = np.vstack([Xs, Xt])
    Z = (P - P.mean(0)) / P.std(0)
    np.testing.assert_allclose(np.vstack([kern.transform(Xs), kern.transform(Xt)]), Z, rtol=1e-12)
    d2 = ((Z[:, None] - Z[None]) ** 2).sum(-1)[np.triu_indices(50, 1)]
    assert kern.gamma == pytest.approx(1 / np.median(d2), rel=1e-12)
    assert kern.bandwidth == pytest.approx(np.sqrt(np.median(d2)), rel=1e-12)


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_blocked_kernel_product_equals_the_full_matrix(dtype: type, rtol: float) -> None:
    # blocks of 7 entries (fewer than one row of 13): every row its own block
    rng = np.random.default_rng(1)
    A, B, V = rng.normal(size=(11, 4)), rng.normal(loc=0.3, size=(13, 4)), rng.normal(size=(13, 3))
    K = _k(A, B, 0.37)
    np.testing.assert_allclose(kernel_matmul(A, B, 0.37, V, dtype=dtype, max_entries=7), K @ V, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(kernel_row_sums(A, B, 0.37, dtype=dtype), K.sum(1), rtol=rtol)


def test_biased_and_unbiased_mmd2_against_direct_sums() -> None:
    rng = np.random.default_rng(2)
    X, Y = rng.normal(size=(9, 2)), rng.normal(loc=0.5, size=(6, 2))
    g = 0.8
    kxx, kyy, kxy = _k(X, X, g), _k(Y, Y, g), _k(X, Y, g)
    biased = kxx.mean() + kyy.mean() - 2 * kxy.mean()  # Gretton et al. 2012 eq. 5
    unbiased = (kxx.sum() - 9) / 72 + (kyy.sum() - 6) / 30 - 2 * kxy.mean()  # eq. 3, k(x, x) = 1
    w = rng.uniform(0.1, 3, size=9)
    w /= w.mean()
    weighted = w @ kxx @ w / 81 + kyy.mean() - 2 * w @ kxy.sum(1) / 54  # KMM §3
    np.testing.assert_allclose(mmd2_many(X, Y, g, np.column_stack([np.ones(9), w])), [biased, weighted], rtol=1e-12)
    assert mmd2_unbiased(X, Y, g) == pytest.approx(unbiased, rel=1e-12)
    masks = np.zeros((1, 15), dtype=bool)
    masks[0, :9] = True
    assert mmd2_splits(np.vstack([X, Y]), masks, g)[0] == pytest.approx(biased, rel=1e-12)


def test_subsample_rows_is_seeded_and_capped() -> None:
    np.testing.assert_array_equal(subsample_rows(5, 10), np.arange(5))
    a = subsample_rows(100, 10, seed=3)
    assert a.size == 10 and np.all(np.diff(a) > 0)
    np.testing.assert_array_equal(a, subsample_rows(100, 10, seed=3))


@pytest.mark.heavy
@pytest.mark.parametrize("weighter", [KMM(), DiscriminativeWeights()])
def test_drift_mmd2_equals_weighter_mmd2_before(weighter) -> None:
    # the issue: drift.mmd2 and weights.*.mmd2_before differed by construction; now one statistic
    rng = np.random.default_rng(3)
    cols = ["a", "b", "c"]
    Xs = pd.DataFrame(rng.normal(size=(120, 3)), columns=cols)
    Xt = pd.DataFrame(rng.normal(loc=[0.8, 0, 0], size=(90, 3)), columns=cols)
    report = detect_drift(Xs, Xt, random_state=0, mmd_permutations=20, domain_permutations=20)
    est = weighter.fit(Xs, Xt)
    assert report.mmd2 == pytest.approx(est.mmd2_before_, rel=1e-10, abs=1e-14)
    assert report.mmd2 == pytest.approx(mmd2(Xs, Xt), rel=1e-10, abs=1e-14)
    assert report.mmd_bandwidth == pytest.approx(est.kernel_.bandwidth, rel=1e-15)


def test_drift_and_weights_agree_when_both_subsample() -> None:
    # above max_rows per side both take the same seeded rows and the kernel of all rows
    rng = np.random.default_rng(4)
    Xs, Xt = rng.normal(size=(260, 2)), rng.normal(loc=0.5, size=(230, 2))
    res = mmd_permutation_test(Xs, Xt, n_permutations=5, max_rows=200, random_state=0)
    assert (res.n_source, res.n_target) == (200, 200)
    assert res.mmd2 == pytest.approx(mmd2(Xs, Xt, max_rows=200), rel=1e-10)


def test_median_heuristic_by_hand() -> None:
    # points 0, 1, 3: squared distances 1, 9, 4 → median 4 → gamma = 1/4
    assert median_heuristic_gamma(np.array([[0.0], [1.0], [3.0]])) == pytest.approx(0.25, rel=1e-15)


def test_weighted_mmd_matches_a_direct_computation() -> None:
    # independent computation with scipy's cdist: ‖Σ w_i φ(x_i)/m − Σ φ(x'_j)/m'‖² (KMM §3)
    rng = np.random.default_rng(0)
    Xs, Xt = rng.normal(size=(9, 2)), rng.normal(loc=0.5, size=(6, 2))
    w = rng.uniform(0.1, 3.0, size=9)
    kern = shared_kernel(Xs, Xt)
    Zs, Zt = kern.transform(Xs), kern.transform(Xt)

    def k(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.exp(-kern.gamma * cdist(a, b, "sqeuclidean"))

    wn = w / w.mean()
    direct = wn @ k(Zs, Zs) @ wn / 81 - 2 * wn @ k(Zs, Zt).sum(axis=1) / 54 + k(Zt, Zt).sum() / 36
    assert mmd2(Xs, Xt, w) == pytest.approx(direct, rel=1e-12)
    assert mmd2(Xs, Xs) == pytest.approx(0.0, abs=1e-14)


def test_mmd2_unbiased_by_hand() -> None:
    # X = {0, 1}, Y = {0, 2}, gamma = 1/2 → k = exp(−d²/2); Gretton et al. 2012 eq. 3:
    # k_xx(off) = e^{-1/2}; k_yy(off) = e^{-2}; mean k_xy = (1 + e^{-2} + 2e^{-1/2})/4
    X, Y = np.array([[0.0], [1.0]]), np.array([[0.0], [2.0]])
    e5, e2 = math.exp(-0.5), math.exp(-2.0)
    assert mmd2_unbiased(X, Y, 0.5) == pytest.approx(e5 + e2 - (1 + e2 + 2 * e5) / 2)


def test_median_bandwidth_by_hand() -> None:
    # points 0, 1, 3: pairwise distances 1, 3, 2 → median 2 (the shared heuristic: gamma = 1/2²)
    assert median_heuristic_gamma(np.array([[0.0], [1.0], [3.0]])) ** -0.5 == pytest.approx(2.0, rel=1e-15)


def test_blocked_permutation_statistics_equal_full_kernel() -> None:
    # blocked (16² entries at once, 16 ∤ 57, batch 7) vs. full kernel matrices per split: same biased
    # MMD² (Gretton et al. 2012 eq. 5: mean k_xx + mean k_yy − 2 mean k_xy) to rounding
    rng = np.random.default_rng(1)
    Z = rng.normal(size=(57, 4))
    masks = permutation_masks(25, 32, 20, random_state=2)
    gamma = 1 / (2 * 1.7**2)
    blocked = mmd2_splits(Z, masks, gamma, max_entries=16**2, batch_size=7)

    def k(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.exp(-gamma * ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))

    full = [k(Z[m], Z[m]).mean() + k(Z[~m], Z[~m]).mean() - 2 * k(Z[m], Z[~m]).mean() for m in masks]
    assert np.allclose(blocked, full, rtol=0, atol=1e-12)
    assert masks[0, :25].all() and not masks[0, 25:].any()  # row 0 = the observed split
    assert np.all(masks.sum(axis=1) == 25)
