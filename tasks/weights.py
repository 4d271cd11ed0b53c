"""Stage ``weights``: importance weights of the source rows for the target batch (``shiftlib.weights``);
writes ``weights/weights.parquet`` (``_row`` plus one column per method, mean 1) and
``weights/summary.parquet``; logs ``weights.<method>.ess``, ``.mmd2_before``, ``.mmd2_after``, ``.max``
and a histogram PNG on the parent MLflow run.

KMM on more than ``KMM_CHUNK_ROWS`` source rows runs as ensemble KMM: the source is split into chunks,
each chunk is one ``kmm-chunk`` task (fanned out by the flow's task runner, e.g. Dask) solved against the
whole target; the chunk solutions are put back in row order and the whole problem is re-solved on their
support (``kmm_polish``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from mlflow.tracking import MlflowClient
from prefect import task
from prefect.cache_policies import NO_CACHE

from shiftlib.learners import make_learner
from shiftlib.selection import Candidate
from shiftlib.weights import (
    TARGET_WEIGHTERS,
    chunk_indices,
    effective_sample_size,
    kmm_chunk,
    make_weighter,
    shared_kernel,
    weights_caution,
)
from tasks.ingest import INGESTED, ROW, SelectionData, load_xy, read_ingest, selection_data
from tasks.limits import limited
from tasks.logs import run_logger
from tasks.store import Read, StageOutput, StageStore
from tasks.tracking import RunContext, log_metrics, with_retries

STAGE = "weights"
KMM_CHUNK_ROWS = 5000
METHODS = TARGET_WEIGHTERS  # the registry's names (shiftlib.weights), in its order


def _standardized(store: StageStore) -> tuple[np.ndarray, np.ndarray, float]:
    """Source and target on the shared diagnostic kernel's scale, and its width (deterministic)."""
    X_s, _, X_t = load_xy(store)
    Xs, Xt = X_s.to_numpy(dtype=float), X_t.to_numpy(dtype=float)
    kern = shared_kernel(Xs, Xt)
    return kern.transform(Xs), kern.transform(Xt), kern.gamma


@task(name="kmm-chunk", cache_policy=NO_CACHE)
@limited
def kmm_chunk_task(store: StageStore, rows: np.ndarray) -> np.ndarray:
    """One ensemble-KMM chunk: KMM eq. 12 for the source ``rows`` against the whole target, independent
    of every other chunk (the flow maps this over ``weights_plan``'s chunks)."""
    Zs, Zt, gamma = _standardized(store)
    return kmm_chunk(Zs[rows], Zt, gamma=gamma)


#: what the weights stage reads: the ingested tables, and the oracle's P(s=1|x,y) when the bias was simulated
READS = (*INGESTED, Read("ingest", "source_selection.parquet", None, optional=True,
                         why="written with source.parquet from the same simulated bias; the params' `oracle` "
                             "says whether it is there"))
#: what later stages read of this one: the weights of every source row (training, estimation, selection)
WEIGHTS = Read(STAGE, "weights.parquet", "weights", optional=True)


def _params(store: StageStore, methods: list[str], seed: int) -> dict[str, Any]:
    """The stage's parameters (``ValueError`` for a method the registry does not know)."""
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        raise ValueError(f"unknown weighting method(s) {unknown}; choose from {list(METHODS)}")
    return {"methods": sorted(methods), "seed": seed, "oracle": read_ingest(store).has_source_selection}


@task(name="weights-plan", cache_policy=NO_CACHE)
def weights_plan(store: StageStore, methods: list[str], *, seed: int) -> dict[str, Any]:
    """The ensemble-KMM chunks (source row indices) the flow should fan out, or none: when KMM is not
    asked for, the source has at most ``KMM_CHUNK_ROWS`` rows (one exact problem), or an identical earlier
    stage will be reused (checked before the chunks are solved, so the helper's own lookup comes after)."""
    params = _params(store, methods, seed)
    n_source = read_ingest(store).n_source
    if "kmm" not in methods or n_source <= KMM_CHUNK_ROWS or \
            store.find_reusable(STAGE, store.key(STAGE, params, READS)) is not None:
        return {"kmm_chunks": None}
    return {"kmm_chunks": chunk_indices(n_source, KMM_CHUNK_ROWS, seed)}


def stage_weights(store: StageStore, method: str) -> np.ndarray | None:
    """This run's weights of ``method`` from the weights stage (hash-checked), or None when it has none."""
    if not store.has_stage(STAGE):
        return None
    table = store.read_table(STAGE, "weights")
    return table[method].to_numpy(dtype=float) if method in table else None


def fit_weighter(method: str, X_source: Any, X_target: Any, seed: int, **fit_params: Any) -> Any:
    """The stage's one way to fit a weighting method in-process (seeded where the method is random).

    KMM on more than ``KMM_CHUNK_ROWS`` source rows is ensemble KMM with the same chunks as the flow's
    fanned-out ``kmm-chunk`` tasks (so the weights are the same), solved here one chunk after another unless
    ``chunk_betas`` (the tasks' solutions) is passed in ``fit_params``."""
    weighter = make_weighter(method)
    if "random_state" in weighter.get_params():  # every random method is seeded, whatever its name
        weighter.set_params(random_state=seed)
    if method == "kmm" and len(X_source) > KMM_CHUNK_ROWS:
        weighter.set_params(chunk_size=KMM_CHUNK_ROWS)
    return weighter.fit(X_source, X_target, **fit_params)


