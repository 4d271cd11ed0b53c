"""Stage ``champion``: register the chosen model in the MLflow Model Registry (one registered model per
deployment and input schema) and decide its alias with the gate of ``shiftlib.decisions``.

The gate compares the served champion *as it is* with the new version on the current batch: each version
carries the evidence its estimate needs (artifact ``gate/<candidate>/evidence.parquet`` of the run that
registered it: the out-of-fold source predictions it was chosen with and those source rows as it encodes
them; tag ``shiftflow.evidence``), the champion's own model scores today's rows, and P(new more accurate on
this batch) comes from resampling both estimates jointly (``shiftlib.decisions.gate``). Each version
also keeps a hash of every source row it was fitted on (``gate/<candidate>/fit_rows.parquet``, tag
``shiftflow.fit_rows``): where at least half of today's labeled source rows are new to the champion, both are
estimated on those rows, the champion by its own model (revision 5, ``shiftlib.decisions.heldout_pair``;
``reports/decisions_heldout_champion2.md``), since its stored estimate rests on older labels and was optimistic
in every replay. ``promoted`` when
P ≥ ``promote_confidence``, ``kept`` when P ≤ 1 − it, else ``undecided`` (the champion stays, the new
version is ``challenger``); a new version that predicts one class or is estimated no better than the
majority-class rule is ``refused`` (a challenger, with the reason). A champion registered before versions
carried evidence is compared as its recipe re-scored on the current batch (the earlier gate). Each decision
is the tag ``shiftflow.decision`` with ``champion.p_better``, and a Prefect event (``tasks.events``).

A registered model never mixes input schemas: a version's tag ``shiftflow.schema`` digests its input
columns (names and types, from the signature), its label and classes; a run that names an existing model of
another schema is refused (``tasks.served.check_model_name``). The default name carries that digest
(``tasks.served.default_model_name``), so two unrelated tables never share one.

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
from dataclasses import dataclass, replace
from typing import Any

import mlflow
import numpy as np
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from prefect import task
from prefect.cache_policies import NO_CACHE

from shiftlib.catalog import LABELED_SELECTOR, SOURCE_CV
from shiftlib.decisions import (
    LABEL_VARIANCE,
    ONE_CLASS_SHARE,
    PROMOTE_CONFIDENCE,
    UNVOUCHED_CHAMPION,
    GateDecision,
    champion_predictions,
    domain_auc,
    gate,
    heldout_pair,
    refusal_stands,
    refused_beside,
)
from shiftlib.errors import ShiftflowInputError
from shiftlib.estimation import StoredPredictions
from shiftlib.selection import SELECTORS
from tasks.estimation import OOF, read_predictions
from tasks.events import emit
from tasks.ingest import LABEL, ROW, read_ingest, target_rows
from tasks.labels import stage_predictions
from tasks.locks import registry_lock
from tasks.logs import run_logger
from tasks.recalibration import read_recalibration
from tasks.selection import run_selector, selection_beta, selector_data, uses_weights
from tasks.served import (
    CLASSES,
    RULE,
    RULE_VERSION,
    SCHEMA,
    check_model_name,
    columns_words,
    incumbent,
    input_schema,
    raw_source,
    raw_target,
    row_hashes,
    served_name,
    served_proba,
)
from tasks.store import code_version
from tasks.tracking import RunContext, link_model_output, log_metrics, mask_secrets, with_retries
from tasks.training import TrainedModel, read_training
from tasks.weights import make_candidates

FINGERPRINT = "shiftflow.fingerprint"
EVIDENCE, DECISION = "shiftflow.evidence", "shiftflow.decision"
#: a version's tag: the artifact listing a hash of every source row it was fitted on (:func:`heldout_evidence`)
FIT_ROWS = "shiftflow.fit_rows"
#: what a selector's score is, in the recipe gate's reason: only source CV's is an accuracy as measured
SCORE_WORDS = {SOURCE_CV: "source-CV accuracy", LABELED_SELECTOR: "fewlabel posterior score (not an accuracy)"}
#: the alias each gate decision leaves the new version with
ALIAS = {"promoted": "champion", "kept": "challenger", "undecided": "challenger", "refused": "challenger"}


def _rescore(store: Any, selector: str, recipe: dict[str, str], chosen: str, seed: int, k: int,
             rows: int | None) -> dict[str, float]:
    """Score the incumbent's recipe and the new choice together with ``selector`` on the current batch
    (the selection stage's rows and β)."""
    data = selector_data(store, selector, seed, rows)
    m = read_training(store).models[chosen]
    inc_name = f"incumbent:{recipe['candidate']}"
    cands = make_candidates(store, [(inc_name, recipe["learner"], recipe["weighting"]),
                                    (chosen, m.learner, m.weighting)], seed, data)
    beta = selection_beta(store, seed, data) if uses_weights(selector) else None
    res = run_selector(selector, cands, data, seed=seed, k=k, beta=beta, rows=rows)
    return {"incumbent": float(res.scores[inc_name]), "new": float(res.scores[chosen])}


def served_fingerprint(store: Any, chosen: str, *, seed: int, recalibrated: bool) -> dict[str, str]:
    """What makes the served model what it is: recipe, data digests and code version, plus their hash
    (``fingerprint``, the tag that finds an identical registered version)."""
    training = read_training(store)
    info, ing = training.models[chosen], read_ingest(store)
    recal = read_recalibration(store) if recalibrated else None
    assert ing.source is not None and ing.target is not None, "the ingest stage lists no source or target"
    facts = {"candidate": chosen, "learner": info.learner, "weighting": info.weighting, "seed": str(seed),
             "recalibrated": str(recalibrated).lower(),
             "beta": str(recal.beta) if recal is not None else "",
             "source_sha256": ing.source.sha256, "target_sha256": ing.target.sha256,
             "features_sha256": hashlib.sha256(json.dumps(list(ing.feature_columns)).encode()).hexdigest()[:16],
             "code_version": (recal.code_version if recal is not None else training.code_version) or code_version()}
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


def evidence_table(store: Any, new: StoredPredictions, source_rows: Any) -> pd.DataFrame:
    """What the served version's estimate needs later (kept with the version): its out-of-fold source
    predictions (``_y``, ``_fold``, ``_p<code>``) and those source rows as it encodes them (``x:<feature>``)."""
    src = store.read_table("ingest", "source").drop(columns=[ROW, LABEL]).iloc[np.asarray(source_rows)]
    out = pd.DataFrame({"_y": new.y_source, "_fold": new.folds})
    for c in range(new.proba_source.shape[1]):
        out[f"_p{c}"] = new.proba_source[:, c]
    return pd.concat([out, src.reset_index(drop=True).add_prefix("x:")], axis=1)


def _from_evidence(table: pd.DataFrame, classes: np.ndarray) -> tuple[StoredPredictions, pd.DataFrame]:
    probs = [c for c in table.columns if c.startswith("_p")]
    X = table[[c for c in table.columns if c.startswith("x:")]]
    X.columns = [c[2:] for c in X.columns]
    P = StoredPredictions("champion", classes, table["_y"].to_numpy(), table[probs].to_numpy(float),
                          np.zeros((0, len(probs))), table["_fold"].to_numpy())
    return P, X


def _today_rows(store: Any, seed: int, rows: int | None) -> pd.DataFrame:
    """Today's raw target rows (as the user gave them) on the estimation stage's target rows."""
    raw = raw_target(store)[1]
    return raw.iloc[target_rows(len(raw), seed, rows)].reset_index(drop=True)


def read_evidence(version: Any) -> tuple[StoredPredictions, pd.DataFrame] | str:
    """What version ``version`` keeps for its estimate (:func:`evidence_table`): its stored out-of-fold source
    predictions and those source rows as it encodes them, or why there is none (registered before versions
    carried it)."""
    import tempfile

    import mlflow.artifacts

    where = version.tags.get(EVIDENCE)
    if not where:
        return f"v{version.version} carries no evidence for an estimate (registered before the gate kept it)"
    with tempfile.TemporaryDirectory() as tmp:
        table = pd.read_parquet(with_retries(mlflow.artifacts.download_artifacts, artifact_uri=where, dst_path=tmp))
    return _from_evidence(table, np.arange(sum(c.startswith("_p") for c in table.columns)))


def champion_evidence(client: MlflowClient, name: str, inc: Any, store: Any, *, seed: int,
                      rows: int | None) -> tuple[StoredPredictions, float] | str:
    """The served champion's stored predictions on today's batch (``shiftlib.decisions.champion_predictions``)
    and how well its source rows are told from today's (``shiftlib.decisions.domain_auc``), or why they cannot
    be had (a version registered before versions carried evidence, a model without its encoder step)."""
    found = read_evidence(inc)
    if isinstance(found, str):
        return found
    stored, X_old = found
    raw = _today_rows(store, seed, rows)
    got = served_proba(name, inc, raw, len(stored.classes))
    if isinstance(got, str):
        return got
    proba, prepare = got
    X_today = prepare.transform(raw)
    return (champion_predictions(stored, proba, X_old, X_today, random_state=seed),
            domain_auc(X_old, X_today, random_state=seed))


@dataclass(frozen=True)
class RecipeVerdict:
    """The recipe gate's verdict (:func:`_decide`): ``champion`` or ``challenger``, the incumbent's score and
    version, why, and the new version's score (changed when both were re-scored side by side)."""

    decision: str
    incumbent_score: float | None
    incumbent_version: Any
    reason: str
    new_score: float


def _decide(store: Any, inc: Any, scores: dict[str, float], selector: str, chosen: str, new_score: float,
            features_sha: str, seed: int, k: int, rows: int | None) -> RecipeVerdict:
    """Champion or challenger against the incumbent ``inc``, by its recipe's score beside the new one's."""
    if inc is None:
        return RecipeVerdict("champion", None, None, "first registered model", new_score)
    if inc.tags.get("features_sha256") != features_sha:
        return RecipeVerdict("champion", None, inc.version, f"incumbent v{inc.version} expects other input columns "
                             "than this batch has, so it cannot serve it", new_score)
    tags = inc.tags
    recipe = {"candidate": tags.get("candidate", ""), "learner": tags.get("learner", ""),
              "weighting": tags.get("weighting", "none")}
    if recipe["candidate"] in scores and tags.get("seed") == str(seed):
        inc_score = float(scores[recipe["candidate"]])
        how, by = "its recipe is a candidate of this run", selector
    else:
        # fewlabel's labels were drawn for this run's candidates only: re-score both with source CV then
        by = selector if selector in SELECTORS else SOURCE_CV
        both = _rescore(store, by, recipe, chosen, seed, k, rows)
        inc_score, new_score = both["incumbent"], both["new"]
        how = "re-scored beside the new choice" + ("" if by == selector else f" with {by}")
    better = np.isfinite(new_score) and (not np.isfinite(inc_score) or new_score > inc_score)
    reason = (f"{SCORE_WORDS.get(by, by + ' score')} {new_score:.4f} vs incumbent v{inc.version} "
              f"({recipe['candidate']}) {inc_score:.4f} on the current batch; {how}")
    return RecipeVerdict("champion" if better else "challenger", inc_score, inc.version, reason, new_score)


def _today_encoded(store: Any, seed: int, rows: int | None, columns: list[str]) -> pd.DataFrame:
    """Today's encoded target rows (the ingest stage's table, feature ``columns`` only) on the estimation
    stage's target rows."""
    X_t = store.read_table("ingest", "target", columns=columns)
    return X_t.iloc[target_rows(len(X_t), seed, rows)].reset_index(drop=True)


def _new_evidence(store: Any, chosen: str) -> tuple[StoredPredictions | None, pd.DataFrame | None, np.ndarray]:
    """The new version's stored predictions, the evidence table to keep with it and its source rows' positions
    in the ingested source; (None, None, empty) when the estimation stage kept no predictions (a stage written
    before it did)."""
    try:
        P = read_predictions(store, chosen, np.arange(len(read_ingest(store).classes)))
        oof = store.read_table("estimation", OOF, columns=["candidate", "source_row"])
    except (FileNotFoundError, KeyError):
        return None, None, np.zeros(0, np.int64)
    rows = oof.loc[oof["candidate"] == chosen, "source_row"].to_numpy()
    return P, evidence_table(store, P, rows), rows


def _log_evidence(tracking_uri: str, parent_run_id: str, chosen: str, table: pd.DataFrame,
                  file: str = "evidence.parquet") -> str:
    """Log the evidence table (or another table the gate keeps with a version) as an artifact of the parent run;
    returns its URI (the version's tag)."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / file
        table.to_parquet(path, index=False)
        with_retries(MlflowClient(tracking_uri).log_artifact, parent_run_id, str(path), f"gate/{chosen}")
    return f"runs:/{parent_run_id}/gate/{chosen}/{file}"


def source_hashes(store: Any) -> tuple[pd.DataFrame, np.ndarray] | None:
    """Today's raw source rows and a hash of each (:func:`tasks.served.row_hashes`), read and hashed once per run:
    the version registered today keeps the hashes (every row it was fitted on, a superset of any subsample), and
    the gate tells by them which rows the champion never saw. None for an ingest stage that kept no raw rows."""
    try:
        raw = raw_source(store)
    except (FileNotFoundError, KeyError):
        return None
    return raw, row_hashes(raw)


def heldout_evidence(name: str, inc: Any, store: Any, new: StoredPredictions, source_rows: np.ndarray, *, seed: int,
                     rows: int | None, today: tuple[pd.DataFrame, np.ndarray] | None = None
                     ) -> tuple[StoredPredictions, StoredPredictions] | str:
    """Revision 5 of the gate (``shiftlib.decisions.heldout_pair``): the new version and the served champion
    ``inc``, both on today's source rows the champion was never fitted on (told by the row hashes it keeps,
    tag :data:`FIT_ROWS`), the champion scored there and on today's batch by its own model; or why not (no
    hashes kept, too few unseen rows, a class missing among them, a model without its encoder). ``today``:
    :func:`source_hashes` of ``store``, when the caller has them."""
    import tempfile

    import mlflow.artifacts

    where = inc.tags.get(FIT_ROWS)
    if not where:
        return f"v{inc.version} keeps no list of the rows it was fitted on"
    today = source_hashes(store) if today is None else today
    if today is None:
        return "this run's ingest stage kept no raw source rows"
    at = np.asarray(source_rows)
    raw, hashes = today[0].iloc[at].reset_index(drop=True), today[1][at]
    with tempfile.TemporaryDirectory() as tmp:
        fitted = pd.read_parquet(with_retries(mlflow.artifacts.download_artifacts, artifact_uri=where, dst_path=tmp))
    unseen = ~np.isin(hashes, fitted["_h"].to_numpy(np.uint64))
    if not unseen.any():
        return f"v{inc.version} was fitted on all of today's {len(unseen)} source rows"
    batch = _today_rows(store, seed, rows)
    missing = [str(c) for c in batch.columns if c not in raw.columns]
    if missing:
        return f"today's source rows lack the batch's columns {missing[:5]}"
    try:
        got = served_proba(name, inc, batch, len(new.classes), also=raw.loc[unseen, list(batch.columns)])
    except (ValueError, KeyError, TypeError) as err:  # e.g. a source value its encoder cannot take
        return f"v{inc.version} cannot score today's source rows ({type(err).__name__}: {err})"
    if isinstance(got, str):
        return got
    proba = got[0]
    n_t = len(new.proba_target)
    pair = heldout_pair(new, unseen, proba[n_t:], proba[:n_t])
    if pair is None:
        return (f"only {int(unseen.sum())} of today's {len(unseen)} source rows are new to v{inc.version}, or they "
                "lack a class: its stored estimate stands")
    return pair


def n_labels(labeled: dict[str, Any] | None) -> int:
    """How many target labels the labels task's result ``labeled`` holds (0 without labels or while awaiting)."""
    if not labeled or labeled.get("status") != "labeled":
        return 0
    return len(labeled.get("labels") or {})


