"""shiftlib.monitoring: a served version's label-free estimate, drift and overlap on a batch it scores.

Checked against: the served model's accuracy on the batch's own labels (held back from the monitor), the
pieces it composes computed independently (``champion_predictions`` → ``estimate_from_predictions`` →
``widen_for_overlap``), and the alert rule applied to the interval (the rule itself, by hand: test_decisions.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from shiftlib.decisions import accuracy_alert, champion_predictions, majority_baseline, widen_for_overlap
from shiftlib.estimation import estimate_from_predictions, stored_predictions
from shiftlib.monitoring import MONITOR_ROWS, monitor_batch, monitor_rows


def _table(n: int, shift: float, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2)) + np.array([shift, 0.0])
    y = (X[:, 0] - 0.5 * X[:, 1] + rng.normal(scale=0.8, size=n) > 0).astype(int)
    return pd.DataFrame(X, columns=["a", "b"]), y


def _served(shift: float) -> tuple:
    X_s, y_s = _table(400, 0.0, 1)
    X_t, y_t = _table(300, shift, 2)
    (P,) = stored_predictions(["LR"], X_s, y_s, X_t, k=5, random_state=0)
    return P, X_s, X_t, y_t


@pytest.fixture(scope="module")
def no_shift() -> tuple:
    P, X_s, X_t, y_t = _served(0.0)
    return P, X_s, X_t, y_t, monitor_batch(P, P.proba_target, X_s, X_t, random_state=0)


@pytest.mark.heavy
def test_without_shift_the_interval_holds_the_batchs_true_accuracy_and_nothing_is_flagged(no_shift):
    P, X_s, X_t, y_t, mon = no_shift
    truth = float(np.mean(P.proba_target.argmax(axis=1) == y_t))  # the batch's own labels, never shown to it
    assert mon.ci_low <= truth <= mon.ci_high, (mon, truth)
    assert mon.overlap.verdict == "ok" and not mon.drifted and mon.alert == ""
    assert mon.n_rows == len(X_t)
    # the composition, computed piece by piece: the served version's predictions weighted for the batch,
    # then the shipped estimator (method "auto") with no widening under good overlap, and the majority rule
    weighted = champion_predictions(P, P.proba_target, X_s, X_t, random_state=0)
    est = estimate_from_predictions(weighted, "auto", random_state=0)
    assert mon.majority_baseline == majority_baseline(weighted)
    assert (mon.accuracy, mon.ci_low, mon.ci_high, mon.method) == (est.accuracy, est.ci_low, est.ci_high,
                                                                    est.method)


@pytest.mark.heavy
def test_a_batch_beyond_the_source_is_flagged_and_its_interval_widened_to_what_the_source_cannot_rule_out():
    P, X_s, X_t, _ = _served(5.0)
    mon = monitor_batch(P, P.proba_target, X_s, X_t, min_accuracy=0.99, random_state=0)
    assert mon.drifted and mon.drift_pvalue <= 0.05
    assert mon.overlap.verdict == "poor" and mon.overlap.outside_share > 0.5
    est = estimate_from_predictions(champion_predictions(P, P.proba_target, X_s, X_t, random_state=0), "auto",
                                    random_state=0)
    assert (mon.ci_low, mon.ci_high) == pytest.approx(widen_for_overlap(est.ci_low, est.ci_high,
                                                                        mon.overlap.outside_share))
    assert mon.ci_high - mon.ci_low > est.ci_high - est.ci_low
    assert mon.alert == accuracy_alert(mon.ci_low, mon.ci_high, 0.99)


@pytest.mark.heavy
def test_batch_rows_with_levels_the_source_never_had_count_beyond_its_reach(no_shift):
    """helper-37's hpc_data: a batch of protocols the served model's source lacked was read as mostly within
    reach. With a third of the rows flagged unseen (``shiftlib.decisions.unseen_levels``) on a batch the source
    otherwise reaches, the verdict is poor with at least that share beyond, and the interval is widened by it."""
    P, X_s, X_t, _, base = no_shift
    unseen = np.arange(len(X_t)) % 3 == 0
    mon = monitor_batch(P, P.proba_target, X_s, X_t, random_state=0, unseen=unseen)
    assert mon.overlap.verdict == "poor" and mon.overlap.unseen_share == pytest.approx(unseen.mean())
    assert mon.overlap.outside_share >= unseen.mean()
    assert (mon.ci_low, mon.ci_high) == pytest.approx(widen_for_overlap(base.ci_low, base.ci_high,
                                                                        mon.overlap.outside_share))


@pytest.mark.heavy
def test_the_alert_compares_the_threshold_with_the_interval(no_shift):
    P, X_s, X_t, _, base = no_shift
    assert monitor_batch(P, P.proba_target, X_s, X_t, min_accuracy=base.ci_high + 0.01,
                         random_state=0).alert == "below"


@pytest.mark.heavy
def test_metrics_carry_the_retrain_parent_runs_names(no_shift):
    mon = no_shift[-1]
    m = mon.metrics()
    assert {"estimate.accuracy", "estimate.ci_low", "estimate.ci_high", "estimate.majority_baseline",
            "drift.drifted", "drift.domain_auc"} <= set(m)
    assert (m["estimate.accuracy"], m["estimate.ci_low"], m["estimate.ci_high"]) == (mon.accuracy, mon.ci_low,
                                                                                     mon.ci_high)
    assert m["drift.drifted"] == float(mon.drifted) and m["drift.domain_auc"] == mon.overlap.domain_auc
    assert m["monitor.rows"] == len(no_shift[2])


def test_monitor_rows_takes_every_row_up_to_the_cap_then_a_seeded_sorted_sample():
    assert np.array_equal(monitor_rows(10), np.arange(10))
    a = monitor_rows(3 * MONITOR_ROWS, random_state=4)
    assert len(a) == MONITOR_ROWS and np.all(np.diff(a) > 0)
    assert np.array_equal(a, monitor_rows(3 * MONITOR_ROWS, random_state=4))
    assert np.array_equal(monitor_rows(500, max_rows=None), np.arange(500))


@pytest.mark.heavy
def test_probabilities_of_the_wrong_shape_are_refused(no_shift):
    P, X_s, X_t, _, _ = no_shift
    with pytest.raises(ValueError, match="one column per class"):
        monitor_batch(P, P.proba_target[:, :1], X_s, X_t)


def _label_shifted() -> tuple:
    """p(x | y) fixed (two Gaussians 1.5 apart), class 1 on 30 % of the source and 75 % of the batch."""
    rng = np.random.default_rng(7)

    def draw(n: int, share: float) -> tuple[pd.DataFrame, np.ndarray]:
        y = (rng.random(n) < share).astype(int)
        X = rng.normal(size=(n, 2)) + np.outer(y, [1.5, 0.0])
        return pd.DataFrame(X, columns=["a", "b"]), y

    X_s, y_s = draw(600, 0.3)
    X_t, _ = draw(400, 0.75)
    (P,) = stored_predictions(["LR"], X_s, y_s, X_t, k=5, random_state=0)
    return P, X_s, X_t


@pytest.mark.heavy
def test_the_shift_regime_is_reported_as_the_retrain_flow_computes_it(no_shift):
    """The monitor's regime is ``shift_regime`` on its own drift test's out-of-fold domain scores, the stored
    source labels of the rows it scored and the EM prior (recomputed here piece by piece); a batch far beyond
    the source is covariate shift, a batch whose class shares alone moved is label shift."""
    from shiftlib.drift import detect_drift
    from shiftlib.estimation import label_shift_prior
    from shiftlib.regime import shift_regime

    P, X_s, X_t, _, mon = no_shift
    drift = detect_drift(X_s, X_t, alpha=0.05, random_state=0)
    sc = drift.row_scores
    src = sc[sc["side"] == "source"]
    weighted = champion_predictions(P, P.proba_target, X_s, X_t, random_state=0)
    expected = shift_regime(src["target_score"], sc.loc[sc["side"] == "target", "target_score"],
                            P.y_source[src["row"].to_numpy()], label_shift_prior(weighted, "em"),
                            domain_pvalue=drift.domain_pvalue, alpha=0.05)
    assert mon.regime == expected
    P5, X_s5, X_t5, _ = _served(5.0)
    assert monitor_batch(P5, P5.proba_target, X_s5, X_t5, random_state=0).regime.regime == "covariate"
    Pl, X_sl, X_tl = _label_shifted()
    label = monitor_batch(Pl, Pl.proba_target, X_sl, X_tl, random_state=0).regime
    assert label.regime == "label" and label.domain_pvalue < 0.05, label
