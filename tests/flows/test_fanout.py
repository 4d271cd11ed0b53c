"""flows.fanout. Fan-out in the flow (slow): ensemble-KMM chunks, ReverseTesting rows and TrCV folds run as separate Prefect task
runs (so a Dask task runner spreads them over workers), and what they produce is exactly what the one-call
shiftlib functions produce on the same inputs (same fits on the same rows, only scheduled differently). The
helpers (fast): ``run_mapped`` keeps item order and at most ``limit`` in flight, with progress lines;
``stage_clock`` records a stage's seconds and the peak RSS."""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from shiftlib.selection import reverse_testing, trcv_select
from shiftlib.weights import (
    chunk_indices,
    combine_chunks,
    kmm_chunk,
    kmm_polish,
    normalize_weights,
    shared_kernel,
)

# the flow's tests are slow (each marked): one fanned retrain (~25 s) and the one-call recomputations it is
# checked against; the helpers' tests below them are fast


@pytest.fixture(scope="module")
def fanned_run(prefect_harness, tmp_path_factory):
    import shiftlib.budget
    import tasks.weights
    from flows.config import RetrainConfig
    from flows.retrain import retrain

    root = tmp_path_factory.mktemp("fanout")
    cfg = RetrainConfig(learners=["LR", "NB"], run_root=str(root / "runs"), weighting="kmm",
                        tracking_uri=f"sqlite:///{root / 'mlflow.db'}", experiment="fanout", cv_folds=3,
                        selectors=["rt", "trcv", "scv"], selector="trcv", selection_folds=3)
    mp = pytest.MonkeyPatch()
    mp.setattr(tasks.weights, "KMM_CHUNK_ROWS", 60)  # Pima's 150 biased source rows → 3 KMM chunks
    mp.setattr(shiftlib.budget, "FANOUT_MIN_ROWS", 0)  # fan the selectors out even on 150 rows
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda rec: records.append(rec.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("prefect")
    logger.addHandler(handler)
    try:
        summary = retrain(cfg)
    finally:
        logger.removeHandler(handler)
        mp.undo()
    return cfg, summary, records


def _inputs(run_dir: Path) -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame]:
    src = pd.read_parquet(run_dir / "ingest" / "source.parquet")
    tgt = pd.read_parquet(run_dir / "ingest" / "target.parquet")
    X_s = src.drop(columns=["_row", "_label"])
    return X_s, src["_label"].to_numpy(), tgt.drop(columns=["_row"])[X_s.columns]


@pytest.mark.slow
def test_each_piece_is_its_own_task_run(fanned_run):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    _, summary, records = fanned_run
    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(
            any_=[uuid.UUID(summary["flow_run_id"])])))
    counts = Counter(r.name.rsplit("-", 1)[0] for r in runs)
    # 2 learners × {none, kmm} = 4 candidates: 4 RT rows; 3 TrCV folds; 150 rows / 60 → 3 KMM chunks
    assert counts["rt-row"] == 4 and counts["trcv-fold"] == 3 and counts["kmm-chunk"] == 3, counts
    assert counts["train-learner"] == 4
    # progress lines, as the CLI shows them
    for line in ("KMM chunks: 3/3 done", "training: 4/4 done", "ReverseTesting rows: 4/4 done", "TrCV folds: 3/3 done"):
        assert any(line in r for r in records), line


@pytest.mark.slow
def test_ensemble_kmm_chunks_equal_the_shiftlib_recipe(fanned_run):
    _, summary, _ = fanned_run
    run_dir = Path(summary["run_dir"])
    X_s, _, X_t = _inputs(run_dir)
    Xs, Xt = X_s.to_numpy(float), X_t.to_numpy(float)
    kern = shared_kernel(Xs, Xt)
    Zs, Zt = kern.transform(Xs), kern.transform(Xt)
    chunks = chunk_indices(len(Zs), 60, 0)  # seed 0 = the config's seed
    combined = combine_chunks(len(Zs), chunks, [kmm_chunk(Zs[c], Zt, gamma=kern.gamma) for c in chunks])
    expected = normalize_weights(kmm_polish(Zs, Zt, combined, gamma=kern.gamma))
    got = pd.read_parquet(run_dir / "weights" / "weights.parquet")["kmm"].to_numpy()
    np.testing.assert_array_equal(got, expected)


@pytest.mark.slow
def test_fanned_selection_equals_the_one_call_selectors(fanned_run):
    from tasks.store import StageStore
    from tasks.weights import make_candidates

    cfg, summary, _ = fanned_run
    run_dir = Path(summary["run_dir"])
    store = StageStore(run_dir.parent, run_dir.name)
    X_s, y_s, X_t = _inputs(run_dir)
    specs = [(n, m["learner"], m["weighting"]) for n, m in store.manifest("training")["extra"]["models"].items()]
    cands = make_candidates(store, specs, cfg.seed)
    kmm = pd.read_parquet(run_dir / "weights" / "weights.parquet")["kmm"].to_numpy()
    scores = pd.read_parquet(run_dir / "selection" / "scores.parquet")
    rt = reverse_testing(cands, X_s, y_s, X_t, random_state=cfg.seed).to_frame()
    tr = trcv_select(cands, X_s, y_s, X_t, weights=kmm, k=cfg.selection_folds, random_state=cfg.seed).to_frame()
    for sel, expected in (("rt", rt), ("trcv", tr)):
        got = scores[scores["selector"] == sel].sort_values("learner").reset_index(drop=True)
        pd.testing.assert_frame_equal(got, expected.sort_values("learner").reset_index(drop=True), check_dtype=False)


