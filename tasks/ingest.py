"""Stage ``ingest``: load the source and target tables, (optionally) simulate a selection bias, validate
and encode with ``shiftlib.ingest``, write ``source.parquet``, ``target.parquet`` and, when the target
carries labels, ``target_labels.parquet`` (evaluation only)."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.inputs import LABEL, ROW, prepare_inputs, read_inputs
from tasks.logs import run_logger
from tasks.sources import mask_secrets
from tasks.store import StageStore, stage_key

__all__ = ["LABEL", "ROW", "frame_hash", "ingest", "ingest_inputs", "load_target_labels", "load_xy"]


def frame_hash(df: pd.DataFrame) -> str:
    """Content hash of a raw table (values, column names and dtypes)."""
    h = hashlib.sha256()
    h.update(repr([(str(c), str(t)) for c, t in df.dtypes.items()]).encode())
    h.update(pd.util.hash_pandas_object(df, index=False).to_numpy().tobytes())
    return h.hexdigest()


@task(name="ingest", cache_policy=NO_CACHE)
def ingest(
    store: StageStore,
    source_spec: str,
    target_spec: str | None,
    label: str,
    *,
    positive_label: Any = None,
    simulate_bias: dict[str, Any] | None = None,
    seed: int = 0,
    drop_columns: list[str] | None = None,
    max_levels: int = 20,
) -> dict[str, Any]:
    """Returns the stage manifest (``extra`` holds classes, encodings and data hashes)."""
    log = run_logger()
    raw_source, raw_target, notes = read_inputs(source_spec, target_spec, label, simulate_bias)
    for note in notes:
        log.info("ingest: %s", note)
    inputs = {"source": frame_hash(raw_source)}
    if raw_target is not None:
        inputs["target"] = frame_hash(raw_target)
    # the manifest keeps the references without their passwords (tasks.sources.mask_secrets)
    params = {"source": mask_secrets(source_spec), "target": target_spec and mask_secrets(target_spec), "label": label,
              "positive_label": positive_label, "simulate_bias": simulate_bias, "seed": seed,
              "drop_columns": sorted(drop_columns or []), "max_levels": max_levels}
    key = stage_key("ingest", params, inputs)
    found = store.find_reusable("ingest", key)
    if found is not None:
        log.info("ingest: reusing stage from run %s (same inputs and parameters)", found["run_id"])
        return store.adopt("ingest", found)

    inp = prepare_inputs(raw_source, raw_target, label, positive_label=positive_label,
                         simulate_bias=simulate_bias, seed=seed, drop_columns=drop_columns, max_levels=max_levels)
    prepared, bias_info, p_select = inp.prepared, inp.bias_info, inp.p_select
    source = prepared.source_X.copy()
    source.insert(0, ROW, np.arange(len(source), dtype=np.int64))
    source[LABEL] = prepared.source_y
    target = prepared.target_X.copy()
    target.insert(0, ROW, np.arange(len(target), dtype=np.int64))
    tables = {"source": source, "target": target}
    if prepared.target_y is not None:
        tables["target_labels"] = pd.DataFrame({ROW: target[ROW], LABEL: prepared.target_y})
    if p_select is not None:  # the true P(s=1|x,y) of each source row: oracle weights, evaluation only
        tables["source_selection"] = pd.DataFrame({ROW: source[ROW], "p_select": p_select})
    extra = prepared.to_dict() | {"label": label, "bias": bias_info, "data_hashes": inputs}
    manifest = store.write_stage("ingest", tables, key=key, params=params, inputs=inputs, extra=extra)
    log.info(
        "ingest: %d source rows, %d target rows, %d features%s",
        len(source), len(target), len(prepared.feature_columns),
        "; target labels held out for evaluation" if prepared.target_y is not None else "",
    )
    return manifest


def ingest_inputs(store: StageStore, *, labels: bool = False) -> dict[str, str]:
    """The ingest hashes a stage key depends on: source and target tables (and the held-out target labels,
    when ``labels`` and present) — so a new target batch never reuses a stage computed for another."""
    files = store.manifest("ingest")["files"]
    inputs = {"source": files["source.parquet"]["sha256"], "target": files["target.parquet"]["sha256"]}
    if labels and "target_labels.parquet" in files:
        inputs["labels"] = files["target_labels.parquet"]["sha256"]
    return inputs


def load_xy(store: StageStore) -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame]:
    """(X_source, y_source, X_target) from a finished ingest stage — never the target labels."""
    src = store.read_table("ingest", "source")
    X_s = src.drop(columns=[ROW, LABEL])
    y_s = src[LABEL].to_numpy()
    del src  # one copy of the source at a time
    return X_s, y_s, store.read_table("ingest", "target", columns=list(X_s.columns))


def load_target_labels(store: StageStore) -> np.ndarray | None:
    """Held-out target labels (evaluation only), or None when the target had none."""
    if "target_labels.parquet" not in store.manifest("ingest")["files"]:
        return None
    return store.read_table("ingest", "target_labels", columns=[LABEL])[LABEL].to_numpy()
