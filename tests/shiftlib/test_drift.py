"""Tests for shiftlib.drift — domain classifier, MMD², per-feature tests and the DriftReport.

Sources of the numbers checked: formulas worked by hand (comments), independent computations (full
kernel matrices, scikit-learn Ridge fits, scipy), properties (exactness of permutation p-values,
monotone Holm), and — slow-marked — the empirical false-positive rate over 300 no-shift splits of
breast_cancer and the power against RT §3.1 and KMM §4.2.1 biases over 100 seeds.
"""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from scipy import stats
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import KFold
from threadpoolctl import threadpool_limits

from shiftlib.bias import split_biased
from shiftlib.drift import (
    adjust_pvalues,
    detect_drift,
    domain_classifier_test,
    feature_tests,
    mmd_permutation_test,
    plot_drift,
    psi,
)


@pytest.fixture(scope="module", autouse=True)
def _one_blas_thread():
    # the machine is shared: multi-threaded BLAS under contention made small fits ~30x slower
    with threadpool_limits(1):
        yield


@pytest.fixture(scope="module")
def cancer() -> tuple[pd.DataFrame, np.ndarray]:
    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    return X, y.to_numpy()


# ------------------------------------------------------------------------------------------------
# multiple testing and PSI, by hand
# ------------------------------------------------------------------------------------------------


def test_holm_and_bh_by_hand() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    # Holm: sorted 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 → running max 0.06
    assert np.allclose(adjust_pvalues(p, "holm"), [0.03, 0.06, 0.06, 0.02])
    # BH: p·m/rank = 0.02, 0.02, 0.04, 0.04 (already monotone)
    assert np.allclose(adjust_pvalues(p, "bh"), [0.02, 0.04, 0.04, 0.02])
    # NaN (not testable) stays NaN and does not count toward m: Holm of [0.02, NaN] = [0.02]
    out = adjust_pvalues([0.02, np.nan], "holm")
    assert out[0] == pytest.approx(0.02) and math.isnan(out[1])


def test_holm_properties_random() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        p = rng.random(rng.integers(1, 40))
        adj = adjust_pvalues(p, "holm")
        assert np.all(adj >= p) and np.all(adj <= 1)  # never smaller than raw, capped at 1
        order = np.argsort(p)
        assert np.all(np.diff(adj[order]) >= -1e-15)  # monotone in raw p
        assert adj.min() == pytest.approx(min(1.0, p.size * p.min()))  # smallest = Bonferroni


def test_psi_by_hand() -> None:
    # s = (0.5, 0.5), t = (0.25, 0.75): PSI = (−0.25)·ln 0.5 + 0.25·ln 1.5 = 0.17329 + 0.10137 = 0.27465
    s = np.array(["a"] * 50 + ["b"] * 50)
    t = np.array(["a"] * 25 + ["b"] * 75)
    assert psi(s, t, categorical=True) == pytest.approx(0.25 * math.log(2) + 0.25 * math.log(1.5))
    x = np.random.default_rng(0).normal(size=1000)
    assert psi(x, x) == 0.0  # identical samples


# ------------------------------------------------------------------------------------------------
# MMD
# ------------------------------------------------------------------------------------------------


def test_mmd_test_statistic_and_pvalue_convention() -> None:
    rng = np.random.default_rng(3)
    Xs, Xt = rng.normal(size=(40, 3)), rng.normal(loc=3.0, size=(50, 3))
    res = mmd_permutation_test(Xs, Xt, n_permutations=99, random_state=0)
    # independent recomputation (biased MMD², Gretton et al. 2012 eq. 5) on the pooled z-scored rows with
    # the reported width; the bandwidth is the median pairwise distance of those rows
    Zp = np.vstack([Xs, Xt])
    Zp = (Zp - Zp.mean(0)) / Zp.std(0)
    K = np.exp(-res.gamma * ((Zp[:, None, :] - Zp[None, :, :]) ** 2).sum(-1))
    direct = K[:40, :40].mean() + K[40:, 40:].mean() - 2 * K[:40, 40:].mean()
    assert res.mmd2 == pytest.approx(direct, abs=1e-12)
    d = np.sqrt(((Zp[:, None, :] - Zp[None, :, :]) ** 2).sum(-1))[np.triu_indices(90, 1)]
    assert res.bandwidth == pytest.approx(np.median(d), rel=1e-12)
    # a 3-sd shift: no permutation reaches the observed value → p = (0 + 1)/(99 + 1)
    assert res.p_value == pytest.approx(1 / 100)
    assert res.p_value == (1 + np.sum(res.null >= res.mmd2)) / (99 + 1)


