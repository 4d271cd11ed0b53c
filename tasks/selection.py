"""Stage ``selection``: which candidate will be most accurate on the target, without its labels?

Runs the configured selectors (``shiftlib.selection``) over every trained candidate (weighted ones
carry their importance weights); writes ``selection/scores.parquet`` (learner × selector: score, rank,
interval) and ``selection/rt_matrix.parquet``; logs ``selection.<selector>.rank`` / ``.score`` (and TrCV's
``.accuracy``, ``.ci_low``, ``.ci_high``) into each candidate's nested MLflow run, the RT matrix heatmap
on the parent run, and tags the parent with the chosen candidate and selector. With held-out target
labels it also writes ``selection/agreement.parquet`` and logs each selector's agreement with the truth.
With a label budget's filled labels, ``fewlabel`` decides (``shiftlib.selection.decide``), and
``selection/fewlabel.parquet`` and ``selection.fewlabel.p_best`` hold each candidate's posterior P(best).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from mlflow.entities import Param
from mlflow.tracking import MlflowClient
from prefect import task
from prefect.cache_policies import NO_CACHE

from shiftlib.budget import auto_weighting, scored_folds
from shiftlib.catalog import LABELED_SELECTOR, SOURCE_CV
from shiftlib.selection import (
    Candidate,
    ReverseCell,
    ReverseTestingResult,
    TargetLabels,
    agreement,
    bind_selector,
    combine,
    concat_scores,
    decide,
    fewlabel_select,
    importance_weights,
    plot_rt_matrix,
    reverse_testing_row,
    runs_on_every_row,
    selector_fan_out,
    selector_settings,
    trcv_fold_all,
    trcv_from_folds,
    trcv_setup,
)
from shiftlib.selection.trcv import FoldResidual
from tasks.estimation import FOLD_SCORES, scv_from_estimation
from tasks.evaluation import TARGET_SCORES
from tasks.ingest import INGESTED, TARGET_LABELS, SelectionData, load_target_labels, selection_data
from tasks.labels import stage_predictions
from tasks.limits import limited
from tasks.logs import run_logger
from tasks.served import SERVED
from tasks.store import Read, StageOutput, StageStore
from tasks.tracking import RunContext, log_metrics, with_retries
from tasks.training import LEARNERS, TrainedModel, read_training
from tasks.weights import METHODS, WEIGHTS, fit_weighter, make_candidates, stage_weights, weights_on_rows

STAGE = "selection"
_FEWLABEL_WHY = "fewlabel's contenders: the label plan the filled file (its digest, `target_labels`) answers was keyed by them"
#: what the selection stage reads: the ingested tables and the held-out target labels (the agreement table), the
#: candidates and their weights, and what it takes over instead of refitting (the estimation stage's source CV,
#: the evaluation stage's truth, and for fewlabel the candidates' and the served champion's target predictions)
READS = (*INGESTED, TARGET_LABELS, LEARNERS, WEIGHTS, FOLD_SCORES, TARGET_SCORES,
         Read("training", "predictions.parquet", None, why="written with learners.parquet by the same candidates"),
         Read(SERVED, "predictions.parquet", None, optional=True, why=_FEWLABEL_WHY))


def selector_data(store: StageStore, selector: str, seed: int, rows: int | None) -> SelectionData:
    """The rows ``selector`` works on: every row for those that fit on every row (SCV and WCV: ``every_row``),
    the ``rows`` subsample for the others."""
    return selection_data(store, seed, None if runs_on_every_row(selector) else rows)


def selection_beta(store: StageStore, seed: int, data: SelectionData) -> np.ndarray:
    """The importance weights β that TrCV and WCV use on ``data``'s rows: this run's KMM weights, else the
    run's other weights, else a fit on those rows of the method ``weighting="auto"`` would use (mean 1)."""
    for method in ("kmm", *[m for m in METHODS if m != "kmm"]):
        w = stage_weights(store, method)
        if w is not None:
            return weights_on_rows(w, data.source_rows)
    method = auto_weighting(True, len(data.y_s))
    return importance_weights(fit_weighter(method, data.X_s, data.X_t, seed).weights_, data.X_s, data.X_t)


