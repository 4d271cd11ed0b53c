"""The tests mirror the package layout (issue 30, item 5): every module ``<layer>/<path>/<m>.py`` of shiftlib, tasks
and flows has its tests in ``tests/<layer>/<path>/test_<m>.py``, so a newcomer finds a module's tests by its path.
Tests of the running system as a whole (``tests/flows/test_faults.py``, ``test_services.py``, ``test_browser*.py``,
…) may sit beside the mirrored files."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _missing(layer: str) -> list[str]:
    missing = []
    for module in sorted((ROOT / layer).rglob("*.py")):
        if module.name == "__init__.py":
            continue
        rel = module.relative_to(ROOT / layer)
        test = ROOT / "tests" / layer / rel.parent / f"test_{module.stem}.py"
        if not test.is_file():
            missing.append(f"{module.relative_to(ROOT)} -> {test.relative_to(ROOT)}")
    return missing


def test_every_shiftlib_module_has_its_test_file() -> None:
    assert not _missing("shiftlib"), _missing("shiftlib")


def test_every_flows_module_has_its_test_file() -> None:
    assert not _missing("flows"), _missing("flows")


def test_every_tasks_module_has_its_test_file() -> None:
    assert not _missing("tasks"), _missing("tasks")
