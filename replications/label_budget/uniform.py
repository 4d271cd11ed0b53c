"""A uniform share of each label plan (``shiftlib.selection.fewlabel.UNIFORM_SHARE``): does it make the accuracy
reported with labels hold, at what cost to the pick? A trial with its rule (``RULE_MD``) committed before any run.

Runs, on fresh fullbatch draws no measurement has used (natural and trcv_pairs seeds 15–17, feature bias 10–11:
``FRESH_SEEDS['eleventh']``), the library's plan chain at b = 25, 50, 100 with ``fewlabel_select`` (prior = 10-fold
CV) twice: ``share0`` (what ships, ``uniform_share=0``) and ``share20`` (``uniform_share=0.2``). Command::

    nice python -m replications.replicate_label_budget --uniform   # label_budget_uniform.{md,csv}
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from replications._common import md_table
from replications.label_budget._core import Z, _quiet_single_thread, case_makers
from replications.replicate_trcv import candidates
from shiftlib.selection import fewlabel_select, plan_labels, source_cv, target_predictions

ARMS = {"share0": 0.0, "share20": 0.2}
UNIFORM_BUDGETS = (25, 50, 100)

RULE_MD = [
    "## The rule (fixed before the run)",
    "",
    "Committed with this script before any run of it, after `uniform_share` was implemented, on these grounds:",
    "helper-37 saw an accuracy reported with 50 labels as 0.559 [0.494, 0.623] whose truth was 0.270 (modeldata",
    "hpc_data): labels fall only where the candidates disagree, so the accuracy they share where they agree is",
    "their mean probability there, and `reports/label_budget_intervals.md` measured each candidate's interval",
    "covering 0.34–0.48 at 100 labels. No run of this script, and no draw of these seeds, was looked at before.",
    "",
    "**Cases.** The label-budget replication's three groups (feature_bias, natural, trcv_pairs), fullbatch design,",
    "on seeds no measurement has used (`FRESH_SEEDS['eleventh']`): natural and trcv_pairs 15–17, feature bias",
    "10–11. Candidates, prior (10-fold source CV) and truth (each candidate's accuracy on the whole batch) as",
    "`replications/label_budget/intervals.py`.",
    "",
    "**Arms.** The plan chain at b = 25, 50, 100 (each budget continuing the last) and `fewlabel_select`, with",
    "`uniform_share` 0 (`share0`, what ships) and 0.2 (`share20`); one share, fixed before the run, not tuned.",
    "",
    "**Measures**, per group × budget × arm: *coverage* of each candidate's 95 % accuracy interval as the flow",
    "reports it with labels (θ ± 1.96 √(Var θ + `common_var`), `tasks/selection.py:_fewlabel_table`); its mean",
    "width; the *regret* of the pick (the best candidate's true accuracy minus the picked one's).",
    "",
    "**Verdict.** `UNIFORM_SHARE` becomes 0.2 if at b = 50, in every group, `share20`'s coverage is at least 0.10",
    "above `share0`'s and its mean regret at most 0.002 above `share0`'s. Otherwise it stays 0. Either way the",
    "numbers are reported.",
]


def uniform_one(case, args: argparse.Namespace) -> list[dict]:
    """Both arms' plan chains on one (case, seed): each candidate's reported interval and the pick's regret."""
    XT, yT = case.Xt[case.batch], case.yt[case.batch]
    cands = candidates(case.seed, args.rf_trees)
    names = [c.name for c in cands]
    tp = target_predictions(cands, case.Xs, case.ys, XT, random_state=case.seed)
    true = (tp.predictions == yT[:, None]).mean(axis=0)
    cv = source_cv(cands, case.Xs, case.ys, k=10, random_state=case.seed)
    rows = []
    for arm, share in ARMS.items():
        plan, y = None, None
        for b in UNIFORM_BUDGETS:
            plan = plan_labels(cands, case.Xs, case.ys, XT, budget=b, random_state=case.seed * 1000 + b, prior=cv,
                               predictions=tp, already_labeled=None if plan is None else (plan, y),
                               uniform_share=share)
            y = yT[plan.rows]
            post = fewlabel_select(cands, case.Xs, case.ys, XT, plan=plan, y_labeled=y, prior=cv, predictions=tp,
                                   random_state=case.seed)
            theta = pd.Series(post.details.get("accuracy", post.scores), dtype=float).reindex(names).to_numpy()
            sd = np.sqrt(np.clip(np.diag(np.asarray(post.details["cov"], float)) + post.details["common_var"], 0,
                                 None))
            pick = names.index(str(post.scores.idxmax()))
            for j, n in enumerate(names):
                rows.append({"group": case.group, "case": case.name, "seed": case.seed, "arm": arm, "budget": b,
                             "learner": n, "estimate": theta[j], "low": theta[j] - Z * sd[j],
                             "high": theta[j] + Z * sd[j], "truth": true[j],
                             "covered": bool(abs(theta[j] - true[j]) <= Z * sd[j]),
                             "regret": float(true.max() - true[pick]), "n_labels": len(plan.rows)})
    return rows


