"""Where shiftflow keeps its local state and where the project lives (no Prefect, no MLflow imports)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["DATA_DIR", "PROJECT_DIR", "default_run_root", "missing_sqlite_store", "shiftflow_home"]

#: the project folder (holds prefect.yaml)
PROJECT_DIR = Path(__file__).resolve().parent.parent
#: the house's ``data/`` folder (docs/architecture.md); present in a checkout, absent in an installed wheel
DATA_DIR = PROJECT_DIR / "data"


def shiftflow_home() -> Path:
    """Local state folder (MLflow sqlite store, artifacts, services.json).

    Returns
    -------
    Path
        ``$SHIFTFLOW_HOME`` or ``./.shiftflow``, resolved.
    """
    return Path(os.environ.get("SHIFTFLOW_HOME", ".shiftflow")).resolve()


def default_run_root(environ: Mapping[str, str] | None = None) -> Path:
    """Where stage Parquet files go when the run's ``run_root`` is not given.

    Parameters
    ----------
    environ : mapping, optional
        The environment to read (default ``os.environ``): ``shiftflow up`` computes its worker's run root
        from its own, so deployment runs write where CLI runs of the same shell do.

    Returns
    -------
    Path
        ``$SHIFTFLOW_RUN_ROOT`` when set; else ``$SHIFTFLOW_HOME/runs`` when ``SHIFTFLOW_HOME`` is set (it keeps
        all of a run's state in one place); otherwise ``data/runs`` of the project checkout (the house's
        ``data/`` folder, recognised by its ``README.md``); otherwise (an installed package, no checkout)
        ``./.shiftflow/runs``. Resolved.
    """
    env = os.environ if environ is None else environ
    if env.get("SHIFTFLOW_RUN_ROOT"):
        return Path(env["SHIFTFLOW_RUN_ROOT"]).expanduser().resolve()
    home = Path(env.get("SHIFTFLOW_HOME", ".shiftflow")).resolve()
    if "SHIFTFLOW_HOME" in env:
        return (home / "runs").resolve()
    if (DATA_DIR / "README.md").is_file():
        return (DATA_DIR / "runs").resolve()
    return (home / "runs").resolve()


def missing_sqlite_store(tracking_uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` tracking URI when it does not exist (MLflow would create an empty
    store there), else None: commands that only read runs refuse it instead."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    db = Path(tracking_uri.removeprefix("sqlite:///"))
    return None if db.is_file() else db


def local_artifact_root(tracking_uri: str) -> Path:
    """Where runs of a local store keep their artifacts: beside its database file for a ``sqlite:///`` URI
    (``<its folder>/mlartifacts``; the default store's is ``$SHIFTFLOW_HOME/mlartifacts``, as before), so a store
    named elsewhere writes nothing into the working directory; ``$SHIFTFLOW_HOME/mlartifacts`` otherwise."""
    if tracking_uri.startswith("sqlite:///"):
        return Path(tracking_uri.removeprefix("sqlite:///")).resolve().parent / "mlartifacts"
    return shiftflow_home() / "mlartifacts"
