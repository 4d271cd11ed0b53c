"""Issue 27: the gate as it ships (revision 4, ``rev4``: the served champion estimated from the out-of-fold
predictions of the source it was chosen on) against a revision 5 that estimates the champion as it is on today's
labeled source rows, which it was never fitted on (``rev5``: ``shiftlib.decisions.heldout_champion_predictions``),
replayed on sequences from six tables no replay or replication has used. The rule (``RULE_MD``) was committed
before any run of this script.

Run from the repository root::

    nice python -m replications.decisions_heldout_champion            # full run
    nice python -m replications.decisions_heldout_champion --check    # each batch's class counts only
    nice python -m replications.decisions_heldout_champion --quick    # smoke run (2 short sequences, LR/NB/DT)

Writes ``reports/decisions_heldout_champion.md`` and ``reports/decisions_heldout_champion_nights.csv``
(``--quick``: ``*_quick*``).
"""

from __future__ import annotations

import sys

import pandas as pd

from replications._common import rdata
from replications.decisions_fresh import FreshStudy, run_study
from replications.replicate_decisions import SeqSpec, _lv


def _mdvis() -> pd.DataFrame:
    d = rdata("COUNT", "mdvis")
    return d.assign(visited=(d["numvisit"] > 0).map({True: "yes", False: "no"})).drop(columns=["numvisit"])


#: table → (loader, label column, columns never used as features: ids, and columns that tell the label —
#: mgus2's follow-up times and progression, alcohol's labour-force status, loanapp's action and reject,
#: injury's pre-injury wage and what is computed from it)
TABLES = {
    "mgus2": (lambda: rdata("survival", "mgus2"), "death", ("id", "ptime", "pstat", "futime")),
    "alcohol": (lambda: rdata("wooldridge", "alcohol"), "employ", ("status", "inwf")),
    "nmes": (lambda: rdata("AER", "NMES1988"), "insurance", ()),
    "loanapp": (lambda: rdata("wooldridge", "loanapp"), "approve", ("action", "reject")),
    "injury": (lambda: rdata("wooldridge", "injury"), "highearn",
               ("prewage", "lprewage", "afhigh", "highlpre", "benefit")),
    "mdvis": (_mdvis, "visited", ()),
}

SEQUENCES: tuple[SeqSpec, ...] = (
    SeqSpec("mgus2_by_diagnosis_year", "time", "mgus2", ("by", "dxyr"), drop=("dxyr",)),
    SeqSpec("mgus2_by_age", "range", "mgus2", ("by", "age")),
    SeqSpec("mgus2_men_then_women", "stale", "mgus2", ("levels", "sex", _lv("M", "F", "F", "F", "F")), n=140),
    SeqSpec("alcohol_by_age", "range", "alcohol", ("by", "age")),
    SeqSpec("alcohol_by_education", "range", "alcohol", ("by", "educ")),
    SeqSpec("alcohol_by_unemployment_rate", "range", "alcohol", ("by", "unemrate")),
    SeqSpec("nmes_by_age", "range", "nmes", ("by", "age")),
    SeqSpec("nmes_by_income", "range", "nmes", ("by", "income")),
    SeqSpec("nmes_by_region", "group", "nmes", ("levels", "region", _lv("other", "midwest", "northeast", "west")),
            k=4),
    SeqSpec("loanapp_by_amount", "range", "loanapp", ("by", "loanamt")),
    SeqSpec("loanapp_by_income", "range", "loanapp", ("by", "appinc")),
    SeqSpec("loanapp_unmarried_then_married", "stale", "loanapp",
            ("levels", "married", _lv("0.0", "1.0", "1.0", "1.0", "1.0")), n=130),
    SeqSpec("injury_before_then_after_reform", "stale", "injury",
            ("levels", "afchnge", _lv("0", "1", "1", "1", "1"))),
    SeqSpec("injury_by_age", "range", "injury", ("by", "age")),
    SeqSpec("injury_michigan_then_kentucky", "stale", "injury", ("levels", "ky", _lv("0", "1", "1", "1", "1"))),
    SeqSpec("mdvis_before_then_after_reform", "stale", "mdvis", ("levels", "reform", _lv("0", "1", "1", "1", "1"))),
    SeqSpec("mdvis_by_age", "range", "mdvis", ("by", "age")),
    SeqSpec("mdvis_by_income", "range", "mdvis", ("by", "loginc")),
)

