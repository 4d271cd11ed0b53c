"""The label-budget study's fresh-draw rounds: the seventh, eighth and ninth rules and the tenth measurement.

Each round measures, on seeds no earlier rule had seen (``_core.FRESH_SEEDS``), how well the shipped plan chain
and the round's candidate posteriors order the learners against ``uniform`` and ``cv`` (pairwise-order
accuracy and regret per group and budget; the ninth also the coverage of the posterior's contrast intervals),
and judges the round's rule of ``rules.RULES`` as it was fixed. Commands::

    nice python -m replications.replicate_label_budget --fresh          # seventh rule (label_budget_fresh.*)
    nice python -m replications.replicate_label_budget --fresh eighth   # both designs (label_budget_fresh8*)
    nice python -m replications.replicate_label_budget --fresh ninth    # both designs (label_budget_fresh9*)
    nice python -m replications.replicate_label_budget --fresh tenth    # fullbatch (label_budget_fresh10.*)

``--quick`` runs the first fresh seed of the quick cases (``_quick`` files).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from replications._common import md_table
from replications.label_budget._core import (
    BUDGETS,
    LARGE_BIAS_TABLES,
    Case,
    CaseRun,
    _contrast_coverage,
    _mean_contrast_sd,
    collect,
    post_extra,
)
from replications.label_budget._report import (
    _by_budget,
    _criterion_lines,
    _plot_lines,
    _save,
    plot,
    summary,
    wide,
)
from replications.label_budget.rules import RULES
from replications.replicate_estimation import MECHANISMS as BIAS_MECHANISMS
from shiftlib.selection import LabelPlan
from shiftlib.selection.fewlabel import decide, guarded_select

FRESH_CANDIDATES = {"seventh": ("fewlabel_bayes",), "eighth": ("fewlabel_bayes_dm", "fewlabel_bayes"),
                    "ninth": ("fewlabel_modelvar",)}
NINTH_COVERAGE_BUDGETS = (10, 25, 50)  # ninth rule (a)


def fresh_run_one(case: Case, args: argparse.Namespace) -> tuple[list[dict], dict]:
    """The fresh rule's selectors (``args.fresh``, rules.RULES) at every budget on one (case, seed): the shipped
    plan chain, the rule's posteriors, uniform, cv."""
    run = CaseRun.start(case, args)
    batch_acc = (run.tp.predictions == run.yT[:, None]).mean(axis=0)  # the posterior's estimand (ninth's coverage)
    chain = None
    for b in BUDGETS:
        chain = run.plan(b, chain)
        if args.fresh == "tenth":
            _tenth_rows(run, b, *chain)
        elif args.fresh == "ninth":
            _ninth_rows(run, b, *chain, batch_acc)
        else:  # seventh and eighth rules
            _seventh_eighth_rows(run, b, *chain)
        run.record_uniform(b)
        run.record("cv", b, run.cv, np.zeros(0, int))
    return run.rows, {**run.base, "n_source": len(case.ys), "n_batch": len(case.batch),
                      "n_disagreement": len(run.tp.disagreement), "seconds": run.seconds()}


def _tenth_rows(run: CaseRun, b: int, plan_d: LabelPlan, y_d: np.ndarray) -> None:
    """``fewlabel_now`` on the nested chain and, added after the tenth's run (reported only), ``fewlabel_oneround``:
    the same posterior over b rows planned in one round, as the flow plans them (``tasks.labels.write_plan``)."""
    n_d, n_batch = len(run.tp.disagreement), len(run.case.batch)
    post = run.posterior(plan_d, y_d)
    run.record("fewlabel_now", b, decide(post, run.cv), plan_d.rows, **post_extra(post),
               sd_contrast=_mean_contrast_sd(post), n_disagreement=n_d, n_batch=n_batch)
    plan_1, y_1 = run.plan(b, None)
    post_1 = run.posterior(plan_1, y_1)
    run.record("fewlabel_oneround", b, decide(post_1, run.cv), plan_1.rows, **post_extra(post_1),
               sd_contrast=_mean_contrast_sd(post_1), n_disagreement=n_d, n_batch=n_batch)


def _ninth_rows(run: CaseRun, b: int, plan_d: LabelPlan, y_d: np.ndarray, batch_acc: np.ndarray) -> None:
    """``fewlabel_now`` ("hh") and ``fewlabel_modelvar`` ("hh_model"), each with its contrast coverage."""
    for sel, variance in (("fewlabel_now", "hh"), ("fewlabel_modelvar", "hh_model")):
        post = run.posterior(plan_d, y_d, variance=variance)
        run.record(sel, b, decide(post, run.cv), plan_d.rows, **post_extra(post), sd_contrast=_mean_contrast_sd(post),
                   **_contrast_coverage(post, batch_acc))


