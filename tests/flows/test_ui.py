"""``shiftflow ui`` (flows/ui.py): clear refusals, and a real MLflow UI that leaves no process behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from flows.paths import PROJECT_DIR
from flows.stack import ServiceError, free_port, is_alive, port_free
from flows.ui import local_store, running_ui, ui_command


def test_missing_store_names_the_file_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ServiceError, match=r"no MLflow store at .*nothing\.db: run `shiftflow retrain` first"):
        with running_ui(f"sqlite:///{tmp_path / 'nothing.db'}", port=free_port()):
            pass


def test_a_tracking_server_is_its_own_ui() -> None:
    with pytest.raises(ServiceError, match="is a tracking server: open it in a browser"):
        with running_ui("http://127.0.0.1:5999", port=free_port()):
            pass


def test_taken_port_is_named(tmp_path: Path) -> None:
    (tmp_path / "mlflow.db").write_bytes(b"")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ServiceError, match=rf"port {port} of 127.0.0.1 is taken.*--port"):
            with running_ui(f"sqlite:///{tmp_path / 'mlflow.db'}", port=port):
                pass


def test_command_and_default_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SHIFTFLOW_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert local_store() == f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"  # where `shiftflow retrain` writes
    cmd = ui_command(local_store(), 5123, tmp_path / "mlartifacts")
    # not `mlflow ui`, whose job consumers outlive it; under the guard, which stops it when the UI is SIGKILLed
    assert cmd[1:5] == ["-m", "flows.stack.guard", "mlflow", "server"]
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1" and cmd[cmd.index("--workers") + 1] == "1"


def _descendants(pid: int) -> dict[int, str]:
    """{pid: cmdline} of every live descendant of ``pid`` (Linux /proc)."""
    parent: dict[int, int] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                stat = (p / "stat").read_text()
            except OSError:
                continue
            parent[int(p.name)] = int(stat[stat.rfind(")") + 2:].split()[1])
    out, todo = {}, [pid]
    while todo:
        cur = todo.pop()
        for child, pp in parent.items():
            if pp == cur and child not in out:
                try:
                    out[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    continue
                todo.append(child)
    return out


def _ui(tmp_path: Path) -> tuple[subprocess.Popen[str], int, str]:
    """`shiftflow ui` (as ``python -m flows.ui``) on a free port over a new store with experiment "ui-test", once it
    says it is up; returns (its process, the port, the experiment id)."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    exp = MlflowClient(uri).create_experiment("ui-test", artifact_location=(tmp_path / "art").as_uri())
    port = free_port()
    env = dict(os.environ, SHIFTFLOW_HOME=str(tmp_path / "home"))
    proc = subprocess.Popen([sys.executable, "-m", "flows.ui", "--port", str(port), "--tracking-uri", uri],
                            cwd=PROJECT_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first = proc.stdout.readline()
    if not first.startswith(f"MLflow UI: http://127.0.0.1:{port}"):
        proc.kill()
        pytest.fail(first + proc.stdout.read())
    return proc, port, exp


@pytest.mark.slow
def test_ui_serves_the_store_and_ctrl_c_stops_every_process(tmp_path: Path) -> None:
    proc, port, exp = _ui(tmp_path)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/2.0/mlflow/experiments/get-by-name"
                                    "?experiment_name=ui-test", timeout=30) as resp:
            assert json.load(resp)["experiment"]["experiment_id"] == exp  # the UI reads this store
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as resp:
            assert b"<html" in resp.read(4096).lower()
        children = _descendants(proc.pid)
        print(f"\n[shiftflow ui] {len(children)} processes under it:\n" + "\n".join(children.values()))
        assert children and not any("huey" in c or "job" in c.split("mlflow", 1)[-1] for c in children.values())
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        # the stop is bounded (SIGTERM, 10 s, SIGTERM, 10 s, SIGKILL); 60 s ran out twice with the slow suite's two
        # halves saturating both cores, so the wait allows for a machine that slow
        out, _ = proc.communicate(timeout=150)
        assert proc.returncode == 0, out
        assert "stopped" in out
        deadline = time.monotonic() + 10
        while any(is_alive(p) for p in children) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [c for p, c in children.items() if is_alive(p)]  # nothing orphaned
        assert port_free(port)
    finally:
        if proc.poll() is None:  # the test failed with the UI still up: stop its server too (own session), or a
            left = _descendants(proc.pid)  # SIGKILLed `flows.ui` leaves it running (seen under a saturated machine)
            proc.kill()
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


@pytest.mark.slow
def test_a_ui_killed_outright_takes_its_server_down(tmp_path: Path) -> None:
    """The server lives in a session of its own (Ctrl-C reaches `shiftflow ui` first, which stops it); a SIGKILLed
    `shiftflow ui` once left it running for an hour. Its guard (flows.stack.guard) now stops it and uvicorn."""
    proc, port, _ = _ui(tmp_path)
    children: dict[int, str] = {}
    try:
        children = _descendants(proc.pid)
        assert any("uvicorn" in c or "gunicorn" in c for c in children.values()), children  # the server's own child
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 30
        while any(is_alive(p) for p in children) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [c for p, c in children.items() if is_alive(p)]  # nothing orphaned
        assert port_free(port)
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
