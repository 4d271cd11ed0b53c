"""The champion stage against a real (temp sqlite) MLflow registry, on hand-made stage manifests: version
descriptions and tags, the served model as a run output, and no new version on a rerun with identical data."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB

from tasks.store import StageStore, sha256_file

SECRET = "s3cr3t-pw"
SOURCE = f"sql:postgresql+psycopg://alice:{SECRET}@127.0.0.1:5432/shop::orders"


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    import mlflow

    from tasks.tracking import ensure_experiment, log_sklearn_model, model_id

    root = tmp_path_factory.mktemp("champion")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    exp = ensure_experiment(uri, "champion-test", root / "artifacts")
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=60), "b": rng.normal(size=60)})
    y = (X["a"] + 0.3 * rng.normal(size=60) > 0).astype(int)
    uris = {}
    with mlflow.start_run(experiment_id=exp, run_name="models"):
        for name, est in (("LR", LogisticRegression()), ("NB", GaussianNB())):
            uris[name] = log_sklearn_model(est.fit(X, y), f"model-{name}", X)
    assert all(model_id(u) for u in uris.values())  # LoggedModels (models:/m-…)
    return {"root": root, "uri": uri, "exp": exp, "X": X, "y": y, "model_uris": uris}


def _store(reg, run_id: str, target_shift: float) -> StageStore:
    """Stage manifests as the flow writes them: ingest (source, target), training (two candidates), estimation."""
    store = StageStore(reg["root"] / "runs", run_id)
    X, y = reg["X"], reg["y"]
    src = X.assign(_label=y).reset_index(names="_row")
    tgt = (X + target_shift).reset_index(names="_row")
    store.write_stage("ingest", {"source": src, "target": tgt}, key=f"ingest-{run_id}",
                      params={"source": SOURCE, "target": "file:/data/batch.csv"}, inputs={},
                      extra={"feature_columns": ["a", "b"]})
    models = {n: {"learner": n, "weighting": "none", "model_uri": u} for n, u in reg["model_uris"].items()}
    store.write_stage("training", {}, key="training", params={}, inputs={}, extra={"models": models})
    est = pd.DataFrame({"candidate": ["LR", "NB"], "method": ["iwcv", "iwcv"], "estimate": [0.81, 0.74],
                        "ci_low": [0.70, 0.61], "ci_high": [0.90, 0.85], "confidence": [0.95, 0.95]})
    store.write_stage("estimation", {"estimates": est}, key="estimation", params={}, inputs={})
    return store


SELECTION = {"selector": "scv", "chosen": "LR",
             "scores": [{"selector": "scv", "learner": "LR", "score": 0.8}, {"selector": "scv", "learner": "NB",
                                                                            "score": 0.7}]}


def _run(reg, store: StageStore, name: str = "shop-model") -> tuple[dict, str]:
    from tasks.champion import champion

    parent = MlflowClient(reg["uri"]).create_run(reg["exp"], run_name=store.run_id).info.run_id
    rec = champion.fn(store, SELECTION, model_name=name, seed=0, k=5, tracking_uri=reg["uri"],
                      parent_run_id=parent, flow_run_id=store.run_id)
    return rec, parent


def test_versions_carry_description_and_tags_and_reruns_add_none(registry):
    from tasks.tracking import model_id

    client = MlflowClient(registry["uri"])
    first_store = _store(registry, "run-1", 0.0)
    first, parent1 = _run(registry, first_store)
    assert (first["decision"], first["version"], first["new_version"]) == ("champion", "1", True)

    v1 = client.get_model_version("shop-model", "1")
    ingest = Path(first_store.stage_dir("ingest"))
    src_sha, tgt_sha = sha256_file(ingest / "source.parquet"), sha256_file(ingest / "target.parquet")
    assert v1.tags["source_sha256"] == src_sha and v1.tags["target_sha256"] == tgt_sha
    assert v1.tags["features_sha256"] == hashlib.sha256(json.dumps(["a", "b"]).encode()).hexdigest()[:16]
    assert v1.tags["selector"] == "scv" and v1.tags["candidate"] == "LR" and v1.tags["estimate.method"] == "iwcv"
    assert float(v1.tags["estimate.accuracy"]) == 0.81 and float(v1.tags["selector_score"]) == 0.8
    # the description: selector and score, the estimate and interval, both digests, a link to the run
    d = v1.description
    assert "selector **scv** (score 0.8000) among 2 candidates" in d
    assert "0.810 [0.700, 0.900] (iwcv, 95% interval)" in d
    assert src_sha in d and tgt_sha in d
    assert f"[{parent1}](#/experiments/{registry['exp']}/runs/{parent1})" in d
    assert SECRET not in d and "alice:***@127.0.0.1" in d  # the password of the table reference is masked
    # the served model is an output of the parent run: the run page's "Logged models"
    outputs = client.get_run(parent1).outputs.model_outputs
    assert [o.model_id for o in outputs] == [model_id(registry["model_uris"]["LR"])]

    # the same data again (another flow run, identical Parquet bytes): no new version, champion unchanged
    again, parent2 = _run(registry, _store(registry, "run-2", 0.0))
    assert (again["decision"], again["version"], again["new_version"]) == ("unchanged", "1", False)
    assert again["reason"].startswith("no new version: v1 already holds this model")
    assert len(client.search_model_versions("name = 'shop-model'")) == 1
    tags = client.get_run(parent2).data.tags
    assert tags["champion.decision"] == "unchanged" and tags["champion.new_version"] == "false"
    assert [o.model_id for o in client.get_run(parent2).outputs.model_outputs] == [model_id(registry["model_uris"]["LR"])]

    # a new target batch: a new version; same recipe and score on it → a tie keeps the incumbent
    batch, _ = _run(registry, _store(registry, "run-3", 1.0))
    assert (batch["decision"], batch["version"], batch["new_version"]) == ("challenger", "2", True)
    assert batch["new_score"] == batch["incumbent_score"] == 0.8
    # that batch once more: v2 is found again, still loses the tie, and nothing is registered
    batch2, _ = _run(registry, _store(registry, "run-4", 1.0))
    assert (batch2["decision"], batch2["version"], batch2["new_version"]) == ("challenger", "2", False)
    assert batch2["reason"].startswith("no new version: v2 already holds this model")
    assert len(client.search_model_versions("name = 'shop-model'")) == 2
    aliases = client.get_registered_model("shop-model").aliases
    assert {k: str(v) for k, v in aliases.items()} == {"champion": "1", "challenger": "2"}
