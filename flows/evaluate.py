"""``evaluate``: close the loop when a batch's labels arrive.

    shiftflow evaluate --run <flow-run id | MLflow run id> --labels file:labels.csv [--id-column id]

(``python -m flows.evaluate`` takes the same arguments.)

Finds the retrain run, matches the labels to the rows of its target batch, and logs into the same MLflow
runs the realised accuracy and AUC beside the estimates: ``realized.accuracy``, ``realized.auc``,
``realized.n_rows`` and ``estimate.abs_error`` per candidate (nested runs), the served candidate's on the
parent run, plus a plot of estimate against realised accuracy with the intervals
(``evaluation/estimate_vs_realized.png``). Appends one row per candidate to
``<run root>/estimate_vs_realized.parquet`` (a rerun of the same run replaces its rows).

Rows: with ``--id-column`` the labels file and the run's target batch both carry that column, and labels
are matched by it — read from ``ingest/target.parquet`` when the retrain kept it (``shiftflow retrain
--id-column``), else from the target table the run ingested, re-read. Without it (the default) the labels
file has one row per target row, in the target's row order. A partial labels file (some
rows, by id) is evaluated on the rows it has, and says how many.

A score run (``shiftflow score``, its ``--out`` a file) is evaluated too: the labels are matched to the scores it
wrote (by ``--id-column``, a column of both, else by row order) and the scored version's realised accuracy is
logged on the score run beside the monitor's estimate, where ``shiftflow history`` shows it.

Bad input (ids the batch does not have, an unknown class, a run id that does not exist, a labels file
without the label column) raises :class:`EvaluateError` before anything is written or logged.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from tasks.store import StageStore

# numpy, pandas and the stage store are imported where used: `shiftflow`'s parser imports this module for its
# flags, and `shiftflow retrain` must not pay for them before its preflight

#: = ``tasks.estimation.REALIZED_HISTORY``, which the next retrain reads (not imported here: the parser stays light)
HISTORY = "estimate_vs_realized.parquet"


class EvaluateError(ValueError):
    """Input that ``evaluate`` refuses; nothing was written or logged."""


def _evaluable(r: Any) -> bool:
    """A retrain parent run (it names its run directory) or a score run (``shiftflow score``)."""
    return "shiftflow.run_dir" in r.data.tags or r.data.tags.get("shiftflow.run_kind") == "score"


def find_parent_run(client: Any, run: str) -> Any:
    """The retrain parent run, or the score run, named by an MLflow run id or a Prefect flow-run id."""
    from mlflow.exceptions import MlflowException

    try:
        r = client.get_run(run)
        if _evaluable(r):
            return r
    except MlflowException:
        pass
    exps = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(exps, filter_string=f"tags.`prefect.flow_run_id` = '{run}'") if exps else []
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags and _evaluable(r)]
    if not parents:
        raise EvaluateError(f"no retrain or score run {run!r} in the MLflow store: pass the flow-run id the run "
                            "printed, or its MLflow run id (and --tracking-uri if the store is not the default)")
    return parents[0]


def evaluate_score_run(client: Any, run: Any, labels_spec: str, id_column: str | None) -> pd.DataFrame:
    """A score run's realised accuracy: the labels matched to the scores it wrote (``params.out``, a file), by
    ``id_column`` (a column of both) or by row order, and the version's predicted class compared with each
    label. Logs ``realized.accuracy``, ``realized.n_rows`` and, beside the monitor's estimate,
    ``estimate.abs_error`` on the score run, where ``shiftflow history`` reads them; writes nothing else (the
    deployment's ``estimate_vs_realized.parquet`` holds retrain candidates' errors, which the next retrain
    learns from). One row, as :func:`realized_table`'s columns."""
    import numpy as np
    import pandas as pd

    from tasks.scoring import SCORED_TAG
    from tasks.sources import SourceSpecError, load_table
    from tasks.tracking import log_metrics, with_retries

    name, version = run.data.tags[SCORED_TAG].rsplit(" v", 1)
    out = run.data.params.get("out", "")
    if not out.startswith("file:"):
        raise EvaluateError(f"score run {run.info.run_id} wrote its scores to {out!r}, not a file this command can "
                            "read back: evaluate a score run whose --out was file:PATH")
    try:
        scores, labels = load_table(out), load_table(labels_spec)
    except SourceSpecError as err:
        raise EvaluateError(f"{err} (the score run's scores are read back from its --out)") from err
    mv = with_retries(client.get_model_version, name, version)
    label = with_retries(client.get_run, mv.tags["mlflow_parent_run_id"]).data.params.get("label", "")
    _check_label_column(labels, label, f"v{version}'s label")
    if id_column is None:
        if len(labels) != len(scores):
            raise EvaluateError(f"without --id-column the labels file needs one row per scored row, in order "
                                f"({len(scores)}); it has {len(labels)}: pass --id-column (a column of both)")
        predicted = scores["predicted"].reset_index(drop=True)
    else:
        for what, table in (("labels file", labels), ("scores", scores)):
            if id_column not in table.columns:
                raise EvaluateError(f"the {what} has no id column {id_column!r}; its columns are "
                                    f"{list(table.columns)}" + (" (score with --id-column to keep a row key)"
                                                                if what == "scores" else ""))
        ids = scores[id_column].astype(str)
        if ids.duplicated().any() or labels[id_column].astype(str).duplicated().any():
            raise EvaluateError(f"id column {id_column!r} repeats values: it is not a row key")
        by_id = pd.Series(scores["predicted"].to_numpy(), index=ids.to_numpy())
        unknown = sorted(set(labels[id_column].astype(str)) - set(by_id.index))
        if unknown:
            raise EvaluateError(f"{len(unknown)} ids in the labels file are not among the scored rows, e.g. "
                                f"{unknown[:3]}: check the run id and the id column")
        predicted = by_id.loc[labels[id_column].astype(str).to_numpy()].reset_index(drop=True)
    classes = {str(c) for c in json.loads(mv.tags.get("shiftflow.classes", "[]"))}
    bad = sorted({str(v) for v in labels[label]} - classes) if classes else []
    if bad:
        raise EvaluateError(f"labels {bad[:3]} are not classes of v{version} ({sorted(classes)}): use the same "
                            "label coding")
    acc = float(np.mean(predicted.astype(str).to_numpy() == labels[label].astype(str).to_numpy()))
    m = run.data.metrics
    est, lo, hi = (float(m.get(k, float("nan"))) for k in ("estimate.accuracy", "estimate.ci_low", "estimate.ci_high"))
    error = abs(est - acc)  # NaN without the monitor's estimate: then not logged
    vals = {"realized.accuracy": acc, "realized.n_rows": len(labels), "estimate.abs_error": error}
    log_metrics(client, run.info.run_id, {k: v for k, v in vals.items() if not math.isnan(v)}, skip_missing=True)
    return pd.DataFrame([{"candidate": f"{name} v{version}", "method": run.data.tags.get("estimate.method", "-"),
                          "estimate": est, "ci_low": lo, "ci_high": hi, "realized_accuracy": acc,
                          "realized_auc": float("nan"), "n_rows": len(labels), "abs_error": error,
                          "covered": bool(lo <= acc <= hi) if not math.isnan(lo) else float("nan")}])


