"""Issue 28 item 2: LEAP (Volpi, Moreo & Sebastiani, "LEAP: Linear equations for classifier accuracy prediction
under prior probability shift", 2025) beside the label-shift estimators ``em`` and ``bbse`` that
``shiftlib.estimation`` ships, on the cells of ``replicate_estimation`` (the same cases, seeds and stored
predictions; with ``--cache``, the fits that script wrote).

LEAP estimates the n² cells of the target contingency table C_t(y, ŷ) from linear equations: under prior
probability shift P(ŷ | y) is the source's (n(n − 1) independent equations C_t(y, ŷ)·P_s(ŷ' | y) = C_t(y, ŷ')·P_s(ŷ | y)),
and the row sums are the target class prior from a quantifier (n equations), so C_t(y, ŷ) = π̂_t(y)·P_s(ŷ | y) and
the accuracy is Σ_y π̂_t(y)·P_s(ŷ = y | y), with P_s the out-of-fold confusion of the source rows. The column
sums (the target's predicted-class shares, observed) are the equations BBSE solves for π̂_t. Two quantifiers,
the two ``shiftlib.estimation`` computes: ``leap-em`` (π̂_t by EM on the calibrated posteriors, as ``em``) and
``leap-bbse`` (π̂_t by BBSE, as ``bbse``). Re-implemented from the published abstract's description (the
equations above); no code of the authors' was read.

They differ from ``em`` / ``bbse`` in one step only: those average the prior-shifted calibrated posterior of the
predicted class over the target rows (a CBPE-style expectation), LEAP weights the source's per-class recall by
the target prior. Under exact prior shift and calibrated posteriors both are consistent.

Run from the repository root::

    nice python -m replications.replicate_leap --cache DIR   # DIR: replicate_estimation's fit cache
    nice python -m replications.replicate_leap --quick       # smoke run

Writes ``reports/estimation_leap.md`` and ``reports/estimation_leap_cells.csv`` (``--quick``: ``*_quick*``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from replications import replicate_estimation as E
from replications._common import md_table
from shiftlib.estimation import StoredPredictions, label_shift_prior, point_estimate

RULE_MD = [
    "## The rule (fixed before the run)",
    "",
    "Committed with this script before its first run (quick or full).",
    "",
    "* **Cells**: `replicate_estimation`'s cases, seeds 0–2, ≤ 400 rows per side for natural cases, RF 50 trees, its",
    "  learners; the truth is each learner's accuracy on the batch's labels. Groups as there (feature bias, natural,",
    "  and any further group that script defines).",
    "* **Estimators**, point estimates on all source rows: `leap-em`, `leap-bbse` (above), and the shipped `em`,",
    "  `bbse` and `auto`.",
    "* **Measure**: mean absolute error per group.",
    "* **Ship LEAP** (propose it as a component of `auto`'s median in the next rule revision of",
    "  `replicate_estimation`, which then judges it leave one data set out) only if `leap-em` or `leap-bbse` has a",
    "  lower MAE than both `em` and `bbse` in at least one group and a higher MAE than both in none. Otherwise",
    "  LEAP adds nothing beyond `em` / `bbse` on these cases, and nothing changes.",
]

LEAP_METHODS = ("leap-em", "leap-bbse")
COMPARED = ("leap-em", "leap-bbse", "em", "bbse", "auto")


def leap_accuracy(P: StoredPredictions, quantifier: str) -> float:
    """LEAP's accuracy: Σ_y π̂_t(y)·P_s(ŷ = y | y), π̂_t from ``quantifier`` ('em' or 'bbse', the prior those
    ``shiftlib.estimation`` methods use: ``label_shift_prior``), P_s the out-of-fold recall of each class."""
    if quantifier not in ("em", "bbse"):
        raise ValueError(f"quantifier must be 'em' or 'bbse'; got {quantifier!r}")
    prior_t = label_shift_prior(P, quantifier)
    n_cls, y = len(P.classes), P.y_source
    pred_s = np.argmax(P.proba_source, axis=1)
    n_y = np.bincount(y, minlength=n_cls)
    hits = np.bincount(y[pred_s == y], minlength=n_cls)
    recall = np.divide(hits, n_y, out=np.zeros(n_cls), where=n_y > 0)
    return float(prior_t @ recall)


def cell_rows(case: str, group: str, load: E.Loader, seed: int, args: argparse.Namespace) -> list[dict]:
    preds, yt = E.cell_predictions(case, load, seed, rf_trees=args.rf_trees, n_max=args.n_max,
                                   cache=Path(args.cache) if args.cache else None)
    rows = []
    for P in preds:
        truth = float(np.mean(P.predicted_target == yt))
        ests = {"leap-em": leap_accuracy(P, "em"), "leap-bbse": leap_accuracy(P, "bbse")}
        ests |= {m: float(point_estimate(P, m)) for m in ("em", "bbse", "auto")}
        rows += [{"case": case, "group": group, "seed": seed, "learner": P.learner, "method": m, "estimate": v,
                  "truth": truth, "abs_error": abs(v - truth)} for m, v in ests.items()]
    return rows


def verdict(mae: pd.DataFrame) -> tuple[bool, str]:
    """The rule's decision from the MAE table (rows: group; columns: method)."""
    better = [g for g in mae.index if any(mae.loc[g, m] < min(mae.loc[g, "em"], mae.loc[g, "bbse"]) for m in LEAP_METHODS)]
    worse = [g for g in mae.index if all(mae.loc[g, m] > max(mae.loc[g, "em"], mae.loc[g, "bbse"]) for m in LEAP_METHODS)]
    ship = bool(better) and not worse
    words = (f"LEAP below both em and bbse in: {', '.join(better) or 'no group'}; above both in: "
             f"{', '.join(worse) or 'no group'}")
    return ship, words


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seeds", default=None, help="comma-separated seeds (default 0,1,2; quick: 0)")
    ap.add_argument("--n-max", type=int, default=400)
    ap.add_argument("--rf-trees", type=int, default=50)
    ap.add_argument("--cache", default=None, help="replicate_estimation's fit cache (its --cache)")
    ap.add_argument("--out", default="reports")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else ([0] if args.quick else [0, 1, 2])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    prefix = "estimation_leap_quick" if args.quick else "estimation_leap"
    t0, started = time.perf_counter(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows: list[dict] = []
    for case, group, load in E.cases(args.quick, args.n_max):
        for seed in seeds:
            rows += cell_rows(case, group, load, seed, args)
        print(f"{case}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    cells = pd.DataFrame(rows)
    cells.to_csv(out / f"{prefix}_cells.csv", index=False)
    mae = cells.pivot_table(index="group", columns="method", values="abs_error", aggfunc="mean")[list(COMPARED)]
    n = cells[cells.method == "em"].groupby("group").size().rename("cells")
    ship, words = verdict(mae)
    head = (f"**{'Ship LEAP' if ship else 'LEAP adds nothing beyond em / bbse'}** by the rule: {words}. MAE per group "
            "below.")
    table = mae.round(4).join(n).reset_index()
    text = "\n".join([
        "# LEAP beside the label-shift estimators (issue 28 item 2)", "", "## Answer", "", head, "",
        f"This run: `python -m replications.replicate_leap{' --quick' if args.quick else ''}` (seeds {seeds}; fits "
        f"{'read from ' + args.cache if args.cache else 'computed here'}), started {started}, "
        f"{time.perf_counter() - t0:.0f} s wall (not a speed claim).", "", *RULE_MD, "",
        "## Mean absolute error per group", "", md_table(table), "", (__doc__ or "").split("Run from")[0].strip(), ""])
    (out / f"{prefix}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
