"""TrCV (Zhong et al. ECML'10): reverse validation (Fig. 1), the weighted loss (Fig. 3), the accuracy
interval (eq. 15) and P(ε(f1) > ε(f2)) (eq. 16), against hand-worked numbers and properties; and the folds as independent jobs (the flow fans them out)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.naive_bayes import GaussianNB

from shiftlib.selection import (
    Candidate,
    accuracy_distribution,
    accuracy_interval,
    probability_better,
    reverse_validation_fold,
    trcv,
    trcv_assemble,
    trcv_fold,
    trcv_scores,
    trcv_select,
    trcv_setup,
)
from tests.shiftlib.selection.conftest import fanout_problem

pytestmark = pytest.mark.usefixtures("one_blas_thread")


from tests.shiftlib.selection._stubs import BinMajority  # noqa: E402  (the same stub as ReverseTesting's tests)

# ---------------------------------------------------------------- eq. 15 and eq. 16, by hand
# z = Φ⁻¹(0.975) = 1.959963985, z² = 3.841458821.  n = 100, ε_u = 0.8:
#   2nε + z² = 163.841459; 4nε + z² − 4nε² = 320 + 3.841459 − 256 = 67.841459, √ = 8.236593,
#   z·√ = 16.143425; 2(n + z²) = 207.682918  ⇒  low = 147.698034/207.682918 = 0.711171,
#   high = 179.984884/207.682918 = 0.866633;  μ = 0.788902, σ = 0.077731.
# ε_u = 0.7: 2nε + z² = 143.841459; 280 + 3.841459 − 196 = 87.841459, √ = 9.372377, z·√ = 18.369522
#   ⇒ low = 0.604151, high = 0.781051; μ = 0.692601, σ = 0.088450.
# eq. 16: (μ2 − μ1)/√(σ1² + σ2²) = −0.096301/√(0.0060421 + 0.0078234) = −0.096301/0.117752 = −0.817827
#   ⇒ P = 1 − Φ(−0.817827) = 0.793272.


def test_eq15_interval_by_hand():
    lo, hi = accuracy_interval(0.8, 100, 0.95)
    assert lo == pytest.approx(0.711171, abs=1e-6)
    assert hi == pytest.approx(0.866633, abs=1e-6)
    lo, hi = accuracy_interval(0.7, 100, 0.95)
    assert (lo, hi) == pytest.approx((0.604151, 0.781051), abs=1e-6)


def test_eq15_equals_the_wilson_score_interval_written_independently():
    # Wilson (1927): (p̂ + z²/2n ± z·√(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n) — algebraically eq. 15.
    z = 2.5758293035489004  # Φ⁻¹(0.995)
    for p, n in [(0.3, 17), (0.95, 400), (0.0, 12), (1.0, 50)]:
        c = (p + z * z / (2 * n)) / (1 + z * z / n)
        h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        assert accuracy_interval(p, n, 0.99) == pytest.approx((c - h, c + h), abs=1e-12)


def test_eq16_probability_by_hand():
    mu, sigma = accuracy_distribution(0.8, 100, 0.95)
    assert (mu, sigma) == pytest.approx((0.788902, 0.077731), abs=1e-6)
    assert probability_better(0.8, 0.7, n=100, confidence=0.95) == pytest.approx(0.793272, abs=1e-6)
    # symmetry: P(f1 > f2) + P(f2 > f1) = 1, and equal estimates give 1/2
    assert probability_better(0.7, 0.8, n=100, confidence=0.95) == pytest.approx(1 - 0.793272, abs=1e-6)
    assert probability_better(0.8, 0.8, n=100, confidence=0.95) == pytest.approx(0.5)


# ---------------------------------------------------------------- Fig. 1, by hand
# S: x = 0..7, y = 1 1 1 0 0 0 1 1; U: x = 1.5, 3.5, 5.5; learner bins x<2 | 2≤x<6 | x≥6.
# Hold out S_i = rows {0, 3, 6}. f_i on rows {1,2,4,5,7}: bins {1}→1, {1,0,0}→0, {1}→1
#   ⇒ Ȳ_u = [1, 0, 0]. f̄_i on U: {1}→1, {0,0}→0, empty → overall 1/3 → 0
#   ⇒ ȳ on S_i (x = 0, 3, 6) = 1, 0, 0 vs y = 1, 0, 1 ⇒ r = [0, 0, 1].
# With one labeled target row L = {(6.5, 1)}: f̄_i's last bin is {1} → 1 ⇒ ȳ(6) = 1 ⇒ r = [0, 0, 0].
X_S = np.arange(8.0).reshape(-1, 1)
Y_S = np.array([1, 1, 1, 0, 0, 0, 1, 1])
X_U = np.array([[1.5], [3.5], [5.5]])


def test_fig1_reverse_validation_by_hand():
    cand = Candidate("A", BinMajority((2.0, 6.0)))
    fr = reverse_validation_fold(cand, X_S, Y_S, np.array([0, 3, 6]), X_U)
    assert fr.r.tolist() == [0.0, 0.0, 1.0]
    assert fr.n_fits == 2
    fr_l = reverse_validation_fold(cand, X_S, Y_S, np.array([0, 3, 6]), X_U,
                                   X_labeled=np.array([[6.5]]), y_labeled=np.array([1]))
    assert fr_l.r.tolist() == [0.0, 0.0, 0.0]


def test_fig3_loss_is_the_beta_weighted_mean_of_r_and_eq14_accuracy():
    beta_raw = np.array([1, 1, 2, 2, 1, 1, 4, 4], dtype=float)  # mean 2 ⇒ normalised β = raw / 2
    res = trcv(BinMajority((2.0, 6.0)), X_S, Y_S, X_U, weights=beta_raw, k=2, random_state=0)
    np.testing.assert_allclose(res.weights, beta_raw / 2)
    # Fig. 3: loss = Σ β(x) r(x) / n, with r from Fig. 1 on each fold (recomputed below).
    r = np.empty(8)
    for i in range(2):
        hold = np.flatnonzero(res.folds == i)
        r[hold] = reverse_validation_fold(Candidate("A", BinMajority((2.0, 6.0))), X_S, Y_S, hold, X_U).r
    np.testing.assert_array_equal(res.residuals, r)
    assert res.loss == pytest.approx(np.sum(beta_raw / 2 * r) / 8)
    assert res.accuracy == pytest.approx(1 - res.loss)  # eq. 14 with α = 0
    assert res.interval == pytest.approx(accuracy_interval(res.accuracy, 8, 0.95))
    # 2 folds × (f_i, f̄_i), except that a fold whose pseudo labels have one class gets a constant f̄_i
    assert res.n_fits == 4 - res.n_constant_folds


def _fig1_reference(X, y, folds, X_u, X_l=None, y_l=None):
    """Fig. 1 written directly with scikit-learn's GaussianNB (independent of shiftlib)."""
    r = np.empty(len(y))
    for i in np.unique(folds):
        hold, train = folds == i, folds != i
        pseudo = GaussianNB().fit(X[train], y[train]).predict(X_u)
        Xn, yn = (X_u, pseudo) if X_l is None else (np.vstack([X_u, X_l]), np.concatenate([pseudo, y_l]))
        r[hold] = GaussianNB().fit(Xn, yn).predict(X[hold]) != y[hold]
    return r


