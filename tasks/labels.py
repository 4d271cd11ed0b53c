"""Stage ``labels``: which target rows a person should label (``shiftlib.selection.plan_labels``), and
reading the filled file back.

With a label budget and no labels yet, writes ``labels/plan.parquet`` (row, round, probability),
``labels/to_label.parquet`` and ``labels/to_label.csv`` (the row key ``_row``, the target's columns as the
user gave them — ingest's ``target_rows``, id column first — and an empty column named after the label; a
person labels rows they can read, not one-hot codes and imputed values), a Prefect table artifact
listing the rows, and logs the plan on the MLflow parent run. With a filled file it finds the stored plan
of the same configuration (same ingest and training inputs, seed and budget) in any run folder under
the run root, checks the file and returns the labels for the selection stage; nothing already written
changes.

A pair plan (``pair``: ``label_plan='pair'``, what an undecided gate asks with): the contenders are that
candidate and the served champion only, so every row is drawn where the two disagree; its stage key carries the
candidate, so it is never mistaken for a plan over every candidate.

A next round: a filled file with a budget larger than the plan it answers (same inputs and seed) plans the
rows up to the new budget with ``plan_labels(already_labeled=...)`` (the pairs weighed by the posterior of
the labels so far) and writes a ``to_label.csv`` of every row of the plan, the labeled ones filled in; that
file, filled and passed back with the same budget, finds this continued plan by its rows.

Filled-file rules (documented behaviour): rows whose label cell is empty are skipped and counted (a
partly filled file is used, and the log and the MLflow metrics ``labels.n_filled`` / ``labels.n_empty``
say how many); labels for rows the plan did not ask for are used as uniform draws (probability 1/N each,
see ``shiftlib.selection.fewlabel``). ``LabelsInputError`` (an ``IngestError``, so a ``ValueError``),
raised before this run's labels stage is written, names the problem and the fix for: an unknown row key,
a label never seen in the source, a file with no label filled in, a budget below 1 or beyond the batch,
and a file or plan of another configuration (no stored plan for this one, or a file whose labeled rows
all belong to another configuration's plan, some not to this one) — then it names the run that wrote
that plan and what differs from it (source, target, candidates' predictions, seed, budget, code). The labeled rows do not
train the candidates: they are drawn where the candidates disagree and must stay untouched to compare
them.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from mlflow.tracking import MlflowClient
from prefect import task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.input import RunInput
from pydantic import Field

from shiftlib.decisions import FIRST_RULE_LABELS, RULE_CONTENDER, RULE_CONTENDERS, rule_class, rule_placement
from shiftlib.selection import LabelPlan, TargetPredictions, plan_labels
from shiftlib.selection.fewlabel import UNIFORM_SHARE
from tasks.estimation import FOLD_SCORES, scv_from_estimation
from tasks.ingest import INGESTED, ROW, TARGET_ROWS, load_xy, read_ingest, source_labels
from tasks.inputs import (
    LabelsInputError,
    check_label_budget,
    filled_rows,
    labels_path,
    planned_rows,
    read_filled,
)
from tasks.logs import run_logger
from tasks.served import PREDICTIONS as SERVED_PREDICTIONS
from tasks.served import RULE, SERVED, served_contender
from tasks.store import MANIFEST, Read, StageOutput, StageStore, code_version, stage_key, stage_manifests
from tasks.tracking import RunContext, log_metrics, with_retries
from tasks.training import PREDICTIONS

STAGE = "labels"
#: what a label plan reads: the ingested tables, the candidates' target predictions, the target rows a person
#: labels, and for a next round the estimation stage's source CV (the prior); with the served champion as a
#: contender, its predictions too (:func:`_reads`)
READS = (*INGESTED, PREDICTIONS, TARGET_ROWS, FOLD_SCORES)


def _reads(with_served: bool) -> tuple[Read, ...]:
    """What a plan reads, with or without the served champion (when this run has one) as a contender."""
    return READS + ((SERVED_PREDICTIONS,) if with_served else ())


class FilledLabels(RunInput):
    """The resume form of a deployment run suspended for labels (Prefect UI, or
    ``resume_flow_run(id, run_input={"target_labels": ...})``): where the filled file is."""

    target_labels: str = Field(description="path of the filled to_label.csv (saved as CSV, .xlsx or Parquet "
                               "with its columns); 'file:PATH' or a plain PATH readable by the worker")


def labels_form(csv: str) -> type[FilledLabels]:
    """``FilledLabels`` with the file to fill as the form's default (fill it in place, then press Resume)."""
    return FilledLabels.with_initial_data(description=f"Fill the label column of {csv}, then resume with its "
                                          "path: selection runs with 'fewlabel' deciding.", target_labels=csv)


