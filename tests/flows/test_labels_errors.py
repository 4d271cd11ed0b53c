"""The labels stage's bad input (fast, no Prefect or MLflow): ``tasks.labels.write_plan`` / ``read_labels``
on a real ingest stage and a training stage of two fitted candidates. Each case raises ``LabelsInputError``
(an ``IngestError``) naming the fix, and the new run's labels stage is not written; a partly filled file
is used and counted."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeClassifier

from shiftlib.ingest import IngestError
from tasks.ingest import ROW, ingest, load_xy
from tasks.labels import LabelsInputError, continue_plan, read_labels, write_plan
from tasks.store import StageStore, stage_key

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


def test_read_filled_takes_spreadsheet_text_odd_paths_and_the_sources_spelling(tmp_path: Path) -> None:
    """``read_filled`` on its own: a tab-separated .txt (a spreadsheet's text export), a plain path holding '?'
    (taken literally: only a file: spec carries reading options), and source classes spelled with a trailing space
    ('no ', 'yes ') matched by the filled cells, which are read stripped."""
    from tasks.inputs import read_filled

    df = pd.DataFrame({ROW: [0, 3, 5], "y": ["yes ", "no", None]})
    df.to_csv(tmp_path / "lab.txt", sep="\t", index=False)
    df.to_csv(tmp_path / "q?v=2.csv", index=False)
    for spec in (f"file:{tmp_path / 'lab.txt'}", str(tmp_path / "q?v=2.csv")):
        labels, n_empty, _ = read_filled(spec, "y", ["no ", "yes "], 10)
        assert (labels, n_empty) == ({0: 1, 3: 0}, 1)
    with pytest.raises(LabelsInputError, match="unknown reading option 'v'"):
        read_filled(f"file:{tmp_path / 'lab.txt'}?v=2", "y", ["no ", "yes "], 10)
