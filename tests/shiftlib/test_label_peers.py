"""The few-label peers of ``replications._label_peers``: active testing's LURE estimate and acquisition (Kossen et
al., ICML 2021), Model Selector's posterior and information gain (Okanovic et al., AISTATS 2025) and CODA's
prior and P(best) (Kay et al., ICCV 2025), checked
against hand-worked numbers, exact enumeration and properties."""

from __future__ import annotations

import math
from itertools import permutations

import numpy as np
import pytest

from replications._label_peers import (
    active_testing,
    coda,
    coda_p_best,
    coda_prior,
    expected_loss_scores,
    information_gain,
    lure_estimate,
    lure_weights,
    model_selector,
    model_selector_posterior,
    pick_best,
)


# ----------------------------------------------------------------------------------------------------
# active testing
# ----------------------------------------------------------------------------------------------------
def test_lure_weights_hand_worked() -> None:
    # N = 4, M = 2, q = (1/2, 1/4): v_1 = 1 + (2/3)(1/(4·1/2) − 1) = 2/3, v_2 = 1 + (2/2)(1/(3·1/4) − 1) = 4/3
    np.testing.assert_allclose(lure_weights([0.5, 0.25], 4), [2 / 3, 4 / 3])


def test_lure_weights_are_one_when_sampling_uniformly_or_labeling_everything() -> None:
    # uniform q_m = 1/(N − m + 1) gives v_m = 1; M = N gives v_m = 1 whatever q
    N = 6
    np.testing.assert_allclose(lure_weights([1 / 6, 1 / 5, 1 / 4], N), 1.0)
    np.testing.assert_allclose(lure_weights([0.3, 0.1, 0.5, 0.2, 0.6, 1.0], N), 1.0)


def _exact_lure_mean(loss: np.ndarray, score: np.ndarray, M: int) -> float:
    """E[LURE] by enumerating every ordered M-sequence drawn ∝ score (no repeats)."""
    N = len(loss)
    total = 0.0
    for seq in permutations(range(N), M):
        prob, qs, left = 1.0, [], list(range(N))
        for i in seq:
            q = score[i] / score[left].sum()
            prob *= q
            qs.append(q)
            left.remove(i)
        total += prob * lure_estimate(loss[list(seq)], qs, N)
    return total


@pytest.mark.parametrize("M", [1, 2, 3])
def test_lure_is_unbiased_exactly(M: int) -> None:
    # Kossen et al. 2021, Thm. 1: E[R̂_LURE] = (1/N) Σ_i L_i for any proposal; exact enumeration, N = 5
    loss = np.array([1.0, 0.0, 0.0, 1.0, 0.0])
    score = np.array([0.9, 0.1, 0.3, 0.5, 0.2])
    assert _exact_lure_mean(loss, score, M) == pytest.approx(loss.mean(), abs=1e-12)


@pytest.mark.heavy
def test_active_testing_accuracy_is_unbiased_over_draws() -> None:
    # the mean of active testing's accuracy estimates over many seeds is each candidate's true accuracy
    rng = np.random.default_rng(0)
    N = 12
    y = rng.integers(0, 2, N)
    P = np.column_stack([np.where(rng.random(N) < p, y, 1 - y) for p in (0.9, 0.7, 0.5)])
    proba = np.column_stack([rng.uniform(0.05, 0.95, N)])
    proba = np.column_stack([1 - proba[:, 0], proba[:, 0]])
    truth = (P == y[:, None]).mean(axis=0)
    est = np.mean([active_testing(P, proba, [0, 1], lambda r: y[r], [5], s)[0].scores for s in range(1000)],
                  axis=0)
    np.testing.assert_allclose(est, truth, atol=0.03)


def test_expected_loss_scores_hand_worked() -> None:
    # one row, π = (0.8, 0.2); candidates predict 0 and 1: expected losses 0.2 and 0.8, mean 0.5
    assert expected_loss_scores([[0, 1]], [[0.8, 0.2]], [0, 1]) == pytest.approx([0.5])


def test_active_testing_with_every_row_labeled_picks_the_true_best() -> None:
    y = np.array([0, 1, 1, 0, 1, 0, 0, 1])
    P = np.column_stack([y, np.where(np.arange(8) < 2, 1 - y, y), np.where(np.arange(8) < 4, 1 - y, y)])
    P[0, 0] = 1 - y[0]  # candidate 0: 1 error, candidate 1: 2 errors, candidate 2: 4 errors
    proba = np.full((8, 2), 0.5)
    res = active_testing(P, proba, [0, 1], lambda r: y[r], [8], 1)[0]
    np.testing.assert_allclose(res.scores, [7 / 8, 6 / 8, 4 / 8])
    assert res.pick == 0


