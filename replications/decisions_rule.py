"""Issue 27: revision 10 of the gate (the majority-class rule a third contender of the pair plan,
``shiftlib.decisions.RULE_CONTENDER``) against revision 5 (the pair plan of the new version and the champion only),
on helper-35's RetSchool finding and four tables no replay, replication or sweep has used. The rule (``RULE_MD``)
was committed with this script before any run of it other than ``--check``.

Run from the repository root::

    nice python -m replications.decisions_rule            # full run
    nice python -m replications.decisions_rule --check    # each batch's class counts only
    nice python -m replications.decisions_rule --quick    # smoke run (2 short sequences, LR/NB/DT)

Writes ``reports/decisions_rule.md`` and ``reports/decisions_rule_nights.csv`` (``--quick``: ``*_quick*``).
"""

from __future__ import annotations

import sys

import pandas as pd

import replications.replicate_decisions as R
from replications._common import rdata
from replications.decisions_fresh import FreshStudy, run_study
from replications.decisions_pooled import TOL, counts, on_rows
from replications.replicate_decisions import SeqSpec, _lv

#: table → (loader, label column, columns never used as features: those that give the label — sleep75's work and
#: leisure minutes and hourly wage (0 or empty exactly for a person not in the labour force) and its row id)
TABLES = {
    "retschool": (lambda: rdata("Ecdat", "RetSchool"), "smsa76", ()),
    # its rows with an experience, ordered by it (an empty experience goes with smsa76 = 0 on almost every row)
    "retschool_exp": (lambda: rdata("Ecdat", "RetSchool").dropna(subset=["exp76"]), "smsa76", ()),
    "catholic": (lambda: rdata("wooldridge", "catholic"), "parcath", ("id",)),
    "sleep75": (lambda: rdata("wooldridge", "sleep75"), "inlf",
                ("case", "hrwage", "lhrwage", "totwrk", "worknrm", "workscnd", "leis1", "leis2", "leis3", "rlxall")),
    "beauty": (lambda: rdata("wooldridge", "beauty"), "union", ()),
    "fringe": (lambda: rdata("wooldridge", "fringe"), "union", ()),
}

SEQUENCES: tuple[SeqSpec, ...] = (
    SeqSpec("retschool_by_experience", "range", "retschool_exp", ("by", "exp76")),  # the finding's order
    SeqSpec("retschool_by_age", "range", "retschool", ("by", "age76")),
    SeqSpec("retschool_by_family_education", "range", "retschool", ("by", "famed")),
    SeqSpec("retschool_white_then_black", "stale", "retschool", ("levels", "black", _lv("0", "1", "1", "1", "1"))),
    SeqSpec("catholic_by_reading", "range", "catholic", ("by", "read12")),
    SeqSpec("catholic_by_family_income", "range", "catholic", ("by", "lfaminc")),
    SeqSpec("catholic_men_then_women", "stale", "catholic", ("levels", "female", _lv("0", "1", "1", "1", "1"))),
    SeqSpec("sleep75_by_age", "range", "sleep75", ("by", "age"), n=140),
    SeqSpec("sleep75_by_schooling", "range", "sleep75", ("by", "educ"), n=140),
    SeqSpec("sleep75_men_then_women", "stale", "sleep75", ("levels", "male", _lv("1", "0", "0", "0")), n=90, k=4),
    SeqSpec("beauty_by_looks", "range", "beauty", ("by", "looks")),
    SeqSpec("beauty_by_schooling", "range", "beauty", ("by", "educ")),
    SeqSpec("beauty_men_then_women", "stale", "beauty", ("levels", "female", _lv("0", "1", "1", "1")), n=110, k=4),
    SeqSpec("fringe_by_schooling", "range", "fringe", ("by", "educ"), n=120),
    SeqSpec("fringe_by_tenure", "range", "fringe", ("by", "tenure"), n=120),
    SeqSpec("fringe_men_then_women", "stale", "fringe", ("levels", "male", _lv("1", "0", "0", "0")), n=55, k=4),
)

QUICK_SEQUENCES = ("retschool_by_age", "fringe_by_tenure")
GATES = ("rev5", "rev10")