def label_differences(store: Any, labeled: dict[str, Any] | None, chosen: str, version: Any
                      ) -> tuple[tuple[float, float, int] | None, tuple[float, float, int] | None]:
    """The labels' estimates of the chosen candidate's accuracy minus the served champion's (version ``version``)
    and minus the majority-class rule's (:data:`tasks.served.RULE`, a contender of the plan: a pair plan's third,
    the stand-in for a one-class champion, or a first version's plan over every candidate:
    ``shiftlib.decisions.RULE_CONTENDER``, ``FIRST_RULE_LABELS``), on the whole batch, from one fewlabel label
    estimate without a prior (``shiftlib.selection.fewlabel``) over the plan's contenders. Each is (difference, its
    standard error in the variance form ``shiftlib.decisions.LABEL_VARIANCE``, number of labels), or None without
    labels or when the plan did not have that contender, this champion (or the rule in its stead) and the chosen
    candidate (planned before that version served, or for another pair)."""
    from shiftlib.selection.fewlabel import DEFAULT_ESTIMATOR, fewlabel_estimate

    if not labeled or labeled.get("status") != "labeled" or not labeled.get("labels"):
        return None, None
    plan = labeled["plan"]
    champ = served_name(version)
    rule = labeled.get("rule", "never")
    tp = stage_predictions(store, with_served=True if rule == "one_class" else None, learners=list(plan.learners),
                           rule=rule)
    if (list(plan.learners) != tp.names or chosen not in tp.names
            or (rule != "one_class" and champ not in tp.served)):
        return None, None
    labels = {int(r): c for r, c in labeled["labels"].items()}
    est = fewlabel_estimate(tp, plan, labels, None, DEFAULT_ESTIMATOR, LABEL_VARIANCE)
    a = tp.names.index(chosen)

    def against(other: str) -> tuple[float, float, int] | None:
        if other not in tp.served:
            return None
        b = tp.names.index(other)
        var = est.cov[a, a] + est.cov[b, b] - 2 * est.cov[a, b]
        return float(est.theta[a] - est.theta[b]), float(np.sqrt(max(var, 0.0))), len(labels)

    return against(champ), against(RULE)


