"""Few-label selection (shiftlib.selection.fewlabel): the sampling design, unbiasedness of the 1/π
estimates, the plan's guarantees, the prior combination and bad input."""

from __future__ import annotations

from itertools import permutations

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import make_classification

from shiftlib.selection import (
    LabelPlan,
    SelectorScores,
    TargetPredictions,
    fewlabel_select,
    inclusion_probabilities,
    plan_labels,
    source_cv,
    systematic_sample,
    target_predictions,
    trcv_labeled_select,
    trcv_select,
)
from shiftlib.selection.fewlabel import (
    _anticipated,
    _draw_distribution,
    _label_estimate,
    _loewner_max,
    _systematic,
    decide,
    fewlabel_estimate,
    guarded_select,
)
from shiftlib.selection.results import ranking_tiers

pytestmark = pytest.mark.usefixtures("one_blas_thread")


# ----------------------------------------------------------------------------------------------------
# a tiny hand-made batch: 8 rows, 3 candidates, known labels
# ----------------------------------------------------------------------------------------------------
PRED = np.array([
    [0, 0, 0],  # agree
    [0, 1, 1],
    [1, 0, 1],
    [1, 1, 0],
    [0, 0, 1],
    [1, 1, 1],  # agree
    [0, 1, 0],
    [1, 0, 0],
])
Y_TRUE = np.array([0, 1, 1, 0, 1, 1, 0, 1])
NAMES = ["a", "b", "c"]


def tiny() -> TargetPredictions:
    proba = np.column_stack([1 - PRED.mean(axis=1), PRED.mean(axis=1)])
    return TargetPredictions(NAMES, PRED, proba, np.array([0, 1]))


def tiny_xy() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.normal(size=(20, 2)), np.tile([0, 1], 10), rng.normal(size=(8, 2))


def true_theta() -> np.ndarray:
    return (PRED == Y_TRUE[:, None]).mean(axis=0)


def tiny_plan(budget: int, seed: int, already: object = None) -> LabelPlan:
    Xs, ys, Xt = tiny_xy()
    return plan_labels(NAMES, Xs, ys, Xt, budget=budget, already_labeled=already, random_state=seed,
                       prior=None, predictions=tiny())


# ----------------------------------------------------------------------------------------------------
# sampling design
# ----------------------------------------------------------------------------------------------------
def test_inclusion_probabilities_hand_worked() -> None:
    # no capping: π = n q / Σq = 2·[1, 2, 3, 4]/10
    np.testing.assert_allclose(inclusion_probabilities([1, 2, 3, 4], 2), [0.2, 0.4, 0.6, 0.8])
    # capping: 10 would give 2·10/13 > 1, so it is taken for sure and the rest share 1: 1/3 each
    np.testing.assert_allclose(inclusion_probabilities([1, 1, 1, 10], 2), [1 / 3, 1 / 3, 1 / 3, 1.0])
    pi = inclusion_probabilities(np.random.default_rng(1).uniform(0.01, 1, 50) ** 4, 20)
    assert pi.sum() == pytest.approx(20) and pi.max() <= 1 and pi.min() > 0


def test_systematic_sampling_exact_inclusion_for_every_order() -> None:
    """Integrating exactly over the uniform start u (the sample is constant between breakpoints), each
    unit's inclusion probability is π_i for every order, so Σ_S y/π is exactly unbiased."""
    pi = inclusion_probabilities([1.0, 2.0, 3.0, 1.5, 2.5], 3)
    y = np.array([3.0, -1.0, 2.0, 5.0, 0.5])
    for order in permutations(range(5)):
        order = np.array(order)
        cum = np.concatenate([[0.0], np.cumsum(pi[order])])
        breaks = np.unique(np.concatenate([[0.0, 1.0], np.mod(cum, 1.0)]))
        incl, ht = np.zeros(5), 0.0
        for lo, hi in zip(breaks[:-1], breaks[1:], strict=True):
            s = _systematic(pi, order, (lo + hi) / 2)
            assert len(np.unique(s)) == 3  # exactly n distinct units
            incl[s] += hi - lo
            ht += (hi - lo) * np.sum(y[s] / pi[s])
        np.testing.assert_allclose(incl, pi, atol=1e-12)
        assert ht == pytest.approx(y.sum(), abs=1e-9)


@pytest.mark.heavy
def test_systematic_sample_frequencies_match_pi() -> None:
    pi = inclusion_probabilities([0.5, 1.0, 2.0, 4.0, 0.5, 1.0], 3)
    rng = np.random.default_rng(3)
    counts = np.zeros(6)
    reps = 4000
    for _ in range(reps):
        s = systematic_sample(pi, rng)
        assert len(s) == 3 and len(set(s)) == 3
        counts[s] += 1
    se = np.sqrt(pi * (1 - pi) / reps)
    assert np.all(np.abs(counts / reps - pi) <= 4 * se + 1e-12)


# ----------------------------------------------------------------------------------------------------
# the plan
# ----------------------------------------------------------------------------------------------------
def test_plan_rows_are_disagreement_rows_without_repeats() -> None:
    tp = tiny()
    np.testing.assert_array_equal(tp.disagreement, [1, 2, 3, 4, 6, 7])
    for seed in range(20):
        plan = tiny_plan(3, seed)
        assert len(plan.rows) == 3 == len(set(plan.rows.tolist()))
        assert set(plan.rows.tolist()) <= {1, 2, 3, 4, 6, 7}
        assert np.all((plan.probabilities > 0) & (plan.probabilities <= 1))
        # the round's π sum to its size over its population (6 rows); each chosen π is one of them
        assert plan.details["round_info"][0]["population"] == 6


def test_budget_beyond_disagreement_rows_returns_them_all_with_certainty() -> None:
    plan = tiny_plan(8, 0)  # 8 ≤ batch size, but only 6 rows can change a comparison
    assert sorted(plan.rows.tolist()) == [1, 2, 3, 4, 6, 7]
    np.testing.assert_allclose(plan.probabilities, 1.0)


def test_continuation_adds_only_new_rows_up_to_budget() -> None:
    p1 = tiny_plan(2, 5)
    p2 = tiny_plan(4, 6, already=(p1, Y_TRUE[p1.rows]))
    assert len(p2.rows) == 4 == len(set(p2.rows.tolist()))
    np.testing.assert_array_equal(p2.rows[:2], p1.rows)
    assert set(p2.new_rows.tolist()).isdisjoint(p1.rows.tolist())
    assert p2.rounds.tolist() == [1, 1, 2, 2]
    assert p2.details["round_info"][1]["population"] == 4  # 6 disagreement rows minus the 2 labeled
    # asking for no more than is labeled adds nothing
    p3 = tiny_plan(2, 7, already=(p1, Y_TRUE[p1.rows]))
    np.testing.assert_array_equal(p3.rows, p1.rows)


# ----------------------------------------------------------------------------------------------------
# unbiasedness of the 1/π estimate (only contrasts matter: the common part is label-free)
# ----------------------------------------------------------------------------------------------------
def _contrasts(theta: np.ndarray) -> np.ndarray:
    return np.array([theta[0] - theta[1], theta[0] - theta[2], theta[1] - theta[2]])


@pytest.mark.slow  # default-suite budget: 15–37 s each beside other work (--durations)
@pytest.mark.heavy
@pytest.mark.parametrize("two_rounds", [False, True])
def test_label_estimate_of_differences_is_unbiased(two_rounds: bool) -> None:
    tp, truth = tiny(), _contrasts(true_theta())
    ests = []
    for seed in range(600 if two_rounds else 2000):
        plan = tiny_plan(2, seed)
        if two_rounds:  # the second round's rows depend on the first round's labels
            plan = tiny_plan(4, 10_000 + seed, already=(plan, Y_TRUE[plan.rows]))
        labels = {int(r): int(Y_TRUE[r]) for r in plan.rows}
        theta, _, _ = _label_estimate(tp, plan, labels)
        ests.append(_contrasts(theta))
    ests = np.array(ests)
    se = ests.std(axis=0) / np.sqrt(len(ests))
    assert np.all(np.abs(ests.mean(axis=0) - truth) <= 4 * se)


