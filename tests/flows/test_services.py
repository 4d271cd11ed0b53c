"""``shiftflow up`` / ``shiftflow down`` on the running stack (slow). ``down`` against dummy processes is tested in
``stack/test_stack.py``, the stop signals in ``stack/test_procs.py``.

Slow (``-m slow``): the real stack (``stack`` fixture, ``conftest.py``: free ports, a temp ``SHIFTFLOW_HOME``
with its own ``PREFECT_HOME``, shared with the package's other slow tests); ``retrain-nightly`` triggered
through the Prefect REST API with non-default parameters, its MLflow runs read back from the tracking
server, then ``down``. The server URLs go only to the child processes and the HTTP clients this module
makes (no environment leaks into other tests).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from flows.stack import (
    MLFLOW_SERVER,
    PREFECT_SERVER,
    PREFECT_WORKER,
    RECORD_NAME,
    healthy,
    is_alive,
    port_free,
    read_record,
)
from tests.flows.conftest import prefect_rest
from tests.flows.conftest import shiftflow_cli as _cli

# --------------------------------------------------------------------------------------------- slow

RUN_TIMEOUT_S = 600  # a shared, loaded 2-core box: seen ~100 s for one LR+NB run, servers up to ~110 s
# seed 2: the first version is surely better than the majority-class rule (P 1.00 by the CLI on this configuration),
# so the gate promotes it (revision 8; seed 3 gave P 0.84: undecided, nothing serves)
CONFIG = {"learners": ["LR", "NB"], "seed": 2, "cv_folds": 3, "experiment": "services-e2e"}


@pytest.mark.slow
def test_up_starts_three_services_and_is_idempotent(stack: dict[str, Any]) -> None:
    record = stack["record"]
    assert set(record["services"]) == {PREFECT_SERVER, MLFLOW_SERVER, PREFECT_WORKER}
    for e in record["services"].values():
        assert is_alive(e["pid"], e["start_time"]) and Path(e["log"]).is_file()
    assert healthy(f"{stack['prefect_api']}/health") and healthy(f"{stack['mlflow']}/health")
    assert "open http://127.0.0.1:" in stack["up"].stdout

    again = _cli(["up", "--prefect-port", str(stack["prefect_port"]), "--mlflow-port", str(stack["mlflow_port"])],
                 stack["env"], timeout_s=300)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("already running") == 3
    assert read_record(stack["home"] / RECORD_NAME)["services"] == record["services"]  # nothing restarted


def _wait_flow_run(client: Any, flow_run_id: str, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        fr = client.get(f"/flow_runs/{flow_run_id}").raise_for_status().json()
        if fr["state"]["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
            return fr
        if time.monotonic() > deadline:
            return fr
        time.sleep(2)


def _trigger(stack: dict[str, Any], deployment_id: str, config: dict[str, Any]) -> str:
    """Start a run of the deployment through the REST API with these parameters; wait until it completes."""

    with prefect_rest(stack["prefect_api"]) as client:
        created = client.post(f"/deployments/{deployment_id}/create_flow_run",
                              json={"parameters": {"config": config}}).raise_for_status().json()
        t0 = time.monotonic()
        fr = _wait_flow_run(client, created["id"], RUN_TIMEOUT_S)
        print(f"\n[retrain-nightly] {fr['state']['type']} after {time.monotonic() - t0:.1f} s")
    worker_log = Path(stack["record"]["services"][PREFECT_WORKER]["log"])
    assert fr["state"]["type"] == "COMPLETED", (
        f"flow run {created['id']} ended {fr['state']['type']}: {fr['state'].get('message')}\n"
        f"worker log tail:\n{worker_log.read_text()[-3000:]}")
    return str(created["id"])


@pytest.mark.slow
def test_retrain_nightly_runs_on_the_worker_and_logs_to_the_mlflow_server(stack: dict[str, Any]) -> None:
    from mlflow.tracking import MlflowClient

    # no tracking_uri: the run must log to the worker's $MLFLOW_TRACKING_URI (what a UI-started run does)
    config = CONFIG | {"run_root": str(stack["root"] / "runs")}
    with prefect_rest(stack["prefect_api"]) as client:
        dep = client.get("/deployments/name/retrain/retrain-nightly").raise_for_status().json()
    assert dep["parameters"]["config"]["seed"] == 0  # prefect.yaml's defaults; we override them below
    created = {"id": _trigger(stack, dep["id"], config)}

    ml = MlflowClient(stack["mlflow"])
    exp = ml.get_experiment_by_name(CONFIG["experiment"])
    assert exp is not None, "no 'services-e2e' experiment on the MLflow server"
    runs = ml.search_runs([exp.experiment_id], filter_string=f"tags.`prefect.flow_run_id` = '{created['id']}'")
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    assert parent.data.params["seed"] == "2" and json.loads(parent.data.params["learners"].replace("'", '"')) == [
        "LR", "NB"]
    nested = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    # one nested run per candidate: LR and NB unweighted, plus LR+w / NB+w when the flow adds weighted ones
    assert {"LR", "NB"} <= {r.info.run_name for r in nested}
    assert {r.data.params["learner"] for r in nested} == {"LR", "NB"}
    for r in nested:
        assert r.data.params["seed"] == "2" and r.data.params["cv_folds"] == "3", r.info.run_name
        assert "training.cv_accuracy" in r.data.metrics
    # registry: the first run of a deployment has no incumbent, so its model is the champion; the parent run
    # names the version it registered, and the alias points at a model logged by this flow run
    assert parent.data.tags["champion.decision"] == "champion", parent.data.tags.get("champion.reason")
    model_name, version = parent.data.tags["champion.registered_model"].rsplit(" v", 1)
    champ = ml.get_model_version_by_alias(model_name, "champion")
    assert champ.version == version
    assert champ.run_id in {r.info.run_id for r in runs}
    assert ml.get_registered_model(model_name).aliases == {"champion": version}

    # the same parameters again: every stage is reused, so the served model, its data digests and the code
    # are the same: no new version is registered and the champion stays (tasks/champion.py)
    again_id = _trigger(stack, dep["id"], config)
    (again,) = [r for r in ml.search_runs([exp.experiment_id],
                                          filter_string=f"tags.`prefect.flow_run_id` = '{again_id}'")
                if "mlflow.parentRunId" not in r.data.tags]
    assert again.data.tags["champion.decision"] == "unchanged", again.data.tags.get("champion.reason")
    assert again.data.tags["champion.new_version"] == "false"
    assert again.data.tags["champion.registered_model"] == f"{model_name} v{version}"
    assert {k: str(v) for k, v in ml.get_registered_model(model_name).aliases.items()} == {"champion": version}


@pytest.mark.slow
def test_a_cli_run_and_a_deployment_run_share_one_store(stack: dict[str, Any]) -> None:
    """Issue 29: `up`'s MLflow server serves the store CLI runs write to ($SHIFTFLOW_HOME/mlflow.db, artifacts in
    $SHIFTFLOW_HOME/mlartifacts) and its worker's runs keep their stages in the CLI's run root: with no flag, a
    CLI run and a deployment run are side by side on the server, and each one's artifacts read from the other."""
    from mlflow.tracking import MlflowClient

    # the deployment run, parameters without run_root or tracking_uri (what a UI-started run does)
    with prefect_rest(stack["prefect_api"]) as client:
        dep = client.get("/deployments/name/retrain/retrain-nightly").raise_for_status().json()
    config = CONFIG | {"experiment": "one-store", "model_name": "one-store-deployment", "learners": ["NB"]}
    dep_run = _trigger(stack, dep["id"], config)
    # the CLI run from the same shell: no --tracking-uri, no --run-root, no server URL in its environment
    res = _cli(["retrain", "--learners", "NB", "--cv-folds", "3", "--experiment", "one-store",
                "--model-name", "one-store-cli"], stack["env"], timeout_s=900)
    assert res.returncode == 0, res.stderr[-2000:]

    ml = MlflowClient(stack["mlflow"])
    exp = ml.get_experiment_by_name("one-store")
    parents = [r for r in ml.search_runs([exp.experiment_id]) if "mlflow.parentRunId" not in r.data.tags]
    by_flow = {r.data.tags["prefect.flow_run_id"]: r for r in parents}
    assert dep_run in by_flow and len(by_flow) == 2, sorted(by_flow)
    cli_parent = next(r for k, r in by_flow.items() if k != dep_run)
    run_dirs = {Path(r.data.tags["shiftflow.run_dir"]).parent for r in parents}
    assert run_dirs == {(stack["home"] / "runs").resolve()}  # one run root
    assert exp.artifact_location.startswith("file://")  # a file location either side can read
    for r in parents:  # each run's chart, read through the server
        assert "history/accuracy_over_time.png" in [a.path for a in ml.list_artifacts(r.info.run_id, "history")]
    local = MlflowClient(f"sqlite:///{(stack['home'] / 'mlflow.db').resolve()}")  # what `evaluate` reads
    assert local.get_run(by_flow[dep_run].info.run_id).info.status == "FINISHED"
    assert local.get_run(cli_parent.info.run_id).data.tags["champion.registered_model"].startswith("one-store-cli")


