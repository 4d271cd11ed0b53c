"""Scoring a batch with a registered version (``shiftflow score``, deployment ``score-batch``): resolve the
version, check the batch against its inputs, score raw rows in its users' labels, write the scores, and monitor
the batch (``shiftlib.monitoring.monitor_batch``) on an MLflow run, with Prefect events for an automation.

The scores table: the row key (``--id-column``'s values, else ``row``, the batch row's position), ``predicted``
(the class label), ``proba_<label>`` per class, and ``model_version``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from prefect import task
from prefect.cache_policies import NO_CACHE

from shiftlib.errors import ShiftflowInputError, quote, quote_list
from tasks.logs import run_logger
from tasks.sources import mask_secrets, parse_sql_spec, sql_engine
from tasks.store import write_parquet_atomic
from tasks.tracking import log_metrics, with_retries

#: rows scored at once: bounds the memory of a large batch (probabilities and labels of one chunk)
CHUNK_ROWS = 200_000
#: the alias a bare model name means
DEFAULT_ALIAS = "champion"
#: the tag that makes a score run part of the model's history (``tasks.history``), value "NAME vVERSION"
SCORED_TAG = "shiftflow.scored_model"
OUT_FORMS = "file:PATH.parquet, file:PATH.csv or sql:URL::TABLE"


class ScoreInputError(ShiftflowInputError):
    """A model reference, batch or output that cannot be scored or written; the message names the fix."""


@dataclass(frozen=True)
class ModelRef:
    """A registered model and which version: an alias or a version number (a bare name is its champion)."""

    name: str
    alias: str | None
    version: str | None

    def __str__(self) -> str:
        return f"{self.name}/{self.version}" if self.version else f"{self.name}@{self.alias}"


def parse_model_ref(text: str) -> ModelRef:
    """``NAME``, ``NAME@ALIAS`` or ``NAME/VERSION`` (a bare name means ``NAME@champion``)."""
    text = (text or "").strip()
    m = re.fullmatch(r"(?P<name>[^@/\s].*?)(?:@(?P<alias>[\w.-]+)|/(?P<version>\d+))?", text)
    if not text or m is None or not m["name"].strip():
        raise ScoreInputError(f"--model {quote(text)} is not NAME, NAME@ALIAS or NAME/VERSION (e.g. "
                              "shiftflow-pima@champion or shiftflow-pima/3)")
    return ModelRef(m["name"], m["alias"] or (None if m["version"] else DEFAULT_ALIAS), m["version"])


def _why_no_champion(client: MlflowClient, ref: ModelRef) -> str:
    """For a missing ``@champion``: what the gate decided for the newest version (tag ``shiftflow.decision``), e.g.
    a first version left undecided until target labels decide; empty for another alias or without the tag."""
    if ref.alias != DEFAULT_ALIAS:
        return ""
    versions = with_retries(client.search_model_versions, f"name = '{ref.name}'")
    newest = max(versions, key=lambda v: int(v.version), default=None)
    decision = None if newest is None else (newest.tags or {}).get("shiftflow.decision")
    if decision is None:
        return ""
    why = {"undecided": "its gate waits for target labels (the closing report of that run says which)",
           "refused": "the gate refused it (its run's tag champion.reason says why)"}.get(decision, decision)
    return f": no version serves yet (the newest, v{newest.version}, is {decision}: {why})"


def resolve_version(client: MlflowClient, ref: ModelRef) -> Any:
    """The model version ``ref`` names; raises :class:`ScoreInputError` naming what exists."""
    try:
        model = with_retries(client.get_registered_model, ref.name)
    except MlflowException:
        names = [m.name for m in with_retries(client.search_registered_models, max_results=50)]
        raise ScoreInputError(f"no registered model {quote(ref.name)}; the registry has "
                              f"{quote_list(names) if names else 'none'} (check --model and --tracking-uri)") from None
    if ref.version is None:
        if ref.alias not in model.aliases:
            have = ", ".join(f"@{a} (v{v})" for a, v in sorted(model.aliases.items())) or "no alias"
            raise ScoreInputError(f"{ref.name} has no alias @{ref.alias}{_why_no_champion(client, ref)}; it has "
                                  f"{have}; name a version with --model {ref.name}/VERSION")
        return with_retries(client.get_model_version, ref.name, str(model.aliases[ref.alias]))
    try:
        return with_retries(client.get_model_version, ref.name, ref.version)
    except MlflowException:
        versions = sorted(int(v.version) for v in with_retries(client.search_model_versions, f"name = '{ref.name}'"))
        raise ScoreInputError(f"{ref.name} has no version {ref.version}; its versions are "
                              f"{', '.join(map(str, versions)) or 'none'}") from None


def model_inputs(name: str, version: str) -> list[str]:
    """The input column names of the version's signature (what it takes)."""
    import mlflow.models

    info = with_retries(mlflow.models.get_model_info, f"models:/{name}/{version}")
    if info.signature is None or info.signature.inputs is None:
        raise ScoreInputError(f"{name} v{version} has no input signature; register it again with shiftflow retrain")
    return list(info.signature.inputs.input_names())


