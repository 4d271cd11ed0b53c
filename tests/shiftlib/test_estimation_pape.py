"""PAPE (Białek, Kivimäki, Kuberski & Perrakis, NeurIPS 2025, arXiv 2401.08348) in ``shiftlib.estimation``.

Every number checked comes from a hand-worked case, an independent computation (scikit-learn's
``HistGradientBoostingRegressor``, the LightGBM-style booster PAPE's calibrator is), or a property the method
must have (uniform weights → the unweighted calibration; calibrated scores and no shift → the accuracy; a
covariate shift built by selection on x → closer than plain CBPE).
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor
from threadpoolctl import threadpool_limits

from shiftlib.estimation import (
    AUTO_INTERVAL,
    AUTO_METHOD,
    MEDIAN_COMPONENTS,
    METHODS,
    SHIFT_MODELS,
    WEIGHTED_METHODS,
    StoredPredictions,
    _method_fn,
    _pape_capped,
    boosted_calibration,
    estimate_from_predictions,
    estimate_methods,
    paired_draws,
    pape_posteriors,
    pape_weights,
    point_estimate,
)


def _hgb(x, y, xq, w=None):
    """The independent computation: scikit-learn's LightGBM-style booster with LightGBM's defaults."""
    m = HistGradientBoostingRegressor(early_stopping=False, random_state=0)
    with threadpool_limits(1):  # its OpenMP threads only wait on each other on a busy machine
        m.fit(np.asarray(x, float)[:, None], np.asarray(y, float), sample_weight=w)
        return np.clip(m.predict(np.asarray(xq, float)[:, None]), 0.0, 1.0)


def _binary(p1_source, y_source, p1_target, weights):
    p_s = np.c_[1 - p1_source, p1_source]
    p_t = np.c_[1 - p1_target, p1_target]
    return StoredPredictions("m", np.array([0, 1]), np.asarray(y_source, int), p_s, p_t,
                             np.arange(len(y_source)) % 5, None if weights is None else np.asarray(weights, float))


# ---------------------------------------------------------------------------------------------------- weights
def test_pape_weights_hand_worked():
    # n_s/n_t = 2; h = P(target | x): 0 → floor 0.001; 0.5 → 2·1 = 2; 0.9 → 2·9 = 18;
    # 0.96 → denominator floored at 0.05: 2·0.96/0.05 = 38.4; 1 → 2·1/0.05 = 40 (the cap 20·n_s/n_t)
    w = pape_weights(np.array([0.0, 0.5, 0.9, 0.96, 1.0]), 100, 50)
    np.testing.assert_allclose(w, [0.001, 2.0, 18.0, 38.4, 40.0], rtol=1e-12)


def test_stored_weights_are_capped_through_the_implied_domain_probability():
    # n_s = n_t: odds = w, h = w/(1+w). w = 1 → h = 0.5, kept; w = 19 → h = 0.95, 1 − h = 0.05 exactly, kept;
    # w = 99 → h = 0.99, capped to 0.99/0.05 = 19.8; w = 0 → the floor 0.001
    np.testing.assert_allclose(_pape_capped(np.array([1.0, 19.0, 99.0, 0.0]), 10, 10),
                               [1.0, 19.0, 19.8, 0.001], rtol=1e-12)
    # n_s = 2·n_t: odds = w/2; w = 4 → h = 2/3, kept (4); w = 100 → h = 50/51, capped to 2·(50/51)/0.05
    np.testing.assert_allclose(_pape_capped(np.array([4.0, 100.0]), 20, 10), [4.0, 2 * (50 / 51) / 0.05],
                               rtol=1e-12)


def test_pape_weights_refuses_bad_input():
    with pytest.raises(ValueError, match="probability"):
        pape_weights(np.array([0.5, 1.5]), 2, 2)
    with pytest.raises(ValueError, match="rows"):
        pape_weights(np.array([0.5]), 1, 0)


# ---------------------------------------------------------------------------------------------------- calibrator
def test_boosted_calibration_two_bins_hand_worked():
    # 20 rows at score 0.2 (5 positives), 20 at 0.8 (15 positives). Each child of the root split has exactly
    # min_leaf = 20 rows, so every tree is that split; with squared loss each round moves a bin's value
    # 10 % of the way to its bin mean: F_100 = μ_b + (μ − μ_b)·0.9^100, μ the overall (weighted) mean.
    x = np.r_[np.full(20, 0.2), np.full(20, 0.8)]
    y = np.r_[np.ones(5), np.zeros(15), np.ones(15), np.zeros(5)]
    d = 0.9 ** 100
    got = boosted_calibration(x, y, np.array([0.1, 0.2, 0.49, 0.51, 0.8, 0.95]))
    lo, hi = 0.25 + (0.5 - 0.25) * d, 0.75 + (0.5 - 0.75) * d
    np.testing.assert_allclose(got, [lo, lo, lo, hi, hi, hi], rtol=1e-12)
    # weights: the 5 positives at 0.2 count 3 → bin mean 15/30 = 0.5, overall mean (15 + 15)/(30 + 20) = 0.6
    w = np.r_[np.full(5, 3.0), np.ones(35)]
    got_w = boosted_calibration(x, y, np.array([0.2, 0.8]), w)
    np.testing.assert_allclose(got_w, [0.5 + (0.6 - 0.5) * d, 0.75 + (0.6 - 0.75) * d], rtol=1e-12)


@pytest.mark.heavy
def test_boosted_calibration_equals_sklearn_hist_gradient_boosting():
    rng = np.random.default_rng(0)
    # ≤ 255 distinct scores (one bin each), weighted, as PAPE fits it
    x = rng.integers(0, 120, 400) / 120
    y = (rng.random(400) < x ** 2).astype(float)
    w = rng.exponential(size=400)
    xq = rng.random(300)
    np.testing.assert_allclose(boosted_calibration(x, y, xq, w), _hgb(x, y, xq, w), atol=1e-6)
    # more rows than 31 leaves of ≥ 20 rows can hold, so the best-first order decides which splits are made
    # (continuous weights: no two gains tie, and a tie is the one thing the two may break differently)
    x2 = rng.integers(0, 200, 700) / 200
    y2 = (rng.random(700) < 0.2 + 0.6 * x2).astype(float)
    w2 = rng.exponential(size=700)
    np.testing.assert_allclose(boosted_calibration(x2, y2, xq, w2), _hgb(x2, y2, xq, w2), atol=1e-6)
    # > 255 distinct scores: quantile bins (unweighted, as scikit-learn bins unweighted rows)
    x3 = rng.random(300)
    y3 = (rng.random(300) < x3).astype(float)
    np.testing.assert_allclose(boosted_calibration(x3, y3, xq), _hgb(x3, y3, xq), atol=1e-6)


# ---------------------------------------------------------------------------------------------------- the estimate
@pytest.mark.heavy
def test_uniform_weights_give_the_unweighted_calibrated_estimate():
    # constant weights (n_s = n_t, so the implied h is 0.5 and no cap binds) change nothing: PAPE is then the
    # unweighted class-score calibration, and its estimate the paper's expected accuracy
    # mean_t[c(p)·1[ŷ = 1] + (1 − c(p))·1[ŷ = 0]], computed here with scikit-learn's booster
    rng = np.random.default_rng(1)
    p_s, p_t = rng.random(300), rng.random(300)
    y_s = (rng.random(300) < p_s ** 1.5).astype(int)
    P = _binary(p_s, y_s, p_t, np.ones(300))
    c = _hgb(p_s, y_s, p_t)
    expected = np.mean(np.where(p_t > 0.5, c, 1 - c))
    assert point_estimate(P, "pape") == pytest.approx(expected, abs=1e-6)


@pytest.mark.heavy
def test_calibrated_scores_and_no_shift_recover_the_accuracy():
    # y ~ Bernoulli(p) on both sides: the expected accuracy of ŷ = 1[p > 1/2] is mean(max(p, 1 − p)) (≈ 0.75)
    rng = np.random.default_rng(2)
    p_s, p_t = rng.random(3000), rng.random(1000)
    y_s = (rng.random(3000) < p_s).astype(int)
    est = point_estimate(_binary(p_s, y_s, p_t, np.ones(3000)), "pape")
    assert est == pytest.approx(np.mean(np.maximum(p_t, 1 - p_t)), abs=0.015)


def _selection_shift(seed: int, n: int = 4000):
    """A pure covariate shift built by selection on x: population x = (x1, x2) ~ N(0, I), P(y=1|x) = σ(2 x1 + 3 x2);
    the model scores σ(2 x1) (it never saw x2); source rows are kept with P(s=1|x) = exp(−x2²/4), so the source
    has less of x2's noise and the model looks more accurate there; the target is the population. The true
    density ratio p_t/p_s ∝ 1/P(s=1|x) is given as the stored weights (mean 1): PAPE's weights from a perfect
    domain classifier."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    q = 1 / (1 + np.exp(-(2 * X[:, 0] + 3 * X[:, 1])))
    y = (rng.random(n) < q).astype(int)
    keep_p = np.exp(-X[:, 1] ** 2 / 4)
    src = rng.random(n) < keep_p
    tgt = rng.random(n) < 0.5
    score = 1 / (1 + np.exp(-2 * X[:, 0]))
    w = 1 / keep_p[src]
    P = _binary(score[src], y[src], score[tgt], w / w.mean())
    pred = score[tgt] > 0.5
    truth = float(np.mean(np.where(pred, q[tgt], 1 - q[tgt])))  # expected accuracy on the batch's rows
    return P, truth


