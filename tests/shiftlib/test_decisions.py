"""shiftlib.decisions: the gate, the overlap verdict, the majority baseline and the label combination.

Every number is worked by hand in the comment beside it, or is a property that must hold."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shiftlib.decisions import (
    FIRST_RULE_LABELS,
    LOW_ESS_SHARE,
    ONE_CLASS_SHARE,
    OUTSIDE_SHARE,
    OVERLAP_AUC,
    PROMOTE_CONFIDENCE,
    RULE_CONTENDER,
    RULE_CONTENDERS,
    UNVOUCHED_CHAMPION,
    accuracy_alert,
    baseline_components,
    champion_predictions,
    domain_auc,
    ess_share,
    gate,
    heldout_champion_predictions,
    heldout_pair,
    majority_baseline,
    majority_margin,
    margin_draws,
    one_class_share,
    outside_share,
    overlap_verdict,
    p_beats_rule,
    p_better,
    refusal_stands,
    unvouched_reason,
    widen_for_overlap,
    with_labels,
)
from shiftlib.estimation import StoredPredictions, paired_draws


def _onehot(codes: np.ndarray, n_cls: int = 2, conf: float = 1.0) -> np.ndarray:
    out = np.full((len(codes), n_cls), (1.0 - conf) / (n_cls - 1))
    out[np.arange(len(codes)), codes] = conf
    return out


def _P(y: list[int], proba_s: np.ndarray, proba_t: np.ndarray, weights: np.ndarray | None = None,
       name: str = "m") -> StoredPredictions:
    y = np.asarray(y)
    folds = np.arange(len(y)) % 2
    return StoredPredictions(name, np.array([0, 1]), y, np.asarray(proba_s, float), np.asarray(proba_t, float),
                             folds, weights)


def test_the_shipped_thresholds():
    # what ships: promote at P ≥ 0.9, one class on ≥ 99 % of the batch, AUC ≥ 0.95, ESS < 5 %, 10 % beyond
    assert (PROMOTE_CONFIDENCE, ONE_CLASS_SHARE, OVERLAP_AUC, LOW_ESS_SHARE, OUTSIDE_SHARE) == (
        0.9, 0.99, 0.95, 0.05, 0.10)


def test_widen_for_overlap_is_the_worst_case_mixture():
    # [0.7, 0.8] on 75 % of the batch, anything on 25 %: [0.7·0.75, 0.8·0.75 + 0.25] = [0.525, 0.85]
    assert widen_for_overlap(0.7, 0.8, 0.25) == pytest.approx((0.525, 0.85))
    assert widen_for_overlap(0.7, 0.8, 0.0) == pytest.approx((0.7, 0.8))
    assert widen_for_overlap(0.7, 0.8, 1.0) == pytest.approx((0.0, 1.0))
    with pytest.raises(ValueError, match="share"):
        widen_for_overlap(0.7, 0.8, 1.5)


@pytest.mark.parametrize(("low", "high", "threshold", "expected"), [
    (0.60, 0.68, 0.70, "below"),      # the whole interval under the threshold: alert
    (0.65, 0.75, 0.70, "straddles"),  # the threshold inside: it may be below
    (0.70, 0.80, 0.70, "ok"),         # the lower end reaches it
    (0.60, 0.70, 0.70, "straddles"),  # an upper end equal to the threshold is not surely below
    (0.60, 0.68, None, ""),           # no threshold, no verdict
])
def test_accuracy_alert_by_hand(low, high, threshold, expected):
    assert accuracy_alert(low, high, threshold) == expected


def test_outside_share_counts_target_rows_above_the_sources_99th_percentile():
    source = np.arange(101.0)  # 99th percentile of 0..100 = 99.0
    target = np.array([50.0, 99.0, 99.5, 100.0, 200.0])  # above 99.0: 99.5, 100, 200 → 3/5
    assert outside_share(source, target) == pytest.approx(0.6)


@pytest.mark.parametrize(("auc", "ess", "outside", "poor_because"), [
    (0.70, 50.0, 0.02, None),
    (0.95, 50.0, 0.02, "AUC 0.950"),
    (0.70, 4.9, 0.02, "4.9%"),      # ESS 4.9 of 100 rows < 5 %
    (0.70, 50.0, 0.10, "10% of the batch"),
])
def test_overlap_verdict_each_criterion(auc, ess, outside, poor_because):
    v = overlap_verdict(auc, ess, 100, outside)
    if poor_because is None:
        assert v.verdict == "ok" and v.reasons == []
        assert "overlap ok" in v.sentence()
    else:
        assert v.verdict == "poor"
        assert len(v.reasons) == 1 and poor_because in v.reasons[0]
        assert "--label-budget" in v.sentence()
    assert v.ess_share == pytest.approx(ess / 100)


def test_one_class_share():
    P = _P([0, 1], _onehot(np.array([0, 1])), _onehot(np.array([1, 1, 1, 0])))
    assert one_class_share(P) == pytest.approx(0.75)


def test_one_class_names_the_class_predicted_for_at_least_99_percent_of_the_rows():
    from shiftlib.decisions import one_class

    assert one_class({"AssocProf": 131, "Prof": 1}) == ("AssocProf", 131 / 132)  # 99.2 %
    assert one_class({"b": 99, "a": 1}) == ("b", 0.99)  # exactly the threshold
    assert one_class({"No": 328, "Yes": 4}) is None  # 98.8 %
    assert one_class({}) is None and one_class({"a": 0}) is None


def test_majority_baseline_without_shift_is_the_source_share():
    # target rows = source rows: π_s, the mean calibrated posterior (isotonic keeps the class mean), EM's fixed
    # point and BBSE's solution are all π_s(0) = 0.6
    y = np.array([0] * 6 + [1] * 4)
    proba = np.c_[np.linspace(0.9, 0.1, 10), 1 - np.linspace(0.9, 0.1, 10)]
    comps = baseline_components(_P(list(y), proba, proba))
    assert set(comps) == {"cv", "cbpe", "em", "bbse"}  # no weights: the weighted three are left out
    assert all(v == pytest.approx(0.6) for v in comps.values())
    assert majority_baseline(_P(list(y), proba, proba)) == pytest.approx(0.6)


def test_majority_baseline_takes_the_median_of_the_shift_models():
    # a perfect classifier: source 6 of class 0 (the majority), 4 of class 1; every target row predicted 1
    # with certainty. π_s(0) = 0.6; the calibrated posterior of 0 is 0 on every batch row, and EM and BBSE
    # find π_t(0) = 0: median(0.6, 0, 0, 0) = 0
    y = np.array([0] * 6 + [1] * 4)
    src, tgt = _onehot(y), _onehot(np.ones(8, int))
    assert majority_baseline(_P(list(y), src, tgt)) == pytest.approx(0.0)
    # with uniform weights the weighted three join: iwcv 0.6, weighted-cbpe 0, weighted-em 0 → median of
    # (0.6, 0, 0, 0, 0.6, 0, 0) = 0
    comps = baseline_components(_P(list(y), src, tgt, weights=np.ones(10)))
    assert comps == pytest.approx({"cv": 0.6, "cbpe": 0.0, "em": 0.0, "bbse": 0.0, "iwcv": 0.6,
                                   "weighted-cbpe": 0.0, "weighted-em": 0.0})


def test_majority_margin_pairs_each_estimator_with_the_rules_estimate_under_the_same_shift():
    # target rows = source rows, a model right on 8 of 10 rows: cv 0.8 vs 0.6, and every other pair likewise
    # (no shift); the median of the paired differences is 0.8 − 0.6 = 0.2
    y = np.array([0] * 6 + [1] * 4)
    pred = y.copy()
    pred[[0, 9]] = 1 - pred[[0, 9]]
    proba = _onehot(pred, conf=0.8)
    P = _P(list(y), proba, proba)
    assert majority_margin(P) == pytest.approx(0.2, abs=1e-9)


def test_a_model_that_predicts_the_rules_class_on_every_batch_row_has_margin_zero_exactly():
    """On the batch its accuracy is the rule's whatever the labels, so the margin is 0, though on the source (its
    out-of-fold predictions, 8 of 10 right against the rule's 6) the paired estimators would say +0.2 (the test
    above: the same source). helper-32's HousePrices: such a model was printed at −0.003 against the rule."""
    from shiftlib.decisions import predicts_the_rule

    y = np.array([0] * 6 + [1] * 4)
    pred = y.copy()
    pred[[0, 9]] = 1 - pred[[0, 9]]
    all_rule = _onehot(np.zeros(10, int), conf=0.7)  # class 0, the source's largest, on every batch row
    P = _P(list(y), _onehot(pred, conf=0.8), all_rule)
    assert predicts_the_rule(P) and majority_margin(P) == 0.0
    one_other = all_rule.copy()
    one_other[3] = [0.4, 0.6]
    Q = _P(list(y), _onehot(pred, conf=0.8), one_other)
    assert not predicts_the_rule(Q) and majority_margin(Q) != 0.0
    other_class = _P(list(y), _onehot(pred, conf=0.8), _onehot(np.ones(10, int), conf=0.7))
    assert not predicts_the_rule(other_class)  # one class on every row, but not the rule's


