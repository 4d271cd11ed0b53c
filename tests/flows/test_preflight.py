"""flows.preflight: reliability at the door (issue 17). Every bad input of the catalogue is refused by the CLI's
preflight with exit code 2 and one line ``shiftflow: error: <sentence>`` on stderr, before Prefect or MLflow
start, leaving nothing on disk; a user's own tables get no simulated bias; a learner that cannot be fitted is
dropped; the size rules it runs (``shiftlib.requirements``) match the code that runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flows.cli import main
from flows.config import RetrainConfig
from flows.paths import PROJECT_DIR
from flows.preflight import preflight
from tests.flows.conftest import DOOR_ROWS as N
from tests.flows.conftest import door_frame as _frame
from tests.flows.conftest import write_table as _write


def _case(kind: str, d: Path) -> tuple[list[str], list[str]]:
    """(CLI arguments, key words the one-line message must contain) for one kind of bad input."""
    src, tgt = _frame(), _frame(seed=1).drop(columns=["target"])
    s, t = _write(src, d / "src.csv"), _write(tgt, d / "tgt.parquet")
    args = ["--source", s, "--target", t, "--label", "target"]
    if kind == "missing file":
        return ["--source", f"file:{d / 'nope.csv'}", "--target", t, "--label", "target"], ["nope.csv", "does not exist"]
    if kind == "empty file":
        (d / "empty.csv").write_bytes(b"")
        return ["--source", f"file:{d / 'empty.csv'}", "--target", t, "--label", "target"], ["empty.csv", "empty"]
    if kind == "truncated parquet":
        data = (d / "tgt.parquet").read_bytes()
        (d / "cut.parquet").write_bytes(data[: len(data) // 2])
        return ["--source", s, "--target", f"file:{d / 'cut.parquet'}", "--label", "target"], \
            ["cut.parquet", "not a readable Parquet file"]
    if kind == "latin-1 csv":  # read (cp1252 fallback): the refusal that follows names the decoded columns
        return ["--source", _write(src, d / "latin.csv", encoding="latin-1"), "--target", t, "--label", "y"], \
            ["label column 'y'", "'cät'"]
    if kind == "semicolon csv":  # read with the sniffed ';': the columns come out separate
        return ["--source", _write(src, d / "semi.csv", sep=";"), "--target", t, "--label", "y"], \
            ["label column 'y'", "'mean radius', 'mean texture'"]
    if kind == "duplicate columns":
        (d / "dup.csv").write_text("mean radius,mean radius,target\n1,2,0\n3,4,1\n")
        return ["--source", f"file:{d / 'dup.csv'}", "--target", t, "--label", "target"], \
            ["duplicate column names ['mean radius']"]
    if kind == "nested parquet column":  # a Parquet list column arrives as numpy arrays in its cells
        _write(tgt.assign(tags=[[1, 2]] * len(tgt)), d / "nested.parquet")
        return ["--source", _write(src.assign(tags=[[3]] * len(src)), d / "nested_s.parquet"),
                "--target", f"file:{d / 'nested.parquet'}", "--label", "target"], \
            ["column 'tags' holds nested values (ndarray", "--drop-columns tags"]
    if kind == "misspelt config key":
        (d / "run.json").write_text(json.dumps({"learnerz": ["LR"]}))
        return [*args, "--config", str(d / "run.json")], ["unknown key 'learnerz'", "did you mean 'learners'"]
    if kind == "2-row table":
        return ["--source", _write(src.iloc[:2], d / "two.csv"), "--target", t, "--label", "target"], \
            ["source table has 2 rows", "at least 10"]
    if kind == "12-row table, SVM":
        (d / "run.json").write_text(json.dumps({"selection_folds": 5}))
        return ["--source", _write(src.iloc[:12], d / "twelve.csv"), "--target", t, "--label", "target",
                "--learners", "SVM", "--config", str(d / "run.json")], ["no learner can be fitted", "'SVM'"]
    if kind == "label missing":
        return [*args[:-1], "churned"], ["label column 'churned' is not in the source"]
    if kind == "label in another case":  # helper-39: --label died for a column Died
        return [*args[:-1], "TARGET"], ["label column 'TARGET' is not in the source", "did you mean 'target'?"]
    if kind == "group column, few cases":  # every case in one fold: 10 folds need 10 cases
        few = _write(src.assign(site=[f"s{i % 4}" for i in range(len(src))]), d / "sites.csv")
        return ["--source", few, "--target", t, "--label", "target", "--group-column", "site"], \
            ["group_column 'site' names 4 cases, fewer than the 10 folds", "--cv-folds"]
    if kind == "no --label":  # helper-39: the default 'type' is the embedded example's, which the user never typed
        return args[:-2], ["no --label was given, so the label is the default 'type', the embedded example's",
                           "label column 'type' is not in the source"]
    if kind == "one class":
        return ["--source", _write(src.assign(target=1), d / "one.csv"), "--target", t, "--label", "target"], \
            ["only one class"]
    if kind == "NaN labels":  # every label missing (a few missing: those rows are left out, test_inputs)
        return ["--source", _write(src.assign(target=np.nan), d / "nan.csv"),
                "--target", t, "--label", "target"], ["label column 'target' has", "missing value"]
    if kind == "all-NaN column":
        return ["--source", _write(src.assign(**{"mean radius": np.nan}), d / "allnan.csv"), "--target", t,
                "--label", "target"], ["column 'mean radius' is empty"]
    if kind == "inf":
        inf = src.assign(**{"mean texture": src["mean texture"].where(src.index != 5, -np.inf)})
        return ["--source", _write(inf, d / "inf.parquet"), "--target", t, "--label", "target"], \
            ["column 'mean texture'", "infinite value"]
    if kind == "columns differ":
        return ["--source", s, "--target", _write(tgt.rename(columns={"cät": "cat"}), d / "t2.parquet"),
                "--label", "target"], ["feature columns differ", "missing from the target ['cät']"]
    if kind == "unknown learner":
        return [*args, "--learners", "LR,XGB"], ["learners", "got 'XGB'"]
    if kind == "bad bias JSON":
        return [*args, "--simulate-bias", "{mechanism: rt_sort}"], ["--simulate-bias is not valid JSON"]
    if kind == "unknown bias mechanism":
        return [*args, "--simulate-bias", '{"mechanism": "rt_sortt"}'], \
            ["unknown mechanism 'rt_sortt'", "did you mean 'rt_sort'"]
    if kind == "label budget beyond the batch":
        return [*args, "--label-budget", str(N + 1)], [f"label_budget={N + 1} is larger than the batch",
                                                       f"{N} target rows"]
    if kind == "labels file missing":
        return [*args, "--target-labels", f"file:{d / 'filled.csv'}"], ["filled.csv does not exist"]
    if kind == "labels file unreadable":
        (d / "filled.parquet").write_bytes(b"PAR1 not parquet")
        return [*args, "--target-labels", f"file:{d / 'filled.parquet'}"], ["filled.parquet' is not a readable Parquet"]
    if kind == "labels file, unknown class":
        (d / "filled.csv").write_text("_row,target\n0,1\n1,7\n")
        return [*args, "--target-labels", f"file:{d / 'filled.csv'}"], ["label(s) ['7'] never occur in the source"]
    if kind == "labels but no plan":
        (d / "filled.csv").write_text("_row,target\n0,1\n1,0\n")
        return [*args, "--target-labels", f"file:{d / 'filled.csv'}"], ["no label plan is stored under the run root",
                                                                           "--label-budget first"]
    if kind == "10 MB of NUL bytes":  # issue 31: its one line was 41.9 MB long (every NUL of the column name)
        with open(d / "zeros.csv", "wb") as f:
            f.truncate(10 * 2**20)
        return ["--source", f"file:{d / 'zeros.csv'}", "--target", t, "--label", "target"], \
            ["zeros.csv' holds binary content (NUL bytes", "give a CSV, Parquet"]
    if kind == "UTF-16 csv":  # NULs of UTF-16 text: the fix is the encoding, and with it the file reads
        (d / "u16.csv").write_bytes(src.to_csv(index=False).encode("utf-16"))
        return ["--source", f"file:{d / 'u16.csv'}", "--target", t, "--label", "target"], \
            ["looks UTF-16 encoded", "?encoding=utf-16"]
    if kind == "1 MB column name":  # quoted in at most 300 characters, the rest counted
        (d / "head.csv").write_text("target," + "a" * 2**20 + "\n" + "0,1\n1,2\n" * 20)
        return ["--source", f"file:{d / 'head.csv'}", "--target", t, "--label", "target"], \
            ["missing from the target ['aaaa", "… [1,048,501 more characters]']", "--drop-columns"]
    if kind == "10,000 columns":
        wide = pd.DataFrame(np.ones((N, 10_000)), columns=[f"c{i}" for i in range(10_000)]).assign(target=src["target"])
        return ["--source", _write(wide, d / "wide.csv"), "--target", t, "--label", "target"], \
            ["missing from the target ['c0', 'c1'", "(10,000 in all)", "only in the target"]
    if kind == "50 classes":  # issue 31: a 50-class noise label was still estimating after 11 minutes
        many = _frame(200).assign(target=[f"k{i % 50}" for i in range(200)])
        return ["--source", _write(many, d / "k50.csv"), "--target", t, "--label", "target"], \
            ["label 'target' has 50 classes", "max_classes=20", "--max-classes"]
    if kind == "over max_memory":
        return [*args, "--max-memory", "0.5"], ["the run about 1.0 GiB, more than max_memory=0.5 GiB",
                                                "subsample the source", "--max-memory"]
    raise AssertionError(kind)


CATALOGUE = ["missing file", "empty file", "truncated parquet", "latin-1 csv", "semicolon csv", "duplicate columns",
             "nested parquet column",
             "misspelt config key", "2-row table", "12-row table, SVM", "label missing", "label in another case",
             "no --label", "group column, few cases", "one class", "NaN labels",
             "all-NaN column", "inf", "columns differ", "unknown learner", "bad bias JSON",
             "unknown bias mechanism", "label budget beyond the batch",
             "labels file missing", "labels file unreadable", "labels file, unknown class", "labels but no plan",
             "10 MB of NUL bytes", "UTF-16 csv", "1 MB column name", "10,000 columns", "50 classes",
             "over max_memory"]


@pytest.mark.parametrize("kind", CATALOGUE)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(kind, tmp_path, monkeypatch, capsys):
    data, home = tmp_path / "data", tmp_path / "home"
    data.mkdir()
    monkeypatch.setenv("SHIFTFLOW_HOME", str(home))
    monkeypatch.delenv("SHIFTFLOW_DEBUG", raising=False)
    args, words = _case(kind, data)
    before = sorted(p.name for p in data.iterdir())
    code = main(["retrain", *args, "--run-root", str(tmp_path / "runs"),
                 "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"])
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("shiftflow: error: "), err
    assert len(lines[0]) <= 1100, lines[0][:200]  # bounded: at most 300 characters of any one value
    for w in words:
        assert w in lines[0], (w, lines[0])
    # the documented rule: a refusal before the run leaves nothing — no home, run folder or MLflow store
    assert sorted(os.listdir(tmp_path)) == ["data"]
    assert sorted(p.name for p in data.iterdir()) == before


def test_refusal_starts_neither_prefect_nor_mlflow(tmp_path):
    """As a user runs it: a separate process, whose Prefect home must not even be created."""
    env = dict(os.environ, SHIFTFLOW_HOME=str(tmp_path / "home"), PREFECT_HOME=str(tmp_path / "prefect"))
    code = ("import sys; from flows.cli import main; rc = main(sys.argv[1:]); "
            "assert 'prefect' not in sys.modules and 'mlflow' not in sys.modules, 'imported the stack'; "
            "sys.exit(rc)")
    res = subprocess.run([sys.executable, "-c", code, "retrain", "--source", f"file:{tmp_path / 'no.csv'}",
                          "--label", "y"], cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == [f"shiftflow: error: file '{tmp_path / 'no.csv'}' does not exist; "
                                               f"check the path in 'file:{tmp_path / 'no.csv'}'"]
    assert sorted(os.listdir(tmp_path)) == []


def test_own_data_keeps_every_row_and_the_example_keeps_its_bias(tmp_path):
    src, tgt = _frame(), _frame(seed=1).drop(columns=["target"])
    cfg = RetrainConfig(source=_write(src, tmp_path / "s.csv"), target=_write(tgt, tmp_path / "t.parquet"),
                        label="target", learners=["LR"], selection_folds=5)
    checked = preflight(cfg)
    assert checked.bias == "none" and checked.config.simulate_bias is None
    assert checked.n_source == len(src)  # every row kept
    assert RetrainConfig().applied_bias().mechanism == "rt_sort"  # the embedded example: RT §3.1
    asked = RetrainConfig(source=cfg.source, target=cfg.target, label="target",
                          simulate_bias={"mechanism": "rt_sort", "params": {}}).applied_bias()
    assert asked.mechanism == "rt_sort"  # a user who asks for a bias gets it


def test_learner_short_of_rows_is_dropped_with_a_warning(tmp_path):
    # 12 rows, 6 per class: a 5-fold training fold keeps 6 − ⌈6/5⌉ = 4 of a class < SVM's inner 5 folds
    src, tgt = _frame(12), _frame(seed=1).drop(columns=["target"])
    cfg = RetrainConfig(source=_write(src, tmp_path / "s.csv"), target=_write(tgt, tmp_path / "t.parquet"),
                        label="target", learners=["LR", "SVM"], selectors=["scv"], selection_folds=5)
    checked = preflight(cfg)
    assert checked.config.learners == ["LR"]
    assert any("'SVM' dropped" in n and "smallest has 4" in n for n in checked.notes)
    # 20 rows, 10 per class: 10 − ⌈10/5⌉ = 8 ≥ 5, SVM stays
    cfg20 = cfg.model_copy(update={"source": _write(_frame(20), tmp_path / "s20.csv")})
    assert preflight(cfg20).config.learners == ["LR", "SVM"]


def test_the_preflight_says_what_ingest_notes_about_the_target(tmp_path):
    """A target whose label column is partly empty (its labels cannot evaluate) and a text level the source
    never had (it encodes as all zeros) are each said in one line before the run, not only in a manifest."""
    src, tgt = _frame(), _frame(seed=1).astype({"target": float})
    tgt.loc[:2, "target"] = np.nan
    tgt.loc[:4, "cät"] = "ü"
    cfg = RetrainConfig(source=_write(src, tmp_path / "s.csv"), target=_write(tgt, tmp_path / "t.parquet"),
                        label="target", learners=["LR"], selection_folds=5)
    notes = preflight(cfg).notes
    assert any("label column 'target' is empty in 3 of" in n and "not used to evaluate" in n for n in notes)
    assert any("column 'cät': target levels ['ü'] not in the source" in n for n in notes)
    tgt["target"] = np.nan  # a label column with no label at all: no talk of which rows are labeled
    cfg = cfg.model_copy(update={"target": _write(tgt, tmp_path / "t2.parquet")})
    assert any(n.startswith("the target's label column 'target' is empty: the candidates are not evaluated")
               for n in preflight(cfg).notes)


def test_preflight_is_not_repeated_for_unchanged_files_and_coerces_a_text_positive_label(tmp_path):
    src, tgt = _frame(), _frame(seed=1).drop(columns=["target"])
    cfg = RetrainConfig(source=_write(src, tmp_path / "s.csv"), target=_write(tgt, tmp_path / "t.parquet"),
                        label="target", learners=["LR"], selection_folds=5, positive_label="0")
    first = preflight(cfg)
    assert first.config.positive_label == 0  # '--positive-label 0' names the integer class 0
    assert preflight(cfg) is first and preflight(first.config) is first  # the flow's re-check is free
    _write(src.iloc[:30], tmp_path / "s.csv")  # the file changed: checked again, on the new rows
    assert preflight(cfg).n_source == 30


def test_undersampling_a_multiclass_label_is_refused_up_front():
    # the recalibration stage (US eq. 9) is two-class only: refused in preflight, not after training
    from flows.preflight import ConfigError

    with pytest.raises(ConfigError, match="the source has 3 classes in 'target'"):
        preflight(RetrainConfig(source="sklearn:iris", target="sklearn:iris", label="target", undersample=0.5))


def test_size_constants_equal_the_code_that_runs():
    """shiftlib.requirements keeps drift's and the learners' minimums as constants (importing scikit-learn
    would slow every refusal by seconds); they must equal the live defaults."""
    import inspect

    from shiftlib.drift import detect_drift
    from shiftlib.learners import LEARNERS, make_learner
    from shiftlib.requirements import DRIFT_MIN_ROWS, DRIFT_SPLITS, INNER_FOLDS, inner_folds

    params = inspect.signature(detect_drift).parameters
    assert (params["min_rows"].default, params["n_splits"].default) == (DRIFT_MIN_ROWS, DRIFT_SPLITS)
    live = {name: inner_folds(make_learner(name)) for name in LEARNERS}
    assert {n: k for n, k in live.items() if k} == INNER_FOLDS


def test_a_refusal_imports_neither_scikit_learn_nor_matplotlib(tmp_path):
    """What makes a refusal fast: the size rules need no scikit-learn, SciPy or matplotlib import."""
    src = _frame().iloc[:2]
    code = ("import sys; from flows.cli import main; rc = main(sys.argv[1:]); "
            "heavy = [m for m in ('sklearn', 'matplotlib', 'scipy', 'prefect', 'mlflow') if m in sys.modules]; "
            "assert not heavy, heavy; sys.exit(rc)")
    res = subprocess.run([sys.executable, "-c", code, "retrain", "--source", _write(src, tmp_path / "two.csv"),
                          "--target", _write(_frame(), tmp_path / "t.parquet"), "--label", "target"],
                         cwd=PROJECT_DIR, env=dict(os.environ, SHIFTFLOW_HOME=str(tmp_path / "home")),
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert "the drift stage needs at least 10 rows" in res.stderr


def test_a_one_row_class_is_named_as_its_label():
    """An integer class is shown as the label the user wrote (9), not as text ('9'); a text class keeps its quotes."""
    import numpy as np

    from shiftlib.ingest import IngestError
    from shiftlib.requirements import check_sizes

    for counts, shown in (({np.int64(9): 1, np.int64(1): 50}, "[9]"), ({"yes": 1, "no": 50}, "['yes']")):
        with pytest.raises(IngestError, match=rf"class\(es\) {re.escape(shown)} have only 1 source row"):
            check_sizes(counts, 100, ["LR"], cv_folds=5, selection_folds=10, selectors=["scv"])


def test_a_dropped_learner_says_why_its_cv_has_so_few_folds():
    """The source CV is the estimation's 10-fold split when the largest class has 10 rows: a 2-row class keeps
    2 − ⌈2/10⌉ = 1 row in a training fold. Below that the CV lowers its folds to the smallest class (2 rows →
    2-fold, again 2 − ⌈2/2⌉ = 1 row), and SVM's drop note says so, where it said only '2-fold CV'."""
    from shiftlib.requirements import check_sizes

    plan = check_sizes({0: 2, 1: 50}, 100, ["LR", "SVM"], cv_folds=10, selection_folds=10, selectors=["scv"])
    assert plan.learners == ["LR"]
    assert "the smallest has 1 (a training fold of 10-fold CV); add rows" in plan.dropped["SVM"]
    plan = check_sizes({0: 2, 1: 8}, 100, ["LR", "SVM"], cv_folds=10, selection_folds=10, selectors=[])
    assert plan.learners == ["LR"]
    assert "the smallest has 1 (a training fold of 2-fold CV, lowered from 10 because the smallest class has 2 rows)" \
        in plan.dropped["SVM"]


