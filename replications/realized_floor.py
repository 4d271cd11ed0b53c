"""Issue 28, item 5: should the realised-error correction's spread be raised to the batch's binomial noise?

``shiftlib.realized.realized_correction(n_target=...)`` raises the past residuals' standard deviation s to
√(c̃(1 − c̃)/n), the binomial standard deviation of today's realised accuracy at the corrected estimate c̃
(the module docstring says why). Without it, three residuals that happen to agree give an interval narrower
than a batch's own noise: helper-37's guImmun night 4 missed by 0.035 that way. This trial measures what the
floor costs and buys on four time-ordered streams the realised replication never replayed, by the rule in
``RULE_MD`` (committed before any run of this script that prints a result).

Run from the repository root::

    python -m replications.realized_floor            # the trial (about 20-30 minutes on 2 cores)
    python -m replications.realized_floor --quick    # smoke run: its numbers are not results
    python -m replications.realized_floor --report-only

Writes ``reports/estimation_realized_floor.md`` and its rows (``_nights.csv``, ``.csv``, ``_run.csv``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

from replications._common import code_stamp, md_table
from replications.replicate_realized import (
    CONFIDENCE,
    HISTORIES,
    LEARNERS,
    MEASURED,
    N_CHUNKS,
    N_ROWS,
    corrections,
    run_streams,
    summary,
)

#: time-ordered sequences of ``replicate_decisions.SEQUENCES`` that ``replicate_realized`` never replayed
STREAMS = ("psid7682_by_year", "wage_by_year", "arrests_by_year", "males_by_year")
#: the streams ``replicate_realized`` replayed: their stored nights are scored too, in-sample (described only)
IN_SAMPLE = "reports/estimation_realized_nights.csv"
#: the floor is adopted when it widens the mean interval by at most this factor (rule, item 4)
MAX_WIDTH_RATIO = 1.25
QUICK = {"streams": ("wage_by_year",), "chunks": 7, "rows": 120, "learners": ("LR", "NB"), "histories": (3,)}

RULE_MD = """## The rule (fixed before the run)

Written and committed before any run of `replications/realized_floor.py` that prints a result. Nothing of
the four streams below had been estimated by the realised replication; their decisions replays (5 batches
of 200 rows) are another question and were not looked at for this.

1. **Streams.** The `time` sequences psid7682_by_year (AER PSID7682, `union`), wage_by_year (ISLR Wage,
   `health_ins`), arrests_by_year (carData Arrests, `released`) and males_by_year (Ecdat Males, `union`) of
   `replicate_decisions.SEQUENCES`, replayed exactly as `replications/replicate_realized.py`'s rule items
   2–8 replay its four: T = 13 consecutive chunks by year, n = 500 rows drawn per chunk (the chunk when
   smaller), nights 1–12, candidates LR, NB, DT, HGB, the flow's label-free `auto` estimate and interval,
   seed 0 everywhere (`run_streams`, unchanged).
2. **Two corrections on the same nights**: *plain*, `realized_correction(estimate, past…, window=k)` as
   shipped, and *floored*, the same call with `n_target` = the night's batch rows. Each for k ∈ {3, 5, 10}
   (the last k nights) and for the shipped default (every earlier night, window 10, from 3 on).
3. **Measures**, pooled over the four streams, per k and for the shipped default: coverage of the realised
   accuracy (closed interval), mean width, MAE (the two share their centre, so MAE is equal), and the share
   of rows where the floor binds (floored width > plain width).
