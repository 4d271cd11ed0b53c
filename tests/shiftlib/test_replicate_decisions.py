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
    # the answer's first two lines recount the CSV
    for g, label in (("today", "today's gate"), ("new", "new gate")):
        c = comp[comp.gate == g]
        harmful = int(((c.decision == "promoted") & (c.acc_after - c.acc_champion < -0.01)).sum())
        missed = int(((c.decision != "promoted") & (c.acc_new - c.acc_champion > 0.01)).sum())
        assert f"{label} {100 * harmful / len(c):.1f} ({harmful}/{len(c)})" in report
        assert f"{label} {100 * missed / len(c):.1f} ({missed})" in report
    assert report.index("## Answer") < report.index("## The rule") < report.index("## Results")
