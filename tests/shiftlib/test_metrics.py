"""Tests for shiftlib.metrics: hand-worked numbers, scikit-learn as the independent computation, and
properties (US §V; RT §6 for the benefit matrices)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

from shiftlib.calibration import correct_posterior
from shiftlib.metrics import (
    accuracy_at,
    auc,
    brier,
    donation_benefit,
    evaluate_probabilities,
    f1_at,
    fraud_benefit,
    g_mean,
    log_loss,
    precision_at,
    recall_at,
    total_benefit,
)


def _labels_and_scores(min_size: int = 2, max_size: int = 60):
    """Binary labels with both classes and integer-valued scores in [0, 10]/10 (many ties)."""

    @st.composite
    def _draw(draw):
        n = draw(st.integers(min_size, max_size))
        y = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n).filter(lambda v: 0 < sum(v) < len(v)))
        s = draw(st.lists(st.integers(0, 10), min_size=n, max_size=n))
        return np.array(y), np.array(s, dtype=float) / 10.0

    return _draw()


# ---------------------------------------------------------------------------------------------- AUC
def test_auc_sklearn_docstring_example():
    # scikit-learn's roc_auc_score docs: y=[0, 0, 1, 1], scores=[0.1, 0.4, 0.35, 0.8] → 0.75
    assert auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == pytest.approx(0.75)


def test_auc_ties_count_half_by_hand():
    # pairs (pos, neg): (0.5 vs 0.5) tie → 1/2, (0.5 vs 0.2) win → 1; AUC = 1.5 / 2 = 0.75
    assert auc([1, 0, 0], [0.5, 0.5, 0.2]) == pytest.approx(0.75)
    assert auc([1, 0], [0.3, 0.3]) == pytest.approx(0.5)


@pytest.mark.heavy
@settings(max_examples=60, deadline=None)
@given(_labels_and_scores())
def test_auc_equals_sklearn_roc_auc_score(data):
    y, s = data
    assert auc(y, s) == pytest.approx(skm.roc_auc_score(y, s), abs=1e-12)


@pytest.mark.heavy
@settings(max_examples=30, deadline=None)
@given(_labels_and_scores(), st.floats(0.01, 1.0))
def test_auc_invariant_under_eq9(data, beta):
    # US §III-C: eq. 9 is monotone, so AUC(p') = AUC(p_s)
    y, s = data
    assert auc(y, correct_posterior(s, beta)) == pytest.approx(auc(y, s), abs=1e-12)


def test_auc_string_labels_with_pos_label():
    assert auc(["no", "no", "yes", "yes"], [0.1, 0.4, 0.35, 0.8], pos_label="yes") == pytest.approx(0.75)
    # swapping the positive class mirrors the AUC
    assert auc(["no", "no", "yes", "yes"], [0.1, 0.4, 0.35, 0.8], pos_label="no") == pytest.approx(0.25)


# ---------------------------------------------------------------------------------------------- Brier, log-loss
def test_brier_by_hand_and_against_sklearn():
    y, p = [0, 1, 1, 0], [0.1, 0.9, 0.8, 0.3]
    # (0.1² + 0.1² + 0.2² + 0.3²) / 4 = 0.15 / 4 = 0.0375 (US eq. 13)
    assert brier(y, p) == pytest.approx(0.0375)
    assert brier(y, p) == pytest.approx(skm.brier_score_loss(y, p))


def test_log_loss_by_hand():
    # −(ln 0.8 + ln 0.7) / 2 = 0.2899092476...
    assert log_loss([1, 0], [0.8, 0.3]) == pytest.approx(-(math.log(0.8) + math.log(0.7)) / 2)
    # a confident mistake is finite thanks to clipping at eps
    assert log_loss([1, 0], [0.0, 0.0]) == pytest.approx(-math.log(1e-15) / 2)


# ---------------------------------------------------------------------------------------------- threshold metrics
Y5 = np.array([1, 1, 0, 0, 0])
S5 = np.array([0.9, 0.2, 0.1, 0.6, 0.3])  # at 0.5: TP=1, FN=1, FP=1, TN=2


def test_threshold_metrics_by_hand():
    assert g_mean(Y5, S5, 0.5) == pytest.approx(math.sqrt(0.5 * 2 / 3))
    assert precision_at(Y5, S5, 0.5) == pytest.approx(0.5)
    assert recall_at(Y5, S5, 0.5) == pytest.approx(0.5)
    assert f1_at(Y5, S5, 0.5) == pytest.approx(0.5)
    assert accuracy_at(Y5, S5, 0.5) == pytest.approx(3 / 5)


def test_threshold_is_strict():
    # US §IV-A predicts positive when p > tau: a score equal to the threshold is negative
    assert recall_at([1, 0], [0.5, 0.1], threshold=0.5) == 0.0
    assert recall_at([1, 0], [0.5, 0.1], threshold=0.49) == 1.0


@pytest.mark.heavy
@settings(max_examples=30, deadline=None)
@given(_labels_and_scores(), st.floats(0.0, 1.0))
def test_threshold_metrics_match_sklearn(data, tau):
    y, s = data
    pred = (s > tau).astype(int)
    assert precision_at(y, s, tau) == pytest.approx(skm.precision_score(y, pred, zero_division=0))
    assert recall_at(y, s, tau) == pytest.approx(skm.recall_score(y, pred))
    assert f1_at(y, s, tau) == pytest.approx(skm.f1_score(y, pred, zero_division=0))
    assert accuracy_at(y, s, tau) == pytest.approx(skm.accuracy_score(y, pred))
    tnr = skm.recall_score(y, pred, pos_label=0)
    assert g_mean(y, s, tau) == pytest.approx(math.sqrt(skm.recall_score(y, pred) * tnr))


def test_evaluate_probabilities_agrees_with_functions():
    m = evaluate_probabilities(Y5, S5, 0.5)
    assert m.auc == auc(Y5, S5) and m.brier == brier(Y5, S5) and m.g_mean == g_mean(Y5, S5, 0.5)
    d = m.as_dict("calibration.")
    assert d["calibration.g_mean"] == pytest.approx(math.sqrt(1 / 3)) and d["calibration.n_pos"] == 2.0


# ---------------------------------------------------------------------------------------------- errors
def test_single_class_is_a_clear_error():
    with pytest.raises(ValueError, match="single class"):
        auc([0, 0, 0], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="single class"):
        g_mean([1, 1], [0.1, 0.9])


def test_bad_probabilities_are_clear_errors():
    with pytest.raises(ValueError, match=r"probabilities in \[0, 1\]"):
        brier([0, 1], [-0.2, 1.3])
    with pytest.raises(ValueError, match="positive-class column"):
        brier([0, 1], [[0.9, 0.1], [0.2, 0.8]])
    with pytest.raises(ValueError, match="NaN"):
        g_mean([0, 1], [np.nan, 0.3])
    with pytest.raises(ValueError, match="one score per row"):
        brier([0, 1, 1], [0.1, 0.2])


def test_pos_label_not_in_labels():
    with pytest.raises(ValueError, match="pos_label=1 is not one of the labels"):
        auc(["no", "yes"], [0.1, 0.9])


def test_multiclass_rejected():
    with pytest.raises(ValueError, match="3 classes"):
        brier([0, 1, 2], [0.1, 0.2, 0.3])


# ---------------------------------------------------------------------------------------------- benefit (RT §6)
def test_total_benefit_donation_by_hand():
    # RT §6 Donate: solicit costs $0.68; a solicited donor gives Y(x)
    y = np.array([1, 0, 1, 0])
    amount = np.array([10.0, 0.0, 5.0, 0.0])
    pred = np.array([1, 1, 0, 0])
    # (10 − 0.68) + (−0.68) + 0 + 0 = 8.64
    assert total_benefit(y, pred, donation_benefit(amount)) == pytest.approx(8.64)


def test_total_benefit_fraud_by_hand():
    # RT §6 CCF: overhead v = $90; a flagged fraud recovers y(x) − 90, a flagged legit costs −90
    y = np.array([1, 0, 1, 1])
    amount = np.array([200.0, 50.0, 1000.0, 30.0])
    pred = np.array([1, 1, 1, 0])
    assert total_benefit(y, pred, fraud_benefit(amount)) == pytest.approx(110 - 90 + 910 + 0)


def test_total_benefit_matrix_equals_constant_amount_callable():
    rng = np.random.default_rng(0)
    y, pred = rng.integers(0, 2, 50), rng.integers(0, 2, 50)
    g = 7.0
    matrix = [[0.0, -0.68], [0.0, g - 0.68]]  # [actual][predicted], 0 = negative, 1 = positive
    assert total_benefit(y, pred, matrix) == pytest.approx(total_benefit(y, pred, donation_benefit(np.full(50, g))))
    # and the matrix form by counting: TP·(g − 0.68) − FP·0.68
    tp = int(((y == 1) & (pred == 1)).sum())
    fp = int(((y == 0) & (pred == 1)).sum())
    assert total_benefit(y, pred, matrix) == pytest.approx(tp * (g - 0.68) - fp * 0.68)


def test_total_benefit_string_labels_and_errors():
    y = ["fraud", "ok", "fraud"]
    pred = ["fraud", "fraud", "ok"]
    assert total_benefit(y, pred, [[0, -90], [0, 10]], pos_label="fraud") == pytest.approx(10 - 90)
    with pytest.raises(ValueError, match="2x2"):
        total_benefit([0, 1], [0, 1], [1, 2, 3])
    with pytest.raises(ValueError, match="one amount per row"):
        total_benefit([0, 1], [0, 1], lambda yt, yp: np.zeros(3))
