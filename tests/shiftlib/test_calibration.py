"""Tests for shiftlib.calibration: US eq. 3/9/12/14 properties, US Table I counts, Saerens et al. (2002)
EM, the UndersampledClassifier meta-estimator (scikit-learn checks, pickling), the out-of-fold undersampling
numbers the flow reports, and the reliability figure."""

from __future__ import annotations

import io
import math
import subprocess
import sys
from pathlib import Path

import cloudpickle
import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from matplotlib.figure import Figure
from scipy import stats
from sklearn.base import clone
from sklearn.calibration import calibration_curve
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from shiftlib.calibration import (
    UndersampledClassifier,
    balanced_beta,
    beta_from_sampling_strategy,
    correct_posterior,
    corrected_threshold,
    em_target_prior,
    oof_undersampling,
    prior_shift,
    reliability_figure,
    resolve_pos_label,
    undersample,
    undersampled_posterior,
    undersampling_metrics,
)
from shiftlib.learners import make_learner
from shiftlib.metrics import brier, g_mean

REPO = Path(__file__).resolve().parents[2]

probs = st.floats(0.0, 1.0, allow_nan=False)
betas = st.floats(1e-3, 1.0, allow_nan=False)


# ====================================================================================================
# eq. 3 / 9 / 12 / 14 — hand-worked values
# ====================================================================================================
def test_eq9_by_hand():
    # beta = 0.5, p_s = 0.5: 0.25 / (0.25 − 0.5 + 1) = 1/3
    assert correct_posterior(0.5, 0.5) == pytest.approx(1 / 3)
    # beta = 0.2, p_s = 0.8: 0.16 / (0.16 − 0.8 + 1) = 0.16 / 0.36 = 4/9
    assert correct_posterior(np.array([0.8]), 0.2)[0] == pytest.approx(4 / 9)


def test_eq12_us_worked_example_balanced_threshold_is_prior():
    # US §III-A / §IV-B: 1,000 positives of 10,000, beta = N+/N− = 1/9, tau_s = 0.5 → tau' = pi+ = 0.1
    assert corrected_threshold(0.5, 1000 / 9000) == pytest.approx(0.1, abs=1e-15)


def test_eq3_by_hand():
    # p = 0.1, beta = 1/9: 0.1 / (0.1 + 0.9/9) = 0.5 — balancing makes the prior boundary 0.5
    assert undersampled_posterior(0.1, 1 / 9) == pytest.approx(0.5)


def test_prior_shift_by_hand():
    # p = 0.5 at train prior 0.5, target prior 0.2: (0.4·0.5) / (0.4·0.5 + 1.6·0.5) = 0.2
    assert prior_shift(0.5, 0.5, 0.2) == pytest.approx(0.2)


# ====================================================================================================
# properties (hypothesis)
# ====================================================================================================
@pytest.mark.heavy
@settings(max_examples=100, deadline=None)
@given(probs, betas)
@example(p_s=1.0, beta=0.1)  # unclipped, eq. 9 overshoots 1 by an ulp here (0.1/(0.1 − 1 + 1) = 1.0000000000000002)
def test_p_prime_in_unit_interval(p_s, beta):
    p = correct_posterior(p_s, beta)
    assert 0.0 <= p <= 1.0


@pytest.mark.heavy
@settings(max_examples=100, deadline=None)
@given(probs, probs, betas)
def test_p_prime_monotone_in_p_s(a, b, beta):
    lo, hi = min(a, b), max(a, b)
    # weakly monotone in floating point for every pair (each IEEE operation rounds monotonically) ...
    assert correct_posterior(lo, beta) <= correct_posterior(hi, beta)
    # ... and strictly once the scores differ by more than rounding (eq. 9 is strictly increasing)
    if hi - lo > 1e-9:
        assert correct_posterior(lo, beta) < correct_posterior(hi, beta)


