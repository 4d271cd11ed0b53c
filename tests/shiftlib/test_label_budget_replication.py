"""The label-budget study (replications/replicate_label_budget.py) end to end in its --quick form (slow):
every pre-declared selector at every budget, the labels each one saw, and the report's verdict lines
following from its own CSV (pooled pairwise-order accuracy recounted here)."""

from __future__ import annotations

import pandas as pd
import pytest


@pytest.mark.slow
def test_quick_label_budget_study_is_consistent_with_its_rows(tmp_path):
    from replications.replicate_label_budget import BUDGETS, SELECTORS, main

    assert main(["--quick", "--out", str(tmp_path)]) == 0
    df = pd.read_csv(tmp_path / "label_budget_quick.csv")
    report = (tmp_path / "label_budget_quick.md").read_text()
    assert set(df.group) == {"natural", "trcv_pairs", "feature_bias"}
    for (_, _), g in df.groupby(["case", "seed"]):
        assert set(zip(g.selector, g.budget, strict=True)) == {(s, b) for s in SELECTORS for b in BUDGETS}
        by = g.set_index(["selector", "budget"])
        for b in BUDGETS:
            assert by.at[("uniform", b), "n_labels"] == b  # b rows drawn at random
            # the plan's rows: at most b, and every fewlabel variant and cv_lp saw the same ones
            n = by.at[("fewlabel", b), "n_labels"]
            assert n <= b and n <= by.at[("fewlabel", b), "n_disagreement"]
            for s in ("fewlabel_guard", "fewlabel_guard_ls", "fewlabel_guard_lp", "fewlabel_dm", "fewlabel_guard_dm",
                      "fewlabel_guard_dmc", "fewlabel_hh", "fewlabel_guard_hh", "fewlabel_guard_dm_hh", "trcv_l", "cv_lp"):
                assert by.at[(s, b), "n_labels"] == n
            assert by.at[("cv", b), "n_labels"] == by.at[("cv_ls", b), "n_labels"] == 0
        # the label-free selectors answer the same at every budget
        for s in ("cv", "cv_ls"):
            assert g[g.selector == s].pairwise_correct.nunique() == 1
    # the verdict's numbers are the pooled accuracy of the CSV's rows
    for (grp, sel, b), g in df.groupby(["group", "selector", "budget"]):
        if sel in ("fewlabel_guard", "cv") and b == 100:
            acc = g.pairwise_correct.sum() / g.pairwise_counted.sum()
            assert f"{acc:.3f}" in report, (grp, sel, acc)
    assert "Third rule (fewlabel_guard_ls)" in report and "Fourth rule (fewlabel_guard_lp)" in report
    assert "Fifth rule (fewlabel_guard_dm)" in report and "Fifth rule (fewlabel_guard_dmc)" in report
    assert "Sixth rule (fewlabel_guard_hh)" in report and "Sixth rule (fewlabel_guard_dm_hh)" in report