def test_with_labels_a_contradicted_prior_loses_its_weight():
    # prior 0.85 ± 0.02, labels 0.70 ± 0.05: τ² = 0.15² − 0.02² − 0.05² = 0.0196, prior variance 0.02 (weight
    # 50), labels 1/0.0025 = 400: estimate (50·0.85 + 400·0.70)/450 = 0.71667, se √(1/450) = 0.047140
    est, lo, hi, w = with_labels(0.85, 0.02, 0.70, 0.05)
    z = 1.959964
    assert est == pytest.approx(322.5 / 450)
    assert (lo, hi) == pytest.approx((322.5 / 450 - z * math.sqrt(1 / 450), 322.5 / 450 + z * math.sqrt(1 / 450)))
    assert w == pytest.approx(50 / 450)


def test_with_labels_an_agreeing_prior_narrows_the_interval():
    # prior 0.80 ± 0.02, labels 0.81 ± 0.05: 0.01² < 0.02² + 0.05², so τ² = 0; weights 2500 and 400:
    # estimate (2000 + 324)/2900 = 0.801379, se √(1/2900) = 0.018570 (narrower than either alone)
    est, lo, hi, w = with_labels(0.80, 0.02, 0.81, 0.05)
    assert est == pytest.approx(2324 / 2900)
    assert (hi - lo) / 2 == pytest.approx(1.959964 * math.sqrt(1 / 2900), rel=1e-5)
    assert w == pytest.approx(2500 / 2900)
    with pytest.raises(ValueError, match="label_se"):
        with_labels(0.8, 0.02, 0.8, 0.0)


