"""The ingest stage's work without Prefect or files written: read both tables, drop columns, check the labels,
apply a simulated bias, encode with ``shiftlib.ingest``. The ingest task and the CLI/flow preflight call the
same function, so a preflight that passes means ingest will pass. ``read_filled`` reads a filled labels file
(the labels stage and the preflight share it, so a bad file is refused before any stage runs)."""

from __future__ import annotations

import hashlib
import threading
import warnings
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from shiftlib.ingest import (
    CheckedTables,
    IngestError,
    PreparedData,
    RepeatedUnits,
    check_labels,
    check_tables,
    drop_unlabeled,
    repeated_units,
    spelling_hint,
)
from tasks.sources import SourceSpecError, estimated_bytes, read_file, read_table, split_options

ROW, LABEL = "_row", "_label"


@dataclass(frozen=True)
class Inputs:
    """Raw tables as read (for hashing), the encoded tables (with their fitted preprocessor), the simulated
    bias, read notes and ``example``: the first raw target rows with the source's feature columns (label
    excluded), as a served model takes them. ``target_table``: the target rows in the encoded target's order,
    as the user gave them (after ``drop_columns`` and a simulated bias; the id column and the label, if
    present, still in it); ``source_table``: the source rows in the encoded source's order, as the user gave
    them (after ``drop_columns``, rows without a label and a simulated bias; the id column dropped);
    ``source_groups``: the ``group_column``'s value of each source row, in the same order (None without one)."""

    raw_source: pd.DataFrame
    raw_target: pd.DataFrame | None
    prepared: PreparedData | CheckedTables
    bias_info: dict[str, Any] | None
    p_select: np.ndarray | None
    notes: tuple[str, ...]
    example: pd.DataFrame
    target_ids: pd.Series | None = None
    target_table: pd.DataFrame | None = None
    source_table: pd.DataFrame | None = None
    source_groups: pd.Series | None = None


EXAMPLE_ROWS = 5  # raw target rows kept as the served model's input example


def available_memory_gib() -> float:
    """RAM this process may still use, in GiB: the kernel's available memory, capped by a cgroup (v2) limit."""
    import os

    avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        with open("/proc/meminfo") as f:  # MemAvailable counts reclaimable cache, as `free` does
            avail = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        with open("/sys/fs/cgroup/memory.current") as f:
            used = int(f.read().strip())
        if limit != "max":
            avail = min(avail, int(limit) - used)
    except (OSError, ValueError):
        pass
    return max(avail, 0) / 2**30


def table_stamp(spec: str | None) -> tuple[str, tuple[int, int] | None] | None:
    """A ``file:`` table's path with its size and mtime (None for a missing file), None for other specs: an
    unchanged stamp means the file need not be read again."""
    if not spec or not spec.startswith("file:"):
        return None
    path = Path(spec[5:].rpartition("?")[0] or spec[5:]).expanduser()
    st = path.stat() if path.is_file() else None
    return str(path), None if st is None else (st.st_size, st.st_mtime_ns)


Tables = tuple[pd.DataFrame, pd.DataFrame | None, tuple[str, ...]]
# the tables the preflight read, kept for this process's ingest (read_inputs(keep=True)): one slot, taken once
_HANDOVER: dict[tuple[Any, ...], Tables] = {}
_HANDOVER_LOCK = threading.Lock()


def _handover_key(source_spec: str, target_spec: str | None, label: str) -> tuple[Any, ...]:
    return source_spec, target_spec, label, table_stamp(source_spec), table_stamp(target_spec)


def read_inputs(source_spec: str, target_spec: str | None, label: str,
                simulate_bias: dict[str, Any] | None, *, max_memory: float | None = None, keep: bool = False
                ) -> Tables:
    """Read the source and (when named) target tables; refuse a run with neither a target nor a bias, and,
    before reading, tables whose run would take more than ``max_memory`` GiB (``shiftlib.budget.check_memory``;
    default: half the RAM available).

    Inputs are read once per run: the preflight reads with ``keep=True``, and this process's next read of the
    same tables (same specs and label; a ``file:`` table with the same size and mtime) takes them instead of
    reading again, so the ingest stage encodes the very rows the preflight checked. A table given by reference
    (SQL, a URL) is taken as the preflight read it a few seconds earlier. Only one pair is kept, and it is
    dropped when taken."""
    key = _handover_key(source_spec, target_spec, label)
    with _HANDOVER_LOCK:
        kept = _HANDOVER.pop(key, None)
    if kept is not None:
        return kept
    tables = _read_inputs(source_spec, target_spec, label, simulate_bias, max_memory)
    if keep:
        with _HANDOVER_LOCK:
            _HANDOVER.clear()
            _HANDOVER[key] = tables
    return tables


