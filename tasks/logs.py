"""A logger that is Prefect's run logger inside a flow/task run and a plain logger otherwise."""

from __future__ import annotations

import logging


def run_logger() -> logging.Logger | logging.LoggerAdapter:
    from prefect import get_run_logger
    from prefect.exceptions import MissingContextError

    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger("shiftflow")
