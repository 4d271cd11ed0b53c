"""Stage ``training``: one task per candidate (mapped) fits on the source, scores source cross-validation,
logs a nested MLflow run with the model, and predicts the target; ``collect_training`` writes
``training/predictions.parquet`` and ``training/learners.parquet``.

Each candidate also persists its own part (``training_parts/<name>/``, Parquet + manifest) as soon as it
finishes, so a run killed mid-training and started again with the same parameters refits only the
candidates that had not finished. A reused part still gets a nested MLflow run in the new parent run,
pointing at the original model (tag ``shiftflow.reused_from_run``).

The logged model is ``Pipeline([("prepare", <ingest's fitted preprocessor>), ("model", <the candidate>)])``:
it scores raw rows with the source's feature columns; its signature and input example are raw target rows.
The stage's predictions come from the candidate on the encoded target table, the same numbers."""

from __future__ import annotations

from typing import Any

import mlflow
import numpy as np
import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE
from sklearn.base import clone

from shiftlib.budget import subsample
from shiftlib.cv import cv_metrics
from shiftlib.learners import WeightlessClassError, fit_learner, make_learner
from tasks.ingest import (
    ROW,
    ingest_inputs,
    load_raw_example,
    load_xy,
    preprocessor_hash,
    raw_input_schema,
    served_pipeline,
)
from tasks.limits import limited
from tasks.logs import run_logger
from tasks.store import StageStore, stage_key
from tasks.tracking import RunContext, log_sklearn_model, tracking_key, with_retries
from tasks.weights import stage_weights

STAGE = "training"


def candidate_name(learner: str, weighting: str | None) -> str:
    return learner if not weighting or weighting == "none" else f"{learner}+{weighting}"


def _inputs(store: StageStore, weighting: str | None) -> dict[str, str]:
    inputs = ingest_inputs(store) | {"preprocessor": preprocessor_hash(store)}
    if weighting and weighting != "none":
        inputs["weights"] = store.manifest("weights")["files"]["weights.parquet"]["sha256"]
    return inputs


def _nested_run(name: str, *, experiment_id: str, parent_run_id: str, tags: dict[str, str],
                params: dict[str, Any], metrics: dict[str, float], model: Any = None,
                X_example: pd.DataFrame | None = None, input_schema: Any = None) -> tuple[str, str | None]:
    with mlflow.start_run(experiment_id=experiment_id, run_name=name, parent_run_id=parent_run_id,
                          nested=True, tags=tags) as run:
        mlflow.log_params(params)
        mlflow.log_metrics(metrics)
        uri = log_sklearn_model(model, "model", X_example, input_schema=input_schema) if model is not None else None
        return run.info.run_id, uri


def _skip_reason(err: ValueError, store: StageStore, w: np.ndarray | None, y_s: np.ndarray, sub: np.ndarray,
                 weighting: str | None, cv_folds: int) -> str:
    """Why a candidate cannot be fitted, in the user's class names and with what its weights rest on."""
    why = str(err)
    if isinstance(err, WeightlessClassError) and err.classes is not None:  # name the user's classes
        labels = store.manifest("ingest")["extra"]["classes"]
        names = [labels[int(c)] for c in err.classes]
        pos = [int((np.asarray(w)[sub][y_s[sub] == int(c)] > 0).sum()) for c in err.classes]
        if min(pos) > 0:  # the whole set has such rows: one CV training fold lost them all
            return (f"in a training fold of its {cv_folds}-fold source CV the {weighting} weights are 0 on every row "
                    f"of class {', '.join(map(str, names))} (they are positive on only "
                    f"{', '.join(map(str, pos))} of its rows), so its source-CV accuracy cannot be measured")
        return WeightlessClassError.describe(names)
    if w is not None:  # the usual cause: weights that rest on few rows (a learner's inner folds need more)
        on = np.asarray(w) > 0
        fewest = int(np.bincount(np.asarray(y_s)[on], minlength=int(np.max(y_s)) + 1).min())
        why += (f" (the {weighting} weights are positive on {int(on.sum())} of {len(on)} source rows, {fewest} "
                "of them in the smallest class)")
    return why


