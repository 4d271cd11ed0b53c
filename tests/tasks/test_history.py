"""tasks.history and ``shiftflow history``: a registered model's accuracy over time, read back from the parent
runs a retrain leaves (issue 29). The runs are made by hand with the tags and metrics the flow logs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from flows.cli import main
from tasks.history import COLUMNS, model_history, plot_history


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    uri = f"sqlite:///{tmp_path_factory.mktemp('history') / 'mlflow.db'}"
    client = MlflowClient(uri)
    nights = [  # (registered, decision tag, alias decision, serving, estimate, lo, hi, realised, eval, drifted)
        ("m v1", "promoted", "champion", "1", 0.80, 0.75, 0.85, None, 0.79, 0.0),
        ("m v2", "undecided", "challenger", "1", 0.82, 0.70, 0.90, 0.81, 0.83, 1.0),  # evaluate's value wins
        ("m_x v1", "promoted", "champion", "1", 0.5, 0.4, 0.6, None, None, 0.0),  # another model: '_' in LIKE
        ("m v3", "promoted", "champion", "3", 0.85, 0.80, 0.90, None, None, 1.0),
    ]
    for exp in ("a", "b"):  # runs of one model in two experiments are one history
        client.create_experiment(exp)
    for i, (reg, dec, alias, serving, est, lo, hi, realized, ev, drifted) in enumerate(nights):
        exp = client.get_experiment_by_name("a" if i % 2 == 0 else "b").experiment_id
        run = client.create_run(exp, run_name=f"night-{i}", start_time=1_800_000_000_000 + i * 86_400_000,
                                tags={"champion.registered_model": reg, "shiftflow.decision": dec,
                                      "champion.decision": alias, "champion.serving": serving,
                                      "estimate.candidate": "LR", "shiftflow.estimate.overlap": "ok",
                                      **({"shiftflow.estimate.regime": "label"} if i == 1 else {})})
        metrics = {"estimate.accuracy": est, "estimate.ci_low": lo, "estimate.ci_high": hi, "drift.drifted": drifted,
                   "drift.domain_auc": 0.6}
        metrics |= {} if realized is None else {"realized.accuracy": realized}
        metrics |= {} if ev is None else {"eval.target_accuracy": ev}
        for k, v in metrics.items():
            client.log_metric(run.info.run_id, k, v)
    return uri


def test_the_history_is_every_run_of_the_model_oldest_first(store: str) -> None:
    t = model_history(store, "m")
    assert list(t.columns) == COLUMNS and t["run_name"].tolist() == ["night-0", "night-1", "night-3"]
    assert t["version"].tolist() == ["1", "2", "3"] and t["serving"].tolist() == ["1", "1", "3"]
    assert t["decision"].tolist() == ["promoted", "undecided", "promoted"]
    assert t["estimate"].tolist() == [0.80, 0.82, 0.85] and t["ci_high"].tolist() == [0.85, 0.90, 0.90]
    # the realised accuracy: evaluate's where recorded, else the held-out labels', else none
    assert t["realized"].tolist()[:2] == [0.79, 0.81] and math.isnan(t["realized"].iloc[2])
    assert t["realized_from"].tolist() == ["held-out target labels", "evaluate", ""]
    assert t["drift"].tolist() == ["no drift", "drift", "drift"]
    assert t["regime"].tolist() == ["?", "label", "?"]  # the estimate's shift regime, "?" where none was logged
    assert model_history(store, "nope").empty


def test_the_chart_has_one_interval_per_run_and_marks_the_serving_change(store: str) -> None:
    fig = plot_history(model_history(store, "m"), "m")
    ax = fig.axes[0]
    assert ax.get_title() == "m: accuracy over time (3 runs)"
    assert len(ax.lines) >= 2 and [t.get_text() for t in ax.texts] == ["v1 serves", "v3 serves"]
    # night-1 judged v2, which did not serve after it (undecided): its point is apart from the served ones
    labels = set(ax.get_legend_handles_labels()[1])
    assert labels == {"estimated: the version that served after the run (95% interval)",
                      "estimated: a version that did not serve (95% interval)", "realised", "realised: not served"}


def test_the_cli_prints_the_table_writes_the_chart_and_refuses_an_unknown_model(store: str, tmp_path: Path,
                                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "h.png"
    assert main(["history", "--model", "m", "--tracking-uri", store, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "night-1" in text and "undecided" in text and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["history", "--model", "nope", "--tracking-uri", store]) == 2
    assert "no retrain or score run of a registered model 'nope'" in capsys.readouterr().err


def test_without_out_the_chart_goes_beside_the_run_root_not_into_the_current_directory(
        store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """helper-37: `shiftflow history` without --out dropped a PNG into whatever directory it ran in."""
    from flows.history import default_chart

    monkeypatch.setenv("SHIFTFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SHIFTFLOW_RUN_ROOT", raising=False)
    here = tmp_path / "elsewhere"
    here.mkdir()
    monkeypatch.chdir(here)
    assert main(["history", "--model", "m", "--tracking-uri", store]) == 0
    chart = (tmp_path / "home" / "history" / "m.png").resolve()
    assert f"chart: {chart}" in capsys.readouterr().out and chart.read_bytes()[:4] == b"\x89PNG"
    assert list(here.iterdir()) == []
    assert default_chart("team/churn v2").name == "team_churn_v2.png"
    # helper-39: runs under --run-root /x/runs put the chart in /x/history, read off the newest retrain run's folder
    client = MlflowClient(store)
    newest = client.search_runs([e.experiment_id for e in client.search_experiments()],
                                order_by=["attributes.start_time DESC"])[0]
    (tmp_path / "x" / "runs").mkdir(parents=True)  # a run root of another machine (absent here) is not used
    client.set_tag(newest.info.run_id, "shiftflow.run_dir", str(tmp_path / "x" / "runs" / "abc"))
    assert main(["history", "--model", "m", "--tracking-uri", store]) == 0
    assert f"chart: {(tmp_path / 'x' / 'history' / 'm.png').resolve()}" in capsys.readouterr().out
    client.delete_tag(newest.info.run_id, "shiftflow.run_dir")  # the module's store, as the other tests found it


def _two_versions(tmp_path: Path) -> tuple[str, MlflowClient, str, Any]:
    """A store with one retrain run (night-0, v1 promoted) and model ``h``'s versions 1 and 2 registered by it."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    exp = client.create_experiment("e")
    run = client.create_run(exp, run_name="night-0", start_time=1_800_000_000_000,
                            tags={"champion.registered_model": "h v1", "shiftflow.decision": "promoted",
                                  "champion.decision": "champion", "champion.serving": "1"})
    client.create_registered_model("h")
    for _ in range(2):
        client.create_model_version("h", "file:///nowhere", run_id=run.info.run_id)
    return uri, client, exp, run


