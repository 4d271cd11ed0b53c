"""The champion stage against a real (temp sqlite) MLflow registry, on stages written by the real ingest,
training and estimation tasks: version descriptions and tags, the served model as a run output, no new version
on a rerun with identical data, the gate that scores the served champion as it is, registry safety (input
schemas, a one-class model) and the decision events."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from shiftlib.errors import ShiftflowInputError
from tasks.estimation import EstimationSettings, estimation
from tasks.ingest import ingest
from tasks.store import StageStore, sha256_file
from tasks.tracking import RunContext
from tasks.training import collect_training, train_learner

SECRET = "s3cr3t-pw"
NAMES = ("LR", "NB")


def _table(rng: np.random.Generator, n: int, shift: float = 0.0, extra: bool = False) -> pd.DataFrame:
    df = pd.DataFrame({"income": rng.normal(50 + shift, 10, n).round(2), "plan": rng.choice(["basic", "gold"], n)})
    df["y"] = np.where(df["income"] + 15 * (df["plan"] == "gold") + rng.normal(0, 6, n) > 60, "yes", "no")
    if extra:
        df.insert(1, "region", rng.choice(["n", "s"], n))
    return df


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    from tasks.tracking import ensure_experiment

    root = tmp_path_factory.mktemp("champion")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    exp = ensure_experiment(uri, "champion-test", root / "artifacts")
    rng = np.random.default_rng(0)
    tables = {"src": _table(rng, 160), "tgt": _table(rng, 120), "tgt2": _table(rng, 120, shift=8.0),
              "far": _table(rng, 120, shift=1000.0), "other_src": _table(rng, 160, extra=True),
              "other_tgt": _table(rng, 120, extra=True), "new_src": _table(rng, 160)}
    # yesterday's source grown by 40 rows: 40 of 200 are new to a model fitted on src (fewer than half)
    tables["grown_src"] = pd.concat([tables["src"], _table(rng, 40)], ignore_index=True)
    for name, df in tables.items():
        (df if name.endswith("src") else df.drop(columns="y")).to_csv(root / f"{name}.csv", index=False)
    return {"root": root, "uri": uri, "exp": exp}


def _store(reg, run_id: str, target: str = "tgt", source: str = "src") -> tuple[StageStore, str]:
    """Ingest, train LR and NB, estimate: the stages the champion stage reads, as the flow writes them."""
    client = MlflowClient(reg["uri"])
    parent = client.create_run(reg["exp"], run_name=run_id).info.run_id
    store = StageStore(reg["root"] / "runs", run_id)
    # a source given as a SQL URL would carry a password: the description masks it (the file is what is read)
    ingest.fn(store, f"file:{reg['root'] / f'{source}.csv'}", f"file:{reg['root'] / f'{target}.csv'}", "y")
    ctx = _ctx(reg, parent, "")
    collect_training.fn(store, [train_learner.fn(store, n, ctx=ctx, cv_folds=3) for n in NAMES], 0, 3)
    run_ids = {n: m["run_id"] for n, m in store.manifest("training")["extra"]["models"].items()}
    estimation.fn(store, ctx=ctx, k=5, run_ids=run_ids, settings=EstimationSettings(n_boot=20))
    return store, parent


def _ctx(reg, parent: str, flow_run_id: str) -> RunContext:
    """Where a test run logs: the registry's store and experiment, its parent run, seed 0."""
    return RunContext(tracking_uri=reg["uri"], experiment_id=reg["exp"], parent_run_id=parent,
                      flow_run_id=flow_run_id, seed=0)


def _selection(chosen: str = "LR") -> dict:
    return {"selector": "scv", "chosen": chosen,
            "scores": [{"selector": "scv", "learner": "LR", "score": 0.8}, {"selector": "scv", "learner": "NB",
                                                                           "score": 0.7}]}


