"""flows.stack.guard: a server started in a session of its own, under the guard, stops with everything it started
once the process that launched it is SIGKILLed; while the launcher lives, nothing happens. The stand-in server is
a module that starts a child (``sleep``) in its process group, as ``mlflow server`` starts uvicorn."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from flows.stack import is_alive
from flows.stack.guard import POLL_S, STOP_TIMEOUT_S
from tests.flows.stack.conftest import children_of

SERVER = """
import subprocess, sys, time
child = subprocess.Popen({child!r})
print(child.pid, flush=True)
time.sleep(300)
"""


def _launch(tmp_path: Path, child: list[str]) -> tuple[subprocess.Popen[str], int, int]:
    """A launcher (own session) that starts the guarded stand-in server in a session of its own, as
    ``shiftflow ui`` does; returns (launcher, guarded server's pid, its child's pid)."""
    (tmp_path / "standin_server.py").write_text(SERVER.format(child=child))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    launcher = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import subprocess, sys, time
        server = subprocess.Popen([sys.executable, "-m", "flows.stack.guard", "standin_server"],
                                  stdout=subprocess.PIPE, text=True, start_new_session=True)
        print(server.pid, server.stdout.readline().strip(), flush=True)
        time.sleep(300)
    """)], env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert launcher.stdout is not None
    server, child_pid = map(int, launcher.stdout.readline().split())
    return launcher, server, child_pid


def _gone_within(pids: list[int], timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while any(is_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in pids if is_alive(p)]


def _cleanup(*pids: int) -> None:
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_the_guarded_server_and_its_child_stop_when_the_launcher_is_killed(tmp_path: Path) -> None:
    launcher, server, child = _launch(tmp_path, ["sleep", "300"])
    try:
        assert children_of(server) == [child] and os.getpgid(child) == server  # the child shares the group
        time.sleep(3 * POLL_S)
        assert is_alive(server) and is_alive(child)  # the launcher lives: nothing happens
        os.killpg(launcher.pid, signal.SIGKILL)  # own session: this reaches neither the server nor its child
        launcher.wait()
        assert not _gone_within([server, child], 5.0 + 2 * POLL_S)  # SIGTERM is enough for sleep
    finally:
        _cleanup(launcher.pid, server, child)


@pytest.mark.slow  # waits out the guard's SIGTERM timeout (10 s)
def test_a_child_that_ignores_sigterm_is_killed_after_the_timeout(tmp_path: Path) -> None:
    launcher, server, child = _launch(tmp_path, ["sh", "-c", "trap '' TERM; while :; do sleep 0.2; done"])
    try:
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait()
        time.sleep(2 * POLL_S + 1.0)
        assert is_alive(child)  # SIGTERM ignored: still running before the timeout
        assert not _gone_within([server, child], STOP_TIMEOUT_S + 10.0)
    finally:
        _cleanup(launcher.pid, server, child)


def test_without_a_module_it_says_how_to_call_it() -> None:
    out = subprocess.run([sys.executable, "-m", "flows.stack.guard"], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "usage: python -m flows.stack.guard MODULE" in out.stderr