def test_a_champion_set_by_hand_is_a_row_with_who_and_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """helper-33: after `shiftflow champion --set 2 --reason ...` the history had no row for the move. A version
    made champion by hand (its tag tasks.champion.ALIAS_SET, "<when> by <who>: <why>") is a row at that time,
    serving that version; the printed table names each run's MLflow id, which `shiftflow evaluate --run` takes."""
    from tasks.champion import ALIAS_SET

    uri, client, exp, run = _two_versions(tmp_path)
    client.log_metric(run.info.run_id, "estimate.accuracy", 0.8)
    client.set_model_version_tag("h", "2", ALIAS_SET, "2027-01-16T09:30:00Z by ana: test rollback")
    t = model_history(uri, "h")
    assert t["run_name"].tolist() == ["night-0", "champion set by ana"]
    hand = t.iloc[1]
    assert (hand["version"], hand["serving"], hand["decision"]) == ("2", "2", "set by hand: test rollback")
    assert hand["started"] == pd.Timestamp("2027-01-16T09:30:00Z") and math.isnan(hand["estimate"])
    assert main(["history", "--model", "h", "--tracking-uri", uri, "--out", str(tmp_path / "h.png")]) == 0
    text = capsys.readouterr().out
    assert run.info.run_id in text and "set by hand: test rollback" in text
    assert [x.get_text() for x in plot_history(t, "h").axes[0].texts] == ["v1 serves", "v2 serves"]


