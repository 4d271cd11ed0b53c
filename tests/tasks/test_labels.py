"""tasks.labels: a plan is shiftlib's plan_labels on the training stage's predictions (and the served champion's, when
one serves), written as a file a person fills; a filled file is read back against the stored plan of its
configuration, continued with a larger budget, or refused naming the problem and the fix, and the task logs the
plan and the labels on the parent run."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeClassifier
from threadpoolctl import threadpool_limits

import tasks.labels
from shiftlib.ingest import IngestError
from shiftlib.selection import plan_labels
from shiftlib.selection.fewlabel import TargetPredictions
from tasks.ingest import ROW, ingest, load_xy
from tasks.inputs import filled_rows as _file_rows
from tasks.labels import (
    FilledLabels,
    LabelsInputError,
    continue_plan,
    labels,
    labels_form,
    plan_from_stage,
    read_labels,
    stage_predictions,
    write_plan,
)
from tasks.served import SERVED
from tasks.store import StageStore, stage_key
from tasks.tracking import RunContext

N, BUDGET = 200, 12


def _candidates_stage(store: StageStore) -> None:
    """A training stage as collect_training writes it: each candidate's target predictions by row."""
    X_s, y_s, X_t = load_xy(store)
    parts = []
    for name, est in (("LR", LogisticRegression()), ("DT", DecisionTreeClassifier(max_depth=1, random_state=0))):
        est.fit(X_s, y_s)
        proba = est.predict_proba(X_t)
        parts.append(pd.DataFrame({ROW: np.arange(len(X_t)), "learner": name, "predicted": est.predict(X_t),
                                   "proba_0": proba[:, 0], "proba_1": proba[:, 1]}))
    store.write_stage("training", {"predictions": pd.concat(parts, ignore_index=True)},
                      key=stage_key("training", {}, {}), params={}, inputs={})


@pytest.fixture
def planned(tmp_path: Path) -> tuple[StageStore, Path]:
    """Run 1: ingest (a shifted target with held-out labels 'a'/'b'), two candidates, a plan of BUDGET rows
    (seed 0); returns the store and the plan's to_label.csv."""
    rng = np.random.default_rng(0)
    xs, xt = rng.normal(size=(N, 2)), rng.normal(0.7, 1.0, size=(N, 2))
    lab = lambda x: np.where(x[:, 0] + x[:, 1] ** 2 + rng.normal(0, 0.5, len(x)) > 0.8, "b", "a")  # noqa: E731
    pd.DataFrame({"x1": xs[:, 0], "x2": xs[:, 1], "y": lab(xs)}).to_csv(tmp_path / "src.csv", index=False)
    pd.DataFrame({"x1": xt[:, 0], "x2": xt[:, 1], "y": lab(xt)}).to_csv(tmp_path / "tgt.csv", index=False)
    store = StageStore(tmp_path / "runs", "run-1")
    ingest.fn(store, f"file:{tmp_path / 'src.csv'}", f"file:{tmp_path / 'tgt.csv'}", "y")
    _candidates_stage(store)
    plan = write_plan(store, budget=BUDGET, seed=0, label="y")
    assert len(plan.rows) == BUDGET  # the candidates disagree on more than BUDGET rows
    return store, store.stage_dir("labels") / "to_label.csv"


def _next_run(store: StageStore, name: str) -> StageStore:
    """A later run of the same configuration: ingest and training as a rerun finds them."""
    new = StageStore(store.run_root, name)
    for stage in ("ingest", "training"):
        shutil.copytree(store.stage_dir(stage), new.stage_dir(stage))
    return new


def _filled(csv: Path, out: Path, value: object = "a") -> pd.DataFrame:
    df = pd.read_csv(csv)
    df["y"] = value
    df.to_csv(out, index=False)
    return df


def _refused(store: StageStore, match: str, **kw: object) -> str:
    with pytest.raises(LabelsInputError, match=match) as err:
        read_labels(store, **({"budget": BUDGET, "seed": 0, "label": "y"} | kw))
    assert not store.stage_dir("labels").exists()  # checked before anything is written
    return str(err.value)


def test_error_class_is_the_projects_input_error() -> None:
    assert issubclass(LabelsInputError, IngestError) and issubclass(LabelsInputError, ValueError)


def test_unknown_row_key_is_refused(planned: tuple[StageStore, Path], tmp_path: Path) -> None:
    store, csv = planned
    df = _filled(csv, tmp_path / "f.csv")
    df.loc[df.index[0], ROW] = N + 5  # one past the batch
    df.to_csv(tmp_path / "f.csv", index=False)
    msg = _refused(_next_run(store, "run-2"), "not rows of this target batch", target_labels=f"file:{tmp_path / 'f.csv'}")
    assert f"[{N + 5}]" in msg and f"0 … {N - 1}" in msg
    df.loc[df.index[0], ROW] = df.loc[df.index[1], ROW]  # a row twice
    df.to_csv(tmp_path / "f.csv", index=False)
    _refused(_next_run(store, "run-3"), "more than once", target_labels=f"file:{tmp_path / 'f.csv'}")


def test_class_never_seen_in_the_source_is_refused(planned: tuple[StageStore, Path], tmp_path: Path) -> None:
    store, csv = planned
    _filled(csv, tmp_path / "f.csv", value="maybe")
    msg = _refused(_next_run(store, "run-2"), "never occur in the source", target_labels=f"file:{tmp_path / 'f.csv'}")
    assert "['a', 'b']" in msg and "differ" not in msg
    _filled(csv, tmp_path / "f.csv", value="B")  # typed by hand: only the case differs from the source's 'b'
    msg = _refused(_next_run(store, "run-3"), "never occur in the source", target_labels=f"file:{tmp_path / 'f.csv'}")
    assert "['B'] never occur in the source labels ['a', 'b']: they differ from the source's only in case:" in msg


@pytest.mark.parametrize("budget", [0, -3, N + 1])
def test_budget_below_one_or_beyond_the_batch_is_refused(planned: tuple[StageStore, Path], budget: int) -> None:
    store = _next_run(planned[0], "run-2")
    with pytest.raises(LabelsInputError, match=f"1 ≤ label_budget ≤ {N}"):
        write_plan(store, budget=budget, seed=0, label="y")
    assert not store.stage_dir("labels").exists()


def test_a_partly_filled_file_is_used_and_counted(planned: tuple[StageStore, Path], tmp_path: Path) -> None:
    store, csv = planned
    df = _filled(csv, tmp_path / "f.csv", value="b")
    df.loc[df.index[:5], "y"] = None  # 5 of the 12 rows left empty
    df.to_csv(tmp_path / "f.csv", index=False)
    out = read_labels(_next_run(store, "run-2"), budget=BUDGET, seed=0, label="y", target_labels=str(tmp_path / "f.csv"))
    assert out["n_empty"] == 5 and out["n_requested_empty"] == 5 and out["n_unrequested"] == 0
    assert out["labels"] == {int(r): 1 for r in df[ROW].iloc[5:]}  # 'b' is class code 1 (sorted source labels)
    df["y"] = None  # nothing filled at all: refused
    df.to_csv(tmp_path / "f.csv", index=False)
    _refused(_next_run(store, "run-3"), "no label is filled in", target_labels=str(tmp_path / "f.csv"))


