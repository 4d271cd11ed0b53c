"""Issue 27: revision 6 of the gate (``gate(..., reach='both')``) against what ships (revision 5), a second trial on
five tables no replay, replication or sweep has used. Revision 5 makes a promotion ``undecided`` when the new
version's source does not reach the batch, but keeps a confident ``kept``; revision 6 makes that keep
``undecided`` too, so the pair's labels decide. Its first trial (``reports/decisions_reach.md``) missed 2 against
2; since then revision 9's run (``reports/decisions_unsure.md``) and helper-35's sweep showed such keeps of a
better new version. The rule (``RULE_MD``) was committed before any run of this script other than ``--check``.

Run from the repository root::

    nice python -m replications.decisions_reach2            # full run
    nice python -m replications.decisions_reach2 --check    # each batch's class counts only
    nice python -m replications.decisions_reach2 --quick    # smoke run (2 short sequences, LR/NB/DT)

Writes ``reports/decisions_reach2.md`` and ``reports/decisions_reach2_nights.csv`` (``--quick``: ``*_quick*``).
"""

from __future__ import annotations

import sys

import pandas as pd

from replications._common import rdata
from replications.decisions_fresh import FreshStudy, bounded_verdict, run_study
from replications.decisions_pooled import TOL
from replications.decisions_unsure import _derived
from replications.replicate_decisions import SeqSpec, _lv

#: table → (loader, label column, columns never used as features: those that give the label — labsup's weeks,
#: hours and labour income (0 exactly for a mother who did not work), htv's years of experience (age − schooling
#: − 6) and wages, jtrain98's 1998 earnings (0 exactly when unemployed), charity's gift (> 0 exactly when the
#: person responded), fertil1's year dummies and their products with schooling (the sequence is cut by year))
TABLES = {
    "labsup": (lambda: rdata("wooldridge", "labsup"), "worked", ("weeks", "hours", "labinc")),
    "htv": (lambda: _derived("wooldridge", "htv", "college", ("educ", 13), "yes", "no"), "college",
            ("exper", "expersq", "wage", "lwage")),
    "jtrain98": (lambda: rdata("wooldridge", "jtrain98"), "unem98", ("earn98",)),
    "charity": (lambda: rdata("wooldridge", "charity"), "respond", ("gift",)),
    "fertil1": (lambda: _derived("wooldridge", "fertil1", "three_plus", ("kids", 3), "yes", "no"), "three_plus",
                ("y74", "y76", "y78", "y80", "y82", "y84", "y74educ", "y76educ", "y78educ", "y80educ", "y82educ",
                 "y84educ")),
}

SEQUENCES: tuple[SeqSpec, ...] = (
    SeqSpec("labsup_by_age", "range", "labsup", ("by", "age")),
    SeqSpec("labsup_by_schooling", "range", "labsup", ("by", "educ")),
    SeqSpec("labsup_by_first_birth_age", "range", "labsup", ("by", "agefstm")),
    SeqSpec("labsup_white_then_black", "stale", "labsup", ("levels", "black", _lv("0", "1", "1", "1", "1"))),
    SeqSpec("htv_by_ability", "range", "htv", ("by", "abil"), n=150),
    SeqSpec("htv_by_mothers_schooling", "range", "htv", ("by", "motheduc"), n=150),
    SeqSpec("htv_rural_then_urban", "stale", "htv", ("levels", "urban", _lv("0", "1", "1", "1", "1")), n=110),
    SeqSpec("jtrain98_by_schooling", "range", "jtrain98", ("by", "educ"), n=150),
    SeqSpec("jtrain98_by_age", "range", "jtrain98", ("by", "age"), n=150),
    SeqSpec("jtrain98_untrained_then_trained", "stale", "jtrain98",
            ("levels", "train", _lv("0", "1", "1", "1")), n=90, k=4),
    SeqSpec("charity_by_average_gift", "range", "charity", ("by", "avggift")),
    SeqSpec("charity_by_weeks_since_last", "range", "charity", ("by", "weekslast")),
    SeqSpec("charity_by_mails_a_year", "range", "charity", ("by", "mailsyear")),
    SeqSpec("fertil1_by_year", "time", "fertil1", ("by", "year"), n=150, drop=("year",)),
    SeqSpec("fertil1_by_schooling", "range", "fertil1", ("by", "educ"), n=150),
    SeqSpec("fertil1_by_age", "range", "fertil1", ("by", "age"), n=150),
)

