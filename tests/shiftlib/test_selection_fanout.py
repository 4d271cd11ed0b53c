"""ReverseTesting rows and TrCV folds as independent jobs (the flow fans them out): put back together, they
give exactly the one-call results — the same numbers, not just the same winner (property: the pieces are the
same fits on the same rows, only scheduled differently)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_breast_cancer

from shiftlib.learners import make_learner
from shiftlib.selection import (
    Candidate,
    combine,
    reverse_testing,
    reverse_testing_row,
    trcv_assemble,
    trcv_fold,
    trcv_scores,
    trcv_select,
    trcv_setup,
)


def _problem() -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame, list[Candidate]]:
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


@pytest.mark.heavy
def test_reverse_testing_rows_combine_to_the_one_call_result() -> None:
    X_s, y_s, X_t, cands = _problem()
    whole = reverse_testing(cands, X_s, y_s, X_t)
    rows = [reverse_testing_row(c.name, cands, X_s, y_s, X_t) for c in reversed(cands)]  # any order
    pieces = combine([t for t, _ in rows], [cell for _, row in rows for cell in row])
    pd.testing.assert_frame_equal(pieces.matrix.loc[whole.matrix.index, whole.matrix.columns], whole.matrix)
    pd.testing.assert_frame_equal(pieces.to_frame().sort_values("learner").reset_index(drop=True),
                                  whole.to_frame().sort_values("learner").reset_index(drop=True))
    assert pieces.n_fits == whole.n_fits == len(cands) + len(cands) ** 2
    with pytest.raises(ValueError, match="labeler 'SVM' is not one of the learners"):
        reverse_testing_row("SVM", cands, X_s, y_s, X_t)


@pytest.mark.heavy
def test_trcv_folds_assemble_to_the_one_call_result() -> None:
    X_s, y_s, X_t, cands = _problem()
    beta = np.random.default_rng(1).uniform(0.2, 3.0, size=len(y_s))
    whole = trcv_select(cands, X_s, y_s, X_t, weights=beta, k=5, random_state=3)
    setup = trcv_setup(cands, X_s, y_s, X_t, weights=beta, k=5, random_state=3)
    by_fold = [{c.name: trcv_fold(c, setup, i) for c in cands} for i in reversed(range(5))][::-1]
    results = {c.name: trcv_assemble(c.name, setup, [f[c.name] for f in by_fold]) for c in cands}
    pieces = trcv_scores([c.name for c in cands], setup, results, {})
    pd.testing.assert_frame_equal(pieces.to_frame(), whole.to_frame())
    for c in cands:
        np.testing.assert_array_equal(results[c.name].residuals, whole.details["results"][c.name].residuals)
    assert pieces.n_fits == whole.n_fits
    with pytest.raises(ValueError, match="needs all 5 folds of 'LR'"):
        trcv_assemble("LR", setup, [by_fold[0]["LR"]])
    with pytest.raises(ValueError, match="fold 5 does not exist"):
        trcv_fold(cands[0], setup, 5)
