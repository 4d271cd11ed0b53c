"""Stage ``ingest``: load the source and target tables, (optionally) simulate a selection bias, validate
and encode with ``shiftlib.ingest``, write ``source.parquet``, ``target.parquet``, ``target_rows.parquet``
(the target rows as the user gave them, label left out: what ``labels/to_label.csv`` shows a person),
``source_rows.parquet`` (the source rows so, which the gate scores the served champion on) and,
when the target carries labels, ``target_labels.parquet`` (evaluation only).

The fitted ``shiftlib.ingest.TablePreprocessor`` (raw rows → encoded features) and a few raw target rows go
beside it, in ``ingest_preprocessor/`` (``preprocessor.pkl``, ``raw_example.pkl``, a manifest with their
SHA-256, written before the ingest manifest and reused with it): training and recalibration put the
preprocessor in front of every model they log, so a served model scores raw rows."""

from __future__ import annotations

import hashlib
import json
import pickle
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE
from sklearn.pipeline import Pipeline

from shiftlib.budget import subsample
from shiftlib.ingest import LEAK_DEPTH, feature_origins, label_rule_columns
from tasks.inputs import LABEL, ROW, IngestError, IngestOptions, prepare_inputs, read_inputs
from tasks.logs import run_logger
from tasks.sources import mask_secrets
from tasks.store import Read, StageOutput, StageStore
from tasks.tracking import dataset_name, mlflow_schema, with_retries

__all__ = ["INGESTED", "LABEL", "PREPROCESSOR_STAGE", "ROW", "SERVED_MODEL", "SOURCE", "TARGET", "TARGET_LABELS",
           "TARGET_ROWS", "SOURCE_ROWS", "IngestManifest", "IngestOptions", "SelectionData", "TableFile", "frame_hash", "ingest",
           "load_preprocessor", "load_raw_example", "load_target_labels", "load_xy", "read_ingest",
           "raw_input_schema", "readable_rows", "selection_data", "served_pipeline", "target_rows"]

STAGE = "ingest"
GROUPS = "source_groups"  # each source row's case (group_column), when the run names one
PREPROCESSOR_STAGE = "ingest_preprocessor"
PREPROCESSOR, RAW_EXAMPLE = "preprocessor.pkl", "raw_example.pkl"

# --- what later stages read of this one (``tasks.store.Read``): their inputs derive from these ---------------------
SOURCE = Read(STAGE, "source.parquet", "source")
TARGET = Read(STAGE, "target.parquet", "target")
#: each source row's case, when the run names a group_column: the folds keep a case whole (``selection_data``)
SOURCE_GROUPS = Read(STAGE, f"{GROUPS}.parquet", "groups", optional=True)
#: the encoded source and target batch (and the source's cases): every stage reads them (``load_xy``,
#: ``selection_data``), so a new batch never reuses a stage
INGESTED = (SOURCE, TARGET, SOURCE_GROUPS)
#: the held-out target labels (evaluation only), when the target had them
TARGET_LABELS = Read(STAGE, "target_labels.parquet", "labels", optional=True)
#: the target rows as the user gave them (``raw_target``; the labels stage's ``to_label.csv``)
TARGET_ROWS = Read(STAGE, "target_rows.parquet", None,
                   why="the same raw target table as target.parquet (the features' hash); the columns the "
                       "features leave out are not keyed (issue 30: stage keys kept as they were)")
#: the source rows as the user gave them, label left out (``tasks.served.raw_source``: the gate scores the served
#: champion on those it was never fitted on)
SOURCE_ROWS = Read(STAGE, "source_rows.parquet", None,
                   why="the same raw source table as source.parquet (the features' hash)")
#: what a logged model is made of (``served_pipeline``, ``load_raw_example``, ``raw_input_schema``)
SERVED_MODEL = (Read(PREPROCESSOR_STAGE, PREPROCESSOR, "preprocessor"),
                Read(PREPROCESSOR_STAGE, RAW_EXAMPLE, None,
                     why="written with the preprocessor from the same inputs: the logged model's input example"))


