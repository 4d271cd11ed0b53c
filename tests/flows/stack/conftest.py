"""Shared helpers of the ``flows.stack`` tests: dummy processes in their own sessions (stand-ins for the recorded
services, always killed in teardown), their record entries, and a throwaway HTTP server on 127.0.0.1."""

from __future__ import annotations

import http.server
import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flows.stack import process_start_time


def record_entry(p: subprocess.Popen[Any]) -> dict[str, Any]:
    """The services-record entry of ``p`` as ``shiftflow up`` writes it (pid, process group, start time, command)."""
    return {"pid": p.pid, "pgid": os.getpgid(p.pid), "start_time": process_start_time(p.pid), "cmd": p.args}


def children_of(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (Linux /proc)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rfind(")") + 2:].split()[1]) == pid:
                out.append(int(d.name))
    return out


@pytest.fixture
def spawn() -> Iterator[Callable[..., subprocess.Popen[Any]]]:
    """``spawn(cmd)``: a process in its own session; every one still running is SIGKILLed (its group) after the test."""
    started: list[subprocess.Popen[Any]] = []

    def _spawn(cmd: list[str], **kw: Any) -> subprocess.Popen[Any]:
        p = subprocess.Popen(cmd, start_new_session=True, **kw)
        started.append(p)
        return p

    yield _spawn
    for p in started:
        try:
            os.killpg(p.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        p.wait(timeout=10)


class _Handler(http.server.BaseHTTPRequestHandler):
    """Answers each path from ``server.routes`` (path → (status, body)); records (method, path, headers, body)."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.requests.append((self.command, self.path, dict(self.headers), body))  # type: ignore[attr-defined]
        status, payload = self.server.routes.get(self.path, (404, b""))  # type: ignore[attr-defined]
        self.send_response(status)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:  # quiet
        pass


@pytest.fixture
def http_server() -> Iterator[http.server.ThreadingHTTPServer]:
    """A server on a free 127.0.0.1 port; set ``server.routes[path] = (status, body)``; ``server.requests`` logs."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.routes, server.requests = {}, []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
