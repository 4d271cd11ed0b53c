"""Candidate learners (shiftlib.learners): ``fit_learner`` with importance weights that are 0 on many rows (KMM
sets them so under a strong shift), the size-aware routes of ``make_learner`` against the same steps by hand, and
the convention that passes the unlabeled target rows to the learners that need them (DL's CSLR)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.datasets import load_iris, make_classification

from shiftlib.cslr import CovariateShiftLogisticRegression, TwoStageLogisticRegression
from shiftlib.learners import (
    KNN_MAX_ROWS,
    LEARNERS,
    RF_MAX_LEAVES,
    SVM_EXACT_ROWS,
    WeightedKNeighborsClassifier,
    fit_learner,
    make_learner,
    needs_target,
)
from tests.shiftlib.test_cslr import _shifted


def _sparse_weights():
    X, y = load_iris(return_X_y=True)
    w = np.zeros(len(y))
    for c in (0, 1):
        w[np.flatnonzero(y == c)[::5]] = 1.0  # 10 rows each, spread over the class
    # class 2 keeps weight on its first 6 rows only: SVM's 5-fold calibration (unshuffled, stratified on y) then
    # has a training fold with no positive-weight row of class 2, which SVC cannot fit
    w[np.flatnonzero(y == 2)[:6]] = 2.0
    return X, y, w


def test_svm_fails_on_those_weights_when_zero_rows_are_kept() -> None:
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    X, y, w = _sparse_weights()
    Xs = StandardScaler().fit(X).transform(X)
    with pytest.raises(IndexError):  # scikit-learn's own SVC inside CalibratedClassifierCV
        CalibratedClassifierCV(SVC(random_state=0), method="sigmoid", ensemble=False, cv=5).fit(Xs, y, sample_weight=w)


@pytest.mark.heavy
def test_svm_fits_them_as_plain_scikit_learn_does_on_the_positive_rows() -> None:
    """The independent computation: the scaler on every row, then scikit-learn's own CalibratedClassifierCV(SVC)
    on the rows of positive weight (a zero-weight row adds nothing to SVC or to the sigmoid fit)."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    X, y, w = _sparse_weights()
    keep = w > 0
    got = fit_learner(make_learner("SVM", random_state=0), X, y, sample_weight=w).predict_proba(X)
    Xs = StandardScaler().fit(X).transform(X)
    ref = CalibratedClassifierCV(SVC(random_state=0), method="sigmoid", ensemble=False, cv=5).fit(
        Xs[keep], y[keep], sample_weight=w[keep]).predict_proba(Xs)
    np.testing.assert_allclose(got, ref, atol=1e-12)
    frame = fit_learner(make_learner("SVM", random_state=0), pd.DataFrame(X), y, sample_weight=w)
    np.testing.assert_allclose(frame.predict_proba(pd.DataFrame(X)), ref, atol=1e-12)


@pytest.mark.heavy
def test_zero_weight_rows_add_nothing_to_a_weighted_loss() -> None:
    """LR minimises Σ w_i·loss_i + penalty, so its fit with the zero-weight rows kept equals scikit-learn's fit on
    the positive rows alone (the scaler in front sees every row in both); to the solver's tolerance."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    X, y, w = _sparse_weights()
    keep = w > 0
    got = fit_learner(make_learner("LR", random_state=0), X, y, sample_weight=w).predict_proba(X)
    Xs = StandardScaler().fit(X).transform(X)
    ref = LogisticRegression(max_iter=1000, random_state=0, tol=1e-10).fit(
        Xs[keep], y[keep], sample_weight=w[keep]).predict_proba(Xs)
    np.testing.assert_allclose(got, ref, atol=1e-3)


@pytest.mark.heavy
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "HGB" else n  # HGB: 24 s
                                  for n in LEARNERS if not n.startswith("CSLR")])
def test_every_learner_fits_sparse_weights(name: str) -> None:
    X, y, w = _sparse_weights()
    model = fit_learner(clone(make_learner(name, random_state=0)), X, y, sample_weight=w)
    p = model.predict_proba(X)
    assert p.shape == (len(y), 3)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-9)


def test_a_class_with_no_weight_is_named() -> None:
    import pickle

    from shiftlib.learners import WeightlessClassError

    X, y, w = _sparse_weights()
    w[y == 2] = 0.0
    with pytest.raises(WeightlessClassError, match="weights are 0 on every row of class 2") as info:
        fit_learner(make_learner("LR", random_state=0), X, y, sample_weight=w)
    assert info.value.classes == [2]
    back = pickle.loads(pickle.dumps(info.value))
    assert back.classes == [2] and str(back) == str(info.value)
    with pytest.raises(ValueError, match="weights are 0 on every row"):
        fit_learner(make_learner("LR", random_state=0), X, y, sample_weight=np.zeros(len(y)))
    with pytest.raises(ValueError, match="one weight per training row"):
        fit_learner(make_learner("LR", random_state=0), X, y, sample_weight=np.ones(3))


# ----------------------------------------------------------------------------------------------------
# size-aware routes (make_learner(..., n_rows=...))
# ----------------------------------------------------------------------------------------------------


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


# ----------------------------------------------------------------------------------------------------
# learners that learn from the unlabeled target rows (needs_target)
# ----------------------------------------------------------------------------------------------------


@pytest.mark.heavy
def test_registry_convention_fit_learner_passes_target():
    L, y, T = _shifted(17, m=60, n=50, d=2)
    for est in (CovariateShiftLogisticRegression(), TwoStageLogisticRegression(kind="ssb")):
        assert needs_target(est)
        with pytest.raises(ValueError, match="X_target"):
            fit_learner(clone(est), L, y)
        direct = clone(est).fit(L, y, X_target=T)
        via = fit_learner(clone(est), L, y, X_target=T)
        np.testing.assert_allclose(via.predict_proba(T), direct.predict_proba(T))
