"""``shiftflow score`` (the flags, the refusals before the flow runs, the printed report); the flow is
``flows.score.score_batch``. Nothing here imports Prefect or MLflow at import time: ``shiftflow --help`` and a
refused input start neither."""

from __future__ import annotations

import argparse

from flows.config import ScoreConfig


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The ``shiftflow score`` flags (``flows.config.ScoreConfig``)."""
    fields = ScoreConfig.model_fields
    p.add_argument("--model", required=True, help=fields["model"].description)
    p.add_argument("--batch", required=True, help=fields["batch"].description)
    p.add_argument("--out", required=True, help=fields["out"].description)
    p.add_argument("--overwrite", action="store_true", help=fields["overwrite"].description)
    p.add_argument("--id-column", help=fields["id_column"].description)
    p.add_argument("--min-accuracy", type=float, help=fields["min_accuracy"].description)
    p.add_argument("--monitor-rows", type=int, default=fields["monitor_rows"].default,
                   help=fields["monitor_rows"].description)
    p.add_argument("--seed", type=int, default=0, help=fields["seed"].description)
    p.add_argument("--tracking-uri", help=fields["tracking_uri"].description)
    p.add_argument("--experiment", default=fields["experiment"].default, help=fields["experiment"].description)
    p.add_argument("--debug", action="store_true", help="keep the traceback of a refused input")
    return p


def run(ns: argparse.Namespace) -> int:
    """``shiftflow score`` on parsed flags: 0 done, 2 refused (one line); what ``shiftflow.cli.main`` returns."""
    import time

    t_start = time.perf_counter()  # the closing line counts the whole command, as retrain's does
    from flows.api import early_api, use_api
    from flows.score import score_batch, summary_lines

    config = ScoreConfig(model=ns.model, batch=ns.batch, out=ns.out, overwrite=ns.overwrite,
                         id_column=ns.id_column, min_accuracy=ns.min_accuracy, monitor_rows=ns.monitor_rows,
                         seed=ns.seed, tracking_uri=ns.tracking_uri, experiment=ns.experiment)
    from tasks.scoring import check_out, parse_model_ref

    parse_model_ref(config.model)  # what needs no store is refused before anything starts
    check_out(config.out, overwrite=config.overwrite)
    api = early_api()
    _refuse_early(config)  # the store's answers, read while Prefect's temporary API boots
    use_api(api)
    summary = score_batch(config)
    for line in summary_lines(summary):
        print(line)
    print(f"MLflow run {summary['mlflow_run_id']}; scoring took {summary['seconds']:.1f} s "
          f"({time.perf_counter() - t_start:.1f} s in all, with the input checks and the start of Prefect and MLflow)")
    return 0


def _refuse_early(config: ScoreConfig) -> None:
    """What the store can refuse before the flow runs, writing nothing: a sqlite store that does not exist, a
    model, alias or version it does not have (the reference's form and the output were checked before)."""
    from mlflow.tracking import MlflowClient

    from flows.paths import missing_sqlite_store
    from flows.retrain import tracking_uri
    from tasks.scoring import ScoreInputError, parse_model_ref, resolve_version

    uri = tracking_uri(config)
    db = missing_sqlite_store(uri)
    if db is not None:
        raise ScoreInputError(f"no MLflow store at {db}: pass --tracking-uri (or set MLFLOW_TRACKING_URI) to the "
                              "store the model was registered in")
    resolve_version(MlflowClient(uri), parse_model_ref(config.model))