@pytest.mark.heavy
@settings(max_examples=50, deadline=None)
@given(st.lists(probs, min_size=1, max_size=20))
def test_beta_one_is_identity(ps):
    a = np.array(ps)
    np.testing.assert_array_equal(correct_posterior(a, 1.0), a)
    np.testing.assert_array_equal(undersampled_posterior(a, 1.0), a)


@pytest.mark.heavy
@settings(max_examples=100, deadline=None)
@given(probs, betas)
def test_eq9_inverts_eq3(p, beta):
    # US eq. 4/9 is eq. 3 solved for p
    assert correct_posterior(undersampled_posterior(p, beta), beta) == pytest.approx(p, abs=1e-9)
    assert undersampled_posterior(correct_posterior(p, beta), beta) == pytest.approx(p, abs=1e-9)


@pytest.mark.heavy
@settings(max_examples=150, deadline=None)
@given(probs, probs, betas)
def test_threshold_keeps_decisions_floats(p_s, tau_s, beta):
    p1, t1 = correct_posterior(p_s, beta), corrected_threshold(tau_s, beta)
    # exact in floating point: equality and "not above" are preserved
    if p_s == tau_s:
        assert p1 == t1
    if p_s <= tau_s:
        assert not (p1 > t1)
    # "above" is preserved once p_s clears tau_s by more than rounding
    if p_s - tau_s > 1e-9:
        assert p1 > t1


@pytest.mark.heavy
@settings(max_examples=150, deadline=None)
@given(st.integers(0, 1000), st.integers(1, 999), betas)
def test_threshold_keeps_decisions_on_score_grid(k, j, beta):
    # every score on a 1/1000 grid (RF-style vote fractions): (p_s > tau_s) ⇔ (p' > tau'), exactly
    p_s, tau_s = k / 1000, j / 1000
    assert (p_s > tau_s) == (correct_posterior(p_s, beta) > corrected_threshold(tau_s, beta))


@pytest.mark.heavy
@settings(max_examples=100, deadline=None)
@given(st.floats(1e-3, 0.999), betas)
def test_eq11_odds_relation(tau_s, beta):
    # US eq. 11: tau'/(1 − tau') · (1 − tau_s)/tau_s = beta
    t = corrected_threshold(tau_s, beta)
    assume(0 < t < 1)
    assert t / (1 - t) * (1 - tau_s) / tau_s == pytest.approx(beta, rel=1e-9)


@pytest.mark.heavy
@settings(max_examples=100, deadline=None)
@given(st.integers(1, 5000), st.integers(1, 50000), st.floats(0.0, 1.0))
def test_tau_prime_is_pi_plus_when_tau_s_is_pi_s_plus(n_pos, n_neg, frac):
    # US §IV-B: tau_s = pi_s+ = N+/(N+ + beta·N−) gives tau' = pi+ = N+/(N+ + N−)
    assume(n_pos <= n_neg)
    n_keep = n_pos + int(round(frac * (n_neg - n_pos)))  # beta between N+/N− and 1
    beta = n_keep / n_neg
    pi_s = n_pos / (n_pos + n_keep)
    assert corrected_threshold(pi_s, beta) == pytest.approx(n_pos / (n_pos + n_neg), rel=1e-12)


@pytest.mark.heavy
@settings(max_examples=100, deadline=None)
@given(probs, st.integers(1, 5000), st.integers(1, 50000), st.floats(0.0, 1.0))
def test_eq9_is_saerens_eq14_with_undersampling_priors(p_s, n_pos, n_neg, frac):
    # US Appendix: eq. 14 with pi_t = pi+ and pi_s = pi_s+ reduces to eq. 9
    assume(n_pos <= n_neg)
    n_keep = n_pos + int(round(frac * (n_neg - n_pos)))
    beta = n_keep / n_neg
    pi, pi_s = n_pos / (n_pos + n_neg), n_pos / (n_pos + n_keep)
    assume(pi_s < 1)
    # eq. 9's denominator beta·p − p + 1 cancels as p → 1: about eps/beta of relative error (beta 1/20333 and
    # p 1 gave 1 − 1.05e-12, stop 34), so the tolerance grows as beta shrinks; a dropped term is off by O(1)
    tol = 1e-12 + 4 * np.finfo(float).eps / beta
    assert prior_shift(p_s, pi_s, pi) == pytest.approx(correct_posterior(p_s, beta), abs=tol)


