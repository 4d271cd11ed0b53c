"""Sample-selection-bias weights (shiftlib.weights.ssb, DL Prop. 2): the selection model recovered from the
unselected rows, the population mode's algebra against DiscriminativeWeights, given probabilities = oracle."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from shiftlib.weights import DiscriminativeWeights, OracleWeights, SSBWeights, WeightsUnavailableError
from tests.shiftlib.weights.conftest import _shift_1d


def _selection(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pool N(0,1); P(s=1|x) = expit(−0.5 + 1.5x) (DL eq. 1). Returns selected, unselected, p, mask."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 1))
    p = expit(-0.5 + 1.5 * x[:, 0])
    s = rng.uniform(size=n) < p
    return x[s], x[~s], p[s], s


@pytest.mark.heavy
def test_ssb_on_unselected_rows_recovers_the_selection_model() -> None:
    # target = the rows not selected: the classifier learns P(s=1|x) itself (logistic, correctly
    # specified), so the weights approach the oracle 1/P(s=1|x) (DL Prop. 2)
    sel, unsel, p, _ = _selection(4000, seed=9)
    est = SSBWeights(target_rows="unselected").fit(sel, unsel)
    oracle = OracleWeights().fit(sel, unsel, selection_proba=p)
    assert np.max(np.abs(est.selection_proba_ - p)) < 0.05
    assert np.corrcoef(est.weights_, oracle.weights_)[0, 1] > 0.98
    # diagnostics compare against the pool (selected ∪ unselected), which the weights target
    assert est.mmd2_after_ < 0.2 * est.mmd2_before_


@pytest.mark.heavy
def test_ssb_population_mode_is_the_shrunk_discriminative_ratio() -> None:
    # algebra (module docstring): 1/q = 1 + (m'/m)·d with d the raw eq.-7 weight, so the normalized SSB
    # weights are λ + (1 − λ)·w_disc with λ = 1/(1 + (m'/m)·mean(d)) ≈ m/(m + m')
    Xs, Xt = _shift_1d(800, 400, 0.8, seed=10)
    ssb = SSBWeights().fit(Xs, Xt)
    disc = DiscriminativeWeights().fit(Xs, Xt)
    lam = 1 / (1 + (400 / 800) * disc.norm_)
    np.testing.assert_allclose(ssb.weights_, lam + (1 - lam) * disc.weights_, rtol=1e-10)
    assert lam == pytest.approx(800 / 1200, abs=0.05)


def test_ssb_given_probabilities_equal_oracle_and_cannot_predict() -> None:
    sel, unsel, p, _ = _selection(500, seed=11)
    ssb = SSBWeights().fit(sel, unsel, selection_proba=p)
    np.testing.assert_allclose(ssb.weights_, OracleWeights().fit(sel, unsel, selection_proba=p).weights_)
    with pytest.raises(WeightsUnavailableError, match="given selection probabilities"):
        ssb.predict_weights(sel)