def used_inputs(model: Any, inputs: list[str]) -> list[str]:
    """The ``inputs`` (the signature's columns) that the version's ``prepare`` step encodes: not those its encoder
    dropped (an id-like or date/time column). All of them for a model without that step."""
    plan = getattr(getattr(model, "named_steps", {}).get("prepare"), "plan_", None)
    if plan is None:
        return list(inputs)
    kept = {str(c) for c in plan.kept}
    return [c for c in inputs if str(c) in kept]


def check_batch(batch: pd.DataFrame, inputs: list[str], *, id_column: str | None,
                used: list[str] | None = None) -> pd.DataFrame:
    """Refuse a batch without rows, without one of the input columns the model uses (``used``, default every one
    of ``inputs``), or without its ``id_column``; returns the batch with an empty column for each input the model
    never uses that the batch lacks (retrain dropped it: an id or a date/time column), so it can be scored."""
    if batch.empty:
        raise ScoreInputError("the batch has no rows to score")
    needed = list(inputs) if used is None else list(used)
    missing = [c for c in needed if c not in batch.columns]
    if missing:
        extra = [c for c in batch.columns if c not in inputs and c != id_column]
        also = f"; only in the batch: {quote_list(extra[:10])}" if extra else ""
        raise ScoreInputError(f"the batch lacks {len(missing)} of the {len(needed)} input columns the model uses: "
                              f"{quote_list(missing)}{also}; score a table with the columns the model was trained "
                              "on (rename a column that was renamed)")
    if id_column is not None and id_column not in batch.columns:
        raise ScoreInputError(f"--id-column {quote(id_column)} is not a column of the batch")
    absent = [c for c in inputs if c not in batch.columns]
    return batch.assign(**{c: np.nan for c in absent}) if absent else batch


def _out_target(out: str) -> tuple[str, Any]:
    kind, _, rest = (out or "").partition(":")
    if kind == "file" and rest:
        path = Path(rest).expanduser()
        if path.suffix.lower() not in (".parquet", ".csv"):
            raise ScoreInputError(f"--out {quote(out)} must end in .parquet or .csv ({OUT_FORMS})")
        return "file", path
    if kind == "sql" and rest:
        spec = parse_sql_spec(out)
        if not spec.is_table:
            raise ScoreInputError(f"--out {quote(mask_secrets(out))} must name a table to create, not a query")
        return "sql", spec
    raise ScoreInputError(f"--out {quote(mask_secrets(out or ''))} is not one of {OUT_FORMS}")