def verdict(t: pd.DataFrame) -> str:
    at = t[t.budget == 50].set_index(["group", "arm"])
    ok = []
    for g in sorted(set(at.index.get_level_values(0))):
        c0, c2 = at.loc[(g, "share0"), "coverage"], at.loc[(g, "share20"), "coverage"]
        r0, r2 = at.loc[(g, "share0"), "regret"], at.loc[(g, "share20"), "regret"]
        ok.append((g, c2 - c0 >= 0.10 and r2 - r0 <= 0.002, c0, c2, r0, r2))
    words = "; ".join(f"{g}: coverage {c2:.3f} against {c0:.3f}, regret {r2:.4f} against {r0:.4f}"
                      for g, _, c0, c2, r0, r2 in ok)
    return (f"**`UNIFORM_SHARE` becomes 0.2** by the rule (b = 50): {words}." if all(o[1] for o in ok) else
            f"**`UNIFORM_SHARE` stays 0** by the rule (b = 50): {words}.")


def uniform_main(args: argparse.Namespace, groups: dict[str, list[str]], out: Path, t0: float) -> int:
    """``--uniform``: both arms on the eleventh draws; writes label_budget_uniform.{md,csv}."""
    args.design, args.fresh = "fullbatch", "eleventh"
    makers, _ = case_makers(args, groups, [])
    rows: list[dict] = []
    with _quiet_single_thread():
        for name, seed, mk in makers:
            rows += uniform_one(mk(), args)
            print(f"{name} seed {seed}: done ({time.perf_counter() - t0:.0f} s)", flush=True)
    d = pd.DataFrame(rows)
    prefix = "label_budget_uniform" + ("_quick" if args.quick else "")
    d.to_csv(out / f"{prefix}.csv", index=False)
    d["width"] = d.high - d.low
    per_run = d.groupby(["group", "case", "seed", "arm", "budget"], as_index=False).agg(
        coverage=("covered", "mean"), width=("width", "mean"), regret=("regret", "first"))
    t = per_run.groupby(["group", "arm", "budget"], as_index=False).agg(
        coverage=("coverage", "mean"), mean_width=("width", "mean"), regret=("regret", "mean"), runs=("seed", "size"))
    md = ["# A uniform share of each label plan: does the accuracy reported with labels hold?", "", "## Answer", "",
          verdict(t), "",
          f"Produced by `python -m replications.replicate_label_budget --uniform{' --quick' if args.quick else ''}` "
          f"in {time.perf_counter() - t0:.0f} s (2 cores, beside nothing else of mine).", "",
          md_table(t.round(4)), "", *RULE_MD, "", f"Files: `{prefix}.csv`.", ""]
    (out / f"{prefix}.md").write_text("\n".join(md))
    print("\n".join(md[:6]))
    return 0
