"""ReverseTesting (RT §4.2, Fig. 3; matrix notation of docs/architecture.md) on hand-built cases.

The learners are ``BinMajority`` stubs: a fixed-bin histogram classifier on one feature whose every
prediction can be worked out by hand (bin majority, ties → class 0, empty bin → overall majority of
the training labels). All expected numbers below are derived in the comments. At the end: real learners on
breast_cancer (the conditions they report hold), the matrix assembled from rows computed as separate jobs, and
CSLR given the rows it will be scored on.
"""

from __future__ import annotations

import json
from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shiftlib.learners import make_learner
from shiftlib.selection import (
    BenefitScorer,
    Candidate,
    ReverseCell,
    TargetLabels,
    combine,
    label_target,
    reverse_score,
    reverse_testing,
    reverse_testing_row,
)
from tests.shiftlib.selection.conftest import SEEN, CSLRSpy, cslr_data, fanout_problem

pytestmark = pytest.mark.usefixtures("one_blas_thread")


from tests.shiftlib.selection._stubs import FIT_CALLS, BinMajority  # noqa: E402

# Hand-built data (one feature). D: x = 0..7, y = 1 1 1 0 0 0 1 1. T: x = 1.5, 3.5, 5.5.
X_D = np.arange(8.0).reshape(-1, 1)
Y_D = np.array([1, 1, 1, 0, 0, 0, 1, 1])
X_T = np.array([[1.5], [3.5], [5.5]])
# Learner A: bins x<2 | 2≤x<6 | x≥6.  On D: {1,1}→1, {1,0,0,0}→0, {1,1}→1  ⇒ T_A = [1, 0, 0].
# Learner B: bins x<4 | x≥4.          On D: {1,1,1,0}→1, {0,0,1,1} tie→0  ⇒ T_B = [1, 1, 0].
# Reverse fits, scored on D (accuracy):
#  A on T_A: x<2 {1}→1, middle {0,0}→0, x≥6 empty→overall 1/3→0 ⇒ 1[x<2] ⇒ right at x0,1,3,4,5 = 5/8
#  B on T_A: x<4 {1,0} tie→0, x≥4 {0}→0 ⇒ all 0 ⇒ right at x3,4,5 = 3/8
#  A on T_B: x<2 {1}→1, middle {1,0} tie→0, x≥6 empty→overall 2/3→1 ⇒ wrong only at x2 = 7/8
#  B on T_B: x<4 {1,1}→1, x≥4 {0}→0 ⇒ 1[x<4] ⇒ wrong at x3, x6, x7 = 5/8
M_HAND = pd.DataFrame([[5 / 8, 3 / 8], [7 / 8, 5 / 8]], index=["A", "B"], columns=["A", "B"])


def learners_ab(order=("A", "B")):
    est = {"A": BinMajority((2.0, 6.0)), "B": BinMajority((4.0,))}
    return {k: est[k] for k in order}


def test_matrix_matches_hand_computation_and_condition_4_1():
    res = reverse_testing(learners_ab(), X_D, Y_D, X_T)
    pd.testing.assert_frame_equal(res.matrix, M_HAND, check_names=False)
    # Condition 4.1 (a=A, b=B): M[B,A]=7/8 > M[A,A]=5/8 and M[B,B]=5/8 > M[A,B]=3/8 ⇒ B.
    assert res.winner("A", "B") == "B"
    assert res.winner("B", "A") == "B"
    assert res.pairs.loc[0, "condition"] == "4.1"
    assert res.ranking == [("B",), ("A",)]
    assert res.label_counts == {"A": {0: 2, 1: 1}, "B": {0: 1, 1: 2}}


def test_condition_4_2_is_the_mirror_when_the_pair_is_given_the_other_way_round():
    res = reverse_testing(learners_ab(("B", "A")), X_D, Y_D, X_T)
    # a=B, b=A: Condition 4.2 ⇒ a (B) wins: M[B,B]=5/8 > M[A,B]=3/8 and M[B,A]=7/8 > M[A,A]=5/8.
    assert res.winner("B", "A") == "B"
    assert res.pairs.loc[0, "condition"] == "4.2"


