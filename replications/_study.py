"""The selection study shared by the TrCV and natural-shift replications: encode a case once, draw a seeded
sample per run, run every selector of ``shiftlib.selection`` and score it against the held-out target labels.

TrCV §5.1's protocol: ≤ ``n_max`` source and target rows per seed, n_L = max(⌈0.1·|T|⌉, 20) labeled target
rows for the selectors that use target labels, the truth = each learner's accuracy on every target-group row
not in L. The label-free combinations (``auto_wcv``, ``auto_trcv``, ``rank_scv_trcv``) were declared before
any run (reports/selection_summary.md).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from replications._common import (
    Case,
    agreement_row,
    rank_mean,
    renamed,
    summarize_agreement,
    true_accuracies,
)
from shiftlib.drift import DriftReport, detect_drift
from shiftlib.learners import make_learner
from shiftlib.preprocessor import prepare_tables
from shiftlib.selection import (
    Candidate,
    repeated_cv,
    reverse_testing,
    source_cv,
    source_target_validation,
    target_cv,
    trcv_select,
    weighted_cv,
)

__all__ = [
    "FREE_SELECTORS", "LABELED_SELECTORS", "LEARNERS", "SELECTOR_ORDER", "TIE_TOL", "Draw", "Encoded",
    "candidates", "case_table", "draw", "encode", "n_labeled", "parse", "run_case", "run_cases", "summarize",
    "truth_table",
]

LEARNERS = ("DT", "NB", "LR", "SVM", "kNN", "RF", "CSLR")
#: label-free selectors, then those that use the n_L labeled target rows
FREE_SELECTORS = ("scv", "cv10x", "wcv", "trcv", "rv", "rt", "auto_wcv", "auto_trcv", "rank_scv_trcv")
LABELED_SELECTORS = ("trcv_l", "tcv", "stv")
SELECTOR_ORDER = FREE_SELECTORS + LABELED_SELECTORS
#: true accuracies closer than this are a tie (pairs not counted)
TIE_TOL = 0.005


@dataclass(frozen=True)
class Encoded:
    """A case encoded once: float matrices with identical columns, 0/1 labels."""

    case: Case
    Xs: np.ndarray
    ys: np.ndarray
    Xt: np.ndarray
    yt: np.ndarray
    columns: list[str]


def encode(case: Case) -> Encoded:
    """``prepare_tables`` on the two whole groups (source levels and medians); labels coded 0/1."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # id-column / unseen-level notices: kept in notes
        p = prepare_tables(case.source, case.target, case.label, positive_label=case.positive_label)
    if p.target_y is None:
        raise RuntimeError(f"case {case.name}: the target group has no labels to score against")
    return Encoded(case, p.source_X.to_numpy(float), np.asarray(p.source_y), p.target_X.to_numpy(float),
                   np.asarray(p.target_y), list(p.feature_columns))


@dataclass(frozen=True)
class Draw:
    """One seed's sample: source rows, target rows shown to the selectors, labeled target rows, eval rows."""

    source: np.ndarray
    target: np.ndarray  # all target rows the selectors see (U ∪ L)
    labeled: np.ndarray  # L ⊂ target
    unlabeled: np.ndarray  # U = target \ L
    evaluation: np.ndarray  # every target-group row not in L (the truth)


def n_labeled(n_target: int) -> int:
    """TrCV §5.1: max(0.1·|T|, 20) labeled target rows (0.1·|T| rounded up)."""
    return int(max(math.ceil(0.1 * n_target), 20))


def draw(enc: Encoded, seed: int, n_max: int) -> Draw:
    """Seeded sample of ≤ n_max source and ≤ n_max target rows; the first n_labeled(|T|) target rows are L."""
    rng = np.random.default_rng(seed)
    src = np.sort(rng.permutation(len(enc.ys))[: min(n_max, len(enc.ys))])
    tgt = rng.permutation(len(enc.yt))[: min(n_max, len(enc.yt))]
    n_l = n_labeled(len(tgt))
    lab, unl = np.sort(tgt[:n_l]), np.sort(tgt[n_l:])
    ev = np.setdiff1d(np.arange(len(enc.yt)), lab)
    return Draw(src, np.sort(tgt), lab, unl, ev)


def candidates(seed: int, rf_trees: int) -> list[Candidate]:
    """The learners, seeded; RF with ``rf_trees`` trees."""
    return [Candidate(n, make_learner(n, random_state=seed, **({"n_estimators": rf_trees} if n == "RF" else {})))
            for n in LEARNERS]


# ----------------------------------------------------------------------------------------------------
# one run
# ----------------------------------------------------------------------------------------------------
@dataclass
class _Timer:
    """Wall seconds per step of one run."""

    timings: dict[str, float]

    def __call__(self, key: str, fn: Callable[[], Any]) -> Any:
        t = time.perf_counter()
        out = fn()
        self.timings[key] = round(time.perf_counter() - t, 2)
        return out


def _kmm_beta(Xs: np.ndarray, XT: np.ndarray) -> np.ndarray:
    from shiftlib.weights import make_weighter

    w = np.asarray(make_weighter("kmm").fit(Xs, XT).weights_, float)
    return w / w.mean()


