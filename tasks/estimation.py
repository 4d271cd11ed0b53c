"""Stage ``estimation``: each trained candidate's accuracy on the unlabeled target batch, with an interval
(``shiftlib.estimation``, one shared fold split and one weight fit for all candidates).

Writes ``estimation/estimates.parquet`` (candidate, method, estimate, ci_low, ci_high, confidence, the
interval kind and its possible parts se_source, se_target, se_shift, se_model); logs ``estimate.accuracy``, ``estimate.ci_low``,
``estimate.ci_high`` and the tag ``estimate.method`` into each candidate's nested MLflow run.
:func:`served_estimate` puts the served model's estimate on the parent run and raises the
``shiftflow.alert=accuracy`` tag when its upper bound is below ``min_accuracy``.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Mapping
from typing import Any

import pandas as pd
from mlflow.tracking import MlflowClient
from prefect import task
from prefect.cache_policies import NO_CACHE

from shiftlib.estimation import N_BOOT, estimate_each, shared_source_cv, stored_predictions
from tasks.ingest import ingest_inputs
from tasks.logs import run_logger
from tasks.selection import make_candidates, selection_data
from tasks.store import MANIFEST, StageStore, stage_key
from tasks.tracking import log_metrics, with_retries

STAGE = "estimation"
COLUMNS = ["candidate", "method", "estimate", "ci_low", "ci_high", "confidence", "interval", "se_source",
           "se_target", "se_shift", "se_model"]


def _specs(store: StageStore) -> list[tuple[str, str, str]]:
    return [(n, m["learner"], m["weighting"]) for n, m in store.manifest("training")["extra"]["models"].items()]


def compute_estimates(store: StageStore, *, method: str, seed: int, k: int, confidence: float,
                      n_boot: int, rows: int | None = None) -> pd.DataFrame:
    """The stage table: ``shiftlib.estimation`` on every candidate of the training stage (weighted candidates
    fitted with their weights, as trained), on the selection subsample of at most ``rows`` source and target
    rows (``tasks.selection.selection_data``): above that size the estimate is that of the candidate's recipe
    fitted on ``rows`` rows."""
    return _compute(store, method=method, seed=seed, k=k, confidence=confidence, n_boot=n_boot, rows=rows)[0]


def _compute(store: StageStore, *, method: str, seed: int, k: int, confidence: float, n_boot: int,
             rows: int | None, n_jobs: int = 1) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The stage table, and the source-CV fold scores (``fold_scores``: candidate, fold, accuracy) when the
    estimates were computed on every source row by learners that ignore the target rows: the selection
    stage's SCV then reads them instead of refitting (``shiftlib.estimation.shared_source_cv``)."""
    log, t0 = run_logger(), time.monotonic()
    data = selection_data(store, seed, rows)
    specs = _specs(store)
    cands = make_candidates(store, specs, seed, data)
    # worker processes for the fits and bootstraps, unless this task already runs in a daemonic one (a Dask worker)
    n_jobs = 1 if multiprocessing.current_process().daemon else max(1, n_jobs)
    preds = stored_predictions(cands, data.X_s, data.y_s, data.X_t, k=k, random_state=seed, n_jobs=n_jobs)
    folds = None
    scv = shared_source_cv(preds, [learner for _, learner, _ in specs],
                           store.manifest("ingest")["files"]["source.parquet"]["rows"])
    if scv is not None:
        folds = pd.DataFrame([{"candidate": name, "fold": i, "accuracy": float(a)}
                              for name, f in scv.details["fold_scores"].items() for i, a in enumerate(f)])
    rows = []
    log.info("estimation: %d candidates fitted on %d folds (%.1f s); bootstrapping each estimate (%d process%s)",
             len(preds), k, time.monotonic() - t0, n_jobs, "es" if n_jobs > 1 else "")
    each = estimate_each(preds, method, confidence=confidence, n_boot=n_boot, random_state=seed, n_jobs=n_jobs)
    for i, (P, e) in enumerate(zip(preds, each, strict=True), 1):
        log.info("estimation: %d/%d done (%s, %.1f s)", i, len(preds), P.learner, time.monotonic() - t0)
        rows.append({"candidate": P.learner, "method": e.method, "estimate": e.accuracy, "ci_low": e.ci_low,
                     "ci_high": e.ci_high, "confidence": confidence, "interval": e.details["interval"],
                     "se_source": e.details["se_source"], "se_target": e.details["se_target"],
                     "se_shift": e.details["se_shift"], "se_model": e.details["se_model"]})
    return pd.DataFrame(rows, columns=COLUMNS), folds


