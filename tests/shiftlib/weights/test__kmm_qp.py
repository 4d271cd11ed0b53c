"""The KMM QP solver (shiftlib.weights._kmm_qp, reached through solve_kmm): KMM eq. 12's κ, ε and duality gap
by hand, the fast active-set route against a cvxpy reference, exact bounds, the tie-break, the fallbacks and
the route record."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.linalg import solve_triangular
from scipy.optimize import lsq_linear
from scipy.stats import spearmanr
from sklearn.metrics.pairwise import rbf_kernel

from shiftlib.kernels import mmd2_many
from shiftlib.weights import (
    KMM,
    default_eps,
    duality_gap,
    kmm_chunk,
    kmm_kappa,
    kmm_objective,
    shared_kernel,
    solve_kmm,
)
from shiftlib.weights import _kmm_qp as kmm_module
from tests.shiftlib.weights.conftest import _assert_exact_bounds, _K_kappa, _problem, _rel


def test_default_eps_is_the_papers_choice() -> None:
    # KMM §4.2: ε = (√m − 1)/√m; m = 100 → 0.9
    assert default_eps(100) == pytest.approx(0.9, abs=1e-15)


def test_kappa_matches_its_definition() -> None:
    # KMM eq. 12: κ_i = (m/m') Σ_j k(x_i, x'_j), here by an explicit double loop; the default float64
    # blocks agree to rounding, float32 blocks (summed in float64) to 1e-6
    Zs, Zt, gamma = _problem(7, 5, 2, 0.5, seed=0)
    manual = np.array([sum(np.exp(-gamma * np.sum((x - y) ** 2)) for y in Zt) for x in Zs]) * 7 / 5
    np.testing.assert_allclose(kmm_kappa(Zs, Zt, gamma), manual, rtol=1e-12)
    np.testing.assert_allclose(kmm_kappa(Zs, Zt, gamma, dtype=np.float32), manual, rtol=1e-6)


def test_duality_gap_by_hand() -> None:
    # m = 2, B = 10, eps = 0.5 → 1 ≤ Σβ ≤ 3. g = (−2, 1), β = (1, 0.5): gᵀβ = −1.5; the feasible minimizer
    # of gᵀβ' puts 3 on row 0 (Σ ≤ 3): −6 → gap 4.5. With g = (2, 1) the sum must still reach 1, on the
    # cheaper row 1: min = 1, gᵀβ = 2.5 → gap 1.5
    assert duality_gap(np.array([-2.0, 1.0]), np.array([1.0, 0.5]), B=10.0, eps=0.5) == pytest.approx(4.5)
    assert duality_gap(np.array([2.0, 1.0]), np.array([1.0, 0.5]), B=10.0, eps=0.5) == pytest.approx(1.5)


def _reference_qp(K: np.ndarray, kappa: np.ndarray, B: float, eps: float) -> tuple[float, np.ndarray]:
    """The dense QP of KMM eq. 12 written out in cvxpy and solved by CLARABEL (interior point) at tight
    tolerances — independent of solve_kmm's code. Returns (objective ½βᵀKβ − κᵀβ, β)."""
    m = len(kappa)
    beta = cp.Variable(m)
    L = np.linalg.cholesky(K + 1e-12 * np.eye(m))  # ‖Lᵀβ‖² = βᵀKβ: a second-order-cone form, not quad_form
    prob = cp.Problem(
        cp.Minimize(0.5 * cp.sum_squares(L.T @ beta) - kappa @ beta),
        [beta >= 0, beta <= B, cp.sum(beta) >= m * (1 - eps), cp.sum(beta) <= m * (1 + eps)],
    )
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    assert prob.status == cp.OPTIMAL
    b = np.asarray(beta.value)
    return kmm_objective(K, kappa, b), b