def _run(reg, store: StageStore, parent: str, name: str = "shop-model", chosen: str = "LR") -> dict:
    from tasks.champion import GatePolicy, champion

    return champion.fn(store, _selection(chosen), ctx=_ctx(reg, parent, store.run_id), model_name=name,
                       policy=GatePolicy(k=5))


def test_versions_carry_description_tags_and_evidence_and_reruns_add_none(registry):
    from tasks.champion import EVIDENCE
    from tasks.served import SCHEMA, input_schema
    from tasks.tracking import model_id

    client = MlflowClient(registry["uri"])
    first_store, parent1 = _store(registry, "run-1")
    first = _run(registry, first_store, parent1)
    assert (first["decision"], first["gate_decision"], first["version"], first["new_version"]) == (
        "champion", "promoted", "1", True)

    v1 = client.get_model_version("shop-model", "1")
    ingest_dir = Path(first_store.stage_dir("ingest"))
    src_sha, tgt_sha = sha256_file(ingest_dir / "source.parquet"), sha256_file(ingest_dir / "target.parquet")
    assert v1.tags["source_sha256"] == src_sha and v1.tags["target_sha256"] == tgt_sha
    features = first_store.manifest("ingest")["extra"]["feature_columns"]
    assert v1.tags["features_sha256"] == hashlib.sha256(json.dumps(features).encode()).hexdigest()[:16]
    assert v1.tags["selector"] == "scv" and v1.tags["candidate"] == "LR" and v1.tags["estimate.method"] == "median"
    assert v1.tags[SCHEMA] == input_schema(first_store)["digest"] and v1.tags["shiftflow.decision"] == "promoted"
    assert v1.tags[EVIDENCE] == f"runs:/{parent1}/gate/LR/evidence.parquet"
    est = first_store.read_table("estimation", "estimates").set_index("candidate").loc["LR"]
    assert float(v1.tags["estimate.accuracy"]) == pytest.approx(float(est["estimate"]))
    d = v1.description
    assert "selector **scv** (score 0.8000) among 2 candidates" in d
    assert f"{est['estimate']:.3f} [{est['ci_low']:.3f}, {est['ci_high']:.3f}] (median, 95% interval)" in d
    assert src_sha in d and tgt_sha in d
    assert f"[{parent1}](#/experiments/{registry['exp']}/runs/{parent1})" in d
    outputs = client.get_run(parent1).outputs.model_outputs
    assert [o.model_id for o in outputs] == [model_id(first_store.manifest("training")["extra"]["models"]["LR"]["model_uri"])]
    assert client.get_run(parent1).data.tags["shiftflow.decision"] == "promoted"

    # the same data again (another flow run, identical Parquet bytes): no new version, champion unchanged
    again_store, parent2 = _store(registry, "run-2")
    again = _run(registry, again_store, parent2)
    assert (again["decision"], again["version"], again["new_version"]) == ("unchanged", "1", False)
    assert again["reason"].startswith("no new version: v1 already holds this model")
    assert len(client.search_model_versions("name = 'shop-model'")) == 1
    tags = client.get_run(parent2).data.tags
    assert tags["champion.decision"] == "unchanged" and tags["champion.new_version"] == "false"

    # a new target batch: a new version of the same recipe on the same source predicts as the champion does
    batch_store, parent3 = _store(registry, "run-3", target="tgt2")
    batch = _run(registry, batch_store, parent3)
    assert (batch["decision"], batch["gate_decision"], batch["version"], batch["new_version"]) == (
        "challenger", "kept", "2", True)
    assert "champion's class on every batch row" in batch["reason"]
    aliases = client.get_registered_model("shop-model").aliases
    assert {k: str(v) for k, v in aliases.items()} == {"champion": "1", "challenger": "2"}