def test_condition_4_3_tie_on_a_second_hand_built_case():
    # D: x = 0..7, y = 0 0 0 0 0 1 1 1; T: x = 0.5 .. 7.5.
    # A (bins x<4 | x≥4) on D: {0,0,0,0}→0, {0,1,1,1}→1 ⇒ T_A = 1[x≥4] = 0 0 0 0 1 1 1 1
    # B (bins x<2 | 2≤x<6 | x≥6) on D: →0, {0,0,0,1}→0, {1,1}→1 ⇒ T_B = 1[x≥6] = 0 0 0 0 0 0 1 1
    # A on T_A ⇒ 1[x≥4] ⇒ wrong at x4 ⇒ 7/8;  B on T_A: middle {0,0,1,1} tie→0 ⇒ 1[x≥6] ⇒ 7/8
    # A on T_B: x≥4 {0,0,1,1} tie→0 ⇒ all 0 ⇒ 5/8;  B on T_B ⇒ 1[x≥6] ⇒ 7/8
    # (a=A, b=B): 4.1 fails (5/8 < 7/8); 4.2 fails (M[A,B] = M[B,B] = 7/8) ⇒ Condition 4.3.
    y = np.array([0, 0, 0, 0, 0, 1, 1, 1])
    xt = (np.arange(8.0) + 0.5).reshape(-1, 1)
    res = reverse_testing({"A": BinMajority((4.0,)), "B": BinMajority((2.0, 6.0))}, X_D, y, xt)
    expected = pd.DataFrame([[7 / 8, 7 / 8], [5 / 8, 7 / 8]], index=["A", "B"], columns=["A", "B"])
    pd.testing.assert_frame_equal(res.matrix, expected, check_names=False)
    assert res.winner("A", "B") is None
    assert res.pairs.loc[0, "condition"] == "4.3"
    assert "Condition 4.3" in res.reason("A", "B")
    assert res.ranking == [("A", "B")]  # tie kept: one tier
    assert res.ranks.to_dict() == {"A": 1, "B": 1}


@pytest.mark.parametrize("m, expected", [
    # M[labeler, retrainer] for (a, b) = ("a", "b"); RT Conditions 4.1/4.2 need both inequalities strict
    ([[0.6, 0.5], [0.7, 0.6]], ("b", "4.1")),  # M[b,a] 0.7 > M[a,a] 0.6 and M[b,b] 0.6 > M[a,b] 0.5
    ([[0.7, 0.6], [0.6, 0.5]], ("a", "4.2")),  # the mirror
    ([[0.6, 0.5], [0.6, 0.6]], (None, "4.3")),  # M[b,a] = M[a,a]: a tie is no win for b
    ([[0.6, 0.6], [0.7, 0.6]], (None, "4.3")),  # M[b,b] = M[a,b]
    ([[0.6, 0.6], [0.6, 0.6]], (None, "4.3")),  # all tied
])
def test_conditions_4_1_and_4_2_are_strict_on_a_hand_built_tied_matrix(m, expected):
    from shiftlib.selection.reverse_testing import pair_decision

    M = pd.DataFrame(m, index=["a", "b"], columns=["a", "b"])
    assert pair_decision(M, "a", "b")[:2] == expected


@pytest.mark.parametrize("n_learners", [2, 3])
def test_n_fits_is_l_plus_l_squared_counted_by_fit_calls(n_learners):
    edges = [(2.0, 6.0), (4.0,), (3.0,)][:n_learners]
    learners = {f"L{i}": BinMajority(e) for i, e in enumerate(edges)}
    FIT_CALLS.clear()
    res = reverse_testing(learners, X_D, Y_D, X_T)
    # RT §4.3 / docs/architecture.md: ℓ fits on D plus ℓ² reverse fits (not the paper's 2ℓ² + 3ℓ).
    assert len(FIT_CALLS) == n_learners + n_learners**2
    assert res.n_fits == n_learners + n_learners**2
    # each learner is fitted once on D and once on each of the ℓ labelings
    for e in edges:
        assert FIT_CALLS.count(repr(e)) == 1 + n_learners


