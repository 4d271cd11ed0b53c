"""What every label-budget study shares: the budgets, groups, cases and seeds; one (case, seed) as a ``Case``
and how each group draws it; the posterior's contrast s.d. and coverage; the per-case measurement's context
(``CaseRun``: the candidates, their predictions, CV and the truth each selector is scored against); and the loop
over the (case, seed) draws (``case_makers``, ``collect``). ``replications.replicate_label_peers`` draws its cases
here too.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from replications.replicate_estimation import MECHANISMS as BIAS_MECHANISMS
from replications.replicate_estimation import _bias_case
from replications.replicate_natural import CASES as NATURAL_CASES
from replications.replicate_trcv import CASES as TRCV_CASES
from replications.replicate_trcv import TIE_TOL, candidates, draw, encode
from shiftlib.learners import fit_learner, make_learner
from shiftlib.selection import (
    LabelPlan,
    SelectorScores,
    TargetPredictions,
    agreement,
    fewlabel_select,
    plan_labels,
    source_cv,
    target_predictions,
)
from shiftlib.selection.fewlabel import CONFIDENCE

BUDGETS = (10, 25, 50, 100, 200)
#: the replication's selectors (rules one to six and what the flow ships), in table order
SELECTORS = ("fewlabel", "fewlabel_guard", "fewlabel_guard_ls", "fewlabel_guard_lp", "fewlabel_dm",
             "fewlabel_guard_dm", "fewlabel_guard_dmc", "fewlabel_hh", "fewlabel_guard_hh", "fewlabel_guard_dm_hh",
             "fewlabel_shipped", "fewlabel_now", "uniform", "trcv_l", "cv", "cv_ls", "cv_lp")
BIAS_DATASETS = ("breast_cancer", "pima", "spam7")
GROUPS = {
    "natural": [n for n, f in NATURAL_CASES.items() if not n.startswith(("cells", "mlc"))],
    "trcv_pairs": list(TRCV_CASES),
    "feature_bias": [f"{ds}_{m}" for ds in BIAS_DATASETS for m in BIAS_MECHANISMS],
}
QUICK = {"natural": ["hmda_afam_no_to_yes"], "trcv_pairs": ["credit_rent_to_owner"],
         "feature_bias": ["pima_kmm_threshold"]}
BIAS_SEEDS = 2  # seeds 0..1 for the feature-bias group (time; third rule in rules.RULES)
#: the selectors each fresh rule's draws record, and the order of every table
FRESH_SELECTORS = {"seventh": ("fewlabel_shipped", "fewlabel_bayes", "fewlabel_bayes_dm", "uniform", "cv"),
                   "eighth": ("fewlabel_shipped", "fewlabel_bayes", "fewlabel_bayes_dm", "uniform", "cv"),
                   "ninth": ("fewlabel_now", "fewlabel_modelvar", "uniform", "cv"),
                   "tenth": ("fewlabel_now", "fewlabel_oneround", "uniform", "cv")}
ORDER = (*SELECTORS[:SELECTORS.index("uniform")], "fewlabel_bayes", "fewlabel_bayes_dm", "fewlabel_modelvar",
         "fewlabel_oneround",
         *SELECTORS[SELECTORS.index("uniform"):])
#: fresh draws per rule (rules.RULES): seeds per group
FRESH_SEEDS = {"seventh": {"natural": [3, 4, 5], "trcv_pairs": [3, 4, 5], "feature_bias": [2, 3]},
               "eighth": {"natural": [6, 7, 8], "trcv_pairs": [6, 7, 8], "feature_bias": [4, 5]},
               "ninth": {"natural": [9, 10, 11], "trcv_pairs": [9, 10, 11], "feature_bias": [6, 7]},
               "tenth": {"natural": [12, 13, 14], "trcv_pairs": [12, 13, 14], "feature_bias": [8, 9],
                         "feature_bias_large": [12, 13]},
               "eleventh": {"natural": [15, 16, 17], "trcv_pairs": [15, 16, 17], "feature_bias": [10, 11]}}
#: the tenth measurement's large feature-bias tables: (table, the column rt_sort and kmm_threshold sort on)
LARGE_BIAS_TABLES = {"spam7": "crl.tot", "credit": "Seniority", "churn": "tenure"}


@dataclass(frozen=True)
class Case:
    """One (case, seed): the source sample, the whole target group and the batch's positions in it."""

    name: str
    group: str
    seed: int
    Xs: np.ndarray
    ys: np.ndarray
    Xt: np.ndarray
    yt: np.ndarray
    batch: np.ndarray


