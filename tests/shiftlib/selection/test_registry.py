"""SELECTORS / make_selector / bind_selector: each name runs the selector function it names with the settings it
takes, says how it splits into tasks, and is refused a setting it does not take. The built-in four are checked
by name; a selector added later (docs/extending.md) needs no edit here."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer

from shiftlib.catalog import SELECTION_METHODS
from shiftlib.selection import (
    SELECTORS,
    BaseSelector,
    bind_selector,
    make_selector,
    reverse_testing,
    runs_on_every_row,
    selector_fan_out,
    selector_settings,
    source_cv,
    trcv_select,
    weighted_cv,
)
from shiftlib.selection.selectors import FAN_OUTS


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X, y = load_breast_cancer(return_X_y=True)
    X = X[:, :4]
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(y))
    return X[idx[:160]], y[idx[:160]], X[idx[160:260]]


def test_the_registry_is_built_from_the_catalog() -> None:
    assert list(SELECTORS) == list(SELECTION_METHODS)
    assert list(SELECTORS)[:4] == ["rt", "trcv", "scv", "wcv"]  # the built-ins, in the config's order
    for name, cls in SELECTORS.items():
        assert issubclass(cls, BaseSelector), name
        assert SELECTION_METHODS[name] == f"{cls.__module__}:{cls.__name__}"
    with pytest.raises(KeyError, match="unknown selector 'cv'"):
        make_selector("cv")


@pytest.mark.heavy
def test_each_selector_equals_its_function(data) -> None:
    Xs, ys, Xt = data
    learners = ["NB", "LR"]
    w = np.linspace(0.5, 1.5, len(ys))  # given weights: no KMM fit, and the same β for both paths
    direct = {
        "rt": reverse_testing(learners, Xs, ys, Xt, random_state=0),
        "trcv": trcv_select(learners, Xs, ys, Xt, weights=w, k=4, random_state=0),
        "scv": source_cv(learners, Xs, ys, k=4, random_state=0),
        "wcv": weighted_cv(learners, Xs, ys, Xt, weights=w, k=4, random_state=0),
    }
    for name, ref in direct.items():
        got = bind_selector(name, k=4, weights=w, random_state=0)(learners, Xs, ys, Xt)
        assert set(got.to_frame()["selector"]) == {name}  # named as the registry names it: the table's key
        assert got.scores.equals(ref.scores), name
        assert got.ranking == ref.ranking, name


def test_settings_are_the_selectors_own_and_others_are_refused() -> None:
    assert selector_settings("rt") == {"scoring", "random_state"}
    assert selector_settings("trcv") == {"k", "weights", "random_state"}
    assert selector_settings("scv") == {"k", "scoring", "random_state", "max_folds"}
    assert selector_settings("wcv") == {"k", "weights", "scoring", "random_state", "max_folds"}
    assert selector_settings("fewlabel") == frozenset()  # labeled: not a registered selector
    with pytest.raises(TypeError, match="'trcv' takes no setting \\['scoring'\\]"):
        make_selector("trcv", scoring="roc_auc")  # TrCV estimates accuracy (eq. 14)
    assert make_selector("trcv", k=5).get_params()["k"] == 5
    # bind_selector hands each selector what it takes of the settings on offer, and drops the rest
    assert bind_selector("rt", k=3, weights="kmm", random_state=4).get_params() == {"scoring": "accuracy",
                                                                                     "random_state": 4}
    with pytest.raises(KeyError, match="unknown selector"):
        bind_selector("fewlabel", random_state=0)


def test_traits_say_which_rows_and_how_the_work_splits() -> None:
    builtin = ["rt", "trcv", "scv", "wcv"]
    assert [n for n in builtin if runs_on_every_row(n)] == ["scv", "wcv"]
    assert {n: selector_fan_out(n) for n in builtin} == {"rt": "rt_row", "trcv": "trcv_fold", "scv": "candidate",
                                                         "wcv": "candidate"}
    assert all(selector_fan_out(n) in FAN_OUTS for n in SELECTORS)
    assert not runs_on_every_row("fewlabel") and selector_fan_out("fewlabel") is None