@pytest.mark.heavy
@settings(max_examples=100, deadline=None)
@given(probs, st.floats(0.01, 0.99), st.floats(0.01, 0.99))
def test_prior_shift_round_trip(p, a, b):
    assert prior_shift(prior_shift(p, a, b), b, a) == pytest.approx(p, abs=1e-9)


# ====================================================================================================
# undersample — US Table I and imbalanced-learn's convention
# ====================================================================================================
def _table1_data():
    y = np.r_[np.ones(1000, int), np.zeros(9000, int)]
    X = np.arange(10_000, dtype=float).reshape(-1, 1)
    return X, y


@pytest.mark.parametrize(
    "beta,n_s,n_s_neg",
    # US Table I: N_s and N_s− for 1,000 positives among 10,000 observations
    [(0.2, 2800, 1800), (0.3, 3700, 2700), (0.4, 4600, 3600), (0.5, 5500, 4500), (0.6, 6400, 5400),
     (0.7, 7300, 6300), (0.8, 8200, 7200), (0.9, 9100, 8100), (1.0, 10000, 9000), ("balanced", 2000, 1000)],
)
def test_undersample_matches_us_table1(beta, n_s, n_s_neg):
    X, y = _table1_data()
    res = undersample(X, y, beta, random_state=0)
    assert res.indices.size == n_s and res.n_neg_kept == n_s_neg
    assert int((res.y == 0).sum()) == n_s_neg and int(res.y.sum()) == 1000
    # X rows travel with their labels (X here is the row number)
    np.testing.assert_array_equal(res.X.ravel().astype(int), res.indices)
    assert res.train_prior == pytest.approx(0.1)
    # perc− column of Table I
    assert 100 * n_s_neg / n_s == pytest.approx(100 * (1 - res.undersampled_prior))


def test_undersample_seed_reproducible_and_weights_travel():
    X, y = _table1_data()
    w = np.linspace(1, 2, 10_000)
    a = undersample(X, y, 0.3, random_state=7, sample_weight=w)
    b = undersample(X, y, 0.3, random_state=7)
    c = undersample(X, y, 0.3, random_state=8)
    np.testing.assert_array_equal(a.indices, b.indices)
    assert not np.array_equal(a.indices, c.indices)
    np.testing.assert_array_equal(a.sample_weight, w[a.indices])


def test_undersample_dataframe_and_string_labels():
    df = pd.DataFrame({"x": np.arange(40.0), "z": list("ab") * 20})
    y = pd.Series(["no"] * 32 + ["yes"] * 8, name="churn")
    res = undersample(df, y, "balanced", random_state=0)
    assert res.pos_label == "yes"  # string labels: the minority class is positive
    assert isinstance(res.X, pd.DataFrame) and list(res.X.columns) == ["x", "z"]
    assert (res.y == "yes").sum() == 8 and (res.y == "no").sum() == 8
    assert res.beta == pytest.approx(8 / 32)


def test_sampling_strategy_conversion_matches_imblearn_convention():
    # imbalanced-learn: float sampling_strategy alpha = N_minority / N_majority after resampling.
    # 100 positives, 1,000 negatives, alpha = 0.5 → 200 negatives kept → beta = 0.2
    assert beta_from_sampling_strategy(0.5, 100, 1000) == pytest.approx(0.2)
    assert beta_from_sampling_strategy("auto", 100, 1000) == pytest.approx(0.1)
    y = np.r_[np.ones(100, int), np.zeros(1000, int)]
    res = undersample(np.zeros((1100, 1)), y, sampling_strategy=0.5, random_state=0)
    assert res.n_neg_kept == 200 and res.beta == pytest.approx(0.2)
    assert res.n_pos / res.n_neg_kept == pytest.approx(0.5)


