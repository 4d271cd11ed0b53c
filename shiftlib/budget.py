"""Compute budgets: how many rows each stage works on, and which method fits the size of the data.

Policy for production-size tables (tens of thousands to millions of rows). The candidates are always
fitted on every source row; what is bounded is the work done *about* them:

* the source-CV selectors (SCV, WCV) fit on (k−1)/k of *every* source row, as k-fold CV does, but score
  only the first ``scored_folds`` of the k folds: enough folds to score at least ``SELECTION_ROWS`` rows.
  Fitting on a subsample instead compared the candidates at the wrong point of their learning curves
  (``reports/selection_rows.md``: 0.074 pairwise-order accuracy below the full-data selector at 5,000 rows);
  scoring fewer rows only adds noise to each estimate, which shrinks with the rows scored;
* ReverseTesting, TrCV (reporting only) and the training stage's source-CV metrics run on a stratified
  subsample of at most ``SELECTION_ROWS`` source rows (and as many target rows);
* the drift tests run on at most ``DRIFT_ROWS`` rows per side, a size at which the domain-classifier test
  still detects a domain AUC of about 0.51 (``detectable_auc``);
* ``weighting="auto"`` uses KMM (KMM eq. 12) up to ``KMM_MAX_ROWS`` source rows and discriminative
  weights (DL eq. 7, one classifier fit over all rows) above, where KMM's kernel sums grow like
  ``n_source · n_target``.

The values are chosen by measurement: ``benchmarks/selection_rows.py`` (agreement of the subsampled
selectors with the full-data ones) and ``benchmarks/scale.py`` (time and memory per stage).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "RUN_MEMORY_BASE_GIB",
    "RUN_MEMORY_FACTOR",
    "check_memory",
    "MAX_CLASSES",
    "RARE_CLASS_ROWS",
    "DRIFT_ROWS",
    "FANOUT_MIN_ROWS",
    "KMM_MAX_ROWS",
    "SELECTION_ROWS",
    "Concurrency",
    "auto_weighting",
    "concurrency",
    "detectable_auc",
    "fan_out",
    "scored_folds",
    "subsample",
]

SELECTION_ROWS = 5_000
#: batch rows a scored batch's estimate and drift test use at most (``shiftlib.monitoring``; a seeded uniform
#: sample above it): the estimate's target-sampling error at 5,000 rows is at most 0.5/sqrt(5000) ≈ 0.007,
#: below the intervals' other terms
MONITOR_ROWS = 5_000
FANOUT_MIN_ROWS = 1_000
DRIFT_ROWS = 20_000
KMM_MAX_ROWS = 20_000


def subsample(n: int, max_rows: int | None, *, y: Any = None, random_state: Any = None) -> np.ndarray:
    """Sorted row positions of a subsample of at most ``max_rows`` of ``n`` rows (all rows when ``n`` fits).

    With ``y`` the subsample is stratified: every class keeps its share of rows (scikit-learn's
    ``train_test_split(stratify=y)``), so a minority class is not lost by chance; a class whose share rounds
    below 2 rows keeps its first min(count, 2) rows besides, so every class of ``y`` is in the subsample
    with the 2 rows cross-validation needs (the subsample then exceeds ``max_rows`` by those few rows).

    Parameters
    ----------
    n : int
        Number of rows to draw from.
    max_rows : int or None
        Most rows kept; ``None`` keeps every row.
    y : array-like, optional
        Labels of the ``n`` rows to stratify by; ignored for stratification when a class has fewer than 2 rows.
    random_state : int, RandomState or None, optional
        Seed of the draw, passed to ``train_test_split``.

    Returns
    -------
    numpy.ndarray
        Sorted row positions kept (``arange(n)`` when ``n <= max_rows``).

    Raises
    ------
    ValueError
        If ``max_rows`` is below 1 or ``y`` does not have ``n`` values.
    """
    if max_rows is not None and int(max_rows) < 1:
        raise ValueError(f"max_rows={max_rows} must be at least 1 (or None for every row)")
    if max_rows is None or n <= max_rows:
        return np.arange(n)
    from sklearn.model_selection import train_test_split

    idx = np.arange(n)
    strat = None
    if y is not None:
        y = np.asarray(y)
        if len(y) != n:
            raise ValueError(f"y has {len(y)} values for {n} rows")
        # a class smaller than 2 rows cannot be stratified; it is then left to chance
        strat = y if np.unique(y, return_counts=True)[1].min() >= 2 else None
    keep, _ = train_test_split(idx, train_size=int(max_rows), stratify=strat, random_state=random_state)
    if y is not None:  # a class too rare for its share to round to 2 rows keeps its first min(count, 2) rows
        held, kept_y = set(keep.tolist()), y[keep]
        short = [c for c, n in zip(*np.unique(y, return_counts=True), strict=True) if np.sum(kept_y == c) < min(n, 2)]
        extra = [r for c in short for r in np.flatnonzero(y == c)[:2] if r not in held]
        keep = np.concatenate([keep, np.asarray(extra, dtype=keep.dtype)])
    return np.sort(keep)


def scored_folds(n_rows: int, k: int, rows: int | None) -> int | None:
    """How many of the k source-CV folds to score so that at least ``rows`` rows are scored.

    None (all k folds) when ``n_rows`` ≤ ``rows`` or ``rows`` is None; else ``ceil(rows · k / n_rows)``: one
    fold of ~n/k rows at a million rows, all k as ``n_rows`` falls to ``rows``. The cost is that many fits
    on (k−1)/k of the rows, instead of k.

    Parameters
    ----------
    n_rows : int
        Source rows.
    k : int
        Folds of the source CV (at least 2).
    rows : int or None
        Fewest rows to score; ``None`` scores every fold.

    Returns
    -------
    int or None
        Folds to score, at most ``k``; ``None`` for all ``k``.

    Raises
    ------
    ValueError
        If ``k < 2`` or ``rows < 1``.
    """
    if k < 2:
        raise ValueError(f"k={k} folds: need at least 2")
    if rows is not None and int(rows) < 1:
        raise ValueError(f"rows={rows} must be at least 1 (or None for every fold)")
    if rows is None or n_rows <= rows:
        return None
    return min(k, -(-int(rows) * k // n_rows))


def fan_out(n_rows: int) -> bool:
    """Whether the selectors' per-candidate work goes to one task per candidate (above ``FANOUT_MIN_ROWS``
    source rows) or runs in one task. Each task costs a fixed part (its orchestration, reading the stage's
    inputs again) that fits on a few hundred rows do not repay (``reports/overhead.md``).

    Parameters
    ----------
    n_rows : int
        Source rows.

    Returns
    -------
    bool
        True when ``n_rows > FANOUT_MIN_ROWS`` (one task per candidate).
    """
    return n_rows > FANOUT_MIN_ROWS


def auto_weighting(drifted: bool, n_source: int) -> str:
    """The weighting ``weighting="auto"`` applies: none without drift, KMM (KMM eq. 12) up to
    ``KMM_MAX_ROWS`` source rows, discriminative weights (DL eq. 7) above.

    Parameters
    ----------
    drifted : bool
        Whether the drift stage found drift.
    n_source : int
        Source rows.

    Returns
    -------
    str
        ``"none"``, ``"kmm"`` or ``"discriminative"``.
    """
    if not drifted:
        return "none"
    return "kmm" if n_source <= KMM_MAX_ROWS else "discriminative"


def detectable_auc(n_source: int, n_target: int, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest domain-classifier AUC the drift test detects with probability ``power`` at ``alpha``.

    Uses the null standard error of the Mann–Whitney AUC, ``sqrt((n_s + n_t + 1) / (12 n_s n_t))``
    (Hanley & McNeil, Radiology 1982), and a one-sided normal approximation.

    Parameters
    ----------
    n_source : int
        Source rows the test sees (at least 1).
    n_target : int
        Target rows the test sees (at least 1).
    alpha : float, default 0.05
        Significance level of the one-sided test.
    power : float, default 0.8
        Probability of detecting the returned AUC.

    Returns
    -------
    float
        ``0.5 + (z_{1−alpha} + z_{power}) · se``.

    Raises
    ------
    ValueError
        If either side has no row.
    """
    if n_source < 1 or n_target < 1:
        raise ValueError("both sides need at least one row")
    from scipy.stats import norm  # lazy: the config (and the CLI's preflight) import this module

    se = np.sqrt((n_source + n_target + 1) / (12.0 * n_source * n_target))
    return float(0.5 + (norm.ppf(1 - alpha) + norm.ppf(power)) * se)


