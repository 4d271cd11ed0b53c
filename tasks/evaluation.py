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

from tasks.ingest import ROW, TARGET_LABELS, load_target_labels
from tasks.store import Read, StageOutput, StageStore
from tasks.tracking import RunContext, log_metrics

STAGE = "evaluation"
#: what the evaluation stage reads: the held-out target labels and the candidates' target predictions
READS = (TARGET_LABELS, Read("training", "predictions.parquet", "predictions"))
#: what later stages read of this one (the selection stage's agreement with the truth)
TARGET_SCORES = Read(STAGE, "target_scores.parquet", None, optional=True,
                     why="computed from the held-out labels and the candidates' predictions, both keyed")


def _compute(store: StageStore, y_t: np.ndarray) -> StageOutput:
    """Target accuracy (and AUC with two classes) of each candidate's stored predictions."""
    preds = store.read_table("training", "predictions")
    rows: list[dict[str, Any]] = []
    for name, g in preds.groupby("learner", sort=False):
        g = g.sort_values(ROW)
        row = {"learner": name, "target_accuracy": float(accuracy_score(y_t, g["predicted"]))}
        if "proba_1" in g and len(np.unique(y_t)) == 2 and g.filter(like="proba_").shape[1] == 2:
            row["target_auc"] = float(roc_auc_score(y_t, g["proba_1"]))
        rows.append(row)
    return StageOutput({"target_scores": pd.DataFrame(rows)})


@task(name="evaluate-on-target", cache_policy=NO_CACHE)
def evaluate(store: StageStore, run_ids: dict[str, str], *, ctx: RunContext) -> pd.DataFrame | None:
    """Target accuracy/AUC per candidate → ``evaluation/target_scores.parquet``; logged as ``eval.*`` into each
    candidate's nested run (``run_ids``) on ``ctx``'s tracking store. None when the target had no labels."""
    y_t = load_target_labels(store)
    if y_t is None:
        return None
    table = store.find_or_write(STAGE, {}, READS, lambda: _compute(store, y_t)).table("target_scores")
    mlflow.set_tracking_uri(ctx.tracking_uri)
    client = mlflow.tracking.MlflowClient(ctx.tracking_uri)
    for r in table.to_dict("records"):
        log_metrics(client, run_ids[r["learner"]], {f"eval.{k}": v for k, v in r.items() if k != "learner"})
    return table
