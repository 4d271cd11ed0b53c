"""Task runners for the retrain flow: Prefect's thread pool (default) or Dask.

Use: ``retrain.with_options(task_runner=make_task_runner("dask", address="tcp://10.0.0.5:8786"))(config)``.

Dask needs a real Prefect API. Without ``PREFECT_API_URL`` every Dask worker process starts its own
temporary Prefect API (STACK_NOTES: 32 s instead of 10 s for the same work). Run ``shiftflow up`` and
``export PREFECT_API_URL=http://127.0.0.1:4200/api`` (and ``MLFLOW_TRACKING_URI=http://127.0.0.1:5000``)
before the flow starts: a local cluster's workers inherit the flow process's environment; the workers
of an existing cluster (``address=``) must have been started with those variables themselves, and must
see the same filesystem (stage Parquet files, MLflow artifacts); start them with
``dask worker <scheduler> --nthreads 1 --preload flows.retrain`` so the flow's modules are imported before
the first task arrives (see the local cluster's settings below for why).
"""

from __future__ import annotations

import os
import warnings
from typing import Any

KINDS: tuple[str, ...] = ("thread", "dask")


def make_task_runner(kind: str = "thread", address: str | None = None, n_workers: int | None = None) -> Any:
    """A Prefect task runner.

    - ``"thread"``: ``prefect.task_runners.ThreadPoolTaskRunner`` (``n_workers`` threads, default Prefect's);
    - ``"dask"`` with ``address``: ``prefect_dask.DaskTaskRunner`` on the existing scheduler at ``address``
      (e.g. ``tcp://127.0.0.1:8786``);
    - ``"dask"`` without ``address``: a temporary ``distributed.LocalCluster`` of ``n_workers`` (default 2)
      single-threaded worker processes on 127.0.0.1, dashboard off, torn down when the flow ends.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown task runner kind {kind!r}; use one of {', '.join(KINDS)}")
    if n_workers is not None and n_workers < 1:
        raise ValueError(f"n_workers must be at least 1, got {n_workers}")
    if kind == "thread":
        if address is not None:
            raise ValueError(
                f"address={address!r} only applies to kind='dask'; drop it or use make_task_runner('dask', address=...)"
            )
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=n_workers)

    if not os.environ.get("PREFECT_API_URL"):
        warnings.warn(
            "DaskTaskRunner without PREFECT_API_URL: every Dask worker starts its own temporary Prefect API "
            "(slow, runs split across databases). Run `shiftflow up` and export "
            "PREFECT_API_URL=http://127.0.0.1:4200/api before starting the flow.",
            RuntimeWarning,
            stacklevel=2,
        )
    from prefect_dask import DaskTaskRunner

    if address is not None:
        if n_workers is not None:
            raise ValueError(
                f"n_workers={n_workers} only sizes a new local cluster; an existing cluster at {address!r} "
                "keeps its own workers — drop n_workers or drop address"
            )
        if not address.startswith(("tcp://", "tls://", "inproc://", "ucx://", "ws://", "wss://")):
            raise ValueError(f"Dask address {address!r} needs a scheme, e.g. tcp://127.0.0.1:8786")
        return DaskTaskRunner(address=address)
    cluster_kwargs: dict[str, Any] = {
        "n_workers": n_workers or 2,
        "threads_per_worker": 1,
        "processes": True,
        "host": "127.0.0.1",
        "dashboard_address": None,
        # import the flow's modules (prefect, mlflow, scikit-learn, …) while each worker starts, not while it
        # unpickles its first task on its event loop: on a loaded 2-core box that import took > 30 s, the
        # scheduler's default comm timeout, and the workers were dropped mid-run (the flow then waited forever)
        "preload": ["flows.retrain"],
        # Nanny merges these dotted keys into each worker's dask config
        "config": {"distributed.comm.timeouts.tcp": "300s", "distributed.comm.timeouts.connect": "120s"},
    }
    return DaskTaskRunner(cluster_class="distributed.LocalCluster", cluster_kwargs=cluster_kwargs)
