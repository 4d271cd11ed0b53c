"""Stage keys: a stage is reused only for the same inputs. A new target batch with the same labeled source
must not reuse drift, weights, training or selection computed for another batch."""

from __future__ import annotations

import pandas as pd

from tasks.ingest import INGESTED
from tasks.selection import READS, _stage_params
from tasks.store import StageStore


def _run(root, run_id: str, target_x: list[float]) -> StageStore:
    s = StageStore(root, run_id)
    src = pd.DataFrame({"_row": [0, 1, 2, 3], "x": [0.0, 1.0, 2.0, 3.0], "_label": [0, 1, 0, 1]})
    tgt = pd.DataFrame({"_row": [0, 1], "x": target_x})
    s.write_stage("ingest", {"source": src, "target": tgt}, key="k-ingest", params={}, inputs={})
    learners = pd.DataFrame({"learner": ["LR"], "cv_accuracy": [0.75]})  # source-CV only: target-independent
    s.write_stage("training", {"learners": learners}, key="k-train", params={}, inputs={},
                  extra={"models": {"LR": {"learner": "LR", "weighting": "none"}}})
    return s


def test_a_new_target_batch_changes_the_selection_key(tmp_path):
    a, b, a2 = _run(tmp_path, "a", [0.5, 4.0]), _run(tmp_path, "b", [9.0, 9.5]), _run(tmp_path, "a2", [0.5, 4.0])
    key = lambda s: s.key("selection", _stage_params(["rt", "scv"], "scv", 0, 5, None), READS)  # noqa: E731
    assert key(a) == key(a2)  # same source, target, candidates and parameters → reusable
    assert key(a) != key(b)  # same source and candidates, other target batch → recomputed
    assert a.inputs(INGESTED)["source"] == b.inputs(INGESTED)["source"]
