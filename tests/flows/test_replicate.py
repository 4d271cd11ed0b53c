"""flows.replicate: each flow runs its replication script's ``main`` exactly as the script's command line does
(the module docstring: ``python -m flows.replicate rt --quick`` = ``python -m replications.replicate_rt --quick``)
and returns its exit code. The scripts are stand-ins here (they record the argv they get); the flows run as plain
functions (``.fn``), so no Prefect API starts."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

import flows.replicate as replicate


@pytest.fixture
def scripts(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[list[str]]]:
    """Stand-in ``replications.replicate_{rt,trcv,natural}`` whose ``main(argv)`` records argv and returns 7."""
    seen: dict[str, list[list[str]]] = {}
    for name in ("rt", "trcv", "natural"):
        module = types.ModuleType(f"replications.replicate_{name}")
        seen[name] = []
        module.main = lambda argv, calls=seen[name]: calls.append(list(argv)) or 7  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, f"replications.replicate_{name}", module)
    return seen


def test_the_argv_is_the_scripts_command_line() -> None:
    assert replicate._argv(False, "reports") == ["--out", "reports"]
    assert replicate._argv(True, "out", "a,b", 3, ["--extra"]) == ["--out", "out", "--quick", "--cases", "a,b",
                                                                   "--seeds", "3", "--extra"]
    assert replicate._argv(False, "o", seeds=0) == ["--out", "o", "--seeds", "0"]  # 0 seeds is a value, not unset


def test_each_flow_runs_its_script_and_returns_its_exit_code(scripts: dict[str, list[list[str]]]) -> None:
    assert replicate.replicate_rt.fn(quick=True, out="o", datasets="pima", seeds=2) == 7
    assert replicate.replicate_trcv.fn(cases="c1", seeds=5) == 7
    assert replicate.replicate_natural.fn(quick=True, out="o") == 7
    assert replicate.replicate_natural.fn(out="o", cases="ignored", summary_only=True) == 7
    assert scripts == {
        "rt": [["--out", "o", "--quick", "--seeds", "2", "--datasets", "pima"]],
        "trcv": [["--out", "reports", "--cases", "c1", "--seeds", "5"]],  # the scripts' default folder: reports
        "natural": [["--out", "o", "--quick"], ["--summary-only", "--out", "o"]],
    }


def test_the_command_line_picks_the_flow(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[tuple[str, dict[str, Any]]] = []
    for name in ("rt", "trcv", "natural"):
        monkeypatch.setitem(replicate.FLOWS, name, lambda name=name, **kw: called.append((name, kw)) or 3)
    assert replicate.cli(["trcv", "--quick", "--out", "elsewhere"]) == 3
    assert replicate.cli(["natural"]) == 3
    assert called == [("trcv", {"quick": True, "out": "elsewhere"}), ("natural", {"quick": False, "out": "reports"})]
    with pytest.raises(SystemExit) as err:
        replicate.cli(["dl"])  # not one of the three
    assert err.value.code == 2