def _pair() -> tuple[StoredPredictions, StoredPredictions]:
    """A champion that predicts class 0 with 60 % confidence everywhere and a new model that is right with
    90 % confidence on every source row; the batch is class 1 on half its rows."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 60)
    y[:5], y[5:10] = 0, 1
    champ = _P(list(y), _onehot(np.zeros(60, int), conf=0.6), _onehot(np.zeros(40, int), conf=0.6), name="c")
    t = np.r_[np.zeros(20, int), np.ones(20, int)]
    new = _P(list(y), _onehot(y, conf=0.9), _onehot(t, conf=0.9), name="n")
    return champ, new


@pytest.mark.heavy
def test_p_better_sees_a_clearly_better_model_and_is_antisymmetric():
    champ, new = _pair()
    p, est_c, est_n = p_better(champ, new, shared_source=True, n_boot=30, random_state=1)
    assert p == 1.0 and est_n > est_c
    q, _, _ = p_better(new, champ, shared_source=True, n_boot=30, random_state=1)
    assert p + q == pytest.approx(1.0)  # the same paired draws, roles swapped


@pytest.mark.heavy
def test_gate_promotes_keeps_and_refuses():
    champ, new = _pair()
    d = gate(new, _meh(), shared_source=True, n_boot=30, random_state=1)  # 90 % against 70 %
    assert d.decision == "promoted" and d.p_better == 1.0
    assert gate(_meh(), new, shared_source=True, n_boot=30, random_state=1).decision == "kept"
    assert gate(champ, new, shared_source=True, n_boot=30, random_state=1).decision == "refused"  # one class
    first = gate(new, None)  # no champion: P(more accurate than the majority-class rule), revision 8
    assert first.decision == "promoted" and first.p_better == 1.0
    assert math.isnan(gate(new, None, first_margin=False).p_better)  # revisions 1–7: no P without a champion
    same = gate(new, new)
    assert same.decision == "kept" and "every batch row" in same.reason


def test_gate_refuses_a_one_class_model():
    y = [0] * 30 + [1] * 30
    one = _P(y, _onehot(np.array(y)), _onehot(np.r_[np.zeros(99, int), np.ones(1, int)]))  # 99 % class 0
    d = gate(one, None)
    assert d.decision == "refused" and "one class" in d.reason
    assert d.details["one_class_share"] == pytest.approx(0.99)


def test_gate_refuses_a_model_no_better_than_the_majority_rule():
    # right on 5 of 10 rows where always answering 0 is right on 6: every paired margin is −0.1
    y = np.array([0] * 6 + [1] * 4)
    pred = np.array([0, 0, 0, 1, 1, 1, 1, 1, 0, 0])  # right on rows 0–2 and 6–7: 5 of 10
    proba = _onehot(pred, conf=0.8)
    d = gate(_P(list(y), proba, proba), None, first_unsure=False)  # step 1 on the sign (revisions 1–11)
    assert d.decision == "refused" and "majority-class rule" in d.reason
    assert d.details["majority_margin"] == pytest.approx(-0.1, abs=1e-9)
    # what ships (FIRST_UNSURE): step 2 weighs it by P, refused only when P ≤ 0.1
    weighed = gate(_P(list(y), proba, proba), None, n_boot=50, random_state=0)
    assert weighed.decision == ("refused" if weighed.p_better <= 0.1 else "undecided")
    assert weighed.details["label_free_refusal"] == d.reason


@pytest.mark.heavy
def test_gate_undecided_between_the_levels():
    # two models that differ only on 6 batch rows where both are 50/50 (class 0 by a hair, class 1 by a hair):
    # nothing tells which is right there, P(new better) stays near 1/2, and the gate does not decide
    _, new = _pair()
    tie = new.proba_target.copy()
    tie[:6] = [0.5 + 1e-6, 0.5 - 1e-6]
    other = tie.copy()
    other[:6] = [0.5 - 1e-6, 0.5 + 1e-6]
    a = StoredPredictions("a", new.classes, new.y_source, new.proba_source, tie, new.folds)
    b = StoredPredictions("b", new.classes, new.y_source, new.proba_source, other, new.folds)
    d = gate(b, a, shared_source=True, n_boot=40, random_state=0)
    assert d.decision == "undecided" and 0.1 < d.p_better < 0.9 and "not sure" in d.reason


@pytest.mark.parametrize("bad", [0.5, 1.0, 0.2, 1.5])
def test_promote_confidence_outside_the_open_interval_is_refused(bad):
    champ, new = _pair()
    with pytest.raises(ValueError, match=r"promote_confidence must be in \(0.5, 1\)"):
        gate(new, champ, confidence=bad)


@pytest.mark.heavy
def test_champion_predictions_takes_the_champions_own_target_probabilities():
    champ, _ = _pair()
    rng = np.random.default_rng(3)
    Xs, Xt = rng.normal(size=(60, 2)), rng.normal(1.0, size=(40, 2))
    proba = _onehot(np.ones(40, int), conf=0.7)
    P = champion_predictions(champ, proba, Xs, Xt, random_state=0)
    assert np.array_equal(P.proba_target, proba) and np.array_equal(P.proba_source, champ.proba_source)
    assert P.weights is not None and P.weights.mean() == pytest.approx(1.0)
    # the target sits at +1 in both features: source rows there weigh more
    assert np.corrcoef(Xs.sum(axis=1), P.weights)[0, 1] > 0.5
    with pytest.raises(ValueError, match="one column per class"):
        champion_predictions(champ, proba[:, :1], Xs, Xt)
    with pytest.raises(ValueError, match="rows"):
        champion_predictions(champ, proba, Xs[:10], Xt)


def test_heldout_champion_predictions_estimate_the_champion_on_todays_rows():
    """Revision 5's champion: its own probabilities on today's source rows stand where out-of-fold predictions
    stand, on the new version's rows, labels, folds and weights. Hand-worked on 4 rows: the champion predicts
    class 1 everywhere, labels (1, 1, 0, 1), weights (1, 1, 3, 1): source accuracy 3/4, importance-weighted
    (1 + 1 + 0 + 1)/(1 + 1 + 3 + 1) = 1/2."""
    from shiftlib.estimation import point_estimate

    y = np.array([1, 1, 0, 1])
    new = StoredPredictions("new", np.array([0, 1]), y, _onehot(y, conf=0.9), _onehot(np.zeros(3, int), conf=0.8),
                            np.array([0, 1, 0, 1]), np.array([1.0, 1.0, 3.0, 1.0]))
    ps, pt = _onehot(np.ones(4, int), conf=0.6), _onehot(np.ones(3, int), conf=0.7)
    P = heldout_champion_predictions(new, ps, pt, learner="champion v1")
    assert P.learner == "champion v1"
    assert np.array_equal(P.proba_source, ps) and np.array_equal(P.proba_target, pt)
    assert np.array_equal(P.y_source, y) and np.array_equal(P.folds, new.folds)
    assert np.array_equal(P.weights, new.weights)
    assert point_estimate(P, "cv") == pytest.approx(3 / 4)
    assert point_estimate(P, "iwcv") == pytest.approx(1 / 2)
    assert point_estimate(new, "iwcv") == pytest.approx(1.0)  # the new version's own predictions are all right
    with pytest.raises(ValueError, match="source rows"):
        heldout_champion_predictions(new, ps[:3], pt, learner="c")
    with pytest.raises(ValueError, match="class columns"):
        heldout_champion_predictions(new, ps, pt[:, :1], learner="c")


def test_heldout_pair_keeps_the_rows_the_champion_never_saw():
    """Revision 5 on today's source rows new to the champion. Hand-worked on 4 rows, labels (1, 1, 0, 1), weights
    (1, 3, 1, 1), the first row seen: kept rows 2–4, weights (3, 1, 1) / (5/3) = (1.8, 0.6, 0.6) (mean 1 again);
    the champion predicts class 1 there, so its importance-weighted accuracy is (1.8 + 0 + 0.6) / 3 = 0.8, its
    plain one 2/3. Half the rows is enough, fewer is not; kept rows without a class of the source are not."""
    from shiftlib.decisions import HELDOUT_MIN_SHARE
    from shiftlib.estimation import point_estimate

    assert HELDOUT_MIN_SHARE == 0.5
    y = np.array([1, 1, 0, 1])
    new = StoredPredictions("new", np.array([0, 1]), y, _onehot(y, conf=0.9), _onehot(np.zeros(3, int), conf=0.8),
                            np.array([0, 1, 0, 1]), np.array([1.0, 3.0, 1.0, 1.0]))
    ps, pt = _onehot(np.ones(3, int), conf=0.6), _onehot(np.ones(3, int), conf=0.7)
    sub, champ = heldout_pair(new, [False, True, True, True], ps, pt)
    assert np.array_equal(sub.y_source, [1, 0, 1]) and np.array_equal(sub.folds, [1, 0, 1])
    np.testing.assert_allclose(sub.weights, [1.8, 0.6, 0.6])
    np.testing.assert_allclose(sub.proba_source, new.proba_source[1:])
    assert np.array_equal(sub.proba_target, new.proba_target)
    assert champ.learner == "champion" and np.array_equal(champ.proba_source, ps)
    assert np.array_equal(champ.y_source, sub.y_source) and np.array_equal(champ.weights, sub.weights)
    assert point_estimate(champ, "iwcv") == pytest.approx(0.8)
    assert point_estimate(champ, "cv") == pytest.approx(2 / 3)
    assert heldout_pair(new, [True, False, True, False], ps[:2], pt) is not None  # half the rows, both classes
    assert heldout_pair(new, [False, False, False, True], ps[:1], pt) is None  # a quarter
    assert heldout_pair(new, [True, True, False, False], ps[:2], pt) is None  # no row of class 0
    with pytest.raises(ValueError, match="each of the new version's 4 source rows"):
        heldout_pair(new, [True, True], ps[:2], pt)


def test_ess_share_is_kish_over_rows():
    champ, _ = _pair()
    assert ess_share(champ) == 1.0  # no weights
    w = np.r_[np.full(30, 2.0), np.zeros(30)]  # half the rows carry everything: (60)²/(30·4)/60 = 0.5
    assert ess_share(StoredPredictions("w", champ.classes, champ.y_source, champ.proba_source, champ.proba_target,
                                       champ.folds, w)) == pytest.approx(0.5)


def _weighted(P: StoredPredictions, share: float) -> StoredPredictions:
    """``P`` with weights whose Kish ESS is about ``share`` of its rows: the weight on the first share·n rows
    (1e-6 elsewhere: discriminative weights are never exactly 0)."""
    n = len(P.y_source)
    w = np.full(n, 1e-6)
    w[: int(round(share * n))] = 1.0
    return StoredPredictions(P.learner, P.classes, P.y_source, P.proba_source, P.proba_target, P.folds, w)


def _meh() -> StoredPredictions:
    """Right on 70 % of the source rows with 70 % confidence; predicts both classes on the batch."""
    champ, new = _pair()
    right = np.arange(60) % 10 < 7
    pred = np.where(right, new.y_source, 1 - new.y_source)
    t = np.r_[np.zeros(20, int), np.ones(20, int)][::-1]
    return _P(list(new.y_source), _onehot(pred, conf=0.7), _onehot(t, conf=0.7), name="meh")


@pytest.mark.heavy
def test_gate_asks_for_labels_when_only_the_new_source_reaches_the_batch():
    # a weaker new version (70 %) against a champion that looks better (90 %) but whose source the batch is told
    # apart from (domain AUC 0.97 ≥ 0.95): nothing vouches for the champion here, the new version's source does.
    # The shipped step 4 (revision 4, reports/decisions_fresh.md) asks for the pair's labels; revision 3 promoted
    _, good = _pair()
    assert UNVOUCHED_CHAMPION == "ask"
    d = gate(_meh(), good, champion_auc=0.97, new_auc=0.6, n_boot=10, random_state=0)
    assert d.decision == "undecided" and math.isnan(d.p_better)
    assert "does not reach" in d.reason and "0.970" in d.reason and "labels on the rows" in d.reason
    # "reaches" names its test, which differs from the overlap line's (helper-35 read them as contradicting)
    assert "the new version's source reaches it (the gate's domain AUC 0.600 < 0.95; the overlap line counts rows " \
           "beyond the source's range, another test)" in d.reason
    d = gate(_meh(), good, champion_auc=0.97, new_auc=0.6, unvouched="promote", n_boot=10, random_state=0)
    assert d.decision == "promoted" and d.reason.startswith("nothing vouches for the champion on this batch")
    # labels observe the batch: step 4 is skipped and the labels' difference decides (here: new is worse)
    d = gate(_meh(), good, champion_auc=0.97, new_auc=0.6, labels=(-0.2, 0.01, 40), n_boot=10, random_state=0)
    assert d.decision == "kept" and "with 40 target labels" in d.reason
    with pytest.raises(ValueError, match="unvouched must be one of"):
        gate(_meh(), good, unvouched="maybe")
    # both reach the batch: the ordinary comparison keeps the better champion
    assert gate(_meh(), good, champion_auc=0.94, new_auc=0.6, n_boot=10, random_state=0).decision == "kept"
    # neither reaches it: no promotion on the stale champion's account, the comparison decides
    assert gate(_meh(), good, champion_auc=0.97, new_auc=0.97, n_boot=10, random_state=0).decision == "kept"


@pytest.mark.heavy
def test_reach_both_makes_a_keep_the_new_source_cannot_vouch_for_undecided():
    # the champion looks better (90 % against 70 %) but neither source reaches the batch (AUC 0.97 ≥ 0.95): the
    # shipped step 5 keeps; with reach='both' the keep is as unfounded as a promotion would be, so undecided
    from shiftlib.decisions import REACH_GUARD

    _, good = _pair()
    assert REACH_GUARD == "promote"
    kept = gate(_meh(), good, champion_auc=0.97, new_auc=0.97, n_boot=10, random_state=0)
    both = gate(_meh(), good, champion_auc=0.97, new_auc=0.97, reach="both", n_boot=10, random_state=0)
    assert kept.decision == "kept" and both.decision == "undecided"
    assert both.p_better == kept.p_better <= 0.1 and "does not reach this batch (the gate's domain AUC 0.970)" in both.reason
    # where the new version's source reaches the batch, reach changes nothing
    assert gate(_meh(), good, champion_auc=0.94, new_auc=0.6, reach="both", n_boot=10,
                random_state=0).decision == "kept"
    with pytest.raises(ValueError, match="reach must be one of"):
        gate(_meh(), good, reach="sometimes")


def test_a_one_class_champion_is_questioned_and_yields_with_promote():
    champ, _ = _pair()  # predicts class 0 on every batch row
    d = gate(_meh(), champ, n_boot=10, random_state=0)
    assert d.decision == "undecided" and "nothing vouches for the champion" in d.reason and "one class" in d.reason
    d = gate(_meh(), champ, unvouched="promote", n_boot=10, random_state=0)
    assert d.decision == "promoted" and "one class" in d.reason


@pytest.mark.heavy
def test_gate_does_not_promote_a_new_version_whose_source_does_not_reach_the_batch():
    _, new = _pair()
    d = gate(new, _meh(), new_auc=0.99, shared_source=True, n_boot=30, random_state=1)
    assert d.decision == "undecided" and d.p_better >= 0.9 and "either" in d.reason


def test_a_first_version_whose_source_does_not_reach_the_batch_waits_for_labels():
    # no champion: the shipped step 2 (revision 7, FIRST_REACH) promotes only where the new version's source reaches
    # the batch; beyond it (domain AUC ≥ 0.95) its margin over the majority rule is a label-free estimate made where
    # the source has no rows, so nothing serves until labels choose the model
    from shiftlib.decisions import FIRST_REACH

    _, new = _pair()
    assert FIRST_REACH is True
    far = gate(new, None, new_auc=0.95)
    assert far.decision == "undecided" and math.isnan(far.p_better)
    assert "no champion to compare with" in far.reason and "domain AUC 0.950 ≥ 0.95" in far.reason
    assert f"({far.details['majority_margin']:+.3f})" in far.reason and far.details["new_auc"] == 0.95
    assert gate(new, None, new_auc=0.949).decision == "promoted"  # reaches it (AUC < 0.95)
    assert gate(new, None).decision == "promoted"  # reach not known
    assert gate(new, None, new_auc=0.99, target_labels=30).decision == "promoted"  # the labels chose it
    assert gate(new, None, new_auc=0.99, first_reach=False).decision == "promoted"  # revisions 1–6
    # the guards of step 1 come first: a one-class first version is refused, not left undecided
    champ, _ = _pair()
    assert gate(champ, None, new_auc=0.99).decision == "refused"


@pytest.mark.parametrize("difference, se, decision, p", [
    (0.10, 0.05, "promoted", 0.9772498680518208),  # Φ(2)
    (-0.10, 0.05, "refused", 0.022750131948179195),  # Φ(−2)
    (0.02, 0.05, "undecided", 0.6554217416103242),  # Φ(0.4)
    (0.01, 0.0, "promoted", 1.0),  # every row where the two differ labeled: the difference is exact
    (0.0, 0.0, "refused", 0.5),  # exactly as accurate as the rule on every row that matters: no better than it
    (0.0, 0.05, "undecided", 0.5),
])
def test_a_first_version_with_labels_against_the_majority_rule_is_decided_by_them(difference, se, decision, p):
    # the labels of the pair (new version, majority-class rule) alone decide, beyond the source's reach or not:
    # P = Φ(difference / se); the label-free margin (positive here) has no say
    _, new = _pair()
    d = gate(new, None, new_auc=0.99, labels=(difference, se, 40))
    assert d.decision == decision and d.p_better == pytest.approx(p, abs=1e-12)
    assert d.reason.startswith("no champion to compare with; P(more accurate than the majority-class rule on this "
                               f"batch) = {p:.2f} with 40 target labels (difference {difference:+.3f} ± {se:.3f}, one standard "
                               "error)")
    assert d.details["labels"] == 40 and d.details["prior_weight"] == 0.0
    # step 1 still comes first: a one-class first version is refused whatever the labels say
    champ, _ = _pair()
    assert gate(champ, None, labels=(0.3, 0.01, 40)).decision == "refused"


def _noisy(n_s: int = 40, n_t: int = 30, seed: int = 3) -> StoredPredictions:
    """Noisy two-class predictions with weights: a model right on about 80 % of the rows."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n_s)
    y[:3], y[3:6] = 0, 1

    def noisy(codes: np.ndarray) -> np.ndarray:
        p = np.clip(_onehot(codes, conf=0.8) + rng.normal(0, 0.1, (len(codes), 2)), 0.01, None)
        return p / p.sum(axis=1, keepdims=True)

    return StoredPredictions("m", np.array([0, 1]), y, noisy(y), noisy(rng.integers(0, 2, n_t)),
                             np.arange(n_s) % 2, rng.uniform(0.5, 1.5, n_s))