@pytest.mark.heavy
def test_pape_beats_plain_cbpe_under_covariate_shift_by_selection():
    err = {"pape": [], "cbpe": []}
    for seed in range(4):
        P, truth = _selection_shift(seed)
        for m in err:
            err[m].append(abs(point_estimate(P, m) - truth))
    # cbpe (source calibration) is ≈ 0.02 too high on these draws, PAPE ≈ 0.005 off
    assert np.mean(err["pape"]) < 0.5 * np.mean(err["cbpe"])
    assert np.mean(err["pape"]) < 0.01


@pytest.mark.heavy
def test_multiclass_is_one_vs_rest_renormalised():
    rng = np.random.default_rng(3)
    n, k = 300, 3
    logits = rng.normal(size=(n, k)) * 2
    p_s = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y_s = np.array([rng.choice(k, p=row) for row in p_s])
    p_s = np.round(p_s, 2)  # ≤ 101 distinct scores per class: one bin each, as scikit-learn bins them
    p_t = rng.dirichlet(np.ones(k), size=200)
    w = rng.exponential(size=n)
    got = pape_posteriors(p_s, y_s, p_t, w)
    cal = np.column_stack([_hgb(p_s[:, c], y_s == c, p_t[:, c], w) for c in range(k)])
    np.testing.assert_allclose(got, cal / cal.sum(axis=1, keepdims=True), atol=1e-5)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-12)


