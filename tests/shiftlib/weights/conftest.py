"""Helpers shared by the tests of shiftlib.weights (imported by name: ``from tests.shiftlib.weights.conftest import …``):
the 1-d Gaussian shift with its analytic density ratio, and the KMM problems with the checks of KMM eq. 12."""

from __future__ import annotations

import numpy as np
from sklearn.metrics.pairwise import rbf_kernel

from shiftlib.weights import bound_violation, shared_kernel

# --------------------------------------------------------------------------------------------------
# a 1-d mean shift with a known density ratio
# --------------------------------------------------------------------------------------------------


def _shift_1d(m: int, mt: int, mu_t: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Source N(0, 1), target N(mu_t, 1), as column vectors."""
    rng = np.random.default_rng(seed)
    return rng.normal(0.0, 1.0, size=(m, 1)), rng.normal(mu_t, 1.0, size=(mt, 1))


def _analytic_ratio(x: np.ndarray, mu_t: float) -> np.ndarray:
    # N(x; mu_t, 1) / N(x; 0, 1) = exp(mu_t·x − mu_t²/2) (ratio of the two Gaussian densities)
    return np.exp(mu_t * x - mu_t**2 / 2)


# --------------------------------------------------------------------------------------------------
# KMM eq. 12 problems and their checks
# --------------------------------------------------------------------------------------------------


def _problem(m: int, mt: int, d: int, shift: float, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Standardized source N(0, I) and target N(shift·1, I) with the shared kernel's gamma."""
    rng = np.random.default_rng(seed)
    Xs = rng.normal(size=(m, d))
    Xt = rng.normal(loc=shift, size=(mt, d))
    kern = shared_kernel(Xs, Xt)
    return kern.transform(Xs), kern.transform(Xt), kern.gamma


def _K_kappa(Zs: np.ndarray, Zt: np.ndarray, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    # both in float64 with scikit-learn, independently of the solver's own kernel code
    return rbf_kernel(Zs, Zs, gamma=gamma), rbf_kernel(Zs, Zt, gamma=gamma).sum(axis=1) * (len(Zs) / len(Zt))


def _rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


def _assert_exact_bounds(beta: np.ndarray, B: float, eps: float) -> None:
    # KMM eq. 12 constraints, checked with no tolerance at all
    m = beta.shape[0]
    assert beta.min() >= 0.0
    assert beta.max() <= B
    assert m * (1 - eps) <= beta.sum() <= m * (1 + eps)
    assert bound_violation(beta, B=B, eps=eps) == 0.0

