"""The retrain flow: ingest → drift → weights → training → evaluation → selection → recalibration →
champion. Composition only."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, runtime
from prefect.artifacts import create_markdown_artifact
from prefect.flow_runs import suspend_flow_run
from threadpoolctl import threadpool_limits

from flows.config import RetrainConfig
from flows.fanout import run_mapped, stage_clock
from flows.paths import shiftflow_home
from shiftlib.budget import auto_weighting, concurrency
from shiftlib.learners import make_learner, needs_target
from tasks.champion import champion
from tasks.drift import drift
from tasks.evaluation import evaluate
from tasks.ingest import ingest
from tasks.labels import labels, labels_form
from tasks.recalibration import recalibration
from tasks.report import summary_markdown
from tasks.selection import cv_candidate, rt_row, selection, selection_plan, trcv_fold_task
from tasks.store import MANIFEST, StageStore
from tasks.tracking import (
    check_reachable,
    default_tracking_uri,
    ensure_experiment,
    flat_params,
    log_metrics,
    parent_run,
    with_retries,
)
from tasks.training import collect_training, train_learner
from tasks.weights import kmm_chunk_task, weights, weights_plan


def reused_stages(store: StageStore, *, training_reused: bool) -> list[str]:
    """Stages this run copied from an earlier run (their manifests say ``reused_from``), in flow order.

    Training counts as reused when every candidate's part was; its own tables are always re-collected."""
    out = []
    for stage in ("ingest", "drift", "weights", "training", "selection", "recalibration"):
        if stage == "training":
            if training_reused:
                out.append(stage)
        elif (store.stage_dir(stage) / MANIFEST).exists() and store.manifest(stage).get("reused_from"):
            out.append(stage)
    return out


def _weights(store: StageStore, config: RetrainConfig, method: str, ctx: dict[str, Any], log: Any) -> Any:
    if method == "none":
        return None
    chunks = weights_plan(store, [method], seed=config.seed)["kmm_chunks"]
    parts = None if chunks is None else run_mapped(kmm_chunk_task, (store,), [(c,) for c in chunks],
                                                   limit=ctx["workers"], what="KMM chunks", log=log)
    return weights(store, [method], seed=config.seed, tracking_uri=ctx["uri"], parent_run_id=ctx["parent"],
                   kmm_parts=parts)


def _training(store: StageStore, config: RetrainConfig, method: str, ctx: dict[str, Any], log: Any) -> list[Any]:
    candidates = [(name, None) for name in config.learners]
    if method != "none":  # CSLR learns its own weights from the target rows (DL): no pre-weighted variant
        candidates += [(n, method) for n in config.learners if not needs_target(make_learner(n))]
    return run_mapped(train_learner, (store,), candidates, limit=ctx["workers"], what="training", log=log,
                      seed=config.seed, cv_folds=config.cv_folds, tracking_uri=ctx["uri"],
                      experiment_id=ctx["experiment"], parent_run_id=ctx["parent"], flow_run_id=ctx["flow_run"],
                      cv_rows=config.selection_rows)


def _selection(store: StageStore, config: RetrainConfig, run_ids: dict[str, str], ctx: dict[str, Any],
               log: Any, labeled: dict[str, Any] | None) -> dict[str, Any]:
    sels, k, rows, seed = list(config.selectors), config.selection_folds, config.selection_rows, config.seed
    primary = config.selector
    if labeled is not None:  # the few target labels decide (fewlabel, shiftlib.selection.fewlabel)
        sels, primary = sels + ["fewlabel"], "fewlabel"
    digest = None if labeled is None else labeled["labels_sha256"]
    plan = selection_plan(store, sels, primary, seed=seed, k=k, rows=rows, labels_sha256=digest)
    fan = {"limit": ctx["workers"], "log": log, "seed": seed, "rows": rows}
    cands = [(c,) for c in plan["candidates"]]
    parts: dict[str, Any] = {"rt_rows": None, "trcv_folds": None, "cv_parts": {}}
    if plan["compute"]:
        for sel in [s for s in sels if s in ("scv", "wcv")]:  # one task per candidate: k fits each
            parts["cv_parts"][sel] = run_mapped(cv_candidate, (store, sel), [(c, plan["beta"]) for (c,) in cands],
                                                what=f"selection {sel}", k=k, **fan)
        if "rt" in sels:  # ReverseTesting: one task per row of M (1 + ℓ fits)
            parts["rt_rows"] = run_mapped(rt_row, (store,), cands, what="ReverseTesting rows", **fan)
        if "trcv" in sels:  # TrCV: one task per fold (2 fits per candidate)
            parts["trcv_folds"] = run_mapped(trcv_fold_task, (store,), [(f, plan["beta"]) for f in range(k)],
                                             what="TrCV folds", k=k, **fan)
    return selection(store, sels, primary, seed=seed, k=k, tracking_uri=ctx["uri"], parent_run_id=ctx["parent"],
                     run_ids=run_ids, beta=plan["beta"], rows=rows, labeled=labeled, **parts)


