"""OpenMP threads of tasks run in worker threads: the flow's limit, set in its own thread, and a limit set in each task.

The retrain flow runs its fanned-out tasks (training per candidate, CV per candidate, …) in Prefect's thread-pool
task runner, ``max_workers`` at once, and bounds BLAS/OpenMP threads with ``threadpool_limits`` entered in the
flow's thread. OpenBLAS's thread count is global to the process, but OpenMP's is per thread: a worker thread's
OpenMP regions (scikit-learn's HistGradientBoosting, the k-nearest-neighbour search) start with the process
default, one thread per core. This measures, in the same run:

- ``flow thread``: ``threadpool_limits(1)`` entered in the main thread, two fits at once in a 2-thread pool (what
  the flow did);
- ``each task``: the same, with ``threadpool_limits(1, user_api="openmp")`` entered inside each task as well.

Each case fits ``--tasks`` candidates (HGB, and kNN's fit + predict) on the same synthetic table, two at a time,
``--repeats`` times; prints the median wall seconds and the ratio ``each task / flow thread``, and the OpenMP
threads a task saw. Run it alone on the machine: ``python benchmarks/openmp_threads.py``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext

import numpy as np
from sklearn.datasets import make_classification
from threadpoolctl import threadpool_info, threadpool_limits

from shiftlib.learners import make_learner


def _openmp_threads() -> int:
    return max((i["num_threads"] for i in threadpool_info() if i["user_api"] == "openmp"), default=0)


def _job(name: str, X: np.ndarray, y: np.ndarray, per_task: bool) -> int:
    with threadpool_limits(limits=1, user_api="openmp") if per_task else nullcontext():
        model = make_learner(name, random_state=0).fit(X, y)
        model.predict(X[:5000])
        return _openmp_threads()


def run(per_task: bool, names: list[str], X: np.ndarray, y: np.ndarray) -> tuple[float, set[int]]:
    t0 = time.perf_counter()
    with threadpool_limits(limits=1), ThreadPoolExecutor(2) as ex:
        seen = {f.result() for f in [ex.submit(_job, n, X, y, per_task) for n in names]}
    return time.perf_counter() - t0, seen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=40_000)
    ap.add_argument("--tasks", type=int, default=4, help="candidates per case, half HGB, half kNN")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    X, y = make_classification(n_samples=args.rows, n_features=20, n_informative=8, random_state=0)
    names = ["HGB", "kNN"] * (args.tasks // 2)
    cases: dict[str, Callable[[], tuple[float, set[int]]]] = {
        "flow thread": lambda: run(False, names, X, y), "each task": lambda: run(True, names, X, y)}
    times: dict[str, list[float]] = {k: [] for k in cases}
    seen: dict[str, set[int]] = {k: set() for k in cases}
    for _ in range(args.repeats):  # interleaved, so a drift in the machine's load touches both cases alike
        for k, f in cases.items():
            t, s = f()
            times[k].append(t)
            seen[k] |= s
    print(f"{args.rows} rows × 20 features, {len(names)} fits (HGB, kNN) two at a time, {args.repeats} repeats")
    for k in cases:
        print(f"  {k:12s} median {statistics.median(times[k]):7.2f} s  (runs {', '.join(f'{t:.2f}' for t in times[k])});"
              f" OpenMP threads in a task: {sorted(seen[k])}")
    ratio = statistics.median(times["each task"]) / statistics.median(times["flow thread"])
    print(f"  ratio each task / flow thread: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
