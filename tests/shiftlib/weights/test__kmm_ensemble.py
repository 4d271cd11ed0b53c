"""Ensemble KMM (shiftlib.weights._kmm_ensemble): the chunk split, the fan-out recipe (kmm_chunk →
combine_chunks → kmm_polish) against KMM(chunk_size) and against the exact solve of KMM eq. 12, and the input
checks of a chunk."""

from __future__ import annotations

import numpy as np
import pytest

from shiftlib.kernels import mmd2_many
from shiftlib.weights import (
    KMM,
    chunk_indices,
    combine_chunks,
    default_eps,
    kmm_chunk,
    kmm_objective,
    kmm_polish,
    shared_kernel,
    solve_kmm,
)
from tests.shiftlib.weights.conftest import _assert_exact_bounds, _K_kappa, _problem, _rel


def test_chunk_indices_partition_deterministically() -> None:
    chunks = chunk_indices(1003, 100, random_state=7)
    assert len(chunks) == 11  # ⌈1003/100⌉
    sizes = [len(c) for c in chunks]
    assert max(sizes) <= 100 and max(sizes) - min(sizes) <= 1
    np.testing.assert_array_equal(np.sort(np.concatenate(chunks)), np.arange(1003))
    again = chunk_indices(1003, 100, random_state=7)
    assert all(np.array_equal(a, b) for a, b in zip(chunks, again, strict=True))
    other = chunk_indices(1003, 100, random_state=8)
    assert not np.array_equal(chunks[0], other[0])
    with pytest.raises(ValueError, match="exactly once"):
        combine_chunks(1003, [chunks[0], chunks[0]], [np.ones(len(chunks[0]))] * 2)


@pytest.mark.heavy
def test_ensemble_kmm_equals_its_fanned_out_pieces() -> None:
    # KMM(chunk_size) must equal the flow's recipe: shared kernel → chunk_indices → kmm_chunk → combine
    # → kmm_polish (polish=False stops after combine)
    rng = np.random.default_rng(9)
    Xs, Xt = rng.normal(size=(500, 4)), rng.normal(loc=0.5, size=(300, 4))
    est = KMM(chunk_size=200, random_state=3).fit(Xs, Xt)
    kern = shared_kernel(Xs, Xt)
    Zs, Zt = kern.transform(Xs), kern.transform(Xt)
    chunks = chunk_indices(500, 200, random_state=3)
    betas = [kmm_chunk(Zs[c], Zt, gamma=kern.gamma) for c in chunks]
    combined = combine_chunks(500, chunks, betas)
    np.testing.assert_array_equal(est.beta_, kmm_polish(Zs, Zt, combined, gamma=kern.gamma))
    np.testing.assert_array_equal(KMM(chunk_size=200, random_state=3, polish=False).fit(Xs, Xt).beta_, combined)
    # chunks solved elsewhere (the flow's kmm-chunk tasks): the same β and the same diagnostics
    given = KMM(chunk_size=200, random_state=3).fit(Xs, Xt, chunk_betas=betas)
    np.testing.assert_array_equal(given.weights_, est.weights_)
    assert (given.mmd2_before_, given.mmd2_after_) == (est.mmd2_before_, est.mmd2_after_)
    with pytest.raises(ValueError, match="chunk_betas has 2 solutions but .* into 3 chunks"):
        KMM(chunk_size=200, random_state=3).fit(Xs, Xt, chunk_betas=betas[:2])
    for c, beta in zip(chunks, betas, strict=True):
        _assert_exact_bounds(beta, 1000.0, default_eps(len(c)))  # each chunk's own constraints
    assert est.mmd2_after_ < 0.2 * est.mmd2_before_


