"""shiftlib.estimation: each method against a hand-worked or independent number, interval terms, bad input; PAPE
(Białek, Kivimäki, Kuberski & Perrakis, NeurIPS 2025, arXiv 2401.08348) at the end — its numbers from a
hand-worked case, an independent computation (scikit-learn's ``HistGradientBoostingRegressor``, the LightGBM-style
booster PAPE's calibrator is), or a property the method must have (uniform weights → the unweighted calibration;
calibrated scores and no shift → the accuracy; a covariate shift built by selection on x → closer than plain CBPE).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from shiftlib.bias import split_biased
from shiftlib.estimation import (
    AUTO_INTERVAL,
    AUTO_METHOD,
    MEDIAN_COMPONENTS,
    METHODS,
    SHIFT_MODELS,
    WEIGHTED_METHODS,
    AccuracyEstimate,
    StoredPredictions,
    _method_fn,
    _pape_capped,
    atc_threshold,
    boosted_calibration,
    estimate_accuracies,
    estimate_accuracy,
    estimate_each,
    estimate_from_predictions,
    estimate_methods,
    paired_draws,
    pape_posteriors,
    pape_weights,
    point_estimate,
    stored_predictions,
)
from tests.shiftlib.test_decisions import _P, _onehot, _pair

pytestmark = pytest.mark.usefixtures("one_blas_thread")


@pytest.fixture(scope="module")
def shifted() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    X, y = load_breast_cancer(return_X_y=True)
    sp = split_biased(X, y, "kmm_distance", random_state=0)
    return X[sp.source], y[sp.source], X[sp.target], y[sp.target]


def _binary(conf: np.ndarray, correct: np.ndarray, conf_t: np.ndarray, w: np.ndarray | None = None) -> StoredPredictions:
    """Stored predictions where class 1 is predicted with probability ``conf`` (> 0.5) on every row."""
    ps = np.c_[1 - conf, conf]
    pt = np.c_[1 - conf_t, conf_t]
    y = np.where(correct == 1, 1, 0)
    return StoredPredictions("toy", np.array([0, 1]), y, ps, pt, np.arange(len(y)) % 2, w)


@pytest.mark.heavy
def test_uniform_weights_make_iwcv_equal_cv_and_cv_equals_sklearn(shifted) -> None:
    Xs, ys, Xt, _ = shifted
    res = estimate_accuracies({"LR": make_pipeline(StandardScaler(), LogisticRegression())}, Xs, ys, Xt, method=["cv", "iwcv"],
                              weights=np.ones(len(ys)), k=5, random_state=3)["LR"]
    # IWCV (Sugiyama et al. 2007) with w ≡ 1 is plain CV, exactly
    assert res["iwcv"].accuracy == res["cv"].accuracy
    # independent computation: scikit-learn's cross_val_predict on the same StratifiedKFold split
    oof = cross_val_predict(make_pipeline(StandardScaler(), LogisticRegression()), Xs, ys,
                            cv=StratifiedKFold(5, shuffle=True, random_state=3))
    assert res["cv"].accuracy == pytest.approx(float(np.mean(oof == ys)), abs=1e-12)


def test_cbpe_on_a_perfectly_calibrated_source_is_the_mean_target_confidence() -> None:
    # source: 20 rows at confidence 0.6 (12 correct), 20 at 0.8 (16), 20 at 0.95 (19): calibrated already,
    # so isotonic regression returns the confidences themselves and CBPE = mean target confidence
    conf = np.repeat([0.6, 0.8, 0.95], 20)
    correct = np.r_[np.repeat([1, 0], [12, 8]), np.repeat([1, 0], [16, 4]), np.repeat([1, 0], [19, 1])]
    conf_t = np.r_[np.full(10, 0.6), np.full(30, 0.95)]
    P = _binary(conf, correct, conf_t, w=np.ones(60))
    expected = (10 * 0.6 + 30 * 0.95) / 40  # 0.8625, by hand
    assert point_estimate(P, "cbpe") == pytest.approx(expected, abs=1e-12)
    # uniform weights: weighted calibration = unweighted, and V_shift = 0
    assert point_estimate(P, "weighted-cbpe") == pytest.approx(expected, abs=1e-12)
    est = estimate_from_predictions(P, "cbpe", n_boot=50, random_state=0)
    assert est.details["se_shift"] == 0.0
    # the finite-batch term is the binomial standard error of 40 rows at that accuracy
    assert est.details["se_target"] == pytest.approx(math.sqrt(expected * (1 - expected) / 40))
    assert est.ci_low < est.accuracy < est.ci_high


def test_weighted_cbpe_reweights_the_calibration() -> None:
    # at confidence 0.7: 10 rows, 5 correct; weights 3 on the correct rows, 1 on the others → 15/20 = 0.75
    conf = np.full(10, 0.7)
    correct = np.repeat([1, 0], 5)
    w = np.where(correct == 1, 3.0, 1.0)
    P = _binary(conf, correct, np.full(4, 0.7), w=w / w.mean())
    assert point_estimate(P, "cbpe") == pytest.approx(0.5)
    assert point_estimate(P, "weighted-cbpe") == pytest.approx(0.75)
    assert point_estimate(P, "iwcv") == pytest.approx(0.75)
    # V_shift is the squared gap between the two calibrations
    est = estimate_from_predictions(P, "weighted-cbpe", n_boot=20, random_state=0)
    assert est.details["se_shift"] == pytest.approx(0.25)


def test_atc_threshold_matches_source_accuracy_and_is_identity_without_shift() -> None:
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.5, 1.0, 101)
    correct = (rng.uniform(size=101) < conf).astype(int)
    P = _binary(conf, correct, conf)  # target = source probabilities: no shift
    acc = correct.mean()
    ne = np.sum(P.proba_source * np.log(P.proba_source), axis=1)
    t, lam = atc_threshold(ne, acc)
    # ATC's defining property (Garg et al. 2022): share of source scores above t equals the source accuracy
    assert np.mean(ne > t) + lam * np.mean(ne == t) == pytest.approx(acc, abs=1e-12)
    assert point_estimate(P, "atc") == pytest.approx(acc, abs=1e-12)
    # DOC (Guillory et al. 2021): equal confidences → no correction
    assert point_estimate(P, "doc") == pytest.approx(acc, abs=1e-12)
    # ties everywhere (e.g. a tree with pure leaves): the tie share keeps the property exactly
    Pt = _binary(np.ones(10), np.repeat([1, 0], [7, 3]), np.ones(5))
    assert point_estimate(Pt, "atc") == pytest.approx(0.7)


def test_atc_and_doc_follow_the_target_confidence_shift() -> None:
    conf = np.linspace(0.55, 0.99, 50)
    correct = np.r_[np.zeros(10, int), np.ones(40, int)]  # the 10 least confident are wrong: acc 0.8
    conf_t = np.linspace(0.55, 0.99, 50)[:25]  # target: only the lower half of the confidences
    P = _binary(conf, correct, conf_t)
    # ATC: t sits between the 10th and 11th lowest score; 15 of the 25 target rows lie above it
    assert point_estimate(P, "atc") == pytest.approx(15 / 25)
    assert point_estimate(P, "doc") == pytest.approx(0.8 - (conf.mean() - conf_t.mean()))


@pytest.mark.heavy
def test_single_and_many_share_folds_and_registry_names_work(shifted) -> None:
    Xs, ys, Xt, _ = shifted
    one = estimate_accuracy("NB", Xs, ys, Xt, method="cbpe", k=5, n_boot=30, random_state=1)
    many = estimate_accuracies(["NB", "DT"], Xs, ys, Xt, method="cbpe", k=5, n_boot=30, random_state=1)
    assert isinstance(one, AccuracyEstimate)
    assert one.accuracy == many["NB"]["cbpe"].accuracy
    assert (one.ci_low, one.ci_high) == (many["NB"]["cbpe"].ci_low, many["NB"]["cbpe"].ci_high)
    auto = estimate_accuracy("NB", Xs, ys, Xt, k=5, n_boot=30, random_state=1)
    assert auto.method in METHODS and auto.details["requested"] == "auto"
    assert 0 <= auto.ci_low <= auto.accuracy <= auto.ci_high <= 1


@pytest.mark.heavy
def test_trcv_method_reuses_trcv(shifted) -> None:
    from shiftlib.selection import trcv

    Xs, ys, Xt, _ = shifted
    w = np.random.default_rng(0).uniform(0.5, 2.0, len(ys))
    est = estimate_accuracy("NB", Xs, ys, Xt, method="trcv", weights=w, k=5, n_boot=20, random_state=2)
    ref = trcv("NB", Xs, ys, Xt, weights=w, k=5, random_state=2)  # same StratifiedKFold seed → same folds
    assert est.accuracy == pytest.approx(ref.accuracy, abs=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"method": "magic"}, "unknown method 'magic'"),
        ({"confidence": 1.5}, "confidence must be in"),
        ({"k": 1}, "k must be an integer"),
        ({"k": 500}, "largest source class"),
    ],
)
def test_bad_arguments_name_the_problem(shifted, kwargs, message) -> None:
    Xs, ys, Xt, _ = shifted
    with pytest.raises(ValueError, match=message):
        estimate_accuracy("NB", Xs, ys, Xt, **kwargs)


@pytest.mark.heavy
def test_a_class_rarer_than_k_is_kept_in_every_training_fold(shifted) -> None:
    # 10 folds, a class of 4 rows: StratifiedKFold puts each of its rows in a different holdout fold, so
    # every training fold still holds ≥ 3 of them (what source_cv does with the same k)
    from shiftlib.estimation import _folds

    y = np.r_[np.zeros(60, int), np.ones(4, int)]
    fold = _folds(y, 10, 0)
    assert sorted(np.unique(fold)) == list(range(10))
    assert all(np.sum(y[fold != i] == 1) >= 3 for i in range(10))
    Xs, ys, Xt, _ = shifted
    rare = np.flatnonzero(ys == ys.max())[4:]
    keep = np.setdiff1d(np.arange(len(ys)), rare)
    est = estimate_accuracy("NB", Xs[keep], ys[keep], Xt, k=10, n_boot=20, random_state=0)
    assert 0.0 <= est.ci_low <= est.accuracy <= est.ci_high <= 1.0


def test_bad_data_names_the_problem(shifted) -> None:
    Xs, ys, Xt, _ = shifted
    with pytest.raises(ValueError, match="single class"):
        estimate_accuracy("NB", Xs, np.zeros(len(ys)), Xt)
    with pytest.raises(ValueError, match="columns"):
        estimate_accuracy("NB", Xs, ys, Xt[:, :3])
    with pytest.raises(ValueError, match="0 rows"):
        estimate_accuracy("NB", Xs, ys, Xt[:0])
    with pytest.raises(ValueError, match="labels but"):
        estimate_accuracy("NB", Xs, ys[:-1], Xt)
    with pytest.raises(KeyError, match="unknown learner") as err:
        estimate_accuracy("XGB", Xs, ys, Xt)
    assert str(err.value).startswith("unknown learner 'XGB'; choose one of")  # the sentence, not its repr
    assert isinstance(err.value, ValueError)  # a bad argument, also for code that catches ValueError
    P = stored_predictions("NB", Xs, ys, Xt, need_weights=False, k=5, random_state=0)[0]
    with pytest.raises(ValueError, match="needs importance weights"):
        point_estimate(P, "iwcv")
    with pytest.raises(ValueError, match="n_boot"):
        estimate_from_predictions(P, "cv", n_boot=1)


# ----------------------------------------------------------------------------------------------------
# label (prior) shift: EM (Saerens et al. 2002) and BBSE (Lipton et al. 2018)
# ----------------------------------------------------------------------------------------------------
def _two_cell_world(n_a_target: int, n_b_target: int) -> StoredPredictions:
    """x ∈ {A, B} with P(A|y=1) = 0.9, P(A|y=0) = 0.3 and a balanced source (π_s = 0.5), worked by hand:
    200 source rows — y=1: 90 A + 10 B, y=0: 30 A + 70 B — so p_s(y=1|A) = 90/120 = 0.75 and
    p_s(y=1|B) = 10/80 = 0.125; the model outputs exactly these (already calibrated, so isotonic regression
    is the identity on them) and predicts 1 on A, 0 on B."""
    a, b = np.array([0.25, 0.75]), np.array([0.875, 0.125])
    y = np.r_[np.ones(90), np.ones(10), np.zeros(30), np.zeros(70)].astype(int)
    ps = np.r_[np.tile(a, (90, 1)), np.tile(b, (10, 1)), np.tile(a, (30, 1)), np.tile(b, (70, 1))]
    pt = np.r_[np.tile(a, (n_a_target, 1)), np.tile(b, (n_b_target, 1))]
    return StoredPredictions("toy", np.array([0, 1]), y, ps, pt, np.arange(len(y)) % 5, np.ones(len(y)))


@pytest.mark.heavy
def test_em_and_bbse_recover_a_hand_worked_target_prior_and_accuracy() -> None:
    # target prior π_t(1) = 0.2: share of A = 0.2·0.9 + 0.8·0.3 = 0.42 → 42 A rows, 58 B rows of 100.
    # True accuracy (predict 1 on A, 0 on B) = P(y=1, A) + P(y=0, B) = 0.2·0.9 + 0.8·0.7 = 0.74.
    # BBSE by hand: C = [[0.35, 0.05], [0.15, 0.45]] (rows ŷ, columns y), μ_t = (0.58, 0.42) → w = (1.6, 0.4),
    # π_t = w·π_s = (0.8, 0.2). EM: the two-valued x makes the mixture saturated, so the ML prior is the same.
    # Plain CBPE ignores the prior: 0.42·0.75 + 0.58·0.875 = 0.8225.
    P = _two_cell_world(42, 58)
    from shiftlib.estimation import bbse_prior, calibrated_posteriors, em_prior

    post_s, post_t = calibrated_posteriors(P.proba_source, P.y_source, P.proba_target)
    np.testing.assert_allclose(post_t, P.proba_target, atol=1e-12)  # calibrated already
    np.testing.assert_allclose(em_prior(post_t, np.array([0.5, 0.5])), [0.8, 0.2], atol=1e-6)
    pred_s, pred_t = P.proba_source.argmax(1), P.proba_target.argmax(1)
    np.testing.assert_allclose(bbse_prior(pred_s, P.y_source, pred_t, 2), [0.8, 0.2], atol=1e-12)
    assert point_estimate(P, "cbpe") == pytest.approx(0.8225, abs=1e-12)
    assert point_estimate(P, "em") == pytest.approx(0.74, abs=1e-6)
    assert point_estimate(P, "bbse") == pytest.approx(0.74, abs=1e-12)
    # uniform importance weights: weighted-em is em
    assert point_estimate(P, "weighted-em") == pytest.approx(point_estimate(P, "em"), abs=1e-12)
    est = estimate_from_predictions(P, "em", n_boot=50, random_state=0)
    assert est.details["prior_target_1"] == pytest.approx(0.2, abs=1e-6)
    # V_model: the largest gap to the three shift models' estimates, here |0.74 − 0.8225| (cbpe = weighted-cbpe)
    assert est.details["se_model"] == pytest.approx(0.8225 - 0.74, abs=1e-6)
    wide = estimate_from_predictions(P, "em", n_boot=50, interval="model", random_state=0)
    assert wide.ci_low < est.accuracy and wide.ci_high >= 0.8225  # the model interval holds all three


def test_no_prior_shift_means_no_correction() -> None:
    # target with the source's composition (120 A : 80 B = 60% A): π_t = π_s, so EM and BBSE are the identity
    P = _two_cell_world(60, 40)
    from shiftlib.estimation import em_prior, prior_shift_posteriors

    for m in ("em", "bbse", "weighted-em"):
        assert point_estimate(P, m) == pytest.approx(point_estimate(P, "cbpe"), abs=1e-9)
    post = np.random.default_rng(0).dirichlet([1, 1, 1], 50)
    prior = np.array([0.2, 0.3, 0.5])
    np.testing.assert_allclose(prior_shift_posteriors(post, prior, prior), post, atol=1e-15)
    # EM's fixed point: posteriors whose target mean equals π_s leave π_s unchanged
    np.testing.assert_allclose(em_prior(post, post.mean(axis=0)), post.mean(axis=0), atol=1e-7)


@pytest.mark.heavy
def test_interval_kinds_nest_and_bad_kind_is_named() -> None:
    P = _two_cell_world(42, 58)
    ests = {k: estimate_from_predictions(P, "bbse", n_boot=40, interval=k, random_state=1)
            for k in ("plain", "shift", "model")}
    assert len({e.accuracy for e in ests.values()}) == 1
    # plain ⊆ shift (V_shift ≥ 0) and plain ⊆ model (V_model ≥ 0)
    assert ests["shift"].ci_low <= ests["plain"].ci_low and ests["plain"].ci_high <= ests["shift"].ci_high
    assert ests["model"].ci_low <= ests["plain"].ci_low
    with pytest.raises(ValueError, match="unknown interval 'wide'"):
        estimate_from_predictions(P, "em", n_boot=10, interval="wide")


@pytest.mark.heavy
def test_auto_is_the_rules_method_with_the_rules_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    import shiftlib.estimation as est_mod
    from shiftlib.estimation import AUTO_INTERVAL, AUTO_METHOD

    P = _two_cell_world(42, 58)
    AUTO_INFLATION = 2.5  # the mechanism, at rule revision 4's factor (what ships is pinned below: 1)
    monkeypatch.setattr(est_mod, "AUTO_INFLATION", AUTO_INFLATION)
    auto = estimate_from_predictions(P, "auto", n_boot=30, random_state=0)
    ref = estimate_from_predictions(P, AUTO_METHOD, n_boot=30, interval=AUTO_INTERVAL, random_state=0)
    assert auto.method == AUTO_METHOD and auto.details["interval"] == AUTO_INTERVAL
    assert auto.details["inflation"] == AUTO_INFLATION and ref.details["inflation"] == 1.0
    assert auto.accuracy == ref.accuracy and auto.details["se"] == ref.details["se"]
    # the same interval kind, its half-width multiplied by AUTO_INFLATION (before clipping to [0, 1])
    half = ref.accuracy - ref.ci_low
    assert (auto.ci_low, auto.ci_high) == pytest.approx(
        (max(0.0, ref.accuracy - AUTO_INFLATION * half), min(1.0, ref.accuracy + AUTO_INFLATION * half)), abs=1e-12)
    # an explicit interval is that kind, uninflated
    explicit = estimate_from_predictions(P, "auto", n_boot=30, interval=AUTO_INTERVAL, random_state=0)
    assert (explicit.ci_low, explicit.ci_high) == (ref.ci_low, ref.ci_high)


def test_three_classes_calibrated_posteriors_are_distributions_and_em_runs_on_iris() -> None:
    from sklearn.datasets import load_iris

    from shiftlib.estimation import calibrated_posteriors

    X, y = load_iris(return_X_y=True)
    keep = (X[:, 2] < 5.0) | (np.arange(len(y)) % 3 == 0)  # fewer long-petal rows in the source
    P = stored_predictions("NB", X[keep], y[keep], X[~keep], need_weights=False, k=5, random_state=0)[0]
    post_s, post_t = calibrated_posteriors(P.proba_source, P.y_source, P.proba_target)
    np.testing.assert_allclose(post_s.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(post_t.sum(axis=1), 1.0, atol=1e-12)
    assert (post_t >= 0).all()
    est = estimate_from_predictions(P, "em", n_boot=20, random_state=0)
    assert 0.0 <= est.ci_low <= est.accuracy <= est.ci_high <= 1.0


@pytest.mark.heavy
def test_source_cv_scores_equal_source_cv_on_the_same_folds():
    # independent computation: shiftlib.selection.source_cv refits the same learners on the same folds
    from shiftlib.estimation import source_cv_scores, stored_predictions
    from shiftlib.learners import make_learner
    from shiftlib.selection import source_cv

    X, y = load_breast_cancer(return_X_y=True)
    Xs, ys, Xt = X[:200, :8], y[:200], X[300:400, :8]
    learners = {n: make_learner(n, random_state=0) for n in ("NB", "LR", "DT")}
    got = source_cv_scores(stored_predictions(learners, Xs, ys, Xt, k=5, random_state=3, need_weights=False))
    ref = source_cv(learners, Xs, ys, k=5, random_state=3)
    for n in learners:
        assert got.scores[n] == pytest.approx(ref.scores[n], abs=1e-12)
        np.testing.assert_allclose(got.details["fold_scores"][n], ref.details["fold_scores"][n], atol=1e-12)


# ----------------------------------------------------------------------------------------------------
# revision 3: NannyML's checked calibration, and the two combinations
# ----------------------------------------------------------------------------------------------------
def test_expected_calibration_error_by_hand() -> None:
    from shiftlib.estimation import expected_calibration_error

    p = np.array([0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9])
    # two equal-count bins of 4: mean scores 0.25 and 0.75
    assert expected_calibration_error(np.array([0, 0, 1, 0, 1, 1, 1, 0]), p, bins=2) == pytest.approx(0.0)
    # labels 0,0,0,0 | 1,1,1,1: |0.25 − 0|·½ + |0.75 − 1|·½ = 0.25
    assert expected_calibration_error(np.array([0, 0, 0, 0, 1, 1, 1, 1]), p, bins=2) == pytest.approx(0.25)


def test_cbpe_nml_skips_calibration_of_a_separating_score() -> None:
    # source scores separate the classes (AUROC 1 > 0.999): NannyML leaves them raw, so the estimate is the
    # mean raw probability of the predicted class: target p1 = 0.9, 0.2, 0.6 → 0.9, 0.8, 0.6 → 0.7667
    from shiftlib.estimation import needs_calibration

    p_s = np.r_[np.linspace(0.55, 0.7, 20), np.linspace(0.3, 0.45, 20)]
    y = np.r_[np.ones(20), np.zeros(20)].astype(int)
    assert not needs_calibration(y, p_s)
    pt = np.array([0.9, 0.2, 0.6])
    P = StoredPredictions("toy", np.array([0, 1]), y, np.c_[1 - p_s, p_s], np.c_[1 - pt, pt], np.arange(40) % 2)
    assert point_estimate(P, "cbpe-nml") == pytest.approx((0.9 + 0.8 + 0.6) / 3, abs=1e-12)
    # our top-label cbpe calibrates anyway: every source prediction is correct → 1.0
    assert point_estimate(P, "cbpe") == pytest.approx(1.0)


# calibrated scores (NannyML's check skips calibration for this draw) and overconfident ones (it calibrates)
@pytest.mark.slow  # importing NannyML alone takes ~20 s here
@pytest.mark.parametrize(("seed", "sharpen", "calibrates"), [(1, 1.0, False), (7, 3.0, True)])
def test_cbpe_nml_equals_nannyml_cbpe_on_the_same_predictions(seed: int, sharpen: float, calibrates: bool) -> None:
    nml = pytest.importorskip("nannyml")
    import pandas as pd

    from shiftlib.estimation import needs_calibration

    rng = np.random.default_rng(seed)
    logit_s, logit_t = rng.normal(0, 1.5, 400), rng.normal(0.7, 1.5, 300)
    y = (rng.random(400) < 1 / (1 + np.exp(-logit_s))).astype(int)
    p_s, p_t = 1 / (1 + np.exp(-sharpen * logit_s)), 1 / (1 + np.exp(-sharpen * logit_t))
    assert needs_calibration(y, p_s) is calibrates
    P = StoredPredictions("toy", np.array([0, 1]), y, np.c_[1 - p_s, p_s], np.c_[1 - p_t, p_t], np.arange(400) % 5)
    est = nml.CBPE(y_pred_proba="p", y_pred="pred", y_true="y", metrics=["accuracy"], chunk_number=1,
                   problem_type="classification_binary")
    est.fit(pd.DataFrame({"p": p_s, "pred": (p_s > 0.5).astype(int), "y": y}))
    assert bool(est.needs_calibration) is calibrates
    ref = est.estimate(pd.DataFrame({"p": p_t, "pred": (p_t > 0.5).astype(int)})).filter(period="analysis")
    assert point_estimate(P, "cbpe-nml") == pytest.approx(ref.to_df().iloc[0][("accuracy", "value")], abs=1e-12)


@pytest.mark.heavy
def test_minimax_is_the_midpoint_of_the_three_shift_models_and_its_model_interval_holds_them() -> None:
    # two-cell world (hand-worked above): cbpe = weighted-cbpe = 0.8225, em = 0.74 → midpoint 0.78125
    P = _two_cell_world(42, 58)
    assert point_estimate(P, "minimax") == pytest.approx((0.8225 + 0.74) / 2, abs=1e-6)
    est = estimate_from_predictions(P, "minimax", n_boot=40, interval="model", random_state=0)
    assert est.details["se_model"] == pytest.approx((0.8225 - 0.74) / 2, abs=1e-6)  # half the range
    assert est.ci_low <= 0.74 and est.ci_high >= 0.8225
    assert est.details["components"] == pytest.approx({"cbpe": 0.8225, "weighted-cbpe": 0.8225, "em": 0.74},
                                                      abs=1e-6)


def test_median_of_the_fit_free_estimators_by_hand() -> None:
    # two-cell world: cv = iwcv = 160/200 = 0.8; doc = 0.8 − (0.8 − 0.8225) = 0.8225; cbpe = weighted-cbpe =
    # cbpe-nml = 0.8225 (the scores are calibrated); em = bbse = weighted-em = 0.74; atc: the 40% B rows score
    # above A, so t = A's score with λ = (0.8 − 0.4)/0.6 = 2/3 → 0.58 + 2/3·0.42 = 0.86.
    # Sorted: .74 .74 .74 .8 .8 .8225 .8225 .8225 .8225 .86 → median (0.8 + 0.8225)/2
    from shiftlib.estimation import MEDIAN_COMPONENTS

    P = _two_cell_world(42, 58)
    by_hand = {"cv": 0.8, "iwcv": 0.8, "doc": 0.8225, "atc": 0.86, "cbpe": 0.8225, "weighted-cbpe": 0.8225,
               "em": 0.74, "bbse": 0.74, "weighted-em": 0.74, "cbpe-nml": 0.8225}
    assert set(by_hand) == set(MEDIAN_COMPONENTS)
    for m, v in by_hand.items():
        assert point_estimate(P, m) == pytest.approx(v, abs=1e-6), m
    assert point_estimate(P, "median") == pytest.approx((0.8 + 0.8225) / 2, abs=1e-6)
    # without importance weights the weighted components drop out: .74 .74 .8 .8225 .8225 .8225 .86
    unweighted = StoredPredictions("toy", P.classes, P.y_source, P.proba_source, P.proba_target, P.folds)
    assert point_estimate(unweighted, "median") == pytest.approx(0.8225, abs=1e-6)


def test_shared_resamples_change_nothing_for_methods_alone() -> None:
    from shiftlib.estimation import estimate_methods

    P = _two_cell_world(42, 58)
    many = estimate_methods(P, ["cv", "doc", "atc"], n_boot=30, random_state=4)
    for m in ("cv", "doc", "atc"):  # no label-shift component: the same source resamples as one call each
        one = estimate_from_predictions(P, m, n_boot=30, random_state=4)
        assert (many[m].accuracy, many[m].ci_low, many[m].ci_high) == (one.accuracy, one.ci_low, one.ci_high)


def test_isotonic_map_equals_scikit_learns_isotonic_regression():
    """``IsotonicMap`` reproduces ``IsotonicRegression(increasing=True, out_of_bounds="clip")`` (the
    independent computation): tied scores, zero and non-zero weights, y bounds, queries beyond the range."""
    from sklearn.isotonic import IsotonicRegression

    from shiftlib.estimation import IsotonicMap

    rng = np.random.default_rng(3)
    for trial in range(20):
        x = np.round(rng.random(60), 1 + trial % 3)  # coarse rounding: many ties
        y = (rng.random(60) < x).astype(float)
        if trial % 5 == 1:  # saturated probabilities (naive Bayes): scores less than 1e-15 apart, mixed labels
            x[:25], y[:25] = 1.0 - rng.integers(0, 12, 25) * 1.1e-16, rng.integers(0, 2, 25)
        w = None if trial % 2 else rng.choice([0.0, 0.5, 1.0, 2.0], 60)
        q = np.linspace(-0.2, 1.2, 57)
        bounds = {"y_min": 0.0, "y_max": 1.0} if trial % 4 == 0 else {}
        ours = IsotonicMap(**bounds).fit(x, y, sample_weight=w).predict(q)
        ref = IsotonicRegression(increasing=True, out_of_bounds="clip", **bounds).fit(x, y, sample_weight=w).predict(q)
        np.testing.assert_allclose(ours, ref, atol=1e-12)


@pytest.mark.heavy
def test_binary_em_prior_ends_at_least_as_close_to_the_maximum_likelihood_prior_as_plain_em():
    """Two classes take the accelerated iteration too: on soft and on hard (0/1) posteriors, and on batches
    whose maximum-likelihood prior lies on the boundary with the likelihood flat towards it (where plain EM
    stopped, after its 1,000 steps, 0.04 away), ``em_prior`` ends at least as close to the maximum-likelihood
    prior as plain EM with the same stopping rule (iterating ``prior_shift_posteriors``). The reference is the
    maximiser of the concave log-likelihood Σ log(p₁π/π_s1 + p₀(1 − π)/π_s0) over [0, 1] (Saerens et al. 2002),
    found by ``scipy.optimize.brentq`` on its derivative, or the end where the derivative does not change sign."""
    from scipy.optimize import brentq

    from shiftlib.estimation import em_prior, prior_shift_posteriors

    def plain(post, ps):
        pi = ps.copy()
        for _ in range(1000):
            new = prior_shift_posteriors(post, ps, pi).mean(axis=0)
            if np.max(np.abs(new - pi)) < 1e-8:
                break
            pi = new
        return new[1]

    def mle(post, ps):
        a, b = post[:, 1] / ps[1], post[:, 0] / ps[0]
        def slope(pi):
            return float(np.sum((a - b) / (a * pi + b * (1 - pi))))
        if slope(0.0) <= 0:
            return 0.0
        if slope(1.0) >= 0:
            return 1.0
        return brentq(slope, 0.0, 1.0, xtol=1e-14)

    rng = np.random.default_rng(5)
    plain_errors = []
    for trial in range(40):
        p1 = rng.beta(0.5, 0.5, 150)
        if trial % 2:
            p1 = np.clip(np.round(p1), 0.01, 0.99)
        ps = np.array([0.65, 0.35]) if trial % 3 else np.array([0.2, 0.8])
        if trial % 5 == 4:  # the maximum-likelihood prior on the boundary, the likelihood flat towards it: a DT's
            # calibrated posteriors in a bootstrap resample of the embedded example (two values, 217 and 115 rows)
            p1, ps = np.repeat([0.362, 0.429], [217 - trial, 115]), np.array([0.6133, 0.3867])
        post = np.c_[1 - p1, p1]
        ref, got = mle(post, ps), em_prior(post, ps)
        assert got.sum() == pytest.approx(1.0, abs=1e-12) and got.min() >= 0
        plain_errors.append(abs(plain(post, ps) - ref))
        assert abs(got[1] - ref) <= plain_errors[-1] + 1e-7, trial
    assert max(plain_errors) > 0.01  # the flat cases are in: plain EM's own error is large there


def test_isotonic_map_fit_on_presorted_rows_equals_the_sorting_fit():
    """``IsotonicMap.fit(presorted=True)`` (rows already in (score, label) order, as ``needs_calibration`` hands
    them) is the same map as the fit that sorts: tied scores, tied rows, crowded scores."""
    from shiftlib.estimation import IsotonicMap

    rng = np.random.default_rng(8)
    for trial in range(30):
        x = np.round(rng.random(80), 1 + trial % 3)
        if trial % 3 == 2:
            x[:30] = 1.0 - rng.integers(0, 12, 30) * 1.1e-16
        y = (rng.random(80) < x).astype(float)
        order = np.lexsort((y, x))
        q = np.linspace(-0.1, 1.1, 41)
        np.testing.assert_array_equal(IsotonicMap().fit(x[order], y[order], presorted=True).predict(q),
                                      IsotonicMap().fit(x, y).predict(q))


@pytest.mark.heavy
def test_needs_calibration_equals_nannymls_check_computed_with_scikit_learn():
    """``needs_calibration`` against NannyML's steps written with scikit-learn (the independent computation):
    ``roc_auc_score`` > 0.999 → False; else ``IsotonicRegression(out_of_bounds="clip")`` fitted on the training
    rows of each ``StratifiedShuffleSplit(10, test_size=0.1, random_state=42)`` split, the test rows pooled, and
    the calibrated scores' expected calibration error compared with the raw scores'. Draws with tied and
    repeated scores (bootstrap resamples), calibrated and overconfident."""
    from sklearn.isotonic import IsotonicRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedShuffleSplit

    from shiftlib.estimation import expected_calibration_error, needs_calibration

    def reference(y, p):
        if roc_auc_score(y, p) > 0.999:
            return False
        ys, raw, cal = [], [], []
        for tr, te in StratifiedShuffleSplit(10, test_size=0.1, random_state=42).split(p, y):
            iso = IsotonicRegression(out_of_bounds="clip").fit(p[tr], y[tr])
            ys.append(y[te]), raw.append(p[te]), cal.append(iso.predict(p[te]))
        y_all = np.concatenate(ys)
        return bool(expected_calibration_error(y_all, np.concatenate(cal))
                    < expected_calibration_error(y_all, np.concatenate(raw)))

    rng = np.random.default_rng(12)
    answers = []
    for trial in range(40):
        n = int(rng.integers(60, 400))
        logit = rng.normal(0, 1.5, n)
        y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
        p = 1 / (1 + np.exp(-(1.0 + trial % 4) * logit))
        if trial % 2:  # a bootstrap resample: repeated rows, and coarse scores
            r = rng.integers(0, n, n)
            y, p = y[r], np.round(p[r], 2)
        answers.append(needs_calibration(y, p))
        assert answers[-1] is reference(y, p), trial
    assert 5 <= sum(answers) <= 35  # both answers are exercised


@pytest.mark.heavy
def test_shared_source_cv_only_when_every_row_was_used_and_no_learner_reads_the_target():
    from shiftlib.estimation import shared_source_cv, source_cv_scores, stored_predictions
    from shiftlib.learners import make_learner

    X, y = load_breast_cancer(return_X_y=True)
    Xs, ys, Xt = X[:120, :6], y[:120], X[300:360, :6]
    preds = stored_predictions({n: make_learner(n, random_state=0) for n in ("NB", "LR")}, Xs, ys, Xt, k=5,
                               random_state=1, need_weights=False)
    got = shared_source_cv(preds, ["NB", "LR"], n_source=120)
    assert got is not None and got.scores.to_dict() == source_cv_scores(preds).scores.to_dict()
    assert shared_source_cv(preds, ["NB", "LR"], n_source=121) is None  # fitted on a subsample of the source
    assert shared_source_cv(preds, ["NB", "CSLR"], n_source=120) is None  # CSLR reads X_target: its own folds


@pytest.mark.heavy
def test_multiclass_em_prior_reaches_the_maximum_likelihood_prior():
    """SQUAREM-accelerated ``em_prior`` ends at least as close to EM's fixed point as plain EM with the same
    stopping rule: the independent computation is plain EM (iterating ``prior_shift_posteriors``), once with
    ``em_prior``'s tolerance and once to a far tighter one (the reference)."""
    from shiftlib.estimation import em_prior, prior_shift_posteriors

    def plain(post, ps, tol, max_iter):
        pi = ps.copy()
        for _ in range(max_iter):
            new = prior_shift_posteriors(post, ps, pi).mean(axis=0)
            if np.max(np.abs(new - pi)) < tol:
                break
            pi = new
        return new

    rng = np.random.default_rng(11)
    for trial in range(12):
        K = 3 + trial % 3
        post = rng.dirichlet(np.ones(K) * (0.3 if trial % 2 else 3.0), 800)
        ps = rng.dirichlet(np.ones(K))
        if trial % 4 == 3:  # the target lacks class 0: the prior goes to the boundary
            post[:, 0] *= 0.01
            post /= post.sum(axis=1, keepdims=True)
        ref, same_rule = plain(post, ps, 1e-13, 200_000), plain(post, ps, 1e-8, 1000)
        got = em_prior(post, ps)
        assert got.sum() == pytest.approx(1.0, abs=1e-12) and got.min() >= 0
        assert np.abs(got - ref).max() <= np.abs(same_rule - ref).max() + 1e-8


