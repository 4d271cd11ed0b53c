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


# the walk of flows/retrain.py (docs/architecture.md): _prepare, then _labels (served, labels), then _decide
STAGES = ["ingest", "drift", "weights", "training", "estimation", "evaluation", "served", "labels", "selection",
          "recalibration", "champion"]


def _import_graph() -> dict[str, set[str]]:
    """Module → the project modules it imports, anywhere in it (lazy imports in functions too; ``from a.b
    import c`` counts a.b.c when that is a module, else a.b)."""
    import ast

    mods = {}
    for pkg in ("shiftlib", "tasks", "flows"):
        for p in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                hit = next((".".join(parts[:i]) for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in mods),
                           None)
                if hit is not None and hit != m:
                    graph[m].add(hit)
    return graph


def test_no_import_cycle() -> None:
    graph = _import_graph()
    seen: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m: str, path: list[str]) -> None:
        seen[m] = 1
        for n in sorted(graph[m]):
            assert seen.get(n) != 1, "import cycle: " + " -> ".join(path[path.index(n):] + [n])
            if n not in seen:
                visit(n, path + [n])
        seen[m] = 2

    for m in sorted(graph):
        if m not in seen:
            visit(m, [m])


def test_a_stage_imports_no_later_stage() -> None:
    graph = _import_graph()
    rank = {f"tasks.{s}": i for i, s in enumerate(STAGES)}
    assert set(rank) <= set(graph), set(rank) - set(graph)
    later = sorted(f"{a} -> {b}" for a in rank for b in graph[a] if rank.get(b, -1) > rank[a])
    assert not later, later
