"""Stage ``champion``: register the chosen model in the MLflow Model Registry (one registered model per
deployment) and decide its alias.

The new model takes alias ``champion`` only if, on the *current* target batch, it beats the current
champion under the same selector; otherwise it becomes ``challenger``. Selectors score learning
recipes (learner + weighting) on the current source/target, so the incumbent is re-scored as its
recipe (stored in the model version's tags) on the current batch: taken from this run's selection
table when the recipe is among this run's candidates (the same computation), otherwise scored now by
the same selector beside the new choice. Ties keep the incumbent. The first registered model is
champion. Decision, both scores and the selector are logged on the parent run.

A rerun that would register the same model again registers nothing: each version carries a fingerprint
(tag ``shiftflow.fingerprint``) of the served model's recipe (candidate, learner, weighting, seed,
recalibration β), the data it was fitted and chosen on (SHA-256 of the ingest stage's ``source.parquet`` and
``target.parquet``, and of the feature list) and the code version (``tasks.store.code_version``). When a
version with the same fingerprint exists, that version is reused: if it is the champion the decision is
``unchanged``; otherwise it is compared with the champion as a new version would be. Every version carries
a description (selector and score, the served candidate's estimated target accuracy, data digests, the
run that registered it) and the served model is linked to the parent run as a run output (the run page's
"Logged models")."""

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

from tasks.locks import registry_lock
from tasks.logs import run_logger
from tasks.selection import make_candidates, run_selector, selection_beta, selector_data
from tasks.store import code_version
from tasks.tracking import link_model_output, log_metrics, mask_secrets, with_retries

FINGERPRINT = "shiftflow.fingerprint"


def _incumbent(client: MlflowClient, name: str) -> Any:
    try:
        return client.get_model_version_by_alias(name, "champion")
    except MlflowException:
        return None


def _rescore(store: Any, selector: str, incumbent: dict[str, str], chosen: str, seed: int, k: int,
             rows: int | None) -> dict[str, float]:
    """Score the incumbent's recipe and the new choice together with ``selector`` on the current batch
    (the selection stage's rows and β)."""
    data = selector_data(store, selector, seed, rows)
    m = store.manifest("training")["extra"]["models"][chosen]
    inc_name = f"incumbent:{incumbent['candidate']}"
    cands = make_candidates(store, [(inc_name, incumbent["learner"], incumbent["weighting"]),
                                    (chosen, m["learner"], m["weighting"])], seed, data)
    beta = selection_beta(store, seed, data) if selector in ("trcv", "wcv") else None
    res = run_selector(selector, cands, data, seed=seed, k=k, beta=beta, rows=rows)
    return {"incumbent": float(res.scores[inc_name]), "new": float(res.scores[chosen])}


def served_fingerprint(store: Any, chosen: str, *, seed: int, recalibrated: bool) -> dict[str, str]:
    """What makes the served model what it is: recipe, data digests and code version, plus their hash
    (``fingerprint``, the tag that finds an identical registered version)."""
    info = store.manifest("training")["extra"]["models"][chosen]
    ingest = store.manifest("ingest")
    features = list(ingest["extra"]["feature_columns"])
    stage = store.manifest("recalibration") if recalibrated else store.manifest("training")
    facts = {"candidate": chosen, "learner": info["learner"], "weighting": info["weighting"], "seed": str(seed),
             "recalibrated": str(recalibrated).lower(),
             "beta": str(stage["params"].get("beta")) if recalibrated else "",
             "source_sha256": ingest["files"]["source.parquet"]["sha256"],
             "target_sha256": ingest["files"]["target.parquet"]["sha256"],
             "features_sha256": hashlib.sha256(json.dumps(features).encode()).hexdigest()[:16],
             "code_version": stage.get("code_version") or code_version()}
    facts["fingerprint"] = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:32]
    return facts


def _registered_twin(client: MlflowClient, name: str, fingerprint: str) -> Any:
    """The newest version of ``name`` tagged with ``fingerprint``, or None."""
    try:
        found = client.search_model_versions(f"name = '{name}' and tags.`{FINGERPRINT}` = '{fingerprint}'")
    except MlflowException:  # no such registered model yet
        return None
    return max(found, key=lambda v: int(v.version), default=None)


