"""Property-based fuzzing of ``shiftlib.ingest.prepare_tables`` (issue 17): any pair of tables — mixed dtypes,
NaN, ±inf, empty strings, Unicode, huge integers, booleans, datetimes, categoricals, constant columns, odd
labels — gives either a valid encoded table or an ``IngestError`` (the project's input error), never any
other exception."""

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