def _check_label_column(labels: pd.DataFrame, label: str, whose: str) -> None:
    """The labels file has the label column, with no empty cell (``whose``: how the refusal names the label)."""
    if label not in labels.columns:
        raise EvaluateError(f"the labels file has no label column {label!r} ({whose}); its columns are "
                            f"{list(labels.columns)}")
    if labels[label].isna().any():
        raise EvaluateError(f"the labels file has {int(labels[label].isna().sum())} empty labels: drop those rows")


def match_labels(store: StageStore, labels: pd.DataFrame, id_column: str | None) -> tuple[np.ndarray, np.ndarray]:
    """(target row positions, label codes) of the labeled rows, checked against the run's batch and classes."""
    import numpy as np
    import pandas as pd

    from tasks.ingest import read_ingest
    from tasks.sources import load_table

    ing = read_ingest(store)
    label, classes, n_target = ing.label, list(ing.classes), ing.n_target
    _check_label_column(labels, label, "the run's label")
    if id_column is None:
        if len(labels) != n_target:
            kept = ing.id_column
            hint = f" (this run kept the id column {kept!r}: pass --id-column {kept})" if kept else ""
            raise EvaluateError(f"without --id-column the labels file needs one row per target row, in order "
                                f"({n_target}); it has {len(labels)}: pass --id-column to label some rows{hint}")
        rows = np.arange(n_target)
    else:
        if id_column not in labels.columns:
            raise EvaluateError(f"the labels file has no id column {id_column!r}; its columns are {list(labels.columns)}")
        if ing.id_column == id_column:  # kept by ingest (id_column): the batch as the run saw it
            target = store.read_table("ingest", "target", columns=[id_column])
        else:  # a run without id_column: the ids come from the target table it ingested, re-read
            spec = ing.target_ref
            if not spec:
                raise EvaluateError("this run's target was split from the source (no target table), so its rows "
                                    "have no ids: label it by row order without --id-column")
            target = load_table(spec, label=label)
            if len(target) != n_target:
                raise EvaluateError(f"the target table {spec!r} now has {len(target)} rows, the run saw {n_target}")
            if id_column not in target.columns:
                raise EvaluateError(f"the run's target table {spec!r} has no column {id_column!r} to match ids on "
                                    "(retrain with --id-column to keep a row key)")
        ids = target[id_column].astype(str)
        if ids.duplicated().any():
            raise EvaluateError(f"id column {id_column!r} repeats values in the target table: it is not a row key")
        got = labels[id_column].astype(str)
        if got.duplicated().any():
            raise EvaluateError(f"the labels file repeats ids, e.g. {got[got.duplicated()].iloc[0]!r}: one label per id")
        pos = pd.Series(np.arange(n_target), index=ids.to_numpy())
        unknown = sorted(set(got) - set(pos.index))
        if unknown:
            raise EvaluateError(f"{len(unknown)} ids in the labels file are not in this run's batch, e.g. "
                                f"{unknown[:3]}: check the run id and the id column")
        rows = pos.loc[got.to_numpy()].to_numpy()
    raw = labels[label].to_numpy()
    key = {str(c): i for i, c in enumerate(classes)}
    bad = sorted({str(v) for v in raw} - set(key))
    if bad:
        raise EvaluateError(f"labels {bad[:3]} are not classes of this run ({classes}): use the same label coding")
    return rows, np.array([key[str(v)] for v in raw], dtype=np.int64)


