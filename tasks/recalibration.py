"""Stage ``recalibration`` (when the flow's ``undersample`` is set): train the chosen candidate on an
undersampled copy of the source (``shiftlib.calibration.UndersampledClassifier``), correct its
probabilities (US eq. 9) and threshold (eq. 12), and serve the corrected model.

Metrics come from stratified out-of-fold predictions on the source (the rows with labels), comparing
p_s (undersampled, uncorrected), p′ (corrected) and p (the same learner trained on all rows):
``calibration.brier_raw`` = Brier(p_s), ``.brier_corrected`` = Brier(p′), ``.brier_full`` = Brier(p),
``.auc`` = AUC(p′), ``.gmean_tau_s`` = G-mean(p_s at τ_s), ``.gmean_tau_prime`` = G-mean(p′ at τ′); with
held-out target labels the same metrics are also logged as ``calibration.target.*``. The target prior
re-estimated by EM (Saerens et al. 2002) is logged as ``calibration.target_prior_em``. Writes
``recalibration/probabilities.parquet`` (target rows: p_s, p′, p) and ``recalibration/oof.parquet``;
logs a reliability diagram and the corrected model (``mlflow.pyfunc`` returns p′) in a nested run."""

from __future__ import annotations

from typing import Any

import mlflow
import numpy as np
import pandas as pd
from mlflow.tracking import MlflowClient
from prefect import task
from prefect.cache_policies import NO_CACHE
from sklearn.base import clone
from sklearn.model_selection import StratifiedKFold

from shiftlib.calibration import UndersampledClassifier, reliability_figure
from shiftlib.learners import fit_learner, make_learner, needs_target
from shiftlib.metrics import auc, brier, g_mean
from tasks.ingest import ROW, load_target_labels, load_xy
from tasks.logs import run_logger
from tasks.store import StageStore, stage_key
from tasks.tracking import log_sklearn_model, with_retries

STAGE = "recalibration"


def _metrics(y: np.ndarray, p_s: np.ndarray, p_c: np.ndarray, p_full: np.ndarray, tau_s: float,
             tau_p: float | np.ndarray) -> dict[str, float]:
    """US §V metrics; ``tau_p`` may be per row (out-of-fold: each fold's model has its own realised β, τ′)."""
    dec_c = (p_c > np.asarray(tau_p)).astype(float)  # decisions at τ′, then G-mean of those decisions
    return {"brier_raw": brier(y, p_s), "brier_corrected": brier(y, p_c), "brier_full": brier(y, p_full),
            "auc": auc(y, p_c), "gmean_tau_s": g_mean(y, p_s, tau_s), "gmean_tau_prime": g_mean(y, dec_c, 0.5)}


