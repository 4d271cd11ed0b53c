"""Importance-weight (density-ratio) estimators with one shared base (docs/architecture.md "Importance weights").

Every estimator: ``fit(X_source, X_target) -> self``; ``weights_`` (one per source row, mean 1),
``ess_``, ``mmd2_before_``/``mmd2_after_`` under one shared kernel; ``predict_weights(X)`` where the
method allows it.

========================  ==============================================  =====================
name                      method                                          predict_weights
========================  ==============================================  =====================
``"kmm"``                 kernel mean matching (KMM eq. 12), ensemble     no
``"discriminative"``      source-vs-target classifier (DL eq. 7)          yes
``"ssb"``                 ``1/p(s=1|x)`` (DL Prop. 2, §5)                 classifier mode
``"kde"``                 ratio of Gaussian KDEs (Shimodaira 2000)        yes
``"oracle"``              ``1/P(s=1|x)`` from the true selection model    no
========================  ==============================================  =====================
"""

from __future__ import annotations

import importlib
from typing import Any

from shiftlib.catalog import ROWS_ONLY_WEIGHTERS, WEIGHTING_METHODS
from shiftlib.errors import UnknownNameError

from ._base import (
    LOW_ESS_SHARE,
    BaseWeighter,
    SharedKernel,
    WeightsUnavailableError,
    check_pair,
    effective_sample_size,
    median_heuristic_gamma,
    mmd2,
    normalize_weights,
    shared_kernel,
    weights_caution,
)
from .discriminative import DiscriminativeWeights
from .kde import KDEWeights
from .kmm import (
    KMM,
    KMMSolution,
    bound_violation,
    chunk_indices,
    combine_chunks,
    default_eps,
    duality_gap,
    kmm_chunk,
    kmm_kappa,
    kmm_objective,
    kmm_polish,
    solve_kmm,
)
from .oracle import OracleWeights
from .ssb import SSBWeights

__all__ = [
    "LOW_ESS_SHARE",
    "KMM",
    "TARGET_WEIGHTERS",
    "WEIGHTERS",
    "BaseWeighter",
    "DiscriminativeWeights",
    "KDEWeights",
    "KMMSolution",
    "OracleWeights",
    "SSBWeights",
    "SharedKernel",
    "WeightsUnavailableError",
    "bound_violation",
    "check_pair",
    "chunk_indices",
    "combine_chunks",
    "default_eps",
    "duality_gap",
    "effective_sample_size",
    "weights_caution",
    "kmm_chunk",
    "kmm_kappa",
    "kmm_objective",
    "kmm_polish",
    "make_weighter",
    "median_heuristic_gamma",
    "mmd2",
    "normalize_weights",
    "shared_kernel",
    "solve_kmm",
]

def _class(path: str) -> type[BaseWeighter]:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


#: the weighting methods by name, built from ``shiftlib.catalog.WEIGHTING_METHODS`` (the one place names live)
WEIGHTERS: dict[str, type[BaseWeighter]] = {name: _class(path) for name, path in WEIGHTING_METHODS.items()}
#: the weighting methods a run can fit from its source and target rows alone (not the evaluation-only ones,
#: which need what only a simulated bias knows): what ``weighting`` may name
TARGET_WEIGHTERS: tuple[str, ...] = ROWS_ONLY_WEIGHTERS


def make_weighter(name: str, **params: Any) -> BaseWeighter:
    """Build an unfitted weighter by registry name (see ``WEIGHTERS``), e.g. ``make_weighter("kmm", B=10)``.

    Parameters
    ----------
    name : str
        A key of ``WEIGHTERS``.
    **params : dict
        Constructor parameters of that weighter.

    Returns
    -------
    BaseWeighter
        The unfitted weighter.

    Raises
    ------
    UnknownNameError
        If ``name`` is not in ``WEIGHTERS``.
    """
    if name not in WEIGHTERS:
        raise UnknownNameError(f"unknown weighter {name!r}; choose one of {sorted(WEIGHTERS)}")
    return WEIGHTERS[name](**params)
