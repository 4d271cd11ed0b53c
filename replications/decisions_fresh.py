"""Issue 27: the gate as it ships (revision 3 with the pair plan, ``rev3p``) against a revision 4 whose step 4 —
nothing vouches for the served champion on the batch — asks for the pair's labels instead of promoting
(``rev4``), replayed on sequences from six tables no decisions replay has used. The rule (``RULE_MD``) was
committed before any run of this script.

Run from the repository root::

    nice python -m replications.decisions_fresh            # full run
    nice python -m replications.decisions_fresh --check    # each batch's class counts only (no fit, no decision)
    nice python -m replications.decisions_fresh --quick    # smoke run (2 short sequences, LR/NB/DT)

Writes ``reports/decisions_fresh.md`` and ``reports/decisions_fresh_nights.csv`` (``--quick``: ``*_quick*``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from replications import replicate_decisions as R
from replications._common import code_stamp, md_table, rdata
from replications.decisions_pair import scored
from replications.replicate_decisions import SeqSpec, _lv

#: table → (loader, label column, columns never used as features: ids, and columns that tell the label —
#: Aids2's death date, nwtco's time to relapse and sampling flags, rotterdam's follow-up times, PSID1976's hours
#: and wages, which are 0 exactly when a woman does not participate)
FRESH_TABLES = {
    "default": (lambda: rdata("ISLR", "Default"), "default", ()),
    "aids2": (lambda: rdata("MASS", "Aids2"), "status", ("death",)),
    "nwtco": (lambda: rdata("survival", "nwtco"), "rel", ("seqno", "edrel", "in.subcohort")),
    "rotterdam": (lambda: rdata("survival", "rotterdam"), "death", ("pid", "rtime", "dtime")),
    "computers": (lambda: rdata("Ecdat", "Computers"), "cd", ()),
    "psid1976": (lambda: rdata("AER", "PSID1976"), "participation", ("hours", "wage", "repwage")),
}

FRESH_SEQUENCES: tuple[SeqSpec, ...] = (
    SeqSpec("default_by_income", "range", "default", ("by", "income"), n=400),
    SeqSpec("default_nonstudents_then_students", "stale", "default",
            ("levels", "student", _lv("No", "Yes", "Yes", "Yes", "Yes")), n=400),
    SeqSpec("aids2_by_diag", "time", "aids2", ("by", "diag"), drop=("diag",)),
    SeqSpec("aids2_by_age", "range", "aids2", ("by", "age")),
    SeqSpec("aids2_by_state", "group", "aids2", ("levels", "state", _lv("NSW", "VIC", "Other", "QLD")), n=110,
            k=4),
    SeqSpec("aids2_nsw_then_vic", "stale", "aids2", ("levels", "state", _lv("NSW", "VIC", "VIC", "VIC", "VIC")),
            n=140),
    SeqSpec("nwtco_by_age", "range", "nwtco", ("by", "age")),
    SeqSpec("nwtco_by_stage", "group", "nwtco", ("levels", "stage", _lv("1", "2", "3", "4")), k=4),
    SeqSpec("nwtco_favourable_then_unfavourable", "stale", "nwtco",
            ("levels", "histol", _lv("1", "2", "2", "2", "2")), n=110),
    SeqSpec("rotterdam_by_year", "time", "rotterdam", ("by", "year"), drop=("year",)),
    SeqSpec("rotterdam_by_age", "range", "rotterdam", ("by", "age")),
    SeqSpec("rotterdam_by_nodes", "range", "rotterdam", ("by", "nodes")),
    SeqSpec("rotterdam_premenopausal_then_post", "stale", "rotterdam",
            ("levels", "meno", _lv("0", "1", "1", "1", "1"))),
    SeqSpec("computers_by_trend", "time", "computers", ("by", "trend"), drop=("trend",)),
    SeqSpec("computers_by_price", "range", "computers", ("by", "price")),
    SeqSpec("computers_by_hd", "range", "computers", ("by", "hd")),
    SeqSpec("psid1976_by_age", "range", "psid1976", ("by", "age"), n=150),
    SeqSpec("psid1976_by_family_income", "range", "psid1976", ("by", "fincome"), n=150),
)

QUICK_SEQUENCES = ("aids2_nsw_then_vic", "psid1976_by_age")
GATES = ("rev3p", "rev4")

RULE_MD = [
    "## The rule (fixed before the run)",
    "",
    "Committed with this script before its first run. Looked at before: each table's size, label counts and the",
    "counts of the levels used to cut batches, and (`--check`) each batch's class counts.",
    "",
    "**Question.** `reports/decisions_pair.md` found, on tables the gate had been replayed on, that 5 of revision",
    "3's 7 harmful promotions came from step 4 (nothing vouches for the champion: promoted without P), and that the",
    "pair's labels would have avoided all 5 without missing an improvement. Does sending step 4 to the labels path",
    "lower harmful promotions on tables none of the replays used, without more missed improvements?",
    "",
    "**Gates**, replayed side by side on the same sequences (`replicate_decisions.run_sequence`, seed 0, learners",
    "LR, NB, DT, HGB, budget min(50, rows / 2) labels per labels path, filled with the batch's true labels):",
    "",
    "* `rev3p`: what ships (revision 3 of the gate; an undecided gate asks for labels with the pair plan);",
    "* `rev4`: `rev3p`, and step 4 also asks for the pair's labels, which then decide (`gate(…, labels=…)`).",
    "",
    "**Sequences** (18, `FRESH_SEQUENCES`): ISLR Default, MASS Aids2, survival nwtco, survival rotterdam, Ecdat",
    "Computers, AER PSID1976, cut in time order (3), by a numeric feature's range (9), by a categorical column's",
    "levels (2) or with the first batch from another group (stale, 4), as `replicate_decisions` cuts them.",
    "",
    "**Measures** per gate, as `reports/decisions.md` counts them: harmful promotions (Δ < −0.01), missed",
    "improvements (not promoted, Δ > 0.01; a night still undecided after labels counts as not promoted), per 100",
    "decisions; undecided; labels asked.",
    "",
    "**Adopt revision 4** (step 4 → labels, in `shiftlib.decisions.gate`) iff harmful(rev4) < harmful(rev3p) and",
    "missed(rev4) ≤ missed(rev3p), counted over all decisions. Otherwise step 4 keeps promoting.",
]


def counts(nights: pd.DataFrame, tol: float = 0.0) -> pd.DataFrame:
    """Per gate: decisions, harmful, missed, undecided, labels asked (and per 100 decisions); ``tol``: as
    ``decisions_pair.scored``'s (> 0: on whole rows)."""
    d = nights.copy()
    d["delta"] = d.acc_new - d.acc_champion
    d["harmful"], d["missed"] = scored(d.decision, d.delta, tol)
    out = d.groupby("gate", sort=False).agg(decisions=("decision", "size"), harmful=("harmful", "sum"),
                                            missed=("missed", "sum"),
                                            undecided=("decision", lambda s: int((s == "undecided").sum())),
                                            errors=("decision", lambda s: int((s == "error").sum())),
                                            labels=("labels_asked", "sum")).reset_index()
    for c in ("harmful", "missed", "undecided"):
        out[f"{c} /100"] = (100 * out[c] / out.decisions).round(1)
    return out


