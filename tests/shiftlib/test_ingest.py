"""shiftlib.ingest: every bad input named in the foundation issue gets an IngestError whose message
names the problem; good input is encoded consistently across source and target. At the end, property-based
fuzzing of ``prepare_tables`` (issue 17): any pair of tables — mixed dtypes, NaN, ±inf, empty strings, Unicode,
huge integers, booleans, datetimes, categoricals, constant columns, odd labels — gives either a valid encoded
table or an ``IngestError`` (the project's input error), never any other exception."""

from __future__ import annotations

import datetime as dt
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from shiftlib.errors import ShiftflowInputError
from shiftlib.ingest import IngestError, PreparedData
from shiftlib.preprocessor import prepare_tables


def _tables(n: int = 30) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(0)
    src = pd.DataFrame({"age": rng.normal(40, 5, n), "color": rng.choice(["red", "blue"], n),
                        "y": rng.choice(["no", "yes"], n)})
    tgt = pd.DataFrame({"age": rng.normal(45, 5, n), "color": rng.choice(["red", "blue", "green"], n)})
    return src, tgt


@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda s, t: (s.drop(columns=["y"]), t), "label column 'y' is not in the source"),
        (lambda s, t: (s.assign(y=s["y"].where(s.index != 3)), t), "1 missing value(s)"),
        (lambda s, t: (s.assign(y="no"), t), "only one class"),
        # a quantity (fractional numbers) is not a class label: 0, 0.5, 1, … — 0.5 is the first fractional value
        (lambda s, t: (s.assign(y=np.arange(len(s)) / 2), t), "holds fractional numbers (e.g. 0.5, 30 distinct"),
        (lambda s, t: (s, t.iloc[:0]), "target set has 0 rows"),
        (lambda s, t: (s, t.rename(columns={"age": "AGE"})), "missing from the target ['age']"),
        (lambda s, t: (s, t.assign(extra=1.0)), "only in the target ['extra']"),
        (lambda s, t: (s, t.assign(age="a" + t["age"].astype(str))), "column 'age' is text in the target but numeric"),
        (lambda s, t: (pd.concat([s, s[["age"]]], axis=1), t), "duplicate column names ['age']"),
        (lambda s, t: (s.assign(age=s["age"].where(s.index != 0, np.inf)), t), "infinite value"),
    ],
    ids=["no-label", "nan-label", "one-class", "fractional-label", "empty-target", "renamed", "extra", "type", "dup", "inf"],
)
def test_bad_input_is_refused_with_a_named_problem(mutate, needle):
    src, tgt = mutate(*_tables())
    with pytest.raises(IngestError) as exc:
        prepare_tables(src, tgt, "y")
    assert needle in str(exc.value)


def test_categoricals_encode_with_source_levels_and_unseen_target_level_is_all_zero():
    src, tgt = _tables()
    out = prepare_tables(src, tgt, "y")
    assert out.feature_columns == ["age", "color=blue", "color=red"]
    assert list(out.source_X.columns) == list(out.target_X.columns)
    green = (tgt["color"] == "green").to_numpy()
    # an unseen level ('green') encodes as all zeros; seen levels as exactly one 1
    assert (out.target_X.loc[green, ["color=blue", "color=red"]].sum(axis=1) == 0).all()
    assert (out.target_X.loc[~green, ["color=blue", "color=red"]].sum(axis=1) == 1).all()
    assert (out.source_X[["color=blue", "color=red"]].sum(axis=1) == 1).all()
    # labels coded in sorted order: 'no' → 0, 'yes' → 1 (positive = the larger value)
    assert out.classes == ["no", "yes"]
    np.testing.assert_array_equal(out.source_y, (src["y"] == "yes").astype(int))


def test_positive_label_reorders_codes():
    src, tgt = _tables()
    out = prepare_tables(src, tgt, "y", positive_label="no")
    assert out.classes == ["yes", "no"]
    np.testing.assert_array_equal(out.source_y, (src["y"] == "no").astype(int))


