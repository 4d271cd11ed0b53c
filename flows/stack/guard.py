"""``python -m flows.stack.guard MODULE [ARG ...]``: ``python -m MODULE ARG ...`` that stops itself, and every
process it started, once the process that launched it is gone.

The servers a command starts for itself (``shiftflow ui``'s MLflow server, a CLI run's temporary Prefect API)
live in a session of their own, so that Ctrl-C reaches the command first, which then stops them cleanly. A
command killed outright (SIGKILL, the OOM killer) cannot, and its servers would run on. Hand-written: neither
uvicorn nor ``mlflow server`` has such an option, and Linux's ``PR_SET_PDEATHSIG`` needs ``preexec_fn``,
unsafe in a process with threads, and reaches the first process only, not ``mlflow server``'s uvicorn.
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import time

from flows.stack.procs import stop_others

__all__ = ["POLL_S", "STOP_TIMEOUT_S", "main"]

POLL_S = 0.5  # how often the launcher is looked for
STOP_TIMEOUT_S = 10.0  # SIGTERM, then SIGKILL what is left after this long


def _watch(parent: int) -> None:
    while os.getppid() == parent:  # the launcher gone, this process is re-parented (to init or a subreaper)
        time.sleep(POLL_S)
    stop_others(STOP_TIMEOUT_S)
    os._exit(0)


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit("usage: python -m flows.stack.guard MODULE [ARG ...]")
    threading.Thread(target=_watch, args=(os.getppid(),), daemon=True, name="shiftflow-guard").start()
    sys.argv = [argv[0], *argv[1:]]
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