def _cell_bytes(v: Any) -> Any:
    """A cell pandas cannot hash (a list, array or dict) as the hex of its pickle; other cells as they are."""
    try:
        hash(v)
        return v
    except TypeError:
        return pickle.dumps(v, protocol=4).hex()


def frame_hash(df: pd.DataFrame) -> str:
    """Content hash of a raw table (values, column names and dtypes)."""
    h = hashlib.sha256()
    h.update(repr([(str(c), str(t)) for c, t in df.dtypes.items()]).encode())
    try:
        values = pd.util.hash_pandas_object(df, index=False)
    except TypeError:  # unhashable cells (Parquet lists, structs) in a column drop_columns removes: their pickled bytes
        # (repr would shorten a long array, so two tables could share a hash)
        values = pd.util.hash_pandas_object(df.apply(lambda c: c.map(_cell_bytes) if c.dtype == object else c),
                                            index=False)
    h.update(values.to_numpy().tobytes())
    return h.hexdigest()


@task(name="ingest", cache_policy=NO_CACHE)
def ingest(
    store: StageStore,
    source_spec: str,
    target_spec: str | None,
    label: str,
    *,
    options: IngestOptions | None = None,
) -> dict[str, Any]:
    """Returns the stage manifest (``extra`` holds classes, encodings and data hashes). ``options`` (default
    ``IngestOptions()``): how the tables are read. Its ``id_column``: a row key of the target, not a feature, kept
    beside ``_row`` in ``target.parquet`` for ``shiftflow evaluate --id-column`` (and first in
    ``target_rows.parquet``, so in the labels stage's ``to_label.csv``); None: rows are known by order."""
    log = run_logger()
    opts = options or IngestOptions()
    simulate_bias = opts.simulate_bias
    raw_source, raw_target, notes = read_inputs(source_spec, target_spec, label, simulate_bias)
    for note in notes:
        log.info("ingest: %s", note)
    params, hashes = ingest_identity(raw_source, raw_target, source_spec, target_spec, label, opts)
    # the fitted preprocessor is a companion stage: written first, reused only together with the tables
    return store.find_or_write(STAGE, params, (), lambda: _compute(raw_source, raw_target, label, opts, hashes),
                               also=hashes, companions=(PREPROCESSOR_STAGE,)).manifest


def ingest_identity(raw_source: pd.DataFrame, raw_target: pd.DataFrame | None, source_spec: str,
                    target_spec: str | None, label: str, opts: IngestOptions) -> tuple[dict[str, Any], dict[str, str]]:
    """The ingest stage's parameters and input hashes (its key, ``tasks.store.stage_key``, is made of them): the
    preflight compares them with a stored label plan's run before any stage runs."""
    # the raw tables' hashes: ingest reads no earlier stage, its inputs are the tables it is given
    hashes = {"source": frame_hash(raw_source)}
    if raw_target is not None:
        hashes["target"] = frame_hash(raw_target)
    # the manifest keeps the references without their passwords (tasks.sources.mask_secrets)
    params = {"source": mask_secrets(source_spec), "target": target_spec and mask_secrets(target_spec), "label": label,
              "positive_label": opts.positive_label, "simulate_bias": opts.simulate_bias, "seed": opts.seed,
              "drop_columns": sorted(opts.drop_columns or []), "max_levels": opts.max_levels}
    if opts.id_column is not None:  # only when set: runs without it keep their stage keys
        params["id_column"] = opts.id_column
    if opts.group_column is not None:
        params["group_column"] = opts.group_column
    return params, hashes


