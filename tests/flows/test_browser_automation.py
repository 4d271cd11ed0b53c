"""The automation prefect.yaml carries (issue 29): a ``score-batch`` run whose champion is surely below its
``min_accuracy`` emits ``shiftflow.alert.accuracy``, and the deployment trigger on ``retrain-nightly`` starts a
retrain, which the Prefect UI lists under retrain-nightly's runs.

On the package's stack (``shiftflow up``): a short ``retrain-nightly`` run gives ``shiftflow-pima`` a champion,
``score-batch`` scores Pima.te with ``min_accuracy`` 0.99 (above any interval the champion gets there), and the
test waits for the run the automation creates, shows it in the UI, then cancels it to leave the stack idle."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from flows.stack import PREFECT_WORKER
from tests.flows.conftest import prefect_rest
from tests.flows.test_browser import browser_page, require_chromium
from tests.flows.test_labels_suspend import wait_state

pytestmark = pytest.mark.slow
RUN_TIMEOUT_S = 900
TRIGGER_TIMEOUT_S = 180  # the event reaches the trigger within seconds; the worker may be busy


def _run(client: Any, deployment: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    fr = client.post(f"/deployments/{deployment['id']}/create_flow_run",
                     json={"parameters": {"config": config}}).raise_for_status().json()
    return wait_state(client, fr["id"], {"COMPLETED"}, RUN_TIMEOUT_S)


def test_a_scoring_alert_starts_retrain_nightly_and_the_prefect_ui_shows_it(stack: dict[str, Any],
                                                                            tmp_path: Path) -> None:
    require_chromium()
    from mlflow.tracking import MlflowClient

    worker_log = Path(stack["record"]["services"][PREFECT_WORKER]["log"])
    with prefect_rest(stack["prefect_api"]) as client:
        nightly = client.get("/deployments/name/retrain/retrain-nightly").raise_for_status().json()
        scoring = client.get("/deployments/name/score/score-batch").raise_for_status().json()
        model = scoring["parameters"]["config"]["model"]
        assert model == nightly["parameters"]["config"]["model_name"]  # the trigger's model is the one scored
        # LR: its first version is surely better than the majority-class rule here (P 0.97 by the CLI on this config),
        # so the gate promotes it (revision 8); NB's margin (+0.027, P 0.70) leaves it undecided and nothing serves
        quick = nightly["parameters"]["config"] | {"learners": ["LR"], "weighting": "none", "cv_folds": 3,
                                                   "experiment": "automation-e2e"}
        fr = _run(client, nightly, quick)
        assert fr["state"]["type"] == "COMPLETED", f"{fr['state']}\n{worker_log.read_text()[-3000:]}"

        t_score = time.monotonic()
        sc = _run(client, scoring, scoring["parameters"]["config"] | {
            "min_accuracy": 0.99, "out": f"file:{tmp_path / 'scores.parquet'}"})
        assert sc["state"]["type"] == "COMPLETED", f"{sc['state']}\n{worker_log.read_text()[-3000:]}"
        assert (tmp_path / "scores.parquet").exists()
        triggered = None
        deadline = time.monotonic() + TRIGGER_TIMEOUT_S
        while triggered is None and time.monotonic() < deadline:
            runs = client.post("/flow_runs/filter", json={"deployments": {"id": {"any_": [nightly["id"]]}},
                                                         "limit": 200}).raise_for_status().json()
            automated = [r for r in runs if (r.get("created_by") or {}).get("type") == "AUTOMATION"
                         and r["created"] > sc["created"]]  # ISO-8601 UTC stamps compare as text
            triggered = automated[0] if automated else None
            if triggered is None:
                time.sleep(2)
        t_triggered = time.monotonic() - t_score
        assert triggered is not None, "no retrain-nightly run created by the automation after the score alert"
        assert triggered["parameters"]["config"]["model_name"] == model  # retrain-nightly's own parameters

    ml = MlflowClient(stack["mlflow"])
    (srun,) = ml.search_runs([ml.get_experiment_by_name("shiftflow-score").experiment_id],
                             filter_string=f"tags.`prefect.flow_run_id` = '{sc['id']}'")
    assert srun.data.tags["shiftflow.alert"] == "accuracy" and srun.data.metrics["estimate.ci_high"] < 0.99

    try:
        with browser_page(tmp_path, "automation", failure_shot="99-failure") as (page, shot, times, notes):
            times["score run Completed → automation's retrain-nightly run listed (API)"] = t_triggered
            t0 = time.monotonic()
            page.goto(f"{stack['prefect_url']}/deployments/deployment/{nightly['id']}?tab=Runs", wait_until="load")
            page.get_by_text(triggered["name"], exact=True).first.wait_for()
            times["Prefect UI: retrain-nightly's Runs tab shows the triggered run"] = time.monotonic() - t0
            shot(page, "01-retrain-nightly-runs")
            page.goto(f"{stack['prefect_url']}/runs/flow-run/{triggered['id']}", wait_until="load")
            page.get_by_text(triggered["name"], exact=True).first.wait_for()
            shot(page, "02-triggered-flow-run")
            notes.append(f"score run {sc['name']} → automation → retrain-nightly run {triggered['name']}")
    finally:
        with prefect_rest(stack["prefect_api"]) as client:  # leave the worker idle for the tests after this one
            client.post(f"/flow_runs/{triggered['id']}/set_state",
                        json={"state": {"type": "CANCELLING"}, "force": True})
            wait_state(client, triggered["id"], {"CANCELLED"}, 300)
