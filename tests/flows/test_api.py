"""flows.api: Prefect's temporary local API for one CLI command. ``early_api`` starts it only when no server is
configured (and asks a configured one whether it answers); ``use_api`` points this process at it for the rest of
its life, or leaves Prefect to start its own when it does not come up. No server starts here."""

from __future__ import annotations

import os
from contextlib import ExitStack
from typing import Any

import pytest

import flows.api


class _Api:
    """A stand-in ``TemporaryAPI``: ``wait`` answers ``up`` and records its timeout."""

    def __init__(self, up: bool) -> None:
        self.up, self.url, self.waited = up, "http://127.0.0.1:4999/api", []

    def wait(self, timeout_s: float) -> bool:
        self.waited.append(timeout_s)
        return self.up


@pytest.fixture
def keep(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``use_api``'s lasting settings go to a stack closed after the test (and the environment is restored)."""
    stack = ExitStack()
    monkeypatch.setattr(flows.api, "_KEEP", stack)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    with stack:
        yield stack


def test_the_temporary_api_is_started_early_only_without_a_server(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    import flows.stack.temporary as temporary
    import tasks.tracking
    from flows.api import early_api

    launched: list[bool] = []
    checked: list[str] = []
    monkeypatch.setattr(temporary, "start_temporary_api", lambda: launched.append(True) or "api")
    monkeypatch.setattr(tasks.tracking, "check_prefect_reachable", checked.append)  # it answers
    with temporary_settings({PREFECT_API_URL: "http://127.0.0.1:9/api"}):
        assert early_api() is None and launched == []  # a server is named: nothing to start
    assert checked == ["http://127.0.0.1:9/api"]  # but it is asked whether it answers
    with temporary_settings({PREFECT_API_URL: ""}):
        assert early_api() == "api" and launched == [True]


def test_no_api_is_started_when_prefect_would_not_start_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED, temporary_settings

    import flows.stack.temporary as temporary

    launched: list[bool] = []
    monkeypatch.setattr(temporary, "start_temporary_api", lambda: launched.append(True) or "api")
    with temporary_settings({PREFECT_API_URL: "", PREFECT_SERVER_EPHEMERAL_ENABLED: False}):
        assert flows.api.early_api() is None
    assert launched == []


def test_without_an_api_nothing_changes(keep: ExitStack, capsys: pytest.CaptureFixture[str]) -> None:
    from prefect.settings import PREFECT_API_URL

    before = PREFECT_API_URL.value()
    flows.api.use_api(None)
    assert PREFECT_API_URL.value() == before and "PREFECT_API_URL" not in os.environ
    assert capsys.readouterr().out == ""


def test_an_api_that_does_not_come_up_leaves_it_to_prefect(keep: ExitStack, capsys: pytest.CaptureFixture[str]) -> None:
    from prefect.settings import PREFECT_API_URL

    before = PREFECT_API_URL.value()
    flows.api.use_api(_Api(up=False))
    assert capsys.readouterr().out == "shiftflow: warning: the early Prefect API did not start; Prefect starts its own\n"
    assert PREFECT_API_URL.value() == before and "PREFECT_API_URL" not in os.environ


def test_an_api_that_comes_up_is_the_process_api_with_no_ui(keep: ExitStack, capsys: pytest.CaptureFixture[str]) -> None:
    from prefect.settings import PREFECT_API_URL, PREFECT_UI_URL

    api = _Api(up=True)
    flows.api.use_api(api)
    assert PREFECT_API_URL.value() == api.url and os.environ["PREFECT_API_URL"] == api.url  # Dask workers inherit it
    assert PREFECT_UI_URL.value() == ""  # a temporary API has no UI: no links to it
    assert f"Prefect's temporary local API at {api.url}" in capsys.readouterr().out
    keep.close()  # what the process's exit does: the settings end with it
    assert PREFECT_API_URL.value() != api.url


@pytest.mark.parametrize(("configured", "waited"), [(20, 90.0), (200, 200.0)])
def test_it_waits_for_the_api_at_least_90_s_or_prefects_own_startup_timeout(
        keep: ExitStack, configured: int, waited: float) -> None:
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS, temporary_settings

    api = _Api(up=False)
    with temporary_settings({PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS: configured}):
        flows.api.use_api(api)
    assert api.waited == [waited]  # max(90, the setting)
