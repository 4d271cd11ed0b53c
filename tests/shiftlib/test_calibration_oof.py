"""shiftlib.calibration.oof_undersampling / undersampling_metrics (the flow's recalibration numbers)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from shiftlib.calibration import oof_undersampling, undersampling_metrics
from shiftlib.metrics import brier, g_mean


@pytest.fixture(scope="module")
def oof():
    X, y = load_breast_cancer(return_X_y=True)
    y = 1 - y  # malignant = 1 is the minority (212 of 569, scikit-learn docs)
    # scaled: lbfgs on the raw features needed thousands of iterations (10 s alone, 100 s on a loaded box)
    return oof_undersampling(make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)), X, y,
                             beta="balanced", n_splits=5, random_state=0)


@pytest.mark.heavy
def test_every_row_is_predicted_once_and_decisions_are_kept(oof):
    assert oof[["p_s", "p_prime", "p_full", "tau_prime"]].notna().all().all()
    # US eq. 12: p′ > τ′ exactly where p_s > τ_s = 0.5, fold by fold
    np.testing.assert_array_equal(oof["p_prime"] > oof["tau_prime"], oof["p_s"] > 0.5)
    # US eq. 9 with β < 1 lowers every probability strictly inside (0, 1)
    inner = (oof["p_s"] > 1e-9) & (oof["p_s"] < 1 - 1e-9)
    assert (oof.loc[inner, "p_prime"] < oof.loc[inner, "p_s"]).all()


@pytest.mark.heavy
def test_metrics_match_the_metric_functions(oof):
    m = undersampling_metrics(oof["y"], oof["p_s"], oof["p_prime"], oof["p_full"], 0.5, oof["tau_prime"])
    assert m["brier_raw"] == brier(oof["y"], oof["p_s"])  # independent call of US eq. 13
    assert m["brier_corrected"] == brier(oof["y"], oof["p_prime"])
    # same decisions (eq. 12) → the same G-mean, computed from p_s at 0.5
    assert m["gmean_tau_prime"] == pytest.approx(g_mean(oof["y"], oof["p_s"], 0.5), abs=1e-15)
    assert m["gmean_tau_prime"] == pytest.approx(m["gmean_tau_s"], abs=1e-15)