def discard_kept() -> None:
    """Drop the tables a preflight kept for ingest (``read_inputs(keep=True)``): the preflight refused them."""
    with _HANDOVER_LOCK:
        _HANDOVER.clear()


def _read_inputs(source_spec: str, target_spec: str | None, label: str, simulate_bias: dict[str, Any] | None,
                 max_memory: float | None) -> Tables:
    from shiftlib.budget import check_memory

    sizes = [estimated_bytes(source_spec), estimated_bytes(target_spec) if target_spec != source_spec else 0.0]
    if any(b is not None for b in sizes):
        check_memory(sum(b for b in sizes if b is not None), max_memory,
                     available_gib=None if max_memory is not None else available_memory_gib())
    src = read_table(source_spec, label=label)
    tgt = read_table(target_spec, label=label) if target_spec else None
    if tgt is None and simulate_bias is None:
        raise IngestError("no target given: name a target table (--target) or pass --simulate-bias with a "
                          "mechanism to split the source into a biased source and a target")
    return src.frame, None if tgt is None else tgt.frame, src.notes + (() if tgt is None else tgt.notes)


def biased_split(
    source: pd.DataFrame, target: pd.DataFrame | None, label: str, bias: dict[str, Any], seed: int
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any], np.ndarray]:
    """Apply a known selection to the source (or split one table); returns P(s=1|x,y) of kept rows.

    A mechanism's refusal (unknown name, bad parameter, a selection leaving one class) is an ``IngestError``
    naming ``simulate_bias``."""
    from shiftlib.bias import apply_bias, split_biased

    X = source.drop(columns=[label])
    y = source[label].to_numpy()
    params = dict(bias.get("params", {}))
    try:
        if target is not None:
            sel = apply_bias(bias["mechanism"], X, y, random_state=seed, **params)
            info = {"mechanism": sel.mechanism, "params": sel.params, "n_selected": sel.n_selected,
                    "n_population": len(source), "target": "given"}
            return source.iloc[sel.indices].reset_index(drop=True), target, info, sel.p_select
        split = split_biased(X, y, bias["mechanism"], random_state=seed, **params)
    except (ValueError, TypeError, KeyError) as exc:
        raise IngestError(f"simulate_bias {bias.get('mechanism')!r}: {exc}") from exc
    info = {"mechanism": split.selection.mechanism, "params": split.selection.params,
            "n_selected": int(len(split.source)), "n_population": len(source), "target": split.target_kind}
    return (
        source.iloc[split.source].reset_index(drop=True),
        source.iloc[split.target].reset_index(drop=True),
        info,
        split.p_source,
    )


@dataclass(frozen=True)
class IngestOptions:
    """How ingest reads the tables: positive label, simulated bias, seed, dropped columns, level limit, row key."""

    positive_label: Any = None
    simulate_bias: dict[str, Any] | None = None
    seed: int = 0
    drop_columns: tuple[str, ...] = ()
    max_levels: int = 20
    id_column: str | None = None
    group_column: str | None = None


