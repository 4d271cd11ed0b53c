"""Stage ``drift``: two-sample tests between the ingested source and target (``shiftlib.drift``);
writes ``drift/features.parquet``, ``drift/row_scores.parquet``, ``drift/summary.json``, ``drift/features.png``; logs ``drift.*``
metrics and a per-feature chart on the parent MLflow run and a Prefect markdown artifact."""

from __future__ import annotations

import io
import json
from typing import Any

from mlflow.tracking import MlflowClient
from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from shiftlib.budget import DRIFT_ROWS, detectable_auc, subsample
from shiftlib.drift import DriftReport, detect_drift, plot_drift
from tasks.ingest import INGESTED, load_xy
from tasks.logs import run_logger
from tasks.store import Read, StageOutput, StageStore
from tasks.tracking import RunContext, log_metrics, with_retries

STAGE = "drift"


def _markdown(s: dict[str, Any], top: int = 5) -> str:
    verdict = "**drift detected**" if s["drifted"] else "no drift detected"
    def num(key: str, spec: str) -> str:  # a global number the tests could not compute is None (not logged either)
        v = s.get(key)
        return "n/a" if v is None or v != v else format(v, spec)

    lines = [f"# Drift: {verdict}", "",
             f"- domain-classifier AUC {num('domain_auc', '.3f')} (p = {num('domain_pvalue', '.3g')})",
             f"- MMD² {num('mmd2', '.4g')} (p = {num('mmd_pvalue', '.3g')})",
             f"- rule: {s['verdict_rule']}", "", "| feature | test | adjusted p | PSI |", "|---|---|---|---|"]
    feats = sorted((f for f in s["features"] if f.get("p_adjusted") is not None),
                   key=lambda f: f["p_adjusted"])[:top]
    for f in feats:
        psi = f.get("psi")
        lines.append(f"| {f['feature']} | {f['test']} | {f['p_adjusted']:.3g} | "
                     f"{'' if psi is None else f'{psi:.3f}'} |")
    return "\n".join(lines)


#: what the drift stage reads: the ingested source and target
READS = INGESTED
#: what later stages read of this one (the estimation stage's overlap verdict)
ROW_SCORES = Read(STAGE, "row_scores.parquet", "drift", optional=True)
SUMMARY = Read(STAGE, "summary.json", None, optional=True,
               why="written with row_scores.parquet by the same drift run (its domain AUC)")


def read_drift_summary(store: StageStore) -> dict[str, Any]:
    """This run's drift summary (``summary.json``, hash-checked): the verdict, the domain AUC, the tests' numbers."""
    return json.loads(store.read_bytes(STAGE, "summary.json"))


def _compute(store: StageStore, *, seed: int, alpha: float, rows: int | None) -> StageOutput:
    """``detect_drift`` on at most ``rows`` rows per side: the stage's tables, summary and chart (the summary as
    ``value``)."""
    X_s, _, X_t = load_xy(store)
    i_s = subsample(len(X_s), rows, random_state=seed)
    i_t = subsample(len(X_t), rows, random_state=(seed + 1) % 2**32)  # numpy/sklearn seeds stop at 2**32 - 1
    report: DriftReport = detect_drift(X_s.iloc[i_s], X_t.iloc[i_t], alpha=alpha, random_state=seed)
    summary = report.to_dict()
    summary["rows_tested"] = {"source": len(i_s), "target": len(i_t)}
    summary["detectable_auc"] = detectable_auc(len(i_s), len(i_t), alpha=alpha)
    if len(i_s) < len(X_s) or len(i_t) < len(X_t):
        summary["notes"] = [*summary.get("notes", []), (
            f"tests ran on a random subsample of {len(i_s)} of {len(X_s)} source and {len(i_t)} of "
            f"{len(X_t)} target rows; at that size the domain test detects an AUC of "
            f"{summary['detectable_auc']:.3f} with 80% power")]
    png = io.BytesIO()
    plot_drift(report).savefig(png, format="png", dpi=100)
    return StageOutput({"features": report.features, "row_scores": report.row_scores}, value=summary,
                       files={"summary.json": json.dumps(summary, indent=2, sort_keys=True).encode(),
                              "features.png": png.getvalue()})


@task(name="drift", cache_policy=NO_CACHE)
def drift(store: StageStore, *, ctx: RunContext, alpha: float, rows: int | None = DRIFT_ROWS) -> dict[str, Any]:
    """Run ``detect_drift`` on at most ``rows`` rows per side, seeded by ``ctx`` (or reuse an identical earlier
    run) and log it on ``ctx``'s parent run; returns the summary dict (with ``rows_tested`` and the
    ``detectable_auc`` at that size)."""
    log, seed = run_logger(), ctx.seed
    run = store.find_or_write(STAGE, {"seed": seed, "alpha": alpha, "rows": rows}, READS,
                              lambda: _compute(store, seed=seed, alpha=alpha, rows=rows))
    summary = read_drift_summary(store) if run.reused else run.value
    client, parent_run_id = MlflowClient(ctx.tracking_uri), ctx.parent_run_id
    metrics = {"drift.drifted": float(summary["drifted"]), "drift.domain_auc": summary["domain_auc"],
               "drift.domain_pvalue": summary["domain_pvalue"], "drift.mmd2": summary["mmd2"],
               "drift.mmd_pvalue": summary["mmd_pvalue"],
               "drift.n_drifted_features": float(len(summary["drifted_features"]))}
    log_metrics(client, parent_run_id, metrics, skip_missing=True)
    with_retries(client.log_artifact, parent_run_id, str(store.path(STAGE, "features.png")), "drift")
    create_markdown_artifact(key="drift-verdict", markdown=_markdown(summary), description="drift verdict")
    log.info("drift: %s (domain AUC %.3f, MMD p %.3g); drifting features: %s",
             "DRIFT" if summary["drifted"] else "no drift", summary["domain_auc"], summary["mmd_pvalue"],
             ", ".join(summary["drifted_features"][:5]) or "none")
    return summary
