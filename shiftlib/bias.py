"""Sample-selection mechanisms P(s=1|x,y): the papers' recipes for making a biased training sample.

Every mechanism takes a pool ``(X, y)`` and returns a :class:`Selection`: the selected row positions
and the *true* selection probability ``P(s=1|x,y)`` of every row, so the oracle importance weight
``1/P(s=1|x,y)`` is known (the "importance sampling" column of KMM Table 1; DL Prop. 2).

Mechanisms (registry name → paper):

==========================  =========================================================================
``complete_independent``    RT §2: ``P(s=1|x,y) = rate``
``feature_dependent``       RT §2: ``P(s=1|x,y) = P(s=1|x) = expit(intercept + slope·z)``, z = the
                            standardised ``feature``
``class_dependent``         RT §2: ``P(s=1|x,y) = P(s=1|y)``: ``p_positive`` / ``p_negative``
``complete_dependent``      RT §2: ``expit(intercept + slope·z + label_coef·y±)``, y± ∈ {−1, +1}
``rt_sort``                 RT §3.1: sort on ``feature`` (default the first) and drop the first 25%
``kmm_threshold``           KMM §4.2.1: ``P(s=1|x≤t) = 0.2``, ``P(s=1|x>t) = 0.8`` on one feature
``kmm_distance``            KMM §4.2.1: ``P(s=1|x) = scale·exp(−σ‖x − x̄‖²)``, σ = 1/20
``kmm_label_step``          KMM §4.2.1 / §4.2.2: ``P(s=1|y=1) = 0.1``, ``P(s=1|y=−1) = 0.9``
``kmm_label_logistic``      KMM §4.2.2: ``P(s=1|y) = exp(a + b·y)/(1 + exp(a + b·y))``
``kmm_pca_normal``          KMM §4.2.2: normal bump on the first principal component, mean
                            ``m + (m̄ − m)/a``, variance ``(m̄ − m)/b``
``undersample``             US §III-A: keep every positive, each negative with probability ``beta``
==========================  =========================================================================

Conventions (decisions where the papers are silent, stated once here):

* Randomness: a random mechanism draws ``u ~ U(0,1)`` per row from ``np.random.default_rng(random_state)``
  and keeps row i iff ``u_i < P(s=1|x_i,y_i)``; the same ``random_state`` gives the same selection.
* ``y`` is binary with arbitrary labels. Mechanisms written with y ∈ {−1, +1} map ``positive_label`` to
  +1 and the other label to −1; ``positive_label`` defaults to the larger of the two sorted labels —
  except ``undersample``, whose default is the *minority* label, because US defines the positive class
  as the minority one (the class undersampling never touches).
* ``feature=`` is a column name of a DataFrame, or an int position (DataFrame or ndarray).
* ``rt_sort`` is deterministic: ``P(s=1|x)`` is reported as exactly 1 for kept rows and 0 for dropped
  rows; :attr:`Selection.support_covered` is then False, i.e. no importance weighting can recover the
  dropped region (the oracle weights of the kept rows are all 1). Ties at the cut are broken by row
  order (stable sort); the paper does not say.
* Multivariate KMM schemes (``kmm_distance``, ``kmm_pca_normal``) standardise the columns first by
  default (``standardize=True``): the paper's Breast Cancer features all lie on one 1–10 scale, whereas
  e.g. sklearn's breast_cancer mixes areas (~10³) with ratios (~10⁻²), and ``exp(−‖x − x̄‖²/20)`` on raw
  values would select no row at all.

Public API: :class:`Selection`, :class:`BiasedSplit`, one function per mechanism, ``BIAS_MECHANISMS``,
:func:`apply_bias`, :func:`from_probabilities`, :func:`split_biased`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import expit
from sklearn.decomposition import PCA

from shiftlib._random import seed_sequence as _seed_sequence

__all__ = [
    "BIAS_MECHANISMS",
    "BiasedSplit",
    "Selection",
    "apply_bias",
    "class_dependent",
    "complete_dependent",
    "complete_independent",
    "feature_dependent",
    "from_probabilities",
    "kmm_distance",
    "kmm_label_logistic",
    "kmm_label_step",
    "kmm_pca_normal",
    "kmm_threshold",
    "rt_sort",
    "split_biased",
    "undersample",
]

from shiftlib._random import RandomState  # noqa: E402

# --------------------------------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Selection:
    """Result of a selection mechanism (RT §2: ``P(x,y|s=1) ∝ Q(x,y)·P(s=1|x,y)``).

    Parameters
    ----------
    indices : numpy.ndarray of int
        Ascending 0-based row positions of the selected rows (s = 1) in the input.
    p_select : numpy.ndarray of float
        ``P(s=1|x_i,y_i)`` of each selected row (same order as ``indices``).
    p_select_all : numpy.ndarray of float
        ``P(s=1|x_i,y_i)`` of every input row.
    mechanism : str
        Registry name of the mechanism.
    params : dict
        The parameters actually used (defaults resolved, e.g. the threshold value), JSON-friendly.
    depends_on : str, default "x"
        ``"none"``, ``"x"``, ``"y"`` or ``"x,y"`` — the RT §2 case.
    deterministic : bool, default False
        True when selection is a fixed rule (``rt_sort``), not a random draw.
    """

    indices: np.ndarray
    p_select: np.ndarray
    p_select_all: np.ndarray
    mechanism: str
    params: dict[str, Any] = field(default_factory=dict)
    depends_on: str = "x"
    deterministic: bool = False

    @property
    def n_selected(self) -> int:
        return int(self.indices.size)

    @property
    def mask(self) -> np.ndarray:
        """Boolean s-vector over the input rows."""
        s = np.zeros(self.p_select_all.size, dtype=bool)
        s[self.indices] = True
        return s

    @property
    def support_covered(self) -> bool:
        """True iff ``P(s=1|x,y) > 0`` on every input row (needed for any reweighting to be unbiased)."""
        return bool(np.all(self.p_select_all > 0))

    def oracle_weights(self, normalize: bool = True) -> np.ndarray:
        """Oracle importance weights ``1/P(s=1|x,y)`` of the selected rows (KMM Table 1, DL Prop. 2).

        With ``normalize`` the weights have mean 1 over the selected rows (docs/architecture.md convention).
        For ``depends_on == "x"`` this is ``p_pop(x)/p_source(x)`` up to a constant.
        """
        w = 1.0 / self.p_select
        return w / w.mean() if normalize else w


@dataclass(frozen=True)
class BiasedSplit:
    """A biased source sample and an unbiased target sample drawn from one labelled table.

    ``source`` and ``target`` are 0-based row positions in the table given to :func:`split_biased`;
    ``pool`` the rows the mechanism was applied to; ``selection`` is relative to ``pool``
    (``source == pool[selection.indices]``); ``p_source`` the true ``P(s=1|x,y)`` of each source row.

    Parameters
    ----------
    source : numpy.ndarray of int
        Row positions of the biased source sample.
    target : numpy.ndarray of int
        Row positions of the target sample.
    pool : numpy.ndarray of int
        Row positions the mechanism was applied to.
    selection : Selection
        The mechanism's selection, relative to ``pool``.
    target_kind : str
        How the target was formed: ``"holdout"``, ``"all"`` or ``"complement"`` (:func:`split_biased`).
    """

    source: np.ndarray
    target: np.ndarray
    pool: np.ndarray
    selection: Selection
    target_kind: str

    @property
    def p_source(self) -> np.ndarray:
        return self.selection.p_select


# --------------------------------------------------------------------------------------------------
# input helpers
# --------------------------------------------------------------------------------------------------


def _n_rows(X: Any) -> int:
    return int(X.shape[0]) if hasattr(X, "shape") else len(X)


def _check_y(y: Any, n: int) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must be one label per row of X: X has {n} rows, y has shape {y.shape}")
    if n == 0:
        raise ValueError("the table has 0 rows; pass at least one row of each class")
    if pd.isna(y).any():
        raise ValueError(f"y has {int(pd.isna(y).sum())} missing labels; drop or fill those rows first")
    labels = np.unique(y)
    if labels.size != 2:
        raise ValueError(
            f"y must be binary (exactly 2 distinct labels); it has {labels.size}: {labels[:5].tolist()}"
            f"{' …' if labels.size > 5 else ''} (the simulated biases are the papers' two-class recipes)"
        )
    return y


def _signed_labels(y: np.ndarray, positive_label: Any) -> tuple[np.ndarray, Any]:
    """Map ``positive_label`` → +1 and the other label → −1 (KMM's y ∈ {−1, +1})."""
    labels = np.unique(y)
    if positive_label is None:
        positive_label = labels[-1]
    elif positive_label not in labels.tolist():
        raise ValueError(
            f"positive_label={positive_label!r} is not one of the labels in y {labels.tolist()}; "
            "pass one of them"
        )
    return np.where(y == positive_label, 1.0, -1.0), _py(positive_label)


def _py(v: Any) -> Any:
    """numpy scalar → Python scalar (so params stay JSON-friendly)."""
    return v.item() if isinstance(v, np.generic) else v


def _feature(X: Any, feature: int | str) -> tuple[np.ndarray, Any]:
    """Return one feature column as float array and its name; DataFrame names first, then positions."""
    if isinstance(X, pd.DataFrame):
        if feature in X.columns:
            col, name = X[feature], feature
        elif isinstance(feature, int | np.integer) and not isinstance(feature, bool):
            if not -X.shape[1] <= feature < X.shape[1]:
                raise ValueError(
                    f"feature position {feature} is out of range for a table with {X.shape[1]} columns"
                )
            col, name = X.iloc[:, int(feature)], X.columns[int(feature)]
        else:
            raise ValueError(
                f"feature {feature!r} not found; columns are {list(X.columns)[:20]} "
                "(pass a column name or an int position)"
            )
        if not pd.api.types.is_numeric_dtype(col):
            raise ValueError(f"feature {name!r} is not numeric (dtype {col.dtype}); encode it first")
        values = col.to_numpy(dtype=float)
    else:
        arr = np.asarray(X)
        if arr.ndim != 2:
            raise ValueError(f"X must be 2-D (rows × features); got shape {arr.shape}")
        if not isinstance(feature, int | np.integer) or isinstance(feature, bool):
            raise ValueError(f"X is an array, so feature must be an int position; got {feature!r}")
        if not -arr.shape[1] <= feature < arr.shape[1]:
            raise ValueError(f"feature position {feature} is out of range for {arr.shape[1]} columns")
        values, name = arr[:, int(feature)].astype(float), int(feature)
    if np.isnan(values).any():
        raise ValueError(f"feature {name!r} has {int(np.isnan(values).sum())} missing values; impute first")
    return values, _py(name)


def _matrix(X: Any, standardize: bool) -> np.ndarray:
    """All columns as a float matrix (optionally z-scored over the input rows; constant columns → 0)."""
    if isinstance(X, pd.DataFrame):
        bad = [c for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])]
        if bad:
            raise ValueError(f"columns {bad[:5]} are not numeric; this mechanism needs all-numeric X")
        arr = X.to_numpy(dtype=float)
    else:
        arr = np.asarray(X, dtype=float)
    if arr.ndim != 2:
        raise ValueError(f"X must be 2-D (rows × features); got shape {arr.shape}")
    if np.isnan(arr).any():
        raise ValueError("X has missing values; impute before applying this mechanism")
    if standardize:
        sd = arr.std(axis=0)
        arr = (arr - arr.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    return arr


def _check_prob(name: str, value: float) -> float:
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name}={value} is not a probability; pass a value in [0, 1]")
    return value


