"""shiftlib.preprocessor.TablePreprocessor: the fitted encoder served in front of every model."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from shiftlib.ingest import IngestError
from shiftlib.preprocessor import TablePreprocessor, prepare_tables


def _tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(5)
    n = 40
    src = pd.DataFrame({"age": rng.normal(40, 5, n), "n_calls": rng.integers(0, 9, n),
                        "color": rng.choice(["red", "blue"], n), "y": rng.choice(["no", "yes"], n)})
    src.loc[[1, 4], "age"] = np.nan
    tgt = pd.DataFrame({"age": rng.normal(45, 5, n), "n_calls": rng.integers(0, 9, n),
                        "color": rng.choice(["red", "blue", "green"], n)})
    tgt.loc[[3], "color"] = None
    return src, tgt


@pytest.mark.heavy
def test_a_row_encodes_the_same_alone_as_in_its_batch():
    # a served model scores whatever batch it is given: no row's encoding may depend on the other rows
    src, tgt = _tables()
    pre = prepare_tables(src, tgt, "y").preprocessor
    batch = pre.transform(tgt)
    alone = pd.concat([pre.transform(tgt.iloc[[i]]) for i in range(len(tgt))], ignore_index=True)
    pd.testing.assert_frame_equal(alone, batch, check_exact=True)


def test_a_missing_value_neither_table_had_is_imputed_with_the_source_median_and_no_new_column():
    src, tgt = _tables()
    p = prepare_tables(src, tgt, "y")
    row = tgt.head(1).astype({"n_calls": "float64"}).assign(n_calls=np.nan)
    out = p.preprocessor.transform(row)
    assert list(out.columns) == p.feature_columns and "n_calls__missing" not in out.columns
    assert out.loc[0, "n_calls"] == float(np.median(src["n_calls"]))  # the source median, computed here


def test_fit_without_a_target_decides_from_the_source_alone_and_clones_unfitted():
    src, tgt = _tables()
    pre = TablePreprocessor().fit(src.drop(columns=["y"]))
    # 'color' is missing only in the target: without it, no indicator; 'age' is missing in the source
    assert pre.feature_columns_ == ["age__missing", "age", "n_calls", "color=blue", "color=red"]
    assert list(pre.get_feature_names_out()) == pre.feature_columns_
    assert clone(pre).get_params() == {"max_levels": 20, "min_rows_for_id": 20}
    assert not hasattr(clone(pre), "column_transformer_")
    with pytest.raises(IngestError, match="column 'age' is text in the target but numeric in the source"):
        pre.transform(tgt.assign(age="old"))
    with pytest.raises(IngestError, match=r"missing from the target \['color'\]"):
        pre.transform(tgt.drop(columns=["color"]))
