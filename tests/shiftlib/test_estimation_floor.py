"""replications/estimation_floor.py: the two widths, worked by hand, and the within-estimators test on a toy cell."""

from __future__ import annotations

import pandas as pd
import pytest

from replications.estimation_floor import constant_width, floors, oracle_width, within_estimators
from shiftlib.estimation import MEDIAN_COMPONENTS


def test_widths_worked_by_hand():
    """|errors| 0.1 0.2 0.3 0.4 1.0 at 0.8 coverage: the oracle covers the four smallest with width = error and
    leaves the fifth, (0.1 + 0.2 + 0.3 + 0.4)/5 = 0.2; the constant width is 2 × the 0.8 quantile, by linear
    interpolation at position 3.2 → 0.4 + 0.2·0.6 = 0.52, so 1.04. Signs do not matter."""
    e = [0.1, -0.2, 0.3, -0.4, 1.0]
    assert oracle_width(e, 0.8) == pytest.approx(0.2)
    assert constant_width(e, 0.8) == pytest.approx(1.04)


def test_truth_within_the_component_estimates_and_floors_skip_failed_cells():
    base = {"case": "c", "group": "natural", "seed": 0, "learner": "LR", "truth": 0.7}
    rows = [base | {"method": m, "estimate": 0.8 + 0.01 * i} for i, m in enumerate(MEDIAN_COMPONENTS)]
    rows += [base | {"seed": 1, "method": m, "estimate": 0.6 + 0.02 * i} for i, m in enumerate(MEDIAN_COMPONENTS)]
    rows += [base | {"method": "trcv", "estimate": float("nan")}]
    w = within_estimators(pd.DataFrame(rows)).set_index("seed")
    assert not w.loc[0, "within"] and w.loc[0, "all_above"]  # every estimate 0.80–0.89 above 0.70
    assert w.loc[1, "within"] and not w.loc[1, "all_below"]  # 0.60–0.78 straddles 0.70
    assert w.loc[0, "range"] == pytest.approx(0.01 * (len(MEDIAN_COMPONENTS) - 1))
    f = floors(pd.DataFrame(rows)).set_index("method")
    assert "trcv" not in f.index and f.loc["cv", "cells"] == 2
    assert f.loc["cv", "mae"] == pytest.approx((0.1 + 0.1) / 2)


def test_mae_ratios_divide_by_the_peers_mae_on_the_same_cells():
    """Two cells, truth 0.7: the peer errs 0.10 and 0.20 (MAE 0.15), median 0.03 and 0.09 (MAE 0.06): 0.06 / 0.15
    = 0.4; the peer's own ratio is 1."""
    from replications.estimation_floor import mae_ratios

    base = {"case": "c", "group": "natural", "learner": "LR", "truth": 0.7}
    rows = [base | {"seed": 0, "method": "nannyml-cbpe", "estimate": 0.8},
            base | {"seed": 1, "method": "nannyml-cbpe", "estimate": 0.5},
            base | {"seed": 0, "method": "median", "estimate": 0.73},
            base | {"seed": 1, "method": "median", "estimate": 0.61}]
    r = mae_ratios(floors(pd.DataFrame(rows)))
    assert r.loc["median", "natural"] == pytest.approx(0.4) and r.loc["nannyml-cbpe", "natural"] == 1.0
