"""Production size: the whole retrain flow at 10k, 100k and 1M source rows, default settings.

Data: ``make_classification``-style, 20 features of which 3 are categorical text columns (5 levels each),
a feature selection bias on the source (P(s=1|x) = logistic(1.5·x0 − 0.5)), a target batch of
``--target-rows`` unbiased rows whose labels are held out. Each size runs ``shiftflow``'s flow in a fresh
process with its own ``SHIFTFLOW_HOME`` (a fresh MLflow store and run root), so nothing is reused.

Prints and writes to ``reports/scale.md``: wall time and peak RSS per stage (the flow's own clock; peak RSS
of the flow process so far at the end of each stage), the whole run's wall time, the peak RSS of the
whole process tree (flow + Prefect's temporary server), the highest 1-minute load average seen, and the
log-log growth slope of wall time between consecutive sizes. Run it alone on the machine.

    python benchmarks/scale.py                      # 10k, 100k, 1M source rows; 100k target rows
    python benchmarks/scale.py --sizes 2000,20000   # a quick look
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent

RUN = """
import json, sys
from flows.config import RetrainConfig
from flows.retrain import retrain
cfg = RetrainConfig(source=sys.argv[1], target=sys.argv[2], label="y", simulate_bias=None)
s = retrain(cfg)
json.dump({k: s[k] for k in ("timings", "peak_rss_gib", "weighting", "concurrency", "selection", "drift")},
          open(sys.argv[3], "w"), default=str)
"""


def make_data(n_source: int, n_target: int, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Biased source and unbiased target with 17 numeric and 3 text columns (module docstring)."""
    from sklearn.datasets import make_classification

    rng = np.random.default_rng(seed)
    n = int(n_target + 3.5 * n_source) + 1000  # the bias keeps about 37 % of the rows
    X, y = make_classification(n_samples=n, n_features=20, n_informative=8, n_redundant=4, flip_y=0.05,
                               class_sep=0.8, random_state=seed)
    df = pd.DataFrame(X[:, :17], columns=[f"x{i}" for i in range(17)])
    for j, name in enumerate(("region", "plan", "channel")):
        cuts = np.quantile(X[:, 17 + j], [0.2, 0.45, 0.7, 0.9])
        df[name] = pd.Series(np.array([f"{name}_{c}" for c in "ABCDE"])[np.searchsorted(cuts, X[:, 17 + j])])
    df["y"] = y
    order = rng.permutation(n)
    tgt, rest = order[:n_target], order[n_target:]
    keep = rest[rng.random(len(rest)) < 1 / (1 + np.exp(-(1.5 * X[rest, 0] - 0.5)))]
    if len(keep) < n_source:
        raise RuntimeError(f"the bias kept {len(keep)} rows, fewer than {n_source}")
    return df.iloc[keep[:n_source]].reset_index(drop=True), df.iloc[tgt].reset_index(drop=True)


def _tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def run_size(n_source: int, n_target: int, workdir: Path) -> dict:
    src, tgt = make_data(n_source, n_target)
    sp, tp = workdir / f"source_{n_source}.parquet", workdir / f"target_{n_target}.parquet"
    src.to_parquet(sp)
    tgt.to_parquet(tp)
    del src, tgt
    home = workdir / f"home_{n_source}"
    out = workdir / f"summary_{n_source}.json"
    env = os.environ | {"SHIFTFLOW_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                        "DO_NOT_TRACK": "true", "MLFLOW_TRACKING_URI": f"sqlite:///{home}/mlflow.db"}
    home.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", RUN, f"file:{sp}", f"file:{tp}", str(out)], cwd=ROOT, env=env,
                            stdout=open(workdir / f"log_{n_source}.txt", "w"), stderr=subprocess.STDOUT)
    peak, load = [0], [0.0]

    def watch() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], _tree_rss(proc.pid))
            load[0] = max(load[0], os.getloadavg()[0])
            time.sleep(0.5)

    th = threading.Thread(target=watch, daemon=True)
    th.start()
    rc = proc.wait()
    th.join()
    wall = time.monotonic() - t0
    if rc != 0:
        raise RuntimeError(f"the flow failed at {n_source} rows; see {workdir}/log_{n_source}.txt")
    s = json.loads(out.read_text())
    return {"n_source": n_source, "n_target": n_target, "wall_s": wall, "peak_gib": peak[0] / 2**30,
            "max_load1": load[0], **s}


