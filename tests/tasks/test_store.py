"""tasks.store: atomic writes, manifest hashes, corruption is caught and never silently read."""

from __future__ import annotations

import hashlib

import pandas as pd
import pytest

from tasks.store import CorruptStageError, StageStore, stage_key, write_parquet_atomic


def _df() -> pd.DataFrame:
    return pd.DataFrame({"a": [1, 2, 3], "b": [0.5, 1.5, 2.5]})


def test_manifest_hash_is_sha256_of_bytes_and_write_is_deterministic(tmp_path):
    d1 = write_parquet_atomic(_df(), tmp_path / "x.parquet")
    d2 = write_parquet_atomic(_df(), tmp_path / "y.parquet")
    assert d1 == hashlib.sha256((tmp_path / "x.parquet").read_bytes()).hexdigest()
    assert d1 == d2  # same table → byte-identical file
    assert not list(tmp_path.glob(".*.tmp"))  # no temp files left behind


@pytest.mark.parametrize("damage", ["truncate", "alter"])
def test_damaged_file_is_refused_and_not_reused(tmp_path, damage):
    s = StageStore(tmp_path, "r1")
    key = stage_key("demo", {"p": 1}, {})
    s.write_stage("demo", {"t": _df()}, key=key, params={"p": 1}, inputs={})
    p = s.path("demo", "t.parquet")
    raw = p.read_bytes()
    p.write_bytes(raw[: len(raw) // 2] if damage == "truncate" else raw[:-9] + b"X" + raw[-8:])
    with pytest.raises(CorruptStageError, match="does not match the SHA-256"):
        s.read_table("demo", "t")
    assert StageStore(tmp_path, "r2").find_reusable("demo", key) is None


def test_reuse_needs_same_key(tmp_path):
    s = StageStore(tmp_path, "r1")
    s.write_stage("demo", {"t": _df()}, key=stage_key("demo", {"p": 1}, {}), params={}, inputs={})
    other = StageStore(tmp_path, "r2")
    assert other.find_reusable("demo", stage_key("demo", {"p": 2}, {})) is None
    found = other.find_reusable("demo", stage_key("demo", {"p": 1}, {}))
    adopted = other.adopt("demo", found)
    assert adopted["reused_from"] == "r1"
    pd.testing.assert_frame_equal(other.read_table("demo", "t"), _df())
