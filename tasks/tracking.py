"""MLflow plumbing shared by the tasks: tracking URI, experiment, runs, model logging."""

from __future__ import annotations

import json
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
import mlflow.models
import numpy as np
import pandas as pd
from mlflow.models import ModelSignature, infer_signature
from mlflow.tracking import MlflowClient

from shiftlib.ingest import plain_numbers
from tasks.locks import store_lock
from tasks.sources import mask_secrets

SHIFTLIB_DIR = str(Path(__file__).resolve().parent.parent / "shiftlib")
# MLflow's hint on integer columns in an inferred schema is for a person writing a model by hand: the served
# pipelines impute missing values themselves. Filtered for the process, by its text: ``catch_warnings`` around
# each log call is not thread-safe (training logs from a thread pool), and the hint leaked into runs' output.
# The same for MLflow's notes on type hints it infers while logging a model (colour codes and all).
warnings.filterwarnings("ignore", message=r".*Hint: Inferred schema contains integer column", category=UserWarning)
warnings.filterwarnings("ignore", message=r".*Any type hint is inferred as AnyType", category=UserWarning)
# We choose cloudpickle knowingly (skops refuses our types): MLflow's per-model caution about it is quiet for the
# process (set and restored around each call, a logger level raced between training threads and leaked).
logging.getLogger("mlflow.sklearn").setLevel(logging.ERROR)


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
    """Create (or find) the experiment; file-backed artifact root when the store is local sqlite.

    Under the store's lock (``tasks.locks.store_lock``): the first contact creates the schema, and two runs
    started together must not migrate one database at once. The lock is this machine's and is a no-op for an
    MLflow server, so two runs may still both find no experiment and both create it: the one refused with
    ``RESOURCE_ALREADY_EXISTS`` uses the experiment the other created."""
    from mlflow.exceptions import MlflowException
    from mlflow.protos.databricks_pb2 import RESOURCE_ALREADY_EXISTS, ErrorCode

    mlflow.set_tracking_uri(tracking_uri)
    with store_lock(tracking_uri):
        client = MlflowClient(tracking_uri)
        exp = client.get_experiment_by_name(name)
        if exp is not None:
            return exp.experiment_id
        loc = artifact_root.resolve().as_uri() if artifact_root is not None else None
        try:
            return client.create_experiment(name, artifact_location=loc)
        except MlflowException as exc:
            if exc.error_code != ErrorCode.Name(RESOURCE_ALREADY_EXISTS):
                raise
            exp = client.get_experiment_by_name(name)
            if exp is None:  # created and deleted again in between: nothing to join
                raise
            return exp.experiment_id


def check_reachable(tracking_uri: str, timeout_s: float = 5.0) -> None:
    """Fail fast, naming the URI, when an http(s) tracking server does not answer."""
    if not tracking_uri.startswith(("http://", "https://")):
        return
    exc = _health_error(tracking_uri, timeout_s)
    if exc is not None:
        raise ConnectionError(
            f"MLflow tracking server at {tracking_uri} is unreachable ({exc}); start it "
            "(`shiftflow up`) or pass a reachable --tracking-uri"
        ) from exc


def _health_error(base_url: str, timeout_s: float) -> OSError | None:
    """Why ``<base_url>/health`` does not answer (MLflow's and Prefect's servers both serve it), or None."""
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(base_url.rstrip("/") + "/health", timeout=timeout_s).read()
    except (urllib.error.URLError, OSError) as exc:
        return exc
    return None


def tracking_key(tracking_uri: str) -> str:
    """Which MLflow store a stage's models live in (16 hex digits of the URI, password masked): an input of
    every stage that keeps model URIs, so a run on another store never reuses a stage whose models it cannot
    load (issue 29)."""
    import hashlib

    return hashlib.sha256(mask_secrets(tracking_uri.rstrip("/")).encode()).hexdigest()[:16]


def check_prefect_reachable(api_url: str, timeout_s: float = 5.0) -> None:
    """Fail fast, naming ``PREFECT_API_URL``, when the Prefect API it points at does not answer (e.g. left set
    after ``shiftflow down``): one line instead of Prefect's own traceback from inside the flow engine."""
    exc = _health_error(api_url, timeout_s)
    if exc is not None:
        raise ConnectionError(
            f"Prefect API at {api_url} (PREFECT_API_URL) is unreachable ({exc}); start it (`shiftflow up`), or "
            "unset PREFECT_API_URL to run on a temporary local API"
        ) from exc