def _compute(raw_source: pd.DataFrame, raw_target: pd.DataFrame | None, label: str, opts: IngestOptions,
             hashes: dict[str, str]) -> StageOutput:
    """Validate and encode the raw tables: the stage's tables, and the fitted preprocessor as its companion."""
    log, id_column = run_logger(), opts.id_column
    with warnings.catch_warnings(record=True) as caught:  # the flow's preflight already warned of each
        warnings.simplefilter("always")
        inp = prepare_inputs(raw_source, raw_target, label, options=opts)
    for w in caught:  # the preflight turned the UserWarnings into the flow's warnings; pass the others on
        if issubclass(w.category, UserWarning):
            log.debug("ingest: %s", w.message)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    prepared, bias_info, p_select = inp.prepared, inp.bias_info, inp.p_select
    source = prepared.source_X.copy()
    source.insert(0, ROW, np.arange(len(source), dtype=np.int64))
    source[LABEL] = prepared.source_y
    target = prepared.target_X.copy()
    target.insert(0, ROW, np.arange(len(target), dtype=np.int64))
    if inp.target_ids is not None:
        if id_column in target.columns:
            raise IngestError(f"id_column {id_column!r} is also the name of an encoded feature column; rename it")
        target.insert(1, id_column, inp.target_ids.to_numpy())
    tables = {"source": source, "target": target, "target_rows": readable_rows(inp.target_table, label, id_column),
              "source_rows": readable_rows(inp.source_table, label)}
    if prepared.target_y is not None:
        tables["target_labels"] = pd.DataFrame({ROW: target[ROW], LABEL: prepared.target_y})
    if inp.source_groups is not None:  # each source row's case: the folds keep a case whole (selection_data)
        tables[GROUPS] = pd.DataFrame({ROW: source[ROW], "group": pd.factorize(inp.source_groups)[0]})
    if p_select is not None:  # the true P(s=1|x,y) of each source row: oracle weights, evaluation only
        tables["source_selection"] = pd.DataFrame({ROW: source[ROW], "p_select": p_select})
    extra = prepared.to_dict() | {"label": label, "bias": bias_info, "data_hashes": hashes,
                                  **_label_columns(prepared, opts.seed)}
    preprocessor = StageOutput(files={PREPROCESSOR: pickle.dumps(prepared.preprocessor, protocol=5),
                                      RAW_EXAMPLE: pickle.dumps(inp.example, protocol=5)},
                               extra={"raw_columns": [str(c) for c in inp.example.columns]})
    log.info("ingest: %d source rows, %d target rows, %d features%s", len(source), len(target),
             len(prepared.feature_columns), "; target labels held out for evaluation" if prepared.target_y is not None
             else "")
    return StageOutput(tables, extra=extra, before={PREPROCESSOR_STAGE: preprocessor})


def _label_columns(prepared: Any, seed: int) -> dict[str, Any]:
    """The two or more source columns the label follows from exactly (``shiftlib.ingest.label_rule_columns``),
    with a warning, and how many distinct rows of them the source holds (``label_units``: [distinct, rows]);
    ``label_columns`` [] otherwise (one such column is named at the door by ``check_tables``)."""
    origins = feature_origins(prepared.preprocessor.plan_)
    cols = label_rule_columns(prepared.source_X, prepared.source_y, origins, random_state=seed)
    if len(cols) < 2:
        return {"label_columns": []}
    names = [str(c) for c in cols]
    encoded = [c for c in prepared.source_X.columns if str(origins.get(str(c), c)) in names]
    units = [int(len(prepared.source_X[encoded].drop_duplicates())), int(len(prepared.source_X))]
    run_logger().warning("ingest: %s", label_rule_sentence(names, *units))
    return {"label_columns": names, "label_units": units}


