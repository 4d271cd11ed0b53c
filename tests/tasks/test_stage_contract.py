"""The stage contract (tasks/store.py): one find-or-write helper, inputs derived from the files a stage declares it
reads, a read it does not declare refused while it computes, and typed readers that return what the writer wrote."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tasks.store import Read, StageOutput, StageStore, UndeclaredReadError

UP = Read("up", "t.parquet", "up")
OPTIONAL = Read("maybe", "m.parquet", "maybe", optional=True)


def _upstream(store: StageStore, values: list[int]) -> None:
    store.write_stage("up", {"t": pd.DataFrame({"v": values})}, key="k-up", params={}, inputs={})


def _doubling(store: StageStore, calls: list[str]):
    def compute() -> StageOutput:
        calls.append(store.run_id)
        t = store.read_table("up", "t")
        return StageOutput({"out": t.assign(v=t["v"] * 2)}, extra={"n": len(t)}, value="computed here")

    return compute


def test_a_matching_stage_is_reused_without_calling_compute(tmp_path):
    calls: list[str] = []
    first = StageStore(tmp_path, "r1")
    _upstream(first, [1, 2, 3])
    run = first.find_or_write("down", {"p": 1}, (UP,), _doubling(first, calls))
    assert not run.reused and run.value == "computed here" and calls == ["r1"]
    assert run.manifest["inputs"] == {"up": first.file_hash("up", "t.parquet")}  # derived from the declaration
    again = StageStore(tmp_path, "r2")
    _upstream(again, [1, 2, 3])  # the same bytes in another run
    reused = again.find_or_write("down", {"p": 1}, (UP,), _doubling(again, calls))
    assert reused.reused and reused.value is None and calls == ["r1"]  # compute was not called
    assert reused.manifest["reused_from"] == "r1" and reused.manifest["extra"] == {"n": 3}
    pd.testing.assert_frame_equal(reused.table("out"), run.table("out"))  # read back, hash-checked
    assert again.find_or_write("down", {"p": 2}, (UP,), _doubling(again, calls)).reused is False  # other params


def test_a_changed_declared_upstream_file_recomputes_the_stage(tmp_path):
    calls: list[str] = []
    a, b = StageStore(tmp_path, "a"), StageStore(tmp_path, "b")
    _upstream(a, [1, 2, 3])
    _upstream(b, [1, 2, 4])  # one upstream value differs: its hash, so the derived inputs and the key
    ra = a.find_or_write("down", {}, (UP,), _doubling(a, calls))
    rb = b.find_or_write("down", {}, (UP,), _doubling(b, calls))
    assert calls == ["a", "b"] and not rb.reused
    assert ra.manifest["inputs"]["up"] != rb.manifest["inputs"]["up"] and ra.manifest["key"] != rb.manifest["key"]
    assert rb.table("out")["v"].tolist() == [2, 4, 8]


def test_optional_reads_enter_the_inputs_only_when_the_run_has_them_and_required_ones_must_exist(tmp_path):
    s = StageStore(tmp_path, "r")
    with pytest.raises(FileNotFoundError, match="stage 'up' has no t.parquet"):
        s.inputs((UP,))
    _upstream(s, [1])
    assert set(s.inputs((UP, OPTIONAL))) == {"up"}
    s.write_stage("maybe", {"m": pd.DataFrame({"x": [0]})}, key="k", params={}, inputs={})
    assert set(s.inputs((UP, OPTIONAL), also={"model": "m/1"})) == {"up", "maybe", "model"}
    with pytest.raises(ValueError, match="no key"):
        Read("up", "t.parquet", None)  # an unkeyed read must say why its content is fixed


def test_a_read_the_stage_does_not_declare_is_refused_and_nothing_is_written(tmp_path):
    s = StageStore(tmp_path, "r")
    _upstream(s, [1, 2])
    with pytest.raises(UndeclaredReadError, match="stage 'down' read up/t.parquet without declaring it"):
        s.find_or_write("down", {}, (), _doubling(s, []))
    assert not s.stage_dir("down").exists()
    s.read_table("up", "t")  # outside a computing stage nothing is checked
    unkeyed = Read("up", "t.parquet", None, why="fixed by the parameters in this test")
    run = s.find_or_write("down", {}, (unkeyed,), _doubling(s, []))
    assert run.manifest["inputs"] == {}  # declared, read, and not keyed


def test_a_companion_is_written_first_and_the_stage_is_reused_only_with_it(tmp_path):
    calls: list[str] = []

    def compute() -> StageOutput:
        calls.append("x")
        return StageOutput({"t": pd.DataFrame({"a": [1]})}, before={"side": StageOutput(files={"f.bin": b"side"})})

    s1 = StageStore(tmp_path, "r1")
    s1.find_or_write("main", {}, (), compute, companions=("side",))
    assert s1.read_bytes("side", "f.bin") == b"side"
    (s1.stage_dir("side") / "f.bin").write_bytes(b"damaged")  # the companion no longer verifies
    s2 = StageStore(tmp_path, "r2")
    assert s2.find_or_write("main", {}, (), compute, companions=("side",)).reused is False and calls == ["x", "x"]
    s3 = StageStore(tmp_path, "r3")
    assert s3.find_or_write("main", {}, (), compute, companions=("side",)).reused  # r2's pair verifies
    assert s3.read_bytes("side", "f.bin") == b"side" and s3.reused_from("side") == "r2"


def test_collect_training_writes_what_read_training_returns(tmp_path):
    from tasks.training import collect_training, read_training

    store = StageStore(tmp_path, "r")
    results = []
    for name, learner, weighting in (("LR", "LR", "none"), ("LR+kmm", "LR", "kmm")):
        preds = pd.DataFrame({"_row": np.arange(3), "learner": name, "predicted": np.array([0, 1, 1]),
                              "proba_0": [0.8, 0.3, 0.1], "proba_1": [0.2, 0.7, 0.9]})
        store.write_stage(f"training_parts/{name}", {"predictions": preds}, key=name, params={}, inputs={})
        results.append({"name": name, "learner": learner, "weighting": weighting, "run_id": f"run-{name}",
                        "model_run_id": f"model-{name}", "model_uri": f"models:/m-{name}", "cv": {"accuracy": 0.75},
                        "predictions": preds, "reused": name == "LR"})
    results.append({"name": "NB", "learner": "NB", "weighting": "none", "skipped": "no rows", "reused": False})
    got = collect_training.fn(store, results, 0, 3)
    assert got == read_training(store)
    assert list(got.models) == ["LR", "LR+kmm"] and got.skipped == {"NB": "no rows"}
    lr = got.models["LR+kmm"]
    assert (lr.learner, lr.weighting, lr.run_id, lr.model_run_id, lr.model_uri) == \
        ("LR", "kmm", "run-LR+kmm", "model-LR+kmm", "models:/m-LR+kmm")
    assert lr.cv == {"accuracy": 0.75} and lr.predicted_classes == (0, 1) and got.models["LR"].reused
    assert got.specs() == [("LR", "LR", "none"), ("LR+kmm", "LR", "kmm")]
    assert got.run_ids() == {"LR": "run-LR", "LR+kmm": "run-LR+kmm"}
    # the stage's inputs are the parts' prediction hashes, derived from the declared reads
    assert store.manifest("training")["inputs"] == {n: store.file_hash(f"training_parts/{n}", "predictions.parquet")
                                                    for n in ("LR", "LR+kmm")}
    # collected again in a new run with the same parts: written anew, never adopted (its runs are this run's)
    again = collect_training.fn(store, results[:1], 0, 3)
    assert list(again.models) == ["LR"] and store.reused_from("training") is None


def test_ingest_served_and_recalibration_readers_return_what_their_writers_wrote(tmp_path):
    from tasks.ingest import IngestOptions, ingest, read_ingest
    from tasks.recalibration import read_recalibration
    from tasks.served import SERVED, read_served

    rng = np.random.default_rng(0)
    src = pd.DataFrame({"x": rng.normal(size=40), "k": np.arange(40), "y": ["a", "b"] * 20})
    tgt = pd.DataFrame({"x": rng.normal(size=10), "k": np.arange(100, 110), "y": ["b"] * 10})
    src.to_csv(tmp_path / "s.csv", index=False)
    tgt.to_csv(tmp_path / "t.csv", index=False)
    store = StageStore(tmp_path / "runs", "r")
    m = ingest.fn(store, f"file:{tmp_path / 's.csv'}", f"file:{tmp_path / 't.csv'}", "y",
                  options=IngestOptions(id_column="k"))
    ing = read_ingest(store)
    assert (ing.label, ing.classes, ing.feature_columns) == ("y", ["a", "b"], m["extra"]["feature_columns"])
    assert (ing.n_source, ing.n_target, ing.id_column, ing.has_target_labels) == (40, 10, "k", True)
    assert ing.source is not None and ing.source.sha256 == m["files"]["source.parquet"]["sha256"]
    assert ing.target_ref == f"file:{tmp_path / 't.csv'}" and ing.data_hashes == m["extra"]["data_hashes"]
    assert read_served(store) is None  # no served stage in this run
    store.write_stage(SERVED, {"predictions": pd.DataFrame({"_row": [0]})}, key="k", inputs={},
                      params={"model_name": "m", "version": "3"})
    assert read_served(store).version == "3" and read_served(store).model_name == "m"
    store.write_stage("recalibration", {"oof": pd.DataFrame({"_row": [0]})}, key="k", inputs={},
                      params={"beta": "balanced"}, extra={"metrics": {"calibration.auc": 0.8}, "model_uri": "u"})
    rec = read_recalibration(store)
    assert (rec.beta, rec.model_uri, rec.metrics) == ("balanced", "u", {"calibration.auc": 0.8})
    assert rec.code_version == store.manifest("recalibration")["code_version"]


def test_every_stage_declares_its_reads_and_the_derived_inputs_keep_their_earlier_names(tmp_path):
    """The inputs each stage derives have the names the hand-built dicts had (so stage keys stay equivalent)."""
    import tasks.drift
    import tasks.estimation
    import tasks.evaluation
    import tasks.labels
    import tasks.recalibration
    import tasks.selection
    import tasks.served
    import tasks.training
    import tasks.weights

    s = StageStore(tmp_path, "r")
    one = pd.DataFrame({"_row": [0]})
    for stage, files in {"ingest": ("source", "target", "target_labels", "target_rows"),
                         "ingest_preprocessor": (), "weights": ("weights",), "drift": ("row_scores",),
                         "training": ("learners", "predictions"), "served": ("predictions",)}.items():
        s.write_stage(stage, {f: one for f in files}, key=stage, params={}, inputs={},
                      files={"preprocessor.pkl": b"p", "raw_example.pkl": b"r"} if stage == "ingest_preprocessor"
                      else {"summary.json": b"{}"} if stage == "drift" else None)
    names = {
        "drift": (tasks.drift.READS, {"source", "target"}),
        "weights": (tasks.weights.READS, {"source", "target"}),
        "training part": (tasks.training.part_reads("kmm"), {"source", "target", "preprocessor", "weights"}),
        "estimation": (tasks.estimation.READS, {"source", "target", "training", "weights", "drift"}),
        "evaluation": (tasks.evaluation.READS, {"labels", "predictions"}),
        "served": (tasks.served.READS, {"source", "target"}),
        "labels": (tasks.labels._reads(True), {"source", "target", "training", "served"}),
        "selection": (tasks.selection.READS, {"source", "target", "labels", "training", "weights"}),
        "recalibration": (tasks.recalibration.READS, {"source", "target", "preprocessor"}),
    }
    for stage, (reads, keys) in names.items():
        assert set(s.inputs(reads)) == keys, stage
    assert s.inputs(tasks.estimation.READS)["training"] == s.file_hash("training", "learners.parquet")
    assert s.inputs(tasks.labels._reads(True))["training"] == s.file_hash("training", "predictions.parquet")
