"""The score flow: a registered version scores a batch of raw rows, and the batch is monitored.

``shiftflow score --model NAME[@ALIAS|/VERSION] --batch SPEC --out file:…|sql:…`` and the deployment
``score-batch`` run it. Composition only: ``tasks.scoring`` resolves, scores, writes and monitors;
``shiftlib.monitoring`` estimates."""

from __future__ import annotations

import time
import uuid
from typing import Any

from prefect import flow, runtime
from prefect.artifacts import create_markdown_artifact

from flows.config import ScoreConfig
from shiftlib.decisions import one_class


@flow(name="score", log_prints=True)
def score_batch(config: ScoreConfig) -> dict[str, Any]:
    """Score ``config.batch`` with the registered version ``config.model`` and monitor the batch."""
    from mlflow.tracking import MlflowClient

    from flows.retrain import tracking_store
    from tasks.history import log_history
    from tasks.scoring import (
        SCORED_TAG,
        check_batch,
        check_out,
        load_version,
        log_monitor,
        model_inputs,
        monitor,
        parse_model_ref,
        resolve_version,
        score,
        used_inputs,
        write_scores,
    )
    from tasks.served import incumbent
    from tasks.sources import mask_secrets, read_table
    from tasks.tracking import log_metrics, parent_run

    t0 = time.perf_counter()
    ref = parse_model_ref(config.model)
    check_out(config.out, overwrite=config.overwrite)  # before anything is read or scored
    uri, experiment = tracking_store(config)
    client = MlflowClient(uri)
    version = resolve_version(client, ref)
    v = str(version.version)
    champ = incumbent(client, ref.name)  # what serves, whichever version this run scores (history's "serving")
    inputs = model_inputs(ref.name, v)
    model = load_version(ref, version)
    # refused before the run is logged: nothing is written for a batch that cannot be scored
    batch = check_batch(read_table(config.batch).frame, inputs, id_column=config.id_column,
                        used=used_inputs(model, inputs))
    # scored before the run is logged too: what the encoder refuses (±inf, a column of another kind) and a version
    # without class labels leave no FAILED run (helper-40); the run then only writes and logs
    table, proba = score(model, version, batch, inputs, id_column=config.id_column)
    flow_run_id = str(runtime.flow_run.id or uuid.uuid4())
    with parent_run(uri, experiment, f"score-{runtime.flow_run.name or flow_run_id[:8]}",
                    tags={"prefect.flow_run_id": flow_run_id, SCORED_TAG: f"{ref.name} v{v}",
                          "shiftflow.run_kind": "score",
                          "champion.serving": "-" if champ is None else str(champ.version),
                          "estimate.candidate": version.tags.get("candidate", "")},
                    params={"model": str(ref), "version": v, "batch": config.batch, "out": config.out,
                            "min_accuracy": config.min_accuracy, "monitor_rows": config.monitor_rows,
                            "seed": config.seed}) as run_id:
        written = write_scores(table, config.out, overwrite=config.overwrite)
        t_scored = time.perf_counter() - t0
        mon = monitor(version, model, batch, inputs, proba, max_rows=config.monitor_rows,
                      min_accuracy=config.min_accuracy, seed=config.seed)
        if mon is not None:
            log_monitor(client, run_id, mon, model=ref.name, version=v, min_accuracy=config.min_accuracy)
        log_metrics(client, run_id, {"score.rows": len(table), "score.seconds": t_scored,
                                     "score.total_seconds": time.perf_counter() - t0})
        log_history(uri, run_id, ref.name)
    summary = {"model": ref.name, "version": v, "rows": len(table), "out": written, "mlflow_run_id": run_id,
               "seconds": time.perf_counter() - t0, "scored_seconds": t_scored,
               "predicted": table["predicted"].value_counts().to_dict(), "monitor": mon}
    create_markdown_artifact(key="score-summary", markdown="\n".join(summary_lines(summary)),
                             description=f"{ref.name} v{v} on {mask_secrets(config.batch)}")
    return summary


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """What the CLI prints and the Prefect artifact shows."""
    lines = [f"scored {summary['rows']} rows with {summary['model']} v{summary['version']} in "
             f"{summary['scored_seconds']:.1f} s → {summary['out']}",
             "predicted: " + ", ".join(f"{k} {n}" for k, n in summary["predicted"].items())]
    dominant = one_class(summary["predicted"])  # the gate never promotes such a model
    if dominant is not None:
        lines.append(f"note: v{summary['version']} predicts {dominant[0]!r} for {dominant[1]:.0%} of this batch: "
                     "its accuracy is that class's share of the batch, which no label-free estimate can tell; label "
                     "some rows, or retrain (`shiftflow retrain --label-budget`)")
    mon = summary["monitor"]
    if mon is None:
        lines.append("no accuracy estimate: the version keeps no evidence for one (see the run's log)")
        return lines
    if mon.alert == "below":
        lines.insert(0, f"ALERT (accuracy): v{summary['version']}'s estimated accuracy on this batch is at most "
                        f"{mon.ci_high:.3f}, below min_accuracy")
    lines += [f"estimated accuracy on this batch: {mon.accuracy:.3f} [{mon.ci_low:.3f}, {mon.ci_high:.3f}] "
              f"({mon.method}, {mon.confidence:.0%} interval, {mon.n_rows} rows); majority-class rule "
              f"{mon.majority_baseline:.3f}",
              f"drift against the version's training source: {'yes' if mon.drifted else 'no'} "
              f"(p = {mon.drift_pvalue:.3g})",
              mon.overlap.sentence()]
    if mon.regime is not None:
        from tasks.estimation import regime_line

        line = regime_line({"regime": mon.regime.regime, "regime_weighted_auc": mon.regime.weighted_auc,
                            "regime_pvalue": mon.regime.weighted_pvalue})
        lines += [] if line is None else [line]
    if mon.alert == "straddles":
        lines.append("min_accuracy lies inside the interval: the model may be below it; label some rows to know")
    return lines
