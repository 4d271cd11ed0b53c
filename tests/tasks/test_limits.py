"""tasks.limits: the flow's thread limit reaches a task run in a worker thread (OpenMP's count is per thread)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextvars import copy_context

import pytest
import sklearn.ensemble  # noqa: F401 - loads scikit-learn's OpenMP runtime, as the tasks do
from threadpoolctl import threadpool_info, threadpool_limits

from tasks.limits import TASK_THREADS, limited, task_threads


def _openmp() -> int:
    return max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "openmp")


def test_a_limited_task_in_a_worker_thread_runs_on_the_flows_threads():
    """As Prefect's thread-pool runner does, the task runs in a worker thread in a copy of the submitting context.
    Before: the flow's limit, entered in its own thread, left a worker's OpenMP at the process default."""
    if _openmp() < 2:  # one core: nothing to limit, nothing to show — say so, do not pass
        pytest.skip("one OpenMP thread on this machine: no limit to show")
    limited_omp = limited(_openmp)
    with threadpool_limits(limits=1), task_threads(1), ThreadPoolExecutor(1) as ex:
        assert ex.submit(copy_context().run, _openmp).result() >= 2  # the per-thread default, unlimited
        assert ex.submit(copy_context().run, limited_omp).result() == 1
    assert TASK_THREADS.get() is None  # the block resets the variable
    with ThreadPoolExecutor(1) as ex:  # no flow limit set (a Dask worker process): the task runs as it is
        assert ex.submit(copy_context().run, limited_omp).result() >= 2


def test_a_limited_task_pickles_for_a_dask_worker():
    """Dask's runner pickles a task's function by value (its name points at the Prefect Task, not at it). The
    wrapper once held the ContextVar, which cannot be pickled, and every Dask run failed before its first task."""
    import cloudpickle

    from tasks.training import train_learner

    again = cloudpickle.loads(cloudpickle.dumps(train_learner.fn))
    assert again.__name__ == "train_learner" and again.__wrapped__ is not None
