"""tasks.weights: every weighting method is fitted as the registry builds it and seeded when it is random,
whatever its name (a new method needs no name list in the task)."""

from __future__ import annotations

from typing import Any

import numpy as np

import shiftlib.weights as weights_registry
from shiftlib.weights import TARGET_WEIGHTERS, BaseWeighter
from tasks.weights import METHODS, fit_weighter


class _ToyWeights(BaseWeighter):
    """A random weighting method the task has never heard of: uniform draws in [0.5, 1.5)."""

    def __init__(self, *, random_state: Any = None) -> None:
        self.random_state = random_state

    def _fit_raw(self, X_source: np.ndarray, X_target: np.ndarray, **fit_params: Any) -> np.ndarray:
        return np.random.default_rng(self.random_state).uniform(0.5, 1.5, len(X_source))


def test_the_stage_runs_the_registrys_methods():
    assert METHODS == TARGET_WEIGHTERS


def test_a_new_random_method_is_seeded_from_its_params_and_an_unseeded_one_is_left_alone(monkeypatch):
    monkeypatch.setitem(weights_registry.WEIGHTERS, "toy", _ToyWeights)
    rng = np.random.default_rng(0)
    Xs, Xt = rng.normal(size=(40, 2)), rng.normal(size=(30, 2))
    a, b = fit_weighter("toy", Xs, Xt, seed=7), fit_weighter("toy", Xs, Xt, seed=7)
    assert a.random_state == 7 and np.array_equal(a.weights_, b.weights_)
    assert not np.array_equal(a.weights_, fit_weighter("toy", Xs, Xt, seed=8).weights_)
    assert "random_state" not in fit_weighter("kde", Xs, Xt, seed=7).get_params()