4. **Adopt** the floor (the flow passes the batch's rows) if and only if, pooled over the four streams, the
   floored mean width is at most 1.25 × the plain mean width **both** at k = 5 and for the shipped default.
   Coverage cannot fall (same centre, never narrower); it is reported, not tested.
5. **Described, not part of the decision**: the same two corrections on `replicate_realized`'s stored
   nights (`reports/estimation_realized_nights.csv`; in-sample, since the floor was computed in that report).
6. **Seeds** 0; one run. `--quick` (wage only, T = 7, 120 rows, LR/NB, k = 3) is a smoke run whose numbers
   are not results.
"""


def both(nights: pd.DataFrame, histories: tuple[int, ...]) -> pd.DataFrame:
    """Plain and floored corrections (rule, item 2) on ``nights``, one row each per night and history."""
    parts = []
    for floored in (False, True):
        for window_all in (False, True):
            c = corrections(nights, histories, window_all=window_all, n_target_floor=floored)
            parts.append(c.assign(correction="floored" if floored else "plain"))
    return pd.concat(parts, ignore_index=True)


def compare(corr: pd.DataFrame) -> pd.DataFrame:
    """Per history: coverage, mean width and MAE of each correction, the width ratio and the share where the
    floor binds (rule, item 3)."""
    s = summary(corr, ["history", "correction"]).pivot(index="history", columns="correction")
    keys = ["history", "correction", "table", "candidate", "night"]
    wide = corr.set_index(keys)["width"].unstack("correction")
    binds = (wide["floored"] > wide["plain"] + 1e-12).groupby("history").mean()
    out = pd.DataFrame({"rows": s[("rows", "plain")], "coverage plain": s[("coverage", "plain")],
                        "coverage floored": s[("coverage", "floored")], "width plain": s[("width", "plain")],
                        "width floored": s[("width", "floored")], "MAE": s[("mae", "plain")]})
    out["width ratio"] = out["width floored"] / out["width plain"]
    out["floor binds"] = binds
    order = [str(k) for k in HISTORIES] + ["shipped"]
    return out.reindex([h for h in order if h in out.index]).reset_index()


def verdict(table: pd.DataFrame) -> tuple[bool, str]:
    """Rule, item 4."""
    ratio = table.set_index("history")["width ratio"]
    k5, shipped = float(ratio.get("5", float("nan"))), float(ratio.get("shipped", float("nan")))
    adopt = k5 <= MAX_WIDTH_RATIO and shipped <= MAX_WIDTH_RATIO
    return adopt, (f"**{'Adopt' if adopt else 'Do not adopt'} the floor.** Floored / plain mean width: {k5:.3f} at "
                   f"k = 5 and {shipped:.3f} for the shipped default (adopted when both ≤ {MAX_WIDTH_RATIO}).")


def write_report(out: Path, prefix: str, corr: pd.DataFrame, seen: pd.DataFrame | None,
                 run: dict[str, Any]) -> str:
    """The report: the verdict, the pooled and per-stream tables, the in-sample description, the rule."""
    table = compare(corr)
    _, says = verdict(table)
    per = (summary(corr, ["table", "history", "correction"])
           .pivot(index=["table", "history"], columns="correction", values=["coverage", "width"]))
    per.columns = [f"{a} {b}" for a, b in per.columns]
    lines = ["# Realised-error correction: raise its spread to the batch's binomial noise? (issue 28, item 5)", "",
             "## Answer", "", says, "",
             f"Pooled over {', '.join(sorted(corr.table.unique()))} ({CONFIDENCE:.0%} intervals):", "",
             md_table(table.round(3)), "", "Per stream:", "", md_table(per.round(3).reset_index()), ""]
    if seen is not None:
        lines += ["In-sample (rule, item 5; `replicate_realized`'s stored nights, described only):", "",
                  md_table(compare(seen).round(3)), ""]
    lines += [RULE_MD, "## This run", ""] + [f"- {k}: {v}" for k, v in run.items()] + [""]
    text = "\n".join(lines)
    (out / f"{prefix}.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run (rule, item 6)")
    ap.add_argument("--report-only", action="store_true", help="no replay: the report again from the kept rows")
    ap.add_argument("--out", default="reports")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    prefix = "estimation_realized_floor_quick" if args.quick else "estimation_realized_floor"
    histories = QUICK["histories"] if args.quick else HISTORIES
    seen = None if args.quick else both(pd.read_csv(IN_SAMPLE), HISTORIES)
    if args.report_only:
        run = pd.read_csv(out / f"{prefix}_run.csv").iloc[0].to_dict()
        nights = pd.read_csv(out / f"{prefix}_nights.csv")
        print(write_report(out, prefix, both(nights, histories), seen, run))
        return 0
    run = {"command": "python -m replications.realized_floor" + (" --quick" if args.quick else ""),
           "code": code_stamp(MEASURED), "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    t0 = time.perf_counter()
    if args.quick:
        nights = run_streams(QUICK["streams"], QUICK["chunks"], QUICK["rows"], QUICK["learners"], histories, 0)
    else:
        nights = run_streams(STREAMS, N_CHUNKS, N_ROWS, LEARNERS, histories, 0)
    run["elapsed_s"] = round(time.perf_counter() - t0, 1)
    corr = both(nights, histories)
    nights.to_csv(out / f"{prefix}_nights.csv", index=False)
    corr.to_csv(out / f"{prefix}.csv", index=False)
    pd.DataFrame([run]).to_csv(out / f"{prefix}_run.csv", index=False)
    print(write_report(out, prefix, corr, seen, run))
    return 0


if __name__ == "__main__":
    sys.exit(main())