def realized_table(store: StageStore, rows: np.ndarray, codes: np.ndarray) -> pd.DataFrame:
    """Per candidate: estimate and interval (estimation stage) beside realised accuracy and AUC on the rows."""
    import numpy as np
    import pandas as pd
    from sklearn.metrics import roc_auc_score

    from tasks.inputs import ROW

    preds = store.read_table("training", "predictions")
    est = store.read_table("estimation", "estimates").set_index("candidate")
    truth = pd.Series(codes, index=rows)
    out = []
    for name, g in preds.groupby("learner", sort=False):
        g = g.set_index(ROW).loc[rows]
        acc = float(np.mean(g["predicted"].to_numpy() == truth.to_numpy()))
        auc = math.nan
        if "proba_1" in g and len(np.unique(codes)) == 2 and g.filter(like="proba_").shape[1] == 2:
            auc = float(roc_auc_score(truth.to_numpy(), g["proba_1"].to_numpy()))
        e = est.loc[name]
        out.append({"candidate": name, "method": e["method"], "estimate": float(e["estimate"]),
                    "ci_low": float(e["ci_low"]), "ci_high": float(e["ci_high"]), "realized_accuracy": acc,
                    "realized_auc": auc, "n_rows": len(rows), "abs_error": abs(float(e["estimate"]) - acc),
                    "covered": bool(e["ci_low"] <= acc <= e["ci_high"])})
    return pd.DataFrame(out)


