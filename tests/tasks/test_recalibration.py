"""tasks.recalibration: the stage's probabilities, out-of-fold table and ``calibration.*`` metrics equal
shiftlib.calibration run independently with the chosen candidate's learner, weights and seed (p′ is eq. 9 of p_s at
the realised β, τ′ eq. 12); the metrics are logged on the parent and a nested run; the target metrics need held-out
labels; a second run reuses the stage, and a changed β, fold count, seed or tracking store recomputes it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer
from threadpoolctl import threadpool_limits

import tasks.recalibration
from shiftlib.calibration import UndersampledClassifier, oof_undersampling, undersampling_metrics
from shiftlib.learners import make_learner
from tasks.ingest import ROW, ingest, load_target_labels, load_xy
from tasks.recalibration import RecalibrationManifest, read_recalibration, recalibration
from tasks.store import StageStore
from tasks.tracking import RunContext

SEED, FOLDS, BETA = 4, 3, 0.7
MODELS = {"LR": {"learner": "LR", "weighting": "none"}, "LR+kmm": {"learner": "LR", "weighting": "kmm"},
          "CSLR": {"learner": "CSLR", "weighting": "none"}}


def _csv(tmp, *, target_labels: str = "both classes"):
    """breast_cancer's first 6 columns with its label as text: "malignant" (the larger label, so code 1) is the
    minority (36 % of the 260 source rows, 23 % of the 149 target rows: a prior shift). The target's labels are in
    its file (held out by ingest) with ``target_labels="both classes"``; ``"none"``: no label column; ``"one
    class"``: only its benign rows, labeled."""
    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    t = X.iloc[:, :6].assign(diagnosis=np.where(y == 0, "malignant", "benign"))
    t.iloc[160:420].to_csv(tmp / "src.csv", index=False)
    tgt = {"both classes": t.iloc[420:], "none": t.iloc[420:].drop(columns="diagnosis"),
           "one class": t.iloc[420:].query("diagnosis == 'benign'")}[target_labels]
    tgt.to_csv(tmp / "tgt.csv", index=False)
    return f"file:{tmp / 'src.csv'}", f"file:{tmp / 'tgt.csv'}"


def _store(root, run_id, refs, label="diagnosis") -> StageStore:
    """A run with the real ingest stage (its preprocessor serves the logged model), the candidates' training
    manifest and kmm weights drawn at random."""
    s = StageStore(root, run_id)
    ingest.fn(s, *refs, label)
    n = s.manifest("ingest")["files"]["source.parquet"]["rows"]
    s.write_stage("training", {"learners": pd.DataFrame({"learner": list(MODELS)})}, key="k-train", params={},
                  inputs={}, extra={"models": MODELS})
    w = np.random.default_rng(1).uniform(0.2, 2.0, n)
    s.write_stage("weights", {"weights": pd.DataFrame({ROW: np.arange(n), "kmm": w})}, key="k-w", params={}, inputs={})
    return s


@pytest.fixture
def figures(monkeypatch):
    """What each reliability diagram is drawn from: (labels, {curve: probabilities})."""
    drawn: list[tuple[np.ndarray, dict]] = []
    real = tasks.recalibration.reliability_figure

    def record(y, curves):
        drawn.append((np.asarray(y), {k: np.asarray(v) for k, v in curves.items()}))
        return real(y, curves)

    monkeypatch.setattr(tasks.recalibration, "reliability_figure", record)
    return drawn


def _expected(store, *, beta, weighted: bool, seed=SEED):
    """The stage's numbers computed here from shiftlib on the ingested rows."""
    X_s, y_s, X_t = load_xy(store)
    w = store.read_table("weights", "weights")["kmm"].to_numpy() if weighted else None
    base = make_learner("LR", random_state=seed)
    with threadpool_limits(1):
        oof = oof_undersampling(base, X_s, y_s, beta=beta, n_splits=FOLDS, random_state=seed, sample_weight=w,
                                pos_label=1)
        us = UndersampledClassifier(clone(base), beta=beta, random_state=seed, pos_label=1).fit(X_s, y_s,
                                                                                               sample_weight=w)
        full = clone(base).fit(X_s, y_s, sample_weight=w)
        probs = pd.DataFrame({ROW: np.arange(len(X_t)), "p_s": us.predict_proba_undersampled(X_t)[:, 1],
                              "p_prime": us.predict_proba(X_t)[:, 1], "p_full": full.predict_proba(X_t)[:, 1]})
        em = us.estimate_target_prior(X_t).prior
    metrics = {f"calibration.{k}": v for k, v in undersampling_metrics(
        oof["y"], oof["p_s"], oof["p_prime"], oof["p_full"], 0.5, oof["tau_prime"]).items()}
    metrics |= {"calibration.beta": us.beta_, "calibration.tau_prime": us.threshold_,
                "calibration.train_prior": float(np.mean(y_s == 1)), "calibration.target_prior_em": em}
    return oof, probs, metrics, us, y_s


