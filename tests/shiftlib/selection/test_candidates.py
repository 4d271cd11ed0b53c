"""Candidates (shiftlib.selection.candidates): the forms resolve_candidates accepts, a weighted candidate fitted with
the weights of its own rows (against scikit-learn fits on the same rows), never mutated, and the registry
learners' refusal of text columns."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from shiftlib.learners import make_learner
from shiftlib.selection import Candidate, resolve_candidates, source_cv, source_target_validation
from shiftlib.selection.candidates import fit_candidate

pytestmark = pytest.mark.usefixtures("one_blas_thread")


X_ALL, Y_ALL = load_breast_cancer(return_X_y=True)
X, Y = X_ALL[:120], Y_ALL[:120]  # scikit-learn's breast_cancer, first 120 rows (both classes)
X_T, Y_T = X_ALL[300:360], Y_ALL[300:360]


def test_weighted_candidate_is_fitted_with_its_source_weights():
    # "LR+w" = an unweighted learner fitted with importance weights on the source rows.
    w = np.where(X[:, 0] > np.median(X[:, 0]), 3.0, 0.5)
    lr = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    stv = source_target_validation([Candidate("LR+w", make_learner("LR"), sample_weight=w)], X, Y, X_T, Y_T)
    ref = lr.fit(X, Y, logisticregression__sample_weight=w).predict(X_T)
    assert stv.scores["LR+w"] == pytest.approx(accuracy_score(Y_T, ref))
    # in CV each training fold uses the weights of its own rows
    scv = source_cv([Candidate("NB+w", make_learner("NB"), sample_weight=w)], X, Y, k=5, random_state=0)
    ref_scores = []
    for tr, te in StratifiedKFold(5, shuffle=True, random_state=0).split(X, Y):
        ref_scores.append(accuracy_score(Y[te], GaussianNB().fit(X[tr], Y[tr], sample_weight=w[tr]).predict(X[te])))
    assert scv.scores["NB+w"] == pytest.approx(np.mean(ref_scores))


def test_fit_candidate_uses_the_weights_of_the_rows_it_fits_and_none_on_target_rows():
    # GaussianNB fitted by scikit-learn on the same rows with the same weights: the same class means and variances
    w = np.linspace(0.2, 3.0, len(Y))
    cand = Candidate("NB+w", GaussianNB(), sample_weight=w)
    rows = np.arange(0, 120, 3)
    got = fit_candidate(cand, X, Y, rows=rows)
    ref = GaussianNB().fit(X[rows], Y[rows], sample_weight=w[rows])
    np.testing.assert_allclose(got.theta_, ref.theta_, rtol=1e-12)
    np.testing.assert_allclose(got.var_, ref.var_, rtol=1e-12)
    plain = fit_candidate(cand, X, Y, rows=rows, weighted=False)  # a fit on target rows: unweighted
    np.testing.assert_allclose(plain.theta_, GaussianNB().fit(X[rows], Y[rows]).theta_, rtol=1e-12)
    assert not np.allclose(plain.theta_, got.theta_)  # the weights matter here
    assert not hasattr(cand.estimator, "classes_")  # a fresh clone is fitted, never the candidate's estimator
    with pytest.raises(ValueError, match=r"sample_weight of candidate 'NB\+w' has shape \(120,\) but there are 60"):
        fit_candidate(cand, X[:60], Y[:60])


def test_resolve_candidates_accepts_the_documented_forms_and_refuses_the_rest():
    nb = GaussianNB()
    lr = Candidate("LR", make_learner("LR"))
    got = resolve_candidates({"nb": nb, "LR": lr, "tree": "DT"}, random_state=7)
    assert [c.name for c in got] == ["nb", "LR", "tree"]  # input order, dict keys as names
    assert got[0].estimator is nb and got[1] is lr and not got[0].registry and got[2].registry
    assert got[2].estimator.get_params()["clf__random_state"] == 7  # registry: seeded
    assert [c.name for c in resolve_candidates(["NB", lr])] == ["NB", "LR"]
    assert [c.name for c in resolve_candidates("NB")] == ["NB"]
    assert [c.name for c in resolve_candidates(nb)] == ["GaussianNB"]  # one estimator: named by its class
    with pytest.raises(ValueError, match="candidate named 'LR' is stored under key 'lr'"):
        resolve_candidates({"lr": lr})
    with pytest.raises(TypeError, match="a list of learners may hold registry names or Candidate objects"):
        resolve_candidates([nb])
    with pytest.raises(TypeError, match="learners must be a dict"):
        resolve_candidates(3)
    with pytest.raises(ValueError, match="no learners given"):
        resolve_candidates([])
    with pytest.raises(ValueError, match=r"candidate names must be unique; repeated: \['LR'\]"):
        resolve_candidates(["LR", lr])
    with pytest.raises(ValueError, match="non-empty string name"):
        Candidate("", nb)
    with pytest.raises(TypeError, match="estimator must be an unfitted scikit-learn estimator"):
        Candidate("x", object())


def _text_frames() -> tuple:
    """A source and target DataFrame with one numeric and one text column (both classes in the source)."""
    import pandas as pd

    rng = np.random.default_rng(0)
    def frame(n: int) -> pd.DataFrame:
        return pd.DataFrame({"x": rng.normal(size=n), "colour": rng.choice(["red", "blue"], n)})
    Xs, Xt = frame(60), frame(30)
    return Xs, (Xs.x > 0).astype(int).to_numpy(), Xt


def test_a_registry_learner_refuses_a_text_column_by_name():
    """Before: source_cv scored the learner NaN with a pandas conversion message, and plan_labels raised that
    message from deep inside pandas. A text column is the input's problem, not the learner's: it raises."""
    from shiftlib.selection import plan_labels

    Xs, ys, Xt = _text_frames()
    for call in (lambda: source_cv(["LR", "NB"], Xs, ys, k=3, random_state=0),
                 lambda: plan_labels(["LR", "NB"], Xs, ys, Xt, budget=5, random_state=0)):
        with pytest.raises(TypeError, match=r"column 'colour' is .*registry learner 'LR'.*prepare_tables"):
            call()


@pytest.mark.heavy
def test_a_pipeline_that_encodes_text_is_not_refused():
    """A user's own Pipeline may take text columns: only registry learners are checked; its CV accuracy
    equals scikit-learn's cross_val_score on the same folds."""
    from sklearn.compose import make_column_transformer
    from sklearn.preprocessing import OneHotEncoder

    Xs, ys, _ = _text_frames()
    pipe = make_pipeline(make_column_transformer((OneHotEncoder(), ["colour"]), remainder="passthrough"),
                         LogisticRegression())
    res = source_cv({"mine": pipe}, Xs, ys, k=3, random_state=0)
    folds = StratifiedKFold(3, shuffle=True, random_state=0)
    assert res.scores["mine"] == pytest.approx(cross_val_score(pipe, Xs, ys, cv=folds).mean())
