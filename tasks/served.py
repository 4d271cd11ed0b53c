"""Stage ``served``: the served champion's predictions on today's batch, and what the MLflow Model Registry
holds about the model that serves it.

With a label budget the flow runs this stage before ``labels`` (``flows/retrain.py``): the registered model's
champion scores every row of the batch (``served/predictions.parquet``), so a label plan draws rows where it
disagrees with the candidates too and the gate (``tasks.champion``) can weigh the labels. The stage's readers
live here too (:func:`served_contender`, :data:`SERVED`, :func:`served_name`), as do the registry facts the
served, labels and champion stages and the flow share: the input schema a registered model serves
(:func:`input_schema`, tag :data:`SCHEMA`; a run that names an existing model of another schema is refused,
:func:`check_model_name`; the default name carries its digest, :func:`default_model_name`), its champion
version (:func:`incumbent`), and how that version scores raw rows (:func:`served_proba`)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from prefect import task
from prefect.cache_policies import NO_CACHE

from shiftlib.errors import ShiftflowInputError
from tasks.ingest import INGESTED, ROW, TARGET_ROWS, raw_input_schema, read_ingest
from tasks.logs import run_logger
from tasks.store import Read, StageOutput
from tasks.tracking import RunContext, with_retries

SERVED = "served"  # stage: the served champion's predictions on the whole batch, a contender for the labels
SCHEMA = "shiftflow.schema"  # a registered version's tag: the digest of its input schema (input_schema)
CLASSES = "shiftflow.classes"  # a registered version's tag: its classes in code order (JSON), named in a refusal
#: what the served stage reads: the target batch (keyed by the ingested tables) and its rows as the user gave them;
#: the registered version it scores is an input too (``also``: model and run)
READS = (*INGESTED, TARGET_ROWS)
#: what later stages read of this one: the champion's predictions (the labels stage's contender)
PREDICTIONS = Read(SERVED, "predictions.parquet", "served", optional=True)


@dataclass(frozen=True)
class ServedManifest:
    """What the served stage's manifest says (:func:`read_served`): which version of which model scored the batch."""

    model_name: str
    version: str


def read_served(store: Any) -> ServedManifest | None:
    """This run's served manifest, typed (the only reader of its keys); None when the run has no served stage."""
    if not store.has_stage(SERVED):
        return None
    params = store.manifest(SERVED)["params"]
    return ServedManifest(str(params.get("model_name")), str(params["version"]))


def input_schema(store: Any) -> dict[str, Any]:
    """What a served model takes and returns: its input columns and types (the signature's input schema), the
    label and the classes in code order; ``digest`` (16 hex digits) names it."""
    ing = read_ingest(store)
    facts = {"inputs": raw_input_schema(store).to_dict(), "label": str(ing.label),
             "classes": [str(c) for c in ing.classes]}
    return facts | {"digest": hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]}


def default_model_name(base: str, schema: dict[str, Any]) -> str:
    """``<base>-<first 8 hex digits of the schema digest>``: two tables with other input columns, label or
    classes never share a registered model (and so a champion), whatever their label is called."""
    return f"{base}-{schema['digest'][:8]}"


def columns_words(schema_inputs: list[dict[str, Any]], limit: int = 6) -> str:
    """The input columns of a schema (:func:`input_schema`'s ``inputs``) in a few words."""
    names = [str(c.get("name")) for c in schema_inputs]
    return ", ".join(names[:limit]) + (f" … ({len(names)} in all)" if len(names) > limit else "")


def check_model_name(client: MlflowClient, name: str, schema: dict[str, Any]) -> None:
    """Refuse ``name`` when one of its versions takes other inputs (tag ``shiftflow.schema``): one line with the
    fix. A model that does not exist yet, or whose versions predate the tag, passes."""
    try:
        versions = client.search_model_versions(f"name = '{name}'")
    except MlflowException:
        return
    for v in versions:
        other = v.tags.get(SCHEMA)
        if other is not None and other != schema["digest"]:
            cols = v.tags.get("shiftflow.input_columns", "?")
            theirs = json.loads(v.tags[CLASSES]) if CLASSES in v.tags else None  # versions before the tag: None
            mine = f", classes {', '.join(schema['classes'])}" if theirs is not None else ""
            missing = [c for c in theirs or [] if c not in schema["classes"]]
            lacks = (f"this source has no rows of class {', '.join(missing)}, which v{v.version} predicts: add some "
                     "to the source, or " if missing and cols == columns_words(schema["inputs"]) else "")
            raise ShiftflowInputError(
                f"registered model {name!r} serves other input columns, label or classes (v{v.version}: {cols}"
                f"{'' if theirs is None else ', classes ' + ', '.join(theirs)}; this run: "
                f"{columns_words(schema['inputs'])}, label {schema['label']!r}{mine}"
                f"{_column_diff(name, v.version, schema)}); {lacks}give another --model-name (model_name), or leave "
                "it unset: the default name carries the input schema")