def test_the_gate_scores_the_served_champion_as_it_is(registry):
    """NB then LR on the shifted batch: the champion (NB v1, fitted on run-a's tables) is estimated from its
    kept evidence and its own model's probabilities on today's rows; the gate's numbers equal that computation
    done here independently."""
    import mlflow.sklearn

    from shiftlib.decisions import champion_predictions, domain_auc, gate
    from shiftlib.estimation import StoredPredictions
    from tasks.champion import _today_rows
    from tasks.estimation import read_predictions

    store_a, parent_a = _store(registry, "run-a", target="tgt2")
    first = _run(registry, store_a, parent_a, name="gate-model", chosen="NB")
    assert first["gate_decision"] == "promoted"
    store_b, parent_b = _store(registry, "run-b", target="tgt2")  # same tables: shared source
    rec = _run(registry, store_b, parent_b, name="gate-model", chosen="LR")
    assert rec["gate_decision"] in ("promoted", "kept", "undecided") and 0.0 <= rec["p_better"] <= 1.0

    nb_a = read_predictions(store_a, "NB", np.arange(2))
    served = mlflow.sklearn.load_model("models:/gate-model/1")
    raw = _today_rows(store_b, 0, None)
    X_old = store_a.read_table("ingest", "source").drop(columns=["_row", "_label"])
    champ = champion_predictions(StoredPredictions("champion", np.arange(2), nb_a.y_source, nb_a.proba_source,
                                                   np.zeros((0, 2)), nb_a.folds),
                                 served.predict_proba(raw), X_old, served.named_steps["prepare"].transform(raw),
                                 random_state=0)
    new = read_predictions(store_b, "LR", np.arange(2))
    est = float(store_b.read_table("estimation", "estimates").set_index("candidate").loc["LR", "estimate"])
    X_today = store_b.read_table("ingest", "target").drop(columns=["_row"])
    # one table for both runs: the champion's source and the new version's are the same rows
    auc = domain_auc(X_old, X_today, random_state=0)
    ref = gate(new, champ, new_estimate=est, shared_source=True, random_state=0, new_auc=auc, champion_auc=auc)
    assert (rec["gate_decision"], rec["p_better"]) == (ref.decision, pytest.approx(ref.p_better))
    assert rec["incumbent_score"] == pytest.approx(ref.details["champion_estimate"])
    # the pair the reason prints and MLflow keeps is the pair the gate compared (helper-33: a selector score was
    # logged beside the champion's estimate)
    assert rec["new_score"] == pytest.approx(ref.details["new_estimate_paired"])
    assert f"({ref.details['new_estimate_paired']:.3f} vs {ref.details['champion_estimate']:.3f})" in rec["reason"]
    tags = MlflowClient(registry["uri"]).get_run(parent_b).data
    assert tags.tags["shiftflow.decision"] == ref.decision
    assert tags.metrics["champion.p_better"] == pytest.approx(ref.p_better)
    assert tags.metrics["champion.new_score"] == pytest.approx(ref.details["new_estimate_paired"])