@pytest.mark.heavy
def test_isotonic_map_groups_crowded_scores_as_scikit_learn():
    """Scores crowded within 1e-15 (probabilities near 0 and saturated at 1, as multi-class learners give) are
    grouped as ``IsotonicRegression`` groups them: the same fitted map."""
    from sklearn.isotonic import IsotonicRegression

    from shiftlib.estimation import IsotonicMap

    rng = np.random.default_rng(4)
    for _ in range(60):
        n = int(rng.integers(20, 200))
        x = np.concatenate([rng.uniform(0, 1e-14, n // 3), 1 - rng.uniform(0, 3e-15, n // 3),
                            rng.uniform(0, 1, n - 2 * (n // 3))])
        y = (rng.uniform(size=n) < np.clip(x, 0.05, 0.95)).astype(float)
        q = np.r_[x, np.linspace(0, 1, 11)]
        ours = IsotonicMap().fit(x, y).predict(q)
        ref = IsotonicRegression(increasing=True, out_of_bounds="clip").fit(x, y).predict(q)
        np.testing.assert_allclose(ours, ref, atol=1e-12)


@pytest.mark.heavy
def test_needs_calibration_splits_are_scikit_learns():
    """``needs_calibration`` draws NannyML's StratifiedShuffleSplit(10, test_size=0.1, random_state=42) splits
    through a faster copy: the same index arrays as scikit-learn's own, for two to four classes."""
    from sklearn.model_selection import StratifiedShuffleSplit

    from shiftlib.estimation import _stratified_shuffle_splits

    rng = np.random.default_rng(0)
    for _ in range(60):
        n, K = int(rng.integers(20, 2000)), int(rng.integers(2, 5))
        y = rng.integers(0, K, n)
        y[: 2 * K] = np.repeat(np.arange(K), 2)
        ref = StratifiedShuffleSplit(n_splits=10, test_size=0.1, random_state=42).split(y, y)
        for (tr_ref, te_ref), (tr, te) in zip(ref, _stratified_shuffle_splits(y, 10, 0.1, 42), strict=True):
            np.testing.assert_array_equal(tr, tr_ref)
            np.testing.assert_array_equal(te, te_ref)


@pytest.mark.slow  # default-suite budget: 15–37 s each beside other work (--durations)
@pytest.mark.heavy
def test_estimates_in_worker_processes_equal_the_sequential_ones(shifted) -> None:
    """``estimate_each(n_jobs=2)`` runs the same seeded bootstraps in two processes: equal, in order."""
    Xs, ys, Xt, _ = shifted
    preds = stored_predictions(["NB", "DT", "LR"], Xs, ys, Xt, k=5, random_state=0)
    forked = stored_predictions(["NB", "DT", "LR"], Xs, ys, Xt, k=5, random_state=0, n_jobs=2)  # fits in 2 processes
    for a, b in zip(preds, forked, strict=True):
        assert a.learner == b.learner
        np.testing.assert_array_equal(a.proba_source, b.proba_source)
        np.testing.assert_array_equal(a.proba_target, b.proba_target)
    one = list(estimate_each(preds, n_boot=20, random_state=3))
    two = list(estimate_each(preds, n_boot=20, random_state=3, n_jobs=2))
    assert [(e.accuracy, e.ci_low, e.ci_high) for e in one] == [(e.accuracy, e.ci_low, e.ci_high) for e in two]
    assert one[0].accuracy == estimate_from_predictions(preds[0], n_boot=20, random_state=3).accuracy


def _pinned_predictions() -> StoredPredictions:
    """120 source and 80 target rows with weights: a case every estimator and the three shift models read."""
    rng = np.random.default_rng(0)
    n_s, n_t = 120, 80
    p1s = rng.uniform(0.05, 0.95, n_s)
    ys = (rng.uniform(size=n_s) < p1s).astype(int)
    p1t = rng.uniform(0.05, 0.95, n_t)
    w = rng.uniform(0.3, 2.0, n_s)
    return StoredPredictions("LR", np.array([0, 1]), ys, np.c_[1 - p1s, p1s], np.c_[1 - p1t, p1t],
                             np.arange(n_s) % 5, w / w.mean())


@pytest.mark.heavy
def test_the_shipped_auto_interval_is_the_median_with_the_model_variance() -> None:
    """What ships (issue 28: a mutation to V_shift + V_model/4 survived): ``auto`` is the median of the
    fit-free estimators, and its 95% interval is acc ± z·√(V_source + V_target + V_model), with
    V_target = acc(1 − acc)/n_t and V_model the largest squared gap to the three shift models' estimates,
    each computed here on its own (``point_estimate``)."""
    from shiftlib.estimation import AUTO_INFLATION, AUTO_INTERVAL, AUTO_METHOD, SHIFT_MODELS, point_estimate

    # rule revision 3 (reports/estimation.md): median, the model interval; revision 4's × 2.5 is not shipped
    assert (AUTO_METHOD, AUTO_INTERVAL, SHIFT_MODELS) == ("median", "model", ("cbpe", "weighted-cbpe", "em"))
    assert AUTO_INFLATION == 1.0
    P = _pinned_predictions()
    e = estimate_from_predictions(P, "auto", n_boot=50, random_state=1)
    acc = point_estimate(P, "median")
    assert e.accuracy == acc and e.details["interval"] == "model"
    v_model = max((point_estimate(P, m) - acc) ** 2 for m in SHIFT_MODELS)
    v_target = acc * (1 - acc) / 80
    assert e.details["se_model"] ** 2 == pytest.approx(v_model, rel=1e-12)
    assert e.details["se_target"] ** 2 == pytest.approx(v_target, rel=1e-12)
    z = 1.959963984540054
    half = z * math.sqrt(e.details["se_source"] ** 2 + v_target + v_model)
    assert (e.ci_low, e.ci_high) == pytest.approx((max(0.0, acc - half), min(1.0, acc + half)), abs=1e-12)


@pytest.mark.heavy
@pytest.mark.parametrize("method", ["em", "bbse", "median"])
def test_label_shift_methods_and_the_median_redraw_the_target_rows(method: str) -> None:
    """Their target prior comes from the target rows, so each bootstrap resample draws target rows too
    (issue 28: a mutation to ``redraw_target=False`` survived). V_source must be the variance of the method over
    resamples that draw n_s source rows, then n_t target rows, from the same generator, and not the one
    without the target draw."""
    from shiftlib.estimation import _combine, _components, _method_fn

    P = _pinned_predictions()
    n_boot, seed = 40, 7
    e = estimate_from_predictions(P, method, n_boot=n_boot, random_state=seed)
    fns = {c: _method_fn(c, P) for c in _components(method, P)}

    def boot_variance(redraw: bool) -> float:
        g, vals = np.random.default_rng(seed), []
        for _ in range(n_boot):
            r = g.integers(0, 120, 120)
            t = g.integers(0, 80, 80) if redraw else None
            vals.append(_combine(method, {c: f(r, t) for c, f in fns.items()}, P))
        return float(np.var(vals, ddof=1))

    assert e.details["se_source"] ** 2 == pytest.approx(boot_variance(True), rel=1e-12)
    assert e.details["se_source"] ** 2 != pytest.approx(boot_variance(False), rel=1e-3)


# ----------------------------------------------------------------------------------------------------
# paired draws (what the promotion gate compares; the gate itself: test_decisions.py)
# ----------------------------------------------------------------------------------------------------


@pytest.mark.heavy
def test_paired_draws_point_estimates_are_the_shipped_estimates():
    champ, new = _pair()
    est_c, est_n, dc, dn = paired_draws(champ, new, "auto", shared_source=True, n_boot=5, random_state=0)
    assert est_c == pytest.approx(estimate_from_predictions(champ, "auto", n_boot=2).accuracy)
    assert est_n == pytest.approx(estimate_from_predictions(new, "auto", n_boot=2).accuracy)
    assert dc.shape == dn.shape == (5,)
    # the same source rows and target rows for both: a learner paired with itself draws identical values
    y = np.array([0, 1] * 20)
    conf = np.linspace(0.5, 1.0, 40)
    src = np.c_[conf, 1 - conf]  # predicts 0 everywhere: right on half the rows, more often where surer
    var = _P(list(y), src, np.c_[conf, 1 - conf], name="v")
    a, b, da, db = paired_draws(var, var, "cbpe", shared_source=True, n_boot=5, random_state=0)
    assert a == b and np.array_equal(da, db)
    assert np.std(da) > 0
    with pytest.raises(ValueError, match="same target batch"):
        paired_draws(new, _P([0, 1], _onehot(np.array([0, 1])), _onehot(np.array([0]))))


# ----------------------------------------------------------------------------------------------------
# PAPE
# ----------------------------------------------------------------------------------------------------


def _hgb(x, y, xq, w=None):
    """The independent computation: scikit-learn's LightGBM-style booster with LightGBM's defaults."""
    m = HistGradientBoostingRegressor(early_stopping=False, random_state=0)
    with threadpool_limits(1):  # its OpenMP threads only wait on each other on a busy machine
        m.fit(np.asarray(x, float)[:, None], np.asarray(y, float), sample_weight=w)
        return np.clip(m.predict(np.asarray(xq, float)[:, None]), 0.0, 1.0)


def _binary_pape(p1_source, y_source, p1_target, weights):
    p_s = np.c_[1 - p1_source, p1_source]
    p_t = np.c_[1 - p1_target, p1_target]
    return StoredPredictions("m", np.array([0, 1]), np.asarray(y_source, int), p_s, p_t,
                             np.arange(len(y_source)) % 5, None if weights is None else np.asarray(weights, float))


# ---------------------------------------------------------------------------------------------------- weights
def test_pape_weights_hand_worked():
    # n_s/n_t = 2; h = P(target | x): 0 → floor 0.001; 0.5 → 2·1 = 2; 0.9 → 2·9 = 18;
    # 0.96 → denominator floored at 0.05: 2·0.96/0.05 = 38.4; 1 → 2·1/0.05 = 40 (the cap 20·n_s/n_t)
    w = pape_weights(np.array([0.0, 0.5, 0.9, 0.96, 1.0]), 100, 50)
    np.testing.assert_allclose(w, [0.001, 2.0, 18.0, 38.4, 40.0], rtol=1e-12)


def test_stored_weights_are_capped_through_the_implied_domain_probability():
    # n_s = n_t: odds = w, h = w/(1+w). w = 1 → h = 0.5, kept; w = 19 → h = 0.95, 1 − h = 0.05 exactly, kept;
    # w = 99 → h = 0.99, capped to 0.99/0.05 = 19.8; w = 0 → the floor 0.001
    np.testing.assert_allclose(_pape_capped(np.array([1.0, 19.0, 99.0, 0.0]), 10, 10),
                               [1.0, 19.0, 19.8, 0.001], rtol=1e-12)
    # n_s = 2·n_t: odds = w/2; w = 4 → h = 2/3, kept (4); w = 100 → h = 50/51, capped to 2·(50/51)/0.05
    np.testing.assert_allclose(_pape_capped(np.array([4.0, 100.0]), 20, 10), [4.0, 2 * (50 / 51) / 0.05],
                               rtol=1e-12)


def test_pape_weights_refuses_bad_input():
    with pytest.raises(ValueError, match="probability"):
        pape_weights(np.array([0.5, 1.5]), 2, 2)
    with pytest.raises(ValueError, match="rows"):
        pape_weights(np.array([0.5]), 1, 0)


# ---------------------------------------------------------------------------------------------------- calibrator
def test_boosted_calibration_two_bins_hand_worked():
    # 20 rows at score 0.2 (5 positives), 20 at 0.8 (15 positives). Each child of the root split has exactly
    # min_leaf = 20 rows, so every tree is that split; with squared loss each round moves a bin's value
    # 10 % of the way to its bin mean: F_100 = μ_b + (μ − μ_b)·0.9^100, μ the overall (weighted) mean.
    x = np.r_[np.full(20, 0.2), np.full(20, 0.8)]
    y = np.r_[np.ones(5), np.zeros(15), np.ones(15), np.zeros(5)]
    d = 0.9 ** 100
    got = boosted_calibration(x, y, np.array([0.1, 0.2, 0.49, 0.51, 0.8, 0.95]))
    lo, hi = 0.25 + (0.5 - 0.25) * d, 0.75 + (0.5 - 0.75) * d
    np.testing.assert_allclose(got, [lo, lo, lo, hi, hi, hi], rtol=1e-12)
    # weights: the 5 positives at 0.2 count 3 → bin mean 15/30 = 0.5, overall mean (15 + 15)/(30 + 20) = 0.6
    w = np.r_[np.full(5, 3.0), np.ones(35)]
    got_w = boosted_calibration(x, y, np.array([0.2, 0.8]), w)
    np.testing.assert_allclose(got_w, [0.5 + (0.6 - 0.5) * d, 0.75 + (0.6 - 0.75) * d], rtol=1e-12)


@pytest.mark.heavy
def test_boosted_calibration_equals_sklearn_hist_gradient_boosting():
    rng = np.random.default_rng(0)
    # ≤ 255 distinct scores (one bin each), weighted, as PAPE fits it
    x = rng.integers(0, 120, 400) / 120
    y = (rng.random(400) < x ** 2).astype(float)
    w = rng.exponential(size=400)
    xq = rng.random(300)
    np.testing.assert_allclose(boosted_calibration(x, y, xq, w), _hgb(x, y, xq, w), atol=1e-6)
    # more rows than 31 leaves of ≥ 20 rows can hold, so the best-first order decides which splits are made
    # (continuous weights: no two gains tie, and a tie is the one thing the two may break differently)
    x2 = rng.integers(0, 200, 700) / 200
    y2 = (rng.random(700) < 0.2 + 0.6 * x2).astype(float)
    w2 = rng.exponential(size=700)
    np.testing.assert_allclose(boosted_calibration(x2, y2, xq, w2), _hgb(x2, y2, xq, w2), atol=1e-6)
    # > 255 distinct scores: quantile bins (unweighted, as scikit-learn bins unweighted rows)
    x3 = rng.random(300)
    y3 = (rng.random(300) < x3).astype(float)
    np.testing.assert_allclose(boosted_calibration(x3, y3, xq), _hgb(x3, y3, xq), atol=1e-6)


# ---------------------------------------------------------------------------------------------------- the estimate
@pytest.mark.heavy
def test_uniform_weights_give_the_unweighted_calibrated_estimate():
    # constant weights (n_s = n_t, so the implied h is 0.5 and no cap binds) change nothing: PAPE is then the
    # unweighted class-score calibration, and its estimate the paper's expected accuracy
    # mean_t[c(p)·1[ŷ = 1] + (1 − c(p))·1[ŷ = 0]], computed here with scikit-learn's booster
    rng = np.random.default_rng(1)
    p_s, p_t = rng.random(300), rng.random(300)
    y_s = (rng.random(300) < p_s ** 1.5).astype(int)
    P = _binary_pape(p_s, y_s, p_t, np.ones(300))
    c = _hgb(p_s, y_s, p_t)
    expected = np.mean(np.where(p_t > 0.5, c, 1 - c))
    assert point_estimate(P, "pape") == pytest.approx(expected, abs=1e-6)


@pytest.mark.heavy
def test_calibrated_scores_and_no_shift_recover_the_accuracy():
    # y ~ Bernoulli(p) on both sides: the expected accuracy of ŷ = 1[p > 1/2] is mean(max(p, 1 − p)) (≈ 0.75)
    rng = np.random.default_rng(2)
    p_s, p_t = rng.random(3000), rng.random(1000)
    y_s = (rng.random(3000) < p_s).astype(int)
    est = point_estimate(_binary_pape(p_s, y_s, p_t, np.ones(3000)), "pape")
    assert est == pytest.approx(np.mean(np.maximum(p_t, 1 - p_t)), abs=0.015)


def _selection_shift(seed: int, n: int = 4000):
    """A pure covariate shift built by selection on x: population x = (x1, x2) ~ N(0, I), P(y=1|x) = σ(2 x1 + 3 x2);
    the model scores σ(2 x1) (it never saw x2); source rows are kept with P(s=1|x) = exp(−x2²/4), so the source
    has less of x2's noise and the model looks more accurate there; the target is the population. The true
    density ratio p_t/p_s ∝ 1/P(s=1|x) is given as the stored weights (mean 1): PAPE's weights from a perfect
    domain classifier."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    q = 1 / (1 + np.exp(-(2 * X[:, 0] + 3 * X[:, 1])))
    y = (rng.random(n) < q).astype(int)
    keep_p = np.exp(-X[:, 1] ** 2 / 4)
    src = rng.random(n) < keep_p
    tgt = rng.random(n) < 0.5
    score = 1 / (1 + np.exp(-2 * X[:, 0]))
    w = 1 / keep_p[src]
    P = _binary_pape(score[src], y[src], score[tgt], w / w.mean())
    pred = score[tgt] > 0.5
    truth = float(np.mean(np.where(pred, q[tgt], 1 - q[tgt])))  # expected accuracy on the batch's rows
    return P, truth


@pytest.mark.heavy
def test_pape_beats_plain_cbpe_under_covariate_shift_by_selection():
    err = {"pape": [], "cbpe": []}
    for seed in range(4):
        P, truth = _selection_shift(seed)
        for m in err:
            err[m].append(abs(point_estimate(P, m) - truth))
    # cbpe (source calibration) is ≈ 0.02 too high on these draws, PAPE ≈ 0.005 off
    assert np.mean(err["pape"]) < 0.5 * np.mean(err["cbpe"])
    assert np.mean(err["pape"]) < 0.01


@pytest.mark.heavy
def test_multiclass_is_one_vs_rest_renormalised():
    rng = np.random.default_rng(3)
    n, k = 300, 3
    logits = rng.normal(size=(n, k)) * 2
    p_s = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y_s = np.array([rng.choice(k, p=row) for row in p_s])
    p_s = np.round(p_s, 2)  # ≤ 101 distinct scores per class: one bin each, as scikit-learn bins them
    p_t = rng.dirichlet(np.ones(k), size=200)
    w = rng.exponential(size=n)
    got = pape_posteriors(p_s, y_s, p_t, w)
    cal = np.column_stack([_hgb(p_s[:, c], y_s == c, p_t[:, c], w) for c in range(k)])
    np.testing.assert_allclose(got, cal / cal.sum(axis=1, keepdims=True), atol=1e-5)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-12)


# ---------------------------------------------------------------------------------------------------- machinery
def test_bootstrap_resample_is_the_method_on_the_resampled_rows():
    P, _ = _selection_shift(4, n=500)
    rng = np.random.default_rng(0)
    r = rng.integers(0, len(P.y_source), len(P.y_source))
    sub = StoredPredictions("m", P.classes, P.y_source[r], P.proba_source[r], P.proba_target, P.folds[r],
                            P.weights[r])
    assert _method_fn("pape", P)(r) == pytest.approx(point_estimate(sub, "pape"), abs=1e-12)


@pytest.mark.heavy
def test_pape_through_estimate_and_paired_draws():
    P, _ = _selection_shift(5, n=500)
    one = estimate_from_predictions(P, "pape", n_boot=4, random_state=0)
    assert one.method == "pape" and one.accuracy == pytest.approx(point_estimate(P, "pape"), abs=1e-12)
    assert one.ci_low < one.accuracy < one.ci_high
    both = estimate_methods(P, ["pape", "cbpe"], n_boot=4, random_state=0)
    assert both["pape"].accuracy == one.accuracy and both["pape"].details["se_source"] == one.details["se_source"]
    a, b, da, db = paired_draws(P, P, "pape", shared_source=True, n_boot=3, random_state=0)
    assert a == b == pytest.approx(one.accuracy, abs=1e-12)
    np.testing.assert_array_equal(da, db)


def test_pape_needs_weights():
    P = _binary_pape(np.array([0.2, 0.8] * 20), np.array([0, 1] * 20), np.array([0.3, 0.7]), None)
    with pytest.raises(ValueError, match="importance weights"):
        point_estimate(P, "pape")


def test_pape_is_a_method_but_not_in_the_preregistered_default():
    assert "pape" in METHODS and "pape" in WEIGHTED_METHODS
    # the default is chosen only by the rule of reports/estimation.md (revision 3): PAPE does not enter it
    assert (AUTO_METHOD, AUTO_INTERVAL) == ("median", "model")
    assert "pape" not in MEDIAN_COMPONENTS and "pape" not in SHIFT_MODELS


def test_candidate_predictions_are_stored_predictions_fits_and_a_matching_entry_is_not_fitted_again():
    """``candidate_predictions`` makes the k fold fits and the served fit ``stored_predictions`` makes for that
    candidate (same numbers, computed twice independently); ``stored_predictions(reuse=...)`` takes an entry on
    the same labels, folds and target rows as it is (an altered copy comes back altered: it was not refitted),
    with this call's importance weights, and fits again an entry on other folds, or any entry when TrCV runs."""
    from dataclasses import replace

    from shiftlib.estimation import candidate_predictions
    from shiftlib.selection.candidates import Candidate

    X, y = load_breast_cancer(return_X_y=True)
    X = X[:, :5]
    sp = split_biased(X, y, "kmm_threshold", random_state=0, feature=0)
    Xs, ys, Xt = X[sp.source], y[sp.source], X[sp.target]
    lr = make_pipeline(StandardScaler(), LogisticRegression())
    ref = stored_predictions({"LR": lr, "NB": "NB"}, Xs, ys, Xt, k=4, random_state=2)
    P, served = candidate_predictions(Candidate("LR", lr), Xs, ys, Xt, k=4, random_state=2)
    assert P.weights is None and ref[0].weights is not None
    np.testing.assert_array_equal(P.folds, ref[0].folds)
    np.testing.assert_allclose(P.proba_source, ref[0].proba_source, rtol=0, atol=1e-12)
    np.testing.assert_allclose(P.proba_target, ref[0].proba_target, rtol=0, atol=1e-12)
    np.testing.assert_allclose(served.predict_proba(Xt), ref[0].proba_target, rtol=0, atol=1e-12)

    altered = replace(P, proba_source=P.proba_source[:, ::-1].copy())
    got = stored_predictions({"LR": lr, "NB": "NB"}, Xs, ys, Xt, k=4, random_state=2, reuse=[altered])
    np.testing.assert_array_equal(got[0].proba_source, altered.proba_source)
    np.testing.assert_array_equal(got[0].weights, ref[0].weights)
    np.testing.assert_allclose(got[1].proba_source, ref[1].proba_source, rtol=0, atol=1e-12)
    other = replace(altered, folds=(altered.folds + 1) % 4)
    again = stored_predictions({"LR": lr}, Xs, ys, Xt, k=4, random_state=2, reuse=[other])
    np.testing.assert_allclose(again[0].proba_source, ref[0].proba_source, rtol=0, atol=1e-12)
    # TrCV's residuals need the candidate's own fold fits: with trcv=True nothing is taken from reuse
    trcv = stored_predictions({"LR": lr}, Xs, ys, Xt, k=4, random_state=2, trcv=True, reuse=[altered])
    np.testing.assert_allclose(trcv[0].proba_source, ref[0].proba_source, rtol=0, atol=1e-12)
    assert trcv[0].trcv_residuals is not None and len(trcv[0].trcv_residuals) == len(ys)


def test_fold_split_exists_exactly_when_the_split_can_be_made():
    """10 rows of one class and 2 of another: 10 folds exist (the rare class in 2 holdout folds only), 11 do not
    (no class has 11 rows); a class of 1 row, or a single class, has no split."""
    from shiftlib.estimation import fold_split_exists

    y = np.array([0] * 10 + [1] * 2)
    assert fold_split_exists(y, 10) and fold_split_exists(np.where(y == 1, "b", "a"), 10)
    assert not fold_split_exists(y, 11)
    assert not fold_split_exists(np.array([0] * 10 + [1]), 2)
    assert not fold_split_exists(np.zeros(12), 2)


def test_groups_keep_each_case_in_one_fold_and_the_memorising_learner_loses_its_edge() -> None:
    """``groups``: a StratifiedGroupKFold. Every case's rows share a fold (a property of the split); fewer cases
    than folds is no split. 60 cases of 4 identical records each, the label a coin flip per case and the features
    noise per case: a 1-nearest-neighbour learner that memorises cases is right on every held-out record when a
    case straddles folds (its twin is in training), and at chance when cases are kept whole — the inflation
    helper-39 saw (0.934 → 0.658)."""
    from sklearn.neighbors import KNeighborsClassifier

    from shiftlib.estimation import candidate_predictions, fold_split_exists, stored_predictions
    from shiftlib.selection import Candidate

    rng = np.random.default_rng(0)
    case = np.repeat(np.arange(60), 4)
    X = np.repeat(rng.normal(size=(60, 3)), 4, axis=0)
    y = np.repeat(rng.integers(0, 2, 60), 4)
    Xt = rng.normal(size=(40, 3))
    assert fold_split_exists(y, 10, case) and not fold_split_exists(y, 10, case % 9)
    cand = Candidate("1nn", KNeighborsClassifier(n_neighbors=1))
    whole, _ = candidate_predictions(cand, X, y, Xt, k=10, random_state=0, groups=case)
    split, _ = candidate_predictions(cand, X, y, Xt, k=10, random_state=0)
    assert all(len(np.unique(whole.folds[case == c])) == 1 for c in range(60))
    acc = lambda P: float(np.mean(P.proba_source.argmax(axis=1) == P.y_source))  # noqa: E731
    assert acc(split) > 0.95 and 0.3 < acc(whole) < 0.7
    [P] = stored_predictions([cand], X, y, Xt, k=10, random_state=0, need_weights=False, groups=case)
    assert np.array_equal(P.folds, whole.folds)  # the training stage's split is the estimation stage's
    with pytest.raises(ValueError, match="the source rows record 9 cases: lower k"):
        candidate_predictions(cand, X, y, Xt, k=10, random_state=0, groups=case % 9)


def test_a_grouped_split_whose_training_folds_lack_a_class_is_no_split() -> None:
    """helper-40: every positive row in one case, k = 5 — that case's fold trains on one class only."""
    from shiftlib.estimation import fold_split_exists

    y = np.array([1] * 10 + [0] * 90)
    groups = np.r_[np.zeros(10, int), np.arange(90) % 20 + 1]
    assert not fold_split_exists(y, 5, groups)
    assert fold_split_exists(y, 5, np.r_[np.arange(10) % 5, np.arange(90) % 20 + 5])  # positives in five cases