def label_difference(store: Any, labeled: dict[str, Any] | None, chosen: str, version: Any, *,
                     against: str | None = None) -> tuple[float, float, int] | None:
    """One of :func:`label_differences`: the chosen candidate against the champion, or ``against`` the
    majority-class rule (:data:`tasks.served.RULE`)."""
    if against not in (None, RULE):
        raise ValueError(f"against must be None (the champion) or {RULE!r}; got {against!r}")
    return label_differences(store, labeled, chosen, version)[0 if against is None else 1]


def _gate(client: MlflowClient, store: Any, name: str, inc: Any, new_P: StoredPredictions | None,
          evidence: pd.DataFrame | None, estimate: dict[str, Any] | None, source_sha: str, *, seed: int,
          rows: int | None, confidence: float, labeled: dict[str, Any] | None = None,
          chosen: str = "", unvouched: str = UNVOUCHED_CHAMPION,
          source_rows: np.ndarray | None = None,
          today: tuple[pd.DataFrame, np.ndarray] | None = None) -> tuple[GateDecision | None, str]:
    """The gate's decision on the new version against the served champion ``inc``, or (None, why) when the
    champion's evidence is missing and the earlier recipe gate must decide (guards still apply). Where at least
    half of the new version's source rows are rows the champion was never fitted on, both are estimated on those
    rows (:func:`heldout_evidence`, revision 5); else the champion from its stored evidence."""
    if new_P is None or evidence is None:
        return None, "the estimation stage kept no predictions"
    est = None if estimate is None else float(estimate["estimate"])
    X_new = evidence[[c for c in evidence.columns if c.startswith("x:")]]
    features = [c[2:] for c in X_new.columns]

    def reach_auc() -> float:  # the new version's reach: read by step 2 (no champion) and step 5, not by a refusal
        return domain_auc(X_new, _today_encoded(store, seed, rows, features), random_state=seed)

    if inc is None:  # a pair plan's labels decide alone; a plan's over every candidate refuse at or below the rule
        lab, _ = label_differences(store, labeled, chosen, RULE_VERSION)  # the rule is the "champion" here
        pair = bool(labeled and labeled.get("pair"))
        return gate(new_P, None, new_estimate=est, confidence=confidence, random_state=seed, new_auc=reach_auc(),
                    target_labels=n_labels(labeled), labels=lab if pair else None,
                    rule_labels=None if pair else lab), ""
    first = gate(new_P, None, new_estimate=est, confidence=confidence, random_state=seed,  # step 1's guards
                 first_margin=False)
    refused = first if refusal_stands(first) else None  # final: the champion's side below is only reported
    new_auc = reach_auc()
    shared = inc.tags.get("source_sha256") == source_sha
    held = ("the same source" if shared or source_rows is None
            else heldout_evidence(name, inc, store, new_P, source_rows, seed=seed, rows=rows, today=today))
    if isinstance(held, tuple):
        (new_g, champ), champ_auc, shared = held, new_auc, True
    else:
        run_logger().info("champion: v%s estimated from its stored evidence (%s)", inc.version, held)
        found = champion_evidence(client, name, inc, store, seed=seed, rows=rows)
        if isinstance(found, str):
            return (refused, "") if refused is not None else (None, found)
        (champ, champ_auc), new_g = found, new_P
    pair_labels, rule_labels = label_differences(store, labeled, chosen, inc.version)
    if refused is not None:
        return refused_beside(refused, champ, champion_auc=champ_auc, new_auc=new_auc, champion=f"v{inc.version}",
                              labels=pair_labels), ""
    g = gate(new_g, champ, new_estimate=est, confidence=confidence, random_state=seed, new_auc=new_auc,
             champion_auc=champ_auc, shared_source=shared, labels=pair_labels, unvouched=unvouched,
             rule_labels=rule_labels)
    if isinstance(held, tuple):
        n = len(new_g.y_source)
        g = replace(g, reason=f"{g.reason} (both estimated on the {n} of today's {len(new_P.y_source)} labeled source "
                    f"rows unlike any row v{inc.version} was fitted on: a row equal to one of those counts as seen)",
                    details=g.details | {"champion_heldout_rows": n})
    return g, ""