def test_resolve_pos_label_conventions():
    assert resolve_pos_label([0, 0, 1]) == 1
    assert bool(resolve_pos_label([True, False, False])) is True
    assert resolve_pos_label(["no", "no", "yes"]) == "yes"
    assert resolve_pos_label(["bad", "good", "good"]) == "bad"  # minority, even though "good" sorts last
    assert resolve_pos_label([0, 1, 1], minority_default=True) == 0
    assert resolve_pos_label(["a", "b"]) == "b"  # tie → scikit-learn's classes_[1]


# ====================================================================================================
# bad input — clear errors
# ====================================================================================================
@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5, float("nan"), "half"])
def test_beta_outside_unit_interval(bad):
    with pytest.raises(ValueError, match=r"beta"):
        correct_posterior(0.5, bad)
    X, y = _table1_data()
    with pytest.raises(ValueError, match=r"beta"):
        undersample(X, y, bad)


def test_beta_below_balanced_rate():
    X, y = _table1_data()
    with pytest.raises(ValueError, match=r"more positives than negatives.*N\+/N− = 0.1111.*'balanced'"):
        undersample(X, y, 0.05)


def test_more_positives_than_negatives():
    y = np.r_[np.ones(60, int), np.zeros(40, int)]
    with pytest.raises(ValueError, match="more positives .* than negatives.*pos_label"):
        undersample(np.zeros((100, 1)), y, "balanced")
    with pytest.raises(ValueError, match="more positives"):
        balanced_beta(y)
    with pytest.raises(ValueError, match="more positives"):
        UndersampledClassifier(LogisticRegression(), pos_label=1).fit(np.zeros((100, 1)), y)


def test_probabilities_outside_unit_interval():
    with pytest.raises(ValueError, match=r"p_s must be probabilities in \[0, 1\].*decision_function"):
        correct_posterior(np.array([0.2, 1.2]), 0.5)
    with pytest.raises(ValueError, match=r"tau_s must be probabilities"):
        corrected_threshold(-0.1, 0.5)
    with pytest.raises(ValueError, match=r"probabilities in \[0, 1\]"):
        prior_shift([0.5, 1.0001], 0.1, 0.2)
    with pytest.raises(ValueError, match=r"probabilities in \[0, 1\]"):
        em_target_prior([0.5, 2.0], 0.1)


def test_single_class_y():
    with pytest.raises(ValueError, match="only one class.*positive and negative rows"):
        undersample(np.zeros((5, 1)), np.zeros(5, int), "balanced")
    with pytest.raises(ValueError, match="only one class"):
        UndersampledClassifier(LogisticRegression()).fit(np.zeros((5, 1)), np.ones(5, int))


def test_other_bad_input():
    X, y = _table1_data()
    with pytest.raises(ValueError, match="not both"):
        undersample(X, y, 0.5, sampling_strategy=0.5)
    with pytest.raises(ValueError, match="asks for more negatives than exist"):
        undersample(X, y, sampling_strategy=0.05)
    with pytest.raises(ValueError, match="Only binary classification is supported"):
        undersample(np.zeros((3, 1)), [0, 1, 2])
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        prior_shift(0.5, 0.0, 0.3)
    with pytest.raises(ValueError, match="pos_label='maybe' is not one of the labels"):
        undersample(np.zeros((3, 1)), ["a", "b", "b"], pos_label="maybe")


# ====================================================================================================
# EM prior re-estimation (Saerens, Latinne & Decaestecker 2002)
# ====================================================================================================
def _gaussian_sample(rng, n, prior, mu=2.5):
    n_pos = int(round(n * prior))
    x = np.r_[rng.normal(mu, 1.0, n_pos), rng.normal(0.0, 1.0, n - n_pos)]
    y = np.r_[np.ones(n_pos, int), np.zeros(n - n_pos, int)]
    return x.reshape(-1, 1), y


