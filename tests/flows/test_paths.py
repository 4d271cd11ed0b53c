"""flows.paths: the default run root is $SHIFTFLOW_HOME/runs, else the checkout's data/runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows import paths


def test_shiftflow_home_overrides_the_data_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SHIFTFLOW_HOME", str(tmp_path / "home"))
    assert paths.default_run_root() == (tmp_path / "home" / "runs").resolve()


def test_checkout_uses_data_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHIFTFLOW_HOME", raising=False)
    assert (paths.PROJECT_DIR / "data" / "README.md").is_file()  # this test runs from the checkout
    assert paths.default_run_root() == paths.PROJECT_DIR / "data" / "runs"


def test_without_a_checkout_falls_back_to_the_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SHIFTFLOW_HOME", raising=False)
    monkeypatch.setattr(paths, "DATA_DIR", tmp_path / "no-such-data")  # an installed wheel has no data/
    monkeypatch.chdir(tmp_path)
    assert paths.default_run_root() == tmp_path.resolve() / ".shiftflow" / "runs"


def test_data_contents_are_ignored_but_the_readme_is_tracked() -> None:
    import subprocess

    def ignored(p: str) -> bool:
        return subprocess.run(["git", "check-ignore", "-q", p], cwd=paths.PROJECT_DIR).returncode == 0

    if subprocess.run(["git", "rev-parse"], cwd=paths.PROJECT_DIR, capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    assert ignored("data/runs/some-run/ingest/source.parquet") and ignored("data/warehouse.db")
    assert not ignored("data/README.md")


def test_shiftflow_home_is_the_variable_or_dot_shiftflow_here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SHIFTFLOW_HOME", str(tmp_path / "h" / ".." / "home"))
    assert paths.shiftflow_home() == (tmp_path / "home").resolve()  # resolved
    monkeypatch.delenv("SHIFTFLOW_HOME")
    monkeypatch.chdir(tmp_path)
    assert paths.shiftflow_home() == tmp_path.resolve() / ".shiftflow"


def test_shiftflow_run_root_wins_and_the_given_environment_is_read(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    monkeypatch.setenv("SHIFTFLOW_HOME", str(tmp_path / "process-home"))  # not read when an environment is given
    assert paths.default_run_root({"SHIFTFLOW_HOME": str(tmp_path / "h")}) == (tmp_path / "h" / "runs").resolve()
    assert paths.default_run_root({"SHIFTFLOW_RUN_ROOT": str(tmp_path / "r"), "SHIFTFLOW_HOME": str(tmp_path / "h")}) \
        == (tmp_path / "r").resolve()
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert paths.default_run_root({"SHIFTFLOW_RUN_ROOT": "~/runs"}) == (tmp_path / "user" / "runs").resolve()


def test_a_missing_sqlite_store_is_named_and_other_stores_are_not(tmp_path: Path) -> None:
    db = tmp_path / "mlflow.db"
    assert paths.missing_sqlite_store(f"sqlite:///{db}") == db  # MLflow would create an empty store there
    db.write_bytes(b"")
    assert paths.missing_sqlite_store(f"sqlite:///{db}") is None
    assert paths.missing_sqlite_store("sqlite:///relative.db") == Path("relative.db")
    for uri in ("http://127.0.0.1:5000", "file:///tmp/mlruns", "postgresql://u@h/db"):
        assert paths.missing_sqlite_store(uri) is None  # not a sqlite file: nothing to check


def test_a_store_named_elsewhere_keeps_its_artifacts_beside_it_and_writes_nothing_here(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """helper-33: with --tracking-uri sqlite:////tmp/ops6/mlflow.db, artifacts went to <cwd>/.shiftflow. A sqlite
    store's artifacts sit beside its database (the default store's in $SHIFTFLOW_HOME/mlartifacts, as before), and
    creating the experiment makes nothing in the working directory."""
    from mlflow.tracking import MlflowClient

    from flows.config import RetrainConfig
    from flows.paths import local_artifact_root
    from flows.retrain import tracking_store

    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.delenv("SHIFTFLOW_HOME", raising=False)
    uri = f"sqlite:///{tmp_path / 'elsewhere' / 'mlflow.db'}"
    assert local_artifact_root(uri) == tmp_path / "elsewhere" / "mlartifacts"
    assert local_artifact_root(f"sqlite:///{here / '.shiftflow' / 'mlflow.db'}") == here / ".shiftflow" / "mlartifacts"
    got, experiment = tracking_store(RetrainConfig(tracking_uri=uri, experiment="e"))
    assert got == uri and list(here.iterdir()) == []
    location = MlflowClient(uri).get_experiment(experiment).artifact_location
    assert location == (tmp_path / "elsewhere" / "mlartifacts").resolve().as_uri()
