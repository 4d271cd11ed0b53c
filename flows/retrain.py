"""The retrain flow: ingest → drift → weights → training → evaluation → selection → recalibration →
champion. Composition only."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, runtime
from prefect.artifacts import create_markdown_artifact
from prefect.flow_runs import suspend_flow_run
from threadpoolctl import threadpool_limits

from flows.config import RetrainConfig
from flows.fanout import run_mapped, stage_clock
from flows.paths import default_run_root, local_artifact_root, shiftflow_home
from flows.preflight import preflight
from shiftlib.budget import auto_weighting, concurrency, fan_out
from shiftlib.catalog import LABELED_SELECTOR, SOURCE_CV
from shiftlib.learners import make_learner, needs_target
from shiftlib.selection import selector_fan_out
from tasks.champion import GatePolicy, champion
from tasks.drift import drift
from tasks.estimation import estimation, realized_history, served_estimate
from tasks.evaluation import evaluate
from tasks.history import log_history
from tasks.ingest import IngestManifest, IngestOptions, ingest, log_data_inputs, read_ingest, rule_classes
from tasks.labels import labels, labels_form
from tasks.limits import task_threads
from tasks.recalibration import recalibration
from tasks.report import summary_markdown
from tasks.selection import (
    FannedResults,
    SelectionSpec,
    cv_candidate,
    rt_row,
    selection,
    selection_plan,
    trcv_fold_task,
)
from tasks.served import check_model_name, default_model_name, input_schema, served, served_rule
from tasks.store import StageStore
from tasks.tracking import (
    RunContext,
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
    for stage in ("ingest", "drift", "weights", "training", "estimation", "selection", "recalibration"):
        if stage == "training":
            if training_reused:
                out.append(stage)
        elif store.reused_from(stage):
            out.append(stage)
    return out


@dataclass
class _Run:
    """One flow run's composition state: its stage store, where it logs, how many tasks run at once, and the
    wall time and peak memory of each stage so far."""

    config: RetrainConfig
    store: StageStore
    ctx: RunContext
    workers: int
    log: Any
    timings: dict[str, float] = field(default_factory=dict)
    peaks: dict[str, float] = field(default_factory=dict)

    def stage(self, name: str) -> Any:
        return stage_clock(self.timings, self.peaks, name)

    def fan(self, **kw: Any) -> dict[str, Any]:
        """Keyword arguments of ``run_mapped`` plus the tracking ones every logging task takes."""
        return {"limit": self.workers, "log": self.log, **kw}


def _weights(run: _Run, method: str) -> Any:
    if method == "none":
        return None
    chunks = weights_plan(run.store, [method], seed=run.ctx.seed)["kmm_chunks"]
    parts = None if chunks is None else run_mapped(kmm_chunk_task, (run.store,), [(c,) for c in chunks],
                                                   **run.fan(what="KMM chunks"))
    return weights(run.store, [method], ctx=run.ctx, kmm_parts=parts)


def _training(run: _Run, method: str) -> list[Any]:
    config, ctx = run.config, run.ctx
    candidates = [(name, None) for name in config.learners]
    if method != "none":  # CSLR learns its own weights from the target rows (DL): no pre-weighted variant
        candidates += [(n, method) for n in config.learners if not needs_target(make_learner(n))]
    return run_mapped(train_learner, (run.store,), candidates, **run.fan(what="training"), ctx=ctx,
                      cv_folds=config.cv_folds, cv_rows=config.selection_rows)


def _selection(run: _Run, run_ids: dict[str, str], labeled: dict[str, Any] | None) -> dict[str, Any]:
    config, store = run.config, run.store
    sels, k, rows, seed = list(config.selectors), config.selection_folds, config.selection_rows, config.seed
    primary = config.selector
    if labeled is not None:  # the few target labels decide (fewlabel, shiftlib.selection.fewlabel)
        sels, primary = sels + [LABELED_SELECTOR], LABELED_SELECTOR
    digest = None if labeled is None else labeled["labels_sha256"]
    plan = selection_plan(store, sels, primary, seed=seed, k=k, rows=rows, labels_sha256=digest)
    cands = [(c,) for c in plan["candidates"]]
    parts: dict[str, Any] = {"rt_rows": None, "trcv_folds": None, "cv_parts": {}}
    if plan["compute"] and fan_out(read_ingest(store).n_source):
        fans = {s: selector_fan_out(s) for s in sels}  # how each selector splits into tasks (the registry says)
        # one task per candidate: k fits each (SCV only when the estimation stage has not fitted those folds)
        for sel in [s for s, f in fans.items() if f == "candidate" and not (s == SOURCE_CV and plan["scv_shared"])]:
            parts["cv_parts"][sel] = run_mapped(cv_candidate, (store, sel), [(c, plan["beta"]) for (c,) in cands],
                                                **run.fan(what=f"selection {sel}", seed=seed, rows=rows, k=k))
        if "rt_row" in fans.values():  # ReverseTesting: one task per row of M (1 + ℓ fits)
            parts["rt_rows"] = run_mapped(rt_row, (store,), cands,
                                          **run.fan(what="ReverseTesting rows", seed=seed, rows=rows))
        if "trcv_fold" in fans.values():  # TrCV: one task per fold (2 fits per candidate)
            parts["trcv_folds"] = run_mapped(trcv_fold_task, (store,), [(f, plan["beta"]) for f in range(k)],
                                             **run.fan(what="TrCV folds", seed=seed, rows=rows, k=k))
    return selection(store, SelectionSpec(sels, primary, k, rows), ctx=run.ctx, run_ids=run_ids,
                     fanned=FannedResults(**parts, beta=plan["beta"]), labeled=labeled)


def _prepare(run: _Run) -> dict[str, Any]:
    """ingest → drift → weights → training → estimation → evaluation."""
    config, store, ctx, uri = run.config, run.store, run.ctx, run.ctx.tracking_uri
    with run.stage("ingest"):
        ingest(store, config.source, config.target, config.label, options=IngestOptions(
            positive_label=config.positive_label,
            simulate_bias=config.simulate_bias.model_dump() if config.simulate_bias else None, seed=config.seed,
            drop_columns=tuple(config.drop_columns), max_levels=config.max_levels, id_column=config.id_column,
            group_column=config.group_column))
    ing = read_ingest(store)
    _tag_data(uri, ctx.parent_run_id, ing)
    schema = input_schema(store)
    if config.model_name:  # a name whose versions take other inputs is refused now, not after training
        check_model_name(_client(uri), config.model_name, schema)
    # this deployment's realised accuracies so far (`shiftflow evaluate`); a history of other inputs is refused now
    history = realized_history(store, registered_name(run, schema), schema["digest"])
    with run.stage("drift"):
        drift_summary = drift(store, ctx=ctx, alpha=config.drift_alpha)
    method = config.weighting
    if method == "auto":
        method = auto_weighting(drift_summary["drifted"], ing.n_source)
        run.log.info("weighting=auto: %s", f"drift found, weighting with {method}" if method != "none"
                     else "no drift found, no weighting")
    with_retries(_client(uri).set_tag, ctx.parent_run_id, "shiftflow.weighting", method)
    with run.stage("weights"):
        weights_summary = _weights(run, method)
    with run.stage("training"):
        results = _training(run, method)
        training = collect_training(store, results, config.seed, config.cv_folds)
    if training.skipped:
        with_retries(_client(uri).set_tag, ctx.parent_run_id, "shiftflow.skipped_candidates",
                     "; ".join(f"{n}: {why}" for n, why in training.skipped.items())[:5000])
    run_ids = training.run_ids()
    with run.stage("estimation"):
        estimates = estimation(store, ctx=ctx, k=config.selection_folds, run_ids=run_ids, rows=config.selection_rows,
                               n_jobs=run.workers)
    with run.stage("evaluation"):
        target_scores = evaluate(store, run_ids, ctx=ctx)
    return {"drift": drift_summary, "weighting": method, "weights": weights_summary, "results": results,
            "training": training, "run_ids": run_ids, "estimates": estimates, "target_scores": target_scores,
            "history": history}


def _decide(run: _Run, prep: dict[str, Any], labeled: dict[str, Any] | None) -> dict[str, Any]:
    """selection → recalibration → the served model's estimate → champion."""
    config, ctx = run.config, run.ctx
    with run.stage("selection"):  # a pair plan's labels decide the gate only: the label-free choice stands
        chosen = _selection(run, prep["run_ids"], None if labeled is None or labeled.get("pair") else labeled)
    recal = None
    with run.stage("recalibration"):
        if config.undersample is not None:
            recal = recalibration(run.store, chosen["chosen"], beta=config.undersample, ctx=ctx,
                                  cv_folds=config.cv_folds)
    model_name = registered_name(run)
    estimate = served_estimate(prep["estimates"], chosen["chosen"], ctx=ctx, min_accuracy=config.min_accuracy,
                               model_name=model_name, labeled=chosen.get("fewlabel"), history=prep["history"],
                               rule=rule_classes(run.store), n_target=read_ingest(run.store).n_target)
    with run.stage("champion"):
        policy = GatePolicy(k=config.selection_folds, rows=config.selection_rows,
                            promote_confidence=config.promote_confidence, unvouched=config.unvouched_champion,
                            hold_champion="accuracy alert" if estimate["alert"] else None)
        decision = champion(run.store, chosen, ctx=ctx, model_name=model_name, policy=policy,
                            served_model_uri=None if recal is None else recal["model_uri"], labeled=labeled)
    return {"chosen": chosen, "recalibration": recal, "served": estimate, "champion": decision}