def test_pure_pieces_in_any_order_give_the_same_result():
    cands = [Candidate(n, e) for n, e in learners_ab().items()]
    labels = [label_target(c, X_D, Y_D, X_T) for c in cands]
    assert labels[0].labels.tolist() == [1, 0, 0]  # T_A by hand, see module comments
    assert labels[1].labels.tolist() == [1, 1, 0]  # T_B
    cells = [reverse_score(j, t, X_T, X_D, Y_D) for t in labels for j in cands]
    res = combine(reversed(labels), reversed(cells))
    pd.testing.assert_frame_equal(res.matrix.loc[["A", "B"], ["A", "B"]], M_HAND, check_names=False)
    assert res.winner("A", "B") == "B"
    assert res.n_fits == 6


def test_one_class_labeler_leaves_its_pairs_undetermined_with_a_reason():
    # C has no bin edges: it predicts D's majority (5 of 8 are 1) everywhere ⇒ T_C = [1, 1, 1].
    learners = {**learners_ab(), "C": BinMajority(())}
    FIT_CALLS.clear()
    res = reverse_testing(learners, X_D, Y_D, X_T)
    assert res.matrix.loc["C"].isna().all()
    assert res.winner("A", "C") is None and res.winner("B", "C") is None
    assert "one class" in res.reason("A", "C") and "'C'" in res.reason("A", "C")
    assert res.winner("A", "B") == "B"  # unaffected, still Condition 4.1
    # C as a retrainer still works: C on T_A = [1,0,0] predicts its majority 0 ⇒ right at x3,4,5 = 3/8
    assert res.matrix.at["A", "C"] == pytest.approx(3 / 8)
    # 3 forward fits + 3 retrainers × 2 labelers with two classes; C's row is not fitted
    assert res.n_fits == 3 + 6 == len(FIT_CALLS)
    # Copeland (wins − losses): B beat A ⇒ B +1, A −1; C's pairs are undetermined ⇒ C 0.
    assert res.copeland.to_dict() == {"A": -1, "B": 1, "C": 0}
    assert res.ranking == [("B",), ("C",), ("A",)]


def test_benefit_scoring_matches_hand_computation():
    # RT §6 benefit matrix on D: act iff p(1|x)·amount > cost; actual 1 ⇒ amount − cost, actual 0 ⇒ −cost.
    amounts = np.array([10, 1, 3, 10, 2, 8, 5, 4.5])
    cost = 2.0
    # p(1|x) on D rows x0..x7 of each reverse model (bin shares, see module comments):
    #  A on T_A: 1,1,0,0,0,0,⅓,⅓ → acts x0 (10) ⇒ +8                                      = 8
    #  B on T_A: ½ ×4, 0 ×4     → acts x0 (5) +8, x3 (5, y=0) −2; x2: 1.5 no              = 6
    #  A on T_B: 1,1,½,½,½,½,⅔,⅔ → x0 +8, x3 (5) −2, x5 (4) −2, x6 (3.33) +3, x7 (3.0) +2.5 = 9.5
    #  B on T_B: 1 ×4, 0 ×4      → x0 +8, x2 (3) +1, x3 (10) −2; x1: 1 no                 = 7
    res = reverse_testing(learners_ab(), X_D, Y_D, X_T, scoring=BenefitScorer(amounts, cost, positive_label=1))
    expected = pd.DataFrame([[8.0, 6.0], [9.5, 7.0]], index=["A", "B"], columns=["A", "B"])
    pd.testing.assert_frame_equal(res.matrix, expected, check_names=False)
    assert res.winner("A", "B") == "B"  # 9.5 > 8 and 7 > 6: Condition 4.1
    assert res.scoring == "benefit(cost=2)"


