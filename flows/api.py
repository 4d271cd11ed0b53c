"""Prefect's API for one CLI command (``shiftflow retrain``, ``shiftflow score``): the temporary local API
started early (``flows.stack.temporary``) while the command imports the flow, and pointing the process at it.
Nothing here imports Prefect at import time."""

from __future__ import annotations

import os
from contextlib import ExitStack
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flows.stack.temporary import TemporaryAPI


def early_api() -> TemporaryAPI | None:
    """Launch Prefect's temporary local API now (``flows.stack.temporary``) when no ``PREFECT_API_URL`` is
    configured and Prefect would start one itself; None otherwise."""
    from prefect.settings import (  # the flow imports it anyway
        PREFECT_API_URL,
        PREFECT_SERVER_EPHEMERAL_ENABLED,
    )

    if PREFECT_API_URL.value():
        from tasks.tracking import check_prefect_reachable

        check_prefect_reachable(PREFECT_API_URL.value())  # one line, exit 1, when it does not answer
        return None
    if not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        return None
    from flows.stack.temporary import start_temporary_api

    return start_temporary_api()


_KEEP = ExitStack()  # settings this process keeps until it exits (never closed: see use_api)


def use_api(api: TemporaryAPI | None) -> None:
    """Point this process at ``api`` for the rest of its life (``PREFECT_API_URL`` in Prefect's settings and,
    for Dask workers, in the environment). Not undone when the flow returns: Prefect's log and event workers
    send what they hold when the process exits, and ``api`` stops after them (its exit hook was registered
    first, and exit hooks run last-in first-out). Without ``api``, or when it does not come up, Prefect
    starts its own temporary server as usual."""
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
        PREFECT_UI_URL,
        temporary_settings,
    )

    if api is None:
        return
    if not api.wait(max(90.0, float(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()))):
        print("shiftflow: warning: the early Prefect API did not start; Prefect starts its own")
        return
    print(f"shiftflow: Prefect's temporary local API at {api.url} (stopped when this command ends; "
          "`shiftflow up` runs a lasting one with its UI)")
    os.environ["PREFECT_API_URL"] = api.url
    _KEEP.enter_context(temporary_settings({PREFECT_API_URL: api.url, PREFECT_UI_URL: ""}))  # no UI: no dead links
