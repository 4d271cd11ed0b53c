"""Issue 27: revision 6 of the gate against what ships (revision 5). When the new version's source does not reach
today's batch (domain AUC ≥ ``shiftlib.decisions.OVERLAP_AUC``), revision 5 turns a promotion into ``undecided``
but keeps a confident ``kept``; revision 6 (``gate(..., reach='both')``) makes that keep ``undecided`` too, so the
pair's labels decide. Replayed on sequences from six tables no replay, replication or sweep has used. The rule
(``RULE_MD``) was committed before any run of this script.

Run from the repository root::

    nice python -m replications.decisions_reach            # full run
    nice python -m replications.decisions_reach --check    # each batch's class counts only
    nice python -m replications.decisions_reach --quick    # smoke run (2 short sequences, LR/NB/DT)

Writes ``reports/decisions_reach.md`` and ``reports/decisions_reach_nights.csv`` (``--quick``: ``*_quick*``).
"""

from __future__ import annotations

import sys

import pandas as pd

from replications._common import rdata
from replications.decisions_fresh import FreshStudy, bounded_verdict, run_study
from replications.replicate_decisions import SeqSpec, _lv


def _strength() -> pd.DataFrame:
    d = rdata("openintro", "yrbss").dropna(subset=["strength_training_7d"])
    return d.assign(strength=(d["strength_training_7d"] >= 3).map({True: "yes", False: "no"})).drop(
        columns=["strength_training_7d"])


#: table → (loader, label column, columns never used as features: ids, and columns that tell the label — acs12's
#: income, hours worked and commute time, which are empty or 0 for those without work). Rows without a label are
#: dropped.
TABLES = {
    "college": (lambda: rdata("AER", "CollegeDistance"), "income", ()),
    "email": (lambda: rdata("openintro", "email"), "spam", ()),
    "azpro": (lambda: rdata("COUNT", "azpro"), "procedure", ()),
    "badhealth": (lambda: rdata("COUNT", "badhealth"), "badh", ()),
    "acs12": (lambda: rdata("openintro", "acs12").dropna(subset=["employment"]), "employment",
              ("income", "hrs_work", "time_to_work")),
    "yrbss": (_strength, "strength", ()),
}

SEQUENCES: tuple[SeqSpec, ...] = (
    SeqSpec("college_by_score", "range", "college", ("by", "score")),
    SeqSpec("college_by_distance", "range", "college", ("by", "distance")),
    SeqSpec("college_other_then_west", "stale", "college", ("levels", "region", _lv("other", "west", "west", "west",
                                                                                      "west"))),
    SeqSpec("email_by_time", "time", "email", ("by", "time"), drop=("time",)),
    SeqSpec("email_by_length", "range", "email", ("by", "num_char")),
    SeqSpec("email_html_then_plain", "stale", "email", ("levels", "format", _lv("1", "0", "0", "0", "0"))),
    SeqSpec("azpro_urgent_then_elective", "stale", "azpro", ("levels", "admit", _lv("1", "0", "0", "0", "0"))),
    SeqSpec("azpro_by_hospital", "range", "azpro", ("by", "hospital")),
    SeqSpec("azpro_women_then_men", "stale", "azpro", ("levels", "sex", _lv("0", "1", "1", "1", "1"))),
    SeqSpec("badhealth_by_age", "range", "badhealth", ("by", "age"), n=150),
    SeqSpec("badhealth_by_visits", "range", "badhealth", ("by", "numvisit"), n=150),
    SeqSpec("acs12_by_age", "range", "acs12", ("by", "age"), n=150),
    SeqSpec("acs12_men_then_women", "stale", "acs12", ("levels", "gender", _lv("male", "female", "female", "female",
                                                                                "female")), n=150),
    SeqSpec("yrbss_by_weight", "range", "yrbss", ("by", "weight")),
    SeqSpec("yrbss_by_grade", "group", "yrbss", ("levels", "grade", _lv("9", "10", "11", "12")), k=4),
    SeqSpec("yrbss_girls_then_boys", "stale", "yrbss", ("levels", "gender", _lv("female", "male", "male", "male",
                                                                                 "male"))),
)

QUICK_SEQUENCES = ("azpro_women_then_men", "badhealth_by_age")
GATES = ("rev5", "rev6")

RULE_MD = [
    "## The rule (fixed before the run)",
    "",
    "Committed with this script before its first run, on 2026-11-29. Looked at before: each table's size, columns,",
    "label counts and the counts of the levels used to cut batches, and (`--check`) each batch's class counts; a",
    "sequence of azpro by length of stay was replaced (by admission type) after `--check` showed a one-class batch.",
    "",
    "**Question.** Revision 5 (what ships, `reports/decisions_heldout_champion2.md`) missed 11 improvements in 107",
    "decisions over its two trials. Two of them were nights the label-free gate `kept` at P = 0.00 while the new",
    "version's source did not reach the batch (domain AUC 0.991 and 0.995): the champion's estimate was then",
    "0.09 and 0.17 above its accuracy. Step 5 already refuses to promote on such evidence (`undecided`); a keep rests",
    "on the same extrapolation. Does making that keep `undecided` too, so the pair's labels decide, miss fewer",
    "improvements on tables no replay has used, within issue 27's bound on harmful promotions?",
    "",
    "**Gates**, replayed side by side on the same sequences (`replicate_decisions.run_sequence`, seed 0, learners",
    "LR, NB, DT, HGB, budget min(50, rows / 2) labels per labels path, filled with the batch's true labels):",
    "",
    "* `rev5`: what ships (the champion estimated on today's source rows it never saw; undecided and step 4 ask for",
    "  the pair's labels);",
    "* `rev6`: `rev5` with `gate(..., reach='both')`: when the new version's source does not reach the batch, a",
    "  label-free `kept` becomes `undecided` (and asks for the pair's labels) as a promotion does.",
    "",
    "**Sequences** (16, `SEQUENCES`), from six tables no script, report or sweep of this repository had used: AER",
    "CollegeDistance (label: family income high or low), openintro email (label: spam), COUNT azpro (label: the",
    "procedure, CABG or PTCA), COUNT badhealth (label: bad health), openintro acs12 (label: employment, three",
    "classes; rows without it dropped; income, hours worked and commute time dropped), openintro yrbss (label:",
    "strength training on 3 or more of 7 days; rows without it dropped); cut in time order (1), by a numeric",
    "feature's range (8), by a categorical column's levels (1) or with the first batch from another group (stale,",
    "6), as `replicate_decisions` cuts them.",
    "",
    "**Measures** per gate, as `reports/decisions.md` counts them: harmful promotions (Δ < −0.01), missed",
    "improvements (not promoted, Δ > 0.01; a night still undecided after labels counts as not promoted), per 100",
    "decisions; undecided; labels asked.",
    "",
    "**Adopt revision 6** (`shiftlib.decisions.REACH_GUARD = 'both'`) iff, counted over all decisions of this run,",
    "missed(rev6) < missed(rev5) and harmful(rev6) ≤ 2 per 100 decisions. Otherwise revision 5 stays.",
]


def verdict(c: pd.DataFrame) -> str:
    return bounded_verdict(c, 6, "rev6", "rev5")


def main(argv: list[str] | None = None) -> int:
    return run_study(FreshStudy(TABLES, SEQUENCES, QUICK_SEQUENCES, GATES, "decisions_reach",
                                "A keep the new version's source cannot vouch for: undecided too? (issue 27)",
                                RULE_MD, verdict), argv, __doc__.split("\n")[0])


if __name__ == "__main__":
    sys.exit(main())