def test_rule_all_differs_from_pair_on_a_hand_made_matrix():
    # M (rows labeler, cols retrainer):  A: .7 .6 .5   B: .8 .7 .4   C: .5 .5 .3
    M = {"A": [0.7, 0.6, 0.5], "B": [0.8, 0.7, 0.4], "C": [0.5, 0.5, 0.3]}
    names = ["A", "B", "C"]
    labels = [TargetLabels(n, np.array([0, 1])) for n in names]
    cells = [ReverseCell(i, j, M[i][k], True) for i in names for k, j in enumerate(names)]
    pair = combine(labels, cells, rule="pair")
    # pair: A–B: .8>.7 and .7>.6 ⇒ B (4.1); A–C: .7>.5 and .5>.3 ⇒ A (4.2); B–C: .7>.5 and .4>.3 ⇒ B
    assert (pair.winner("A", "B"), pair.winner("A", "C"), pair.winner("B", "C")) == ("B", "A", "B")
    assert pair.copeland.to_dict() == {"A": 0, "B": 2, "C": -2}
    assert pair.ranking == [("B",), ("A",), ("C",)]
    every = combine(labels, cells, rule="all")
    # all: B − A per retrainer = +.1, +.1, −.1 ⇒ tie; C − A = −.2, −.1, −.2 ⇒ A; C − B all < 0 ⇒ B
    assert (every.winner("A", "B"), every.winner("A", "C"), every.winner("B", "C")) == (None, "A", "B")
    assert every.ranking == [("A", "B"), ("C",)]
    assert every.ranks.to_dict() == {"A": 1, "B": 1, "C": 3}


def test_rule_all_equals_pair_for_two_learners():
    a = reverse_testing(learners_ab(), X_D, Y_D, X_T, rule="all")
    assert a.winner("A", "B") == "B"  # same decision as Condition 4.1 above


def test_exports_are_consistent_and_json_serialisable():
    res = reverse_testing(learners_ab(), X_D, Y_D, X_T)
    frame = res.to_frame()
    assert frame.set_index("learner")["score"].to_dict() == {"A": -1.0, "B": 1.0}  # Copeland
    assert frame.set_index("learner")["rank"].to_dict() == {"A": 2, "B": 1}
    long = res.matrix_frame().set_index(["labeler", "retrainer"])["score"]
    assert long[("B", "A")] == pytest.approx(7 / 8)
    d = json.loads(json.dumps(res.to_dict()))
    assert d["matrix"]["A"]["B"] == pytest.approx(3 / 8)
    assert d["n_fits"] == 6 and d["ranking"] == [["B"], ["A"]]


def test_clear_errors_for_bad_inputs():
    with pytest.raises(ValueError, match="0 rows"):
        reverse_testing(learners_ab(), X_D, Y_D, np.empty((0, 1)))
    with pytest.raises(ValueError, match=r"X_source has 1 column but X_target .* has 2 columns"):
        reverse_testing(learners_ab(), X_D, Y_D, np.zeros((3, 2)))
    with pytest.raises(ValueError, match="7 labels but X_source has 8 rows"):
        reverse_testing(learners_ab(), X_D, Y_D[:7], X_T)
    with pytest.raises(ValueError, match="unknown rule"):
        reverse_testing(learners_ab(), X_D, Y_D, X_T, rule="majority")
    with pytest.raises(ValueError, match="benefit amounts have 3 rows but the scored set has 8"):
        reverse_testing(learners_ab(), X_D, Y_D, X_T, scoring=BenefitScorer([1, 2, 3], 1.0))


def test_dataframes_give_the_same_matrix_as_arrays():
    res = reverse_testing(learners_ab(), pd.DataFrame(X_D, columns=["x"]), Y_D, pd.DataFrame(X_T, columns=["x"]))
    pd.testing.assert_frame_equal(res.matrix, M_HAND, check_names=False)  # hand-computed M above