def _seventh_eighth_rows(run: CaseRun, b: int, plan_d: LabelPlan, y_d: np.ndarray) -> None:
    """``fewlabel_shipped`` (the guard), ``fewlabel_bayes`` (the same posterior, unguarded) and ``fewlabel_bayes_dm``
    (with the difference estimate)."""
    post = run.posterior(plan_d, y_d, estimator="ht")
    gd = guarded_select(post, run.cv)
    extra = {**post_extra(post), "sd_contrast": _mean_contrast_sd(post), "n_disagreement": len(run.tp.disagreement),
             "n_batch": len(run.case.batch)}
    run.record("fewlabel_shipped", b, gd, plan_d.rows, n_overturned=len(gd.details["overturned"]), **extra)
    run.record("fewlabel_bayes", b, post, plan_d.rows, **extra)
    post_dm = run.posterior(plan_d, y_d, estimator="difference")
    run.record("fewlabel_bayes_dm", b, post_dm, plan_d.rows, **post_extra(post_dm),
               sd_contrast=_mean_contrast_sd(post_dm))


def _fresh_mean(s: pd.DataFrame, sel: str) -> float:
    """Mean pairwise-order accuracy over the groups and b ∈ {25, 50, 100} (groups without counted pairs skipped)."""
    return float(np.nanmean([_by_budget(s, g)[(sel, b)] for g in dict.fromkeys(s.group) for b in (25, 50, 100)]))


def _never_below_lost(s: pd.DataFrame, cand: str, base: str) -> list[str]:
    """Where ``cand`` falls below cv although ``base`` is ≥ cv (b ≥ 25)."""
    return [f"{g} b={b}" for g in dict.fromkeys(s.group) for b in BUDGETS if b >= 25
            if _by_budget(s, g)[(base, b)] >= _by_budget(s, g)[("cv", b)] > _by_budget(s, g)[(cand, b)]]


def _fresh_checks(s: pd.DataFrame, cand: str, rule: str) -> tuple[bool, bool, list[str]]:
    """A rule's (a) and (b): mean above the shipped guard's, and nowhere below cv where the guard is not."""
    mean_c, mean_g = _fresh_mean(s, cand), _fresh_mean(s, "fewlabel_shipped")
    ok_a = mean_c > mean_g
    lost = _never_below_lost(s, cand, "fewlabel_shipped")
    return ok_a, not lost, [
        f"* {rule} rule (a), {cand}: mean pairwise-order accuracy over the groups and b ∈ {{25, 50, 100}}: "
        f"{cand} {mean_c:.4f} vs fewlabel_shipped {mean_g:.4f}: **{'yes' if ok_a else 'no'}**.",
        f"* {rule} rule (b), {cand}: nowhere below cv where fewlabel_shipped is ≥ cv (b ≥ 25): "
        f"**{'yes' if not lost else 'no'}**" + ("" if not lost else f" (below at {', '.join(lost)})") + "."]


def _fresh_tables(df: pd.DataFrame, s: pd.DataFrame, title: str) -> list[str]:
    md = []
    for g in dict.fromkeys(s.group):
        sg = s[s.group == g]
        n = int(_by_budget(s, g, "counted")[("cv", 100)])
        md += [f"## {title}{g}: pairwise-order accuracy (pooled correct / counted pairs; {n} pairs counted for cv)",
               "", md_table(wide(sg, "pairwise_acc")), "", f"## {title}{g}: mean regret", "",
               md_table(wide(sg, "regret")), ""]
    pc = summary(df, ["case", "budget", "selector"]).pivot_table(index=["case", "selector"], columns="budget",
                                                                 values="pairwise_acc", sort=False)
    pc.columns = [f"b={c}" for c in pc.columns]
    return md + [f"## {title}per case: pairwise-order accuracy", "", md_table(pc.reset_index()), ""]


def _fresh_cases(notes: dict, infos: list[dict]) -> list[str]:
    return [*[f"* {k}: {v}" for k, v in notes.items()],
            "* Disagreement rows per run: " + ", ".join(f"{i['case']} s{i['seed']}: {i['n_disagreement']}/"
                                                       f"{i['n_batch']}" for i in infos) + ".", ""]


