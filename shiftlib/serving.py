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
    """A fitted ``prepare`` → ``model`` pipeline with the class labels in code order (``class_labels``).

    Parameters
    ----------
    steps : list of (str, estimator) tuples
        The pipeline steps, as for :class:`sklearn.pipeline.Pipeline` (``prepare`` then ``model``).
    class_labels : sequence, optional
        The user's label of each class code 0 … K − 1; ``None`` labels each class by its code.
    transform_input : list of str, optional
        Passed to :class:`~sklearn.pipeline.Pipeline`.
    memory : str or object, optional
        Passed to :class:`~sklearn.pipeline.Pipeline`.
    verbose : bool, default False
        Passed to :class:`~sklearn.pipeline.Pipeline`.
    """

    def __init__(self, steps: Any, *, class_labels: Any = None, transform_input: Any = None, memory: Any = None,
                 verbose: bool = False) -> None:
        super().__init__(steps, transform_input=transform_input, memory=memory, verbose=verbose)
        self.class_labels = class_labels

    def predict_labeled(self, X: Any) -> pd.DataFrame:
        """``predicted`` (the class label) and ``proba_<label>`` per class, one row per row of ``X``.

        Parameters
        ----------
        X : array-like or DataFrame
            The rows to predict, as the ``prepare`` step takes them.

        Returns
        -------
        pandas.DataFrame
            Column ``predicted`` and one ``proba_<label>`` column per class.
        """
        proba = np.asarray(self.predict_proba(X), dtype=float)
        codes = np.asarray(self.classes_).astype(int)
        labels = list(self.class_labels) if self.class_labels is not None else codes.tolist()
        names = [labels[c] for c in codes]
        out = pd.DataFrame({"predicted": pd.Series([names[i] for i in proba.argmax(axis=1)], dtype=object)})
        for j, name in enumerate(names):
            out[f"proba_{name}"] = proba[:, j]
        return out


class LabeledPredictor:
    """What ``mlflow.pyfunc.load_model`` wraps: ``predict`` is :meth:`ServedModel.predict_labeled`.

    Parameters
    ----------
    model : ServedModel
        The fitted model whose :meth:`~ServedModel.predict_labeled` answers :meth:`predict`.
    """

    def __init__(self, model: Any) -> None:
        self.model = model

    def predict(self, model_input: Any, params: dict[str, Any] | None = None) -> pd.DataFrame:  # noqa: ARG002
        """The model's :meth:`ServedModel.predict_labeled` of ``model_input``.

        Parameters
        ----------
        model_input : array-like or DataFrame
            The rows to predict.
        params : dict, optional
            MLflow's inference parameters; ignored.

        Returns
        -------
        pandas.DataFrame
            Column ``predicted`` and one ``proba_<label>`` column per class.
        """
        return self.model.predict_labeled(model_input)


def _load_pyfunc(path: str) -> LabeledPredictor:
    """MLflow's loader-module hook: ``path`` is the pickled pipeline the scikit-learn flavor saved (cloudpickle)."""
    import cloudpickle

    with open(path, "rb") as f:
        return LabeledPredictor(cloudpickle.load(f))
