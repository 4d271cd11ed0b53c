"""Issue 27: a first version (no champion yet) estimated no more accurate than the majority-class rule, without
target labels. Revisions 1–11 refuse it on the sign of its label-free margin over the rule; revision 12
(``shiftlib.decisions.FIRST_UNSURE``) weighs that margin as step 2 weighs a positive one: within the source's reach
by P(more accurate than the rule) (refused only when P ≤ 1 − ``promote_confidence``, else ``undecided`` until the
labels of the pair (it, the rule) decide), beyond it ``undecided``. Replayed on sequences from six tables no
replay, replication or sweep has used. The rule (``RULE_MD``) was committed before any run of this script.

Run from the repository root::

    nice python -m replications.decisions_first_unsure            # full run
    nice python -m replications.decisions_first_unsure --check    # each batch's class counts only
    nice python -m replications.decisions_first_unsure --quick    # smoke run (2 short sequences, LR/NB/DT)

Writes ``reports/decisions_first_unsure.md`` and ``reports/decisions_first_unsure_nights.csv`` (``--quick``:
``*_quick*``).
"""

from __future__ import annotations

import sys

import pandas as pd

from replications._common import rdata
from replications.decisions_first import GAP, FirstStudy, run_study, summary
from replications.replicate_decisions import SeqSpec, _lv


def _stops() -> pd.DataFrame:
    return rdata("carData", "MplsStops").dropna(subset=["personSearch"])


def _vocab() -> pd.DataFrame:
    return rdata("carData", "GSSvocab").dropna(subset=["nativeBorn"])


#: table → (loader, label column, columns never used as features: ids, survey weights and columns that tell the
#: label — HI's survey weight, MplsStops' stop id and its citation flag (missing on 63 % of the stops; its date, unique per stop, is the time order), cps91's
#: hours, earnings and wages, which are 0 or missing exactly when the wife is out of the labour force)
TABLES = {
    "hi": (lambda: rdata("Ecdat", "HI"), "whi", ("wght",)),
    "star": (lambda: rdata("Ecdat", "Star"), "freelunk", ()),
    "vietnam": (lambda: rdata("Ecdat", "VietNamI"), "insurance", ()),
    "mplsstops": (_stops, "personSearch", ("idNum", "citationIssued")),
    "gssvocab": (_vocab, "nativeBorn", ()),
    "cps91": (lambda: rdata("wooldridge", "cps91"), "inlf", ("hours", "earns", "hrwage", "lwage")),
}

SEQUENCES: tuple[SeqSpec, ...] = (
    SeqSpec("hi_by_region", "group", "hi", ("levels", "region", _lv("northcentral", "south", "west", "other",
                                                                     "south")), n=200),
    SeqSpec("hi_by_experience", "range", "hi", ("by", "experience"), n=200),
    SeqSpec("star_by_school", "group", "star", ("by", "schidkn"), n=200, drop=("schidkn",)),
    SeqSpec("star_by_reading_score", "range", "star", ("by", "treadssk"), n=200),
    SeqSpec("vietnam_by_commune", "group", "vietnam", ("by", "commune"), n=200, drop=("commune",)),
    SeqSpec("vietnam_by_age", "range", "vietnam", ("by", "age"), n=200),
    SeqSpec("mplsstops_by_date", "time", "mplsstops", ("by", "date"), n=200, drop=("date",)),
    SeqSpec("mplsstops_by_precinct", "group", "mplsstops", ("levels", "policePrecinct", _lv("1", "2", "3", "4", "5")), n=200,
            drop=("date",)),
    SeqSpec("gssvocab_by_year", "time", "gssvocab", ("by", "year"), n=200, drop=("year",)),
    SeqSpec("gssvocab_by_age", "range", "gssvocab", ("by", "age"), n=200),
    SeqSpec("cps91_by_age", "range", "cps91", ("by", "age"), n=200),
    SeqSpec("cps91_by_husband_earnings", "range", "cps91", ("by", "husearns"), n=200),
)

QUICK_SEQUENCES = ("hi_by_experience", "cps91_by_age")

#: the arms: revision 8 (what ships: the reach test and P for a positive margin) and revision 12
ARMS: tuple[tuple[str, dict[str, bool]], ...] = (
    ("rev8", {"first_reach": True, "first_margin": True, "first_unsure": False}),
    ("rev12", {"first_reach": True, "first_margin": True, "first_unsure": True}))

