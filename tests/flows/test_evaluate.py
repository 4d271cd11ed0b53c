"""flows.evaluate: realised accuracy/AUC logged beside the estimates equal an independent computation; partial
labels by id; the history file; bad input changes nothing in MLflow or on disk."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from sklearn.datasets import load_breast_cancer
from sklearn.metrics import roc_auc_score
from threadpoolctl import threadpool_limits

from flows.evaluate import HISTORY, EvaluateError, evaluate_run, main
from shiftlib.bias import split_biased
from shiftlib.learners import fit_learner, make_learner
from tasks.estimation import EstimationSettings, estimation
from tasks.ingest import LABEL, ROW, IngestOptions, ingest
from tasks.store import StageStore
from tasks.tracking import RunContext

NAMES = ["NB", "LR"]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A store and MLflow runs shaped like a finished retrain run (ingest, training, estimation)."""
    tmp = tmp_path_factory.mktemp("evaluate")
    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    X = X.iloc[:, :5]
    sp = split_biased(X.to_numpy(), y.to_numpy(), "kmm_threshold", random_state=1, feature=0)
    X_s, y_s = X.iloc[sp.source].reset_index(drop=True), y.to_numpy()[sp.source]
    X_t, y_t = X.iloc[sp.target].reset_index(drop=True), y.to_numpy()[sp.target]
    ids = np.array([f"c{1000 + i}" for i in range(len(X_t))])
    X_t.assign(id=ids).to_csv(tmp / "target.csv", index=False)
    store = StageStore(tmp / "runs", "flow-1")
    store.write_stage("ingest", {"source": X_s.assign(**{ROW: np.arange(len(X_s)), LABEL: y_s}),
                                 "target": X_t.assign(**{ROW: np.arange(len(X_t))})},
                      key="k", params={"target": f"file:{tmp / 'target.csv'}"}, inputs={},
                      extra={"label": "label", "classes": [0, 1]})
    return _finish(tmp, store, "flow-1", X_s, y_s, X_t, y_t, ids)


def _finish(tmp, store, flow_id, X_s, y_s, X_t, y_t, ids):
    """MLflow parent and nested runs, a training stage (predictions of NB and LR fitted on the source) and the
    estimation stage, on top of an ingest stage already in ``store``."""
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    client = MlflowClient(uri)
    exp = client.create_experiment("ev", artifact_location=(tmp / "art").as_uri())
    parent = client.create_run(exp, tags={"prefect.flow_run_id": flow_id, "shiftflow.run_dir": str(store.run_dir),
                                          "estimate.candidate": "LR"}).info.run_id
    run_ids = {n: client.create_run(exp, tags={"mlflow.parentRunId": parent}).info.run_id for n in NAMES}
    preds, models = [], {}
    with threadpool_limits(1):
        for n in NAMES:
            m = fit_learner(make_learner(n, random_state=0), X_s, y_s)
            p = m.predict_proba(X_t)
            preds.append(pd.DataFrame({ROW: np.arange(len(X_t)), "learner": n, "predicted": p.argmax(1),
                                       "proba_0": p[:, 0], "proba_1": p[:, 1]}))
            models[n] = {"learner": n, "weighting": "none", "run_id": run_ids[n]}
        store.write_stage("training", {"predictions": pd.concat(preds, ignore_index=True),
                                       "learners": pd.DataFrame({"learner": NAMES})},
                          key="t", params={}, inputs={}, extra={"models": models})
        estimation.fn(store, ctx=RunContext(uri, exp, parent, "", 0), k=5, run_ids={},
                      settings=EstimationSettings(n_boot=30))
    return {"tmp": tmp, "store": store, "uri": uri, "client": client, "parent": parent, "run_ids": run_ids,
            "ids": ids, "y_t": y_t, "preds": pd.concat(preds, ignore_index=True)}


