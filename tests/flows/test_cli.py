"""flows.cli: ``shiftflow retrain``'s flags come from ``RetrainConfig.model_fields``; ``--config`` takes JSON or YAML;
the task-runner flags; the closing report and its UI command; the exit codes and one-line errors of ``main``
(2 refused, 1 a service down, a full disk or a bug with its traceback, 130 interrupted). No flow runs here
except in the slow tests."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from flows.cli import (
    _parser,
    config_from_args,
    hide_sql_passwords,
    main,
    report_lines,
    task_runner_from_args,
    ui_command,
)
from flows.config import BiasSpec, RetrainConfig
from flows.preflight import ConfigError


def _config(*args: str):
    return config_from_args(_parser().parse_args(["retrain", *args]))


def test_every_field_is_a_flag_with_its_description_and_default() -> None:
    sub = next(a for a in _parser()._actions if a.dest == "command").choices["retrain"]
    flags = {a.dest: a for a in sub._actions}
    assert set(RetrainConfig.model_fields) <= set(flags)
    for name, field in RetrainConfig.model_fields.items():
        assert flags[name].option_strings == ["--" + name.replace("_", "-")]
        assert flags[name].help.startswith(field.description.replace("%", "%%")[:40]), name
    assert "(default: DT,NB,LR,SVM,kNN,RF,HGB)" in flags["learners"].help
    assert "comma-separated from DT, NB, LR, SVM, kNN, RF, HGB, CSLR, CSLR-rbf" in flags["learners"].help
    assert "a value or one of balanced" in flags["undersample"].help


def test_flags_become_typed_fields() -> None:
    cfg = _config("--learners", "LR, RF", "--selectors", "rt,scv", "--selector", "rt", "--drop-columns", "bp,skin",
                  "--selection-rows", "none", "--undersample", "0.25", "--min-accuracy", "0.7", "--seed", "7",
                  "--simulate-bias", '{"mechanism": "rt_sort", "params": {"frac": 0.5}}', "--target", "none",
                  "--weighting", "discriminative", "--max-workers", "1")
    assert cfg.learners == ["LR", "RF"] and cfg.selectors == ["rt", "scv"] and cfg.selector == "rt"
    assert cfg.drop_columns == ["bp", "skin"] and cfg.selection_rows is None and cfg.undersample == 0.25
    assert cfg.min_accuracy == 0.7 and cfg.seed == 7 and cfg.target is None and cfg.max_workers == 1
    assert cfg.simulate_bias == BiasSpec(mechanism="rt_sort", params={"frac": 0.5})
    assert cfg.weighting == "discriminative"
    assert _config("--simulate-bias", "none").simulate_bias is None
    assert _config("--simulate-bias", "auto").simulate_bias == "auto"
    assert _config("--undersample", "balanced").undersample == "balanced"
    assert _config().model_dump() == RetrainConfig().model_dump()  # no flag: the model's defaults


def test_config_file_json_or_yaml_and_flags_win(tmp_path: Path) -> None:
    (tmp_path / "run.yaml").write_text("learners: [LR, NB]\nseed: 3\nselectors: [rt, scv]\nselector: rt\n"
                                       "simulate_bias: {mechanism: rt_sort, params: {}}\n")
    cfg = _config("--config", str(tmp_path / "run.yaml"), "--seed", "5")
    assert (cfg.learners, cfg.seed, cfg.selector) == (["LR", "NB"], 5, "rt")
    (tmp_path / "run.json").write_text('{"learners": ["DT"], "cv_folds": 3}')
    assert _config("--config", str(tmp_path / "run.json")).cv_folds == 3
    (tmp_path / "bad.yaml").write_text("learners: [LR\n")
    with pytest.raises(ConfigError, match=r"is not valid YAML .* at line \d+ column \d+"):
        _config("--config", str(tmp_path / "bad.yaml"))
    (tmp_path / "list.yml").write_text("- LR\n")
    with pytest.raises(ConfigError, match="must hold one mapping of RetrainConfig fields, not a list"):
        _config("--config", str(tmp_path / "list.yml"))
    # a list field written as the CLI takes it, one comma-separated string, reads as the flag does
    (tmp_path / "commas.yaml").write_text("learners: LR, NB\nselectors: scv\ndrop_columns: a,b\n")
    cfg = _config("--config", str(tmp_path / "commas.yaml"))
    assert (cfg.learners, cfg.selectors, cfg.drop_columns) == (["LR", "NB"], ["scv"], ["a", "b"])
    assert _config("--learners", "nb,knn,cslr-RBF").learners == ["NB", "kNN", "CSLR-rbf"]  # any case
    cased = _config("--selectors", "RT,scv", "--selector", "Rt")
    assert (cased.selectors, cased.selector) == (["rt", "scv"], "rt")


def test_sql_password_leaves_the_flow_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHIFTFLOW_SQL_PASSWORD", raising=False)
    src = "sql:postgresql+psycopg://alice:pw%40x@127.0.0.1:5432/shop::SELECT a::int FROM t"
    out = hide_sql_passwords({"source": src, "target": "sql:postgresql+psycopg://alice@127.0.0.1:5432/shop::b"})
    assert out["source"] == "sql:postgresql+psycopg://alice@127.0.0.1:5432/shop::SELECT a::int FROM t"
    assert os.environ["SHIFTFLOW_SQL_PASSWORD"] == "pw@x"  # decoded from the URL's percent-encoding
    with pytest.raises(ConfigError, match="different passwords"):
        hide_sql_passwords({"source": src, "target": "sql:postgresql+psycopg://bob:other@h/db::t"})
    # a ':' in the password (or a port that is not a number): one line, and no part of the password in it
    for bad in ("sql:postgresql+psycopg://alice:s3cr::et@127.0.0.1:5999/shop::t", "sql:postgresql+psycopg://a:s3cr@h:54x2/db::t"):
        with pytest.raises(ConfigError, match="the source's SQL URL cannot be read: its port is not a number") as err:
            hide_sql_passwords({"source": bad})
        assert "s3cr" not in str(err.value) and err.value.__cause__ is None


SUMMARY = {
    "selection": {"chosen": "LR+kmm", "selector": "scv"}, "weighting": "kmm",
    "champion": {"registered_model": "m", "version": "1", "decision": "unchanged", "new_version": False,
                 "reason": "no new version: v1 already holds this model"},
    "drift": {"drifted": True, "domain_auc": 0.71234, "domain_pvalue": 0.001, "drifted_features": ["npreg"]},
    "estimate": {"accuracy": 0.75, "ci_low": 0.7, "ci_high": 0.8, "method": "iwcv", "confidence": 0.95,
                 "alert": False},
    "run_dir": "/nowhere/run", "reused_stages": ["ingest"], "mlflow_parent_run_id": "abc",
    "mlflow_experiment_id": "1",
}


def test_closing_report_says_what_happened(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SHIFTFLOW_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    default = f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"
    text = "\n".join(report_lines(SUMMARY | {"tracking_uri": default}, bias="none"))
    assert "chosen model:      LR+kmm (selector scv, weighting kmm)" in text
    # an unweighted winner of a weighted run, and a run without weighting, are not called weighted
    nb = SUMMARY | {"selection": {"chosen": "NB", "selector": "scv"}, "tracking_uri": default}
    assert "chosen model:      NB (selector scv, unweighted; weighting kmm is for the +kmm candidates)" in "\n".join(report_lines(nb))
    assert "NB (selector scv, unweighted)" in "\n".join(report_lines(nb | {"weighting": "none"}))
    # the whole-table test says no drift while per-feature tests flag columns: the line says which says what
    calm = SUMMARY["drift"] | {"drifted": False, "domain_auc": 0.541, "domain_pvalue": 0.136, "drifted_features": ["f0"]}
    assert "drift:             no drift (domain AUC 0.541, p 0.136; yet the per-feature tests flag f0)" in \
        "\n".join(report_lines(SUMMARY | {"drift": calm, "tracking_uri": default}))
    assert "m v1 → unchanged, no new version" in text
    assert "drift:             drift (domain AUC 0.712, p 0.001; features npreg)" in text
    assert "estimated accuracy: 0.750 [0.700, 0.800] (iwcv, 95% interval)" in text
    assert "shift regime:" not in text  # a run without the regime (no drift stage) says nothing of it
    shifted = SUMMARY | {"tracking_uri": default, "estimate": SUMMARY["estimate"] | {
        "regime": "covariate", "regime_weighted_auc": 0.6512, "regime_pvalue": 0.0004}}
    assert ("shift regime:      covariate shift, re-weighting the classes does not explain the shift (the domain "
            "AUC with the source classes re-weighted by the EM prior 0.651, p 0.0004); reported only") in \
        "\n".join(report_lines(shifted))
    assert "parent run's artifacts" in text and not re.search(r"\x1b\[", text)
    assert "target labels:" not in text  # no labels, no fewlabel line
    labeled = SUMMARY["selection"] | {"selector": "fewlabel", "fewlabel": {"p_best": {"LR+kmm": 0.8149, "NB": 0.1851},
                                                                          "n_labels": 18}}
    text_l = "\n".join(report_lines(SUMMARY | {"selection": labeled, "tracking_uri": default}))
    assert ("target labels:     P(LR+kmm is the best) = 0.81 from 18 labels (fewlabel posterior; below 100 labels "
            "it is over-confident, see reports/label_budget_intervals.md)") in text_l
    cmd = text.split("open the MLflow UI: ")[1].strip()
    # a command that works without an activated venv: this interpreter's own console script, by path
    assert Path(cmd.split()[0]).is_absolute() and Path(cmd.split()[0]).exists() and cmd.endswith(" ui")
    assert ui_command("sqlite:////elsewhere/m.db").endswith("ui --tracking-uri sqlite:////elsewhere/m.db")
    assert ui_command("http://127.0.0.1:5000") == "open http://127.0.0.1:5000"
    # MLflow sets $MLFLOW_TRACKING_URI in this process once a run has a store: the command must still name a store
    # other than the one a bare `shiftflow ui` opens in the user's shell (helper-31's sweep: it did not)
    import mlflow

    before = mlflow.get_tracking_uri()
    try:
        mlflow.set_tracking_uri("sqlite:////elsewhere/other.db")
        assert ui_command("sqlite:////elsewhere/other.db").endswith("ui --tracking-uri sqlite:////elsewhere/other.db")
    finally:
        mlflow.set_tracking_uri(before)
    assert "a wide interval" not in text and "measured accuracy" not in text  # 0.1 wide; no held-out labels
    # the served model's held-out target accuracy when the target carried labels; an interval >= 0.5 wide is named
    wide = SUMMARY | {"tracking_uri": default, "target_scores": [{"learner": "NB", "target_accuracy": 0.5},
                                                                 {"learner": "LR+kmm", "target_accuracy": 0.6125}],
                      "estimate": SUMMARY["estimate"] | {"candidate": "LR+kmm", "ci_low": 0.25, "ci_high": 0.75}}
    text_w = "\n".join(report_lines(wide))
    assert "measured accuracy:  0.613 on the target's own labels" in text_w
    assert "a wide interval" not in text_w  # the measured accuracy says more than advice to label rows
    poor = {"overlap": "poor", "outside_share": 0.3}  # nor does the overlap line ask for labels (helper-32)
    assert "overlap:           POOR: 30% of the batch" in "\n".join(report_lines(wide | {"estimate": wide["estimate"] | poor}))
    assert "--label-budget" not in "\n".join(report_lines(wide | {"estimate": wide["estimate"] | poor}))
    assert "(--label-budget) to know" in "\n".join(report_lines(wide | {"target_scores": None,
                                                                       "estimate": wide["estimate"] | poor}))
    assert "measured accuracy" not in "\n".join(report_lines(wide | {"recalibration": {"metrics": {}}}))  # a refit
    assert "note:              a wide interval: the label-free estimators disagree" in "\n".join(
        report_lines(wide | {"target_scores": None}))
    # the advice asks for a budget the batch can hold (a 12-row batch refuses --label-budget 50)
    assert "(--label-budget 50)" in "\n".join(report_lines(wide | {"target_scores": None, "n_target": 400}))
    assert "(--label-budget 12)" in "\n".join(report_lines(wide | {"target_scores": None, "n_target": 12}))
    assert "predicts" not in text_w
    one = wide | {"classes": ["no", "yes"], "predicted_classes": {"LR+kmm": [0], "NB": [0, 1]}}
    assert "note:              LR+kmm predicts 'no' for every target row" in "\n".join(report_lines(one))
    assert "predicts" not in "\n".join(report_lines(one | {"predicted_classes": {"LR+kmm": [0, 1]}}))


# --------------------------------------------------------------------------------------------- main's exit codes


def test_debug_shows_the_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SHIFTFLOW_HOME", str(tmp_path / "home"))
    code = main(["retrain", "--source", f"file:{tmp_path / 'x.csv'}", "--label", "y", "--debug"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback (most recent call last)" in err
    assert err.strip().splitlines()[-1].startswith("shiftflow: error: file ")


def test_a_bug_keeps_its_traceback_and_says_so(tmp_path, monkeypatch, capsys):
    import flows.preflight

    def boom(config):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(flows.preflight, "preflight", boom)
    code = main(["retrain", "--run-root", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code == 1 and "ZeroDivisionError" in err and "Traceback" in err and "this is a bug" in err


def test_an_unreachable_service_is_one_line_not_a_bug(tmp_path, monkeypatch, capsys):
    import flows.preflight

    def down(config):
        raise ConnectionError("MLflow tracking server http://127.0.0.1:9 is unreachable")

    monkeypatch.setattr(flows.preflight, "preflight", down)
    code = main(["retrain", "--run-root", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code == 1
    assert err.strip().splitlines() == ["shiftflow: error: MLflow tracking server http://127.0.0.1:9 is unreachable"]


def test_an_unreachable_prefect_api_is_one_line_naming_the_setting(tmp_path, capsys):
    """Issue 29: ``PREFECT_API_URL`` left set after ``shiftflow down`` was a 111-line traceback called a bug."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: "http://127.0.0.1:9/api"}):  # port 9: nothing listens
        code = main(["retrain", "--learners", "NB", "--run-root", str(tmp_path / "runs"),
                     "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(lines) == 1, lines
    assert lines[0].startswith("shiftflow: error: Prefect API at http://127.0.0.1:9/api (PREFECT_API_URL) is "
                               "unreachable") and "`shiftflow up`" in lines[0]
    assert not (tmp_path / "runs").exists()  # nothing started


def test_a_full_disk_is_one_line_not_a_bug(tmp_path, monkeypatch, capsys):
    """Issue 31: a stage write that finds the disk full (``StageWriteError``) is the environment: one line, exit 1."""
    import errno

    import flows.preflight
    from tasks.store import StageWriteError

    def full(config):
        raise StageWriteError(errno.ENOSPC, "cannot write /x/ingest/source.parquet: No space left on device")

    monkeypatch.setattr(flows.preflight, "preflight", full)
    code = main(["retrain", "--run-root", str(tmp_path / "runs")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and lines == ["shiftflow: error: cannot write /x/ingest/source.parquet: No space left on device"]


def test_an_input_error_found_during_the_run_is_logged_without_its_traceback():
    """Prefect logs a failed task with ``exc_info``; the CLI's filter drops the traceback of a
    ``ShiftflowInputError`` (one sentence is the whole message) and keeps every other exception's."""
    import logging

    from flows.cli import _NoInputErrorTraceback
    from tasks.inputs import LabelsInputError

    def record(exc: BaseException) -> logging.LogRecord:
        try:
            raise exc
        except BaseException:  # noqa: BLE001 - capture exc_info as a logger would
            return logging.LogRecord("prefect.task_runs", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())

    refused, bug = record(LabelsInputError("no stored label plan")), record(RuntimeError("a bug"))
    assert _NoInputErrorTraceback(set()).filter(refused) and refused.exc_info is None
    assert logging.Formatter().format(refused) == "failed"
    assert _NoInputErrorTraceback(set()).filter(bug) and bug.exc_info is not None
    assert "Traceback" in logging.Formatter().format(bug)


def test_the_console_shows_a_refusal_found_during_the_run_once() -> None:
    """Prefect logged a refusal found during the run four times before the CLI's own line (the task's failure
    with the exception, its state, the flow's failure, its state; 1aedf8e's closing note). On the console the
    filter drops every Prefect record carrying the sentence; other records, and other loggers', pass."""
    import logging

    from flows.cli import _ErrorSentenceOnce
    from tasks.inputs import LabelsInputError

    text = "no stored label plan for this configuration (same source, target, learners, seed): run with 'x'"
    exc = LabelsInputError(text)

    def record(name: str, level: int, msg: str, exc_info: bool = False) -> logging.LogRecord:
        return logging.LogRecord(name, level, __file__, 1, msg, None, (type(exc), exc, None) if exc_info else None)

    once = _ErrorSentenceOnce(set())
    before = record("prefect.task_runs", logging.INFO, "labels: reading the filled file")
    assert once.filter(before)
    assert not once.filter(record("prefect.task_runs", logging.ERROR, f"Task run failed with exception: {exc!r}",
                                  exc_info=True))
    for name, msg in [("prefect.task_runs", f"Finished in state Failed({f'Task run encountered {text}'!r})"),
                      ("prefect.flow_runs", f"Encountered exception during execution: {exc!r}"),
                      ("prefect.flow_runs", f"Finished in state Failed({f'Flow run encountered {text}'!r})")]:
        assert not once.filter(record(name, logging.ERROR, msg))
    assert once.filter(record("prefect.flow_runs", logging.INFO, "Finished in state Completed()"))
    assert once.filter(record("shiftflow", logging.ERROR, f"error: {text}"))  # not Prefect's: kept
    # the API handler of the task's own logger strips the exception before the root's console handler sees the
    # record: the two filters share what they saw, so the console still drops it
    from flows.cli import _NoInputErrorTraceback

    seen: set[str] = set()
    api, console = _NoInputErrorTraceback(seen), _ErrorSentenceOnce(seen)
    first = record("prefect.task_runs", logging.ERROR, f"Task run failed with exception: {exc!r}", exc_info=True)
    assert api.filter(first) and first.exc_info is None and not console.filter(first)
    exc = LabelsInputError("bad file")  # a short sentence could be part of any message: its record is dropped (the
    short = _ErrorSentenceOnce(set())  # CLI prints it), but other records are not matched against it
    assert not short.filter(record("prefect.task_runs", logging.ERROR, "failed", exc_info=True))
    assert short.sentences == set() and short.filter(record("prefect.flow_runs", logging.ERROR, "bad file"))


# --------------------------------------------------------------------------------------------- task-runner flags
# (importing prefect_dask/distributed takes ~10 s on a loaded box, so even the cheap Dask checks are slow)


@pytest.mark.parametrize("args, message", [
    (["--task-runner", "thread", "--dask-workers", "2"], "--dask-workers only applies to --task-runner dask"),
    (["--task-runner", "thread", "--dask-address", "tcp://127.0.0.1:8786"], "--dask-address only applies"),
])
def test_cli_refuses_dask_flags_with_the_thread_runner(args: list[str], message: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["retrain", *args]) == 2
    assert message in capsys.readouterr().err


def test_cli_rejects_an_unknown_runner(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["retrain", "--task-runner", "ray"])
    assert exc.value.code == 2 and "invalid choice: 'ray'" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_builds_the_task_runner_from_its_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")  # no warning; nothing connects here
    parse = _parser().parse_args

    assert task_runner_from_args(parse(["retrain"])) is None  # the flow's own default
    desc, runner = task_runner_from_args(parse(["retrain", "--task-runner", "thread"]))
    assert desc == "thread pool" and type(runner).__name__ == "ThreadPoolTaskRunner"
    desc, runner = task_runner_from_args(parse(["retrain", "--task-runner", "dask", "--dask-workers", "3"]))
    assert type(runner).__name__ == "DaskTaskRunner" and "3 worker processes" in desc
    assert runner.cluster_kwargs["n_workers"] == 3 and runner.cluster_kwargs["threads_per_worker"] == 1
    desc, runner = task_runner_from_args(parse(["retrain", "--dask-address", "tcp://127.0.0.1:8786"]))
    assert type(runner).__name__ == "DaskTaskRunner" and runner.address == "tcp://127.0.0.1:8786"


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["--dask-address", "127.0.0.1:8786"], "needs a scheme"),
    (["--dask-address", "tcp://127.0.0.1:8786", "--dask-workers", "2"], "drop n_workers or drop address"),
    (["--dask-workers", "0"], "n_workers must be at least 1"),
])
def test_cli_refuses_bad_dask_flags(args: list[str], message: str, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    assert main(["retrain", *args]) == 2
    assert message in capsys.readouterr().err


# --------------------------------------------------------------------------------------------- a stopped run


@pytest.mark.slow  # a CLI run in a subprocess up to its training stage: ~20-40 s
@pytest.mark.parametrize("how", ["SIGTERM to the run", "SIGHUP to the run", "SIGINT to its process group"])
def test_a_stopped_run_stops_its_temporary_api_and_says_so(how: str, tmp_path: Path) -> None:
    """``kill`` (SIGTERM), a closed terminal (SIGHUP) or Ctrl-C (SIGINT to the terminal's process group) during a
    run: the run ends as interrupted (exit 130) and the temporary Prefect API it started is gone. Before, SIGTERM
    killed the run on the spot and left the API's uvicorn process running; a group signal killed the API first
    and the run spent minutes retrying it before reporting an internal error."""
    import signal
    import subprocess
    import sys
    import time

    from flows.stack.http import healthy

    env = dict(os.environ, SHIFTFLOW_HOME=str(tmp_path / "home"))
    env.pop("PREFECT_API_URL", None)
    proc = subprocess.Popen([sys.executable, "-m", "flows.cli", "retrain", "--learners", "LR,DT,RF,HGB,SVM"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    lines, url = [], None
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if m := re.search(r"temporary local API at (\S+) ", line):
            url = m.group(1)
            break
    assert url is not None and healthy(f"{url}/health"), "".join(lines)
    time.sleep(3)  # into the stages
    if how.endswith("to the run"):  # kill, a scheduler's timeout; a closed terminal or ssh session
        proc.send_signal(getattr(signal, how.split()[0]))
    else:
        os.killpg(proc.pid, signal.SIGINT)
    rest, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, "".join(lines) + rest
    assert "shiftflow: interrupted" in rest and "internal error" not in rest
    assert not healthy(f"{url}/health")  # the API was stopped with the run


def test_a_run_that_stops_for_labels_says_what_to_fill_or_that_nothing_can_be_labeled() -> None:
    from flows.cli import labels_request_lines

    base = {"status": "awaiting_labels", "csv": "/r/labels/to_label.csv", "n_rows": 12, "n_prefilled": 0,
            "budget": 50, "n_planned": 12, "n_disagreement": 12}
    pair = base | {"pair": "LR", "learners": ["LR", "champion v3"]}
    assert labels_request_lines(pair) == [
        "shiftflow: 12 target rows to label in /r/labels/to_label.csv",
        "  fewer than the budget of 50: LR and the champion (label_plan pair) disagree on only 12 rows, and a label "
        "where they agree cannot change their order",
        "  fill the empty label column, then rerun with: --target-labels file:/r/labels/to_label.csv"]
    # a first version's pair: the majority-class rule stands in for the champion (tasks.served.served_rule)
    rule = pair | {"learners": ["LR", "majority-class rule"]}
    assert "LR and the majority-class rule (label_plan pair) disagree on only 12 rows" in labels_request_lines(rule)[1]
    # beside a champion the rule is a third contender (shiftlib.decisions.RULE_CONTENDER)
    three = pair | {"learners": ["LR", "champion v3", "majority-class rule"]}
    assert ("LR, the champion and the majority-class rule (label_plan pair) disagree on only 12 rows"
            in labels_request_lines(three)[1])
    # a pair that agrees on every row: no file to fill, and no resume line pointing at an empty one
    assert labels_request_lines(pair | {"n_rows": 0, "n_planned": 0, "n_disagreement": 0}) == [
        "shiftflow: nothing to label: LR and the champion (label_plan pair) predict the same class on every target "
        "row, so no label can tell them apart"]
    full = base | {"n_rows": 20, "n_planned": 50, "n_prefilled": 30}
    assert labels_request_lines(full) == [
        "shiftflow: 20 target rows to label in /r/labels/to_label.csv (30 labeled before are filled in)",
        "  fill the empty label column, then rerun with: --target-labels file:/r/labels/to_label.csv"]