@task(name="estimation", cache_policy=NO_CACHE)
def estimation(store: StageStore, *, seed: int, k: int, tracking_uri: str, run_ids: dict[str, str],
               method: str = "auto", confidence: float = 0.95, n_boot: int = N_BOOT,
               rows: int | None = None, n_jobs: int = 1) -> pd.DataFrame:
    """Estimate every candidate's target accuracy (reusing an identical earlier stage), write the stage,
    log the estimates into the candidates' nested runs; returns the stage table. ``n_jobs``: worker processes
    for the candidates' fits and bootstraps (the result does not depend on it, so it is not in the stage key)."""
    log = run_logger()
    inputs = ingest_inputs(store) | {"training": store.manifest("training")["files"]["learners.parquet"]["sha256"]}
    if (store.stage_dir("weights") / MANIFEST).exists():
        inputs["weights"] = store.manifest("weights")["files"]["weights.parquet"]["sha256"]
    params = {"method": method, "seed": seed, "k": k, "confidence": confidence, "n_boot": n_boot, "rows": rows}
    key = stage_key(STAGE, params, inputs)
    found = store.find_reusable(STAGE, key)
    if found is not None:
        log.info("estimation: reusing stage from run %s (same inputs and parameters)", found["run_id"])
        store.adopt(STAGE, found)
        table = store.read_table(STAGE, "estimates")
    else:
        table, folds = _compute(store, method=method, seed=seed, k=k, confidence=confidence, n_boot=n_boot,
                                rows=rows, n_jobs=n_jobs)
        tables = {"estimates": table} | ({} if folds is None else {"fold_scores": folds})
        store.write_stage(STAGE, tables, key=key, params=params, inputs=inputs)
    client = MlflowClient(tracking_uri)
    for r in table.to_dict("records"):
        run_id = run_ids.get(r["candidate"])
        if run_id is None:
            continue
        log_metrics(client, run_id, {"estimate.accuracy": r["estimate"], "estimate.ci_low": r["ci_low"],
                                     "estimate.ci_high": r["ci_high"]})
        with_retries(client.set_tag, run_id, "estimate.method", r["method"])
        log.info("estimation %s: %.3f [%.3f, %.3f] (%s)", r["candidate"], r["estimate"], r["ci_low"],
                 r["ci_high"], r["method"])
    return table


@task(name="served-estimate", cache_policy=NO_CACHE)
def served_estimate(table: pd.DataFrame, served: str, *, min_accuracy: float | None, tracking_uri: str,
                    parent_run_id: str) -> dict[str, Any]:
    """The served candidate's estimate on the parent run (``estimate.*``); ``alert`` is True (and the parent
    is tagged ``shiftflow.alert=accuracy``) when its ``ci_high`` is below ``min_accuracy``."""
    rows = table[table["candidate"] == served]
    if rows.empty:
        raise ValueError(f"no accuracy estimate for the served candidate {served!r}; "
                         f"the estimation stage has {list(table['candidate'])}")
    r = rows.iloc[0].to_dict()
    alert = min_accuracy is not None and float(r["ci_high"]) < float(min_accuracy)
    client = MlflowClient(tracking_uri)
    log_metrics(client, parent_run_id, {"estimate.accuracy": r["estimate"], "estimate.ci_low": r["ci_low"],
                                        "estimate.ci_high": r["ci_high"]})
    with_retries(client.set_tag, parent_run_id, "estimate.method", r["method"])
    with_retries(client.set_tag, parent_run_id, "estimate.candidate", served)
    if alert:
        with_retries(client.set_tag, parent_run_id, "shiftflow.alert", "accuracy")
        run_logger().warning("accuracy alert: %s's estimated accuracy %.3f has upper bound %.3f < min_accuracy %.3f",
                             served, r["estimate"], r["ci_high"], min_accuracy)
    return {"candidate": served, "method": r["method"], "accuracy": float(r["estimate"]),
            "ci_low": float(r["ci_low"]), "ci_high": float(r["ci_high"]), "confidence": float(r["confidence"]),
            "min_accuracy": min_accuracy, "alert": bool(alert)}


def summary_lines(served: Mapping[str, Any] | None) -> tuple[list[str], list[str]]:
    """Markdown for the run summary: (lines that go *first*, i.e. the accuracy alert, and a bullet with the
    served model's estimate and interval)."""
    if not served:
        return [], []
    first = []
    if served["alert"]:
        first = [f"**ALERT (accuracy): {served['candidate']}'s estimated target accuracy is at most "
                 f"{served['ci_high']:.3f} < min_accuracy {served['min_accuracy']}; the champion alias was not "
                 "moved.**", ""]
    bullet = [f"- estimated target accuracy of {served['candidate']}: {served['accuracy']:.3f} "
              f"[{served['ci_low']:.3f}, {served['ci_high']:.3f}] ({served['method']}, "
              f"{served['confidence']:.0%} interval)"]
    return first, bullet
