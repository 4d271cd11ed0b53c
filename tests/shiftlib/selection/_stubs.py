"""Stub learners shared by the selection tests (ReverseTesting and TrCV work their numbers by hand on them)."""

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

FIT_CALLS: list[str] = []


class BinMajority(ClassifierMixin, BaseEstimator):
    """Histogram classifier on column 0: p(1|bin) = share of label 1 in the bin (empty bin: overall share);
    predict 1 iff p > 0.5 (ties → 0). Records every fit in FIT_CALLS."""

    def __init__(self, edges: tuple[float, ...] = ()):
        self.edges = edges

    def fit(self, X, y, sample_weight=None):
        FIT_CALLS.append(repr(self.edges))
        x = np.asarray(X, dtype=float)[:, 0]
        y = np.asarray(y)
        self.classes_ = np.array([0, 1])
        overall = float(np.mean(y == 1))
        b = np.digitize(x, self.edges)
        self.p_ = np.array([float(np.mean(y[b == k] == 1)) if np.any(b == k) else overall
                            for k in range(len(self.edges) + 1)])
        return self

    def predict_proba(self, X):
        p = self.p_[np.digitize(np.asarray(X, dtype=float)[:, 0], self.edges)]
        return np.column_stack([1 - p, p])

    def predict(self, X):
        return (self.predict_proba(X)[:, 1] > 0.5).astype(int)
