"""The Dask task runner on the running stack: the retrain flow on a 2-worker Dask ``LocalCluster`` gives the same
result as on threads, with training tasks, ReverseTesting rows and TrCV folds run by the workers (slow). The
``--task-runner/--dask-address/--dask-workers`` flags are tested in ``test_cli.py``, ``make_task_runner`` in
``test_runners.py``.

Slow: a real Prefect server and MLflow server (``stack`` fixture, ``conftest.py``); ``PREFECT_API_URL`` and
``MLFLOW_TRACKING_URI`` are set for this test only (``monkeypatch`` for the Dask worker processes, which
inherit the environment, and ``temporary_settings`` for this process, whose Prefect settings were read at
import). The flow runs in-process twice on the same small config (learners LR, NB, DT; fixed seed), each
with its own run root (so no stage is reused) and its own registered model name (so the second run's
champion stage does not compete with the first's model), once with the thread runner and once with
``make_task_runner("dask", n_workers=2)``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

LEARNERS = ["LR", "NB", "DT"]
RUN_TIMEOUT_S = 900  # per flow run; seen 30–45 s on threads and ~155 s on Dask on a loaded 2-core box


@pytest.fixture
def real_prefect_api(stack: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    monkeypatch.setenv("PREFECT_API_URL", stack["prefect_api"])
    monkeypatch.setenv("MLFLOW_TRACKING_URI", stack["mlflow"])
    with temporary_settings({PREFECT_API_URL: stack["prefect_api"]}):
        yield stack
    from tests.conftest import drain_events_worker

    drain_events_worker()  # its events worker would keep sending to the stack after this test


def _spy_on_local_clusters(monkeypatch: pytest.MonkeyPatch, log: Path) -> list[dict[str, Any]]:
    """Record every ``distributed.LocalCluster`` made (``make_task_runner`` names it by its qualified name)
    and, through a scheduler plugin, append ``<key>\t<worker>`` to ``log`` for each task a worker finishes.
    (The plugin writes to a file: the scheduler's plugin objects are copies by the time tasks finish, so an
    in-memory list would stay empty.)"""
    import distributed
    from distributed.diagnostics.plugin import SchedulerPlugin

    clusters: list[dict[str, Any]] = []
    path = str(log)

    class Recorder(SchedulerPlugin):
        def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
            if finish == "memory":
                with open(path, "a") as f:
                    f.write(f"{key}\t{kwargs.get('worker')}\n")

    class SpyCluster(distributed.LocalCluster):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            # a loaded box can return from __init__ before the second worker registered (CI, stop 33): the
            # scheduler's view is what the flow will submit to, so read it once every launched worker is up
            self.wait_for_workers(len(self.workers), timeout=120)
            clusters.append({"workers": sorted(self.scheduler_info["workers"]), "kwargs": kw})
            self.scheduler.add_plugin(Recorder(), name="shiftflow-test-recorder")

    monkeypatch.setattr(distributed, "LocalCluster", SpyCluster)
    return clusters


@pytest.mark.slow
def test_dask_runner_gives_the_thread_runners_selection_and_bytes(real_prefect_api: dict[str, Any],
                                                                   tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import pandas as pd

    import shiftlib.budget
    from flows.config import RetrainConfig
    from flows.retrain import retrain
    from flows.runners import make_task_runner

    monkeypatch.setattr(shiftlib.budget, "FANOUT_MIN_ROWS", 0)  # fan the selectors out even on Pima's 150 rows
    stack = real_prefect_api
    done_log = tmp_path / "dask-tasks.tsv"
    clusters = _spy_on_local_clusters(monkeypatch, done_log)

    def config(name: str) -> RetrainConfig:
        return RetrainConfig(learners=LEARNERS, seed=11, cv_folds=3, selectors=["rt", "trcv", "scv"],
                             selector="scv", selection_folds=5, run_root=str(tmp_path / name / "runs"), tracking_uri=stack["mlflow"],
                             experiment="dask-e2e", model_name=f"shiftflow-dask-e2e-{name}")

    # timeout_seconds: a Dask cluster that lost its workers leaves the flow waiting on a future forever
    t0 = time.monotonic()
    on_threads = retrain.with_options(task_runner=make_task_runner("thread"), timeout_seconds=RUN_TIMEOUT_S)(
        config("thread"))
    t_thread = time.monotonic() - t0
    t0 = time.monotonic()
    on_dask = retrain.with_options(task_runner=make_task_runner("dask", n_workers=2), timeout_seconds=RUN_TIMEOUT_S)(
        config("dask"))
    t_dask = time.monotonic() - t0
    print(f"\n[dask] retrain on threads: {t_thread:.1f} s; on a 2-worker LocalCluster: {t_dask:.1f} s")

    # the Dask run really ran its training tasks on the cluster's two worker processes
    assert len(clusters) == 1, clusters
    cluster = clusters[0]
    assert len(cluster["workers"]) == 2 and cluster["kwargs"]["n_workers"] == 2, cluster
    candidates = sorted(on_dask["model_uris"])
    done = [line.split("\t") for line in done_log.read_text().splitlines()] if done_log.exists() else []
    # fanned out to the workers: per candidate one training task and one ReverseTesting row; one task per TrCV
    # fold (Pima's 150 source rows are one exact KMM problem: no chunks). SCV is read from the estimation
    # stage's fold scores (it fitted the same folds on every row): no cv-candidate task
    assert len(done) == 2 * len(candidates) + 5, done
    assert {w for _, w in done} == set(cluster["workers"]), (done, cluster)  # both workers took tasks
    print(f"[dask] {len(done)} tasks finished on workers {sorted({w for _, w in done})}; candidates {candidates}")

    assert on_threads["reused_stages"] == [] and on_dask["reused_stages"] == []
    assert on_threads["run_dir"] != on_dask["run_dir"]
    assert sorted(on_threads["model_uris"]) == candidates
    assert on_dask["weighting"] == on_threads["weighting"]
    assert on_dask["selection"]["chosen"] == on_threads["selection"]["chosen"]
    a, b = Path(on_threads["run_dir"]), Path(on_dask["run_dir"])
    tables = sorted(p.name for p in (a / "selection").glob("*.parquet"))
    assert "scores.parquet" in tables and tables == sorted(p.name for p in (b / "selection").glob("*.parquet"))
    for name in tables:
        pd.testing.assert_frame_equal(pd.read_parquet(a / "selection" / name), pd.read_parquet(b / "selection" / name),
                                      check_exact=True, obj=f"selection/{name}")
    assert (a / "training" / "predictions.parquet").read_bytes() == (b / "training" / "predictions.parquet").read_bytes()