@flow(name="retrain", log_prints=True)
def retrain(config: RetrainConfig = RetrainConfig()) -> dict[str, Any]:  # noqa: B008
    """Retrain every candidate learner on the (biased) labeled source for the unlabeled target batch."""
    log, flow_run_id, home = get_run_logger(), str(runtime.flow_run.id or uuid.uuid4()), shiftflow_home()
    uri = config.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri(home)
    check_reachable(uri)
    home.mkdir(parents=True, exist_ok=True)
    local = not uri.startswith(("http://", "https://"))
    experiment = with_retries(ensure_experiment, uri, config.experiment, home / "mlartifacts" if local else None)
    store = StageStore(Path(config.run_root or home / "runs").resolve(), flow_run_id)
    conc = concurrency(config.max_workers)
    timings: dict[str, float] = {}
    peaks: dict[str, float] = {}
    with parent_run(uri, experiment, f"retrain-{runtime.flow_run.name or flow_run_id[:8]}",
                    tags={"prefect.flow_run_id": flow_run_id, "shiftflow.run_dir": str(store.run_dir)},
                    params=flat_params("", config.model_dump(mode="json"))) as parent, \
            threadpool_limits(limits=conc.threads_per_task):
        ctx = {"uri": uri, "parent": parent, "experiment": experiment, "flow_run": flow_run_id,
               "workers": conc.max_workers}
        log.info("concurrency: %d tasks at once, %d BLAS/OpenMP thread(s) each, %d cores",
                 conc.max_workers, conc.threads_per_task, conc.cores)
        with stage_clock(timings, peaks, "ingest"):
            ing = ingest(store, config.source, config.target, config.label, positive_label=config.positive_label,
                         simulate_bias=config.simulate_bias.model_dump() if config.simulate_bias else None,
                         seed=config.seed, drop_columns=config.drop_columns, max_levels=config.max_levels)
        _tag_data(uri, parent, ing)
        with stage_clock(timings, peaks, "drift"):
            drift_summary = drift(store, seed=config.seed, alpha=config.drift_alpha, tracking_uri=uri,
                                  parent_run_id=parent)
        method = config.weighting
        if method == "auto":
            method = auto_weighting(drift_summary["drifted"], ing["files"]["source.parquet"]["rows"])
            log.info("weighting=auto: %s", f"drift found, weighting with {method}" if method != "none"
                     else "no drift found, no weighting")
        with_retries(_client(uri).set_tag, parent, "shiftflow.weighting", method)
        with stage_clock(timings, peaks, "weights"):
            weights_summary = _weights(store, config, method, ctx, log)
        with stage_clock(timings, peaks, "training"):
            results = _training(store, config, method, ctx, log)
            training = collect_training(store, results, config.seed, config.cv_folds)
        run_ids = {r["name"]: r["run_id"] for r in results}
        with stage_clock(timings, peaks, "evaluation"):
            target_scores = evaluate(store, run_ids, tracking_uri=uri)
        labeled = None
        if config.label_budget is not None or config.target_labels is not None:  # few target labels
            labeled = labels(store, budget=config.label_budget, seed=config.seed, label=config.label,
                             target_labels=config.target_labels, tracking_uri=uri, parent_run_id=parent)
            if labeled["status"] == "awaiting_labels" and runtime.deployment.id is not None:
                # a deployment run suspends (the process exits); on resume the flow starts again from the top,
                # every stage above is found in this run's stage store, and suspend_flow_run returns the form
                with_retries(_client(uri).set_tag, parent, "shiftflow.suspended_for_labels", labeled["csv"])
                filled = suspend_flow_run(wait_for_input=labels_form(labeled["csv"]))
                with_retries(_client(uri).delete_tag, parent, "shiftflow.suspended_for_labels")  # resumed
                labeled = labels(store, budget=config.label_budget, seed=config.seed, label=config.label,
                                 target_labels=filled.target_labels, tracking_uri=uri, parent_run_id=parent)
            if labeled["status"] == "awaiting_labels":  # CLI / temporary API: stop; a rerun with target_labels resumes
                return {"flow_run_id": flow_run_id, "run_dir": str(store.run_dir), "labels": labeled,
                        "mlflow_parent_run_id": parent, "mlflow_experiment_id": experiment,
                        "reused_stages": reused_stages(store, training_reused=all(r["reused"] for r in results))}
        with stage_clock(timings, peaks, "selection"):
            chosen = _selection(store, config, run_ids, ctx, log, labeled)
        recal = None
        with stage_clock(timings, peaks, "recalibration"):
            if config.undersample is not None:
                recal = recalibration(store, chosen["chosen"], beta=config.undersample, seed=config.seed,
                                      cv_folds=config.cv_folds, tracking_uri=uri, experiment_id=experiment,
                                      parent_run_id=parent, flow_run_id=flow_run_id)
        model_name = config.model_name or (f"shiftflow-{runtime.deployment.name}" if runtime.deployment.name
                                           else f"{config.experiment}-{config.label}")
        with stage_clock(timings, peaks, "champion"):
            decision = champion(store, chosen, model_name=model_name, seed=config.seed, k=config.selection_folds,
                                tracking_uri=uri, parent_run_id=parent, flow_run_id=flow_run_id,
                                served_model_uri=None if recal is None else recal["model_uri"],
                                rows=config.selection_rows)
        reused = reused_stages(store, training_reused=all(r["reused"] for r in results))
        summary = {
            "flow_run_id": flow_run_id, "run_dir": str(store.run_dir), "mlflow_parent_run_id": parent,
            "mlflow_experiment_id": experiment, "tracking_uri": uri,
            "mlflow_ui": (f"open {uri}" if not local else
                          f"mlflow ui --backend-store-uri {uri} --host 127.0.0.1 --port 5000"),
            "reused_stages": reused,
            "drift": {k: drift_summary.get(k) for k in ("drifted", "domain_auc", "domain_pvalue", "mmd2",
                                                         "mmd_pvalue", "drifted_features", "rows_tested")},
            "weighting": method, "champion": decision, "recalibration": recal,
            "selection": {"selector": chosen["selector"], "chosen": chosen["chosen"],
                          "agreement": chosen["agreement"]},
            "weights": weights_summary,
            "learners": {n: m["cv"] for n, m in training["extra"]["models"].items()},
            "model_uris": {n: m["model_uri"] for n, m in training["extra"]["models"].items()},
            "target_scores": None if target_scores is None else target_scores.to_dict(orient="records"),
            "timings": timings, "peak_rss_gib": peaks,
            "concurrency": {"max_workers": conc.max_workers, "threads_per_task": conc.threads_per_task},
        }
        client = _client(uri)
        with_retries(client.set_tag, parent, "shiftflow.reused_stages", ",".join(reused) or "none")
        log_metrics(client, parent, {f"timing.{k}_s": v for k, v in timings.items()})
        create_markdown_artifact(key="retrain-summary", markdown=summary_markdown(summary, chosen["scores"]),
                                 description="shiftflow retrain summary")
    log.info("retrain finished: run folder %s, MLflow parent run %s", store.run_dir, parent)
    return summary


def _client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(uri)


def _tag_data(uri: str, parent: str, ing: dict[str, Any]) -> None:
    client = _client(uri)
    for k, v in ing["extra"]["data_hashes"].items():
        with_retries(client.set_tag, parent, f"data.{k}_sha256", v)
    for f in ("source.parquet", "target.parquet"):
        with_retries(client.set_tag, parent, f"ingest.{f.split('.')[0]}_parquet_sha256", ing["files"][f]["sha256"])