def natural_case(enc: Any, group: str, seed: int, n_max: int, design: str = "batch400",
                 full_cap: int = 4000) -> Case:
    """Source ≤ n_max rows at random; the batch ≤ n_max target rows (batch400) or the whole target group,
    a random ``full_cap`` of its rows where larger (fullbatch)."""
    d = draw(enc, seed, n_max)
    batch = d.target
    if design == "fullbatch":
        n_t = len(enc.yt)
        batch = np.arange(n_t) if n_t <= full_cap else np.sort(np.random.default_rng([seed, 13]).permutation(n_t)[:full_cap])
    return Case(enc.case.name, group, seed, enc.Xs[d.source], enc.ys[d.source], enc.Xt, enc.yt, batch)


def bias_case(name: str, seed: int, n_max: int) -> Case:
    """``replicate_estimation``'s feature-bias case (source biased, target = the 50 % holdout); the batch
    is ≤ n_max holdout rows at random, the truth every holdout row not labeled."""
    ds, mech = next((d, name[len(d) + 1:]) for d in BIAS_DATASETS if name.startswith(d + "_"))
    Xs, ys, Xt, yt = _bias_case(ds, mech)(seed)
    rng = np.random.default_rng([seed, 11])
    batch = np.sort(rng.permutation(len(yt))[:n_max])
    return Case(name, "feature_bias", seed, Xs, ys, Xt, yt, batch)


