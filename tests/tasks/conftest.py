"""Fixtures the stage tests share."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def mlflow_parent(tmp_path_factory, request):
    """One MLflow store for the module (creating its tables costs seconds): (uri, client, experiment id, a function
    that makes a new parent run and returns its id)."""
    from mlflow.tracking import MlflowClient

    tmp = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    client = MlflowClient(uri)
    exp = client.create_experiment(request.module.__name__, artifact_location=(tmp / "art").as_uri())
    return uri, client, exp, lambda: client.create_run(exp).info.run_id