def _create_run(client: Any, deployment_id: str, config: dict[str, Any]) -> str:
    """Create a deployment run (``client`` from ``prefect_rest`` retries the server's transient 503)."""
    url = f"/deployments/{deployment_id}/create_flow_run"
    return str(client.post(url, json={"parameters": {"config": config}}).raise_for_status().json()["id"])


def _failure_report(client: Any, flow_run_id: str) -> str:
    """A failed run's state message and the tail of its Prefect logs (what CI must print to be diagnosable)."""
    fr = client.get(f"/flow_runs/{flow_run_id}").raise_for_status().json()
    logs = client.post("/logs/filter", json={"logs": {"flow_run_id": {"any_": [flow_run_id]}},
                                             "sort": "TIMESTAMP_ASC", "limit": 200}).raise_for_status().json()
    lines = "\n".join(f"{rec['level']} {rec['message']}" for rec in logs)
    return f"flow run {flow_run_id} ended {fr['state']['type']}: {fr['state'].get('message')}\n{lines[-4000:]}"


@pytest.mark.slow
def test_eight_concurrent_deployment_runs_leave_one_champion_and_ordered_versions(stack: dict[str, Any]) -> None:
    # 8 runs triggered at once through the REST API on one store (issue 31): the work pool runs at most its limit
    # (2) at a time, all complete with their MLflow logging, every stage file matches its manifest, and the
    # registry lock (tasks/locks.py) makes each decision see the previous one: one champion alias on a version a
    # decision logged, versions 1..n with no gap
    from mlflow.tracking import MlflowClient

    from tasks.store import MANIFEST, StageStore

    name = "shiftflow-concurrency-e2e"
    seeds = tuple(range(11, 19))
    configs = [CONFIG | {"experiment": "concurrency-e2e", "model_name": name, "seed": s,
                         "run_root": str(stack["root"] / "runs-concurrent")} for s in seeds]
    with prefect_rest(stack["prefect_api"]) as client:
        dep = client.get("/deployments/name/retrain/retrain-nightly").raise_for_status().json()
        ids = [_create_run(client, dep["id"], c) for c in configs]
        most_running, deadline = 0, time.monotonic() + len(seeds) * RUN_TIMEOUT_S
        while time.monotonic() < deadline:
            states = [client.get(f"/flow_runs/{i}").raise_for_status().json()["state"]["type"] for i in ids]
            most_running = max(most_running, states.count("RUNNING"))
            if all(s in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") for s in states):
                break
            time.sleep(1)
        failed = {i: _failure_report(client, i) for i, s in zip(ids, states, strict=True) if s != "COMPLETED"}
    assert not failed, "\n\n".join(failed.values())
    assert 1 <= most_running <= 2  # the work pool's concurrency limit (shiftflow up --pool-concurrency 2)

    ml = MlflowClient(stack["mlflow"])
    exp = ml.get_experiment_by_name("concurrency-e2e")
    for i in ids:  # every run kept its MLflow logging: a finished parent with its nested candidate runs
        runs = ml.search_runs([exp.experiment_id], filter_string=f"tags.`prefect.flow_run_id` = '{i}'")
        (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
        assert parent.info.status == "FINISHED" and "champion.decision" in parent.data.tags
        assert {r.info.run_name for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id} >= {
            "LR", "NB"}
    versions = sorted(int(v.version) for v in ml.search_model_versions(f"name = '{name}'"))
    assert versions == list(range(1, len(versions) + 1)) and len(versions) >= 1
    aliases = ml.get_registered_model(name).aliases
    assert "champion" in aliases and list(aliases).count("champion") == 1
    champ = ml.get_model_version(name, str(aliases["champion"]))
    assert champ.tags.get("shiftflow.decision") in ("promoted", "kept"), champ.tags  # a decision put it there
    root = stack["root"] / "runs-concurrent"
    stages = sorted(root.glob(f"*/*/{MANIFEST}"))
    assert stages and all(StageStore(root, m.parent.parent.name).verify(m.parent) is not None for m in stages)
    # the decisions were serialized: exactly one run was promoted without an incumbent (the first promotion; runs
    # before it that found no champion were left undecided or refused, revision 8)
    firsts = [r for r in ml.search_runs([exp.experiment_id], filter_string="tags.`champion.decision` = 'champion'")
              if r.data.tags["champion.reason"].startswith("no champion to compare with")]
    assert len(firsts) == 1


@pytest.mark.slow
def test_down_stops_every_recorded_process(stack: dict[str, Any]) -> None:
    services = stack["record"]["services"]
    res = _cli(["down"], stack["env"], timeout_s=300)
    assert res.returncode == 0, res.stderr
    for name, e in services.items():
        assert not is_alive(e["pid"], e["start_time"]), f"{name} (pid {e['pid']}) still runs after down"
        assert not any(is_alive(int(p.name)) for p in Path("/proc").iterdir()
                       if p.name.isdigit() and _pgid(int(p.name)) == e["pgid"]), f"{name}'s group survived"
    assert not (stack["home"] / RECORD_NAME).exists()
    assert port_free(stack["prefect_port"]) and port_free(stack["mlflow_port"])


def _pgid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rfind(")") + 2:].split()[2])