def _large_table(name: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """A whole table of the tenth measurement, encoded (features, 0/1 labels, column names)."""
    from replications.replicate_trcv import rdata
    from shiftlib.preprocessor import prepare_tables

    if name == "spam7":
        d, label, positive = rdata("DAAG", "spam7"), "yesno", "y"
    elif name == "credit":
        d, label, positive = rdata("modeldata", "credit_data"), "Status", "bad"
        d = d[d[label].notna()].reset_index(drop=True)
    else:
        d, label, positive = rdata("modeldata", "wa_churn"), "churn", "Yes"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        p = prepare_tables(d, d.drop(columns=[label]), label, positive_label=positive)
    return p.source_X.to_numpy(float), np.asarray(p.source_y), list(p.feature_columns)


def large_bias_case(name: str, seed: int, n_max: int, full_cap: int) -> Case:
    """The tenth measurement's case (rules.RULES): a mechanism on a whole table, the batch its 50 % holdout
    (≤ ``full_cap`` rows), the source ≤ ``n_max`` random rows of the biased source."""
    from shiftlib.bias import split_biased

    table, mech = next((t, name[len(t) + 1:]) for t in LARGE_BIAS_TABLES if name.startswith(t + "_"))
    X, y, cols = _large_table(table)
    params = dict(BIAS_MECHANISMS[mech])
    if "feature" in params:
        params["feature"] = cols.index(LARGE_BIAS_TABLES[table])
    sp = split_biased(X, y, mech, target="holdout", target_fraction=0.5, random_state=seed, **params)
    rng = np.random.default_rng([seed, 17])
    src = np.sort(rng.permutation(sp.source)[:n_max])
    tgt = np.asarray(sp.target)
    batch = np.arange(len(tgt)) if len(tgt) <= full_cap else np.sort(rng.permutation(len(tgt))[:full_cap])
    return Case(name, "feature_bias_large", seed, X[src], y[src], X[tgt], y[tgt], batch)


#: the normal quantile of fewlabel_select's default intervals
Z = NormalDist().inv_cdf((1 + CONFIDENCE) / 2)


def _contrasts(res: SelectorScores, truth: np.ndarray | None = None) -> Iterator[tuple[int, int, float, float]]:
    """Per pair a < b: (a, b, posterior s.d. of θ_a − θ_b, its error against ``truth[a] − truth[b]``; NaN
    without ``truth``)."""
    th, C = res.scores.to_numpy(float), np.asarray(res.details["cov"], float)
    for a in range(len(th)):
        for b in range(a + 1, len(th)):
            err = math.nan if truth is None else (th[a] - th[b]) - (truth[a] - truth[b])
            yield a, b, math.sqrt(max(C[a, a] + C[b, b] - 2 * C[a, b], 0.0)), err


def _mean_contrast_sd(res: SelectorScores) -> float:
    """Mean posterior s.d. of θ_a − θ_b over the pairs (how sure the posterior is; the difference estimator's
    aim is to shrink it)."""
    return float(np.mean([sd for _, _, sd, _ in _contrasts(res)]))


def _contrast_coverage(res: SelectorScores, truth: np.ndarray) -> dict[str, int]:
    """How many of the pairs' ``CONFIDENCE`` intervals of θ_a − θ_b (posterior covariance) hold the true
    difference ``truth[a] − truth[b]`` (ninth rule (a))."""
    hits = [abs(err) <= Z * sd for _, _, sd, err in _contrasts(res, truth)]
    return {"contrasts_covered": int(sum(hits)), "contrasts": len(hits)}


def group_predictions(case: Case, args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray, list[Any], list[str],
                                                                     np.ndarray]:
    """The batch's rows and labels, the candidates and, as truth, each learner fitted on the source sample and
    predicting the whole target group (one column per candidate)."""
    XT, yT = case.Xt[case.batch], case.yt[case.batch]
    cands = candidates(case.seed, args.rf_trees)
    names = [c.name for c in cands]
    all_pred = np.column_stack([
        fit_learner(make_learner(n, random_state=case.seed,
                                 **({"n_estimators": args.rf_trees} if n == "RF" else {})),
                    case.Xs, case.ys, X_target=XT).predict(case.Xt) for n in names])
    return XT, yT, cands, names, all_pred


@dataclass
class CaseRun:
    """One (case, seed) under measurement: the candidates' predictions on the batch, their 10-fold source CV,
    the truth a selector is scored against and the rows recorded so far (one per budget × selector).

    Truth: the target group without the labeled rows (batch400, feature_bias) or, in the fullbatch design
    (``full``), the batch without the labeled rows (the batch is the whole group unless capped)."""

    case: Case
    full: bool
    XT: np.ndarray
    yT: np.ndarray
    cands: list[Any]
    names: list[str]
    all_pred: np.ndarray
    tp: TargetPredictions
    cv: SelectorScores
    perm: np.ndarray
    t0: float
    rows: list[dict] = field(default_factory=list)

    @classmethod
    def start(cls, case: Case, args: argparse.Namespace) -> CaseRun:
        """Fit the candidates on the case's source sample; predictions, CV and the uniform draw's order."""
        t0 = time.perf_counter()
        XT, yT, cands, names, all_pred = group_predictions(case, args)
        full = args.design == "fullbatch" and case.group != "feature_bias"
        tp = target_predictions(cands, case.Xs, case.ys, XT, random_state=case.seed)
        cv = source_cv(cands, case.Xs, case.ys, k=10, random_state=case.seed)
        perm = np.random.default_rng([case.seed, 7]).permutation(len(case.batch))
        return cls(case, full, XT, yT, cands, names, all_pred, tp, cv, perm, t0)

    @property
    def base(self) -> dict[str, Any]:
        return {"group": self.case.group, "case": self.case.name, "seed": self.case.seed}

    def truth(self, seen: np.ndarray) -> pd.Series:
        """Each learner's accuracy on the truth's rows less the batch rows ``seen`` labeled."""
        pool = self.case.batch if self.full else np.arange(len(self.case.yt))
        ev = np.setdiff1d(pool, self.case.batch[seen])
        return pd.Series({n: float(np.mean(self.all_pred[ev, j] == self.case.yt[ev]))
                          for j, n in enumerate(self.names)})

    def record(self, sel: str, b: int, res: SelectorScores, seen: np.ndarray, **extra: Any) -> None:
        """One row: ``sel``'s answer at budget ``b`` scored against the truth less its labeled rows ``seen``."""
        ag = agreement(self.truth(seen), res, tie_tol=TIE_TOL)
        self.rows.append({**self.base, "budget": b, "selector": sel, "n_labels": len(seen), "pairs": ag.n_pairs,
                          "pairwise_correct": ag.pairwise_correct, "pairwise_counted": ag.pairwise_counted,
                          "pairwise_undecided": ag.pairwise_undecided, "regret": ag.regret,
                          "selected": "|".join(ag.selected), "true_best": "|".join(ag.true_best), **extra})

    def record_uniform(self, b: int) -> None:
        """``uniform``: b batch rows drawn at random (nested prefixes of one permutation), accuracy on them."""
        u = self.perm[:b]
        self.record("uniform", b, SelectorScores("uniform", pd.Series(
            (self.tp.predictions[u] == self.yT[u, None]).mean(axis=0), index=self.names), 0), u)

    def plan(self, b: int, before: tuple[LabelPlan, np.ndarray] | None, **kw: Any) -> tuple[LabelPlan, np.ndarray]:
        """The next round of a nested plan chain: ``plan_labels`` at budget ``b`` after the rows ``before``
        (plan, labels), CV as prior; the plan and its rows' labels."""
        c = self.case
        p = plan_labels(self.cands, c.Xs, c.ys, self.XT, budget=b, already_labeled=before,
                        random_state=c.seed * 1000 + b, prior=self.cv, predictions=self.tp, **kw)
        return p, self.yT[p.rows]

    def posterior(self, plan: LabelPlan, y: np.ndarray, prior: SelectorScores | None = None,
                  **kw: Any) -> SelectorScores:
        """``fewlabel_select`` on the plan's labels (prior CV unless given; ``kw``: estimator, variance)."""
        c = self.case
        return fewlabel_select(self.cands, c.Xs, c.ys, self.XT, plan=plan, y_labeled=y,
                               prior=self.cv if prior is None else prior, predictions=self.tp,
                               random_state=c.seed, **kw)

    def seconds(self) -> float:
        return round(time.perf_counter() - self.t0, 1)


def post_extra(post: SelectorScores) -> dict[str, float]:
    """The posterior's internals a row records: τ (the learned shift s.d.) and the prior's weight."""
    return {"tau": post.details["tau2"] ** 0.5, "prior_weight": post.details["prior_weight"]}


@contextmanager
def _quiet_single_thread() -> Iterator[None]:
    """One BLAS thread and no library warnings while the cases run."""
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def case_makers(args: argparse.Namespace, groups: dict[str, list[str]], seeds: list[int]
                ) -> tuple[list[tuple[str, int, Callable[[], Case]]], dict[str, str]]:
    """(name, seed, make the case) for every (case, seed) of ``groups`` under ``args`` (design, fresh rule), and
    each case's note; the seeds are the fresh rule's when ``args.fresh`` is set."""
    registry = {**NATURAL_CASES, **TRCV_CASES}
    makers, notes = [], {}
    for group, names in groups.items():
        for name in names:
            g_seeds = (FRESH_SEEDS[args.fresh][group][:1 if args.quick else None] if args.fresh
                       else seeds[:BIAS_SEEDS] if group == "feature_bias" else seeds)
            if group == "feature_bias_large":
                notes[name] = (f"[{group}] {name}: split_biased on the whole table (column "
                               f"{LARGE_BIAS_TABLES[name.split('_')[0]]!r} for rt_sort / kmm_threshold), batch = "
                               f"the 50 % holdout (≤ {args.full_cap} rows), source ≤ {args.n_max} rows, seeds {g_seeds}")
                makers += [(name, s_, lambda s_=s_, name=name: large_bias_case(name, s_, args.n_max, args.full_cap))
                           for s_ in g_seeds]
            elif group == "feature_bias":
                notes[name] = (f"[{group}] {name}: replicate_estimation's split_biased (dataset_mechanism), "
                               f"target = the 50 % holdout, seeds {g_seeds}")
                makers += [(name, s_, lambda s_=s_, name=name: bias_case(name, s_, args.n_max)) for s_ in g_seeds]
            else:
                enc = encode(registry[name]())
                notes[name] = f"[{group}] {enc.case.note}"
                makers += [(name, s_, lambda s_=s_, enc=enc, group=group: natural_case(
                    enc, group, s_, args.n_max, args.design, args.full_cap)) for s_ in g_seeds]
    return makers, notes


def collect(args: argparse.Namespace, groups: dict[str, list[str]], seeds: list[int],
            run_one: Callable[[Case, argparse.Namespace], tuple[list[dict], dict]]
            ) -> tuple[list[dict], list[dict], dict[str, str]]:
    """Run ``run_one`` (a study's per-case measurement) on every (case, seed) of ``groups`` under ``args``
    (design, fresh rule): its rows, each run's info and each case's note."""
    rows, infos = [], []
    makers, notes = case_makers(args, groups, seeds)
    with _quiet_single_thread():
        for name, seed, mk in makers:
            r, info = run_one(mk(), args)
            rows += r
            infos.append(info)
            eps = f" eps={info['eps']:.3f}" if "eps" in info else ""  # the peers' study reports its ε
            print(f"{name} seed {seed}: D={info['n_disagreement']}/{info['n_batch']}{eps} {info['seconds']}s",
                  file=sys.stderr, flush=True)
    return rows, infos, notes