def _refuse(*args, **kwargs):
    raise AssertionError("the recalibration stage was recomputed")


class _Recomputed(Exception):
    pass


def _sentinel(*args, **kwargs):
    raise _Recomputed


def test_weighted_candidate_with_labeled_target_equals_shiftlib_is_logged_and_reused(
        tmp_path, mlflow_parent, figures, monkeypatch):
    uri, client, exp, new_parent = mlflow_parent
    refs = _csv(tmp_path)
    store, parent = _store(tmp_path / "runs", "r1", refs), new_parent()
    ctx = RunContext(uri, exp, parent, "flow-1", SEED)
    with threadpool_limits(1):
        out = recalibration.fn(store, "LR+kmm", beta=BETA, ctx=ctx, cv_folds=FOLDS)
    oof, probs, metrics, us, y_s = _expected(store, beta=BETA, weighted=True)
    y_t = load_target_labels(store)
    assert set(np.unique(y_t)) == {0, 1}

    # the tables: shiftlib's, the out-of-fold rows numbered in source order
    pd.testing.assert_frame_equal(store.read_table("recalibration", "oof"),
                                  oof.assign(**{ROW: np.arange(len(y_s))})[[ROW, *oof.columns]])
    got = store.read_table("recalibration", "probabilities")
    pd.testing.assert_frame_equal(got, probs)
    # β is the realised share of the negatives kept; p′ is eq. 9 of p_s and τ′ eq. 12 of τ_s = 0.5 at that β
    n_neg = int(np.sum(y_s == 0))
    beta = round(BETA * n_neg) / n_neg
    assert us.beta_ == pytest.approx(beta, abs=1e-15) and us.pos_label_ == 1 and np.mean(y_s == 1) < 0.5
    np.testing.assert_allclose(got["p_prime"], beta * got["p_s"] / (beta * got["p_s"] - got["p_s"] + 1), atol=1e-12)
    assert out["metrics"]["calibration.tau_prime"] == pytest.approx(beta * 0.5 / (beta * 0.5 - 0.5 + 1), abs=1e-12)

    # the metrics: out of fold, and on the held-out target labels with the same thresholds
    metrics |= {f"calibration.target.{k}": v for k, v in undersampling_metrics(
        y_t, probs["p_s"], probs["p_prime"], probs["p_full"], 0.5, us.threshold_).items()}
    metrics["calibration.target.true_prior"] = float(np.mean(y_t == 1))
    assert out["metrics"] == pytest.approx(metrics, abs=1e-12)
    assert client.get_run(parent).data.metrics == pytest.approx(metrics, abs=1e-12)
    assert [a.path for a in client.list_artifacts(parent, "recalibration")] == ["recalibration/reliability.png"]
    (y_fig, curves), = figures
    np.testing.assert_array_equal(y_fig, y_t)  # drawn on the labeled target rows
    np.testing.assert_array_equal(np.c_[tuple(curves.values())], probs[["p_s", "p_prime", "p_full"]].to_numpy())

    # the nested run under the parent, holding the corrected model
    nested = client.search_runs([exp], f"tags.mlflow.parentRunId = '{parent}'")
    assert len(nested) == 1
    run = nested[0]
    assert run.data.metrics == pytest.approx(metrics, abs=1e-12)
    assert {k: run.data.params[k] for k in ("candidate", "beta", "seed")} == {"candidate": "LR+kmm", "beta": str(BETA),
                                                                              "seed": str(SEED)}
    assert float(run.data.params["beta_realised"]) == pytest.approx(beta, abs=1e-12)
    assert {k: run.data.tags[k] for k in ("shiftflow.learner", "shiftflow.weighting", "shiftflow.recalibrated",
                                          "prefect.flow_run_id")} == {"shiftflow.learner": "LR",
                                                                      "shiftflow.weighting": "kmm",
                                                                      "shiftflow.recalibrated": "true",
                                                                      "prefect.flow_run_id": "flow-1"}
    assert out["model_uri"].startswith("models:/")
    assert client.get_logged_model(out["model_uri"].removeprefix("models:/")).source_run_id == run.info.run_id
    assert out["candidate"] == "LR+kmm"
    assert read_recalibration(store) == RecalibrationManifest(BETA, out["model_uri"], out["metrics"],
                                                              store.manifest("recalibration")["code_version"])

    # the same run again in another folder: adopted, the same metrics logged on that run's parent, no new model
    monkeypatch.setattr(tasks.recalibration, "_compute", _refuse)
    again, parent2 = _store(tmp_path / "runs", "r2", refs), new_parent()
    ctx2 = RunContext(uri, exp, parent2, "flow-2", SEED)
    assert recalibration.fn(again, "LR+kmm", beta=BETA, ctx=ctx2, cv_folds=FOLDS) == out
    assert again.manifest("recalibration")["reused_from"] == "r1"
    assert client.get_run(parent2).data.metrics == client.get_run(parent).data.metrics
    np.testing.assert_array_equal(figures[-1][0], y_t)

    # another β, fold count, seed, candidate or tracking store: computed anew
    monkeypatch.setattr(tasks.recalibration, "_compute", _sentinel)
    other_store = RunContext(f"sqlite:///{tmp_path / 'other.db'}", exp, parent2, "flow-2", SEED)
    for chosen, kw in (("LR+kmm", {"beta": "balanced", "ctx": ctx2, "cv_folds": FOLDS}),
                       ("LR+kmm", {"beta": BETA, "ctx": ctx2, "cv_folds": FOLDS + 1}),
                       ("LR+kmm", {"beta": BETA, "ctx": RunContext(uri, exp, parent2, "flow-2", SEED + 1),
                                   "cv_folds": FOLDS}),
                       ("LR", {"beta": BETA, "ctx": ctx2, "cv_folds": FOLDS}),
                       ("LR+kmm", {"beta": BETA, "ctx": other_store, "cv_folds": FOLDS})):
        with pytest.raises(_Recomputed):
            recalibration.fn(again, chosen, **kw)


