"""tasks.training and tasks.recalibration log ``Pipeline([prepare, model])``: the ingest stage's fitted
preprocessor in front of the candidate, so the logged model scores the target's raw rows (as the user gave
them: text levels, a level the source never saw, missing values, an id column) and returns exactly the
probabilities the stage stored from the encoded target table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from tasks.ingest import PREPROCESSOR, PREPROCESSOR_STAGE, ingest, load_preprocessor, load_xy
from tasks.recalibration import recalibration
from tasks.store import CorruptStageError, StageStore
from tasks.training import collect_training, train_learner


def _raw_tables(tmp_path):
    rng = np.random.default_rng(3)
    n = 80
    src = pd.DataFrame({"cust_id": np.arange(n), "age": rng.integers(20, 70, n),
                        "income": rng.normal(50, 10, n).round(2), "plan": rng.choice(["basic", "gold"], n),
                        "promo": rng.choice([True, False], n)})
    src.loc[[3, 7], "income"] = np.nan
    src["y"] = np.where(src["income"].fillna(50) + 15 * (src["plan"] == "gold") + rng.normal(0, 8, n) > 62,
                        "yes", "no")  # positive ("yes", the larger label) is the minority
    tgt = pd.DataFrame({"cust_id": np.arange(1000, 1000 + n), "age": rng.integers(30, 80, n),
                        "income": rng.normal(55, 10, n).round(2),
                        "plan": rng.choice(["basic", "gold", "platinum"], n), "promo": rng.choice([True, False], n)})
    tgt.loc[[0, 5], "income"] = np.nan
    tgt.loc[[2, 9], "plan"] = np.nan
    src.to_csv(tmp_path / "src.csv", index=False)
    tgt.to_csv(tmp_path / "tgt.csv", index=False)
    return src, tgt


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("prep")
    _raw_tables(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    exp = client.create_experiment("prep", artifact_location=(tmp_path / "art").as_uri())
    parent = client.create_run(exp).info.run_id
    store = StageStore(tmp_path / "runs", "r1")
    # an id column: dropped from the features (the flow's preflight warns of it), kept in the input
    m = ingest.fn(store, f"file:{tmp_path / 'src.csv'}", f"file:{tmp_path / 'tgt.csv'}", "y")
    assert "cust_id" in m["extra"]["dropped_columns"]
    kw = {"seed": 0, "cv_folds": 3, "tracking_uri": uri, "experiment_id": exp, "parent_run_id": parent}
    res = train_learner.fn(store, "LR", **kw)
    collect_training.fn(store, [res], 0, 3)
    return store, kw, res, tmp_path


def test_logged_pipeline_scores_raw_rows_as_the_stage_predicted(trained):
    import mlflow

    store, kw, res, tmp_path = trained
    model = mlflow.pyfunc.load_model(res["model_uri"])
    raw = pd.read_csv(tmp_path / "tgt.csv")  # the target as the user gave it, read back from the file
    assert model.metadata.get_input_schema().input_names() == ["cust_id", "age", "income", "plan", "promo"]
    p = np.asarray(model.predict(raw))
    saved = res["predictions"].sort_values("_row")[["proba_0", "proba_1"]].to_numpy()
    np.testing.assert_array_equal(p, saved)  # same numbers as the candidate on the encoded target table
    # and the pipeline's first step is exactly the ingest encoding of those rows
    _, _, X_t = load_xy(store)
    pd.testing.assert_frame_equal(load_preprocessor(store).transform(raw), X_t, check_exact=True)
    # a batch with a missing value where neither table had one still scores (median, no new column)
    one = raw.head(1).astype({"age": "float64"}).assign(age=np.nan)
    assert np.isfinite(np.asarray(model.predict(one))).all()


def test_recalibrated_pipeline_scores_raw_rows_with_p_prime(trained):
    import mlflow

    store, kw, _, tmp_path = trained
    out = recalibration.fn(store, "LR", beta="balanced", **kw)
    probs = store.read_table("recalibration", "probabilities")
    p = np.asarray(mlflow.pyfunc.load_model(out["model_uri"]).predict(pd.read_csv(tmp_path / "tgt.csv")))
    np.testing.assert_array_equal(p[:, 1], probs["p_prime"].to_numpy())  # the registry would serve p′


def test_preprocessor_file_is_hash_checked_and_a_damaged_one_recomputes_ingest(trained):
    store, _, _, tmp_path = trained
    path = store.path(PREPROCESSOR_STAGE, PREPROCESSOR)
    good = path.read_bytes()
    path.write_bytes(good[:-10])
    with pytest.raises(CorruptStageError, match="does not match the SHA-256"):
        load_preprocessor(store)
    again = StageStore(tmp_path / "runs", "r2")
    m = ingest.fn(again, f"file:{tmp_path / 'src.csv'}", f"file:{tmp_path / 'tgt.csv'}", "y")
    assert "reused_from" not in m  # the damaged preprocessor is not adopted with its intact tables
    assert again.path(PREPROCESSOR_STAGE, PREPROCESSOR).read_bytes() == good  # recomputed, byte for byte
    path.write_bytes(good)


def test_a_candidate_that_cannot_be_fitted_is_skipped_and_named(trained, tmp_path):
    """Weights that are 0 on every row of a class: that weighted candidate is skipped with the reason (the others
    go on), the training manifest names it, and a stage where no candidate can be fitted says so."""
    import shutil

    store0, kw, res, _ = trained
    _, y_s, _ = load_xy(store0)

    def weighted(run: str, w: np.ndarray) -> StageStore:
        """A run folder with the trained run's ingest and these kmm weights."""
        s = StageStore(tmp_path / "runs", run)
        for stage in (PREPROCESSOR_STAGE, "ingest"):
            shutil.copytree(store0.stage_dir(stage), s.stage_dir(stage))
        s.write_stage("weights", {"weights": pd.DataFrame({"_row": np.arange(len(y_s)), "kmm": w})},
                      key="test", params={}, inputs={})
        return s

    store = weighted("r2", np.where(y_s == y_s.max(), 0.0, 1.0))  # the positive class gets no weight
    ok = train_learner.fn(store, "NB", **kw)
    bad = train_learner.fn(store, "NB", "kmm", **kw)
    assert "skipped" not in ok and bad["name"] == "NB+kmm"
    assert "weights are 0 on every row of class yes" in bad["skipped"]  # the user's label, not its code 1
    manifest = collect_training.fn(store, [ok, bad], 0, 3)
    assert list(manifest["extra"]["models"]) == ["NB"]
    assert manifest["extra"]["skipped"] == {"NB+kmm": bad["skipped"]}
    assert set(store.read_table("training", "learners")["learner"]) == {"NB"}
    with pytest.raises(ValueError, match="no candidate learner could be fitted.*NB\\+kmm"):
        collect_training.fn(store, [bad], 0, 3)
    # weights on 3 rows of one class and 30 of the other: SVM's inner 5-fold calibration cannot be fitted, and the
    # reason says what the weights rest on (counted here from w), not only scikit-learn's sentence
    w = np.zeros(len(y_s))
    w[np.flatnonzero(y_s == y_s.max())[:3]] = 1.0
    w[np.flatnonzero(y_s != y_s.max())[:30]] = 1.0
    few = train_learner.fn(weighted("r3", w), "SVM", "kmm", **kw)
    assert few["skipped"].endswith(f"(the kmm weights are positive on 33 of {len(y_s)} source rows, 3 of them in "
                                   "the smallest class)")
    # weights positive on one row of class yes: the fit could use it, but a CV training fold holds none of it; the
    # reason says so (it said the weighting found almost no rows like the target, which was not the case)
    w = np.ones(len(y_s))
    w[np.flatnonzero(y_s == y_s.max())[1:]] = 0.0
    fold = train_learner.fn(weighted("r4", w), "NB", "kmm", **kw)
    assert fold["skipped"] == ("in a training fold of its 3-fold source CV the kmm weights are 0 on every row of class "
                               "yes (they are positive on only 1 of its rows), so its source-CV accuracy cannot be measured")
