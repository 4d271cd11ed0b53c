"""Tests for shiftlib.bias — selection mechanisms of RT §2/§3.1, KMM §4.2 and US §III-A.

Every number checked comes from: a formula worked by hand (comments), an independent numpy computation
of the paper's formula, the binomial law of a Bernoulli selection, or the Horvitz–Thompson identity
E[Σ_{s_i=1} f(x_i)/P(s_i=1|x_i,y_i)] = Σ_i f(x_i) (the reason oracle weights 1/P(s=1|x,y) correct bias).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_breast_cancer

from shiftlib.bias import (
    BIAS_MECHANISMS,
    apply_bias,
    class_dependent,
    complete_independent,
    from_probabilities,
    kmm_distance,
    kmm_label_logistic,
    kmm_label_step,
    kmm_pca_normal,
    kmm_threshold,
    rt_sort,
    split_biased,
    undersample,
)

# |count − E| ≤ Z·sd: a 5-sd two-sided band fails with probability < 6e-7 per check (normal approx.).
Z = 5.0


@pytest.fixture(scope="module")
def cancer() -> tuple[pd.DataFrame, np.ndarray]:
    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    return X, y.to_numpy()


def _toy(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (rng.random(n) < 0.4).astype(int)
    y[:2] = [0, 1]  # both classes always present
    return X, y


def _within_binomial(k: int, n: int, p: float) -> bool:
    """Count k of n Bernoulli(p) draws is within Z binomial standard deviations of n·p."""
    return abs(k - n * p) <= Z * math.sqrt(n * p * (1 - p)) + 1e-9


# ------------------------------------------------------------------------------------------------
# selection rates match the stated probabilities (binomial tolerance)
# ------------------------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(n=st.integers(400, 3000), rate=st.floats(0.05, 0.95), seed=st.integers(0, 2**32 - 1))
def test_complete_independent_rate(n: int, rate: float, seed: int) -> None:
    X, y = _toy(n, 2, seed)
    sel = complete_independent(X, y, rate=rate, random_state=seed)
    assert _within_binomial(sel.n_selected, n, rate)  # count ~ Binomial(n, rate)
    assert np.all(sel.p_select_all == rate)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(400, 3000), p_low=st.floats(0.05, 0.95), p_high=st.floats(0.05, 0.95),
       seed=st.integers(0, 2**32 - 1))
def test_kmm_threshold_rates_per_side(n: int, p_low: float, p_high: float, seed: int) -> None:
    # KMM §4.2.1: P(s=1|x≤t)=p_low, P(s=1|x>t)=p_high; t = median, so each side has ≈ n/2 rows
    X, y = _toy(n, 3, seed)
    sel = kmm_threshold(X, y, feature=1, p_low=p_low, p_high=p_high, random_state=seed)
    low = X[:, 1] <= np.median(X[:, 1])
    s = sel.mask
    assert _within_binomial(int(s[low].sum()), int(low.sum()), p_low)
    assert _within_binomial(int(s[~low].sum()), int((~low).sum()), p_high)
    assert np.array_equal(sel.p_select_all, np.where(low, p_low, p_high))


@settings(max_examples=25, deadline=None)
@given(n=st.integers(400, 3000), pp=st.floats(0.05, 0.95), pn=st.floats(0.05, 0.95),
       seed=st.integers(0, 2**32 - 1))
def test_class_dependent_rates_per_class(n: int, pp: float, pn: float, seed: int) -> None:
    X, y = _toy(n, 2, seed)
    sel = class_dependent(X, y, p_positive=pp, p_negative=pn, random_state=seed)
    s, pos = sel.mask, y == 1  # default positive_label = larger label = 1
    assert _within_binomial(int(s[pos].sum()), int(pos.sum()), pp)
    assert _within_binomial(int(s[~pos].sum()), int((~pos).sum()), pn)


@settings(max_examples=20, deadline=None)
@given(n=st.integers(400, 3000), beta=st.floats(0.05, 1.0), seed=st.integers(0, 2**32 - 1))
def test_undersample_keeps_all_positives_and_beta_of_negatives(n: int, beta: float, seed: int) -> None:
    # US §III-A: p(s=1|+) = 1, p(s=1|−) = beta; positives = minority (label 1 at rate 0.4 here)
    X, y = _toy(n, 2, seed)
    sel = undersample(X, y, beta=beta, random_state=seed)
    s, pos = sel.mask, y == 1
    assert s[pos].all()
    assert _within_binomial(int(s[~pos].sum()), int((~pos).sum()), beta)
    exact = undersample(X, y, beta=beta, exact=True, random_state=seed)
    n_neg = int((~pos).sum())
    assert int(exact.mask[~pos].sum()) == round(beta * n_neg)  # exactly round(beta·N−)
    assert np.allclose(exact.p_select_all[~pos], round(beta * n_neg) / n_neg)


@settings(max_examples=15, deadline=None)
@given(name=st.sampled_from(["feature_dependent", "complete_dependent", "kmm_distance",
                             "kmm_label_logistic", "kmm_pca_normal", "kmm_label_step"]),
       n=st.integers(500, 3000), seed=st.integers(0, 2**32 - 1))
def test_selected_count_matches_sum_of_probabilities(name: str, n: int, seed: int) -> None:
    # Σ_i s_i is a Poisson-binomial variable: mean Σp_i, variance Σp_i(1−p_i)
    X, y = _toy(n, 4, seed)
    sel = apply_bias(name, X, y, random_state=seed)
    p = sel.p_select_all
    assert abs(sel.n_selected - p.sum()) <= Z * math.sqrt(np.sum(p * (1 - p))) + 1e-9
    assert np.array_equal(sel.p_select, p[sel.indices])


@pytest.mark.heavy
def test_horvitz_thompson_identity_on_breast_cancer(cancer) -> None:
    # E[Σ_{selected} f(x_i)/p_i] = Σ_i f(x_i): oracle weights 1/P(s=1|x) undo KMM §4.2.1's bias, while the
    # unweighted selected mean is biased upward (x>t is kept 4x as often as x≤t).
    X, y = cancer
    f = X["mean radius"].to_numpy()
    ht, naive = [], []
    for seed in range(300):
        sel = kmm_threshold(X, y, feature="mean radius", random_state=seed)
        ht.append(np.sum(f[sel.indices] / sel.p_select) / len(f))
        naive.append(f[sel.indices].mean())
    ht = np.asarray(ht)
    se = ht.std(ddof=1) / math.sqrt(len(ht))
    assert abs(ht.mean() - f.mean()) <= 4 * se
    assert np.mean(naive) - f.mean() > 10 * se  # the bias the weights remove


# ------------------------------------------------------------------------------------------------
# formulas checked by hand / by independent computation
# ------------------------------------------------------------------------------------------------


def test_rt_sort_removes_first_quarter_by_hand() -> None:
    # x = [5,3,9,1,7,2,8,4]; 25% of 8 = 2 rows removed: the smallest values 1 (row 3) and 2 (row 5)
    X = np.array([[5], [3], [9], [1], [7], [2], [8], [4]], dtype=float)
    y = np.array([0, 1, 0, 1, 0, 1, 0, 1])
    sel = rt_sort(X, y)
    assert sel.indices.tolist() == [0, 1, 2, 4, 6, 7]
    assert sel.p_select_all.tolist() == [1, 1, 1, 0, 1, 0, 1, 1]
    assert sel.deterministic and not sel.support_covered
    assert np.all(sel.oracle_weights() == 1.0)
    # ties broken by row order: four equal values, 1 removed (floor(0.25·4)) → row 0
    tie = rt_sort(np.zeros((4, 1)), np.array([0, 1, 0, 1]))
    assert tie.indices.tolist() == [1, 2, 3]


def test_rt_sort_on_breast_cancer_first_attribute(cancer) -> None:
    X, y = cancer
    sel = rt_sort(X, y)  # default: first attribute 'mean radius'
    assert sel.params["feature"] == "mean radius"
    assert sel.n_selected == len(y) - math.floor(0.25 * len(y))  # 569 − 142 = 427
    kept_min = X["mean radius"].to_numpy()[sel.indices].min()
    assert kept_min >= np.sort(X["mean radius"].to_numpy())[141]  # nothing below the 142nd smallest value


def test_kmm_distance_matches_formula_by_hand() -> None:
    # rows 0, 2, 4 in 1-D (no standardising): x̄ = 2, ‖x − x̄‖² = 4, 0, 4; σ = 1/20
    X = np.array([[0.0], [2.0], [4.0]])
    y = np.array([0, 1, 0])
    sel = kmm_distance(X, y, standardize=False, random_state=0)
    assert np.allclose(sel.p_select_all, [math.exp(-0.2), 1.0, math.exp(-0.2)])
    half = kmm_distance(X, y, standardize=False, scale=0.5, random_state=0)
    assert np.allclose(half.p_select_all, 0.5 * sel.p_select_all)


def test_kmm_label_step_and_logistic_by_hand() -> None:
    X, y = _toy(200, 2, 0)
    step = kmm_label_step(X, y, random_state=0)  # KMM §4.2.1: P(s|y=1)=0.1, P(s|y=−1)=0.9
    assert np.allclose(step.p_select_all, np.where(y == 1, 0.1, 0.9))
    logi = kmm_label_logistic(X, y, a=0.5, b=-2.0, random_state=0)
    # exp(a+by)/(1+exp(a+by)): y=+1 → e^{-1.5}/(1+e^{-1.5}) = 0.18243; y=−1 → e^{2.5}/(1+e^{2.5}) = 0.92414
    assert np.allclose(logi.p_select_all, np.where(y == 1, 0.18243, 0.92414), atol=1e-5)


def test_kmm_pca_normal_matches_independent_eigendecomposition() -> None:
    X, y = _toy(300, 3, 7)
    X[:, 0] *= 4.0  # make PC1 ≈ the first axis
    sel = kmm_pca_normal(X, y, a=4.0, b=3.0, standardize=False, random_state=0)
    C = np.cov(X - X.mean(0), rowvar=False)
    w, V = np.linalg.eigh(C)
    v = V[:, -1] * np.sign(V[np.argmax(np.abs(V[:, -1])), -1])  # sklearn's sign: largest loading > 0
    proj = (X - X.mean(0)) @ v
    m, m_bar = proj.min(), proj.mean()
    mu, var = m + (m_bar - m) / 4.0, (m_bar - m) / 3.0  # KMM §4.2.2
    assert np.allclose(sel.p_select_all, np.exp(-((proj - mu) ** 2) / (2 * var)))


def test_balanced_undersampling_equalises_classes(cancer) -> None:
    # breast_cancer: 212 malignant (0, minority = positive) and 357 benign; beta = 212/357
    X, y = cancer
    sel = undersample(X, y, exact=True, random_state=0)
    assert sel.params["positive_label"] == 0
    assert sel.params["beta"] == pytest.approx(212 / 357)
    kept = y[sel.indices]
    assert (kept == 0).sum() == 212 and (kept == 1).sum() == 212  # round(beta·357) = 212


def test_oracle_weights_are_inverse_probabilities_with_mean_one(cancer) -> None:
    X, y = cancer
    sel = kmm_threshold(X, y, random_state=3)
    w = sel.oracle_weights()
    assert w.mean() == pytest.approx(1.0)
    assert np.allclose(w * sel.p_select, (w * sel.p_select)[0])  # w ∝ 1/p
    assert set(np.round(sel.oracle_weights(normalize=False), 10)) == {5.0, 1.25}  # 1/0.2, 1/0.8


# ------------------------------------------------------------------------------------------------
# API: registry, determinism, DataFrames, labels, splits
# ------------------------------------------------------------------------------------------------


@pytest.mark.heavy
@pytest.mark.parametrize("name", sorted(BIAS_MECHANISMS))
def test_same_seed_same_selection_and_names_match_positions(cancer, name: str) -> None:
    X, y = cancer
    a = apply_bias(name, X, y, random_state=11)
    b = apply_bias(name, X.to_numpy(), y, random_state=11)  # ndarray: feature 0 = 'mean radius'
    assert np.array_equal(a.indices, b.indices)
    assert np.allclose(a.p_select_all, b.p_select_all)
    assert a.mechanism == name
    assert np.all((a.p_select_all >= 0) & (a.p_select_all <= 1))


def test_feature_by_name_equals_by_position(cancer) -> None:
    X, y = cancer
    by_name = kmm_threshold(X, y, feature="mean texture", random_state=5)
    by_pos = kmm_threshold(X, y, feature=1, random_state=5)
    assert np.array_equal(by_name.indices, by_pos.indices)
    assert by_pos.params["feature"] == "mean texture"


def test_string_labels_and_positive_label_defaults() -> None:
    X, _ = _toy(400, 2, 1)
    y = np.where(np.arange(400) < 100, "yes", "no")  # "yes" is larger when sorted, and the minority
    step = kmm_label_step(X, y, random_state=0)
    assert step.params["positive_label"] == "yes"
    assert np.allclose(step.p_select_all, np.where(y == "yes", 0.1, 0.9))
    flipped = kmm_label_step(X, y, positive_label="no", random_state=0)
    assert np.allclose(flipped.p_select_all, np.where(y == "no", 0.1, 0.9))
    y2 = np.where(np.arange(400) < 100, "a", "b")  # minority "a" is the smaller label
    assert undersample(X, y2, random_state=0).params["positive_label"] == "a"


def test_split_biased_holdout_is_disjoint_and_sized(cancer) -> None:
    X, y = cancer
    sp = split_biased(X, y, "kmm_threshold", target_fraction=0.5, random_state=4, feature=0)
    assert len(sp.target) == round(0.5 * len(y))
    assert np.intersect1d(sp.source, sp.target).size == 0
    assert np.array_equal(np.union1d(sp.pool, sp.target), np.arange(len(y)))
    assert np.array_equal(sp.source, sp.pool[sp.selection.indices])
    again = split_biased(X, y, "kmm_threshold", target_fraction=0.5, random_state=4, feature=0)
    assert np.array_equal(sp.source, again.source) and np.array_equal(sp.target, again.target)
    comp = split_biased(X, y, "kmm_threshold", target="complement", random_state=4)
    assert np.array_equal(np.sort(np.r_[comp.source, comp.target]), np.arange(len(y)))
    everyone = split_biased(X, y, "rt_sort", target="all", random_state=4)
    assert np.array_equal(everyone.target, np.arange(len(y)))


@pytest.mark.heavy
def test_holdout_target_is_unbiased_but_source_is_not(cancer) -> None:
    # the holdout target is a uniform random subset: its mean of 'mean radius' over 200 splits matches the
    # population mean (within 4 standard errors); the rt_sort source mean is far above it
    X, y = cancer
    f = X["mean radius"].to_numpy()
    tgt, src = [], []
    for seed in range(200):
        sp = split_biased(X, y, "rt_sort", random_state=seed)
        tgt.append(f[sp.target].mean())
        src.append(f[sp.source].mean())
    se = np.std(tgt, ddof=1) / math.sqrt(len(tgt))
    assert abs(np.mean(tgt) - f.mean()) <= 4 * se
    assert np.mean(src) - f.mean() > 20 * se


def test_from_probabilities_custom_mechanism() -> None:
    X, y = _toy(2000, 2, 3)
    p = np.where(X[:, 0] > 0, 0.9, 0.1)
    sel = from_probabilities(X, y, p, random_state=1, depends_on="x")
    s, hi = sel.mask, X[:, 0] > 0
    assert _within_binomial(int(s[hi].sum()), int(hi.sum()), 0.9)
    assert _within_binomial(int(s[~hi].sum()), int((~hi).sum()), 0.1)


# ------------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------------


def test_errors_are_clear_value_errors(cancer) -> None:
    X, y = cancer
    with pytest.raises(ValueError, match="unknown bias mechanism 'nope'.*choose one of"):
        apply_bias("nope", X, y)
    with pytest.raises(ValueError, match="does not take parameter.*'sigmaa'"):
        apply_bias("kmm_distance", X, y, sigmaa=1.0)
    with pytest.raises(ValueError, match=r"p_low=1.5 is not a probability"):
        kmm_threshold(X, y, p_low=1.5)
    with pytest.raises(ValueError, match="feature 'age' not found"):
        kmm_threshold(X, y, feature="age")
    with pytest.raises(ValueError, match="out of range"):
        kmm_threshold(X.to_numpy(), y, feature=30)
    with pytest.raises(ValueError, match="selected 0 of 569 rows"):
        complete_independent(X, y, rate=0.0, random_state=0)
    with pytest.raises(ValueError, match="all of class 1.*needs both classes"):
        class_dependent(X, y, p_positive=1.0, p_negative=0.0, random_state=0)
    with pytest.raises(ValueError, match="must be binary"):
        complete_independent(X, np.arange(len(y)) % 3)
    with pytest.raises(ValueError, match="positive class to be the minority"):
        undersample(X, y, positive_label=1)
    with pytest.raises(ValueError, match="probabilities must lie in"):
        from_probabilities(X, y, np.full(len(y), 1.2))
    with pytest.raises(ValueError, match="not one of the labels"):
        kmm_label_step(X, y, positive_label="benign")