def _version_tags(facts: dict[str, str], info: TrainedModel, chosen: str, selector: str, new_score: float,
                  estimate: dict[str, Any] | None, schema: dict[str, Any], ctx: RunContext) -> dict[str, str]:
    tags = {"recalibrated": facts["recalibrated"], "candidate": chosen, "learner": info.learner,
            "weighting": info.weighting, "seed": str(ctx.seed), "selector": selector,
            "selector_score": repr(new_score), "prefect.flow_run_id": ctx.flow_run_id,
            "mlflow_parent_run_id": ctx.parent_run_id, "features_sha256": facts["features_sha256"],
            "source_sha256": facts["source_sha256"], "target_sha256": facts["target_sha256"],
            "code_version": facts["code_version"], FINGERPRINT: facts["fingerprint"], SCHEMA: schema["digest"],
            "shiftflow.input_columns": columns_words(schema["inputs"]), CLASSES: json.dumps(schema["classes"])}
    if facts["recalibrated"] == "true":
        tags["beta"] = facts["beta"]
    if estimate is not None:
        tags |= {"estimate.accuracy": repr(float(estimate["estimate"])), "estimate.method": str(estimate["method"]),
                 "estimate.ci_low": repr(float(estimate["ci_low"])), "estimate.ci_high": repr(float(estimate["ci_high"]))}
    return tags