@task(name="recalibration", cache_policy=NO_CACHE)
def recalibration(store: StageStore, chosen: str, *, beta: float | str, seed: int, cv_folds: int,
                  tracking_uri: str, experiment_id: str, parent_run_id: str, flow_run_id: str = "") -> dict[str, Any]:
    """Undersample-train the chosen candidate, correct it, score it, log it; returns the metrics."""
    log = run_logger()
    models = store.manifest("training")["extra"]["models"]
    info = models[chosen]
    X_s, y_s, X_t = load_xy(store)
    if len(np.unique(y_s)) != 2:
        raise ValueError("undersampling correction (US) is defined for two classes; this source has "
                         f"{len(np.unique(y_s))} — unset `undersample`")
    w = None
    if info["weighting"] != "none":
        w = store.read_table("weights", "weights")[info["weighting"]].to_numpy(dtype=float)
    ing = store.manifest("ingest")["files"]
    inputs = {"source": ing["source.parquet"]["sha256"], "target": ing["target.parquet"]["sha256"]}
    params = {"candidate": chosen, "learner": info["learner"], "weighting": info["weighting"],
              "beta": beta, "seed": seed, "cv_folds": cv_folds}
    key = stage_key(STAGE, params, inputs)
    base = make_learner(info["learner"], random_state=seed)
    if needs_target(base):
        raise ValueError(f"{chosen} learns from the target rows and cannot be refitted on an undersampled copy; "
                         "choose a selector/learner set without it or unset `undersample`")
    found = store.find_reusable(STAGE, key)
    mlflow.set_tracking_uri(tracking_uri)
    client = MlflowClient(tracking_uri)
    if found is not None:
        log.info("recalibration: reusing stage from run %s (same inputs and parameters)", found["run_id"])
        manifest = store.adopt(STAGE, found)
        metrics = manifest["extra"]["metrics"]
        model_uri = manifest["extra"]["model_uri"]
        target = store.read_table(STAGE, "probabilities")
        oof = store.read_table(STAGE, "oof")
    else:
        pos = 1  # ingest codes the positive (larger / given) label as 1
        oof = pd.DataFrame({ROW: np.arange(len(y_s), dtype=np.int64), "y": y_s,
                            "p_s": np.nan, "p_prime": np.nan, "p_full": np.nan, "tau_prime": np.nan})
        skf = StratifiedKFold(n_splits=cv_folds, shuffle=True, random_state=seed)
        for tr, te in skf.split(np.zeros(len(y_s)), y_s):
            wt = None if w is None else w[tr]
            us = UndersampledClassifier(clone(base), beta=beta, random_state=seed, pos_label=pos)
            us.fit(X_s.iloc[tr], y_s[tr], sample_weight=wt)
            full = fit_learner(clone(base), X_s.iloc[tr], y_s[tr], sample_weight=wt, X_target=X_t)
            col = int(np.flatnonzero(us.classes_ == pos)[0])
            oof.loc[te, "p_s"] = us.predict_proba_undersampled(X_s.iloc[te])[:, col]
            oof.loc[te, "p_prime"] = us.predict_proba(X_s.iloc[te])[:, col]
            oof.loc[te, "tau_prime"] = float(us.threshold_)
            oof.loc[te, "p_full"] = full.predict_proba(X_s.iloc[te])[:, list(full.classes_).index(pos)]
        served = UndersampledClassifier(clone(base), beta=beta, random_state=seed, pos_label=pos)
        served.fit(X_s, y_s, sample_weight=w)
        full = fit_learner(clone(base), X_s, y_s, sample_weight=w, X_target=X_t)
        col = int(np.flatnonzero(served.classes_ == pos)[0])
        target = pd.DataFrame({ROW: np.arange(len(X_t), dtype=np.int64),
                               "p_s": served.predict_proba_undersampled(X_t)[:, col],
                               "p_prime": served.predict_proba(X_t)[:, col],
                               "p_full": full.predict_proba(X_t)[:, list(full.classes_).index(pos)]})
        tau_s, tau_p = float(served.tau_s_), float(served.threshold_)
        metrics = {f"calibration.{k}": v for k, v in _metrics(
            y_s, oof["p_s"].to_numpy(), oof["p_prime"].to_numpy(), oof["p_full"].to_numpy(), tau_s,
            oof["tau_prime"].to_numpy()).items()}
        metrics |= {"calibration.beta": float(served.beta_), "calibration.tau_prime": tau_p,
                    "calibration.train_prior": float(served.train_prior_),
                    "calibration.target_prior_em": float(served.estimate_target_prior(X_t).prior)}
        y_t = load_target_labels(store)
        if y_t is not None and len(np.unique(y_t)) == 2:
            metrics |= {f"calibration.target.{k}": v for k, v in _metrics(
                y_t, target["p_s"].to_numpy(), target["p_prime"].to_numpy(), target["p_full"].to_numpy(),
                tau_s, tau_p).items()}
            metrics["calibration.target.true_prior"] = float(np.mean(y_t == pos))

        def _log() -> str:
            with mlflow.start_run(experiment_id=experiment_id, run_name=f"recalibrated:{chosen}",
                                  parent_run_id=parent_run_id, nested=True,
                                  tags={"shiftflow.learner": info["learner"], "shiftflow.weighting": info["weighting"],
                                        "shiftflow.recalibrated": "true", "prefect.flow_run_id": flow_run_id}):
                mlflow.log_params({"candidate": chosen, "beta": str(beta), "beta_realised": served.beta_,
                                   "tau_s": tau_s, "tau_prime": tau_p, "seed": seed})
                mlflow.log_metrics(metrics)
                return log_sklearn_model(served, "model", X_t)

        model_uri = with_retries(_log)
        store.write_stage(STAGE, {"probabilities": target, "oof": oof}, key=key, params=params, inputs=inputs,
                          extra={"metrics": metrics, "model_uri": model_uri})
    for k, v in metrics.items():
        with_retries(client.log_metric, parent_run_id, k, float(v))
    y_fig = load_target_labels(store)
    if y_fig is not None and len(np.unique(y_fig)) == 2:
        fig = reliability_figure(y_fig, {"p_s (undersampled)": target["p_s"], "p′ (corrected, eq. 9)":
                                         target["p_prime"], "p (all rows)": target["p_full"]})
    else:
        fig = reliability_figure(oof["y"], {"p_s (undersampled)": oof["p_s"], "p′ (corrected, eq. 9)":
                                            oof["p_prime"], "p (all rows)": oof["p_full"]})
    with_retries(client.log_figure, parent_run_id, fig, "recalibration/reliability.png")
    log.info("recalibration %s: Brier p_s %.4f → p′ %.4f (all rows %.4f), AUC %.3f", chosen,
             metrics["calibration.brier_raw"], metrics["calibration.brier_corrected"],
             metrics["calibration.brier_full"], metrics["calibration.auc"])
    return {"candidate": chosen, "model_uri": model_uri, "metrics": metrics}