def test_every_move_by_hand_is_a_row_not_only_each_versions_latest(tmp_path: Path) -> None:
    """helper-36: five moves by hand left two rows (a version's tag keeps its latest move), one reading "set by
    hand: set by hand". Each move of tasks.champion.set_champion is now a finished run (tag MOVED) in the
    registering run's experiment, and the history has a row per move, the default reason read as "set by hand"."""
    from tasks.champion import ALIAS_SET, MOVED, set_champion

    uri, client, exp, _ = _two_versions(tmp_path)
    client.set_registered_model_alias("h", "champion", "1")
    moves = [("2", "v1 misbehaves", "2027-01-16T09:30:00Z"), ("1", "set by hand", "2027-01-17T09:30:00Z"),
             ("2", "v1 again", "2027-01-18T09:30:00Z")]
    for version, reason, when in moves:
        set_champion(uri, "h", version=version, reason=reason, who="ana", when=when)
    assert client.get_model_version("h", "2").tags[ALIAS_SET] == "2027-01-18T09:30:00Z by ana: v1 again"
    runs = client.search_runs([exp], f"tags.`{MOVED}` = 'h v2'")
    assert len(runs) == 2 and all(r.info.status == "FINISHED" for r in runs)
    t = model_history(uri, "h")
    assert t["run_name"].tolist() == ["night-0"] + ["champion set by ana"] * 3
    assert t["decision"].tolist()[1:] == ["set by hand: v1 misbehaves", "set by hand", "set by hand: v1 again"]
    assert t["serving"].tolist() == ["1", "2", "1", "2"]
    assert t["started"].tolist()[1:] == [pd.Timestamp(w) for _, _, w in moves]


def test_a_move_whose_record_cannot_be_written_still_moves_and_says_so(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """helper-38: with the registering run's experiment deleted, MLflow refuses the record's run after the alias has
    moved; the move stands (the version's tag records it) and a warning says the run is not kept."""
    import tasks.champion as tc

    warned: list[str] = []
    monkeypatch.setattr(tc, "run_logger", lambda: type("L", (), {"warning": lambda self, m, *a: warned.append(m % a)})())
    uri, client, exp, _ = _two_versions(tmp_path)
    client.set_registered_model_alias("h", "champion", "1")
    client.delete_experiment(exp)
    moved = tc.set_champion(uri, "h", version="2", reason="v1 misbehaves", who="ana", when="2027-01-16T09:30:00Z")
    assert moved == {"from": "1", "to": "2"} and str(client.get_model_version_by_alias("h", "champion").version) == "2"
    assert client.get_model_version("h", "2").tags[tc.ALIAS_SET] == "2027-01-16T09:30:00Z by ana: v1 misbehaves"
    assert len(warned) == 1 and warned[0].startswith("champion: the move is not kept as a run (The experiment")


def test_a_score_run_of_an_older_version_keeps_the_champion_as_serving(tmp_path: Path) -> None:
    """helper-34: after `shiftflow score --model kd-headache/1` while v2 was champion, the history said v1 served
    (the score run tagged the version it scored as serving). A score run's row has the version scored and, as
    serving, the champion when it ran (its tag champion.serving; "?" for a run before it was kept so)."""
    from tasks.scoring import SCORED_TAG

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    exp = client.create_experiment("e")
    client.create_run(exp, run_name="night-1", start_time=1_800_000_000_000,
                      tags={"champion.registered_model": "s v2", "shiftflow.decision": "promoted",
                            "champion.decision": "champion", "champion.serving": "2"})
    client.create_run(exp, run_name="score-new", start_time=1_800_000_100_000,
                      tags={SCORED_TAG: "s v1", "shiftflow.run_kind": "score", "champion.serving": "2"})
    client.create_run(exp, run_name="score-old", start_time=1_800_000_200_000,
                      tags={SCORED_TAG: "s v1", "shiftflow.run_kind": "score"})
    t = model_history(uri, "s")
    assert t["run_name"].tolist() == ["night-1", "score-new", "score-old"]
    assert t["version"].tolist() == ["2", "1", "1"] and t["serving"].tolist() == ["2", "2", "?"]
    assert t["decision"].tolist()[1:] == ["scored", "scored"]


def test_a_failed_score_run_reads_score_failed(tmp_path: Path) -> None:
    """helper-39: a score run that ended in an error was listed as "scored"."""
    from tasks.scoring import SCORED_TAG

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    exp = client.create_experiment("e")
    ok = client.create_run(exp, run_name="score-ok", start_time=1_800_000_000_000, tags={SCORED_TAG: "s v1"})
    bad = client.create_run(exp, run_name="score-bad", start_time=1_800_000_100_000, tags={SCORED_TAG: "s v1"})
    client.set_terminated(ok.info.run_id, "FINISHED")
    client.set_terminated(bad.info.run_id, "FAILED")
    assert model_history(uri, "s")["decision"].tolist() == ["scored", "score failed"]
