"""A label budget: how well few target labels order the learners, against the number of labels.

Run from the repository root::

    nice python -m replications.replicate_label_budget            # full run (≈15 min on 2 shared cores)
    nice python -m replications.replicate_label_budget --quick    # smoke run (3 cases, 1 seed, TrCV k = 3)
    nice python -m replications.replicate_label_budget --design fullbatch   # the issue's batch (fifth rule)
    nice python -m replications.replicate_label_budget --ceiling  # the batch-sampling reference
    nice python -m replications.replicate_label_budget --fresh    # the seventh rule's fresh draws
    nice python -m replications.replicate_label_budget --fresh eighth   # the eighth rule's, both designs
    nice python -m replications.replicate_label_budget --fresh ninth    # the ninth rule's, both designs
    nice python -m replications.replicate_label_budget --fresh tenth    # the tenth measurement (fullbatch)
    nice python -m replications.replicate_label_budget --intervals      # coverage of the shipped intervals
    nice python -m replications.replicate_label_budget --detectability  # how many pairs labels can order

This file parses the command line and hands it to one study of the package ``replications.label_budget``:
``replication`` (the default run and ``--design fullbatch``: rules one to six), ``ceiling``, ``fresh``
(``--fresh``: the seventh to ninth rules and the tenth measurement), ``intervals`` and ``detectability``. The
rules, each fixed before any result of it was seen, are ``replications.label_budget.rules.RULES``; the cases,
seeds and draws every study shares (``Case``, ``case_makers``, ``group_predictions``, which the peers' rule calls
``replicate_label_budget.case_makers``) are in ``replications.label_budget._core``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from replications.label_budget._core import FRESH_SEEDS, GROUPS, QUICK
from replications.label_budget.ceiling import ceiling_main
from replications.label_budget.detectability import detectability_main
from replications.label_budget.fresh import fresh_eighth, fresh_ninth, fresh_seventh, fresh_tenth
from replications.label_budget.intervals import intervals_main
from replications.label_budget.replication import replication_main
from replications.label_budget.uniform import uniform_main


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 cases, 1 seed, TrCV k = 3")
    ap.add_argument("--seeds", type=int, default=None, help="seeds 0..N-1 per case (default 3; quick 1)")
    ap.add_argument("--n-max", type=int, default=400, help="source and batch rows per seed (default 400)")
    ap.add_argument("--rf-trees", type=int, default=50, help="trees of RF (default 50, for time)")
    ap.add_argument("--trcv-k", type=int, default=None, help="TrCV folds for trcv_l (default 5; quick 3)")
    ap.add_argument("--out", default="reports", help="output folder (default reports/)")
    ap.add_argument("--design", choices=("batch400", "fullbatch"), default="batch400",
                    help="batch400: the batch is ≤ --n-max target rows (default); fullbatch: the whole target group "
                         "(≤ --full-cap rows), truth = its rows not labeled (second design, label_budget.rules)")
    ap.add_argument("--full-cap", type=int, default=4000, help="fullbatch: most batch rows (default 4000)")
    ap.add_argument("--fresh", nargs="?", const="seventh", choices=tuple(FRESH_SEEDS), default=None,
                    help="a rule's fresh draws (seventh: seeds 3-5, feature bias 2-3; eighth: 6-8 and 4-5; ninth: 9-11 and 6-7; both "
                         "designs): the shipped guard, the unguarded posteriors, cv, uniform; tenth: the shipped "
                         "method on seeds 12-14 and 8-9 and on whole-table feature bias, fullbatch only")
    ap.add_argument("--intervals", action="store_true",
                    help="coverage of the shipped posterior's intervals on the eighth rule's fresh fullbatch draws")
    ap.add_argument("--detectability", action="store_true",
                    help="per-pair ceilings of labels alone on the fresh fullbatch draws (a measurement)")
    ap.add_argument("--uniform", action="store_true",
                    help="a uniform share of each plan, 0 against 0.2, on the eleventh fresh draws (a trial, its rule "
                         "in replications/label_budget/uniform.py)")
    ap.add_argument("--ceiling", action="store_true",
                    help="only the batch-sampling reference (all batch rows labeled): writes <prefix>_ceiling.csv")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    seeds = list(range(args.seeds if args.seeds is not None else (1 if args.quick else 3)))
    args.trcv_k = args.trcv_k or (3 if args.quick else 5)
    groups = QUICK if args.quick else GROUPS
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    prefix = ("label_budget" + ("_fullbatch" if args.design == "fullbatch" else "") + ("_fresh" if args.fresh else "")
              + ("_quick" if args.quick else ""))
    t0, c0 = time.perf_counter(), time.process_time()
    if args.intervals:
        return intervals_main(args, groups, out, t0)
    if args.uniform:
        return uniform_main(args, groups, out, t0)
    if args.detectability:
        return detectability_main(args, out, t0)
    if args.fresh == "eighth":
        return fresh_eighth(args, groups, out, t0, c0)
    if args.fresh == "ninth":
        return fresh_ninth(args, groups, out, t0, c0)
    if args.fresh == "tenth":
        return fresh_tenth(args, groups, out, t0, c0)
    if args.ceiling:
        return ceiling_main(args, groups, seeds, out, prefix)
    if args.fresh:
        return fresh_seventh(args, groups, seeds, out, prefix, t0, c0)
    return replication_main(args, groups, seeds, out, prefix, t0, c0)


if __name__ == "__main__":
    raise SystemExit(main())
