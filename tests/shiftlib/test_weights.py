"""Importance-weight estimators: shared base, discriminative (DL eq. 7), SSB (DL Prop. 2), KDE, oracle."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import cdist
from scipy.special import expit
from scipy.stats import spearmanr
from sklearn.base import clone
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.neighbors import KNeighborsClassifier

from shiftlib.weights import (
    KMM,
    WEIGHTERS,
    DiscriminativeWeights,
    KDEWeights,
    OracleWeights,
    SSBWeights,
    WeightsUnavailableError,
    effective_sample_size,
    make_weighter,
    median_heuristic_gamma,
    mmd2,
    normalize_weights,
    shared_kernel,
)
from shiftlib.weights.discriminative import default_domain_classifier


def _shift_1d(m: int, mt: int, mu_t: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Source N(0, 1), target N(mu_t, 1), as column vectors."""
    rng = np.random.default_rng(seed)
    return rng.normal(0.0, 1.0, size=(m, 1)), rng.normal(mu_t, 1.0, size=(mt, 1))


def _analytic_ratio(x: np.ndarray, mu_t: float) -> np.ndarray:
    # N(x; mu_t, 1) / N(x; 0, 1) = exp(mu_t·x − mu_t²/2) (ratio of the two Gaussian densities)
    return np.exp(mu_t * x - mu_t**2 / 2)


# --------------------------------------------------------------------------------------------------
# shared helpers
# --------------------------------------------------------------------------------------------------


def test_effective_sample_size_by_hand() -> None:
    # (Σw)²/Σw² for w = [1, 2, 3, 4]: 10² / 30 (docs/architecture.md "Importance weights")
    assert effective_sample_size([1, 2, 3, 4]) == pytest.approx(100 / 30, rel=1e-15)
    # scale-free: normalizing to mean 1 ([0.4, 0.8, 1.2, 1.6]) does not change it
    np.testing.assert_allclose(normalize_weights([1, 2, 3, 4]), [0.4, 0.8, 1.2, 1.6], rtol=1e-15)
    assert effective_sample_size([0.4, 0.8, 1.2, 1.6]) == pytest.approx(100 / 30, rel=1e-15)


def test_median_heuristic_by_hand() -> None:
    # points 0, 1, 3: squared distances 1, 9, 4 → median 4 → gamma = 1/4
    assert median_heuristic_gamma(np.array([[0.0], [1.0], [3.0]])) == pytest.approx(0.25, rel=1e-15)


def test_weighted_mmd_matches_a_direct_computation() -> None:
    # independent computation with scipy's cdist: ‖Σ w_i φ(x_i)/m − Σ φ(x'_j)/m'‖² (KMM §3)
    rng = np.random.default_rng(0)
    Xs, Xt = rng.normal(size=(9, 2)), rng.normal(loc=0.5, size=(6, 2))
    w = rng.uniform(0.1, 3.0, size=9)
    kern = shared_kernel(Xs, Xt)
    Zs, Zt = kern.transform(Xs), kern.transform(Xt)

    def k(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.exp(-kern.gamma * cdist(a, b, "sqeuclidean"))

    wn = w / w.mean()
    direct = wn @ k(Zs, Zs) @ wn / 81 - 2 * wn @ k(Zs, Zt).sum(axis=1) / 54 + k(Zt, Zt).sum() / 36
    assert mmd2(Xs, Xt, w) == pytest.approx(direct, rel=1e-12)
    assert mmd2(Xs, Xs) == pytest.approx(0.0, abs=1e-14)


def test_input_errors_name_the_problem() -> None:
    X = np.zeros((5, 3)) + np.arange(3)
    with pytest.raises(ValueError, match="target set has 0 rows"):
        DiscriminativeWeights().fit(X, X[:0])
    with pytest.raises(ValueError, match="X_source has 3 columns but X_target has 2"):
        DiscriminativeWeights().fit(X, X[:, :2])
    with pytest.raises(ValueError, match="1-d"):
        KDEWeights().fit(np.arange(5.0), np.arange(5.0))
    bad = X.copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="X_target has 1 missing"):
        KMM().fit(X, bad)
    dfs = pd.DataFrame({"age": [1.0, 2.0, 3.0], "city": ["a", "b", "c"]})
    with pytest.raises(ValueError, match="column 'city' of X_source is .*not numeric"):
        KMM().fit(dfs, dfs)
    with pytest.raises(ValueError, match=r"only in source: \['b'\], only in target: \['c'\]"):
        KMM().fit(pd.DataFrame({"a": [1.0, 2], "b": [3.0, 4]}), pd.DataFrame({"a": [1.0, 2], "c": [3.0, 4]}))