class TrackingUnreachable(ConnectionError):
    """The MLflow tracking server stopped answering during a run (after MLflow's own HTTP retries)."""


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and all(e is not o for o in out):
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def cannot_connect(exc: BaseException) -> bool:
    """True when ``exc``, or an error it was raised from or while handling, is a failed or broken connection (what
    MLflow's HTTP client raises is an ``MlflowException`` raised while handling a ``requests`` ``ConnectionError``)."""
    import requests

    return any(isinstance(e, (ConnectionError, requests.exceptions.ConnectionError)) for e in _chain(exc))


def _gave_up(exc: BaseException) -> bool:
    """A failed connection MLflow's own HTTP retries gave up on (``MLFLOW_HTTP_REQUEST_MAX_RETRIES``, about
    4 minutes by default): retrying it again would only wait as long again for a server that is down."""
    return cannot_connect(exc) and any("Max retries exceeded" in str(e) for e in _chain(exc))


def unreachable_error(exc: BaseException, tracking_uri: str | None = None) -> TrackingUnreachable:
    """``exc`` (a failed connection, ``cannot_connect``) as one sentence that names the server and what to do."""
    if isinstance(exc, TrackingUnreachable):
        return exc
    import re

    uri = tracking_uri or mlflow.get_tracking_uri()
    found = re.findall(r"\[Errno -?\d+\] [^\"')]+", str(exc))
    why = found[-1].strip() if found else type(exc).__name__
    return TrackingUnreachable(
        f"MLflow tracking server at {uri} stopped answering during the run ({why}); start it again "
        "(`shiftflow up`) and rerun the same command: the stages this run finished are reused")


#: MLflow error codes that are the store's answer (a name not found, a value refused), not a hiccup
_ANSWERS = frozenset({"RESOURCE_DOES_NOT_EXIST", "RESOURCE_ALREADY_EXISTS", "INVALID_PARAMETER_VALUE"})


def with_retries(fn: Any, *args: Any, attempts: int = 4, base_delay: float = 0.5, **kwargs: Any) -> Any:
    """Call ``fn`` retrying transient failures with exponential backoff (tracking-server hiccups).

    A connection MLflow's HTTP client already gave up on is not retried here (it retried for minutes: a server
    restarted meanwhile is found again): it is raised at once as ``TrackingUnreachable``, one sentence naming the
    server. The store's answers (a name not found, a value refused: :data:`_ANSWERS`) are raised at once. Any other
    error (a connection broken mid-request by a restart, too) is retried."""
    for i in range(attempts - 1):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - MLflow raises many types for transient faults
            if _gave_up(exc):
                raise unreachable_error(exc) from exc
            if getattr(exc, "error_code", None) in _ANSWERS:  # the store answered: asking again changes nothing
                raise
            time.sleep(base_delay * 2**i)  # e.g. a connection broken mid-request (the server restarting)
    try:
        return fn(*args, **kwargs)  # the last attempt: its error propagates
    except Exception as exc:
        if _gave_up(exc):
            raise unreachable_error(exc) from exc
        raise


def log_metrics(client: Any, run_id: str, metrics: Mapping[str, Any], *, skip_missing: bool = False) -> None:
    """Log ``metrics`` (name → number) on ``run_id`` in one ``log_batch`` call (one round trip, retried);
    ``skip_missing`` leaves out None and NaN values (without it NaN is logged as NaN and None is refused by
    ``float``: pass it wherever a value may be missing)."""
    from mlflow.entities import Metric

    ts = int(time.time() * 1000)
    batch = [Metric(k, float(v), ts, 0) for k, v in metrics.items()
             if not (skip_missing and (v is None or math.isnan(float(v))))]
    for i in range(0, len(batch), 1000):  # MLflow's limit per log_batch request
        with_retries(client.log_batch, run_id, metrics=batch[i:i + 1000])


def log_sklearn_model(
    model: Any, name: str, X_example: pd.DataFrame, *, predict_fn: str | None = None,
    input_schema: Any = None,
) -> str:
    """Log ``model`` to the active run so ``mlflow.pyfunc.load_model`` returns ``predict_fn`` output: by default,
    for a ``shiftlib.serving.ServedModel``, ``predict_labeled`` (the class label and a probability column per
    class, named by class; ``tasks.served_flavor``), else ``predict_proba``.

    cloudpickle (skops refuses our pipelines' types), explicit pip requirements, signature and input
    example from the rows the model will serve, and shiftlib shipped as code so a fresh process loads it.
    ``input_schema`` (an ``mlflow.types.Schema``), when given, replaces the input schema inferred from the
    example.
    """
    predict_fn = predict_fn or ("predict_labeled" if hasattr(model, "predict_labeled") else "predict_proba")
    example = _json_safe(X_example.head(5))
    out = getattr(model, predict_fn)(example)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        info = _log(model, name, example, out, predict_fn, input_schema)
    return info.model_uri


