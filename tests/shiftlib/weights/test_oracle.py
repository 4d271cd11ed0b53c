"""Oracle weights (shiftlib.weights.oracle): 1/P(s=1|x), normalized (DL Prop. 2), by hand."""

from __future__ import annotations

import numpy as np
import pytest

from shiftlib.weights import OracleWeights, WeightsUnavailableError


def test_oracle_weights_by_hand() -> None:
    # p = [0.5, 0.25, 1, 0.2] → 1/p = [2, 4, 1, 5], mean 3 → [2/3, 4/3, 1/3, 5/3]; ESS = 12²/46
    X = np.arange(8.0).reshape(4, 2)
    est = OracleWeights().fit(X, X + 0.5, selection_proba=[0.5, 0.25, 1.0, 0.2])
    np.testing.assert_allclose(est.weights_, [2 / 3, 4 / 3, 1 / 3, 5 / 3], rtol=1e-15)
    assert est.ess_ == pytest.approx(144 / 46, rel=1e-14)
    with pytest.raises(ValueError, match=r"must lie in \(0, 1\]"):
        OracleWeights().fit(X, X, selection_proba=[0.5, 0.0, 1.0, 0.2])
    with pytest.raises(ValueError, match="one probability per source row"):
        OracleWeights().fit(X, X, selection_proba=[0.5, 0.5])
    with pytest.raises(TypeError, match="needs selection_proba"):
        OracleWeights().fit(X, X)
    with pytest.raises(WeightsUnavailableError):
        est.predict_weights(X)
