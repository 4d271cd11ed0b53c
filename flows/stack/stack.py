"""``shiftflow up`` / ``shiftflow down``: start and stop the local service stack, bound to 127.0.0.1 only.

``up`` starts

- a Prefect server (``prefect server start``, default port 4200),
- an MLflow tracking server (``mlflow server``, default port 5000) on the store CLI runs use
  (``$SHIFTFLOW_HOME/mlflow.db``, artifacts in ``$SHIFTFLOW_HOME/mlartifacts``) with STACK_NOTES' lean settings,
- a process worker on the ``local-process`` work pool, after creating the pool if absent and running
  ``prefect --no-prompt deploy --all`` from the project folder (``prefect.yaml``: ``retrain-nightly``).

Each is started with ``subprocess.Popen(start_new_session=True)`` (own process group), logs to
``$SHIFTFLOW_HOME/logs/<name>.log``, and is recorded (pid, process-group id, start time) in
``$SHIFTFLOW_HOME/services.json`` (:mod:`flows.stack.record`). ``down`` stops exactly the recorded processes
(and what they started, :mod:`flows.stack.procs`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flows.paths import PROJECT_DIR, default_run_root
from flows.stack.http import HOST, healthy, http_json, port_free
from flows.stack.procs import DEFAULT_STOP_TIMEOUT_S, ServiceError, is_alive, process_start_time, stop_process
from flows.stack.record import RECORD_NAME, read_record, write_record

__all__ = [
    "DEFAULT_START_TIMEOUT_S",
    "MLFLOW_SERVER",
    "POOL",
    "PREFECT_SERVER",
    "PREFECT_WORKER",
    "SERVICE_ORDER",
    "Stack",
    "down",
    "up",
]

POOL = "local-process"
WORKER_NAME = "shiftflow-worker"
DEFAULT_PREFECT_PORT = 4200
DEFAULT_MLFLOW_PORT = 5000
DEFAULT_START_TIMEOUT_S = 300.0  # a loaded 2-core box has taken ~55 s for one server

PREFECT_SERVER = "prefect-server"
MLFLOW_SERVER = "mlflow-server"
PREFECT_WORKER = "prefect-worker"
SERVICE_ORDER = (PREFECT_SERVER, MLFLOW_SERVER, PREFECT_WORKER)  # start order; stop is the reverse

#: one service being waited for: its process, its readiness check, what "ready" means, its log
Wait = tuple[subprocess.Popen[bytes], Callable[[], bool], str, Path]


DEFAULT_POOL_CONCURRENCY = 2


@dataclass(frozen=True)
class Stack:
    """Where the local stack lives and listens."""

    home: Path
    prefect_port: int = DEFAULT_PREFECT_PORT
    mlflow_port: int = DEFAULT_MLFLOW_PORT
    #: flow runs the worker takes at once (the work pool's concurrency limit); more wait in the queue
    pool_concurrency: int = DEFAULT_POOL_CONCURRENCY

    @property
    def prefect_url(self) -> str:
        return f"http://{HOST}:{self.prefect_port}"

    @property
    def prefect_api_url(self) -> str:
        return f"{self.prefect_url}/api"

    @property
    def mlflow_url(self) -> str:
        return f"http://{HOST}:{self.mlflow_port}"

    @property
    def record_path(self) -> Path:
        return self.home / RECORD_NAME

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    @property
    def server_dir(self) -> Path:
        return self.home / "server"

    def log_path(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def health_url(self, name: str) -> str:
        """The URL that answers 200 once server ``name`` is up."""
        return f"{self.prefect_api_url}/health" if name == PREFECT_SERVER else f"{self.mlflow_url}/health"


# --------------------------------------------------------------------------------------------- commands


def base_env(stack: Stack, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment of every child: telemetry off (STACK_NOTES), the home and project folders."""
    env = dict(os.environ if environ is None else environ)
    env.update(
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="true",
        # the server's log names each 503 it answers (a locked sqlite database; docs/operating.md)
        PREFECT_SERVER_LOG_RETRYABLE_ERRORS="true",
        # the run root CLI runs of this shell use: deployment runs keep their stages beside them (one store)
        SHIFTFLOW_RUN_ROOT=str(default_run_root(env)),
        SHIFTFLOW_HOME=str(stack.home),
        SHIFTFLOW_PROJECT_DIR=str(PROJECT_DIR),  # prefect.yaml's pull step (resolved when a run starts)
    )
    return env


