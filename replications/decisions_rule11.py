"""Issue 27: revision 11 of the gate (the majority-class rule in place of a one-class champion in the pair plan,
``shiftlib.decisions.RULE_CONTENDER = 'one_class'``) against revision 5 (what ships: the pair plan of the new version
and the champion), on five tables no replay, replication or sweep has used. The rule (``RULE_MD``) was committed
with this script before any run of it other than ``--check``.

Run from the repository root::

    nice python -m replications.decisions_rule11            # full run
    nice python -m replications.decisions_rule11 --check    # each batch's class counts only
    nice python -m replications.decisions_rule11 --quick    # smoke run (2 short sequences, LR/NB/DT)
    nice python -m replications.decisions_rule11 --insample # the two sequences that motivated it (reported only)

Writes ``reports/decisions_rule11.md`` and ``reports/decisions_rule11_nights.csv`` (``--quick``: ``*_quick*``).
"""

from __future__ import annotations

import sys

import pandas as pd

import replications.replicate_decisions as R
from replications._common import rdata
from replications.decisions_fresh import FreshStudy, run_study
from replications.decisions_pooled import TOL
from replications.decisions_rule import scored as rule10_scored
from replications.decisions_unsure import _derived
from replications.replicate_decisions import SeqSpec, _lv

#: table → (loader, label column, columns never used as features: those that give the label — big9salary's other
#: ranks, jtrain3's 1978 earnings and employment (the label is unemployment in 1978) — and row ids)
TABLES = {
    "big9salary": (lambda: rdata("wooldridge", "big9salary").dropna(subset=["prof"]), "prof",
                   ("id", "assist", "assoc")),
    "apple": (lambda: _derived("wooldridge", "apple", "eco_buyer", ("ecolbs", 0.01), "yes", "no"), "eco_buyer",
              ("id",)),
    "wage2": (lambda: rdata("wooldridge", "wage2"), "urban", ()),
    "jtrain3": (lambda: rdata("wooldridge", "jtrain3"), "unem78", ("re78", "em78")),
    "smoke": (lambda: _derived("wooldridge", "smoke", "smoker", ("cigs", 1), "yes", "no"), "smoker", ()),
}

SEQUENCES: tuple[SeqSpec, ...] = (
    SeqSpec("big9salary_by_year", "time", "big9salary", ("by", "year"), n=120, k=3, drop=("year", "y92", "y95", "y99")),
    SeqSpec("big9salary_by_publications", "range", "big9salary", ("by", "pubindx"), n=120),
    SeqSpec("big9salary_by_experience", "range", "big9salary", ("by", "exper"), n=120),
    SeqSpec("apple_by_family_income", "range", "apple", ("by", "faminc"), n=130),
    SeqSpec("apple_by_age", "range", "apple", ("by", "age"), n=130),
    SeqSpec("apple_by_eco_price", "range", "apple", ("by", "ecoprc"), n=130),
    SeqSpec("wage2_by_iq", "range", "wage2", ("by", "IQ"), n=180),
    SeqSpec("wage2_by_schooling", "range", "wage2", ("by", "educ"), n=180),
    SeqSpec("wage2_north_then_south", "stale", "wage2", ("levels", "south", _lv("0", "1", "1", "1")), n=80, k=4),
    SeqSpec("jtrain3_by_age", "range", "jtrain3", ("by", "age")),
    SeqSpec("jtrain3_by_1975_earnings", "range", "jtrain3", ("by", "re75")),
    SeqSpec("jtrain3_white_then_black", "stale", "jtrain3", ("levels", "black", _lv("0", "1", "1", "1")), n=190, k=4),
    SeqSpec("smoke_by_age", "range", "smoke", ("by", "age"), n=160),
    SeqSpec("smoke_by_income", "range", "smoke", ("by", "income"), n=160),
    SeqSpec("smoke_by_cigarette_price", "range", "smoke", ("by", "cigpric"), n=160),
)

QUICK_SEQUENCES = ("big9salary_by_publications", "smoke_by_age")
GATES = ("rev5", "rev11")

