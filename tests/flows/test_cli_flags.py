"""``shiftflow retrain``'s flags come from ``RetrainConfig.model_fields``; ``--config`` takes JSON or YAML; the
closing report and its UI command. No flow runs here (fast)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import get_args

import pytest

from flows.cli import _parser, config_from_args, hide_sql_passwords, report_lines, ui_command
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


def test_choices_are_the_registries() -> None:
    from shiftlib.learners import LEARNERS
    from shiftlib.selection import SELECTORS
    from shiftlib.weights import TARGET_WEIGHTERS

    f = RetrainConfig.model_fields
    assert list(get_args(get_args(f["learners"].annotation)[0])) == list(LEARNERS)
    assert set(get_args(get_args(f["selectors"].annotation)[0])) == set(SELECTORS)
    assert set(get_args(f["selector"].annotation)) == set(SELECTORS)
    # the weighting methods a run can train with: every weighter that needs only the rows (not the evaluation-only
    # oracle), plus none/auto; the config spells them (it must not import scikit-learn), this test keeps them in step
    assert get_args(f["weighting"].annotation) == ("none", *TARGET_WEIGHTERS, "auto")
    assert "oracle" not in TARGET_WEIGHTERS


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


def test_a_seed_numpy_cannot_take_is_refused_at_the_door() -> None:
    # numpy's generators take 0 … 2**32 - 1; -1 and 10**29 passed the door and failed mid-run as internal errors
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="seed\n  Input should be greater than or equal to 0"):
        RetrainConfig(seed=-1)
    with pytest.raises(ValidationError, match="seed\n  Input should be less than or equal to 4294967295"):
        RetrainConfig(seed=10**29)
    assert RetrainConfig(seed=2**32 - 1).seed == 4294967295


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
    assert "a wide interval" not in text and "measured accuracy" not in text  # 0.1 wide; no held-out labels
    # the served model's held-out target accuracy when the target carried labels; an interval >= 0.5 wide is named
    wide = SUMMARY | {"tracking_uri": default, "target_scores": [{"learner": "NB", "target_accuracy": 0.5},
                                                                 {"learner": "LR+kmm", "target_accuracy": 0.6125}],
                      "estimate": SUMMARY["estimate"] | {"candidate": "LR+kmm", "ci_low": 0.25, "ci_high": 0.75}}
    text_w = "\n".join(report_lines(wide))
    assert "measured accuracy:  0.613 on the target's own labels" in text_w
    assert "a wide interval" not in text_w  # the measured accuracy says more than advice to label rows
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


def test_the_temporary_api_is_started_early_only_without_a_server(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    import flows.stack.temporary as temporary
    import tasks.tracking
    from flows.api import early_api

    launched: list[bool] = []
    checked: list[str] = []
    monkeypatch.setattr(temporary, "start_temporary_api", lambda: launched.append(True) or "api")
    monkeypatch.setattr(tasks.tracking, "check_prefect_reachable", checked.append)  # it answers
    with temporary_settings({PREFECT_API_URL: "http://127.0.0.1:9/api"}):
        assert early_api() is None and launched == []  # a server is named: nothing to start
    assert checked == ["http://127.0.0.1:9/api"]  # but it is asked whether it answers
    with temporary_settings({PREFECT_API_URL: ""}):
        assert early_api() == "api" and launched == [True]


@pytest.mark.slow  # the real API subprocess: ~20 s, most of it Prefect's server start
def test_the_early_api_serves_prefect_and_stops(tmp_path: Path) -> None:
    # the real subprocess, as the CLI launches it: it answers Prefect's /health and a client call, then stops
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.stack.temporary import start_temporary_api

    api = start_temporary_api(dict(os.environ, PREFECT_HOME=str(tmp_path / "prefect")))
    assert api is not None
    try:
        assert api.wait(180), "the temporary API did not answer /health"
        with temporary_settings({PREFECT_API_URL: api.url}), get_client(sync_client=True) as client:
            assert client.api_healthcheck() is None  # None: healthy
    finally:
        api.stop()
    assert api.process.poll() is not None


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


@pytest.mark.slow  # boots the temporary API in a child process: ~10-20 s
def test_the_temporary_api_exits_when_its_run_is_killed_outright(tmp_path: Path) -> None:
    """The API runs in its own session, so a SIGKILL to the run's process group does not reach it; it exits by
    itself when the process that started it is gone (tests/flows/test_faults.py's SIGKILL left one running)."""
    import signal
    import subprocess
    import sys
    import textwrap
    import time

    from flows.stack.http import healthy

    env = dict(os.environ, PREFECT_HOME=str(tmp_path / "prefect"))
    run = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import time
        from flows.stack.temporary import start_temporary_api
        api = start_temporary_api()
        assert api is not None and api.wait(180)
        print(api.url, api.process.pid, flush=True)
        time.sleep(600)
    """)], env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert run.stdout is not None
    url, pid = run.stdout.readline().split()
    assert healthy(f"{url}/health")
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    deadline = time.monotonic() + 15
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not Path(f"/proc/{pid}").exists(), "the API outlived the killed run"