def deployment(parent: Any, store: StageStore) -> dict[str, str | None]:
    """Which deployment a run's batch belongs to, for the history: the registered model it served
    (``model_name``, from the tag ``champion.registered_model``) and the digest of that model's input schema
    (``schema``, ``tasks.served.input_schema``); None where the run does not tell (no champion stage, or a
    store without the ingest preprocessor). The next retrain of that model learns from these rows only."""
    tag = parent.data.tags.get("champion.registered_model")
    name = tag.rsplit(" v", 1)[0] if tag else None
    try:
        from tasks.served import input_schema

        digest = input_schema(store)["digest"]
    except (FileNotFoundError, KeyError):
        digest = None
    return {"model_name": name, "schema": digest}


def _plot(table: pd.DataFrame) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 5))
    y = table["estimate"].to_numpy()
    ax.errorbar(table["realized_accuracy"], y, yerr=[y - table["ci_low"], table["ci_high"] - y], fmt="o", capsize=3)
    for r in table.itertuples():
        ax.annotate(r.candidate, (r.realized_accuracy, r.estimate), fontsize=7, xytext=(3, 3), textcoords="offset points")
    lo = float(min(table["realized_accuracy"].min(), table["ci_low"].min())) - 0.02
    ax.plot([lo, 1], [lo, 1], "k--", lw=0.8)
    ax.set(xlabel="realised accuracy", ylabel="estimated accuracy (interval)", title="estimate vs realised")
    fig.tight_layout()
    return fig


