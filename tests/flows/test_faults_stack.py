"""Faults injected into the running stack, on real servers this module starts itself on free 127.0.0.1 ports
(never the package's shared ``stack`` fixture): the MLflow server SIGKILLed mid-run (a CLI run), a full disk
(file-size limit) during a stage write, the worker and the Prefect server SIGKILLed mid-deployment-run (a
``shiftflow up`` of the test's own). What each shows is written up in ``reports/faults.md``.

Every process a test starts runs in its own session and is SIGKILLed (its whole group) in the test's teardown.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flows.paths import PROJECT_DIR
from flows.stack import free_port, healthy

RUN_TIMEOUT_S = 1200  # one small run on a loaded, shared 2-core box: ~100-300 s; a failing one waits on retries
START_TIMEOUT_S = 300  # mlflow server: ~6 s idle, over a minute when the box is busy


# --------------------------------------------------------------------------------------------- helpers


class Procs:
    """The processes a test started (each in its own session); ``kill_all`` SIGKILLs their groups."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[Any]] = []

    def start(self, cmd: list[str], env: dict[str, str], log: Path, cwd: Path = PROJECT_DIR,
              **kw: Any) -> subprocess.Popen[Any]:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as f:
            p = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                 start_new_session=True, **kw)
        self.procs.append(p)
        return p

    @staticmethod
    def kill(p: subprocess.Popen[Any]) -> None:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # its session's group: uvicorn under mlflow server too
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass

    def kill_all(self) -> None:
        for p in self.procs:
            self.kill(p)


@pytest.fixture
def procs() -> Iterator[Procs]:
    ps = Procs()
    try:
        yield ps
    finally:
        ps.kill_all()