@pytest.mark.heavy
@pytest.mark.parametrize("target_prior", [0.3, 0.03])
def test_em_recovers_target_prior_with_calibrated_lr(target_prior):
    # Train at prior 0.1; one-feature LR is the correct (hence calibrated) model for equal-variance
    # Gaussians. The batch has a different prior and identical class-conditional densities.
    rng = np.random.default_rng(2002)
    X, y = _gaussian_sample(rng, 20_000, 0.10)
    Xt, yt = _gaussian_sample(rng, 10_000, target_prior)
    model = LogisticRegression().fit(X, y)
    est = em_target_prior(model.predict_proba(Xt)[:, 1], train_prior=y.mean())
    assert est.converged and est.n_iter < 1000
    assert abs(est.prior - yt.mean()) < 0.02
    # the re-adjusted probabilities are better calibrated on the batch than the training-prior ones
    assert brier(yt, est.proba) < brier(yt, model.predict_proba(Xt)[:, 1])
    # and they are eq. 14 applied with the estimated prior
    np.testing.assert_allclose(est.proba, prior_shift(model.predict_proba(Xt)[:, 1], y.mean(), est.prior))


def test_em_with_true_posterior_is_tight_and_loglik_increases():
    # with the exact posterior (US eq. 5) the only error is sampling noise of the batch
    rng = np.random.default_rng(11)
    Xt, yt = _gaussian_sample(rng, 20_000, 0.25)
    x = Xt.ravel()
    wp, wn = 0.1 * stats.norm.pdf(x, 2.5, 1), 0.9 * stats.norm.pdf(x, 0, 1)
    p_true = wp / (wp + wn)
    est = em_target_prior(p_true, 0.1, tol=1e-10)
    assert abs(est.prior - 0.25) < 0.01
    lls = [em_target_prior(p_true, 0.1, max_iter=k, tol=0.0).log_likelihood for k in range(1, 15)]
    assert all(b >= a - 1e-12 for a, b in zip(lls, lls[1:], strict=False))  # EM never decreases it
    # unchanged prior: EM stays (near) the training prior
    Xs, _ = _gaussian_sample(rng, 20_000, 0.1)
    xs = Xs.ravel()
    ws, vs = 0.1 * stats.norm.pdf(xs, 2.5, 1), 0.9 * stats.norm.pdf(xs, 0, 1)
    assert abs(em_target_prior(ws / (ws + vs), 0.1).prior - 0.1) < 0.01


def test_em_through_undersampled_classifier():
    # p' is calibrated to the training prior, so EM can follow a deployment batch's prior
    rng = np.random.default_rng(5)
    X, y = _gaussian_sample(rng, 20_000, 0.10)
    Xt, yt = _gaussian_sample(rng, 10_000, 0.2)
    model = UndersampledClassifier(LogisticRegression(), beta="balanced", random_state=0).fit(X, y)
    est = model.estimate_target_prior(Xt)
    assert model.train_prior_ == pytest.approx(0.1)
    assert abs(est.prior - 0.2) < 0.02


# ====================================================================================================
# UndersampledClassifier
# ====================================================================================================
def _imbalanced(n=3000, pos=0.1, seed=0, d=3):
    rng = np.random.default_rng(seed)
    n_pos = int(n * pos)
    X = np.r_[rng.normal(1.0, 1.0, (n_pos, d)), rng.normal(0.0, 1.0, (n - n_pos, d))]
    y = np.r_[np.ones(n_pos, int), np.zeros(n - n_pos, int)]
    return X, y


