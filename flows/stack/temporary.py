"""Prefect's temporary local API for one CLI run, started as soon as the inputs are accepted.

With no ``PREFECT_API_URL``, Prefect starts this API itself (``prefect.server.api.server.SubprocessASGIServer``)
when the flow first calls it: it imports the whole server application into the calling process (about 6 s
here) and only then launches the uvicorn subprocess, which imports it again and creates or migrates the
database (``reports/overhead.md``). Written by hand for that reason: the same subprocess, with the same
command and environment as Prefect's ``_run_uvicorn_command``, is launched here right after the preflight,
without importing Prefect, so that it boots on the second core while this process imports the flow's
modules. The run then points ``PREFECT_API_URL`` at it and stops it at the end, as Prefect does with its own.
If it does not come up, the run falls back to Prefect's own temporary server. Two differences from Prefect's:
it runs in its own session (a group signal reaches the run first, which then stops it), and it exits by
itself when the run's process is gone (``flows.stack.guard``: a SIGKILLed run leaves no server behind).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

from flows.stack.http import HOST, free_port, healthy

__all__ = ["TemporaryAPI", "start_temporary_api"]


class TemporaryAPI:
    """A uvicorn subprocess serving Prefect's API (no UI, no background services) on 127.0.0.1."""

    def __init__(self, process: subprocess.Popen, port: int) -> None:
        self.process, self.port = process, port
        atexit.register(self.stop)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/api"

    def wait(self, timeout_s: float = 120.0) -> bool:
        """True once the API answers ``/health``; False (and stopped) when it exits or times out."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            if healthy(f"{self.url}/health"):
                return True
            time.sleep(0.1)
        self.stop()
        return False

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_temporary_api(environ: dict[str, str] | None = None) -> TemporaryAPI | None:
    """Launch the API subprocess (it answers about 10–20 s later: ``TemporaryAPI.wait``).

    The caller checks first that no ``PREFECT_API_URL`` is configured. Returns None when Prefect cannot be
    found (the run then leaves it to Prefect)."""
    spec = importlib.util.find_spec("prefect")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        return None
    app_dir = Path(next(iter(spec.submodule_search_locations))).parent
    port = free_port()
    env = dict(os.environ if environ is None else environ)
    # as SubprocessASGIServer._run_uvicorn_command: no UI, the ephemeral app (no loop services); and no block
    # type registration (about 1 s on a new database): a CLI run uses no blocks, and the next `prefect server
    # start` or `shiftflow up` on this PREFECT_HOME registers them
    env |= {"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1",
            "PREFECT_API_BLOCKS_REGISTER_ON_START": "false"}
    cmd = [sys.executable, "-m", "flows.stack.guard", "uvicorn", "--app-dir", str(app_dir), "--factory",
           "prefect.server.api.server:create_app", "--host", HOST, "--port", str(port), "--log-level", "error",
           "--lifespan", "on"]
    with contextlib.suppress(OSError):
        # its own session: Ctrl-C or a group signal reaches the run, which reports its end to this API, then
        # stops it (atexit); sharing the group, the API died first and the run's last calls failed for minutes.
        # A run killed outright (SIGKILL) leaves it to its guard (flows.stack.guard).
        return TemporaryAPI(subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, start_new_session=True), port)
    return None
