"""Stage ``training``: one task per candidate (mapped) fits on the source, scores source cross-validation,
logs a nested MLflow run with the model, and predicts the target; ``collect_training`` writes
``training/predictions.parquet`` and ``training/learners.parquet``.

Each candidate also persists its own part (``training_parts/<name>/``, Parquet + manifest) as soon as it
finishes, so a run killed mid-training and started again with the same parameters refits only the
candidates that had not finished. A reused part still gets a nested MLflow run in the new parent run,
pointing at the original model (tag ``shiftflow.reused_from_run``).

The logged model is ``Pipeline([("prepare", <ingest's fitted preprocessor>), ("model", <the candidate>)])``:
it scores raw rows with the source's feature columns; its signature and input example are raw target rows.
The stage's predictions come from the candidate on the encoded target table, the same numbers."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import mlflow
import numpy as np
import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE
from sklearn.base import clone

from shiftlib.cv import cv_metrics, oof_metrics
from shiftlib.estimation import StoredPredictions, candidate_predictions, fold_split_exists
from shiftlib.learners import WeightlessClassError, fit_learner, make_learner, needs_target
from tasks.ingest import (
    INGESTED,
    ROW,
    SERVED_MODEL,
    load_raw_example,
    load_xy,
    raw_input_schema,
    read_ingest,
    selection_data,
    served_pipeline,
)
from tasks.limits import limited
from tasks.logs import run_logger
from tasks.store import CorruptStageError, Read, StageOutput, StageStore
from tasks.tracking import RunContext, log_sklearn_model, tracking_key, with_retries
from tasks.weights import WEIGHTS, make_candidates, stage_weights

STAGE = "training"
#: what a candidate's part reads: the ingested tables and what its logged model is made of (plus, when it is
#: weighted, the weights stage: :func:`part_reads`)
PART_READS = (*INGESTED, *SERVED_MODEL)
#: what later stages read of this one
PREDICTIONS = Read(STAGE, "predictions.parquet", "training")
LEARNERS = Read(STAGE, "learners.parquet", "training")
#: a part's fold fits (out-of-fold source probabilities, and the served fit's on the estimation's target rows):
#: what the estimation stage reads instead of fitting the candidate again on the same folds
FOLD_TABLES = ("oof", "target_proba")
#: how the parts' source CV is computed (in the parts' key: parts written another way are not reused)
CV_SPLIT = "estimation"


def candidate_name(learner: str, weighting: str | None) -> str:
    return learner if not weighting or weighting == "none" else f"{learner}+{weighting}"


def part_reads(weighting: str | None) -> tuple[Read, ...]:
    """What the part of a candidate with ``weighting`` reads (its weights are a required input when weighted)."""
    return PART_READS + ((replace(WEIGHTS, optional=False),) if weighting and weighting != "none" else ())


@dataclass(frozen=True)
class TrainedModel:
    """One fitted candidate as the training stage's manifest lists it."""

    name: str
    learner: str
    weighting: str
    run_id: str | None = None  # its nested run in the run that collected the stage
    model_run_id: str | None = None  # the run that logged its model (an earlier run's when the part was reused)
    model_uri: str | None = None
    cv: dict[str, float] = field(default_factory=dict)
    reused: bool = False
    predicted_classes: tuple[int, ...] | None = None


@dataclass(frozen=True)
class TrainingManifest:
    """What the training stage's manifest says (:func:`read_training`): the fitted candidates in order, the ones
    that could not be fitted (name → why), and the code version that wrote it."""

    models: dict[str, TrainedModel]
    skipped: dict[str, str]
    code_version: str | None

    def specs(self) -> list[tuple[str, str, str]]:
        """(name, learner, weighting) of every candidate: what ``tasks.weights.make_candidates`` takes."""
        return [(n, m.learner, m.weighting) for n, m in self.models.items()]

    def run_ids(self) -> dict[str, str]:
        """Candidate → its nested MLflow run in this run."""
        return {n: m.run_id for n, m in self.models.items() if m.run_id is not None}


def _trained(name: str, m: dict[str, Any]) -> TrainedModel:
    """One entry of the manifest's ``models`` (earlier manifests, and tests' stand-ins, lack some keys)."""
    classes = m.get("predicted_classes")
    return TrainedModel(name, m["learner"], m["weighting"], m.get("run_id"), m.get("model_run_id"),
                        m.get("model_uri"), dict(m.get("cv", {})), bool(m.get("reused", False)),
                        None if classes is None else tuple(classes))


