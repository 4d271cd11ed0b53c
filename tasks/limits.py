"""The flow's thread limit per task, applied inside each fanned-out task.

The flow enters ``threadpool_limits`` in its own thread. OpenBLAS's thread count is global to the process, but
OpenMP's is per thread, so a task that Prefect's thread-pool runner runs in a worker thread started its OpenMP
regions (HistGradientBoosting, the nearest-neighbour search) with one thread per core: two tasks at once on two
cores ran four threads (``benchmarks/openmp_threads.py`` measures it). The flow sets ``TASK_THREADS``; Prefect
copies the context into the worker thread, where ``limited`` enters the limit again. Dask workers are processes
whose nannies set ``OMP_NUM_THREADS`` themselves; there the variable is unset and nothing changes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from threadpoolctl import threadpool_limits

__all__ = ["TASK_THREADS", "current_threads", "limited", "task_threads"]

TASK_THREADS: ContextVar[int | None] = ContextVar("shiftflow_task_threads", default=None)
F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def task_threads(n: int) -> Iterator[None]:
    """Tasks submitted inside this block run their BLAS/OpenMP work on ``n`` threads each."""
    token = TASK_THREADS.set(int(n))
    try:
        yield
    finally:
        TASK_THREADS.reset(token)


def current_threads() -> int | None:
    """The thread limit of the flow that submitted the running task, or None (no flow limit, or another process)."""
    return TASK_THREADS.get()


def limited(fn: F) -> F:
    """Run ``fn`` under the submitting flow's thread limit (``TASK_THREADS``), in whatever thread it runs.

    The wrapper reaches the variable only through ``current_threads``: a Dask runner pickles the task's function by
    value, and a ContextVar cannot be pickled, while a module-level function is pickled by reference."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        n = current_threads()
        if n is None:
            return fn(*args, **kwargs)
        with threadpool_limits(limits=n):
            return fn(*args, **kwargs)

    return run  # type: ignore[return-value]
