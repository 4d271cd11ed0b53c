"""The served model (shiftlib.serving): labels and probability columns by class code, against the same pipeline
fitted by scikit-learn; the MLflow pyfunc wrapper and loader hook; clone keeps the labels."""

from __future__ import annotations

import cloudpickle
import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from shiftlib.serving import LabeledPredictor, ServedModel, _load_pyfunc


def _data() -> tuple[np.ndarray, np.ndarray]:
    """Three clusters on a line, coded 0, 1, 2 (ingest's code order)."""
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2], 20)
    X = np.column_stack([y * 3.0 + rng.normal(size=60), rng.normal(size=60)])
    return X, y


def test_predict_labeled_names_each_code_by_its_label():
    # the same steps fitted by scikit-learn give the probabilities; code c is named class_labels[c]
    X, y = _data()
    labels = ["low", "mid", "high"]
    served = ServedModel([("prepare", StandardScaler()), ("model", LogisticRegression())], class_labels=labels)
    served.fit(X, y)
    ref = Pipeline([("prepare", StandardScaler()), ("model", LogisticRegression())]).fit(X, y).predict_proba(X)
    out = served.predict_labeled(X)
    assert list(out.columns) == ["predicted", "proba_low", "proba_mid", "proba_high"]
    np.testing.assert_allclose(out[["proba_low", "proba_mid", "proba_high"]].to_numpy(), ref, rtol=1e-12)
    assert out["predicted"].tolist() == [labels[c] for c in ref.argmax(axis=1)]
    centres = served.predict_labeled(np.array([[0.0, 0.0], [3.0, 0.0], [6.0, 0.0]]))
    assert centres["predicted"].tolist() == ["low", "mid", "high"]  # the three cluster centres
    # no labels: each class is named by its code
    plain = ServedModel([("prepare", StandardScaler()), ("model", LogisticRegression())]).fit(X, y)
    assert list(plain.predict_labeled(X[:2]).columns) == ["predicted", "proba_0", "proba_1", "proba_2"]


def test_a_model_that_never_saw_a_code_names_the_codes_it_has():
    # trained on codes 0 and 2 only (of labels a, b, c): its two probability columns are codes 0 and 2, so they
    # are named a and c — by code, not by position (position would say a and b)
    X, y = _data()
    keep = y != 1
    served = ServedModel([("prepare", StandardScaler()), ("model", LogisticRegression())], class_labels=["a", "b", "c"])
    served.fit(X[keep], y[keep])
    out = served.predict_labeled(np.array([[0.0, 0.0], [6.0, 0.0]]))
    assert list(out.columns) == ["predicted", "proba_a", "proba_c"]
    assert out["predicted"].tolist() == ["a", "c"]


def test_pyfunc_wrapper_and_loader_hook_answer_like_the_model(tmp_path):
    X, y = _data()
    served = ServedModel([("prepare", StandardScaler()), ("model", LogisticRegression())], class_labels=["x", "y", "z"])
    served.fit(X, y)
    expected = served.predict_labeled(X)
    pd.testing.assert_frame_equal(LabeledPredictor(served).predict(X, params={"ignored": 1}), expected)
    path = tmp_path / "model.pkl"
    path.write_bytes(cloudpickle.dumps(served))  # what the scikit-learn flavor saves
    loaded = _load_pyfunc(str(path))
    assert isinstance(loaded, LabeledPredictor)
    pd.testing.assert_frame_equal(loaded.predict(X), expected)


def test_clone_keeps_the_labels_and_unfits_the_steps():
    served = ServedModel([("prepare", StandardScaler()), ("model", LogisticRegression())], class_labels=["n", "y"])
    copy = clone(served)
    assert isinstance(copy, ServedModel) and copy.class_labels == ["n", "y"]
    assert copy.get_params()["class_labels"] == ["n", "y"]
    X, y = _data()
    served.fit(X, (y > 0).astype(int))
    assert hasattr(served.steps[-1][1], "coef_") and not hasattr(clone(served).steps[-1][1], "coef_")  # unfitted
