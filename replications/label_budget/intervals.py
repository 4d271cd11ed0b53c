"""Do the shipped fewlabel posterior's intervals hold? A measurement of the label-budget study (it decides
nothing).

Measures, on the eighth rule's fresh fullbatch draws (natural and trcv_pairs seeds 6–8, feature bias 4–5), the
library's defaults (the plan chain at b = 10 … 200 and ``fewlabel_select``, prior = 10-fold CV): each
candidate's 95 % accuracy interval and each pair's 95 % contrast interval against the learners' true accuracy on
the whole batch, the posterior's estimand (coverage, width, error). Command::

    nice python -m replications.replicate_label_budget --intervals   # label_budget_intervals.{md,csv}
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from replications._common import md_table
from replications.label_budget._core import BUDGETS, Case, Z, _contrasts, _quiet_single_thread, case_makers
from replications.replicate_trcv import candidates
from shiftlib.selection import fewlabel_select, plan_labels, source_cv, target_predictions


def intervals_one(case: Case, args: argparse.Namespace) -> tuple[list[dict], list[dict]]:
    """The shipped chain (library defaults) on one (case, seed): each candidate's 95 % interval and each
    pair's 95 % contrast interval (normal, from ``details['cov']``) against the learners' true accuracy on
    the batch, the posterior's estimand (a measurement; it decides nothing)."""
    XT, yT = case.Xt[case.batch], case.yt[case.batch]
    cands = candidates(case.seed, args.rf_trees)
    names = [c.name for c in cands]
    tp = target_predictions(cands, case.Xs, case.ys, XT, random_state=case.seed)
    true = (tp.predictions == yT[:, None]).mean(axis=0)
    cv = source_cv(cands, case.Xs, case.ys, k=10, random_state=case.seed)
    base = {"group": case.group, "case": case.name, "seed": case.seed}
    cand_rows, pair_rows = [], []
    plan, y = None, None
    for b in BUDGETS:
        plan = plan_labels(cands, case.Xs, case.ys, XT, budget=b, already_labeled=None if plan is None else (plan, y),
                           random_state=case.seed * 1000 + b, prior=cv, predictions=tp)
        y = yT[plan.rows]
        post = fewlabel_select(cands, case.Xs, case.ys, XT, plan=plan, y_labeled=y, prior=cv, predictions=tp,
                               random_state=case.seed)
        th = post.scores.to_numpy()
        lo, hi = post.intervals["low"].to_numpy(), post.intervals["high"].to_numpy()
        level_err = float(th.mean() - true.mean())
        for j, n in enumerate(names):
            cand_rows.append({**base, "budget": b, "learner": n, "estimate": th[j], "low": lo[j], "high": hi[j],
                              "truth": true[j], "covered": bool(lo[j] <= true[j] <= hi[j]), "level_error": level_err})
        for a, c, sd, err in _contrasts(post, true):
            pair_rows.append({**base, "budget": b, "pair": f"{names[a]}|{names[c]}", "error": err,
                              "half_width": Z * sd, "covered": bool(abs(err) <= Z * sd)})
    return cand_rows, pair_rows


def intervals_main(args: argparse.Namespace, groups: dict[str, list[str]], out: Path, t0: float) -> int:
    """``--intervals``: coverage of the shipped posterior's intervals on the eighth rule's fresh fullbatch draws."""
    args.design, args.fresh = "fullbatch", "eighth"
    cand_rows, pair_rows = [], []
    makers, _ = case_makers(args, groups, [])
    with _quiet_single_thread():
        for _, _, mk in makers:
            c_rows, p_rows = intervals_one(mk(), args)
            cand_rows += c_rows
            pair_rows += p_rows
    cd, pdf = pd.DataFrame(cand_rows), pd.DataFrame(pair_rows)
    prefix = "label_budget_intervals" + ("_quick" if args.quick else "")
    cd.to_csv(out / f"{prefix}.csv", index=False)
    cd["abs_error"] = (cd.estimate - cd.truth).abs()
    cd["width"] = cd.high - cd.low
    cd["abs_level_error"] = cd.level_error.abs()
    pdf["abs_error"] = pdf.error.abs()
    t_c = cd.groupby(["group", "budget"]).agg(coverage=("covered", "mean"), mean_width=("width", "mean"),
                                              mae=("abs_error", "mean"), level_mae=("abs_level_error", "mean"))
    t_p = pdf.groupby(["group", "budget"]).agg(coverage=("covered", "mean"), mean_half_width=("half_width", "mean"),
                                               mae=("abs_error", "mean"))
    md = ["# A label budget: do the fewlabel posterior's intervals hold?", "",
          f"Produced by `python -m replications.replicate_label_budget --intervals{' --quick' if args.quick else ''}` "
          f"in {time.perf_counter() - t0:.0f} s: the library's defaults (the plan chain at b = 10, 25, 50, 100, "
          "200 and `fewlabel_select`, prior = 10-fold CV, 95 % normal intervals) on the eighth rule's fresh "
          "fullbatch draws (natural and trcv_pairs seeds 6–8, feature bias 4–5), against each learner's true "
          "accuracy on the whole batch, the posterior's estimand. A measurement: it decides nothing.", "",
          "## Each candidate's accuracy interval", "", md_table(t_c.round(3).reset_index()), "",
          "`level_mae`: the error of the mean over the candidates (the level every candidate shares).", "",
          "## Each pair's contrast interval (θ_a − θ_b, from the posterior covariance)", "",
          md_table(t_p.round(3).reset_index()), "",
          "## Reading", "",
          "* Labels are drawn only where the candidates disagree, so the accuracy they share on the rows where "
          "every candidate predicts the same class is the candidates' mean probability there, without labels; "
          "under shift that level is off (`level_mae`) and no variance in the posterior accounts for it. The "
          "per-candidate intervals are therefore too narrow for the absolute accuracy; the contrasts, which "
          "decide the order and `p_better`, do not depend on the level.",
          "* For an absolute accuracy with an interval, the estimation stage's label-free estimate "
          "(`reports/estimation.md`) is the one to read.", "",
          f"Files: `{prefix}.csv` (one row per case × seed × budget × learner).", ""]
    text = "\n".join(md)
    (out / f"{prefix}.md").write_text(text)
    print(text)
    return 0
