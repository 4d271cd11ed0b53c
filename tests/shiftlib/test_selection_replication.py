"""The RT replication script (replications/replicate_rt.py) end to end on one small data set: its
agreement table must follow from its own score table (pairwise-order accuracy recounted here by hand,
independently of shiftlib.selection.agreement)."""

from __future__ import annotations

from itertools import combinations

import pandas as pd
import pytest


@pytest.mark.slow
def test_quick_replication_agreement_is_consistent_with_its_scores(tmp_path):
    from replications.replicate_rt import main

    assert main(["--quick", "--datasets", "wine", "--out", str(tmp_path)]) == 0
    agree = pd.read_csv(tmp_path / "rt_quick_agreement.csv")
    scores = pd.read_csv(tmp_path / "rt_quick_scores.csv")
    assert (tmp_path / "rt_quick_replication.md").read_text().startswith("# ReverseTesting replication")
    a5 = agree[agree.learners == "all5"].set_index("selector")
    for sel, g in scores[scores.selector != "rt"].groupby("selector"):
        est = g.set_index("learner")["score"]
        true = g.set_index("learner")["true_accuracy"]
        correct = counted = 0
        for a, b in combinations(true.index, 2):
            if abs(true[a] - true[b]) < 0.005:  # the 0.005 tie rule
                continue
            counted += 1
            correct += (est[a] - est[b]) * (true[a] - true[b]) > 0
        assert (a5.at[sel, "pairwise_correct"], a5.at[sel, "pairwise_counted"]) == (correct, counted)
    m = pd.read_csv(tmp_path / "rt_quick_matrices.csv")
    assert len(m) == 25  # 5 learners: ℓ² cells of M
