"""replications/replicate_decisions.py: the batch construction by hand (fast), and (slow) a --quick run whose
report lines recount its own CSV and whose decisions follow each gate's rule."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from replications.replicate_decisions import SeqSpec, apply_schema, batch_rows


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


@pytest.mark.slow
def test_quick_run_follows_each_gate_and_reports_its_own_rows(tmp_path):
    from replications.replicate_decisions import main

    assert main(["--quick", "--out", str(tmp_path)]) == 0
    n = pd.read_csv(tmp_path / "decisions_quick_nights.csv")
    report = (tmp_path / "decisions_quick.md").read_text()
    assert set(n.gate) == {"today", "new"} and n.groupby(["sequence", "night"]).size().eq(2).all()
    comp = n[~n.schema_change & (n.decision != "error")]
    today = comp[comp.gate == "today"]
    # today's gate: promoted exactly when the new version's CV beats the incumbent recipe's (a tie keeps)
    assert ((today.decision == "promoted") == (today.cv_new > today.cv_incumbent_recipe)).all()
    # what serves after: the new version when promoted, the champion otherwise
    prom = comp.decision == "promoted"
    assert np.allclose(comp.acc_after[prom], comp.acc_new[prom])
    assert np.allclose(comp.acc_after[~prom], comp.acc_champion[~prom])
    # labels: min(50, rows/2) per undecided decision, none otherwise
    assert (n.labels_asked == np.where(n.decision == "undecided", np.minimum(50, n.n_target // 2), 0)).all()
    # a schema change is refused by both gates on the same night
    sc = n[n.schema_change]
    assert len(sc) == 2 and set(sc.decision) == {"refused"}
    # the gate is given each model's domain AUC (revision 2) and the CSV records both
    new_rows = comp[comp.gate == "new"]
    assert new_rows[["new_auc", "champion_auc"]].notna().all().all()
    assert new_rows[["new_auc", "champion_auc"]].apply(lambda s: s.between(0, 1)).all().all()
    # the answer's first two lines recount the CSV
    lines = report.split("## Answer")[1].split("\n")
    for g, label in (("today", "today's gate"), ("new", "revision 2")):
        c = comp[comp.gate == g]
        harmful = int(((c.decision == "promoted") & (c.acc_after - c.acc_champion < -0.01)).sum())
        missed = int(((c.decision != "promoted") & (c.acc_new - c.acc_champion > 0.01)).sum())
        assert f"{label} {100 * harmful / len(c):.1f} ({harmful}/{len(c)})" in next(x for x in lines if x.startswith("1."))
        assert f"{label} {100 * missed / len(c):.1f} ({missed}/{len(c)})" in next(x for x in lines if x.startswith("2."))
    assert report.index("## Answer") < report.index("## The rule") < report.index("## Revision 2") \
        < report.index("## Results")
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