def test_the_gate_scores_the_champion_on_todays_source_rows_it_never_saw(registry):
    """Revision 5: NB v1 fitted on src; today's source new_src holds other rows. Both are estimated on those rows, the
    champion by its own model's probabilities there and on the batch; the gate's numbers equal that computation
    done here independently from the CSV files (rows new to v1 found by a merge on the feature values: a few of
    new_src's rows repeat one of src's, and count as seen). With src grown by 40 rows (40 of 200 new to v1, under
    HELDOUT_MIN_SHARE) the champion's stored evidence decides, as before."""
    import mlflow.sklearn

    from shiftlib.decisions import champion_predictions, domain_auc, gate, heldout_pair
    from shiftlib.estimation import StoredPredictions
    from tasks.champion import FIT_ROWS, _today_rows
    from tasks.estimation import OOF, read_predictions

    client, root = MlflowClient(registry["uri"]), registry["root"]
    store_a, parent_a = _store(registry, "run-h1", target="tgt2")
    assert _run(registry, store_a, parent_a, name="heldout-model", chosen="NB")["gate_decision"] == "promoted"
    assert client.get_model_version("heldout-model", "1").tags[FIT_ROWS] == \
        f"runs:/{parent_a}/gate/NB/fit_rows.parquet"
    served = mlflow.sklearn.load_model("models:/heldout-model/1")

    def expected(store, source: str, heldout: bool):
        new = read_predictions(store, "LR", np.arange(2))
        oof = store.read_table("estimation", OOF, columns=["candidate", "source_row"])
        rows = oof.loc[oof["candidate"] == "LR", "source_row"].to_numpy()
        src = pd.read_csv(root / f"{source}.csv").drop(columns="y").iloc[rows]
        raw_t = _today_rows(store, 0, None)
        X_new = store.read_table("ingest", "source").drop(columns=["_row", "_label"]).iloc[rows]
        X_today = store.read_table("ingest", "target").drop(columns=["_row"])
        auc = domain_auc(X_new, X_today, random_state=0)
        # rows new to v1: no row of src (v1's source) has the same feature values
        fitted = pd.read_csv(root / "src.csv").drop(columns="y").drop_duplicates().assign(_seen=True)
        unseen = src.merge(fitted, on=list(src.columns), how="left")["_seen"].isna().to_numpy()
        if heldout:
            new, champ = heldout_pair(new, unseen, served.predict_proba(src[unseen]), served.predict_proba(raw_t))
            champ_auc = auc
        else:
            nb_a = read_predictions(store_a, "NB", np.arange(2))
            X_old = store_a.read_table("ingest", "source").drop(columns=["_row", "_label"])
            champ = champion_predictions(StoredPredictions("champion", np.arange(2), nb_a.y_source,
                                                           nb_a.proba_source, np.zeros((0, 2)), nb_a.folds),
                                         served.predict_proba(raw_t), X_old,
                                         served.named_steps["prepare"].transform(raw_t), random_state=0)
            champ_auc = domain_auc(X_old, served.named_steps["prepare"].transform(raw_t), random_state=0)
        est = float(store.read_table("estimation", "estimates").set_index("candidate").loc["LR", "estimate"])
        return gate(new, champ, new_estimate=est, shared_source=heldout, random_state=0, new_auc=auc,
                    champion_auc=champ_auc), int(unseen.sum())

    for run_id, source, heldout in (("run-h2", "new_src", True), ("run-h3", "grown_src", False)):
        store, parent = _store(registry, run_id, target="tgt2", source=source)
        rec = _run(registry, store, parent, name="heldout-model", chosen="LR")
        ref, n_unseen = expected(store, source, heldout)
        assert (rec["gate_decision"], rec["p_better"]) == (ref.decision, pytest.approx(ref.p_better))
        assert rec["incumbent_score"] == pytest.approx(ref.details["champion_estimate"])
        n = 160 if heldout else 200
        assert n_unseen > n / 2 if heldout else 0 < n_unseen <= 40
        said = (f"both estimated on the {n_unseen} of today's {n} labeled source rows unlike any row v1 was fitted "
                "on: a row equal to one of those counts as seen)")
        assert (said in rec["reason"]) == heldout
        if rec["gate_decision"] == "promoted":  # the next run compares with the new champion: start again
            client.set_registered_model_alias("heldout-model", "champion", "1")


def test_an_unrelated_table_with_the_same_label_never_takes_the_champion(registry):
    from tasks.served import default_model_name, input_schema

    client = MlflowClient(registry["uri"])
    store, parent = _store(registry, "run-s1")
    _run(registry, store, parent, name="same-label")
    other, parent_o = _store(registry, "run-o1", source="other_src", target="other_tgt")
    # the default names differ: the input schema is in them, whatever the label is called
    assert default_model_name("shiftflow-y", input_schema(store)) != default_model_name("shiftflow-y",
                                                                                        input_schema(other))
    with pytest.raises(ShiftflowInputError, match=r"registered model 'same-label' serves other input columns.*"
                       r"--model-name"):
        _run(registry, other, parent_o, name="same-label")
    assert len(client.search_model_versions("name = 'same-label'")) == 1
    assert {k: str(v) for k, v in client.get_registered_model("same-label").aliases.items()} == {"champion": "1"}