def test_the_file_filled_in_place_as_the_run_says_keeps_the_plan_valid(planned: tuple[StageStore, Path]) -> None:
    """The run says: fill labels/to_label.csv, then rerun with --target-labels file:<that path>. Filling it in place
    must not invalidate the plan (helper-33: it did, since the file was hashed with the stage): to_label.csv and
    .parquet are handed out (tasks.store.StageOutput.handout), named in the manifest, never checked."""
    store, csv = planned
    man = json.loads((csv.parent / "manifest.json").read_text())
    assert man["handout"] == ["to_label.csv", "to_label.parquet"] and "to_label.csv" not in man["files"]
    df = _filled(csv, csv, value="b")  # in place
    assert store.verify(csv.parent) is not None  # the stage is still whole
    out = read_labels(_next_run(store, "run-2"), budget=BUDGET, seed=0, label="y", target_labels=f"file:{csv}")
    assert out["status"] == "labeled" and out["labels"] == {int(r): 1 for r in df[ROW]}
    (csv.parent / "to_label.parquet").write_bytes(b"edited")  # a handout is never read back by the stage
    assert store.verify(csv.parent) is not None


def test_a_file_saved_back_by_a_spreadsheet_reads_as_the_csv_written(planned: tuple[StageStore, Path],
                                                                     tmp_path: Path) -> None:
    """A filled to_label.csv saved by a spreadsheet: ';'-separated with decimal commas and a BOM, with blank
    trailing lines, or as .xlsx; each gives the labels of the plain CSV (the file: reader's rules)."""
    store, csv = planned
    df = _filled(csv, tmp_path / "f.csv", value="b")
    df.loc[df.index[:4], "y"] = "a"
    df.to_csv(tmp_path / "f.csv", index=False)
    want = read_labels(_next_run(store, "run-2"), budget=BUDGET, seed=0, label="y",
                       target_labels=str(tmp_path / "f.csv"))["labels"]
    assert sorted(want.values()) == [0] * 4 + [1] * (BUDGET - 4)
    text = df.to_csv(index=False, sep=";", decimal=",") + ";;;\n;;;\n"
    assert "," in text
    (tmp_path / "excel.csv").write_text("\ufeff" + text, encoding="utf-8")
    df.to_excel(tmp_path / "f.xlsx", index=False)
    for i, name in enumerate(["excel.csv", "f.xlsx"], 3):
        got = read_labels(_next_run(store, f"run-{i}"), budget=BUDGET, seed=0, label="y",
                          target_labels=f"file:{tmp_path / name}")
        assert got["labels"] == want and got["n_empty"] == 0


def test_resuming_with_another_configuration_names_what_differs(planned: tuple[StageStore, Path],
                                                                tmp_path: Path) -> None:
    store, csv = planned
    _filled(csv, tmp_path / "f.csv")
    # another seed, no plan stored for it: refused, naming the run that wrote the file's plan and the seed
    msg = _refused(_next_run(store, "run-2"), "no stored label plan", seed=1, target_labels=str(tmp_path / "f.csv"))
    assert "run-1" in msg and "the seed (0 then, 1 now)" in msg
    # a smaller budget: the same (a larger one asks for the next round, see the test below)
    msg = _refused(_next_run(store, "run-3"), "no stored label plan", budget=BUDGET - 1,
                   target_labels=str(tmp_path / "f.csv"))
    assert f"the label budget ({BUDGET} then, {BUDGET - 1} now)" in msg
    # seed 1 has its own plan now; the seed-0 file holds rows it did not ask for, all of them rows of run-1's
    # plan: the wrong file, refused (rows outside every stored plan would count as uniform draws instead)
    other = _next_run(store, "run-4")
    plan1 = write_plan(other, budget=BUDGET, seed=1, label="y")
    rows0 = set(pd.read_csv(csv)[ROW])
    assert rows0 - set(plan1.rows.tolist())  # the two plans differ (else the case shows nothing)
    run5 = _next_run(store, "run-5")
    msg = _refused(run5, "are not rows this configuration's plan asked for", seed=1,
                   target_labels=str(tmp_path / "f.csv"))
    assert "run-1" in msg and "the seed (0 then, 1 now)" in msg


def test_a_larger_budget_with_a_filled_file_plans_the_next_round(planned: tuple[StageStore, Path],
                                                                   tmp_path: Path) -> None:
    """A person labels the first BUDGET rows, then asks for BUDGET + 8: the next round keeps the labeled rows
    (filled in), adds 8 rows where the candidates disagree, and the file filled again resumes with all."""
    store, csv = planned
    truth = pd.read_parquet(store.stage_dir("ingest") / "target_labels.parquet").set_index(ROW)["_label"]
    first = pd.read_csv(csv)
    first["y"] = [("a", "b")[truth[r]] for r in first[ROW]]
    first.to_csv(tmp_path / "round1.csv", index=False)
    second = _next_run(store, "run-2")
    out = read_labels(second, budget=BUDGET + 8, seed=0, label="y", target_labels=f"file:{tmp_path / 'round1.csv'}")
    assert out["status"] == "continue" and out["earlier"]["run_id"] == "run-1"
    plan, n_done = continue_plan(second, out["earlier"], budget=BUDGET + 8, seed=0, label="y",
                                 target_labels=f"file:{tmp_path / 'round1.csv'}")
    assert n_done == BUDGET and len(plan.rows) == BUDGET + 8
    assert list(plan.rows[:BUDGET]) == list(first[ROW]) and set(plan.rounds) == {1, 2}
    todo = pd.read_csv(second.stage_dir("labels") / "to_label.csv")
    assert list(todo[ROW]) == list(plan.rows) and todo["y"].notna().sum() == BUDGET  # the first round filled in
    assert set(todo.loc[todo["y"].isna(), ROW]) <= set(np.asarray(plan.details["disagreement"]))
    todo["y"] = [("a", "b")[truth[r]] for r in todo[ROW]]
    todo.to_csv(tmp_path / "round2.csv", index=False)
    third = _next_run(store, "run-3")
    done = read_labels(third, budget=BUDGET + 8, seed=0, label="y", target_labels=f"file:{tmp_path / 'round2.csv'}")
    assert done["status"] == "labeled" and len(done["labels"]) == BUDGET + 8 and done["n_unrequested"] == 0
    assert list(done["plan"].rows) == list(plan.rows)  # the continued plan, found by its rows
    # the same budget again without a filled file is a new one-round plan, not the continued one
    assert len(write_plan(_next_run(store, "run-4"), budget=BUDGET + 8, seed=0, label="y").rows) == BUDGET + 8