def prepare_inputs(
    raw_source: pd.DataFrame,
    raw_target: pd.DataFrame | None,
    label: str,
    *,
    options: IngestOptions | None = None,
    notes: tuple[str, ...] = (),
    encode: bool = True,
) -> Inputs:
    """Validate and encode raw tables exactly as the ingest stage does (with ``options``, default
    ``IngestOptions()``); raises ``IngestError``.

    ``encode=False`` (the preflight) makes every check and decision but fits no encoder: ``prepared`` is then
    ``shiftlib.ingest.CheckedTables`` and nothing imports scikit-learn."""
    opts = options or IngestOptions()
    drop_columns, simulate_bias = opts.drop_columns, opts.simulate_bias
    source, target = raw_source, raw_target
    # a column to drop may be in one table only (e.g. a timestamp only the batch carries), but not in neither
    present = set(source.columns) | (set(target.columns) if target is not None else set())
    absent = sorted(set(drop_columns or []) - present)
    if absent:
        raise IngestError(f"drop_columns names {absent}, which neither table has; the columns are "
                          f"{sorted(map(str, present))[:20]}")
    if drop_columns:
        source = source.drop(columns=list(drop_columns), errors="ignore")
        target = target.drop(columns=list(drop_columns), errors="ignore") if target is not None else None
    source, unlabeled = drop_unlabeled(source, label)
    if unlabeled is not None:
        warnings.warn(unlabeled, UserWarning, stacklevel=2)
    check_labels(source, label)  # before a simulated bias needs the labels
    bias_info, p_select = None, None
    if simulate_bias is not None:
        source, target, bias_info, p_select = biased_split(source, target, label, simulate_bias, opts.seed)
    if target is None:
        raise IngestError("no target given: name a target table (--target) or pass --simulate-bias with a "
                          "mechanism to split the source into a biased source and a target")
    _check_readable_names(target, label)
    target_table = target
    source, target, target_ids = _split_ids(source, target, label, opts.id_column)
    if opts.group_column is not None and opts.group_column == opts.id_column:
        raise IngestError(f"{opts.group_column!r} is both id_column (the target's row key) and group_column (the "
                          "source's cases); name each its own column")
    source, target, source_groups = _split_groups(source, target, label, opts.group_column)
    if encode:  # scikit-learn only for tables that will be encoded: a preflight refusal stays fast
        from shiftlib.preprocessor import prepare_tables as prepare
    else:
        prepare = check_tables
    prepared = prepare(source, target, label, positive_label=opts.positive_label, max_levels=opts.max_levels)
    for reserved in (ROW, LABEL):
        if reserved in prepared.feature_columns:
            raise IngestError(f"a feature column is named {reserved!r}, a name shiftflow reserves; rename it")
    if source_groups is None and isinstance(prepared, CheckedTables):  # the preflight's notes: ingest, which runs
        for u in repeated_units(source, label, list(prepared.plan.dropped)):  # this again, logs its warnings at debug
            warnings.warn(repeated_units_sentence(u), UserWarning, stacklevel=2)
    example = target.drop(columns=[label], errors="ignore").head(EXAMPLE_ROWS).reset_index(drop=True)
    return Inputs(raw_source, raw_target, prepared, bias_info, p_select, notes, example, target_ids, target_table,
                  source, source_groups)


def repeated_units_sentence(u: RepeatedUnits) -> str:
    """What ``shiftlib.ingest.repeated_units`` found, and the fix (``--group-column``)."""
    return (f"the source rows look like repeated records of cases named by column {u.column!r}: {u.rows} rows share "
            f"{u.units} of its values, and within {u.constant:.0%} of those the label is the same ({u.chance:.0%} "
            "by chance). Random folds then put one case on both sides, and the cross-validation rates a learner "
            "that memorises cases too high, and the champion gate with it: if each value is one case (an event, "
            f"a person), pass --group-column {u.column} to keep each case's rows in one fold (the column then leaves "
            "the model's inputs: a new input schema, so a new registered model unless --model-name names one)")


def _split_groups(source: pd.DataFrame, target: pd.DataFrame, label: str,
                  group_column: str | None) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series | None]:
    """Take ``group_column`` out of the features: (source and target without it, the source's values)."""
    if group_column is None:
        return source, target, None
    groups = _key_values(source, group_column, label, "group_column", "source",
                         reserved="name the column that says which case each source row records",
                         empty="every row needs its case (fill it, or leave group_column unset)")
    return (source.drop(columns=[group_column]), target.drop(columns=[group_column], errors="ignore"),
            groups.astype("string"))


def _key_values(table: pd.DataFrame, column: str, label: str, option: str, which: str, *, reserved: str,
                empty: str) -> pd.Series:
    """``table``'s values of the key ``column`` (``option``: the setting that names it; ``which``: the table's
    name), refused when it is the label or a reserved name, absent, or empty in a row (``reserved`` and ``empty``:
    the fixes those refusals name)."""
    if column in (ROW, LABEL, label):
        raise IngestError(f"{option} {column!r} is the label or a name shiftflow reserves; {reserved}")
    if column not in table.columns:
        raise IngestError(f"{option} {column!r} is not a column of the {which} table; its columns are "
                          f"{[str(c) for c in table.columns][:20]}")
    values = table[column].reset_index(drop=True)
    if values.isna().any():
        raise IngestError(f"{option} {column!r} is empty in {int(values.isna().sum())} {which} rows: {empty}")
    return values