def test_predict_proba_is_eq9_of_an_independent_refit():
    X, y = _imbalanced()
    m = UndersampledClassifier(LogisticRegression(), beta=0.3, random_state=3).fit(X, y)
    idx = m.sample_indices_[0]
    assert m.beta_ == pytest.approx(round(0.3 * 2700) / 2700)
    ref = LogisticRegression().fit(X[idx], y[idx])
    p_s = ref.predict_proba(X)[:, 1]
    np.testing.assert_allclose(m.predict_proba_undersampled(X)[:, 1], p_s)
    np.testing.assert_allclose(m.predict_proba(X)[:, 1], correct_posterior(p_s, m.beta_))
    np.testing.assert_allclose(m.predict_proba(X).sum(axis=1), 1.0)
    # predict keeps the undersampled model's decisions p_s > tau_s (US §IV-B)
    assert m.threshold_ == pytest.approx(corrected_threshold(0.5, m.beta_))
    np.testing.assert_array_equal(m.predict(X), (p_s > 0.5).astype(int))


def test_threshold_balanced_and_prior_modes_equal_pi_plus():
    X, y = _imbalanced()
    bal = UndersampledClassifier(LogisticRegression(), random_state=0).fit(X, y)
    assert bal.beta_ == pytest.approx(300 / 2700) and bal.threshold_ == pytest.approx(0.1, abs=1e-12)
    pri = UndersampledClassifier(LogisticRegression(), beta=0.6, tau_s="prior", random_state=0).fit(X, y)
    assert pri.tau_s_ == pytest.approx(300 / (300 + 1620))
    assert pri.threshold_ == pytest.approx(0.1, abs=1e-12)


def test_p_prime_is_better_calibrated_than_p_s():
    # US §VI: on a test set with the training prior, Brier(p') < Brier(p_s)
    X, y = _imbalanced(seed=1)
    Xt, yt = _imbalanced(seed=2)
    m = UndersampledClassifier(LogisticRegression(), random_state=0).fit(X, y)
    assert brier(yt, m.predict_proba(Xt)[:, 1]) < brier(yt, m.predict_proba_undersampled(Xt)[:, 1])


@pytest.mark.heavy
def test_underbagging_averages_corrected_members():
    X, y = _imbalanced()
    m = UndersampledClassifier(LogisticRegression(), n_estimators=4, random_state=0).fit(X, y)
    assert len(m.estimators_) == 4
    assert len({tuple(i) for i in m.sample_indices_}) == 4  # independent undersamples
    members = np.stack([correct_posterior(e.predict_proba(X)[:, 1], m.beta_) for e in m.estimators_])
    np.testing.assert_allclose(m.predict_proba(X)[:, 1], members.mean(axis=0))
    np.testing.assert_array_equal(m.predict(X), (members.mean(axis=0) > m.threshold_).astype(int))


def test_string_labels_and_column_order():
    X, y01 = _imbalanced()
    y = np.where(y01 == 1, "yes", "no")
    m = UndersampledClassifier(LogisticRegression(), random_state=0).fit(X, y)
    assert m.pos_label_ == "yes" and list(m.classes_) == ["no", "yes"]
    ref = UndersampledClassifier(LogisticRegression(), random_state=0).fit(X, y01)
    np.testing.assert_allclose(m.predict_proba(X), ref.predict_proba(X))
    assert set(m.predict(X)) <= {"yes", "no"}


def test_majority_one_labels_use_the_minority_as_positive():
    X, y = _imbalanced()
    m = UndersampledClassifier(LogisticRegression(), random_state=0).fit(X, 1 - y)
    assert m.pos_label_ == 0
    p0 = m.predict_proba(X)[:, 0]  # column of class 0 (the minority here) is the corrected p'
    ref = UndersampledClassifier(LogisticRegression(), random_state=0).fit(X, y).predict_proba(X)[:, 1]
    np.testing.assert_allclose(p0, ref, atol=1e-6)