@dataclass(frozen=True)
class Concurrency:
    """How many tasks run at once and how many BLAS/OpenMP threads each may use (tasks × threads ≤ cores).

    Parameters
    ----------
    cores : int
        CPU cores of the machine.
    max_workers : int
        Tasks run at once.
    threads_per_task : int
        BLAS/OpenMP threads each task may use.
    """

    cores: int
    max_workers: int
    threads_per_task: int


def concurrency(max_workers: int | None = None, cores: int | None = None) -> Concurrency:
    """Bound the work to the machine: ``max_workers`` tasks (default: the cores) × threads ≤ cores.

    Parameters
    ----------
    max_workers : int, optional
        Tasks run at once; default (``None`` or 0) the cores.
    cores : int, optional
        CPU cores; default (``None`` or 0) ``os.cpu_count()`` (1 if unknown).

    Returns
    -------
    Concurrency
        The cores, the workers and ``max(1, cores // workers)`` threads per task.

    Raises
    ------
    ValueError
        If ``max_workers`` is negative.
    """
    cores = int(cores or os.cpu_count() or 1)
    workers = int(max_workers or cores)
    if workers < 1:
        raise ValueError(f"max_workers={max_workers} must be at least 1")
    return Concurrency(cores=cores, max_workers=workers, threads_per_task=max(1, cores // workers))


#: default most classes a label may have. The label-shift estimators (BBSE, EM) invert a K × K out-of-fold
#: confusion matrix and every estimator keeps K class probabilities per row: with K = 20 a source of a few
#: thousand rows leaves about ten rows per cell; past that each cell rests on a handful of rows and every
#: candidate × estimator pays K-fold work (a 50-class noise label was still estimating after 11 minutes,
#: issue 31). The same bound as ``max_levels`` for a text feature.
MAX_CLASSES = 20
#: a class with fewer source rows than this is named in a warning (RARE_CLASS_ROWS − 1 rows at most)
RARE_CLASS_ROWS = 5

#: a run's peak memory ≈ RUN_MEMORY_BASE_GIB + RUN_MEMORY_FACTOR × the tables' in-memory size (source and
#: target as pandas holds them): from reports/scale.md, where 900,000 more source rows of 191 bytes each
#: (0.16 GiB) raised the flow's peak RSS by 2.8 GiB (about 18×), and a 100,000-row run peaked at 1.5 GiB
RUN_MEMORY_FACTOR = 18
RUN_MEMORY_BASE_GIB = 1.0


def check_memory(table_bytes: float, max_memory_gib: float | None = None, *,
                 available_gib: float | None = None) -> float:
    """The run's estimated peak memory in GiB for tables of ``table_bytes`` in memory; raises
    ``ShiftflowInputError`` (naming the ways through) when it exceeds ``max_memory_gib`` (default: half of
    ``available_gib``, the RAM the caller measured as available, so the machine stays usable).

    Parameters
    ----------
    table_bytes : float
        In-memory size of the source and target tables, in bytes.
    max_memory_gib : float, optional
        Most memory the run may take, in GiB; default half of ``available_gib``.
    available_gib : float, optional
        RAM available now, in GiB; needed when ``max_memory_gib`` is not given.

    Returns
    -------
    float
        Estimated peak memory in GiB: ``RUN_MEMORY_BASE_GIB + RUN_MEMORY_FACTOR · table_bytes / 2**30``.

    Raises
    ------
    ShiftflowInputError
        If the estimate exceeds the limit.
    ValueError
        If neither ``max_memory_gib`` nor ``available_gib`` is given.
    """
    from shiftlib.errors import ShiftflowInputError

    if max_memory_gib is None and available_gib is None:
        raise ValueError("give max_memory_gib, or available_gib to default to half of it")
    limit = float(available_gib) / 2 if max_memory_gib is None else float(max_memory_gib)
    need = RUN_MEMORY_BASE_GIB + RUN_MEMORY_FACTOR * table_bytes / 2**30
    if need > limit:
        raise ShiftflowInputError(
            f"the tables would take about {table_bytes / 2**30:.2f} GiB in memory and the run about {need:.1f} GiB, "
            f"more than max_memory={limit:.1f} GiB" + (" (half the RAM available now)" if max_memory_gib is None
                                                       else "")
            + ": subsample the source (or drop columns), run on a machine or Dask cluster with more memory "
            "(--task-runner dask --dask-address), or raise max_memory (--max-memory GIB); selection_rows bounds "
            "the selection and estimation work, not the tables read")
    return need