def _standardized(x: np.ndarray, name: Any) -> np.ndarray:
    sd = x.std()
    if sd == 0:
        raise ValueError(f"feature {name!r} is constant; choose a feature that varies")
    return (x - x.mean()) / sd


def _draw(
    p_all: np.ndarray,
    y: np.ndarray,
    mechanism: str,
    params: dict[str, Any],
    random_state: RandomState,
    depends_on: str,
) -> Selection:
    """Bernoulli draw ``s_i = [u_i < p_i]`` and the checks every mechanism shares."""
    p_all = np.asarray(p_all, dtype=float)
    if p_all.shape != y.shape:
        raise ValueError(f"need one selection probability per row: got {p_all.shape} for {y.shape[0]} rows")
    if np.isnan(p_all).any() or p_all.min() < 0 or p_all.max() > 1:
        raise ValueError(
            f"{mechanism}: selection probabilities must lie in [0, 1]; got range "
            f"[{np.nanmin(p_all):.4g}, {np.nanmax(p_all):.4g}] — lower the scale or change the parameters"
        )
    u = np.random.default_rng(random_state).random(p_all.size)
    return _finish(np.flatnonzero(u < p_all), p_all, y, mechanism, params, depends_on, False)


def _finish(
    indices: np.ndarray,
    p_all: np.ndarray,
    y: np.ndarray,
    mechanism: str,
    params: dict[str, Any],
    depends_on: str,
    deterministic: bool,
) -> Selection:
    indices = np.sort(np.asarray(indices, dtype=np.int64))
    if indices.size == 0:
        raise ValueError(
            f"{mechanism} selected 0 of {y.size} rows (params {params}); raise the selection "
            "probabilities or use a larger table"
        )
    kept = np.unique(y[indices])
    if kept.size < 2:
        raise ValueError(
            f"{mechanism} selected {indices.size} rows, all of class {_py(kept[0])!r}: a training sample "
            "needs both classes; raise the selection probability of the other class or try another seed"
        )
    return Selection(
        indices=indices,
        p_select=p_all[indices].copy(),
        p_select_all=p_all,
        mechanism=mechanism,
        params=params,
        depends_on=depends_on,
        deterministic=deterministic,
    )


