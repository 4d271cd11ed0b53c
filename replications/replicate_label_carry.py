"""Issue 32, item 3: labels carried across nightly batches. On time-ordered real tables, how many labels per night
does few-label selection need to pick a model within 0.01 of the best, when yesterday's labels are carried into
today's selection (``shiftlib.selection.carry.carry_labels``, importance-weighted for the shift between the
batches) against planning each night afresh?

Run from the repository root::

    nice python -m replications.replicate_label_carry            # full run: 11 tables × 5 seeds
    nice python -m replications.replicate_label_carry --quick    # smoke run: 2 tables, seed 0, b ∈ {10, 50}

The rule (tables, seeds, budgets, arms, truth, the measure and the target) is the section "Rule" of
``reports/label_carry.md``, written before this script existed; the constants below are its settings. The tables and
batches are ``replications.replicate_decisions``' ``time`` sequences, through its ``encode`` / ``build_batches`` /
``candidates`` (imported). Writes ``reports/label_carry_runs.csv`` (one row per table, seed, night, budget and arm)
and ``reports/label_carry_tables.md`` (the measured tables); ``--quick`` writes ``label_carry_quick_*`` instead. The
answer at the top of ``reports/label_carry.md`` is written by hand from them.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from replications._common import code_stamp, md_table
from replications.replicate_decisions import LEARNERS, SEQUENCES, build_batches, candidates, encode
from shiftlib.selection import decide, fewlabel_select, plan_labels, regret, source_cv, target_predictions
from shiftlib.selection.carry import carry_labels
from shiftlib.selection.importance import importance_weights

#: the modules whose code a run measures (their digests go into the report)
MEASURED_MODULES = ("shiftlib/selection/carry.py", "shiftlib/selection/fewlabel.py", "replications/replicate_label_carry.py")

#: the rule's settings (reports/label_carry.md, "Rule")
BUDGETS = (5, 10, 15, 20, 30, 40, 50, 60, 80, 100)
SEEDS = (0, 1, 2, 3, 4)
WITHIN = 0.01  # a pick within this of the best true accuracy
RATE = 0.90  # share of runs within, for "labels per night"
JUDGED_NIGHTS = (2, 3, 4)
QUICK_SEQUENCES = ("oj_by_week", "smarket_by_year")
QUICK_BUDGETS = (10, 50)
PAIRED_BUDGETS = (20, 50)
BOOT = 5000
ARMS = ("fresh", "carried")


def plan_seed(seed: int, night: int, budget: int) -> int:
    return 10000 * seed + 100 * night + budget


def run_sequence(spec: Any, enc: Any, seed: int, budgets: tuple[int, ...]) -> list[dict]:
    """Every night, budget and arm of one (table, seed): one row each (module docstring, the rule)."""
    batches = build_batches(spec, enc, seed)
    Xs, ys = batches[0].X.to_numpy(), batches[0].y
    cands = candidates(LEARNERS, seed)
    names = list(cands)
    cv = source_cv(cands, Xs, ys, k=10, random_state=seed)
    rows: list[dict] = []
    prev: dict[int, tuple[Any, np.ndarray]] = {}  # budget → (yesterday's plan, its labels)
    tp_prev = X_prev = None
    for night in range(1, len(batches)):
        Xt, yt = batches[night].X.to_numpy(), batches[night].y
        tp = target_predictions(cands, Xs, ys, Xt, random_state=seed)
        w = None
        if X_prev is not None:  # the shift between the nights, fitted once per night (carry_labels' default)
            from shiftlib.weights import DiscriminativeWeights

            w = importance_weights(DiscriminativeWeights(random_state=seed), X_prev, Xt)
        today: dict[int, tuple[Any, np.ndarray]] = {}
        for b in budgets:
            b_eff = min(b, len(Xt) // 2)
            plan = plan_labels(cands, Xs, ys, Xt, budget=b_eff, prior=None, predictions=tp,
                               random_state=plan_seed(seed, night, b))
            y_lab = yt[plan.rows]
            today[b] = (plan, y_lab)
            seen = np.zeros(len(Xt), bool)
            seen[plan.rows] = True
            truth = pd.Series((tp.predictions[~seen] == yt[~seen, None]).mean(axis=0), index=names)
            base = {"sequence": spec.name, "table": spec.table, "seed": seed, "night": night, "budget": b,
                    "n_labels": int(len(plan.rows)), "n_batch": len(Xt), "n_disagreement": int(len(tp.disagreement)),
                    "best": float(truth.max())}
            post = fewlabel_select(cands, Xs, ys, Xt, plan=plan, y_labeled=y_lab, prior=cv, predictions=tp,
                                   random_state=seed)
            pick = decide(post, cv)
            rows.append({**base, "arm": "fresh", "regret": regret(truth, pick), "pick": "|".join(pick.best),
                         "prior_weight": post.details["prior_weight"], "tau": post.details["tau2"] ** 0.5})
            if night >= 2:
                plan_y, y_y = prev[b]
                car = carry_labels(X_prev, Xt, y_prev=y_y, plan_prev=plan_y, predictions_prev=tp_prev,
                                   predictions=tp, prior=cv, weights=w, random_state=seed)
                pri = car.as_prior()
                post_c = fewlabel_select(cands, Xs, ys, Xt, plan=plan, y_labeled=y_lab, prior=pri, predictions=tp,
                                         random_state=seed)
                pick_c = decide(post_c, pri)
                rows.append({**base, "arm": "carried", "regret": regret(truth, pick_c), "pick": "|".join(pick_c.best),
                             "prior_weight": post_c.details["prior_weight"], "tau": post_c.details["tau2"] ** 0.5,
                             "carried_n": car.n_carried, "carried_ess": car.ess,
                             "carried_prior_weight": car.details["prior_weight"],
                             "weights_ess_share": float(w.sum() ** 2 / np.sum(w ** 2) / len(w))})
        prev, tp_prev, X_prev = today, tp, Xt
    return rows


def ceiling_sequence(spec: Any, enc: Any, seed: int, budgets: tuple[int, ...]) -> list[dict]:
    """``--ceiling`` (added after the rule's run, reported only): what perfect knowledge could give, per night
    t ≥ 2. ``yesterday``: the pick by yesterday's true whole-batch accuracies (every label of yesterday carried, no
    shift correction needed), judged on today's whole batch. ``today_all``: the pick by today's true whole-batch
    accuracies (the estimand of ``fewlabel_select``, known exactly), judged as the rule judges, on the rows the b-label
    plan left unlabeled."""
    batches = build_batches(spec, enc, seed)
    Xs, ys = batches[0].X.to_numpy(), batches[0].y
    cands = candidates(LEARNERS, seed)
    names = list(cands)
    rows: list[dict] = []
    acc_prev = None
    for night in range(1, len(batches)):
        Xt, yt = batches[night].X.to_numpy(), batches[night].y
        tp = target_predictions(cands, Xs, ys, Xt, random_state=seed)
        acc = pd.Series((tp.predictions == yt[:, None]).mean(axis=0), index=names)
        base = {"sequence": spec.name, "seed": seed, "night": night}
        if acc_prev is not None:
            rows.append({**base, "kind": "yesterday", "budget": 0, "regret": regret(acc, acc_prev)})
            for b in budgets:
                plan = plan_labels(cands, Xs, ys, Xt, budget=min(b, len(Xt) // 2), prior=None, predictions=tp,
                                   random_state=plan_seed(seed, night, b))
                seen = np.zeros(len(Xt), bool)
                seen[plan.rows] = True
                truth = pd.Series((tp.predictions[~seen] == yt[~seen, None]).mean(axis=0), index=names)
                rows.append({**base, "kind": "today_all", "budget": b, "regret": regret(truth, acc)})
        acc_prev = acc
    return rows


# ----------------------------------------------------------------------------------------------------
# the measures
# ----------------------------------------------------------------------------------------------------
def labels_needed(rates: pd.Series) -> float:
    """The fewest budget whose share within is ≥ RATE (NaN when none is)."""
    ok = rates[rates >= RATE - 1e-12]
    return float(ok.index.min()) if len(ok) else float("nan")


def flat(df: pd.DataFrame) -> pd.DataFrame:
    """A pivot's (value, arm) columns as "value arm"."""
    out = df.copy()
    out.columns = [" ".join(str(p) for p in c if str(p)) if isinstance(c, tuple) else str(c) for c in out.columns]
    return out