def test_mmd_subsamples_above_max_rows() -> None:
    rng = np.random.default_rng(4)
    res = mmd_permutation_test(rng.normal(size=(300, 2)), rng.normal(size=(100, 2)), max_rows=200,
                               n_permutations=20, random_state=0)
    assert (res.n_source, res.n_target) == (200, 100)  # each side capped at max_rows: min(300, 200), min(100, 200)


# ------------------------------------------------------------------------------------------------
# domain classifier
# ------------------------------------------------------------------------------------------------


def test_ridge_closed_form_equals_sklearn_ridge_per_fold() -> None:
    # the closed-form out-of-fold scores equal scikit-learn Ridge (alpha = ridge_alpha·n_train) refits
    rng = np.random.default_rng(5)
    Xs, Xt = rng.normal(size=(30, 3)), rng.normal(loc=0.4, size=(25, 3))
    res = domain_classifier_test(Xs, Xt, n_splits=5, n_permutations=9, ridge_alpha=2.0, random_state=0)
    Z = np.vstack([Xs, Xt])
    Z = (Z - Z.mean(0)) / Z.std(0)
    d = np.r_[np.zeros(30), np.ones(25)]
    seq_cv = np.random.SeedSequence(0).spawn(2)[0]
    seed = int(seq_cv.generate_state(1, dtype=np.uint32)[0] >> 1)
    s = np.empty(55)
    for tr, te in KFold(5, shuffle=True, random_state=seed).split(Z):
        s[te] = Z[te] @ Ridge(alpha=2.0 * tr.size).fit(Z[tr], d[tr]).coef_
    assert np.allclose(np.r_[res.scores_source, res.scores_target], s, atol=1e-10)
    assert res.auc == pytest.approx(roc_auc_score(d, s))


def test_domain_auc_matches_binormal_formula() -> None:
    # two unit-variance normals 1.5 apart: AUC = Φ(1.5/√2) = 0.8556 (binormal ROC); 400 rows a side
    rng = np.random.default_rng(6)
    Xs, Xt = rng.normal(size=(400, 1)), rng.normal(loc=1.5, size=(400, 1))
    res = domain_classifier_test(Xs, Xt, n_permutations=99, random_state=0)
    assert res.auc == pytest.approx(stats.norm.cdf(1.5 / math.sqrt(2)), abs=0.03)
    assert res.p_value == pytest.approx(1 / 100)


@pytest.mark.heavy
def test_custom_classifier_permutation_path() -> None:
    rng = np.random.default_rng(7)
    Xs, Xt = rng.normal(size=(60, 2)), rng.normal(loc=2.0, size=(60, 2))
    res = domain_classifier_test(Xs, Xt, classifier=LogisticRegression(), n_splits=5, n_permutations=9,
                                 random_state=0)
    # both axes shifted by 2 sd: Mahalanobis δ = 2√2, binormal AUC = Φ(δ/√2) = Φ(2) = 0.977
    assert res.auc == pytest.approx(stats.norm.cdf(2.0), abs=0.04)
    assert res.p_value == pytest.approx(1 / 10)  # no permuted AUC reaches 0.97: p = (0 + 1)/(9 + 1)
    assert np.all((res.scores_target >= 0) & (res.scores_target <= 1))  # predict_proba


# ------------------------------------------------------------------------------------------------
# per-feature tests
# ------------------------------------------------------------------------------------------------


def test_feature_tests_ks_and_chi2_against_hand_formulas() -> None:
    rng = np.random.default_rng(8)
    n = 200
    S = pd.DataFrame({"num": rng.normal(size=n), "lvl": rng.integers(0, 3, n),
                      "txt": rng.choice(["a", "b", "c"], n)})
    T = pd.DataFrame({"num": rng.normal(0.5, 1, n), "lvl": rng.integers(0, 3, n),
                      "txt": rng.choice(["a", "b", "c"], n, p=[0.6, 0.2, 0.2])})
    f = feature_tests(S, T).set_index("feature")
    assert f.loc["num", "test"] == "ks" and f.loc["lvl", "test"] == "chi2" and f.loc["txt", "test"] == "chi2"
    # KS statistic = max |F_s − F_t| over the pooled points
    grid = np.sort(np.r_[S["num"], T["num"]])
    d = np.max(np.abs(np.searchsorted(np.sort(S["num"]), grid, side="right") / n
                      - np.searchsorted(np.sort(T["num"]), grid, side="right") / n))
    assert f.loc["num", "statistic"] == pytest.approx(d)
    # χ² = Σ (O − E)²/E on the 2×3 table (3 levels: no Yates correction)
    obs = np.array([[np.sum(S["txt"] == v) for v in "abc"], [np.sum(T["txt"] == v) for v in "abc"]])
    expct = obs.sum(1, keepdims=True) * obs.sum(0, keepdims=True) / obs.sum()
    chi = float(((obs - expct) ** 2 / expct).sum())
    assert f.loc["txt", "statistic"] == pytest.approx(chi)
    assert f.loc["txt", "p_value"] == pytest.approx(stats.chi2.sf(chi, 2))
    # Holm over the 3 testable features
    assert np.allclose(f["p_adjusted"], adjust_pvalues(f["p_value"].to_numpy(), "holm"))


