"""Compute budgets (shiftlib.budget): subsamples, scored folds, the detectable AUC, concurrency, the weighting
policy, fan-out and the memory check."""

import numpy as np
import pytest

from shiftlib.budget import KMM_MAX_ROWS, auto_weighting, concurrency, detectable_auc, scored_folds, subsample


def test_subsample_keeps_every_row_when_the_table_fits():
    np.testing.assert_array_equal(subsample(7, 10), np.arange(7))
    np.testing.assert_array_equal(subsample(7, None), np.arange(7))


def test_subsample_is_stratified_sorted_unique_and_seeded():
    y = np.r_[np.zeros(900), np.ones(100)]
    idx = subsample(1000, 200, y=y, random_state=3)
    assert len(idx) == 200 and len(np.unique(idx)) == 200 and np.all(np.diff(idx) > 0)
    assert (y[idx] == 1).sum() == 20  # the class share 10 % is kept exactly (stratified)
    np.testing.assert_array_equal(idx, subsample(1000, 200, y=y, random_state=3))


def test_subsample_refuses_a_bad_size():
    with pytest.raises(ValueError, match="at least 1"):
        subsample(10, 0)


def test_scored_folds_scores_at_least_the_rows_asked_for():
    assert scored_folds(4_000, 10, 5_000) is None and scored_folds(4_000, 10, None) is None  # all k folds
    assert scored_folds(15_000, 10, 5_000) == 4  # ceil(5000·10/15000) = ceil(3.33): 4 folds of 1,500 rows
    assert scored_folds(50_000, 10, 5_000) == 1 and scored_folds(1_000_000, 10, 5_000) == 1
    assert scored_folds(5_001, 10, 5_000) == 10  # just above: still every fold
    for n in (5_001, 7_777, 15_000, 123_456):
        f = scored_folds(n, 10, 5_000)
        assert f * (n // 10) >= 5_000 - f and (f - 1) * (n / 10) < 5_000  # enough rows, and no fold too many
    with pytest.raises(ValueError, match="rows"):
        scored_folds(100, 10, 0)


def test_detectable_auc_matches_the_hand_computation():
    # n_s = n_t = 100: se = sqrt(201 / (12 * 100 * 100)) = 0.040927; z_0.95 + z_0.8 = 1.644854 + 0.841621
    assert detectable_auc(100, 100) == pytest.approx(0.5 + 2.486475 * 0.0409268, abs=1e-6)
    assert detectable_auc(20_000, 20_000) < 0.51  # the drift subsample still sees a 1-point AUC shift


def test_concurrency_bounds_tasks_times_threads_by_the_cores():
    for cores in (1, 2, 8):
        for workers in (None, 1, 2, 3, 16):
            c = concurrency(workers, cores)
            assert c.max_workers == (workers or cores)
            assert c.threads_per_task >= 1
            assert c.max_workers * c.threads_per_task <= max(cores, c.max_workers)
    assert concurrency(1, 8).threads_per_task == 8


def test_auto_weighting_policy():
    assert auto_weighting(False, 10) == "none"
    assert auto_weighting(True, KMM_MAX_ROWS) == "kmm"
    assert auto_weighting(True, KMM_MAX_ROWS + 1) == "discriminative"


def test_fan_out_only_above_its_row_count():
    from shiftlib.budget import FANOUT_MIN_ROWS, fan_out

    assert not fan_out(150) and not fan_out(FANOUT_MIN_ROWS) and fan_out(FANOUT_MIN_ROWS + 1)


def test_check_memory_is_base_plus_factor_times_the_tables():
    import shiftlib.budget as budget
    from shiftlib.errors import ShiftflowInputError

    assert (budget.RUN_MEMORY_BASE_GIB, budget.RUN_MEMORY_FACTOR) == (1.0, 18)  # reports/scale.md
    assert budget.check_memory(2**30, 100.0) == pytest.approx(1.0 + 18.0)  # one GiB of tables
    with pytest.raises(ShiftflowInputError, match=r"about 1.00 GiB in memory and the run about 19.0 GiB, more than "
                       r"max_memory=10.0 GiB: subsample"):
        budget.check_memory(2**30, 10.0)
    # the default: half of what is available (30 GiB here)
    assert budget.check_memory(2**29, None, available_gib=30.0) == pytest.approx(10.0)
    with pytest.raises(ShiftflowInputError, match=r"max_memory=15.0 GiB \(half the RAM available now\)"):
        budget.check_memory(2**30, None, available_gib=30.0)


def test_a_class_too_rare_for_its_share_keeps_two_rows():
    """Stratified: 5 rows of class 2 among 10,000 have a share of 0.5 rows in a 1,000-row subsample, which rounds
    to 0 or 1; the class keeps 2 rows besides (its first ones when none was drawn) so every class is there for
    cross-validation. The common classes keep their shares (the stratified draw is unchanged)."""
    y = np.r_[np.zeros(6000, int), np.ones(3995, int), np.full(5, 2)]
    idx = subsample(len(y), 1000, y=y, random_state=0)
    counts = np.bincount(y[idx], minlength=3)
    assert counts[2] >= 2 and len(idx) <= 1000 + 2 and len(set(idx)) == len(idx)
    assert abs(counts[0] - 600) <= 1 and abs(counts[1] - 400) <= 1
    assert np.array_equal(idx, np.sort(idx))
    # classes that the draw keeps are left alone: the same draw as scikit-learn's stratified split
    common = np.r_[np.zeros(600, int), np.ones(400, int)]
    from sklearn.model_selection import train_test_split

    ref, _ = train_test_split(np.arange(1000), train_size=100, stratify=common, random_state=0)
    np.testing.assert_array_equal(subsample(1000, 100, y=common, random_state=0), np.sort(ref))