def test_a_one_class_model_is_never_champion(registry):
    client = MlflowClient(registry["uri"])
    store, parent = _store(registry, "run-far", target="far")  # incomes 1000 above the source's: all "yes"
    rec = _run(registry, store, parent, name="far-model")
    assert (rec["decision"], rec["gate_decision"]) == ("challenger", "refused")
    assert "one class" in rec["reason"]
    assert rec["new_one_class"] is True and rec["label_free_refusal"] is None  # no label can pass it: the report
    assert {k: str(v) for k, v in client.get_registered_model("far-model").aliases.items()} == {"challenger": "1"}


def test_a_first_version_beyond_its_sources_reach_serves_nothing_until_labels(registry, monkeypatch):
    """No champion yet, and the batch lies where the new version's source has no rows (the domain AUC the stage
    computes, set here to 0.97 ≥ 0.95): revision 7 leaves it undecided, a challenger, and nothing serves; the same
    version with target labels (they chose it) becomes champion."""
    import tasks.champion as tc

    client = MlflowClient(registry["uri"])
    aucs: list[float] = []
    monkeypatch.setattr(tc, "domain_auc", lambda *a, **k: aucs.append(0.97) or 0.97)
    store, parent = _store(registry, "run-first-far")
    rec = _run(registry, store, parent, name="first-far-model")
    assert aucs == [0.97]  # computed for a first version too
    assert (rec["decision"], rec["gate_decision"], rec["incumbent_version"]) == ("challenger", "undecided", None)
    assert rec["reason"].startswith("no champion to compare with, and its source does not reach this batch (the gate's domain "
                                    "AUC 0.970 ≥ 0.95)")
    assert {k: str(v) for k, v in client.get_registered_model("first-far-model").aliases.items()} == {"challenger": "1"}
    assert client.get_run(parent).data.tags["shiftflow.decision"] == "undecided"
    from shiftlib.selection.fewlabel import LabelPlan

    # labels of a plan over every candidate (no rule contender): they chose the model, and step 2 promotes it
    plan = LabelPlan(np.array([0, 3, 7]), np.full(3, 0.5), np.zeros(3, int), 3, 120, list(NAMES))
    labeled = {"status": "labeled", "labels": {0: 1, 3: 0, 7: 0}, "plan": plan}
    store2, parent2 = _store(registry, "run-first-far-labeled")  # the next run, with labels: the same version
    again = tc.champion.fn(store2, _selection(), ctx=_ctx(registry, parent2, store2.run_id),
                           model_name="first-far-model", policy=tc.GatePolicy(k=5), labeled=labeled)
    assert (again["decision"], again["gate_decision"], again["version"]) == ("champion", "promoted", "1")
    assert again["new_one_class"] is False and again["label_free_refusal"] is None
    # the version that serves is no longer the challenger (helper-32 saw {'challenger': 2, 'champion': 2})
    assert {k: str(v) for k, v in client.get_registered_model("first-far-model").aliases.items()} == {"champion": "1"}


