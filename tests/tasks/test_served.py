"""tasks.served: the served stage scores today's batch with the registered champion exactly as its scikit-learn
model does, and writes nothing without a champion of this input schema; the registry facts it shares (input schema
and its digest, the default model name, the refusal of a name of another schema, the champion version, the
contender's name) follow from the ingest stage and the registry."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from types import SimpleNamespace

import mlflow
import mlflow.sklearn
import numpy as np
import pandas as pd
import pytest
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from shiftlib.errors import ShiftflowInputError
from tasks.ingest import ROW, IngestOptions, ingest, raw_input_schema
from tasks.served import CLASSES as CLASSES_TAG
from tasks.served import (
    SCHEMA,
    SERVED,
    ServedManifest,
    check_model_name,
    columns_words,
    default_model_name,
    incumbent,
    input_schema,
    read_served,
    served,
    served_contender,
    served_name,
    served_proba,
)
from tasks.store import StageStore
from tasks.tracking import RunContext

CLASSES = ["a", "b", "c"]  # the source's labels; ingest codes them 0, 1, 2 in this order


def _tables(root: Path, *, extra: bool = False, label: str = "y") -> tuple[str, str]:
    """A source of three classes and a target batch of 12 rows with a row key 'k' (ids 100 …), as CSV files."""
    rng = np.random.default_rng(0)
    n_s, n_t = 60, 12
    src = pd.DataFrame({"x1": rng.normal(size=n_s), "x2": rng.normal(size=n_s), label: np.repeat(CLASSES, n_s // 3)})
    tgt = pd.DataFrame({"k": np.arange(100, 100 + n_t), "x1": rng.normal(0.5, 1, n_t), "x2": rng.normal(size=n_t)})
    if extra:
        src["x3"], tgt["x3"] = rng.normal(size=n_s), rng.normal(size=n_t)
    tag = f"{label}{'-x3' if extra else ''}"
    src.to_csv(root / f"src-{tag}.csv", index=False)
    tgt.to_csv(root / f"tgt-{tag}.csv", index=False)
    return f"file:{root / f'src-{tag}.csv'}", f"file:{root / f'tgt-{tag}.csv'}"


def _ingested(root: Path, run_id: str, **kw) -> StageStore:
    store = StageStore(root / "runs", run_id)
    src, tgt = _tables(root, **kw)
    ingest.fn(store, src, tgt, kw.get("label", "y"), options=IngestOptions(id_column="k"))
    return store


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """One sqlite MLflow store (its schema takes seconds to create) with the process pointed at it, an ingested
    run, and two logged models: a 'prepare' → 'model' pipeline fitted on codes 0 and 2 only (never 'b'), and a
    bare classifier without the 'prepare' step."""
    root = tmp_path_factory.mktemp("served")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    before = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)  # served_proba loads models:/ URIs from the process's store (as the flow sets it)
    client = MlflowClient(uri)
    exp = client.create_experiment("served", artifact_location=(root / "art").as_uri())
    store = _ingested(root, "r1")
    X = store.read_table("ingest", "source")[["x1", "x2"]]
    y = store.read_table("ingest", "source")["_label"].to_numpy()
    keep = y != 1
    with threadpool_limits(1):
        pipe = Pipeline([("prepare", StandardScaler()), ("model", LogisticRegression())]).fit(X[keep], y[keep])
        bare = LogisticRegression().fit(X, y)
    uris = {}
    for name, model in (("pipe", pipe), ("bare", bare)):
        with mlflow.start_run(experiment_id=exp) as run:
            # pip_requirements given: MLflow would otherwise infer them in a subprocess (~10 s per model)
            info = mlflow.sklearn.log_model(model, name="model", pip_requirements=["scikit-learn"],
                                            serialization_format="cloudpickle")
        uris[name] = (info.model_uri, run.info.run_id)
    yield SimpleNamespace(root=root, uri=uri, client=client, exp=exp, store=store, pipe=pipe, uris=uris)
    mlflow.set_tracking_uri(before)


def _register(reg, name: str, model: str, *, schema: str | None, champion: bool = True, columns: str | None = None,
              classes: list[str] | None = None):
    """A new version of registered model ``name`` holding logged model ``model`` ('pipe' or 'bare')."""
    try:
        reg.client.create_registered_model(name)
    except MlflowException:
        pass  # a further version of a model made before
    tags = {} if schema is None else {SCHEMA: schema}
    if columns is not None:
        tags["shiftflow.input_columns"] = columns
    if classes is not None:
        tags[CLASSES_TAG] = json.dumps(classes)
    uri, run_id = reg.uris[model]
    v = reg.client.create_model_version(name, uri, run_id=run_id, tags=tags)
    if champion:
        reg.client.set_registered_model_alias(name, "champion", v.version)
    return v


def _ctx(reg) -> RunContext:
    return RunContext(reg.uri, reg.exp, "", "", 0)


# --- the registry facts ----------------------------------------------------------------------------------------------


def test_the_input_schema_is_the_raw_columns_label_and_classes_named_by_a_16_hex_digest(registry):
    store = registry.store
    schema = input_schema(store)
    facts = {"inputs": raw_input_schema(store).to_dict(), "label": "y", "classes": CLASSES}
    assert {k: v for k, v in schema.items() if k != "digest"} == facts
    assert [c["name"] for c in schema["inputs"]] == ["x1", "x2"]  # the row key 'k' is not an input
    assert schema["digest"] == hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]
    # the same tables in another run: the same schema; another column or another label name: another one
    root = registry.root
    assert input_schema(_ingested(root, "r-same"))["digest"] == schema["digest"]
    assert input_schema(_ingested(root, "r-x3", extra=True))["digest"] != schema["digest"]
    assert input_schema(_ingested(root, "r-label", label="outcome"))["digest"] != schema["digest"]


def test_the_default_model_name_carries_the_first_8_hex_digits_of_the_schema_digest():
    assert default_model_name("shiftflow-y", {"digest": "0123456789abcdef"}) == "shiftflow-y-01234567"
    assert default_model_name("m", {"digest": "fedcba9876543210"}) == "m-fedcba98"


def test_columns_words_lists_up_to_the_limit_then_counts_them_all():
    cols = [{"name": f"c{i}"} for i in range(8)]
    assert columns_words(cols) == "c0, c1, c2, c3, c4, c5 … (8 in all)"
    assert columns_words(cols[:6]) == "c0, c1, c2, c3, c4, c5"  # exactly the limit: no count
    assert columns_words(cols[:3], limit=2) == "c0, c1 … (3 in all)"
    assert columns_words([{"name": 1}, {}]) == "1, None"


def test_a_name_whose_versions_take_other_inputs_is_refused_naming_the_fix(registry):
    schema, client = input_schema(registry.store), registry.client
    _register(registry, "other-schema", "pipe", schema=schema["digest"], champion=False)  # v1: this schema
    _register(registry, "other-schema", "pipe", schema="0123456789abcdef", champion=False, columns="a, b, c")
    with pytest.raises(ShiftflowInputError) as err:
        check_model_name(client, "other-schema", schema)
    assert str(err.value) == (
        "registered model 'other-schema' serves other input columns, label or classes (v2: a, b, c; this run: x1, "
        "x2, label 'y'); give another --model-name (model_name), or leave it unset: the default name carries the "
        "input schema")
    _register(registry, "no-columns", "pipe", schema="0123456789abcdef", champion=False)
    with pytest.raises(ShiftflowInputError, match=r"\(v1: \?; this run: x1, x2"):
        check_model_name(client, "no-columns", schema)
    # the same columns, but this source lacks a class the registered version predicts: named, with the fix
    _register(registry, "lost-class", "pipe", schema="0123456789abcdef", champion=False, columns="x1, x2",
              classes=["a", "b", "c", "d"])
    with pytest.raises(ShiftflowInputError) as err:
        check_model_name(client, "lost-class", schema)
    assert str(err.value) == (
        "registered model 'lost-class' serves other input columns, label or classes (v1: x1, x2, classes a, b, c, d; "
        "this run: x1, x2, label 'y', classes a, b, c); this source has no rows of class d, which v1 predicts: add "
        "some to the source, or give another --model-name (model_name), or leave it unset: the default name "
        "carries the input schema")
    # the same schema, versions that predate the tag, and a name not registered yet all pass
    _register(registry, "same-schema", "pipe", schema=schema["digest"], champion=False)
    _register(registry, "untagged", "pipe", schema=None, champion=False)
    for name in ("same-schema", "untagged", "never-registered"):
        check_model_name(client, name, schema)


def test_a_registry_that_cannot_be_searched_does_not_refuse_the_name(registry):
    class Refusing:
        def search_model_versions(self, query):
            raise MlflowException(f"cannot search {query}")

    check_model_name(Refusing(), "anything", input_schema(registry.store))  # the flow decides elsewhere


def test_the_incumbent_is_the_champion_aliased_version_or_none(registry):
    client = registry.client
    _register(registry, "two-versions", "pipe", schema=None, champion=False)
    assert incumbent(client, "two-versions") is None  # registered, no champion
    assert incumbent(client, "not-registered") is None
    _register(registry, "two-versions", "pipe", schema=None, champion=True)
    _register(registry, "two-versions", "pipe", schema=None, champion=False)  # a newer version that does not serve
    inc = incumbent(client, "two-versions")
    assert str(inc.version) == "2" and inc.name == "two-versions"


def test_served_name_and_the_stage_readers_come_from_the_manifest_only(tmp_path):
    assert served_name(7) == served_name("7") == "champion v7"
    store = StageStore(tmp_path, "r")
    assert read_served(store) is None and served_contender(store) is None
    store.write_stage(SERVED, {"predictions": pd.DataFrame({ROW: [0]})}, key="k", inputs={},
                      params={"model_name": "shop", "version": 3})
    assert read_served(store) == ServedManifest("shop", "3")
    assert served_contender(store) == "champion v3"


# --- scoring ---------------------------------------------------------------------------------------------------------


def test_served_proba_puts_each_class_the_model_knows_in_its_code_column(registry):
    """The pipeline never saw code 1 ('b'): its two columns go to codes 0 and 2, by code, and column 1 is 0."""
    _register(registry, "proba", "pipe", schema=None)
    raw = registry.store.read_table("ingest", "target_rows")[["x1", "x2"]]
    inc = incumbent(registry.client, "proba")
    proba, prepare = served_proba("proba", inc, raw, 3)
    expected = np.zeros((len(raw), 3))
    expected[:, [0, 2]] = registry.pipe.predict_proba(raw)
    np.testing.assert_allclose(proba, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(prepare.transform(raw), registry.pipe.named_steps["prepare"].transform(raw))
    _register(registry, "no-prepare", "bare", schema=None)
    why = served_proba("no-prepare", incumbent(registry.client, "no-prepare"), raw, 3)
    assert why == "v1's model has no 'prepare' step to encode today's rows"


def test_the_stage_scores_every_row_of_the_batch_as_the_champion_model_does(registry):
    schema = input_schema(registry.store)
    _register(registry, "shop", "pipe", schema=schema["digest"])
    store = _ingested(registry.root, "r-stage")
    out = served.fn(store, ctx=_ctx(registry), model_name="shop")
    assert out == {"name": "champion v1", "version": "1", "model_name": "shop"}
    table = store.read_table(SERVED, "predictions")
    rows = store.read_table("ingest", "target_rows")
    p = registry.pipe.predict_proba(rows[["x1", "x2"]])  # the raw columns, without the key and the id column
    assert list(table.columns) == [ROW, "predicted", "proba_0", "proba_1", "proba_2"]
    assert table[ROW].tolist() == rows[ROW].tolist() == list(range(12))
    np.testing.assert_allclose(table[["proba_0", "proba_2"]].to_numpy(), p, rtol=0, atol=1e-12)
    assert (table["proba_1"] == 0).all()
    assert table["predicted"].tolist() == np.array([0, 2])[p.argmax(axis=1)].tolist()
    man = store.manifest(SERVED)
    assert man["params"] == {"model_name": "shop", "version": "1"}
    assert man["inputs"]["model"] == "shop/1" and man["inputs"]["model_run"] == registry.uris["pipe"][1]
    assert served_contender(store) == "champion v1"
    # the same batch and version in another run folder: reused; a new champion version: computed anew
    again = _ingested(registry.root, "r-again")
    assert served.fn(again, ctx=_ctx(registry), model_name="shop")["version"] == "1"
    assert again.reused_from(SERVED) == "r-stage"
    _register(registry, "shop", "pipe", schema=schema["digest"])
    newer = _ingested(registry.root, "r-newer")
    assert served.fn(newer, ctx=_ctx(registry), model_name="shop")["name"] == "champion v2"
    assert newer.reused_from(SERVED) is None and newer.manifest(SERVED)["inputs"]["model"] == "shop/2"


@pytest.mark.parametrize("case", ["unregistered", "no champion", "other schema", "no prepare step"])
def test_without_a_champion_that_can_score_this_batch_nothing_is_written(registry, caplog, case):
    name = f"none-{case.replace(' ', '-')}"
    digest = input_schema(registry.store)["digest"]
    if case == "no champion":
        _register(registry, name, "pipe", schema=digest, champion=False)
    elif case == "other schema":
        _register(registry, name, "pipe", schema="0123456789abcdef")
    elif case == "no prepare step":
        _register(registry, name, "bare", schema=digest)
    store = _ingested(registry.root, f"r-{name}")
    with caplog.at_level(logging.WARNING):
        assert served.fn(store, ctx=_ctx(registry), model_name=name) is None
    assert not store.has_stage(SERVED) and not store.stage_dir(SERVED).exists()
    warned = [r.getMessage() for r in caplog.records if r.getMessage().startswith("served: ")]
    assert warned == (["served: v1's model has no 'prepare' step to encode today's rows; the label plan compares "
                       "the candidates only"] if case == "no prepare step" else [])


def test_a_refusal_names_the_columns_only_one_side_has(monkeypatch):
    """helper-39: the refusal showed the first six names of each side, not Year and Month, which one run dropped.
    The version's signature is read (here a stand-in for MLflow's model info) and the differences named."""
    from types import SimpleNamespace

    import mlflow.models

    from tasks.served import _column_diff

    inputs = SimpleNamespace(input_names=lambda: ["Year", "Month", "Age", "Sex"])
    monkeypatch.setattr(mlflow.models, "get_model_info", lambda uri: SimpleNamespace(
        signature=SimpleNamespace(inputs=inputs)))
    schema = {"inputs": [{"name": "Age"}, {"name": "Sex"}, {"name": "Place"}]}
    assert _column_diff("m", "3", schema) == "; columns only in v3: ['Year', 'Month']; only in this run: ['Place']"
    assert _column_diff("m", "3", {"inputs": [{"name": n} for n in ("Year", "Month", "Age", "Sex")]}) == ""

    def unreadable(uri):
        raise OSError("gone")

    monkeypatch.setattr(mlflow.models, "get_model_info", unreadable)
    assert _column_diff("m", "3", schema) == ""  # the refusal keeps its other words
