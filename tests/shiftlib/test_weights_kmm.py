"""KMM (KMM eq. 12): fast route vs the cvxpy reference, exact bounds, chunked ensemble."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.metrics.pairwise import rbf_kernel

from shiftlib.weights import (
    KMM,
    WeightsUnavailableError,
    bound_violation,
    chunk_indices,
    combine_chunks,
    default_eps,
    kmm_chunk,
    kmm_kappa,
    kmm_objective,
    shared_kernel,
    solve_kmm,
)
from shiftlib.weights._base import mmd2_many


def _problem(m: int, mt: int, d: int, shift: float, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Standardized source N(0, I) and target N(shift·1, I) with the shared kernel's gamma."""
    rng = np.random.default_rng(seed)
    Xs = rng.normal(size=(m, d))
    Xt = rng.normal(loc=shift, size=(mt, d))
    kern = shared_kernel(Xs, Xt)
    return kern.transform(Xs), kern.transform(Xt), kern.gamma


def _K_kappa(Zs: np.ndarray, Zt: np.ndarray, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    return rbf_kernel(Zs, Zs, gamma=gamma), kmm_kappa(Zs, Zt, gamma)


def _rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


def _assert_exact_bounds(beta: np.ndarray, B: float, eps: float) -> None:
    # KMM eq. 12 constraints, checked with no tolerance at all
    m = beta.shape[0]
    assert beta.min() >= 0.0
    assert beta.max() <= B
    assert m * (1 - eps) <= beta.sum() <= m * (1 + eps)
    assert bound_violation(beta, B=B, eps=eps) == 0.0


def test_default_eps_is_the_papers_choice() -> None:
    # KMM §4.2: ε = (√m − 1)/√m; m = 100 → 0.9
    assert default_eps(100) == pytest.approx(0.9, abs=1e-15)


def test_kappa_matches_its_definition() -> None:
    # KMM eq. 12: κ_i = (m/m') Σ_j k(x_i, x'_j), here by an explicit double loop
    Zs, Zt, gamma = _problem(7, 5, 2, 0.5, seed=0)
    manual = np.array([sum(np.exp(-gamma * np.sum((x - y) ** 2)) for y in Zt) for x in Zs]) * 7 / 5
    np.testing.assert_allclose(kmm_kappa(Zs, Zt, gamma), manual, rtol=1e-12)


@pytest.mark.parametrize("solver", ["auto", "lbfgsb"])
def test_fast_route_matches_cvxpy_reference_objective(solver: str) -> None:
    # reference: the QP as written in KMM eq. 12, solved by cvxpy; required agreement 1e-6 (issue)
    Zs, Zt, gamma = _problem(300, 200, 5, 0.5, seed=1)
    K, kappa = _K_kappa(Zs, Zt, gamma)
    ref = solve_kmm(K, kappa, solver="cvxpy")
    fast = solve_kmm(K, kappa, solver=solver)
    assert "cvxpy" in ref.solver and "cvxpy" not in fast.solver
    assert _rel(fast.objective, ref.objective) < 1e-6
    for sol in (ref, fast):
        _assert_exact_bounds(sol.beta, 1000.0, default_eps(300))


def test_bound_B_binds_and_holds_exactly() -> None:
    # a strong shift with B = 3: the unconstrained optimum has weights near 30 (see the default
    # solve below), so B must bind; both routes must agree (1e-6) and respect B exactly
    Zs, Zt, gamma = _problem(250, 200, 4, 1.0, seed=2)
    K, kappa = _K_kappa(Zs, Zt, gamma)
    free = solve_kmm(K, kappa, solver="cvxpy")
    assert free.beta.max() > 10.0
    ref = solve_kmm(K, kappa, B=3.0, solver="cvxpy")
    fast = solve_kmm(K, kappa, B=3.0, solver="auto")
    assert fast.solver == "lbfgsb+pdas"  # the active-set polish handles the upper bound itself
    assert _rel(fast.objective, ref.objective) < 1e-6
    for sol in (ref, fast):
        _assert_exact_bounds(sol.beta, 3.0, default_eps(250))
        assert np.sum(sol.beta >= 3.0 - 1e-9) >= 5  # B is active for several rows


def test_sum_constraint_binds_and_holds_exactly() -> None:
    # a shift that makes the box optimum's Σβ land far from m; with eps = 0.01 the sum constraint must
    # bind: auto falls back to cvxpy, "lbfgsb" refuses, the result sits on the bound
    Zs, Zt, gamma = _problem(200, 200, 3, 1.5, seed=3)
    K, kappa = _K_kappa(Zs, Zt, gamma)
    free_sum = solve_kmm(K, kappa, solver="cvxpy").beta.sum()
    assert abs(free_sum - 200) > 200 * 0.05
    eps = 0.01
    auto = solve_kmm(K, kappa, eps=eps, solver="auto")
    assert auto.solver.startswith("lbfgsb") and "cvxpy" in auto.solver
    _assert_exact_bounds(auto.beta, 1000.0, eps)
    assert abs(auto.beta.sum() - 200) == pytest.approx(200 * eps, rel=1e-6)  # on the bound
    # an independent interior-point reference agrees on the objective
    other = solve_kmm(K, kappa, eps=eps, solver="cvxpy", cvxpy_solver="CLARABEL")
    _assert_exact_bounds(other.beta, 1000.0, eps)
    assert _rel(auto.objective, other.objective) < 1e-6
    with pytest.raises(ValueError, match="sum constraint binds"):
        solve_kmm(K, kappa, eps=eps, solver="lbfgsb")


@settings(
    max_examples=15, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    m=st.integers(5, 40),
    B=st.floats(1.0, 50.0),
    eps=st.floats(1e-6, 1.5),
    shift=st.floats(0.0, 2.0),
    seed=st.integers(0, 10_000),
)
def test_bounds_hold_exactly_on_random_problems(m: int, B: float, eps: float, shift: float, seed: int) -> None:
    # property: whatever the route, the returned β satisfies KMM eq. 12's constraints exactly and the
    # fast route's objective is never worse than the reference by more than 1e-6 relative
    Zs, Zt, gamma = _problem(m, 30, 2, shift, seed)
    K, kappa = _K_kappa(Zs, Zt, gamma)
    ref = solve_kmm(K, kappa, B=B, eps=eps, solver="cvxpy")
    fast = solve_kmm(K, kappa, B=B, eps=eps, solver="auto")
    for sol in (ref, fast):
        _assert_exact_bounds(sol.beta, B, eps)
    assert fast.objective <= ref.objective + 1e-6 * abs(ref.objective)


def test_identical_sets_give_unit_weights() -> None:
    # source == target: κ = K·1, so β = 1 zeroes the gradient Kβ − κ — the optimum (KMM eq. 12)
    rng = np.random.default_rng(4)
    X = rng.normal(size=(150, 4))
    est = KMM().fit(X, X)
    K = rbf_kernel(est.kernel_.transform(X), gamma=est.gamma_)
    kappa = K.sum(axis=1)
    assert _rel(est.solutions_[0].objective, kmm_objective(K, kappa, np.ones(150))) < 1e-9
    np.testing.assert_allclose(est.weights_, 1.0, atol=1e-2)
    assert est.mmd2_before_ == pytest.approx(0.0, abs=1e-12)


def test_objective_is_mmd_up_to_constants() -> None:
    # KMM §3 (display above eq. 12): MMD²(β) = (2/m²)·(½βᵀKβ − κᵀβ) + 1ᵀK_tt1/m'² — two code paths
    Zs, Zt, gamma = _problem(60, 40, 3, 0.7, seed=5)
    K, kappa = _K_kappa(Zs, Zt, gamma)
    beta = solve_kmm(K, kappa).beta
    tt = rbf_kernel(Zt, Zt, gamma=gamma).sum() / 40**2
    mmd_path = mmd2_many(Zs, Zt, gamma, beta[:, None])[0]
    assert mmd_path == pytest.approx(2 / 60**2 * kmm_objective(K, kappa, beta) + tt, rel=1e-10)


def test_kmm_reduces_mmd_and_is_transductive() -> None:
    rng = np.random.default_rng(6)
    Xs, Xt = rng.normal(size=(300, 3)), rng.normal(loc=0.6, size=(250, 3))
    est = KMM().fit(Xs, Xt)
    assert est.mmd2_after_ < 0.1 * est.mmd2_before_
    assert est.weights_.mean() == pytest.approx(1.0, abs=1e-12)
    with pytest.raises(WeightsUnavailableError, match="KMM weights only the source rows"):
        est.predict_weights(Xs)
    assert issubclass(WeightsUnavailableError, NotImplementedError)


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


def test_ensemble_kmm_equals_its_fanned_out_pieces() -> None:
    # KMM(chunk_size) must equal the flow's recipe: shared kernel → chunk_indices → kmm_chunk → combine
    rng = np.random.default_rng(9)
    Xs, Xt = rng.normal(size=(500, 4)), rng.normal(loc=0.5, size=(300, 4))
    est = KMM(chunk_size=200, random_state=3).fit(Xs, Xt)
    kern = shared_kernel(Xs, Xt)
    Zs, Zt = kern.transform(Xs), kern.transform(Xt)
    chunks = chunk_indices(500, 200, random_state=3)
    betas = [kmm_chunk(Zs[c], Zt, gamma=kern.gamma) for c in chunks]
    np.testing.assert_array_equal(est.beta_, combine_chunks(500, chunks, betas))
    for c, beta in zip(chunks, betas, strict=True):
        _assert_exact_bounds(beta, 1000.0, default_eps(len(c)))  # each chunk's own constraints
    assert est.mmd2_after_ < 0.2 * est.mmd2_before_


def test_kmm_parameter_errors_are_clear() -> None:
    Zs, Zt, gamma = _problem(20, 20, 2, 0.0, seed=0)
    K, kappa = _K_kappa(Zs, Zt, gamma)
    with pytest.raises(ValueError, match="infeasible"):
        solve_kmm(K, kappa, B=0.5, eps=0.1)  # Σβ ≤ m·0.5 < m·0.9
    with pytest.raises(ValueError, match="eps must be at least"):
        solve_kmm(K, kappa, eps=0.0)
    with pytest.raises(ValueError, match="solver must be"):
        solve_kmm(K, kappa, solver="newton")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="target set has 0 rows"):
        kmm_chunk(Zs, Zt[:0], gamma=gamma)
    with pytest.raises(ValueError, match="chunk_size"):
        KMM(chunk_size=1).fit(Zs, Zt)


@pytest.mark.slow
def test_fast_route_matches_reference_at_benchmark_size() -> None:
    # benchmarks/kmm.py's setting (d = 10, m = m' = 2000): agreement 1e-6 and exact bounds
    Zs, Zt, gamma = _problem(2000, 2000, 10, 0.3, seed=20)
    K, kappa = _K_kappa(Zs, Zt, gamma)
    ref = solve_kmm(K, kappa, solver="cvxpy")
    fast = solve_kmm(K, kappa, solver="auto")
    assert _rel(fast.objective, ref.objective) < 1e-6
    for sol in (ref, fast):
        _assert_exact_bounds(sol.beta, 1000.0, default_eps(2000))


@pytest.mark.slow
def test_ensemble_kmm_is_close_to_the_exact_optimum() -> None:
    # ensemble β (chunks of 1000) is feasible for the full problem (each chunk's ε is below the full
    # problem's), so its objective can only be ≥ the exact optimum; benchmarks/kmm.py measured a
    # relative gap of 2e-5 at m = 5000 — allow 1e-3 here — and MMD² far below the unweighted one
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
