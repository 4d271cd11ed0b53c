"""tasks.selection: source CV in the flow fits on every source row and scores only ``scored_folds`` folds;
its numbers equal shiftlib's ``source_cv`` computed independently on the same rows and folds. The task dispatches
every selector through the registry (``shiftlib.selection.bind_selector``), so a new one, seeded from its
``get_params()``, runs without a line in tasks/ or flows/."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_breast_cancer
from threadpoolctl import threadpool_limits

import shiftlib.selection.registry as registry
from shiftlib.budget import scored_folds
from shiftlib.catalog import SELECTION_METHODS
from shiftlib.learners import make_learner
from shiftlib.selection import BaseSelector, SelectorScores, bind_selector, resolve_candidates, source_cv
from tasks.ingest import LABEL, ROW
from tasks.selection import cv_candidate, run_selector, selector_data, uses_weights
from tasks.store import StageStore
from tasks.weights import make_candidates

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
    from tasks.estimation import EstimationSettings, estimation, scv_from_estimation
    from tasks.tracking import RunContext

    store, X_s, y_s = _store(tmp_path)
    assert scv_from_estimation(store, 0, 10) is None  # no estimation stage yet
    with threadpool_limits(1):
        estimation.fn(store, ctx=RunContext(f"sqlite:///{tmp_path / 'm.db'}", "", "", "", 0), k=10, run_ids={},
                      settings=EstimationSettings(n_boot=20))
        shared = scv_from_estimation(store, 0, 10)
        ref = source_cv({n: make_learner(n, random_state=0, n_rows=400) for n in NAMES}, X_s, y_s, k=10,
                        random_state=0)
    assert shared is not None and scv_from_estimation(store, 1, 10) is None and scv_from_estimation(store, 0, 5) is None
    for n in NAMES:
        assert shared.scores[n] == pytest.approx(ref.scores[n], abs=1e-12)


# --- dispatch: the task runs whatever the registry holds, by its settings, not by its name ------------------


class _ToySelector(BaseSelector):
    """A selector the task has never heard of: each candidate scores a seeded uniform draw."""

    fan_out = "candidate"

    def __init__(self, *, random_state: int | None = None) -> None:
        self.random_state = random_state

    def select(self, learners, X_source, y_source, X_target) -> SelectorScores:
        names = [c.name for c in resolve_candidates(learners)]
        draws = np.random.default_rng(self.random_state).uniform(size=len(names))
        return SelectorScores("toy", pd.Series(draws, index=names), n_fits=0)


def test_every_registered_selector_is_dispatched_by_the_registry(tmp_path):
    store, _, _ = _store(tmp_path)
    data = selector_data(store, "rt", 0, 120)
    cands = make_candidates(store, [(n, n, "none") for n in NAMES], 0, data)
    beta = np.linspace(0.5, 1.5, len(data.y_s))
    with threadpool_limits(1):
        for name in SELECTION_METHODS:
            got = run_selector(name, cands, data, seed=0, k=3, beta=beta, rows=120)
            ref = bind_selector(name, random_state=0, k=3, weights=beta, max_folds=scored_folds(120, 3, 120))(
                cands, data.X_s, data.y_s, data.X_t)
            assert set(got.to_frame()["selector"]) == {name}
            assert got.scores.equals(ref.scores), name
    assert uses_weights("trcv") and uses_weights("wcv") and not uses_weights("scv") and not uses_weights("fewlabel")


def test_a_new_selector_is_dispatched_and_seeded_from_its_params(tmp_path, monkeypatch):
    monkeypatch.setitem(registry.SELECTORS, "toy", _ToySelector)
    store, _, _ = _store(tmp_path)
    assert len(selector_data(store, "toy", 0, 100).y_s) == 100  # not every_row: the selection subsample
    a = cv_candidate.fn(store, "toy", "LR", None, seed=7, k=10, rows=100)  # the per-candidate fan-out task
    b = cv_candidate.fn(store, "toy", "LR", None, seed=7, k=10, rows=100)
    c = cv_candidate.fn(store, "toy", "LR", None, seed=8, k=10, rows=100)
    assert list(a.scores.index) == ["LR"] and a.scores.equals(b.scores) and not a.scores.equals(c.scores)


_TOY_MODULE = '''
"""A toy selector in a module of its own: scores each candidate by a seeded draw."""
import numpy as np
import pandas as pd

from shiftlib.selection import BaseSelector, SelectorScores, resolve_candidates


class ToySelector(BaseSelector):
    def __init__(self, *, random_state=None):
        self.random_state = random_state

    def select(self, learners, X_source, y_source, X_target):
        names = [c.name for c in resolve_candidates(learners)]
        draws = np.random.default_rng(self.random_state).uniform(size=len(names))
        return SelectorScores("toy", pd.Series(draws, index=names), n_fits=0)
'''

_WALK = '''
import json, sys
sys.path.insert(0, sys.argv[1])
import shiftlib.catalog as catalog
catalog.SELECTION_METHODS["toy"] = "toy_selector:ToySelector"  # the one catalog line; nothing else is edited

from mlflow.tracking import MlflowClient
from flows.config import RetrainConfig
from tasks.selection import SelectionSpec, selection
from tasks.tracking import RunContext
from tests.tasks.test_selection import _store

cfg = RetrainConfig(selectors="scv,toy", selector="toy")
store, _, _ = _store(sys.argv[1] + "/runs")
uri = "sqlite:///" + sys.argv[1] + "/m.db"
client = MlflowClient(uri)
parent = client.create_run(client.create_experiment("walk")).info.run_id
out = selection.fn(store, SelectionSpec(cfg.selectors, cfg.selector, k=5, rows=None),
                   ctx=RunContext(uri, "", parent, "", 0), run_ids={})
print(json.dumps({"selectors": cfg.selectors, "chosen": out["chosen"], "by": out["selector"],
                  "scored": sorted({r["selector"] for r in out["scores"]}),
                  "toy": {r["learner"]: r["score"] for r in out["scores"] if r["selector"] == "toy"},
                  "table": sorted(set(store.read_table("selection", "scores")["selector"])),
                  "tag": client.get_run(parent).data.tags["shiftflow.selector"]}))
'''


@pytest.mark.slow  # a subprocess that imports the pipeline: ~16 s
def test_walkthrough_a_toy_selector_runs_in_the_selection_task_with_one_catalog_line(tmp_path):
    """docs/extending.md: a selector is its module, its catalog line and its test. The toy's module lives outside
    the repository; a fresh interpreter adds its catalog line before anything reads the catalog, and the config
    accepts it, the selection task dispatches, stores and logs it, and it decides the run's choice."""
    (tmp_path / "toy_selector.py").write_text(_TOY_MODULE)
    root = Path(__file__).resolve().parents[2]
    res = subprocess.run([sys.executable, "-c", _WALK, str(tmp_path)], cwd=root, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["selectors"] == ["scv", "toy"] and got["by"] == "toy" and got["tag"] == "toy"
    assert got["scored"] == got["table"] == ["scv", "toy"]
    # seeded from the run's seed (0), in the task's candidate order; the toy's best is the run's choice
    assert sorted(got["toy"]) == sorted(NAMES)
    assert list(got["toy"].values()) == pytest.approx(list(np.random.default_rng(0).uniform(size=len(NAMES))))
    assert got["chosen"] == max(got["toy"], key=got["toy"].get)