def _resampled(P: StoredPredictions, r: np.ndarray, t: np.ndarray) -> StoredPredictions:
    return StoredPredictions(P.learner, P.classes, P.y_source[r], P.proba_source[r], P.proba_target[t], P.folds[r],
                             P.weights[r])


def test_margin_draws_recompute_the_margin_on_both_sides_resampled_and_rescale_beyond_rows():
    # an independent loop over the same seed's resamples: each draw is majority_margin on the resampled source and
    # batch rows; beyond `rows` each side keeps the fraction f = 20/40 (20 source rows, 15 batch rows) and the draw
    # is the m-out-of-n bootstrap's margin + √f (draw − margin)
    P = _noisy()
    margin, draws = margin_draws(P, n_boot=5, rows=100, random_state=7)
    assert margin == majority_margin(P)
    g = np.random.default_rng(7)
    for d in draws:
        r, t = g.integers(0, 40, 40), g.integers(0, 30, 30)
        assert d == pytest.approx(majority_margin(_resampled(P, r, t)), abs=1e-12)
    _, sub = margin_draws(P, n_boot=5, rows=20, random_state=7)
    g = np.random.default_rng(7)
    for d in sub:
        r, t = g.integers(0, 40, 20), g.integers(0, 30, 15)
        assert d == pytest.approx(margin + math.sqrt(0.5) * (majority_margin(_resampled(P, r, t)) - margin), abs=1e-12)
    p, m = p_beats_rule(P, n_boot=5, rows=100, random_state=7)
    assert m == margin and p == pytest.approx(np.mean(draws > 0) + 0.5 * np.mean(draws == 0))
    with pytest.raises(ValueError, match="n_boot"):
        margin_draws(P, n_boot=1)