def _column_diff(name: str, version: Any, schema: dict[str, Any]) -> str:
    """"; columns only in vN: […]; only in this run: […]" from the version's signature, for a refusal that would
    otherwise show only the first few names of each (helper-39: Year and Month, dropped in one run); "" when the
    signature cannot be read or the names are the same."""
    import mlflow.models

    try:
        info = mlflow.models.get_model_info(f"models:/{name}/{version}")
        theirs = [] if info.signature is None else list(info.signature.inputs.input_names())
    except Exception:  # noqa: BLE001 - a refusal is on its way: its words must not fail on an unreadable model
        return ""
    mine = [str(c.get("name")) for c in schema["inputs"]]
    only_then, only_now = [c for c in theirs if c not in mine], [c for c in mine if c not in theirs]
    if not theirs or not (only_then or only_now):
        return ""
    return (f"; columns only in v{version}: {only_then[:10]}" + (" …" if len(only_then) > 10 else "")
            + f"; only in this run: {only_now[:10]}" + (" …" if len(only_now) > 10 else ""))


def incumbent(client: MlflowClient, name: str) -> Any:
    """The version of registered model ``name`` with the ``champion`` alias, or None."""
    try:
        return client.get_model_version_by_alias(name, "champion")
    except MlflowException:
        return None


def raw_target(store: Any) -> tuple[np.ndarray, pd.DataFrame]:
    """Today's row keys and raw target rows as the user gave them, without the key, the id column and the group
    column: what a served model takes."""
    raw = store.read_table("ingest", "target_rows")
    ing = read_ingest(store)
    return raw[ROW].to_numpy(), raw.drop(columns=[ROW] + [c for c in (ing.id_column, ing.group_column)
                                                         if c is not None and c in raw.columns])


def raw_source(store: Any) -> pd.DataFrame:
    """Today's raw source rows as the user gave them (label and row key left out), in the encoded source's order;
    ``KeyError`` / ``FileNotFoundError`` for an ingest stage written before it kept them."""
    return store.read_table("ingest", "source_rows").drop(columns=[ROW])


def row_hashes(rows: pd.DataFrame) -> np.ndarray:
    """One 64-bit hash per raw row, over its columns in name order, numbers as float64 and everything else as
    text, so a row hashes alike in two runs whose tables typed a column differently (1 and 1.0, a category and a
    string). pandas' ``hash_pandas_object`` does the hashing; only the normalisation is written here."""
    cols = sorted(rows.columns, key=str)
    norm = pd.DataFrame({str(c): (rows[c].astype("float64") if pd.api.types.is_numeric_dtype(rows[c])
                                  and not pd.api.types.is_bool_dtype(rows[c]) else rows[c].astype("string"))
                         for c in cols})
    return pd.util.hash_pandas_object(norm, index=False).to_numpy(np.uint64)


def served_proba(name: str, inc: Any, raw: pd.DataFrame, n_classes: int,
                 also: pd.DataFrame | None = None) -> tuple[np.ndarray, Any] | str:
    """Version ``inc`` of ``name`` scoring the raw rows ``raw``: (class probabilities in code order, its
    'prepare' step), or why it cannot (a model without its encoder step). With ``also`` (more raw rows, e.g.
    source rows), the probabilities are those of ``raw`` then ``also``, from one load of the model."""
    import mlflow.sklearn

    model = with_retries(mlflow.sklearn.load_model, f"models:/{name}/{inc.version}")
    prepare = getattr(model, "named_steps", {}).get("prepare")
    if prepare is None:
        return f"v{inc.version}'s model has no 'prepare' step to encode today's rows"
    parts = [raw] if also is None else [raw, also]
    probas = []
    for part in parts:
        proba = np.zeros((len(part), n_classes))
        if len(part):
            proba[:, np.searchsorted(np.arange(n_classes), model.classes_)] = model.predict_proba(part)
        probas.append(proba)
    return np.concatenate(probas), prepare