def _plan_has_served(store: StageStore) -> bool | None:
    """Whether this run's labels stage planned with the served champion as a contender (None: no stage yet)."""
    if not store.has_stage(STAGE):
        return None
    name = served_contender(store)
    return name is not None and name in store.manifest(STAGE)["extra"].get("learners", [])


def stage_predictions(store: StageStore, with_served: bool | None = None, learners: Any = None,
                      rule: str = "never") -> TargetPredictions:
    """The candidates' target predictions and mean class probabilities from the training stage (no refit),
    and the served champion's (``served`` stage, when this run has one) as a contender that is compared but
    never chosen (``TargetPredictions.served``). ``with_served`` None: the champion is a contender unless this
    run's labels stage holds a plan made without it (labels filled before that version served). ``learners``:
    only these candidates (a pair plan's, ``label_plan='pair'``), in the training stage's order. ``rule``: where a
    pair plan puts the majority-class rule beside a served champion (``shiftlib.decisions.RULE_CONTENDER``):
    ``third``, a third contender unless the contenders never disagree; ``one_class``, in place of a champion that
    predicts one class on ≥ ``ONE_CLASS_SHARE`` of the batch; ``first``, a contender of a plan over every
    candidate while no champion serves (``shiftlib.decisions.FIRST_RULE_LABELS``); ``never``. A pair plan without
    a champion has the rule as its served contender already (``tasks.served.served_rule``)."""
    if rule not in RULE_MODES:
        raise ValueError(f"rule must be one of {list(RULE_MODES)}; got {rule!r}")
    if with_served is None:
        with_served = _plan_has_served(store) is not False
    preds = store.read_table("training", "predictions")
    names = [n for n in dict.fromkeys(preds["learner"]) if learners is None or n in learners]
    proba_cols = sorted((c for c in preds.columns if c.startswith("proba_")), key=lambda c: int(c.split("_")[1]))
    classes = np.array([int(c.split("_")[1]) for c in proba_cols])
    tables = [preds[preds["learner"] == n].sort_values(ROW) for n in names]
    served = served_contender(store) if with_served else None
    if served is not None:
        names.append(served)
        tables.append(store.read_table(SERVED, "predictions").sort_values(ROW)
                      .reindex(columns=[ROW, "predicted", *proba_cols]))
    P = [g["predicted"].to_numpy() for g in tables]
    if served is None or served == RULE:  # no champion: the rule joins a plan over every candidate ('first')
        place = "beside" if rule == "first" and served is None else None
    else:  # beside a champion: where shiftlib's policy puts it (none beside a pair that never disagrees)
        place = rule_placement("never" if rule == "first" else rule, P[-1], P[:-1])
    if place is not None:
        if place == "instead":  # a one-class champion is a constant rule itself: the rule stands in for it
            del names[-1], tables[-1], P[-1]
        names.append(RULE)
        tables.append(_rule_rows(store, tables[0][ROW]))
        P.append(tables[-1]["predicted"].to_numpy())
    # the mean probability (the plan's and the estimate's surrogate) is the models' own: the majority-class rule,
    # a stand-in contender, has none
    models = [g for n, g in zip(names, tables, strict=True) if n != RULE]
    proba = sum(g[proba_cols].fillna(0.0).to_numpy(float) for g in models)
    return TargetPredictions(names, np.column_stack(P), np.asarray(proba) / len(models), classes,
                             served=tuple(n for n in names if n in (served, RULE)))