def fresh_report(df: pd.DataFrame, s: pd.DataFrame, infos: list[dict], notes: dict, args: argparse.Namespace,
                 prefix: str, elapsed: float, cpu: float) -> str:
    """The seventh rule's report: its text, its verdict on the fresh draws, the tables."""
    ok_a, ok_b, checks = _fresh_checks(s, "fewlabel_bayes", "Seventh")
    verdict = _criterion_lines(s, ("fewlabel_shipped", "fewlabel_bayes")) + [
        line.replace(", fewlabel_bayes:", ":") for line in checks]
    if not args.quick:
        verdict.append("* **Seventh rule outcome: " + ("fewlabel_bayes replaces the guard as the deciding rule**."
                                                       if ok_a and ok_b else "the guard stays the deciding rule**."))
    rule = RULES.split("* Seventh rule,")[1].split("* Eighth rule")[0]
    md = ["# A label budget, seventh rule: the unguarded posterior on fresh draws", "",
          "## Rule (committed before any result of it was seen)", "", "* Seventh rule," + rule.rstrip(), "",
          f"Produced by `python -m replications.replicate_label_budget --fresh{' --quick' if args.quick else ''}` "
          f"(≤ {args.n_max} source rows, batch ≤ {args.n_max} target rows, RF {args.rf_trees} trees) in "
          f"{elapsed:.0f} s wall time ({cpu:.0f} s CPU). The other selectors of ``label_budget.md`` are not run "
          "on these draws.", "", "## Verdict", "", *verdict, "", "## Cases", "", *_fresh_cases(notes, infos)]
    md += _fresh_tables(df, s, "")
    return "\n".join(md + _plot_lines(prefix))


def fresh_seventh(args: argparse.Namespace, groups: dict[str, list[str]], seeds: list[int], out: Path,
                  prefix: str, t0: float, c0: float) -> int:
    """The seventh rule (``--fresh``): its fresh draws on ``args.design``, ``<prefix>.{csv,png,md}``."""
    rows, infos, notes = collect(args, groups, seeds, fresh_run_one)
    df, s = _save(rows, out, prefix)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    text = fresh_report(df, s, infos, notes, args, prefix, elapsed, cpu)
    (out / f"{prefix}.md").write_text(text)
    print(text)
    return 0


def _both_designs(args: argparse.Namespace, groups: dict[str, list[str]], out: Path, stem: str) -> dict[str, tuple]:
    """A rule's fresh draws on both designs: per design (rows, summary, infos, notes, file prefix), CSV and plot
    written as ``<stem>[_fullbatch][_quick].{csv,png}``."""
    runs = {}
    for design in ("batch400", "fullbatch"):
        args.design = design
        rows, infos, notes = collect(args, groups, [], fresh_run_one)
        df = pd.DataFrame(rows)
        prefix = stem + ("_fullbatch" if design == "fullbatch" else "") + ("_quick" if args.quick else "")
        df.to_csv(out / f"{prefix}.csv", index=False)
        s = summary(df, ["group", "budget", "selector"])
        plot(s, out / f"{prefix}.png")
        runs[design] = (df, s, infos, notes, prefix)
    return runs


def _both_designs_line(args: argparse.Namespace, rule: str, elapsed: float, cpu: float) -> str:
    return (f"Produced by `python -m replications.replicate_label_budget --fresh {rule}"
            f"{' --quick' if args.quick else ''}` (≤ {args.n_max} source rows; batch400: batch ≤ {args.n_max} "
            f"target rows; fullbatch: the whole target group, ≤ {args.full_cap} rows; RF {args.rf_trees} trees) in "
            f"{elapsed:.0f} s wall time ({cpu:.0f} s CPU), both designs.")


def _finish_both_designs(md: list[str], runs: dict[str, tuple], stem: str, sels: tuple[str, ...],
                         args: argparse.Namespace, out: Path) -> int:
    """The rest of a both-designs report after its verdict: the issue's criterion per design, the cases and the
    tables; writes ``<stem>[_quick].md`` and prints it."""
    md = md + ["## The issue's criterion, fullbatch", "", *_criterion_lines(runs["fullbatch"][1], sels), "",
               "## The issue's criterion, batch400", "", *_criterion_lines(runs["batch400"][1], sels), "",
               "## Cases", "", *_fresh_cases(runs["fullbatch"][3], runs["fullbatch"][2])]
    md += _both_designs_tables(runs, stem)
    text = "\n".join(md)
    (out / (stem + ("_quick" if args.quick else "") + ".md")).write_text(text)
    print(text)
    return 0


def _both_designs_tables(runs: dict[str, tuple], stem: str) -> list[str]:
    md = []
    for design, title in (("fullbatch", "fullbatch, "), ("batch400", "batch400, ")):
        df, s, _, _, prefix = runs[design]
        md += _fresh_tables(df, s, title)
        md += [f"![{title}pairwise-order accuracy and regret]({prefix}.png)", ""]
    return md + [f"Files: `{stem}{{,_fullbatch}}.{{csv,png}}` (one row per case × seed × budget × selector).", ""]