# ---------------------------------------------------------------------------------------------------- machinery
def test_bootstrap_resample_is_the_method_on_the_resampled_rows():
    P, _ = _selection_shift(4, n=500)
    rng = np.random.default_rng(0)
    r = rng.integers(0, len(P.y_source), len(P.y_source))
    sub = StoredPredictions("m", P.classes, P.y_source[r], P.proba_source[r], P.proba_target, P.folds[r],
                            P.weights[r])
    assert _method_fn("pape", P)(r) == pytest.approx(point_estimate(sub, "pape"), abs=1e-12)


@pytest.mark.heavy
def test_pape_through_estimate_and_paired_draws():
    P, _ = _selection_shift(5, n=500)
    one = estimate_from_predictions(P, "pape", n_boot=4, random_state=0)
    assert one.method == "pape" and one.accuracy == pytest.approx(point_estimate(P, "pape"), abs=1e-12)
    assert one.ci_low < one.accuracy < one.ci_high
    both = estimate_methods(P, ["pape", "cbpe"], n_boot=4, random_state=0)
    assert both["pape"].accuracy == one.accuracy and both["pape"].details["se_source"] == one.details["se_source"]
    a, b, da, db = paired_draws(P, P, "pape", shared_source=True, n_boot=3, random_state=0)
    assert a == b == pytest.approx(one.accuracy, abs=1e-12)
    np.testing.assert_array_equal(da, db)


def test_pape_needs_weights():
    P = _binary(np.array([0.2, 0.8] * 20), np.array([0, 1] * 20), np.array([0.3, 0.7]), None)
    with pytest.raises(ValueError, match="importance weights"):
        point_estimate(P, "pape")


def test_pape_is_a_method_but_not_in_the_preregistered_default():
    assert "pape" in METHODS and "pape" in WEIGHTED_METHODS
    # the default is chosen only by the rule of reports/estimation.md (revision 3): PAPE does not enter it
    assert (AUTO_METHOD, AUTO_INTERVAL) == ("median", "model")
    assert "pape" not in MEDIAN_COMPONENTS and "pape" not in SHIFT_MODELS