@pytest.mark.parametrize("name", ["kmm", "discriminative", "ssb", "kde", "oracle"])
def test_bad_input_gets_a_clear_error_from_every_estimator(name: str) -> None:
    # issue: a different column count, NaN, m < 2, all rows identical (zero median distance)
    rng = np.random.default_rng(15)
    Xs, Xt = rng.normal(size=(40, 3)), rng.normal(size=(30, 3))

    def fit(A: np.ndarray, B: np.ndarray) -> object:
        extra = {"selection_proba": np.full(len(A), 0.5)} if name == "oracle" else {}
        return make_weighter(name).fit(A, B, **extra)

    with pytest.raises(ValueError, match="X_source has 3 columns but X_target has 2"):
        fit(Xs, Xt[:, :2])
    bad = Xt.copy()
    bad[4, 2] = np.nan
    with pytest.raises(ValueError, match="X_target has 1 missing or infinite values .*column 2"):
        fit(Xs, bad)
    with pytest.raises(ValueError, match="source set has 1 row"):
        fit(Xs[:1], Xt)
    same = np.tile(Xs[:1], (25, 1))
    with pytest.raises(ValueError, match="all rows are identical"):
        fit(same, same)


def test_dataframe_columns_are_aligned_by_name() -> None:
    rng = np.random.default_rng(1)
    Xs, Xt = rng.normal(size=(80, 2)), rng.normal(loc=0.4, size=(70, 2))
    arr = KDEWeights().fit(Xs, Xt)
    df = KDEWeights().fit(pd.DataFrame(Xs, columns=["u", "v"]), pd.DataFrame(Xt[:, ::-1], columns=["v", "u"]))
    np.testing.assert_allclose(df.weights_, arr.weights_, rtol=1e-12)
    np.testing.assert_array_equal(df.feature_names_in_, ["u", "v"])


# --------------------------------------------------------------------------------------------------
# correctness against a known density ratio (issue: Spearman ≥ 0.8 on 1-D and 5-D Gaussian shifts)
# --------------------------------------------------------------------------------------------------


