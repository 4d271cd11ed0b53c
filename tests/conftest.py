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


@pytest.fixture(scope="session")
def session_tmp() -> Path:
    return _TMP
