"""Replication flows: thin Prefect flows around the replication scripts' ``main`` (composition only).

Each flow runs one script exactly as its command line does and writes the same files under ``out``::

    python -m flows.replicate rt [--quick]        # = python -m replications.replicate_rt [--quick]
    python -m flows.replicate trcv [--quick]      # = python -m replications.replicate_trcv [--quick]
    python -m flows.replicate natural [--quick]   # = python -m replications.replicate_natural [--quick]

The science and the reports live in ``replications/``; nothing is computed here.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from prefect import flow


def _argv(quick: bool, out: str, cases: str | None = None, seeds: int | None = None,
          extra: Sequence[str] = ()) -> list[str]:
    argv = ["--out", out]
    if quick:
        argv.append("--quick")
    if cases:
        argv += ["--cases", cases]
    if seeds is not None:
        argv += ["--seeds", str(seeds)]
    return argv + list(extra)


@flow(name="replicate_rt", log_prints=True)
def replicate_rt(quick: bool = False, out: str = "reports", datasets: str | None = None,
                 seeds: int | None = None) -> int:
    """RT §3/§5 replication (``replications.replicate_rt.main``); returns its exit code."""
    from replications.replicate_rt import main

    argv = _argv(quick, out, None, seeds) + (["--datasets", datasets] if datasets else [])
    return main(argv)


@flow(name="replicate_trcv", log_prints=True)
def replicate_trcv(quick: bool = False, out: str = "reports", cases: str | None = None,
                   seeds: int | None = None) -> int:
    """TrCV §5.1 algorithm-selection replication (``replications.replicate_trcv.main``); returns its exit code."""
    from replications.replicate_trcv import main

    return main(_argv(quick, out, cases, seeds))


@flow(name="replicate_natural", log_prints=True)
def replicate_natural(quick: bool = False, out: str = "reports", cases: str | None = None,
                      seeds: int | None = None, summary_only: bool = False) -> int:
    """Natural-shift study and the selection summary (``replications.replicate_natural.main``)."""
    from replications.replicate_natural import main

    if summary_only:
        return main(["--summary-only", "--out", out])
    return main(_argv(quick, out, cases, seeds))


FLOWS = {"rt": replicate_rt, "trcv": replicate_trcv, "natural": replicate_natural}


def cli(argv: Sequence[str] | None = None) -> int:
    """``python -m flows.replicate {rt,trcv,natural} [--quick] [--out DIR]``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m flows.replicate", description=__doc__.splitlines()[0])
    ap.add_argument("which", choices=sorted(FLOWS))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default="reports")
    a = ap.parse_args(argv)
    return int(FLOWS[a.which](quick=a.quick, out=a.out))


if __name__ == "__main__":
    sys.exit(cli())
