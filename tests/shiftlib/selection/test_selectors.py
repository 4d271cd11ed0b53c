"""The selectors as objects (shiftlib.selection.selectors): settings as ``__init__`` keywords, a call is ``select``,
and each selector's scores against an independent computation — scikit-learn's stratified k-fold for SCV, the
importance-weighted 0-1 loss worked by hand for WCV. (That each registered name runs its function with the run's
settings: test_registry.py.)"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.dummy import DummyClassifier
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.naive_bayes import GaussianNB

from shiftlib.selection import (
    BaseSelector,
    ReverseTestingSelector,
    SourceCVSelector,
    TrCVSelector,
    WeightedCVSelector,
)

pytestmark = pytest.mark.usefixtures("one_blas_thread")


def test_settings_are_init_keywords_with_the_documented_defaults() -> None:
    assert ReverseTestingSelector().get_params() == {"scoring": "accuracy", "random_state": None}
    assert TrCVSelector().get_params() == {"k": 10, "weights": "kmm", "random_state": None}
    assert SourceCVSelector().get_params() == {"k": 10, "scoring": "accuracy", "random_state": None,
                                               "max_folds": None}
    assert WeightedCVSelector(k=3).get_params() == {"k": 3, "weights": "kmm", "scoring": "accuracy",
                                                    "random_state": None, "max_folds": None}
    # traits the pipeline reads: which rows, and how the work splits into tasks
    assert (SourceCVSelector.every_row, WeightedCVSelector.every_row) == (True, True)
    assert (ReverseTestingSelector.every_row, TrCVSelector.every_row) == (False, False)
    assert [c.fan_out for c in (ReverseTestingSelector, TrCVSelector, SourceCVSelector)] == [
        "rt_row", "trcv_fold", "candidate"]
    with pytest.raises(NotImplementedError):
        BaseSelector()(["NB"], np.zeros((2, 1)), np.array([0, 1]), np.zeros((2, 1)))


def test_source_cv_selector_is_stratified_kfold_accuracy_and_ignores_the_target() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    X, y = X[:150, :4], y[:150]
    sel = SourceCVSelector(k=4, random_state=2)
    got = sel({"NB": GaussianNB()}, X, y, None)  # no target rows needed
    folds = StratifiedKFold(4, shuffle=True, random_state=2)
    assert got.scores["NB"] == pytest.approx(cross_val_score(GaussianNB(), X, y, cv=folds).mean(), abs=1e-15)
    assert got.scores.equals(sel.select({"NB": GaussianNB()}, X, y, None).scores)  # a call is select
    first2 = list(folds.split(X, y))[:2]
    assert SourceCVSelector(k=4, random_state=2, max_folds=2)({"NB": GaussianNB()}, X, y, None).scores["NB"] == \
        pytest.approx(cross_val_score(GaussianNB(), X, y, cv=first2).mean(), abs=1e-15)


def test_weighted_cv_selector_scores_the_importance_weighted_01_loss_by_hand() -> None:
    # a constant-1 predictor errs exactly on y = 0. y = 0 0 0 0 1 1 1 1, raw β = 1 2 3 2 .5 .5 .5 .5 (mean 1.25, so
    # β = raw/1.25): Σ β·err = (1 + 2 + 3 + 2)/1.25 = 6.4, score 1 − 6.4/8 = 0.2 whatever the split (equal folds of
    # 4); with β ≡ 1 it is the plain accuracy 0.5
    X = np.arange(8.0).reshape(-1, 1)
    y = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    one = {"one": DummyClassifier(strategy="constant", constant=1)}
    raw = np.array([1, 2, 3, 2, 0.5, 0.5, 0.5, 0.5])
    assert WeightedCVSelector(k=2, weights=raw, random_state=0)(one, X, y, X).scores["one"] == pytest.approx(0.2)
    assert WeightedCVSelector(k=2, weights=None, random_state=0)(one, X, y, X).scores["one"] == pytest.approx(0.5)
