"""Performance over time for one registered model: every retrain run that decided for it and every score run
of one of its versions, with the served
candidate's estimated accuracy and interval, the realised accuracy where labels were recorded (``shiftflow
evaluate``'s ``realized.accuracy``, or held-out target labels' ``eval.target_accuracy``), the drift verdict, the
overlap verdict and shift regime of the estimate (``?`` where the run logged none: runs older than the tag), and
the version that served after the run, and a row for each version made champion by hand (``shiftflow champion``,
with who and why). Read from the MLflow parent runs (tag
``champion.registered_model``); drawn as NannyML draws its performance-over-time plots: one point per batch
with its interval, the realised value beside it, and where the serving version changed."""

from __future__ import annotations

from typing import Any

import pandas as pd
from mlflow.tracking import MlflowClient

from tasks.tracking import with_retries

COLUMNS = ["started", "run_id", "run_name", "candidate", "version", "decision", "serving", "estimate", "ci_low",
           "ci_high", "realized", "realized_from", "drift", "domain_auc", "overlap", "regime"]


def _num(m: dict[str, float], key: str) -> float:
    return float(m[key]) if key in m else float("nan")


def model_history(tracking_uri: str, model_name: str) -> pd.DataFrame:
    """One row per retrain run that registered or judged a version of ``model_name`` and per score run of one
    of its versions (``shiftflow score``, decision ``scored``), oldest first (:data:`COLUMNS`); empty when
    there is none."""
    from tasks.scoring import SCORED_TAG

    client = MlflowClient(tracking_uri)
    exps = [e.experiment_id for e in with_retries(client.search_experiments)]
    name = model_name.replace("'", "''")
    runs = [(tag, r) for tag in ("champion.registered_model", SCORED_TAG) for r in (
        with_retries(client.search_runs, exps, f"tags.`{tag}` LIKE '{name} v%'",
                     order_by=["attributes.start_time ASC"], max_results=5000) if exps else [])]
    rows = [_row(r, tag) for tag, r in runs
            if r.data.tags[tag].rsplit(" v", 1)[0] == model_name]  # LIKE's _ and % match more than the name
    rows += _set_by_hand(client, name, exps)
    return pd.DataFrame(sorted(rows, key=lambda r: r["started"]), columns=COLUMNS)


def _set_by_hand(client: MlflowClient, quoted_name: str, exps: list[str]) -> list[dict[str, Any]]:
    """A row per move of the champion alias by hand (``shiftflow champion --set`` / ``--previous``): each move's
    run (tag ``tasks.champion.MOVED``), and, for stores older than those runs, a version's tag
    ``tasks.champion.ALIAS_SET`` ("<when> by <who>: <why>", its latest move) where no run records that move; no
    estimate. ``quoted_name``: the model's name with ``'`` doubled, as :func:`model_history` puts it in a
    filter."""
    from mlflow.exceptions import MlflowException

    from tasks.champion import ALIAS_SET, MOVED

    moves = [(r.data.tags[MOVED].rsplit(" v", 1)[1], r.data.tags.get(ALIAS_SET, ""), r.info.run_id) for r in (
        with_retries(client.search_runs, exps, f"tags.`{MOVED}` LIKE '{quoted_name} v%'", max_results=5000)
        if exps else []) if r.data.tags[MOVED].rsplit(" v", 1)[0] == quoted_name.replace("''", "'")]
    try:
        versions = with_retries(client.search_model_versions, f"name = '{quoted_name}'")
    except MlflowException:  # no such registered model: runs only
        versions = []
    recorded = {(version, said) for version, said, _ in moves}
    moves += [(str(v.version), v.tags[ALIAS_SET], "") for v in versions
              if v.tags.get(ALIAS_SET) and (str(v.version), v.tags[ALIAS_SET]) not in recorded]
    out = []
    for version, said, run_id in moves:
        if " by " not in said:
            continue
        when, rest = said.split(" by ", 1)
        try:
            started = pd.Timestamp(when)
        except ValueError:
            continue
        started = started.tz_localize("UTC") if started.tzinfo is None else started.tz_convert("UTC")
        who, _, why = rest.partition(": ")
        out.append({c: float("nan") for c in COLUMNS} | {
            "started": started, "run_id": run_id, "run_name": f"champion set by {who}", "candidate": "",
            "version": version, "decision": "set by hand" + (f": {why}" if why and why != "set by hand" else ""),
            "serving": version, "realized_from": "", "drift": "", "overlap": "", "regime": ""})
    return out