def _register(client: MlflowClient, ctx: RunContext, store: Any, served_uri: str, model_name: str,
              tags: dict[str, str], *, description: dict[str, Any]) -> Any:
    """Register ``served_uri`` as a new version of ``model_name`` with ``tags`` and its description
    (:func:`version_description` of ``description``, linked to ``ctx``'s parent run); returns the version."""
    tracking_uri, parent_run_id = ctx.tracking_uri, ctx.parent_run_id
    mv = with_retries(mlflow.register_model, served_uri, model_name, tags=tags)
    experiment_id = with_retries(client.get_run, parent_run_id).info.experiment_id
    ing = read_ingest(store)
    text = version_description(**description, data_refs={"source": ing.source_ref, "target": ing.target_ref},
                               parent_run_id=parent_run_id, link=run_link(tracking_uri, experiment_id, parent_run_id))
    with_retries(client.update_model_version, model_name, mv.version, description=text)
    return mv


def _set_alias(client: MlflowClient, model_name: str, decision: str, mv: Any, inc: Any) -> None:
    """Give version ``mv`` the alias ``decision``; a new champion is tagged with the version it replaced."""
    with_retries(client.set_registered_model_alias, model_name, decision, mv.version)
    if decision == "champion":
        _drop_challenger(client, model_name, mv.version)
        if inc is not None and str(inc.version) != str(mv.version):
            with_retries(client.set_model_version_tag, model_name, mv.version, PREVIOUS, str(inc.version))