def _weak() -> StoredPredictions:
    """A model that answers like the majority-class rule (class 0) except on 4 of 40 source rows, right on 3 of
    them (cv: 26/40 against the rule's 24/40, a margin of +0.05), and on 3 of 30 batch rows."""
    y = np.r_[np.zeros(24, int), np.ones(16, int)]
    pred = np.zeros(40, int)
    pred[[0, 24, 25, 26]] = 1
    pred_t = np.zeros(30, int)
    pred_t[[0, 18, 19]] = 1
    return StoredPredictions("weak", np.array([0, 1]), y, _onehot(pred, conf=0.7), _onehot(pred_t, conf=0.7),
                             np.arange(40) % 2, np.r_[np.full(20, 0.8), np.full(20, 1.2)])


def test_a_first_version_within_reach_is_weighed_against_the_majority_rule():
    # revision 8 (FIRST_MARGIN): without a champion and without labels, P = p_beats_rule decides as P(better)
    # decides against a champion. A model right with 90 % confidence on every source row is surely better than the
    # rule (P = 1); the weak one's margin (+0.05) rests on 4 source rows, so P lies between the levels
    from shiftlib.decisions import FIRST_MARGIN

    assert FIRST_MARGIN is True  # what ships (reports/decisions_margin.md)
    _, sure = _pair()
    d = gate(sure, None, new_auc=0.6, n_boot=30, random_state=1)
    assert d.decision == "promoted" and d.p_better == 1.0
    assert d.reason.startswith("no champion to compare with; P(more accurate than the majority-class rule on this "
                               f"batch) = 1.00 (estimated margin {majority_margin(sure):+.3f}) ≥ 0.9")
    P = _weak()
    p, margin = p_beats_rule(P, n_boot=30, random_state=1)
    assert margin == pytest.approx(0.05) and 0.1 < p < 0.9
    d = gate(P, None, n_boot=30, random_state=1)
    assert d.decision == "undecided" and d.p_better == p
    assert d.reason.endswith("not sure it beats the rule, so nothing serves until target labels decide")
    assert gate(P, None, n_boot=30, random_state=1, first_margin=False).decision == "promoted"  # revisions 1–7
    labeled = gate(P, None, n_boot=30, random_state=1, first_margin=True, target_labels=30)
    assert labeled.decision == "promoted"  # the labels chose it
    assert gate(P, None, n_boot=30, random_state=1, first_margin=True, confidence=p - 1e-9).decision == "promoted"


@pytest.mark.heavy
def test_domain_auc_tells_separated_rows_and_not_exchangeable_ones():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(200, 3)), rng.normal(size=(200, 3))
    assert abs(domain_auc(a, b, random_state=0) - 0.5) < 0.1  # the same distribution
    assert domain_auc(a, b + 4.0, random_state=0) > 0.99  # four standard deviations apart
    with pytest.raises(ValueError, match="feature columns"):
        domain_auc(a, b[:, :2])


@pytest.mark.heavy
def test_p_better_with_labels_pools_the_label_free_difference_with_the_labels():
    # hand-checked pooling: prior difference d0 ± s0 from the same paired draws, labels −0.10 ± 0.02;
    # τ² = max(0, (d0 + 0.10)² − s0² − 0.02²), weights 1/(s0² + τ²) and 1/0.02², P = Φ(d/se)
    from statistics import NormalDist

    from shiftlib.decisions import p_better_with_labels

    champ, new = _pair()
    est_c, est_n, dc, dn = paired_draws(champ, new, "auto", shared_source=True, n_boot=30, random_state=1)
    d0, s0 = est_n - est_c, float(np.std(dn - dc, ddof=1))
    tau2 = max(0.0, (d0 + 0.10) ** 2 - s0 ** 2 - 0.02 ** 2)
    w0, wl = 1 / (s0 ** 2 + tau2), 1 / 0.02 ** 2
    d = (w0 * d0 + wl * -0.10) / (w0 + wl)
    se = math.sqrt(1 / (w0 + wl))
    p, got_d, got_se, w = p_better_with_labels(champ, new, -0.10, 0.02, shared_source=True, n_boot=30,
                                               random_state=1)
    assert d0 > 0.1 and tau2 > 0  # the label-free gate is sure new is better; the labels contradict it
    assert (got_d, got_se, w) == pytest.approx((d, se, w0 / (w0 + wl)))
    assert p == pytest.approx(NormalDist().cdf(d / se)) and p < 0.01