def by_budget(df: pd.DataFrame) -> pd.DataFrame:
    d = df.assign(within=df.regret <= WITHIN + 1e-12)
    g = d.groupby(["arm", "budget"])
    return pd.DataFrame({"runs": g.size(), "within": g.within.mean(), "mean_regret": g.regret.mean(),
                         "prior_weight": g.prior_weight.mean(), "tau": g.tau.mean()}).reset_index()


def per_table(df: pd.DataFrame) -> pd.DataFrame:
    d = df.assign(within=df.regret <= WITHIN + 1e-12)
    out = []
    for (seq, arm), g in d.groupby(["sequence", "arm"]):
        rates = g.groupby("budget").within.mean()
        out.append({"sequence": seq, "arm": arm, "labels_needed": labels_needed(rates),
                    **{f"within@{b}": rates.get(b, np.nan) for b in (5, 20, 50, 100)},
                    "mean_regret@20": g[g.budget == 20].regret.mean()})
    return flat(pd.DataFrame(out).pivot(index="sequence", columns="arm").reset_index())


def paired(df: pd.DataFrame, budget: int) -> dict[str, float]:
    """Mean regret carried − fresh at ``budget`` with a 95 % bootstrap over (table, seed) clusters."""
    d = df[df.budget == budget].pivot_table(index=["sequence", "seed", "night"], columns="arm", values="regret")
    diff = (d["carried"] - d["fresh"]).groupby(level=[0, 1]).agg(["sum", "count"])
    rng = np.random.default_rng(0)
    idx = rng.integers(0, len(diff), size=(BOOT, len(diff)))
    s, c = diff["sum"].to_numpy(), diff["count"].to_numpy()
    boots = s[idx].sum(axis=1) / c[idx].sum(axis=1)
    return {"budget": budget, "mean_diff": float(s.sum() / c.sum()), "low": float(np.quantile(boots, 0.025)),
            "high": float(np.quantile(boots, 0.975)), "clusters": len(diff)}


