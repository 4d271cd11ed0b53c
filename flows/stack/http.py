"""HTTP probing of the local servers and port checks on 127.0.0.1 (urllib only: no prefect/mlflow import)."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from typing import Any

__all__ = ["HOST", "free_port", "healthy", "http_json", "port_free"]

HOST = "127.0.0.1"


def http_json(url: str, data: Any = None, timeout_s: float = 5.0) -> tuple[int, Any]:
    """GET (or POST ``data`` as JSON) ``url``; returns (status, parsed JSON body or text or None)."""
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
    """True when ``url`` answers 200 within 3 s."""
    try:
        return http_json(url, timeout_s=3.0)[0] == 200
    except (urllib.error.URLError, OSError, TimeoutError):
        return False


def port_free(port: int) -> bool:
    """True when nothing listens on ``port`` of 127.0.0.1."""
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
