"""Fan-out in the flow: ensemble-KMM chunks, ReverseTesting rows and TrCV folds run as separate Prefect task
runs (so a Dask task runner spreads them over workers), and what they produce is exactly what the one-call
shiftlib functions produce on the same inputs (same fits on the same rows, only scheduled differently)."""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from pathlib import Path

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

pytestmark = pytest.mark.slow  # one fanned retrain (~25 s) and the one-call recomputations it is checked against


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
