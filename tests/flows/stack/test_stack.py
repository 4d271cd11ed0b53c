"""flows.stack.stack: ``up`` / ``down`` without servers. ``down`` against dummy processes recorded in a temp
services.json (kills exactly those, escalating SIGTERM → SIGTERM → SIGKILL, worker first; leaves an unrelated
process alone, even one whose pid is recorded with another start time); ``up``'s refusals before it starts
anything and its idempotence; the commands, environments and URLs of the services. The real stack is tested in
``tests/flows/test_services.py`` (slow)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from flows.stack import (
    HOST,
    MLFLOW_SERVER,
    POOL,
    PREFECT_SERVER,
    PREFECT_WORKER,
    RECORD_NAME,
    SERVICE_ORDER,
    ServiceError,
    Stack,
    down,
    is_alive,
    read_record,
    up,
    write_record,
)
from flows.stack.stack import service_commands, service_env, wait_all
from tests.flows.stack.conftest import children_of as _children_of
from tests.flows.stack.conftest import record_entry as _entry

# --------------------------------------------------------------------------------------------- down


def test_down_stops_exactly_the_recorded_processes(tmp_path: Path) -> None:
    # a plain sleep; a shell whose two sleeps share its process group (like uvicorn under mlflow server);
    # a process that exits only on the second SIGTERM (like `prefect worker`); one that ignores SIGTERM
    plain = subprocess.Popen(["sleep", "300"], start_new_session=True)
    group = subprocess.Popen(["sh", "-c", "sleep 300 & sleep 300 & wait"], start_new_session=True)
    two_signals = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import signal, sys, time
            hits = []
            def on_term(sig, frame):
                hits.append(sig)
                if len(hits) == 2:
                    sys.exit(0)
            signal.signal(signal.SIGTERM, on_term)
            print("ready", flush=True)
            while True:
                time.sleep(0.05)
        """)], start_new_session=True, stdout=subprocess.PIPE, text=True)
    stubborn = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 300"], start_new_session=True)
    bystander = subprocess.Popen(["sleep", "300"], start_new_session=True)
    mine = [plain, group, two_signals, stubborn]
    try:
        assert two_signals.stdout is not None and two_signals.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 30
        while len(_children_of(group.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        grandchildren = _children_of(group.pid)
        assert len(grandchildren) == 2
        recycled = _entry(bystander) | {"start_time": _entry(bystander)["start_time"] - 1}  # pid reused
        write_record(tmp_path / RECORD_NAME, {"version": 1, "services": {
            "plain": _entry(plain), "group": _entry(group), "two-signals": _entry(two_signals),
            "stubborn": _entry(stubborn), "recycled": recycled}})

        outcome = down(tmp_path, timeout_s=4.0, echo=lambda _: None)

        assert plain.wait(timeout=10) == -signal.SIGTERM
        assert group.wait(timeout=10) == -signal.SIGTERM
        assert not any(is_alive(p) for p in grandchildren)
        assert two_signals.wait(timeout=10) == 0 and "two SIGTERMs" in outcome["two-signals"]
        assert stubborn.wait(timeout=10) == -signal.SIGKILL and "SIGKILL" in outcome["stubborn"]
        assert "left alone" in outcome["recycled"]
        assert bystander.poll() is None and is_alive(bystander.pid)
        assert not (tmp_path / RECORD_NAME).exists()
        # a second `down` finds nothing to do
        assert down(tmp_path, echo=lambda _: None) == {}
    finally:
        for p in [*mine, bystander]:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)


def test_down_refuses_a_corrupt_record_naming_the_file(tmp_path: Path) -> None:
    from flows.stack import ServiceError

    (tmp_path / RECORD_NAME).write_text("{not json")
    with pytest.raises(ServiceError, match=str(tmp_path / RECORD_NAME)):
        down(tmp_path, echo=lambda _: None)


def _sleeps(spawn: Any, names: list[str]) -> dict[str, subprocess.Popen[Any]]:
    return {n: spawn(["sleep", "300"]) for n in names}


def test_down_stops_the_worker_first_then_the_servers_then_the_rest_by_name(tmp_path: Path, spawn: Any) -> None:
    # the documented order: reversed SERVICE_ORDER (worker, MLflow, Prefect), then services outside it, sorted
    procs = _sleeps(spawn, [PREFECT_SERVER, MLFLOW_SERVER, PREFECT_WORKER, "zeta", "alpha"])
    write_record(tmp_path / RECORD_NAME, {"version": 1, "services": {n: _entry(p) for n, p in procs.items()}})
    lines: list[str] = []
    outcome = down(tmp_path, timeout_s=4.0, echo=lines.append)
    assert [line.split(" (pid")[0] for line in lines] == [PREFECT_WORKER, MLFLOW_SERVER, PREFECT_SERVER, "alpha", "zeta"]
    assert outcome == {n: "stopped (1 process, SIGTERM)" for n in procs}
    assert all(p.wait(timeout=10) == -signal.SIGTERM for p in procs.values())
    assert not (tmp_path / RECORD_NAME).exists()


def test_down_only_stops_the_named_services_and_keeps_the_others_recorded(tmp_path: Path, spawn: Any) -> None:
    procs = _sleeps(spawn, ["a", "b"])
    write_record(tmp_path / RECORD_NAME, {"version": 1, "services": {n: _entry(p) for n, p in procs.items()}})
    assert set(down(tmp_path, timeout_s=4.0, echo=lambda _: None, only=["a"])) == {"a"}
    assert procs["a"].wait(timeout=10) == -signal.SIGTERM
    assert procs["b"].poll() is None and is_alive(procs["b"].pid)
    assert read_record(tmp_path / RECORD_NAME)["services"] == {"b": _entry(procs["b"])}


def test_down_without_a_record_has_nothing_to_stop(tmp_path: Path) -> None:
    lines: list[str] = []
    assert down(tmp_path, echo=lines.append) == {}
    assert lines == [f"nothing to stop: no {tmp_path / RECORD_NAME} (start the stack with `shiftflow up`)"]


# --------------------------------------------------------------------------------------------- up, before it starts


@pytest.mark.parametrize(("ports", "words"), [
    ((0, 5000), "--prefect-port 0 is not a TCP port"),
    ((4300, 65536), "--mlflow-port 65536 is not a TCP port"),
    ((4300, 4300), "--prefect-port and --mlflow-port are both 4300"),
])
def test_up_refuses_bad_ports_and_writes_nothing(tmp_path: Path, ports: tuple[int, int], words: str) -> None:
    with pytest.raises(ServiceError, match=words):
        up(Stack(tmp_path / "home", *ports), echo=lambda _: None)
    assert list(tmp_path.iterdir()) == []


def test_up_refuses_a_port_another_program_listens_on(tmp_path: Path) -> None:
    import socket

    from flows.stack import free_port

    with socket.socket() as s:
        s.bind((HOST, 0))
        s.listen()
        taken = s.getsockname()[1]
        with pytest.raises(ServiceError, match=rf"port {taken} on 127\.0\.0\.1 is already in use by a program "
                           rf"`shiftflow up` did not start \(needed by {PREFECT_SERVER}\).*--prefect-port"):
            up(Stack(tmp_path / "home", taken, free_port()), echo=lambda _: None)
    assert list(tmp_path.iterdir()) == []  # nothing started, nothing recorded


def test_up_refuses_other_ports_than_the_running_services(tmp_path: Path, spawn: Any) -> None:
    home = tmp_path / "home"
    write_record(home / RECORD_NAME, {"version": 1, "ports": {"prefect": 4201, "mlflow": 5001},
                                      "services": {PREFECT_SERVER: _entry(spawn(["sleep", "300"]))}})
    with pytest.raises(ServiceError, match=r"on ports prefect=4201, mlflow=5001; run `shiftflow down` first"):
        up(Stack(home, 4202, 5002), echo=lambda _: None)


def test_up_with_every_service_running_starts_nothing(tmp_path: Path, spawn: Any) -> None:
    home = tmp_path / "home"
    procs = _sleeps(spawn, list(SERVICE_ORDER))
    record = {"version": 1, "ports": {"prefect": 4200, "mlflow": 5000},
              "services": {n: _entry(p) for n, p in procs.items()}}
    write_record(home / RECORD_NAME, record)
    before = (home / RECORD_NAME).read_bytes()
    lines: list[str] = []
    assert up(Stack(home), echo=lines.append) == read_record(home / RECORD_NAME)  # idempotent: the same record
    assert lines[:3] == [f"{n}: already running (pid {procs[n].pid})" for n in SERVICE_ORDER]
    assert f"open http://{HOST}:4200 to trigger retrain-nightly (Deployments → retrain-nightly → Run)" in lines
    assert (home / RECORD_NAME).read_bytes() == before
    assert sorted(p.name for p in home.iterdir()) == [RECORD_NAME]  # no log, no server folder: nothing started


# --------------------------------------------------------------------------------------------- commands and environments


def test_the_stack_defaults_and_urls(tmp_path: Path) -> None:
    s = Stack(tmp_path)
    # `shiftflow up`'s documented defaults: Prefect on 4200, MLflow on 5000, two flow runs at once
    assert (s.prefect_port, s.mlflow_port, s.pool_concurrency) == (4200, 5000, 2)
    assert s.prefect_api_url == "http://127.0.0.1:4200/api" and s.mlflow_url == "http://127.0.0.1:5000"
    assert s.health_url(PREFECT_SERVER) == "http://127.0.0.1:4200/api/health"
    assert s.health_url(MLFLOW_SERVER) == "http://127.0.0.1:5000/health"
    assert s.record_path == tmp_path / "services.json"
    assert s.log_path(PREFECT_WORKER) == tmp_path / "logs" / "prefect-worker.log"


def test_the_mlflow_server_serves_the_store_cli_runs_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29: the server's store is the one ``shiftflow retrain`` writes without flags (``flows.ui.local_store``)."""
    from flows.ui import local_store

    monkeypatch.setenv("SHIFTFLOW_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    cmds = service_commands(Stack(tmp_path, 4301, 5301))
    ml = cmds[MLFLOW_SERVER]
    assert ml[ml.index("--backend-store-uri") + 1] == local_store()
    assert ml[ml.index("--default-artifact-root") + 1] == (tmp_path / "mlartifacts").resolve().as_uri()
    assert ml[ml.index("--workers") + 1] == "1" and ml[ml.index("--port") + 1] == "5301"
    for name in (PREFECT_SERVER, MLFLOW_SERVER):  # bound to 127.0.0.1 only
        assert cmds[name][cmds[name].index("--host") + 1] == "127.0.0.1"
    assert cmds[PREFECT_SERVER][cmds[PREFECT_SERVER].index("--port") + 1] == "4301"
    worker = cmds[PREFECT_WORKER]
    assert worker[worker.index("--pool") + 1] == POOL == "local-process" and worker[worker.index("--type") + 1] == "process"


def test_each_service_gets_its_environment(tmp_path: Path) -> None:
    s = Stack(tmp_path / "stack-home", 4302, 5302)
    shell = {"SHIFTFLOW_HOME": str(tmp_path / "cli-home"), "MLFLOW_TRACKING_URI": "http://elsewhere:1", "KEEP": "me"}
    envs = {n: service_env(n, s, shell) for n in SERVICE_ORDER}
    for env in envs.values():
        assert env["KEEP"] == "me"  # the base environment is passed on
        assert (env["PREFECT_SERVER_ANALYTICS_ENABLED"], env["DO_NOT_TRACK"]) == ("false", "true")  # telemetry off
        assert env["SHIFTFLOW_HOME"] == str(s.home)
        # the run root CLI runs of this shell use ($SHIFTFLOW_HOME/runs, flows.paths.default_run_root)
        assert env["SHIFTFLOW_RUN_ROOT"] == str((tmp_path / "cli-home" / "runs").resolve())
    assert envs[PREFECT_SERVER]["PREFECT_API_URL"] == "http://127.0.0.1:4302/api"
    assert "MLFLOW_TRACKING_URI" not in envs[MLFLOW_SERVER]  # the server is the store, not its client
    assert envs[MLFLOW_SERVER]["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"  # no job consumers to orphan
    assert (envs[PREFECT_WORKER]["PREFECT_API_URL"], envs[PREFECT_WORKER]["MLFLOW_TRACKING_URI"]) == (
        "http://127.0.0.1:4302/api", "http://127.0.0.1:5302")
    assert shell == {"SHIFTFLOW_HOME": str(tmp_path / "cli-home"), "MLFLOW_TRACKING_URI": "http://elsewhere:1",
                     "KEEP": "me"}  # not changed in place


# --------------------------------------------------------------------------------------------- waiting for services


class _Proc:
    def __init__(self, code: int | None) -> None:
        self.code = code

    def poll(self) -> int | None:
        return self.code


def test_wait_all_reports_each_service_ready(tmp_path: Path) -> None:
    lines: list[str] = []
    done = wait_all({"a": (_Proc(None), lambda: True, "it answered", tmp_path / "a.log")}, 5.0, lines.append)
    assert list(done) == ["a"] and 0 <= done["a"] < 5.0
    assert len(lines) == 1 and lines[0].startswith("a: ready after ") and lines[0].endswith(" s (it answered)")


def test_wait_all_names_a_service_that_exited_with_its_log_tail(tmp_path: Path) -> None:
    log = tmp_path / "b.log"
    log.write_text("".join(f"line {i}\n" for i in range(20)))
    with pytest.raises(ServiceError, match=r"b exited with code 3 before it answered; see .*b\.log") as err:
        wait_all({"b": (_Proc(3), lambda: False, "it answered", log)}, 5.0)
    shown = [s.strip() for s in str(err.value).splitlines()[1:]]
    assert shown == [f"line {i}" for i in range(5, 20)]  # the last 15 lines


def test_wait_all_gives_up_after_the_timeout(tmp_path: Path) -> None:
    t0 = time.monotonic()
    with pytest.raises(ServiceError, match=r"c did not become ready \(it answered\) within 0 s; see .*c\.log:\n"
                       r"\(no log written\)\nIf the machine is just slow, retry with a longer --timeout"):
        wait_all({"c": (_Proc(None), lambda: False, "it answered", tmp_path / "c.log")}, 0.2)
    assert time.monotonic() - t0 < 5
