"""flows.score: the lines ``shiftflow score`` prints and the Prefect artifact shows (``summary_lines``), worked by
hand from a summary and a ``shiftlib.monitoring.BatchMonitor``. The flow itself (``score_batch``) runs end to end
in ``test_score_cli.py`` (slow)."""

from __future__ import annotations

import dataclasses

import pytest

from flows.score import summary_lines
from shiftlib.decisions import OverlapVerdict
from shiftlib.monitoring import BatchMonitor

OVERLAP = OverlapVerdict(verdict="ok", reasons=[], domain_auc=0.61, ess_share=0.8, outside_share=0.02)
MONITOR = BatchMonitor(accuracy=0.75, ci_low=0.7, ci_high=0.8, confidence=0.95, method="iwcv", overlap=OVERLAP,
                       drifted=True, drift_pvalue=0.00123, majority_baseline=0.6, alert="ok", n_rows=300)
SUMMARY = {"model": "pima", "version": "3", "rows": 332, "out": "/tmp/scores.parquet", "scored_seconds": 1.24,
           "predicted": {"No": 220, "Yes": 112}, "monitor": MONITOR}


def test_a_batch_with_an_estimate() -> None:
    assert summary_lines(SUMMARY) == [
        "scored 332 rows with pima v3 in 1.2 s → /tmp/scores.parquet",
        "predicted: No 220, Yes 112",
        "estimated accuracy on this batch: 0.750 [0.700, 0.800] (iwcv, 95% interval, 300 rows); majority-class "
        "rule 0.600",
        "drift against the version's training source: yes (p = 0.00123)",
        OVERLAP.sentence(),
    ]


def test_a_champion_that_predicts_one_class_is_named() -> None:
    # Salaries (helper-30's sweep): "predicted: AssocProf 132" beside an estimate of 1.000 whose truth was 0.045
    lines = summary_lines(SUMMARY | {"predicted": {"AssocProf": 131, "Prof": 1}, "rows": 132})
    assert lines[2] == ("note: v3 predicts 'AssocProf' for 99% of this batch: its accuracy is that class's share of "
                        "the batch, which no label-free estimate can tell; label some rows, or retrain (`shiftflow "
                        "retrain --label-budget`)")
    assert not any(s.startswith("note") for s in summary_lines(SUMMARY | {"predicted": {"No": 328, "Yes": 4}}))  # 98.8 %


def test_without_evidence_there_is_no_estimate() -> None:
    lines = summary_lines(SUMMARY | {"monitor": None})
    assert lines[2:] == ["no accuracy estimate: the version keeps no evidence for one (see the run's log)"]


@pytest.mark.parametrize(("alert", "first", "last"), [
    ("below", "ALERT (accuracy): v3's estimated accuracy on this batch is at most 0.800, below min_accuracy",
     OVERLAP.sentence()),
    ("straddles", "scored 332 rows with pima v3 in 1.2 s → /tmp/scores.parquet",
     "min_accuracy lies inside the interval: the model may be below it; label some rows to know"),
], ids=["below", "straddles"])
def test_the_alert_leads_and_a_straddling_interval_asks_for_labels(alert: str, first: str, last: str) -> None:
    mon = dataclasses.replace(MONITOR, alert=alert, drifted=False, drift_pvalue=0.4)
    lines = summary_lines(SUMMARY | {"monitor": mon})
    assert (lines[0], lines[-1]) == (first, last)
    assert "drift against the version's training source: no (p = 0.4)" in lines
    assert len(lines) == 6  # one line more than without an alert
