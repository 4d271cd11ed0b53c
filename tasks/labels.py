"""Stage ``labels``: which target rows a person should label (``shiftlib.selection.plan_labels``), and
reading the filled file back.

With a label budget and no labels yet, writes ``labels/plan.parquet`` (row, round, probability),
``labels/to_label.parquet`` and ``labels/to_label.csv`` (the row key ``_row``, the target's encoded
features as ingest stored them, and an empty column named after the label), a Prefect table artifact
listing the rows, and logs the plan on the MLflow parent run. With a filled file it finds the stored plan
of the same configuration (same ingest and training inputs, seed and budget) in any run folder under
the run root, checks the file and returns the labels for the selection stage; nothing already written
changes.

Filled-file rules (documented behaviour): rows whose label cell is empty are skipped and counted (a
partly filled file is used); labels for rows the plan did not ask for are used as uniform draws
(probability 1/N each, see ``shiftlib.selection.fewlabel``); an unknown row key, a label never seen in
the source, or no stored plan for this configuration is an error naming the fix. The labeled rows do not
train the candidates: they are drawn where the candidates disagree and must stay untouched to compare
them.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from mlflow.tracking import MlflowClient
from prefect import task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.input import RunInput
from pydantic import Field

from shiftlib.selection import LabelPlan, TargetPredictions, plan_labels
from tasks.ingest import ROW, ingest_inputs, load_xy
from tasks.logs import run_logger
from tasks.store import MANIFEST, StageStore, stage_key
from tasks.tracking import log_metrics, with_retries

STAGE = "labels"


class FilledLabels(RunInput):
    """The resume form of a deployment run suspended for labels (Prefect UI, or
    ``resume_flow_run(id, run_input={"target_labels": ...})``): where the filled file is."""

    target_labels: str = Field(description="path of the filled to_label.csv (or a Parquet file with the same "
                               "columns); 'file:PATH' or a plain PATH readable by the worker")


def labels_form(csv: str) -> type[FilledLabels]:
    """``FilledLabels`` with the file to fill as the form's default (fill it in place, then press Resume)."""
    return FilledLabels.with_initial_data(description=f"Fill the label column of {csv}, then resume with its "
                                          "path: selection runs with 'fewlabel' deciding.", target_labels=csv)


def stage_predictions(store: StageStore) -> TargetPredictions:
    """The candidates' target predictions and mean class probabilities from the training stage (no refit)."""
    preds = store.read_table("training", "predictions")
    names = list(dict.fromkeys(preds["learner"]))
    proba_cols = sorted((c for c in preds.columns if c.startswith("proba_")), key=lambda c: int(c.split("_")[1]))
    classes = np.array([int(c.split("_")[1]) for c in proba_cols])
    P, proba = [], 0.0
    for n in names:
        g = preds[preds["learner"] == n].sort_values(ROW)
        P.append(g["predicted"].to_numpy())
        proba = proba + g[proba_cols].fillna(0.0).to_numpy(float)
    return TargetPredictions(names, np.column_stack(P), np.asarray(proba) / len(names), classes)


def _keys(store: StageStore, budget: int | None, seed: int) -> tuple[str, str, dict[str, Any], dict[str, str]]:
    inputs = ingest_inputs(store) | {"training": store.manifest("training")["files"]["predictions.parquet"]["sha256"]}
    params = {"budget": budget, "seed": seed}
    return stage_key(STAGE, params, inputs), stage_key(STAGE, {"seed": seed}, inputs), params, inputs


def _find_plan(store: StageStore, budget: int | None, seed: int) -> dict[str, Any] | None:
    key, base, _, _ = _keys(store, budget, seed)
    if budget is not None:
        return store.find_reusable(STAGE, key)
    # no budget given on resume: the newest stored plan of the same inputs and seed
    found = []
    for m in Path(store.run_root).glob(f"*/{STAGE}/{MANIFEST}"):
        try:
            if json.loads(m.read_text()).get("extra", {}).get("base_key") == base:
                found.append(m)
        except (OSError, json.JSONDecodeError):
            continue
    for m in sorted(found, key=lambda p: p.stat().st_mtime, reverse=True):
        man = store.verify(m.parent)
        if man is not None:
            return man | {"_dir": str(m.parent)}
    return None


def plan_from_stage(store: StageStore) -> LabelPlan:
    """The ``LabelPlan`` stored in this run's labels stage."""
    man = store.manifest(STAGE)
    t = store.read_table(STAGE, "plan")
    ex = man["extra"]
    details = {"disagreement": np.asarray(ex["disagreement"], int), "round_info": ex["round_info"]}
    return LabelPlan(t["row"].to_numpy(int), t["probability"].to_numpy(float), t["round"].to_numpy(int),
                     int(ex["budget"]), int(ex["n_target"]), list(ex["learners"]), details)


