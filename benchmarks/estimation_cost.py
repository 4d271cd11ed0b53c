"""The estimation stage's cost (issue 28 item 6): its seconds on the embedded example and its share of a
retrain's wall time on a 5,000-row table, beside the same measurements of a baseline commit in the same run.

Cases:

- ``embedded``: ``shiftflow retrain``'s embedded example (Pima, RT §3.1 bias; 14 candidates);
- ``table_5000``: 5,000 biased source rows and 2,000 target rows of ``benchmarks/scale.py``'s data (17 numeric
  and 3 text columns, default settings).

Each run is the retrain flow (``flows.retrain.retrain``) in a fresh process with a fresh ``SHIFTFLOW_HOME`` and
Prefect home, so nothing is reused; the stage's seconds are the flow's own clock (``timings``), the retrain's
wall time is the process's. With ``--baseline PATH`` (a checkout of another commit, e.g. a ``git worktree``),
every case also runs with that checkout's code, interleaved with this one's, ``--repeats`` times each; the
printed ratio is this commit's median stage time over the baseline's.

Targets: the stage at most 10 s on the embedded example; at most 25 % of the retrain's wall time on the
5,000-row table. Run it alone on the machine:

    python benchmarks/estimation_cost.py --baseline /path/to/baseline/checkout [--out reports/estimation_cost.md]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.scale import make_data  # noqa: E402

RUN = """
import json, sys
from flows.config import RetrainConfig
from flows.retrain import retrain
if sys.argv[1] == "embedded":
    cfg = RetrainConfig()
else:
    cfg = RetrainConfig(source=sys.argv[1], target=sys.argv[2], label="y", simulate_bias=None)
s = retrain(cfg)
json.dump({"timings": s["timings"]}, open(sys.argv[3], "w"), default=str)
"""

TARGETS = {"embedded": ("seconds", 10.0), "table_5000": ("share", 0.25)}


def _commit(tree: Path) -> str:
    out = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return out.stdout.strip() + (" (uncommitted changes)" if dirty else "")


def run_once(tree: Path, case: str, inputs: tuple[str, str], workdir: Path, tag: str) -> dict:
    home = workdir / f"home_{tag}"
    out = workdir / f"summary_{tag}.json"
    env = os.environ | {"SHIFTFLOW_HOME": str(home), "PREFECT_HOME": str(workdir / f"prefect_{tag}"),
                        "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "true",
                        "PYTHONPATH": str(tree)}
    env.pop("MLFLOW_TRACKING_URI", None)
    t0 = time.monotonic()
    with open(workdir / f"log_{tag}.txt", "w") as log:
        rc = subprocess.run([sys.executable, "-c", RUN, *inputs, str(out)], cwd=tree, env=env, stdout=log,
                            stderr=subprocess.STDOUT).returncode
    wall = time.monotonic() - t0
    if rc != 0:
        raise RuntimeError(f"{case} failed with {tree}; see {workdir}/log_{tag}.txt")
    timings = json.loads(out.read_text())["timings"]
    est = float(timings["estimation"])
    return {"case": case, "tree": str(tree), "wall_s": wall, "estimation_s": est, "share": est / wall}


def answer(rows: list[dict], trees: dict[str, Path]) -> list[str]:
    lines = []
    for case, (kind, limit) in TARGETS.items():
        mine = [r for r in rows if r["case"] == case and r["tree"] == str(trees["this"])]
        est = statistics.median(r["estimation_s"] for r in mine)
        share = statistics.median(r["share"] for r in mine)
        value = est if kind == "seconds" else share
        shown = f"{est:.1f} s" if kind == "seconds" else f"{share:.0%} ({est:.1f} s of {statistics.median(r['wall_s'] for r in mine):.1f} s)"
        target = f"≤ {limit:.0f} s" if kind == "seconds" else f"≤ {limit:.0%}"
        line = f"{case}: estimation stage {shown}; target {target}: {'met' if value <= limit else 'NOT met'}"
        if "baseline" in trees:
            base = [r["estimation_s"] for r in rows if r["case"] == case and r["tree"] == str(trees["baseline"])]
            walls = [r["wall_s"] for r in rows if r["case"] == case and r["tree"] == str(trees["baseline"])]
            wall = statistics.median(r["wall_s"] for r in mine)
            line += (f"; this commit / baseline = {est / statistics.median(base):.2f} (the whole retrain's wall time: "
                     f"{wall / statistics.median(walls):.2f})")
        lines.append(line)
    return lines


def report(rows: list[dict], trees: dict[str, Path], cores: int) -> str:
    head = ["# Cost of the estimation stage (issue 28 item 6)", "", "## Answer", ""]
    head += [f"{i}. {line}" for i, line in enumerate(answer(rows, trees), 1)]
    head += ["", f"`python benchmarks/estimation_cost.py` on {cores} cores, run alone; this commit "
             f"{_commit(trees['this'])}" + (f", baseline {_commit(trees['baseline'])}" if "baseline" in trees else "")
             + f"; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.", "",
             "| case | code | retrain wall (s) | estimation stage (s) | share |", "|---|---|---:|---:|---:|"]
    for r in rows:
        code = "this" if r["tree"] == str(trees["this"]) else "baseline"
        head.append(f"| {r['case']} | {code} | {r['wall_s']:.1f} | {r['estimation_s']:.1f} | {r['share']:.0%} |")
    return "\n".join(head) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, help="a checkout of the commit to compare with")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", type=Path, help="write the report (Markdown) here")
    a = ap.parse_args()
    trees = {"this": ROOT} | ({"baseline": a.baseline.resolve()} if a.baseline else {})
    with tempfile.TemporaryDirectory(prefix="estimation-cost-") as tmp:
        work = Path(tmp)
        src, tgt = make_data(5000, 2000)
        sp, tp = work / "source.parquet", work / "target.parquet"
        src.to_parquet(sp)
        tgt.to_parquet(tp)
        inputs = {"embedded": ("embedded", "-"), "table_5000": (f"file:{sp}", f"file:{tp}")}
        rows = []
        for rep in range(a.repeats):
            for case in TARGETS:
                for name, tree in trees.items():  # interleaved: a drift of the machine falls on both alike
                    r = run_once(tree, case, inputs[case], work, f"{case}_{name}_{rep}")
                    print(f"{case} {name} #{rep}: wall {r['wall_s']:.1f} s, estimation {r['estimation_s']:.1f} s",
                          flush=True)
                    rows.append(r)
    text = report(rows, trees, os.cpu_count() or 0)
    print(text)
    if a.out:
        a.out.write_text(text)


if __name__ == "__main__":
    main()