def test_unrequested_labels_are_uniform_draws() -> None:
    """Rows 0 and 1 labeled without a plan: s = (N/m) Σ c_i·1[i ∈ D], m = 2, N = 8 (SRS, π = m/N)."""
    tp = tiny()
    labels = {0: 0, 1: 1}
    theta, _, info = _label_estimate(tp, None, labels, "ht")
    # row 0 is an agreement row (exact, common), row 1 in D: c = [0, 1, 1]; the other agreement row 5
    # contributes p̄(1 | x_5) = 1 to every candidate
    expected = (1 + 1 + np.array([0, 1, 1]) * 8 / 2) / 8
    np.testing.assert_allclose(theta, expected)
    assert info["n_extra"] == 2
    # continuing from such labels marks them round 0 with probability m/N
    Xs, ys, Xt = tiny_xy()
    plan = plan_labels(NAMES, Xs, ys, Xt, budget=4, already_labeled=pd.Series(labels), random_state=0,
                       prior=None, predictions=tp)
    assert plan.rounds.tolist()[:2] == [0, 0]
    np.testing.assert_allclose(plan.probabilities[:2], 2 / 8)
    assert len(plan.rows) == 4 and set(plan.new_rows.tolist()).isdisjoint({0, 1})


# ----------------------------------------------------------------------------------------------------
# the selector on real fits
# ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    X, y = make_classification(n_samples=260, n_features=5, n_informative=3, random_state=0)
    shift = X[:, 0] > 0.3
    return X[~shift][:120], y[~shift][:120], X[shift][:60], y[shift][:60]


LEARNERS = ["NB", "LR", "DT"]


@pytest.mark.heavy
def test_all_disagreement_rows_labeled_gives_exact_differences(data: tuple) -> None:
    Xs, ys, Xt, yt = data
    tp = target_predictions(LEARNERS, Xs, ys, Xt, random_state=0)
    plan = plan_labels(LEARNERS, Xs, ys, Xt, budget=len(Xt), random_state=0, predictions=tp)
    res = fewlabel_select(LEARNERS, Xs, ys, Xt, plan=plan, y_labeled=yt[plan.rows], random_state=0, predictions=tp)
    true = (tp.predictions == yt[:, None]).mean(axis=0)
    # every row that can change a comparison is labeled with certainty: V_L = 0, the labels decide alone
    np.testing.assert_allclose(_contrasts(res.scores.to_numpy()), _contrasts(true), atol=1e-9)
    assert res.selector == "fewlabel" and res.details["prior_weight"] == pytest.approx(0.0, abs=1e-9)


@pytest.mark.heavy
def test_no_labels_returns_the_prior_and_p_better_is_consistent(data: tuple) -> None:
    Xs, ys, Xt, yt = data
    tp = target_predictions(LEARNERS, Xs, ys, Xt, random_state=0)
    cv = source_cv(LEARNERS, Xs, ys, k=10, random_state=0)
    plan = plan_labels(LEARNERS, Xs, ys, Xt, budget=10, random_state=0, predictions=tp)
    res = fewlabel_select(LEARNERS, Xs, ys, Xt, plan=plan, y_labeled=[None] * 10, prior=cv, predictions=tp)
    np.testing.assert_allclose(res.scores.to_numpy(), cv.scores[LEARNERS].to_numpy())
    pb = res.details["p_better"]
    np.testing.assert_allclose(pb.to_numpy() + pb.to_numpy().T, 1.0)
    for a in LEARNERS:
        for b in LEARNERS:
            if res.scores[a] > res.scores[b]:
                assert pb.loc[a, b] > 0.5
    assert res.details["p_best"].sum() == pytest.approx(1.0)
    lo, hi = res.intervals["low"], res.intervals["high"]
    assert np.all((lo <= res.scores) & (res.scores <= hi))


def test_partly_filled_labels_are_counted(data: tuple) -> None:
    Xs, ys, Xt, yt = data
    tp = target_predictions(LEARNERS, Xs, ys, Xt, random_state=0)
    plan = plan_labels(LEARNERS, Xs, ys, Xt, budget=12, random_state=1, predictions=tp)
    y = yt[plan.rows].astype(object)
    y[:4] = None
    res = fewlabel_select(LEARNERS, Xs, ys, Xt, plan=plan, y_labeled=y, prior=None, predictions=tp)
    assert res.details["n_labels"] == len(plan.rows) - 4
    assert res.details["n_missing_requested"] == 4


@pytest.mark.heavy
def test_trcv_labeled_select_is_trcv_with_the_plan_rows_as_L(data: tuple) -> None:
    Xs, ys, Xt, yt = data
    plan = plan_labels(["NB", "LR"], Xs, ys, Xt, budget=8, random_state=0)
    res = trcv_labeled_select(["NB", "LR"], Xs, ys, Xt, plan=plan, y_labeled=yt[plan.rows], weights=None, k=3,
                              random_state=0)
    L = np.sort(plan.rows)
    U = np.setdiff1d(np.arange(len(Xt)), L)
    ref = trcv_select(["NB", "LR"], Xs, ys, Xt[U], X_target_labeled=Xt[L], y_target_labeled=yt[L], weights=None,
                      k=3, random_state=0)
    assert res.selector == "trcv_l"
    np.testing.assert_allclose(res.scores.to_numpy(), ref.scores.to_numpy())


# ----------------------------------------------------------------------------------------------------
# bad input
# ----------------------------------------------------------------------------------------------------
def test_bad_budget() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        tiny_plan(0, 0)
    with pytest.raises(ValueError, match="larger than the batch"):
        tiny_plan(9, 0)


def test_label_of_a_class_never_seen_in_the_source() -> None:
    tp = tiny()
    plan = tiny_plan(3, 0)
    Xs, ys, Xt = tiny_xy()
    with pytest.raises(ValueError, match="never occur in the source"):
        fewlabel_select(NAMES, Xs, ys, Xt, plan=plan, y_labeled=[0, 1, 2], prior=None, predictions=tp)
    with pytest.raises(ValueError, match="rows 0 … 7"):
        fewlabel_select(NAMES, Xs, ys, Xt, plan=plan, y_labeled={99: 1}, prior=None, predictions=tp)
    with pytest.raises(ValueError, match="one label per plan row"):
        fewlabel_select(NAMES, Xs, ys, Xt, plan=plan, y_labeled=[0, 1], prior=None, predictions=tp)


def test_plan_from_other_candidates_is_refused(data: tuple) -> None:
    Xs, ys, Xt, _ = data
    plan = plan_labels(["NB", "LR"], Xs, ys, Xt, budget=5, random_state=0)
    with pytest.raises(ValueError, match="another batch or other candidates"):
        fewlabel_select(["NB", "DT"], Xs, ys, Xt, plan=plan, y_labeled=[0] * 5, prior=None)


@pytest.mark.heavy
def test_unequal_draw_probabilities_need_the_1_over_pi_weights() -> None:
    """4 candidates: a 2–2 split disagrees on 4 pairs, a 3–1 split on 3, so q differs between rows. The
    1/π estimate of the centred accuracies is unbiased; the plain mean of the drawn rows is not (it
    over-represents the 2–2 rows) — the check can tell the two apart."""
    P = np.array([[0, 0, 0, 1], [0, 0, 1, 1], [1, 1, 0, 0], [1, 0, 1, 1], [0, 1, 0, 1],
                  [1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 0, 0], [0, 1, 1, 0], [1, 1, 1, 0]])
    Y = np.array([1, 0, 1, 1, 0, 1, 0, 0, 1, 0])
    names = list("abcd")
    tp = TargetPredictions(names, P, np.column_stack([1 - P.mean(1), P.mean(1)]), np.array([0, 1]))
    rng = np.random.default_rng(0)
    Xs, ys, Xt = rng.normal(size=(20, 2)), np.tile([0, 1], 10), rng.normal(size=(10, 2))
    truth = (P == Y[:, None]).mean(axis=0)
    truth = truth - truth.mean()
    ht, naive = [], []
    for seed in range(2000):
        plan = plan_labels(names, Xs, ys, Xt, budget=3, random_state=seed, prior=None, predictions=tp)
        theta, _, _ = _label_estimate(tp, plan, {int(r): int(Y[r]) for r in plan.rows}, "ht")
        ht.append(theta - theta.mean())
        c = (P[plan.rows] == Y[plan.rows, None]).mean(axis=0)
        naive.append(c - c.mean())
    ht, naive = np.array(ht), np.array(naive) * len(tp.disagreement) / len(Y)
    se = ht.std(axis=0) / np.sqrt(len(ht))
    assert np.all(np.abs(ht.mean(axis=0) - truth) <= 4 * se)
    se_n = naive.std(axis=0) / np.sqrt(len(naive))
    assert np.any(np.abs(naive.mean(axis=0) - truth) > 4 * se_n)


