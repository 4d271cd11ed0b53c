"""The fewest rows each stage and learner needs (shiftlib.requirements), checked before any fit: the class-count
rules, the inner-CV folds found in a learner, the smallest training class of stratified k-fold (by hand and
against scikit-learn's StratifiedKFold) and the plan check_sizes makes (kept, dropped with why, refused)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.calibration import CalibratedClassifierCV
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from shiftlib.budget import MAX_CLASSES, RARE_CLASS_ROWS
from shiftlib.ingest import IngestError
from shiftlib.learners import make_learner
from shiftlib.requirements import INNER_FOLDS, _smallest_train_class, check_classes, check_sizes, inner_folds


def test_check_classes_refuses_more_than_max_classes_and_names_rare_ones():
    assert MAX_CLASSES == 20 and RARE_CLASS_ROWS == 5  # the shipped defaults
    with pytest.raises(IngestError, match=r"label 'y' has 21 classes in the source, more than max_classes=20"):
        check_classes({f"k{i}": 10 for i in range(21)}, "y")
    assert check_classes({f"k{i}": 10 for i in range(21)}, "y", max_classes=21) == []
    (note,) = check_classes({"a": 100, "b": 4, "c": 1, "d": 5}, "y")
    assert "fewer than 5 source rows: c (1), b (4);" in note  # d (5 rows) is not rare


def test_inner_folds_is_the_largest_integer_cv_parameter():
    # SVM calibrates with CalibratedClassifierCV(cv=5) (INNER_FOLDS); LR runs no inner CV
    assert inner_folds(make_learner("SVM")) == INNER_FOLDS["SVM"] == 5
    assert inner_folds(make_learner("LR")) == 0
    nested = make_pipeline(StandardScaler(), CalibratedClassifierCV(LogisticRegression(), cv=7))
    assert inner_folds(nested) == 7  # found as calibratedclassifiercv__cv
    # not a fold count: a splitter object, or a bool
    assert inner_folds(CalibratedClassifierCV(LogisticRegression(), cv=KFold(3))) == 0
    assert inner_folds(CalibratedClassifierCV(LogisticRegression(), cv=True)) == 0


@pytest.mark.parametrize(("counts", "k"), [([10, 7], 5), ([12, 3], 3), ([9, 9, 4], 4)])
def test_smallest_training_class_is_c_minus_ceil_c_over_k(counts: list[int], k: int) -> None:
    # stratified k-fold holds out ⌈c/k⌉ rows of a class of c rows in its largest test fold, so the smallest
    # training fold keeps c − ⌈c/k⌉: [10, 7], k = 5 → min(10 − 2, 7 − 2) = 5 (7 − ⌊7/5⌋ would say 6).
    # Checked against the training folds scikit-learn's StratifiedKFold actually makes
    y = np.repeat(np.arange(len(counts)), counts)
    seen = min(np.bincount(y[tr], minlength=len(counts)).min()
               for tr, _ in StratifiedKFold(k, shuffle=True, random_state=0).split(np.zeros(len(y)), y))
    assert _smallest_train_class(counts, k) == seen
    assert _smallest_train_class([10, 7], 5) == 5


def test_check_sizes_keeps_drops_and_refuses_by_hand() -> None:
    kw = {"cv_folds": 5, "selection_folds": 10}
    # 9 rows of the rarer class: 5-fold source CV trains on 9 − ⌈9/5⌉ = 7, 10-fold selection on 9 − 1 = 8 → SVM's
    # 5-fold calibration has its 5 rows per class: both learners kept
    plan = check_sizes({0: 30, 1: 9}, 50, ["LR", "SVM"], selectors=["scv"], **kw)
    assert plan.learners == ["LR", "SVM"] and plan.dropped == {}
    # 5 rows: 5 − 1 = 4 < 5 → SVM dropped with the count and the fold that has it
    plan = check_sizes({0: 30, 1: 5}, 50, ["SVM", "LR"], selectors=["rt"], **kw)
    assert plan.learners == ["LR"]
    assert "the smallest has 4 (a training fold of 5-fold CV)" in plan.dropped["SVM"]
    # 3 rows: the source CV is the 5-fold split (its largest class has 30 ≥ 5 rows), training on 3 − ⌈3/5⌉ = 2
    plan = check_sizes({0: 30, 1: 3}, 50, ["SVM", "LR"], selectors=["rt"], **kw)
    assert "smallest has 2 (a training fold of 5-fold CV); add rows" in plan.dropped["SVM"]
    # a largest class of 4 < 5 rows: no 5-fold split, the source CV lowers its folds to 3, training on 3 − 1 = 2
    plan = check_sizes({0: 4, 1: 3, 2: 3}, 50, ["SVM", "LR"], selectors=["rt"], **kw)
    assert "smallest has 2 (a training fold of 3-fold CV, lowered from 5 because the smallest class has 3 rows)" \
        in plan.dropped["SVM"]
    with pytest.raises(IngestError, match="no learner can be fitted on this data: learner 'SVM' dropped"):
        check_sizes({0: 30, 1: 3}, 50, ["SVM"], selectors=["rt"], **kw)
    with pytest.raises(IngestError, match=r"class\(es\) \[9\] have only 1 source row"):
        check_sizes({np.int64(0): 30, np.int64(9): 1}, 50, ["LR"], selectors=["rt"], **kw)
    # the drift stage: 10 rows on each side
    with pytest.raises(IngestError, match="the source table has 9 rows; the drift stage needs at least 10"):
        check_sizes({0: 5, 1: 4}, 50, ["LR"], selectors=["rt"], **kw)
    with pytest.raises(IngestError, match="the target table has 1 row;"):
        check_sizes({0: 30, 1: 9}, 1, ["LR"], selectors=["rt"], **kw)
    # selection folds: 10 folds need a class of 10 rows; checked only for a fold-based selector
    with pytest.raises(IngestError, match="selection_folds=10, but the source has 11 rows and its largest class 6; "
                       "lower selection_folds .* to at most 6"):
        check_sizes({0: 6, 1: 5}, 50, ["LR"], selectors=["rt", "trcv"], **kw)
    assert check_sizes({0: 6, 1: 5}, 50, ["LR"], selectors=["rt"], **kw).learners == ["LR"]
