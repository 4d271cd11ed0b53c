"""shiftlib.regime: the class-weighted AUC worked by hand and against scikit-learn's weighted AUC, the regime rule,
its rates on simulated no shift / label shift / covariate shift, and the refusals of bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import roc_auc_score
from threadpoolctl import threadpool_limits

from shiftlib.drift import domain_classifier_test
from shiftlib.estimation import estimate_from_predictions, label_shift_prior, stored_predictions
from shiftlib.regime import REGIMES, shift_regime, weighted_auc

# the hand-built case: source scores 0.1, 0.4, 0.7 of classes 0, 1, 1 (π_s = 1/3, 2/3); target scores 0.2, 0.4,
# 0.9; π_t = 2/3, 1/3, so w = π_t/π_s = 2 for class 0 and 1/2 for class 1: weights 2, ½, ½ (W = 3)
S, Y, T = np.array([0.1, 0.4, 0.7]), np.array([0, 1, 1]), np.array([0.2, 0.4, 0.9])
PI_T = np.array([2 / 3, 1 / 3])


def test_the_weighted_auc_and_its_variance_by_hand() -> None:
    """U_i (share of target rows above source row i, ties ½) = 1, (1 + ½)/3 = ½, 1/3: A = (2·1 + ½·½ + ½·⅓)/3 =
    29/36 (unweighted (1 + ½ + ⅓)/3 = 11/18). V_j (weighted share of source rows below target row j) = 2/3, (2 +
    ½·½)/3 = 3/4, 1: S²(V) = ((5² + 2² + 7²)/36²)/2 = 39/1296, over n_t = 3: 13/1296. Source term: (w/W)² = 4/9,
    1/36, 1/36 and U − A = 7/36, −11/36, −17/36: Σ = (16·49 + 121 + 289)/(36·1296) = 1194/46656, times
    n_s/(n_s − 1) = 3/2: 1791/46656. Var = 468/46656 + 1791/46656 = 2259/46656."""
    w = np.array([2.0, 0.5, 0.5])
    res = weighted_auc(S, T, w)
    assert res.auc == pytest.approx(29 / 36, abs=1e-12)
    assert res.se == pytest.approx(math.sqrt(2259 / 46656), abs=1e-12)
    assert res.p_value == pytest.approx(2 * stats.norm.sf((29 / 36 - 0.5) / math.sqrt(2259 / 46656)), abs=1e-12)
    assert weighted_auc(S, T).auc == pytest.approx(11 / 18, abs=1e-12)
    # the weights the regime takes: π_t/π_s with π_s the classes' shares of the source rows (1/3, 2/3)
    g = shift_regime(S, T, Y, PI_T, domain_pvalue=0.01)
    assert g.weighted_auc == pytest.approx(29 / 36, abs=1e-12) and g.domain_auc == pytest.approx(11 / 18, abs=1e-12)
    assert g.source_prior == pytest.approx((1 / 3, 2 / 3)) and g.target_prior == pytest.approx((2 / 3, 1 / 3))
    # the flipped ratio π_s/π_t (weights ½, 2, 2) gives (½·1 + 2·½ + 2·⅓)/4.5 = 13/27, not 29/36
    assert weighted_auc(S, T, np.array([0.5, 2.0, 2.0])).auc == pytest.approx(13 / 27, abs=1e-12)
    # the p-value 0.165 ≥ 0.05: label shift explains the shift the domain test found; without that finding, neither
    assert g.weighted_pvalue == pytest.approx(res.p_value) and 0.16 < g.weighted_pvalue < 0.17
    assert g.regime == "label"
    assert shift_regime(S, T, Y, PI_T, domain_pvalue=0.05).regime == "neither"  # p ≥ alpha
    assert shift_regime(S, T, Y, PI_T, domain_pvalue=0.01, alpha=0.2).regime == "covariate"  # 0.165 < 0.2


def _delong_var(s: np.ndarray, t: np.ndarray) -> float:
    """DeLong, DeLong & Clarke-Pearson (1988) variance, written from the paper with explicit loops."""
    psi = np.array([[1.0 if tj > si else 0.5 if tj == si else 0.0 for tj in t] for si in s])
    v10, v01 = psi.mean(axis=1), psi.mean(axis=0)  # source and target structural components
    return float(np.var(v10, ddof=1) / len(s) + np.var(v01, ddof=1) / len(t))


def test_the_weighted_auc_equals_sklearns_and_unit_weights_give_delongs_variance() -> None:
    rng = np.random.default_rng(7)
    s, t = np.round(rng.normal(size=40), 1), np.round(rng.normal(0.5, 1, size=30), 1)  # rounded: ties
    w = rng.integers(0, 4, size=40).astype(float)
    auc = roc_auc_score(np.r_[np.zeros(40), np.ones(30)], np.r_[s, t], sample_weight=np.r_[w, np.ones(30)])
    assert weighted_auc(s, t, w).auc == pytest.approx(auc, abs=1e-12)
    plain = weighted_auc(s, t)
    assert plain.auc == pytest.approx(roc_auc_score(np.r_[np.zeros(40), np.ones(30)], np.r_[s, t]), abs=1e-12)
    assert plain.se ** 2 == pytest.approx(_delong_var(s, t), rel=1e-10)
    # integer weights are repeated rows: the AUC of the replicated source (its variance differs: rows are not new data)
    assert weighted_auc(s, t, w).auc == pytest.approx(weighted_auc(np.repeat(s, w.astype(int)), t).auc, abs=1e-12)


def _gaussian_mixture(rng: np.random.Generator, n: int, prior: float) -> tuple[np.ndarray, np.ndarray]:
    """Two classes in 5 dimensions, the class-1 mean shifted by 1 along the first two axes."""
    y = (rng.random(n) < prior).astype(int)
    X = rng.normal(size=(n, 5))
    X[:, :2] += y[:, None]
    return X, y


def _case(kind: str, seed: int, n: int = 600) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Source: n rows with π_s(1) = ½. Target: the same mixture ("none"); class 1 subsampled to π_t(1) = 0.2
    ("label": p(x|y) kept); rows selected with P(keep) = σ(2(x₂ − ½)) from the mixture ("covariate": x₂ carries no
    class information, so the class prior stays ½ and p(x|y) changes)."""
    rng = np.random.default_rng(seed)
    X_s, y_s = _gaussian_mixture(rng, n, 0.5)
    if kind == "none":
        return X_s, y_s, _gaussian_mixture(rng, n, 0.5)[0]
    if kind == "label":
        return X_s, y_s, _gaussian_mixture(rng, n, 0.2)[0]
    X_p, _ = _gaussian_mixture(rng, 4 * n, 0.5)
    keep = rng.random(len(X_p)) < 1 / (1 + np.exp(-2 * (X_p[:, 2] - 0.5)))
    return X_s, y_s, X_p[keep][:n]


