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
    ReverseCell,
    TargetLabels,
    agreement,
    combine,
    fewlabel_select,
    importance_weights,
    plot_rt_matrix,
    reverse_testing,
    reverse_testing_row,
    source_cv,
    trcv_fold_all,
    trcv_from_folds,
    trcv_select,
    trcv_setup,
    weighted_cv,
)
from shiftlib.selection.trcv import FoldResidual
from tasks.ingest import ingest_inputs, load_target_labels, load_xy
from tasks.labels import stage_predictions
from tasks.logs import run_logger
from tasks.store import MANIFEST, StageStore, stage_key
from tasks.tracking import log_metrics, with_retries
from tasks.weights import fit_weighter, kmm_beta, stage_weights

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


def _stage_specs(store: StageStore) -> list[tuple[str, str, str]]:
    return [(n, m["learner"], m["weighting"]) for n, m in store.manifest("training")["extra"]["models"].items()]


def _stage_key(store: StageStore, selectors: list[str], primary: str, seed: int, k: int,
               labels_sha256: str | None = None) -> tuple[str, dict, dict]:
    # the target batch (and its held-out labels, which the agreement table uses) are inputs: the candidates'
    # source-CV table alone does not change with the target
    inputs = ingest_inputs(store, labels=True) | {
        "training": store.manifest("training")["files"]["learners.parquet"]["sha256"]}
    if (store.stage_dir("weights") / MANIFEST).exists():
        inputs["weights"] = store.manifest("weights")["files"]["weights.parquet"]["sha256"]
    if labels_sha256 is not None:  # few-label selection: the filled labels file is an input
        inputs["target_labels"] = labels_sha256
    params = {"selectors": list(selectors), "primary": primary, "seed": seed, "k": k}
    return stage_key(STAGE, params, inputs), params, inputs


# --- fan-out: the flow maps these over RT rows and TrCV folds (task runner: threads or Dask workers) ---------


@task(name="selection-plan", cache_policy=NO_CACHE)
def selection_plan(store: StageStore, selectors: list[str], primary: str, *, seed: int, k: int,
                   labels_sha256: str | None = None) -> dict[str, Any]:
    """Whether the selection stage must be computed (no reusable earlier stage), the candidate names, and
    the β TrCV shares across its folds (this run's KMM weights, else a KMM fit), computed once."""
    key, _, _ = _stage_key(store, selectors, primary, seed, k, labels_sha256)
    names = [n for n, _, _ in _stage_specs(store)]
    if store.find_reusable(STAGE, key) is not None:
        return {"compute": False, "candidates": names, "trcv_beta": None}
    beta = None
    if "trcv" in selectors:
        X_s, _, X_t = load_xy(store)
        beta = importance_weights(kmm_beta(store, seed), X_s, X_t)
    return {"compute": True, "candidates": names, "trcv_beta": beta}


@task(name="rt-row", cache_policy=NO_CACHE)
def rt_row(store: StageStore, labeler: str, *, seed: int) -> tuple[TargetLabels, list[ReverseCell]]:
    """ReverseTesting row M[labeler, ·]: 1 + ℓ fits (RT Fig. 3 steps 1–4)."""
    X_s, y_s, X_t = load_xy(store)
    return reverse_testing_row(labeler, make_candidates(store, _stage_specs(store), seed), X_s, y_s, X_t)


@task(name="trcv-fold", cache_policy=NO_CACHE)
def trcv_fold_task(store: StageStore, fold: int, beta: np.ndarray, *, seed: int,
                   k: int) -> dict[str, FoldResidual | str]:
    """TrCV Fig. 1 for fold ``fold`` for every candidate (2 fits each); a failed fit gives its message."""
    X_s, y_s, X_t = load_xy(store)
    cands = make_candidates(store, _stage_specs(store), seed)
    return trcv_fold_all(cands, trcv_setup(cands, X_s, y_s, X_t, weights=beta, k=k, random_state=seed), fold)


@task(name="selection", cache_policy=NO_CACHE)
def selection(store: StageStore, selectors: list[str], primary: str, *, seed: int, k: int,
              tracking_uri: str, parent_run_id: str, run_ids: dict[str, str],
              rt_rows: list[tuple[TargetLabels, list[ReverseCell]]] | None = None,
              trcv_folds: list[dict[str, FoldResidual | str]] | None = None,
              trcv_beta: np.ndarray | None = None, labeled: dict[str, Any] | None = None) -> dict[str, Any]:
    """Score every candidate with every selector; pick the primary selector's best candidate.

    ``rt_rows`` / ``trcv_folds`` (+ ``trcv_beta``): ReverseTesting rows and TrCV folds already computed by
    fanned-out ``rt-row`` / ``trcv-fold`` tasks; without them those selectors run here, in-process.
    ``labeled`` (the ``labels`` task's result: plan and labels) enables the ``fewlabel`` selector."""
    log = run_logger()
    if primary not in selectors:
        raise ValueError(f"the deciding selector {primary!r} must be one of the selectors run: {selectors}")
    key, params, inputs = _stage_key(store, selectors, primary, seed, k,
                                     None if labeled is None else labeled["labels_sha256"])
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
        # KMM β for the selectors that run here (WCV; TrCV when its folds were not fanned out): at most one fit
        kmm = kmm_beta(store, seed) if "wcv" in selectors or ("trcv" in selectors and trcv_folds is None) else None
        cands = make_candidates(store, _stage_specs(store), seed)
        results = {}
        for sel in selectors:
            if sel == "rt" and rt_rows is not None:
                results[sel] = combine([t for t, _ in rt_rows], [c for _, row in rt_rows for c in row])
            elif sel == "trcv" and trcv_folds is not None:
                if trcv_beta is None:
                    raise ValueError("trcv_folds were given without the trcv_beta they were computed with")
                setup = trcv_setup(cands, X_s, y_s, X_t, weights=trcv_beta, k=k, random_state=seed)
                results[sel] = trcv_from_folds([c.name for c in cands], setup, trcv_folds)
            elif sel == "fewlabel":
                if labeled is None:
                    raise ValueError("the fewlabel selector needs target labels: set target_labels")
                results[sel] = fewlabel_select(cands, X_s, y_s, X_t, plan=labeled["plan"],
                                               y_labeled=pd.Series(labeled["labels"], dtype=object),
                                               prior=results.get("scv", "cv"), random_state=seed,
                                               predictions=stage_predictions(store))
            else:
                results[sel] = run_selector(sel, cands, X_s, y_s, X_t, seed=seed, k=k, kmm_weights=kmm)
            for name, err in getattr(results[sel], "errors", {}).items():
                log.warning("selection %s: %s: %s", sel, name, err)
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
        log_metrics(client, run_id, vals, skip_missing=True)
    with_retries(client.set_tag, parent_run_id, "shiftflow.selected_learner", chosen)
    with_retries(client.set_tag, parent_run_id, "shiftflow.selector", primary)
    if agree is not None:
        log_metrics(client, parent_run_id, {f"selection.{r['selector']}.{m}": r.get(m) for r in agree.to_dict("records")
                                             for m in ("pairwise_accuracy", "kendall_tau", "regret", "corr")},
                    skip_missing=True)
    if rt is not None:
        with_retries(client.log_figure, parent_run_id, plot_rt_matrix(rt), "selection/rt_matrix.png")
    log.info("selection: %s picks %s", primary, chosen)
    return {"selector": primary, "chosen": chosen, "scores": scores.to_dict("records"),
            "rt_matrix": None if rt_matrix is None else rt_matrix.to_dict("records"),
            "agreement": None if agree is None else agree.to_dict("records")}