def fresh_eighth(args: argparse.Namespace, groups: dict[str, list[str]], out: Path, t0: float, c0: float) -> int:
    """The eighth rule: fresh draws on both designs, judged on fullbatch with batch400's guard (c)."""
    runs = _both_designs(args, groups, out, "label_budget_fresh8")
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    s_full, s_b400 = runs["fullbatch"][1], runs["batch400"][1]
    verdict: list[str] = []
    adopted = None
    for cand in FRESH_CANDIDATES["eighth"]:
        ok_a, ok_b, checks = _fresh_checks(s_full, cand, "Eighth")
        mean_c, mean_g = _fresh_mean(s_b400, cand), _fresh_mean(s_b400, "fewlabel_shipped")
        ok_c = mean_c >= mean_g - 0.02
        verdict += checks + [f"* Eighth rule (c), {cand}: batch400 mean {mean_c:.4f} vs fewlabel_shipped {mean_g:.4f}, "
                             f"not below by more than 0.02: **{'yes' if ok_c else 'no'}**."]
        passed = ok_a and ok_b and ok_c
        if adopted is None:
            verdict.append(f"* **Eighth rule: {cand} {'passes' if passed else 'fails'}**.")
            adopted = cand if passed else None
            if passed:
                break
    if not args.quick:
        verdict.append("* **Eighth rule outcome: " + (f"{adopted} replaces the guard as the deciding rule**."
                                                      if adopted else "the guard stays the deciding rule**."))
    rule = RULES.split("* Eighth rule,")[1].split("* ``fewlabel_now``")[0]
    sels = ("fewlabel_shipped", *FRESH_CANDIDATES["eighth"])
    md = ["# A label budget, eighth rule: the unguarded posterior with the difference estimate, on fresh draws", "",
          "## Rule (committed before any result of it was seen)", "", "* Eighth rule," + rule.rstrip(), "",
          _both_designs_line(args, "eighth", elapsed, cpu), "",
          "## Verdict (judged on the fullbatch design; (c) on batch400)", "", *verdict, ""]
    return _finish_both_designs(md, runs, "label_budget_fresh8", sels, args, out)


def _coverage_table(df: pd.DataFrame) -> pd.DataFrame:
    """Contrast coverage per group, selector and budget (pooled over runs and pairs), budgets as columns."""
    c = df.dropna(subset=["contrasts"]).groupby(["group", "selector", "budget"], sort=False)[
        ["contrasts_covered", "contrasts"]].sum()
    c["coverage"] = (c.contrasts_covered / c.contrasts).round(3)
    t = c.coverage.unstack("budget")
    t.columns = [f"b={b}" for b in t.columns]
    return t.reset_index()


def _group_coverage(df: pd.DataFrame, sel: str, budgets: tuple[int, ...]) -> pd.Series:
    """Each group's contrast coverage for ``sel``, pooled over runs, pairs and ``budgets``."""
    d = df[(df.selector == sel) & df.budget.isin(budgets)].groupby("group", sort=False)[
        ["contrasts_covered", "contrasts"]].sum()
    return d.contrasts_covered / d.contrasts


def _overconfident_below(df: pd.DataFrame, sel: str) -> int:
    """The smallest budget from which, at it and every larger one, ``sel``'s contrast coverage is ≥ 0.90 in every
    group (ninth rule); the largest budget + 1 when there is none."""
    ok = [all(_group_coverage(df, sel, (b,)) >= 0.9) for b in BUDGETS]
    for i, b in enumerate(BUDGETS):
        if all(ok[i:]):
            return b
    return BUDGETS[-1] + 1