def test_sample_weight_passthrough():
    X, y = _imbalanced()
    w = np.random.default_rng(0).uniform(0.5, 2.0, y.size)
    m = UndersampledClassifier(make_learner("LR"), beta=0.5, random_state=1).fit(X, y, sample_weight=w)
    idx = m.sample_indices_[0]
    ref = make_learner("LR").fit(X[idx], y[idx], sample_weight=w[idx])
    np.testing.assert_allclose(m.predict_proba_undersampled(X)[:, 1], ref.predict_proba(X)[:, 1])
    with pytest.raises(ValueError, match="does not accept it"):
        UndersampledClassifier(KNeighborsClassifier()).fit(X, y, sample_weight=w)


def test_clone_and_params():
    m = UndersampledClassifier(make_learner("RF", n_estimators=5), beta=0.4, n_estimators=2, random_state=3,
                               tau_s="prior", pos_label=1)
    c = clone(m)
    assert c.get_params()["beta"] == 0.4 and c.get_params()["tau_s"] == "prior"
    assert c.get_params()["estimator__clf__n_estimators"] == 5
    with pytest.raises(ValueError, match="n_estimators"):
        UndersampledClassifier(LogisticRegression(), n_estimators=0).fit(*_imbalanced())
    with pytest.raises(ValueError, match="tau_s"):
        UndersampledClassifier(LogisticRegression(), tau_s=1.5).fit(*_imbalanced())


def test_dataframe_input_keeps_feature_names():
    X, y = _imbalanced()
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    m = UndersampledClassifier(make_learner("LR"), random_state=0).fit(df, y)
    assert list(m.feature_names_in_) == ["a", "b", "c"]
    ref = UndersampledClassifier(make_learner("LR"), random_state=0).fit(X, y)
    np.testing.assert_allclose(m.predict_proba(df), ref.predict_proba(X))


class _PyfuncLike:
    """Shape of an ``mlflow.pyfunc.PythonModel``: ``predict(context, model_input)``."""

    def __init__(self, model):
        self.model = model

    def predict(self, context, model_input):
        return self.model.predict_proba(model_input)[:, 1]


def test_cloudpickle_round_trip_and_pyfunc_style_wrapper():
    X, y = _imbalanced()
    m = UndersampledClassifier(make_learner("LR"), n_estimators=2, random_state=0).fit(X, y)
    m2 = cloudpickle.loads(cloudpickle.dumps(m))
    # equal up to BLAS summation order (memory alignment of the unpickled coefficients), ~1e-16
    np.testing.assert_allclose(m2.predict_proba(X), m.predict_proba(X), rtol=0, atol=1e-12)
    assert m2.threshold_ == m.threshold_ and m2.beta_ == m.beta_
    np.testing.assert_array_equal(m2.predict(X), m.predict(X))
    w = cloudpickle.loads(cloudpickle.dumps(_PyfuncLike(m)))
    np.testing.assert_allclose(w.predict(None, pd.DataFrame(X)), m.predict_proba(X)[:, 1], rtol=0, atol=1e-12)


@pytest.mark.slow
def test_mlflow_pyfunc_save_load(tmp_path):
    mlflow_pyfunc = pytest.importorskip("mlflow.pyfunc")

    class Wrapper(mlflow_pyfunc.PythonModel):
        def __init__(self, model):
            self.model = model

        def predict(self, context, model_input, params=None):
            return self.model.predict_proba(model_input)[:, 1]

    X, y = _imbalanced()
    m = UndersampledClassifier(make_learner("LR"), random_state=0).fit(X, y)
    path = tmp_path / "model"
    mlflow_pyfunc.save_model(str(path), python_model=Wrapper(m), pip_requirements=[])
    loaded = mlflow_pyfunc.load_model(str(path))
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    np.testing.assert_allclose(np.asarray(loaded.predict(df)), m.predict_proba(X)[:, 1])


