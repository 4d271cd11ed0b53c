"""``shiftflow up`` / ``shiftflow down``: the local service stack, bound to 127.0.0.1 only.

``up`` starts

- a Prefect server (``prefect server start``, default port 4200),
- an MLflow tracking server (``mlflow server``, default port 5000) with a sqlite backend and a local
  artifact store under ``$SHIFTFLOW_HOME/server/`` and STACK_NOTES' lean settings,
- a process worker on the ``local-process`` work pool, after creating the pool if absent and running
  ``prefect --no-prompt deploy --all`` from the project folder (``prefect.yaml``: ``retrain-nightly``).

Each is started with ``subprocess.Popen(start_new_session=True)`` (own process group), logs to
``$SHIFTFLOW_HOME/logs/<name>.log``, and is recorded (pid, process-group id, start time) in
``$SHIFTFLOW_HOME/services.json``. ``down`` stops exactly the recorded processes (and what they started):
SIGTERM to the process group, wait, SIGTERM again (the worker only exits on the second), wait, SIGKILL.

This module imports neither prefect nor mlflow (both take seconds to import on a loaded machine); it
talks to the servers over HTTP and runs their CLIs as child processes.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

PROJECT_DIR = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
POOL = "local-process"
WORKER_NAME = "shiftflow-worker"
RECORD_NAME = "services.json"
DEFAULT_PREFECT_PORT = 4200
DEFAULT_MLFLOW_PORT = 5000
DEFAULT_START_TIMEOUT_S = 300.0  # a loaded 2-core box has taken ~55 s for one server
DEFAULT_STOP_TIMEOUT_S = 20.0

PREFECT_SERVER = "prefect-server"
MLFLOW_SERVER = "mlflow-server"
PREFECT_WORKER = "prefect-worker"
SERVICE_ORDER = (PREFECT_SERVER, MLFLOW_SERVER, PREFECT_WORKER)  # start order; stop is the reverse


class ServiceError(RuntimeError):
    """A service could not be started or stopped; the message names the problem and the fix."""


def shiftflow_home() -> Path:
    """Local state folder (MLflow sqlite store, artifacts, runs, services.json): ``$SHIFTFLOW_HOME`` or
    ``./.shiftflow``."""
    return Path(os.environ.get("SHIFTFLOW_HOME", ".shiftflow")).resolve()


@dataclass(frozen=True)
class Stack:
    """Where the local stack lives and listens."""

    home: Path
    prefect_port: int = DEFAULT_PREFECT_PORT
    mlflow_port: int = DEFAULT_MLFLOW_PORT

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


# --------------------------------------------------------------------------------------------- processes


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (index 0 = state), or None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return raw[raw.rfind(")") + 2:].split()


def process_start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (tells a recorded pid from a recycled one)."""
    st = _proc_stat(pid)
    return int(st[19]) if st else None


def is_alive(pid: int, start_time: int | None = None) -> bool:
    """True if ``pid`` runs (not a zombie) and, when given, started at ``start_time``."""
    st = _proc_stat(pid)
    if st is None:
        if Path("/proc/self/stat").exists():
            return False
        try:  # no /proc (not Linux): fall back to signal 0
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if st[0] in ("Z", "X"):
        return False
    return start_time is None or int(st[19]) == start_time


