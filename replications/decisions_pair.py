"""Issue 32 item 4 (and issue 27's undecided → labels path): should an undecided gate plan its labels for the
new-against-champion pair only, instead of over every candidate and the champion as the flow does today?

Replays revision 3 of the gate (``replicate_decisions``) on the in-sample sequences (``SEQUENCES``) and the
held-out ones (``decisions_heldout.HELD_OUT_SEQUENCES``); on every night where its label-free gate is undecided
both label plans run on the same night, with the same budget and seed, and both decisions are scored by the true
accuracy change. The rule (``RULE_MD``) was committed before any run of this script.

Run from the repository root::

    nice python -m replications.decisions_pair           # full run
    nice python -m replications.decisions_pair --quick   # smoke run (2 short sequences, LR/NB/DT)

Writes ``reports/decisions_pair.md`` and ``reports/decisions_pair_nights.csv`` (``--quick``: ``*_quick*``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from replications import decisions_heldout as H
from replications import replicate_decisions as R
from replications._common import code_stamp, md_table

RULE_MD = [
    "## The rule (fixed before the run)",
    "",
    "Committed with this script before its first run (quick or full).",
    "",
    "**Question.** When revision 3 of the gate (the shipped gate) is undecided, the flow's labels run plans",
    "`min(50, rows / 2)` target labels over every candidate and the served champion (`tasks/labels.py`), then",
    "decides with them. The decision needs only new − champion, and fewlabel's difference estimate of it rests on",
    "the rows where the two disagree. Does a plan whose contenders are the pair only (new version, champion)",
    "decide better with the same budget?",
    "",
    "**Nights.** The replays of `replicate_decisions` (44 in-sample sequences) and `decisions_heldout` (18 held-out",
    "sequences), seed 0, learners LR, NB, DT, HGB, as those scripts run them; no-overlap cases are not replayed.",
    "Counted: every night where revision 3's label-free gate is `undecided` (on revision 3's own champion path).",
    "",
    "**Arms**, on the same night, budget and seed (`plan_labels(…, prior=None)`, labels = the batch's true labels,",
    "fewlabel's shipped estimator, `gate(…, labels=(difference, se, n))`):",
    "",
    "* *shipped*: contenders = every candidate of the night and the champion (revision 3 as replayed);",
    "* *pair*: contenders = the new version and the champion.",
    "",
    "The replay follows the shipped arm's decision; the pair arm's is scored on the same night (a paired,",
    "counterfactual comparison).",
    "",
    "**Measures**, per arm, pooled over both replays and per replay: *harmful* (promoted and true accuracy change",
    "< −0.01), *missed* (not promoted and true change > +0.01), *wrong* = harmful + missed, *still undecided*,",
    "labels asked, mean standard error of the pooled difference (`difference_se`).",
    "",
    "**Adopt** the pair plan for the undecided → labels path iff, pooled: wrong(pair) < wrong(shipped) and",
    "harmful(pair) ≤ harmful(shipped). Otherwise the flow keeps planning over every candidate. The counts are",
    "small; no significance test is claimed.",
]

STALE_MD = [
    "## Stale-champion nights (descriptive; written before its run, adopts nothing)",
    "",
    "Added after the run above, before this part's own run. Revision 3's label-free gate promotes without P when",
    "nothing vouches for the champion on the batch (its source does not reach it, it predicts one class, or it is",
    "estimated no better than the majority-class rule; `shiftlib.decisions.gate` step 4). On those nights of both",
    "replays the pair plan's labels path runs as on undecided nights (same budget and seed) and its decision is",
    "scored the same way, beside revision 3's promotion. The label-free outcomes of these nights had been seen",
    "(14 nights: 9 improvements, 5 harmful promotions); the labeled decisions had not. Nothing is adopted from",
    "this: a gate that sends step 4 to labels must be judged on tables none of these replays used.",
]


def scored(decision: pd.Series, delta: pd.Series, tol: float = 0.0) -> tuple[pd.Series, pd.Series]:
    """(harmful, missed) per decision, as ``reports/decisions.md`` counts them: promoted with a true change below
    −0.01; not promoted (kept, undecided or refused) with a true change above +0.01. ``tol`` > 0 counts on whole
    rows: a change must pass 0.01 by more than ``tol`` (``decisions_pooled.TOL``), so that exactly 2 rows of 200,
    a hair beyond 0.01 in floating point, counts neither way."""
    promoted = decision == "promoted"
    return promoted & (delta < -R.MARGIN - tol), ~promoted & (delta > R.MARGIN + tol)


def arms(nights: pd.DataFrame) -> pd.DataFrame:
    """Revision 3's undecided nights, one row per (night, arm): decision and its true accuracy change."""
    d = nights[(nights.gate == "rev3") & (nights.get("decision_free") == "undecided")].copy()
    delta = d.acc_new - d.acc_champion
    rows = []
    for arm, dec, asked, se in (("shipped", "decision", "labels_asked", "difference_se"),
                                ("pair", "pair_decision", "pair_labels_asked", "pair_difference_se")):
        rows.append(pd.DataFrame({"replay": d.replay, "sequence": d.sequence, "night": d.night, "arm": arm,
                                  "decision": d[dec], "delta": delta, "labels": d[asked], "difference_se": d[se]}))
    a = pd.concat(rows, ignore_index=True)
    a["harmful"], a["missed"] = scored(a.decision, a.delta)
    a["still_undecided"] = a.decision == "undecided"
    return a


