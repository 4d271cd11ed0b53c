"""Candidate learners by stable name (RT §3 uses DT, NB, LR, SVM; we add kNN, RF and DL's CSLR).

Every learner is a scikit-learn classifier with ``predict_proba`` whose ``fit`` accepts
``sample_weight`` — the hook importance weighting uses:

* DT, NB, LR, RF, SVM pass ``sample_weight`` to the scikit-learn estimator (which supports it).
* kNN: scikit-learn's ``KNeighborsClassifier.fit`` takes no ``sample_weight``. Here weighting means
  *importance-weighted voting*: ``P(y=c|x) = Σ_{k∈N(x)} w_k·1[y_k=c] / Σ_{k∈N(x)} w_k`` over the
  ``n_neighbors`` nearest training rows — the k-NN estimate under the weighted empirical
  distribution. It is deterministic (no resampling noise) and equals plain kNN when all w are equal.

Scale-sensitive learners (LR, SVM, kNN) standardise features inside their pipeline, so the scaler is
fitted on the training rows only. ``sample_weight`` is routed to the final step only.

Size-aware routes (``make_learner(name, n_rows=n)``, where ``n`` is the number of rows the learner will
be fitted on; without ``n_rows`` every learner takes its exact route):

* SVM above ``SVM_EXACT_ROWS`` rows: a Nystroem kernel approximation of the same RBF kernel (Williams &
  Seeger, NIPS 2001) plus a logistic regression, instead of ``SVC`` whose cost grows like n² and which
  the probability calibration fits six times (so the selection subsample, too, takes this route).
* kNN above ``KNN_MAX_ROWS`` rows: the neighbour index holds a random subsample of that many rows
  (with their weights): an exact index over a million rows in 30+ dimensions answers too slowly.
* RF has scikit-learn's default of 100 trees at every size (an earlier 200 doubled the cost of every RF fit,
  RF's fits were most of the embedded example's science, and the forest's error settles well before 100 trees:
  Breiman 2001, §2; Probst & Boulesteix, JMLR 2018).
* RF above ``RF_BOUNDED_ROWS`` rows: its trees are each grown on at most ``RF_BOUNDED_ROWS`` bootstrap rows with
  at most ``RF_MAX_LEAVES`` leaves, so the logged model stays small; DT above that size also has at most
  ``RF_MAX_LEAVES`` leaves (a fully grown tree on a million noisy rows has about as many leaves as rows/10).
* HGB (``HistGradientBoostingClassifier``) handles any size as it is.

The route is in the estimator's parameters, which the training stage logs.

Public API: ``LEARNERS`` (name → factory) and ``make_learner(name, **params)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.calibration import CalibratedClassifierCV
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import NearestNeighbors
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import LabelEncoder, StandardScaler
from sklearn.svm import SVC
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils import _safe_indexing
from sklearn.utils.validation import check_is_fitted, validate_data

from shiftlib.errors import UnknownNameError

__all__ = [
    "LEARNERS",
    "PositiveWeightCalibratedClassifierCV",
    "WeightedPipeline",
    "WeightedKNeighborsClassifier",
    "WeightlessClassError",
    "fit_learner",
    "make_learner",
    "needs_target",
]

SVM_EXACT_ROWS = 2_000
KNN_MAX_ROWS = 20_000
RF_BOUNDED_ROWS = 50_000
RF_MAX_LEAVES = 4096


class WeightedPipeline(Pipeline):
    """A ``Pipeline`` whose ``fit(X, y, sample_weight=w)`` routes ``w`` to the final estimator.

    scikit-learn's Pipeline only takes ``<step>__sample_weight``; selection and training code fit every
    learner through one call signature, so the routing lives here.

    Parameters
    ----------
    steps : list of (str, estimator) tuples
        The pipeline steps, as for :class:`sklearn.pipeline.Pipeline`.
    transform_input : list of str, optional
        Passed to :class:`~sklearn.pipeline.Pipeline`.
    memory : str or object, optional
        Passed to :class:`~sklearn.pipeline.Pipeline`.
    verbose : bool, default False
        Passed to :class:`~sklearn.pipeline.Pipeline`.
    """

    def fit(self, X: Any, y: Any = None, sample_weight: Any = None, **params: Any) -> WeightedPipeline:
        """Fit the pipeline, passing ``sample_weight`` to the final step.

        Parameters
        ----------
        X : array-like
            Training rows.
        y : array-like, optional
            Training labels.
        sample_weight : array-like, optional
            Per-row weights, routed as ``<final step>__sample_weight``.
        **params : dict
            Other fit parameters, as for :meth:`sklearn.pipeline.Pipeline.fit`.

        Returns
        -------
        WeightedPipeline
            The fitted pipeline.
        """
        if sample_weight is not None:
            params[f"{self.steps[-1][0]}__sample_weight"] = np.asarray(sample_weight, dtype=float)
        return super().fit(X, y, **params)


class PositiveWeightCalibratedClassifierCV(CalibratedClassifierCV):
    """``CalibratedClassifierCV`` fitted on the rows of positive weight only.

    A row of weight 0 adds nothing to the SVC (its box constraint holds α at 0) nor to the sigmoid fit, but the
    calibration's inner folds are stratified on the label alone: with many zero weights (KMM under a strong
    shift) a training fold can hold no positive-weight row of a class, and SVC then fails. Leaving those rows
    out changes only which rows the inner folds hold.

    Parameters
    ----------
    estimator : estimator, optional
        The classifier to calibrate, as for :class:`~sklearn.calibration.CalibratedClassifierCV`.
    method : {"sigmoid", "isotonic", "temperature"}, default "sigmoid"
        The calibration method, passed on.
    cv : int, cross-validation generator or iterable, optional
        The inner folds, passed on.
    n_jobs : int, optional
        Passed on.
    ensemble : bool or "auto", default "auto"
        Passed on.
    """

    def fit(self, X: Any, y: Any, sample_weight: Any = None, **fit_params: Any) -> PositiveWeightCalibratedClassifierCV:
        """Fit on the rows whose ``sample_weight`` is positive (all rows when it is None).

        Parameters
        ----------
        X : array-like
            Training rows.
        y : array-like
            Training labels.
        sample_weight : array-like, optional
            Per-row weights; rows of weight 0 (or less) are left out.
        **fit_params : dict
            Passed to :meth:`sklearn.calibration.CalibratedClassifierCV.fit`.

        Returns
        -------
        PositiveWeightCalibratedClassifierCV
            The fitted calibrated classifier.
        """
        if sample_weight is not None:
            w = np.asarray(sample_weight, dtype=float)
            keep = np.flatnonzero(w > 0)
            if len(keep) < len(w):
                X, y, sample_weight = _safe_indexing(X, keep), _safe_indexing(y, keep), w[keep]
        return super().fit(X, y, sample_weight=sample_weight, **fit_params)


class WeightedKNeighborsClassifier(ClassifierMixin, BaseEstimator):
    """k-nearest-neighbours whose votes are weighted by per-row importance weights.

    ``predict_proba(x)[c] = Σ_{k∈N(x)} w_k·1[y_k=c] / Σ_{k∈N(x)} w_k`` (uniform w gives plain kNN).
    Written by hand because scikit-learn's KNeighborsClassifier has no ``sample_weight``.

    Parameters
    ----------
    n_neighbors : int, default 5
        Neighbours that vote (at most the number of training rows kept).
    max_rows : int, optional
        When set and the training set is larger, the index holds a uniform subsample of this many rows
        (with their weights); None keeps every row.
    random_state : int, optional
        Seed of that subsample.

    Attributes
    ----------
    classes_ : ndarray
        The class labels, sorted.
    """

    def __init__(self, n_neighbors: int = 5, max_rows: int | None = None, random_state: int | None = None) -> None:
        self.n_neighbors = n_neighbors
        self.max_rows = max_rows
        self.random_state = random_state

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> WeightedKNeighborsClassifier:
        """Index the training rows with their labels and weights.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Training rows.
        y : array-like of shape (n,)
            Training labels.
        sample_weight : array-like of shape (n,), optional
            Finite, non-negative importance weights; None means uniform.

        Returns
        -------
        WeightedKNeighborsClassifier
            The fitted classifier.

        Raises
        ------
        ValueError
            If ``sample_weight`` is not one finite, non-negative number per row.
        """
        X, y = validate_data(self, X, y, reset=True)
        self._le = LabelEncoder().fit(y)
        self.classes_ = self._le.classes_
        self._y = self._le.transform(y)
        w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        if w.shape != (len(y),) or np.any(w < 0) or not np.all(np.isfinite(w)):
            raise ValueError("sample_weight must be one finite, non-negative number per training row")
        if self.max_rows is not None and len(y) > self.max_rows:  # bounded index (module docstring)
            keep = np.sort(np.random.default_rng(self.random_state).choice(len(y), self.max_rows, replace=False))
            X, self._y, w = X[keep], self._y[keep], w[keep]
        self._w = w
        self._nn = NearestNeighbors(n_neighbors=min(self.n_neighbors, len(self._y))).fit(X)
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        """Weighted vote share of each class among the ``n_neighbors`` nearest training rows.

        A neighbourhood whose weights are all 0 gets the unweighted vote.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Rows to score.

        Returns
        -------
        ndarray of shape (n, n_classes)
            Class probabilities, columns in the order of ``classes_``.
        """
        check_is_fitted(self, "classes_")
        X = validate_data(self, X, reset=False)
        idx = self._nn.kneighbors(X, return_distance=False)
        w = self._w[idx]
        proba = np.zeros((len(X), len(self.classes_)))
        for c in range(len(self.classes_)):
            proba[:, c] = (w * (self._y[idx] == c)).sum(axis=1)
        tot = proba.sum(axis=1, keepdims=True)
        # all-zero weights in a neighbourhood: fall back to the unweighted vote
        zero = tot[:, 0] <= 0
        if zero.any():
            for c in range(len(self.classes_)):
                proba[zero, c] = (self._y[idx[zero]] == c).mean(axis=1)
            tot[zero] = 1.0
        return proba / tot

    def predict(self, X: Any) -> np.ndarray:
        """The class of largest :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Rows to score.

        Returns
        -------
        ndarray of shape (n,)
            Predicted class labels.
        """
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


def _dt(random_state: int | None = None, n_rows: int | None = None, **params: Any) -> BaseEstimator:
    if n_rows is not None and n_rows > RF_BOUNDED_ROWS:
        params.setdefault("max_leaf_nodes", RF_MAX_LEAVES)
    return WeightedPipeline([("clf", DecisionTreeClassifier(random_state=random_state, **params))])


def _nb(random_state: int | None = None, n_rows: int | None = None, **params: Any) -> BaseEstimator:
    return WeightedPipeline([("clf", GaussianNB(**params))])


def _lr(random_state: int | None = None, n_rows: int | None = None, **params: Any) -> BaseEstimator:
    params.setdefault("max_iter", 1000)
    return WeightedPipeline(
        [("scale", StandardScaler()), ("clf", LogisticRegression(random_state=random_state, **params))]
    )


def _svm(random_state: int | None = None, n_rows: int | None = None, **params: Any) -> BaseEstimator:
    if n_rows is not None and n_rows > SVM_EXACT_ROWS:
        # the RBF kernel's Nystroem approximation + a linear model (module docstring)
        gamma = params.pop("gamma", "scale")
        gamma = None if gamma == "scale" else gamma  # Nystroem's None = 1/n_features on standardized data
        return WeightedPipeline([
            ("scale", StandardScaler()),
            ("nystroem", Nystroem(kernel="rbf", gamma=gamma, n_components=params.pop("n_components", 100),
                                  random_state=random_state)),
            ("clf", LogisticRegression(C=params.pop("C", 1.0), max_iter=1000, random_state=random_state)),
        ])
    # SVC(probability=True) is deprecated in scikit-learn 1.9; this is its documented replacement.
    svc = SVC(random_state=random_state, **params)
    return WeightedPipeline(
        [("scale", StandardScaler()),
         ("clf", PositiveWeightCalibratedClassifierCV(svc, method="sigmoid", ensemble=False, cv=5))]
    )


def _knn(random_state: int | None = None, n_rows: int | None = None, **params: Any) -> BaseEstimator:
    if n_rows is not None and n_rows > KNN_MAX_ROWS:
        params.setdefault("max_rows", KNN_MAX_ROWS)
        params.setdefault("random_state", random_state)
    return WeightedPipeline([("scale", StandardScaler()), ("clf", WeightedKNeighborsClassifier(**params))])


def _rf(random_state: int | None = None, n_rows: int | None = None, **params: Any) -> BaseEstimator:
    if n_rows is not None and n_rows > RF_BOUNDED_ROWS:
        params.setdefault("max_samples", RF_BOUNDED_ROWS)
        params.setdefault("max_leaf_nodes", RF_MAX_LEAVES)
    params.setdefault("n_estimators", 100)
    params.setdefault("n_jobs", 1)
    return WeightedPipeline([("clf", RandomForestClassifier(random_state=random_state, **params))])


def _hgb(random_state: int | None = None, n_rows: int | None = None, **params: Any) -> BaseEstimator:
    # scikit-learn's histogram gradient boosting: any size, missing values natively, sample_weight aware
    return WeightedPipeline([("clf", HistGradientBoostingClassifier(random_state=random_state, **params))])


def _cslr(random_state: int | None = None, n_rows: int | None = None, **params: Any) -> BaseEstimator:
    # DL's integrated model; standardises internally and learns from X_target (requires_target)
    from shiftlib.cslr import CovariateShiftLogisticRegression

    return CovariateShiftLogisticRegression(**params)


def _cslr_rbf(random_state: int | None = None, n_rows: int | None = None, **params: Any) -> BaseEstimator:
    from shiftlib.cslr import CovariateShiftLogisticRegression

    params.setdefault("kernel", "rbf")
    return CovariateShiftLogisticRegression(**params)


LEARNERS: dict[str, Callable[..., BaseEstimator]] = {
    "DT": _dt,
    "NB": _nb,
    "LR": _lr,
    "SVM": _svm,
    "kNN": _knn,
    "RF": _rf,
    "HGB": _hgb,
    "CSLR": _cslr,
    "CSLR-rbf": _cslr_rbf,
}


def make_learner(
    name: str, *, random_state: int | None = None, n_rows: int | None = None, **params: Any
) -> BaseEstimator:
    """Build an unfitted candidate learner by its registry name (see ``LEARNERS``).

    ``params`` go to the final estimator (e.g. ``make_learner("kNN", n_neighbors=7)``). ``n_rows``, the
    number of rows it will be fitted on, picks the size-aware route (module docstring); None = exact.

    Parameters
    ----------
    name : str
        A key of ``LEARNERS``.
    random_state : int, optional
        Seed passed to the learner's randomized parts (not used by every learner).
    n_rows : int, optional
        Rows the learner will be fitted on; picks the size-aware route.
    **params : dict
        Parameters of the final estimator.

    Returns
    -------
    BaseEstimator
        The unfitted learner.

    Raises
    ------
    UnknownNameError
        If ``name`` is not in ``LEARNERS``.
    """
    if name not in LEARNERS:
        raise UnknownNameError(f"unknown learner {name!r}; choose one of {sorted(LEARNERS)}")
    return LEARNERS[name](random_state=random_state, n_rows=n_rows, **params)


def needs_target(estimator: BaseEstimator) -> bool:
    """True when ``estimator.fit`` needs the unlabeled target rows (``X_target=``), e.g. DL's CSLR.

    Convention: such an estimator has ``requires_target = True`` and ``fit(X, y, *, X_target, ...)``.
    The target rows are the rows the fitted model will be asked about (the deployment batch in
    training; the set being scored in selection, e.g. D when ReverseTesting retrains on T).

    Parameters
    ----------
    estimator : BaseEstimator
        A learner, or a ``Pipeline`` whose final step is read.

    Returns
    -------
    bool
        The final estimator's ``requires_target`` (False when absent).
    """
    final = estimator.steps[-1][1] if isinstance(estimator, Pipeline) else estimator
    return bool(getattr(final, "requires_target", False))


def fit_learner(
    estimator: BaseEstimator,
    X: Any,
    y: Any,
    sample_weight: Any = None,
    X_target: Any = None,
) -> BaseEstimator:
    """Fit ``estimator`` on (X, y) through one signature for every learner; returns the estimator.

    ``sample_weight`` is passed only when given; ``X_target`` (unlabeled rows of the population the
    model will serve) only to learners that need it (see ``needs_target``), which then require it.

    A class whose rows all have weight 0 (KMM sets many weights to exactly 0 under a strong shift) raises
    ``ValueError``: the weighted empirical distribution has no such class, so the model could never predict it.

    Parameters
    ----------
    estimator : BaseEstimator
        The learner to fit (fitted in place).
    X : array-like
        Training rows.
    y : array-like
        Training labels.
    sample_weight : array-like, optional
        Per-row weights; not passed when None.
    X_target : array-like, optional
        Unlabeled target rows; passed only to (and required by) learners that need them.

    Returns
    -------
    BaseEstimator
        What ``estimator.fit`` returns (the fitted estimator).

    Raises
    ------
    WeightlessClassError
        If the weights are 0 on every row of some class.
    ValueError
        If ``sample_weight`` has the wrong shape, or ``X_target`` is missing for a learner that needs it.
    """
    kwargs: dict[str, Any] = {}
    if sample_weight is not None:
        _check_weighted_classes(y, sample_weight)
        kwargs["sample_weight"] = sample_weight
    if needs_target(estimator):
        if X_target is None:
            raise ValueError(
                f"{type(estimator).__name__} learns from the unlabeled target rows: pass X_target= "
                "(the deployment batch) to fit_learner"
            )
        kwargs["X_target"] = X_target
    return estimator.fit(X, y, **kwargs)


def _check_weighted_classes(y: Any, sample_weight: Any) -> None:
    """Every class of ``y`` must keep some weight (``fit_learner``'s docstring says why)."""
    w = np.asarray(sample_weight, dtype=float)
    y_arr = np.asarray(y)
    if w.shape != (len(y_arr),):
        raise ValueError(f"sample_weight has shape {w.shape}; give one weight per training row ({len(y_arr)})")
    keep = w > 0
    lost = np.setdiff1d(np.unique(y_arr), np.unique(y_arr[keep]))
    if len(lost):
        raise WeightlessClassError(lost.tolist() if keep.any() else None)


class WeightlessClassError(ValueError):
    """The importance weights are 0 on every row of some class (``classes``; None: on every row at all).

    Parameters
    ----------
    classes : list or None
        The classes whose rows all have weight 0; None when every row has weight 0.
    """

    def __init__(self, classes: list[Any] | None) -> None:
        self.classes = classes
        super().__init__(self.describe(classes))

    def __reduce__(self) -> tuple[Any, ...]:  # picklable (a Dask worker sends errors back pickled)
        return (type(self), (self.classes,))

    @staticmethod
    def describe(classes: list[Any] | None) -> str:
        """The error's message.

        Parameters
        ----------
        classes : list or None
            As for the constructor.

        Returns
        -------
        str
            The sentence naming the weightless classes (or every row).
        """
        what = "every row" if classes is None else f"every row of class {', '.join(map(str, classes))}"
        return (f"the importance weights are 0 on {what}: a weighted model cannot learn the classes it never "
                "sees (the weighting found almost no source rows like the target)")