def _rule_rows(store: StageStore, rows: pd.Series) -> pd.DataFrame:
    """The majority-class rule on the batch ``rows`` (the candidates' row keys): the source's largest class on
    each, as ``tasks.served.served_rule`` writes it for a first version's pair plan, read from the ingested tables
    every reader of a plan declares (not the raw target rows)."""
    c = rule_class(source_labels(store), len(read_ingest(store).classes))
    return pd.DataFrame({ROW: rows.to_numpy(), "predicted": c})


#: :func:`stage_predictions`' ``rule``: the pair plan's (``shiftlib.decisions.RULE_CONTENDERS``) and ``first``
RULE_MODES = (*RULE_CONTENDERS, "first")


def plan_rule(man: dict[str, Any]) -> str:
    """Where the stored plan of manifest ``man`` put the majority-class rule (:func:`stage_predictions`' ``rule``,
    kept in the labels stage's ``extra``)."""
    return str(man.get("extra", {}).get("rule", "never"))


def new_plan_rule(store: StageStore, pair: str | None) -> str:
    """Where a new plan puts the majority-class rule: a pair plan as ``shiftlib.decisions.RULE_CONTENDER`` says;
    a plan over every candidate among its contenders while no champion serves (``FIRST_RULE_LABELS``)."""
    if pair is not None:
        return RULE_CONTENDER
    return "first" if FIRST_RULE_LABELS and served_contender(store) is None else "never"


def _keys(store: StageStore, budget: int | None, seed: int, with_served: bool = True, pair: str | None = None
          ) -> tuple[str, str, dict[str, Any], dict[str, str]]:
    """(stage key, base key of every budget, params, inputs); ``pair``: the candidate of a pair plan (its own
    keys: a pair plan and a candidates plan of the same budget are different plans)."""
    inputs = store.inputs(_reads(with_served))  # the champion, when a contender: its predictions are an input
    which = {} if pair is None else {"pair": pair}
    params = {"budget": budget, "seed": seed} | which
    return stage_key(STAGE, params, inputs), stage_key(STAGE, {"seed": seed} | which, inputs), params, inputs


