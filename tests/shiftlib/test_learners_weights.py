"""``fit_learner`` with importance weights that are 0 on many rows (KMM sets them so under a strong shift)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.datasets import load_iris

from shiftlib.learners import LEARNERS, fit_learner, make_learner


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
@pytest.mark.parametrize("name", [n for n in LEARNERS if not n.startswith("CSLR")])
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
