"""Fixed overhead of one retrain run on the embedded example (Pima, RT §3.1 bias), measured part by part.

Each part runs in a fresh Python process so import and start-up costs are counted as a user pays them:

- ``imports``: ``import flows.retrain`` (Prefect, MLflow, scikit-learn, shiftlib);
- ``prefect_start``: a trivial flow run on Prefect's temporary local API, minus its imports;
- ``mlflow_store``: creating a fresh sqlite tracking store and experiment;
- ``log_model``: logging one fitted candidate (``tasks.tracking.log_sklearn_model``), mean of 5;
- ``science``: the embedded example's science alone through shiftlib (ingest, drift, KMM, 14 candidates with
  their source CV, 10-fold SCV), no Prefect, no MLflow;
- ``first run``: ``shiftflow retrain`` with a new ``PREFECT_HOME`` (Prefect creates its database) and a new
  ``SHIFTFLOW_HOME``, as a user's very first run; ``later run``: the same command with that Prefect home and
  another new ``SHIFTFLOW_HOME`` (nothing to reuse: a nightly run on new data); ``rerun``: the later run
  again, every stage reused.

The parts above share one ``PREFECT_HOME``, created by ``prefect_start``.

Run it alone on the machine: ``python benchmarks/overhead.py``. Prints a table; ``--out`` writes it.
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

PARTS = {
    "imports": "import flows.retrain",
    "prefect_start": """
import time, flows.retrain
from prefect import flow
@flow
def f():
    return 1
t = time.perf_counter(); f(); print('T', time.perf_counter() - t)
""",
    "mlflow_store": """
import time, tempfile, pathlib
from tasks.tracking import ensure_experiment
d = pathlib.Path(tempfile.mkdtemp())
t = time.perf_counter(); ensure_experiment(f"sqlite:///{d}/m.db", "x", d / "art"); print('T', time.perf_counter() - t)
""",
    "log_model": """
import time, tempfile, pathlib, mlflow
from sklearn.datasets import load_breast_cancer
from shiftlib.learners import make_learner
from tasks.tracking import ensure_experiment, log_sklearn_model
d = pathlib.Path(tempfile.mkdtemp())
uri = f"sqlite:///{d}/m.db"
exp = ensure_experiment(uri, "x", d / "art")
X, y = load_breast_cancer(return_X_y=True, as_frame=True)
m = make_learner("RF", random_state=0).fit(X, y)
with mlflow.start_run(experiment_id=exp):
    log_sklearn_model(m, "warm", X)
    t = time.perf_counter()
    for i in range(5):
        log_sklearn_model(m, f"m{i}", X)
    print('T', (time.perf_counter() - t) / 5)
""",
    "science": """
import time
t = time.perf_counter()
import numpy as np
from flows.config import RetrainConfig
from shiftlib.bias import apply_bias
from shiftlib.cv import cv_metrics
from shiftlib.drift import detect_drift
from shiftlib.preprocessor import prepare_tables
from shiftlib.learners import fit_learner, make_learner
from shiftlib.selection import Candidate, source_cv
from shiftlib.weights import make_weighter
from tasks.sources import load_table
cfg = RetrainConfig()
t = time.perf_counter()
src, tgt = load_table(cfg.source, label=cfg.label), load_table(cfg.target, label=cfg.label)
sel = apply_bias("rt_sort", src.drop(columns=[cfg.label]), src[cfg.label].to_numpy(), random_state=0)
src = src.iloc[sel.indices].reset_index(drop=True)
p = prepare_tables(src, tgt, cfg.label)
Xs, ys, Xt = p.source_X, p.source_y, p.target_X
detect_drift(Xs, Xt, random_state=0)
w = make_weighter("kmm", random_state=0).fit(Xs, Xt).weights_
cands = []
for name in cfg.learners:
    for wt in (None, w):
        if name.startswith("CSLR") and wt is not None:
            continue
        est = make_learner(name, random_state=0, n_rows=len(ys))
        cv_metrics(est, Xs, ys, n_splits=cfg.cv_folds, random_state=0, sample_weight=wt, X_target=Xt)
        fit_learner(est, Xs, ys, sample_weight=wt, X_target=Xt).predict_proba(Xt)
        cands.append(Candidate(name + ("" if wt is None else "+kmm"), make_learner(name, random_state=0),
                               sample_weight=wt))
source_cv(cands, Xs, ys, k=cfg.selection_folds, random_state=0)
print('T', time.perf_counter() - t)
""",
}


def _run(code: str, env: dict[str, str]) -> tuple[float, float | None]:
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    inner = [float(line.split()[1]) for line in out.stdout.splitlines() if line.startswith("T ")]
    return wall, inner[0] if inner else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="also write the table to this Markdown file")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="shiftflow-overhead-") as tmp:
        env = os.environ | {"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "true",
                            "PREFECT_HOME": f"{tmp}/prefect", "SHIFTFLOW_HOME": f"{tmp}/home"}
        for name, code in PARTS.items():
            wall, inner = _run(code, env)
            rows.append((name, inner if inner is not None else wall, wall))
            print(f"{name:>14}: {rows[-1][1]:.1f} s (process {wall:.1f} s)", flush=True)
        runs = {  # (PREFECT_HOME, SHIFTFLOW_HOME): a user's very first run, a later run on new data, a rerun
            "first run (new Prefect database)": ("prefect-run", "home-first"),
            "later run (Prefect database exists)": ("prefect-run", "home-later"),
            "rerun (all reused)": ("prefect-run", "home-later"),
        }
        for name, (prefect_home, home) in runs.items():
            run_env = env | {"PREFECT_HOME": f"{tmp}/{prefect_home}", "SHIFTFLOW_HOME": f"{tmp}/{home}"}
            t = time.perf_counter()
            out = subprocess.run([str(Path(sys.executable).parent / "shiftflow"), "retrain"], cwd=tmp, env=run_env,
                                 capture_output=True, text=True)
            if out.returncode != 0:
                raise RuntimeError(out.stderr[-2000:])
            wall = time.perf_counter() - t
            rows.append((name, wall, wall))
            print(f"{name}: {wall:.1f} s", flush=True)
    text = "| part | seconds | its process, wall |\n|---|---:|---:|\n" + "\n".join(
        f"| {n} | {a:.1f} | {b:.1f} |" for n, a, b in rows) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(f"# Fixed overhead of the embedded example\n\n`python benchmarks/overhead.py` on "
                                  f"{os.cpu_count()} cores.\n\n{text}")


if __name__ == "__main__":
    main()