def _beta_on(beta: np.ndarray | None, data: SelectionData) -> np.ndarray | None:
    """β over every source row (``selection_plan``) restricted to ``data``'s rows, mean 1 again."""
    if beta is None or len(beta) == len(data.y_s):
        return beta
    return weights_on_rows(beta, data.source_rows)


def uses_weights(selector: str) -> bool:
    """Whether ``selector`` takes importance weights β.

    Parameters
    ----------
    selector : str
        A selector name.

    Returns
    -------
    bool
        True when its settings (``get_params``) have ``weights``: TrCV and WCV.
    """
    return "weights" in selector_settings(selector)


def run_selector(selector: str, cands: list[Candidate], data: SelectionData, *, seed: int, k: int,
                 beta: np.ndarray | None = None, rows: int | None = None) -> Any:
    """One registered selector over all candidates on ``data``, built by ``shiftlib.selection.bind_selector``
    from the run's settings it takes: seeded when it has ``random_state``; ``beta`` (``selection_beta``) when
    it has ``weights``; ``scored_folds(len(data.y_s), k, rows)`` of its k folds when it has ``max_folds``."""
    sel = bind_selector(selector, random_state=seed, k=k, weights=_beta_on(beta, data),
                        max_folds=scored_folds(len(data.y_s), k, rows))
    return sel(cands, data.X_s, data.y_s, data.X_t)


def _stage_specs(store: StageStore) -> list[tuple[str, str, str]]:
    return read_training(store).specs()


def _stage_params(selectors: list[str], primary: str, seed: int, k: int, rows: int | None) -> dict[str, Any]:
    # "cv_rows": how SCV/WCV bound their work (scored folds over every row; earlier runs used a subsample)
    return {"selectors": list(selectors), "primary": primary, "seed": seed, "k": k, "rows": rows,
            "cv_rows": "scored_folds"}


def _also(labels_sha256: str | None) -> dict[str, str]:
    """Inputs that are no stage file: with few-label selection, the filled labels file's digest."""
    return {} if labels_sha256 is None else {"target_labels": labels_sha256}


# --- fan-out: the flow maps these over candidates, RT rows and TrCV folds (threads or Dask workers) ---------


@task(name="selection-plan", cache_policy=NO_CACHE)
def selection_plan(store: StageStore, selectors: list[str], primary: str, *, seed: int, k: int,
                   rows: int | None = None, labels_sha256: str | None = None) -> dict[str, Any]:
    """Whether the selection stage must be computed (no reusable earlier stage), the candidate names, and
    the β that TrCV and WCV share across their tasks, computed once."""
    key = store.key(STAGE, _stage_params(selectors, primary, seed, k, rows), READS, _also(labels_sha256))
    names = [n for n, _, _ in _stage_specs(store)]
    if store.find_reusable(STAGE, key) is not None:  # checked before the fan-out; selection's own lookup follows
        return {"compute": False, "candidates": names, "beta": None, "scv_shared": False}
    shared = SOURCE_CV in selectors and scv_from_estimation(store, seed, k) is not None
    beta = None
    if any(uses_weights(s) for s in selectors):  # over every source row; TrCV takes its subsample's part
        beta = selection_beta(store, seed, selection_data(store, seed, None))
    return {"compute": True, "candidates": names, "beta": beta, "scv_shared": shared}


@task(name="cv-candidate", cache_policy=NO_CACHE)
@limited
def cv_candidate(store: StageStore, selector: str, name: str, beta: np.ndarray | None, *, seed: int, k: int,
                 rows: int | None = None) -> Any:
    """SCV or WCV (``selector``) of one candidate on every source row, the same folds for all candidates:
    ``scored_folds`` fits (all k up to ``rows`` source rows)."""
    data = selector_data(store, selector, seed, rows)
    cands = make_candidates(store, [s for s in _stage_specs(store) if s[0] == name], seed, data)
    return run_selector(selector, cands, data, seed=seed, k=k, beta=beta, rows=rows)


@task(name="rt-row", cache_policy=NO_CACHE)
@limited
def rt_row(store: StageStore, labeler: str, *, seed: int,
           rows: int | None = None) -> tuple[TargetLabels, list[ReverseCell]]:
    """ReverseTesting row M[labeler, ·]: 1 + ℓ fits (RT Fig. 3 steps 1–4)."""
    data = selection_data(store, seed, rows)
    return reverse_testing_row(labeler, make_candidates(store, _stage_specs(store), seed, data),
                               data.X_s, data.y_s, data.X_t)