@pytest.mark.heavy
def test_gate_with_labels_decides_by_them_and_exact_labels_settle_it():
    champ, new = _pair()
    sure = gate(new, _meh(), shared_source=True, n_boot=30, random_state=1)
    assert sure.decision == "promoted"
    # labels that say the champion is better by 0.05 with no sampling error (every row that matters labeled)
    d = gate(new, _meh(), shared_source=True, n_boot=30, random_state=1, labels=(-0.05, 0.0, 40))
    assert d.decision == "kept" and d.p_better == 0.0 and "with 40 target labels" in d.reason
    assert d.details["difference"] == -0.05 and d.details["prior_weight"] == 0.0
    # labels as unsure as they can be leave the label-free evidence in charge
    d = gate(new, _meh(), shared_source=True, n_boot=30, random_state=1, labels=(0.0, 10.0, 3))
    assert d.decision == "promoted" and d.details["prior_weight"] > 0.99
    # labels that cannot tell the two apart (0 ± 0.05) and contradict the sure label-free difference: the prior
    # loses its weight to τ² and P sits near 1/2 — undecided, and the reason says more labels help
    tie = gate(new, _meh(), shared_source=True, n_boot=30, random_state=1, labels=(0.0, 0.05, 10))
    assert tie.decision == "undecided" and 0.4 < tie.p_better < 0.7 and tie.details["prior_weight"] < 0.1
    assert "larger label budget" in tie.reason
    # an exact tie (every disagreement row labeled, 0 ± 0): no label can move it, and the new version gains
    # nothing — kept, not undecided with advice no budget can follow (helper-30's Carseats sweep)
    exact = gate(new, _meh(), shared_source=True, n_boot=30, random_state=1, labels=(0.0, 0.0, 18))
    assert exact.decision == "kept" and exact.p_better == 0.5
    assert "every row where the two disagree is labeled and they are equally accurate" in exact.reason
    # the labels path skips the reach test: the labels observe the batch
    far = gate(new, _meh(), shared_source=True, n_boot=30, random_state=1, new_auc=0.99, labels=(0.2, 0.01, 50))
    assert far.decision == "promoted"
    # the guards still come first
    assert gate(champ, new, labels=(0.5, 0.01, 50)).decision == "refused"


def test_labels_that_place_the_new_version_at_or_below_the_majority_rule_refuse_it():
    # revision 10 (RULE_CONTENDER 'third'): the pair plan's third contender is the rule, and step 1's guard reads
    # its labels.
    # Labels that find new 0.08 ahead of the champion (which would promote: the test above) but 0.01 behind the
    # rule refuse it, whatever P; at exactly 0 (no better) too; 0.01 ahead of the rule leaves P in charge.
    _, new = _pair()
    behind = gate(new, _meh(), shared_source=True, n_boot=30, random_state=1, labels=(0.08, 0.01, 50),
                  rule_labels=(-0.01, 0.02, 50))
    assert behind.decision == "refused" and math.isnan(behind.p_better)
    assert "no more accurate than the majority-class rule" in behind.reason and "-0.010 ± 0.020" in behind.reason
    assert behind.details["rule_label_difference"] == -0.01 and behind.details["labels"] == 50
    assert behind.details["label_difference"] == 0.08  # the pair's labels too: the rule did not stand in
    assert gate(new, _meh(), shared_source=True, n_boot=30, random_state=1, labels=(0.08, 0.01, 50),
                rule_labels=(0.0, 0.0, 50)).decision == "refused"
    ahead = gate(new, _meh(), shared_source=True, n_boot=30, random_state=1, labels=(0.08, 0.01, 50),
                 rule_labels=(0.01, 0.02, 50))
    assert ahead.decision == "promoted" and ahead.details["rule_label_difference"] == 0.01


@pytest.mark.parametrize(("difference", "se", "decision", "p"), [
    (0.05, 0.02, "promoted", 0.99379033),  # Φ(2.5)
    (-0.05, 0.02, "refused", 0.00620967),  # Φ(−2.5): no better than the rule, it must not serve
    (0.01, 0.02, "undecided", 0.69146246),  # Φ(0.5)
    (0.0, 0.0, "refused", 0.5),  # every row labeled and a tie: it gains nothing over the rule
])
def test_labels_against_the_rule_in_a_one_class_champions_stead_decide_alone(difference, se, decision, p):
    # revision 11 (RULE_CONTENDER 'one_class'): the plan's rule replaced a one-class champion, so the gate has the
    # labels' new − rule and no new − champion; P = Φ(d / se) against promote_confidence, as for a first version
    _, new = _pair()
    g = gate(new, _meh(), shared_source=True, n_boot=30, random_state=1, rule_labels=(difference, se, 50))
    assert g.decision == decision and g.p_better == pytest.approx(p, abs=1e-8)
    assert g.reason.startswith("the champion predicts one class, so the labels weigh the new version against the "
                               "majority-class rule in its stead")
    assert g.details["difference"] == difference and g.details["labels"] == 50


def test_a_first_versions_labels_over_every_candidate_refuse_it_at_or_below_the_rule():
    # FIRST_RULE_LABELS: the plan over every candidate has the rule among its contenders; step 2 promotes what those
    # labels chose (target_labels) unless their new − rule is ≤ 0 (helper-36: −0.094 exactly, promoted before)
    _, new = _pair()
    assert FIRST_RULE_LABELS is True
    below = gate(new, None, target_labels=50, rule_labels=(-0.094, 0.0, 50), n_boot=30, random_state=1)
    assert below.decision == "refused" and "no more accurate than the majority-class rule" in below.reason
    assert below.details["rule_label_difference"] == -0.094
    assert gate(new, None, target_labels=50, rule_labels=(0.0, 0.01, 50)).decision == "refused"  # no better
    above = gate(new, None, target_labels=50, rule_labels=(0.02, 0.05, 50), n_boot=30, random_state=1)
    assert above.decision == "promoted" and above.details["rule_label_difference"] == 0.02
    # a pair plan's labels (labels=) still decide alone, three ways (revision 7)
    assert gate(new, None, target_labels=50, labels=(0.02, 0.05, 50)).decision == "undecided"