QUICK_SEQUENCES = ("mgus2_men_then_women", "mdvis_by_age")
GATES = ("rev4", "rev5")

RULE_MD = [
    "## The rule (fixed before the run)",
    "",
    "Committed with this script before its first run. Looked at before: each table's size, columns, label counts",
    "and the counts of the levels used to cut batches, and (`--check`) each batch's class counts.",
    "",
    "**Question.** On every replay so far the served champion's label-free estimate was optimistic, far more than",
    "the new version's: mean estimate − truth +0.065 against +0.023 (`decisions_nights.csv`, revision 3's nights",
    "with a champion estimate), +0.093 against +0.040 (`decisions_pair_nights.csv`), +0.163 against +0.002",
    "(`decisions_fresh_nights.csv`). The champion is estimated from the out-of-fold predictions of the source it",
    "was chosen on, whose labels are older than today's source; the new version from today's. In",
    "`decisions_fresh` 5 of its 11 missed improvements were kept by label-free P ≤ 0.1 with the champion's",
    "estimate 0.08–0.43 above its accuracy. Does estimating the champion as it is, on today's labeled source rows",
    "it was never fitted on (the same rows, folds and weights as the new version, resampled jointly), miss fewer",
    "improvements on tables no replay has used, without more harmful promotions?",
    "",
    "**Gates**, replayed side by side on the same sequences (`replicate_decisions.run_sequence`, seed 0, learners",
    "LR, NB, DT, HGB, budget min(50, rows / 2) labels per labels path, filled with the batch's true labels):",
    "",
    "* `rev4`: what ships (revision 4 of the gate; undecided and step 4 ask for the pair's labels);",
    "* `rev5`: `rev4`, with the champion's stored predictions from `heldout_champion_predictions(new.stored,",
    "  champion on today's source rows, champion on the batch)`, `shared_source=True`, and its reach judged by",
    "  today's source (`champion_auc = new_auc`). Where the champion's classes differ from the new version's,",
    "  revision 4's estimate stands.",
    "",
    "**Sequences** (18, `SEQUENCES`): survival mgus2, wooldridge alcohol, AER NMES1988, wooldridge loanapp,",
    "wooldridge injury, COUNT mdvis (label: any doctor visit), cut in time order (1), by a numeric feature's",
    "range (11), by a categorical column's levels (1) or with the first batch from another group or period",
    "(stale, 5), as `replicate_decisions` cuts them.",
    "",
    "**Measures** per gate, as `reports/decisions.md` counts them: harmful promotions (Δ < −0.01), missed",
    "improvements (not promoted, Δ > 0.01; a night still undecided after labels counts as not promoted), per 100",
    "decisions; undecided; labels asked.",
    "",
    "**Adopt revision 5** (the flow estimates the served champion on today's source rows it was never fitted on,",
    "where there are such rows) iff missed(rev5) < missed(rev4) and harmful(rev5) ≤ harmful(rev4), counted over",
    "all decisions. Otherwise the champion keeps its stored estimate.",
]


def verdict(c: pd.DataFrame) -> str:
    g = c.set_index("gate")
    adopt = g.loc["rev5", "missed"] < g.loc["rev4", "missed"] and g.loc["rev5", "harmful"] <= g.loc["rev4", "harmful"]
    return (f"**{'Adopt' if adopt else 'Do not adopt'} revision 5** by the rule: missed {g.loc['rev5', 'missed']} vs "
            f"{g.loc['rev4', 'missed']}, harmful {g.loc['rev5', 'harmful']} vs {g.loc['rev4', 'harmful']} "
            f"(of {g.loc['rev5', 'decisions']} decisions each), labels asked {g.loc['rev5', 'labels']} vs "
            f"{g.loc['rev4', 'labels']}.")


def main(argv: list[str] | None = None) -> int:
    return run_study(FreshStudy(TABLES, SEQUENCES, QUICK_SEQUENCES, GATES, "decisions_heldout_champion",
                                "The served champion estimated on today's labeled rows it never saw (issue 27)",
                                RULE_MD, verdict), argv, __doc__.split("\n")[0])


if __name__ == "__main__":
    sys.exit(main())
