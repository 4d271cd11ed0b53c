"""Baselines of RT §3.2 and TrCV §5.1 (SCV, repeated k-fold, LOO, WCV/IWCV, TCV, STV), each checked
against an independent scikit-learn computation or a hand-worked number."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.dummy import DummyClassifier
from sklearn.metrics import accuracy_score
from sklearn.model_selection import (
    LeaveOneOut,
    RepeatedStratifiedKFold,
    StratifiedKFold,
    cross_val_score,
)
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier

from shiftlib.learners import make_learner
from shiftlib.selection import (
    Candidate,
    leave_one_out,
    repeated_cv,
    source_cv,
    source_target_validation,
    target_cv,
    weighted_cv,
)
from tests.shiftlib.selection.conftest import SEEN, CSLRSpy, cslr_data

pytestmark = pytest.mark.usefixtures("one_blas_thread")


X_ALL, Y_ALL = load_breast_cancer(return_X_y=True)
X, Y = X_ALL[:120], Y_ALL[:120]  # scikit-learn's breast_cancer, first 120 rows (both classes)
X_T, Y_T = X_ALL[300:360], Y_ALL[300:360]



@pytest.mark.heavy
def test_scv_equals_sklearn_cross_val_score():
    got = source_cv({"NB": GaussianNB(), "DT": make_learner("DT", random_state=0)}, X, Y, k=10, random_state=3)
    cv = StratifiedKFold(10, shuffle=True, random_state=3)
    assert got.scores["NB"] == pytest.approx(cross_val_score(GaussianNB(), X, Y, cv=cv).mean())
    assert got.scores["DT"] == pytest.approx(cross_val_score(make_learner("DT", random_state=0), X, Y, cv=cv).mean())
    assert got.n_fits == 20


@pytest.mark.heavy
def test_scv_with_max_folds_equals_sklearn_on_the_first_folds():
    # the first 3 of 10 StratifiedKFold splits, scored with cross_val_score on exactly those splits
    got = source_cv({"NB": GaussianNB()}, X, Y, k=10, random_state=3, max_folds=3)
    first3 = list(StratifiedKFold(10, shuffle=True, random_state=3).split(X, Y))[:3]
    assert got.scores["NB"] == pytest.approx(cross_val_score(GaussianNB(), X, Y, cv=first3).mean())
    assert got.n_fits == 3 and len(got.details["fold_scores"]["NB"]) == 3
    assert source_cv({"NB": GaussianNB()}, X, Y, k=10, random_state=3, max_folds=10).scores["NB"] == \
        pytest.approx(source_cv({"NB": GaussianNB()}, X, Y, k=10, random_state=3).scores["NB"])
    wcv = weighted_cv({"NB": GaussianNB()}, X, Y, weights=np.ones(len(Y)), k=10, random_state=3, max_folds=3)
    assert wcv.scores["NB"] == pytest.approx(got.scores["NB"])  # unit weights: WCV is SCV on the same folds
    with pytest.raises(ValueError, match="max_folds"):
        source_cv({"NB": GaussianNB()}, X, Y, k=10, max_folds=0)


@pytest.mark.heavy
def test_repeated_cv_equals_sklearn_repeated_stratified_kfold():
    got = repeated_cv({"NB": GaussianNB()}, X, Y, k=5, n_repeats=3, random_state=1)
    cv = RepeatedStratifiedKFold(n_splits=5, n_repeats=3, random_state=1)
    assert got.scores["NB"] == pytest.approx(cross_val_score(GaussianNB(), X, Y, cv=cv).mean())
    assert got.selector == "cv5x3" and got.n_fits == 15


@pytest.mark.heavy
def test_loo_equals_sklearn_leave_one_out():
    knn = KNeighborsClassifier(3)
    got = leave_one_out({"kNN": knn}, X[:30], Y[:30])
    assert got.scores["kNN"] == pytest.approx(cross_val_score(knn, X[:30], Y[:30], cv=LeaveOneOut()).mean())
    assert got.n_fits == 30


def test_wcv_hand_worked_with_a_constant_predictor():
    # Constant-1 predictor ⇒ error 1[y = 0]. With equal folds, IWCV = 1 − (1/n) Σ β err for any split.
    # y = 0 0 0 0 1 1 1 1, raw β = 1 2 3 2 .5 .5 .5 .5 (mean 1.25 ⇒ β = raw/1.25):
    # Σ β err = (1+2+3+2)/1.25 = 6.4 ⇒ score = 1 − 6.4/8 = 0.2 (unweighted: 1 − 4/8 = 0.5).
    Xs = np.arange(8.0).reshape(-1, 1)
    y = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    raw = np.array([1, 2, 3, 2, 0.5, 0.5, 0.5, 0.5])
    const = {"one": DummyClassifier(strategy="constant", constant=1)}
    assert weighted_cv(const, Xs, y, weights=raw, k=2, random_state=0).scores["one"] == pytest.approx(0.2)
    assert weighted_cv(const, Xs, y, weights=None, k=2, random_state=0).scores["one"] == pytest.approx(0.5)


@pytest.mark.heavy
def test_wcv_with_unit_weights_equals_scv():
    a = weighted_cv(["NB", "DT"], X, Y, weights=np.ones(len(Y)), k=10, random_state=4)
    b = source_cv(["NB", "DT"], X, Y, k=10, random_state=4)
    np.testing.assert_allclose(a.scores.to_numpy(), b.scores.to_numpy())


def test_tcv_and_stv_equal_sklearn():
    got = target_cv({"NB": GaussianNB()}, X_T, Y_T, k=5, random_state=2)
    cv = StratifiedKFold(5, shuffle=True, random_state=2)
    assert got.scores["NB"] == pytest.approx(cross_val_score(GaussianNB(), X_T, Y_T, cv=cv).mean())
    stv = source_target_validation({"NB": GaussianNB()}, X, Y, X_T, Y_T)
    assert stv.scores["NB"] == pytest.approx(accuracy_score(Y_T, GaussianNB().fit(X, Y).predict(X_T)))


def test_clear_errors():
    with pytest.raises(ValueError, match="AUC is undefined on one held-out row"):
        leave_one_out(["NB"], X[:10], Y[:10], scoring="roc_auc")
    with pytest.raises(ValueError, match="needs X_target"):
        weighted_cv(["NB"], X, Y, weights="kmm")
    with pytest.raises(ValueError, match="k=200 folds but the source set has only 120 rows"):
        source_cv(["NB"], X, Y, k=200)
    with pytest.raises(ValueError, match="sample_weight of candidate 'NB\\+w' has shape"):
        source_cv([Candidate("NB+w", GaussianNB(), sample_weight=np.ones(3))], X, Y, k=5)


class _NeedsFiveRowsPerClass(GaussianNB):
    """GaussianNB that refuses a training set with fewer than 5 rows of a class — like SVM's inner
    5-fold calibration in shiftlib.learners."""

    def fit(self, X, y, sample_weight=None):
        if np.bincount(np.asarray(y)).min() < 5:
            raise ValueError("fewer than 5 examples for at least one class")
        return super().fit(X, y, sample_weight=sample_weight)


def test_a_learner_that_cannot_be_fitted_scores_nan_and_the_others_are_kept():
    # 8 rows of class 0 in 60: 10-fold training folds hold 7-8 of them (fit works); 3 rows: 2-3 (fails).
    rng = np.random.default_rng(0)
    Xs = rng.normal(size=(60, 2))
    for n0, ok in ((8, True), (3, False)):
        y = np.r_[np.zeros(n0, int), np.ones(60 - n0, int)]
        with pytest.warns(RuntimeWarning, match="'picky' could not be fitted") if not ok else _no_warning():
            got = source_cv({"picky": _NeedsFiveRowsPerClass(), "NB": GaussianNB()}, Xs, y, k=3, random_state=0)
        cv = StratifiedKFold(3, shuffle=True, random_state=0)
        assert got.scores["NB"] == pytest.approx(cross_val_score(GaussianNB(), Xs, y, cv=cv).mean())
        assert np.isnan(got.scores["picky"]) != ok
        assert ("picky" in got.errors) != ok
        if not ok:
            assert got.ranking[-1] == ("picky",) and got.winner("picky", "NB") is None


class _no_warning:
    def __enter__(self):
        import warnings

        self._cm = warnings.catch_warnings()
        self._cm.__enter__()
        warnings.simplefilter("error", RuntimeWarning)

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


@pytest.mark.heavy
def test_source_cv_gives_cslr_the_target_rows():
    # CSLR (DL) inside selection: each of the 5 fold fits receives unlabeled rows (source CV scores on source rows)
    Xs, ys, Xt = cslr_data()
    SEEN.clear()
    res = source_cv({"CSLR": CSLRSpy()}, Xs, ys, k=5, random_state=0)
    assert len(SEEN) == 5 and np.isfinite(res.scores["CSLR"])