def test_missing_numeric_is_imputed_with_source_median_and_indicator():
    src, tgt = _tables()
    src.loc[[0, 1], "age"] = np.nan
    tgt.loc[[5], "age"] = np.nan
    out = prepare_tables(src, tgt, "y")
    med = float(np.nanmedian(src["age"]))  # the documented policy: source median
    assert out.imputed == {"age": med}
    assert out.source_X.loc[[0, 1], "age"].tolist() == [med, med]
    assert out.target_X.loc[5, "age"] == med
    assert out.source_X["age__missing"].sum() == 2 and out.target_X["age__missing"].sum() == 1
    assert np.isfinite(out.source_X.to_numpy()).all() and np.isfinite(out.target_X.to_numpy()).all()
    # and the user is told: which column, how many rows of each table, what filled them
    from shiftlib.ingest import check_tables

    (note,) = [n for n in check_tables(src, tgt, "y").notes if n.startswith("missing values")]
    assert note == (f"missing values in 1 column, each with a 0/1 column <column>__missing beside it so that the "
                    f"models can tell a filled value from a real one ('age': 2 of {len(src)} source rows and 1 of "
                    f"{len(tgt)} target rows, filled with the source median {med:g}); if a column is missing for "
                    "reasons the batch does not share, drop it (--drop-columns)")
    assert not any(n.startswith("missing values") for n in check_tables(*_tables(), "y").notes)  # none missing


def test_id_like_column_is_dropped_with_warning():
    src, tgt = _tables()
    src.insert(0, "customer_id", np.arange(len(src)))
    tgt.insert(0, "customer_id", np.arange(1000, 1000 + len(tgt)))
    with pytest.warns(UserWarning, match="customer_id"):
        out = prepare_tables(src, tgt, "y")
    assert "customer_id" not in out.feature_columns
    assert out.dropped_columns == {"customer_id": "id-like: every value is distinct"}


@pytest.mark.parametrize("name, warned", [("ID", True), ("sample_id", True), ("customerID", True),
                                           ("valid", False), ("Width", False)])