def _slope(a: dict, b: dict) -> float:
    return math.log(b["wall_s"] / a["wall_s"]) / math.log(b["n_source"] / a["n_source"])


def answer(rows: list[dict]) -> list[str]:
    """The report's opening lines: wall time and peak memory per size, growth, and which steps changed weighting
    (the default weighting is KMM below ``budget.KMM_MAX_ROWS`` source rows and discriminative above, so a slope
    across that line compares two different weighting methods)."""
    walls = ", ".join(f"{r['wall_s']:.0f} s at {r['n_source']:,}" for r in rows)
    peaks = ", ".join(f"{r['peak_gib']:.2f}" for r in rows)
    lines = [f"The whole flow on a {rows[0]['n_target']:,}-row batch takes {walls} source rows (wall, 2 cores), "
             f"with a peak RSS of the process tree of {peaks} GiB."]
    for a, b in zip(rows, rows[1:], strict=False):
        note = (f" (this step compares a {a['weighting']}-weighted run with a {b['weighting']} one)"
                if a["weighting"] != b["weighting"] else f" (both {a['weighting']}-weighted)")
        lines.append(f"Wall time grows ×{b['wall_s'] / a['wall_s']:.2f} from {a['n_source']:,} to "
                     f"{b['n_source']:,} source rows, log-log slope {_slope(a, b):.2f}{note}.")
    big = rows[-1]["timings"]
    top = sorted(big, key=big.get, reverse=True)[:2]
    lines.append(f"At {rows[-1]['n_source']:,} rows {top[0]} ({big[top[0]]:.1f} s) and {top[1]} "
                 f"({big[top[1]]:.1f} s) take the most.")
    return lines


def report(rows: list[dict], cores: int, stamp: str = "") -> str:
    stages = list(rows[0]["timings"])
    lines = ["# Production size: the whole flow by source size", "", "## Answer", "", *answer(rows), "",
             f"`python benchmarks/scale.py` on {cores} cores; target batch {rows[0]['n_target']:,} rows; "
             "20 features (3 text columns); default settings; a fresh store per size (nothing reused)"
             + (f"; {stamp}" if stamp else "") + ".", "",
             "| source rows | wall (s) | peak RSS, process tree (GiB) | max 1-min load | weighting | "
             + " | ".join(f"{s} (s)" for s in stages) + " |",
             "|---:|---:|---:|---:|---|" + "---:|" * len(stages)]
    for r in rows:
        lines.append(f"| {r['n_source']:,} | {r['wall_s']:.0f} | {r['peak_gib']:.2f} | {r['max_load1']:.1f} | "
                     f"{r['weighting']} | " + " | ".join(f"{r['timings'].get(s, 0):.1f}" for s in stages) + " |")
    lines += ["", "Peak RSS of the flow process at the end of each stage (GiB, cumulative maximum):", "",
              "| source rows | " + " | ".join(stages) + " |", "|---:|" + "---:|" * len(stages)]
    for r in rows:
        lines.append(f"| {r['n_source']:,} | " + " | ".join(f"{r['peak_rss_gib'].get(s, 0):.2f}" for s in stages)
                     + " |")
    lines += ["", "Growth of wall time (log-log slope between consecutive sizes):", ""]
    for a, b in zip(rows, rows[1:], strict=False):
        lines.append(f"- {a['n_source']:,} → {b['n_source']:,}: slope {_slope(a, b):.2f} "
                     f"(time ×{b['wall_s'] / a['wall_s']:.2f} for rows ×{b['n_source'] / a['n_source']:.0f})")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--target-rows", type=int, default=100_000)
    ap.add_argument("--out", default=str(ROOT / "reports" / "scale.md"))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="shiftflow-scale-") as tmp:
        for n in [int(s) for s in args.sizes.split(",")]:
            r = run_size(n, args.target_rows, Path(tmp))
            print(f"{n:>9,} source rows: {r['wall_s']:.0f} s, peak {r['peak_gib']:.2f} GiB, "
                  f"max load {r['max_load1']:.1f}, stages {r['timings']}", flush=True)
            rows.append(r)
    from replications._common import code_stamp

    stamp = code_stamp(["flows/retrain.py", "shiftlib/budget.py"]) + f"; run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    text = report(rows, os.cpu_count() or 1, stamp)
    print(text)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
