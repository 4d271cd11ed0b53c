"""Label-shift-corrected source CV (``shiftlib.selection.labelshift``): BBSE on hand-worked confusion
matrices, and the CV fold scores against an independent computation (scikit-learn's confusion matrix and
class-weighted accuracy on the same stratified splits)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.metrics import accuracy_score, confusion_matrix
from sklearn.model_selection import StratifiedKFold, cross_val_predict

from shiftlib.learners import make_learner
from shiftlib.selection import LabelPlan, TargetPredictions, source_cv
from shiftlib.selection.labelshift import (
    bbse_class_prior,
    label_shift_cv,
    labeled_class_prior,
    with_class_prior,
)

# C[a, c] = P(ŷ = a | y = c): columns sum to 1
C1 = np.array([[0.8, 0.3], [0.2, 0.7]])
C2 = np.array([[0.9, 0.5], [0.1, 0.5]])


def test_bbse_recovers_the_prior_of_a_consistent_system() -> None:
    # π = (0.4, 0.6): μ1 = C1 π = (0.32 + 0.18, 0.08 + 0.42) = (0.5, 0.5); μ2 = C2 π = (0.66, 0.34)
    assert bbse_class_prior(C1, [0.5, 0.5]) == pytest.approx([0.4, 0.6], abs=1e-9)
    assert bbse_class_prior([C1, C2], [[0.5, 0.5], [0.66, 0.34]]) == pytest.approx([0.4, 0.6], abs=1e-9)


def test_bbse_stacked_least_squares_averages_identical_systems() -> None:
    # same C, μ from π = (0.3, 0.7) → (0.45, 0.55) and from π = (0.5, 0.5) → (0.55, 0.45):
    # the least-squares π solves C π = mean μ = (0.5, 0.5), i.e. π = (0.4, 0.6)
    assert bbse_class_prior([C1, C1], [[0.45, 0.55], [0.55, 0.45]]) == pytest.approx([0.4, 0.6], abs=1e-9)


def test_bbse_bounds_an_impossible_share() -> None:
    # unconstrained C1⁻¹ (0.9, 0.1) = (1.2, −0.2); in the box the optimum is (1, 0): there the gradient
    # 2 C1ᵀ(C1 π − μ) = 2 (−0.06, 0.04) pushes π1 up (at its bound 1) and π2 down (at its bound 0)
    assert bbse_class_prior(C1, [0.9, 0.1]) == pytest.approx([1.0, 0.0], abs=1e-9)


def test_bbse_bad_shapes() -> None:
    with pytest.raises(ValueError, match=r"\(m, K, K\)"):
        bbse_class_prior(np.ones((2, 2, 3)), np.ones((2, 2)))


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X, y = make_classification(n_samples=420, n_features=5, n_informative=3, weights=[0.7, 0.3], random_state=0)
    return X[:300], y[:300], X[300:]


@pytest.mark.heavy
def test_fold_scores_are_class_weighted_accuracy_on_source_cv_splits(data: tuple) -> None:
    Xs, ys, Xt = data
    learners = ["LR", "NB"]
    res = label_shift_cv(learners, Xs, ys, Xt, k=5, random_state=1)
    # same splits as source_cv: the unweighted fold scores are source_cv's
    cv = source_cv(learners, Xs, ys, k=5, random_state=1)
    for n in learners:
        assert res.details["plain_fold_scores"][n] == pytest.approx(cv.details["fold_scores"][n], abs=1e-12)
    # independent computation: out-of-fold predictions by scikit-learn, confusion matrices → BBSE → prior
    skf = StratifiedKFold(n_splits=5, shuffle=True, random_state=1)
    splits = list(skf.split(np.zeros(len(ys)), ys))
    oof = {n: cross_val_predict(make_learner(n, random_state=1), Xs, ys, cv=splits) for n in learners}
    conf = [confusion_matrix(ys, oof[n], normalize="true").T for n in learners]  # rows: predicted class
    shares = [np.bincount(make_learner(n, random_state=1).fit(Xs, ys).predict(Xt), minlength=2) / len(Xt)
              for n in learners]
    pi_t = bbse_class_prior(conf, shares)
    assert res.details["target_prior"].to_numpy() == pytest.approx(pi_t, abs=1e-9)
    # each fold: accuracy with weights π_T(y) / (the fold's share of class y) = Σ_c π_T(c) · recall_c
    for n in learners:
        expect = []
        for _, test in splits:
            share = np.bincount(ys[test], minlength=2) / len(test)
            w = pi_t[ys[test]] / share[ys[test]]
            expect.append(accuracy_score(ys[test], oof[n][test], sample_weight=w))
        assert res.details["fold_scores"][n] == pytest.approx(expect, abs=1e-9)
        assert res.scores[n] == pytest.approx(np.mean(expect), abs=1e-12)
    assert res.selector == "cv_ls"


@pytest.mark.heavy
def test_no_label_shift_gives_the_source_prior(data: tuple) -> None:
    # property: when the target's predicted classes are the out-of-fold source predictions themselves,
    # μ_j = C_j π_S exactly for every candidate, so BBSE returns the source prior
    Xs, ys, _ = data
    skf = StratifiedKFold(n_splits=5, shuffle=True, random_state=1)
    splits = list(skf.split(np.zeros(len(ys)), ys))
    oof = np.column_stack([cross_val_predict(make_learner(n, random_state=1), Xs, ys, cv=splits)
                           for n in ("LR", "NB")])
    res = label_shift_cv(["LR", "NB"], Xs, ys, Xs, k=5, random_state=1, target_predictions=oof)
    assert res.details["target_prior"].to_numpy() == pytest.approx(res.details["source_prior"].to_numpy(), abs=1e-9)


@pytest.mark.heavy
def test_target_predictions_of_the_wrong_shape(data: tuple) -> None:
    Xs, ys, Xt = data
    with pytest.raises(ValueError, match="target_predictions has shape"):
        label_shift_cv(["LR", "NB"], Xs, ys, Xt, k=5, target_predictions=np.zeros((3, 2), int))


@pytest.mark.heavy
def test_a_given_class_prior_replaces_bbse(data: tuple) -> None:
    # with π_T = (1, 0) each fold's score is the recall of class 0 on that fold (Σ_c π_T(c) · recall_c)
    Xs, ys, Xt = data
    res = label_shift_cv(["LR"], Xs, ys, Xt, k=5, random_state=1, class_prior=[1.0, 0.0])
    skf = StratifiedKFold(n_splits=5, shuffle=True, random_state=1)
    splits = list(skf.split(np.zeros(len(ys)), ys))
    oof = cross_val_predict(make_learner("LR", random_state=1), Xs, ys, cv=splits)
    expect = [np.mean(oof[test][ys[test] == 0] == 0) for _, test in splits]
    assert res.details["fold_scores"]["LR"] == pytest.approx(expect, abs=1e-12)
    with pytest.raises(ValueError, match="class_prior must be 2 non-negative shares"):
        label_shift_cv(["LR"], Xs, ys, Xt, k=5, class_prior=[0.7, 0.7])


def _tiny() -> TargetPredictions:
    # rows 0, 1: the two candidates disagree (D); rows 2, 3: they agree (A), mean class probabilities
    # (0.8, 0.2) and (0.3, 0.7): A's expected class count is (1.1, 0.9)
    preds = np.array([[0, 1], [1, 0], [0, 0], [1, 1]])
    proba = np.array([[0.5, 0.5], [0.5, 0.5], [0.8, 0.2], [0.3, 0.7]])
    return TargetPredictions(["a", "b"], preds, proba, np.array([0, 1]))


def _plan(rows: list[int], pis: list[float]) -> LabelPlan:
    return LabelPlan(np.array(rows), np.array(pis), np.ones(len(rows), int), len(rows), 4, ["a", "b"],
                     {"disagreement": np.array([0, 1]), "round_info": [{"round": 1, "labeled_before": []}]})


def test_labeled_class_prior_hand_worked() -> None:
    tp = _tiny()
    # both D rows labeled with certainty (π = 1), classes 1 and 0: D count (1, 1); batch (2.1, 1.9) / 4
    assert labeled_class_prior(tp, _plan([0, 1], [1.0, 1.0]), {0: 1, 1: 0}) == pytest.approx([0.525, 0.475])
    # one D row drawn with π = 0.5, class 1: Horvitz–Thompson D count (0, 2); batch (1.1, 2.9) / 4
    assert labeled_class_prior(tp, _plan([0], [0.5]), {0: 1}) == pytest.approx([0.275, 0.725])
    with pytest.raises(ValueError, match="no labeled row"):
        labeled_class_prior(tp, _plan([0], [0.5]), {})


@pytest.mark.heavy
def test_with_class_prior_matches_a_refit_with_that_prior(data: tuple) -> None:
    Xs, ys, Xt = data
    bbse = label_shift_cv(["LR", "NB"], Xs, ys, Xt, k=5, random_state=1)
    given = label_shift_cv(["LR", "NB"], Xs, ys, Xt, k=5, random_state=1, class_prior=[0.55, 0.45])
    moved = with_class_prior(bbse, [0.55, 0.45])
    for n in ("LR", "NB"):
        assert moved.details["fold_scores"][n] == pytest.approx(given.details["fold_scores"][n], abs=1e-12)
    assert moved.scores.to_numpy() == pytest.approx(given.scores.to_numpy(), abs=1e-12)