def test_a_repeating_code_named_like_an_id_is_kept_with_a_warning(name, warned):
    """MASS biopsy's sample ``ID`` repeats (re-measured samples), so it is not dropped as id-like; a name that
    says identifier and mostly distinct integer codes get a warning naming drop_columns, the column stays."""
    import warnings

    src, tgt = _tables()
    codes = np.arange(len(src)) * 7 + 1_000_000
    codes[1] = codes[0]  # 29 distinct of 30: not every value distinct
    src.insert(0, name, codes)
    tgt.insert(0, name, codes + 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = prepare_tables(src, tgt, "y")
    said = [str(w.message) for w in caught if name in str(w.message)]
    assert name in out.feature_columns and not out.dropped_columns
    assert said == ([f"column {name!r} is named like an identifier and holds 29 distinct codes in 30 source rows: "
                     f"it is used as a feature; if it is a key, pass --drop-columns {name} (drop_columns)"]
                    if warned else [])


@pytest.mark.parametrize("cell", [[1, 2], np.array([1, 2]), {"a": 1}, (1, 2)])
def test_nested_cells_are_refused_by_name(cell):
    """Parquet list / struct columns arrive as arrays or dicts in object cells: refused, naming the column and
    drop_columns (before, pandas' 'unhashable type' escaped as an internal error)."""
    src, tgt = _tables()
    src["tags"] = pd.Series([cell] * len(src), dtype=object)
    src.loc[::2, "tags"] = pd.Series([1] * len(src.loc[::2]), index=src.index[::2], dtype=object)  # as JSON Lines mix
    tgt["tags"] = "x"
    with pytest.raises(IngestError, match=f"column 'tags' holds nested values \\({type(cell).__name__}.*"
                                          "--drop-columns tags"):
        prepare_tables(src, tgt, "y")


def test_target_labels_are_split_off_and_never_features():
    src, tgt = _tables()
    tgt["y"] = np.where(tgt["age"] > 45, "yes", "no")
    out = prepare_tables(src, tgt, "y")
    assert "y" not in out.target_X.columns
    np.testing.assert_array_equal(out.target_y, (tgt["y"] == "yes").astype(int))


@pytest.mark.parametrize("respell, what", [(lambda v: v + " ", "only in surrounding spaces"),
                                           (str.upper, "only in case\\)"),
                                           (lambda v: f" {v.upper()}", "only in case and surrounding spaces")])
def test_source_labels_spelling_one_class_two_ways_are_refused(respell, what):
    """A third of the source labels 'yes ' beside 'yes' made four classes and a four-class model, silently."""
    src, tgt = _tables()
    src.loc[src.index[::3], "y"] = [respell(v) for v in src.loc[src.index[::3], "y"]]
    with pytest.raises(IngestError, match=f"spells a class in several ways in the source .*{what}"):
        prepare_tables(src, tgt, "y")


@pytest.mark.parametrize("respell, hint", [(lambda v: v, ""), (lambda v: v + " ", "only in surrounding spaces"),
                                           (str.upper, "only in case;"),
                                           (lambda v: f" {v.title()}", "only in case and surrounding spaces")])
def test_target_label_unseen_in_source_is_refused_when_respelt_else_not_evaluated(respell, hint):
    """Values that differ from the source's ('no'/'yes') only in spaces or case are refused, not respelled, and
    the refusal says so. A class the source lacks ('maybe', one row: a sweep's penguins split had a species only
    on the target's island) does not stop the run: the labels are not used to evaluate, and a note says why."""
    src, tgt = _tables()
    tgt["y"] = [respell(v) for v in np.where(tgt["age"] > 45, "yes", "no")]
    if not hint:
        tgt.loc[0, "y"] = "maybe"
        p = prepare_tables(src, tgt, "y")
        assert p.target_y is None
        assert any(f"values ['maybe'] never seen in the source (['no', 'yes']) in 1 of {len(tgt)} rows: no candidate "
                   "can predict them, so the candidates are not evaluated" in n for n in p.notes)
        return
    with pytest.raises(IngestError, match="never seen in the source") as err:
        prepare_tables(src, tgt, "y")
    assert f"they differ from the source's {hint}" in str(err.value)


# regressions found by the fuzzing test at the end of this file (issue 17)

@pytest.mark.parametrize("dtype, values", [("string", ["x", None, "z"]), ("boolean", [True, None, False])])
def test_nullable_text_and_boolean_with_missing_encode_as_zeros_and_indicator(dtype, values):
    # pandas' nullable dtypes answer NA to `== level`; the one-hot must still be 0/1 with an indicator
    src = pd.DataFrame({"c": pd.Series(values, dtype=dtype), "y": ["a", "b", "a"]})
    p = prepare_tables(src, src.drop(columns=["y"]), "y")
    assert np.isfinite(p.source_X.to_numpy()).all()
    np.testing.assert_array_equal(p.source_X["c__missing"], [0.0, 1.0, 0.0])  # row 1 is the missing one
    assert p.source_X.drop(columns=["c__missing"]).sum(axis=1).tolist() == [1.0, 0.0, 1.0]


def test_column_named_like_an_encoded_column_is_refused():
    # 'a=x' is also the one-hot column of level 'x' of column 'a': one would silently overwrite the other
    src = pd.DataFrame({"a": ["x", "w", "x", "w"], "a=x": [0.5, 1.5, 2.5, 3.5], "y": [0, 1, 0, 1]})
    with pytest.raises(IngestError, match=r"'a=x' would hold both level 'x' of column 'a' and column 'a=x'"):
        prepare_tables(src, src.drop(columns=["y"]), "y")


def test_integers_beyond_int64_are_numbers_and_complex_is_refused():
    big = pd.Series([2**70, 2**65, None, 3], dtype=object)  # how pandas holds ints too large for int64
    src = pd.DataFrame({"n": big, "y": [0, 1, 0, 1]})
    p = prepare_tables(src, src.drop(columns=["y"]), "y")
    np.testing.assert_array_equal(p.source_X["n"], [2.0**70, 2.0**65, np.median([2.0**70, 2.0**65, 3.0]), 3.0])
    with pytest.raises(IngestError, match="infinite"):  # 2**1100 is beyond a float
        prepare_tables(src.assign(n=pd.Series([2**1100, 1, 2, 3], dtype=object)), src.drop(columns=["y"]), "y")
    with pytest.raises(IngestError, match="complex numbers"):
        prepare_tables(src.assign(n=[1 + 2j, 1, 2, 3]), src.drop(columns=["y"]), "y")


def test_a_datetime_column_is_dropped_with_a_warning_and_text_dates_are_refused_with_advice():
    src, tgt = _tables()
    days = pd.Timestamp("2024-01-01") + pd.to_timedelta(np.arange(len(src)) % 25, unit="D")
    with pytest.warns(UserWarning, match="'when': it holds dates/times"):
        out = prepare_tables(src.assign(when=days), tgt.assign(when=days + pd.Timedelta(days=400)), "y")
    assert "when" in out.dropped_columns and not any(c.startswith("when") for c in out.feature_columns)
    # the same dates as text (a CSV): 25 values > max_levels, dropped the same way (not 20 date levels kept)
    with pytest.warns(UserWarning, match="'when': it holds dates/times as text .25 distinct values, e.g. '2024-01-01'"):
        out = prepare_tables(src.assign(when=days.astype(str)), tgt.assign(when=days.astype(str)), "y")
    assert "when" in out.dropped_columns and not any(c.startswith("when") for c in out.feature_columns)


def test_dates_as_python_objects_or_only_in_one_table_are_dropped_too():
    import datetime as dt

    src, tgt = _tables()
    days = [dt.date(2024, 1, 1 + i % 10) for i in range(len(src))]  # a Parquet date32 / SQL DATE column
    with pytest.warns(UserWarning, match="'day': it holds dates/times"):
        out = prepare_tables(src.assign(day=days), tgt.assign(day=days), "y")
    assert "day" in out.dropped_columns
    # text dates in the source (a CSV), datetimes in the target (Parquet): dropped, not one-hot encoded
    text = [d.isoformat() for d in days]
    with pytest.warns(UserWarning, match="'day': it holds dates/times"):
        out = prepare_tables(src.assign(day=text), tgt.assign(day=pd.to_datetime(text)), "y")
    assert not any(c.startswith("day") for c in out.feature_columns)


@pytest.mark.parametrize("values", [[f"{i}/{i + 1}" for i in range(25)], [f"{i}:{i + 2}" for i in range(25)],
                                    [f"{i}-{i + 4}" for i in range(25)], [f"A-{i}" for i in range(25)],
                                    [f"1.{i}.3" for i in range(25)]],
                         ids=["fractions", "ratios", "bands", "codes", "versions"])
def test_text_that_is_not_dates_keeps_its_commonest_levels(values):
    src, tgt = _tables()
    col = [values[i % 25] for i in range(len(src))]
    with pytest.warns(UserWarning, match="is text with 25 distinct values"):
        out = prepare_tables(src.assign(v=col), tgt.assign(v=col), "y")
    assert sum(c.startswith("v=") for c in out.feature_columns) == 20


def test_a_text_column_over_max_levels_keeps_its_commonest_source_levels():
    """More than ``max_levels`` levels: the ``max_levels`` most frequent source levels get columns (ties in sorted
    order), the rest encode as all zeros like an unseen level. Hand-built: 30 rows, max_levels 3; level counts
    a 10, b 8, c 4, d 4, e 4 → a, b, c kept (c before d and e: a tie, sorted order), covering 22 of 30 rows."""
    src, tgt = _tables()
    v = ["a"] * 10 + ["b"] * 8 + ["c"] * 4 + ["d"] * 4 + ["e"] * 4
    with pytest.warns(UserWarning, match=r"5 distinct values .more than max_levels=3.: its 3 most frequent source "
                      r"levels are encoded .73% of the source rows. and the other 2"):
        out = prepare_tables(src.assign(v=v), tgt.assign(v=["a", "d", "zz"] * 10), "y", max_levels=3)
    assert [c for c in out.feature_columns if c.startswith("v=")] == ["v=a", "v=b", "v=c"]
    levels = out.source_X[["v=a", "v=b", "v=c"]].to_numpy()
    assert levels[:22].sum(axis=1).tolist() == [1.0] * 22 and levels[22:].sum() == 0  # d, e → all zeros
    assert out.target_X[["v=a", "v=b", "v=c"]].to_numpy().sum(axis=1).tolist() == [1.0, 0.0, 0.0] * 10


def test_an_infinite_label_is_named_as_such():
    src, tgt = _tables()
    with pytest.raises(IngestError, match="label column 'y' holds infinite values"):
        prepare_tables(src.assign(y=np.where(np.arange(len(src)) == 0, np.inf, np.arange(len(src)) % 2)), tgt, "y")


def test_a_column_that_alone_separates_the_classes_is_named():
    """Mroz's hours are 0 exactly when the wife does not work: the column predicts the label perfectly and every
    estimate read 1.000 without a word. Now a note names it (it is kept: only the user knows when it was
    recorded). An overlapping column is not named, nor a separating one with under 5 rows in a class; the
    unseen-levels note counts the levels when it lists only five."""
    from shiftlib.ingest import LEAK_MIN_ROWS, check_tables

    rng = np.random.default_rng(0)
    works = np.array(["yes"] * 30 + ["no"] * 30)
    src = pd.DataFrame({"lfp": works, "hours": np.r_[rng.uniform(100, 2000, 30), np.zeros(30)],
                        "age": rng.uniform(20, 60, 60), "city": [f"c{i % 4}" for i in range(60)]})
    tgt = src.drop(columns="lfp").assign(city=[f"n{i % 8}" for i in range(60)])
    notes = check_tables(src, tgt, "lfp").notes
    assert [n for n in notes if "alone separates" in n] == [
        "column 'hours' alone separates the source classes (each class in a range of values of its own): if it is "
        "recorded after the outcome, it leaks the label and every estimate will look perfect; then drop it "
        "(--drop-columns hours)"]
    assert any("target levels ['n0', 'n1', 'n2', 'n3', 'n4'] (8 levels) not in the source" in n for n in notes)
    few = src.iloc[: 30 + LEAK_MIN_ROWS - 1]  # 4 'no' rows: too few to call it separation
    assert not any("alone separates" in n for n in check_tables(few, tgt, "lfp").notes)


def test_daily_dates_written_as_text_are_called_dates_not_a_row_id():
    """A text column of one date per row was dropped as 'a row id (every value is distinct)'; it is still
    dropped, and the warning says dates (as for a datetime column). A text key stays a row id."""
    days = pd.date_range("2021-01-01", periods=40).strftime("%Y-%m-%d")
    src = pd.DataFrame({"y": [0, 1] * 20, "x": np.arange(40.0), "day": days, "key": [f"k{i}" for i in range(40)]})
    with pytest.warns(UserWarning) as rec:
        p = prepare_tables(src, src.drop(columns="y"), "y")
    said = [str(w.message) for w in rec]
    assert any("dropping column 'day': it holds dates/times as text" in m for m in said)
    assert any("dropping column 'key': it looks like a row id" in m for m in said)
    assert "day" not in p.feature_columns and "key" not in p.feature_columns


def test_decimal_and_duration_columns_are_numbers():
    """Parquet/SQL decimals (money) and durations were read as text: refused for 200 levels, or one-hot encoded.
    They are numbers: a decimal as its float, a duration as its seconds (worked by hand below), in the source
    and in a served batch alike."""
    import decimal

    src = pd.DataFrame({"y": [0, 1] * 15,
                        "price": [decimal.Decimal(f"{i}.25") for i in range(30)],
                        "wait": pd.to_timedelta(np.arange(30) * 90, unit="s")})
    p = prepare_tables(src, src.drop(columns="y"), "y")
    assert p.source_X["price"].tolist()[:3] == [0.25, 1.25, 2.25]
    assert p.source_X["wait"].tolist()[:3] == [0.0, 90.0, 180.0]
    served = p.preprocessor.transform(src.drop(columns="y").head(3))
    assert served["wait"].tolist() == [0.0, 90.0, 180.0] and served["price"].tolist() == [0.25, 1.25, 2.25]


def test_a_few_dates_written_as_text_are_named():
    """SQLite gives DATETIME columns as text: three batch days were one-hot encoded without a word. They still
    are (the user may mean them as levels), and a note says what a later batch will look like."""
    from shiftlib.ingest import check_tables

    src = pd.DataFrame({"y": [0, 1] * 15, "x": np.arange(30.0),
                        "day": ["2024-01-01 00:00:00.000000", "2024-01-02 00:00:00.000000", "2024-01-03 00:00:00.000000"] * 10})
    notes = check_tables(src, src.drop(columns="y"), "y").notes
    assert any(n.startswith("column 'day' holds dates or times as text (3 values, e.g. '2024-01-01 00:00:00.000000')")
               for n in notes)
    plain = src.assign(day=["red", "green", "blue"] * 10)
    assert not any("dates" in n for n in check_tables(plain, plain.drop(columns="y"), "y").notes)


def test_columns_empty_in_the_source_or_the_target():
    """A SQL column of NULLs arrives as text: it was kept as a constant 'allnull__missing' feature, while an empty
    number column was refused. Both are refused now. A column empty in the target only is kept (imputed), with a
    note: the drift stage will find it changed."""
    from shiftlib.ingest import check_tables

    src = pd.DataFrame({"y": [0, 1] * 15, "x": np.arange(30.0), "allnull": [None] * 30})
    with pytest.raises(IngestError, match=r"column 'allnull' is empty \(all missing\) in the source; drop it"):
        check_tables(src, src.drop(columns="y"), "y")
    two = src.assign(blank=np.nan)  # every empty column named at once (helper-39 was refused one per run)
    with pytest.raises(IngestError, match=r"columns 'allnull', 'blank' are empty \(all missing\) in the source; drop "
                                          r"them \(--drop-columns allnull,blank\)"):
        check_tables(two, two.drop(columns="y"), "y")
    src = src.drop(columns="allnull").assign(z=np.arange(30.0) % 7)
    notes = check_tables(src, src.drop(columns="y").assign(x=np.nan), "y").notes
    assert [n for n in notes if "empty" in n] == [
        "column 'x' is empty (all missing) in the target: every target row gets the source's fill-in value, and the "
        "drift stage will find this column changed; if that is a fault of the batch, fix it, or drop the column "
        "(--drop-columns x)"]


# ----------------------------------------------------------------------------------------------------
# property-based fuzzing (issue 17)
# ----------------------------------------------------------------------------------------------------


KINDS = ("float", "int", "huge_int", "uint64", "bool", "text", "datetime", "timedelta", "mixed", "const",
         "category", "empty_text", "Int64", "boolean", "Float64", "string", "complex")
# names that collide with the encoder's own ('a=x' is the one-hot column of level 'x' of column 'a')
NAMES = ("a", "a=x", "a=1", "a=True", "a__missing", "b", "é ü", "0")

_text = st.one_of(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=4),
                  st.sampled_from(["x", "1", "True", "nan", "None"]))
