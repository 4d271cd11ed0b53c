"""Discriminative weights (shiftlib.weights.discriminative, DL eq. 7): against the analytic density ratio of a
1-d Gaussian shift, the m/m' prior by hand, out-of-fold probabilities against scikit-learn's cross_val_predict."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.neighbors import KNeighborsClassifier

from shiftlib.weights import DiscriminativeWeights
from tests.shiftlib.weights.conftest import _analytic_ratio, _shift_1d


@pytest.mark.heavy
def test_discriminative_matches_the_analytic_density_ratio() -> None:
    # source N(0,1), target N(1,1): logistic regression on x is the correct model (log-odds
    # log p_s/p_t = 1/2 − x, linear), so DL eq. 7 — with its m/m' prior, before normalization —
    # should reproduce the ratio exp(x − 1/2) itself, not just up to a constant
    Xs, Xt = _shift_1d(2000, 2000, 1.0, seed=2)
    est = DiscriminativeWeights(random_state=0).fit(Xs, Xt)
    truth = _analytic_ratio(Xs[:, 0], 1.0)
    assert np.corrcoef(est.raw_weights_, truth)[0, 1] > 0.99
    ratio = est.raw_weights_ / truth
    assert np.median(ratio) == pytest.approx(1.0, abs=0.06)
    assert np.quantile(ratio, 0.1) > 0.85 and np.quantile(ratio, 0.9) < 1.15
    # E_source[p_t/p_s] = 1, so the raw eq.-7 weights (with the m/m' prior) average ≈ 1
    assert est.raw_weights_.mean() == pytest.approx(1.0, abs=0.05)


@pytest.mark.heavy
def test_discriminative_direction_weights_target_dense_regions_up() -> None:
    # target to the right of the source: p_t/p_s grows with x, so w(2) ≫ w(−2) (exp(2·1) vs exp(−2·1)
    # analytically: a factor e⁴ ≈ 55). The reciprocal (a known peer bug) would invert this.
    Xs, Xt = _shift_1d(1000, 1000, 1.0, seed=3)
    est = DiscriminativeWeights().fit(Xs, Xt)
    w_right, w_left = est.predict_weights(np.array([[2.0], [-2.0]]))
    assert w_right / w_left == pytest.approx(np.exp(4.0), rel=0.25)
    # and the weights increase with x across the source rows (rank correlation)
    assert spearmanr(est.weights_, Xs[:, 0]).statistic > 0.99


@pytest.mark.heavy
def test_discriminative_prior_ratio_uses_row_counts() -> None:
    # m = 600 source rows, m' = 1800 target rows: eq. 7 with p(σ=1)/p(σ=0) = 600/1800, by hand from the
    # stored out-of-fold probabilities; and E_source[w] ≈ 1 only with the prior the right way round
    Xs, Xt = _shift_1d(600, 1800, 0.7, seed=4)
    est = DiscriminativeWeights().fit(Xs, Xt)
    q = est.proba_source_
    np.testing.assert_allclose(est.raw_weights_, (600 / 1800) * (1 / q - 1), rtol=1e-12)
    assert est.raw_weights_.mean() == pytest.approx(1.0, abs=0.08)


def test_discriminative_probabilities_are_out_of_fold() -> None:
    # a 1-NN classifier scores every training row perfectly in-sample (all weights would be 0);
    # out of fold it must equal an independent cross_val_predict with the same folds
    Xs, Xt = _shift_1d(200, 200, 0.5, seed=5)
    knn = KNeighborsClassifier(n_neighbors=15)
    est = DiscriminativeWeights(knn, cv=4, clip=0.01, random_state=11).fit(Xs, Xt)
    X = np.vstack([Xs, Xt])
    sigma = np.r_[np.ones(200), np.zeros(200)].astype(int)
    folds = StratifiedKFold(n_splits=4, shuffle=True, random_state=11)
    expected = cross_val_predict(knn, X, sigma, cv=folds, method="predict_proba")[:200, 1]
    np.testing.assert_allclose(est.proba_source_, expected, rtol=0, atol=0)
    in_sample = KNeighborsClassifier(n_neighbors=1).fit(X, sigma).predict_proba(Xs)[:, 1]
    assert np.all(in_sample == 1.0)  # why in-sample scoring would be useless
    # clip = 0.01 bounds the raw weights by (m/m')(1/0.01 − 1) = 99
    assert est.raw_weights_.max() <= 99.0 + 1e-12


@pytest.mark.heavy
def test_discriminative_predict_weights_uses_the_refit_classifier() -> None:
    Xs, Xt = _shift_1d(500, 400, 0.8, seed=6)
    est = DiscriminativeWeights().fit(Xs, Xt)
    q = est.classifier_.predict_proba(Xs)[:, 1]
    np.testing.assert_allclose(est.predict_weights(Xs), (500 / 400) * (1 / q - 1) / est.norm_, rtol=1e-12)
    # refit vs out-of-fold: the same estimate up to fold noise
    assert np.corrcoef(est.predict_weights(Xs), est.weights_)[0, 1] > 0.99


@pytest.mark.heavy
def test_fits_are_reproducible_from_the_seed() -> None:
    Xs, Xt = _shift_1d(300, 300, 0.5, seed=14)
    w1 = DiscriminativeWeights(random_state=1).fit(Xs, Xt).weights_
    w2 = DiscriminativeWeights(random_state=1).fit(Xs, Xt).weights_
    w3 = DiscriminativeWeights(random_state=2).fit(Xs, Xt).weights_
    np.testing.assert_array_equal(w1, w2)
    assert not np.array_equal(w1, w3)


class _Fixed(ClassifierMixin, BaseEstimator):
    """A 'classifier' whose p(source | x) is the row's first feature (what a linear classifier extrapolating an
    outlying value to certainty gives: exactly 0 in floating point)."""

    def fit(self, X: np.ndarray, y: np.ndarray) -> _Fixed:
        self.classes_ = np.array([0, 1])
        return self

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        return np.column_stack([1.0 - X[:, 0], X[:, 0]])

    def predict(self, X: np.ndarray) -> np.ndarray:
        return (X[:, 0] > 0.5).astype(int)


def test_auto_clip_bounds_an_infinite_weight_only_where_there_is_one() -> None:
    """``clip="auto"`` (the default): eq. 7 as it is while every p(source|x) > 0; a p of exactly 0 (an infinite
    weight, which ``clip=None`` refuses) clips p to [AUTO_CLIP, 1 − AUTO_CLIP] with a warning. Hand-worked with
    m = m' = 10: p = 0.5 gives 1/0.5 − 1 = 1; p = 0.2 gives 4; p = 0 clipped to 0.001 gives 999."""
    from shiftlib.weights.discriminative import AUTO_CLIP

    Xt = np.full((10, 1), 0.5)
    fine = np.r_[np.full(9, 0.5), 0.2][:, None]
    est = DiscriminativeWeights(_Fixed(), cv=2).fit(fine, Xt)
    assert est.clip_ is None
    np.testing.assert_allclose(est.raw_weights_, np.r_[np.ones(9), 4.0], rtol=1e-12)
    outlying = np.r_[np.full(9, 0.5), 0.0][:, None]
    with pytest.warns(UserWarning, match="p\\(source\\|x\\) = 0 for 1 rows"):
        est = DiscriminativeWeights(_Fixed(), cv=2).fit(outlying, Xt)
    assert AUTO_CLIP == 1e-3 and est.clip_ == AUTO_CLIP
    np.testing.assert_allclose(est.raw_weights_, np.r_[np.ones(9), 999.0], rtol=1e-9)
    with pytest.raises(ValueError, match="infinite weight"):
        DiscriminativeWeights(_Fixed(), cv=2, clip=None).fit(outlying, Xt)
    with pytest.raises(ValueError, match="clip must be None, 'auto' or in"):
        DiscriminativeWeights(_Fixed(), cv=2, clip="always").fit(fine, Xt)
