"""Compute budgets (shiftlib.budget) and the size-aware learner routes (shiftlib.learners)."""

import numpy as np
import pytest
from sklearn.datasets import make_classification

from shiftlib.budget import KMM_MAX_ROWS, auto_weighting, concurrency, detectable_auc, scored_folds, subsample
from shiftlib.learners import (
    KNN_MAX_ROWS,
    RF_MAX_LEAVES,
    SVM_EXACT_ROWS,
    WeightedKNeighborsClassifier,
    make_learner,
)
from shiftlib.selection import concat_scores, source_cv


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


@pytest.mark.heavy
def test_svm_above_the_exact_size_is_nystroem_plus_a_linear_model():
    small = make_learner("SVM", n_rows=SVM_EXACT_ROWS)
    big = make_learner("SVM", n_rows=SVM_EXACT_ROWS + 1, random_state=0)
    from sklearn.calibration import CalibratedClassifierCV

    assert isinstance(small.steps[-1][1], CalibratedClassifierCV)
    assert [type(s).__name__ for _, s in big.steps] == ["StandardScaler", "Nystroem", "LogisticRegression"]
    X, y = make_classification(n_samples=600, n_features=6, random_state=0)
    w = np.r_[np.ones(300), 2 * np.ones(300)]
    got = make_learner("SVM", n_rows=10**6, random_state=0).fit(X, y, sample_weight=w).predict_proba(X)
    # independent: the same three steps by hand, the weights going to the linear model only
    from sklearn.base import clone

    scale, nys, lr = (clone(s) for _, s in big.steps)
    Z = nys.fit_transform(scale.fit_transform(X))
    expected = lr.fit(Z, y, sample_weight=w).predict_proba(Z)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_knn_above_its_size_keeps_a_subsample_and_votes_like_plain_knn_on_it():
    X, y = make_classification(n_samples=300, n_features=4, random_state=1)
    big = WeightedKNeighborsClassifier(n_neighbors=5, max_rows=100, random_state=0).fit(X, y)
    keep = np.sort(np.random.default_rng(0).choice(300, 100, replace=False))
    plain = WeightedKNeighborsClassifier(n_neighbors=5).fit(X[keep], y[keep])
    np.testing.assert_array_equal(big.predict_proba(X), plain.predict_proba(X))
    assert make_learner("kNN", n_rows=KNN_MAX_ROWS + 1).steps[-1][1].max_rows == KNN_MAX_ROWS


@pytest.mark.heavy
def test_rf_above_its_size_has_bounded_trees():
    rf = make_learner("RF", n_rows=10**6, random_state=0)
    p = rf.steps[-1][1].get_params()
    assert p["n_estimators"] == 100 and p["max_leaf_nodes"] == RF_MAX_LEAVES
    X, y = make_classification(n_samples=2000, n_features=5, flip_y=0.3, random_state=0)
    fitted = make_learner("RF", n_rows=10**6, random_state=0, max_leaf_nodes=16, max_samples=500).fit(X, y)
    assert max(t.get_n_leaves() for t in fitted.steps[-1][1].estimators_) <= 16


@pytest.mark.slow  # default-suite budget: 15–37 s each beside other work (--durations)
@pytest.mark.heavy
def test_hgb_is_a_weight_aware_candidate():
    X, y = make_classification(n_samples=400, n_features=5, random_state=0)
    w = np.r_[np.zeros(200), np.ones(200)]
    a = make_learner("HGB", random_state=0).fit(X, y, sample_weight=w).predict_proba(X)
    b = make_learner("HGB", random_state=0).fit(X[200:], y[200:]).predict_proba(X)
    # zero weight = row absent, except for the bin edges, which HGB computes from every row
    assert np.mean(a.argmax(1) == b.argmax(1)) > 0.95


@pytest.mark.heavy
def test_candidates_scored_one_at_a_time_put_together_equal_one_call():
    X, y = make_classification(n_samples=200, n_features=5, random_state=0)
    names = ["LR", "NB", "DT"]
    whole = source_cv(names, X, y, k=5, random_state=0)
    parts = concat_scores([source_cv([n], X, y, k=5, random_state=0) for n in names])
    np.testing.assert_array_equal(parts.scores[names].to_numpy(), whole.scores[names].to_numpy())
    assert parts.n_fits == whole.n_fits and list(parts.ranks[names]) == list(whole.ranks[names])
    with pytest.raises(ValueError, match="more than one part"):
        concat_scores([source_cv(["LR"], X, y, k=5, random_state=0)] * 2)


def test_fan_out_only_above_its_row_count():
    from shiftlib.budget import FANOUT_MIN_ROWS, fan_out

    assert not fan_out(150) and not fan_out(FANOUT_MIN_ROWS) and fan_out(FANOUT_MIN_ROWS + 1)


def test_check_classes_refuses_more_than_max_classes_and_names_rare_ones():
    import shiftlib.budget as budget
    from shiftlib.ingest import IngestError
    from shiftlib.requirements import check_classes

    assert budget.MAX_CLASSES == 20 and budget.RARE_CLASS_ROWS == 5  # the shipped defaults
    with pytest.raises(IngestError, match=r"label 'y' has 21 classes in the source, more than max_classes=20"):
        check_classes({f"k{i}": 10 for i in range(21)}, "y")
    assert check_classes({f"k{i}": 10 for i in range(21)}, "y", max_classes=21) == []
    (note,) = check_classes({"a": 100, "b": 4, "c": 1, "d": 5}, "y")
    assert "fewer than 5 source rows: c (1), b (4);" in note  # d (5 rows) is not rare


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