@pytest.fixture(scope="module")
def kept_ids_run(tmp_path_factory):
    """A run whose ingest stage is the real one, with ``id_column="id"``: the ids live in target.parquet."""
    tmp = tmp_path_factory.mktemp("evaluate_ids")
    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    X = X.iloc[:, :5]
    X.columns = [f"x{i}" for i in range(5)]
    sp = split_biased(X.to_numpy(), y.to_numpy(), "kmm_threshold", random_state=2, feature=0)
    X_s, y_s = X.iloc[sp.source].reset_index(drop=True), y.to_numpy()[sp.source]
    X_t, y_t = X.iloc[sp.target].reset_index(drop=True), y.to_numpy()[sp.target]
    ids = np.array([f"k{7 * i + 3}" for i in range(len(X_t))])
    X_s.assign(label=y_s).to_csv(tmp / "source.csv", index=False)
    X_t.assign(id=ids).to_csv(tmp / "target.csv", index=False)
    store = StageStore(tmp / "runs", "flow-2")
    ingest.fn(store, f"file:{tmp / 'source.csv'}", f"file:{tmp / 'target.csv'}", "label",
              options=IngestOptions(id_column="id"))
    (tmp / "target.csv").unlink()  # evaluate must not need the table the run read: the ids are in the store
    return _finish(tmp, store, "flow-2", X_s, y_s, X_t, y_t, ids)


def _labels(r, rows, path_name):
    path = r["tmp"] / path_name
    pd.DataFrame({"id": r["ids"][rows], "label": r["y_t"][rows]}).to_csv(path, index=False)
    return f"file:{path}"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda r: pd.DataFrame({"id": ["nope-1"], "label": [1]}), "not in this run's batch"),
        (lambda r: pd.DataFrame({"id": r["ids"][:3], "label": ["maybe", 0, 1]}), "not classes of this run"),
        (lambda r: pd.DataFrame({"id": r["ids"][:3], "y": [0, 1, 1]}), "no label column 'label'"),
    ],
)
def test_bad_labels_change_nothing(finished_run, make, message):
    r = finished_run
    path = r["tmp"] / "bad.csv"
    make(r).to_csv(path, index=False)
    with pytest.raises(EvaluateError, match=message):
        evaluate_run("flow-1", f"file:{path}", id_column="id", tracking_uri=r["uri"])
    assert not (r["tmp"] / "runs" / HISTORY).exists()
    for run_id in r["run_ids"].values():
        assert not any(k.startswith("realized") for k in r["client"].get_run(run_id).data.metrics)


def test_unknown_run_is_named(finished_run, capsys):
    r = finished_run
    with pytest.raises(EvaluateError, match="no retrain or score run 'no-such-run'"):
        evaluate_run("no-such-run", _labels(r, [0], "one.csv"), id_column="id", tracking_uri=r["uri"])
    assert main(["--run", "no-such-run", "--labels", "file:/x.csv", "--tracking-uri", r["uri"]]) == 2
    assert capsys.readouterr().err.startswith("shiftflow: error: no retrain or score run")