def _drop_challenger(client: MlflowClient, model_name: str, version: Any) -> None:
    """A version made champion (by the gate, or by hand) is no longer the challenger: drop that alias if it is
    this version's (an undecided version whose labels then promoted it kept both)."""
    aliases = with_retries(client.get_registered_model, model_name).aliases
    if str(aliases.get("challenger")) == str(version):
        with_retries(client.delete_registered_model_alias, model_name, "challenger")


def _announce(client: MlflowClient, ctx: RunContext, record: dict[str, Any], waited: float) -> None:
    """The decision record on ``ctx``'s parent run (:func:`_log_decision`) and as a Prefect event."""
    _log_decision(client, ctx.parent_run_id, record, waited)
    emit(f"shiftflow.champion.{record['gate_decision']}", record["registered_model"],
         {"version": record["version"], "champion_version": record["incumbent_version"],
          "p_better": record["p_better"], "decision": record["gate_decision"], "reason": record["reason"],
          "candidate": record["candidate"], "mlflow_run_id": ctx.parent_run_id})


@dataclass(frozen=True)
class GatePolicy:
    """How the gate decides: the selection's folds ``k`` and ``rows``, its confidence, a reason to hold the alias,
    and what it does with a champion nothing vouches for (``shiftlib.decisions.gate``'s ``unvouched``)."""

    k: int
    rows: int | None = None
    promote_confidence: float = PROMOTE_CONFIDENCE
    hold_champion: str | None = None
    unvouched: str = UNVOUCHED_CHAMPION


