"""Where shiftflow keeps its local state and where the project lives (no Prefect, no MLflow imports)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["PROJECT_DIR", "shiftflow_home"]

#: the project folder (holds prefect.yaml)
PROJECT_DIR = Path(__file__).resolve().parent.parent


def shiftflow_home() -> Path:
    """Local state folder (MLflow sqlite store, artifacts, runs, services.json).

    Returns
    -------
    Path
        ``$SHIFTFLOW_HOME`` or ``./.shiftflow``, resolved.
    """
    return Path(os.environ.get("SHIFTFLOW_HOME", ".shiftflow")).resolve()