RULE_MD = [
    "## The rule (fixed before the run)",
    "",
    "Committed with this script before any run of it but `--check`, after revision 12 was implemented, on these",
    "grounds: a first version estimated +0.007 over the majority-class rule is left `undecided` and asks for labels",
    "(revision 8), one estimated −0.007 is refused and asks for nothing, though both are equally unsure. On",
    "2026-11-29 a first version of Ecdat Housing (cut by lot size) was refused at −0.007; with 50 labels the flow",
    "then promoted a model 0.159 ± 0.079 above the rule; helper-36 saw one refused at +0.000 that was truly 0.043",
    "above the rule. No rows of earlier replays were read to choose revision 12 or this rule. Looked at before this",
    "run: each table's size, columns, label counts, missing values and the levels of the columns the batches are",
    "cut by, and `--check` (each batch's class counts).",
    "",
    "**Cases.** As `replications/decisions_first.py`: each night i = 1 … k − 1 of each sequence below is one first",
    "version: the replays' candidates (`replicate_decisions.LEARNERS`, 10 folds, discriminative weights) fitted on",
    "batch i − 1, the 10-fold CV-best one as the new version, batch i as the batch it would serve, and its domain",
    "AUC (`shiftlib.decisions.domain_auc`).",
    "",
    "**Arms.**",
    "* `rev8` (what ships): `gate(new, None, new_auc=…)` with `first_reach`, `first_margin`, not `first_unsure`.",
    "* `rev12`: the same with `first_unsure=True`.",
    "* In both, an `undecided` first version is settled as the flow settles it with what its closing report asks,",
    "  `--label-budget 50 --label-plan pair`, exactly as in `decisions_first.py` (`rule_pair_labels`: 50 rows",
    "  planned for the pair (new version, majority-class rule), filled with the batch's true labels, then",
    "  `gate(new, None, labels=…)`, where the labels decide in place of a refusal on the margin:",
    "  `FIRST_LABELS_DECIDE`). A refused version is not served and asks for nothing.",
    "",
    "**Truth and measures** as in `decisions_first.py`: *harmful* — a first version served whose accuracy on its",
    "batch is below the rule's (the batch's share of the source's largest class) by more than 0.01; *held back* —",
    "not served although more accurate than the rule by more than 0.01; labels asked; and, reported only, each arm",
    "without labels (its undecided versions never served).",
    "",
    "**Verdict.** Revision 12 ships (`FIRST_UNSURE = True`) if it holds back fewer good first versions than",
    "revision 8 and 2.5 × (its harmful first promotions beyond revision 8's) < (good first versions it serves that",
    "revision 8 held back), the weighting of `decisions_first.py` (the ratio of the issue's bounds, 5 / 2).",
    "Otherwise `FIRST_UNSURE` stays False. Either way the numbers are reported, and the labels it asks for.",
]


def verdict(d: pd.DataFrame) -> str:
    s = summary(d).set_index("arm")
    h8, h12, b8, b12 = (int(s.loc[a, c]) for a, c in (("rev8", "harmful"), ("rev12", "harmful"),
                                                         ("rev8", "held back"), ("rev12", "held back")))
    n = int(s.loc["rev12", "first versions"])
    ships = b12 < b8 and 2.5 * (h12 - h8) < b8 - b12
    why = (f"good first versions held back {b12} against {b8}, harmful first promotions {h12} against {h8}, "
           f"in {n} first versions; labels asked {int(s.loc['rev12', 'labels asked'])} against "
           f"{int(s.loc['rev8', 'labels asked'])}")
    return (f"**Revision 12 ships (FIRST_UNSURE = True)** by the rule: {why}." if ships else
            f"**Revision 12 fails the rule; FIRST_UNSURE stays False**: {why}.")


def unsure(d: pd.DataFrame) -> str:
    """The report's line on the first versions revision 12 is about: refused by revision 8 on the margin."""
    on_margin = d[(d.arm == "rev8") & (d.decision_free == "refused")
                  & d.reason_free.str.startswith("it is estimated no more accurate than the majority-class rule")]
    r12 = d[d.arm == "rev12"].set_index(["sequence", "night"]).loc[list(zip(on_margin.sequence, on_margin.night,
                                                                            strict=True))]
    return (f"First versions revision 8 refused on the margin: {len(on_margin)}; of them "
            f"{int((on_margin.acc_new > on_margin.rule_acc + GAP).sum())} truly above the rule by more than {GAP} and "
            f"{int((on_margin.acc_new < on_margin.rule_acc - GAP).sum())} below it by more than that. Revision 12 left "
            f"{int((r12.decision_free == 'undecided').sum())} of them undecided without labels and served "
            f"{int((r12.decision == 'promoted').sum())} after the labels.")


STUDY = FirstStudy(TABLES, SEQUENCES, QUICK_SEQUENCES, ARMS, "decisions_first_unsure",
                   "First versions estimated no better than the majority-class rule: refused on the sign, or weighed "
                   "by P? (issue 27, revision 12)", RULE_MD, verdict, unsure)


def main(argv: list[str] | None = None) -> int:
    return run_study(STUDY, argv)


if __name__ == "__main__":
    sys.exit(main())
