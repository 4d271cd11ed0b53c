"""flows.stack.temporary: Prefect's temporary local API for one CLI run. Fast: the command and environment it is
launched with (Prefect's own ``SubprocessASGIServer`` settings, its own session), ``wait`` against a stand-in
server, ``stop``'s escalation. Slow: the real API subprocess answers Prefect and stops; it exits by itself when
the run that started it is SIGKILLed."""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import flows.stack.temporary as temporary
from flows.stack.http import free_port
from flows.stack.temporary import TemporaryAPI, start_temporary_api


class _FakeProcess:
    """Records what ``TemporaryAPI.stop`` does; ``wait(timeout)`` times out while ``stubborn``."""

    def __init__(self, stubborn: bool = False) -> None:
        self.calls: list[str] = []
        self.stubborn, self.code = stubborn, None

    def poll(self) -> int | None:
        return self.code

    def terminate(self) -> None:
        self.calls.append("terminate")
        if not self.stubborn:
            self.code = -15

    def kill(self) -> None:
        self.calls.append("kill")
        self.code = -9

    def wait(self, timeout: float | None = None) -> int | None:
        self.calls.append(f"wait({timeout})")
        if self.code is None:
            raise subprocess.TimeoutExpired("api", timeout or 0)
        return self.code


def _api(process: Any, port: int) -> TemporaryAPI:
    api = TemporaryAPI(process, port)
    atexit.unregister(api.stop)  # this test stops it (or it is a fake)
    return api


def test_the_api_url_is_on_the_loopback_address() -> None:
    assert _api(_FakeProcess(), 4321).url == "http://127.0.0.1:4321/api"


def test_it_is_launched_as_prefect_launches_its_own_in_its_own_session(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib.metadata import distribution

    launched: list[tuple[list[str], dict[str, Any]]] = []

    def popen(cmd: list[str], **kw: Any) -> _FakeProcess:
        launched.append((cmd, kw))
        return _FakeProcess()

    monkeypatch.setattr(temporary.subprocess, "Popen", popen)
    api = start_temporary_api({"PREFECT_HOME": "/somewhere", "PREFECT_UI_ENABLED": "1"})
    assert api is not None
    atexit.unregister(api.stop)
    ((cmd, kw),) = launched
    assert cmd[0] == sys.executable
    args = cmd[cmd.index("--app-dir"):]
    # the folder that holds the installed prefect package (from its distribution's record, without importing it)
    assert args[args.index("--app-dir") + 1] == str(Path(distribution("prefect").locate_file("prefect")).parent)
    assert args[args.index("--factory") + 1] == "prefect.server.api.server:create_app"
    assert args[args.index("--host") + 1] == "127.0.0.1" and args[args.index("--port") + 1] == str(api.port)
    env = kw["env"]
    assert env["PREFECT_HOME"] == "/somewhere"  # the given environment, not os.environ
    # as SubprocessASGIServer: no UI, the ephemeral app; and no block registration
    assert (env["PREFECT_UI_ENABLED"], env["PREFECT__SERVER_EPHEMERAL"], env["PREFECT_API_BLOCKS_REGISTER_ON_START"]) \
        == ("0", "1", "false")
    assert kw["start_new_session"] is True and kw["stdin"] == subprocess.DEVNULL


def test_without_prefect_or_without_a_process_it_is_left_to_prefect(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_process(cmd: list[str], **kw: Any) -> Any:
        raise OSError("exec failed")

    monkeypatch.setattr(temporary.subprocess, "Popen", no_process)
    assert start_temporary_api({}) is None
    monkeypatch.setattr(temporary.importlib.util, "find_spec", lambda name: None)
    assert start_temporary_api({}) is None


def test_wait_is_true_once_the_health_url_answers(tmp_path: Path) -> None:
    # a stand-in server: Python's file server answers GET /api/health with the file api/health
    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "health").write_text("true")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory", str(tmp_path),
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    api = _api(proc, port)
    try:
        assert api.wait(60)
        assert proc.poll() is None  # still serving
    finally:
        api.stop()
    assert proc.poll() is not None


def test_wait_is_false_when_the_process_exits() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], start_new_session=True)
    t0 = time.monotonic()
    assert not _api(proc, free_port()).wait(60)
    assert time.monotonic() - t0 < 30 and proc.returncode == 3


def test_wait_is_false_and_stops_the_process_on_timeout() -> None:
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        assert not _api(proc, free_port()).wait(0.3)  # nothing answers on that port
        assert proc.poll() == -15  # stopped with SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_stop_terminates_then_kills_a_process_that_does_not_exit() -> None:
    calm, stubborn = _FakeProcess(), _FakeProcess(stubborn=True)
    _api(calm, 1).stop()
    _api(stubborn, 1).stop()
    assert calm.calls == ["terminate", "wait(10)"]
    assert stubborn.calls == ["terminate", "wait(10)", "kill", "wait(None)"]
    done = _FakeProcess()
    done.code = 0
    _api(done, 1).stop()
    assert done.calls == []  # already gone: nothing to do


@pytest.mark.slow  # the real API subprocess: ~20 s, most of it Prefect's server start
def test_the_early_api_serves_prefect_and_stops(tmp_path: Path) -> None:
    # the real subprocess, as the CLI launches it: it answers Prefect's /health and a client call, then stops
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.stack.temporary import start_temporary_api

    api = start_temporary_api(dict(os.environ, PREFECT_HOME=str(tmp_path / "prefect")))
    assert api is not None
    try:
        assert api.wait(180), "the temporary API did not answer /health"
        with temporary_settings({PREFECT_API_URL: api.url}), get_client(sync_client=True) as client:
            assert client.api_healthcheck() is None  # None: healthy
    finally:
        api.stop()
    assert api.process.poll() is not None


@pytest.mark.slow  # boots the temporary API in a child process: ~10-20 s
def test_the_temporary_api_exits_when_its_run_is_killed_outright(tmp_path: Path) -> None:
    """The API runs in its own session, so a SIGKILL to the run's process group does not reach it; it exits by
    itself when the process that started it is gone (tests/flows/test_faults.py's SIGKILL left one running)."""
    import signal
    import subprocess
    import sys
    import textwrap
    import time

    from flows.stack.http import healthy

    env = dict(os.environ, PREFECT_HOME=str(tmp_path / "prefect"))
    run = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import time
        from flows.stack.temporary import start_temporary_api
        api = start_temporary_api()
        assert api is not None and api.wait(180)
        print(api.url, api.process.pid, flush=True)
        time.sleep(600)
    """)], env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert run.stdout is not None
    url, pid = run.stdout.readline().split()
    assert healthy(f"{url}/health")
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    deadline = time.monotonic() + 15
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not Path(f"/proc/{pid}").exists(), "the API outlived the killed run"
