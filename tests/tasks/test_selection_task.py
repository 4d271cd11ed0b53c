"""tasks.selection: source CV in the flow fits on every source row and scores only ``scored_folds`` folds;
its numbers equal shiftlib's ``source_cv`` computed independently on the same rows and folds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_breast_cancer
from threadpoolctl import threadpool_limits

from shiftlib.budget import scored_folds
from shiftlib.learners import make_learner
from shiftlib.selection import source_cv
from tasks.ingest import LABEL, ROW
from tasks.selection import cv_candidate, selector_data
from tasks.store import StageStore

NAMES = ["NB", "LR"]


def _store(root) -> tuple[StageStore, pd.DataFrame, np.ndarray]:
    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    X_s, y_s = X.iloc[:400, :6].reset_index(drop=True), y.to_numpy()[:400]
    X_t = X.iloc[400:, :6].reset_index(drop=True)
    s = StageStore(root, "r1")
    s.write_stage("ingest", {"source": X_s.assign(**{LABEL: y_s, ROW: np.arange(len(X_s))}),
                             "target": X_t.assign(**{ROW: np.arange(len(X_t))})}, key="k-ingest", params={}, inputs={})
    s.write_stage("training", {"learners": pd.DataFrame({"learner": NAMES})}, key="k-train", params={}, inputs={},
                  extra={"models": {n: {"learner": n, "weighting": "none"} for n in NAMES}})
    return s, X_s, y_s


def test_scv_in_the_flow_scores_enough_folds_over_every_row(tmp_path):
    store, X_s, y_s = _store(tmp_path)
    assert len(selector_data(store, "scv", 0, 100).y_s) == 400  # every row for source CV ...
    assert len(selector_data(store, "rt", 0, 100).y_s) == 100  # ... a subsample for ReverseTesting
    f = scored_folds(400, 10, 100)
    assert f == 3  # ceil(100 · 10 / 400): 3 folds of 40 rows score ≥ 100 rows
    with threadpool_limits(1):
        got = cv_candidate.fn(store, "scv", "LR", None, seed=0, k=10, rows=100)
        ref = source_cv({"LR": make_learner("LR", random_state=0, n_rows=400)}, X_s, y_s, k=10, random_state=0,
                        max_folds=f)
    assert got.n_fits == 3
    assert got.scores["LR"] == pytest.approx(ref.scores["LR"], abs=1e-12)


def test_scv_is_read_from_the_estimation_stage_when_it_fitted_every_row(tmp_path):
    from tasks.estimation import estimation
    from tasks.selection import scv_from_estimation

    store, X_s, y_s = _store(tmp_path)
    assert scv_from_estimation(store, 0, 10) is None  # no estimation stage yet
    with threadpool_limits(1):
        estimation.fn(store, seed=0, k=10, tracking_uri=f"sqlite:///{tmp_path / 'm.db'}", run_ids={}, n_boot=20)
        shared = scv_from_estimation(store, 0, 10)
        ref = source_cv({n: make_learner(n, random_state=0, n_rows=400) for n in NAMES}, X_s, y_s, k=10,
                        random_state=0)
    assert shared is not None and scv_from_estimation(store, 1, 10) is None and scv_from_estimation(store, 0, 5) is None
    for n in NAMES:
        assert shared.scores[n] == pytest.approx(ref.scores[n], abs=1e-12)