# --------------------------------------------------------------------------------------------------
# RT §2: the four cases
# --------------------------------------------------------------------------------------------------


def complete_independent(X: Any, y: Any, *, rate: float = 0.5, random_state: RandomState = None) -> Selection:
    """RT §2 complete-independent case: ``P(s=1|x,y) = rate`` for every row (no bias).

    Parameters
    ----------
    X : DataFrame or array-like of shape (n, d)
        The pool's features (only its number of rows is read).
    y : array-like of shape (n,)
        The pool's labels, exactly two classes.
    rate : float, default 0.5
        The selection probability of every row, in [0, 1].
    random_state : int, numpy.random.Generator, numpy.random.SeedSequence or None
        Seed of the uniform draws ``u_i``.

    Returns
    -------
    Selection
        The selected rows and the true ``P(s=1|x,y)`` of every row.
    """
    y = _check_y(y, _n_rows(X))
    rate = _check_prob("rate", rate)
    p = np.full(y.size, rate)
    return _draw(p, y, "complete_independent", {"rate": rate}, random_state, "none")


def feature_dependent(
    X: Any,
    y: Any,
    *,
    feature: int | str = 0,
    intercept: float = 0.0,
    slope: float = 1.0,
    random_state: RandomState = None,
) -> Selection:
    """RT §2 feature-bias case ``P(s=1|x,y) = P(s=1|x) = expit(intercept + slope·z)``, z = z-scored feature.

    The logistic form is our choice (RT §2 defines the case, not a formula); slope > 0 favours large values.

    Parameters
    ----------
    X : DataFrame or array-like of shape (n, d)
        The pool's features.
    y : array-like of shape (n,)
        The pool's labels, exactly two classes.
    feature : int or str, default 0
        Column name (DataFrame) or int position of the numeric feature.
    intercept : float, default 0.0
        Intercept of the logistic.
    slope : float, default 1.0
        Coefficient of the z-scored feature.
    random_state : int, numpy.random.Generator, numpy.random.SeedSequence or None
        Seed of the uniform draws ``u_i``.

    Returns
    -------
    Selection
        The selected rows and the true ``P(s=1|x,y)`` of every row.
    """
    y = _check_y(y, _n_rows(X))
    x, name = _feature(X, feature)
    p = expit(float(intercept) + float(slope) * _standardized(x, name))
    params = {"feature": name, "intercept": float(intercept), "slope": float(slope)}
    return _draw(p, y, "feature_dependent", params, random_state, "x")


