"""Issue 27: a first version (no champion yet) whose source reaches the batch. Revisions 1–7 promote it on any
positive estimated margin over the majority-class rule; revision 8 (``shiftlib.decisions.FIRST_MARGIN``) promotes
it only when P(more accurate than the rule on the batch) ≥ ``promote_confidence``, P read off the resampled margin
(``shiftlib.decisions.p_beats_rule``), and otherwise leaves it ``undecided`` until the pair's labels decide.
Replayed on sequences from six tables no replay, replication or sweep has used. The rule (``RULE_MD``) was
committed before any run of this script.

Run from the repository root::

    nice python -m replications.decisions_margin            # full run
    nice python -m replications.decisions_margin --check    # each batch's class counts only
    nice python -m replications.decisions_margin --quick    # smoke run (2 short sequences, LR/NB/DT)

Writes ``reports/decisions_margin.md`` and ``reports/decisions_margin_nights.csv`` (``--quick``: ``*_quick*``).
"""

from __future__ import annotations

import sys

import pandas as pd

from replications._common import rdata
from replications.decisions_first import GAP, FirstStudy, run_study, summary
from replications.replicate_decisions import SeqSpec, _lv


def _hiv() -> pd.DataFrame:
    return rdata("causaldata", "thornton_hiv").dropna(subset=["got"])


#: table → (loader, label column, columns never used as features: ids and columns that tell the label —
#: monica's "hospitalised" (most deaths happen before hospital), nhefs's year, month and day of death and its
#: constant censoring flag, CES11's survey weight and province population, UnempDur's spell length and the other
#: censoring indicators of the same spell)
TABLES = {
    "monica": (lambda: rdata("DAAG", "monica"), "outcome", ("hosp",)),
    "nhefs": (lambda: rdata("causaldata", "nhefs_complete"), "death",
              ("seqn", "id", "yrdth", "modth", "dadth", "censored")),
    "ces11": (lambda: rdata("carData", "CES11"), "abortion", ("id", "weight", "population")),
    "unempdur": (lambda: rdata("Ecdat", "UnempDur"), "censor1", ("spell", "censor2", "censor3", "censor4")),
    "hiv": (_hiv, "got", ()),
    "beps": (lambda: rdata("carData", "BEPS"), "vote", ()),
}

SEQUENCES: tuple[SeqSpec, ...] = (
    SeqSpec("monica_by_year_of_onset", "time", "monica", ("by", "yronset"), n=300, drop=("yronset",)),
    SeqSpec("monica_by_age", "range", "monica", ("by", "age"), n=300),
    SeqSpec("nhefs_by_age", "range", "nhefs", ("by", "age"), n=150),
    SeqSpec("nhefs_by_smoking_intensity", "range", "nhefs", ("by", "smokeintensity"), n=150),
    SeqSpec("ces11_by_province", "group", "ces11", ("levels", "province", _lv("ON", "QC", "BC", "MB", "SK")),
            n=100),
    SeqSpec("ces11_quebec_then_ontario", "stale", "ces11", ("levels", "province", _lv("QC", "ON", "ON", "ON", "ON")),
            n=100),
    SeqSpec("unempdur_by_age", "range", "unempdur", ("by", "age"), n=250),
    SeqSpec("unempdur_by_tenure", "range", "unempdur", ("by", "tenure"), n=250),
    SeqSpec("hiv_by_distance", "range", "hiv", ("by", "distvct"), n=300),
    SeqSpec("hiv_by_age", "range", "hiv", ("by", "age"), n=300),
    SeqSpec("beps_by_age", "range", "beps", ("by", "age"), n=150),
    SeqSpec("beps_by_europe", "range", "beps", ("by", "Europe"), n=150),
)

QUICK_SEQUENCES = ("nhefs_by_age", "beps_by_age")

#: the arms: revision 7 (what ships) and revision 8; revision 7's reach test stays on in both
ARMS: tuple[tuple[str, dict[str, bool]], ...] = (("rev7", {"first_reach": True, "first_margin": False}),
                                                 ("rev8", {"first_reach": True, "first_margin": True}))