def check_out(out: str, *, overwrite: bool) -> None:
    """Refuse, before anything is scored, an output that exists: a file unless ``overwrite``, a SQL table
    always (shiftflow creates its table and never changes one that is there)."""
    kind, where = _out_target(out)
    if kind == "file":
        if where.exists() and not overwrite:
            raise ScoreInputError(f"--out {where} exists; pass --overwrite to replace it, or name another file")
        blocked = next((d for d in (where.parent, *where.parent.parents) if d.exists() and not d.is_dir()), None)
        if blocked is not None:
            raise ScoreInputError(f"--out {where}: {blocked} is a file, not a folder; name another path")
        return
    import sqlalchemy as sa
    from sqlalchemy.exc import SQLAlchemyError

    schema, _, table = where.what.rpartition(".")
    try:
        exists = sa.inspect(sql_engine(where)).has_table(table.strip('"'), schema=schema.strip('"') or None)
    except SQLAlchemyError as exc:
        raise ScoreInputError(f"cannot reach the database of --out {quote(mask_secrets(out))}: "
                              f"{mask_secrets(str(getattr(exc, 'orig', exc)))[:200]}") from None
    if exists:
        raise ScoreInputError(f"table {where.what} exists in {mask_secrets(where.url)}; shiftflow writes scores "
                              "to a new table: name another (it never changes a table that is there)")


def score_frame(model: Any, batch: pd.DataFrame, inputs: list[str], *, version: str, id_column: str | None,
                chunk_rows: int = CHUNK_ROWS) -> tuple[pd.DataFrame, np.ndarray]:
    """Score every row of ``batch`` with ``model`` (a ``shiftlib.serving.ServedModel``) in chunks: the scores
    table (module docstring) and the probabilities in class-code order (what the monitor reads)."""
    if not hasattr(model, "predict_labeled"):
        raise ScoreInputError(f"v{version} was registered before models carried their class labels; register a "
                              "new version with shiftflow retrain, then score with it")
    parts = [model.predict_labeled(batch[inputs].iloc[i:i + chunk_rows]) for i in range(0, len(batch), chunk_rows)]
    scored = pd.concat(parts, ignore_index=True)
    probs = [c for c in scored.columns if c.startswith("proba_")]
    codes = np.asarray(model.classes_).astype(int)
    proba = np.zeros((len(scored), int(codes.max()) + 1))
    proba[:, codes] = scored[probs].to_numpy(float)
    key = (batch[id_column].reset_index(drop=True).rename(id_column) if id_column
           else pd.Series(np.arange(len(batch)), name="row"))
    return pd.concat([key, scored.assign(model_version=str(version))], axis=1), proba


def write_scores(table: pd.DataFrame, out: str, *, overwrite: bool) -> str:
    """Write the scores to ``out`` (Parquet and CSV files atomically; a new SQL table); returns where, masked."""
    check_out(out, overwrite=overwrite)
    kind, where = _out_target(out)
    if kind == "file":
        where.parent.mkdir(parents=True, exist_ok=True)
        if where.suffix.lower() == ".parquet":
            write_parquet_atomic(table, where)
        else:
            from tasks.store import write_bytes_atomic

            write_bytes_atomic(table.to_csv(index=False).encode(), where)
        return str(where.resolve())
    schema, _, name = where.what.rpartition(".")
    table.to_sql(name.strip('"'), sql_engine(where), schema=schema.strip('"') or None, if_exists="fail",
                 index=False, chunksize=10_000)
    return mask_secrets(out)