@task(name="train-learner", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=[2, 8])
@limited
def train_learner(store: StageStore, learner: str, weighting: str | None = None, *, ctx: RunContext,
                  cv_folds: int, cv_rows: int | None = None) -> dict[str, Any]:
    """Fit one candidate on every source row (or reuse its finished part), log a nested MLflow run under
    ``ctx``'s parent run, predict the target. The source-CV metrics use a stratified subsample of at most
    ``cv_rows`` rows."""
    log = run_logger()
    seed, tracking_uri = ctx.seed, ctx.tracking_uri
    name = candidate_name(learner, weighting)
    weighting = weighting if weighting and weighting != "none" else None
    part = f"training_parts/{name}"
    params = {"learner": learner, "weighting": weighting, "seed": seed, "cv_folds": cv_folds, "cv_rows": cv_rows}
    inputs = _inputs(store, weighting) | {"tracking": tracking_key(tracking_uri)}  # its model lives there
    key = stage_key(part, params, inputs)
    mlflow.set_tracking_uri(tracking_uri)
    tags = {"shiftflow.learner": learner, "shiftflow.weighting": weighting or "none",
            "prefect.flow_run_id": ctx.flow_run_id}
    found = store.find_reusable(part, key)
    if found is not None:
        m = store.adopt(part, found)["extra"]
        preds = store.read_table(part, "predictions")
        run_id, _ = with_retries(
            _nested_run, name, experiment_id=ctx.experiment_id, parent_run_id=ctx.parent_run_id,
            tags=tags | {"shiftflow.reused_from_run": m["run_id"], "shiftflow.model_uri": m["model_uri"]},
            params={"learner": learner, "weighting": weighting or "none"},
            metrics={f"training.cv_{k}": v for k, v in m["cv"].items()},
        )
        log.info("training %s: reusing the finished fit from run %s", name, m["run_id"])
        return {"name": name, "learner": learner, "weighting": weighting or "none", "run_id": run_id,
                "model_uri": m["model_uri"], "model_run_id": m["run_id"], "cv": m["cv"],
                "predictions": preds, "reused": True}

    X_s, y_s, X_t = load_xy(store)
    w = stage_weights(store, weighting) if weighting else None
    sub = subsample(len(y_s), cv_rows, y=y_s, random_state=seed)
    est = make_learner(learner, random_state=seed, n_rows=len(y_s))
    try:
        cv = cv_metrics(make_learner(learner, random_state=seed, n_rows=len(sub)), X_s.iloc[sub], y_s[sub],
                        n_splits=cv_folds, random_state=seed, sample_weight=None if w is None else w[sub],
                        X_target=X_t)
        model = fit_learner(clone(est), X_s, y_s, sample_weight=w, X_target=X_t)
    except ValueError as err:  # this candidate cannot be fitted on these rows (or weights): the others go on
        why = _skip_reason(err, store, w, y_s, sub, weighting, cv_folds)
        log.warning("training %s: skipped, it cannot be fitted here: %s", name, why)
        return {"name": name, "learner": learner, "weighting": weighting or "none", "skipped": why,
                "reused": False}
    proba = model.predict_proba(X_t)
    pred = model.classes_[np.argmax(proba, axis=1)]
    final = est.steps[-1][1] if hasattr(est, "steps") else est
    hyper = {f"model.{k}": v for k, v in final.get_params(deep=False).items()
             if isinstance(v, (int, float, str, bool, type(None)))}
    hyper["model.route"] = " → ".join(type(s).__name__ for _, s in est.steps) if hasattr(est, "steps") \
        else type(est).__name__
    hyper["training.cv_rows"] = len(sub)
    run_id, model_uri = with_retries(
        _nested_run, name, experiment_id=ctx.experiment_id, parent_run_id=ctx.parent_run_id, tags=tags,
        params={"learner": learner, "weighting": weighting or "none", "seed": seed, "cv_folds": cv_folds,
                "estimator": type(final).__name__} | hyper,
        metrics={f"training.cv_{k}": v for k, v in cv.items()}, model=served_pipeline(store, model),
        X_example=load_raw_example(store), input_schema=raw_input_schema(store),
    )
    preds = pd.DataFrame({ROW: np.arange(len(X_t), dtype=np.int64), "learner": name,
                          "predicted": pred.astype(np.int64)})
    for j, c in enumerate(model.classes_):
        preds[f"proba_{int(c)}"] = proba[:, j]
    store.write_stage(part, {"predictions": preds}, key=key, params=params, inputs=inputs,
                      extra={"run_id": run_id, "model_uri": model_uri, "cv": cv})
    log.info("trained %s: source-CV accuracy %.3f", name, cv["accuracy"])
    return {"name": name, "learner": learner, "weighting": weighting or "none", "run_id": run_id,
            "model_uri": model_uri, "model_run_id": run_id, "cv": cv, "predictions": preds,
            "reused": False}


@task(name="collect-training", cache_policy=NO_CACHE)
def collect_training(store: StageStore, results: list[dict[str, Any]], seed: int, cv_folds: int) -> dict[str, Any]:
    """Write the stage tables (deterministic bytes) and manifest (model URIs and run ids in ``extra``; the
    candidates that could not be fitted, with why, in ``extra["skipped"]``). Raises ``ValueError`` when no
    candidate could be fitted."""
    skipped = {r["name"]: r["skipped"] for r in results if "skipped" in r}
    results = [r for r in results if "skipped" not in r]
    if not results:
        why = "; ".join(f"{n}: {e}" for n, e in skipped.items())
        raise ValueError(f"no candidate learner could be fitted on the source rows ({why})")
    preds = pd.concat([r["predictions"] for r in results], ignore_index=True)
    table = pd.DataFrame(
        [{"learner": r["name"], "base_learner": r["learner"], "weighting": r["weighting"],
          **{f"cv_{k}": r["cv"][k] for k in sorted(r["cv"])}} for r in results]
    )
    candidates = [{"learner": r["learner"], "weighting": r["weighting"]} for r in results]
    params = {"candidates": candidates, "seed": seed, "cv_folds": cv_folds}
    inputs = {r["name"]: store.file_hash(f"training_parts/{r['name']}", "predictions.parquet") for r in results}
    extra = {"models": {r["name"]: {"run_id": r["run_id"], "model_run_id": r["model_run_id"],
                                    "model_uri": r["model_uri"], "cv": r["cv"], "learner": r["learner"],
                                    "weighting": r["weighting"], "reused": r["reused"],
                                    "predicted_classes": sorted(int(c) for c in pd.unique(r["predictions"]["predicted"]))}
                        for r in results}, "skipped": skipped}
    return store.write_stage(STAGE, {"predictions": preds, "learners": table},
                             key=stage_key(STAGE, params, inputs), params=params, inputs=inputs, extra=extra)