@st.composite
def _shift_problem(draw):
    seed = draw(st.integers(0, 10_000))
    n_s = draw(st.integers(12, 30))
    n_t = draw(st.integers(4, 20))
    n_l = draw(st.integers(0, 4))
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_s, 2))
    y = np.r_[np.zeros(6, int), np.ones(6, int), rng.integers(0, 2, n_s - 12)]
    X[:, 0] += 1.5 * y
    X_u = rng.normal(loc=0.7, size=(n_t, 2))
    X_l = rng.normal(loc=0.7, size=(n_l, 2)) if n_l else None
    y_l = rng.integers(0, 2, n_l) if n_l else None
    return X, y, X_u, X_l, y_l, seed


@pytest.mark.heavy
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_shift_problem())
def test_property_trcv_with_unit_weights_is_reverse_validation(problem):
    # TrCV Fig. 3 with β ≡ 1 and no labeled target rows is the mean of Fig. 1's r(x) over all folds.
    X, y, X_u, X_l, y_l, seed = problem
    res = trcv("NB", X, y, X_u, weights=None, k=3, random_state=seed)
    ref = _fig1_reference(X, y, res.folds, X_u)
    np.testing.assert_array_equal(res.residuals, ref)
    assert res.loss == pytest.approx(ref.mean())
    assert set(res.folds) == {0, 1, 2}  # every source row is held out exactly once
    if X_l is not None:  # labeled target rows join f̄_i's training set (Fig. 1 step 3)
        res_l = trcv("NB", X, y, X_u, X_target_labeled=X_l, y_target_labeled=y_l, weights=None, k=3,
                     random_state=seed)
        np.testing.assert_array_equal(res_l.residuals, _fig1_reference(X, y, res_l.folds, X_u, X_l, y_l))


class _FirstFeatureRatio:
    """Stand-in for a shiftlib.weights estimator: weights_ = 1 + 1[x0 > 0] (normalised by TrCV)."""

    def fit(self, X_source, X_target):
        self.seen_target_rows_ = len(X_target)
        self.weights_ = 1.0 + (np.asarray(X_source)[:, 0] > 0)
        return self


