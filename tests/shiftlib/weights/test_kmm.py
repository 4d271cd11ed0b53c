"""KMM (shiftlib.weights.kmm): the estimator KMM.fit and solve_kmm's own checks; the QP solver's routes are
tested in test__kmm_qp.py, the ensemble in test__kmm_ensemble.py."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel

from shiftlib.weights import KMM, WeightsUnavailableError, default_eps, kmm_objective, solve_kmm
from tests.shiftlib.weights.conftest import _assert_exact_bounds, _rel


def test_identical_sets_give_unit_weights() -> None:
    # source == target: κ = K·1, so β = 1 zeroes the gradient Kβ − κ — the optimum (KMM eq. 12)
    rng = np.random.default_rng(4)
    X = rng.normal(size=(150, 4))
    est = KMM().fit(X, X)
    K = rbf_kernel(est.kernel_.transform(X), gamma=est.gamma_)
    kappa = K.sum(axis=1)
    # the tie-break's ridged problem (f + ½λ‖β − 1‖²) has the same minimizer β = 1 here
    assert _rel(kmm_objective(K, kappa, est.beta_), kmm_objective(K, kappa, np.ones(150))) < 1e-9
    np.testing.assert_allclose(est.weights_, 1.0, atol=1e-2)
    assert est.mmd2_before_ == pytest.approx(0.0, abs=1e-12)


@pytest.mark.heavy
def test_kmm_reduces_mmd_and_is_transductive() -> None:
    rng = np.random.default_rng(6)
    Xs, Xt = rng.normal(size=(300, 3)), rng.normal(loc=0.6, size=(250, 3))
    est = KMM().fit(Xs, Xt)
    assert est.mmd2_after_ < 0.1 * est.mmd2_before_
    assert est.weights_.mean() == pytest.approx(1.0, abs=1e-12)
    with pytest.raises(WeightsUnavailableError, match="KMM weights only the source rows"):
        est.predict_weights(Xs)
    assert issubclass(WeightsUnavailableError, NotImplementedError)


@pytest.mark.parametrize(("gamma", "standardize"), [(None, True), (0.7, False)])
def test_fit_solves_eq12_on_its_own_kernel(gamma: float | None, standardize: bool) -> None:
    # KMM.fit's β must be the minimizer of KMM eq. 12 for K_ij = exp(−γ‖z_i − z_j‖²) and κ_i = (m/m') Σ_j k(z_i, z'_j),
    # z the pooled-standardized rows (or the raw ones) and γ the median heuristic (or the given one). Both built
    # here from scratch with numpy / scikit-learn; m = 40 ≠ m' = 25, so a κ without m/m' or with its sign
    # flipped has another optimum. The reference optimum: the cvxpy route (CLARABEL) on that K, κ.
    rng = np.random.default_rng(3)
    Xs, Xt = rng.normal(size=(40, 2)) * [1.0, 3.0], rng.normal(loc=[0.8, 1.0], size=(25, 2)) * [1.0, 3.0]
    est = KMM(gamma=gamma, standardize=standardize).fit(Xs, Xt)
    if standardize:
        P = np.vstack([Xs, Xt])
        Zs, Zt = (Xs - P.mean(0)) / P.std(0), (Xt - P.mean(0)) / P.std(0)
        Z = np.vstack([Zs, Zt])
        d2 = ((Z[:, None] - Z[None]) ** 2).sum(-1)[np.triu_indices(len(Z), 1)]
        g = 1 / np.median(d2)
    else:
        Zs, Zt, g = Xs, Xt, 0.7
    assert est.gamma_ == pytest.approx(g, rel=1e-12)
    K = rbf_kernel(Zs, gamma=g)
    kappa = rbf_kernel(Zs, Zt, gamma=g).sum(axis=1) * 40 / 25
    ref = solve_kmm(K, kappa, solver="cvxpy")
    assert default_eps(40) == pytest.approx((np.sqrt(40) - 1) / np.sqrt(40), rel=1e-15)  # KMM §4.2's default
    _assert_exact_bounds(est.beta_, 1000.0, default_eps(40))
    # within the tie-break's allowance (up to 1e-6 of the objective, see test__kmm_qp.py) plus the reference's own
    assert _rel(kmm_objective(K, kappa, est.beta_), ref.objective) < 1e-5
    np.testing.assert_allclose(est.weights_, est.beta_ / est.beta_.mean(), rtol=1e-12)
    np.testing.assert_array_equal(est.raw_weights_, est.beta_)


def test_solve_kmm_refuses_a_kernel_that_does_not_fit_kappa() -> None:
    with pytest.raises(ValueError, match="K has shape \\(3, 3\\) but kappa has 2 entries; K must be 2×2"):
        solve_kmm(np.eye(3), np.ones(2))
    K = np.eye(2)
    K[0, 1] = np.nan
    with pytest.raises(ValueError, match="missing or infinite"):
        solve_kmm(K, np.ones(2))
    with pytest.raises(TypeError, match="only chunk_betas"):
        KMM().fit(np.arange(8.0).reshape(4, 2), np.arange(6.0).reshape(3, 2), sample_weight=np.ones(4))
