"""The JSON record of the local stack (``$SHIFTFLOW_HOME/services.json``): what ``up`` started, for ``down``."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flows.stack.procs import ServiceError

__all__ = ["RECORD_NAME", "read_record", "write_record"]

RECORD_NAME = "services.json"


def read_record(path: Path) -> dict[str, Any] | None:
    """The services record, or None if absent. A corrupt record is an error naming the file."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ServiceError(
            f"{path} is not valid JSON ({exc}); inspect it, stop the processes it lists by hand, then delete it"
        ) from exc
    if not isinstance(data, dict) or not isinstance(data.get("services"), dict):
        raise ServiceError(f"{path} has no 'services' mapping; inspect it, stop the listed processes, delete it")
    return data


def write_record(path: Path, data: Mapping[str, Any]) -> None:
    """Write the record atomically (a temporary file, then ``os.replace``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
