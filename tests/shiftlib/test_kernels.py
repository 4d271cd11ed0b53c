"""shiftlib.kernels — the one kernel, median heuristic and MMD² of drift and weights.

Numbers checked against direct numpy computations (full kernel matrices from pairwise differences) and
against each other: drift's MMD² and a weighter's ``mmd2_before_`` are one statistic of one pair of tables.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from shiftlib.drift import detect_drift, mmd_permutation_test
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