# ------------------------------------------------------------------------------------------------
# the report and bad input
# ------------------------------------------------------------------------------------------------


@pytest.mark.heavy
def test_detect_drift_report_on_rt_bias(cancer) -> None:
    X, y = cancer
    sp = split_biased(X, y, "rt_sort", random_state=0)
    rep = detect_drift(X.iloc[sp.source], X.iloc[sp.target], random_state=0, mmd_permutations=200,
                       domain_permutations=200)
    assert rep.drifted
    # RT §3.1 drops the smallest 25% of 'mean radius': the KS test on it must be among the rejections
    assert "mean radius" in rep.drifted_features
    # verdict rule: Holm over the two global p-values
    p = sorted([rep.domain_pvalue, rep.mmd_pvalue])
    assert rep.drifted == (p[0] <= 0.05 / 2 or p[1] <= 0.05)
    # the removed region looks like target: target rows with mean radius below the source minimum get
    # higher out-of-fold target scores than the average source row
    rs = rep.row_scores.set_index(["side", "row"])
    low = X.index[sp.target][X["mean radius"].to_numpy()[sp.target] < X["mean radius"].iloc[sp.source].min()]
    assert rs.loc[[("target", i) for i in low], "target_score"].mean() > rs.xs("source")["target_score"].mean()
    d = rep.to_dict(include_row_scores=True)
    text = json.dumps(d, allow_nan=False)  # strict JSON: no NaN, no numpy types
    assert json.loads(text)["domain_auc"] == pytest.approx(rep.domain_auc)
    assert len(d["row_scores"]) == len(sp.source) + len(sp.target)


def test_bad_input_different_columns(cancer) -> None:
    X, _ = cancer
    with pytest.raises(ValueError, match=r"only in source: \['mean radius'\], only in target: \['mean texture'\]"):
        detect_drift(X.iloc[:100].drop(columns="mean texture"), X.iloc[100:200].drop(columns="mean radius"))
    with pytest.raises(ValueError, match="different columns"):
        detect_drift(np.zeros((20, 3)), np.zeros((20, 4)))


def test_bad_input_too_few_rows(cancer) -> None:
    X, _ = cancer
    with pytest.raises(ValueError, match="the target set has 7 rows; detect_drift needs at least 10"):
        detect_drift(X.iloc[:100], X.iloc[100:107])


def test_bad_input_text_vs_numeric_and_inf() -> None:
    rng = np.random.default_rng(9)
    S = pd.DataFrame({"age": rng.normal(size=30), "b": rng.normal(size=30)})
    T = pd.DataFrame({"age": ["x"] * 30, "b": rng.normal(size=30)})
    with pytest.raises(ValueError, match="column 'age' is text in the target but numeric in the source"):
        detect_drift(S, T)
    T2 = S.copy()
    T2.loc[3, "b"] = np.inf
    with pytest.raises(ValueError, match="column 'b' has ±inf values in the target"):
        detect_drift(S, T2)


def test_constant_and_all_nan_columns_are_reported_not_testable() -> None:
    rng = np.random.default_rng(10)
    n = 80
    S = pd.DataFrame({"a": rng.normal(size=n), "const": 1.0, "gone": rng.normal(size=n)})
    T = pd.DataFrame({"a": rng.normal(size=n), "const": 1.0, "gone": np.nan})
    rep = detect_drift(S, T, random_state=0, mmd_permutations=50, domain_permutations=50)
    f = rep.features.set_index("feature")
    assert f.loc["const", "test"] == "none" and "constant" in f.loc["const", "note"]
    assert f.loc["gone", "test"] == "none" and "all values missing" in f.loc["gone", "note"]
    assert f.loc["gone", "missing_target"] == 1.0
    assert not f.loc[["const", "gone"], "drifted"].any()
    assert f.loc["a", "test"] == "ks" and not math.isnan(f.loc["a", "p_value"])
    # global tests ran on column 'a' alone: finite numbers, and the notes say what was left out
    assert all(math.isfinite(v) for v in (rep.domain_auc, rep.domain_pvalue, rep.mmd2, rep.mmd_pvalue))
    assert any("left out" in note for note in rep.notes)
    d = json.loads(json.dumps(rep.to_dict(), allow_nan=False))
    gone = next(r for r in d["features"] if r["feature"] == "gone")
    assert gone["p_value"] is None and gone["statistic"] is None  # explicit null, not a silent NaN