@task(name="champion", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=[2, 8])
def champion(store: Any, selection_result: dict[str, Any], *, ctx: RunContext, model_name: str, policy: GatePolicy,
             served_model_uri: str | None = None, labeled: dict[str, Any] | None = None) -> dict[str, Any]:
    """Register the chosen model (or ``served_model_uri``, e.g. its recalibrated version) and let the gate
    (module docstring) decide ``champion`` or ``challenger`` as ``policy`` says; returns the decision record.
    ``policy.hold_champion`` (a reason, e.g. an accuracy alert) keeps the ``champion`` alias where it is: the new
    model is then ``challenger``. ``labeled`` (the labels task's result) lets the gate weigh the target labels
    when their plan had the served champion as a contender (:func:`label_difference`).

    No new version is registered when one with the same fingerprint (``served_fingerprint``) exists: the
    record's ``new_version`` is False, and the decision is ``unchanged`` when that version is the champion."""
    log = run_logger()
    tracking_uri, seed, rows, hold_champion = ctx.tracking_uri, ctx.seed, policy.rows, policy.hold_champion
    mlflow.set_tracking_uri(tracking_uri)
    client = MlflowClient(tracking_uri)
    selector, chosen = selection_result["selector"], selection_result["chosen"]
    info = read_training(store).models[chosen]
    scores = {r["learner"]: r["score"] for r in selection_result["scores"] if r["selector"] == selector}
    new_score = float(scores[chosen])
    served_uri = served_model_uri or info.model_uri
    facts = served_fingerprint(store, chosen, seed=seed, recalibrated=served_model_uri is not None)
    schema = input_schema(store)
    estimate = _estimate(store, chosen)
    new_P, evidence, evidence_rows = _new_evidence(store, chosen)
    today = source_hashes(store) if evidence is not None else None  # both uses below need the evidence
    # one decision at a time per registered model on this machine: a concurrent run sees this one's alias
    with registry_lock(tracking_uri, model_name) as waited:
        check_model_name(client, model_name, schema)
        inc = incumbent(client, model_name)
        twin = _registered_twin(client, model_name, facts["fingerprint"])
        if twin is None:
            tags = _version_tags(facts, info, chosen, selector, new_score, estimate, schema, ctx)
            if evidence is not None and served_model_uri is None:  # a recalibrated model scores otherwise
                tags[EVIDENCE] = _log_evidence(tracking_uri, ctx.parent_run_id, chosen, evidence)
                if today is not None:
                    tags[FIT_ROWS] = _log_evidence(tracking_uri, ctx.parent_run_id, chosen,
                                                   pd.DataFrame({"_h": today[1]}), "fit_rows.parquet")
            mv = _register(client, ctx, store, served_uri, model_name, tags, description=dict(
                selector=selector, score=new_score, n_candidates=len(scores), facts=facts, estimate=estimate))
            same = ""
        else:
            mv = twin
            same = (f"no new version: v{mv.version} already holds this model (same recipe, data digests and code "
                    f"version, fingerprint {facts['fingerprint'][:12]})")
        new_version = twin is None
        p_better, g_labels, unvouched, rule_d, stood_in = float("nan"), None, None, None, False
        one_class_champion, new_one_class, label_free = False, False, None
        if inc is not None and not new_version and str(inc.version) == str(mv.version):
            decision, gate_decision, inc_score, inc_version = "unchanged", "kept", None, inc.version
            reason = f"{same}; it stays champion" + (f" ({hold_champion} on this run)" if hold_champion else "")
        else:
            g, why = _gate(client, store, model_name, inc, new_P, evidence, estimate, facts["source_sha256"], seed=seed,
                           rows=rows, confidence=policy.promote_confidence, labeled=labeled, chosen=chosen,
                           unvouched=policy.unvouched, source_rows=evidence_rows, today=today)
            if g is None:  # the champion's evidence is missing: its recipe is re-scored (the earlier gate)
                verdict = _decide(store, inc, scores, selector, chosen, new_score, facts["features_sha256"], seed,
                                  policy.k, rows)
                decision, inc_score, inc_version = verdict.decision, verdict.incumbent_score, verdict.incumbent_version
                new_score, reason = verdict.new_score, f"{verdict.reason} ({why})"
                gate_decision = "promoted" if decision == "champion" else "kept"
            else:
                gate_decision, p_better, reason = g.decision, g.p_better, g.reason
                g_labels, rule_d = g.details.get("labels"), g.details.get("rule_label_difference")
                stood_in = bool(g.details.get("rule_stood_in"))  # RULE_CONTENDER 'one_class'
                one_class_champion = bool(g.details.get("champion_one_class"))
                new_one_class = bool(g.details.get("one_class_share", 0.0) >= ONE_CLASS_SHARE)
                label_free = g.details.get("label_free_refusal")  # labels overruled it (FIRST_LABELS_DECIDE)
                decision, inc_score = ALIAS[g.decision], g.details.get("champion_estimate")
                if decision != "champion":  # the champion serves on: say when nothing vouches for it here
                    unvouched = g.details.get("champion_unvouched")
                inc_version = None if inc is None else inc.version
                if inc_score is not None:  # the pair the gate compared (its reason's "x vs y"), not a selector score
                    new_score = float(g.details.get("new_estimate_paired", new_score))
            if hold_champion and decision == "champion":
                decision, gate_decision, reason = "challenger", "kept", f"{hold_champion} (else champion: {reason})"
            if same:
                reason = f"{same}; {reason}"
            _set_alias(client, model_name, decision, mv, inc)
        with_retries(client.set_model_version_tag, model_name, mv.version, DECISION, gate_decision)
    link_model_output(tracking_uri, ctx.parent_run_id, served_uri)  # the parent run's "Logged models"
    record = {"registered_model": model_name, "version": str(mv.version), "decision": decision,
              "gate_decision": gate_decision, "p_better": p_better, "promote_confidence": policy.promote_confidence,
              "new_version": new_version, "selector": selector, "new_score": new_score,
              "incumbent_score": inc_score, "incumbent_version": None if inc_version is None else str(inc_version),
              "reason": reason, "candidate": chosen, "fingerprint": facts["fingerprint"],
              "labels": None if g_labels is None else int(g_labels), "champion_unvouched": unvouched,
              "rule_label_difference": rule_d, "rule_stood_in": stood_in, "champion_one_class": one_class_champion,
              "new_one_class": new_one_class, "label_free_refusal": label_free}
    _announce(client, ctx, record, waited)
    log.info("champion: %s v%s is %s, %s (%s)", model_name, mv.version, decision, gate_decision, reason)
    if unvouched:
        log.warning("champion: v%s serves on, but nothing vouches for it on this batch: %s", inc_version, unvouched)
    return record


PREVIOUS = "shiftflow.previous_champion"  # on a version made champion: the version it replaced
ALIAS_SET = "shiftflow.champion_set"  # on a version made champion by hand: when, by whom, why
#: on a run that records one move of the alias by hand: "<model> v<version>" (its tag ALIAS_SET says when, who,
#: why). The version's tag keeps only its latest move; these runs keep every one, for ``shiftflow history``
MOVED = "shiftflow.champion_moved"


