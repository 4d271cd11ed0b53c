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


@pytest.mark.slow
def test_trcv_replication_corr_and_combinations_follow_from_its_scores(tmp_path):
    """replicate_trcv on one small case: TrCV §5.1's n_L rule, the truth rows, TrCV's corr recounted by
    hand from the score table, and the pre-declared combinations rebuilt from their parts."""
    import math

    from replications.replicate_trcv import main

    assert main(["--quick", "--cases", "credit_owner_to_rent", "--n-max", "120", "--out", str(tmp_path)]) == 0
    agree = pd.read_csv(tmp_path / "trcv_quick_agreement.csv").set_index("selector")
    scores = pd.read_csv(tmp_path / "trcv_quick_scores.csv")
    case = pd.read_csv(tmp_path / "trcv_quick_cases.csv").iloc[0]
    assert case.n_labeled == max(math.ceil(0.1 * 120), 20) == 20  # TrCV §5.1: max(0.1·|T|, 20)
    assert case.n_eval == 973 - 20  # every Home == "rent" row except the labeled ones
    assert (tmp_path / "trcv_quick_replication.md").read_text().startswith("# TrCV replication")
    for sel, g in scores[scores.selector != "rt"].groupby("selector"):
        est = g.set_index("learner")["score"]
        true = g.set_index("learner")["true_accuracy"]
        # TrCV §5.1: corr = C(|H|, 2) − #[(ε(f) − ε(g))·(v(f) − v(g)) < 0]; NaN scores never count
        discordant = sum(bool((true[a] - true[b]) * (est[a] - est[b]) < 0) for a, b in combinations(true.index, 2))
        assert agree.at[sel, "corr"] == math.comb(len(true), 2) - discordant, sel
    by = {s: g.set_index("learner")["score"] for s, g in scores.groupby("selector")}
    gate = "wcv" if bool(agree.at["scv", "drifted"]) else "scv"
    pd.testing.assert_series_equal(by["auto_wcv"], by[gate], check_names=False)
    ranks = [by[s].rank(method="min", ascending=False, na_option="bottom") for s in ("scv", "trcv")]
    pd.testing.assert_series_equal(by["rank_scv_trcv"], -(ranks[0] + ranks[1]) / 2, check_names=False)


@pytest.mark.slow
def test_summary_default_rule_never_picks_a_selector_below_scv_in_a_group():
    """The pre-declared rule: the best mean pairwise accuracy wins only if it is never below 10-fold CV."""
    from replications.replicate_natural import COMMON, GROUPS, decide

    acc = {s: [0.60, 0.60, 0.60, 0.60] for s in COMMON}
    acc["scv"] = [0.70, 0.70, 0.70, 0.70]
    acc["trcv"] = [0.95, 0.95, 0.95, 0.69]  # best mean (0.885) but below scv on the last group
    acc["rank_scv_trcv"] = [0.75, 0.70, 0.72, 0.70]  # mean 0.7175, never below scv
    table = pd.DataFrame([{"group": g, "selector": s, "pairwise_acc": v[i]}
                          for s, v in acc.items() for i, g in enumerate(GROUPS)])
    best, verdict = decide(table)
    assert best == "rank_scv_trcv"
    v = verdict.set_index("selector")
    assert not v.at["trcv", "never below scv"] and v.at["trcv", "worst Δ vs scv"] == pytest.approx(-0.01)
    acc["rank_scv_trcv"][1] = 0.69
    table = pd.DataFrame([{"group": g, "selector": s, "pairwise_acc": v[i]}
                          for s, v in acc.items() for i, g in enumerate(GROUPS)])
    assert decide(table)[0] == "scv"  # scv itself always qualifies (Δ = 0) and now has the best mean
