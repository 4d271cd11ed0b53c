"""Benchmark: primal CSLR (DL Optimization Problem 1) vs scikit-learn's LogisticRegression (lbfgs).

Run from the repository root::

    nice python -m benchmarks.cslr                 # n_source = n_target = 10,000, d = 50
    nice python -m benchmarks.cslr --threads 1     # same, BLAS limited to one thread for both

Both fits run in the same process on the same source rows, interleaved, ``--repeats`` times; the ratio
printed is median(CSLR wall time) / median(LogisticRegression wall time). CSLR additionally uses the
10,000 unlabeled target rows (that is its job). Goal: ratio ≤ 10. No assertion: this prints only.
Data: seeded Gaussian source, target shifted by a random mean, labels from a logistic model.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Sequence

import numpy as np
from scipy.special import expit
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from shiftlib.cslr import CovariateShiftLogisticRegression


def make_data(n_source: int, n_target: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gaussian source, mean-shifted Gaussian target, logistic labels on the source (seeded)."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d) * 2.0 / np.sqrt(d)
    X_source = rng.normal(size=(n_source, d))
    X_target = rng.normal(size=(n_target, d)) + 0.3 * rng.normal(size=d)
    y = (rng.random(n_source) < expit(X_source @ w)).astype(int)
    return X_source, y, X_target


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cslr", description=__doc__.splitlines()[0])
    ap.add_argument("--n-source", type=int, default=10_000)
    ap.add_argument("--n-target", type=int, default=10_000)
    ap.add_argument("--d", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="BLAS threads for both fits (default: library's)")
    args = ap.parse_args(argv)
    X, y, T = make_data(args.n_source, args.n_target, args.d, args.seed)
    t_lr, t_cslr = [], []
    limit = threadpool_limits(args.threads) if args.threads else contextlib.nullcontext()
    with limit:
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            LogisticRegression().fit(X, y)
            t_lr.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            est = CovariateShiftLogisticRegression().fit(X, y, X_target=T)
            t_cslr.append(time.perf_counter() - t0)
    med_lr, med_cslr = statistics.median(t_lr), statistics.median(t_cslr)
    print(f"n_source={args.n_source} n_target={args.n_target} d={args.d} seed={args.seed} "
          f"threads={args.threads or 'default'} repeats={args.repeats}")
    print("LogisticRegression(lbfgs) s: " + " ".join(f"{t:.3f}" for t in t_lr) + f"  median {med_lr:.3f}")
    print("CSLR (primal)            s: " + " ".join(f"{t:.3f}" for t in t_cslr) + f"  median {med_cslr:.3f}")
    print(f"CSLR Newton steps: {est.n_iter_}, converged: {est.converged_}, "
          f"log-posterior {est.log_posterior_path_[0]:.2f} -> {est.log_posterior_path_[-1]:.2f}")
    print("per-repeat ratios: " + " ".join(f"{c / b:.1f}" for b, c in zip(t_lr, t_cslr, strict=True)))
    print(f"ratio median(CSLR)/median(LR) = {med_cslr / med_lr:.1f}  (goal <= 10)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