_elements = {
    "float": st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.none()),
    "int": st.integers(-1000, 1000),
    "huge_int": st.one_of(st.integers(-(2**70), 2**70), st.integers(-(2**1100), 2**1100), st.none()),
    "uint64": st.integers(2**63, 2**64 - 1),
    "timedelta": st.one_of(st.timedeltas(min_value=dt.timedelta(days=-9999), max_value=dt.timedelta(days=9999)),
                           st.none()),
    "Int64": st.one_of(st.integers(-(2**62), 2**62), st.none()),
    "boolean": st.one_of(st.booleans(), st.none()),
    "Float64": st.one_of(st.floats(allow_nan=False, allow_infinity=True), st.none()),
    "string": st.one_of(_text, st.none()),
    "complex": st.complex_numbers(max_magnitude=1e6, allow_nan=False),
    "bool": st.one_of(st.booleans(), st.none()),
    "text": st.one_of(_text, st.none()),
    "datetime": st.one_of(st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1)),
                          st.none()),
    "mixed": st.one_of(st.integers(-5, 5), _text, st.floats(allow_nan=True), st.booleans(), st.none()),
    "empty_text": st.sampled_from(["", " ", None]),
}
_labels = st.one_of(st.sampled_from(["no", "yes", "maybe"]), st.sampled_from([0, 1, 2]), st.booleans(),
                    st.sampled_from(["ä", ""]), st.none())