def test_a_first_versions_labels_against_the_rule_decide_in_place_of_the_label_free_margin():
    # FIRST_LABELS_DECIDE: a first version estimated without labels no better than the rule (_departs(3, 2):
    # 3 wrong and 2 right where it departs from the rule, margin < 0) is refused; labels that weigh it against the
    # rule decide instead (helper-36, Housing: refused at +0.000, truly 0.043 above the rule)
    from shiftlib.decisions import FIRST_LABELS_DECIDE

    assert FIRST_LABELS_DECIDE is True
    P = _departs(3, 2)
    assert majority_margin(P) < 0
    kw = {"n_boot": 30, "random_state": 1}
    bare = gate(P, None, first_unsure=False, **kw)  # revisions 1–11: refused on the sign
    assert bare.decision == "refused" and "no more accurate than the majority-class rule" in bare.reason
    # a pair plan (it and the rule): P = Φ(d / se) three ways, as for any first version
    pair = gate(P, None, target_labels=50, labels=(0.05, 0.02, 50), **kw)
    assert pair.decision == "promoted" and pair.p_better == pytest.approx(0.99379033, abs=1e-8)  # Φ(2.5)
    assert pair.details["label_free_refusal"] == bare.reason
    assert gate(P, None, target_labels=50, labels=(0.01, 0.02, 50), **kw).decision == "undecided"  # Φ(0.5)
    assert gate(P, None, target_labels=50, labels=(-0.05, 0.02, 50), **kw).decision == "refused"
    # a plan over every candidate with the rule among its contenders: refused at or below it, else promoted
    assert pair.reason.endswith(f"(without labels {bare.reason})")  # what the labels overruled stays in view
    # ... three ways by P = Φ(d / se) where they overrule the label-free refusal: Φ(2.5) promotes, Φ(1) does not
    over = gate(P, None, target_labels=50, rule_labels=(0.05, 0.02, 50), **kw)
    assert over.decision == "promoted" and over.p_better == pytest.approx(0.99379033, abs=1e-8)
    assert over.reason.endswith(f"(without labels {bare.reason})")
    assert gate(P, None, target_labels=50, rule_labels=(0.02, 0.02, 50), **kw).decision == "undecided"
    # above the rule by the labels of a plan over every candidate, and not refused without them: promoted on the sign
    fine = gate(_pair()[1], None, target_labels=50, rule_labels=(0.03, 0.02, 50), **kw)
    assert fine.decision == "promoted" and fine.reason == (
        "no champion to compare with; with 50 target labels it is estimated more accurate than the majority-class "
        "rule (difference +0.030 ± 0.020, one standard error)")
    low = gate(P, None, target_labels=50, rule_labels=(-0.02, 0.02, 50), **kw)
    assert low.decision == "refused" and "with 50 target labels" in low.reason
    # a one-class version is refused whatever the labels say (item 1), and so is one beside a champion
    champ, sure = _pair()
    assert gate(champ, None, target_labels=50, labels=(0.3, 0.01, 50), **kw).decision == "refused"
    assert "label_free_refusal" not in gate(champ, None, target_labels=50, labels=(0.3, 0.01, 50), **kw).details
    assert gate(P, sure, shared_source=True, labels=(0.3, 0.01, 50), **kw).decision == "refused"


def test_first_unsure_weighs_a_first_versions_nonpositive_margin_by_p_instead_of_its_sign():
    # revision 12 (FIRST_UNSURE): _departs(3, 2) is estimated below the rule (margin < 0) but not surely
    # (0.1 < P < 0.9, the revision-9 test above): undecided, as a margin as unsure above 0 is (revision 8), and the
    # pair's labels decide; surely below (_departs(10, 0), P = 0) it is refused, by P; beyond reach undecided
    from shiftlib.decisions import FIRST_UNSURE

    assert FIRST_UNSURE is True  # adopted by reports/decisions_first_unsure.md's rule
    kw = {"n_boot": 30, "random_state": 1}
    P = _departs(3, 2)
    p, margin = p_beats_rule(P, **kw)
    assert margin < 0 and 0.1 < p < 0.9
    assert gate(P, None, first_unsure=False, **kw).decision == "refused"  # revisions 1–11
    asked = gate(P, None, **kw)
    assert asked.decision == "undecided" and asked.details["label_free_refusal"].startswith(
        "it is estimated no more accurate than the majority-class rule")
    assert f"P(more accurate than the majority-class rule on this batch) = {p:.2f}" in asked.reason
    sure_no = gate(_departs(10, 0), None, first_unsure=True, **kw)
    assert sure_no.decision == "refused" and "= 0.00" in sure_no.reason
    assert gate(P, None, first_unsure=True, new_auc=0.97, **kw).decision == "undecided"  # beyond reach
    assert gate(P, None, first_unsure=True, first_margin=False, **kw).decision == "refused"  # needs step 2's P
    champ, _ = _pair()  # predicts one class: refused whatever
    assert gate(champ, None, first_unsure=True, **kw).decision == "refused"


def test_p_is_printed_with_four_decimals_where_two_would_round_it_onto_a_threshold():
    # helper-37 read "P = 0.90 … still not sure" for P = 0.8967 against promote_confidence 0.9
    from shiftlib.decisions import _p_words

    assert _p_words(0.8967, 0.9) == "0.8967" and _p_words(0.1033, 0.9) == "0.1033"
    assert _p_words(0.9, 0.9) == "0.90" and _p_words(0.884, 0.9) == "0.88" and _p_words(0.5, 0.9) == "0.50"
    assert _p_words(0.9497, 0.95) == "0.9497" and _p_words(0.8967, 0.95) == "0.90"


def test_unseen_level_rows_flag_target_levels_no_source_row_has():
    # by hand: column g has source levels {a, b}; target rows 'c' (unseen), None (missing: not a level), 'a';
    # column h compares as text, so 1 and "1" are one level, 3 is unseen; a column only one table has is skipped
    import pandas as pd

    from shiftlib.decisions import outside_rows, unseen_level_rows, unseen_levels

    src = pd.DataFrame({"g": ["a", "b", "a"], "h": [1, 2, 2]})
    tgt = pd.DataFrame({"g": ["c", None, "a", "a"], "h": ["1", 2, 2, 3], "only": [0, 0, 0, 0]})
    assert unseen_level_rows(src, tgt, ["g", "h", "only"]).tolist() == [True, False, False, True]
    assert unseen_level_rows(src, tgt, []).tolist() == [False] * 4
    # the same from an encoder's levels (no source table at hand)
    assert unseen_levels(tgt, {"g": ["a", "b"], "h": [1, 2], "absent": ["x"]}).tolist() == [True, False, False, True]
    # outside_rows: above the 0.99 quantile of the source scores 0 … 1 (0.99)
    assert outside_rows(np.linspace(0, 1, 101), [0.5, 0.995, 2.0]).tolist() == [False, True, True]
    # an encoder's cap of 2 levels: column g (2 levels) is at it, so its 'c' is not read as new; h (1 level) is read
    assert unseen_levels(tgt, {"g": ["a", "b"], "h": [2]}, max_levels=2).tolist() == [True, False, False, True]
    # overlap_shares: rows 2, 3 beyond, rows 0, 3 unseen → union 3 of 4, unseen 2 of 4; none scored: (0, 0)
    from shiftlib.decisions import overlap_shares

    assert overlap_shares(np.linspace(0, 1, 101), [0.5, 0.6, 2.0, 3.0], [True, False, False, True]) == (0.75, 0.5)
    assert overlap_shares(np.linspace(0, 1, 101), [0.5, 2.0]) == (0.5, 0.0)
    assert overlap_shares(np.linspace(0, 1, 101), []) == (0.0, 0.0)


def test_what_ships_puts_the_rule_in_place_of_a_one_class_champion_only():
    # revision 10 was not adopted by its rule (reports/decisions_rule.md); revision 11 was (decisions_rule11.md)
    assert RULE_CONTENDERS == ("never", "third", "one_class") and RULE_CONTENDER == "one_class"


