"""``shiftflow champion --set VERSION | --previous``: a rollback moves the alias, says who, when and why on the
version, and refuses an unknown model or version and a version of another input schema (issue 29)."""

from __future__ import annotations

import getpass

import pytest
from mlflow.tracking import MlflowClient

from flows.cli import main
from tasks.champion import ALIAS_SET, DECISION, PREVIOUS
from tasks.served import SCHEMA

# default-suite budget: the module's store (two registered versions of real fits) took 33 s to build
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def _store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, MlflowClient]:
    """Model ``m`` with three versions, made once (a store and three logged models take a while)."""
    import mlflow
    import mlflow.sklearn
    from sklearn.dummy import DummyClassifier

    uri = f"sqlite:///{tmp_path_factory.mktemp('rollback') / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    client = MlflowClient(uri)
    client.create_registered_model("m")
    for schema in ("aaaa", "aaaa", "bbbb"):
        with mlflow.start_run():
            # pip_requirements given: MLflow would otherwise infer them in a subprocess (~10 s per model)
            info = mlflow.sklearn.log_model(DummyClassifier().fit([[0], [1]], [0, 1]), name="model",
                                            pip_requirements=["scikit-learn"])
        client.create_model_version("m", info.model_uri, tags={SCHEMA: schema, DECISION: "promoted",
                                                               "shiftflow.input_columns": f"cols {schema}"})
    return uri, client


@pytest.fixture
def registry(_store: tuple[str, MlflowClient]) -> tuple[str, MlflowClient]:
    """v1 and v2 promoted by the gate (v2 replaced v1, and serves), v3 of another input schema."""
    uri, client = _store
    for v in ("1", "2", "3"):
        for tag in (PREVIOUS, ALIAS_SET):
            if tag in client.get_model_version("m", v).tags:
                client.delete_model_version_tag("m", v, tag)
    client.set_model_version_tag("m", "2", PREVIOUS, "1")
    client.set_registered_model_alias("m", "champion", "2")
    return uri, client


def _champion(client: MlflowClient) -> str:
    return str(client.get_model_version_by_alias("m", "champion").version)


def test_previous_rolls_back_and_set_moves_forward_with_who_when_and_why(registry, capsys) -> None:
    uri, client = registry
    assert main(["champion", "--model", "m", "--previous", "--reason", "v2 misbehaves", "--tracking-uri", uri]) == 0
    assert _champion(client) == "1"
    tags = client.get_model_version("m", "1").tags
    assert PREVIOUS not in tags and tags[ALIAS_SET].endswith(f"Z by {getpass.getuser()}: v2 misbehaves")
    assert "m: champion v2 → v1" in capsys.readouterr().out
    # a second --previous goes back another promotion: v1 replaced none (helper-39: it served v2 again)
    assert main(["champion", "--model", "m", "--previous", "--tracking-uri", uri]) == 2
    assert "'m' v1 replaced no earlier champion" in capsys.readouterr().err and _champion(client) == "1"
    client.set_registered_model_alias("m", "challenger", "2")  # e.g. left undecided on its night
    assert main(["champion", "--model", "m", "--set", "2", "--tracking-uri", uri]) == 0
    assert _champion(client) == "2" and client.get_model_version("m", "2").tags[ALIAS_SET].endswith(": set by hand")
    assert "challenger" not in client.get_registered_model("m").aliases  # the champion is no challenger
    assert main(["champion", "--model", "m", "--set", "2", "--tracking-uri", uri]) == 0  # already: nothing moves
    assert "is the champion already" in capsys.readouterr().out


@pytest.mark.parametrize("args, words", [
    (["--model", "m", "--set", "9"], "'m' has no version '9'; its versions are 1, 2, 3"),
    (["--model", "m", "--set", "3"], "'m' v3 takes other input columns than the serving champion v2"),
    (["--model", "nope", "--set", "1"], "no registered model 'nope' in this MLflow store"),
])
def test_an_unknown_version_or_another_schema_is_refused_in_one_line(registry, capsys, args, words) -> None:
    uri, client = registry
    assert main(["champion", *args, "--tracking-uri", uri]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], lines
    assert _champion(client) == "2"  # nothing moved


def test_previous_falls_back_to_the_newest_lower_promoted_version(registry) -> None:
    uri, client = registry
    client.delete_model_version_tag("m", "2", PREVIOUS)  # a version promoted before the tag was kept
    assert main(["champion", "--model", "m", "--previous", "--tracking-uri", uri]) == 0
    assert _champion(client) == "1"
