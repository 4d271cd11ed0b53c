"""tasks/inputs.py: the tables are read once per run (issue 30, item 3): the preflight keeps what it read for
this process's ingest, which takes it instead of reading again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tasks.inputs
from flows.config import RetrainConfig
from flows.preflight import preflight
from shiftlib.errors import ShiftflowInputError
from tasks.ingest import ROW
from tasks.inputs import LabelsInputError, discard_kept, read_inputs

N = 120


def _frame(seed: int = 0, n: int = N) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"a": rng.normal(0, 1, n), "b": rng.choice(["x", "y"], n), "y": np.tile([0, 1], n // 2)})


@pytest.fixture
def tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, list[str]]:
    """Two CSV tables, and the specs every ``read_table`` call reads (counted)."""
    src, tgt = tmp_path / "s.csv", tmp_path / "t.csv"
    _frame(0).to_csv(src, index=False)
    _frame(1).drop(columns=["y"]).to_csv(tgt, index=False)
    reads: list[str] = []
    real = tasks.inputs.read_table

    def counted(spec, **kw):
        reads.append(spec)
        return real(spec, **kw)

    monkeypatch.setattr(tasks.inputs, "read_table", counted)
    discard_kept()
    yield f"file:{src}", f"file:{tgt}", reads
    discard_kept()


def _config(src: str, tgt: str, **kw) -> RetrainConfig:
    return RetrainConfig(source=src, target=tgt, label="y", learners=["LR"], selection_folds=5, **kw)


def test_ingest_takes_the_tables_the_preflight_read(tables) -> None:
    src, tgt, reads = tables
    preflight(_config(src, tgt))
    assert reads == [src, tgt]  # the preflight read each table once
    source, target, _ = read_inputs(src, tgt, "y", None)  # what the ingest task calls
    assert reads == [src, tgt]  # ... and ingest read nothing again
    pd.testing.assert_frame_equal(source, _frame(0))  # the rows as written: the preflight did not alter them
    pd.testing.assert_frame_equal(target, _frame(1).drop(columns=["y"]))
    read_inputs(src, tgt, "y", None)  # taken once: a later read reads again
    assert reads == [src, tgt, src, tgt]


def test_a_table_changed_after_the_preflight_is_read_again(tables, tmp_path) -> None:
    src, tgt, reads = tables
    preflight(_config(src, tgt))
    _frame(2, n=60).to_csv(tmp_path / "s.csv", index=False)  # rewritten: other size and mtime
    source, _, _ = read_inputs(src, tgt, "y", None)
    assert len(source) == 60 and reads == [src, tgt, src, tgt]


def test_other_tables_or_label_are_not_handed_over(tables) -> None:
    src, tgt, reads = tables
    preflight(_config(src, tgt))
    read_inputs(src, src, "y", None)  # another target
    assert reads == [src, tgt, src, src]


def test_a_refused_preflight_keeps_nothing(tables) -> None:
    src, tgt, reads = tables
    with pytest.raises(ShiftflowInputError, match="label_budget|label budget"):  # refused after reading
        preflight(_config(src, tgt, label_budget=10_000))
    assert reads == [src, tgt]
    read_inputs(src, tgt, "y", None)
    assert reads == [src, tgt, src, tgt]


def test_read_filled_takes_spreadsheet_text_odd_paths_and_the_sources_spelling(tmp_path: Path) -> None:
    """``read_filled`` on its own: a tab-separated .txt (a spreadsheet's text export), a plain path holding '?'
    (taken literally: only a file: spec carries reading options), and source classes spelled with a trailing space
    ('no ', 'yes ') matched by the filled cells, which are read stripped."""
    from tasks.inputs import read_filled

    df = pd.DataFrame({ROW: [0, 3, 5], "y": ["yes ", "no", None]})
    df.to_csv(tmp_path / "lab.txt", sep="\t", index=False)
    df.to_csv(tmp_path / "q?v=2.csv", index=False)
    for spec in (f"file:{tmp_path / 'lab.txt'}", str(tmp_path / "q?v=2.csv")):
        labels, n_empty, _ = read_filled(spec, "y", ["no ", "yes "], 10)
        assert (labels, n_empty) == ({0: 1, 3: 0}, 1)
    with pytest.raises(LabelsInputError, match="unknown reading option 'v'"):
        read_filled(f"file:{tmp_path / 'lab.txt'}?v=2", "y", ["no ", "yes "], 10)


def test_source_rows_without_a_label_are_left_out_with_a_warning() -> None:
    """A sweep's survey table had one source row without a label, and the run was refused; those rows are now
    left out with a warning (they can neither train nor validate), and only a source without any label is
    refused."""
    from shiftlib.ingest import IngestError, drop_unlabeled
    from tasks.inputs import prepare_inputs

    src = _frame(0)
    src.loc[[3, 7], "y"] = np.nan
    kept, note = drop_unlabeled(src, "y")
    assert len(kept) == N - 2 and not kept["y"].isna().any() and list(kept.index) == list(range(N - 2))
    assert note == ("label column 'y' is empty in 2 of 120 source rows; those rows are left out (a row without a "
                    "label can neither train nor validate a model)")
    whole = _frame(0)
    same, none = drop_unlabeled(whole, "y")
    assert same is whole and none is None
    with pytest.warns(UserWarning, match="empty in 2 of 120 source rows"):
        inp = prepare_inputs(src, _frame(1).drop(columns=["y"]), "y", encode=False)
    assert inp.prepared.n_source == N - 2
    with pytest.raises(IngestError, match="has 120 missing value"):
        prepare_inputs(src.assign(y=np.nan), _frame(1).drop(columns=["y"]), "y", encode=False)