def fresh_ninth(args: argparse.Namespace, groups: dict[str, list[str]], out: Path, t0: float, c0: float) -> int:
    """The ninth rule: fresh draws on both designs; coverage and order judged on fullbatch, (d) on batch400."""
    runs = _both_designs(args, groups, out, "label_budget_fresh9")
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    (df_full, s_full), s_b400 = runs["fullbatch"][:2], runs["batch400"][1]
    cand, base = FRESH_CANDIDATES["ninth"][0], "fewlabel_now"
    cov_c = _group_coverage(df_full, cand, NINTH_COVERAGE_BUDGETS)
    cov_b = _group_coverage(df_full, base, NINTH_COVERAGE_BUDGETS)
    ok_a = bool(cov_c.mean() > cov_b.mean() and cov_c.mean() >= 0.85)
    mean_c, mean_b = _fresh_mean(s_full, cand), _fresh_mean(s_full, base)
    ok_b = mean_c >= mean_b - 0.01
    lost = _never_below_lost(s_full, cand, base)
    m4_c, m4_b = _fresh_mean(s_b400, cand), _fresh_mean(s_b400, base)
    ok_d = m4_c >= m4_b - 0.02
    passed = ok_a and ok_b and not lost and ok_d
    per_group = ", ".join(f"{g} {cov_c[g]:.3f} vs {cov_b[g]:.3f}" for g in cov_c.index)
    verdict = [
        f"* Ninth rule (a): contrast coverage at b ∈ {{10, 25, 50}}, mean over the groups: {cand} {cov_c.mean():.4f} "
        f"vs {base} {cov_b.mean():.4f} ({per_group}); higher and ≥ 0.85: **{'yes' if ok_a else 'no'}**.",
        f"* Ninth rule (b): mean pairwise-order accuracy over the groups and b ∈ {{25, 50, 100}}: {cand} {mean_c:.4f} "
        f"vs {base} {mean_b:.4f}, not below by more than 0.01: **{'yes' if ok_b else 'no'}**.",
        f"* Ninth rule (c): nowhere below cv where {base} is ≥ cv (b ≥ 25): **{'yes' if not lost else 'no'}**"
        + ("" if not lost else f" (below at {', '.join(lost)})") + ".",
        f"* Ninth rule (d): batch400 mean {cand} {m4_c:.4f} vs {base} {m4_b:.4f}, not below by more than 0.02: "
        f"**{'yes' if ok_d else 'no'}**."]
    if not args.quick:
        verdict.append(f"* **Ninth rule outcome: {cand} " + (
            f"is adopted** (variance \"hh_model\" becomes fewlabel_select's default); OVERCONFIDENT_BELOW from its "
            f"fullbatch coverage: **{_overconfident_below(df_full, cand)}**." if passed
            else "is not adopted**; the default stays."))
    rule = RULES.split("* Ninth rule,")[1].split("* Second design")[0]
    sels = (base, cand)
    md = ["# A label budget, ninth rule: a model floor under the label estimate's variance, on fresh draws", "",
          "## Rule (committed before any result of it was seen)", "", "* Ninth rule," + rule.rstrip(), "",
          _both_designs_line(args, "ninth", elapsed, cpu), "",
          "## Verdict (judged on the fullbatch design; (d) on batch400)", "", *verdict, "",
          "## Contrast coverage, fullbatch (95 % intervals of θ_a − θ_b against the batch's true difference)", "",
          md_table(_coverage_table(df_full)), "",
          "## Contrast coverage, batch400", "", md_table(_coverage_table(runs["batch400"][0])), ""]
    return _finish_both_designs(md, runs, "label_budget_fresh9", sels, args, out)


def fresh_tenth(args: argparse.Namespace, groups: dict[str, list[str]], out: Path, t0: float, c0: float) -> int:
    """The tenth measurement (rules.RULES): the shipped method on fresh fullbatch draws of the four groups."""
    args.design = "fullbatch"
    groups = {**groups, "feature_bias_large": (["spam7_rt_sort"] if args.quick else
                                               [f"{t}_{m}" for t in LARGE_BIAS_TABLES for m in BIAS_MECHANISMS])}
    rows, infos, notes = collect(args, groups, [], fresh_run_one)
    prefix = "label_budget_fresh10" + ("_quick" if args.quick else "")
    df, s = _save(rows, out, prefix)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    text = RULES.split("* Tenth:")[1].split("* Second design")[0]
    md = ["# A label budget, tenth: the shipped method on fresh draws, with feature bias on whole tables", "",
          "## Measurement (committed before any result of it was seen)", "", "* Tenth:" + text.rstrip(), "",
          f"Produced by `python -m replications.replicate_label_budget --fresh tenth{' --quick' if args.quick else ''}`"
          f" (≤ {args.n_max} source rows; the fullbatch design: the batch is the whole target group or holdout, "
          f"≤ {args.full_cap} rows, except the feature_bias group's ≤ {args.n_max}; RF {args.rf_trees} trees) in "
          f"{elapsed:.0f} s wall time ({cpu:.0f} s CPU).", "",
          "## The issue's criterion", "", *_criterion_lines(s, ("fewlabel_now", "fewlabel_oneround")), "",
          "## Cases", "", *_fresh_cases(notes, infos), *_fresh_tables(df, s, ""), *_plot_lines(prefix)]
    text = "\n".join(md)
    (out / f"{prefix}.md").write_text(text)
    print(text)
    return 0