def _same_base(store: StageStore, base: str, keep: Any = None) -> list[Path]:
    """Manifests of stored plans of the same inputs and seed (``keep(manifest)`` filters), newest first."""
    found = []
    for m in stage_manifests(store.run_root, STAGE):
        try:
            man = json.loads(m.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if man.get("extra", {}).get("base_key") == base and (keep is None or keep(man)):
            found.append(m)
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def _holding(store: StageStore, manifests: list[Path], rows: set[int] | None) -> dict[str, Any] | None:
    """The verified plan of ``manifests`` (newest first) that asked for the most of ``rows``, at least half of
    them (the newest plan when ``rows`` is None)."""
    if rows is not None:
        hits = []
        for m in manifests:
            planned = planned_rows(m)
            if planned is not None and rows and 2 * len(planned & rows) >= len(rows):
                hits.append((len(planned & rows), m))
        manifests = [m for _, m in sorted(hits, key=lambda h: -h[0])]  # stable: newest first among equals
    for m in manifests:
        man = store.verify(m.parent)
        if man is not None:
            return man | {"_dir": str(m.parent)}
    return None


def _served_options(store: StageStore, pair: str | None = None) -> tuple[bool, ...]:
    """The plans a filled file may answer: with the served champion as a contender first, then without it (a
    plan made before that version served; its labels still choose among the candidates). A pair plan always
    has the champion."""
    return (True, False) if served_contender(store) is not None and pair is None else (True,)


def _find_plan(store: StageStore, budget: int | None, seed: int, rows: set[int] | None = None,
               pair: str | None = None) -> dict[str, Any] | None:
    """The stored plan a filled file answers (:func:`_find_plan_as`, with then without the served champion)."""
    for with_served in _served_options(store, pair):
        found = _find_plan_as(store, budget, seed, rows, with_served, pair)
        if found is not None:
            return found
    return None


def _find_plan_as(store: StageStore, budget: int | None, seed: int, rows: set[int] | None, with_served: bool,
                  pair: str | None = None) -> dict[str, Any] | None:
    """The stored plan a filled file answers: this budget's (a one-round plan, else a continued plan that asked
    for the file's ``rows``), or with no budget given the newest plan of the same inputs and seed."""
    key, base, _, _ = _keys(store, budget, seed, with_served, pair)
    if budget is None:
        return _holding(store, _same_base(store, base), None)
    found = store.find_reusable(STAGE, key)
    if found is not None or rows is None:
        return found
    return _holding(store, _same_base(store, base, lambda m: m.get("params", {}).get("budget") == budget
                                      and "continues" in m.get("params", {})), rows)


def _find_earlier(store: StageStore, budget: int, seed: int, rows: set[int], pair: str | None = None
                  ) -> dict[str, Any] | None:
    """A stored plan of the same inputs and seed with a smaller budget that asked for the file's ``rows``: the
    file answers an earlier round, and ``budget`` asks for the next one."""
    for with_served in _served_options(store, pair):
        _, base, _, _ = _keys(store, budget, seed, with_served, pair)
        found = _holding(store, _same_base(store, base, lambda m: (m.get("params", {}).get("budget") or 0) < budget),
                         rows)
        if found is not None:
            return found
    return None


def plan_from_stage(store: StageStore) -> LabelPlan:
    """The ``LabelPlan`` stored in this run's labels stage."""
    man = store.manifest(STAGE)
    t = store.read_table(STAGE, "plan")
    return _plan(man, t)


def _plan(man: dict[str, Any], t: pd.DataFrame) -> LabelPlan:
    ex = man["extra"]
    details = {"disagreement": np.asarray(ex["disagreement"], int), "round_info": ex["round_info"]}
    return LabelPlan(t["row"].to_numpy(int), t["probability"].to_numpy(float), t["round"].to_numpy(int),
                     int(ex["budget"]), int(ex["n_target"]), list(ex["learners"]), details)


_INPUT_NAMES = {"source": "the source table", "target": "the target batch",
                "training": "the candidates' target predictions (learners, weighting, seed or CV settings)",
                "served": "the served champion (another version serves now)"}


def _other_plan(store: StageStore, budget: int | None, seed: int, rows: set[int], *, whole: bool,
                pair: str | None = None, spec: str | None = None) -> str:
    """Which stored plan (not this configuration's) the labeled ``rows`` belong to, and what differs: '' if none
    holds all of them (``whole``) or at least half of them. Among those, the plan whose folder holds the file
    ``spec`` (filled in place), else the one holding most rows, the newest among equals (plans of the same seed ask
    for the same rows: helper-36 was named the run of another plan than the file's)."""
    key, _, _, inputs = _keys(store, budget, seed, pair=pair)
    own = None if spec is None else labels_path(spec).resolve().parent / MANIFEST
    best: tuple[tuple[bool, int, float], dict[str, Any]] | None = None
    for m in stage_manifests(store.run_root, STAGE):
        try:
            man = json.loads(m.read_text())
        except (OSError, ValueError):
            continue
        planned = planned_rows(m)
        if planned is None:
            continue
        hit = len(planned & rows)
        enough = hit == len(rows) if whole else 2 * hit >= len(rows)
        rank = (m.resolve() == own, hit, m.stat().st_mtime)
        if rows and man.get("key") != key and enough and (best is None or rank > best[0]):
            best = (rank, man)
    if best is None:
        return ""
    man = best[1]
    diffs = [_INPUT_NAMES.get(k, k) for k in inputs if man.get("inputs", {}).get(k) != inputs[k]]
    if man.get("params", {}).get("seed") != seed:
        diffs.append(f"the seed ({man['params'].get('seed')} then, {seed} now)")
    if budget is not None and man.get("params", {}).get("budget") != budget:
        diffs.append(f"the label budget ({man['params'].get('budget')} then, {budget} now)")
    if man.get("params", {}).get("pair") != pair:
        diffs.append(f"the label plan ({_plan_words(man.get('params', {}).get('pair'))} then, {_plan_words(pair)} "
                     "now)")
    if man.get("code_version") != code_version():
        diffs.append("the shiftflow code (changed since)")
    return (f". The file's rows are those of the plan written by run {man.get('run_id')}, whose configuration "
            f"differs in: {', '.join(diffs) or 'the stage key'}. Resume with that run's configuration, or plan "
            "anew with --label-budget and fill the new file")


def _plan_words(pair: str | None) -> str:
    return "every candidate" if pair is None else f"the pair {pair} and the champion"


def _uniform_share(pair: str | None) -> float:
    """The plan's uniform share (``shiftlib.selection.fewlabel.UNIFORM_SHARE``) over every candidate; none for a
    pair: its labels weigh a difference, in which the accuracy the contenders share where they agree cancels."""
    return UNIFORM_SHARE if pair is None else 0.0


def write_plan(store: StageStore, *, budget: int, seed: int, label: str, pair: str | None = None) -> LabelPlan:
    """Plan the rows to label and write the labels stage (or adopt a stored plan of the same key); ``pair``: the
    contenders are that candidate and the served champion only (``label_plan='pair'``).

    Raises ``LabelsInputError`` before writing anything when ``budget`` is below 1 or beyond the batch."""
    check_label_budget(budget, read_ingest(store).n_target)
    _, base, params, _ = _keys(store, budget, seed, pair=pair)

    rule = new_plan_rule(store, pair)

    def compute() -> StageOutput:
        X_s, y_s, X_t = load_xy(store)
        tp = stage_predictions(store, with_served=True, learners=None if pair is None else [pair], rule=rule)
        plan = plan_labels(tp.names, X_s, y_s, X_t, budget=budget, random_state=seed, prior=None, predictions=tp,
                           uniform_share=_uniform_share(pair))
        return _plan_output(store, plan, label, {}, {"base_key": base, "rule": rule})

    store.find_or_write(STAGE, params, _reads(True), compute)
    return plan_from_stage(store)


def _plan_output(store: StageStore, plan: LabelPlan, label: str, filled: dict[int, Any],
                 extra: dict[str, Any]) -> StageOutput:
    """The labels stage of ``plan``: plan.parquet, and to_label.{parquet,csv} with the target's rows as the user
    gave them and the label column (``filled``: row → label already known, the rest empty)."""
    tgt = store.read_table("ingest", "target_rows").set_index(ROW).loc[plan.rows].reset_index()
    tgt[label] = pd.Series([filled.get(r) for r in plan.rows], dtype=object)
    extra = {"disagreement": plan.details["disagreement"].tolist(), "round_info": plan.details["round_info"],
             "budget": plan.budget, "n_target": plan.n_target, "learners": plan.learners, "label": label} | extra
    buf = io.BytesIO()
    tgt.to_parquet(buf, index=False)
    # handed out (tasks.store.StageOutput.handout): a person fills them in place, and the plan stays valid
    return StageOutput({"plan": plan.to_frame()}, extra=extra,
                       handout={"to_label.csv": tgt.to_csv(index=False).encode(), "to_label.parquet": buf.getvalue()})


def _awaiting(store: StageStore, plan: LabelPlan, n_prefilled: int, client: MlflowClient,
              parent_run_id: str) -> dict[str, Any]:
    """Log a written plan (artifact, metrics, tag) and say which file to fill."""
    csv = store.path(STAGE, "to_label.csv")
    create_table_artifact(key="labels-to-fill", table=plan.to_frame().to_dict("records"),
                          description=f"target rows to label: fill {csv}")
    log_metrics(client, parent_run_id, {"labels.budget": plan.budget, "labels.n_requested": len(plan.rows),
                                        "labels.n_disagreement": len(plan.details["disagreement"])})
    with_retries(client.set_tag, parent_run_id, "labels.plan_sha256", store.file_hash(STAGE, "plan.parquet"))
    with_retries(client.log_artifact, parent_run_id, str(store.path(STAGE, "plan.parquet")), "labels")
    n_rows = len(plan.rows) - n_prefilled
    if n_rows == 0:  # e.g. a pair that predicts the same class on every row: no label can tell the two apart
        run_logger().warning("labels: no row to label (%s)", plan.details.get("note", "nothing left to draw"))
    else:
        run_logger().info("labels: label the %d rows in %s%s, then rerun with --target-labels file:%s", n_rows,
                          csv, f" ({n_prefilled} labeled before are filled in)" if n_prefilled else "", csv)
    return {"status": "awaiting_labels", "csv": str(csv), "parquet": str(store.path(STAGE, "to_label.parquet")),
            "n_rows": int(n_rows), "n_prefilled": int(n_prefilled), "budget": int(plan.budget),
            "n_planned": int(len(plan.rows)), "n_disagreement": int(len(plan.details["disagreement"])),
            "learners": list(plan.learners)}


def continue_plan(store: StageStore, earlier: dict[str, Any], *, budget: int, seed: int, label: str,
                  target_labels: str, k: int | None = None, pair: str | None = None) -> tuple[LabelPlan, int]:
    """The next round of a plan (``plan_labels(already_labeled=...)``): the earlier plan's rows with the filled
    file's labels, and rows drawn up to ``budget`` where the candidates still disagree, the pairs weighed by
    the posterior those labels give (with the estimation stage's source CV as its prior, when stored). Writes
    the labels stage with ``to_label.csv`` holding every row of the plan, the labeled ones filled in; returns
    the plan and how many labels were filled in. Raises ``LabelsInputError`` when the budget adds no row."""
    plan0 = _plan(earlier, pd.read_parquet(Path(earlier["_dir"]) / "plan.parquet"))
    check_label_budget(budget, plan0.n_target)
    classes = read_ingest(store).classes
    lab, _, digest = read_filled(target_labels, earlier["extra"].get("label", label), classes, plan0.n_target)
    served = served_contender(store)  # the next round keeps the earlier round's contenders
    rule = plan_rule(earlier)  # a one-class champion's stand-in rule read its predictions too
    with_served = served is not None and (served in plan0.learners or rule == "one_class")
    _, base, params, _ = _keys(store, budget, seed, with_served, pair)

    def compute() -> StageOutput:
        X_s, y_s, X_t = load_xy(store)
        tp = stage_predictions(store, with_served, learners=None if pair is None else [pair], rule=rule)
        prior = scv_from_estimation(store, seed, k) if k is not None else None
        plan = plan_labels(tp.names, X_s, y_s, X_t, budget=budget, random_state=seed, prior=prior, predictions=tp,
                           already_labeled=(plan0, pd.Series(lab, dtype=object)), uniform_share=_uniform_share(pair))
        n_new = len(plan.rows) - len(plan0.rows)
        if n_new <= 0:
            raise LabelsInputError(f"label_budget={budget} adds no row to the {len(plan0.rows)} already planned "
                                   f"({plan.details.get('note', 'nothing left to draw')}): resume with "
                                   f"--label-budget {plan0.budget} and the filled file")
        extra = {"base_key": base, "continued_from": earlier.get("run_id"), "n_prefilled": len(lab), "rule": rule}
        return _plan_output(store, plan, label, {r: classes[c] for r, c in lab.items()}, extra)

    params = params | {"continues": earlier["key"], "labels_sha256": digest}
    store.find_or_write(STAGE, params, _reads(with_served), compute)
    return plan_from_stage(store), len(lab)


def read_labels(store: StageStore, *, budget: int | None, seed: int, label: str, target_labels: str,
                pair: str | None = None) -> dict[str, Any]:
    """Find the stored plan of this configuration, check the filled file against it, then adopt the plan into
    this run. Every check runs before anything is written (``LabelsInputError`` naming the fix)."""
    rows = filled_rows(target_labels, label)
    found = _find_plan(store, budget, seed, rows, pair)
    if found is None and budget is not None:
        earlier = _find_earlier(store, budget, seed, rows, pair)
        if earlier is not None:  # the file answers an earlier, smaller plan: ask for the next round
            return {"status": "continue", "earlier": earlier}
    if found is None:
        raise LabelsInputError(
            "no stored label plan for this configuration (same source, target, learners, seed"
            + (f", budget {budget}" if budget is not None else "") + "): run with --label-budget first, with the "
            "same configuration, and fill the file it writes"
            + _other_plan(store, budget, seed, rows, whole=False, pair=pair, spec=target_labels))
    plan = _plan(found, pd.read_parquet(Path(found["_dir"]) / "plan.parquet"))  # verified by _find_plan
    classes = read_ingest(store).classes
    lab, n_empty, digest = read_filled(target_labels, found["extra"].get("label", label), classes, plan.n_target)
    requested = set(plan.rows.tolist())
    if set(lab) - requested:  # rows this plan did not ask for: extra uniform draws, unless another plan asked
        other = _other_plan(store, budget, seed, set(lab), whole=True, pair=pair, spec=target_labels)
        if other:  # every labeled row is a row of another configuration's plan: the wrong file, refuse it
            raise LabelsInputError(f"{target_labels}: {len(set(lab) - requested)} of its {len(lab)} labeled rows "
                                   f"are not rows this configuration's plan asked for{other}")
    # adopted as it is, not found by key: a filled file answers the stored plan that asked for its rows
    store.adopt(STAGE, found)
    return {"status": "labeled", "plan": plan, "rule": plan_rule(found), "labels": lab, "labels_sha256": digest,
            "plan_sha256": store.file_hash(STAGE, "plan.parquet"), "n_empty": n_empty,
            "n_unrequested": len(set(lab) - requested), "n_requested_empty": len(requested - set(lab))}


@task(name="labels", cache_policy=NO_CACHE)
def labels(store: StageStore, *, ctx: RunContext, budget: int | None, label: str, target_labels: str | None,
           k: int | None = None, pair: str | None = None) -> dict[str, Any]:
    """Plan the rows to label (budget, no labels yet), plan the next round (a budget larger than the plan
    the filled file answers), or read the filled file back, seeded by ``ctx`` and logged on its parent run;
    returns a summary with ``status`` 'awaiting_labels' (the file paths, ``n_rows`` to label and ``n_prefilled``
    already labeled in it) or 'labeled' (plan and labels), and ``pair``. ``k``: the source-CV folds whose
    estimation-stage scores weigh a next round. ``pair``: a pair plan's candidate (its contenders are that
    candidate and the served champion; the labels then decide the gate only)."""
    log, seed, parent_run_id = run_logger(), ctx.seed, ctx.parent_run_id
    client = MlflowClient(ctx.tracking_uri)
    if target_labels is None:
        if budget is None:
            raise LabelsInputError("set label_budget to plan which target rows to label")
        plan = write_plan(store, budget=budget, seed=seed, label=label, pair=pair)
        return _awaiting(store, plan, 0, client, parent_run_id) | {"pair": pair}
    out = read_labels(store, budget=budget, seed=seed, label=label, target_labels=target_labels, pair=pair)
    if out["status"] == "continue":
        assert budget is not None  # read_labels continues only toward a given budget
        plan, n_done = continue_plan(store, out["earlier"], budget=budget, seed=seed, label=label,
                                     target_labels=target_labels, k=k, pair=pair)
        return _awaiting(store, plan, n_done, client, parent_run_id) | {"pair": pair}
    plan, lab, n_extra = out["plan"], out["labels"], out["n_unrequested"]
    log.info("labels: %d labels read from %s (%d rows of the file left empty, %d of the %d requested rows not "
             "labeled, %d rows not requested used as uniform draws)", len(lab), target_labels, out["n_empty"],
             out["n_requested_empty"], len(plan.rows), n_extra)
    log_metrics(client, parent_run_id, {"labels.n_filled": len(lab), "labels.n_empty": out["n_empty"],
                                        "labels.n_unrequested": n_extra, "labels.n_requested": len(plan.rows)})
    with_retries(client.set_tag, parent_run_id, "labels.labels_sha256", out["labels_sha256"])
    with_retries(client.set_tag, parent_run_id, "labels.plan_sha256", out["plan_sha256"])
    return out | {"pair": pair}
