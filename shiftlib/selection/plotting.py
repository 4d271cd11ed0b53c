"""Heatmap of the ReverseTesting matrix M[labeler, retrainer] (RT §4.2, docs/architecture.md notation)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_rt_matrix"]


def plot_rt_matrix(result: Any, *, title: str | None = None, fmt: str = "{:.3f}") -> Figure:
    """Heatmap of M (rows = labeler i, columns = retrainer j; undetermined NaN cells grey, marked n/a); a Figure.

    Built with ``matplotlib.figure.Figure`` (no pyplot state), so it is safe in workers and notebooks;
    save with ``fig.savefig(path)``.

    Parameters
    ----------
    result : ReverseTestingResult
        A result with ``matrix`` (a DataFrame M[labeler, retrainer]); its ``scoring`` and ``rule`` label the
        colour bar and the default title when present.
    title : str or None, default None
        The axes title; None uses ``"ReverseTesting M[labeler, retrainer] (rule=...)"``.
    fmt : str, default "{:.3f}"
        Format string for the value written in each finite cell.

    Returns
    -------
    matplotlib.figure.Figure
        The heatmap figure.
    """
    from matplotlib.figure import Figure  # lazy: keep `import shiftlib.selection` light for workers

    M = result.matrix
    vals = M.to_numpy(dtype=float)
    n_r, n_c = vals.shape
    fig = Figure(figsize=(1.2 + 0.9 * n_c, 1.0 + 0.8 * n_r), layout="constrained")
    ax = fig.add_subplot()
    masked = np.ma.masked_invalid(vals)
    im = ax.imshow(masked, cmap="viridis", aspect="auto")
    ax.set_facecolor("lightgrey")
    ax.set_xticks(range(n_c), [str(c) for c in M.columns], rotation=45, ha="right")
    ax.set_yticks(range(n_r), [str(i) for i in M.index])
    ax.set_xlabel("retrainer j (fits T labeled by i)")
    ax.set_ylabel("labeler i (fits D, labels T)")
    finite = vals[np.isfinite(vals)]
    mid = float(finite.mean()) if finite.size else 0.0
    for r in range(n_r):
        for c in range(n_c):
            v = vals[r, c]
            text = "n/a" if not np.isfinite(v) else fmt.format(v)
            color = "black" if not np.isfinite(v) or v >= mid else "white"
            ax.text(c, r, text, ha="center", va="center", fontsize=8, color=color)
    fig.colorbar(im, ax=ax, label=f"score on D ({getattr(result, 'scoring', 'score')})")
    ax.set_title(title or f"ReverseTesting M[labeler, retrainer] (rule={getattr(result, 'rule', '?')})")
    return fig