def _regimes(kind: str, seeds: int = 50) -> tuple[list[str], list[float], list[float]]:
    """The regime of each seed from the pipeline's own parts: the drift stage's domain test (ridge, 10 folds, 200
    permutations), logistic regression's stored predictions (5 folds) and their EM target prior."""
    out, dom_auc, w_auc = [], [], []
    with threadpool_limits(1):
        for seed in range(seeds):
            X_s, y_s, X_t = _case(kind, seed)
            dom = domain_classifier_test(X_s, X_t, n_permutations=200, random_state=seed)
            P = stored_predictions("LR", X_s, y_s, X_t, need_weights=False, k=5, random_state=seed)[0]
            g = shift_regime(dom.scores_source, dom.scores_target, P.y_source, label_shift_prior(P, "em"),
                             domain_pvalue=dom.p_value)
            assert g.domain_auc == pytest.approx(dom.auc, abs=1e-12)  # the same AUC, computed twice
            if dom.p_value >= 0.05:
                assert g.regime == "neither"
            out.append(g.regime)
            dom_auc.append(g.domain_auc)
            w_auc.append(g.weighted_auc)
    return out, dom_auc, w_auc


@pytest.mark.heavy
def test_no_shift_is_neither() -> None:
    """Measured: 49 of 50 seeds "neither" (the one other is the domain test's 5 % false alarm)."""
    regimes, _, _ = _regimes("none")
    assert regimes.count("neither") >= 45, regimes


