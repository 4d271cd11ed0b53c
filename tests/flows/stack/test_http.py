"""flows.stack.http: JSON over HTTP with urllib, health probes and port checks on 127.0.0.1, against a throwaway
HTTP server (``conftest.py``)."""

from __future__ import annotations

import json
import socket
from typing import Any

from flows.stack.http import HOST, free_port, healthy, http_json, port_free


def _url(server: Any, path: str) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}{path}"


def test_the_host_is_the_loopback_address() -> None:
    assert HOST == "127.0.0.1"  # the stack binds nothing else


def test_get_returns_the_status_and_the_parsed_json(http_server: Any) -> None:
    http_server.routes["/pools"] = (200, b'{"name": "local-process", "limit": 2}')
    assert http_json(_url(http_server, "/pools")) == (200, {"name": "local-process", "limit": 2})
    method, path, _, body = http_server.requests[-1]
    assert (method, path, body) == ("GET", "/pools", b"")


def test_data_is_posted_as_json(http_server: Any) -> None:
    http_server.routes["/filter"] = (201, b"[]")
    assert http_json(_url(http_server, "/filter"), data={"limit": 3}) == (201, [])
    method, _, headers, body = http_server.requests[-1]
    assert method == "POST" and json.loads(body) == {"limit": 3}
    assert {k.lower(): v for k, v in headers.items()}["content-type"] == "application/json"


def test_a_body_that_is_not_json_is_text_and_an_empty_body_is_none(http_server: Any) -> None:
    http_server.routes["/text"] = (200, "café ok".encode())
    http_server.routes["/empty"] = (204, b"")
    assert http_json(_url(http_server, "/text")) == (200, "café ok")
    assert http_json(_url(http_server, "/empty")) == (204, None)


def test_an_http_error_is_its_status_without_a_body(http_server: Any) -> None:
    http_server.routes["/gone"] = (404, b'{"detail": "not found"}')
    assert http_json(_url(http_server, "/gone")) == (404, None)


def test_healthy_means_200(http_server: Any) -> None:
    http_server.routes["/health"] = (200, b"true")
    http_server.routes["/busy"] = (503, b"")
    http_server.routes["/other"] = (204, b"")
    assert healthy(_url(http_server, "/health"))
    assert not healthy(_url(http_server, "/busy")) and not healthy(_url(http_server, "/other"))
    assert not healthy(f"http://127.0.0.1:{free_port()}/health")  # nothing listens: False, not an exception


def test_a_listening_port_is_not_free_and_a_free_port_is() -> None:
    with socket.socket() as s:
        s.bind((HOST, 0))
        s.listen()
        taken = s.getsockname()[1]
        assert not port_free(taken)
    port = free_port()
    assert 1 <= port <= 65535 and port_free(port)
    with socket.socket() as s:
        s.bind((HOST, port))  # free_port's port can be bound
