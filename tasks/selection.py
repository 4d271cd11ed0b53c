"""Stage ``selection``: which candidate will be most accurate on the target, without its labels?

Runs the configured selectors (``shiftlib.selection``) over every trained candidate (weighted ones
carry their importance weights); writes ``selection/scores.parquet`` (learner × selector: score, rank,
interval) and ``selection/rt_matrix.parquet``; logs ``selection.<selector>.rank`` / ``.score`` (and TrCV's
``.accuracy``, ``.ci_low``, ``.ci_high``) into each candidate's nested MLflow run, the RT matrix heatmap
on the parent run, and tags the parent with the chosen candidate and selector. With held-out target
labels it also writes ``selection/agreement.parquet`` and logs each selector's agreement with the truth.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from mlflow.tracking import MlflowClient
from prefect import task
from prefect.cache_policies import NO_CACHE

from shiftlib.learners import make_learner
from shiftlib.selection import (
    Candidate,
    agreement,
    plot_rt_matrix,
    reverse_testing,
    source_cv,
    trcv_select,
    weighted_cv,
)
from tasks.ingest import load_target_labels, load_xy
from tasks.logs import run_logger
from tasks.store import MANIFEST, StageStore, stage_key
from tasks.tracking import with_retries
from tasks.weights import fit_weighter, stage_weights

STAGE = "selection"
SELECTORS = ("rt", "trcv", "scv", "wcv")


def make_candidates(store: StageStore, specs: list[tuple[str, str, str]], seed: int) -> list[Candidate]:
    """``Candidate`` per (name, learner, weighting): weights come from this run's weights stage, or are
    fitted the stage's way when the run did not compute that method (e.g. an incumbent's recipe)."""
    weights: dict[str, np.ndarray] = {}
    out = []
    for name, learner, weighting in specs:
        if weighting != "none" and weighting not in weights:
            w = stage_weights(store, weighting)
            if w is None:
                X_s, _, X_t = load_xy(store)
                w = fit_weighter(weighting, X_s, X_t, seed).weights_
            weights[weighting] = w
        w = weights.get(weighting)
        out.append(Candidate(name, make_learner(learner, random_state=seed), sample_weight=w))
    return out


def run_selector(selector: str, cands: list[Candidate], X_s: pd.DataFrame, y_s: np.ndarray, X_t: pd.DataFrame,
                 *, seed: int, k: int, kmm_weights: np.ndarray | None = None) -> Any:
    """One selector over all candidates. TrCV and WCV use KMM weights: this run's (``kmm_weights``, from
    the weights stage) when it computed them, else their own KMM fit."""
    beta = "kmm" if kmm_weights is None else kmm_weights
    if selector == "rt":
        return reverse_testing(cands, X_s, y_s, X_t, random_state=seed)
    if selector == "trcv":
        return trcv_select(cands, X_s, y_s, X_t, weights=beta, k=k, random_state=seed)
    if selector == "scv":
        return source_cv(cands, X_s, y_s, k=k, random_state=seed)
    if selector == "wcv":
        return weighted_cv(cands, X_s, y_s, X_t, weights=beta, k=k, random_state=seed)
    raise ValueError(f"unknown selector {selector!r}; choose from {list(SELECTORS)}")


@task(name="selection", cache_policy=NO_CACHE)
def selection(store: StageStore, selectors: list[str], primary: str, *, seed: int, k: int,
              tracking_uri: str, parent_run_id: str, run_ids: dict[str, str]) -> dict[str, Any]:
    """Score every candidate with every selector; pick the primary selector's best candidate."""
    log = run_logger()
    if primary not in selectors:
        raise ValueError(f"the deciding selector {primary!r} must be one of the selectors run: {selectors}")
    training = store.manifest("training")
    inputs = {"training": training["files"]["learners.parquet"]["sha256"],
              "source": store.manifest("ingest")["files"]["source.parquet"]["sha256"]}
    if (store.stage_dir("weights") / MANIFEST).exists():
        inputs["weights"] = store.manifest("weights")["files"]["weights.parquet"]["sha256"]
    params = {"selectors": list(selectors), "primary": primary, "seed": seed, "k": k}
    key = stage_key(STAGE, params, inputs)
    found = store.find_reusable(STAGE, key)
    rt = None
    if found is not None:
        log.info("selection: reusing stage from run %s (same inputs and parameters)", found["run_id"])
        store.adopt(STAGE, found)
        scores = store.read_table(STAGE, "scores")
        rt_matrix = store.read_table(STAGE, "rt_matrix") if "rt" in selectors else None
        agree = store.read_table(STAGE, "agreement") if "agreement.parquet" in found["files"] else None
    else:
        X_s, y_s, X_t = load_xy(store)
        kmm = stage_weights(store, "kmm")
        cands = make_candidates(store, [(n, m["learner"], m["weighting"])
                                        for n, m in training["extra"]["models"].items()], seed)
        results = {}
        for sel in selectors:
            results[sel] = run_selector(sel, cands, X_s, y_s, X_t, seed=seed, k=k, kmm_weights=kmm)
            log.info("selection %s: best %s", sel, ", ".join(results[sel].best))
        scores = pd.concat([r.to_frame() for r in results.values()], ignore_index=True)
        tables = {"scores": scores}
        rt = results.get("rt")
        rt_matrix = None
        if rt is not None:
            rt_matrix = rt.matrix_frame()
            tables["rt_matrix"] = rt_matrix
        agree = None
        y_t = load_target_labels(store)
        if y_t is not None:
            truth = store.read_table("evaluation", "target_scores").set_index("learner")["target_accuracy"]
            rows = [{"selector": s} | agreement(truth, r).to_dict() for s, r in results.items()]
            agree = pd.DataFrame(rows)
            agree["selected"] = agree["selected"].map(lambda v: ",".join(v))
            agree["true_best"] = agree["true_best"].map(lambda v: ",".join(v))
            tables["agreement"] = agree
        store.write_stage(STAGE, tables, key=key, params=params, inputs=inputs)

    prim = scores[scores["selector"] == primary].sort_values(["rank", "learner"])
    chosen = str(prim.iloc[0]["learner"])
    client = MlflowClient(tracking_uri)
    for r in scores.to_dict("records"):
        run_id = run_ids.get(r["learner"])
        if run_id is None:
            continue
        sel = r["selector"]
        vals = {f"selection.{sel}.rank": r["rank"], f"selection.{sel}.score": r["score"]}
        if sel == "trcv":
            vals |= {"selection.trcv.accuracy": r["score"], "selection.trcv.ci_low": r["interval_low"],
                     "selection.trcv.ci_high": r["interval_high"]}
        for key_, v in vals.items():
            if v is not None and not (isinstance(v, float) and np.isnan(v)):
                with_retries(client.log_metric, run_id, key_, float(v))
    with_retries(client.set_tag, parent_run_id, "shiftflow.selected_learner", chosen)
    with_retries(client.set_tag, parent_run_id, "shiftflow.selector", primary)
    if agree is not None:
        for r in agree.to_dict("records"):
            for m in ("pairwise_accuracy", "kendall_tau", "regret", "corr"):
                v = r.get(m)
                if v is not None and not (isinstance(v, float) and np.isnan(v)):
                    with_retries(client.log_metric, parent_run_id, f"selection.{r['selector']}.{m}", float(v))
    if rt is not None:
        with_retries(client.log_figure, parent_run_id, plot_rt_matrix(rt), "selection/rt_matrix.png")
    log.info("selection: %s picks %s", primary, chosen)
    return {"selector": primary, "chosen": chosen, "scores": scores.to_dict("records"),
            "rt_matrix": None if rt_matrix is None else rt_matrix.to_dict("records"),
            "agreement": None if agree is None else agree.to_dict("records")}
