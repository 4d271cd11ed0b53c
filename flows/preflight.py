"""Preflight: every check of a retrain run that needs no Prefect server and no MLflow store, run before either.

``preflight(config)`` reads both tables and runs the ingest stage's own validation in memory
(``tasks.inputs.prepare_inputs``: label column, classes, NaN labels, columns that match, levels, ±inf, the
simulated bias), then the size rules of ``shiftlib.requirements`` (drift's rows per side, the folds of the
source CV and of the selectors, learners with an inner CV). It writes nothing and imports neither Prefect nor
MLflow, so the CLI refuses bad input in seconds; the flow calls it again at its start, so a run triggered
from the Prefect UI fails with the same sentence before it touches MLflow or the run folder. The tables it
read are kept for this process's ingest stage (``tasks.inputs.read_inputs(keep=True)``), which takes them
instead of reading them again: a run reads its inputs once.

A refusal is a ``ShiftflowInputError`` (``IngestError``, ``SourceSpecError``, ``ConfigError``) whose message
is one sentence naming the problem and the fix.
"""

from __future__ import annotations

import difflib
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from flows.config import BiasSpec, RetrainConfig
from shiftlib.errors import ShiftflowInputError
from shiftlib.ingest import LabelColumnError

__all__ = ["Checked", "ConfigError", "bias_label", "config_error_sentence", "preflight"]


class ConfigError(ShiftflowInputError):
    """Run parameters that cannot be used (bad JSON, an unknown key, a value out of range)."""


def config_error_sentence(exc: ValidationError) -> str:
    """One line from a pydantic ``ValidationError``: ``invalid configuration: <field>: <problem>; ...``.

    Our own validators' sentences (``Value error, ...``) are kept as written; in a union field (e.g.
    ``simulate_bias``: a BiasSpec, 'auto' or null) the branch that could not match is left out when another
    branch says what is wrong."""
    errors = exc.errors(include_url=False)
    items = []
    for e in errors:
        loc = ".".join(str(p) for p in e["loc"] if not (isinstance(p, str) and (
            p[:1].isupper() or p.startswith(("literal[", "function-", "constrained-")) or p in ("str", "int", "float",
                                                                                          "none", "bool"))))
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] in ("literal_error", "enum"):
            msg += f" (got {e['input']!r})"
        items.append((loc, e["type"], msg))
    specific = {loc for loc, typ, _ in items if typ == "value_error"}
    kept, seen = [], set()
    for loc, typ, msg in items:
        if loc in specific and typ != "value_error":
            continue
        if (loc, msg) in seen:
            continue
        seen.add((loc, msg))
        kept.append(f"{loc}: {msg}" if loc else msg)
    return "invalid configuration: " + "; ".join(kept)


def bias_label(spec: BiasSpec | None) -> str:
    """``none`` or ``rt_sort {}``: the simulated bias as a run prints and tags it."""
    return "none" if spec is None else f"{spec.mechanism} {spec.params}"


@dataclass(frozen=True)
class Checked:
    """A configuration that passed preflight: ``config`` has ``simulate_bias`` resolved (never 'auto') and only
    the learners that can be fitted; ``notes`` are the lines to show (read fallbacks, dropped learners)."""

    config: RetrainConfig
    bias: str
    notes: tuple[str, ...]
    n_source: int
    n_target: int


def _check_mechanism(spec: BiasSpec) -> None:
    from shiftlib.bias import BIAS_MECHANISMS

    if spec.mechanism not in BIAS_MECHANISMS:
        near = difflib.get_close_matches(spec.mechanism, list(BIAS_MECHANISMS), n=1)
        raise ConfigError(
            f"simulate_bias: unknown mechanism {spec.mechanism!r}"
            + (f" (did you mean {near[0]!r}?)" if near else "")
            + f"; choose one of {sorted(BIAS_MECHANISMS)} or 'none'"
        )


def _positive_label(value: Any, classes: list[Any]) -> Any:
    """The CLI passes ``--positive-label 1`` as text; match it to a numeric class when exactly one fits."""
    if value is None or value in classes:
        return value
    matches = [c for c in classes if str(c) == str(value)]
    return matches[0] if len(matches) == 1 else value


_PASSED: dict[tuple[str, tuple[Any, ...]], Checked] = {}  # this process's passed checks (the CLI, then the flow)


def _memo_key(config: RetrainConfig) -> tuple[str, tuple[Any, ...]]:
    """The configuration and the size and mtime of its ``file:`` tables: an unchanged pair needs no re-read."""
    from tasks.inputs import table_stamp

    return config.model_dump_json(), tuple(s for s in map(table_stamp, (config.source, config.target)) if s)


def preflight(config: RetrainConfig) -> Checked:
    """Check ``config`` and its tables without Prefect or MLflow (see the module docstring); raises
    ``ShiftflowInputError`` with one sentence. Returns the configuration the run should use.

    A check that passed in this process is not repeated for the same configuration and unchanged files (the
    CLI checks before starting the flow, and the flow checks again at its start)."""
    key = _memo_key(config)
    if key in _PASSED:
        return _PASSED[key]
    try:
        checked = _preflight(config)
    except LabelColumnError as exc:
        from tasks.inputs import discard_kept

        discard_kept()
        if "label" in config.model_fields_set:
            raise
        raise LabelColumnError(f"no --label was given, so the label is the default {config.label!r}, the embedded "
                               f"example's: {exc}") from None
    except BaseException:
        from tasks.inputs import discard_kept

        discard_kept()  # a refused run never reaches ingest: do not hold its tables
        raise
    _PASSED[key] = _PASSED[_memo_key(checked.config)] = checked
    return checked


