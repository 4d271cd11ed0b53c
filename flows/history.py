"""``shiftflow history --model NAME [--out PNG]``: performance over time of a registered model, as a table and a
chart (``tasks.history``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The ``shiftflow history`` flags."""
    p.add_argument("--model", required=True, help="registered model name")
    p.add_argument("--out", help="where to write the chart (PNG; default: history/<model>.png beside the run root of "
                                 "the model's newest retrain, else the default run root; never the current directory)")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI or the local store)")
    return p


def run(ns: argparse.Namespace) -> int:
    """Print the table and write the chart; 0, or 2 with one line when the model has no runs."""
    from flows.paths import missing_sqlite_store
    from flows.ui import local_store
    from tasks.history import model_history, plot_history

    uri = local_store(ns.tracking_uri)
    db = missing_sqlite_store(uri)
    if db is not None:
        print(f"shiftflow: error: no MLflow store at {db}: pass --tracking-uri (or set MLFLOW_TRACKING_URI)",
              file=sys.stderr)
        return 2
    table = model_history(uri, ns.model)
    if table.empty:
        print(f"shiftflow: error: no retrain or score run of a registered model {ns.model!r} in {uri}; check "
              "--model (the registry's name) and --tracking-uri", file=sys.stderr)
        return 2
    out = Path(ns.out) if ns.out else default_chart(ns.model, _run_root(uri, table))
    out.parent.mkdir(parents=True, exist_ok=True)
    plot_history(table, ns.model).savefig(out, dpi=120)
    shown = table.assign(started=table["started"].dt.strftime("%Y-%m-%d %H:%M"))
    print(shown[["started", "run_name", "run_id", "candidate", "version", "decision", "serving", "estimate", "ci_low",
                 "ci_high", "realized", "drift", "overlap", "regime"]].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print("run_id: the MLflow parent run (what `shiftflow evaluate --run` takes)")
    print(f"chart: {out.resolve()}")
    return 0


def default_chart(model: str, run_root: Path | None = None) -> Path:
    """Where ``shiftflow history`` writes a model's chart without ``--out``: ``history/<model>.png`` beside the
    model's run root (``run_root``: that of its newest retrain run, :func:`_run_root`; else the default run root,
    ``flows.paths.default_run_root``), the name's characters outside letters, digits and ``._-`` replaced by ``_``
    (helper-37: a PNG dropped into whatever directory the command ran in; helper-39: into the default run root's
    folder although every run had used ``--run-root``)."""
    import re

    from flows.paths import default_run_root

    root = default_run_root() if run_root is None else run_root
    return root.parent / "history" / f"{re.sub(r'[^A-Za-z0-9._-]', '_', model)}.png"


def _run_root(uri: str, table: Any) -> Path | None:
    """The run root of the newest run in ``table`` that names its run folder (tag ``shiftflow.run_dir``: a
    retrain run); None when none does or the store cannot say."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    for run_id in reversed([r for r in table["run_id"].tolist() if r]):
        try:
            run_dir = client.get_run(run_id).data.tags.get("shiftflow.run_dir")
        except MlflowException:
            continue
        if run_dir:  # a path of the machine that ran the retrain: used only when it exists here (helper-40)
            return Path(run_dir).parent if Path(run_dir).parent.is_dir() else None
    return None