def log_monitor(client: MlflowClient, run_id: str, monitor: Any, *, model: str, version: str,
                min_accuracy: float | None) -> None:
    """The monitor's numbers and verdicts on the score run: metrics as the retrain's parent run names them,
    tags ``shiftflow.estimate.overlap``, ``shiftflow.estimate.regime`` (as a retrain's parent run), ``shiftflow.drift``
    and, with the alert, ``shiftflow.alert``; events
    ``shiftflow.alert.accuracy`` (the interval wholly below ``min_accuracy``) and ``shiftflow.drift``."""
    from tasks.events import emit

    log_metrics(client, run_id, monitor.metrics(), skip_missing=True)
    tags = {"estimate.method": monitor.method, "shiftflow.estimate.overlap": monitor.overlap.verdict,
            "shiftflow.drift": "drift" if monitor.drifted else "no drift",
            "shiftflow.estimate.regime": "unknown" if monitor.regime is None else monitor.regime.regime}
    if monitor.alert:
        tags["shiftflow.accuracy"] = monitor.alert
    if monitor.alert == "below":
        tags["shiftflow.alert"] = "accuracy"
    for k, v in tags.items():
        with_retries(client.set_tag, run_id, k, v)
    log = run_logger()
    payload = {"version": version, "estimate": monitor.accuracy, "ci_low": monitor.ci_low,
               "ci_high": monitor.ci_high, "mlflow_run_id": run_id, "kind": "score"}
    if monitor.alert == "below":
        log.warning("accuracy alert: %s v%s's estimated accuracy on this batch has upper bound %.3f < "
                    "min_accuracy %.3f", model, version, monitor.ci_high, min_accuracy)
        emit("shiftflow.alert.accuracy", model, payload | {"min_accuracy": float(min_accuracy or 0.0)})
    elif monitor.alert == "straddles":
        log.warning("accuracy: %s v%s's interval [%.3f, %.3f] straddles min_accuracy %.3f: it may be below; "
                    "label some of the batch to know", model, version, monitor.ci_low, monitor.ci_high,
                    min_accuracy)
    if monitor.drifted:
        emit("shiftflow.drift", model, payload | {"drift_pvalue": monitor.drift_pvalue,
                                                  "domain_auc": monitor.overlap.domain_auc})
    if monitor.overlap.verdict == "poor":
        log.warning("score: %s", monitor.overlap.sentence())


def load_version(ref: ModelRef, version: Any) -> Any:
    """The version's scikit-learn model (a ``shiftlib.serving.ServedModel``)."""
    import mlflow.sklearn

    return with_retries(mlflow.sklearn.load_model, f"models:/{ref.name}/{version.version}")


@task(name="score", cache_policy=NO_CACHE)
def score(model: Any, version: Any, batch: pd.DataFrame, inputs: list[str], *,
          id_column: str | None) -> tuple[pd.DataFrame, np.ndarray]:
    """Score the batch (checked by :func:`check_batch`) on the version's ``inputs``: (scores table, probabilities).
    Writes nothing, so the flow calls it before it logs a run: a refusal here (:func:`score_frame`) leaves none."""
    return score_frame(model, batch, inputs, version=str(version.version), id_column=id_column)


@task(name="monitor", cache_policy=NO_CACHE)
def monitor(version: Any, model: Any, batch: pd.DataFrame, inputs: list[str], proba: np.ndarray, *,
            max_rows: int | None,
            min_accuracy: float | None, seed: int) -> Any:
    """``shiftlib.monitoring.monitor_batch`` on a seeded sample of the batch, from the evidence the version keeps
    (``tasks.champion.read_evidence``); None, with a warning, for a version without it or without a
    ``prepare`` step."""
    from shiftlib.monitoring import monitor_batch, monitor_rows
    from tasks.champion import read_evidence

    found = read_evidence(version)
    prepare = getattr(model, "named_steps", {}).get("prepare")
    if isinstance(found, str) or prepare is None:
        run_logger().warning("score: no accuracy estimate for this batch: %s",
                             found if isinstance(found, str) else "the model has no 'prepare' step")
        return None
    stored, X_source = found
    rows = monitor_rows(len(batch), max_rows=max_rows, random_state=seed)
    raw = batch[inputs].iloc[rows]
    return monitor_batch(stored, proba[rows], X_source, prepare.transform(raw), min_accuracy=min_accuracy,
                         random_state=seed, unseen=unseen_rows(raw, prepare))


def unseen_rows(raw: pd.DataFrame, prepare: Any) -> Any:
    """Batch rows with a level of a text column the served version's source never had
    (``shiftlib.decisions.unseen_levels``, which leaves out a column at the encoder's cap), from the levels its
    encoder learnt (``prepare.plan_.encodings``); None without them."""
    from shiftlib.decisions import unseen_levels

    plan = getattr(prepare, "plan_", None)
    return None if plan is None else unseen_levels(raw, plan.encodings, max_levels=getattr(prepare, "max_levels", None))