@task(name="trcv-fold", cache_policy=NO_CACHE)
@limited
def trcv_fold_task(store: StageStore, fold: int, beta: np.ndarray, *, seed: int,
                   k: int, rows: int | None = None) -> dict[str, FoldResidual | str]:
    """TrCV Fig. 1 for fold ``fold`` for every candidate (2 fits each); a failed fit gives its message."""
    data = selection_data(store, seed, rows)
    cands = make_candidates(store, _stage_specs(store), seed, data)
    return trcv_fold_all(cands, trcv_setup(cands, data.X_s, data.y_s, data.X_t, weights=_beta_on(beta, data), k=k,
                                           random_state=seed), fold)


@dataclass(frozen=True)
class SelectionSpec:
    """Which selectors run (``selectors``), which one decides (``primary``), on ``k`` folds and ``rows`` rows."""

    selectors: list[str]
    primary: str
    k: int
    rows: int | None = None


@dataclass(frozen=True)
class FannedResults:
    """Selector parts computed by fanned-out tasks: RT rows, TrCV folds, SCV/WCV per candidate, and the plan's β."""

    rt_rows: list[tuple[TargetLabels, list[ReverseCell]]] | None = None
    trcv_folds: list[dict[str, FoldResidual | str]] | None = None
    cv_parts: dict[str, list[Any]] | None = None
    beta: np.ndarray | None = None


@task(name="selection", cache_policy=NO_CACHE)
def selection(store: StageStore, spec: SelectionSpec, *, ctx: RunContext, run_ids: dict[str, str],
              fanned: FannedResults | None = None, labeled: dict[str, Any] | None = None) -> dict[str, Any]:
    """Score every candidate with every selector of ``spec``; pick the primary selector's best candidate.

    ``fanned``: ReverseTesting rows, TrCV folds and SCV/WCV candidates (selector → one result per candidate)
    already computed by fanned-out tasks (+ their ``beta``); without them those selectors run here, in-process,
    on the selection rows (``spec.rows``, ``selection_data``). ``labeled`` (the ``labels`` task's result: plan
    and labels) enables the ``fewlabel`` selector."""
    log = run_logger()
    selectors, primary, k, rows, seed = spec.selectors, spec.primary, spec.k, spec.rows, ctx.seed
    fan = fanned or FannedResults()
    if primary not in selectors:
        raise ValueError(f"the deciding selector {primary!r} must be one of the selectors run: {selectors}")

    def compute() -> StageOutput:
        results = _results(store, selectors, seed=seed, k=k, rows=rows, beta=fan.beta, rt_rows=fan.rt_rows,
                           trcv_folds=fan.trcv_folds, cv_parts=fan.cv_parts or {}, labeled=labeled)
        tables = {"scores": pd.concat([r.to_frame() for r in results.values()], ignore_index=True)}
        rt = next((r for r in results.values() if isinstance(r, ReverseTestingResult)), None)
        if rt is not None:
            tables["rt_matrix"] = rt.matrix_frame()
        agree = _agreement_table(store, results)
        if agree is not None:
            tables["agreement"] = agree
        posterior = _fewlabel_table(results.get(LABELED_SELECTOR))
        if posterior is not None:
            tables["fewlabel"] = posterior
        return StageOutput(tables, value=rt)  # the RT result: its heatmap is drawn when computed

    run = store.find_or_write(STAGE, _stage_params(selectors, primary, seed, k, rows), READS, compute,
                              also=_also(None if labeled is None else labeled["labels_sha256"]))
    scores, rt = run.table("scores"), run.value
    rt_matrix, agree, posterior = (run.table(t) if run.has(t) else None for t in ("rt_matrix", "agreement", "fewlabel"))
    prim = scores[scores["selector"] == primary].sort_values(["rank", "learner"])
    chosen = str(prim.iloc[0]["learner"])
    fewlabel = None
    if posterior is not None:
        fewlabel = {"p_best": dict(zip(posterior["learner"], posterior["p_best"].astype(float), strict=True)),
                    "n_labels": int(posterior["n_labels"].iloc[0])}
        if "accuracy" in posterior.columns:  # a stage written before the posterior kept them has none
            fewlabel |= {"accuracy": dict(zip(posterior["learner"], posterior["accuracy"].astype(float), strict=True)),
                         "se": dict(zip(posterior["learner"], posterior["se"].astype(float), strict=True))}
        log.info("selection: fewlabel posterior: P(%s is the best) = %.2f from %d labels", chosen,
                 fewlabel["p_best"].get(chosen, float("nan")), fewlabel["n_labels"])
    _log_selection(MlflowClient(ctx.tracking_uri), scores, run_ids, ctx.parent_run_id, primary, chosen, agree, rt,
                   None if fewlabel is None else fewlabel["p_best"],
                   read_training(store).models[chosen])
    log.info("selection: %s picks %s", primary, chosen)
    return {"selector": primary, "chosen": chosen, "scores": scores.to_dict("records"),
            "rt_matrix": None if rt_matrix is None else rt_matrix.to_dict("records"),
            "agreement": None if agree is None else agree.to_dict("records"), "fewlabel": fewlabel}


