"""Stage ``recalibration`` (when the flow's ``undersample`` is set): train the chosen candidate on an
undersampled copy of the source (``shiftlib.calibration.UndersampledClassifier``), correct its
probabilities (US eq. 9) and threshold (eq. 12), and serve the corrected model.

Metrics come from stratified out-of-fold predictions on the source (``shiftlib.calibration.oof_undersampling``),
comparing p_s (undersampled, uncorrected), p′ (corrected) and p (the same learner trained on all rows):
``calibration.brier_raw`` = Brier(p_s), ``.brier_corrected`` = Brier(p′), ``.brier_full`` = Brier(p),
``.auc`` = AUC(p′), ``.gmean_tau_s`` = G-mean(p_s at τ_s), ``.gmean_tau_prime`` = G-mean(p′ at τ′); with
held-out target labels the same metrics are also logged as ``calibration.target.*``. The target prior
re-estimated by EM (Saerens et al. 2002) is logged as ``calibration.target_prior_em``. Writes
``recalibration/probabilities.parquet`` (target rows: p_s, p′, p) and ``recalibration/oof.parquet``;
logs a reliability diagram and the corrected model (``mlflow.pyfunc`` returns p′) in a nested run, behind
ingest's fitted preprocessor (``tasks.ingest.served_pipeline``) so it scores raw rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlflow
import numpy as np
import pandas as pd
from mlflow.tracking import MlflowClient
from prefect import task
from prefect.cache_policies import NO_CACHE
from sklearn.base import clone

from shiftlib.calibration import (
    UndersampledClassifier,
    oof_undersampling,
    reliability_figure,
    undersampling_metrics,
)
from shiftlib.learners import fit_learner, make_learner, needs_target
from tasks.ingest import (
    INGESTED,
    ROW,
    SERVED_MODEL,
    TARGET_LABELS,
    load_raw_example,
    load_target_labels,
    load_xy,
    raw_input_schema,
    served_pipeline,
)
from tasks.logs import run_logger
from tasks.store import Read, StageOutput, StageStore
from tasks.tracking import RunContext, log_metrics, log_sklearn_model, tracking_key, with_retries
from tasks.training import read_training
from tasks.weights import stage_weights

STAGE = "recalibration"
POS = 1  # ingest codes the positive (larger / given) label as 1
_KEPT = "kept out of the key so stage keys stay as they were (issue 30)"
#: what the recalibration stage reads: the ingested tables, what its logged model is made of, the chosen
#: candidate's weights and the held-out target labels (``calibration.target.*``)
READS = (*INGESTED, *SERVED_MODEL,
         Read("weights", "weights.parquet", None, optional=True,
              why=f"the chosen candidate's weighting and the seed (params) with the ingested tables fix them; {_KEPT}"),
         Read(TARGET_LABELS.stage, TARGET_LABELS.file, None, optional=True,
              why=f"evaluation only: the target metrics; {_KEPT}"))


@dataclass(frozen=True)
class RecalibrationManifest:
    """What the recalibration stage's manifest says (:func:`read_recalibration`): the undersampling rate asked for,
    the served model, its metrics and the code version that wrote it."""

    beta: float | str | None
    model_uri: str | None
    metrics: dict[str, float]
    code_version: str | None


def read_recalibration(store: StageStore) -> RecalibrationManifest:
    """This run's recalibration manifest, typed (the only reader of its keys)."""
    m = store.manifest(STAGE)
    extra = m.get("extra", {})
    return RecalibrationManifest(m["params"].get("beta"), extra.get("model_uri"), dict(extra.get("metrics", {})),
                                 m.get("code_version"))