@pytest.mark.heavy
def test_pure_label_shift_is_label() -> None:
    """π(1) ½ → 0.2 with p(x|y) kept. Measured: 49 of 50 seeds "label"; the domain AUC (about 0.60) falls to about
    0.50 once the source rows are weighted by π_t/π_s. Unweighted, or weighted by the flipped ratio π_s/π_t, the
    AUC stays far from ½ and the regime would be "covariate"."""
    regimes, dom_auc, w_auc = _regimes("label")
    assert regimes.count("label") >= 45, regimes
    assert np.mean(dom_auc) > 0.57 and abs(np.mean(w_auc) - 0.5) < 0.01


@pytest.mark.heavy
def test_covariate_shift_is_covariate() -> None:
    """Rows selected on a feature that carries no class information. Measured: 50 of 50 seeds "covariate"."""
    regimes, dom_auc, w_auc = _regimes("covariate")
    assert regimes.count("covariate") >= 45, regimes
    assert np.mean(w_auc) > 0.6 and np.mean(dom_auc) > 0.6


def test_the_prior_is_the_one_the_em_estimate_uses() -> None:
    """label_shift_prior is the prior method ``em`` reports (``details['prior_target_1']``)."""
    X_s, y_s, X_t = _case("label", 0)
    with threadpool_limits(1):
        P = stored_predictions("LR", X_s, y_s, X_t, need_weights=False, k=5, random_state=0)[0]
        e = estimate_from_predictions(P, "em", n_boot=2, random_state=0)
    pi = label_shift_prior(P, "em")
    assert pi[1] == pytest.approx(e.details["prior_target_1"], abs=1e-12) and pi.sum() == pytest.approx(1.0)
    assert 0.1 < pi[1] < 0.3  # the true 0.2
    with pytest.raises(ValueError, match="method 'cbpe' estimates no target prior"):
        label_shift_prior(P, "cbpe")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"y_source": [0, 1]}, "y_source has 2 labels for 3 source scores"),
    ({"y_source": [1, 1, 1]}, "y_source has 1 class"),
    ({"y_source": [0, 1, 2]}, "y_source must hold class positions 0..1"),
    ({"source_prior": [0.2, 0.3, 0.5]}, "source_prior has 3 classes and target_prior 2"),
    ({"target_prior": [0.5, 0.6]}, "must be ≥ 2 non-negative class shares summing to 1"),
    ({"target_scores": []}, "target_scores is empty"),
    ({"source_scores": [0.1, np.nan, 0.7]}, "source_scores has NaN"),
    ({"domain_pvalue": 1.5}, "domain_pvalue=1.5 must be a p-value"),
    ({"alpha": 0.0}, "alpha=0.0 must be in"),
])
def test_bad_input_is_refused_in_one_line(kwargs: dict, message: str) -> None:
    args = {"source_scores": S, "target_scores": T, "y_source": Y, "target_prior": PI_T, "domain_pvalue": 0.01}
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")) as err:
        shift_regime(**(args | kwargs))
    assert "\n" not in str(err.value)


def test_weights_of_the_wrong_length_are_refused() -> None:
    with pytest.raises(ValueError, match="weights has 2 entries for 3 source scores"):
        weighted_auc(S, T, [1.0, 2.0])
    assert set(REGIMES) == {"neither", "label", "covariate"}