QUICK_SEQUENCES = ("jtrain98_by_age", "fertil1_by_year")
GATES = ("rev5", "rev6")

RULE_MD = [
    "## The rule (fixed before the run)",
    "",
    "Committed with this script before its first run, on 2026-11-29. Looked at before: each table's size, columns,",
    "label rates and the rates of the levels used to cut batches, and (`--check`) each batch's class counts; a",
    "sequence of jtrain98 by 1996 earnings was replaced (by schooling) after `--check` showed a batch with 2 rows",
    "of a class.",
    "",
    "**Question.** Revision 6's first trial (`reports/decisions_reach.md`) missed 2 against 2 and was not adopted.",
    "Since then, on revision 9's run (`reports/decisions_unsure.md`) revision 5 kept a better new version twice",
    "at P = 0.00 where neither source reached the batch (gpa2_by_school_size nights 2 and 3, gains +0.075 and",
    "+0.045), and helper-35 saw a keep at P = 0.00 beside an undecided at P = 0.98 on the same kind of evidence. On",
    "tables no replay has used, does making that keep `undecided` (the pair's labels decide) miss fewer",
    "improvements within issue 27's bound on harmful promotions?",
    "",
    "**Gates**, replayed side by side on the same sequences (`replicate_decisions.run_sequence`, seed 0, learners",
    "LR, NB, DT, HGB, budget min(50, rows / 2) labels per labels path, filled with the batch's true labels):",
    "`rev5` (what ships) and `rev6` (`rev5` with `gate(..., reach='both')`), as in the first trial.",
    "",
    "**Sequences** (16, `SEQUENCES`), from five wooldridge tables no script, report or sweep of this repository",
    "had used: labsup (label: the mother worked; weeks, hours and labour income dropped), htv (label: more than 12",
    "years of schooling, from educ; experience and wages dropped), jtrain98 (label: unemployed in 1998; 1998",
    "earnings dropped), charity (label: responded to the mailing; the gift dropped), fertil1 (label: three or more",
    "children, from kids; the year dummies and their products with schooling dropped); cut in time order (1), by",
    "a numeric feature's range (12) or with the first batch from another group (stale, 3), as",
    "`replicate_decisions` cuts them.",
    "",
    "**Measures** per gate on whole rows (`decisions_pooled.TOL`), as `reports/decisions_unsure.md` counts them:",
    "harmful promotions (Δ < −0.01), missed improvements (not promoted, Δ > 0.01; a night still undecided after",
    "labels counts as not promoted), per 100 decisions; undecided; labels asked.",
    "",
    "**Adopt revision 6** (`shiftlib.decisions.REACH_GUARD = 'both'`) iff, counted over all decisions of this run",
    "and of the first trial together (`reports/decisions_reach_nights.csv`, recounted on whole rows),",
    "missed(rev6) < missed(rev5) and harmful(rev6) ≤ 2 per 100 decisions. Otherwise revision 5 stays.",
]


def verdict(c: pd.DataFrame) -> str:
    """The rule's verdict on this run's counts plus the first trial's (recounted on whole rows)."""
    from pathlib import Path

    from replications.decisions_fresh import counts

    first = Path("reports/decisions_reach_nights.csv")
    if not first.exists():  # a --quick run elsewhere: this run alone
        return bounded_verdict(c, 6, "rev6", "rev5") + " (this run only: the first trial's rows were not found)"
    both = pd.concat([c, counts(pd.read_csv(first), TOL)]).groupby("gate", sort=False).sum(numeric_only=True)
    return bounded_verdict(both.reset_index(), 6, "rev6", "rev5") + " (this run and the first trial together)"


def main(argv: list[str] | None = None) -> int:
    return run_study(FreshStudy(TABLES, SEQUENCES, QUICK_SEQUENCES, GATES, "decisions_reach2",
                                "A keep the new version's source cannot vouch for, second trial (issue 27)",
                                RULE_MD, verdict, tol=TOL), argv, __doc__.split("\n")[0])


if __name__ == "__main__":
    sys.exit(main())
