"""Issue 27: revision 9 of the gate against what ships (revision 5). Step 1 refuses a new version whose estimated
margin over the majority-class rule is ≤ 0; revision 9 (``gate(..., unsure_margin='ask')``) refuses it only when
P(more accurate than the rule) ≤ 1 − confidence while a champion that beats the rule serves, and otherwise lets
the pair's labels decide. Replayed on sequences from six tables no replay, replication or sweep has used. The rule
(``RULE_MD``) was committed before any run of this script other than ``--check``.

Run from the repository root::

    nice python -m replications.decisions_unsure            # full run
    nice python -m replications.decisions_unsure --check    # each batch's class counts only
    nice python -m replications.decisions_unsure --quick    # smoke run (2 short sequences, LR/NB/DT)

Writes ``reports/decisions_unsure.md`` and ``reports/decisions_unsure_nights.csv`` (``--quick``: ``*_quick*``).
"""

from __future__ import annotations

import sys

import pandas as pd

from replications._common import rdata
from replications.decisions_fresh import FreshStudy, bounded_verdict, run_study
from replications.decisions_pooled import TOL
from replications.replicate_decisions import SeqSpec, _lv


def _derived(pkg: str, name: str, label: str, rule: tuple[str, float], yes: str, no: str) -> pd.DataFrame:
    """``pkg``/``name`` with a yes/no ``label`` from a numeric column (``rule`` = (column, threshold): yes when
    the column is ≥ the threshold); the column itself is dropped (it gives the label)."""
    d = rdata(pkg, name)
    col, at = rule
    return d.assign(**{label: (d[col] >= at).map({True: yes, False: no})}).drop(columns=[col])


#: table → (loader, label column, columns never used as features: those that give the label — ncbirths' birth
#: weight, smoking's amounts and type of tobacco, which are empty exactly for non-smokers)
TABLES = {
    "doctorcontacts": (lambda: _derived("Ecdat", "DoctorContacts", "visited", ("mdu", 1), "yes", "no"), "visited",
                       ()),
    "gpa2": (lambda: _derived("wooldridge", "gpa2", "gpa3", ("colgpa", 3.0), "yes", "no"), "gpa3", ()),
    "ncbirths": (lambda: rdata("openintro", "ncbirths").dropna(subset=["marital"]), "lowbirthweight", ("weight",)),
    "phd": (lambda: _derived("AER", "PhDPublications", "published", ("articles", 1), "yes", "no"), "published", ()),
    "ofp": (lambda: rdata("Ecdat", "OFP"), "privins", ()),
    "smoking": (lambda: rdata("openintro", "smoking"), "smoke", ("amt_weekends", "amt_weekdays", "type")),
}

SEQUENCES: tuple[SeqSpec, ...] = (
    SeqSpec("doctorcontacts_by_income", "range", "doctorcontacts", ("by", "linc")),
    SeqSpec("doctorcontacts_by_age", "range", "doctorcontacts", ("by", "age")),
    SeqSpec("doctorcontacts_men_then_women", "stale", "doctorcontacts",
            ("levels", "sex", _lv("male", "female", "female", "female", "female"))),
    SeqSpec("gpa2_by_sat", "range", "gpa2", ("by", "sat")),
    SeqSpec("gpa2_by_school_size", "range", "gpa2", ("by", "hsize")),
    SeqSpec("gpa2_men_then_women", "stale", "gpa2", ("levels", "female", _lv("0", "1", "1", "1", "1"))),
    SeqSpec("ncbirths_by_mother_age", "range", "ncbirths", ("by", "mage"), n=150),
    SeqSpec("ncbirths_married_then_not", "stale", "ncbirths",
            ("levels", "marital", _lv("married", "not married", "not married", "not married")), n=95, k=4),
    SeqSpec("phd_by_mentor", "range", "phd", ("by", "mentor"), n=150),
    SeqSpec("phd_by_prestige", "range", "phd", ("by", "prestige"), n=150),
    SeqSpec("ofp_by_age", "range", "ofp", ("by", "age")),
    SeqSpec("ofp_by_income", "range", "ofp", ("by", "faminc")),
    SeqSpec("ofp_by_region", "group", "ofp", ("levels", "region", _lv("other", "midwest", "noreast", "west")), k=4),
    SeqSpec("smoking_by_age", "range", "smoking", ("by", "age"), n=150),
    SeqSpec("smoking_by_region", "group", "smoking",
            ("levels", "region", _lv("Midlands & East Anglia", "The North", "South East", "London")), n=150, k=4),
    SeqSpec("smoking_women_then_men", "stale", "smoking",
            ("levels", "gender", _lv("Female", "Male", "Male", "Male", "Male")), n=140),
)