def test_prior_and_labels_are_combined_by_inverse_variance_hand_worked() -> None:
    """ℓ = 2: prior difference +0.1 (variance of the contrast a = 0.001), label difference −0.1 (b = 0.004).
    τ² = (0.2/√2)² − a − b = 0.015, so the prior's variance is 0.016 against the labels' 0.004: weights
    0.2 and 0.8, combined difference 0.2·0.1 + 0.8·(−0.1) = −0.06 around the labels' level 0.65."""
    from shiftlib.selection.fewlabel import _combine

    prior = (np.array([0.8, 0.7]), np.eye(2) * 0.001, "scv")
    label = (np.array([0.6, 0.7]), np.eye(2) * 0.004, {})
    est = _combine(label, prior, 2)
    np.testing.assert_allclose(est.theta, [0.62, 0.68], atol=1e-12)
    assert est.details["tau2"] == pytest.approx(0.015)
    assert est.details["prior_weight"] == pytest.approx(0.2)
    # posterior variance of the contrast: 1/(1/0.016 + 1/0.004) = 0.0032, so Var(θ_a − θ_b) = 2·0.0032
    d = np.array([1.0, -1.0])
    assert d @ est.cov @ d == pytest.approx(2 * 0.0032)
    # when the label and prior contrasts agree, τ² stays at its floor (0.01²) and the prior keeps weight
    agree = _combine((np.array([0.7, 0.6]), np.eye(2) * 0.004, {}), prior, 2)
    assert agree.details["tau2"] == pytest.approx(1e-4)
    assert agree.details["prior_weight"] == pytest.approx((1 / 0.0011) / (1 / 0.0011 + 1 / 0.004))


# ----------------------------------------------------------------------------------------------------
# the guarded decision (guarded_select): CV's order unless the posterior overturns it at the level
# ----------------------------------------------------------------------------------------------------
def _fl(theta: dict[str, float], p: dict[tuple[str, str], float]) -> SelectorScores:
    """A fewlabel result by hand: posterior means and P(a beats b) for the listed pairs (the rest 0.5)."""
    names = list(theta)
    M = pd.DataFrame(0.5, index=names, columns=names)
    for (a, b), v in p.items():
        M.loc[a, b], M.loc[b, a] = v, 1 - v
    return SelectorScores("fewlabel", pd.Series(theta), 0, None, {"p_better": M})


def test_guard_keeps_the_prior_unless_the_posterior_reaches_the_level() -> None:
    cv = SelectorScores("scv", pd.Series({"A": 0.80, "B": 0.75, "C": 0.70}), 0)
    # the labels say C > A with 0.85 (< 0.9): CV's order stands, though the posterior means say otherwise
    fl = _fl({"A": 0.70, "B": 0.72, "C": 0.78}, {("C", "A"): 0.85, ("C", "B"): 0.6, ("B", "A"): 0.55})
    g = guarded_select(fl, cv)
    assert g.selector == "fewlabel_guard" and g.ranking == [("A",), ("B",), ("C",)] and g.details["overturned"] == []
    # at 0.95 the pair (C, A) is overturned; A > B and B > C stay (0.55, 0.6 < 0.9): a cycle, each learner
    # wins one pair, and the posterior means break the tie: C, B, A
    fl = _fl({"A": 0.70, "B": 0.72, "C": 0.78}, {("C", "A"): 0.95, ("C", "B"): 0.6, ("B", "A"): 0.55})
    g = guarded_select(fl, cv)
    assert g.details["overturned"] == [("C", "A")]
    assert g.details["wins"].to_dict() == {"A": 1.0, "B": 1.0, "C": 1.0}
    assert g.ranking == [("C",), ("B",), ("A",)]


@pytest.mark.heavy
def test_guard_with_certain_labels_is_the_posterior_order_and_with_none_the_prior_order() -> None:
    rng = np.random.default_rng(0)
    names = list("ABCDE")
    for _ in range(20):
        cv = SelectorScores("scv", pd.Series(rng.permutation(5) / 10, index=names), 0)
        theta = dict(zip(names, rng.permutation(5) / 10 + 0.3, strict=True))
        certain = {(a, b): float(theta[a] > theta[b]) for a in names for b in names if a < b}
        g = guarded_select(_fl(theta, certain), cv)
        assert g.ranking == ranking_tiers(pd.Series(theta))  # every disagreeing pair overturned
        g = guarded_select(_fl(theta, {}), cv)  # P = 0.5 everywhere: nothing is overturned
        assert g.ranking == cv.ranking and g.details["overturned"] == []


def test_decide_orders_by_the_posterior_by_default_and_keeps_the_guard_as_an_option() -> None:
    """The same hand-made posterior as above (C > A with probability 0.85): the Bayes decision takes every
    pair in its more probable order, i.e. the posterior means' order C, B, A; the guard keeps CV's A, B, C."""
    cv = SelectorScores("scv", pd.Series({"A": 0.80, "B": 0.75, "C": 0.70}), 0)
    fl = _fl({"A": 0.70, "B": 0.72, "C": 0.78}, {("C", "A"): 0.85, ("C", "B"): 0.6, ("B", "A"): 0.55})
    d = decide(fl, cv)
    assert d.selector == "fewlabel" and d.details["decision"] == "posterior"
    assert d.ranking == [("C",), ("B",), ("A",)]
    for a, b in [("C", "A"), ("C", "B"), ("B", "A")]:  # each pair in the order it has probability > 0.5
        assert (d.scores[a] > d.scores[b]) == (fl.details["p_better"].loc[a, b] > 0.5)
    g = decide(fl, cv, decision="guard")
    assert g.selector == "fewlabel" and g.details["decision"] == "guard" and g.ranking == [("A",), ("B",), ("C",)]
    pd.testing.assert_series_equal(g.scores, guarded_select(fl, cv).scores)
    with pytest.raises(ValueError, match="decision='vote' is not known"):
        decide(fl, cv, decision="vote")
    with pytest.raises(TypeError, match="fewlabel_select"):
        decide(cv, cv)


def test_guard_refuses_bad_input() -> None:
    cv = SelectorScores("scv", pd.Series({"A": 0.8, "B": 0.7}), 0)
    with pytest.raises(TypeError, match="fewlabel_select"):
        guarded_select(cv, cv)
    with pytest.raises(ValueError, match="level must be in"):
        guarded_select(_fl({"A": 0.7, "B": 0.8}, {}), cv, level=0.4)
    with pytest.raises(ValueError, match="does not score"):
        guarded_select(_fl({"A": 0.7, "B": 0.8, "C": 0.1}, {}), cv)


# ----------------------------------------------------------------------------------------------------
# the model-assisted (difference) label estimate: Σ_D ĉ + Σ_S (c − ĉ)/π (Särndal et al. 1992, §6.3)
# ----------------------------------------------------------------------------------------------------
# 4 rows, 2 candidates that disagree everywhere; p̄(class 1) = 0.3, 0.6, 0.2, 0.9
P4 = np.array([[0, 1], [1, 0], [0, 1], [1, 0]])
PROBA4 = np.array([[0.7, 0.3], [0.4, 0.6], [0.8, 0.2], [0.1, 0.9]])
Y4 = np.array([0, 0, 1, 1])


def _one_round_plan(rows: list[int], pis: list[float], n_target: int, names: list[str], D: np.ndarray) -> LabelPlan:
    return LabelPlan(np.asarray(rows, int), np.asarray(pis, float), np.ones(len(rows), int), len(rows), n_target,
                     names, {"disagreement": D, "round_info": [{"round": 1, "labeled_before": []}]})


