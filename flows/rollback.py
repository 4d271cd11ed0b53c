"""``shiftflow champion --model NAME --set VERSION | --previous [--reason TEXT]``: move the registered model's
``champion`` alias by hand (rollback), recording who, when and why on the version
(``tasks.champion.set_champion``)."""

from __future__ import annotations

import argparse
import getpass
import sys
from datetime import UTC, datetime


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The ``shiftflow champion`` flags."""
    p.add_argument("--model", required=True, help="registered model name")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--set", dest="version", help="the version to serve, e.g. 3")
    which.add_argument("--previous", action="store_true", help="the version the current champion replaced")
    p.add_argument("--reason", default="set by hand", help="why (kept on the version with who and when)")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI or the local store)")
    return p


def run(ns: argparse.Namespace) -> int:
    """``shiftflow champion`` on parsed flags; returns the exit code (0 done, 2 refused, one line)."""
    from flows.ui import local_store
    from shiftlib.errors import ShiftflowInputError
    from tasks.champion import set_champion

    uri = local_store(ns.tracking_uri)
    when = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        moved = set_champion(uri, ns.model, version=ns.version, previous=ns.previous, reason=ns.reason,
                             who=getpass.getuser(), when=when)
    except ShiftflowInputError as err:
        print(f"shiftflow: error: {err}", file=sys.stderr)
        return 2
    if moved["from"] == moved["to"]:
        print(f"{ns.model}: v{moved['to']} is the champion already; nothing moved")
    else:
        print(f"{ns.model}: champion v{moved['from'] or '-'} → v{moved['to']} ({when}, {getpass.getuser()}: "
              f"{ns.reason})")
    return 0
