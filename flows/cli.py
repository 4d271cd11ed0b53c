"""``shiftflow`` console script: ``shiftflow retrain [--source ...]``, ``shiftflow evaluate --run ... --labels ...``,
``shiftflow up|down|ui``."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# both light: flows.api imports prefect only when the API is started or used, flows.runners (prefect and
# prefect_dask) only when a runner is made
from flows.api import early_api, use_api
from flows.runners import KINDS, make_task_runner

#: ``$MLFLOW_TRACKING_URI`` as the user's shell has it: MLflow sets it in this process once a run has a tracking URI,
#: so the store a bare ``shiftflow ui`` opens in that shell is judged from this, not from the variable after a run
_SHELL_TRACKING_URI = os.environ.get("MLFLOW_TRACKING_URI")
_RUN_OPTIONS = ("sep", "decimal", "thousands", "encoding", "debug", "config", "task_runner", "dask_address", "dask_workers")


def _literal_choices(annotation: Any) -> list[str]:
    """The values of every ``Literal`` inside ``annotation`` (``list[Literal[...]]``, unions), in order."""
    from typing import Literal, get_args, get_origin

    out: list[str] = []
    if get_origin(annotation) is Literal:
        return [str(a) for a in get_args(annotation)]
    for arg in get_args(annotation):
        out += [c for c in _literal_choices(arg) if c not in out]
    return out


def _field_shape(annotation: Any) -> str:
    """How a field is written on the command line: 'list' (comma-separated), 'json' (a nested model), 'value'."""
    from typing import get_args, get_origin

    from pydantic import BaseModel

    if get_origin(annotation) is list:
        return "list"
    args = get_args(annotation) or (annotation,)
    if any(isinstance(a, type) and issubclass(a, BaseModel) for a in args):
        return "json"
    return "value"


def _default_text(field: Any) -> str:
    from pydantic_core import PydanticUndefined

    value = field.default_factory() if field.default_factory is not None else field.default
    if value is PydanticUndefined:
        return "required"
    if value is None:
        return "none"
    if isinstance(value, list):
        return ",".join(map(str, value)) or "empty"
    if hasattr(value, "model_dump"):
        return json.dumps(value.model_dump())
    return str(value)


def _config_flags(r: argparse.ArgumentParser) -> None:
    """One flag per ``RetrainConfig`` field, with the model's description, default and choices."""
    from flows.config import RetrainConfig

    g = r.add_argument_group("run settings (RetrainConfig; flags override --config)")
    for name, field in RetrainConfig.model_fields.items():
        assert name not in _RUN_OPTIONS, f"RetrainConfig.{name} collides with a CLI option"
        shape, choices = _field_shape(field.annotation), _literal_choices(field.annotation)
        text = (field.description or name).replace("%", "%%")
        if shape == "list":
            text += "; comma-separated" + (f" from {', '.join(choices)}" if choices else "")
        elif shape == "json":
            text += "; JSON" + (f" or {', '.join(repr(c) for c in choices)}" if choices else "") + ", 'none' for none"
        elif choices:
            others = [a for a in getattr(field.annotation, "__args__", ()) if a is not type(None)
                      and not _literal_choices(a)]
            text += f"; {'a value or ' if others else ''}one of {', '.join(choices)}"
        if shape != "json" and type(None) in getattr(field.annotation, "__args__", ()):
            text += "; 'none' for none"
        metavar = "LIST" if shape == "list" else "JSON" if shape == "json" else name.upper()
        g.add_argument("--" + name.replace("_", "-"), dest=name, metavar=metavar,
                       help=f"{text} (default: {_default_text(field).replace('%', '%%')})")