def test_the_gate_policy_passes_what_to_do_with_an_unvouched_champion(monkeypatch):
    """``GatePolicy.unvouched`` (config ``unvouched_champion``) reaches ``shiftlib.decisions.gate``'s step 4 as given;
    its default is shiftlib's policy, ``ask`` (reports/decisions_fresh.md)."""
    import pandas as pd

    import tasks.champion as tc
    from shiftlib.decisions import UNVOUCHED_CHAMPION, GateDecision

    assert tc.GatePolicy(k=10).unvouched == UNVOUCHED_CHAMPION == "ask"
    seen: list[dict] = []

    def fake_gate(new, champion=None, **kw):
        seen.append({"champion": champion, **kw})
        return GateDecision("kept", 0.5, "recorded", {})

    monkeypatch.setattr(tc, "gate", fake_gate)
    monkeypatch.setattr(tc, "champion_evidence", lambda *a, **k: ("champ-P", 0.97))
    monkeypatch.setattr(tc, "_today_encoded", lambda *a, **k: pd.DataFrame({"a": [0.0, 1.0]}))
    monkeypatch.setattr(tc, "domain_auc", lambda *a, **k: 0.6)
    inc = type("Inc", (), {"version": "1", "tags": {}})()
    evidence = pd.DataFrame({"x:a": [0.0, 1.0], "y": [0, 1]})
    for unvouched in ("promote", "ask"):
        seen.clear()
        tc._gate(None, None, "m", inc, "new-P", evidence, None, "sha", seed=0, rows=None, confidence=0.9,
                 unvouched=unvouched)
        assert seen[-1]["champion"] == "champ-P" and seen[-1]["unvouched"] == unvouched
        assert seen[-1]["champion_auc"] == 0.97 and seen[-1]["new_auc"] == 0.6


def test_a_first_versions_labels_reach_the_gate_by_their_plans_kind(monkeypatch):
    """No champion: the labels' new − rule decide alone from a pair plan (``labels``); from a plan over every
    candidate they are ``rule_labels`` (the model they chose is refused at or below the rule, else promoted)."""
    import pandas as pd

    import tasks.champion as tc
    from shiftlib.decisions import GateDecision

    seen: list[dict] = []

    def fake_gate(new, champion=None, **kw):
        seen.append({"champion": champion, **kw})
        return GateDecision("promoted", float("nan"), "recorded", {})

    monkeypatch.setattr(tc, "gate", fake_gate)
    monkeypatch.setattr(tc, "label_differences", lambda *a, **k: ((-0.094, 0.0, 17), None))
    monkeypatch.setattr(tc, "_today_encoded", lambda *a, **k: pd.DataFrame({"a": [0.0, 1.0]}))
    monkeypatch.setattr(tc, "domain_auc", lambda *a, **k: 0.6)
    evidence = pd.DataFrame({"x:a": [0.0, 1.0], "y": [0, 1]})
    for pair, labels, rule_labels in (("HGB", (-0.094, 0.0, 17), None), (None, None, (-0.094, 0.0, 17))):
        labeled = {"status": "labeled", "labels": {0: 1}, "pair": pair}
        tc._gate(None, None, "m", None, "new-P", evidence, None, "sha", seed=0, rows=None, confidence=0.9,
                 labeled=labeled, chosen="HGB")
        assert seen[-1]["champion"] is None and seen[-1]["target_labels"] == 1
        assert (seen[-1]["labels"], seen[-1]["rule_labels"]) == (labels, rule_labels)


