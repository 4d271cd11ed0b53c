"""RT §3.1's biased problems (Pima, breast_cancer, wine, iris): used by ``replicate_rt`` and by the
cross-study summary of ``replicate_natural`` (which recomputes their drift verdicts)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from replications._common import rdata
from shiftlib.bias import rt_sort, split_biased

__all__ = ["DATASETS", "Problem"]


@dataclass(frozen=True)
class Problem:
    """One RT §3.1 problem: the biased labeled source D and the target T with its held-out labels."""

    dataset: str
    seed: int
    X_source: np.ndarray
    y_source: np.ndarray
    X_target: np.ndarray
    y_target: np.ndarray
    note: str


def _pima(seed: int) -> Problem:
    tr, te = rdata("MASS", "Pima.tr"), rdata("MASS", "Pima.te")
    feats = [c for c in tr.columns if c != "type"]
    X, y = tr[feats].to_numpy(float), (tr["type"] == "Yes").to_numpy(int)
    sel = rt_sort(X, y, feature=0, fraction=0.25)
    return Problem("pima", seed, X[sel.indices], y[sel.indices], te[feats].to_numpy(float),
                   (te["type"] == "Yes").to_numpy(int),
                   f"MASS Pima.tr → D (sorted on '{feats[0]}', first 25% removed), Pima.te → T")


def _sklearn(name: str, seed: int) -> Problem:
    from sklearn import datasets

    loader = {"breast_cancer": datasets.load_breast_cancer, "wine": datasets.load_wine,
              "iris": datasets.load_iris}[name]
    bunch = loader()
    X, y = bunch.data.astype(float), bunch.target.astype(int)
    note = f"sklearn {name}, first attribute '{bunch.feature_names[0]}'"
    if name == "wine":
        y = (y != 0).astype(int)
        note += "; binarised: class 0 → 0, classes 1 and 2 → 1"
    if len(np.unique(y)) == 2:
        split = split_biased(X, y, "rt_sort", target="holdout", target_fraction=0.5, random_state=seed,
                             feature=0, fraction=0.25)
        source, target = split.source, split.target
    else:
        # shiftlib.bias refuses more than two classes, but RT §3.1's recipe ignores the label (RT used
        # 3-class Iris): the same random 50% holdout and stable sort-and-drop, written out here.
        source, target = _multiclass_rt_split(X, seed)
        note += f"; {len(np.unique(y))} classes kept (local sort-and-drop helper)"
    return Problem(name, seed, X[source], y[source], X[target], y[target],
                   note + "; random 50% → T, the other 50% sorted and its first 25% removed → D")


def _multiclass_rt_split(X: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random 50% target, RT §3.1 on the pool (stable sort on column 0, drop the first floor(25%))."""
    perm = np.random.default_rng(seed).permutation(len(X))
    n_t = int(round(0.5 * len(X)))
    target, pool = np.sort(perm[:n_t]), np.sort(perm[n_t:])
    order = np.argsort(X[pool, 0], kind="stable")
    return pool[np.sort(order[int(np.floor(0.25 * len(pool))):])], target


DATASETS: dict[str, Callable[[int], Problem]] = {
    "pima": _pima,
    "breast_cancer": lambda s: _sklearn("breast_cancer", s),
    "wine": lambda s: _sklearn("wine", s),
    "iris": lambda s: _sklearn("iris", s),
}
