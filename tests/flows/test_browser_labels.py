"""The label budget's human step in a real browser (slow): resume a suspended run from the Prefect UI.

With the stack up (``stack`` fixture, ``conftest.py``), a ``retrain-nightly`` run with a ``label_budget`` is
created through the REST API and waited for (REST, not sleeps) until it is Suspended after the labels
stage. The test then does what a person does: fills ``labels/to_label.csv`` (here from the held-out target
labels the example ships, ``ingest/target_labels.parquet``), opens the flow run's page in the Prefect UI
in Debian's Chromium (Playwright with ``executable_path``; never ``playwright install``), clicks
**Resume**, types the filled file's path into the resume form (``tasks.labels.FilledLabels``, rendered by
Prefect's resume modal as a schema form) and submits it. The run must then complete with ``fewlabel`` as
the deciding selector — checked in the stage store's Parquet and in MLflow (tags, metrics and the digest
of the very file typed into the form), not only in what the UI shows.

Screenshots go to a temp folder and, when ``SHIFTFLOW_SCREENSHOTS`` names a folder, are copied there.
"""

from __future__ import annotations

import hashlib
import json
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from flows.stack import PREFECT_WORKER
from tests.flows.conftest import prefect_rest
from tests.flows.test_browser import _flow_run_state, browser_page, require_chromium
from tests.flows.test_labels_suspend import start_suspended_run, wait_state

pytestmark = pytest.mark.slow
RUN_TIMEOUT_S = 900  # one LR+NB run has taken 70-150 s under load on the shared 2-core box
BUDGET = 20
CONFIG = {"learners": ["LR", "NB"], "seed": 3, "cv_folds": 3, "experiment": "browser-labels",
          "model_name": "shiftflow-browser-labels", "label_budget": BUDGET}


def _fill_from_held_out(run_dir: Path, out: Path) -> tuple[int, str]:
    """Fill every requested row of ``to_label.csv`` with its held-out label from ingest's
    ``target_labels.parquet`` (``_row`` → ``_label``, the class's code: position in the manifest's
    ``classes``), written as the class a person would write; returns (rows filled, the label column)."""
    todo = pd.read_csv(run_dir / "labels" / "to_label.csv")
    empty = [c for c in todo.columns if c != "_row" and todo[c].isna().all()]
    assert len(empty) == 1, f"to_label.csv should have exactly one empty (label) column; empty: {empty}"
    classes = json.loads((run_dir / "ingest" / "manifest.json").read_text())["extra"]["classes"]
    truth = pd.read_parquet(run_dir / "ingest" / "target_labels.parquet").set_index("_row")["_label"]
    assert set(todo["_row"]) <= set(truth.index), "to_label.csv asks for rows the target does not have"
    todo[empty[0]] = todo["_row"].map(truth).map(lambda code: classes[int(code)])
    todo.to_csv(out, index=False)
    return len(todo), empty[0]


def test_suspended_run_resumes_from_prefect_ui_with_filled_labels(stack: dict[str, Any], tmp_path: Path) -> None:
    require_chromium()
    from mlflow.tracking import MlflowClient

    config = CONFIG | {"run_root": str(stack["root"] / "runs-browser-labels")}
    worker_log = Path(stack["record"]["services"][PREFECT_WORKER]["log"])
    client = prefect_rest(stack["prefect_api"])
    fr_id, fr = start_suspended_run(client, stack, config)
    assert fr["state"]["state_details"].get("run_input_keyset"), "suspended without an input form"
    run_dir = Path(config["run_root"]) / fr_id
    assert not (run_dir / "selection").exists()  # nothing past the labels stage ran
    filled = stack["root"] / "filled-browser.csv"
    n_filled, label_col = _fill_from_held_out(run_dir, filled)
    assert n_filled == BUDGET

    with closing(client), browser_page(tmp_path, "browser-labels", failure_shot="labels-99-failure") as (
            page, shot, times, _):
        # ---- the suspended run's page: its state badge and the Resume button
        t0 = time.monotonic()
        page.goto(f"{stack['prefect_url']}/runs/flow-run/{fr_id}", wait_until="load")
        page.locator(".page-heading-flow-run .state-badge").first.wait_for()
        assert _flow_run_state(page) == "Suspended", _flow_run_state(page)
        resume = page.get_by_role("button", name="Resume")
        resume.first.wait_for()
        times["Prefect UI: suspended flow run page"] = time.monotonic() - t0
        shot(page, "labels-01-prefect-suspended")

        # ---- the resume modal: FilledLabels as a form, prefilled with the file to fill
        resume.first.click()
        modal = page.locator(".p-modal").filter(has_text="Resume Flow Run")
        modal.wait_for()
        field = modal.locator("textarea, input[type=text], input:not([type])").first
        field.wait_for()
        prefilled = field.input_value()
        assert prefilled.endswith("to_label.csv"), f"the form should offer the file to fill; shows {prefilled!r}"
        field.fill(str(filled))
        shot(page, "labels-02-prefect-resume-form")
        t_submit = time.monotonic()
        modal.get_by_role("button", name="Submit", exact=True).click()
        modal.wait_for(state="hidden")

        # ---- REST: the run leaves Suspended and completes; then the UI must show it
        fr = wait_state(client, fr_id, {"COMPLETED"}, RUN_TIMEOUT_S)
        times["Resume submitted → Completed (REST)"] = time.monotonic() - t_submit
        assert fr["state"]["type"] == "COMPLETED", (
            f"{fr['state']}\nworker log tail:\n{worker_log.read_text()[-3000:]}")
        page.reload(wait_until="load")
        badge = page.locator(".page-heading-flow-run .state-badge").first
        badge.wait_for()
        deadline = time.monotonic() + 120
        while _flow_run_state(page) != "Completed" and time.monotonic() < deadline:
            page.wait_for_timeout(1000)  # the page refreshes its state itself
        assert _flow_run_state(page) == "Completed", _flow_run_state(page)
        shot(page, "labels-03-prefect-completed")

    # ---- what the resumed run did, from the stage store and MLflow (not the UI's text)
    scores = pd.read_parquet(run_dir / "selection" / "scores.parquet")
    fewlabel = scores[scores["selector"] == "fewlabel"].sort_values(["rank", "learner"])
    assert set(fewlabel["learner"]) >= set(CONFIG["learners"])
    ml = MlflowClient(stack["mlflow"])
    exp = ml.get_experiment_by_name(CONFIG["experiment"])
    parents = [r for r in ml.search_runs([exp.experiment_id], filter_string=f"tags.`prefect.flow_run_id` = '{fr_id}'")
               if "mlflow.parentRunId" not in r.data.tags]
    done = [r for r in parents if r.info.status == "FINISHED"]
    assert len(done) == 1, [(r.info.run_id, r.info.status) for r in parents]
    tags, metrics = done[0].data.tags, done[0].data.metrics
    assert tags["shiftflow.selector"] == "fewlabel"
    assert tags["shiftflow.selected_learner"] == fewlabel.iloc[0]["learner"]
    # the file typed into the UI's form is the one the labels stage read: its SHA-256 is on the run
    assert tags["labels.labels_sha256"] == hashlib.sha256(filled.read_bytes()).hexdigest()
    assert metrics["labels.n_filled"] == BUDGET and metrics["labels.n_empty"] == 0
    print(f"[browser-labels] flow run {fr_id}: label column {label_col!r}, fewlabel picks "
          f"{tags['shiftflow.selected_learner']}")
