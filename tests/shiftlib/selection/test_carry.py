"""Labels carried across batches (shiftlib.selection.carry): hand-worked estimates, the reduction to the plain
labeled mean, agreement with fewlabel's own label estimate when nothing shifts, unbiasedness over seeds with and
without a shift, the hand-over to plan_labels / fewlabel_select, and bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from shiftlib.selection import LabelPlan, SelectorScores, TargetPredictions, fewlabel_select, plan_labels
from shiftlib.selection.carry import carry_labels, prior_scores
from shiftlib.selection.fewlabel import _label_estimate, _prior

pytestmark = pytest.mark.usefixtures("one_blas_thread")

CONTRAST = np.array([1.0, -1.0])


def _opposed(n: int, p_a: list[float] | None = None) -> TargetPredictions:
    """n rows on which candidate a predicts 0 and b predicts 1 (they disagree on every row); p̄(0 | x) = p_a."""
    P = np.column_stack([np.zeros(n, int), np.ones(n, int)])
    pa = np.full(n, 0.5) if p_a is None else np.asarray(p_a, float)
    return TargetPredictions(["a", "b"], P, np.column_stack([pa, 1 - pa]), np.array([0, 1]))


def _xy(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, 2))


# ----------------------------------------------------------------------------------------------------
# hand-worked
# ----------------------------------------------------------------------------------------------------
def test_weights_one_and_uniform_labels_give_the_plain_labeled_mean_hand_worked() -> None:
    """N' = 8 rows yesterday, 3 labeled without a plan (rows 0, 3, 5 with labels 0, 1, 1), w ≡ 1, a and b disagree
    on every row of both batches (today: N = 6), so today's common part is 0 and θ_C is the plain mean of c:
    c_a = (1, 0, 0) → 1/3, c_b → 2/3. Covariance (contrast direction [[1, −1], [−1, 1]] since c_b = 1 − c_a):
      design, a simple random sample: N'²(1 − m/N') s²/m / N'² = (5/8)(1/3)/3 = 5/72   (s² = var(1, 0, 0) = 1/3)
      yesterday's batch: mean((c − 1/3)²)/N' = (2/9)/8 = 1/36
      today's batch: (E[c²] − E[c]²)/N = (1/3 − 1/9)/6 = 1/27."""
    c = carry_labels(_xy(8), _xy(6, 1), y_prev={0: 0, 3: 1, 5: 1}, plan_prev=None, predictions_prev=_opposed(8),
                     predictions=_opposed(6), weights=None, estimator="ht")
    np.testing.assert_allclose(c.theta, [1 / 3, 2 / 3], atol=1e-12)
    M = np.array([[1, -1], [-1, 1]])
    parts = c.details["cov_parts"]
    np.testing.assert_allclose(parts["design"], 5 / 72 * M, atol=1e-12)
    np.testing.assert_allclose(parts["yesterday"], 1 / 36 * M, atol=1e-12)
    np.testing.assert_allclose(parts["today"], 1 / 27 * M, atol=1e-12)
    np.testing.assert_allclose(c.cov, (5 / 72 + 1 / 36 + 1 / 27) * M, atol=1e-12)
    assert c.n_carried == 3 and c.ess == pytest.approx(3.0)
    # the difference estimator with p̄ = 0.5 everywhere: Σ ĝ = 4 per candidate, residuals (0.5, −0.5, −0.5) for a:
    # 4 + 8·(−1/6) = 8/3, over N' = 8: 1/3 again (the plain mean, as the surrogate is the same on every row)
    d = carry_labels(_xy(8), _xy(6, 1), y_prev={0: 0, 3: 1, 5: 1}, plan_prev=None, predictions_prev=_opposed(8),
                     predictions=_opposed(6), weights=None, estimator="difference")
    np.testing.assert_allclose(d.theta, [1 / 3, 2 / 3], atol=1e-12)