def verdict(lab_fresh: float, lab_carried: float) -> str:
    if np.isnan(lab_fresh) and np.isnan(lab_carried):
        return "undetermined on this grid: neither arm reaches 90 % within 0.01 at b ≤ 100"
    if np.isnan(lab_fresh):
        ok = lab_carried <= 60
        return f"{'holds' if ok else 'does not hold'}: fresh does not reach 90 % at b ≤ 100, carried at {lab_carried:g}"
    if np.isnan(lab_carried):
        return f"does not hold: carried does not reach 90 % at b ≤ 100, fresh at {lab_fresh:g}"
    ok = lab_carried <= 2 / 3 * lab_fresh + 1e-9
    return (f"{'holds' if ok else 'does not hold'}: carried {lab_carried:g} against fresh {lab_fresh:g} labels per "
            f"night (ratio {lab_carried / lab_fresh:.2f}; the target is ≤ 0.67)")


def write_tables(df: pd.DataFrame, out: Path, prefix: str, args: argparse.Namespace, elapsed: float) -> str:
    judged = df[df.night.isin(JUDGED_NIGHTS)]
    bb = by_budget(judged)
    rates = {a: bb[bb.arm == a].set_index("budget").within for a in ARMS}
    need = {a: labels_needed(rates[a]) if a in set(bb.arm) else float("nan") for a in ARMS}
    md = [f"# Labels carried across nightly batches: measured tables{' (quick)' if args.quick else ''}", "",
          f"Command: `python -m replications.replicate_label_carry{' --quick' if args.quick else ''}`; started "
          f"{args.started}, {elapsed / 60:.1f} min wall; {args.code}. Rule: `reports/label_carry.md`.", "",
          f"**Labels per night** (fewest b with ≥ {RATE:.0%} of runs within {WITHIN} of the best; nights "
          f"{', '.join(map(str, JUDGED_NIGHTS))}): fresh {need['fresh']:g}, carried {need['carried']:g}. "
          f"Target (carried ≤ ⅔ fresh): {verdict(need['fresh'], need['carried'])}.", "",
          "## Pooled, by budget (nights 2–4)", "",
          md_table(flat(bb.pivot(index="budget", columns="arm", values=["within", "mean_regret"]).reset_index()),
                   ".4f"), "",
          "## The posterior (nights 2–4): prior weight and τ", "",
          md_table(flat(bb.pivot(index="budget", columns="arm", values=["prior_weight", "tau"]).reset_index()),
                   ".3f"), ""]
    if "carried" in set(df.arm):
        pr = [paired(judged, b) for b in PAIRED_BUDGETS if b in set(judged.budget)]
        md += ["## Paired mean regret, carried − fresh (95 % bootstrap over table × seed)", "",
               md_table(pd.DataFrame(pr), ".4f"), ""]
        c = judged[judged.arm == "carried"]
        md += [f"Carried labels: weights' effective sample size {c.weights_ess_share.mean():.2f} of yesterday's batch "
               f"on average (min {c.weights_ess_share.min():.2f}); the carried estimate's weight against CV in the "
               f"carried prior {c.carried_prior_weight.mean():.2f} (CV's share).", ""]
    md += ["## Per table (nights 2–4; labels needed = fewest b with ≥ 90 % of its runs within)", "",
           md_table(per_table(judged).round(4), ".4f"), "",
           "## Night 1 (no yesterday: fresh only)", "",
           md_table(by_budget(df[df.night == 1]).reset_index(drop=True), ".4f"), ""]
    text = "\n".join(md)
    (out / f"{prefix}tables.md").write_text(text)
    return text