RULE_MD = [
    "## The rule (fixed before the run)",
    "",
    "Committed with this script before its first run, on 2026-11-29. Looked at before: each table's size, columns",
    "and the rates of its yes/no columns, the rate of RetSchool's smsa76 along its experience order, and",
    "(`--check`) each batch's class counts.",
    "",
    "**Question.** helper-35 (Ecdat RetSchool, ordered by experience, night 2) saw 50 labels of a pair plan promote",
    "a version 0.45 below the majority-class rule: the champion predicted one class, the rule the other, and the",
    "plan drew labels only where the new version and the champion disagree, so nothing measured the rule. Revision",
    "10 makes the rule a third contender of the pair plan (`tasks.labels.stage_predictions(with_rule=True)`) and",
    "refuses a version its labels estimate no more accurate than the rule (`gate(..., rule_labels=...)`: build item",
    "1 of issue 27, on labels). What does that cost in missed improvements and labels, and does it stop such",
    "promotions?",
    "",
    "**Gates**, replayed side by side on the same sequences (`replicate_decisions.run_sequence`, seed 0, learners",
    "LR, NB, DT, HGB, budget min(50, rows / 2) labels per labels path, filled with the batch's true labels):",
    "`rev5` (the pair plan of the new version and the champion) and `rev10` (`rev5` with the rule a third",
    "contender when the pair disagrees somewhere, and its labels' new − rule read by the gate). Their label-free",
    "decisions are the same; they differ only on nights that ask for labels.",
    "",
    "**Sequences** (16, `SEQUENCES`): Ecdat RetSchool (label: lives in an SMSA in 1976; the table of the finding, no",
    "replay has used it) and four wooldridge tables no script, report or sweep of this repository had used:",
    "catholic (label: a parent is catholic; the id dropped), sleep75 (label: in the labour force; work and leisure",
    "minutes, the hourly wage and the row id dropped), beauty (label: union member), fringe (label: union member);",
    "cut by a numeric feature's range (11; by RetSchool's experience, the finding's order, only its rows with an",
    "experience: `--check` showed the 30 % without one are almost all smsa76 = 0) or with the first batch from",
    "another group (stale, 5), as",
    "`replicate_decisions` cuts them.",
    "",
    "**Measures** per gate on whole rows (`decisions_pooled.on_rows`, `TOL`): harmful promotions (Δ < −0.01),",
    "missed improvements (not promoted, Δ > 0.01), the misses build item 1 mandated (a one-class refusal, or a new",
    "version truly no more than 0.01 above the rule) and the gate's own misses (the rest); **promotions below the",
    "rule** (a promoted version truly more than 0.01 below the rule's accuracy on the batch,",
    "`batch_majority_share`); labels asked.",
    "",
    "**Keep revision 10** (`RULE_CONTENDER = True`, as committed with this script) iff, counted over all decisions",
    "of this run: promotions below the rule(rev10) ≤ promotions below the rule(rev5), harmful(rev10) ≤ harmful(rev5),",
    "and own misses(rev10) ≤ own misses(rev5) + 1 per 100 decisions. Otherwise `RULE_CONTENDER` becomes False and",
    "the pair plan is the new version and the champion again.",
]


def scored(nights: pd.DataFrame) -> pd.DataFrame:
    """Per gate: ``decisions_pooled.counts`` on whole rows, with the promotions below the rule."""
    d = on_rows(nights)
    d["below_rule"] = d.promoted & (d.acc_new < d.batch_majority_share - R.MARGIN - TOL)
    c = counts(d, ["gate"])
    return c.merge(d.groupby("gate", sort=False).below_rule.sum().rename("below rule").reset_index(), on="gate")


def verdict(nights: pd.DataFrame) -> str:
    """The rule's verdict on this run's nights, with the counts table."""
    c = scored(nights)
    g = c.set_index("gate")
    n = int(g.loc["rev10", "decisions"])
    keep = (g.loc["rev10", "below rule"] <= g.loc["rev5", "below rule"]
            and g.loc["rev10", "harmful"] <= g.loc["rev5", "harmful"]
            and g.loc["rev10", "own misses"] <= g.loc["rev5", "own misses"] + n / 100)
    return (f"**{'Keep' if keep else 'Do not keep'} revision 10** by the rule: promotions below the rule "
            f"{g.loc['rev10', 'below rule']} vs {g.loc['rev5', 'below rule']}, harmful {g.loc['rev10', 'harmful']} vs "
            f"{g.loc['rev5', 'harmful']}, own misses {g.loc['rev10', 'own misses']} vs {g.loc['rev5', 'own misses']} "
            f"(of {n} decisions each; allowance {n / 100:.2f}), labels asked {g.loc['rev10', 'labels']} vs "
            f"{g.loc['rev5', 'labels']}.\n\n" + R.md_table(c))


def main(argv: list[str] | None = None) -> int:
    return run_study(FreshStudy(TABLES, SEQUENCES, QUICK_SEQUENCES, GATES, "decisions_rule",
                                "The majority-class rule as a third contender of the pair plan (issue 27)",
                                RULE_MD, verdict, tol=TOL, by_nights=True), argv, __doc__.split("\n")[0])


if __name__ == "__main__":
    sys.exit(main())
