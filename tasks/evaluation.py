"""Stage ``evaluation``: when the target's labels were held out, score every candidate's target
predictions against them (truth for comparing selectors; never used to train or select)."""

from __future__ import annotations

from typing import Any

import mlflow
import numpy as np
import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE
from sklearn.metrics import accuracy_score, roc_auc_score

from tasks.ingest import ROW, load_target_labels
from tasks.store import StageStore, stage_key
from tasks.tracking import log_metrics


@task(name="evaluate-on-target", cache_policy=NO_CACHE)
def evaluate(store: StageStore, run_ids: dict[str, str], *, tracking_uri: str) -> pd.DataFrame | None:
    """Target accuracy/AUC per candidate → ``evaluation/target_scores.parquet``; logged as ``eval.*``."""
    y_t = load_target_labels(store)
    if y_t is None:
        return None
    preds = store.read_table("training", "predictions")
    rows: list[dict[str, Any]] = []
    for name, g in preds.groupby("learner", sort=False):
        g = g.sort_values(ROW)
        row = {"learner": name, "target_accuracy": float(accuracy_score(y_t, g["predicted"]))}
        if "proba_1" in g and len(np.unique(y_t)) == 2 and g.filter(like="proba_").shape[1] == 2:
            row["target_auc"] = float(roc_auc_score(y_t, g["proba_1"]))
        rows.append(row)
    table = pd.DataFrame(rows)
    ing = store.manifest("ingest")["files"]
    tr = store.manifest("training")["files"]
    inputs = {"labels": ing["target_labels.parquet"]["sha256"], "predictions": tr["predictions.parquet"]["sha256"]}
    store.write_stage("evaluation", {"target_scores": table}, key=stage_key("evaluation", {}, inputs),
                      params={}, inputs=inputs)
    mlflow.set_tracking_uri(tracking_uri)
    client = mlflow.tracking.MlflowClient(tracking_uri)
    for r in rows:
        log_metrics(client, run_ids[r["learner"]], {f"eval.{k}": v for k, v in r.items() if k != "learner"})
    return table
