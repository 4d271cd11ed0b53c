"""How many pairs can labels order at all? The detectability measurement of the label-budget study (it
decides nothing; the paragraph "Detectability" of ``rules.RULES`` fixed it before any result was seen).

Measures, per (case, seed) of the fresh fullbatch draws of the eighth, ninth and tenth rounds and per learner
pair, the true gap on the batch, the pair's disagreement rows and the s.d. of its contrast (raw and less the
shipped surrogate), from which the **per-pair ceiling** of b labels alone; and the **design value** of one round
of b labels shared by all pairs, for the shipped first-round draw, the uniform one and oracle pair weights;
beside what the shipped method ordered on the same draws (read from the fresh rounds' CSVs in ``reports/``).
Command::

    nice python -m replications.replicate_label_budget --detectability
    # label_budget_detectability.{md,csv}, label_budget_detectability_design.csv
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from itertools import combinations
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pandas as pd

from replications._common import md_table
from replications.label_budget._core import (
    BUDGETS,
    GROUPS,
    LARGE_BIAS_TABLES,
    Case,
    _quiet_single_thread,
    case_makers,
)
from replications.label_budget._report import summary
from replications.label_budget.rules import RULES
from replications.replicate_estimation import MECHANISMS as BIAS_MECHANISMS
from replications.replicate_trcv import TIE_TOL, candidates
from shiftlib.selection import target_predictions
from shiftlib.selection.fewlabel import DEFENSIVE_MIX, _draw_distribution


def pair_detectability(case: Case, args: argparse.Namespace) -> list[dict]:
    """Per learner pair on one (case, seed): the true gap on the batch, the pair's disagreement rows and the
    s.d. of its contrast over them, raw (S_z) and less the shipped surrogate (S_r) (the detectability
    measurement, rules.RULES)."""
    cands = candidates(case.seed, args.rf_trees)
    XT, yT = case.Xt[case.batch], case.yt[case.batch]
    tp = target_predictions(cands, case.Xs, case.ys, XT, random_state=case.seed)
    C = (tp.predictions == yT[:, None]).astype(float)
    right = tp.right_proba()
    out = []
    for a, b in combinations(range(len(tp.names)), 2):
        D = tp.predictions[:, a] != tp.predictions[:, b]
        z = C[D, a] - C[D, b]
        r = z - (right[D, a] - right[D, b])
        m = int(D.sum())
        out.append({"group": case.group, "case": case.name, "seed": case.seed, "a": tp.names[a], "b": tp.names[b],
                    "n_batch": len(yT), "m": m, "delta": float(np.mean(C[:, a] - C[:, b])),
                    "s_z": float(np.std(z, ddof=1)) if m > 1 else 0.0,
                    "s_r": float(np.std(r, ddof=1)) if m > 1 else 0.0})
    return out


def design_expected_right(Z: np.ndarray, q: np.ndarray, n: int, n_batch: int) -> float:
    """Expected number of pairs (columns of the contrasts ``Z`` on the disagreement rows) that ``n`` labels drawn
    with probabilities ``q`` order rightly: Σ Φ(|Δ|/sd), sd² = (Σ (z/N)²/q − Δ²)/n · (1 − n/|D|) (Hansen–Hurwitz
    with the without-repeats factor; the design value, rules.RULES)."""
    delta = Z.sum(axis=0) / n_batch
    v = ((Z / n_batch) ** 2 / q[:, None]).sum(axis=0) - delta ** 2
    sd = np.sqrt(np.clip(v, 0, None) / n * max(0.0, 1 - n / len(Z)))
    with np.errstate(divide="ignore"):
        zs = np.where(sd > 0, np.abs(delta) / sd, np.inf)
    return float(sum(_phi(x) for x in zs))


def design_values(case: Case, args: argparse.Namespace) -> list[dict]:
    """Per budget on one (case, seed): the expected number of counted pairs a one-round Horvitz–Thompson design
    orders rightly with the true variance and no prior, for the shipped first-round q, uniform over D and the
    oracle pair weights (the design value, rules.RULES)."""
    from scipy.optimize import minimize

    cands = candidates(case.seed, args.rf_trees)
    XT, yT = case.Xt[case.batch], case.yt[case.batch]
    tp = target_predictions(cands, case.Xs, case.ys, XT, random_state=case.seed)
    N, D = len(yT), tp.disagreement
    C = (tp.predictions[D] == yT[D, None]).astype(float)
    pairs = list(combinations(range(len(tp.names)), 2))
    Z = np.column_stack([C[:, a] - C[:, b] for a, b in pairs])
    A = np.column_stack([tp.predictions[D, a] != tp.predictions[D, b] for a, b in pairs]).astype(float)
    delta = Z.sum(axis=0) / N
    counted = np.abs(delta) >= TIE_TOL

    def right(q: np.ndarray, n: int) -> float:
        return design_expected_right(Z[:, counted], q, n, N)

    def q_of(logw: np.ndarray) -> np.ndarray:
        u = np.sqrt(A @ np.exp(logw))
        return (1 - DEFENSIVE_MIX) * u / u.sum() + DEFENSIVE_MIX / len(D)

    out = []
    for b in BUDGETS:
        row = {"group": case.group, "case": case.name, "seed": case.seed, "budget": b,
               "counted": int(counted.sum()), "n_disagreement": len(D)}
        if len(D) == 0 or not counted.any():
            out.append({**row, "shipped": 0.0, "uniform": 0.0, "oracle_weights": 0.0})
            continue
        best = minimize(lambda lw, b=b: -right(q_of(lw), b), np.zeros(len(pairs)), method="Powell",
                        options={"xtol": 1e-2, "ftol": 1e-4, "maxiter": 3000})
        out.append({**row, "shipped": right(_draw_distribution(tp, D, dict.fromkeys(pairs, 1.0)), b),
                    "uniform": right(np.full(len(D), 1 / len(D)), b), "oracle_weights": -float(best.fun)})
    return out


def detect_probability(d: pd.DataFrame, budget: int, s_col: str) -> pd.Series:
    """Φ(|Δ|/sd) per pair for all ``budget`` labels drawn uniformly without replacement from the pair's
    disagreement rows (1 where they are all labeled)."""
    m = d.m.to_numpy(float)
    n = np.minimum(budget, m)
    with np.errstate(divide="ignore", invalid="ignore"):
        sd = (m / d.n_batch) * d[s_col] / np.sqrt(n) * np.sqrt(np.clip(1 - n / m, 0, None))
        zscore = np.where(sd > 0, d.delta.abs() / sd, np.inf)
    return pd.Series([_phi(x) for x in zscore], index=d.index)


def _phi(x: float) -> float:
    return 1.0 if math.isinf(x) else NormalDist().cdf(x)


def detectability_main(args: argparse.Namespace, out: Path, t0: float) -> int:
    """The detectability measurement (rules.RULES): per-pair ceilings of labels alone on the fresh
    fullbatch draws, beside the shipped method on the same draws."""
    args.design = "fullbatch"
    rows, designs = [], []
    for rule in ("eighth", "ninth", "tenth"):
        args.fresh = rule
        groups = dict(GROUPS)
        if rule == "tenth":
            groups["feature_bias_large"] = [f"{t}_{m}" for t in LARGE_BIAS_TABLES for m in BIAS_MECHANISMS]
        makers, _ = case_makers(args, groups, [])
        with _quiet_single_thread():
            for name, seed, mk in makers:
                case = mk()
                rows += pair_detectability(case, args)
                designs += design_values(case, args)
                print(f"{rule} {name} seed {seed}", file=sys.stderr, flush=True)
    d = pd.DataFrame(rows)
    d.to_csv(out / "label_budget_detectability.csv", index=False)
    dv = pd.DataFrame(designs)
    dv.to_csv(out / "label_budget_detectability_design.csv", index=False)
    dg = dv.groupby(["group", "budget"], sort=False)[["counted", "shipped", "uniform", "oracle_weights"]].sum()
    for k in ("shipped", "uniform", "oracle_weights"):
        dg[k] = (dg[k] / dg.counted).round(3)
    dt = dg.reset_index().pivot_table(index="group", columns="budget", values=["shipped", "oracle_weights"],
                                      sort=False)
    dt.columns = [f"{k} b={b}" for k, b in dt.columns]
    counted = d[d.delta.abs() >= TIE_TOL].copy()
    table = []
    for g in dict.fromkeys(counted.group):
        cg = counted[counted.group == g]
        line = {"group": g, "counted pairs": len(cg), "share gap < 0.02": round(float((cg.delta.abs() < 0.02).mean()), 3)}
        for col, tag in (("s_z", "HT"), ("s_r", "difference")):
            for b in BUDGETS:
                line[f"{tag} b={b}"] = round(float(detect_probability(cg, b, col).mean()), 3)
        table.append(line)
    shipped = []
    for f, sel in (("label_budget_fresh8_fullbatch.csv", "fewlabel_bayes_dm"), ("label_budget_fresh9_fullbatch.csv",
                   "fewlabel_now"), ("label_budget_fresh10.csv", "fewlabel_now")):
        x = pd.read_csv(Path(__file__).resolve().parents[2] / "reports" / f)  # the fresh reports, wherever --out is
        shipped.append(x[x.selector.isin([sel, "cv"])].assign(selector=lambda v: v.selector.where(v.selector == "cv",
                                                                                                   "shipped")))
    sh = summary(pd.concat(shipped), ["group", "budget", "selector"])
    tw = sh.pivot_table(index=["group", "selector"], columns="budget", values="pairwise_acc", sort=False)
    tw.columns = [f"b={c}" for c in tw.columns]
    t = pd.DataFrame(table)
    md = ["# A label budget: how many pairs can labels order at all?", "",
          "## Measurement (committed before any result of it was seen)", "",
          "* Detectability" + RULES.split("* Detectability")[1].split("* Second design")[0].rstrip(), "",
          f"Produced by `python -m replications.replicate_label_budget --detectability` (RF {args.rf_trees} trees) in "
          f"{time.perf_counter() - t0:.0f} s wall time; {d.groupby(['case', 'seed']).ngroups} (case, seed) draws, "
          f"{len(d)} pairs, {len(counted)} counted (|Δ| ≥ {TIE_TOL}).", "",
          "## Per-pair ceiling of labels alone (mean Φ(|Δ|/sd) over counted pairs)", "",
          "HT: the Horvitz–Thompson contrast; difference: the same design with the shipped surrogate.", "",
          md_table(t[["group", "counted pairs", "share gap < 0.02", *[f"HT b={b}" for b in BUDGETS]]]), "",
          md_table(t[["group", *[f"difference b={b}" for b in BUDGETS]]]), "",
          "## Design value of one round shared by all pairs (true variance, no prior)", "",
          "Expected share of counted pairs ordered rightly: `shipped` = the flow's first-round q, `oracle_weights` ="
          " the best pair weights of the same family chosen knowing the truth (uniform over D: the CSV).", "",
          md_table(dt[[c for k in ("shipped", "oracle_weights") for c in dt.columns if c.startswith(k + " ")]]
                   .reset_index()), "",
          "## The shipped method and CV on the same draws (pooled pairwise-order accuracy, from the fresh reports' CSVs)",
          "", md_table(tw.reset_index()), "",
          "Files: `label_budget_detectability.csv` (one row per case × seed × learner pair: Δ, m, S_z, S_r), "
          "`label_budget_detectability_design.csv` (one row per case × seed × budget: expected pairs ordered).", ""]
    text = "\n".join(md)
    (out / "label_budget_detectability.md").write_text(text)
    print(text)
    return 0