def _check_readable_names(target: pd.DataFrame, label: str) -> None:
    """The target's columns as ``labels/to_label.csv`` writes them (ingest's ``target_rows``): none named
    ``_row``, no two the same once written as text (e.g. 1 and '1' through the Python API)."""
    names = Counter(str(c) for c in target.columns if c != label)
    if ROW in names:
        raise IngestError(f"the target has a column named {ROW!r}, a name shiftflow reserves for its row key; rename it")
    same = sorted(n for n, k in names.items() if k > 1)
    if same:
        raise IngestError(f"the target's column names {same} coincide once written as text (e.g. 1 and '1'); "
                          "rename one of them")


def _split_ids(source: pd.DataFrame, target: pd.DataFrame, label: str,
               id_column: str | None) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series | None]:
    """Take the row key ``id_column`` out of the features: (source, target without it, the target's ids).
    The key must be a column of the target with one distinct, non-empty value per row."""
    if id_column is None:
        return source, target, None
    ids = _key_values(target, id_column, label, "id_column", "target", reserved="name the row-key column of the target",
                      empty="every row needs a key (or leave id_column unset: labels then match by row order)")
    dup = ids[ids.astype(str).duplicated()]
    if len(dup):
        raise IngestError(f"id_column {id_column!r} repeats values in the target (e.g. {str(dup.iloc[0])!r}), so "
                          "it is not a row key: name a unique column, or leave it unset (row order)")
    return source.drop(columns=[id_column], errors="ignore"), target.drop(columns=[id_column]), ids


class LabelsInputError(IngestError):
    """The label budget or the filled labels file cannot be used as given; the message names the fix."""


def check_label_budget(budget: Any, n_target: int) -> None:
    """shiftlib's budget check (``check_budget``) for the ``label_budget`` field, as a ``LabelsInputError``."""
    from shiftlib.selection.fewlabel import check_budget

    try:
        check_budget(budget, n_target, name="label_budget")
    except (TypeError, ValueError) as err:
        raise LabelsInputError(str(err)) from None


def _labels_spec(spec: str) -> tuple[Path, dict[str, str]]:
    """``file:PATH?options`` (the options as for ``file:`` tables), or a plain PATH taken literally."""
    if not spec.startswith("file:"):
        return Path(spec).expanduser(), {}
    try:
        path_text, opts = split_options(spec.removeprefix("file:"), spec)
    except SourceSpecError as err:
        raise LabelsInputError(f"target labels: {err}") from None
    return Path(path_text).expanduser(), opts


def labels_path(spec: str) -> Path:
    """The path of a filled labels file: ``file:PATH`` (without the reading options it may carry, ``?sep=;``)
    or a plain PATH (what the resume form accepts), taken literally."""
    return _labels_spec(spec)[0]


def read_labels_file(spec: str) -> pd.DataFrame:
    """The rows of a filled labels file, read as a ``file:`` table is (``tasks.sources``): a to_label.csv that a
    spreadsheet saved back with ``;``, a BOM or cp1252, as .xlsx, or as Parquet; lines with no cell filled
    (a spreadsheet's trailing blank rows) are dropped."""
    path, opts = _labels_spec(spec)
    if not path.exists():
        raise LabelsInputError(f"target labels file {path} does not exist: pass file:PATH of the filled "
                               "to_label.csv (or a Parquet or .xlsx file with the same columns)")
    try:
        df = read_file(path, opts, spec, other_as_csv=True).frame
    except SourceSpecError as err:
        raise LabelsInputError(f"target labels {err}") from None  # "file '…' is not …; <the fix>"
    return df.dropna(how="all")


