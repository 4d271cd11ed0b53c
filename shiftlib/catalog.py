"""Where each registered weighting method and selector lives, by name, importable without numpy or scikit-learn.

The CLI's parser and the Prefect form (``flows/config.py``) read the names from here at import, when
scikit-learn must not be loaded yet (a refused input starts nothing heavy); ``shiftlib.weights.WEIGHTERS`` and
``shiftlib.selection.SELECTORS`` are built from the same tables, and the tasks and the flow dispatch through
those. So a new weighting method or selector is its module, one line here and its test (docs/extending.md)."""

from __future__ import annotations

__all__ = ["DEFAULT_SELECTOR", "EVALUATION_ONLY_WEIGHTERS", "LABELED_SELECTOR", "ROWS_ONLY_WEIGHTERS",
           "SELECTION_METHODS", "SOURCE_CV", "WEIGHTING_METHODS"]

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

#: registry name → ``module:Class`` of every label-free selector (``shiftlib.selection.SELECTORS`` in this order):
#: what the config's ``selectors`` and ``selector`` may name
SELECTION_METHODS: dict[str, str] = {
    "rt": "shiftlib.selection.selectors:ReverseTestingSelector",
    "trcv": "shiftlib.selection.selectors:TrCVSelector",
    "scv": "shiftlib.selection.selectors:SourceCVSelector",
    "wcv": "shiftlib.selection.selectors:WeightedCVSelector",
}
#: source k-fold CV: fewlabel's prior, what the champion gate re-scores with when the deciding selector is not a
#: label-free one, and the selector whose folds the estimation stage already fits (selection reads them back)
SOURCE_CV = "scv"
#: the deciding selector by default (source CV ordered learners best in reports/rt_replication.md)
DEFAULT_SELECTOR = SOURCE_CV
#: the selector that decides with a label budget's filled labels (``shiftlib.selection.fewlabel``): the flow adds
#: it when target labels are given; it is not label-free, so neither a registered selector nor a config choice
LABELED_SELECTOR = "fewlabel"
