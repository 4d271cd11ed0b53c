"""Agreement measures against hand-worked rankings: TrCV §5.1 corr, pairwise-order accuracy with the
0.005 tie rule, Kendall τ (checked against scipy.stats.kendalltau) and regret."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau

from shiftlib.selection import (
    ReverseCell,
    TargetLabels,
    agreement,
    combine,
    corr_measure,
    kendall_tau,
    pairwise_order_accuracy,
    regret,
)

pytestmark = pytest.mark.usefixtures("one_blas_thread")


TRUE = pd.Series({"a": 0.9, "b": 0.8, "c": 0.7, "d": 0.6})
EST = pd.Series({"a": 0.5, "b": 0.7, "c": 0.6, "d": 0.4})
# pairs: (a,b) est says b — discordant; (a,c) est says c — discordant; (a,d), (b,c), (b,d), (c,d) agree.


def test_corr_by_hand():
    assert corr_measure(TRUE, EST) == 6 - 2  # C(4,2) = 6 minus 2 discordant pairs


def test_kendall_tau_by_hand_and_against_scipy():
    # 4 concordant, 2 discordant, no ties ⇒ τ = (4 − 2)/6 = 1/3
    assert kendall_tau(TRUE, EST) == pytest.approx(1 / 3)
    assert kendall_tau(TRUE, EST) == pytest.approx(kendalltau(TRUE.to_numpy(), EST.to_numpy()).statistic)


def test_pairwise_accuracy_skips_pairs_closer_than_0_005():
    true = pd.Series({"a": 0.900, "b": 0.896, "c": 0.80, "d": 0.794})
    est = pd.Series({"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.0})
    # (a,b) gap .004 < .005 ⇒ tie, skipped. (c,d) gap .006 ⇒ counted.
    # counted: (a,c) est c — wrong; (a,d) right; (b,c) est c — wrong; (b,d) right; (c,d) right ⇒ 3/5
    pw = pairwise_order_accuracy(true, est)
    assert (pw.correct, pw.counted, pw.ties_skipped, pw.accuracy) == (3, 5, 1, pytest.approx(0.6))


def test_regret_by_hand_including_a_tied_top():
    assert regret(TRUE, "c") == pytest.approx(0.2)  # 0.9 − 0.7
    assert regret(TRUE, EST) == pytest.approx(0.1)  # EST selects b: 0.9 − 0.8
    assert regret(TRUE, ["a", "c"]) == pytest.approx(0.1)  # mean of 0 and 0.2 (uniform tie-break)


def _rt_result(M):
    names = list(M)
    labels = [TargetLabels(n, np.array([0, 1])) for n in names]
    cells = [ReverseCell(i, j, M[i][k], True) for i in names for k, j in enumerate(names)]
    return combine(labels, cells)


@pytest.mark.heavy
def test_rt_is_judged_on_its_pairwise_decisions_with_undecided_pairs_counted_wrong():
    # Hand matrix (rows labeler): a: .7 .6 .5 | b: .8 .7 .4 | c: .5 .5 .3  (see test_reverse_testing.py)
    # pair rule ⇒ a–b: b, a–c: a, b–c: b. With TRUE-like scores a > b > c every decision except a–b is right.
    res = _rt_result({"a": [0.7, 0.6, 0.5], "b": [0.8, 0.7, 0.4], "c": [0.5, 0.5, 0.3]})
    true = pd.Series({"a": 0.9, "b": 0.8, "c": 0.7})
    ag = agreement(true, res)
    assert (ag.pairwise_correct, ag.pairwise_counted, ag.pairwise_undecided) == (2, 3, 0)
    assert ag.corr == 3 - 1
    assert ag.selected == ("b",) and ag.regret == pytest.approx(0.1)
    # Kendall τ on Copeland scores (b 2, a 0, c −2) vs truth a > b > c: pairs ab discordant, ac, bc concordant
    assert ag.kendall_tau == pytest.approx(1 / 3)
    # an undetermined pair (Condition 4.3) counts as wrong in pairwise accuracy but is not discordant in corr
    tie = _rt_result({"a": [0.7, 0.7], "b": [0.6, 0.8]})  # b−a per retrainer: −.1, +.1 ⇒ 4.3
    ag2 = agreement(pd.Series({"a": 0.9, "b": 0.8}), tie)
    assert (ag2.pairwise_correct, ag2.pairwise_counted, ag2.pairwise_undecided, ag2.corr) == (0, 1, 1, 1)
    assert ag2.selected == ("a", "b") and ag2.regret == pytest.approx(0.05)
    json.dumps(ag2.to_dict())
