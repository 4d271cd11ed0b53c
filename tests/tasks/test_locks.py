"""The registry lock serializes champion decisions (tasks.locks)."""

import multiprocessing as mp
import time

import pytest

from tasks.locks import lock_path, registry_lock


def _hold(uri: str, name: str, out: "mp.Queue[tuple[str, float, float]]", who: str, hold_s: float) -> None:
    with registry_lock(uri, name):
        t_in = time.monotonic()
        time.sleep(hold_s)
        out.put((who, t_in, time.monotonic()))


def test_two_processes_never_hold_the_lock_at_once(tmp_path, monkeypatch):
    monkeypatch.setenv("SHIFTFLOW_LOCK_DIR", str(tmp_path))
    q: mp.Queue = mp.get_context("fork").Queue()
    procs = [mp.get_context("fork").Process(target=_hold, args=("sqlite:///x.db", "m", q, w, 0.3)) for w in "ab"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    (_, a_in, a_out), (_, b_in, b_out) = sorted(q.get(timeout=5) for _ in procs)
    first, second = sorted([(a_in, a_out), (b_in, b_out)])
    assert second[0] >= first[1]  # the second entered only after the first left: the intervals do not overlap


def test_the_lock_is_per_store_and_model_and_names_no_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("SHIFTFLOW_LOCK_DIR", str(tmp_path))
    a = lock_path("postgresql://u:secret@h/db", "m")
    assert a != lock_path("postgresql://u:secret@h/db", "other") and "secret" not in str(a)
    with registry_lock("sqlite:///x.db", "m"), registry_lock("sqlite:///x.db", "other"):
        pass  # two models: no deadlock


def test_a_held_lock_times_out_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("SHIFTFLOW_LOCK_DIR", str(tmp_path))
    ctx = mp.get_context("fork")
    p = ctx.Process(target=_hold, args=("u", "m", ctx.Queue(), "a", 3.0))
    p.start()
    time.sleep(0.5)
    with pytest.raises(TimeoutError, match="registry lock"):
        with registry_lock("u", "m", timeout_s=0.3):
            pass
    p.join(10)


def _first_contact(uri: str, out: "mp.Queue[str]") -> None:
    from tasks.tracking import ensure_experiment

    try:
        out.put(ensure_experiment(uri, "together"))
    except Exception as exc:  # noqa: BLE001 - report any failure to the parent
        out.put(f"error: {exc!r}")


@pytest.mark.slow  # two processes each creating MLflow's schema: ~15 s
def test_two_runs_creating_one_fresh_sqlite_store_at_once_both_succeed(tmp_path, monkeypatch):
    # Without store_lock, two processes migrating one fresh MLflow sqlite store at once failed in CI with
    # "table _alembic_tmp_tags already exists"; with it, both get the same experiment.
    monkeypatch.setenv("SHIFTFLOW_LOCK_DIR", str(tmp_path))
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    procs = [ctx.Process(target=_first_contact, args=(uri, q)) for _ in range(3)]
    for p in procs:
        p.start()
    got = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    assert len(set(got)) == 1 and not got[0].startswith("error"), got
