"""The retrain flow: ingest → drift → weights → training → evaluation → selection → recalibration →
champion. Composition only."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

from mlflow.entities import Param
from mlflow.tracking import MlflowClient
from prefect import flow, get_run_logger, runtime, unmapped
from prefect.artifacts import create_markdown_artifact
from prefect.futures import as_completed

from flows.config import RetrainConfig
from flows.preflight import preflight
from flows.services import shiftflow_home
from shiftlib.learners import make_learner, needs_target
from tasks.champion import champion
from tasks.drift import drift
from tasks.evaluation import evaluate
from tasks.ingest import ingest
from tasks.recalibration import recalibration
from tasks.selection import rt_row, selection, selection_plan, trcv_fold_task
from tasks.store import MANIFEST, StageStore
from tasks.tracking import check_reachable, default_tracking_uri, ensure_experiment, with_retries
from tasks.training import collect_training, train_learner
from tasks.weights import kmm_chunk_task, weights, weights_plan


def _flat(prefix: str, obj: Any) -> dict[str, Any]:
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out |= _flat(f"{prefix}.{k}" if prefix else str(k), v)
        return out
    return {prefix: obj if isinstance(obj, (int, float, str, bool)) or obj is None else str(obj)}


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


def gather(futures: Any, what: str, log: Any) -> list[Any]:
    """Results of mapped task futures in submission order, logging ``what: i/n done`` as each one finishes
    (the progress line the CLI and the Prefect UI show on long stages)."""
    futures = list(futures)
    position = {id(f): i for i, f in enumerate(futures)}
    out: list[Any] = [None] * len(futures)
    t0 = time.monotonic()
    for n, f in enumerate(as_completed(futures), 1):
        out[position[id(f)]] = f.result()
        log.info("%s: %d/%d done (%.1f s)", what, n, len(futures), time.monotonic() - t0)
    return out


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
    home = shiftflow_home()
    tracking_uri = config.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri(home)
    check_reachable(tracking_uri)
    home.mkdir(parents=True, exist_ok=True)
    experiment_id = with_retries(
        ensure_experiment, tracking_uri, config.experiment,
        None if tracking_uri.startswith(("http://", "https://")) else home / "mlartifacts",
    )
    store = StageStore(Path(config.run_root or home / "runs").resolve(), flow_run_id)
    client = MlflowClient(tracking_uri)
    parent = with_retries(
        client.create_run, experiment_id, run_name=f"retrain-{runtime.flow_run.name or flow_run_id[:8]}",
        tags={"prefect.flow_run_id": flow_run_id, "shiftflow.run_dir": str(store.run_dir),
              "shiftflow.simulate_bias": checked.bias},
    )
    parent_id = parent.info.run_id
    try:
        params = _flat("", config.model_dump(mode="json"))
        with_retries(client.log_batch, parent_id, params=[Param(k, str(v)[:6000]) for k, v in params.items()])

        ing = ingest(store, config.source, config.target, config.label, positive_label=config.positive_label,
                     simulate_bias=config.simulate_bias.model_dump() if config.simulate_bias else None,
                     seed=config.seed, drop_columns=config.drop_columns, max_levels=config.max_levels)
        for k, v in ing["extra"]["data_hashes"].items():
            with_retries(client.set_tag, parent_id, f"data.{k}_sha256", v)
        for f in ("source.parquet", "target.parquet"):
            with_retries(client.set_tag, parent_id, f"ingest.{f.split('.')[0]}_parquet_sha256",
                         ing["files"][f]["sha256"])

        drift_summary = drift(store, seed=config.seed, alpha=config.drift_alpha, tracking_uri=tracking_uri,
                              parent_run_id=parent_id)

        method = config.weighting
        if method == "auto":
            method = "kmm" if drift_summary["drifted"] else "none"
            log.info("weighting=auto: %s", "drift found, weighting with KMM" if method == "kmm"
                     else "no drift found, no weighting")
        with_retries(client.set_tag, parent_id, "shiftflow.weighting", method)
        weights_summary = None
        if method != "none":
            chunks = weights_plan(store, [method], seed=config.seed)["kmm_chunks"]
            parts = None if chunks is None else gather(kmm_chunk_task.map(unmapped(store), chunks), "KMM chunks", log)
            weights_summary = weights(store, [method], seed=config.seed, tracking_uri=tracking_uri,
                                      parent_run_id=parent_id, kmm_parts=parts)

        candidates = [{"learner": name, "weighting": None} for name in config.learners]
        if method != "none":
            # CSLR learns its own weights from the target rows (DL): no second, pre-weighted variant
            candidates += [{"learner": name, "weighting": method} for name in config.learners
                           if not needs_target(make_learner(name))]
        futures = train_learner.map(
            unmapped(store), [c["learner"] for c in candidates], seed=config.seed,
            cv_folds=config.cv_folds, tracking_uri=tracking_uri, experiment_id=experiment_id,
            parent_run_id=parent_id, weighting=[c["weighting"] for c in candidates], flow_run_id=flow_run_id,
        )
        results = gather(futures, "training", log)
        training = collect_training(store, results, config.seed, config.cv_folds)
        run_ids = {r["name"]: r["run_id"] for r in results}

        target_scores = evaluate(store, run_ids, tracking_uri=tracking_uri)
        selectors, k = list(config.selectors), config.selection_folds
        plan = selection_plan(store, selectors, config.selector, seed=config.seed, k=k)
        rt_futures = trcv_futures = None
        if plan["compute"] and "rt" in selectors:  # ReverseTesting: one task per row of M (1 + ℓ fits)
            rt_futures = rt_row.map(unmapped(store), plan["candidates"], seed=config.seed)
        if plan["compute"] and "trcv" in selectors:  # TrCV: one task per fold (2 fits per candidate)
            trcv_futures = trcv_fold_task.map(unmapped(store), list(range(k)), unmapped(plan["trcv_beta"]),
                                              seed=config.seed, k=k)
        chosen = selection(store, selectors, config.selector, seed=config.seed, k=k, tracking_uri=tracking_uri,
                           parent_run_id=parent_id, run_ids=run_ids,
                           rt_rows=None if rt_futures is None else gather(rt_futures, "ReverseTesting rows", log),
                           trcv_folds=None if trcv_futures is None else gather(trcv_futures, "TrCV folds", log),
                           trcv_beta=plan["trcv_beta"])
        recal = None
        if config.undersample is not None:
            recal = recalibration(store, chosen["chosen"], beta=config.undersample, seed=config.seed,
                                  cv_folds=config.cv_folds, tracking_uri=tracking_uri, experiment_id=experiment_id,
                                  parent_run_id=parent_id, flow_run_id=flow_run_id)
        model_name = config.model_name or (f"shiftflow-{runtime.deployment.name}" if runtime.deployment.name
                                           else f"{config.experiment}-{config.label}")
        decision = champion(store, chosen, model_name=model_name, seed=config.seed, k=config.selection_folds,
                            tracking_uri=tracking_uri, parent_run_id=parent_id, flow_run_id=flow_run_id,
                            served_model_uri=None if recal is None else recal["model_uri"])
        reused = reused_stages(store, training_reused=all(r["reused"] for r in results))
        summary = {
            "flow_run_id": flow_run_id,
            "run_dir": str(store.run_dir),
            "mlflow_parent_run_id": parent_id,
            "mlflow_experiment_id": experiment_id,
            "tracking_uri": tracking_uri,
            "mlflow_ui": (f"open {tracking_uri}" if tracking_uri.startswith("http") else
                          f"mlflow ui --backend-store-uri {tracking_uri} --host 127.0.0.1 --port 5000"),
            "reused_stages": reused,
            "drift": {k: drift_summary[k] for k in ("drifted", "domain_auc", "domain_pvalue", "mmd2",
                                                     "mmd_pvalue", "drifted_features")},
            "weighting": method,
            "champion": decision,
            "recalibration": recal,
            "selection": {"selector": chosen["selector"], "chosen": chosen["chosen"],
                          "agreement": chosen["agreement"]},
            "weights": weights_summary,
            "learners": {n: m["cv"] for n, m in training["extra"]["models"].items()},
            "model_uris": {n: m["model_uri"] for n, m in training["extra"]["models"].items()},
            "target_scores": None if target_scores is None else target_scores.to_dict(orient="records"),
        }
        with_retries(client.set_tag, parent_id, "shiftflow.reused_stages", ",".join(reused) or "none")
        create_markdown_artifact(key="retrain-summary", markdown=_summary_markdown(summary, chosen["scores"]),
                                 description="shiftflow retrain summary")
        with_retries(client.set_terminated, parent_id, "FINISHED")
        log.info("retrain finished: run folder %s, MLflow parent run %s", store.run_dir, parent_id)
        return summary
    except BaseException as exc:
        try:
            client.set_tag(parent_id, "shiftflow.error", " ".join(str(exc).split())[:5000] or type(exc).__name__)
            client.set_terminated(parent_id, "FAILED")
        except Exception:  # noqa: BLE001 - the original error matters more
            pass
        raise


def _summary_markdown(s: dict[str, Any], scores: list[dict[str, Any]]) -> str:
    """The run's one-page summary (Prefect artifact): drift, weights, selection table, choice, ids."""
    d = s["drift"]
    lines = ["# shiftflow retrain", "",
             f"- **choice: {s['selection']['chosen']}** (selector `{s['selection']['selector']}`)",
             f"- drift: {'**detected**' if d['drifted'] else 'not detected'} (domain AUC {d['domain_auc']:.3f}, "
             f"MMD p = {d['mmd_pvalue']:.3g}); drifting features: {', '.join(d['drifted_features'][:5]) or 'none'}",
             f"- weighting: {s['weighting']}"]
    for w in s["weights"]["summary"] if s["weights"] else []:
        lines.append(f"  - {w['method']}: ESS {w['ess']:.1f}, max {w['max']:.2f}, "
                     f"MMD² {w['mmd2_before']:.4g} → {w['mmd2_after']:.4g}")
    if s["recalibration"]:
        m = s["recalibration"]["metrics"]
        lines.append(f"- recalibration (undersampled, US eq. 9): Brier p_s {m['calibration.brier_raw']:.4f} → "
                     f"p′ {m['calibration.brier_corrected']:.4f}; AUC {m['calibration.auc']:.3f}; "
                     f"τ′ = {m['calibration.tau_prime']:.3f}")
    c = s["champion"]
    lines += [f"- registry: `{c['registered_model']}` v{c['version']} → **{c['decision']}** ({c['reason']})",
              f"- run folder: `{s['run_dir']}`", f"- MLflow parent run: `{s['mlflow_parent_run_id']}`",
              f"- reused stages: {', '.join(s['reused_stages']) or 'none'}", ""]
    selectors = sorted({r["selector"] for r in scores})
    truth = {r["learner"]: r["target_accuracy"] for r in (s["target_scores"] or [])}
    head = ["candidate", "source-CV acc"] + [f"{x} score (rank)" for x in selectors]
    if truth:
        head.append("target accuracy (held out)")
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    by = {(r["learner"], r["selector"]): r for r in scores}
    for n, cv in s["learners"].items():
        cells = [n, f"{cv['accuracy']:.3f}"]
        for x in selectors:
            r = by.get((n, x))
            if r is None or r["score"] is None:
                cells.append("")
                continue
            iv = ""
            if r.get("interval_low") is not None and r["interval_low"] == r["interval_low"]:
                iv = f" [{r['interval_low']:.3f}, {r['interval_high']:.3f}]"
            cells.append(f"{r['score']:.3f}{iv} ({r['rank']})")
        if truth:
            cells.append(f"{truth.get(n, float('nan')):.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    if s["selection"]["agreement"]:
        lines += ["", "Selector agreement with the held-out target labels:", "",
                  "| selector | pairwise accuracy | Kendall τ | regret |", "|---|---|---|---|"]
        for a in s["selection"]["agreement"]:
            lines.append(f"| {a['selector']} | {a['pairwise_accuracy']} | {a['kendall_tau']} | {a['regret']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    from flows.cli import main

    main(["retrain", *os.sys.argv[1:]])