def test_difference_estimate_hand_worked() -> None:
    """Surrogate ĉ = p̄(ŷ_j | x_i): rows [0.7, 0.3], [0.6, 0.4], [0.8, 0.2], [0.9, 0.1], Σ = [3.0, 1.0].
    Rows 0 and 2 drawn with π = 0.5, 0.8; c_0 = [1, 0], c_2 = [0, 1]; residuals [0.3, −0.3], [−0.8, 0.8].
    Sum = [3, 1] + [0.6, −0.6] + [−1, 1] = [2.6, 1.4], θ = [0.65, 0.35] (HT: [1/0.5, 1/0.8]/4 = [0.5, 0.3125]).
    Hansen–Hurwitz variance: p = π/Σπ = [5/13, 8/13], z = residual/p = ±[0.78, −1.3], mean ∓0.26,
    deviations ±1.04, Σ dz²/(n(n − 1)) = 2·1.0816/2 = 1.0816, over N² = 16: 0.0676 (``variance="sample"``).
    The default ``"hh"`` draws with p = π/n = [0.25, 0.4]: z = [1.2, −2.0], mean −0.4, deviations ±1.6,
    Σ dz²/(n(n − 1)) = 5.12/2 = 2.56, over 16: 0.16."""
    tp = TargetPredictions(["a", "b"], P4, PROBA4, np.array([0, 1]))
    np.testing.assert_allclose(tp.right_proba(), [[0.7, 0.3], [0.6, 0.4], [0.8, 0.2], [0.9, 0.1]])
    plan = _one_round_plan([0, 2], [0.5, 0.8], 4, ["a", "b"], tp.disagreement)
    labels = {0: 0, 2: 1}
    theta, V, info = _label_estimate(tp, plan, labels, "difference", "sample")
    np.testing.assert_allclose(theta, [0.65, 0.35], atol=1e-12)
    np.testing.assert_allclose(V, 0.0676 * np.array([[1, -1], [-1, 1]]), atol=1e-12)
    assert info["estimator"] == "difference"
    theta_hh, V_hh, _ = _label_estimate(tp, plan, labels, "difference")
    np.testing.assert_allclose(theta_hh, [0.65, 0.35], atol=1e-12)
    np.testing.assert_allclose(V_hh, 0.16 * np.array([[1, -1], [-1, 1]]), atol=1e-12)
    theta_ht, _, _ = _label_estimate(tp, plan, labels, "ht")
    np.testing.assert_allclose(theta_ht, [0.5, 0.3125], atol=1e-12)


def test_difference_estimate_with_a_perfect_surrogate_is_exact_with_zero_variance() -> None:
    """ĉ = c on every row (p̄ one-hot on the true class): the residuals vanish, so every sample gives θ
    exactly and the variance is 0."""
    proba = np.eye(2)[Y_TRUE]
    tp = TargetPredictions(NAMES, PRED, proba, np.array([0, 1]))
    np.testing.assert_array_equal(tp.right_proba(), (PRED == Y_TRUE[:, None]).astype(float))
    for seed in range(5):
        plan = tiny_plan(3, seed)
        theta, V, _ = _label_estimate(tp, plan, {int(r): int(Y_TRUE[r]) for r in plan.rows}, "difference")
        np.testing.assert_allclose(theta, true_theta(), atol=1e-12)
        np.testing.assert_allclose(V, 0.0, atol=1e-15)


@pytest.mark.heavy
def test_difference_estimate_is_exactly_unbiased_over_the_systematic_design() -> None:
    """Exact expectation over the design: every order of 5 rows and every stretch of the uniform start
    between breakpoints (as in the systematic-sampling test); E[θ̂] equals θ to rounding."""
    P = np.array([[0, 1, 1], [1, 0, 1], [1, 1, 0], [0, 0, 1], [1, 0, 0]])
    Y = np.array([1, 1, 0, 0, 1])
    proba = np.array([[0.4, 0.6], [0.7, 0.3], [0.2, 0.8], [0.55, 0.45], [0.35, 0.65]])
    tp = TargetPredictions(NAMES, P, proba, np.array([0, 1]))
    pi = inclusion_probabilities([1.0, 2.0, 3.0, 1.5, 2.5], 2)
    truth = (P == Y[:, None]).mean(axis=0)
    for estimator in ("ht", "difference"):
        mean = np.zeros(3)
        for order in permutations(range(5)):
            order = np.array(order)
            cum = np.concatenate([[0.0], np.cumsum(pi[order])])
            breaks = np.unique(np.concatenate([[0.0, 1.0], np.mod(cum, 1.0)]))
            for lo, hi in zip(breaks[:-1], breaks[1:], strict=True):
                s = _systematic(pi, order, (lo + hi) / 2)
                plan = _one_round_plan(s.tolist(), pi[s].tolist(), 5, NAMES, tp.disagreement)
                theta, _, _ = _label_estimate(tp, plan, {int(i): int(Y[i]) for i in s}, estimator)
                mean += (hi - lo) * theta / 120
        np.testing.assert_allclose(mean, truth, atol=1e-9)


@pytest.mark.slow  # a Monte Carlo over two-round designs: ~7 s
def test_recalibrated_difference_estimate_is_unbiased_over_two_rounds() -> None:
    """'difference_cal': round 2's surrogate is fitted on round 1's labels only, so each round stays
    unbiased. Monte Carlo over 600 two-round plans; tolerance 4 standard errors of the mean (an unbiased
    estimator fails it with probability < 1e-4 per coordinate)."""
    tp, truth = tiny(), _contrasts(true_theta())
    ests, changed = [], 0
    for seed in range(600):
        p1 = tiny_plan(2, seed)
        plan = tiny_plan(4, 10_000 + seed, already=(p1, Y_TRUE[p1.rows]))
        labels = {int(r): int(Y_TRUE[r]) for r in plan.rows}
        theta, _, _ = _label_estimate(tp, plan, labels, "difference_cal")
        changed += not np.allclose(theta, _label_estimate(tp, plan, labels, "difference")[0])
        ests.append(_contrasts(theta))
    ests = np.array(ests)
    se = ests.std(axis=0) / np.sqrt(len(ests))
    assert np.all(np.abs(ests.mean(axis=0) - truth) <= 4 * se)
    assert changed > 0  # the recalibration was fitted (round 1 labels with both outcomes) in some plans


def test_estimator_reaches_the_selector_and_a_bad_name_is_refused(data: tuple) -> None:
    Xs, ys, Xt, yt = data
    tp = target_predictions(LEARNERS, Xs, ys, Xt, random_state=0)
    plan = plan_labels(LEARNERS, Xs, ys, Xt, budget=10, random_state=0, predictions=tp, estimator="difference")
    res = fewlabel_select(LEARNERS, Xs, ys, Xt, plan=plan, y_labeled=yt[plan.rows], prior=None, predictions=tp,
                          estimator="difference")
    theta, _, _ = _label_estimate(tp, plan, {int(r): yt[r] for r in plan.rows}, "difference")
    np.testing.assert_allclose(res.scores.to_numpy(), theta)
    assert res.details["params"]["estimator"] == "difference"
    with pytest.raises(ValueError, match="estimator='mean' is not known"):
        fewlabel_select(LEARNERS, Xs, ys, Xt, plan=plan, y_labeled=yt[plan.rows], prior=None, predictions=tp,
                        estimator="mean")
    with pytest.raises(ValueError, match="is not known"):
        plan_labels(LEARNERS, Xs, ys, Xt, budget=10, random_state=0, predictions=tp, estimator="HT")


def test_difference_estimate_of_unrequested_labels_hand_worked() -> None:
    """Rows 0 and 1 labeled without a plan (SRS, m = 2 of N = 8). With vote shares as p̄, the surrogate
    sums to 10/3 for every candidate over D = {1, 2, 3, 4, 6, 7}. Row 1 (label 1, predictions [0, 1, 1]):
    c = [0, 1, 1], ĉ = [1/3, 2/3, 2/3]; row 0 is outside D (residual 0). s = 10/3 + (8/2)·[−1/3, 1/3, 1/3]
    = [2, 14/3, 14/3]; the agreement rows add 1 + 1, so θ = [4, 20/3, 20/3]/8."""
    theta, _, info = _label_estimate(tiny(), None, {0: 0, 1: 1}, "difference")
    np.testing.assert_allclose(theta, np.array([4, 20 / 3, 20 / 3]) / 8, atol=1e-12)
    assert info["n_extra"] == 2


