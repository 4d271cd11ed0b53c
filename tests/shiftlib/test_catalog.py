"""shiftlib.catalog: the one place registry names live. One sync test holds every name list of the project
against it: the registries, the config's choices, what the tasks and the flow dispatch, and the lists that are
still spelled elsewhere (the config's learner names, the preflight's fold-using selectors, the champion's words)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.heavy
def test_every_name_list_is_the_catalogs() -> None:
    import tasks.selection
    from flows.config import LearnerName, RetrainConfig
    from shiftlib.catalog import (
        DEFAULT_SELECTOR,
        EVALUATION_ONLY_WEIGHTERS,
        LABELED_SELECTOR,
        ROWS_ONLY_WEIGHTERS,
        SELECTION_METHODS,
        SOURCE_CV,
        WEIGHTING_METHODS,
    )
    from shiftlib.learners import LEARNERS
    from shiftlib.requirements import FOLD_SELECTORS
    from shiftlib.selection import SELECTORS, selector_fan_out, selector_settings
    from shiftlib.selection.selectors import FAN_OUTS
    from shiftlib.weights import TARGET_WEIGHTERS, WEIGHTERS
    from tasks.champion import SCORE_WORDS
    from tasks.weights import METHODS

    f = RetrainConfig.model_fields
    names = tuple(SELECTION_METHODS)
    # selectors: catalog == registry == the config's choices; the defaults and special roles are registered ones
    assert tuple(SELECTORS) == names
    assert get_args(get_args(f["selectors"].annotation)[0]) == names
    assert get_args(f["selector"].annotation) == names
    assert RetrainConfig().selectors == [DEFAULT_SELECTOR] and RetrainConfig().selector == DEFAULT_SELECTOR
    assert {DEFAULT_SELECTOR, SOURCE_CV} <= set(names) and LABELED_SELECTOR not in names
    # what the tasks and the flow dispatch: the registry's classes and traits, no list of their own
    assert not hasattr(tasks.selection, "SELECTORS") and not hasattr(tasks.selection, "CV_SELECTORS")
    assert all(selector_fan_out(n) in (*FAN_OUTS, None) for n in names)
    # still spelled elsewhere, held here: the preflight's fold-using selectors, the champion's words for scores
    assert set(FOLD_SELECTORS) == {n for n in names if "k" in selector_settings(n)}
    assert set(SCORE_WORDS) <= {*names, LABELED_SELECTOR}
    # weighting: catalog == registry == the stage's methods == the config's choices
    assert tuple(WEIGHTERS) == tuple(WEIGHTING_METHODS)
    assert METHODS == TARGET_WEIGHTERS == ROWS_ONLY_WEIGHTERS
    assert set(ROWS_ONLY_WEIGHTERS) | EVALUATION_ONLY_WEIGHTERS == set(WEIGHTING_METHODS)
    assert get_args(f["weighting"].annotation) == ("none", *ROWS_ONLY_WEIGHTERS, "auto")
    # learners: the config spells them (it must not import scikit-learn); the registry is the truth
    assert get_args(LearnerName) == tuple(LEARNERS)
    assert set(RetrainConfig().learners) <= set(LEARNERS)


@pytest.mark.heavy
def test_the_catalog_and_the_config_load_without_scikit_learn() -> None:
    """The config reads the names at import, before a refused input may start anything heavy (tests/flows/test_preflight.py)."""
    code = ("import sys, shiftlib.catalog, flows.config; "
            "print(sorted(m for m in ('sklearn', 'scipy', 'pandas') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "[]"