def _estimate(store: Any, chosen: str) -> dict[str, Any] | None:
    try:
        table = store.read_table("estimation", "estimates")
    except (FileNotFoundError, KeyError):
        return None
    rows = table[table["candidate"] == chosen]
    return None if rows.empty else rows.iloc[0].to_dict()


def run_link(tracking_uri: str, experiment_id: str, run_id: str) -> str:
    """The run's page: absolute on a tracking server, relative (``#/experiments/…``) in the UI of a local
    store (``shiftflow ui``)."""
    page = f"#/experiments/{experiment_id}/runs/{run_id}"
    return f"{tracking_uri.rstrip('/')}/{page}" if tracking_uri.startswith(("http://", "https://")) else page


def version_description(*, selector: str, score: float, n_candidates: int, facts: dict[str, str],
                        estimate: dict[str, Any] | None, data_refs: dict[str, Any], link: str,
                        parent_run_id: str) -> str:
    """Markdown for a registered model version: why it was chosen, how good it is expected to be, on which
    data, by which run."""
    recipe = (f"{facts['candidate']} (learner {facts['learner']}, weighting {facts['weighting']}, seed "
              f"{facts['seed']}{', recalibrated β=' + facts['beta'] if facts['recalibrated'] == 'true' else ''})")
    lines = [f"Chosen by selector **{selector}** (score {score:.4f}) among {n_candidates} candidates: {recipe}."]
    if estimate is not None:
        lines.append(f"Estimated target accuracy {float(estimate['estimate']):.3f} "
                     f"[{float(estimate['ci_low']):.3f}, {float(estimate['ci_high']):.3f}] "
                     f"({estimate['method']}, {float(estimate['confidence']):.0%} interval).")
    target = data_refs.get("target") or f"split of {data_refs.get('source')}"
    lines += [f"Source `{mask_secrets(str(data_refs.get('source')))}`: sha256 {facts['source_sha256']}.",
              f"Target `{mask_secrets(str(target))}`: sha256 {facts['target_sha256']}.",
              f"Features sha256 {facts['features_sha256']}; code version {facts['code_version']}.",
              f"Registered by MLflow run [{parent_run_id}]({link})."]
    return "\n\n".join(lines)


def _decide(store: Any, inc: Any, scores: dict[str, float], selector: str, chosen: str, new_score: float,
            features_sha: str, seed: int, k: int, rows: int | None) -> tuple[str, Any, Any, str, float]:
    """Champion or challenger against the incumbent ``inc``: ``(decision, incumbent score, incumbent
    version, reason, new score)`` (the new score changes when both are re-scored side by side)."""
    if inc is None:
        return "champion", None, None, "first registered model", new_score
    if inc.tags.get("features_sha256") != features_sha:
        return "champion", None, inc.version, (f"incumbent v{inc.version} expects other input columns than this "
                                               "batch has, so it cannot serve it"), new_score
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
    reason = (f"{selector} score {new_score:.4f} vs incumbent v{inc.version} ({recipe['candidate']}) "
              f"{inc_score:.4f} on the current batch; {how}")
    return ("champion" if better else "challenger"), inc_score, inc.version, reason, new_score


