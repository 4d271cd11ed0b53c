"""benchmarks/selection_rows.py: one small (case, seed) end to end, its pairwise counts recounted by hand from
its own score columns, and the pre-declared rule (Δ ≤ 0.02) applied to a hand-built table."""

from __future__ import annotations

from itertools import combinations

import pandas as pd
import pytest

from benchmarks.selection_rows import CaseSpec, _synthetic, load, run_unit, summary, verdict
from shiftlib.budget import scored_folds
from shiftlib.learners import make_learner
from shiftlib.selection import source_cv

LEARNERS = ("NB", "LR", "DT")


@pytest.mark.parametrize("scheme", ["folds", "subsample"])
def test_one_unit_skips_sizes_at_or_above_the_source_and_counts_pairs_as_its_scores_say(scheme):
    spec = CaseSpec("tiny", "synthetic", _synthetic(1500, "feature_dependent", 0.4, feature=0), "tiny")
    rows = pd.DataFrame(run_unit(spec, 0, (200, 100_000), learners=LEARNERS, rf_trees=None, k=3, scheme=scheme))
    n_source = int(rows["n_source"].iloc[0])
    assert 200 < n_source < 100_000
    assert list(rows["size"]) == ["full", "200"]  # 100,000 ≥ the source rows: skipped
    if scheme == "subsample":
        assert list(rows["rows_used"]) == [n_source, 200]
    else:  # the first scored_folds(n, 3, 200) of 3 folds over every row: ≥ 200 rows scored, = source_cv(max_folds)
        f = scored_folds(n_source, 3, 200)
        assert rows["rows_used"].iloc[1] == round(n_source * f / 3) >= 200 - 3
        p = load(spec, 0, 15_000, 10_000)
        ref = source_cv({n: make_learner(n, random_state=0, n_rows=n_source) for n in LEARNERS}, p.Xs, p.ys, k=3,
                        random_state=0, max_folds=f)
        for n in LEARNERS:
            assert rows[f"scv_{n}"].iloc[1] == pytest.approx(round(float(ref.scores[n]), 4), abs=1e-9)
    for _, r in rows.iterrows():
        correct = counted = 0
        for a, b in combinations(LEARNERS, 2):
            gap = r[f"true_{a}"] - r[f"true_{b}"]
            if abs(gap) < 0.005:  # the library's tie rule, recounted here
                continue
            counted += 1
            correct += (r[f"scv_{a}"] - r[f"scv_{b}"]) * gap > 0
        assert (r["pairwise_correct"], r["pairwise_counted"]) == (correct, counted)


def test_rule_is_mean_pairwise_at_most_0_02_below_full_on_the_same_units():
    # two units; hand-worked: Δ(5000) = mean(0.90−0.88, 0.80−0.79) = 0.015 ≤ 0.02; Δ(1000) = 0.10 > 0.02
    base = {"group": "synthetic", "regret": 0.0, "kendall_tau": 1.0, "wall_s": 1.0, "cpu_s": 1.0}
    df = pd.DataFrame([
        {**base, "case": "a", "seed": 0, "size": "full", "pairwise_accuracy": 0.90},
        {**base, "case": "b", "seed": 0, "size": "full", "pairwise_accuracy": 0.80},
        {**base, "case": "a", "seed": 0, "size": "5000", "pairwise_accuracy": 0.88},
        {**base, "case": "b", "seed": 0, "size": "5000", "pairwise_accuracy": 0.79},
        {**base, "case": "a", "seed": 0, "size": "1000", "pairwise_accuracy": 0.80},
        {**base, "case": "b", "seed": 0, "size": "1000", "pairwise_accuracy": 0.70},
    ])
    s = summary(df).set_index("size")
    assert s.at["5000", "d_pairwise"] == pytest.approx(0.015)
    assert s.at["1000", "d_pairwise"] == pytest.approx(0.10)
    assert bool(s.at["5000", "meets"]) and not bool(s.at["1000", "meets"])
    text = verdict(summ := summary(df), default=5000)
    assert "**MEETS**" in text and "smallest tested size that meets it is 5,000" in text
    assert "does NOT meet" in verdict(summ, default=1000)