def _fewlabel_table(res: Any) -> pd.DataFrame | None:
    """The fewlabel posterior per candidate (P(best), and the labels it rests on), or None without it."""
    if res is None or "p_best" not in res.details:
        return None
    p_best = res.details["p_best"]
    names = list(p_best.index)
    # the posterior accuracy θ and its standard deviation as an absolute accuracy: the labels' estimate of each
    # candidate's accuracy, with the variance of the part every candidate shares where they all agree (no label
    # there; it cancels in the selection's contrasts, shiftlib.selection.fewlabel.common_variance)
    theta = pd.Series(res.details.get("accuracy", res.scores), dtype=float).reindex(names)
    shared = float(res.details.get("common_var", 0.0))
    sd = np.sqrt(np.clip(np.diag(np.asarray(res.details["cov"], float)) + shared, 0.0, None)) \
        if "cov" in res.details else np.full(len(names), np.nan)
    return pd.DataFrame({"learner": names, "p_best": p_best.to_numpy(float),
                         "n_labels": int(res.details.get("n_labels", 0)),
                         "decision": str(res.details.get("decision", "")),
                         "accuracy": theta.to_numpy(float), "se": sd})


def _results(store: StageStore, selectors: list[str], *, seed: int, k: int, rows: int | None,
             beta: np.ndarray | None, rt_rows: Any, trcv_folds: Any, cv_parts: dict[str, list[Any]],
             labeled: dict[str, Any] | None) -> dict[str, Any]:
    """Each selector's result on the selection rows, from the fanned-out parts when given, else computed here."""
    log = run_logger()
    data = selection_data(store, seed, rows)
    full = data if rows is None else None
    cv_parts = cv_parts or {}
    if beta is None and any(uses_weights(s) for s in selectors):
        full = full or selection_data(store, seed, None)
        beta = selection_beta(store, seed, full)  # at most one fit, over every source row
    cands = make_candidates(store, _stage_specs(store), seed, data)

    def on_every_row(sel: str) -> Any:  # SCV / WCV in-process: every source row, scored_folds of the k folds
        nonlocal full
        full = full or selection_data(store, seed, None)
        return run_selector(sel, make_candidates(store, _stage_specs(store), seed, full), full, seed=seed, k=k,
                            beta=beta, rows=rows)

    results = {}

    @functools.cache
    def scv() -> Any:  # once: the fanned-out parts, the estimation stage's folds (same fits), or fitted here
        return results.get(SOURCE_CV) or scv_from_estimation(store, seed, k) or on_every_row(SOURCE_CV)

    for sel in selectors:  # the fanned-out parts by how the registry says the selector splits (selector_fan_out)
        fan = selector_fan_out(sel)
        if fan == "rt_row" and rt_rows is not None:
            results[sel] = combine([t for t, _ in rt_rows], [c for _, row in rt_rows for c in row])
        elif fan == "trcv_fold" and trcv_folds is not None:
            setup = trcv_setup(cands, data.X_s, data.y_s, data.X_t, weights=_beta_on(beta, data), k=k,
                               random_state=seed)
            results[sel] = trcv_from_folds([c.name for c in cands], setup, trcv_folds)
        elif sel in cv_parts:
            results[sel] = concat_scores(cv_parts[sel])
        elif sel == LABELED_SELECTOR:
            if labeled is None:
                raise ValueError("the fewlabel selector needs target labels: set target_labels")
            # the plan's rows index the whole target batch; the candidates' predictions come from training
            prior = scv()
            posterior = fewlabel_select(cands, data.X_s, data.y_s, _whole_target(store, data), plan=labeled["plan"],
                                        y_labeled=pd.Series(labeled["labels"], dtype=object), prior=prior,
                                        random_state=seed,
                                        predictions=stage_predictions(store, rule=labeled.get("rule", "never")))
            results[sel] = decide(posterior, prior)  # the deciding rule is shiftlib's (DEFAULT_DECISION)
        elif sel == SOURCE_CV:
            results[sel] = scv()
        elif runs_on_every_row(sel):
            results[sel] = on_every_row(sel)
        else:
            results[sel] = run_selector(sel, cands, data, seed=seed, k=k, beta=beta)
        for name, err in getattr(results[sel], "errors", {}).items():
            log.warning("selection %s: %s: %s", sel, name, err)
        log.info("selection %s: best %s", sel, ", ".join(results[sel].best))
    return results