def test_importance_weights_and_a_plan_hand_worked() -> None:
    """Yesterday: 4 rows on which a and b disagree (P4 below), weights w = (0.5, 1.5, 1, 1)
    (mean 1), one round drew rows 0 and 2 with π = 0.5 and 0.8; row 0 is labeled a's class (c = [1, 0]), row 2 b's
    (c = [0, 1]). h = w·c: row 0 [0.5, 0], row 2 [0, 1].
      'ht': Ŝ = [0.5, 0]/0.5 + [0, 1]/0.8 = [1, 1.25], μ = Ŝ/4 = [0.25, 0.3125] (unweighted: [0.5, 0.3125]);
        Hansen–Hurwitz, draw probabilities π/2 = (0.25, 0.4): z = [2, 0], [0, 2.5], deviations ±[1, −1.25],
        V = [[1, −1.25], [−1.25, 1.5625]], over N'² = 16.
      'difference', p̄(ŷ) = (0.7, 0.6, 0.8, 0.9) for a, 1 − that for b: ĝ = w·p̄ = [0.35, 0.15], [0.9, 0.6],
        [0.8, 0.2], [0.9, 0.1], Σ = [2.95, 1.05]; residuals h − ĝ: [0.15, −0.15], [−0.8, 0.8];
        Ŝ = [2.95, 1.05] + [0.3, −0.3] + [−1, 1] = [2.25, 1.75], μ = [0.5625, 0.4375];
        z = [0.6, −0.6], [−2, 2], deviations ±1.3: V = 1.69·[[1, −1], [−1, 1]], over 16: 0.105625.
    Today (N = 3): rows 0, 1 disagree, row 2 both predict 1 with p̄(1) = 0.8: θ = 0.8/3 + μ."""
    P4 = np.array([[0, 1], [1, 0], [0, 1], [1, 0]])
    proba4 = np.array([[0.7, 0.3], [0.4, 0.6], [0.8, 0.2], [0.1, 0.9]])
    prev = TargetPredictions(["a", "b"], P4, proba4, np.array([0, 1]))
    today = TargetPredictions(["a", "b"], np.array([[0, 1], [1, 0], [1, 1]]),
                              np.array([[0.5, 0.5], [0.5, 0.5], [0.2, 0.8]]), np.array([0, 1]))
    plan = LabelPlan(np.array([0, 2]), np.array([0.5, 0.8]), np.ones(2, int), 2, 4, ["a", "b"],
                     {"disagreement": prev.disagreement, "round_info": [{"round": 1, "labeled_before": []}]})
    w = np.array([0.5, 1.5, 1.0, 1.0])
    kw = {"y_prev": [0, 1], "plan_prev": plan, "predictions_prev": prev, "predictions": today}
    ht = carry_labels(_xy(4), _xy(3, 1), weights=w, estimator="ht", **kw)
    np.testing.assert_allclose(ht.theta, 0.8 / 3 + np.array([0.25, 0.3125]), atol=1e-12)
    np.testing.assert_allclose(ht.details["cov_parts"]["design"], np.array([[1, -1.25], [-1.25, 1.5625]]) / 16,
                               atol=1e-12)
    flat = carry_labels(_xy(4), _xy(3, 1), weights=None, estimator="ht", **kw)
    np.testing.assert_allclose(flat.theta, 0.8 / 3 + np.array([0.5, 0.3125]), atol=1e-12)
    dm = carry_labels(_xy(4), _xy(3, 1), weights=w, estimator="difference", **kw)
    np.testing.assert_allclose(dm.theta, 0.8 / 3 + np.array([0.5625, 0.4375]), atol=1e-12)
    np.testing.assert_allclose(dm.details["cov_parts"]["design"], 0.105625 * np.array([[1, -1], [-1, 1]]),
                               atol=1e-12)
    assert ht.ess == pytest.approx((0.5 + 1.0) ** 2 / (0.25 + 1.0))  # Kish over the labeled rows