def _gaussian_shift(design: str, d: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(X_source, X_target, log true ratio log p_t/p_s at the source rows, P(s=1|x) or None); m = m' ≈ 1000.

    "mean": source N(0, I_d), target N(μ, I_d) with μ = 1/√d·(1, …, 1) (‖μ‖ = 1, so both dimensions are
    equally hard): log ratio μᵀx − ‖μ‖²/2. "kmm41": KMM §4.1's N(0.5, 0.5²) → N(0, 0.3²) in every
    coordinate (a quadratic log ratio). "selection": target = the population N(0, I_d); the source keeps
    each of 2,000 population rows with P(s=1|x) = exp(−‖x − μ‖²/2), so it is N(μ/2, I_d/2) and the ratio is
    ∝ 1/P(s=1|x) — the one design where the oracle's P(s=1|x) exists.
    """
    rng = np.random.default_rng(seed)
    mu = np.ones(d) / np.sqrt(d)
    if design == "mean":
        Xs, Xt = rng.normal(size=(1000, d)), rng.normal(size=(1000, d)) + mu
        return Xs, Xt, Xs @ mu - mu @ mu / 2, None
    if design == "kmm41":
        Xs, Xt = rng.normal(0.5, 0.5, size=(1000, d)), rng.normal(0.0, 0.3, size=(1000, d))
        log_t = -0.5 * np.sum(Xs**2, axis=1) / 0.09 - d * np.log(0.3)
        log_s = -0.5 * np.sum((Xs - 0.5) ** 2, axis=1) / 0.25 - d * np.log(0.5)
        return Xs, Xt, log_t - log_s, None
    pool, Xt = rng.normal(size=(2000, d)), rng.normal(size=(1000, d))
    p = np.exp(-0.5 * np.sum((pool - mu) ** 2, axis=1))
    keep = rng.uniform(size=2000) < p
    return pool[keep], Xt, -np.log(p[keep]), p[keep]


#: seeds of the Spearman test: five per case, median asserted. KMM's tie-break (shiftlib.weights.kmm,
#: _TIE_RIDGES/_TIE_TOL) was chosen from the objective tolerance of the issue (1e-6) and measurements on
#: seeds 0–9, not on these seeds.
_RANK_SEEDS = (0, 10, 20, 30, 40)
_KNOWN_SHORT = {
    # measured on _RANK_SEEDS with the defaults (Spearman per seed, median); recorded, not tuned away
    ("kmm", "mean", 1): "eq. 12's optimum puts the mass on the few source rows under the target's tail: "
    "rho 1.00, 0.99, 0.52, 0.24, 0.16 (median 0.52). On seeds 0-9 a ridge that ranks at >= 0.8 cost "
    "2e-6..4e-4 of the objective (8-61% of the optimal MMD²) where the tie-break's 1e-6 did not reach",
    ("kmm", "mean", 5): "eq. 12's β is sparse (75% exact zeros): rho 0.27, 0.21, 0.23, 0.25, 0.22 (median 0.23)",
    ("kmm", "kmm41", 5): "eq. 12's β is sparse (97% exact zeros): rho 0.19, 0.08, 0.19, 0.20, 0.11 (median 0.19)",
    ("kde", "mean", 5): "5-d KDE ratio with Silverman bandwidths is too smooth/noisy in the tails: "
    "rho 0.68, 0.62, 0.73, 0.70, 0.70 (median 0.70)",
}
# the KMM cases cost 6-16 s each (one QP per seed): the passing ones run with the slow tests, so the default
# suite keeps its 10-minute budget (CI, stop 34: 640 s); the strict xfails stay in it, they are cheap
_SLOW = {("kmm", "kmm41", 1)}
_CASES = [
    pytest.param(
        name, design, d,
        marks=([pytest.mark.xfail(strict=True, reason=_KNOWN_SHORT[(name, design, d)])]
               if (name, design, d) in _KNOWN_SHORT else [])
        + ([pytest.mark.slow] if (name, design, d) in _SLOW else []),
        id=f"{name}-{design}-{d}d",
    )
    for design in ("mean", "kmm41")
    for d in (1, 5)
    for name in ("kmm", "discriminative", "ssb", "kde")
] + [pytest.param("oracle", "selection", d, id=f"oracle-selection-{d}d") for d in (1, 5)]


@pytest.mark.heavy
@pytest.mark.parametrize(("name", "design", "d"), _CASES)
def test_weights_rank_like_the_true_density_ratio(name: str, design: str, d: int) -> None:
    # Spearman ρ(weights, true p_t/p_s) with every estimator's defaults on five seeds; the MEDIAN must be
    # ≥ 0.8 (one seed is luck: KMM's 1-d "mean" case ranges from 0.16 to 1.00). Values printed (-s)
    rhos, zeros = [], []
    for k in _RANK_SEEDS:
        Xs, Xt, log_ratio, p = _gaussian_shift(design, d, seed=100 + d + k)
        fit_params = {"selection_proba": p} if name == "oracle" else {}
        w = make_weighter(name).fit(Xs, Xt, **fit_params).weights_
        rhos.append(float(spearmanr(w, log_ratio).statistic))
        zeros.append(float(np.mean(w == 0)))
    rho = float(np.median(rhos))
    print(f"\nSpearman {name:>14} {design:>9} d={d}: median rho = {rho:.3f} over seeds {[100 + d + k for k in _RANK_SEEDS]}: "
          + ", ".join(f"{r:.3f}" for r in rhos) + f" (m ≈ 1000, zero weights {np.mean(zeros):.0%})")
    assert rho >= 0.8


# --------------------------------------------------------------------------------------------------
# discriminative weights (DL eq. 7)
# --------------------------------------------------------------------------------------------------


@pytest.mark.heavy
def test_discriminative_matches_the_analytic_density_ratio() -> None:
    # source N(0,1), target N(1,1): logistic regression on x is the correct model (log-odds
    # log p_s/p_t = 1/2 − x, linear), so DL eq. 7 — with its m/m' prior, before normalization —
    # should reproduce the ratio exp(x − 1/2) itself, not just up to a constant
    Xs, Xt = _shift_1d(2000, 2000, 1.0, seed=2)
    est = DiscriminativeWeights(random_state=0).fit(Xs, Xt)
    truth = _analytic_ratio(Xs[:, 0], 1.0)
    assert np.corrcoef(est.raw_weights_, truth)[0, 1] > 0.99
    ratio = est.raw_weights_ / truth
    assert np.median(ratio) == pytest.approx(1.0, abs=0.06)
    assert np.quantile(ratio, 0.1) > 0.85 and np.quantile(ratio, 0.9) < 1.15
    # E_source[p_t/p_s] = 1, so the raw eq.-7 weights (with the m/m' prior) average ≈ 1
    assert est.raw_weights_.mean() == pytest.approx(1.0, abs=0.05)


@pytest.mark.heavy
def test_discriminative_direction_weights_target_dense_regions_up() -> None:
    # target to the right of the source: p_t/p_s grows with x, so w(2) ≫ w(−2) (exp(2·1) vs exp(−2·1)
    # analytically: a factor e⁴ ≈ 55). The reciprocal (a known peer bug) would invert this.
    Xs, Xt = _shift_1d(1000, 1000, 1.0, seed=3)
    est = DiscriminativeWeights().fit(Xs, Xt)
    w_right, w_left = est.predict_weights(np.array([[2.0], [-2.0]]))
    assert w_right / w_left == pytest.approx(np.exp(4.0), rel=0.25)
    # and the weights increase with x across the source rows (rank correlation)
    assert spearmanr(est.weights_, Xs[:, 0]).statistic > 0.99


@pytest.mark.heavy
def test_discriminative_prior_ratio_uses_row_counts() -> None:
    # m = 600 source rows, m' = 1800 target rows: eq. 7 with p(σ=1)/p(σ=0) = 600/1800, by hand from the
    # stored out-of-fold probabilities; and E_source[w] ≈ 1 only with the prior the right way round
    Xs, Xt = _shift_1d(600, 1800, 0.7, seed=4)
    est = DiscriminativeWeights().fit(Xs, Xt)
    q = est.proba_source_
    np.testing.assert_allclose(est.raw_weights_, (600 / 1800) * (1 / q - 1), rtol=1e-12)
    assert est.raw_weights_.mean() == pytest.approx(1.0, abs=0.08)


def test_discriminative_probabilities_are_out_of_fold() -> None:
    # a 1-NN classifier scores every training row perfectly in-sample (all weights would be 0);
    # out of fold it must equal an independent cross_val_predict with the same folds
    Xs, Xt = _shift_1d(200, 200, 0.5, seed=5)
    knn = KNeighborsClassifier(n_neighbors=15)
    est = DiscriminativeWeights(knn, cv=4, clip=0.01, random_state=11).fit(Xs, Xt)
    X = np.vstack([Xs, Xt])
    sigma = np.r_[np.ones(200), np.zeros(200)].astype(int)
    folds = StratifiedKFold(n_splits=4, shuffle=True, random_state=11)
    expected = cross_val_predict(knn, X, sigma, cv=folds, method="predict_proba")[:200, 1]
    np.testing.assert_allclose(est.proba_source_, expected, rtol=0, atol=0)
    in_sample = KNeighborsClassifier(n_neighbors=1).fit(X, sigma).predict_proba(Xs)[:, 1]
    assert np.all(in_sample == 1.0)  # why in-sample scoring would be useless
    # clip = 0.01 bounds the raw weights by (m/m')(1/0.01 − 1) = 99
    assert est.raw_weights_.max() <= 99.0 + 1e-12


@pytest.mark.heavy
def test_discriminative_predict_weights_uses_the_refit_classifier() -> None:
    Xs, Xt = _shift_1d(500, 400, 0.8, seed=6)
    est = DiscriminativeWeights().fit(Xs, Xt)
    q = est.classifier_.predict_proba(Xs)[:, 1]
    np.testing.assert_allclose(est.predict_weights(Xs), (500 / 400) * (1 / q - 1) / est.norm_, rtol=1e-12)
    # refit vs out-of-fold: the same estimate up to fold noise
    assert np.corrcoef(est.predict_weights(Xs), est.weights_)[0, 1] > 0.99


@pytest.mark.heavy
def test_same_distribution_gives_weights_near_one() -> None:
    # no shift: p_t/p_s = 1, so an estimator that does not overfit gives weights ≈ 1 (high ESS)
    rng = np.random.default_rng(7)
    Xs, Xt = rng.normal(size=(1000, 2)), rng.normal(size=(1000, 2))
    for est in (DiscriminativeWeights(), KDEWeights()):
        w = est.fit(Xs, Xt).weights_
        assert effective_sample_size(w) / 1000 > 0.85, type(est).__name__
        assert np.median(np.abs(w - 1)) < 0.15, type(est).__name__
    assert DiscriminativeWeights().fit(Xs, Xt).domain_auc_ == pytest.approx(0.5, abs=0.05)


@pytest.mark.heavy
@pytest.mark.parametrize("name", ["kmm", "discriminative", "ssb", "kde"])
def test_every_estimator_reduces_mmd_on_a_shift(name: str) -> None:
    rng = np.random.default_rng(8)
    Xs, Xt = rng.normal(size=(400, 2)), rng.normal(loc=0.7, size=(300, 2))
    est = make_weighter(name).fit(Xs, Xt)
    assert est.mmd2_after_ < 0.5 * est.mmd2_before_
    assert est.weights_.mean() == pytest.approx(1.0, abs=1e-12)
    assert est.ess_ == pytest.approx(effective_sample_size(est.weights_), rel=1e-15)
    # every estimator measures with the same kernel on the same data
    assert est.kernel_.gamma == shared_kernel(Xs, Xt).gamma


# --------------------------------------------------------------------------------------------------
# SSB (DL Prop. 2) and oracle weights
# --------------------------------------------------------------------------------------------------


def _selection(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pool N(0,1); P(s=1|x) = expit(−0.5 + 1.5x) (DL eq. 1). Returns selected, unselected, p, mask."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 1))
    p = expit(-0.5 + 1.5 * x[:, 0])
    s = rng.uniform(size=n) < p
    return x[s], x[~s], p[s], s


@pytest.mark.heavy
def test_ssb_on_unselected_rows_recovers_the_selection_model() -> None:
    # target = the rows not selected: the classifier learns P(s=1|x) itself (logistic, correctly
    # specified), so the weights approach the oracle 1/P(s=1|x) (DL Prop. 2)
    sel, unsel, p, _ = _selection(4000, seed=9)
    est = SSBWeights(target_rows="unselected").fit(sel, unsel)
    oracle = OracleWeights().fit(sel, unsel, selection_proba=p)
    assert np.max(np.abs(est.selection_proba_ - p)) < 0.05
    assert np.corrcoef(est.weights_, oracle.weights_)[0, 1] > 0.98
    # diagnostics compare against the pool (selected ∪ unselected), which the weights target
    assert est.mmd2_after_ < 0.2 * est.mmd2_before_


@pytest.mark.heavy
def test_ssb_population_mode_is_the_shrunk_discriminative_ratio() -> None:
    # algebra (module docstring): 1/q = 1 + (m'/m)·d with d the raw eq.-7 weight, so the normalized SSB
    # weights are λ + (1 − λ)·w_disc with λ = 1/(1 + (m'/m)·mean(d)) ≈ m/(m + m')
    Xs, Xt = _shift_1d(800, 400, 0.8, seed=10)
    ssb = SSBWeights().fit(Xs, Xt)
    disc = DiscriminativeWeights().fit(Xs, Xt)
    lam = 1 / (1 + (400 / 800) * disc.norm_)
    np.testing.assert_allclose(ssb.weights_, lam + (1 - lam) * disc.weights_, rtol=1e-10)
    assert lam == pytest.approx(800 / 1200, abs=0.05)


def test_ssb_given_probabilities_equal_oracle_and_cannot_predict() -> None:
    sel, unsel, p, _ = _selection(500, seed=11)
    ssb = SSBWeights().fit(sel, unsel, selection_proba=p)
    np.testing.assert_allclose(ssb.weights_, OracleWeights().fit(sel, unsel, selection_proba=p).weights_)
    with pytest.raises(WeightsUnavailableError, match="given selection probabilities"):
        ssb.predict_weights(sel)


def test_oracle_weights_by_hand() -> None:
    # p = [0.5, 0.25, 1, 0.2] → 1/p = [2, 4, 1, 5], mean 3 → [2/3, 4/3, 1/3, 5/3]; ESS = 12²/46
    X = np.arange(8.0).reshape(4, 2)
    est = OracleWeights().fit(X, X + 0.5, selection_proba=[0.5, 0.25, 1.0, 0.2])
    np.testing.assert_allclose(est.weights_, [2 / 3, 4 / 3, 1 / 3, 5 / 3], rtol=1e-15)
    assert est.ess_ == pytest.approx(144 / 46, rel=1e-14)
    with pytest.raises(ValueError, match=r"must lie in \(0, 1\]"):
        OracleWeights().fit(X, X, selection_proba=[0.5, 0.0, 1.0, 0.2])
    with pytest.raises(ValueError, match="one probability per source row"):
        OracleWeights().fit(X, X, selection_proba=[0.5, 0.5])
    with pytest.raises(TypeError, match="needs selection_proba"):
        OracleWeights().fit(X, X)
    with pytest.raises(WeightsUnavailableError):
        est.predict_weights(X)


# --------------------------------------------------------------------------------------------------
# KDE ratio (Shimodaira 2000)
# --------------------------------------------------------------------------------------------------


@pytest.mark.heavy
def test_kde_ratio_tracks_the_analytic_ratio() -> None:
    Xs, Xt = _shift_1d(2000, 2000, 1.0, seed=12)
    est = KDEWeights().fit(Xs, Xt)
    truth = normalize_weights(_analytic_ratio(Xs[:, 0], 1.0))
    assert np.corrcoef(est.weights_, truth)[0, 1] > 0.9
    # inside the bulk of both densities (|x − 1/2| < 1) the KDE ratio is within 15% of the truth
    bulk = np.abs(Xs[:, 0] - 0.5) < 1.0
    assert np.median(np.abs(est.weights_[bulk] / truth[bulk] - 1)) < 0.15
    # predict_weights evaluates the same two KDEs: identical on the source rows
    np.testing.assert_allclose(est.predict_weights(Xs), est.weights_, rtol=1e-12)


def test_kde_refuses_high_dimension() -> None:
    X = np.random.default_rng(13).normal(size=(100, 6))
    with pytest.raises(ValueError, match="6 features exceed max_dim=5"):
        KDEWeights().fit(X, X)
    w = KDEWeights(max_dim=6).fit(X, X + 0.1).weights_
    assert w.shape == (100,) and w.mean() == pytest.approx(1.0, abs=1e-12) and np.all(w > 0)  # mean-1 convention


# --------------------------------------------------------------------------------------------------
# registry and scikit-learn idioms
# --------------------------------------------------------------------------------------------------


def test_registry_names_and_factory() -> None:
    assert set(WEIGHTERS) == {"kmm", "discriminative", "ssb", "kde", "oracle"}
    est = make_weighter("kmm", B=5.0, chunk_size=100)
    assert isinstance(est, KMM) and est.B == 5.0 and est.chunk_size == 100
    with pytest.raises(KeyError, match="unknown weighter 'kmn'"):
        make_weighter("kmn")


@pytest.mark.parametrize(
    "est",
    [
        KMM(B=5.0, eps=0.1, solver="cvxpy", chunk_size=100, random_state=3),
        DiscriminativeWeights(default_domain_classifier(), cv=3, clip=0.01, random_state=4),
        SSBWeights(target_rows="unselected", cv=3, random_state=5),
        KDEWeights(bw_method="scott", max_dim=3),
        OracleWeights(),
    ],
)
def test_clone_and_get_params_round_trip(est: object) -> None:
    copy = clone(est)
    a, b = est.get_params(deep=False), copy.get_params(deep=False)  # type: ignore[attr-defined]
    assert a.keys() == b.keys()
    for key in a:
        if key == "classifier" and a[key] is not None:
            assert type(a[key]) is type(b[key]) and a[key] is not b[key]
        else:
            assert a[key] == b[key], key
    if a:
        first = next(iter(a))
        copy.set_params(**{first: a[first]})  # type: ignore[attr-defined]


@pytest.mark.heavy
def test_fits_are_reproducible_from_the_seed() -> None:
    Xs, Xt = _shift_1d(300, 300, 0.5, seed=14)
    w1 = DiscriminativeWeights(random_state=1).fit(Xs, Xt).weights_
    w2 = DiscriminativeWeights(random_state=1).fit(Xs, Xt).weights_
    w3 = DiscriminativeWeights(random_state=2).fit(Xs, Xt).weights_
    np.testing.assert_array_equal(w1, w2)
    assert not np.array_equal(w1, w3)


def test_weights_caution_by_hand() -> None:
    from shiftlib.weights import LOW_ESS_SHARE, weights_caution

    assert LOW_ESS_SHARE == 0.01
    assert weights_caution(ess=50.0, n=1000, mmd2_before=0.2, mmd2_after=0.05) is None  # 5 % of rows, MMD² lowered
    low = weights_caution(ess=9.9, n=1000, mmd2_before=0.2, mmd2_after=0.05)  # under 1 % of 1000 rows
    assert low is not None and "effective 9.9 of 1000" in low and "MMD²" not in low
    worse = weights_caution(ess=500.0, n=1000, mmd2_before=0.2, mmd2_after=0.2)  # not lowered
    assert worse is not None and "MMD² 0.2 → 0.2" in worse and "effective" not in worse
