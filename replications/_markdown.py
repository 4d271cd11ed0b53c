"""One Markdown-table writer for every replication report (pandas' ``to_markdown`` needs ``tabulate``,
which is not a dependency)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def md_table(df: pd.DataFrame, floatfmt: str | None = None) -> str:
    """``df`` as a Markdown table; floats formatted with ``floatfmt`` (e.g. ``".3g"``), else printed as they are."""
    cols = list(df.columns)
    lines = ["| " + " | ".join(str(c) for c in cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, r in df.iterrows():
        cells = [format(float(r[c]), floatfmt) if floatfmt is not None and isinstance(r[c], float | np.floating)
                 else str(r[c]) for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
