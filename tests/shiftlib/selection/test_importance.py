"""Importance weights for selection (shiftlib.selection.importance.importance_weights): β on the source rows with
mean 1 from an array, a registry name, a scikit-learn weighter or any object with fit and weights_; the given
estimator itself never fitted."""

from __future__ import annotations

import numpy as np
import pytest

from shiftlib.selection import importance_weights
from shiftlib.weights import KDEWeights


class _FirstFeatureRatio:
    """A duck-typed weighter (no get_params): weights_ = 1 + 1[x₀ > 0]."""

    def fit(self, X_source, X_target):
        self.weights_ = 1.0 + (np.asarray(X_source)[:, 0] > 0)
        return self


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(4)
    return rng.normal(size=(40, 2)), rng.normal(loc=0.5, size=(30, 2))


def test_an_array_is_rescaled_to_mean_one_and_none_is_uniform() -> None:
    # [1, 2, 3, 6]: mean 3 → [1/3, 2/3, 1, 2]
    np.testing.assert_allclose(importance_weights([1.0, 2.0, 3.0, 6.0], np.zeros((4, 1)), None),
                               [1 / 3, 2 / 3, 1.0, 2.0], rtol=1e-15)
    np.testing.assert_array_equal(importance_weights(None, np.zeros((3, 2)), None), np.ones(3))
    with pytest.raises(ValueError, match=r"importance weights has shape \(2,\) but there are 3 source rows"):
        importance_weights([1.0, 2.0], np.zeros((3, 1)), None)
    with pytest.raises(ValueError, match="finite and non-negative"):
        importance_weights([1.0, -1.0, 2.0], np.zeros((3, 1)), None)


def test_an_estimator_is_copied_fitted_on_source_and_target_and_normalised() -> None:
    Xs, Xt = _data()
    raw = 1.0 + (Xs[:, 0] > 0)
    given = _FirstFeatureRatio()
    np.testing.assert_allclose(importance_weights(given, Xs, Xt), raw / raw.mean(), rtol=1e-15)
    assert not hasattr(given, "weights_")  # a copy was fitted
    kde = KDEWeights(bw_method="scott")
    expected = KDEWeights(bw_method="scott").fit(Xs, Xt).weights_
    np.testing.assert_allclose(importance_weights(kde, Xs, Xt), expected, rtol=1e-12)
    assert not hasattr(kde, "weights_")  # cloned, the user's estimator left unfitted
    # a registry name is make_weighter(name) with its defaults
    np.testing.assert_allclose(importance_weights("kde", Xs, Xt), KDEWeights().fit(Xs, Xt).weights_, rtol=1e-12)

    class _NoWeights:
        def fit(self, X_source, X_target):
            return self

    with pytest.raises(TypeError, match=r"_NoWeights.fit\(X_source, X_target\) must set weights_"):
        importance_weights(_NoWeights(), Xs, Xt)