# --- the plan and the predictions it is made from ---------------------------------------------------------------


def _by_hand(store: StageStore, champion: np.ndarray | None = None, rule: bool = True) -> TargetPredictions:
    """The contenders' predictions as the fixture's training stage holds them (LR, DT), read by row, and the served
    champion's when given: what a plan is made from, assembled here without the stage's reader. Without a
    champion (and ``rule``) the majority-class rule too, the source's largest class on every row, with no
    probabilities of its own (``shiftlib.decisions.FIRST_RULE_LABELS``)."""
    from tasks.served import RULE

    preds = store.read_table("training", "predictions")
    lr, dt = (preds[preds["learner"] == n].set_index(ROW).sort_index() for n in ("LR", "DT"))
    P = [lr["predicted"].to_numpy(), dt["predicted"].to_numpy()]
    proba = [lr[["proba_0", "proba_1"]].to_numpy(), dt[["proba_0", "proba_1"]].to_numpy()]
    names = ["LR", "DT"]
    if champion is not None:
        names.append("champion v3")
        P.append(champion)
        proba.append(np.column_stack([1.0 - champion, champion]))
    served: tuple[str, ...] = ("champion v3",) if champion is not None else ()
    if champion is None and rule:
        _, y_s, _ = load_xy(store)
        P.append(np.full(len(P[0]), int(np.argmax(np.bincount(np.asarray(y_s, int))))))
        names, served = [*names, RULE], (RULE,)
    return TargetPredictions(names, np.column_stack(P), sum(proba) / len(proba), np.array([0, 1]), served=served)


def _served_stage(store: StageStore, version: int, predicted: np.ndarray) -> None:
    """A served stage as ``tasks.served`` writes it: the champion's class and probabilities on every target row."""
    store.write_stage(SERVED, {"predictions": pd.DataFrame({ROW: np.arange(len(predicted)), "predicted": predicted,
                                                            "proba_0": 1.0 - predicted, "proba_1": predicted * 1.0})},
                      key=f"k-served-{version}", params={"model_name": "shop", "version": str(version)}, inputs={})


def test_the_plan_is_plan_labels_on_the_stage_predictions_and_to_label_holds_the_rows_as_given(
        planned: tuple[StageStore, Path]) -> None:
    store, csv = planned
    X_s, y_s, X_t = load_xy(store)
    tp = _by_hand(store)
    with threadpool_limits(1):
        ref = plan_labels(tp.names, X_s, y_s, X_t, budget=BUDGET, random_state=0, prior=None, predictions=tp)
    plan = plan_from_stage(store)
    assert list(plan.rows) == list(ref.rows) and list(plan.rounds) == list(ref.rounds) == [1] * BUDGET
    np.testing.assert_allclose(plan.probabilities, ref.probabilities, rtol=0, atol=0)
    # no champion serves: the majority-class rule is a contender too (FIRST_RULE_LABELS), and the plan says so
    assert (plan.budget, plan.n_target, plan.learners) == (BUDGET, N, ["LR", "DT", "majority-class rule"])
    assert store.manifest("labels")["extra"]["rule"] == "first"
    assert list(plan.details["disagreement"]) == list(tp.disagreement)
    assert set(plan.rows) <= set(tp.disagreement)  # drawn only where the candidates disagree
    # the file to fill: the row key, the target's columns as the user gave them, an empty label column
    todo = pd.read_csv(csv)
    given = pd.read_csv(Path(store.manifest("ingest")["params"]["target"].removeprefix("file:")))
    assert list(todo.columns) == [ROW, "x1", "x2", "y"] and todo["y"].isna().all()
    assert list(todo[ROW]) == list(plan.rows)
    np.testing.assert_allclose(todo[["x1", "x2"]].to_numpy(), given.loc[plan.rows, ["x1", "x2"]].to_numpy())
    pd.testing.assert_frame_equal(pd.read_parquet(store.stage_dir("labels") / "to_label.parquet")[[ROW, "x1", "x2"]],
                                  todo[[ROW, "x1", "x2"]])
    extra = store.manifest("labels")["extra"]
    assert extra["label"] == "y" and extra["budget"] == BUDGET and extra["n_target"] == N
    # the same configuration in a later run: the stored plan is adopted, not drawn again
    again = _next_run(store, "run-2")
    assert list(write_plan(again, budget=BUDGET, seed=0, label="y").rows) == list(plan.rows)
    assert again.reused_from("labels") == "run-1"
    assert list(write_plan(_next_run(store, "run-3"), budget=BUDGET, seed=1, label="y").rows) != list(plan.rows)


def test_stage_predictions_read_each_candidate_by_row_and_average_the_probabilities(tmp_path: Path) -> None:
    """A hand-written training stage: rows out of order, learner B first, classes 9 and 10 (sorted as numbers)."""
    store = StageStore(tmp_path, "r")
    preds = pd.DataFrame({ROW: [2, 0, 1, 1, 2, 0], "learner": ["B", "B", "B", "A", "A", "A"],
                          "predicted": [10, 9, 9, 10, 10, 9],
                          "proba_10": [0.8, 0.3, 0.4, 0.6, 0.9, 0.2], "proba_9": [0.2, 0.7, 0.6, 0.4, 0.1, 0.8]})
    store.write_stage("training", {"predictions": preds}, key="k", params={}, inputs={})
    tp = stage_predictions(store)
    assert tp.names == ["B", "A"] and list(tp.classes) == [9, 10] and tp.served == ()
    np.testing.assert_array_equal(tp.predictions, [[9, 9], [9, 10], [10, 10]])  # rows 0, 1, 2; columns B, A
    np.testing.assert_allclose(tp.proba, [[(0.7 + 0.8) / 2, (0.3 + 0.2) / 2], [(0.6 + 0.4) / 2, (0.4 + 0.6) / 2],
                                          [(0.2 + 0.1) / 2, (0.8 + 0.9) / 2]])
    assert list(tp.disagreement) == [1]
    # the served champion: a third contender, compared but never chosen; a class it has no column for counts 0
    store.write_stage(SERVED, {"predictions": pd.DataFrame({ROW: [1, 0, 2], "predicted": [10, 10, 9],
                                                            "proba_9": [0.5, 0.0, 1.0]})},
                      key="k-s", params={"model_name": "m", "version": "3"}, inputs={})
    tp = stage_predictions(store)
    assert tp.names == ["B", "A", "champion v3"] and tp.served == ("champion v3",)
    np.testing.assert_array_equal(tp.predictions[:, 2], [10, 10, 9])
    np.testing.assert_allclose(tp.proba, [[(0.7 + 0.8 + 0.0) / 3, 0.5 / 3], [(0.6 + 0.4 + 0.5) / 3, 1.0 / 3],
                                          [(0.2 + 0.1 + 1.0) / 3, 1.7 / 3]])
    assert list(tp.disagreement) == [0, 1, 2]
    assert stage_predictions(store, with_served=False).names == ["B", "A"]
    # a labels stage planned without the champion keeps it out; one planned with it keeps it in
    for learners, names in ((["B", "A"], ["B", "A"]), (["B", "A", "champion v3"], ["B", "A", "champion v3"])):
        store.write_stage("labels", {}, key="k-l", params={}, inputs={}, extra={"learners": learners})
        assert stage_predictions(store).names == names
        assert stage_predictions(store, with_served=True).names == ["B", "A", "champion v3"]