# ----------------------------------------------------------------------------------------------------
# the variance of the label estimate: Hansen–Hurwitz with draw probabilities π/n ("hh") vs "sample"
# ----------------------------------------------------------------------------------------------------
def test_hansen_hurwitz_variance_hand_worked() -> None:
    """The 4-row example above, variance='hh': p = π/n = [0.25, 0.4], z_a = [0.3/0.25, −0.8/0.4] = [1.2, −2.0],
    mean −0.4, deviations ±1.6, Σ/(n(n − 1)) = 5.12/2 = 2.56, over N² = 16: 0.16 (the 'sample' form gives
    0.0676 = 0.16·(0.65)², the drawn rows' mean π squared)."""
    tp = TargetPredictions(["a", "b"], P4, PROBA4, np.array([0, 1]))
    plan = _one_round_plan([0, 2], [0.5, 0.8], 4, ["a", "b"], tp.disagreement)
    theta, V, info = _label_estimate(tp, plan, {0: 0, 2: 1}, "difference", "hh")
    np.testing.assert_allclose(theta, [0.65, 0.35], atol=1e-12)
    np.testing.assert_allclose(V, 0.16 * np.array([[1, -1], [-1, 1]]), atol=1e-12)
    assert info["variance"] == "hh"


@pytest.mark.slow  # default-suite budget: 15–37 s each beside other work (--durations)
@pytest.mark.heavy
@pytest.mark.parametrize(("n_pop", "n"), [(6, 3), (6, 2)])
def test_hansen_hurwitz_variance_is_conservative_over_the_exact_design(n_pop: int, n: int) -> None:
    """Exact expectation over every order and start of the systematic design: E[V̂_hh] ≥ Var(θ̂_a − θ̂_b),
    as the with-replacement approximation is for πps without replacement; the 'sample' form falls below
    the true variance (the underestimate the sixth rule of reports/label_budget.md corrects)."""
    rng = np.random.default_rng(n_pop * 10 + n)
    P = np.column_stack([np.zeros(n_pop, int), np.ones(n_pop, int)])  # a and b disagree on every row
    Y = np.array([0, 1] * n_pop)[:n_pop]
    tp = TargetPredictions(["a", "b"], P, np.full((n_pop, 2), 0.5), np.array([0, 1]))
    pi = inclusion_probabilities(rng.uniform(0.5, 2.0, n_pop), n)
    d = np.array([1.0, -1.0])
    for variance in ("hh", "sample"):
        w, est, var = [], [], []
        for order in permutations(range(n_pop)):
            order = np.array(order)
            cum = np.concatenate([[0.0], np.cumsum(pi[order])])
            breaks = np.unique(np.concatenate([[0.0, 1.0], np.mod(cum, 1.0)]))
            for lo, hi in zip(breaks[:-1], breaks[1:], strict=True):
                s = _systematic(pi, order, (lo + hi) / 2)
                plan = _one_round_plan(s.tolist(), pi[s].tolist(), n_pop, ["a", "b"], tp.disagreement)
                theta, V, _ = _label_estimate(tp, plan, {int(i): int(Y[i]) for i in s}, "ht", variance)
                w.append(hi - lo)
                est.append(d @ theta)
                var.append(d @ V @ d)
        w = np.array(w) / np.sum(w)
        est, var = np.array(est), np.array(var)
        true_var = float(w @ (est - w @ est) ** 2)
        if variance == "hh":
            assert w @ var >= true_var
        else:
            assert w @ var < true_var


# ----------------------------------------------------------------------------------------------------
# variance="hh_model": Hansen–Hurwitz floored by the anticipated variance under the surrogate (ninth rule)
# ----------------------------------------------------------------------------------------------------
def _round_info(n: int, names: list[str]) -> dict:
    return {"round": 1, "n": n, "labeled_before": [], "pair_weights": {f"{a}|{b}": 1.0 for a, b in
                                                                        [(names[0], names[1])]}}


def test_loewner_max_dominates_both_and_is_hand_worked() -> None:
    """diag(1, 0) and diag(0, 1): the smallest matrix the construction gives is the identity; for random
    PSD pairs the result minus either is PSD (Loewner order)."""
    np.testing.assert_allclose(_loewner_max(np.diag([1.0, 0.0]), np.diag([0.0, 1.0])), np.eye(2), atol=1e-12)
    rng = np.random.default_rng(3)
    for _ in range(20):
        A, B = (m @ m.T for m in rng.normal(size=(2, 4, 4)))
        M = _loewner_max(A, B)
        assert np.linalg.eigvalsh(M - A).min() >= -1e-10 and np.linalg.eigvalsh(M - B).min() >= -1e-10
    np.testing.assert_allclose(_loewner_max(2 * np.eye(3), np.eye(3)), 2 * np.eye(3), atol=1e-12)


def test_anticipated_variance_hand_worked() -> None:
    """The 4-row example: a and b disagree everywhere, so every row has the same draw weight and π = n/4 = 0.5,
    (1 − π)/π = 1. For the difference estimator E[(c − ĉ)(c − ĉ)ᵀ] = p(1 − p)·[[1, −1], [−1, 1]] with
    p = p̄(ŷ_a) = 0.7, 0.6, 0.8, 0.9: Σ p(1 − p) = 0.21 + 0.24 + 0.16 + 0.09 = 0.70. For Horvitz–Thompson
    (ĉ = 0) it is E[ccᵀ] = diag(p, 1 − p): Σ = diag(3.0, 1.0)."""
    tp = TargetPredictions(["a", "b"], P4, PROBA4, np.array([0, 1]))
    info = _round_info(2, ["a", "b"])
    D = tp.disagreement
    diff = _anticipated(tp, info, D, np.zeros(0, int), 1.0, tp.right_proba(D))
    np.testing.assert_allclose(diff, 0.70 * np.array([[1, -1], [-1, 1]]), atol=1e-12)
    np.testing.assert_allclose(_anticipated(tp, info, D, np.zeros(0, int), 1.0, None), np.diag([3.0, 1.0]),
                               atol=1e-12)


def test_anticipated_variance_matches_monte_carlo_under_the_surrogate_model() -> None:
    """Independent computation: labels y ~ p̄(·|x), Poisson sampling with the round's π; the difference
    estimate's error Σ_i (I_i/π_i − 1)(c_i − ĉ_i) has covariance Σ (1 − π)/π E[(c − ĉ)(c − ĉ)ᵀ] exactly.
    20,000 draws; tolerance 6 % of each diagonal entry (the Monte Carlo s.e. is about 1–2 %)."""
    rng = np.random.default_rng(5)
    N, ell = 40, 3
    P = rng.integers(0, 2, size=(N, ell))
    P[:, 0] = 1 - P[:, 1]  # every row a disagreement row
    p1 = rng.uniform(0.1, 0.9, N)
    tp = TargetPredictions(["a", "b", "c"], P, np.column_stack([1 - p1, p1]), np.array([0, 1]))
    info = {"round": 1, "n": 10, "labeled_before": [], "pair_weights": {"a|b": 1.0, "a|c": 2.0, "b|c": 0.5}}
    D = tp.disagreement
    chat = tp.right_proba(D)
    AV = _anticipated(tp, info, D, np.zeros(0, int), 1.0, chat)
    w = {(0, 1): 1.0, (0, 2): 2.0, (1, 2): 0.5}
    pi = inclusion_probabilities(_draw_distribution(tp, D, w), 10)
    reps = 20_000
    y = (rng.uniform(size=(reps, N)) < p1).astype(int)
    C = (P[None, :, :] == y[:, :, None]).astype(float)  # reps × N × ℓ
    drawn = rng.uniform(size=(reps, N)) < pi
    err = np.einsum("rn,rnj->rj", drawn / pi - 1, C - chat)
    mc = np.cov(err, rowvar=False)
    np.testing.assert_allclose(np.diag(mc), np.diag(AV), rtol=0.06)


