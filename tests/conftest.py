"""Hermetic test environment: Prefect home, results and MLflow stores in temp dirs (STACK_NOTES), set
before anything imports prefect."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_TMP = Path(tempfile.mkdtemp(prefix="shiftflow-tests-"))
os.environ["PREFECT_HOME"] = str(_TMP / "prefect")
os.environ["PREFECT_RESULTS_LOCAL_STORAGE_PATH"] = str(_TMP / "prefect-results")
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ["DO_NOT_TRACK"] = "true"
os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "180"
os.environ["SHIFTFLOW_HOME"] = str(_TMP / "shiftflow-home")
os.environ.pop("PREFECT_API_URL", None)
os.environ.pop("MLFLOW_TRACKING_URI", None)

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def prefect_harness():
    """One isolated Prefect API for the session (starting one costs ~6 s)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


def drain_events_worker() -> None:
    """Stop Prefect's events worker so the next event starts one for the API configured then.

    Prefect keeps one events worker per process, keyed by its client type and not by the API URL
    (``prefect.events.worker.EventsWorker.instance``): a worker started while a test pointed this process at
    another server keeps sending there, and every later event of the session is lost (CI, stop 33: the
    score test read no events because ``test_dask`` had started the worker against the stack, since stopped).
    """
    from prefect.events.worker import EventsWorker

    EventsWorker.drain_all(timeout=30, at_exit=False)


@pytest.fixture(scope="module")
def events_to_the_harness(prefect_harness):  # noqa: ARG001 - the harness must be the configured API
    """The harness's API receives this module's events (see :func:`drain_events_worker`)."""
    drain_events_worker()
    yield


@pytest.fixture(scope="session")
def session_tmp() -> Path:
    return _TMP
