"""Issue 27, second trial of revision 5: the gate as it ships (``rev4``: the served champion estimated from the
out-of-fold predictions of the source it was chosen on) against ``rev5`` (the champion estimated as it is on
today's labeled source rows it was never fitted on, ``shiftlib.decisions.heldout_champion_predictions``), replayed
on sequences from six tables no replay, replication or sweep has used. The rule (``RULE_MD``) was committed before
any run of this script; the first trial is ``decisions_heldout_champion``.

Run from the repository root::

    nice python -m replications.decisions_heldout_champion2            # full run
    nice python -m replications.decisions_heldout_champion2 --check    # each batch's class counts only
    nice python -m replications.decisions_heldout_champion2 --quick    # smoke run (2 short sequences, LR/NB/DT)

Writes ``reports/decisions_heldout_champion2.md`` and ``reports/decisions_heldout_champion2_nights.csv``
(``--quick``: ``*_quick*``).
"""

from __future__ import annotations

import sys

import pandas as pd

from replications._common import rdata
from replications.decisions_fresh import FreshStudy, bounded_verdict, run_study
from replications.replicate_decisions import SeqSpec, _lv


def _yes(flag: pd.Series) -> pd.Series:
    return flag.map({True: "yes", False: "no"})


def _doctorvisits() -> pd.DataFrame:
    d = rdata("AER", "DoctorVisits")
    return d.assign(visited=_yes(d["visits"] > 0)).drop(columns=["visits"])


def _treatment() -> pd.DataFrame:
    d = rdata("Ecdat", "Treatment")
    return d.assign(employed78=_yes(d["re78"] > 0))


def _crime1() -> pd.DataFrame:
    d = rdata("wooldridge", "crime1")
    return d.assign(arrested=_yes(d["narr86"] > 0)).drop(columns=["narr86", "nfarr86", "nparr86"])


#: table → (loader, label column, columns never used as features: ids, and columns that tell the label —
#: Schooling's 1976 wage, which a student enrolled in 1976 mostly lacks;
#: Treatment's 1978 earnings, which define its label). Rows without a label are dropped.
TABLES = {
    "doctorvisits": (_doctorvisits, "visited", ()),
    "crime1": (_crime1, "arrested", ()),
    "fertil2": (lambda: rdata("wooldridge", "fertil2").dropna(subset=["usemeth"]), "usemeth", ()),
    "schooling": (lambda: rdata("Ecdat", "Schooling"), "enroll76", ("wage76", "lwage76")),
    "treatment": (_treatment, "employed78", ("re78",)),
    "medicaid": (lambda: rdata("AER", "Medicaid1986"), "program", ()),
}

SEQUENCES: tuple[SeqSpec, ...] = (
    SeqSpec("doctorvisits_by_age", "range", "doctorvisits", ("by", "age")),
    SeqSpec("doctorvisits_by_income", "range", "doctorvisits", ("by", "income")),
    SeqSpec("doctorvisits_public_then_private", "stale", "doctorvisits",
            ("levels", "private", _lv("no", "yes", "yes", "yes", "yes"))),
    SeqSpec("crime1_by_income", "range", "crime1", ("by", "inc86")),
    SeqSpec("crime1_by_unemployment_duration", "range", "crime1", ("by", "durat")),
    SeqSpec("crime1_born_before_then_in_1960", "stale", "crime1", ("levels", "born60", _lv("0", "1", "1", "1", "1"))),
    SeqSpec("fertil2_by_birth_year", "time", "fertil2", ("by", "yearborn"), drop=("yearborn",)),
    SeqSpec("fertil2_by_education", "range", "fertil2", ("by", "educ")),
    SeqSpec("fertil2_rural_then_urban", "stale", "fertil2", ("levels", "urban", _lv("0", "1", "1", "1", "1"))),
    SeqSpec("schooling_by_age", "range", "schooling", ("by", "age76")),
    SeqSpec("schooling_by_mothers_education", "range", "schooling", ("by", "momed")),
    SeqSpec("schooling_north_then_south", "stale", "schooling", ("levels", "south76", _lv("no", "yes", "yes", "yes",
                                                                                            "yes"))),
    SeqSpec("treatment_by_age", "range", "treatment", ("by", "age")),
    SeqSpec("treatment_by_education", "range", "treatment", ("by", "educ")),
    SeqSpec("treatment_unmarried_then_married", "stale", "treatment",
            ("levels", "married", _lv("False", "True", "True", "True", "True")), n=100),
    SeqSpec("medicaid_by_schooling", "range", "medicaid", ("by", "school"), n=150),
    SeqSpec("medicaid_by_income", "range", "medicaid", ("by", "income"), n=150),
    SeqSpec("medicaid_white_then_other", "stale", "medicaid",
            ("levels", "ethnicity", _lv("cauc", "other", "other", "other", "other")), n=75),
)