#: the contender of a pair plan when no champion serves (``label_plan='pair'`` on a first version): the majority-class
#: rule, so that the labels decide whether the new version may serve at all (``shiftlib.decisions.gate``, step 2)
RULE = "majority-class rule"
RULE_VERSION = "rule"  # its served stage's ``version``


def served_name(version: Any) -> str:
    """The served champion's name among the contenders of a label plan (no candidate is called so); the
    majority-class rule's for :data:`RULE_VERSION`."""
    return RULE if str(version) == RULE_VERSION else f"champion v{version}"


def served_contender(store: Any) -> str | None:
    """The contender name of this run's ``served`` stage (the champion's predictions on the batch), or None
    without one; read from its manifest only."""
    man = read_served(store)
    return None if man is None else served_name(man.version)


class _CannotScore(Exception):
    """The champion cannot score today's rows (a model without its encoder step); the message says why."""


def _compute(store: Any, model_name: str, inc: Any) -> StageOutput:
    """Version ``inc`` of ``model_name`` scoring every raw target row: ``_row``, ``predicted``, ``proba_<code>``."""
    rows, raw = raw_target(store)
    got = served_proba(model_name, inc, raw, len(read_ingest(store).classes))
    if isinstance(got, str):
        raise _CannotScore(got)
    proba = got[0]
    table = pd.DataFrame({ROW: rows, "predicted": proba.argmax(axis=1)})
    for c in range(proba.shape[1]):
        table[f"proba_{c}"] = proba[:, c]
    return StageOutput({"predictions": table})


@task(name="served", cache_policy=NO_CACHE)
def served(store: Any, *, ctx: RunContext, model_name: str) -> dict[str, Any] | None:
    """Stage ``served``: the registered model's champion (in ``ctx``'s tracking store) scores every row of today's
    batch (``served/predictions.parquet``: ``_row``, ``predicted``, ``proba_<code>``), so a label plan draws rows
    where it disagrees with the candidates too and the gate can weigh labels (the undecided → labels path).
    None, and nothing written, without a champion of this input schema."""
    client = MlflowClient(ctx.tracking_uri)
    try:
        check_model_name(client, model_name, input_schema(store))
    except ShiftflowInputError:
        return None  # the flow refuses this name right after ingest; nothing to compare here
    inc = incumbent(client, model_name)
    if inc is None:
        return None
    params = {"model_name": model_name, "version": str(inc.version)}
    try:
        store.find_or_write(SERVED, params, READS, lambda: _compute(store, model_name, inc),
                            also={"model": f"{model_name}/{inc.version}", "model_run": str(inc.run_id)})
    except _CannotScore as why:
        run_logger().warning("served: %s; the label plan compares the candidates only", why)
        return None
    return {"name": served_name(inc.version), "version": str(inc.version), "model_name": model_name}


def _rule_table(store: Any) -> StageOutput:
    """The majority-class rule on every raw target row: the source's largest class, with probability 1."""
    from shiftlib.decisions import rule_class
    from tasks.ingest import source_labels

    n_classes = len(read_ingest(store).classes)
    c = rule_class(source_labels(store), n_classes)
    rows, _ = raw_target(store)
    table = pd.DataFrame({ROW: rows, "predicted": c})
    for k in range(n_classes):
        table[f"proba_{k}"] = float(k == c)
    return StageOutput({"predictions": table})


def served_rule(store: Any, *, model_name: str) -> dict[str, Any]:
    """Stage ``served`` for a run without a champion whose labels are planned for a pair (``label_plan='pair'``):
    the majority-class rule stands in for the champion (:data:`RULE`), so the plan draws where the label-free
    choice predicts another class than the rule, and the labels decide whether that version may serve (a first
    version left ``undecided`` by ``shiftlib.decisions.gate``'s step 2 asks for them)."""
    store.find_or_write(SERVED, {"model_name": model_name, "version": RULE_VERSION}, READS,
                        lambda: _rule_table(store))
    return {"name": RULE, "version": RULE_VERSION, "model_name": model_name}