def test_model_floor_hand_worked_and_tau_keeps_the_hansen_hurwitz_moments() -> None:
    """Four identical rows (predictions [0, 1], p̄(0) = 0.7), rows 0 and 1 drawn (π = 0.5) and both labeled 0:
    the residuals are equal, so the Hansen–Hurwitz variance is 0, and 'hh_model' gives the anticipated
    4 · 1 · 0.21 = 0.84 (counts²), 0.84/16 = 0.0525 on θ. τ² is the same as with 'hh' (its moments keep the
    Hansen–Hurwitz value); the posterior variance is larger."""
    P = np.tile([0, 1], (4, 1))
    tp = TargetPredictions(["a", "b"], P, np.tile([0.7, 0.3], (4, 1)), np.array([0, 1]))
    plan = LabelPlan(np.array([0, 1]), np.array([0.5, 0.5]), np.ones(2, int), 2, 4, ["a", "b"],
                     {"disagreement": tp.disagreement, "round_info": [_round_info(2, ["a", "b"])]})
    _, V_hh, _ = _label_estimate(tp, plan, {0: 0, 1: 0}, "difference", "hh")
    theta, V, info = _label_estimate(tp, plan, {0: 0, 1: 0}, "difference", "hh_model")
    np.testing.assert_allclose(V_hh, 0.0, atol=1e-15)
    np.testing.assert_allclose(V, 0.0525 * np.array([[1, -1], [-1, 1]]), atol=1e-12)
    np.testing.assert_allclose(info["_cov_moments"], V_hh, atol=1e-15)
    prior = (np.array([0.6, 0.65]), np.eye(2) * 1e-4, "cv")
    labels = {0: 0, 1: 0}
    e_hh = fewlabel_estimate(tp, plan, labels, prior, "difference", "hh")
    e_m = fewlabel_estimate(tp, plan, labels, prior, "difference", "hh_model")
    assert e_m.details["tau2"] == pytest.approx(e_hh.details["tau2"])
    d = np.array([1.0, -1.0])
    assert d @ e_m.cov @ d > d @ e_hh.cov @ d
    assert "_cov_moments" not in e_m.details



def test_candidates_with_the_same_batch_predictions_share_their_p_best():
    """Two copies of one model (a, b: the same predictions on the batch, contrast 0 up to rounding) against c,
    θ = (0.80, 0.80, 0.79), each with variance 10⁻⁴ and a, b fully correlated: P(a or b is the best) =
    Φ(0.01/√(2·10⁻⁴)) = Φ(0.707) = 0.760. Before, rounding noise split that between a and b at random (a
    chosen candidate could show 0.08 while its copy showed 0.26); now both show it, and a's and c's sum to 1."""
    from statistics import NormalDist

    from shiftlib.selection.fewlabel import _Estimate, _p_best

    v = 1e-4
    cov = np.array([[v, v, 0], [v, v, 0], [0, 0, v]]) + 1e-12 * np.eye(3)
    est = _Estimate(np.array([0.80, 0.80, 0.79]), cov, {})
    split = _p_best(est, np.random.default_rng(0))
    shared = _p_best(est, np.random.default_rng(0), same=np.array([0, 0, 2]))
    expected = NormalDist().cdf(0.01 / (2 * v) ** 0.5)
    assert shared[0] == shared[1] == pytest.approx(expected, abs=0.04)  # 2000 draws: MC s.d. 0.01
    assert shared[0] + shared[2] == pytest.approx(1.0)
    assert split[0] + split[1] == pytest.approx(shared[0]) and min(split[:2]) < shared[0] - 0.2  # the old split


def test_a_plan_that_draws_nothing_has_no_new_rows(data):
    """Continuing a plan whose disagreement rows are all labeled draws no round: new_rows is empty (it returned
    the last round's rows, already labeled), and the note says why; with no disagreement at all it says that."""
    Xs, ys, Xt, yt = data
    first = plan_labels(LEARNERS, Xs, ys, Xt, budget=len(Xt), random_state=0)  # every disagreement row
    assert len(first.new_rows) == len(first.rows) > 0
    again = plan_labels(LEARNERS, Xs, ys, Xt, budget=len(Xt), already_labeled=(first, yt[first.rows]), random_state=0)
    assert len(again.new_rows) == 0 and "labeled already" in again.details["note"]
    agree = plan_labels({"a": "NB", "b": "NB"}, Xs, ys, Xt, budget=5, random_state=0)
    assert len(agree.new_rows) == 0 and "same class on every batch row" in agree.details["note"]


# ----------------------------------------------------------------------------------------------------
# a served contender (the champion): compared, labels drawn where it disagrees, never chosen
# ----------------------------------------------------------------------------------------------------
@pytest.mark.heavy
def test_a_served_contender_is_planned_and_compared_but_never_chosen(data: tuple) -> None:
    Xs, ys, Xt, yt = data
    cands = target_predictions(LEARNERS, Xs, ys, Xt, random_state=0)
    # the "champion": right wherever the truth is class 1, wrong elsewhere — better than no candidate in order
    champ = np.where(yt == 1, 1, 1 - cands.predictions[:, 0])
    P = np.column_stack([cands.predictions, champ])
    tp = TargetPredictions([*LEARNERS, "champion v1"], P, cands.proba, cands.classes, served=("champion v1",))
    plan = plan_labels(LEARNERS, Xs, ys, Xt, budget=len(Xt), random_state=0, predictions=tp)
    assert set(np.flatnonzero(champ != cands.predictions[:, 0])) <= set(plan.rows)  # its disagreements too
    cv = source_cv(LEARNERS, Xs, ys, k=10, random_state=0)  # the prior cannot score the champion
    res = fewlabel_select(LEARNERS, Xs, ys, Xt, plan=plan, y_labeled=yt[plan.rows], prior=cv, random_state=0,
                          predictions=tp)
    assert list(res.scores.index) == LEARNERS and list(res.details["p_best"].index) == LEARNERS
    assert res.details["p_best"].sum() == pytest.approx(1.0)
    true = (P == yt[:, None]).mean(axis=0)
    # every disagreement row labeled with certainty: the champion's contrasts are exact, whatever the prior says
    served = res.details["served"]["champion v1"]
    assert served["accuracy"] - res.scores["NB"] == pytest.approx(true[3] - true[0], abs=1e-9)
    pb = res.details["p_better"]
    for j, n in enumerate(LEARNERS):
        assert pb.loc["champion v1", n] == (1.0 if true[3] > true[j] else 0.0 if true[3] < true[j] else 0.5)
    # a contender the prior lacks that is not named as served is still refused
    plain = TargetPredictions([*LEARNERS, "x"], P, cands.proba, cands.classes)
    plan2 = plan_labels(LEARNERS, Xs, ys, Xt, budget=len(Xt), random_state=0, predictions=plain)
    with pytest.raises(ValueError, match="no fold scores for every candidate"):
        fewlabel_select(LEARNERS, Xs, ys, Xt, plan=plan2, y_labeled=yt[plan2.rows], prior=cv, predictions=plain)


def test_a_served_contender_without_labels_keeps_the_uninformed_prior_variance(data: tuple) -> None:
    from shiftlib.selection.fewlabel import UNINFORMED_VAR, _prior

    Xs, ys, Xt, _ = data
    cv = source_cv(LEARNERS, Xs, ys, k=10, random_state=0)
    theta, cov, _ = _prior(cv, LEARNERS, Xs, ys, Xt, 0, [*LEARNERS, "s"], ("s",))
    assert theta[3] == pytest.approx(cv.scores[LEARNERS].mean()) and cov[3, 3] == UNINFORMED_VAR == 0.25
    assert np.all(cov[3, :3] == 0) and np.allclose(theta[:3], cv.scores[LEARNERS])