def class_dependent(
    X: Any,
    y: Any,
    *,
    p_positive: float = 0.5,
    p_negative: float = 1.0,
    positive_label: Any = None,
    random_state: RandomState = None,
) -> Selection:
    """RT §2 class-dependent case ``P(s=1|x,y) = P(s=1|y)``: ``p_positive`` for y = +1, ``p_negative`` else.

    Defaults (keep half the positives, all negatives) are ours; RT gives no numbers.

    Parameters
    ----------
    X : DataFrame or array-like of shape (n, d)
        The pool's features (only its number of rows is read: selection depends on y).
    y : array-like of shape (n,)
        The pool's labels, exactly two classes.
    p_positive : float, default 0.5
        P(s=1|y=+1), in [0, 1].
    p_negative : float, default 1.0
        P(s=1|y=−1), in [0, 1].
    positive_label : label, optional
        The label mapped to y = +1 (None: the larger of the two sorted labels).
    random_state : int, numpy.random.Generator, numpy.random.SeedSequence or None
        Seed of the uniform draws ``u_i``.

    Returns
    -------
    Selection
        The selected rows and the true ``P(s=1|x,y)`` of every row.
    """
    y = _check_y(y, _n_rows(X))
    ys, pos = _signed_labels(y, positive_label)
    pp, pn = _check_prob("p_positive", p_positive), _check_prob("p_negative", p_negative)
    p = np.where(ys > 0, pp, pn)
    params = {"p_positive": pp, "p_negative": pn, "positive_label": pos}
    return _draw(p, y, "class_dependent", params, random_state, "y")


def complete_dependent(
    X: Any,
    y: Any,
    *,
    feature: int | str = 0,
    intercept: float = 0.0,
    slope: float = 1.0,
    label_coef: float = 1.0,
    positive_label: Any = None,
    random_state: RandomState = None,
) -> Selection:
    """RT §2 complete-dependent case: ``P(s=1|x,y) = expit(intercept + slope·z + label_coef·y±)``.

    z is the z-scored ``feature`` and y± ∈ {−1, +1}; the logistic form is our choice (RT gives none).

    Parameters
    ----------
    X : DataFrame or array-like of shape (n, d)
        The pool's features.
    y : array-like of shape (n,)
        The pool's labels, exactly two classes.
    feature : int or str, default 0
        Column name (DataFrame) or int position of the numeric feature.
    intercept : float, default 0.0
        Intercept of the logistic.
    slope : float, default 1.0
        Coefficient of the z-scored feature.
    label_coef : float, default 1.0
        Coefficient of y± ∈ {−1, +1}.
    positive_label : label, optional
        The label mapped to y = +1 (None: the larger of the two sorted labels).
    random_state : int, numpy.random.Generator, numpy.random.SeedSequence or None
        Seed of the uniform draws ``u_i``.

    Returns
    -------
    Selection
        The selected rows and the true ``P(s=1|x,y)`` of every row.
    """
    y = _check_y(y, _n_rows(X))
    x, name = _feature(X, feature)
    ys, pos = _signed_labels(y, positive_label)
    p = expit(float(intercept) + float(slope) * _standardized(x, name) + float(label_coef) * ys)
    params = {
        "feature": name,
        "intercept": float(intercept),
        "slope": float(slope),
        "label_coef": float(label_coef),
        "positive_label": pos,
    }
    return _draw(p, y, "complete_dependent", params, random_state, "x,y")


# --------------------------------------------------------------------------------------------------
# RT §3.1
# --------------------------------------------------------------------------------------------------