def test_heldout_evidence_falls_back_with_the_reason(monkeypatch, tmp_path):
    """Each way revision 5 cannot be used returns why (the stored evidence then decides): no hashes kept, every
    row seen, a batch column missing from today's source rows, a model that cannot take them."""
    import mlflow.artifacts

    import tasks.champion as tc
    from shiftlib.estimation import StoredPredictions
    from tasks.served import row_hashes

    src = pd.DataFrame({"_row": [0, 1, 2, 3], "a": [1.0, 2.0, 3.0, 4.0], "b": ["x", "y", "x", "y"]})

    class Store:
        def read_table(self, stage, name, columns=None):
            assert (stage, name) == ("ingest", "source_rows")
            return src

    def fitted(rows: pd.DataFrame) -> str:
        path = tmp_path / "fit_rows.parquet"
        pd.DataFrame({"_h": row_hashes(rows)}).to_parquet(path)
        return str(path)

    y = np.array([0, 1, 0, 1])
    new = StoredPredictions("LR", np.arange(2), y, np.eye(2)[y], np.eye(2)[[0, 1]], np.array([0, 1, 0, 1]))
    inc = type("Inc", (), {"version": "3", "tags": {}})()
    assert tc.heldout_evidence("m", inc, Store(), new, np.arange(4), seed=0, rows=None) == \
        "v3 keeps no list of the rows it was fitted on"
    inc.tags = {tc.FIT_ROWS: "runs:/r/gate/LR/fit_rows.parquet"}
    where = {"path": fitted(src.drop(columns="_row"))}
    monkeypatch.setattr(mlflow.artifacts, "download_artifacts", lambda **kw: where["path"])
    assert tc.heldout_evidence("m", inc, Store(), new, np.arange(4), seed=0, rows=None) == \
        "v3 was fitted on all of today's 4 source rows"
    where["path"] = fitted(src.drop(columns="_row").iloc[:1])  # rows 1–3 are new to v3
    monkeypatch.setattr(tc, "_today_rows", lambda *a, **k: pd.DataFrame({"a": [0.5], "c": ["new"]}))
    assert tc.heldout_evidence("m", inc, Store(), new, np.arange(4), seed=0, rows=None) == \
        "today's source rows lack the batch's columns ['c']"
    monkeypatch.setattr(tc, "_today_rows", lambda *a, **k: pd.DataFrame({"a": [0.5, 1.5], "b": ["x", "y"]}))

    def refuses(*a, **k):
        raise ValueError("could not convert 'n/a'")

    monkeypatch.setattr(tc, "served_proba", refuses)
    assert tc.heldout_evidence("m", inc, Store(), new, np.arange(4), seed=0, rows=None) == \
        "v3 cannot score today's source rows (ValueError: could not convert 'n/a')"
    # it can: rows 1–3 (3 of 4, both classes) → the pair on them
    def scores(name, inc, raw, k, also):  # row i of (batch, then the unseen source rows) gets (i/10, 1 − i/10)
        i = np.arange(len(raw) + len(also)) / 10
        return np.c_[i, 1 - i], None

    monkeypatch.setattr(tc, "served_proba", scores)
    sub, champ = tc.heldout_evidence("m", inc, Store(), new, np.arange(4), seed=0, rows=None)
    assert np.array_equal(sub.y_source, [1, 0, 1]) and np.array_equal(sub.proba_source, np.eye(2)[[1, 0, 1]])
    # the champion's probabilities are split as scored: the batch's 2 rows first, then the 3 unseen source rows
    np.testing.assert_allclose(champ.proba_target, [[0.0, 1.0], [0.1, 0.9]])
    np.testing.assert_allclose(champ.proba_source, [[0.2, 0.8], [0.3, 0.7], [0.4, 0.6]])


def test_row_hashes_see_one_row_alike_across_typings():
    """The same raw row hashes alike when a run typed its columns otherwise (int 1 and float 1.0, a category and a
    string, another column order), and unlike when one value differs."""
    from tasks.served import row_hashes

    a = pd.DataFrame({"n": [1, 2], "c": ["x", "y"]})
    b = pd.DataFrame({"c": pd.Categorical(["x", "y"]), "n": [1.0, 2.0]})
    assert np.array_equal(row_hashes(a), row_hashes(b))
    c = pd.DataFrame({"n": [1.0, 2.5], "c": ["x", "y"]})
    assert row_hashes(a)[0] == row_hashes(c)[0] and row_hashes(a)[1] != row_hashes(c)[1]
    assert row_hashes(a).dtype == np.uint64 and len(set(row_hashes(a))) == 2


