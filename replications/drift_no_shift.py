"""Drift false alarms on no-shift splits of real tables, per table (issue 17).

``shiftlib.drift.detect_drift`` is run exactly as the pipeline's drift stage runs it (on the tables
``shiftlib.ingest.prepare_tables`` encodes, ``alpha=0.05``, every other setting at its default) on splits
where no shift exists:

* **random re-splits** — each table's rows (source and target groups pooled) are shuffled and cut into two
  halves of at most ``--n-max`` rows: rows are exchangeable, so every test's rejection rate should be at
  most α. Tables: the natural-shift cases of ``replications.replicate_natural`` (time, group and control
  splits), the TrCV domain pairs' tables (credit_data, wa_churn) and MASS Pima (Pima.tr ∪ Pima.te).
* **predefined splits said to be random** — MASS ``Pima.tr`` vs ``Pima.te`` and modeldata ``cells``
  Train vs Test, each tested once (one verdict; their rate comes from the re-splits above).

Rule, fixed before any result was seen: a table has a **false-alarm problem** when the Clopper–Pearson 95 %
lower bound of its verdict's rejection rate ("drifted") exceeds α = 0.05; the same rule is reported for the
domain-classifier test, the MMD test and the per-feature family (Holm) separately. Rates are reported per
table and pooled.

Run from the repository root::

    nice python -m replications.drift_no_shift            # 10 tables × 100 re-splits, ≤ 500 rows a side (≈ 10 min on 2 shared cores)
    nice python -m replications.drift_no_shift --quick    # 10 tables × 4 re-splits, ≤ 300 rows a side

Writes ``reports/drift_no_shift.md`` and ``reports/drift_no_shift.csv`` (``drift_no_shift_quick.*`` with
``--quick``); every number in them is printed by this command.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import beta

from replications._common import md_table
from replications.replicate_trcv import rdata
from shiftlib.drift import detect_drift
from shiftlib.preprocessor import prepare_tables

ALPHA = 0.05
TESTS = ("verdict", "domain", "mmd", "features")


def _pooled_natural(name: str) -> Callable[[], tuple[pd.DataFrame, str]]:
    def load() -> tuple[pd.DataFrame, str]:
        from replications.replicate_natural import CASES

        case = CASES[name]()
        return pd.concat([case.source, case.target], ignore_index=True), case.label
    return load


def _pima() -> tuple[pd.DataFrame, str]:
    return pd.concat([rdata("MASS", "Pima.tr"), rdata("MASS", "Pima.te")], ignore_index=True), "type"


def _credit() -> tuple[pd.DataFrame, str]:
    d = rdata("modeldata", "credit_data")
    return d[d["Status"].notna()].reset_index(drop=True), "Status"


def _wa_churn() -> tuple[pd.DataFrame, str]:
    return rdata("modeldata", "wa_churn"), "churn"


TABLES: dict[str, Callable[[], tuple[pd.DataFrame, str]]] = {
    "pima (tr ∪ te)": _pima,
    "cells (train ∪ test)": _pooled_natural("cells_train_to_test"),
    "mlc_churn": _pooled_natural("mlc_churn_area415_to_other"),
    "happiness": _pooled_natural("happiness_1990s_to_2000s"),
    "nlswork": _pooled_natural("nlswork_1970s_to_1980s"),
    "stackoverflow": _pooled_natural("stackoverflow_us_to_other"),
    "hmda": _pooled_natural("hmda_afam_no_to_yes"),
    "attrition": _pooled_natural("attrition_rd_to_sales"),
    "credit_data": _credit,
    "wa_churn": _wa_churn,
}


def _verdicts(source: pd.DataFrame, target: pd.DataFrame, label: str, seed: int,
              pvalues: bool = False) -> dict[str, object]:
    """The drift stage on one split: encode as ingest does, then ``detect_drift`` with the product's settings."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # id-like columns dropped, constant columns not testable
        p = prepare_tables(source, target, label, max_levels=60)
        rep = detect_drift(p.source_X, p.target_X, alpha=ALPHA, random_state=seed)
    out: dict[str, object] = {"verdict": bool(rep.drifted), "domain": bool(rep.domain_pvalue <= ALPHA),
                              "mmd": bool(rep.mmd_pvalue <= ALPHA), "features": bool(rep.features["drifted"].any())}
    if pvalues:
        out |= {"domain_auc": round(float(rep.domain_auc), 3), "domain_p": round(float(rep.domain_pvalue), 4),
                "mmd_p": round(float(rep.mmd_pvalue), 4),
                "drifted_features": ", ".join(rep.drifted_features[:5]) or "none"}
    return out


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval (Clopper & Pearson 1934) for k successes in n trials."""
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return lo, hi


def resplits(n_splits: int, n_max: int, log: Callable[[str], None]) -> pd.DataFrame:
    rows = []
    for name, load in TABLES.items():
        df, label = load()
        df = df[df[label].notna()].reset_index(drop=True)
        t0 = time.monotonic()
        for seed in range(n_splits):
            rng = np.random.default_rng(20_000 + seed)
            idx = rng.permutation(len(df))
            half = min(len(df) // 2, n_max)
            src, tgt = df.iloc[idx[:half]], df.iloc[idx[half:2 * half]].drop(columns=[label])
            rows.append({"table": name, "seed": seed, "n_per_side": half,
                         **_verdicts(src.reset_index(drop=True), tgt.reset_index(drop=True), label, seed)})
        log(f"{name}: {n_splits} re-splits of {half} rows a side in {time.monotonic() - t0:.0f} s")
    return pd.DataFrame(rows)


def predefined() -> pd.DataFrame:
    cells = rdata("modeldata", "cells")
    pairs = {"Pima.tr → Pima.te": (rdata("MASS", "Pima.tr"), rdata("MASS", "Pima.te"), "type"),
             "cells Train → Test": (cells[cells["case"] == "Train"].drop(columns=["case"]).reset_index(drop=True),
                                    cells[cells["case"] == "Test"].drop(columns=["case"]).reset_index(drop=True),
                                    "class")}
    return pd.DataFrame([{"split": k, "n_source": len(s), "n_target": len(t), **_verdicts(s, t, lab, 0, pvalues=True)}
                         for k, (s, t, lab) in pairs.items()])


def summarize(res: pd.DataFrame) -> pd.DataFrame:
    out = []
    for table, g in [*res.groupby("table", sort=False), ("pooled", res)]:
        row: dict[str, object] = {"table": table, "splits": len(g)}
        for t in TESTS:
            k = int(g[t].sum())
            lo, hi = clopper_pearson(k, len(g))
            row[f"{t}_rate"] = k / len(g)
            row[f"{t}_ci"] = f"[{lo:.3f}, {hi:.3f}]"
            row[f"{t}_problem"] = lo > ALPHA
        out.append(row)
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--splits", type=int, help="re-splits per table (default 100; 4 with --quick)")
    ap.add_argument("--n-max", type=int, help="rows per side at most (default 500; 300 with --quick)")
    ap.add_argument("--out", default="reports")
    a = ap.parse_args(argv)
    n_splits = a.splits or (4 if a.quick else 100)
    n_max = a.n_max or (300 if a.quick else 500)
    out, stem = Path(a.out), "drift_no_shift_quick" if a.quick else "drift_no_shift"
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    res = resplits(n_splits, n_max, lambda s: print(s, flush=True))
    fixed = predefined()
    summ = summarize(res)
    res.to_csv(out / f"{stem}.csv", index=False)
    cols = ["table", "splits"] + [f"{t}_{x}" for t in TESTS for x in ("rate", "ci")]
    flagged = [f"{r['table']} ({t})" for _, r in summ.iterrows() for t in TESTS if r[f"{t}_problem"]]
    lines = [
        "# Drift false alarms on no-shift splits", "",
        f"Command: `python -m replications.drift_no_shift{' --quick' if a.quick else ''}` "
        f"({n_splits} random re-splits per table, ≤ {n_max} rows a side, α = {ALPHA}; "
        f"{time.monotonic() - t0:.0f} s on a shared machine).", "",
        "Rule (fixed before the results): a table has a false-alarm problem when the Clopper–Pearson 95 % "
        "lower bound of its rejection rate exceeds α. `verdict` = the drift stage's `drifted`; `domain`, "
        "`mmd` = each global test at α; `features` = any feature drifted after Holm.", "",
        "## Rejection rates per table (random re-splits: no shift by construction)", "",
        md_table(summ[cols].assign(**{f"{t}_rate": summ[f"{t}_rate"].map("{:.3f}".format) for t in TESTS})), "",
        "Tables with a false-alarm problem under the rule: " + (", ".join(flagged) if flagged else "none") + ".", "",
        "## Predefined splits said to be random (one test each)", "",
        md_table(fixed), "",
    ]
    (out / f"{stem}.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