def test_no_testable_column_is_an_error() -> None:
    S = pd.DataFrame({"c": np.ones(20)})
    with pytest.raises(ValueError, match="no testable column"):
        detect_drift(S, S.copy())


def test_partial_missing_values_are_imputed_for_global_tests() -> None:
    rng = np.random.default_rng(11)
    S = pd.DataFrame({"a": rng.normal(size=60), "b": rng.normal(size=60)})
    T = pd.DataFrame({"a": rng.normal(size=60), "b": rng.normal(size=60)})
    T.loc[:9, "b"] = np.nan
    rep = detect_drift(S, T, random_state=1, mmd_permutations=50, domain_permutations=50)
    f = rep.features.set_index("feature")
    assert f.loc["b", "missing_target"] == pytest.approx(10 / 60)
    # KS on the observed values only: equals scipy on the 50 non-missing target values
    assert f.loc["b", "p_value"] == pytest.approx(stats.ks_2samp(S["b"], T["b"].dropna()).pvalue)
    assert math.isfinite(rep.mmd2)


@pytest.mark.heavy
def test_plot_drift_bars_are_minus_log10_adjusted_p(cancer) -> None:
    X, y = cancer
    sp = split_biased(X, y, "kmm_threshold", random_state=2)
    rep = detect_drift(X.iloc[sp.source], X.iloc[sp.target], random_state=0, mmd_permutations=50,
                       domain_permutations=50)
    fig = plot_drift(rep)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    widths = sorted(round(p.get_width(), 8) for p in ax.patches)
    expected = sorted(round(-math.log10(max(p, 1e-300)), 8) for p in rep.features["p_adjusted"])
    assert widths == expected
    assert ax.lines[0].get_xdata()[0] == pytest.approx(-math.log10(0.05))  # the alpha line
    buf = io.BytesIO()
    fig.savefig(buf, format="png")  # renders without a display
    assert buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------------------------------------
# statistical behaviour (slow)
# ------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_false_positive_rates_no_shift_breast_cancer(cancer) -> None:
    """300 random half/half splits of breast_cancer (no shift): every test rejects in ≤ 8% at α = 0.05.

    Permutation p-values are exact, so the expected rate is ≤ 5%; 8% is ~2.7 binomial sd above 5% at
    n = 300. 200 permutations per test (p resolution 1/201) is enough to resolve 0.05.
    """
    X, y = cancer
    rej = []
    for seed in range(300):
        sp = split_biased(X, y, "complete_independent", rate=1.0, random_state=10_000 + seed)
        rep = detect_drift(X.iloc[sp.source], X.iloc[sp.target], random_state=seed, mmd_permutations=200,
                           domain_permutations=200)
        rej.append((rep.domain_pvalue <= 0.05, rep.mmd_pvalue <= 0.05, rep.features["drifted"].any(),
                    rep.drifted))
    rates = np.mean(rej, axis=0)
    print(f"no-shift rejection rates (domain, MMD, features FWER, verdict): {rates}")
    assert rates[0] <= 0.08, f"domain classifier FPR {rates[0]}"
    assert rates[1] <= 0.08, f"MMD FPR {rates[1]}"
    assert rates[2] <= 0.08, f"per-feature family-wise rate with Holm {rates[2]}"
    assert rates[3] <= 0.08, f"verdict FPR {rates[3]}"


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["rt_sort", "kmm_threshold"])
def test_power_against_rt_and_kmm_bias(cancer, mechanism: str) -> None:
    """Source = biased selection from a random half of breast_cancer (RT §3.1: drop the smallest 25% of
    the first attribute; KMM §4.2.1: P(s=1|x≤median)=0.2, 0.8 above, on the first attribute); target =
    the other half, an unbiased sample of the population. Both global tests reject in ≥ 90% of 100 seeds.
    """
    X, y = cancer
    rej = []
    for seed in range(100):
        sp = split_biased(X, y, mechanism, random_state=seed)
        rep = detect_drift(X.iloc[sp.source], X.iloc[sp.target], random_state=seed, mmd_permutations=200,
                           domain_permutations=200)
        rej.append((rep.domain_pvalue <= 0.05, rep.mmd_pvalue <= 0.05))
    rates = np.mean(rej, axis=0)
    print(f"{mechanism} rejection rates (domain, MMD): {rates}")
    assert rates[0] >= 0.90, f"domain classifier power {rates[0]}"
    assert rates[1] >= 0.90, f"MMD power {rates[1]}"
