"""The batch-sampling ceiling of the label-budget replication (a post-hoc reference; it decides nothing).

Measures, per (case, seed) of the replication's draws (``--design`` and ``--fresh`` apply as there), how well
the learners are ordered with **all** batch rows labeled, against the truth the other selectors meet (the target
group without the batch): what separates it from 1.0 is the batch's sampling error, which no labeling plan
removes. Beside it, source CV re-weighted to the batch's *true* class shares (an oracle label-shift prior).
Command::

    nice python -m replications.replicate_label_budget --ceiling   # writes <prefix>_ceiling.csv, prints the table

``label_budget.md`` (the fourth and fifth rules) quotes its numbers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from replications._common import md_table
from replications.label_budget._core import Case, _quiet_single_thread, case_makers
from replications.replicate_trcv import TIE_TOL, candidates
from shiftlib.learners import fit_learner, make_learner
from shiftlib.selection import SelectorScores, agreement
from shiftlib.selection.labelshift import label_shift_cv


def batch_ceiling(case: Case, args: argparse.Namespace) -> dict:
    """Reference for every selector that scores the batch: all batch rows labeled (each learner's accuracy
    on the whole batch) against the same truth as the others at that point (the target group without the
    batch). What separates it from 1.0 is the batch's sampling error, which no labeling plan removes."""
    cands = candidates(case.seed, args.rf_trees)
    names = [c.name for c in cands]
    XT = case.Xt[case.batch]
    pred = np.column_stack([
        fit_learner(make_learner(n, random_state=case.seed, **({"n_estimators": args.rf_trees} if n == "RF" else {})),
                    case.Xs, case.ys, X_target=XT).predict(case.Xt) for n in names])
    rest = np.setdiff1d(np.arange(len(case.yt)), case.batch)
    if len(rest) == 0:  # the batch is the whole group (hmda): no truth outside it
        return {"group": case.group, "case": case.name, "seed": case.seed, "n_batch": len(case.batch),
                "n_rest": 0, "pairwise_correct": 0, "pairwise_counted": 0, "oracle_prior_correct": 0,
                "oracle_prior_counted": 0}
    truth = pd.Series((pred[rest] == case.yt[rest, None]).mean(axis=0), index=names)
    est = SelectorScores("batch_all", pd.Series((pred[case.batch] == case.yt[case.batch, None]).mean(axis=0),
                                                index=names), 0)
    ag = agreement(truth, est, tie_tol=TIE_TOL)
    # and source CV re-weighted to the batch's TRUE class shares (an oracle label-shift prior): is a
    # better estimate of π_T what cv_ls lacks, or does the class re-weighting itself not order the pairs?
    classes = np.unique(case.ys)
    share = np.array([np.mean(case.yt[case.batch] == c) for c in classes])
    orc = label_shift_cv(cands, case.Xs, case.ys, XT, k=10, random_state=case.seed,
                         target_predictions=pred[case.batch], class_prior=share)
    truth_all = pd.Series((pred == case.yt[:, None]).mean(axis=0), index=names)  # cv's truth: the whole group
    ag_o = agreement(truth_all, orc, tie_tol=TIE_TOL)
    return {"group": case.group, "case": case.name, "seed": case.seed, "n_batch": len(case.batch),
            "n_rest": len(rest), "pairwise_correct": ag.pairwise_correct, "pairwise_counted": ag.pairwise_counted,
            "oracle_prior_correct": ag_o.pairwise_correct, "oracle_prior_counted": ag_o.pairwise_counted}


def ceiling_main(args: argparse.Namespace, groups: dict[str, list[str]], seeds: list[int], out: Path,
                 prefix: str) -> int:
    """``--ceiling``: ``batch_ceiling`` on every (case, seed), written as ``<prefix>_ceiling.csv``; the pooled
    accuracies per group printed."""
    makers, _ = case_makers(args, groups, seeds)
    with _quiet_single_thread():
        infos = [batch_ceiling(mk(), args) for _, _, mk in makers]
    ce = pd.DataFrame(infos)
    ce.to_csv(out / f"{prefix}_ceiling.csv", index=False)
    g = ce.groupby("group", sort=False)[["pairwise_correct", "pairwise_counted", "oracle_prior_correct",
                                           "oracle_prior_counted"]].sum()
    g["batch_all_acc"] = (g.pairwise_correct / g.pairwise_counted).round(3)
    g["cv_oracle_prior_acc"] = (g.oracle_prior_correct / g.oracle_prior_counted).round(3)
    print(md_table(g.reset_index()))
    return 0
