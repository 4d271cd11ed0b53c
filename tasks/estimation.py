"""Stage ``estimation``: each trained candidate's accuracy on the unlabeled target batch, with an interval
(``shiftlib.estimation``, one shared fold split and one weight fit for all candidates).

Writes ``estimation/estimates.parquet`` (candidate, method, estimate, ci_low, ci_high, confidence, the
interval kind and its possible parts se_source, se_target, se_shift, se_model, …, and last the shift regime,
``shiftlib.regime``, with the numbers it rests on: :func:`stage_regimes`); logs ``estimate.accuracy``, ``estimate.ci_low``,
``estimate.ci_high`` and the tag ``estimate.method`` into each candidate's nested MLflow run.
:func:`served_estimate` puts the served model's estimate on the parent run and raises the
``shiftflow.alert=accuracy`` tag when its upper bound is below ``min_accuracy``; once ``shiftflow evaluate`` has
recorded the realised accuracy of earlier batches of the same deployment (:data:`REALIZED_HISTORY`,
:func:`realized_history`), the served estimate is corrected by their errors (``shiftlib.realized``).
Later stages read the stage's tables through :func:`read_predictions` (the champion gate) and
:func:`scv_from_estimation` (the selection stage's SCV, the labels stage's prior).
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from mlflow.tracking import MlflowClient
from prefect import task
from prefect.cache_policies import NO_CACHE

from shiftlib.catalog import SOURCE_CV
from shiftlib.decisions import (
    OverlapVerdict,
    accuracy_alert,
    majority_baseline,
    majority_margin,
    one_class_share,
    overlap_shares,
    overlap_verdict,
    unseen_level_rows,
    widen_for_overlap,
    with_labels_interval,
)
from shiftlib.errors import ShiftflowInputError
from shiftlib.estimation import (
    N_BOOT,
    StoredPredictions,
    estimate_each,
    label_shift_prior,
    shared_source_cv,
    stored_predictions,
)
from shiftlib.realized import BINOMIAL_FLOOR, MIN_REALIZED_BATCHES, floor_rows, realized_correction
from shiftlib.regime import ShiftRegime, shift_regime
from shiftlib.selection import SelectorScores
from shiftlib.weights import effective_sample_size
from tasks.drift import ROW_SCORES, SUMMARY, read_drift_summary
from tasks.ingest import INGESTED, LABEL, ROW, SOURCE_ROWS, TARGET_ROWS, read_ingest, selection_data
from tasks.ingest import STAGE as INGEST
from tasks.logs import run_logger
from tasks.store import Read, StageOutput, StageStore
from tasks.tracking import RunContext, log_metrics, with_retries
from tasks.training import LEARNERS, fold_predictions, fold_reads, read_training
from tasks.weights import WEIGHTS, make_candidates

STAGE = "estimation"
COLUMNS = ["candidate", "method", "estimate", "ci_low", "ci_high", "confidence", "interval", "se_source",
           "se_target", "se_shift", "se_model", "overlap", "outside_share", "ci_low_source", "ci_high_source",
           "majority_baseline", "majority_margin", "one_class_share", "regime", "regime_weighted_auc",
           "regime_pvalue", "unseen_share", "overlap_reasons"]
#: the stage tables that hold every candidate's stored predictions (what the champion gate reads)
OOF, TARGET_PROBA = "oof", "target_proba"
#: the realised-labels history in the run root: one row per candidate and evaluated run (``shiftflow evaluate``)
REALIZED_HISTORY = "estimate_vs_realized.parquet"

#: what the estimation stage reads: the ingested tables, the candidates (the training stage), their weights, and
#: the drift stage the overlap verdict reads (the last two when the run has them)
READS = (*INGESTED, LEARNERS, WEIGHTS, ROW_SCORES, SUMMARY, SOURCE_ROWS, TARGET_ROWS)
#: what later stages read of this one: the source-CV fold scores (selection's SCV, the labels' next round)
FOLD_SCORES = Read(STAGE, "fold_scores.parquet", None, optional=True,
                   why="fixed by the ingest and training inputs, and the seed and k it is checked against")


def _compute(store: StageStore, *, method: str, seed: int, k: int, confidence: float, n_boot: int,
             rows: int | None, n_jobs: int = 1) -> tuple[pd.DataFrame, pd.DataFrame | None, dict[str, pd.DataFrame]]:
    """The stage table, the source-CV fold scores (``fold_scores``: candidate, fold, accuracy) when the
    estimates were computed on every source row by learners that ignore the target rows (the selection
    stage's SCV then reads them instead of refitting, ``shiftlib.estimation.shared_source_cv``), and the
    stored predictions as tables (:func:`prediction_tables`). Every candidate of the training stage is estimated
    (weighted ones fitted with their weights, as trained) on the selection subsample of at most ``rows`` source and
    target rows (``tasks.ingest.selection_data``): above that size the estimate is that of the candidate's recipe
    fitted on ``rows`` rows."""
    log, t0 = run_logger(), time.monotonic()
    data = selection_data(store, seed, rows)
    specs = read_training(store).specs()
    cands = make_candidates(store, specs, seed, data)
    # worker processes for the fits and bootstraps, unless this task already runs in a daemonic one (a Dask worker)
    n_jobs = 1 if multiprocessing.current_process().daemon else max(1, n_jobs)
    reuse = fold_predictions(store, [name for name, _, _ in specs], k=k, rows=rows, seed=seed)
    preds = stored_predictions(cands, data.X_s, data.y_s, data.X_t, k=k, random_state=seed, n_jobs=n_jobs,
                               reuse=reuse, groups=data.groups)
    known = {P.learner: P.proba_source for P in reuse}
    read = sum(P.learner in known and P.proba_source is known[P.learner] for P in preds)  # taken, not refitted
    folds = None
    scv = shared_source_cv(preds, [learner for _, learner, _ in specs], read_ingest(store).n_source)
    if scv is not None:
        folds = pd.DataFrame([{"candidate": name, "fold": i, "accuracy": float(a)}
                              for name, f in scv.details["fold_scores"].items() for i, a in enumerate(f)])
    overlap = stage_overlap(store, preds[0]) if preds else None
    if overlap is not None:  # a poor overlap is a warning, as in `shiftflow score`
        (log.warning if overlap.verdict == "poor" else log.info)("estimation: %s", overlap.sentence())
    regimes = stage_regimes(store, preds)
    rows = []
    log.info("estimation: %d candidates on %d folds, %d of them fitted here and %d read from the training stage's "
             "fits (%.1f s); bootstrapping each estimate (%d process%s)", len(preds), k, len(preds) - read,
             read, time.monotonic() - t0, n_jobs, "es" if n_jobs > 1 else "")
    each = estimate_each(preds, method, confidence=confidence, n_boot=n_boot, random_state=seed, n_jobs=n_jobs)
    for i, (P, e, g) in enumerate(zip(preds, each, regimes, strict=True), 1):
        log.info("estimation: %d/%d done (%s, %.1f s)", i, len(preds), P.learner, time.monotonic() - t0)
        if g is not None:
            log.info("estimation %s: %s", P.learner, g.sentence())
        lo, hi = e.ci_low, e.ci_high
        if overlap is not None and overlap.verdict == "poor":  # what the source cannot rule out
            lo, hi = widen_for_overlap(lo, hi, overlap.outside_share)
        rows.append({"candidate": P.learner, "method": e.method, "estimate": e.accuracy, "ci_low": lo,
                     "ci_high": hi, "confidence": confidence, "interval": e.details["interval"],
                     "se_source": e.details["se_source"], "se_target": e.details["se_target"],
                     "se_shift": e.details["se_shift"], "se_model": e.details["se_model"],
                     "overlap": "unknown" if overlap is None else overlap.verdict,
                     "outside_share": float("nan") if overlap is None else overlap.outside_share,
                     "ci_low_source": e.ci_low, "ci_high_source": e.ci_high,
                     "majority_baseline": majority_baseline(P), "majority_margin": majority_margin(P),
                     "one_class_share": one_class_share(P),
                     "regime": "unknown" if g is None else g.regime,
                     "regime_weighted_auc": float("nan") if g is None else g.weighted_auc,
                     "regime_pvalue": float("nan") if g is None else g.weighted_pvalue,
                     "unseen_share": float("nan") if overlap is None else overlap.unseen_share,
                     "overlap_reasons": "" if overlap is None else "; ".join(overlap.reasons)})
    return pd.DataFrame(rows, columns=COLUMNS), folds, prediction_tables(preds, data.source_rows)


def stage_overlap(store: StageStore, P: StoredPredictions) -> OverlapVerdict | None:
    """The overlap verdict (``shiftlib.decisions.overlap_verdict``) from the drift stage's domain AUC and row
    scores and the effective sample size of the estimation's importance weights; None without a drift stage."""
    if not store.has_stage("drift"):
        return None
    auc = float(read_drift_summary(store)["domain_auc"])
    scores = store.read_table("drift", "row_scores")
    src, tgt = scores[scores["side"] == "source"], scores[scores["side"] == "target"]
    man = store.manifest("ingest")
    files = man["files"]
    text = [c for c in man["extra"].get("encodings", {})  # the text columns the encoding keeps, in both raw tables
            if all(c in files.get(f"{t}_rows.parquet", {}).get("schema", {}) for t in ("source", "target"))]
    unseen = None
    if text:  # rows whose level no source row has (build item 3), on the rows the drift stage scored
        raw_t = store.read_table("ingest", "target_rows", columns=[ROW, *text])
        flags = unseen_level_rows(store.read_table("ingest", "source_rows", columns=text), raw_t, text)
        unseen = pd.Series(flags, index=raw_t[ROW].to_numpy(int)).reindex(tgt["row"].to_numpy(int),
                                                                          fill_value=False).to_numpy(bool)
    ess = None if P.weights is None else effective_sample_size(P.weights)
    outside, new = overlap_shares(src["target_score"], tgt["target_score"], unseen)
    return overlap_verdict(auc, ess, len(P.y_source), outside, unseen=new)


def stage_regimes(store: StageStore, preds: list[StoredPredictions]) -> list[ShiftRegime | None]:
    """Each candidate's shift regime (``shiftlib.regime.shift_regime``, reported only: no estimate uses it) from
    the drift stage's out-of-fold domain scores, its p-value and level, the labels of the source rows it scored,
    and the candidate's EM target prior (``shiftlib.estimation.label_shift_prior``). The drift stage tests a
    seeded subsample of at most ``DRIFT_ROWS`` rows per side: its ``row`` is a tested row's position in the
    ingested source, which gives its label. None for every candidate without a drift stage (or one whose summary
    has no domain p-value), and for a candidate whose estimation rows lack a class those source rows have."""
    if not preds or not store.has_stage("drift"):
        return [None] * len(preds)
    summary = read_drift_summary(store)
    if summary.get("domain_pvalue") is None:
        return [None] * len(preds)
    scores = store.read_table("drift", "row_scores")
    src, tgt = scores[scores["side"] == "source"], scores.loc[scores["side"] == "target", "target_score"]
    labels = store.read_table(INGEST, "source", columns=[LABEL])[LABEL].to_numpy()[src["row"].to_numpy(np.int64)]
    out: list[ShiftRegime | None] = []
    for P in preds:
        pos = np.searchsorted(P.classes, labels).clip(0, len(P.classes) - 1)
        if not np.array_equal(P.classes[pos], labels):
            out.append(None)
            continue
        out.append(shift_regime(src["target_score"], tgt, pos, label_shift_prior(P, "em"),
                                domain_pvalue=float(summary["domain_pvalue"]), alpha=float(summary["alpha"])))
    return out


def prediction_tables(preds: list[StoredPredictions], source_rows: np.ndarray) -> dict[str, pd.DataFrame]:
    """Every candidate's stored predictions as two long tables: ``oof`` (candidate, source row position in the
    ingested source, fold, class code, importance weight, ``p_<code>`` per class) and ``target_proba``
    (candidate, target row position in the estimation rows, ``p_<code>``); :func:`read_predictions` reads
    one candidate back."""
    oof, tgt = [], []
    for P in preds:
        o = pd.DataFrame(P.proba_source, columns=[f"p_{c}" for c in range(len(P.classes))])
        o.insert(0, "candidate", P.learner)
        o.insert(1, "source_row", np.asarray(source_rows, dtype=np.int64))
        o.insert(2, "fold", P.folds.astype(np.int64))
        o.insert(3, "y", P.y_source.astype(np.int64))
        o.insert(4, "weight", np.nan if P.weights is None else P.weights)
        t = pd.DataFrame(P.proba_target, columns=[f"p_{c}" for c in range(len(P.classes))])
        t.insert(0, "candidate", P.learner)
        t.insert(1, "target_row", np.arange(len(t), dtype=np.int64))
        oof.append(o)
        tgt.append(t)
    return {OOF: pd.concat(oof, ignore_index=True), TARGET_PROBA: pd.concat(tgt, ignore_index=True)} if preds else {}


def read_predictions(store: StageStore, candidate: str, classes: Any) -> StoredPredictions:
    """One candidate's ``StoredPredictions`` from the estimation stage's tables (``classes``: the class codes'
    labels, in code order)."""
    oof = store.read_table(STAGE, OOF)
    tgt = store.read_table(STAGE, TARGET_PROBA)
    o, t = oof[oof["candidate"] == candidate], tgt[tgt["candidate"] == candidate]
    if o.empty:
        raise KeyError(f"the estimation stage has no stored predictions for {candidate!r}")
    cols = [c for c in o.columns if c.startswith("p_")]
    w = o["weight"].to_numpy(float)
    return StoredPredictions(candidate, np.asarray(classes), o["y"].to_numpy(), o[cols].to_numpy(float),
                             t[cols].to_numpy(float), o["fold"].to_numpy(), None if np.isnan(w).all() else w)


def scv_from_estimation(store: StageStore, seed: int, k: int) -> SelectorScores | None:
    """SCV read from the estimation stage's fold scores, or None when it has none for this ``seed`` and ``k``.

    The estimation stage writes them when it fitted every candidate on every source row on the folds of
    ``StratifiedKFold(k, shuffle=True, random_state=seed)``: the same folds and fits as ``source_cv``
    (``shiftlib.estimation.source_cv_scores``), so selection does not fit them a second time."""
    if not store.has_stage(STAGE):
        return None
    m = store.manifest(STAGE)
    if "fold_scores.parquet" not in m["files"] or m["params"].get("seed") != seed or m["params"].get("k") != k:
        return None
    f = store.read_table(STAGE, "fold_scores")
    if sorted(set(f["candidate"])) != sorted(read_training(store).models):
        return None
    folds = {str(n): g.sort_values("fold")["accuracy"].to_numpy(float) for n, g in f.groupby("candidate")}
    return SelectorScores.from_fold_scores(SOURCE_CV, folds, {"scoring": "accuracy", "k": k, "random_state": seed,
                                                              "from": "estimation"})


@dataclass(frozen=True)
class EstimationSettings:
    """How each candidate's target accuracy is estimated: the method, the interval's confidence, bootstrap draws."""

    method: str = "auto"
    confidence: float = 0.95
    n_boot: int = N_BOOT


@task(name="estimation", cache_policy=NO_CACHE)
def estimation(store: StageStore, *, ctx: RunContext, k: int, run_ids: dict[str, str], rows: int | None = None,
               settings: EstimationSettings | None = None, n_jobs: int = 1) -> pd.DataFrame:
    """Estimate every candidate's target accuracy (``settings``, default ``EstimationSettings()``; reusing an
    identical earlier stage), write the stage, log the estimates into the candidates' nested runs; returns the
    stage table. ``n_jobs``: worker processes for the candidates' fits and bootstraps (the result does not depend
    on it, so it is not in the stage key)."""
    log = run_logger()
    seed, how = ctx.seed, settings or EstimationSettings()
    method, confidence, n_boot = how.method, how.confidence, how.n_boot
    params = {"method": method, "seed": seed, "k": k, "confidence": confidence, "n_boot": n_boot, "rows": rows,
              "keeps": "predictions,overlap,regime,margin"}

    def compute() -> StageOutput:
        table, folds, preds = _compute(store, method=method, seed=seed, k=k, confidence=confidence, n_boot=n_boot,
                                       rows=rows, n_jobs=n_jobs)
        return StageOutput({"estimates": table} | ({} if folds is None else {"fold_scores": folds}) | preds)

    reads = READS + fold_reads([name for name, _, _ in read_training(store).specs()])
    table = store.find_or_write(STAGE, params, reads, compute).table("estimates")
    client = MlflowClient(ctx.tracking_uri)
    for r in table.to_dict("records"):
        run_id = run_ids.get(r["candidate"])
        if run_id is None:
            continue
        log_metrics(client, run_id, {"estimate.accuracy": r["estimate"], "estimate.ci_low": r["ci_low"],
                                     "estimate.ci_high": r["ci_high"]})
        with_retries(client.set_tag, run_id, "estimate.method", r["method"])
        log.info("estimation %s: %.3f [%.3f, %.3f] (%s)", r["candidate"], r["estimate"], r["ci_low"],
                 r["ci_high"], r["method"])
    return table


def read_realized_history(path: Path) -> pd.DataFrame | None:
    """The realised-labels history at ``path`` (None when there is none), read by ``shiftflow evaluate`` before
    it appends and by the retrain; a file that cannot be read, or lacks the columns every history has, raises
    :class:`~shiftlib.errors.ShiftflowInputError`."""
    if not path.exists():
        return None
    try:
        hist = pd.read_parquet(path)
    except Exception as exc:  # noqa: BLE001 - any unreadable file gets the same sentence
        raise ShiftflowInputError(f"the realised-labels history {path} cannot be read ({type(exc).__name__}): move "
                                  "it away (`shiftflow evaluate` writes it again)") from exc
    if missing := sorted({"flow_run_id", "candidate", "estimate", "realized_accuracy"} - set(hist.columns)):
        raise ShiftflowInputError(f"the realised-labels history {path} lacks the columns {missing}: it was not "
                                  "written by `shiftflow evaluate`; move it away")
    return hist


def realized_history(store: StageStore, model_name: str, schema_digest: str) -> pd.DataFrame:
    """This deployment's rows of the realised-labels history (:data:`REALIZED_HISTORY` in the run root, written
    by ``shiftflow evaluate``): the rows of registered model ``model_name``, other runs than this one, oldest
    evaluation first, one per candidate and batch (the batch's hash, column ``batch``: two runs on one night,
    undecided and then with labels, both evaluated, are one batch; the latest evaluation stands) and none of this
    run's batch; empty without a history. Rows of other models are other deployments and are left out;
    rows written before the history named its model carry no deployment and are left out too.

    Raises :class:`~shiftlib.errors.ShiftflowInputError`, before anything of this run is registered, when the
    file cannot be read or holds rows of ``model_name`` whose model took other input columns (another
    ``schema`` digest): their errors say nothing of this model's."""
    path = Path(store.run_root) / REALIZED_HISTORY
    hist = read_realized_history(path)
    if hist is None or "model_name" not in hist.columns:
        return pd.DataFrame()
    if missing := sorted({"schema", "evaluated_at"} - set(hist.columns)):
        raise ShiftflowInputError(f"the realised-labels history {path} lacks the columns {missing}: it was not "
                                  "written by `shiftflow evaluate`; move it away")
    mine = hist[hist["model_name"] == model_name]
    other = mine[mine["schema"].notna() & (mine["schema"] != schema_digest)]
    if len(other):
        raise ShiftflowInputError(
            f"the realised-labels history {path} holds {other['flow_run_id'].nunique()} batch(es) of model "
            f"{model_name!r} whose model took other input columns (schema {other['schema'].iloc[0]}, this run "
            f"{schema_digest}): their errors do not apply here; give another --model-name, or move those rows away")
    mine = mine[mine["flow_run_id"] != store.run_id].sort_values("evaluated_at", kind="stable")
    if "batch" in mine.columns:  # one batch is one realised error, however many runs scored it and were evaluated
        today = read_ingest(store).data_hashes.get("target")
        mine = mine[mine["batch"].isna() | (mine["batch"] != today)]  # this batch's own labels are no past error
        known = mine["batch"].notna()
        later = mine[known].drop_duplicates(["candidate", "batch"], keep="last")
        mine = pd.concat([mine[~known], later]).sort_values("evaluated_at", kind="stable")
    return mine.reset_index(drop=True)


def realized_estimate(r: Mapping[str, Any], history: pd.DataFrame | None, n_target: int | None = None
                      ) -> dict[str, Any] | None:
    """Candidate ``r``'s label-free estimate corrected by its realised errors on this deployment's earlier
    batches (``shiftlib.realized.realized_correction`` on ``history``'s rows of the same candidate, one per
    run; its spread raised to the binomial noise of the rows the realised accuracy will be measured on, when
    ``shiftlib.realized.BINOMIAL_FLOOR``: ``shiftlib.realized.floor_rows`` of this batch's ``n_target`` rows and
    the earlier batches' labeled ``n_rows``); None with fewer than ``MIN_REALIZED_BATCHES`` such batches."""
    if history is None or history.empty:
        return None
    # the history's estimate is the estimation stage's, label-free: the correction never feeds back into it
    rows = history[history["candidate"] == r["candidate"]].drop_duplicates("flow_run_id", keep="last")
    past = pd.to_numeric(rows["n_rows"], errors="coerce") if "n_rows" in rows else ()
    n = floor_rows(n_target, past)
    corr = realized_correction(float(r["estimate"]), rows["estimate"].to_numpy(float),
                               rows["realized_accuracy"].to_numpy(float), confidence=float(r["confidence"]),
                               n_target=n if BINOMIAL_FLOOR and n else None)
    if corr is None:
        return None
    return {"accuracy": corr.accuracy, "ci_low": corr.ci_low, "ci_high": corr.ci_high, "bias": corr.bias,
            "spread": corr.spread, "n_batches": corr.n_batches}


def labeled_estimate(r: Mapping[str, Any], labeled: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The served candidate's accuracy once target labels have arrived: the labels' estimate (the fewlabel
    posterior θ and its standard deviation, ``labeled``'s ``accuracy`` / ``se``) combined with the label-free
    estimate ``r`` as the prior (``shiftlib.decisions.with_labels``); None without labels for it."""
    cand = r["candidate"]
    if not labeled or cand not in (labeled.get("accuracy") or {}):
        return None
    theta, se = float(labeled["accuracy"][cand]), float(labeled["se"][cand])
    if not (np.isfinite(theta) and np.isfinite(se) and se > 0):
        return None
    est, lo, hi, weight = with_labels_interval(float(r["estimate"]), float(r["ci_low"]), float(r["ci_high"]),
                                               theta, se, confidence=float(r["confidence"]))
    return {"accuracy": est, "ci_low": lo, "ci_high": hi, "n_labels": int(labeled["n_labels"]),
            "prior_weight": weight, "labels_only": theta}


@task(name="served-estimate", cache_policy=NO_CACHE)
def served_estimate(table: pd.DataFrame, served: str, *, ctx: RunContext, min_accuracy: float | None,
                    model_name: str | None = None, labeled: Mapping[str, Any] | None = None,
                    history: pd.DataFrame | None = None, rule: list[Any] | None = None,
                    n_target: int | None = None) -> dict[str, Any]:
    """The served candidate's estimate on ``ctx``'s parent run (``estimate.*``, ``estimate.majority_baseline``, the
    tags ``shiftflow.estimate.overlap`` and ``shiftflow.estimate.regime``; with this deployment's realised-labels
    ``history`` (:func:`realized_history`) ``estimate.realized.*``, the estimate corrected by its past errors,
    :func:`realized_estimate`; and with target labels ``estimate.labeled.*``, the estimate that combines them
    with the label-free one — the corrected one when there is one — :func:`labeled_estimate`). ``alert`` is
    True (the parent is tagged ``shiftflow.alert=accuracy`` and the event ``shiftflow.alert.accuracy`` is
    emitted) when the upper end of the last of these intervals is below ``min_accuracy``; an interval that
    straddles ``min_accuracy`` is a warning. ``rule``: the majority-class rule's class and those tied with it in the source
    (``tasks.ingest.rule_classes``), named beside its accuracy. ``n_target``: the batch's rows, for the
    realised correction's binomial floor."""
    rows = table[table["candidate"] == served]
    if rows.empty:
        raise ValueError(f"no accuracy estimate for the served candidate {served!r}; "
                         f"the estimation stage has {list(table['candidate'])}")
    r = rows.iloc[0].to_dict()
    real = realized_estimate(r, history, n_target)
    prior = r if real is None else r | {"estimate": real["accuracy"], "ci_low": real["ci_low"],
                                        "ci_high": real["ci_high"]}
    lab = labeled_estimate(prior, labeled)
    final = lab or real or {"ci_low": float(r["ci_low"]), "ci_high": float(r["ci_high"])}
    verdict = accuracy_alert(final["ci_low"], final["ci_high"], min_accuracy)
    alert, straddles = verdict == "below", verdict == "straddles"
    client, parent_run_id = MlflowClient(ctx.tracking_uri), ctx.parent_run_id
    baseline, margin = float(r.get("majority_baseline", float("nan"))), float(r.get("majority_margin", float("nan")))
    metrics = {"estimate.accuracy": r["estimate"], "estimate.ci_low": r["ci_low"], "estimate.ci_high": r["ci_high"],
               "estimate.majority_baseline": baseline, "estimate.majority_margin": margin}
    if real is not None:
        metrics |= {f"estimate.realized.{k}": real[k] for k in ("accuracy", "ci_low", "ci_high", "bias", "n_batches")}
    if lab is not None:
        metrics |= {f"estimate.labeled.{k}": lab[k] for k in ("accuracy", "ci_low", "ci_high", "n_labels",
                                                              "prior_weight")}
    log_metrics(client, parent_run_id, metrics, skip_missing=True)
    with_retries(client.set_tag, parent_run_id, "estimate.method", r["method"])
    with_retries(client.set_tag, parent_run_id, "estimate.candidate", served)
    overlap = str(r.get("overlap", "unknown"))
    with_retries(client.set_tag, parent_run_id, "shiftflow.estimate.overlap", overlap)
    regime = str(r.get("regime", "unknown"))
    with_retries(client.set_tag, parent_run_id, "shiftflow.estimate.regime", regime)
    log = run_logger()
    if alert:
        with_retries(client.set_tag, parent_run_id, "shiftflow.alert", "accuracy")
        log.warning("accuracy alert: %s's estimated accuracy has upper bound %.3f < min_accuracy %.3f",
                    served, final["ci_high"], min_accuracy)
        from tasks.events import emit

        emit("shiftflow.alert.accuracy", model_name or served,
             {"candidate": served, "estimate": float((lab or real or r).get("accuracy", r["estimate"])),
              "ci_low": final["ci_low"], "ci_high": final["ci_high"], "min_accuracy": float(min_accuracy),
              "mlflow_run_id": parent_run_id})
    elif straddles:
        log.warning("accuracy: %s's interval [%.3f, %.3f] straddles min_accuracy %.3f: it may be below; label "
                    "some target rows (--label-budget) to know", served, final["ci_low"], final["ci_high"],
                    min_accuracy)
    return {"candidate": served, "method": r["method"], "accuracy": float(r["estimate"]),
            "ci_low": float(r["ci_low"]), "ci_high": float(r["ci_high"]), "confidence": float(r["confidence"]),
            "min_accuracy": min_accuracy, "alert": bool(alert), "straddles": bool(straddles),
            "majority_baseline": baseline, "majority_margin": margin, "majority_classes": rule,
            "same_as_rule": bool(r.get("one_class_share") == 1.0 and margin == 0.0),  # its class on every row
            "overlap": overlap, "labeled": lab, "realized": real,
            "realized_batches": _batches(r, history),
            "outside_share": float(r.get("outside_share", float("nan"))), "regime": regime,
            "unseen_share": float(r.get("unseen_share", float("nan"))),
            "overlap_reasons": str(r.get("overlap_reasons") or ""),
            "regime_weighted_auc": float(r.get("regime_weighted_auc", float("nan"))),
            "regime_pvalue": float(r.get("regime_pvalue", float("nan")))}


def _batches(r: Mapping[str, Any], history: pd.DataFrame | None) -> int:
    """How many earlier batches of this deployment have realised accuracies for candidate ``r``."""
    if history is None or history.empty:
        return 0
    return int(history.loc[history["candidate"] == r["candidate"], "flow_run_id"].nunique())


def summary_lines(served: Mapping[str, Any] | None, *, labeled: bool = False) -> tuple[list[str], list[str]]:
    """Markdown for the run summary: (lines that go *first*, i.e. the accuracy alert, and a bullet with the
    served model's estimate and interval); ``labeled``: the run has target labels (``overlap_line``)."""
    if not served:
        return [], []
    first = []
    if served["alert"]:
        high = (served.get("labeled") or served)["ci_high"]
        first = [f"**ALERT (accuracy): {served['candidate']}'s estimated target accuracy is at most "
                 f"{high:.3f} < min_accuracy {served['min_accuracy']}; the champion alias was not "
                 "moved.**", ""]
    bullet = [f"- estimated target accuracy of {served['candidate']}: {served['accuracy']:.3f} "
              f"[{served['ci_low']:.3f}, {served['ci_high']:.3f}] ({served['method']}, "
              f"{served['confidence']:.0%} interval){baseline_words(served)}"]
    if (line := realized_line(served)) is not None:
        bullet.append(f"- {line}")
    if (line := labeled_line(served)) is not None:
        bullet.append(f"- {line}")
    if (line := overlap_line(served, labeled=labeled)) is not None:
        bullet.append(f"- {line}")
    if (line := regime_line(served)) is not None:
        bullet.append(f"- {line}")
    return first, bullet


def realized_line(served: Mapping[str, Any]) -> str | None:
    """The estimate corrected by this deployment's realised errors, or how many realised batches there are
    while fewer than ``MIN_REALIZED_BATCHES``; None before any."""
    real, n = served.get("realized"), int(served.get("realized_batches") or 0)
    if real:
        return (f"corrected by the realised errors of {real['n_batches']} earlier batches: {real['accuracy']:.3f} "
                f"[{real['ci_low']:.3f}, {real['ci_high']:.3f}] (their mean error {real['bias']:+.3f})")
    if n:
        return (f"{n} earlier batch{'es' if n > 1 else ''} with realised accuracy (`shiftflow evaluate`); the "
                f"estimate learns from them from {MIN_REALIZED_BATCHES} on")
    return None


def labeled_line(served: Mapping[str, Any]) -> str | None:
    """The estimate that takes the target labels, and how many it rests on, or None without labels."""
    lab = served.get("labeled")
    if not lab:
        return None
    return (f"accuracy with {lab['n_labels']} target labels: {lab['accuracy']:.3f} [{lab['ci_low']:.3f}, "
            f"{lab['ci_high']:.3f}] (the labels' own estimate {lab['labels_only']:.3f}, combined with the label-free "
            f"estimate, whose weight is {lab['prior_weight']:.2f}; {LABELED_CAVEAT})")


#: what the accuracy with labels cannot see, said beside it (reports/label_budget_uniform.md, share0 at 50 labels)
LABELED_CAVEAT = ("labels are drawn where the candidates disagree, so the accuracy they share where they agree rests "
                  "on their probabilities and this interval may be too narrow under shift: it held 0.94 / 0.67 / 0.50 "
                  "of the time at 50 labels on feature bias / natural / TrCV-pair cases, "
                  "reports/label_budget_uniform.md")


def rule_class_words(rule: list[Any] | None) -> str:
    """`` ('No')`` after "majority-class rule": the class it predicts; when the source's largest classes tie, which
    of them it took, since that is the label's order and not the data's (helper-36 could not tell)."""
    if not rule:
        return ""
    if len(rule) == 1:
        return f" ({rule[0]!r})"
    return (f" ({rule[0]!r}, tied in the source with {', '.join(repr(c) for c in rule[1:])}: the first in the "
            "label's order)")


def baseline_words(served: Mapping[str, Any]) -> str:
    """``; majority-class rule 0.650`` beside an estimate (empty when unknown). When the paired margin the
    champion gate's guard reads (``shiftlib.decisions.majority_margin``) has the other sign than estimate −
    rule, it is named too: a report printed 0.921 against a rule of 0.956 and promoted, with nothing to say
    why."""
    b = served.get("majority_baseline")
    if b is None or b != b:
        return ""
    words = f"; majority-class rule{rule_class_words(served.get('majority_classes'))} {b:.3f}"
    if served.get("same_as_rule"):  # shiftlib.decisions.majority_margin: 0 exactly
        # one accuracy, two estimates: the model's is the median of every estimator, the rule's of the seven that
        # pair with it (shiftlib.decisions.BASELINE_PAIRS); helper-36 read 0.746 beside 0.699 as a contradiction
        return (f"; this model predicts the majority-class rule's class on every target row, so on this batch it is "
                f"exactly as accurate as the rule (estimated {b:.3f} by the estimators the rule is paired with)")
    m, est = served.get("majority_margin"), served.get("accuracy")
    if m is not None and m == m and est is not None and (est - b > 0) != (m > 0):
        words += (f", yet estimator by estimator this model is {m:+.3f} against it (the paired margin the "
                  "promotion guard reads)")
    return words


def overlap_line(served: Mapping[str, Any], *, labeled: bool = False) -> str | None:
    """The overlap verdict in one line that says what to do, or None when the run has none; ``labeled``: the run
    has target labels already (then it does not ask for them again)."""
    overlap = served.get("overlap")
    if overlap == "poor":
        share, unseen = served.get("outside_share", float("nan")), served.get("unseen_share", float("nan"))
        new = (f" ({unseen:.0%} has levels of text columns the source never had: --drop-columns leaves out a column "
               "that should not matter)" if unseen == unseen and unseen else "")
        # what made it poor besides the unreached share (shiftlib.decisions.overlap_verdict's reasons): helper-39 read
        # "POOR: 5% of the batch lies beyond the source's reach" where the trigger was the weights' 1.4% ESS
        others = [w for w in str(served.get("overlap_reasons") or "").split("; ")
                  if w and "beyond the source" not in w and "levels of text columns" not in w]
        first = "".join(f"{w}; " for w in others)
        return (f"overlap POOR: {first}{share:.0%} of the batch lies beyond the source's reach{new}, so the interval is "
                "widened to what the source cannot rule out"
                + ("" if labeled else "; label some target rows (--label-budget) to know"))
    if overlap == "ok":
        return "overlap ok: the source reaches the batch"
    return None


def regime_line(served: Mapping[str, Any]) -> str | None:
    """The shift regime in one line (``shiftlib.regime``: reported beside the estimate, used by none), or None when
    the run has none."""
    regime = served.get("regime")
    auc, p = served.get("regime_weighted_auc", float("nan")), served.get("regime_pvalue", float("nan"))
    numbers = f"the domain AUC with the source classes re-weighted by the EM prior {auc:.3f}, p {p:.3g}"
    if regime == "neither":
        return "shift regime: neither covariate nor label shift detectable (the domain classifier's test)"
    if regime == "label":
        return f"shift regime: label shift, re-weighting the classes explains the shift ({numbers}); reported only"
    if regime == "covariate":
        return (f"shift regime: covariate shift, re-weighting the classes does not explain the shift ({numbers}); "
                "reported only")
    return None