def test_a_run_with_a_served_champion_plans_with_it_and_still_finds_a_plan_made_before_it(
        planned: tuple[StageStore, Path], tmp_path: Path) -> None:
    store, csv = planned  # run-1: planned before any champion served
    yes = np.ones(N, dtype=int)
    _filled(csv, tmp_path / "f1.csv", value="b")
    later = _next_run(store, "run-2")
    _served_stage(later, 3, yes)
    assert stage_predictions(later).names == ["LR", "DT", "champion v3"]  # no labels stage yet: a contender
    got = read_labels(later, budget=BUDGET, seed=0, label="y", target_labels=str(tmp_path / "f1.csv"))
    rule = "majority-class rule"  # run-1's plan had it as a contender (no champion served then)
    assert got["status"] == "labeled" and got["plan"].learners == ["LR", "DT", rule] and got["n_unrequested"] == 0
    assert got["rule"] == "first" and later.reused_from("labels") == "run-1"
    assert stage_predictions(later, rule=got["rule"]).names == ["LR", "DT", rule]  # as the selection reads it
    # a new plan in a run where v3 serves: the champion is a contender, its disagreements are drawn from too
    fresh = _next_run(store, "run-3")
    _served_stage(fresh, 3, yes)
    with threadpool_limits(1):
        plan = write_plan(fresh, budget=BUDGET, seed=0, label="y")
        X_s, y_s, X_t = load_xy(fresh)
        tp = _by_hand(fresh, champion=yes)
        ref = plan_labels(tp.names, X_s, y_s, X_t, budget=BUDGET, random_state=0, prior=None, predictions=tp)
    assert plan.learners == ["LR", "DT", "champion v3"] and list(plan.rows) == list(ref.rows)
    assert fresh.manifest("labels")["inputs"]["served"] == fresh.file_hash(SERVED, "predictions.parquet")
    rows3 = set(plan.rows.tolist())
    assert rows3 - set(pd.read_csv(csv)[ROW])  # the two plans differ (else the next case shows nothing)
    _filled(fresh.stage_dir("labels") / "to_label.csv", tmp_path / "f3.csv", value="a")
    # another version serves now: the file's rows are run-3's plan, and the champion is what differs
    other = _next_run(store, "run-4")
    _served_stage(other, 4, 1 - yes)
    msg = _refused(other, "are not rows this configuration's plan asked for", target_labels=str(tmp_path / "f3.csv"))
    assert ("The file's rows are those of the plan written by run run-3, whose configuration differs in: the served "
            "champion (another version serves now).") in msg
    # the same champion: the plan made with it is found
    same = _next_run(store, "run-5")
    _served_stage(same, 3, yes)
    found = read_labels(same, budget=BUDGET, seed=0, label="y", target_labels=str(tmp_path / "f3.csv"))
    assert found["plan"].learners == ["LR", "DT", "champion v3"] and set(found["labels"]) == rows3


def test_without_a_budget_a_filled_file_answers_the_newest_plan_of_its_inputs_and_seed(
        planned: tuple[StageStore, Path], tmp_path: Path) -> None:
    store, _ = planned
    bigger = _next_run(store, "run-2")
    plan20 = write_plan(bigger, budget=20, seed=0, label="y")
    old = store.stage_dir("labels") / "manifest.json"
    os.utime(old, (old.stat().st_atime, bigger.stage_dir("labels").joinpath("manifest.json").stat().st_mtime - 60))
    _filled(bigger.stage_dir("labels") / "to_label.csv", tmp_path / "f.csv", value="a")
    got = read_labels(_next_run(store, "run-3"), budget=None, seed=0, label="y", target_labels=str(tmp_path / "f.csv"))
    assert got["status"] == "labeled" and list(got["plan"].rows) == list(plan20.rows) and got["plan"].budget == 20
    assert got["n_unrequested"] == 0 and len(got["labels"]) == 20
    # no plan of this seed at all: refused, with no budget in the words
    msg = _refused(_next_run(store, "run-4"), "no stored label plan", budget=None, seed=5,
                   target_labels=str(tmp_path / "f.csv"))
    assert "(same source, target, learners, seed): run with --label-budget first" in msg


def test_a_budget_that_adds_no_row_to_the_earlier_round_is_refused_naming_the_budget_to_resume_with(
        planned: tuple[StageStore, Path], tmp_path: Path) -> None:
    store, csv = planned
    _filled(csv, tmp_path / "f.csv", value="a")
    second = _next_run(store, "run-2")
    earlier = read_labels(second, budget=BUDGET + 1, seed=0, label="y", target_labels=str(tmp_path / "f.csv"))
    assert earlier["status"] == "continue" and earlier["earlier"]["params"]["budget"] == BUDGET
    with pytest.raises(LabelsInputError, match=rf"label_budget={BUDGET} adds no row to the {BUDGET} already planned "
                       rf"\(.*\): resume with --label-budget {BUDGET} and the filled file"):
        continue_plan(second, earlier["earlier"], budget=BUDGET, seed=0, label="y",
                      target_labels=str(tmp_path / "f.csv"))
    assert not second.stage_dir("labels").exists()


# --- reading a filled file ---------------------------------------------------------------------------------------


def test_file_rows_are_the_numeric_keys_with_a_filled_label_and_nothing_when_unreadable(tmp_path: Path) -> None:
    pd.DataFrame({ROW: ["3", "x", "5", "7", "9"], "y": ["a", "b", None, "a", "b"]}).to_csv(tmp_path / "f.csv",
                                                                                           index=False)
    assert _file_rows(str(tmp_path / "f.csv"), "y") == {3, 7, 9}  # 'x' is no row key; row 5 is empty
    assert _file_rows(f"file:{tmp_path / 'f.csv'}", "y") == {3, 7, 9}
    assert _file_rows(str(tmp_path / "f.csv"), "label") == set()  # no such column: a diagnosis, not an error
    assert _file_rows(str(tmp_path / "missing.csv"), "y") == set()


def test_the_resume_form_asks_for_the_filled_file_with_the_file_to_fill_as_its_default() -> None:
    form = labels_form("/runs/r1/labels/to_label.csv")
    assert issubclass(form, FilledLabels)
    assert form().target_labels == "/runs/r1/labels/to_label.csv"
    assert form(target_labels="file:/elsewhere.csv").target_labels == "file:/elsewhere.csv"
    assert form._description == ("Fill the label column of /runs/r1/labels/to_label.csv, then resume with its path: "
                                 "selection runs with 'fewlabel' deciding.")
    with pytest.raises(ValueError, match="target_labels"):
        FilledLabels()  # the plain form has no default


