"""Source cross-validation metrics (shiftlib.cv.cv_metrics): out-of-fold accuracy, log-loss, AUC and Brier against
the same folds computed with scikit-learn (cross_val_predict, or the weighted fits written out), the folds
lowered to the smallest class, and a class too small to cross-validate."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_iris, make_classification
from sklearn.metrics import accuracy_score, brier_score_loss, log_loss, roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.naive_bayes import GaussianNB

from shiftlib.cv import cv_metrics


def _binary() -> tuple[np.ndarray, np.ndarray]:
    return make_classification(n_samples=80, n_features=4, n_informative=2, flip_y=0.1, random_state=0)


def test_binary_metrics_equal_scikit_learns_on_the_same_folds() -> None:
    X, y = _binary()
    got = cv_metrics(GaussianNB(), X, y, n_splits=5, random_state=3)
    folds = StratifiedKFold(5, shuffle=True, random_state=3)
    p = cross_val_predict(GaussianNB(), X, y, cv=folds, method="predict_proba")
    assert set(got) == {"accuracy", "log_loss", "auc", "brier"}
    assert got["accuracy"] == pytest.approx(accuracy_score(y, p.argmax(axis=1)), abs=1e-15)
    assert got["log_loss"] == pytest.approx(log_loss(y, np.clip(p, 1e-15, 1)), rel=1e-12)
    assert got["auc"] == pytest.approx(roc_auc_score(y, p[:, 1]), abs=1e-15)
    assert got["brier"] == pytest.approx(brier_score_loss(y, p[:, 1]), rel=1e-12)
    # the positive class is the larger code: labels "no"/"yes" score the probability of "yes"
    words = cv_metrics(GaussianNB(), X, np.where(y == 1, "yes", "no"), n_splits=5, random_state=3)
    assert words["auc"] == pytest.approx(got["auc"], abs=1e-15)
    assert words["brier"] == pytest.approx(got["brier"], rel=1e-12)


def test_weights_fit_every_fold_and_weight_every_metric() -> None:
    # IWCV-style: each training fold fitted with its rows' weights, each held-out row's loss weighted — here written
    # out fold by fold with GaussianNB(sample_weight=...) and scikit-learn's weighted metrics
    X, y = _binary()
    w = np.where(X[:, 0] > 0, 3.0, 0.5)
    got = cv_metrics(GaussianNB(), X, y, n_splits=4, random_state=1, sample_weight=w)
    p = np.zeros((len(y), 2))
    for tr, te in StratifiedKFold(4, shuffle=True, random_state=1).split(X, y):
        p[te] = GaussianNB().fit(X[tr], y[tr], sample_weight=w[tr]).predict_proba(X[te])
    assert got["accuracy"] == pytest.approx(accuracy_score(y, p.argmax(axis=1), sample_weight=w), rel=1e-12)
    assert got["log_loss"] == pytest.approx(log_loss(y, np.clip(p, 1e-15, 1), sample_weight=w), rel=1e-12)
    assert got["auc"] == pytest.approx(roc_auc_score(y, p[:, 1], sample_weight=w), rel=1e-12)
    assert got["brier"] == pytest.approx(brier_score_loss(y, p[:, 1], sample_weight=w), rel=1e-12)
    unweighted = cv_metrics(GaussianNB(), X, y, n_splits=4, random_state=1)
    assert got["log_loss"] != pytest.approx(unweighted["log_loss"], rel=1e-3)  # the weights change the numbers


def test_multiclass_auc_is_one_vs_rest_and_folds_follow_the_smallest_class() -> None:
    # iris with class 0 cut to 3 rows: 5 folds asked, lowered to 3 (the smallest class); AUC one-vs-rest macro,
    # no Brier score (binary only)
    X, y = load_iris(return_X_y=True)
    keep = np.r_[np.arange(3), np.arange(50, 150)]
    X, y = X[keep], y[keep]
    got = cv_metrics(GaussianNB(), X, y, n_splits=5, random_state=0)
    p = cross_val_predict(GaussianNB(), X, y, cv=StratifiedKFold(3, shuffle=True, random_state=0),
                          method="predict_proba")
    assert set(got) == {"accuracy", "log_loss", "auc"}
    assert got["accuracy"] == pytest.approx(accuracy_score(y, p.argmax(axis=1)), abs=1e-15)
    assert got["auc"] == pytest.approx(roc_auc_score(y, p, multi_class="ovr"), rel=1e-12)
    assert got["log_loss"] == pytest.approx(log_loss(y, np.clip(p, 1e-15, 1)), rel=1e-12)
    with pytest.raises(ValueError, match="a class has fewer than 2 source rows"):
        cv_metrics(GaussianNB(), X[2:], y[2:])  # class 0 keeps one row


def test_oof_metrics_worked_by_hand():
    """Four rows, labels 0 0 1 1, OOF P(1) = 0.1 0.6 0.7 0.2: predictions 0 1 1 0 (accuracy 2/4); Brier
    (0.01 + 0.36 + 0.09 + 0.64)/4 = 0.275; log-loss −(ln 0.9 + ln 0.4 + ln 0.7 + ln 0.2)/4; AUC: of the four
    (positive, negative) pairs, 0.7 > 0.1, 0.7 > 0.6 and 0.2 > 0.1 are ordered right → 3/4. With weights
    1, 1, 1, 3: accuracy (1 + 0 + 1 + 3·0)/6, Brier (0.01 + 0.36 + 0.09 + 3·0.64)/6."""
    from shiftlib.cv import oof_metrics

    p1 = np.array([0.1, 0.6, 0.7, 0.2])
    got = oof_metrics(np.array([0, 0, 1, 1]), np.c_[1 - p1, p1], np.array([0, 1]))
    assert got == pytest.approx({"accuracy": 0.5, "brier": 0.275, "auc": 0.75,
                                 "log_loss": -(np.log(0.9) + np.log(0.4) + np.log(0.7) + np.log(0.2)) / 4})
    w = oof_metrics(np.array([0, 0, 1, 1]), np.c_[1 - p1, p1], np.array([0, 1]), np.array([1.0, 1, 1, 3]))
    assert w["accuracy"] == pytest.approx(2 / 6)
    assert w["brier"] == pytest.approx((0.01 + 0.36 + 0.09 + 3 * 0.64) / 6)


def test_oof_log_loss_rescales_rows_that_do_not_sum_to_one_without_a_warning():
    """Rows (0.45, 0.45) and (0.2, 0.6) are read as (0.5, 0.5) and (0.25, 0.75): log-loss −(ln 0.5 + ln 0.75)/2 for
    labels 0, 1; scikit-learn would warn on them (helper-36 saw it on the console). A row with a 0 is clipped to
    1e-15 first: labels 1, 0 on (1, 0) twice cost −(ln(1e-15 / (1 + 1e-15)) + ln(1 / (1 + 1e-15))) / 2."""
    import warnings

    from shiftlib.cv import oof_metrics

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = oof_metrics(np.array([0, 1]), np.array([[0.45, 0.45], [0.2, 0.6]]), np.array([0, 1]))
        zero = oof_metrics(np.array([1, 0]), np.array([[1.0, 0.0], [1.0, 0.0]]), np.array([0, 1]))
    assert got["log_loss"] == pytest.approx(-(np.log(0.5) + np.log(0.75)) / 2)
    assert zero["log_loss"] == pytest.approx(-(np.log(1e-15 / (1 + 1e-15)) + np.log(1 / (1 + 1e-15))) / 2)
