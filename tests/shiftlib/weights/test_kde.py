"""KDE density-ratio weights (shiftlib.weights.kde, Shimodaira 2000): against the analytic ratio of a 1-d
Gaussian shift and against scipy's gaussian_kde written out on the pooled-standardized rows."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import gaussian_kde

from shiftlib.weights import KDEWeights, normalize_weights
from tests.shiftlib.weights.conftest import _analytic_ratio, _shift_1d


@pytest.mark.heavy
def test_kde_ratio_tracks_the_analytic_ratio() -> None:
    Xs, Xt = _shift_1d(2000, 2000, 1.0, seed=12)
    est = KDEWeights().fit(Xs, Xt)
    truth = normalize_weights(_analytic_ratio(Xs[:, 0], 1.0))
    assert np.corrcoef(est.weights_, truth)[0, 1] > 0.9
    # inside the bulk of both densities (|x − 1/2| < 1) the KDE ratio is within 15% of the truth
    bulk = np.abs(Xs[:, 0] - 0.5) < 1.0
    assert np.median(np.abs(est.weights_[bulk] / truth[bulk] - 1)) < 0.15
    # predict_weights evaluates the same two KDEs: identical on the source rows
    np.testing.assert_allclose(est.predict_weights(Xs), est.weights_, rtol=1e-12)


def test_kde_refuses_high_dimension() -> None:
    X = np.random.default_rng(13).normal(size=(100, 6))
    with pytest.raises(ValueError, match="6 features exceed max_dim=5"):
        KDEWeights().fit(X, X)
    w = KDEWeights(max_dim=6).fit(X, X + 0.1).weights_
    assert w.shape == (100,) and w.mean() == pytest.approx(1.0, abs=1e-12) and np.all(w > 0)  # mean-1 convention


@pytest.mark.parametrize("bw_method", ["silverman", "scott", 0.5])
def test_weights_are_the_ratio_of_two_scipy_kdes_on_the_pooled_standardized_rows(bw_method: str | float) -> None:
    # w(x) = p̂_t(x)/p̂_s(x), each a gaussian_kde of its own set in the space standardized by the pooled mean and
    # (population) std — written out here with scipy; normalized to mean 1 over the source rows. New points get
    # the same ratio divided by the source rows' mean ratio. Source and target swapped would invert the ratio.
    rng = np.random.default_rng(21)
    Xs, Xt = rng.normal(size=(60, 2)) * [1.0, 4.0], rng.normal(loc=[0.7, 2.0], size=(50, 2)) * [1.0, 4.0]
    est = KDEWeights(bw_method=bw_method).fit(Xs, Xt)
    P = np.vstack([Xs, Xt])
    mu, sd = P.mean(0), P.std(0)

    def ratio(X: np.ndarray) -> np.ndarray:
        Z = ((X - mu) / sd).T
        kt = gaussian_kde(((Xt - mu) / sd).T, bw_method=bw_method)
        ks = gaussian_kde(((Xs - mu) / sd).T, bw_method=bw_method)
        return kt(Z) / ks(Z)

    r = ratio(Xs)
    np.testing.assert_allclose(est.weights_, r / r.mean(), rtol=1e-9)
    X_new = np.array([[0.0, 0.0], [1.0, 3.0], [-1.0, -2.0]])
    np.testing.assert_allclose(est.predict_weights(X_new), ratio(X_new) / r.mean(), rtol=1e-9)
    # the target lies to the right in x₀: its density ratio grows with x₀ (spot check of the direction)
    assert est.predict_weights(np.array([[1.5, 2.0]]))[0] > est.predict_weights(np.array([[-1.5, 2.0]]))[0]
