"""tasks.training and tasks.recalibration log ``Pipeline([prepare, model])``: the ingest stage's fitted
preprocessor in front of the candidate, so the logged model scores the target's raw rows (as the user gave
them: text levels, a level the source never saw, missing values, an id column) and returns exactly the
probabilities the stage stored from the encoded target table."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from tasks.ingest import PREPROCESSOR, PREPROCESSOR_STAGE, ingest, load_preprocessor, load_xy
from tasks.recalibration import recalibration
from tasks.store import CorruptStageError, StageStore
from tasks.tracking import RunContext
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
    kw = {"ctx": RunContext(tracking_uri=uri, experiment_id=exp, parent_run_id=parent, flow_run_id="", seed=0),
          "cv_folds": 3}
    res = train_learner.fn(store, "LR", **kw)
    collect_training.fn(store, [res], 0, 3)
    return store, kw, res, tmp_path


def test_logged_pipeline_scores_raw_rows_as_the_stage_predicted(trained):
    import mlflow
    import mlflow.sklearn

    store, kw, res, tmp_path = trained
    model = mlflow.pyfunc.load_model(res["model_uri"])
    raw = pd.read_csv(tmp_path / "tgt.csv")  # the target as the user gave it, read back from the file
    assert model.metadata.get_input_schema().input_names() == ["cust_id", "age", "income", "plan", "promo"]
    out = model.predict(raw)
    # it speaks the user's labels (issue 29): the class label, and a probability column per class named by it
    classes = store.manifest("ingest")["extra"]["classes"]
    assert list(out.columns) == ["predicted", *(f"proba_{c}" for c in classes)]
    p = out[[f"proba_{c}" for c in classes]].to_numpy()
    saved = res["predictions"].sort_values("_row")[["proba_0", "proba_1"]].to_numpy()
    np.testing.assert_array_equal(p, saved)  # same numbers as the candidate on the encoded target table
    assert out["predicted"].tolist() == [classes[i] for i in saved.argmax(axis=1)]
    assert model.metadata.get_output_schema().input_names() == list(out.columns)  # the signature says so
    # the scikit-learn flavor is the pipeline: class codes' probabilities, as the champion gate reads them
    np.testing.assert_array_equal(mlflow.sklearn.load_model(res["model_uri"]).predict_proba(raw), saved)
    # and the pipeline's first step is exactly the ingest encoding of those rows
    _, _, X_t = load_xy(store)
    pd.testing.assert_frame_equal(load_preprocessor(store).transform(raw), X_t, check_exact=True)
    # a batch with a missing value where neither table had one still scores (median, no new column)
    one = raw.head(1).astype({"age": "float64"}).assign(age=np.nan)
    assert np.isfinite(model.predict(one).filter(like="proba_").to_numpy()).all()


def test_recalibrated_pipeline_scores_raw_rows_with_p_prime(trained):
    import mlflow

    store, kw, _, tmp_path = trained
    out = recalibration.fn(store, "LR", beta="balanced", **kw)
    probs = store.read_table("recalibration", "probabilities")
    p = mlflow.pyfunc.load_model(out["model_uri"]).predict(pd.read_csv(tmp_path / "tgt.csv"))
    positive = store.manifest("ingest")["extra"]["classes"][1]
    np.testing.assert_array_equal(p[f"proba_{positive}"].to_numpy(), probs["p_prime"].to_numpy())  # p′ is served


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
    assert list(manifest.models) == ["NB"]
    assert manifest.skipped == {"NB+kmm": bad["skipped"]}
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


def test_the_estimation_reads_the_training_fold_fits_and_fits_no_candidate(trained, tmp_path, monkeypatch,
                                                                          caplog):
    """The training parts' source CV is the estimation's k-fold split: each part stores those fits, the
    estimation stage reads them and fits no candidate, and its estimates equal an independent shiftlib
    computation that fits every candidate itself. The source-CV accuracy is the stored fits' OOF accuracy. A
    training on other folds leaves the estimation to fit every candidate, with the same numbers; so does a damaged
    fold table, for its candidate."""
    import shutil

    import shiftlib.estimation as est
    from shiftlib.estimation import estimate_accuracies
    from shiftlib.learners import make_learner
    from tasks.estimation import EstimationSettings, estimation

    store0, kw, _, _ = trained
    ctx, names = kw["ctx"], ["NB", "LR"]
    X_s, y_s, X_t = load_xy(store0)
    ref = estimate_accuracies({n: make_learner(n, random_state=0, n_rows=len(y_s)) for n in names}, X_s, y_s, X_t,
                              method="auto", k=4, n_boot=20, random_state=0)
    fits = []
    real = est.fit_candidate
    monkeypatch.setattr(est, "fit_candidate", lambda c, *a, **k: fits.append(c.name) or real(c, *a, **k))
    for run, cv_folds, fitted in (("r5", 4, []), ("r6", 3, names * 5)):  # k fold fits + the served fit each
        s = StageStore(tmp_path / "runs", run)
        for stage in (PREPROCESSOR_STAGE, "ingest"):
            shutil.copytree(store0.stage_dir(stage), s.stage_dir(stage))
        res = [train_learner.fn(s, n, ctx=ctx, cv_folds=cv_folds) for n in names]
        collect_training.fn(s, res, 0, cv_folds)
        fits.clear()
        table = estimation.fn(s, ctx=ctx, k=4, run_ids={r["name"]: r["run_id"] for r in res},
                              settings=EstimationSettings(n_boot=20))
        assert sorted(fits) == sorted(fitted)
        for r in table.to_dict("records"):
            e = ref[r["candidate"]]["auto"]
            assert (r["estimate"], r["ci_low"], r["ci_high"]) == pytest.approx((e.accuracy, e.ci_low, e.ci_high),
                                                                              abs=1e-12)
        if cv_folds == 4:
            oof = s.read_table("estimation", "oof")
            for r in res:
                o = oof[oof["candidate"] == r["name"]]
                correct = np.argmax(o[["p_0", "p_1"]].to_numpy(), axis=1) == o["y"].to_numpy()
                assert r["cv"]["accuracy"] == pytest.approx(correct.mean(), abs=1e-12)
            # a damaged fold table: that candidate is fitted again (4 folds + the served fit), the other read
            shutil.rmtree(s.stage_dir("estimation"))
            with open(s.stage_dir("training_parts/NB") / "oof.parquet", "r+b") as f:
                f.seek(10)
                f.write(b"XX")
            fits.clear()
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="shiftflow"):
                again = estimation.fn(s, ctx=ctx, k=4, run_ids={r["name"]: r["run_id"] for r in res},
                                      settings=EstimationSettings(n_boot=20))
            assert fits == ["NB"] * 5
            pd.testing.assert_frame_equal(again, table)
            assert any("1 of them fitted here and 1 read from the training stage's fits" in m for m in caplog.messages)


@pytest.mark.slow  # starts `mlflow models serve` (a scoring server) for one request
def test_the_rest_scoring_server_gives_the_same_labeled_answer(trained):
    """Issue 29: ``mlflow models serve`` on the logged model answers with the class label and the probability
    columns named by class, equal to ``mlflow.pyfunc.load_model(...).predict`` on the same raw rows."""
    import json
    import os
    import subprocess
    import sys
    import time
    import urllib.request

    import mlflow

    from flows.stack import free_port

    store, kw, res, tmp_path = trained
    raw = pd.read_csv(tmp_path / "tgt.csv").head(12)
    local = mlflow.pyfunc.load_model(res["model_uri"]).predict(raw)
    port = free_port()
    # the server execs `uvicorn` from PATH: this interpreter's scripts folder first
    env = dict(os.environ, MLFLOW_TRACKING_URI=kw["ctx"].tracking_uri,
               PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "mlflow", "models", "serve", "-m", res["model_uri"], "-h",
                             "127.0.0.1", "-p", str(port), "--env-manager", "local", "-w", "1"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        body = json.dumps({"dataframe_split": json.loads(raw.to_json(orient="split", index=False))}).encode()
        deadline = time.monotonic() + 300
        while True:
            try:
                req = urllib.request.Request(f"http://127.0.0.1:{port}/invocations", data=body,
                                             headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=30) as r:
                    answer = json.loads(r.read())
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()[-2000:]
                time.sleep(1.0)
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=60)
    served = pd.DataFrame(answer["predictions"])
    assert list(served.columns) == list(local.columns)
    assert served["predicted"].tolist() == local["predicted"].tolist()
    np.testing.assert_allclose(served.filter(like="proba_").to_numpy(), local.filter(like="proba_").to_numpy(),
                               rtol=0, atol=1e-12)
