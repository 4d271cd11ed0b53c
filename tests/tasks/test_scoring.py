"""tasks.scoring: model references, the batch and output checks, the scores table and its writers.

Numbers are checked against the model's own ``predict_proba`` (an independent path to the same probabilities)
and against hand-written expectations of the table's shape and keys."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from shiftlib.serving import ServedModel
from tasks.scoring import (
    ModelRef,
    ScoreInputError,
    check_batch,
    check_out,
    parse_model_ref,
    resolve_version,
    score_frame,
    used_inputs,
    write_scores,
)


@pytest.fixture(scope="module")
def model_and_batch() -> tuple[ServedModel, pd.DataFrame]:
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(60, 2)), columns=["a", "b"])
    y = (X["a"] + rng.normal(scale=0.5, size=60) > 0).astype(int)
    model = ServedModel([("prepare", StandardScaler()), ("model", LogisticRegression())],
                        class_labels=["No", "Yes"]).fit(X, y)
    return model, X.assign(cust=[f"c{i}" for i in range(60)], extra=1.0)


@pytest.mark.parametrize(("text", "ref"), [
    ("m", ModelRef("m", "champion", None)),                  # a bare name: its champion
    ("shiftflow-pima@challenger", ModelRef("shiftflow-pima", "challenger", None)),
    ("shiftflow-pima/12", ModelRef("shiftflow-pima", None, "12")),
    ("team/model@champion", ModelRef("team/model", "champion", None)),  # a slash in the name is the name's
])
def test_model_references(text, ref):
    assert parse_model_ref(text) == ref


@pytest.mark.parametrize("text", ["", "  ", "@champion", "/3"])
def test_a_malformed_reference_is_refused(text):
    with pytest.raises(ScoreInputError, match="NAME@ALIAS"):
        parse_model_ref(text)


def test_scores_are_the_models_labels_and_probabilities_with_the_key_and_version(model_and_batch):
    model, batch = model_and_batch
    table, proba = score_frame(model, batch, ["a", "b"], version="3", id_column="cust", chunk_rows=7)
    expected = model.predict_proba(batch[["a", "b"]])
    assert list(table.columns) == ["cust", "predicted", "proba_No", "proba_Yes", "model_version"]
    assert np.allclose(table[["proba_No", "proba_Yes"]], expected) and np.allclose(proba, expected)
    assert list(table["predicted"]) == list(np.array(["No", "Yes"])[expected.argmax(axis=1)])
    assert list(table["cust"]) == list(batch["cust"]) and set(table["model_version"]) == {"3"}
    whole, _ = score_frame(model, batch, ["a", "b"], version="3", id_column=None)  # one chunk: the same scores
    assert list(whole.columns)[0] == "row" and list(whole["row"]) == list(range(60))
    pd.testing.assert_frame_equal(whole.drop(columns="row"), table.drop(columns="cust"), rtol=1e-12)


def test_a_model_without_labels_is_refused(model_and_batch):
    from sklearn.pipeline import Pipeline

    _, batch = model_and_batch
    plain = Pipeline([("model", LogisticRegression())]).fit(batch[["a", "b"]], (batch["a"] > 0).astype(int))
    with pytest.raises(ScoreInputError, match="before models carried their class labels"):
        score_frame(plain, batch, ["a", "b"], version="1", id_column=None)


def test_a_batch_missing_inputs_is_refused_naming_them(model_and_batch):
    _, batch = model_and_batch
    with pytest.raises(ScoreInputError, match=r"lacks 2 of the 3 input columns the model uses: \['glu', 'bmi'\]; "
                                              r"only in the batch: \['b', 'cust', 'extra'\]"):
        check_batch(batch, ["a", "glu", "bmi"], id_column=None)
    # a column the model never uses (retrain dropped it: an id, a date) may be absent: it is added empty
    filled = check_batch(batch, ["a", "when"], id_column=None, used=["a"])
    assert filled["when"].isna().all() and list(filled.columns) == [*batch.columns, "when"]
    assert check_batch(batch, ["a"], id_column=None) is batch
    with pytest.raises(ScoreInputError, match="--id-column 'key' is not a column"):
        check_batch(batch, ["a"], id_column="key")
    with pytest.raises(ScoreInputError, match="no rows"):
        check_batch(batch.iloc[:0], ["a"], id_column=None)


def test_a_batch_without_the_columns_retrain_dropped_is_scored():
    """helper-39: a batch without the id and the date column that retrain dropped (never features) was refused.
    ``used_inputs`` reads what the encoder kept; the batch is scored as if those columns were there."""
    from shiftlib.preprocessor import TablePreprocessor

    rng = np.random.default_rng(1)
    X = pd.DataFrame({"case_id": [f"id{i}" for i in range(80)], "a": rng.normal(size=80),
                      "b": rng.choice(["x", "y"], size=80)})
    y = (X["a"] > 0).astype(int)
    model = ServedModel([("prepare", TablePreprocessor()), ("model", LogisticRegression())],
                        class_labels=["No", "Yes"]).fit(X, y)
    inputs = ["case_id", "a", "b"]
    assert used_inputs(model, inputs) == ["a", "b"]
    batch = check_batch(X.drop(columns="case_id"), inputs, id_column=None, used=used_inputs(model, inputs))
    table, proba = score_frame(model, batch, inputs, version="1", id_column=None)
    assert np.allclose(proba, model.predict_proba(X))
    with pytest.raises(ScoreInputError, match=r"lacks 1 of the 2 input columns the model uses: \['a'\]"):
        check_batch(X.drop(columns=["case_id", "a"]), inputs, id_column=None, used=used_inputs(model, inputs))


def test_a_batch_the_encoder_cannot_read_is_refused_by_scoring_which_writes_nothing():
    """helper-40: ±inf in a number column was refused inside the score task, after its MLflow run was logged. The
    score task now only scores (the flow calls it before the run is logged): its refusal is one sentence."""
    from shiftlib.errors import ShiftflowInputError
    from shiftlib.preprocessor import TablePreprocessor

    rng = np.random.default_rng(2)
    X = pd.DataFrame({"a": rng.normal(size=40), "b": rng.normal(size=40)})
    model = ServedModel([("prepare", TablePreprocessor()), ("model", LogisticRegression())],
                        class_labels=["No", "Yes"]).fit(X, (X["a"] > 0).astype(int))
    score_frame(model, X, ["a", "b"], version="1", id_column=None)
    with pytest.raises(ShiftflowInputError, match="inf"):
        score_frame(model, X.assign(a=np.inf), ["a", "b"], version="1", id_column=None)


def test_an_existing_file_is_kept_unless_overwrite(model_and_batch, tmp_path):
    model, batch = model_and_batch
    table, _ = score_frame(model, batch, ["a", "b"], version="1", id_column=None)
    out = tmp_path / "deep" / "scores.parquet"
    assert write_scores(table, f"file:{out}", overwrite=False) == str(out.resolve())  # its folder is created
    pd.testing.assert_frame_equal(pd.read_parquet(out), table, check_dtype=False)
    before = out.read_bytes()
    with pytest.raises(ScoreInputError, match="exists; pass --overwrite"):
        write_scores(table.iloc[:5], f"file:{out}", overwrite=False)
    assert out.read_bytes() == before  # nothing written
    write_scores(table.iloc[:5], f"file:{out}", overwrite=True)
    assert len(pd.read_parquet(out)) == 5
    csv = tmp_path / "scores.csv"
    write_scores(table, f"file:{csv}", overwrite=False)
    assert pd.read_csv(csv)["predicted"].tolist() == table["predicted"].tolist()


@pytest.mark.parametrize(("out", "words"), [
    ("file:scores.txt", "must end in .parquet or .csv"),
    ("scores.parquet", "is not one of file:PATH.parquet"),
    ("sql:sqlite:///x.db::SELECT * FROM t", "must name a table to create"),
])
def test_bad_outputs_are_refused(out, words):
    with pytest.raises(ScoreInputError, match=words):
        check_out(out, overwrite=False)


def test_a_file_in_the_way_of_the_folder_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(ScoreInputError, match="is a file, not a folder"):
        check_out(f"file:{tmp_path / 'f' / 'scores.parquet'}", overwrite=False)


def test_sql_scores_go_to_a_new_table_and_an_existing_one_is_never_changed(model_and_batch, tmp_path):
    import sqlite3

    model, batch = model_and_batch
    table, _ = score_frame(model, batch, ["a", "b"], version="1", id_column="cust")
    db = tmp_path / "w.db"
    sqlite3.connect(db).close()
    write_scores(table, f"sql:sqlite:///{db}::scores", overwrite=False)
    back = pd.read_sql("SELECT * FROM scores", f"sqlite:///{db}")
    assert back["cust"].tolist() == table["cust"].tolist()
    assert np.allclose(back["proba_Yes"], table["proba_Yes"])
    with pytest.raises(ScoreInputError, match="table scores exists"):
        write_scores(table.iloc[:3], f"sql:sqlite:///{db}::scores", overwrite=True)
    assert len(pd.read_sql("SELECT * FROM scores", f"sqlite:///{db}")) == len(table)


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> MlflowClient:
    tmp = tmp_path_factory.mktemp("registry")
    client = MlflowClient(f"sqlite:///{tmp / 'mlflow.db'}")
    client.create_registered_model("m")
    for _ in range(2):
        client.create_model_version("m", source=(tmp / "model").as_uri())
    client.set_registered_model_alias("m", "champion", "1")
    return client


@pytest.mark.parametrize(("text", "version"), [("m", "1"), ("m@champion", "1"), ("m/2", "2")])
def test_a_reference_resolves_to_its_version(registry, text, version):
    assert str(resolve_version(registry, parse_model_ref(text)).version) == version


@pytest.mark.parametrize(("text", "words"), [
    ("nope", r"no registered model 'nope'; the registry has \['m'\]"),
    ("m@challenger", r"m has no alias @challenger; it has @champion \(v1\)"),
    ("m/9", "m has no version 9; its versions are 1, 2"),
])
def test_unknown_models_aliases_and_versions_are_refused_naming_what_exists(registry, text, words):
    with pytest.raises(ScoreInputError, match=words):
        resolve_version(registry, parse_model_ref(text))


def test_without_a_champion_the_refusal_says_what_the_gate_decided(registry):
    # a first version left undecided (revision 7) or refused: no @champion; the refusal says why
    registry.delete_registered_model_alias("m", "champion")
    registry.set_registered_model_alias("m", "challenger", "2")
    registry.set_model_version_tag("m", "2", "shiftflow.decision", "undecided")
    try:
        _refusals_without_a_champion(registry)
    finally:  # the module's registry as the other tests find it
        registry.delete_model_version_tag("m", "2", "shiftflow.decision")
        registry.delete_registered_model_alias("m", "challenger")
        registry.set_registered_model_alias("m", "champion", "1")


def _refusals_without_a_champion(registry) -> None:
    with pytest.raises(ScoreInputError, match=r"m has no alias @champion: no version serves yet \(the newest, v2, is "
                       r"undecided: its gate waits for target labels \(the closing report of that run says which\)\); "
                       r"it has @challenger \(v2\); name a version with --model m/VERSION"):
        resolve_version(registry, parse_model_ref("m"))
    registry.set_model_version_tag("m", "2", "shiftflow.decision", "refused")
    with pytest.raises(ScoreInputError, match=r"v2, is refused: the gate refused it"):
        resolve_version(registry, parse_model_ref("m"))


def test_unseen_rows_read_the_encoders_levels_and_skip_a_column_at_its_cap() -> None:
    """``shiftflow score``'s rows with a level the served version's source never had: 'z' in column g (3 source
    levels, under the cap of 3 + 1) is new; column many has 5 source levels, more than the cap of 4, so the encoder
    kept its 4 most frequent and the rarest, 'e', would read as new: that column is left out (helper-38)."""
    from shiftlib.preprocessor import TablePreprocessor
    from tasks.scoring import unseen_rows

    src = pd.DataFrame({"g": ["a", "b", "c"] * 4, "many": list("aaabbbcccdde"), "x": range(12)})
    prep = TablePreprocessor(max_levels=4).fit(src)
    batch = pd.DataFrame({"g": ["a", "z", None, "c"], "many": ["e", "a", "q", "b"], "x": [1, 2, 3, 4]})
    assert unseen_rows(batch, prep).tolist() == [False, True, False, False]
    assert unseen_rows(batch, object()) is None