def _parser() -> argparse.ArgumentParser:
    from flows.evaluate import add_arguments as evaluate_arguments
    from flows.history import add_arguments as history_arguments
    from flows.rollback import add_arguments as rollback_arguments
    from flows.score_cli import add_arguments as score_arguments
    from flows.ui import add_arguments as ui_arguments

    p = argparse.ArgumentParser(prog="shiftflow", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("retrain", help="run the retrain flow once (defaults: the embedded Pima example)")
    _config_flags(r)
    r.add_argument("--config", help="a JSON or YAML file of RetrainConfig fields (flags override it)")
    r.add_argument("--sep", help="CSV separator of file: tables (default: sniffed from the header)")
    r.add_argument("--decimal", help="decimal mark of file: CSV tables (default '.'; ',' is sniffed for ';' files)")
    r.add_argument("--thousands", help="mark between groups of thousands in file: CSV tables, e.g. ',' for 48,412 "
                   "(default: none; sniffed when a text column is all such numbers)")
    r.add_argument("--encoding", help="text encoding of file: CSV tables (default: UTF-8, else cp1252, else latin-1)")
    r.add_argument("--debug", action="store_true", help="show the full traceback of an input error "
                   "(or set SHIFTFLOW_DEBUG=1)")
    r.add_argument("--task-runner", choices=KINDS, help="where the fanned-out tasks run (training per candidate, "
                   "ReverseTesting rows, TrCV folds, KMM chunks): 'thread' (default: a thread pool in this "
                   "process) or 'dask' (a Dask cluster; export PREFECT_API_URL of a running Prefect server "
                   "first, see `shiftflow up`)")
    r.add_argument("--dask-address", help="scheduler of an existing Dask cluster, e.g. tcp://127.0.0.1:8786 "
                   "(implies --task-runner dask; default: a temporary local cluster)")
    r.add_argument("--dask-workers", type=int, help="worker processes of the temporary local Dask cluster "
                   "(implies --task-runner dask; default 2)")
    u = sub.add_parser("up", help="start Prefect server, MLflow server and a worker on 127.0.0.1 "
                       "(state in $SHIFTFLOW_HOME, default ./.shiftflow)")
    u.add_argument("--prefect-port", type=int, default=4200, help="Prefect server port (default 4200)")
    u.add_argument("--mlflow-port", type=int, default=5000, help="MLflow tracking server port (default 5000)")
    u.add_argument("--pool-concurrency", type=int, default=2, help="flow runs the worker takes at once; more "
                   "wait in the work queue (default 2)")
    u.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for each service (default 300)")
    d = sub.add_parser("down", help="stop the services `shiftflow up` recorded in $SHIFTFLOW_HOME/services.json")
    d.add_argument("--timeout", type=float, default=20.0, help="seconds of grace before SIGKILL (default 20)")
    ui_arguments(sub.add_parser("ui", help="open the MLflow UI on the local store (Ctrl-C stops it and every "
                                "process it started)"))
    history_arguments(sub.add_parser(
        "history", help="a registered model's accuracy over time: estimate, interval, realised accuracy, drift, "
        "serving version (table and PNG)"))
    rollback_arguments(sub.add_parser(
        "champion", help="move a registered model's champion alias by hand: --set VERSION or --previous (rollback)"))
    score_arguments(sub.add_parser(
        "score", help="score a batch with a registered model version (its labels and probabilities) and log a "
        "monitoring run: the label-free accuracy estimate on the batch, drift and overlap"))
    evaluate_arguments(sub.add_parser(
        "evaluate", help="when a batch's labels arrive: log the realised accuracy and AUC beside a retrain run's "
        "estimates (realized.*, estimate.abs_error) and append to <run root>/estimate_vs_realized.parquet",
        description="Labels are matched by --id-column (a row key the retrain kept with its own --id-column, or "
        "a column of the target table it read); without it, the labels file is in the target's row order."))
    return p


def _json_arg(text: str, what: str, example: str) -> Any:
    from flows.preflight import ConfigError

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{what} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
                          f"pass e.g. {example}") from exc


def _read_config_file(path: str) -> dict[str, Any]:
    from flows.preflight import ConfigError

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read --config {path!r}: {exc.strerror or exc}") from exc
    if path.lower().endswith((".yaml", ".yml")):
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
            raise ConfigError(f"--config {path!r} is not valid YAML ({getattr(exc, 'problem', exc)}{where})") from exc
    else:
        data = _json_arg(text, f"--config {path!r}", '{"learners": ["LR", "RF"], "seed": 1} (or a .yaml file)')
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path!r} must hold one mapping of RetrainConfig fields, not a "
                          f"{type(data).__name__}")
    return data