@st.composite
def table_pairs(draw: st.DrawFn) -> tuple[pd.DataFrame, pd.DataFrame]:
    n_s, n_t = draw(st.integers(0, 14)), draw(st.integers(0, 14))
    n = n_s + n_t
    cols: dict[str, list] = {}
    kinds: dict[str, str] = {}
    for i in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(KINDS))
        name = draw(st.sampled_from([n for n in NAMES if n not in cols] or [f"c{i}"]))
        if kind in ("const", "category"):
            value = draw(_elements["mixed"])
            values = [value] * n if kind == "const" else draw(st.lists(st.one_of(_text, st.none()), min_size=n,
                                                                           max_size=n))
        else:
            values = draw(st.lists(_elements[kind], min_size=n, max_size=n))
        cols[name], kinds[name] = values, kind
    label_style = draw(st.sampled_from(["mixed", "two", "one"]))
    if label_style == "two":
        y = [("no", "yes")[i % 2] for i in range(n)]
    elif label_style == "one":
        y = ["yes"] * n
    else:
        y = draw(st.lists(_labels, min_size=n, max_size=n))

    def frame(rows: slice, with_label: bool) -> pd.DataFrame:
        data = {}
        for name, values in cols.items():
            s = pd.Series(values[rows], dtype=object)
            kind = kinds[name]
            if kind in ("category", "Int64", "boolean", "Float64", "string"):
                s = s.astype(kind)
            elif kind == "datetime":
                s = pd.to_datetime(s)
            elif kind == "timedelta":
                s = pd.to_timedelta(s)
            else:
                s = s.infer_objects()
            data[name] = s.reset_index(drop=True)
        out = pd.DataFrame(data, index=pd.RangeIndex(len(range(n)[rows])))
        if with_label:
            out["y"] = pd.Series(y[rows], dtype=object).infer_objects().to_numpy()
        return out

    return frame(slice(0, n_s), True), frame(slice(n_s, n), draw(st.booleans()))


