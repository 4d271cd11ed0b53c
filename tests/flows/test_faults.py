"""Faults (production issue, item 4): an unreachable tracking server, a SIGKILLed run resumed, two concurrent
runs, a damaged stage file (the retries of ``with_retries`` are tested in ``tests/tasks/test_tracking.py``). The
subprocess tests are slow (each starts Prefect's temporary API) and marked so."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # the session's Prefect API (prefect_harness) takes about 30 s to start: no default test starts it
def test_flow_fails_fast_on_unreachable_tracking_server(prefect_harness, tmp_path):
    from flows.config import RetrainConfig
    from flows.retrain import retrain

    t0 = time.perf_counter()
    with pytest.raises(ConnectionError, match=r"127\.0\.0\.1:9"):
        retrain(RetrainConfig(learners=["NB"], tracking_uri="http://127.0.0.1:9", run_root=str(tmp_path)))
    assert time.perf_counter() - t0 < 60  # before any stage runs (nothing written below)
    assert not any(tmp_path.iterdir())


def _env(tmp: Path, name: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API_URL", "MLFLOW_TRACKING_URI"))}
    env |= {"PREFECT_HOME": str(tmp / f"prefect-{name}"), "SHIFTFLOW_HOME": str(tmp / "home"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "true"}
    return env


def _config(tmp: Path, name: str, **over) -> Path:
    cfg = {"learners": ["LR", "NB", "DT"], "selectors": ["scv"], "selector": "scv", "cv_folds": 3,
           "selection_folds": 5, "experiment": "faults", "run_root": str(tmp / f"root-{name}"),
           "tracking_uri": f"sqlite:///{tmp / 'mlflow.db'}"} | over
    p = tmp / f"{name}.json"
    p.write_text(json.dumps(cfg))
    return p


def _cli(tmp: Path, name: str, cfg: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "flows.cli", "retrain", "--config", str(cfg)], cwd=ROOT,
                            env=_env(tmp, name), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def _finish(p: subprocess.Popen, timeout: float = 900) -> tuple[str, Path]:
    out, _ = p.communicate(timeout=timeout)
    assert p.returncode == 0, out[-4000:]
    run_dir = Path(next(line.split(":", 1)[1].strip() for line in out.splitlines() if "run folder:" in line))
    return out, run_dir


def _parquet_hashes(run_dir: Path) -> dict[str, str]:
    return {str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run_dir.rglob("*.parquet")) if "training_parts" not in p.parts}


@pytest.mark.slow
def test_sigkill_during_training_then_rerun_resumes_with_identical_outputs(tmp_path):
    ref_out, ref_dir = _finish(_cli(tmp_path, "ref", _config(tmp_path, "ref")))
    cfg = _config(tmp_path, "killed")
    victim = _cli(tmp_path, "killed", cfg)
    deadline = time.time() + 900
    parts: list[Path] = []
    while time.time() < deadline and victim.poll() is None:
        parts = list((tmp_path / "root-killed").glob("*/training_parts/*/manifest.json"))
        if parts:
            break
        time.sleep(0.2)
    assert victim.poll() is None, "the run finished before it could be killed"
    assert parts, "no candidate finished training in time"
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    out, run_dir = _finish(_cli(tmp_path, "killed", cfg))
    # ingest (at least) came from the killed run; on failure show what the rerun said about its stages
    assert "reusing stage from run" in out, "\n".join(
        line for line in out.splitlines() if any(w in line for w in ("stage", "ingest", "reus", "Error", "error")))
    assert "reusing the finished fit" in out  # and the candidate(s) it had finished
    assert _parquet_hashes(run_dir) == _parquet_hashes(ref_dir)  # same selection, byte-identical tables


@pytest.mark.slow
def test_two_concurrent_runs_do_not_cross_talk(tmp_path):
    from mlflow.tracking import MlflowClient

    a = _cli(tmp_path, "a", _config(tmp_path, "a", seed=1, learners=["LR", "NB"]))
    b = _cli(tmp_path, "b", _config(tmp_path, "b", seed=2, learners=["NB", "DT"]))
    (_, dir_a), (_, dir_b) = _finish(a), _finish(b)
    assert dir_a.parent != dir_b.parent and dir_a.name != dir_b.name
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("faults")
    runs = client.search_runs([exp.experiment_id])
    parents = {r.data.tags["shiftflow.run_dir"]: r for r in runs if "mlflow.parentRunId" not in r.data.tags}
    assert set(parents) == {str(dir_a), str(dir_b)}
    for run_dir, seed, names in ((dir_a, "1", {"LR", "NB"}), (dir_b, "2", {"NB", "DT"})):
        parent = parents[str(run_dir)]
        assert parent.data.params["seed"] == seed
        kids = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
        assert {r.data.tags["shiftflow.learner"] for r in kids} == names
        assert {r.data.params["seed"] for r in kids if "seed" in r.data.params} == {seed}