def rt_sort(
    X: Any,
    y: Any,
    *,
    feature: int | str = 0,
    fraction: float = 0.25,
    ascending: bool = True,
    random_state: RandomState = None,
) -> Selection:
    """RT §3.1 UCI recipe: sort on ``feature`` (default the first) and remove the first ``fraction`` (25%).

    Deterministic (``random_state`` is accepted and ignored): ``p_select_all`` is 1 for kept rows and 0
    for the ``floor(fraction·n)`` removed rows; ties broken by row order (stable sort).

    Parameters
    ----------
    X : DataFrame or array-like of shape (n, d)
        The pool's features.
    y : array-like of shape (n,)
        The pool's labels, exactly two classes.
    feature : int or str, default 0
        Column name (DataFrame) or int position of the numeric feature.
    fraction : float, default 0.25
        Share of rows removed, in [0, 1).
    ascending : bool, default True
        Remove the rows with the smallest values (False: the largest).
    random_state : int, numpy.random.Generator, numpy.random.SeedSequence or None
        Ignored (the rule is deterministic).

    Returns
    -------
    Selection
        The selected rows and the true ``P(s=1|x,y)`` of every row.
    """
    y = _check_y(y, _n_rows(X))
    x, name = _feature(X, feature)
    fraction = float(fraction)
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"fraction={fraction} must be in [0, 1): it is the share of rows removed")
    order = np.argsort(x if ascending else -x, kind="stable")
    n_drop = int(np.floor(fraction * y.size))
    keep = order[n_drop:]
    p = np.zeros(y.size)
    p[keep] = 1.0
    params = {"feature": name, "fraction": fraction, "ascending": bool(ascending), "n_removed": n_drop}
    return _finish(keep, p, y, "rt_sort", params, "x", True)


# --------------------------------------------------------------------------------------------------
# KMM §4.2.1
# --------------------------------------------------------------------------------------------------


def kmm_threshold(
    X: Any,
    y: Any,
    *,
    feature: int | str = 0,
    threshold: float | None = None,
    p_low: float = 0.2,
    p_high: float = 0.8,
    random_state: RandomState = None,
) -> Selection:
    """KMM §4.2.1 per-feature threshold: ``P(s=1|x≤t) = 0.2``, ``P(s=1|x>t) = 0.8``.

    ``threshold`` defaults to the feature's median over the input rows (the paper uses t = 5 on features
    valued 1–10; pass ``threshold=5`` to replicate it).

    Parameters
    ----------
    X : DataFrame or array-like of shape (n, d)
        The pool's features.
    y : array-like of shape (n,)
        The pool's labels, exactly two classes.
    feature : int or str, default 0
        Column name (DataFrame) or int position of the numeric feature.
    threshold : float, optional
        t (None: the feature's median over the input rows).
    p_low : float, default 0.2
        P(s=1|x ≤ t), in [0, 1].
    p_high : float, default 0.8
        P(s=1|x > t), in [0, 1].
    random_state : int, numpy.random.Generator, numpy.random.SeedSequence or None
        Seed of the uniform draws ``u_i``.

    Returns
    -------
    Selection
        The selected rows and the true ``P(s=1|x,y)`` of every row.
    """
    y = _check_y(y, _n_rows(X))
    x, name = _feature(X, feature)
    t = float(np.median(x)) if threshold is None else float(threshold)
    lo, hi = _check_prob("p_low", p_low), _check_prob("p_high", p_high)
    p = np.where(x <= t, lo, hi)
    params = {"feature": name, "threshold": t, "p_low": lo, "p_high": hi}
    return _draw(p, y, "kmm_threshold", params, random_state, "x")


def kmm_distance(
    X: Any,
    y: Any,
    *,
    sigma: float = 1 / 20,
    scale: float = 1.0,
    standardize: bool = True,
    random_state: RandomState = None,
) -> Selection:
    """KMM §4.2.1 distance from the mean: ``P(s=1|x) = scale·exp(−σ‖x − x̄‖²)``, σ = 1/20.

    The paper states ``∝``; ``scale`` is that constant (default 1: a row at the mean is always kept).
    x̄ is the mean of the input rows; columns are z-scored first unless ``standardize=False``.

    Parameters
    ----------
    X : DataFrame or array-like of shape (n, d)
        The pool's features, all numeric.
    y : array-like of shape (n,)
        The pool's labels, exactly two classes.
    sigma : float, default 1/20
        σ, at least 0.
    scale : float, default 1.0
        The proportionality constant, in [0, 1].
    standardize : bool, default True
        Z-score the columns over the input rows first.
    random_state : int, numpy.random.Generator, numpy.random.SeedSequence or None
        Seed of the uniform draws ``u_i``.

    Returns
    -------
    Selection
        The selected rows and the true ``P(s=1|x,y)`` of every row.
    """
    y = _check_y(y, _n_rows(X))
    if float(sigma) < 0:
        raise ValueError(f"sigma={sigma} must be ≥ 0")
    scale = _check_prob("scale", scale)
    A = _matrix(X, standardize)
    d2 = ((A - A.mean(axis=0)) ** 2).sum(axis=1)
    p = scale * np.exp(-float(sigma) * d2)
    params = {"sigma": float(sigma), "scale": scale, "standardize": bool(standardize)}
    return _draw(p, y, "kmm_distance", params, random_state, "x")