@pytest.mark.heavy
def test_objective_matches_a_reference_dense_qp_at_m500() -> None:
    # issue: KMM's objective within 1e-6 (relative) of a reference solve of the dense QP at m = 500;
    # KMM §4.1's shift in 5 dimensions. Three routes: solve_kmm on the float64 K, κ ("auto" and the
    # previous "lbfgsb"), and KMM.fit end to end (its own float32-summed κ), scored on the float64 problem
    rng = np.random.default_rng(30)
    Xs, Xt = rng.normal(0.5, 0.5, size=(500, 5)), rng.normal(0.0, 0.3, size=(500, 5))
    est = KMM().fit(Xs, Xt)
    Zs, Zt = est.kernel_.transform(Xs), est.kernel_.transform(Xt)
    K, kappa = _K_kappa(Zs, Zt, est.gamma_)
    f_ref, _ = _reference_qp(K, kappa, 1000.0, default_eps(500))
    auto = solve_kmm(K, kappa)
    lbfgsb = solve_kmm(K, kappa, solver="lbfgsb")
    f_fit = kmm_objective(K, kappa, est.beta_)
    rels = {"auto": _rel(auto.objective, f_ref), "lbfgsb": _rel(lbfgsb.objective, f_ref), "KMM.fit": _rel(f_fit, f_ref)}
    print(f"\nm=500 reference (CLARABEL) {f_ref:.10g}; relative differences: "
          + ", ".join(f"{k} {v:.2e}" for k, v in rels.items()) + f"; auto certified gap {auto.gap:.2e}")
    assert auto.solver.startswith("active-set") and auto.n_kernel_columns is not None
    assert auto.n_kernel_columns < 500
    assert all(v < 1e-6 for v in rels.values())
    # certified: f(β) − f* ≤ gap ≤ 1e-6·|f| (the tie-break may spend up to 1e-6 of the objective, see
    # test_tie_break_picks_the_ridge_solution_within_1e6); the reference cannot be below f*
    assert auto.gap < 1e-6 * abs(auto.objective)
    assert auto.objective - f_ref <= auto.gap + 1e-9 * abs(f_ref)
    for sol in (auto, lbfgsb):
        _assert_exact_bounds(sol.beta, 1000.0, default_eps(500))


def _flat_1d_problem() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """KMM §4.1's shift in 1-D, m = m' = 300: K numerically rank-deficient, so eq. 12's optimum is a flat
    set. Returns (K, κ, log true ratio at the source rows)."""
    rng = np.random.default_rng(0)
    Xs, Xt = rng.normal(0.5, 0.5, size=(300, 1)), rng.normal(0.0, 0.3, size=(300, 1))
    kern = shared_kernel(Xs, Xt)
    K, kappa = _K_kappa(kern.transform(Xs), kern.transform(Xt), kern.gamma)
    x = Xs[:, 0]
    return K, kappa, (-0.5 * x**2 / 0.09 - np.log(0.3)) - (-0.5 * (x - 0.5) ** 2 / 0.25 - np.log(0.5))


def _box_reference(K: np.ndarray, kappa: np.ndarray, lam: float) -> np.ndarray:
    """argmin of ½βᵀKβ − κᵀβ + ½λ‖β − 1‖² on 0 ≤ β ≤ 1000, exactly, by an active-set method that is not the
    package's code: with H = K + λI = LLᵀ (Cholesky) and c = κ + λ·1 the objective is
    ½‖Lᵀβ − L⁻¹c‖² + const, a bounded least-squares problem that scipy's BVLS (Stark–Parker) solves to
    rounding. Its KKT conditions are checked here, so the reference certifies itself. (L-BFGS-B, used
    before, stops where the last bits of the BLAS kernel lead it: projected gradient 4e-6 with OpenBLAS's
    Haswell kernels, 1.5e-4 — β off by 0.025 — with SkylakeX, 2.4e-3 with Sandybridge.)"""
    H, c = K + lam * np.eye(len(kappa)), kappa + lam
    L = np.linalg.cholesky(H)
    res = lsq_linear(L.T, solve_triangular(L, c, lower=True), bounds=(0.0, 1000.0), method="bvls", tol=1e-14)
    beta = res.x
    # KKT of the box QP: the projected gradient step P(β − ∇) − β vanishes at the (unique) minimizer
    step = np.clip(beta - (H @ beta - c), 0.0, 1000.0) - beta
    assert np.max(np.abs(step)) < 1e-9 * max(1.0, float(np.max(np.abs(c))))
    return beta