def _departs(wrong: int, right: int) -> StoredPredictions:
    """A model that answers like the majority-class rule on ``_pair``'s source except on ``wrong`` rows of the
    rule's class (wrong there) and ``right`` rows of the other class (right there); on the batch it departs on
    5 of 40 rows."""
    _, sure = _pair()
    y = sure.y_source
    c = int(np.bincount(y).argmax())
    pred = np.full(len(y), c)
    pred[np.flatnonzero(y == c)[:wrong]] = 1 - c
    pred[np.flatnonzero(y != c)[:right]] = 1 - c
    pred_t = np.full(40, c)
    pred_t[[0, 18, 19, 25, 30]] = 1 - c
    return StoredPredictions("departs", np.array([0, 1]), y, _onehot(pred, conf=0.7), _onehot(pred_t, conf=0.7),
                             sure.folds)


@pytest.mark.heavy
def test_unsure_margin_ask_lets_the_pairs_labels_decide_a_refusal_it_is_not_sure_of():
    # revision 9 (UNSURE_MARGIN = 'ask'): a new version estimated no better than the rule (3 wrong and 2 right where
    # it departs from it: margin < 0) but not surely so (0.1 < P < 0.9), beside a champion that beats the rule,
    # is undecided, and labels of the pair decide as in step 5; revision 5 ('refuse') refuses it whatever they say
    from shiftlib.decisions import UNSURE_MARGIN

    assert UNSURE_MARGIN == "refuse"  # what ships until reports/decisions_unsure.md's rule adopts 'ask'
    champ, sure = _pair()
    P = _departs(3, 2)
    p, margin = p_beats_rule(P, n_boot=30, random_state=1)
    assert margin < 0 and 0.1 < p < 0.9
    kw = {"n_boot": 30, "random_state": 1, "shared_source": True}
    for labels in (None, (0.1, 0.01, 50)):
        assert gate(P, sure, labels=labels, **kw).decision == "refused"
    asked = gate(P, sure, unsure_margin="ask", **kw)
    assert asked.decision == "undecided" and asked.details["p_beats_rule"] == p
    assert f"P(more accurate than the rule on this batch) = {p:.2f}: not sure" in asked.reason
    better = gate(P, sure, unsure_margin="ask", labels=(0.1, 0.01, 50), **kw)
    assert better.decision == "promoted" and better.p_better == 1.0
    assert "without labels it was estimated no more accurate than the majority-class rule" in better.reason
    assert gate(P, sure, unsure_margin="ask", labels=(-0.1, 0.01, 50), **kw).decision == "kept"
    # a champion that does not beat the rule itself (it predicts one class) vouches for nothing: refused
    assert gate(P, champ, unsure_margin="ask", labels=(0.1, 0.01, 50), **kw).decision == "refused"
    # surely no better (10 wrong departures, P = 0): refused, and the reason gives P
    worse = _departs(10, 0)
    sure_no = gate(worse, sure, unsure_margin="ask", labels=(0.1, 0.01, 50), **kw)
    assert sure_no.decision == "refused" and sure_no.details["p_beats_rule"] == 0.0
    assert sure_no.reason.endswith("P(more accurate than the rule on this batch) = 0.00 ≤ 0.1")
    # a one-class new version is refused before P is read
    assert "p_beats_rule" not in gate(champ, sure, unsure_margin="ask", **kw).details
    with pytest.raises(ValueError, match="unsure_margin"):
        gate(P, sure, unsure_margin="maybe")


def test_refusal_stands_for_one_class_always_and_for_the_margin_unless_asked():
    y = [0] * 30 + [1] * 30
    one = gate(_P(y, _onehot(np.array(y)), _onehot(np.r_[np.zeros(99, int), np.ones(1, int)])), None,
               first_margin=False)
    assert refusal_stands(one) and refusal_stands(one, "ask")
    y10 = np.array([0] * 6 + [1] * 4)
    proba = _onehot(np.array([0, 0, 0, 1, 1, 1, 1, 1, 0, 0]), conf=0.8)  # margin −0.1 (as above)
    low = gate(_P(list(y10), proba, proba), None, first_margin=False)
    assert refusal_stands(low, "refuse") and not refusal_stands(low, "ask")
    assert not refusal_stands(gate(_pair()[1], None, first_margin=False))  # promoted: nothing to stand


def test_the_gate_says_when_nothing_vouches_for_the_champion_it_leaves_serving():
    # details["champion_unvouched"]: step 4's guards on the champion, recorded whatever step decides, so a refused
    # or kept new version does not leave an unchecked champion serving in silence
    champ, sure = _pair()
    y = [0] * 30 + [1] * 30
    one = _P(y, _onehot(np.array(y)), _onehot(np.zeros(40, int)))  # one class on the batch: refused at step 1
    d = gate(one, champ, n_boot=30, random_state=1)
    assert d.decision == "refused" and "predicts one class for 100.0% of the batch" in d.details["champion_unvouched"]
    assert gate(one, sure, n_boot=30, random_state=1).details["champion_unvouched"] is None
    # whether the pair plan puts the majority-class rule in the champion's place (RULE_CONTENDER 'one_class')
    assert d.details["champion_one_class"] is True
    assert gate(one, sure, n_boot=30, random_state=1).details["champion_one_class"] is False
    from shiftlib.decisions import refused_beside

    assert refused_beside(gate(one, None), champ, champion_auc=None, new_auc=None).details["champion_one_class"]
    far = gate(one, sure, champion_auc=0.97, n_boot=30, random_state=1)
    assert far.details["champion_unvouched"] == "its source does not reach this batch (the gate's domain AUC 0.970 ≥ 0.95)"
    assert unvouched_reason(sure, 0.97) == far.details["champion_unvouched"] and unvouched_reason(sure, 0.94) is None
    assert "champion_unvouched" not in gate(one, None).details  # no champion: nothing serves on


def test_where_the_rule_joins_a_pair_plan_and_which_class_it_predicts():
    # rule_class: the source's largest class, the lowest code on a tie; rule_placement, worked by hand: beside a
    # champion some contender disagrees with ('third'), in place of one that predicts one class on ≥ 99 % ('one_class')
    from shiftlib.decisions import rule_class, rule_placement, rule_ties

    assert rule_class([1, 1, 0, 2, 1], 3) == 1 and rule_class([0, 1, 1, 0], 2) == 0 and rule_class([2, 2], 4) == 2
    assert rule_ties([1, 1, 0, 2, 1], 3) == [1] and rule_ties([0, 1, 1, 0], 2) == [0, 1]
    assert rule_ties([2, 0, 2, 0, 1], 4) == [0, 2] and rule_ties([2, 2], 4) == [2]  # counts 2, 1, 2, 0
    champ, new = np.array([1] * 99 + [0]), np.array([0] * 100)
    assert rule_placement("third", champ, [new]) == "beside" and rule_placement("third", champ, [champ]) is None
    assert rule_placement("one_class", champ, [new]) == "instead"  # 99 of 100 rows: one class
    assert rule_placement("one_class", np.array([1] * 98 + [0, 0]), [new]) is None  # 98 %
    assert rule_placement("never", champ, [new]) is None
    with pytest.raises(ValueError, match="mode must be one of"):
        rule_placement("first", champ, [new])
