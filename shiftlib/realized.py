"""Learning from realised labels: a deployment's past estimation errors correct today's estimate.

Once the labels of k earlier batches of the same deployment have arrived (``shiftflow evaluate``), each of
those batches gives one residual of the label-free estimator, e_j = realised_j − estimate_j. A label-free
estimator that is biased on this deployment (a shift it does not model, a learner it misjudges) tends to be
biased the same way on the next batch, and the spread of its past errors says how far today's estimate may
be off. :func:`realized_correction` therefore

* corrects today's label-free estimate by the mean past residual ē (a bias correction over batches), and
* gives it the Student-t prediction interval for one more residual,

      (estimate + ē) ± t_{k−1, (1+c)/2} · s · √(1 + 1/k),

  where s is the residuals' sample standard deviation (ddof 1). If the residuals are independent draws of one
  normal distribution, e_new − ē ~ N(0, σ²(1 + 1/k)) and (e_new − ē) / (s √(1 + 1/k)) ~ t_{k−1}, so the
  interval holds the realised accuracy with probability c (Geisser, *Predictive Inference: An Introduction*,
  1993, §2.1; Hahn & Meeker, *Statistical Intervals*, 1991, §4.7).

Given today's batch size n, s is first raised to the binomial standard deviation of today's realised accuracy,
√(c̃(1 − c̃)/n) at the corrected estimate c̃: the realised accuracy of n rows varies at least that much around
the population's, so a residual's spread cannot be smaller (except by what the batch's features explain), and
three residuals that happen to agree would otherwise give an interval narrower than the batch's own noise
(helper-37's guImmun night 4: errors −0.078, −0.088, −0.073, and the interval missed by 0.035).

It uses the :data:`REALIZED_WINDOW` most recent residuals, so an estimator whose bias drifts over the stream
is judged by its recent errors. Below :data:`MIN_REALIZED_BATCHES` it returns None and the caller keeps the
label-free interval: with two residuals t_{1, 0.975} = 12.7 makes any interval useless.

A split-conformal interval over batches (Vovk, Gammerman & Shafer 2005; Lei et al., JASA 2018) needs no
normality but ⌈(k+1)c⌉ ≤ k, i.e. k ≥ 19 batches at c = 0.95: too many for a nightly deployment's first
weeks, which is when the correction matters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["BINOMIAL_FLOOR", "CHANCE_AUC", "MIN_REALIZED_BATCHES", "REALIZED_WINDOW", "RealizedCorrection",
           "at_chance", "floor_rows", "realized_correction"]

#: fewest realised batches before the past errors replace the label-free interval
MIN_REALIZED_BATCHES = 3
#: the most recent realised batches whose errors are used
REALIZED_WINDOW = 10
#: whether the flow gives :func:`realized_correction` today's batch rows, raising the residuals' spread to the
#: batch's binomial noise: adopted by the rule of ``replications/realized_floor.py`` (its mean width 1.04 × at
#: k = 5 and 1.03 × as shipped, within its bound of 1.25; ``reports/estimation_realized_floor.md``)
BINOMIAL_FLOOR = True
#: realised AUC at or below which a model's scores tell a batch's classes apart no better than chance
CHANCE_AUC = 0.6


@dataclass(frozen=True)
class RealizedCorrection:
    """Today's estimate corrected by the past realised errors of the same deployment.

    Parameters
    ----------
    accuracy, ci_low, ci_high : float
        The corrected estimate and its prediction interval, clipped to [0, 1].
    bias : float
        ē, the mean past residual (realised − estimated) added to the estimate.
    spread : float
        s, the past residuals' standard deviation (ddof 1), raised to the batch's binomial standard deviation
        when the batch size was given.
    n_batches : int
        k, the realised batches used (at most :data:`REALIZED_WINDOW`).
    """

    accuracy: float
    ci_low: float
    ci_high: float
    bias: float
    spread: float
    n_batches: int


def realized_correction(estimate: float, past_estimates: ArrayLike, past_realized: ArrayLike, *,
                        confidence: float = 0.95, min_batches: int = MIN_REALIZED_BATCHES,
                        window: int = REALIZED_WINDOW, n_target: int | None = None) -> RealizedCorrection | None:
    """Correct ``estimate`` by the past residuals and give it the t prediction interval (module docstring).

    Parameters
    ----------
    estimate : float
        Today's label-free estimate of the accuracy.
    past_estimates, past_realized : array-like of float
        The same estimator's label-free estimates on earlier batches of this deployment and the accuracies
        realised there, oldest first (one pair per batch).
    confidence : float
        Coverage of the interval, in (0, 1).
    min_batches : int
        Fewest pairs before a correction is made (at least 2: the spread needs two residuals).
    window : int
        The most recent pairs used.
    n_target : int, optional
        Today's batch rows: s is raised to the binomial standard deviation √(c̃(1 − c̃)/n) at the corrected
        estimate c̃ (module docstring). None: s as observed.

    Returns
    -------
    RealizedCorrection or None
        None when fewer than ``min_batches`` pairs are given.
    """
    from scipy.stats import t as student_t

    est = np.asarray(past_estimates, dtype=float).ravel()
    real = np.asarray(past_realized, dtype=float).ravel()
    if est.shape != real.shape:
        raise ValueError(f"past_estimates and past_realized need one value per batch; got {est.size} and "
                         f"{real.size}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1); got {confidence!r}")
    if min_batches < 2 or window < min_batches:
        raise ValueError(f"need 2 <= min_batches <= window; got min_batches={min_batches}, window={window}")
    if not math.isfinite(estimate) or not np.isfinite(est).all() or not np.isfinite(real).all():
        raise ValueError("the estimate and the past estimates and realised accuracies must be finite numbers")
    resid = (real - est)[-window:]
    k = resid.size
    if k < min_batches:
        return None
    if n_target is not None and (not isinstance(n_target, int | np.integer) or n_target < 1):
        raise ValueError(f"n_target must be a positive number of batch rows; got {n_target!r}")
    bias, spread = float(resid.mean()), float(resid.std(ddof=1))
    center = estimate + bias
    if n_target is not None:
        c = min(max(center, 0.0), 1.0)
        spread = max(spread, math.sqrt(c * (1 - c) / int(n_target)))
    half = float(student_t.ppf((1 + confidence) / 2, k - 1)) * spread * math.sqrt(1 + 1 / k)
    lo, mid, hi = np.clip([center - half, center, center + half], 0.0, 1.0)
    return RealizedCorrection(accuracy=float(mid), ci_low=float(lo), ci_high=float(hi), bias=bias, spread=spread,
                              n_batches=k)


def floor_rows(n_target: int | None, past_rows: ArrayLike = ()) -> int | None:
    """The rows the next realised accuracy will rest on, for :func:`realized_correction`'s ``n_target``: the
    batch's ``n_target`` rows, or fewer when the earlier batches were evaluated on fewer labeled rows
    (``past_rows``, their median): a realised accuracy of 300 labeled rows of a 10,000-row batch carries the noise
    of 300 (helper-40). None when neither is known.

    Parameters
    ----------
    n_target : int or None
        Today's batch rows.
    past_rows : array-like of float
        The labeled rows each earlier realised accuracy rests on (missing values ignored).

    Returns
    -------
    int or None
        The rows, or None.
    """
    past = np.asarray(past_rows, dtype=float).ravel()
    past = past[np.isfinite(past)]
    if past.size == 0:
        return n_target
    labeled = int(np.median(past))
    return labeled if n_target is None else min(int(n_target), labeled)


def at_chance(aucs: ArrayLike) -> bool:
    """Whether every model's realised AUC on a batch's labels is at most :data:`CHANCE_AUC`: no model tells the
    labels' classes apart better than chance, as when the labels are another batch's or in another row order, or
    when no model carries over to the batch. False when an AUC is missing (more than two classes) or none is given.

    Parameters
    ----------
    aucs : array-like of float
        One realised AUC per model.

    Returns
    -------
    bool
    """
    a = np.asarray(aucs, dtype=float).ravel()
    return bool(a.size and np.isfinite(a).all() and (a <= CHANCE_AUC).all())