def _all_procs() -> list[tuple[int, int, int, int]]:
    """(pid, ppid, pgid, start_time) of every live process (Linux /proc)."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        st = _proc_stat(int(entry.name))
        if st is None or st[0] in ("Z", "X"):
            continue
        out.append((int(entry.name), int(st[1]), int(st[2]), int(st[19])))
    return out


def process_tree(pid: int, pgid: int) -> dict[int, int]:
    """{pid: start_time} of the process group ``pgid`` plus every descendant of ``pid`` (Prefect's process
    worker starts each flow run in a new session, so those are outside the worker's group)."""
    if not Path("/proc/self/stat").exists():
        return {pid: 0} if is_alive(pid) else {}
    procs = _all_procs()
    children: dict[int, list[int]] = {}
    for p, pp, _, _ in procs:
        children.setdefault(pp, []).append(p)
    starts = {p: s for p, _, _, s in procs}
    tree = {p: s for p, _, g, s in procs if g == pgid}
    stack = [pid, *tree]
    while stack:
        for c in children.get(stack.pop(), []):
            if c not in tree:
                tree[c] = starts[c]
                stack.append(c)
    return tree


def _signal_tree(pgid: int, tree: Mapping[int, int], sig: int) -> None:
    """One ``sig`` to the group and one to each descendant outside it (never two to the same process)."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for pid, start in tree.items():
        st = _proc_stat(pid)
        if st is not None and int(st[2]) != pgid and is_alive(pid, start):
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


def _wait_gone(tree: Mapping[int, int], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        if not any(is_alive(p, s) for p, s in tree.items()):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def stop_process(entry: Mapping[str, Any], timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> str:
    """Stop one recorded service: SIGTERM its group, wait; SIGTERM again, wait; then SIGKILL.

    Acts only when the recorded leader still runs with its recorded start time (or, the leader gone,
    on processes still in its group). Returns what happened, for the user.
    """
    pid, pgid, start = int(entry["pid"]), int(entry["pgid"]), entry.get("start_time")
    leader_alive = is_alive(pid, start)
    if not leader_alive and is_alive(pid):
        return f"pid {pid} now belongs to another program (recycled pid); left alone"
    if not leader_alive and pgid != pid and is_alive(pgid):
        return f"process group {pgid} now belongs to another program; left alone"
    tree = process_tree(pid, pgid) if leader_alive else {p: s for p, _, g, s in _safe_procs() if g == pgid}
    if not tree:
        return "already stopped"
    steps = [(signal.SIGTERM, timeout_s / 2), (signal.SIGTERM, timeout_s / 2), (signal.SIGKILL, 5.0)]
    for n, (sig, wait_s) in enumerate(steps, 1):
        _signal_tree(pgid, tree, sig)
        if _wait_gone(tree, wait_s):
            how = "SIGTERM" if n == 1 else "two SIGTERMs" if n == 2 else "SIGKILL"
            return f"stopped ({len(tree)} process{'es' if len(tree) > 1 else ''}, {how})"
    left = sorted(p for p, s in tree.items() if is_alive(p, s))
    raise ServiceError(f"processes {left} survived SIGKILL; check `ps -o pid,stat,cmd -p {','.join(map(str, left))}`")


def _safe_procs() -> list[tuple[int, int, int, int]]:
    return _all_procs() if Path("/proc/self/stat").exists() else []


# --------------------------------------------------------------------------------------------- record


def read_record(path: Path) -> dict[str, Any] | None:
    """The services record, or None if absent. A corrupt record is an error naming the file."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ServiceError(
            f"{path} is not valid JSON ({exc}); inspect it, stop the processes it lists by hand, then delete it"
        ) from exc
    if not isinstance(data, dict) or not isinstance(data.get("services"), dict):
        raise ServiceError(f"{path} has no 'services' mapping; inspect it, stop the listed processes, delete it")
    return data


