"""Few-label peers side by side (issue 32, item 1): fewlabel as the flow runs it, 10-fold source CV, uniform
labels, active testing, Model Selector and CODA on the label-budget replication's cases and draws.

Run from the repository root::

    nice .venv/bin/python -m replications.replicate_label_peers --quick   # 3 cases, 1 seed
    nice .venv/bin/python -m replications.replicate_label_peers           # every case, seeds 15-17 (bias 15-16)
    nice .venv/bin/python -m replications.replicate_label_peers --seeds 18 19 20   # the addendum's draws
    .venv/bin/python -m replications.replicate_label_peers --pooled reports/label_budget_peers.csv \\
        reports/label_budget_peers_seeds18_19_20.csv                       # both, pooled (reported only)

Cases, candidates and draws are the label-budget study's (``replications.label_budget._core.case_makers``,
named ``replicate_label_budget.case_makers`` in the rule below; the fullbatch design: on natural shifts and TrCV
pairs the batch is the whole target group, ≤ 4000 rows; on feature bias ≤ 400 rows of the 50 % holdout), on seeds
no earlier rule used. The rule below was written into the report before any result of this script was seen.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from replications._common import md_table
from replications._label_peers import active_testing, coda, model_selector, pick_best
from replications.label_budget._core import (
    GROUPS,
    QUICK,
    Case,
    collect,
    group_predictions,
)
from shiftlib.selection import fewlabel_select, plan_labels, source_cv, target_predictions
from shiftlib.selection.fewlabel import decide

BUDGETS = (10, 25, 50, 100)
SEEDS = [15, 16, 17]  # never used by replicate_label_budget's rules (0-14; feature bias 0-9, large 12-13)
SELECTORS = ("fewlabel", "cv", "uniform", "active_testing", "model_selector", "coda")
GAP = 0.01  # within-best tolerance and the pairwise-order gap
EPS_RANGE = (0.01, 0.45)

RULE = """## Rule (fixed before any result of this script was seen)

Written at 21:09 UTC on 2026-11-27, before the first run (quick or full) of `replicate_label_peers`.

* **Draws.** `replicate_label_budget.case_makers` with the fullbatch design (`--n-max 400 --full-cap 4000`, RF 50
  trees): groups natural, trcv_pairs and feature_bias, seeds 15, 16, 17 (feature bias 15, 16: its first two), which
  no earlier rule used. Quick mode: the replication's `QUICK` cases, seed 15. Every selector sees the same case, the
  same candidates (DT, NB, LR, SVM, kNN, RF, CSLR fitted on the source sample) and the same batch.
