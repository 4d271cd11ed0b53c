"""shiftlib.realized: today's estimate corrected by a deployment's past realised errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import t as student_t

from shiftlib.realized import MIN_REALIZED_BATCHES, REALIZED_WINDOW, realized_correction


def test_hand_worked_three_batches():
    # residuals realised − estimated: 0.78−0.80, 0.69−0.70, 0.85−0.90 = −0.02, −0.01, −0.05
    # ē = −0.08/3 = −0.026667; deviations 0.006667, 0.016667, −0.023333; Σd² = 8.6667e-4; s = √(8.6667e-4/2)
    # = 0.0208167; t_{2, 0.975} = 4.302653; √(1 + 1/3) = 1.1547005; half = 0.1034236; centre 0.80 − 0.026667
    r = realized_correction(0.80, [0.80, 0.70, 0.90], [0.78, 0.69, 0.85])
    assert r is not None and r.n_batches == 3
    assert r.bias == pytest.approx(-0.0266667, abs=1e-6)
    assert r.spread == pytest.approx(0.0208167, abs=1e-6)
    assert r.accuracy == pytest.approx(0.7733333, abs=1e-6)
    assert r.ci_low == pytest.approx(0.7733333 - 0.1034236, abs=2e-6)
    assert r.ci_high == pytest.approx(0.7733333 + 0.1034236, abs=2e-6)


def test_the_spread_is_raised_to_the_batchs_binomial_noise_when_its_size_is_given():
    # helper-37's guImmun night 4, rounded: residuals 0.522−0.60, 0.532−0.62, 0.507−0.58 = −0.078, −0.088, −0.073
    # agree: s = 0.0076376 (deviations 0.001667, −0.008333, 0.006667; Σd² = 1.16667e-4; /2; √). ē = −0.0796667,
    # centre 0.59 − 0.0796667 = 0.5103333. A batch of 200 rows: √(0.5103333 · 0.4896667 / 200) = 0.0353478 > s,
    # so half = t_{2, 0.975} 4.302653 · 0.0353478 · √(4/3) 1.1547005 = 0.1756175 (without it, 0.0379445)
    args = (0.59, [0.60, 0.62, 0.58], [0.522, 0.532, 0.507])
    plain, floored = realized_correction(*args), realized_correction(*args, n_target=200)
    assert plain.spread == pytest.approx(0.0076376, abs=1e-6) and floored.spread == pytest.approx(0.0353478, abs=1e-6)
    assert floored.accuracy == plain.accuracy == pytest.approx(0.5103333, abs=1e-6)
    assert floored.ci_high - floored.accuracy == pytest.approx(0.1756175, abs=2e-6)
    assert plain.ci_high - plain.accuracy == pytest.approx(0.0379445, abs=2e-6)
    # the hand-worked three batches above: s 0.0208167 beats √(0.7733333 · 0.2266667 / 10,000) = 0.0041868
    spread = [0.80, 0.70, 0.90], [0.78, 0.69, 0.85]
    assert realized_correction(0.80, *spread, n_target=10_000) == realized_correction(0.80, *spread)
    with pytest.raises(ValueError, match="n_target must be a positive number of batch rows"):
        realized_correction(*args, n_target=0)


def test_the_shipped_defaults():
    assert (MIN_REALIZED_BATCHES, REALIZED_WINDOW) == (3, 10)
    assert realized_correction(0.8, [0.8, 0.7], [0.78, 0.69]) is None  # two batches: the label-free interval stays


def test_only_the_most_recent_window_counts():
    old = [0.5] * 5  # five old batches with a residual of +0.3, outside a window of 4
    est = old + [0.80, 0.70, 0.90, 0.60]
    real = [0.8] * 5 + [0.78, 0.69, 0.85, 0.62]
    got = realized_correction(0.7, est, real, window=4)
    want = realized_correction(0.7, est[-4:], real[-4:], window=4)
    assert got == want and got.bias == pytest.approx((-0.02 - 0.01 - 0.05 + 0.02) / 4)


@pytest.mark.heavy
@pytest.mark.parametrize("k", [3, 5])
def test_the_interval_holds_a_new_residual_at_its_level(k):
    # the defining property: residuals i.i.d. normal with an unknown bias and spread → P(new one inside) = 0.95
    # exactly (Student t); 6,000 simulated deployments give a standard error of 0.0028 on the coverage. Without
    # the √(1 + 1/k) term coverage at k = 3 would be 0.935; with a normal quantile instead of t, 0.86
    rng = np.random.default_rng(k)
    bias, sd, n = 0.04, 0.03, 6_000
    resid = rng.normal(bias, sd, size=(n, k + 1))
    estimate = 0.7
    hits = 0
    for row in resid:
        r = realized_correction(estimate, np.full(k, estimate), estimate + row[:k])
        hits += r.ci_low <= estimate + row[k] <= r.ci_high
    assert hits / n == pytest.approx(0.95, abs=0.008)


def test_the_half_width_is_t_times_spread_times_the_prediction_factor():
    est, real = np.array([0.7, 0.72, 0.69, 0.71, 0.7]), np.array([0.75, 0.74, 0.76, 0.73, 0.77])
    r = realized_correction(0.7, est, real, confidence=0.9)
    s = np.std(real - est, ddof=1)
    half = student_t.ppf(0.95, 4) * s * math.sqrt(1 + 1 / 5)
    assert (r.ci_high - r.ci_low) / 2 == pytest.approx(half, rel=1e-12)
    assert r.accuracy == pytest.approx(0.7 + np.mean(real - est), rel=1e-12)


def test_bounds_stay_in_the_unit_interval():
    r = realized_correction(0.99, [0.9, 0.9, 0.9], [0.99, 0.97, 1.0])
    assert 0 <= r.ci_low <= r.accuracy <= r.ci_high == 1.0


@pytest.mark.parametrize(("args", "kwargs", "match"), [
    ((0.8, [0.8, 0.7, 0.9], [0.7, 0.8]), {}, "one value per batch"),
    ((0.8, [0.8, 0.7, 0.9], [0.7, 0.8, 0.9]), {"confidence": 1.0}, "confidence"),
    ((0.8, [0.8, 0.7, 0.9], [0.7, 0.8, 0.9]), {"min_batches": 1}, "min_batches"),
    ((0.8, [0.8, np.nan, 0.9], [0.7, 0.8, 0.9]), {}, "finite"),
])
def test_bad_input_is_refused_with_the_reason(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        realized_correction(*args, **kwargs)


def test_floor_rows_and_chance_worked_by_hand():
    """floor_rows: the batch's rows, or the median of the rows earlier realised accuracies rest on when fewer
    (300, 250, 400 → 300 of 10,000; NaN ignored); at_chance: every AUC ≤ 0.6, none missing."""
    from shiftlib.realized import CHANCE_AUC, at_chance, floor_rows

    assert floor_rows(10_000, [300, 250, 400, np.nan]) == 300
    assert floor_rows(200, [300, 250, 400]) == 200 and floor_rows(None, [300]) == 300
    assert floor_rows(500) == 500 and floor_rows(None) is None
    assert CHANCE_AUC == 0.6 and at_chance([0.52, 0.6]) and not at_chance([0.52, 0.61])
    assert not at_chance([0.5, np.nan]) and not at_chance([])