RULE_MD = [
    "## The rule (fixed before the run)",
    "",
    "Committed with this script before any run of it, after revision 8 was implemented, on these grounds: step 5",
    "promotes over a champion only when P(better) ≥ `promote_confidence`, but a first version within reach was",
    "promoted on any positive label-free margin over the majority-class rule. helper-30's sweep found one such",
    "promotion on a margin of +0.002 (ISLR Hitters: estimated 0.581 against the rule's 0.579; truly 0.467 against",
    "0.542). No rows of earlier replays were read to choose revision 8 or this rule. Looked at before this run: each",
    "table's size, columns, label, missing values and the columns that tell the label, and `--check` (each batch's",
    "class counts).",
    "",
    "**Cases.** As `replications/decisions_first.py`: each night i = 1 … k − 1 of each sequence below is one first",
    "version: the replays' candidates (`replicate_decisions.LEARNERS`, 10 folds, discriminative weights) fitted on",
    "batch i − 1, the 10-fold CV-best one as the new version, batch i as the batch it would serve, and its domain",
    "AUC (`shiftlib.decisions.domain_auc`).",
    "",
    "**Arms.**",
    "* `rev7` (what ships): `gate(new, None, new_auc=…, first_margin=False)`.",
    "* `rev8`: `gate(new, None, new_auc=…, first_margin=True)`: within reach, promoted when P ≥ 0.9, refused when",
    "  P ≤ 0.1, else undecided.",
    "* In both, an `undecided` first version is settled as the flow settles it with what its closing report asks,",
    "  `--label-budget 50 --label-plan pair`, exactly as in `decisions_first.py` (`rule_pair_labels`: 50 rows",
    "  planned for the pair (new version, majority-class rule), filled with the batch's true labels, then",
    "  `gate(new, None, labels=…)`).",
    "",
    "**Truth and measures** as in `decisions_first.py`: *harmful* — a first version served whose accuracy on its",
    "batch is below the rule's (the batch's share of the source's largest class) by more than 0.01; *held back* —",
    "not served although more accurate than the rule by more than 0.01; labels asked; and, reported only, each arm",
    "without labels (its undecided versions never served).",
    "",
    "**Verdict.** Revision 8 ships (`FIRST_MARGIN = True`) if its harmful first promotions are fewer than revision",
    "7's and 2.5 × (harmful promotions avoided) ≥ (good first versions it holds back beyond revision 7's), the",
    "weighting of `decisions_first.py` (the ratio of the issue's bounds, 5 / 2). Otherwise, and if both have the",
    "same harmful count, `FIRST_MARGIN` stays False. Either way the numbers are reported.",
]


def verdict(d: pd.DataFrame) -> str:
    s = summary(d).set_index("arm")
    h7, h8, b7, b8 = (int(s.loc[a, c]) for a, c in (("rev7", "harmful"), ("rev8", "harmful"),
                                                       ("rev7", "held back"), ("rev8", "held back")))
    n = int(s.loc["rev8", "first versions"])
    ships = h8 < h7 and 2.5 * (h7 - h8) >= b8 - b7
    why = (f"harmful first promotions {h8} against {h7}, good first versions held back {b8} against {b7}, "
           f"in {n} first versions; labels asked {int(s.loc['rev8', 'labels asked'])} against "
           f"{int(s.loc['rev7', 'labels asked'])}")
    return (f"**Revision 8 ships (FIRST_MARGIN = True)** by the rule: {why}." if ships else
            f"**Revision 8 fails the rule; FIRST_MARGIN stays False**: {why}.")


def within_reach(d: pd.DataFrame) -> str:
    """The report's line on the first versions revision 8 is about: those within reach it leaves undecided."""
    within = d[(d.arm == "rev8") & (d.new_auc < 0.95)]
    held = within.decision_free == "undecided"
    return (f"First versions within reach (domain AUC < 0.95): {len(within)}; revision 8 left {int(held.sum())} of "
            f"them undecided without labels; of those, {int((held & (within.acc_new < within.rule_acc - GAP)).sum())} "
            f"were below the rule by more than {GAP} and {int((held & (within.acc_new > within.rule_acc + GAP)).sum())} "
            "above it by more than that.")


STUDY = FirstStudy(TABLES, SEQUENCES, QUICK_SEQUENCES, ARMS, "decisions_margin",
                   "First versions within the source's reach: promoted on any margin, or on P ≥ 0.9? "
                   "(issue 27, revision 8)", RULE_MD, verdict, within_reach)


def main(argv: list[str] | None = None) -> int:
    return run_study(STUDY, argv)


if __name__ == "__main__":
    sys.exit(main())
