"""SELECTORS / make_selector: each name runs the selector function it names, with the bound settings."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer

from shiftlib.selection import (
    SELECTORS,
    make_selector,
    reverse_testing,
    source_cv,
    trcv_select,
    weighted_cv,
)


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X, y = load_breast_cancer(return_X_y=True)
    X = X[:, :4]
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(y))
    return X[idx[:160]], y[idx[:160]], X[idx[160:260]]


def test_registry_names_match_the_config_choices() -> None:
    assert sorted(SELECTORS) == ["rt", "scv", "trcv", "wcv"]
    with pytest.raises(KeyError, match="unknown selector 'cv'"):
        make_selector("cv")


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
        got = make_selector(name, k=4, weights=w, random_state=0)(learners, Xs, ys, Xt)
        assert got.scores.equals(ref.scores), name
        assert got.ranking == ref.ranking, name