QUICK_SEQUENCES = ("crime1_born_before_then_in_1960", "medicaid_by_schooling")
GATES = ("rev4", "rev5")

RULE_MD = [
    "## The rule (fixed before the run)",
    "",
    "Committed with this script before its first run, on 2026-11-29. Looked at before: each table's size, columns,",
    "label counts and the counts of the levels used to cut batches, and (`--check`) each batch's class counts.",
    "",
    "**Why a second trial.** The first (`decisions_heldout_champion.md`, 18 sequences from six other tables) found",
    "the mechanism working — the champion's estimate minus its accuracy fell from +0.122 to +0.032 — and revision 5",
    "missing 5 improvements against 8, but promoting once harmfully (−0.036 at P = 0.92) against none. Its rule",
    "(harmful(rev5) ≤ harmful(rev4)) rejected it on that one decision. This trial's rule was written after seeing",
    "that outcome, so it is judged on new tables only, and its harmful bound is issue 27's own (≤ 2 per 100), not",
    "the shipped gate's count: a bound the first trial's 1 of 53 (1.9 per 100) would have met. That choice is",
    "stated here, before the run, because it was made knowing the first trial.",
    "",
    "**Gates**, replayed side by side on the same sequences (`replicate_decisions.run_sequence`, seed 0, learners",
    "LR, NB, DT, HGB, budget min(50, rows / 2) labels per labels path, filled with the batch's true labels), as in",
    "the first trial:",
    "",
    "* `rev4`: what ships (revision 4 of the gate; undecided and step 4 ask for the pair's labels);",
    "* `rev5`: `rev4`, with the champion's stored predictions from `heldout_champion_predictions(new.stored,",
    "  champion on today's source rows, champion on the batch)`, `shared_source=True`, and its reach judged by",
    "  today's source (`champion_auc = new_auc`). Where the champion's classes differ from the new version's,",
    "  revision 4's estimate stands.",
    "",
    "**Sequences** (18, `SEQUENCES`), from six tables no script, report or sweep of this repository had used:",
    "AER DoctorVisits (label: any doctor visit), wooldridge crime1 (label: arrested in 1986; the arrest counts",
    "dropped), wooldridge fertil2 (label: ever used contraception; rows without it dropped), Ecdat Schooling (label:",
    "enrolled in 1976; the 1976 wage dropped), Ecdat Treatment (label: any earnings in 1978; those earnings",
    "dropped), AER Medicaid1986 (label: the programme, SSI or AFDC); cut in time order (1), by a numeric feature's",
    "range (11) or with the first batch from another group (stale, 6), as `replicate_decisions` cuts them.",
    "",
    "**Measures** per gate, as `reports/decisions.md` counts them: harmful promotions (Δ < −0.01), missed",
    "improvements (not promoted, Δ > 0.01; a night still undecided after labels counts as not promoted), per 100",
    "decisions; undecided; labels asked.",
    "",
    "**Adopt revision 5** (the flow estimates the served champion on today's source rows it was never fitted on,",
    "where there are such rows) iff, counted over all decisions of this run, missed(rev5) < missed(rev4) and",
    "harmful(rev5) ≤ 2 per 100 decisions. Otherwise the champion keeps its stored estimate. Both trials pooled are",
    "reported beside, and judge nothing.",
]


def verdict(c: pd.DataFrame) -> str:
    return bounded_verdict(c, 5, "rev5", "rev4")


def main(argv: list[str] | None = None) -> int:
    return run_study(FreshStudy(TABLES, SEQUENCES, QUICK_SEQUENCES, GATES, "decisions_heldout_champion2",
                                "Second trial: the served champion estimated on today's labeled rows it never saw "
                                "(issue 27)", RULE_MD, verdict), argv, __doc__.split("\n")[0])


if __name__ == "__main__":
    sys.exit(main())
