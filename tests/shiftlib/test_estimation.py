"""shiftlib.estimation: each method against a hand-worked or independent number, interval terms, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from shiftlib.bias import split_biased
from shiftlib.estimation import (
    METHODS,
    AccuracyEstimate,
    StoredPredictions,
    atc_threshold,
    estimate_accuracies,
    estimate_accuracy,
    estimate_from_predictions,
    point_estimate,
    stored_predictions,
)

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
        ({"k": 500}, "rarest source class"),
    ],
)
def test_bad_arguments_name_the_problem(shifted, kwargs, message) -> None:
    Xs, ys, Xt, _ = shifted
    with pytest.raises(ValueError, match=message):
        estimate_accuracy("NB", Xs, ys, Xt, **kwargs)


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
    with pytest.raises(KeyError, match="unknown learner"):
        estimate_accuracy("XGB", Xs, ys, Xt)
    P = stored_predictions("NB", Xs, ys, Xt, need_weights=False, k=5, random_state=0)[0]
    with pytest.raises(ValueError, match="needs importance weights"):
        point_estimate(P, "iwcv")
    with pytest.raises(ValueError, match="n_boot"):
        estimate_from_predictions(P, "cv", n_boot=1)