@pytest.mark.slow  # default-suite budget: 15–37 s each beside other work (--durations)
@pytest.mark.heavy
def test_tie_break_picks_the_ridge_solution_within_1e6() -> None:
    # "auto" returns the minimizer of ½βᵀKβ − κᵀβ + ½λ‖β − 1‖² for the largest λ of _TIE_RIDGES whose certified
    # excess over eq. 12's optimum is < 1e-6·|f|: checked against a lower bound on eq. 12's optimum and against
    # an exact solve of the ridged problem (strictly convex, so its β is unique and comparable entry by entry)
    K, kappa, log_ratio = _flat_1d_problem()
    sol = solve_kmm(K, kappa)
    assert sol.solver.startswith("active-set+ridge")
    lam = float(sol.solver.removeprefix("active-set+ridge"))
    assert lam in kmm_module._TIE_RIDGES
    eps = default_eps(300)
    # the ridged problem's minimizer on the box by BVLS (CLARABEL reports "optimal_inaccurate" on this
    # rank-deficient K); the sum constraint does not bind there (checked)
    beta_ridge = _box_reference(K, kappa, lam)
    assert 300 * (1 - eps) < beta_ridge.sum() < 300 * (1 + eps)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kmm_module, "_TIE_RIDGES", ())
        vertex = solve_kmm(K, kappa)  # the first solve alone
    # a lower bound on f*: the vertex is feasible (checked), so f* ≥ f(vertex) − its Frank–Wolfe gap
    # (duality_gap is checked by hand in test_duality_gap_by_hand); L-BFGS-B at λ = 0 takes seconds here
    _assert_exact_bounds(vertex.beta, 1000.0, eps)
    f_ref = vertex.objective - duality_gap(K @ vertex.beta - kappa, vertex.beta, B=1000.0, eps=eps)
    print(f"\ntie-break ridge {lam:g}: objective excess over a lower bound on f* {_rel(sol.objective, f_ref):.1e} (certified "
          f"{sol.gap / abs(sol.objective):.1e}), zero weights {np.mean(sol.beta == 0):.0%} vs "
          f"{np.mean(vertex.beta == 0):.0%} without, max |Δβ| to the ridged reference "
          f"{np.max(np.abs(sol.beta - beta_ridge)):.1e}")
    assert sol.objective - f_ref <= sol.gap + 1e-9 * abs(f_ref)
    assert sol.gap < 1e-6 * abs(sol.objective)
    np.testing.assert_allclose(sol.beta, beta_ridge, atol=1e-3 * sol.beta.max())
    _assert_exact_bounds(sol.beta, 1000.0, eps)
    # measured: 29% zero weights and Spearman 0.94 with the true ratio, against 90% and 0.21 without
    assert np.mean(vertex.beta == 0) > 0.8 and np.mean(sol.beta == 0) < 0.4
    assert spearmanr(sol.beta, log_ratio).statistic > 0.9


@pytest.mark.heavy
def test_tie_break_does_not_depend_on_the_row_order() -> None:
    # the ridged problem has a unique minimizer, so permuting the source rows permutes β (to solver accuracy)
    K, kappa, _ = _flat_1d_problem()
    perm = np.random.default_rng(1).permutation(300)
    a = solve_kmm(K, kappa)
    b = solve_kmm(K[np.ix_(perm, perm)], kappa[perm])
    assert a.solver == b.solver
    np.testing.assert_allclose(b.beta, a.beta[perm], atol=1e-6 * a.beta.max())