def write_record(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


# --------------------------------------------------------------------------------------------- http


def _http(url: str, data: Any = None, timeout_s: float = 5.0) -> tuple[int, Any]:
    body = None if data is None else json.dumps(data).encode()
    req = urllib.request.Request(url, data=body, method="GET" if data is None else "POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            raw = resp.read()
            status = resp.status
    except urllib.error.HTTPError as exc:
        return exc.code, None
    try:
        return status, json.loads(raw) if raw else None
    except json.JSONDecodeError:
        return status, raw.decode(errors="replace")


def healthy(url: str) -> bool:
    try:
        return _http(url, timeout_s=3.0)[0] == 200
    except (urllib.error.URLError, OSError, TimeoutError):
        return False


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port on 127.0.0.1 nobody listens on right now (for tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return "(no log written)"
    return "\n".join("    " + line for line in text[-lines:])


# --------------------------------------------------------------------------------------------- services


def base_env(stack: Stack, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment of every child: telemetry off (STACK_NOTES), the home and project folders."""
    env = dict(os.environ if environ is None else environ)
    env.update(
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="true",
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
    db = (stack.server_dir / "mlflow.db").resolve()
    return {
        PREFECT_SERVER: [*_python_cli("prefect"), "server", "start", "--host", HOST,
                         "--port", str(stack.prefect_port), "--analytics-off"],
        MLFLOW_SERVER: [*_python_cli("mlflow"), "server", "--host", HOST, "--port", str(stack.mlflow_port),
                        "--workers", "1", "--backend-store-uri", f"sqlite:///{db}",
                        "--artifacts-destination", str((stack.server_dir / "mlartifacts").resolve())],
        PREFECT_WORKER: [*_python_cli("prefect"), "worker", "start", "--pool", POOL, "--type", "process",
                         "--name", WORKER_NAME, "--install-policy", "never"],
    }


def service_env(name: str, stack: Stack, environ: Mapping[str, str] | None = None) -> dict[str, str]:
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


def start_process(name: str, cmd: list[str], env: Mapping[str, str], log_path: Path, cwd: Path) -> tuple[
        subprocess.Popen[bytes], dict[str, Any]]:
    """Popen in a new session (own process group), stdout+stderr appended to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        log.write(f"\n=== {datetime.now(UTC).isoformat()} shiftflow up: {' '.join(cmd)}\n".encode())
        log.flush()
        proc = subprocess.Popen(cmd, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    entry = {"pid": proc.pid, "pgid": os.getpgid(proc.pid), "start_time": process_start_time(proc.pid),
             "cmd": cmd, "log": str(log_path), "started_at": datetime.now(UTC).isoformat()}
    return proc, entry


def wait_all(waits: Mapping[str, tuple[subprocess.Popen[bytes], Callable[[], bool], str, Path]],
             timeout_s: float, echo: Callable[[str], None] | None = None) -> dict[str, float]:
    """Poll every ``ready`` check together (each service timed on its own); raise on the first failure."""
    t0 = time.monotonic()
    done: dict[str, float] = {}
    while True:
        for name, (proc, ready, what, log_path) in waits.items():
            if name in done:
                continue
            if ready():
                done[name] = time.monotonic() - t0
                if echo is not None:
                    echo(f"{name}: ready after {done[name]:.1f} s ({what})")
                continue
            code = proc.poll()
            if code is not None:
                raise _StartError(name, f"{name} exited with code {code} before {what}; see {log_path}:\n"
                                  f"{_tail(log_path)}")
            if time.monotonic() - t0 > timeout_s:
                raise _StartError(name, f"{name} did not become ready ({what}) within {timeout_s:.0f} s; see "
                                  f"{log_path}:\n{_tail(log_path)}\nIf the machine is just slow, retry with a "
                                  "longer --timeout.")
        if len(done) == len(waits):
            return done
        time.sleep(0.5)


class _StartError(ServiceError):
    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.service = name


def _worker_online(stack: Stack, since: datetime) -> bool:
    try:
        status, workers = _http(f"{stack.prefect_api_url}/work_pools/{POOL}/workers/filter", data={})
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
    """Create the process work pool unless it exists; True if created."""
    try:
        status, _ = _http(f"{stack.prefect_api_url}/work_pools/{POOL}", timeout_s=60.0)
    except (urllib.error.URLError, OSError) as exc:
        raise ServiceError(f"Prefect API {stack.prefect_api_url} stopped answering ({exc}); see "
                           f"{stack.log_path(PREFECT_SERVER)}") from exc
    if status == 200:
        return False
    if status != 404:
        raise ServiceError(f"Prefect API answered {status} for work pool {POOL!r}; see {stack.log_path(PREFECT_SERVER)}")
    _run_cli([*_python_cli("prefect"), "--no-prompt", "work-pool", "create", POOL, "--type", "process"], env,
             stack.log_path("work-pool"), f"creating work pool {POOL!r}", timeout_s)
    return True


def _running(record: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    if not record:
        return {}
    return {n: e for n, e in record["services"].items() if is_alive(int(e["pid"]), e.get("start_time"))}


def up(stack: Stack, *, timeout_s: float = DEFAULT_START_TIMEOUT_S, echo: Callable[[str], None] = print,
       environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Start whatever part of the stack is not running; returns the record. Idempotent."""
    for flag, port in (("--prefect-port", stack.prefect_port), ("--mlflow-port", stack.mlflow_port)):
        if not 1 <= port <= 65535:
            raise ServiceError(f"{flag} {port} is not a TCP port; give a number from 1 to 65535 (above 1023 unless you mean a system port)")
    if stack.prefect_port == stack.mlflow_port:
        raise ServiceError(f"--prefect-port and --mlflow-port are both {stack.prefect_port}; give two different ports")
    record = read_record(stack.record_path)
    running = _running(record)
    if record and running:
        ports = record.get("ports", {})
        if (ports.get("prefect"), ports.get("mlflow")) != (stack.prefect_port, stack.mlflow_port):
            raise ServiceError(
                f"services already run from {stack.record_path} on ports prefect={ports.get('prefect')}, "
                f"mlflow={ports.get('mlflow')}; run `shiftflow down` first to change ports"
            )
    if len(running) == len(SERVICE_ORDER):
        for n in SERVICE_ORDER:
            echo(f"{n}: already running (pid {running[n]['pid']})")
        _print_urls(stack, echo)
        return dict(record or {})

    record = {"version": 1, "home": str(stack.home), "project_dir": str(PROJECT_DIR),
              "ports": {"prefect": stack.prefect_port, "mlflow": stack.mlflow_port}, "services": dict(running)}
    for n in running:
        echo(f"{n}: already running (pid {running[n]['pid']})")
    cmds = service_commands(stack)
    timings: dict[str, float] = {}

    # refuse before starting anything when a needed port is taken by someone else
    health = {PREFECT_SERVER: (f"{stack.prefect_api_url}/health", stack.prefect_port, "--prefect-port"),
              MLFLOW_SERVER: (f"{stack.mlflow_url}/health", stack.mlflow_port, "--mlflow-port")}
    for n, (_, port, flag) in health.items():
        if n not in running and not port_free(port):
            raise ServiceError(
                f"port {port} on {HOST} is already in use by a program `shiftflow up` did not start "
                f"(needed by {n}); stop that program or pick another port with {flag}"
            )
    stack.server_dir.mkdir(parents=True, exist_ok=True)
    try:
        _start_rest(stack, record, running, cmds, health, timings, timeout_s, echo, environ)
    except _StartError as exc:
        _drop(stack, record, exc.service)
        raise ServiceError(f"{exc}\nStop whatever did start with `shiftflow down`.") from exc
    except ServiceError as exc:
        raise ServiceError(f"{exc}\nStop whatever did start with `shiftflow down`.") from exc

    record["startup_seconds"] = {k: round(v, 1) for k, v in timings.items()}
    write_record(stack.record_path, record)
    _print_urls(stack, echo)
    return record


def _start_rest(stack: Stack, record: dict[str, Any], running: Mapping[str, Any], cmds: Mapping[str, list[str]],
                health: Mapping[str, tuple[str, int, str]], timings: dict[str, float], timeout_s: float,
                echo: Callable[[str], None], environ: Mapping[str, str] | None) -> None:
    # the two servers start in parallel; the pool, deployment and worker then need the Prefect API
    waits: dict[str, tuple[subprocess.Popen[bytes], Callable[[], bool], str, Path]] = {}
    for n in (PREFECT_SERVER, MLFLOW_SERVER):
        if n in running:
            continue
        proc, entry = start_process(n, cmds[n], service_env(n, stack, environ), stack.log_path(n),
                                    stack.server_dir if n == MLFLOW_SERVER else stack.home)
        record["services"][n] = entry
        write_record(stack.record_path, record)
        echo(f"{n}: started (pid {proc.pid}), log {stack.log_path(n)}")
        url = health[n][0]
        waits[n] = (proc, lambda u=url: healthy(u), f"{url} answered", stack.log_path(n))
    timings.update(wait_all(waits, timeout_s, echo))

    if PREFECT_WORKER not in running:
        env = client_env(stack, environ)
        if ensure_work_pool(stack, env, timeout_s):
            echo(f"work pool {POOL!r}: created")
        else:
            echo(f"work pool {POOL!r}: exists")
        dt = _run_cli([*_python_cli("prefect"), "--no-prompt", "deploy", "--all"], env, stack.log_path("deploy"),
                      "`prefect --no-prompt deploy --all`", timeout_s)
        timings["deploy"] = dt
        echo(f"deployments from {PROJECT_DIR / 'prefect.yaml'}: deployed in {dt:.1f} s, log {stack.log_path('deploy')}")
        since = datetime.now(UTC)
        proc, entry = start_process(PREFECT_WORKER, cmds[PREFECT_WORKER], service_env(PREFECT_WORKER, stack, environ),
                                    stack.log_path(PREFECT_WORKER), PROJECT_DIR)
        record["services"][PREFECT_WORKER] = entry
        write_record(stack.record_path, record)
        echo(f"{PREFECT_WORKER}: started (pid {proc.pid}), log {stack.log_path(PREFECT_WORKER)}")
        timings.update(wait_all({PREFECT_WORKER: (proc, lambda: _worker_online(stack, since),
                                                  f"heartbeat in work pool {POOL!r}",
                                                  stack.log_path(PREFECT_WORKER))}, timeout_s, echo))


def _drop(stack: Stack, record: dict[str, Any], name: str) -> None:
    """Stop a service that failed to come up and remove it from the record (the others stay recorded)."""
    entry = record["services"].pop(name, None)
    if entry is not None:
        try:
            stop_process(entry, timeout_s=10.0)
        except ServiceError:
            record["services"][name] = entry
    if record["services"]:
        write_record(stack.record_path, record)
    else:
        stack.record_path.unlink(missing_ok=True)


def _print_urls(stack: Stack, echo: Callable[[str], None]) -> None:
    echo("")
    echo(f"open {stack.prefect_url} to trigger retrain-nightly (Deployments → retrain-nightly → Run)")
    echo(f"open {stack.mlflow_url} to compare runs (switch the UI to \"Model training\")")
    echo(f"for CLI runs against this stack: export PREFECT_API_URL={stack.prefect_api_url} "
         f"MLFLOW_TRACKING_URI={stack.mlflow_url}")
    echo("stop everything with: shiftflow down")


def down(home: Path, *, timeout_s: float = DEFAULT_STOP_TIMEOUT_S, echo: Callable[[str], None] = print,
         only: Iterable[str] | None = None) -> dict[str, str]:
    """Stop exactly the processes recorded in ``home/services.json`` (worker first), remove the record."""
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
    for n in order:
        if n not in wanted:
            continue
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