def _flag_value(name: str, field: Any, text: str) -> Any:
    """A flag's text as the field's value: lists comma-separated, nested specs JSON, 'none' → None."""
    shape, word = _field_shape(field.annotation), text.strip()
    nullable = type(None) in getattr(field.annotation, "__args__", ())
    if nullable and word.lower() in ("none", "null", ""):
        return None
    if shape == "list":
        return [s.strip() for s in text.split(",") if s.strip()]
    if shape == "json":
        if word.lower() in _literal_choices(field.annotation):
            return word.lower()
        flag = "--" + name.replace("_", "-")
        return _json_arg(text, flag, "'{\"mechanism\": \"rt_sort\", \"params\": {}}', 'auto' or 'none'")
    return text


def hide_sql_passwords(data: dict[str, Any]) -> dict[str, Any]:
    """Move a password out of ``sql:`` source/target URLs into ``$SHIFTFLOW_SQL_PASSWORD`` (this process only),
    so the flow's parameters — which Prefect stores and shows — never carry it. Refuses two different ones."""
    import sqlalchemy as sa

    from flows.preflight import ConfigError
    from tasks.sources import SQL_PASSWORD_ENV, parse_sql_spec

    out, found = dict(data), {}
    for key in ("source", "target"):
        spec = out.get(key)
        if not (isinstance(spec, str) and spec.startswith("sql:")):
            continue
        url_text = parse_sql_spec(spec).url
        try:
            url = sa.engine.make_url(url_text)
        except sa.exc.ArgumentError:
            continue  # the reader names the problem
        except ValueError:  # a port that is not a number; SQLAlchemy's message (not chained) may quote the password
            raise ConfigError(
                f"the {key}'s SQL URL cannot be read: its port is not a number; write it as "
                "dialect+driver://user:password@host:port/database and percent-encode any ':', '@' or '/' in the "
                "password (%3A, %40, %2F): a ':' there reads as the start of the port") from None
        if url.password:
            found[key] = url.password
            at = spec.index(url_text)
            out[key] = spec[:at] + url._replace(password=None).render_as_string(hide_password=False) + \
                spec[at + len(url_text):]
    if len(set(found.values())) > 1:
        raise ConfigError("the source and target SQL URLs carry different passwords; shiftflow takes one SQL "
                          f"password: put it in ${SQL_PASSWORD_ENV} (or use ~/.pgpass) and drop it from the URLs")
    if found:
        os.environ[SQL_PASSWORD_ENV] = next(iter(found.values()))
    return out


def config_from_args(ns: argparse.Namespace) -> RetrainConfig:  # noqa: F821
    """The run's ``RetrainConfig`` from ``--config`` (JSON or YAML) and one flag per field (flags win); raises
    ``ConfigError`` with one sentence for an unreadable file, unknown keys or bad values."""
    from pydantic import ValidationError

    from flows.config import RetrainConfig
    from flows.preflight import ConfigError, config_error_sentence
    from tasks.sources import with_options

    data: dict = _read_config_file(ns.config) if ns.config else {}
    for name, field in RetrainConfig.model_fields.items():
        text = getattr(ns, name, None)
        if text is not None:
            data[name] = _flag_value(name, field, text)
    options = {"sep": ns.sep, "decimal": ns.decimal, "thousands": ns.thousands, "encoding": ns.encoding}
    for key in ("source", "target"):
        if isinstance(data.get(key), str):
            data[key] = with_options(data[key], **options)
    data = hide_sql_passwords(data)
    try:
        return RetrainConfig(**data)
    except ValidationError as exc:
        raise ConfigError(config_error_sentence(exc)) from exc


def task_runner_from_args(ns: argparse.Namespace) -> tuple[str, Any] | None:
    """``(description, task runner)`` from ``--task-runner/--dask-address/--dask-workers``, or None when none
    is given (the flow's own default, Prefect's thread pool). Raises ValueError naming the conflict."""
    kind, address, workers = ns.task_runner, ns.dask_address, ns.dask_workers
    if kind is None and address is None and workers is None:
        return None
    if kind == "thread" and (address is not None or workers is not None):
        flag = "--dask-address" if address is not None else "--dask-workers"
        raise ValueError(f"{flag} only applies to --task-runner dask; drop it or use --task-runner dask")
    kind = kind or "dask"
    runner = make_task_runner(kind, address=address, n_workers=workers)
    if kind == "thread":
        return "thread pool", runner
    if address is not None:
        return f"Dask cluster at {address}", runner
    return f"temporary local Dask cluster ({workers or 2} worker processes)", runner