def client_env(stack: Stack, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment of processes that talk to the stack (deploy, worker and its flow runs)."""
    env = base_env(stack, environ)
    env.update(PREFECT_API_URL=stack.prefect_api_url, MLFLOW_TRACKING_URI=stack.mlflow_url)
    return env


def _python_cli(module: str) -> list[str]:
    return [sys.executable, "-m", module]


def service_commands(stack: Stack) -> dict[str, list[str]]:
    """The command line of each service."""
    db = (stack.home / "mlflow.db").resolve()  # the store CLI runs write to (tasks.tracking.default_tracking_uri)
    return {
        PREFECT_SERVER: [*_python_cli("prefect"), "server", "start", "--host", HOST,
                         "--port", str(stack.prefect_port), "--analytics-off"],
        MLFLOW_SERVER: [*_python_cli("mlflow"), "server", "--host", HOST, "--port", str(stack.mlflow_port),
                        "--workers", "1", "--backend-store-uri", f"sqlite:///{db}",
                        # file artifact locations, as CLI runs' experiments have: either side reads the other's
                        "--default-artifact-root", (stack.home / "mlartifacts").resolve().as_uri(),
                        "--no-serve-artifacts"],
        PREFECT_WORKER: [*_python_cli("prefect"), "worker", "start", "--pool", POOL, "--type", "process",
                         "--name", WORKER_NAME, "--install-policy", "never"],
    }


def service_env(name: str, stack: Stack, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of service ``name``."""
    if name == PREFECT_SERVER:
        env = base_env(stack, environ)
        env["PREFECT_API_URL"] = stack.prefect_api_url
        return env
    if name == MLFLOW_SERVER:
        env = base_env(stack, environ)
        env.pop("MLFLOW_TRACKING_URI", None)
        env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
        return env
    return client_env(stack, environ)


# --------------------------------------------------------------------------------------------- processes


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return "(no log written)"
    return "\n".join("    " + line for line in text[-lines:])


def start_process(name: str, cmd: list[str], env: Mapping[str, str], log_path: Path, cwd: Path) -> tuple[
        subprocess.Popen[bytes], dict[str, Any]]:
    """Popen in a new session (own process group), stdout+stderr appended to ``log_path``; returns the
    process and its record entry."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        log.write(f"\n=== {datetime.now(UTC).isoformat()} shiftflow up: {' '.join(cmd)}\n".encode())
        log.flush()
        proc = subprocess.Popen(cmd, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    entry = {"pid": proc.pid, "pgid": os.getpgid(proc.pid), "start_time": process_start_time(proc.pid),
             "cmd": cmd, "log": str(log_path), "started_at": datetime.now(UTC).isoformat()}
    return proc, entry


class _StartError(ServiceError):
    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.service = name


def _check_wait(name: str, wait: Wait, t0: float, timeout_s: float) -> bool:
    """True once ``name`` is ready; raises when it exited or ran out of time."""
    proc, ready, what, log_path = wait
    if ready():
        return True
    code = proc.poll()
    if code is not None:
        raise _StartError(name, f"{name} exited with code {code} before {what}; see {log_path}:\n{_tail(log_path)}")
    if time.monotonic() - t0 > timeout_s:
        raise _StartError(name, f"{name} did not become ready ({what}) within {timeout_s:.0f} s; see "
                          f"{log_path}:\n{_tail(log_path)}\nIf the machine is just slow, retry with a "
                          "longer --timeout.")
    return False


def wait_all(waits: Mapping[str, Wait], timeout_s: float, echo: Callable[[str], None] | None = None) -> dict[str, float]:
    """Poll every ``ready`` check together (each service timed on its own); raise on the first failure."""
    t0 = time.monotonic()
    done: dict[str, float] = {}
    while True:
        for name, wait in waits.items():
            if name not in done and _check_wait(name, wait, t0, timeout_s):
                done[name] = time.monotonic() - t0
                if echo is not None:
                    echo(f"{name}: ready after {done[name]:.1f} s ({wait[2]})")
        if len(done) == len(waits):
            return done
        time.sleep(0.5)


def _worker_online(stack: Stack, since: datetime) -> bool:
    try:
        status, workers = http_json(f"{stack.prefect_api_url}/work_pools/{POOL}/workers/filter", data={})
    except (urllib.error.URLError, OSError, TimeoutError):
        return False
    if status != 200 or not isinstance(workers, list):
        return False
    for w in workers:
        if w.get("name") != WORKER_NAME or not w.get("last_heartbeat_time"):
            continue
        beat = datetime.fromisoformat(str(w["last_heartbeat_time"]).replace("Z", "+00:00"))
        if beat >= since:
            return True
    return False


def _run_cli(args: list[str], env: Mapping[str, str], log_path: Path, what: str, timeout_s: float) -> float:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with open(log_path, "ab") as log:
        log.write(f"\n=== {datetime.now(UTC).isoformat()} shiftflow up: {' '.join(args)}\n".encode())
        log.flush()
        try:
            res = subprocess.run(args, cwd=PROJECT_DIR, env=dict(env), stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise ServiceError(f"{what} took longer than {timeout_s:.0f} s; see {log_path}:\n{_tail(log_path)}") from exc
    if res.returncode != 0:
        raise ServiceError(f"{what} failed (exit {res.returncode}); see {log_path}:\n{_tail(log_path)}")
    return time.monotonic() - t0


def ensure_work_pool(stack: Stack, env: Mapping[str, str], timeout_s: float) -> bool:
    """Create the process work pool unless it exists, and set its concurrency limit (flow runs at once) to
    ``stack.pool_concurrency``; True if created."""
    try:
        status, _ = http_json(f"{stack.prefect_api_url}/work_pools/{POOL}", timeout_s=60.0)
    except (urllib.error.URLError, OSError) as exc:
        raise ServiceError(f"Prefect API {stack.prefect_api_url} stopped answering ({exc}); see "
                           f"{stack.log_path(PREFECT_SERVER)}") from exc
    if status not in (200, 404):
        raise ServiceError(f"Prefect API answered {status} for work pool {POOL!r}; see {stack.log_path(PREFECT_SERVER)}")
    if status == 404:
        _run_cli([*_python_cli("prefect"), "--no-prompt", "work-pool", "create", POOL, "--type", "process"], env,
                 stack.log_path("work-pool"), f"creating work pool {POOL!r}", timeout_s)
    _run_cli([*_python_cli("prefect"), "work-pool", "set-concurrency-limit", POOL, str(stack.pool_concurrency)],
             env, stack.log_path("work-pool"), f"limiting work pool {POOL!r} to {stack.pool_concurrency} runs",
             timeout_s)
    return status == 404


# --------------------------------------------------------------------------------------------- up / down


@dataclass
class _Launcher:
    """Starts the services ``up`` still needs; owns the record (saved after every start) and the timings."""

    stack: Stack
    running: Mapping[str, Any]
    timeout_s: float
    echo: Callable[[str], None]
    environ: Mapping[str, str] | None
    record: dict[str, Any] = field(init=False)
    timings: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.record = {"version": 1, "home": str(self.stack.home), "project_dir": str(PROJECT_DIR),
                       "ports": {"prefect": self.stack.prefect_port, "mlflow": self.stack.mlflow_port},
                       "services": dict(self.running)}

    def save(self) -> None:
        write_record(self.stack.record_path, self.record)

    def launch(self, name: str, cwd: Path) -> subprocess.Popen[bytes]:
        """Start service ``name`` and record it at once (so ``down`` can stop it whatever happens next)."""
        log = self.stack.log_path(name)
        proc, entry = start_process(name, service_commands(self.stack)[name],
                                    service_env(name, self.stack, self.environ), log, cwd)
        self.record["services"][name] = entry
        self.save()
        self.echo(f"{name}: started (pid {proc.pid}), log {log}")
        return proc

    def start_servers(self) -> None:
        """The two servers, in parallel, until both answer their health URL."""
        waits: dict[str, Wait] = {}
        for n in (PREFECT_SERVER, MLFLOW_SERVER):
            if n not in self.running:
                proc = self.launch(n, self.stack.server_dir if n == MLFLOW_SERVER else self.stack.home)
                url = self.stack.health_url(n)
                waits[n] = (proc, lambda u=url: healthy(u), f"{url} answered", self.stack.log_path(n))
        self.timings.update(wait_all(waits, self.timeout_s, self.echo))

    def start_worker(self) -> None:
        """The work pool (if absent), the deployments, then the worker until it heartbeats."""
        if PREFECT_WORKER in self.running:
            return
        env = client_env(self.stack, self.environ)
        created = ensure_work_pool(self.stack, env, self.timeout_s)
        self.echo(f"work pool {POOL!r}: {'created' if created else 'exists'}")
        log = self.stack.log_path("deploy")
        dt = _run_cli([*_python_cli("prefect"), "--no-prompt", "deploy", "--all"], env, log,
                      "`prefect --no-prompt deploy --all`", self.timeout_s)
        self.timings["deploy"] = dt
        self.echo(f"deployments from {PROJECT_DIR / 'prefect.yaml'}: deployed in {dt:.1f} s, log {log}")
        since = datetime.now(UTC)
        proc = self.launch(PREFECT_WORKER, PROJECT_DIR)
        wait = (proc, lambda: _worker_online(self.stack, since), f"heartbeat in work pool {POOL!r}",
                self.stack.log_path(PREFECT_WORKER))
        self.timings.update(wait_all({PREFECT_WORKER: wait}, self.timeout_s, self.echo))

    def drop(self, name: str) -> None:
        """Stop a service that failed to come up and remove it from the record (the others stay recorded)."""
        entry = self.record["services"].pop(name, None)
        if entry is not None:
            try:
                stop_process(entry, timeout_s=10.0)
            except ServiceError:
                self.record["services"][name] = entry
        if self.record["services"]:
            self.save()
        else:
            self.stack.record_path.unlink(missing_ok=True)


def _running(record: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    if not record:
        return {}
    return {n: e for n, e in record["services"].items() if is_alive(int(e["pid"]), e.get("start_time"))}


def _check_port_numbers(stack: Stack) -> None:
    """Refuse a port that is not a TCP port, or the same port for both servers."""
    for flag, port in (("--prefect-port", stack.prefect_port), ("--mlflow-port", stack.mlflow_port)):
        if not 1 <= port <= 65535:
            raise ServiceError(f"{flag} {port} is not a TCP port; give a number from 1 to 65535 (above 1023 unless you mean a system port)")
    if stack.prefect_port == stack.mlflow_port:
        raise ServiceError(f"--prefect-port and --mlflow-port are both {stack.prefect_port}; give two different ports")


def _check_recorded_ports(stack: Stack, record: Mapping[str, Any] | None, running: Mapping[str, Any]) -> None:
    """Refuse other ports than those of the services already running."""
    if record and running:
        ports = record.get("ports", {})
        if (ports.get("prefect"), ports.get("mlflow")) != (stack.prefect_port, stack.mlflow_port):
            raise ServiceError(
                f"services already run from {stack.record_path} on ports prefect={ports.get('prefect')}, "
                f"mlflow={ports.get('mlflow')}; run `shiftflow down` first to change ports"
            )


def _refuse_taken_ports(stack: Stack, running: Mapping[str, Any]) -> None:
    """Before starting anything: a needed port taken by someone else is an error."""
    for n, port, flag in ((PREFECT_SERVER, stack.prefect_port, "--prefect-port"),
                          (MLFLOW_SERVER, stack.mlflow_port, "--mlflow-port")):
        if n not in running and not port_free(port):
            raise ServiceError(
                f"port {port} on {HOST} is already in use by a program `shiftflow up` did not start "
                f"(needed by {n}); stop that program or pick another port with {flag}"
            )


def up(stack: Stack, *, timeout_s: float = DEFAULT_START_TIMEOUT_S, echo: Callable[[str], None] = print,
       environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Start whatever part of the stack is not running. Idempotent.

    Parameters
    ----------
    stack : Stack
        Home folder and ports.
    timeout_s : float, default 300
        Per service: how long to wait until it answers (server) or heartbeats (worker).
    echo : callable, default print
        Where progress lines go.
    environ : mapping, optional
        Base environment of the children (default ``os.environ``).

    Returns
    -------
    dict
        The record written to ``$SHIFTFLOW_HOME/services.json``.

    Raises
    ------
    ServiceError
        Bad or taken ports, a service that exits or does not become ready; the message names the log.
    """
    _check_port_numbers(stack)
    record = read_record(stack.record_path)
    running = _running(record)
    _check_recorded_ports(stack, record, running)
    for n in (n for n in SERVICE_ORDER if n in running):
        echo(f"{n}: already running (pid {running[n]['pid']})")
    if len(running) == len(SERVICE_ORDER):
        _print_urls(stack, echo)
        return dict(record or {})
    _refuse_taken_ports(stack, running)
    stack.server_dir.mkdir(parents=True, exist_ok=True)
    launcher = _Launcher(stack, running, timeout_s, echo, environ)
    try:
        launcher.start_servers()
        launcher.start_worker()
    except _StartError as exc:
        launcher.drop(exc.service)
        raise ServiceError(f"{exc}\nStop whatever did start with `shiftflow down`.") from exc
    except ServiceError as exc:
        raise ServiceError(f"{exc}\nStop whatever did start with `shiftflow down`.") from exc
    launcher.record["startup_seconds"] = {k: round(v, 1) for k, v in launcher.timings.items()}
    launcher.save()
    _print_urls(stack, echo)
    return launcher.record


def _print_urls(stack: Stack, echo: Callable[[str], None]) -> None:
    echo("")
    echo(f"open {stack.prefect_url} to trigger retrain-nightly (Deployments → retrain-nightly → Run)")
    echo(f"open {stack.mlflow_url} to compare runs (switch the UI to \"Model training\")")
    echo(f"for CLI runs against this stack: export PREFECT_API_URL={stack.prefect_api_url} "
         f"MLFLOW_TRACKING_URI={stack.mlflow_url}")
    echo("stop everything with: shiftflow down")


def down(home: Path, *, timeout_s: float = DEFAULT_STOP_TIMEOUT_S, echo: Callable[[str], None] = print,
         only: Iterable[str] | None = None) -> dict[str, str]:
    """Stop exactly the processes recorded in ``home/services.json`` (worker first), remove the record.

    Parameters
    ----------
    home : Path
        ``$SHIFTFLOW_HOME``.
    timeout_s : float, default 20
        Per service: the two SIGTERM waits share it; SIGKILL follows.
    echo : callable, default print
    only : iterable of str, optional
        Stop only these services (default: all recorded).

    Returns
    -------
    dict
        Service name → what happened.

    Raises
    ------
    ServiceError
        A process survived SIGKILL (the record keeps it).
    """
    path = home / RECORD_NAME
    record = read_record(path)
    if record is None:
        echo(f"nothing to stop: no {path} (start the stack with `shiftflow up`)")
        return {}
    services: dict[str, Any] = record["services"]
    order = [n for n in reversed(SERVICE_ORDER) if n in services] + sorted(set(services) - set(SERVICE_ORDER))
    wanted = set(order if only is None else only)
    outcome: dict[str, str] = {}
    errors: list[str] = []
    for n in (n for n in order if n in wanted):
        entry = services[n]
        try:
            outcome[n] = stop_process(entry, timeout_s)
        except ServiceError as exc:
            errors.append(f"{n}: {exc}")
            continue
        echo(f"{n} (pid {entry['pid']}): {outcome[n]}")
        del services[n]
    if errors:
        write_record(path, record)
        raise ServiceError("could not stop every service; the record keeps them:\n" + "\n".join(errors))
    if services:
        write_record(path, record)
    else:
        path.unlink(missing_ok=True)
    return outcome