def read_training(store: StageStore) -> TrainingManifest:
    """This run's training manifest, typed (the only reader of its keys)."""
    m = store.manifest(STAGE)
    extra = m.get("extra", {})
    return TrainingManifest({n: _trained(n, v) for n, v in extra.get("models", {}).items()},
                            dict(extra.get("skipped", {})), m.get("code_version"))


def _nested_run(name: str, *, experiment_id: str, parent_run_id: str, tags: dict[str, str],
                params: dict[str, Any], metrics: dict[str, float], model: Any = None,
                X_example: pd.DataFrame | None = None, input_schema: Any = None) -> tuple[str, str | None]:
    with mlflow.start_run(experiment_id=experiment_id, run_name=name, parent_run_id=parent_run_id,
                          nested=True, tags=tags) as run:
        mlflow.log_params(params)
        mlflow.log_metrics(metrics)
        uri = log_sklearn_model(model, "model", X_example, input_schema=input_schema) if model is not None else None
        return run.info.run_id, uri


def _skip_reason(err: ValueError, store: StageStore, w: np.ndarray | None, y_s: np.ndarray, sub: np.ndarray,
                 weighting: str | None, cv_folds: int) -> str:
    """Why a candidate cannot be fitted, in the user's class names and with what its weights rest on."""
    why = str(err)
    if isinstance(err, WeightlessClassError) and err.classes is not None:  # name the user's classes
        labels = read_ingest(store).classes
        names = [labels[int(c)] for c in err.classes]
        pos = [int((np.asarray(w)[sub][y_s[sub] == int(c)] > 0).sum()) for c in err.classes]
        if min(pos) > 0:  # the whole set has such rows: one CV training fold lost them all
            return (f"in a training fold of its {cv_folds}-fold source CV the {weighting} weights are 0 on every row "
                    f"of class {', '.join(map(str, names))} (they are positive on only "
                    f"{', '.join(map(str, pos))} of its rows), so its source-CV accuracy cannot be measured")
        return WeightlessClassError.describe(names)
    if w is not None:  # the usual cause: weights that rest on few rows (a learner's inner folds need more)
        on = np.asarray(w) > 0
        fewest = int(np.bincount(np.asarray(y_s)[on], minlength=int(np.max(y_s)) + 1).min())
        why += (f" (the {weighting} weights are positive on {int(on.sum())} of {len(on)} source rows, {fewest} "
                "of them in the smallest class)")
    return why


def fold_tables(P: StoredPredictions) -> dict[str, pd.DataFrame]:
    """A candidate's fold fits as the part's tables: ``oof`` (y code, fold, p_<code> per source row of the
    estimation's subsample) and ``target_proba`` (p_<code> per target row of it)."""
    oof = pd.DataFrame({"y": P.y_source.astype(np.int64), "fold": P.folds.astype(np.int64)})
    tgt = pd.DataFrame(index=range(len(P.proba_target)))
    for j in range(P.proba_source.shape[1]):
        oof[f"p_{j}"] = P.proba_source[:, j]
        tgt[f"p_{j}"] = P.proba_target[:, j]
    return {"oof": oof, "target_proba": tgt}


def fold_reads(names: list[str]) -> tuple[Read, ...]:
    """The parts' fold tables, as the estimation stage declares them (absent in a part that could not use the
    estimation's split)."""
    return tuple(Read(f"training_parts/{n}", f"{t}.parquet", f"{t}:{n}", optional=True)
                 for n in names for t in FOLD_TABLES)


def fold_predictions(store: StageStore, names: list[str], *, k: int, rows: int | None, seed: int
                     ) -> list[StoredPredictions]:
    """The candidates' fold fits that the training parts of this run computed on the estimation's split (``k``
    folds, ``rows``, ``seed``); candidates without them are left out (the estimation fits those)."""
    out = []
    for n in names:
        part = f"training_parts/{n}"
        if not store.has_stage(part):
            continue
        m = store.manifest(part)
        p = m.get("params", {})
        if (p.get("cv_folds"), p.get("cv_rows"), p.get("seed"), p.get("cv")) != (k, rows, seed, CV_SPLIT) or \
                not all(f"{t}.parquet" in m.get("files", {}) for t in FOLD_TABLES):
            continue
        try:
            oof, tgt = (store.read_table(part, t) for t in FOLD_TABLES)
        except CorruptStageError:  # a damaged table: the estimation fits this candidate itself
            continue
        cols = [c for c in oof.columns if c.startswith("p_")]
        out.append(StoredPredictions(n, np.arange(len(cols)), oof["y"].to_numpy(), oof[cols].to_numpy(float),
                                     tgt[cols].to_numpy(float), oof["fold"].to_numpy()))
    return out