def verdict(c: pd.DataFrame) -> str:
    g = c.set_index("gate")
    adopt = g.loc["rev4", "harmful"] < g.loc["rev3p", "harmful"] and g.loc["rev4", "missed"] <= g.loc["rev3p", "missed"]
    return (f"**{'Adopt' if adopt else 'Do not adopt'} revision 4** by the rule: harmful {g.loc['rev4', 'harmful']} vs "
            f"{g.loc['rev3p', 'harmful']}, missed {g.loc['rev4', 'missed']} vs {g.loc['rev3p', 'missed']} "
            f"(of {g.loc['rev4', 'decisions']} decisions each), labels asked {g.loc['rev4', 'labels']} vs "
            f"{g.loc['rev3p', 'labels']}.")


def bounded_verdict(c: pd.DataFrame, revision: int, new: str, old: str) -> str:
    """The verdict of a rule "adopt revision ``revision`` (gate ``new``) iff missed(new) < missed(old) and
    harmful(new) ≤ 2 per 100 decisions" (issue 27's bound), on ``counts``' table ``c``."""
    g = c.set_index("gate")
    n = g.loc[new, "decisions"]
    adopt = g.loc[new, "missed"] < g.loc[old, "missed"] and 100 * g.loc[new, "harmful"] / n <= 2
    return (f"**{'Adopt' if adopt else 'Do not adopt'} revision {revision}** by the rule: missed "
            f"{g.loc[new, 'missed']} vs {g.loc[old, 'missed']}, harmful {g.loc[new, 'harmful']} vs "
            f"{g.loc[old, 'harmful']} (of {n} decisions each; {new} {100 * g.loc[new, 'harmful'] / n:.1f} harmful per "
            f"100, bound 2), labels asked {g.loc[new, 'labels']} vs {g.loc[old, 'labels']}.")