def evaluate_run(run: str, labels_spec: str, *, id_column: str | None = None,
                 tracking_uri: str | None = None) -> pd.DataFrame:
    """Check everything, then log and append; returns the per-candidate table."""
    import pandas as pd
    from mlflow.tracking import MlflowClient

    from flows.paths import missing_sqlite_store, shiftflow_home
    from shiftlib.errors import ShiftflowInputError
    from tasks.estimation import read_realized_history
    from tasks.ingest import read_ingest
    from tasks.sources import SourceSpecError, load_table
    from tasks.store import StageStore, write_parquet_atomic
    from tasks.tracking import default_tracking_uri, log_metrics, with_retries
    from tasks.training import read_training

    if tracking_uri is None:
        tracking_uri = os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri(shiftflow_home())
    db = missing_sqlite_store(tracking_uri)
    if db is not None:
        raise EvaluateError(f"no MLflow store at {db}: pass the --tracking-uri the retrain used (or set "
                            "SHIFTFLOW_HOME / MLFLOW_TRACKING_URI as it was)")
    client = MlflowClient(tracking_uri)
    parent = find_parent_run(client, run)
    if "shiftflow.run_dir" not in parent.data.tags:  # a score run: its version's realised accuracy
        return evaluate_score_run(client, parent, labels_spec, id_column)
    run_dir = Path(parent.data.tags["shiftflow.run_dir"])
    store = StageStore(run_dir.parent, run_dir.name)
    if not store.has_stage("estimation"):
        raise EvaluateError(f"run {run!r} has no estimation stage under {run_dir}: it predates estimation")
    try:
        labels = load_table(labels_spec)
    except SourceSpecError as err:
        raise EvaluateError(str(err)) from err
    rows, codes = match_labels(store, labels, id_column)
    table = realized_table(store, rows, codes)
    hist_path = run_dir.parent / HISTORY
    try:
        old = read_realized_history(hist_path)
    except ShiftflowInputError as err:
        raise EvaluateError(str(err)) from err
    models = read_training(store).models
    served = parent.data.tags.get("estimate.candidate")

    # everything checked: now log and write
    for r in table.to_dict("records"):
        vals = {"realized.accuracy": r["realized_accuracy"], "realized.auc": r["realized_auc"],
                "realized.n_rows": r["n_rows"], "estimate.abs_error": r["abs_error"]}
        log_metrics(client, models[r["candidate"]].run_id, vals, skip_missing=True)
        if r["candidate"] == served:
            log_metrics(client, parent.info.run_id, vals, skip_missing=True)
    with_retries(client.log_figure, parent.info.run_id, _plot(table), "evaluation/estimate_vs_realized.png")
    add = table.assign(flow_run_id=run_dir.name, mlflow_parent_run_id=parent.info.run_id,
                       served=table["candidate"] == served, evaluated_at=pd.Timestamp.now(tz="UTC").isoformat(),
                       batch=read_ingest(store).data_hashes.get("target"), **deployment(parent, store))
    if old is not None:
        add = pd.concat([old[old["flow_run_id"] != run_dir.name], add], ignore_index=True)
    write_parquet_atomic(add, hist_path)
    return table


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The ``shiftflow evaluate`` flags (shared with ``python -m flows.evaluate``)."""
    p.add_argument("--run", required=True, help="Prefect flow-run id or MLflow run id of a retrain run (its parent "
                   "run) or of a score run (its scores file read back)")
    p.add_argument("--labels", required=True, help="labels table: file:PATH.csv|.parquet with the label column")
    p.add_argument("--id-column", help="row key in both the labels file and the run's target table "
                   "(default: the labels file is in the target's row order, one row per target row)")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI or the local store)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = add_arguments(argparse.ArgumentParser(prog="shiftflow evaluate", description=__doc__.split("\n")[0]))
    return run(p.parse_args(argv))


def run(ns: argparse.Namespace) -> int:
    """``shiftflow evaluate`` on parsed flags; returns the exit code (0 done, 2 input refused, one line)."""
    t0 = time.monotonic()
    try:
        table = evaluate_run(ns.run, ns.labels, id_column=ns.id_column, tracking_uri=ns.tracking_uri)
    except EvaluateError as err:
        print(f"shiftflow: error: {err}", file=sys.stderr)
        return 2
    n = int(table["n_rows"].iloc[0])
    print(f"evaluated {n} labeled rows ({time.monotonic() - t0:.1f} s):")
    print(table[["candidate", "method", "estimate", "ci_low", "ci_high", "realized_accuracy", "realized_auc",
                 "abs_error", "covered"]].to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    warning = unrelated_labels_warning(table)
    if warning:
        print(f"shiftflow: warning: {warning}", file=sys.stderr)
    return 0


def unrelated_labels_warning(table: pd.DataFrame) -> str | None:
    """A warning when no candidate's scores rank these labels better than chance
    (``shiftlib.realized.at_chance``: every realised AUC ≤ ``CHANCE_AUC``, two classes): the labels may be another
    batch's, or in another row order (helper-39's night-2 file given for night 1 was taken silently: AUC 0.52
    against an estimated accuracy of 0.95). Such records feed the next retrains' correction, so the warning says
    how to replace them. None otherwise (a multi-class run has no AUC here)."""
    from shiftlib.realized import CHANCE_AUC, at_chance

    if not at_chance(table["realized_auc"]):
        return None
    return (f"no candidate's scores tell these labels' classes apart better than chance (realised AUC ≤ "
            f"{CHANCE_AUC} for all {len(table)}): either no model carries over to this batch, or the file is another "
            "batch's or in another row order; in the second case run `shiftflow evaluate` again with the right file "
            "(with --id-column to match rows by key): it replaces these records, which the next retrains of this "
            "model learn from")


if __name__ == "__main__":
    sys.exit(main())