def one_line(exc: BaseException) -> str:
    """The error's sentence on one line (pydantic errors as ``invalid configuration: field: problem``)."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        from flows.preflight import config_error_sentence

        return config_error_sentence(exc)
    # lines joined, spaces inside a line kept: a message may quote a value whose spaces are the point ('yes  ')
    from shiftlib.errors import MAX_MESSAGE, bounded

    # an input error is bounded already (ShiftflowInputError); others (a service's error) are bounded here
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__
    return bounded(text, MAX_MESSAGE + 100)


def main(argv: Sequence[str] | None = None) -> int:
    """Run a ``shiftflow`` command; returns the exit code: 0 done, 2 input refused (one line), 1 a service
    unreachable (one line) or a bug (its traceback)."""
    ns = _parser().parse_args(argv)
    if ns.command in ("up", "down"):
        return _services(ns)
    if ns.command == "ui":
        from flows.ui import serve

        return serve(ns.tracking_uri, port=ns.port, timeout_s=ns.timeout)
    _quiet_output()
    if ns.command == "evaluate":
        from flows.evaluate import run as evaluate

        return evaluate(ns)
    if ns.command == "history":
        from flows.history import run as history

        return history(ns)
    if ns.command == "champion":
        from flows.rollback import run as set_alias

        return set_alias(ns)
    from pydantic import ValidationError

    from flows.stack.procs import stop_as_interrupt
    from shiftlib.errors import ShiftflowInputError
    from tasks.store import StageWriteError

    debug = debug_enabled(ns)
    try:
        with stop_as_interrupt():  # a stop request ends the run as Ctrl-C does: the temporary API is stopped
            return _retrain(ns) if ns.command == "retrain" else _score(ns)
    except (ShiftflowInputError, ValidationError) as exc:
        if debug:
            traceback.print_exc()
        print(f"shiftflow: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except (ConnectionError, TimeoutError, StageWriteError) as exc:  # a service down, a full disk: not a bug
        if debug:
            traceback.print_exc()
        print(f"shiftflow: error: {one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("shiftflow: interrupted", file=sys.stderr)
        return 130
    except Exception:  # noqa: BLE001 - anything else is a bug: keep its traceback
        traceback.print_exc()
        print("shiftflow: internal error: this is a bug in shiftflow, not a problem with your input; "
              "please report it with the traceback above", file=sys.stderr)
        return 1


def labels_request_lines(lab: dict[str, Any]) -> list[str]:
    """What a run that stopped for target labels prints (the labels task's ``awaiting_labels`` result): the file to
    fill and how to resume; why fewer rows than the budget; and no file at all when the plan drew no row (a pair
    that predicts the same class on every target row: no label can tell them apart)."""
    from tasks.served import RULE  # imported once the run is over (tasks.served imports MLflow)

    others = (lab.get("learners") or [""])[1:]  # a pair plan's contenders beside its candidate
    other = (f", the champion and the {RULE}" if RULE in others and len(others) > 1
             else f" and the {RULE}" if RULE in others else " and the champion")
    who = "the candidates" if not lab.get("pair") else f"{lab['pair']}{other} (label_plan pair)"
    if lab.get("n_planned", lab["n_rows"]) == 0:
        return [f"shiftflow: nothing to label: {who} predict the same class on every target row, so no label can "
                "tell them apart"]
    more = f" ({lab['n_prefilled']} labeled before are filled in)" if lab.get("n_prefilled") else ""
    lines = [f"shiftflow: {lab['n_rows']} target rows to label in {lab['csv']}{more}"]
    if lab.get("n_planned", lab["n_rows"]) < lab.get("budget", 0):
        lines.append(f"  fewer than the budget of {lab['budget']}: {who} disagree on only {lab['n_disagreement']} "
                     "rows, and a label where they agree cannot change their order")
    return [*lines, f"  fill the empty label column, then rerun with: --target-labels file:{lab['csv']}"]


def debug_enabled(ns: argparse.Namespace) -> bool:
    """``--debug`` or ``SHIFTFLOW_DEBUG`` set to anything but empty/0/false/no: refusals keep their traceback."""
    return bool(ns.debug) or os.environ.get("SHIFTFLOW_DEBUG", "").strip().lower() not in ("", "0", "false", "no")


def _retrain(ns: argparse.Namespace) -> int:
    from flows.preflight import ConfigError, preflight

    t0 = t_start = time.perf_counter()
    config = config_from_args(ns)
    try:
        runner = task_runner_from_args(ns)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    checked = preflight(config)  # before Prefect or MLflow is imported: a refusal writes nothing
    print(f"shiftflow: inputs checked in {time.perf_counter() - t0:.1f} s: {checked.n_source} source rows, "
          f"{checked.n_target} target rows, learners {', '.join(checked.config.learners)}")
    print(f"shiftflow: simulated bias: {checked.bias}"
          + (" (your rows are used as given)" if checked.bias == "none" else ""))
    for note in checked.notes:
        print(f"shiftflow: warning: {note}")
    api = early_api()  # only now: a refused input never starts (or writes) anything
    from flows.retrain import retrain, tracking_store  # imports while the API boots
    from flows.stack.procs import raise_if_stopped

    raise_if_stopped()  # a Ctrl-C during those imports that something swallowed

    flow_fn = retrain if runner is None else retrain.with_options(task_runner=runner[1])
    if not debug_enabled(ns):
        _input_errors_without_traceback()
    if api is not None:
        tracking_store(checked.config)  # and the MLflow store is created meanwhile
    t0 = time.perf_counter()
    use_api(api)
    summary = flow_fn(checked.config)
    dt = time.perf_counter() - t0
    print()
    if summary.get("labels", {}).get("status") == "awaiting_labels":
        print("\n".join(labels_request_lines(summary["labels"])))
        return 0
    print(f"shiftflow: retrain finished in {dt:.1f} s ({time.perf_counter() - t_start:.1f} s in all, with the input "
          "checks and the start of Prefect and MLflow)")
    for line in report_lines(summary, bias=checked.bias, runner=None if runner is None else runner[0]):
        print(line)
    return 0


def _score(ns: argparse.Namespace) -> int:
    from flows.score_cli import run

    if not debug_enabled(ns):
        _input_errors_without_traceback()
    return run(ns)


def ui_command(tracking_uri: str) -> str:
    """A command that opens the MLflow UI on ``tracking_uri`` from any shell: this install's own ``shiftflow``
    script by its path (no activated venv needed), with ``--tracking-uri`` unless it is the default store."""
    from flows.ui import default_store

    if tracking_uri.startswith(("http://", "https://")):
        return f"open {tracking_uri}"
    script = Path(sys.executable).parent / "shiftflow"
    cmd = str(script) if script.exists() else f"{sys.executable} -m flows.ui"
    if script.exists():
        cmd += " ui"
    return cmd if tracking_uri == (_SHELL_TRACKING_URI or default_store()) else f"{cmd} --tracking-uri {tracking_uri}"


def _weighting_words(chosen: str, summary: dict[str, Any]) -> str:
    """How the chosen candidate was trained: weighted by the run's method only if it is one of the ``+method``
    candidates (an unweighted candidate can win a weighted run)."""
    method = summary.get("weighting") or "none"
    if method == "none":
        return "unweighted"
    return f"weighting {method}" if chosen.endswith(f"+{method}") else f"unweighted; weighting {method} is for the +{method} candidates"


def report_lines(summary: dict[str, Any], *, bias: str | None = None, runner: str | None = None) -> list[str]:
    """The closing report: what was chosen and decided, the drift verdict, the estimate, where things are."""
    sel, champ, drift = summary["selection"], summary["champion"], summary.get("drift") or {}
    est = summary.get("estimate") or {}
    out = [f"  chosen model:      {sel['chosen']} (selector {sel['selector']}, {_weighting_words(sel['chosen'], summary)})"]
    from tasks.estimation import baseline_words, labeled_line, overlap_line, realized_line, regime_line
    from tasks.report import (
        cautions,
        fewlabel_sentence,
        gate_words,
        has_target_labels,
        pair_labels_sentence,
        target_accuracies,
    )

    if (sentence := fewlabel_sentence(sel)) is not None:
        out.append(f"  target labels:     {sentence}")
    new = "" if champ.get("new_version", True) else ", no new version"
    out.append(f"  registry:          {champ['registered_model']} v{champ['version']} → {champ['decision']}{new}"
               f"{gate_words(champ)}")
    out.append(f"                     {champ['reason']}")
    if drift:
        feats = drift.get("drifted_features") or []
        verdict = "drift" if drift.get("drifted") else "no drift"
        detail = f"domain AUC {drift['domain_auc']:.3f}, p {drift['domain_pvalue']:.3g}" \
            if drift.get("domain_auc") is not None else ""
        # the per-feature tests can flag columns when the whole-table test does not: say which test says what
        flagged = "features" if drift.get("drifted") else "yet the per-feature tests flag"
        out.append(f"  drift:             {verdict} ({detail}"
                   + (f"; {flagged} {', '.join(map(str, feats[:5]))}{' …' if len(feats) > 5 else ''}" if feats else "")
                   + ")")
    if est:
        alert = "  ALERT: below min_accuracy, champion alias held" if est.get("alert") else ""
        out.append(f"  estimated accuracy: {est['accuracy']:.3f} [{est['ci_low']:.3f}, {est['ci_high']:.3f}] "
                   f"({est['method']}, {est['confidence']:.0%} interval){baseline_words(est)}{alert}")
        if (line := realized_line(est)) is not None:
            out.append(f"  realised so far:   {line}")
        if (line := labeled_line(est)) is not None:
            out.append(f"  with labels:       {line.removeprefix('accuracy with ')}")
        if (line := pair_labels_sentence(summary)) is not None:
            out.append(f"  target labels:     {line}")
        if (line := overlap_line(est, labeled=has_target_labels(summary))) is not None:
            out.append(f"  overlap:           {line.removeprefix('overlap ')}")
        if (line := regime_line(est)) is not None:
            out.append(f"  shift regime:      {line.removeprefix('shift regime: ')}")
        measured = target_accuracies(summary)
        if est.get("candidate") in measured and not summary.get("recalibration"):  # else a refit is served
            out.append(f"  measured accuracy:  {measured[est['candidate']]:.3f} on the target's own labels (held out: "
                       "no stage but evaluation read them)")
    out += [f"  note:              {c}" for c in cautions(summary)]
    if skipped := summary.get("skipped_candidates"):
        out.append(f"  skipped:           {', '.join(skipped)} (could not be fitted here; why: the log, and the "
                   "MLflow tag shiftflow.skipped_candidates)")
    if bias:
        out.append(f"  simulated bias:    {bias}")
    if runner:
        out.append(f"  task runner:       {runner}")
    out.append(f"  run folder:        {summary['run_dir']}")
    if summary["reused_stages"]:
        out.append(f"  reused stages:     {', '.join(summary['reused_stages'])}")
    plots = [p for p in ("drift/features.png",) if (Path(summary["run_dir"]) / p).exists()]
    out.append(f"  plots:             {', '.join(str(Path(summary['run_dir']) / p) for p in plots) or 'none on disk'}; "
               "in MLflow, the parent run's artifacts (drift/, weights/, selection/, recalibration/)")
    out.append(f"  MLflow parent run: {summary['mlflow_parent_run_id']} (experiment {summary['mlflow_experiment_id']})")
    out.append(f"  open the MLflow UI: {ui_command(summary['tracking_uri'])}")
    return out


def _one_sentence_error(record: logging.LogRecord) -> BaseException | None:
    """The exception of ``record`` if the CLI prints it as one sentence: a bad input found during the run
    (``ShiftflowInputError``: a labels file of another configuration), a service down (``ConnectionError``,
    ``TimeoutError``) or a full disk (``StageWriteError``)."""
    from shiftlib.errors import ShiftflowInputError
    from tasks.store import StageWriteError

    exc = record.exc_info[1] if record.exc_info else None
    return exc if isinstance(exc, (ShiftflowInputError, ConnectionError, TimeoutError, StageWriteError)) else None


#: the heads of the one-sentence errors logged in this process (``_remember``), shared by the filters below: a
#: record reaches the API handler of its own logger before the root's console handler, and the first filter to
#: see it drops its exception
_SENTENCES: set[str] = set()


def _remember(record: logging.LogRecord, sentences: set[str]) -> bool:
    """Whether ``record`` carries a one-sentence error; its head (up to a quote or backslash, which Prefect's
    reprs escape; at least 20 characters: a short text could be part of any message) goes into ``sentences``."""
    exc = _one_sentence_error(record)
    if exc is None:
        return False
    head = re.split(r"[\"'\\]", str(exc))[0][:80]
    if len(head) >= 20:
        sentences.add(head)
    return True


class _NoInputErrorTraceback(logging.Filter):
    """Drops the traceback of a log record whose exception the CLI prints as one sentence
    (``_one_sentence_error``) — not 175 lines of tracebacks before it (issue 31)."""

    def __init__(self, sentences: set[str] | None = None) -> None:
        super().__init__()
        self.sentences = _SENTENCES if sentences is None else sentences

    def filter(self, record: logging.LogRecord) -> bool:
        if _remember(record, self.sentences):
            record.exc_info, record.exc_text = None, None
        return True


class _ErrorSentenceOnce(logging.Filter):
    """On the console only: drops Prefect's records that repeat such a sentence (the task's failure, its state,
    the flow's failure and its state: four copies before the CLI's own line). The UI's log keeps them."""

    def __init__(self, sentences: set[str] | None = None) -> None:
        super().__init__()
        self.sentences = _SENTENCES if sentences is None else sentences

    def filter(self, record: logging.LogRecord) -> bool:
        if _remember(record, self.sentences):
            return False
        if self.sentences and (record.name == "prefect" or record.name.startswith("prefect.")):
            return not any(h in record.getMessage() for h in self.sentences)
        return True