def _selectors(enc: Encoded, d: Draw, cands: list[Candidate], seed: int, repeats: int, labeled: bool,
               timed: _Timer) -> tuple[dict[str, Any], DriftReport, np.ndarray]:
    """Every selector's result on one draw, plus the drift report and KMM β they used."""
    Xs, ys, XT = enc.Xs[d.source], enc.ys[d.source], enc.Xt[d.target]
    rep = timed("drift", lambda: detect_drift(Xs, XT, alpha=0.05, random_state=seed))
    beta = timed("kmm", lambda: _kmm_beta(Xs, XT))
    res: dict[str, Any] = {}
    res["scv"] = timed("scv", lambda: source_cv(cands, Xs, ys, k=10, random_state=seed))
    if repeats > 0:
        res["cv10x"] = timed("cv10x", lambda: repeated_cv(cands, Xs, ys, k=10, n_repeats=repeats,
                                                          random_state=seed))
    res["wcv"] = timed("wcv", lambda: weighted_cv(cands, Xs, ys, weights=beta, k=10, random_state=seed))
    res["trcv"] = timed("trcv", lambda: trcv_select(cands, Xs, ys, XT, weights=beta, k=10, random_state=seed))
    res["rv"] = timed("rv", lambda: trcv_select(cands, Xs, ys, XT, weights=None, k=10, random_state=seed))
    res["rt"] = timed("rt", lambda: reverse_testing(cands, Xs, ys, XT, random_state=seed))
    res["auto_wcv"] = renamed("auto_wcv", res["wcv"] if rep.drifted else res["scv"])
    res["auto_trcv"] = renamed("auto_trcv", res["trcv"] if rep.drifted else res["scv"])
    res["rank_scv_trcv"] = rank_mean("rank_scv_trcv", [res["scv"], res["trcv"]])
    if labeled:
        XL, yL, XU = enc.Xt[d.labeled], enc.yt[d.labeled], enc.Xt[d.unlabeled]
        res["trcv_l"] = timed("trcv_l", lambda: trcv_select(cands, Xs, ys, XU, X_target_labeled=XL,
                                                            y_target_labeled=yL, weights=beta, k=10,
                                                            random_state=seed))
        res["tcv"] = timed("tcv", lambda: target_cv(cands, XL, yL, k=10, random_state=seed))
        res["stv"] = timed("stv", lambda: source_target_validation(cands, Xs, ys, XL, yL, random_state=seed))
    return res, rep, beta


def _case_info(enc: Encoded, d: Draw, base: dict[str, Any], res: dict[str, Any], rep: DriftReport,
               beta: np.ndarray, truth: pd.Series, timings: dict[str, float]) -> dict[str, Any]:
    """The run's row of ``*_cases.csv``: sizes, rates, drift, KMM ESS, RT/TrCV diagnostics, errors, timings."""
    ys = enc.ys[d.source]
    errors = {k: sorted(v.errors) for k, v in res.items() if getattr(v, "errors", None)}
    return {
        **base, "n_source": len(d.source), "n_target": len(d.target), "n_labeled": len(d.labeled),
        "n_eval": len(d.evaluation), "n_features": enc.Xs.shape[1],
        "source_pos_rate": round(float(ys.mean()), 4), "target_pos_rate": round(float(enc.yt[d.evaluation].mean()), 4),
        "drifted": rep.drifted, "domain_auc": round(rep.domain_auc, 4), "domain_pvalue": rep.domain_pvalue,
        "mmd_pvalue": rep.mmd_pvalue, "kmm_ess": round(float(beta.sum() ** 2 / (beta ** 2).sum()), 1),
        "rt_undecided_pairs": int(res["rt"].pairs["winner"].isna().sum()),
        "trcv_constant_folds": int(sum(x.n_constant_folds for x in res["trcv"].details["results"].values())),
        "errors": "; ".join(f"{k}: {','.join(v)}" for k, v in errors.items()),
        "seconds": round(sum(timings.values()), 1), **{f"t_{k}": v for k, v in timings.items()},
        **{f"true_{k}": round(v, 4) for k, v in truth.items()},
    }


def run_case(enc: Encoded, seed: int, *, n_max: int, rf_trees: int, repeats: int,
             labeled: bool = True) -> tuple[list[dict], list[dict], dict]:
    """Every selector on one (case, seed); returns agreement rows, score rows and a case-info row."""
    d = draw(enc, seed, n_max)
    cands = candidates(seed, rf_trees)
    timed = _Timer({})
    fresh = {c.name: make_learner(c.name, random_state=seed, **({"n_estimators": rf_trees} if c.name == "RF" else {}))
             for c in cands}
    truth = timed("truth", lambda: true_accuracies(fresh, enc.Xs[d.source], enc.ys[d.source], enc.Xt[d.target],
                                                   enc.Xt[d.evaluation], enc.yt[d.evaluation]))
    res, rep, beta = _selectors(enc, d, cands, seed, repeats, labeled, timed)
    base = {"case": enc.case.name, "kind": enc.case.kind, "seed": seed}
    agree_rows, score_rows = [], []
    for sel, r in res.items():
        agree_rows.append({**agreement_row(truth, r, base, selector=sel, tie_tol=TIE_TOL),
                           "uses_target_labels": sel in LABELED_SELECTORS, "drifted": rep.drifted})
        for _, row in r.to_frame().iterrows():
            score_rows.append({**base, "selector": sel, "learner": row["learner"], "score": row["score"],
                               "rank": int(row["rank"]), "interval_low": row["interval_low"],
                               "interval_high": row["interval_high"], "true_accuracy": truth[row["learner"]]})
    return agree_rows, score_rows, _case_info(enc, d, base, res, rep, beta, truth, timed.timings)