def test_weights_from_an_estimator_are_fitted_on_source_vs_all_target_rows_and_normalised():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 2))
    y = (X[:, 0] + 0.3 * rng.normal(size=30) > 0).astype(int)
    X_u, X_l, y_l = rng.normal(size=(10, 2)), rng.normal(size=(4, 2)), np.array([0, 1, 0, 1])
    res = trcv("NB", X, y, X_u, X_target_labeled=X_l, y_target_labeled=y_l, weights=_FirstFeatureRatio(),
               k=3, random_state=0)
    raw = 1.0 + (X[:, 0] > 0)
    np.testing.assert_allclose(res.weights, raw / raw.mean())
    assert res.weights.mean() == pytest.approx(1.0)
    assert res.loss == pytest.approx(np.sum(res.weights * res.residuals) / 30)
    assert res.n_labeled_target == 4


def test_trcv_select_scores_rank_and_eq16_between_learners():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(60, 3))
    y = (X[:, 0] - X[:, 1] > 0).astype(int)
    X_u = rng.normal(loc=0.5, size=(40, 3))
    sel = trcv_select(["NB", "DT"], X, y, X_u, weights=None, k=5, random_state=1)
    nb, dt = sel.details["results"]["NB"], sel.details["results"]["DT"]
    assert sel.scores.to_dict() == {"NB": nb.accuracy, "DT": dt.accuracy}
    assert (nb.folds == dt.folds).all()  # one fold split shared by all learners
    p = nb.probability_better_than(dt)
    assert p == pytest.approx(probability_better(nb.accuracy, dt.accuracy, n=60, confidence=0.95))
    assert (p > 0.5) == (nb.accuracy > dt.accuracy)
    frame = sel.to_frame().set_index("learner")
    assert frame.loc["NB", "interval_low"] == pytest.approx(nb.interval[0])
    assert sel.n_fits == 2 * 5 * 2


def test_kmm_default_uses_shiftlib_weights():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    y = (X[:, 0] > 0).astype(int)
    res = trcv("NB", X, y, rng.normal(loc=0.5, size=(30, 2)), k=4, random_state=0)
    assert res.weights.mean() == pytest.approx(1.0) and np.all(res.weights >= 0)
    assert res.loss == pytest.approx(np.sum(res.weights * res.residuals) / 40)


def test_clear_errors():
    with pytest.raises(ValueError, match="k=20 folds but only 8 source rows"):
        trcv("NB", X_S, Y_S, X_U, weights=None, k=20)
    with pytest.raises(ValueError, match="pass both X_target_labeled and y_target_labeled"):
        trcv("NB", X_S, Y_S, X_U, X_target_labeled=X_U, weights=None, k=2)
    with pytest.raises(ValueError, match="importance weights has shape"):
        trcv("NB", X_S, Y_S, X_U, weights=np.ones(5), k=2)
    with pytest.raises(ValueError, match="confidence must be in"):
        trcv("NB", X_S, Y_S, X_U, weights=None, k=2, confidence=95)


def test_trcv_given_a_list_says_it_scores_one_learner():
    with pytest.raises(TypeError, match="trcv scores one learner.*trcv_select"):
        trcv(["LR", "NB"], X_S, Y_S, X_U)


@pytest.mark.heavy
def test_trcv_folds_assemble_to_the_one_call_result() -> None:
    # put back together, the folds give exactly the one-call result — the same numbers, not just the same winner
    # (property: the pieces are the same fits on the same rows, only scheduled differently)
    X_s, y_s, X_t, cands = fanout_problem()
    beta = np.random.default_rng(1).uniform(0.2, 3.0, size=len(y_s))
    whole = trcv_select(cands, X_s, y_s, X_t, weights=beta, k=5, random_state=3)
    setup = trcv_setup(cands, X_s, y_s, X_t, weights=beta, k=5, random_state=3)
    by_fold = [{c.name: trcv_fold(c, setup, i) for c in cands} for i in reversed(range(5))][::-1]
    results = {c.name: trcv_assemble(c.name, setup, [f[c.name] for f in by_fold]) for c in cands}
    pieces = trcv_scores([c.name for c in cands], setup, results, {})
    pd.testing.assert_frame_equal(pieces.to_frame(), whole.to_frame())
    for c in cands:
        np.testing.assert_array_equal(results[c.name].residuals, whole.details["results"][c.name].residuals)
    assert pieces.n_fits == whole.n_fits
    with pytest.raises(ValueError, match="needs all 5 folds of 'LR'"):
        trcv_assemble("LR", setup, [by_fold[0]["LR"]])
    with pytest.raises(ValueError, match="fold 5 does not exist"):
        trcv_fold(cands[0], setup, 5)