# scikit-learn estimator checks. Expected failures (random undersampling, not a bug):
# check_sample_weight_equivalence_on_{dense,sparse}_data — zero weights vs. dropping rows (and integer
# weights vs. repeating rows) change N−, hence the undersampling draw; weights cannot be equivalent.
_EXPECTED_FAILED = {
    "check_sample_weight_equivalence_on_dense_data": "random undersampling: removing/repeating rows "
    "changes the negative count and the draw, so zero/integer weights cannot equal removal/repetition",
    "check_sample_weight_equivalence_on_sparse_data": "same as the dense variant",
}


@pytest.mark.heavy
@parametrize_with_checks(
    [UndersampledClassifier(make_learner("LR"))], expected_failed_checks=lambda est: _EXPECTED_FAILED
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


@pytest.mark.slow
@parametrize_with_checks(
    [
        UndersampledClassifier(LogisticRegression()),  # sparse-capable base: sparse checks run too
        UndersampledClassifier(LogisticRegression(), n_estimators=3),  # UnderBagging
    ],
    expected_failed_checks=lambda est: _EXPECTED_FAILED,
)
def test_sklearn_estimator_checks_slow(estimator, check):
    check(estimator)


# ====================================================================================================
# out-of-fold undersampling (oof_undersampling / undersampling_metrics: the flow's recalibration numbers)
# ====================================================================================================
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


# ====================================================================================================
# reliability figure
# ====================================================================================================
@pytest.mark.heavy
def test_reliability_figure_plots_calibration_curve_numbers():
    rng = np.random.default_rng(0)
    p = rng.uniform(0, 1, 2000)
    y = (rng.uniform(0, 1, 2000) < p).astype(int)
    q = correct_posterior(p, 0.3)
    fig = reliability_figure(y, {"p_s": p, "p'": q}, n_bins=8)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    lines = ax.get_lines()  # diagonal + one line per entry
    assert len(lines) == 3
    for line, arr in zip(lines[1:], (p, q), strict=True):
        frac, mean_pred = calibration_curve(y, arr, n_bins=8)
        np.testing.assert_allclose(line.get_xdata(), mean_pred)
        np.testing.assert_allclose(line.get_ydata(), frac)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert f"p_s (Brier {brier(y, p):.4f})" in labels
    buf = io.BytesIO()
    fig.savefig(buf, format="png")  # renders headless (Agg canvas via Figure)
    assert buf.getvalue()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="single class"):
        reliability_figure(np.zeros(10), {"p": np.full(10, 0.5)})


# ====================================================================================================
# replication (US §III-D + Table V) — end to end, quick mode
# ====================================================================================================
@pytest.mark.slow
def test_replication_quick_run(tmp_path):
    out = tmp_path / "reports"
    proc = subprocess.run(
        [sys.executable, "-m", "replications.replicate_us", "--quick", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    folds = pd.read_csv(out / "us_cv_folds.csv")
    under = folds[folds["beta"] < 1]
    # the algebra US requires: eq. 9 keeps AUC (exactly, unless float64 rounding merged two distinct
    # p_s values into one p'), eq. 12 keeps every decision and so the G-mean
    unmerged = under[under["n_scores_merged"] == 0]
    assert np.max(np.abs(unmerged["auc_pprime"] - unmerged["auc_ps"])) == 0.0
    assert np.max(np.abs(under["auc_pprime"] - under["auc_ps"])) < 1e-3
    assert np.max(np.abs(under["gmean_pprime"] - under["gmean_ps"])) < 1e-12
    assert under["n_decisions_differ"].sum() == 0
    cells = pd.read_csv(out / "us_cv_cells.csv")
    assert cells["brier_pprime_lt_ps"].mean() >= 0.95
    syn = pd.read_csv(out / "us_synthetic_summary.csv")
    assert syn["max_abs_eq9_of_eq3_minus_p_grid"].max() < 1e-12
    assert math.isclose(syn.loc[syn["beta_label"] == "balanced", "beta"].iloc[0], 1000 / 9000)
    assert (out / "us_replication.md").read_text().startswith("# US replication")
