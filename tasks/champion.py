"""Stage ``champion``: register the chosen model in the MLflow Model Registry (one registered model per
deployment) and decide its alias.

The new model takes alias ``champion`` only if, on the *current* target batch, it beats the current
champion under the same selector; otherwise it becomes ``challenger``. Selectors score learning
recipes (learner + weighting) on the current source/target, so the incumbent is re-scored as its
recipe (stored in the model version's tags) on the current batch: taken from this run's selection
table when the recipe is among this run's candidates (the same computation), otherwise scored now by
the same selector beside the new choice. Ties keep the incumbent. The first registered model is
champion. Decision, both scores and the selector are logged on the parent run."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import mlflow
import numpy as np
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.logs import run_logger
from tasks.selection import make_candidates, run_selector, selection_beta, selection_data
from tasks.tracking import log_metrics, with_retries


def _incumbent(client: MlflowClient, name: str) -> Any:
    try:
        return client.get_model_version_by_alias(name, "champion")
    except MlflowException:
        return None


def _rescore(store: Any, selector: str, incumbent: dict[str, str], chosen: str, seed: int, k: int,
             rows: int | None) -> dict[str, float]:
    """Score the incumbent's recipe and the new choice together with ``selector`` on the current batch
    (the selection stage's rows and β)."""
    data = selection_data(store, seed, rows)
    m = store.manifest("training")["extra"]["models"][chosen]
    inc_name = f"incumbent:{incumbent['candidate']}"
    cands = make_candidates(store, [(inc_name, incumbent["learner"], incumbent["weighting"]),
                                    (chosen, m["learner"], m["weighting"])], seed, data)
    beta = selection_beta(store, seed, data) if selector in ("trcv", "wcv") else None
    res = run_selector(selector, cands, data, seed=seed, k=k, beta=beta)
    return {"incumbent": float(res.scores[inc_name]), "new": float(res.scores[chosen])}


@task(name="champion", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=[2, 8])
def champion(store: Any, selection_result: dict[str, Any], *, model_name: str, seed: int, k: int,
             tracking_uri: str, parent_run_id: str, flow_run_id: str = "",
             served_model_uri: str | None = None, rows: int | None = None,
             hold_champion: str | None = None) -> dict[str, Any]:
    """Register the chosen model (or ``served_model_uri``, e.g. its recalibrated version) and set
    ``champion`` or ``challenger``; returns the decision record. ``hold_champion`` (a reason, e.g. an
    accuracy alert) keeps the ``champion`` alias where it is: the new model is then ``challenger``."""
    log = run_logger()
    mlflow.set_tracking_uri(tracking_uri)
    client = MlflowClient(tracking_uri)
    selector, chosen = selection_result["selector"], selection_result["chosen"]
    models = store.manifest("training")["extra"]["models"]
    info = models[chosen]
    scores = {r["learner"]: r["score"] for r in selection_result["scores"] if r["selector"] == selector}
    new_score = float(scores[chosen])
    inc = _incumbent(client, model_name)
    features = list(store.manifest("ingest")["extra"]["feature_columns"])
    features_sha = hashlib.sha256(json.dumps(features).encode()).hexdigest()[:16]
    mv = with_retries(mlflow.register_model, served_model_uri or info["model_uri"], model_name, tags={
        "recalibrated": str(served_model_uri is not None).lower(),
        "candidate": chosen, "learner": info["learner"], "weighting": info["weighting"], "seed": str(seed),
        "selector": selector, "selector_score": repr(new_score), "prefect.flow_run_id": flow_run_id,
        "mlflow_parent_run_id": parent_run_id, "features_sha256": features_sha,
    })
    if inc is None:
        decision, inc_score, inc_version = "champion", None, None
        reason = "first registered model"
    elif inc.tags.get("features_sha256") != features_sha:
        decision, inc_score, inc_version = "champion", None, inc.version
        reason = (f"incumbent v{inc.version} expects other input columns than this batch has, so it cannot "
                  "serve it")
    else:
        inc_version = inc.version
        tags = inc.tags
        recipe = {"candidate": tags.get("candidate", ""), "learner": tags.get("learner", ""),
                  "weighting": tags.get("weighting", "none")}
        if recipe["candidate"] in scores and tags.get("seed") == str(seed):
            inc_score = float(scores[recipe["candidate"]])
            how = "its recipe is a candidate of this run"
        else:
            # fewlabel's labels were drawn for this run's candidates only: re-score both with source CV then
            by = selector if selector in ("rt", "trcv", "scv", "wcv") else "scv"
            both = _rescore(store, by, recipe, chosen, seed, k, rows)
            inc_score, new_score = both["incumbent"], both["new"]
            how = "re-scored beside the new choice" + ("" if by == selector else f" with {by}")
        better = np.isfinite(new_score) and (not np.isfinite(inc_score) or new_score > inc_score)
        decision = "champion" if better else "challenger"
        reason = (f"{selector} score {new_score:.4f} vs incumbent v{inc_version} ({recipe['candidate']}) "
                  f"{inc_score:.4f} on the current batch; {how}")
    if hold_champion and decision == "champion":
        decision, reason = "challenger", f"{hold_champion} (else champion: {reason})"
    with_retries(client.set_registered_model_alias, model_name, decision, mv.version)
    record = {"registered_model": model_name, "version": str(mv.version), "decision": decision,
              "selector": selector, "new_score": new_score, "incumbent_score": inc_score,
              "incumbent_version": None if inc_version is None else str(inc_version), "reason": reason,
              "candidate": chosen}
    with_retries(client.set_tag, parent_run_id, "champion.decision", decision)
    with_retries(client.set_tag, parent_run_id, "champion.registered_model", f"{model_name} v{mv.version}")
    with_retries(client.set_tag, parent_run_id, "champion.reason", reason)
    log_metrics(client, parent_run_id, {"champion.new_score": new_score}
                | ({} if inc_score is None or not np.isfinite(inc_score) else {"champion.incumbent_score": inc_score}))
    log.info("champion: %s v%s is %s (%s)", model_name, mv.version, decision, reason)
    return record