@pytest.mark.heavy
def test_bound_B_binds_and_holds_exactly() -> None:
    # m = 500, a strong shift with B = 3: the default solve (B = 1000) has weights above 10, so B = 3 must
    # bind; all routes agree with the reference (1e-6) and respect every bound to 1e-8 — in fact exactly
    Zs, Zt, gamma = _problem(500, 400, 4, 1.0, seed=2)
    K, kappa = _K_kappa(Zs, Zt, gamma)
    assert solve_kmm(K, kappa).beta.max() > 10.0
    f_ref, beta_ref = _reference_qp(K, kappa, 3.0, default_eps(500))
    assert np.min(beta_ref) >= -1e-8 and np.max(beta_ref) <= 3.0 + 1e-8  # the reference too, to 1e-8
    sols = {s: solve_kmm(K, kappa, B=3.0, solver=s) for s in ("auto", "cvxpy")}  # type: ignore[arg-type]
    print("\nB = 3 binds:", {s: (sol.solver, int(np.sum(sol.beta >= 3.0)), f"{_rel(sol.objective, f_ref):.1e}")
                             for s, sol in sols.items()})
    for sol in sols.values():
        assert _rel(sol.objective, f_ref) < 1e-6
        _assert_exact_bounds(sol.beta, 3.0, default_eps(500))
        assert np.sum(sol.beta >= 3.0 - 1e-6) >= 5  # B is active for several rows
    assert np.sum(sols["auto"].beta == 3.0) >= 5  # the active-set route puts them on B exactly


@pytest.mark.heavy
@pytest.mark.parametrize("direction", ["below", "above"])
def test_sum_constraint_binds_and_holds_exactly(direction: str) -> None:
    # target shifted by 2 in 3-D: the box optimum's Σβ ≈ 155, far below m = 200 ("below"); the same K with
    # κ·1.6 puts it above m ("above", a QP with a larger linear term). With eps = 0.01 the sum constraint
    # must bind: "auto" meets it by its multiplier search, "lbfgsb" refuses, the result sits on the bound
    Zs, Zt, gamma = _problem(200, 200, 3, 2.0, seed=3)
    K, kappa = _K_kappa(Zs, Zt, gamma)
    if direction == "above":
        kappa = 1.6 * kappa
    free_sum = solve_kmm(K, kappa).beta.sum()
    assert (free_sum > 200 * 1.05) if direction == "above" else (free_sum < 200 * 0.95)
    eps = 0.01
    auto = solve_kmm(K, kappa, eps=eps)
    assert auto.solver.startswith("active-set")
    _assert_exact_bounds(auto.beta, 1000.0, eps)
    assert auto.beta.sum() == pytest.approx(200 * (1 + eps if direction == "above" else 1 - eps), rel=1e-9)
    f_ref, _ = _reference_qp(K, kappa, 1000.0, eps)
    assert _rel(auto.objective, f_ref) < 1e-6
    with pytest.raises(ValueError, match="sum constraint binds"):
        solve_kmm(K, kappa, eps=eps, solver="lbfgsb")


@pytest.mark.heavy
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


def test_objective_is_mmd_up_to_constants() -> None:
    # KMM §3 (display above eq. 12): MMD²(β) = (2/m²)·(½βᵀKβ − κᵀβ) + 1ᵀK_tt1/m'² — two code paths
    Zs, Zt, gamma = _problem(60, 40, 3, 0.7, seed=5)
    K, kappa = _K_kappa(Zs, Zt, gamma)
    beta = solve_kmm(K, kappa).beta
    tt = rbf_kernel(Zt, Zt, gamma=gamma).sum() / 40**2
    mmd_path = mmd2_many(Zs, Zt, gamma, beta[:, None])[0]
    assert mmd_path == pytest.approx(2 / 60**2 * kmm_objective(K, kappa, beta) + tt, rel=1e-10)


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