def label_rule_sentence(columns: list[str], distinct: int | None = None, rows: int | None = None) -> str:
    """What to do when the label follows from ``columns`` (the run's log and the closing report say it alike).
    When the source's ``rows`` hold at most half as many ``distinct`` rows of those columns, the rows repeat: they
    may be repeated records of a few units (a professor's courses), whose label is the unit's own, and then the
    columns are no leak (helper-36's TeachingRatings run read as one)."""
    names = ", ".join(repr(c) for c in columns)
    out = (f"the label follows exactly from columns {names} (a tree of depth {LEAK_DEPTH} on them is right on every "
           "source row, and on all but a few out of fold): if it was computed from them, or they are recorded after "
           f"the outcome, every estimate will look perfect; then drop them (--drop-columns {','.join(columns)})")
    if distinct is not None and rows is not None and 2 * distinct <= rows:
        out += (f". But the {rows} source rows hold only {distinct} distinct values of them: if the rows are repeated "
                f"records of {distinct} units (people, firms, places), the label may be each unit's own and the columns "
                "no leak; keep them then, and know that the candidates' cross-validation sees each unit on both "
                "sides of a fold, so the source-side estimates are optimistic")
    return out


def readable_rows(table: pd.DataFrame, label: str, id_column: str | None = None) -> pd.DataFrame:
    """The target rows as the user gave them, for a person to read: ``_row``, the id column (if any), every
    other column but the label, in their order. Numbers, booleans and dates keep their type; any other column
    is written as text (missing stays missing), so a column of mixed Python objects still stores as Parquet."""
    cols = [c for c in table.columns if c != label]  # names checked at the door (tasks.inputs.prepare_inputs)
    if id_column is not None:
        cols = [id_column] + [c for c in cols if c != id_column]
    out = {ROW: np.arange(len(table), dtype=np.int64)}
    for c in cols:
        s = table[c].reset_index(drop=True)
        kept = (pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s)
                or pd.api.types.is_datetime64_any_dtype(s))
        out[str(c)] = s if kept else s.astype("string")
    return pd.DataFrame(out)


@dataclass(frozen=True)
class TableFile:
    """One Parquet file of a stage as its manifest lists it."""

    rows: int
    sha256: str
    schema: dict[str, str]


@dataclass(frozen=True)
class IngestManifest:
    """What the ingest stage's manifest says of the run's data (:func:`read_ingest`): the label and its classes
    in code order, the encoded feature columns, the source and target files, which optional tables it holds, the
    table references it was given (passwords masked) and the raw tables' hashes."""

    label: str | None
    classes: list[Any]
    feature_columns: list[str]
    source: TableFile | None
    target: TableFile | None
    has_target_labels: bool
    has_source_selection: bool
    source_ref: str | None
    target_ref: str | None
    id_column: str | None
    data_hashes: dict[str, str]
    label_columns: list[str] = field(default_factory=list)  # the label follows from them (``_label_columns``)
    label_units: list[int] = field(default_factory=list)  # [distinct rows of those columns, source rows]
    group_column: str | None = None  # each source row's case (``GROUPS``): not a feature

    @property
    def n_source(self) -> int:
        """Rows of the ingested source."""
        assert self.source is not None, "the ingest stage lists no source.parquet"
        return self.source.rows

    @property
    def n_target(self) -> int:
        """Rows of the ingested target batch."""
        assert self.target is not None, "the ingest stage lists no target.parquet"
        return self.target.rows


def read_ingest(store: StageStore) -> IngestManifest:
    """This run's ingest manifest, typed (the only reader of its keys)."""
    m = store.manifest(STAGE)
    files, extra, params = m["files"], m.get("extra", {}), m.get("params", {})

    def table(name: str) -> TableFile | None:  # None: the manifest lists no such table (a test's stand-in)
        e = files.get(f"{name}.parquet")
        return None if e is None else TableFile(int(e["rows"]), str(e["sha256"]), dict(e.get("schema", {})))

    return IngestManifest(label=extra.get("label"), classes=list(extra.get("classes", [])),
                          feature_columns=list(extra.get("feature_columns", [])), source=table("source"),
                          target=table("target"), has_target_labels="target_labels.parquet" in files,
                          has_source_selection="source_selection.parquet" in files,
                          source_ref=params.get("source"), target_ref=params.get("target"),
                          id_column=params.get("id_column"), data_hashes=dict(extra.get("data_hashes", {})),
                          group_column=params.get("group_column"),
                          label_columns=list(extra.get("label_columns", [])),
                          label_units=list(extra.get("label_units", [])))