def check(seqs: list[SeqSpec], seed: int) -> int:
    """Each batch's class counts (the replay stops when a batch holds a class fewer than 3 times)."""
    bad = 0
    for s in seqs:
        enc = R.encode(s.table, s.drop)
        shown = [pd.Series(enc.y[rows]).value_counts().to_dict() for rows in R.batch_rows(s, enc.frame, seed)]
        low = any(len(c) < len(set(enc.y)) or min(c.values()) < 3 for c in shown)
        bad += low
        print(f"{s.name}: {shown}{'  <-- LOW' if low else ''}")
    return 1 if bad else 0


@dataclass(frozen=True)
class FreshStudy:
    """One replay of gates on fresh tables: its tables, sequences (and the quick run's), gates, module (its
    command and output prefix), report title, rule and verdict."""

    tables: dict[str, Any]
    sequences: tuple[SeqSpec, ...]
    quick: tuple[str, ...]
    gates: tuple[str, ...]
    module: str
    title: str
    rule_md: list[str]
    verdict: Callable[[pd.DataFrame], str]
    tol: float = 0.0  # ``counts``' (> 0: harmful and missed counted on whole rows; decisions_unsure on)
    by_nights: bool = False  # ``verdict`` reads the nights table itself, not ``counts``' (decisions_rule)
    command: str = ""  # the command the stamp names (default ``python -m replications.<module>``)


def run_study(study: FreshStudy, argv: list[str] | None, description: str) -> int:
    """``--check``, ``--quick`` or the full run of ``study``: replays its sequences, writes
    ``<module>[_quick]_nights.csv`` and ``<module>[_quick].md`` (verdict, stamp, rule, counts) under ``--out``."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--check", action="store_true", help="print each batch's class counts and stop")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="reports")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seqs = [s for s in study.sequences if not args.quick or s.name in study.quick]
    if args.quick:
        seqs = [SeqSpec(s.name, s.kind, s.table, s.order, n=min(s.n, 110), k=4, drop=s.drop) for s in seqs]
    R.TABLES.update(study.tables)
    try:
        if args.check:
            return check(seqs, args.seed)
        prefix = f"{study.module}_quick" if args.quick else study.module
        names = ("LR", "NB", "DT") if args.quick else R.LEARNERS
        started, code, t0 = (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), code_stamp(R.MEASURED_MODULES),
                             time.perf_counter())
        nights, _ = R.replay(seqs, [], args.seed, names, study.gates)
    finally:  # the in-sample table registry stays as it was
        for t in study.tables:
            R.TABLES.pop(t, None)
    nights.to_csv(out / f"{prefix}_nights.csv", index=False)
    c = counts(nights, study.tol)
    stamp = (f"This run: `{study.command or f'python -m replications.{study.module}'}"
             f"{' --quick' if args.quick else ''}` (seed "
             f"{args.seed}; {code}), started {started}, {time.perf_counter() - t0:.0f} s wall on a 2-core machine "
             f"(not a speed claim): {len(seqs)} sequences. Rows: `{prefix}_nights.csv`.")
    said = study.verdict(nights if study.by_nights else c)
    text = "\n".join([f"# {study.title}", "", "## Answer", "", said, "", stamp, "", *study.rule_md, "",
                      "## Results", "", md_table(c), ""])
    (out / f"{prefix}.md").write_text(text)
    print(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_study(FreshStudy(FRESH_TABLES, FRESH_SEQUENCES, QUICK_SEQUENCES, GATES, "decisions_fresh",
                                "Step 4 of the gate on fresh tables: promote, or ask for the pair's labels? (issue 27)",
                                RULE_MD, verdict), argv, __doc__.split("\n")[0])


if __name__ == "__main__":
    sys.exit(main())