def registered_name(run: _Run, schema: dict[str, Any] | None = None) -> str:
    """The registered model's name: ``model_name``, or the default that carries the input schema
    (``tasks.served.default_model_name``; ``schema``: that input schema when already computed)."""
    config = run.config
    if config.model_name:
        return config.model_name
    base = f"shiftflow-{runtime.deployment.name}" if runtime.deployment.name else f"{config.experiment}-{config.label}"
    return default_model_name(base, schema or input_schema(run.store))


def _summary(run: _Run, prep: dict[str, Any], dec: dict[str, Any]) -> dict[str, Any]:
    ctx, store, chosen, served = run.ctx, run.store, dec["chosen"], dec["served"]
    uri, training, ing = ctx.tracking_uri, prep["training"], read_ingest(store)
    reused = reused_stages(store, training_reused=all(r["reused"] for r in prep["results"]))
    summary = {
        "alert": "accuracy" if served["alert"] else None, "estimate": served,
        "flow_run_id": ctx.flow_run_id, "run_dir": str(store.run_dir), "mlflow_parent_run_id": ctx.parent_run_id,
        "mlflow_experiment_id": ctx.experiment_id, "tracking_uri": uri,
        "mlflow_ui": (f"open {uri}" if uri.startswith(("http://", "https://")) else
                      f"mlflow ui --backend-store-uri {uri} --host 127.0.0.1 --port 5000"),
        "reused_stages": reused,
        "drift": {k: prep["drift"].get(k) for k in ("drifted", "domain_auc", "domain_pvalue", "mmd2", "mmd_pvalue",
                                                    "drifted_features", "rows_tested")},
        "weighting": prep["weighting"], "champion": dec["champion"], "recalibration": dec["recalibration"],
        "selection": {"selector": chosen["selector"], "chosen": chosen["chosen"], "agreement": chosen["agreement"],
                      "fewlabel": chosen.get("fewlabel")},
        "weights": prep["weights"],
        "learners": {n: m.cv for n, m in training.models.items()},
        "skipped_candidates": training.skipped,
        "classes": ing.classes,
        "label_columns": ing.label_columns,
        "label_units": ing.label_units,
        "n_target": ing.n_target,
        "predicted_classes": {n: None if m.predicted_classes is None else list(m.predicted_classes)
                              for n, m in training.models.items()},
        "model_uris": {n: m.model_uri for n, m in training.models.items()},
        "target_scores": None if prep["target_scores"] is None else prep["target_scores"].to_dict(orient="records"),
        "timings": run.timings, "peak_rss_gib": run.peaks,
        "concurrency": {"max_workers": run.workers},
    }
    client = _client(uri)
    with_retries(client.set_tag, ctx.parent_run_id, "shiftflow.reused_stages", ",".join(reused) or "none")
    with_retries(client.set_tag, ctx.parent_run_id, "mlflow.note.content", run_description(summary))
    scores = prep["target_scores"]
    if scores is not None:  # held-out target labels: the served candidate's realised numbers on the parent too
        row = scores.set_index("learner").loc[chosen["chosen"]]
        log_metrics(client, ctx.parent_run_id, {f"eval.{k}": row[k] for k in ("target_accuracy", "target_auc")
                                                if k in row.index}, skip_missing=True)
    log_history(uri, ctx.parent_run_id, dec["champion"]["registered_model"])
    log_metrics(client, ctx.parent_run_id, {f"timing.{k}_s": v for k, v in run.timings.items()}
                | {"memory.peak_rss_gib": max(run.peaks.values(), default=float("nan"))}, skip_missing=True)
    create_markdown_artifact(key="retrain-summary", markdown=summary_markdown(summary, chosen["scores"]),
                             description="shiftflow retrain summary")
    return summary


