"""The label-budget study (replications/replicate_label_budget.py, replications/label_budget/) end to end in its
--quick form (slow): every pre-declared selector at every budget, the labels each one saw, and the report's
verdict lines following from its own CSV (pooled pairwise-order accuracy recounted here)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest


@pytest.mark.slow
def test_quick_label_budget_study_is_consistent_with_its_rows(tmp_path):
    from replications.label_budget._core import BUDGETS, SELECTORS
    from replications.replicate_label_budget import main

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
    from replications.label_budget._core import BUDGETS, FRESH_SELECTORS

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
    from replications.label_budget._core import BUDGETS
    from replications.replicate_label_budget import main

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
    from replications.label_budget._core import BUDGETS
    from replications.replicate_label_budget import main

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


def test_detectability_formulas_worked_by_hand():
    """The detectability measurement's two formulas on one pair with 4 disagreement rows of a 10-row batch,
    z = (1, 1, −1, 1), so Δ = 0.2, worked by hand (the detectability paragraph of label_budget.rules)."""
    from statistics import NormalDist

    from replications.label_budget.detectability import design_expected_right, detect_probability

    phi = NormalDist().cdf
    Z = np.array([[1.0], [1.0], [-1.0], [1.0]])
    # design value, uniform q = 1/4, n = 2: Σ(z/N)²/q = 4·0.01/0.25 = 0.16; − Δ² → 0.12; /n → 0.06; ·(1 − 2/4) → 0.03
    assert design_expected_right(Z, np.full(4, 0.25), 2, 10) == pytest.approx(phi(0.2 / 0.03 ** 0.5))
    # a q that puts more mass on the −1 row: Σ = 0.01·(3/0.2 + 1/0.4) = 0.175; − 0.04 → 0.135; /2 · 0.5 → 0.03375
    assert design_expected_right(Z, np.array([0.2, 0.2, 0.4, 0.2]), 2, 10) == pytest.approx(phi(0.2 / 0.03375 ** 0.5))
    # all rows labeled: the order is known
    assert design_expected_right(Z, np.full(4, 0.25), 4, 10) == 1.0
    # per-pair ceiling: sd = (m/N)·S_z/√n·√(1 − n/m), S_z = 1 (ddof 1: ((3·0.25) + 2.25)/3), n = 2 → 0.4·0.5 = 0.2
    d = pd.DataFrame({"m": [4, 4], "n_batch": [10, 10], "delta": [0.2, -0.2], "s_z": [1.0, 1.0]})
    assert detect_probability(d, 2, "s_z").tolist() == pytest.approx([phi(1.0)] * 2)
    assert detect_probability(d, 4, "s_z").tolist() == [1.0, 1.0]  # the budget covers the pair's rows
