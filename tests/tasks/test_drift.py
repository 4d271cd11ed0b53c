"""tasks.drift: the stage's tables, summary, chart and ``drift.*`` metrics equal shiftlib.drift run independently on
the rows the task subsamples (seed for the source, seed + 1 for the target); a second run reuses the stage and logs
the same numbers; a changed alpha, row budget, seed or target batch recomputes; ``_markdown`` lists the smallest
adjusted p-values."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_breast_cancer
from threadpoolctl import threadpool_limits

import tasks.drift
from shiftlib.bias import split_biased
from shiftlib.budget import detectable_auc, subsample
from shiftlib.drift import detect_drift, plot_drift
from tasks.drift import _markdown, drift, read_drift_summary
from tasks.ingest import LABEL, ROW
from tasks.store import StageStore
from tasks.tracking import RunContext

SEED, ALPHA, ROWS = 3, 0.05, 120
METRICS = {"drift.drifted", "drift.domain_auc", "drift.domain_pvalue", "drift.mmd2", "drift.mmd_pvalue",
           "drift.n_drifted_features"}


def _tables():
    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    X = X.iloc[:, :6]
    sp = split_biased(X.to_numpy(), y.to_numpy(), "kmm_threshold", random_state=0, feature=0)
    X_s, y_s = X.iloc[sp.source].reset_index(drop=True), y.to_numpy()[sp.source]
    return X_s, y_s, X.iloc[sp.target].reset_index(drop=True)


def _store(root, run_id, X_s, y_s, X_t) -> StageStore:
    s = StageStore(root, run_id)
    src = X_s.assign(**{LABEL: y_s}).assign(**{ROW: np.arange(len(X_s))})
    tgt = X_t.assign(**{ROW: np.arange(len(X_t))})
    s.write_stage("ingest", {"source": src, "target": tgt}, key="k-ingest", params={}, inputs={})
    return s


@pytest.fixture
def markdowns(monkeypatch):
    """The Prefect markdown artifacts the task creates (key, markdown), kept here instead of sent to an API."""
    made: list[tuple[str, str]] = []
    monkeypatch.setattr(tasks.drift, "create_markdown_artifact",
                        lambda *, key, markdown, description: made.append((key, markdown)))
    return made


def _refuse(*args, **kwargs):
    raise AssertionError("detect_drift was called: the stage was recomputed")


class _Recomputed(Exception):
    pass


def _sentinel(*args, **kwargs):
    raise _Recomputed


def test_stage_files_and_metrics_equal_shiftlib_on_the_subsampled_rows_and_a_second_run_reuses_them(
        tmp_path, mlflow_parent, markdowns, monkeypatch):
    uri, client, exp, new_parent = mlflow_parent
    X_s, y_s, X_t = _tables()
    assert len(X_s) > ROWS and len(X_t) > ROWS  # both sides are subsampled
    store, parent = _store(tmp_path / "runs", "r1", X_s, y_s, X_t), new_parent()
    with threadpool_limits(1):
        summary = drift.fn(store, ctx=RunContext(uri, exp, parent, "", SEED), alpha=ALPHA, rows=ROWS)
        i_s = subsample(len(X_s), ROWS, random_state=SEED)
        i_t = subsample(len(X_t), ROWS, random_state=SEED + 1)
        ref = detect_drift(X_s.iloc[i_s], X_t.iloc[i_t], alpha=ALPHA, random_state=SEED)

    # the tables: shiftlib's, with the rows named by their positions in the ingested tables
    pd.testing.assert_frame_equal(store.read_table("drift", "features"), ref.features)
    rows = store.read_table("drift", "row_scores")
    pd.testing.assert_frame_equal(rows, ref.row_scores)
    assert rows.loc[rows["side"] == "source", "row"].tolist() == i_s.tolist()
    assert rows.loc[rows["side"] == "target", "row"].tolist() == i_t.tolist()

    # the summary: the report's dict, the rows tested, the AUC detectable at that size, and a note saying so
    want = ref.to_dict()
    auc80 = detectable_auc(ROWS, ROWS, alpha=ALPHA)
    assert summary["rows_tested"] == {"source": ROWS, "target": ROWS}
    assert summary["detectable_auc"] == pytest.approx(auc80, abs=1e-15)
    assert summary["notes"][:-1] == want["notes"]
    note = summary["notes"][-1]
    assert f"{ROWS} of {len(X_s)} source and {ROWS} of {len(X_t)} target rows" in note and f"{auc80:.3f}" in note
    assert {k: v for k, v in summary.items() if k not in ("rows_tested", "detectable_auc", "notes")} == \
        {k: v for k, v in want.items() if k != "notes"}
    assert json.loads(store.read_bytes("drift", "summary.json")) == summary == read_drift_summary(store)

    # the chart: shiftlib's plot of the same report, and it is the artifact logged on the parent run
    png = io.BytesIO()
    plot_drift(ref).savefig(png, format="png", dpi=100)
    assert store.read_bytes("drift", "features.png") == png.getvalue()
    assert [a.path for a in client.list_artifacts(parent, "drift")] == ["drift/features.png"]
    logged = client.download_artifacts(parent, "drift/features.png", str(tmp_path / "dl"))
    assert Path(logged).read_bytes() == png.getvalue()

    # the metrics on the parent run
    expected = {"drift.drifted": float(ref.drifted), "drift.domain_auc": ref.domain_auc,
                "drift.domain_pvalue": ref.domain_pvalue, "drift.mmd2": ref.mmd2, "drift.mmd_pvalue": ref.mmd_pvalue,
                "drift.n_drifted_features": float(len(ref.drifted_features))}
    assert client.get_run(parent).data.metrics == pytest.approx(expected, abs=1e-12)
    assert markdowns == [("drift-verdict", _markdown(summary))]

    # the same ingested tables in another run folder: adopted, not recomputed; the same numbers logged again
    monkeypatch.setattr(tasks.drift, "detect_drift", _refuse)
    again, parent2 = _store(tmp_path / "runs", "r2", X_s, y_s, X_t), new_parent()
    assert drift.fn(again, ctx=RunContext(uri, exp, parent2, "", SEED), alpha=ALPHA, rows=ROWS) == summary
    assert again.manifest("drift")["reused_from"] == "r1"
    pd.testing.assert_frame_equal(again.read_table("drift", "row_scores"), rows)
    assert client.get_run(parent2).data.metrics == client.get_run(parent).data.metrics
    assert [a.path for a in client.list_artifacts(parent2, "drift")] == ["drift/features.png"]
    assert markdowns[-1] == ("drift-verdict", _markdown(summary))

    # any other declared parameter or input: computed anew
    monkeypatch.setattr(tasks.drift, "detect_drift", _sentinel)
    for seed, alpha, n_rows in ((SEED + 1, ALPHA, ROWS), (SEED, 0.01, ROWS), (SEED, ALPHA, ROWS + 1)):
        with pytest.raises(_Recomputed):
            drift.fn(again, ctx=RunContext(uri, exp, parent2, "", seed), alpha=alpha, rows=n_rows)
    X_t2 = X_t.copy()
    X_t2.iloc[0, 0] += 1.0  # one target value differs: the target's hash, so the key
    with pytest.raises(_Recomputed):
        drift.fn(_store(tmp_path / "runs", "r3", X_s, y_s, X_t2), ctx=RunContext(uri, exp, parent2, "", SEED),
                 alpha=ALPHA, rows=ROWS)


@pytest.fixture(scope="module")
def small_report():
    """One real report on a few rows, for the tests that replace detect_drift (its arguments are what they check)."""
    X_s, _, X_t = _tables()
    with threadpool_limits(1):
        return detect_drift(X_s.iloc[:40], X_t.iloc[:40], alpha=ALPHA, random_state=0, domain_permutations=20,
                            mmd_permutations=20)


def _recording(report, calls):
    def fake(X_source, X_target, *, alpha, random_state):
        calls.append({"source": X_source, "target": X_target, "alpha": alpha, "random_state": random_state})
        return report

    return fake


def test_every_row_is_tested_under_the_budget_and_the_target_seed_wraps_at_2_to_the_32(
        tmp_path, mlflow_parent, markdowns, monkeypatch, small_report):
    uri, client, exp, new_parent = mlflow_parent
    X_s, y_s, X_t = _tables()
    calls: list[dict] = []
    monkeypatch.setattr(tasks.drift, "detect_drift", _recording(small_report, calls))

    # rows=None: both tables whole, no subsampling note, the detectable AUC at the full sizes
    summary = drift.fn(_store(tmp_path / "runs", "all", X_s, y_s, X_t), ctx=RunContext(uri, exp, new_parent(), "", 5),
                       alpha=0.1, rows=None)
    pd.testing.assert_frame_equal(calls[-1]["source"], X_s)
    pd.testing.assert_frame_equal(calls[-1]["target"], X_t)
    assert (calls[-1]["alpha"], calls[-1]["random_state"]) == (0.1, 5)
    assert summary["rows_tested"] == {"source": len(X_s), "target": len(X_t)}
    assert summary["detectable_auc"] == pytest.approx(detectable_auc(len(X_s), len(X_t), alpha=0.1), abs=1e-15)
    assert summary["notes"] == small_report.notes

    # a budget above one side only: that side whole, the other subsampled, and the note says so
    n = (len(X_s) + len(X_t)) // 2
    small, big = (X_s, X_t) if len(X_s) < len(X_t) else (X_t, X_s)
    assert len(small) <= n < len(big)
    summary = drift.fn(_store(tmp_path / "runs", "one", X_s, y_s, X_t), ctx=RunContext(uri, exp, new_parent(), "", 5),
                       alpha=0.1, rows=n)
    assert sorted(summary["rows_tested"].values()) == [len(small), n]
    assert len(summary["notes"]) == len(small_report.notes) + 1

    # the largest seed numpy takes: the target's draw uses (seed + 1) mod 2**32 = 0
    top = 2**32 - 1
    drift.fn(_store(tmp_path / "runs", "top", X_s, y_s, X_t), ctx=RunContext(uri, exp, new_parent(), "", top),
             alpha=ALPHA, rows=ROWS)
    assert calls[-1]["random_state"] == top
    assert calls[-1]["source"].index.tolist() == subsample(len(X_s), ROWS, random_state=top).tolist()
    assert calls[-1]["target"].index.tolist() == subsample(len(X_t), ROWS, random_state=0).tolist()


def test_a_missing_global_number_is_left_out_of_the_metrics(tmp_path, mlflow_parent, markdowns, monkeypatch,
                                                            small_report):
    """A report without an MMD (NaN, None in the summary): its two metrics are not logged, the others are, and
    the markdown artifact says n/a for them (it crashed on None before)."""
    uri, client, exp, new_parent = mlflow_parent
    X_s, y_s, X_t = _tables()
    no_mmd = dataclasses.replace(small_report, mmd2=float("nan"), mmd_pvalue=float("nan"))
    monkeypatch.setattr(tasks.drift, "detect_drift", _recording(no_mmd, []))
    parent = new_parent()
    summary = drift.fn(_store(tmp_path / "runs", "r", X_s, y_s, X_t), ctx=RunContext(uri, exp, parent, "", 0),
                       alpha=ALPHA, rows=ROWS)
    assert summary["mmd2"] is None and summary["mmd_pvalue"] is None
    assert client.get_run(parent).data.metrics == pytest.approx({
        "drift.drifted": float(no_mmd.drifted), "drift.domain_auc": no_mmd.domain_auc,
        "drift.domain_pvalue": no_mmd.domain_pvalue, "drift.n_drifted_features": float(len(no_mmd.drifted_features))})
    assert METRICS - set(client.get_run(parent).data.metrics) == {"drift.mmd2", "drift.mmd_pvalue"}
    assert "- MMD² n/a (p = n/a)" in markdowns[-1][1].splitlines()


def test_markdown_names_the_verdict_and_the_features_with_the_smallest_adjusted_p():
    features = [{"feature": f"f{i}", "test": "ks", "p_adjusted": p, "psi": psi}
                for i, (p, psi) in enumerate([(0.5, 0.01), (None, None), (1e-4, 0.25), (0.03, None), (0.2, 0.1),
                                              (0.9, 0.0), (0.04, 0.3), (0.01, 0.2)])]
    s = {"drifted": True, "domain_auc": 0.71234, "domain_pvalue": 0.0019960, "mmd2": 0.012341, "mmd_pvalue": 0.5,
         "verdict_rule": "rule text", "features": features}
    lines = _markdown(s).splitlines()
    assert lines[:5] == ["# Drift: **drift detected**", "", "- domain-classifier AUC 0.712 (p = 0.002)",
                         "- MMD² 0.01234 (p = 0.5)", "- rule: rule text"]
    # the five smallest adjusted p-values, ascending; an untested feature (None) is never listed; no PSI: empty
    assert lines[8:] == ["| f2 | ks | 0.0001 | 0.250 |", "| f7 | ks | 0.01 | 0.200 |", "| f3 | ks | 0.03 |  |",
                         "| f6 | ks | 0.04 | 0.300 |", "| f4 | ks | 0.2 | 0.100 |"]
    assert len(_markdown(s, top=2).splitlines()) == 8 + 2
    assert _markdown(s | {"drifted": False}).splitlines()[0] == "# Drift: no drift detected"
