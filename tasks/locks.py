"""Machine-wide locks among the runs of one machine.

* ``registry_lock``: MLflow's registry has no compare-and-set on an alias: two runs that read the same
  incumbent and then both set ``champion`` would both believe they won. Every run that decides for a
  registered model takes an exclusive ``fcntl.flock`` on one file per (tracking URI, model name) before it
  reads the incumbent and keeps it until the alias is set, so decisions on this machine happen one after
  another. Runs on other machines against the same tracking server are not covered by it (README).
* ``store_lock``: the first contact with a database-backed MLflow store (sqlite, PostgreSQL) creates its schema with alembic
  migrations, which are not safe to run from two processes at once (two runs started together on a fresh
  store failed with ``table _alembic_tmp_tags already exists``). Runs take this lock around that contact.

Written by hand: a few lines of the standard library; neither MLflow nor Prefect offers either lock.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def lock_path(tracking_uri: str, model_name: str, kind: str = "registry") -> Path:
    """The lock file of one registered model (or, with ``kind="store"``, of the store itself) of one
    tracking store; no secrets in the name: a hash."""
    digest = hashlib.sha256(f"{tracking_uri}\n{model_name}".encode()).hexdigest()[:24]
    root = Path(os.environ.get("SHIFTFLOW_LOCK_DIR") or Path(tempfile.gettempdir()) / "shiftflow-locks")
    root.mkdir(parents=True, exist_ok=True)
    return root / f"{kind}-{digest}.lock"


@contextmanager
def registry_lock(tracking_uri: str, model_name: str, *, timeout_s: float = 600.0) -> Iterator[float]:
    """Hold the model's registry lock for the block; yields the seconds spent waiting for it.

    Raises ``TimeoutError`` naming the lock file when another run holds it longer than ``timeout_s``."""
    with _flock(lock_path(tracking_uri, model_name), timeout_s, "registry lock") as waited:
        yield waited


@contextmanager
def store_lock(tracking_uri: str, *, timeout_s: float = 120.0) -> Iterator[float]:
    """Hold the tracking store's schema lock for the block; yields the seconds spent waiting. A no-op for
    an MLflow server (``http(s)://``), which migrates its database once, at its own start."""
    if tracking_uri.startswith(("http://", "https://")):
        yield 0.0
        return
    with _flock(lock_path(tracking_uri, "", kind="store"), timeout_s, "tracking-store lock") as waited:
        yield waited


@contextmanager
def _flock(path: Path, timeout_s: float, what: str) -> Iterator[float]:
    t0 = time.monotonic()
    with open(path, "a+") as f:
        while True:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - t0 > timeout_s:
                    raise TimeoutError(f"another run has held the {what} {path} for over {timeout_s:.0f} s; "
                                       "if no other shiftflow run is active, delete the file") from None
                time.sleep(0.2)
        try:
            yield time.monotonic() - t0
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