def _compute(store: StageStore, chosen: str, base: Any, weighting: str, params: dict[str, Any], ctx: RunContext,
             y_t: np.ndarray | None) -> StageOutput:
    """Undersample-train ``base``, correct it, score it out of fold and on the target (with ``y_t``, the held-out
    labels of two classes, also against them), log the corrected model in a nested run under ``ctx``'s parent."""
    beta, seed, cv_folds = params["beta"], ctx.seed, params["cv_folds"]
    X_s, y_s, X_t = load_xy(store)
    if len(np.unique(y_s)) != 2:
        raise ValueError("undersampling correction (US) is defined for two classes; this source has "
                         f"{len(np.unique(y_s))} — unset `undersample`")
    w = stage_weights(store, weighting) if weighting != "none" else None
    oof = oof_undersampling(base, X_s, y_s, beta=beta, n_splits=cv_folds, random_state=seed,
                            sample_weight=w, pos_label=POS)
    oof.insert(0, ROW, np.arange(len(y_s), dtype=np.int64))
    served = UndersampledClassifier(clone(base), beta=beta, random_state=seed, pos_label=POS)
    served.fit(X_s, y_s, sample_weight=w)
    full = fit_learner(clone(base), X_s, y_s, sample_weight=w)
    col = int(np.flatnonzero(served.classes_ == POS)[0])
    target = pd.DataFrame({ROW: np.arange(len(X_t), dtype=np.int64),
                           "p_s": served.predict_proba_undersampled(X_t)[:, col],
                           "p_prime": served.predict_proba(X_t)[:, col],
                           "p_full": full.predict_proba(X_t)[:, list(full.classes_).index(POS)]})
    tau_s, tau_p = float(served.tau_s_), float(served.threshold_)
    metrics = {f"calibration.{k}": v for k, v in undersampling_metrics(
        oof["y"], oof["p_s"], oof["p_prime"], oof["p_full"], tau_s, oof["tau_prime"]).items()}
    metrics |= {"calibration.beta": float(served.beta_), "calibration.tau_prime": tau_p,
                "calibration.train_prior": float(served.train_prior_),
                "calibration.target_prior_em": float(served.estimate_target_prior(X_t).prior)}
    if y_t is not None:
        metrics |= {f"calibration.target.{k}": v for k, v in undersampling_metrics(
            y_t, target["p_s"], target["p_prime"], target["p_full"], tau_s, tau_p).items()}
        metrics["calibration.target.true_prior"] = float(np.mean(y_t == POS))

    def _log() -> str:
        with mlflow.start_run(experiment_id=ctx.experiment_id, run_name=f"recalibrated:{chosen}",
                              parent_run_id=ctx.parent_run_id, nested=True,
                              tags={"shiftflow.learner": params["learner"], "shiftflow.weighting": weighting,
                                    "shiftflow.recalibrated": "true", "prefect.flow_run_id": ctx.flow_run_id}):
            mlflow.log_params({"candidate": chosen, "beta": str(beta), "beta_realised": served.beta_,
                               "tau_s": tau_s, "tau_prime": tau_p, "seed": seed})
            mlflow.log_metrics(metrics)
            return log_sklearn_model(served_pipeline(store, served), "model", load_raw_example(store),
                                     input_schema=raw_input_schema(store))

    return StageOutput({"probabilities": target, "oof": oof}, extra={"metrics": metrics, "model_uri": with_retries(_log)})


@task(name="recalibration", cache_policy=NO_CACHE)
def recalibration(store: StageStore, chosen: str, *, beta: float | str, ctx: RunContext,
                  cv_folds: int) -> dict[str, Any]:
    """Undersample-train the chosen candidate, correct it, score it, log it (a nested run under ``ctx``'s parent
    run); returns the metrics."""
    log = run_logger()
    seed, tracking_uri, parent_run_id = ctx.seed, ctx.tracking_uri, ctx.parent_run_id
    info = read_training(store).models[chosen]
    base = make_learner(info.learner, random_state=seed)
    if needs_target(base):
        raise ValueError(f"{chosen} learns from the target rows and cannot be refitted on an undersampled copy; "
                         "choose a selector/learner set without it or unset `undersample`")
    params = {"candidate": chosen, "learner": info.learner, "weighting": info.weighting,
              "beta": beta, "seed": seed, "cv_folds": cv_folds}
    mlflow.set_tracking_uri(tracking_uri)
    client = MlflowClient(tracking_uri)
    y_t = load_target_labels(store)
    labeled_target = y_t is not None and len(np.unique(y_t)) == 2
    run = store.find_or_write(
        STAGE, params, READS,
        lambda: _compute(store, chosen, base, info.weighting, params, ctx, y_t if labeled_target else None),
        also={"tracking": tracking_key(tracking_uri)})  # its model lives there
    metrics, model_uri = run.manifest["extra"]["metrics"], run.manifest["extra"]["model_uri"]
    target, oof = run.table("probabilities"), run.table("oof")
    log_metrics(client, parent_run_id, metrics)
    y_fig, probs = (y_t, target) if labeled_target else (oof["y"], oof)
    fig = reliability_figure(y_fig, {"p_s (undersampled)": probs["p_s"], "p′ (corrected, eq. 9)": probs["p_prime"],
                                     "p (all rows)": probs["p_full"]})
    with_retries(client.log_figure, parent_run_id, fig, "recalibration/reliability.png")
    log.info("recalibration %s: Brier p_s %.4f → p′ %.4f (all rows %.4f), AUC %.3f", chosen,
             metrics["calibration.brier_raw"], metrics["calibration.brier_corrected"],
             metrics["calibration.brier_full"], metrics["calibration.auc"])
    return {"candidate": chosen, "model_uri": model_uri, "metrics": metrics}