def _input_errors_without_traceback() -> None:
    """Install ``_NoInputErrorTraceback`` on every handler Prefect's logging configured (console and API), and
    ``_ErrorSentenceOnce`` before it on the console's."""
    loggers = [logging.getLogger()] + [logging.getLogger(n) for n in list(logging.root.manager.loggerDict)
                                       if n == "prefect" or n.startswith("prefect.")]
    for handler in {h for lg in loggers for h in lg.handlers}:
        console = isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)
        if console and not any(isinstance(f, _ErrorSentenceOnce) for f in handler.filters):
            handler.filters.insert(0, _ErrorSentenceOnce())  # first: it reads the exception the next one drops
        if not any(isinstance(f, _NoInputErrorTraceback) for f in handler.filters):
            handler.addFilter(_NoInputErrorTraceback())


def _quiet_output() -> None:
    """Plain, readable logs: no colour codes when the output is not a terminal, each library warning once."""
    import warnings

    if not (sys.stdout.isatty() and sys.stderr.isatty()):
        os.environ.setdefault("PREFECT_LOGGING_COLORS", "false")
        os.environ.setdefault("NO_COLOR", "1")
    warnings.simplefilter("once")
    # MLflow's note that it creates (or migrates) its SQLite tables on a new home is for its own maintainers
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)
    for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning):
        warnings.filterwarnings("ignore", category=category, module=r"(mlflow|sqlalchemy|prefect|pydantic)(\.|$)")


def _services(ns: argparse.Namespace) -> int:
    from flows import stack
    from flows.paths import shiftflow_home

    home = shiftflow_home()
    try:
        if ns.command == "up":
            t0 = time.perf_counter()
            stack.up(stack.Stack(home, ns.prefect_port, ns.mlflow_port, ns.pool_concurrency), timeout_s=ns.timeout)
            print(f"shiftflow up: done in {time.perf_counter() - t0:.1f} s")
        else:
            stack.down(home, timeout_s=ns.timeout)
    except stack.ServiceError as exc:
        print(f"shiftflow {ns.command}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