def run_description(s: dict[str, Any]) -> str:
    """One paragraph for the parent run's description (the MLflow UI's run page): what was trained on what,
    what was chosen and how good it is expected to be, and what the registry did."""
    d, est, ch = s["drift"], s["estimate"], s["champion"]
    drift = (f"drift found (domain AUC {d['domain_auc']:.3f})" if d.get("drifted") else
             f"no drift found (domain AUC {d['domain_auc']:.3f})") if d.get("domain_auc") is not None else "drift not tested"
    text = (f"Retrain of {len(s['learners'])} candidates on {s['n_target']} target rows: {drift}, weighting "
            f"{s['weighting']}. Chosen {s['selection']['chosen']} by {s['selection']['selector']}")
    if est and est.get("accuracy") is not None:
        text += (f", estimated target accuracy {est['accuracy']:.3f} [{est['ci_low']:.3f}, {est['ci_high']:.3f}] "
                 f"({est['method']}; overlap {est.get('overlap') or 'not judged'})")
    text += f". Registry: {ch['registered_model']} v{ch['version']} → {ch['decision']}"
    if ch.get("gate_decision"):
        text += f" ({ch['gate_decision']})"
    return text + "."


def _awaiting(run: _Run, prep: dict[str, Any], labeled: dict[str, Any]) -> dict[str, Any]:
    """What a run that stops for target labels returns (a rerun with ``target_labels`` resumes)."""
    return {"flow_run_id": run.ctx.flow_run_id, "run_dir": str(run.store.run_dir), "labels": labeled,
            "mlflow_parent_run_id": run.ctx.parent_run_id, "mlflow_experiment_id": run.ctx.experiment_id,
            "reused_stages": reused_stages(run.store, training_reused=all(r["reused"] for r in prep["results"]))}