def read_filled(spec: str, label: str, classes: list[Any], n_target: int) -> tuple[dict[int, int], int, str]:
    """Labels from a filled ``file:PATH.csv|.parquet``: (row → class code, empty cells skipped, SHA-256)."""
    path = Path(spec[5:] if spec.startswith("file:") else spec)
    if not path.exists():
        raise FileNotFoundError(f"target labels file {path} does not exist: pass file:PATH of the filled "
                                "to_label.csv (or a Parquet file with the same columns)")
    data = path.read_bytes()
    df = pd.read_parquet(io.BytesIO(data)) if path.suffix == ".parquet" else pd.read_csv(io.BytesIO(data))
    for col in (ROW, label):
        if col not in df.columns:
            raise ValueError(f"{path} has no column {col!r}: keep the columns of to_label.csv ({ROW!r} and "
                             f"{label!r}) and fill in {label!r}")
    keys = pd.to_numeric(df[ROW], errors="coerce")
    bad = df.loc[keys.isna() | (keys < 0) | (keys >= n_target) | (keys % 1 != 0), ROW].tolist()
    if bad:
        raise ValueError(f"{path}: row keys {bad[:5]} are not rows of this target batch (0 … {n_target - 1}); "
                         "use the file written for this configuration")
    filled = df[label].notna() & (df[label].astype(str).str.strip() != "")
    code = {str(c): i for i, c in enumerate(classes)}
    values = df.loc[filled, label].astype(str).str.strip()
    # numbers read from CSV may come back as floats ("1.0"): compare through the source's spelling too
    values = values.map(lambda v: v if v in code else (str(int(float(v))) if _is_int(v) else v))
    unknown = sorted(set(values) - set(code))
    if unknown:
        raise ValueError(f"{path}: label(s) {unknown[:5]} never occur in the source labels {classes}: no "
                         "candidate can predict them; correct the labels")
    labels = dict(zip(keys[filled].astype(int).tolist(), values.map(code).tolist(), strict=True))
    return labels, int((~filled).sum()), hashlib.sha256(data).hexdigest()


def _is_int(v: str) -> bool:
    try:
        return float(v) == int(float(v))
    except (ValueError, OverflowError):
        return False


@task(name="labels", cache_policy=NO_CACHE)
def labels(store: StageStore, *, budget: int | None, seed: int, label: str, target_labels: str | None,
           tracking_uri: str, parent_run_id: str) -> dict[str, Any]:
    """Plan the rows to label (budget, no labels yet) or read the filled file back; returns a summary
    with ``status`` 'awaiting_labels' (and the file paths) or 'labeled' (plan and labels)."""
    log = run_logger()
    client = MlflowClient(tracking_uri)
    if target_labels is None:
        if budget is None:
            raise ValueError("set label_budget to plan which target rows to label")
        key, base, params, inputs = _keys(store, budget, seed)
        found = store.find_reusable(STAGE, key)
        if found is not None:
            log.info("labels: reusing the plan from run %s (same inputs and parameters)", found["run_id"])
            store.adopt(STAGE, found)
        else:
            X_s, y_s, X_t = load_xy(store)
            tp = stage_predictions(store)
            plan = plan_labels(tp.names, X_s, y_s, X_t, budget=budget, random_state=seed, prior=None, predictions=tp)
            tgt = store.read_table("ingest", "target").set_index(ROW).loc[plan.rows].reset_index()
            tgt[label] = pd.Series([None] * len(tgt), dtype=object)
            extra = {"disagreement": plan.details["disagreement"].tolist(), "round_info": plan.details["round_info"],
                     "budget": plan.budget, "n_target": plan.n_target, "learners": plan.learners,
                     "base_key": base, "label": label}
            store.write_stage(STAGE, {"plan": plan.to_frame(), "to_label": tgt}, key=key, params=params,
                              inputs=inputs, extra=extra, files={"to_label.csv": tgt.to_csv(index=False).encode()})
        plan = plan_from_stage(store)
        csv = store.path(STAGE, "to_label.csv")
        create_table_artifact(key="labels-to-fill", table=plan.to_frame().to_dict("records"),
                              description=f"target rows to label: fill {csv}")
        log_metrics(client, parent_run_id, {"labels.budget": budget, "labels.n_requested": len(plan.rows),
                                            "labels.n_disagreement": len(plan.details["disagreement"])})
        with_retries(client.set_tag, parent_run_id, "labels.plan_sha256", store.file_hash(STAGE, "plan.parquet"))
        with_retries(client.log_artifact, parent_run_id, str(store.path(STAGE, "plan.parquet")), "labels")
        log.info("labels: label the %d rows in %s, then rerun with --target-labels file:%s", len(plan.rows), csv, csv)
        return {"status": "awaiting_labels", "csv": str(csv), "parquet": str(store.path(STAGE, "to_label.parquet")),
                "n_rows": int(len(plan.rows))}
    found = _find_plan(store, budget, seed)
    if found is None:
        raise ValueError("no stored label plan for this configuration (same source, target, learners, seed"
                         + (f", budget {budget}" if budget is not None else "") + "): run with --label-budget "
                         "first, with the same configuration, and fill the file it writes")
    man = store.adopt(STAGE, found)
    plan = plan_from_stage(store)
    classes = store.manifest("ingest")["extra"]["classes"]
    label_col = man["extra"].get("label", label)
    lab, n_empty, digest = read_filled(target_labels, label_col, classes, plan.n_target)
    requested = set(plan.rows.tolist())
    n_extra = len(set(lab) - requested)
    log.info("labels: %d labels read (%d requested rows left empty, %d rows not requested used as uniform draws)",
             len(lab), len(requested - set(lab)), n_extra)
    log_metrics(client, parent_run_id, {"labels.n_filled": len(lab), "labels.n_empty": n_empty,
                                        "labels.n_unrequested": n_extra, "labels.n_requested": len(plan.rows)})
    with_retries(client.set_tag, parent_run_id, "labels.labels_sha256", digest)
    with_retries(client.set_tag, parent_run_id, "labels.plan_sha256", store.file_hash(STAGE, "plan.parquet"))
    return {"status": "labeled", "plan": plan, "labels": lab, "labels_sha256": digest,
            "plan_sha256": store.file_hash(STAGE, "plan.parquet"), "n_empty": n_empty, "n_unrequested": n_extra}