def _check_valid(p: PreparedData, src: pd.DataFrame, tgt: pd.DataFrame) -> None:
    """Invariants of an encoded table, each a property the module docstring promises."""
    assert list(p.source_X.columns) == list(p.target_X.columns) == p.feature_columns
    assert len(p.source_X) == len(src) and len(p.target_X) == len(tgt) and len(p.source_y) == len(src)
    for X in (p.source_X, p.target_X):
        arr = X.to_numpy(dtype=float)
        assert arr.dtype == np.float64 and np.isfinite(arr).all()  # imputed, no ±inf, no NaN
    assert p.source_y.dtype == np.int64 and set(np.unique(p.source_y)) == set(range(len(p.classes)))
    assert len(p.classes) >= 2
    if p.target_y is not None:
        assert len(p.target_y) == len(tgt) and set(np.unique(p.target_y)) <= set(range(len(p.classes)))
    for col, levels in p.encodings.items():  # one-hot: at most one level set per row
        cols = [f"{col}={lev}" for lev in levels]
        assert (p.source_X[cols].sum(axis=1) <= 1).all() and (p.target_X[cols].sum(axis=1) <= 1).all()
    # no input column is lost or overwritten: one output column per number, per level, per missing indicator
    kept = [c for c in src.columns if c != "y" and c not in p.dropped_columns]
    expected = sum(len(p.encodings[c]) if c in p.encodings else 1 for c in kept)
    expected += sum(1 for c in kept if src[c].isna().any() or tgt[c].isna().any())
    assert len(p.feature_columns) == len(set(p.feature_columns)) == expected
    p.to_dict()  # the manifest summary serialises