# ----------------------------------------------------------------------------------------------------
# Model Selector
# ----------------------------------------------------------------------------------------------------
def test_posterior_hand_worked() -> None:
    # binary, ε = 0.1: A right on 3 of 3, B on 2 of 3 → P(A) = 0.9³ / (0.9³ + 0.9²·0.1) = 0.9
    P = np.array([[1, 1], [0, 0], [1, 0]])
    post = model_selector_posterior(P, [1, 0, 1], 0.1, 2)
    np.testing.assert_allclose(post, [0.9, 0.1])


def test_posterior_puts_its_mass_on_the_model_without_errors() -> None:
    rng = np.random.default_rng(1)
    y = rng.integers(0, 3, 60)
    P = np.column_stack([y] + [np.where(rng.random(60) < 0.3, (y + 1) % 3, y) for _ in range(4)])
    post = model_selector_posterior(P, y, 0.2, 3)
    assert post.sum() == pytest.approx(1.0)
    assert post[0] > 0.999


def test_information_gain_hand_worked() -> None:
    # two candidates, uniform posterior, binary, ε = 0.1: where they disagree the label is a fair coin
    # (H = log 2) and under each hypothesis H_b(0.1); where they agree the gain is 0
    eps = 0.1
    hb = -(0.9 * math.log(0.9) + 0.1 * math.log(0.1))
    ig = information_gain([[0, 1], [1, 1]], [0.5, 0.5], eps, [0, 1])
    np.testing.assert_allclose(ig, [math.log(2) - hb, 0.0], atol=1e-12)


def test_model_selector_first_label_is_a_disagreement_row_and_all_rows_pick_the_best() -> None:
    y = np.array([0, 1, 1, 0, 1, 0, 0, 1, 1, 0])
    P = np.column_stack([y, y, y])
    P[[1, 2], 1] = 1 - y[[1, 2]]  # candidate 1: 2 errors
    P[[1, 4, 6], 2] = 1 - y[[1, 4, 6]]  # candidate 2: 3 errors
    P[7, 0] = 1 - y[7]  # candidate 0: 1 error (the best)
    res = model_selector(P, [0, 1], lambda r: y[r], [1, 10], 0, eps=0.1)
    assert res[0].rows[0] in {1, 2, 4, 6, 7}
    assert res[1].pick == 0
    np.testing.assert_allclose(res[1].details["posterior"].sum(), 1.0)


def test_pick_best_breaks_ties_at_random() -> None:
    rng = np.random.default_rng(0)
    picks = {pick_best([0.5, 0.7, 0.7, 0.1], rng) for _ in range(50)}
    assert picks == {1, 2}


# ----------------------------------------------------------------------------------------------------
# CODA
# ----------------------------------------------------------------------------------------------------
def test_coda_prior_hand_worked() -> None:
    # rows: both predict 0; candidates split. Consensus (1, 0) and (½, ½), class shares (¾, ¼).
    # candidate 0 against it: true-0 row [1.5, 0] → [1, 0]; true-1 row [½, 0] → [1, 0]
    # candidate 1: true-0 row [1, ½] → [⅔, ⅓]; true-1 row [0, ½] → [0, 1]
    alpha, share = coda_prior([[0, 0], [0, 1]], [0, 1], beta=1.0, strength=5.0)
    np.testing.assert_allclose(share, [0.75, 0.25])
    np.testing.assert_allclose(alpha[0], [[6, 1], [6, 1]])
    np.testing.assert_allclose(alpha[1], [[1 + 10 / 3, 1 + 5 / 3], [1, 6]])


def test_coda_p_best_properties() -> None:
    same = np.broadcast_to(np.array([[8.0, 2.0], [2.0, 8.0]]), (3, 2, 2))
    np.testing.assert_allclose(coda_p_best(same, [0.5, 0.5]), [1 / 3] * 3, atol=1e-9)  # exchangeable
    strong = same.copy()
    strong[1] = [[900.0, 100.0], [100.0, 900.0]]  # accuracy 0.9 known precisely, the others 0.8 ± 0.09
    pb = coda_p_best(strong, [0.5, 0.5])
    assert pb.sum() == pytest.approx(1.0)
    assert pb[1] > 0.6 and pb[0] == pytest.approx(pb[2], abs=1e-9)


def test_coda_with_every_row_labeled_picks_the_true_best() -> None:
    rng = np.random.default_rng(3)
    N = 60
    y = rng.integers(0, 2, N)
    flips = [rng.random(N) < e for e in (0.4, 0.05, 0.25)]
    P = np.column_stack([np.where(f, 1 - y, y) for f in flips])
    res = coda(P, [0, 1], lambda r: y[r], [N], 0)[0]
    assert sorted(res.rows.tolist()) == list(range(N))
    assert res.pick == int(np.argmax((P == y[:, None]).mean(axis=0))) == 1