class _Skip(Exception):
    """A candidate that cannot be fitted on these rows (or weights); the message says why, in the user's words."""


def _fit_part(store: StageStore, name: str, params: dict[str, Any], ctx: RunContext,
              tags: dict[str, str]) -> StageOutput:
    """Fit the candidate of ``params`` on every source row, score its source CV, log its nested run with the
    model, predict the target: the part's table, and its run, model and CV in ``extra``. Raises ``_Skip`` when
    it cannot be fitted here."""
    learner, weighting, seed, cv_folds = params["learner"], params["weighting"], ctx.seed, params["cv_folds"]
    X_s, y_s, X_t = xy = load_xy(store)
    w = stage_weights(store, weighting) if weighting else None
    data = selection_data(store, seed, params["cv_rows"], xy)
    sub = data.source_rows
    est = make_learner(learner, random_state=seed, n_rows=len(y_s))
    tables: dict[str, pd.DataFrame] = {}
    try:
        if fold_split_exists(data.y_s, cv_folds, data.groups):  # the estimation stage's fits: it reads them
            cand = make_candidates(store, [(name, learner, weighting or "none")], seed, data)[0]
            P, served = candidate_predictions(cand, data.X_s, data.y_s, data.X_t, k=cv_folds, random_state=seed,
                                              groups=data.groups)
            cv = oof_metrics(data.y_s, P.proba_source, P.classes, cand.sample_weight)
            whole = len(sub) == len(y_s) and (len(data.X_t) == len(X_t) or not needs_target(est))
            model = served if whole else fit_learner(clone(est), X_s, y_s, sample_weight=w, X_target=X_t)
            tables = fold_tables(P)
        else:  # a split the estimation cannot make: cv_metrics lowers its folds to the smallest class
            cv = cv_metrics(make_learner(learner, random_state=seed, n_rows=len(sub)), X_s.iloc[sub], y_s[sub],
                            n_splits=cv_folds, random_state=seed, sample_weight=None if w is None else w[sub],
                            X_target=X_t)
            model = fit_learner(clone(est), X_s, y_s, sample_weight=w, X_target=X_t)
    except ValueError as err:  # this candidate cannot be fitted on these rows (or weights): the others go on
        raise _Skip(_skip_reason(err, store, w, y_s, sub, weighting, cv_folds)) from err
    proba = model.predict_proba(X_t)
    pred = model.classes_[np.argmax(proba, axis=1)]
    final = est.steps[-1][1] if hasattr(est, "steps") else est
    hyper = {f"model.{k}": v for k, v in final.get_params(deep=False).items()
             if isinstance(v, (int, float, str, bool, type(None)))}
    hyper["model.route"] = " → ".join(type(s).__name__ for _, s in est.steps) if hasattr(est, "steps") \
        else type(est).__name__
    hyper["training.cv_rows"] = len(sub)
    run_id, model_uri = with_retries(
        _nested_run, name, experiment_id=ctx.experiment_id, parent_run_id=ctx.parent_run_id, tags=tags,
        params={"learner": learner, "weighting": weighting or "none", "seed": seed, "cv_folds": cv_folds,
                "estimator": type(final).__name__} | hyper,
        metrics={f"training.cv_{k}": v for k, v in cv.items()}, model=served_pipeline(store, model),
        X_example=load_raw_example(store), input_schema=raw_input_schema(store),
    )
    preds = pd.DataFrame({ROW: np.arange(len(X_t), dtype=np.int64), "learner": name,
                          "predicted": pred.astype(np.int64)})
    for j, c in enumerate(model.classes_):
        preds[f"proba_{int(c)}"] = proba[:, j]
    return StageOutput({"predictions": preds} | tables, extra={"run_id": run_id, "model_uri": model_uri, "cv": cv})


