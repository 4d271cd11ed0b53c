"""flows.runners: ``make_task_runner`` builds Prefect's thread pool or a Dask task runner as its docstring says.
``prefect_dask`` is a stand-in here (importing it and ``distributed`` takes ~10 s); the real Dask runner runs in
``test_dask.py`` (slow) and the CLI flags that reach it in ``test_cli.py``."""

from __future__ import annotations

import sys
import types
import warnings
from typing import Any

import pytest

from flows.runners import KINDS, make_task_runner


class _DaskTaskRunner:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


@pytest.fixture
def dask(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("prefect_dask")
    module.DaskTaskRunner = _DaskTaskRunner  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "prefect_dask", module)
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")  # no warning; nothing connects


def test_the_kinds() -> None:
    assert KINDS == ("thread", "dask")


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"kind": "ray"}, "unknown task runner kind 'ray'; use one of thread, dask"),
    ({"kind": "thread", "n_workers": 0}, "n_workers must be at least 1, got 0"),
    ({"kind": "dask", "n_workers": -2}, "n_workers must be at least 1, got -2"),
    ({"kind": "thread", "address": "tcp://127.0.0.1:8786"}, "only applies to kind='dask'"),
])
def test_bad_arguments_are_refused_naming_the_fix(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError) as err:
        make_task_runner(**kwargs)
    assert words in str(err.value)


def test_thread_is_prefects_thread_pool_of_n_workers() -> None:
    from prefect.task_runners import ThreadPoolTaskRunner

    runner = make_task_runner("thread", n_workers=3)
    assert type(runner) is ThreadPoolTaskRunner and runner._max_workers == 3
    assert make_task_runner()._max_workers == ThreadPoolTaskRunner()._max_workers  # default: Prefect's own


def test_dask_without_an_address_is_a_local_cluster_of_single_threaded_processes(dask: None) -> None:
    runner = make_task_runner("dask")
    assert runner.kwargs["cluster_class"] == "distributed.LocalCluster"
    kw = runner.kwargs["cluster_kwargs"]
    # the docstring: n_workers (default 2) single-threaded worker processes on 127.0.0.1, dashboard off; the
    # module docstring: workers import flows.retrain before their first task (--preload flows.retrain)
    assert (kw["n_workers"], kw["threads_per_worker"], kw["processes"]) == (2, 1, True)
    assert (kw["host"], kw["dashboard_address"], kw["preload"]) == ("127.0.0.1", None, ["flows.retrain"])
    assert make_task_runner("dask", n_workers=5).kwargs["cluster_kwargs"]["n_workers"] == 5


def test_dask_with_an_address_uses_the_existing_scheduler(dask: None) -> None:
    assert make_task_runner("dask", address="tcp://10.0.0.5:8786").kwargs == {"address": "tcp://10.0.0.5:8786"}
    with pytest.raises(ValueError, match=r"Dask address '10\.0\.0\.5:8786' needs a scheme, e\.g\. tcp://"):
        make_task_runner("dask", address="10.0.0.5:8786")
    with pytest.raises(ValueError, match="drop n_workers or drop address"):
        make_task_runner("dask", address="tcp://10.0.0.5:8786", n_workers=2)  # the cluster keeps its own workers


def test_dask_without_a_prefect_api_warns(dask: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PREFECT_API_URL")
    with pytest.warns(RuntimeWarning, match="every Dask worker starts its own temporary Prefect API"):
        make_task_runner("dask")
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_task_runner("dask")  # a configured API: no warning