def _json_safe(example: pd.DataFrame) -> pd.DataFrame:
    """The input example with decimal and duration columns as the numbers the preprocessor reads them as: MLflow
    writes the example as JSON, which has no Timedelta or Decimal (the run failed on a Parquet duration column)."""
    out = example.copy()
    for c in out.columns:
        if (plain := plain_numbers(out[c])) is not None:
            out[c] = plain
    return out


def _log(model: Any, name: str, example: pd.DataFrame, out: Any, predict_fn: str, input_schema: Any) -> Any:
    signature = infer_signature(example, out)
    if input_schema is not None:
        signature = ModelSignature(inputs=input_schema, outputs=signature.outputs)
    if hasattr(model, "predict_labeled"):  # shiftlib.serving.ServedModel: pyfunc speaks the user's labels
        import tasks.served_flavor

        return mlflow.models.Model.log(
            artifact_path=None, name=name, flavor=tasks.served_flavor, sk_model=model,
            serialization_format="cloudpickle", pip_requirements=pip_requirements(), signature=signature,
            input_example=example, code_paths=[SHIFTLIB_DIR])
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
    """The flow run's parent MLflow run: created with ``tags`` and ``params`` (URL passwords masked, see
    ``mask_secrets``), FINISHED when the block ends, FAILED (with the error as tag ``shiftflow.error``) when it
    raises, KILLED (tag ``shiftflow.state``) when Prefect suspends the flow run. Yields the run id."""
    from mlflow.entities import Param

    client = MlflowClient(tracking_uri)
    tags = {k: mask_secrets(str(v)) for k, v in tags.items()}  # table references may carry a password
    run_id = with_retries(client.create_run, experiment_id, run_name=run_name, tags=tags).info.run_id
    try:
        with_retries(client.log_batch, run_id,
                     params=[Param(k, mask_secrets(str(v))[:6000]) for k, v in params.items()])
        yield run_id
    except BaseException as exc:
        # the server stopped answering: one sentence (not MLflow's traceback), and while it is still down the run
        # is left RUNNING there (marking it FAILED would retry for minutes more on each of two calls)
        down = unreachable_error(exc, tracking_uri) if isinstance(exc, Exception) and cannot_connect(exc) else None
        if down is not None:
            try:
                check_reachable(tracking_uri, timeout_s=5.0)
            except ConnectionError:
                raise down from exc
        try:
            if type(exc).__name__ == "Pause":  # Prefect suspends the flow run (labels): not a failure
                client.set_tag(run_id, "shiftflow.state", "suspended: the resumed attempt logs a new parent run")
                client.set_terminated(run_id, "KILLED")
            else:
                # the error's own sentence (what the CLI prints); its type when it has none
                client.set_tag(run_id, "shiftflow.error", mask_secrets(str(exc) or type(exc).__name__)[:5000])
                client.set_terminated(run_id, "FAILED")
        except Exception:  # noqa: BLE001 - the original error matters more
            pass
        if down is not None and down is not exc:
            raise down from exc
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


def dataset_name(reference: str) -> str:
    """A short name for a table reference: the table, file or dataset name without the scheme and path."""
    kind, _, rest = reference.partition(":")
    if kind == "sql":
        what = rest.split("::", 1)[-1].strip()
        return "sql query" if what.lower().startswith(("select", "with")) else what
    if kind == "file":
        return Path(rest).name
    return rest or reference


def mlflow_schema(dtypes: Mapping[str, str]) -> str | None:
    """MLflow's column-spec JSON (as ``mlflow.data.from_pandas`` writes it) from a manifest's dtypes."""
    try:
        empty = pd.DataFrame({c: pd.Series(dtype=t) for c, t in dtypes.items()})
        with warnings.catch_warnings():  # the integer-column hint is for model inputs, not for a record
            warnings.simplefilter("ignore", UserWarning)
            return json.dumps({"mlflow_colspec": infer_signature(empty).inputs.to_dict()})
    except Exception:  # noqa: BLE001 - a schema MLflow cannot express is left out, not fatal
        return None


def model_id(model_uri: str | None) -> str | None:
    """The LoggedModel id of a ``models:/m-…`` URI (what ``log_sklearn_model`` returns), else None."""
    if model_uri and model_uri.startswith("models:/m-"):
        return model_uri.removeprefix("models:/").split("/", 1)[0]
    return None


def link_model_output(tracking_uri: str, run_id: str, model_uri: str | None) -> bool:
    """Show the model of ``model_uri`` under run ``run_id``'s "Logged models" (a run output, as
    ``MlflowClient.log_outputs`` records it); False when the URI is not a LoggedModel's."""
    from mlflow.entities import LoggedModelOutput

    mid = model_id(model_uri)
    if mid is None:
        return False
    with_retries(MlflowClient(tracking_uri).log_outputs, run_id, [LoggedModelOutput(mid, step=0)])
    return True
