"""What the label-budget reports share: rows pooled per group × budget × selector (``summary``), a selector ×
budget table (``wide``), the accuracy-and-regret plot, the issue's criterion per group and the CSV-and-plot
writer (``_save``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from replications.label_budget._core import BUDGETS, ORDER


def summary(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Pooled pairwise-order accuracy and mean regret per ``keys``."""
    g = df.groupby(keys, sort=False).agg(correct=("pairwise_correct", "sum"), counted=("pairwise_counted", "sum"),
                                         undecided=("pairwise_undecided", "sum"), regret=("regret", "mean"),
                                         runs=("seed", "count")).reset_index()
    g["pairwise_acc"] = (g.correct / g.counted).round(3)
    g["regret"] = g.regret.round(4)
    return g


def wide(s: pd.DataFrame, value: str) -> pd.DataFrame:
    t = s.pivot_table(index="selector", columns="budget", values=value, aggfunc="first")
    t = t.reindex([x for x in ORDER if x in t.index])
    t.columns = [f"b={c}" for c in t.columns]
    return t.reset_index()


def plot(s: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(dict.fromkeys(s.group))
    fig, axes = plt.subplots(2, len(groups), figsize=(5 * len(groups), 7), squeeze=False)
    for j, g in enumerate(groups):
        for sel in [x for x in ORDER if x in set(s.selector)]:
            x = s[(s.group == g) & (s.selector == sel)].sort_values("budget")
            axes[0, j].plot(x.budget, x.pairwise_acc, marker="o", label=sel)
            axes[1, j].plot(x.budget, x.regret, marker="o", label=sel)
        axes[0, j].axhline(0.9, color="grey", lw=0.8, ls="--")
        axes[0, j].set_title(f"{g}: pairwise-order accuracy")
        axes[1, j].set_title(f"{g}: mean regret")
        for i in (0, 1):
            axes[i, j].set_xscale("log")
            axes[i, j].set_xticks(BUDGETS, [str(b) for b in BUDGETS])
            axes[i, j].set_xlabel("target labels")
        axes[0, j].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _by_budget(s: pd.DataFrame, g: str, value: str = "pairwise_acc") -> pd.Series:
    return s[s.group == g].set_index(["selector", "budget"])[value]


def _criterion_lines(s: pd.DataFrame, selectors: tuple[str, ...]) -> list[str]:
    """The issue's criterion per group for each selector (≥ cv at every b ≥ 25, ≥ 0.90 at b = 100)."""
    lines = []
    for g in dict.fromkeys(s.group):
        sg = _by_budget(s, g)
        for sel in selectors:
            never_below = all(sg[(sel, b)] >= sg[("cv", b)] for b in BUDGETS if b >= 25)
            lines.append(f"* **{g}**, {sel}: ≥ cv at every budget ≥ 25: **{'yes' if never_below else 'no'}** ("
                         + ", ".join(f"b={b}: {sg[(sel, b)]:.3f} vs {sg[('cv', b)]:.3f}" for b in BUDGETS)
                         + f"); ≥ 0.90 at 100 labels: **{'yes' if sg[(sel, 100)] >= 0.9 else 'no'}** "
                         f"({sg[(sel, 100)]:.3f}).")
    return lines


def _plot_lines(prefix: str) -> list[str]:
    """A report's closing lines: the plot and the files."""
    return ["## Plot", "", f"![pairwise-order accuracy and regret against the budget]({prefix}.png)", "",
            f"Files: `{prefix}.csv` (one row per case × seed × budget × selector), `{prefix}.png`.", ""]


def _save(rows: list[dict], out: Path, prefix: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The run's rows as ``<prefix>.csv``, their summary per group × budget × selector, and its plot."""
    df = pd.DataFrame(rows)
    df.to_csv(out / f"{prefix}.csv", index=False)
    s = summary(df, ["group", "budget", "selector"])
    plot(s, out / f"{prefix}.png")
    return df, s
