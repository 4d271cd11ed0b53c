"""Where each registered weighting method lives, by name, importable without numpy or scikit-learn.

The CLI's parser and the Prefect form (``flows/config.py``) read the names from here at import, when
scikit-learn must not be loaded yet (a refused input starts nothing heavy); ``shiftlib.weights.WEIGHTERS`` is
built from the same table. So a new weighting method is its module, one line here and its test."""

from __future__ import annotations

__all__ = ["EVALUATION_ONLY_WEIGHTERS", "ROWS_ONLY_WEIGHTERS", "WEIGHTING_METHODS"]

#: registry name → ``module:Class`` of every weighting method (``shiftlib.weights.WEIGHTERS`` in this order)
WEIGHTING_METHODS: dict[str, str] = {
    "kmm": "shiftlib.weights.kmm:KMM",
    "discriminative": "shiftlib.weights.discriminative:DiscriminativeWeights",
    "ssb": "shiftlib.weights.ssb:SSBWeights",
    "kde": "shiftlib.weights.kde:KDEWeights",
    "oracle": "shiftlib.weights.oracle:OracleWeights",
}
#: methods that need what only a simulated bias knows (the true selection probabilities): evaluation only
EVALUATION_ONLY_WEIGHTERS: frozenset[str] = frozenset({"oracle"})
#: the methods a run can fit from its source and target rows alone: what ``weighting`` may name
ROWS_ONLY_WEIGHTERS: tuple[str, ...] = tuple(n for n in WEIGHTING_METHODS if n not in EVALUATION_ONLY_WEIGHTERS)