def test_a_store_that_does_not_exist_is_refused_and_not_created(tmp_path, capsys):
    db = tmp_path / "elsewhere.db"
    assert main(["--run", "flow-1", "--labels", "file:/x.csv", "--tracking-uri", f"sqlite:///{db}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"shiftflow: error: no MLflow store at {db}: pass the --tracking-uri the retrain used (or set "
                   "SHIFTFLOW_HOME / MLFLOW_TRACKING_URI as it was)"]
    assert not db.exists()


def test_partial_labels_by_id_then_all_in_row_order(finished_run):
    r = finished_run
    n = len(r["ids"])
    rows = np.random.default_rng(0).permutation(n)[: n // 2]  # half the batch, shuffled
    table = evaluate_run(r["parent"], _labels(r, rows, "half.csv"), id_column="id", tracking_uri=r["uri"])
    est = r["store"].read_table("estimation", "estimates").set_index("candidate")
    for rec in table.to_dict("records"):
        g = r["preds"][r["preds"].learner == rec["candidate"]].set_index(ROW).loc[rows]
        acc = float(np.mean(g["predicted"].to_numpy() == r["y_t"][rows]))  # independent recomputation
        auc = roc_auc_score(r["y_t"][rows], g["proba_1"].to_numpy())
        assert rec["n_rows"] == n // 2
        m = r["client"].get_run(r["run_ids"][rec["candidate"]]).data.metrics
        assert m["realized.accuracy"] == pytest.approx(acc, abs=1e-12)
        assert m["realized.auc"] == pytest.approx(auc, abs=1e-12)
        assert m["estimate.abs_error"] == pytest.approx(abs(est.loc[rec["candidate"], "estimate"] - acc), abs=1e-12)
    parent = r["client"].get_run(r["parent"]).data.metrics
    assert parent["realized.accuracy"] == pytest.approx(table.set_index("candidate").loc["LR", "realized_accuracy"])
    hist = pd.read_parquet(r["tmp"] / "runs" / HISTORY)
    assert sorted(hist["candidate"]) == sorted(NAMES) and set(hist["flow_run_id"]) == {"flow-1"}

    # all rows in row order, found by the flow-run id; the run's history rows are replaced, not duplicated
    full = r["tmp"] / "full.csv"
    pd.DataFrame({"label": r["y_t"]}).to_csv(full, index=False)
    table2 = evaluate_run("flow-1", f"file:{full}", tracking_uri=r["uri"])
    lr = r["preds"][r["preds"].learner == "LR"].sort_values(ROW)
    assert table2.set_index("candidate").loc["LR", "realized_accuracy"] == pytest.approx(
        float(np.mean(lr["predicted"].to_numpy() == r["y_t"])))
    assert len(pd.read_parquet(r["tmp"] / "runs" / HISTORY)) == len(NAMES)
    arts = [a.path for a in r["client"].list_artifacts(r["parent"], "evaluation")]
    assert "evaluation/estimate_vs_realized.png" in arts


def test_shiftflow_evaluate_subcommand_end_to_end_with_kept_ids(kept_ids_run, capsys):
    """`shiftflow evaluate --run --labels --id-column` (the console script's parser and dispatch) on a run whose
    ingest kept the user's id column: logged numbers against an independent computation."""
    from flows.cli import main as shiftflow

    r = kept_ids_run
    n = len(r["ids"])
    rows = np.random.default_rng(5).permutation(n)[: n // 3]  # a third of the batch's labels arrive, shuffled
    labels = _labels(r, rows, "third.csv")
    # the documented default is row order: a partial file without --id-column is refused, with the hint
    assert shiftflow(["evaluate", "--run", "flow-2", "--labels", labels, "--tracking-uri", r["uri"]]) == 2
    assert "pass --id-column id" in capsys.readouterr().err
    assert shiftflow(["evaluate", "--run", "flow-2", "--labels", labels, "--id-column", "id",
                      "--tracking-uri", r["uri"]]) == 0
    assert f"evaluated {n // 3} labeled rows" in capsys.readouterr().out
    est = r["store"].read_table("estimation", "estimates").set_index("candidate")
    for name in NAMES:
        g = r["preds"][r["preds"].learner == name].set_index(ROW).loc[rows]
        acc = float(np.mean(g["predicted"].to_numpy() == r["y_t"][rows]))  # independent recomputation
        m = r["client"].get_run(r["run_ids"][name]).data.metrics
        assert m["realized.accuracy"] == pytest.approx(acc, abs=1e-12)
        assert m["realized.auc"] == pytest.approx(roc_auc_score(r["y_t"][rows], g["proba_1"]), abs=1e-12)
        assert m["realized.n_rows"] == n // 3
        assert m["estimate.abs_error"] == pytest.approx(abs(est.loc[name, "estimate"] - acc), abs=1e-12)
    lr = r["preds"][r["preds"].learner == "LR"].set_index(ROW).loc[rows]
    parent = r["client"].get_run(r["parent"]).data.metrics
    assert parent["realized.accuracy"] == pytest.approx(float(np.mean(lr["predicted"].to_numpy() == r["y_t"][rows])))
    hist = pd.read_parquet(r["tmp"] / "runs" / HISTORY)
    assert set(hist["flow_run_id"]) == {"flow-2"} and sorted(hist["candidate"]) == sorted(NAMES)


def test_labels_no_candidate_tells_apart_are_warned_of():
    """Every realised AUC ≤ 0.6 (chance): the labels may be another batch's (helper-39: a night-2 file given for
    night 1 was taken silently). One candidate above it, a missing AUC (more than two classes) or a score run: no
    warning."""
    from flows.evaluate import unrelated_labels_warning
    from shiftlib.realized import CHANCE_AUC

    assert CHANCE_AUC == 0.6
    chance = pd.DataFrame({"candidate": ["LR", "NB"], "realized_auc": [0.52, 0.6]})
    words = unrelated_labels_warning(chance)
    assert words is not None and "realised AUC ≤ 0.6 for all 2" in words and "it replaces these records" in words
    assert unrelated_labels_warning(chance.assign(realized_auc=[0.52, 0.61])) is None
    assert unrelated_labels_warning(chance.assign(realized_auc=[0.52, float("nan")])) is None
