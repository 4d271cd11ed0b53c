"""Stage ``training``: one task per learner (mapped) fits on the source, scores source cross-validation,
logs a nested MLflow run with the model, and predicts the target; ``collect_training`` writes
``training/predictions.parquet`` and ``training/learners.parquet``."""

from __future__ import annotations

from typing import Any

import mlflow
import numpy as np
import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE
from sklearn.base import clone

from shiftlib.cv import cv_metrics
from shiftlib.learners import fit_learner, make_learner
from tasks.ingest import ROW, load_xy
from tasks.logs import run_logger
from tasks.store import StageStore, stage_key
from tasks.tracking import log_sklearn_model, with_retries

STAGE = "training"


def training_key(store: StageStore, candidates: list[dict[str, Any]], seed: int, cv_folds: int,
                 weights_hash: str | None = None) -> tuple[str, dict[str, Any], dict[str, str]]:
    ing = store.manifest("ingest")["files"]
    inputs = {"source": ing["source.parquet"]["sha256"], "target": ing["target.parquet"]["sha256"]}
    if weights_hash:
        inputs["weights"] = weights_hash
    params = {"candidates": candidates, "seed": seed, "cv_folds": cv_folds}
    return stage_key(STAGE, params, inputs), params, inputs


def candidate_name(learner: str, weighting: str | None) -> str:
    return learner if not weighting else f"{learner}+{weighting}"


@task(name="train-learner", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=[2, 8])
def train_learner(
    store: StageStore,
    learner: str,
    *,
    seed: int,
    cv_folds: int,
    tracking_uri: str,
    experiment_id: str,
    parent_run_id: str,
    weighting: str | None = None,
    flow_run_id: str = "",
) -> dict[str, Any]:
    """Fit one candidate, log it as a nested MLflow run, predict the target rows."""
    log = run_logger()
    X_s, y_s, X_t = load_xy(store)
    w = None
    if weighting:
        wt = store.read_table("weights", "weights")
        w = wt[weighting].to_numpy(dtype=float)
    est = make_learner(learner, random_state=seed)
    name = candidate_name(learner, weighting)
    cv = cv_metrics(est, X_s, y_s, n_splits=cv_folds, random_state=seed, sample_weight=w, X_target=X_t)
    model = fit_learner(clone(est), X_s, y_s, sample_weight=w, X_target=X_t)
    proba = model.predict_proba(X_t)
    pred = model.classes_[np.argmax(proba, axis=1)]

    mlflow.set_tracking_uri(tracking_uri)

    def _log() -> tuple[str, str]:
        with mlflow.start_run(
            experiment_id=experiment_id, run_name=name, parent_run_id=parent_run_id, nested=True,
            tags={"shiftflow.learner": learner, "shiftflow.weighting": weighting or "none",
                  "prefect.flow_run_id": flow_run_id},
        ) as run:
            final = est.steps[-1][1] if hasattr(est, "steps") else est
            params = {f"model.{k}": v for k, v in final.get_params(deep=False).items()
                      if isinstance(v, (int, float, str, bool, type(None)))}
            mlflow.log_params({"learner": learner, "weighting": weighting or "none", "seed": seed,
                               "cv_folds": cv_folds, "estimator": type(final).__name__} | params)
            mlflow.log_metrics({f"training.cv_{k}": v for k, v in cv.items()})
            uri = log_sklearn_model(model, "model", X_t)
            return run.info.run_id, uri

    run_id, model_uri = with_retries(_log)
    log.info("trained %s: source-CV accuracy %.3f", name, cv["accuracy"])
    preds = pd.DataFrame({ROW: np.arange(len(X_t), dtype=np.int64), "learner": name,
                          "predicted": pred.astype(np.int64)})
    for j, c in enumerate(model.classes_):
        preds[f"proba_{int(c)}"] = proba[:, j]
    return {"name": name, "learner": learner, "weighting": weighting or "none", "run_id": run_id,
            "model_uri": model_uri, "cv": cv, "predictions": preds}


@task(name="collect-training", cache_policy=NO_CACHE)
def collect_training(
    store: StageStore, results: list[dict[str, Any]], key: str, params: dict[str, Any], inputs: dict[str, str]
) -> dict[str, Any]:
    """Write the stage's Parquet tables and manifest (model URIs and run ids in ``extra``)."""
    preds = pd.concat([r["predictions"] for r in results], ignore_index=True)
    table = pd.DataFrame(
        [{"learner": r["name"], "base_learner": r["learner"], "weighting": r["weighting"],
          "mlflow_run_id": r["run_id"], "model_uri": r["model_uri"],
          **{f"cv_{k}": v for k, v in r["cv"].items()}} for r in results]
    )
    extra = {"models": {r["name"]: {"run_id": r["run_id"], "model_uri": r["model_uri"], "cv": r["cv"],
                                    "learner": r["learner"], "weighting": r["weighting"]}
                        for r in results}}
    return store.write_stage(STAGE, {"predictions": preds, "learners": table}, key=key, params=params,
                             inputs=inputs, extra=extra)


@task(name="relog-reused-training", cache_policy=NO_CACHE)
def relog_reused(manifest: dict[str, Any], *, tracking_uri: str, experiment_id: str, parent_run_id: str,
                 flow_run_id: str = "") -> dict[str, str]:
    """A reused training stage still gets one nested run per learner, pointing at the original model.

    Returns learner name → the new nested run id."""
    mlflow.set_tracking_uri(tracking_uri)
    out: dict[str, str] = {}
    for name, m in manifest["extra"]["models"].items():
        with mlflow.start_run(
            experiment_id=experiment_id, run_name=name, parent_run_id=parent_run_id, nested=True,
            tags={"shiftflow.learner": m["learner"], "shiftflow.weighting": m["weighting"],
                  "shiftflow.reused_from_run": m["run_id"], "shiftflow.model_uri": m["model_uri"],
                  "prefect.flow_run_id": flow_run_id},
        ) as run:
            mlflow.log_params({"learner": m["learner"], "weighting": m["weighting"]})
            mlflow.log_metrics({f"training.cv_{k}": v for k, v in m["cv"].items()})
            out[name] = run.info.run_id
    return out