def _row(r: Any, tag: str) -> dict[str, Any]:
    t, m = r.data.tags, r.data.metrics
    version = t[tag].rsplit(" v", 1)[1]
    realized, source = _num(m, "realized.accuracy"), "evaluate"
    if realized != realized:
        realized, source = _num(m, "eval.target_accuracy"), "held-out target labels"
    if tag == "champion.registered_model":
        decision = t.get("shiftflow.decision", t.get("champion.decision", ""))
        serving = t.get("champion.serving", version if t.get("champion.decision") in ("champion", "unchanged")
                        else "?")
    else:
        decision, serving = "scored", t.get("champion.serving", "?")  # the champion then, not the version scored
        if r.info.status == "FAILED":  # a score run that ended in an error scored nothing
            decision = "score failed"
    return {"started": pd.Timestamp(r.info.start_time, unit="ms", tz="UTC"), "run_id": r.info.run_id,
            "run_name": r.info.run_name, "candidate": t.get("estimate.candidate", ""), "version": version,
            "decision": decision, "serving": serving, "estimate": _num(m, "estimate.accuracy"),
            "ci_low": _num(m, "estimate.ci_low"), "ci_high": _num(m, "estimate.ci_high"), "realized": realized,
            "realized_from": source if realized == realized else "",
            "drift": {1.0: "drift", 0.0: "no drift"}.get(_num(m, "drift.drifted"), "?"),
            "domain_auc": _num(m, "drift.domain_auc"), "overlap": t.get("shiftflow.estimate.overlap", "?"),
            "regime": t.get("shiftflow.estimate.regime", "?")}


def log_history(tracking_uri: str, parent_run_id: str, model_name: str) -> None:
    """The registered model's accuracy over time, this run included: a chart on the parent run
    (``history/accuracy_over_time.png``) and a Prefect table artifact ``model-history``."""
    import matplotlib.pyplot as plt
    from prefect.artifacts import create_table_artifact

    table = model_history(tracking_uri, model_name)
    fig = plot_history(table, model_name)
    with_retries(MlflowClient(tracking_uri).log_figure, parent_run_id, fig, "history/accuracy_over_time.png")
    plt.close(fig)
    shown = table.drop(columns=["run_id"]).assign(started=table["started"].dt.strftime("%Y-%m-%d %H:%M"))
    create_table_artifact(key="model-history", table=shown.round(4).astype(object).where(shown.notna(), None)
                          .to_dict("records"), description=f"{model_name}: accuracy over time")


def plot_history(table: pd.DataFrame, model_name: str) -> Any:
    """The estimate with its interval per run (hollow where the version it judged did not serve after the run),
    the realised accuracy where known, and a line where the serving version changed; returns a matplotlib Figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(table) + 3), 4), layout="constrained")
    x = list(range(len(table)))
    if len(table):
        # a run's estimate is of the version it judged: filled where that version served after the run, hollow
        # where it did not (refused, kept or undecided: helper-36 read a refused version's point as the served one)
        served = (table["version"].astype(str) == table["serving"].astype(str)).to_numpy()
        for mask, how, style in ((served, "the version that served after the run", {"fmt": "o"}),
                                 (~served, "a version that did not serve", {"fmt": "o", "mfc": "none",
                                                                            "color": "grey"})):
            if mask.any():
                part = table[mask]
                ax.errorbar([i for i, m in zip(x, mask, strict=True) if m], part["estimate"],
                            yerr=[part["estimate"] - part["ci_low"], part["ci_high"] - part["estimate"]], capsize=3,
                            label=f"estimated: {how} (95% interval)", **style)
        known = table["realized"].notna().to_numpy()
        for mask, how, face in ((known & served, "realised", "black"), (known & ~served, "realised: not served",
                                                                         "none")):
            if mask.any():
                ax.plot([i for i, m in zip(x, mask, strict=True) if m], table.loc[mask, "realized"], "s",
                        color="black", mfc=face, label=how)
        last = None  # the serving version as far as known ("?": a run before the tag was kept)
        for i, v in enumerate(table["serving"].tolist()):
            if v in ("?", "-") or v == last:
                continue
            if last is not None:
                ax.axvline(i - 0.5, color="grey", linestyle=":", linewidth=1)
            ax.text(i - 0.45, 0.02, f"v{v} serves", transform=ax.get_xaxis_transform(), fontsize=8, clip_on=True)
            last = v
        ax.set_xticks(x, [s.strftime("%m-%d %H:%M") for s in table["started"]], rotation=45, ha="right",
                      fontsize=7)
        ax.set_xlim(-0.5, len(table) - 0.5)
    ax.set_ylabel("accuracy on the batch")
    ax.set_title(f"{model_name}: accuracy over time ({len(table)} runs)")
    ax.legend(loc="best", fontsize=8)
    return fig
