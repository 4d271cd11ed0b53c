"""tasks.evaluation: each candidate's target accuracy and AUC, on its predictions put back in row order, equal
scikit-learn's on the held-out labels and are logged as ``eval.*`` in that candidate's run; no labels, no stage; a
second run reuses the stage, and new labels or predictions recompute it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.metrics import accuracy_score, roc_auc_score
from threadpoolctl import threadpool_limits

import tasks.evaluation
from shiftlib.learners import make_learner
from tasks.evaluation import evaluate
from tasks.ingest import LABEL, ROW
from tasks.store import StageStore
from tasks.tracking import RunContext

NAMES = ["NB", "LR"]


def _fitted():
    """NB and LR fitted on the first 300 rows of breast_cancer (6 columns); the target is the next 150 rows."""
    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    X, y = X.iloc[:, :6], y.to_numpy()
    X_s, y_s, X_t, y_t = X.iloc[:300], y[:300], X.iloc[300:450].reset_index(drop=True), y[300:450]
    with threadpool_limits(1):
        models = {n: make_learner(n, random_state=0).fit(X_s, y_s) for n in NAMES}
    return models, X_t, y_t


def _predictions(models, X_t, *, shuffle: int | None = 0) -> pd.DataFrame:
    """The training stage's predictions table (one row per candidate and target row), rows shuffled as a
    concatenation of parts need not keep them in order."""
    parts = []
    for name, m in models.items():
        proba = m.predict_proba(X_t)
        part = pd.DataFrame({ROW: np.arange(len(X_t)), "learner": name, "predicted": m.classes_[proba.argmax(1)]})
        for j, c in enumerate(m.classes_):
            part[f"proba_{int(c)}"] = proba[:, j]
        parts.append(part)
    preds = pd.concat(parts, ignore_index=True)
    return preds if shuffle is None else preds.sample(frac=1.0, random_state=shuffle).reset_index(drop=True)


def _store(root, run_id, X_t, preds, y_t=None) -> StageStore:
    s = StageStore(root, run_id)
    tables = {"source": pd.DataFrame({ROW: [0], LABEL: [0]}), "target": X_t.assign(**{ROW: np.arange(len(X_t))})}
    if y_t is not None:
        tables["target_labels"] = pd.DataFrame({ROW: np.arange(len(y_t)), LABEL: y_t})
    s.write_stage("ingest", tables, key="k-ingest", params={}, inputs={})
    s.write_stage("training", {"predictions": preds}, key="k-train", params={}, inputs={})
    return s


@pytest.fixture(scope="module")
def mlflow_runs(tmp_path_factory):
    """One MLflow store for the module (creating its tables costs seconds); ``runs()`` makes a run per candidate."""
    tmp = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    client = MlflowClient(uri)
    exp = client.create_experiment("eval", artifact_location=(tmp / "art").as_uri())
    return uri, client, lambda names=NAMES: {n: client.create_run(exp).info.run_id for n in names}


def _refuse(*args, **kwargs):
    raise AssertionError("the evaluation stage was recomputed")


class _Recomputed(Exception):
    pass


def _sentinel(*args, **kwargs):
    raise _Recomputed


def test_scores_equal_sklearn_on_the_held_out_labels_are_logged_per_candidate_and_reused(
        tmp_path, mlflow_runs, monkeypatch):
    uri, client, new_runs = mlflow_runs
    models, X_t, y_t = _fitted()
    preds = _predictions(models, X_t)
    assert not preds.groupby("learner")[ROW].is_monotonic_increasing.any()  # each candidate's rows out of order
    store, run_ids = _store(tmp_path / "runs", "r1", X_t, preds, y_t), new_runs()
    table = evaluate.fn(store, run_ids, ctx=RunContext(uri, "", "", "", 0))

    pd.testing.assert_frame_equal(store.read_table("evaluation", "target_scores"), table)
    assert table["learner"].tolist() == list(pd.unique(preds["learner"]))  # in the predictions' order
    assert list(table.columns) == ["learner", "target_accuracy", "target_auc"]
    for r in table.to_dict("records"):
        m = models[r["learner"]]
        acc, auc = accuracy_score(y_t, m.predict(X_t)), roc_auc_score(y_t, m.predict_proba(X_t)[:, 1])
        assert 0.5 < acc < 1.0 and 0.5 < auc < 1.0  # neither trivially right nor wrong: a row mix-up shows
        assert (r["target_accuracy"], r["target_auc"]) == pytest.approx((acc, auc), abs=1e-12)
        logged = client.get_run(run_ids[r["learner"]]).data.metrics
        assert logged == pytest.approx({"eval.target_accuracy": acc, "eval.target_auc": auc}, abs=1e-12)
    assert store.manifest("evaluation")["inputs"] == {"labels": store.file_hash("ingest", "target_labels.parquet"),
                                                      "predictions": store.file_hash("training", "predictions.parquet")}

    # the same labels and predictions in another run folder: adopted, the scores logged into that run's candidates
    monkeypatch.setattr(tasks.evaluation, "_compute", _refuse)
    again, runs2 = _store(tmp_path / "runs", "r2", X_t, preds, y_t), new_runs()
    pd.testing.assert_frame_equal(evaluate.fn(again, runs2, ctx=RunContext(uri, "", "", "", 0)), table)
    assert again.manifest("evaluation")["reused_from"] == "r1"
    for n in NAMES:
        assert client.get_run(runs2[n]).data.metrics == client.get_run(run_ids[n]).data.metrics

    # one label or one prediction differs: computed anew
    monkeypatch.setattr(tasks.evaluation, "_compute", _sentinel)
    flipped = y_t.copy()
    flipped[0] = 1 - flipped[0]
    with pytest.raises(_Recomputed):
        evaluate.fn(_store(tmp_path / "runs", "r3", X_t, preds, flipped), runs2, ctx=RunContext(uri, "", "", "", 0))
    other = preds.copy()
    other.loc[0, "proba_1"] = 1.0 - other.loc[0, "proba_1"]
    with pytest.raises(_Recomputed):
        evaluate.fn(_store(tmp_path / "runs", "r4", X_t, other, y_t), runs2, ctx=RunContext(uri, "", "", "", 0))


def test_a_target_without_labels_is_not_evaluated(tmp_path, monkeypatch):
    models, X_t, _ = _fitted()
    monkeypatch.setattr(tasks.evaluation, "_compute", _refuse)
    store = _store(tmp_path / "runs", "r", X_t, _predictions(models, X_t))
    assert evaluate.fn(store, {n: "never-used" for n in NAMES}, ctx=RunContext("sqlite:///unused", "", "", "", 0)) \
        is None
    assert not store.has_stage("evaluation")


def test_no_auc_unless_both_the_labels_and_the_probabilities_have_two_classes(tmp_path, mlflow_runs):
    """Three-class candidates (iris): accuracy only, whether the labels hold three classes or two of them."""
    uri, client, new_runs = mlflow_runs
    X, y = load_iris(return_X_y=True, as_frame=True)
    y = y.to_numpy()
    src = np.r_[0:35, 50:85, 100:135]
    with threadpool_limits(1):
        models = {n: make_learner(n, random_state=0).fit(X.iloc[src], y[src]) for n in NAMES}
    for run, tgt in (("three", np.r_[35:50, 85:100, 135:150]), ("two", np.r_[85:100, 135:150])):
        X_t, y_t = X.iloc[tgt].reset_index(drop=True), y[tgt]
        assert len(np.unique(y_t)) == {"three": 3, "two": 2}[run]
        run_ids = new_runs()
        table = evaluate.fn(_store(tmp_path / "runs", run, X_t, _predictions(models, X_t), y_t), run_ids,
                            ctx=RunContext(uri, "", "", "", 0))
        assert list(table.columns) == ["learner", "target_accuracy"]
        for r in table.to_dict("records"):
            acc = accuracy_score(y_t, models[r["learner"]].predict(X_t))
            assert r["target_accuracy"] == pytest.approx(acc, abs=1e-12)
            assert client.get_run(run_ids[r["learner"]]).data.metrics == pytest.approx({"eval.target_accuracy": acc})


def test_two_class_labels_of_which_the_target_holds_one_give_no_auc(tmp_path, mlflow_runs):
    """A batch of one class: accuracy is defined, AUC is not (roc_auc_score would refuse it)."""
    uri, client, new_runs = mlflow_runs
    models, X_t, y_t = _fitted()
    one = np.flatnonzero(y_t == 1)
    X_1 = X_t.iloc[one].reset_index(drop=True)
    table = evaluate.fn(_store(tmp_path / "runs", "one", X_1, _predictions(models, X_1), y_t[one]), new_runs(),
                        ctx=RunContext(uri, "", "", "", 0))
    assert list(table.columns) == ["learner", "target_accuracy"]
    for r in table.to_dict("records"):
        assert r["target_accuracy"] == pytest.approx(np.mean(models[r["learner"]].predict(X_1) == 1), abs=1e-12)
