"""Typed selector results (shiftlib.selection.results): competition ranks and tiers with ties and NaN by hand,
the exports (to_frame, to_dict), scores from fold scores, and results put together from parts."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.dummy import DummyClassifier

from shiftlib.selection import SCORE_COLUMNS, SelectorScores, concat_scores, source_cv
from shiftlib.selection.results import ranking_tiers, ranks_from_scores

pytestmark = pytest.mark.usefixtures("one_blas_thread")


X_ALL, Y_ALL = load_breast_cancer(return_X_y=True)
X, Y = X_ALL[:120], Y_ALL[:120]  # scikit-learn's breast_cancer, first 120 rows (both classes)


def test_selector_scores_export_ranks_with_ties_kept():
    const = {"one": DummyClassifier(strategy="constant", constant=1),
             "one_again": DummyClassifier(strategy="constant", constant=1),
             "zero": DummyClassifier(strategy="constant", constant=0)}
    # breast_cancer's first 120 rows: 1[y=1] share = accuracy of constant-1 (same for both copies)
    share1 = float(np.mean(Y == 1))
    got = source_cv(const, X, Y, k=5, random_state=0)
    assert got.scores["one"] == pytest.approx(share1, abs=0.02)
    frame = got.to_frame().set_index("learner")
    top, bottom = ("one", "one_again"), ("zero",)
    if share1 < 0.5:
        top, bottom = bottom, top
    assert got.ranking == [top, bottom]
    assert frame.loc[list(top), "rank"].tolist() == [1] * len(top)
    assert got.winner("one", "one_again") is None


def test_scores_from_fold_scores_are_their_means():
    # hand-worked: (0.5 + 1.0) / 2 = 0.75 and (0.6 + 0.6) / 2 = 0.6; A ranks first
    res = SelectorScores.from_fold_scores("scv", {"A": [0.5, 1.0], "B": [0.6, 0.6]}, {"k": 2}, n_fits=4)
    assert res.scores.to_dict() == {"A": 0.75, "B": 0.6} and res.best == ("A",) and res.n_fits == 4
    np.testing.assert_array_equal(res.details["fold_scores"]["A"], [0.5, 1.0])


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


def test_competition_ranks_and_tiers_by_hand():
    # scores a .9, b .7, c .7, d NaN, e .5: "min" competition ranks 1, 2, 2, then e 4 (two learners above b and c
    # share rank 2, so the next rank is 4), NaN last: 5. Tiers best first, input order inside a tier.
    s = pd.Series({"a": 0.9, "b": 0.7, "c": 0.7, "d": np.nan, "e": 0.5})
    assert ranks_from_scores(s).to_dict() == {"a": 1, "b": 2, "c": 2, "d": 5, "e": 4}
    assert ranking_tiers(s) == [("a",), ("b", "c"), ("e",), ("d",)]
    res = SelectorScores("scv", s, n_fits=10)
    assert res.best == ("a",) and res.learners == ["a", "b", "c", "d", "e"]
    assert res.winner("a", "b") == "a" and res.winner("e", "b") == "b" and res.winner("b", "c") is None
    assert res.winner("d", "e") is None  # NaN never wins a comparison, and never loses one
    with pytest.raises(KeyError, match="'z' is not a scored learner"):
        res.winner("a", "z")


def test_exports_carry_intervals_errors_and_none_for_nan():
    scores = pd.Series({"A": 0.8, "B": np.nan})
    intervals = pd.DataFrame({"low": [0.7, np.nan], "high": [0.9, np.nan]}, index=["A", "B"])
    res = SelectorScores("trcv", scores, 4, intervals, {"params": {"k": 2}}, {"B": "too few rows"})
    frame = res.to_frame()
    assert list(frame.columns) == SCORE_COLUMNS
    assert frame["learner"].tolist() == ["A", "B"] and set(frame["selector"]) == {"trcv"}
    assert frame["rank"].tolist() == [1, 2]
    assert frame.loc[0, ["interval_low", "interval_high"]].tolist() == [0.7, 0.9]
    assert math.isnan(frame.loc[1, "score"])
    assert res.to_dict() == {"selector": "trcv", "n_fits": 4, "scores": {"A": 0.8, "B": None}, "ranks": {"A": 1, "B": 2},
                             "ranking": [["A"], ["B"]], "intervals": {"A": [0.7, 0.9], "B": [None, None]},
                             "errors": {"B": "too few rows"}, "params": {"k": 2}}
    # without intervals the interval columns are NaN
    assert SelectorScores("scv", scores, 0).to_frame()[["interval_low", "interval_high"]].isna().all().all()


def test_concat_scores_joins_parts_and_refuses_what_cannot_be_joined():
    a = SelectorScores.from_fold_scores("scv", {"A": [0.5, 1.0]}, {"k": 2}, n_fits=2)
    b = SelectorScores.from_fold_scores("scv", {"B": [0.6, 0.6], "C": [1.0, 0.75]}, {"k": 2}, n_fits=4,
                                        errors={"B": "warned"})
    joined = concat_scores([a, b])
    assert joined.scores.to_dict() == {"A": 0.75, "B": 0.6, "C": 0.875}  # fold means: (1 + 0.75)/2
    assert joined.n_fits == 6 and joined.errors == {"B": "warned"} and joined.ranking == [("C",), ("A",), ("B",)]
    assert sorted(joined.details["fold_scores"]) == ["A", "B", "C"] and joined.details["params"] == {"k": 2}
    assert joined.intervals is None
    with pytest.raises(ValueError, match="no selector results"):
        concat_scores([])
    with pytest.raises(ValueError, match=r"different selectors: \['scv', 'wcv'\]"):
        concat_scores([a, SelectorScores("wcv", pd.Series({"D": 0.5}), 1)])
    with pytest.raises(ValueError, match="more than one part"):
        concat_scores([a, a])