def _whole_target(store: StageStore, data: SelectionData) -> pd.DataFrame:
    """Every target row (the label plan indexes the whole batch), without reading the source again."""
    return store.read_table("ingest", "target", columns=list(data.X_s.columns))


def _agreement_table(store: StageStore, results: dict[str, Any]) -> pd.DataFrame | None:
    """Each selector's agreement with the held-out target labels (None without them, or with one candidate:
    there is no order to agree with)."""
    if load_target_labels(store) is None:
        return None
    truth = store.read_table("evaluation", "target_scores").set_index("learner")["target_accuracy"]
    if len(truth) < 2:
        return None
    agree = pd.DataFrame([{"selector": s} | agreement(truth, r).to_dict() for s, r in results.items()])
    agree["selected"] = agree["selected"].map(lambda v: ",".join(v))
    agree["true_best"] = agree["true_best"].map(lambda v: ",".join(v))
    return agree


def _log_selection(client: MlflowClient, scores: pd.DataFrame, run_ids: dict[str, str], parent_run_id: str,
                   primary: str, chosen: str, agree: pd.DataFrame | None, rt: Any,
                   p_best: dict[str, float] | None = None, chosen_model: TrainedModel | None = None) -> None:
    """``selection.<selector>.*`` into each candidate's nested run (with the fewlabel posterior's ``p_best``);
    choice, agreement and RT heatmap on the parent."""
    for r in scores.to_dict("records"):
        run_id = run_ids.get(r["learner"])
        if run_id is None:
            continue
        sel = r["selector"]
        vals = {f"selection.{sel}.rank": r["rank"], f"selection.{sel}.score": r["score"]}
        if sel == "trcv":
            vals |= {"selection.trcv.accuracy": r["score"], "selection.trcv.ci_low": r["interval_low"],
                     "selection.trcv.ci_high": r["interval_high"]}
        if sel == LABELED_SELECTOR and p_best is not None and r["learner"] in p_best:
            vals["selection.fewlabel.p_best"] = p_best[r["learner"]]
        log_metrics(client, run_id, vals, skip_missing=True)
    with_retries(client.set_tag, parent_run_id, "shiftflow.selected_learner", chosen)
    with_retries(client.set_tag, parent_run_id, "shiftflow.selector", primary)
    if chosen_model is not None:  # a column each in the MLflow UI's run comparison
        params = {"chosen.candidate": chosen, "chosen.learner": chosen_model.learner,
                  "chosen.weighting": chosen_model.weighting}
        with_retries(client.log_batch, parent_run_id, params=[Param(k, str(v)) for k, v in params.items()])
    if agree is not None:
        log_metrics(client, parent_run_id, {f"selection.{r['selector']}.{m}": r.get(m) for r in agree.to_dict("records")
                                             # shares and correlations: the same meaning for any number of
                                             # candidates (TrCV's corr counts pairs: 39 of 66, 9 of 15; it stays
                                             # in the stage's agreement table)
                                             for m in ("pairwise_accuracy", "kendall_tau", "regret")},
                    skip_missing=True)
    if rt is not None:
        with_retries(client.log_figure, parent_run_id, plot_rt_matrix(rt), "selection/rt_matrix.png")