def set_champion(tracking_uri: str, name: str, *, version: str | None = None, previous: bool = False,
                 reason: str, who: str, when: str) -> dict[str, Any]:
    """Move the ``champion`` alias of registered model ``name`` by hand (rollback): to ``version``, or with
    ``previous`` to the version the current champion replaced when the gate promoted it (its tag
    ``shiftflow.previous_champion``, else the newest lower version the gate promoted; a move by hand sets no such
    tag, so ``previous`` twice goes back two promotions, and refuses at the first version). Tags the new champion with who, when and why
    (``shiftflow.champion_set``) and the version it replaced; returns {"from", "to"}. ``ShiftflowInputError``
    (one line, with the fix) for an unknown model or version, no previous champion, or a version whose inputs
    (tag ``shiftflow.schema``) differ from the serving champion's."""
    client = MlflowClient(tracking_uri)
    try:
        versions = {str(v.version): v for v in client.search_model_versions(f"name = '{name}'")}
    except MlflowException:
        versions = {}
    if not versions:
        raise ShiftflowInputError(f"no registered model {name!r} in this MLflow store; check --model and "
                                  "--tracking-uri (MLFLOW_TRACKING_URI)")
    inc = incumbent(client, name)
    if previous:
        if inc is None:
            raise ShiftflowInputError(f"{name!r} has no champion, so no previous one; name a version with --set")
        version = versions[str(inc.version)].tags.get(PREVIOUS) or next(
            (v for v in sorted(versions, key=int, reverse=True)
             if int(v) < int(inc.version) and versions[v].tags.get(DECISION) == "promoted"), None)
        if version is None:
            raise ShiftflowInputError(f"{name!r} v{inc.version} replaced no earlier champion; name a version "
                                      "with --set")
    if str(version) not in versions:
        raise ShiftflowInputError(f"{name!r} has no version {version!r}; its versions are "
                                  f"{', '.join(sorted(versions, key=int))}")
    target = versions[str(version)]
    if inc is not None and str(inc.version) == str(target.version):
        return {"from": str(inc.version), "to": str(target.version)}
    if inc is not None and inc.tags.get(SCHEMA) and target.tags.get(SCHEMA) \
            and inc.tags[SCHEMA] != target.tags[SCHEMA]:
        raise ShiftflowInputError(
            f"{name!r} v{target.version} takes other input columns than the serving champion v{inc.version} "
            f"(v{target.version}: {target.tags.get('shiftflow.input_columns', '?')}; v{inc.version}: "
            f"{inc.tags.get('shiftflow.input_columns', '?')}); a registered model serves one input schema")
    with registry_lock(tracking_uri, name):  # not while a run's gate decides
        with_retries(client.set_registered_model_alias, name, "champion", str(target.version))
        _drop_challenger(client, name, target.version)
        with_retries(client.set_model_version_tag, name, str(target.version), ALIAS_SET,
                     f"{when} by {who}: {reason}")
        # PREVIOUS stays what the gate set when it promoted the version: --previous walks the promotions back, and a
        # rollback is not a promotion (helper-39: a second --previous after v2 → v1 served v2 again). The run that
        # records the move keeps the version it replaced.
    _record_move(client, name, target, inc, f"{when} by {who}: {reason}")
    return {"from": None if inc is None else str(inc.version), "to": str(target.version)}


def _record_move(client: MlflowClient, name: str, target: Any, inc: Any, said: str) -> None:
    """A finished run that records one move by hand (tags :data:`MOVED`, :data:`ALIAS_SET`, the version replaced),
    in the experiment of the run that registered ``target``: MLflow's runs are the audit log, every move kept
    (the version's tag holds its latest only). Skipped when that run is gone (the tag still records the move)."""
    try:
        exp = with_retries(client.get_run, target.run_id).info.experiment_id if target.run_id else None
    except MlflowException:
        exp = None
    if exp is None:
        return
    try:  # the alias has moved already: a record that cannot be written (e.g. a deleted experiment) is a warning
        run = with_retries(client.create_run, exp, run_name=f"champion set to v{target.version} by hand", tags={
            MOVED: f"{name} v{target.version}", ALIAS_SET: said,
            PREVIOUS: "-" if inc is None else str(inc.version)})
        with_retries(client.set_terminated, run.info.run_id)
    except MlflowException as err:
        run_logger().warning("champion: the move is not kept as a run (%s); the version's tag %s records it",
                             str(err).splitlines()[0], ALIAS_SET)


def _log_decision(client: MlflowClient, parent_run_id: str, record: dict[str, Any], waited: float) -> None:
    """The decision on the parent run: tags ``champion.*`` and ``shiftflow.decision``, metrics."""
    tags = {"champion.decision": record["decision"], DECISION: record["gate_decision"],
            "champion.registered_model": f"{record['registered_model']} v{record['version']}",
            "champion.new_version": str(record["new_version"]).lower(), "champion.reason": record["reason"],
            "champion.serving": str(record["version"] if record["decision"] in ("champion", "unchanged")
                                    else record["incumbent_version"] or "-")}
    if record.get("champion_unvouched"):  # the model that serves on, where nothing vouches for it on this batch
        tags["champion.serving_unvouched"] = record["champion_unvouched"]
    for key, value in tags.items():
        with_retries(client.set_tag, parent_run_id, key, value)
    inc = record["incumbent_score"]
    log_metrics(client, parent_run_id, {"champion.new_score": record["new_score"], "champion.lock_wait_s": waited,
                                        "champion.p_better": record["p_better"],
                                        "champion.incumbent_score": inc, "champion.labels": record.get("labels")},
                skip_missing=True)
