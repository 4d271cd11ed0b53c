"""An MLflow flavor for ``shiftlib.serving.ServedModel``: the scikit-learn flavor as ``mlflow.sklearn`` saves it,
with the ``python_function`` flavor's loader swapped for ``shiftlib.serving`` so that pyfunc ``predict`` (and
``mlflow models serve``) returns the class label and a probability column per class named by it. Written by hand
because ``mlflow.sklearn``'s pyfunc calls only ``predict``/``predict_proba``-like methods; used through
``mlflow.models.Model.log(flavor=tasks.served_flavor, …)``."""

from __future__ import annotations

import os
from typing import Any

from mlflow.models import Model
from mlflow.pyfunc import FLAVOR_NAME as PYFUNC

LOADER = "shiftlib.serving"


def save_model(sk_model: Any, path: str, mlflow_model: Model | None = None, **kwargs: Any) -> None:
    """``mlflow.sklearn.save_model``, then the pyfunc flavor loads through :data:`LOADER` from the pickle."""
    import mlflow.sklearn

    mlflow_model = mlflow_model or Model()
    kwargs.pop("pyfunc_predict_fn", None)
    mlflow.sklearn.save_model(sk_model, path, mlflow_model=mlflow_model, pyfunc_predict_fn="predict_proba", **kwargs)
    conf = mlflow_model.flavors[PYFUNC]
    conf["loader_module"] = LOADER
    conf["data"] = conf.pop("model_path", "model.pkl")  # _load_pyfunc gets the pickle's path
    conf.pop("predict_fn", None)
    mlflow_model.save(os.path.join(path, "MLmodel"))