@pytest.mark.parametrize("estimator", ["ht", "difference"])
def test_with_weights_one_it_is_fewlabels_own_label_estimate_over_rounds_missing_and_unrequested(estimator: str
                                                                                                   ) -> None:
    """Independent computation: with w ≡ 1 and every row a disagreement row, the carried total Ŝ and its design
    variance are fewlabel's label estimate (``_label_estimate``, 'hh') of the same labels — over two rounds, with a
    requested label that never came back and labels given outside the plan."""
    n = 12
    rng = np.random.default_rng(3)
    pa = rng.uniform(0.2, 0.8, n)
    prev = _opposed(n, pa)
    y = rng.integers(0, 2, n)
    Xs, ys = _xy(10, 5), np.tile([0, 1], 5)
    p1 = plan_labels(["a", "b"], Xs, ys, _xy(n), budget=4, prior=None, predictions=prev, random_state=1)
    y1 = y[p1.rows].astype(object)
    y1[1] = None  # never came back
    extra = next(i for i in range(n) if i not in set(p1.rows.tolist()))
    already = {**{int(r): v for r, v in zip(p1.rows, y1, strict=True) if v is not None}, extra: int(y[extra])}
    p2 = plan_labels(["a", "b"], Xs, ys, _xy(n), budget=8, already_labeled=(p1, pd.Series(already)), prior=None,
                     predictions=prev, random_state=2)
    labels = {**already, **{int(r): int(y[r]) for r in p2.new_rows}}
    theta_L, V_L, info = _label_estimate(prev, p2, labels, estimator, "hh")
    assert info["n_missing_requested"] == 1 and info["n_extra"] == 1
    c = carry_labels(_xy(n), _xy(5, 1), y_prev=labels, plan_prev=p2, predictions_prev=prev, predictions=_opposed(5),
                     weights=None, estimator=estimator)
    np.testing.assert_allclose(c.theta, theta_L, atol=1e-12)  # today's common part is 0, as yesterday's
    np.testing.assert_allclose(c.details["cov_parts"]["design"], V_L, atol=1e-12)
    assert c.details["n_missing_requested"] == 1 and c.details["n_extra"] == 1


# ----------------------------------------------------------------------------------------------------
# properties over seeds
# ----------------------------------------------------------------------------------------------------
NAMES3 = ["a", "b", "c"]
D3 = np.array([[1, -1, 0], [1, 0, -1]])  # two contrasts


def _rules(X: np.ndarray) -> TargetPredictions:
    P = np.column_stack([X[:, 0] > 0, X[:, 1] > 0, X[:, 0] + X[:, 1] > 0.3]).astype(int)
    p1 = P.mean(axis=1)
    return TargetPredictions(NAMES3, P, np.column_stack([1 - p1, p1]), np.array([0, 1]))


