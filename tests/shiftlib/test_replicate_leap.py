"""replications/replicate_leap: LEAP's accuracy Σ_y π̂_t(y)·P_s(ŷ = y | y), worked by hand on a two-class case, and
the rule's verdict on hand-built MAE tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from replications.replicate_leap import leap_accuracy, verdict
from shiftlib.estimation import StoredPredictions, bbse_prior


def _case() -> StoredPredictions:
    """10 source rows: class 0 ×6 (OOF predicted 0 on 4 → recall 4/6), class 1 ×4 (predicted 1 on 3 → recall 3/4);
    8 target rows, 6 predicted 1."""
    y = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 1])
    pred_s = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 0])
    proba_s = np.column_stack([1.0 - pred_s * 0.8 - 0.1, pred_s * 0.8 + 0.1])
    pred_t = np.array([1, 1, 1, 1, 1, 1, 0, 0])
    proba_t = np.column_stack([1.0 - pred_t * 0.8 - 0.1, pred_t * 0.8 + 0.1])
    return StoredPredictions("LR", np.array([0, 1]), y, proba_s, proba_t, np.arange(10) % 5)


def test_leap_with_the_bbse_quantifier_is_the_target_prior_times_the_source_recall() -> None:
    P = _case()
    # BBSE by hand: C[i, j] = P_s(ŷ=i, y=j) = [[4, 1], [2, 3]] / 10; μ_t = [2/8, 6/8]; w = C⁻¹ μ_t; π_t = w·π_s
    C = np.array([[4, 1], [2, 3]]) / 10
    w = np.linalg.solve(C, np.array([0.25, 0.75]))
    pi = np.clip(w * np.array([0.6, 0.4]), 0, None)
    pi /= pi.sum()
    np.testing.assert_allclose(bbse_prior(np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 0]), P.y_source,
                                          np.argmax(P.proba_target, axis=1), 2), pi)
    assert leap_accuracy(P, "bbse") == pytest.approx(pi[0] * 4 / 6 + pi[1] * 3 / 4, abs=1e-12)
    # the recall is the source's per class: a swapped weighting (π_s instead of π_t) gives another number
    assert leap_accuracy(P, "bbse") != pytest.approx(0.6 * 4 / 6 + 0.4 * 3 / 4, abs=1e-6)
    em = leap_accuracy(P, "em")
    assert min(4 / 6, 3 / 4) <= em <= max(4 / 6, 3 / 4)  # a prior-weighted mean of the two recalls
    with pytest.raises(ValueError, match="'em' or 'bbse'"):
        leap_accuracy(P, "kde")


def test_the_rule_ships_leap_only_below_both_label_shift_methods_somewhere_and_above_both_nowhere() -> None:
    def mae(rows: dict[str, list[float]]) -> pd.DataFrame:
        return pd.DataFrame(rows, index=["feature-bias", "natural"])

    base = {"em": [0.03, 0.10], "bbse": [0.04, 0.12], "auto": [0.02, 0.08]}
    ship, _ = verdict(mae(base | {"leap-em": [0.02, 0.11], "leap-bbse": [0.05, 0.13]}))
    assert ship  # leap-em below both on feature bias; on natural leap-em (0.11) is not above both
    ship, words = verdict(mae(base | {"leap-em": [0.02, 0.13], "leap-bbse": [0.05, 0.125]}))
    assert not ship and "above both in: natural" in words  # both LEAP variants above both on natural
    ship, words = verdict(mae(base | {"leap-em": [0.035, 0.11], "leap-bbse": [0.035, 0.11]}))
    assert not ship and "below both em and bbse in: no group" in words
