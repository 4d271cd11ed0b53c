"""CSLR (DL) inside selection: every fit receives the unlabeled rows of the set it will be scored on."""

from __future__ import annotations

import numpy as np
import pytest

from shiftlib.cslr import CovariateShiftLogisticRegression
from shiftlib.learners import make_learner
from shiftlib.selection import reverse_testing, source_cv

SEEN: list[int] = []


class _Spy(CovariateShiftLogisticRegression):
    def fit(self, X, y, *, X_target, sample_weight=None):  # records len(X_target) per fit
        SEEN.append(len(X_target))
        return super().fit(X, y, X_target=X_target, sample_weight=sample_weight)


def _data():
    rng = np.random.default_rng(0)
    Xs = rng.normal(0, 1, (120, 3))
    ys = (Xs[:, 0] + 0.5 * rng.normal(size=120) > 0).astype(int)
    Xt = rng.normal(0.7, 1, (90, 3))
    return Xs, ys, Xt


@pytest.mark.heavy
def test_reverse_testing_passes_the_scored_set_as_x_target():
    Xs, ys, Xt = _data()
    SEEN.clear()
    res = reverse_testing({"CSLR": _Spy(), "LR": make_learner("LR")}, Xs, ys, Xt)
    assert res.n_fits == 2 + 4  # ℓ + ℓ² with ℓ = 2 (docs/architecture.md)
    # CSLR fits: once on D (scored on T: 90 rows) and twice on T_i (scored on D: 120 rows)
    assert sorted(SEEN) == [90, 120, 120]
    assert np.isfinite(res.matrix.to_numpy(dtype=float)).all()


@pytest.mark.heavy
def test_source_cv_gives_cslr_the_target_rows():
    Xs, ys, Xt = _data()
    SEEN.clear()
    res = source_cv({"CSLR": _Spy()}, Xs, ys, k=5, random_state=0)
    assert len(SEEN) == 5 and np.isfinite(res.scores["CSLR"])
