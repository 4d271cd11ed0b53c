"""replications/realized_floor.py: the measures and the adoption rule, worked by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from replications.realized_floor import MAX_WIDTH_RATIO, compare, verdict


def _corr(history: str, correction: str, widths: list[float], covered: list[bool]) -> pd.DataFrame:
    n = len(widths)
    return pd.DataFrame({"table": "t", "candidate": "LR", "night": range(4, 4 + n), "history": history,
                         "correction": correction, "width": widths, "covered": covered, "abs_error": 0.02,
                         "lf_covered": True, "lf_width": 0.3, "lf_abs_error": 0.02, "floor_t": 0.1, "floor_z": 0.08})


def test_the_measures_and_the_rule_worked_by_hand():
    """k = 5: plain widths 0.2, 0.2 (one miss), floored 0.2, 0.3 (the floor binds on one row of two and covers it):
    coverage 0.5 → 1.0, mean width 0.2 → 0.25, ratio 1.25, binds 0.5. The shipped default: ratio 1.0. Both ≤ 1.25:
    adopt; a floored width of 0.31 makes the k = 5 ratio 1.275: do not."""
    corr = pd.concat([_corr("5", "plain", [0.2, 0.2], [True, False]), _corr("5", "floored", [0.2, 0.3], [True, True]),
                      _corr("shipped", "plain", [0.1], [True]), _corr("shipped", "floored", [0.1], [True])])
    t = compare(corr).set_index("history")
    assert (t.at["5", "coverage plain"], t.at["5", "coverage floored"]) == (0.5, 1.0)
    assert t.at["5", "width ratio"] == pytest.approx(1.25) and t.at["5", "floor binds"] == 0.5
    assert t.at["shipped", "width ratio"] == 1.0 and MAX_WIDTH_RATIO == 1.25
    assert verdict(compare(corr))[0]
    wider = corr.assign(width=[0.2, 0.2, 0.2, 0.31, 0.1, 0.1])
    assert not verdict(compare(wider))[0]