#: at least this share of the generated table pairs must be encoded, not refused: a test that passes when ingest
#: refuses everything checks nothing (issue 30). The derandomized draws encode 53 of 300 (0.18); the bound is about
#: half of that, so a generator change that shifts the mix a little does not fail it, and refusing everything does.
MIN_ENCODED_SHARE = 0.10


@pytest.mark.slow  # default-suite budget: 15–37 s each beside other work (--durations)
@pytest.mark.heavy
def test_ingest_gives_a_valid_table_or_its_input_error():
    outcomes: list[str] = []

    @settings(max_examples=300, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(table_pairs())
    def check(pair):
        src, tgt = pair
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # id-like columns are dropped with a warning: allowed
            try:
                prepared = prepare_tables(src, tgt, "y")
            except IngestError as exc:
                assert isinstance(exc, ShiftflowInputError) and str(exc)
                event(f"refused: {str(exc)[:25]}")
                outcomes.append("refused")
                return
        event("encoded")
        _check_valid(prepared, src, tgt)
        outcomes.append("encoded")

    check()
    share = outcomes.count("encoded") / len(outcomes)
    print(f"[fuzz] {outcomes.count('encoded')} of {len(outcomes)} table pairs encoded ({share:.2f})")
    assert share >= MIN_ENCODED_SHARE, share


def test_a_numeric_column_with_a_few_text_codes_in_the_target_reads_them_as_missing():
    """A sweep's Cars93 split was refused: ``Cylinders`` is numeric in the source and text in the target, where one
    car has ``rotary``. Numbers written as text are read as numbers, the other values as missing (with a warning
    that names them); a column where at least half the values are text is still refused."""
    from shiftlib.ingest import check_tables, coerce_column

    src, tgt = _tables()
    codes = tgt["age"].astype(object)
    codes.iloc[1] = "rotary"
    codes.iloc[2] = str(codes.iloc[2])  # a number written as text
    with pytest.warns(UserWarning, match=r"column 'age' is numeric in the source, but 1 of the target's "
                                         rf"{tgt['age'].notna().sum()} values are not numbers \(\['rotary'\]\)"):
        checked = check_tables(src, tgt.assign(age=codes), "y")
    assert checked.n_target == len(tgt) and checked.plan.kinds["age"] == "numeric"
    with pytest.warns(UserWarning, match="read as missing"):  # a served model's batch is read the same way
        got = coerce_column(codes, "age", "numeric", False)
    assert np.isnan(got.iloc[1]) and got.iloc[2] == pytest.approx(float(tgt["age"].iloc[2]))
    np.testing.assert_array_equal(got.drop(index=[1]).to_numpy(), tgt["age"].drop(index=[1]).to_numpy())
    half = tgt["age"].astype(object)
    half.iloc[: (len(half) + 1) // 2] = "rotary"
    with pytest.raises(IngestError, match="column 'age' is text in the target but numeric"):
        check_tables(src, tgt.assign(age=half), "y")



def _derived(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.uniform(size=n), "b": rng.uniform(size=n), "noise": rng.normal(size=n),
                       "kind": rng.choice(["x", "y", "z"], size=n)})
    return df.assign(label=np.where((df["a"] > 0.5) & (df["b"] > 0.3), "yes", "no"))


def test_feature_origins_map_every_encoded_column_to_its_source_column():
    from shiftlib.ingest import feature_origins, plan_encoding

    src = pd.DataFrame({"n": [1.0, np.nan, 3.0], "t": ["u", "v", None]})
    assert feature_origins(plan_encoding(src)) == {"n__missing": "n", "n": "n", "t__missing": "t", "t=u": "t",
                                                   "t=v": "t"}


def test_a_label_computed_from_two_columns_is_found_and_a_noisy_one_is_not():
    """y = (a > 0.5) and (b > 0.3): a depth-2 rule; a depth-3 tree reproduces it on every row and, up to rows at the
    thresholds, out of fold. The same label with a tenth of it flipped at random is what a real outcome looks like:
    not flagged. A rule through a text level is named by its source column."""
    from shiftlib.ingest import LEAK_DEPTH, LEAK_OOF_ERRORS, feature_origins, label_rule_columns
    from shiftlib.preprocessor import prepare_tables

    assert (LEAK_DEPTH, LEAK_OOF_ERRORS) == (3, 0.01)
    df = _derived()
    p = prepare_tables(df, df.drop(columns=["label"]), "label")
    origins = feature_origins(p.preprocessor.plan_)
    assert sorted(label_rule_columns(p.source_X, p.source_y, origins)) == ["a", "b"]
    # beyond max_rows, a stratified sample: a rule exact on every row is exact on it
    big = _derived(3000, seed=1)
    q = prepare_tables(big, big.drop(columns=["label"]), "label")
    assert sorted(label_rule_columns(q.source_X, q.source_y, feature_origins(q.preprocessor.plan_),
                                     max_rows=500)) == ["a", "b"]
    flipped = df.copy()
    flip = np.random.default_rng(2).uniform(size=len(df)) < 0.1
    flipped.loc[flip, "label"] = np.where(flipped.loc[flip, "label"] == "yes", "no", "yes")
    r = prepare_tables(flipped, flipped.drop(columns=["label"]), "label")
    assert label_rule_columns(r.source_X, r.source_y, feature_origins(r.preprocessor.plan_)) == []
    by_level = df.assign(label=np.where((df["kind"] == "x") | (df["a"] > 0.8), "yes", "no"))
    s = prepare_tables(by_level, by_level.drop(columns=["label"]), "label")
    assert sorted(label_rule_columns(s.source_X, s.source_y, feature_origins(s.preprocessor.plan_))) == ["a", "kind"]
    # a class with fewer than LEAK_MIN_ROWS rows: too few to tell a rule from chance
    few = df.assign(label=np.where(np.arange(len(df)) < 4, "rare", "common"))
    t = prepare_tables(few, few.drop(columns=["label"]), "label")
    assert label_rule_columns(t.source_X, t.source_y, feature_origins(t.preprocessor.plan_)) == []