def weights_on_rows(w: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Weights ``w`` over every source row restricted to the positions ``rows``, mean 1 again."""
    w = np.asarray(w, dtype=float)[rows]
    return w / w.mean() if w.mean() > 0 else w


def make_candidates(store: StageStore, specs: list[tuple[str, str, str]], seed: int,
                    data: SelectionData | None = None) -> list[Candidate]:
    """``Candidate`` per (name, learner, weighting) on ``data``'s rows (default: every row): weights come from
    this run's weights stage, or are fitted the stage's way when the run did not compute that method (e.g. an
    incumbent's recipe)."""
    data = data or selection_data(store, seed, None)
    by_method: dict[str, np.ndarray] = {}
    out = []
    for name, learner, weighting in specs:
        if weighting != "none" and weighting not in by_method:
            w = stage_weights(store, weighting)
            if w is None:
                w = fit_weighter(weighting, data.X_s, data.X_t, seed).weights_
            else:
                w = weights_on_rows(w, data.source_rows)
            by_method[weighting] = w
        out.append(Candidate(name, make_learner(learner, random_state=seed, n_rows=len(data.y_s)),
                             sample_weight=by_method.get(weighting)))
    return out


def _histogram(table: pd.DataFrame, methods: list[str]) -> Figure:
    fig = Figure(figsize=(7, 3.5), layout="constrained")
    ax = fig.add_subplot()
    for m in methods:
        w = table[m].to_numpy()
        ax.hist(w, bins=40, alpha=0.5, label=f"{m} (ESS {effective_sample_size(w):.0f} of {len(w)})")
    ax.set_xlabel("importance weight (mean 1)")
    ax.set_ylabel("source rows")
    ax.legend()
    return fig


def _compute(store: StageStore, methods: list[str], seed: int, has_oracle: bool,
             kmm_parts: list[np.ndarray] | None) -> StageOutput:
    """Each method's weights of the source rows (and the oracle's, when the bias was simulated) and their summary."""
    X_s, _, X_t = load_xy(store)
    Xs, Xt = X_s.to_numpy(dtype=float), X_t.to_numpy(dtype=float)
    table = pd.DataFrame({ROW: np.arange(len(Xs), dtype=np.int64)})
    rows = []
    cols = list(methods) + (["oracle"] if has_oracle else [])
    for m in cols:
        if m == "oracle":
            p = store.read_table("ingest", "source_selection")["p_select"].to_numpy()
            est = make_weighter("oracle").fit(Xs, Xt, selection_proba=p)
        elif m == "kmm" and len(Xs) > KMM_CHUNK_ROWS:
            if kmm_parts is None:
                raise ValueError(f"KMM on {len(Xs)} source rows runs as ensemble KMM: pass the kmm-chunk "
                                 "solutions of weights_plan's chunks (the retrain flow does)")
            est = fit_weighter(m, Xs, Xt, seed, chunk_betas=kmm_parts)  # combine + polish, no re-solve
        else:
            est = fit_weighter(m, Xs, Xt, seed)
        w, before, after = est.weights_, est.mmd2_before_, est.mmd2_after_
        table[m] = w
        rows.append({"method": m, "ess": effective_sample_size(w), "max": float(np.max(w)),
                     "mmd2_before": float(before), "mmd2_after": float(after), "candidate": m != "oracle"})
    return StageOutput({"weights": table, "summary": pd.DataFrame(rows)})


@task(name="weights", cache_policy=NO_CACHE)
def weights(store: StageStore, methods: list[str], *, ctx: RunContext,
            kmm_parts: list[np.ndarray] | None = None) -> dict[str, Any]:
    """Estimate each method's weights, seeded by ``ctx`` (or reuse an identical earlier stage), log them on
    ``ctx``'s parent run; returns the summary.

    ``kmm_parts``: the solutions of the fanned-out ``kmm-chunk`` tasks (one per chunk of ``weights_plan``),
    which ``KMM(chunk_size=KMM_CHUNK_ROWS).fit(..., chunk_betas=)`` combines and polishes."""
    log, seed = run_logger(), ctx.seed
    params = _params(store, methods, seed)
    run = store.find_or_write(STAGE, params, READS,
                              lambda: _compute(store, methods, seed, params["oracle"], kmm_parts))
    table, summary = run.table("weights"), run.table("summary")
    client, parent_run_id = MlflowClient(ctx.tracking_uri), ctx.parent_run_id
    log_metrics(client, parent_run_id, {f"weights.{r['method']}.{k}": r[k] for r in summary.to_dict("records")
                                         for k in ("ess", "max", "mmd2_before", "mmd2_after")})
    with_retries(client.log_figure, parent_run_id, _histogram(table, list(summary["method"])),
                 "weights/histogram.png")
    for r in summary.to_dict("records"):
        log.info("weights %s: ESS %.1f of %d, max %.2f, MMD² %.4g → %.4g", r["method"], r["ess"], len(table),
                 r["max"], r["mmd2_before"], r["mmd2_after"])
        if r["candidate"] and (why := weights_caution(r["ess"], len(table), r["mmd2_before"], r["mmd2_after"])):
            log.warning("weights %s: %s; the weighted candidates are still trained and selection judges them",
                        r["method"], why)
    return {"methods": list(methods), "summary": summary.to_dict("records")}