# --- the task: what it returns and logs on the parent run ----------------------------------------------------------


@pytest.fixture(scope="module")
def mlflow_store(tmp_path_factory) -> tuple[str, MlflowClient, str]:
    """One sqlite MLflow store for the module (creating its schema takes seconds) and an experiment in it."""
    root = tmp_path_factory.mktemp("labels-mlflow")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = MlflowClient(uri)
    return uri, client, client.create_experiment("labels", artifact_location=(root / "art").as_uri())


@pytest.fixture
def tables(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """The Prefect table artifacts the task creates (recorded here: no Prefect API in these tests)."""
    made: list[dict] = []
    monkeypatch.setattr(tasks.labels, "create_table_artifact", lambda **kw: made.append(kw))
    return made


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_task_plans_then_reads_the_filled_file_logging_both_on_the_parent_run(
        planned: tuple[StageStore, Path], tmp_path: Path, mlflow_store, tables) -> None:
    uri, client, exp = mlflow_store
    store, _ = planned
    parent = client.create_run(exp).info.run_id
    ctx = RunContext(uri, exp, parent, "", 0)
    run2 = _next_run(store, "run-2")
    out = labels.fn(run2, ctx=ctx, budget=BUDGET, label="y", target_labels=None)
    plan = plan_from_stage(run2)
    csv = run2.stage_dir("labels") / "to_label.csv"
    assert out == {"status": "awaiting_labels", "csv": str(csv), "parquet": str(csv.with_suffix(".parquet")),
                   "n_rows": BUDGET, "n_prefilled": 0, "budget": BUDGET, "n_planned": BUDGET,
                   "n_disagreement": len(_by_hand(run2).disagreement), "pair": None,
                   "learners": ["LR", "DT", "majority-class rule"]}
    preds = run2.read_table("training", "predictions").pivot(index=ROW, columns="learner", values="predicted")
    majority = int(np.argmax(np.bincount(np.asarray(load_xy(run2)[1], int))))  # the rule, a contender too
    n_disagree = int(((preds["LR"] != preds["DT"]) | (preds["LR"] != majority)).sum())
    data = client.get_run(parent).data
    assert data.metrics == {"labels.budget": BUDGET, "labels.n_requested": BUDGET, "labels.n_disagreement": n_disagree}
    plan_sha = _sha(run2.stage_dir("labels") / "plan.parquet")
    assert data.tags["labels.plan_sha256"] == plan_sha
    assert [a.path for a in client.list_artifacts(parent, "labels")] == ["labels/plan.parquet"]
    assert len(tables) == 1 and tables[0]["key"] == "labels-to-fill" and str(csv) in tables[0]["description"]
    assert tables[0]["table"] == plan.to_frame().to_dict("records")

    # filled: 3 rows left empty, and one row the plan did not ask for (a uniform draw)
    df = _filled(csv, tmp_path / "f.csv", value="b")
    df.loc[df.index[:3], "y"] = None
    extra = next(r for r in range(N) if r not in set(plan.rows.tolist()))
    df = pd.concat([df, pd.DataFrame({ROW: [extra], "y": ["a"]})], ignore_index=True)
    df.to_csv(tmp_path / "f.csv", index=False)
    parent2 = client.create_run(exp).info.run_id
    got = labels.fn(_next_run(store, "run-3"), ctx=RunContext(uri, exp, parent2, "", 0), budget=BUDGET, label="y",
                    target_labels=f"file:{tmp_path / 'f.csv'}")
    assert got["status"] == "labeled" and list(got["plan"].rows) == list(plan.rows)
    assert got["labels"] == {int(r): 1 for r in df[ROW].iloc[3:BUDGET]} | {extra: 0}
    assert (got["n_empty"], got["n_unrequested"], got["n_requested_empty"]) == (3, 1, 3)
    data = client.get_run(parent2).data
    assert data.metrics == {"labels.n_filled": BUDGET - 3 + 1, "labels.n_empty": 3, "labels.n_unrequested": 1,
                            "labels.n_requested": BUDGET}
    assert data.tags["labels.labels_sha256"] == _sha(tmp_path / "f.csv") == got["labels_sha256"]
    assert data.tags["labels.plan_sha256"] == plan_sha == got["plan_sha256"]
    assert len(tables) == 1  # reading labels back makes no table to fill


def test_the_task_plans_the_next_round_counting_the_rows_labeled_before(
        planned: tuple[StageStore, Path], tmp_path: Path, mlflow_store, tables) -> None:
    uri, client, exp = mlflow_store
    store, csv = planned
    _filled(csv, tmp_path / "f.csv", value="a")
    parent = client.create_run(exp).info.run_id
    out = labels.fn(_next_run(store, "run-2"), ctx=RunContext(uri, exp, parent, "", 0), budget=BUDGET + 8,
                    label="y", target_labels=str(tmp_path / "f.csv"))
    assert out["status"] == "awaiting_labels" and (out["n_planned"], out["n_prefilled"]) == (BUDGET + 8, BUDGET)
    assert out["n_rows"] == 8 and out["budget"] == BUDGET + 8
    todo = pd.read_csv(out["csv"])
    assert todo["y"].notna().sum() == BUDGET and list(todo[ROW][:BUDGET]) == list(pd.read_csv(csv)[ROW])
    # the next round is plan_labels continuing run-1's plan with the file's labels ('a' is code 0), no prior
    X_s, y_s, X_t = load_xy(store)
    plan0 = plan_from_stage(store)
    with threadpool_limits(1):
        ref = plan_labels(["LR", "DT"], X_s, y_s, X_t, budget=BUDGET + 8, random_state=0, prior=None,
                          predictions=_by_hand(store),
                          already_labeled=(plan0, pd.Series({int(r): 0 for r in plan0.rows}, dtype=object)))
    assert list(todo[ROW]) == list(ref.rows) and list(pd.read_parquet(Path(out["csv"]).parent / "plan.parquet")[
        "probability"]) == pytest.approx(list(ref.probabilities), abs=0)
    m = client.get_run(parent).data.metrics
    assert (m["labels.budget"], m["labels.n_requested"]) == (BUDGET + 8, BUDGET + 8)


def test_the_task_without_a_budget_or_a_file_asks_for_the_budget(planned: tuple[StageStore, Path],
                                                                 mlflow_store) -> None:
    store = _next_run(planned[0], "run-2")
    with pytest.raises(LabelsInputError, match="set label_budget to plan which target rows to label"):
        labels.fn(store, ctx=RunContext(mlflow_store[0], mlflow_store[2], "", "", 0), budget=None, label="y",
                  target_labels=None)
    assert not store.stage_dir("labels").exists()


def _pair_by_hand(store: StageStore, champion: np.ndarray) -> TargetPredictions:
    """The pair plan's contenders assembled by hand: DT as the fixture's training stage holds it, and the champion."""
    full = _by_hand(store, champion)
    keep = [full.names.index("DT"), full.names.index("champion v3")]
    dt = store.read_table("training", "predictions").query("learner == 'DT'").set_index(ROW).sort_index()
    proba = (dt[["proba_0", "proba_1"]].to_numpy() + np.column_stack([1.0 - champion, champion])) / 2
    return TargetPredictions(["DT", "champion v3"], full.predictions[:, keep], proba, np.array([0, 1]),
                             served=("champion v3",))


def test_a_pair_plan_draws_where_the_pair_disagrees_and_its_labels_give_the_exact_difference(
        planned: tuple[StageStore, Path], tmp_path: Path) -> None:
    """``label_plan='pair'`` (reports/decisions_pair.md): contenders DT and the served champion only. With a budget
    of the whole batch every row where the two disagree is drawn with probability 1, so the labels' estimate of
    DT − champion accuracy is the exact difference on the batch, computed here from the target's own labels."""
    from tasks.champion import label_difference

    store, _ = planned
    rng = np.random.default_rng(3)
    champ = rng.integers(0, 2, N)  # a champion that disagrees with DT on about half the rows
    run = _next_run(store, "run-2")
    _served_stage(run, 3, champ)
    with threadpool_limits(1):
        plan = write_plan(run, budget=BUDGET, seed=0, label="y", pair="DT")
        X_s, y_s, X_t = load_xy(run)
        tp = _pair_by_hand(run, champ)
        ref = plan_labels(tp.names, X_s, y_s, X_t, budget=BUDGET, random_state=0, prior=None, predictions=tp)
    assert plan.learners == ["DT", "champion v3"] and list(plan.rows) == list(ref.rows)
    np.testing.assert_allclose(plan.probabilities, ref.probabilities, rtol=0, atol=0)
    differ = np.flatnonzero(tp.predictions[:, 0] != tp.predictions[:, 1])
    assert set(plan.rows) <= set(differ) and list(plan.details["disagreement"]) == list(differ)
    assert run.manifest("labels")["params"]["pair"] == "DT"
    # a plan over every candidate of the same budget and seed is another plan (its own key), not this one
    other = _next_run(store, "run-3")
    _served_stage(other, 3, champ)
    assert write_plan(other, budget=BUDGET, seed=0, label="y").learners == ["LR", "DT", "champion v3"]
    assert other.reused_from("labels") is None
    # the pair plan's file filled, read as a plan over every candidate: refused, naming the plan that differs
    _filled(run.stage_dir("labels") / "to_label.csv", tmp_path / "pair.csv", value="a")
    read_back = _next_run(store, "run-4")
    _served_stage(read_back, 3, champ)
    msg = _refused(read_back, "are not rows this configuration's plan asked for", target_labels=str(tmp_path / "pair.csv"))
    assert "the label plan (the pair DT and the champion then, every candidate now)" in msg
    # the whole batch as budget: every disagreement row labeled with the target's true label → the exact difference
    whole = _next_run(store, "run-5")
    _served_stage(whole, 3, champ)
    with threadpool_limits(1):
        full = write_plan(whole, budget=N, seed=0, label="y", pair="DT")
    assert sorted(full.rows) == sorted(differ)
    np.testing.assert_allclose(full.probabilities, 1.0, rtol=1e-12)
    truth = pd.read_csv(tmp_path / "tgt.csv")["y"].to_numpy()
    filled = pd.read_csv(whole.stage_dir("labels") / "to_label.csv")
    filled["y"] = truth[filled[ROW].to_numpy()]
    filled.to_csv(tmp_path / "whole.csv", index=False)
    got = read_labels(whole, budget=N, seed=0, label="y", target_labels=str(tmp_path / "whole.csv"), pair="DT")
    y = (truth == "b").astype(int)  # classes a, b coded 0, 1
    dt_pred = tp.predictions[:, 0]
    exact = float(np.mean(dt_pred == y) - np.mean(champ == y))
    diff, se, n = label_difference(whole, got, "DT", 3)
    assert n == len(differ) and se == pytest.approx(0.0, abs=1e-12)
    assert diff == pytest.approx(exact, abs=1e-12) and exact != 0.0
    # the plan's contenders are DT and the champion: another chosen candidate has no labels' estimate from it
    assert label_difference(whole, got, "LR", 3) is None


def _whole_batch_labels(store: StageStore, tmp_path: Path, name: str, pair: str | None = "DT") -> dict:
    """The store's labels stage filled with the target's true labels and read back (a pair plan on DT, or
    ``pair`` None: a plan over every candidate)."""
    truth = pd.read_csv(tmp_path / "tgt.csv")["y"].to_numpy()
    filled = pd.read_csv(store.stage_dir("labels") / "to_label.csv")
    filled["y"] = truth[filled[ROW].to_numpy()]
    filled.to_csv(tmp_path / name, index=False)
    return read_labels(store, budget=N, seed=0, label="y", target_labels=str(tmp_path / name), pair=pair)


@pytest.mark.parametrize("mode", ["third", "one_class"])
def test_the_majority_rule_beside_or_in_place_of_the_champion_gives_its_exact_difference(
        planned: tuple[StageStore, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """``RULE_CONTENDER`` 'third' (revision 10): the rule is a third contender of the pair plan; 'one_class'
    (revision 11): it replaces a champion that predicts one class. With the whole batch as budget every row
    where two contenders disagree is drawn with probability 1, so the labels' DT − rule difference is exact,
    worked here from the target's labels and the source's largest class; the champion's difference exists only
    where it is a contender. A champion that predicts two classes keeps the 'one_class' plan a pair; a champion
    that predicts DT's class on every row adds no rule in 'third'."""
    from shiftlib.decisions import RULE_CONTENDER
    from tasks.champion import label_difference
    from tasks.served import RULE

    if mode != RULE_CONTENDER:  # 'one_class' ships: its case runs as the flow does
        monkeypatch.setattr("tasks.labels.RULE_CONTENDER", mode)
    store, _ = planned
    _, y_s, _ = load_xy(store)
    majority = int(np.argmax(np.bincount(y_s.astype(int))))
    dt = store.read_table("training", "predictions").query("learner == 'DT'").set_index(ROW).sort_index()
    dt_pred = dt["predicted"].to_numpy()
    # 'third' beside a champion that disagrees with DT on about half the rows; 'one_class' beside one that predicts
    # the class the rule does not
    champ = np.random.default_rng(3).integers(0, 2, N) if mode == "third" else np.full(N, 1 - majority)
    run = _next_run(store, f"run-{mode}")
    _served_stage(run, 3, champ)
    with threadpool_limits(1):
        plan = write_plan(run, budget=N, seed=0, label="y", pair="DT")
    P = np.column_stack([dt_pred, champ, np.full(N, majority)])
    if mode == "third":
        assert plan.learners == ["DT", "champion v3", RULE]
        differ = (P[:, 0] != P[:, 1]) | (P[:, 0] != P[:, 2]) | (P[:, 1] != P[:, 2])
    else:
        assert plan.learners == ["DT", RULE]
        differ = P[:, 0] != P[:, 2]
    assert sorted(plan.rows) == sorted(np.flatnonzero(differ))
    np.testing.assert_allclose(plan.probabilities, 1.0, rtol=1e-12)
    got = _whole_batch_labels(run, tmp_path, f"{mode}.csv")
    y = (pd.read_csv(tmp_path / "tgt.csv")["y"].to_numpy() == "b").astype(int)
    d_rule, se_rule, n = label_difference(run, got, "DT", 3, against=RULE)
    exact = float(np.mean(dt_pred == y) - np.mean(y == majority))
    assert n == int(differ.sum()) and se_rule == pytest.approx(0.0, abs=1e-12)
    assert d_rule == pytest.approx(exact, abs=1e-12) and exact != 0.0
    champion_d = label_difference(run, got, "DT", 3)
    if mode == "third":
        assert champion_d[0] == pytest.approx(float(np.mean(dt_pred == y) - np.mean(champ == y)), abs=1e-12)
    else:  # the champion was not a contender: the gate weighs DT against the rule alone
        assert champion_d is None
    # where the rule does not join the pair
    other = _next_run(store, f"run-{mode}-pair")
    _served_stage(other, 3, dt_pred if mode == "third" else np.random.default_rng(3).integers(0, 2, N))
    assert stage_predictions(other, learners=["DT"], rule=mode).names == ["DT", "champion v3"]


def test_the_gate_reads_a_pair_difference_whose_labels_are_all_alike_with_the_anticipated_spread(
        planned: tuple[StageStore, Path], tmp_path: Path) -> None:
    """The gate's labels are a sample of the rows R where the pair disagrees. When every labeled row says the same
    (here DT right and the champion wrong on each of 12), the Hansen–Hurwitz variance sees almost no spread (0 when
    the residuals are equal too), which reads as P ≈ 1 from 12 of about 100 rows. The shipped form
    (``LABEL_VARIANCE`` = 'hh_model') is floored by the variance anticipated under the pair's mean probability p̄:
    with equal inclusion probabilities π = 12/|R| and a contrast of ±1 on each row of R (DT right with probability
    p̄(DT's class)), Var = (1 − π)/π · Σ_R 4 p̄(1 − p̄) / N², worked here from the plan and the stage predictions."""
    from shiftlib.decisions import LABEL_VARIANCE
    from shiftlib.selection.fewlabel import fewlabel_estimate
    from tasks.champion import label_difference

    assert LABEL_VARIANCE == "hh_model"
    store, _ = planned
    champ = np.random.default_rng(3).integers(0, 2, N)
    run = _next_run(store, "run-alike")
    _served_stage(run, 3, champ)
    with threadpool_limits(1):
        plan = write_plan(run, budget=BUDGET, seed=0, label="y", pair="DT")
    tp = _pair_by_hand(run, champ)
    R = np.asarray(plan.details["disagreement"])
    pi = BUDGET / len(R)
    np.testing.assert_allclose(plan.probabilities, pi, rtol=1e-12)  # the pair's draw is uniform over R here
    filled = pd.read_csv(run.stage_dir("labels") / "to_label.csv")
    dt_said = tp.predictions[filled[ROW].to_numpy(), 0]
    filled["y"] = np.where(dt_said == 1, "b", "a")  # the class DT predicted: DT right, the champion wrong
    filled.to_csv(tmp_path / "alike.csv", index=False)
    got = read_labels(run, budget=BUDGET, seed=0, label="y", target_labels=str(tmp_path / "alike.csv"), pair="DT")
    labels = {int(r): c for r, c in got["labels"].items()}
    d = np.array([1.0, -1.0])
    hh = fewlabel_estimate(tp, plan, labels, None, "difference", "hh")
    diff, se, n = label_difference(run, got, "DT", 3)
    p_dt = tp.proba[R, tp.predictions[R, 0]]
    by_hand = (1 - pi) / pi * np.sum(4 * p_dt * (1 - p_dt)) / N ** 2
    assert n == BUDGET and diff == pytest.approx(float(d @ hh.theta), abs=1e-12)
    assert se == pytest.approx(np.sqrt(by_hand), rel=1e-9)
    assert d @ hh.cov @ d < by_hand / 50  # what the labels alone show: a tenth of the spread


def test_without_a_champion_a_pair_plan_weighs_the_choice_against_the_majority_class_rule(
        planned: tuple[StageStore, Path], tmp_path: Path) -> None:
    """A first version left undecided asks for a pair plan (``label_plan='pair'``) with no champion serving: the
    majority-class rule (the source's largest class on every row, ``tasks.served.served_rule``) stands in for it.
    With the whole batch as budget every row where DT predicts the other class is drawn, and the labels' estimate
    of DT − rule accuracy is the exact difference, computed here from the target's own labels. The rule has no
    probabilities of its own: the plan's surrogate is DT's alone."""
    from tasks.champion import label_difference
    from tasks.labels import stage_predictions
    from tasks.served import RULE, RULE_VERSION, served_rule

    store, _ = planned
    whole = _next_run(store, "run-rule")
    _, y_s, _ = load_xy(whole)
    majority = int(np.argmax(np.bincount(y_s.astype(int))))
    assert served_rule(whole, model_name="shop") == {"name": RULE, "version": RULE_VERSION, "model_name": "shop"}
    rule = whole.read_table(SERVED, "predictions")
    assert (rule["predicted"] == majority).all() and (rule[f"proba_{majority}"] == 1.0).all()
    with threadpool_limits(1):
        plan = write_plan(whole, budget=N, seed=0, label="y", pair="DT")
    tp = stage_predictions(whole, learners=["DT"])
    dt = whole.read_table("training", "predictions").query("learner == 'DT'").set_index(ROW).sort_index()
    assert tp.names == ["DT", RULE] and tp.served == (RULE,)
    np.testing.assert_allclose(tp.proba, dt[["proba_0", "proba_1"]].to_numpy(), rtol=0, atol=0)
    differ = np.flatnonzero(dt["predicted"].to_numpy() != majority)
    assert plan.learners == ["DT", RULE] and sorted(plan.rows) == sorted(differ)
    truth = pd.read_csv(tmp_path / "tgt.csv")["y"].to_numpy()
    filled = pd.read_csv(whole.stage_dir("labels") / "to_label.csv")
    filled["y"] = truth[filled[ROW].to_numpy()]
    filled.to_csv(tmp_path / "rule.csv", index=False)
    got = read_labels(whole, budget=N, seed=0, label="y", target_labels=str(tmp_path / "rule.csv"), pair="DT")
    y = (truth == "b").astype(int)
    exact = float(np.mean(dt["predicted"].to_numpy() == y) - np.mean(y == majority))
    diff, se, n = label_difference(whole, got, "DT", RULE_VERSION)
    assert n == len(differ) and se == pytest.approx(0.0, abs=1e-12)
    assert diff == pytest.approx(exact, abs=1e-12) and exact != 0.0


def test_a_first_versions_plan_over_every_candidate_weighs_the_choice_against_the_rule(
        planned: tuple[StageStore, Path], tmp_path: Path) -> None:
    """No champion serves: the plan over every candidate has the majority-class rule among its contenders
    (``FIRST_RULE_LABELS``, kept as the plan's ``rule``). With the whole batch as budget every row where two of LR,
    DT and the rule disagree is drawn with probability 1, so the labels' DT − rule difference is exact, worked
    from the target's labels; the selection reads the same contenders back."""
    from tasks.champion import label_difference
    from tasks.served import RULE, RULE_VERSION

    store, _ = planned
    whole = _next_run(store, "run-first")
    with threadpool_limits(1):
        plan = write_plan(whole, budget=N, seed=0, label="y")
    tp = _by_hand(whole)
    assert plan.learners == ["LR", "DT", RULE] and sorted(plan.rows) == sorted(tp.disagreement)
    got = _whole_batch_labels(whole, tmp_path, "first.csv", pair=None)
    assert got["rule"] == "first" and stage_predictions(whole, rule=got["rule"]).names == plan.learners
    y = (pd.read_csv(tmp_path / "tgt.csv")["y"].to_numpy() == "b").astype(int)
    d, se, n = label_difference(whole, got, "DT", RULE_VERSION)
    exact = float(np.mean(tp.predictions[:, 1] == y) - np.mean(tp.predictions[:, 2] == y))
    assert n == len(tp.disagreement) and se == pytest.approx(0.0, abs=1e-12)
    assert d == pytest.approx(exact, abs=1e-12) and exact != 0.0


def test_a_file_no_stored_plan_of_this_code_seed_and_kind_can_take_is_refused_at_the_door(
        planned: tuple[StageStore, Path], tmp_path: Path) -> None:
    """A plan is answered only by the code that wrote it, with its seed and its kind (a pair or every candidate):
    all three are known before training, so the preflight refuses a file that no stored plan of them can take,
    naming what differs, instead of the labels stage after the candidates are fitted. A plan of them passes the
    door (whether it is this configuration's is the labels stage's to say)."""
    import flows.preflight
    from flows.config import RetrainConfig
    from flows.preflight import preflight
    from tasks.inputs import check_plan_kind

    store, csv = planned
    _filled(csv, tmp_path / "filled.csv")
    spec, root = f"file:{tmp_path / 'filled.csv'}", store.run_root
    check_plan_kind(root, spec, "y", seed=0, pair_plan=False)  # run-1's plan: this code, seed 0, every candidate
    with pytest.raises(LabelsInputError, match=r"differs from this run in the seed \(0 then, 1 now\)") as err:
        check_plan_kind(root, spec, "y", seed=1, pair_plan=False)
    assert "the plan whose rows the file holds (run run-1)" in str(err.value)
    with pytest.raises(LabelsInputError, match=r"the label plan \(a plan over every candidate then, --label-plan "
                                               r"pair now\)"):
        check_plan_kind(root, spec, "y", seed=0, pair_plan=True)
    config = RetrainConfig(source=f"file:{tmp_path / 'src.csv'}", target=f"file:{tmp_path / 'tgt.csv'}", label="y",
                           learners=["LR", "DT"], run_root=str(root), target_labels=spec, seed=0)
    preflight(config)  # passes the door
    # the same rows under another path pass; another target batch is refused at the door, naming it (helper-36: it
    # was refused by the labels stage after training, leaving a FAILED run)
    shutil.copy(tmp_path / "tgt.csv", tmp_path / "tgt_copy.csv")
    preflight(config.model_copy(update={"target": f"file:{tmp_path / 'tgt_copy.csv'}"}))
    other = pd.read_csv(tmp_path / "tgt.csv")
    other.loc[0, "x1"] += 1.0
    other.to_csv(tmp_path / "tgt_other.csv", index=False)
    with pytest.raises(LabelsInputError, match=r"the plan whose rows the file holds \(run run-1\) differs from this "
                                               r"run in the target batch \(other rows or values\)\. Resume"):
        preflight(config.model_copy(update={"target": f"file:{tmp_path / 'tgt_other.csv'}"}))
    with pytest.raises(LabelsInputError, match=r"differs from this run in the setting max_levels \(20 then, 7 now\)"):
        preflight(config.model_copy(update={"max_levels": 7}))
    # other candidates never take a plan over every candidate's predictions: refused at the door too, once the plan's
    # run records its candidates (the fixture's training stage records none: nothing to compare, so it passed)
    training = store.stage_dir("training") / "manifest.json"
    recorded = json.loads(training.read_text())
    recorded["params"] = {"candidates": [{"learner": n, "weighting": w} for w in ("none", "kmm") for n in ("LR", "DT")]}
    training.write_text(json.dumps(recorded))
    preflight(config.model_copy(update={"learners": ["DT", "LR"], "weighting": "kmm"}))  # another order: passes
    flows.preflight._PASSED.clear()
    preflight(config)  # weighting 'auto' is settled by the drift stage: not compared
    with pytest.raises(LabelsInputError, match=r"differs from this run in the learners \(DT, LR then, LR, NB now\)\. "):
        preflight(config.model_copy(update={"learners": ["LR", "NB"]}))
    with pytest.raises(LabelsInputError, match=r"differs from this run in the weighting \(kmm then, none now\)\. "):
        preflight(config.model_copy(update={"weighting": "none"}))
    # a candidate asked for then but skipped in training (it could not be fitted) is no difference (helper-40)
    recorded["params"]["candidates"] = [c for c in recorded["params"]["candidates"] if c["learner"] != "DT"]
    recorded["extra"] = recorded.get("extra", {}) | {"skipped": {"DT": "why", "DT+kmm": "why"}}
    training.write_text(json.dumps(recorded))
    preflight(config.model_copy(update={"learners": ["LR", "DT"], "weighting": "kmm"}))
    # two plans holding the same rows (run-0 a copy of run-1): the one whose folder holds the file is named
    shutil.copytree(store.run_dir, root / "run-0")
    in_place = store.stage_dir("labels") / "filled.csv"
    shutil.copy(tmp_path / "filled.csv", in_place)
    with pytest.raises(LabelsInputError, match=r"the plan whose folder holds the file \(run run-1\)"):
        check_plan_kind(root, f"file:{in_place}", "y", seed=1, pair_plan=False)
    shutil.rmtree(root / "run-0")
    manifest = store.stage_dir("labels") / "manifest.json"
    before = manifest.read_text()
    manifest.write_text(before.replace(json.loads(before)["code_version"], "0" * 16))  # written by other code
    listing = sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))
    flows.preflight._PASSED.clear()  # the checks that passed in this process are not repeated otherwise
    with pytest.raises(LabelsInputError, match=r"differs from this run in the shiftflow code \(changed since"):
        preflight(config)
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == listing  # nothing written