def _check_filled(config: RetrainConfig, classes: list[Any], n_target: int,
                  ingested: tuple[dict[str, Any], dict[str, str]], learners: list[str]) -> None:
    """The filled labels file on its own (readable, its columns, row keys, classes: ``tasks.inputs.read_filled``)
    and that some run under the run root has planned labels at all, with this code, seed, kind of plan, ingested
    tables (``ingested``: ``tasks.ingest.ingest_identity``) and candidates (``tasks.inputs.check_plan_kind``);
    whether the plan is this configuration's (the candidates' predictions) needs the training stage, so the labels
    stage checks that."""
    from flows.paths import default_run_root
    from tasks.inputs import LabelsInputError, check_plan_kind, read_filled
    from tasks.store import stage_manifests

    read_filled(config.target_labels, config.label, classes, n_target)
    root = Path(config.run_root) if config.run_root else default_run_root()
    if not stage_manifests(root, "labels"):
        raise LabelsInputError(f"no label plan is stored under the run root {root}: run with --label-budget first "
                               "(same configuration and run root), fill the file it writes, then pass it with "
                               "--target-labels")
    check_plan_kind(root, config.target_labels, config.label, seed=config.seed,
                    pair_plan=config.label_plan == "pair", ingest=ingested, learners=learners,
                    weighting=None if config.weighting == "auto" else config.weighting)


def _preflight(config: RetrainConfig) -> Checked:
    from shiftlib.ingest import check_labels, drop_unlabeled
    from shiftlib.requirements import check_classes, check_sizes
    from tasks.inputs import IngestOptions, prepare_inputs, read_inputs

    bias = config.applied_bias()
    if bias is not None:
        _check_mechanism(bias)
    bias_dict = bias.model_dump() if bias is not None else None
    raw_source, raw_target, read_notes = read_inputs(config.source, config.target, config.label, bias_dict,
                                                     max_memory=config.max_memory, keep=True)  # for ingest
    notes = list(read_notes)
    if config.label in raw_source.columns:  # before any encoding: a 50-class noise label is refused at once
        check_classes(raw_source[config.label].value_counts(dropna=True).to_dict(), config.label,
                      max_classes=config.max_classes)
    positive = config.positive_label
    if config.label in raw_source.columns and raw_source[config.label].notna().any():  # unlabeled rows left out
        positive = _positive_label(positive, check_labels(drop_unlabeled(raw_source, config.label)[0], config.label))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        options = IngestOptions(positive_label=positive, simulate_bias=bias_dict, seed=config.seed,
                                drop_columns=tuple(config.drop_columns), max_levels=config.max_levels,
                                id_column=config.id_column, group_column=config.group_column)
        inp = prepare_inputs(raw_source, raw_target, config.label, options=options, encode=False)
    notes += [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    prepared = inp.prepared
    if inp.source_groups is not None:
        k = max(config.cv_folds, config.selection_folds)
        if inp.source_groups.nunique() < k:
            raise ConfigError(f"group_column {config.group_column!r} names {inp.source_groups.nunique()} cases, fewer "
                              f"than the {k} folds of the cross-validation: lower --cv-folds and --selection-folds, "
                              "or leave group_column unset")
    notes += list(prepared.notes)  # a target label column not held out, target levels the source lacks
    if config.undersample is not None and len(prepared.classes) != 2:
        raise ConfigError(
            f"undersample={config.undersample!r} corrects two-class models (US eq. 9), but the source has "
            f"{len(prepared.classes)} classes in {config.label!r}; leave undersample unset or map the label to "
            "positive-vs-rest"
        )
    if config.label_budget is not None:
        from tasks.inputs import check_label_budget

        check_label_budget(config.label_budget, prepared.n_target)
    if config.label_plan != "candidates" and config.label_budget is None and config.target_labels is None:
        notes.append(f"label_plan={config.label_plan!r} has no effect without --label-budget (or --target-labels): "
                     "no labels are planned")
    counts = Counter(prepared.classes[i] for i in prepared.source_y.tolist())
    notes += check_classes(counts, config.label, max_classes=config.max_classes)
    plan = check_sizes(counts, prepared.n_target, config.learners, cv_folds=config.cv_folds,
                       selection_folds=config.selection_folds, selectors=config.selectors)
    notes += list(plan.dropped.values())
    if config.target_labels is not None:  # after check_sizes: the learners the run will train (helper-40)
        from tasks.ingest import ingest_identity

        ingested = ingest_identity(raw_source, raw_target, config.source, config.target, config.label, options)
        _check_filled(config, list(prepared.classes), prepared.n_target, ingested, plan.learners)
    resolved = config.model_copy(update={"simulate_bias": bias, "learners": plan.learners,
                                         "positive_label": positive})
    return Checked(resolved, bias_label(bias), tuple(notes), prepared.n_source, prepared.n_target)