# ----------------------------------------------------------------------------------------------------
# side paths, worked by hand (issue 32): requested labels that never come back, labels given without a plan
# ----------------------------------------------------------------------------------------------------
def _side_batch() -> TargetPredictions:
    """6 rows, candidates a and b: they disagree on rows 0–3 (D) and both predict 1 on rows 4–5, whose mean
    probability of class 1 is 0.8."""
    P = np.array([[0, 1], [1, 0], [0, 1], [1, 0], [1, 1], [1, 1]])
    proba = np.array([[0.5, 0.5]] * 4 + [[0.2, 0.8]] * 2)
    return TargetPredictions(["a", "b"], P, proba, np.array([0, 1]))


def test_requested_labels_that_never_come_back_rescale_the_rounds_pi() -> None:
    from shiftlib.selection.fewlabel import _label_estimate

    tp = _side_batch()
    # one round asked for rows 0–3, each with π = 0.5; only rows 0 and 1 came back (labels 0 and 1: a right on both)
    plan = LabelPlan(np.array([0, 1, 2, 3]), np.full(4, 0.5), np.ones(4, int), 4, 6, ["a", "b"],
                     {"disagreement": tp.disagreement, "round_info": [{"round": 1, "labeled_before": []}]})
    theta, _, details = _label_estimate(tp, plan, {0: 0, 1: 1}, "ht", "hh")
    # π is scaled by the share answered (2 of 4): 0.25, so each labeled row counts 4 times; the common part is
    # p̄ of the shared class on rows 4–5: 0.8 + 0.8. θ_a = (1.6 + 1/0.25 + 1/0.25) / 6, θ_b = (1.6 + 0) / 6
    np.testing.assert_allclose(theta, [(1.6 + 8.0) / 6, 1.6 / 6])
    assert details["n_missing_requested"] == 2


def test_labels_without_a_plan_carry_the_finite_population_factor() -> None:
    from shiftlib.selection.fewlabel import _label_estimate

    tp = _side_batch()
    # m = 3 labels on rows no plan asked for (0, 1 and 4): a simple random sample of the N = 6 rows
    theta, cov, details = _label_estimate(tp, None, {0: 0, 1: 1, 4: 1}, "ht", "hh")
    # residuals on D: a is right on rows 0 and 1, row 4 is outside D → r_a = (1, 1, 0), r_b = (0, 0, 0)
    # estimate N·mean(r) = 6·2/3 = 4 for a, 0 for b; common part: row 4 labeled (both right: 1), row 5 p̄ 0.8
    np.testing.assert_allclose(theta, [(1.8 + 4.0) / 6, 1.8 / 6])
    # variance N²(1 − m/N)·s²/m with s²_a = var(1, 1, 0) = 1/3 (ddof 1): 36·(1/2)·(1/3)/3 = 2, over N² → 2/36
    np.testing.assert_allclose(cov, [[2.0 / 36, 0.0], [0.0, 0.0]], atol=1e-12)
    assert details["n_extra"] == 3