def test_failed_cvxpy_solver_is_retried_with_another() -> None:
    # a solver failure retries once with another installed solver; the route names the one that worked
    Zs, Zt, gamma = _problem(40, 30, 2, 0.5, seed=11)
    K, kappa = _K_kappa(Zs, Zt, gamma)
    calls: list[str] = []
    real_solve = cp.Problem.solve

    def flaky(self: cp.Problem, *args: object, solver: str | None = None, **kwargs: object) -> object:
        calls.append(str(solver))
        if solver == "CLARABEL":
            raise cp.error.SolverError("CLARABEL failed (monkeypatched)")
        return real_solve(self, *args, solver=solver, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cp.Problem, "solve", flaky)
        sol = solve_kmm(K, kappa, solver="cvxpy", cvxpy_solver="CLARABEL")
    assert calls[0] == "CLARABEL" and len(calls) == 2
    assert sol.solver == f"cvxpy:{calls[1]}" and calls[1] != "CLARABEL"
    _assert_exact_bounds(sol.beta, 1000.0, default_eps(40))
    assert _rel(sol.objective, solve_kmm(K, kappa).objective) < 1e-6


def test_both_cvxpy_solvers_failing_names_both() -> None:
    Zs, Zt, gamma = _problem(40, 30, 2, 0.5, seed=12)
    K, kappa = _K_kappa(Zs, Zt, gamma)

    def broken(self: cp.Problem, *args: object, solver: str | None = None, **kwargs: object) -> object:
        raise cp.error.SolverError(f"{solver} is broken (monkeypatched)")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cp.Problem, "solve", broken)
        with pytest.raises(RuntimeError, match=r"cvxpy solver CLARABEL failed .*retried with (OSQP|HIGHS|SCS), which also failed"):
            solve_kmm(K, kappa, solver="cvxpy", cvxpy_solver="CLARABEL")


def test_auto_falls_back_to_cvxpy_when_the_active_set_fails() -> None:
    # the fast route failing (here forced) hands the problem to the reference solver; same optimum
    Zs, Zt, gamma = _problem(60, 40, 3, 0.5, seed=13)
    K, kappa = _K_kappa(Zs, Zt, gamma)

    def fail(*args: object, **kwargs: object) -> None:
        raise kmm_module._Singular

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kmm_module, "_solve_active_set", fail)
        sol = solve_kmm(K, kappa)
    assert sol.solver == "active-set->cvxpy:CLARABEL"
    assert _rel(sol.objective, solve_kmm(K, kappa).objective) < 1e-6
    _assert_exact_bounds(sol.beta, 1000.0, default_eps(60))


@pytest.mark.slow
def test_fast_route_matches_reference_at_benchmark_size() -> None:
    # d = 10, m = m' = 2000, a mild mean shift (a dense solution): agreement 1e-6 and exact bounds
    Zs, Zt, gamma = _problem(2000, 2000, 10, 0.3, seed=20)
    K, kappa = _K_kappa(Zs, Zt, gamma)
    ref = solve_kmm(K, kappa, solver="cvxpy")
    fast = solve_kmm(K, kappa, solver="auto")
    assert _rel(fast.objective, ref.objective) < 1e-6
    for sol in (ref, fast):
        _assert_exact_bounds(sol.beta, 1000.0, default_eps(2000))


def test_route_is_data_and_its_text_is_the_solver_string() -> None:
    # the route is a frozen dataclass (issue 16: no concatenated strings); solver is its text for logs
    from shiftlib.weights.kmm import Method, Route

    Zs, Zt, gamma = _problem(60, 40, 3, 0.5, seed=13)
    K, kappa = _K_kappa(Zs, Zt, gamma)
    for solver, method in (("auto", Method.ACTIVE_SET), ("cvxpy", Method.CVXPY)):
        sol = solve_kmm(K, kappa, solver=solver)
        assert sol.route is not None and sol.route.method is method
        assert sol.solver == str(sol.route)
    assert str(Route(Method.ACTIVE_SET, tie_ridge=1e-3)) == "active-set+ridge0.001"
    assert str(Route(Method.ACTIVE_SET, fallback=True, cvxpy_solver="CLARABEL")) == "active-set->cvxpy:CLARABEL"
    assert str(Route(Method.LBFGSB, polished=True)) == "lbfgsb+pdas"