@pytest.mark.parametrize("target_labels", ["none", "one class"])
def test_unweighted_candidate_without_two_class_target_labels_logs_no_target_metrics(
        tmp_path, mlflow_parent, figures, target_labels):
    """No held-out labels, or labels of one class (no AUC, no G-mean): the source's out-of-fold metrics only."""
    uri, client, exp, new_parent = mlflow_parent
    store, parent = _store(tmp_path / "runs", "r", _csv(tmp_path, target_labels=target_labels)), new_parent()
    y_t = load_target_labels(store)
    assert y_t is None if target_labels == "none" else set(y_t) == {0}
    with threadpool_limits(1):
        out = recalibration.fn(store, "LR", beta="balanced", ctx=RunContext(uri, exp, parent, "", SEED),
                               cv_folds=FOLDS)
    oof, probs, metrics, us, y_s = _expected(store, beta="balanced", weighted=False)
    pd.testing.assert_frame_equal(store.read_table("recalibration", "probabilities"), probs)
    assert us.beta_ == pytest.approx(np.sum(y_s == 1) / np.sum(y_s == 0), abs=1e-15)  # balanced: N+/N−
    assert out["metrics"] == pytest.approx(metrics, abs=1e-12)
    assert client.get_run(parent).data.metrics == pytest.approx(metrics, abs=1e-12)
    assert read_recalibration(store).beta == "balanced"
    (y_fig, curves), = figures
    np.testing.assert_array_equal(y_fig, oof["y"])  # no labels: drawn on the out-of-fold source rows
    np.testing.assert_allclose(np.c_[tuple(curves.values())], oof[["p_s", "p_prime", "p_full"]].to_numpy(),
                               atol=1e-15)


def test_a_learner_that_needs_the_target_is_refused_before_anything_is_written(tmp_path, mlflow_parent):
    uri, _, exp, new_parent = mlflow_parent
    store = _store(tmp_path / "runs", "r", _csv(tmp_path, target_labels="none"))
    with pytest.raises(ValueError, match="CSLR learns from the target rows"):
        recalibration.fn(store, "CSLR", beta=BETA, ctx=RunContext(uri, exp, new_parent(), "", SEED), cv_folds=FOLDS)
    assert not store.has_stage("recalibration")


def test_a_source_of_three_classes_is_refused(tmp_path, mlflow_parent):
    uri, _, exp, new_parent = mlflow_parent
    rng = np.random.default_rng(0)
    src = pd.DataFrame({"x": rng.normal(size=60), "y": ["a", "b", "c"] * 20})
    src.to_csv(tmp_path / "s.csv", index=False)
    src.drop(columns="y").head(20).to_csv(tmp_path / "t.csv", index=False)
    store = _store(tmp_path / "runs", "r", (f"file:{tmp_path / 's.csv'}", f"file:{tmp_path / 't.csv'}"), "y")
    with pytest.raises(ValueError, match="defined for two classes; this source has 3"):
        recalibration.fn(store, "LR", beta=BETA, ctx=RunContext(uri, exp, new_parent(), "", SEED), cv_folds=FOLDS)
    assert not store.has_stage("recalibration")
