"""tasks.served_flavor: a model saved by ``save_model`` keeps MLflow's scikit-learn flavor as it is, and its
python_function flavor loads through ``shiftlib.serving`` so pyfunc ``predict`` answers with the user's labels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from mlflow.models import Model
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from shiftlib.serving import ServedModel
from tasks.served_flavor import LOADER, save_model

REQS = ["scikit-learn"]  # given: MLflow would otherwise infer the requirements in a subprocess (seconds)


@pytest.fixture(scope="module")
def fitted() -> tuple[ServedModel, pd.DataFrame]:
    """Three classes coded 0, 1, 2 (ingest's code order) and labelled 'low', 'mid', 'high'."""
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2], 15)
    X = pd.DataFrame({"x": y * 3.0 + rng.normal(size=45), "z": rng.normal(size=45)})
    with threadpool_limits(1):
        model = ServedModel([("prepare", StandardScaler()), ("model", LogisticRegression())],
                            class_labels=["low", "mid", "high"]).fit(X, y)
    return model, X


def _flavors(path) -> dict:
    return yaml.safe_load((path / "MLmodel").read_text())["flavors"]


def test_pyfunc_loads_through_shiftlib_serving_from_the_sklearn_pickle(fitted, tmp_path):
    model, _ = fitted
    save_model(model, str(tmp_path / "m"), serialization_format="cloudpickle", pip_requirements=REQS)
    flavors = _flavors(tmp_path / "m")
    py, sk = flavors["python_function"], flavors["sklearn"]
    assert LOADER == "shiftlib.serving" and py["loader_module"] == LOADER
    assert py["data"] == sk["pickled_model"] == "model.pkl" and (tmp_path / "m" / "model.pkl").is_file()
    assert "predict_fn" not in py and "model_path" not in py  # shiftlib.serving._load_pyfunc takes the pickle path
    assert sk["serialization_format"] == "cloudpickle"  # the caller's arguments reach mlflow.sklearn


def test_the_saved_model_predicts_labels_through_pyfunc_and_codes_through_sklearn(fitted, tmp_path):
    import mlflow.pyfunc
    import mlflow.sklearn

    model, X = fitted
    save_model(model, str(tmp_path / "m"), serialization_format="cloudpickle", pip_requirements=REQS)
    loaded = mlflow.pyfunc.load_model(str(tmp_path / "m"))
    got = loaded.predict(X)  # mlflow.sklearn's own loader would answer predict_proba's array
    pd.testing.assert_frame_equal(got, model.predict_labeled(X))
    assert list(got.columns) == ["predicted", "proba_low", "proba_mid", "proba_high"]
    assert set(got["predicted"]) <= {"low", "mid", "high"}
    # the scikit-learn flavor is the pipeline itself: probabilities in code order, as the champion gate reads them
    sk = mlflow.sklearn.load_model(str(tmp_path / "m"))
    np.testing.assert_allclose(sk.predict_proba(X), model.predict_proba(X), rtol=0, atol=0)
    assert list(sk.classes_) == [0, 1, 2]


def test_a_callers_predict_fn_is_dropped_and_the_given_model_description_is_filled(fitted, tmp_path):
    """``Model.log(flavor=…)`` passes its own ``Model``; a ``pyfunc_predict_fn`` from the caller would clash with
    the one ``save_model`` sets, and the loader replaces it anyway."""
    import mlflow.pyfunc

    model, X = fitted
    described = Model()
    save_model(model, str(tmp_path / "m"), mlflow_model=described, pyfunc_predict_fn="predict",
               serialization_format="cloudpickle", pip_requirements=REQS)
    assert described.flavors["python_function"]["loader_module"] == LOADER
    assert "predict_fn" not in described.flavors["python_function"] and "sklearn" in described.flavors
    assert _flavors(tmp_path / "m") == yaml.safe_load(yaml.safe_dump(described.flavors))  # what was written
    pd.testing.assert_frame_equal(mlflow.pyfunc.load_model(str(tmp_path / "m")).predict(X.head(3)),
                                  model.predict_labeled(X.head(3)))
