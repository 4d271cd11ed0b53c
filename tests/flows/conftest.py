"""The local service stack (`shiftflow up`) for the slow tests of this package.

One stack per test session of ``tests/flows`` (package scope): a Prefect server, an MLflow server and a
process worker serving ``retrain-nightly``, on free ports, in a temp ``SHIFTFLOW_HOME`` with its own
``PREFECT_HOME``. The server URLs go only to the child processes and to the clients the tests make (no
environment leaks into other tests). Teardown runs ``shiftflow down``.

``test_services.py::test_down_stops_every_recorded_process`` stops the stack on purpose (the last module
of the package to use it); the ``stack`` fixture starts it again, on the same ports, for any test that
runs after that.

Also the small tables of the door's tests (``door_frame``, ``write_table``: ``test_preflight.py``, ``test_retrain.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from flows.paths import PROJECT_DIR
from flows.stack import RECORD_NAME, free_port, read_record

UP_TIMEOUT_S = 600  # per service; a loaded 2-core box has taken 70–140 s for the whole `up`


def shiftflow_cli(args: list[str], env: dict[str, str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """``python -m flows.cli ARGS`` from the project folder."""
    return subprocess.run([sys.executable, "-m", "flows.cli", *args], cwd=PROJECT_DIR, env=env, text=True,
                          capture_output=True, timeout=timeout_s)


def _answers_html(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status == 200 and b"<html" in resp.read(4096).lower()
    except (urllib.error.URLError, OSError, TimeoutError):
        return False


def wait_for_uis(urls: list[str], timeout_s: float) -> float:
    """Seconds until every UI's page (``GET /``) answers with HTML; raises after ``timeout_s``."""
    t0 = time.monotonic()
    pending = list(urls)
    while pending:
        pending = [u for u in pending if not _answers_html(u)]
        if pending and time.monotonic() - t0 > timeout_s:
            raise AssertionError(f"UIs {pending} did not answer within {timeout_s:.0f} s")
        if pending:
            time.sleep(0.5)
    return time.monotonic() - t0


SERVICE_UNAVAILABLE_TRIES = 6  # Prefect's own client retries a 503 up to 5 times (PREFECT_CLIENT_MAX_RETRIES)


def prefect_rest(api_url: str, timeout_s: float = 60) -> Any:
    """An ``httpx.Client`` on the Prefect REST API that retries a 503, as Prefect's own client does.

    Prefect 3.9's server answers 503 ("retryable") when its sqlite database is locked: a DEFERRED transaction
    that reads, then writes while the worker's poll writes, fails at once (prefect/server/database/
    configurations.py; seen in CI on ``create_flow_run``). The UI shows it as "Oops. Something went wrong."
    """
    import httpx

    class _Retry503(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            for i in range(SERVICE_UNAVAILABLE_TRIES - 1):
                res = super().handle_request(request)
                if res.status_code != 503:
                    return res
                res.close()
                time.sleep(min(2.0 ** i, 10.0))
            return super().handle_request(request)

    return httpx.Client(base_url=api_url, timeout=timeout_s, transport=_Retry503())


def _up(info: dict[str, Any]) -> None:
    t0 = time.monotonic()
    res = shiftflow_cli(["up", "--prefect-port", str(info["prefect_port"]), "--mlflow-port",
                         str(info["mlflow_port"]), "--timeout", str(UP_TIMEOUT_S)], info["env"], timeout_s=1800)
    info["up"] = res
    info["up_seconds"] = time.monotonic() - t0
    print(f"\n[shiftflow up] {info['up_seconds']:.1f} s\n{res.stdout}\n{res.stderr}")
    assert res.returncode == 0, f"shiftflow up failed:\n{res.stdout}\n{res.stderr}"
    # both UIs answering, counted from the start of `up` (the servers' /health answers before the UI does)
    info["ui_seconds"] = info["up_seconds"] + wait_for_uis([info["prefect_url"], info["mlflow"]], 120)
    print(f"[stack] up → both UIs answering: {info['ui_seconds']:.1f} s")
    info["record"] = read_record(info["home"] / RECORD_NAME)


@pytest.fixture(scope="package")
def _stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("services")
    prefect_port = free_port()
    mlflow_port = free_port()
    while mlflow_port == prefect_port:
        mlflow_port = free_port()
    env = dict(os.environ)
    for k in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "PREFECT_PROFILE"):
        env.pop(k, None)
    env.update(SHIFTFLOW_HOME=str(root / "home"), PREFECT_HOME=str(root / "prefect-home"),
               PREFECT_RESULTS_LOCAL_STORAGE_PATH=str(root / "prefect-results"),
               PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="true")
    info: dict[str, Any] = {
        "root": root, "env": env, "home": root / "home", "prefect_port": prefect_port, "mlflow_port": mlflow_port,
        "prefect_url": f"http://127.0.0.1:{prefect_port}", "prefect_api": f"http://127.0.0.1:{prefect_port}/api",
        "mlflow": f"http://127.0.0.1:{mlflow_port}",
    }
    try:
        _up(info)
        yield info
    finally:
        if (root / "home" / RECORD_NAME).exists():  # not yet stopped by test_services' test_down
            res = shiftflow_cli(["down"], env, timeout_s=300)
            print(f"\n[shiftflow down] {res.stdout}\n{res.stderr}")


@pytest.fixture
def stack(_stack: dict[str, Any]) -> dict[str, Any]:
    """The package's stack, started again on the same ports if a test stopped it."""
    if not (_stack["home"] / RECORD_NAME).exists():
        _up(_stack)
    return _stack


def copy_screenshots(paths: list[Path], dest: str | None) -> list[Path]:
    """Copy ``paths`` into ``dest`` (created) when given; returns the copies."""
    if not dest:
        return []
    import shutil

    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copy2(p, out / p.name)) for p in paths]


# --------------------------------------------------------------------------------------------- the door's tables

DOOR_ROWS = 40


def door_frame(n: int = DOOR_ROWS, seed: int = 0) -> pd.DataFrame:
    """``n`` rows: two numeric columns, a text column with non-ASCII levels and a two-class ``target``."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"mean radius": rng.normal(14, 3, n), "mean texture": rng.normal(19, 4, n),
                         "cät": rng.choice(["ä", "ö"], n), "target": np.tile([0, 1], n // 2 + 1)[:n]})


def write_table(df: pd.DataFrame, path: Path, **kw) -> str:
    """Write ``df`` as Parquet or CSV (by ``path``'s suffix); returns its ``file:`` spec."""
    if path.suffix == ".parquet":
        df.to_parquet(path)
    else:
        df.to_csv(path, index=False, **kw)
    return f"file:{path}"