def _env(tmp: Path) -> dict[str, str]:
    """Minimal environment of a child: no server URLs inherited, its own Prefect and shiftflow homes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "MLFLOW_"))}
    env |= {"PREFECT_HOME": str(tmp / "prefect-home"), "SHIFTFLOW_HOME": str(tmp / "home"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "true"}
    return env


def start_mlflow(procs: Procs, tmp: Path, port: int, log: Path) -> subprocess.Popen[Any]:
    """``mlflow server`` as ``shiftflow up`` runs it (sqlite backend, local artifacts, no job runner), on ``port``;
    returns once ``/health`` answers."""
    server = tmp / "mlflow-server"
    server.mkdir(parents=True, exist_ok=True)
    env = _env(tmp) | {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    cmd = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
           "--backend-store-uri", f"sqlite:///{server / 'mlflow.db'}",
           "--artifacts-destination", str(server / "mlartifacts")]
    p = procs.start(cmd, env, log, cwd=server)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not healthy(f"http://127.0.0.1:{port}/health"):
        assert p.poll() is None, f"mlflow server exited ({p.returncode}):\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"mlflow server not up in {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}"
        time.sleep(0.5)
    return p


def retrain_cmd(run_root: Path, tracking_uri: str) -> list[str]:
    return [sys.executable, "-m", "flows.cli", "retrain", "--learners", "LR", "--cv-folds", "3", "--run-root",
            str(run_root), "--tracking-uri", tracking_uri, "--experiment", "faults"]


def wait_exit(p: subprocess.Popen[Any], timeout_s: float) -> int:
    try:
        return p.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        Procs.kill(p)
        raise AssertionError(f"pid {p.pid} did not end within {timeout_s:.0f} s") from None


def wait_for(pred: Any, p: subprocess.Popen[Any], timeout_s: float, what: str) -> None:
    """Poll ``pred()`` until true; fails if ``p`` ends first or time runs out."""
    deadline = time.monotonic() + timeout_s
    while not pred():
        assert p.poll() is None, f"the run ended (exit {p.returncode}) before {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout_s:.0f} s"
        time.sleep(0.2)


def check_run_root(run_root: Path) -> dict[str, int]:
    """Every stage file a manifest lists matches its SHA-256 (``StageStore.verify``), every Parquet file under the
    root reads with pyarrow, and no temp file is left; returns counts."""
    import pyarrow.parquet as pq

    from tasks.store import MANIFEST, StageStore, sha256_file

    manifests = sorted(run_root.rglob(MANIFEST))
    for m in manifests:
        entry = json.loads(m.read_text())
        bad = [n for n, e in entry.get("files", {}).items()
               if not (m.parent / n).exists() or sha256_file(m.parent / n) != e["sha256"]]
        assert not bad, f"{m.parent}: {bad} do not match the manifest"
        if m.parent.parent.parent == run_root:  # a stage folder (not a training part): verify as the flow does
            assert StageStore(run_root, m.parent.parent.name).verify(m.parent) is not None, m.parent
    parquets = sorted(run_root.rglob("*.parquet"))
    for p in parquets:
        pq.read_table(p)
    tmps = sorted(str(p) for p in run_root.rglob("*.tmp"))
    assert not tmps, f"temp files left: {tmps}"
    return {"manifests": len(manifests), "parquet": len(parquets)}


def code_changed(run_root: Path) -> bool:
    """True when the runs under ``run_root`` ran different code (``code_version`` of their ingest manifests): a
    stage is reused only by the code that made it. On a shared machine others edit ``tasks/`` or ``shiftlib/``
    between two runs of one test; in CI the code never changes, so the reuse checks below always apply there."""
    from tasks.store import stage_manifests

    versions = {json.loads(m.read_text())["code_version"] for m in stage_manifests(run_root, "ingest")}
    if len(versions) > 1:
        print(f"[note] the code changed between the runs ({sorted(versions)}): stages cannot be reused; reuse not checked")
    return len(versions) > 1


def tail(path: Path, n: int = 12) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:])


# --------------------------------------------------------------------------------------------- MLflow killed


def _new_run_dir(run_root: Path, before: set[Path]) -> Path | None:
    new = [d for d in run_root.glob("*") if d.is_dir() and d not in before]
    return new[0] if new else None


@pytest.mark.slow
def test_mlflow_server_sigkilled_mid_run_then_restarted_run_resumes(tmp_path: Path, procs: Procs) -> None:
    """1. The server SIGKILLed once the training stage is written, and left down: the run ends with one sentence
    naming the server (MLflow's HTTP retries shortened to 3 here: by default they wait about 4 minutes per call).
    2. Restarted on the same port and store, the same command again, with the server SIGKILLed once more mid-run
    and restarted 2 s later: MLflow's default HTTP retries carry the run through; it reuses the finished stages,
    and every stage file under the root matches its manifest."""
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    run_root = tmp_path / "runs"
    mlflow_log = tmp_path / "logs" / "mlflow.log"
    server = start_mlflow(procs, tmp_path, port, mlflow_log)

    out1 = tmp_path / "logs" / "run1.log"
    t0 = time.monotonic()
    run = procs.start(retrain_cmd(run_root, uri), _env(tmp_path) | {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "3"}, out1)
    wait_for(lambda: any(run_root.glob("*/training/manifest.json")), run, RUN_TIMEOUT_S, "training stage")
    t_kill = time.monotonic()
    n_before = len(out1.read_text(errors="replace").splitlines())
    Procs.kill(server)  # SIGKILL, the whole group (mlflow's CLI and its uvicorn worker)
    assert not healthy(f"{uri}/health")
    code = wait_exit(run, RUN_TIMEOUT_S)
    t_end = time.monotonic()
    lines = out1.read_text(errors="replace").splitlines()
    print(f"\n[killed run] exit {code}, {t_kill - t0:.1f} s to the kill, ended {t_end - t_kill:.1f} s after it; "
          f"{len(lines) - n_before} lines after the kill; "
          f"{sum(line.startswith('Traceback') for line in lines)} tracebacks; last lines:\n" + "\n".join(lines[-25:]))
    assert code == 1
    assert lines[-1].startswith(f"shiftflow: error: MLflow tracking server at {uri} stopped answering"), lines[-1]
    assert "internal error" not in "\n".join(lines)
    print(f"[killed run] run root after the kill: {check_run_root(run_root)}")

    # the same server again (same port, same sqlite backend and artifacts), the same command again
    start_mlflow(procs, tmp_path, port, mlflow_log)
    before = {d for d in run_root.glob("*") if d.is_dir()}
    out2 = tmp_path / "logs" / "run2.log"
    t1 = time.monotonic()
    rerun = procs.start(retrain_cmd(run_root, uri), _env(tmp_path), out2)
    # a second SIGKILL once the rerun computes past the reused stages; back 2 s later
    wait_for(lambda: (d := _new_run_dir(run_root, before)) is not None and (d / "selection").is_dir(), rerun,
             RUN_TIMEOUT_S, "selection stage in the rerun")
    Procs.kill(procs.procs[-2])
    t_down = time.monotonic()
    time.sleep(2)
    start_mlflow(procs, tmp_path, port, mlflow_log)
    print(f"[rerun] mlflow server down for {time.monotonic() - t_down:.1f} s")
    code2 = wait_exit(rerun, RUN_TIMEOUT_S)
    text2 = out2.read_text(errors="replace")
    print(f"[rerun] exit {code2} in {time.monotonic() - t1:.1f} s; "
          f"{text2.count('Retrying (Retry(')} MLflow HTTP retries logged; last lines:\n{tail(out2, 20)}")
    assert code2 == 0, tail(out2, 60)
    if not code_changed(run_root):
        reused = next(line for line in text2.splitlines() if "reused stages:" in line)
        assert "ingest" in reused and "training" in reused, reused
    print(f"[rerun] run root: {check_run_root(run_root)}")

    from mlflow.tracking import MlflowClient

    ml = MlflowClient(uri)
    exp = ml.get_experiment_by_name("faults")
    parents = [r for r in ml.search_runs([exp.experiment_id]) if "mlflow.parentRunId" not in r.data.tags]
    print("[mlflow] parent runs: " + ", ".join(f"{r.info.run_name} {r.info.status}" for r in parents))
    assert sorted(r.info.status for r in parents) == ["FINISHED", "RUNNING"]  # the first one was never closed


# --------------------------------------------------------------------------------------------- disk full

_DISK_FULL_SCRIPT = """
import json, os, resource, signal, sys
import numpy as np, pandas as pd
from tasks.store import StageStore, sha256_file

store = StageStore(sys.argv[1], "run-1")
old = {"a": pd.DataFrame({"x": range(10)}), "b": pd.DataFrame({"y": [0.5] * 10})}
before = store.write_stage("weights", old, key="k1", params={}, inputs={}, files={"summary.json": b"{}"})
# a full disk: files may not grow past 256 KiB; SIGXFSZ ignored, so a write past it fails with EFBIG
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
big = pd.DataFrame(np.random.default_rng(0).random((200_000, 5)), columns=list("abcde"))
out = {}
for stage, tables in (("weights", {"a": pd.DataFrame({"x": range(20)}), "b": big}), ("selection", {"scores": big})):
    try:
        store.write_stage(stage, tables, key="k2", params={}, inputs={})
        out[stage] = None
    except OSError as exc:
        out[stage] = {"type": type(exc).__name__, "errno": exc.errno, "message": str(exc)}
out["manifest_kept"] = store.manifest("weights") == before
out["verified"] = store.verify(store.stage_dir("weights")) is not None
out["a_rows"] = len(store.read_table("weights", "a"))
out["files"] = sorted(str(p.relative_to(store.run_dir)) for p in store.run_dir.rglob("*"))
print(json.dumps(out))
"""


@pytest.mark.slow
def test_disk_full_during_a_stage_write_keeps_the_previous_stage(tmp_path: Path) -> None:
    """A stage rewritten (a second table over the file-size limit) and a new stage, each failing with EFBIG: one
    sentence naming the file, the previous files and manifest as they were, no temp file, no new stage."""
    res = subprocess.run([sys.executable, "-c", _DISK_FULL_SCRIPT, str(tmp_path / "runs")], cwd=PROJECT_DIR,
                         env=_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    print(f"\n[disk full] {json.dumps(out, indent=1)}")
    for stage, name in (("weights", "b"), ("selection", "scores")):
        err = out[stage]
        assert err is not None and err["type"] == "StageWriteError" and err["errno"] == 27, err
        assert err["message"].startswith(f"cannot write {tmp_path / 'runs' / 'run-1' / stage / name}.parquet: "
                                         "File too large"), err
        assert "\n" not in err["message"]
    assert out["manifest_kept"] and out["verified"] and out["a_rows"] == 10  # the first table was not replaced
    assert out["files"] == ["selection", "weights", "weights/a.parquet", "weights/b.parquet",
                            "weights/manifest.json", "weights/summary.json"]  # no temp file, no new stage


# --------------------------------------------------------------------------------------------- worker killed

DEPLOY_CONFIG = {"learners": ["LR"], "selectors": ["scv"], "selector": "scv", "cv_folds": 3, "selection_folds": 5,
                 "seed": 5, "experiment": "faults-worker", "model_name": "shiftflow-faults-worker"}
FINAL = ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")


@pytest.fixture
def own_stack(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """``shiftflow up`` in this test's own ``SHIFTFLOW_HOME`` and ``PREFECT_HOME``, on free ports (as
    ``conftest._stack``, but not shared); ``shiftflow down`` and any flow-run process the test noted in teardown."""
    from tests.flows.conftest import shiftflow_cli

    prefect_port, mlflow_port = free_port(), free_port()
    while mlflow_port == prefect_port:
        mlflow_port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "PREFECT_PROFILE")}
    env |= {"SHIFTFLOW_HOME": str(tmp_path / "home"), "PREFECT_HOME": str(tmp_path / "prefect-home"),
            "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(tmp_path / "prefect-results"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "true"}
    info: dict[str, Any] = {"env": env, "home": tmp_path / "home", "root": tmp_path, "orphans": {},
                            "up_args": ["up", "--prefect-port", str(prefect_port), "--mlflow-port", str(mlflow_port),
                                        "--timeout", "600"],
                            "prefect_api": f"http://127.0.0.1:{prefect_port}/api",
                            "mlflow": f"http://127.0.0.1:{mlflow_port}"}
    try:
        res = shiftflow_cli(info["up_args"], env, timeout_s=1800)
        assert res.returncode == 0, f"shiftflow up failed:\n{res.stdout}\n{res.stderr}"
        yield info
    finally:
        from flows.stack import RECORD_NAME, is_alive

        if (info["home"] / RECORD_NAME).exists():
            res = shiftflow_cli(["down"], env, timeout_s=300)
            print(f"\n[shiftflow down] {res.stdout}\n{res.stderr}")
        for pid, start in info["orphans"].items():  # flow-run processes the killed worker left behind
            if is_alive(pid, start):
                os.kill(pid, signal.SIGKILL)


def _flow_run(client: Any, flow_run_id: str) -> dict[str, Any]:
    return client.get(f"/flow_runs/{flow_run_id}").raise_for_status().json()


def _running_past_ingest(client: Any, config: dict[str, Any], run_root: Path) -> tuple[dict[str, Any], str]:
    """Create a ``retrain-nightly`` run of ``config``, wait until it is Running and has written its ingest
    stage; returns the deployment and the flow-run id."""
    dep = client.get("/deployments/name/retrain/retrain-nightly").raise_for_status().json()
    first = client.post(f"/deployments/{dep['id']}/create_flow_run",
                        json={"parameters": {"config": config}}).raise_for_status().json()["id"]
    fr = _wait_state(client, first, ("RUNNING", *FINAL), RUN_TIMEOUT_S)
    assert fr["state"]["type"] == "RUNNING", fr["state"]
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not (run_root / str(first) / "ingest" / "manifest.json").exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    return dep, str(first)


def _wait_state(client: Any, flow_run_id: str, states: tuple[str, ...], timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        fr = _flow_run(client, flow_run_id)
        if fr["state"]["type"] in states or time.monotonic() > deadline:
            return fr
        time.sleep(1)


@pytest.mark.slow
def test_worker_sigkilled_mid_deployment_run(own_stack: dict[str, Any]) -> None:
    """The worker SIGKILLed (its whole process group) while a deployment run it started is Running: the run is
    marked Crashed at once (not left Running); ``shiftflow up`` starts the worker again (the servers are "already
    running") and the next run completes, reusing the stages the crashed run finished."""

    from flows.stack import PREFECT_WORKER, RECORD_NAME, process_tree, read_record
    from tests.flows.conftest import prefect_rest, shiftflow_cli

    config = DEPLOY_CONFIG | {"run_root": str(own_stack["root"] / "runs")}
    worker = read_record(own_stack["home"] / RECORD_NAME)["services"][PREFECT_WORKER]
    with prefect_rest(own_stack["prefect_api"]) as client:
        dep, first = _running_past_ingest(client, config, own_stack["root"] / "runs")
        tree = process_tree(worker["pid"], worker["pgid"])
        own_stack["orphans"] = {p: s for p, s in tree.items() if p != worker["pid"]}
        os.killpg(worker["pgid"], signal.SIGKILL)
        t_kill = time.monotonic()
        fr = _wait_state(client, first, FINAL, RUN_TIMEOUT_S)
        from flows.stack import is_alive

        alive = [p for p, st in own_stack["orphans"].items() if is_alive(p, st)]
        print(f"\n[worker killed] flow run {first}: {fr['state']['type']} {time.monotonic() - t_kill:.1f} s after the "
              f"kill: {fr['state'].get('message')!r}; {len(own_stack['orphans'])} processes under the worker at the "
              f"kill (pgids {sorted({os.getpgid(p) for p in alive}) if alive else '-'}), {len(alive)} still alive")
        assert fr["state"]["type"] == "CRASHED", fr["state"]  # at once, not Running forever

        again = shiftflow_cli(own_stack["up_args"], own_stack["env"], timeout_s=1800)
        print(f"[shiftflow up again] {again.stdout}")
        assert again.returncode == 0, again.stderr
        assert again.stdout.count("already running") == 2 and f"{PREFECT_WORKER}: started" in again.stdout
        second = client.post(f"/deployments/{dep['id']}/create_flow_run",
                             json={"parameters": {"config": config}}).raise_for_status().json()["id"]
        fr2 = _wait_state(client, second, FINAL, RUN_TIMEOUT_S)
        assert fr2["state"]["type"] == "COMPLETED", fr2["state"]
    from mlflow.tracking import MlflowClient

    ml = MlflowClient(own_stack["mlflow"])
    exp = ml.get_experiment_by_name("faults-worker")
    (parent,) = [r for r in ml.search_runs([exp.experiment_id], filter_string=f"tags.`prefect.flow_run_id` = '{second}'")
                 if "mlflow.parentRunId" not in r.data.tags]
    print(f"[second run] reused stages: {parent.data.tags.get('shiftflow.reused_stages')}; "
          f"decision {parent.data.tags.get('champion.decision')}")
    if not code_changed(own_stack["root"] / "runs"):
        assert "ingest" in parent.data.tags["shiftflow.reused_stages"].split(",")
    assert check_run_root(own_stack["root"] / "runs")["manifests"] > 0


@pytest.mark.slow
def test_prefect_server_sigkilled_mid_deployment_run(own_stack: dict[str, Any]) -> None:
    """The Prefect server SIGKILLed (its group) once a deployment run has written its ingest stage: the flow-run
    process waits (its API calls retry) and the run stays Running in the database while the server is down;
    ``shiftflow up`` starts the server again (MLflow and the worker "already running"), and the run then ends
    within minutes, not Running forever (seen: Completed after a one-minute outage, the process carrying on;
    Crashed, "Flow run infrastructure exited with non-zero status code 1", after a five-minute one); the next
    run completes, reusing the stages the first one finished."""

    from flows.stack import PREFECT_SERVER, PREFECT_WORKER, RECORD_NAME, is_alive, process_tree, read_record
    from tests.flows.conftest import prefect_rest, shiftflow_cli

    config = DEPLOY_CONFIG | {"run_root": str(own_stack["root"] / "runs"), "experiment": "faults-server",
                              "model_name": "shiftflow-faults-server"}
    services = read_record(own_stack["home"] / RECORD_NAME)["services"]
    server, worker = services[PREFECT_SERVER], services[PREFECT_WORKER]
    with prefect_rest(own_stack["prefect_api"]) as client:
        dep, first = _running_past_ingest(client, config, own_stack["root"] / "runs")
        run_dir = own_stack["root"] / "runs" / first
        tree = process_tree(worker["pid"], worker["pgid"])
        own_stack["orphans"] = {p: s for p, s in tree.items() if p != worker["pid"]}
        os.killpg(server["pgid"], signal.SIGKILL)
        t_kill = time.monotonic()
        timeline = []
        for _ in range(13):  # a minute with the server down
            alive = [p for p, st in own_stack["orphans"].items() if is_alive(p, st)]
            timeline.append((round(time.monotonic() - t_kill), len(alive), is_alive(worker["pid"], worker["start_time"]),
                             sorted(d.name for d in run_dir.iterdir())[-1]))
            if not alive:
                break
            time.sleep(5)
        print(f"\n[prefect killed] (s, flow-run processes alive, worker alive, last stage dir): {timeline}")
        again = shiftflow_cli(own_stack["up_args"], own_stack["env"], timeout_s=1800)
        print(f"[shiftflow up again] {again.stdout}\n{again.stderr}")
        assert again.returncode == 0, again.stderr
        t_up = time.monotonic()
        states = []
        for _ in range(24):
            fr = _flow_run(client, first)
            states.append((round(time.monotonic() - t_up), fr["state"]["type"], fr["state"].get("message")))
            if fr["state"]["type"] in FINAL:
                break
            time.sleep(10)
        print(f"[after restart] {states}")
        assert states[-1][1] in FINAL, states
        second = client.post(f"/deployments/{dep['id']}/create_flow_run",
                             json={"parameters": {"config": config}}).raise_for_status().json()["id"]
        fr2 = _wait_state(client, second, FINAL, RUN_TIMEOUT_S)
        print(f"[second run] {fr2['state']['type']}")
        assert fr2["state"]["type"] == "COMPLETED", fr2["state"]
    from mlflow.tracking import MlflowClient

    ml = MlflowClient(own_stack["mlflow"])
    exp = ml.get_experiment_by_name("faults-server")
    (parent,) = [r for r in ml.search_runs([exp.experiment_id], filter_string=f"tags.`prefect.flow_run_id` = '{second}'")
                 if "mlflow.parentRunId" not in r.data.tags]
    print(f"[second run] reused stages: {parent.data.tags.get('shiftflow.reused_stages')}")
    if not code_changed(own_stack["root"] / "runs"):
        assert "ingest" in parent.data.tags["shiftflow.reused_stages"].split(",")
    assert check_run_root(own_stack["root"] / "runs")["manifests"] > 0