def kmm_label_step(
    X: Any,
    y: Any,
    *,
    p_positive: float = 0.1,
    p_negative: float = 0.9,
    positive_label: Any = None,
    random_state: RandomState = None,
) -> Selection:
    """KMM §4.2.1 label step ``P(s=1|y=1) = 0.1``, ``P(s=1|y=−1) = 0.9`` (class-dependent, RT §2).

    Parameters
    ----------
    X : DataFrame or array-like of shape (n, d)
        The pool's features (only its number of rows is read: selection depends on y).
    y : array-like of shape (n,)
        The pool's labels, exactly two classes.
    p_positive : float, default 0.1
        P(s=1|y=+1), in [0, 1].
    p_negative : float, default 0.9
        P(s=1|y=−1), in [0, 1].
    positive_label : label, optional
        The label mapped to y = +1 (None: the larger of the two sorted labels).
    random_state : int, numpy.random.Generator, numpy.random.SeedSequence or None
        Seed of the uniform draws ``u_i``.

    Returns
    -------
    Selection
        The selected rows and the true ``P(s=1|x,y)`` of every row.
    """
    sel = class_dependent(
        X, y, p_positive=p_positive, p_negative=p_negative, positive_label=positive_label,
        random_state=random_state,
    )
    return _renamed(sel, "kmm_label_step")


def _renamed(sel: Selection, mechanism: str) -> Selection:
    return Selection(sel.indices, sel.p_select, sel.p_select_all, mechanism, sel.params, sel.depends_on,
                     sel.deterministic)


# --------------------------------------------------------------------------------------------------
# KMM §4.2.2
# --------------------------------------------------------------------------------------------------


def kmm_label_logistic(
    X: Any,
    y: Any,
    *,
    a: float = 0.0,
    b: float = 1.0,
    positive_label: Any = None,
    random_state: RandomState = None,
) -> Selection:
    """KMM §4.2.2 label-logistic ``P(s=1|y) = exp(a + b·y)/(1 + exp(a + b·y))``, y ∈ {−1, +1}.

    The paper defers a, b to its ref. [7]; our defaults a = 0, b = 1 give P(s=1|+1) ≈ 0.731,
    P(s=1|−1) ≈ 0.269.

    Parameters
    ----------
    X : DataFrame or array-like of shape (n, d)
        The pool's features (only its number of rows is read: selection depends on y).
    y : array-like of shape (n,)
        The pool's labels, exactly two classes.
    a : float, default 0.0
        Intercept of the logistic.
    b : float, default 1.0
        Coefficient of y ∈ {−1, +1}.
    positive_label : label, optional
        The label mapped to y = +1 (None: the larger of the two sorted labels).
    random_state : int, numpy.random.Generator, numpy.random.SeedSequence or None
        Seed of the uniform draws ``u_i``.

    Returns
    -------
    Selection
        The selected rows and the true ``P(s=1|x,y)`` of every row.
    """
    y = _check_y(y, _n_rows(X))
    ys, pos = _signed_labels(y, positive_label)
    p = expit(float(a) + float(b) * ys)
    params = {"a": float(a), "b": float(b), "positive_label": pos}
    return _draw(p, y, "kmm_label_logistic", params, random_state, "y")


def kmm_pca_normal(
    X: Any,
    y: Any,
    *,
    a: float = 4.0,
    b: float = 3.0,
    standardize: bool = True,
    random_state: RandomState = None,
) -> Selection:
    """KMM §4.2.2 PCA bias: normal in the first-PC projection, mean ``m + (m̄ − m)/a``, variance ``(m̄ − m)/b``.

    m / m̄ are the minimum / mean projection. We report ``P(s=1|x) = exp(−(p − μ)²/(2v))`` (the normal
    density scaled to peak 1; the paper gives only the shape). The PC sign is scikit-learn's
    (``svd_flip``: largest-magnitude loading positive). a, b: the paper defers to its ref. [7]; our
    defaults a = 4, b = 3 are a moderate bias toward the low end of the projection.

    Parameters
    ----------
    X : DataFrame or array-like of shape (n, d)
        The pool's features, all numeric (at least 2 rows).
    y : array-like of shape (n,)
        The pool's labels, exactly two classes.
    a : float, default 4.0
        Divisor of (m̄ − m) in the mean, > 0.
    b : float, default 3.0
        Divisor of (m̄ − m) in the variance, > 0.
    standardize : bool, default True
        Z-score the columns over the input rows first.
    random_state : int, numpy.random.Generator, numpy.random.SeedSequence or None
        Seed of the uniform draws ``u_i``.

    Returns
    -------
    Selection
        The selected rows and the true ``P(s=1|x,y)`` of every row.
    """
    y = _check_y(y, _n_rows(X))
    if float(a) <= 0 or float(b) <= 0:
        raise ValueError(f"a={a} and b={b} must both be > 0")
    A = _matrix(X, standardize)
    if A.shape[0] < 2:
        raise ValueError("kmm_pca_normal needs at least 2 rows to find a principal component")
    proj = PCA(n_components=1, svd_solver="full").fit_transform(A)[:, 0]
    m, m_bar = float(proj.min()), float(proj.mean())
    if m_bar - m <= 0:
        raise ValueError("all rows project to one point on the first principal component; X has no spread")
    mu, var = m + (m_bar - m) / float(a), (m_bar - m) / float(b)
    p = np.exp(-((proj - mu) ** 2) / (2.0 * var))
    params = {"a": float(a), "b": float(b), "standardize": bool(standardize), "mean": mu, "variance": var}
    return _draw(p, y, "kmm_pca_normal", params, random_state, "x")