def run_cases(names: list[str], registry: dict[str, Callable[[], Case]], seeds: list[int], *, n_max: int,
              rf_trees: int, repeats: int, tag: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[str, str]]:
    """``run_case`` for every case × seed with one BLAS thread; returns agreement, scores, cases, notes."""
    agree, scores, infos, notes = [], [], [], {}
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # StratifiedKFold's "least populated class" notices
        warnings.simplefilter("ignore", RuntimeWarning)  # learners a selector cannot score: listed in cases.csv
        for name in names:
            case = registry[name]()
            enc = encode(case)
            notes[name] = f"[{case.kind}] {case.note}; {len(enc.columns)} encoded features"
            for seed in seeds:
                t = time.perf_counter()
                a, s, info = run_case(enc, seed, n_max=n_max, rf_trees=rf_trees, repeats=repeats)
                agree += a
                scores += s
                infos.append(info)
                print(f"[{tag}] {name} seed {seed}: |S|={info['n_source']} |T|={info['n_target']} "
                      f"|L|={info['n_labeled']} drifted={info['drifted']} {time.perf_counter() - t:.1f}s",
                      file=sys.stderr, flush=True)
    return pd.DataFrame(agree), pd.DataFrame(scores), pd.DataFrame(infos), notes


# ----------------------------------------------------------------------------------------------------
# tables
# ----------------------------------------------------------------------------------------------------
def summarize(agree: pd.DataFrame, keys: list[str], order: tuple[str, ...] = SELECTOR_ORDER) -> pd.DataFrame:
    """Pooled pairwise accuracy, mean corr, τ, regret and best-hit per ``keys`` (last key = selector)."""
    return summarize_agreement(agree, keys, order)


def truth_table(infos: pd.DataFrame) -> pd.DataFrame:
    """Mean true target accuracy per case (over seeds), one column per learner."""
    cols = [f"true_{n}" for n in LEARNERS]
    t = infos.groupby("case", sort=False)[cols].mean().round(3)
    t.columns = list(LEARNERS)
    return t.reset_index()


def case_table(infos: pd.DataFrame) -> pd.DataFrame:
    """Per case (mean over seeds): sizes, class rates, drift verdict share, domain AUC, KMM ESS, seconds."""
    g = infos.groupby("case", sort=False)
    return g.agg(kind=("kind", "first"), S=("n_source", "first"), T=("n_target", "first"),
                 L=("n_labeled", "first"), eval_rows=("n_eval", "first"), features=("n_features", "first"),
                 src_pos=("source_pos_rate", "mean"), tgt_pos=("target_pos_rate", "mean"),
                 drifted=("drifted", "mean"), domain_auc=("domain_auc", "mean"), kmm_ess=("kmm_ess", "mean"),
                 seconds=("seconds", "sum")).round(3).reset_index()


def parse(argv: list[str] | None, doc: str, cases: dict[str, Callable[[], Case]], quick_cases: str,
          default_seeds: int) -> argparse.Namespace:
    """Shared command line of the TrCV and natural-shift replications."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 cases, 1 seed, ≤ 200 rows a side")
    ap.add_argument("--seeds", type=int, default=None, help=f"seeds 0..N-1 per case (default {default_seeds}; quick 1)")
    ap.add_argument("--n-max", type=int, default=None, help="rows drawn per side per seed (default 400; quick 200)")
    ap.add_argument("--rf-trees", type=int, default=50, help="trees of RF (default 50, for time; the product uses 200)")
    ap.add_argument("--repeats", type=int, default=None, help="repeats of 10-fold CV for cv10x, 0 = off (default 0)")
    ap.add_argument("--cases", default=None, help="comma-separated subset of " + ",".join(cases))
    ap.add_argument("--out", default="reports", help="output folder (default reports/)")
    args = ap.parse_args(argv)
    args.seeds = args.seeds if args.seeds is not None else (1 if args.quick else default_seeds)
    args.seed_list = list(range(args.seeds))
    args.n_max = args.n_max if args.n_max is not None else (200 if args.quick else 400)
    args.repeats = args.repeats if args.repeats is not None else 0
    args.cases = args.cases or (quick_cases if args.quick else ",".join(cases))
    args.names = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(args.names) - set(cases))
    if unknown:
        ap.error(f"unknown case(s) {unknown}; choose from {sorted(cases)}")
    return args
