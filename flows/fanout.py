"""Composition helpers: run a task over many inputs with at most ``limit`` in flight, with progress lines,
and time each stage of a flow."""

from __future__ import annotations

import resource
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from prefect.futures import as_completed

from flows.stack.procs import raise_if_stopped


def _eta(done: int, total: int, elapsed: float) -> str:
    return "" if done >= total else f", about {elapsed / done * (total - done):.0f} s left"


def run_mapped(task: Any, args: tuple[Any, ...], items: Sequence[tuple[Any, ...]], *, limit: int, what: str,
               log: Any, **kwargs: Any) -> list[Any]:
    """``task(*args, *item, **kwargs)`` for every item (a tuple), results in item order, at most ``limit`` submitted at once
    (so tasks × BLAS threads stay within the cores, whatever the task runner), logging
    ``what: i/n done (elapsed, about t s left)`` as each finishes: the progress line the CLI and the
    Prefect UI show on long stages."""
    items = list(items)
    out: list[Any] = [None] * len(items)
    pending: dict[Any, int] = {}
    t0, nxt, done = time.monotonic(), 0, 0
    while done < len(items):
        while nxt < len(items) and len(pending) < max(1, limit):
            pending[task.submit(*args, *items[nxt], **kwargs)] = nxt
            nxt += 1
        f = next(iter(as_completed(list(pending))))  # the first to finish
        out[pending.pop(f)] = f.result()
        done += 1
        elapsed = time.monotonic() - t0
        log.info("%s: %d/%d done (%.1f s%s)", what, done, len(items), elapsed, _eta(done, len(items), elapsed))
    return out


@contextmanager
def stage_clock(timings: dict[str, float], peaks: dict[str, float], stage: str) -> Iterator[None]:
    """Record the wall seconds of ``stage`` in ``timings`` (added up when a stage is entered again, as selection
    is by a pair plan's run) and the process's peak RSS (GiB) so far in ``peaks``. A stop request that was swallowed
    on its way ends the run here, before the stage starts (``flows.stack.procs.raise_if_stopped``)."""
    raise_if_stopped()
    t0 = time.monotonic()
    try:
        yield
    finally:
        timings[stage] = round(timings.get(stage, 0.0) + time.monotonic() - t0, 3)
        peaks[stage] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3)