@task(name="champion", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=[2, 8])
def champion(store: Any, selection_result: dict[str, Any], *, model_name: str, seed: int, k: int,
             tracking_uri: str, parent_run_id: str, flow_run_id: str = "",
             served_model_uri: str | None = None, rows: int | None = None,
             hold_champion: str | None = None) -> dict[str, Any]:
    """Register the chosen model (or ``served_model_uri``, e.g. its recalibrated version) and set
    ``champion`` or ``challenger``; returns the decision record. ``hold_champion`` (a reason, e.g. an
    accuracy alert) keeps the ``champion`` alias where it is: the new model is then ``challenger``.

    No new version is registered when one with the same fingerprint (``served_fingerprint``) exists: the
    record's ``new_version`` is False, and the decision is ``unchanged`` when that version is the champion."""
    log = run_logger()
    mlflow.set_tracking_uri(tracking_uri)
    client = MlflowClient(tracking_uri)
    selector, chosen = selection_result["selector"], selection_result["chosen"]
    models = store.manifest("training")["extra"]["models"]
    info = models[chosen]
    scores = {r["learner"]: r["score"] for r in selection_result["scores"] if r["selector"] == selector}
    new_score = float(scores[chosen])
    served_uri = served_model_uri or info["model_uri"]
    facts = served_fingerprint(store, chosen, seed=seed, recalibrated=served_model_uri is not None)
    features_sha = facts["features_sha256"]
    # one decision at a time per registered model on this machine: a concurrent run sees this one's alias
    with registry_lock(tracking_uri, model_name) as waited:
        inc = _incumbent(client, model_name)
        twin = _registered_twin(client, model_name, facts["fingerprint"])
        if twin is None:
            estimate = _estimate(store, chosen)
            tags = {"recalibrated": facts["recalibrated"], "candidate": chosen, "learner": info["learner"],
                    "weighting": info["weighting"], "seed": str(seed), "selector": selector,
                    "selector_score": repr(new_score), "prefect.flow_run_id": flow_run_id,
                    "mlflow_parent_run_id": parent_run_id, "features_sha256": features_sha,
                    "source_sha256": facts["source_sha256"], "target_sha256": facts["target_sha256"],
                    "code_version": facts["code_version"], FINGERPRINT: facts["fingerprint"]}
            if facts["recalibrated"] == "true":
                tags["beta"] = facts["beta"]
            if estimate is not None:
                tags |= {"estimate.accuracy": repr(float(estimate["estimate"])), "estimate.method": str(estimate["method"]),
                         "estimate.ci_low": repr(float(estimate["ci_low"])), "estimate.ci_high": repr(float(estimate["ci_high"]))}
            mv = with_retries(mlflow.register_model, served_uri, model_name, tags=tags)
            experiment_id = with_retries(client.get_run, parent_run_id).info.experiment_id
            description = version_description(
                selector=selector, score=new_score, n_candidates=len(scores), facts=facts, estimate=estimate,
                data_refs=store.manifest("ingest")["params"], parent_run_id=parent_run_id,
                link=run_link(tracking_uri, experiment_id, parent_run_id))
            with_retries(client.update_model_version, model_name, mv.version, description=description)
            same = ""
        else:
            mv = twin
            same = (f"no new version: v{mv.version} already holds this model (same recipe, data digests and code "
                    f"version, fingerprint {facts['fingerprint'][:12]})")
        new_version = twin is None
        if inc is not None and not new_version and str(inc.version) == str(mv.version):
            decision, inc_score, inc_version = "unchanged", None, inc.version
            reason = f"{same}; it stays champion" + (f" ({hold_champion} on this run)" if hold_champion else "")
        else:
            decision, inc_score, inc_version, reason, new_score = _decide(
                store, inc, scores, selector, chosen, new_score, features_sha, seed, k, rows)
            if hold_champion and decision == "champion":
                decision, reason = "challenger", f"{hold_champion} (else champion: {reason})"
            if same:
                reason = f"{same}; {reason}"
            with_retries(client.set_registered_model_alias, model_name, decision, mv.version)
    link_model_output(tracking_uri, parent_run_id, served_uri)  # the parent run's "Logged models"
    record = {"registered_model": model_name, "version": str(mv.version), "decision": decision,
              "new_version": new_version, "selector": selector, "new_score": new_score,
              "incumbent_score": inc_score, "incumbent_version": None if inc_version is None else str(inc_version),
              "reason": reason, "candidate": chosen, "fingerprint": facts["fingerprint"]}
    with_retries(client.set_tag, parent_run_id, "champion.decision", decision)
    with_retries(client.set_tag, parent_run_id, "champion.registered_model", f"{model_name} v{mv.version}")
    with_retries(client.set_tag, parent_run_id, "champion.new_version", str(new_version).lower())
    with_retries(client.set_tag, parent_run_id, "champion.reason", reason)
    log_metrics(client, parent_run_id, {"champion.new_score": new_score, "champion.lock_wait_s": waited}
                | ({} if inc_score is None or not np.isfinite(inc_score) else {"champion.incumbent_score": inc_score}))
    log.info("champion: %s v%s is %s (%s)", model_name, mv.version, decision, reason)
    return record
