"""The label-budget study (replications/replicate_label_budget.py) end to end in its --quick form (slow):
every pre-declared selector at every budget, the labels each one saw, and the report's verdict lines
following from its own CSV (pooled pairwise-order accuracy recounted here)."""

from __future__ import annotations

from collections.abc import Iterator

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


def _fresh_runs(tmp_path, stem: str, seeds: set[int], rule: str) -> Iterator[pd.DataFrame]:
    """Each (case, seed) of both designs' quick CSVs, indexed by (selector, budget), after checking the seeds and
    that every selector of the rule was recorded at every budget."""
    from replications.replicate_label_budget import BUDGETS, FRESH_SELECTORS

    for design in ("", "_fullbatch"):
        df = pd.read_csv(tmp_path / f"{stem}{design}_quick.csv")
        assert set(df.seed) == seeds
        for (_, _), g in df.groupby(["case", "seed"]):
            assert set(zip(g.selector, g.budget, strict=True)) == {(s, b) for s in FRESH_SELECTORS[rule]
                                                                   for b in BUDGETS}
            yield g.set_index(["selector", "budget"])


@pytest.mark.slow
def test_quick_fresh_eighth_rule_judges_from_its_own_rows(tmp_path):
    """--fresh eighth --quick: both designs' CSVs hold the fresh selectors at every budget on the same plan
    rows, and the verdict's (a) means are the CSV's pooled accuracies averaged over groups and b = 25-100."""
    from replications.replicate_label_budget import BUDGETS, main

    assert main(["--fresh", "eighth", "--quick", "--out", str(tmp_path)]) == 0
    report = (tmp_path / "label_budget_fresh8_quick.md").read_text()
    for by in _fresh_runs(tmp_path, "label_budget_fresh8", {6, 4}, "eighth"):  # the first fresh seed per group
        for b in BUDGETS:
            assert by.at[("fewlabel_bayes", b), "n_labels"] == by.at[("fewlabel_shipped", b), "n_labels"] \
                == by.at[("fewlabel_bayes_dm", b), "n_labels"] <= b
    full = pd.read_csv(tmp_path / "label_budget_fresh8_fullbatch_quick.csv")
    pooled = full.groupby(["group", "selector", "budget"])[["pairwise_correct", "pairwise_counted"]].sum()
    acc = (pooled.pairwise_correct / pooled.pairwise_counted).round(3)
    mean = acc.xs("fewlabel_bayes_dm", level="selector").loc[(slice(None), [25, 50, 100])].mean()
    assert f"fewlabel_bayes_dm {mean:.4f}" in report
    assert "Eighth rule (c), fewlabel_bayes_dm" in report


@pytest.mark.slow
def test_quick_fresh_ninth_rule_judges_from_its_own_rows(tmp_path):
    """--fresh ninth --quick: both designs' CSVs hold the ninth rule's selectors at every budget on the same plan
    rows, each posterior's contrast counts are its pairs, and the verdict's (a) coverage and (b) mean are
    recounted from the fullbatch CSV (coverage pooled over runs, pairs and b = 10-50, then averaged over groups)."""
    from replications.replicate_label_budget import BUDGETS, main

    assert main(["--fresh", "ninth", "--quick", "--out", str(tmp_path)]) == 0
    report = (tmp_path / "label_budget_fresh9_quick.md").read_text()
    for by in _fresh_runs(tmp_path, "label_budget_fresh9", {9, 6}, "ninth"):  # the first fresh seed per group
        for b in BUDGETS:
            assert by.at[("fewlabel_now", b), "n_labels"] == by.at[("fewlabel_modelvar", b), "n_labels"] <= b
            for s in ("fewlabel_now", "fewlabel_modelvar"):
                assert by.at[(s, b), "contrasts"] == by.at[(s, b), "pairs"]
                assert 0 <= by.at[(s, b), "contrasts_covered"] <= by.at[(s, b), "contrasts"]
    full = pd.read_csv(tmp_path / "label_budget_fresh9_fullbatch_quick.csv")
    sub = full[full.budget.isin([10, 25, 50])].groupby(["selector", "group"])[["contrasts_covered", "contrasts"]].sum()
    cov = (sub.contrasts_covered / sub.contrasts).groupby(level="selector").mean()
    assert f"fewlabel_modelvar {cov['fewlabel_modelvar']:.4f} vs fewlabel_now {cov['fewlabel_now']:.4f}" in report
    pooled = full.groupby(["group", "selector", "budget"])[["pairwise_correct", "pairwise_counted"]].sum()
    acc = (pooled.pairwise_correct / pooled.pairwise_counted).round(3)
    mean = acc.xs("fewlabel_modelvar", level="selector").loc[(slice(None), [25, 50, 100])].mean()
    assert f"fewlabel_modelvar {mean:.4f}" in report
    assert "Ninth rule (d)" in report