def read_filled(spec: str, label: str, classes: list[Any], n_target: int) -> tuple[dict[int, int], int, str]:
    """Labels from a filled ``file:PATH`` (:func:`read_labels_file`): (row → class code, empty cells skipped,
    SHA-256 of the file's bytes)."""
    path = labels_path(spec)
    df = read_labels_file(spec)
    data = path.read_bytes()
    for col in (ROW, label):
        if col not in df.columns:
            raise LabelsInputError(f"{path} has no column {col!r}: keep the columns of to_label.csv ({ROW!r} and "
                             f"{label!r}) and fill in {label!r}")
    keys = pd.to_numeric(df[ROW], errors="coerce")
    bad = df.loc[keys.isna() | (keys < 0) | (keys >= n_target) | (keys % 1 != 0), ROW].tolist()
    if bad:
        raise LabelsInputError(f"{path}: row keys {bad[:5]} are not rows of this target batch (0 … "
                               f"{n_target - 1}); keep the {ROW!r} column of the file written for this configuration")
    if keys.duplicated().any():
        raise LabelsInputError(f"{path}: row keys {sorted(set(keys[keys.duplicated()].astype(int)))[:5]} occur "
                               "more than once; keep one line per row")
    filled = df[label].notna() & (df[label].astype(str).str.strip() != "")
    code = {str(c): i for i, c in enumerate(classes)}
    code |= {str(c).strip(): i for i, c in enumerate(classes)}  # cells are stripped; source spellings are unique
    values = df.loc[filled, label].astype(str).str.strip()
    # numbers read from CSV may come back as floats ("1.0"): compare through the source's spelling too
    values = values.map(lambda v: v if v in code else (str(int(float(v))) if _is_int(v) else v))
    unknown = sorted(set(values) - set(code))
    if unknown:
        raise LabelsInputError(f"{path}: label(s) {unknown[:5]} never occur in the source labels {classes}"
                               f"{spelling_hint(unknown, classes)}: no candidate can predict them; correct the labels")
    if not filled.any():
        raise LabelsInputError(f"{path}: no label is filled in ({len(df)} rows, column {label!r} empty): fill in "
                               "at least one label")
    labels = dict(zip(keys[filled].astype(int).tolist(), values.map(code).tolist(), strict=True))
    return labels, int((~filled).sum()), hashlib.sha256(data).hexdigest()


def filled_rows(spec: str, label: str) -> set[int]:
    """The row keys of a labels file with a filled label, read leniently (for diagnosing only)."""
    try:
        df = read_labels_file(spec)
        keys = pd.to_numeric(df[ROW], errors="coerce")
        return set(keys[keys.notna() & df[label].notna()].astype(int).tolist())
    except Exception:  # noqa: BLE001 - a diagnosis must not hide the error it explains
        return set()


def planned_rows(manifest: Path) -> set[int] | None:
    """The rows a stored label plan asked for, from its manifest's path (None when its plan.parquet cannot be
    read)."""
    try:
        return set(pd.read_parquet(manifest.parent / "plan.parquet")["row"].astype(int).tolist())
    except (OSError, ValueError, KeyError):
        return None


def check_plan_kind(run_root: Path, spec: str, label: str, *, seed: int, pair_plan: bool,
                    ingest: tuple[Mapping[str, Any], Mapping[str, str]] | None = None,
                    learners: Collection[str] | None = None, weighting: str | None = None) -> None:
    """Refuse a filled labels file in seconds when no label plan stored under ``run_root`` can be this run's: a plan
    is answered only by the code that wrote it, with the same seed, the same kind of plan (a pair or every
    candidate; ``tasks.labels`` keys plans so) and, given ``ingest`` (this run's ingest parameters and table hashes,
    ``tasks.ingest.ingest_identity``), the same ingested tables; given ``learners`` and ``weighting`` (None for
    ``auto``, which the drift stage settles), the same candidates: a plan reads every candidate's predictions, so
    another set of them can never take it. All are known before training. The plan the file answers is the one
    whose stage folder holds it (filled in place), else the one holding most of its labeled rows (the newest among
    equals), and the message names what differs. Whether a plan that passes is this configuration's (the same
    predictions) needs the training stage, so ``tasks.labels.read_labels`` checks that. Raises
    ``LabelsInputError``."""
    import json

    from tasks.store import MANIFEST, code_version, stage_manifests

    now = code_version()
    manifests = []
    for m in stage_manifests(run_root, "labels"):
        try:
            man = json.loads(m.read_text())
        except (OSError, ValueError):
            continue
        params = man.get("params", {})
        if (man.get("code_version") == now and params.get("seed") == seed and ("pair" in params) == pair_plan
                and (ingest is None or not _ingest_diffs(_run_stage(m, "ingest"), ingest))
                and not _candidate_diffs(_run_stage(m, "training"), learners, weighting)):
            return
        manifests.append((m, man))
    rows = filled_rows(spec, label)  # only a refusal reads the rows: which plan the file answers
    own = labels_path(spec).resolve().parent / MANIFEST
    plans = [(m.resolve() == own, planned, m.stat().st_mtime, m, man) for m, man in manifests
             if (planned := planned_rows(m)) is not None]
    if not plans:
        return  # nothing readable to diagnose: the labels stage says what is missing
    in_place, planned, _, m, man = max(plans, key=lambda p: (p[0], len(p[1] & rows), p[2]))
    params = man.get("params", {})
    diffs = []
    if man.get("code_version") != now:
        diffs.append("the shiftflow code (changed since; a plan is answered with the code that wrote it)")
    if params.get("seed") != seed:
        diffs.append(f"the seed ({params.get('seed')} then, {seed} now)")
    if ("pair" in params) != pair_plan:
        kinds = ("--label-plan pair", "a plan over every candidate")
        then, now_kind = (kinds[0], kinds[1]) if "pair" in params else (kinds[1], kinds[0])
        diffs.append(f"the label plan ({then} then, {now_kind} now)")
    if ingest is not None:
        diffs += _ingest_diffs(_run_stage(m, "ingest"), ingest)
    diffs += _candidate_diffs(_run_stage(m, "training"), learners, weighting)
    whose = ("whose folder holds the file" if in_place else "whose rows the file holds" if rows and planned & rows
             else "the newest stored")
    raise LabelsInputError(f"{labels_path(spec)}: no label plan under the run root {run_root} can take it: the plan "
                           f"{whose} (run {man.get('run_id')}) differs from this run in {', '.join(diffs)}. Resume "
                           "with that run's configuration and shiftflow version, or plan anew with --label-budget "
                           "and fill the new file")


