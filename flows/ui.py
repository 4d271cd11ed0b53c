"""``shiftflow ui``: the MLflow UI on the local tracking store, stopped cleanly.

``mlflow ui`` starts MLflow's job-execution consumers (about 205 MB each) that outlived it. This starts
``mlflow server`` the way ``shiftflow up`` does (STACK_NOTES: ``MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false``,
one worker, 127.0.0.1 only) in a process group of its own, and on Ctrl-C or SIGTERM stops that group and
every descendant (``flows.stack.procs.stop_process``). Killed outright (SIGKILL), it leaves that to the
server's guard (``flows.stack.guard``). Imports neither mlflow nor prefect.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flows.paths import missing_sqlite_store, shiftflow_home
from flows.stack.http import HOST, port_free
from flows.stack.procs import (
    ServiceError,
    process_start_time,
    process_tree,
    stop_as_interrupt,
    stop_process,
)

__all__ = ["DEFAULT_PORT", "UiServer", "local_store", "main", "running_ui", "ui_command"]

DEFAULT_PORT = 5000
START_TIMEOUT_S = 180.0  # `mlflow server` is up in ~6 s on an idle box; a loaded 2-core box takes longer


def default_store() -> str:
    """The sqlite store ``shiftflow retrain`` writes by default: ``$SHIFTFLOW_HOME/mlflow.db``."""
    return f"sqlite:///{(shiftflow_home() / 'mlflow.db').resolve()}"


def local_store(tracking_uri: str | None = None) -> str:
    """The tracking URI to show: ``tracking_uri``, else ``$MLFLOW_TRACKING_URI``, else :func:`default_store`."""
    return tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or default_store()


def ui_command(tracking_uri: str, port: int, artifacts: Path) -> list[str]:
    """``mlflow server`` on 127.0.0.1:``port`` with one worker, serving ``tracking_uri``, under
    ``flows.stack.guard``: a ``shiftflow ui`` killed outright takes the server down with it."""
    return [sys.executable, "-m", "flows.stack.guard", "mlflow", "server", "--host", HOST, "--port", str(port),
            "--workers", "1", "--backend-store-uri", tracking_uri, "--artifacts-destination", str(artifacts.resolve())]


def _check_store(tracking_uri: str) -> None:
    if tracking_uri.startswith(("http://", "https://")):
        raise ServiceError(f"{tracking_uri} is a tracking server: open it in a browser, it is its own UI")
    db = missing_sqlite_store(tracking_uri)
    if db is not None:
        raise ServiceError(f"no MLflow store at {db}: run `shiftflow retrain` first, or point --tracking-uri "
                           "(or SHIFTFLOW_HOME) at the store your runs used")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError, TimeoutError):
        return False


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join("    " + s for s in path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "    (no log written)"


@dataclass
class UiServer:
    """A running MLflow UI: its URL, process record (``pid``, ``pgid``, ``start_time``) and log file."""

    url: str
    entry: dict[str, Any]
    log: Path
    proc: subprocess.Popen[bytes] = field(repr=False)

    def processes(self) -> dict[int, int]:
        """{pid: start time} of the server's group and every descendant."""
        return process_tree(self.entry["pid"], self.entry["pgid"])

    def stop(self, timeout_s: float = 20.0) -> str:
        """SIGTERM the group (twice), then SIGKILL; returns what happened."""
        how = stop_process(self.entry, timeout_s=timeout_s)
        self.proc.wait(timeout=10)  # reap the leader
        return how


@contextmanager
def running_ui(tracking_uri: str | None = None, *, port: int = DEFAULT_PORT, timeout_s: float = START_TIMEOUT_S,
               environ: Mapping[str, str] | None = None) -> Iterator[UiServer]:
    """Start the UI, wait until it answers, yield it, stop it (also when the block raises).

    Raises ``ServiceError`` naming the problem: no store, port taken, the server exited or did not answer."""
    uri = local_store(tracking_uri)
    _check_store(uri)
    if not port_free(port):
        raise ServiceError(f"port {port} of {HOST} is taken (another `shiftflow ui` or `shiftflow up`?); "
                           "pass --port with a free one")
    home = shiftflow_home()
    log = home / "logs" / "ui.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ if environ is None else environ)
    env.pop("MLFLOW_TRACKING_URI", None)
    env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"  # no job consumers to orphan (STACK_NOTES)
    cmd = ui_command(uri, port, home / "mlartifacts")
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    server = UiServer(url=f"http://{HOST}:{port}", log=log, proc=proc,
                      entry={"pid": proc.pid, "pgid": proc.pid, "start_time": process_start_time(proc.pid)})
    try:
        deadline = time.monotonic() + timeout_s
        while not _answers(f"{server.url}/health"):
            if proc.poll() is not None:
                raise ServiceError(f"the MLflow server exited with code {proc.returncode}; its log {log}:\n"
                                   f"{_tail(log)}")
            if time.monotonic() > deadline:
                raise ServiceError(f"the MLflow server did not answer on {server.url} within {timeout_s:.0f} s; "
                                   f"its log {log}:\n{_tail(log)}")
            time.sleep(0.5)
        yield server
    finally:
        if proc.poll() is None or server.processes():
            server.stop()


def serve(tracking_uri: str | None = None, *, port: int = DEFAULT_PORT, timeout_s: float = START_TIMEOUT_S,
          echo: Callable[[str], None] = print) -> int:
    """Run the UI until Ctrl-C or SIGTERM (both stop it cleanly, exit code 0); returns the exit code."""
    try:
        with stop_as_interrupt(), running_ui(tracking_uri, port=port, timeout_s=timeout_s) as ui:
            echo(f"MLflow UI: {ui.url}  (store {local_store(tracking_uri)}; switch the UI to \"Model training\")")
            echo("Ctrl-C stops it.")
            while ui.proc.poll() is None:
                time.sleep(0.5)
            echo(f"shiftflow ui: the MLflow server exited with code {ui.proc.returncode}; log {ui.log}")
            return 1
    except KeyboardInterrupt:
        echo("shiftflow ui: stopped")
        return 0
    except ServiceError as exc:
        echo(f"shiftflow ui: {exc}")
        return 1


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The ``shiftflow ui`` flags (shared with ``python -m flows.ui``)."""
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port on {HOST} (default {DEFAULT_PORT})")
    p.add_argument("--tracking-uri", help="tracking store to show (default: $MLFLOW_TRACKING_URI, else "
                   "$SHIFTFLOW_HOME/mlflow.db, the store `shiftflow retrain` writes)")
    p.add_argument("--timeout", type=float, default=START_TIMEOUT_S,
                   help=f"seconds to wait for the server to answer (default {START_TIMEOUT_S:.0f})")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = add_arguments(argparse.ArgumentParser(prog="shiftflow ui", description=__doc__.split("\n")[0]))
    ns = p.parse_args(argv)
    return serve(ns.tracking_uri, port=ns.port, timeout_s=ns.timeout)


if __name__ == "__main__":
    raise SystemExit(main())