def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 tables, seed 0, b ∈ {10, 50}")
    ap.add_argument("--out", default="reports")
    ap.add_argument("--ceiling", action="store_true",
                    help="reported only: picks by yesterday's and by today's true accuracies (label_carry_ceiling.csv)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    prefix = "label_carry_quick_" if args.quick else "label_carry_"
    seqs = [s for s in SEQUENCES if s.kind == "time" and (not args.quick or s.name in QUICK_SEQUENCES)]
    seeds = (0,) if args.quick else SEEDS
    budgets = QUICK_BUDGETS if args.quick else BUDGETS
    args.code = code_stamp(MEASURED_MODULES)
    args.started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"started {args.started}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    rows: list[dict] = []
    if args.ceiling:
        with threadpool_limits(1), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for s in seqs:
                enc = encode(s.table, s.drop)
                for seed in seeds:
                    rows += ceiling_sequence(s, enc, seed, budgets)
        df = pd.DataFrame(rows).assign(within=lambda d: d.regret <= WITHIN + 1e-12)
        df.to_csv(out / f"{prefix}ceiling.csv", index=False)
        summary = df.groupby(["kind", "budget"]).agg(runs=("regret", "size"), within=("within", "mean"),
                                                     mean_regret=("regret", "mean")).reset_index()
        print(f"started {args.started}, {(time.perf_counter() - t0) / 60:.1f} min; {args.code}")
        print(md_table(summary, ".4f"))
        return 0
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in seqs:
            enc = encode(s.table, s.drop)
            for seed in seeds:
                t = time.perf_counter()
                rows += run_sequence(s, enc, seed, budgets)
                print(f"{s.name} seed {seed}: {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
            pd.DataFrame(rows).to_csv(out / f"{prefix}runs.csv", index=False)
    df = pd.DataFrame(rows)
    df.to_csv(out / f"{prefix}runs.csv", index=False)
    print(write_tables(df, out, prefix, args, time.perf_counter() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