def test_an_unquoted_yes_in_a_yaml_config_is_named_as_yaml_s_boolean(tmp_path, capsys):
    """YAML reads `positive_label: Yes` as true, which the config turned into the integer 1: the refusal said
    'positive_label 1 is not one of the source labels'. The boolean is kept and the refusal says to quote it."""
    src = _frame().assign(target=lambda d: np.where(d.target == 1, "Yes", "No"))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"source: {_write(src, tmp_path / 's.csv')}\ntarget: {_write(src.drop(columns='target'), tmp_path / 't.csv')}\n"
                   "label: target\npositive_label: Yes\nlearners: LR\nselection_folds: 5\n")
    code = main(["retrain", "--config", str(cfg), "--run-root", str(tmp_path / "runs")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["shiftflow: error: positive_label True is not one of the source labels ['No', 'Yes'] "
                                 "(YAML reads an unquoted yes, no, on, off, true or false as a boolean: quote the label, "
                                 "e.g. positive_label: \"Yes\")"]


def test_the_bias_label_is_none_or_the_mechanism_and_its_parameters():
    from flows.config import BiasSpec
    from flows.preflight import bias_label

    assert bias_label(None) == "none"  # the docstring's two forms: ``none`` or ``rt_sort {}``
    assert bias_label(BiasSpec(mechanism="rt_sort", params={})) == "rt_sort {}"
    assert bias_label(BiasSpec(mechanism="kmm_threshold", params={"feature": 0})) == "kmm_threshold {'feature': 0}"


@pytest.mark.parametrize(("fields", "sentence"), [
    # every problem, field by field, in one line
    ({"seed": -1, "cv_folds": 1}, "invalid configuration: cv_folds: Input should be greater than or equal to 2; "
                                  "seed: Input should be greater than or equal to 0"),
    # the project's own validators keep their sentence, without pydantic's "Value error, "
    ({"selectors": ["scv"], "selector": "rt"}, "invalid configuration: selector 'rt' must be one of selectors ['scv']"),
    # a literal names the value it got
    ({"weighting": "kmn"}, "invalid configuration: weighting: Input should be 'none', "),
    # a union (a BiasSpec, 'auto' or null): the branch that says what is wrong, not the literal it could not match
    ({"simulate_bias": {"mechanism": "rt_sort", "bogus": 1}},
     "invalid configuration: simulate_bias: unknown key 'bogus' in BiasSpec (simulate_bias); the keys are "
     "['mechanism', 'params']"),
])
def test_a_validation_error_is_one_sentence(fields, sentence):
    from pydantic import ValidationError

    from flows.preflight import config_error_sentence

    with pytest.raises(ValidationError) as err:
        RetrainConfig(**fields)
    text = config_error_sentence(err.value)
    assert text.startswith(sentence) and "\n" not in text and "Value error" not in text
    if fields.get("weighting"):
        assert text.endswith("(got 'kmn')")
    if "simulate_bias" in fields:
        assert text == sentence


def test_a_pair_plan_without_labels_is_noted_and_a_bad_plan_refused(tmp_path):
    """``label_plan='pair'`` plans nothing without a label budget or a filled file: one note says so; a plan
    name outside shiftlib.decisions.LABEL_PLANS is refused by the config."""
    src, tgt = _frame(), _frame(seed=1).drop(columns=["target"])
    cfg = RetrainConfig(source=_write(src, tmp_path / "s.csv"), target=_write(tgt, tmp_path / "t.parquet"),
                        label="target", learners=["LR"], selection_folds=5, label_plan="pair")
    assert ("label_plan='pair' has no effect without --label-budget (or --target-labels): no labels are planned"
            in preflight(cfg).notes)
    assert not any("label_plan" in n for n in preflight(cfg.model_copy(update={"label_budget": 5})).notes)
    assert not any("label_plan" in n for n in preflight(cfg.model_copy(update={"label_plan": "candidates"})).notes)
    with pytest.raises(ValueError, match="candidates"):
        RetrainConfig(label_plan="pairs")
