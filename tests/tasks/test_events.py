"""tasks.events: the decision events reach Prefect's API and are read back from it."""

from __future__ import annotations

import time

import pytest

from tasks.events import EVENTS, emit, model_resource


def test_unknown_event_is_refused():
    with pytest.raises(ValueError, match="unknown event"):
        emit("shiftflow.champion.maybe", "m", {})


def test_outside_a_flow_run_nothing_is_sent():
    assert emit("shiftflow.champion.kept", "m", {"p_better": 0.5}) is False


@pytest.mark.slow  # the session's Prefect API (prefect_harness) takes about 30 s to start: no default test starts it
def test_events_are_read_back_from_prefects_api(events_to_the_harness):  # noqa: ARG001
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter

    @flow
    def decide() -> list[bool]:
        return [emit(e, "events-model", {"version": "2", "champion_version": "1", "p_better": float("nan")})
                for e in EVENTS]

    assert decide() == [True] * len(EVENTS)
    flt = EventFilter(event=EventNameFilter(prefix=["shiftflow."]),
                      resource=EventResourceFilter(id=[model_resource("events-model")["prefect.resource.id"]]))
    with get_client(sync_client=True) as client:
        for _ in range(60):  # events are written asynchronously by the server
            seen = client.read_events(filter=flt, limit=50).events
            if len(seen) >= len(EVENTS):
                break
            time.sleep(0.5)
    assert sorted(e.event for e in seen) == sorted(EVENTS)
    e = next(e for e in seen if e.event == "shiftflow.champion.undecided")
    assert e.payload == {"model_name": "events-model", "version": "2", "champion_version": "1", "p_better": None}
    assert e.resource["prefect.resource.name"] == "events-model"
    assert e.resource["shiftflow.deployment"] == ""  # not a deployment run


def test_the_prefect_yaml_automation_reacts_to_a_shiftflow_event_of_retrain_nightly_only():
    from pathlib import Path

    import yaml
    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger

    from flows.config import RetrainConfig
    from shiftlib.decisions import UNDECIDED_LABEL_PLAN

    spec = yaml.safe_load((Path(__file__).parents[2] / "prefect.yaml").read_text())
    deps = {d["name"]: d for d in spec["deployments"]}
    alert, undecided = [DeploymentEventTrigger(**t) for t in deps["retrain-labels"]["triggers"]]
    # the accuracy alert: labels over every candidate choose the model; an undecided gate: labels for its pair
    assert alert.expect == {"shiftflow.alert.accuracy"} and undecided.expect == {"shiftflow.champion.undecided"}
    assert "label_plan" not in alert.parameters["config"]  # RetrainConfig's default: every candidate
    assert RetrainConfig().label_plan == "candidates"
    assert undecided.parameters["config"]["label_plan"] == UNDECIDED_LABEL_PLAN == "pair"
    for trigger in (alert, undecided):
        RetrainConfig(**trigger.parameters["config"])  # valid parameters
        assert set(trigger.expect) <= set(EVENTS)
        # both decide for one registered model: the labels run compares with the champion retrain-nightly serves
        assert (trigger.parameters["config"]["model_name"]
                == deps["retrain-nightly"]["parameters"]["config"]["model_name"])
        # its own runs are not retrain-nightly's: their alerts never start it again
        assert trigger.match.root == {"shiftflow.deployment": "retrain-nightly"}
        assert trigger.parameters["config"]["label_budget"] == 50
        assert (deps["retrain-nightly"]["parameters"]["config"]["min_accuracy"]
                == trigger.parameters["config"]["min_accuracy"])
    # the same retrain otherwise (one YAML anchor)
    assert {k: v for k, v in undecided.parameters["config"].items() if k != "label_plan"} == alert.parameters["config"]


def test_the_prefect_yaml_automation_retrains_when_score_batch_alerts_on_the_model_it_scores():
    from pathlib import Path

    import yaml
    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger

    from flows.config import ScoreConfig

    spec = yaml.safe_load((Path(__file__).parents[2] / "prefect.yaml").read_text())
    deps = {d["name"]: d for d in spec["deployments"]}
    scoring = ScoreConfig(**deps["score-batch"]["parameters"]["config"])  # the deployment's parameters are valid
    assert deps["score-batch"]["entrypoint"] == "flows/score.py:score_batch"
    (trigger,) = [DeploymentEventTrigger(**t) for t in deps["retrain-nightly"]["triggers"]]
    assert trigger.expect == {"shiftflow.alert.accuracy"}
    # only score-batch's alerts, and only on the model retrain-nightly registers: its own alerts go to retrain-labels
    assert trigger.match.root == {"shiftflow.deployment": "score-batch",
                                  "prefect.resource.id": model_resource(scoring.model)["prefect.resource.id"]}
    assert scoring.model == deps["retrain-nightly"]["parameters"]["config"]["model_name"]
    assert trigger.parameters is None  # retrain-nightly's own parameters
