"""The layering contract of docs/architecture.md, checked with import-linter (``[tool.importlinter]`` in
pyproject.toml): flows → tasks → shiftlib, never upward, and shiftlib imports neither Prefect nor MLflow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_layers_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    res = subprocess.run([str(lint), str(ROOT / "pyproject.toml")], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "Contracts: 3 kept, 0 broken." in res.stdout, res.stdout[-2000:]