@pytest.mark.heavy
@settings(max_examples=40, deadline=None)
@given(st.integers(2, 5).flatmap(lambda n: st.lists(st.lists(st.sampled_from([0.5, 0.6, 0.7, 0.8]), min_size=n,
                                                              max_size=n), min_size=n, max_size=n)))
def test_property_rule_all_decisions_are_a_subset_of_condition_4_1_4_2(rows):
    # rule='all' requires M[b, j] > M[a, j] for every j, including j = a and j = b — which is
    # Condition 4.1 — so every 'all' decision is also the 'pair' decision; and pair winners satisfy 4.1/4.2.
    names = [f"L{i}" for i in range(len(rows))]
    labels = [TargetLabels(n, np.array([0, 1])) for n in names]
    cells = [ReverseCell(i, j, rows[a][b], True) for a, i in enumerate(names) for b, j in enumerate(names)]
    pair, every = combine(labels, cells, rule="pair"), combine(labels, cells, rule="all")
    M = pair.matrix
    for a, b in combinations(names, 2):
        w = pair.winner(a, b)
        if w is not None:
            lo = a if w == b else b
            assert M.at[w, lo] > M.at[lo, lo] and M.at[w, w] > M.at[lo, w]
        if every.winner(a, b) is not None:
            assert every.winner(a, b) == w
    assert pair.copeland.sum() == 0 and every.copeland.sum() == 0  # each decided pair: +1 and −1


def test_real_learners_on_breast_cancer_satisfy_the_conditions_they_report():
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    res = reverse_testing(["NB", "DT", "LR"], X[:120], y[:120], X[300:400], random_state=0)
    assert res.n_fits == 3 + 9
    M = res.matrix
    for p in res.pairs.itertuples():
        w = res.winner(p.a, p.b)
        if w is not None:
            lo = p.a if w == p.b else p.b
            assert M.at[w, lo] > M.at[lo, lo] and M.at[w, w] > M.at[lo, w]


# ------------------------------------------------------------------------------------------------
# rows as independent jobs (the flow fans them out); CSLR's target rows
# ------------------------------------------------------------------------------------------------


@pytest.mark.heavy
def test_reverse_testing_rows_combine_to_the_one_call_result() -> None:
    # put back together, the rows give exactly the one-call result — the same numbers, not just the same winner
    # (property: the pieces are the same fits on the same rows, only scheduled differently)
    X_s, y_s, X_t, cands = fanout_problem()
    whole = reverse_testing(cands, X_s, y_s, X_t)
    rows = [reverse_testing_row(c.name, cands, X_s, y_s, X_t) for c in reversed(cands)]  # any order
    pieces = combine([t for t, _ in rows], [cell for _, row in rows for cell in row])
    pd.testing.assert_frame_equal(pieces.matrix.loc[whole.matrix.index, whole.matrix.columns], whole.matrix)
    pd.testing.assert_frame_equal(pieces.to_frame().sort_values("learner").reset_index(drop=True),
                                  whole.to_frame().sort_values("learner").reset_index(drop=True))
    assert pieces.n_fits == whole.n_fits == len(cands) + len(cands) ** 2
    with pytest.raises(ValueError, match="labeler 'SVM' is not one of the learners"):
        reverse_testing_row("SVM", cands, X_s, y_s, X_t)


@pytest.mark.heavy
def test_reverse_testing_passes_the_scored_set_as_x_target():
    # CSLR (DL) inside selection: every fit receives the unlabeled rows of the set it will be scored on
    Xs, ys, Xt = cslr_data()
    SEEN.clear()
    res = reverse_testing({"CSLR": CSLRSpy(), "LR": make_learner("LR")}, Xs, ys, Xt)
    assert res.n_fits == 2 + 4  # ℓ + ℓ² with ℓ = 2 (docs/architecture.md)
    # CSLR fits: once on D (scored on T: 90 rows) and twice on T_i (scored on D: 120 rows)
    assert sorted(SEEN) == [90, 120, 120]
    assert np.isfinite(res.matrix.to_numpy(dtype=float)).all()
