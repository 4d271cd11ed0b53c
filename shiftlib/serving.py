"""The model as a registry serves it, speaking the user's labels.

:class:`ServedModel` is ``Pipeline([("prepare", encoder), ("model", classifier)])`` whose classifier predicts
class codes 0 … K − 1 (ingest's code order) and which knows each code's label as the user's table has it.
:meth:`ServedModel.predict_labeled` returns the label, not the code, and one probability column per class named by
its label; it is what MLflow's ``python_function`` flavor (``mlflow.pyfunc.load_model(…).predict``, ``mlflow models
serve``) returns, through :func:`_load_pyfunc`, MLflow's loader-module hook. The scikit-learn flavor of the same
model is the pipeline itself (``predict_proba`` in code order, as the champion gate reads it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.pipeline import Pipeline

__all__ = ["LabeledPredictor", "ServedModel"]


class ServedModel(Pipeline):
    """A fitted ``prepare`` → ``model`` pipeline with the class labels in code order (``class_labels``)."""

    def __init__(self, steps: Any, *, class_labels: Any = None, transform_input: Any = None, memory: Any = None,
                 verbose: bool = False) -> None:
        super().__init__(steps, transform_input=transform_input, memory=memory, verbose=verbose)
        self.class_labels = class_labels

    def predict_labeled(self, X: Any) -> pd.DataFrame:
        """``predicted`` (the class label) and ``proba_<label>`` per class, one row per row of ``X``."""
        proba = np.asarray(self.predict_proba(X), dtype=float)
        codes = np.asarray(self.classes_).astype(int)
        labels = list(self.class_labels) if self.class_labels is not None else codes.tolist()
        names = [labels[c] for c in codes]
        out = pd.DataFrame({"predicted": pd.Series([names[i] for i in proba.argmax(axis=1)], dtype=object)})
        for j, name in enumerate(names):
            out[f"proba_{name}"] = proba[:, j]
        return out


class LabeledPredictor:
    """What ``mlflow.pyfunc.load_model`` wraps: ``predict`` is :meth:`ServedModel.predict_labeled`."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def predict(self, model_input: Any, params: dict[str, Any] | None = None) -> pd.DataFrame:  # noqa: ARG002
        return self.model.predict_labeled(model_input)


def _load_pyfunc(path: str) -> LabeledPredictor:
    """MLflow's loader-module hook: ``path`` is the pickled pipeline the scikit-learn flavor saved (cloudpickle)."""
    import cloudpickle

    with open(path, "rb") as f:
        return LabeledPredictor(cloudpickle.load(f))