def _pair(run: _Run, prep: dict[str, Any], contender: dict[str, Any] | None) -> str | None:
    """The candidate of a pair plan (``label_plan='pair'``): the label-free choice, which the labels then weigh
    against the served champion (without one, against the majority-class rule: whether a first version may serve);
    None for a plan over every candidate."""
    if run.config.label_plan != "pair":
        return None
    if contender is None:  # a first version: the majority-class rule stands in for the champion
        with run.stage("served"):
            contender = served_rule(run.store, model_name=registered_name(run))
    with run.stage("selection"):  # label-free, as the undecided run chose (found in the stage store)
        chosen = _selection(run, prep["run_ids"], None)["chosen"]
    run.log.info("labels: a plan for the pair %s and %s (label_plan='pair'): the labels decide the gate, the "
                 "label-free choice stands", chosen, contender["name"])
    return str(chosen)


def _labels(run: _Run, prep: dict[str, Any]) -> dict[str, Any] | None:
    """The few-target-labels step (label_budget / target_labels), or None. A deployment run suspends until the
    filled file's path arrives through the Prefect UI form; on resume the flow starts again from the top and
    every stage above is found in this run's stage store."""
    config, ctx = run.config, run.ctx
    uri, parent = ctx.tracking_uri, ctx.parent_run_id
    if config.label_budget is None and config.target_labels is None:
        return None
    with run.stage("served"):  # the champion is a contender of the plan: its labels decide an undecided gate
        contender = served(run.store, ctx=ctx, model_name=registered_name(run))
    pair = _pair(run, prep, contender)
    if contender is not None and pair is None:
        run.log.info("labels: %s of %s is planned beside the candidates", contender["name"], contender["model_name"])
    labeled = labels(run.store, ctx=ctx, budget=config.label_budget, label=config.label,
                     target_labels=config.target_labels, k=config.selection_folds, pair=pair)
    if labeled["status"] == "awaiting_labels" and labeled["n_planned"] == 0:  # a pair that never disagrees
        run.log.warning("labels: nothing to label (the contenders predict the same class on every target row, so "
                        "no label can tell them apart): the run goes on without labels")
        return None
    if labeled["status"] == "awaiting_labels" and runtime.deployment.id is not None:
        with_retries(_client(uri).set_tag, parent, "shiftflow.suspended_for_labels", labeled["csv"])
        filled = suspend_flow_run(wait_for_input=labels_form(labeled["csv"]))
        with_retries(_client(uri).delete_tag, parent, "shiftflow.suspended_for_labels")  # resumed
        labeled = labels(run.store, ctx=ctx, budget=config.label_budget, label=config.label,
                         target_labels=filled.target_labels, k=config.selection_folds, pair=pair)
    return labeled