def load_xy(store: StageStore) -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame]:
    """(X_source, y_source, X_target) from a finished ingest stage — never the target labels."""
    src = store.read_table(STAGE, "source")
    X_s = src.drop(columns=[ROW, LABEL])
    y_s = src[LABEL].to_numpy()
    del src  # one copy of the source at a time
    return X_s, y_s, store.read_table(STAGE, "target", columns=list(X_s.columns))


def source_labels(store: StageStore) -> np.ndarray:
    """The source's label codes from a finished ingest stage (its label column only)."""
    return store.read_table(STAGE, "source", columns=[LABEL])[LABEL].to_numpy()


def rule_classes(store: StageStore) -> list[Any]:
    """The majority-class rule's class and the classes tied with it in the source, by name
    (``shiftlib.decisions.rule_ties``: the rule's first)."""
    from shiftlib.decisions import rule_ties

    classes = read_ingest(store).classes
    return [classes[c] for c in rule_ties(source_labels(store), len(classes))]


def load_target_labels(store: StageStore) -> np.ndarray | None:
    """Held-out target labels (evaluation only), or None when the target had none."""
    if not read_ingest(store).has_target_labels:
        return None
    return store.read_table(STAGE, "target_labels", columns=[LABEL])[LABEL].to_numpy()


@dataclass(frozen=True)
class SelectionData:
    """The rows a selector (and the estimation stage) works on: every row for SCV and WCV (which score only
    ``scored_folds`` of their folds), a stratified subsample of at most ``rows`` source rows (positions
    ``source_rows`` in the ingested source) and at most ``rows`` target rows for RT and TrCV
    (``shiftlib.budget``)."""

    X_s: pd.DataFrame
    y_s: np.ndarray
    X_t: pd.DataFrame
    source_rows: np.ndarray
    groups: np.ndarray | None = None


def target_rows(n_target: int, seed: int, rows: int | None) -> np.ndarray:
    """Positions of the target rows the selection and estimation stages work on (every row when ``rows`` is
    None): what a later stage must take to line up with their stored predictions."""
    return subsample(n_target, rows, random_state=seed)


def selection_data(store: StageStore, seed: int, rows: int | None,
                   xy: tuple[pd.DataFrame, np.ndarray, pd.DataFrame] | None = None) -> SelectionData:
    """A stratified subsample of this run's ingested tables (every row when ``rows`` is None); ``xy``: what
    :func:`load_xy` returned, when the caller has read them already."""
    X_s, y_s, X_t = xy if xy is not None else load_xy(store)
    i_s = subsample(len(y_s), rows, y=y_s, random_state=seed)
    i_t = target_rows(len(X_t), seed, rows)
    groups = source_groups(store)
    return SelectionData(X_s.iloc[i_s].reset_index(drop=True), y_s[i_s], X_t.iloc[i_t].reset_index(drop=True), i_s,
                         None if groups is None else groups[i_s])


def source_groups(store: StageStore) -> np.ndarray | None:
    """Each ingested source row's case (``group_column``, coded 0, 1, …), or None when the run names none."""
    if f"{GROUPS}.parquet" not in store.manifest(STAGE)["files"]:
        return None
    return store.read_table(STAGE, GROUPS).sort_values(ROW)["group"].to_numpy(np.int64)


def load_preprocessor(store: StageStore) -> Any:
    """The ingest stage's fitted ``TablePreprocessor`` (raw rows with the source's columns → encoded features)."""
    return pickle.loads(store.read_bytes(PREPROCESSOR_STAGE, PREPROCESSOR))


