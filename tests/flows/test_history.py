"""flows.history: ``shiftflow history --model NAME [--out PNG]``. Refuses a store that does not exist (without
creating it) and a model with no runs, in one line with exit code 2; otherwise prints the table
(``tasks.history.model_history``, faked here with a hand-made one) and writes the chart where ``--out`` says
(default ``history-<model>.png`` in the current folder). The real store is read in ``test_score_cli.py`` (slow)."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tasks.history
from flows.history import add_arguments, run


def _ns(*args: str) -> argparse.Namespace:
    return add_arguments(argparse.ArgumentParser()).parse_args(list(args))


def _table() -> pd.DataFrame:
    rows = [
        {"started": pd.Timestamp("2024-03-01 02:00:07"), "run_id": "a1", "run_name": "nightly-1", "candidate": "LR",
         "version": "1", "decision": "promoted", "serving": "1", "estimate": 0.75, "ci_low": 0.7, "ci_high": 0.8,
         "realized": np.nan, "realized_from": "", "drift": True, "domain_auc": 0.66, "overlap": "ok",
         "regime": "covariate"},
        {"started": pd.Timestamp("2024-03-02 02:00:59"), "run_id": "b2", "run_name": "score-x", "candidate": "LR",
         "version": "1", "decision": "scored", "serving": "1", "estimate": 0.7126, "ci_low": 0.65, "ci_high": 0.775,
         "realized": 0.72, "realized_from": "realized.accuracy", "drift": False, "domain_auc": 0.52, "overlap": "ok",
         "regime": "?"},
    ]
    return pd.DataFrame(rows, columns=tasks.history.COLUMNS)


class _Figure:
    def __init__(self) -> None:
        self.saved: list[tuple[Path, int]] = []

    def savefig(self, path: Path, dpi: int) -> None:
        self.saved.append((Path(path), dpi))
        Path(path).write_bytes(b"png")


@pytest.fixture
def store(tmp_path: Path) -> str:
    (tmp_path / "mlflow.db").write_bytes(b"")  # exists: the refusal of a missing store does not apply
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


def test_the_flags() -> None:
    with pytest.raises(SystemExit):
        _ns()  # --model is required
    ns = _ns("--model", "m")
    assert (ns.model, ns.out, ns.tracking_uri) == ("m", None, None)


def test_a_store_that_does_not_exist_is_refused_and_not_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(tasks.history, "model_history", lambda uri, name: pytest.fail("read a missing store"))
    db = tmp_path / "nowhere.db"
    assert run(_ns("--model", "m", "--tracking-uri", f"sqlite:///{db}")) == 2
    assert capsys.readouterr().err == (f"shiftflow: error: no MLflow store at {db}: pass --tracking-uri (or set "
                                       "MLFLOW_TRACKING_URI)\n")
    assert list(tmp_path.iterdir()) == []


def test_a_model_without_runs_is_refused_in_one_line(store: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    asked: list[tuple[str, str]] = []
    monkeypatch.setattr(tasks.history, "model_history",
                        lambda uri, name: asked.append((uri, name)) or _table().iloc[:0])
    monkeypatch.chdir(tmp_path)
    assert run(_ns("--model", "nope", "--tracking-uri", store)) == 2
    assert asked == [(store, "nope")]
    err = capsys.readouterr().err.splitlines()
    assert err == [f"shiftflow: error: no retrain or score run of a registered model 'nope' in {store}; check "
                   "--model (the registry's name) and --tracking-uri"]
    assert not (tmp_path / "history-nope.png").exists()


def test_the_table_is_printed_and_the_chart_written(store: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    fig = _Figure()
    drawn: list[tuple[int, str]] = []
    monkeypatch.setattr(tasks.history, "model_history", lambda uri, name: _table())
    monkeypatch.setattr(tasks.history, "plot_history", lambda table, name: drawn.append((len(table), name)) or fig)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SHIFTFLOW_RUN_ROOT", str(tmp_path / "home" / "runs"))
    default = (tmp_path / "home" / "history" / "m.png").resolve()
    assert run(_ns("--model", "m", "--tracking-uri", store)) == 0
    assert drawn == [(2, "m")] and fig.saved == [(default, 120)]  # the default --out, beside the run root
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["started", "run_name", "run_id", "candidate", "version", "decision", "serving",
                                "estimate", "ci_low", "ci_high", "realized", "drift", "overlap", "regime"]  # no domain_auc
    # minutes, not seconds; three decimals; a missing realised accuracy shows as NaN; the run id `evaluate --run` takes
    assert lines[1].split() == ["2024-03-01", "02:00", "nightly-1", "a1", "LR", "1", "promoted", "1", "0.750",
                                "0.700", "0.800", "NaN", "True", "ok", "covariate"]
    assert lines[2].split()[8:11] == ["0.713", "0.650", "0.775"] and lines[2].split()[11] == "0.720"
    assert lines[-2] == "run_id: the MLflow parent run (what `shiftflow evaluate --run` takes)"
    assert lines[-1] == f"chart: {default}"
    out = tmp_path / "charts" / "h.png"
    out.parent.mkdir()
    assert run(_ns("--model", "m", "--tracking-uri", store, "--out", str(out))) == 0
    assert fig.saved[-1] == (out, 120) and capsys.readouterr().out.splitlines()[-1] == f"chart: {out.resolve()}"
