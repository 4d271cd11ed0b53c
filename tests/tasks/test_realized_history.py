"""Learning from realised labels in the flow: the history ``shiftflow evaluate`` writes is read back per
deployment, and the served estimate, its interval and the accuracy alert follow the past errors
(``shiftlib.realized``). Numbers are worked by hand (the three batches of ``tests/shiftlib/test_realized.py``)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from flows.evaluate import HISTORY, deployment
from shiftlib.decisions import with_labels_interval
from shiftlib.errors import ShiftflowInputError
from tasks.estimation import (
    REALIZED_HISTORY,
    labeled_estimate,
    realized_history,
    realized_line,
    served_estimate,
)
from tasks.store import StageStore, write_parquet_atomic
from tasks.tracking import RunContext

# three earlier batches of LR: residuals −0.02, −0.01, −0.05 → corrected 0.80 − 0.026667 = 0.773333 ± 0.1034236
PAST = pd.DataFrame({"flow_run_id": ["a", "b", "c"], "candidate": "LR", "estimate": [0.80, 0.70, 0.90],
                     "realized_accuracy": [0.78, 0.69, 0.85], "model_name": "m", "schema": "d1",
                     "evaluated_at": ["2026-01-01", "2026-01-02", "2026-01-03"]})
LOW, MID, HIGH = 0.7733333 - 0.1034236, 0.7733333, 0.7733333 + 0.1034236
ROW = {"candidate": "LR", "method": "median", "estimate": 0.80, "ci_low": 0.75, "ci_high": 0.85, "confidence": 0.95,
       "majority_baseline": 0.6, "overlap": "ok"}


@pytest.fixture(scope="module")
def store_uri(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("realized")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"  # one store for the module: creating one costs seconds
    client = MlflowClient(uri)
    return uri, client, client.create_experiment("realized", artifact_location=(tmp / "art").as_uri())


@pytest.fixture
def parent(store_uri):
    uri, client, exp = store_uri
    return uri, client, client.create_run(exp).info.run_id


def test_the_history_file_is_the_one_evaluate_writes():
    assert HISTORY == REALIZED_HISTORY


def test_past_errors_correct_the_served_estimate_and_decide_the_alert(parent):
    uri, client, run_id = parent
    table = pd.DataFrame([ROW])
    # min_accuracy 0.86: the label-free interval [0.75, 0.85] is below it (an alert); the corrected one reaches
    # 0.877, so min_accuracy may hold: a warning, not an alert
    served = served_estimate.fn(table, "LR", min_accuracy=0.86, ctx=RunContext(uri, "", run_id, "", 0), history=PAST)
    real = served["realized"]
    assert (real["accuracy"], real["ci_low"], real["ci_high"]) == pytest.approx((MID, LOW, HIGH), abs=2e-6)
    assert real["n_batches"] == 3 and real["bias"] == pytest.approx(-0.0266667, abs=1e-6)
    assert not served["alert"] and served["straddles"]
    assert served_estimate.fn(table, "LR", min_accuracy=0.86, ctx=RunContext(uri, "", run_id, "", 0))["alert"]
    m = client.get_run(run_id).data.metrics
    assert m["estimate.realized.accuracy"] == pytest.approx(MID, abs=2e-6)
    assert m["estimate.realized.ci_high"] == pytest.approx(HIGH, abs=2e-6) and m["estimate.realized.n_batches"] == 3
    assert m["estimate.accuracy"] == 0.80  # the label-free estimate stays what it was
    assert realized_line(served) == ("corrected by the realised errors of 3 earlier batches: 0.773 [0.670, 0.877] "
                                     "(their mean error -0.027)")


def test_the_served_correction_takes_the_batchs_binomial_floor(parent):
    """What ships: the flow gives the batch's rows (``BINOMIAL_FLOOR``). PAST's spread 0.0208167 beats the
    binomial sd of 10,000 rows at 0.773 (0.0041868): unchanged. Of 100 rows it is √(0.7733333 · 0.2266667 / 100)
    = 0.0418676, so the half-width is 4.302653 · 0.0418676 · √(4/3) 1.1547005 = 0.2080094."""
    from shiftlib.realized import BINOMIAL_FLOOR

    uri, _, run_id = parent
    assert BINOMIAL_FLOOR is True
    ctx, table = RunContext(uri, "", run_id, "", 0), pd.DataFrame([ROW])
    big = served_estimate.fn(table, "LR", min_accuracy=None, ctx=ctx, history=PAST, n_target=10_000)["realized"]
    assert (big["ci_low"], big["ci_high"]) == pytest.approx((LOW, HIGH), abs=2e-6)
    small = served_estimate.fn(table, "LR", min_accuracy=None, ctx=ctx, history=PAST, n_target=100)["realized"]
    assert small["accuracy"] == pytest.approx(MID, abs=2e-6) and small["spread"] == pytest.approx(0.0418676, abs=1e-6)
    assert small["ci_high"] - small["accuracy"] == pytest.approx(0.2080094, abs=2e-6)
    # earlier batches evaluated on 100 labeled rows each: the floor is that of 100 rows, not of a 10,000-row batch
    part = served_estimate.fn(table, "LR", min_accuracy=None, ctx=ctx, history=PAST.assign(n_rows=100),
                              n_target=10_000)["realized"]
    assert part["spread"] == pytest.approx(0.0418676, abs=1e-6)


def test_labels_combine_with_the_corrected_estimate_as_their_prior(parent):
    uri, _, run_id = parent
    labeled = {"accuracy": {"LR": 0.74}, "se": {"LR": 0.03}, "n_labels": 40}
    served = served_estimate.fn(pd.DataFrame([ROW]), "LR", min_accuracy=None, ctx=RunContext(uri, "", run_id, "", 0),
                                history=PAST, labeled=labeled)
    r = served["realized"]
    est, lo, hi, w = with_labels_interval(r["accuracy"], r["ci_low"], r["ci_high"], 0.74, 0.03)
    assert served["labeled"]["accuracy"] == pytest.approx(est) and served["labeled"]["ci_low"] == pytest.approx(lo)
    assert served["labeled"]["prior_weight"] == pytest.approx(w)
    assert served["labeled"] != labeled_estimate(ROW, labeled)  # not the label-free prior


def test_below_three_batches_the_label_free_interval_stays_and_says_how_many(parent):
    uri, _, run_id = parent
    served = served_estimate.fn(pd.DataFrame([ROW]), "LR", min_accuracy=None, ctx=RunContext(uri, "", run_id, "", 0),
                                history=PAST.iloc[:2])
    assert served["realized"] is None and served["realized_batches"] == 2
    assert (served["ci_low"], served["ci_high"]) == (0.75, 0.85)
    assert not served["same_as_rule"]  # ROW has no one_class_share: not known to predict the rule's class
    for share, margin, same in ((1.0, 0.0, True), (1.0, -0.003, False), (0.98, 0.0, False)):
        row = ROW | {"one_class_share": share, "majority_margin": margin}
        got = served_estimate.fn(pd.DataFrame([row]), "LR", min_accuracy=None, ctx=RunContext(uri, "", run_id, "", 0))
        assert got["same_as_rule"] is same, (share, margin)
    assert "2 earlier batches with realised accuracy" in realized_line(served)
    other = served_estimate.fn(pd.DataFrame([ROW | {"candidate": "NB"}]), "NB", min_accuracy=None,
                               ctx=RunContext(uri, "", run_id, "", 0), history=PAST)
    assert other["realized"] is None and realized_line(other) is None  # LR's errors are not NB's


def test_the_history_is_this_deployments_other_runs_oldest_first(tmp_path):
    store = StageStore(tmp_path / "runs", "today")
    rows = pd.concat([
        PAST.iloc[[2, 0, 1]],  # written out of order
        PAST.iloc[:1].assign(model_name="other-model", schema="d9", flow_run_id="x"),  # another deployment
        PAST.iloc[:1].assign(flow_run_id="today"),  # this run, evaluated before it was rerun
        PAST.iloc[:1].assign(model_name=None, schema=None, flow_run_id="old"),  # written before the history named it
    ], ignore_index=True)
    write_parquet_atomic(rows, tmp_path / "runs" / REALIZED_HISTORY)
    got = realized_history(store, "m", "d1")
    assert list(got["flow_run_id"]) == ["a", "b", "c"]
    assert realized_history(StageStore(tmp_path / "elsewhere", "t"), "m", "d1").empty


def test_one_batch_is_one_realised_error_and_this_runs_batch_is_none(tmp_path):
    """helper-33: a night left undecided and then rerun with labels is two runs on one batch; both evaluated, the
    next run counted 5 earlier batches where 4 had labels. The history is one row per candidate and batch (the
    target's hash, column ``batch``), the latest evaluation standing; this run's own batch is no past error."""
    store = StageStore(tmp_path / "runs", "today")
    store.write_stage("ingest", {}, key="k", params={}, inputs={}, extra={"data_hashes": {"target": "t5"}})
    rows = PAST.assign(batch=["t1", "t2", "t3"])
    rerun = PAST.iloc[[1]].assign(flow_run_id="b2", batch="t2", realized_accuracy=0.70, evaluated_at="2026-01-04")
    mine = PAST.iloc[[0]].assign(flow_run_id="z", batch="t5", evaluated_at="2026-01-05")  # today's batch
    old = PAST.iloc[[0]].assign(flow_run_id="o", batch=None, evaluated_at="2025-12-31")  # before batches were kept
    write_parquet_atomic(pd.concat([rows, rerun, mine, old], ignore_index=True), tmp_path / "runs" / REALIZED_HISTORY)
    got = realized_history(store, "m", "d1")
    assert list(got["flow_run_id"]) == ["o", "a", "c", "b2"]  # t2 once (its later run), t5 left out
    assert got.loc[got["flow_run_id"] == "b2", "realized_accuracy"].item() == 0.70


def test_a_history_of_other_inputs_or_another_format_is_refused_with_the_fix(tmp_path):
    store = StageStore(tmp_path / "runs", "today")
    path = tmp_path / "runs" / REALIZED_HISTORY
    write_parquet_atomic(PAST, path)
    with pytest.raises(ShiftflowInputError, match=r"3 batch\(es\) of model 'm' whose model took other input columns"
                                                  r".*give another --model-name"):
        realized_history(store, "m", "d2")
    write_parquet_atomic(PAST.drop(columns="realized_accuracy"), path)
    with pytest.raises(ShiftflowInputError, match=r"lacks the columns \['realized_accuracy'\].*move it away"):
        realized_history(store, "m", "d1")
    path.write_text("not parquet")
    with pytest.raises(ShiftflowInputError, match="cannot be read .*move it away"):
        realized_history(store, "m", "d1")


def test_evaluate_names_the_deployment_from_the_run(tmp_path):
    run = SimpleNamespace(data=SimpleNamespace(tags={"champion.registered_model": "shiftflow-x-1a2b v12"}))
    store = StageStore(tmp_path, "r")  # no ingest stage: the schema is not known
    assert deployment(run, store) == {"model_name": "shiftflow-x-1a2b", "schema": None}
    assert deployment(SimpleNamespace(data=SimpleNamespace(tags={})), store)["model_name"] is None