# --------------------------------------------------------------------------------------------------
# US §III-A
# --------------------------------------------------------------------------------------------------


def undersample(
    X: Any,
    y: Any,
    *,
    beta: float | str = "balanced",
    exact: bool = False,
    positive_label: Any = None,
    random_state: RandomState = None,
) -> Selection:
    """US §III-A undersampling: keep every positive, each negative with ``beta = p(s=1|−)``.

    ``beta="balanced"`` means ``N+/N−``. ``exact=False``: independent Bernoulli(beta) per negative;
    ``exact=True``: exactly ``round(beta·N−)`` negatives without replacement, so each negative's
    reported ``P(s=1|y=−)`` is ``round(beta·N−)/N−``. ``positive_label`` defaults to the minority label.

    Parameters
    ----------
    X : DataFrame or array-like of shape (n, d)
        The pool's features (only its number of rows is read: selection depends on y).
    y : array-like of shape (n,)
        The pool's labels, exactly two classes.
    beta : float or "balanced", default "balanced"
        p(s=1|−), the rate at which negatives are kept, in (0, 1]; ``"balanced"`` is N+/N−.
    exact : bool, default False
        Keep exactly ``round(beta·N−)`` negatives instead of independent draws.
    positive_label : label, optional
        The positive (never undersampled) class (None: the minority label; the larger label on a tie).
    random_state : int, numpy.random.Generator, numpy.random.SeedSequence or None
        Seed of the draws of the negatives.

    Returns
    -------
    Selection
        The selected rows and the true ``P(s=1|x,y)`` of every row.
    """
    y = _check_y(y, _n_rows(X))
    labels, counts = np.unique(y, return_counts=True)
    if positive_label is None:
        positive_label = labels[np.argmin(counts)] if counts[0] != counts[1] else labels[-1]
    ys, pos = _signed_labels(y, positive_label)
    n_pos, n_neg = int((ys > 0).sum()), int((ys < 0).sum())
    if isinstance(beta, str):
        if beta != "balanced":
            raise ValueError(f"beta={beta!r}: pass a number in (0, 1] or 'balanced'")
        beta_v = n_pos / n_neg
        if beta_v > 1:
            raise ValueError(
                f"balanced undersampling needs the positive class to be the minority, but N+={n_pos} > "
                f"N−={n_neg}; pass positive_label={_py(labels[np.argmin(counts)])!r}"
            )
    else:
        beta_v = float(beta)
        if not 0.0 < beta_v <= 1.0:
            raise ValueError(f"beta={beta_v} must be in (0, 1]: it is the rate at which negatives are kept")
    neg = np.flatnonzero(ys < 0)
    if exact:
        k = int(round(beta_v * n_neg))
        chosen = np.random.default_rng(random_state).choice(neg, size=k, replace=False)
        p = np.where(ys > 0, 1.0, k / n_neg)
        idx = np.concatenate([np.flatnonzero(ys > 0), chosen])
        params = {"beta": beta_v, "exact": True, "positive_label": pos, "n_negatives_kept": k}
        return _finish(idx, p, y, "undersample", params, "y", False)
    p = np.where(ys > 0, 1.0, beta_v)
    params = {"beta": beta_v, "exact": False, "positive_label": pos}
    return _draw(p, y, "undersample", params, random_state, "y")


# --------------------------------------------------------------------------------------------------
# generic + registry
# --------------------------------------------------------------------------------------------------


def from_probabilities(
    X: Any,
    y: Any,
    p: np.ndarray | Callable[[Any, np.ndarray], np.ndarray],
    *,
    depends_on: str = "x,y",
    random_state: RandomState = None,
) -> Selection:
    """Any RT §2 mechanism given its ``P(s=1|x,y)`` per row (an array, or a callable ``p(X, y)``).

    Parameters
    ----------
    X : DataFrame or array-like of shape (n, d)
        The pool's features.
    y : array-like of shape (n,)
        The pool's labels, exactly two classes.
    p : numpy.ndarray or callable
        ``P(s=1|x,y)`` of every row, in [0, 1], or a callable ``p(X, y)`` returning it.
    depends_on : str, default "x,y"
        The RT §2 case recorded in the selection: ``"none"``, ``"x"``, ``"y"`` or ``"x,y"``.
    random_state : int, numpy.random.Generator, numpy.random.SeedSequence or None
        Seed of the uniform draws ``u_i``.

    Returns
    -------
    Selection
        The selected rows and the true ``P(s=1|x,y)`` of every row.
    """
    y = _check_y(y, _n_rows(X))
    p_all = np.asarray(p(X, y) if callable(p) else p, dtype=float)
    return _draw(p_all, y, "custom", {}, random_state, depends_on)


