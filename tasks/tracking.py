"""MLflow plumbing shared by the tasks: tracking URI, experiment, runs, model logging."""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow
import numpy as np
import pandas as pd
from mlflow.models import ModelSignature, infer_signature
from mlflow.tracking import MlflowClient

SHIFTLIB_DIR = str(Path(__file__).resolve().parent.parent / "shiftlib")


def pip_requirements() -> list[str]:
    """Explicit requirements for logged models (skips MLflow's ~5 s inference per model)."""
    import cloudpickle
    import scipy
    import sklearn

    return [
        f"scikit-learn=={sklearn.__version__}",
        f"numpy=={np.__version__}",
        f"pandas=={pd.__version__}",
        f"scipy=={scipy.__version__}",
        f"cloudpickle=={cloudpickle.__version__}",
    ]


def default_tracking_uri(home: Path) -> str:
    return f"sqlite:///{(home / 'mlflow.db').resolve()}"


def ensure_experiment(tracking_uri: str, name: str, artifact_root: Path | None = None) -> str:
    """Create (or find) the experiment; file-backed artifact root when the store is local sqlite."""
    mlflow.set_tracking_uri(tracking_uri)
    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    loc = artifact_root.resolve().as_uri() if artifact_root is not None else None
    return client.create_experiment(name, artifact_location=loc)


def check_reachable(tracking_uri: str, timeout_s: float = 5.0) -> None:
    """Fail fast, naming the URI, when an http(s) tracking server does not answer."""
    if not tracking_uri.startswith(("http://", "https://")):
        return
    import urllib.error
    import urllib.request

    url = tracking_uri.rstrip("/") + "/health"
    try:
        urllib.request.urlopen(url, timeout=timeout_s).read()
    except (urllib.error.URLError, OSError) as exc:
        raise ConnectionError(
            f"MLflow tracking server at {tracking_uri} is unreachable ({exc}); start it "
            "(`shiftflow up`) or pass a reachable --tracking-uri"
        ) from exc


def with_retries(fn: Any, *args: Any, attempts: int = 4, base_delay: float = 0.5, **kwargs: Any) -> Any:
    """Call ``fn`` retrying transient failures with exponential backoff (tracking-server hiccups)."""
    for i in range(attempts - 1):
        try:
            return fn(*args, **kwargs)
        except Exception:  # noqa: BLE001 - MLflow raises many types for transient faults
            time.sleep(base_delay * 2**i)
    return fn(*args, **kwargs)  # the last attempt: its error propagates


def log_metrics(client: Any, run_id: str, metrics: Mapping[str, Any], *, skip_missing: bool = False) -> None:
    """Log ``metrics`` (name → number) on ``run_id`` in one ``log_batch`` call (one round trip, retried);
    ``skip_missing`` leaves out None and NaN values instead of logging NaN."""
    from mlflow.entities import Metric

    ts = int(time.time() * 1000)
    batch = [Metric(k, float(v), ts, 0) for k, v in metrics.items()
             if not (skip_missing and (v is None or math.isnan(float(v))))]
    for i in range(0, len(batch), 1000):  # MLflow's limit per log_batch request
        with_retries(client.log_batch, run_id, metrics=batch[i:i + 1000])


def log_sklearn_model(
    model: Any, name: str, X_example: pd.DataFrame, *, predict_fn: str = "predict_proba",
    input_schema: Any = None,
) -> str:
    """Log ``model`` to the active run so ``mlflow.pyfunc.load_model`` returns ``predict_fn`` output.

    cloudpickle (skops refuses our pipelines' types), explicit pip requirements, signature and input
    example from the rows the model will serve, and shiftlib shipped as code so a fresh process loads it.
    ``input_schema`` (an ``mlflow.types.Schema``), when given, replaces the input schema inferred from the
    example.
    """
    example = X_example.head(5)
    out = getattr(model, predict_fn)(example)
    # we choose cloudpickle knowingly (skops refuses our types); keep MLflow's per-model notices quiet
    quiet = logging.getLogger("mlflow.sklearn")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            info = _log(model, name, example, out, predict_fn, input_schema)
    finally:
        quiet.setLevel(level)
    return info.model_uri


def _log(model: Any, name: str, example: pd.DataFrame, out: Any, predict_fn: str, input_schema: Any) -> Any:
    signature = infer_signature(example, out)
    if input_schema is not None:
        signature = ModelSignature(inputs=input_schema, outputs=signature.outputs)
    return mlflow.sklearn.log_model(
        model,
        name=name,
        serialization_format="cloudpickle",
        pip_requirements=pip_requirements(),
        signature=signature,
        input_example=example,
        pyfunc_predict_fn=predict_fn,
        code_paths=[SHIFTLIB_DIR],
    )


def flat_params(prefix: str, obj: Any) -> dict[str, Any]:
    """Nested config → ``{"a.b": value}`` with scalars kept and anything else as its string."""
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out |= flat_params(f"{prefix}.{k}" if prefix else str(k), v)
        return out
    return {prefix: obj if isinstance(obj, (int, float, str, bool)) or obj is None else str(obj)}


@contextmanager
def parent_run(tracking_uri: str, experiment_id: str, run_name: str, *, tags: Mapping[str, str],
               params: Mapping[str, Any]) -> Iterator[str]:
    """The flow run's parent MLflow run: created with ``tags`` and ``params``, FINISHED when the block ends,
    FAILED (with the error as tag ``shiftflow.error``) when it raises. Yields the run id."""
    from mlflow.entities import Param

    client = MlflowClient(tracking_uri)
    run_id = with_retries(client.create_run, experiment_id, run_name=run_name, tags=dict(tags)).info.run_id
    try:
        with_retries(client.log_batch, run_id, params=[Param(k, str(v)[:6000]) for k, v in params.items()])
        yield run_id
    except BaseException as exc:
        try:
            client.set_tag(run_id, "shiftflow.error", f"{type(exc).__name__}: {exc}"[:5000])
            client.set_terminated(run_id, "FAILED")
        except Exception:  # noqa: BLE001 - the original error matters more
            pass
        raise
    with_retries(client.set_terminated, run_id, "FINISHED")


@dataclass(frozen=True)
class RunContext:
    """Where a flow run logs: MLflow tracking URI, experiment, parent run, the Prefect flow run, its seed."""

    tracking_uri: str
    experiment_id: str
    parent_run_id: str
    flow_run_id: str
    seed: int
