"""What the replication's cells can give: the narrowest intervals that reach 0.90 coverage around each label-free
estimate (issue 28's "coverage ≥ 0.90 in each group" and "mean width ≤ 0.20 on natural shifts", together).

Reads ``reports/estimation_cells.csv`` (``replicate_estimation``'s cells: one row per case, seed, learner and
method, with the estimate and the batch's realised accuracy) and computes, per group and method, from the
absolute errors |estimate − truth| alone (no estimate is recomputed, nothing is chosen):

* **constant width**: the narrowest interval of one width for every cell, centred on the estimate, that covers
  0.90 of the group's cells: twice the 0.90 quantile of |error|;
* **oracle width**: a lower bound for *any* interval that contains its own estimate, however its width is set per
  cell. Such an interval covers the truth only if its width is at least |error|, so covering 0.90 of the cells
  costs at least the mean, over all the group's cells, of the smallest 90 % of |error| (the others get width 0);
* **MAE against NannyML's CBPE**: each method's MAE over CBPE's on the same cells; the smallest per group is
  the best any one fixed choice among these methods gives there, even chosen with the truth known;
* **truth within the estimators**: the share of cells whose truth lies between the smallest and the largest of
  the ten estimates ``median`` takes the median of (``MEDIAN_COMPONENTS``): where it does not, the label-free
  estimators, built on different shift assumptions, all err the same way, and an interval built from their
  disagreement cannot reach the truth.

    python -m replications.estimation_floor [--cells reports/estimation_cells.csv]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd

from replications._common import md_table
from shiftlib.estimation import MEDIAN_COMPONENTS

ROOT = Path(__file__).resolve().parent.parent
CELL = ["case", "group", "seed", "learner"]


def oracle_width(errors: np.ndarray, coverage: float = 0.90) -> float:
    """Least mean width of intervals that contain their estimate and cover ``coverage`` of the cells: the
    ⌈coverage·n⌉ smallest |errors| summed, over n."""
    e = np.sort(np.abs(np.asarray(errors, float)))
    return float(e[: math.ceil(coverage * len(e))].sum() / len(e))


def constant_width(errors: np.ndarray, coverage: float = 0.90) -> float:
    """Narrowest width w such that estimate ± w/2 covers ``coverage`` of the cells: 2·quantile(|errors|)."""
    return float(2 * np.quantile(np.abs(np.asarray(errors, float)), coverage))


def floors(cells: pd.DataFrame) -> pd.DataFrame:
    """Per group and method: MAE, constant width and oracle width for 0.90 coverage."""
    d = cells.assign(err=(cells["estimate"] - cells["truth"]).abs()).dropna(subset=["err"])  # a failed TrCV fit
    rows = [{"group": g, "method": m, "cells": len(x), "mae": x["err"].mean(), "constant_width": constant_width(x["err"]),
             "oracle_width": oracle_width(x["err"])} for (g, m), x in d.groupby(["group", "method"])]
    return pd.DataFrame(rows)


def mae_ratios(f: pd.DataFrame, peer: str = "nannyml-cbpe") -> pd.DataFrame:
    """Per method and group: MAE / ``peer``'s MAE on the same cells (``floors``' rows). Its smallest value in a
    group bounds what any one fixed choice among these methods gives there, chosen with the group's truth known
    (issue 28's "MAE ≤ 0.85 × NannyML CBPE's in each group")."""
    mae = f.pivot(index="method", columns="group", values="mae")
    return mae / mae.loc[peer]


def within_estimators(cells: pd.DataFrame) -> pd.DataFrame:
    """Per cell: whether the truth lies within [min, max] of the median's ten component estimates."""
    comp = cells[cells["method"].isin(MEDIAN_COMPONENTS)]
    wide = comp.pivot_table(index=CELL, columns="method", values="estimate")
    truth = cells.groupby(CELL)["truth"].first().loc[wide.index]
    lo, hi = wide.min(axis=1), wide.max(axis=1)
    return pd.DataFrame({"within": (lo <= truth) & (truth <= hi), "range": hi - lo,
                         "all_above": lo > truth, "all_below": hi < truth}).reset_index()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", type=Path, default=ROOT / "reports" / "estimation_cells.csv")
    a = ap.parse_args()
    cells = pd.read_csv(a.cells)
    f = floors(cells)
    for col in ("constant_width", "oracle_width", "mae"):
        t = f.pivot(index="method", columns="group", values=col).sort_values("natural")
        print(f"\n{col} (0.90 coverage)" if col != "mae" else "\nMAE")
        print(md_table(t.round(3).reset_index()))
    r = mae_ratios(f)
    print("\nMAE / NannyML CBPE's MAE (the smallest per group: the best fixed choice, with hindsight)")
    print(md_table(r.sort_values("natural").round(3).reset_index()))
    w = within_estimators(cells)
    print("\ntruth within the ten component estimates, per group")
    print(md_table(w.groupby("group")[["within", "all_above", "all_below", "range"]].mean().round(3).reset_index()))
    print("\nper case of the new-natural group")
    new = w[w["group"] == "new-natural"]
    print(md_table(new.groupby("case")[["within", "all_above", "all_below", "range"]].mean().round(3).reset_index()))


if __name__ == "__main__":
    main()