BIAS_MECHANISMS: dict[str, Callable[..., Selection]] = {
    "complete_independent": complete_independent,
    "feature_dependent": feature_dependent,
    "class_dependent": class_dependent,
    "complete_dependent": complete_dependent,
    "rt_sort": rt_sort,
    "kmm_threshold": kmm_threshold,
    "kmm_distance": kmm_distance,
    "kmm_label_step": kmm_label_step,
    "kmm_label_logistic": kmm_label_logistic,
    "kmm_pca_normal": kmm_pca_normal,
    "undersample": undersample,
}


def apply_bias(name: str, X: Any, y: Any, *, random_state: RandomState = None, **params: Any) -> Selection:
    """Apply the mechanism registered as ``name`` (see :data:`BIAS_MECHANISMS`) with ``params``.

    Lets a flow parameter such as ``{"mechanism": "kmm_threshold", "feature": 0}`` pick any mechanism.

    Parameters
    ----------
    name : str
        Registry name in :data:`BIAS_MECHANISMS`.
    X : DataFrame or array-like of shape (n, d)
        The pool's features.
    y : array-like of shape (n,)
        The pool's labels, exactly two classes.
    random_state : int, numpy.random.Generator, numpy.random.SeedSequence or None
        Seed of the mechanism's draws.
    **params : Any
        The mechanism's own keyword arguments (an unknown one raises ``ValueError``).

    Returns
    -------
    Selection
        The selected rows and the true ``P(s=1|x,y)`` of every row.
    """
    if name not in BIAS_MECHANISMS:
        raise ValueError(f"unknown bias mechanism {name!r}; choose one of {sorted(BIAS_MECHANISMS)}")
    fn = BIAS_MECHANISMS[name]
    allowed = [k for k in inspect.signature(fn).parameters if k not in ("X", "y", "random_state")]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(f"mechanism {name!r} does not take parameter(s) {unknown}; it takes {allowed}")
    return fn(X, y, random_state=random_state, **params)


def split_biased(
    X: Any,
    y: Any,
    mechanism: str,
    *,
    target: str = "holdout",
    target_fraction: float = 0.5,
    random_state: RandomState = None,
    **params: Any,
) -> BiasedSplit:
    """Biased source + unbiased target from one table (RT §3.1 / KMM §4.2 setup: train biased, test unbiased).

    ``target="holdout"`` (default, as KMM §4.2.1 and RT §3.1 do): rows are split at random into a target
    (``target_fraction`` of them) and a pool; the mechanism selects the source from the pool. The target
    is then an i.i.d. sample of the population *independent* of the source — what two-sample tests and
    target-side validation assume. ``"all"``: pool = target = every row (the unbiased population itself,
    but it contains the source rows, so source and target are not independent samples). ``"complement"``:
    target = the pool rows *not* selected — distributed as ``Q(x,y)(1 − P(s=1|x,y))``, i.e. biased the
    other way; offered for completeness only.

    Parameters
    ----------
    X : DataFrame or array-like of shape (n, d)
        The labelled table's features.
    y : array-like of shape (n,)
        Its labels, exactly two classes.
    mechanism : str
        Registry name in :data:`BIAS_MECHANISMS`.
    target : {"holdout", "all", "complement"}, default "holdout"
        How the target is formed (above).
    target_fraction : float, default 0.5
        Share of the rows held out as target with ``target="holdout"``, in (0, 1).
    random_state : int, numpy.random.Generator, numpy.random.SeedSequence or None
        Seed of the holdout split and of the mechanism's draws.
    **params : Any
        The mechanism's own keyword arguments.

    Returns
    -------
    BiasedSplit
        Source, target and pool row positions and the selection.
    """
    n = _n_rows(X)
    _check_y(y, n)
    split_seed, select_seed = _seed_sequence(random_state).spawn(2)
    if target == "holdout":
        f = float(target_fraction)
        if not 0.0 < f < 1.0:
            raise ValueError(f"target_fraction={f} must be in (0, 1)")
        perm = np.random.default_rng(split_seed).permutation(n)
        n_target = int(round(f * n))
        if n_target == 0 or n_target == n:
            raise ValueError(f"target_fraction={f} of {n} rows leaves an empty target or pool")
        tgt, pool = np.sort(perm[:n_target]), np.sort(perm[n_target:])
    elif target in ("all", "complement"):
        pool = np.arange(n)
        tgt = pool
    else:
        raise ValueError(f"target={target!r}: choose 'holdout', 'all' or 'complement'")
    X_pool = X.iloc[pool] if isinstance(X, pd.DataFrame) else np.asarray(X)[pool]
    y_pool = np.asarray(y)[pool]
    sel = apply_bias(mechanism, X_pool, y_pool, random_state=select_seed, **params)
    source = pool[sel.indices]
    if target == "complement":
        tgt = pool[~sel.mask]
        if tgt.size == 0:
            raise ValueError("the mechanism selected every row, so the complement target has 0 rows")
    return BiasedSplit(source=source, target=tgt, pool=pool, selection=sel, target_kind=target)
