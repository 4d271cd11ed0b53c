"""Helpers shared by the tests of shiftlib.selection (imported by name: ``from tests.shiftlib.selection.conftest
import …``): the fan-out problem of ReverseTesting rows and TrCV folds, and a CSLR that records its target rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.datasets import load_breast_cancer

from shiftlib.cslr import CovariateShiftLogisticRegression
from shiftlib.learners import make_learner
from shiftlib.selection import Candidate


def fanout_problem() -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame, list[Candidate]]:
    """ReverseTesting rows and TrCV folds as independent jobs (the flow fans them out): breast_cancer's first six
    columns, source and target overlapping slices of the rows sorted on "mean radius" (a feature-bias shift,
    RT §3.1), and four candidates of which one is weighted."""
    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    X = X.iloc[:, :6]
    order = np.argsort(X["mean radius"].to_numpy(), kind="stable")
    src, tgt = order[:250], order[150:400]  # sorted on the first attribute: a feature-bias shift (RT §3.1)
    rng = np.random.default_rng(0)
    w = rng.uniform(0.5, 2.0, size=len(src))
    cands = [Candidate("LR", make_learner("LR", random_state=0)), Candidate("NB", make_learner("NB")),
             Candidate("DT", make_learner("DT", random_state=0)),
             Candidate("LR+w", make_learner("LR", random_state=0), sample_weight=w / w.mean())]
    return X.iloc[src].reset_index(drop=True), y.iloc[src].to_numpy(), X.iloc[tgt].reset_index(drop=True), cands


#: len(X_target) of every fit of a :class:`CSLRSpy`, in order (cleared by the test that reads it)
SEEN: list[int] = []


class CSLRSpy(CovariateShiftLogisticRegression):
    """CSLR (DL) that records how many unlabeled rows each fit receives: the rows of the set it will be scored on."""

    def fit(self, X, y, *, X_target, sample_weight=None):  # records len(X_target) per fit
        SEEN.append(len(X_target))
        return super().fit(X, y, X_target=X_target, sample_weight=sample_weight)


def cslr_data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """120 source rows (label: the sign of x₀ plus noise) and 90 target rows shifted by 0.7 in every feature."""
    rng = np.random.default_rng(0)
    Xs = rng.normal(0, 1, (120, 3))
    ys = (Xs[:, 0] + 0.5 * rng.normal(size=120) > 0).astype(int)
    Xt = rng.normal(0.7, 1, (90, 3))
    return Xs, ys, Xt
