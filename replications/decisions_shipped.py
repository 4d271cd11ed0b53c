"""Issue 27: what ships (gate revision 5) beside today's point-score gate on the issue's own replay
(``replicate_decisions.SEQUENCES``: 44 sequences, the edge kinds included), so ``reports/decisions.md``'s targets
are read for the gate the flow runs now. Descriptive: it adopts nothing.

Run from the repository root::

    nice python -m replications.decisions_shipped            # full run
    nice python -m replications.decisions_shipped --quick    # smoke run (2 short sequences, LR/NB/DT)

Writes ``reports/decisions_shipped.md`` and ``reports/decisions_shipped_nights.csv`` (``--quick``: ``*_quick*``).
"""

from __future__ import annotations

import sys

import pandas as pd

from replications import replicate_decisions as R
from replications.decisions_fresh import FreshStudy, run_study

GATES = ("today", "rev5")
QUICK_SEQUENCES = ("arrests_by_year", "titanic_1st_then_3rd")

RULE_MD = [
    "## What this run is (stated before it)",
    "",
    "The gates replayed side by side on `replicate_decisions.SEQUENCES` (seed 0, learners LR, NB, DT, HGB, budget",
    "min(50, rows / 2) labels per labels path, filled with the batch's true labels): `today` (the point-score",
    "recipe gate the issue started from) and `rev5` (what the flow ships: revision 4's steps, the champion",
    "estimated on today's labeled source rows it never saw, `reports/decisions_heldout_champion2.md`). It decides",
    "nothing. Revisions 2 and 3 were designed on these sequences and revision 5's question came from the champion's",
    "optimism seen on them, so its numbers here are in-sample; the held-out judges are the `decisions_heldout*`,",
    "`decisions_fresh` and `decisions_reach` runs. Measures as `reports/decisions.md` counts them; the edge",
    "sequences are the range, group and stale kinds.",
]


def verdict(c: pd.DataFrame) -> str:
    g = c.set_index("gate")
    return "; ".join(f"{gate}: harmful {g.loc[gate, 'harmful /100']} and missed {g.loc[gate, 'missed /100']} per 100 "
                     f"({g.loc[gate, 'harmful']} and {g.loc[gate, 'missed']} of {g.loc[gate, 'decisions']} decisions), "
                     f"undecided {g.loc[gate, 'undecided']}, labels {g.loc[gate, 'labels']}" for gate in GATES) + "."


def main(argv: list[str] | None = None) -> int:
    return run_study(FreshStudy({}, R.SEQUENCES, QUICK_SEQUENCES, GATES, "decisions_shipped",
                                "What ships beside today's gate on the issue's replay (issue 27)", RULE_MD, verdict),
                     argv, __doc__.split("\n")[0])


if __name__ == "__main__":
    sys.exit(main())