def served_pipeline(store: StageStore, model: Any) -> Pipeline:
    """The model as served (``shiftlib.serving.ServedModel``): ingest's fitted preprocessor, then ``model``
    (fitted on the encoded source), with the source's class labels in code order."""
    from shiftlib.serving import ServedModel

    return ServedModel([("prepare", load_preprocessor(store)), ("model", model)],
                       class_labels=list(read_ingest(store).classes))


def load_raw_example(store: StageStore) -> pd.DataFrame:
    """The first raw target rows (source feature columns, label excluded): a served model's input example."""
    return pickle.loads(store.read_bytes(PREPROCESSOR_STAGE, RAW_EXAMPLE))


def raw_input_schema(store: StageStore) -> Any:
    """The served model's input schema: every source feature column, required, typed by how the preprocessor
    reads it — ``boolean``, ``string`` for text, and MLflow's ``any`` for numbers and other kinds, because
    MLflow refuses int64 → double and float64 → long, and a raw integer column arrives as floats as soon as a
    batch has a missing value; the preprocessor then checks the kind itself, with its own message."""
    from mlflow.types.schema import AnyType, ColSpec, Schema

    example, kinds = load_raw_example(store), load_preprocessor(store).kinds_
    specs = []
    for c in example.columns:
        textual = pd.api.types.is_string_dtype(example[c]) or example[c].dtype == object
        kind = {"boolean": "boolean", "text": "string" if textual else None}.get(kinds[c])
        specs.append(ColSpec(kind or AnyType(), str(c), required=True))
    return Schema(specs)


def data_inputs(ing: IngestManifest) -> list[Any]:
    """The ingest stage's source and target (``tasks.ingest.read_ingest``) as MLflow dataset inputs
    (``mlflow.entities.DatasetInput``).

    Source: the table reference the run was given (passwords masked); digest: the first 16 hex digits
    of the ingest Parquet file's SHA-256 (MLflow stores a dataset digest in 36 characters; the full hash
    is in the profile and in the run's ``ingest.*_parquet_sha256`` tags); context ``training`` for the
    labeled source, ``target`` for the unlabeled batch."""
    from mlflow.entities import Dataset, DatasetInput, InputTag
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    source_ref = mask_secrets(str(ing.source_ref))
    target_ref = ing.target_ref
    refs = {"source": (source_ref, dataset_name(source_ref), "training", ing.source),
            "target": ((mask_secrets(str(target_ref)), dataset_name(mask_secrets(str(target_ref))), "target", ing.target)
                       if target_ref else (source_ref, f"{dataset_name(source_ref)} (split)", "target", ing.target))}
    out = []
    for role, (ref, name, context, entry) in refs.items():
        if entry is None:
            raise FileNotFoundError(f"the ingest stage lists no {role}.parquet")
        schema = entry.schema
        profile = {"num_rows": entry.rows, "num_elements": entry.rows * len(schema), "sha256": entry.sha256}
        ds = Dataset(name=name, digest=entry.sha256[:16], source_type="shiftflow",
                     source=json.dumps({"uri": ref, "role": role}), schema=mlflow_schema(schema),
                     profile=json.dumps(profile))
        out.append(DatasetInput(ds, tags=[InputTag(MLFLOW_DATASET_CONTEXT, context)]))
    return out


def log_data_inputs(tracking_uri: str, run_id: str, ing: IngestManifest) -> list[Any]:
    """Log the run's source and target (``data_inputs``) on ``run_id``: the MLflow UI's Dataset column and
    the run page's "Datasets used" show them. Returns the dataset inputs logged."""
    inputs = data_inputs(ing)
    from mlflow.tracking import MlflowClient

    with_retries(MlflowClient(tracking_uri).log_inputs, run_id, datasets=inputs)
    return inputs
