"""Scores for selection (shiftlib.selection.scoring): the importance-weighted accuracy (TrCV eq. 4) and ROC AUC by
hand and against scikit-learn, the RT §6 benefit matrices by hand and against shiftlib.metrics.total_benefit,
scorer names and resolution."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, roc_auc_score

from shiftlib.selection import BenefitScorer, accuracy_scorer, get_scorer, roc_auc_scorer
from shiftlib.selection.scoring import score_rows, scorer_name

pytestmark = pytest.mark.usefixtures("one_blas_thread")


class _FixedProba:
    classes_ = np.array([0, 1])

    def __init__(self, p):
        self.p = np.asarray(p, float)

    def predict_proba(self, X):
        return np.column_stack([1 - self.p, self.p])


def test_rt_section_6_donation_and_fraud_matrices_by_hand():
    # Donation (RT §6): solicit iff p·Y(x) > 0.68; p·Y = 1.0, 0.5, 1.8, 1.0 ⇒ rows 0, 2, 3 solicited.
    # benefit = (10 − 0.68) + (2 − 0.68) + (−0.68) = 9.96
    don = BenefitScorer.donation([10, 1, 2, 20])
    assert don(_FixedProba([0.1, 0.5, 0.9, 0.05]), None, [1, 0, 1, 0]) == pytest.approx(9.96)
    # Fraud (RT §6): flag iff p·y(x) > 90; p·y = 100, 45, 100, 20 ⇒ rows 0, 2.
    # benefit = (1000 − 90) + (−90) = 820
    fraud = BenefitScorer.fraud([1000, 50, 200, 2000])
    assert fraud(_FixedProba([0.1, 0.9, 0.5, 0.01]), None, [1, 1, 0, 1]) == pytest.approx(820.0)


def test_benefit_scorer_agrees_with_shiftlib_metrics_total_benefit():
    # Independent computation: shiftlib.metrics.total_benefit (RT §6) on the scorer's act / don't-act decisions.
    metrics = pytest.importorskip("shiftlib.metrics")
    rng = np.random.default_rng(11)
    p = rng.uniform(size=40)
    amounts = rng.uniform(0, 50, size=40)
    y = rng.integers(0, 2, size=40)
    scorer = BenefitScorer.donation(amounts)
    acted = scorer.decisions(_FixedProba(p), None).astype(int)
    expected = metrics.total_benefit(y, acted, metrics.donation_benefit(amounts, cost=0.68))
    assert scorer(_FixedProba(p), None, y) == pytest.approx(expected)


class _Fixed:
    """A fitted model whose answers are given: ``predict`` returns ``pred``, ``predict_proba`` has ``p`` for
    ``classes_[1]`` (X is ignored)."""

    def __init__(self, pred=None, p=None, classes=(0, 1)):
        self.pred, self.p, self.classes_ = np.asarray(pred), np.asarray(p, float), np.asarray(classes)

    def predict(self, X):
        return self.pred

    def predict_proba(self, X):
        return np.column_stack([1 - self.p, self.p])


def test_weighted_accuracy_is_the_importance_weighted_01_loss_not_renormalised():
    # y = 0 1 1 0, ŷ = 0 1 0 0: one error (row 2). Unweighted: 3/4. With w = (1, 1, 3, 1) TrCV eq. 4 /
    # Sugiyama et al. (2007): 1 − (1/n)·Σ w·1[ŷ ≠ y] = 1 − 3/4 = 0.25 (divided by n = 4, not by Σw = 6, which
    # would give 0.5); w ≡ 1 gives plain accuracy
    est, y = _Fixed(pred=[0, 1, 0, 0]), np.array([0, 1, 1, 0])
    assert accuracy_scorer(est, None, y) == pytest.approx(0.75) == accuracy_score(y, est.pred)
    assert accuracy_scorer(est, None, y, sample_weight=[1, 1, 3, 1]) == pytest.approx(0.25)
    assert accuracy_scorer(est, None, y, sample_weight=np.ones(4)) == pytest.approx(0.75)


def test_roc_auc_of_the_positive_class_by_hand_and_against_scikit_learn():
    # scikit-learn's roc_auc_score docstring example: y = 0 0 1 1, scores 0.1 0.4 0.35 0.8 → 3 of the 4
    # (positive, negative) pairs ordered right: 0.75. The positive class is classes_[1], also for text labels.
    est = _Fixed(p=[0.1, 0.4, 0.35, 0.8])
    assert roc_auc_scorer(est, None, [0, 0, 1, 1]) == pytest.approx(0.75)
    words = _Fixed(p=[0.1, 0.4, 0.35, 0.8], classes=("no", "yes"))
    assert roc_auc_scorer(words, None, ["no", "no", "yes", "yes"]) == pytest.approx(0.75)
    w = np.array([1.0, 2.0, 0.5, 1.0])
    assert roc_auc_scorer(est, None, [0, 0, 1, 1], sample_weight=w) == pytest.approx(
        roc_auc_score([0, 0, 1, 1], est.p, sample_weight=w))
    with pytest.raises(ValueError, match="needs a binary problem with both classes in the scored rows"):
        roc_auc_scorer(est, None, [1, 1, 1, 1])
    with pytest.raises(ValueError, match="use scoring='accuracy'"):
        roc_auc_scorer(_Fixed(p=[0.5], classes=(0, 1, 2)), None, [0, 1])


def test_benefit_with_decision_amounts_weights_and_a_subset_by_hand():
    # amounts (realised) 10, 4, 6; decision amounts 1, 10, 6; cost 2; p(pos) = 0.5 on every row:
    # act iff 0.5·decision > 2 → rows 1 (5 > 2) and 2 (3 > 2), not row 0 (0.5). y = 1 0 1:
    # row 1 acted on a negative −2, row 2 on a positive 6 − 2 = 4 → 2. Weights (1, 3, 0.5): −6 + 2 = −4.
    scorer = BenefitScorer([10.0, 4.0, 6.0], 2.0, decision_amounts=[1.0, 10.0, 6.0])
    est, y = _Fixed(p=[0.5, 0.5, 0.5]), np.array([1, 0, 1])
    np.testing.assert_array_equal(scorer.decisions(est, None), [False, True, True])
    assert scorer(est, None, y) == pytest.approx(2.0)
    assert scorer(est, None, y, sample_weight=[1.0, 3.0, 0.5]) == pytest.approx(-4.0)
    # rows 1 and 2 only (a CV fold): the scorer restricted to them gives the same two terms
    sub = scorer.subset(np.array([1, 2]))
    np.testing.assert_array_equal(sub.amounts, [4.0, 6.0])
    np.testing.assert_array_equal(sub.decision_amounts, [10.0, 6.0])
    assert score_rows(scorer, _Fixed(p=[0.5, 0.5]), None, y[1:], np.array([1, 2])) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="one value per row"):
        BenefitScorer([1.0, 2.0], 1.0, decision_amounts=[1.0])
    with pytest.raises(ValueError, match="finite numbers"):
        BenefitScorer([1.0, np.nan], 1.0)
    with pytest.raises(ValueError, match="cost must be a finite number"):
        BenefitScorer([1.0], np.inf)
    with pytest.raises(ValueError, match="positive label 'donor' is not among the model's classes"):
        BenefitScorer([1.0, 2.0, 3.0], 1.0, positive_label="donor")(est, None, y)


def test_scorers_resolve_by_name_and_are_named_for_reports():
    assert get_scorer("accuracy") is accuracy_scorer
    assert get_scorer("roc_auc") is roc_auc_scorer and get_scorer("auc") is roc_auc_scorer
    scorer = BenefitScorer.donation([1.0, 2.0])
    assert get_scorer(scorer) is scorer
    with pytest.raises(ValueError, match="unknown scoring 'f1'"):
        get_scorer("f1")
    with pytest.raises(TypeError, match="scoring must be"):
        get_scorer(3)
    assert (scorer_name("auc"), scorer_name("accuracy")) == ("roc_auc", "accuracy")
    assert scorer_name(scorer) == "benefit(cost=0.68)" and scorer_name(BenefitScorer.fraud([1.0])) == "benefit(cost=90)"
    assert scorer_name(accuracy_scorer) == "accuracy_scorer"