* **Selectors** at b = 10, 25, 50, 100 labels:
  `fewlabel` as the flow runs it (`tasks.labels.write_plan` / `tasks.selection`): one round
  `plan_labels(budget=b, prior=None, random_state=seed·1000 + b)`, then `fewlabel_select` with the 10-fold source CV
  prior and the library's defaults, decided by `decide`; `cv` (10-fold stratified source CV, no labels);
  `uniform` (b rows drawn uniformly, each candidate's accuracy on them; nested prefixes of one permutation);
  `active_testing` (Kossen et al. 2021; acquisition ∝ 0.9 · the candidates' mean expected 0/1 loss under the
  candidates' mean probability + 0.1 · uniform, sampled without replacement, LURE accuracy estimates; nested);
  `model_selector` (Okanovic et al. 2025; greedy information gain over hard predictions, uniform prior, posterior
  mode; nested), with one ε for all candidates fixed without labels as 1 − the best source-CV accuracy, clipped to
  [0.01, 0.45] (the paper grid-searches ε with labels, which a deployment does not have).
  Ties of scores are broken at random (seeded), for every selector alike.
* **Truth.** Each candidate's accuracy on the rows of the truth pool that the selector did not see labeled (pool:
  the batch in natural / trcv_pairs, the whole holdout in feature_bias; for cv the whole pool).
* **Measures** per group and b: mean regret (best true accuracy − the pick's), the share of runs whose pick is
  within 0.01 of the best, pairwise order over pairs whose true gap is ≥ 0.01 (a tie of scores counts as wrong, as
  in the label-budget reports), and the fewest labels in {10, 25, 50, 100} at which ≥ 90 % of runs are within 0.01.
* **Comparison.** At b = 50, per group, the paired difference of regret (peer − fewlabel) over runs (case, seed),
  with a 95 % bootstrap interval (5000 resamples of runs, seed 0). A peer **beats** fewlabel in a group when the
  whole interval is below 0; fewlabel **beats** the peer when it is above 0; otherwise the group is **undecided**.
  A peer "wins" (a candidate for item 2 of the issue, "adopt what wins") only if it beats fewlabel in at least one
  group and is beaten in none. Nothing is adopted by this script: shiftlib and the flow's defaults are unchanged.
* **Addendum** (21:10 UTC, after the quick run's 3 runs and before any full run): the verdict is the one on seeds
  15–17 above. If time allows, the same script is also run on more seeds and reported beside it as more draws
  under the same rule, with its own verdict table; it does not replace the first. (21:12 UTC, before any result of
  them: these seeds are 18, 19, 20 — feature bias 18, 19 — `--seeds 18 19 20`, for time.)
* **CODA added** (21:12 UTC; the full run on seeds 15–17 without it was under way, none of its results read; no
  CODA result on any case seen): `coda` (Kay et al., ICCV 2025, simplified: consensus = the candidates' vote
  shares, Dirichlet prior rows 1 + 5 · the candidate's row-normalised confusion against the consensus, accuracy
  Σ_c p_c θ_k[c, c] moment-matched to a Beta, PBest by integration, greedy expected information gain about PBest,
  pick = PBest's mode; nested), judged by the same comparison. The seeds 15–17 run is repeated with it; every
  other selector is seeded identically, so their numbers must not change (checked).
"""


def _args(quick: bool) -> argparse.Namespace:
    return argparse.Namespace(fresh=None, quick=quick, n_max=400, design="fullbatch", full_cap=4000, rf_trees=50)


def _pairs(truth: np.ndarray, scores: np.ndarray) -> tuple[int, int]:
    """(correct, counted) over pairs whose true gap is ≥ GAP; a tie of scores counts as wrong."""
    ok = n = 0
    for a in range(len(truth)):
        for b in range(a + 1, len(truth)):
            d = truth[a] - truth[b]
            if abs(d) < GAP - 1e-12:
                continue
            n += 1
            ok += int(np.sign(scores[a] - scores[b]) == np.sign(d))
    return ok, n


def run_case(case: Case, args: argparse.Namespace) -> tuple[list[dict], dict]:
    """Every selector at every budget on one (case, seed)."""
    seed, tgt = case.seed, case.batch
    t0 = time.perf_counter()
    XT, yT, cands, names, all_pred = group_predictions(case, args)
    full = case.group != "feature_bias"
    pool = tgt if full else np.arange(len(case.yt))

    def truth(seen: np.ndarray) -> np.ndarray:
        ev = np.setdiff1d(pool, tgt[seen])
        return (all_pred[ev] == case.yt[ev, None]).mean(axis=0)

    pool_truth = truth(np.zeros(0, int))
    tp = target_predictions(cands, case.Xs, case.ys, XT, random_state=seed)
    cv = source_cv(cands, case.Xs, case.ys, k=10, random_state=seed)
    cv_s = cv.scores[names].to_numpy(float)
    eps = float(np.clip(1 - np.nanmax(cv_s), *EPS_RANGE))
    oracle = lambda rows: yT[np.asarray(rows, int)]  # noqa: E731
    rows: list[dict] = []
    base = {"group": case.group, "case": case.name, "seed": seed}

    def record(sel: str, b: int, scores: np.ndarray, seen: np.ndarray) -> None:
        tr = truth(np.asarray(seen, int))
        pick = pick_best(scores, np.random.default_rng([seed, b, SELECTORS.index(sel), 99]))
        ok, n = _pairs(tr, np.asarray(scores, float))
        regret = float(tr.max() - tr[pick])
        regret_pool = float(pool_truth.max() - pool_truth[pick])  # reported only: one truth for every selector
        rows.append({**base, "budget": b, "selector": sel, "n_labels": len(seen), "pick": names[pick],
                     "true_best": names[int(np.argmax(tr))], "regret": regret, "within": float(regret <= GAP + 1e-12),
                     "pairwise_correct": ok, "pairwise_counted": n, "regret_pool": regret_pool,
                     "within_pool": float(regret_pool <= GAP + 1e-12)})

    perm = np.random.default_rng([seed, 7]).permutation(len(tgt))
    at = {p.budget: p for p in active_testing(tp.predictions, tp.proba, tp.classes, oracle, BUDGETS, [seed, 31])}
    ms = {p.budget: p for p in model_selector(tp.predictions, tp.classes, oracle, BUDGETS, [seed, 37], eps=eps)}
    cd = {p.budget: p for p in coda(tp.predictions, tp.classes, oracle, BUDGETS, [seed, 41])}
    for b in BUDGETS:
        plan = plan_labels(cands, case.Xs, case.ys, XT, budget=b, random_state=seed * 1000 + b, prior=None,
                           predictions=tp)
        post = fewlabel_select(cands, case.Xs, case.ys, XT, plan=plan, y_labeled=yT[plan.rows], prior=cv,
                               predictions=tp, random_state=seed)
        record("fewlabel", b, decide(post, cv).scores[names].to_numpy(float), plan.rows)
        record("cv", b, cv_s, np.zeros(0, int))
        u = perm[:b]
        record("uniform", b, (tp.predictions[u] == yT[u, None]).mean(axis=0), u)
        record("active_testing", b, at[b].scores, at[b].rows)
        record("model_selector", b, ms[b].scores, ms[b].rows)
        record("coda", b, cd[b].scores, cd[b].rows)
    info = {**base, "n_batch": len(tgt), "n_pool": len(pool), "n_disagreement": len(tp.disagreement), "eps": eps,
            "seconds": round(time.perf_counter() - t0, 1)}
    return rows, info


def _boot(d: np.ndarray, n: int = 5000) -> tuple[float, float]:
    rng = np.random.default_rng(0)
    m = d[rng.integers(0, len(d), (n, len(d)))].mean(axis=1)
    return float(np.quantile(m, 0.025)), float(np.quantile(m, 0.975))


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    g = df.groupby(["group", "budget", "selector"], sort=False)
    s = g.agg(regret=("regret", "mean"), within=("within", "mean"), regret_pool=("regret_pool", "mean"),
              within_pool=("within_pool", "mean"), correct=("pairwise_correct", "sum"),
              counted=("pairwise_counted", "sum"), runs=("seed", "count")).reset_index()
    s["pairwise"] = s.correct / s.counted.where(s.counted > 0)
    return s


def labels_to_90(s: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (grp, sel), d in s.groupby(["group", "selector"], sort=False):
        ok = d[d.within >= 0.9 - 1e-12].budget
        out.append({"group": grp, "selector": sel, "labels for ≥ 90 % within 0.01":
                    str(int(ok.min())) if len(ok) else "> 100"})
    return pd.DataFrame(out)


def comparison(df: pd.DataFrame, budget: int = 50) -> pd.DataFrame:
    out = []
    d50 = df[df.budget == budget].pivot_table(index=["group", "case", "seed"], columns="selector", values="regret")
    for grp, d in d50.groupby(level="group", sort=False):
        for sel in ("cv", "uniform", "active_testing", "model_selector", "coda"):
            diff = (d[sel] - d["fewlabel"]).to_numpy()
            lo, hi = _boot(diff)
            verdict = "peer beats fewlabel" if hi < 0 else "fewlabel beats peer" if lo > 0 else "undecided"
            out.append({"group": grp, "peer": sel, "runs": len(diff), "mean regret peer − fewlabel":
                        f"{diff.mean():+.4f}", "95 % bootstrap": f"[{lo:+.4f}, {hi:+.4f}]", "verdict": verdict})
    return pd.DataFrame(out)


def wide(s: pd.DataFrame, value: str, fmt: str) -> str:
    parts = []
    for grp, d in s.groupby("group", sort=False):
        w = d.pivot(index="selector", columns="budget", values=value).reindex(list(SELECTORS))
        w = w.map(lambda x: format(x, fmt) if pd.notna(x) else "—")
        w.columns = [f"b={c}" for c in w.columns]
        parts.append(f"**{grp}** ({int(d.runs.iloc[0])} runs)\n\n" + md_table(w.reset_index()))
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="the replication's QUICK cases, seed 15 only")
    ap.add_argument("--seeds", type=int, nargs="*", default=None, help="seeds (default 15 16 17; quick 15)")
    ap.add_argument("--out", default="reports")
    ap.add_argument("--pooled", nargs="+", default=None, metavar="CSV",
                    help="only print the b = 50 comparison and summary of these runs' CSVs pooled (reported only)")
    a = ap.parse_args(argv)
    if a.pooled:
        df = pd.concat([pd.read_csv(f) for f in a.pooled], ignore_index=True)
        s50 = summarize(df)
        s50 = s50[s50.budget == 50][["group", "selector", "regret", "within", "pairwise", "regret_pool", "runs"]]
        print(md_table(comparison(df)) + "\n\n" + md_table(s50.round(4)))
        return 0
    args = _args(a.quick)
    seeds = a.seeds or ([15] if a.quick else SEEDS)
    groups = QUICK if a.quick else GROUPS
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    prefix = ("label_budget_peers" + ("_quick" if a.quick else "")
              + ("_seeds" + "_".join(map(str, a.seeds)) if a.seeds else ""))
    t0, c0 = time.perf_counter(), time.process_time()
    rows, infos, _ = collect(args, groups, seeds, run_case)
    df = pd.DataFrame(rows)
    df.to_csv(out / f"{prefix}.csv", index=False)
    pd.DataFrame(infos).to_csv(out / f"{prefix}_cases.csv", index=False)
    s = summarize(df)
    s.to_csv(out / f"{prefix}_summary.csv", index=False)
    comp = comparison(df)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    cmd = "nice .venv/bin/python -m replications.replicate_label_peers" + (" --quick" if a.quick else "") + (
        f" --seeds {' '.join(map(str, a.seeds))}" if a.seeds else "")
    text = "\n\n".join([
        "# Few-label peers side by side (issue 32, item 1)" + (" — quick run" if a.quick else ""),
        "<!-- the answer in five lines is written by hand above the rule after the run -->",
        RULE,
        "## Verdict at b = 50 (paired regret, peer − fewlabel; negative = the peer's pick is better)",
        md_table(comp),
        "## Mean regret", wide(s, "regret", ".4f"),
        "## Share of runs within 0.01 of the best", wide(s, "within", ".2f"),
        "## Pairwise order (pairs with true gap ≥ 0.01; score ties count as wrong)", wide(s, "pairwise", ".3f"),
        "## Reported only (added after the first run, not part of the rule): regret on one truth for all",
        "Each selector's truth above leaves out the rows it labeled, so a selector that labels most of a small "
        "batch's disagreement rows leaves rows on which the candidates barely differ. Here the truth is the whole "
        "pool (labeled rows included), the same for every selector.",
        "**Mean regret, whole pool**\n\n" + wide(s, "regret_pool", ".4f"),
        "**Share within 0.01, whole pool**\n\n" + wide(s, "within_pool", ".2f"),
        "## Labels needed for ≥ 90 % of runs within 0.01",
        md_table(labels_to_90(s).pivot(index="selector", columns="group",
                                       values="labels for ≥ 90 % within 0.01").reindex(list(SELECTORS)).reset_index()),
        f"## Command\n\n`{cmd}` — {elapsed:.0f} s wall time ({cpu:.0f} s CPU), {len(infos)} runs. Files: "
        f"`reports/{prefix}.csv` (one row per run, budget and selector), `reports/{prefix}_summary.csv`, "
        f"`reports/{prefix}_cases.csv` (batch, pool, disagreement rows, Model Selector's ε, seconds).",
    ]) + "\n"
    (out / f"{prefix}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