def stale(nights: pd.DataFrame) -> pd.DataFrame:
    """Revision 3's step-4 promotions (nothing vouches for the champion) against the pair plan's labeled decision on
    the same nights, per replay and pooled: harmful, missed, still undecided, labels asked."""
    d = nights[(nights.gate == "rev3") & nights.reason.fillna("").str.startswith("nothing vouches")].copy()
    d["delta"] = d.acc_new - d.acc_champion
    out = []
    for scope, g in [("pooled", d), *d.groupby("replay")]:
        for arm, dec, labels in (("promote (revision 3)", g.decision, 0), ("pair labels", g.pair_decision,
                                                                          int(g.pair_labels_asked.sum()))):
            harmful, missed = scored(dec, g.delta)
            out.append({"scope": scope, "arm": arm, "nights": len(g), "harmful": int(harmful.sum()),
                        "missed": int(missed.sum()),
                        "still undecided": int((dec == "undecided").sum()), "labels asked": labels})
    return pd.DataFrame(out)


def summary(a: pd.DataFrame) -> pd.DataFrame:
    out = []
    for scope, g in [("pooled", a), *a.groupby("replay")]:
        for arm, h in g.groupby("arm", sort=False):
            out.append({"scope": scope, "arm": arm, "nights": len(h), "harmful": int(h.harmful.sum()),
                        "missed": int(h.missed.sum()), "wrong": int(h.harmful.sum() + h.missed.sum()),
                        "still undecided": int(h.still_undecided.sum()), "errors": int((h.decision == "error").sum()),
                        "labels asked": int(h.labels.sum()), "mean difference se": round(float(h.difference_se.mean()), 4)})
    return pd.DataFrame(out)


def verdict(s: pd.DataFrame) -> str:
    p = s[s.scope == "pooled"].set_index("arm")
    if "pair" not in p.index:
        return "No undecided night: nothing to compare; the flow keeps planning over every candidate."
    adopt = p.loc["pair", "wrong"] < p.loc["shipped", "wrong"] and p.loc["pair", "harmful"] <= p.loc["shipped", "harmful"]
    words = (f"wrong decisions pair {p.loc['pair', 'wrong']} vs shipped {p.loc['shipped', 'wrong']} (harmful "
             f"{p.loc['pair', 'harmful']} vs {p.loc['shipped', 'harmful']}, missed {p.loc['pair', 'missed']} vs "
             f"{p.loc['shipped', 'missed']}; still undecided {p.loc['pair', 'still undecided']} vs "
             f"{p.loc['shipped', 'still undecided']}) on {p.loc['pair', 'nights']} undecided nights")
    return (f"**{'Adopt' if adopt else 'Do not adopt'} the pair plan** by the rule: {words}.")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 short sequences, LR/NB/DT")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="reports")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    prefix = "decisions_pair_quick" if args.quick else "decisions_pair"
    names = ("LR", "NB", "DT") if args.quick else R.LEARNERS
    ins, held = list(R.SEQUENCES), list(H.HELD_OUT_SEQUENCES)
    if args.quick:
        ins = [R.SeqSpec(s.name, s.kind, s.table, s.order, n=120, k=4, drop=s.drop) for s in ins
               if s.name == "credit_data_owner_then_rent"]
        held = [R.SeqSpec(s.name, s.kind, s.table, s.order, n=120, k=4, drop=s.drop) for s in held
                if s.name == "cowles_women_then_men"]
    started, code, t0 = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), code_stamp(R.MEASURED_MODULES), time.perf_counter()
    nights, _ = R.replay(ins, [], args.seed, names)
    R.TABLES.update(H.HELD_TABLES)
    try:
        held_nights, _ = R.replay(held, [], args.seed, names)
    finally:  # the in-sample table registry stays as it was
        for t in H.HELD_TABLES:
            R.TABLES.pop(t, None)
    nights = pd.concat([nights.assign(replay="in-sample"), held_nights.assign(replay="held-out")], ignore_index=True)
    nights.to_csv(out / f"{prefix}_nights.csv", index=False)
    a = arms(nights)
    s = summary(a)
    stamp = (f"This run: `python -m replications.decisions_pair{' --quick' if args.quick else ''}` (seed {args.seed}; "
             f"{code}), started {started}, {time.perf_counter() - t0:.0f} s wall on a 2-core machine (not a speed "
             f"claim): {len(ins)} in-sample and {len(held)} held-out sequences. Rows: `{prefix}_nights.csv`.")
    disagree = a[a.arm == "shipped"]
    text = "\n".join([
        "# The undecided gate's labels: a plan for the pair against a plan over every candidate (issue 32 item 4)",
        "", "## Answer", "", verdict(s), "", stamp, "", *RULE_MD, "", "## Results", "", md_table(s), "",
        f"Undecided nights: {len(disagree)}; mean true change new − champion on them "
        f"{np.nanmean(disagree.delta):+.4f}.", "", *STALE_MD, "", md_table(stale(nights)), ""])
    (out / f"{prefix}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