def test_a_refused_new_version_says_whether_anything_vouches_for_the_champion_it_leaves_serving(monkeypatch):
    """Step 1 refuses a one-class new version before any champion is weighed; the champion's side is still read
    (its stored evidence here) so that the record says when nothing vouches for the version that serves on, and
    with labels of a plan over both, their difference joins the reason. The decision itself stays the refusal."""
    import pandas as pd

    import tasks.champion as tc
    from shiftlib.estimation import StoredPredictions

    y = np.r_[np.zeros(30, int), np.ones(30, int)]
    onehot = np.eye(2)
    one = StoredPredictions("n", np.array([0, 1]), y, onehot[y], onehot[np.zeros(40, int)], np.arange(60) % 2)
    champ = StoredPredictions("c", np.array([0, 1]), y, onehot[y] * 0.8 + 0.1, onehot[np.arange(40) % 2] * 0.8 + 0.1,
                              np.arange(60) % 2)
    monkeypatch.setattr(tc, "_today_encoded", lambda *a, **k: pd.DataFrame({"a": [0.0, 1.0]}))
    monkeypatch.setattr(tc, "domain_auc", lambda *a, **k: 0.6)
    inc = type("Inc", (), {"version": "1", "tags": {}})()
    evidence = pd.DataFrame({"x:a": [0.0, 1.0], "y": [0, 1]})
    for auc, why in ((0.97, "its source does not reach this batch (the gate's domain AUC 0.970 ≥ 0.95)"), (0.6, None)):
        monkeypatch.setattr(tc, "champion_evidence", lambda *a, auc=auc, **k: (champ, auc))
        g, _ = tc._gate(None, None, "m", inc, one, evidence, None, "sha", seed=0, rows=None, confidence=0.9)
        assert g.decision == "refused" and g.reason.startswith("it predicts one class for 100.0% of the batch")
        assert g.details["champion_unvouched"] == why
    monkeypatch.setattr(tc, "label_differences", lambda *a, **k: ((0.3, 0.05, 40), None))
    g, _ = tc._gate(None, None, "m", inc, one, evidence, None, "sha", seed=0, rows=None, confidence=0.9)
    assert g.decision == "refused" and g.reason.endswith("; with 40 target labels it is 0.300 ± 0.050 (one standard "
                                                         "error) more accurate than v1 on this batch")
    monkeypatch.setattr(tc, "label_differences", lambda *a, **k: ((-0.068, 0.04, 40), None))
    g, _ = tc._gate(None, None, "m", inc, one, evidence, None, "sha", seed=0, rows=None, confidence=0.9)
    assert g.reason.endswith("; with 40 target labels it is 0.068 ± 0.040 (one standard error) less accurate than v1 "
                             "on this batch")
    monkeypatch.setattr(tc, "label_differences", lambda *a, **k: ((0.3, 0.05, 40), None))
    assert g.details["labels"] == 40
    # a refusal on the margin over the rule, where the new version's source does not reach the batch: said so
    low = StoredPredictions("low", np.array([0, 1]), y, onehot[1 - y] * 0.8 + 0.1,
                            onehot[np.arange(40) % 2] * 0.8 + 0.1, np.arange(60) % 2)  # wrong on every source row
    monkeypatch.setattr(tc, "label_differences", lambda *a, **k: (None, None))
    monkeypatch.setattr(tc, "champion_evidence", lambda *a, **k: (champ, 0.6))
    for auc, said in ((0.99, True), (0.6, False)):
        monkeypatch.setattr(tc, "domain_auc", lambda *a, auc=auc, **k: auc)
        g, _ = tc._gate(None, None, "m", inc, low, evidence, None, "sha", seed=0, rows=None, confidence=0.9)
        assert g.decision == "refused" and g.reason.startswith("it is estimated no more accurate than the majority")
        assert g.reason.endswith(" — a label-free estimate made where its source does not reach this batch (the "
                                 "gate's domain AUC 0.990 ≥ 0.95)") is said
    # without the champion's evidence the refusal stands as it is (the recipe gate never decides for it)
    monkeypatch.setattr(tc, "champion_evidence", lambda *a, **k: "no evidence kept")
    g, why = tc._gate(None, None, "m", inc, one, evidence, None, "sha", seed=0, rows=None, confidence=0.9)
    assert (g.decision, why) == ("refused", "") and "champion_unvouched" not in g.details