def _run_stage(labels_manifest: Path, stage: str) -> dict[str, Any]:
    """The ``stage`` manifest of the run folder holding a labels stage's manifest ({} when unreadable)."""
    import json

    try:
        return json.loads((labels_manifest.parent.parent / stage / labels_manifest.name).read_text())
    except (OSError, ValueError):
        return {}


def _candidate_diffs(then: Mapping[str, Any], learners: Collection[str] | None, weighting: str | None) -> list[str]:
    """What differs, in words, between a stored training manifest's candidates and this run's ``learners`` and
    ``weighting`` (None: not compared). Sets, not lists: another order of the same learners is left to the labels
    stage. [] when nothing differs or ``then`` records no candidates."""
    cands = then.get("params", {}).get("candidates") if isinstance(then.get("params"), Mapping) else None
    if not isinstance(cands, list) or not all(isinstance(c, Mapping) for c in cands):
        return []
    # the candidates asked for: those fitted and those skipped (extra["skipped"]: "LR" or "LR+kmm" → why), so a
    # candidate that could not be fitted then is no difference now (helper-40)
    skipped = [str(n).split("+", 1) for n in (then.get("extra") or {}).get("skipped", {})]
    cands = [*cands, *({"learner": n[0], "weighting": n[1] if len(n) > 1 else "none"} for n in skipped)]
    out = []
    names = {str(c.get("learner")) for c in cands}
    if learners is not None and names != set(learners):
        out.append(f"the learners ({', '.join(sorted(names, key=str.lower))} then, "
                   f"{', '.join(sorted(set(learners), key=str.lower))} now)")
    from shiftlib.learners import LEARNERS, make_learner, needs_target

    methods = {str(c.get("weighting")) for c in cands} - {"none"}
    weighted = any(not needs_target(make_learner(n)) for n in names & set(LEARNERS))  # CSLR has no weighted variant
    if weighting is not None and weighted and methods != {weighting} - {"none"}:
        out.append(f"the weighting ({', '.join(sorted(methods)) or 'none'} then, {weighting} now)")
    return out


def _ingest_diffs(then: Mapping[str, Any], now: tuple[Mapping[str, Any], Mapping[str, str]]) -> list[str]:
    """What differs, in words, between a stored ingest manifest and this run's (parameters, table hashes) in what
    the ingested tables are made of: the tables' contents and the settings, not where the tables were read from
    (the same rows under another path make the same plan). [] when nothing differs or ``then`` is unreadable."""
    if not then:
        return []
    names = {"source": "the source table", "target": "the target batch"}
    hashes = then.get("inputs", {})
    out = [f"{names.get(k, k)} (other rows or values)" for k in sorted(set(hashes) | set(now[1]))
           if hashes.get(k) != now[1].get(k)]
    params = then.get("params", {})
    return out + [f"the setting {k} ({params.get(k)!r} then, {now[0].get(k)!r} now)"
                  for k in sorted(set(params) | set(now[0]))
                  if k not in ("source", "target", "seed") and params.get(k) != now[0].get(k)]  # seed: said above


def _is_int(v: str) -> bool:
    try:
        return float(v) == int(float(v))
    except (ValueError, OverflowError):
        return False