RULE_MD = [
    "## The rule (fixed before the run)",
    "",
    "Committed with this script before its first run, on 2026-11-29, after revision 10's result",
    "(`reports/decisions_rule.md`). Looked at before: each table's size, columns, missing cells and label rates,",
    "and (`--check`) each batch's class counts.",
    "",
    "**Question.** Revision 10 (the rule a third contender of every pair plan) stopped both promotions below the",
    "rule in its trial but split the labels three ways, and missed 3 improvements of its own against 1: not kept.",
    "The promotions below the rule seen so far with labels came beside a champion that predicts one class",
    "(helper-35's RetSchool; in the committed replays, doctorcontacts_by_age night 4, 0.555 against the rule's",
    "0.760, and aids2_by_diag night 4, 0.565 against 0.820, both beside a one-class champion). Revision 11 puts the",
    "rule in place of such a champion in the pair plan (it may not serve, and it is a constant rule itself), so the",
    "labels weigh the new version against the rule alone, as for a first version (`gate(..., rule_labels=...)`",
    "without `labels`); beside any other champion the pair plan is unchanged. On tables no replay has used, does",
    "it cost anything?",
    "",
    "**Gates**, replayed side by side on the same sequences (`replicate_decisions.run_sequence`, seed 0, learners",
    "LR, NB, DT, HGB, budget min(50, rows / 2) labels per labels path, filled with the batch's true labels):",
    "`rev5` (what ships) and `rev11`. Their label-free decisions are the same; they differ only on nights that ask",
    "for labels beside a champion that predicts one class on ≥ 99 % of the batch.",
    "",
    "**Sequences** (15, `SEQUENCES`) from five wooldridge tables no script, report or sweep of this repository had",
    "used: big9salary (label: full professor; rows without a rank dropped, the other ranks and the id dropped; a",
    "panel of three years, cut by year once), apple (label: bought",
    "eco-labelled apples, from ecolbs > 0; ecolbs and the id dropped), wage2 (label: lives in an urban area), jtrain3 (label:",
    "unemployed in 1978; 1978 earnings and employment dropped), smoke (label: smokes, from cigs ≥ 1; cigs",
    "dropped); cut in time order (1), by a numeric feature's range (12) or with the first batch from another group",
    "(stale, 2), as",
    "`replicate_decisions` cuts them. (Injury, k401ksubs, recid, fertil2 and affairs were first written here and replaced",
    "before any run but `--check`, on finding that a replay or sweep had used them.)",
    "",
    "**Measures** per gate on whole rows (`decisions_pooled.on_rows`, `TOL`), as `reports/decisions_rule.md`",
    "counts them: harmful promotions, missed improvements, mandated and own misses, promotions below the rule",
    "(a promoted version truly more than 0.01 below the rule's accuracy on the batch), labels asked; and the nights",
    "where revision 11 put the rule in a champion's place.",
    "",
    "**Adopt revision 11** (`RULE_CONTENDER = 'one_class'`) iff, counted over all decisions of this run:",
    "promotions below the rule(rev11) ≤ those of rev5, harmful(rev11) ≤ harmful(rev5), and own misses(rev11) ≤ own",
    "misses(rev5). Otherwise `RULE_CONTENDER` stays `never`. Revision 5 and 11 rerun on the committed replays",
    "where a one-class champion's labels were asked are reported beside it only; they do not decide.",
]


def scored(nights: pd.DataFrame) -> pd.DataFrame:
    """Per gate: ``decisions_rule.scored`` (counts on whole rows, promotions below the rule) and the nights whose
    labels weighed the new version against the rule in a one-class champion's place."""
    d = nights.assign(stood_in=nights.label_difference.isna()
                      & nights.get("rule_label_difference", pd.Series(index=nights.index)).notna())
    stood = d.groupby("gate", sort=False).stood_in.sum().rename("rule stood in").reset_index()
    return rule10_scored(nights).merge(stood, on="gate")


def verdict(nights: pd.DataFrame) -> str:
    """The rule's verdict on this run's nights, with the counts table."""
    c = scored(nights)
    g = c.set_index("gate")
    n = int(g.loc["rev11", "decisions"])
    adopt = (g.loc["rev11", "below rule"] <= g.loc["rev5", "below rule"]
             and g.loc["rev11", "harmful"] <= g.loc["rev5", "harmful"]
             and g.loc["rev11", "own misses"] <= g.loc["rev5", "own misses"])
    return (f"**{'Adopt' if adopt else 'Do not adopt'} revision 11** by the rule: promotions below the rule "
            f"{g.loc['rev11', 'below rule']} vs {g.loc['rev5', 'below rule']}, harmful {g.loc['rev11', 'harmful']} vs "
            f"{g.loc['rev5', 'harmful']}, own misses {g.loc['rev11', 'own misses']} vs {g.loc['rev5', 'own misses']} "
            f"(of {n} decisions each); the rule stood in for a one-class champion on "
            f"{g.loc['rev11', 'rule stood in']} nights; labels asked {g.loc['rev11', 'labels']} vs "
            f"{g.loc['rev5', 'labels']}.\n\n" + R.md_table(c))


def insample_study() -> FreshStudy:
    """The two committed replay sequences whose labels promoted a version below the rule beside a one-class
    champion (``decisions_fresh``'s aids2_by_diag, ``decisions_unsure``'s doctorcontacts_by_age), rerun with both
    gates: reported beside the rule's run, deciding nothing (``--insample``)."""
    from replications.decisions_fresh import FRESH_SEQUENCES, FRESH_TABLES
    from replications.decisions_unsure import SEQUENCES as UNSURE_SEQUENCES
    from replications.decisions_unsure import TABLES as UNSURE_TABLES

    seqs = tuple(s for s in (*FRESH_SEQUENCES, *UNSURE_SEQUENCES) if s.name in ("aids2_by_diag", "doctorcontacts_by_age"))
    tables = {"aids2": FRESH_TABLES["aids2"], "doctorcontacts": UNSURE_TABLES["doctorcontacts"]}
    return FreshStudy(tables, seqs, (), GATES, "decisions_rule11_insample",
                      "Revision 11 on the two replay sequences that motivated it (in-sample, reported only)",
                      ["Reported only: these sequences were seen before revision 11 was written; the rule's run is",
                       "`reports/decisions_rule11.md`."], verdict, tol=TOL, by_nights=True,
                      command="python -m replications.decisions_rule11 --insample")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--insample" in argv:
        argv.remove("--insample")
        return run_study(insample_study(), argv, "revision 11 rerun in-sample")
    return run_study(FreshStudy(TABLES, SEQUENCES, QUICK_SEQUENCES, GATES, "decisions_rule11",
                                "The majority-class rule in place of a one-class champion in the pair plan (issue 27)",
                                RULE_MD, verdict, tol=TOL, by_nights=True), argv, __doc__.split("\n")[0])


if __name__ == "__main__":
    sys.exit(main())
