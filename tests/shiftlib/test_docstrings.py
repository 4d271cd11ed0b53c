"""Every public shiftlib function and class carries a numpydoc docstring (issue 30, item 7).

Checked with numpydoc's own validator (``numpydoc.validate.validate``), restricted to the checks that say a
reader can use the docstring: it exists (GL08), it documents every parameter of the signature (PR01) and no
parameter that is not there (PR02), and a function that returns something has a Returns section (RT01).
Public means: defined in a module whose dotted path has no part starting with ``_``, under a name that does not
start with ``_``, and not imported from elsewhere.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import shiftlib

numpydoc_validate = pytest.importorskip("numpydoc.validate")

CHECKS = ("GL08", "PR01", "PR02", "RT01")


def _public_objects() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(shiftlib.__path__, "shiftlib."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(obj) or inspect.isclass(obj):
                names.append(f"{module.__name__}.{name}")
    return sorted(names)


PUBLIC = _public_objects()


def test_the_walk_finds_the_public_api() -> None:
    # a walk that missed definitions would pass every check below: the imported walk must find exactly the
    # public top-level defs and classes an independent parse of the source files lists
    parsed = set()
    for path in Path(shiftlib.__file__).parent.rglob("*.py"):
        parts = ("shiftlib", *path.relative_to(Path(shiftlib.__file__).parent).with_suffix("").parts)
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if any(part.startswith("_") for part in parts):
            continue
        parsed |= {f"{'.'.join(parts)}.{node.name}" for node in ast.parse(path.read_text()).body
                   if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_")}
    assert set(PUBLIC) == parsed
    assert "shiftlib.decisions.gate" in PUBLIC


@pytest.mark.heavy
@pytest.mark.parametrize("qualname", PUBLIC)
def test_public_definition_has_a_numpydoc_docstring(qualname: str) -> None:
    errors = [f"{code} {msg}" for code, msg in numpydoc_validate.validate(qualname)["errors"] if code in CHECKS]
    assert not errors, f"{qualname}: " + "; ".join(errors)