@pytest.mark.slow
def test_in_process_kmm_fit_equals_the_fanned_chunks(fanned_run, monkeypatch):
    # selection and the champion's re-score fit KMM in-process when the weights stage has none (weighting
    # none, large source): ensemble KMM with the flow's chunks, so the same weights as the fanned-out tasks
    import tasks.weights

    _, summary, _ = fanned_run
    run_dir = Path(summary["run_dir"])
    X_s, _, X_t = _inputs(run_dir)
    monkeypatch.setattr(tasks.weights, "KMM_CHUNK_ROWS", 60)
    w = tasks.weights.fit_weighter("kmm", X_s, X_t, 0).weights_
    np.testing.assert_allclose(w, pd.read_parquet(run_dir / "weights" / "weights.parquet")["kmm"].to_numpy(),
                               rtol=1e-12, atol=0)


# --------------------------------------------------------------------------------------------- the helpers (fast)


class _Future:
    """A finished future (``prefect.futures.as_completed`` yields it at once); its hash sets the order the set of
    pending futures is iterated in, so the test chooses which one ``run_mapped`` takes first."""

    def __init__(self, value: Any, order: int, taken: list[Any]) -> None:
        self.value, self.order, self.taken = value, order, taken
        self._final_state = "COMPLETED"

    def __hash__(self) -> int:
        return self.order

    def result(self) -> Any:
        self.taken.append(self.value)
        return self.value


class _Task:
    """``task.submit(*args)``: computes at once; counts how many futures are out (submitted, result not taken)."""

    def __init__(self) -> None:
        self.taken: list[Any] = []
        self.submitted = 0
        self.most_in_flight = 0

    def submit(self, *args: Any, **kwargs: Any) -> _Future:
        self.submitted += 1
        self.most_in_flight = max(self.most_in_flight, self.submitted - len(self.taken))
        value = (sum(args), kwargs)
        return _Future(value, order=-self.submitted, taken=self.taken)  # the newest is found first


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, msg: str, *args: Any) -> None:
        self.lines.append(msg % args)


def test_run_mapped_keeps_item_order_with_at_most_limit_in_flight() -> None:
    from flows.fanout import run_mapped

    task, log = _Task(), _Log()
    items = [(1,), (2,), (3,), (4,), (5,)]
    out = run_mapped(task, (100,), items, limit=3, what="chunks", log=log, scale=2)
    assert out == [(101, {"scale": 2}), (102, {"scale": 2}), (103, {"scale": 2}), (104, {"scale": 2}),
                   (105, {"scale": 2})]  # task(*args, *item, **kwargs), in item order
    assert [v[0] for v in task.taken] != [101, 102, 103, 104, 105]  # though they finished in another order
    assert task.most_in_flight == 3 and task.submitted == 5
    assert [line.split(" (")[0] for line in log.lines] == [f"chunks: {i}/5 done" for i in range(1, 6)]
    assert "left)" in log.lines[0] and "left" not in log.lines[-1]  # no time left to announce at the end
    assert run_mapped(task, (), [(1,), (2,)], limit=0, what="x", log=_Log()) == [(1, {}), (2, {})]  # 0: one at a time


def test_the_time_left_is_the_mean_time_per_item_times_the_items_left() -> None:
    from flows.fanout import _eta

    assert _eta(1, 4, 2.0) == ", about 6 s left"  # 2 s per item, 3 items left
    assert _eta(3, 4, 30.0) == ", about 10 s left"
    assert _eta(4, 4, 30.0) == ""


def test_stage_clock_records_the_seconds_and_the_peak_rss(monkeypatch: pytest.MonkeyPatch) -> None:
    import flows.fanout

    ticks = iter([100.0, 102.5, 200.0, 200.25, 300.0, 301.0])
    monkeypatch.setattr(flows.fanout.time, "monotonic", lambda: next(ticks))
    timings: dict[str, float] = {}
    peaks: dict[str, float] = {}
    with flows.fanout.stage_clock(timings, peaks, "drift"):
        pass
    with pytest.raises(RuntimeError), flows.fanout.stage_clock(timings, peaks, "weights"):
        raise RuntimeError("a failed stage is timed too")
    assert timings == {"drift": 2.5, "weights": 0.25}
    with flows.fanout.stage_clock(timings, peaks, "drift"):  # entered again (selection, by a pair plan's run): added
        pass
    assert timings == {"drift": 3.5, "weights": 0.25}
    # the kernel's peak resident set (VmHWM, kB) in GiB, to the MiB the summary rounds to
    hwm_kib = next(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
                   if line.startswith("VmHWM:"))
    assert set(peaks) == {"drift", "weights"} and peaks["weights"] == pytest.approx(hwm_kib / 2**20, abs=2e-3)