def _side_xy() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Source and target features for the public functions on ``_side_batch`` (the predictions are passed in,
    so the features are never fitted on; the target has its 6 rows)."""
    rng = np.random.default_rng(0)
    return rng.normal(size=(10, 2)), np.tile([0, 1], 5), rng.normal(size=(6, 2))


def test_unanswered_requests_through_plan_labels_and_fewlabel_select_hand_worked() -> None:
    """The public path. a and b disagree on rows 0–3 with p̄ = 0.5, so every draw weight is equal.
    Round 1 (budget 2) asks 2 of the 4 rows, π = 2/4 = 0.5 each; only the first comes back, labeled with a's
    class (c = [1, 0]). Round 2 (budget 3) draws 1 of the 2 rows never asked, π = 1/2, also labeled with a's class;
    the unanswered row of round 1 is not asked again and stands in as p̄ = [0.5, 0.5] in round 2's 'labeled before'.

    Horvitz–Thompson ('ht', the estimate is then the labels' alone: prior=None):
      round 1: 1 of 2 answered → π' = 0.5·1/2 = 0.25: E_1 = [1, 0]/0.25 = [4, 0]
      round 2: E_2 = c(answered) + p̄(unanswered) + c/π = [1, 0] + [0.5, 0.5] + [1, 0]/0.5 = [3.5, 0.5]
      rounds averaged by their labeled sizes (1, 1): s = [3.75, 0.25]; common part rows 4–5: 0.8 + 0.8 = 1.6
      θ = (1.6 + s)/6 = [5.35, 1.85]/6   (without the rescale E_1 = [2, 0] and θ_a = 4.35/6)
    Variance, one non-certain row per round: V_r = zzᵀ with z = r/π: z_1 = [4, 0], z_2 = [2, 0];
      V = (1/2)²·16 + (1/2)²·4 = 5 on a, 0 elsewhere; over N² = 36 (without the rescale: 2/36)."""
    Xs, ys, Xt = _side_xy()
    tp = _side_batch()
    kw = {"prior": None, "predictions": tp, "random_state": 3, "estimator": "ht"}
    p1 = plan_labels(["a", "b"], Xs, ys, Xt, budget=2, **kw)
    np.testing.assert_allclose(p1.probabilities, [0.5, 0.5])
    answered, unanswered = int(p1.rows[0]), int(p1.rows[1])
    y1 = np.array([tp.predictions[answered, 0], None], dtype=object)  # the second request never came back
    p2 = plan_labels(["a", "b"], Xs, ys, Xt, budget=3, already_labeled=(p1, y1), **kw)
    (new,) = p2.new_rows.tolist()
    assert new not in (answered, unanswered) and p2.probabilities[-1] == pytest.approx(0.5)
    labels = {answered: tp.predictions[answered, 0], new: tp.predictions[new, 0]}  # a right on both
    res = fewlabel_select(["a", "b"], Xs, ys, Xt, plan=p2, y_labeled=labels, prior=None, predictions=tp,
                          estimator="ht", variance="hh")
    np.testing.assert_allclose(res.scores.to_numpy(), np.array([5.35, 1.85]) / 6, atol=1e-12)
    np.testing.assert_allclose(res.details["cov"], [[5 / 36, 0.0], [0.0, 0.0]], atol=1e-12)
    assert res.details["n_missing_requested"] == 1 and res.details["n_labels"] == 2


def test_unanswered_requests_rescale_the_pi_of_the_model_floor_hand_worked() -> None:
    """variance='hh_model': the anticipated variance of a round uses the same rescaled π as its estimate.
    The 4-row example (P4, a and b disagree everywhere); the round asked rows 1 and 3 (π = 0.5) and only row 3
    came back, labeled 1 (c = [1, 0], ĉ = p̄(ŷ | x_3) = [0.9, 0.1], residual [0.1, −0.1]); π' = 0.5·1/2 = 0.25.
      estimate ('difference'): Σ_D ĉ = [3.0, 1.0], + [0.1, −0.1]/0.25 = [3.4, 0.6], θ = [0.85, 0.15]
      Hansen–Hurwitz, one row: z = [0.4, −0.4], V_hh = 0.16·[[1, −1], [−1, 1]]
      floor over the round's 4 rows: (1 − π')/π' = 3 times Σ p(1 − p) = 0.70 → 2.1·[[1, −1], [−1, 1]]
      Loewner maximum 2.1·[[1, −1], [−1, 1]], over N² = 16: 0.13125 (with π unscaled in the floor: 0.70/16)."""
    tp = TargetPredictions(["a", "b"], P4, PROBA4, np.array([0, 1]))
    plan = LabelPlan(np.array([1, 3]), np.array([0.5, 0.5]), np.ones(2, int), 2, 4, ["a", "b"],
                     {"disagreement": tp.disagreement, "round_info": [_round_info(2, ["a", "b"])]})
    theta, V, info = _label_estimate(tp, plan, {3: 1}, "difference", "hh_model")
    np.testing.assert_allclose(theta, [0.85, 0.15], atol=1e-12)
    np.testing.assert_allclose(V, 0.13125 * np.array([[1, -1], [-1, 1]]), atol=1e-12)
    np.testing.assert_allclose(info["_cov_moments"], 0.01 * np.array([[1, -1], [-1, 1]]), atol=1e-12)  # 0.16/16
    assert info["n_missing_requested"] == 1


def test_labels_without_a_plan_through_plan_labels_and_fewlabel_select_hand_worked() -> None:
    """The public path of the previous test: 3 labels given as a mapping (rows 0, 1, 4, no plan) become round 0
    with probability m/N = 3/6, and the selector's estimate and covariance are the hand-worked ones:
    θ = [(1.8 + 4)/6, 1.8/6], Var(θ_a) = N²(1 − m/N)s²/m / N² = 36·(1/2)·(1/3)/3 / 36 = 2/36."""
    Xs, ys, Xt = _side_xy()
    tp = _side_batch()
    labels = pd.Series({0: 0, 1: 1, 4: 1})
    plan = plan_labels(["a", "b"], Xs, ys, Xt, budget=3, already_labeled=labels, prior=None, predictions=tp,
                       random_state=0)
    assert plan.rows.tolist() == [0, 1, 4] and plan.rounds.tolist() == [0, 0, 0]
    np.testing.assert_allclose(plan.probabilities, 3 / 6)
    res = fewlabel_select(["a", "b"], Xs, ys, Xt, plan=plan, y_labeled=labels, prior=None, predictions=tp,
                          estimator="ht", variance="hh")
    np.testing.assert_allclose(res.scores.to_numpy(), [(1.8 + 4.0) / 6, 1.8 / 6], atol=1e-12)
    np.testing.assert_allclose(res.details["cov"], [[2.0 / 36, 0.0], [0.0, 0.0]], atol=1e-12)


def test_every_row_labeled_without_a_plan_is_a_census_with_zero_variance() -> None:
    """m = N: the labels are the whole batch, so the estimate is the exact accuracy and the finite-population
    factor 1 − m/N = 0 makes its variance 0 (residuals on D: a right on rows 0, 1, b on rows 2, 3, so s² > 0 and
    a variance without the factor would be N²·s²/m ≠ 0). Truth: a right on 0, 1, 4, 5 → 4/6; b on 2, 3, 4, 5 → 4/6."""
    tp = _side_batch()
    labels = {0: 0, 1: 1, 2: 1, 3: 0, 4: 1, 5: 1}
    for estimator in ("ht", "difference"):
        theta, cov, info = _label_estimate(tp, None, labels, estimator, "hh")
        np.testing.assert_allclose(theta, [4 / 6, 4 / 6], atol=1e-12)
        np.testing.assert_allclose(cov, 0.0, atol=1e-15)
        assert info["n_extra"] == 6


def test_the_shared_part_of_an_accuracy_has_the_binomial_variance_of_the_rows_where_all_agree():
    """``common_variance``: rows 0, 1, 2 are where A and B agree (row 1 labeled: exact, no variance), rows 3 and 4
    where they disagree (their variance is the labels'). By hand: p̄ of the common class is 0.9 on row 0 (class
    0) and 0.3 on row 2 (class 1): (0.9·0.1 + 0.3·0.7) / 5² = 0.012."""
    from shiftlib.selection.fewlabel import TargetPredictions, common_variance

    P = np.array([[0, 0], [1, 1], [1, 1], [0, 1], [1, 0]])
    proba = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.5, 0.5], [0.4, 0.6]])
    tp = TargetPredictions(["A", "B"], P, proba, np.array([0, 1]))
    assert common_variance(tp, {1: 1}) == pytest.approx((0.9 * 0.1 + 0.3 * 0.7) / 25, abs=1e-15)
    assert common_variance(tp, {0: 0, 1: 1, 2: 1}) == 0.0  # every shared row labeled: exact
    # a plan's own uniform draws (uniform_share) on rows 0 and 2 of the N_A = 3 shared rows: c − p̄ = 1 − 0.9 = 0.1
    # and 1 − 0.3 = 0.7, s² = 0.18 (ddof 1); N_A²(1 − 2/3)·0.18/2 / 5² = 9·(1/3)·0.09/25 = 0.0108, above the binomial
    # floor of row 1 left unlabeled (0.8·0.2/25 = 0.0064); the same labels given without such a plan: the floor
    plan = LabelPlan(np.array([0, 2]), np.full(2, 2 / 5), np.zeros(2, int), 2, 5, ["A", "B"],
                     {"disagreement": tp.disagreement, "round_info": [], "uniform": {"share": 0.2, "n": 2}})
    assert common_variance(tp, {0: 0, 2: 1}, plan) == pytest.approx(0.0108, abs=1e-12)
    assert common_variance(tp, {0: 0, 2: 1}) == pytest.approx(0.8 * 0.2 / 25, abs=1e-12)


def test_a_uniform_share_of_the_plan_measures_the_level_the_candidates_share_where_they_agree() -> None:
    """``uniform_share`` (UNIFORM_SHARE): 40 rows, a and b disagree on the first 20. Budget 10 at share 0.2: 8 rows
    drawn where they disagree (round 1) and round(0.2·10) = 2 uniformly from the other rows (round 0, π = 2/40).
    Then labels on every requested row, with the shared rows truly right on 2 of 20 although p̄ = 0.9 there (shift
    miscalibrates it): the shared part is Σ_A p̄ + N_A·mean(c − p̄) over the uniform draws in A, not Σ_A p̄."""
    from shiftlib.selection.fewlabel import UNIFORM_SHARE

    assert UNIFORM_SHARE == 0.0  # what ships until its trial's rule adopts a share
    N = 40
    P = np.array([[0, 1]] * 10 + [[1, 0]] * 10 + [[1, 1]] * 20)
    proba = np.array([[0.5, 0.5]] * 20 + [[0.1, 0.9]] * 20)
    tp = TargetPredictions(["a", "b"], P, proba, np.array([0, 1]))
    rng = np.random.default_rng(0)
    Xs, ys, Xt = rng.normal(size=(10, 2)), np.tile([0, 1], 5), rng.normal(size=(N, 2))
    plan = plan_labels(["a", "b"], Xs, ys, Xt, budget=10, prior=None, predictions=tp, random_state=0,
                       uniform_share=0.2)
    round0 = plan.rows[plan.rounds == 0]
    assert (plan.rounds == 1).sum() == 8 and np.all(plan.rows[plan.rounds == 1] < 20) and len(round0) == 2
    np.testing.assert_allclose(plan.probabilities[plan.rounds == 0], 2 / N)
    assert len(set(plan.rows.tolist())) == 10 and plan.details["uniform"] == {"share": 0.2, "n": 2}
    # the shared part, hand-worked: truth right on shared rows 20 and 21 only (Σ_A c = 2; Σ_A p̄ = 18)
    from shiftlib.selection.fewlabel import _common_part, _LabeledBatch

    truth = np.r_[np.zeros(20, int), np.where(np.arange(20) < 2, 1, 0)]
    lb = _LabeledBatch.of(tp, {i: int(truth[i]) for i in range(N)})
    assert _common_part(lb, [25, 30]) == pytest.approx(18 + 20 * (-0.9))  # m_A = 2, c − p̄ = −0.9 on both
    assert _common_part(lb, [3, 20, 25]) == pytest.approx(18 + 20 * (0.1 - 0.9) / 2)  # row 3 is in D: left out
    assert _common_part(lb, list(range(20, 40))) == pytest.approx(2.0)  # every shared row drawn: exact
    assert _common_part(lb, []) == pytest.approx(2.0)  # no uniform draw: exact where labeled (here, every row)
    assert _common_part(lb, [25]) == pytest.approx(2.0)  # one draw is not enough: as without (helper-38)
    # with UNIFORM_SHARE = 0 a label on a shared row that no plan asked for keeps its old reading (helper-38: one
    # such label had moved an accuracy from 0.901 to 0.095 with the interval unchanged)
    from shiftlib.selection.fewlabel import _plan_uniform

    assert _plan_uniform(plan, {int(i): 0 for i in plan.rows}) == sorted(int(i) for i in round0)
    no_share = LabelPlan(plan.rows[plan.rounds == 1], plan.probabilities[plan.rounds == 1],
                         plan.rounds[plan.rounds == 1], 8, N, ["a", "b"], {**plan.details, "uniform": None})
    assert _plan_uniform(no_share, {25: 0}) == [] and _plan_uniform(None, {25: 0}) == []
    with pytest.raises(ValueError, match="uniform_share must be in"):
        plan_labels(["a", "b"], Xs, ys, Xt, budget=10, prior=None, predictions=tp, uniform_share=1.0)