@pytest.mark.heavy
def test_polish_re_solves_the_full_problem_on_the_ensemble_support() -> None:
    # kmm_polish: eq. 12 of the whole source with β = 0 outside the support U of the combined ensemble β.
    # Its result is feasible for the full problem, never worse than the ensemble, and here (KMM §4.1's
    # shift in 5-D, 4 chunks) much closer to the exact optimum (measured: excess 9e-3 → 2e-4)
    rng = np.random.default_rng(22)
    Xs, Xt = rng.normal(0.5, 0.5, size=(1200, 5)), rng.normal(0.0, 0.3, size=(600, 5))
    kern = shared_kernel(Xs, Xt)
    Zs, Zt = kern.transform(Xs), kern.transform(Xt)
    K, kappa = _K_kappa(Zs, Zt, kern.gamma)
    chunks = chunk_indices(1200, 300, random_state=0)
    ens = combine_chunks(1200, chunks, [kmm_chunk(Zs[c], Zt, gamma=kern.gamma) for c in chunks])
    pol = kmm_polish(Zs, Zt, ens, gamma=kern.gamma)
    exact = solve_kmm(K, kappa)
    f_ens, f_pol = kmm_objective(K, kappa, ens), kmm_objective(K, kappa, pol)
    print(f"\npolish: objective excess over exact {_rel(f_ens, exact.objective):.1e} (ensemble) → "
          f"{_rel(f_pol, exact.objective):.1e}; non-zero rows {np.sum(ens > 0)} → {np.sum(pol > 0)}")
    _assert_exact_bounds(pol, 1000.0, default_eps(1200))
    assert np.all(pol[ens == 0] == 0)
    assert f_pol <= f_ens
    assert _rel(f_pol, exact.objective) < 0.1 * _rel(f_ens, exact.objective)
    # KMM(polish=True) is the fan-out recipe followed by kmm_polish
    est = KMM(chunk_size=300, polish=True, random_state=0).fit(Xs, Xt)
    np.testing.assert_array_equal(est.beta_, pol)
    with pytest.raises(ValueError, match="one weight per source row"):
        kmm_polish(Zs, Zt, ens[:-1], gamma=kern.gamma)


@pytest.mark.slow
def test_ensemble_kmm_is_close_to_the_exact_optimum() -> None:
    # ensemble β (chunks of 1000) is feasible for the full problem (each chunk's ε is below the full
    # problem's), so its objective can only be ≥ the exact optimum; allow a relative excess of 1e-3, and
    # MMD² far below the unweighted one
    Zs, Zt, gamma = _problem(3000, 3000, 10, 0.3, seed=21)
    K, kappa = _K_kappa(Zs, Zt, gamma)
    exact = solve_kmm(K, kappa)
    chunks = chunk_indices(3000, 1000, random_state=0)
    beta = combine_chunks(3000, chunks, [kmm_chunk(Zs[c], Zt, gamma=gamma) for c in chunks])
    _assert_exact_bounds(beta, 1000.0, default_eps(3000))
    f_ens = kmm_objective(K, kappa, beta)
    assert exact.objective <= f_ens <= exact.objective + 1e-3 * abs(exact.objective)
    before, after = mmd2_many(Zs, Zt, gamma, np.column_stack([np.ones(3000), beta / beta.mean()]))
    assert after < 0.01 * before


def test_kmm_input_errors_are_clear() -> None:
    rng = np.random.default_rng(14)
    X = rng.normal(size=(30, 3))
    with pytest.raises(ValueError, match="source set has 1 row.*at least 2"):
        KMM().fit(X[:1], X)
    with pytest.raises(ValueError, match="source set has 1 row.*KMM needs at least 2"):
        kmm_chunk(X[:1], X, gamma=0.5)
    same = np.tile(X[:1], (20, 1))
    with pytest.raises(ValueError, match="all rows are identical"):
        KMM().fit(same, same)
    with pytest.raises(ValueError, match="X_chunk has 3 columns but X_target has 2"):
        kmm_chunk(X, X[:, :2], gamma=0.5)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="X_chunk has missing or infinite values"):
        kmm_chunk(bad, X, gamma=0.5)
    with pytest.raises(ValueError, match="gamma must be a positive number"):
        kmm_chunk(X, X, gamma=0.0)