@task(name="train-learner", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=[2, 8])
@limited
def train_learner(store: StageStore, learner: str, weighting: str | None = None, *, ctx: RunContext,
                  cv_folds: int, cv_rows: int | None = None) -> dict[str, Any]:
    """Fit one candidate on every source row (or reuse its finished part), log a nested MLflow run under
    ``ctx``'s parent run, predict the target. The source-CV metrics use a stratified subsample of at most
    ``cv_rows`` rows."""
    log = run_logger()
    name = candidate_name(learner, weighting)
    weighting = weighting if weighting and weighting != "none" else None
    part = f"training_parts/{name}"
    params = {"learner": learner, "weighting": weighting, "seed": ctx.seed, "cv_folds": cv_folds, "cv_rows": cv_rows,
              "cv": CV_SPLIT}
    mlflow.set_tracking_uri(ctx.tracking_uri)
    tags = {"shiftflow.learner": learner, "shiftflow.weighting": weighting or "none",
            "prefect.flow_run_id": ctx.flow_run_id}
    try:
        run = store.find_or_write(part, params, part_reads(weighting), lambda: _fit_part(store, name, params, ctx, tags),
                                  also={"tracking": tracking_key(ctx.tracking_uri)})  # its model lives there
    except _Skip as skip:
        log.warning("training %s: skipped, it cannot be fitted here: %s", name, skip)
        return {"name": name, "learner": learner, "weighting": weighting or "none", "skipped": str(skip),
                "reused": False}
    m, preds = run.manifest["extra"], run.table("predictions")
    run_id = m["run_id"]
    if run.reused:  # a nested run in this parent run too, pointing at the original model
        run_id, _ = with_retries(
            _nested_run, name, experiment_id=ctx.experiment_id, parent_run_id=ctx.parent_run_id,
            tags=tags | {"shiftflow.reused_from_run": m["run_id"], "shiftflow.model_uri": m["model_uri"]},
            params={"learner": learner, "weighting": weighting or "none"},
            metrics={f"training.cv_{k}": v for k, v in m["cv"].items()},
        )
        log.info("training %s: reusing the finished fit from run %s", name, m["run_id"])
    else:
        log.info("trained %s: source-CV accuracy %.3f", name, m["cv"]["accuracy"])
    return {"name": name, "learner": learner, "weighting": weighting or "none", "run_id": run_id,
            "model_uri": m["model_uri"], "model_run_id": m["run_id"], "cv": m["cv"], "predictions": preds,
            "reused": run.reused}


@task(name="collect-training", cache_policy=NO_CACHE)
def collect_training(store: StageStore, results: list[dict[str, Any]], seed: int, cv_folds: int) -> TrainingManifest:
    """Write the stage tables (deterministic bytes) and manifest (model URIs and run ids in ``extra``; the
    candidates that could not be fitted, with why, in ``extra["skipped"]``); returns it typed. Raises
    ``ValueError`` when no candidate could be fitted."""
    skipped = {r["name"]: r["skipped"] for r in results if "skipped" in r}
    results = [r for r in results if "skipped" not in r]
    if not results:
        why = "; ".join(f"{n}: {e}" for n, e in skipped.items())
        raise ValueError(f"no candidate learner could be fitted on the source rows ({why})")

    def compute() -> StageOutput:
        preds = pd.concat([r["predictions"] for r in results], ignore_index=True)
        table = pd.DataFrame(
            [{"learner": r["name"], "base_learner": r["learner"], "weighting": r["weighting"],
              **{f"cv_{k}": r["cv"][k] for k in sorted(r["cv"])}} for r in results]
        )
        models = {r["name"]: {"run_id": r["run_id"], "model_run_id": r["model_run_id"], "model_uri": r["model_uri"],
                              "cv": r["cv"], "learner": r["learner"], "weighting": r["weighting"],
                              "reused": r["reused"],
                              "predicted_classes": sorted(int(c) for c in pd.unique(r["predictions"]["predicted"]))}
                  for r in results}
        return StageOutput({"predictions": preds, "learners": table}, extra={"models": models, "skipped": skipped})

    candidates = [{"learner": r["learner"], "weighting": r["weighting"]} for r in results]
    # each part's predictions are read from memory (``results``); their hashes are the stage's inputs
    reads = [Read(f"training_parts/{r['name']}", "predictions.parquet", r["name"]) for r in results]
    # never reused: the manifest names this run's nested MLflow runs (a reused part gets a new one)
    store.find_or_write(STAGE, {"candidates": candidates, "seed": seed, "cv_folds": cv_folds}, reads, compute,
                        reuse=False)
    return read_training(store)