def _labels(X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return (X[:, 0] + 0.5 * X[:, 1] + rng.normal(scale=0.7, size=len(X)) > 0).astype(int)


def _carried_errors(seeds: range, shift: np.ndarray, weights: str, n_prev: int = 120, n_today: int = 100,
                    budget: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """Per seed: yesterday's and today's batches (today shifted by ``shift``), yesterday's one-round plan and its
    labels, the carried contrasts' error against today's batch contrasts and their carried variance."""
    Xs, ys = _xy(10, 9), np.tile([0, 1], 5)
    errs, var = [], []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        Xp, Xt = rng.normal(size=(n_prev, 2)), rng.normal(size=(n_today, 2)) + shift
        yp, yt = _labels(Xp, rng), _labels(Xt, rng)
        tpp, tpt = _rules(Xp), _rules(Xt)
        plan = plan_labels(NAMES3, Xs, ys, Xp, budget=budget, prior=None, predictions=tpp, random_state=seed)
        w = {"oracle": np.exp(Xp @ shift), "none": None}.get(weights, weights)
        c = carry_labels(Xp, Xt, y_prev=yp[plan.rows], plan_prev=plan, predictions_prev=tpp, predictions=tpt,
                         weights=w, random_state=seed)
        truth = (tpt.predictions == yt[:, None]).mean(axis=0)
        errs.append(D3 @ (c.theta - truth))
        var.append(np.diag(D3 @ c.cov @ D3.T))
    return np.array(errs), np.array(var)


@pytest.mark.heavy
def test_no_shift_the_carried_contrasts_are_unbiased_and_their_variance_holds() -> None:
    """Yesterday's and today's batches from one distribution, w ≡ 1: over 400 seeds (batches, plan and labels
    drawn anew) the mean error of the carried contrasts against today's batch contrasts (computed from today's
    labels) is within 4 standard errors of 0, and the carried variance is at least 0.9 and at most 1.5 times the
    errors' variance (Hansen–Hurwitz is conservative for πps without replacement)."""
    errs, var = _carried_errors(range(400), np.zeros(2), "none")
    se = errs.std(axis=0) / np.sqrt(len(errs))
    assert np.all(np.abs(errs.mean(axis=0)) <= 4 * se)
    ratio = var.mean(axis=0) / errs.var(axis=0)
    assert np.all((ratio >= 0.9) & (ratio <= 1.5)), ratio


@pytest.mark.slow  # default-suite budget: 15–37 s each beside other work (--durations)
@pytest.mark.heavy
def test_under_a_covariate_shift_the_true_density_ratio_removes_the_bias() -> None:
    """Today's batch shifted by 0.8 along x₀ (p(y | x) unchanged). With the true ratio w(x) ∝ exp(0.8 x₀) the carried
    contrasts' mean error is within 4 standard errors plus 0.005 of 0 (the normalisation of w over yesterday's
    batch is a ratio estimator, bias O(1/N'); N' = 400), while without weights it is biased by more than 0.04
    on the first contrast."""
    shift = np.array([0.8, 0.0])
    errs, _ = _carried_errors(range(300), shift, "oracle", n_prev=400, budget=40)
    se = errs.std(axis=0) / np.sqrt(len(errs))
    assert np.all(np.abs(errs.mean(axis=0)) <= 4 * se + 0.005), (errs.mean(axis=0), se)
    flat, _ = _carried_errors(range(300), shift, "none", n_prev=400, budget=40)
    assert abs(flat.mean(axis=0)[0]) > 0.04 and abs(flat.mean(axis=0)[0]) > 5 * abs(errs.mean(axis=0)[0])


@pytest.mark.heavy
def test_the_default_discriminative_weights_come_close_to_the_true_ratio() -> None:
    """The default weights (DL eq. 7, a logistic domain classifier fitted on yesterday's vs today's batch) on the same
    shift, paired with the true ratio on the same draws (12 seeds): the carried contrasts' mean distance to the
    true ratio's is less than half the unweighted estimate's distance to it (0.037 against 0.087
    when written; the domain classifier's coefficient is estimated from 500 rows)."""
    shift = np.array([0.8, 0.0])
    seeds = range(12)
    disc, _ = _carried_errors(seeds, shift, "discriminative", n_prev=400, budget=40)
    oracle, _ = _carried_errors(seeds, shift, "oracle", n_prev=400, budget=40)
    flat, _ = _carried_errors(seeds, shift, "none", n_prev=400, budget=40)
    assert np.abs(disc - oracle)[:, 0].mean() < np.abs(flat - oracle)[:, 0].mean() / 2


# ----------------------------------------------------------------------------------------------------
# the hand-over to fewlabel
# ----------------------------------------------------------------------------------------------------
def test_prior_scores_encode_the_mean_and_covariance_exactly() -> None:
    rng = np.random.default_rng(0)
    for ell in (2, 3, 5):
        A = rng.normal(size=(ell, ell))
        cov = A @ A.T / 100
        cov[0] = cov[:, 0] = 0  # singular too
        theta = rng.uniform(0.6, 0.9, ell)
        names = [f"m{j}" for j in range(ell)]
        res = prior_scores("carried", names, theta, cov)
        t, V, sel = _prior(res, None, None, None, None, None, names)
        np.testing.assert_allclose(t, theta, atol=1e-12)
        np.testing.assert_allclose(V, cov, atol=1e-12)
        assert sel == "carried"


def test_fewlabel_select_without_new_labels_returns_the_carried_estimate_and_plan_labels_accepts_it() -> None:
    """No label today: fewlabel_select's posterior is its prior, so the scores are θ_C and the contrast variance
    is θ_C's plus the τ floor (0.01², fewlabel.TAU_FLOOR)."""
    c = carry_labels(_xy(8), _xy(6, 1), y_prev={0: 0, 3: 1, 5: 1}, plan_prev=None, predictions_prev=_opposed(8),
                     predictions=_opposed(6), weights=None)
    Xs, ys, Xt = _xy(10, 5), np.tile([0, 1], 5), _xy(6, 1)
    plan = plan_labels(["a", "b"], Xs, ys, Xt, budget=2, prior=c.as_prior(), predictions=_opposed(6), random_state=0)
    res = fewlabel_select(["a", "b"], Xs, ys, Xt, plan=plan, y_labeled=[None, None], prior=c.as_prior(),
                          predictions=_opposed(6))
    np.testing.assert_allclose(res.scores.to_numpy(), c.theta, atol=1e-12)
    assert CONTRAST @ res.details["cov"] @ CONTRAST == pytest.approx(CONTRAST @ c.cov @ CONTRAST + 2 * 0.01 ** 2)


def test_a_source_prior_is_combined_between_the_two() -> None:
    """Two candidates: the combined contrast is a convex combination of the prior's and the carried one (GLS of
    two estimates of one number), and its variance is below both."""
    kw = {"y_prev": {0: 0, 3: 1, 5: 1}, "plan_prev": None, "predictions_prev": _opposed(8),
          "predictions": _opposed(6), "weights": None}
    alone = carry_labels(_xy(8), _xy(6, 1), **kw)
    cv = prior_scores("cv", ["a", "b"], [0.8, 0.7], np.diag([0.002, 0.002]))
    both = carry_labels(_xy(8), _xy(6, 1), prior=cv, **kw)
    d_alone, d_cv, d_both = CONTRAST @ alone.theta, 0.1, CONTRAST @ both.theta
    assert min(d_alone, d_cv) < d_both < max(d_alone, d_cv)
    v_both = CONTRAST @ both.cov @ CONTRAST
    assert v_both < CONTRAST @ alone.cov @ CONTRAST and v_both < 0.004 + both.details["tau2"] * 2
    assert 0 < both.details["prior_weight"] < 1


# ----------------------------------------------------------------------------------------------------
# bad input: one line each, naming the problem and the fix
# ----------------------------------------------------------------------------------------------------
def _frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    return pd.DataFrame(_xy(8), columns=["age", "income"]), pd.DataFrame(_xy(6, 1), columns=["age", "income"])


def _carry(**over: object) -> object:
    Xp, Xt = _frames()
    kw = {"y_prev": {0: 0, 3: 1, 5: 1}, "plan_prev": None, "predictions_prev": _opposed(8),
          "predictions": _opposed(6), "weights": None, **over}
    return carry_labels(kw.pop("X_prev", Xp), kw.pop("X_target", Xt), **kw)


@pytest.mark.parametrize(("over", "match"), [
    ({"X_target": pd.DataFrame(_xy(6, 1), columns=["age", "salary"])},
     r"another schema .*only in source: \['income'\].*same input columns"),
    ({"X_prev": _xy(8)[:, :1], "X_target": _xy(6, 1)}, r"another schema .*same input columns"),
    ({"keys_prev": list("abcdefgh"), "keys_target": list("xyzuvh")},
     r"row keys \['h'\] \(1 in all\) are in yesterday's batch and in today's.*drop those rows from one batch"),
    ({"keys_prev": list("abcdefga"), "keys_target": list("stuvwx")},
     r"yesterday's batch repeats row keys \['a'\].*each row needs its own key"),
    ({"keys_prev": list("abcdefgh")}, "row keys were given for only one batch"),
    ({"predictions_prev": _opposed(7)}, "predictions cover 7 and 6 rows but the batches have 8 and 6"),
    ({"y_prev": {0: 0, 3: 2}}, r"label\(s\) \[2\] never occur"),
    ({"y_prev": {0: None}}, "y_prev holds no label"),
    ({"estimator": "mean"}, "estimator='mean' is not known"),
])
def test_bad_input_is_refused_in_one_line(over: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match) as err:
        _carry(**over)
    assert "\n" not in str(err.value)


def test_other_candidates_or_a_plan_that_could_not_reach_their_disagreements_are_refused() -> None:
    other = TargetPredictions(["a", "c"], _opposed(8).predictions, _opposed(8).proba, np.array([0, 1]))
    with pytest.raises(ValueError, match="predicted by \\['a', 'c'\\] but today's by \\['a', 'b'\\]"):
        _carry(predictions_prev=other)
    # yesterday's plan drew from rows 0–3 only (its candidates disagreed there); today's disagree on all 8
    plan = LabelPlan(np.array([0, 2]), np.array([0.5, 0.5]), np.ones(2, int), 2, 8, ["a", "b"],
                     {"disagreement": np.arange(4), "round_info": [{"round": 1, "labeled_before": []}]})
    with pytest.raises(ValueError, match="disagree on 4 rows of yesterday's batch where yesterday's plan could not"):
        _carry(plan_prev=plan, y_prev=[0, 1])
    with pytest.raises(TypeError, match="prior must be None or a k-fold SelectorScores"):
        _carry(prior="cv")
    assert isinstance(_carry().as_prior(), SelectorScores)
