"""replications/drift_no_shift.py: the exact binomial interval by hand, and (slow) a smoke run whose report
rows recount the per-split CSV."""

from __future__ import annotations

import pandas as pd
import pytest

from replications.drift_no_shift import clopper_pearson


def test_clopper_pearson_by_hand():
    # k = 0: the upper bound solves (1 − p)^n = 0.025; k = n: the lower bound solves p^n = 0.025
    assert clopper_pearson(0, 4) == (0.0, pytest.approx(1 - 0.025 ** (1 / 4)))
    assert clopper_pearson(4, 4) == (pytest.approx(0.025 ** (1 / 4)), 1.0)
    lo, hi = clopper_pearson(5, 100)  # contains the observed rate, within [0, 1]
    assert 0 < lo < 0.05 < hi < 1


@pytest.mark.slow
def test_quick_run_rates_recount_the_splits(tmp_path):
    from replications.drift_no_shift import main

    assert main(["--quick", "--splits", "2", "--out", str(tmp_path)]) == 0
    per_split = pd.read_csv(tmp_path / "drift_no_shift_quick.csv")
    assert per_split.groupby("table").size().eq(2).all() and per_split["table"].nunique() == 10
    report = (tmp_path / "drift_no_shift_quick.md").read_text()
    pooled = per_split["verdict"].mean()
    assert f"| pooled | 20 | {pooled:.3f} |" in report