class RunTimeLimit(TimeoutError):
    """``max_run_seconds`` reached: the run stopped (the CLI prints the sentence; the parent MLflow run is FAILED
    with it as tag ``shiftflow.error``)."""


@contextmanager
def time_limit(seconds: float | None, store: StageStore, timings: dict[str, float]) -> Iterator[None]:
    """Stop the block after ``seconds`` (Prefect's own timeout scope, as a flow's ``timeout_seconds`` uses; a
    task already running finishes, none starts after) with :class:`RunTimeLimit` naming the stages that
    finished (timed in ``timings`` and written to ``store``'s run folder)."""
    if seconds is None:
        yield
        return
    from prefect.utilities.timeout import timeout

    class _Reached(TimeoutError):
        pass

    try:
        with timeout(seconds, _Reached):
            yield
    except _Reached:
        done = ", ".join(st for st in timings if store.has_stage(st)) or "none"
        raise RunTimeLimit(f"the run reached max_run_seconds={seconds:g} and stopped (stages finished: {done}); "
                           "finished stages are kept, so a rerun of the same configuration resumes from them; or "
                           "raise max_run_seconds") from None


def tracking_uri(config: Any) -> str:
    """The run's MLflow tracking URI: ``config.tracking_uri``, else ``$MLFLOW_TRACKING_URI``, else the local store
    under ``$SHIFTFLOW_HOME`` (retrain and score configs alike)."""
    return config.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri(shiftflow_home())


def tracking_store(config: Any) -> tuple[str, str]:
    """The run's MLflow tracking URI and experiment id; a local store and the experiment are created on first
    use (``ensure_experiment``, under the store's lock). The CLI calls it early too, while Prefect's API boots."""
    uri = tracking_uri(config)
    check_reachable(uri)
    root = None if uri.startswith(("http://", "https://")) else local_artifact_root(uri)
    if root is not None:
        root.parent.mkdir(parents=True, exist_ok=True)  # the store's folder ($SHIFTFLOW_HOME for the default one)
    return uri, with_retries(ensure_experiment, uri, config.experiment, root)


@flow(name="retrain", log_prints=True)
def retrain(config: RetrainConfig = RetrainConfig()) -> dict[str, Any]:  # noqa: B008
    """Retrain every candidate learner on the (biased) labeled source for the unlabeled target batch."""
    log = get_run_logger()
    checked = preflight(config)  # refuse bad input with its one sentence before MLflow or the run folder
    config = checked.config
    log.info("simulated bias: %s", checked.bias)
    for note in checked.notes:
        log.warning("%s", note)
    flow_run_id = str(runtime.flow_run.id or uuid.uuid4())
    uri, experiment = tracking_store(config)
    store = StageStore(Path(config.run_root or default_run_root()).resolve(), flow_run_id)
    conc = concurrency(config.max_workers)
    with parent_run(uri, experiment, f"retrain-{runtime.flow_run.name or flow_run_id[:8]}",
                    tags={"prefect.flow_run_id": flow_run_id, "shiftflow.run_dir": str(store.run_dir),
                          "shiftflow.simulate_bias": checked.bias},
                    params=flat_params("", config.model_dump(mode="json"))) as parent, \
            threadpool_limits(limits=conc.threads_per_task), task_threads(conc.threads_per_task):
        run = _Run(config, store, RunContext(uri, experiment, parent, flow_run_id, config.seed), conc.max_workers, log)
        log.info("concurrency: %d tasks at once, %d BLAS/OpenMP thread(s) each, %d cores",
                 conc.max_workers, conc.threads_per_task, conc.cores)
        with time_limit(config.max_run_seconds, store, run.timings):
            prep = _prepare(run)
            labeled = _labels(run, prep)
            if labeled is not None and labeled["status"] == "awaiting_labels":  # CLI: a rerun with labels resumes
                return _awaiting(run, prep, labeled)
            summary = _summary(run, prep, _decide(run, prep, labeled))
    log.info("retrain finished: run folder %s, MLflow parent run %s", store.run_dir, parent)
    return summary


def _client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(uri)


def _tag_data(uri: str, parent: str, ing: IngestManifest) -> None:
    client = _client(uri)
    for k, v in ing.data_hashes.items():
        with_retries(client.set_tag, parent, f"data.{k}_sha256", v)
    for role, table in (("source", ing.source), ("target", ing.target)):
        if table is not None:
            with_retries(client.set_tag, parent, f"ingest.{role}_parquet_sha256", table.sha256)
    log_data_inputs(uri, parent, ing)  # the MLflow UI's Dataset column: source and target, Parquet digests
