"""The fewest rows each stage and learner of a retrain run needs, checked on the class counts before any fit.

A run that starts must not fail in the middle for want of rows. Before anything runs, ``check_sizes``
compares the prepared tables' sizes with what each stage asks for:

* **drift** (``shiftlib.drift.detect_drift``): ``min_rows`` rows on each side (its default, 10) and
  ``2·n_splits`` pooled rows for the domain classifier;
* **source cross-validation** (the training stage's): at least 2 rows of every class; it runs on the
  estimation's ``cv_folds``-fold split when the largest class has that many rows (a rarer class is then in some
  holdout folds only), else ``shiftlib.cv.cv_metrics`` lowers its folds to the smallest class count;
* **selection folds** (SCV, WCV, TrCV: ``StratifiedKFold(selection_folds)``): at least ``selection_folds``
  source rows and one class with that many rows;
* **a learner with an inner stratified CV** (e.g. SVM's ``CalibratedClassifierCV(cv=5)``): every class
  needs ``cv`` rows in the smallest set the learner is fitted on — a training fold of the source CV or of
  the selection folds, where a class of ``c`` rows keeps ``c − ⌈c/k⌉``. A learner short of rows is
  *dropped* (named in ``dropped``), not failed later; when none is left the run is refused.

Stage shortfalls raise ``IngestError`` naming the stage, the count and the fix.

The numbers are kept here as constants (``DRIFT_MIN_ROWS``, ``DRIFT_SPLITS``, ``INNER_FOLDS``) rather than
read by importing ``shiftlib.drift`` / ``shiftlib.learners``, because those imports (scikit-learn, SciPy,
matplotlib) take seconds and a refusal must come in seconds; ``tests/flows/test_preflight.py`` checks that the
constants equal the live defaults (``detect_drift``'s signature, :func:`inner_folds` of every learner).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shiftlib._validation import counted
from shiftlib.budget import MAX_CLASSES, RARE_CLASS_ROWS
from shiftlib.ingest import IngestError

__all__ = ["DRIFT_MIN_ROWS", "DRIFT_SPLITS", "INNER_FOLDS", "MAX_CLASSES", "RARE_CLASS_ROWS", "SizePlan",
           "check_classes", "check_sizes", "inner_folds"]

FOLD_SELECTORS = ("scv", "wcv", "trcv")
DRIFT_MIN_ROWS = 10  # shiftlib.drift.detect_drift(min_rows=10): rows per side
DRIFT_SPLITS = 10  # detect_drift(n_splits=10): the domain classifier's folds, 2·n_splits pooled rows
INNER_FOLDS = {"SVM": 5}  # shiftlib.learners: SVM calibrates with CalibratedClassifierCV(cv=5); others: none


@dataclass(frozen=True)
class SizePlan:
    """Learners kept (in the given order) and the dropped ones with the sentence saying why.

    Parameters
    ----------
    learners : list of str
        Names of the learners kept, in the order given.
    dropped : dict of str to str, default {}
        Each dropped learner's name and the sentence saying why it was dropped.
    """

    learners: list[str]
    dropped: dict[str, str] = field(default_factory=dict)




def check_classes(counts: Mapping[Any, int], label: str, *, max_classes: int = MAX_CLASSES) -> list[str]:
    """Refuse a label with more than ``max_classes`` classes (``IngestError`` with the count and the fix);
    return a warning naming the classes with fewer than :data:`RARE_CLASS_ROWS` source rows and what they cost.

    Parameters
    ----------
    counts : Mapping
        Source rows per class.
    label : str
        Name of the label column, quoted in the error.
    max_classes : int, default MAX_CLASSES
        Most classes accepted.

    Returns
    -------
    list of str
        One warning sentence when some class has fewer than :data:`RARE_CLASS_ROWS` rows, else empty.

    Raises
    ------
    IngestError
        If there are more than ``max_classes`` classes.
    """
    if len(counts) > max_classes:
        raise IngestError(
            f"label {label!r} has {len(counts)} classes in the source, more than max_classes={max_classes}: merge "
            "rare classes (or map the label to fewer groups), or raise max_classes (--max-classes) knowing that "
            "estimation does K × K work per candidate")
    rare = sorted(((c, n) for c, n in counts.items() if n < RARE_CLASS_ROWS), key=lambda cn: (cn[1], str(cn[0])))
    if not rare:
        return []
    shown = ", ".join(f"{c!s} ({n})" for c, n in rare[:8]) + (f", … ({len(rare)} in all)" if len(rare) > 8 else "")
    return [f"classes with fewer than {RARE_CLASS_ROWS} source rows: {shown}; cross-validation folds hold "
            "so few rows of each that their accuracy, and the label-shift estimates, rest on those rows, and a "
            "learner that needs more rows per class is dropped"]


def inner_folds(estimator: Any) -> int:
    """Folds of a stratified CV the estimator runs inside ``fit`` (0 when none): found by walking the
    estimator's parameters for an integer ``cv`` (e.g. ``CalibratedClassifierCV(cv=5)`` in SVM).

    Parameters
    ----------
    estimator : estimator
        A scikit-learn estimator (``get_params(deep=True)`` is read).

    Returns
    -------
    int
        The largest integer ``cv`` (or ``…__cv``) parameter found, 0 when none.
    """
    folds = 0
    for key, value in estimator.get_params(deep=True).items():
        if (key == "cv" or key.endswith("__cv")) and isinstance(value, int) and not isinstance(value, bool):
            folds = max(folds, value)
    return folds


def _smallest_train_class(counts: Sequence[int], k: int) -> int:
    """Smallest per-class row count in a training fold of stratified k-fold: ``c − ⌈c/k⌉``."""
    return min(c - math.ceil(c / k) for c in counts)


def _why_folds(k: int, cv_folds: int, counts: list[int]) -> str:
    """Why the source CV has fewer folds than asked: its folds are lowered to the smallest class."""
    return f", lowered from {cv_folds} because the smallest class has {k} rows" if k < cv_folds and k == min(counts) else ""


def check_sizes(
    class_counts: Mapping[Any, int],
    n_target: int,
    learners: Sequence[str],
    *,
    cv_folds: int,
    selection_folds: int,
    selectors: Sequence[str],
) -> SizePlan:
    """Check the run's sizes (see the module docstring); returns the learners that can be fitted.

    ``class_counts``: source rows per class after ingest (and after any simulated bias); ``n_target``: target
    rows. Raises ``IngestError`` when a stage cannot run or no learner can be fitted.

    Parameters
    ----------
    class_counts : Mapping
        Source rows per class.
    n_target : int
        Target rows.
    learners : sequence of str
        Names of the learners asked for.
    cv_folds : int
        Folds of the source cross-validation (before it is lowered to the smallest class count).
    selection_folds : int
        Folds of the fold-based selectors (SCV, WCV, TrCV).
    selectors : sequence of str
        Names of the selectors asked for; ``selection_folds`` is checked only if one of them is fold-based.

    Returns
    -------
    SizePlan
        The learners that can be fitted and the dropped ones with the reason.

    Raises
    ------
    IngestError
        When a stage cannot run or no learner can be fitted.
    """
    counts = [int(c) for c in class_counts.values()]
    n_source = sum(counts)
    _check_drift_sizes(n_source, n_target)
    small = {c: n for c, n in class_counts.items() if n < 2}
    if small:
        shown = sorted((c.item() if isinstance(c, np.generic) else c for c in small), key=str)  # 9, not '9'
        raise IngestError(
            f"class(es) {shown} have only 1 source row; cross-validation needs at least 2 "
            "rows of every class — add rows or merge the rare class"
        )
    # the source CV's folds: the estimation's k-fold split when its largest class has k rows (a rarer class is in
    # some holdout folds only), else cv_metrics' folds lowered to the smallest class
    ks = [cv_folds if max(counts) >= cv_folds else min(cv_folds, min(counts))]
    if set(selectors) & set(FOLD_SELECTORS):
        if n_source < selection_folds or max(counts) < selection_folds:
            raise IngestError(
                f"selection_folds={selection_folds}, but the source has {n_source} rows and its largest class "
                f"{max(counts)}; lower selection_folds (a --config key) to at most {min(n_source, max(counts))} or add rows"
            )
        ks.append(selection_folds)
    kept, dropped = _fittable_learners(learners, counts, ks, cv_folds)
    if not kept:
        raise IngestError("no learner can be fitted on this data: " + "; ".join(dropped.values()))
    return SizePlan(kept, dropped)


def _check_drift_sizes(n_source: int, n_target: int) -> None:
    """Refuse tables too small for the drift stage: ``min_rows`` per side, ``2·n_splits`` pooled rows."""
    min_rows, n_splits = DRIFT_MIN_ROWS, DRIFT_SPLITS
    for side, n in (("source", n_source), ("target", n_target)):
        if n < min_rows:
            raise IngestError(
                f"the {side} table has {counted(n, 'row')}; the drift stage needs at least {min_rows} rows on each side "
                "(source and target) — add rows"
            )
    if n_source + n_target < 2 * n_splits:
        raise IngestError(f"source and target have {n_source + n_target} rows together; the drift stage's "
                          f"domain classifier needs at least {2 * n_splits} — add rows")


def _fittable_learners(learners: Sequence[str], counts: list[int], ks: list[int], cv_folds: int
                       ) -> tuple[list[str], dict[str, str]]:
    """Learners kept, and those dropped with why: an inner CV needs its folds' rows of each class."""
    kept, dropped = [], {}
    for name in learners:
        need = INNER_FOLDS.get(name, 0)
        have, k = min((_smallest_train_class(counts, k), k) for k in ks)
        if need and have < need:
            dropped[name] = (
                f"learner {name!r} dropped: it runs a {need}-fold stratified CV inside fit, which needs {need} "
                f"rows of each class in every set it is fitted on, and the smallest has {have} "
                f"(a training fold of {k}-fold CV{_why_folds(k, cv_folds, counts)}); add rows to use it"
            )
        else:
            kept.append(name)
    return kept, dropped