QUICK_SEQUENCES = ("phd_by_mentor", "smoking_women_then_men")
GATES = ("rev5", "rev9")

RULE_MD = [
    "## The rule (fixed before the run)",
    "",
    "Committed with this script before its first run, on 2026-11-29. Looked at before: each table's size, columns,",
    "dtypes, label counts and the counts of the levels used to cut batches, and (`--check`) each batch's class",
    "counts.",
    "",
    "**Question.** Pooled over every replay revision 5 (what ships) took part in (`reports/decisions_pooled.md`,",
    "counted on whole rows), 15 of its 35 missed improvements in 280 decisions were not mandated by build item 1,",
    "and 10 of those 15 were step 1's refusals of a new version estimated no more accurate than the majority-class",
    "rule that truly beat the rule by more than 0.01. The refusal reads the sign of a point estimate, where steps 2",
    "and 5 read P. Does refusing only when P(more accurate than the rule) ≤ 1 − confidence, and otherwise letting",
    "the pair's labels decide while a champion that beats the rule serves, miss fewer improvements on tables no",
    "replay has used, within issue 27's bound on harmful promotions?",
    "",
    "**Gates**, replayed side by side on the same sequences (`replicate_decisions.run_sequence`, seed 0, learners",
    "LR, NB, DT, HGB, budget min(50, rows / 2) labels per labels path, filled with the batch's true labels):",
    "",
    "* `rev5`: what ships (the champion estimated on today's source rows it never saw; undecided and step 4 ask for",
    "  the pair's labels);",
    "* `rev9`: `rev5` with `gate(..., unsure_margin='ask')`: a new version estimated no better than the rule, while",
    "  the champion passes step 4's guards, is refused only when P(more accurate than the rule) ≤ 0.1",
    "  (`p_beats_rule`); otherwise it is `undecided`, and the pair's labels decide as in step 5.",
    "",
    "**Sequences** (16, `SEQUENCES`), from six tables no script, report or sweep of this repository had used:",
    "Ecdat DoctorContacts (label: any doctor visit, from mdu ≥ 1, mdu dropped), wooldridge gpa2 (label: college",
    "GPA ≥ 3.0, colgpa dropped), openintro ncbirths (label: low birth weight; birth weight dropped; a row without",
    "marital status dropped), AER PhDPublications (label: at least one article, articles dropped), Ecdat OFP (label:",
    "private insurance), openintro smoking (label: smokes; the amounts and type of tobacco dropped); cut by a",
    "numeric feature's range (9), by a categorical column's levels (group, 2), or with the first batch from another",
    "group (stale, 4), as `replicate_decisions` cuts them; none in time order (none of these tables has a time",
    "column).",
    "",
    "**Measures** per gate, as `reports/decisions.md` counts them but on whole rows (a true change must pass 0.01 by",
    "more than 1e-9, `decisions_pooled.TOL`): harmful promotions (Δ < −0.01), missed improvements (not promoted,",
    "Δ > 0.01; a night still undecided after labels counts as not promoted), per 100 decisions; undecided; labels",
    "asked.",
    "",
    "**Adopt revision 9** (`shiftlib.decisions.UNSURE_MARGIN = 'ask'`) iff, counted over all decisions of this run,",
    "missed(rev9) < missed(rev5) and harmful(rev9) ≤ 2 per 100 decisions. Otherwise revision 5 stays. Reported",
    "beside, judging nothing: the pooled counts of `decisions_pooled` with this run's rev5 and rev9 rows.",
]


def verdict(c: pd.DataFrame) -> str:
    return bounded_verdict(c, 9, "rev9", "rev5")


def main(argv: list[str] | None = None) -> int:
    return run_study(FreshStudy(TABLES, SEQUENCES, QUICK_SEQUENCES, GATES, "decisions_unsure",
                                "A refusal on an unsure margin over the majority-class rule: let labels decide? "
                                "(issue 27)", RULE_MD, verdict, tol=TOL), argv, __doc__.split("\n")[0])


if __name__ == "__main__":
    sys.exit(main())
